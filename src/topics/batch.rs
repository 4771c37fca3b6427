//! Kafka RecordBatch v2 ("magic 2") headers: parsing, validation of what a
//! producer sends, and the two in-place rewrites a leader makes.
//!
//! A partition log stores each batch exactly as the producer sent it
//! (compressed batches untouched), after overwriting `baseOffset` and
//! `partitionLeaderEpoch`. Those two fields sit before the CRC-covered range
//! (`attributes` to the end), so the rewrite never invalidates the CRC and no
//! batch is ever recompressed (a compressed batch is decompressed once, to
//! check its records: `record_check`). Everything else the data plane needs —
//! offsets, timestamps, producer id/epoch/sequence — is in the fixed 61-byte
//! header.
//!
//! Every read here is bounds-checked: the bytes come from the network (or from
//! disk, which we treat no better), and a batch that lies about its lengths
//! must get an error, never a panic or an allocation sized by the lie.
//!
//! ```text
//!  0 baseOffset i64 | 8 batchLength i32 | 12 partitionLeaderEpoch i32 | 16 magic i8
//! 17 crc u32 | 21 attributes i16 | 23 lastOffsetDelta i32 | 27 baseTimestamp i64
//! 35 maxTimestamp i64 | 43 producerId i64 | 51 producerEpoch i16 | 53 baseSequence i32
//! 57 recordCount i32 | 61 records...
//! ```

use super::record_check::check_records;
use crate::error_code::ErrorCode;

/// `baseOffset` + `batchLength`: the part of a batch outside `batchLength`.
pub const LOG_OVERHEAD: usize = 12;
/// The fixed header of a v2 batch.
pub const HEADER_BYTES: usize = 61;
/// Kafka's smallest legal `batchLength`/message size field (a v0 message).
const MIN_SIZE_FIELD: i32 = 14;
/// Bytes needed to read the magic byte.
const UP_TO_MAGIC: usize = 17;
const MAGIC_OFFSET: usize = 16;
const LEADER_EPOCH_OFFSET: usize = 12;
const CRC_OFFSET: usize = 17;
const ATTRIBUTES_OFFSET: usize = 21;

const COMPRESSION_MASK: i16 = 0x07;
const TIMESTAMP_TYPE_BIT: i16 = 0x08;
const TRANSACTIONAL_BIT: i16 = 0x10;
const CONTROL_BIT: i16 = 0x20;

/// Compression codec ids in `attributes` (0 none .. 4 zstd).
pub const CODEC_NONE: u8 = 0;
pub const CODEC_ZSTD: u8 = 4;

/// Sentinel values Kafka uses in batch headers.
pub const NO_PRODUCER_ID: i64 = -1;
pub const NO_SEQUENCE: i32 = -1;

/// The fixed header of a RecordBatch v2.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchHeader {
    pub base_offset: i64,
    pub batch_length: i32,
    pub leader_epoch: i32,
    pub magic: i8,
    pub crc: u32,
    pub attributes: i16,
    pub last_offset_delta: i32,
    pub base_timestamp: i64,
    pub max_timestamp: i64,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub base_sequence: i32,
    pub record_count: i32,
}

/// Why bytes are not a usable batch, with the Kafka error a producer gets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BatchError {
    pub code: ErrorCode,
    pub message: String,
}

impl BatchError {
    fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        BatchError { code, message: message.into() }
    }

    pub(super) fn invalid(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::INVALID_RECORD, message)
    }

    pub(super) fn corrupt(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::CORRUPT_MESSAGE, message)
    }
}

fn be_i16(b: &[u8], at: usize) -> Option<i16> {
    Some(i16::from_be_bytes(b.get(at..at + 2)?.try_into().ok()?))
}

