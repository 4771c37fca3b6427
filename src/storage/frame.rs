//! Record framing: `[u32 BE payload length][u32 BE CRC-32C of payload][payload]`.
//!
//! The length field's top bit ([`CONTINUES`]) says that the next frame
//! belongs to the same write: records appended together (one coordinator
//! write) must survive a crash together or not at all, as the records of one
//! Kafka record batch share a CRC. A reader holds such records back until the
//! frame without the bit arrives, and a write cut short between its frames
//! is dropped whole ([`Stop::UnfinishedWrite`]).
//!
//! The length lets a reader find the next record without an index; the CRC
//! tells a good record from a torn or rotten one. The scanner only
//! *classifies* what it finds and leaves the decision to its caller, because
//! the same damage means different things in different places: a cut-short
//! frame at the end of the active segment is the normal result of a crash in
//! the middle of an append, while the same bytes in a closed segment or a
//! snapshot mean the disk lost data it had promised to keep.

use std::io::{self, Read};

/// Bytes of the frame header (length + CRC) before each payload.
pub const HEADER_BYTES: usize = 8;

/// The largest payload we write or accept. A length field above it can only be
/// garbage, and rejecting it before allocating keeps a flipped bit from
/// turning into a multi-gigabyte allocation.
pub const MAX_RECORD_BYTES: usize = 256 * 1024 * 1024;

/// The length field's top bit: another frame of the same write follows. Free
/// because [`MAX_RECORD_BYTES`] needs only 29 bits; logs written before it
/// existed never set it.
pub const CONTINUES: u32 = 1 << 31;

/// How much of a tail is read at a time when checking that it is all zeros, so
/// that the check costs a fixed amount of memory whatever the file size.
const ZERO_CHECK_CHUNK: usize = 64 * 1024;

/// Checks that a payload can be framed. Empty payloads are refused because a
/// zero length field is how we recognise a zero-filled (torn) tail.
pub fn check_payload_len(len: usize) -> io::Result<()> {
    if len == 0 {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, "log records must not be empty"));
    }
    if len > MAX_RECORD_BYTES {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("log record of {len} bytes exceeds the limit of {MAX_RECORD_BYTES} bytes"),
        ));
    }
    Ok(())
}

/// The header for `payload`, for writers that stream header and payload
/// separately instead of copying the payload into a buffer.
pub fn frame_header(payload: &[u8]) -> io::Result<[u8; HEADER_BYTES]> {
    frame_header_of_write(payload, false)
}

/// [`frame_header`] for one record of a multi-record write: `continues`
/// for every record but the last (see [`CONTINUES`]).
fn frame_header_of_write(payload: &[u8], continues: bool) -> io::Result<[u8; HEADER_BYTES]> {
    check_payload_len(payload.len())?;
    let len =
        u32::try_from(payload.len()).map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "log record too long"))?;
    let len = if continues { len | CONTINUES } else { len };
    let crc = crc32c::crc32c(payload);
    let [a, b, c, d] = len.to_be_bytes();
    let [e, f, g, h] = crc.to_be_bytes();
    Ok([a, b, c, d, e, f, g, h])
}

/// Appends the framed `payload` to `out`.
pub fn encode_frame(out: &mut Vec<u8>, payload: &[u8]) -> io::Result<()> {
    encode_frame_of_write(out, payload, false)
}

/// Appends the framed `payload` to `out`, marked as followed by another
/// record of the same write if `continues` (see [`CONTINUES`]).
pub fn encode_frame_of_write(out: &mut Vec<u8>, payload: &[u8], continues: bool) -> io::Result<()> {
    let header = frame_header_of_write(payload, continues)?;
    out.reserve(HEADER_BYTES + payload.len());
    out.extend_from_slice(&header);
    out.extend_from_slice(payload);
    Ok(())
}

