//! The admin commands wait out a coordinator that is still loading, as
//! Kafka's AdminClient does, instead of failing on the first
//! COORDINATOR_LOAD_IN_PROGRESS. A scripted broker answers the first
//! ListGroups requests with that error.

use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::api_versions_response::ApiVersion;
use kafka_protocol::messages::list_groups_response::ListedGroup;
use kafka_protocol::messages::metadata_response::MetadataResponseBroker;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, StrBytes};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use super::cluster::Cluster;
use super::groups;
use crate::ErrorCode;

/// Serves one connection: ApiVersions, Metadata naming itself, and
/// ListGroups answering LOAD_IN_PROGRESS `loading_answers` times.
async fn scripted_broker(mut stream: TcpStream, port: i32, mut loading_answers: usize) {
    loop {
        let Ok(len) = stream.read_i32().await else { return };
        let mut frame = vec![0u8; len as usize];
        if stream.read_exact(&mut frame).await.is_err() {
            return;
        }
        let mut body = Bytes::from(frame);
        let (key, version) = (body.clone().get_i16(), body.clone().slice(2..).get_i16());
        let api = ApiKey::try_from(key).expect("known api");
        let header = RequestHeader::decode(&mut body, api.request_header_version(version)).expect("header");
        let mut out = BytesMut::new();
        out.put_i32(0);
        let response_header = ResponseHeader::default().with_correlation_id(header.correlation_id);
        macro_rules! answer {
            ($resp:expr, $ty:ty) => {{
                response_header.encode(&mut out, <$ty as HeaderVersion>::header_version(version)).unwrap();
                $resp.encode(&mut out, version).unwrap();
            }};
        }
        match api {
            ApiKey::ApiVersions => {
                let range = |k: ApiKey, max| ApiVersion::default().with_api_key(k as i16).with_max_version(max);
                let r = ApiVersionsResponse::default()
                    .with_api_keys(vec![range(ApiKey::Metadata, 9), range(ApiKey::ListGroups, 4)]);
                answer!(r, ApiVersionsResponse)
            }
            ApiKey::Metadata => {
                let me =
                    MetadataResponseBroker::default().with_host(StrBytes::from_static_str("127.0.0.1")).with_port(port);
                answer!(MetadataResponse::default().with_brokers(vec![me]), MetadataResponse)
            }
            ApiKey::ListGroups => {
                let r = if loading_answers > 0 {
                    loading_answers -= 1;
                    ListGroupsResponse::default().with_error_code(ErrorCode::COORDINATOR_LOAD_IN_PROGRESS.0)
                } else {
                    ListGroupsResponse::default().with_groups(vec![ListedGroup::default()
                        .with_group_id(GroupId(StrBytes::from_static_str("orders")))
                        .with_group_state(StrBytes::from_static_str("Stable"))])
                };
                answer!(r, ListGroupsResponse)
            }
            other => panic!("unexpected request {other:?}"),
        }
        let n = (out.len() - 4) as i32;
        out[..4].copy_from_slice(&n.to_be_bytes());
        if stream.write_all(&out).await.is_err() {
            return;
        }
    }
}

#[tokio::test]
async fn groups_list_waits_for_a_coordinator_that_is_still_loading() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        let (stream, _) = listener.accept().await.unwrap();
        scripted_broker(stream, port as i32, 3).await;
    });
    let mut cluster = Cluster::connect(&format!("127.0.0.1:{port}")).await.unwrap();
    let out =
        groups::list(&mut cluster, true, &[], false, &[]).await.expect("list succeeds once the coordinator has loaded");
    assert_eq!(out, "GROUP  STATE\norders Stable\n");
}
