//! Coordinator log records in Kafka's own `__consumer_offsets` schemas.
//!
//! Each record is a key and an optional value (a missing value is a
//! tombstone), each prefixed by its int16 schema version, exactly as Kafka
//! writes them: OffsetCommitKey v1 / OffsetCommitValue v3 (v1 when an expire
//! timestamp is set), GroupMetadataKey v2 / GroupMetadataValue v3, and the
//! KIP-848 consumer-group records (key versions 3–8, `consumer::records`).
//! Reading accepts every version Kafka has written (values v0–v4), so the
//! format is documented by Kafka itself.
//!
//! In our log a record is stored as one payload:
//! `[u8 format=0][i64 append timestamp ms][i32 key length][key][i32 value length or -1][value]`.
//! The timestamp lets compaction keep a deleted group's tombstone for
//! `offsets.tombstone_retention_ms` (Kafka's log cleaner keeps every
//! tombstone that long; a kcoord snapshot is the whole state, so other
//! tombstones shadow nothing in it and are dropped).

use bytes::{Buf, BufMut, Bytes, BytesMut};

use super::consumer::records as cr;

/// Which entity a record is about.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum RecordKey {
    Offset {
        group: String,
        topic: String,
        partition: i32,
    },
    Group {
        group: String,
    },
    /// KIP-848 consumer groups (key versions 3–8, see `consumer::records`).
    Consumer {
        group: String,
        kind: ConsumerKey,
    },
    /// kcoord's own record (key version [`DELEGATION_KEY_VERSION`], no
    /// Kafka counterpart): in sidecar mode, the group's offsets are kept by
    /// the upstream's coordinator since a TxnOffsetCommit.
    Delegation {
        group: String,
    },
}

/// The key version of [`RecordKey::Delegation`]: far above every version
/// Kafka has used, so that it can never be mistaken for one of Kafka's.
pub const DELEGATION_KEY_VERSION: i16 = 1000;

/// Which consumer-group record a [`RecordKey::Consumer`] names; the member
/// id is part of the key where Kafka's key has one.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ConsumerKey {
    /// ConsumerGroupMetadataKey (v3).
    Metadata,
    /// ConsumerGroupPartitionMetadataKey (v4).
    PartitionMetadata,
    /// ConsumerGroupMemberMetadataKey (v5).
    Member(String),
    /// ConsumerGroupTargetAssignmentMetadataKey (v6).
    TargetMetadata,
    /// ConsumerGroupTargetAssignmentMemberKey (v7).
    TargetMember(String),
    /// ConsumerGroupCurrentMemberAssignmentKey (v8).
    CurrentAssignment(String),
    /// ConsumerGroupRegularExpressionKey (v16): a resolved subscription
    /// pattern of the group (Kafka 4.0+).
    RegularExpression(String),
}

impl ConsumerKey {
    /// The key version, which is also the record type.
    pub fn version(&self) -> i16 {
        match self {
            ConsumerKey::Metadata => 3,
            ConsumerKey::PartitionMetadata => 4,
            ConsumerKey::Member(_) => 5,
            ConsumerKey::TargetMetadata => 6,
            ConsumerKey::TargetMember(_) => 7,
            ConsumerKey::CurrentAssignment(_) => 8,
            ConsumerKey::RegularExpression(_) => 16,
        }
    }
}

impl RecordKey {
    pub fn group(&self) -> &str {
        match self {
            RecordKey::Offset { group, .. }
            | RecordKey::Group { group }
            | RecordKey::Consumer { group, .. }
            | RecordKey::Delegation { group } => group,
        }
    }
}

/// A committed offset (OffsetCommitValue).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OffsetValue {
    pub offset: i64,
    /// -1 when the client sent none.
    pub leader_epoch: i32,
    pub metadata: String,
    pub commit_timestamp: i64,
    /// Set by OffsetCommit v2–v4 with an explicit retention time.
    pub expire_timestamp: Option<i64>,
}

/// A group whose offsets are delegated to the upstream (sidecar mode).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DelegationValue {
    /// Whether kcoord's own offsets for the group have been committed to the
    /// upstream (and then dropped here). Until then every request for the
    /// group's offsets hands them over first.
    pub handed_over: bool,
}

/// One member in a GroupMetadataValue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberValue {
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub rebalance_timeout: i32,
    pub session_timeout: i32,
    /// The member's metadata for the group's selected protocol.
    pub subscription: Bytes,
    pub assignment: Bytes,
}

