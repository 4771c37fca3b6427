//! Counters and histograms that every request updates, kept by kcoord
//! itself in per-thread stripes instead of in the `metrics` recorder.
//!
//! Why: under load both worker threads update the same few series on every
//! request (`kcoord_requests_total`, `kcoord_request_duration_seconds`,
//! commits and log appends). In the recorder each update is an atomic
//! operation on one shared cache line, which then moves between cores on
//! every request, plus a generation counter per counter and a queued
//! sample per histogram observation that a background thread folds later
//! (docs/benchmarks.md, "Request metrics in stripes"). Here a thread adds
//! to its own stripe (a cache line no other thread writes, unless more
//! threads than stripes share one: still correct, only slower), and a
//! scrape sums the stripes. Nothing is queued, so nothing grows between
//! scrapes.
//!
//! These series are rendered by [`render`] next to the recorder's output,
//! in the same text format and with the same names, labels and buckets as
//! before.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::OnceLock;
use std::time::Duration;

/// Stripes per series: enough that the runtime's workers rarely share one.
const STRIPES: usize = 8;

/// `N` counters for one thread, on cache lines of their own.
#[repr(align(128))]
struct Stripe<const N: usize>([AtomicU64; N]);

/// `N` counters, each the sum of its stripes.
struct Cells<const N: usize> {
    stripes: [Stripe<N>; STRIPES],
}

impl<const N: usize> Cells<N> {
    const fn new() -> Self {
        Cells { stripes: [const { Stripe([const { AtomicU64::new(0) }; N]) }; STRIPES] }
    }

    /// Adds `n` to cell `i` in the calling thread's stripe.
    fn add(&self, i: usize, n: u64) {
        if let Some(cell) = self.stripes.get(this_threads_stripe()).and_then(|s| s.0.get(i)) {
            cell.fetch_add(n, Ordering::Relaxed);
        }
    }

    fn sum(&self, i: usize) -> u64 {
        self.stripes.iter().filter_map(|s| s.0.get(i)).fold(0u64, |acc, c| acc.wrapping_add(c.load(Ordering::Relaxed)))
    }
}

/// Each thread's stripe, handed out in turn as threads first record.
fn this_threads_stripe() -> usize {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    thread_local! {
        static STRIPE: usize = NEXT.fetch_add(1, Ordering::Relaxed) % STRIPES;
    }
    // A thread that records while it exits shares the first stripe.
    STRIPE.try_with(|s| *s).unwrap_or(0)
}

/// A label-less counter for hot paths.
pub struct HotCounter {
    name: &'static str,
    help: &'static str,
    cells: Cells<1>,
}

impl HotCounter {
    pub const fn new(name: &'static str, help: &'static str) -> HotCounter {
        HotCounter { name, help, cells: Cells::new() }
    }

    pub fn increment(&self, n: u64) {
        self.cells.add(0, n);
    }

    pub fn value(&self) -> u64 {
        self.cells.sum(0)
    }

    fn render(&self, out: &mut String) {
        let _ = writeln!(out, "# HELP {} {}", self.name, self.help);
        let _ = writeln!(out, "# TYPE {} counter", self.name);
        let _ = writeln!(out, "{} {}", self.name, self.value());
    }
}

/// Partitions committed by OffsetCommit.
pub static COMMITTED_PARTITIONS: HotCounter =
    HotCounter::new("kcoord_committed_partitions_total", "Partitions committed by OffsetCommit");
/// Writes to the coordinator logs.
pub static LOG_APPENDS: HotCounter = HotCounter::new("kcoord_log_appends_total", "Writes to the coordinator logs");
/// Records written to the coordinator logs.
pub static LOG_APPENDED_RECORDS: HotCounter =
    HotCounter::new("kcoord_log_appended_records_total", "Records written to the coordinator logs");

const HOT_COUNTERS: [&HotCounter; 3] = [&COMMITTED_PARTITIONS, &LOG_APPENDS, &LOG_APPENDED_RECORDS];

