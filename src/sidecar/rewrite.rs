//! Rewrites the broker addresses in forwarded responses, so that clients
//! only ever learn kcoord's addresses.
//!
//! Node ids stay the upstream's broker ids (clients loop on NOT_LEADER when
//! a leader id and its endpoint disagree); only host and port change, to
//! the kcoord node that fronts that broker. A broker no kcoord node fronts
//! is left out rather than shown with its upstream address, and every kcoord
//! node stays listed even while its broker is missing from the upstream's
//! answer: librdkafka ≥ 2.10 forgets brokers Metadata does not list, and a
//! node whose broker is down still coordinates its groups.

use std::collections::BTreeMap;

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::describe_cluster_response::DescribeClusterBroker;
use kafka_protocol::messages::metadata_response::MetadataResponseBroker;
use kafka_protocol::messages::{
    fetch_response, produce_response, ApiKey, BrokerId, DescribeClusterResponse, FetchResponse,
    FindCoordinatorResponse, MetadataResponse, ProduceResponse, ResponseHeader,
};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};

use super::upstream::UpstreamTopic;
use crate::protocol::codec;

/// Where clients reach each kcoord node, by the upstream broker id it fronts.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodeEndpoints(pub BTreeMap<i32, (String, i32)>);

impl NodeEndpoints {
    pub fn get(&self, id: i32) -> Option<&(String, i32)> {
        self.0.get(&id)
    }
}

/// Which rewrite a forwarded response needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rewrite {
    Metadata,
    DescribeCluster,
    /// FindCoordinator for transactional ids (group keys are answered locally).
    FindCoordinator,
    /// Produce v10+: NodeEndpoints of new leaders.
    Produce,
    /// Fetch v16+: NodeEndpoints of new leaders.
    Fetch,
}

impl Rewrite {
    /// The rewrite a response to `api_key` at `version` needs, if any.
    pub fn for_request(api_key: i16, version: i16) -> Option<Rewrite> {
        match ApiKey::try_from(api_key).ok()? {
            ApiKey::Metadata => Some(Rewrite::Metadata),
            ApiKey::DescribeCluster => Some(Rewrite::DescribeCluster),
            ApiKey::FindCoordinator => Some(Rewrite::FindCoordinator),
            ApiKey::Produce if version >= 10 => Some(Rewrite::Produce),
            ApiKey::Fetch if version >= 16 => Some(Rewrite::Fetch),
            _ => None,
        }
    }

    fn api(self) -> ApiKey {
        match self {
            Rewrite::Metadata => ApiKey::Metadata,
            Rewrite::DescribeCluster => ApiKey::DescribeCluster,
            Rewrite::FindCoordinator => ApiKey::FindCoordinator,
            Rewrite::Produce => ApiKey::Produce,
            Rewrite::Fetch => ApiKey::Fetch,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Rewrite::Metadata => "Metadata",
            Rewrite::DescribeCluster => "DescribeCluster",
            Rewrite::FindCoordinator => "FindCoordinator",
            Rewrite::Produce => "Produce",
            Rewrite::Fetch => "Fetch",
        }
    }
}

/// What a rewrite produced.
#[derive(Debug)]
pub struct Rewritten {
    /// The frame to send to the client (length prefix included).
    pub frame: Bytes,
    /// Topics a Metadata response described (for the topic catalog).
    pub topics: Vec<UpstreamTopic>,
    /// A Metadata or DescribeCluster response listed a broker no kcoord
    /// node fronts (it was left out).
    pub unfronted_brokers: bool,
}

/// Points NodeEndpoints leader hints (Produce and Fetch have the same
/// fields in two types) at kcoord nodes; hints for brokers no node fronts
/// are dropped (the client then refreshes its Metadata). Evaluates to
/// whether anything was there to change.
macro_rules! leader_hints {
    ($hints:expr, $module:ident, $nodes:expr) => {{
        let changed = !$hints.is_empty();
        $hints = $hints
            .iter()
            .filter_map(|e| {
                let (host, port) = $nodes.get(e.node_id.0)?;
                Some(
                    $module::NodeEndpoint::default()
                        .with_node_id(e.node_id)
                        .with_host(StrBytes::from_string(host.clone()))
                        .with_port(*port)
                        .with_rack(e.rack.clone()),
                )
            })
            .collect();
        changed
    }};
}

