//! OffsetCommit v10 (Kafka 4.1), which names topics by id, for the commit
//! scenario's `--by-topic-id`: `kafka-protocol` stops at v9, so requests
//! are written and answers read here, from Kafka's schema
//! (`OffsetCommitRequest.json` / `OffsetCommitResponse.json`).

use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::{MetadataRequest, TopicName};
use kcoord::protocol::client::{s, ClientError, Connection};
use uuid::Uuid;

use crate::swarm::Member;

/// The version that names topics by id.
pub const VERSION: i16 = 10;
/// OffsetCommit v10's response header (flexible: v1).
pub const RESPONSE_HEADER_VERSION: i16 = 1;
const OFFSET_COMMIT: i16 = 8;

/// The id the broker's Metadata (v12) gives `topic`.
pub async fn topic_id(conn: &mut Connection, topic: &str) -> Result<Uuid, ClientError> {
    let req = MetadataRequest::default()
        .with_topics(Some(vec![MetadataRequestTopic::default().with_name(Some(TopicName(s(topic))))]));
    let r = conn.call(&req, 12).await?;
    match r.topics.first() {
        Some(t) if t.error_code == 0 && !t.topic_id.is_nil() => Ok(t.topic_id),
        other => Err(ClientError::Decode(format!("no id for topic {topic}: {:?}", other.map(|t| t.error_code)))),
    }
}

fn unsigned_varint(b: &mut BytesMut, mut v: u32) {
    while v >= 0x80 {
        b.put_u8((v as u8 & 0x7f) | 0x80);
        v >>= 7;
    }
    b.put_u8(v as u8);
}

fn compact_string(b: &mut BytesMut, s: &str) {
    unsigned_varint(b, s.len() as u32 + 1);
    b.put_slice(s.as_bytes());
}

/// A v10 commit frame of `m`'s offsets for partitions `0..partitions` of
/// topic `id`, with the same offsets and metadata as the v2–v9 scenario;
/// its correlation id is patched on every send.
pub fn commit_frame(m: &Member, id: Uuid, partitions: i32, metadata: &str) -> Bytes {
    let mut b = BytesMut::with_capacity(128);
    b.put_i32(0); // the frame's length, set below
    b.put_i16(OFFSET_COMMIT);
    b.put_i16(VERSION);
    b.put_i32(0); // correlation id
    b.put_i16("kcoord-bench".len() as i16);
    b.put_slice(b"kcoord-bench");
    b.put_u8(0); // header tags
    compact_string(&mut b, &m.group);
    b.put_i32(m.generation);
    compact_string(&mut b, &m.id);
    b.put_u8(0); // no group instance id
    unsigned_varint(&mut b, 2); // one topic
    b.put_slice(id.as_bytes());
    unsigned_varint(&mut b, partitions as u32 + 1);
    for p in 0..partitions {
        b.put_i32(p);
        b.put_i64(1000 + p as i64);
        b.put_i32(-1); // no leader epoch
        compact_string(&mut b, metadata);
        b.put_u8(0);
    }
    b.put_u8(0); // topic tags
    b.put_u8(0); // request tags
    let len = b.len() as i32 - 4;
    b[..4].copy_from_slice(&len.to_be_bytes());
    b.freeze()
}

fn malformed(what: &str) -> ClientError {
    ClientError::Decode(format!("OffsetCommit v10 answer: {what}"))
}

fn varint(b: &mut Bytes) -> Result<u32, ClientError> {
    let mut v = 0u32;
    for shift in (0..35).step_by(7) {
        if !b.has_remaining() {
            return Err(malformed("cut short"));
        }
        let byte = b.get_u8();
        v |= u32::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return Ok(v);
        }
    }
    Err(malformed("varint too long"))
}