/// Why a scan stopped. Everything except [`Stop::End`] is damage of some
/// kind; [`Stop::is_torn_tail`] says whether it is the kind a crash leaves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stop {
    /// The data ended exactly after the previous frame.
    End,
    /// The header or the payload runs past the end of the data (its length
    /// field is at most [`MAX_RECORD_BYTES`] but more than what is left).
    Incomplete,
    /// The payload does not match its CRC. `at_tail`: nothing but zero bytes
    /// (or nothing at all) follows the frame.
    CrcMismatch { at_tail: bool },
    /// A length field of 0, which we never write. `at_tail`: the header and
    /// everything after it are zero bytes, as a crash can leave behind when the
    /// file size was extended before the data reached the disk.
    ZeroLength { at_tail: bool },
    /// A length field above [`MAX_RECORD_BYTES`]: garbage.
    BadLength { len: u32 },
    /// A length field that runs past the end of the data although a
    /// complete, CRC-valid frame starts after it. A cut-short append cannot
    /// leave that (nothing is ever written after an unfinished frame), so the
    /// length field itself is damaged and the records after it are real.
    DamagedLength { len: u32 },
    /// The data ended after a frame marked [`CONTINUES`]: a write of several
    /// records was cut between them. Reported by callers that group frames
    /// into writes (the scanner itself yields frames one by one), at the
    /// first frame of the unfinished write.
    UnfinishedWrite,
}

impl Stop {
    /// True for the damage that an interrupted append leaves at the end of a
    /// file: an incomplete last frame, or a last frame that is followed by
    /// nothing but zeros and is itself either all zeros or fails its CRC. A
    /// bad frame followed by real data cannot come from a crash, because we
    /// never write after a frame we have not finished writing.
    pub fn is_torn_tail(self) -> bool {
        matches!(
            self,
            Stop::Incomplete
                | Stop::CrcMismatch { at_tail: true }
                | Stop::ZeroLength { at_tail: true }
                | Stop::UnfinishedWrite
        )
    }

    /// A sentence for logs and error messages.
    pub fn describe(self) -> String {
        match self {
            Stop::End => "end of data".to_string(),
            Stop::Incomplete => "incomplete frame (cut short by the end of the file)".to_string(),
            Stop::CrcMismatch { at_tail: true } => "CRC mismatch in the last frame".to_string(),
            Stop::CrcMismatch { at_tail: false } => "CRC mismatch in a frame followed by more data".to_string(),
            Stop::ZeroLength { at_tail: true } => "zero-filled tail".to_string(),
            Stop::ZeroLength { at_tail: false } => "zero length field followed by non-zero data".to_string(),
            Stop::BadLength { len } => {
                format!("length field {len} exceeds the maximum record size {MAX_RECORD_BYTES}")
            }
            Stop::DamagedLength { len } => {
                format!("length field {len} runs past the end of the file but intact records follow it")
            }
            Stop::UnfinishedWrite => "the last records of a multi-record write are missing".to_string(),
        }
    }
}

/// Whether a complete frame with a matching CRC starts anywhere after the
/// first byte of `header` followed by `rest`. Run only on a frame whose length
/// field runs past the end of the data, to tell a cut-short append (nothing
/// valid after it) from a damaged length field in the middle of real records.
/// Random bytes pass the CRC check with a chance of 2^-32 per candidate.
fn holds_a_frame(header: &[u8; HEADER_BYTES], rest: &[u8]) -> bool {
    let mut data = Vec::with_capacity(HEADER_BYTES + rest.len());
    data.extend_from_slice(header);
    data.extend_from_slice(rest);
    (1..data.len()).any(|at| {
        let Some(h) = data.get(at..at + HEADER_BYTES) else { return false };
        let (Some(len), Some(crc)) = (crate::be_int::u32_at(h, 0), crate::be_int::u32_at(h, 4)) else { return false };
        let len = (len & !CONTINUES) as usize;
        len > 0 && data.get(at + HEADER_BYTES..at + HEADER_BYTES + len).is_some_and(|p| crc32c::crc32c(p) == crc)
    })
}

/// One step of a scan.
#[derive(Debug, PartialEq, Eq)]
pub enum Scanned<'a> {
    /// A complete record whose CRC matches; `position` is the byte offset of
    /// its header; `continues`: the next frame belongs to the same write.
    Record { position: u64, payload: &'a [u8], continues: bool },
    /// The scan is over; [`FrameScanner::position`] is where it stopped.
    Stop(Stop),
}

/// Walks the frames of `len` bytes read from `reader`.
///
/// `len` is the size of the data (the file size), which is what lets every
/// length field be checked against reality before anything is allocated:
/// the payload buffer never grows beyond the bytes actually present.
#[derive(Debug)]
pub struct FrameScanner<R> {
    reader: R,
    len: u64,
    position: u64,
    payload: Vec<u8>,
    /// The last frame read had [`CONTINUES`] set.
    continues: bool,
    halted: Option<Stop>,
}

