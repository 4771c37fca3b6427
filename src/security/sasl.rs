//! One connection's SASL state, as Kafka's `SaslServerAuthenticator` keeps
//! it: before authentication only ApiVersions, SaslHandshake and
//! SaslAuthenticate (or, after a v0 handshake, raw tokens) are served;
//! afterwards the session may expire (`connections_max_reauth_ms`,
//! KIP-368) and be renewed by re-authenticating on the same connection.
//!
//! The connection loop asks [`SaslSession::admit`] about every frame and
//! hands the SASL ones to [`SaslSession::handle`]; everything else is
//! served as usual once authenticated.

use std::sync::Arc;
use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};
use tokio::time::Instant;

use super::credentials::CredentialStore;
use super::kerberos::server::{GssStep, GssapiServer, KerberosSettings};
use super::oauthbearer::{OAuthError, OAuthServer, OAuthSettings, OAuthStep};
use super::scram::{ScramError, ScramMechanism, ScramServer, ScramStep};
use crate::error_code::ErrorCode;
use crate::protocol::api::{api_versions, sasl_authenticate, sasl_handshake};
use crate::protocol::header;

/// A SASL listener's settings.
#[derive(Debug)]
pub struct SaslSettings {
    /// Offered mechanisms, in the configured order.
    pub mechanisms: Vec<String>,
    pub credentials: Arc<CredentialStore>,
    /// Session lifetime; 0 unlimited.
    pub max_reauth_ms: i64,
    /// How long a failed authentication waits before it is answered and
    /// the connection closed.
    pub failure_delay: Duration,
    /// Largest frame read before authentication.
    pub max_receive_bytes: u32,
    /// How OAUTHBEARER tokens are validated, when it is offered.
    pub oauth: Option<Arc<OAuthSettings>>,
    /// The service's keytab and name rules, when GSSAPI is offered.
    pub kerberos: Option<Arc<KerberosSettings>>,
    /// The delegation tokens SCRAM logins may use, when tokens are on.
    pub tokens: Option<Arc<super::delegation_tokens::DelegationTokens>>,
    /// Set when the upstream authenticates clients instead (a sidecar with
    /// `sidecar.client_authentication = "upstream"`): SASL frames are
    /// relayed ([`SaslSession::relay_request`]) and `mechanisms` names what
    /// may be relayed.
    pub relay: Option<super::sasl_relay::RelaySettings>,
}

/// The OAUTHBEARER mechanism's name.
pub const OAUTHBEARER: &str = "OAUTHBEARER";

/// Kafka refuses to start re-authentication more often than once a second
/// (`KafkaChannel.MIN_REAUTH_INTERVAL_ONE_SECOND_NANOS`).
const MIN_REAUTH_INTERVAL: Duration = Duration::from_secs(1);

/// What to do with a frame.
#[derive(Debug, PartialEq, Eq)]
pub enum Admit {
    /// Serve it as any request.
    Serve,
    /// Give it to [`SaslSession::handle`].
    Sasl,
    /// Close the connection (the reason is logged).
    Close(String),
}

/// What a SASL frame produced.
#[derive(Debug)]
pub enum Reply {
    /// Write this frame and go on.
    Respond(Bytes),
    /// Authentication failed: after the failure delay, write the response
    /// (if any; a raw v0 token gets none) and close.
    Fail { response: Option<Bytes>, reason: String },
}

/// The authenticated session.
#[derive(Debug, Clone)]
struct Session {
    principal: Arc<str>,
    mechanism: String,
    /// When the session ends unless renewed.
    expires: Option<Instant>,
    /// Logged in with a delegation token, which may not be used to get,
    /// renew or expire tokens (Kafka's `tokenAuthenticated`).
    token_authenticated: bool,
}

