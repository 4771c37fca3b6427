//! Delegation tokens (KIP-48), issued and checked as Kafka's controller
//! (`DelegationTokenControlManager`) and brokers do: a token is an id and
//! an HMAC-SHA512 of that id under `security.delegation_token_secret_key`;
//! a client logs in with SCRAM, the id as its name and the base64 of the
//! HMAC as its password, and is then the token's owner. Tokens expire
//! unless renewed (`delegation_token_expiry_time_ms`) and never outlive
//! their maximum lifetime (`delegation_token_max_lifetime_ms`).
//!
//! The tokens live in `delegation-tokens.json` in the data directory,
//! written durably before any change is answered; HMACs are not stored
//! (they follow from the secret), so the file alone logs nobody in.
//! [`TokenFile`]'s operations are pure, with the time passed in.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine as _;
use serde::{Deserialize, Serialize};

use crate::error_code::ErrorCode;
use crate::security::scram::{ScramCredential, ScramMechanism};

/// The file in the data directory.
pub const FILE_NAME: &str = "delegation-tokens.json";

/// Most tokens kept at once: the file is rewritten whole on every change,
/// so its size bounds what one CreateDelegationToken costs.
pub const MAX_TOKENS: usize = 10_000;

/// Most bytes of principal names (owner, requester, renewers) one token may
/// hold: with [`MAX_TOKENS`], what bounds the file and the memory tokens
/// take (Kafka sets no limit; its principals are short).
pub const MAX_TOKEN_NAME_BYTES: usize = 4096;

/// Kafka's SCRAM iterations for token credentials
/// (`ScramMechanism.minIterations`, `DelegationTokenCache`).
const TOKEN_ITERATIONS: u32 = 4096;

/// Kafka's token settings.
#[derive(Clone)]
pub struct TokenSettings {
    /// delegation.token.secret.key: the HMAC key; tokens are off without it.
    pub secret_key: String,
    /// delegation.token.max.lifetime.ms (7 days).
    pub max_lifetime_ms: i64,
    /// delegation.token.expiry.time.ms (1 day): how long a token lives
    /// after its creation or last renewal.
    pub renew_ms: i64,
}

impl std::fmt::Debug for TokenSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the secret, in logs or panics.
        f.debug_struct("TokenSettings")
            .field("max_lifetime_ms", &self.max_lifetime_ms)
            .field("renew_ms", &self.renew_ms)
            .finish()
    }
}

impl TokenSettings {
    /// The token's HMAC (Kafka: HmacSHA512 of the id's UTF-8 bytes, keyed
    /// with the secret's).
    pub fn hmac(&self, token_id: &str) -> Vec<u8> {
        ScramMechanism::Sha512.hmac(self.secret_key.as_bytes(), token_id.as_bytes())
    }
}

/// One token, as Kafka's `TokenInformation`; principals as `User:name`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TokenInfo {
    pub token_id: String,
    pub owner: String,
    pub requester: String,
    pub renewers: Vec<String>,
    pub issue_ms: i64,
    pub expiry_ms: i64,
    pub max_ms: i64,
}

impl TokenInfo {
    pub fn owner_or_renewer(&self, principal: &str) -> bool {
        self.owner == principal || self.renewers.iter().any(|r| r == principal)
    }

    pub fn expired(&self, now_ms: i64) -> bool {
        self.max_ms < now_ms || self.expiry_ms < now_ms
    }
}

/// What CreateDelegationToken asks for.
#[derive(Debug, Clone)]
pub struct CreateToken {
    pub owner: String,
    pub requester: String,
    pub renewers: Vec<String>,
    /// Asked for; 0 or less: the server's maximum.
    pub max_lifetime_ms: i64,
}

/// The tokens, by id.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TokenFile {
    pub tokens: BTreeMap<String, TokenInfo>,
}

impl TokenFile {
    /// A new token `token_id` (Kafka: its expiry is the renewal time from
    /// now, capped by its maximum lifetime, which the request may shorten).
    pub fn create(
        &mut self,
        s: &TokenSettings,
        token_id: String,
        req: CreateToken,
        now: i64,
    ) -> Result<TokenInfo, ErrorCode> {
        let names = req.owner.len() + req.requester.len() + req.renewers.iter().map(String::len).sum::<usize>();
        if self.tokens.len() >= MAX_TOKENS || names > MAX_TOKEN_NAME_BYTES {
            return Err(ErrorCode::POLICY_VIOLATION);
        }
        let max_lifetime = match req.max_lifetime_ms > 0 {
            true => s.max_lifetime_ms.min(req.max_lifetime_ms),
            false => s.max_lifetime_ms,
        };
        let max_ms = now.saturating_add(max_lifetime);
        let token = TokenInfo {
            token_id: token_id.clone(),
            owner: req.owner,
            requester: req.requester,
            renewers: req.renewers,
            issue_ms: now,
            expiry_ms: max_ms.min(now.saturating_add(s.renew_ms)),
            max_ms,
        };
        self.tokens.insert(token_id, token.clone());
        Ok(token)
    }

