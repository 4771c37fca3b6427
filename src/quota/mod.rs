//! Client quotas, as Kafka's `ClientQuotaManager` and
//! `ClientRequestQuotaManager` (KIP-13, KIP-124, KIP-219): a request-time
//! quota (`request_percentage`: percent of one thread's time) and byte-rate
//! quotas for Produce (`producer_byte_rate`, request bytes) and Fetch
//! (`consumer_byte_rate`, response bytes), per user and/or client id.
//!
//! A client over its quota is not refused: the answer says how long to wait
//! (`throttle_time_ms`) and the connection reads nothing more from it for
//! that long (the connection side lives in `server::connection`). Time is a
//! parameter here (milliseconds on a monotonic clock), so every rule is a
//! plain unit test.
//!
//! Which quota applies follows Kafka's precedence, per quota type:
//! `(user, client)`, `(user, <default>)`, `(user)`, `(<default>, client)`,
//! `(<default>, <default>)`, `(<default>)`, `(client)`, `(<default> client)`.
//! Clients that share the chosen entity share its sensor (a user quota is
//! shared by all that user's client ids).
//!
//! State is bounded: one sensor per (quota type, user, client id) that has a
//! quota, dropped after an hour without use (Kafka's inactive-sensor
//! expiry), at most `quotas.max_tracked_clients` of them (beyond that the
//! least recently used is dropped).

pub mod rate;

use std::collections::HashMap;
use std::sync::Mutex;

use serde::{Deserialize, Serialize};

use rate::{Rate, Windows};

/// Kafka's name for the default entity.
pub const DEFAULT_ENTITY: &str = "<default>";

/// A sensor unused this long is dropped (Kafka:
/// `InactiveSensorExpirationTimeSeconds`).
pub const SENSOR_EXPIRY_MS: u64 = 3_600_000;

/// `[quotas]`: Kafka's client quotas, set statically.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct QuotaConfig {
    /// Samples a rate is measured over (Kafka: `quota.window.num`).
    pub window_num: u32,
    /// Length of one sample (Kafka: `quota.window.size.seconds`).
    pub window_size_seconds: u32,
    /// At most this many sensors are kept.
    pub max_tracked_clients: u32,
    /// The quotas, as Kafka's `kafka-configs --entity-type users/clients`.
    pub entities: Vec<QuotaEntity>,
}

impl Default for QuotaConfig {
    fn default() -> Self {
        QuotaConfig { window_num: 11, window_size_seconds: 1, max_tracked_clients: 10_000, entities: Vec::new() }
    }
}

/// The quotas of one user and/or client id (`"<default>"` for Kafka's
/// default entity); an unset quota does not apply.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QuotaEntity {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_id: Option<String>,
    /// Bytes per second of Produce requests.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub producer_byte_rate: Option<f64>,
    /// Bytes per second of Fetch responses.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub consumer_byte_rate: Option<f64>,
    /// Percent of one thread's time spent serving requests (over 100 means
    /// more than one thread).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_percentage: Option<f64>,
}

impl QuotaConfig {
    pub fn validate(&self) -> Result<(), String> {
        if self.window_num < 2 {
            return Err("quotas.window_num must be at least 2".into());
        }
        if self.window_size_seconds == 0 {
            return Err("quotas.window_size_seconds must be at least 1".into());
        }
        if self.max_tracked_clients == 0 {
            return Err("quotas.max_tracked_clients must be at least 1".into());
        }
        let mut seen = std::collections::HashSet::new();
        for e in &self.entities {
            if e.user.is_none() && e.client_id.is_none() {
                return Err("a [[quotas.entities]] entry needs user, client_id or both".into());
            }
            if !seen.insert((e.user.clone(), e.client_id.clone())) {
                return Err(format!("quotas: user {:?} client_id {:?} appears twice", e.user, e.client_id));
            }
            for (name, v) in [
                ("producer_byte_rate", e.producer_byte_rate),
                ("consumer_byte_rate", e.consumer_byte_rate),
                ("request_percentage", e.request_percentage),
            ] {
                if v.is_some_and(|v| !(v.is_finite() && v > 0.0)) {
                    return Err(format!("quotas: {name} must be a positive number"));
                }
            }
        }
        Ok(())
    }

    fn windows(&self) -> Windows {
        Windows { num: self.window_num, window_ms: u64::from(self.window_size_seconds) * 1000 }
    }
}

/// The three quota types.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    Request,
    Produce,
    Fetch,
}