enum Exchange {
    Plain,
    Scram(ScramMechanism, ScramServer),
    OAuthBearer(OAuthServer),
    /// Taken out while a step runs off the connection threads.
    Gssapi(Option<Box<GssapiServer>>),
    /// Re-authentication asked for a mechanism other than the session's:
    /// Kafka fails it at the first token.
    BadMechanism(String),
    /// Tokens relayed to the upstream: who the first names, and the
    /// answers accepted so far.
    Relay {
        user: Option<super::sasl_relay::Login>,
        steps: u32,
    },
}

#[allow(clippy::large_enum_variant, reason = "one per connection, and a connection spends its life in Done")]
enum Phase {
    /// Expecting SaslHandshake (ApiVersions is fine too).
    Handshake,
    /// After the handshake: tokens in SaslAuthenticate requests, or raw
    /// (v0 handshake).
    Tokens { mechanism: String, exchange: Exchange, raw: bool },
    /// Authenticated; requests are served.
    Done,
}

pub struct SaslSession {
    settings: Arc<SaslSettings>,
    phase: Phase,
    session: Option<Session>,
    reauth_started: Option<Instant>,
    /// The request relayed upstream, whose answer is awaited.
    relayed: Option<header::RequestPrefix>,
    /// A relayed delegation-token login the upstream accepted, whose
    /// owner the sidecar must learn before the session is authenticated
    /// ([`Self::token_awaiting_owner`]).
    owner_wanted: Option<OwnerWanted>,
}

/// A delegation-token login awaiting its owner's name.
struct OwnerWanted {
    token_id: String,
    mechanism: String,
    /// The SaslAuthenticate request the upstream's accepting answer is to.
    prefix: header::RequestPrefix,
}

impl SaslSession {
    pub fn new(settings: Arc<SaslSettings>) -> Self {
        SaslSession {
            settings,
            phase: Phase::Handshake,
            session: None,
            reauth_started: None,
            relayed: None,
            owner_wanted: None,
        }
    }

    /// Whether the upstream authenticates this connection: SASL frames go
    /// to [`Self::relay_request`] and upstream, not to [`Self::handle`].
    pub fn relays(&self) -> bool {
        self.settings.relay.is_some()
    }

    /// The authenticated principal, `User:<name>`, once there is one.
    pub fn principal(&self) -> Option<Arc<str>> {
        self.session.as_ref().map(|s| s.principal.clone())
    }

    pub fn is_authenticated(&self) -> bool {
        self.session.is_some()
    }

    /// Whether the session logged in with a delegation token.
    pub fn is_token_authenticated(&self) -> bool {
        self.session.as_ref().is_some_and(|s| s.token_authenticated)
    }

    /// Whether the next frames are bare tokens (after a v0 handshake),
    /// which may be shorter than a request header, empty included.
    pub fn expects_raw_tokens(&self) -> bool {
        matches!(self.phase, Phase::Tokens { raw: true, .. })
    }

    /// The largest frame to accept now: small until authenticated.
    pub fn max_frame(&self) -> Option<u32> {
        (!self.is_authenticated()).then_some(self.settings.max_receive_bytes)
    }

    /// Decides what happens to `frame` (a whole request frame, without its
    /// length prefix) at `now`.
    pub fn admit(&self, frame: &[u8], now: Instant) -> Admit {
        if let Some(max) = self.max_frame() {
            if frame.len() > max as usize {
                return Admit::Close(format!(
                    "a frame of {} bytes before authentication, over security.sasl_max_receive_bytes ({max})",
                    frame.len()
                ));
            }
        }
        if let Phase::Tokens { raw: true, .. } = self.phase {
            return Admit::Sasl;
        }
        let Ok(prefix) = header::peek_prefix(frame) else {
            return Admit::Close("a frame too short for a request header".into());
        };
        let key = prefix.api_key;
        match (&self.phase, &self.session) {
            (Phase::Handshake, None) => match key {
                k if k == api_versions::SUPPORT.key => Admit::Serve,
                // Any other request fails the authentication (`handle`).
                _ => Admit::Sasl,
            },
            (Phase::Tokens { .. }, _) => Admit::Sasl,
            (_, Some(session)) => {
                if key == sasl_handshake::SUPPORT.key {
                    let recent =
                        self.reauth_started.is_some_and(|t| now.saturating_duration_since(t) < MIN_REAUTH_INTERVAL);
                    // Re-authentication; otherwise the handshake is served
                    // (and refused) as any request, as in Kafka.
                    return if recent || prefix.api_version < 1 { Admit::Serve } else { Admit::Sasl };
                }
                match session.expires {
                    Some(t) if now >= t => Admit::Close(
                        "the SASL session expired (security.connections_max_reauth_ms) and the client did not re-authenticate"
                            .into(),
                    ),
                    _ => Admit::Serve,
                }
            }
            (Phase::Done, None) => Admit::Close("no SASL session".into()),
        }
    }

