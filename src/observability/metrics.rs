//! Prometheus metrics through the `metrics` crate.
//!
//! Counters and histograms are recorded where things happen (requests,
//! rebalances, fsyncs); gauges that describe state (groups by state,
//! members, offsets, mailbox depth, lag) are not kept here but rendered per
//! daemon when `/metrics` is scraped (`state_gauges`), so they are exact at
//! scrape time, cost nothing in between, and vanish with what they describe.

use std::sync::OnceLock;

use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};

/// Every metric name kcoord exports (on `/metrics` once recorded or, for
/// the state gauges, at every scrape). The Grafana dashboard and the alert
/// rules under `deploy/` may only use these (tests/deploy_assets.rs), and a
/// test checks this list against the names used in the source.
pub const NAMES: &[&str] = &[
    "kcoord_accept_errors_total",
    "kcoord_authentications_total",
    "kcoord_authorization_denials_total",
    "kcoord_committed_offsets",
    "kcoord_committed_partitions_total",
    "kcoord_connections",
    "kcoord_connections_closed_total",
    "kcoord_connections_refused_total",
    "kcoord_connections_total",
    "kcoord_consumer_group_convergence_seconds",
    "kcoord_consumer_group_epochs_total",
    "kcoord_consumer_lag",
    "kcoord_descriptor_errors_total",
    "kcoord_fsync_batch_records",
    "kcoord_fsync_duration_seconds",
    "kcoord_group_members",
    "kcoord_journal_bytes_total",
    "kcoord_journal_checkpoints_total",
    "kcoord_groups",
    "kcoord_log_appended_records_total",
    "kcoord_log_appends_total",
    "kcoord_oauthbearer_jwks_fetches_total",
    "kcoord_quota_throttle_time_ms",
    "kcoord_quota_throttled_requests_total",
    "kcoord_quota_tracked_sensors",
    "kcoord_rebalance_duration_seconds",
    "kcoord_rebalances_total",
    "kcoord_request_duration_seconds",
    "kcoord_request_errors_total",
    "kcoord_requests_total",
    "kcoord_segment_file_opens_total",
    "kcoord_session_expirations_total",
    "kcoord_shard_failures_total",
    "kcoord_shard_mailbox_depth",
    "kcoord_sidecar_delegated_handovers_total",
    "kcoord_sidecar_delegated_requests_total",
    "kcoord_sidecar_deleted_topics_total",
    "kcoord_sidecar_forwarded_bytes_total",
    "kcoord_sidecar_forwarded_requests_total",
    "kcoord_sidecar_imported_offsets_total",
    "kcoord_sidecar_imports_total",
    "kcoord_sidecar_metadata_refreshes_total",
    "kcoord_sidecar_rewrites_total",
    "kcoord_sidecar_upstream_authentication_failures_total",
    "kcoord_sidecar_upstream_connections",
    "kcoord_sidecar_upstream_connects_total",
    "kcoord_sidecar_write_through_deletions_total",
    "kcoord_sidecar_write_through_lag_seconds",
    "kcoord_sidecar_write_through_partitions_total",
    "kcoord_sidecar_write_through_pending",
    "kcoord_tls_handshake_failures_total",
    "kcoord_topic_creations_deferred_total",
    "kcoord_topic_creations_refused_total",
];

/// Histograms: exported as `NAME_bucket`, `NAME_sum` and `NAME_count`.
pub const HISTOGRAMS: &[&str] = &[
    "kcoord_consumer_group_convergence_seconds",
    "kcoord_fsync_batch_records",
    "kcoord_fsync_duration_seconds",
    "kcoord_rebalance_duration_seconds",
    "kcoord_request_duration_seconds",
];

static HANDLE: OnceLock<Option<PrometheusHandle>> = OnceLock::new();

/// Latency buckets in seconds (100 µs .. 30 s).
pub(crate) const SECONDS: &[f64] =
    &[0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0];
/// Records per fsync.
const BATCH: &[f64] = &[1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0, 200.0, 500.0, 1000.0, 5000.0];

