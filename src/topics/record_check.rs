//! Reading every record of a produced batch before it is stored, as Kafka's
//! `LogValidator` does: a batch whose header adds up but whose records do
//! not (garbage after a compression flag, a record count the data cannot
//! hold) would otherwise move the log end by whatever it claims and leave
//! consumers stuck on a batch they cannot decode.
//!
//! Compressed batches are decompressed as a stream (gzip, snappy, lz4,
//! zstd, the codecs Kafka supports) and their records walked as they come
//! out, so memory stays at the codecs' buffers (a zstd window of at most
//! [`ZSTD_WINDOW_LOG_MAX`], lz4 blocks of at most 4 MiB, a snappy chunk)
//! whatever the batch says. The decompressed bytes are counted against a
//! budget (the caller's: what is left of `server.max_request_bytes` for the
//! request, i.e. no more than the request could have carried uncompressed),
//! which bounds the work a small compressed batch can cause.
//!
//! The stored batch is still the producer's bytes: kcoord never recompresses.
//! Where Kafka would rewrite a compressed batch because its records' offset
//! deltas are not `0, 1, 2, …` (no client sends that), kcoord refuses it.

use std::io::{self, BufRead, BufReader, Read};

use super::batch::{BatchError, BatchHeader, HEADER_BYTES};

/// The smallest encoded record: length, attributes, timestamp delta, offset
/// delta, key length, value length and header count, one byte each.
pub const MIN_RECORD_BYTES: usize = 7;

/// The largest zstd window accepted (16 MiB): what a decoder may allocate.
/// Kafka's producers use level 3 (a window of at most 8 MiB); only the
/// "ultra" levels 20–22 on large batches go beyond.
pub const ZSTD_WINDOW_LOG_MAX: u32 = 24;

/// The read buffer between a decompressor and the record walk.
const STREAM_BUFFER: usize = 64 * 1024;

/// Snappy expands at most 64 bytes per 3-byte copy element: a chunk
/// claiming more than this many times its size is corrupt, and is refused
/// before anything is allocated for it.
const SNAPPY_MAX_RATIO: usize = 22;

/// xerial snappy-java's stream header (what the Java producer writes).
const XERIAL_MAGIC: [u8; 8] = [0x82, b'S', b'N', b'A', b'P', b'P', b'Y', 0];
const XERIAL_HEADER_BYTES: usize = 16;

const CODEC_GZIP: u8 = 1;
const CODEC_SNAPPY: u8 = 2;
const CODEC_LZ4: u8 = 3;
const CODEC_ZSTD: u8 = 4;

/// Checks the records of `batch` (whose header `h` is already validated:
/// the count is positive and matches the offset range). Returns the number
/// of decompressed bytes read (0 for an uncompressed batch), which must not
/// exceed `budget`.
pub fn check_records(batch: &[u8], h: &BatchHeader, budget: usize) -> Result<usize, BatchError> {
    let data = batch.get(HEADER_BYTES..).unwrap_or_default();
    let count = usize::try_from(h.record_count).unwrap_or(0);
    let codec = h.codec();
    // The count must fit the bytes before anything is read: uncompressed in
    // the batch, compressed in what may be decompressed.
    let room = if codec == 0 { data.len() } else { budget };
    if count > room / MIN_RECORD_BYTES {
        return Err(BatchError::invalid(format!(
            "Record count {count} is impossible for a batch of {} bytes{}",
            batch.len(),
            if codec == 0 { String::new() } else { format!(" decompressing to at most {budget} bytes") }
        )));
    }
    let limit = if codec == 0 { data.len() } else { budget };
    let in_place = codec != 0;
    let walked = match codec {
        0 => walk(data, count, limit, false),
        CODEC_GZIP => walk(buffered(flate2::read::MultiGzDecoder::new(data)), count, limit, in_place),
        CODEC_SNAPPY => walk(SnappyChunks::new(data, limit), count, limit, in_place),
        CODEC_LZ4 => walk(buffered(lz4_flex::frame::FrameDecoder::new(data)), count, limit, in_place),
        CODEC_ZSTD => match zstd::stream::read::Decoder::with_buffer(data) {
            Ok(mut d) => match d.window_log_max(ZSTD_WINDOW_LOG_MAX) {
                Ok(()) => walk(buffered(d), count, limit, in_place),
                Err(e) => Err(Failure::Io(e)),
            },
            Err(e) => Err(Failure::Io(e)),
        },
        other => return Err(BatchError::corrupt(format!("Unknown compression type id: {other}"))),
    };
    walked.map_err(|f| f.into_error(codec, budget))
}

