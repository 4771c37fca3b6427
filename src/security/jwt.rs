//! JSON Web Tokens as OAUTHBEARER carries them: the compact JWS form
//! (RFC 7515), a JSON Web Key Set (RFC 7517) to check signatures with, and
//! the claims. Signatures are checked with `ring` (the crate rustls already
//! builds on): RS256/384/512, PS256/384/512, ES256 and ES384, the
//! algorithms identity providers sign access tokens with. Symmetric (HS*)
//! keys are not accepted, as Kafka's broker-side validator resolves keys
//! from a JWKS only.

use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64URL;
use base64::Engine as _;
use ring::signature::{self, RsaPublicKeyComponents, UnparsedPublicKey};
use serde_json::{Map, Value};

/// A compact JWS split into its parts, header and claims decoded.
#[derive(Debug)]
pub struct Jws {
    pub header: Map<String, Value>,
    pub claims: Map<String, Value>,
    /// `header.payload`: what the signature covers.
    signing_input: String,
    signature: Vec<u8>,
}

impl Jws {
    /// Splits and decodes `token`; the messages are Kafka's where it has one.
    pub fn parse(token: &str) -> Result<Jws, String> {
        let token = token.trim();
        let parts: Vec<&str> = token.split('.').collect();
        let [header, payload, signature] = parts[..] else {
            return Err("Malformed JWT provided; expected three sections (header, payload, and signature)".into());
        };
        let object = |part: &str, what: &str| -> Result<Map<String, Value>, String> {
            let bytes =
                B64URL.decode(part.trim_end_matches('=')).map_err(|_| format!("the JWT {what} is not base64url"))?;
            match serde_json::from_slice(&bytes) {
                Ok(Value::Object(map)) => Ok(map),
                _ => Err(format!("the JWT {what} is not a JSON object")),
            }
        };
        Ok(Jws {
            header: object(header, "header")?,
            claims: object(payload, "payload")?,
            signing_input: format!("{header}.{payload}"),
            signature: B64URL
                .decode(signature.trim_end_matches('='))
                .map_err(|_| "the JWT signature is not base64url".to_string())?,
        })
    }

    /// The `alg` header.
    pub fn algorithm(&self) -> Option<&str> {
        self.header.get("alg").and_then(Value::as_str)
    }

    pub fn is_signed(&self) -> bool {
        !self.signature.is_empty()
    }

    /// Checks the signature with a key of `keys` that fits the header's
    /// `kid` and `alg`.
    pub fn verify(&self, keys: &JwkSet) -> Result<(), String> {
        let alg = self.algorithm().ok_or("the JWT header has no 'alg'")?;
        let Some(algorithm) = Algorithm::from_name(alg) else {
            return Err(format!("the JWT is signed with '{alg}', which is not accepted"));
        };
        let kid = self.header.get("kid").and_then(Value::as_str);
        let mut candidates = keys
            .keys
            .iter()
            .filter(|k| kid.is_none_or(|kid| k.kid.as_deref() == Some(kid)))
            .filter(|k| k.alg.as_deref().is_none_or(|a| a == alg) && k.fits(algorithm))
            .peekable();
        if candidates.peek().is_none() {
            return Err(match kid {
                Some(kid) => format!("no key in the JWKS has kid '{kid}' and fits '{alg}'"),
                None => format!("no key in the JWKS fits '{alg}'"),
            });
        }
        let message = self.signing_input.as_bytes();
        if candidates.any(|k| k.verifies(algorithm, message, &self.signature)) {
            Ok(())
        } else {
            Err("the JWT signature does not verify".into())
        }
    }
}

/// The JWS algorithms accepted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Algorithm {
    Rs256,
    Rs384,
    Rs512,
    Ps256,
    Ps384,
    Ps512,
    Es256,
    Es384,
}

impl Algorithm {
    fn from_name(name: &str) -> Option<Algorithm> {
        Some(match name {
            "RS256" => Algorithm::Rs256,
            "RS384" => Algorithm::Rs384,
            "RS512" => Algorithm::Rs512,
            "PS256" => Algorithm::Ps256,
            "PS384" => Algorithm::Ps384,
            "PS512" => Algorithm::Ps512,
            "ES256" => Algorithm::Es256,
            "ES384" => Algorithm::Es384,
            _ => return None,
        })
    }

