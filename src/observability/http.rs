//! The operator HTTP listener: the console (`GET /`, see [`console`]),
//! `GET /metrics` (Prometheus text format), `GET /v1/groups` and
//! `GET /v1/groups/{id}` (JSON).
//!
//! A deliberately small HTTP/1.1 server: one request per connection, only
//! GET, bounded request head, bounded concurrent connections, a timeout on
//! slow clients. Nothing here is on the Kafka request path.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{watch, Semaphore};

use super::lag_history::{self, LagHistory};
use super::state_gauges::{self, LagSeries};
use super::{console, LogEndOffsets};
use crate::coordinator::Coordinator;
use crate::protocol::consumer_protocol::parse_assignment;
use crate::server::Services;

const MAX_HEAD: usize = 8192;
const MAX_CONNECTIONS: usize = 64;
const READ_TIMEOUT: Duration = Duration::from_secs(10);

/// What the HTTP handlers read.
pub struct HttpState {
    pub services: Arc<Services>,
    pub metrics: Option<metrics_exporter_prometheus::PrometheusHandle>,
    pub log_ends: Arc<dyn LogEndOffsets>,
    /// Recent lag samples (kept by [`lag_history::run_sampler`]).
    pub lag_history: Arc<LagHistory>,
}

impl HttpState {
    fn coordinator(&self) -> &Coordinator {
        &self.services.coordinator
    }
}

/// Serves until `shutdown` turns true.
pub async fn serve(listener: TcpListener, state: Arc<HttpState>, mut shutdown: watch::Receiver<bool>) {
    let permits = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let stream = match accepted {
                    Ok((stream, _)) => stream,
                    Err(e) => {
                        crate::server::listener::accept_failed(&e, "metrics").await;
                        continue;
                    }
                };
                let Ok(permit) = permits.clone().try_acquire_owned() else {
                    drop(stream);
                    continue;
                };
                let state = state.clone();
                tokio::spawn(async move {
                    let _permit = permit;
                    let _ = tokio::time::timeout(READ_TIMEOUT, handle(stream, &state)).await;
                });
            }
            _ = shutdown.changed() => return,
        }
    }
}

async fn read_head(stream: &mut TcpStream) -> Option<String> {
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 1024];
    loop {
        let n = stream.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(chunk.get(..n).unwrap_or_default());
        if buf.windows(4).any(|w| w == b"\r\n\r\n") {
            return String::from_utf8(buf).ok();
        }
        if buf.len() > MAX_HEAD {
            return None;
        }
    }
}

