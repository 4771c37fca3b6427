//! Client-side security: how kcoord itself connects to a Kafka-compatible
//! broker that wants TLS or SASL (a sidecar's upstream links, the admin
//! CLI, kcoord-bench), configured with Kafka's client settings
//! (`security.protocol`, `sasl.mechanism`, `sasl.username`,
//! `sasl.password`, `ssl.ca.location`, ...) so that a working client
//! configuration can be reused as it is.
//!
//! - [`settings`]: the settings, from kcoord's TOML or a Kafka-style
//!   properties file (`--command-config`);
//! - [`stream`]: a TCP or TLS byte stream, split in halves, the plain
//!   halves still reachable for splice(2);
//! - [`sasl`]: SaslHandshake v1 then SaslAuthenticate, PLAIN or SCRAM
//!   ([`scram`]), on a [`crate::protocol::client::Connection`].

pub mod assertion;
pub mod jaas;
pub mod oauth;
pub mod sasl;
pub mod scram;
pub mod settings;
pub mod stream;
mod verify;

use std::sync::Arc;
use std::time::Duration;

use crate::security::listeners::SecurityProtocol;
use crate::security::scram::ScramMechanism;
pub use settings::ClientSecurityConfig;

/// A SASL mechanism kcoord can log in with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mechanism {
    Plain,
    Scram(ScramMechanism),
    OAuthBearer,
    Gssapi,
}

impl Mechanism {
    pub fn parse(name: &str) -> Option<Mechanism> {
        match name {
            "PLAIN" => Some(Mechanism::Plain),
            "OAUTHBEARER" => Some(Mechanism::OAuthBearer),
            "GSSAPI" => Some(Mechanism::Gssapi),
            other => ScramMechanism::from_name(other).map(Mechanism::Scram),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Mechanism::Plain => "PLAIN",
            Mechanism::Scram(m) => m.name(),
            Mechanism::OAuthBearer => "OAUTHBEARER",
            Mechanism::Gssapi => "GSSAPI",
        }
    }
}

/// What a SASL login presents: a user and password (PLAIN, SCRAM), an
/// access token from `tokens` (OAUTHBEARER), or Kerberos credentials
/// (GSSAPI).
#[derive(Clone)]
pub struct SaslLogin {
    pub mechanism: Mechanism,
    pub username: String,
    pub password: String,
    pub tokens: Option<Arc<oauth::TokenSource>>,
    /// OAUTHBEARER's SASL extensions, sent with every token.
    pub oauth_extensions: Vec<(String, String)>,
    /// SCRAM with a delegation token: `username` is the token's id and
    /// `password` its HMAC (`tokenauth`).
    pub delegation_token: bool,
    pub kerberos: Option<crate::security::kerberos::client::KerberosLogin>,
}

impl std::fmt::Debug for SaslLogin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the password, in logs or panics.
        f.debug_struct("SaslLogin").field("mechanism", &self.mechanism).field("username", &self.username).finish()
    }
}

/// How to reach a broker: the resolved settings, certificates loaded.
#[derive(Debug, Clone)]
pub struct ClientSecurity {
    pub protocol: SecurityProtocol,
    /// SSL and SASL_SSL.
    pub tls: Option<Arc<rustls::ClientConfig>>,
    /// SASL_PLAINTEXT and SASL_SSL.
    pub sasl: Option<SaslLogin>,
    /// The TLS handshake and the SASL exchange must finish within this long.
    pub handshake_timeout: Duration,
}

/// Largest SASL token (and whole response) accepted from a broker during
/// authentication: SCRAM and PLAIN answers are a few hundred bytes.
pub const MAX_TOKEN_BYTES: usize = 64 * 1024;

impl ClientSecurity {
    /// No TLS, no SASL (kcoord's original behaviour).
    pub fn plaintext() -> ClientSecurity {
        ClientSecurity {
            protocol: SecurityProtocol::Plaintext,
            tls: None,
            sasl: None,
            handshake_timeout: Duration::from_secs(30),
        }
    }

    /// Whether bytes can move between this connection's socket and another
    /// without decryption (splice needs plain sockets).
    pub fn is_plain(&self) -> bool {
        self.tls.is_none()
    }

    /// Builds the settings into a connector: reads the CA, the client
    /// certificate and key, and the password file.
    pub fn from_config(c: &ClientSecurityConfig) -> Result<ClientSecurity, String> {
        let c = c.resolved()?;
        let protocol = match c.security_protocol.as_str() {
            "" => SecurityProtocol::Plaintext,
            p => SecurityProtocol::parse(&p.to_ascii_uppercase()).ok_or_else(|| {
                format!("security.protocol {p:?}: expected PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL")
            })?,
        };
        let tls = match protocol.uses_tls() {
            true => Some(Arc::new(verify::client_config(&c)?)),
            false => None,
        };
        let sasl = match protocol.uses_sasl() {
            false => None,
            true => {
                let mechanism = Mechanism::parse(&c.sasl_mechanism.to_ascii_uppercase()).ok_or_else(|| {
                    format!(
                        "sasl.mechanism {:?}: expected PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER or GSSAPI",
                        c.sasl_mechanism
                    )
                })?;
                if c.sasl_tokenauth && !matches!(mechanism, Mechanism::Scram(_)) {
                    return Err(format!(
                        "sasl.tokenauth: delegation tokens log in with SCRAM-SHA-256 or SCRAM-SHA-512, not {}",
                        mechanism.name()
                    ));
                }
                if mechanism == Mechanism::OAuthBearer {
                    if c.sasl_oauthbearer_token_endpoint_url.is_empty() {
                        return Err("OAUTHBEARER needs sasl.oauthbearer.token.endpoint.url".into());
                    }
                    let tokens = oauth::TokenSource::from_config(&c)?;
                    Some(SaslLogin {
                        mechanism,
                        username: String::new(),
                        password: String::new(),
                        tokens: Some(Arc::new(tokens)),
                        oauth_extensions: settings::oauth_extensions(&c.sasl_oauthbearer_extensions)?,
                        delegation_token: false,
                        kerberos: None,
                    })
                } else if mechanism == Mechanism::Gssapi {
                    crate::security::kerberos::library::available()?;
                    let given = |s: &String| (!s.is_empty()).then(|| s.clone());
                    Some(SaslLogin {
                        mechanism,
                        username: String::new(),
                        password: String::new(),
                        tokens: None,
                        oauth_extensions: Vec::new(),
                        delegation_token: false,
                        kerberos: Some(crate::security::kerberos::client::KerberosLogin {
                            service_name: c.sasl_kerberos_service_name.clone(),
                            principal: given(&c.sasl_kerberos_principal),
                            keytab: given(&c.sasl_kerberos_keytab),
                        }),
                    })
                } else {
                    if c.sasl_username.is_empty() {
                        return Err(format!("{} needs sasl.username", protocol.name()));
                    }
                    let password = c.password()?;
                    Some(SaslLogin {
                        mechanism,
                        username: c.sasl_username.clone(),
                        password,
                        tokens: None,
                        oauth_extensions: Vec::new(),
                        delegation_token: c.sasl_tokenauth,
                        kerberos: None,
                    })
                }
            }
        };
        Ok(ClientSecurity {
            protocol,
            tls,
            sasl,
            handshake_timeout: Duration::from_millis(c.handshake_timeout_ms.max(1)),
        })
    }

    /// Reads a Kafka-style client configuration file (`--command-config`).
    pub fn from_file(path: &std::path::Path) -> Result<ClientSecurity, String> {
        Self::from_config(&ClientSecurityConfig::from_file(path)?)
    }
}
