//! The client's side of SCRAM-SHA-256/512 (RFC 5802, RFC 7677), as Kafka's
//! `ScramSaslClient` runs it: client-first, client-final with the proof,
//! then the server's signature is checked, so a broker that does not know
//! the password cannot pass for one that does.
//!
//! Pure: the client nonce is passed in. The hashes, HMAC and PBKDF2 are the
//! server side's ([`crate::security::scram::ScramMechanism`]).

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine as _;
use subtle::ConstantTimeEq;

use crate::security::scram::ScramMechanism;

enum State {
    /// Waiting for the server-first-message.
    First,
    /// Waiting for the server-final-message, which must carry this signature.
    Final {
        server_signature: Vec<u8>,
    },
    Done,
}

pub struct ScramClient {
    mechanism: ScramMechanism,
    password: String,
    nonce: String,
    first_bare: String,
    state: State,
}

impl ScramClient {
    /// `nonce` must be printable ASCII without commas (see
    /// [`crate::security::scram::random_nonce`]).
    pub fn new(mechanism: ScramMechanism, username: &str, password: &str, nonce: String) -> ScramClient {
        let first_bare = format!("n={},r={nonce}", encode_saslname(username));
        ScramClient { mechanism, password: password.to_string(), nonce, first_bare, state: State::First }
    }

    /// Logs in with a delegation token (KIP-48): the user name is the
    /// token's id and the password its HMAC, and the client-first-message
    /// says so with the `tokenauth=true` extension, as Java's
    /// `ScramLoginModule` does with its `tokenauth` option.
    pub fn delegation_token(self) -> ScramClient {
        self.with_extensions(&[("tokenauth", "true")])
    }

    /// SCRAM extensions (`,key=value` after the nonce, as Kafka's
    /// `ClientFirstMessage` writes them); they are part of the
    /// client-first-message-bare, so the proof covers them.
    fn with_extensions(mut self, extensions: &[(&str, &str)]) -> ScramClient {
        for (key, value) in extensions {
            self.first_bare.push_str(&format!(",{key}={value}"));
        }
        self
    }

    /// The client-first-message (no channel binding, no authorization id).
    pub fn first_message(&self) -> Vec<u8> {
        format!("n,,{}", self.first_bare).into_bytes()
    }

    /// Answers the server-first-message with the client-final-message.
    pub fn final_message(&mut self, server_first: &[u8]) -> Result<Vec<u8>, String> {
        if !matches!(self.state, State::First) {
            return Err("unexpected SCRAM server-first-message".into());
        }
        self.state = State::Done;
        let text =
            std::str::from_utf8(server_first).map_err(|_| "the server-first-message is not UTF-8".to_string())?;
        let (mut nonce, mut salt, mut iterations) = (None, None, None);
        for attr in text.split(',') {
            if let Some(v) = attr.strip_prefix("r=") {
                nonce = Some(v);
            } else if let Some(v) = attr.strip_prefix("s=") {
                salt = B64.decode(v).ok();
            } else if let Some(v) = attr.strip_prefix("i=") {
                iterations = v.parse::<u32>().ok();
            } else if let Some(v) = attr.strip_prefix("e=") {
                return Err(format!("the broker refused SCRAM: {v}"));
            }
        }
        let bad = || format!("invalid SCRAM server-first-message {text:?}");
        let nonce = nonce.ok_or_else(bad)?;
        let salt = salt.ok_or_else(bad)?;
        let iterations = iterations.ok_or_else(bad)?;
        if !nonce.starts_with(&self.nonce) || nonce.len() == self.nonce.len() {
            return Err("the SCRAM server nonce does not extend the client nonce".into());
        }
        // Below the minimum the exchange is weak (Kafka's client refuses it
        // too); above the maximum a hostile broker could make us spin.
        if !(ScramMechanism::MIN_ITERATIONS..=ScramMechanism::MAX_ITERATIONS).contains(&iterations) {
            return Err(format!(
                "SCRAM iterations {iterations} outside {}..={}",
                ScramMechanism::MIN_ITERATIONS,
                ScramMechanism::MAX_ITERATIONS
            ));
        }
        let m = self.mechanism;
        let salted = m.salted_password(self.password.as_bytes(), &salt, iterations);
        let client_key = m.hmac(&salted, b"Client Key");
        let stored_key = m.hash(&client_key);
        // "biws" is base64 of the gs2 header "n,,".
        let without_proof = format!("c=biws,r={nonce}");
        let auth_message = format!("{},{text},{without_proof}", self.first_bare);
        let signature = m.hmac(&stored_key, auth_message.as_bytes());
        let proof: Vec<u8> = client_key.iter().zip(&signature).map(|(a, b)| a ^ b).collect();
        let server_signature = m.hmac(&m.hmac(&salted, b"Server Key"), auth_message.as_bytes());
        self.state = State::Final { server_signature };
        Ok(format!("{without_proof},p={}", B64.encode(proof)).into_bytes())
    }