    /// RenewDelegationToken of token `token_id` (the one whose HMAC the
    /// request carries) by `principal`: the new expiry.
    pub fn renew(
        &mut self,
        s: &TokenSettings,
        principal: &str,
        token_id: &str,
        renew_period_ms: i64,
        now: i64,
    ) -> Result<i64, ErrorCode> {
        let token = self.tokens.get_mut(token_id).ok_or(ErrorCode::DELEGATION_TOKEN_NOT_FOUND)?;
        if token.expired(now) {
            return Err(ErrorCode::DELEGATION_TOKEN_EXPIRED);
        }
        if !token.owner_or_renewer(principal) {
            return Err(ErrorCode::DELEGATION_TOKEN_OWNER_MISMATCH);
        }
        let period = match renew_period_ms > 0 {
            true => s.renew_ms.min(renew_period_ms),
            false => s.renew_ms,
        };
        token.expiry_ms = token.max_ms.min(now.saturating_add(period));
        Ok(token.expiry_ms)
    }

    /// ExpireDelegationToken by `principal`: a negative period removes the
    /// token now; otherwise it expires that long from now (never later
    /// than its maximum). The new expiry.
    pub fn expire(&mut self, principal: &str, token_id: &str, period_ms: i64, now: i64) -> Result<i64, ErrorCode> {
        let token = self.tokens.get_mut(token_id).ok_or(ErrorCode::DELEGATION_TOKEN_NOT_FOUND)?;
        if !token.owner_or_renewer(principal) {
            return Err(ErrorCode::DELEGATION_TOKEN_OWNER_MISMATCH);
        }
        if period_ms < 0 {
            let id = token.token_id.clone();
            self.tokens.remove(&id);
            return Ok(now);
        }
        if token.expired(now) {
            return Err(ErrorCode::DELEGATION_TOKEN_EXPIRED);
        }
        token.expiry_ms = token.max_ms.min(now.saturating_add(period_ms));
        Ok(token.expiry_ms)
    }

    /// Removes the expired tokens (Kafka's periodic sweep); how many.
    pub fn sweep(&mut self, now: i64) -> usize {
        let before = self.tokens.len();
        self.tokens.retain(|id, t| {
            let keep = !t.expired(now);
            if !keep {
                tracing::info!(token = %id, owner = %t.owner, "delegation token expired");
            }
            keep
        });
        before - self.tokens.len()
    }
}

/// A token login's credential, and who it makes the client.
#[derive(Debug, Clone)]
pub struct TokenLogin {
    pub credential: ScramCredential,
    pub owner: String,
    pub expiry_ms: i64,
}

/// Each token's HMAC, both ways: Renew and Expire name a token by its HMAC,
/// and Describe answers with it; computing them per request would cost up
/// to [`MAX_TOKENS`] HMACs each.
#[derive(Default)]
struct HmacIndex {
    by_hmac: HashMap<Vec<u8>, String>,
    by_id: HashMap<String, Vec<u8>>,
}

impl HmacIndex {
    /// Brings the index in line with `file`'s tokens.
    fn follow(&mut self, s: &TokenSettings, file: &TokenFile) {
        self.by_id.retain(|id, _| file.tokens.contains_key(id));
        self.by_hmac.retain(|_, id| file.tokens.contains_key(id));
        for id in file.tokens.keys() {
            if !self.by_id.contains_key(id) {
                let hmac = s.hmac(id);
                self.by_hmac.insert(hmac.clone(), id.clone());
                self.by_id.insert(id.clone(), hmac);
            }
        }
    }
}

/// The daemon's tokens: a snapshot read by logins and Describe, changed by
/// one writer at a time, each change durable before it is in force.
pub struct DelegationTokens {
    settings: TokenSettings,
    path: PathBuf,
    current: RwLock<Arc<TokenFile>>,
    hmacs: RwLock<HmacIndex>,
    writer: tokio::sync::Mutex<()>,
    /// Token credentials derived so far (one PBKDF2 run each), by token
    /// and mechanism; dropped with their token.
    credentials: Mutex<HashMap<(String, ScramMechanism), ScramCredential>>,
}

