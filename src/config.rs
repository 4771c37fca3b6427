//! Configuration: serde structs with Kafka's defaults, loaded from TOML and
//! command-line overrides.
//!
//! Every value has a dotted path (`group.initial_rebalance_delay_ms`) that is
//! the same in the TOML file, in `--set KEY=VALUE` and in `kcoord config`'s
//! output. Unknown keys are rejected with the key's name, so a typo never
//! silently falls back to a default. `config/kcoord.toml` documents every key
//! with Kafka's name beside ours.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// Kafka's topic-name rule: ASCII letters, digits, `.`, `_`, `-`; at most 249
/// characters; not `.` or `..`.
pub fn validate_topic_name(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("topic name is empty".into());
    }
    if name == "." || name == ".." {
        return Err(format!("topic name {name:?} is not allowed"));
    }
    if name.len() > 249 {
        return Err(format!("topic name {name:?} is longer than 249 characters"));
    }
    if let Some(c) = name.chars().find(|c| !(c.is_ascii_alphanumeric() || *c == '.' || *c == '_' || *c == '-')) {
        return Err(format!(
            "topic name {name:?} contains {c:?}; only ASCII letters, digits, '.', '_' and '-' are allowed"
        ));
    }
    Ok(())
}

/// How the logs make appended records durable before they are acknowledged.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FsyncPolicy {
    /// fdatasync before acknowledging; one fsync covers every record appended
    /// since the previous one (group commit).
    Always,
    /// fdatasync every `storage.fsync_interval_ms`; acknowledged writes of the
    /// last interval can be lost in a machine crash (not in a process crash).
    Interval,
    /// Never fsync; the OS writes back when it likes.
    Never,
}

/// Log output format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    Text,
    Json,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
#[derive(Default)]
pub struct Config {
    pub server: ServerConfig,
    pub storage: StorageConfig,
    pub group: GroupConfig,
    pub offsets: OffsetsConfig,
    pub topics: TopicsConfig,
    pub log: LogConfig,
    pub metrics: MetricsConfig,
    pub sidecar: SidecarConfig,
    pub security: SecurityConfig,
    /// ACLs (Kafka's StandardAuthorizer settings).
    pub authorizer: crate::security::acl::AuthorizerConfig,
    /// Client quotas (Kafka's user / client-id quotas, KIP-219 throttling).
    pub quotas: crate::quota::QuotaConfig,
}

/// TLS and SASL for the listeners that use them (Kafka's `ssl.*` and
/// `sasl.*` broker settings).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SecurityConfig {
    /// PEM certificate chain of the SSL/SASL_SSL listeners (Kafka:
    /// ssl.keystore.location).
    pub tls_certificate: String,
    /// PEM private key (PKCS#8, PKCS#1 or SEC1) of that certificate.
    pub tls_private_key: String,
    /// The password of an encrypted (PKCS#8, PBES2) `tls_private_key`
    /// (Kafka: ssl.key.password).
    pub tls_private_key_password: String,
    /// PEM CA certificates that client certificates must chain to (Kafka:
    /// ssl.truststore.location); needed when `tls_client_auth` is not "none".
    pub tls_ca: String,
    /// A Java key store (JKS or PKCS#12) or a PEM file with the key and its
    /// chain, instead of `tls_certificate` and `tls_private_key`; it must
    /// hold one private key (Kafka: ssl.keystore.location).
    pub tls_keystore: String,
    /// JKS | PKCS12 | PEM; the format is told from the content, as Java's
    /// keystore.type.compat does (Kafka: ssl.keystore.type).
    pub tls_keystore_type: String,
    /// The key store's password; also the key's unless
    /// `tls_private_key_password` is set (Kafka: ssl.keystore.password).
    pub tls_keystore_password: String,
    /// A trust store with the CAs instead of `tls_ca` (Kafka:
    /// ssl.truststore.location, .type, .password; without a password its
    /// integrity is not checked, as in Java).
    pub tls_truststore: String,
    pub tls_truststore_type: String,
    pub tls_truststore_password: String,
    /// The listener's certificate chain as PEM text in the configuration,
    /// instead of a file (Kafka: ssl.keystore.certificate.chain, KIP-651);
    /// with `tls_keystore_key`.
    pub tls_keystore_certificate_chain: String,
    /// The private key of that chain as PEM text (PKCS#8, encrypted ones
    /// opened with `tls_private_key_password`; Kafka: ssl.keystore.key).
    pub tls_keystore_key: String,
    /// CA certificates as PEM text, instead of `tls_ca` or a trust store
    /// (Kafka: ssl.truststore.certificates).
    pub tls_truststore_certificates: String,
    /// none | requested | required (Kafka: ssl.client.auth).
    pub tls_client_auth: String,
    /// How a client certificate's subject becomes its principal name
    /// (Kafka: ssl.principal.mapping.rules).
    pub ssl_principal_mapping_rules: String,
    /// TLS versions the listeners accept: TLSv1.2, TLSv1.3 (Kafka:
    /// ssl.enabled.protocols).
    pub ssl_enabled_protocols: Vec<String>,
    /// Cipher suites the listeners accept, Java's or OpenSSL's names;
    /// empty: all of rustls's (Kafka: ssl.cipher.suites).
    pub ssl_cipher_suites: Vec<String>,
    /// SASL mechanisms offered (Kafka: sasl.enabled.mechanisms).
    pub sasl_enabled_mechanisms: Vec<String>,
    /// The credentials file `kcoord users` manages.
    pub credentials_file: String,
    /// The key delegation tokens' HMACs are made with; empty: no tokens
    /// (Kafka: delegation.token.secret.key). Every node that checks the
    /// tokens needs the same key.
    pub delegation_token_secret_key: String,
    /// The longest a token lives, renewals included (Kafka:
    /// delegation.token.max.lifetime.ms).
    pub delegation_token_max_lifetime_ms: i64,
    /// How long a token lives after its creation or last renewal (Kafka:
    /// delegation.token.expiry.time.ms).
    pub delegation_token_expiry_time_ms: i64,
    /// How often expired tokens are removed (Kafka:
    /// delegation.token.expiry.check.interval.ms).
    pub delegation_token_expiry_check_interval_ms: i64,
    /// Session lifetime after SASL authentication; 0 unlimited (Kafka:
    /// connections.max.reauth.ms, KIP-368).
    pub connections_max_reauth_ms: i64,
    /// Delay before a failed authentication is answered and the connection
    /// closed (Kafka: connection.failed.authentication.delay.ms).
    pub connection_failed_authentication_delay_ms: u64,
    /// A TLS handshake, and a SASL authentication, must finish within this
    /// long after the connection is accepted or it is closed.
    pub authentication_timeout_ms: u64,
    /// Largest frame accepted before authentication completes (Kafka:
    /// sasl.server.max.receive.size).
    pub sasl_max_receive_bytes: u32,
    /// OAUTHBEARER: where the JSON Web Key Set whose keys sign access
    /// tokens is: the identity provider's jwks_uri (https:// or http://) or a
    /// file (file:///path) (Kafka: sasl.oauthbearer.jwks.endpoint.url).
    pub oauthbearer_jwks_endpoint_url: String,
    /// OAUTHBEARER: how often a key set fetched over HTTP is fetched again
    /// (Kafka: sasl.oauthbearer.jwks.endpoint.refresh.ms).
    pub oauthbearer_jwks_endpoint_refresh_ms: u64,
    /// OAUTHBEARER: PEM CA certificates for an https key set URL; empty:
    /// the system's roots.
    pub oauthbearer_jwks_endpoint_ca_location: String,
    /// OAUTHBEARER: accept unsigned `"alg":"none"` tokens instead, as
    /// Kafka's default unsecured validator does (development only).
    pub oauthbearer_allow_unsecured_jwt: bool,
    /// OAUTHBEARER: the claim naming the principal (Kafka:
    /// sasl.oauthbearer.sub.claim.name).
    pub oauthbearer_sub_claim_name: String,
    /// OAUTHBEARER: audiences of which a token's `aud` must name one
    /// (Kafka: sasl.oauthbearer.expected.audience).
    pub oauthbearer_expected_audience: Vec<String>,
    /// OAUTHBEARER: the issuer a token's `iss` must name; empty: any
    /// (Kafka: sasl.oauthbearer.expected.issuer).
    pub oauthbearer_expected_issuer: String,
    /// OAUTHBEARER: tolerance for `exp` and `nbf` (Kafka:
    /// sasl.oauthbearer.clock.skew.seconds).
    pub oauthbearer_clock_skew_seconds: u32,
    /// GSSAPI: the Kerberos service name clients ask tickets for (Kafka:
    /// sasl.kerberos.service.name).
    pub sasl_kerberos_service_name: String,
    /// GSSAPI: the keytab with the service's keys (Kafka: the JAAS
    /// `keyTab` of the broker's login).
    pub sasl_kerberos_keytab: String,
    /// GSSAPI: the service principal, `kafka/host@REALM`; empty: any
    /// principal in the keytab (Kafka: the JAAS `principal`).
    pub sasl_kerberos_principal: String,
    /// GSSAPI: how a client's Kerberos principal becomes its user name
    /// (Kafka: sasl.kerberos.principal.to.local.rules).
    pub sasl_kerberos_principal_to_local_rules: Vec<String>,
    /// Settings of single listeners that differ from these, by listener
    /// name (`[security.listener.EXTERNAL]`; Kafka:
    /// `listener.name.<name>.<setting>`).
    pub listener: std::collections::BTreeMap<String, ListenerSecurityConfig>,
}

