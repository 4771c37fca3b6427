//! Connection admission: `server.max_connections` in total and
//! `server.max_connections_per_ip` (with per-address overrides) per client
//! address, counted across all of a node's listeners.
//!
//! A connection past a limit is closed at once (Kafka instead stops
//! accepting until a slot frees up; closing keeps the accept queue moving
//! and tells the client immediately). Refusals are counted in
//! `kcoord_connections_refused_total{reason}` and logged at most once per
//! second with the number refused since the previous line, so a flood of
//! connections cannot flood the log.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub use crate::observability::rate_log::RateLimitedLog;

/// Why a connection was refused (the `reason` label of
/// `kcoord_connections_refused_total`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// `server.max_connections` open connections.
    MaxConnections,
    /// `server.max_connections_per_ip` (or its override) from this address.
    MaxConnectionsPerIp,
}

impl Refusal {
    pub fn label(self) -> &'static str {
        match self {
            Refusal::MaxConnections => "max_connections",
            Refusal::MaxConnectionsPerIp => "max_connections_per_ip",
        }
    }
}

/// Parses `server.max_connections_per_ip_overrides`, Kafka's
/// `max.connections.per.ip.overrides` format: `host:count,host:count`,
/// where host is an IP address (IPv6 optionally in brackets) or a host name.
/// Returns (host, count) pairs; host names are resolved by [`resolve_overrides`].
pub fn parse_overrides(spec: &str) -> Result<Vec<(String, u32)>, String> {
    let mut out = Vec::new();
    for item in spec.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let (host, count) = item
            .rsplit_once(':')
            .ok_or_else(|| format!("server.max_connections_per_ip_overrides: {item:?}: expected HOST:COUNT"))?;
        let host = host.trim().trim_start_matches('[').trim_end_matches(']');
        if host.is_empty() {
            return Err(format!("server.max_connections_per_ip_overrides: {item:?}: the host is empty"));
        }
        let count: u32 = count.trim().parse().map_err(|_| {
            format!("server.max_connections_per_ip_overrides: {item:?}: {count:?} is not a connection count")
        })?;
        out.push((host.to_string(), count));
    }
    Ok(out)
}

/// Resolves override hosts to addresses (all addresses of a host name), as
/// Kafka does once when the configuration is loaded.
pub async fn resolve_overrides(spec: &str) -> Result<HashMap<IpAddr, u32>, String> {
    let mut out = HashMap::new();
    for (host, count) in parse_overrides(spec)? {
        if let Ok(ip) = host.parse::<IpAddr>() {
            out.insert(ip.to_canonical(), count);
            continue;
        }
        let addrs = tokio::net::lookup_host((host.as_str(), 0))
            .await
            .map_err(|e| format!("server.max_connections_per_ip_overrides: cannot resolve {host:?}: {e}"))?;
        for a in addrs {
            out.insert(a.ip().to_canonical(), count);
        }
    }
    Ok(out)
}

/// The open connections of a node, in total and per client address.
pub struct ConnectionLimits {
    max_total: usize,
    max_per_ip: u32,
    overrides: HashMap<IpAddr, u32>,
    state: Mutex<State>,
    refusals: Mutex<RateLimitedLog>,
}

#[derive(Default)]
struct State {
    total: usize,
    /// Only addresses with at least one open connection, so the map is
    /// bounded by `max_total`.
    per_ip: HashMap<IpAddr, u32>,
}

impl ConnectionLimits {
    pub fn new(max_total: u32, max_per_ip: u32, overrides: HashMap<IpAddr, u32>) -> Arc<Self> {
        Arc::new(ConnectionLimits {
            max_total: max_total as usize,
            max_per_ip,
            overrides,
            state: Mutex::new(State::default()),
            refusals: Mutex::new(RateLimitedLog::new(Duration::from_secs(1))),
        })
    }

    /// Admits a connection from `ip`, or says which limit refuses it. The
    /// returned slot gives the connection back when dropped.
    pub fn admit(self: &Arc<Self>, ip: IpAddr) -> Result<Slot, Refusal> {
        let ip = ip.to_canonical();
        let limit = self.overrides.get(&ip).copied().unwrap_or(self.max_per_ip);
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if st.total >= self.max_total {
            return Err(Refusal::MaxConnections);
        }
        let from_ip = st.per_ip.get(&ip).copied().unwrap_or(0);
        if from_ip >= limit {
            return Err(Refusal::MaxConnectionsPerIp);
        }
        st.total += 1;
        st.per_ip.insert(ip, from_ip + 1);
        Ok(Slot { limits: self.clone(), ip })
    }