    /// Serves a frame [`admit`](Self::admit) gave [`Admit::Sasl`].
    pub async fn handle(&mut self, mut frame: Bytes, now: Instant) -> Reply {
        if let Phase::Tokens { raw: true, .. } = self.phase {
            return match self.step(frame, now).await {
                // Java's GSSAPI server completes without a last token, and
                // Kafka then writes nothing: the client reads no frame.
                Ok((token, _)) if token.is_empty() && self.completed_gssapi() => Reply::Respond(Bytes::new()),
                Ok((token, _)) => Reply::Respond(raw_frame(&token)),
                Err((_, message)) => Reply::Fail { response: None, reason: message },
            };
        }
        let prefix = match header::peek_prefix(&frame) {
            Ok(p) => p,
            Err(e) => return fail_without_answer(e.to_string()),
        };
        let expected = match self.phase {
            Phase::Tokens { .. } => sasl_authenticate::SUPPORT.key,
            _ => sasl_handshake::SUPPORT.key,
        };
        if prefix.api_key != expected {
            return self.unexpected(&prefix);
        }
        let support = if prefix.api_key == sasl_handshake::SUPPORT.key {
            sasl_handshake::SUPPORT
        } else {
            sasl_authenticate::SUPPORT
        };
        if !support.supports(prefix.api_version) {
            return fail_without_answer(format!("unsupported version {} of {}", prefix.api_version, support.name));
        }
        let flexible = support.is_flexible(prefix.api_version);
        if let Err(e) = header::parse_request_header(&mut frame, flexible) {
            return fail_without_answer(format!("{} request header: {e}", support.name));
        }
        let v = prefix.api_version;
        let mut out =
            crate::server::dispatch::start_response(prefix.correlation_id, support.flexible_response_header(v));
        if support.key == sasl_handshake::SUPPORT.key {
            let mechanism = match sasl_handshake::decode(&mut frame, v) {
                Ok(m) => m,
                Err(e) => return fail_without_answer(e.to_string()),
            };
            let offered = &self.settings.mechanisms;
            let known = offered.contains(&mechanism);
            let error = if known { ErrorCode::NONE } else { ErrorCode::UNSUPPORTED_SASL_MECHANISM };
            if let Err(e) = sasl_handshake::encode(error, offered, v, &mut out) {
                return fail_without_answer(e.to_string());
            }
            let response = crate::server::dispatch::finish_frame(out);
            if !known {
                metrics::counter!("kcoord_authentications_total", "mechanism" => "unsupported", "result" => "failure")
                    .increment(1);
                return Reply::Fail { response, reason: format!("Unsupported SASL mechanism {mechanism}") };
            }
            let exchange = match &self.session {
                Some(s) if s.mechanism != mechanism => Exchange::BadMechanism(format!(
                    "SASL mechanism '{mechanism}' requested by client is not supported for re-authentication of mechanism '{}'",
                    s.mechanism
                )),
                _ => match ScramMechanism::from_name(&mechanism) {
                    Some(m) => Exchange::Scram(m, ScramServer::new(m)),
                    None if mechanism == OAUTHBEARER => Exchange::OAuthBearer(OAuthServer::default()),
                    None if mechanism == super::kerberos::GSSAPI => match &self.settings.kerberos {
                        Some(k) => Exchange::Gssapi(Some(Box::new(GssapiServer::new(k.clone())))),
                        None => Exchange::BadMechanism("GSSAPI is not configured on this listener".into()),
                    },
                    None => Exchange::Plain,
                },
            };
            if self.session.is_some() {
                self.reauth_started = Some(now);
            }
            self.phase = Phase::Tokens { mechanism, exchange, raw: v == 0 };
            return match response {
                Some(r) => Reply::Respond(r),
                None => fail_without_answer("the handshake response is too large".into()),
            };
        }
        let token = match sasl_authenticate::decode(&mut frame, v) {
            Ok(t) => t,
            Err(e) => return fail_without_answer(e.to_string()),
        };
        let (answer, failed) = match self.step(token, now).await {
            Ok((token, lifetime)) => (
                sasl_authenticate::Answer {
                    error: ErrorCode::NONE,
                    message: None,
                    token,
                    session_lifetime_ms: lifetime,
                },
                None,
            ),
            Err((error, message)) => (
                sasl_authenticate::Answer {
                    error,
                    message: Some(message.clone()),
                    token: Bytes::new(),
                    session_lifetime_ms: 0,
                },
                Some(message),
            ),
        };
        if let Err(e) = sasl_authenticate::encode(&answer, v, &mut out) {
            return fail_without_answer(e.to_string());
        }
        let response = crate::server::dispatch::finish_frame(out);
        match (failed, response) {
            (None, Some(r)) => Reply::Respond(r),
            (None, None) => fail_without_answer("the SaslAuthenticate response is too large".into()),
            (Some(reason), response) => Reply::Fail { response, reason },
        }
    }