/// A classic group (GroupMetadataValue).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupValue {
    pub protocol_type: String,
    pub generation: i32,
    pub protocol: Option<String>,
    pub leader: Option<String>,
    /// -1 in Kafka's schema when unknown.
    pub current_state_timestamp: i64,
    pub members: Vec<MemberValue>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RecordValue {
    Offset(OffsetValue),
    Group(GroupValue),
    ConsumerMetadata(cr::GroupMetadataValue),
    ConsumerPartitionMetadata(cr::PartitionMetadataValue),
    ConsumerMember(cr::MemberMetadataValue),
    ConsumerTargetMetadata(cr::TargetAssignmentMetadataValue),
    ConsumerTargetMember(cr::TargetAssignmentMemberValue),
    ConsumerCurrentAssignment(cr::CurrentAssignmentValue),
    ConsumerRegularExpression(cr::RegularExpressionValue),
    Delegation(DelegationValue),
}

/// A log record: a key and a value, or a tombstone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    pub key: RecordKey,
    pub value: Option<RecordValue>,
}

impl Record {
    pub fn offset(group: &str, topic: &str, partition: i32, value: OffsetValue) -> Record {
        Record {
            key: RecordKey::Offset { group: group.to_string(), topic: topic.to_string(), partition },
            value: Some(RecordValue::Offset(value)),
        }
    }

    pub fn offset_tombstone(group: &str, topic: &str, partition: i32) -> Record {
        Record { key: RecordKey::Offset { group: group.to_string(), topic: topic.to_string(), partition }, value: None }
    }

    pub fn group(group: &str, value: GroupValue) -> Record {
        Record { key: RecordKey::Group { group: group.to_string() }, value: Some(RecordValue::Group(value)) }
    }

    pub fn group_tombstone(group: &str) -> Record {
        Record { key: RecordKey::Group { group: group.to_string() }, value: None }
    }

    pub fn delegation(group: &str, value: Option<DelegationValue>) -> Record {
        Record { key: RecordKey::Delegation { group: group.to_string() }, value: value.map(RecordValue::Delegation) }
    }

    /// A consumer-group record (a tombstone when `value` is None).
    pub fn consumer(group: &str, kind: ConsumerKey, value: Option<RecordValue>) -> Record {
        Record { key: RecordKey::Consumer { group: group.to_string(), kind }, value }
    }
}

/// Why stored bytes are not a record we can read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RecordError {
    #[error("record is truncated")]
    Truncated,
    #[error("unknown record format {0}")]
    Format(u8),
    #[error("key version {0} is not a record type kcoord reads")]
    UnknownKeyVersion(i16),
    #[error("value version {version} is not known for {record}")]
    UnknownValueVersion { record: &'static str, version: i16 },
    #[error("invalid string or length in record")]
    Invalid,
    #[error("trailing bytes after record")]
    Trailing,
    #[error("a string of {0} bytes does not fit a record (at most 32767)")]
    StringTooLong(usize),
}

/// A record as stored, with the time it was appended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredRecord {
    pub timestamp: i64,
    pub record: Record,
}

// ---------------------------------------------------------------------------
// Encoding

/// Kafka's record schemas give strings an i16 length, so a longer string
/// cannot be stored: writing a wrapped length would make the record, and the
/// log behind it, unreadable. Kafka's serializers refuse such a string too.
pub(crate) fn put_string(b: &mut BytesMut, s: &str) -> Result<(), RecordError> {
    let len = i16::try_from(s.len()).map_err(|_| RecordError::StringTooLong(s.len()))?;
    b.put_i16(len);
    b.put_slice(s.as_bytes());
    Ok(())
}

pub(crate) fn put_nullable_string(b: &mut BytesMut, s: Option<&str>) -> Result<(), RecordError> {
    match s {
        Some(s) => put_string(b, s),
        None => {
            b.put_i16(-1);
            Ok(())
        }
    }
}

fn put_bytes(b: &mut BytesMut, v: &[u8]) -> Result<(), RecordError> {
    let len = i32::try_from(v.len()).map_err(|_| RecordError::Invalid)?;
    b.put_i32(len);
    b.put_slice(v);
    Ok(())
}

/// An offset commit's key (version 1).
fn put_offset_key(b: &mut BytesMut, group: &str, topic: &str, partition: i32) -> Result<(), RecordError> {
    b.put_i16(1);
    put_string(b, group)?;
    put_string(b, topic)?;
    b.put_i32(partition);
    Ok(())
}

/// An offset commit's value: version 1 when it carries an expiry (a
/// retention time was asked for, OffsetCommit v2–v4), else version 3.
fn put_offset_value(b: &mut BytesMut, v: &OffsetValue) -> Result<(), RecordError> {
    match v.expire_timestamp {
        Some(expire) => {
            b.put_i16(1);
            b.put_i64(v.offset);
            put_string(b, &v.metadata)?;
            b.put_i64(v.commit_timestamp);
            b.put_i64(expire);
        }
        None => {
            b.put_i16(3);
            b.put_i64(v.offset);
            b.put_i32(v.leader_epoch);
            put_string(b, &v.metadata)?;
            b.put_i64(v.commit_timestamp);
        }
    }
    Ok(())
}