fn be_i32(b: &[u8], at: usize) -> Option<i32> {
    Some(i32::from_be_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

fn be_i64(b: &[u8], at: usize) -> Option<i64> {
    Some(i64::from_be_bytes(b.get(at..at + 8)?.try_into().ok()?))
}

impl BatchHeader {
    /// Reads the 61-byte header; `None` if `bytes` is shorter.
    pub fn read(bytes: &[u8]) -> Option<BatchHeader> {
        Some(BatchHeader {
            base_offset: be_i64(bytes, 0)?,
            batch_length: be_i32(bytes, 8)?,
            leader_epoch: be_i32(bytes, LEADER_EPOCH_OFFSET)?,
            magic: *bytes.get(MAGIC_OFFSET)? as i8,
            crc: be_i32(bytes, CRC_OFFSET)? as u32,
            attributes: be_i16(bytes, ATTRIBUTES_OFFSET)?,
            last_offset_delta: be_i32(bytes, 23)?,
            base_timestamp: be_i64(bytes, 27)?,
            max_timestamp: be_i64(bytes, 35)?,
            producer_id: be_i64(bytes, 43)?,
            producer_epoch: be_i16(bytes, 51)?,
            base_sequence: be_i32(bytes, 53)?,
            record_count: be_i32(bytes, 57)?,
        })
    }

    /// Bytes of the whole batch (`batchLength` + 12).
    pub fn size(&self) -> usize {
        (self.batch_length.max(0) as usize).saturating_add(LOG_OVERHEAD)
    }

    pub fn last_offset(&self) -> i64 {
        self.base_offset.saturating_add(self.last_offset_delta as i64)
    }

    pub fn codec(&self) -> u8 {
        (self.attributes & COMPRESSION_MASK) as u8
    }

    pub fn is_log_append_time(&self) -> bool {
        self.attributes & TIMESTAMP_TYPE_BIT != 0
    }

    pub fn is_transactional(&self) -> bool {
        self.attributes & TRANSACTIONAL_BIT != 0
    }

    pub fn is_control(&self) -> bool {
        self.attributes & CONTROL_BIT != 0
    }

    pub fn has_producer_id(&self) -> bool {
        self.producer_id > NO_PRODUCER_ID
    }

    /// The sequence of the last record, wrapping past `i32::MAX` to 0 as
    /// Kafka's `DefaultRecordBatch.incrementSequence` does.
    pub fn last_sequence(&self) -> i32 {
        increment_sequence(self.base_sequence, self.last_offset_delta)
    }
}

/// Kafka's `DefaultRecordBatch.incrementSequence`.
pub fn increment_sequence(sequence: i32, increment: i32) -> i32 {
    if sequence == NO_SEQUENCE {
        return NO_SEQUENCE;
    }
    // In i64 so that hostile (negative) increments cannot overflow.
    let sum = sequence as i64 + increment as i64;
    if sum > i32::MAX as i64 {
        return (sum - i32::MAX as i64 - 1) as i32;
    }
    sum.max(i32::MIN as i64) as i32
}

/// Size of the next complete batch at the start of `bytes`, the way Kafka's
/// `ByteBufferLogInputStream` finds it: `Ok(None)` when the bytes hold no
/// complete batch (too short, or cut off), an error when the size field is
/// impossible.
fn next_batch_size(bytes: &[u8]) -> Result<Option<usize>, BatchError> {
    let Some(size_field) = be_i32(bytes, 8) else {
        return Ok(None);
    };
    if size_field < MIN_SIZE_FIELD {
        return Err(BatchError::corrupt(format!(
            "Record size {size_field} is less than the minimum record overhead ({MIN_SIZE_FIELD})"
        )));
    }
    if bytes.len() < UP_TO_MAGIC {
        return Ok(None);
    }
    let size = size_field as usize + LOG_OVERHEAD;
    if bytes.len() < size {
        return Ok(None);
    }
    Ok(Some(size))
}

/// A batch a producer sent, validated and ready to be stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProducedBatch {
    pub header: BatchHeader,
    /// The batch bytes (trailing bytes that are not a complete batch are
    /// dropped, as Kafka trims them).
    pub bytes: Vec<u8>,
    /// Bytes decompressed to check its records (0 when uncompressed).
    pub decompressed: usize,
}

/// Validates the `records` of one partition of a Produce request (v3+), in
/// Kafka's order: `ProduceRequest.validateRecords` (exactly one batch, magic
/// 2, no zstd below v7), then the log's checks (base offset 0, CRC-32C,
/// offset range and count, no control batches from clients, a sequence for
/// idempotent batches), and finally every record (`record_check`: a
/// compressed batch is decompressed, at most `decompress_budget` bytes of
/// it). Transactional batches are refused because kcoord has no transaction
/// coordinator (see `docs/protocol-support.md`).
pub fn validate_produced(
    records: Option<&[u8]>,
    produce_version: i16,
    decompress_budget: usize,
) -> Result<ProducedBatch, BatchError> {
    let records = records.unwrap_or_default();
    let no_batch = || {
        BatchError::invalid(format!(
            "Produce requests with version {produce_version} must have at least one record batch per partition"
        ))
    };
    let size = next_batch_size(records)?.ok_or_else(no_batch)?;
    let batch = records.get(..size).ok_or_else(no_batch)?;
    let magic = batch.get(MAGIC_OFFSET).copied().unwrap_or(0) as i8;
    if magic != 2 {
        return Err(BatchError::invalid(format!(
            "Produce requests with version {produce_version} are only allowed to contain record batches with magic version 2"
        )));
    }
    if size < HEADER_BYTES {
        return Err(BatchError::corrupt(format!(
            "Record batch size {size} is smaller than the minimum batch overhead ({HEADER_BYTES})"
        )));
    }
    let header = BatchHeader::read(batch).ok_or_else(no_batch)?;
    if next_batch_size(records.get(size..).unwrap_or_default())?.is_some() {
        return Err(BatchError::invalid(format!(
            "Produce requests with version {produce_version} are only allowed to contain exactly one record batch per partition"
        )));
    }
    if header.codec() == CODEC_ZSTD && produce_version < 7 {
        return Err(BatchError::new(
            ErrorCode::UNSUPPORTED_COMPRESSION_TYPE,
            format!("Produce requests with version {produce_version} are not allowed to use ZStandard compression"),
        ));
    }
    if header.base_offset != 0 {
        return Err(BatchError::invalid(format!(
            "The baseOffset of the record batch should be 0, but it is {}",
            header.base_offset
        )));
    }
    let crc = crc32c::crc32c(batch.get(ATTRIBUTES_OFFSET..).unwrap_or_default());
    if crc != header.crc {
        return Err(BatchError::corrupt(format!(
            "Record batch is corrupt (stored crc = {}, computed crc = {crc})",
            header.crc
        )));
    }
    if header.codec() > CODEC_ZSTD {
        return Err(BatchError::corrupt(format!("Unknown compression type id: {}", header.codec())));
    }
    check_offsets_and_count(&header)?;
    if header.is_control() {
        return Err(BatchError::invalid("Clients are not allowed to write control records"));
    }
    if header.has_producer_id() && header.base_sequence < 0 {
        return Err(BatchError::invalid(format!(
            "Invalid sequence number {} in record batch with producerId {}",
            header.base_sequence, header.producer_id
        )));
    }
    if header.is_transactional() {
        return Err(BatchError::new(
            ErrorCode::INVALID_TXN_STATE,
            "kcoord does not support transactions: transactional batches are rejected",
        ));
    }
    // Last, as Kafka's LogValidator walks the records after the header
    // checks: the count must be real, or offsets would jump by whatever a
    // batch claims, and a compressed batch must decompress.
    let decompressed = check_records(batch, &header, decompress_budget)?;
    Ok(ProducedBatch { header, bytes: batch.to_vec(), decompressed })
}

/// Kafka's `LogValidator.validateBatch` for v2: a positive offset range
/// that matches the record count.
fn check_offsets_and_count(h: &BatchHeader) -> Result<(), BatchError> {
    let count_from_offsets = h.last_offset_delta as i64 + 1;
    if count_from_offsets <= 0 {
        return Err(BatchError::invalid(format!(
            "Batch has an invalid offset range: [{}, {}]",
            h.base_offset,
            h.last_offset()
        )));
    }
    if h.record_count <= 0 {
        return Err(BatchError::invalid(format!("Invalid reported count for record batch: {}", h.record_count)));
    }
    if count_from_offsets != h.record_count as i64 {
        return Err(BatchError::invalid(format!(
            "Inconsistent batch offset range [{}, {}] and count of records {}",
            h.base_offset,
            h.last_offset(),
            h.record_count
        )));
    }
    Ok(())
}

/// Sets the two leader-owned fields outside the CRC. `batch` must hold at
/// least a header (checked; a short buffer is left untouched).
pub fn assign(batch: &mut [u8], base_offset: i64, leader_epoch: i32) {
    if let Some(b) = batch.get_mut(0..8) {
        b.copy_from_slice(&base_offset.to_be_bytes());
    }
    if let Some(b) = batch.get_mut(LEADER_EPOCH_OFFSET..LEADER_EPOCH_OFFSET + 4) {
        b.copy_from_slice(&leader_epoch.to_be_bytes());
    }
}

/// Reads back a batch stored in a partition log from `payload`, the record
/// or at least its first [`HEADER_BYTES`] (start-up reads only headers of
/// closed segments), the record being `stored_len` bytes long: the header
/// must parse, be magic 2, and say exactly as many bytes as the record
/// holds. (The storage frame's CRC, or the fsync when a segment was closed,
/// vouches for the bytes; this catches a log that is not ours, or frame
/// lengths that do not add up.)
pub fn read_stored(payload: &[u8], stored_len: usize) -> Result<BatchHeader, String> {
    let h = BatchHeader::read(payload).ok_or_else(|| format!("stored batch of {stored_len} bytes is too short"))?;
    if h.magic != 2 {
        return Err(format!("stored batch has magic {}", h.magic));
    }
    if h.size() != stored_len {
        return Err(format!("stored batch says {} bytes but holds {stored_len}", h.size()));
    }
    if h.last_offset_delta < 0 {
        return Err(format!("stored batch has a negative last offset delta {}", h.last_offset_delta));
    }
    Ok(h)
}

/// A zigzag varint (Kafka's record fields); at most 10 bytes.
fn read_varlong(b: &[u8], pos: &mut usize) -> Option<i64> {
    let mut raw: u64 = 0;
    for i in 0..10 {
        let byte = *b.get(*pos)?;
        *pos += 1;
        raw |= ((byte & 0x7f) as u64) << (7 * i);
        if byte & 0x80 == 0 {
            return Some(((raw >> 1) as i64) ^ -((raw & 1) as i64));
        }
    }
    None
}

/// `(offset, timestamp)` of each record of an uncompressed batch, in order;
/// `None` for compressed batches (their records are opaque to us) or when a
/// record is malformed. Bounded by the batch bytes and its record count.
pub fn record_times(batch: &[u8], h: &BatchHeader) -> Option<Vec<(i64, i64)>> {
    if h.codec() != CODEC_NONE {
        return None;
    }
    let count = usize::try_from(h.record_count).ok()?;
    // Each record takes at least 7 bytes, so the count is bounded by the data.
    let mut out = Vec::with_capacity(count.min(batch.len() / 7 + 1));
    let mut pos = HEADER_BYTES;
    for _ in 0..count {
        let len = usize::try_from(read_varlong(batch, &mut pos)?).ok()?;
        let end = pos.checked_add(len)?;
        let record = batch.get(pos..end)?;
        let mut p = 1; // attributes
        let ts_delta = read_varlong(record, &mut p)?;
        let offset_delta = read_varlong(record, &mut p)?;
        let ts = if h.is_log_append_time() { h.max_timestamp } else { h.base_timestamp.checked_add(ts_delta)? };
        out.push((h.base_offset.checked_add(offset_delta)?, ts));
        pos = end;
    }
    Some(out)
}

#[cfg(test)]
pub(crate) mod test_batches {
    //! A small builder of uncompressed v2 batches for unit tests.

    /// Encodes a zigzag varint.
    pub fn varlong(out: &mut Vec<u8>, v: i64) {
        let mut z = ((v << 1) ^ (v >> 63)) as u64;
        loop {
            let byte = (z & 0x7f) as u8;
            z >>= 7;
            if z == 0 {
                out.push(byte);
                return;
            }
            out.push(byte | 0x80);
        }
    }

    /// A batch of `values` with timestamps `base_ts + i * 10`, CRC set.
    pub fn batch(values: &[&[u8]], base_ts: i64, producer: Option<(i64, i16, i32)>) -> Vec<u8> {
        batch_with_attrs(values, base_ts, producer, 0)
    }

    pub fn batch_with_attrs(
        values: &[&[u8]],
        base_ts: i64,
        producer: Option<(i64, i16, i32)>,
        attributes: i16,
    ) -> Vec<u8> {
        wrap(&records(values), values.len() as i32, base_ts, producer, attributes)
    }

    /// The records of a batch of `values`, uncompressed.
    pub fn records(values: &[&[u8]]) -> Vec<u8> {
        let mut records = Vec::new();
        for (i, v) in values.iter().enumerate() {
            let mut r = vec![0u8];
            varlong(&mut r, i as i64 * 10);
            varlong(&mut r, i as i64);
            varlong(&mut r, -1); // null key
            varlong(&mut r, v.len() as i64);
            r.extend_from_slice(v);
            varlong(&mut r, 0); // headers
            varlong(&mut records, r.len() as i64);
            records.extend_from_slice(&r);
        }
        records
    }

    /// A batch header for `n` records (offset deltas 0..n) around
    /// `records`, the CRC set.
    pub fn wrap(records: &[u8], n: i32, base_ts: i64, producer: Option<(i64, i16, i32)>, attributes: i16) -> Vec<u8> {
        let (pid, epoch, seq) = producer.unwrap_or((-1, -1, -1));
        let mut b = Vec::new();
        b.extend_from_slice(&0i64.to_be_bytes());
        b.extend_from_slice(&((49 + records.len()) as i32).to_be_bytes());
        b.extend_from_slice(&(-1i32).to_be_bytes());
        b.push(2);
        b.extend_from_slice(&0u32.to_be_bytes());
        b.extend_from_slice(&attributes.to_be_bytes());
        b.extend_from_slice(&(n.wrapping_sub(1)).to_be_bytes());
        b.extend_from_slice(&base_ts.to_be_bytes());
        b.extend_from_slice(&(base_ts + (n as i64 - 1) * 10).to_be_bytes());
        b.extend_from_slice(&pid.to_be_bytes());
        b.extend_from_slice(&epoch.to_be_bytes());
        b.extend_from_slice(&seq.to_be_bytes());
        b.extend_from_slice(&n.to_be_bytes());
        b.extend_from_slice(records);
        let crc = crc32c::crc32c(&b[21..]);
        b[17..21].copy_from_slice(&crc.to_be_bytes());
        b
    }

    /// `data` compressed with codec 1 (gzip), 2 (snappy: one raw block, as
    /// librdkafka writes it), 3 (lz4 frame) or 4 (zstd).
    pub fn compress(codec: u8, data: &[u8]) -> Vec<u8> {
        use std::io::Write;
        match codec {
            1 => {
                let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
                e.write_all(data).unwrap();
                e.finish().unwrap()
            }
            2 => snap::raw::Encoder::new().compress_vec(data).unwrap(),
            3 => {
                let mut e = lz4_flex::frame::FrameEncoder::new(Vec::new());
                e.write_all(data).unwrap();
                e.finish().unwrap()
            }
            4 => zstd::encode_all(data, 3).unwrap(),
            _ => data.to_vec(),
        }
    }

    /// Snappy as the Java client writes it (xerial snappy-java framing),
    /// in chunks of `chunk` bytes.
    pub fn xerial_snappy(data: &[u8], chunk: usize) -> Vec<u8> {
        let mut out = vec![0x82, b'S', b'N', b'A', b'P', b'P', b'Y', 0, 0, 0, 0, 1, 0, 0, 0, 1];
        for c in data.chunks(chunk) {
            let block = snap::raw::Encoder::new().compress_vec(c).unwrap();
            out.extend_from_slice(&(block.len() as i32).to_be_bytes());
            out.extend_from_slice(&block);
        }
        out
    }

    /// A batch of `values` compressed with `codec`.
    pub fn compressed(codec: u8, values: &[&[u8]]) -> Vec<u8> {
        wrap(&compress(codec, &records(values)), values.len() as i32, 1_000, None, codec as i16)
    }

    /// The hostile batch docs/operations.md describes: a gzip flag, 89 random
    /// bytes, a valid CRC and a record count of 2^31 - 1 (150 bytes).
    pub fn gzip_garbage() -> Vec<u8> {
        let mut x: u32 = 0x9e37_79b9;
        let payload: Vec<u8> = (0..89)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 17;
                x ^= x << 5;
                x as u8
            })
            .collect();
        wrap(&payload, i32::MAX, 1_000, None, 1)
    }
}