    /// Runs one token through the exchange. `Ok`: the token to send back
    /// and the session lifetime (0 until complete or when unlimited).
    async fn step(&mut self, token: Bytes, now: Instant) -> Result<(Bytes, i64), (ErrorCode, String)> {
        let Phase::Tokens { mechanism, exchange, .. } = &mut self.phase else {
            return Err((ErrorCode::ILLEGAL_SASL_STATE, "Unexpected SASL token".into()));
        };
        let mechanism = mechanism.clone();
        let reauth = self.session.is_some();
        let generic = || {
            format!(
                "Authentication failed during {} due to invalid credentials with SASL mechanism {mechanism}",
                if reauth { "re-authentication" } else { "authentication" }
            )
        };
        let failed = |message: String| {
            metrics::counter!("kcoord_authentications_total", "mechanism" => mechanism.clone(), "result" => "failure")
                .increment(1);
            Err((ErrorCode::SASL_AUTHENTICATION_FAILED, message))
        };
        let credentials = self.settings.credentials.current();
        // When the credential itself expires (an OAUTHBEARER token, a
        // delegation token).
        let mut credential_expires_ms = None;
        // A delegation token's owner: the session's principal.
        let mut token_owner: Option<String> = None;
        let (user, response) = match exchange {
            // Relayed tokens never reach the local exchange.
            Exchange::Relay { .. } => return failed(generic()),
            Exchange::BadMechanism(message) => {
                let m = message.clone();
                self.phase = Phase::Handshake;
                return failed(m);
            }
            Exchange::Plain => {
                let (user, password) = match super::plain::parse(&token) {
                    Ok(up) => up,
                    Err(m) => return failed(m),
                };
                // One PBKDF2 run: kept off the connection threads.
                let check = {
                    let (c, u) = (credentials.clone(), user.clone());
                    tokio::task::spawn_blocking(move || c.plain_password_matches(&u, &password))
                };
                if !check.await.unwrap_or(false) {
                    return failed(super::plain::INVALID.into());
                }
                (user, Bytes::new())
            }
            Exchange::OAuthBearer(server) => {
                let Some(oauth) = self.settings.oauth.as_deref() else {
                    return failed(generic());
                };
                oauth.prepare(&token).await;
                let now_ms = crate::wall_clock::wall_clock_ms();
                match server.step(&token, oauth, now_ms) {
                    Ok(OAuthStep::Challenge(c)) => return Ok((Bytes::from(c), 0)),
                    Ok(OAuthStep::Done(valid)) => {
                        credential_expires_ms = Some(valid.expires_ms.saturating_sub(now_ms));
                        (valid.principal, Bytes::new())
                    }
                    Err(OAuthError::Specific(m)) => return failed(m),
                    Err(OAuthError::Generic(reason)) => {
                        tracing::debug!(%reason, "OAUTHBEARER authentication failed");
                        return failed(generic());
                    }
                }
            }
            Exchange::Gssapi(slot) => {
                let Some(mut server) = slot.take() else {
                    return failed(generic());
                };
                let (server, result) = match tokio::task::spawn_blocking(move || {
                    let result = server.step(&token);
                    (server, result)
                })
                .await
                {
                    Ok(done) => done,
                    Err(e) => return failed(format!("the Kerberos step stopped: {e}")),
                };
                let peer = server.peer().to_string();
                *slot = Some(server);
                match result {
                    Ok(GssStep::Challenge(c)) => return Ok((Bytes::from(c), 0)),
                    Ok(GssStep::Done(short)) => {
                        tracing::debug!(%peer, user = %short, "GSSAPI authentication");
                        (short, Bytes::new())
                    }
                    Err(reason) => {
                        // Kerberos failures are configuration problems more
                        // often than attacks: the operator needs the reason.
                        tracing::info!(%peer, %reason, "GSSAPI authentication failed");
                        return failed(generic());
                    }
                }
            }
            Exchange::Scram(m, server) => {
                let lookup = |u: &str| credentials.scram(u, *m).cloned();
                let tokens = self.settings.tokens.as_ref();
                if let Some(tokens) = tokens {
                    if let Ok((id, true)) = super::scram::client_first_login(&token) {
                        // A token's credential is derived at its first
                        // login (one PBKDF2 run): off the connection threads.
                        tokens.prepare(&id, *m).await;
                    }
                }
                let now_ms = crate::wall_clock::wall_clock_ms();
                let token_login = |id: &str| tokens?.login(id, *m, now_ms).map(|l| (l.credential, l.owner));
                match server.step_with_tokens(&token, &lookup, &token_login, &super::scram::random_nonce()) {
                    Ok(ScramStep::Challenge(c)) => return Ok((Bytes::from(c), 0)),
                    Ok(ScramStep::Done { username, response, token: Some(id) }) => {
                        // The token's owner, named as its creator named it.
                        let Some(login) = tokens.and_then(|t| t.login(&id, *m, now_ms)) else {
                            return failed(generic());
                        };
                        credential_expires_ms = Some(login.expiry_ms.saturating_sub(now_ms));
                        token_owner = Some(username);
                        (id, Bytes::from(response))
                    }
                    Ok(ScramStep::Done { username, response, token: None }) => (username, Bytes::from(response)),
                    Err(ScramError::Specific(m)) => return failed(m),
                    Err(ScramError::Generic(reason)) => {
                        tracing::debug!(%reason, "SCRAM authentication failed");
                        return failed(generic());
                    }
                }
            }
        };
        let token_authenticated = token_owner.is_some();
        let principal: Arc<str> = Arc::from(token_owner.unwrap_or_else(|| format!("User:{user}")));
        if let Some(old) = &self.session {
            if old.principal != principal {
                let strip = |p: &str| p.replacen(':', ".", 1);
                return failed(format!(
                    "Cannot change principals during re-authentication from {}: {}",
                    strip(&old.principal),
                    strip(&principal)
                ));
            }
        }
        // As Kafka's SaslServerAuthenticator: the session ends with the
        // credential or after connections_max_reauth_ms, whichever is first.
        let lifetime = match (credential_expires_ms, self.settings.max_reauth_ms) {
            (None, max) => max.max(0),
            (Some(left), max) if max > 0 => left.min(max).max(0),
            (Some(left), _) => left.max(0),
        };
        let expires =
            (lifetime > 0 || credential_expires_ms.is_some()).then(|| now + Duration::from_millis(lifetime as u64));
        metrics::counter!("kcoord_authentications_total", "mechanism" => mechanism.clone(), "result" => "success")
            .increment(1);
        self.session = Some(Session { principal, mechanism, expires, token_authenticated });
        self.phase = Phase::Done;
        Ok((response, lifetime))
    }
}

