//! Regular-expression subscriptions (`SubscribedTopicRegex`), as Kafka 4.x
//! resolves them (`GroupMetadataManager.maybeUpdateRegularExpressions`,
//! `refreshRegularExpressions`, `handleRegularExpressionsResult`).
//!
//! A group resolves each distinct pattern its members subscribe to against
//! the topic image and persists the result as a ConsumerGroupRegularExpression
//! record (topics, the image's version, the time). A member subscribes to its
//! topic names *and* to what its pattern resolved to; the group's subscribed
//! topics are the union over its members.
//!
//! Kafka resolves asynchronously and folds the result in with a later write.
//! kcoord resolves synchronously inside the heartbeat that triggers it, under
//! Kafka's conditions (a pattern is new to the group, or the image's topic
//! names changed since the last resolution, and at most once per
//! [`REGEX_BATCH_REFRESH_INTERVAL_MS`] of the injected clock), so the same
//! records are written in a deterministic order and replay equals live.
//!
//! Patterns come from the network, so compiling is bounded: nesting depth,
//! compiled program size and lazy-DFA cache are capped (the `regex` crate
//! matches in linear time; there is no backtracking to exploit), and
//! resolution is topics × distinct patterns, both bounded by configuration.

use std::collections::{BTreeMap, BTreeSet};

use super::describable::Describable;
use super::group::{ConsumerGroup, ConsumerMember};
use super::records::RegularExpressionValue;
use super::target::TopicImage;
use crate::coordinator::records::{ConsumerKey, Record, RecordValue};

/// Kafka's `REGEX_BATCH_REFRESH_INTERVAL_MS`: patterns are re-resolved at
/// most this often, so that one change of topics costs one rebalance.
pub const REGEX_BATCH_REFRESH_INTERVAL_MS: i64 = 10_000;

/// Caps on what one pattern may cost to compile and match.
const NEST_LIMIT: u32 = 64;
const COMPILED_SIZE_LIMIT: usize = 1 << 20;
const DFA_SIZE_LIMIT: usize = 1 << 20;

/// What a refresh resolves patterns against: the topic image, less the
/// topics the requester may not DESCRIBE.
#[derive(Debug, Clone, Copy)]
pub struct Visible<'a> {
    pub image: &'a TopicImage,
    pub describable: &'a Describable,
}

/// The group's resolved patterns: pattern → what it resolved to.
pub type Resolved = BTreeMap<String, RegularExpressionValue>;

/// Compiles `pattern` for a whole-name match (Java's `Matcher.matches()`,
/// which Kafka uses), or describes why it is not a valid pattern.
pub fn compile(pattern: &str) -> Result<::regex::Regex, String> {
    // Parse the pattern alone first: wrapping it in a group below could
    // otherwise turn an unbalanced `a)(b` into a valid expression.
    if let Err(e) = regex_syntax::ParserBuilder::new().nest_limit(NEST_LIMIT).build().parse(pattern) {
        return Err(match e {
            regex_syntax::Error::Parse(a) => a.kind().to_string(),
            regex_syntax::Error::Translate(h) => h.kind().to_string(),
            other => other.to_string(),
        });
    }
    ::regex::RegexBuilder::new(&format!(r"\A(?:{pattern})\z"))
        .nest_limit(NEST_LIMIT + 1)
        .size_limit(COMPILED_SIZE_LIMIT)
        .dfa_size_limit(DFA_SIZE_LIMIT)
        .build()
        .map_err(|e| match e {
            ::regex::Error::CompiledTooBig(limit) => {
                format!("the compiled regular expression exceeds the size limit of {limit} bytes")
            }
            other => other.to_string(),
        })
}

/// Kafka's `throwIfRegularExpressionIsInvalid` message.
pub fn invalid_message(pattern: &str, description: &str) -> String {
    format!("SubscribedTopicRegex `{pattern}` is not a valid regular expression: {description}.")
}

/// FNV-1a over the sorted topic names: the version a resolution records.
pub fn names_version<'a>(names: impl Iterator<Item = &'a str>) -> i64 {
    const OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
    const PRIME: u64 = 0x0000_0100_0000_01b3;
    let mut h = OFFSET;
    for name in names {
        for b in (name.len() as u32).to_be_bytes().iter().chain(name.as_bytes()) {
            h ^= u64::from(*b);
            h = h.wrapping_mul(PRIME);
        }
    }
    h as i64
}

fn non_empty(r: Option<&str>) -> Option<&str> {
    r.filter(|r| !r.is_empty())
}

