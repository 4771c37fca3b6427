//! Noticing topics deleted upstream, so that their committed offsets go too.
//!
//! A Kafka coordinator drops every group's offsets for a topic when the
//! topic is deleted; otherwise a topic re-created under the same name would
//! resume its consumers at offsets of a log that no longer exists. In
//! sidecar mode the deletion happens on the upstream, and kcoord learns of
//! it only from the upstream's Metadata. Dropping offsets is not undoable,
//! so a topic counts as deleted only when that is certain:
//! - it came back under the same name with a different topic id (a topic
//!   id never changes while the topic lives), or
//! - two complete listings in a row, one refresh interval apart, lack it
//!   (a single listing may come from a broker whose metadata is not loaded
//!   yet).
//!
//! A listing with no topics at all changes nothing: an upstream that lost
//! its metadata is likelier than one whose every topic was deleted.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use uuid::Uuid;

/// Topics missing from one listing, waiting for the next to confirm it.
#[derive(Debug, Default)]
pub struct DeletedTopics {
    suspects: BTreeMap<String, Uuid>,
}

impl DeletedTopics {
    /// Compares the topics known before a complete listing of the upstream
    /// with that listing; returns the topics now known to be deleted.
    pub fn observe(&mut self, before: &[(String, Uuid)], after: &[(String, Uuid)]) -> BTreeSet<String> {
        if after.is_empty() {
            return BTreeSet::new();
        }
        let now: HashMap<&str, Uuid> = after.iter().map(|(n, id)| (n.as_str(), *id)).collect();
        let mut deleted = BTreeSet::new();
        // Suspects from the previous listing: confirmed if still missing.
        for (name, id) in std::mem::take(&mut self.suspects) {
            match now.get(name.as_str()) {
                None => {
                    deleted.insert(name);
                }
                Some(new_id) if is_replaced(id, *new_id) => {
                    deleted.insert(name);
                }
                Some(_) => {}
            }
        }
        for (name, id) in before {
            if deleted.contains(name) {
                continue;
            }
            match now.get(name.as_str()) {
                None => {
                    self.suspects.insert(name.clone(), *id);
                }
                Some(new_id) if is_replaced(*id, *new_id) => {
                    deleted.insert(name.clone());
                }
                Some(_) => {}
            }
        }
        deleted
    }
}

/// Whether a topic's id changed, which only deletion and re-creation do
/// (a nil id, from an upstream without topic ids, proves nothing).
fn is_replaced(old: Uuid, new: Uuid) -> bool {
    !old.is_nil() && !new.is_nil() && old != new
}

#[cfg(test)]
mod tests {
    use super::*;

    fn topics(list: &[(&str, u128)]) -> Vec<(String, Uuid)> {
        list.iter().map(|(n, id)| (n.to_string(), Uuid::from_u128(*id))).collect()
    }

    #[test]
    fn a_topic_missing_from_two_listings_in_a_row_is_deleted() {
        let mut d = DeletedTopics::default();
        let both = topics(&[("a", 1), ("b", 2)]);
        let only_a = topics(&[("a", 1)]);
        assert!(d.observe(&both, &only_a).is_empty(), "one listing is not enough");
        assert_eq!(d.observe(&only_a, &only_a), BTreeSet::from(["b".to_string()]));
        assert!(d.observe(&only_a, &only_a).is_empty(), "reported once");
    }

    #[test]
    fn a_topic_back_in_the_next_listing_with_its_id_is_not_deleted() {
        let mut d = DeletedTopics::default();
        let both = topics(&[("a", 1), ("b", 2)]);
        assert!(d.observe(&both, &topics(&[("a", 1)])).is_empty());
        assert!(d.observe(&topics(&[("a", 1)]), &both).is_empty());
        assert!(d.observe(&both, &both).is_empty());
    }

    #[test]
    fn a_topic_recreated_under_a_new_id_is_deleted_at_once() {
        let mut d = DeletedTopics::default();
        assert_eq!(d.observe(&topics(&[("a", 1)]), &topics(&[("a", 7)])), BTreeSet::from(["a".to_string()]));
        // Missing once, then back under a new id: deleted.
        let mut d = DeletedTopics::default();
        assert!(d.observe(&topics(&[("a", 1), ("b", 2)]), &topics(&[("b", 2)])).is_empty());
        assert_eq!(d.observe(&topics(&[("b", 2)]), &topics(&[("a", 9), ("b", 2)])), BTreeSet::from(["a".to_string()]));
    }

    #[test]
    fn an_empty_listing_or_missing_topic_ids_delete_nothing() {
        let mut d = DeletedTopics::default();
        let both = topics(&[("a", 1), ("b", 2)]);
        assert!(d.observe(&both, &[]).is_empty());
        assert!(d.observe(&both, &[]).is_empty());
        assert!(d.observe(&both, &both).is_empty());
        assert!(d.observe(&topics(&[("a", 1)]), &topics(&[("a", 0)])).is_empty(), "nil id proves nothing");
    }
}
