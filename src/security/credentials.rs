//! The credentials file: SCRAM credentials per user, salted, never plain
//! passwords. Managed by `kcoord users add|remove|list`; the daemon reads it
//! at start-up and again on SIGHUP or when the file changes.
//!
//! Format (JSON):
//! `{"users": {"alice": {"SCRAM-SHA-256": {"salt": "...", "stored_key":
//! "...", "server_key": "...", "iterations": 8192}, "SCRAM-SHA-512": {...}}}}`

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::scram::{ScramCredential, ScramMechanism};

/// Default PBKDF2 rounds for new credentials (Kafka's kafka-configs.sh
/// default is 4096; more costs each PLAIN login and each `users add`).
pub const DEFAULT_ITERATIONS: u32 = 8192;

/// The users and their credentials, as stored.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Credentials {
    /// User name → mechanism name → credential.
    pub users: BTreeMap<String, BTreeMap<String, ScramCredential>>,
}

impl Credentials {
    pub fn scram(&self, user: &str, mechanism: ScramMechanism) -> Option<&ScramCredential> {
        self.users.get(user)?.get(mechanism.name())
    }

    /// Checks a SASL/PLAIN password against the user's strongest stored
    /// credential (one PBKDF2 run).
    pub fn plain_password_matches(&self, user: &str, password: &str) -> bool {
        [ScramMechanism::Sha512, ScramMechanism::Sha256]
            .into_iter()
            .find_map(|m| self.scram(user, m).map(|c| c.matches_password(m, password)))
            .unwrap_or(false)
    }

    /// Adds or replaces `user` with fresh salts for `mechanisms`.
    pub fn set_password(&mut self, user: &str, password: &str, mechanisms: &[ScramMechanism], iterations: u32) {
        let entry = self.users.entry(user.to_string()).or_default();
        for &m in mechanisms {
            let mut salt = vec![0u8; 32];
            super::random_bytes(&mut salt);
            entry.insert(m.name().to_string(), ScramCredential::derive(m, password, salt, iterations));
        }
    }

    pub fn remove(&mut self, user: &str) -> bool {
        self.users.remove(user).is_some()
    }

    /// Reads the file at `path`, applies `change` and writes the result
    /// durably if it differs, all under the file's edit lock
    /// (`<file>.lock`), so that `kcoord users` and the daemon's
    /// AlterUserScramCredentials never lose each other's edits.
    pub fn edit<R>(path: &Path, change: impl FnOnce(&mut Credentials) -> Result<R, String>) -> Result<R, String> {
        crate::storage::fsutil::edit_locked(path, "credentials file", Credentials::load, Credentials::save, change)
    }

    /// Reads a credentials file; a missing file is no users.
    pub fn load(path: &Path) -> Result<Credentials, String> {
        match std::fs::read(path) {
            Ok(bytes) => {
                let c: Credentials =
                    serde_json::from_slice(&bytes).map_err(|e| format!("credentials file {}: {e}", path.display()))?;
                for (user, mechs) in &c.users {
                    for name in mechs.keys() {
                        if ScramMechanism::from_name(name).is_none() {
                            return Err(format!(
                                "credentials file {}: user {user:?} has an unknown mechanism {name:?}",
                                path.display()
                            ));
                        }
                    }
                }
                Ok(c)
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Credentials::default()),
            Err(e) => Err(format!("credentials file {}: {e}", path.display())),
        }
    }

    /// Writes the file atomically and durably (the directory is synced after
    /// the rename), readable by its owner only.
    pub fn save(&self, path: &Path) -> Result<(), String> {
        let bytes = serde_json::to_vec_pretty(self).map_err(|e| e.to_string())?;
        let err = |e: std::io::Error| format!("credentials file {}: {e}", path.display());
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(err)?;
        }
        let tmp = path.with_extension("tmp");
        {
            use std::io::Write;
            use std::os::unix::fs::OpenOptionsExt;
            let mut f = std::fs::OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(true)
                .mode(0o600)
                .open(&tmp)
                .map_err(err)?;
            f.write_all(&bytes).map_err(err)?;
            f.sync_all().map_err(err)?;
        }
        std::fs::rename(&tmp, path).map_err(err)?;
        let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
        std::fs::File::open(dir).and_then(|d| d.sync_all()).map_err(err)
    }
}

/// The daemon's current credentials, swapped whole on reload.
pub type CredentialStore = super::watched_file::WatchedFile<Credentials>;

/// Loads `path` (no path: no users, every SASL login fails).
pub fn open_store(path: Option<PathBuf>) -> Result<CredentialStore, String> {
    CredentialStore::open(path, "credentials file", Credentials::load, |path, c| {
        tracing::info!(path = %path.display(), users = c.users.len(), "credentials loaded");
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_saved_file_holds_no_password_and_loads_back() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("users.json");
        let mut c = Credentials::default();
        c.set_password("alice", "hunter2-secret", &ScramMechanism::ALL, 4096);
        c.save(&path).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(!text.contains("hunter2"), "{text}");
        let back = Credentials::load(&path).unwrap();
        assert_eq!(back, c);
        assert!(back.plain_password_matches("alice", "hunter2-secret"));
        assert!(!back.plain_password_matches("alice", "hunter3"));
        assert!(!back.plain_password_matches("bob", "hunter2-secret"));
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
    }

    #[test]
    fn the_store_picks_up_a_changed_file_and_keeps_the_old_one_when_the_new_is_broken() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("users.json");
        let store = open_store(Some(path.clone())).unwrap();
        assert!(store.current().users.is_empty());
        let mut c = Credentials::default();
        c.set_password("alice", "pw", &[ScramMechanism::Sha256], 4096);
        c.save(&path).unwrap();
        store.reload_if_changed();
        assert!(store.current().users.contains_key("alice"));
        std::fs::write(&path, b"{ not json").unwrap();
        store.reload_if_changed();
        assert!(store.current().users.contains_key("alice"));
    }
}