/// Upper bounds of the request duration buckets, in seconds (the same as
/// every other `_seconds` histogram, `metrics::SECONDS`).
const BOUNDS: &[f64] = super::metrics::SECONDS;
/// The bounds in nanoseconds, for comparing durations without floats.
// Evaluated at compile time, where an index out of bounds fails the build.
#[allow(clippy::indexing_slicing)]
const BOUND_NANOS: [u64; BOUNDS_LEN] = {
    let mut out = [0u64; BOUNDS_LEN];
    let mut i = 0;
    while i < BOUNDS_LEN {
        out[i] = (BOUNDS[i] * 1e9 + 0.5) as u64;
        i += 1;
    }
    out
};
const BOUNDS_LEN: usize = super::metrics::SECONDS.len();
/// Cells of a request series: one per bucket, one for `+Inf`, then the
/// sum of the durations in nanoseconds.
const REQUEST_CELLS: usize = BOUNDS_LEN + 2;
const SUM_CELL: usize = BOUNDS_LEN + 1;

/// One API version's requests: their count and their durations.
struct RequestSeries {
    api: &'static str,
    version: &'static str,
    cells: Cells<REQUEST_CELLS>,
}

impl RequestSeries {
    fn record(&self, elapsed: Duration) {
        let nanos = u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX);
        let bucket = BOUND_NANOS.iter().position(|&b| nanos <= b).unwrap_or(BOUNDS_LEN);
        self.cells.add(bucket, 1);
        self.cells.add(SUM_CELL, nanos);
    }
}

/// API keys whose series are kept (Kafka's keys are below this).
const KEYS: usize = 128;
/// Version labels without allocating per request; later versions share
/// the label "other".
const VERSION_LABELS: [&str; 20] =
    ["0", "1", "2", "3", "4", "5", "6", "7", "8", "9", "10", "11", "12", "13", "14", "15", "16", "17", "18", "19"];
const VERSION_SLOTS: usize = VERSION_LABELS.len() + 1;

/// The series of every (API key, version) that has served a request,
/// created on first use: at most `KEYS × VERSION_SLOTS` of them.
static REQUESTS: [[OnceLock<Box<RequestSeries>>; VERSION_SLOTS]; KEYS] =
    [const { [const { OnceLock::new() }; VERSION_SLOTS] }; KEYS];

/// Counts one request of `api` (named `name`) at `version`, answered or
/// not, and how long it took.
pub fn request(api: i16, name: &'static str, version: i16, elapsed: Duration) {
    let slot = usize::try_from(version).ok().filter(|&v| v < VERSION_LABELS.len()).unwrap_or(VERSION_LABELS.len());
    let Some(cell) = usize::try_from(api).ok().and_then(|k| REQUESTS.get(k)).and_then(|row| row.get(slot)) else {
        return;
    };
    let series = cell.get_or_init(|| {
        let version = VERSION_LABELS.get(slot).copied().unwrap_or("other");
        Box::new(RequestSeries { api: name, version, cells: Cells::new() })
    });
    series.record(elapsed);
}

