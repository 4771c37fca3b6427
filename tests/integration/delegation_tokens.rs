//! Delegation tokens (KIP-48) on kcoord's own listeners, as Kafka issues
//! and checks them: who may get, renew, expire and see a token, what a token
//! login is, and that tokens outlive a restart. The Java client's side (an
//! Admin creating a token, a consumer logging in with it) is in
//! `tests/interop/test_security_clients.py`.

use crate::common::consumer::join_request;
use crate::common::{sb, TestServer};
use crate::security::{sasl_server_in, tcp, Conn};

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine as _;
use bytes::Bytes;
use kafka_protocol::messages::create_delegation_token_request::CreatableRenewers;
use kafka_protocol::messages::describe_delegation_token_request::DescribeDelegationTokenOwner;
use kafka_protocol::messages::*;
use kcoord::admin::acls::{self, AclArgs};
use kcoord::security::scram::ScramMechanism;
use tokio::net::TcpStream;

const MECH: ScramMechanism = ScramMechanism::Sha512;
const USERS: &[(&str, &str)] = &[("alice", "a-pw"), ("bob", "b-pw"), ("mallory", "m-pw"), ("auditor", "x-pw")];

/// A daemon with a SASL_PLAINTEXT and a PLAINTEXT listener, the users
/// above, tokens on, and ACLs: alice may join group `g`, the auditor may
/// see alice's tokens and get tokens for carol.
async fn token_server(extra: &[&str]) -> (TestServer, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let acl_file = dir.path().join("acls.json");
    let grant = |principal: &str, op: &str, set: &dyn Fn(&mut AclArgs)| {
        let mut a = AclArgs {
            file: acl_file.clone(),
            allow_principals: vec![principal.into()],
            operations: vec![op.into()],
            ..Default::default()
        };
        set(&mut a);
        acls::add(&a).unwrap();
    };
    grant("User:alice", "Read", &|a| a.groups = vec!["g".into()]);
    grant("User:auditor", "DescribeTokens", &|a| a.user_principals = vec!["User:alice".into()]);
    grant("User:auditor", "CreateTokens", &|a| a.user_principals = vec!["User:carol".into()]);
    let acls = format!("authorizer.acl_file=\"{}\"", acl_file.display());
    let mut settings =
        vec!["authorizer.enabled=true", &acls, "security.delegation_token_secret_key=\"test-token-key\""];
    settings.extend(extra);
    sasl_server_in(dir, USERS, &settings).await
}

async fn login(s: &TestServer, user: &str) -> Conn<TcpStream> {
    let mut c = tcp(s.addr).await;
    let password = USERS.iter().find(|u| u.0 == user).unwrap().1;
    assert_eq!(c.scram_with(MECH, user, password, "").await.error_code, 0, "{user} logs in");
    c
}

async fn token_login(s: &TestServer, id: &str, hmac: &[u8]) -> (Conn<TcpStream>, SaslAuthenticateResponse) {
    let mut c = tcp(s.addr).await;
    let r = c.scram_with(MECH, id, &B64.encode(hmac), ",tokenauth=true").await;
    (c, r)
}

fn create(renewers: &[&str], owner: Option<&str>) -> CreateDelegationTokenRequest {
    let renewers = renewers.iter().map(|r| {
        let (kind, name) = r.split_once(':').unwrap();
        CreatableRenewers::default().with_principal_type(sb(kind)).with_principal_name(sb(name))
    });
    let r = CreateDelegationTokenRequest::default().with_renewers(renewers.collect()).with_max_lifetime_ms(-1);
    match owner {
        Some(name) => r.with_owner_principal_type(Some(sb("User"))).with_owner_principal_name(Some(sb(name))),
        None => r,
    }
}

async fn describe(c: &mut Conn<TcpStream>, owners: Option<&[&str]>) -> (i16, Vec<String>) {
    let owners = owners.map(|o| {
        o.iter()
            .map(|n| DescribeDelegationTokenOwner::default().with_principal_type(sb("User")).with_principal_name(sb(n)))
            .collect()
    });
    let r = c.send(&DescribeDelegationTokenRequest::default().with_owners(owners), 3).await.unwrap();
    (r.error_code, r.tokens.iter().map(|t| t.token_id.to_string()).collect())
}