    fn rsa(self) -> Option<&'static signature::RsaParameters> {
        Some(match self {
            Algorithm::Rs256 => &signature::RSA_PKCS1_2048_8192_SHA256,
            Algorithm::Rs384 => &signature::RSA_PKCS1_2048_8192_SHA384,
            Algorithm::Rs512 => &signature::RSA_PKCS1_2048_8192_SHA512,
            Algorithm::Ps256 => &signature::RSA_PSS_2048_8192_SHA256,
            Algorithm::Ps384 => &signature::RSA_PSS_2048_8192_SHA384,
            Algorithm::Ps512 => &signature::RSA_PSS_2048_8192_SHA512,
            _ => return None,
        })
    }

    /// The curve name of an ES algorithm and ring's verifier for it.
    fn ec(self) -> Option<(&'static str, &'static signature::EcdsaVerificationAlgorithm)> {
        match self {
            Algorithm::Es256 => Some(("P-256", &signature::ECDSA_P256_SHA256_FIXED)),
            Algorithm::Es384 => Some(("P-384", &signature::ECDSA_P384_SHA384_FIXED)),
            _ => None,
        }
    }
}

/// One public key of a JWKS.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Jwk {
    pub kid: Option<String>,
    pub alg: Option<String>,
    material: KeyMaterial,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum KeyMaterial {
    Rsa {
        n: Vec<u8>,
        e: Vec<u8>,
    },
    /// `0x04 || x || y`, as ring reads an uncompressed point.
    Ec {
        curve: String,
        point: Vec<u8>,
    },
}

impl Jwk {
    fn fits(&self, alg: Algorithm) -> bool {
        match &self.material {
            KeyMaterial::Rsa { .. } => alg.rsa().is_some(),
            KeyMaterial::Ec { curve, .. } => alg.ec().is_some_and(|(c, _)| c == curve),
        }
    }

    fn verifies(&self, alg: Algorithm, message: &[u8], sig: &[u8]) -> bool {
        match (&self.material, alg.rsa(), alg.ec()) {
            (KeyMaterial::Rsa { n, e }, Some(params), _) => {
                RsaPublicKeyComponents { n, e }.verify(params, message, sig).is_ok()
            }
            (KeyMaterial::Ec { point, .. }, _, Some((_, verifier))) => {
                UnparsedPublicKey::new(verifier, point).verify(message, sig).is_ok()
            }
            _ => false,
        }
    }
}

/// The keys tokens may be signed with.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct JwkSet {
    pub keys: Vec<Jwk>,
}

impl JwkSet {
    /// Reads a JWKS document (`{"keys": [...]}`). Keys for encryption
    /// (`"use": "enc"`) and of types that cannot sign access tokens here
    /// (symmetric, OKP) are skipped; a malformed RSA or EC key is an error.
    pub fn parse(json: &[u8]) -> Result<JwkSet, String> {
        let doc: Value = serde_json::from_slice(json).map_err(|e| format!("not JSON: {e}"))?;
        let keys = doc.get("keys").and_then(Value::as_array).ok_or("no \"keys\" array")?;
        let mut set = JwkSet::default();
        for (i, key) in keys.iter().enumerate() {
            let field = |name: &str| key.get(name).and_then(Value::as_str);
            if field("use").is_some_and(|u| u != "sig") {
                continue;
            }
            let bytes = |name: &str| -> Result<Vec<u8>, String> {
                let text = field(name).ok_or_else(|| format!("key {i} has no \"{name}\""))?;
                B64URL.decode(text.trim_end_matches('=')).map_err(|_| format!("key {i}: \"{name}\" is not base64url"))
            };
            let material = match field("kty") {
                Some("RSA") => KeyMaterial::Rsa { n: bytes("n")?, e: bytes("e")? },
                Some("EC") => {
                    let curve = field("crv").ok_or_else(|| format!("key {i} has no \"crv\""))?.to_string();
                    let size = match curve.as_str() {
                        "P-256" => 32,
                        "P-384" => 48,
                        _ => continue,
                    };
                    let (x, y) = (bytes("x")?, bytes("y")?);
                    if x.len() != size || y.len() != size {
                        return Err(format!("key {i}: x and y must be {size} bytes for {curve}"));
                    }
                    let mut point = Vec::with_capacity(1 + 2 * size);
                    point.push(4);
                    point.extend_from_slice(&x);
                    point.extend_from_slice(&y);
                    KeyMaterial::Ec { curve, point }
                }
                _ => continue,
            };
            set.keys.push(Jwk {
                kid: field("kid").map(str::to_string),
                alg: field("alg").map(str::to_string),
                material,
            });
        }
        Ok(set)
    }
}

