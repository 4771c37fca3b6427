//! One process for the whole cluster: a listener per upstream broker, and
//! the set of listeners follows the upstream's broker list.
//!
//! - At start-up the brokers get ports in broker id order: a listener's
//!   port plus the broker's rank (ephemeral ports when the port is 0).
//! - A broker that appears later in the upstream's Metadata (the periodic
//!   refresh, or a client's Metadata answer naming a broker no listener
//!   fronts) gets the next rank, so the ports of brokers already fronted
//!   never move; for brokers added with growing ids (the usual way) that is
//!   the port a restart would give them too.
//! - A broker that leaves the upstream's Metadata keeps its listener: that
//!   kcoord node still coordinates groups (FindCoordinator may name it) and
//!   stays listed in Metadata, since librdkafka ≥ 2.10 forgets brokers that
//!   Metadata does not list. Another listed broker answers its forwarded
//!   requests (`Sidecar::stand_in`), and its upstream address never reaches
//!   a client. If the broker comes back, the same listener fronts it again.
//! - At most `sidecar.max_fronted_brokers` brokers are fronted (the lowest
//!   ids at start-up, then the first to appear); the others are left out of
//!   Metadata, like brokers no sidecar fronts in the per-broker topology.

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use tokio::net::TcpListener;

use crate::config::Endpoint;
use crate::security::ListenerSecurity;
use crate::server::ListenerInfo;
use crate::sidecar::upstream::format_addr;

/// How one configured listener is repeated per fronted broker.
pub struct ListenerPlan {
    pub index: u16,
    pub bind: Endpoint,
    /// `None`: the bound address is advertised.
    pub advertised: Option<Endpoint>,
    pub security: Arc<ListenerSecurity>,
}

/// A listener bound for one fronted broker on one configured listener.
pub struct Bound {
    pub listener: TcpListener,
    pub info: ListenerInfo,
    pub security: Arc<ListenerSecurity>,
    /// Where clients of this listener reach the broker's node.
    pub advertised: (String, i32),
    pub local: SocketAddr,
}

pub struct Fronting {
    plans: Vec<ListenerPlan>,
    /// Broker ids fronted, by rank (the port offset).
    fronted: Mutex<Vec<i32>>,
    max: usize,
}

impl Fronting {
    pub fn new(plans: Vec<ListenerPlan>, max: usize) -> Fronting {
        Fronting { plans, fronted: Mutex::new(Vec::new()), max: max.max(1) }
    }

    fn fronted(&self) -> std::sync::MutexGuard<'_, Vec<i32>> {
        self.fronted.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The ids among `brokers` that would get a listener now (not fronted
    /// yet, within the cap), in id order.
    pub fn newcomers(&self, brokers: &BTreeSet<i32>) -> Vec<i32> {
        let fronted = self.fronted();
        let room = self.max.saturating_sub(fronted.len());
        brokers.iter().copied().filter(|id| !fronted.contains(id)).take(room).collect()
    }

    /// Whether `brokers` names a broker left out by the cap.
    pub fn over_cap(&self, brokers: &BTreeSet<i32>) -> bool {
        let fronted = self.fronted();
        brokers.iter().any(|id| !fronted.contains(id)) && fronted.len() >= self.max
    }

    /// Binds the listeners of broker `id` on every configured listener, at
    /// the next rank. Nothing is kept when one of them cannot be bound.
    pub async fn bind(&self, id: i32) -> Result<Vec<Bound>, String> {
        let rank = {
            let fronted = self.fronted();
            if fronted.contains(&id) {
                return Ok(Vec::new());
            }
            fronted.len()
        };
        let offset = u16::try_from(rank).map_err(|_| "too many upstream brokers".to_string())?;
        let mut out = Vec::with_capacity(self.plans.len());
        for plan in &self.plans {
            let port = match plan.bind.port {
                0 => 0,
                p => p.checked_add(offset).ok_or_else(|| format!("no port left for upstream broker {id}"))?,
            };
            let addr = format_addr(&plan.bind.host, i32::from(port));
            let listener = TcpListener::bind(&addr).await.map_err(|e| format!("binding {addr}: {e}"))?;
            let local = listener.local_addr().map_err(|e| format!("binding {addr}: {e}"))?;
            let shown = plan.advertised.clone().unwrap_or_else(|| plan.bind.clone());
            let advertised_port = match plan.bind.port {
                0 => local.port(),
                _ => shown.port.checked_add(offset).ok_or_else(|| format!("no port left for upstream broker {id}"))?,
            };
            out.push(Bound {
                listener,
                info: ListenerInfo { node_id: id, index: plan.index },
                security: plan.security.clone(),
                advertised: (shown.host, i32::from(advertised_port)),
                local,
            });
        }
        let mut fronted = self.fronted();
        if fronted.contains(&id) || fronted.len() != rank {
            // Another caller fronted brokers meanwhile: this rank is taken.
            return Err(format!("upstream broker {id}: concurrent binding"));
        }
        fronted.push(id);
        Ok(out)
    }
}