/// `kcoord_requests_total` and `kcoord_request_duration_seconds` for every
/// series, then the hot counters, in Prometheus' text format.
pub fn render(out: &mut String) {
    let series: Vec<&RequestSeries> =
        REQUESTS.iter().flat_map(|row| row.iter().filter_map(|c| c.get().map(|b| &**b))).collect();
    // Read each series once, so that its count, buckets and sum agree.
    let read: Vec<(&RequestSeries, [u64; REQUEST_CELLS])> =
        series.into_iter().map(|s| (s, std::array::from_fn(|i| s.cells.sum(i)))).collect();
    let count = |cells: &[u64; REQUEST_CELLS]| cells[..=BOUNDS_LEN].iter().fold(0u64, |a, &c| a.wrapping_add(c));
    if !read.is_empty() {
        out.push_str("# HELP kcoord_requests_total Requests received, by API and version (answered or not)\n");
        out.push_str("# TYPE kcoord_requests_total counter\n");
        for (s, cells) in &read {
            let _ =
                writeln!(out, "kcoord_requests_total{{api=\"{}\",version=\"{}\"}} {}", s.api, s.version, count(cells));
        }
        out.push_str(
            "# HELP kcoord_request_duration_seconds Time from a request's arrival to its response being ready, by API and version\n",
        );
        out.push_str("# TYPE kcoord_request_duration_seconds histogram\n");
        for (s, cells) in &read {
            let labels = format!("api=\"{}\",version=\"{}\"", s.api, s.version);
            let mut cumulative = 0u64;
            for (bound, n) in BOUNDS.iter().zip(cells.iter()) {
                cumulative = cumulative.wrapping_add(*n);
                let _ = writeln!(out, "kcoord_request_duration_seconds_bucket{{{labels},le=\"{bound}\"}} {cumulative}");
            }
            let total = count(cells);
            let _ = writeln!(out, "kcoord_request_duration_seconds_bucket{{{labels},le=\"+Inf\"}} {total}");
            let sum = cells[SUM_CELL] as f64 / 1e9;
            let _ = writeln!(out, "kcoord_request_duration_seconds_sum{{{labels}}} {sum}");
            let _ = writeln!(out, "kcoord_request_duration_seconds_count{{{labels}}} {total}");
        }
    }
    for counter in HOT_COUNTERS {
        counter.render(out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The value on a line `NAME VALUE` of `text`.
    fn sample(text: &str, name: &str) -> Option<f64> {
        text.lines().find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
    }

    #[test]
    fn a_counter_sums_what_every_thread_added() {
        static C: HotCounter = HotCounter::new("test_total", "a test counter");
        std::thread::scope(|s| {
            for _ in 0..2 * STRIPES + 3 {
                s.spawn(|| (0..1000).for_each(|_| C.increment(2)));
            }
        });
        assert_eq!(C.value(), 2 * 1000 * (2 * STRIPES as u64 + 3));
        let mut out = String::new();
        C.render(&mut out);
        assert_eq!(sample(&out, "test_total"), Some(C.value() as f64), "{out}");
        assert!(out.contains("# TYPE test_total counter"), "{out}");
    }

    #[test]
    fn requests_are_counted_and_timed_per_api_and_version_in_cumulative_buckets() {
        // API key 127 and its "other" version: no real API uses them, so
        // other tests in this process do not add to these series.
        let api = 127;
        request(api, "TestApi", 3, Duration::from_micros(50));
        request(api, "TestApi", 3, Duration::from_micros(300));
        request(api, "TestApi", 3, Duration::from_secs(60));
        request(api, "TestApi", 99, Duration::from_millis(2));
        let mut out = String::new();
        render(&mut out);
        let v3 = "api=\"TestApi\",version=\"3\"";
        assert_eq!(sample(&out, &format!("kcoord_requests_total{{{v3}}}")), Some(3.0), "{out}");
        assert_eq!(sample(&out, &format!("kcoord_request_duration_seconds_bucket{{{v3},le=\"0.0001\"}}")), Some(1.0));
        assert_eq!(sample(&out, &format!("kcoord_request_duration_seconds_bucket{{{v3},le=\"0.00025\"}}")), Some(1.0));
        assert_eq!(sample(&out, &format!("kcoord_request_duration_seconds_bucket{{{v3},le=\"0.0005\"}}")), Some(2.0));
        assert_eq!(sample(&out, &format!("kcoord_request_duration_seconds_bucket{{{v3},le=\"30\"}}")), Some(2.0));
        assert_eq!(sample(&out, &format!("kcoord_request_duration_seconds_bucket{{{v3},le=\"+Inf\"}}")), Some(3.0));
        assert_eq!(sample(&out, &format!("kcoord_request_duration_seconds_count{{{v3}}}")), Some(3.0));
        let sum = sample(&out, &format!("kcoord_request_duration_seconds_sum{{{v3}}}")).unwrap();
        assert!((sum - 60.00035).abs() < 1e-9, "{sum}");
        let other = "api=\"TestApi\",version=\"other\"";
        assert_eq!(sample(&out, &format!("kcoord_requests_total{{{other}}}")), Some(1.0), "{out}");
        assert_eq!(out.matches("# TYPE kcoord_request_duration_seconds histogram").count(), 1);
    }

    #[test]
    fn the_bucket_bounds_are_the_recorders_seconds_buckets_in_nanoseconds() {
        assert_eq!(BOUND_NANOS.len(), BOUNDS.len());
        for (n, s) in BOUND_NANOS.iter().zip(BOUNDS) {
            assert_eq!(*n as f64, (s * 1e9).round(), "{s}");
        }
    }
}
