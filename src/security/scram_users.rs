//! SCRAM users managed over the wire (KIP-554): what
//! DescribeUserScramCredentials and AlterUserScramCredentials do to the
//! credentials file, as Kafka's `ScramImage.describe` and
//! `ScramControlManager.alterCredentials` do to the cluster's metadata,
//! with their error codes and messages. `kafka-configs.sh --alter
//! --add-config 'SCRAM-SHA-512=[password=...]' --entity-type users` and
//! AdminClient's `alterUserScramCredentials` send these; the client salts
//! and hashes the password, so it never reaches kcoord.

use std::collections::{BTreeMap, BTreeSet};

use super::credentials::Credentials;
use super::scram::{ScramCredential, ScramMechanism};
use crate::error_code::ErrorCode;

/// Kafka's mechanism codes on the wire (`ScramMechanism.type()`).
pub fn mechanism_of(code: i8) -> Option<ScramMechanism> {
    match code {
        1 => Some(ScramMechanism::Sha256),
        2 => Some(ScramMechanism::Sha512),
        _ => None,
    }
}

pub fn code_of(mechanism: ScramMechanism) -> i8 {
    match mechanism {
        ScramMechanism::Sha256 => 1,
        ScramMechanism::Sha512 => 2,
    }
}

/// One user's answer to DescribeUserScramCredentials.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Described {
    pub user: String,
    pub error: ErrorCode,
    pub message: Option<String>,
    /// (mechanism code, iterations) of each credential.
    pub credentials: Vec<(i8, i32)>,
}

/// Kafka's `ScramImage.describe`: every user with a credential when
/// `users` is None or empty, else each named user once (a user named twice:
/// DUPLICATE_RESOURCE; one without credentials: RESOURCE_NOT_FOUND).
pub fn describe(credentials: &Credentials, users: Option<&[String]>) -> Vec<Described> {
    let mut named: BTreeMap<&str, bool> = BTreeMap::new();
    match users {
        Some(users) if !users.is_empty() => {
            for user in users {
                match named.get_mut(user.as_str()) {
                    Some(duplicate) => *duplicate = true,
                    None => {
                        named.insert(user, false);
                    }
                }
            }
        }
        _ => named.extend(credentials.users.iter().filter(|(_, m)| !m.is_empty()).map(|(u, _)| (u.as_str(), false))),
    }
    named
        .into_iter()
        .map(|(user, duplicate)| {
            let answer = |error, message: String| Described {
                user: user.to_string(),
                error,
                message: Some(message),
                credentials: vec![],
            };
            if duplicate {
                return answer(
                    ErrorCode::DUPLICATE_RESOURCE,
                    format!("Cannot describe SCRAM credentials for the same user twice in a single request: {user}"),
                );
            }
            let found: Vec<(i8, i32)> = ScramMechanism::ALL
                .into_iter()
                .filter_map(|m| {
                    let c = credentials.scram(user, m)?;
                    Some((code_of(m), i32::try_from(c.iterations).unwrap_or(i32::MAX)))
                })
                .collect();
            if found.is_empty() {
                return answer(
                    ErrorCode::RESOURCE_NOT_FOUND,
                    format!("Attempt to describe a user credential that does not exist: {user}"),
                );
            }
            Described { user: user.to_string(), error: ErrorCode::NONE, message: None, credentials: found }
        })
        .collect()
}

/// A credential to remove.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Deletion {
    pub user: String,
    pub mechanism: i8,
}

/// A credential to add or replace: the client's salt and salted password.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Upsertion {
    pub user: String,
    pub mechanism: i8,
    pub iterations: i32,
    pub salt: Vec<u8>,
    pub salted_password: Vec<u8>,
}

/// One user's answer to AlterUserScramCredentials.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Altered {
    pub user: String,
    pub error: ErrorCode,
    pub message: Option<String>,
}

const ALTERED_TWICE: &str = "A user credential cannot be altered twice in the same request";

