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

use std::collections::HashMap;

use uuid::Uuid;

use crate::server::Services;

/// A request's topics, resolved.
pub struct Split<T> {
    /// The topics whose ids name a topic, each given its name.
    pub known: Vec<T>,
    /// The others with their ids, in request order.
    pub unknown: Vec<(Uuid, T)>,
}

/// The ids of the topics requests named, to write their answers with.
#[derive(Debug, Default)]
pub struct Ids {
    by_name: HashMap<String, Uuid>,
}

impl Ids {
    /// The id to answer topic `name` with: the one the request named it
    /// by, else the catalog's (a topic an every-topic OffsetFetch lists
    /// unasked); `None` for a topic without one.
    pub fn of(&self, name: &str, svc: &Services) -> Option<Uuid> {
        self.by_name.get(name).copied().or_else(|| svc.catalog.id_of(name))
    }

    /// Names each of `topics` whose id (`ids`, one per topic) names a
    /// topic the coordinator's catalog knows (refreshed from the upstream
    /// first in sidecar mode if an id is new), with `set_name`, as Kafka
    /// does; the others keep their empty names. Whether each was named.
    pub async fn name<T>(
        &mut self,
        svc: &Services,
        topics: &mut [T],
        ids: &[Uuid],
        set_name: impl Fn(&mut T, String),
    ) -> Vec<bool> {
        let names = svc.coordinator.topic_names(ids).await;
        let mut named = Vec::with_capacity(names.len());
        for ((topic, &id), name) in topics.iter_mut().zip(ids).zip(names) {
            named.push(name.is_some());
            if let Some(name) = name {
                self.by_name.insert(name.clone(), id);
                set_name(topic, name);
            }
        }
        named
    }

    /// [`Ids::name`], with the topics split by whether they were named.
    pub async fn resolve<T>(
        &mut self,
        svc: &Services,
        mut topics: Vec<T>,
        ids: Vec<Uuid>,
        set_name: impl Fn(&mut T, String),
    ) -> Split<T> {
        let named = self.name(svc, &mut topics, &ids, set_name).await;
        let mut split = Split { known: Vec::with_capacity(topics.len()), unknown: Vec::new() };
        for ((topic, id), named) in topics.into_iter().zip(ids).zip(named) {
            match named {
                true => split.known.push(topic),
                false => split.unknown.push((id, topic)),
            }
        }
        split
    }
}
