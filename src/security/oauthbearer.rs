//! SASL/OAUTHBEARER (RFC 7628; Kafka's KIP-255 and KIP-768) on the server
//! side, as Kafka's `OAuthBearerSaslServer` runs it: the client's one
//! message carries `auth=Bearer <JWT>`; a valid token authenticates its
//! subject as `User:<sub>` until the token expires (the session lifetime
//! sent to the client, KIP-368), and an invalid one is answered with an
//! RFC 7628 error challenge (`{"status":"invalid_token"}`), which the
//! client acknowledges with `%x01` before the authentication fails.
//!
//! Tokens are validated as Kafka's broker-side `BrokerJwtValidator` does
//! (jose4j): a signature by a key of the configured JWKS, `exp` and `iat`
//! present, `exp` and `nbf` respected within the clock skew, `aud` among
//! the expected audiences (a token naming an audience is refused when none
//! is configured, as jose4j does), `iss` the expected issuer when one is
//! set, and the subject claim present. For development, Kafka's default
//! unsecured validator can be chosen instead: tokens with `"alg":"none"`
//! and no signature, `exp` and the subject checked, nothing else.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::Value;

use super::jwt::{JwkSet, Jws};
use super::remote_jwks::RemoteJwks;
use super::watched_file::WatchedFile;

/// The signing keys, from the JWKS file (reloaded when it changes).
pub type JwksStore = WatchedFile<JwkSet>;

/// Loads the JWKS file; a file without a usable key is an error, since no
/// token could ever pass.
pub fn open_jwks(path: PathBuf) -> Result<JwksStore, String> {
    fn load(path: &Path) -> Result<JwkSet, String> {
        let bytes = std::fs::read(path).map_err(|e| format!("JWKS file {}: {e}", path.display()))?;
        let set = JwkSet::parse(&bytes).map_err(|e| format!("JWKS file {}: {e}", path.display()))?;
        if set.keys.is_empty() {
            return Err(format!("JWKS file {}: no RSA or EC signing key", path.display()));
        }
        Ok(set)
    }
    JwksStore::open(Some(path), "OAUTHBEARER JWKS file", load, |path, set| {
        tracing::info!(path = %path.display(), keys = set.keys.len(), "OAUTHBEARER key set loaded");
    })
}

/// Where token signatures are checked.
#[derive(Debug)]
pub enum Keys {
    /// Signed tokens, checked against the keys of a JWKS file.
    Jwks(Arc<JwksStore>),
    /// Signed tokens, checked against the identity provider's key set.
    Remote(Arc<RemoteJwks>),
    /// Unsigned `"alg":"none"` tokens (development only).
    Unsecured,
}

/// How OAUTHBEARER tokens are validated.
#[derive(Debug)]
pub struct OAuthSettings {
    pub keys: Keys,
    /// The claim naming the principal (Kafka: sasl.oauthbearer.sub.claim.name).
    pub sub_claim: String,
    /// At least one must be in `aud` (Kafka: sasl.oauthbearer.expected.audience).
    pub expected_audience: Vec<String>,
    /// `iss` must equal it (Kafka: sasl.oauthbearer.expected.issuer).
    pub expected_issuer: Option<String>,
    /// Tolerance for `exp` and `nbf` (Kafka: sasl.oauthbearer.clock.skew.seconds).
    pub clock_skew_ms: i64,
}

impl OAuthSettings {
    /// The `security.oauthbearer_*` settings; loads or fetches the key set.
    pub async fn from_config(sec: &crate::config::SecurityConfig) -> Result<OAuthSettings, String> {
        let url = &sec.oauthbearer_jwks_endpoint_url;
        let keys = if sec.oauthbearer_allow_unsecured_jwt {
            tracing::warn!("OAUTHBEARER accepts unsigned tokens (security.oauthbearer_allow_unsecured_jwt): anyone can log in as anyone");
            Keys::Unsecured
        } else if let Some(path) = url.strip_prefix("file://") {
            Keys::Jwks(Arc::new(open_jwks(PathBuf::from(path))?))
        } else {
            let refresh = std::time::Duration::from_millis(sec.oauthbearer_jwks_endpoint_refresh_ms);
            Keys::Remote(RemoteJwks::open(url, &sec.oauthbearer_jwks_endpoint_ca_location, refresh).await?)
        };
        Ok(OAuthSettings {
            keys,
            sub_claim: sec.oauthbearer_sub_claim_name.clone(),
            expected_audience: sec.oauthbearer_expected_audience.clone(),
            expected_issuer: Some(sec.oauthbearer_expected_issuer.clone()).filter(|i| !i.is_empty()),
            clock_skew_ms: i64::from(sec.oauthbearer_clock_skew_seconds) * 1000,
        })
    }
}