/// A private key that signs JWTs: kcoord signs the assertions of its
/// OAuth jwt-bearer logins (RFC 7523, Kafka's KIP-1139) with RS256 or
/// ES256, the two algorithms Kafka's and librdkafka's assertions use.
pub enum SigningKey {
    Rs256(signature::RsaKeyPair),
    Es256(signature::EcdsaKeyPair),
}

impl SigningKey {
    /// The key `der` (from [`crate::security::pem`]) for `algorithm`
    /// ("RS256": PKCS#8 or PKCS#1 RSA; "ES256": PKCS#8 P-256).
    pub fn new(der: &rustls::pki_types::PrivateKeyDer<'_>, algorithm: &str) -> Result<SigningKey, String> {
        use rustls::pki_types::PrivateKeyDer;
        let rng = ring::rand::SystemRandom::new();
        match (algorithm, der) {
            ("RS256", PrivateKeyDer::Pkcs8(k)) => signature::RsaKeyPair::from_pkcs8(k.secret_pkcs8_der()),
            ("RS256", PrivateKeyDer::Pkcs1(k)) => signature::RsaKeyPair::from_der(k.secret_pkcs1_der()),
            ("ES256", PrivateKeyDer::Pkcs8(k)) => {
                return signature::EcdsaKeyPair::from_pkcs8(
                    &signature::ECDSA_P256_SHA256_FIXED_SIGNING,
                    k.secret_pkcs8_der(),
                    &rng,
                )
                .map(SigningKey::Es256)
                .map_err(|e| format!("not a P-256 PKCS#8 key for ES256: {e}"));
            }
            ("ES256", PrivateKeyDer::Sec1(_)) => {
                return Err("an EC key in SEC1 form: convert it to PKCS#8 (openssl pkcs8 -topk8)".into())
            }
            ("RS256" | "ES256", _) => return Err(format!("the PEM text holds no {algorithm} private key")),
            (other, _) => return Err(format!("assertion algorithm {other:?}: expected RS256 or ES256")),
        }
        .map(SigningKey::Rs256)
        .map_err(|e| format!("not an RSA private key for RS256: {e}"))
    }

    pub fn algorithm(&self) -> &'static str {
        match self {
            SigningKey::Rs256(_) => "RS256",
            SigningKey::Es256(_) => "ES256",
        }
    }

    /// A compact JWS of `claims` with `header` (its `alg` set to this key's).
    pub fn sign(&self, mut header: Map<String, Value>, claims: &Value) -> Result<String, String> {
        header.insert("alg".into(), Value::from(self.algorithm()));
        let input =
            format!("{}.{}", B64URL.encode(Value::Object(header).to_string()), B64URL.encode(claims.to_string()));
        let rng = ring::rand::SystemRandom::new();
        let sig = match self {
            SigningKey::Rs256(key) => {
                let mut sig = vec![0u8; key.public().modulus_len()];
                key.sign(&signature::RSA_PKCS1_SHA256, &rng, input.as_bytes(), &mut sig)
                    .map_err(|e| format!("RS256 signing failed: {e}"))?;
                sig
            }
            SigningKey::Es256(key) => {
                key.sign(&rng, input.as_bytes()).map_err(|e| format!("ES256 signing failed: {e}"))?.as_ref().to_vec()
            }
        };
        Ok(format!("{input}.{}", B64URL.encode(sig)))
    }
}

/// An ES256 key pair that signs tokens and describes itself as a JWKS, for
/// tests (issuing tokens is an identity provider's job, not kcoord's).
#[doc(hidden)]
pub struct Es256Signer {
    key: SigningKey,
    pkcs8: Vec<u8>,
    pub kid: String,
}