impl SaslSession {
    /// Checks a frame [`admit`](Self::admit) gave [`Admit::Sasl`] before it
    /// is relayed upstream, and notes what it starts. `Err`: the answer to
    /// give instead (the frame is not relayed).
    pub fn relay_request(&mut self, frame: &Bytes, now: Instant) -> Result<(), Reply> {
        use super::sasl_relay;
        let Some(relay) = self.settings.relay.clone() else {
            return Err(fail_without_answer("this listener does not relay authentication".into()));
        };
        let prefix = header::peek_prefix(frame).map_err(|e| fail_without_answer(e.to_string()))?;
        let (expected, support) = match self.phase {
            Phase::Tokens { .. } => (sasl_authenticate::SUPPORT.key, sasl_authenticate::SUPPORT),
            _ => (sasl_handshake::SUPPORT.key, sasl_handshake::SUPPORT),
        };
        if prefix.api_key != expected {
            return Err(self.unexpected(&prefix));
        }
        let v = prefix.api_version;
        if !support.supports(v) {
            return Err(fail_without_answer(format!("unsupported version {v} of {}", support.name)));
        }
        let mut body = frame.clone();
        header::parse_request_header(&mut body, support.is_flexible(v))
            .map_err(|e| fail_without_answer(format!("{} request header: {e}", support.name)))?;
        if expected == sasl_handshake::SUPPORT.key {
            if v == 0 {
                return Err(fail_without_answer(
                    "SaslHandshake v0 (unframed tokens) cannot be relayed upstream; the client must use v1".into(),
                ));
            }
            let mechanism = sasl_handshake::decode(&mut body, v).map_err(|e| fail_without_answer(e.to_string()))?;
            if !sasl_relay::relayable(&mechanism) || !self.settings.mechanisms.contains(&mechanism) {
                let offered: Vec<String> =
                    self.settings.mechanisms.iter().filter(|m| sasl_relay::relayable(m)).cloned().collect();
                let response = response_frame(&prefix, false, |out| {
                    sasl_handshake::encode(ErrorCode::UNSUPPORTED_SASL_MECHANISM, &offered, v, out)
                });
                return Err(Reply::Fail { response, reason: format!("Unsupported SASL mechanism {mechanism}") });
            }
            if self.session.is_some() {
                self.reauth_started = Some(now);
            }
            self.phase = Phase::Tokens { mechanism, exchange: Exchange::Relay { user: None, steps: 0 }, raw: false };
        } else {
            let token = sasl_authenticate::decode(&mut body, v).map_err(|e| fail_without_answer(e.to_string()))?;
            if let Phase::Tokens { mechanism, exchange: Exchange::Relay { user: user @ None, .. }, .. } =
                &mut self.phase
            {
                match sasl_relay::login_of(mechanism, &token, &relay) {
                    Ok(name) => *user = Some(name),
                    Err(reason) => {
                        let answer = sasl_authenticate::Answer {
                            error: ErrorCode::SASL_AUTHENTICATION_FAILED,
                            message: Some(reason.clone()),
                            token: Bytes::new(),
                            session_lifetime_ms: 0,
                        };
                        let response = response_frame(&prefix, support.flexible_response_header(v), |out| {
                            sasl_authenticate::encode(&answer, v, out)
                        });
                        return Err(Reply::Fail { response, reason });
                    }
                }
            }
        }
        self.relayed = Some(prefix);
        Ok(())
    }

