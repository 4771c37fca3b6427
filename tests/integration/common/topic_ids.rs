//! OffsetCommit and OffsetFetch v10, which name topics by id, written and
//! read here from Kafka's schema (`kafka-protocol` 0.18 stops at v9): the
//! daemon's own codec is not used, so the two check each other.

use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::{MetadataRequest, RequestHeader, ResponseHeader, TopicName};
use kafka_protocol::protocol::{Decodable, Encodable};
use uuid::Uuid;

use super::{sb, Client};

/// The topic ids the daemon's Metadata (v12) reports for `topics`.
pub async fn ids_of(c: &mut Client, topics: &[&str]) -> Vec<Uuid> {
    let req = MetadataRequest::default().with_topics(Some(
        topics.iter().map(|t| MetadataRequestTopic::default().with_name(Some(TopicName(sb(t))))).collect(),
    ));
    let r = c.send(&req, 12).await;
    topics
        .iter()
        .map(|t| r.topics.iter().find(|m| m.name.as_ref().map(|n| n.as_str()) == Some(*t)).expect("listed").topic_id)
        .collect()
}

fn compact_string(b: &mut BytesMut, s: &str) {
    b.put_u8(s.len() as u8 + 1);
    b.put_slice(s.as_bytes());
}

fn compact_len(b: &mut BytesMut, n: usize) {
    b.put_u8(n as u8 + 1);
}

/// Sends a v10 body for `api_key` and returns the response body.
async fn exchange(c: &mut Client, api_key: i16, body: BytesMut) -> Bytes {
    let header = RequestHeader::default()
        .with_request_api_key(api_key)
        .with_request_api_version(10)
        .with_correlation_id(4242)
        .with_client_id(Some(sb("kcoord-test")));
    let mut frame = BytesMut::new();
    header.encode(&mut frame, 2).unwrap();
    frame.extend_from_slice(&body);
    let mut out = BytesMut::new();
    out.put_i32(frame.len() as i32);
    out.extend_from_slice(&frame);
    c.send_raw(&out).await.expect("send");
    let mut resp = c.read_frame().await.expect("response");
    let header = ResponseHeader::decode(&mut resp, 1).unwrap();
    assert_eq!(header.correlation_id, 4242);
    resp
}

/// The body of an OffsetCommit v10 of `offsets` (topic id, [(partition,
/// offset)]) as a generation-less commit.
pub fn commit_body(group: &str, offsets: &[(Uuid, Vec<(i32, i64)>)]) -> BytesMut {
    let mut b = BytesMut::new();
    compact_string(&mut b, group);
    b.put_i32(-1);
    compact_string(&mut b, "");
    b.put_u8(0); // no group instance id
    compact_len(&mut b, offsets.len());
    for (id, partitions) in offsets {
        b.put_slice(id.as_bytes());
        compact_len(&mut b, partitions.len());
        for &(p, offset) in partitions {
            b.put_i32(p);
            b.put_i64(offset);
            b.put_i32(-1);
            compact_string(&mut b, "by-id");
            b.put_u8(0);
        }
        b.put_u8(0);
    }
    b.put_u8(0);
    b
}

/// OffsetCommit v10 of `offsets` (see [`commit_body`]); answers (topic id,
/// [(partition, error)]).
pub async fn commit(c: &mut Client, group: &str, offsets: &[(Uuid, Vec<(i32, i64)>)]) -> Vec<(Uuid, Vec<(i32, i16)>)> {
    let mut r = exchange(c, 8, commit_body(group, offsets)).await;
    r.get_i32(); // throttle
    let topics = (0..r.get_u8() - 1)
        .map(|_| {
            let id = Uuid::from_u128(r.get_u128());
            let partitions = (0..r.get_u8() - 1)
                .map(|_| {
                    let p = (r.get_i32(), r.get_i16());
                    assert_eq!(r.get_u8(), 0, "no tagged fields");
                    p
                })
                .collect();
            assert_eq!(r.get_u8(), 0);
            (id, partitions)
        })
        .collect();
    assert_eq!((r.get_u8(), r.remaining()), (0, 0), "the whole answer read");
    topics
}

/// One partition of an OffsetFetch v10 answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fetched {
    pub partition: i32,
    pub offset: i64,
    pub metadata: String,
    pub error: i16,
}

/// One group of an OffsetFetch v10 answer: its error and topics by id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchedGroup {
    pub error: i16,
    pub topics: Vec<(Uuid, Vec<Fetched>)>,
}

/// The body of an OffsetFetch v10 of `group`'s `topics` (id, partitions),
/// or of every topic when `None`.
pub fn fetch_body(group: &str, topics: Option<&[(Uuid, Vec<i32>)]>) -> BytesMut {
    let mut b = BytesMut::new();
    compact_len(&mut b, 1);
    compact_string(&mut b, group);
    b.put_u8(0); // null member id
    b.put_i32(-1);
    match topics {
        None => b.put_u8(0),
        Some(topics) => {
            compact_len(&mut b, topics.len());
            for (id, partitions) in topics {
                b.put_slice(id.as_bytes());
                compact_len(&mut b, partitions.len());
                for p in partitions {
                    b.put_i32(*p);
                }
                b.put_u8(0);
            }
        }
    }
    b.put_u8(0); // group tags
    b.put_u8(0); // require stable: false
    b.put_u8(0);
    b
}

/// OffsetFetch v10 (see [`fetch_body`]).
pub async fn fetch(c: &mut Client, group: &str, topics: Option<&[(Uuid, Vec<i32>)]>) -> FetchedGroup {
    let mut r = exchange(c, 9, fetch_body(group, topics)).await;
    r.get_i32();
    assert_eq!(r.get_u8(), 2, "one group");
    let n = r.get_u8() as usize - 1;
    let id = r.copy_to_bytes(n);
    assert_eq!(id, group.as_bytes());
    let topics = (0..r.get_u8() - 1)
        .map(|_| {
            let id = Uuid::from_u128(r.get_u128());
            let partitions = (0..r.get_u8() - 1)
                .map(|_| {
                    let partition = r.get_i32();
                    let offset = r.get_i64();
                    r.get_i32();
                    let n = r.get_u8() as usize - 1;
                    let metadata = String::from_utf8(r.copy_to_bytes(n).to_vec()).unwrap();
                    let error = r.get_i16();
                    assert_eq!(r.get_u8(), 0);
                    Fetched { partition, offset, metadata, error }
                })
                .collect();
            assert_eq!(r.get_u8(), 0);
            (id, partitions)
        })
        .collect();
    let error = r.get_i16();
    assert_eq!((r.get_u8(), r.get_u8(), r.remaining()), (0, 0, 0), "the whole answer read");
    FetchedGroup { error, topics }
}
