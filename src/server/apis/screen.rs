//! OffsetCommit, TxnOffsetCommit and OffsetDelete: the partitions Kafka's
//! `KafkaApis` answers itself before its group coordinator sees the rest
//! of the request, and how the coordinator's answer is put after them.
//!
//! `KafkaApis` walks the request's topics in order and answers a topic
//! named by an id that names no topic (v10) UNKNOWN_TOPIC_ID, a topic the
//! caller may not READ TOPIC_AUTHORIZATION_FAILED, and a topic or
//! partition its metadata does not know UNKNOWN_TOPIC_OR_PARTITION; only
//! the rest reaches the coordinator. Its response builders keep those
//! answers grouped by topic, in the order each topic was first answered,
//! and `merge` adds the coordinator's answer after them: the partitions
//! of a topic already answered join that topic, a new topic goes last.
//! kcoord does the same with one screen for the three APIs, so that their
//! answers list topics and partitions in Kafka's order, and a topic's
//! refusal never depends on which API named it.

use std::collections::HashMap;
use std::future::{ready, Future};

use futures_util::future::Either;

use uuid::Uuid;

use crate::coordinator::messages::{CommitTopic, FetchTopic, PartitionError, TopicErrors};
use crate::error_code::ErrorCode;
use crate::security::acl::Operation;
use crate::server::authorize::Guard;
use crate::server::Services;

/// A topic of an offsets request, as the screen sees it.
pub trait ScreenedTopic {
    fn name(&self) -> &str;
    fn partitions(&self) -> impl Iterator<Item = i32> + '_;
    /// Keeps the partitions `keep` returns true for, in order.
    fn retain_partitions(&mut self, keep: impl FnMut(i32) -> bool);
}

impl ScreenedTopic for CommitTopic {
    fn name(&self) -> &str {
        &self.name
    }
    fn partitions(&self) -> impl Iterator<Item = i32> + '_ {
        self.partitions.iter().map(|p| p.partition)
    }
    fn retain_partitions(&mut self, mut keep: impl FnMut(i32) -> bool) {
        self.partitions.retain(|p| keep(p.partition));
    }
}

impl ScreenedTopic for FetchTopic {
    fn name(&self) -> &str {
        &self.name
    }
    fn partitions(&self) -> impl Iterator<Item = i32> + '_ {
        self.partitions.iter().copied()
    }
    fn retain_partitions(&mut self, mut keep: impl FnMut(i32) -> bool) {
        self.partitions.retain(|&p| keep(p));
    }
}

/// Partitions answered before the coordinator, grouped by topic in the
/// order each topic was first answered (Kafka's response builders). A
/// topic is told apart by its id and name together: by name before v10,
/// where every id is nil, and by id in v10, where every unknown id has
/// the same empty name.
///
/// Boxed, and made only when something is answered: the usual commit
/// carries an empty one across its await, in a future that must stay small.
#[derive(Debug, Default)]
pub struct Answered(Option<Box<Topics>>);

#[derive(Debug, Default)]
struct Topics {
    /// Each topic answered, with its id, in the order first answered.
    entries: Vec<(Uuid, TopicErrors)>,
    at: HashMap<(Uuid, String), usize>,
}

impl Topics {
    /// Where topic `name` (or `id`) is answered, listed (with no partition)
    /// if it was not yet. A topic's partitions come one after another: the
    /// last topic answered is found without a look-up.
    fn index(&mut self, id: Uuid, name: &str) -> usize {
        let len = self.entries.len();
        if let Some((last, t)) = self.entries.last() {
            if *last == id && t.name == name {
                return len - 1;
            }
        }
        let at = *self.at.entry((id, name.to_string())).or_insert(len);
        if at == len {
            self.entries.push((id, TopicErrors { name: name.to_string(), partitions: Vec::new() }));
        }
        at
    }

    /// Adds `partitions` to the answer at `at`.
    fn extend(&mut self, at: usize, partitions: impl IntoIterator<Item = PartitionError>) {
        if let Some((_, t)) = self.entries.get_mut(at) {
            t.partitions.extend(partitions);
        }
    }
}

impl Answered {
    pub fn is_empty(&self) -> bool {
        self.0.is_none()
    }

    /// Answers each of `partitions` with `error`. A topic named with no
    /// partition is still listed, as Kafka's `addPartitions` lists it.
    pub fn add_all(&mut self, id: Uuid, name: &str, partitions: impl Iterator<Item = i32>, error: ErrorCode) {
        let topics = self.0.get_or_insert_with(Default::default);
        let at = topics.index(id, name);
        topics.extend(at, partitions.map(|partition| PartitionError { partition, error }));
    }