impl std::fmt::Debug for DelegationTokens {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DelegationTokens").field("path", &self.path).field("settings", &self.settings).finish()
    }
}

impl DelegationTokens {
    /// Loads the tokens in `data_dir` (none if the file does not exist).
    pub fn open(data_dir: &Path, settings: TokenSettings) -> Result<DelegationTokens, String> {
        let path = data_dir.join(FILE_NAME);
        let file = match std::fs::read(&path) {
            Ok(bytes) => serde_json::from_slice(&bytes).map_err(|e| format!("{}: {e}", path.display()))?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => TokenFile::default(),
            Err(e) => return Err(format!("{}: {e}", path.display())),
        };
        let mut hmacs = HmacIndex::default();
        hmacs.follow(&settings, &file);
        Ok(DelegationTokens {
            settings,
            path,
            current: RwLock::new(Arc::new(file)),
            hmacs: RwLock::new(hmacs),
            writer: tokio::sync::Mutex::new(()),
            credentials: Mutex::new(HashMap::new()),
        })
    }

    pub fn settings(&self) -> &TokenSettings {
        &self.settings
    }

    /// The tokens now.
    pub fn snapshot(&self) -> Arc<TokenFile> {
        self.current.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Applies `change` to the tokens, writes them durably and puts them in
    /// force; the answer waits for the write. A failed write changes
    /// nothing and is UNKNOWN_SERVER_ERROR.
    pub async fn change<R: Send + 'static>(
        &self,
        change: impl FnOnce(&mut TokenFile, &TokenSettings) -> Result<R, ErrorCode>,
    ) -> Result<R, ErrorCode> {
        let _writer = self.writer.lock().await;
        let before = self.snapshot();
        let mut after = (*before).clone();
        let result = change(&mut after, &self.settings)?;
        if after != *before {
            let bytes = serde_json::to_vec_pretty(&after).map_err(|_| ErrorCode::UNKNOWN_SERVER_ERROR)?;
            let path = self.path.clone();
            let written =
                tokio::task::spawn_blocking(move || crate::storage::fsutil::write_atomically(&path, &bytes)).await;
            if let Err(e) = written.map_err(|e| e.to_string()).and_then(|r| r.map_err(|e| e.to_string())) {
                tracing::error!(error = %e, path = %self.path.display(), "the delegation tokens could not be written");
                return Err(ErrorCode::UNKNOWN_SERVER_ERROR);
            }
            let after = Arc::new(after);
            self.hmacs.write().unwrap_or_else(|e| e.into_inner()).follow(&self.settings, &after);
            *self.current.write().unwrap_or_else(|e| e.into_inner()) = after.clone();
            self.credentials
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .retain(|(id, _), _| after.tokens.contains_key(id));
        }
        Ok(result)
    }

    /// The id of the token with this HMAC.
    pub fn token_id(&self, hmac: &[u8]) -> Option<String> {
        self.hmacs.read().unwrap_or_else(|e| e.into_inner()).by_hmac.get(hmac).cloned()
    }

    /// The HMAC of token `token_id`, if it exists.
    pub fn hmac(&self, token_id: &str) -> Option<Vec<u8>> {
        self.hmacs.read().unwrap_or_else(|e| e.into_inner()).by_id.get(token_id).cloned()
    }

    /// The login of token `token_id` with `mechanism`, unless it is unknown
    /// or expired. Derives the token's credential the first time (a PBKDF2
    /// run; see [`Self::prepare`]).
    pub fn login(&self, token_id: &str, mechanism: ScramMechanism, now_ms: i64) -> Option<TokenLogin> {
        let token = self.snapshot().tokens.get(token_id).filter(|t| !t.expired(now_ms)).cloned()?;
        let key = (token_id.to_string(), mechanism);
        let cached = self.credentials.lock().unwrap_or_else(|e| e.into_inner()).get(&key).cloned();
        let credential = match cached {
            Some(c) => c,
            None => {
                let mut salt = vec![0u8; 16];
                crate::security::random_bytes(&mut salt);
                let password = B64.encode(self.settings.hmac(token_id));
                let c = ScramCredential::derive(mechanism, &password, salt, TOKEN_ITERATIONS);
                self.credentials.lock().unwrap_or_else(|e| e.into_inner()).insert(key, c.clone());
                c
            }
        };
        Some(TokenLogin { credential, owner: token.owner, expiry_ms: token.expiry_ms })
    }

    /// Derives the credential of a token about to log in, off the async
    /// threads, so that [`Self::login`] finds it ready.
    pub async fn prepare(self: &Arc<Self>, token_id: &str, mechanism: ScramMechanism) {
        let (tokens, id) = (self.clone(), token_id.to_string());
        let _ =
            tokio::task::spawn_blocking(move || tokens.login(&id, mechanism, crate::wall_clock::wall_clock_ms())).await;
    }

