//! `kcoord acls add|list|remove`: manages the ACL file the authorizer
//! enforces, with kafka-acls.sh's vocabulary (`--allow-principal User:alice
//! --operation Read --group g --resource-pattern-type prefixed`). Each change
//! is written durably before the command reports it; a running daemon picks
//! it up within seconds (or at SIGHUP).

use std::path::PathBuf;

use crate::security::acl::store::AclFile;
use crate::security::acl::{AclBinding, Operation, PatternType, Permission, ResourceType, CLUSTER_NAME};

#[derive(clap::Subcommand, Debug)]
pub enum AclsCommand {
    /// Add ACLs (kafka-acls.sh --add).
    Add(AclArgs),
    /// List ACLs, all or those on the given resources (kafka-acls.sh --list).
    List(AclArgs),
    /// Remove ACLs (kafka-acls.sh --remove): those on the given resources
    /// that match the given principals, hosts and operations (all of them
    /// when none are given).
    Remove(AclArgs),
}

/// kafka-acls.sh's options.
#[derive(clap::Args, Debug, Default)]
pub struct AclArgs {
    /// The ACL file (setting authorizer.acl_file; by default acls.json in the data
    /// directory).
    #[arg(long)]
    pub file: PathBuf,
    #[arg(long = "allow-principal")]
    pub allow_principals: Vec<String>,
    #[arg(long = "deny-principal")]
    pub deny_principals: Vec<String>,
    /// Hosts for --allow-principal (default *).
    #[arg(long = "allow-host")]
    pub allow_hosts: Vec<String>,
    /// Hosts for --deny-principal (default *).
    #[arg(long = "deny-host")]
    pub deny_hosts: Vec<String>,
    /// Read, Write, Create, Delete, Alter, Describe, ClusterAction,
    /// DescribeConfigs, AlterConfigs, IdempotentWrite, CreateTokens,
    /// DescribeTokens, All (default All).
    #[arg(long = "operation")]
    pub operations: Vec<String>,
    #[arg(long = "topic")]
    pub topics: Vec<String>,
    #[arg(long = "group")]
    pub groups: Vec<String>,
    #[arg(long)]
    pub cluster: bool,
    #[arg(long = "transactional-id")]
    pub transactional_ids: Vec<String>,
    /// Delegation tokens, by id (DESCRIBE lets a principal see them).
    #[arg(long = "delegation-token")]
    pub delegation_tokens: Vec<String>,
    /// User resources, as `User:name` (CREATE_TOKENS lets a principal get
    /// tokens for that user, DESCRIBE_TOKENS see the user's tokens).
    #[arg(long = "user-principal")]
    pub user_principals: Vec<String>,
    /// literal or prefixed (list and remove also take any and, for list,
    /// match: the ACLs that apply to the named resources).
    #[arg(long = "resource-pattern-type")]
    pub resource_pattern_type: Option<String>,
    /// List only this principal's ACLs.
    #[arg(long = "principal")]
    pub principals: Vec<String>,
    /// Consumer ACLs: READ and DESCRIBE on the topics, READ on the groups.
    #[arg(long)]
    pub consumer: bool,
    /// Producer ACLs: WRITE, DESCRIBE and CREATE on the topics; WRITE and
    /// DESCRIBE on the transactional ids.
    #[arg(long)]
    pub producer: bool,
    /// Accepted for kafka-acls.sh compatibility (nothing is asked).
    #[arg(long)]
    pub force: bool,
}

/// Runs a command; the text to print.
pub fn run(command: AclsCommand) -> Result<String, String> {
    match command {
        AclsCommand::Add(a) => add(&a),
        AclsCommand::List(a) => list(&a),
        AclsCommand::Remove(a) => remove(&a),
    }
}

/// A resource pattern named on the command line.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Resource {
    rt: ResourceType,
    name: String,
}

fn resources(a: &AclArgs) -> Vec<Resource> {
    let mut out = Vec::new();
    let mut push = |rt, names: &[String]| out.extend(names.iter().map(|n| Resource { rt, name: n.clone() }));
    push(ResourceType::Topic, &a.topics);
    push(ResourceType::Group, &a.groups);
    push(ResourceType::TransactionalId, &a.transactional_ids);
    push(ResourceType::DelegationToken, &a.delegation_tokens);
    push(ResourceType::User, &a.user_principals);
    if a.cluster {
        out.push(Resource { rt: ResourceType::Cluster, name: CLUSTER_NAME.into() });
    }
    out
}

fn operations(a: &AclArgs) -> Result<Vec<Operation>, String> {
    a.operations.iter().map(|o| Operation::parse(o).ok_or_else(|| format!("unknown operation {o:?}"))).collect()
}

/// The pattern type of added ACLs (literal unless told).
fn pattern_for_add(a: &AclArgs) -> Result<PatternType, String> {
    match a.resource_pattern_type.as_deref() {
        None => Ok(PatternType::Literal),
        Some(p) => PatternType::parse(p)
            .ok_or_else(|| format!("--resource-pattern-type {p:?}: adding takes literal or prefixed")),
    }
}