impl OAuthSettings {
    /// Before a client's first message is validated: when the key set is
    /// the provider's and the token names a key id the set lacks, the set
    /// is fetched again (rate-limited), as a provider may have rotated.
    pub async fn prepare(&self, message: &[u8]) {
        let Keys::Remote(remote) = &self.keys else { return };
        let Ok(first) = parse_initial_response(message) else { return };
        let Ok(jws) = Jws::parse(&first.token) else { return };
        if let Some(kid) = jws.header.get("kid").and_then(Value::as_str) {
            remote.look_for(kid).await;
        }
    }
}

/// A token that passed: its principal's name and when it expires.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Validated {
    pub principal: String,
    pub expires_ms: i64,
}

impl OAuthSettings {
    /// Validates `token` at wall-clock time `now_ms`; the error says why
    /// (logged, not sent: the client gets the RFC 7628 status).
    pub fn validate(&self, token: &str, now_ms: i64) -> Result<Validated, String> {
        let jws = Jws::parse(token)?;
        let signed = match &self.keys {
            Keys::Jwks(store) => {
                jws.verify(&store.current())?;
                true
            }
            Keys::Remote(remote) => {
                jws.verify(&remote.current())?;
                true
            }
            Keys::Unsecured => {
                if jws.algorithm() != Some("none") || jws.is_signed() {
                    return Err("an unsecured JWS must have 'alg' 'none' and no signature".into());
                }
                false
            }
        };
        let claims = &jws.claims;
        let time = |name: &str| -> Result<Option<i64>, String> {
            match claims.get(name) {
                None => Ok(None),
                Some(Value::Number(n)) => n
                    .as_f64()
                    .map(|s| Some((s * 1000.0) as i64))
                    .ok_or_else(|| format!("the '{name}' claim is not a time")),
                Some(_) => Err(format!("the '{name}' claim is not a number")),
            }
        };
        let expires_ms = time("exp")?.ok_or("no expiration time ('exp') claim")?;
        let issued_ms = time("iat")?;
        if signed && issued_ms.is_none() {
            return Err("no issued-at ('iat') claim".into());
        }
        if now_ms >= expires_ms.saturating_add(self.clock_skew_ms) {
            return Err(format!("the token expired {} ms ago", now_ms - expires_ms));
        }
        if let Some(not_before) = time("nbf")? {
            if now_ms.saturating_add(self.clock_skew_ms) < not_before {
                return Err("the token is not valid yet ('nbf')".into());
            }
        }
        if signed {
            self.check_audience(claims.get("aud"))?;
            if let Some(issuer) = &self.expected_issuer {
                if claims.get("iss").and_then(Value::as_str) != Some(issuer.as_str()) {
                    return Err(format!("the issuer ('iss') is not '{issuer}'"));
                }
            }
        }
        let principal = match claims.get(&self.sub_claim) {
            Some(Value::String(s)) if !s.trim().is_empty() => s.trim().to_string(),
            _ => return Err(format!("no '{}' claim naming the principal", self.sub_claim)),
        };
        Ok(Validated { principal, expires_ms })
    }

    fn check_audience(&self, aud: Option<&Value>) -> Result<(), String> {
        let audiences: Vec<&str> = match aud {
            None => Vec::new(),
            Some(Value::String(a)) => vec![a.as_str()],
            Some(Value::Array(a)) => a.iter().filter_map(Value::as_str).collect(),
            Some(_) => return Err("the audience ('aud') claim is neither a string nor a list".into()),
        };
        match (aud.is_some(), self.expected_audience.is_empty()) {
            (false, true) => Ok(()),
            (true, true) => Err("the token names an audience ('aud') and security.oauthbearer_expected_audience \
                                 is empty (Kafka's validator refuses it too)"
                .into()),
            (false, false) => Err("no audience ('aud') claim".into()),
            (true, false) if audiences.iter().any(|a| self.expected_audience.iter().any(|e| e == a)) => Ok(()),
            (true, false) => Err(format!("the audience {audiences:?} is not an expected one")),
        }
    }
}

