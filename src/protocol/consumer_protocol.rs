//! Kafka's `ConsumerProtocol`: the subscription and assignment bytes that
//! classic consumers put in JoinGroup and SyncGroup. The one codec for them:
//! the classic group reads the topics its members subscribe to (OffsetDelete
//! and offset expiry depend on it), a consumer group with classic members
//! (online migration) reads what they subscribe to and own and hands them
//! their assignment, and observability, the admin CLI and the tests decode
//! or encode them.
//!
//! Subscription: v0 topics, user data; v1 + owned partitions; v2 +
//! generation; v3 + rack. Assignment: the same layout at every version
//! (topic-partitions, user data). All non-flexible: int16 strings, int32
//! arrays, int32-length bytes (−1 null).

use bytes::{Buf, BufMut, Bytes, BytesMut};

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

    fn topics(&mut self) -> Result<Vec<String>, Malformed> {
        let n = self.len(2)?;
        let mut topics = Vec::with_capacity(n);
        for _ in 0..n {
            topics.push(self.string()?);
        }
        Ok(topics)
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
    let topics = r.topics()?;
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
        put_string(&mut b, topic);
        b.put_i32(parts.len() as i32);
        for p in parts {
            b.put_i32(*p);
        }
    }
    b.put_i32(-1);
    b.freeze()
}

/// The topics a classic group's member subscribes to, as Kafka's
/// `ClassicGroup.computeSubscribedTopics` reads them: the version, then the
/// v0 fields (topics and user data), which every later version starts with.
/// A message too short for them is malformed, and Kafka then treats the
/// whole group as subscribed to every topic.
pub fn subscribed_topics(bytes: &[u8]) -> Result<Vec<String>, Malformed> {
    let mut r = Reader(bytes);
    if r.i16()? < 0 {
        return Err(Malformed);
    }
    let topics = r.topics()?;
    r.skip_bytes()?;
    Ok(topics)
}

/// A ConsumerProtocolSubscription v0 of `topics`, without user data (for
/// kcoord's own tools and tests, which play consumers).
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

/// An int16-length string, cut to what the length can say.
fn put_string(b: &mut BytesMut, s: &str) {
    let bytes = s.as_bytes().get(..s.len().min(i16::MAX as usize)).unwrap_or_default();
    b.put_i16(bytes.len() as i16);
    b.put_slice(bytes);
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let bytes = encode_subscription(&["a", "b"]);
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

    #[test]
    fn a_subscription_cut_short_in_its_user_data_names_no_topics() {
        // Kafka parses the user data too: a message that ends inside it is
        // malformed, and the group then counts as subscribed to everything.
        let whole = encode_subscription(&["ab"]);
        assert_eq!(subscribed_topics(&whole), Ok(vec!["ab".to_string()]));
        let mut with_data = BytesMut::from(&whole[..whole.len() - 4]);
        with_data.put_i32(3);
        with_data.put_slice(b"xyz");
        assert_eq!(subscribed_topics(&with_data), Ok(vec!["ab".to_string()]));
        for n in 0..with_data.len() {
            assert_eq!(subscribed_topics(&with_data[..n]), Err(Malformed), "prefix of {n} bytes");
        }
        assert_eq!(subscribed_topics(&[0, 0, 0x7f, 0xff, 0xff, 0xff]), Err(Malformed));
    }

    #[test]
    fn encoded_subscriptions_have_kafkas_v0_layout() {
        assert_eq!(&encode_subscription(&["ab"])[..], b"\x00\x00\x00\x00\x00\x01\x00\x02ab\xff\xff\xff\xff");
    }
}