/// The topics a member subscribes to: its names, then what its pattern
/// resolved to (possibly repeating a name; callers collect into sets).
pub fn member_topics<'a>(m: &'a ConsumerMember, regexes: &'a Resolved) -> impl Iterator<Item = &'a String> {
    let resolved = non_empty(m.metadata.subscribed_topic_regex.as_deref()).and_then(|r| regexes.get(r));
    m.metadata.subscribed_topic_names.iter().chain(resolved.into_iter().flat_map(|v| v.topics.iter()))
}

/// The group's pattern counts once the `removed` members are gone and
/// `new` (if any) is in.
pub fn counts_after(
    g: &ConsumerGroup,
    removed: &[&ConsumerMember],
    new: Option<&ConsumerMember>,
) -> BTreeMap<String, usize> {
    let mut counts = g.subscribed_regexes.clone();
    for m in removed {
        if let Some(r) = non_empty(m.metadata.subscribed_topic_regex.as_deref()) {
            if let Some(n) = counts.get_mut(r) {
                *n = n.saturating_sub(1);
            }
        }
    }
    counts.retain(|_, n| *n > 0);
    if let Some(r) = new.and_then(|m| non_empty(m.metadata.subscribed_topic_regex.as_deref())) {
        *counts.entry(r.to_string()).or_insert(0) += 1;
    }
    counts
}

/// The topics the group's patterns contribute: what each pattern still
/// subscribed to resolved to.
pub fn regex_topics<'a>(counts: &'a BTreeMap<String, usize>, resolved: &'a Resolved) -> BTreeSet<&'a str> {
    counts.keys().filter_map(|r| resolved.get(r)).flat_map(|v| v.topics.iter().map(String::as_str)).collect()
}

/// The group's subscribed topic names: by name or through a pattern.
pub fn subscribed_topic_names(g: &ConsumerGroup) -> BTreeSet<String> {
    let mut out: BTreeSet<String> = g.subscribed_topics.keys().cloned().collect();
    out.extend(regex_topics(&g.subscribed_regexes, &g.resolved_regexes).into_iter().map(str::to_string));
    out
}

/// What a heartbeat does about the group's patterns.
#[derive(Debug, Default)]
pub struct RegexPlan {
    /// ConsumerGroupRegularExpression records and tombstones to write.
    pub records: Vec<Record>,
    /// Whether the group epoch must be bumped (a resolution changed, or a
    /// member moved to a pattern that is already resolved).
    pub bump: bool,
    /// Pattern → number of members, after the heartbeat.
    pub counts: BTreeMap<String, usize>,
    /// The resolutions after the heartbeat.
    pub resolved: Resolved,
}

/// Kafka's `maybeUpdateRegularExpressions` followed by the handling of the
/// refresh it schedules, for a member going from `member` (what the group
/// holds for it, or a new or replacing member) to `updated`. `stored` is the
/// member under this id as stored, `also_removed` a static member replaced.
/// An invalid new pattern is refused with Kafka's message.
pub fn plan(
    g: &ConsumerGroup,
    member: &ConsumerMember,
    updated: &ConsumerMember,
    stored: Option<&ConsumerMember>,
    also_removed: Option<&ConsumerMember>,
    visible: Visible<'_>,
    now: i64,
) -> Result<RegexPlan, String> {
    let image = visible.image;
    let removed: Vec<&ConsumerMember> = [stored, also_removed].into_iter().flatten().collect();
    let counts = counts_after(g, &removed, Some(updated));
    let mut resolved = g.resolved_regexes.clone();
    let mut records = Vec::new();
    let mut bump = false;
    let mut require_refresh = false;
    let old = non_empty(member.metadata.subscribed_topic_regex.as_deref());
    let new = non_empty(updated.metadata.subscribed_topic_regex.as_deref());
    if old != new {
        if let Some(o) = old {
            if !counts.contains_key(o) && resolved.remove(o).is_some() {
                records.push(Record::consumer(&g.group_id, ConsumerKey::RegularExpression(o.to_string()), None));
            }
        }
        if let Some(n) = new {
            if !g.subscribed_regexes.contains_key(n) {
                compile(n).map_err(|d| invalid_message(n, &d))?;
                require_refresh = true;
            } else {
                bump = resolved.contains_key(n);
            }
        }
    }
    if counts.is_empty() {
        return Ok(RegexPlan { records, bump, counts, resolved });
    }
    let last_refresh = resolved.values().map(|v| v.timestamp).max().unwrap_or(i64::MIN);
    if now <= last_refresh.saturating_add(REGEX_BATCH_REFRESH_INTERVAL_MS) {
        return Ok(RegexPlan { records, bump, counts, resolved });
    }
    require_refresh |= counts.keys().any(|r| !resolved.contains_key(r));
    require_refresh |= resolved.values().any(|v| v.version != image.names_version());
    if require_refresh {
        bump |= refresh(&g.group_id, &counts, &mut resolved, &mut records, visible, now);
    }
    Ok(RegexPlan { records, bump, counts, resolved })
}