/// (principal, permission, hosts) triples from the allow/deny options.
fn entries(a: &AclArgs) -> Vec<(String, Permission, Vec<String>)> {
    let hosts = |h: &[String]| if h.is_empty() { vec!["*".to_string()] } else { h.to_vec() };
    let allow = a.allow_principals.iter().map(|p| (p.clone(), Permission::Allow, hosts(&a.allow_hosts)));
    let deny = a.deny_principals.iter().map(|p| (p.clone(), Permission::Deny, hosts(&a.deny_hosts)));
    allow.chain(deny).collect()
}

/// The operations per resource type: --consumer/--producer, or --operation
/// (default All).
fn operations_for(a: &AclArgs, rt: ResourceType, explicit: &[Operation]) -> Vec<Operation> {
    use Operation::*;
    if a.consumer || a.producer {
        let mut ops = Vec::new();
        if a.consumer {
            ops.extend(match rt {
                ResourceType::Topic => vec![Read, Describe],
                ResourceType::Group => vec![Read],
                _ => vec![],
            });
        }
        if a.producer {
            ops.extend(match rt {
                ResourceType::Topic => vec![Write, Describe, Create],
                ResourceType::TransactionalId => vec![Write, Describe],
                _ => vec![],
            });
        }
        ops.sort();
        ops.dedup();
        return ops;
    }
    if explicit.is_empty() {
        vec![All]
    } else {
        explicit.to_vec()
    }
}

/// The ACLs the options describe.
fn bindings(a: &AclArgs, pattern: PatternType) -> Result<Vec<AclBinding>, String> {
    let explicit = operations(a)?;
    let mut out = Vec::new();
    for r in resources(a) {
        for (principal, permission, hosts) in entries(a) {
            for host in &hosts {
                for op in operations_for(a, r.rt, &explicit) {
                    let acl = AclBinding {
                        resource_type: r.rt,
                        resource_name: r.name.clone(),
                        pattern_type: pattern,
                        principal: principal.clone(),
                        host: host.clone(),
                        operation: op,
                        permission_type: permission,
                    };
                    acl.validate().map_err(|e| format!("{acl}: {e}"))?;
                    out.push(acl);
                }
            }
        }
    }
    Ok(out)
}

pub fn add(a: &AclArgs) -> Result<String, String> {
    if resources(a).is_empty() {
        return Err("name a resource: --topic, --group, --transactional-id or --cluster".into());
    }
    if a.allow_principals.is_empty() && a.deny_principals.is_empty() {
        return Err("name a principal: --allow-principal or --deny-principal".into());
    }
    let new = bindings(a, pattern_for_add(a)?)?;
    let added = AclFile::edit(&a.file, |acls| {
        let mut added = Vec::new();
        for acl in new {
            if !acls.contains(&acl) {
                added.push(acl.to_string());
                acls.push(acl);
            }
        }
        Ok(added)
    })?;
    Ok(match added.is_empty() {
        true => "No new ACLs: they were all there.\n".into(),
        false => format!("Added ACLs:\n{}\n", added.join("\n")),
    })
}

/// Which stored ACLs a list or remove names.
fn selects(a: &AclArgs, acl: &AclBinding, removing: bool) -> Result<bool, String> {
    let wanted = resources(a);
    let pattern = a.resource_pattern_type.as_deref().map(str::to_ascii_lowercase);
    let on_resource = match pattern.as_deref() {
        _ if wanted.is_empty() => !removing,
        None if removing => wanted.iter().any(|r| {
            r.rt == acl.resource_type && r.name == acl.resource_name && acl.pattern_type == PatternType::Literal
        }),
        None | Some("any") => wanted.iter().any(|r| r.rt == acl.resource_type && r.name == acl.resource_name),
        Some("match") if !removing => wanted.iter().any(|r| {
            r.rt == acl.resource_type
                && match acl.pattern_type {
                    PatternType::Literal => acl.resource_name == r.name || acl.resource_name == "*",
                    PatternType::Prefixed => r.name.starts_with(&acl.resource_name),
                }
        }),
        Some(p) => {
            let pt = PatternType::parse(p).ok_or_else(|| format!("--resource-pattern-type {p:?}"))?;
            wanted.iter().any(|r| r.rt == acl.resource_type && r.name == acl.resource_name && acl.pattern_type == pt)
        }
    };
    if !on_resource {
        return Ok(false);
    }
    if !a.principals.is_empty() && !a.principals.contains(&acl.principal) {
        return Ok(false);
    }
    if !removing {
        return Ok(true);
    }
    // Removing: the entries given narrow the selection.
    let given = entries(a);
    let explicit = operations(a)?;
    let entry_ok = given.is_empty()
        || given.iter().any(|(p, perm, hosts)| {
            *p == acl.principal
                && *perm == acl.permission_type
                && (hosts.contains(&acl.host) || (a.allow_hosts.is_empty() && a.deny_hosts.is_empty()))
        });
    let ops = operations_for(a, acl.resource_type, &explicit);
    let op_ok = (explicit.is_empty() && !a.consumer && !a.producer) || ops.contains(&acl.operation);
    Ok(entry_ok && op_ok)
}

