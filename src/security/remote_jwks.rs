//! An identity provider's key set, fetched from its `jwks_uri` as Kafka's
//! `RefreshingHttpsJwks` fetches it: once at start-up (a daemon that cannot
//! fetch it does not start), again every refresh interval, and at once when
//! a token names a key id the set does not hold (a provider that rotated
//! its keys), at most every [`MIN_REFETCH`]. A failed refresh is logged and
//! the keys already held stay in force.

use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use tokio::time::Instant;

use super::http_client::{HttpClient, HttpUrl};
use super::jwt::JwkSet;

/// Least time between two fetches caused by unknown key ids, so that
/// tokens with made-up ids cannot make kcoord hammer the provider (at most
/// one fetch every two seconds, whatever the clients send).
pub const MIN_REFETCH: Duration = Duration::from_secs(2);

pub struct RemoteJwks {
    http: HttpClient,
    refresh: Duration,
    current: RwLock<Arc<JwkSet>>,
    /// When a fetch was last tried.
    last_try: Mutex<Option<Instant>>,
    /// One fetch at a time.
    fetching: tokio::sync::Mutex<()>,
}

impl std::fmt::Debug for RemoteJwks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "RemoteJwks({:?})", self.http)
    }
}

impl RemoteJwks {
    /// Fetches the key set from `url` (https roots from `ca_location`, else
    /// the system's) and keeps it.
    pub async fn open(url: &str, ca_location: &str, refresh: Duration) -> Result<Arc<RemoteJwks>, String> {
        let url = HttpUrl::parse(url, "security.oauthbearer_jwks_endpoint_url")?;
        let jwks = Arc::new(RemoteJwks {
            http: HttpClient::new(url, ca_location)?,
            refresh,
            current: RwLock::new(Arc::default()),
            last_try: Mutex::new(None),
            fetching: tokio::sync::Mutex::new(()),
        });
        jwks.fetch().await?;
        Ok(jwks)
    }

    pub fn current(&self) -> Arc<JwkSet> {
        self.current.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    fn since_last_try(&self) -> Option<Duration> {
        self.last_try.lock().unwrap_or_else(|e| e.into_inner()).map(|t| t.elapsed())
    }

    async fn fetch(&self) -> Result<(), String> {
        let result = self.fetch_once().await;
        let outcome = if result.is_ok() { "success" } else { "failure" };
        metrics::counter!("kcoord_oauthbearer_jwks_fetches_total", "result" => outcome).increment(1);
        result
    }

    async fn fetch_once(&self) -> Result<(), String> {
        let _one = self.fetching.lock().await;
        *self.last_try.lock().unwrap_or_else(|e| e.into_inner()) = Some(Instant::now());
        let url = &self.http.url.url;
        let body = self.http.get().await.map_err(|e| format!("JWKS {url}: {e}"))?;
        let set = JwkSet::parse(&body).map_err(|e| format!("JWKS {url}: {e}"))?;
        if set.keys.is_empty() {
            return Err(format!("JWKS {url}: no RSA or EC signing key"));
        }
        let keys = set.keys.len();
        *self.current.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(set);
        tracing::info!(%url, keys, "OAUTHBEARER key set fetched");
        Ok(())
    }

    /// Fetches the set again if the refresh interval has passed.
    pub async fn refresh_if_due(&self) {
        if self.since_last_try().is_none_or(|t| t >= self.refresh) {
            if let Err(e) = self.fetch().await {
                tracing::error!(error = %e, "cannot refresh the OAUTHBEARER key set; the keys held stay in force");
            }
        }
    }

    /// Makes sure a key named `kid` is looked for: fetches the set again
    /// when it has none, unless a fetch was tried within [`MIN_REFETCH`].
    pub async fn look_for(&self, kid: &str) {
        if self.current().keys.iter().any(|k| k.kid.as_deref() == Some(kid)) {
            return;
        }
        if self.since_last_try().is_some_and(|t| t < MIN_REFETCH) {
            return;
        }
        if let Err(e) = self.fetch().await {
            tracing::error!(error = %e, "cannot refresh the OAUTHBEARER key set; the keys held stay in force");
        }
    }
}
