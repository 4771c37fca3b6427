//! Authentication: named listeners with Kafka's security protocols, TLS,
//! SASL (PLAIN, SCRAM-SHA-256/512, OAUTHBEARER, GSSAPI) and the credentials and
//! keys they check.
//!
//! The per-connection state machine lives in [`sasl`]; the connection loop
//! asks it whether a frame may be served and hands it the SASL frames.
//! Principals use Kafka's form, `User:<name>`, so ACLs can follow.

pub mod acl;
pub mod client;
pub mod credentials;
pub mod delegation_tokens;
pub mod http_client;
pub mod java_regex;
pub mod jwt;
pub mod kerberos;
pub mod keystore;
pub mod listeners;
pub mod oauthbearer;
pub mod pem;
pub mod plain;
pub mod remote_jwks;
pub mod sasl;
pub mod sasl_relay;
pub mod scram;
pub mod scram_users;
pub mod ssl_principal;
pub mod tls;
pub mod tls_policy;
pub mod watched_file;

/// The principal of a connection that did not authenticate (PLAINTEXT, or
/// SSL without a client certificate), as Kafka's `KafkaPrincipal.ANONYMOUS`.
pub const ANONYMOUS: &str = "User:ANONYMOUS";

/// Fills `buf` from the operating system's random source.
#[allow(
    clippy::panic,
    reason = "Without entropy no nonce, salt or id is safe to hand out: stopping is the only correct answer, and it does not depend on any request's content."
)]
pub fn random_bytes(buf: &mut [u8]) {
    if let Err(e) = getrandom::getrandom(buf) {
        // No entropy source at all: nothing secure can be done.
        panic!("the operating system's random source failed: {e}");
    }
}

/// How one listener authenticates its connections.
#[derive(Debug)]
pub struct ListenerSecurity {
    /// The listener's name (`PLAINTEXT`, `SASL_SSL`, or a mapped name).
    pub name: String,
    pub protocol: listeners::SecurityProtocol,
    /// SSL and SASL_SSL listeners.
    pub tls: Option<std::sync::Arc<tls::TlsContext>>,
    /// SASL_PLAINTEXT and SASL_SSL listeners.
    pub sasl: Option<std::sync::Arc<sasl::SaslSettings>>,
    /// A TLS handshake and a SASL authentication must finish within this
    /// long after accept.
    pub handshake_timeout: std::time::Duration,
}

impl ListenerSecurity {
    /// kcoord's original listener: no TLS, no SASL.
    pub fn plaintext() -> std::sync::Arc<ListenerSecurity> {
        std::sync::Arc::new(ListenerSecurity {
            name: "PLAINTEXT".into(),
            protocol: listeners::SecurityProtocol::Plaintext,
            tls: None,
            sasl: None,
            handshake_timeout: std::time::Duration::from_secs(10),
        })
    }
}

/// The daemon's reloadable security material and each listener's settings.
#[derive(Debug, Default)]
pub struct SecurityRuntime {
    /// One per distinct TLS configuration the listeners use.
    pub tls: Vec<std::sync::Arc<tls::TlsContext>>,
    /// Loaded when a listener uses SASL.
    pub credentials: Option<std::sync::Arc<credentials::CredentialStore>>,
    /// The OAUTHBEARER signing keys, when a SASL listener offers it with a
    /// JWKS file.
    pub jwks: Option<std::sync::Arc<oauthbearer::JwksStore>>,
    /// The OAUTHBEARER signing keys, when they are fetched from the
    /// identity provider (refreshed by [`Self::watch_files`]).
    pub remote_jwks: Option<std::sync::Arc<remote_jwks::RemoteJwks>>,
    /// The ACL file, when the authorizer is enabled.
    pub acls: Option<std::sync::Arc<acl::AclStore>>,
    /// The delegation tokens, when `security.delegation_token_secret_key`
    /// is set.
    pub tokens: Option<std::sync::Arc<delegation_tokens::DelegationTokens>>,
}

