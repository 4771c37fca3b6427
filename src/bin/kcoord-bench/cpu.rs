//! The measured daemon's own CPU time per request: user + system time from
//! `/proc/PID/stat` over the measured phase, divided by the requests
//! answered in it (`--cpu-of PID`). It says what a request costs the
//! daemon, whatever else shares the machine (unlike throughput).

use std::sync::OnceLock;
use std::time::Duration;

use crate::stats::Report;

static PID: OnceLock<u32> = OnceLock::new();

/// Sets the process whose CPU time results report (once, before any run).
pub fn configure(pid: u32) {
    let _ = PID.set(pid);
}

/// The process's user + system CPU time so far.
fn cpu_time(pid: u32) -> Option<Duration> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name may hold spaces: fields are counted after its ')'.
    let rest = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // utime and stime are fields 14 and 15 of stat(5); `rest` starts at 3.
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    // SAFETY: sysconf has no preconditions.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    let ticks = u64::try_from(ticks).ok().filter(|t| *t > 0)?;
    Some(Duration::from_micros((utime + stime) * 1_000_000 / ticks))
}

/// CPU time of the configured process at the start of a measured phase.
pub struct Meter {
    start: Option<(u32, Duration)>,
}

impl Meter {
    pub fn start() -> Self {
        Meter { start: PID.get().and_then(|&pid| Some((pid, cpu_time(pid)?))) }
    }

    /// Adds `daemon_cpu_s` and `daemon_cpu_us_per_request` for `requests`
    /// answered since the start (nothing without `--cpu-of`).
    pub fn report(&self, r: &mut Report, requests: u64) {
        let Some((pid, start)) = self.start else { return };
        let Some(end) = cpu_time(pid) else { return };
        let used = end.saturating_sub(start);
        r.metric("daemon_cpu_s", used.as_secs_f64(), "s");
        r.metric("daemon_cpu_us_per_request", used.as_secs_f64() * 1e6 / requests.max(1) as f64, "us");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_running_process_cpu_time_is_read_from_proc() {
        let mut spin = 0u64;
        for i in 0..5_000_000u64 {
            spin = spin.wrapping_add(std::hint::black_box(i));
        }
        assert!(spin > 0);
        assert!(cpu_time(std::process::id()).is_some());
        assert!(cpu_time(u32::MAX).is_none());
    }
}
