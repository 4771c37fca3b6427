//! The authorizer against the cases of Kafka's `StandardAuthorizerTest`
//! (and `AuthorizerTest`), as a table.

use super::binding::{Operation::*, PatternType::*, Permission::*, ResourceType::*};
use super::*;

const LOCAL: &str = "127.0.0.1";

fn acl(
    rt: ResourceType,
    name: &str,
    pt: PatternType,
    principal: &str,
    host: &str,
    op: Operation,
    p: Permission,
) -> AclBinding {
    AclBinding {
        resource_type: rt,
        resource_name: name.into(),
        pattern_type: pt,
        principal: principal.into(),
        host: host.into(),
        operation: op,
        permission_type: p,
    }
}

/// (user, host, operation, resource type, resource name, expected allowed)
type Case<'a> = (&'a str, &'a str, Operation, ResourceType, &'a str, bool);

fn check(name: &str, acls: Vec<AclBinding>, allow_if_no_acl: bool, cases: &[Case]) {
    let authorizer = Authorizer::enforcing(Arc::new(AclStore::fixed(acls)), vec!["User:admin".into()], allow_if_no_acl);
    for &(user, host, op, rt, resource, expected) in cases {
        let principal = format!("User:{user}");
        assert_eq!(
            authorizer.authorize(&principal, host, op, rt, resource),
            expected,
            "{name}: {principal}@{host} {op} {rt}:{resource}"
        );
    }
}

fn foo_prefixed_for_bob(op: Operation, p: Permission) -> AclBinding {
    acl(Topic, "foo_", Prefixed, "User:bob", "*", op, p)
}

fn bar_group_for_everyone(op: Operation, p: Permission) -> AclBinding {
    acl(Group, "bar", Literal, "User:*", "*", op, p)
}

#[test]
fn allow_everyone_if_no_acl_found_applies_only_to_resources_no_acl_names() {
    let acls = || vec![acl(Topic, "topic1", Literal, "User:Alice", "*", Read, Allow)];
    check(
        "enabled",
        acls(),
        true,
        &[("bob", LOCAL, Read, Topic, "topic1", false), ("bob", LOCAL, Read, Topic, "topic2", true)],
    );
    check(
        "disabled",
        acls(),
        false,
        &[("bob", LOCAL, Read, Topic, "topic1", false), ("bob", LOCAL, Read, Topic, "topic2", false)],
    );
}

#[test]
fn read_write_delete_and_alter_imply_describe_and_alter_configs_implies_describe_configs() {
    for op in [Read, Write, Delete, Alter, Describe, All] {
        check(
            "implied describe",
            vec![foo_prefixed_for_bob(op, Allow)],
            false,
            &[("bob", LOCAL, Describe, Topic, "foo_bar", true)],
        );
    }
    check(
        "create implies nothing",
        vec![foo_prefixed_for_bob(Create, Allow)],
        false,
        &[("bob", LOCAL, Describe, Topic, "foo_bar", false)],
    );
    for op in [Read, Write, Delete, Alter] {
        // A DENY implies nothing: DENY READ does not deny DESCRIBE.
        let acls = vec![foo_prefixed_for_bob(op, Deny), foo_prefixed_for_bob(Describe, Allow)];
        check("deny implies nothing", acls, false, &[("bob", LOCAL, Describe, Topic, "foo_bar", true)]);
    }
    check(
        "deny describe",
        vec![foo_prefixed_for_bob(Describe, Deny)],
        false,
        &[("bob", LOCAL, Describe, Topic, "foo_bar", false)],
    );
    for op in [AlterConfigs, DescribeConfigs, All] {
        check(
            "implied describe configs",
            vec![foo_prefixed_for_bob(op, Allow)],
            false,
            &[("bob", LOCAL, DescribeConfigs, Topic, "foo_bar", true)],
        );
    }
    let acls = vec![foo_prefixed_for_bob(AlterConfigs, Deny), foo_prefixed_for_bob(DescribeConfigs, Allow)];
    check(
        "deny alter configs",
        acls,
        false,
        &[
            ("bob", LOCAL, DescribeConfigs, Topic, "foo_bar", true),
            ("bob", LOCAL, AlterConfigs, Topic, "foo_bar", false),
        ],
    );
}

