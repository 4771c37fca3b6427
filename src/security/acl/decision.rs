//! The authorization decision, rule for rule as Kafka's
//! `StandardAuthorizerData.authorize` (super users are checked by the
//! caller, [`super::Authorizer`]):
//!
//! 1. the ACLs that apply are those on the resource's type whose pattern
//!    matches its name: LITERAL with the same name, LITERAL `*`, PREFIXED
//!    with a prefix of the name;
//! 2. of those, the ones for the principal (or `User:*`) and the host (or
//!    `*`) decide: a DENY for the operation (or ALL) denies, whatever else
//!    allows; otherwise an ALLOW for the operation, ALL or an operation that
//!    implies it (READ/WRITE/DELETE/ALTER imply DESCRIBE, ALTER_CONFIGS
//!    implies DESCRIBE_CONFIGS) allows;
//! 3. when nothing decides, the request is denied if any ACL matched the
//!    resource at all (for whoever), and otherwise follows
//!    `allow.everyone.if.no.acl.found`.

use std::collections::HashMap;

use super::binding::{AclBinding, Operation, PatternType, Permission, ResourceType};

/// A set of ACLs, indexed by the resource pattern they name.
#[derive(Debug, Default, Clone)]
pub struct AclSet {
    literal: HashMap<ResourceType, HashMap<String, Vec<AclBinding>>>,
    prefixed: HashMap<ResourceType, HashMap<String, Vec<AclBinding>>>,
    len: usize,
}

/// What a scan of the matching ACLs found.
#[derive(Debug, Default)]
struct Found {
    any_acl: bool,
    allow: bool,
    deny: bool,
}

impl AclSet {
    pub fn new(acls: impl IntoIterator<Item = AclBinding>) -> AclSet {
        let mut set = AclSet::default();
        for acl in acls {
            let index = match acl.pattern_type {
                PatternType::Literal => &mut set.literal,
                PatternType::Prefixed => &mut set.prefixed,
            };
            let entry = index.entry(acl.resource_type).or_default().entry(acl.resource_name.clone()).or_default();
            if !entry.contains(&acl) {
                entry.push(acl);
                set.len += 1;
            }
        }
        set
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Every ACL, sorted (for listing and saving).
    pub fn bindings(&self) -> Vec<AclBinding> {
        let mut all: Vec<AclBinding> = self.all().cloned().collect();
        all.sort();
        all
    }

    fn all(&self) -> impl Iterator<Item = &AclBinding> {
        self.literal.values().chain(self.prefixed.values()).flat_map(|by_name| by_name.values()).flatten()
    }

    /// The ACL groups whose pattern matches `name`.
    fn matching<'a>(&'a self, rt: ResourceType, name: &'a str) -> impl Iterator<Item = &'a AclBinding> + 'a {
        let literal = self.literal.get(&rt);
        let exact = literal.and_then(|l| l.get(name));
        let wildcard = literal.filter(|_| name != "*").and_then(|l| l.get("*"));
        let prefixed = self.prefixed.get(&rt);
        let prefixes = name
            .char_indices()
            .map(|(i, c)| i + c.len_utf8())
            .filter_map(move |end| prefixed.and_then(|p| p.get(&name[..end])));
        exact.into_iter().chain(wildcard).chain(prefixes).flatten()
    }

    fn scan(&self, principal: &str, host: &str, op: Operation, rt: ResourceType, name: &str) -> Found {
        let mut found = Found::default();
        for acl in self.matching(rt, name) {
            found.any_acl = true;
            if !acl.applies_to(principal, host) {
                continue;
            }
            match acl.permission_type {
                Permission::Deny if acl.operation.denies(op) => {
                    found.deny = true;
                    return found;
                }
                Permission::Allow if acl.operation.allows(op) => found.allow = true,
                _ => {}
            }
        }
        found
    }

    /// Kafka's decision for one action by a principal that is not a super
    /// user.
    pub fn authorize(
        &self,
        principal: &str,
        host: &str,
        op: Operation,
        rt: ResourceType,
        name: &str,
        allow_if_no_acl: bool,
    ) -> bool {
        let found = self.scan(principal, host, op, rt, name);
        match (found.deny, found.allow, found.any_acl) {
            (true, _, _) => false,
            (false, true, _) => true,
            (false, false, true) => false,
            (false, false, false) => allow_if_no_acl,
        }
    }

    /// The second half of Kafka's `authorizeByResourceType`: some ALLOW ACL
    /// for `op` on the type applies, and no DENY takes away every resource
    /// it names (a DENY on LITERAL `*`, on the same literal name, or on a
    /// prefix of its name).
    pub fn allows_some(&self, principal: &str, host: &str, op: Operation, rt: ResourceType) -> bool {
        let applies = |acl: &&AclBinding| acl.resource_type == rt && acl.applies_to(principal, host);
        let denies = |acl: &AclBinding| acl.permission_type == Permission::Deny && acl.operation.denies(op);
        let all = || self.all().filter(applies);
        let deny_literal: Vec<&str> = all()
            .filter(|a| denies(a) && a.pattern_type == PatternType::Literal)
            .map(|a| a.resource_name.as_str())
            .collect();
        if deny_literal.contains(&"*") {
            return false;
        }
        let deny_prefixed: Vec<&str> = all()
            .filter(|a| denies(a) && a.pattern_type == PatternType::Prefixed)
            .map(|a| a.resource_name.as_str())
            .collect();
        // Here an ALLOW counts only for the operation itself or ALL, with no
        // implied operations, as in Kafka.
        all().filter(|a| a.permission_type == Permission::Allow && a.operation.denies(op)).any(|a| {
            let name = a.resource_name.as_str();
            let covered_by_prefix = deny_prefixed.iter().any(|p| name.starts_with(p));
            match a.pattern_type {
                PatternType::Literal => !covered_by_prefix && !deny_literal.contains(&name),
                PatternType::Prefixed => !covered_by_prefix,
            }
        })
    }
}