/// Resolves every pattern in `counts` against the visible topics (Kafka's
/// `refreshRegularExpressions` with `filterTopicDescribeAuthorizedTopics`,
/// then `handleRegularExpressionsResult`): one record per pattern; true if
/// any resolution changed.
fn refresh(
    group_id: &str,
    counts: &BTreeMap<String, usize>,
    resolved: &mut Resolved,
    records: &mut Vec<Record>,
    visible: Visible<'_>,
    now: i64,
) -> bool {
    let image = visible.image;
    let mut compiled = Vec::with_capacity(counts.len());
    for pattern in counts.keys() {
        match compile(pattern) {
            Ok(re) => compiled.push((pattern, Some(re))),
            Err(e) => {
                // Validated when it arrived; a log written by another
                // implementation might still hold one. Kafka logs and
                // resolves it to nothing.
                tracing::error!(group = group_id, pattern = %pattern, error = %e, "could not parse a regular expression; ignoring it");
                compiled.push((pattern, None));
            }
        }
    }
    let mut changed = false;
    for (pattern, re) in compiled {
        let topics: Vec<String> = match &re {
            Some(re) => {
                image.names().filter(|n| re.is_match(n) && visible.describable.allows(n)).map(str::to_string).collect()
            }
            None => Vec::new(),
        };
        let before = resolved.get(pattern).map(|v| v.topics.as_slice()).unwrap_or(&[]);
        changed |= before != topics.as_slice();
        let value = RegularExpressionValue { topics, version: image.names_version(), timestamp: now };
        records.push(Record::consumer(
            group_id,
            ConsumerKey::RegularExpression(pattern.clone()),
            Some(RecordValue::ConsumerRegularExpression(value.clone())),
        ));
        resolved.insert(pattern.clone(), value);
    }
    tracing::info!(
        group = group_id,
        topics = image.len(),
        patterns = counts.len(),
        "refreshed the group's regular expressions"
    );
    changed
}

/// The tombstones of the patterns only `removed` members used (Kafka's
/// `maybeDeleteResolvedRegularExpressions` on the fencing and leaving
/// paths), and the pattern counts and resolutions after them.
pub fn on_members_removed(
    g: &ConsumerGroup,
    removed: &[&ConsumerMember],
) -> (Vec<Record>, BTreeMap<String, usize>, Resolved) {
    let counts = counts_after(g, removed, None);
    let mut resolved = g.resolved_regexes.clone();
    let mut records = Vec::new();
    for m in removed {
        if let Some(r) = non_empty(m.metadata.subscribed_topic_regex.as_deref()) {
            if !counts.contains_key(r) && resolved.remove(r).is_some() {
                records.push(Record::consumer(&g.group_id, ConsumerKey::RegularExpression(r.to_string()), None));
            }
        }
    }
    (records, counts, resolved)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pattern_matches_whole_topic_names_only() {
        let re = compile("foo.*").unwrap();
        assert!(re.is_match("foo-1"));
        assert!(!re.is_match("xfoo"), "Java's matches() anchors both ends");
        let alt = compile("a|b").unwrap();
        assert!(alt.is_match("a") && !alt.is_match("ab"));
    }

    #[test]
    fn invalid_patterns_are_described_as_kafka_does() {
        let d = compile("a)(b").unwrap_err();
        assert!(!d.contains('\n'), "one line: {d}");
        assert_eq!(
            invalid_message("a)(b", &d),
            format!("SubscribedTopicRegex `a)(b` is not a valid regular expression: {d}.")
        );
        assert!(compile("[").is_err());
        assert!(compile("(?P<n>a").is_err());
    }

    #[test]
    fn hostile_patterns_are_refused_cheaply() {
        // Nesting past the limit, and a program past the size limit.
        let deep = format!("{}a{}", "(".repeat(500), ")".repeat(500));
        assert!(compile(&deep).is_err());
        let huge = "(((a{100}){100}){100}){100}";
        assert!(compile(huge).unwrap_err().contains("size limit"));
    }

    #[test]
    fn the_names_version_changes_with_the_set_of_names_only() {
        let a = names_version(["a", "b"].into_iter());
        assert_eq!(a, names_version(["a", "b"].into_iter()));
        assert_ne!(a, names_version(["a", "b", "c"].into_iter()));
        assert_ne!(names_version(["ab"].into_iter()), names_version(["a", "b"].into_iter()));
    }
}
