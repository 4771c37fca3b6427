//! `kcoord groups ...`: the consumer-group admin commands, with the
//! behaviour and output columns of Kafka's `kafka-consumer-groups.sh`.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt::Write as _;

use kafka_protocol::messages::offset_commit_request::{OffsetCommitRequestPartition, OffsetCommitRequestTopic};
use kafka_protocol::messages::*;

use super::cluster::{error_name, AdminError, Cluster, Result};
use super::time::parse_datetime_ms;
use crate::protocol::client::s;
use crate::protocol::consumer_protocol::parse_assignment;

/// Formats rows under headers with left-aligned, padded columns.
pub fn table(headers: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = headers.iter().map(|h| h.len()).collect();
    for r in rows {
        for (i, c) in r.iter().enumerate() {
            if i < widths.len() {
                widths[i] = widths[i].max(c.len());
            }
        }
    }
    let mut out = String::new();
    let line = |out: &mut String, cells: Vec<&str>| {
        let mut l = String::new();
        for (i, c) in cells.iter().enumerate() {
            if i + 1 == cells.len() {
                l.push_str(c);
            } else {
                let _ = write!(l, "{:<w$} ", c, w = widths[i]);
            }
        }
        out.push_str(l.trim_end());
        out.push('\n');
    };
    line(&mut out, headers.to_vec());
    for r in rows {
        line(&mut out, r.iter().map(|c| c.as_str()).collect());
    }
    out
}

fn dash(v: Option<i64>) -> String {
    v.map(|x| x.to_string()).unwrap_or_else(|| "-".into())
}

/// `groups list`: every group on every broker; with `states`, also their
/// state (and only those states, when given).
pub async fn list(cluster: &mut Cluster, show_state: bool, states: &[String]) -> Result<String> {
    let (_, _) = cluster.metadata(Some(&[])).await?;
    let brokers: Vec<String> = cluster.brokers.values().cloned().collect();
    let mut groups: BTreeMap<String, String> = BTreeMap::new();
    for addr in brokers {
        let v = cluster.conn(&addr).await?.version::<ListGroupsRequest>(0, 4)?;
        let mut req = ListGroupsRequest::default();
        if v >= 4 {
            req.states_filter = states.iter().map(|x| s(x)).collect();
        }
        let r = cluster.call_settled(&addr, &req, v, |r| r.error_code).await?;
        if r.error_code != 0 {
            return Err(AdminError::Message(format!("ListGroups failed: {}", error_name(r.error_code))));
        }
        for g in r.groups {
            groups.insert(g.group_id.to_string(), g.group_state.to_string());
        }
    }
    if !show_state {
        return Ok(groups.keys().map(|g| format!("{g}\n")).collect());
    }
    let wanted: BTreeSet<String> = states.iter().map(|x| x.to_ascii_lowercase()).collect();
    let rows: Vec<Vec<String>> = groups
        .into_iter()
        .filter(|(_, st)| wanted.is_empty() || wanted.contains(&st.to_ascii_lowercase()))
        .map(|(g, st)| vec![g, st])
        .collect();
    Ok(table(&["GROUP", "STATE"], &rows))
}

/// A member: id, client id, host, and its assigned topic-partitions.
type MemberRow = (String, String, String, Vec<(String, i32)>);

/// A described group with its committed offsets.
struct Snapshot {
    state: String,
    protocol: String,
    coordinator: String,
    members: Vec<MemberRow>,
    committed: BTreeMap<(String, i32), (i64, String)>,
}

