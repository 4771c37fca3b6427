//! Named listeners, TLS (with client certificates) and SASL (PLAIN,
//! SCRAM-SHA-256/512) as a Kafka client sees them: what is answered, what
//! is refused, and when connections close. Certificates are generated per
//! test with rcgen; nothing secret is committed.

use crate::common;

use std::path::Path;
use std::sync::Arc;

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine as _;
use bytes::{Buf, BufMut, Bytes, BytesMut};
use common::{eventually, sb, TestServer, DEADLINE};
use hmac::{Hmac, Mac};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, Request, StrBytes};
use kcoord::security::credentials::Credentials;
use kcoord::security::jwt::Es256Signer;
use kcoord::security::scram::ScramMechanism;
use sha2::{Digest, Sha256, Sha512};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;

const SASL_AUTHENTICATION_FAILED: i16 = 58;
const UNSUPPORTED_SASL_MECHANISM: i16 = 33;
const ILLEGAL_SASL_STATE: i16 = 34;

/// A Kafka client over any byte stream (TCP or TLS).
pub(crate) struct Conn<S> {
    io: S,
    correlation: i32,
}

impl<S: AsyncRead + AsyncWrite + Unpin> Conn<S> {
    pub(crate) fn new(io: S) -> Self {
        Conn { io, correlation: 0 }
    }

    pub(crate) async fn send<R: Request>(&mut self, req: &R, version: i16) -> std::io::Result<R::Response> {
        self.correlation += 1;
        let key = ApiKey::try_from(R::KEY).unwrap();
        let header = RequestHeader::default()
            .with_request_api_key(R::KEY)
            .with_request_api_version(version)
            .with_correlation_id(self.correlation)
            .with_client_id(Some(sb("security-test")));
        let mut body = BytesMut::new();
        header.encode(&mut body, key.request_header_version(version)).unwrap();
        req.encode(&mut body, version).unwrap();
        self.write_frame(&body).await?;
        let mut frame = self.read_frame().await?;
        let hv = <R::Response as HeaderVersion>::header_version(version);
        let h = ResponseHeader::decode(&mut frame, hv).unwrap();
        assert_eq!(h.correlation_id, self.correlation);
        let resp = R::Response::decode(&mut frame, version).unwrap();
        assert_eq!(frame.remaining(), 0);
        Ok(resp)
    }

    async fn write_frame(&mut self, body: &[u8]) -> std::io::Result<()> {
        let mut out = BytesMut::with_capacity(body.len() + 4);
        out.put_i32(body.len() as i32);
        out.extend_from_slice(body);
        self.io.write_all(&out).await?;
        self.io.flush().await
    }

    async fn read_frame(&mut self) -> std::io::Result<Bytes> {
        let len = tokio::time::timeout(DEADLINE, self.io.read_i32())
            .await
            .map_err(|_| std::io::Error::new(std::io::ErrorKind::TimedOut, "no response"))??;
        let mut buf = vec![0u8; len as usize];
        self.io.read_exact(&mut buf).await?;
        Ok(Bytes::from(buf))
    }

    /// The server closed the connection (whatever it sent before, such as
    /// a TLS alert, is skipped).
    pub(crate) async fn closed(&mut self) -> bool {
        let mut buf = [0u8; 1024];
        let until_eof = async {
            loop {
                match self.io.read(&mut buf).await {
                    Ok(0) | Err(_) => return,
                    Ok(_) => {}
                }
            }
        };
        tokio::time::timeout(DEADLINE, until_eof).await.is_ok()
    }

    pub(crate) async fn handshake(&mut self, mechanism: &str) -> SaslHandshakeResponse {
        self.send(&SaslHandshakeRequest::default().with_mechanism(sb(mechanism)), 1).await.expect("handshake")
    }

    pub(crate) async fn authenticate(&mut self, token: &[u8]) -> SaslAuthenticateResponse {
        let req = SaslAuthenticateRequest::default().with_auth_bytes(Bytes::copy_from_slice(token));
        self.send(&req, 2).await.expect("authenticate")
    }

    async fn plain(&mut self, user: &str, password: &str) -> SaslAuthenticateResponse {
        assert_eq!(self.handshake("PLAIN").await.error_code, 0);
        self.authenticate(format!("\0{user}\0{password}").as_bytes()).await
    }

    /// A whole SCRAM exchange; the last response (an error, or success
    /// with the server's signature checked).
    async fn scram(&mut self, mech: ScramMechanism, user: &str, password: &str) -> SaslAuthenticateResponse {
        self.scram_with(mech, user, password, "").await
    }

    /// [`Self::scram`] with `extensions` (`,key=value...`) after the nonce
    /// of the first message, e.g. KIP-48's `,tokenauth=true`.
    pub(crate) async fn scram_with(
        &mut self,
        mech: ScramMechanism,
        user: &str,
        password: &str,
        extensions: &str,
    ) -> SaslAuthenticateResponse {
        assert_eq!(self.handshake(mech.name()).await.error_code, 0);
        let bare = format!("n={user},r=clientnonce42{extensions}");
        let first = self.authenticate(format!("n,,{bare}").as_bytes()).await;
        if first.error_code != 0 {
            return first;
        }
        let server_first = String::from_utf8(first.auth_bytes.to_vec()).unwrap();
        let (fin, server_signature) = scram_client_final(mech, password, &bare, &server_first);
        let last = self.authenticate(fin.as_bytes()).await;
        if last.error_code == 0 {
            assert_eq!(last.auth_bytes.as_ref(), format!("v={}", B64.encode(server_signature)).as_bytes());
        }
        last
    }

    /// An OAUTHBEARER first message carrying `token` (RFC 7628).
    async fn oauthbearer(&mut self, token: &str) -> SaslAuthenticateResponse {
        assert_eq!(self.handshake("OAUTHBEARER").await.error_code, 0);
        self.authenticate(format!("n,,\u{1}auth=Bearer {token}\u{1}\u{1}").as_bytes()).await
    }

    pub(crate) async fn metadata(&mut self) -> std::io::Result<MetadataResponse> {
        self.send(&MetadataRequest::default().with_topics(Some(vec![])), 12).await
    }
}

fn hmac(mech: ScramMechanism, key: &[u8], data: &[u8]) -> Vec<u8> {
    match mech {
        ScramMechanism::Sha256 => {
            let mut m = <Hmac<Sha256> as Mac>::new_from_slice(key).unwrap();
            m.update(data);
            m.finalize().into_bytes().to_vec()
        }
        ScramMechanism::Sha512 => {
            let mut m = <Hmac<Sha512> as Mac>::new_from_slice(key).unwrap();
            m.update(data);
            m.finalize().into_bytes().to_vec()
        }
    }
}

/// Kafka's answer to every failed SCRAM login, which does not say whether
/// the user, the token or the password was wrong.
pub(crate) fn scram_failure(mech: ScramMechanism) -> String {
    format!(
        "Authentication failed during authentication due to invalid credentials with SASL mechanism {}",
        mech.name()
    )
}

