//! The consumer protocol's subscription and assignment bytes: decoding
//! assignments so operators see topic-partitions instead of opaque bytes,
//! and encoding both for kcoord's own tools and tests, which play consumers.
//! (The coordinator itself never interprets assignments.)

use bytes::{Buf, BufMut, Bytes, BytesMut};

fn put_string(b: &mut BytesMut, s: &str) {
    b.put_i16(i16::try_from(s.len()).unwrap_or(i16::MAX));
    b.put_slice(&s.as_bytes()[..s.len().min(i16::MAX as usize)]);
}

/// A ConsumerProtocolSubscription v0 of `topics`, without user data.
pub fn encode_subscription(topics: &[&str]) -> Bytes {
    let mut b = BytesMut::new();
    b.put_i16(0);
    b.put_i32(topics.len() as i32);
    for t in topics {
        put_string(&mut b, t);
    }
    b.put_i32(-1);
    b.freeze()
}

/// A ConsumerProtocolAssignment v0 of `partitions` of each topic, without
/// user data.
pub fn encode_assignment(topics: &[(&str, &[i32])]) -> Bytes {
    let mut b = BytesMut::new();
    b.put_i16(0);
    b.put_i32(topics.len() as i32);
    for (t, partitions) in topics {
        put_string(&mut b, t);
        b.put_i32(partitions.len() as i32);
        for p in *partitions {
            b.put_i32(*p);
        }
    }
    b.put_i32(-1);
    b.freeze()
}

/// Topic-partitions of a ConsumerProtocolAssignment (any version: int16
/// version, then `[topic: string, partitions: [int32]]`; user data
/// ignored). None if the bytes are not in that format.
pub fn assignment_partitions(mut b: &[u8]) -> Option<Vec<(String, Vec<i32>)>> {
    if b.remaining() < 6 {
        return None;
    }
    let _version = b.get_i16();
    let topics = b.get_i32();
    if topics < 0 || topics as usize > b.remaining() {
        return None;
    }
    let mut out = Vec::with_capacity(topics as usize);
    for _ in 0..topics {
        if b.remaining() < 2 {
            return None;
        }
        let len = b.get_i16();
        if len < 0 || len as usize > b.remaining() {
            return None;
        }
        let (name, rest) = b.split_at(len as usize);
        let name = std::str::from_utf8(name).ok()?.to_string();
        b = rest;
        if b.remaining() < 4 {
            return None;
        }
        let n = b.get_i32();
        if n < 0 || (n as usize).saturating_mul(4) > b.remaining() {
            return None;
        }
        let parts = (0..n).map(|_| b.get_i32()).collect();
        out.push((name, parts));
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encoded_assignments_decode_to_the_same_partitions() {
        let a = encode_assignment(&[("orders", &[0, 2]), ("t", &[])]);
        let want = vec![("orders".to_string(), vec![0, 2]), ("t".to_string(), vec![])];
        assert_eq!(assignment_partitions(&a), Some(want));
        assert_eq!(&encode_subscription(&["ab"])[..], b"\x00\x00\x00\x00\x00\x01\x00\x02ab\xff\xff\xff\xff");
    }

    #[test]
    fn decodes_topic_partitions_and_rejects_garbage() {
        let mut b = bytes::BytesMut::new();
        b.put_i16(1);
        b.put_i32(1);
        b.put_i16(2);
        b.put_slice(b"t6");
        b.put_i32(2);
        b.put_i32(0);
        b.put_i32(3);
        b.put_i32(-1);
        assert_eq!(assignment_partitions(&b), Some(vec![("t6".to_string(), vec![0, 3])]));
        assert_eq!(assignment_partitions(&[]), None);
        assert_eq!(assignment_partitions(&[0, 0, 0x7f, 0xff, 0xff, 0xff]), None);
    }
}