#[test]
fn an_acl_applies_to_its_principal_and_to_the_wildcard_principal_only() {
    check(
        "named",
        vec![foo_prefixed_for_bob(Read, Allow)],
        false,
        &[("bob", LOCAL, Read, Topic, "foo_bar", true), ("alice", LOCAL, Read, Topic, "foo_bar", false)],
    );
    check("wildcard", vec![bar_group_for_everyone(Read, Deny)], true, &[("alice", LOCAL, Read, Group, "bar", false)]);
}

#[test]
fn simple_authorizations() {
    let acls = vec![
        foo_prefixed_for_bob(Read, Allow),
        foo_prefixed_for_bob(Write, Allow),
        bar_group_for_everyone(DescribeConfigs, Allow),
        bar_group_for_everyone(AlterConfigs, Allow),
    ];
    check(
        "simple",
        acls,
        false,
        &[("bob", LOCAL, Read, Topic, "foo_", true), ("fred", LOCAL, AlterConfigs, Group, "bar", true)],
    );
}

#[test]
fn deny_wins_over_allow_with_operation_all() {
    let acls = vec![
        acl(Topic, "foo", Literal, "User:alice", "*", All, Deny),
        acl(Topic, "foo", Prefixed, "User:alice", "*", Read, Allow),
        acl(Topic, "foo", Literal, "User:*", "*", All, Deny),
        acl(Topic, "foo", Prefixed, "User:*", "*", Describe, Allow),
    ];
    check(
        "deny precedence",
        acls,
        false,
        &[
            ("alice", LOCAL, Write, Topic, "foo", false),
            ("alice", LOCAL, Read, Topic, "foo", false),
            ("alice", LOCAL, Describe, Topic, "foo", false),
            ("alice", LOCAL, Read, Topic, "foobar", true),
            ("bob", LOCAL, Describe, Topic, "foo", false),
            ("bob", LOCAL, Read, Topic, "foo", false),
            ("bob", LOCAL, Write, Topic, "foo", false),
            ("bob", LOCAL, Describe, Topic, "foobaz", true),
            ("bob", LOCAL, Read, Topic, "foobaz", false),
        ],
    );
}

#[test]
fn operation_all_allows_every_operation() {
    let acls = vec![
        acl(Topic, "foo", Literal, "User:*", "*", All, Allow),
        acl(Topic, "bar", Prefixed, "User:alice", "*", All, Allow),
        acl(Topic, "baz", Literal, "User:bob", "*", All, Allow),
    ];
    check(
        "operation all",
        acls,
        false,
        &[
            ("alice", LOCAL, Write, Topic, "foo", true),
            ("alice", LOCAL, DescribeConfigs, Topic, "bar", true),
            ("alice", LOCAL, Describe, Topic, "baz", false),
            ("bob", LOCAL, Write, Topic, "foo", true),
            ("bob", LOCAL, Read, Topic, "bar", false),
            ("bob", LOCAL, Describe, Topic, "baz", true),
            ("malory", LOCAL, Describe, Topic, "foo", true),
            ("malory", LOCAL, Write, Topic, "bar", false),
            ("malory", LOCAL, Read, Topic, "baz", false),
        ],
    );
}

#[test]
fn an_acl_applies_to_its_host_and_to_every_host_with_the_wildcard() {
    let (host1, host2) = ("192.168.1.1", "192.168.1.2");
    let acls = vec![
        acl(Topic, "foo", Literal, "User:alice", host1, Read, Deny),
        acl(Topic, "foo", Literal, "User:alice", "*", Read, Allow),
        acl(Topic, "bar", Literal, "User:bob", host2, Read, Allow),
        acl(Topic, "bar", Literal, "User:*", LOCAL, Describe, Allow),
    ];
    let mut cases = Vec::new();
    for (user, host, expected) in [
        ("alice", LOCAL, [true, false, true]),
        ("alice", host1, [false, false, false]),
        ("alice", host2, [true, false, false]),
        ("bob", LOCAL, [false, false, true]),
        ("bob", host1, [false, false, false]),
        ("bob", host2, [false, true, true]),
    ] {
        cases.push((user, host, Read, Topic, "foo", expected[0]));
        cases.push((user, host, Read, Topic, "bar", expected[1]));
        cases.push((user, host, Describe, Topic, "bar", expected[2]));
    }
    check("hosts", acls, false, &cases);
}