async fn snapshot(cluster: &mut Cluster, group: &str) -> Result<Snapshot> {
    let coordinator = cluster.coordinator(group).await?;
    let dv = cluster.conn(&coordinator).await?.version::<DescribeGroupsRequest>(0, 5)?;
    let describe = DescribeGroupsRequest::default().with_groups(vec![GroupId(s(group))]);
    let d = cluster
        .call_settled(&coordinator, &describe, dv, |r| r.groups.first().map(|g| g.error_code).unwrap_or_default())
        .await?;
    let g = d.groups.into_iter().next().ok_or_else(|| AdminError::Message("empty DescribeGroups answer".into()))?;
    if g.error_code != 0 {
        return Err(AdminError::Message(format!("cannot describe group '{group}': {}", error_name(g.error_code))));
    }
    let consumer = g.protocol_type.as_str() == "consumer";
    let members = g
        .members
        .iter()
        .map(|m| {
            let parts = if consumer { parse_assignment(&m.member_assignment).unwrap_or_default() } else { Vec::new() };
            let flat = parts.into_iter().flat_map(|(t, ps)| ps.into_iter().map(move |p| (t.clone(), p))).collect();
            (m.member_id.to_string(), m.client_host.to_string(), m.client_id.to_string(), flat)
        })
        .collect();
    let fv = cluster.conn(&coordinator).await?.version::<OffsetFetchRequest>(2, 7)?;
    let fetch = OffsetFetchRequest::default().with_group_id(GroupId(s(group))).with_topics(None);
    let f = cluster.call_settled(&coordinator, &fetch, fv, |r| r.error_code).await?;
    if f.error_code != 0 {
        return Err(AdminError::Message(format!(
            "cannot fetch offsets of group '{group}': {}",
            error_name(f.error_code)
        )));
    }
    let mut committed = BTreeMap::new();
    for t in &f.topics {
        for p in &t.partitions {
            if p.committed_offset >= 0 {
                committed.insert(
                    (t.name.to_string(), p.partition_index),
                    (p.committed_offset, p.metadata.as_deref().unwrap_or("").to_string()),
                );
            }
        }
    }
    Ok(Snapshot {
        state: g.group_state.to_string(),
        protocol: g.protocol_data.to_string(),
        coordinator,
        members,
        committed,
    })
}

/// Log end offsets of the partitions.
async fn log_ends(cluster: &mut Cluster, partitions: &BTreeSet<(String, i32)>) -> Result<HashMap<(String, i32), i64>> {
    let topics: Vec<String> = partitions.iter().map(|(t, _)| t.clone()).collect::<BTreeSet<_>>().into_iter().collect();
    if topics.is_empty() {
        return Ok(HashMap::new());
    }
    let (_, leaders) = cluster.metadata(Some(&topics)).await?;
    let tps: Vec<(String, i32)> = partitions.iter().cloned().collect();
    cluster.list_offsets(&tps, -1, &leaders).await
}