/// Whether the process-wide recorder is installed (metric handles taken
/// before it would stay bound to the no-op recorder).
pub fn installed() -> bool {
    HANDLE.get().is_some_and(Option::is_some)
}

/// Installs the process-wide recorder once; later calls (several daemons
/// in one test process) share it.
pub fn install() -> Option<PrometheusHandle> {
    HANDLE
        .get_or_init(|| {
            let builder = PrometheusBuilder::new()
                .set_buckets_for_metric(Matcher::Suffix("_seconds".into()), SECONDS)
                .and_then(|b| b.set_buckets_for_metric(Matcher::Full("kcoord_fsync_batch_records".into()), BATCH));
            match builder.and_then(|b| b.install_recorder()) {
                Ok(h) => {
                    describe();
                    start_upkeep(h.clone());
                    Some(h)
                }
                Err(e) => {
                    tracing::warn!(error = %e, "cannot install the metrics recorder");
                    None
                }
            }
        })
        .clone()
}

/// How often histogram samples are folded into their buckets.
const UPKEEP_INTERVAL: std::time::Duration = std::time::Duration::from_secs(1);

/// The recorder keeps every histogram sample (a request's duration, an
/// fsync's) in a queue until upkeep folds it into the buckets. A scrape
/// does that too, but a daemon nobody scrapes would grow by 16 bytes
/// per request, gigabytes an hour at full load. A thread of its own (not a
/// task: the recorder outlives any one runtime, and tests start many)
/// folds them every [`UPKEEP_INTERVAL`].
fn start_upkeep(handle: PrometheusHandle) {
    let started = std::thread::Builder::new().name("kcoord-metrics-upkeep".into()).spawn(move || loop {
        std::thread::sleep(UPKEEP_INTERVAL);
        handle.run_upkeep();
    });
    if let Err(e) = started {
        tracing::warn!(error = %e, "cannot start the metrics upkeep thread; histogram samples are folded only when scraped");
    }
}

fn describe() {
    use metrics::{describe_counter, describe_gauge, describe_histogram, Unit};
    // kcoord_requests_total, kcoord_request_duration_seconds and the hot
    // counters are kept and described by `striped`.
    describe_counter!(
        "kcoord_request_errors_total",
        "Error codes returned, by API and error; closed_* for requests that closed the connection unanswered"
    );
    describe_counter!("kcoord_rebalances_total", "Rebalances started, by cause");
    describe_counter!(
        "kcoord_oauthbearer_jwks_fetches_total",
        "Fetches of the OAUTHBEARER key set from the identity provider, by result"
    );
    describe_histogram!("kcoord_rebalance_duration_seconds", Unit::Seconds, "Duration of completed rebalances");
    describe_counter!("kcoord_consumer_group_epochs_total", "Consumer-group epoch bumps, by cause");
    describe_histogram!(
        "kcoord_consumer_group_convergence_seconds",
        Unit::Seconds,
        "Consumer-group epoch bump until every member reconciled to its target"
    );
    describe_counter!("kcoord_session_expirations_total", "Members removed because their session expired");
    describe_histogram!("kcoord_fsync_duration_seconds", Unit::Seconds, "fdatasync latency of the coordinator logs");
    describe_histogram!("kcoord_fsync_batch_records", "Records made durable by one fsync (group commit)");
    describe_counter!("kcoord_journal_bytes_total", "Bytes written to the node's journal (storage.fsync = always)");
    describe_counter!(
        "kcoord_journal_checkpoints_total",
        "Full journal files checkpointed: the shards' own files fsynced, the journal file deleted"
    );
    describe_counter!(
        "kcoord_shard_failures_total",
        "Coordinator shards that failed beyond repair (load: a corrupt log; fsync: a failed fsync); the daemon stops"
    );
    describe_gauge!("kcoord_connections", "Open client connections");
    describe_counter!("kcoord_connections_total", "Client connections accepted");
}
