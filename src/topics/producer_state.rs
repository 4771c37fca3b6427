//! Idempotent-producer state of one partition: for each producer id, its
//! epoch and the last five batches it wrote, so that a retried batch is never
//! stored twice.
//!
//! This is Kafka's `ProducerStateManager` reduced to what non-transactional
//! producers need, with Kafka's rules:
//! - a batch with the same epoch and exactly the sequence range of one of the
//!   last five batches is a duplicate: it is acknowledged with the offset it
//!   was first stored at and not stored again;
//! - an older epoch gets INVALID_PRODUCER_EPOCH;
//! - a newer epoch must start at sequence 0, the same epoch must continue at
//!   last sequence + 1 (wrapping at `i32::MAX`), otherwise
//!   OUT_OF_ORDER_SEQUENCE_NUMBER — including a retry older than the five
//!   remembered batches (Kafka answers it so since it stopped sending
//!   DUPLICATE_SEQUENCE_NUMBER, which clients read as "already written");
//! - a producer we know nothing about (new, or expired, or its batches all
//!   deleted by retention) may start at any sequence.
//!
//! The state is rebuilt on start-up by replaying every stored batch header
//! through [`ProducerStates::record`], the same function the live path uses,
//! so a restart sees exactly what it saw before (the log is the truth).

use std::collections::{HashMap, VecDeque};

use super::batch::{BatchHeader, NO_SEQUENCE};
use crate::error_code::ErrorCode;

/// Batches remembered per producer (Kafka: `NUM_BATCHES_TO_RETAIN`, which
/// is also the client's `max.in.flight.requests.per.connection` limit).
pub const BATCHES_TO_RETAIN: usize = 5;

/// A producer unseen for this long is forgotten (Kafka's default
/// `producer.id.expiration.ms`), keeping the state bounded.
pub const PRODUCER_EXPIRATION_MS: i64 = 86_400_000;

/// One stored batch of a producer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchMeta {
    pub first_seq: i32,
    pub last_seq: i32,
    pub base_offset: i64,
    pub last_offset: i64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct ProducerEntry {
    epoch: i16,
    batches: VecDeque<BatchMeta>,
    /// Max timestamp of its latest batch (Kafka expires by this).
    last_timestamp: i64,
}

/// What to do with an incoming idempotent batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Store it.
    Append,
    /// Already stored: answer with the original batch.
    Duplicate(BatchMeta),
}

/// A refused batch: the error and Kafka's message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SequenceError {
    pub code: ErrorCode,
    pub message: String,
}

/// The producers of one partition.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct ProducerStates {
    producers: HashMap<i64, ProducerEntry>,
}

fn in_sequence(last_seq: i32, next_seq: i32) -> bool {
    next_seq as i64 == last_seq as i64 + 1 || (next_seq == 0 && last_seq == i32::MAX)
}

impl ProducerStates {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn len(&self) -> usize {
        self.producers.len()
    }

    pub fn is_empty(&self) -> bool {
        self.producers.is_empty()
    }

    /// The highest producer id seen, so ids are never handed out twice even
    /// if the id allocator's file were lost.
    pub fn max_producer_id(&self) -> Option<i64> {
        self.producers.keys().copied().max()
    }

    /// Decides about a batch before it is stored (`h` as the producer sent it).
    pub fn check(&self, h: &BatchHeader) -> Result<Verdict, SequenceError> {
        if !h.has_producer_id() {
            return Ok(Verdict::Append);
        }
        let Some(entry) = self.producers.get(&h.producer_id) else {
            return Ok(Verdict::Append);
        };
        let (first_seq, last_seq) = (h.base_sequence, h.last_sequence());
        if h.producer_epoch == entry.epoch {
            if let Some(d) = entry.batches.iter().find(|b| b.first_seq == first_seq && b.last_seq == last_seq) {
                return Ok(Verdict::Duplicate(*d));
            }
        }
        if h.producer_epoch < entry.epoch {
            return Err(SequenceError {
                code: ErrorCode::INVALID_PRODUCER_EPOCH,
                message: format!(
                    "Epoch of producer {} is {}, which is smaller than the last seen epoch {}",
                    h.producer_id, h.producer_epoch, entry.epoch
                ),
            });
        }
        if h.producer_epoch > entry.epoch {
            if first_seq != 0 {
                return Err(SequenceError {
                    code: ErrorCode::OUT_OF_ORDER_SEQUENCE_NUMBER,
                    message: format!(
                        "Invalid sequence number for new epoch of producer {}: {} (request epoch), {} (seq. number), {} (current producer epoch)",
                        h.producer_id, h.producer_epoch, first_seq, entry.epoch
                    ),
                });
            }
            return Ok(Verdict::Append);
        }
        let current_last = entry.batches.back().map_or(NO_SEQUENCE, |b| b.last_seq);
        if !in_sequence(current_last, first_seq) {
            return Err(SequenceError {
                code: ErrorCode::OUT_OF_ORDER_SEQUENCE_NUMBER,
                message: format!(
                    "Out of order sequence number for producer {}: {first_seq} (incoming seq. number), {current_last} (current end sequence number)",
                    h.producer_id
                ),
            });
        }
        Ok(Verdict::Append)
    }