/// Kafka's listing layout: the ACLs grouped by resource pattern.
fn render(acls: &[AclBinding]) -> String {
    let mut out = String::new();
    let mut current: Option<(ResourceType, &str, PatternType)> = None;
    for acl in acls {
        let key = (acl.resource_type, acl.resource_name.as_str(), acl.pattern_type);
        if current != Some(key) {
            if current.is_some() {
                out.push('\n');
            }
            out.push_str(&format!(
                "Current ACLs for resource `ResourcePattern(resourceType={}, name={}, patternType={})`:\n",
                acl.resource_type, acl.resource_name, acl.pattern_type
            ));
            current = Some(key);
        }
        out.push_str(&format!(
            " \t(principal={}, host={}, operation={}, permissionType={})\n",
            acl.principal, acl.host, acl.operation, acl.permission_type
        ));
    }
    out
}

pub fn list(a: &AclArgs) -> Result<String, String> {
    let file = AclFile::load(&a.file)?;
    let mut acls = Vec::new();
    for acl in file.acls {
        if selects(a, &acl, false)? {
            acls.push(acl);
        }
    }
    acls.sort();
    Ok(render(&acls))
}

pub fn remove(a: &AclArgs) -> Result<String, String> {
    if resources(a).is_empty() {
        return Err("name a resource: --topic, --group, --transactional-id or --cluster".into());
    }
    let removed = AclFile::edit(&a.file, |acls| {
        let mut removed = Vec::new();
        let mut kept = Vec::new();
        for acl in acls.drain(..) {
            match selects(a, &acl, true)? {
                true => removed.push(acl),
                false => kept.push(acl),
            }
        }
        *acls = kept;
        Ok(removed)
    })?;
    if removed.is_empty() {
        return Ok("No ACLs matched; nothing removed.\n".into());
    }
    Ok(format!("Removed ACLs:\n{}", render(&removed)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn args(file: &Path) -> AclArgs {
        AclArgs { file: file.to_path_buf(), ..Default::default() }
    }

    #[test]
    fn add_list_and_remove_speak_kafka_acls_vocabulary() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("acls.json");
        let mut a = args(&file);
        a.allow_principals = vec!["User:alice".into()];
        a.operations = vec!["Read".into(), "Describe".into()];
        a.groups = vec!["orders-".into()];
        a.resource_pattern_type = Some("prefixed".into());
        let out = add(&a).unwrap();
        assert!(out.contains("operation=READ"), "{out}");
        let mut c = args(&file);
        c.consumer = true;
        c.allow_principals = vec!["User:bob".into()];
        c.topics = vec!["t".into()];
        c.groups = vec!["g".into()];
        add(&c).unwrap();
        let stored = AclFile::load(&file).unwrap().acls;
        assert_eq!(stored.len(), 5, "{stored:?}");

        let mut l = args(&file);
        l.groups = vec!["orders-eu".into()];
        l.resource_pattern_type = Some("match".into());
        let listed = list(&l).unwrap();
        assert!(listed.contains("name=orders-, patternType=PREFIXED"), "{listed}");
        assert!(!listed.contains("User:bob"), "{listed}");
        let all = list(&args(&file)).unwrap();
        assert_eq!(all.matches("principal=").count(), 5, "{all}");

        let mut r = args(&file);
        r.groups = vec!["orders-".into()];
        r.resource_pattern_type = Some("prefixed".into());
        r.allow_principals = vec!["User:alice".into()];
        r.operations = vec!["Describe".into()];
        let out = remove(&r).unwrap();
        assert!(out.contains("operation=DESCRIBE") && !out.contains("operation=READ"), "{out}");
        let mut r = args(&file);
        r.topics = vec!["t".into()];
        remove(&r).unwrap();
        let left: Vec<_> = AclFile::load(&file).unwrap().acls;
        assert_eq!(left.len(), 2, "{left:?}");
        assert!(left.iter().all(|a| a.resource_type == ResourceType::Group));
    }

    #[test]
    fn a_malformed_principal_or_operation_is_refused_and_nothing_is_written() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("acls.json");
        let mut a = args(&file);
        a.allow_principals = vec!["alice".into()];
        a.groups = vec!["g".into()];
        assert!(add(&a).unwrap_err().contains("Type:name"));
        a.allow_principals = vec!["User:alice".into()];
        a.operations = vec!["Fly".into()];
        assert!(add(&a).unwrap_err().contains("Fly"));
        assert!(!file.exists());
    }
}
