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
//! - from a file (`sasl.oauthbearer.token.endpoint.url=file:///path`), as
//!   Kafka's `FileJwtRetriever`: read at every login, for tokens an outside
//!   agent keeps fresh (Kubernetes projected service-account tokens,
//!   workload-identity sidecars).
//!
//! The HTTP exchange is one HTTP/1.1 request per token on its own
//! connection (`Connection: close`), TLS for https URLs with the system's
//! roots or `https.ca.location`; responses are bounded.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use base64::engine::general_purpose::{STANDARD as B64, URL_SAFE_NO_PAD as B64URL};
use base64::Engine as _;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::Instant;

/// Largest token endpoint response read.
const MAX_RESPONSE_BYTES: usize = 1 << 20;

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
            TokenSource::Endpoint(e) => write!(f, "TokenSource::Endpoint({}, client {})", e.url, e.client_id),
        }
    }
}

/// A client-credentials token endpoint and the token last fetched.
pub struct TokenEndpoint {
    url: String,
    https: bool,
    /// host:port to connect to, and the Host header.
    authority: String,
    host: String,
    path: String,
    client_id: String,
    client_secret: String,
    scope: String,
    tls: Option<Arc<rustls::ClientConfig>>,
    cached: Mutex<Option<(String, Instant)>>,
}

impl TokenSource {
    /// From the `sasl.oauthbearer.*` settings; `ca_location` holds extra
    /// PEM roots for an https endpoint (else the system's).
    pub fn new(
        url: &str,
        client_id: &str,
        client_secret: &str,
        scope: &str,
        ca_location: &str,
    ) -> Result<TokenSource, String> {
        if let Some(path) = url.strip_prefix("file://") {
            return Ok(TokenSource::File(PathBuf::from(path)));
        }
        let (https, rest) = match (url.strip_prefix("https://"), url.strip_prefix("http://")) {
            (Some(r), _) => (true, r),
            (None, Some(r)) => (false, r),
            _ => {
                return Err(format!(
                    "sasl.oauthbearer.token.endpoint.url {url:?}: expected https://, http:// or file://"
                ))
            }
        };
        let (authority, path) = match rest.find('/') {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, "/"),
        };
        if authority.is_empty() || authority.contains('@') {
            return Err(format!("sasl.oauthbearer.token.endpoint.url {url:?}: no host"));
        }
        let has_port =
            authority.rsplit_once(':').is_some_and(|(_, p)| p.parse::<u16>().is_ok()) && !authority.ends_with(']');
        let host = if has_port { authority.rsplit_once(':').map_or(authority, |(h, _)| h) } else { authority };
        let connect =
            if has_port { authority.to_string() } else { format!("{authority}:{}", if https { 443 } else { 80 }) };
        if client_id.is_empty() || client_secret.is_empty() {
            return Err("a token endpoint needs sasl.oauthbearer.client.id and sasl.oauthbearer.client.secret".into());
        }
        let tls = if https { Some(Arc::new(https_config(ca_location)?)) } else { None };
        Ok(TokenSource::Endpoint(Box::new(TokenEndpoint {
            url: url.to_string(),
            https,
            authority: connect,
            host: host.trim_start_matches('[').trim_end_matches(']').to_string(),
            path: path.to_string(),
            client_id: client_id.to_string(),
            client_secret: client_secret.to_string(),
            scope: scope.to_string(),
            tls,
            cached: Mutex::new(None),
        })))
    }

    /// A token to log in with now.
    pub async fn token(&self) -> Result<String, String> {
        match self {
            TokenSource::File(path) => {
                let read = {
                    let path = path.clone();
                    tokio::task::spawn_blocking(move || std::fs::read_to_string(path))
                };
                let text = read
                    .await
                    .map_err(|e| e.to_string())?
                    .map_err(|e| format!("token file {}: {e}", path.display()))?;
                let token = text.trim().to_string();
                if token.is_empty() {
                    return Err(format!("token file {} is empty", path.display()));
                }
                Ok(token)
            }
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
        let body = self.fetch().await.map_err(|e| format!("token endpoint {}: {e}", self.url))?;
        let (token, lifetime) = parse_token_response(&body).map_err(|e| format!("token endpoint {}: {e}", self.url))?;
        let refresh_at = now + lifetime.mul_f64(REFRESH_AT_SHARE);
        *self.cached.lock().unwrap_or_else(|e| e.into_inner()) = Some((token.clone(), refresh_at));
        Ok(token)
    }

    async fn fetch(&self) -> Result<Vec<u8>, String> {
        let request = client_credentials_request(
            &self.host_header(),
            &self.path,
            &self.client_id,
            &self.client_secret,
            &self.scope,
        );
        let tcp = TcpStream::connect(&self.authority).await.map_err(|e| format!("cannot connect: {e}"))?;
        match (&self.tls, self.https) {
            (Some(tls), true) => {
                let name = rustls::pki_types::ServerName::try_from(self.host.clone())
                    .map_err(|e| format!("host {:?}: {e}", self.host))?;
                let stream = tokio_rustls::TlsConnector::from(tls.clone())
                    .connect(name, tcp)
                    .await
                    .map_err(|e| format!("TLS: {e}"))?;
                exchange(stream, &request).await
            }
            _ => exchange(tcp, &request).await,
        }
    }

    fn host_header(&self) -> String {
        let default_port = if self.https { ":443" } else { ":80" };
        self.authority.strip_suffix(default_port).unwrap_or(&self.authority).to_string()
    }
}