    /// Checks the server-final-message: the broker proves it knows the
    /// credential.
    pub fn verify_final(&mut self, server_final: &[u8]) -> Result<(), String> {
        let State::Final { server_signature } = std::mem::replace(&mut self.state, State::Done) else {
            return Err("unexpected SCRAM server-final-message".into());
        };
        let text = String::from_utf8_lossy(server_final);
        if let Some(e) = text.strip_prefix("e=") {
            return Err(format!("the broker refused SCRAM: {e}"));
        }
        let v = text
            .split(',')
            .find_map(|a| a.strip_prefix("v="))
            .ok_or("the SCRAM server-final-message has no signature")?;
        let got = B64.decode(v).map_err(|_| "the SCRAM server signature is not base64".to_string())?;
        if !bool::from(got.ct_eq(&server_signature)) {
            return Err("the broker's SCRAM signature is wrong: it does not know this user's credential".into());
        }
        Ok(())
    }
}

/// RFC 5802 saslname: `,` is `=2C` and `=` is `=3D`.
fn encode_saslname(name: &str) -> String {
    name.replace('=', "=3D").replace(',', "=2C")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::security::scram::{ScramCredential, ScramServer, ScramStep};

    #[test]
    fn rfc7677_test_vector() {
        let mut c = ScramClient::new(ScramMechanism::Sha256, "user", "pencil", "rOprNGfwEbeRWgbNEkqO".into());
        assert_eq!(c.first_message(), b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO");
        let server_first = b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096";
        let fin = c.final_message(server_first).unwrap();
        assert_eq!(
            String::from_utf8(fin).unwrap(),
            "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
        );
        assert_eq!(c.verify_final(b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="), Ok(()));
    }

    fn exchange(mech: ScramMechanism, stored: &str, password: &str) -> (Result<ScramStep, String>, ScramClient) {
        let cred = ScramCredential::derive(mech, stored, b"salt".to_vec(), 4096);
        let lookup = |u: &str| (u == "a,b=c").then(|| cred.clone());
        let mut server = ScramServer::new(mech);
        let mut client = ScramClient::new(mech, "a,b=c", password, "cnonce".into());
        let ScramStep::Challenge(first) = server.step(&client.first_message(), &lookup, "snonce").unwrap() else {
            panic!("expected a challenge")
        };
        let fin = client.final_message(&first).unwrap();
        (server.step(&fin, &lookup, "").map_err(|e| format!("{e:?}")), client)
    }

    #[test]
    fn the_client_and_the_server_agree_with_either_mechanism_and_odd_user_names() {
        for mech in ScramMechanism::ALL {
            let (done, mut client) = exchange(mech, "pw", "pw");
            let Ok(ScramStep::Done { username, response, .. }) = done else { panic!("{done:?}") };
            assert_eq!(username, "a,b=c");
            assert_eq!(client.verify_final(&response), Ok(()));
        }
    }

    #[test]
    fn a_server_signature_from_another_credential_is_refused() {
        let (_, mut client) = exchange(ScramMechanism::Sha512, "pw", "pw");
        let forged = format!("v={}", B64.encode([0u8; 64]));
        assert!(client.verify_final(forged.as_bytes()).unwrap_err().contains("signature is wrong"));
    }

    #[test]
    fn extensions_are_sent_after_the_nonce_and_covered_by_the_proof() {
        let mech = ScramMechanism::Sha256;
        let cred = ScramCredential::derive(mech, "pw", b"salt".to_vec(), 4096);
        let lookup = |u: &str| (u == "u").then(|| cred.clone());
        let mut client = ScramClient::new(mech, "u", "pw", "cnonce".into()).with_extensions(&[("k", "v")]);
        assert_eq!(client.first_message(), b"n,,n=u,r=cnonce,k=v");
        let mut server = ScramServer::new(mech);
        let ScramStep::Challenge(first) = server.step(&client.first_message(), &lookup, "snonce").unwrap() else {
            panic!("expected a challenge")
        };
        let fin = client.final_message(&first).unwrap();
        assert!(matches!(server.step(&fin, &lookup, ""), Ok(ScramStep::Done { .. })));
        // A server that read the first message without the extension
        // computes another proof.
        let mut server = ScramServer::new(mech);
        let mut client = ScramClient::new(mech, "u", "pw", "cnonce".into()).with_extensions(&[("k", "v")]);
        let ScramStep::Challenge(first) = server.step(b"n,,n=u,r=cnonce", &lookup, "snonce").unwrap() else {
            panic!("expected a challenge")
        };
        let fin = client.final_message(&first).unwrap();
        assert!(server.step(&fin, &lookup, "").is_err());
    }

    #[test]
    fn a_delegation_token_login_says_tokenauth_as_javas_scram_login_module_does() {
        let client = ScramClient::new(ScramMechanism::Sha512, "t0k3n", "hmac", "cnonce".into()).delegation_token();
        assert_eq!(client.first_message(), b"n,,n=t0k3n,r=cnonce,tokenauth=true");
        assert_eq!(
            crate::security::scram::client_first_login(&client.first_message()),
            Ok(("t0k3n".to_string(), true))
        );
        // A server that knows the token authenticates its owner; the
        // token's HMAC is not the password of a user named like it.
        let mech = ScramMechanism::Sha512;
        let token = ScramCredential::derive(mech, "hmac", b"salt".to_vec(), 4096);
        let tokens = |id: &str| (id == "t0k3n").then(|| (token.clone(), "carol".to_string()));
        let users = |_: &str| Some(ScramCredential::derive(mech, "other", b"salt".to_vec(), 4096));
        for (delegation, expected) in [(true, Some("carol")), (false, None)] {
            let mut client = ScramClient::new(mech, "t0k3n", "hmac", "cnonce".into());
            if delegation {
                client = client.delegation_token();
            }
            let mut server = ScramServer::new(mech);
            let ScramStep::Challenge(first) =
                server.step_with_tokens(&client.first_message(), &users, &tokens, "snonce").unwrap()
            else {
                panic!("expected a challenge")
            };
            let fin = client.final_message(&first).unwrap();
            let done = server.step_with_tokens(&fin, &users, &tokens, "");
            let name = match done {
                Ok(ScramStep::Done { username, .. }) => Some(username),
                _ => None,
            };
            assert_eq!(name.as_deref(), expected, "tokenauth: {delegation}");
        }
    }

    #[test]
    fn hostile_server_first_messages_are_refused() {
        for junk in [
            &b"r=other,s=c2FsdA==,i=4096"[..],
            b"r=cnonce,s=c2FsdA==,i=4096",
            b"r=cnonceX,s=c2FsdA==,i=100",
            b"r=cnonceX,s=c2FsdA==,i=99999999",
            b"r=cnonceX,i=4096",
            b"e=unknown-user",
            b"\xff",
        ] {
            let mut c = ScramClient::new(ScramMechanism::Sha256, "u", "p", "cnonce".into());
            assert!(c.final_message(junk).is_err(), "{junk:?}");
        }
    }
}
