//! The JWT assertions of kcoord's jwt-bearer token requests (RFC 7523, as
//! Kafka 4.1's `JwtBearerJwtRetriever` and librdkafka's
//! `sasl.oauthbearer.grant.type=urn:ietf:params:oauth:grant-type:jwt-bearer`
//! make them): instead of a client secret, the token request carries a
//! short-lived JWT signed with the client's private key, which the identity
//! provider checks against the public key it holds for the client.
//!
//! An assertion is built fresh for every token request: the template's
//! header and payload if one is given, then `alg` and `typ`, `iat`, `exp`
//! (now + `exp.seconds`) and `nbf` (now − `nbf.seconds`), the configured
//! `sub`, `iss` and `aud` over the template's, and a random `jti` if asked.
//! Or it is read from a file that something else keeps fresh.

use std::path::PathBuf;

use serde_json::{Map, Value};

use super::settings::ClientSecurityConfig;
use crate::security::jwt::SigningKey;

/// Where assertions come from.
pub enum AssertionSource {
    /// Read at every token request.
    File(PathBuf),
    Signed(Box<AssertionSigner>),
}

/// Signs assertions with the client's key.
pub struct AssertionSigner {
    key: SigningKey,
    header: Map<String, Value>,
    payload: Map<String, Value>,
    /// `sub`, `iss`, `aud` as configured (empty ones left out).
    claims: Vec<(&'static str, String)>,
    exp_seconds: u64,
    nbf_seconds: u64,
    jti: bool,
}

type JsonObject = Map<String, Value>;

/// The largest template file read.
const MAX_TEMPLATE_BYTES: u64 = 1 << 20;

impl AssertionSource {
    pub fn from_config(c: &ClientSecurityConfig) -> Result<AssertionSource, String> {
        if !c.sasl_oauthbearer_assertion_file.is_empty() {
            return Ok(AssertionSource::File(PathBuf::from(&c.sasl_oauthbearer_assertion_file)));
        }
        let pem = match (
            c.sasl_oauthbearer_assertion_private_key_file.as_str(),
            c.sasl_oauthbearer_assertion_private_key_pem.as_str(),
        ) {
            ("", "") => {
                return Err("the jwt-bearer grant needs sasl.oauthbearer.assertion.private.key.file (or .pem), \
                            or a ready-made sasl.oauthbearer.assertion.file"
                    .into())
            }
            ("", pem) => pem.to_string(),
            (file, _) => std::fs::read_to_string(file)
                .map_err(|e| format!("sasl.oauthbearer.assertion.private.key.file {file}: {e}"))?,
        };
        let key = crate::security::pem::parse_private_key(&pem, &c.sasl_oauthbearer_assertion_private_key_passphrase)
            .and_then(|key| SigningKey::new(&key, &c.sasl_oauthbearer_assertion_algorithm.to_ascii_uppercase()))
            .map_err(|e| format!("the assertion key: {e}"))?;
        let (header, payload) = match c.sasl_oauthbearer_assertion_jwt_template_file.as_str() {
            "" => (Map::new(), Map::new()),
            path => read_template(path)?,
        };
        let claims = [
            ("sub", &c.sasl_oauthbearer_assertion_claim_sub),
            ("iss", &c.sasl_oauthbearer_assertion_claim_iss),
            ("aud", &c.sasl_oauthbearer_assertion_claim_aud),
        ]
        .into_iter()
        .filter(|(_, v)| !v.is_empty())
        .map(|(k, v)| (k, v.clone()))
        .collect();
        if c.sasl_oauthbearer_assertion_claim_exp_seconds == 0 {
            return Err("sasl.oauthbearer.assertion.claim.exp.seconds must be at least 1".into());
        }
        Ok(AssertionSource::Signed(Box::new(AssertionSigner {
            key,
            header,
            payload,
            claims,
            exp_seconds: c.sasl_oauthbearer_assertion_claim_exp_seconds,
            nbf_seconds: c.sasl_oauthbearer_assertion_claim_nbf_seconds,
            jti: c.sasl_oauthbearer_assertion_claim_jti_include,
        })))
    }

