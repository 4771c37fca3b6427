//! Recent consumer lag, sampled at a fixed interval, for the operator
//! console's sparklines and the groups list's total lag.
//!
//! This is observability, not group state: a background task of the HTTP
//! listener asks the coordinator for its groups (the same read-only views
//! `/v1/groups/{id}` serves), compares each committed offset with the
//! partition's log end (the data plane's, or the upstream's in sidecar
//! mode), and keeps the result here. Nothing here is written to a log or
//! read by a shard, and it starts empty after a restart; wall-clock time is
//! used because the samples are for people to look at.
//!
//! Everything is bounded ([`Limits`]): the number of groups whose total lag
//! is kept, the number of partition series across all groups, and the
//! samples per series (a ring: the oldest sample goes first). A group or
//! partition that is gone at a sampling round loses its series.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::watch;

use super::state_gauges::Lag;
use super::LogEndOffsets;
use crate::coordinator::Coordinator;
use crate::server::Services;

/// How much is kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Groups whose total lag is kept (groups in id order; the rest show none).
    pub groups: usize,
    /// Partition series across all groups (groups in id order, then their
    /// offsets; the rest have no sparkline).
    pub series: usize,
    /// Samples per partition series.
    pub samples: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits { groups: 10_000, series: 10_000, samples: 60 }
    }
}

/// One sample: wall-clock milliseconds and the lag then.
pub type Sample = (i64, i64);

/// The lag of one group at the last round.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GroupLag {
    /// Sum of the lag of every committed partition whose log end is known
    /// (None when none is known).
    pub total: Option<i64>,
    /// When this was sampled.
    pub sampled_ms: i64,
}

#[derive(Default)]
struct Inner {
    groups: HashMap<String, GroupLag>,
    series: HashMap<String, BTreeMap<(String, i32), VecDeque<Sample>>>,
    series_count: usize,
}

/// The sampled lag of every group (shared by the sampler and the HTTP handlers).
pub struct LagHistory {
    limits: Limits,
    inner: Mutex<Inner>,
}

impl LagHistory {
    pub fn new(limits: Limits) -> Self {
        LagHistory { limits, inner: Mutex::new(Inner::default()) }
    }

    /// Records one round: `groups` are every group's partition lags (groups
    /// in id order), taken at `now_ms`. Groups and partitions absent from
    /// the round are forgotten.
    pub fn record_round(&self, now_ms: i64, groups: Vec<(String, Vec<Lag>)>) {
        let mut inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let mut old = std::mem::take(&mut inner.series);
        let mut next = Inner::default();
        for (group, lags) in groups.into_iter().take(self.limits.groups) {
            let total = lags.iter().map(|l| l.lag).reduce(|a, b| a.saturating_add(b));
            let mut old_group = old.remove(&group).unwrap_or_default();
            let mut kept = BTreeMap::new();
            for l in lags {
                if next.series_count >= self.limits.series {
                    break;
                }
                let key = (l.topic, l.partition);
                let mut ring = old_group.remove(&key).unwrap_or_default();
                if ring.len() >= self.limits.samples {
                    ring.pop_front();
                }
                if self.limits.samples > 0 {
                    ring.push_back((now_ms, l.lag));
                }
                kept.insert(key, ring);
                next.series_count += 1;
            }
            if !kept.is_empty() {
                next.series.insert(group.clone(), kept);
            }
            next.groups.insert(group, GroupLag { total, sampled_ms: now_ms });
        }
        *inner = next;
    }

    /// The group's lag at the last round.
    pub fn group(&self, group: &str) -> Option<GroupLag> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner()).groups.get(group).cloned()
    }

    /// The recent samples of one partition of a group, oldest first.
    pub fn samples(&self, group: &str, topic: &str, partition: i32) -> Vec<Sample> {
        let inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let ring = inner.series.get(group).and_then(|g| g.get(&(topic.to_string(), partition)));
        ring.map(|r| r.iter().copied().collect()).unwrap_or_default()
    }

    /// How many partition series are kept (for tests and bounds).
    pub fn series_count(&self) -> usize {
        self.inner.lock().unwrap_or_else(|p| p.into_inner()).series_count
    }
}