/// The client-final-message and the server signature to expect.
pub(crate) fn scram_client_final(
    mech: ScramMechanism,
    password: &str,
    bare: &str,
    server_first: &str,
) -> (String, Vec<u8>) {
    let attr = |k: &str| server_first.split(',').find_map(|a| a.strip_prefix(k)).unwrap().to_string();
    let (nonce, salt, iterations) = (attr("r="), B64.decode(attr("s=")).unwrap(), attr("i=").parse::<u32>().unwrap());
    let salted = match mech {
        ScramMechanism::Sha256 => {
            let mut out = vec![0u8; 32];
            pbkdf2::pbkdf2_hmac::<Sha256>(password.as_bytes(), &salt, iterations, &mut out);
            out
        }
        ScramMechanism::Sha512 => {
            let mut out = vec![0u8; 64];
            pbkdf2::pbkdf2_hmac::<Sha512>(password.as_bytes(), &salt, iterations, &mut out);
            out
        }
    };
    let client_key = hmac(mech, &salted, b"Client Key");
    let stored_key = match mech {
        ScramMechanism::Sha256 => Sha256::digest(&client_key).to_vec(),
        ScramMechanism::Sha512 => Sha512::digest(&client_key).to_vec(),
    };
    let without_proof = format!("c=biws,r={nonce}");
    let auth = format!("{bare},{server_first},{without_proof}");
    let signature = hmac(mech, &stored_key, auth.as_bytes());
    let proof: Vec<u8> = client_key.iter().zip(&signature).map(|(a, b)| a ^ b).collect();
    let server_signature = hmac(mech, &hmac(mech, &salted, b"Server Key"), auth.as_bytes());
    (format!("{without_proof},p={}", B64.encode(proof)), server_signature)
}

pub(crate) fn write_users(path: &Path, users: &[(&str, &str)]) {
    let mut c = Credentials::default();
    for (u, p) in users {
        c.set_password(u, p, &ScramMechanism::ALL, 4096);
    }
    c.save(path).unwrap();
}

/// A daemon with a SASL_PLAINTEXT listener and a PLAINTEXT one, user alice.
pub(crate) async fn sasl_server(extra: &[&str]) -> (TestServer, tempfile::TempDir) {
    sasl_server_in(tempfile::tempdir().unwrap(), &[("alice", "alice-secret")], extra).await
}

/// [`sasl_server`] with `users`, its credentials file in `dir` (which may
/// hold other files the settings name).
pub(crate) async fn sasl_server_in(
    dir: tempfile::TempDir,
    users: &[(&str, &str)],
    extra: &[&str],
) -> (TestServer, tempfile::TempDir) {
    let credentials = dir.path().join("users.json");
    write_users(&credentials, users);
    let mut settings = vec![
        "server.listeners=[\"SASL_PLAINTEXT://127.0.0.1:0\", \"PLAINTEXT://127.0.0.1:0\"]".to_string(),
        format!("security.credentials_file=\"{}\"", credentials.display()),
        "security.connection_failed_authentication_delay_ms=10".to_string(),
    ];
    settings.extend(extra.iter().map(|s| s.to_string()));
    let refs: Vec<&str> = settings.iter().map(String::as_str).collect();
    (TestServer::start_with(&refs).await, dir)
}

pub(crate) async fn tcp(addr: std::net::SocketAddr) -> Conn<TcpStream> {
    Conn::new(TcpStream::connect(addr).await.unwrap())
}

#[tokio::test]
async fn sasl_plain_login_lets_requests_through() {
    let (s, _dir) = sasl_server(&[]).await;
    let mut c = tcp(s.addr).await;
    // ApiVersions is served before authentication, and lists the SASL APIs.
    let v = c.send(&ApiVersionsRequest::default(), 2).await.unwrap();
    assert!(v.api_keys.iter().any(|k| k.api_key == 17 && k.max_version == 1));
    assert!(v.api_keys.iter().any(|k| k.api_key == 36 && k.max_version == 2));
    let hs = c.handshake("PLAIN").await;
    assert_eq!(hs.error_code, 0);
    assert!(hs.mechanisms.iter().any(|m| m.as_str() == "SCRAM-SHA-512"));
    let auth = c.authenticate(b"\0alice\0alice-secret").await;
    assert_eq!((auth.error_code, auth.session_lifetime_ms), (0, 0));
    let md = c.metadata().await.unwrap();
    assert_eq!(md.brokers[0].port, i32::from(s.addr.port()));
}

#[tokio::test]
async fn a_wrong_plain_password_gets_kafkas_error_and_the_connection_closes() {
    let (s, _dir) = sasl_server(&[]).await;
    let mut c = tcp(s.addr).await;
    let auth = c.plain("alice", "guess").await;
    assert_eq!(auth.error_code, SASL_AUTHENTICATION_FAILED);
    assert_eq!(auth.error_message.as_deref(), Some("Authentication failed: Invalid username or password"));
    assert!(c.closed().await);
    // Nobody else is affected.
    let mut other = tcp(s.addr).await;
    assert_eq!(other.plain("alice", "alice-secret").await.error_code, 0);
}

#[tokio::test]
async fn scram_sha_256_and_512_logins_succeed_with_the_right_password_only() {
    let (s, _dir) = sasl_server(&[]).await;
    for mech in ScramMechanism::ALL {
        let mut c = tcp(s.addr).await;
        assert_eq!(c.scram(mech, "alice", "alice-secret").await.error_code, 0, "{}", mech.name());
        assert!(c.metadata().await.is_ok());

        let mut bad = tcp(s.addr).await;
        let r = bad.scram(mech, "alice", "wrong").await;
        assert_eq!(r.error_code, SASL_AUTHENTICATION_FAILED);
        let expected = scram_failure(mech);
        assert_eq!(r.error_message.as_deref(), Some(expected.as_str()));
        assert!(bad.closed().await);

        let mut unknown = tcp(s.addr).await;
        let r = unknown.scram(mech, "mallory", "x").await;
        assert_eq!(r.error_message.as_deref(), Some(expected.as_str()), "an unknown user looks like a wrong password");
    }
}

#[tokio::test]
async fn a_delegation_token_login_fails_like_a_wrong_password_as_kafka_fails_a_token_it_does_not_know() {
    // Without a token key kcoord knows no delegation tokens, so a SCRAM
    // login that says it is one (tokenauth=true) names an unknown token, even
    // with a user's name and password; Kafka answers that with its
    // invalid-credentials error.
    let (s, _dir) = sasl_server(&[]).await;
    for mech in ScramMechanism::ALL {
        let mut c = tcp(s.addr).await;
        let r = c.scram_with(mech, "alice", "alice-secret", ",tokenauth=true").await;
        assert_eq!(r.error_code, SASL_AUTHENTICATION_FAILED);
        let expected = scram_failure(mech);
        assert_eq!(r.error_message.as_deref(), Some(expected.as_str()));
        assert!(c.closed().await);
        // Other extensions, and tokenauth=false, are a user's login.
        let mut user = tcp(s.addr).await;
        assert_eq!(user.scram_with(mech, "alice", "alice-secret", ",tokenauth=false,foo=bar").await.error_code, 0);
    }
}

#[tokio::test]
async fn requests_other_than_sasl_before_authentication_close_the_connection() {
    let (s, _dir) = sasl_server(&[]).await;
    let mut c = tcp(s.addr).await;
    assert!(c.metadata().await.is_err() || c.closed().await);
    // Also in the middle of an exchange.
    let mut c = tcp(s.addr).await;
    assert_eq!(c.handshake("SCRAM-SHA-256").await.error_code, 0);
    assert!(c.metadata().await.is_err() || c.closed().await);
}

#[tokio::test]
async fn a_request_in_the_middle_of_a_sasl_exchange_gets_illegal_sasl_state_and_the_connection_closes() {
    let (s, _dir) = sasl_server(&[]).await;
    let heartbeat = HeartbeatRequest::default().with_group_id(GroupId(sb("g"))).with_member_id(sb("m"));
    // After the handshake, as Kafka's SaslServerAuthenticator: the request's
    // own error answer with ILLEGAL_SASL_STATE, then the connection closes.
    let mut c = tcp(s.addr).await;
    assert_eq!(c.handshake("SCRAM-SHA-512").await.error_code, 0);
    let answer = c.send(&heartbeat, 4).await.expect("an answer");
    assert_eq!(answer.error_code, ILLEGAL_SASL_STATE);
    assert!(c.closed().await);
    // Before the handshake: no answer, the connection closes.
    let mut c = tcp(s.addr).await;
    assert!(c.send(&heartbeat, 4).await.is_err());
    // Nobody else is affected.
    let mut other = tcp(s.addr).await;
    assert_eq!(other.plain("alice", "alice-secret").await.error_code, 0);
}

