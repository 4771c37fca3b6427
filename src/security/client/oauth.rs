//! Where kcoord's own OAUTHBEARER logins get their access tokens (a
//! sidecar's upstream links, the admin CLI), as Kafka's clients get them:
//!
//! - from an OAuth 2 token endpoint with the client-credentials grant
//!   (`sasl.oauthbearer.token.endpoint.url=https://...`, with
//!   `sasl.oauthbearer.client.id`, `.client.secret` and `.scope`), as Kafka's
//!   `ClientCredentialsJwtRetriever` and librdkafka's
//!   `sasl.oauthbearer.method=oidc` do: HTTP Basic client authentication
//!   with the URL-encoded id and secret (RFC 6749 §2.3.1), the token cached
//!   until 80 % of its life has passed;
//! - from the same endpoint with the jwt-bearer grant (RFC 7523, Kafka
//!   4.1's `JwtBearerJwtRetriever`, librdkafka's
//!   `sasl.oauthbearer.grant.type=urn:ietf:params:oauth:grant-type:jwt-bearer`):
//!   the request carries a JWT assertion signed with the client's private
//!   key ([`super::assertion`]) instead of a secret;
//! - from a file (`sasl.oauthbearer.token.endpoint.url=file:///path`), as
//!   Kafka's `FileJwtRetriever`: read at every login, for tokens an outside
//!   agent keeps fresh (Kubernetes projected service-account tokens,
//!   workload-identity sidecars).
//!
//! The HTTP exchange is [`crate::security::http_client`]'s: one request per
//! token, TLS for https URLs with the system's roots or `https.ca.location`.

use std::path::PathBuf;
use std::sync::Mutex;
use std::time::Duration;

use base64::engine::general_purpose::{STANDARD as B64, URL_SAFE_NO_PAD as B64URL};
use base64::Engine as _;
use tokio::time::Instant;

use super::assertion::AssertionSource;
use super::settings::{ClientSecurityConfig, CLIENT_CREDENTIALS, JWT_BEARER};
use crate::security::http_client::{HttpClient, HttpUrl};

/// Share of a token's life after which a fresh one is fetched (librdkafka
/// and Kafka's login refresh at 80 %).
const REFRESH_AT_SHARE: f64 = 0.8;

/// How kcoord gets its access tokens.
pub enum TokenSource {
    /// Read from this file at every login.
    File(PathBuf),
    /// Fetched from a token endpoint.
    Endpoint(Box<TokenEndpoint>),
}

impl std::fmt::Debug for TokenSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TokenSource::File(p) => write!(f, "TokenSource::File({})", p.display()),
            // Never the secret.
            TokenSource::Endpoint(e) => match &e.grant {
                Grant::ClientCredentials { id, .. } => {
                    write!(f, "TokenSource::Endpoint({}, client {id})", e.http.url.url)
                }
                Grant::JwtBearer(_) => write!(f, "TokenSource::Endpoint({}, jwt-bearer)", e.http.url.url),
            },
        }
    }
}

/// A token endpoint, how kcoord authenticates to it, and the token last
/// fetched.
pub struct TokenEndpoint {
    http: HttpClient,
    grant: Grant,
    scope: String,
    cached: Mutex<Option<(String, Instant)>>,
}

/// How a token request authenticates.
enum Grant {
    ClientCredentials { id: String, secret: String },
    JwtBearer(AssertionSource),
}

impl TokenSource {
    /// From the `sasl.oauthbearer.*` settings (`https.ca.location` holds
    /// extra PEM roots for an https endpoint, else the system's are used).
    pub fn from_config(c: &ClientSecurityConfig) -> Result<TokenSource, String> {
        let url = c.sasl_oauthbearer_token_endpoint_url.as_str();
        if let Some(path) = url.strip_prefix("file://") {
            return Ok(TokenSource::File(PathBuf::from(path)));
        }
        let url = HttpUrl::parse(url, "sasl.oauthbearer.token.endpoint.url (or file://)")?;
        let grant = match c.sasl_oauthbearer_grant_type.as_str() {
            JWT_BEARER => Grant::JwtBearer(AssertionSource::from_config(c)?),
            CLIENT_CREDENTIALS => {
                let (id, secret) = (&c.sasl_oauthbearer_client_id, &c.sasl_oauthbearer_client_secret);
                if id.is_empty() || secret.is_empty() {
                    return Err(
                        "a token endpoint needs sasl.oauthbearer.client.id and sasl.oauthbearer.client.secret".into()
                    );
                }
                Grant::ClientCredentials { id: id.clone(), secret: secret.clone() }
            }
            other => {
                return Err(format!(
                    "sasl.oauthbearer.grant.type {other:?}: expected {CLIENT_CREDENTIALS} or {JWT_BEARER}"
                ))
            }
        };
        Ok(TokenSource::Endpoint(Box::new(TokenEndpoint {
            http: HttpClient::new(url, &c.https_ca_location)?,
            grant,
            scope: c.sasl_oauthbearer_scope.clone(),
            cached: Mutex::new(None),
        })))
    }