impl<R: Read> FrameScanner<R> {
    pub fn new(reader: R, len: u64) -> FrameScanner<R> {
        FrameScanner { reader, len, position: 0, payload: Vec::new(), continues: false, halted: None }
    }

    /// The offset of the next frame, or after a stop, of the frame that
    /// stopped the scan (where a repair would truncate).
    pub fn position(&self) -> u64 {
        self.position
    }

    /// The next frame. Once a stop has been returned, every later call
    /// returns the same stop, so a caller cannot read past damage by mistake.
    pub fn next_frame(&mut self) -> io::Result<Scanned<'_>> {
        if let Some(stop) = self.halted {
            return Ok(Scanned::Stop(stop));
        }
        let start = self.position;
        match self.read_frame()? {
            Some(stop) => {
                self.halted = Some(stop);
                Ok(Scanned::Stop(stop))
            }
            None => Ok(Scanned::Record { position: start, payload: &self.payload, continues: self.continues }),
        }
    }

    /// Reads one frame into `self.payload` and advances, or says why not.
    fn read_frame(&mut self) -> io::Result<Option<Stop>> {
        let remaining = self.len.saturating_sub(self.position);
        if remaining == 0 {
            return Ok(Some(Stop::End));
        }
        if remaining < HEADER_BYTES as u64 {
            return Ok(Some(Stop::Incomplete));
        }
        let mut header = [0u8; HEADER_BYTES];
        self.reader.read_exact(&mut header)?;
        let [a, b, c, d, e, f, g, h] = header;
        let raw_len = u32::from_be_bytes([a, b, c, d]);
        self.continues = raw_len & CONTINUES != 0;
        let len_field = raw_len & !CONTINUES;
        let crc = u32::from_be_bytes([e, f, g, h]);
        let after_header = remaining - HEADER_BYTES as u64;

        if len_field == 0 {
            let at_tail = crc == 0 && self.rest_is_zero(after_header)?;
            return Ok(Some(Stop::ZeroLength { at_tail }));
        }
        let payload_len = match usize::try_from(len_field) {
            Ok(n) if n <= MAX_RECORD_BYTES => n,
            _ => return Ok(Some(Stop::BadLength { len: raw_len })),
        };
        if u64::from(len_field) > after_header {
            // Bounded: after_header < len_field <= MAX_RECORD_BYTES.
            let mut rest = vec![0u8; after_header as usize];
            self.reader.read_exact(&mut rest)?;
            if holds_a_frame(&header, &rest) {
                return Ok(Some(Stop::DamagedLength { len: len_field }));
            }
            return Ok(Some(Stop::Incomplete));
        }
        // Bounded: payload_len <= MAX_RECORD_BYTES and <= bytes left in the data.
        self.payload.clear();
        self.payload.resize(payload_len, 0);
        self.reader.read_exact(&mut self.payload)?;
        if crc32c::crc32c(&self.payload) != crc {
            let at_tail = self.rest_is_zero(after_header - u64::from(len_field))?;
            return Ok(Some(Stop::CrcMismatch { at_tail }));
        }
        self.position += HEADER_BYTES as u64 + u64::from(len_field);
        Ok(None)
    }

    /// Whether the next `n` bytes are all zero, read in fixed-size chunks.
    fn rest_is_zero(&mut self, mut n: u64) -> io::Result<bool> {
        let mut chunk = vec![0u8; ZERO_CHECK_CHUNK];
        while n > 0 {
            // At most ZERO_CHECK_CHUNK, so the cast and the slice cannot fail.
            let take = n.min(ZERO_CHECK_CHUNK as u64) as usize;
            let Some(part) = chunk.get_mut(..take) else { return Ok(false) };
            self.reader.read_exact(part)?;
            if part.iter().any(|&byte| byte != 0) {
                return Ok(false);
            }
            n -= take as u64;
        }
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn framed(payloads: &[&[u8]]) -> Vec<u8> {
        let mut out = Vec::new();
        for p in payloads {
            encode_frame(&mut out, p).unwrap();
        }
        out
    }

    /// Every record, then the stop and where it happened.
    fn scan(bytes: &[u8]) -> (Vec<(u64, Vec<u8>)>, Stop, u64) {
        let mut scanner = FrameScanner::new(bytes, bytes.len() as u64);
        let mut records = Vec::new();
        loop {
            match scanner.next_frame().unwrap() {
                Scanned::Record { position, payload, .. } => records.push((position, payload.to_vec())),
                Scanned::Stop(stop) => return (records, stop, scanner.position()),
            }
        }
    }

    #[test]
    fn encoded_records_round_trip_through_the_scanner() {
        let bytes = framed(&[b"a", b"hello", &[0u8; 300]]);
        let (records, stop, at) = scan(&bytes);
        assert_eq!(stop, Stop::End);
        assert_eq!(at, bytes.len() as u64);
        assert_eq!(records, vec![(0, b"a".to_vec()), (9, b"hello".to_vec()), (22, vec![0u8; 300])]);
    }

    #[test]
    fn records_of_one_write_carry_the_continues_bit_but_the_last() {
        let mut bytes = Vec::new();
        encode_frame_of_write(&mut bytes, b"first", true).unwrap();
        encode_frame_of_write(&mut bytes, b"last", false).unwrap();
        assert_eq!(&bytes[..4], &(5u32 | CONTINUES).to_be_bytes());
        let mut scanner = FrameScanner::new(&bytes[..], bytes.len() as u64);
        let Scanned::Record { payload, continues, .. } = scanner.next_frame().unwrap() else { panic!("a record") };
        assert_eq!((payload, continues), (&b"first"[..], true));
        let Scanned::Record { payload, continues, .. } = scanner.next_frame().unwrap() else { panic!("a record") };
        assert_eq!((payload, continues), (&b"last"[..], false));
        assert_eq!(scanner.next_frame().unwrap(), Scanned::Stop(Stop::End));
    }

    #[test]
    fn header_is_big_endian_length_then_crc32c() {
        let bytes = framed(&[b"xyz"]);
        assert_eq!(&bytes[..4], &3u32.to_be_bytes());
        assert_eq!(&bytes[4..8], &crc32c::crc32c(b"xyz").to_be_bytes());
        assert_eq!(&bytes[8..], b"xyz");
    }

    #[test]
    fn empty_and_oversized_payloads_are_refused() {
        let mut out = Vec::new();
        assert_eq!(encode_frame(&mut out, b"").unwrap_err().kind(), io::ErrorKind::InvalidInput);
        assert!(out.is_empty());
        assert!(check_payload_len(MAX_RECORD_BYTES).is_ok());
        assert!(check_payload_len(MAX_RECORD_BYTES + 1).is_err());
    }

    #[test]
    fn a_length_field_running_past_the_end_before_intact_frames_is_damage_not_a_torn_tail() {
        let mut bytes = framed(&[b"first", b"second", b"third"]);
        // The second frame's length now claims more than the file holds.
        bytes[13..17].copy_from_slice(&1000u32.to_be_bytes());
        let (records, stop, at) = scan(&bytes);
        assert_eq!(records, vec![(0, b"first".to_vec())]);
        assert_eq!((stop, at), (Stop::DamagedLength { len: 1000 }, 13));
        assert!(!stop.is_torn_tail());
    }

    #[test]
    fn a_cut_short_last_frame_is_still_a_torn_tail() {
        let bytes = framed(&[b"first", b"second"]);
        let (records, stop, _) = scan(&bytes[..bytes.len() - 2]);
        assert_eq!(records.len(), 1);
        assert_eq!(stop, Stop::Incomplete);
        assert!(stop.is_torn_tail());
    }

    #[test]
    fn empty_data_is_a_clean_end() {
        assert_eq!(scan(&[]), (vec![], Stop::End, 0));
    }

    #[test]
    fn header_cut_short_is_incomplete() {
        let mut bytes = framed(&[b"one", b"two"]);
        bytes.truncate(11 + 5);
        let (records, stop, at) = scan(&bytes);
        assert_eq!(records.len(), 1);
        assert_eq!((stop, at), (Stop::Incomplete, 11));
        assert!(stop.is_torn_tail());
    }

    #[test]
    fn payload_cut_short_is_incomplete() {
        let mut bytes = framed(&[b"one", b"two"]);
        bytes.pop();
        let (records, stop, at) = scan(&bytes);
        assert_eq!(records.len(), 1);
        assert_eq!((stop, at), (Stop::Incomplete, 11));
    }

    #[test]
    fn crc_mismatch_in_the_last_frame_is_at_the_tail() {
        let mut bytes = framed(&[b"one", b"two"]);
        let last = bytes.len() - 1;
        bytes[last] ^= 0x40;
        let (records, stop, at) = scan(&bytes);
        assert_eq!(records.len(), 1);
        assert_eq!((stop, at), (Stop::CrcMismatch { at_tail: true }, 11));
        assert!(stop.is_torn_tail());
    }

    #[test]
    fn crc_mismatch_followed_by_data_is_not_a_tail() {
        let mut bytes = framed(&[b"one", b"two", b"three"]);
        bytes[9] ^= 0x01;
        let (records, stop, at) = scan(&bytes);
        assert!(records.is_empty());
        assert_eq!((stop, at), (Stop::CrcMismatch { at_tail: false }, 0));
        assert!(!stop.is_torn_tail());
    }

    #[test]
    fn crc_mismatch_followed_only_by_zeros_is_at_the_tail() {
        // One write of two frames whose second page never reached the disk.
        let mut bytes = framed(&[b"one", b"two", b"three"]);
        for byte in &mut bytes[20..] {
            *byte = 0;
        }
        let (records, stop, at) = scan(&bytes);
        assert_eq!(records.len(), 1);
        assert_eq!((stop, at), (Stop::CrcMismatch { at_tail: true }, 11));
    }

    #[test]
    fn zero_run_to_the_end_is_a_torn_tail() {
        let mut bytes = framed(&[b"one"]);
        bytes.extend_from_slice(&[0u8; 100_000]);
        let (records, stop, at) = scan(&bytes);
        assert_eq!(records.len(), 1);
        assert_eq!((stop, at), (Stop::ZeroLength { at_tail: true }, 11));
        assert!(stop.is_torn_tail());
    }

    #[test]
    fn zeros_shorter_than_a_header_are_incomplete() {
        let mut bytes = framed(&[b"one"]);
        bytes.extend_from_slice(&[0u8; 5]);
        assert_eq!(scan(&bytes).1, Stop::Incomplete);
    }

    #[test]
    fn zero_length_followed_by_data_is_not_a_tail() {
        let mut bytes = vec![0u8; 20];
        bytes.extend_from_slice(&framed(&[b"later"]));
        let (records, stop, _) = scan(&bytes);
        assert!(records.is_empty());
        assert_eq!(stop, Stop::ZeroLength { at_tail: false });
        assert!(!stop.is_torn_tail());
    }

    #[test]
    fn length_above_the_maximum_is_bad_without_allocating() {
        let mut bytes = framed(&[b"one"]);
        bytes.extend_from_slice(&u32::MAX.to_be_bytes());
        bytes.extend_from_slice(&[1, 2, 3, 4, 5, 6]);
        let mut scanner = FrameScanner::new(&bytes[..], bytes.len() as u64);
        assert!(matches!(scanner.next_frame().unwrap(), Scanned::Record { .. }));
        assert_eq!(scanner.next_frame().unwrap(), Scanned::Stop(Stop::BadLength { len: u32::MAX }));
        assert!(scanner.payload.capacity() < 1024);
        assert!(!Stop::BadLength { len: 0 }.is_torn_tail());
    }

    #[test]
    fn length_beyond_the_data_is_incomplete_without_allocating_it() {
        let mut bytes = (MAX_RECORD_BYTES as u32).to_be_bytes().to_vec();
        bytes.extend_from_slice(&[7u8; 100]);
        let mut scanner = FrameScanner::new(&bytes[..], bytes.len() as u64);
        assert_eq!(scanner.next_frame().unwrap(), Scanned::Stop(Stop::Incomplete));
        assert_eq!(scanner.payload.capacity(), 0);
    }

    #[test]
    fn a_halted_scanner_keeps_reporting_its_stop() {
        let mut bytes = framed(&[b"one", b"two"]);
        bytes[9] ^= 0x01;
        let mut scanner = FrameScanner::new(&bytes[..], bytes.len() as u64);
        let stop = Scanned::Stop(Stop::CrcMismatch { at_tail: false });
        assert_eq!(scanner.next_frame().unwrap(), stop);
        assert_eq!(scanner.next_frame().unwrap(), stop);
        assert_eq!(scanner.position(), 0);
    }

    #[test]
    fn stops_describe_themselves() {
        assert!(Stop::BadLength { len: 9 }.describe().contains('9'));
        assert!(Stop::CrcMismatch { at_tail: false }.describe().contains("CRC"));
        assert!(!Stop::End.is_torn_tail());
    }
}