#[cfg(test)]
mod tests {
    use super::test_batches::*;
    use super::*;

    #[test]
    fn a_valid_batch_parses_and_keeps_its_crc_after_assignment() {
        let mut b = batch(&[b"a", b"bc", b"def"], 1000, Some((7, 0, 5)));
        let p = validate_produced(Some(&b), 9, 1 << 20).unwrap();
        assert_eq!(p.header.record_count, 3);
        assert_eq!(p.header.last_offset_delta, 2);
        assert_eq!(p.header.last_sequence(), 7);
        assert_eq!(p.header.max_timestamp, 1020);
        assign(&mut b, 42, 0);
        let h = BatchHeader::read(&b).unwrap();
        assert_eq!((h.base_offset, h.leader_epoch, h.last_offset()), (42, 0, 44));
        assert_eq!(crc32c::crc32c(&b[21..]), h.crc, "the rewrite is outside the CRC");
        assert_eq!(read_stored(&b, b.len()).unwrap(), h);
        assert_eq!(read_stored(&b[..HEADER_BYTES], b.len()).unwrap(), h, "the header alone is enough");
    }

    #[test]
    fn crc_mismatch_is_corrupt_message() {
        let mut b = batch(&[b"x"], 0, None);
        let last = b.len() - 1;
        b[last] ^= 1;
        assert_eq!(validate_produced(Some(&b), 3, 1 << 20).unwrap_err().code, ErrorCode::CORRUPT_MESSAGE);
    }

