//! The shard's clock, injected so that the shard shell runs on simulated
//! time in tests and simulations exactly as on real time in the daemon.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Instant;

/// Milliseconds since the epoch, never going back.
pub trait Clock {
    fn now_ms(&self) -> i64;
}

/// The core's notion of time, in milliseconds since the epoch: the wall
/// clock read once, advanced by the monotonic clock. Deadlines (sessions,
/// joins, pending syncs) then never jump when the system clock is stepped:
/// a step forward would otherwise expire every member at once, a step back
/// would stop sessions expiring. Kafka's timers run on a monotonic clock
/// too. Record timestamps stay within the clock's slew of wall time, and
/// every start re-reads the wall clock.
pub fn coordinator_clock_ms() -> i64 {
    static ANCHOR: OnceLock<(i64, Instant)> = OnceLock::new();
    let (wall, start) = ANCHOR.get_or_init(|| {
        let wall = crate::wall_clock::wall_clock_ms();
        (wall, Instant::now())
    });
    wall.saturating_add(i64::try_from(start.elapsed().as_millis()).unwrap_or(i64::MAX))
}

/// The daemon's clock: [`coordinator_clock_ms`].
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_ms(&self) -> i64 {
        coordinator_clock_ms()
    }
}

/// Simulated time that moves only when told to; clones share the time.
#[derive(Debug, Clone, Default)]
pub struct ManualClock(Arc<AtomicI64>);

impl ManualClock {
    pub fn at(ms: i64) -> ManualClock {
        ManualClock(Arc::new(AtomicI64::new(ms)))
    }

    /// Moves time forward by `ms` (never back).
    pub fn advance(&self, ms: i64) {
        self.0.fetch_add(ms.max(0), Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now_ms(&self) -> i64 {
        self.0.load(Ordering::SeqCst)
    }
}
