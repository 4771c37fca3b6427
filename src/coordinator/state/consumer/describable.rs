//! Which topics the requester may DESCRIBE, as the core sees it when it
//! resolves regular-expression subscriptions.
//!
//! Kafka resolves a group's patterns with the ACLs of the member whose
//! request triggered the refresh and drops every matched topic that member
//! may not DESCRIBE (`filterTopicDescribeAuthorizedTopics`), so a pattern
//! never hands out a topic its subscriber could not see. The core has no
//! authorizer: the server lends it this view with each request that can
//! trigger a refresh (ConsumerGroupHeartbeat, and a classic JoinGroup into a
//! consumer group). What survives the filter is written in the group's
//! regular-expression record, so replay needs no authorizer and equals live.

use std::fmt;
use std::sync::Arc;

/// A principal's DESCRIBE permission on topics.
pub trait TopicVisibility: Send + Sync {
    fn may_describe(&self, topic: &str) -> bool;
}

/// Every topic (no authorizer, a super user), or only those a view allows.
#[derive(Clone, Default)]
pub struct Describable(Option<Arc<dyn TopicVisibility>>);

impl Describable {
    /// Every topic: nothing is filtered.
    pub fn all() -> Describable {
        Describable(None)
    }

    /// Only the topics `view` allows.
    pub fn only(view: Arc<dyn TopicVisibility>) -> Describable {
        Describable(Some(view))
    }

    pub fn allows(&self, topic: &str) -> bool {
        self.0.as_ref().is_none_or(|v| v.may_describe(topic))
    }
}

impl fmt::Debug for Describable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self.0 {
            None => "Describable::all",
            Some(_) => "Describable::only(..)",
        })
    }
}

/// Two views are the same when they are the same object (requests compare
/// equal in tests only when they would resolve alike).
impl PartialEq for Describable {
    fn eq(&self, other: &Describable) -> bool {
        match (&self.0, &other.0) {
            (None, None) => true,
            (Some(a), Some(b)) => Arc::ptr_eq(a, b),
            _ => false,
        }
    }
}

impl Eq for Describable {}