/// The TLS settings for an https token endpoint.
fn https_config(ca_location: &str) -> Result<rustls::ClientConfig, String> {
    let mut roots = rustls::RootCertStore::empty();
    if ca_location.is_empty() {
        let found = rustls_native_certs::load_native_certs();
        let (added, _) = roots.add_parsable_certificates(found.certs);
        if added == 0 {
            return Err("no system CA certificates for the https token endpoint; set https.ca.location".into());
        }
    } else {
        let f = std::fs::File::open(ca_location).map_err(|e| format!("https.ca.location {ca_location}: {e}"))?;
        for cert in rustls_pemfile::certs(&mut std::io::BufReader::new(f)) {
            let cert = cert.map_err(|e| format!("https.ca.location {ca_location}: {e}"))?;
            roots.add(cert).map_err(|e| format!("https.ca.location {ca_location}: {e}"))?;
        }
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    Ok(rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_root_certificates(roots)
        .with_no_client_auth())
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
    let mut body = "grant_type=client_credentials".to_string();
    if !scope.is_empty() {
        body.push_str("&scope=");
        body.push_str(&form_encode(scope));
    }
    format!(
        "POST {path} HTTP/1.1\r\nHost: {host}\r\nAuthorization: Basic {credentials}\r\n\
         Content-Type: application/x-www-form-urlencoded\r\nAccept: application/json\r\n\
         Cache-Control: no-cache\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// Sends `request` and reads the response to its end; returns the body of
/// a 2xx answer.
async fn exchange<S: AsyncRead + AsyncWrite + Unpin>(mut stream: S, request: &[u8]) -> Result<Vec<u8>, String> {
    stream.write_all(request).await.map_err(|e| e.to_string())?;
    stream.flush().await.map_err(|e| e.to_string())?;
    let mut response = Vec::new();
    let mut chunk = [0u8; 8192];
    loop {
        let n = match stream.read(&mut chunk).await {
            Ok(n) => n,
            // A server that closes without TLS close_notify: what arrived counts.
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => 0,
            Err(e) => return Err(e.to_string()),
        };
        if n == 0 {
            break;
        }
        if response.len() + n > MAX_RESPONSE_BYTES {
            return Err(format!("a response over {MAX_RESPONSE_BYTES} bytes"));
        }
        response.extend_from_slice(chunk.get(..n).unwrap_or_default());
    }
    http_body(&response)
}

/// The body of an HTTP/1.1 response (Content-Length, chunked, or to the
/// end); an error for a status other than 2xx, with the body's start.
fn http_body(response: &[u8]) -> Result<Vec<u8>, String> {
    let end = response.windows(4).position(|w| w == b"\r\n\r\n").ok_or("no complete HTTP response")?;
    let (head, body) = response.split_at(end);
    let head = std::str::from_utf8(head).map_err(|_| "an HTTP head that is not text")?;
    let body = body.get(4..).unwrap_or_default();
    let mut lines = head.split("\r\n");
    let status: u16 = lines
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|s| s.parse().ok())
        .ok_or("no HTTP status line")?;
    let header = |name: &str| {
        head.split("\r\n").skip(1).find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.trim().eq_ignore_ascii_case(name).then(|| v.trim().to_string())
        })
    };
    let body = if header("transfer-encoding").is_some_and(|t| t.eq_ignore_ascii_case("chunked")) {
        dechunk(body)?
    } else if let Some(len) = header("content-length") {
        let len: usize = len.parse().map_err(|_| "a Content-Length that is not a number")?;
        body.get(..len).ok_or("a body shorter than its Content-Length")?.to_vec()
    } else {
        body.to_vec()
    };
    if !(200..300).contains(&status) {
        let text = String::from_utf8_lossy(&body);
        return Err(format!("HTTP {status}: {}", text.chars().take(200).collect::<String>()));
    }
    Ok(body)
}

