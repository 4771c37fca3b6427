//! OffsetCommit and OffsetFetch against a consumer group: Kafka's
//! `ConsumerGroup.validateOffsetCommit` / `validateOffsetFetch`. A member
//! commits and fetches with its member epoch (OffsetCommit v9+); a stale
//! epoch gets STALE_MEMBER_EPOCH so the client refreshes before retrying.
//! A classic member of a consumer group (online migration) commits with its
//! member epoch as generation through any OffsetCommit version, and a
//! mismatch is ILLEGAL_GENERATION, as a classic group would answer.

use super::group::ConsumerGroup;
use crate::coordinator::messages::{OffsetCommitRequest, OffsetFetchGroup};
use crate::error_code::ErrorCode;

/// The first OffsetCommit version that carries a member epoch.
const MEMBER_EPOCH_COMMIT_VERSION: i16 = 9;

/// Whether a (non-transactional) commit may write to `g`.
pub fn validate_commit(g: &ConsumerGroup, req: &OffsetCommitRequest) -> Result<(), ErrorCode> {
    validate(g, req, false)
}

/// Whether a TxnOffsetCommit may commit to `g` (sidecar mode delegates it
/// upstream after this check). As Kafka's `validateTransactionalOffsetCommit`,
/// a stale member epoch is ILLEGAL_GENERATION, and any TxnOffsetCommit
/// version may come from a KIP-848 member.
pub fn validate_transactional_commit(g: &ConsumerGroup, req: &OffsetCommitRequest) -> Result<(), ErrorCode> {
    validate(g, req, true)
        .map_err(|e| if e == ErrorCode::STALE_MEMBER_EPOCH { ErrorCode::ILLEGAL_GENERATION } else { e })
}

/// Kafka's `ConsumerGroup.validateOffsetCommit`.
fn validate(g: &ConsumerGroup, req: &OffsetCommitRequest, transactional: bool) -> Result<(), ErrorCode> {
    // Epoch −1: an admin client or a consumer without group management,
    // allowed only while the group has no members.
    if req.generation_id < 0 && g.members.is_empty() {
        return Ok(());
    }
    let member = g.members.get(&req.member_id).ok_or(ErrorCode::UNKNOWN_MEMBER_ID)?;
    let classic = member.uses_classic_protocol();
    if !transactional && !classic && req.version < MEMBER_EPOCH_COMMIT_VERSION {
        // "OffsetCommit version 9 or above must be used by members using the
        // modern group protocol".
        return Err(ErrorCode::UNSUPPORTED_VERSION);
    }
    if req.generation_id != member.member_epoch {
        return Err(if classic { ErrorCode::ILLEGAL_GENERATION } else { ErrorCode::STALE_MEMBER_EPOCH });
    }
    Ok(())
}

/// Whether a fetch may read `g`'s offsets.
pub fn validate_fetch(g: &ConsumerGroup, req: &OffsetFetchGroup) -> Result<(), ErrorCode> {
    let Some(member_id) = &req.member_id else {
        return if req.member_epoch < 0 { Ok(()) } else { Err(ErrorCode::UNKNOWN_MEMBER_ID) };
    };
    let member = g.members.get(member_id).ok_or(ErrorCode::UNKNOWN_MEMBER_ID)?;
    if req.member_epoch != member.member_epoch {
        return Err(if member.uses_classic_protocol() {
            ErrorCode::ILLEGAL_GENERATION
        } else {
            ErrorCode::STALE_MEMBER_EPOCH
        });
    }
    Ok(())
}