    /// A token to log in with now.
    pub async fn token(&self) -> Result<String, String> {
        match self {
            TokenSource::File(path) => read_credential_file(path, "token file").await,
            TokenSource::Endpoint(e) => e.token().await,
        }
    }
}

impl TokenEndpoint {
    async fn token(&self) -> Result<String, String> {
        let now = Instant::now();
        if let Some((token, refresh_at)) = self.cached.lock().unwrap_or_else(|e| e.into_inner()).as_ref() {
            if now < *refresh_at {
                return Ok(token.clone());
            }
        }
        let url = &self.http.url;
        let (host, path) = (url.host_header(), url.path.clone());
        let request = match &self.grant {
            Grant::ClientCredentials { id, secret } => {
                client_credentials_request(&host, &path, id, secret, &self.scope)
            }
            Grant::JwtBearer(source) => jwt_bearer_request(&host, &path, &source.assertion().await?, &self.scope),
        };
        let body = self.http.send(&request).await.map_err(|e| format!("token endpoint {}: {e}", url.url))?;
        // Some providers answer a jwt-bearer request with an id_token only
        // (librdkafka takes it too).
        let id_token = matches!(self.grant, Grant::JwtBearer(_));
        let (token, lifetime) =
            parse_token_response(&body, id_token).map_err(|e| format!("token endpoint {}: {e}", url.url))?;
        let refresh_at = now + lifetime.mul_f64(REFRESH_AT_SHARE);
        *self.cached.lock().unwrap_or_else(|e| e.into_inner()) = Some((token.clone(), refresh_at));
        Ok(token)
    }
}

/// The trimmed text of a file something else keeps fresh (a token, an
/// assertion), read off the async threads at every use; empty is an error.
pub(super) async fn read_credential_file(path: &std::path::Path, what: &str) -> Result<String, String> {
    let read = {
        let path = path.to_path_buf();
        tokio::task::spawn_blocking(move || std::fs::read_to_string(path))
    };
    let text = read.await.map_err(|e| e.to_string())?.map_err(|e| format!("{what} {}: {e}", path.display()))?;
    match text.trim() {
        "" => Err(format!("{what} {} is empty", path.display())),
        credential => Ok(credential.to_string()),
    }
}

/// `application/x-www-form-urlencoded` escaping (RFC 6749 appendix B).
fn form_encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'*' => out.push(b as char),
            b' ' => out.push('+'),
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

/// The whole HTTP request of a client-credentials grant.
fn client_credentials_request(host: &str, path: &str, id: &str, secret: &str, scope: &str) -> Vec<u8> {
    let credentials = B64.encode(format!("{}:{}", form_encode(id), form_encode(secret)));
    token_request(host, path, &format!("Authorization: Basic {credentials}\r\n"), "client_credentials", scope)
}

/// The whole HTTP request of a jwt-bearer grant: the assertion is the
/// client's authentication.
fn jwt_bearer_request(host: &str, path: &str, assertion: &str, scope: &str) -> Vec<u8> {
    let grant = format!("{}&assertion={}", form_encode(JWT_BEARER), form_encode(assertion));
    token_request(host, path, "", &grant, scope)
}