/// Encodes the key with its version prefix.
pub fn encode_key(key: &RecordKey, b: &mut BytesMut) -> Result<(), RecordError> {
    match key {
        RecordKey::Offset { group, topic, partition } => put_offset_key(b, group, topic, *partition)?,
        RecordKey::Group { group } => {
            b.put_i16(2);
            put_string(b, group)?;
        }
        RecordKey::Consumer { group, kind } => match kind {
            ConsumerKey::Metadata | ConsumerKey::PartitionMetadata | ConsumerKey::TargetMetadata => {
                cr::encode_group_key(kind.version(), group, b)?
            }
            ConsumerKey::Member(m)
            | ConsumerKey::TargetMember(m)
            | ConsumerKey::CurrentAssignment(m)
            | ConsumerKey::RegularExpression(m) => cr::encode_member_key(kind.version(), group, m, b)?,
        },
        RecordKey::Delegation { group } => {
            b.put_i16(DELEGATION_KEY_VERSION);
            put_string(b, group)?;
        }
    }
    Ok(())
}

/// Encodes the value with its version prefix.
pub fn encode_value(value: &RecordValue, b: &mut BytesMut) -> Result<(), RecordError> {
    match value {
        RecordValue::Offset(v) => put_offset_value(b, v)?,
        RecordValue::Group(g) => {
            b.put_i16(3);
            put_string(b, &g.protocol_type)?;
            b.put_i32(g.generation);
            put_nullable_string(b, g.protocol.as_deref())?;
            put_nullable_string(b, g.leader.as_deref())?;
            b.put_i64(g.current_state_timestamp);
            b.put_i32(i32::try_from(g.members.len()).map_err(|_| RecordError::Invalid)?);
            for m in &g.members {
                put_string(b, &m.member_id)?;
                put_nullable_string(b, m.group_instance_id.as_deref())?;
                put_string(b, &m.client_id)?;
                put_string(b, &m.client_host)?;
                b.put_i32(m.rebalance_timeout);
                b.put_i32(m.session_timeout);
                put_bytes(b, &m.subscription)?;
                put_bytes(b, &m.assignment)?;
            }
        }
        RecordValue::ConsumerMetadata(v) => cr::encode_group_metadata(v, b)?,
        RecordValue::ConsumerPartitionMetadata(v) => cr::encode_partition_metadata(v, b)?,
        RecordValue::ConsumerMember(v) => cr::encode_member_metadata(v, b)?,
        RecordValue::ConsumerTargetMetadata(v) => cr::encode_target_metadata(v, b)?,
        RecordValue::ConsumerTargetMember(v) => cr::encode_target_member(v, b)?,
        RecordValue::ConsumerCurrentAssignment(v) => cr::encode_current_assignment(v, b)?,
        RecordValue::ConsumerRegularExpression(v) => cr::encode_regular_expression(v, b)?,
        RecordValue::Delegation(v) => {
            b.put_i16(0);
            b.put_u8(u8::from(v.handed_over));
        }
    }
    Ok(())
}

/// Room for a typical record (an offset commit's is about 100 bytes), so
/// that encoding one does not grow its buffer.
const RECORD_CAPACITY: usize = 192;

/// Encodes a record as a log payload; fails, writing nothing, for a record
/// whose strings do not fit Kafka's schema.
pub fn encode(record: &Record, timestamp: i64) -> Result<Bytes, RecordError> {
    let mut b = BytesMut::with_capacity(RECORD_CAPACITY);
    encode_into(record, timestamp, &mut b)?;
    Ok(b.freeze())
}

/// Appends a record's payload to `b` (on failure `b` may hold part of it).
fn encode_into(record: &Record, timestamp: i64, b: &mut BytesMut) -> Result<(), RecordError> {
    let value = record.value.as_ref().map(|v| move |b: &mut BytesMut| encode_value(v, b));
    put_payload(b, timestamp, |b| encode_key(&record.key, b), value)
}

/// Appends a payload: format, timestamp, then the key and the value (or a
/// tombstone's null), each behind its length.
fn put_payload(
    b: &mut BytesMut,
    timestamp: i64,
    key: impl FnOnce(&mut BytesMut) -> Result<(), RecordError>,
    value: Option<impl FnOnce(&mut BytesMut) -> Result<(), RecordError>>,
) -> Result<(), RecordError> {
    b.put_u8(0);
    b.put_i64(timestamp);
    let len_at = b.len();
    b.put_i32(0);
    key(b)?;
    let key_len = (b.len() - len_at - 4) as i32;
    crate::be_int::set_i32_at(b, len_at, key_len);
    match value {
        None => b.put_i32(-1),
        Some(value) => {
            let len_at = b.len();
            b.put_i32(0);
            value(b)?;
            let value_len = (b.len() - len_at - 4) as i32;
            crate::be_int::set_i32_at(b, len_at, value_len);
        }
    }
    Ok(())
}

