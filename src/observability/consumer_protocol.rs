//! Decoding the consumer protocol's assignment bytes, so operators see
//! topic-partitions instead of opaque bytes. (The coordinator itself never
//! interprets assignments.)

use bytes::Buf;

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
    use bytes::BufMut;

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
