//! Log end offsets of upstream partitions, for consumer lag in sidecar mode.
//!
//! Lag is read synchronously (the HTTP group view and the lag gauges render
//! under no await), while the offsets live on the upstream's partition
//! leaders. So lag is answered from a cache: asking for a partition puts it
//! on the list (its first answer is unknown), and a background task reads
//! the listed partitions' high watermarks every `sidecar.log_end_refresh_ms`
//! with one ListOffsets per leader, as Kafka's lag tools do (latest offset,
//! read-uncommitted). A partition nobody asked about for
//! [`FORGET_AFTER`] leaves the list, and the list holds at most
//! [`MAX_TRACKED`] partitions, so a scrape of many groups costs bounded
//! memory and one request per broker per interval.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::{BrokerId, ListOffsetsRequest, TopicName};
use tokio::sync::watch;

use super::upstream::Upstream;
use crate::observability::LogEndOffsets;
use crate::protocol::client::s;

/// Partitions whose log end is kept at most.
pub const MAX_TRACKED: usize = 100_000;
/// A partition not asked about for this long is no longer read.
pub const FORGET_AFTER: Duration = Duration::from_secs(600);
/// ListOffsets "latest".
const LATEST: i64 = -1;

#[derive(Debug, Clone, Copy)]
struct Tracked {
    end: Option<i64>,
    asked: Instant,
}

/// The cache [`LogEndOffsets`] answers from in sidecar mode.
#[derive(Default)]
pub struct UpstreamLogEnds {
    tracked: Mutex<HashMap<(String, i32), Tracked>>,
}

impl LogEndOffsets for UpstreamLogEnds {
    fn log_end_offset(&self, topic: &str, partition: i32) -> Option<i64> {
        let now = Instant::now();
        let mut tracked = self.tracked.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(t) = tracked.get_mut(&(topic.to_string(), partition)) {
            t.asked = now;
            return t.end;
        }
        if tracked.len() < MAX_TRACKED {
            tracked.insert((topic.to_string(), partition), Tracked { end: None, asked: now });
        }
        None
    }
}

impl UpstreamLogEnds {
    /// Drops partitions nobody asked about lately; returns the rest.
    fn wanted(&self, now: Instant) -> Vec<(String, i32)> {
        let mut tracked = self.tracked.lock().unwrap_or_else(|p| p.into_inner());
        tracked.retain(|_, t| now.saturating_duration_since(t.asked) < FORGET_AFTER);
        tracked.keys().cloned().collect()
    }

    fn record(&self, ends: impl IntoIterator<Item = ((String, i32), i64)>) {
        let mut tracked = self.tracked.lock().unwrap_or_else(|p| p.into_inner());
        for (key, end) in ends {
            if let Some(t) = tracked.get_mut(&key) {
                t.end = Some(end);
            }
        }
    }

    /// Reads the log end of every wanted partition from its leader (as the
    /// last upstream Metadata had it). A partition whose leader is unknown
    /// or answers an error keeps its last value until a later round.
    pub async fn refresh(&self, upstream: &Upstream) {
        let wanted = self.wanted(Instant::now());
        let leaders = upstream.leaders_of(wanted.iter().map(|(t, p)| (t.as_str(), *p)));
        let mut by_leader: BTreeMap<i32, BTreeMap<&str, Vec<i32>>> = BTreeMap::new();
        for ((topic, partition), leader) in wanted.iter().zip(leaders) {
            if let Some(leader) = leader {
                by_leader.entry(leader).or_default().entry(topic.as_str()).or_default().push(*partition);
            }
        }
        for (leader, topics) in by_leader {
            let req = list_offsets_request(&topics);
            match upstream.call_broker(leader, &req, 1, 7).await {
                Ok((_, resp)) => self.record(resp.topics.iter().flat_map(|t| {
                    t.partitions
                        .iter()
                        .filter(|p| p.error_code == 0 && p.offset >= 0)
                        .map(move |p| ((t.name.0.to_string(), p.partition_index), p.offset))
                })),
                Err(e) => tracing::debug!(leader, error = %e, "reading upstream log end offsets failed"),
            }
        }
    }

    /// Refreshes every `interval` until shutdown.
    pub async fn run(
        self: Arc<Self>,
        upstream: Arc<Upstream>,
        interval: Duration,
        mut shutdown: watch::Receiver<bool>,
    ) {
        loop {
            tokio::select! {
                _ = tokio::time::sleep(interval) => {}
                _ = shutdown.changed() => return,
            }
            self.refresh(&upstream).await;
        }
    }
}

fn list_offsets_request(topics: &BTreeMap<&str, Vec<i32>>) -> ListOffsetsRequest {
    ListOffsetsRequest::default().with_replica_id(BrokerId(-1)).with_topics(
        topics
            .iter()
            .map(|(name, partitions)| {
                ListOffsetsTopic::default().with_name(TopicName(s(name))).with_partitions(
                    partitions
                        .iter()
                        .map(|&p| ListOffsetsPartition::default().with_partition_index(p).with_timestamp(LATEST))
                        .collect(),
                )
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_partition_is_unknown_until_read_then_answered_from_the_cache() {
        let ends = UpstreamLogEnds::default();
        assert_eq!(ends.log_end_offset("t", 0), None);
        assert_eq!(ends.wanted(Instant::now()), vec![("t".to_string(), 0)]);
        ends.record([(("t".to_string(), 0), 42), (("other".to_string(), 1), 7)]);
        assert_eq!(ends.log_end_offset("t", 0), Some(42));
        assert_eq!(ends.log_end_offset("other", 1), None, "only asked-for partitions are kept");
    }

    #[test]
    fn partitions_nobody_asks_about_are_forgotten() {
        let ends = UpstreamLogEnds::default();
        ends.log_end_offset("t", 0);
        let later = Instant::now() + FORGET_AFTER + Duration::from_secs(1);
        assert!(ends.wanted(later).is_empty());
    }

    #[test]
    fn the_cache_holds_a_bounded_number_of_partitions() {
        let ends = UpstreamLogEnds::default();
        for p in 0..(MAX_TRACKED as i32 + 10) {
            ends.log_end_offset("big", p);
        }
        assert_eq!(ends.wanted(Instant::now()).len(), MAX_TRACKED);
    }
}