impl Kind {
    pub fn label(self) -> &'static str {
        match self {
            Kind::Request => "request",
            Kind::Produce => "produce",
            Kind::Fetch => "fetch",
        }
    }

    fn bound(self, e: &QuotaEntity) -> Option<f64> {
        match self {
            Kind::Request => e.request_percentage,
            Kind::Produce => e.producer_byte_rate,
            Kind::Fetch => e.consumer_byte_rate,
        }
    }
}

/// A user or client-id part of a quota entity.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Part {
    Absent,
    Default,
    Named(String),
}

impl Part {
    fn of(v: &Option<String>) -> Part {
        match v.as_deref() {
            None => Part::Absent,
            Some(DEFAULT_ENTITY) => Part::Default,
            Some(name) => Part::Named(name.to_string()),
        }
    }
}

/// Who sent a request, for quotas: the principal's name (without `User:`)
/// and the client id.
#[derive(Debug, Clone, Copy)]
pub struct Client<'a> {
    pub user: &'a str,
    pub client_id: &'a str,
}

impl<'a> Client<'a> {
    /// `principal` is `Type:name`, as the authorizer sees it.
    pub fn new(principal: &'a str, client_id: &'a str) -> Self {
        let user = principal.split_once(':').map_or(principal, |(_, name)| name);
        Client { user, client_id }
    }
}

/// The quota that applies to a client: its bound and the sensor it shares.
#[derive(Debug, Clone, PartialEq)]
struct Applied {
    bound: f64,
    key: (String, String),
}

#[derive(Debug)]
struct Sensor {
    rate: Rate,
    last_used_ms: u64,
}

/// What one request used.
#[derive(Debug, Clone, Copy, Default)]
pub struct Usage {
    /// Time spent serving it, in nanoseconds (None: not charged, e.g. an
    /// acks=0 Produce, as Kafka).
    pub busy_nanos: Option<u64>,
    /// Produce request bytes.
    pub produced_bytes: u64,
    /// Fetch response bytes.
    pub fetched_bytes: u64,
}

/// Kafka's request-time unit: percent of one second per nanosecond.
const NANOS_TO_PERCENT: f64 = 100.0 / 1e9;

/// The quotas and their sensors (pure: time is a parameter).
#[derive(Debug)]
pub struct QuotaBook {
    windows: Windows,
    max_sensors: usize,
    /// Per quota type, the bounds by (user part, client part).
    table: HashMap<(Kind, Part, Part), f64>,
    sensors: HashMap<(Kind, String, String), Sensor>,
    last_sweep_ms: u64,
}

impl QuotaBook {
    pub fn new(config: &QuotaConfig) -> Self {
        let mut table = HashMap::new();
        for e in &config.entities {
            for kind in [Kind::Request, Kind::Produce, Kind::Fetch] {
                if let Some(b) = kind.bound(e) {
                    table.insert((kind, Part::of(&e.user), Part::of(&e.client_id)), b);
                }
            }
        }
        QuotaBook {
            windows: config.windows(),
            max_sensors: config.max_tracked_clients as usize,
            table,
            sensors: HashMap::new(),
            last_sweep_ms: 0,
        }
    }

    /// The quota of `kind` that applies to `c`, in Kafka's precedence.
    fn applied(&self, kind: Kind, c: Client<'_>) -> Option<Applied> {
        let user = || Part::Named(c.user.to_string());
        let client = || Part::Named(c.client_id.to_string());
        // Which sensor clients under each entity share: by user and client
        // id, by user, or by client id.
        let (both, user_only, client_only) = ((true, true), (true, false), (false, true));
        let order = [
            (user(), client(), both),
            (user(), Part::Default, both),
            (user(), Part::Absent, user_only),
            (Part::Default, client(), both),
            (Part::Default, Part::Default, both),
            (Part::Default, Part::Absent, user_only),
            (Part::Absent, client(), client_only),
            (Part::Absent, Part::Default, client_only),
        ];
        let found = order.into_iter().find_map(|(u, cl, (by_user, by_client))| {
            let bound = *self.table.get(&(kind, u, cl))?;
            let pick = |yes: bool, v: &str| if yes { v.to_string() } else { String::new() };
            Some(Applied { bound, key: (pick(by_user, c.user), pick(by_client, c.client_id)) })
        });
        found
    }

