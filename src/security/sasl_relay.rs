//! What a sidecar needs to let the upstream cluster authenticate its
//! clients (`sidecar.client_authentication = "upstream"`): the client's
//! SaslHandshake and SaslAuthenticate requests go to the upstream broker
//! over the client's own link, unchanged, and the upstream's answers come
//! back unchanged. kcoord only watches the exchange, to learn
//!
//! - the principal the upstream will give the connection, read from the
//!   client's first message (PLAIN's authentication id, SCRAM's `n=`
//!   user name, the OAUTHBEARER token's subject claim), which kcoord's own
//!   decisions (group ACLs, quotas) use, as Kafka's default principal
//!   builder names SASL users (`User:<name>`). A SCRAM login with a
//!   delegation token (`tokenauth=true`, KIP-48) names the token's id, and
//!   the upstream authenticates the token's owner: the sidecar asks the
//!   upstream who that is once the login succeeds (`Login::Token`), and
//!   fails the login when it cannot learn it, so that a token never passes
//!   for a user of its id's name;
//! - when the exchange is complete: PLAIN and OAUTHBEARER after one
//!   accepted token (an OAUTHBEARER answer carrying a token is the error
//!   challenge of RFC 7628, after which the upstream fails the exchange),
//!   SCRAM after two.
//!
//! GSSAPI is not relayed: the client's name is inside a ticket only the
//! upstream can open.

use bytes::{Buf, Bytes};
use kafka_protocol::messages::{ResponseHeader, SaslAuthenticateResponse, SaslHandshakeResponse};
use kafka_protocol::protocol::{Decodable, HeaderVersion};

use super::sasl::OAUTHBEARER;
use super::scram::ScramMechanism;
use crate::protocol::codec::guarded;

/// The mechanisms whose user a relay can read.
pub const RELAYABLE: &[&str] = &["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", OAUTHBEARER];

/// A relaying listener's settings.
#[derive(Debug, Clone)]
pub struct RelaySettings {
    /// The OAUTHBEARER claim naming the principal, as the upstream reads it
    /// (Kafka: sasl.oauthbearer.sub.claim.name; kcoord's
    /// `security.oauthbearer_sub_claim_name`).
    pub sub_claim: String,
}

/// Whether `mechanism` can be relayed.
pub fn relayable(mechanism: &str) -> bool {
    RELAYABLE.contains(&mechanism)
}

/// Who the client's first message says it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Login {
    /// A user, authenticated upstream under this name.
    User(String),
    /// A delegation token, by its id: the upstream authenticates its owner.
    Token(String),
}

/// Who the upstream will authenticate, read from the client's first token
/// of `mechanism`.
pub fn login_of(mechanism: &str, token: &[u8], relay: &RelaySettings) -> Result<Login, String> {
    if ScramMechanism::from_name(mechanism).is_some() {
        let (name, token_authenticated) = super::scram::client_first_login(token)?;
        return Ok(if token_authenticated { Login::Token(name) } else { Login::User(name) });
    }
    user_of(mechanism, token, relay).map(Login::User)
}

/// The user name the upstream will authenticate from a PLAIN or
/// OAUTHBEARER first token.
fn user_of(mechanism: &str, token: &[u8], relay: &RelaySettings) -> Result<String, String> {
    if mechanism == "PLAIN" {
        return super::plain::parse(token).map(|(user, _)| user);
    }
    if mechanism == OAUTHBEARER {
        let first = super::oauthbearer::parse_initial_response(token)?;
        let jws = super::jwt::Jws::parse(&first.token)?;
        return match jws.claims.get(&relay.sub_claim) {
            Some(serde_json::Value::String(s)) if !s.trim().is_empty() => Ok(s.trim().to_string()),
            _ => Err(format!("the token has no '{}' claim naming the principal", relay.sub_claim)),
        };
    }
    Err(format!("SASL mechanism {mechanism} is not relayed"))
}

/// Whether an accepted SaslAuthenticate answer (the `steps`th, from 1)
/// carrying `token` completes an exchange of `mechanism`.
pub fn completes(mechanism: &str, steps: u32, token: &[u8]) -> bool {
    match mechanism {
        "PLAIN" => true,
        OAUTHBEARER => token.is_empty(),
        _ => steps >= 2,
    }
}