#[test]
fn literal_prefixed_and_wildcard_acls_combine_as_in_kafka() {
    let acls = vec![
        acl(Topic, "green2", Literal, "User:*", "*", Read, Allow),
        acl(Topic, "green", Prefixed, "User:bob", "*", Read, Allow),
        acl(Topic, "betamax4", Literal, "User:bob", "*", Read, Allow),
        acl(Topic, "betamax", Literal, "User:bob", "*", Read, Allow),
        acl(Topic, "beta", Prefixed, "User:*", "*", Read, Allow),
        acl(Topic, "alpha", Prefixed, "User:*", "*", Read, Allow),
        acl(Topic, "alp", Prefixed, "User:bob", "*", Read, Deny),
        acl(Group, "*", Literal, "User:bob", "*", Write, Allow),
        acl(Group, "wheel", Literal, "User:*", "*", Write, Deny),
    ];
    check(
        "many acls",
        acls,
        false,
        &[
            ("bob", LOCAL, Read, Topic, "green1", true),
            ("bob", LOCAL, Write, Group, "wheel", false),
            ("bob", LOCAL, Read, Topic, "alpha", false),
            ("bob", LOCAL, Write, Group, "arbitrary", true),
            ("bob", LOCAL, Read, Topic, "ala", false),
        ],
    );
}

#[test]
fn prefixed_acls_match_names_that_start_with_them() {
    let acls = vec![
        acl(Topic, "fooa", Prefixed, "User:alice", "*", All, Allow),
        acl(Topic, "foobar", Literal, "User:bob", "*", All, Allow),
        acl(Topic, "f", Prefixed, "User:bob", "*", All, Allow),
    ];
    check(
        "prefixes",
        acls,
        false,
        &[
            ("bob", LOCAL, Write, Topic, "foobarr", true),
            ("bob", LOCAL, Read, Topic, "goobar", false),
            ("bob", LOCAL, Read, Topic, "fooa", true),
            ("alice", LOCAL, Describe, Topic, "fooa", true),
            ("alice", LOCAL, Write, Topic, "bar", false),
            ("alice", LOCAL, Read, Topic, "baz", false),
        ],
    );
}

#[test]
fn a_literal_acl_is_not_a_prefix_and_resource_types_do_not_mix() {
    let acls = vec![acl(Topic, "foo", Literal, "User:bob", "*", Read, Allow)];
    check(
        "literal",
        acls,
        true,
        &[
            ("bob", LOCAL, Read, Topic, "foo", true),
            ("bob", LOCAL, Read, Topic, "foobar", true), // no ACL names foobar: allowed by the default
            ("bob", LOCAL, Read, Group, "foo", true),
            ("alice", LOCAL, Read, Topic, "foo", false),
        ],
    );
}

#[test]
fn super_users_are_allowed_everything_even_against_a_deny() {
    let acls = vec![acl(Topic, "*", Literal, "User:*", "*", All, Deny)];
    check(
        "super user",
        acls,
        false,
        &[("admin", LOCAL, Delete, Topic, "t", true), ("bob", LOCAL, Read, Topic, "t", false)],
    );
}

#[test]
fn a_disabled_authorizer_allows_everything_and_reports_every_operation() {
    let a = Authorizer::disabled();
    assert!(a.authorize("User:bob", LOCAL, Delete, Group, "g"));
    assert_eq!(a.authorized_operations("User:bob", LOCAL, Group, "g"), (1 << 3) | (1 << 6) | (1 << 8));
}

#[test]
fn every_supported_operation_is_kafkas_bit_field_without_an_authorizer() {
    // The values a Kafka broker without `authorizer.class.name` reports.
    assert_eq!(Group.all_operations(), 328);
    assert_eq!(Topic.all_operations(), 3576);
    assert_eq!(Cluster.all_operations(), 8096);
}

#[test]
fn authorized_operations_are_the_allowed_supported_operations() {
    let acls = vec![acl(Group, "g", Literal, "User:bob", "*", Read, Allow)];
    let a = Authorizer::enforcing(Arc::new(AclStore::fixed(acls)), vec![], false);
    // READ, and DESCRIBE which READ implies.
    assert_eq!(a.authorized_operations("User:bob", LOCAL, Group, "g"), (1 << 3) | (1 << 8));
    assert_eq!(a.authorized_operations("User:alice", LOCAL, Group, "g"), 0);
}

