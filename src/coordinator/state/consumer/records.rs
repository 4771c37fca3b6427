//! The KIP-848 consumer-group records, in Kafka's own schemas
//! (`group-coordinator/src/main/resources/common/message/ConsumerGroup*.json`).
//!
//! | key version | record | key fields |
//! |---|---|---|
//! | 3 | ConsumerGroupMetadata | group |
//! | 4 | ConsumerGroupPartitionMetadata | group |
//! | 5 | ConsumerGroupMemberMetadata | group, member |
//! | 6 | ConsumerGroupTargetAssignmentMetadata | group |
//! | 7 | ConsumerGroupTargetAssignmentMember | group, member |
//! | 8 | ConsumerGroupCurrentMemberAssignment | group, member |
//! | 16 | ConsumerGroupRegularExpression | group, regular expression |
//!
//! Keys are not flexible (int16-length strings); every value is version 0
//! and flexible (compact strings and arrays, tagged fields).
//!
//! What is written follows Kafka 4.1 and later (KIP-1101): the group's topic
//! metadata is summarised by `MetadataHash`, a tagged field (tag 0) of
//! ConsumerGroupMetadataValue, and ConsumerGroupPartitionMetadata is no
//! longer written. It is still read (and replayed, so a log holding one
//! stays readable), and encodable so that it round-trips. kcoord's hash is
//! its own stable function (see `consumer::group::metadata_hash`), compared
//! only with hashes kcoord wrote; it is not bit-identical to Kafka's.

use std::collections::{BTreeMap, BTreeSet};

use bytes::{BufMut, Bytes, BytesMut};
use uuid::Uuid;

use crate::coordinator::records::{put_string, Reader, RecordError};

/// Partitions by topic id: what a member owns, must revoke, or is targeted
/// to get. Sorted, so that records and answers are deterministic.
pub type Assignment = BTreeMap<Uuid, BTreeSet<i32>>;

/// ConsumerGroupMetadataValue: the group epoch, and (Kafka 4.1+) the hash
/// of the subscribed topics' metadata.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupMetadataValue {
    pub epoch: i32,
    /// 0 when unset (the field's default, so it is then not written).
    pub metadata_hash: i64,
}

/// One topic of a ConsumerGroupPartitionMetadataValue (read for logs
/// written before Kafka 4.1; kcoord does not write it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicMetadataValue {
    pub topic_id: Uuid,
    pub topic_name: String,
    pub num_partitions: i32,
    /// Partition → racks; deprecated in Kafka and empty when unknown.
    pub partition_racks: Vec<(i32, Vec<String>)>,
}

/// ConsumerGroupPartitionMetadataValue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionMetadataValue {
    pub topics: Vec<TopicMetadataValue>,
}

/// The classic-protocol part of a member (tagged field 0), set only for
/// members that joined a consumer group through JoinGroup (migration).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClassicMemberMetadata {
    pub session_timeout_ms: i32,
    pub supported_protocols: Vec<(String, Bytes)>,
}

/// ConsumerGroupMemberMetadataValue: who the member is and what it wants.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct MemberMetadataValue {
    pub instance_id: Option<String>,
    pub rack_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub subscribed_topic_names: Vec<String>,
    pub subscribed_topic_regex: Option<String>,
    pub rebalance_timeout_ms: i32,
    pub server_assignor: Option<String>,
    pub classic_member_metadata: Option<ClassicMemberMetadata>,
}

/// ConsumerGroupTargetAssignmentMetadataValue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TargetAssignmentMetadataValue {
    pub assignment_epoch: i32,
}

/// ConsumerGroupTargetAssignmentMemberValue.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TargetAssignmentMemberValue {
    pub partitions: Assignment,
}

