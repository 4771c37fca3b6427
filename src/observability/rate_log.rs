//! A log line at most once per period, with the count of events in between:
//! for events a client can cause at any rate (refused connections, partial
//! requests, descriptor exhaustion), so that a flood of them cannot flood
//! the log while the operator still learns how many there were.

use std::time::{Duration, Instant};

/// Lets one line through per period, and counts the events in between.
#[derive(Debug)]
pub struct RateLimitedLog {
    period: Duration,
    last: Option<Instant>,
    pending: u64,
}

impl RateLimitedLog {
    pub fn new(period: Duration) -> Self {
        RateLimitedLog { period, last: None, pending: 0 }
    }

    /// Records an event at `now`. Returns `Some(n)` when a line is due: `n`
    /// events happened since the previous line (this one included).
    pub fn note(&mut self, now: Instant) -> Option<u64> {
        self.pending += 1;
        let due = match self.last {
            None => true,
            Some(last) => now.saturating_duration_since(last) >= self.period,
        };
        if !due {
            return None;
        }
        self.last = Some(now);
        Some(std::mem::take(&mut self.pending))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rate_limited_log_lets_one_line_per_period_through_with_the_count_in_between() {
        let t0 = Instant::now();
        let mut log = RateLimitedLog::new(Duration::from_secs(1));
        assert_eq!(log.note(t0), Some(1));
        assert_eq!(log.note(t0 + Duration::from_millis(10)), None);
        assert_eq!(log.note(t0 + Duration::from_millis(500)), None);
        assert_eq!(log.note(t0 + Duration::from_millis(1000)), Some(3));
        assert_eq!(log.note(t0 + Duration::from_millis(1001)), None);
        assert_eq!(log.note(t0 + Duration::from_millis(5000)), Some(2));
    }
}
