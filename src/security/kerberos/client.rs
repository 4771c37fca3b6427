//! The initiator side of SASL/GSSAPI, for kcoord's own logins to a
//! Kerberized broker, step by step as Java's GSSAPI client: context
//! tokens for the service `<service>@<broker host>` until the context is
//! established (an empty token acknowledges the broker's last one), then
//! the broker's wrapped security-layer offer is answered with "none".
//!
//! Credentials: with a keytab, kcoord logs in as the principal itself into
//! a ticket cache of its own, and the library renews the tickets from the
//! keytab (librdkafka runs `kinit` for the same); without one, the
//! operator's ticket cache (`KRB5CCNAME`) is used as it is.

use super::library::{Context, Credential, Name, NameForm};

/// Who logs in, and to which service.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KerberosLogin {
    /// The broker's service name (Kafka: sasl.kerberos.service.name).
    pub service_name: String,
    /// The client principal; `None`: the keytab's or ticket cache's.
    pub principal: Option<String>,
    pub keytab: Option<String>,
}

enum Stage {
    Establishing,
    /// The context is up: the broker's next token is the offer.
    Negotiating,
    /// The choice went out; the broker's answer ends the exchange.
    Chosen,
}

pub struct GssapiClient {
    credential: Credential,
    target: Name,
    context: Context,
    stage: Stage,
}

impl GssapiClient {
    /// Logs in (a keytab login asks the KDC) and makes the first token for
    /// the broker at `host`. Blocking: run it off the async threads.
    pub fn start(login: &KerberosLogin, host: &str) -> Result<(GssapiClient, Vec<u8>), String> {
        let credential = Credential::initiator(login.principal.as_deref(), login.keytab.as_deref())?;
        let target = Name::import(&format!("{}@{host}", login.service_name), NameForm::HostBasedService)?;
        let mut client = GssapiClient { credential, target, context: Context::new()?, stage: Stage::Establishing };
        let first = client.establish(None)?;
        Ok((client, first))
    }

    /// Whether the broker's last answer ended the exchange.
    pub fn is_done(&self) -> bool {
        matches!(self.stage, Stage::Chosen)
    }

    /// The token answering the broker's `challenge`. Blocking.
    pub fn step(&mut self, challenge: &[u8]) -> Result<Vec<u8>, String> {
        match self.stage {
            Stage::Establishing => self.establish(Some(challenge)),
            Stage::Negotiating => {
                let offer = self.context.unwrap(challenge)?;
                let choice = self.context.wrap(&super::layer_choice(&offer)?)?;
                self.stage = Stage::Chosen;
                Ok(choice)
            }
            Stage::Chosen => Err("the broker sent a GSSAPI token after the exchange ended".into()),
        }
    }

    fn establish(&mut self, input: Option<&[u8]>) -> Result<Vec<u8>, String> {
        let step = self.context.initiate(&self.credential, &self.target, input)?;
        if step.established {
            self.stage = Stage::Negotiating;
        }
        Ok(step.token)
    }
}