impl SecurityRuntime {
    /// Loads the certificates and credentials the listeners need, and gives
    /// each listener its settings (in `specs` order): `[security]` with the
    /// listener's own overrides (`[security.listener.NAME]`). Listeners with
    /// the same TLS settings share one TLS context.
    pub async fn build(
        config: &crate::config::Config,
        specs: &[listeners::ListenerSpec],
    ) -> Result<(SecurityRuntime, Vec<std::sync::Arc<ListenerSecurity>>), String> {
        use std::sync::Arc;
        let sec = &config.security;
        let effective: Vec<crate::config::SecurityConfig> = specs.iter().map(|l| sec.for_listener(&l.name)).collect();
        let mut tls: Vec<Arc<tls::TlsContext>> = Vec::new();
        let mut tls_of = Vec::with_capacity(specs.len());
        for (l, eff) in specs.iter().zip(&effective) {
            if !l.protocol.uses_tls() {
                tls_of.push(None);
                continue;
            }
            let files = tls::TlsFiles::from_config(eff);
            let context = match tls.iter().find(|t| t.files() == &files) {
                Some(t) => t.clone(),
                None => {
                    let t = Arc::new(tls::TlsContext::load(files).map_err(|e| format!("listener {}: {e}", l.name))?);
                    tls.push(t.clone());
                    t
                }
            };
            tls_of.push(Some(context));
        }
        let relay = config.sidecar.relays_authentication();
        let tokens = match sec.delegation_token_secret_key.is_empty() {
            true => None,
            false => Some(Arc::new(delegation_tokens::DelegationTokens::open(
                &config.storage.data_dir,
                delegation_tokens::TokenSettings {
                    secret_key: sec.delegation_token_secret_key.clone(),
                    max_lifetime_ms: sec.delegation_token_max_lifetime_ms,
                    renew_ms: sec.delegation_token_expiry_time_ms,
                },
            )?)),
        };
        let sasl_mechanisms: Vec<&String> = specs
            .iter()
            .zip(&effective)
            .filter(|(l, _)| l.protocol.uses_sasl())
            .flat_map(|(_, eff)| eff.sasl_enabled_mechanisms.iter())
            .collect();
        let credentials = match specs.iter().any(|l| l.protocol.uses_sasl()) {
            true => {
                let path = (!sec.credentials_file.is_empty()).then(|| std::path::PathBuf::from(&sec.credentials_file));
                let passwords = sasl_mechanisms.iter().any(|m| *m != sasl::OAUTHBEARER && *m != kerberos::GSSAPI);
                if path.is_none() && passwords && !relay {
                    tracing::warn!(
                        "a SASL listener without security.credentials_file: every PLAIN and SCRAM login fails"
                    );
                }
                Some(Arc::new(credentials::open_store(path)?))
            }
            false => None,
        };
        // A relaying sidecar checks no token or ticket itself.
        let oauth = match sasl_mechanisms.iter().any(|m| *m == sasl::OAUTHBEARER) && credentials.is_some() && !relay {
            true => Some(Arc::new(oauthbearer::OAuthSettings::from_config(sec).await?)),
            false => None,
        };
        let kerberos = match sasl_mechanisms.iter().any(|m| *m == kerberos::GSSAPI) && credentials.is_some() && !relay {
            true => Some(Arc::new(kerberos::server::KerberosSettings::new(
                &sec.sasl_kerberos_keytab,
                &sec.sasl_kerberos_principal,
                &sec.sasl_kerberos_service_name,
                &sec.sasl_kerberos_principal_to_local_rules,
            )?)),
            false => None,
        };
        let jwks = oauth.as_ref().and_then(|o| match &o.keys {
            oauthbearer::Keys::Jwks(store) => Some(store.clone()),
            _ => None,
        });
        let remote_jwks = oauth.as_ref().and_then(|o| match &o.keys {
            oauthbearer::Keys::Remote(remote) => Some(remote.clone()),
            _ => None,
        });
        let per_listener = specs
            .iter()
            .zip(effective)
            .zip(tls_of)
            .map(|((l, eff), tls)| {
                let sasl = credentials.as_ref().filter(|_| l.protocol.uses_sasl()).map(|c| {
                    Arc::new(sasl::SaslSettings {
                        mechanisms: eff.sasl_enabled_mechanisms.clone(),
                        credentials: c.clone(),
                        max_reauth_ms: eff.connections_max_reauth_ms,
                        failure_delay: std::time::Duration::from_millis(sec.connection_failed_authentication_delay_ms),
                        max_receive_bytes: sec.sasl_max_receive_bytes,
                        oauth: oauth.clone(),
                        kerberos: kerberos.clone(),
                        tokens: tokens.clone(),
                        relay: relay
                            .then(|| sasl_relay::RelaySettings { sub_claim: sec.oauthbearer_sub_claim_name.clone() }),
                    })
                });
                Arc::new(ListenerSecurity {
                    name: l.name.clone(),
                    protocol: l.protocol,
                    tls,
                    sasl,
                    handshake_timeout: std::time::Duration::from_millis(sec.authentication_timeout_ms),
                })
            })
            .collect();
        Ok((SecurityRuntime { tls, credentials, jwks, remote_jwks, acls: None, tokens }, per_listener))
    }

    /// Reads the certificate files, the credentials file and the ACL file
    /// again (SIGHUP).
    /// What fails to load is logged, and the previous material stays.
    pub fn reload(&self) {
        for t in &self.tls {
            if let Err(e) = t.reload() {
                tracing::error!(error = %e, "cannot reload the TLS certificate; the previous one stays in use");
            }
        }
        if let Some(c) = &self.credentials {
            if let Err(e) = c.reload() {
                tracing::error!(error = %e, "cannot reload the credentials file; the previous credentials stay");
            }
        }
        if let Some(j) = &self.jwks {
            if let Err(e) = j.reload() {
                tracing::error!(error = %e, "cannot reload the OAUTHBEARER JWKS file; the previous keys stay");
            }
        }
        if let Some(a) = &self.acls {
            if let Err(e) = a.reload() {
                tracing::error!(error = %e, "cannot reload the ACL file; the previous ACLs stay in force");
            }
        }
    }

    /// Reloads the credentials, ACL and TLS files whenever they change
    /// (checked every two seconds), and fetches the OAUTHBEARER key set when
    /// due, until shutdown.
    pub async fn watch_files(self: std::sync::Arc<Self>, mut shutdown: tokio::sync::watch::Receiver<bool>) {
        let mut tick = tokio::time::interval(std::time::Duration::from_secs(2));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = tick.tick() => {
                    if let Some(c) = &self.credentials {
                        c.reload_if_changed();
                    }
                    for t in &self.tls {
                        t.reload_if_changed();
                    }
                    if let Some(j) = &self.jwks {
                        j.reload_if_changed();
                    }
                    if let Some(r) = &self.remote_jwks {
                        r.refresh_if_due().await;
                    }
                    if let Some(a) = &self.acls {
                        a.reload_if_changed();
                    }
                }
                _ = shutdown.changed() => return,
            }
        }
    }
}