    /// Records a stored batch (`h` with its assigned base offset). The only
    /// way the state changes, live and on replay.
    pub fn record(&mut self, h: &BatchHeader) {
        if !h.has_producer_id() {
            return;
        }
        let entry = self.producers.entry(h.producer_id).or_insert_with(|| ProducerEntry {
            epoch: h.producer_epoch,
            batches: VecDeque::with_capacity(BATCHES_TO_RETAIN),
            last_timestamp: h.max_timestamp,
        });
        if h.producer_epoch != entry.epoch {
            entry.batches.clear();
            entry.epoch = h.producer_epoch;
        }
        if entry.batches.len() >= BATCHES_TO_RETAIN {
            entry.batches.pop_front();
        }
        entry.batches.push_back(BatchMeta {
            first_seq: h.base_sequence,
            last_seq: h.last_sequence(),
            base_offset: h.base_offset,
            last_offset: h.last_offset(),
        });
        entry.last_timestamp = h.max_timestamp;
    }

    /// Forgets producers whose latest batch is older than
    /// [`PRODUCER_EXPIRATION_MS`].
    pub fn expire(&mut self, now_ms: i64) {
        self.producers.retain(|_, e| now_ms.saturating_sub(e.last_timestamp) < PRODUCER_EXPIRATION_MS);
    }