fn buffered<R: Read>(r: R) -> BufReader<R> {
    BufReader::with_capacity(STREAM_BUFFER, r)
}

/// A decompressor's refusal to go past the budget.
#[derive(Debug)]
struct OverBudget;

impl std::fmt::Display for OverBudget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("over the decompression budget")
    }
}

impl std::error::Error for OverBudget {}

/// Why the records do not check out.
#[derive(Debug)]
enum Failure {
    /// The records end before the count says.
    Eof,
    /// The decompressor failed: the compressed bytes are not valid.
    Io(io::Error),
    /// More decompressed bytes than the budget allows.
    TooLarge,
    Invalid(String),
}

impl Failure {
    fn io(e: io::Error) -> Failure {
        if e.get_ref().is_some_and(|inner| inner.is::<OverBudget>()) {
            Failure::TooLarge
        } else {
            Failure::Io(e)
        }
    }

    fn into_error(self, codec: u8, budget: usize) -> BatchError {
        match self {
            Failure::Eof => BatchError::invalid("Incorrect declared batch size, premature EOF reached"),
            Failure::Io(e) => BatchError::corrupt(format!("Failed to decompress the {} batch: {e}", codec_name(codec))),
            Failure::TooLarge => BatchError::invalid(format!(
                "The {} batch decompresses to more than {budget} bytes (what is left of server.max_request_bytes for this request)",
                codec_name(codec)
            )),
            Failure::Invalid(message) => BatchError::invalid(message),
        }
    }
}

fn codec_name(codec: u8) -> &'static str {
    match codec {
        CODEC_GZIP => "gzip",
        CODEC_SNAPPY => "snappy",
        CODEC_LZ4 => "lz4",
        CODEC_ZSTD => "zstd",
        _ => "uncompressed",
    }
}

/// A record reader over a byte stream that counts what it consumes.
struct Walker<R> {
    src: R,
    consumed: usize,
    limit: usize,
}

impl<R: BufRead> Walker<R> {
    fn advance(&mut self, n: usize) -> Result<(), Failure> {
        self.src.consume(n);
        self.consumed += n;
        if self.consumed > self.limit {
            return Err(Failure::TooLarge);
        }
        Ok(())
    }

    fn byte(&mut self) -> Result<u8, Failure> {
        let b = *self.src.fill_buf().map_err(Failure::io)?.first().ok_or(Failure::Eof)?;
        self.advance(1)?;
        Ok(b)
    }

    fn skip(&mut self, mut n: usize) -> Result<(), Failure> {
        while n > 0 {
            let available = self.src.fill_buf().map_err(Failure::io)?.len();
            if available == 0 {
                return Err(Failure::Eof);
            }
            let k = available.min(n);
            self.advance(k)?;
            n -= k;
        }
        Ok(())
    }

    fn at_end(&mut self) -> Result<bool, Failure> {
        Ok(self.src.fill_buf().map_err(Failure::io)?.is_empty())
    }

    /// A zigzag varint of at most `max_bytes` bytes (5 for Kafka's varint,
    /// 10 for its varlong).
    fn zigzag(&mut self, max_bytes: u32) -> Result<i64, Failure> {
        let mut raw: u64 = 0;
        for i in 0..max_bytes {
            let byte = self.byte()?;
            raw |= ((byte & 0x7f) as u64) << (7 * i);
            if byte & 0x80 == 0 {
                return Ok(((raw >> 1) as i64) ^ -((raw & 1) as i64));
            }
        }
        Err(Failure::Invalid("Varint is too long".into()))
    }