/// The payloads of one write, encoded back to back into one buffer that a
/// shard keeps from write to write: a buffer and a `Bytes` per record, and
/// a vector of them, were allocations on every commit.
#[derive(Debug, Default)]
pub struct EncodedRecords {
    buf: BytesMut,
    /// Where each payload ends in `buf`.
    ends: Vec<usize>,
}

/// Capacity an [`EncodedRecords`] keeps between writes; a rare large write
/// (a big group's metadata) does not hold its memory afterwards.
const KEPT_ENCODING_BYTES: usize = 64 * 1024;

impl EncodedRecords {
    /// Empties it for the next write.
    pub fn clear(&mut self) {
        if self.buf.capacity() > KEPT_ENCODING_BYTES {
            self.buf = BytesMut::new();
        }
        self.buf.clear();
        self.ends.clear();
    }

    /// Encodes one more record; on failure nothing of it is kept.
    pub fn push(&mut self, record: &Record, timestamp: i64) -> Result<(), RecordError> {
        self.push_with(|b| encode_into(record, timestamp, b))
    }

    /// Encodes one more offset commit, the bytes
    /// `push(&Record::offset(group, topic, partition, value))` would write,
    /// without copying the group's and topic's names into a [`Record`]
    /// first (the commit path writes one per partition).
    pub fn push_offset(
        &mut self,
        group: &str,
        topic: &str,
        partition: i32,
        value: &OffsetValue,
        timestamp: i64,
    ) -> Result<(), RecordError> {
        self.push_with(|b| {
            put_payload(
                b,
                timestamp,
                |b| put_offset_key(b, group, topic, partition),
                Some(|b: &mut BytesMut| put_offset_value(b, value)),
            )
        })
    }

    fn push_with(&mut self, encode: impl FnOnce(&mut BytesMut) -> Result<(), RecordError>) -> Result<(), RecordError> {
        let start = self.buf.len();
        match encode(&mut self.buf) {
            Ok(()) => {
                self.ends.push(self.buf.len());
                Ok(())
            }
            Err(e) => {
                self.buf.truncate(start);
                Err(e)
            }
        }
    }

    /// The payloads, in order.
    pub fn iter(&self) -> impl Iterator<Item = &[u8]> + '_ {
        let mut start = 0;
        self.ends.iter().map(move |&end| {
            let payload = self.buf.get(start..end).unwrap_or_default();
            start = end;
            payload
        })
    }

    pub fn len(&self) -> usize {
        self.ends.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }
}

// ---------------------------------------------------------------------------
// Decoding (every length checked; nothing here may panic on bad bytes)

pub(crate) struct Reader<'a> {
    pub(crate) buf: &'a [u8],
    pub(crate) flexible: bool,
}

impl<'a> Reader<'a> {
    pub(crate) fn new(buf: &'a [u8]) -> Self {
        Reader { buf, flexible: false }
    }

    pub(crate) fn need(&self, n: usize) -> Result<(), RecordError> {
        if self.buf.remaining() < n {
            Err(RecordError::Truncated)
        } else {
            Ok(())
        }
    }

    pub(crate) fn u8(&mut self) -> Result<u8, RecordError> {
        self.need(1)?;
        Ok(self.buf.get_u8())
    }

    pub(crate) fn i16(&mut self) -> Result<i16, RecordError> {
        self.need(2)?;
        Ok(self.buf.get_i16())
    }

    pub(crate) fn i32(&mut self) -> Result<i32, RecordError> {
        self.need(4)?;
        Ok(self.buf.get_i32())
    }

    pub(crate) fn i64(&mut self) -> Result<i64, RecordError> {
        self.need(8)?;
        Ok(self.buf.get_i64())
    }

    pub(crate) fn uvarint(&mut self) -> Result<u32, RecordError> {
        let mut value: u32 = 0;
        for i in 0..5 {
            let b = self.u8()?;
            value |= ((b & 0x7f) as u32) << (7 * i);
            if b & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(RecordError::Invalid)
    }

    pub(crate) fn take(&mut self, n: usize) -> Result<&'a [u8], RecordError> {
        self.need(n)?;
        let (head, tail) = self.buf.split_at(n);
        self.buf = tail;
        Ok(head)
    }

    /// A length: i16 (strings) or i32 (bytes) normally, varint+1 when flexible.
    /// Returns None for null.
    pub(crate) fn len(&mut self, wide: bool) -> Result<Option<usize>, RecordError> {
        if self.flexible {
            let n = self.uvarint()?;
            return Ok(if n == 0 { None } else { Some((n - 1) as usize) });
        }
        let n = if wide { self.i32()? as i64 } else { self.i16()? as i64 };
        match n {
            -1 => Ok(None),
            n if n >= 0 => Ok(Some(n as usize)),
            _ => Err(RecordError::Invalid),
        }
    }

    pub(crate) fn nullable_string(&mut self) -> Result<Option<String>, RecordError> {
        match self.len(false)? {
            None => Ok(None),
            Some(n) => {
                let raw = self.take(n)?;
                crate::text::utf8(raw).map(|s| Some(s.to_string())).ok_or(RecordError::Invalid)
            }
        }
    }

