//! Talking to a Kafka-compatible cluster for the admin CLI: bootstrap,
//! find a group's coordinator, partition leaders, and list offsets.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::Request;

use crate::protocol::client::{s, ClientError, Connection};
use crate::security::client::ClientSecurity;

const TIMEOUT: Duration = Duration::from_secs(30);
const CLIENT_ID: &str = "kcoord-admin";

/// An error for the operator, with Kafka's error name where there is one.
#[derive(Debug, thiserror::Error)]
pub enum AdminError {
    #[error("{0}")]
    Client(#[from] ClientError),
    #[error("{0}")]
    Message(String),
    /// A command that did part of its work (reset-offsets of several
    /// groups): `output` is printed as success would be, then the error.
    #[error("{error}")]
    AfterOutput { output: String, error: String },
}

pub type Result<T> = std::result::Result<T, AdminError>;

pub fn error_name(code: i16) -> String {
    format!("{:?}", crate::ErrorCode(code))
}

/// The coordinator errors Kafka's AdminClient retries until its timeout:
/// a coordinator still loading its log, not yet available, or moved.
/// `kafka-consumer-groups.sh` never shows them to the operator, and a
/// freshly started kcoord answers LOAD_IN_PROGRESS from shards still
/// replaying while others already serve.
pub fn is_retriable(code: i16) -> bool {
    use crate::ErrorCode as E;
    [E::COORDINATOR_LOAD_IN_PROGRESS, E::COORDINATOR_NOT_AVAILABLE, E::NOT_COORDINATOR]
        .contains(&crate::ErrorCode(code))
}

/// Pause between retries of a retriable answer (the AdminClient's
/// `retry.backoff.ms` default).
const RETRY_BACKOFF: Duration = Duration::from_millis(100);

/// Broker connections, opened on demand.
pub struct Cluster {
    bootstrap: String,
    /// TLS and SASL of every connection (`--command-config`).
    security: ClientSecurity,
    pub brokers: HashMap<i32, String>,
    conns: HashMap<String, Connection>,
}

/// Partitions of the topics asked about: name → partition count.
pub type Partitions = BTreeMap<String, i32>;

impl Cluster {
    pub async fn connect(bootstrap: &str) -> Result<Cluster> {
        Self::connect_with(bootstrap, ClientSecurity::plaintext()).await
    }

    /// Connects with Kafka-style client security settings.
    pub async fn connect_with(bootstrap: &str, security: ClientSecurity) -> Result<Cluster> {
        let mut c =
            Cluster { bootstrap: bootstrap.to_string(), security, brokers: HashMap::new(), conns: HashMap::new() };
        c.conn(bootstrap).await?;
        Ok(c)
    }

    /// A negotiated connection to `addr`.
    pub async fn conn(&mut self, addr: &str) -> Result<&mut Connection> {
        if !self.conns.contains_key(addr) {
            let c = tokio::time::timeout(TIMEOUT, Connection::connect_secure(addr, CLIENT_ID, &self.security))
                .await
                .map_err(|_| ClientError::Timeout(TIMEOUT))??;
            self.conns.insert(addr.to_string(), c);
        }
        self.conns.get_mut(addr).ok_or_else(|| AdminError::Message("connection lost".into()))
    }

    /// Sends `req` to `addr` until the answer's error, as read by
    /// `error_of`, is not retriable or the admin timeout has passed; returns
    /// the last answer either way, for the caller to report.
    pub async fn call_settled<R: Request>(
        &mut self,
        addr: &str,
        req: &R,
        version: i16,
        error_of: impl Fn(&R::Response) -> i16,
    ) -> Result<R::Response> {
        let deadline = tokio::time::Instant::now() + TIMEOUT;
        loop {
            let conn = self.conn(addr).await?;
            let r = conn.call_timeout(req, version, TIMEOUT).await?;
            if !is_retriable(error_of(&r)) || tokio::time::Instant::now() + RETRY_BACKOFF >= deadline {
                return Ok(r);
            }
            tokio::time::sleep(RETRY_BACKOFF).await;
        }
    }

