//! SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677), server side, as
//! Kafka's `ScramSaslServer` runs them.
//!
//! Pure: the exchange is a state machine fed client messages; randomness
//! (the server nonce) is passed in, so tests are deterministic. Only the
//! salted credential is ever stored (salt, iterations, StoredKey,
//! ServerKey); the password never is.

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine as _;
use hmac::{Hmac, Mac};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256, Sha512};
use subtle::ConstantTimeEq;

/// The two SCRAM mechanisms Kafka supports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ScramMechanism {
    Sha256,
    Sha512,
}

impl ScramMechanism {
    pub const ALL: [ScramMechanism; 2] = [ScramMechanism::Sha256, ScramMechanism::Sha512];

    /// The SASL mechanism name.
    pub fn name(self) -> &'static str {
        match self {
            ScramMechanism::Sha256 => "SCRAM-SHA-256",
            ScramMechanism::Sha512 => "SCRAM-SHA-512",
        }
    }

    pub fn from_name(name: &str) -> Option<ScramMechanism> {
        Self::ALL.into_iter().find(|m| m.name() == name)
    }

    /// Kafka's bounds (`ScramMechanism.minIterations/maxIterations`).
    pub const MIN_ITERATIONS: u32 = 4096;
    pub const MAX_ITERATIONS: u32 = 16384;

    /// HMAC of the mechanism's hash (also used by the client side).
    #[allow(clippy::expect_used, reason = "HMAC takes keys of any length, so building one cannot fail.")]
    pub(crate) fn hmac(self, key: &[u8], data: &[u8]) -> Vec<u8> {
        match self {
            ScramMechanism::Sha256 => {
                let mut m = <Hmac<Sha256> as Mac>::new_from_slice(key).expect("HMAC takes keys of any length");
                m.update(data);
                m.finalize().into_bytes().to_vec()
            }
            ScramMechanism::Sha512 => {
                let mut m = <Hmac<Sha512> as Mac>::new_from_slice(key).expect("HMAC takes keys of any length");
                m.update(data);
                m.finalize().into_bytes().to_vec()
            }
        }
    }

    pub(crate) fn hash(self, data: &[u8]) -> Vec<u8> {
        match self {
            ScramMechanism::Sha256 => Sha256::digest(data).to_vec(),
            ScramMechanism::Sha512 => Sha512::digest(data).to_vec(),
        }
    }

    /// Hi(password, salt, i) of RFC 5802: PBKDF2 with HMAC of the hash.
    pub(crate) fn salted_password(self, password: &[u8], salt: &[u8], iterations: u32) -> Vec<u8> {
        match self {
            ScramMechanism::Sha256 => {
                let mut out = vec![0u8; 32];
                pbkdf2::pbkdf2_hmac::<Sha256>(password, salt, iterations, &mut out);
                out
            }
            ScramMechanism::Sha512 => {
                let mut out = vec![0u8; 64];
                pbkdf2::pbkdf2_hmac::<Sha512>(password, salt, iterations, &mut out);
                out
            }
        }
    }
}

/// What the server keeps for one user and mechanism.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScramCredential {
    #[serde(with = "b64")]
    pub salt: Vec<u8>,
    #[serde(with = "b64")]
    pub stored_key: Vec<u8>,
    #[serde(with = "b64")]
    pub server_key: Vec<u8>,
    pub iterations: u32,
}

mod b64 {
    use super::*;
    pub fn serialize<S: serde::Serializer>(v: &[u8], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&B64.encode(v))
    }
    pub fn deserialize<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        let s = String::deserialize(d)?;
        B64.decode(s.as_bytes()).map_err(serde::de::Error::custom)
    }
}

impl ScramCredential {
    /// Derives the stored credential from a password (what `kcoord users
    /// add` does; the password itself is then forgotten).
    pub fn derive(mechanism: ScramMechanism, password: &str, salt: Vec<u8>, iterations: u32) -> ScramCredential {
        let salted = mechanism.salted_password(password.as_bytes(), &salt, iterations);
        ScramCredential::from_salted_password(mechanism, salt, &salted, iterations)
    }