/// Every group's partition lags as the coordinator and the log ends show
/// them now (groups in id order; partitions whose log end is unknown are
/// left out). Also what `/metrics` renders as `kcoord_consumer_lag`.
/// Stops after `max_groups` groups, or after the group that brings the
/// partitions collected to `max_series`.
pub async fn current_lags(
    coordinator: &Coordinator,
    ends: &dyn LogEndOffsets,
    max_groups: usize,
    max_series: usize,
) -> Vec<(String, Vec<Lag>)> {
    let Ok(groups) = coordinator.group_summaries().await else { return Vec::new() };
    let mut out = Vec::with_capacity(groups.len().min(max_groups));
    let mut series = 0usize;
    for g in groups.into_iter().take(max_groups) {
        if series >= max_series {
            break;
        }
        let Ok(Some(d)) = coordinator.group_details(&g.group_id).await else { continue };
        let lags = d
            .offsets
            .iter()
            .filter_map(|o| {
                let end = ends.log_end_offset(&o.topic, o.partition)?;
                Some(Lag {
                    group: d.group_id.clone(),
                    topic: o.topic.clone(),
                    partition: o.partition,
                    lag: (end - o.offset).max(0),
                })
            })
            .collect::<Vec<_>>();
        series += lags.len();
        out.push((g.group_id, lags));
    }
    out
}

/// Samples every `interval` until `shutdown` turns true.
pub async fn run_sampler(
    history: Arc<LagHistory>,
    services: Arc<Services>,
    ends: Arc<dyn LogEndOffsets>,
    interval: Duration,
    mut shutdown: watch::Receiver<bool>,
) {
    let mut ticks = tokio::time::interval(interval);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = ticks.tick() => {
                let round = current_lags(&services.coordinator, ends.as_ref(), history.limits.groups, usize::MAX).await;
                history.record_round(crate::wall_clock::wall_clock_ms(), round);
            }
            _ = shutdown.changed() => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lag(group: &str, topic: &str, partition: i32, lag: i64) -> Lag {
        Lag { group: group.into(), topic: topic.into(), partition, lag }
    }

    fn round(groups: &[(&str, &[(i32, i64)])]) -> Vec<(String, Vec<Lag>)> {
        groups.iter().map(|(g, ps)| (g.to_string(), ps.iter().map(|(p, l)| lag(g, "t", *p, *l)).collect())).collect()
    }

    #[test]
    fn a_partition_keeps_its_most_recent_samples_oldest_first() {
        let h = LagHistory::new(Limits { groups: 10, series: 10, samples: 3 });
        for (i, l) in [5, 7, 9, 11].into_iter().enumerate() {
            h.record_round(i as i64 * 1000, round(&[("g", &[(0, l)])]));
        }
        assert_eq!(h.samples("g", "t", 0), vec![(1000, 7), (2000, 9), (3000, 11)]);
        assert_eq!(h.group("g"), Some(GroupLag { total: Some(11), sampled_ms: 3000 }));
    }

    #[test]
    fn total_lag_sums_the_partitions_and_is_unknown_without_log_ends() {
        let h = LagHistory::new(Limits::default());
        h.record_round(1, round(&[("a", &[(0, 3), (1, 4)]), ("b", &[])]));
        assert_eq!(h.group("a").and_then(|g| g.total), Some(7));
        assert_eq!(h.group("b").map(|g| g.total), Some(None));
        assert_eq!(h.group("c"), None);
    }

    #[test]
    fn groups_and_partitions_gone_from_a_round_lose_their_series() {
        let h = LagHistory::new(Limits::default());
        h.record_round(1, round(&[("a", &[(0, 3), (1, 4)]), ("b", &[(0, 1)])]));
        h.record_round(2, round(&[("a", &[(1, 5)])]));
        assert!(h.samples("a", "t", 0).is_empty());
        assert_eq!(h.samples("a", "t", 1), vec![(1, 4), (2, 5)]);
        assert_eq!(h.group("b"), None);
        assert_eq!(h.series_count(), 1);
    }

    #[test]
    fn series_and_groups_beyond_the_bounds_are_left_out() {
        let h = LagHistory::new(Limits { groups: 2, series: 3, samples: 4 });
        h.record_round(1, round(&[("a", &[(0, 1), (1, 1)]), ("b", &[(0, 1), (1, 1)]), ("c", &[(0, 1)])]));
        assert_eq!(h.series_count(), 3);
        assert_eq!(h.samples("b", "t", 0).len(), 1);
        assert!(h.samples("b", "t", 1).is_empty());
        assert_eq!(h.group("c"), None, "the third group is past the group bound");
        assert_eq!(h.group("b").and_then(|g| g.total), Some(2), "the total still counts every partition");
    }
}