    /// Forgets producers whose batches were all deleted by retention (as
    /// Kafka does when the log start offset moves).
    pub fn truncate_head(&mut self, log_start_offset: i64) {
        self.producers.retain(|_, e| e.batches.back().is_some_and(|b| b.last_offset >= log_start_offset));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h(pid: i64, epoch: i16, seq: i32, n: i32, base_offset: i64) -> BatchHeader {
        BatchHeader {
            base_offset,
            batch_length: 100,
            leader_epoch: 0,
            magic: 2,
            crc: 0,
            attributes: 0,
            last_offset_delta: n - 1,
            base_timestamp: 1_000,
            max_timestamp: 1_000,
            producer_id: pid,
            producer_epoch: epoch,
            base_sequence: seq,
            record_count: n,
        }
    }

    #[test]
    fn in_order_batches_are_appended_and_a_retry_is_a_duplicate() {
        let mut s = ProducerStates::new();
        assert_eq!(s.check(&h(1, 0, 0, 3, 0)), Ok(Verdict::Append));
        s.record(&h(1, 0, 0, 3, 10));
        assert_eq!(s.check(&h(1, 0, 3, 2, 0)), Ok(Verdict::Append));
        s.record(&h(1, 0, 3, 2, 13));
        match s.check(&h(1, 0, 0, 3, 0)) {
            Ok(Verdict::Duplicate(b)) => assert_eq!((b.base_offset, b.last_offset), (10, 12)),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn gaps_and_overlaps_are_out_of_order() {
        let mut s = ProducerStates::new();
        s.record(&h(1, 0, 0, 3, 0));
        assert_eq!(s.check(&h(1, 0, 4, 1, 0)).unwrap_err().code, ErrorCode::OUT_OF_ORDER_SEQUENCE_NUMBER);
        assert_eq!(s.check(&h(1, 0, 1, 5, 0)).unwrap_err().code, ErrorCode::OUT_OF_ORDER_SEQUENCE_NUMBER);
    }

    #[test]
    fn only_the_last_five_batches_are_remembered_and_older_retries_are_out_of_order() {
        let mut s = ProducerStates::new();
        for i in 0..7 {
            s.record(&h(1, 0, i, 1, i as i64));
        }
        assert!(matches!(s.check(&h(1, 0, 2, 1, 0)), Ok(Verdict::Duplicate(_))));
        assert_eq!(s.check(&h(1, 0, 1, 1, 0)).unwrap_err().code, ErrorCode::OUT_OF_ORDER_SEQUENCE_NUMBER);
        assert_eq!(s.check(&h(1, 0, 7, 1, 0)), Ok(Verdict::Append));
    }

    #[test]
    fn sequences_continue_across_the_wrap_at_i32_max() {
        let mut s = ProducerStates::new();
        for (i, first) in [i32::MAX - 5, i32::MAX - 3, i32::MAX - 1].into_iter().enumerate() {
            s.record(&h(1, 0, first, 2, i as i64 * 2));
        }
        // The next batch starts at 0 after MAX-1..MAX.
        assert_eq!(s.check(&h(1, 0, 0, 3, 6)), Ok(Verdict::Append));
        s.record(&h(1, 0, 0, 3, 6));
        assert_eq!(s.check(&h(1, 0, 3, 1, 9)), Ok(Verdict::Append));
        // A retry of a batch from before the wrap is still recognised.
        assert!(matches!(s.check(&h(1, 0, i32::MAX - 1, 2, 0)), Ok(Verdict::Duplicate(_))));
    }

    #[test]
    fn epochs_fence_old_producers_and_a_new_epoch_restarts_at_zero() {
        let mut s = ProducerStates::new();
        s.record(&h(1, 3, 0, 1, 0));
        assert_eq!(s.check(&h(1, 2, 1, 1, 0)).unwrap_err().code, ErrorCode::INVALID_PRODUCER_EPOCH);
        assert_eq!(s.check(&h(1, 4, 5, 1, 0)).unwrap_err().code, ErrorCode::OUT_OF_ORDER_SEQUENCE_NUMBER);
        assert_eq!(s.check(&h(1, 4, 0, 1, 0)), Ok(Verdict::Append));
        s.record(&h(1, 4, 0, 1, 1));
        // The old epoch's batches are gone: a retry of them is now fenced.
        assert_eq!(s.check(&h(1, 3, 0, 1, 0)).unwrap_err().code, ErrorCode::INVALID_PRODUCER_EPOCH);
    }

    #[test]
    fn unknown_producers_may_start_anywhere_and_sequences_wrap() {
        let mut s = ProducerStates::new();
        assert_eq!(s.check(&h(9, 0, 1234, 1, 0)), Ok(Verdict::Append));
        s.record(&h(9, 0, i32::MAX, 1, 0));
        assert_eq!(s.check(&h(9, 0, 0, 1, 0)), Ok(Verdict::Append));
        // Batches without a producer id are never checked.
        assert_eq!(s.check(&h(-1, -1, -1, 1, 0)), Ok(Verdict::Append));
    }

    #[test]
    fn expiry_and_retention_forget_producers() {
        let mut s = ProducerStates::new();
        s.record(&h(1, 0, 0, 1, 0));
        s.record(&h(2, 0, 0, 1, 50));
        s.truncate_head(10);
        assert_eq!(s.len(), 1);
        assert_eq!(s.max_producer_id(), Some(2));
        s.expire(1_000 + PRODUCER_EXPIRATION_MS - 1);
        assert_eq!(s.len(), 1);
        s.expire(1_000 + PRODUCER_EXPIRATION_MS);
        assert!(s.is_empty());
    }

    #[test]
    fn replaying_the_same_batches_rebuilds_the_same_state() {
        let batches = [h(1, 0, 0, 2, 0), h(2, 0, 0, 1, 2), h(1, 0, 2, 1, 3), h(1, 1, 0, 1, 4)];
        let mut live = ProducerStates::new();
        for b in &batches {
            assert!(live.check(b).is_ok());
            live.record(b);
        }
        let mut replayed = ProducerStates::new();
        batches.iter().for_each(|b| replayed.record(b));
        assert_eq!(live, replayed);
    }
}
