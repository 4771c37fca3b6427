//! A sidecar next to a secured cluster: the upstream (a standalone kcoord)
//! has only a SASL_SSL listener and a SCRAM-SHA-512 user for the sidecar;
//! the sidecar logs in with those credentials and serves its own clients
//! on a SASL_SSL listener with its own users. Clients here are kcoord's own
//! client ([`kcoord::protocol::client::Connection`]) with Kafka-style
//! settings. Certificates are generated per test with rcgen.

use crate::common;
use crate::support;

use std::path::Path;

use common::consumer::{assignment, join_request};
use common::{eventually, http_get, sb, TestServer};
use kafka_protocol::messages::offset_commit_request::{OffsetCommitRequestPartition, OffsetCommitRequestTopic};
use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestTopic;
use kafka_protocol::messages::sync_group_request::SyncGroupRequestAssignment;
use kafka_protocol::messages::*;
use kcoord::protocol::client::{ClientError, Connection};
use kcoord::security::client::{ClientSecurity, ClientSecurityConfig};
use kcoord::security::credentials::Credentials;
use kcoord::security::jwt::Es256Signer;
use kcoord::security::scram::ScramMechanism;

const SIDECAR_USER: (&str, &str) = ("kcoord-sidecar", "upstream-secret");
const CLIENT_USER: (&str, &str) = ("alice", "alice-secret");

/// A test CA and the files written for one test.
struct Pki {
    dir: tempfile::TempDir,
    ca: rcgen::Certificate,
    ca_key: rcgen::KeyPair,
}

impl Pki {
    fn new() -> Pki {
        let mut p = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        p.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        p.distinguished_name = rcgen::DistinguishedName::new();
        p.distinguished_name.push(rcgen::DnType::CommonName, "test CA");
        let ca_key = rcgen::KeyPair::generate().unwrap();
        let ca = p.self_signed(&ca_key).unwrap();
        let pki = Pki { dir: tempfile::tempdir().unwrap(), ca, ca_key };
        pki.write("ca.pem", &pki.ca.pem());
        pki
    }

    fn path(&self, name: &str) -> String {
        self.dir.path().join(name).display().to_string()
    }

    fn write(&self, name: &str, text: &str) -> String {
        std::fs::write(self.path(name), text).unwrap();
        self.path(name)
    }

    /// Writes `<name>.pem` and `<name>.key`, a server certificate for
    /// localhost and 127.0.0.1.
    fn issue(&self, name: &str) {
        let mut p = rcgen::CertificateParams::new(vec!["localhost".to_string(), "127.0.0.1".to_string()]).unwrap();
        p.distinguished_name = rcgen::DistinguishedName::new();
        p.distinguished_name.push(rcgen::DnType::CommonName, name);
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = p.signed_by(&key, &self.ca, &self.ca_key).unwrap();
        self.write(&format!("{name}.pem"), &cert.pem());
        self.write(&format!("{name}.key"), &key.serialize_pem());
    }

    /// Settings of a daemon with one SASL_SSL listener, its certificate
    /// `name` and users `users`.
    fn sasl_ssl_listener(&self, name: &str, users: &[(&str, &str)]) -> Vec<String> {
        self.issue(name);
        let mut c = Credentials::default();
        for (u, p) in users {
            c.set_password(u, p, &ScramMechanism::ALL, 4096);
        }
        let file = self.path(&format!("{name}-users.json"));
        c.save(Path::new(&file)).unwrap();
        vec![
            "server.listeners=[\"SASL_SSL://127.0.0.1:0\"]".into(),
            format!("security.tls_certificate=\"{}\"", self.path(&format!("{name}.pem"))),
            format!("security.tls_private_key=\"{}\"", self.path(&format!("{name}.key"))),
            format!("security.credentials_file=\"{file}\""),
        ]
    }

    /// Kafka-style client settings for SASL_SSL with SCRAM-SHA-512.
    fn client_properties(&self, user: (&str, &str)) -> String {
        format!(
            "security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\nsasl.username={}\nsasl.password={}\nssl.ca.location={}\n",
            user.0,
            user.1,
            self.path("ca.pem")
        )
    }

    fn client(&self, user: (&str, &str)) -> ClientSecurity {
        ClientSecurity::from_config(&ClientSecurityConfig::parse(&self.client_properties(user)).unwrap()).unwrap()
    }
}

async fn start(settings: &[String]) -> TestServer {
    let refs: Vec<&str> = settings.iter().map(String::as_str).collect();
    TestServer::start_with(&refs).await
}

/// The secured upstream: topic `t` (3 partitions), broker id 1.
async fn upstream(pki: &Pki) -> TestServer {
    let mut s = pki.sasl_ssl_listener("upstream", &[SIDECAR_USER]);
    s.extend(["topics.define=[\"t:3\"]".into(), "server.node_id=1".into()]);
    start(&s).await
}

/// Settings that make a sidecar log in to `up` as `user`.
fn upstream_login(pki: &Pki, up: &TestServer, password: &str) -> Vec<String> {
    let file = pki.write("upstream-password", &format!("{password}\n"));
    vec![
        format!("sidecar.upstream=[\"{}\"]", up.addr),
        "sidecar.write_through_interval_ms=20".into(),
        "sidecar.upstream_security.security_protocol=\"SASL_SSL\"".into(),
        "sidecar.upstream_security.sasl_mechanism=\"SCRAM-SHA-512\"".into(),
        format!("sidecar.upstream_security.sasl_username=\"{}\"", SIDECAR_USER.0),
        format!("sidecar.upstream_security.sasl_password_file=\"{file}\""),
        format!("sidecar.upstream_security.ssl_ca_location=\"{}\"", pki.path("ca.pem")),
    ]
}

/// A sidecar in front of `up` with its own SASL_SSL listener for `alice`.
async fn sidecar(pki: &Pki, up: &TestServer) -> TestServer {
    let mut s = upstream_login(pki, up, SIDECAR_USER.1);
    s.extend(pki.sasl_ssl_listener("sidecar", &[CLIENT_USER]));
    s.push("metrics.listen=\"127.0.0.1:0\"".into());
    start(&s).await
}

async fn connect(addr: std::net::SocketAddr, security: &ClientSecurity) -> Connection {
    Connection::connect_secure(&addr.to_string(), "sidecar-security-test", security).await.expect("connect")
}