    /// An assertion for a token request now.
    pub async fn assertion(&self) -> Result<String, String> {
        match self {
            AssertionSource::File(path) => super::oauth::read_credential_file(path, "assertion file").await,
            AssertionSource::Signed(signer) => {
                signer.sign_at(u64::try_from(crate::wall_clock::wall_clock_ms() / 1000).unwrap_or_default())
            }
        }
    }
}

impl AssertionSigner {
    /// The assertion signed at `now` (seconds since the epoch).
    fn sign_at(&self, now: u64) -> Result<String, String> {
        let mut header = self.header.clone();
        header.insert("typ".into(), Value::from("JWT"));
        let mut payload = self.payload.clone();
        payload.insert("iat".into(), Value::from(now));
        payload.insert("exp".into(), Value::from(now.saturating_add(self.exp_seconds)));
        payload.insert("nbf".into(), Value::from(now.saturating_sub(self.nbf_seconds)));
        for (claim, value) in &self.claims {
            payload.insert((*claim).into(), Value::from(value.clone()));
        }
        if self.jti {
            payload.insert("jti".into(), Value::from(uuid::Uuid::new_v4().to_string()));
        }
        self.key.sign(header, &Value::Object(payload))
    }
}

/// A template file: `{"header": {...}, "payload": {...}}`, both objects.
fn read_template(path: &str) -> Result<(JsonObject, JsonObject), String> {
    let what = format!("sasl.oauthbearer.assertion.jwt.template.file {path}");
    let size = std::fs::metadata(path).map_err(|e| format!("{what}: {e}"))?.len();
    if size > MAX_TEMPLATE_BYTES {
        return Err(format!("{what}: {size} bytes, over {MAX_TEMPLATE_BYTES}"));
    }
    let text = std::fs::read(path).map_err(|e| format!("{what}: {e}"))?;
    let json: Value = serde_json::from_slice(&text).map_err(|e| format!("{what}: not JSON: {e}"))?;
    match (json.get("header"), json.get("payload")) {
        (Some(Value::Object(h)), Some(Value::Object(p))) => Ok((h.clone(), p.clone())),
        _ => Err(format!("{what}: it must hold both \"header\" and \"payload\" objects")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::security::jwt::{Es256Signer, JwkSet, Jws};

    fn config(key_pem: &str) -> ClientSecurityConfig {
        ClientSecurityConfig {
            sasl_oauthbearer_assertion_algorithm: "ES256".into(),
            sasl_oauthbearer_assertion_private_key_pem: key_pem.into(),
            sasl_oauthbearer_assertion_claim_sub: "kcoord-sidecar".into(),
            sasl_oauthbearer_assertion_claim_iss: "kcoord-sidecar".into(),
            sasl_oauthbearer_assertion_claim_aud: "https://idp.example.com/token".into(),
            sasl_oauthbearer_assertion_claim_jti_include: true,
            ..ClientSecurityConfig::default()
        }
    }

    #[test]
    fn an_assertion_carries_the_claims_librdkafkas_does_and_verifies_with_the_clients_public_key() {
        let client = Es256Signer::generate("client-key").unwrap();
        let AssertionSource::Signed(signer) = AssertionSource::from_config(&config(&client.private_key_pem())).unwrap()
        else {
            panic!("a signer")
        };
        let token = signer.sign_at(1_000_000).unwrap();
        let jws = Jws::parse(&token).unwrap();
        jws.verify(&JwkSet::parse(client.jwks().as_bytes()).unwrap()).unwrap();
        assert_eq!(jws.header["alg"], "ES256");
        assert_eq!(jws.header["typ"], "JWT");
        let c = &jws.claims;
        assert_eq!(
            (c["iat"].as_u64(), c["exp"].as_u64(), c["nbf"].as_u64()),
            (Some(1_000_000), Some(1_000_300), Some(999_940))
        );
        assert_eq!((c["sub"].as_str(), c["iss"].as_str()), (Some("kcoord-sidecar"), Some("kcoord-sidecar")));
        assert_eq!(c["aud"], "https://idp.example.com/token");
        let other = Jws::parse(&signer.sign_at(1_000_000).unwrap()).unwrap();
        assert_ne!(c["jti"], other.claims["jti"], "a fresh jti every time");
    }

    #[test]
    fn a_template_gives_fields_the_settings_do_not_override() {
        let client = Es256Signer::generate("k").unwrap();
        let dir = tempfile::tempdir().unwrap();
        let template = dir.path().join("template.json");
        std::fs::write(
            &template,
            r#"{"header": {"kid": "client-key", "alg": "none"}, "payload": {"sub": "from-template", "tenant": "t1", "exp": 1}}"#,
        )
        .unwrap();
        let mut c = config(&client.private_key_pem());
        c.sasl_oauthbearer_assertion_jwt_template_file = template.display().to_string();
        c.sasl_oauthbearer_assertion_claim_jti_include = false;
        let AssertionSource::Signed(signer) = AssertionSource::from_config(&c).unwrap() else { panic!("a signer") };
        let jws = Jws::parse(&signer.sign_at(500).unwrap()).unwrap();
        assert_eq!((jws.header["kid"].as_str(), jws.header["alg"].as_str()), (Some("client-key"), Some("ES256")));
        assert_eq!(jws.claims["tenant"], "t1");
        assert_eq!(jws.claims["sub"], "kcoord-sidecar", "the setting over the template");
        assert_eq!(jws.claims["exp"], 800);
        assert!(jws.claims.get("jti").is_none());
    }

    #[test]
    fn keys_that_cannot_sign_are_refused_with_what_to_do() {
        let client = Es256Signer::generate("k").unwrap();
        let mut c = config(&client.private_key_pem());
        c.sasl_oauthbearer_assertion_algorithm = "RS256".into();
        assert!(AssertionSource::from_config(&c).err().unwrap().contains("RSA"));
        c.sasl_oauthbearer_assertion_private_key_pem =
            "-----BEGIN ENCRYPTED PRIVATE KEY-----\nAAAA\n-----END ENCRYPTED PRIVATE KEY-----\n".into();
        assert!(AssertionSource::from_config(&c).err().unwrap().contains("no password"));
        c.sasl_oauthbearer_assertion_private_key_pem.clear();
        assert!(AssertionSource::from_config(&c).err().unwrap().contains("private.key.file"));
    }
}
