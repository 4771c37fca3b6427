//! `kcoord groups ...`: the consumer-group admin commands, with the
//! behaviour and output columns of Kafka's `kafka-consumer-groups.sh`.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt::Write as _;

use kafka_protocol::messages::offset_commit_request::{OffsetCommitRequestPartition, OffsetCommitRequestTopic};
use kafka_protocol::messages::*;

use super::cluster::{error_name, AdminError, Cluster, Result};
use super::reset_plan::{self, Offsets, ResetPlan};
use crate::protocol::client::s;
use crate::protocol::consumer_protocol::parse_assignment;

/// Formats rows under headers with left-aligned, padded columns.
pub fn table(headers: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = headers.iter().map(|h| h.len()).collect();
    for r in rows {
        for (w, c) in widths.iter_mut().zip(r) {
            *w = (*w).max(c.len());
        }
    }
    let mut out = String::new();
    let line = |out: &mut String, cells: Vec<&str>| {
        let mut l = String::new();
        for (i, c) in cells.iter().enumerate() {
            match widths.get(i) {
                Some(w) if i + 1 < cells.len() => {
                    let _ = write!(l, "{:<w$} ", c, w = w);
                }
                _ => l.push_str(c),
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
/// state (and only those states, when given); with `types`, also their type
/// (`Classic` or `Consumer`, and only that type, when given), as
/// `kafka-consumer-groups.sh --list [--state] [--type]`.
pub async fn list(
    cluster: &mut Cluster,
    show_state: bool,
    states: &[String],
    show_type: bool,
    types: &[String],
) -> Result<String> {
    let groups = listed_groups(cluster, states, types).await?.into_iter();
    if !show_state && !show_type {
        return Ok(groups.map(|(g, _)| format!("{g}\n")).collect());
    }
    let mut headers = vec!["GROUP"];
    if show_type {
        headers.push("TYPE");
    }
    if show_state {
        headers.push("STATE");
    }
    let rows: Vec<Vec<String>> = groups
        .map(|(g, (st, ty))| {
            let mut row = vec![g];
            if show_type {
                row.push(type_name(&ty));
            }
            if show_state {
                row.push(st);
            }
            row
        })
        .collect();
    Ok(table(&headers, &rows))
}

/// Every broker's groups (ListGroups merged across nodes, as the
/// AdminClient does) in the given states and of the given types (any if
/// empty): group → (state, type).
async fn listed_groups(
    cluster: &mut Cluster,
    states: &[String],
    types: &[String],
) -> Result<BTreeMap<String, (String, String)>> {
    let (_, _) = cluster.metadata(Some(&[])).await?;
    let brokers: Vec<String> = cluster.brokers.values().cloned().collect();
    // group → (state, type)
    let mut groups: BTreeMap<String, (String, String)> = BTreeMap::new();
    for addr in brokers {
        let v = cluster.conn(&addr).await?.version::<ListGroupsRequest>(0, 5)?;
        let mut req = ListGroupsRequest::default();
        if v >= 4 {
            req.states_filter = states.iter().map(|x| s(x)).collect();
        }
        if v >= 5 {
            req.types_filter = types.iter().map(|x| s(x)).collect();
        }
        let r = cluster.call_settled(&addr, &req, v, |r| r.error_code).await?;
        if r.error_code != 0 {
            return Err(AdminError::Message(format!("ListGroups failed: {}", error_name(r.error_code))));
        }
        for g in r.groups {
            // Before v5 there is no type: every group is a classic group.
            let group_type = if v >= 5 { g.group_type.to_string() } else { "classic".to_string() };
            groups.insert(g.group_id.to_string(), (g.group_state.to_string(), group_type));
        }
    }
    let wanted_states: BTreeSet<String> = states.iter().map(|x| x.to_ascii_lowercase()).collect();
    let wanted_types: BTreeSet<String> = types.iter().map(|x| x.to_ascii_lowercase()).collect();
    groups.retain(|_, (st, ty)| {
        (wanted_states.is_empty() || wanted_states.contains(&st.to_ascii_lowercase()))
            && (wanted_types.is_empty() || wanted_types.contains(&ty.to_ascii_lowercase()))
    });
    Ok(groups)
}

/// A group type as kafka-consumer-groups.sh prints it (`Classic`, `Consumer`).
fn type_name(wire: &str) -> String {
    let lower = wire.to_ascii_lowercase();
    let mut chars = lower.chars();
    chars.next().map(|c| c.to_ascii_uppercase().to_string() + chars.as_str()).unwrap_or_default()
}

/// What ConsumerGroupDescribe adds for a KIP-848 consumer group.
struct ConsumerView {
    group_epoch: i32,
    assignment_epoch: i32,
    members: Vec<ConsumerMemberView>,
}

struct ConsumerMemberView {
    instance_id: Option<String>,
    member_type: &'static str,
    member_epoch: i32,
    subscription: String,
    assignment: String,
    target: String,
}

/// `foo:0,1,2;bar:0` (or `-` when empty), as kafka-consumer-groups.sh
/// prints an assignment.
fn assignment_string(tps: &[consumer_group_describe_response::TopicPartitions]) -> String {
    let mut parts: Vec<(String, Vec<i32>)> = tps
        .iter()
        .filter(|tp| !tp.partitions.is_empty())
        .map(|tp| {
            let mut ps = tp.partitions.clone();
            ps.sort_unstable();
            (tp.topic_name.to_string(), ps)
        })
        .collect();
    parts.sort();
    if parts.is_empty() {
        return "-".into();
    }
    let shown: Vec<String> = parts
        .into_iter()
        .map(|(t, ps)| format!("{t}:{}", ps.iter().map(i32::to_string).collect::<Vec<_>>().join(",")))
        .collect();
    shown.join(";")
}

/// ConsumerGroupDescribe of `group` at its coordinator: `None` when the
/// coordinator does not serve it or the group is not a consumer group
/// (GROUP_ID_NOT_FOUND), so the caller falls back to DescribeGroups, as
/// Kafka's admin client does.
async fn describe_consumer_group(
    cluster: &mut Cluster,
    coordinator: &str,
    group: &str,
) -> Result<Option<consumer_group_describe_response::DescribedGroup>> {
    let Ok(v) = cluster.conn(coordinator).await?.version::<ConsumerGroupDescribeRequest>(0, 1) else {
        return Ok(None);
    };
    let req = ConsumerGroupDescribeRequest::default().with_group_ids(vec![GroupId(s(group))]);
    let r = cluster
        .call_settled(coordinator, &req, v, |r| r.groups.first().map(|g| g.error_code).unwrap_or_default())
        .await?;
    let Some(g) = r.groups.into_iter().next() else { return Ok(None) };
    match g.error_code {
        0 => Ok(Some(g)),
        GROUP_ID_NOT_FOUND => Ok(None),
        e => Err(AdminError::Message(format!("cannot describe group '{group}': {}", error_name(e)))),
    }
}

/// Kafka's GROUP_ID_NOT_FOUND.
const GROUP_ID_NOT_FOUND: i16 = 69;

/// A described group with its committed offsets.
struct Snapshot {
    state: String,
    protocol: String,
    coordinator: String,
    members: ClassicMembers,
    committed: BTreeMap<(String, i32), (i64, String)>,
    /// Set for a KIP-848 consumer group (members in the same order).
    consumer: Option<ConsumerView>,
}

/// A consumer group's description in the shape of a classic one, plus
/// what only a consumer group has.
fn from_consumer(
    g: consumer_group_describe_response::DescribedGroup,
) -> (String, String, ClassicMembers, ConsumerView) {
    let mut members = Vec::new();
    let mut views = Vec::new();
    for m in &g.members {
        let flat: Vec<(String, i32)> = m
            .assignment
            .topic_partitions
            .iter()
            .flat_map(|tp| tp.partitions.iter().map(move |p| (tp.topic_name.to_string(), *p)))
            .collect();
        members.push((m.member_id.to_string(), m.client_host.to_string(), m.client_id.to_string(), flat));
        let mut subscription: Vec<String> = m.subscribed_topic_names.iter().map(|t| t.to_string()).collect();
        if let Some(r) = m.subscribed_topic_regex.as_ref().filter(|r| !r.is_empty()) {
            subscription.push(format!("/{r}/"));
        }
        views.push(ConsumerMemberView {
            instance_id: m.instance_id.as_ref().map(|i| i.to_string()),
            member_type: if m.member_type == 0 { "classic" } else { "consumer" },
            member_epoch: m.member_epoch,
            subscription: if subscription.is_empty() { "-".into() } else { subscription.join(",") },
            assignment: assignment_string(&m.assignment.topic_partitions),
            target: assignment_string(&m.target_assignment.topic_partitions),
        });
    }
    let view = ConsumerView { group_epoch: g.group_epoch, assignment_epoch: g.assignment_epoch, members: views };
    (g.group_state.to_string(), g.assignor_name.to_string(), members, view)
}

async fn snapshot(cluster: &mut Cluster, group: &str) -> Result<Snapshot> {
    let coordinator = cluster.coordinator(group).await?;
    let (state, protocol, members, consumer) = match describe_consumer_group(cluster, &coordinator, group).await? {
        Some(g) => {
            let (state, protocol, members, view) = from_consumer(g);
            (state, protocol, members, Some(view))
        }
        None => {
            let (state, protocol, members) = describe_classic_group(cluster, &coordinator, group).await?;
            (state, protocol, members, None)
        }
    };
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
    Ok(Snapshot { state, protocol, coordinator, members, committed, consumer })
}

type ClassicMembers = Vec<(String, String, String, Vec<(String, i32)>)>;

/// DescribeGroups of `group`: (state, protocol, members with the
/// partitions their consumer-protocol assignment names).
async fn describe_classic_group(
    cluster: &mut Cluster,
    coordinator: &str,
    group: &str,
) -> Result<(String, String, ClassicMembers)> {
    let dv = cluster.conn(coordinator).await?.version::<DescribeGroupsRequest>(0, 5)?;
    let describe = DescribeGroupsRequest::default().with_groups(vec![GroupId(s(group))]);
    let d = cluster
        .call_settled(coordinator, &describe, dv, |r| r.groups.first().map(|g| g.error_code).unwrap_or_default())
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
    Ok((g.group_state.to_string(), g.protocol_data.to_string(), members))
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

/// `groups describe` of several groups (`--group` repeated, or every
/// group with `--all-groups`), one after another with a blank line between
/// them, as kafka-consumer-groups.sh prints them. A named group that does
/// not exist fails the command; with `--all-groups`, a group deleted since
/// it was listed is left out.
pub async fn describe(
    cluster: &mut Cluster,
    groups: &[String],
    all_groups: bool,
    view: &str,
    verbose: bool,
) -> Result<String> {
    let names: Vec<String> =
        if all_groups { listed_groups(cluster, &[], &[]).await?.into_keys().collect() } else { groups.to_vec() };
    let mut parts = Vec::with_capacity(names.len());
    for g in &names {
        match describe_one(cluster, g, view, verbose).await? {
            Some(out) => parts.push(out),
            None if all_groups => {}
            None => return Err(AdminError::Message(format!("Consumer group '{g}' does not exist."))),
        }
    }
    Ok(parts.join("\n"))
}

/// One group's `describe`: the default offsets view, or `--members`, or
/// `--state`; None if the group does not exist. `verbose` adds, for a
/// KIP-848 consumer group, the epochs (`--state`) and each member's epochs,
/// subscription and current and target assignments (`--members`), as
/// `kafka-consumer-groups.sh --verbose` does.
async fn describe_one(cluster: &mut Cluster, group: &str, view: &str, verbose: bool) -> Result<Option<String>> {
    let snap = snapshot(cluster, group).await?;
    if snap.state == "Dead" {
        return Ok(None);
    }
    let mut out = String::new();
    match view {
        "state" => {
            let mut headers = vec!["GROUP", "COORDINATOR", "ASSIGNMENT-STRATEGY", "STATE"];
            let mut row = vec![group.to_string(), snap.coordinator.clone(), snap.protocol.clone(), snap.state.clone()];
            if let (true, Some(c)) = (verbose, &snap.consumer) {
                headers.extend(["GROUP-EPOCH", "TARGET-ASSIGNMENT-EPOCH"]);
                row.extend([c.group_epoch.to_string(), c.assignment_epoch.to_string()]);
            }
            headers.push("#MEMBERS");
            row.push(snap.members.len().to_string());
            out.push_str(&table(&headers, &[row]));
        }
        "members" if snap.consumer.is_some() && !snap.members.is_empty() => {
            out.push_str(&consumer_members_table(group, &snap, verbose));
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
    Ok(Some(out))
}

/// `--members` of a consumer group: Kafka's columns plus the instance id;
/// with `verbose` the member type, subscription, current epoch and
/// assignment, target epoch and assignment.
fn consumer_members_table(group: &str, snap: &Snapshot, verbose: bool) -> String {
    let Some(c) = &snap.consumer else { return String::new() };
    let mut headers = vec!["GROUP", "CONSUMER-ID", "GROUP-INSTANCE-ID", "HOST", "CLIENT-ID", "#PARTITIONS"];
    if verbose {
        headers.extend([
            "MEMBER-TYPE",
            "SUBSCRIPTION",
            "CURRENT-EPOCH",
            "CURRENT-ASSIGNMENT",
            "TARGET-EPOCH",
            "TARGET-ASSIGNMENT",
        ]);
    }
    let rows: Vec<Vec<String>> = snap
        .members
        .iter()
        .zip(&c.members)
        .map(|((id, host, client, parts), m)| {
            let mut row = vec![
                group.to_string(),
                id.clone(),
                m.instance_id.clone().unwrap_or_else(|| "-".into()),
                host.clone(),
                client.clone(),
                parts.len().to_string(),
            ];
            if verbose {
                row.extend([
                    m.member_type.to_string(),
                    m.subscription.clone(),
                    m.member_epoch.to_string(),
                    m.assignment.clone(),
                    c.assignment_epoch.to_string(),
                    m.target.clone(),
                ]);
            }
            row
        })
        .collect();
    table(&headers, &rows)
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

/// The first line `delete-offsets` prints for the request's outcome, as
/// kafka-consumer-groups.sh words it; an error's line goes to stderr.
fn delete_offsets_headline(group: &str, topics: &[String], top: i16) -> std::result::Result<String, String> {
    use crate::ErrorCode as E;
    match crate::ErrorCode(top) {
        E::NONE => Ok(format!("Request succeed for deleting offsets with topic {} group {group}", topics.join(", "))),
        E::INVALID_GROUP_ID => Err(format!("'{group}' is not valid.")),
        E::GROUP_ID_NOT_FOUND => Err(format!("'{group}' does not exist.")),
        E::GROUP_AUTHORIZATION_FAILED => Err(format!("Access to '{group}' is not authorized.")),
        E::NON_EMPTY_GROUP => {
            Err(format!("Deleting offsets of a consumer group '{group}' is forbidden if the group is not empty."))
        }
        E::GROUP_SUBSCRIBED_TO_TOPIC | E::TOPIC_AUTHORIZATION_FAILED | E::UNKNOWN_TOPIC_OR_PARTITION => {
            Err("Encounter some partition level error, see the follow-up details:".into())
        }
        _ => Err(format!("Encounter some unknown error: {}", error_name(top))),
    }
}

/// `groups delete-offsets`: deletes `group`'s committed offsets of the
/// partitions `topics` name (OffsetDelete), and reports each partition as
/// kafka-consumer-groups.sh --delete-offsets does. A topic that does not
/// exist is reported as partition "Not Provided"; any error fails the
/// command, with the table after its message.
pub async fn delete_offsets(cluster: &mut Cluster, group: &str, topics: &[String]) -> Result<String> {
    let TopicScope { whole_topics, partitions: mut tps } = TopicScope::parse(topics, false, std::iter::empty())?;
    let counts = if whole_topics.is_empty() { BTreeMap::new() } else { cluster.metadata(Some(&whole_topics)).await?.0 };
    // The error of each partition; partition −1 is a topic that does not exist.
    let mut status: BTreeMap<(String, i32), i16> = BTreeMap::new();
    for t in &whole_topics {
        match counts.get(t) {
            Some(&n) => tps.extend((0..n).map(|p| (t.clone(), p))),
            None => {
                status.insert((t.clone(), -1), crate::ErrorCode::UNKNOWN_TOPIC_OR_PARTITION.0);
            }
        }
    }
    let mut top = 0;
    if !tps.is_empty() {
        let coordinator = cluster.coordinator(group).await?;
        let mut by_topic: BTreeMap<&str, Vec<i32>> = BTreeMap::new();
        for (t, p) in &tps {
            by_topic.entry(t.as_str()).or_default().push(*p);
        }
        let req = OffsetDeleteRequest::default().with_group_id(GroupId(s(group))).with_topics(
            by_topic
                .into_iter()
                .map(|(t, ps)| {
                    offset_delete_request::OffsetDeleteRequestTopic::default()
                        .with_name(TopicName(s(t)))
                        .with_partitions(
                            ps.into_iter()
                                .map(|p| {
                                    offset_delete_request::OffsetDeleteRequestPartition::default()
                                        .with_partition_index(p)
                                })
                                .collect(),
                        )
                })
                .collect(),
        );
        let r = cluster.call_settled(&coordinator, &req, 0, |r| r.error_code).await?;
        top = r.error_code;
        let answered: HashMap<(&str, i32), i16> = r
            .topics
            .iter()
            .flat_map(|t| t.partitions.iter().map(move |p| ((t.name.0.as_str(), p.partition_index), p.error_code)))
            .collect();
        for (t, p) in tps {
            // As the AdminClient: a request-level error fails every partition.
            let code = if top != 0 { top } else { answered.get(&(t.as_str(), p)).copied().unwrap_or_default() };
            status.insert((t, p), code);
        }
    }
    let rows: Vec<Vec<String>> = status
        .iter()
        .map(|((t, p), code)| {
            let partition = if *p >= 0 { p.to_string() } else { "Not Provided".into() };
            let outcome = if *code == 0 { "Successful".into() } else { format!("Error: {}", error_name(*code)) };
            vec![t.clone(), partition, outcome]
        })
        .collect();
    let details = table(&["TOPIC", "PARTITION", "STATUS"], &rows);
    let first_error = status.values().copied().find(|&c| c != 0).unwrap_or_default();
    match delete_offsets_headline(group, topics, if top != 0 { top } else { first_error }) {
        Ok(headline) => Ok(format!("{headline}\n\n{details}")),
        Err(headline) => Err(AdminError::Message(format!("{headline}\n\n{details}"))),
    }
}

/// Where `reset-offsets` moves each partition.
#[derive(Debug, Clone, PartialEq)]
pub enum ResetSpec {
    Earliest,
    Latest,
    Offset(i64),
    ShiftBy(i64),
    /// The first offset at or after a time, in ms since the epoch
    /// (`--to-datetime`, `--by-duration`); the log end if there is none.
    Timestamp(i64),
    /// The committed offset, or the log end where there is none.
    Current,
    /// Each group's partitions and offsets as a plan names them
    /// (`--from-file`); the partitions in scope are the plan's.
    FromFile(ResetPlan),
}

/// What `groups reset-offsets` was asked to do.
pub struct ResetOptions<'a> {
    /// The groups named with `--group`, or every group (`--all-groups`).
    pub groups: &'a [String],
    pub all_groups: bool,
    pub topics: &'a [String],
    pub all_topics: bool,
    pub spec: &'a ResetSpec,
    pub execute: bool,
    /// Print the plan as CSV (`--export`) instead of a table.
    pub export: bool,
}

/// The partitions `--topic` arguments name (`reset-offsets`,
/// `delete-offsets`): whole topics still to be expanded through Metadata,
/// and explicit partitions ("topic:0,1").
#[derive(Debug, Default, PartialEq)]
struct TopicScope {
    whole_topics: Vec<String>,
    partitions: BTreeSet<(String, i32)>,
}

impl TopicScope {
    /// Reads `--topic` arguments; `--all-topics` means every partition the
    /// group has committed.
    fn parse<'a>(
        topics: &[String],
        all_topics: bool,
        committed: impl Iterator<Item = &'a (String, i32)>,
    ) -> Result<Self> {
        let mut scope = TopicScope::default();
        if all_topics {
            scope.partitions.extend(committed.cloned());
        }
        for t in topics {
            match t.split_once(':') {
                Some((name, parts)) => {
                    for p in parts.split(',') {
                        let p: i32 =
                            p.trim().parse().map_err(|_| AdminError::Message(format!("invalid partition in {t:?}")))?;
                        scope.partitions.insert((name.to_string(), p));
                    }
                }
                None => scope.whole_topics.push(t.clone()),
            }
        }
        Ok(scope)
    }

    /// Every topic Metadata must be asked about, once each.
    fn topic_names(&self) -> Vec<String> {
        let names: BTreeSet<String> =
            self.whole_topics.iter().cloned().chain(self.partitions.iter().map(|(t, _)| t.clone())).collect();
        names.into_iter().collect()
    }

    /// All partitions in scope, whole topics expanded with their partition
    /// counts.
    fn expand(mut self, partition_counts: &BTreeMap<String, i32>) -> Result<Vec<(String, i32)>> {
        for t in &self.whole_topics {
            let n = partition_counts.get(t).ok_or_else(|| AdminError::Message(format!("topic {t} does not exist")))?;
            self.partitions.extend((0..*n).map(|p| (t.clone(), p)));
        }
        if self.partitions.is_empty() {
            return Err(AdminError::Message("no partitions to reset: give --topic or --all-topics".into()));
        }
        let missing: Vec<String> = self
            .partitions
            .iter()
            .filter(|(t, p)| partition_counts.get(t).is_none_or(|n| p >= n))
            .map(|(t, p)| format!("{t}-{p}"))
            .collect();
        if !missing.is_empty() {
            return Err(AdminError::Message(format!("The partitions \"{}\" do not exist", missing.join(","))));
        }
        Ok(self.partitions.into_iter().collect())
    }
}

/// What the partitions' logs hold, as ListOffsets reported it.
struct LogBounds {
    earliest: HashMap<(String, i32), i64>,
    latest: HashMap<(String, i32), i64>,
    /// The first offset at or after `--to-datetime`, when that is the spec.
    by_time: Option<HashMap<(String, i32), i64>>,
}

/// The new offset of every partition of `group`: within the log's bounds,
/// as kafka-consumer-groups.sh computes it.
fn plan_reset(
    spec: &ResetSpec,
    group: &str,
    tps: &[(String, i32)],
    committed: &BTreeMap<(String, i32), (i64, String)>,
    bounds: &LogBounds,
) -> BTreeMap<(String, i32), i64> {
    tps.iter()
        .map(|tp| {
            let lo = bounds.earliest.get(tp).copied().unwrap_or(0);
            let hi = bounds.latest.get(tp).copied().unwrap_or(lo);
            let clamp = |x: i64| x.clamp(lo, hi.max(lo));
            let target = match spec {
                ResetSpec::Earliest => lo,
                ResetSpec::Latest => hi,
                ResetSpec::Offset(o) => clamp(*o),
                ResetSpec::ShiftBy(n) => clamp(committed.get(tp).map_or(lo, |c| c.0).saturating_add(*n)),
                ResetSpec::Timestamp(_) => bounds.by_time.as_ref().and_then(|m| m.get(tp).copied()).unwrap_or(hi),
                ResetSpec::Current => committed.get(tp).map_or(hi, |c| c.0),
                ResetSpec::FromFile(plan) => clamp(plan.get(group).and_then(|o| o.get(tp)).copied().unwrap_or(lo)),
            };
            (tp.clone(), target)
        })
        .collect()
}

/// The table `reset-offsets` prints (every group's rows, in the order the
/// groups were given), with the dry-run reminder.
fn render_reset(plans: &[(String, Offsets)], executed: bool) -> String {
    let rows: Vec<Vec<String>> = plans
        .iter()
        .flat_map(|(group, offsets)| {
            offsets.iter().map(move |((t, p), o)| vec![group.clone(), t.clone(), p.to_string(), o.to_string()])
        })
        .collect();
    let mut out = table(&["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"], &rows);
    if !executed {
        out.push_str("(dry run: nothing was changed; add --execute to commit these offsets)\n");
    }
    out
}

/// Commits the planned offsets as a simple (generation −1) commit.
async fn commit_reset(
    cluster: &mut Cluster,
    coordinator: &str,
    group: &str,
    new_offsets: &BTreeMap<(String, i32), i64>,
) -> Result<()> {
    let v = cluster.conn(coordinator).await?.version::<OffsetCommitRequest>(2, 7)?;
    let mut topics: BTreeMap<&str, Vec<OffsetCommitRequestPartition>> = BTreeMap::new();
    for ((t, p), o) in new_offsets {
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
    let r = cluster.call_settled(coordinator, &req, v, first_error).await?;
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
    if errors.is_empty() {
        Ok(())
    } else {
        Err(AdminError::Message(format!("Error: resetting offsets failed:\n{}", errors.join("\n"))))
    }
}

/// `groups reset-offsets`: computes each group's new offsets and commits
/// them only with `execute`, and only for groups without active members.
/// As kafka-consumer-groups.sh, a group that cannot be reset does not stop
/// the others; the command then fails after printing what it did.
pub async fn reset_offsets(cluster: &mut Cluster, opts: &ResetOptions<'_>) -> Result<String> {
    let groups: Vec<String> = if opts.all_groups {
        listed_groups(cluster, &[], &[]).await?.into_keys().collect()
    } else {
        opts.groups.to_vec()
    };
    let mut plans = Vec::new();
    let mut errors = Vec::new();
    for group in &groups {
        match reset_group(cluster, group, opts).await {
            Ok(offsets) => plans.push((group.clone(), offsets)),
            Err(AdminError::Message(e)) if groups.len() > 1 => errors.push(e),
            Err(e) => return Err(e),
        }
    }
    let output = if opts.export {
        // One group's plan leaves the group out, as Kafka's tool does.
        reset_plan::export(&plans.iter().cloned().collect(), groups.len() != 1 || opts.all_groups)
    } else if plans.is_empty() {
        String::new()
    } else {
        render_reset(&plans, opts.execute)
    };
    if errors.is_empty() {
        Ok(output)
    } else {
        Err(AdminError::AfterOutput { output, error: errors.join("\n") })
    }
}

/// One group's part of `reset-offsets`: its new offsets, committed if asked.
async fn reset_group(cluster: &mut Cluster, group: &str, opts: &ResetOptions<'_>) -> Result<Offsets> {
    let spec = opts.spec;
    let snap = snapshot(cluster, group).await?;
    if snap.state != "Empty" && snap.state != "Dead" {
        return Err(AdminError::Message(format!(
            "Assignments can only be reset if the group '{group}' is inactive, but the current state is {}.",
            snap.state
        )));
    }
    let scope = match spec {
        ResetSpec::FromFile(plan) => TopicScope {
            whole_topics: Vec::new(),
            partitions: plan
                .get(group)
                .ok_or_else(|| AdminError::Message(format!("No reset plan for group {group} found")))?
                .keys()
                .cloned()
                .collect(),
        },
        _ => TopicScope::parse(opts.topics, opts.all_topics, snap.committed.keys())?,
    };
    let (partition_counts, leaders) = cluster.metadata(Some(&scope.topic_names())).await?;
    let tps = scope.expand(&partition_counts)?;
    if let ResetSpec::ShiftBy(_) = spec {
        // As kafka-consumer-groups.sh: shifting needs an offset to shift from.
        if let Some((t, p)) = tps.iter().find(|tp| !snap.committed.contains_key(*tp)) {
            return Err(AdminError::Message(format!(
                "Cannot shift offset for partition {t}-{p} since there is no current committed offset"
            )));
        }
    }
    let by_time = match spec {
        ResetSpec::Timestamp(ms) => Some(cluster.list_offsets(&tps, *ms, &leaders).await?),
        _ => None,
    };
    let bounds = LogBounds {
        earliest: cluster.list_offsets(&tps, -2, &leaders).await?,
        latest: cluster.list_offsets(&tps, -1, &leaders).await?,
        by_time,
    };
    let new_offsets = plan_reset(spec, group, &tps, &snap.committed, &bounds);
    if opts.execute {
        commit_reset(cluster, &snap.coordinator, group, &new_offsets).await?;
    }
    Ok(new_offsets)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tp(t: &str, p: i32) -> (String, i32) {
        (t.to_string(), p)
    }

    #[test]
    fn reset_scope_reads_whole_topics_partition_lists_and_all_topics() {
        let committed = [tp("c", 0), tp("c", 3)];
        let scope = TopicScope::parse(&["a".into(), "b:1, 2".into()], true, committed.iter()).unwrap();
        assert_eq!(scope.whole_topics, vec!["a".to_string()]);
        assert_eq!(
            scope.partitions.iter().cloned().collect::<Vec<_>>(),
            vec![tp("b", 1), tp("b", 2), tp("c", 0), tp("c", 3)]
        );
        assert_eq!(scope.topic_names(), vec!["a", "b", "c"]);
        let counts = BTreeMap::from([("a".to_string(), 2), ("b".to_string(), 3), ("c".to_string(), 4)]);
        assert_eq!(scope.expand(&counts).unwrap().len(), 6);
        assert!(TopicScope::parse(&["b:x".into()], false, [].iter()).is_err(), "a partition must be a number");
        let unknown = TopicScope::parse(&["z".into()], false, [].iter()).unwrap();
        assert!(unknown.expand(&counts).is_err(), "an unknown topic is an error");
        assert!(TopicScope::default().expand(&counts).is_err(), "nothing in scope is an error");
        let beyond = TopicScope::parse(&["b:0,7".into(), "z:1".into()], false, [].iter()).unwrap();
        let err = beyond.expand(&counts).unwrap_err().to_string();
        assert_eq!(err, "The partitions \"b-7,z-1\" do not exist");
    }

    #[test]
    fn reset_plans_stay_within_the_log_and_shift_from_the_committed_offset() {
        let tps = vec![tp("t", 0)];
        let committed = BTreeMap::from([(tp("t", 0), (50, String::new()))]);
        let bounds = LogBounds {
            earliest: HashMap::from([(tp("t", 0), 10)]),
            latest: HashMap::from([(tp("t", 0), 100)]),
            by_time: Some(HashMap::from([(tp("t", 0), 42)])),
        };
        let plan = |spec| plan_reset(&spec, "g", &tps, &committed, &bounds)[&tp("t", 0)];
        assert_eq!(plan(ResetSpec::Earliest), 10);
        assert_eq!(plan(ResetSpec::Latest), 100);
        assert_eq!(plan(ResetSpec::Offset(5)), 10, "below the log start is clamped up");
        assert_eq!(plan(ResetSpec::Offset(500)), 100, "past the log end is clamped down");
        assert_eq!(plan(ResetSpec::ShiftBy(-20)), 30);
        assert_eq!(plan(ResetSpec::ShiftBy(i64::MAX)), 100, "no overflow");
        assert_eq!(plan(ResetSpec::Timestamp(1_700_000_000_000)), 42);
        assert_eq!(plan(ResetSpec::Current), 50);
        let nothing_committed = BTreeMap::new();
        assert_eq!(
            plan_reset(&ResetSpec::Current, "g", &tps, &nothing_committed, &bounds)[&tp("t", 0)],
            100,
            "--to-current without a committed offset: the log end, as Kafka"
        );
        let file = |o: i64| ResetSpec::FromFile(BTreeMap::from([("g".to_string(), BTreeMap::from([(tp("t", 0), o)]))]));
        assert_eq!(plan(file(33)), 33, "a plan's offset is taken as it is");
        assert_eq!(plan(file(0)), 10, "and clamped to the log like --to-offset");
        assert_eq!(plan(file(1_000)), 100);
    }

    #[test]
    fn a_dry_run_says_that_nothing_changed() {
        let plans = vec![("g".to_string(), BTreeMap::from([(tp("t", 0), 7)]))];
        assert!(render_reset(&plans, false).contains("dry run"));
        let executed = render_reset(&plans, true);
        assert!(!executed.contains("dry run") && executed.contains("NEW-OFFSET"));
    }

    #[test]
    fn assignments_print_as_topic_partitions_sorted_or_a_dash() {
        use consumer_group_describe_response::TopicPartitions;
        let tp = |t: &str, ps: &[i32]| {
            TopicPartitions::default().with_topic_name(TopicName(s(t))).with_partitions(ps.to_vec())
        };
        assert_eq!(assignment_string(&[tp("foo", &[2, 0]), tp("bar", &[1])]), "bar:1;foo:0,2");
        assert_eq!(assignment_string(&[tp("foo", &[])]), "-");
    }

    #[test]
    fn tables_pad_columns_like_kafka_consumer_groups() {
        let t =
            table(&["GROUP", "TOPIC"], &[vec!["g".into(), "orders".into()], vec!["longer-group".into(), "t".into()]]);
        assert_eq!(t, "GROUP        TOPIC\ng            orders\nlonger-group t\n");
    }
}