    /// Removes expired tokens every `interval` (Kafka:
    /// delegation.token.expiry.check.interval.ms) until shutdown.
    pub async fn sweep_every(
        self: Arc<Self>,
        interval: std::time::Duration,
        mut shutdown: tokio::sync::watch::Receiver<bool>,
    ) {
        let mut tick = tokio::time::interval(interval);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        tick.tick().await;
        loop {
            tokio::select! {
                _ = tick.tick() => {}
                _ = shutdown.changed() => return,
            }
            let now = crate::wall_clock::wall_clock_ms();
            if self.snapshot().tokens.values().any(|t| t.expired(now)) {
                let _ = self.change(|f, _| Ok(f.sweep(now))).await;
            }
        }
    }
}

/// A new token id: a random UUID in Kafka's base64 form (22 characters,
/// URL-safe, no padding), as `Uuid.randomUuid().toString()`.
pub fn new_token_id() -> String {
    let mut bytes = [0u8; 16];
    crate::security::random_bytes(&mut bytes);
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    const DAY: i64 = 86_400_000;

    fn settings() -> TokenSettings {
        TokenSettings { secret_key: "s3cret".into(), max_lifetime_ms: 7 * DAY, renew_ms: DAY }
    }

    fn create(file: &mut TokenFile, id: &str, renewers: &[&str], max_lifetime_ms: i64, now: i64) -> TokenInfo {
        let req = CreateToken {
            owner: "User:carol".into(),
            requester: "User:carol".into(),
            renewers: renewers.iter().map(|r| r.to_string()).collect(),
            max_lifetime_ms,
        };
        file.create(&settings(), id.into(), req, now).unwrap()
    }

    #[test]
    fn a_token_lives_a_renewal_period_and_renewing_never_passes_its_maximum() {
        let (s, mut f) = (settings(), TokenFile::default());
        let t = create(&mut f, "t1", &["User:dave"], 0, 1_000);
        assert_eq!((t.issue_ms, t.expiry_ms, t.max_ms), (1_000, 1_000 + DAY, 1_000 + 7 * DAY));
        // The owner or a renewer; the asked period is capped by the server's.
        assert_eq!(f.renew(&s, "User:dave", "t1", 3_600_000, 2_000), Ok(2_000 + 3_600_000));
        assert_eq!(f.renew(&s, "User:carol", "t1", 30 * DAY, 3_000), Ok(3_000 + DAY));
        // Renewed every day, it lives to its maximum and no longer.
        for day in 1..6 {
            assert_eq!(f.renew(&s, "User:carol", "t1", -1, day * DAY + 1_500), Ok((day + 1) * DAY + 1_500));
        }
        assert_eq!(f.renew(&s, "User:carol", "t1", -1, 6 * DAY + 1_500), Ok(7 * DAY + 1_000));
        assert_eq!(f.renew(&s, "User:mallory", "t1", 0, 4_000), Err(ErrorCode::DELEGATION_TOKEN_OWNER_MISMATCH));
        assert_eq!(f.renew(&s, "User:carol", "t9", 0, 4_000), Err(ErrorCode::DELEGATION_TOKEN_NOT_FOUND));
        assert_eq!(f.renew(&s, "User:carol", "t1", 0, 7 * DAY + 1_001), Err(ErrorCode::DELEGATION_TOKEN_EXPIRED));
        // A shorter maximum lifetime asked for at creation.
        let short = create(&mut f, "t2", &[], 60_000, 0);
        assert_eq!((short.expiry_ms, short.max_ms), (60_000, 60_000));
    }

    #[test]
    fn expiring_with_a_negative_period_removes_the_token_and_a_positive_one_shortens_it() {
        let mut f = TokenFile::default();
        create(&mut f, "t1", &["User:dave"], 0, 0);
        assert_eq!(f.expire("User:mallory", "t1", -1, 10), Err(ErrorCode::DELEGATION_TOKEN_OWNER_MISMATCH));
        assert_eq!(f.expire("User:dave", "t1", 5_000, 10), Ok(5_010));
        assert_eq!(f.expire("User:carol", "t1", 0, 6_000), Err(ErrorCode::DELEGATION_TOKEN_EXPIRED));
        assert_eq!(f.expire("User:carol", "t1", -1, 6_000), Ok(6_000));
        assert!(f.tokens.is_empty());
        assert_eq!(f.expire("User:carol", "t1", -1, 6_000), Err(ErrorCode::DELEGATION_TOKEN_NOT_FOUND));
    }

    #[test]
    fn the_sweep_removes_only_expired_tokens_and_the_count_is_bounded() {
        let mut f = TokenFile::default();
        create(&mut f, "old", &[], 1_000, 0);
        create(&mut f, "new", &[], 0, 0);
        assert_eq!(f.sweep(1_001), 1);
        assert_eq!(f.tokens.keys().collect::<Vec<_>>(), ["new"]);
        for i in f.tokens.len()..MAX_TOKENS {
            create(&mut f, &format!("t{i}"), &[], 0, 0);
        }
        let req =
            CreateToken { owner: "User:a".into(), requester: "User:a".into(), renewers: vec![], max_lifetime_ms: 0 };
        assert_eq!(f.create(&settings(), "one-more".into(), req, 0), Err(ErrorCode::POLICY_VIOLATION));
        // A token's names are bounded too, whatever the request may carry.
        let mut f = TokenFile::default();
        let many = CreateToken {
            owner: "User:a".into(),
            requester: "User:a".into(),
            renewers: (0..1_000).map(|i| format!("User:renewer-{i}")).collect(),
            max_lifetime_ms: 0,
        };
        assert_eq!(f.create(&settings(), "t".into(), many, 0), Err(ErrorCode::POLICY_VIOLATION));
        assert!(f.tokens.is_empty());
    }

    #[test]
    fn the_hmac_is_kafkas_hmac_sha512_of_the_id_under_the_secret() {
        // HMAC-SHA512(key "s3cret", "t1"), from Python's hmac module.
        assert_eq!(
            B64.encode(settings().hmac("t1")),
            "CSa+r9VJhyxGuWICXZpO7fyShThCiQe6huDMALjJLF/mGmx/3Jw1SGpTxEUDQ/XHPhjFwusqvSFQ+oHoOuoQRw=="
        );
    }

    #[tokio::test]
    async fn changes_are_durable_and_a_token_logs_in_as_its_owner_until_it_expires() {
        let dir = tempfile::tempdir().unwrap();
        let tokens = Arc::new(DelegationTokens::open(dir.path(), settings()).unwrap());
        let req = CreateToken {
            owner: "User:carol".into(),
            requester: "User:carol".into(),
            renewers: vec![],
            max_lifetime_ms: 0,
        };
        let t = tokens.change(|f, s| f.create(s, "t1".into(), req, 1_000)).await.unwrap();
        let reopened = DelegationTokens::open(dir.path(), settings()).unwrap();
        assert_eq!(reopened.snapshot().tokens.get("t1"), Some(&t));
        // Renew and Expire find the token by its HMAC, after a restart too.
        let hmac = settings().hmac("t1");
        assert_eq!((tokens.token_id(&hmac), reopened.token_id(&hmac)), (Some("t1".into()), Some("t1".into())));
        assert_eq!(reopened.hmac("t1"), Some(hmac.clone()));
        assert_eq!(tokens.token_id(b"another"), None);
        let text = std::fs::read_to_string(dir.path().join(FILE_NAME)).unwrap();
        assert!(!text.contains(&B64.encode(settings().hmac("t1"))), "no HMAC in the file");
        let login = tokens.login("t1", ScramMechanism::Sha256, 2_000).unwrap();
        assert_eq!((login.owner.as_str(), login.expiry_ms), ("User:carol", t.expiry_ms));
        let password = B64.encode(settings().hmac("t1"));
        assert!(login.credential.matches_password(ScramMechanism::Sha256, &password));
        assert!(tokens.login("t1", ScramMechanism::Sha256, t.expiry_ms + 1).is_none());
        assert!(tokens.login("t2", ScramMechanism::Sha256, 2_000).is_none());
        // Another secret makes other HMACs: the old ones log nobody in.
        let other = TokenSettings { secret_key: "other".into(), ..settings() };
        let moved = DelegationTokens::open(dir.path(), other).unwrap();
        let login = moved.login("t1", ScramMechanism::Sha256, 2_000).unwrap();
        assert!(!login.credential.matches_password(ScramMechanism::Sha256, &password));
        // A removed token leaves the index.
        tokens.change(|f, _| f.expire("User:carol", "t1", -1, 3_000)).await.unwrap();
        assert_eq!((tokens.token_id(&hmac), tokens.hmac("t1")), (None, None));
    }

    #[test]
    fn token_ids_look_like_kafkas() {
        let id = new_token_id();
        assert_eq!(id.len(), 22);
        assert!(id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_'), "{id}");
        assert_ne!(id, new_token_id());
    }
}
