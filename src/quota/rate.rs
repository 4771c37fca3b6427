//! A rate over sliding sample windows, as Kafka's `Rate` over a
//! `SampledStat`: `window_num` samples of `window_ms` each; the rate is the
//! sum of the live samples divided by the time they span, where the span
//! counts at least `window_num - 1` full windows (so a first burst is not
//! measured over a few milliseconds). Time is a parameter (milliseconds on
//! any monotonic clock).

use std::collections::VecDeque;

/// The shape of every rate's windows (Kafka: `quota.window.num`,
/// `quota.window.size.seconds`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Windows {
    pub num: u32,
    pub window_ms: u64,
}

impl Windows {
    /// How old a sample may be before it no longer counts.
    fn expire_ms(&self) -> u64 {
        self.window_ms.saturating_mul(u64::from(self.num))
    }
}

#[derive(Debug, Clone, Copy)]
struct Sample {
    start_ms: u64,
    value: f64,
}

/// One sensor's samples: at most `Windows::num` of them.
#[derive(Debug, Clone, Default)]
pub struct Rate {
    samples: VecDeque<Sample>,
}

impl Rate {
    /// Adds `value` at `now_ms`: to the current sample, or to a new one
    /// started at `now_ms` when the current one is a full window old.
    pub fn record(&mut self, value: f64, now_ms: u64, w: Windows) {
        self.purge(now_ms, w);
        let fresh = self.samples.back().is_none_or(|s| now_ms.saturating_sub(s.start_ms) >= w.window_ms);
        if fresh {
            self.samples.push_back(Sample { start_ms: now_ms, value: 0.0 });
            while self.samples.len() > w.num.max(1) as usize {
                self.samples.pop_front();
            }
        }
        if let Some(s) = self.samples.back_mut() {
            s.value += value;
        }
    }

    /// Takes `value` back out of the current sample (Kafka un-records what
    /// it did not deliver after all).
    pub fn unrecord(&mut self, value: f64) {
        if let Some(s) = self.samples.back_mut() {
            s.value -= value;
        }
    }

    /// Units per second at `now_ms`.
    pub fn measure(&mut self, now_ms: u64, w: Windows) -> f64 {
        self.purge(now_ms, w);
        let total: f64 = self.samples.iter().map(|s| s.value).sum();
        total / (self.window_size_ms(now_ms, w) as f64 / 1000.0)
    }

    /// The span the rate is measured over (Kafka's `Rate.windowSize`).
    pub fn window_size_ms(&self, now_ms: u64, w: Windows) -> u64 {
        let oldest = self.samples.front().map_or(now_ms, |s| s.start_ms);
        let mut elapsed = now_ms.saturating_sub(oldest);
        let full = elapsed / w.window_ms.max(1);
        let min_full = u64::from(w.num.saturating_sub(1));
        if full < min_full {
            elapsed += (min_full - full) * w.window_ms;
        }
        elapsed.max(1)
    }

    fn purge(&mut self, now_ms: u64, w: Windows) {
        while self.samples.front().is_some_and(|s| now_ms.saturating_sub(s.start_ms) >= w.expire_ms()) {
            self.samples.pop_front();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const W: Windows = Windows { num: 11, window_ms: 1000 };

    #[test]
    fn a_first_burst_is_measured_over_ten_full_windows() {
        let mut r = Rate::default();
        r.record(1000.0, 5_000, W);
        assert_eq!(r.window_size_ms(5_000, W), 10_000);
        assert!((r.measure(5_000, W) - 100.0).abs() < 1e-9);
    }

    #[test]
    fn samples_older_than_all_windows_stop_counting() {
        let mut r = Rate::default();
        r.record(1000.0, 0, W);
        r.record(10.0, 10_500, W);
        // Both count, over the 10.5 s since the first began.
        assert!((r.measure(10_500, W) - 1010.0 / 10.5).abs() < 1e-9);
        // The first expired after 11 windows; the second is measured over
        // its 0.5 s plus the 10 windows every rate spans at least.
        assert!((r.measure(11_000, W) - 10.0 / 10.5).abs() < 1e-9);
    }

    #[test]
    fn at_most_window_num_samples_are_kept() {
        let mut r = Rate::default();
        for i in 0..100 {
            r.record(1.0, i * 1000, W);
        }
        assert_eq!(r.samples.len(), 11);
        assert_eq!(r.window_size_ms(99_000, W), 10_000);
        assert!((r.measure(99_000, W) - 1.1).abs() < 1e-9);
    }
}
