//! The load tracker of the heterogeneous uniform builder (Kafka's
//! `MemberAssignmentBalancer`): hands out the least loaded and the most loaded
//! subscribers of one topic in O(1) per step, without re-sorting after every
//! move.
//!
//! The subscribers are sorted once by (partition count, member index). Two
//! ranges then grow inwards: the least loaded range from the left, the most
//! loaded range from the right. Members of a range are handed out in turn;
//! when each has had one, the range's level moves by one and it absorbs the
//! neighbours that have reached that level. Counts are read from the shared
//! `sizes` array, which the builder updates as partitions move: only members
//! outside a range are compared against its level, and those have not moved.
//! The topic is balanced when the levels of the two ranges differ by at most
//! one.

/// See the module documentation. Levels are `i64` because the least loaded
/// level starts one below the smallest count, which may be zero.
pub(super) struct Balancer {
    sorted: Vec<u32>,
    /// Scratch of the counting sort.
    counts: Vec<usize>,
    least_end: usize,
    least_level: i64,
    next_least: usize,
    most_start: usize,
    most_end: usize,
    most_level: i64,
    /// Position of the next most loaded member to hand out; -1 once exhausted.
    next_most: i64,
}

impl Balancer {
    pub fn new() -> Balancer {
        Balancer {
            sorted: Vec::new(),
            counts: Vec::new(),
            least_end: 0,
            least_level: -1,
            next_least: 0,
            most_start: 0,
            most_end: 0,
            most_level: 1,
            next_most: -1,
        }
    }

    fn size(sizes: &[u32], member: u32) -> i64 {
        sizes.get(member as usize).copied().map_or(0, i64::from)
    }

    fn member_at(&self, position: usize) -> u32 {
        self.sorted.get(position).copied().unwrap_or(0)
    }

    /// Starts over with `members` (non-empty); returns the difference between
    /// the largest and the smallest partition count among them.
    pub fn initialize(&mut self, members: &[u32], sizes: &[u32]) -> i64 {
        self.sort(members, sizes);
        let n = self.sorted.len();
        let smallest = self.sorted.first().map_or(0, |m| Self::size(sizes, *m));
        let largest = self.sorted.last().map_or(0, |m| Self::size(sizes, *m));
        self.least_end = 0;
        self.least_level = smallest - 1;
        self.next_least = 0;
        self.most_start = n;
        self.most_end = n;
        self.most_level = largest + 1;
        self.next_most = n as i64 - 1;
        largest - smallest
    }

    /// Sorts `members` by (partition count, member index) into `sorted`.
    /// Counts span a small range, so a counting sort over them (stable, and
    /// the input is in ascending member index) replaces a comparison sort.
    fn sort(&mut self, members: &[u32], sizes: &[u32]) {
        let size = |m: &u32| sizes.get(*m as usize).copied().unwrap_or(0);
        let least = members.iter().map(size).min().unwrap_or(0);
        let most = members.iter().map(size).max().unwrap_or(0);
        let span = (most - least) as usize + 1;
        let ascending = members.windows(2).all(|w| w.first() < w.get(1));
        self.sorted.clear();
        if !ascending || span > members.len().saturating_mul(4).max(64) {
            self.sorted.extend_from_slice(members);
            self.sorted.sort_unstable_by_key(|m| (size(m), *m));
            return;
        }
        self.counts.clear();
        self.counts.resize(span + 1, 0);
        for m in members {
            if let Some(c) = self.counts.get_mut((size(m) - least) as usize + 1) {
                *c += 1;
            }
        }
        for i in 1..self.counts.len() {
            let previous = self.counts.get(i - 1).copied().unwrap_or(0);
            if let Some(c) = self.counts.get_mut(i) {
                *c += previous;
            }
        }
        self.sorted.resize(members.len(), 0);
        for m in members {
            if let Some(slot) = self.counts.get_mut((size(m) - least) as usize) {
                if let Some(out) = self.sorted.get_mut(*slot) {
                    *out = *m;
                }
                *slot += 1;
            }
        }
    }

    /// The member to give the next partition to; counts it as one partition
    /// heavier. Requires at least one member.
    pub fn next_least_loaded(&mut self, sizes: &[u32]) -> u32 {
        if self.next_least >= self.least_end {
            // Every member of the range has had one more: raise its level and
            // take in the members that are at the new level.
            self.least_level += 1;
            while self.least_end < self.sorted.len()
                && Self::size(sizes, self.member_at(self.least_end)) == self.least_level
            {
                self.least_end += 1;
            }
            self.next_least = 0;
        }
        let member = self.member_at(self.next_least);
        self.next_least += 1;
        member
    }

    /// The member to take the next partition from, or `None` when no member
    /// is left that could give one up; counts it as one partition lighter.
    pub fn next_most_loaded(&mut self, sizes: &[u32]) -> Option<u32> {
        if self.next_most < self.most_start as i64 {
            if self.most_end <= self.most_start && self.most_start > 0 {
                // Exclusions emptied the range: restart its level from the
                // next member down, so the range is sure to grow.
                self.most_level = Self::size(sizes, self.member_at(self.most_start - 1));
            } else {
                self.most_level -= 1;
            }
            while self.most_start > 0 && Self::size(sizes, self.member_at(self.most_start - 1)) == self.most_level {
                self.most_start -= 1;
            }
            self.next_most = self.most_end as i64 - 1;
        }
        if self.next_most < 0 {
            return None;
        }
        let member = self.member_at(self.next_most as usize);
        self.next_most -= 1;
        Some(member)
    }

    /// Drops the member last returned by `next_most_loaded` from the most
    /// loaded range for good (it holds nothing of this topic to give up), by
    /// swapping it to the range's end and shrinking the range.
    pub fn exclude_most_loaded(&mut self) {
        let position = (self.next_most + 1) as usize;
        let last = self.most_end.saturating_sub(1);
        if position < self.sorted.len() && last < self.sorted.len() {
            self.sorted.swap(position, last);
        }
        self.most_end = last;
    }

    /// Whether the two ranges' levels differ by at most one.
    pub fn is_balanced(&self) -> bool {
        self.most_level - self.least_level <= 1
    }
}