async fn renew(c: &mut Conn<TcpStream>, hmac: &Bytes, period: i64) -> (i16, i64) {
    let r = c
        .send(&RenewDelegationTokenRequest::default().with_hmac(hmac.clone()).with_renew_period_ms(period), 2)
        .await
        .unwrap();
    (r.error_code, r.expiry_timestamp_ms)
}

async fn expire(c: &mut Conn<TcpStream>, hmac: &Bytes, period: i64) -> (i16, i64) {
    let req = ExpireDelegationTokenRequest::default().with_hmac(hmac.clone()).with_expiry_time_period_ms(period);
    let r = c.send(&req, 2).await.unwrap();
    (r.error_code, r.expiry_timestamp_ms)
}

#[tokio::test]
async fn a_token_logs_in_as_its_owner_and_only_owners_renewers_and_those_granted_see_or_change_it() {
    let (mut s, _dir) = token_server(&[]).await;
    let mut alice = login(&s, "alice").await;
    let t = alice.send(&create(&["User:bob"], None), 3).await.unwrap();
    assert_eq!(t.error_code, 0);
    assert_eq!((t.principal_name.as_str(), t.token_requester_principal_name.as_str()), ("alice", "alice"));
    assert_eq!(t.expiry_timestamp_ms - t.issue_timestamp_ms, 86_400_000, "Kafka's default renewal time");
    assert_eq!(t.max_timestamp_ms - t.issue_timestamp_ms, 604_800_000, "Kafka's default maximum lifetime");
    let (id, hmac) = (t.token_id.to_string(), t.hmac.clone());

    // The token logs in as alice: her group ACL applies, and the session
    // ends with the token.
    let (mut as_token, auth) = token_login(&s, &id, &hmac).await;
    assert_eq!(auth.error_code, 0, "{:?}", auth.error_message);
    let left = auth.session_lifetime_ms;
    assert!(left > 86_000_000 && left <= 86_400_000, "the session lasts as long as the token: {left}");
    assert_eq!(as_token.send(&join_request("g", "", &["t"]), 5).await.unwrap().error_code, 79);
    // ...but a token may not be used to get, renew, expire or see tokens.
    assert_eq!(as_token.send(&create(&[], None), 3).await.unwrap().error_code, 64);
    assert_eq!(renew(&mut as_token, &hmac, -1).await, (64, -1));
    assert_eq!(describe(&mut as_token, None).await.0, 64);
    // The user named like the token id is nobody, and a wrong HMAC fails.
    let (_, wrong) = token_login(&s, &id, b"not the hmac").await;
    assert_eq!(wrong.error_code, 58);
    let mut as_user = tcp(s.addr).await;
    assert_eq!(as_user.scram_with(MECH, &id, &B64.encode(&hmac), "").await.error_code, 58);

    // Who sees it: the owner, the renewer, whoever may DESCRIBE_TOKENS the
    // owner; not mallory. An empty owner list asks for nothing.
    let mut bob = login(&s, "bob").await;
    let mut mallory = login(&s, "mallory").await;
    let mut auditor = login(&s, "auditor").await;
    assert_eq!(describe(&mut alice, None).await, (0, vec![id.clone()]));
    assert_eq!(describe(&mut bob, Some(&["alice"])).await, (0, vec![id.clone()]));
    assert_eq!(describe(&mut auditor, None).await, (0, vec![id.clone()]));
    assert_eq!(describe(&mut mallory, None).await, (0, vec![]));
    assert_eq!(describe(&mut alice, Some(&[])).await, (0, vec![]));
    assert_eq!(describe(&mut alice, Some(&["carol"])).await, (0, vec![]));

    // Who changes it: the owner and the renewers.
    assert_eq!(renew(&mut mallory, &hmac, -1).await, (63, 0), "DELEGATION_TOKEN_OWNER_MISMATCH");
    assert_eq!(renew(&mut bob, &Bytes::from_static(b"unknown"), -1).await, (62, 0), "DELEGATION_TOKEN_NOT_FOUND");
    let (error, expiry) = renew(&mut bob, &hmac, 60_000).await;
    assert_eq!(error, 0);
    assert!(expiry > t.issue_timestamp_ms && expiry < t.expiry_timestamp_ms, "a shorter renewal asked for");

    // Tokens for someone else need CREATE_TOKENS on that user; renewers are users.
    assert_eq!(alice.send(&create(&[], Some("carol")), 3).await.unwrap().error_code, 65);
    let for_carol = auditor.send(&create(&[], Some("carol")), 3).await.unwrap();
    assert_eq!(for_carol.error_code, 0);
    assert_eq!(
        (for_carol.principal_name.as_str(), for_carol.token_requester_principal_name.as_str()),
        ("carol", "auditor")
    );
    assert_eq!(alice.send(&create(&["Group:x"], None), 3).await.unwrap().error_code, 67);

    // Not over an unauthenticated connection.
    let plaintext = s.daemon.as_ref().unwrap().local_addrs()[1];
    let mut anonymous = Conn::new(TcpStream::connect(plaintext).await.unwrap());
    assert_eq!(anonymous.send(&create(&[], None), 3).await.unwrap().error_code, 64);

    // Tokens are durable: after a restart the token still logs in, until
    // its owner expires it.
    s.restart().await;
    let (_, again) = token_login(&s, &id, &hmac).await;
    assert_eq!(again.error_code, 0, "{:?}", again.error_message);
    let mut alice = login(&s, "alice").await;
    assert_eq!(expire(&mut alice, &hmac, -1).await.0, 0);
    let (mut gone, refused) = token_login(&s, &id, &hmac).await;
    assert_eq!(refused.error_code, 58);
    assert!(gone.closed().await);
    assert_eq!(describe(&mut alice, None).await, (0, vec![]));
    s.shutdown().await;
}