/// Joins `group` alone (with the MEMBER_ID_REQUIRED round trip) and takes
/// every partition of `t`; returns (member id, generation).
async fn join_alone(c: &mut Connection, group: &str) -> (String, i32) {
    let mut r = c.call(&join_request(group, "", &["t"]), 8).await.unwrap();
    if r.error_code == 79 {
        r = c.call(&join_request(group, &r.member_id, &["t"]), 8).await.unwrap();
    }
    assert_eq!(r.error_code, 0, "{r:?}");
    let member = r.member_id.to_string();
    let sync = SyncGroupRequest::default()
        .with_group_id(GroupId(sb(group)))
        .with_generation_id(r.generation_id)
        .with_member_id(sb(&member))
        .with_protocol_type(Some(sb("consumer")))
        .with_protocol_name(Some(sb("range")))
        .with_assignments(vec![SyncGroupRequestAssignment::default()
            .with_member_id(sb(&member))
            .with_assignment(assignment("t", &[0, 1, 2]))]);
    let s = c.call(&sync, 5).await.unwrap();
    assert_eq!(s.error_code, 0, "{s:?}");
    (member, r.generation_id)
}

async fn commit(c: &mut Connection, group: &str, member: &str, generation: i32, offset: i64) -> i16 {
    let req = OffsetCommitRequest::default()
        .with_group_id(GroupId(sb(group)))
        .with_generation_id_or_member_epoch(generation)
        .with_member_id(sb(member))
        .with_topics(vec![OffsetCommitRequestTopic::default().with_name(TopicName(sb("t"))).with_partitions(vec![
            OffsetCommitRequestPartition::default().with_partition_index(0).with_committed_offset(offset),
        ])]);
    c.call(&req, 8).await.unwrap().topics[0].partitions[0].error_code
}

async fn committed(c: &mut Connection, group: &str) -> i64 {
    let req = OffsetFetchRequest::default().with_group_id(GroupId(sb(group))).with_topics(Some(vec![
        OffsetFetchRequestTopic::default().with_name(TopicName(sb("t"))).with_partition_indexes(vec![0]),
    ]));
    c.call(&req, 7).await.unwrap().topics[0].partitions[0].committed_offset
}

#[tokio::test]
async fn a_client_authenticated_by_the_sidecar_works_against_a_sasl_ssl_upstream() {
    let pki = Pki::new();
    let up = upstream(&pki).await;
    let sc = sidecar(&pki, &up).await;
    let mut c = connect(sc.addr, &pki.client(CLIENT_USER)).await;

    // Metadata: the upstream's broker id, the sidecar's SASL_SSL address.
    let md = c.call(&MetadataRequest::default().with_topics(None), 12).await.unwrap();
    let brokers: Vec<(i32, String, i32)> =
        md.brokers.iter().map(|b| (b.node_id.0, b.host.to_string(), b.port)).collect();
    assert_eq!(brokers, vec![(1, "127.0.0.1".to_string(), i32::from(sc.addr.port()))]);
    let fc = c.call(&FindCoordinatorRequest::default().with_key(sb("g")), 3).await.unwrap();
    assert_eq!((fc.error_code, fc.port), (0, i32::from(sc.addr.port())));

    // Produce and fetch are forwarded over the sidecar's own upstream login.
    let records = support::batch(&[("k", "v1"), ("k", "v2")], 1000, None);
    let p = c.call(&support::produce_request("t", 0, Some(records), -1), 9).await.unwrap();
    assert_eq!(p.responses[0].partition_responses[0].error_code, 0);
    let f = c.call(&support::fetch_request(12, "t", Default::default(), 0, 0, 0), 12).await.unwrap();
    let data = &f.responses[0].partitions[0];
    assert_eq!(data.error_code, 0);
    let got = support::decode_records(data.records.as_ref().expect("records"));
    assert_eq!(got.iter().map(|(_, _, v)| v.as_str()).collect::<Vec<_>>(), ["v1", "v2"]);

    // The group is the sidecar's; its commit is written through upstream.
    let (member, generation) = join_alone(&mut c, "g").await;
    assert_eq!(commit(&mut c, "g", &member, generation, 2).await, 0);
    assert_eq!(committed(&mut c, "g").await, 2);
    let upstream_login = pki.client(SIDECAR_USER);
    let up_addr = up.addr;
    eventually("the commit written through to the upstream", || {
        let login = upstream_login.clone();
        async move {
            let mut direct = connect(up_addr, &login).await;
            (committed(&mut direct, "g").await == 2).then_some(())
        }
    })
    .await;

    // The sidecar's listener counted the client's login.
    let (_, metrics) = http_get(sc.daemon.as_ref().unwrap().metrics_addr().unwrap(), "/metrics").await;
    assert!(
        metrics.lines().any(|l| l.starts_with("kcoord_authentications_total")
            && l.contains("SCRAM-SHA-512")
            && l.contains("success")),
        "{metrics}"
    );
    sc.shutdown().await;
    up.shutdown().await;
}

#[tokio::test]
async fn a_wrong_password_at_the_sidecar_gives_the_client_kafkas_authentication_error() {
    let pki = Pki::new();
    let up = upstream(&pki).await;
    let sc = sidecar(&pki, &up).await;
    let r = Connection::connect_secure(&sc.addr.to_string(), "t", &pki.client(("alice", "guess"))).await;
    let Err(ClientError::Authentication(message)) = r else { panic!("expected an authentication error") };
    assert!(message.contains("invalid credentials") && message.contains("error 58"), "{message}");
    sc.shutdown().await;
    up.shutdown().await;
}

#[tokio::test]
async fn a_wrong_upstream_password_stops_the_sidecar_at_start_with_a_clear_error() {
    let pki = Pki::new();
    let up = upstream(&pki).await;
    let err = common::start_error(&upstream_login(&pki, &up, "not-the-password")).await;
    assert!(err.contains("refused kcoord's login") && err.contains("invalid credentials"), "{err}");
    up.shutdown().await;
}

#[tokio::test]
async fn an_upstream_certificate_from_another_ca_is_refused() {
    let pki = Pki::new();
    let up = upstream(&pki).await;
    let other = Pki::new();
    let r = Connection::connect_secure(&up.addr.to_string(), "t", &other.client(SIDECAR_USER)).await;
    let Err(ClientError::Io(e)) = r else { panic!("expected a TLS error") };
    assert!(e.to_string().contains("TLS handshake"), "{e}");
    up.shutdown().await;
}

