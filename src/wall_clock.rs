//! Wall-clock time, where kcoord means the system clock as Kafka does:
//! record timestamps, retention and the lag history's sample times. The
//! coordinator's deadlines use `coordinator::runtime::clock` instead, which
//! never goes back when the system clock is stepped.

use std::time::{SystemTime, UNIX_EPOCH};

/// Wall-clock milliseconds since the epoch (0 before 1970).
pub fn wall_clock_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or(0)
}