/// ConsumerGroupCurrentMemberAssignmentValue: where the member is in its
/// reconciliation.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CurrentAssignmentValue {
    pub member_epoch: i32,
    pub previous_member_epoch: i32,
    /// Kafka's MemberState value: 0 STABLE, 1 UNREVOKED_PARTITIONS,
    /// 2 UNRELEASED_PARTITIONS (−1 UNKNOWN).
    pub state: i8,
    pub assigned: Assignment,
    pub pending_revocation: Assignment,
}

/// ConsumerGroupRegularExpressionValue (Kafka 4.0+): the topics a
/// subscription pattern of the group resolved to, the version of the topic
/// image it was resolved against, and when.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RegularExpressionValue {
    /// Sorted, so that records are deterministic.
    pub topics: Vec<String>,
    pub version: i64,
    pub timestamp: i64,
}

// ---------------------------------------------------------------------------
// Flexible (compact) encoding

fn put_uvarint(b: &mut BytesMut, mut v: u32) {
    while v >= 0x80 {
        b.put_u8((v as u8 & 0x7f) | 0x80);
        v >>= 7;
    }
    b.put_u8(v as u8);
}

fn put_len(b: &mut BytesMut, n: usize) -> Result<(), RecordError> {
    let n = u32::try_from(n).ok().and_then(|n| n.checked_add(1)).ok_or(RecordError::Invalid)?;
    put_uvarint(b, n);
    Ok(())
}

fn put_compact_string(b: &mut BytesMut, s: &str) -> Result<(), RecordError> {
    if s.len() > i16::MAX as usize {
        return Err(RecordError::StringTooLong(s.len()));
    }
    put_len(b, s.len())?;
    b.put_slice(s.as_bytes());
    Ok(())
}

fn put_compact_nullable_string(b: &mut BytesMut, s: Option<&str>) -> Result<(), RecordError> {
    match s {
        Some(s) => put_compact_string(b, s),
        None => {
            b.put_u8(0);
            Ok(())
        }
    }
}

fn put_compact_bytes(b: &mut BytesMut, v: &[u8]) -> Result<(), RecordError> {
    put_len(b, v.len())?;
    b.put_slice(v);
    Ok(())
}

fn put_uuid(b: &mut BytesMut, id: &Uuid) {
    // Java's Uuid: most significant long, then least, both big-endian.
    b.put_slice(id.as_bytes());
}

fn put_topic_partitions(b: &mut BytesMut, a: &Assignment) -> Result<(), RecordError> {
    put_len(b, a.len())?;
    for (topic, parts) in a {
        put_uuid(b, topic);
        put_len(b, parts.len())?;
        for p in parts {
            b.put_i32(*p);
        }
        b.put_u8(0); // no tagged fields
    }
    Ok(())
}

/// Writes tagged fields: (tag, encoded body) pairs, in tag order.
fn put_tagged(b: &mut BytesMut, fields: &[(u32, BytesMut)]) -> Result<(), RecordError> {
    put_uvarint(b, u32::try_from(fields.len()).map_err(|_| RecordError::Invalid)?);
    for (tag, body) in fields {
        put_uvarint(b, *tag);
        put_uvarint(b, u32::try_from(body.len()).map_err(|_| RecordError::Invalid)?);
        b.put_slice(body);
    }
    Ok(())
}

pub fn encode_group_metadata(v: &GroupMetadataValue, b: &mut BytesMut) -> Result<(), RecordError> {
    b.put_i16(0);
    b.put_i32(v.epoch);
    let mut tags = Vec::new();
    if v.metadata_hash != 0 {
        let mut body = BytesMut::with_capacity(8);
        body.put_i64(v.metadata_hash);
        tags.push((0, body));
    }
    put_tagged(b, &tags)
}

pub fn encode_partition_metadata(v: &PartitionMetadataValue, b: &mut BytesMut) -> Result<(), RecordError> {
    b.put_i16(0);
    put_len(b, v.topics.len())?;
    for t in &v.topics {
        put_uuid(b, &t.topic_id);
        put_compact_string(b, &t.topic_name)?;
        b.put_i32(t.num_partitions);
        put_len(b, t.partition_racks.len())?;
        for (p, racks) in &t.partition_racks {
            b.put_i32(*p);
            put_len(b, racks.len())?;
            for r in racks {
                put_compact_string(b, r)?;
            }
            b.put_u8(0);
        }
        b.put_u8(0);
    }
    b.put_u8(0);
    Ok(())
}