/// `groups describe`: the default offsets view, or `--members`, or `--state`.
pub async fn describe(cluster: &mut Cluster, group: &str, view: &str) -> Result<String> {
    let snap = snapshot(cluster, group).await?;
    if snap.state == "Dead" {
        return Err(AdminError::Message(format!("Consumer group '{group}' does not exist.")));
    }
    let mut out = String::new();
    match view {
        "state" => {
            let rows = vec![vec![
                group.to_string(),
                snap.coordinator.clone(),
                snap.protocol.clone(),
                snap.state.clone(),
                snap.members.len().to_string(),
            ]];
            out.push_str(&table(&["GROUP", "COORDINATOR", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS"], &rows));
        }
        "members" => {
            let rows: Vec<Vec<String>> = snap
                .members
                .iter()
                .map(|(id, host, client, parts)| {
                    vec![group.to_string(), id.clone(), host.clone(), client.clone(), parts.len().to_string()]
                })
                .collect();
            if rows.is_empty() {
                let _ = writeln!(out, "Consumer group '{group}' has no active members.");
            } else {
                out.push_str(&table(&["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS"], &rows));
            }
        }
        _ => {
            let mut owner: HashMap<(String, i32), (String, String, String)> = HashMap::new();
            for (id, host, client, parts) in &snap.members {
                for tp in parts {
                    owner.insert(tp.clone(), (id.clone(), host.clone(), client.clone()));
                }
            }
            let mut all: BTreeSet<(String, i32)> = snap.committed.keys().cloned().collect();
            all.extend(owner.keys().cloned());
            let ends = log_ends(cluster, &all).await?;
            if snap.members.is_empty() {
                let _ = writeln!(out, "Consumer group '{group}' has no active members.\n");
            }
            let rows: Vec<Vec<String>> = all
                .iter()
                .map(|tp| {
                    let current = snap.committed.get(tp).map(|c| c.0);
                    let end = ends.get(tp).copied();
                    let lag = match (current, end) {
                        (Some(c), Some(e)) => Some((e - c).max(0)),
                        _ => None,
                    };
                    let (id, host, client) = owner.get(tp).cloned().unwrap_or(("-".into(), "-".into(), "-".into()));
                    vec![
                        group.to_string(),
                        tp.0.clone(),
                        tp.1.to_string(),
                        dash(current),
                        dash(end),
                        dash(lag),
                        id,
                        host,
                        client,
                    ]
                })
                .collect();
            out.push_str(&table(
                &[
                    "GROUP",
                    "TOPIC",
                    "PARTITION",
                    "CURRENT-OFFSET",
                    "LOG-END-OFFSET",
                    "LAG",
                    "CONSUMER-ID",
                    "HOST",
                    "CLIENT-ID",
                ],
                &rows,
            ));
        }
    }
    Ok(out)
}

/// `groups offsets`: committed offsets with lag and commit metadata.
pub async fn offsets(cluster: &mut Cluster, group: &str) -> Result<String> {
    let snap = snapshot(cluster, group).await?;
    let all: BTreeSet<(String, i32)> = snap.committed.keys().cloned().collect();
    let ends = log_ends(cluster, &all).await?;
    let rows: Vec<Vec<String>> = snap
        .committed
        .iter()
        .map(|(tp, (offset, metadata))| {
            let end = ends.get(tp).copied();
            vec![
                group.to_string(),
                tp.0.clone(),
                tp.1.to_string(),
                offset.to_string(),
                dash(end),
                dash(end.map(|e| (e - offset).max(0))),
                if metadata.is_empty() { "-".into() } else { metadata.clone() },
            ]
        })
        .collect();
    Ok(table(&["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "METADATA"], &rows))
}

/// `groups delete`: DeleteGroups at each group's coordinator.
pub async fn delete(cluster: &mut Cluster, groups: &[String]) -> Result<String> {
    let mut failures = Vec::new();
    for g in groups {
        let coordinator = cluster.coordinator(g).await?;
        let v = cluster.conn(&coordinator).await?.version::<DeleteGroupsRequest>(0, 2)?;
        let req = DeleteGroupsRequest::default().with_groups_names(vec![GroupId(s(g))]);
        let r = cluster
            .call_settled(&coordinator, &req, v, |r| r.results.first().map(|x| x.error_code).unwrap_or_default())
            .await?;
        for x in r.results {
            if x.error_code != 0 {
                failures.push(format!(
                    "* Group '{}' could not be deleted due to: {}",
                    x.group_id.0,
                    error_name(x.error_code)
                ));
            }
        }
    }
    if failures.is_empty() {
        let names: Vec<String> = groups.iter().map(|g| format!("'{g}'")).collect();
        Ok(format!("Deletion of requested consumer groups ({}) was successful.\n", names.join(", ")))
    } else {
        Err(AdminError::Message(format!("Deletion of some consumer groups failed:\n{}", failures.join("\n"))))
    }
}

/// Where `reset-offsets` moves each partition.
#[derive(Debug, Clone, PartialEq)]
pub enum ResetSpec {
    Earliest,
    Latest,
    Offset(i64),
    ShiftBy(i64),
    Datetime(String),
}

/// `groups reset-offsets`: computes new offsets; commits them only with
/// `execute`, and only while the group has no active members.
pub async fn reset_offsets(
    cluster: &mut Cluster,
    group: &str,
    topics: &[String],
    all_topics: bool,
    spec: &ResetSpec,
    execute: bool,
) -> Result<String> {
    let snap = snapshot(cluster, group).await?;
    if snap.state != "Empty" && snap.state != "Dead" {
        return Err(AdminError::Message(format!(
            "Assignments can only be reset if the group '{group}' is inactive, but the current state is {}.",
            snap.state
        )));
    }
    // The partitions in scope: "topic" (all partitions) or "topic:0,1".
    let mut scope: BTreeSet<(String, i32)> = BTreeSet::new();
    if all_topics {
        scope.extend(snap.committed.keys().cloned());
    }
    let mut whole_topics = Vec::new();
    for t in topics {
        match t.split_once(':') {
            Some((name, parts)) => {
                for p in parts.split(',') {
                    let p: i32 =
                        p.trim().parse().map_err(|_| AdminError::Message(format!("invalid partition in {t:?}")))?;
                    scope.insert((name.to_string(), p));
                }
            }
            None => whole_topics.push(t.clone()),
        }
    }
    let wanted: Vec<String> = whole_topics
        .iter()
        .cloned()
        .chain(scope.iter().map(|(t, _)| t.clone()))
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let (parts, leaders) = cluster.metadata(Some(&wanted)).await?;
    for t in &whole_topics {
        let n = parts.get(t).ok_or_else(|| AdminError::Message(format!("topic {t} does not exist")))?;
        scope.extend((0..*n).map(|p| (t.clone(), p)));
    }
    if scope.is_empty() {
        return Err(AdminError::Message("no partitions to reset: give --topic or --all-topics".into()));
    }
    let tps: Vec<(String, i32)> = scope.iter().cloned().collect();
    if let ResetSpec::ShiftBy(_) = spec {
        // As kafka-consumer-groups.sh: shifting needs an offset to shift from.
        if let Some((t, p)) = tps.iter().find(|tp| !snap.committed.contains_key(*tp)) {
            return Err(AdminError::Message(format!(
                "Cannot shift offset for partition {t}-{p} since there is no current committed offset"
            )));
        }
    }
    let earliest = cluster.list_offsets(&tps, -2, &leaders).await?;
    let latest = cluster.list_offsets(&tps, -1, &leaders).await?;
    let by_time = match spec {
        ResetSpec::Datetime(d) => {
            let ms = parse_datetime_ms(d).ok_or_else(|| {
                AdminError::Message(format!("invalid --to-datetime {d:?}: use YYYY-MM-DDTHH:mm:SS.sss"))
            })?;
            Some(cluster.list_offsets(&tps, ms, &leaders).await?)
        }
        _ => None,
    };
    let mut new_offsets: BTreeMap<(String, i32), i64> = BTreeMap::new();
    for tp in &tps {
        let lo = earliest.get(tp).copied().unwrap_or(0);
        let hi = latest.get(tp).copied().unwrap_or(lo);
        let clamp = |x: i64| x.clamp(lo, hi.max(lo));
        let target = match spec {
            ResetSpec::Earliest => lo,
            ResetSpec::Latest => hi,
            ResetSpec::Offset(o) => clamp(*o),
            ResetSpec::ShiftBy(n) => clamp(snap.committed.get(tp).map_or(lo, |c| c.0).saturating_add(*n)),
            ResetSpec::Datetime(_) => by_time.as_ref().and_then(|m| m.get(tp).copied()).unwrap_or(hi),
        };
        new_offsets.insert(tp.clone(), target);
    }
    if execute {
        let v = cluster.conn(&snap.coordinator).await?.version::<OffsetCommitRequest>(2, 7)?;
        let mut topics: BTreeMap<&str, Vec<OffsetCommitRequestPartition>> = BTreeMap::new();
        for ((t, p), o) in &new_offsets {
            topics
                .entry(t.as_str())
                .or_default()
                .push(OffsetCommitRequestPartition::default().with_partition_index(*p).with_committed_offset(*o));
        }
        let req = OffsetCommitRequest::default()
            .with_group_id(GroupId(s(group)))
            .with_generation_id_or_member_epoch(-1)
            .with_member_id(s(""))
            .with_topics(
                topics
                    .into_iter()
                    .map(|(t, ps)| OffsetCommitRequestTopic::default().with_name(TopicName(s(t))).with_partitions(ps))
                    .collect(),
            );
        let first_error = |r: &OffsetCommitResponse| {
            r.topics.first().and_then(|t| t.partitions.first()).map(|p| p.error_code).unwrap_or_default()
        };
        let r = cluster.call_settled(&snap.coordinator, &req, v, first_error).await?;
        let errors: Vec<String> = r
            .topics
            .iter()
            .flat_map(|t| {
                t.partitions
                    .iter()
                    .filter(|p| p.error_code != 0)
                    .map(move |p| format!("{}-{}: {}", t.name.0, p.partition_index, error_name(p.error_code)))
            })
            .collect();
        if !errors.is_empty() {
            return Err(AdminError::Message(format!("Error: resetting offsets failed:\n{}", errors.join("\n"))));
        }
    }
    let rows: Vec<Vec<String>> = new_offsets
        .iter()
        .map(|((t, p), o)| vec![group.to_string(), t.clone(), p.to_string(), o.to_string()])
        .collect();
    let mut out = table(&["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"], &rows);
    if !execute {
        out.push_str("(dry run: nothing was changed; add --execute to commit these offsets)\n");
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_pad_columns_like_kafka_consumer_groups() {
        let t =
            table(&["GROUP", "TOPIC"], &[vec!["g".into(), "orders".into()], vec!["longer-group".into(), "t".into()]]);
        assert_eq!(t, "GROUP        TOPIC\ng            orders\nlonger-group t\n");
    }
}
