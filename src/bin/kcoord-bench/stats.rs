//! Latency samples and throughput, printed as a table or JSON lines.

use std::time::Duration;

use serde::Serialize;

/// Latency samples in microseconds (bounded: beyond the cap, samples are
/// kept by reservoir sampling so percentiles stay unbiased).
#[derive(Debug, Default, Clone)]
pub struct Latencies {
    samples: Vec<u32>,
    seen: u64,
    rng: u64,
}

const CAP: usize = 2_000_000;

impl Latencies {
    pub fn record(&mut self, d: Duration) {
        let us = d.as_micros().min(u32::MAX as u128) as u32;
        self.seen += 1;
        if self.samples.len() < CAP {
            self.samples.push(us);
        } else {
            self.rng = self.rng.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let j = (self.rng >> 11) % self.seen;
            if (j as usize) < CAP {
                self.samples[j as usize] = us;
            }
        }
    }

    pub fn merge(&mut self, other: Latencies) {
        for s in other.samples {
            self.record(Duration::from_micros(s as u64));
        }
    }

    pub fn count(&self) -> u64 {
        self.seen
    }

    /// The p-th percentile (0..=100) in milliseconds.
    pub fn percentile_ms(&mut self, p: f64) -> f64 {
        if self.samples.is_empty() {
            return 0.0;
        }
        self.samples.sort_unstable();
        let idx = ((p / 100.0) * (self.samples.len() - 1) as f64).round() as usize;
        self.samples[idx.min(self.samples.len() - 1)] as f64 / 1000.0
    }
}

/// One benchmark result.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub scenario: String,
    pub params: serde_json::Value,
    pub metrics: Vec<(String, f64, String)>,
    /// Why the run does not count as a valid measurement (the process then
    /// exits non-zero after printing the numbers).
    pub failure: Option<String>,
}

impl Report {
    pub fn new(scenario: &str, params: serde_json::Value) -> Self {
        Report { scenario: scenario.to_string(), params, metrics: Vec::new(), failure: None }
    }

    /// Marks the run as failed: its numbers do not measure what they claim.
    pub fn fail(&mut self, why: String) -> &mut Self {
        self.failure = Some(why);
        self
    }

    pub fn metric(&mut self, name: &str, value: f64, unit: &str) -> &mut Self {
        self.metrics.push((name.to_string(), value, unit.to_string()));
        self
    }

    /// Adds throughput and p50/p99/p99.9 latency.
    pub fn latency(&mut self, prefix: &str, lat: &mut Latencies, elapsed: Duration) -> &mut Self {
        let n = lat.count() as f64;
        self.metric(&format!("{prefix}_per_sec"), n / elapsed.as_secs_f64().max(1e-9), "1/s");
        self.metric(&format!("{prefix}_p50"), lat.percentile_ms(50.0), "ms");
        self.metric(&format!("{prefix}_p99"), lat.percentile_ms(99.0), "ms");
        self.metric(&format!("{prefix}_p999"), lat.percentile_ms(99.9), "ms");
        self
    }

    pub fn print(&self, json: bool) {
        if json {
            let metrics: serde_json::Map<String, serde_json::Value> =
                self.metrics.iter().map(|(k, v, _)| (k.clone(), serde_json::json!(v))).collect();
            let mut out = serde_json::json!({"scenario": self.scenario, "params": self.params, "metrics": metrics});
            if let Some(f) = &self.failure {
                out["failure"] = serde_json::json!(f);
            }
            println!("{out}");
        } else {
            println!("== {} {}", self.scenario, self.params);
            for (k, v, unit) in &self.metrics {
                println!("  {k:<28} {v:>14.3} {unit}");
            }
        }
    }
}