    /// The whole answer: these partitions, then the coordinator's, as
    /// Kafka's builders' `merge` puts them, with each topic's id (`id_of`
    /// gives a coordinator's topic its id; nil before v10).
    pub fn merge(self, answer: Vec<TopicErrors>, id_of: impl Fn(&str) -> Uuid) -> (Vec<TopicErrors>, Vec<Uuid>) {
        let Some(mut first) = self.0 else {
            // Kafka takes the coordinator's answer as it is.
            let ids = answer.iter().map(|t| id_of(&t.name)).collect();
            return (answer, ids);
        };
        for t in answer {
            let id = id_of(&t.name);
            let at = first.index(id, &t.name);
            first.extend(at, t.partitions);
        }
        first.entries.into_iter().map(|(id, t)| (t, id)).unzip()
    }

    /// The whole answer before v10: [`Answered::merge`] without ids. The
    /// usual request, with nothing answered first, costs no copy.
    pub fn merge_by_name(self, answer: Vec<TopicErrors>) -> Vec<TopicErrors> {
        match self.is_empty() {
            true => answer,
            false => self.merge(answer, |_| Uuid::nil()).0,
        }
    }
}

/// A request's topics after the screen: what the coordinator is to see,
/// and what was answered without it.
pub struct Screened<T> {
    pub kept: Vec<T>,
    pub answered: Answered,
}

/// Screens `topics` as `KafkaApis` does before its coordinator (module
/// doc). `ids` is a v10 request's topic ids, one per topic, with the
/// names of those that name a topic already filled in (empty otherwise);
/// empty before v10. A topic left with no partition is not kept.
///
/// The usual request (no authorizer, every topic and partition known) is
/// screened in place, in a ready future; the rest runs boxed, so that
/// every commit's future stays small.
pub fn screen<'a, T: ScreenedTopic + Send + 'a>(
    svc: &'a Services,
    guard: &'a Guard<'a>,
    topics: Vec<T>,
    ids: &'a [Uuid],
) -> impl Future<Output = Screened<T>> + Send + 'a {
    // A v10 topic whose id named no topic has no name; any other name the
    // catalog does not know fails `all_known`. A topic named with no
    // partition is dropped, as Kafka drops it, by the slow path.
    let usual = !svc.authorizer.is_enabled()
        && topics
            .iter()
            .all(|t| (ids.is_empty() || !t.name().is_empty()) && t.partitions().next().is_some() && all_known(svc, t));
    match usual {
        true => Either::Left(ready(Screened { kept: topics, answered: Answered::default() })),
        false => Either::Right(Box::pin(screen_each(svc, guard, topics, ids))),
    }
}

/// Whether the catalog knows every partition of `topic` (one look-up a topic).
fn all_known(svc: &Services, topic: &impl ScreenedTopic) -> bool {
    let count = svc.catalog.partitions(topic.name());
    topic.partitions().all(|p| within(count, p))
}

/// Whether partition `p` is one of a topic's `count` (`None`: no such topic).
fn within(count: Option<i32>, p: i32) -> bool {
    matches!(count, Some(n) if p >= 0 && p < n)
}

/// What the screen decided for a topic before looking at its partitions.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Verdict {
    UnknownId,
    Denied,
    Allowed,
}

async fn screen_each<T: ScreenedTopic + Send>(
    svc: &Services,
    guard: &Guard<'_>,
    topics: Vec<T>,
    ids: &[Uuid],
) -> Screened<T> {
    let by_ids = !ids.is_empty();
    // Each distinct topic is authorized once, as Kafka's `filterByAuthorized` does.
    let mut allowed: HashMap<&str, bool> = HashMap::new();
    let verdicts: Vec<Verdict> = topics
        .iter()
        .map(|t| match (by_ids && t.name().is_empty(), t.name()) {
            (true, _) => Verdict::UnknownId,
            (false, _) if !svc.authorizer.is_enabled() => Verdict::Allowed,
            (false, name) => match *allowed.entry(name).or_insert_with(|| guard.topic(Operation::Read, name)) {
                true => Verdict::Allowed,
                false => Verdict::Denied,
            },
        })
        .collect();
    // Sidecar mode: a topic created upstream a moment ago is not unknown.
    let mut unknown: Vec<String> = topics
        .iter()
        .zip(&verdicts)
        .filter(|(t, v)| **v == Verdict::Allowed && !all_known(svc, *t))
        .map(|(t, _)| t.name().to_string())
        .collect();
    if !unknown.is_empty() {
        unknown.sort();
        unknown.dedup();
        svc.coordinator.refresh_topics(unknown).await;
    }
    let mut screened = Screened { kept: Vec::with_capacity(topics.len()), answered: Answered::default() };
    for (i, (mut topic, verdict)) in topics.into_iter().zip(verdicts).enumerate() {
        let id = ids.get(i).copied().unwrap_or_default();
        let count = match verdict {
            Verdict::Allowed => svc.catalog.partitions(topic.name()),
            _ => None,
        };
        let error = match verdict {
            Verdict::UnknownId => Some(ErrorCode::UNKNOWN_TOPIC_ID),
            Verdict::Denied => Some(ErrorCode::TOPIC_AUTHORIZATION_FAILED),
            Verdict::Allowed if count.is_none() => Some(ErrorCode::UNKNOWN_TOPIC_OR_PARTITION),
            Verdict::Allowed => None,
        };
        if let Some(error) = error {
            screened.answered.add_all(id, topic.name(), topic.partitions(), error);
            continue;
        }
        if topic.partitions().all(|p| within(count, p)) {
            // Kept whole; a known topic with no partition is dropped, as Kafka drops it.
            if topic.partitions().next().is_some() {
                screened.kept.push(topic);
            }
            continue;
        }
        let name = topic.name().to_string();
        let answered = &mut screened.answered;
        topic.retain_partitions(|p| {
            let known = within(count, p);
            if !known {
                answered.add_all(id, &name, std::iter::once(p), ErrorCode::UNKNOWN_TOPIC_OR_PARTITION);
            }
            known
        });
        if topic.partitions().next().is_some() {
            screened.kept.push(topic);
        }
    }
    screened
}

