//! The bounded list both group histories keep (classic rebalances and
//! consumer-group epoch changes): the last `capacity` entries, newest last,
//! where only the newest can still be in progress.

use std::collections::VecDeque;

/// An entry that is either still running or closed.
pub trait Ongoing {
    fn in_progress(&self) -> bool;
}

#[derive(Debug, Clone)]
pub struct BoundedHistory<T> {
    entries: VecDeque<T>,
}

impl<T> Default for BoundedHistory<T> {
    fn default() -> Self {
        Self { entries: VecDeque::new() }
    }
}

impl<T: Ongoing> BoundedHistory<T> {
    /// Oldest first.
    pub fn iter(&self) -> impl Iterator<Item = &T> {
        self.entries.iter()
    }

    pub fn last(&self) -> Option<&T> {
        self.entries.back()
    }

    /// The newest entry if it is still in progress.
    pub fn current(&mut self) -> Option<&mut T> {
        self.entries.back_mut().filter(|e| e.in_progress())
    }

    /// Appends `entry`, dropping the oldest beyond `capacity`; with a
    /// capacity of 0 nothing is kept.
    pub fn push(&mut self, entry: T, capacity: usize) {
        if capacity == 0 {
            self.entries.clear();
            return;
        }
        while self.entries.len() >= capacity {
            self.entries.pop_front();
        }
        self.entries.push_back(entry);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, PartialEq)]
    struct E(u32, bool);
    impl Ongoing for E {
        fn in_progress(&self) -> bool {
            self.1
        }
    }

    #[test]
    fn keeps_only_the_newest_entries_up_to_its_capacity() {
        let mut h = BoundedHistory::default();
        for i in 0..5 {
            h.push(E(i, false), 3);
        }
        assert_eq!(h.iter().map(|e| e.0).collect::<Vec<_>>(), vec![2, 3, 4]);
        h.push(E(9, true), 0);
        assert!(h.last().is_none(), "a capacity of 0 keeps nothing");
    }

    #[test]
    fn only_a_newest_entry_in_progress_is_current() {
        let mut h = BoundedHistory::default();
        h.push(E(1, true), 3);
        h.push(E(2, false), 3);
        assert!(h.current().is_none());
        h.push(E(3, true), 3);
        assert_eq!(h.current().map(|e| e.0), Some(3));
    }
}