    fn varint(&mut self) -> Result<i64, Failure> {
        self.zigzag(5)
    }

    /// Skips a length-prefixed field (negative: null) of the record body of
    /// `size` bytes that started at `start`.
    fn field(&mut self, len: i64, start: usize, size: usize) -> Result<(), Failure> {
        let Ok(len) = usize::try_from(len) else { return Ok(()) };
        let read = (self.consumed - start).saturating_add(len);
        if read > size {
            return Err(wrong_size(size, read));
        }
        self.skip(len)
    }

    /// One record, as Kafka's `DefaultRecord.readFrom`: the fields must fill
    /// exactly the size the record declares. With `expected_delta`, its
    /// offset delta must be that.
    fn record(&mut self, expected_delta: Option<i64>) -> Result<(), Failure> {
        let size = self.varint()?;
        if size < 0 {
            return Err(Failure::Invalid(format!("Invalid record size {size}")));
        }
        let size = size as usize;
        let start = self.consumed;
        self.byte()?; // attributes
        self.zigzag(10)?; // timestamp delta
        let offset_delta = self.varint()?;
        if let Some(expected) = expected_delta {
            if offset_delta != expected {
                return Err(Failure::Invalid(format!(
                    "Record offset delta {offset_delta} where {expected} was expected: kcoord stores compressed batches as sent and cannot reassign their offsets"
                )));
            }
        }
        let key = self.varint()?;
        self.field(key, start, size)?;
        let value = self.varint()?;
        self.field(value, start, size)?;
        let headers = self.varint()?;
        if headers < 0 {
            return Err(Failure::Invalid(format!("Found invalid number of record headers {headers}")));
        }
        for _ in 0..headers {
            if self.consumed - start >= size {
                return Err(wrong_size(size, self.consumed - start + 1));
            }
            let key = self.varint()?;
            if key < 0 {
                return Err(Failure::Invalid(format!("Invalid negative header key size {key}")));
            }
            self.field(key, start, size)?;
            let value = self.varint()?;
            self.field(value, start, size)?;
        }
        if self.consumed - start != size {
            return Err(wrong_size(size, self.consumed - start));
        }
        Ok(())
    }
}

fn wrong_size(expected: usize, read: usize) -> Failure {
    Failure::Invalid(format!(
        "Invalid record size: expected to read {expected} bytes in record payload, but instead read {read}"
    ))
}

/// Reads exactly `count` records and then the end of the data, as Kafka's
/// record iterator ("records still remaining" otherwise).
fn walk<R: BufRead>(src: R, count: usize, limit: usize, in_place: bool) -> Result<usize, Failure> {
    let mut w = Walker { src, consumed: 0, limit };
    for i in 0..count {
        w.record(in_place.then_some(i as i64))?;
    }
    if !w.at_end()? {
        return Err(Failure::Invalid("Incorrect declared batch size, records still remaining in file".into()));
    }
    Ok(w.consumed)
}

/// Snappy as Kafka's producers write it: either xerial snappy-java's
/// framing (header, then chunks of `[i32 length][raw snappy block]`, from
/// the Java client) or one raw snappy block (librdkafka), decompressed a
/// chunk at a time.
struct SnappyChunks<'a> {
    rest: &'a [u8],
    framed: bool,
    out: Vec<u8>,
    pos: usize,
    /// Decompressed bytes still allowed.
    budget: usize,
}

impl<'a> SnappyChunks<'a> {
    fn new(data: &'a [u8], budget: usize) -> Self {
        let framed = data.len() >= XERIAL_HEADER_BYTES && data.starts_with(&XERIAL_MAGIC);
        let rest = if framed { data.get(XERIAL_HEADER_BYTES..).unwrap_or_default() } else { data };
        SnappyChunks { rest, framed, out: Vec::new(), pos: 0, budget }
    }

