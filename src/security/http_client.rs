//! A small HTTP/1.1 client for what kcoord fetches over HTTP(S) itself: an
//! OAuth token endpoint's tokens and an identity provider's key set. One
//! request per connection (`Connection: close`), TLS for https URLs with
//! the system's roots or a given CA file, responses bounded in size and
//! read with Content-Length, chunked encoding, or to the end.

use std::sync::Arc;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;

/// Largest response read.
const MAX_RESPONSE_BYTES: usize = 1 << 20;

/// Longest wait for a whole exchange (connect, TLS, request, response):
/// a provider that hangs must not hold up a login or the key refresh.
pub const TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// Where an http(s) URL points.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpUrl {
    pub url: String,
    pub https: bool,
    /// host:port to connect to.
    pub authority: String,
    /// The host, for TLS server names.
    pub host: String,
    pub path: String,
}

impl HttpUrl {
    /// Parses an `https://` or `http://` URL; `what` names the setting in errors.
    pub fn parse(url: &str, what: &str) -> Result<HttpUrl, String> {
        let (https, rest) = match (url.strip_prefix("https://"), url.strip_prefix("http://")) {
            (Some(r), _) => (true, r),
            (None, Some(r)) => (false, r),
            _ => return Err(format!("{what} {url:?}: expected https:// or http://")),
        };
        let (authority, path) = match rest.find('/') {
            Some(i) => rest.split_at(i),
            None => (rest, "/"),
        };
        if authority.is_empty() || authority.contains('@') {
            return Err(format!("{what} {url:?}: no host"));
        }
        let port = authority.rsplit_once(':').filter(|(h, p)| p.parse::<u16>().is_ok() && !h.is_empty());
        let host = port.map_or(authority, |(h, _)| h);
        let connect = match port {
            Some(_) => authority.to_string(),
            None => format!("{authority}:{}", if https { 443 } else { 80 }),
        };
        Ok(HttpUrl {
            url: url.to_string(),
            https,
            authority: connect,
            host: host.trim_start_matches('[').trim_end_matches(']').to_string(),
            path: path.to_string(),
        })
    }

    /// The Host header: the authority without the scheme's default port.
    pub fn host_header(&self) -> String {
        let default_port = if self.https { ":443" } else { ":80" };
        self.authority.strip_suffix(default_port).unwrap_or(&self.authority).to_string()
    }
}

/// A client for one URL: TLS settings loaded once.
#[derive(Clone)]
pub struct HttpClient {
    pub url: HttpUrl,
    tls: Option<Arc<rustls::ClientConfig>>,
}

impl std::fmt::Debug for HttpClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "HttpClient({})", self.url.url)
    }
}

impl HttpClient {
    /// `ca_location`: PEM roots for https; empty: the system's.
    pub fn new(url: HttpUrl, ca_location: &str) -> Result<HttpClient, String> {
        let tls = if url.https { Some(Arc::new(https_config(ca_location)?)) } else { None };
        Ok(HttpClient { url, tls })
    }

    /// `GET` the URL; the body of a 2xx answer.
    pub async fn get(&self) -> Result<Vec<u8>, String> {
        let request = format!(
            "GET {} HTTP/1.1\r\nHost: {}\r\nAccept: application/json\r\nConnection: close\r\n\r\n",
            self.url.path,
            self.url.host_header()
        );
        self.send(request.as_bytes()).await
    }

    /// Sends a whole request (head and body); the body of a 2xx answer.
    /// Gives up after [`TIMEOUT`].
    pub async fn send(&self, request: &[u8]) -> Result<Vec<u8>, String> {
        match tokio::time::timeout(TIMEOUT, self.send_unbounded(request)).await {
            Ok(r) => r,
            Err(_) => Err(format!("no answer within {} s", TIMEOUT.as_secs())),
        }
    }

    async fn send_unbounded(&self, request: &[u8]) -> Result<Vec<u8>, String> {
        let tcp = TcpStream::connect(&self.url.authority).await.map_err(|e| format!("cannot connect: {e}"))?;
        match &self.tls {
            Some(tls) => {
                let name = rustls::pki_types::ServerName::try_from(self.url.host.clone())
                    .map_err(|e| format!("host {:?}: {e}", self.url.host))?;
                let stream = tokio_rustls::TlsConnector::from(tls.clone())
                    .connect(name, tcp)
                    .await
                    .map_err(|e| format!("TLS: {e}"))?;
                exchange(stream, request).await
            }
            None => exchange(tcp, request).await,
        }
    }
}

/// The TLS settings for an https URL.
fn https_config(ca_location: &str) -> Result<rustls::ClientConfig, String> {
    use super::keystore::TrustSource;
    let source = if ca_location.is_empty() { TrustSource::System } else { TrustSource::File(ca_location) };
    let roots = source.roots()?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    Ok(rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_root_certificates(roots)
        .with_no_client_auth())
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

#[cfg(test)]
mod tests {
    use super::*;

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
    fn urls_are_parsed_into_where_to_connect() {
        let u = HttpUrl::parse("http://127.0.0.1:8080/token", "url").unwrap();
        assert_eq!((u.authority.as_str(), u.host.as_str(), u.path.as_str()), ("127.0.0.1:8080", "127.0.0.1", "/token"));
        assert_eq!(u.host_header(), "127.0.0.1:8080");
        let u = HttpUrl::parse("https://idp", "url").unwrap();
        assert_eq!((u.authority.as_str(), u.path.as_str(), u.host_header().as_str()), ("idp:443", "/", "idp"));
        assert!(HttpUrl::parse("ftp://x", "url").is_err());
        assert!(HttpUrl::parse("http://user@host/", "url").is_err());
    }
}