#[cfg(test)]
mod tests {
    use super::*;

    fn errors(name: &str, partitions: &[(i32, ErrorCode)]) -> TopicErrors {
        TopicErrors {
            name: name.into(),
            partitions: partitions.iter().map(|&(partition, error)| PartitionError { partition, error }).collect(),
        }
    }

    const NONE: ErrorCode = ErrorCode::NONE;
    const UNKNOWN: ErrorCode = ErrorCode::UNKNOWN_TOPIC_OR_PARTITION;
    const DENIED: ErrorCode = ErrorCode::TOPIC_AUTHORIZATION_FAILED;

    #[test]
    fn partitions_answered_first_lead_and_the_coordinators_join_their_topics_or_follow() {
        let mut first = Answered::default();
        first.add_all(Uuid::nil(), "b", [7].into_iter(), UNKNOWN);
        first.add_all(Uuid::nil(), "c", [0, 1].into_iter(), DENIED);
        first.add_all(Uuid::nil(), "b", [8].into_iter(), UNKNOWN);
        let answer = vec![errors("a", &[(0, NONE)]), errors("b", &[(0, NONE), (1, NONE)])];
        assert_eq!(
            first.merge_by_name(answer),
            vec![
                errors("b", &[(7, UNKNOWN), (8, UNKNOWN), (0, NONE), (1, NONE)]),
                errors("c", &[(0, DENIED), (1, DENIED)]),
                errors("a", &[(0, NONE)]),
            ]
        );
    }

    #[test]
    fn a_topic_answered_with_no_partitions_is_still_listed() {
        let mut first = Answered::default();
        first.add_all(Uuid::nil(), "gone", std::iter::empty(), UNKNOWN);
        assert_eq!(first.merge_by_name(vec![]), vec![errors("gone", &[])]);
    }

    #[test]
    fn unknown_ids_stay_apart_though_their_names_are_all_empty() {
        let (x, y, known) = (Uuid::from_u128(1), Uuid::from_u128(2), Uuid::from_u128(3));
        let mut first = Answered::default();
        first.add_all(x, "", [0].into_iter(), ErrorCode::UNKNOWN_TOPIC_ID);
        first.add_all(y, "", [0].into_iter(), ErrorCode::UNKNOWN_TOPIC_ID);
        let (topics, ids) = first.merge(vec![errors("t", &[(0, NONE)])], |_| known);
        assert_eq!(ids, vec![x, y, known]);
        assert_eq!(topics.len(), 3);
    }

    #[test]
    fn a_hundred_thousand_partitions_answered_first_keep_their_order_before_the_coordinators() {
        let n = 100_000;
        let mut first = Answered::default();
        for p in (0..n).filter(|p| p % 2 == 1) {
            first.add_all(Uuid::nil(), "t", std::iter::once(p), UNKNOWN);
            first.add_all(Uuid::nil(), "u", std::iter::once(p), DENIED);
        }
        let coordinators = (0..n).filter(|p| p % 2 == 0).map(|p| (p, NONE)).collect::<Vec<_>>();
        let merged = first.merge_by_name(vec![errors("t", &coordinators)]);
        assert_eq!(merged.len(), 2);
        let t: Vec<i32> = merged[0].partitions.iter().map(|p| p.partition).collect();
        let expected: Vec<i32> = (0..n).filter(|p| p % 2 == 1).chain((0..n).filter(|p| p % 2 == 0)).collect();
        assert_eq!(t, expected);
        assert_eq!(merged[1].partitions.len(), n as usize / 2);
    }

    #[test]
    fn with_nothing_answered_first_the_coordinators_answer_is_the_answer() {
        let answer = vec![errors("a", &[(0, NONE)]), errors("a", &[(1, NONE)])];
        assert_eq!(Answered::default().merge_by_name(answer.clone()), answer);
    }
}