    pub(crate) fn string(&mut self) -> Result<String, RecordError> {
        self.nullable_string()?.ok_or(RecordError::Invalid)
    }

    pub(crate) fn bytes(&mut self) -> Result<Bytes, RecordError> {
        match self.len(true)? {
            None => Ok(Bytes::new()),
            Some(n) => Ok(Bytes::copy_from_slice(self.take(n)?)),
        }
    }

    pub(crate) fn array_len(&mut self) -> Result<usize, RecordError> {
        let n = self.len(true)?.unwrap_or_default();
        // Every element takes at least one byte: refuse absurd counts before
        // reserving anything.
        if n > self.buf.remaining() {
            return Err(RecordError::Invalid);
        }
        Ok(n)
    }

    pub(crate) fn tagged_fields(&mut self) -> Result<(), RecordError> {
        if !self.flexible {
            return Ok(());
        }
        let count = self.uvarint()?;
        for _ in 0..count {
            let _tag = self.uvarint()?;
            let size = self.uvarint()? as usize;
            self.take(size)?;
        }
        Ok(())
    }
}

/// Decodes a key (with its version prefix).
pub fn decode_key(bytes: &[u8]) -> Result<RecordKey, RecordError> {
    let mut r = Reader::new(bytes);
    let version = r.i16()?;
    let key = match version {
        0 | 1 => RecordKey::Offset { group: r.string()?, topic: r.string()?, partition: r.i32()? },
        2 => RecordKey::Group { group: r.string()? },
        3 => RecordKey::Consumer { group: r.string()?, kind: ConsumerKey::Metadata },
        4 => RecordKey::Consumer { group: r.string()?, kind: ConsumerKey::PartitionMetadata },
        6 => RecordKey::Consumer { group: r.string()?, kind: ConsumerKey::TargetMetadata },
        5 => RecordKey::Consumer { group: r.string()?, kind: ConsumerKey::Member(r.string()?) },
        7 => RecordKey::Consumer { group: r.string()?, kind: ConsumerKey::TargetMember(r.string()?) },
        8 => RecordKey::Consumer { group: r.string()?, kind: ConsumerKey::CurrentAssignment(r.string()?) },
        16 => RecordKey::Consumer { group: r.string()?, kind: ConsumerKey::RegularExpression(r.string()?) },
        DELEGATION_KEY_VERSION => RecordKey::Delegation { group: r.string()? },
        v => return Err(RecordError::UnknownKeyVersion(v)),
    };
    if r.buf.has_remaining() {
        return Err(RecordError::Trailing);
    }
    Ok(key)
}

fn decode_offset_value(bytes: &[u8]) -> Result<OffsetValue, RecordError> {
    let mut r = Reader::new(bytes);
    let version = r.i16()?;
    r.flexible = version >= 4;
    let offset = r.i64()?;
    let leader_epoch = if version >= 3 { r.i32()? } else { -1 };
    let metadata = r.string()?;
    let commit_timestamp = r.i64()?;
    let expire_timestamp = match version {
        1 => Some(r.i64()?).filter(|&t| t != -1),
        0 | 2 | 3 | 4 => None,
        v => return Err(RecordError::UnknownValueVersion { record: "OffsetCommitValue", version: v }),
    };
    r.tagged_fields()?;
    Ok(OffsetValue { offset, leader_epoch, metadata, commit_timestamp, expire_timestamp })
}

fn decode_group_value(bytes: &[u8]) -> Result<GroupValue, RecordError> {
    let mut r = Reader::new(bytes);
    let version = r.i16()?;
    if !(0..=4).contains(&version) {
        return Err(RecordError::UnknownValueVersion { record: "GroupMetadataValue", version });
    }
    r.flexible = version >= 4;
    let protocol_type = r.string()?;
    let generation = r.i32()?;
    let protocol = r.nullable_string()?;
    let leader = r.nullable_string()?;
    let current_state_timestamp = if version >= 2 { r.i64()? } else { -1 };
    let n = r.array_len()?;
    let mut members = Vec::with_capacity(n);
    for _ in 0..n {
        let member_id = r.string()?;
        let group_instance_id = if version >= 3 { r.nullable_string()? } else { None };
        let client_id = r.string()?;
        let client_host = r.string()?;
        let rebalance_timeout = if version >= 1 { r.i32()? } else { -1 };
        let session_timeout = r.i32()?;
        let subscription = r.bytes()?;
        let assignment = r.bytes()?;
        r.tagged_fields()?;
        members.push(MemberValue {
            member_id,
            group_instance_id,
            client_id,
            client_host,
            rebalance_timeout,
            session_timeout,
            subscription,
            assignment,
        });
    }
    r.tagged_fields()?;
    Ok(GroupValue { protocol_type, generation, protocol, leader, current_state_timestamp, members })
}

