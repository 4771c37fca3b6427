//! DescribeUserScramCredentials and AlterUserScramCredentials: the
//! credentials file managed over the wire (KIP-554), so that
//! `kafka-configs.sh --entity-type users` and AdminClient manage kcoord's
//! SCRAM users. As Kafka: DESCRIBE on the cluster to list them, ALTER to
//! change them (CLUSTER_AUTHORIZATION_FAILED). A change is answered only
//! once the file holding it is durable, and it is in force at once. Without
//! `security.credentials_file` nothing can be stored: changes are refused
//! with SECURITY_DISABLED and no user is described.

use std::path::PathBuf;
use std::sync::Arc;

use super::authorize::{default_message, Guard};
use super::Services;
use crate::error_code::ErrorCode;
use crate::security::acl::Operation;
use crate::security::credentials::Credentials;
use crate::security::scram_users::{self, Altered, Deletion, Described, Upsertion};

const NO_CREDENTIALS_FILE: &str = "No credentials file is configured (security.credentials_file).";

fn credentials_file(svc: &Services) -> Option<PathBuf> {
    let path = &svc.config.security.credentials_file;
    (!path.is_empty()).then(|| PathBuf::from(path))
}

/// DescribeUserScramCredentials: (top-level error, its message, results).
pub async fn describe(
    svc: &Services,
    guard: &Guard<'_>,
    users: Option<Vec<String>>,
) -> (ErrorCode, Option<String>, Vec<Described>) {
    if !guard.cluster(Operation::Describe, false) {
        let e = ErrorCode::CLUSTER_AUTHORIZATION_FAILED;
        return (e, Some(default_message(e).into()), vec![]);
    }
    let credentials = match (&svc.credentials, credentials_file(svc)) {
        (Some(store), _) => Ok(store.current()),
        (None, Some(path)) => tokio::task::spawn_blocking(move || Credentials::load(&path).map(Arc::new))
            .await
            .unwrap_or_else(|e| Err(e.to_string())),
        (None, None) => Ok(Arc::new(Credentials::default())),
    };
    let credentials = match credentials {
        Ok(c) => c,
        Err(e) => {
            tracing::error!(error = %e, "DescribeUserScramCredentials: the credentials file could not be read");
            return (ErrorCode::UNKNOWN_SERVER_ERROR, Some("the credentials file could not be read".into()), vec![]);
        }
    };
    (ErrorCode::NONE, None, scram_users::describe(&credentials, users.as_deref()))
}

/// AlterUserScramCredentials: one result per user.
pub async fn alter(
    svc: &Services,
    guard: &Guard<'_>,
    deletions: Vec<Deletion>,
    upsertions: Vec<Upsertion>,
) -> Vec<Altered> {
    let users = scram_users::users_of(&deletions, &upsertions);
    let refuse_all = |error: ErrorCode, message: &str| {
        users.iter().map(|user| Altered { user: user.clone(), error, message: Some(message.to_string()) }).collect()
    };
    if !guard.cluster(Operation::Alter, false) {
        let e = ErrorCode::CLUSTER_AUTHORIZATION_FAILED;
        return refuse_all(e, default_message(e));
    }
    let Some(path) = credentials_file(svc) else {
        return refuse_all(ErrorCode::SECURITY_DISABLED, NO_CREDENTIALS_FILE);
    };
    let edit = tokio::task::spawn_blocking(move || {
        Credentials::edit(&path, |c| Ok(scram_users::alter(c, &deletions, &upsertions)))
    })
    .await
    .map_err(|e| e.to_string())
    .and_then(|r| r);
    match edit {
        Ok(results) => {
            if let Some(store) = &svc.credentials {
                if let Err(e) = store.reload() {
                    tracing::error!(error = %e, "AlterUserScramCredentials: the credentials file could not be reloaded");
                }
            }
            for r in results.iter().filter(|r| r.error == ErrorCode::NONE) {
                tracing::info!(user = %r.user, "SCRAM credentials altered over the wire");
            }
            results
        }
        Err(e) => {
            tracing::error!(error = %e, "AlterUserScramCredentials: the credentials file could not be written");
            refuse_all(ErrorCode::UNKNOWN_SERVER_ERROR, "the credentials file could not be written")
        }
    }
}