async fn handle(mut stream: TcpStream, state: &HttpState) {
    let Some(head) = read_head(&mut stream).await else { return };
    let mut parts = head.lines().next().unwrap_or("").split_whitespace();
    let (method, target) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    let path = target.split('?').next().unwrap_or("");
    let (status, content_type, body) = if method != "GET" {
        (405, "text/plain", "only GET is supported\n".to_string())
    } else {
        route(path, state).await
    };
    let reason = match status {
        200 => "OK",
        404 => "Not Found",
        405 => "Method Not Allowed",
        _ => "Service Unavailable",
    };
    let response = format!(
        "HTTP/1.1 {status} {reason}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = stream.write_all(response.as_bytes()).await;
    let _ = stream.shutdown().await;
}

async fn route(path: &str, state: &HttpState) -> (u16, &'static str, String) {
    let json_ok = |v: Value| (200, "application/json", format!("{v:#}\n"));
    if let Some(asset) = console::asset(path) {
        return (200, asset.content_type, asset.body.to_string());
    }
    match path {
        "/metrics" => match &state.metrics {
            Some(h) => {
                let mut text = h.render();
                super::striped::render(&mut text);
                text.push_str(&state_gauges(state).await);
                (200, "text/plain; version=0.0.4", text)
            }
            None => (503, "text/plain", "metrics are not available\n".into()),
        },
        "/v1/groups" | "/v1/groups/" => match state.coordinator().group_summaries().await {
            Ok(groups) => {
                let now = crate::wall_clock::wall_clock_ms();
                json_ok(json!({
                    "now_ms": now,
                    "groups": groups.iter().map(|g| summary_json(g, state.lag_history.as_ref(), now)).collect::<Vec<_>>()
                }))
            }
            Err(e) => (503, "text/plain", format!("{e}\n")),
        },
        p if p.starts_with("/v1/groups/") => {
            let id = percent_decode(&p["/v1/groups/".len()..]);
            match state.coordinator().group_details(&id).await {
                Ok(Some(d)) => {
                    let mut v = group_json(&d, state.log_ends.as_ref());
                    add_lag_samples(&mut v, &id, &state.lag_history);
                    if let Some(o) = v.as_object_mut() {
                        o.insert("now_ms".into(), json!(crate::wall_clock::wall_clock_ms()));
                    }
                    json_ok(v)
                }
                Ok(None) => {
                    (404, "application/json", format!("{}\n", json!({"error": format!("group {id} not found")})))
                }
                Err(e) => (503, "text/plain", format!("{e}\n")),
            }
        }
        _ => (404, "text/plain", "not found\n".into()),
    }
}

/// One line of `/v1/groups`: what the coordinator's summary says, with the
/// total lag of the last sampling round and the rebalances that started in
/// the last hour (counted in the group's bounded history), so the listing
/// stays one pass over the groups.
fn summary_json(g: &crate::coordinator::messages::GroupSummary, lags: &LagHistory, now_ms: i64) -> Value {
    let lag = lags.group(&g.group_id);
    let hour_ago = now_ms - 3_600_000;
    json!({
        "group_id": g.group_id,
        "state": g.state,
        "generation": g.generation,
        "protocol_type": g.protocol_type,
        "protocol": g.protocol,
        "members": g.members,
        "last_rebalance_cause": g.last_rebalance_cause,
        "last_rebalance_ms": g.rebalance_starts_ms.last(),
        "rebalances_last_hour": g.rebalance_starts_ms.iter().filter(|t| **t >= hour_ago).count(),
        "total_lag": lag.as_ref().and_then(|l| l.total),
        "lag_sampled_ms": lag.map(|l| l.sampled_ms),
    })
}

/// Adds each offset's recent lag samples (`[[ms, lag], ...]`, oldest first).
fn add_lag_samples(v: &mut Value, group: &str, lags: &LagHistory) {
    let Some(offsets) = v.get_mut("offsets").and_then(Value::as_array_mut) else { return };
    for o in offsets {
        let topic = o["topic"].as_str().unwrap_or_default().to_string();
        let partition = o["partition"].as_i64().and_then(|p| i32::try_from(p).ok()).unwrap_or(-1);
        o["lag_samples"] = json!(lags.samples(group, &topic, partition));
    }
}

/// The JSON view of one group, with assignments decoded where they use the
/// consumer protocol, and lag where partition logs are known.
fn group_json(d: &crate::coordinator::messages::GroupDetails, ends: &dyn LogEndOffsets) -> Value {
    let mut v = classic_group_json(d, ends);
    if let (Some(c), Some(obj)) = (&d.consumer, v.as_object_mut()) {
        let partitions = |tps: &[crate::coordinator::consumer::messages::DescribedTopicPartitions]| {
            tps.iter()
                .map(|tp| json!({"topic": tp.topic_name, "topic_id": tp.topic_id.to_string(), "partitions": tp.partitions}))
                .collect::<Vec<_>>()
        };
        obj.insert("group_epoch".into(), json!(c.group_epoch));
        obj.insert("assignment_epoch".into(), json!(c.assignment_epoch));
        obj.insert("assignor".into(), json!(c.assignor));
        let members = c.members.iter().zip(&d.members).map(|(m, details)| {
            json!({
                "member_id": m.member_id,
                "group_instance_id": m.instance_id,
                "rack_id": m.rack_id,
                "client_id": m.client_id,
                "client_host": m.client_host,
                "member_epoch": m.member_epoch,
                "member_type": if m.member_type == 0 { "classic" } else { "consumer" },
                "session_timeout_ms": details.session_timeout_ms,
                "rebalance_timeout_ms": details.rebalance_timeout_ms,
                "subscribed_topic_names": m.subscribed_topic_names,
                "subscribed_topic_regex": m.subscribed_topic_regex,
                "assignment": partitions(&m.assignment),
                "target_assignment": partitions(&m.target_assignment),
            })
        });
        obj.insert("members".into(), Value::Array(members.collect()));
        obj.insert("rebalances".into(), json!(c.rebalances));
    }
    v
}

/// The fields every group has (a KIP-848 consumer group adds its own).
fn classic_group_json(d: &crate::coordinator::messages::GroupDetails, ends: &dyn LogEndOffsets) -> Value {
    json!({
        "group_id": d.group_id,
        "state": d.state,
        "generation": d.generation,
        "protocol_type": d.protocol_type,
        "protocol": d.protocol,
        "leader": d.leader,
        "members": d.members.iter().map(|m| {
            let decoded = if d.protocol_type.as_deref() == Some("consumer") { parse_assignment(&m.assignment).ok() } else { None };
            json!({
                "member_id": m.member_id,
                "group_instance_id": m.group_instance_id,
                "client_id": m.client_id,
                "client_host": m.client_host,
                "session_timeout_ms": m.session_timeout_ms,
                "rebalance_timeout_ms": m.rebalance_timeout_ms,
                "assignment_bytes": m.assignment.len(),
                "assignment": decoded.map(|tps| tps.into_iter().map(|(t, p)| json!({"topic": t, "partitions": p})).collect::<Vec<_>>()),
            })
        }).collect::<Vec<_>>(),
        "offsets": d.offsets.iter().map(|o| {
            let end = ends.log_end_offset(&o.topic, o.partition);
            json!({
                "topic": o.topic,
                "partition": o.partition,
                "offset": o.offset,
                "leader_epoch": o.leader_epoch,
                "metadata": o.metadata,
                "commit_timestamp": o.commit_timestamp,
                "log_end_offset": end,
                "lag": end.map(|e| (e - o.offset).max(0)),
            })
        }).collect::<Vec<_>>(),
        "rebalances": d.rebalances,
    })
}

/// This daemon's state gauges, asked of the coordinator at scrape time
/// (see [`state_gauges`]).
async fn state_gauges(state: &HttpState) -> String {
    let shards = state.coordinator().shard_stats().await.ok();
    let mut lag = LagSeries::default();
    let groups = lag_history::current_lags(
        state.coordinator(),
        state.log_ends.as_ref(),
        usize::MAX,
        state_gauges::MAX_LAG_SERIES,
    )
    .await;
    'groups: for (_, partitions) in groups {
        for sample in partitions {
            if !lag.push(sample) {
                break 'groups;
            }
        }
    }
    state_gauges::render(shards.as_deref(), &lag)
}

fn percent_decode(s: &str) -> String {
    let hex = |c: u8| (c as char).to_digit(16).map(|d| d as u8);
    let mut rest = s.as_bytes();
    let mut out = Vec::with_capacity(rest.len());
    while let [first, tail @ ..] = rest {
        if let [b'%', hi, lo, after @ ..] = rest {
            if let (Some(h), Some(l)) = (hex(*hi), hex(*lo)) {
                out.push(h * 16 + l);
                rest = after;
                continue;
            }
        }
        out.push(*first);
        rest = tail;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percent_decoding_handles_escapes_and_stray_percents() {
        assert_eq!(percent_decode("my%20group"), "my group");
        assert_eq!(percent_decode("a%2Fb"), "a/b");
        assert_eq!(percent_decode("100%"), "100%");
        assert_eq!(percent_decode("%zz"), "%zz");
    }
}