/// The error code (and message) of an upstream answer to a relayed
/// request: `api_key` 17 or 36 at `version`. `frame` starts with its
/// length prefix.
pub fn answer_error(frame: &Bytes, api_key: i16, version: i16) -> Result<(i16, Option<String>, Bytes), String> {
    let mut body = frame.slice(4.min(frame.len())..);
    let len = body.len();
    if api_key == crate::protocol::api::sasl_handshake::SUPPORT.key {
        let header_version = SaslHandshakeResponse::header_version(version);
        guarded(len, || ResponseHeader::decode(&mut body, header_version))?;
        let r = guarded(len, || SaslHandshakeResponse::decode(&mut body, version))?;
        let offered: Vec<String> = r.mechanisms.iter().map(|m| m.to_string()).collect();
        let message = (r.error_code != 0).then(|| format!("the upstream offers {}", offered.join(", ")));
        Ok((r.error_code, message, Bytes::new()))
    } else {
        let header_version = SaslAuthenticateResponse::header_version(version);
        guarded(len, || ResponseHeader::decode(&mut body, header_version))?;
        let r = guarded(len, || SaslAuthenticateResponse::decode(&mut body, version))?;
        let _ = body.remaining();
        Ok((r.error_code, r.error_message.map(|m| m.to_string()), r.auth_bytes))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn relay() -> RelaySettings {
        RelaySettings { sub_claim: "sub".into() }
    }

    #[test]
    fn the_user_is_read_from_each_relayed_mechanisms_first_message() {
        let user = |name: &str| Ok(Login::User(name.into()));
        assert_eq!(login_of("PLAIN", b"\0alice\0pw", &relay()), user("alice"));
        assert_eq!(login_of("SCRAM-SHA-512", b"n,,n=al=2Cice,r=abc", &relay()), user("al,ice"));
        assert_eq!(
            login_of("SCRAM-SHA-256", b"n,,n=tok1,r=abc,tokenauth=true", &relay()),
            Ok(Login::Token("tok1".into()))
        );
        use base64::Engine as _;
        let b64 = |s: &str| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(s);
        let token = format!("{}.{}.", b64(r#"{"alg":"none"}"#), b64(r#"{"sub":"bob","uid":"b1"}"#));
        let first = format!("n,,\u{1}auth=Bearer {token}\u{1}\u{1}");
        assert_eq!(login_of(OAUTHBEARER, first.as_bytes(), &relay()), user("bob"));
        let by_uid = RelaySettings { sub_claim: "uid".into() };
        assert_eq!(login_of(OAUTHBEARER, first.as_bytes(), &by_uid), user("b1"));
        assert!(login_of("SCRAM-SHA-256", b"garbage", &relay()).is_err());
        assert!(login_of("GSSAPI", b"ticket", &relay()).is_err());
    }

    use super::super::sasl::{Admit, Reply, SaslSession, SaslSettings};
    use bytes::{BufMut, BytesMut};
    use kafka_protocol::messages::{ApiKey, RequestHeader, SaslAuthenticateRequest, SaslHandshakeRequest};
    use kafka_protocol::protocol::{Encodable, Request, StrBytes};
    use std::sync::Arc;
    use tokio::time::Instant;

    fn session() -> SaslSession {
        let credentials = super::super::credentials::CredentialStore::fixed(Default::default(), "credentials");
        SaslSession::new(Arc::new(SaslSettings {
            mechanisms: vec!["SCRAM-SHA-512".into(), "PLAIN".into(), "GSSAPI".into()],
            credentials: Arc::new(credentials),
            max_reauth_ms: 0,
            failure_delay: std::time::Duration::ZERO,
            max_receive_bytes: 524_288,
            oauth: None,
            kerberos: None,
            tokens: None,
            relay: Some(relay()),
        }))
    }

    /// A request frame (no length prefix), as the connection hands it over.
    fn request<R: Request + Encodable>(req: R, version: i16, correlation: i32) -> Bytes {
        let key = ApiKey::try_from(R::KEY).unwrap();
        let header = RequestHeader::default()
            .with_request_api_key(R::KEY)
            .with_request_api_version(version)
            .with_correlation_id(correlation)
            .with_client_id(Some(StrBytes::from_static_str("t")));
        let mut out = BytesMut::new();
        header.encode(&mut out, key.request_header_version(version)).unwrap();
        req.encode(&mut out, version).unwrap();
        out.freeze()
    }

    /// An upstream answer frame (length prefix first).
    fn answer<R: Encodable + HeaderVersion>(resp: R, version: i16, correlation: i32) -> Bytes {
        let mut body = BytesMut::new();
        ResponseHeader::default()
            .with_correlation_id(correlation)
            .encode(&mut body, R::header_version(version))
            .unwrap();
        resp.encode(&mut body, version).unwrap();
        let mut out = BytesMut::new();
        out.put_i32(body.len() as i32);
        out.extend_from_slice(&body);
        out.freeze()
    }

    fn handshake(mechanism: &'static str, version: i16) -> Bytes {
        request(SaslHandshakeRequest::default().with_mechanism(StrBytes::from_static_str(mechanism)), version, 1)
    }

    fn authenticate(token: &'static [u8]) -> Bytes {
        request(SaslAuthenticateRequest::default().with_auth_bytes(Bytes::from_static(token)), 2, 2)
    }

    fn token_answer(error: i16, token: &'static [u8]) -> Bytes {
        answer(
            SaslAuthenticateResponse::default().with_error_code(error).with_auth_bytes(Bytes::from_static(token)),
            2,
            2,
        )
    }

    #[test]
    fn a_relayed_scram_login_is_the_user_of_its_first_message_once_the_upstream_accepts_the_second() {
        let now = Instant::now();
        let mut s = session();
        assert_eq!(s.admit(&handshake("SCRAM-SHA-512", 1), now), Admit::Sasl);
        assert!(s.relay_request(&handshake("SCRAM-SHA-512", 1), now).is_ok());
        let ok = answer(SaslHandshakeResponse::default(), 1, 1);
        assert!(matches!(s.relay_response(ok), Reply::Respond(_)));
        assert!(s.relay_request(&authenticate(b"n,,n=alice,r=abc"), now).is_ok());
        assert!(matches!(s.relay_response(token_answer(0, b"r=abcdef,s=c2FsdA==,i=4096")), Reply::Respond(_)));
        assert!(!s.is_authenticated(), "SCRAM takes two answers");
        assert!(s.relay_request(&authenticate(b"c=biws,r=abcdef,p=cHJvb2Y="), now).is_ok());
        assert!(matches!(s.relay_response(token_answer(0, b"v=c2ln")), Reply::Respond(_)));
        assert_eq!(s.principal().as_deref(), Some("User:alice"));
        // Authenticated: requests are served; a v1 handshake re-authenticates.
        assert_eq!(s.admit(&authenticate(b""), now), Admit::Serve);
    }

    /// A relayed SCRAM login with delegation token `tok1`, accepted by the
    /// upstream; returns the session and the upstream's last answer.
    fn accepted_token_login() -> (SaslSession, Bytes) {
        let now = Instant::now();
        let mut s = session();
        assert!(s.relay_request(&handshake("SCRAM-SHA-512", 1), now).is_ok());
        let _ = s.relay_response(answer(SaslHandshakeResponse::default(), 1, 1));
        assert!(s.relay_request(&authenticate(b"n,,n=tok1,r=abc,tokenauth=true"), now).is_ok());
        assert!(matches!(s.relay_response(token_answer(0, b"r=abcdef,s=c2FsdA==,i=4096")), Reply::Respond(_)));
        assert_eq!(s.token_awaiting_owner(), None, "the login is not complete yet");
        assert!(s.relay_request(&authenticate(b"c=biws,r=abcdef,p=cHJvb2Y="), now).is_ok());
        let accepted = token_answer(0, b"v=c2ln");
        assert!(matches!(s.relay_response(accepted.clone()), Reply::Respond(_)));
        (s, accepted)
    }

    #[test]
    fn a_relayed_delegation_token_login_is_its_owner_once_the_owner_is_known() {
        let (mut s, accepted) = accepted_token_login();
        assert_eq!(s.token_awaiting_owner(), Some("tok1"));
        assert!(!s.is_authenticated(), "not before the owner is known");
        match s.resolve_token_owner(Ok("alice".into()), accepted.clone()) {
            Reply::Respond(r) => assert_eq!(r, accepted),
            other => panic!("{other:?}"),
        }
        assert_eq!(s.principal().as_deref(), Some("User:alice"));
        assert_eq!(s.token_awaiting_owner(), None);
    }

    #[test]
    fn a_relayed_delegation_token_login_whose_owner_is_unknown_fails_with_the_reason() {
        let (mut s, accepted) = accepted_token_login();
        match s.resolve_token_owner(Err("not described".into()), accepted) {
            Reply::Fail { response: Some(r), reason } => {
                let (error, message, _) = answer_error(&r, 36, 2).unwrap();
                assert_eq!(error, 58);
                assert_eq!(message.as_deref(), Some(reason.as_str()));
                assert!(reason.contains("delegation token tok1") && reason.contains("not described"), "{reason}");
            }
            other => panic!("{other:?}"),
        }
        assert!(!s.is_authenticated(), "never as a user named like the token");
    }

    #[test]
    fn the_upstreams_refusal_fails_the_relayed_login_with_its_own_answer() {
        let now = Instant::now();
        let mut s = session();
        s.relay_request(&handshake("PLAIN", 1), now).unwrap_or_else(|_| panic!("handshake"));
        let _ = s.relay_response(answer(SaslHandshakeResponse::default(), 1, 1));
        s.relay_request(&authenticate(b"\0alice\0wrong"), now).unwrap_or_else(|_| panic!("token"));
        let refused = token_answer(58, b"");
        match s.relay_response(refused.clone()) {
            Reply::Fail { response, .. } => assert_eq!(response, Some(refused)),
            other => panic!("{other:?}"),
        }
        assert!(!s.is_authenticated());
    }

    #[test]
    fn what_cannot_be_relayed_is_answered_by_the_sidecar() {
        let now = Instant::now();
        // GSSAPI (enabled here, but its user cannot be read) and mechanisms
        // not enabled: UNSUPPORTED_SASL_MECHANISM listing the relayable ones.
        for mechanism in ["GSSAPI", "SCRAM-SHA-256"] {
            match session().relay_request(&handshake(mechanism, 1), now) {
                Err(Reply::Fail { response: Some(r), .. }) => {
                    let (error, message, _) = answer_error(&r, 17, 1).unwrap();
                    assert_eq!(error, 33);
                    assert_eq!(message.as_deref(), Some("the upstream offers SCRAM-SHA-512, PLAIN"));
                }
                _ => panic!("{mechanism} was relayed"),
            }
        }
        // The unframed v0 handshake, and requests out of turn.
        assert!(matches!(session().relay_request(&handshake("PLAIN", 0), now), Err(Reply::Fail { .. })));
        assert!(matches!(session().relay_request(&authenticate(b"x"), now), Err(Reply::Fail { .. })));
        // A first message whose user cannot be read is refused before it
        // goes upstream.
        let mut s = session();
        assert!(s.relay_request(&handshake("SCRAM-SHA-512", 1), now).is_ok());
        let _ = s.relay_response(answer(SaslHandshakeResponse::default(), 1, 1));
        match s.relay_request(&authenticate(b"not scram"), now) {
            Err(Reply::Fail { response: Some(r), .. }) => assert_eq!(answer_error(&r, 36, 2).unwrap().0, 58),
            _ => panic!("relayed"),
        }
        // An answer that does not decode fails the login.
        let mut s = session();
        assert!(s.relay_request(&handshake("PLAIN", 1), now).is_ok());
        assert!(matches!(s.relay_response(Bytes::from_static(&[0, 0, 0, 1, 7])), Reply::Fail { .. }));
    }

    #[test]
    fn exchanges_complete_after_their_last_accepted_token() {
        assert!(completes("PLAIN", 1, b""));
        assert!(!completes("SCRAM-SHA-256", 1, b"r=...,s=...,i=4096"));
        assert!(completes("SCRAM-SHA-256", 2, b"v=..."));
        assert!(completes(OAUTHBEARER, 1, b""));
        // The error challenge of RFC 7628: the failure follows.
        assert!(!completes(OAUTHBEARER, 1, br#"{"status":"invalid_token"}"#));
    }
}