pub fn encode_member_metadata(v: &MemberMetadataValue, b: &mut BytesMut) -> Result<(), RecordError> {
    b.put_i16(0);
    put_compact_nullable_string(b, v.instance_id.as_deref())?;
    put_compact_nullable_string(b, v.rack_id.as_deref())?;
    put_compact_string(b, &v.client_id)?;
    put_compact_string(b, &v.client_host)?;
    put_len(b, v.subscribed_topic_names.len())?;
    for t in &v.subscribed_topic_names {
        put_compact_string(b, t)?;
    }
    put_compact_nullable_string(b, v.subscribed_topic_regex.as_deref())?;
    b.put_i32(v.rebalance_timeout_ms);
    put_compact_nullable_string(b, v.server_assignor.as_deref())?;
    let mut tags = Vec::new();
    if let Some(c) = &v.classic_member_metadata {
        let mut body = BytesMut::new();
        body.put_i32(c.session_timeout_ms);
        put_len(&mut body, c.supported_protocols.len())?;
        for (name, metadata) in &c.supported_protocols {
            put_compact_string(&mut body, name)?;
            put_compact_bytes(&mut body, metadata)?;
            body.put_u8(0);
        }
        body.put_u8(0);
        tags.push((0, body));
    }
    put_tagged(b, &tags)
}

pub fn encode_target_metadata(v: &TargetAssignmentMetadataValue, b: &mut BytesMut) -> Result<(), RecordError> {
    b.put_i16(0);
    b.put_i32(v.assignment_epoch);
    b.put_u8(0);
    Ok(())
}

pub fn encode_target_member(v: &TargetAssignmentMemberValue, b: &mut BytesMut) -> Result<(), RecordError> {
    b.put_i16(0);
    put_topic_partitions(b, &v.partitions)?;
    b.put_u8(0);
    Ok(())
}

pub fn encode_current_assignment(v: &CurrentAssignmentValue, b: &mut BytesMut) -> Result<(), RecordError> {
    b.put_i16(0);
    b.put_i32(v.member_epoch);
    b.put_i32(v.previous_member_epoch);
    b.put_i8(v.state);
    put_topic_partitions(b, &v.assigned)?;
    put_topic_partitions(b, &v.pending_revocation)?;
    b.put_u8(0);
    Ok(())
}

pub fn encode_regular_expression(v: &RegularExpressionValue, b: &mut BytesMut) -> Result<(), RecordError> {
    b.put_i16(0);
    put_len(b, v.topics.len())?;
    for t in &v.topics {
        put_compact_string(b, t)?;
    }
    b.put_i64(v.version);
    b.put_i64(v.timestamp);
    b.put_u8(0);
    Ok(())
}

/// Encodes a key holding the group id only (key versions 3, 4, 6).
pub fn encode_group_key(version: i16, group: &str, b: &mut BytesMut) -> Result<(), RecordError> {
    b.put_i16(version);
    put_string(b, group)
}

/// Encodes a key holding a group and a second string: a member id (key
/// versions 5, 7, 8) or a regular expression (16).
pub fn encode_member_key(version: i16, group: &str, member: &str, b: &mut BytesMut) -> Result<(), RecordError> {
    b.put_i16(version);
    put_string(b, group)?;
    put_string(b, member)
}

// ---------------------------------------------------------------------------
// Decoding

/// Opens a value: checks the version (only 0 exists) and switches the
/// reader to compact encoding.
fn open<'a>(bytes: &'a [u8], record: &'static str) -> Result<Reader<'a>, RecordError> {
    let mut r = Reader::new(bytes);
    let version = r.i16()?;
    if version != 0 {
        return Err(RecordError::UnknownValueVersion { record, version });
    }
    r.flexible = true;
    Ok(r)
}