#[test]
fn the_admin_cli_reads_kafka_client_settings_from_command_config() {
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    let pki = Pki::new();
    let (up, sc) = runtime.block_on(async {
        let up = upstream(&pki).await;
        let sc = sidecar(&pki, &up).await;
        let mut c = connect(sc.addr, &pki.client(CLIENT_USER)).await;
        let (member, generation) = join_alone(&mut c, "cli-group").await;
        assert_eq!(commit(&mut c, "cli-group", &member, generation, 1).await, 0);
        (up, sc)
    });
    let props = pki.write("client.properties", &pki.client_properties(CLIENT_USER));
    let run = |extra: &[&str]| {
        let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_kcoord"));
        cmd.args(["groups", "list", "--bootstrap", &sc.addr.to_string()]).args(extra);
        cmd.output().unwrap()
    };
    let out = run(&["--command-config", &props]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stdout).contains("cli-group"));
    // Without the settings the TLS listener does not answer Kafka requests.
    let plain = run(&[]);
    assert!(!plain.status.success());
    runtime.block_on(async {
        sc.shutdown().await;
        up.shutdown().await;
    });
}

/// Produces and commits through the sidecar every 50 ms for `run` (across
/// the upstream sessions' renewals), every answer a success; then waits
/// for the last commit to be written through to the upstream, checked with
/// the sidecar's own SCRAM user.
async fn keep_producing_and_committing(
    pki: &Pki,
    up: &TestServer,
    c: &mut Connection,
    group: &str,
    run: std::time::Duration,
) {
    let (member, generation) = join_alone(c, group).await;
    let until = std::time::Instant::now() + run;
    let mut offset = 0;
    let mut pace = tokio::time::interval(std::time::Duration::from_millis(50));
    while std::time::Instant::now() < until {
        offset += 1;
        let records = support::batch(&[("k", "v")], 1000, None);
        let p = c.call(&support::produce_request("t", 0, Some(records), -1), 9).await.expect("produce");
        assert_eq!(p.responses[0].partition_responses[0].error_code, 0, "produce {offset}");
        assert_eq!(commit(c, group, &member, generation, offset).await, 0);
        pace.tick().await;
    }
    let login = pki.client(SIDECAR_USER);
    let up_addr = up.addr;
    eventually("the last commit written through upstream", || {
        let login = login.clone();
        async move {
            let mut direct = connect(up_addr, &login).await;
            (committed(&mut direct, group).await == offset).then_some(())
        }
    })
    .await;
}

#[tokio::test]
async fn the_sidecar_renews_its_upstream_session_before_the_upstream_ends_it() {
    // KIP-368: the upstream gives sessions 1.5 s; the sidecar replaces a
    // link once 85% of that has passed, so the client never notices.
    let pki = Pki::new();
    let mut s = pki.sasl_ssl_listener("upstream", &[SIDECAR_USER]);
    s.extend([
        "topics.define=[\"t:3\"]".into(),
        "server.node_id=1".into(),
        "security.connections_max_reauth_ms=1500".into(),
    ]);
    let up = start(&s).await;
    let sc = sidecar(&pki, &up).await;
    let mut c = connect(sc.addr, &pki.client(CLIENT_USER)).await;
    // Write-through (the sidecar's control connections) renews too.
    keep_producing_and_committing(&pki, &up, &mut c, "renewed", std::time::Duration::from_millis(4000)).await;
    sc.shutdown().await;
    up.shutdown().await;
}

#[tokio::test]
async fn a_login_the_upstream_refuses_later_closes_forwarding_counts_it_and_groups_keep_working() {
    let pki = Pki::new();
    let up = upstream(&pki).await;
    let sc = sidecar(&pki, &up).await;
    // The upstream forgets the sidecar's user (a rotated password); it
    // reloads its credentials file when the file changes.
    let mut other = Credentials::default();
    other.set_password("someone-else", "x", &ScramMechanism::ALL, 4096);
    other.save(Path::new(&pki.path("upstream-users.json"))).unwrap();
    let login = pki.client(CLIENT_USER);
    let addr = sc.addr;
    eventually("a forwarded request refused for want of an upstream login", || {
        let login = login.clone();
        async move {
            let mut c = connect(addr, &login).await;
            c.call(&MetadataRequest::default().with_topics(None), 12).await.is_err().then_some(())
        }
    })
    .await;
    let (_, metrics) = http_get(sc.daemon.as_ref().unwrap().metrics_addr().unwrap(), "/metrics").await;
    assert!(
        metrics.lines().any(|l| l.starts_with("kcoord_sidecar_upstream_authentication_failures_total ")),
        "{metrics}"
    );
    // Group coordination is the sidecar's own and does not need the upstream login.
    let mut c = connect(addr, &login).await;
    let (member, generation) = join_alone(&mut c, "still-served").await;
    assert_eq!(commit(&mut c, "still-served", &member, generation, 7).await, 0);
    assert_eq!(committed(&mut c, "still-served").await, 7);
    sc.shutdown().await;
    up.shutdown().await;
}

/// A sidecar of the plain upstream `up` on `listeners`, with `alice` in
/// its credentials file.
async fn sidecar_with_alice(pki: &Pki, up: &TestServer, listeners: &str) -> TestServer {
    let users = pki.path("users.json");
    let mut creds = Credentials::default();
    creds.set_password(CLIENT_USER.0, CLIENT_USER.1, &ScramMechanism::ALL, 4096);
    creds.save(Path::new(&users)).unwrap();
    start(&[
        format!("sidecar.upstream=[\"{}\"]", up.addr),
        format!("server.listeners={listeners}"),
        format!("security.credentials_file=\"{users}\""),
    ])
    .await
}