impl Es256Signer {
    pub fn generate(kid: &str) -> Result<Es256Signer, String> {
        use ring::signature::{EcdsaKeyPair, ECDSA_P256_SHA256_FIXED_SIGNING};
        let rng = ring::rand::SystemRandom::new();
        let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng).map_err(|e| e.to_string())?;
        let key = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, pkcs8.as_ref(), &rng)
            .map_err(|e| e.to_string())?;
        Ok(Es256Signer { key: SigningKey::Es256(key), pkcs8: pkcs8.as_ref().to_vec(), kid: kid.to_string() })
    }

    /// The private key as PKCS#8 PEM.
    pub fn private_key_pem(&self) -> String {
        let b64 = base64::engine::general_purpose::STANDARD.encode(&self.pkcs8);
        let lines: Vec<&str> = b64.as_bytes().chunks(64).filter_map(|c| std::str::from_utf8(c).ok()).collect();
        format!("-----BEGIN PRIVATE KEY-----\n{}\n-----END PRIVATE KEY-----\n", lines.join("\n"))
    }

    /// `{"keys": [this key]}`.
    pub fn jwks(&self) -> String {
        use ring::signature::KeyPair;
        let SigningKey::Es256(key) = &self.key else { return String::new() };
        let point = key.public_key().as_ref();
        let (x, y) = point.get(1..).unwrap_or_default().split_at(point.len().saturating_sub(1) / 2);
        serde_json::json!({"keys": [{
            "kty": "EC", "crv": "P-256", "kid": self.kid, "use": "sig", "alg": "ES256",
            "x": B64URL.encode(x), "y": B64URL.encode(y),
        }]})
        .to_string()
    }

    /// A compact JWS of `claims`, signed with this key.
    pub fn sign(&self, claims: &Value) -> Result<String, String> {
        let mut header = Map::new();
        header.insert("typ".into(), Value::from("JWT"));
        header.insert("kid".into(), Value::from(self.kid.clone()));
        self.key.sign(header, claims)
    }
}

#[cfg(test)]
pub mod tests {
    use super::*;

    /// A signer for tests, with a fresh key.
    pub struct TestIssuer(Es256Signer);

    impl TestIssuer {
        pub fn new(kid: &str) -> TestIssuer {
            TestIssuer(Es256Signer::generate(kid).unwrap())
        }

        pub fn jwks(&self) -> String {
            self.0.jwks()
        }

        pub fn sign(&self, claims: &Value) -> String {
            self.0.sign(claims).unwrap()
        }
    }

    #[test]
    fn a_token_verifies_with_the_key_that_signed_it_and_no_other() {
        let issuer = TestIssuer::new("k1");
        let token = issuer.sign(&serde_json::json!({"sub": "alice"}));
        let jws = Jws::parse(&token).unwrap();
        assert_eq!(jws.claims["sub"], "alice");
        let keys = JwkSet::parse(issuer.jwks().as_bytes()).unwrap();
        assert_eq!(jws.verify(&keys), Ok(()));
        let other = JwkSet::parse(TestIssuer::new("k1").jwks().as_bytes()).unwrap();
        assert_eq!(jws.verify(&other), Err("the JWT signature does not verify".into()));
        let renamed = JwkSet::parse(TestIssuer::new("k2").jwks().as_bytes()).unwrap();
        assert!(jws.verify(&renamed).unwrap_err().contains("kid 'k1'"));
        // A changed payload under the same signature.
        let mut parts: Vec<String> = token.split('.').map(str::to_string).collect();
        parts[1] = B64URL.encode(serde_json::json!({"sub": "mallory"}).to_string());
        assert!(Jws::parse(&parts.join(".")).unwrap().verify(&keys).is_err());
    }

    #[test]
    fn unsigned_and_symmetric_tokens_do_not_verify() {
        let issuer = TestIssuer::new("k1");
        let keys = JwkSet::parse(issuer.jwks().as_bytes()).unwrap();
        let header = B64URL.encode(r#"{"alg":"none"}"#);
        let claims = B64URL.encode(r#"{"sub":"alice"}"#);
        let none = Jws::parse(&format!("{header}.{claims}.")).unwrap();
        assert!(!none.is_signed());
        assert!(none.verify(&keys).unwrap_err().contains("'none'"));
        let hs = Jws::parse(&format!("{}.{claims}.c2ln", B64URL.encode(r#"{"alg":"HS256"}"#))).unwrap();
        assert!(hs.verify(&keys).unwrap_err().contains("'HS256'"));
    }

    #[test]
    fn malformed_tokens_and_key_sets_are_refused_with_a_reason() {
        assert!(Jws::parse("a.b").unwrap_err().contains("three sections"));
        assert!(Jws::parse("!!.e30.").unwrap_err().contains("base64url"));
        assert!(Jws::parse("e30.WzFd.").unwrap_err().contains("payload is not a JSON object"));
        assert!(JwkSet::parse(b"{}").unwrap_err().contains("keys"));
        let short = r#"{"keys":[{"kty":"EC","crv":"P-256","x":"AA","y":"AA"}]}"#;
        assert!(JwkSet::parse(short.as_bytes()).unwrap_err().contains("32 bytes"));
        let skipped = r#"{"keys":[{"kty":"oct","k":"AA"},{"kty":"RSA","use":"enc","n":"AQ","e":"AQAB"}]}"#;
        assert_eq!(JwkSet::parse(skipped.as_bytes()).unwrap(), JwkSet::default());
    }
}