/// Declares the per-listener settings: each one of [`SecurityConfig`]'s,
/// optional, and how a listener's overrides apply.
macro_rules! listener_overrides {
    ($($field:ident: $ty:ty,)*) => {
        /// What one listener sets differently from `[security]`: its
        /// certificate, trust, TLS policy, client authentication and SASL
        /// mechanisms (Kafka's `listener.name.<name>.ssl.*` and
        /// `listener.name.<name>.sasl.enabled.mechanisms`).
        #[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
        #[serde(deny_unknown_fields, default)]
        pub struct ListenerSecurityConfig {
            $(#[serde(skip_serializing_if = "Option::is_none")] pub $field: Option<$ty>,)*
        }

        impl ListenerSecurityConfig {
            /// The settings a listener may override.
            pub const FIELDS: &[&str] = &[$(stringify!($field)),*];
        }

        impl SecurityConfig {
            /// The settings listener `name` uses: these, with its overrides
            /// (the name is matched without regard to case, as Kafka's
            /// listener names are; tables whose names differ only in case
            /// all apply, in their sorted order).
            pub fn for_listener(&self, name: &str) -> SecurityConfig {
                let mut out = self.clone();
                for (_, o) in self.listener.iter().filter(|(n, _)| n.eq_ignore_ascii_case(name)) {
                    $(if let Some(v) = &o.$field { out.$field = v.clone(); })*
                }
                out
            }
        }
    };
}

listener_overrides! {
    tls_certificate: String,
    tls_private_key: String,
    tls_private_key_password: String,
    tls_ca: String,
    tls_client_auth: String,
    ssl_principal_mapping_rules: String,
    ssl_enabled_protocols: Vec<String>,
    ssl_cipher_suites: Vec<String>,
    tls_keystore: String,
    tls_keystore_type: String,
    tls_keystore_password: String,
    tls_truststore: String,
    tls_truststore_type: String,
    tls_truststore_password: String,
    tls_keystore_certificate_chain: String,
    tls_keystore_key: String,
    tls_truststore_certificates: String,
    sasl_enabled_mechanisms: Vec<String>,
    connections_max_reauth_ms: i64,
}

impl Default for SecurityConfig {
    fn default() -> Self {
        SecurityConfig {
            tls_certificate: String::new(),
            tls_private_key: String::new(),
            tls_private_key_password: String::new(),
            tls_ca: String::new(),
            tls_keystore: String::new(),
            tls_keystore_type: "JKS".into(),
            tls_keystore_password: String::new(),
            tls_truststore: String::new(),
            tls_truststore_type: "JKS".into(),
            tls_truststore_password: String::new(),
            tls_keystore_certificate_chain: String::new(),
            tls_keystore_key: String::new(),
            tls_truststore_certificates: String::new(),
            tls_client_auth: "none".into(),
            ssl_principal_mapping_rules: "DEFAULT".into(),
            ssl_enabled_protocols: vec!["TLSv1.2".into(), "TLSv1.3".into()],
            ssl_cipher_suites: Vec::new(),
            sasl_enabled_mechanisms: vec!["SCRAM-SHA-256".into(), "SCRAM-SHA-512".into(), "PLAIN".into()],
            credentials_file: String::new(),
            delegation_token_secret_key: String::new(),
            delegation_token_max_lifetime_ms: 604_800_000,
            delegation_token_expiry_time_ms: 86_400_000,
            delegation_token_expiry_check_interval_ms: 3_600_000,
            connections_max_reauth_ms: 0,
            connection_failed_authentication_delay_ms: 100,
            authentication_timeout_ms: 10_000,
            sasl_max_receive_bytes: 524_288,
            oauthbearer_jwks_endpoint_url: String::new(),
            oauthbearer_jwks_endpoint_refresh_ms: 3_600_000,
            oauthbearer_jwks_endpoint_ca_location: String::new(),
            oauthbearer_allow_unsecured_jwt: false,
            oauthbearer_sub_claim_name: "sub".into(),
            oauthbearer_expected_audience: Vec::new(),
            oauthbearer_expected_issuer: String::new(),
            oauthbearer_clock_skew_seconds: 30,
            sasl_kerberos_service_name: "kafka".into(),
            sasl_kerberos_keytab: String::new(),
            sasl_kerberos_principal: String::new(),
            sasl_kerberos_principal_to_local_rules: vec!["DEFAULT".into()],
            listener: Default::default(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ServerConfig {
    /// Address the Kafka listener binds to.
    pub listen: String,
    /// host:port given to clients in Metadata and FindCoordinator; empty
    /// means the listen address.
    pub advertised_listener: String,
    /// Named listeners, Kafka's `listeners`: `["SASL_SSL://0.0.0.0:9093",
    /// "PLAINTEXT://127.0.0.1:9092"]`. When set, `listen` and
    /// `advertised_listener` are not used.
    pub listeners: Vec<String>,
    /// What each named listener tells clients (Kafka's
    /// `advertised.listeners`); a listener not named here advertises its
    /// bound address.
    pub advertised_listeners: Vec<String>,
    /// `NAME:PROTOCOL,...` for listener names that are not security
    /// protocols (Kafka's `listener.security.protocol.map`).
    pub listener_security_protocol_map: String,
    /// This node's broker id.
    pub node_id: i32,
    /// Largest request frame accepted (Kafka: socket.request.max.bytes).
    pub max_request_bytes: u32,
    /// Largest response frame sent; a request whose answer would be larger
    /// gets no answer and its connection is closed.
    pub max_response_bytes: u32,
    /// Request bytes in flight across all connections (frames read and not
    /// yet answered); past it, connections stop being read until answers
    /// are written (Kafka: queued.max.request.bytes).
    pub max_inflight_request_bytes: u64,
    /// Requests read from one connection before its responses are written.
    pub max_inflight_per_connection: u32,
    /// Open client connections at most (Kafka: max.connections).
    pub max_connections: u32,
    /// Open connections from one client address at most (Kafka:
    /// max.connections.per.ip).
    pub max_connections_per_ip: u32,
    /// Per-address exceptions, "host:count,host:count" (Kafka:
    /// max.connections.per.ip.overrides).
    pub max_connections_per_ip_overrides: String,
    /// A connection with no request in flight that has read nothing and
    /// written nothing for this long is closed; -1 never (Kafka:
    /// connections.max.idle.ms).
    pub connections_max_idle_ms: i64,
    /// A request whose first bytes arrived must arrive completely within
    /// this long, and a new connection must send its first request within
    /// it, or the connection is closed; -1 never (Kafka clients give up on a
    /// request after request.timeout.ms, 30 s).
    pub partial_request_timeout_ms: i64,
    /// How long a shutdown waits for in-flight requests to finish.
    pub shutdown_timeout_ms: u64,
    /// Threads that run connections and shards; 0 is one per CPU (or
    /// `TOKIO_WORKER_THREADS`). A sidecar that shares a small host with its
    /// broker answers with a shorter latency tail on fewer threads.
    pub worker_threads: u32,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct StorageConfig {
    /// Directory holding the cluster id, the coordinator logs and topic data.
    pub data_dir: PathBuf,
    /// always | interval | never.
    pub fsync: FsyncPolicy,
    /// Period of the background fsync when `fsync = "interval"`.
    pub fsync_interval_ms: u64,
    /// fsyncs the node runs at once, for all its logs together (coordinator
    /// shards and partitions): the threads of the sync scheduler.
    pub fsync_threads: usize,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct GroupConfig {
    pub min_session_timeout_ms: i32,
    pub max_session_timeout_ms: i32,
    pub initial_rebalance_delay_ms: i32,
    pub max_size: i32,
    /// Session timeout of a member that joined but has not completed a join
    /// phase yet (Kafka hard-codes 300000).
    pub new_member_join_timeout_ms: i32,
    /// Rebalances remembered per group for the HTTP API and logs.
    pub rebalance_history: usize,
    /// KIP-848 consumer groups (Kafka's `group.consumer.*`).
    pub consumer: ConsumerGroupConfig,
}

/// Kafka's `group.consumer.*` broker settings, with its
/// defaults and the same start-up checks.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ConsumerGroupConfig {
    pub session_timeout_ms: i32,
    pub min_session_timeout_ms: i32,
    pub max_session_timeout_ms: i32,
    pub heartbeat_interval_ms: i32,
    pub min_heartbeat_interval_ms: i32,
    pub max_heartbeat_interval_ms: i32,
    pub max_size: i32,
    /// Server-side assignors by name; the first is the default.
    pub assignors: Vec<String>,
    /// Online migration between classic and consumer groups (Kafka's
    /// `group.consumer.migration.policy`).
    pub migration_policy: MigrationPolicy,
}

/// Kafka's `ConsumerGroupMigrationPolicy`: which online conversions between
/// a classic group and a consumer group are allowed. Read case-insensitively,
/// as Kafka parses it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MigrationPolicy {
    /// Both upgrade and downgrade (Kafka's default).
    #[default]
    Bidirectional,
    /// Only classic → consumer.
    Upgrade,
    /// Only consumer → classic.
    Downgrade,
    /// Neither.
    Disabled,
}

impl MigrationPolicy {
    pub const NAMES: [&'static str; 4] = ["bidirectional", "upgrade", "downgrade", "disabled"];

    pub fn name(self) -> &'static str {
        match self {
            MigrationPolicy::Bidirectional => "bidirectional",
            MigrationPolicy::Upgrade => "upgrade",
            MigrationPolicy::Downgrade => "downgrade",
            MigrationPolicy::Disabled => "disabled",
        }
    }

    pub fn parse(s: &str) -> Option<MigrationPolicy> {
        match s.to_ascii_lowercase().as_str() {
            "bidirectional" => Some(MigrationPolicy::Bidirectional),
            "upgrade" => Some(MigrationPolicy::Upgrade),
            "downgrade" => Some(MigrationPolicy::Downgrade),
            "disabled" => Some(MigrationPolicy::Disabled),
            _ => None,
        }
    }

    pub fn upgrade_enabled(self) -> bool {
        matches!(self, MigrationPolicy::Bidirectional | MigrationPolicy::Upgrade)
    }

    pub fn downgrade_enabled(self) -> bool {
        matches!(self, MigrationPolicy::Bidirectional | MigrationPolicy::Downgrade)
    }
}

impl Serialize for MigrationPolicy {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

impl<'de> Deserialize<'de> for MigrationPolicy {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        MigrationPolicy::parse(&s).ok_or_else(|| {
            serde::de::Error::custom(format!(
                "group.consumer.migration_policy must be one of {} (got {s:?})",
                MigrationPolicy::NAMES.join(", ")
            ))
        })
    }
}

impl Default for ConsumerGroupConfig {
    fn default() -> Self {
        ConsumerGroupConfig {
            session_timeout_ms: 45_000,
            min_session_timeout_ms: 45_000,
            max_session_timeout_ms: 60_000,
            heartbeat_interval_ms: 5_000,
            min_heartbeat_interval_ms: 5_000,
            max_heartbeat_interval_ms: 15_000,
            max_size: i32::MAX,
            assignors: vec!["uniform".into(), "range".into()],
            migration_policy: MigrationPolicy::Bidirectional,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct OffsetsConfig {
    /// Number of coordinator shards (Kafka: offsets.topic.num.partitions).
    pub partitions: u32,
    pub retention_minutes: i64,
    pub retention_check_interval_ms: i64,
    pub metadata_max_bytes: i32,
    /// Segment size of each shard's log (Kafka: offsets.topic.segment.bytes).
    pub segment_bytes: u64,
    /// How long a tombstone survives compaction (Kafka: delete.retention.ms
    /// of __consumer_offsets).
    pub tombstone_retention_ms: i64,
    /// A shard compacts its log once this many bytes were appended since its
    /// last snapshot and they outweigh the live state.
    pub compaction_trigger_bytes: u64,
    /// Maximum requests queued at one shard before callers wait.
    pub shard_mailbox: usize,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TopicsConfig {
    /// Create unknown topics named in Metadata requests that allow it
    /// (Kafka: auto.create.topics.enable).
    pub auto_create: bool,
    /// Partitions of an auto-created topic (Kafka: num.partitions).
    pub default_partitions: i32,
    /// Topics to create at start-up, as "name:partitions".
    pub define: Vec<String>,
    /// Time-based retention of partition data (Kafka: retention.ms / log.retention.ms); -1 keeps everything.
    pub retention_ms: i64,
    /// Size-based retention per partition (Kafka: retention.bytes); -1 is unlimited.
    pub retention_bytes: i64,
    /// Segment size of partition logs (Kafka: log.segment.bytes).
    pub segment_bytes: u64,
    /// Age after which the active segment of a partition log is rolled at the
    /// next append (Kafka: log.roll.ms / segment.ms), so that time retention,
    /// which deletes whole segments, is not held up by a segment that never fills.
    pub segment_ms: i64,
    /// How often retention runs (Kafka: log.retention.check.interval.ms).
    pub retention_check_interval_ms: u64,
    /// Topics this node holds at most; creations past it get POLICY_VIOLATION.
    pub max_topics: u32,
    /// Partitions of all topics together at most; creations past it get
    /// POLICY_VIOLATION.
    pub max_partitions: u32,
    /// Topics one Metadata request may auto-create; the others it names are
    /// answered LEADER_NOT_AVAILABLE and created by the client's retry.
    pub max_auto_create_per_request: u32,
    /// Segment files of partition logs kept open at once (a bounded cache,
    /// least recently used closed first); 0 derives it from RLIMIT_NOFILE.
    pub max_open_segment_files: u32,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LogConfig {
    /// trace | debug | info | warn | error, or a tracing filter directive.
    pub level: String,
    pub format: LogFormat,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct MetricsConfig {
    /// host:port of the Prometheus and JSON HTTP listener; empty disables it.
    pub listen: String,
    /// How often the consumer lag of every group is sampled for the
    /// console's sparklines and total lag (with the listener only).
    pub lag_sample_interval_ms: u64,
}

impl Default for MetricsConfig {
    fn default() -> Self {
        MetricsConfig { listen: String::new(), lag_sample_interval_ms: 10_000 }
    }
}

/// Sidecar mode (`kcoord sidecar`): kcoord next to the brokers of an
/// existing cluster, serving its consumer groups and forwarding the rest.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SidecarConfig {
    /// Bootstrap addresses ("host:port") of the upstream cluster; non-empty
    /// means sidecar mode.
    pub upstream: Vec<String>,
    /// Every sidecar of the per-broker topology as "ID=HOST:PORT" (ID is the
    /// upstream broker id it fronts). Empty: one process fronts the whole
    /// cluster with one listener per upstream broker.
    pub peers: Vec<String>,
    /// Import a group's committed offsets from the upstream the first time
    /// kcoord sees the group.
    pub import_offsets: bool,
    /// Also write committed offsets to the upstream (simple commits).
    pub write_through: bool,
    /// How often pending write-through commits are sent (coalesced).
    pub write_through_interval_ms: u64,
    /// Every committed offset is written to the upstream again this often,
    /// so that upstream retention (offsets.retention.minutes) never expires
    /// it while kcoord still has it.
    pub write_through_refresh_ms: u64,
    /// How often the upstream's brokers and topics are refreshed.
    pub metadata_refresh_ms: u64,
    /// How often the log end offsets behind consumer lag (HTTP group view,
    /// `kcoord_consumer_lag`) are read from the upstream's leaders.
    pub log_end_refresh_ms: u64,
    /// Deadline of one request kcoord itself makes to the upstream.
    pub request_timeout_ms: u64,
    /// First and largest delay between retries of upstream work.
    pub retry_backoff_ms: u64,
    pub retry_backoff_max_ms: u64,
    /// How long start-up waits for the upstream's metadata (needed to know
    /// its brokers) before giving up.
    pub startup_timeout_ms: u64,
    /// Largest response accepted from an upstream broker.
    pub max_response_bytes: u32,
    /// Upstream responses one client connection may have read but not yet
    /// written to the client; past it kcoord stops reading from the broker.
    pub max_buffered_response_bytes: u32,
    /// One process fronting the whole cluster: upstream brokers given a
    /// listener at most (the others are left out of Metadata).
    pub max_fronted_brokers: u32,
    /// Who authenticates the clients of SASL listeners: "local" (kcoord,
    /// with `[security]`), or "upstream": their SaslHandshake and
    /// SaslAuthenticate go to the upstream broker over their own link, so
    /// forwarded requests reach the upstream under the client's identity,
    /// with its ACLs and quotas.
    pub client_authentication: String,
    /// How the sidecar connects to the upstream (TLS, SASL): Kafka's client
    /// settings, `.` written `_` (`security_protocol = "SASL_SSL"`).
    pub upstream_security: crate::security::client::ClientSecurityConfig,
}

impl Default for SidecarConfig {
    fn default() -> Self {
        SidecarConfig {
            upstream: Vec::new(),
            peers: Vec::new(),
            import_offsets: true,
            write_through: true,
            write_through_interval_ms: 1000,
            write_through_refresh_ms: 86_400_000,
            metadata_refresh_ms: 30_000,
            log_end_refresh_ms: 10_000,
            request_timeout_ms: 30_000,
            retry_backoff_ms: 100,
            retry_backoff_max_ms: 10_000,
            startup_timeout_ms: 60_000,
            max_response_bytes: 268_435_456,
            max_buffered_response_bytes: 104_857_600,
            max_fronted_brokers: 64,
            client_authentication: "local".into(),
            upstream_security: Default::default(),
        }
    }
}

impl SidecarConfig {
    pub fn enabled(&self) -> bool {
        !self.upstream.is_empty()
    }

    /// Whether the upstream authenticates the clients of SASL listeners.
    pub fn relays_authentication(&self) -> bool {
        self.enabled() && self.client_authentication == "upstream"
    }

    /// The peer list as (broker id, listener name, endpoint), sorted by id.
    /// `ID=HOST:PORT` names a peer's only (or first) listener;
    /// `ID=NAME://HOST:PORT` its listener NAME, one entry per listener when
    /// sidecars have several (`server.listeners`).
    pub fn parsed_peers(&self) -> Result<Vec<(i32, Option<String>, Endpoint)>, String> {
        let mut out: Vec<(i32, Option<String>, Endpoint)> = Vec::with_capacity(self.peers.len());
        for p in &self.peers {
            let (id, addr) = p.split_once('=').ok_or_else(|| format!("sidecar peer {p:?}: expected ID=HOST:PORT"))?;
            let id: i32 = id.trim().parse().map_err(|_| format!("sidecar peer {p:?}: {id:?} is not a broker id"))?;
            let (listener, addr) = match addr.trim().split_once("://") {
                Some((name, addr)) => (Some(name.trim().to_ascii_uppercase()), addr),
                None => (None, addr.trim()),
            };
            let ep = Endpoint::parse(addr.trim()).map_err(|e| format!("sidecar peer {p:?}: {e}"))?;
            if out.iter().any(|(other, l, _)| *other == id && *l == listener) {
                return Err(format!("sidecar peer id {id} is listed twice"));
            }
            out.push((id, listener, ep));
        }
        out.sort_by_key(|(id, _, _)| *id);
        Ok(out)
    }
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            listen: "127.0.0.1:9092".into(),
            advertised_listener: String::new(),
            listeners: Vec::new(),
            advertised_listeners: Vec::new(),
            listener_security_protocol_map: String::new(),
            node_id: 0,
            max_request_bytes: 104_857_600,
            max_response_bytes: 104_857_600,
            max_inflight_request_bytes: 1_073_741_824,
            max_inflight_per_connection: 128,
            max_connections: 10_000,
            max_connections_per_ip: i32::MAX as u32,
            max_connections_per_ip_overrides: String::new(),
            connections_max_idle_ms: 600_000,
            partial_request_timeout_ms: 30_000,
            shutdown_timeout_ms: 10_000,
            worker_threads: 0,
        }
    }
}

impl Default for StorageConfig {
    fn default() -> Self {
        StorageConfig {
            data_dir: PathBuf::from("./kcoord-data"),
            fsync: FsyncPolicy::Always,
            fsync_interval_ms: 1000,
            fsync_threads: crate::storage::sync_scheduler::DEFAULT_THREADS,
        }
    }
}

impl Default for GroupConfig {
    fn default() -> Self {
        GroupConfig {
            min_session_timeout_ms: 6000,
            max_session_timeout_ms: 1_800_000,
            initial_rebalance_delay_ms: 3000,
            max_size: i32::MAX,
            new_member_join_timeout_ms: 300_000,
            rebalance_history: 32,
            consumer: ConsumerGroupConfig::default(),
        }
    }
}

impl Default for OffsetsConfig {
    fn default() -> Self {
        OffsetsConfig {
            partitions: 50,
            retention_minutes: 10080,
            retention_check_interval_ms: 600_000,
            metadata_max_bytes: 4096,
            segment_bytes: 104_857_600,
            tombstone_retention_ms: 86_400_000,
            compaction_trigger_bytes: 64 * 1024 * 1024,
            shard_mailbox: 4096,
        }
    }
}

impl Default for TopicsConfig {
    fn default() -> Self {
        TopicsConfig {
            auto_create: true,
            default_partitions: 1,
            define: Vec::new(),
            retention_ms: 604_800_000,
            retention_bytes: -1,
            segment_bytes: 1_073_741_824,
            segment_ms: 604_800_000,
            retention_check_interval_ms: 300_000,
            max_topics: 10_000,
            max_partitions: 10_000,
            max_auto_create_per_request: crate::cluster::DEFAULT_MAX_AUTO_CREATE,
            max_open_segment_files: 0,
        }
    }
}

impl Default for LogConfig {
    fn default() -> Self {
        LogConfig { level: "info".into(), format: LogFormat::Text }
    }
}

/// Errors while building the configuration; each names the offending key or file.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read config file {path}: {source}")]
    Read { path: PathBuf, source: std::io::Error },
    #[error("invalid config file {path}: {message}")]
    Parse { path: PathBuf, message: String },
    #[error("unknown configuration key `{0}`")]
    UnknownKey(String),
    #[error("invalid --set argument {0:?}: expected KEY=VALUE")]
    BadSet(String),
    #[error("invalid configuration: {0}")]
    Invalid(String),
}

/// Builds a [`Config`] from layers: defaults, an optional TOML file, then
/// dotted-path overrides in order.
#[derive(Debug, Default)]
pub struct ConfigBuilder {
    table: toml::Table,
}

impl ConfigBuilder {
    pub fn new() -> Self {
        ConfigBuilder { table: toml::Table::new() }
    }

    /// Merges a TOML file. Unknown keys are reported with their dotted path.
    pub fn file(mut self, path: &std::path::Path) -> Result<Self, ConfigError> {
        let text =
            std::fs::read_to_string(path).map_err(|source| ConfigError::Read { path: path.to_owned(), source })?;
        let parsed: toml::Table =
            toml::from_str(&text).map_err(|e| ConfigError::Parse { path: path.to_owned(), message: e.to_string() })?;
        let mut flat = Vec::new();
        flatten("", &toml::Value::Table(parsed), &mut flat);
        for (key, value) in flat {
            self = self.set_value(&key, value)?;
        }
        Ok(self)
    }

    /// Applies `KEY=VALUE`. VALUE is read as a TOML literal (number, bool,
    /// array, quoted string) and otherwise taken as a bare string.
    pub fn set(self, assignment: &str) -> Result<Self, ConfigError> {
        let (key, raw) = assignment.split_once('=').ok_or_else(|| ConfigError::BadSet(assignment.to_string()))?;
        let key = key.trim();
        if key.is_empty() {
            return Err(ConfigError::BadSet(assignment.to_string()));
        }
        let value = parse_literal(raw.trim());
        self.set_value(key, value)
    }

    /// Sets one dotted key to a value, checking that the key exists.
    pub fn set_value(mut self, key: &str, value: toml::Value) -> Result<Self, ConfigError> {
        let defaults = default_table();
        let parts: Vec<&str> = key.split('.').collect();
        // `security.listener.<NAME>.<setting>`: any listener name, a
        // setting a listener may override.
        let listener_override = match parts.as_slice() {
            ["security", "listener", name, field] => !name.is_empty() && ListenerSecurityConfig::FIELDS.contains(field),
            _ => false,
        };
        // Otherwise the key must name a leaf of the default configuration.
        let mut cursor = &defaults;
        for (i, part) in parts.iter().enumerate().filter(|_| !listener_override) {
            match cursor.get(*part) {
                Some(toml::Value::Table(t)) if i + 1 < parts.len() => cursor = t,
                Some(v) if i + 1 == parts.len() && !v.is_table() => {}
                _ => return Err(ConfigError::UnknownKey(key.to_string())),
            }
        }
        let Some((last, parents)) = parts.split_last() else {
            return Err(ConfigError::UnknownKey(key.to_string()));
        };
        let mut table = &mut self.table;
        for part in parents {
            let entry = table.entry(part.to_string()).or_insert_with(|| toml::Value::Table(toml::Table::new()));
            table = match entry {
                toml::Value::Table(t) => t,
                _ => return Err(ConfigError::UnknownKey(key.to_string())),
            };
        }
        // A string given for a numeric or boolean key is still tried as that
        // type by serde below; keep the value as parsed.
        table.insert(last.to_string(), value);
        Ok(self)
    }

    /// Appends to an array-valued key (e.g. `topics.define`).
    pub fn push(mut self, key: &str, value: toml::Value) -> Result<Self, ConfigError> {
        let current = lookup(&self.table, key).cloned().or_else(|| lookup(&default_table(), key).cloned());
        let mut items = match current {
            Some(toml::Value::Array(a)) => a,
            _ => return Err(ConfigError::UnknownKey(key.to_string())),
        };
        items.push(value);
        self = self.set_value(key, toml::Value::Array(items))?;
        Ok(self)
    }

    /// Produces the validated configuration.
    pub fn build(self) -> Result<Config, ConfigError> {
        let config: Config = toml::Value::Table(self.table)
            .try_into()
            .map_err(|e: toml::de::Error| ConfigError::Invalid(e.message().to_string()))?;
        config.validate()?;
        Ok(config)
    }
}

fn lookup<'a>(table: &'a toml::Table, key: &str) -> Option<&'a toml::Value> {
    let mut parts = key.split('.').peekable();
    let mut cursor = table;
    while let Some(part) = parts.next() {
        let v = cursor.get(part)?;
        if parts.peek().is_none() {
            return Some(v);
        }
        cursor = v.as_table()?;
    }
    None
}

fn default_table() -> toml::Table {
    match toml::Value::try_from(Config::default()) {
        Ok(toml::Value::Table(t)) => t,
        _ => toml::Table::new(),
    }
}

fn flatten(prefix: &str, value: &toml::Value, out: &mut Vec<(String, toml::Value)>) {
    match value {
        toml::Value::Table(t) => {
            for (k, v) in t {
                let key = if prefix.is_empty() { k.clone() } else { format!("{prefix}.{k}") };
                flatten(&key, v, out);
            }
        }
        other => out.push((prefix.to_string(), other.clone())),
    }
}

fn parse_literal(raw: &str) -> toml::Value {
    let doc = format!("v = {raw}");
    match toml::from_str::<toml::Table>(&doc) {
        Ok(mut t) => t.remove("v").unwrap_or_else(|| toml::Value::String(raw.to_string())),
        Err(_) => toml::Value::String(raw.to_string()),
    }
}

/// A topic named in `topics.define` / `--topic`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicSpec {
    pub name: String,
    pub partitions: i32,
}

impl TopicSpec {
    /// Parses "name:partitions".
    pub fn parse(spec: &str) -> Result<TopicSpec, String> {
        let (name, partitions) =
            spec.rsplit_once(':').ok_or_else(|| format!("topic {spec:?}: expected NAME:PARTITIONS"))?;
        validate_topic_name(name)?;
        let partitions: i32 = partitions.parse().map_err(|_| format!("topic {spec:?}: partitions must be a number"))?;
        if partitions < 1 {
            return Err(format!("topic {spec:?}: partitions must be at least 1"));
        }
        Ok(TopicSpec { name: name.to_string(), partitions })
    }
}

/// The address clients are told to connect to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    pub host: String,
    pub port: u16,
}

impl Endpoint {
    pub fn parse(s: &str) -> Result<Endpoint, String> {
        let (host, port) = s.rsplit_once(':').ok_or_else(|| format!("{s:?}: expected HOST:PORT"))?;
        let host = host.trim_start_matches('[').trim_end_matches(']');
        if host.is_empty() {
            return Err(format!("{s:?}: host is empty"));
        }
        let port: u16 = port.parse().map_err(|_| format!("{s:?}: invalid port"))?;
        Ok(Endpoint { host: host.to_string(), port })
    }
}

/// Rebalances a group may remember: each holds member id lists, so an
/// unbounded history would let one group grow without limit.
pub const MAX_REBALANCE_HISTORY: usize = 1024;

/// `server.worker_threads` at most: far past any machine's useful thread
/// count, low enough that a typo does not spawn a million threads.
pub const MAX_WORKER_THREADS: u32 = 1024;

impl ConsumerGroupConfig {
    /// Kafka's checks of `group.consumer.*` (GroupCoordinatorConfig).
    pub fn validate(&self) -> Result<(), String> {
        for (key, v) in [
            ("session_timeout_ms", self.session_timeout_ms),
            ("min_session_timeout_ms", self.min_session_timeout_ms),
            ("max_session_timeout_ms", self.max_session_timeout_ms),
            ("heartbeat_interval_ms", self.heartbeat_interval_ms),
            ("min_heartbeat_interval_ms", self.min_heartbeat_interval_ms),
            ("max_heartbeat_interval_ms", self.max_heartbeat_interval_ms),
            ("max_size", self.max_size),
        ] {
            if v < 1 {
                return Err(format!("group.consumer.{key} must be >= 1"));
            }
        }
        if self.session_timeout_ms < self.min_session_timeout_ms
            || self.session_timeout_ms > self.max_session_timeout_ms
        {
            return Err("group.consumer.session_timeout_ms must be between group.consumer.min_session_timeout_ms and group.consumer.max_session_timeout_ms".into());
        }
        if self.heartbeat_interval_ms < self.min_heartbeat_interval_ms
            || self.heartbeat_interval_ms > self.max_heartbeat_interval_ms
        {
            return Err("group.consumer.heartbeat_interval_ms must be between group.consumer.min_heartbeat_interval_ms and group.consumer.max_heartbeat_interval_ms".into());
        }
        if self.heartbeat_interval_ms >= self.session_timeout_ms {
            return Err(
                "group.consumer.heartbeat_interval_ms must be less than group.consumer.session_timeout_ms".into()
            );
        }
        if self.assignors.is_empty() {
            return Err("group.consumer.assignors must name at least one assignor".into());
        }
        Ok(())
    }
}

impl Config {
    /// Checks cross-field rules Kafka enforces at start-up.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let bad = |m: String| Err(ConfigError::Invalid(m));
        self.quotas.validate().map_err(ConfigError::Invalid)?;
        Endpoint::parse(&self.server.listen).map_err(|e| ConfigError::Invalid(format!("server.listen: {e}")))?;
        if !self.server.advertised_listener.is_empty() {
            Endpoint::parse(&self.server.advertised_listener)
                .map_err(|e| ConfigError::Invalid(format!("server.advertised_listener: {e}")))?;
        }
        if self.server.node_id < 0 {
            return bad("server.node_id must be >= 0".into());
        }
        if self.server.max_request_bytes < 64 {
            return bad("server.max_request_bytes must be at least 64".into());
        }
        if self.server.max_response_bytes < 1024 || self.server.max_response_bytes > i32::MAX as u32 {
            return bad(format!("server.max_response_bytes must be between 1024 and {}", i32::MAX));
        }
        if self.server.max_inflight_request_bytes < u64::from(self.server.max_request_bytes) {
            return bad("server.max_inflight_request_bytes must be at least server.max_request_bytes".into());
        }
        if self.server.worker_threads > MAX_WORKER_THREADS {
            return bad(format!("server.worker_threads must be at most {MAX_WORKER_THREADS} (0: one per CPU)"));
        }
        if self.server.max_inflight_per_connection == 0 || self.server.max_connections == 0 {
            return bad("server.max_inflight_per_connection and server.max_connections must be >= 1".into());
        }
        crate::server::limits::parse_overrides(&self.server.max_connections_per_ip_overrides)
            .map_err(ConfigError::Invalid)?;
        if self.server.max_connections_per_ip == 0 && self.server.max_connections_per_ip_overrides.trim().is_empty() {
            // Kafka's rule: 0 only makes sense to admit nobody but the overrides.
            return bad(
                "server.max_connections_per_ip may be 0 only with server.max_connections_per_ip_overrides".into()
            );
        }
        for (key, v) in [
            ("server.connections_max_idle_ms", self.server.connections_max_idle_ms),
            ("server.partial_request_timeout_ms", self.server.partial_request_timeout_ms),
        ] {
            if v == 0 || v < -1 {
                return bad(format!("{key} must be >= 1, or -1 for no limit"));
            }
        }
        if self.metrics.lag_sample_interval_ms < 100 {
            return bad("metrics.lag_sample_interval_ms must be at least 100".into());
        }
        let g = &self.group;
        if g.min_session_timeout_ms < 0 || g.max_session_timeout_ms < g.min_session_timeout_ms {
            return bad("group.min_session_timeout_ms must be >= 0 and <= group.max_session_timeout_ms".into());
        }
        if g.initial_rebalance_delay_ms < 0 {
            return bad("group.initial_rebalance_delay_ms must be >= 0".into());
        }
        if g.max_size < 1 {
            return bad("group.max_size must be >= 1".into());
        }
        if g.new_member_join_timeout_ms < 1 {
            return bad("group.new_member_join_timeout_ms must be >= 1".into());
        }
        if g.rebalance_history > MAX_REBALANCE_HISTORY {
            return bad(format!("group.rebalance_history must be at most {MAX_REBALANCE_HISTORY}"));
        }
        g.consumer.validate().map_err(ConfigError::Invalid)?;
        let o = &self.offsets;
        if o.partitions < 1 || o.partitions > 10_000 {
            return bad("offsets.partitions must be between 1 and 10000".into());
        }
        if o.retention_minutes < 1 || o.retention_check_interval_ms < 1 {
            return bad("offsets.retention_minutes and offsets.retention_check_interval_ms must be >= 1".into());
        }
        if o.metadata_max_bytes < 0 {
            return bad("offsets.metadata_max_bytes must be >= 0".into());
        }
        if o.segment_bytes < 1024 || self.topics.segment_bytes < 1024 {
            return bad("offsets.segment_bytes and topics.segment_bytes must be at least 1024".into());
        }
        if o.shard_mailbox == 0 {
            return bad("offsets.shard_mailbox must be >= 1".into());
        }
        if !(1..=crate::storage::sync_scheduler::MAX_THREADS).contains(&self.storage.fsync_threads) {
            return bad(format!(
                "storage.fsync_threads must be between 1 and {}",
                crate::storage::sync_scheduler::MAX_THREADS
            ));
        }
        if self.storage.fsync_interval_ms == 0 {
            return bad("storage.fsync_interval_ms must be >= 1".into());
        }
        if self.topics.segment_ms < 1 {
            return bad("topics.segment_ms must be >= 1".into());
        }
        if self.topics.default_partitions < 1 {
            return bad("topics.default_partitions must be >= 1".into());
        }
        if self.topics.max_topics < 1 || self.topics.max_partitions < 1 || self.topics.max_auto_create_per_request < 1 {
            return bad(
                "topics.max_topics, topics.max_partitions and topics.max_auto_create_per_request must be >= 1".into()
            );
        }
        let min_files = crate::storage::handles::MIN_CAPACITY as u32;
        if self.topics.max_open_segment_files != 0 && self.topics.max_open_segment_files < min_files {
            return bad(format!("topics.max_open_segment_files must be 0 (automatic) or at least {min_files}"));
        }
        for spec in &self.topics.define {
            TopicSpec::parse(spec).map_err(|e| ConfigError::Invalid(format!("topics.define: {e}")))?;
        }
        if !self.metrics.listen.is_empty() {
            // A host name is resolved when the listener binds (it may not resolve yet).
            Endpoint::parse(&self.metrics.listen).map_err(|e| ConfigError::Invalid(format!("metrics.listen: {e}")))?;
        }
        let sc = &self.sidecar;
        for u in &sc.upstream {
            Endpoint::parse(u).map_err(|e| ConfigError::Invalid(format!("sidecar.upstream: {e}")))?;
        }
        let peers = sc.parsed_peers().map_err(ConfigError::Invalid)?;
        if !peers.is_empty() && !sc.enabled() {
            return bad("sidecar.peers needs sidecar.upstream".into());
        }
        if let Some((_, _, own)) = peers.iter().find(|(id, l, _)| *id == self.server.node_id && l.is_none()) {
            if *own != self.advertised() {
                return bad(format!(
                    "sidecar.peers names node {} at {}:{}, but this node advertises {}:{}",
                    self.server.node_id,
                    own.host,
                    own.port,
                    self.advertised().host,
                    self.advertised().port
                ));
            }
        }
        if sc.write_through_interval_ms == 0
            || sc.write_through_refresh_ms == 0
            || sc.metadata_refresh_ms == 0
            || sc.log_end_refresh_ms == 0
            || sc.request_timeout_ms == 0
            || sc.retry_backoff_ms == 0
            || sc.retry_backoff_max_ms < sc.retry_backoff_ms
            || sc.max_fronted_brokers == 0
        {
            return bad(
                "sidecar intervals, timeouts, back-offs and max_fronted_brokers must be >= 1 (and retry_backoff_max_ms >= retry_backoff_ms)"
                    .into(),
            );
        }
        if sc.max_response_bytes < 1024 || sc.max_buffered_response_bytes < 1024 {
            return bad(
                "sidecar.max_response_bytes and sidecar.max_buffered_response_bytes must be at least 1024".into()
            );
        }
        match sc.client_authentication.as_str() {
            "local" => {}
            "upstream" if !sc.enabled() => {
                return bad("sidecar.client_authentication = \"upstream\" needs sidecar.upstream".into())
            }
            "upstream" => {
                let protocol = sc.upstream_security.security_protocol.to_ascii_uppercase();
                if !protocol.starts_with("SASL_") {
                    return bad(format!(
                        "sidecar.client_authentication = \"upstream\" relays SASL to the upstream, but \
                         sidecar.upstream_security.security_protocol is {:?} (SASL_SSL or SASL_PLAINTEXT)",
                        sc.upstream_security.security_protocol
                    ));
                }
            }
            other => return bad(format!("sidecar.client_authentication {other:?}: expected local or upstream")),
        }
        self.validate_security()
    }

    /// The listeners to bind (see [`crate::security::listeners::resolve`]).
    pub fn listener_specs(&self) -> Result<Vec<crate::security::listeners::ListenerSpec>, String> {
        let s = &self.server;
        crate::security::listeners::resolve(
            &s.listeners,
            &s.advertised_listeners,
            &s.listener_security_protocol_map,
            &s.listen,
            &s.advertised_listener,
        )
    }

    /// Listener, TLS and SASL settings that cannot work together, for
    /// each listener with its overrides.
    fn validate_security(&self) -> Result<(), ConfigError> {
        let bad = |m: String| Err(ConfigError::Invalid(m));
        let specs = self.listener_specs().map_err(ConfigError::Invalid)?;
        let sec = &self.security;
        for (key, value) in [
            ("delegation_token_max_lifetime_ms", sec.delegation_token_max_lifetime_ms),
            ("delegation_token_expiry_time_ms", sec.delegation_token_expiry_time_ms),
            ("delegation_token_expiry_check_interval_ms", sec.delegation_token_expiry_check_interval_ms),
        ] {
            if value < 1 {
                return bad(format!("security.{key} must be >= 1"));
            }
        }
        if !sec.delegation_token_secret_key.is_empty() && self.sidecar.enabled() {
            return bad("security.delegation_token_secret_key: in sidecar mode delegation tokens are the upstream's \
                        (its token APIs are forwarded to it); leave the key empty"
                .into());
        }
        for name in sec.listener.keys() {
            if !specs.iter().any(|l| l.name.eq_ignore_ascii_case(name)) {
                let names: Vec<&str> = specs.iter().map(|l| l.name.as_str()).collect();
                return bad(format!("security.listener.{name}: no such listener (listeners: {})", names.join(", ")));
            }
        }
        // The shared settings must hold on their own; each listener's
        // effective ones where it uses them.
        let shared = (String::new(), false, false);
        let each = specs.iter().map(|l| (l.name.clone(), l.protocol.uses_tls(), l.protocol.uses_sasl()));
        for (name, uses_tls, uses_sasl) in std::iter::once(shared).chain(each) {
            let eff = sec.for_listener(&name);
            let at = |key: &str| match sec.listener.keys().find(|n| n.eq_ignore_ascii_case(&name)) {
                Some(n) => format!("security.listener.{n}.{key} (or security.{key})"),
                None => format!("security.{key}"),
            };
            let identities = [
                (!eff.tls_certificate.is_empty() || !eff.tls_private_key.is_empty(), "tls_certificate/tls_private_key"),
                (!eff.tls_keystore.is_empty(), "tls_keystore"),
                (
                    !eff.tls_keystore_certificate_chain.is_empty() || !eff.tls_keystore_key.is_empty(),
                    "tls_keystore_certificate_chain/tls_keystore_key",
                ),
            ];
            let trusts = [
                (!eff.tls_ca.is_empty(), "tls_ca"),
                (!eff.tls_truststore.is_empty(), "tls_truststore"),
                (!eff.tls_truststore_certificates.is_empty(), "tls_truststore_certificates"),
            ];
            for (sources, what) in [(&identities, "the listener's certificate"), (&trusts, "the client CAs")] {
                let set: Vec<String> = sources.iter().filter(|(on, _)| *on).map(|(_, key)| at(key)).collect();
                if set.len() > 1 {
                    return bad(format!("{} all name {what}: set one", set.join(" and ")));
                }
            }
            if eff.tls_keystore_certificate_chain.is_empty() != eff.tls_keystore_key.is_empty() {
                return bad(format!(
                    "{} and {} go together",
                    at("tls_keystore_certificate_chain"),
                    at("tls_keystore_key")
                ));
            }
            if !eff.tls_keystore_key.is_empty() && !eff.tls_keystore_password.is_empty() {
                // As Kafka: an inline key is opened with the key password.
                return bad(format!(
                    "{} cannot be used with {}: an inline key's password is {}",
                    at("tls_keystore_password"),
                    at("tls_keystore_key"),
                    at("tls_private_key_password")
                ));
            }
            crate::security::tls_policy::TlsPolicy::new(
                &eff.ssl_enabled_protocols,
                &eff.ssl_cipher_suites,
                (&at("ssl_enabled_protocols"), &at("ssl_cipher_suites")),
            )
            .map_err(ConfigError::Invalid)?;
            for (key, kind) in
                [("tls_keystore_type", &eff.tls_keystore_type), ("tls_truststore_type", &eff.tls_truststore_type)]
            {
                crate::security::keystore::check_kind(kind)
                    .map_err(|e| ConfigError::Invalid(format!("{}: {e}", at(key))))?;
            }
            let pem_files = !eff.tls_certificate.is_empty() && !eff.tls_private_key.is_empty();
            if uses_tls && !pem_files && eff.tls_keystore.is_empty() && eff.tls_keystore_key.is_empty() {
                return bad(format!(
                    "the {} listener needs {} and {}, or {}, or {} and {}",
                    name,
                    at("tls_certificate"),
                    at("tls_private_key"),
                    at("tls_keystore"),
                    at("tls_keystore_certificate_chain"),
                    at("tls_keystore_key")
                ));
            }
            match eff.tls_client_auth.as_str() {
                "none" => {}
                "requested" | "required" if !trusts.iter().any(|(on, _)| *on) => {
                    return bad(format!(
                        "{} needs {}, {} or {}",
                        at("tls_client_auth"),
                        at("tls_ca"),
                        at("tls_truststore"),
                        at("tls_truststore_certificates")
                    ))
                }
                "requested" | "required" => {}
                other => {
                    return bad(format!("{} {other:?}: expected none, requested or required", at("tls_client_auth")))
                }
            }
            if uses_sasl && eff.sasl_enabled_mechanisms.is_empty() {
                return bad(format!("the {name} listener needs at least one of {}", at("sasl_enabled_mechanisms")));
            }
            for m in &eff.sasl_enabled_mechanisms {
                if !self.sidecar.relays_authentication() {
                    self.validate_mechanism(m, &at("sasl_enabled_mechanisms"))?;
                } else if !crate::security::sasl_relay::relayable(m) {
                    return bad(format!(
                        "{}: {m:?} cannot be relayed upstream (sidecar.client_authentication = \"upstream\" relays {})",
                        at("sasl_enabled_mechanisms"),
                        crate::security::sasl_relay::RELAYABLE.join(", ")
                    ));
                }
            }
            if eff.connections_max_reauth_ms < 0 {
                return bad(format!("{} must be >= 0", at("connections_max_reauth_ms")));
            }
        }
        if sec.oauthbearer_sub_claim_name.is_empty() {
            return bad("security.oauthbearer_sub_claim_name must not be empty".into());
        }
        if sec.authentication_timeout_ms == 0 || sec.sasl_max_receive_bytes < 64 {
            return bad(
                "security.authentication_timeout_ms must be >= 1 and security.sasl_max_receive_bytes >= 64".into()
            );
        }
        Ok(())
    }

    /// A SASL mechanism a listener offers (named by `key`), with what it
    /// needs configured.
    fn validate_mechanism(&self, m: &str, key: &str) -> Result<(), ConfigError> {
        let bad = |m: String| Err(ConfigError::Invalid(m));
        let sec = &self.security;
        let oauth = m == crate::security::sasl::OAUTHBEARER;
        let gssapi = m == crate::security::kerberos::GSSAPI;
        if m != "PLAIN" && !oauth && !gssapi && crate::security::scram::ScramMechanism::from_name(m).is_none() {
            return bad(format!(
                "{key}: {m:?} is not supported (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER, GSSAPI)"
            ));
        }
        if gssapi && sec.sasl_kerberos_keytab.is_empty() {
            return bad("GSSAPI needs security.sasl_kerberos_keytab (the service's keytab)".into());
        }
        let url = &sec.oauthbearer_jwks_endpoint_url;
        let key_source = !url.is_empty() as u8 + sec.oauthbearer_allow_unsecured_jwt as u8;
        if oauth && key_source != 1 {
            return bad("OAUTHBEARER needs exactly one of security.oauthbearer_jwks_endpoint_url (signed tokens) and \
                 security.oauthbearer_allow_unsecured_jwt = true (unsigned tokens, for development)"
                .into());
        }
        if oauth && !url.is_empty() && !["https://", "http://", "file://"].iter().any(|p| url.starts_with(p)) {
            return bad(format!(
                "security.oauthbearer_jwks_endpoint_url {url:?}: expected https://, http:// or file:///path"
            ));
        }
        if oauth && sec.oauthbearer_jwks_endpoint_refresh_ms < 1000 {
            return bad("security.oauthbearer_jwks_endpoint_refresh_ms must be >= 1000".into());
        }
        Ok(())
    }

    /// The endpoint advertised to clients.
    pub fn advertised(&self) -> Endpoint {
        let s = if self.server.advertised_listener.is_empty() {
            &self.server.listen
        } else {
            &self.server.advertised_listener
        };
        Endpoint::parse(s).unwrap_or(Endpoint { host: "127.0.0.1".into(), port: 9092 })
    }

    /// Topics defined by configuration, parsed.
    pub fn defined_topics(&self) -> Vec<TopicSpec> {
        self.topics.define.iter().filter_map(|s| TopicSpec::parse(s).ok()).collect()
    }

    /// The effective configuration as TOML (what `kcoord config` prints),
    /// with secrets shown as `[hidden]`, as Kafka logs its configuration.
    pub fn to_toml(&self) -> String {
        let Ok(toml::Value::Table(mut table)) = toml::Value::try_from(self) else {
            return String::new();
        };
        hide_secrets(&mut table);
        toml::to_string_pretty(&table).unwrap_or_default()
    }
}

/// Keys whose values are secrets, wherever they appear.
const SECRET_KEYS: &[&str] = &[
    "sasl_password",
    "sasl_oauthbearer_client_secret",
    "sasl_oauthbearer_assertion_private_key_pem",
    "sasl_oauthbearer_assertion_private_key_passphrase",
    "ssl_key_password",
    "ssl_keystore_password",
    "ssl_keystore_key",
    "ssl_truststore_password",
    "tls_private_key_password",
    "tls_keystore_password",
    "tls_truststore_password",
    "tls_keystore_key",
];

fn hide_secrets(table: &mut toml::Table) {
    for (key, value) in table.iter_mut() {
        match value {
            toml::Value::Table(t) => hide_secrets(t),
            toml::Value::String(s) if !s.is_empty() && SECRET_KEYS.contains(&key.as_str()) => {
                *s = "[hidden]".into();
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_listener_overrides_only_the_security_settings_it_names() {
        let c = ConfigBuilder::new()
            .set("security.tls_client_auth=\"required\"")
            .unwrap()
            .set("security.tls_ca=\"/ca.pem\"")
            .unwrap()
            .set("security.listener.EXTERNAL.tls_client_auth=\"none\"")
            .unwrap()
            .set("security.listener.EXTERNAL.sasl_enabled_mechanisms=[\"SCRAM-SHA-512\"]")
            .unwrap();
        let table = c.table.clone();
        let sec: SecurityConfig =
            toml::Value::Table(table.get("security").unwrap().as_table().unwrap().clone()).try_into().unwrap();
        let external = sec.for_listener("external");
        assert_eq!(external.tls_client_auth, "none");
        assert_eq!(external.tls_ca, "/ca.pem");
        assert_eq!(external.sasl_enabled_mechanisms, vec!["SCRAM-SHA-512".to_string()]);
        assert_eq!(sec.for_listener("INTERNAL").tls_client_auth, "required");
        // Only the settings a listener may have are accepted.
        let e = ConfigBuilder::new().set("security.listener.EXTERNAL.credentials_file=\"x\"").unwrap_err();
        assert!(matches!(e, ConfigError::UnknownKey(_)), "{e}");
    }

    #[test]
    fn defaults_are_kafkas() {
        let c = Config::default();
        assert_eq!(c.group.min_session_timeout_ms, 6000);
        assert_eq!(c.group.max_session_timeout_ms, 1_800_000);
        assert_eq!(c.group.initial_rebalance_delay_ms, 3000);
        assert_eq!(c.group.max_size, i32::MAX);
        assert_eq!(c.offsets.partitions, 50);
        assert_eq!(c.offsets.retention_minutes, 10080);
        assert_eq!(c.offsets.retention_check_interval_ms, 600_000);
        assert_eq!(c.offsets.metadata_max_bytes, 4096);
        assert_eq!(c.server.max_request_bytes, 104_857_600);
        assert_eq!(c.server.max_connections_per_ip, 2_147_483_647);
        assert_eq!(c.server.connections_max_idle_ms, 600_000);
        assert_eq!(c.storage.fsync, FsyncPolicy::Always);
        assert_eq!(c.server.listen, "127.0.0.1:9092");
    }

    #[test]
    fn set_overrides_a_dotted_key() {
        let c = ConfigBuilder::new()
            .set("group.initial_rebalance_delay_ms=0")
            .unwrap()
            .set("storage.fsync=never")
            .unwrap()
            .build()
            .unwrap();
        assert_eq!(c.group.initial_rebalance_delay_ms, 0);
        assert_eq!(c.storage.fsync, FsyncPolicy::Never);
    }

    #[test]
    fn oauthbearer_needs_one_source_of_trust() {
        let with = |extra: &[&str]| {
            let mut b = ConfigBuilder::new()
                .set(r#"server.listeners=["SASL_PLAINTEXT://127.0.0.1:0"]"#)
                .unwrap()
                .set(r#"security.sasl_enabled_mechanisms=["OAUTHBEARER"]"#)
                .unwrap();
            for e in extra {
                b = b.set(e).unwrap();
            }
            b.build().map(|_| ()).map_err(|e| e.to_string())
        };
        let file = "security.oauthbearer_jwks_endpoint_url=\"file:///k.json\"";
        assert!(with(&[]).unwrap_err().contains("security.oauthbearer_jwks_endpoint_url"));
        let both = [file, "security.oauthbearer_allow_unsecured_jwt=true"];
        assert!(with(&both).unwrap_err().contains("exactly one"));
        assert_eq!(with(&["security.oauthbearer_allow_unsecured_jwt=true"]), Ok(()));
        assert_eq!(with(&[file]), Ok(()));
        assert_eq!(with(&["security.oauthbearer_jwks_endpoint_url=\"https://idp/certs\""]), Ok(()));
        assert!(with(&["security.oauthbearer_jwks_endpoint_url=\"/k.json\""]).unwrap_err().contains("file:///path"));
        assert!(with(&[file, "security.oauthbearer_sub_claim_name=\"\""]).is_err());
    }

    #[test]
    fn unknown_key_is_an_error_naming_the_key() {
        let err = ConfigBuilder::new().set("group.initial_delay=0").unwrap_err();
        assert!(err.to_string().contains("group.initial_delay"), "{err}");
        let err = ConfigBuilder::new().set("nosuch=1").unwrap_err();
        assert!(err.to_string().contains("nosuch"), "{err}");
    }

    #[test]
    fn unknown_key_in_file_is_an_error_naming_the_key() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("k.toml");
        std::fs::write(&path, "[group]\nmin_session_timeout_ms = 10\nbogus = 3\n").unwrap();
        let err = ConfigBuilder::new().file(&path).unwrap_err();
        assert!(err.to_string().contains("group.bogus"), "{err}");
    }

    #[test]
    fn printed_config_hides_passwords_secrets_and_keys() {
        let mut b = ConfigBuilder::new();
        for (key, secret) in [
            ("sidecar.upstream_security.sasl_password", "hunter2"),
            ("sidecar.upstream_security.sasl_oauthbearer_client_secret", "s3cret"),
            ("sidecar.upstream_security.ssl_key_password", "keypw"),
            ("security.tls_private_key_password", "listenerpw"),
            ("security.tls_keystore_key", "inlinekey"),
        ] {
            b = b.set(&format!("{key}=\"{secret}\"")).unwrap();
        }
        b = b.set("security.tls_keystore_certificate_chain=\"chain\"").unwrap();
        let printed = b.set("sidecar.upstream_security.sasl_username=\"alice\"").unwrap().build().unwrap().to_toml();
        for secret in ["hunter2", "s3cret", "keypw", "listenerpw", "inlinekey"] {
            assert!(!printed.contains(secret), "{printed}");
        }
        assert_eq!(printed.matches("\"[hidden]\"").count(), 5, "{printed}");
        assert!(printed.contains("sasl_username = \"alice\""), "{printed}");
    }

    #[test]
    fn printed_config_parses_back_to_the_same_config() {
        let c = Config::default();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("k.toml");
        std::fs::write(&path, c.to_toml()).unwrap();
        let back = ConfigBuilder::new().file(&path).unwrap().build().unwrap();
        assert_eq!(back, c);
    }

    #[test]
    fn topic_specs_are_validated() {
        assert_eq!(TopicSpec::parse("orders:6").unwrap(), TopicSpec { name: "orders".into(), partitions: 6 });
        assert!(TopicSpec::parse("orders").is_err());
        assert!(TopicSpec::parse("bad name:1").is_err());
        assert!(TopicSpec::parse("t:0").is_err());
        let c = ConfigBuilder::new().push("topics.define", toml::Value::String("a:2".into())).unwrap();
        assert_eq!(c.build().unwrap().defined_topics().len(), 1);
    }

    #[test]
    fn fsync_threads_outside_one_to_sixty_four_are_refused() {
        let threads = |v: &str| ConfigBuilder::new().set(&format!("storage.fsync_threads={v}")).unwrap().build();
        assert_eq!(threads("1").unwrap().storage.fsync_threads, 1);
        assert_eq!(threads("64").unwrap().storage.fsync_threads, 64);
        for bad in ["0", "65"] {
            let err = threads(bad).unwrap_err().to_string();
            assert!(err.contains("storage.fsync_threads must be between 1 and 64"), "{err}");
        }
    }

    #[test]
    fn migration_policy_takes_kafkas_values_case_insensitively() {
        let policy =
            |v: &str| ConfigBuilder::new().set(&format!("group.consumer.migration_policy={v}")).unwrap().build();
        assert_eq!(Config::default().group.consumer.migration_policy, MigrationPolicy::Bidirectional);
        assert_eq!(policy("upgrade").unwrap().group.consumer.migration_policy, MigrationPolicy::Upgrade);
        assert_eq!(policy("DOWNGRADE").unwrap().group.consumer.migration_policy, MigrationPolicy::Downgrade);
        assert_eq!(policy("Disabled").unwrap().group.consumer.migration_policy, MigrationPolicy::Disabled);
        let err = policy("sideways").unwrap_err().to_string();
        assert!(err.contains("bidirectional, upgrade, downgrade, disabled"), "{err}");
        let p = MigrationPolicy::Upgrade;
        assert!(p.upgrade_enabled() && !p.downgrade_enabled());
    }

    #[test]
    fn invalid_values_are_rejected() {
        assert!(ConfigBuilder::new().set("group.max_size=0").unwrap().build().is_err());
        assert!(ConfigBuilder::new().set("server.listen=nonsense").unwrap().build().is_err());
        assert!(ConfigBuilder::new().set("storage.fsync=sometimes").unwrap().build().is_err());
    }

    #[test]
    fn the_metrics_listener_takes_a_host_name_or_an_address_with_a_port() {
        for ok in ["localhost:9644", "127.0.0.1:0", "[::1]:9644", "metrics.internal:80"] {
            let c = ConfigBuilder::new().set_value("metrics.listen", toml::Value::String(ok.into())).unwrap();
            assert!(c.build().is_ok(), "{ok}");
        }
        for bad in ["localhost", ":9644", "localhost:http", "localhost:70000"] {
            let c = ConfigBuilder::new().set_value("metrics.listen", toml::Value::String(bad.into())).unwrap();
            let err = c.build().unwrap_err();
            assert!(err.to_string().contains("metrics.listen"), "{bad}: {err}");
        }
    }

    #[test]
    fn gssapi_is_offered_only_with_a_keytab() {
        let gssapi = ConfigBuilder::new()
            .set("server.listeners=[\"SASL_PLAINTEXT://127.0.0.1:0\"]")
            .unwrap()
            .set("security.sasl_enabled_mechanisms=[\"GSSAPI\", \"SCRAM-SHA-512\"]")
            .unwrap();
        let err = ConfigBuilder::new()
            .set("server.listeners=[\"SASL_PLAINTEXT://127.0.0.1:0\"]")
            .unwrap()
            .set("security.sasl_enabled_mechanisms=[\"GSSAPI\"]")
            .unwrap()
            .build()
            .unwrap_err();
        assert!(err.to_string().contains("security.sasl_kerberos_keytab"), "{err}");
        assert!(gssapi.set("security.sasl_kerberos_keytab=\"/etc/kafka.keytab\"").unwrap().build().is_ok());
    }

    #[test]
    fn connection_limits_are_validated_with_the_key_in_the_error() {
        let set = |kv: &str| ConfigBuilder::new().set(kv).unwrap().build();
        assert!(set("server.connections_max_idle_ms=-1").is_ok(), "-1 turns it off");
        assert!(set("server.partial_request_timeout_ms=-1").is_ok(), "-1 turns it off");
        for (kv, key) in [
            ("server.connections_max_idle_ms=0", "server.connections_max_idle_ms"),
            ("server.partial_request_timeout_ms=-2", "server.partial_request_timeout_ms"),
            ("server.max_connections_per_ip=0", "server.max_connections_per_ip"),
            ("server.max_connections_per_ip_overrides=\"10.0.0.1\"", "server.max_connections_per_ip_overrides"),
        ] {
            let err = set(kv).unwrap_err();
            assert!(err.to_string().contains(key), "{kv}: {err}");
        }
        let c = set("server.max_connections_per_ip_overrides=\"10.0.0.1:5,[::1]:0\"").unwrap();
        assert_eq!(c.server.max_connections_per_ip_overrides, "10.0.0.1:5,[::1]:0");
    }

    #[test]
    fn rebalance_history_is_bounded_and_the_error_names_the_key() {
        assert!(ConfigBuilder::new().set("group.rebalance_history=1024").unwrap().build().is_ok());
        assert!(ConfigBuilder::new().set("group.rebalance_history=0").unwrap().build().is_ok(), "0 turns it off");
        let err = ConfigBuilder::new().set("group.rebalance_history=1025").unwrap().build().unwrap_err();
        assert!(err.to_string().contains("group.rebalance_history"), "{err}");
    }
}

#[cfg(test)]
mod documented_config {
    use super::*;

    /// `config/kcoord.toml` documents every key with its default value.
    #[test]
    fn the_sample_config_documents_every_key_with_its_default() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("config/kcoord.toml");
        let text = std::fs::read_to_string(&path).unwrap();
        let table: toml::Table = toml::from_str(&text).unwrap();
        let mut documented = Vec::new();
        flatten("", &toml::Value::Table(table), &mut documented);
        let mut defaults = Vec::new();
        flatten("", &toml::Value::Table(default_table()), &mut defaults);
        let keys = |v: &Vec<(String, toml::Value)>| {
            let mut k: Vec<String> = v.iter().map(|(k, _)| k.clone()).collect();
            k.sort();
            k
        };
        assert_eq!(keys(&documented), keys(&defaults));
        let parsed = ConfigBuilder::new().file(&path).unwrap().build().unwrap();
        assert_eq!(parsed, Config::default(), "sample values must be the defaults");
    }
}
