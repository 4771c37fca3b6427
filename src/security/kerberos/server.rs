//! The acceptor side of SASL/GSSAPI on a listener, step by step as Java's
//! GSSAPI server runs it under Kafka's `SaslServerAuthenticator`:
//!
//! 1. accept context tokens until the context is established; the last
//!    acceptor token (mutual authentication) goes back to the client, and
//!    the client's next (empty) token moves on. Without one, the offer
//!    goes out at once;
//! 2. send the wrapped security-layer offer (none);
//! 3. unwrap the client's choice; the session's principal is the client's
//!    Kerberos name through the principal-to-local rules, `User:<short>`.
//!
//! Every step is a few microseconds of crypto plus a read of the keytab
//! and the replay cache: the caller runs it off the connection threads.

use std::sync::Arc;

use super::library::{Context, Credential};
use super::short_name::ShortNamer;

/// A listener's Kerberos settings, checked at start.
#[derive(Debug)]
pub struct KerberosSettings {
    /// The keytab with the service's keys.
    pub keytab: String,
    /// The service principal to accept for; `None`: any key in the keytab.
    pub principal: Option<String>,
    pub names: ShortNamer,
}

impl KerberosSettings {
    /// Loads GSS-API, checks that the keytab gives acceptor credentials and
    /// that the rules parse.
    pub fn new(keytab: &str, principal: &str, service_name: &str, rules: &[String]) -> Result<Self, String> {
        if keytab.is_empty() {
            return Err("GSSAPI needs security.sasl_kerberos_keytab (the service's keytab)".into());
        }
        let principal = (!principal.is_empty()).then(|| principal.to_string());
        if let Some(p) = &principal {
            let primary = p.split(['/', '@']).next().unwrap_or_default();
            if primary != service_name {
                return Err(format!(
                    "security.sasl_kerberos_principal {p:?} is not a principal of the service \
                     security.sasl_kerberos_service_name = {service_name:?}"
                ));
            }
        }
        let realm = super::library::default_realm()?;
        let names = ShortNamer::new(rules, &realm)
            .map_err(|e| format!("security.sasl_kerberos_principal_to_local_rules: {e}"))?;
        Credential::acceptor(keytab, principal.as_deref())?;
        Ok(KerberosSettings { keytab: keytab.to_string(), principal, names })
    }
}

/// What a token produced.
#[derive(Debug, PartialEq, Eq)]
pub enum GssStep {
    /// Send this back and wait for the next token.
    Challenge(Vec<u8>),
    /// Authenticated as this short name; the last response is empty.
    Done(String),
}

enum Stage {
    Accepting,
    /// The acceptor's last context token went out; the client answers
    /// with an empty token before the offer.
    AwaitingAck,
    AwaitingChoice,
}

pub struct GssapiServer {
    settings: Arc<KerberosSettings>,
    credential: Option<Credential>,
    context: Option<Context>,
    stage: Stage,
    peer: String,
}

impl GssapiServer {
    pub fn new(settings: Arc<KerberosSettings>) -> GssapiServer {
        GssapiServer { settings, credential: None, context: None, stage: Stage::Accepting, peer: String::new() }
    }

    /// Runs one client token. An error's text is for the log: Kafka
    /// answers every GSSAPI failure with its generic message.
    pub fn step(&mut self, token: &[u8]) -> Result<GssStep, String> {
        match self.stage {
            Stage::Accepting => {
                // MIT's mechanism glue answers an empty token with "continue"
                // and nothing to send; Java's acceptor refuses it.
                if token.is_empty() {
                    return Err("an empty GSSAPI context token".into());
                }
                let credential = match self.credential.take() {
                    Some(c) => c,
                    None => Credential::acceptor(&self.settings.keytab, self.settings.principal.as_deref())?,
                };
                let context = match self.context.as_mut() {
                    Some(c) => c,
                    None => self.context.insert(Context::new()?),
                };
                let (step, peer) = context.accept(&credential, token)?;
                self.credential = Some(credential);
                if !step.established {
                    return Ok(GssStep::Challenge(step.token));
                }
                self.peer = peer.ok_or("the Kerberos context has no initiator name")?;
                if step.token.is_empty() {
                    self.offer()
                } else {
                    self.stage = Stage::AwaitingAck;
                    Ok(GssStep::Challenge(step.token))
                }
            }
            Stage::AwaitingAck => self.offer(),
            Stage::AwaitingChoice => {
                let context = self.context.as_ref().ok_or("no Kerberos context")?;
                // As Kafka's callback handler: a requested authorization id
                // is ignored and the session acts as the authenticated
                // principal.
                let authzid = super::chosen_authzid(&context.unwrap(token)?)?;
                if !authzid.is_empty() && authzid != self.peer {
                    tracing::debug!(peer = %self.peer, %authzid, "GSSAPI authorization id ignored");
                }
                Ok(GssStep::Done(self.settings.names.short_name(&self.peer)?))
            }
        }
    }

    fn offer(&mut self) -> Result<GssStep, String> {
        let context = self.context.as_ref().ok_or("no Kerberos context")?;
        let offer = context.wrap(&super::layer_offer())?;
        self.stage = Stage::AwaitingChoice;
        Ok(GssStep::Challenge(offer))
    }

    /// The client's Kerberos name, once the context is established.
    pub fn peer(&self) -> &str {
        &self.peer
    }
}