/// Kafka's `ScramControlManager.alterCredentials` on `credentials`: a user
/// may be altered once per request (a second deletion or upsertion for it,
/// whatever the mechanism, fails the user with DUPLICATE_RESOURCE); an
/// empty name is UNACCEPTABLE_CREDENTIAL, an unknown mechanism
/// UNSUPPORTED_SASL_MECHANISM, iterations outside 4096–16384
/// UNACCEPTABLE_CREDENTIAL, deleting a credential that does not exist
/// RESOURCE_NOT_FOUND. The valid changes are applied; answers come as
/// Kafka's do: deletions, then upsertions, then the failed users.
pub fn alter(credentials: &mut Credentials, deletions: &[Deletion], upsertions: &[Upsertion]) -> Vec<Altered> {
    enum Change<'a> {
        Delete(ScramMechanism),
        Upsert(ScramMechanism, &'a Upsertion),
    }
    let mut failed: BTreeMap<&str, (ErrorCode, &'static str)> = BTreeMap::new();
    // Valid changes in request order, deletions first, at most one a user
    // (a slot emptied when its user turns out to be altered twice), and
    // where each user's is.
    let mut pending: Vec<Option<(&str, Change<'_>)>> = Vec::new();
    let mut slot_of: BTreeMap<&str, usize> = BTreeMap::new();
    let checked = deletions
        .iter()
        .map(|d| {
            let change =
                check_name_and_mechanism(&d.user, d.mechanism).and_then(|m| match credentials.scram(&d.user, m) {
                    Some(_) => Ok(Change::Delete(m)),
                    None => {
                        Err((ErrorCode::RESOURCE_NOT_FOUND, "Attempt to delete a user credential that does not exist"))
                    }
                });
            (d.user.as_str(), change)
        })
        .chain(upsertions.iter().map(|u| {
            let change = check_name_and_mechanism(&u.user, u.mechanism)
                .and_then(|m| check_iterations(u.iterations).map(|()| Change::Upsert(m, u)));
            (u.user.as_str(), change)
        }))
        .collect::<Vec<_>>();
    for (user, change) in checked {
        if failed.contains_key(user) {
            continue;
        }
        if let Some(at) = slot_of.remove(user) {
            if let Some(slot) = pending.get_mut(at) {
                *slot = None;
            }
            failed.insert(user, (ErrorCode::DUPLICATE_RESOURCE, ALTERED_TWICE));
            continue;
        }
        match change {
            Ok(change) => {
                slot_of.insert(user, pending.len());
                pending.push(Some((user, change)));
            }
            Err(e) => {
                failed.insert(user, e);
            }
        }
    }
    let mut out = Vec::with_capacity(pending.len() + failed.len());
    for (user, change) in pending.into_iter().flatten() {
        match change {
            Change::Delete(m) => {
                if let Some(mechs) = credentials.users.get_mut(user) {
                    mechs.remove(m.name());
                    if mechs.is_empty() {
                        credentials.users.remove(user);
                    }
                }
            }
            Change::Upsert(m, u) => {
                let iterations = u32::try_from(u.iterations).unwrap_or(ScramMechanism::MIN_ITERATIONS);
                let credential =
                    ScramCredential::from_salted_password(m, u.salt.clone(), &u.salted_password, iterations);
                credentials.users.entry(user.to_string()).or_default().insert(m.name().to_string(), credential);
            }
        }
        out.push(Altered { user: user.to_string(), error: ErrorCode::NONE, message: None });
    }
    out.extend(failed.into_iter().map(|(user, (error, message))| Altered {
        user: user.to_string(),
        error,
        message: Some(message.to_string()),
    }));
    out
}

fn check_name_and_mechanism(user: &str, code: i8) -> Result<ScramMechanism, (ErrorCode, &'static str)> {
    if user.is_empty() {
        return Err((ErrorCode::UNACCEPTABLE_CREDENTIAL, "Username must not be empty"));
    }
    mechanism_of(code).ok_or((ErrorCode::UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism"))
}

fn check_iterations(iterations: i32) -> Result<(), (ErrorCode, &'static str)> {
    let iterations = i64::from(iterations);
    if iterations < i64::from(ScramMechanism::MIN_ITERATIONS) {
        Err((ErrorCode::UNACCEPTABLE_CREDENTIAL, "Too few iterations"))
    } else if iterations > i64::from(ScramMechanism::MAX_ITERATIONS) {
        Err((ErrorCode::UNACCEPTABLE_CREDENTIAL, "Too many iterations"))
    } else {
        Ok(())
    }
}

/// Every user named by a request, once, sorted: how Kafka answers a
/// request refused whole (`AlterUserScramCredentialsRequest.getErrorResponse`).
pub fn users_of(deletions: &[Deletion], upsertions: &[Upsertion]) -> Vec<String> {
    let users: BTreeSet<&str> =
        deletions.iter().map(|d| d.user.as_str()).chain(upsertions.iter().map(|u| u.user.as_str())).collect();
    users.into_iter().map(str::to_string).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn upsert(user: &str, mechanism: i8, iterations: i32, password: &str) -> Upsertion {
        let m = mechanism_of(mechanism).unwrap_or(ScramMechanism::Sha256);
        let salt = b"client-salt".to_vec();
        let salted = m.salted_password(password.as_bytes(), &salt, u32::try_from(iterations.max(1)).unwrap());
        Upsertion { user: user.into(), mechanism, iterations, salt, salted_password: salted }
    }

    fn delete(user: &str, mechanism: i8) -> Deletion {
        Deletion { user: user.into(), mechanism }
    }

    fn errors(results: &[Altered]) -> Vec<(&str, i16)> {
        results.iter().map(|r| (r.user.as_str(), r.error.0)).collect()
    }

    #[test]
    fn an_upserted_credential_logs_in_with_the_password_the_client_salted() {
        let mut c = Credentials::default();
        let results = alter(&mut c, &[], &[upsert("alice", 2, 4096, "alice-secret")]);
        assert_eq!(errors(&results), vec![("alice", 0)]);
        assert!(c.plain_password_matches("alice", "alice-secret"));
        assert!(!c.plain_password_matches("alice", "other"));
        let d = describe(&c, None);
        assert_eq!(
            d,
            vec![Described {
                user: "alice".into(),
                error: ErrorCode::NONE,
                message: None,
                credentials: vec![(2, 4096)]
            }]
        );
    }

    #[test]
    fn invalid_alterations_get_kafkas_errors_and_change_nothing() {
        let mut c = Credentials::default();
        c.set_password("bob", "pw", &[ScramMechanism::Sha256], 4096);
        let before = c.clone();
        let results = alter(
            &mut c,
            &[delete("carol", 1), delete("", 1), delete("dave", 1), delete("dave", 2), delete("erin", 3)],
            &[upsert("bob", 1, 4095, "x"), upsert("frank", 2, 16385, "x"), upsert("carol", 1, 4096, "x")],
        );
        let mut got: Vec<(String, i16, String)> =
            results.iter().map(|r| (r.user.clone(), r.error.0, r.message.clone().unwrap_or_default())).collect();
        got.sort();
        assert_eq!(
            got,
            vec![
                ("".into(), 93, "Username must not be empty".into()),
                ("bob".into(), 93, "Too few iterations".into()),
                ("carol".into(), 91, "Attempt to delete a user credential that does not exist".into()),
                ("dave".into(), 91, "Attempt to delete a user credential that does not exist".into()),
                ("erin".into(), 33, "Unknown SCRAM mechanism".into()),
                ("frank".into(), 93, "Too many iterations".into()),
            ]
        );
        assert_eq!(c, before);
    }

    #[test]
    fn a_user_altered_twice_in_one_request_fails_and_others_go_through() {
        let mut c = Credentials::default();
        c.set_password("bob", "pw", &ScramMechanism::ALL, 4096);
        let results = alter(
            &mut c,
            &[delete("bob", 1), delete("bob", 2)],
            &[upsert("alice", 1, 4096, "a"), upsert("alice", 2, 4096, "a"), upsert("carol", 1, 8192, "c")],
        );
        assert_eq!(errors(&results), vec![("carol", 0), ("alice", 92), ("bob", 92)]);
        assert!(c.scram("bob", ScramMechanism::Sha256).is_some(), "a failed user keeps its credentials");
        assert!(!c.users.contains_key("alice"));
        assert_eq!(c.scram("carol", ScramMechanism::Sha256).map(|k| k.iterations), Some(8192));
    }

    #[test]
    fn deleting_a_users_last_credential_removes_the_user() {
        let mut c = Credentials::default();
        c.set_password("bob", "pw", &ScramMechanism::ALL, 4096);
        assert_eq!(errors(&alter(&mut c, &[delete("bob", 1)], &[])), vec![("bob", 0)]);
        assert_eq!(describe(&c, None)[0].credentials, vec![(2, 4096)]);
        assert_eq!(errors(&alter(&mut c, &[delete("bob", 2)], &[])), vec![("bob", 0)]);
        assert!(c.users.is_empty() && describe(&c, None).is_empty());
    }

    #[test]
    fn described_users_are_named_once_and_unknown_ones_reported() {
        let mut c = Credentials::default();
        c.set_password("alice", "pw", &ScramMechanism::ALL, 8192);
        let users: Vec<String> = ["alice", "nobody", "alice", "alice"].map(String::from).to_vec();
        let d = describe(&c, Some(&users));
        assert_eq!(d.len(), 2);
        assert_eq!((d[0].user.as_str(), d[0].error.0), ("alice", 92));
        assert_eq!(
            d[0].message.as_deref(),
            Some("Cannot describe SCRAM credentials for the same user twice in a single request: alice")
        );
        assert_eq!((d[1].user.as_str(), d[1].error.0), ("nobody", 91));
        assert_eq!(d[1].message.as_deref(), Some("Attempt to describe a user credential that does not exist: nobody"));
        let one = describe(&c, Some(&["alice".to_string()]));
        assert_eq!(one[0].credentials, vec![(1, 8192), (2, 8192)]);
        assert_eq!(describe(&c, Some(&[])).len(), 1, "an empty list describes everyone");
    }
}