#[tokio::test]
async fn each_sidecar_listener_advertises_its_own_address() {
    let pki = Pki::new();
    let up = TestServer::start_with(&["topics.define=[\"t:3\"]", "server.node_id=1"]).await;
    let sc = sidecar_with_alice(&pki, &up, r#"["PLAINTEXT://127.0.0.1:0", "SASL_PLAINTEXT://127.0.0.1:0"]"#).await;
    let addrs = sc.daemon.as_ref().unwrap().local_addrs().to_vec();
    assert_eq!(addrs.len(), 2, "one port per listener and fronted broker");
    let sasl = ClientSecurity::from_config(
        &ClientSecurityConfig::parse(&format!(
            "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\nsasl.username={}\nsasl.password={}\n",
            CLIENT_USER.0, CLIENT_USER.1
        ))
        .unwrap(),
    )
    .unwrap();
    for (addr, security) in [(addrs[0], ClientSecurity::plaintext()), (addrs[1], sasl)] {
        let mut c = connect(addr, &security).await;
        let md = c.call(&MetadataRequest::default().with_topics(None), 12).await.unwrap();
        let brokers: Vec<(i32, i32)> = md.brokers.iter().map(|b| (b.node_id.0, b.port)).collect();
        assert_eq!(brokers, vec![(1, i32::from(addr.port()))]);
        let fc = c.call(&FindCoordinatorRequest::default().with_key(sb("g")), 3).await.unwrap();
        assert_eq!((fc.node_id.0, fc.port), (1, i32::from(addr.port())));
    }
    sc.shutdown().await;
    up.shutdown().await;
}

#[tokio::test]
async fn a_large_produce_before_sasl_authentication_is_refused_not_forwarded() {
    // Large Produce bodies are relayed from the client socket as they
    // arrive; before authentication nothing may take that path.
    let up = TestServer::start_with(&["topics.define=[\"t:3\"]", "server.node_id=1"]).await;
    let pki = Pki::new();
    let sc = sidecar_with_alice(&pki, &up, r#"["SASL_PLAINTEXT://127.0.0.1:0"]"#).await;
    let mut c = Connection::connect(&sc.addr.to_string(), "no-login").await.unwrap();
    let big: String = "x".repeat(100_000);
    let records = support::batch(&[("k", big.as_str())], 1000, None);
    assert!(c.call(&support::produce_request("t", 0, Some(records), -1), 9).await.is_err());
    let mut direct = Connection::connect(&up.addr.to_string(), "check").await.unwrap();
    let f = direct.call(&support::fetch_request(12, "t", Default::default(), 0, 0, 0), 12).await.unwrap();
    let records = f.responses[0].partitions[0].records.as_ref().map(|r| support::decode_records(r).len());
    assert_eq!(records.unwrap_or(0), 0, "the unauthenticated produce reached the upstream");
    sc.shutdown().await;
    up.shutdown().await;
}

/// An ACL file allowing each (user, operation, resource kind, name).
fn acl_file(pki: &Pki, name: &str, rules: &[(&str, &str, &str, &str)]) -> String {
    use kcoord::admin::acls::{self, AclArgs};
    let file = std::path::PathBuf::from(pki.path(name));
    for (user, op, kind, resource) in rules {
        let mut a = AclArgs {
            file: file.clone(),
            allow_principals: vec![format!("User:{user}")],
            operations: vec![op.to_string()],
            ..Default::default()
        };
        match *kind {
            "group" => a.groups = vec![resource.to_string()],
            _ => a.topics = vec![resource.to_string()],
        }
        acls::add(&a).unwrap();
    }
    file.display().to_string()
}

const BOB: (&str, &str) = ("bob", "bob-secret");

#[tokio::test]
async fn with_upstream_authentication_the_upstream_logs_in_each_client_and_applies_its_own_acls() {
    let pki = Pki::new();
    // The upstream knows alice and bob; alice may write topic t, bob only
    // see it. The sidecar's own login is a super user there.
    let up_acls = acl_file(
        &pki,
        "upstream-acls.json",
        &[("alice", "Write", "topic", "t"), ("alice", "Describe", "topic", "t"), ("bob", "Describe", "topic", "t")],
    );
    let mut s = pki.sasl_ssl_listener("upstream", &[SIDECAR_USER, CLIENT_USER, BOB]);
    s.extend([
        "topics.define=[\"t:3\"]".into(),
        "server.node_id=1".into(),
        "authorizer.enabled=true".into(),
        format!("authorizer.super_users=\"User:{}\"", SIDECAR_USER.0),
        format!("authorizer.acl_file=\"{up_acls}\""),
    ]);
    let up = start(&s).await;
    // The sidecar has no users of its own; its group ACLs name alice.
    let side_acls =
        acl_file(&pki, "sidecar-acls.json", &[("alice", "Read", "group", "g"), ("alice", "Read", "topic", "t")]);
    let mut s = upstream_login(&pki, &up, SIDECAR_USER.1);
    s.extend(pki.sasl_ssl_listener("sidecar", &[]));
    s.extend([
        "sidecar.client_authentication=\"upstream\"".into(),
        "authorizer.enabled=true".into(),
        format!("authorizer.acl_file=\"{side_acls}\""),
        "metrics.listen=\"127.0.0.1:0\"".into(),
    ]);
    let sc = start(&s).await;

    // alice logs in (SCRAM-SHA-512, which the sidecar cannot check: it has
    // no users), produces as herself, and is alice for the sidecar's group.
    let mut alice = connect(sc.addr, &pki.client(CLIENT_USER)).await;
    let records = support::batch(&[("k", "v1")], 1000, None);
    let p = alice.call(&support::produce_request("t", 0, Some(records.clone()), -1), 9).await.unwrap();
    assert_eq!(p.responses[0].partition_responses[0].error_code, 0);
    let (member, generation) = join_alone(&mut alice, "g").await;
    assert_eq!(commit(&mut alice, "g", &member, generation, 1).await, 0);

    // bob logs in too, but the upstream refuses his produce, and the
    // sidecar his group: each side sees bob.
    let mut bob = connect(sc.addr, &pki.client(BOB)).await;
    let p = bob.call(&support::produce_request("t", 0, Some(records), -1), 9).await.unwrap();
    assert_eq!(p.responses[0].partition_responses[0].error_code, 29, "TOPIC_AUTHORIZATION_FAILED upstream");
    let j = bob.call(&join_request("g", "", &["t"]), 8).await.unwrap();
    assert_eq!(j.error_code, 30, "GROUP_AUTHORIZATION_FAILED at the sidecar");

    // PLAIN is relayed too; a wrong password gets the upstream's answer.
    let plain = |user: (&str, &str)| {
        ClientSecurity::from_config(
            &ClientSecurityConfig::parse(&format!(
                "security.protocol=SASL_SSL\nsasl.mechanism=PLAIN\nsasl.username={}\nsasl.password={}\nssl.ca.location={}\n",
                user.0,
                user.1,
                pki.path("ca.pem")
            ))
            .unwrap(),
        )
        .unwrap()
    };
    let mut c = connect(sc.addr, &plain(CLIENT_USER)).await;
    assert_eq!(committed(&mut c, "g").await, 1);
    for security in [plain(("alice", "wrong")), pki.client(("alice", "wrong"))] {
        match Connection::connect_secure(&sc.addr.to_string(), "t", &security).await {
            Err(ClientError::Authentication(reason)) => assert!(
                reason.contains("invalid credentials") || reason.contains("Invalid username or password"),
                "{reason}"
            ),
            other => panic!("a wrong password logged in: {:?}", other.map(|_| ())),
        }
    }
    sc.shutdown().await;
    up.shutdown().await;
}

#[tokio::test]
async fn a_relayed_delegation_token_login_is_never_taken_for_a_user_named_like_the_token() {
    // A token login (SCRAM, tokenauth=true) names the token's id; the
    // upstream authenticates its owner, or refuses it. Here the upstream
    // (a kcoord without a token key) refuses it, and the client gets
    // that refusal: the sidecar does not log the connection in as
    // User:<the id>. (With an upstream that accepts it, the sidecar asks
    // it for the owner: src/sidecar/token_owners.rs.)
    let pki = Pki::new();
    let up = start(&pki.sasl_ssl_listener("upstream", &[SIDECAR_USER, CLIENT_USER])).await;
    let mut s = upstream_login(&pki, &up, SIDECAR_USER.1);
    s.extend(pki.sasl_ssl_listener("sidecar", &[]));
    s.push("sidecar.client_authentication=\"upstream\"".into());
    let sc = start(&s).await;
    let tls = crate::security::client_config(&std::fs::read_to_string(pki.path("ca.pem")).unwrap(), None);
    let mech = ScramMechanism::Sha512;
    let mut token = crate::security::tls_connect(sc.addr, tls.clone()).await.unwrap();
    let r = token.scram_with(mech, CLIENT_USER.0, CLIENT_USER.1, ",tokenauth=true").await;
    assert_eq!(r.error_code, 58, "SASL_AUTHENTICATION_FAILED");
    let expected = crate::security::scram_failure(mech);
    assert_eq!(r.error_message.as_deref(), Some(expected.as_str()), "the upstream's own answer");
    assert!(token.closed().await);
    let mut user = crate::security::tls_connect(sc.addr, tls).await.unwrap();
    assert_eq!(user.scram_with(mech, CLIENT_USER.0, CLIENT_USER.1, "").await.error_code, 0);
    sc.shutdown().await;
    up.shutdown().await;
}

const CAROL: (&str, &str) = ("carol", "carol-secret");

/// An upstream kcoord that issues delegation tokens: a SASL_PLAINTEXT
/// listener with the sidecar's user and carol, and the authorizer on with
/// every resource no ACL names open (so the sidecar's login sees carol's
/// tokens until an ACL says otherwise); topic `t`.
async fn token_upstream(pki: &Pki) -> TestServer {
    let users = pki.path("token-upstream-users.json");
    let mut c = Credentials::default();
    for (u, p) in [SIDECAR_USER, CAROL] {
        c.set_password(u, p, &ScramMechanism::ALL, 4096);
    }
    c.save(Path::new(&users)).unwrap();
    start(&[
        "server.listeners=[\"SASL_PLAINTEXT://127.0.0.1:0\"]".into(),
        format!("security.credentials_file=\"{users}\""),
        "security.delegation_token_secret_key=\"upstream-token-key\"".into(),
        "authorizer.enabled=true".into(),
        "authorizer.allow_everyone_if_no_acl_found=true".into(),
        format!("authorizer.acl_file=\"{}\"", pki.path("token-upstream-acls.json")),
        "topics.define=[\"t:3\"]".into(),
        "server.node_id=1".into(),
    ])
    .await
}

/// A token carol gets from `up`: its id and its HMAC in base64.
async fn carols_token(up: &TestServer) -> (String, String) {
    use base64::Engine as _;
    let mut c = crate::security::tcp(up.addr).await;
    assert_eq!(c.scram_with(ScramMechanism::Sha512, CAROL.0, CAROL.1, "").await.error_code, 0);
    let t = c.send(&CreateDelegationTokenRequest::default().with_max_lifetime_ms(-1), 3).await.unwrap();
    assert_eq!(t.error_code, 0);
    (t.token_id.to_string(), base64::engine::general_purpose::STANDARD.encode(&t.hmac))
}

#[tokio::test]
async fn a_relayed_delegation_token_login_is_the_tokens_owner_for_the_sidecars_group_acls() {
    use crate::security::tcp;
    use kafka_protocol::messages::create_acls_request::AclCreation;
    let pki = Pki::new();
    let up = token_upstream(&pki).await;
    let (id, hmac) = carols_token(&up).await;

    // The sidecar's group ACLs let carol in, not a user named like the token.
    let acls = acl_file(&pki, "sidecar-acls.json", &[("carol", "Read", "group", "g")]);
    let password = pki.write("upstream-password", &format!("{}\n", SIDECAR_USER.1));
    let empty = pki.path("sidecar-users.json");
    Credentials::default().save(Path::new(&empty)).unwrap();
    let mut sc = start(&[
        format!("sidecar.upstream=[\"{}\"]", up.addr),
        "sidecar.upstream_security.security_protocol=\"SASL_PLAINTEXT\"".into(),
        "sidecar.upstream_security.sasl_mechanism=\"SCRAM-SHA-512\"".into(),
        format!("sidecar.upstream_security.sasl_username=\"{}\"", SIDECAR_USER.0),
        format!("sidecar.upstream_security.sasl_password_file=\"{password}\""),
        "server.listeners=[\"SASL_PLAINTEXT://127.0.0.1:0\"]".into(),
        format!("security.credentials_file=\"{empty}\""),
        "security.connection_failed_authentication_delay_ms=10".into(),
        "sidecar.client_authentication=\"upstream\"".into(),
        "authorizer.enabled=true".into(),
        format!("authorizer.acl_file=\"{acls}\""),
    ])
    .await;

    // A token login through the sidecar, as Kafka's Java client sends it.
    let mech = ScramMechanism::Sha512;
    let token_login = |sidecar| {
        let (id, hmac) = (id.clone(), hmac.clone());
        async move {
            let mut c = tcp(sidecar).await;
            let last = c.scram_with(mech, &id, &hmac, ",tokenauth=true").await;
            (c, last)
        }
    };
    let (mut c, last) = token_login(sc.addr).await;
    assert_eq!(last.error_code, 0, "{:?}", last.error_message);
    let join = c.send(&join_request("g", "", &["t"]), 5).await.unwrap();
    assert_eq!(join.error_code, 79, "MEMBER_ID_REQUIRED: carol may join g");

    // When the upstream does not describe the token to the sidecar's login
    // (its ACLs deny it both ways of seeing it), the login fails, saying
    // why; a token already named keeps its owner without asking again.
    let deny = |resource_type: i8, operation: i8| {
        AclCreation::default()
            .with_resource_type(resource_type)
            .with_resource_name(sb("*"))
            .with_resource_pattern_type(3)
            .with_principal(sb(&format!("User:{}", SIDECAR_USER.0)))
            .with_host(sb("*"))
            .with_operation(operation)
            .with_permission_type(2)
    };
    let mut admin = tcp(up.addr).await;
    assert_eq!(admin.scram_with(mech, CAROL.0, CAROL.1, "").await.error_code, 0);
    let denied =
        admin.send(&CreateAclsRequest::default().with_creations(vec![deny(6, 8), deny(7, 14)]), 3).await.unwrap();
    assert!(denied.results.iter().all(|r| r.error_code == 0), "{denied:?}");
    let (mut c, last) = token_login(sc.addr).await;
    assert_eq!(last.error_code, 0, "a remembered owner is not asked again");
    assert_eq!(c.send(&join_request("g", "", &["t"]), 5).await.unwrap().error_code, 79);
    sc.restart().await;
    let (mut c, last) = token_login(sc.addr).await;
    assert_eq!(last.error_code, 58, "SASL_AUTHENTICATION_FAILED");
    let message = last.error_message.unwrap_or_default();
    assert!(message.contains(&format!("owner of delegation token {id} is not known")), "{message}");
    assert!(c.closed().await);
    sc.shutdown().await;
    up.shutdown().await;
}

#[tokio::test]
async fn kcoord_logs_in_to_its_upstream_and_the_admin_cli_to_a_broker_with_a_delegation_token() {
    let pki = Pki::new();
    let up = token_upstream(&pki).await;
    let (id, hmac) = carols_token(&up).await;

    // The admin CLI, with a Java client's properties file; without
    // tokenauth the token is taken for a user of its id's name, who does
    // not exist.
    let java = |tokenauth: &str| {
        format!(
            "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-512\n\
             sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required \\\n    \
             username=\"{id}\" password=\"{hmac}\" {tokenauth};\n"
        )
    };
    let list = |props: String| {
        let bootstrap = up.addr.to_string();
        tokio::task::spawn_blocking(move || {
            std::process::Command::new(env!("CARGO_BIN_EXE_kcoord"))
                .args(["groups", "--command-config", &props, "list", "--bootstrap", &bootstrap])
                .output()
                .unwrap()
        })
    };
    let out = list(pki.write("token.properties", &java("tokenauth=\"true\""))).await.unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let out = list(pki.write("user.properties", &java(""))).await.unwrap();
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("invalid credentials"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // A sidecar whose own upstream login is the token.
    let password = pki.write("token-hmac", &format!("{hmac}\n"));
    let sidecar_login = |tokenauth: bool| {
        vec![
            format!("sidecar.upstream=[\"{}\"]", up.addr),
            "sidecar.upstream_security.security_protocol=\"SASL_PLAINTEXT\"".into(),
            "sidecar.upstream_security.sasl_mechanism=\"SCRAM-SHA-512\"".into(),
            format!("sidecar.upstream_security.sasl_username=\"{id}\""),
            format!("sidecar.upstream_security.sasl_password_file=\"{password}\""),
            format!("sidecar.upstream_security.sasl_tokenauth={tokenauth}"),
        ]
    };
    let sc = start(&sidecar_login(true)).await;
    let mut c = Connection::connect(&sc.addr.to_string(), "t").await.unwrap();
    let md = c.call(&MetadataRequest::default().with_topics(None), 12).await.unwrap();
    assert_eq!(md.topics.len(), 1, "the upstream's topic, through the sidecar's token login");
    sc.shutdown().await;
    let err = common::start_error(&sidecar_login(false)).await;
    assert!(err.contains("refused kcoord's login") && err.contains("invalid credentials"), "{err}");
    up.shutdown().await;
}

#[tokio::test]
async fn upstream_authentication_needs_a_sasl_upstream_and_relayable_mechanisms() {
    let pki = Pki::new();
    let up = TestServer::start_with(&["server.node_id=1"]).await;
    let mut plain_upstream = vec![format!("sidecar.upstream=[\"{}\"]", up.addr)];
    plain_upstream.extend(pki.sasl_ssl_listener("sidecar", &[]));
    plain_upstream.push("sidecar.client_authentication=\"upstream\"".into());
    let err = common::start_error(&plain_upstream).await;
    assert!(err.contains("SASL_SSL or SASL_PLAINTEXT"), "{err}");
    let mut gssapi = upstream_login(&pki, &up, "x");
    gssapi.extend(pki.sasl_ssl_listener("sidecar", &[]));
    gssapi.push("sidecar.client_authentication=\"upstream\"".into());
    gssapi.push("security.sasl_enabled_mechanisms=[\"GSSAPI\"]".into());
    let err = common::start_error(&gssapi).await;
    assert!(err.contains("cannot be relayed"), "{err}");
    up.shutdown().await;
}

#[tokio::test]
async fn a_per_broker_sidecar_without_a_peer_address_on_every_listener_refuses_to_start() {
    let up = TestServer::start_with(&["server.node_id=1"]).await;
    let err = common::start_error(&[
        format!("sidecar.upstream=[\"{}\"]", up.addr),
        "server.node_id=1".into(),
        "server.listeners=[\"PLAINTEXT://127.0.0.1:0\", \"INTERNAL://127.0.0.1:0\"]".into(),
        "server.listener_security_protocol_map=\"INTERNAL:PLAINTEXT\"".into(),
        "sidecar.peers=[\"2=PLAINTEXT://127.0.0.1:1\"]".into(),
    ])
    .await;
    assert!(err.contains("node 2 on listener INTERNAL"), "{err}");
    up.shutdown().await;
}

#[tokio::test]
async fn large_records_cross_a_plain_sidecar_to_a_tls_upstream_and_back() {
    // The large Produce body is relayed from the plain client socket into
    // the TLS link, and the Fetch answer copied back out of it (no splice).
    let pki = Pki::new();
    let up = upstream(&pki).await;
    let sc = start(&upstream_login(&pki, &up, SIDECAR_USER.1)).await;
    let mut c = connect(sc.addr, &ClientSecurity::plaintext()).await;
    let big: String = (0..300_000).map(|i| char::from(b'a' + (i % 26) as u8)).collect();
    let records = support::batch(&[("k", big.as_str())], 1000, None);
    assert!(records.len() > 200_000);
    let p = c.call(&support::produce_request("t", 1, Some(records), -1), 9).await.unwrap();
    assert_eq!(p.responses[0].partition_responses[0].error_code, 0);
    let f = c.call(&support::fetch_request(12, "t", Default::default(), 1, 0, 0), 12).await.unwrap();
    let got = support::decode_records(f.responses[0].partitions[0].records.as_ref().expect("records"));
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].2, big);
    sc.shutdown().await;
    up.shutdown().await;
}

/// The upstream with a SASL_SSL listener offering OAUTHBEARER (tokens signed
/// by `signer`) and SCRAM-SHA-512 (for the test's own direct checks).
async fn oauth_upstream(pki: &Pki, signer: &Es256Signer) -> TestServer {
    let jwks = pki.write("jwks.json", &signer.jwks());
    let mut s = pki.sasl_ssl_listener("upstream", &[SIDECAR_USER]);
    s.extend([
        "topics.define=[\"t:3\"]".into(),
        "server.node_id=1".into(),
        "security.sasl_enabled_mechanisms=[\"OAUTHBEARER\", \"SCRAM-SHA-512\"]".into(),
        format!("security.oauthbearer_jwks_endpoint_url=\"file://{jwks}\""),
    ]);
    start(&s).await
}

/// A sidecar logging in to `up` with OAUTHBEARER tokens from `url`, as
/// the client `kcoord-sidecar` with a secret.
async fn oauth_sidecar(pki: &Pki, up: &TestServer, url: &str) -> TestServer {
    oauth_sidecar_with(
        pki,
        up,
        url,
        &[
            "sidecar.upstream_security.sasl_oauthbearer_client_id=\"kcoord-sidecar\"".into(),
            "sidecar.upstream_security.sasl_oauthbearer_client_secret=\"sidecar secret\"".into(),
            // As Confluent Cloud wants them; kcoord's listener accepts and
            // ignores them, as Kafka's default validator does.
            "sidecar.upstream_security.sasl_oauthbearer_extensions=\"logicalCluster=lkc-1,identityPoolId=pool-2\""
                .into(),
        ],
    )
    .await
}

/// A sidecar logging in to `up` with OAUTHBEARER tokens from `url`, its
/// client authentication given by `client`.
async fn oauth_sidecar_with(pki: &Pki, up: &TestServer, url: &str, client: &[String]) -> TestServer {
    let mut s = oauth_upstream_login(pki, up, url);
    s.push("sidecar.write_through_interval_ms=20".into());
    s.extend_from_slice(client);
    s.extend(pki.sasl_ssl_listener("sidecar", &[CLIENT_USER]));
    start(&s).await
}

/// A sidecar's settings for logging in to `up` over SASL_SSL with
/// OAUTHBEARER tokens from `url` (a token endpoint or a file://).
fn oauth_upstream_login(pki: &Pki, up: &TestServer, url: &str) -> Vec<String> {
    vec![
        format!("sidecar.upstream=[\"{}\"]", up.addr),
        "sidecar.upstream_security.security_protocol=\"SASL_SSL\"".into(),
        "sidecar.upstream_security.sasl_mechanism=\"OAUTHBEARER\"".into(),
        format!("sidecar.upstream_security.sasl_oauthbearer_token_endpoint_url=\"{url}\""),
        format!("sidecar.upstream_security.ssl_ca_location=\"{}\"", pki.path("ca.pem")),
    ]
}

/// How the token endpoint authenticates `kcoord-sidecar`.
enum ClientAuth {
    /// The secret "sidecar secret", as HTTP Basic with the URL-encoded pair.
    Secret,
    /// A jwt-bearer assertion signed by the key of this JWKS, naming
    /// `kcoord-sidecar` as issuer and subject and the endpoint as audience.
    Assertion(String),
}

impl ClientAuth {
    fn accepts(&self, request: &str, url: &str) -> bool {
        match self {
            ClientAuth::Secret => {
                request.contains(&format!(
                    "Authorization: Basic {}",
                    base64::Engine::encode(&base64::engine::general_purpose::STANDARD, "kcoord-sidecar:sidecar+secret")
                )) && request.contains("grant_type=client_credentials")
            }
            ClientAuth::Assertion(jwks) => {
                let Some(form) = request.split("\r\n\r\n").nth(1) else { return false };
                let grant = "grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer&assertion=";
                let Some(assertion) = form.strip_prefix(grant) else { return false };
                let Ok(jws) = kcoord::security::jwt::Jws::parse(assertion.split('&').next().unwrap_or_default()) else {
                    return false;
                };
                let keys = kcoord::security::jwt::JwkSet::parse(jwks.as_bytes()).unwrap();
                let now = kcoord::wall_clock::wall_clock_ms() / 1000;
                let claim = |name: &str| jws.claims.get(name).cloned().unwrap_or_default();
                jws.verify(&keys).is_ok()
                    && claim("iss") == "kcoord-sidecar"
                    && claim("sub") == "kcoord-sidecar"
                    && claim("aud") == url
                    && claim("exp").as_i64().is_some_and(|exp| exp > now)
                    && claim("nbf").as_i64().is_some_and(|nbf| nbf <= now)
            }
        }
    }
}

/// An OAuth 2 token endpoint on 127.0.0.1 that gives the client
/// `kcoord-sidecar`, authenticated as `client` says, tokens for itself
/// living `lifetime_s` seconds; returns its URL and how many tokens it
/// issued.
async fn token_endpoint(
    signer: Es256Signer,
    lifetime_s: i64,
    client: ClientAuth,
) -> (String, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/oauth2/token", listener.local_addr().unwrap());
    let issued = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let count = issued.clone();
    let endpoint = url.clone();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = listener.accept().await {
            // The whole request: headers, then Content-Length bytes.
            let mut request = Vec::new();
            let mut buf = [0u8; 4096];
            loop {
                let text = String::from_utf8_lossy(&request).into_owned();
                if let Some((head, body)) = text.split_once("\r\n\r\n") {
                    let length = head
                        .lines()
                        .find_map(|l| l.strip_prefix("Content-Length: "))
                        .and_then(|n| n.trim().parse::<usize>().ok())
                        .unwrap_or(0);
                    if body.len() >= length {
                        break;
                    }
                }
                match s.read(&mut buf).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => request.extend_from_slice(&buf[..n]),
                }
            }
            let text = String::from_utf8_lossy(&request);
            let reply = if text.starts_with("POST /oauth2/token ") && client.accepts(&text, &endpoint) {
                count.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                let now = kcoord::wall_clock::wall_clock_ms() / 1000;
                let claims = serde_json::json!({"sub": "kcoord-sidecar", "iat": now, "exp": now + lifetime_s});
                let body = serde_json::json!({"access_token": signer.sign(&claims).unwrap(), "token_type": "bearer",
                    "expires_in": lifetime_s})
                .to_string();
                format!(
                    "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
                    body.len()
                )
            } else {
                "HTTP/1.1 401 Unauthorized\r\nContent-Length: 0\r\n\r\n".to_string()
            };
            let _ = s.write_all(reply.as_bytes()).await;
        }
    });
    (url, issued)
}