fn decode_delegation_value(bytes: &[u8]) -> Result<DelegationValue, RecordError> {
    let mut r = Reader::new(bytes);
    let version = r.i16()?;
    if version != 0 {
        return Err(RecordError::UnknownValueVersion { record: "DelegationValue", version });
    }
    let handed_over = match r.u8()? {
        0 => false,
        1 => true,
        _ => return Err(RecordError::Invalid),
    };
    if r.buf.has_remaining() {
        return Err(RecordError::Trailing);
    }
    Ok(DelegationValue { handed_over })
}

/// Decodes a value for `key`.
pub fn decode_value(key: &RecordKey, bytes: &[u8]) -> Result<RecordValue, RecordError> {
    match key {
        RecordKey::Offset { .. } => decode_offset_value(bytes).map(RecordValue::Offset),
        RecordKey::Group { .. } => decode_group_value(bytes).map(RecordValue::Group),
        RecordKey::Delegation { .. } => decode_delegation_value(bytes).map(RecordValue::Delegation),
        RecordKey::Consumer { kind, .. } => match kind {
            ConsumerKey::Metadata => cr::decode_group_metadata(bytes).map(RecordValue::ConsumerMetadata),
            ConsumerKey::PartitionMetadata => {
                cr::decode_partition_metadata(bytes).map(RecordValue::ConsumerPartitionMetadata)
            }
            ConsumerKey::Member(_) => cr::decode_member_metadata(bytes).map(RecordValue::ConsumerMember),
            ConsumerKey::TargetMetadata => cr::decode_target_metadata(bytes).map(RecordValue::ConsumerTargetMetadata),
            ConsumerKey::TargetMember(_) => cr::decode_target_member(bytes).map(RecordValue::ConsumerTargetMember),
            ConsumerKey::CurrentAssignment(_) => {
                cr::decode_current_assignment(bytes).map(RecordValue::ConsumerCurrentAssignment)
            }
            ConsumerKey::RegularExpression(_) => {
                cr::decode_regular_expression(bytes).map(RecordValue::ConsumerRegularExpression)
            }
        },
    }
}

/// Decodes a log payload written by [`encode`].
pub fn decode(payload: &[u8]) -> Result<StoredRecord, RecordError> {
    let mut r = Reader::new(payload);
    let format = r.u8()?;
    if format != 0 {
        return Err(RecordError::Format(format));
    }
    let timestamp = r.i64()?;
    let key_len = r.i32()?;
    if key_len < 0 {
        return Err(RecordError::Invalid);
    }
    let key = decode_key(r.take(key_len as usize)?)?;
    let value_len = r.i32()?;
    let value = match value_len {
        -1 => None,
        n if n >= 0 => Some(decode_value(&key, r.take(n as usize)?)?),
        _ => return Err(RecordError::Invalid),
    };
    if r.buf.has_remaining() {
        return Err(RecordError::Trailing);
    }
    Ok(StoredRecord { timestamp, record: Record { key, value } })
}

/// A decoded record whose offset-commit key borrows its strings from the
/// payload. Offset commits are the bulk of every log; replaying them this
/// way allocates only for keys not seen before (the recovery profile was
/// dominated by allocating and hashing owned keys).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RecordView<'a> {
    Offset { timestamp: i64, group: &'a str, topic: &'a str, partition: i32, value: Option<OffsetValue> },
    Other(StoredRecord),
}

fn str_of(bytes: &[u8]) -> Result<&str, RecordError> {
    crate::text::utf8(bytes).ok_or(RecordError::Invalid)
}