/// The client's first message: `n,[a=authzid],%x01auth=Bearer TOKEN%x01[key=value%x01...]%x01`.
#[derive(Debug, PartialEq, Eq)]
pub struct InitialResponse {
    pub authzid: String,
    pub token: String,
}

/// Parses the first message as Kafka's `OAuthBearerClientInitialResponse`
/// does; SASL extensions (other keys) are accepted and ignored, as Kafka
/// ignores those no callback validates.
pub fn parse_initial_response(message: &[u8]) -> Result<InitialResponse, String> {
    let invalid = || "Invalid OAUTHBEARER client first message".to_string();
    let text = std::str::from_utf8(message).map_err(|_| invalid())?;
    let rest = text.strip_prefix("n,").ok_or_else(invalid)?;
    let (authz, rest) = rest.split_once(',').ok_or_else(invalid)?;
    let authzid = match authz {
        "" => String::new(),
        a => {
            let name = a.strip_prefix("a=").filter(|n| !n.is_empty()).ok_or_else(invalid)?;
            // RFC 5801 saslname: ASCII without NUL; '=' only in =2C and =3D.
            let bare_equals = name.replace("=2C", "").replace("=3D", "").contains('=');
            if bare_equals || name.chars().any(|c| c == '\0' || !c.is_ascii()) {
                return Err(invalid());
            }
            name.replace("=2C", ",").replace("=3D", "=")
        }
    };
    let pairs = rest.strip_prefix('\u{1}').and_then(|r| r.strip_suffix('\u{1}')).ok_or_else(invalid)?;
    if !pairs.is_empty() && !pairs.ends_with('\u{1}') {
        return Err(invalid());
    }
    let mut auth = None;
    for pair in pairs.split_terminator('\u{1}') {
        let (key, value) = pair.split_once('=').ok_or_else(invalid)?;
        let value_ok =
            !value.is_empty() && value.chars().all(|c| matches!(c, '\u{21}'..='\u{7e}' | ' ' | '\t' | '\r' | '\n'));
        if key.is_empty() || !key.chars().all(|c| c.is_ascii_alphabetic()) || !value_ok {
            return Err(invalid());
        }
        if key == "auth" {
            auth = Some(value);
        }
    }
    let auth = auth.ok_or("Invalid OAUTHBEARER client first message: 'auth' not specified")?;
    let bad_format = || "Invalid OAUTHBEARER client first message: invalid 'auth' format".to_string();
    let (scheme, token) = auth.split_once(' ').ok_or_else(bad_format)?;
    let token = token.trim_start_matches(' ');
    let scheme_ok = !scheme.is_empty() && scheme.chars().all(|c| c.is_alphanumeric() || c == '_');
    let token_ok = !token.is_empty() && token.chars().all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c));
    if !scheme_ok || !token_ok {
        return Err(bad_format());
    }
    if !scheme.eq_ignore_ascii_case("bearer") {
        return Err(format!("Invalid scheme in OAUTHBEARER client first message: {scheme}"));
    }
    Ok(InitialResponse { authzid, token: token.to_string() })
}

/// How one OAUTHBEARER message ended.
#[derive(Debug, PartialEq, Eq)]
pub enum OAuthStep {
    /// Send this challenge (an RFC 7628 error) and wait for the client's `%x01`.
    Challenge(String),
    Done(Validated),
}

/// Why the exchange failed: a message for the client, or a reason only
/// logged (the client gets the generic invalid-credentials message, as
/// Kafka answers a `SaslException`).
#[derive(Debug, PartialEq, Eq)]
pub enum OAuthError {
    Specific(String),
    Generic(String),
}

/// One connection's OAUTHBEARER exchange.
#[derive(Debug, Default)]
pub struct OAuthServer {
    /// The error challenge sent, while waiting for the client's `%x01`.
    error: Option<String>,
}

