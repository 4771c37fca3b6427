//! Topics named by id: OffsetCommit and OffsetFetch v10 (Kafka 4.1).
//!
//! Kafka's `KafkaApis` resolves a v10 request's topic ids to names from its
//! metadata before the group coordinator sees the request, answers an id
//! that names no topic (or the nil id) with UNKNOWN_TOPIC_ID for each of
//! its partitions without the coordinator hearing of it (OffsetCommit:
//! in request order with what else it answers first, `screen`;
//! OffsetFetch: after the coordinator's answer), and writes the answer's
//! topics by id, leaving out of an every-topic OffsetFetch answer a topic
//! it has no id for. kcoord does the same around its coordinator, which
//! keeps working with names.
//!
//! An answer's topic is written with the catalog's id for its name, which
//! is the id the request named it by: the catalog maps names and ids one
//! to one, and a topic deleted and made again between the request and its
//! answer is answered with the id of the topic its offsets now belong to.

use uuid::Uuid;

use crate::server::Services;

/// A request's topics, resolved.
pub struct Split<T> {
    /// The topics whose ids name a topic, each given its name.
    pub known: Vec<T>,
    /// The others with their ids, in request order.
    pub unknown: Vec<(Uuid, T)>,
}

/// The id to answer topic `name` with; `None` for a topic without one (an
/// every-topic OffsetFetch leaves it out).
pub fn id_of(svc: &Services, name: &str) -> Option<Uuid> {
    svc.catalog.id_of(name)
}

/// Names each of `topics` whose id (`ids`, one per topic) names a topic
/// the coordinator's catalog knows (refreshed from the upstream first in
/// sidecar mode if an id is new), with `set_name`, as Kafka does; the
/// others keep their empty names.
pub async fn name<T>(svc: &Services, topics: &mut [T], ids: &[Uuid], set_name: impl Fn(&mut T, String)) {
    let named = |i: usize, name: String| {
        if let Some(t) = topics.get_mut(i) {
            set_name(t, name);
        }
    };
    svc.coordinator.name_topics(ids, named).await;
}

/// [`name`], with the topics split by whether they were named
/// (`is_named`).
pub async fn resolve<T>(
    svc: &Services,
    mut topics: Vec<T>,
    ids: Vec<Uuid>,
    set_name: impl Fn(&mut T, String),
    is_named: impl Fn(&T) -> bool,
) -> Split<T> {
    name(svc, &mut topics, &ids, set_name).await;
    let mut split = Split { known: Vec::with_capacity(topics.len()), unknown: Vec::new() };
    for (topic, id) in topics.into_iter().zip(ids) {
        match is_named(&topic) {
            true => split.known.push(topic),
            false => split.unknown.push((id, topic)),
        }
    }
    split
}