fn finish(r: &Reader<'_>) -> Result<(), RecordError> {
    if r.buf.is_empty() {
        Ok(())
    } else {
        Err(RecordError::Trailing)
    }
}

fn uuid(r: &mut Reader<'_>) -> Result<Uuid, RecordError> {
    let raw = r.take(16)?;
    Uuid::from_slice(raw).map_err(|_| RecordError::Invalid)
}

fn topic_partitions(r: &mut Reader<'_>) -> Result<Assignment, RecordError> {
    let n = r.array_len()?;
    let mut out = Assignment::new();
    for _ in 0..n {
        let topic = uuid(r)?;
        let m = r.array_len()?;
        let parts = out.entry(topic).or_default();
        for _ in 0..m {
            parts.insert(r.i32()?);
        }
        r.tagged_fields()?;
    }
    Ok(out)
}

/// Reads the tagged-field section, handing each known tag's body to `on`
/// and skipping unknown ones (as Kafka's generated readers do).
fn tagged<'a>(
    r: &mut Reader<'a>,
    mut on: impl FnMut(u32, &'a [u8]) -> Result<(), RecordError>,
) -> Result<(), RecordError> {
    let count = r.uvarint()?;
    for _ in 0..count {
        let tag = r.uvarint()?;
        let size = r.uvarint()? as usize;
        let body = r.take(size)?;
        on(tag, body)?;
    }
    Ok(())
}

pub fn decode_group_metadata(bytes: &[u8]) -> Result<GroupMetadataValue, RecordError> {
    let mut r = open(bytes, "ConsumerGroupMetadataValue")?;
    let epoch = r.i32()?;
    let mut metadata_hash = 0;
    tagged(&mut r, |tag, body| {
        if tag == 0 {
            let mut t = Reader::new(body);
            metadata_hash = t.i64()?;
            finish(&t)?;
        }
        Ok(())
    })?;
    finish(&r)?;
    Ok(GroupMetadataValue { epoch, metadata_hash })
}

pub fn decode_partition_metadata(bytes: &[u8]) -> Result<PartitionMetadataValue, RecordError> {
    let mut r = open(bytes, "ConsumerGroupPartitionMetadataValue")?;
    let n = r.array_len()?;
    let mut topics = Vec::with_capacity(n);
    for _ in 0..n {
        let topic_id = uuid(&mut r)?;
        let topic_name = r.string()?;
        let num_partitions = r.i32()?;
        let m = r.array_len()?;
        let mut partition_racks = Vec::with_capacity(m);
        for _ in 0..m {
            let p = r.i32()?;
            let k = r.array_len()?;
            let mut racks = Vec::with_capacity(k);
            for _ in 0..k {
                racks.push(r.string()?);
            }
            r.tagged_fields()?;
            partition_racks.push((p, racks));
        }
        r.tagged_fields()?;
        topics.push(TopicMetadataValue { topic_id, topic_name, num_partitions, partition_racks });
    }
    r.tagged_fields()?;
    finish(&r)?;
    Ok(PartitionMetadataValue { topics })
}

fn classic_member_metadata(body: &[u8]) -> Result<ClassicMemberMetadata, RecordError> {
    let mut r = Reader::new(body);
    r.flexible = true;
    let session_timeout_ms = r.i32()?;
    let n = r.array_len()?;
    let mut supported_protocols = Vec::with_capacity(n);
    for _ in 0..n {
        let name = r.string()?;
        let metadata = r.bytes()?;
        r.tagged_fields()?;
        supported_protocols.push((name, metadata));
    }
    r.tagged_fields()?;
    finish(&r)?;
    Ok(ClassicMemberMetadata { session_timeout_ms, supported_protocols })
}