/// A chunked transfer-encoded body, joined.
fn dechunk(mut data: &[u8]) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    loop {
        let line_end = data.windows(2).position(|w| w == b"\r\n").ok_or("a chunk without its size line")?;
        let (size_line, rest) = data.split_at(line_end);
        let size_text = std::str::from_utf8(size_line).map_err(|_| "a chunk size that is not text")?;
        let size = usize::from_str_radix(size_text.split(';').next().unwrap_or("").trim(), 16)
            .map_err(|_| "a chunk size that is not hexadecimal")?;
        data = rest.get(2..).unwrap_or_default();
        if size == 0 {
            return Ok(out);
        }
        let chunk = data.get(..size).ok_or("a chunk shorter than its size")?;
        out.extend_from_slice(chunk);
        data = data.get(size + 2..).ok_or("a chunk without its line end")?;
    }
}

/// The access token of a token endpoint's JSON answer and how long it
/// lives: the sooner of `expires_in` and the token's own `exp` (a broker
/// ends the session at `exp`), else an hour.
fn parse_token_response(body: &[u8]) -> Result<(String, Duration), String> {
    let json: serde_json::Value = serde_json::from_slice(body).map_err(|_| "an answer that is not JSON".to_string())?;
    let token = json
        .get("access_token")
        .and_then(|t| t.as_str())
        .filter(|t| !t.is_empty())
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
    fn responses_are_read_with_a_length_chunked_or_to_the_end() {
        let ok = |r: &str| http_body(r.as_bytes());
        assert_eq!(ok("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}extra").unwrap(), b"{}");
        assert_eq!(
            ok("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\n{\"a\r\n4;x=y\r\n\":1}\r\n0\r\n\r\n")
                .unwrap(),
            b"{\"a\":1}"
        );
        assert_eq!(ok("HTTP/1.0 200 OK\r\n\r\n{\"b\":2}").unwrap(), b"{\"b\":2}");
        assert!(ok("HTTP/1.1 401 Unauthorized\r\nContent-Length: 14\r\n\r\ninvalid_client")
            .unwrap_err()
            .contains("401"));
        assert!(ok("HTTP/1.1 200 OK\r\n").is_err());
        assert!(ok("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n").is_err());
        assert!(ok("HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\n{}").is_err());
    }

    #[test]
    fn a_tokens_life_comes_from_expires_in_or_the_token() {
        let (t, life) = parse_token_response(br#"{"access_token":"abc","expires_in":300}"#).unwrap();
        assert_eq!((t.as_str(), life), ("abc", Duration::from_secs(300)));
        let soon = crate::wall_clock::wall_clock_ms() / 1000 + 30;
        let jwt = format!("e30.{}.sig", B64URL.encode(format!("{{\"exp\":{soon}}}")));
        let answer = format!(r#"{{"access_token":"{jwt}","expires_in":300}}"#);
        let (_, life) = parse_token_response(answer.as_bytes()).unwrap();
        assert!(life.as_secs() <= 30, "the token's own exp is sooner: {life:?}");
        let exp = crate::wall_clock::wall_clock_ms() / 1000 + 120;
        let jwt = format!("e30.{}.sig", B64URL.encode(format!("{{\"exp\":{exp}}}")));
        let (_, life) = parse_token_response(format!(r#"{{"access_token":"{jwt}"}}"#).as_bytes()).unwrap();
        assert!((110..=120).contains(&life.as_secs()), "{life:?}");
        assert!(parse_token_response(br#"{"error":"invalid_client"}"#).unwrap_err().contains("access_token"));
    }

    #[test]
    fn endpoint_urls_are_parsed_into_where_to_connect() {
        let source = TokenSource::new("http://127.0.0.1:8080/token", "id", "secret", "", "").unwrap();
        let TokenSource::Endpoint(e) = source else { panic!() };
        assert_eq!((e.authority.as_str(), e.host.as_str(), e.path.as_str()), ("127.0.0.1:8080", "127.0.0.1", "/token"));
        assert_eq!(e.host_header(), "127.0.0.1:8080");
        let TokenSource::Endpoint(e) = TokenSource::new("http://idp", "id", "s", "", "").unwrap() else { panic!() };
        assert_eq!((e.authority.as_str(), e.path.as_str(), e.host_header().as_str()), ("idp:80", "/", "idp"));
        assert!(matches!(TokenSource::new("file:///run/token", "", "", "", "").unwrap(), TokenSource::File(_)));
        assert!(TokenSource::new("ftp://x", "id", "s", "", "").is_err());
        assert!(TokenSource::new("http://idp/t", "", "", "", "").unwrap_err().contains("client.id"));
    }

    #[tokio::test]
    async fn tokens_are_fetched_once_and_reused_until_most_of_their_life_is_gone() {
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
        let source = TokenSource::new(&format!("http://{addr}/token"), "id", "secret", "", "").unwrap();
        assert_eq!(source.token().await.unwrap(), "token-0");
        assert_eq!(source.token().await.unwrap(), "token-0");
        assert_eq!(served.load(std::sync::atomic::Ordering::SeqCst), 1);
    }
}
