//! Accepts connections and spawns one task per connection, within the
//! connection limits of [`ConnectionLimits`] (counted across all of a
//! node's listeners). A connection past a limit is closed at once.

use std::sync::Arc;

use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinSet;

use super::limits::ConnectionLimits;
use super::{connection, ListenerInfo, Services};

/// Accepts until `shutdown` turns true, then waits for every connection to
/// finish its in-flight requests.
pub async fn run(
    listener: TcpListener,
    info: ListenerInfo,
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
                        // EMFILE and friends: back off briefly instead of spinning.
                        tracing::warn!(error = %e, "accept failed");
                        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
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
                tasks.spawn(async move {
                    connection::serve(stream, peer, info, svc, rx).await;
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