    /// Open connections in total.
    pub fn open(&self) -> usize {
        self.state.lock().unwrap_or_else(|e| e.into_inner()).total
    }

    /// Counts a refusal and logs it, at most once per second.
    pub fn note_refusal(&self, refusal: Refusal, peer: std::net::SocketAddr) {
        metrics::counter!("kcoord_connections_refused_total", "reason" => refusal.label()).increment(1);
        let mut log = self.refusals.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(refused) = log.note(Instant::now()) {
            tracing::warn!(
                %peer,
                reason = refusal.label(),
                refused,
                max_connections = self.max_total,
                max_connections_per_ip = self.overrides.get(&peer.ip().to_canonical()).copied().unwrap_or(self.max_per_ip),
                "refusing connections: a connection limit is reached (refused counts every refusal since the previous line)"
            );
        }
    }

    fn release(&self, ip: IpAddr) {
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        st.total = st.total.saturating_sub(1);
        if let Some(n) = st.per_ip.get_mut(&ip) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                st.per_ip.remove(&ip);
            }
        }
    }
}

/// One admitted connection; dropping it frees its place.
pub struct Slot {
    limits: Arc<ConnectionLimits>,
    ip: IpAddr,
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.limits.release(self.ip);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn the_total_limit_refuses_past_max_connections_and_a_closed_connection_frees_its_place() {
        let l = ConnectionLimits::new(2, u32::MAX, HashMap::new());
        let a = l.admit(ip("10.0.0.1")).unwrap();
        let _b = l.admit(ip("10.0.0.2")).unwrap();
        assert_eq!(l.admit(ip("10.0.0.3")).err(), Some(Refusal::MaxConnections));
        drop(a);
        assert_eq!(l.open(), 1);
        assert!(l.admit(ip("10.0.0.3")).is_ok());
    }

    #[test]
    fn the_per_ip_limit_refuses_one_address_and_admits_others() {
        let l = ConnectionLimits::new(100, 2, HashMap::new());
        let _a = l.admit(ip("10.0.0.1")).unwrap();
        let b = l.admit(ip("10.0.0.1")).unwrap();
        assert_eq!(l.admit(ip("10.0.0.1")).err(), Some(Refusal::MaxConnectionsPerIp));
        assert!(l.admit(ip("10.0.0.2")).is_ok());
        drop(b);
        assert!(l.admit(ip("10.0.0.1")).is_ok());
    }

    #[test]
    fn an_override_raises_or_lowers_the_per_ip_limit_of_one_address() {
        let overrides = HashMap::from([(ip("10.0.0.1"), 3), (ip("10.0.0.9"), 0)]);
        let l = ConnectionLimits::new(100, 1, overrides);
        let _held: Vec<Slot> = (0..3).map(|_| l.admit(ip("10.0.0.1")).unwrap()).collect();
        assert_eq!(l.admit(ip("10.0.0.1")).err(), Some(Refusal::MaxConnectionsPerIp));
        assert_eq!(l.admit(ip("10.0.0.9")).err(), Some(Refusal::MaxConnectionsPerIp));
        let _c = l.admit(ip("10.0.0.2")).unwrap();
        assert_eq!(l.admit(ip("10.0.0.2")).err(), Some(Refusal::MaxConnectionsPerIp));
    }

    #[test]
    fn an_ipv4_mapped_ipv6_peer_counts_as_its_ipv4_address() {
        let l = ConnectionLimits::new(100, 1, HashMap::new());
        let _a = l.admit(ip("10.0.0.1")).unwrap();
        assert_eq!(l.admit(ip("::ffff:10.0.0.1")).err(), Some(Refusal::MaxConnectionsPerIp));
    }

    #[test]
    fn overrides_parse_kafkas_host_count_list() {
        assert_eq!(
            parse_overrides("10.0.0.1:5, [::1]:7,broker.example:0").unwrap(),
            vec![("10.0.0.1".into(), 5), ("::1".into(), 7), ("broker.example".into(), 0)]
        );
        assert_eq!(parse_overrides("").unwrap(), vec![]);
        for bad in ["10.0.0.1", ":5", "10.0.0.1:x", "10.0.0.1:-1"] {
            let err = parse_overrides(bad).unwrap_err();
            assert!(err.contains("max_connections_per_ip_overrides"), "{bad}: {err}");
        }
    }

    #[tokio::test]
    async fn override_addresses_are_canonical_and_names_resolve() {
        let m = resolve_overrides("::ffff:10.0.0.1:4,localhost:2").await.unwrap();
        assert_eq!(m.get(&ip("10.0.0.1")), Some(&4));
        assert_eq!(m.get(&ip("127.0.0.1")), Some(&2));
    }
}