pub fn decode_member_metadata(bytes: &[u8]) -> Result<MemberMetadataValue, RecordError> {
    let mut r = open(bytes, "ConsumerGroupMemberMetadataValue")?;
    let instance_id = r.nullable_string()?;
    let rack_id = r.nullable_string()?;
    let client_id = r.string()?;
    let client_host = r.string()?;
    let n = r.array_len()?;
    let mut subscribed_topic_names = Vec::with_capacity(n);
    for _ in 0..n {
        subscribed_topic_names.push(r.string()?);
    }
    let subscribed_topic_regex = r.nullable_string()?;
    let rebalance_timeout_ms = r.i32()?;
    let server_assignor = r.nullable_string()?;
    let mut classic = None;
    tagged(&mut r, |tag, body| {
        if tag == 0 {
            classic = Some(classic_member_metadata(body)?);
        }
        Ok(())
    })?;
    finish(&r)?;
    Ok(MemberMetadataValue {
        instance_id,
        rack_id,
        client_id,
        client_host,
        subscribed_topic_names,
        subscribed_topic_regex,
        rebalance_timeout_ms,
        server_assignor,
        classic_member_metadata: classic,
    })
}

pub fn decode_target_metadata(bytes: &[u8]) -> Result<TargetAssignmentMetadataValue, RecordError> {
    let mut r = open(bytes, "ConsumerGroupTargetAssignmentMetadataValue")?;
    let assignment_epoch = r.i32()?;
    r.tagged_fields()?;
    finish(&r)?;
    Ok(TargetAssignmentMetadataValue { assignment_epoch })
}

pub fn decode_target_member(bytes: &[u8]) -> Result<TargetAssignmentMemberValue, RecordError> {
    let mut r = open(bytes, "ConsumerGroupTargetAssignmentMemberValue")?;
    let partitions = topic_partitions(&mut r)?;
    r.tagged_fields()?;
    finish(&r)?;
    Ok(TargetAssignmentMemberValue { partitions })
}

pub fn decode_current_assignment(bytes: &[u8]) -> Result<CurrentAssignmentValue, RecordError> {
    let mut r = open(bytes, "ConsumerGroupCurrentMemberAssignmentValue")?;
    let member_epoch = r.i32()?;
    let previous_member_epoch = r.i32()?;
    let state = r.u8()? as i8;
    let assigned = topic_partitions(&mut r)?;
    let pending_revocation = topic_partitions(&mut r)?;
    r.tagged_fields()?;
    finish(&r)?;
    Ok(CurrentAssignmentValue { member_epoch, previous_member_epoch, state, assigned, pending_revocation })
}