#[tokio::test]
async fn an_unsupported_mechanism_is_refused_with_the_enabled_ones() {
    let (s, _dir) = sasl_server(&["security.sasl_enabled_mechanisms=[\"SCRAM-SHA-512\"]"]).await;
    let mut c = tcp(s.addr).await;
    let hs = c.handshake("PLAIN").await;
    assert_eq!(hs.error_code, UNSUPPORTED_SASL_MECHANISM);
    assert_eq!(hs.mechanisms.iter().map(|m| m.as_str()).collect::<Vec<_>>(), ["SCRAM-SHA-512"]);
    assert!(c.closed().await);
}

#[tokio::test]
async fn handshake_v0_is_followed_by_raw_tokens() {
    let (s, _dir) = sasl_server(&[]).await;
    let mut c = tcp(s.addr).await;
    let hs = c.send(&SaslHandshakeRequest::default().with_mechanism(sb("PLAIN")), 0).await.unwrap();
    assert_eq!(hs.error_code, 0);
    c.write_frame(b"\0alice\0alice-secret").await.unwrap();
    assert_eq!(c.read_frame().await.unwrap().len(), 0, "PLAIN answers an empty token");
    assert!(c.metadata().await.is_ok());
}

#[tokio::test]
async fn sasl_requests_on_a_plaintext_listener_get_illegal_sasl_state() {
    let (s, _dir) = sasl_server(&[]).await;
    let plaintext = s.daemon.as_ref().unwrap().local_addrs()[1];
    let mut c = tcp(plaintext).await;
    assert_eq!(c.handshake("PLAIN").await.error_code, ILLEGAL_SASL_STATE);
    let r = c.authenticate(b"\0alice\0alice-secret").await;
    assert_eq!(r.error_code, ILLEGAL_SASL_STATE);
    assert!(c.metadata().await.is_ok());
}

#[tokio::test]
async fn metadata_and_find_coordinator_answer_the_listener_the_client_came_in_on() {
    let (s, _dir) = sasl_server(&[]).await;
    let addrs = s.daemon.as_ref().unwrap().local_addrs().to_vec();
    let mut sasl = tcp(addrs[0]).await;
    assert_eq!(sasl.plain("alice", "alice-secret").await.error_code, 0);
    let mut plain = tcp(addrs[1]).await;
    for (c, addr) in [(&mut sasl, addrs[0]), (&mut plain, addrs[1])] {
        let md = c.metadata().await.unwrap();
        assert_eq!(md.brokers[0].port, i32::from(addr.port()));
        let fc = c.send(&FindCoordinatorRequest::default().with_key(sb("g")), 3).await.unwrap();
        assert_eq!((fc.error_code, fc.port), (0, i32::from(addr.port())));
    }
}

#[tokio::test]
async fn oversized_tokens_before_authentication_close_the_connection() {
    let (s, _dir) = sasl_server(&["security.sasl_max_receive_bytes=1024"]).await;
    let mut c = tcp(s.addr).await;
    assert_eq!(c.handshake("PLAIN").await.error_code, 0);
    let big = vec![b'x'; 4096];
    let req = SaslAuthenticateRequest::default().with_auth_bytes(Bytes::from(big));
    assert!(c.send(&req, 2).await.is_err() || c.closed().await);
}

#[tokio::test]
async fn a_silent_unauthenticated_connection_is_closed_after_the_authentication_timeout() {
    let (s, _dir) =
        sasl_server(&["security.authentication_timeout_ms=200", "server.partial_request_timeout_ms=-1"]).await;
    let mut c = tcp(s.addr).await;
    assert!(c.closed().await);
}

#[tokio::test]
async fn sessions_report_their_lifetime_expire_and_are_renewed_by_reauthentication() {
    let (s, _dir) = sasl_server(&["security.connections_max_reauth_ms=60000"]).await;
    let mut c = tcp(s.addr).await;
    let auth = c.plain("alice", "alice-secret").await;
    assert_eq!((auth.error_code, auth.session_lifetime_ms), (0, 60000));
    // Re-authentication on the same connection (KIP-368).
    let again = c.scram(ScramMechanism::Sha512, "alice", "alice-secret").await;
    assert_eq!(again.error_code, SASL_AUTHENTICATION_FAILED, "the mechanism cannot change");
    assert!(c.closed().await);

    let mut c = tcp(s.addr).await;
    assert_eq!(c.plain("alice", "alice-secret").await.error_code, 0);
    let again = c.plain("alice", "alice-secret").await;
    assert_eq!((again.error_code, again.session_lifetime_ms), (0, 60000));
    assert!(c.metadata().await.is_ok());
    s.shutdown().await;

    // A short session ends: the next request after expiry closes the connection.
    let (s, _dir) = sasl_server(&["security.connections_max_reauth_ms=300"]).await;
    let mut c = tcp(s.addr).await;
    assert_eq!(c.plain("alice", "alice-secret").await.session_lifetime_ms, 300);
    let deadline = std::time::Instant::now() + DEADLINE;
    while c.metadata().await.is_ok() {
        assert!(std::time::Instant::now() < deadline, "the expired session was never closed");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn reauthentication_as_another_user_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let users = dir.path().join("users.json");
    write_users(&users, &[("alice", "a-pw"), ("bob", "b-pw")]);
    let s = TestServer::start_with(&[
        "server.listeners=[\"SASL_PLAINTEXT://127.0.0.1:0\"]",
        &format!("security.credentials_file=\"{}\"", users.display()),
        "security.connection_failed_authentication_delay_ms=0",
    ])
    .await;
    let mut c = tcp(s.addr).await;
    assert_eq!(c.plain("alice", "a-pw").await.error_code, 0);
    let r = c.plain("bob", "b-pw").await;
    assert_eq!(r.error_code, SASL_AUTHENTICATION_FAILED);
    assert_eq!(
        r.error_message.as_deref(),
        Some("Cannot change principals during re-authentication from User.alice: User.bob")
    );
}

#[tokio::test]
async fn users_added_to_the_credentials_file_can_log_in_without_a_restart() {
    let (s, dir) = sasl_server(&[]).await;
    let users = dir.path().join("users.json");
    kcoord::admin::users::add(&users, "carol", "carol-pw", &[], 4096).unwrap();
    eventually("carol can log in", || async {
        let mut c = tcp(s.addr).await;
        (c.plain("carol", "carol-pw").await.error_code == 0).then_some(())
    })
    .await;
    kcoord::admin::users::remove(&users, "carol").unwrap();
    s.daemon.as_ref().unwrap().security().reload();
    let mut c = tcp(s.addr).await;
    assert_eq!(c.plain("carol", "carol-pw").await.error_code, SASL_AUTHENTICATION_FAILED);
}

// ---------------------------------------------------------------------------
// SCRAM users over the wire (KIP-554)

/// An upsertion of `user`'s SCRAM-SHA-512 credential, salted and hashed
/// here as AdminClient does: the password never goes to the server.
fn scram_512_upsertion(
    user: &str,
    password: &str,
    iterations: i32,
) -> alter_user_scram_credentials_request::ScramCredentialUpsertion {
    let salt = b"client-chosen-salt".to_vec();
    let mut salted = [0u8; 64];
    pbkdf2::pbkdf2_hmac::<Sha512>(password.as_bytes(), &salt, iterations as u32, &mut salted);
    alter_user_scram_credentials_request::ScramCredentialUpsertion::default()
        .with_name(sb(user))
        .with_mechanism(2)
        .with_iterations(iterations)
        .with_salt(Bytes::from(salt))
        .with_salted_password(Bytes::copy_from_slice(&salted))
}

fn by_user<'a>(results: impl Iterator<Item = (&'a StrBytes, i16)>) -> Vec<(String, i16)> {
    let mut out: Vec<(String, i16)> = results.map(|(u, e)| (u.to_string(), e)).collect();
    out.sort();
    out
}