    #[test]
    fn old_magic_and_missing_or_extra_batches_are_invalid_records() {
        let mut b = batch(&[b"x"], 0, None);
        b[16] = 1;
        assert_eq!(validate_produced(Some(&b), 3, 1 << 20).unwrap_err().code, ErrorCode::INVALID_RECORD);
        assert_eq!(validate_produced(None, 3, 1 << 20).unwrap_err().code, ErrorCode::INVALID_RECORD);
        assert_eq!(validate_produced(Some(&[]), 3, 1 << 20).unwrap_err().code, ErrorCode::INVALID_RECORD);
        let one = batch(&[b"x"], 0, None);
        let two = [one.clone(), one.clone()].concat();
        assert_eq!(validate_produced(Some(&two), 3, 1 << 20).unwrap_err().code, ErrorCode::INVALID_RECORD);
        // Trailing bytes that are not a complete batch are trimmed, as Kafka does.
        let trailing = [one.clone(), vec![0, 0, 0]].concat();
        assert_eq!(validate_produced(Some(&trailing), 3, 1 << 20).unwrap().bytes, one);
    }

    #[test]
    fn header_rules_match_kafkas_log_validator() {
        // (byte offset, bytes written there, expected error)
        let cases: Vec<(usize, Vec<u8>, ErrorCode)> = vec![
            (0, 5i64.to_be_bytes().to_vec(), ErrorCode::INVALID_RECORD),
            (57, 9i32.to_be_bytes().to_vec(), ErrorCode::INVALID_RECORD),
            (23, (-1i32).to_be_bytes().to_vec(), ErrorCode::INVALID_RECORD),
            (21, 0x20i16.to_be_bytes().to_vec(), ErrorCode::INVALID_RECORD),
            (21, 0x10i16.to_be_bytes().to_vec(), ErrorCode::INVALID_TXN_STATE),
            (21, 4i16.to_be_bytes().to_vec(), ErrorCode::UNSUPPORTED_COMPRESSION_TYPE),
            (21, 6i16.to_be_bytes().to_vec(), ErrorCode::CORRUPT_MESSAGE),
            (43, 3i64.to_be_bytes().to_vec(), ErrorCode::INVALID_RECORD),
        ];
        for (i, (at, bytes, want)) in cases.iter().enumerate() {
            let mut b = batch(&[b"x"], 0, None);
            b[*at..*at + bytes.len()].copy_from_slice(bytes);
            let crc = crc32c::crc32c(&b[21..]);
            b[17..21].copy_from_slice(&crc.to_be_bytes());
            assert_eq!(validate_produced(Some(&b), 6, 1 << 20).unwrap_err().code, *want, "case {i}");
        }
        // An uncompressed batch claiming more records than it holds.
        let mut b = batch(&[b"x"], 0, None);
        b[23..27].copy_from_slice(&1i32.to_be_bytes());
        b[57..61].copy_from_slice(&2i32.to_be_bytes());
        let crc = crc32c::crc32c(&b[21..]);
        b[17..21].copy_from_slice(&crc.to_be_bytes());
        assert_eq!(validate_produced(Some(&b), 9, 1 << 20).unwrap_err().code, ErrorCode::INVALID_RECORD);
        // zstd is fine from v7.
        let b = compressed(4, &[b"x"]);
        assert!(validate_produced(Some(&b), 7, 1 << 20).is_ok());
    }

