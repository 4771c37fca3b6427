//! Authorization: ACLs with the semantics of Kafka's `StandardAuthorizer`.
//!
//! - [`binding`]: what an ACL is (Kafka's resource types, pattern types,
//!   operations and permissions, with Kafka's names and codes);
//! - [`decision`]: the pure decision, `(acls, principal, host, operation,
//!   resource) -> allowed?`, rule for rule as `StandardAuthorizerData`;
//! - [`store`]: the ACL file, written durably and reloaded on change or
//!   SIGHUP like the credentials file;
//! - [`Authorizer`]: what the request layer asks (`server::authorize`).
//!
//! With the authorizer disabled (the default), every request is allowed and
//! "authorized operations" report every operation of the resource type, as
//! Kafka does without `authorizer.class.name`.

pub mod binding;
pub mod decision;
pub mod filter;
pub mod store;

use std::sync::Arc;

use serde::{Deserialize, Serialize};

pub use binding::{AclBinding, Operation, PatternType, Permission, ResourceType};
pub use decision::AclSet;
pub use store::AclStore;

/// Kafka's name of the one CLUSTER resource.
pub const CLUSTER_NAME: &str = "kafka-cluster";

/// `[authorizer]` in the configuration file.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AuthorizerConfig {
    /// Enforce ACLs (Kafka: `authorizer.class.name =
    /// org.apache.kafka.metadata.authorizer.StandardAuthorizer`).
    pub enabled: bool,
    /// The ACL file `kcoord acls` manages; empty means `acls.json` in the
    /// data directory.
    pub acl_file: String,
    /// Principals allowed everything, separated by semicolons (Kafka:
    /// `super.users`), e.g. `"User:admin;User:CN=ops"`.
    pub super_users: String,
    /// Allow a request on a resource no ACL names at all (Kafka:
    /// `allow.everyone.if.no.acl.found`).
    pub allow_everyone_if_no_acl_found: bool,
}

impl AuthorizerConfig {
    /// The ACL file this configuration uses.
    pub fn acl_path(&self, data_dir: &std::path::Path) -> std::path::PathBuf {
        match self.acl_file.is_empty() {
            true => data_dir.join("acls.json"),
            false => std::path::PathBuf::from(&self.acl_file),
        }
    }

    /// The `super_users` principals; an entry without `Type:` is refused,
    /// as Kafka refuses it.
    pub fn parsed_super_users(&self) -> Result<Vec<String>, String> {
        self.super_users
            .split(';')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(|s| binding::check_principal(s).map(|()| s.to_string()))
            .collect()
    }
}

/// The daemon's authorizer: disabled (allow everything) or enforcing the
/// ACLs of its store.
#[derive(Debug)]
pub struct Authorizer {
    enforcing: Option<Enforcing>,
}

#[derive(Debug)]
struct Enforcing {
    store: Arc<AclStore>,
    super_users: std::collections::HashSet<String>,
    allow_if_no_acl: bool,
}

impl Authorizer {
    /// Allows everything (no `[authorizer]`, or `enabled = false`).
    pub fn disabled() -> Authorizer {
        Authorizer { enforcing: None }
    }

    /// Builds the authorizer the configuration asks for, loading the ACL
    /// file (a missing file is no ACLs; a broken one is an error).
    pub fn from_config(config: &AuthorizerConfig, data_dir: &std::path::Path) -> Result<Authorizer, String> {
        if !config.enabled {
            return Ok(Authorizer::disabled());
        }
        let store = Arc::new(AclStore::open(Some(config.acl_path(data_dir)))?);
        Ok(Authorizer::enforcing(store, config.parsed_super_users()?, config.allow_everyone_if_no_acl_found))
    }

    /// Enforces the ACLs of `store`.
    pub fn enforcing(store: Arc<AclStore>, super_users: Vec<String>, allow_if_no_acl: bool) -> Authorizer {
        Authorizer {
            enforcing: Some(Enforcing { store, super_users: super_users.into_iter().collect(), allow_if_no_acl }),
        }
    }

    pub fn is_enabled(&self) -> bool {
        self.enforcing.is_some()
    }

    /// The ACL store, when enforcing (reloaded on SIGHUP and on change).
    pub fn store(&self) -> Option<&Arc<AclStore>> {
        self.enforcing.as_ref().map(|e| &e.store)
    }

    /// Whether `principal` connecting from `host` may do `op` on the
    /// resource (Kafka's `Authorizer.authorize` for one action).
    /// Whether ACLs limit `principal` at all (enforcing, and not a super
    /// user).
    pub fn restricts(&self, principal: &str) -> bool {
        self.enforcing.as_ref().is_some_and(|e| !e.super_users.contains(principal))
    }

    pub fn authorize(&self, principal: &str, host: &str, op: Operation, rt: ResourceType, name: &str) -> bool {
        let Some(e) = &self.enforcing else { return true };
        if e.super_users.contains(principal) {
            return true;
        }
        e.store.current().authorize(principal, host, op, rt, name, e.allow_if_no_acl)
    }

    /// Kafka's `authorizeByResourceType`: whether `principal` may do `op` on
    /// at least one resource of the type (InitProducerId without a
    /// transactional id asks it for WRITE on topics).
    pub fn authorize_any(&self, principal: &str, host: &str, op: Operation, rt: ResourceType) -> bool {
        let Some(e) = &self.enforcing else { return true };
        if e.super_users.contains(principal) {
            return true;
        }
        // Kafka first asks about a resource named "hardcode": that answers
        // the no-ACL default and the LITERAL "*" ACLs.
        if self.authorize(principal, host, op, rt, "hardcode") {
            return true;
        }
        e.store.current().allows_some(principal, host, op, rt)
    }

    /// The bit field of operations `principal` may do on the resource, out
    /// of those its type supports (Kafka's "authorized operations").
    pub fn authorized_operations(&self, principal: &str, host: &str, rt: ResourceType, name: &str) -> i32 {
        let allowed =
            rt.supported_operations().iter().copied().filter(|&op| self.authorize(principal, host, op, rt, name));
        binding::operation_bits(allowed)
    }
}

#[cfg(test)]
mod tests;