pub fn decode_regular_expression(bytes: &[u8]) -> Result<RegularExpressionValue, RecordError> {
    let mut r = open(bytes, "ConsumerGroupRegularExpressionValue")?;
    let n = r.array_len()?;
    let mut topics = Vec::with_capacity(n.min(1024));
    for _ in 0..n {
        topics.push(r.string()?);
    }
    let version = r.i64()?;
    let timestamp = r.i64()?;
    r.tagged_fields()?;
    finish(&r)?;
    Ok(RegularExpressionValue { topics, version, timestamp })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::coordinator::records::{decode, encode, ConsumerKey, Record, RecordKey, RecordValue};

    fn topic(n: u8) -> Uuid {
        Uuid::from_bytes([n; 16])
    }

    fn assignment(pairs: &[(u8, &[i32])]) -> Assignment {
        pairs.iter().map(|(t, ps)| (topic(*t), ps.iter().copied().collect())).collect()
    }

    pub(crate) fn samples() -> Vec<Record> {
        let g = "g";
        vec![
            Record::consumer(
                g,
                ConsumerKey::Metadata,
                Some(RecordValue::ConsumerMetadata(GroupMetadataValue { epoch: 7, metadata_hash: 0 })),
            ),
            Record::consumer(
                g,
                ConsumerKey::Metadata,
                Some(RecordValue::ConsumerMetadata(GroupMetadataValue { epoch: 8, metadata_hash: -42 })),
            ),
            Record::consumer(
                g,
                ConsumerKey::PartitionMetadata,
                Some(RecordValue::ConsumerPartitionMetadata(PartitionMetadataValue {
                    topics: vec![TopicMetadataValue {
                        topic_id: topic(1),
                        topic_name: "t".into(),
                        num_partitions: 3,
                        partition_racks: vec![(0, vec!["r1".into(), "r2".into()]), (1, vec![])],
                    }],
                })),
            ),
            Record::consumer(
                g,
                ConsumerKey::Member("m".into()),
                Some(RecordValue::ConsumerMember(MemberMetadataValue {
                    instance_id: Some("i".into()),
                    rack_id: None,
                    client_id: "c".into(),
                    client_host: "/127.0.0.1".into(),
                    subscribed_topic_names: vec!["a".into(), "b".into()],
                    subscribed_topic_regex: Some("x.*".into()),
                    rebalance_timeout_ms: 300_000,
                    server_assignor: Some("uniform".into()),
                    classic_member_metadata: None,
                })),
            ),
            Record::consumer(
                g,
                ConsumerKey::Member("m2".into()),
                Some(RecordValue::ConsumerMember(MemberMetadataValue {
                    client_id: "c".into(),
                    rebalance_timeout_ms: -1,
                    classic_member_metadata: Some(ClassicMemberMetadata {
                        session_timeout_ms: 10_000,
                        supported_protocols: vec![("range".into(), Bytes::from_static(b"\x00\x01"))],
                    }),
                    ..Default::default()
                })),
            ),
            Record::consumer(
                g,
                ConsumerKey::TargetMetadata,
                Some(RecordValue::ConsumerTargetMetadata(TargetAssignmentMetadataValue { assignment_epoch: 7 })),
            ),
            Record::consumer(
                g,
                ConsumerKey::TargetMember("m".into()),
                Some(RecordValue::ConsumerTargetMember(TargetAssignmentMemberValue {
                    partitions: assignment(&[(1, &[0, 2]), (2, &[5])]),
                })),
            ),
            Record::consumer(
                g,
                ConsumerKey::CurrentAssignment("m".into()),
                Some(RecordValue::ConsumerCurrentAssignment(CurrentAssignmentValue {
                    member_epoch: 7,
                    previous_member_epoch: 6,
                    state: 1,
                    assigned: assignment(&[(1, &[0])]),
                    pending_revocation: assignment(&[(2, &[1, 3])]),
                })),
            ),
            Record::consumer(g, ConsumerKey::Metadata, None),
            Record::consumer(g, ConsumerKey::PartitionMetadata, None),
            Record::consumer(g, ConsumerKey::Member("m".into()), None),
            Record::consumer(g, ConsumerKey::TargetMetadata, None),
            Record::consumer(g, ConsumerKey::TargetMember("m".into()), None),
            Record::consumer(g, ConsumerKey::CurrentAssignment("m".into()), None),
        ]
    }

    #[test]
    fn consumer_group_records_round_trip() {
        for rec in samples() {
            let payload = encode(&rec, 99).unwrap();
            let back = decode(&payload).unwrap();
            assert_eq!(back.timestamp, 99);
            assert_eq!(back.record, rec);
            for n in 0..payload.len() {
                assert!(decode(&payload[..n]).is_err(), "prefix of {n} bytes of {rec:?}");
            }
        }
    }

    /// The ConsumerGroupRegularExpression record and its tombstone.
    pub(crate) fn regex_samples() -> Vec<Record> {
        vec![
            Record::consumer(
                "g",
                ConsumerKey::RegularExpression("x.*".into()),
                Some(RecordValue::ConsumerRegularExpression(RegularExpressionValue {
                    topics: vec!["xa".into(), "xb".into()],
                    version: 10,
                    timestamp: 12_345,
                })),
            ),
            Record::consumer("g", ConsumerKey::RegularExpression("x.*".into()), None),
        ]
    }

    #[test]
    fn regular_expression_records_round_trip_in_kafkas_layout() {
        for rec in regex_samples() {
            let payload = encode(&rec, 7).unwrap();
            assert_eq!(decode(&payload).unwrap().record, rec);
            for n in 0..payload.len() {
                assert!(decode(&payload[..n]).is_err(), "prefix of {n} bytes of {rec:?}");
            }
        }
        let mut b = BytesMut::new();
        crate::coordinator::records::encode_key(
            &RecordKey::Consumer { group: "g".into(), kind: ConsumerKey::RegularExpression("r".into()) },
            &mut b,
        )
        .unwrap();
        assert_eq!(&b[..], &[0, 16, 0, 1, b'g', 0, 1, b'r']);
        let mut b = BytesMut::new();
        encode_regular_expression(
            &RegularExpressionValue { topics: vec!["t".into()], version: 1, timestamp: 2 },
            &mut b,
        )
        .unwrap();
        // version 0, compact array of 1, compact string "t", version, timestamp, no tags.
        assert_eq!(&b[..], &[0, 0, 2, 2, b't', 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 2, 0]);
    }

    #[test]
    fn keys_carry_kafkas_versions_and_layout() {
        let mut b = BytesMut::new();
        crate::coordinator::records::encode_key(
            &RecordKey::Consumer { group: "g".into(), kind: ConsumerKey::CurrentAssignment("m".into()) },
            &mut b,
        )
        .unwrap();
        assert_eq!(&b[..], &[0, 8, 0, 1, b'g', 0, 1, b'm']);
        let mut b = BytesMut::new();
        crate::coordinator::records::encode_key(
            &RecordKey::Consumer { group: "g".into(), kind: ConsumerKey::Metadata },
            &mut b,
        )
        .unwrap();
        assert_eq!(&b[..], &[0, 3, 0, 1, b'g']);
    }

    #[test]
    fn group_metadata_writes_the_hash_as_tagged_field_zero() {
        let mut b = BytesMut::new();
        encode_group_metadata(&GroupMetadataValue { epoch: 1, metadata_hash: 0 }, &mut b).unwrap();
        // version 0, epoch 1, no tagged fields: what Kafka before 4.1 writes too.
        assert_eq!(&b[..], &[0, 0, 0, 0, 0, 1, 0]);
        let mut b = BytesMut::new();
        encode_group_metadata(&GroupMetadataValue { epoch: 1, metadata_hash: 2 }, &mut b).unwrap();
        assert_eq!(&b[..], &[0, 0, 0, 0, 0, 1, 1, 0, 8, 0, 0, 0, 0, 0, 0, 0, 2]);
    }

    #[test]
    fn current_assignment_layout_is_kafkas() {
        let mut b = BytesMut::new();
        encode_current_assignment(
            &CurrentAssignmentValue {
                member_epoch: 2,
                previous_member_epoch: 1,
                state: 0,
                assigned: assignment(&[(1, &[4])]),
                pending_revocation: Assignment::new(),
            },
            &mut b,
        )
        .unwrap();
        let mut want = vec![0u8, 0, 0, 0, 0, 2, 0, 0, 0, 1, 0, 2];
        want.extend_from_slice(&[1; 16]);
        want.extend_from_slice(&[2, 0, 0, 0, 4, 0, 1, 0]);
        assert_eq!(&b[..], &want[..]);
    }

    #[test]
    fn unknown_tagged_fields_are_skipped_and_unknown_versions_refused() {
        // epoch 5, one unknown tag 9 of 2 bytes.
        let v = [0u8, 0, 0, 0, 0, 5, 1, 9, 2, 0xaa, 0xbb];
        assert_eq!(decode_group_metadata(&v).unwrap(), GroupMetadataValue { epoch: 5, metadata_hash: 0 });
        let v1 = [0u8, 1, 0, 0, 0, 5, 0];
        assert!(matches!(decode_group_metadata(&v1), Err(RecordError::UnknownValueVersion { .. })));
    }
}