    #[test]
    fn truncated_and_hostile_batches_never_panic() {
        let good = batch(&[b"hello", b"world"], 5, Some((1, 0, 0)));
        for n in 0..good.len() {
            let r = validate_produced(Some(&good[..n]), 9, 1 << 20);
            assert!(r.is_err(), "prefix of {n} bytes");
            let _ = read_stored(&good[..n], n);
            if let Some(h) = BatchHeader::read(&good[..n]) {
                let _ = record_times(&good[..n], &h);
            }
        }
        // Every length-like field set to extremes.
        for at in 0..good.len().saturating_sub(4) {
            for v in [i32::MAX, i32::MIN, -1, 0x7fff_fff0] {
                let mut b = good.clone();
                b[at..at + 4].copy_from_slice(&v.to_be_bytes());
                let _ = validate_produced(Some(&b), 9, 1 << 20);
                if let Some(h) = BatchHeader::read(&b) {
                    let _ = record_times(&b, &h);
                    let _ = h.last_sequence();
                    let _ = h.size();
                }
            }
        }
        // A size field of i32::MAX on a small buffer is "no complete batch".
        let mut b = good.clone();
        b[8..12].copy_from_slice(&i32::MAX.to_be_bytes());
        assert_eq!(validate_produced(Some(&b), 9, 1 << 20).unwrap_err().code, ErrorCode::INVALID_RECORD);
        b[8..12].copy_from_slice(&3i32.to_be_bytes());
        assert_eq!(validate_produced(Some(&b), 9, 1 << 20).unwrap_err().code, ErrorCode::CORRUPT_MESSAGE);
    }

    #[test]
    fn record_times_walk_uncompressed_records() {
        let b = batch(&[b"a", b"b", b"c"], 100, None);
        let h = BatchHeader::read(&b).unwrap();
        assert_eq!(record_times(&b, &h).unwrap(), vec![(0, 100), (1, 110), (2, 120)]);
        let mut lat = batch_with_attrs(&[b"a", b"b"], 100, None, 0x08);
        assign(&mut lat, 10, 0);
        let h = BatchHeader::read(&lat).unwrap();
        assert_eq!(
            record_times(&lat, &h).unwrap(),
            vec![(10, 110), (11, 110)],
            "LogAppendTime: every record has the max"
        );
        let gz = batch_with_attrs(&[b"a"], 100, None, 1);
        assert_eq!(record_times(&gz, &BatchHeader::read(&gz).unwrap()), None);
    }

    #[test]
    fn sequences_wrap_like_kafka() {
        assert_eq!(increment_sequence(i32::MAX, 1), 0);
        assert_eq!(increment_sequence(i32::MAX - 1, 3), 1);
        assert_eq!(increment_sequence(5, 0), 5);
        assert_eq!(increment_sequence(NO_SEQUENCE, 4), NO_SEQUENCE);
    }
}