#[tokio::test]
async fn scram_users_added_over_the_wire_log_in_at_once_and_removed_ones_cannot() {
    let (s, dir) = sasl_server(&[]).await;
    let mut admin = tcp(s.addr).await;
    assert_eq!(admin.scram(ScramMechanism::Sha512, "alice", "alice-secret").await.error_code, 0);
    let add = AlterUserScramCredentialsRequest::default().with_upsertions(vec![
        scram_512_upsertion("bob", "bob-secret", 4096),
        scram_512_upsertion("weak", "weak-secret", 1000),
    ]);
    let r = admin.send(&add, 0).await.unwrap();
    assert_eq!(
        by_user(r.results.iter().map(|r| (&r.user, r.error_code))),
        vec![("bob".into(), 0), ("weak".into(), 93)]
    );
    // In force for the next login, without waiting for a reload, and durable.
    let mut bob = tcp(s.addr).await;
    assert_eq!(bob.scram(ScramMechanism::Sha512, "bob", "bob-secret").await.error_code, 0);
    let mut wrong = tcp(s.addr).await;
    assert_eq!(wrong.scram(ScramMechanism::Sha512, "bob", "guess").await.error_code, SASL_AUTHENTICATION_FAILED);
    let on_disk = Credentials::load(&dir.path().join("users.json")).unwrap();
    assert!(on_disk.plain_password_matches("bob", "bob-secret"));

    let all = admin.send(&DescribeUserScramCredentialsRequest::default(), 0).await.unwrap();
    assert_eq!(all.error_code, 0);
    let described: Vec<(String, Vec<(i8, i32)>)> = all
        .results
        .iter()
        .map(|r| (r.user.to_string(), r.credential_infos.iter().map(|c| (c.mechanism, c.iterations)).collect()))
        .collect();
    assert_eq!(described, vec![("alice".into(), vec![(1, 4096), (2, 4096)]), ("bob".into(), vec![(2, 4096)])]);

    let remove = AlterUserScramCredentialsRequest::default().with_deletions(vec![
        alter_user_scram_credentials_request::ScramCredentialDeletion::default().with_name(sb("bob")).with_mechanism(2),
    ]);
    let r = admin.send(&remove, 0).await.unwrap();
    assert_eq!(r.results[0].error_code, 0);
    let mut gone = tcp(s.addr).await;
    assert_eq!(gone.scram(ScramMechanism::Sha512, "bob", "bob-secret").await.error_code, SASL_AUTHENTICATION_FAILED);
    let named = DescribeUserScramCredentialsRequest::default()
        .with_users(Some(vec![describe_user_scram_credentials_request::UserName::default().with_name(sb("bob"))]));
    let r = admin.send(&named, 0).await.unwrap();
    assert_eq!((r.results[0].error_code, r.results[0].credential_infos.len()), (91, 0));
}

#[tokio::test]
async fn scram_users_are_changed_only_with_alter_and_listed_only_with_describe_on_the_cluster() {
    let dir = tempfile::tempdir().unwrap();
    let acls = dir.path().join("acls.json");
    let (s, _users) = sasl_server(&[
        "authorizer.enabled=true",
        "authorizer.super_users=\"User:admin\"",
        &format!("authorizer.acl_file=\"{}\"", acls.display()),
    ])
    .await;
    let mut alice = tcp(s.addr).await;
    assert_eq!(alice.scram(ScramMechanism::Sha512, "alice", "alice-secret").await.error_code, 0);
    let add = AlterUserScramCredentialsRequest::default()
        .with_upsertions(vec![scram_512_upsertion("mallory", "m", 4096), scram_512_upsertion("eve", "e", 4096)]);
    let r = alice.send(&add, 0).await.unwrap();
    assert_eq!(
        by_user(r.results.iter().map(|r| (&r.user, r.error_code))),
        vec![("eve".into(), 31), ("mallory".into(), 31)]
    );
    let r = alice.send(&DescribeUserScramCredentialsRequest::default(), 0).await.unwrap();
    assert_eq!((r.error_code, r.results.len()), (31, 0));
    let mut mallory = tcp(s.addr).await;
    assert_eq!(mallory.scram(ScramMechanism::Sha512, "mallory", "m").await.error_code, SASL_AUTHENTICATION_FAILED);
}

// ---------------------------------------------------------------------------
// TLS

pub(crate) struct Pki {
    pub(crate) ca_pem: String,
    ca: rcgen::Certificate,
    ca_key: rcgen::KeyPair,
}

impl Pki {
    pub(crate) fn new(name: &str) -> Pki {
        let mut p = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        p.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        p.distinguished_name = rcgen::DistinguishedName::new();
        p.distinguished_name.push(rcgen::DnType::CommonName, name);
        let ca_key = rcgen::KeyPair::generate().unwrap();
        let ca = p.self_signed(&ca_key).unwrap();
        Pki { ca_pem: ca.pem(), ca, ca_key }
    }

    /// (certificate PEM, key PEM) signed by this CA.
    pub(crate) fn issue(&self, sans: &[&str], cn: &str, org: Option<&str>) -> (String, String) {
        let mut p = rcgen::CertificateParams::new(sans.iter().map(|s| s.to_string()).collect::<Vec<_>>()).unwrap();
        p.distinguished_name = rcgen::DistinguishedName::new();
        if let Some(o) = org {
            p.distinguished_name.push(rcgen::DnType::OrganizationName, o);
        }
        p.distinguished_name.push(rcgen::DnType::CommonName, cn);
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = p.signed_by(&key, &self.ca, &self.ca_key).unwrap();
        (cert.pem(), key.serialize_pem())
    }
}

pub(crate) struct TlsFiles {
    pub(crate) dir: tempfile::TempDir,
}

impl TlsFiles {
    pub(crate) fn write(&self, name: &str, text: &str) -> String {
        let p = self.dir.path().join(name);
        std::fs::write(&p, text).unwrap();
        p.display().to_string()
    }
}

pub(crate) fn client_config(ca_pem: &str, identity: Option<(String, String)>) -> Arc<rustls::ClientConfig> {
    let mut roots = rustls::RootCertStore::empty();
    for c in rustls_pemfile::certs(&mut ca_pem.as_bytes()) {
        roots.add(c.unwrap()).unwrap();
    }
    let b = rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots);
    let config = match identity {
        None => b.with_no_client_auth(),
        Some((cert, key)) => {
            let chain = rustls_pemfile::certs(&mut cert.as_bytes()).collect::<Result<Vec<_>, _>>().unwrap();
            let key = rustls_pemfile::private_key(&mut key.as_bytes()).unwrap().unwrap();
            b.with_client_auth_cert(chain, key).unwrap()
        }
    };
    Arc::new(config)
}

pub(crate) async fn tls_connect(
    addr: std::net::SocketAddr,
    config: Arc<rustls::ClientConfig>,
) -> std::io::Result<Conn<tokio_rustls::client::TlsStream<TcpStream>>> {
    let tcp = TcpStream::connect(addr).await?;
    let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
    let stream = tokio_rustls::TlsConnector::from(config).connect(name, tcp).await?;
    Ok(Conn::new(stream))
}

