//! Producer ids for idempotent producers (InitProducerId).
//!
//! Ids must never be handed out twice, across restarts too: a reused id
//! would inherit another producer's sequence state in every partition. As
//! Kafka's controller does, ids are reserved in blocks of 1000: the end of
//! the current block is persisted (`producer-ids.json`, written atomically)
//! *before* any id of the block is returned, so a crash only skips ids. On
//! start-up the next id is also raised above every id found in the partition
//! logs, in case the file was lost.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde::{Deserialize, Serialize};

use crate::error_code::ErrorCode;
use crate::storage::disk::{self, Disk};
use crate::storage::fsutil;

/// Ids reserved per write of the file (Kafka: `PRODUCER_ID_BLOCK_SIZE`).
pub const BLOCK_SIZE: i64 = 1000;

const FILE_NAME: &str = "producer-ids.json";

#[derive(Debug, Serialize, Deserialize)]
struct IdsFile {
    /// Every id at or above this is unused.
    next_block: i64,
}

#[derive(Debug)]
struct Block {
    next: i64,
    end: i64,
}

/// Hands out producer ids.
#[derive(Debug)]
pub struct ProducerIdAllocator {
    path: PathBuf,
    /// Where `path` is: the real file system, or a simulated disk in tests.
    fs: Disk,
    block: Mutex<Block>,
}

impl ProducerIdAllocator {
    /// Opens the allocator in `dir`; ids below `min_next` are never returned.
    pub fn open(dir: &Path, min_next: i64) -> std::io::Result<Self> {
        Self::open_on(disk::os(), dir, min_next)
    }

    /// [`ProducerIdAllocator::open`] on the file system `fs`.
    pub fn open_on(fs: Disk, dir: &Path, min_next: i64) -> std::io::Result<Self> {
        let path = dir.join(FILE_NAME);
        let persisted = match fs.read(&path) {
            Ok(bytes) => {
                let f: IdsFile = serde_json::from_slice(&bytes).map_err(|e| {
                    std::io::Error::new(std::io::ErrorKind::InvalidData, format!("{}: {e}", path.display()))
                })?;
                f.next_block
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => 0,
            Err(e) => return Err(e),
        };
        let next = persisted.max(min_next).max(0);
        Ok(ProducerIdAllocator { path, fs, block: Mutex::new(Block { next, end: next }) })
    }

    /// A fresh producer id.
    pub fn next_id(&self) -> Result<i64, ErrorCode> {
        let mut b = self.block.lock().unwrap_or_else(|p| p.into_inner());
        if b.next >= b.end {
            let end = b.next.checked_add(BLOCK_SIZE).ok_or(ErrorCode::UNKNOWN_SERVER_ERROR)?;
            let bytes =
                serde_json::to_vec(&IdsFile { next_block: end }).map_err(|_| ErrorCode::UNKNOWN_SERVER_ERROR)?;
            if let Err(e) = fsutil::write_atomically_on(&*self.fs, &self.path, &bytes) {
                tracing::error!(file = %self.path.display(), error = %e, "cannot reserve producer ids");
                return Err(ErrorCode::KAFKA_STORAGE_ERROR);
            }
            b.end = end;
        }
        let id = b.next;
        b.next += 1;
        Ok(id)
    }
}

/// InitProducerId, as kcoord reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InitProducerIdRequest {
    pub transactional_id: Option<String>,
    pub producer_id: i64,
    pub producer_epoch: i16,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InitProducerIdResponse {
    pub error: ErrorCode,
    pub producer_id: i64,
    pub producer_epoch: i16,
}

impl InitProducerIdResponse {
    fn error(error: ErrorCode) -> Self {
        InitProducerIdResponse { error, producer_id: -1, producer_epoch: -1 }
    }
}

/// Kafka's answer to InitProducerId without a transaction coordinator:
/// - a half-given id/epoch pair is INVALID_REQUEST (as `KafkaApis`);
/// - a null transactional id always gets a fresh id and epoch 0, also when
///   the client sends its current id and epoch (v3+): Kafka's
///   `TransactionCoordinator.handleInitProducerId` only bumps epochs of
///   transactional ids, and clients accept a new id as the bump;
/// - an empty transactional id is INVALID_REQUEST (as Kafka);
/// - any other transactional id gets COORDINATOR_NOT_AVAILABLE: there is no
///   transaction coordinator (FindCoordinator says the same), which is what
///   Kafka answers while its transaction log is unavailable.
pub fn init_producer_id(ids: &ProducerIdAllocator, req: &InitProducerIdRequest) -> InitProducerIdResponse {
    if (req.producer_id == -1) != (req.producer_epoch == -1) {
        return InitProducerIdResponse::error(ErrorCode::INVALID_REQUEST);
    }
    match req.transactional_id.as_deref() {
        None => match ids.next_id() {
            Ok(id) => InitProducerIdResponse { error: ErrorCode::NONE, producer_id: id, producer_epoch: 0 },
            Err(e) => InitProducerIdResponse::error(e),
        },
        Some("") => InitProducerIdResponse::error(ErrorCode::INVALID_REQUEST),
        Some(_) => InitProducerIdResponse::error(ErrorCode::COORDINATOR_NOT_AVAILABLE),
    }
}

impl super::service::DataPlane {
    pub fn init_producer_id(&self, req: &InitProducerIdRequest) -> InitProducerIdResponse {
        init_producer_id(&self.producer_ids, req)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(txn: Option<&str>, pid: i64, epoch: i16) -> InitProducerIdRequest {
        InitProducerIdRequest { transactional_id: txn.map(str::to_string), producer_id: pid, producer_epoch: epoch }
    }

    #[test]
    fn ids_are_unique_across_reopen_even_after_a_crash_mid_block() {
        let dir = tempfile::tempdir().unwrap();
        let a = ProducerIdAllocator::open(dir.path(), 0).unwrap();
        let first: Vec<i64> = (0..3).map(|_| a.next_id().unwrap()).collect();
        assert_eq!(first, vec![0, 1, 2]);
        drop(a);
        let b = ProducerIdAllocator::open(dir.path(), 0).unwrap();
        assert_eq!(b.next_id().unwrap(), BLOCK_SIZE);
        // Ids seen in partition logs push the start further.
        let c = ProducerIdAllocator::open(dir.path(), 5 * BLOCK_SIZE + 3).unwrap();
        assert_eq!(c.next_id().unwrap(), 5 * BLOCK_SIZE + 3);
    }

    #[test]
    fn init_producer_id_follows_kafka_without_transactions() {
        let dir = tempfile::tempdir().unwrap();
        let ids = ProducerIdAllocator::open(dir.path(), 0).unwrap();
        let r = init_producer_id(&ids, &req(None, -1, -1));
        assert_eq!((r.error, r.producer_id, r.producer_epoch), (ErrorCode::NONE, 0, 0));
        let bumped = init_producer_id(&ids, &req(None, 0, 0));
        assert_eq!((bumped.error, bumped.producer_id, bumped.producer_epoch), (ErrorCode::NONE, 1, 0));
        assert_eq!(init_producer_id(&ids, &req(None, 0, -1)).error, ErrorCode::INVALID_REQUEST);
        assert_eq!(init_producer_id(&ids, &req(Some(""), -1, -1)).error, ErrorCode::INVALID_REQUEST);
        let t = init_producer_id(&ids, &req(Some("txn"), -1, -1));
        assert_eq!((t.error, t.producer_id, t.producer_epoch), (ErrorCode::COORDINATOR_NOT_AVAILABLE, -1, -1));
    }
}
