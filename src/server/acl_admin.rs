//! CreateAcls, DescribeAcls and DeleteAcls: the ACL file managed over the
//! wire, so that AdminClient and kafka-acls.sh work against kcoord. As
//! Kafka: ALTER on the cluster to change ACLs, DESCRIBE to list them
//! (CLUSTER_AUTHORIZATION_FAILED), SECURITY_DISABLED without an authorizer.
//! A change is answered only once the file holding it is durable.

use std::sync::Arc;

use super::authorize::{default_message, Guard};
use super::Services;
use crate::error_code::ErrorCode;
use crate::protocol::api::delete_acls::FilterResult;
use crate::security::acl::filter::AclFilter;
use crate::security::acl::{AclBinding, AclStore, Operation};

const NO_AUTHORIZER: &str = "No Authorizer is configured.";

/// The ACL store a change may go to, or the error every item is answered.
fn writable(svc: &Services, guard: &Guard<'_>, op: Operation) -> Result<Arc<AclStore>, (ErrorCode, String)> {
    if !guard.cluster(op, false) {
        let e = ErrorCode::CLUSTER_AUTHORIZATION_FAILED;
        return Err((e, default_message(e).into()));
    }
    svc.authorizer.store().cloned().ok_or((ErrorCode::SECURITY_DISABLED, NO_AUTHORIZER.into()))
}

/// Runs a change of the ACL file off the async runtime (it fsyncs).
async fn modify<R: Send + 'static>(
    store: Arc<AclStore>,
    change: impl FnOnce(&mut Vec<AclBinding>) -> R + Send + 'static,
) -> Result<R, String> {
    tokio::task::spawn_blocking(move || store.modify(change)).await.map_err(|e| e.to_string())?
}

/// CreateAcls: one (error, message) per creation.
pub async fn create(
    svc: &Services,
    guard: &Guard<'_>,
    creations: Vec<Result<AclBinding, String>>,
) -> Vec<(ErrorCode, Option<String>)> {
    let store = match writable(svc, guard, Operation::Alter) {
        Ok(s) => s,
        Err((e, m)) => return creations.iter().map(|_| (e, Some(m.clone()))).collect(),
    };
    let valid: Vec<AclBinding> = creations.iter().filter_map(|c| c.as_ref().ok().cloned()).collect();
    let stored = match valid.is_empty() {
        true => Ok(()),
        false => {
            modify(store, move |acls| {
                for acl in valid {
                    if !acls.contains(&acl) {
                        acls.push(acl);
                    }
                }
            })
            .await
        }
    };
    if let Err(e) = &stored {
        tracing::error!(error = %e, "CreateAcls: the ACL file could not be written");
    }
    creations
        .into_iter()
        .map(|c| match (c, &stored) {
            (Err(m), _) => (ErrorCode::INVALID_REQUEST, Some(m)),
            (Ok(_), Ok(())) => (ErrorCode::NONE, None),
            (Ok(_), Err(e)) => (ErrorCode::UNKNOWN_SERVER_ERROR, Some(e.clone())),
        })
        .collect()
}

/// DescribeAcls: (error, message, matching ACLs sorted).
pub fn describe(
    svc: &Services,
    guard: &Guard<'_>,
    filter: Result<Option<AclFilter>, String>,
) -> (ErrorCode, Option<String>, Vec<AclBinding>) {
    if !guard.cluster(Operation::Describe, false) {
        let e = ErrorCode::CLUSTER_AUTHORIZATION_FAILED;
        return (e, Some(default_message(e).into()), vec![]);
    }
    let Some(store) = svc.authorizer.store() else {
        return (ErrorCode::SECURITY_DISABLED, Some(NO_AUTHORIZER.into()), vec![]);
    };
    match filter {
        Err(m) => (ErrorCode::INVALID_REQUEST, Some(m), vec![]),
        Ok(None) => (ErrorCode::NONE, None, vec![]),
        Ok(Some(f)) => {
            (ErrorCode::NONE, None, store.current().bindings().into_iter().filter(|a| f.matches(a)).collect())
        }
    }
}

/// DeleteAcls: one result per filter; an ACL several filters match is
/// reported by the first.
pub async fn delete(
    svc: &Services,
    guard: &Guard<'_>,
    filters: Vec<Result<Option<AclFilter>, String>>,
) -> Vec<FilterResult> {
    let answer = |error, message: String| FilterResult { error, message: Some(message), deleted: vec![] };
    let store = match writable(svc, guard, Operation::Alter) {
        Ok(s) => s,
        Err((e, m)) => return filters.iter().map(|_| answer(e, m.clone())).collect(),
    };
    let count = filters.len();
    let deleted = modify(store, move |acls| {
        let mut per_filter: Vec<Result<Vec<AclBinding>, String>> = Vec::with_capacity(filters.len());
        for f in filters {
            per_filter.push(match f {
                Err(m) => Err(m),
                Ok(None) => Ok(vec![]),
                Ok(Some(f)) => {
                    let (gone, kept): (Vec<AclBinding>, Vec<AclBinding>) =
                        std::mem::take(acls).into_iter().partition(|a| f.matches(a));
                    *acls = kept;
                    Ok(gone)
                }
            });
        }
        per_filter
    })
    .await;
    match deleted {
        Ok(per_filter) => per_filter
            .into_iter()
            .map(|r| match r {
                Ok(mut gone) => {
                    gone.sort();
                    FilterResult { error: ErrorCode::NONE, message: None, deleted: gone }
                }
                Err(m) => answer(ErrorCode::INVALID_REQUEST, m),
            })
            .collect(),
        Err(e) => {
            tracing::error!(error = %e, "DeleteAcls: the ACL file could not be written");
            (0..count).map(|_| answer(ErrorCode::UNKNOWN_SERVER_ERROR, e.clone())).collect()
        }
    }
}