/// Rewrites one response frame (length prefix included) to a request of
/// `version`.
pub fn rewrite(kind: Rewrite, version: i16, frame: Bytes, nodes: &NodeEndpoints) -> Result<Rewritten, String> {
    let mut topics = Vec::new();
    let mut unfronted_brokers = false;
    let frame = match kind {
        Rewrite::Metadata => edit::<MetadataResponse>(kind, version, frame, |r| {
            topics = UpstreamTopic::all_in(r);
            unfronted_brokers = r.brokers.iter().any(|b| nodes.get(b.node_id.0).is_none());
            r.brokers = brokers(
                &r.brokers,
                nodes,
                |b| (b.node_id.0, b.rack.clone()),
                |id, host, port, rack| {
                    MetadataResponseBroker::default()
                        .with_node_id(BrokerId(id))
                        .with_host(host)
                        .with_port(port)
                        .with_rack(rack)
                },
            );
            true
        })?,
        Rewrite::DescribeCluster => edit::<DescribeClusterResponse>(kind, version, frame, |r| {
            r.brokers = brokers(
                &r.brokers,
                nodes,
                |b| (b.broker_id.0, b.rack.clone()),
                |id, host, port, rack| {
                    DescribeClusterBroker::default()
                        .with_broker_id(BrokerId(id))
                        .with_host(host)
                        .with_port(port)
                        .with_rack(rack)
                },
            );
            true
        })?,
        Rewrite::FindCoordinator => edit::<FindCoordinatorResponse>(kind, version, frame, |r| {
            if version < 4 {
                point_coordinator(
                    &mut r.node_id,
                    &mut r.host,
                    &mut r.port,
                    &mut r.error_code,
                    &mut r.error_message,
                    nodes,
                );
            } else {
                for c in &mut r.coordinators {
                    point_coordinator(
                        &mut c.node_id,
                        &mut c.host,
                        &mut c.port,
                        &mut c.error_code,
                        &mut c.error_message,
                        nodes,
                    );
                }
            }
            true
        })?,
        Rewrite::Produce => {
            edit::<ProduceResponse>(kind, version, frame, |r| leader_hints!(r.node_endpoints, produce_response, nodes))?
        }
        Rewrite::Fetch => {
            edit::<FetchResponse>(kind, version, frame, |r| leader_hints!(r.node_endpoints, fetch_response, nodes))?
        }
    };
    Ok(Rewritten { frame, topics, unfronted_brokers })
}

/// Decodes the response, lets `f` change it, and encodes it again with the
/// same header; when `f` changes nothing the original bytes are kept.
fn edit<R: Decodable + Encodable>(
    kind: Rewrite,
    version: i16,
    frame: Bytes,
    f: impl FnOnce(&mut R) -> bool,
) -> Result<Bytes, String> {
    let header_version = kind.api().response_header_version(version);
    let mut body = frame.slice(4.min(frame.len())..);
    let len = body.len();
    let header = codec::guarded(len, || ResponseHeader::decode(&mut body, header_version))
        .map_err(|e| format!("{} v{version} response header: {e}", kind.name()))?;
    let mut resp = codec::guarded(len, || R::decode(&mut body, version))
        .map_err(|e| format!("{} v{version} response: {e}", kind.name()))?;
    if !f(&mut resp) {
        return Ok(frame);
    }
    let mut out = BytesMut::with_capacity(frame.len() + 64);
    out.put_i32(0);
    header.encode(&mut out, header_version).map_err(|e| format!("{} response header: {e}", kind.name()))?;
    resp.encode(&mut out, version).map_err(|e| format!("{} v{version} response: {e}", kind.name()))?;
    let len = i32::try_from(out.len() - 4).map_err(|_| format!("{} response too large", kind.name()))?;
    crate::be_int::set_i32_at(&mut out, 0, len);
    metrics::counter!("kcoord_sidecar_rewrites_total", "api" => kind.name()).increment(1);
    Ok(out.freeze())
}

