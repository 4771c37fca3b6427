//! Gauges that describe this daemon's state — groups by state, members,
//! committed offsets, shard mailbox depth, consumer lag — rendered as
//! Prometheus text at scrape time, straight from the coordinator, instead of
//! being kept in the process-wide recorder. Two reasons: a series disappears
//! the moment what it describes does (the lag of a deleted group, offset or
//! topic), which the recorder cannot do; and several daemons embedded in one
//! process never overwrite each other's values.

use std::fmt::Write as _;

use crate::coordinator::messages::ShardStats;

/// At most this many `kcoord_consumer_lag` series per scrape; the rest are
/// left out (groups in id order, then their offsets in order), so a daemon
/// with very many groups cannot make scrapes unbounded.
pub const MAX_LAG_SERIES: usize = 10_000;

const STATES: [&str; 5] = ["Empty", "PreparingRebalance", "CompletingRebalance", "Stable", "Dead"];

/// One consumer lag sample.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lag {
    pub group: String,
    pub topic: String,
    pub partition: i32,
    pub lag: i64,
}

/// Collects lag samples up to [`MAX_LAG_SERIES`].
#[derive(Debug, Default)]
pub struct LagSeries {
    samples: Vec<Lag>,
}

impl LagSeries {
    /// False once the cap is reached: the caller stops looking.
    pub fn push(&mut self, sample: Lag) -> bool {
        if self.samples.len() < MAX_LAG_SERIES {
            self.samples.push(sample);
        }
        !self.is_full()
    }

    pub fn is_full(&self) -> bool {
        self.samples.len() >= MAX_LAG_SERIES
    }

    pub fn len(&self) -> usize {
        self.samples.len()
    }

    pub fn is_empty(&self) -> bool {
        self.samples.is_empty()
    }
}

/// Prometheus text for the state gauges. `shards` is `(shard, stats,
/// mailbox depth)`; `None` when the shards could not be asked (the families
/// are then left out rather than reported as zero).
pub fn render(shards: Option<&[(u32, ShardStats, usize)]>, lag: &LagSeries) -> String {
    let mut out = String::new();
    if let Some(shards) = shards {
        let mut by_state: Vec<(&str, usize)> = STATES.iter().map(|s| (*s, 0)).collect();
        let (mut members, mut offsets) = (0, 0);
        for (_, st, _) in shards {
            for (state, n) in &st.groups_by_state {
                match by_state.iter_mut().find(|(s, _)| s == state) {
                    Some(slot) => slot.1 += n,
                    None => tracing::warn!(state, "a group state the metrics do not know"),
                }
            }
            members += st.members;
            offsets += st.offsets;
        }
        header(&mut out, "kcoord_groups", "Groups by state and type");
        for (state, n) in by_state {
            sample(&mut out, "kcoord_groups", &[("state", state), ("type", "classic")], n as i64);
        }
        header(&mut out, "kcoord_group_members", "Members of all groups");
        sample(&mut out, "kcoord_group_members", &[], members as i64);
        header(&mut out, "kcoord_committed_offsets", "Committed offsets stored");
        sample(&mut out, "kcoord_committed_offsets", &[], offsets as i64);
        header(&mut out, "kcoord_shard_mailbox_depth", "Requests queued at a coordinator shard");
        for (shard, _, depth) in shards {
            sample(&mut out, "kcoord_shard_mailbox_depth", &[("shard", &shard.to_string())], *depth as i64);
        }
    }
    if !lag.is_empty() {
        header(
            &mut out,
            "kcoord_consumer_lag",
            "Log end offset minus committed offset, by group, topic and partition (standalone mode)",
        );
        for l in &lag.samples {
            let labels =
                [("group", l.group.as_str()), ("topic", l.topic.as_str()), ("partition", &l.partition.to_string())];
            sample(&mut out, "kcoord_consumer_lag", &labels, l.lag);
        }
    }
    out
}

fn header(out: &mut String, name: &str, help: &str) {
    let _ = write!(out, "# HELP {name} {help}\n# TYPE {name} gauge\n");
}

fn sample(out: &mut String, name: &str, labels: &[(&str, &str)], value: i64) {
    out.push_str(name);
    if !labels.is_empty() {
        out.push('{');
        for (i, (k, v)) in labels.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            let _ = write!(out, "{k}=\"{}\"", escape(v));
        }
        out.push('}');
    }
    let _ = writeln!(out, " {value}");
}

/// Label values as the text format wants them: `\`, `"` and newlines escaped.
fn escape(v: &str) -> String {
    let mut s = String::with_capacity(v.len());
    for c in v.chars() {
        match c {
            '\\' => s.push_str("\\\\"),
            '"' => s.push_str("\\\""),
            '\n' => s.push_str("\\n"),
            c => s.push(c),
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lag(group: &str, partition: i32, lag: i64) -> Lag {
        Lag { group: group.into(), topic: "t".into(), partition, lag }
    }

    #[test]
    fn groups_are_summed_over_shards_and_every_state_is_shown() {
        let st = |stable, members, offsets| ShardStats {
            groups_by_state: vec![("Stable".into(), stable)],
            members,
            offsets,
        };
        let shards = vec![(0, st(1, 2, 3), 0), (1, st(2, 1, 4), 5)];
        let text = render(Some(&shards), &LagSeries::default());
        assert!(text.contains("kcoord_groups{state=\"Stable\",type=\"classic\"} 3\n"), "{text}");
        assert!(text.contains("kcoord_groups{state=\"Empty\",type=\"classic\"} 0\n"), "{text}");
        assert!(text.contains("kcoord_group_members 3\n"), "{text}");
        assert!(text.contains("kcoord_committed_offsets 7\n"), "{text}");
        assert!(text.contains("kcoord_shard_mailbox_depth{shard=\"1\"} 5\n"), "{text}");
        assert!(!text.contains("kcoord_consumer_lag"), "no lag family without samples: {text}");
        assert_eq!(text.matches("# TYPE kcoord_groups gauge").count(), 1);
    }

    #[test]
    fn lag_series_stop_at_the_cap_even_within_one_group() {
        let mut series = LagSeries::default();
        let mut accepted = 0;
        for p in 0..(MAX_LAG_SERIES as i32 + 5) {
            if !series.push(lag("one-big-group", p, 1)) {
                break;
            }
            accepted += 1;
        }
        assert_eq!(series.len(), MAX_LAG_SERIES);
        assert_eq!(accepted, MAX_LAG_SERIES - 1, "the push that fills it says stop");
        assert!(!series.push(lag("another", 0, 1)));
        let text = render(None, &series);
        assert_eq!(text.lines().filter(|l| l.starts_with("kcoord_consumer_lag{")).count(), MAX_LAG_SERIES);
        assert!(!text.contains("another"));
    }

    #[test]
    fn label_values_are_escaped() {
        let mut series = LagSeries::default();
        series.push(Lag { group: "a\"b\\c\nd".into(), topic: "t".into(), partition: 0, lag: 2 });
        let text = render(None, &series);
        assert!(
            text.contains("kcoord_consumer_lag{group=\"a\\\"b\\\\c\\nd\",topic=\"t\",partition=\"0\"} 2\n"),
            "{text}"
        );
    }
}