/// A daemon with SSL (client certificates as configured) and SASL_SSL listeners.
async fn tls_server(pki: &Pki, files: &TlsFiles, client_auth: &str) -> TestServer {
    let (cert, key) = pki.issue(&["localhost", "127.0.0.1"], "kcoord", None);
    let users = files.dir.path().join("users.json");
    write_users(&users, &[("alice", "alice-secret")]);
    TestServer::start_with(&[
        "server.listeners=[\"SSL://127.0.0.1:0\", \"SASL_SSL://127.0.0.1:0\"]",
        &format!("security.tls_certificate=\"{}\"", files.write("server.pem", &cert)),
        &format!("security.tls_private_key=\"{}\"", files.write("server.key", &key)),
        &format!("security.tls_ca=\"{}\"", files.write("ca.pem", &pki.ca_pem)),
        &format!("security.tls_client_auth=\"{client_auth}\""),
        &format!("security.credentials_file=\"{}\"", users.display()),
        "security.authentication_timeout_ms=500",
        "server.partial_request_timeout_ms=-1",
    ])
    .await
}

#[tokio::test]
async fn tls_clients_with_a_certificate_from_the_ca_are_served_and_others_refused() {
    let pki = Pki::new("test CA");
    let files = TlsFiles { dir: tempfile::tempdir().unwrap() };
    let s = tls_server(&pki, &files, "required").await;
    let ssl = s.daemon.as_ref().unwrap().local_addrs()[0];
    let identity = pki.issue(&[], "alice", Some("Example"));
    let mut c = tls_connect(ssl, client_config(&pki.ca_pem, Some(identity))).await.unwrap();
    let md = c.metadata().await.unwrap();
    assert_eq!(md.brokers[0].port, i32::from(ssl.port()));

    // No client certificate, or one from another CA: the handshake fails.
    let refused = |c: std::io::Result<Conn<_>>| async move {
        match c {
            Err(_) => true,
            Ok(mut c) => c.metadata().await.is_err(),
        }
    };
    assert!(refused(tls_connect(ssl, client_config(&pki.ca_pem, None)).await).await);
    let stranger = Pki::new("other CA").issue(&[], "mallory", None);
    assert!(refused(tls_connect(ssl, client_config(&pki.ca_pem, Some(stranger))).await).await);
}

#[tokio::test]
async fn sasl_ssl_authenticates_over_tls() {
    let pki = Pki::new("test CA");
    let files = TlsFiles { dir: tempfile::tempdir().unwrap() };
    let s = tls_server(&pki, &files, "none").await;
    let sasl_ssl = s.daemon.as_ref().unwrap().local_addrs()[1];
    let mut c = tls_connect(sasl_ssl, client_config(&pki.ca_pem, None)).await.unwrap();
    assert_eq!(c.scram(ScramMechanism::Sha512, "alice", "alice-secret").await.error_code, 0);
    assert!(c.metadata().await.is_ok());
}

#[tokio::test]
async fn a_tls_handshake_that_never_starts_is_closed_and_others_are_served() {
    let pki = Pki::new("test CA");
    let files = TlsFiles { dir: tempfile::tempdir().unwrap() };
    let s = tls_server(&pki, &files, "none").await;
    let ssl = s.daemon.as_ref().unwrap().local_addrs()[0];
    let mut silent = tcp(ssl).await;
    let mut garbage = tcp(ssl).await;
    garbage.io.write_all(b"\x00\x00\x00\x10this is not TLS!").await.unwrap();
    let mut c = tls_connect(ssl, client_config(&pki.ca_pem, None)).await.unwrap();
    assert!(c.metadata().await.is_ok());
    assert!(garbage.closed().await);
    assert!(silent.closed().await);
}

#[tokio::test]
async fn a_replaced_certificate_is_served_after_sighup_or_once_the_files_change() {
    let pki = Pki::new("first CA");
    let files = TlsFiles { dir: tempfile::tempdir().unwrap() };
    let s = tls_server(&pki, &files, "none").await;
    let ssl = s.daemon.as_ref().unwrap().local_addrs()[0];
    let next = Pki::new("second CA");
    assert!(tls_connect(ssl, client_config(&next.ca_pem, None)).await.is_err());
    let (cert, key) = next.issue(&["localhost"], "kcoord", None);
    files.write("server.pem", &cert);
    files.write("server.key", &key);
    // Picked up by the file watcher...
    eventually("the new certificate is served", || async {
        tls_connect(ssl, client_config(&next.ca_pem, None)).await.ok().map(|_| ())
    })
    .await;
    // ...and by SIGHUP's reload.
    s.daemon.as_ref().unwrap().security().reload();
    let mut c = tls_connect(ssl, client_config(&next.ca_pem, None)).await.unwrap();
    assert!(c.metadata().await.is_ok());
    // A broken file is not taken: the current certificate stays.
    files.write("server.pem", "not a certificate");
    s.daemon.as_ref().unwrap().security().reload();
    assert!(tls_connect(ssl, client_config(&next.ca_pem, None)).await.is_ok());
}

/// A client of `pki`'s CA that offers only `versions` and, if given, only
/// the cipher suites `suites` (rustls's names).
fn restricted_client(
    pki: &Pki,
    versions: &[&'static rustls::SupportedProtocolVersion],
    suites: &[rustls::CipherSuite],
) -> Arc<rustls::ClientConfig> {
    let mut provider = rustls::crypto::ring::default_provider();
    if !suites.is_empty() {
        provider.cipher_suites.retain(|s| suites.contains(&s.suite()));
    }
    let mut roots = rustls::RootCertStore::empty();
    for c in rustls_pemfile::certs(&mut pki.ca_pem.as_bytes()) {
        roots.add(c.unwrap()).unwrap();
    }
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(provider))
        .with_protocol_versions(versions)
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    Arc::new(config)
}