#[tokio::test]
async fn a_sidecar_logs_in_upstream_with_oauthbearer_tokens_from_a_token_endpoint_and_renews_them() {
    let pki = Pki::new();
    let signer = Es256Signer::generate("idp-key").unwrap();
    let up = oauth_upstream(&pki, &signer).await;
    // Tokens live 3 s: the sidecar's links must fetch fresh ones and log in
    // again (KIP-368) while the client works.
    let (url, issued) = token_endpoint(signer, 3, ClientAuth::Secret).await;
    let sc = oauth_sidecar(&pki, &up, &url).await;
    let mut c = connect(sc.addr, &pki.client(CLIENT_USER)).await;
    keep_producing_and_committing(&pki, &up, &mut c, "oauth", std::time::Duration::from_millis(7000)).await;
    assert!(issued.load(std::sync::atomic::Ordering::SeqCst) >= 3, "tokens were renewed");
    sc.shutdown().await;
    up.shutdown().await;
}

/// The sidecar's jwt-bearer settings: ES256 assertions signed with the key
/// in `key_file`, from and about `kcoord-sidecar`, for the endpoint `url`.
fn assertion_login(key_file: &str, url: &str) -> Vec<String> {
    let grant = kcoord::security::client::settings::JWT_BEARER;
    [
        format!("sasl_oauthbearer_grant_type=\"{grant}\""),
        "sasl_oauthbearer_assertion_algorithm=\"ES256\"".into(),
        format!("sasl_oauthbearer_assertion_private_key_file=\"{key_file}\""),
        "sasl_oauthbearer_assertion_claim_iss=\"kcoord-sidecar\"".into(),
        "sasl_oauthbearer_assertion_claim_sub=\"kcoord-sidecar\"".into(),
        format!("sasl_oauthbearer_assertion_claim_aud=\"{url}\""),
    ]
    .into_iter()
    .map(|s| format!("sidecar.upstream_security.{s}"))
    .collect()
}