    fn next_chunk(&mut self) -> io::Result<()> {
        let bad = |m: String| io::Error::new(io::ErrorKind::InvalidData, m);
        let block = if self.framed {
            let len = crate::be_int::i32_at(self.rest, 0);
            let len = len.and_then(|l| usize::try_from(l).ok()).ok_or_else(|| bad("bad snappy chunk length".into()))?;
            let end = len.checked_add(4).ok_or_else(|| bad("bad snappy chunk length".into()))?;
            let block = self.rest.get(4..end).ok_or_else(|| bad("snappy chunk runs past the batch".into()))?;
            self.rest = self.rest.get(end..).unwrap_or_default();
            block
        } else {
            std::mem::take(&mut self.rest)
        };
        let n = snap::raw::decompress_len(block).map_err(|e| bad(e.to_string()))?;
        if n > block.len().saturating_mul(SNAPPY_MAX_RATIO).saturating_add(32) {
            return Err(bad(format!("a snappy block of {} bytes cannot decompress to {n}", block.len())));
        }
        if n > self.budget {
            return Err(io::Error::other(OverBudget));
        }
        self.out.clear();
        self.out.resize(n, 0);
        snap::raw::Decoder::new().decompress(block, &mut self.out).map_err(|e| bad(e.to_string()))?;
        self.budget -= n;
        self.pos = 0;
        Ok(())
    }
}

impl Read for SnappyChunks<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let available = self.fill_buf()?;
        let n = available.len().min(buf.len());
        for (to, from) in buf.iter_mut().zip(available) {
            *to = *from;
        }
        self.consume(n);
        Ok(n)
    }
}