    /// The credential of a salted password (RFC 5802's `SaltedPassword`),
    /// as Kafka's AlterUserScramCredentials carries it: the client salts
    /// and hashes, so the password never travels.
    pub fn from_salted_password(
        mechanism: ScramMechanism,
        salt: Vec<u8>,
        salted: &[u8],
        iterations: u32,
    ) -> ScramCredential {
        let client_key = mechanism.hmac(salted, b"Client Key");
        let stored_key = mechanism.hash(&client_key);
        let server_key = mechanism.hmac(salted, b"Server Key");
        ScramCredential { salt, stored_key, server_key, iterations }
    }

    /// Whether `password` is the one this credential was derived from
    /// (SASL/PLAIN is checked this way: no plain password is stored).
    /// Costs one PBKDF2 run of `iterations` rounds.
    pub fn matches_password(&self, mechanism: ScramMechanism, password: &str) -> bool {
        let again = ScramCredential::derive(mechanism, password, self.salt.clone(), self.iterations);
        bool::from(again.stored_key.ct_eq(&self.stored_key))
    }
}

/// Why an exchange failed. `Generic` failures reach the client only as
/// Kafka's "invalid credentials" message (they may reveal whether a user
/// exists); `Specific` ones carry their message to the client, as Kafka's
/// `SaslAuthenticationException` does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ScramError {
    Generic(String),
    Specific(String),
}

/// Finds a delegation token by its id: the SCRAM credential derived from
/// its HMAC, and the name of its owner.
pub type TokenLookup<'a> = dyn Fn(&str) -> Option<(ScramCredential, String)> + 'a;

/// One step's result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ScramStep {
    /// Send this challenge (server-first-message) and wait for the next token.
    Challenge(Vec<u8>),
    /// Authenticated as `username` (a token's owner for a token login,
    /// whose id is `token`); send the server-final-message.
    Done { username: String, response: Vec<u8>, token: Option<String> },
}

enum State {
    ClientFirst,
    /// Boxed: the other states are empty.
    ClientFinal(Box<AwaitingFinal>),
    Finished,
}

/// What the client-final-message is checked against.
struct AwaitingFinal {
    username: String,
    token: Option<String>,
    credential: ScramCredential,
    nonce: String,
    gs2_header: String,
    first_bare: String,
    server_first: String,
}

/// The server's side of one exchange.
pub struct ScramServer {
    mechanism: ScramMechanism,
    state: State,
}

impl ScramServer {
    pub fn new(mechanism: ScramMechanism) -> Self {
        ScramServer { mechanism, state: State::ClientFirst }
    }

    /// Feeds the next client message. `lookup` finds a user's credential;
    /// `server_nonce` is used for the first message. Any error ends the
    /// exchange. No delegation token is known here, so every token login
    /// fails as Kafka fails a token it does not know
    /// ([`Self::step_with_tokens`] knows tokens).
    pub fn step(
        &mut self,
        message: &[u8],
        lookup: &dyn Fn(&str) -> Option<ScramCredential>,
        server_nonce: &str,
    ) -> Result<ScramStep, ScramError> {
        self.step_with_tokens(message, lookup, &|_| None, server_nonce)
    }

