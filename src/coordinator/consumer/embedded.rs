//! Kafka's `ConsumerProtocol`: the subscription and assignment bytes that
//! classic members embed in JoinGroup and SyncGroup. A consumer group with
//! classic members (online migration) must read what they subscribe to and
//! own, and hand them their assignment in the same form.
//!
//! Subscription: v0 topics, user data; v1 + owned partitions; v2 +
//! generation; v3 + rack. Assignment: the same layout at every version
//! (topic-partitions, user data). All non-flexible: int16 strings, int32
//! arrays, int32-length bytes (−1 null).

use bytes::{Buf, BufMut, Bytes, BytesMut};

use super::records::Assignment;
use super::target::TopicImage;

/// The highest ConsumerProtocol version Kafka writes.
const HIGHEST_VERSION: i16 = 3;

/// What a classic member sends in its protocol metadata.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Subscription {
    pub topics: Vec<String>,
    /// Partitions the member owns (v1+; empty before).
    pub owned: Vec<(String, Vec<i32>)>,
    pub rack_id: Option<String>,
}

/// The bytes are not a ConsumerProtocol message (Kafka's `SchemaException`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Malformed;

struct Reader<'a>(&'a [u8]);

impl Reader<'_> {
    fn i16(&mut self) -> Result<i16, Malformed> {
        if self.0.remaining() < 2 {
            return Err(Malformed);
        }
        Ok(self.0.get_i16())
    }

    fn i32(&mut self) -> Result<i32, Malformed> {
        if self.0.remaining() < 4 {
            return Err(Malformed);
        }
        Ok(self.0.get_i32())
    }

    fn take(&mut self, n: usize) -> Result<&[u8], Malformed> {
        if self.0.len() < n {
            return Err(Malformed);
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(head)
    }

    fn nullable_string(&mut self) -> Result<Option<String>, Malformed> {
        let len = self.i16()?;
        if len < 0 {
            return Ok(None);
        }
        let raw = self.take(len as usize)?;
        std::str::from_utf8(raw).map(|s| Some(s.to_string())).map_err(|_| Malformed)
    }

    fn string(&mut self) -> Result<String, Malformed> {
        self.nullable_string()?.ok_or(Malformed)
    }

    /// An array length, bounded by the bytes left (each element takes at
    /// least `min` bytes), so hostile lengths allocate nothing.
    fn len(&mut self, min: usize) -> Result<usize, Malformed> {
        let n = self.i32()?;
        if n < 0 || (n as usize).saturating_mul(min) > self.0.len() {
            return Err(Malformed);
        }
        Ok(n as usize)
    }

    fn skip_bytes(&mut self) -> Result<(), Malformed> {
        let n = self.i32()?;
        if n >= 0 {
            self.take(n as usize)?;
        }
        Ok(())
    }

    fn topic_partitions(&mut self) -> Result<Vec<(String, Vec<i32>)>, Malformed> {
        let n = self.len(6)?;
        let mut out = Vec::with_capacity(n);
        for _ in 0..n {
            let topic = self.string()?;
            let m = self.len(4)?;
            let mut parts = Vec::with_capacity(m);
            for _ in 0..m {
                parts.push(self.i32()?);
            }
            out.push((topic, parts));
        }
        Ok(out)
    }
}

/// The version a ConsumerProtocol message starts with.
pub fn version(bytes: &[u8]) -> Result<i16, Malformed> {
    let v = Reader(bytes).i16()?;
    if v < 0 {
        return Err(Malformed);
    }
    Ok(v)
}

/// Kafka's `deserializeConsumerProtocolSubscription`: fields of versions
/// above the message's are absent; later versions' extra fields ignored.
pub fn parse_subscription(bytes: &[u8]) -> Result<Subscription, Malformed> {
    let mut r = Reader(bytes);
    let v = r.i16()?;
    if v < 0 {
        return Err(Malformed);
    }
    let n = r.len(2)?;
    let mut topics = Vec::with_capacity(n);
    for _ in 0..n {
        topics.push(r.string()?);
    }
    r.skip_bytes()?;
    let mut sub = Subscription { topics, ..Default::default() };
    if v >= 1 {
        sub.owned = r.topic_partitions()?;
    }
    if v >= 2 {
        r.i32()?;
    }
    if v >= 3 {
        sub.rack_id = r.nullable_string()?;
    }
    Ok(sub)
}