#[tokio::test]
async fn a_listener_limited_to_tls_1_3_or_to_named_cipher_suites_refuses_clients_without_them() {
    use rustls::version::{TLS12, TLS13};
    use rustls::CipherSuite::*;
    let pki = Pki::new("test CA");
    let files = TlsFiles { dir: tempfile::tempdir().unwrap() };
    let (cert, key) = pki.issue(&["localhost", "127.0.0.1"], "kcoord", None);
    let server = |extra: &[&str]| {
        let mut settings = vec![
            "server.listeners=[\"SSL://127.0.0.1:0\"]".to_string(),
            format!("security.tls_certificate=\"{}\"", files.write("server.pem", &cert)),
            format!("security.tls_private_key=\"{}\"", files.write("server.key", &key)),
        ];
        settings.extend(extra.iter().map(|s| s.to_string()));
        settings
    };
    let served = |addr, config| async move {
        match tls_connect(addr, config).await {
            Ok(mut c) => c.metadata().await.is_ok(),
            Err(_) => false,
        }
    };
    // Kafka's ssl.enabled.protocols=TLSv1.3.
    let settings = server(&["security.ssl_enabled_protocols=[\"TLSv1.3\"]"]);
    let s = TestServer::start_with(&settings.iter().map(String::as_str).collect::<Vec<_>>()).await;
    let ssl = s.daemon.as_ref().unwrap().local_addrs()[0];
    assert!(served(ssl, restricted_client(&pki, &[&TLS13], &[])).await);
    assert!(!served(ssl, restricted_client(&pki, &[&TLS12], &[])).await, "a TLS 1.2 client got in");
    s.shutdown().await;
    // Kafka's ssl.cipher.suites, with a Java name and an OpenSSL one.
    let settings =
        server(&["security.ssl_cipher_suites=[\"TLS_AES_256_GCM_SHA384\", \"ECDHE-ECDSA-AES256-GCM-SHA384\"]"]);
    let s = TestServer::start_with(&settings.iter().map(String::as_str).collect::<Vec<_>>()).await;
    let ssl = s.daemon.as_ref().unwrap().local_addrs()[0];
    assert!(served(ssl, restricted_client(&pki, &[&TLS13], &[TLS13_AES_256_GCM_SHA384])).await);
    assert!(served(ssl, restricted_client(&pki, &[&TLS12], &[TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384])).await);
    assert!(!served(ssl, restricted_client(&pki, &[&TLS13], &[TLS13_AES_128_GCM_SHA256])).await);
    assert!(!served(ssl, restricted_client(&pki, &[&TLS12], &[TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256])).await);
    // kcoord's own client follows the same settings: the admin CLI offering
    // only TLS 1.2 cannot reach a TLS 1.3 listener.
    let props = |protocols: &str| {
        files.write(
            "client.properties",
            &format!(
                "security.protocol=SSL\nssl.ca.location={}\nssl.enabled.protocols={protocols}\n",
                files.write("ca.pem", &pki.ca_pem)
            ),
        )
    };
    assert!(common::groups_list_with(ssl.port(), props("TLSv1.3")).await.status.success());
    s.shutdown().await;
    let settings = server(&["security.ssl_enabled_protocols=[\"TLSv1.3\"]"]);
    let s = TestServer::start_with(&settings.iter().map(String::as_str).collect::<Vec<_>>()).await;
    let ssl13 = s.daemon.as_ref().unwrap().local_addrs()[0];
    assert!(!common::groups_list_with(ssl13.port(), props("TLSv1.2")).await.status.success());
    s.shutdown().await;
    // Names TLS does not know stop the start.
    let err = common::start_error(&server(&["security.ssl_enabled_protocols=[\"TLSv1.1\"]"])).await;
    assert!(err.contains("TLSv1.2 and TLSv1.3 only"), "{err}");
    let err = common::start_error(&server(&["security.ssl_cipher_suites=[\"RC4-MD5\"]"])).await;
    assert!(err.contains("unsupported cipher suite"), "{err}");
}

#[tokio::test]
async fn each_listener_can_have_its_own_certificate_client_authentication_and_mechanisms() {
    // Kafka's listener.name.<name>.ssl.* and .sasl.enabled.mechanisms: an
    // INTERNAL listener with the internal CA's certificate that requires
    // client certificates, an EXTERNAL one with a public certificate and
    // SCRAM-SHA-512 only, and a SASL_PLAINTEXT one on the shared settings.
    let internal = Pki::new("internal CA");
    let public = Pki::new("public CA");
    let files = TlsFiles { dir: tempfile::tempdir().unwrap() };
    let (icert, ikey) = internal.issue(&["localhost", "127.0.0.1"], "internal", None);
    let (pcert, pkey) = public.issue(&["localhost", "127.0.0.1"], "external", None);
    let users = files.dir.path().join("users.json");
    write_users(&users, &[("alice", "alice-secret")]);
    let settings = vec![
        "server.listeners=[\"INTERNAL://127.0.0.1:0\", \"EXTERNAL://127.0.0.1:0\", \"SASL_PLAINTEXT://127.0.0.1:0\"]"
            .to_string(),
        "server.listener_security_protocol_map=\"INTERNAL:SSL,EXTERNAL:SASL_SSL\"".to_string(),
        format!("security.credentials_file=\"{}\"", users.display()),
        format!("security.tls_certificate=\"{}\"", files.write("internal.pem", &icert)),
        format!("security.tls_private_key=\"{}\"", files.write("internal.key", &ikey)),
        format!("security.tls_ca=\"{}\"", files.write("internal-ca.pem", &internal.ca_pem)),
        "security.tls_client_auth=\"required\"".to_string(),
        format!("security.listener.EXTERNAL.tls_certificate=\"{}\"", files.write("public.pem", &pcert)),
        format!("security.listener.EXTERNAL.tls_private_key=\"{}\"", files.write("public.key", &pkey)),
        "security.listener.external.tls_client_auth=\"none\"".to_string(),
        "security.listener.EXTERNAL.sasl_enabled_mechanisms=[\"SCRAM-SHA-512\"]".to_string(),
        "security.listener.EXTERNAL.connections_max_reauth_ms=60000".to_string(),
    ];
    let s = TestServer::start_with(&settings.iter().map(String::as_str).collect::<Vec<_>>()).await;
    let addrs = s.daemon.as_ref().unwrap().local_addrs();
    let (internal_addr, external_addr, sasl_addr) = (addrs[0], addrs[1], addrs[2]);

    // INTERNAL: the internal certificate, and a client certificate needed.
    let member = internal.issue(&[], "broker-tool", None);
    let mut c = tls_connect(internal_addr, client_config(&internal.ca_pem, Some(member))).await.unwrap();
    assert!(c.metadata().await.is_ok());
    let anonymous = match tls_connect(internal_addr, client_config(&internal.ca_pem, None)).await {
        Err(_) => false,
        Ok(mut c) => c.metadata().await.is_ok(),
    };
    assert!(!anonymous, "INTERNAL served a client without a certificate");

    // EXTERNAL: the public certificate, no client certificate, SCRAM only.
    assert!(tls_connect(external_addr, client_config(&internal.ca_pem, None)).await.is_err());
    let mut c = tls_connect(external_addr, client_config(&public.ca_pem, None)).await.unwrap();
    assert_eq!(c.handshake("PLAIN").await.error_code, UNSUPPORTED_SASL_MECHANISM);
    let mut c = tls_connect(external_addr, client_config(&public.ca_pem, None)).await.unwrap();
    let login = c.scram(ScramMechanism::Sha512, "alice", "alice-secret").await;
    assert_eq!(login.error_code, 0);
    assert!((1..=60_000).contains(&login.session_lifetime_ms), "EXTERNAL sessions last a minute: {login:?}");
    assert!(c.metadata().await.is_ok());

    // SASL_PLAINTEXT keeps the shared mechanisms, PLAIN among them, and
    // sessions without a lifetime.
    let mut c = tcp(sasl_addr).await;
    let login = c.plain("alice", "alice-secret").await;
    assert_eq!((login.error_code, login.session_lifetime_ms), (0, 0));
    s.shutdown().await;

    // An override for a listener that does not exist is a mistake.
    let mut typo = settings.clone();
    typo.push("security.listener.EXTRENAL.tls_client_auth=\"none\"".to_string());
    let err = common::start_error(&typo).await;
    assert!(err.contains("security.listener.EXTRENAL: no such listener"), "{err}");
}

/// Seconds since the epoch, for token claims.
fn epoch_s() -> i64 {
    kcoord::wall_clock::wall_clock_ms() / 1000
}

/// A daemon offering OAUTHBEARER (and PLAIN) on a SASL_PLAINTEXT listener,
/// trusting the keys of `signer`'s JWKS file.
async fn oauth_server(signer: &Es256Signer, extra: &[&str]) -> (TestServer, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let jwks = dir.path().join("jwks.json");
    std::fs::write(&jwks, signer.jwks()).unwrap();
    let users = dir.path().join("users.json");
    write_users(&users, &[("alice", "alice-secret")]);
    let mut settings = vec![
        "server.listeners=[\"SASL_PLAINTEXT://127.0.0.1:0\"]".to_string(),
        "security.sasl_enabled_mechanisms=[\"OAUTHBEARER\", \"PLAIN\"]".to_string(),
        format!("security.oauthbearer_jwks_endpoint_url=\"file://{}\"", jwks.display()),
        format!("security.credentials_file=\"{}\"", users.display()),
        "security.connection_failed_authentication_delay_ms=10".to_string(),
    ];
    settings.extend(extra.iter().map(|s| s.to_string()));
    let refs: Vec<&str> = settings.iter().map(String::as_str).collect();
    (TestServer::start_with(&refs).await, dir)
}