    /// [`Self::step`] for a server that knows delegation tokens: `tokens`
    /// finds a token's credential (derived from its HMAC) and its owner, who
    /// is the one a token login authenticates (Kafka's `ScramSaslServer`).
    pub fn step_with_tokens(
        &mut self,
        message: &[u8],
        lookup: &dyn Fn(&str) -> Option<ScramCredential>,
        tokens: &TokenLookup<'_>,
        server_nonce: &str,
    ) -> Result<ScramStep, ScramError> {
        let state = std::mem::replace(&mut self.state, State::Finished);
        let text = std::str::from_utf8(message).map_err(|_| ScramError::Generic("message is not UTF-8".into()))?;
        match state {
            State::ClientFirst => {
                let first = parse_client_first(text)?;
                let (credential, authenticated) = if first.token_authenticated {
                    // A delegation-token login (KIP-48): the name is the
                    // token's id; an unknown one fails here, as in Kafka.
                    let Some((credential, owner)) = tokens(&first.username) else {
                        return Err(ScramError::Generic(format!(
                            "Token Authentication failed: Invalid tokenId : {}",
                            first.username
                        )));
                    };
                    (Some(credential), owner)
                } else {
                    (lookup(&first.username), first.username.clone())
                };
                let Some(credential) = credential else {
                    return Err(ScramError::Generic("Authentication failed: Invalid user credentials".into()));
                };
                if let Some(authzid) = &first.authzid {
                    if *authzid != first.username {
                        return Err(ScramError::Specific(
                            "Authentication failed: Client requested an authorization id that is different from username"
                                .into(),
                        ));
                    }
                }
                if credential.iterations < ScramMechanism::MIN_ITERATIONS {
                    return Err(ScramError::Generic(format!(
                        "Iterations {} is less than the minimum {} for {}",
                        credential.iterations,
                        ScramMechanism::MIN_ITERATIONS,
                        self.mechanism.name()
                    )));
                }
                let nonce = format!("{}{}", first.nonce, server_nonce);
                let server_first = format!("r={nonce},s={},i={}", B64.encode(&credential.salt), credential.iterations);
                self.state = State::ClientFinal(Box::new(AwaitingFinal {
                    username: authenticated,
                    token: first.token_authenticated.then(|| first.username.clone()),
                    credential,
                    nonce,
                    gs2_header: first.gs2_header,
                    first_bare: first.bare,
                    server_first: server_first.clone(),
                }));
                Ok(ScramStep::Challenge(server_first.into_bytes()))
            }
            State::ClientFinal(awaiting) => {
                let AwaitingFinal { username, token, credential, nonce, gs2_header, first_bare, server_first } =
                    *awaiting;
                let fin = parse_client_final(text)?;
                // Kafka's ScramSaslServer checks that the nonce ends with the
                // server's (cnonce + snonce), not equality: librdkafka before
                // 2.6.1 (Debian's kcat among them) sends the client nonce
                // twice. The server's random part still has to come back.
                if !fin.nonce.ends_with(&nonce) {
                    return Err(ScramError::Generic("Invalid client nonce in the final client message.".into()));
                }
                if fin.channel_binding != B64.encode(gs2_header.as_bytes()) {
                    return Err(ScramError::Generic("Authentication failed: Invalid client final message".into()));
                }
                let auth_message = format!("{first_bare},{server_first},{}", fin.without_proof);
                let signature = self.mechanism.hmac(&credential.stored_key, auth_message.as_bytes());
                if fin.proof.len() != signature.len() {
                    return Err(ScramError::Generic("Invalid client credentials".into()));
                }
                let client_key: Vec<u8> = fin.proof.iter().zip(&signature).map(|(a, b)| a ^ b).collect();
                let computed = self.mechanism.hash(&client_key);
                if !bool::from(computed.ct_eq(&credential.stored_key)) {
                    return Err(ScramError::Generic("Invalid client credentials".into()));
                }
                let server_signature = self.mechanism.hmac(&credential.server_key, auth_message.as_bytes());
                let response = format!("v={}", B64.encode(server_signature)).into_bytes();
                Ok(ScramStep::Done { username, response, token })
            }
            State::Finished => Err(ScramError::Generic("Unexpected challenge in Sasl server state COMPLETE".into())),
        }
    }
}

struct ClientFirst {
    gs2_header: String,
    authzid: Option<String>,
    username: String,
    nonce: String,
    /// client-first-message-bare: what the AuthMessage starts with.
    bare: String,
    /// The `tokenauth=true` extension: the user name is a delegation
    /// token's id and the password its HMAC (KIP-48).
    token_authenticated: bool,
}