    /// Takes the upstream's answer (a whole frame, length prefix first) to
    /// the request [`Self::relay_request`] let through: it goes to the
    /// client unchanged, and a completed exchange authenticates the session
    /// as the user its first token named.
    pub fn relay_response(&mut self, frame: Bytes) -> Reply {
        let Some(prefix) = self.relayed.take() else {
            return fail_without_answer("an upstream SASL answer to no request".into());
        };
        let key = prefix.api_key;
        let (error, message, token) = match super::sasl_relay::answer_error(&frame, key, prefix.api_version) {
            Ok(parts) => parts,
            Err(e) => return fail_without_answer(format!("the upstream's SASL answer: {e}")),
        };
        let Phase::Tokens { mechanism, exchange, .. } = &mut self.phase else {
            return fail_without_answer("an upstream SASL answer out of turn".into());
        };
        let mechanism = mechanism.clone();
        let failed = |reason: String| {
            metrics::counter!("kcoord_authentications_total", "mechanism" => mechanism.clone(), "result" => "failure")
                .increment(1);
            Reply::Fail { response: Some(frame.clone()), reason }
        };
        if error != ErrorCode::NONE.0 {
            let reason = message.unwrap_or_else(|| format!("error {error}"));
            return failed(format!("the upstream refused the authentication: {reason}"));
        }
        if key == sasl_handshake::SUPPORT.key {
            return Reply::Respond(frame);
        }
        let Exchange::Relay { user, steps } = exchange else {
            return fail_without_answer("an upstream SASL answer out of turn".into());
        };
        *steps += 1;
        if !super::sasl_relay::completes(&mechanism, *steps, &token) {
            return Reply::Respond(frame);
        }
        let user = match user.take() {
            Some(super::sasl_relay::Login::User(user)) => user,
            Some(super::sasl_relay::Login::Token(token_id)) => {
                self.owner_wanted = Some(OwnerWanted { token_id, mechanism, prefix });
                return Reply::Respond(frame);
            }
            None => return failed("no user name was read from the client's first message".into()),
        };
        self.relayed_login(user, mechanism);
        Reply::Respond(frame)
    }