#[tokio::test]
async fn a_sidecar_gets_its_upstream_tokens_with_assertions_signed_by_its_own_key() {
    let pki = Pki::new();
    let signer = Es256Signer::generate("idp-key").unwrap();
    let up = oauth_upstream(&pki, &signer).await;
    // The identity provider knows the sidecar by its public key only.
    let client_key = Es256Signer::generate("sidecar-key").unwrap();
    let (url, issued) = token_endpoint(signer, 3, ClientAuth::Assertion(client_key.jwks())).await;
    let key_file = pki.write("sidecar-key.pem", &client_key.private_key_pem());
    let sc = oauth_sidecar_with(&pki, &up, &url, &assertion_login(&key_file, &url)).await;
    // Tokens live 3 s: each renewal signs a fresh assertion.
    let mut c = connect(sc.addr, &pki.client(CLIENT_USER)).await;
    keep_producing_and_committing(&pki, &up, &mut c, "assertion", std::time::Duration::from_millis(7000)).await;
    assert!(issued.load(std::sync::atomic::Ordering::SeqCst) >= 3, "tokens were renewed");
    sc.shutdown().await;

    // A key the provider does not hold gets no token, and the sidecar does
    // not start.
    let stranger = Es256Signer::generate("sidecar-key").unwrap();
    let stranger_file = pki.write("stranger.pem", &stranger.private_key_pem());
    let mut settings = oauth_upstream_login(&pki, &up, &url);
    settings.extend(assertion_login(&stranger_file, &url));
    let err = common::start_error(&settings).await;
    assert!(err.contains("401"), "{err}");
    up.shutdown().await;
}

