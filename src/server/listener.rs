//! Accepts connections and spawns one task per connection, within the
//! connection limits of [`ConnectionLimits`] (counted across all of a
//! node's listeners). A connection past a limit is closed at once.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinSet;

use super::limits::{ConnectionLimits, RateLimitedLog};
use super::{connection, ListenerInfo, Services};
use crate::security::ListenerSecurity;

/// Accepts until `shutdown` turns true, then waits for every connection to
/// finish its in-flight requests.
pub async fn run(
    listener: TcpListener,
    info: ListenerInfo,
    security: Arc<ListenerSecurity>,
    svc: Arc<Services>,
    mut shutdown: watch::Receiver<bool>,
    limits: Arc<ConnectionLimits>,
) {
    let mut tasks = JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let (stream, peer) = match accepted {
                    Ok(a) => a,
                    Err(e) => {
                        accept_failed(&e, "kafka").await;
                        continue;
                    }
                };
                let slot = match limits.admit(peer.ip()) {
                    Ok(slot) => slot,
                    Err(refusal) => {
                        drop(stream);
                        limits.note_refusal(refusal, peer);
                        continue;
                    }
                };
                metrics::counter!("kcoord_connections_total").increment(1);
                // Moved up and down rather than set, so that daemons embedded
                // side by side in one process add up instead of overwriting.
                metrics::gauge!("kcoord_connections").increment(1.0);
                let svc = svc.clone();
                let rx = shutdown.clone();
                let security = security.clone();
                tasks.spawn(async move {
                    // Counted against the limits from accept on, before
                    // any TLS handshake or authentication.
                    connection::accept(stream, peer, info, security, svc, rx).await;
                    drop(slot);
                    metrics::gauge!("kcoord_connections").decrement(1.0);
                });
                // Reap finished connection tasks so the set stays small.
                while tasks.try_join_next().is_some() {}
            }
            _ = shutdown.changed() => break,
        }
    }
    drop(listener);
    while tasks.join_next().await.is_some() {}
}

/// How long a listener pauses after a failed accept. The pending connection
/// stays in the kernel's queue, so without a pause an accept failing on
/// EMFILE would fail again at once and spin a core; with it, a descriptor
/// freed meanwhile (a closed connection, an evicted segment file) lets the
/// next accept succeed.
pub const ACCEPT_BACKOFF: Duration = Duration::from_millis(50);

/// A failed accept (typically EMFILE/ENFILE, out of descriptors): counted in
/// `kcoord_descriptor_errors_total{operation="accept"}` (or
/// `kcoord_accept_errors_total` for other errors), logged at most once a
/// second with the number of failures since the previous line, then a pause
/// of [`ACCEPT_BACKOFF`]. `listener` names the listener in the log line.
pub async fn accept_failed(err: &std::io::Error, listener: &'static str) {
    static LOG: Mutex<Option<RateLimitedLog>> = Mutex::new(None);
    let exhausted = crate::storage::handles::is_descriptor_exhaustion(err);
    if exhausted {
        metrics::counter!("kcoord_descriptor_errors_total", "operation" => "accept").increment(1);
    } else {
        metrics::counter!("kcoord_accept_errors_total").increment(1);
    }
    let due = {
        let mut log = LOG.lock().unwrap_or_else(|p| p.into_inner());
        log.get_or_insert_with(|| RateLimitedLog::new(Duration::from_secs(1))).note(Instant::now())
    };
    if let Some(failures) = due {
        if exhausted {
            tracing::error!(
                listener,
                error = %err,
                failures,
                "cannot accept connections: out of file descriptors (raise the open-file limit or lower \
                 server.max_connections; failures counts every failed accept since the previous line)"
            );
        } else {
            tracing::warn!(listener, error = %err, failures, "accept failed");
        }
    }
    tokio::time::sleep(ACCEPT_BACKOFF).await;
}