impl BufRead for SnappyChunks<'_> {
    fn fill_buf(&mut self) -> io::Result<&[u8]> {
        while self.pos >= self.out.len() && !self.rest.is_empty() {
            self.next_chunk()?;
        }
        Ok(self.out.get(self.pos..).unwrap_or_default())
    }

    fn consume(&mut self, amount: usize) {
        self.pos = self.pos.saturating_add(amount).min(self.out.len());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error_code::ErrorCode;
    use crate::topics::batch::test_batches::*;
    use crate::topics::batch::validate_produced;

    const BUDGET: usize = 1 << 20;
    const CODECS: [u8; 4] = [CODEC_GZIP, CODEC_SNAPPY, CODEC_LZ4, CODEC_ZSTD];

    fn code(b: &[u8], budget: usize) -> ErrorCode {
        match validate_produced(Some(b), 9, budget) {
            Ok(_) => ErrorCode::NONE,
            Err(e) => e.code,
        }
    }

    /// One record with an explicit offset delta and headers.
    fn record(offset_delta: i64, value: &[u8], headers: &[(&[u8], &[u8])]) -> Vec<u8> {
        let mut r = vec![0u8];
        varlong(&mut r, 0);
        varlong(&mut r, offset_delta);
        varlong(&mut r, -1);
        varlong(&mut r, value.len() as i64);
        r.extend_from_slice(value);
        varlong(&mut r, headers.len() as i64);
        for (k, v) in headers {
            varlong(&mut r, k.len() as i64);
            r.extend_from_slice(k);
            varlong(&mut r, v.len() as i64);
            r.extend_from_slice(v);
        }
        let mut out = Vec::new();
        varlong(&mut out, r.len() as i64);
        out.extend_from_slice(&r);
        out
    }

    #[test]
    fn valid_batches_of_every_codec_are_accepted_and_report_what_they_decompressed() {
        let values: Vec<Vec<u8>> = (0..50).map(|i| format!("value {i} {}", "x".repeat(i)).into_bytes()).collect();
        let values: Vec<&[u8]> = values.iter().map(|v| v.as_slice()).collect();
        let plain = records(&values);
        for codec in CODECS {
            let b = compressed(codec, &values);
            let p = validate_produced(Some(&b), 9, BUDGET).unwrap_or_else(|e| panic!("codec {codec}: {e:?}"));
            assert_eq!(p.decompressed, plain.len(), "codec {codec}");
            assert_eq!(p.bytes, b, "stored as sent");
        }
        // The Java client's snappy framing, in many small chunks.
        let b = wrap(&xerial_snappy(&plain, 100), 50, 1_000, None, CODEC_SNAPPY as i16);
        assert_eq!(validate_produced(Some(&b), 9, BUDGET).unwrap().decompressed, plain.len());
        // Records with headers and keys.
        let recs = [record(0, b"a", &[(b"h", b"1"), (b"", b"")]), record(1, b"", &[])].concat();
        for codec in CODECS {
            assert_eq!(code(&wrap(&compress(codec, &recs), 2, 0, None, codec as i16), BUDGET), ErrorCode::NONE);
        }
        assert_eq!(code(&wrap(&recs, 2, 0, None, 0), BUDGET), ErrorCode::NONE);
    }

    #[test]
    fn a_compressed_batch_of_garbage_with_a_huge_count_is_refused() {
        // Issue 11: refused on its count before anything is decompressed.
        let b = gzip_garbage();
        assert_eq!(b.len(), 150);
        let e = validate_produced(Some(&b), 3, BUDGET).unwrap_err();
        assert_eq!(e.code, ErrorCode::INVALID_RECORD, "{e:?}");
        assert!(e.message.contains("2147483647"), "{}", e.message);
        // The same garbage with a plausible count fails to decompress, with
        // every codec.
        let payload = &b[HEADER_BYTES..];
        for codec in CODECS {
            let e = validate_produced(Some(&wrap(payload, 2, 0, None, codec as i16)), 9, BUDGET).unwrap_err();
            assert!(matches!(e.code, ErrorCode::CORRUPT_MESSAGE | ErrorCode::INVALID_RECORD), "codec {codec}: {e:?}");
        }
        let e = validate_produced(Some(&wrap(payload, 2, 0, None, CODEC_GZIP as i16)), 9, BUDGET).unwrap_err();
        assert_eq!(e.code, ErrorCode::CORRUPT_MESSAGE, "{e:?}");
    }

    #[test]
    fn a_record_count_the_records_do_not_match_is_invalid() {
        let values: [&[u8]; 2] = [b"some value", b"another value"];
        for codec in [0, CODEC_GZIP, CODEC_SNAPPY, CODEC_LZ4, CODEC_ZSTD] {
            let data = compress(codec, &records(&values));
            for (n, what) in [(3, "premature EOF"), (1, "still remaining")] {
                let e = validate_produced(Some(&wrap(&data, n, 0, None, codec as i16)), 9, BUDGET).unwrap_err();
                assert_eq!(e.code, ErrorCode::INVALID_RECORD, "codec {codec} count {n}");
                assert!(e.message.contains(what), "codec {codec} count {n}: {}", e.message);
            }
        }
        // An uncompressed count beyond what its bytes can hold is refused
        // from the header alone.
        let e = validate_produced(Some(&wrap(&records(&values), 1000, 0, None, 0)), 9, BUDGET).unwrap_err();
        assert!(e.message.contains("impossible"), "{}", e.message);
    }

    #[test]
    fn malformed_records_are_invalid_compressed_or_not() {
        let mut wrong_size = record(0, b"abc", &[]);
        wrong_size[0] += 2; // declares 1 more byte (zigzag) than the fields fill
        let mut negative_headers = record(0, b"", &[]);
        let last = negative_headers.len() - 1;
        negative_headers[last] = 1; // zigzag -1
        let mut negative_header_key = record(0, b"", &[(b"k", b"v")]);
        let at = negative_header_key.len() - 5; // the header key length
        negative_header_key[at] = 3; // zigzag -2
        for (name, recs) in [
            ("size", wrong_size),
            ("header count", negative_headers),
            ("header key", negative_header_key),
            ("size -1", vec![1]),
        ] {
            for codec in [0, CODEC_GZIP, CODEC_ZSTD] {
                let b = wrap(&compress(codec, &recs), 1, 0, None, codec as i16);
                assert_eq!(code(&b, BUDGET), ErrorCode::INVALID_RECORD, "{name}, codec {codec}");
            }
        }
    }

    #[test]
    fn compressed_records_must_carry_offset_deltas_from_zero() {
        let recs = [record(0, b"a", &[]), record(5, b"b", &[])].concat();
        for codec in CODECS {
            let e = validate_produced(Some(&wrap(&compress(codec, &recs), 2, 0, None, codec as i16)), 9, BUDGET);
            assert_eq!(e.unwrap_err().code, ErrorCode::INVALID_RECORD, "codec {codec}");
        }
        // Uncompressed batches get their offsets from the header, as in Kafka.
        assert_eq!(code(&wrap(&recs, 2, 0, None, 0), BUDGET), ErrorCode::NONE);
    }

    #[test]
    fn decompression_stops_at_the_budget() {
        // 4 MiB of zeros compress to a few KiB with every codec.
        let big = vec![0u8; 4 << 20];
        let recs = record(0, &big, &[]);
        for codec in CODECS {
            let b = wrap(&compress(codec, &recs), 1, 0, None, codec as i16);
            assert!(b.len() < 256 << 10, "codec {codec}: {} bytes", b.len());
            let e = validate_produced(Some(&b), 9, BUDGET).unwrap_err();
            assert_eq!(e.code, ErrorCode::INVALID_RECORD, "codec {codec}: {e:?}");
            assert!(e.message.contains("decompresses to more than"), "codec {codec}: {}", e.message);
            assert_eq!(validate_produced(Some(&b), 9, 8 << 20).unwrap().decompressed, recs.len(), "codec {codec}");
        }
        let xerial = wrap(&xerial_snappy(&recs, 32 << 10), 1, 0, None, CODEC_SNAPPY as i16);
        assert_eq!(code(&xerial, BUDGET), ErrorCode::INVALID_RECORD);
        // A count that cannot fit in the budget is refused before decompressing.
        let b = wrap(&compress(CODEC_ZSTD, &recs), 1 << 20, 0, None, CODEC_ZSTD as i16);
        assert!(validate_produced(Some(&b), 9, 1 << 20).unwrap_err().message.contains("impossible"));
    }

    #[test]
    fn zstd_frames_needing_a_window_over_the_limit_are_refused() {
        let data: Vec<u8> = (0..(1u32 << 20)).flat_map(|i| i.to_le_bytes()).collect();
        let recs = record(0, &data, &[]);
        let mut e = zstd::stream::write::Encoder::new(Vec::new(), 1).unwrap();
        e.window_log(ZSTD_WINDOW_LOG_MAX + 2).unwrap();
        e.include_contentsize(false).unwrap();
        std::io::Write::write_all(&mut e, &recs).unwrap();
        let b = wrap(&e.finish().unwrap(), 1, 0, None, CODEC_ZSTD as i16);
        assert_eq!(code(&b, 64 << 20), ErrorCode::CORRUPT_MESSAGE);
    }

    #[test]
    fn truncated_or_flipped_compressed_data_never_panics_and_is_refused() {
        let values: [&[u8]; 3] = [b"hello", b"compressed", b"world"];
        for codec in CODECS {
            let data = compress(codec, &records(&values));
            // An lz4 frame cut just before its 4-byte end mark still holds
            // every record.
            let whole = if codec == CODEC_LZ4 { data.len() - 4 } else { data.len() };
            for n in 0..whole {
                let b = wrap(&data[..n], 3, 0, None, codec as i16);
                assert_ne!(code(&b, BUDGET), ErrorCode::NONE, "codec {codec}, {n} of {} bytes", data.len());
            }
            for i in 0..data.len() {
                let mut d = data.clone();
                d[i] ^= 0x5a;
                let _ = code(&wrap(&d, 3, 0, None, codec as i16), BUDGET);
            }
        }
    }
}