impl OAuthServer {
    pub fn step(&mut self, message: &[u8], settings: &OAuthSettings, now_ms: i64) -> Result<OAuthStep, OAuthError> {
        if message == [1u8] {
            if let Some(error) = self.error.take() {
                return Err(OAuthError::Specific(error));
            }
        }
        self.error = None;
        let first = parse_initial_response(message).map_err(OAuthError::Generic)?;
        match settings.validate(&first.token, now_ms) {
            Ok(valid) => {
                if !first.authzid.is_empty() && first.authzid != valid.principal {
                    return Err(OAuthError::Specific(format!(
                        "Authentication failed: Client requested an authorization id ({}) that is different from the token's principal name ({})",
                        first.authzid, valid.principal
                    )));
                }
                Ok(OAuthStep::Done(valid))
            }
            Err(reason) => {
                tracing::debug!(%reason, "OAUTHBEARER token refused");
                let challenge = r#"{"status":"invalid_token"}"#.to_string();
                self.error = Some(challenge.clone());
                Ok(OAuthStep::Challenge(challenge))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::security::jwt::tests::TestIssuer;
    use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64URL;
    use base64::Engine as _;
    use serde_json::json;

    const NOW: i64 = 1_800_000_000_000;

    fn settings(issuer: &TestIssuer) -> OAuthSettings {
        let keys = JwkSet::parse(issuer.jwks().as_bytes()).unwrap();
        OAuthSettings {
            keys: Keys::Jwks(Arc::new(JwksStore::fixed(keys, "JWKS"))),
            sub_claim: "sub".into(),
            expected_audience: Vec::new(),
            expected_issuer: None,
            clock_skew_ms: 30_000,
        }
    }

    fn claims(extra: Value) -> Value {
        let mut c = json!({"sub": "alice", "iat": NOW / 1000 - 60, "exp": NOW / 1000 + 3600});
        for (k, v) in extra.as_object().unwrap() {
            if v.is_null() {
                c.as_object_mut().unwrap().remove(k);
            } else {
                c[k] = v.clone();
            }
        }
        c
    }

    fn first_message(token: &str) -> Vec<u8> {
        format!("n,,\u{1}auth=Bearer {token}\u{1}\u{1}").into_bytes()
    }

    #[test]
    fn a_signed_token_authenticates_its_subject_until_it_expires() {
        let issuer = TestIssuer::new("k");
        let s = settings(&issuer);
        let token = issuer.sign(&claims(json!({})));
        let v = s.validate(&token, NOW).unwrap();
        assert_eq!(v, Validated { principal: "alice".into(), expires_ms: NOW + 3_600_000 });
        let mut server = OAuthServer::default();
        assert_eq!(server.step(&first_message(&token), &s, NOW), Ok(OAuthStep::Done(v)));
    }

    #[test]
    fn claims_are_checked_as_kafkas_broker_validator_checks_them() {
        let issuer = TestIssuer::new("k");
        let mut s = settings(&issuer);
        let check = |s: &OAuthSettings, extra: Value| s.validate(&issuer.sign(&claims(extra)), NOW);
        assert!(check(&s, json!({"exp": null})).unwrap_err().contains("'exp'"));
        assert!(check(&s, json!({"iat": null})).unwrap_err().contains("'iat'"));
        assert!(check(&s, json!({"sub": null})).unwrap_err().contains("'sub'"));
        assert!(check(&s, json!({"sub": "  "})).is_err(), "an empty subject");
        assert!(check(&s, json!({"exp": NOW / 1000 - 60})).unwrap_err().contains("expired"));
        assert!(check(&s, json!({"exp": NOW / 1000 - 10})).is_ok(), "within the clock skew");
        assert!(check(&s, json!({"nbf": NOW / 1000 + 60})).unwrap_err().contains("nbf"));
        assert!(check(&s, json!({"aud": "kafka"})).unwrap_err().contains("expected_audience"));
        s.expected_audience = vec!["kafka".into()];
        assert!(check(&s, json!({"aud": ["web", "kafka"]})).is_ok());
        assert!(check(&s, json!({"aud": "web"})).unwrap_err().contains("not an expected one"));
        assert!(check(&s, json!({})).unwrap_err().contains("no audience"));
        s.expected_audience.clear();
        s.expected_issuer = Some("https://idp".into());
        assert!(check(&s, json!({"iss": "https://idp"})).is_ok());
        assert!(check(&s, json!({"iss": "https://other"})).unwrap_err().contains("issuer"));
        s.expected_issuer = None;
        s.sub_claim = "client_id".into();
        assert_eq!(check(&s, json!({"client_id": "svc"})).unwrap().principal, "svc");
    }

    #[test]
    fn unsecured_validation_takes_only_unsigned_tokens() {
        let issuer = TestIssuer::new("k");
        let mut s = settings(&issuer);
        s.keys = Keys::Unsecured;
        let unsigned = |c: &Value| format!("{}.{}.", B64URL.encode(r#"{"alg":"none"}"#), B64URL.encode(c.to_string()));
        let v = s.validate(&unsigned(&claims(json!({"iat": null, "aud": "any"}))), NOW).unwrap();
        assert_eq!(v.principal, "alice");
        assert!(s.validate(&issuer.sign(&claims(json!({}))), NOW).unwrap_err().contains("'none'"));
        let with_signed = settings(&issuer);
        assert!(with_signed.validate(&unsigned(&claims(json!({}))), NOW).is_err(), "and signed validation none");
    }

    #[test]
    fn a_refused_token_is_answered_with_an_error_challenge_then_fails() {
        let issuer = TestIssuer::new("k");
        let s = settings(&issuer);
        let mut server = OAuthServer::default();
        let expired = issuer.sign(&claims(json!({"exp": NOW / 1000 - 3600})));
        let challenge = r#"{"status":"invalid_token"}"#.to_string();
        assert_eq!(server.step(&first_message(&expired), &s, NOW), Ok(OAuthStep::Challenge(challenge.clone())));
        assert_eq!(server.step(&[1], &s, NOW), Err(OAuthError::Specific(challenge)));
    }

    #[test]
    fn an_authorization_id_must_name_the_tokens_principal() {
        let issuer = TestIssuer::new("k");
        let s = settings(&issuer);
        let token = issuer.sign(&claims(json!({})));
        let message = |a: &str| format!("n,a={a},\u{1}auth=Bearer {token}\u{1}\u{1}").into_bytes();
        assert!(matches!(OAuthServer::default().step(&message("alice"), &s, NOW), Ok(OAuthStep::Done(_))));
        let Err(OAuthError::Specific(m)) = OAuthServer::default().step(&message("bob"), &s, NOW) else { panic!() };
        assert!(m.contains("(bob) that is different from the token's principal name (alice)"), "{m}");
    }

    #[test]
    fn first_messages_are_parsed_as_rfc_7628_writes_them() {
        let ok = |m: &str| parse_initial_response(m.as_bytes());
        assert_eq!(ok("n,,\u{1}auth=Bearer abc.def.\u{1}\u{1}").unwrap().token, "abc.def.");
        let with =
            ok("n,a=us=2Cer=3D,\u{1}traceId=42\u{1}auth=bearer  t0k-en_\u{1}logicalCluster=lkc 1\u{1}\u{1}").unwrap();
        assert_eq!(with, InitialResponse { authzid: "us,er=".into(), token: "t0k-en_".into() });
        assert!(ok("n,,\u{1}\u{1}").unwrap_err().contains("'auth' not specified"));
        assert!(ok("n,,\u{1}auth=Bearer\u{1}\u{1}").unwrap_err().contains("invalid 'auth' format"));
        assert!(ok("n,,\u{1}auth=Bearer a+b\u{1}\u{1}").unwrap_err().contains("invalid 'auth' format"));
        assert!(ok("n,,\u{1}auth=Basic abc\u{1}\u{1}").unwrap_err().contains("Invalid scheme"));
        for bad in [
            "",
            "y,,\u{1}auth=Bearer a\u{1}\u{1}",
            "n,,auth=Bearer a\u{1}\u{1}",
            "n,,\u{1}auth=Bearer a\u{1}",
            "n,,\u{1}a-b=c\u{1}auth=Bearer a\u{1}\u{1}",
            "n,x,\u{1}auth=Bearer a\u{1}\u{1}",
        ] {
            assert_eq!(ok(bad), Err("Invalid OAUTHBEARER client first message".into()), "{bad:?}");
        }
        assert!(parse_initial_response(&[0xff, 0xfe]).is_err());
    }
}