    pub async fn bootstrap(&mut self) -> Result<&mut Connection> {
        let b = self.bootstrap.clone();
        self.conn(&b).await
    }

    /// The address of `group`'s coordinator.
    pub async fn coordinator(&mut self, group: &str) -> Result<String> {
        let v = self.bootstrap().await?.version::<FindCoordinatorRequest>(0, 3)?;
        let mut req = FindCoordinatorRequest::default().with_key(s(group));
        if v >= 1 {
            req.key_type = 0;
        }
        let bootstrap = self.bootstrap.clone();
        let r = self.call_settled(&bootstrap, &req, v, |r| r.error_code).await?;
        if r.error_code != 0 {
            return Err(AdminError::Message(format!(
                "cannot find the coordinator of group '{group}': {}",
                error_name(r.error_code)
            )));
        }
        Ok(format!("{}:{}", r.host, r.port))
    }

    /// Topics (all if `topics` is None) with their partition counts and
    /// the leader address of every partition.
    pub async fn metadata(
        &mut self,
        topics: Option<&[String]>,
    ) -> Result<(Partitions, HashMap<(String, i32), String>)> {
        let conn = self.bootstrap().await?;
        let v = conn.version::<MetadataRequest>(1, 9)?;
        let req = MetadataRequest::default()
            .with_topics(topics.map(|ts| {
                ts.iter().map(|t| MetadataRequestTopic::default().with_name(Some(TopicName(s(t))))).collect()
            }))
            .with_allow_auto_topic_creation(false);
        let r = conn.call_timeout(&req, v, TIMEOUT).await?;
        self.brokers = r.brokers.iter().map(|b| (b.node_id.0, format!("{}:{}", b.host, b.port))).collect();
        let mut parts = Partitions::new();
        let mut leaders = HashMap::new();
        for t in &r.topics {
            let Some(name) = t.name.as_ref().map(|n| n.to_string()) else { continue };
            if t.error_code != 0 {
                continue;
            }
            parts.insert(name.clone(), t.partitions.len() as i32);
            for p in &t.partitions {
                if let Some(addr) = self.brokers.get(&p.leader_id.0) {
                    leaders.insert((name.clone(), p.partition_index), addr.clone());
                }
            }
        }
        Ok((parts, leaders))
    }

    /// ListOffsets for each partition at `timestamp` (-1 latest, -2 earliest).
    pub async fn list_offsets(
        &mut self,
        partitions: &[(String, i32)],
        timestamp: i64,
        leaders: &HashMap<(String, i32), String>,
    ) -> Result<HashMap<(String, i32), i64>> {
        let mut by_leader: HashMap<String, Vec<(String, i32)>> = HashMap::new();
        for tp in partitions {
            if let Some(addr) = leaders.get(tp) {
                by_leader.entry(addr.clone()).or_default().push(tp.clone());
            }
        }
        let mut out = HashMap::new();
        for (addr, tps) in by_leader {
            let conn = self.conn(&addr).await?;
            let v = conn.version::<ListOffsetsRequest>(1, 5)?;
            let mut topics: BTreeMap<&str, Vec<i32>> = BTreeMap::new();
            for (t, p) in &tps {
                topics.entry(t.as_str()).or_default().push(*p);
            }
            let req = ListOffsetsRequest::default().with_replica_id(BrokerId(-1)).with_topics(
                topics
                    .iter()
                    .map(|(t, ps)| {
                        ListOffsetsTopic::default().with_name(TopicName(s(t))).with_partitions(
                            ps.iter()
                                .map(|p| {
                                    ListOffsetsPartition::default().with_partition_index(*p).with_timestamp(timestamp)
                                })
                                .collect(),
                        )
                    })
                    .collect(),
            );
            let r = conn.call_timeout(&req, v, TIMEOUT).await?;
            for t in &r.topics {
                for p in &t.partitions {
                    if p.error_code == 0 && p.offset >= 0 {
                        out.insert((t.name.to_string(), p.partition_index), p.offset);
                    }
                }
            }
        }
        Ok(out)
    }
}