/// `gs2-header client-first-message-bare`, e.g. `n,,n=alice,r=abc`.
/// Extensions after the nonce (`key=value`) are read as Kafka's
/// ScramExtensions reads them: the last `tokenauth` wins, and it is true
/// when it says `true` in any case (Java's `Boolean.parseBoolean`); other
/// extensions are ignored.
fn parse_client_first(text: &str) -> Result<ClientFirst, ScramError> {
    let bad = || ScramError::Generic(format!("Invalid SCRAM client first message {text:?}"));
    let mut parts = text.splitn(3, ',');
    let cb = parts.next().ok_or_else(bad)?;
    let authz = parts.next().ok_or_else(bad)?;
    let bare = parts.next().ok_or_else(bad)?;
    if cb != "n" {
        // Kafka's pattern allows only "n": no channel binding ("p=...") and
        // no "y" (a client that could bind but thinks the server cannot).
        return Err(bad());
    }
    let authzid = match authz {
        "" => None,
        a => Some(decode_saslname(a.strip_prefix("a=").ok_or_else(bad)?).ok_or_else(bad)?),
    };
    let mut attrs = bare.split(',').peekable();
    // RFC 5802's reserved `m=` attribute, which Kafka's pattern allows
    // (and ignores) before the user name.
    if let Some(reserved) = attrs.next_if(|a| a.starts_with("m=")) {
        if reserved.len() == 2 || !reserved.bytes().all(|b| (0x01..=0x7f).contains(&b)) {
            return Err(bad());
        }
    }
    let username = decode_saslname(attrs.next().and_then(|a| a.strip_prefix("n=")).ok_or_else(bad)?).ok_or_else(bad)?;
    let nonce = attrs.next().and_then(|a| a.strip_prefix("r=")).ok_or_else(bad)?.to_string();
    if username.is_empty() || nonce.is_empty() || !nonce.bytes().all(|b| (0x21..=0x7e).contains(&b) && b != b',') {
        return Err(bad());
    }
    let mut token_authenticated = false;
    for extension in attrs {
        // Kafka's pattern: `,ALPHA=VALUE`, VALUE being ASCII without NUL
        // or comma; anything else fails the message.
        let (key, value) = extension.split_once('=').ok_or_else(bad)?;
        let ascii = |b: u8| (0x01..=0x7f).contains(&b);
        if key.is_empty()
            || !key.bytes().all(|b| b.is_ascii_alphabetic())
            || value.is_empty()
            || !value.bytes().all(ascii)
        {
            return Err(bad());
        }
        if key == "tokenauth" {
            token_authenticated = value.eq_ignore_ascii_case("true");
        }
    }
    Ok(ClientFirst {
        gs2_header: format!("{cb},{authz},"),
        authzid,
        username,
        nonce,
        bare: bare.to_string(),
        token_authenticated,
    })
}

/// The user name of a client-first message, and whether it names a
/// delegation token (`tokenauth=true`): what a relaying sidecar learns of
/// the client it lets the upstream authenticate.
pub fn client_first_login(message: &[u8]) -> Result<(String, bool), String> {
    let text = std::str::from_utf8(message).map_err(|_| "the SCRAM client first message is not UTF-8".to_string())?;
    match parse_client_first(text) {
        Ok(first) => Ok((first.username, first.token_authenticated)),
        Err(ScramError::Specific(m) | ScramError::Generic(m)) => Err(m),
    }
}

/// RFC 5802 saslname: `=2C` is `,` and `=3D` is `=`; any other `=` is an
/// error, and so is a character outside U+0001–U+007F, as in Kafka's
/// pattern (a user name with others cannot log in with SCRAM there).
fn decode_saslname(s: &str) -> Option<String> {
    if !s.bytes().all(|b| (0x01..=0x7f).contains(&b)) {
        return None;
    }
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(i) = rest.find('=') {
        out.push_str(&rest[..i]);
        let esc = rest.get(i..i + 3)?;
        out.push(match esc {
            "=2C" => ',',
            "=3D" => '=',
            _ => return None,
        });
        rest = &rest[i + 3..];
    }
    out.push_str(rest);
    Some(out)
}