    /// The id of a delegation token whose relayed login the upstream has
    /// just accepted: the connection's principal is the token's owner,
    /// which only the upstream knows. The sidecar asks it and passes the
    /// answer to [`Self::resolve_token_owner`] before the client is
    /// answered.
    pub fn token_awaiting_owner(&self) -> Option<&str> {
        self.owner_wanted.as_ref().map(|w| w.token_id.as_str())
    }

    /// Completes a delegation-token login with its owner's name: the
    /// session is `User:<owner>`, as Kafka names a token's sessions, and
    /// the client gets the upstream's accepting answer (`accepted`). When
    /// the owner could not be learnt (`Err`), the login fails instead, with
    /// SASL_AUTHENTICATION_FAILED and the reason, and the connection
    /// closes: a token never passes for a user named like its id.
    pub fn resolve_token_owner(&mut self, owner: Result<String, String>, accepted: Bytes) -> Reply {
        let Some(wanted) = self.owner_wanted.take() else {
            return fail_without_answer("no delegation-token login awaits its owner".into());
        };
        match owner {
            Ok(owner) => {
                self.relayed_login(owner, wanted.mechanism);
                Reply::Respond(accepted)
            }
            Err(reason) => {
                metrics::counter!("kcoord_authentications_total", "mechanism" => wanted.mechanism, "result" => "failure")
                    .increment(1);
                let v = wanted.prefix.api_version;
                let message = format!(
                    "Authentication failed: the owner of delegation token {} is not known to the sidecar: {reason}",
                    wanted.token_id
                );
                let answer = sasl_authenticate::Answer {
                    error: ErrorCode::SASL_AUTHENTICATION_FAILED,
                    message: Some(message.clone()),
                    token: Bytes::new(),
                    session_lifetime_ms: 0,
                };
                let response =
                    response_frame(&wanted.prefix, sasl_authenticate::SUPPORT.flexible_response_header(v), |out| {
                        sasl_authenticate::encode(&answer, v, out)
                    });
                Reply::Fail { response, reason: message }
            }
        }
    }