#[test]
fn authorize_any_follows_kafkas_authorize_by_resource_type() {
    let store = |acls| Authorizer::enforcing(Arc::new(AclStore::fixed(acls)), vec![], false);
    let a = store(vec![acl(Topic, "t", Literal, "User:bob", "*", Write, Allow)]);
    assert!(a.authorize_any("User:bob", LOCAL, Write, Topic));
    assert!(!a.authorize_any("User:alice", LOCAL, Write, Topic));
    let a = store(vec![
        acl(Topic, "t", Literal, "User:bob", "*", Write, Allow),
        acl(Topic, "*", Literal, "User:bob", "*", Write, Deny),
    ]);
    assert!(!a.authorize_any("User:bob", LOCAL, Write, Topic));
    let a = store(vec![
        acl(Topic, "tx", Prefixed, "User:bob", "*", Write, Allow),
        acl(Topic, "t", Prefixed, "User:bob", "*", Write, Deny),
    ]);
    assert!(!a.authorize_any("User:bob", LOCAL, Write, Topic));
    // READ does not count for WRITE.
    let a = store(vec![acl(Topic, "t", Literal, "User:bob", "*", Read, Allow)]);
    assert!(!a.authorize_any("User:bob", LOCAL, Write, Topic));
}

#[test]
fn kafka_names_parse_in_every_spelling_kafka_acls_accepts() {
    assert_eq!(Operation::parse("DescribeConfigs"), Some(DescribeConfigs));
    assert_eq!(Operation::parse("DESCRIBE_CONFIGS"), Some(DescribeConfigs));
    assert_eq!(Operation::parse("read"), Some(Read));
    assert_eq!(Operation::parse("Any"), None);
    assert_eq!(PatternType::parse("prefixed"), Some(Prefixed));
    assert_eq!(ResourceType::parse("TransactionalId"), Some(TransactionalId));
    assert_eq!((Read.code(), Group.code(), Prefixed.code(), Allow.code()), (3, 3, 4, 3));
}

#[test]
fn the_acl_file_round_trips_and_a_broken_file_leaves_the_old_acls_in_force() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("acls.json");
    let store = AclStore::open(Some(path.clone())).unwrap();
    assert!(store.current().is_empty());
    let file = store::AclFile { acls: vec![foo_prefixed_for_bob(Read, Allow)] };
    file.save(&path).unwrap();
    assert_eq!(store::AclFile::load(&path).unwrap(), file);
    store.reload_if_changed();
    assert_eq!(store.current().len(), 1);
    std::fs::write(&path, b"{ not json").unwrap();
    store.reload_if_changed();
    assert_eq!(store.current().len(), 1);
    let bad = r#"{"acls":[{"resource_type":"TOPIC","resource_name":"t","pattern_type":"LITERAL","principal":"alice","host":"*","operation":"READ","permission_type":"ALLOW"}]}"#;
    std::fs::write(&path, bad).unwrap();
    assert!(store.reload().unwrap_err().contains("Type:name"));
}

#[test]
fn super_users_parse_from_kafkas_semicolon_list() {
    let c = AuthorizerConfig { super_users: "User:admin; User:CN=ops,O=x ;".into(), ..Default::default() };
    assert_eq!(c.parsed_super_users().unwrap(), vec!["User:admin", "User:CN=ops,O=x"]);
    let c = AuthorizerConfig { super_users: "admin".into(), ..Default::default() };
    assert!(c.parsed_super_users().is_err());
}

#[test]
fn concurrent_edits_of_the_acl_file_by_the_daemon_and_the_cli_lose_nothing() {
    // The daemon's CreateAcls (AclStore::modify) and `kcoord acls add`
    // (AclFile::edit, in another process) edit the same file; each takes
    // the file's edit lock, so every edit survives.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("acls.json");
    let store = Arc::new(AclStore::open(Some(path.clone())).unwrap());
    let principal = |side: &str, i: usize| format!("User:{side}{i}");
    std::thread::scope(|s| {
        let daemon = store.clone();
        s.spawn(move || {
            for i in 0..40 {
                daemon
                    .modify(|acls| acls.push(acl(Group, "g", Literal, &principal("wire", i), "*", Read, Allow)))
                    .unwrap();
            }
        });
        for cli in 0..3 {
            let path = path.clone();
            s.spawn(move || {
                for i in 0..40 {
                    let name = principal(&format!("cli{cli}-"), i);
                    store::AclFile::edit(&path, |acls| {
                        acls.push(acl(Topic, "t", Literal, &name, "*", Read, Allow));
                        Ok(())
                    })
                    .unwrap();
                }
            });
        }
    });
    assert_eq!(store::AclFile::load(&path).unwrap().acls.len(), 160);
    store.reload().unwrap();
    assert_eq!(store.current().len(), 160);
}
