//! The ACL file: the ACLs as JSON, managed by `kcoord acls add|list|remove`
//! (or edited by hand). The daemon reads it at start-up and again on SIGHUP
//! or when it changes; a file that fails to load leaves the previous ACLs in
//! force. Writes are durable: a temporary file, fsync, rename, fsync of the
//! directory.
//!
//! Format: `{"acls": [{"resource_type": "GROUP", "resource_name": "g",
//! "pattern_type": "LITERAL", "principal": "User:alice", "host": "*",
//! "operation": "READ", "permission_type": "ALLOW"}]}`

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};

use super::binding::AclBinding;
use super::decision::AclSet;
use crate::security::watched_file::WatchedFile;

/// Most ACLs a file may hold: every check scans the ACLs of the resource it
/// names, and the file is read whole.
pub const MAX_ACLS: usize = 100_000;

/// The file's contents.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AclFile {
    pub acls: Vec<AclBinding>,
}

impl AclFile {
    /// Reads an ACL file; a missing file is no ACLs.
    pub fn load(path: &Path) -> Result<AclFile, String> {
        let err = |e: String| format!("ACL file {}: {e}", path.display());
        let bytes = match std::fs::read(path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(AclFile::default()),
            Err(e) => return Err(err(e.to_string())),
        };
        let file: AclFile = serde_json::from_slice(&bytes).map_err(|e| err(e.to_string()))?;
        if file.acls.len() > MAX_ACLS {
            return Err(err(format!("{} ACLs, over the limit of {MAX_ACLS}", file.acls.len())));
        }
        for acl in &file.acls {
            acl.validate().map_err(|e| err(format!("{acl}: {e}")))?;
        }
        Ok(file)
    }

    /// Reads the file, applies `change` and writes the result durably if it
    /// changed, all under the file's edit lock (`<file>.lock`), so that
    /// `kcoord acls add|remove` and the daemon's CreateAcls and DeleteAcls
    /// never lose each other's edits.
    pub fn edit<R>(path: &Path, change: impl FnOnce(&mut Vec<AclBinding>) -> Result<R, String>) -> Result<R, String> {
        crate::storage::fsutil::edit_locked(path, "ACL file", AclFile::load, AclFile::save, |file: &mut AclFile| {
            let result = change(&mut file.acls)?;
            if file.acls.len() > MAX_ACLS {
                return Err(format!("over the limit of {MAX_ACLS} ACLs"));
            }
            Ok(result)
        })
    }

    /// Replaces the file durably (sorted, without duplicates).
    pub fn save(&self, path: &Path) -> Result<(), String> {
        let mut acls = self.acls.clone();
        acls.sort();
        acls.dedup();
        let bytes = serde_json::to_vec_pretty(&AclFile { acls }).map_err(|e| e.to_string())?;
        let err = |e: std::io::Error| format!("ACL file {}: {e}", path.display());
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(err)?;
        }
        crate::storage::fsutil::write_atomically(path, &bytes).map_err(err)
    }
}

/// The daemon's current ACLs, swapped whole on reload.
#[derive(Debug)]
pub struct AclStore {
    file: WatchedFile<AclSet>,
    /// Serializes [`AclStore::modify`] (CreateAcls and DeleteAcls).
    writing: Mutex<()>,
}

impl AclStore {
    /// Loads `path` (none: no ACLs, held in memory).
    pub fn open(path: Option<PathBuf>) -> Result<AclStore, String> {
        fn load(path: &Path) -> Result<AclSet, String> {
            Ok(AclSet::new(AclFile::load(path)?.acls))
        }
        fn loaded(path: &Path, acls: &AclSet) {
            tracing::info!(path = %path.display(), acls = acls.len(), "ACLs loaded");
        }
        Ok(AclStore { file: WatchedFile::open(path, "ACL file", load, loaded)?, writing: Mutex::new(()) })
    }

    /// ACLs held in memory only (tests, embedding).
    pub fn fixed(acls: Vec<AclBinding>) -> AclStore {
        AclStore { file: WatchedFile::fixed(AclSet::new(acls), "ACLs"), writing: Mutex::new(()) }
    }

    pub fn path(&self) -> Option<&Path> {
        self.file.path()
    }

    pub fn current(&self) -> Arc<AclSet> {
        self.file.current()
    }

    /// Reads the file again. On error the previous ACLs stay in force.
    pub fn reload(&self) -> Result<(), String> {
        self.file.reload()
    }

    /// Reloads if the file changed since the last load.
    pub fn reload_if_changed(&self) {
        self.file.reload_if_changed()
    }

    /// Changes the ACLs: reads the file, applies `change`, writes the file
    /// durably, then puts the result in force. Blocking (file I/O and
    /// fsync): call it off the async runtime.
    pub fn modify<R>(&self, change: impl FnOnce(&mut Vec<AclBinding>) -> R) -> Result<R, String> {
        let _one_at_a_time = self.writing.lock().unwrap_or_else(|e| e.into_inner());
        match self.file.path() {
            Some(path) => {
                let result = AclFile::edit(path, |acls| Ok(change(acls)))?;
                self.reload()?;
                Ok(result)
            }
            None => {
                let mut acls = self.current().bindings();
                let result = change(&mut acls);
                if acls.len() > MAX_ACLS {
                    return Err(format!("over the limit of {MAX_ACLS} ACLs"));
                }
                self.file.set(AclSet::new(acls));
                Ok(result)
            }
        }
    }
}