/// Kafka's `deserializeConsumerProtocolAssignment` (topic-partitions only).
pub fn parse_assignment(bytes: &[u8]) -> Result<Vec<(String, Vec<i32>)>, Malformed> {
    let mut r = Reader(bytes);
    if r.i16()? < 0 {
        return Err(Malformed);
    }
    r.topic_partitions()
}

/// Kafka's `serializeAssignment` at `version` (clamped to what Kafka
/// writes), without user data.
pub fn encode_assignment(partitions: &[(String, Vec<i32>)], version: i16) -> Bytes {
    let mut b = BytesMut::new();
    b.put_i16(version.clamp(0, HIGHEST_VERSION));
    b.put_i32(partitions.len() as i32);
    for (topic, parts) in partitions {
        let name = &topic.as_bytes()[..topic.len().min(i16::MAX as usize)];
        b.put_i16(name.len() as i16);
        b.put_slice(name);
        b.put_i32(parts.len() as i32);
        for p in parts {
            b.put_i32(*p);
        }
    }
    b.put_i32(-1);
    b.freeze()
}

/// Topic names to ids (Kafka's `toTopicPartitionMap`): topics the image
/// does not know are dropped.
pub fn to_assignment(partitions: &[(String, Vec<i32>)], image: &TopicImage) -> Assignment {
    let mut out = Assignment::new();
    for (topic, parts) in partitions {
        if let Some((id, _)) = image.get(topic) {
            out.entry(id).or_default().extend(parts.iter().copied());
        }
    }
    out.retain(|_, ps| !ps.is_empty());
    out
}

/// Topic ids to names (Kafka's `toConsumerProtocolAssignment`): topics the
/// image does not know are dropped.
pub fn to_named(assignment: &Assignment, image: &TopicImage) -> Vec<(String, Vec<i32>)> {
    let mut out: Vec<(String, Vec<i32>)> = assignment
        .iter()
        .filter_map(|(id, ps)| image.name_of(id).map(|n| (n.to_string(), ps.iter().copied().collect())))
        .collect();
    out.sort();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn put_string(b: &mut BytesMut, s: &str) {
        b.put_i16(s.len() as i16);
        b.put_slice(s.as_bytes());
    }

    #[test]
    fn a_v3_subscription_yields_topics_owned_partitions_and_rack() {
        let mut b = BytesMut::new();
        b.put_i16(3);
        b.put_i32(1);
        put_string(&mut b, "foo");
        b.put_i32(2);
        b.put_slice(b"ud");
        b.put_i32(1);
        put_string(&mut b, "foo");
        b.put_i32(2);
        b.put_i32(0);
        b.put_i32(3);
        b.put_i32(7);
        put_string(&mut b, "r1");
        let s = parse_subscription(&b).unwrap();
        assert_eq!(s.topics, vec!["foo".to_string()]);
        assert_eq!(s.owned, vec![("foo".to_string(), vec![0, 3])]);
        assert_eq!(s.rack_id.as_deref(), Some("r1"));
        for n in 0..b.len() {
            assert!(parse_subscription(&b[..n]).is_err(), "prefix of {n} bytes");
        }
    }

    #[test]
    fn a_v0_subscription_owns_nothing() {
        let bytes = crate::observability::consumer_protocol::encode_subscription(&["a", "b"]);
        let s = parse_subscription(&bytes).unwrap();
        assert_eq!(s.topics, vec!["a".to_string(), "b".to_string()]);
        assert!(s.owned.is_empty() && s.rack_id.is_none());
    }

    #[test]
    fn assignments_round_trip_at_the_members_version() {
        let parts = vec![("foo".to_string(), vec![1, 2]), ("bar".to_string(), vec![])];
        let bytes = encode_assignment(&parts, 1);
        assert_eq!(version(&bytes), Ok(1));
        assert_eq!(parse_assignment(&bytes).unwrap(), parts);
        assert_eq!(version(&encode_assignment(&parts, 9)), Ok(3));
        assert!(parse_assignment(&[0, 0, 0x7f, 0xff, 0xff, 0xff]).is_err());
    }
}