    /// The upstream authenticated the connection as `user`.
    fn relayed_login(&mut self, user: String, mechanism: String) {
        metrics::counter!("kcoord_authentications_total", "mechanism" => mechanism.clone(), "result" => "success")
            .increment(1);
        // The upstream keeps the session's lifetime: it closes the link
        // (and so this connection) when the client does not renew it.
        self.session = Some(Session {
            principal: Arc::from(format!("User:{user}")),
            mechanism,
            expires: None,
            token_authenticated: false,
        });
        self.phase = Phase::Done;
    }

    /// The exchange just authenticated a GSSAPI session.
    fn completed_gssapi(&self) -> bool {
        matches!(self.phase, Phase::Done)
            && self.session.as_ref().is_some_and(|s| s.mechanism == super::kerberos::GSSAPI)
    }

    /// A request other than the one the exchange expects. As Kafka's
    /// SaslServerAuthenticator: the authentication fails (answered after
    /// the failed-authentication delay, then the connection closes); after
    /// the handshake the request gets its API's error answer with
    /// ILLEGAL_SASL_STATE, where the API has a top-level error code;
    /// before it, no answer.
    fn unexpected(&self, prefix: &header::RequestPrefix) -> Reply {
        let name = crate::server::apis::api_name(prefix.api_key);
        let (during, response) = match &self.phase {
            Phase::Tokens { mechanism, .. } => {
                metrics::counter!("kcoord_authentications_total", "mechanism" => mechanism.clone(), "result" => "failure")
                    .increment(1);
                ("authentication", illegal_state_answer(prefix))
            }
            _ => ("handshake", None),
        };
        Reply::Fail { response, reason: format!("Unexpected Kafka request of type {name} during SASL {during}.") }
    }
}

/// The request's error answer with ILLEGAL_SASL_STATE, if its API and
/// version have one.
fn illegal_state_answer(prefix: &header::RequestPrefix) -> Option<Bytes> {
    let support = crate::server::apis::lookup(prefix.api_key).filter(|s| s.supports(prefix.api_version))?;
    let v = prefix.api_version;
    let mut out = crate::server::dispatch::start_response(prefix.correlation_id, support.flexible_response_header(v));
    crate::protocol::error_answer::encode(prefix.api_key, v, ErrorCode::ILLEGAL_SASL_STATE, &mut out)?.ok()?;
    crate::server::dispatch::finish_frame(out)
}

/// The answer frame to `prefix`'s request, its body written by `encode`
/// (None if it cannot be encoded).
fn response_frame(
    prefix: &header::RequestPrefix,
    flexible_header: bool,
    encode: impl FnOnce(&mut BytesMut) -> Result<(), crate::protocol::codec::EncodeError>,
) -> Option<Bytes> {
    let mut out = crate::server::dispatch::start_response(prefix.correlation_id, flexible_header);
    encode(&mut out).ok()?;
    crate::server::dispatch::finish_frame(out)
}

/// A raw (v0) SASL token frame: a length prefix and the token.
fn raw_frame(token: &[u8]) -> Bytes {
    let mut out = BytesMut::with_capacity(4 + token.len());
    out.put_u32(token.len() as u32);
    out.put_slice(token);
    out.freeze()
}

fn fail_without_answer(reason: String) -> Reply {
    Reply::Fail { response: None, reason }
}