/// Decodes a log payload, borrowing offset keys (see [`RecordView`]).
pub fn decode_view(payload: &[u8]) -> Result<RecordView<'_>, RecordError> {
    let mut r = Reader::new(payload);
    let format = r.u8()?;
    if format != 0 {
        return Err(RecordError::Format(format));
    }
    let timestamp = r.i64()?;
    let key_len = r.i32()?;
    if key_len < 0 {
        return Err(RecordError::Invalid);
    }
    let key_bytes = r.take(key_len as usize)?;
    let mut k = Reader::new(key_bytes);
    match k.i16()? {
        0 | 1 => {
            let group = match k.len(false)? {
                Some(n) => str_of(k.take(n)?)?,
                None => return Err(RecordError::Invalid),
            };
            let topic = match k.len(false)? {
                Some(n) => str_of(k.take(n)?)?,
                None => return Err(RecordError::Invalid),
            };
            let partition = k.i32()?;
            if k.buf.has_remaining() {
                return Err(RecordError::Trailing);
            }
            let value = match r.i32()? {
                -1 => None,
                n if n >= 0 => Some(decode_offset_value(r.take(n as usize)?)?),
                _ => return Err(RecordError::Invalid),
            };
            if r.buf.has_remaining() {
                return Err(RecordError::Trailing);
            }
            Ok(RecordView::Offset { timestamp, group, topic, partition, value })
        }
        _ => decode(payload).map(RecordView::Other),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn views_agree_with_owned_decoding() {
        for rec in [
            Record::offset(
                "g",
                "t",
                3,
                OffsetValue {
                    offset: 1,
                    leader_epoch: 2,
                    metadata: "m".into(),
                    commit_timestamp: 3,
                    expire_timestamp: None,
                },
            ),
            Record::offset_tombstone("g", "t", 3),
            Record::group_tombstone("g"),
        ] {
            let p = encode(&rec, 7).unwrap();
            let owned = decode(&p).unwrap();
            match decode_view(&p).unwrap() {
                RecordView::Offset { timestamp, group, topic, partition, value } => {
                    assert_eq!(timestamp, owned.timestamp);
                    let want = Record {
                        key: RecordKey::Offset { group: group.into(), topic: topic.into(), partition },
                        value: value.map(RecordValue::Offset),
                    };
                    assert_eq!(want, owned.record);
                }
                RecordView::Other(o) => assert_eq!(o, owned),
            }
        }
        let p = encode(&Record::offset_tombstone("g", "t", 3), 7).unwrap();
        for n in 0..p.len() {
            assert!(decode_view(&p[..n]).is_err());
        }
    }

    #[test]
    fn a_write_encoded_in_the_shared_buffer_is_the_records_own_payloads() {
        let value = |expire| OffsetValue {
            offset: 42,
            leader_epoch: 5,
            metadata: "meta".into(),
            commit_timestamp: 1_000,
            expire_timestamp: expire,
        };
        let records = [
            Record::offset("g", "t", 3, value(None)),
            Record::offset("g", "t", 4, value(Some(9_000))),
            Record::offset_tombstone("g", "t", 5),
            Record::group_tombstone("g"),
        ];
        let mut encoded = EncodedRecords::default();
        for r in &records {
            encoded.push(r, 7).unwrap();
        }
        let each: Vec<Bytes> = records.iter().map(|r| encode(r, 7).unwrap()).collect();
        assert!(encoded.iter().eq(each.iter().map(|b| &b[..])));
        // The commit path's direct encoding writes the same bytes.
        let mut direct = EncodedRecords::default();
        direct.push_offset("g", "t", 3, &value(None), 7).unwrap();
        direct.push_offset("g", "t", 4, &value(Some(9_000)), 7).unwrap();
        assert!(direct.iter().eq(each[..2].iter().map(|b| &b[..])));
        encoded.clear();
        assert!(encoded.is_empty() && encoded.iter().next().is_none());
    }

    #[test]
    fn a_record_that_cannot_be_encoded_leaves_nothing_behind() {
        let mut encoded = EncodedRecords::default();
        encoded.push(&Record::group_tombstone("g"), 1).unwrap();
        let too_long = "t".repeat(40_000);
        assert!(encoded.push(&Record::offset_tombstone("g", &too_long, 0), 1).is_err());
        assert_eq!(encoded.len(), 1);
        assert!(encoded.iter().eq([&encode(&Record::group_tombstone("g"), 1).unwrap()[..]]));
    }

    #[test]
    fn the_shared_buffer_does_not_keep_a_large_writes_memory() {
        let mut encoded = EncodedRecords::default();
        let big = "m".repeat(30_000);
        for p in 0..4 {
            let v = OffsetValue {
                offset: 1,
                leader_epoch: -1,
                metadata: big.clone(),
                commit_timestamp: 0,
                expire_timestamp: None,
            };
            encoded.push_offset("g", "t", p, &v, 0).unwrap();
        }
        assert!(encoded.buf.capacity() > KEPT_ENCODING_BYTES);
        encoded.clear();
        assert!(encoded.buf.capacity() <= KEPT_ENCODING_BYTES);
    }

    fn group_value() -> GroupValue {
        GroupValue {
            protocol_type: "consumer".into(),
            generation: 7,
            protocol: Some("range".into()),
            leader: Some("m-1".into()),
            current_state_timestamp: 1_700_000_000_000,
            members: vec![MemberValue {
                member_id: "m-1".into(),
                group_instance_id: Some("i-1".into()),
                client_id: "c".into(),
                client_host: "/127.0.0.1".into(),
                rebalance_timeout: 300_000,
                session_timeout: 45_000,
                subscription: Bytes::from_static(b"\x00\x01sub"),
                assignment: Bytes::from_static(b"\x00\x01asg"),
            }],
        }
    }

    #[test]
    fn records_round_trip() {
        let records = vec![
            Record::offset(
                "g",
                "t",
                3,
                OffsetValue {
                    offset: 42,
                    leader_epoch: 5,
                    metadata: "meta".into(),
                    commit_timestamp: 9,
                    expire_timestamp: None,
                },
            ),
            Record::offset(
                "g",
                "t",
                4,
                OffsetValue {
                    offset: 1,
                    leader_epoch: -1,
                    metadata: "".into(),
                    commit_timestamp: 9,
                    expire_timestamp: Some(99),
                },
            ),
            Record::offset_tombstone("g", "t", 3),
            Record::group("g", group_value()),
            Record::group_tombstone("g"),
        ];
        for rec in records {
            let payload = encode(&rec, 1234).unwrap();
            let back = decode(&payload).unwrap();
            assert_eq!(back.timestamp, 1234);
            // v1 values do not carry a leader epoch.
            let mut want = rec.clone();
            if let Some(RecordValue::Offset(v)) = &mut want.value {
                if v.expire_timestamp.is_some() {
                    v.leader_epoch = -1;
                }
            }
            assert_eq!(back.record, want);
        }
    }

    #[test]
    fn a_string_longer_than_kafkas_schema_allows_is_refused_not_wrapped() {
        let long = "g".repeat(i16::MAX as usize + 1);
        assert_eq!(encode(&Record::group_tombstone(&long), 1), Err(RecordError::StringTooLong(long.len())));
        let fits = "g".repeat(i16::MAX as usize);
        let payload = encode(&Record::group_tombstone(&fits), 1).unwrap();
        assert_eq!(decode(&payload).unwrap().record.key.group(), fits);
    }

    #[test]
    fn keys_use_kafkas_layout() {
        let mut b = BytesMut::new();
        encode_key(&RecordKey::Offset { group: "g".into(), topic: "t".into(), partition: 2 }, &mut b).unwrap();
        assert_eq!(&b[..], &[0, 1, 0, 1, b'g', 0, 1, b't', 0, 0, 0, 2]);
        let mut b = BytesMut::new();
        encode_key(&RecordKey::Group { group: "g".into() }, &mut b).unwrap();
        assert_eq!(&b[..], &[0, 2, 0, 1, b'g']);
    }

    #[test]
    fn offset_value_v3_layout() {
        let mut b = BytesMut::new();
        encode_value(
            &RecordValue::Offset(OffsetValue {
                offset: 1,
                leader_epoch: 2,
                metadata: "m".into(),
                commit_timestamp: 3,
                expire_timestamp: None,
            }),
            &mut b,
        )
        .unwrap();
        assert_eq!(&b[..], &[0, 3, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 2, 0, 1, b'm', 0, 0, 0, 0, 0, 0, 0, 3]);
    }

    #[test]
    fn older_and_flexible_value_versions_are_read() {
        // OffsetCommitValue v0: offset, metadata, commit timestamp.
        let v0 = [0u8, 0, 0, 0, 0, 0, 0, 0, 0, 5, 0, 0, 0, 0, 0, 0, 0, 0, 0, 7];
        let key = RecordKey::Offset { group: "g".into(), topic: "t".into(), partition: 0 };
        assert_eq!(
            decode_value(&key, &v0).unwrap(),
            RecordValue::Offset(OffsetValue {
                offset: 5,
                leader_epoch: -1,
                metadata: String::new(),
                commit_timestamp: 7,
                expire_timestamp: None
            })
        );
        // OffsetCommitValue v4 (flexible): offset, epoch, compact metadata, timestamp, tags.
        let v4 = [0u8, 4, 0, 0, 0, 0, 0, 0, 0, 5, 0, 0, 0, 1, 2, b'x', 0, 0, 0, 0, 0, 0, 0, 7, 0];
        assert_eq!(
            decode_value(&key, &v4).unwrap(),
            RecordValue::Offset(OffsetValue {
                offset: 5,
                leader_epoch: 1,
                metadata: "x".into(),
                commit_timestamp: 7,
                expire_timestamp: None
            })
        );
        // GroupMetadataValue v0 with no members.
        let g0 = [
            0u8, 0, 0, 8, b'c', b'o', b'n', b's', b'u', b'm', b'e', b'r', 0, 0, 0, 1, 0xff, 0xff, 0xff, 0xff, 0, 0, 0,
            0,
        ];
        let gkey = RecordKey::Group { group: "g".into() };
        match decode_value(&gkey, &g0).unwrap() {
            RecordValue::Group(g) => {
                assert_eq!(g.protocol_type, "consumer");
                assert_eq!(g.generation, 1);
                assert_eq!(g.current_state_timestamp, -1);
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn corrupt_payloads_are_errors_not_panics() {
        let payload = encode(&Record::group("g", group_value()), 1).unwrap();
        for n in 0..payload.len() {
            assert!(decode(&payload[..n]).is_err(), "prefix of {n} bytes");
        }
        let mut huge = BytesMut::new();
        huge.put_u8(0);
        huge.put_i64(0);
        huge.put_i32(5);
        huge.put_slice(&[0, 2, 0, 1, b'g']);
        huge.put_i32(15);
        huge.put_slice(&[0, 3, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0xff]);
        assert!(decode(&huge).is_err());
        assert_eq!(decode(&[1]).unwrap_err(), RecordError::Format(1));
    }
}
