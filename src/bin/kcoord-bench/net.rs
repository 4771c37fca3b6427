//! How the load generator reaches the broker: plain TCP, or TLS and SASL
//! as `--command-config` says (Kafka's client settings), the same for every
//! connection of the run.

use std::sync::OnceLock;

use kcoord::protocol::client::{ClientError, Connection};
use kcoord::security::client::ClientSecurity;

static SECURITY: OnceLock<ClientSecurity> = OnceLock::new();

/// Sets the run's client security (once, before any connection).
pub fn configure(security: ClientSecurity) {
    let _ = SECURITY.set(security);
}

/// A connection to `addr`, secured as configured, its API versions known.
pub async fn connect(addr: &str, client_id: &str) -> Result<Connection, ClientError> {
    let plain = ClientSecurity::plaintext();
    Connection::connect_secure(addr, client_id, SECURITY.get().unwrap_or(&plain)).await
}