    /// Records what a request used at `now_ms`; returns the throttle time
    /// in milliseconds per quota type that was exceeded.
    pub fn charge(&mut self, c: Client<'_>, usage: Usage, now_ms: u64) -> Vec<(Kind, u64)> {
        self.sweep(now_ms);
        let mut throttled = Vec::new();
        let charges = [
            (Kind::Request, usage.busy_nanos.map(|n| n as f64 * NANOS_TO_PERCENT)),
            (Kind::Produce, Some(usage.produced_bytes as f64).filter(|&b| b > 0.0)),
            (Kind::Fetch, Some(usage.fetched_bytes as f64).filter(|&b| b > 0.0)),
        ];
        for (kind, value) in charges {
            let (Some(value), Some(applied)) = (value, self.applied(kind, c)) else { continue };
            let ms = self.record(kind, applied, value, now_ms);
            if ms > 0 {
                throttled.push((kind, ms));
            }
        }
        throttled
    }

    /// Takes back bytes charged to `c` that were not delivered after all
    /// (a throttled Fetch answers empty, as Kafka's).
    pub fn uncharge_fetch(&mut self, c: Client<'_>, bytes: u64) {
        if let Some(applied) = self.applied(Kind::Fetch, c) {
            if let Some(s) = self.sensors.get_mut(&(Kind::Fetch, applied.key.0, applied.key.1)) {
                s.rate.unrecord(bytes as f64);
            }
        }
    }

    fn record(&mut self, kind: Kind, applied: Applied, value: f64, now_ms: u64) -> u64 {
        let key = (kind, applied.key.0, applied.key.1);
        if !self.sensors.contains_key(&key) && self.sensors.len() >= self.max_sensors {
            self.evict_least_recently_used();
        }
        let w = self.windows;
        let sensor = self.sensors.entry(key).or_insert_with(|| Sensor { rate: Rate::default(), last_used_ms: now_ms });
        sensor.last_used_ms = now_ms;
        sensor.rate.record(value, now_ms, w);
        let observed = sensor.rate.measure(now_ms, w);
        if observed <= applied.bound {
            return 0;
        }
        // Kafka's QuotaUtils.throttleTime: the time that brings the rate
        // back to the bound if nothing more is recorded.
        let ms = ((observed - applied.bound) / applied.bound * sensor.rate.window_size_ms(now_ms, w) as f64).round();
        let ms = if ms.is_finite() { ms as u64 } else { u64::MAX };
        match kind {
            // ClientRequestQuotaManager caps it at one window.
            Kind::Request => ms.min(w.window_ms),
            _ => ms,
        }
    }

    fn sweep(&mut self, now_ms: u64) {
        if now_ms.saturating_sub(self.last_sweep_ms) < 60_000 {
            return;
        }
        self.last_sweep_ms = now_ms;
        self.sensors.retain(|_, s| now_ms.saturating_sub(s.last_used_ms) < SENSOR_EXPIRY_MS);
    }

    fn evict_least_recently_used(&mut self) {
        let oldest = self.sensors.iter().min_by_key(|(_, s)| s.last_used_ms).map(|(k, _)| k.clone());
        if let Some(k) = oldest {
            self.sensors.remove(&k);
        }
    }

    /// Sensors held.
    pub fn tracked(&self) -> usize {
        self.sensors.len()
    }
}

/// The daemon's quotas: the book behind a lock, and the clock it reads.
#[derive(Debug)]
pub struct Quotas {
    book: Mutex<QuotaBook>,
    started: std::time::Instant,
}

impl Quotas {
    /// `None` when no quota is configured: nothing is measured (Kafka's
    /// default: unlimited).
    pub fn from_config(config: &QuotaConfig) -> Option<Quotas> {
        if config.entities.is_empty() {
            return None;
        }
        Some(Quotas { book: Mutex::new(QuotaBook::new(config)), started: std::time::Instant::now() })
    }

    fn now_ms(&self) -> u64 {
        u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    /// Charges a request; returns how long its connection must wait, in
    /// milliseconds (0: not throttled), and the quota types exceeded.
    pub fn charge(&self, c: Client<'_>, usage: Usage) -> Vec<(Kind, u64)> {
        let now = self.now_ms();
        let mut book = self.book.lock().unwrap_or_else(|e| e.into_inner());
        let throttled = book.charge(c, usage, now);
        metrics::gauge!("kcoord_quota_tracked_sensors").set(book.tracked() as f64);
        throttled
    }

    pub fn uncharge_fetch(&self, c: Client<'_>, bytes: u64) {
        self.book.lock().unwrap_or_else(|e| e.into_inner()).uncharge_fetch(c, bytes);
    }
}

#[cfg(test)]
mod tests;