/// Skips a tagged-field section.
fn skip_tags(b: &mut Bytes) -> Result<(), ClientError> {
    for _ in 0..varint(b)? {
        varint(b)?;
        let size = varint(b)? as usize;
        if b.remaining() < size {
            return Err(malformed("cut short"));
        }
        b.advance(size);
    }
    Ok(())
}

/// A v10 answer's (last error code, partitions committed), as the v2–v9
/// scenario counts them.
pub fn commit_outcome(mut b: Bytes) -> Result<(i16, u64), ClientError> {
    let need = |b: &Bytes, n: usize| if b.remaining() < n { Err(malformed("cut short")) } else { Ok(()) };
    need(&b, 4)?;
    b.get_i32(); // throttle time
    let (mut error, mut ok) = (0, 0);
    for _ in 1..varint(&mut b)? {
        need(&b, 16)?;
        b.advance(16); // topic id
        for _ in 1..varint(&mut b)? {
            need(&b, 6)?;
            b.get_i32();
            match b.get_i16() {
                0 => ok += 1,
                e => error = e,
            }
            skip_tags(&mut b)?;
        }
        skip_tags(&mut b)?;
    }
    skip_tags(&mut b)?;
    Ok((error, ok))
}

#[cfg(test)]
mod tests {
    use kcoord::coordinator::messages::{OffsetCommitResponse, PartitionError, TopicErrors};
    use kcoord::protocol::api::offset_commit;
    use kcoord::ErrorCode;

    use super::*;
    use crate::swarm::Phase;

    fn member() -> Member {
        Member {
            group: "g".into(),
            id: "m-1".into(),
            generation: 3,
            phase: Phase::Stable,
            synced_at: None,
            joined_at: None,
            last_heartbeat: None,
        }
    }

    /// The bench's codec and the daemon's are written separately from the
    /// schema; each reads what the other writes.
    #[test]
    fn the_daemon_reads_the_frames_and_the_bench_reads_the_daemons_answers() {
        let id = Uuid::from_u128(7);
        let frame = commit_frame(&member(), id, 3, "meta");
        let mut body = frame.slice(4..);
        assert_eq!((body.get_i16(), body.get_i16(), body.get_i32()), (OFFSET_COMMIT, VERSION, 0));
        body.advance(2 + "kcoord-bench".len() + 1);
        let decoded = offset_commit::decode(&mut body, VERSION).expect("the daemon reads it");
        assert_eq!(decoded.topic_ids, vec![id]);
        let req = decoded.req;
        assert_eq!((req.group_id.as_str(), req.generation_id, req.member_id.as_str()), ("g", 3, "m-1"));
        let offsets: Vec<(i32, i64)> = req.topics[0].partitions.iter().map(|p| (p.partition, p.offset)).collect();
        assert_eq!(offsets, vec![(0, 1000), (1, 1001), (2, 1002)]);

        let partitions = [ErrorCode::NONE, ErrorCode::ILLEGAL_GENERATION, ErrorCode::NONE]
            .iter()
            .enumerate()
            .map(|(p, &error)| PartitionError { partition: p as i32, error })
            .collect();
        let resp = OffsetCommitResponse { topics: vec![TopicErrors { name: "t".into(), partitions }] };
        let mut out = BytesMut::new();
        offset_commit::encode(&resp, VERSION, &[id], &mut out).expect("encoded");
        assert_eq!(commit_outcome(out.freeze()).expect("read"), (ErrorCode::ILLEGAL_GENERATION.0, 2));
    }

    #[test]
    fn a_cut_answer_is_an_error() {
        let mut out = BytesMut::new();
        let resp = OffsetCommitResponse { topics: vec![TopicErrors { name: "t".into(), partitions: vec![] }] };
        offset_commit::encode(&resp, VERSION, &[Uuid::from_u128(1)], &mut out).expect("encoded");
        let whole = out.freeze();
        for cut in 0..whole.len() {
            assert!(commit_outcome(whole.slice(..cut)).is_err(), "cut at {cut}");
        }
    }
}