/// A token request: `grant_type=<grant>[&scope=...]`, form-encoded.
fn token_request(host: &str, path: &str, auth_header: &str, grant: &str, scope: &str) -> Vec<u8> {
    let mut body = format!("grant_type={grant}");
    if !scope.is_empty() {
        body.push_str("&scope=");
        body.push_str(&form_encode(scope));
    }
    format!(
        "POST {path} HTTP/1.1\r\nHost: {host}\r\n{auth_header}\
         Content-Type: application/x-www-form-urlencoded\r\nAccept: application/json\r\n\
         Cache-Control: no-cache\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// The access token of a token endpoint's JSON answer (or, with
/// `id_token`, its `id_token` when there is no access token) and how long
/// it lives: the sooner of `expires_in` and the token's own `exp` (a broker
/// ends the session at `exp`), else an hour.
fn parse_token_response(body: &[u8], id_token: bool) -> Result<(String, Duration), String> {
    let json: serde_json::Value = serde_json::from_slice(body).map_err(|_| "an answer that is not JSON".to_string())?;
    let field = |name: &str| json.get(name).and_then(|t| t.as_str()).filter(|t| !t.is_empty());
    let token = field("access_token")
        .or_else(|| if id_token { field("id_token") } else { None })
        .ok_or("an answer without access_token")?
        .to_string();
    let expires_in =
        json.get("expires_in").and_then(|e| e.as_f64().or_else(|| e.as_str().and_then(|s| s.parse().ok())));
    let seconds = match (expires_in, token_expiry_in(&token)) {
        (Some(a), Some(b)) => a.min(b),
        (a, b) => a.or(b).unwrap_or(3600.0),
    }
    .max(0.1);
    Ok((token, Duration::from_secs_f64(seconds)))
}

/// Seconds until the `exp` claim of an (unverified) JWT.
fn token_expiry_in(token: &str) -> Option<f64> {
    let payload = token.split('.').nth(1)?;
    let claims: serde_json::Value = serde_json::from_slice(&B64URL.decode(payload).ok()?).ok()?;
    let exp = claims.get("exp")?.as_f64()?;
    Some(exp - crate::wall_clock::wall_clock_ms() as f64 / 1000.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_grant_authenticates_with_url_encoded_basic_credentials() {
        let req = client_credentials_request("idp:8443", "/oauth/token", "svc id", "p@ss:w/rd", "kafka read");
        let text = String::from_utf8(req).unwrap();
        assert!(text.starts_with("POST /oauth/token HTTP/1.1\r\nHost: idp:8443\r\n"), "{text}");
        let basic = B64.encode("svc+id:p%40ss%3Aw%2Frd");
        assert!(text.contains(&format!("Authorization: Basic {basic}\r\n")), "{text}");
        assert!(text.ends_with("\r\n\r\ngrant_type=client_credentials&scope=kafka+read"), "{text}");
        assert!(text.contains("Content-Length: 46\r\n"), "{text}");
    }

    #[test]
    fn a_tokens_life_comes_from_expires_in_or_the_token() {
        let (t, life) = parse_token_response(br#"{"access_token":"abc","expires_in":300}"#, false).unwrap();
        assert_eq!((t.as_str(), life), ("abc", Duration::from_secs(300)));
        let soon = crate::wall_clock::wall_clock_ms() / 1000 + 30;
        let jwt = format!("e30.{}.sig", B64URL.encode(format!("{{\"exp\":{soon}}}")));
        let answer = format!(r#"{{"access_token":"{jwt}","expires_in":300}}"#);
        let (_, life) = parse_token_response(answer.as_bytes(), false).unwrap();
        assert!(life.as_secs() <= 30, "the token's own exp is sooner: {life:?}");
        let exp = crate::wall_clock::wall_clock_ms() / 1000 + 120;
        let jwt = format!("e30.{}.sig", B64URL.encode(format!("{{\"exp\":{exp}}}")));
        let (_, life) = parse_token_response(format!(r#"{{"access_token":"{jwt}"}}"#).as_bytes(), false).unwrap();
        assert!((110..=120).contains(&life.as_secs()), "{life:?}");
        assert!(parse_token_response(br#"{"error":"invalid_client"}"#, false).unwrap_err().contains("access_token"));
        assert!(parse_token_response(br#"{"id_token":"abc"}"#, false).is_err());
        assert_eq!(parse_token_response(br#"{"id_token":"abc"}"#, true).unwrap().0, "abc");
    }

    fn source(url: &str, id: &str, secret: &str) -> Result<TokenSource, String> {
        TokenSource::from_config(&ClientSecurityConfig {
            sasl_oauthbearer_token_endpoint_url: url.into(),
            sasl_oauthbearer_client_id: id.into(),
            sasl_oauthbearer_client_secret: secret.into(),
            ..ClientSecurityConfig::default()
        })
    }

    #[test]
    fn token_sources_are_an_endpoint_or_a_file() {
        assert!(matches!(source("http://idp/token", "id", "s").unwrap(), TokenSource::Endpoint(_)));
        assert!(matches!(source("file:///run/token", "", "").unwrap(), TokenSource::File(_)));
        assert!(source("ftp://x", "id", "s").is_err());
        assert!(source("http://idp/t", "", "").unwrap_err().contains("client.id"));
    }

    #[test]
    fn the_jwt_bearer_grant_sends_the_assertion_and_no_secret() {
        let req = jwt_bearer_request("idp", "/token", "aa.bb.cc", "kafka");
        let text = String::from_utf8(req).unwrap();
        assert!(!text.contains("Authorization:"), "{text}");
        assert!(
            text.ends_with(
                "\r\n\r\ngrant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer&assertion=aa.bb.cc&scope=kafka"
            ),
            "{text}"
        );
    }

    #[tokio::test]
    async fn tokens_are_fetched_once_and_reused_until_most_of_their_life_is_gone() {
        use std::sync::Arc;
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let served = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let count = served.clone();
        tokio::spawn(async move {
            loop {
                let (mut s, _) = listener.accept().await.unwrap();
                let n = count.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                let mut buf = vec![0u8; 4096];
                let _ = s.read(&mut buf).await;
                let body = format!(r#"{{"access_token":"token-{n}","expires_in":3600}}"#);
                let reply = format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{body}", body.len());
                let _ = s.write_all(reply.as_bytes()).await;
            }
        });
        let source = source(&format!("http://{addr}/token"), "id", "secret").unwrap();
        assert_eq!(source.token().await.unwrap(), "token-0");
        assert_eq!(source.token().await.unwrap(), "token-0");
        assert_eq!(served.load(std::sync::atomic::Ordering::SeqCst), 1);
    }
}