/// The broker list clients see: each upstream broker that a kcoord node
/// fronts, at that node's address (upstream order, rack kept), then every
/// kcoord node the upstream did not list.
fn brokers<B, F, M>(upstream: &[B], nodes: &NodeEndpoints, id_rack: F, make: M) -> Vec<B>
where
    F: Fn(&B) -> (i32, Option<StrBytes>),
    M: Fn(i32, StrBytes, i32, Option<StrBytes>) -> B,
{
    let mut out = Vec::with_capacity(nodes.0.len());
    let mut listed = Vec::with_capacity(upstream.len());
    for b in upstream {
        let (id, rack) = id_rack(b);
        if let Some((host, port)) = nodes.get(id) {
            if !listed.contains(&id) {
                listed.push(id);
                out.push(make(id, StrBytes::from_string(host.clone()), *port, rack));
            }
        }
    }
    for (id, (host, port)) in &nodes.0 {
        if !listed.contains(id) {
            out.push(make(*id, StrBytes::from_string(host.clone()), *port, None));
        }
    }
    out
}

/// Points a transaction coordinator answer at the kcoord node that fronts
/// it, or turns it into COORDINATOR_NOT_AVAILABLE (retriable) when none does.
fn point_coordinator(
    node_id: &mut BrokerId,
    host: &mut StrBytes,
    port: &mut i32,
    error_code: &mut i16,
    error_message: &mut Option<StrBytes>,
    nodes: &NodeEndpoints,
) {
    if *error_code != 0 {
        *host = StrBytes::from_static_str("");
        *port = -1;
        return;
    }
    match nodes.get(node_id.0) {
        Some((h, p)) => {
            *host = StrBytes::from_string(h.clone());
            *port = *p;
        }
        None => {
            *node_id = BrokerId(-1);
            *host = StrBytes::from_static_str("");
            *port = -1;
            *error_code = crate::error_code::ErrorCode::COORDINATOR_NOT_AVAILABLE.0;
            *error_message = Some(StrBytes::from_static_str("no kcoord node fronts the coordinator's broker"));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::messages::metadata_response::MetadataResponseTopic;
    use kafka_protocol::messages::{find_coordinator_response::Coordinator, TopicName};

    fn nodes() -> NodeEndpoints {
        NodeEndpoints([(1, ("kc1".to_string(), 19001)), (2, ("kc2".to_string(), 19002))].into_iter().collect())
    }

    fn frame<R: Encodable>(api: ApiKey, version: i16, r: &R) -> Bytes {
        let mut out = BytesMut::new();
        out.put_i32(0);
        ResponseHeader::default()
            .with_correlation_id(7)
            .encode(&mut out, api.response_header_version(version))
            .unwrap();
        r.encode(&mut out, version).unwrap();
        let len = (out.len() - 4) as i32;
        out[..4].copy_from_slice(&len.to_be_bytes());
        out.freeze()
    }

    fn parse<R: Decodable>(api: ApiKey, version: i16, frame: &Bytes) -> (i32, R) {
        let mut b = frame.slice(4..);
        let h = ResponseHeader::decode(&mut b, api.response_header_version(version)).unwrap();
        (h.correlation_id, R::decode(&mut b, version).unwrap())
    }

    fn broker(id: i32, host: &str, port: i32) -> MetadataResponseBroker {
        MetadataResponseBroker::default()
            .with_node_id(BrokerId(id))
            .with_host(StrBytes::from_string(host.into()))
            .with_port(port)
    }

    #[test]
    fn metadata_keeps_broker_ids_and_shows_only_kcoord_addresses() {
        for version in [1, 9, 12] {
            let upstream = MetadataResponse::default()
                .with_brokers(vec![broker(1, "up1", 9091), broker(3, "up3", 9093)])
                .with_controller_id(BrokerId(1))
                .with_topics(vec![MetadataResponseTopic::default()
                    .with_name(Some(TopicName(StrBytes::from_static_str("t"))))
                    .with_partitions(
                        (0..3)
                            .map(|i| {
                                kafka_protocol::messages::metadata_response::MetadataResponsePartition::default()
                                    .with_partition_index(i)
                                    .with_leader_id(BrokerId(3))
                            })
                            .collect(),
                    )]);
            let out =
                rewrite(Rewrite::Metadata, version, frame(ApiKey::Metadata, version, &upstream), &nodes()).unwrap();
            let (correlation, r): (i32, MetadataResponse) = parse(ApiKey::Metadata, version, &out.frame);
            assert_eq!(correlation, 7);
            let listed: Vec<(i32, String, i32)> =
                r.brokers.iter().map(|b| (b.node_id.0, b.host.to_string(), b.port)).collect();
            // Broker 3 has no kcoord node: left out. Node 2 is listed although the upstream lost its broker.
            assert_eq!(listed, vec![(1, "kc1".into(), 19001), (2, "kc2".into(), 19002)], "v{version}");
            assert_eq!(r.controller_id.0, 1);
            assert_eq!(
                out.topics,
                vec![UpstreamTopic { name: "t".into(), id: uuid::Uuid::nil(), partitions: 3, leaders: vec![3; 3] }]
            );
        }
    }

    #[test]
    fn a_transaction_coordinator_no_node_fronts_is_not_available_instead_of_leaking() {
        let up = FindCoordinatorResponse::default()
            .with_node_id(BrokerId(3))
            .with_host(StrBytes::from_static_str("up3"))
            .with_port(9093);
        let out = rewrite(Rewrite::FindCoordinator, 1, frame(ApiKey::FindCoordinator, 1, &up), &nodes()).unwrap();
        let (_, r): (i32, FindCoordinatorResponse) = parse(ApiKey::FindCoordinator, 1, &out.frame);
        assert_eq!((r.node_id.0, r.host.to_string(), r.port, r.error_code), (-1, String::new(), -1, 15));

        let up = FindCoordinatorResponse::default().with_coordinators(vec![Coordinator::default()
            .with_key(StrBytes::from_static_str("tx"))
            .with_node_id(BrokerId(2))
            .with_host(StrBytes::from_static_str("up2"))
            .with_port(9092)]);
        let out = rewrite(Rewrite::FindCoordinator, 4, frame(ApiKey::FindCoordinator, 4, &up), &nodes()).unwrap();
        let (_, r): (i32, FindCoordinatorResponse) = parse(ApiKey::FindCoordinator, 4, &out.frame);
        let c = &r.coordinators[0];
        assert_eq!((c.node_id.0, c.host.to_string(), c.port), (2, "kc2".into(), 19002));
    }

    #[test]
    fn leader_hints_in_produce_and_fetch_point_at_kcoord_nodes() {
        let up = ProduceResponse::default().with_node_endpoints(vec![
            produce_response::NodeEndpoint::default()
                .with_node_id(BrokerId(2))
                .with_host(StrBytes::from_static_str("up2"))
                .with_port(9092),
            produce_response::NodeEndpoint::default()
                .with_node_id(BrokerId(3))
                .with_host(StrBytes::from_static_str("up3"))
                .with_port(9093),
        ]);
        let out = rewrite(Rewrite::Produce, 10, frame(ApiKey::Produce, 10, &up), &nodes()).unwrap();
        let (_, r): (i32, ProduceResponse) = parse(ApiKey::Produce, 10, &out.frame);
        let eps: Vec<(i32, String, i32)> =
            r.node_endpoints.iter().map(|e| (e.node_id.0, e.host.to_string(), e.port)).collect();
        assert_eq!(eps, vec![(2, "kc2".into(), 19002)]);

        let up = FetchResponse::default().with_node_endpoints(vec![fetch_response::NodeEndpoint::default()
            .with_node_id(BrokerId(1))
            .with_host(StrBytes::from_static_str("up1"))
            .with_port(9091)]);
        let out = rewrite(Rewrite::Fetch, 16, frame(ApiKey::Fetch, 16, &up), &nodes()).unwrap();
        let (_, r): (i32, FetchResponse) = parse(ApiKey::Fetch, 16, &out.frame);
        assert_eq!(r.node_endpoints[0].host.to_string(), "kc1");
    }

    #[test]
    fn a_fetch_without_leader_hints_is_passed_on_byte_for_byte() {
        let up = FetchResponse::default().with_session_id(5);
        let original = frame(ApiKey::Fetch, 16, &up);
        let out = rewrite(Rewrite::Fetch, 16, original.clone(), &nodes()).unwrap();
        assert_eq!(out.frame, original);
    }

    #[test]
    fn a_malformed_response_is_an_error_not_a_panic() {
        let junk = Bytes::from_static(&[0, 0, 0, 6, 0, 0, 0, 7, 0xff, 0xff]);
        for kind in
            [Rewrite::Metadata, Rewrite::DescribeCluster, Rewrite::FindCoordinator, Rewrite::Produce, Rewrite::Fetch]
        {
            let version = if kind == Rewrite::Fetch { 16 } else { 10 };
            assert!(rewrite(kind, version, junk.clone(), &nodes()).is_err(), "{kind:?}");
        }
    }
}
