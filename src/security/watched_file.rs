//! A value read from a file and swapped whole when the file changes (on
//! SIGHUP, or when its modification time or size differ from the last
//! load's), with the previous value kept in force when the new content does
//! not load. The credentials file, the ACL file and the OAUTHBEARER key set
//! live in one.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};
use std::time::SystemTime;

pub struct WatchedFile<T> {
    path: Option<PathBuf>,
    /// What the file holds, for log lines ("credentials file").
    what: &'static str,
    load: fn(&Path) -> Result<T, String>,
    /// Logs what a load brought in (how many users, ACLs, keys).
    loaded: fn(&Path, &T),
    current: RwLock<Arc<T>>,
    /// Modification time and length of the file last loaded.
    seen: Mutex<Option<(SystemTime, u64)>>,
}

impl<T: std::fmt::Debug> std::fmt::Debug for WatchedFile<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WatchedFile").field("path", &self.path).field("what", &self.what).finish_non_exhaustive()
    }
}

impl<T: Default> WatchedFile<T> {
    /// Loads `path` with `load`, reporting each load with `loaded` (no
    /// path: `T::default()` for good).
    pub fn open(
        path: Option<PathBuf>,
        what: &'static str,
        load: fn(&Path) -> Result<T, String>,
        loaded: fn(&Path, &T),
    ) -> Result<Self, String> {
        let file = WatchedFile {
            path,
            what,
            load,
            loaded,
            current: RwLock::new(Arc::new(T::default())),
            seen: Mutex::new(None),
        };
        file.reload()?;
        Ok(file)
    }
}

impl<T> WatchedFile<T> {
    /// A value held in memory only (tests, embedding).
    pub fn fixed(value: T, what: &'static str) -> Self {
        WatchedFile {
            path: None,
            what,
            load: |_| Err("a fixed value has no file".into()),
            loaded: |_, _| {},
            current: RwLock::new(Arc::new(value)),
            seen: Mutex::new(None),
        }
    }

    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    /// Puts `value` in force (a store without a file, changed in memory).
    pub fn set(&self, value: T) {
        *self.current.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(value);
    }

    pub fn current(&self) -> Arc<T> {
        self.current.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    fn stamp(path: &Path) -> Option<(SystemTime, u64)> {
        std::fs::metadata(path).ok().and_then(|m| Some((m.modified().ok()?, m.len())))
    }

    /// Reads the file again. On error the previous value stays in force.
    pub fn reload(&self) -> Result<(), String> {
        let Some(path) = &self.path else { return Ok(()) };
        let stamp = Self::stamp(path);
        let value = (self.load)(path)?;
        (self.loaded)(path, &value);
        *self.current.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(value);
        *self.seen.lock().unwrap_or_else(|e| e.into_inner()) = stamp;
        Ok(())
    }

    /// Reloads if the file's modification time or size changed since the
    /// last load; a file that does not load is not retried until it
    /// changes again.
    pub fn reload_if_changed(&self) {
        let Some(path) = &self.path else { return };
        let stamp = Self::stamp(path);
        if stamp == *self.seen.lock().unwrap_or_else(|e| e.into_inner()) {
            return;
        }
        if let Err(e) = self.reload() {
            tracing::error!(error = %e, "cannot reload the {}; the previous one stays in force", self.what);
            *self.seen.lock().unwrap_or_else(|e| e.into_inner()) = stamp;
        }
    }
}
