//! Deadlines for the pure state machine, with O(1) re-arming.
//!
//! Kafka keeps one timer per purpose ("scheduling a key again replaces it").
//! Re-arming a heartbeat on every Heartbeat request must be cheap, so the
//! authoritative deadline lives in a [`Slot`] owned by the member or group,
//! and the queue holds *lazy* entries: re-arming only updates the slot, and a
//! queue entry is pushed only when the slot has none queued or the new
//! deadline is earlier than the queued one. When an entry pops, its owner asks
//! the slot whether it is due, stale, or must be queued again for later.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// What a timer is for. Strings identify the owner; a popped entry whose
/// owner no longer exists is simply ignored.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum TimerKey {
    /// A member's (or KIP-394 pending member's) session.
    Heartbeat { group: String, member: String },
    /// A group's join phase (initial delay or rebalance timeout).
    Join { group: String },
    /// A group's pending-sync timeout.
    Sync { group: String },
    /// The shard's periodic offset-retention pass.
    Retention,
    /// A consumer-group member's session (KIP-848).
    ConsumerSession { group: String, member: String },
    /// A consumer-group member's deadline to revoke partitions (KIP-848).
    ConsumerRebalance { group: String, member: String },
    /// A classic member of a consumer group told to rejoin (online migration).
    ConsumerJoin { group: String, member: String },
    /// A classic member of a consumer group that joined and must sync.
    ConsumerSync { group: String, member: String },
}

/// A min-queue of (deadline, key) entries, possibly stale.
#[derive(Debug, Default)]
pub struct DeadlineQueue {
    heap: BinaryHeap<Reverse<(i64, u64, TimerKey)>>,
    seq: u64,
}

impl DeadlineQueue {
    pub fn new() -> Self {
        Self::default()
    }

    fn push(&mut self, deadline: i64, key: TimerKey) {
        self.seq += 1;
        self.heap.push(Reverse((deadline, self.seq, key)));
    }

    /// The earliest queued deadline (possibly stale).
    pub fn next_deadline(&self) -> Option<i64> {
        self.heap.peek().map(|Reverse((d, _, _))| *d)
    }

    /// Pops one entry due at or before `now`.
    pub fn pop_due(&mut self, now: i64) -> Option<(i64, TimerKey)> {
        match self.heap.peek() {
            Some(Reverse((d, _, _))) if *d <= now => self.heap.pop().map(|Reverse((d, _, k))| (d, k)),
            _ => None,
        }
    }

    pub fn len(&self) -> usize {
        self.heap.len()
    }

    pub fn is_empty(&self) -> bool {
        self.heap.is_empty()
    }
}

/// The authoritative deadline of one timer.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Slot {
    deadline: Option<i64>,
    queued: Option<i64>,
}

/// What to do with a popped queue entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pop {
    /// The timer is due: run its action.
    Fire,
    /// The entry was stale; nothing to do.
    Ignore,
}

impl Slot {
    /// Arms (or re-arms) the timer for `deadline`.
    pub fn schedule(&mut self, deadline: i64, key: impl FnOnce() -> TimerKey, queue: &mut DeadlineQueue) {
        self.deadline = Some(deadline);
        match self.queued {
            Some(q) if q <= deadline => {}
            _ => {
                queue.push(deadline, key());
                self.queued = Some(deadline);
            }
        }
    }

    pub fn cancel(&mut self) {
        self.deadline = None;
    }

    pub fn deadline(&self) -> Option<i64> {
        self.deadline
    }

    pub fn is_armed(&self) -> bool {
        self.deadline.is_some()
    }

    /// Handles a popped entry with deadline `popped` at time `now`. A fired
    /// timer is disarmed; one re-armed for later is queued again.
    pub fn on_pop(&mut self, popped: i64, now: i64, key: impl FnOnce() -> TimerKey, queue: &mut DeadlineQueue) -> Pop {
        if self.queued != Some(popped) {
            return Pop::Ignore;
        }
        self.queued = None;
        match self.deadline {
            None => Pop::Ignore,
            Some(d) if d <= now => {
                self.deadline = None;
                Pop::Fire
            }
            Some(d) => {
                queue.push(d, key());
                self.queued = Some(d);
                Pop::Ignore
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key() -> TimerKey {
        TimerKey::Join { group: "g".into() }
    }

    #[test]
    fn rearming_later_does_not_grow_the_queue() {
        let mut q = DeadlineQueue::new();
        let mut s = Slot::default();
        s.schedule(100, key, &mut q);
        for t in 101..1000 {
            s.schedule(t, key, &mut q);
        }
        assert_eq!(q.len(), 1);
        // The first entry pops at 100 but the deadline moved: requeued at 999.
        let (d, _) = q.pop_due(100).unwrap();
        assert_eq!(s.on_pop(d, 100, key, &mut q), Pop::Ignore);
        assert_eq!(q.next_deadline(), Some(999));
        let (d, _) = q.pop_due(999).unwrap();
        assert_eq!(s.on_pop(d, 999, key, &mut q), Pop::Fire);
        assert!(!s.is_armed());
    }

    #[test]
    fn rearming_earlier_fires_at_the_earlier_deadline_once() {
        let mut q = DeadlineQueue::new();
        let mut s = Slot::default();
        s.schedule(500, key, &mut q);
        s.schedule(200, key, &mut q);
        let (d, _) = q.pop_due(200).unwrap();
        assert_eq!(s.on_pop(d, 200, key, &mut q), Pop::Fire);
        // The old entry at 500 is stale.
        let (d, _) = q.pop_due(500).unwrap();
        assert_eq!(s.on_pop(d, 500, key, &mut q), Pop::Ignore);
        assert!(q.is_empty());
    }

    #[test]
    fn cancelled_timers_never_fire() {
        let mut q = DeadlineQueue::new();
        let mut s = Slot::default();
        s.schedule(10, key, &mut q);
        s.cancel();
        let (d, _) = q.pop_due(10).unwrap();
        assert_eq!(s.on_pop(d, 10, key, &mut q), Pop::Ignore);
    }
}