#[tokio::test]
async fn a_sidecar_reads_its_upstream_token_from_a_file_and_a_refused_token_stops_it_with_the_reason() {
    let pki = Pki::new();
    let signer = Es256Signer::generate("idp-key").unwrap();
    let up = oauth_upstream(&pki, &signer).await;
    let now = kcoord::wall_clock::wall_clock_ms() / 1000;
    let token = signer.sign(&serde_json::json!({"sub": "kcoord-sidecar", "iat": now, "exp": now + 600})).unwrap();
    let file = pki.write("token", &format!("{token}\n"));
    let sc = oauth_sidecar(&pki, &up, &format!("file://{file}")).await;
    let mut c = connect(sc.addr, &pki.client(CLIENT_USER)).await;
    let md = c.call(&MetadataRequest::default().with_topics(None), 12).await.unwrap();
    assert_eq!(md.topics.len(), 1, "the upstream's topic, through the sidecar's OAUTHBEARER login");
    sc.shutdown().await;

    // The admin CLI logs in the same way, from a Kafka client properties file.
    let props = pki.write(
        "oauth.properties",
        &format!(
            "security.protocol=SASL_SSL\nsasl.mechanism=OAUTHBEARER\nsasl.oauthbearer.token.endpoint.url=file://{file}\nssl.ca.location={}\n",
            pki.path("ca.pem")
        ),
    );
    let bootstrap = up.addr.to_string();
    let out = tokio::task::spawn_blocking(move || {
        std::process::Command::new(env!("CARGO_BIN_EXE_kcoord"))
            .args(["groups", "--command-config", &props, "list", "--bootstrap", &bootstrap])
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));

    // A token from a key the upstream does not trust.
    let stranger = Es256Signer::generate("idp-key").unwrap();
    let forged = stranger.sign(&serde_json::json!({"sub": "kcoord-sidecar", "iat": now, "exp": now + 600})).unwrap();
    let file = pki.write("forged", &format!("{forged}\n"));
    let err = common::start_error(&oauth_upstream_login(&pki, &up, &format!("file://{file}"))).await;
    assert!(err.contains("refused kcoord's login") && err.contains("invalid_token"), "{err}");
    up.shutdown().await;
}