#[tokio::test]
async fn without_a_secret_key_every_token_request_is_refused_as_disabled() {
    let (s, dir) = crate::security::sasl_server(&[]).await;
    let mut c = tcp(s.addr).await;
    assert_eq!(c.scram_with(MECH, "alice", "alice-secret", "").await.error_code, 0);
    let created = c.send(&create(&[], None), 3).await.unwrap();
    assert_eq!((created.error_code, created.expiry_timestamp_ms), (61, 0), "DELEGATION_TOKEN_AUTH_DISABLED");
    assert_eq!(renew(&mut c, &Bytes::from_static(b"x"), -1).await, (61, 0));
    assert_eq!(expire(&mut c, &Bytes::from_static(b"x"), -1).await, (61, 0));
    assert_eq!(describe(&mut c, None).await, (61, vec![]));
    s.shutdown().await;
    drop(dir);
}

#[tokio::test]
async fn an_expired_token_logs_nobody_in_its_renewal_is_refused_and_the_sweep_removes_it() {
    let (s, _dir) = token_server(&[
        // Long enough for a login on a busy machine, short for the test.
        "security.delegation_token_expiry_time_ms=3000",
        "security.delegation_token_expiry_check_interval_ms=200",
    ])
    .await;
    let mut alice = login(&s, "alice").await;
    let t = alice.send(&create(&[], None), 1).await.unwrap();
    assert_eq!(t.error_code, 0);
    assert!(t.token_requester_principal_name.is_empty(), "v1 has no requester");
    let (_, ok) = token_login(&s, &t.token_id, &t.hmac).await;
    assert_eq!(ok.error_code, 0);
    crate::common::eventually("the token to expire", || async {
        (token_login(&s, &t.token_id, &t.hmac).await.1.error_code == 58).then_some(())
    })
    .await;
    // Until the sweep removes it, an expired token is still described,
    // and its renewal refused as expired (then as not found).
    let (error, _) = renew(&mut alice, &t.hmac, -1).await;
    assert!(error == 66 || error == 62, "DELEGATION_TOKEN_EXPIRED or, once swept, NOT_FOUND: {error}");
    crate::common::eventually("the sweep to remove the expired token", || async {
        let mut alice = login(&s, "alice").await;
        describe(&mut alice, None).await.1.is_empty().then_some(())
    })
    .await;
    assert_eq!(renew(&mut alice, &t.hmac, -1).await, (62, 0), "DELEGATION_TOKEN_NOT_FOUND");
    s.shutdown().await;
}