struct ClientFinal {
    channel_binding: String,
    nonce: String,
    proof: Vec<u8>,
    without_proof: String,
}

/// `c=...,r=...[,extensions],p=...`.
fn parse_client_final(text: &str) -> Result<ClientFinal, ScramError> {
    let bad = || ScramError::Generic("Authentication failed: Invalid client final message".into());
    let (without_proof, proof) = text.rsplit_once(",p=").ok_or_else(bad)?;
    let mut attrs = without_proof.split(',');
    let channel_binding = attrs.next().and_then(|a| a.strip_prefix("c=")).ok_or_else(bad)?.to_string();
    let nonce = attrs.next().and_then(|a| a.strip_prefix("r=")).ok_or_else(bad)?.to_string();
    let proof = B64.decode(proof.as_bytes()).map_err(|_| bad())?;
    Ok(ClientFinal { channel_binding, nonce, proof, without_proof: without_proof.to_string() })
}

/// A fresh server nonce: printable, without commas.
pub fn random_nonce() -> String {
    let mut bytes = [0u8; 24];
    crate::security::random_bytes(&mut bytes);
    B64.encode(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The client side of the exchange, to test the server against.
    pub(crate) fn client_final(
        mech: ScramMechanism,
        password: &str,
        client_first_bare: &str,
        server_first: &str,
    ) -> (String, Vec<u8>) {
        client_final_with_nonce_prefix(mech, password, client_first_bare, server_first, "")
    }

    /// [`client_final`] with `prefix` before the nonce, as librdkafka before
    /// 2.6.1 sends it (its client nonce again).
    fn client_final_with_nonce_prefix(
        mech: ScramMechanism,
        password: &str,
        client_first_bare: &str,
        server_first: &str,
        prefix: &str,
    ) -> (String, Vec<u8>) {
        let mut salt = None;
        let mut iterations = 0;
        let mut nonce = "";
        for a in server_first.split(',') {
            if let Some(s) = a.strip_prefix("s=") {
                salt = Some(B64.decode(s).unwrap());
            } else if let Some(i) = a.strip_prefix("i=") {
                iterations = i.parse().unwrap();
            } else if let Some(r) = a.strip_prefix("r=") {
                nonce = r;
            }
        }
        let salted = mech.salted_password(password.as_bytes(), &salt.unwrap(), iterations);
        let client_key = mech.hmac(&salted, b"Client Key");
        let stored_key = mech.hash(&client_key);
        let without_proof = format!("c=biws,r={prefix}{nonce}");
        let auth = format!("{client_first_bare},{server_first},{without_proof}");
        let sig = mech.hmac(&stored_key, auth.as_bytes());
        let proof: Vec<u8> = client_key.iter().zip(&sig).map(|(a, b)| a ^ b).collect();
        let server_sig = mech.hmac(&mech.hmac(&salted, b"Server Key"), auth.as_bytes());
        (format!("{without_proof},p={}", B64.encode(proof)), server_sig)
    }

    fn run(mech: ScramMechanism, stored_password: &str, password: &str) -> Result<ScramStep, ScramError> {
        let cred = ScramCredential::derive(mech, stored_password, b"salty".to_vec(), 4096);
        let lookup = |u: &str| (u == "alice").then(|| cred.clone());
        let mut server = ScramServer::new(mech);
        let ScramStep::Challenge(first) = server.step(b"n,,n=alice,r=cnonce", &lookup, "snonce")? else {
            panic!("expected a challenge")
        };
        let first = String::from_utf8(first).unwrap();
        assert!(first.starts_with("r=cnoncesnonce,s="), "{first}");
        let (fin, server_sig) = client_final(mech, password, "n=alice,r=cnonce", &first);
        let step = server.step(fin.as_bytes(), &lookup, "unused")?;
        if let ScramStep::Done { response, .. } = &step {
            assert_eq!(response, format!("v={}", B64.encode(server_sig)).as_bytes());
        }
        Ok(step)
    }

    #[test]
    fn old_librdkafkas_doubled_client_nonce_is_accepted_as_kafka_accepts_it() {
        for prefix in ["cnonce", ""] {
            let mech = ScramMechanism::Sha512;
            let cred = ScramCredential::derive(mech, "pw", b"salty".to_vec(), 4096);
            let lookup = |u: &str| (u == "alice").then(|| cred.clone());
            let mut server = ScramServer::new(mech);
            let Ok(ScramStep::Challenge(first)) = server.step(b"n,,n=alice,r=cnonce", &lookup, "snonce") else {
                panic!("expected a challenge")
            };
            let first = String::from_utf8(first).unwrap();
            let (fin, _) = client_final_with_nonce_prefix(mech, "pw", "n=alice,r=cnonce", &first, prefix);
            let step = server.step(fin.as_bytes(), &lookup, "unused");
            assert!(matches!(step, Ok(ScramStep::Done { .. })), "prefix {prefix:?}");
        }
    }

    #[test]
    fn a_final_nonce_without_the_servers_part_is_refused() {
        let mech = ScramMechanism::Sha256;
        let cred = ScramCredential::derive(mech, "pw", b"salty".to_vec(), 4096);
        let lookup = |u: &str| (u == "alice").then(|| cred.clone());
        let mut server = ScramServer::new(mech);
        let Ok(ScramStep::Challenge(_)) = server.step(b"n,,n=alice,r=cnonce", &lookup, "snonce") else {
            panic!("expected a challenge")
        };
        // A client answering with its own nonce only (a replay of another exchange).
        let (fin, _) = client_final(mech, "pw", "n=alice,r=cnonce", "r=cnonce,s=c2FsdHk=,i=4096");
        assert!(matches!(server.step(fin.as_bytes(), &lookup, "unused"), Err(ScramError::Generic(_))));
    }

    #[test]
    fn the_right_password_authenticates_with_either_mechanism() {
        for mech in ScramMechanism::ALL {
            assert!(
                matches!(run(mech, "s3cret", "s3cret"), Ok(ScramStep::Done { username, .. }) if username == "alice")
            );
        }
    }

    #[test]
    fn a_wrong_password_fails_without_revealing_why() {
        for mech in ScramMechanism::ALL {
            assert!(matches!(run(mech, "s3cret", "guess"), Err(ScramError::Generic(_))));
        }
    }

    #[test]
    fn an_unknown_user_fails_at_the_first_message() {
        let mut server = ScramServer::new(ScramMechanism::Sha512);
        let r = server.step(b"n,,n=mallory,r=x", &|_| None, "s");
        assert_eq!(r, Err(ScramError::Generic("Authentication failed: Invalid user credentials".into())));
    }

    #[test]
    fn a_delegation_token_login_fails_at_the_first_message_as_kafka_fails_an_unknown_token() {
        // A server that knows no tokens: even a user's right password does not
        // log in when the client says it is a token.
        let cred = ScramCredential::derive(ScramMechanism::Sha512, "pw", b"s".to_vec(), 4096);
        for first in [
            &b"n,,n=alice,r=x,tokenauth=true"[..],
            b"n,,n=alice,r=x,tokenauth=TRUE",
            b"n,,n=alice,r=x,a=b,tokenauth=false,tokenauth=True",
        ] {
            let mut server = ScramServer::new(ScramMechanism::Sha512);
            let r = server.step(first, &|_| Some(cred.clone()), "s");
            assert_eq!(r, Err(ScramError::Generic("Token Authentication failed: Invalid tokenId : alice".into())));
        }
        for user in [&b"n,,n=alice,r=x,tokenauth=false"[..], b"n,,n=alice,r=x,tokenauth=yes", b"n,,n=alice,r=x,ext=1"] {
            let mut server = ScramServer::new(ScramMechanism::Sha512);
            assert!(matches!(server.step(user, &|_| Some(cred.clone()), "s"), Ok(ScramStep::Challenge(_))));
        }
        assert_eq!(client_first_login(b"n,,n=tok1,r=x,tokenauth=true"), Ok(("tok1".into(), true)));
        assert_eq!(client_first_login(b"n,,n=alice,r=x"), Ok(("alice".into(), false)));
        assert!(client_first_login(b"n,,n=alice,r=x,tokenauth").is_err());
    }

    #[test]
    fn a_different_authorization_id_is_refused_with_kafkas_message() {
        let cred = ScramCredential::derive(ScramMechanism::Sha256, "pw", b"s".to_vec(), 4096);
        let mut server = ScramServer::new(ScramMechanism::Sha256);
        let r = server.step(b"n,a=bob,n=alice,r=x", &|_| Some(cred.clone()), "s");
        assert!(matches!(r, Err(ScramError::Specific(m)) if m.contains("authorization id")));
    }

    #[test]
    fn garbage_messages_fail_cleanly() {
        for junk in [
            &b""[..],
            b",,,",
            b"p=tls,,n=a,r=b",
            b"n,,n=a",
            b"n,,n=a=,r=b",
            b"\xff\xfe",
            b"n,,r=x,n=a",
            b"n,,n=a,r=b,",
            b"n,,n=a,r=b,x1=y",
            b"n,,n=a,r=b,tokenauth=",
            // Kafka's pattern: only the "n" header, ASCII names.
            b"y,,n=a,r=b",
            "n,,n=jos\u{e9},r=b".as_bytes(),
            "n,a=jos\u{e9},n=a,r=b".as_bytes(),
            b"n,,n=a\x00,r=b",
            b"n,,m=,n=a,r=b",
        ] {
            // Every user is known: the message itself is what fails.
            let cred = ScramCredential::derive(ScramMechanism::Sha256, "pw", b"s".to_vec(), 4096);
            let mut server = ScramServer::new(ScramMechanism::Sha256);
            let r = server.step(junk, &|_| Some(cred.clone()), "s");
            assert!(
                matches!(&r, Err(ScramError::Generic(m)) if m.contains("client first message") || m.contains("UTF-8")),
                "{junk:?}: {r:?}"
            );
        }
    }

    #[test]
    fn a_reserved_attribute_before_the_name_is_allowed_as_in_kafka() {
        let cred = ScramCredential::derive(ScramMechanism::Sha256, "pw", b"s".to_vec(), 4096);
        let mut server = ScramServer::new(ScramMechanism::Sha256);
        let r = server.step(b"n,,m=ext,n=a,r=b", &|_| Some(cred.clone()), "s");
        assert!(matches!(r, Ok(ScramStep::Challenge(_))), "{r:?}");
    }

    #[test]
    fn saslnames_decode_commas_and_equals() {
        assert_eq!(decode_saslname("a=2Cb=3Dc").as_deref(), Some("a,b=c"));
        assert_eq!(decode_saslname("a=xx"), None);
    }

    #[test]
    fn plain_passwords_are_checked_against_the_salted_credential() {
        let cred = ScramCredential::derive(ScramMechanism::Sha512, "pw", b"salt".to_vec(), 4096);
        assert!(cred.matches_password(ScramMechanism::Sha512, "pw"));
        assert!(!cred.matches_password(ScramMechanism::Sha512, "pW"));
    }

    #[test]
    fn rfc7677_test_vector() {
        // RFC 7677 section 3: user "user", password "pencil".
        let salt = B64.decode("W22ZaJ0SNY7soEsUEjb6gQ==").unwrap();
        let cred = ScramCredential::derive(ScramMechanism::Sha256, "pencil", salt, 4096);
        let mut server = ScramServer::new(ScramMechanism::Sha256);
        let lookup = |_: &str| Some(cred.clone());
        let first =
            server.step(b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO", &lookup, "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0").unwrap();
        assert_eq!(
            first,
            ScramStep::Challenge(
                b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096".to_vec()
            )
        );
        let fin = b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=";
        let done = server.step(fin, &lookup, "").unwrap();
        assert_eq!(
            done,
            ScramStep::Done {
                username: "user".into(),
                response: b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=".to_vec(),
                token: None,
            }
        );
    }
}