#[tokio::test]
async fn oauthbearer_logs_in_with_a_signed_token_for_as_long_as_the_token_lives() {
    let signer = Es256Signer::generate("key-1").unwrap();
    let (s, _dir) = oauth_server(&signer, &[]).await;
    let claims = |exp: i64| serde_json::json!({"sub": "alice", "iat": epoch_s(), "exp": exp});
    let mut c = tcp(s.addr).await;
    let auth = c.oauthbearer(&signer.sign(&claims(epoch_s() + 600)).unwrap()).await;
    assert_eq!(auth.error_code, 0, "{:?}", auth.error_message);
    assert!((590_000..=600_000).contains(&auth.session_lifetime_ms), "{}", auth.session_lifetime_ms);
    assert!(c.metadata().await.is_ok());
    // Re-authentication with a fresh token renews the session (KIP-368).
    let again = c.oauthbearer(&signer.sign(&claims(epoch_s() + 1200)).unwrap()).await;
    assert_eq!(again.error_code, 0);
    assert!(again.session_lifetime_ms > 1_000_000);

    // A token about to expire: the session ends with it.
    let mut c = tcp(s.addr).await;
    let auth = c.oauthbearer(&signer.sign(&claims(epoch_s() + 2)).unwrap()).await;
    assert_eq!(auth.error_code, 0);
    assert!(auth.session_lifetime_ms <= 2000, "{}", auth.session_lifetime_ms);
    let deadline = std::time::Instant::now() + DEADLINE;
    while c.metadata().await.is_ok() {
        assert!(std::time::Instant::now() < deadline, "the session outlived its token");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn an_expired_or_foreign_token_gets_the_rfc_7628_error_and_the_connection_closes() {
    let signer = Es256Signer::generate("key-1").unwrap();
    let (s, _dir) = oauth_server(&signer, &[]).await;
    let stranger = Es256Signer::generate("key-1").unwrap();
    let expired = signer.sign(&serde_json::json!({"sub": "alice", "iat": epoch_s() - 7200, "exp": epoch_s() - 3600}));
    let foreign = stranger.sign(&serde_json::json!({"sub": "alice", "iat": epoch_s(), "exp": epoch_s() + 600}));
    for token in [expired.unwrap(), foreign.unwrap(), "not-a-jwt".to_string()] {
        let mut c = tcp(s.addr).await;
        let challenge = c.oauthbearer(&token).await;
        assert_eq!(challenge.error_code, 0, "an error challenge, not yet a failure");
        assert_eq!(challenge.auth_bytes.as_ref(), br#"{"status":"invalid_token"}"#);
        let failed = c.authenticate(&[1]).await;
        assert_eq!(failed.error_code, SASL_AUTHENTICATION_FAILED);
        assert_eq!(failed.error_message.as_deref(), Some(r#"{"status":"invalid_token"}"#));
        assert!(c.closed().await);
    }
    // A malformed first message is refused at once, as Kafka does.
    let mut c = tcp(s.addr).await;
    assert_eq!(c.handshake("OAUTHBEARER").await.error_code, 0);
    let r = c.authenticate(b"n,,auth=Bearer x").await;
    assert_eq!(r.error_code, SASL_AUTHENTICATION_FAILED);
    assert_eq!(
        r.error_message.as_deref(),
        Some("Authentication failed during authentication due to invalid credentials with SASL mechanism OAUTHBEARER")
    );
    // PLAIN still works beside it.
    assert_eq!(tcp(s.addr).await.plain("alice", "alice-secret").await.error_code, 0);
}

#[tokio::test]
async fn a_rotated_signing_key_is_trusted_once_the_jwks_file_changes() {
    let old = Es256Signer::generate("old").unwrap();
    let (s, dir) = oauth_server(&old, &[]).await;
    let new = Es256Signer::generate("new").unwrap();
    let token = new.sign(&serde_json::json!({"sub": "bob", "iat": epoch_s(), "exp": epoch_s() + 600})).unwrap();
    assert_eq!(tcp(s.addr).await.oauthbearer(&token).await.auth_bytes.as_ref(), br#"{"status":"invalid_token"}"#);
    std::fs::write(dir.path().join("jwks.json"), new.jwks()).unwrap();
    eventually("the new key to be trusted", || {
        let token = token.clone();
        async move {
            let r = tcp(s.addr).await.oauthbearer(&token).await;
            (r.error_code == 0 && r.auth_bytes.is_empty()).then_some(())
        }
    })
    .await;
}

/// An identity provider's jwks_uri on 127.0.0.1 answering with whatever
/// key set `keys` holds; returns its URL and how often it was fetched.
async fn jwks_uri(
    keys: std::sync::Arc<std::sync::Mutex<String>>,
) -> (String, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/realms/kafka/certs", listener.local_addr().unwrap());
    let fetches = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let count = fetches.clone();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = listener.accept().await {
            let mut head = Vec::new();
            let mut buf = [0u8; 1024];
            while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                match s.read(&mut buf).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => head.extend_from_slice(&buf[..n]),
                }
            }
            count.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            let body = keys.lock().unwrap().clone();
            // Chunked, as many providers answer.
            let reply =
                format!("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n{:x}\r\n{body}\r\n0\r\n\r\n", body.len());
            let _ = s.write_all(reply.as_bytes()).await;
        }
    });
    (url, fetches)
}

#[tokio::test]
async fn oauthbearer_keys_come_from_the_providers_jwks_uri_and_a_rotated_key_is_fetched_when_first_seen() {
    use std::sync::atomic::Ordering::SeqCst;
    let old = Es256Signer::generate("old").unwrap();
    let keys = std::sync::Arc::new(std::sync::Mutex::new(old.jwks()));
    let (url, fetches) = jwks_uri(keys.clone()).await;
    let s = TestServer::start_with(&[
        "server.listeners=[\"SASL_PLAINTEXT://127.0.0.1:0\"]",
        "security.sasl_enabled_mechanisms=[\"OAUTHBEARER\"]",
        &format!("security.oauthbearer_jwks_endpoint_url=\"{url}\""),
        "security.connection_failed_authentication_delay_ms=0",
        "metrics.listen=\"127.0.0.1:0\"",
    ])
    .await;
    let claims = |sub: &str| serde_json::json!({"sub": sub, "iat": epoch_s(), "exp": epoch_s() + 600});
    assert_eq!(tcp(s.addr).await.oauthbearer(&old.sign(&claims("alice")).unwrap()).await.error_code, 0);
    assert_eq!(fetches.load(SeqCst), 1, "fetched once, at start-up");

    // The provider rotates to a new key: its first token makes kcoord fetch the set again.
    let new = Es256Signer::generate("new").unwrap();
    *keys.lock().unwrap() = new.jwks();
    let token = new.sign(&claims("bob")).unwrap();
    eventually("the rotated key to be fetched and trusted", || {
        let token = token.clone();
        async move {
            let r = tcp(s.addr).await.oauthbearer(&token).await;
            (r.error_code == 0 && r.auth_bytes.is_empty()).then_some(())
        }
    })
    .await;
    let after_rotation = fetches.load(SeqCst);
    assert!(after_rotation >= 2);

    // Tokens naming made-up key ids cannot make kcoord hammer the provider.
    let stranger = Es256Signer::generate("made-up").unwrap();
    for _ in 0..20 {
        let r = tcp(s.addr).await.oauthbearer(&stranger.sign(&claims("mallory")).unwrap()).await;
        assert_eq!(r.auth_bytes.as_ref(), br#"{"status":"invalid_token"}"#);
    }
    assert!(fetches.load(SeqCst) <= after_rotation + 2, "{} fetches", fetches.load(SeqCst));
    let (_, metrics) = common::http_get(s.daemon.as_ref().unwrap().metrics_addr().unwrap(), "/metrics").await;
    assert!(
        metrics.lines().any(|l| l.starts_with("kcoord_oauthbearer_jwks_fetches_total{result=\"success\"}")),
        "{metrics}"
    );
}

#[tokio::test]
async fn a_daemon_whose_key_set_cannot_be_fetched_does_not_start() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/certs", listener.local_addr().unwrap());
    drop(listener);
    let err = common::start_error(&[
        "server.listeners=[\"SASL_PLAINTEXT://127.0.0.1:0\"]".into(),
        "security.sasl_enabled_mechanisms=[\"OAUTHBEARER\"]".into(),
        format!("security.oauthbearer_jwks_endpoint_url=\"{url}\""),
    ])
    .await;
    assert!(err.contains("JWKS") && err.contains(&url), "{err}");
}

#[tokio::test]
async fn a_gssapi_listener_does_not_start_without_its_keytab_or_with_bad_name_rules() {
    let dir = tempfile::tempdir().unwrap();
    let keytab = dir.path().join("kafka.keytab");
    let listener = |keytab: &std::path::Path| {
        vec![
            "server.listeners=[\"SASL_PLAINTEXT://127.0.0.1:0\"]".to_string(),
            "security.sasl_enabled_mechanisms=[\"GSSAPI\"]".into(),
            format!("security.sasl_kerberos_keytab=\"{}\"", keytab.display()),
        ]
    };
    // The system's Kerberos library names what is wrong with the keytab.
    let err = common::start_error(&listener(&keytab)).await;
    assert!(err.contains(&keytab.display().to_string()) && err.contains("nonexistent"), "{err}");
    let mut bad_rule = listener(&keytab);
    bad_rule.push("security.sasl_kerberos_principal_to_local_rules=[\"RULE:[1:$1\"]".into());
    let err = common::start_error(&bad_rule).await;
    assert!(err.contains("Invalid rule"), "{err}");
}

#[tokio::test]
async fn hostile_gssapi_tokens_fail_the_login_with_kafkas_error_and_the_listener_keeps_serving() {
    // An acceptor without a KDC: no client can hold a ticket for this key,
    // so every token below must fail cleanly inside the Kerberos library.
    let dir = tempfile::tempdir().unwrap();
    let keytab = dir.path().join("kafka.keytab");
    kcoord::security::kerberos::write_random_keytab(&keytab, "kafka/127.0.0.1@KCOORD.TEST").unwrap();
    let s = TestServer::start_with(&[
        "server.listeners=[\"SASL_PLAINTEXT://127.0.0.1:0\"]",
        "security.sasl_enabled_mechanisms=[\"GSSAPI\", \"PLAIN\"]",
        &format!("security.sasl_kerberos_keytab=\"{}\"", keytab.display()),
    ])
    .await;
    let mut huge_length = vec![0x60, 0x84, 0x7f, 0xff, 0xff, 0xff, 0x06, 0x09];
    huge_length.extend_from_slice(b"\x2a\x86\x48\x86\xf7\x12\x01\x02\x02\x01\x00");
    let tokens: Vec<Vec<u8>> = vec![
        Vec::new(),
        b"not a kerberos token".to_vec(),
        huge_length,
        // A well-formed GSS header around a truncated AP-REQ.
        b"\x60\x10\x06\x09\x2a\x86\x48\x86\xf7\x12\x01\x02\x02\x01\x00\x6e\x03\x30\x01".to_vec(),
        vec![0x60; 4096],
    ];
    for token in tokens {
        let mut c = tcp(s.addr).await;
        assert_eq!(c.handshake("GSSAPI").await.error_code, 0);
        let r = c.authenticate(&token).await;
        assert_eq!(r.error_code, SASL_AUTHENTICATION_FAILED, "{token:?}");
        assert_eq!(
            r.error_message.as_deref().map(|m| m.to_string()).as_deref(),
            Some("Authentication failed during authentication due to invalid credentials with SASL mechanism GSSAPI")
        );
        assert!(c.closed().await);
    }
    // The listener still logs clients in.
    let mut c = tcp(s.addr).await;
    assert_eq!(c.handshake("GSSAPI").await.error_code, 0);
}

/// `plain` (a PEM key) encrypted by `openssl pkcs8 -topk8 -v2 aes256`
/// with `password`, written to `name` in `files`.
fn openssl_encrypt(files: &TlsFiles, plain: &str, name: &str, password: &str) -> std::path::PathBuf {
    let encrypted = files.dir.path().join(name);
    let out = std::process::Command::new("openssl")
        .args(["pkcs8", "-topk8", "-v2", "aes256", "-passout", &format!("pass:{password}"), "-in", plain, "-out"])
        .arg(&encrypted)
        .output()
        .expect("openssl");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    encrypted
}

#[tokio::test]
async fn a_listener_key_encrypted_by_openssl_is_read_with_its_password_and_a_wrong_one_stops_the_start() {
    let pki = Pki::new("test CA");
    let files = TlsFiles { dir: tempfile::tempdir().unwrap() };
    let (cert, key) = pki.issue(&["localhost", "127.0.0.1"], "kcoord", None);
    let plain = files.write("server.key", &key);
    let encrypted = openssl_encrypt(&files, &plain, "server-encrypted.key", "listener secret");
    assert!(std::fs::read_to_string(&encrypted).unwrap().contains("BEGIN ENCRYPTED PRIVATE KEY"));
    let settings = |password: &str| {
        vec![
            "server.listeners=[\"SSL://127.0.0.1:0\"]".to_string(),
            format!("security.tls_certificate=\"{}\"", files.write("server.pem", &cert)),
            format!("security.tls_private_key=\"{}\"", encrypted.display()),
            format!("security.tls_private_key_password=\"{password}\""),
        ]
    };
    let ok = settings("listener secret");
    let s = TestServer::start_with(&ok.iter().map(String::as_str).collect::<Vec<_>>()).await;
    let ssl = s.daemon.as_ref().unwrap().local_addrs()[0];
    let mut c = tls_connect(ssl, client_config(&pki.ca_pem, None)).await.unwrap();
    assert_eq!(c.metadata().await.unwrap().brokers[0].port, i32::from(ssl.port()));
    s.shutdown().await;
    let err = common::start_error(&settings("wrong")).await;
    assert!(err.contains("wrong password") && err.contains("server-encrypted.key"), "{err}");
}

#[tokio::test]
async fn the_admin_cli_presents_a_client_certificate_whose_key_is_encrypted() {
    let pki = Pki::new("test CA");
    let files = TlsFiles { dir: tempfile::tempdir().unwrap() };
    let s = tls_server(&pki, &files, "required").await;
    let ssl = s.daemon.as_ref().unwrap().local_addrs()[0];
    let (cert, key) = pki.issue(&[], "admin", None);
    let plain = files.write("admin.key", &key);
    let encrypted = openssl_encrypt(&files, &plain, "admin-encrypted.key", "client secret");
    let props = |password: &str| {
        files.write(
            "client.properties",
            &format!(
                "security.protocol=SSL\nssl.ca.location={}\nssl.certificate.location={}\nssl.key.location={}\n{password}",
                files.write("ca.pem", &pki.ca_pem),
                files.write("admin.pem", &cert),
                encrypted.display()
            ),
        )
    };
    let out = common::groups_list_with(ssl.port(), props("ssl.key.password=client secret\n")).await;
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let out = common::groups_list_with(ssl.port(), props("")).await;
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("ssl.key.password"), "{err}");
    s.shutdown().await;
}
