//! Kafka's primitive types by hand, for the bodies kcoord reads and writes
//! without `kafka-protocol`'s structs: the requests and responses of the
//! hot path (Heartbeat, OffsetCommit), whose structs cost a second pass to
//! turn them into kcoord's own types (and for commits an allocation per
//! topic and per partition list), and the responses that stream
//! (FindCoordinator's batches). Each user's tests compare its results with
//! `kafka-protocol`'s at every version.
//!
//! Reading trusts nothing: every length is checked against the bytes left,
//! and an array's length never reserves memory beyond a few entries before
//! its entries have actually arrived.

use bytes::{Buf, BufMut, Bytes, BytesMut};

use super::codec::DecodeError;
use super::header::{read_uvarint, skip_tagged_fields};
use super::versions::ApiSupport;

/// Why a body cannot be read, or a value cannot be written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WireError {
    #[error("a string of {0} bytes is longer than the protocol allows")]
    StringTooLong(usize),
    #[error("an array of {0} entries is longer than the protocol allows")]
    ArrayTooLong(usize),
    #[error("the body ends before its {0}")]
    Truncated(&'static str),
    #[error("{0} is null, which this field cannot be")]
    Null(&'static str),
    #[error("{0} has a negative length")]
    NegativeLength(&'static str),
    #[error("{0} is not UTF-8")]
    NotUtf8(&'static str),
}

/// Reads an API's request body at `version` with `read`; a failure is the
/// API's malformed request, as `codec::decode` reports one.
pub fn decode_with<T>(
    api: &ApiSupport,
    version: i16,
    body: &mut Bytes,
    read: impl FnOnce(&mut Reader<'_>) -> Result<T, WireError>,
) -> Result<T, DecodeError> {
    let error = |reason: String| DecodeError { api: api.name, version, reason };
    if !api.supports(version) {
        return Err(error("version not supported".into()));
    }
    read(&mut Reader::new(body, api.is_flexible(version))).map_err(|e| error(e.to_string()))
}

/// Entries an array read by hand reserves room for before they arrive.
pub const INITIAL_ENTRIES: usize = 16;

/// A request body read field by field, in a flexible version or not.
pub struct Reader<'a> {
    buf: &'a mut Bytes,
    flexible: bool,
}

impl<'a> Reader<'a> {
    pub fn new(buf: &'a mut Bytes, flexible: bool) -> Self {
        Reader { buf, flexible }
    }

    fn need(&self, n: usize, what: &'static str) -> Result<(), WireError> {
        if self.buf.remaining() < n {
            return Err(WireError::Truncated(what));
        }
        Ok(())
    }

    pub fn i16(&mut self, what: &'static str) -> Result<i16, WireError> {
        self.need(2, what)?;
        Ok(self.buf.get_i16())
    }

    pub fn i32(&mut self, what: &'static str) -> Result<i32, WireError> {
        self.need(4, what)?;
        Ok(self.buf.get_i32())
    }

    pub fn i64(&mut self, what: &'static str) -> Result<i64, WireError> {
        self.need(8, what)?;
        Ok(self.buf.get_i64())
    }

    /// A length: an i16 or i32 (`wide`) before flexible versions, where -1
    /// is null; a compact length in them, where 0 is null.
    fn length(&mut self, wide: bool, what: &'static str) -> Result<Option<usize>, WireError> {
        if self.flexible {
            let n = read_uvarint(self.buf).ok_or(WireError::Truncated(what))?;
            return Ok(n.checked_sub(1).map(|n| n as usize));
        }
        let n = if wide { self.i32(what)? } else { i32::from(self.i16(what)?) };
        match n {
            -1 => Ok(None),
            n => usize::try_from(n).map(Some).map_err(|_| WireError::NegativeLength(what)),
        }
    }

    pub fn nullable_string(&mut self, what: &'static str) -> Result<Option<String>, WireError> {
        let Some(len) = self.length(false, what)? else { return Ok(None) };
        let raw = self.buf.get(..len).ok_or(WireError::Truncated(what))?;
        let text = crate::text::utf8(raw).map(str::to_owned).ok_or(WireError::NotUtf8(what));
        self.buf.advance(len);
        text.map(Some)
    }

    pub fn string(&mut self, what: &'static str) -> Result<String, WireError> {
        self.nullable_string(what)?.ok_or(WireError::Null(what))
    }

    /// A UUID (topic ids): 16 bytes, most significant first.
    pub fn uuid(&mut self, what: &'static str) -> Result<uuid::Uuid, WireError> {
        self.need(16, what)?;
        Ok(uuid::Uuid::from_u128(self.buf.get_u128()))
    }

    /// A topic named by name or, in the versions that name topics by id
    /// (`by_id`), by id: the id goes to `ids` and the name returned is
    /// empty, for the server to fill in once it has resolved the id.
    pub fn topic_name_or_id(&mut self, by_id: bool, ids: &mut Vec<uuid::Uuid>) -> Result<String, WireError> {
        match by_id {
            true => {
                ids.push(self.uuid("a topic id")?);
                Ok(String::new())
            }
            false => self.string("a topic name"),
        }
    }

    /// A boolean: any byte but 0 is true, as Kafka reads it.
    pub fn bool(&mut self, what: &'static str) -> Result<bool, WireError> {
        self.need(1, what)?;
        Ok(self.buf.get_u8() != 0)
    }

    /// An array's length, `None` for a null array.
    pub fn nullable_array_len(&mut self, what: &'static str) -> Result<Option<usize>, WireError> {
        self.length(true, what)
    }

    /// A non-null array's length (its entries are read by the caller).
    pub fn array_len(&mut self, what: &'static str) -> Result<usize, WireError> {
        self.length(true, what)?.ok_or(WireError::Null(what))
    }

    /// The end of a structure: in a flexible version its tagged fields,
    /// none of which kcoord reads, are skipped.
    pub fn end_of_struct(&mut self, what: &'static str) -> Result<(), WireError> {
        if self.flexible {
            skip_tagged_fields(self.buf).ok_or(WireError::Truncated(what))?;
        }
        Ok(())
    }
}

/// An unsigned varint, as Kafka's compact lengths and tag counts.
pub fn put_uvarint(out: &mut BytesMut, mut n: u32) {
    while n >= 0x80 {
        out.put_u8((n as u8 & 0x7f) | 0x80);
        n >>= 7;
    }
    out.put_u8(n as u8);
}

/// An array's length: an i32 before flexible versions, a compact length
/// (length + 1 as an unsigned varint) in them.
pub fn put_array_len(out: &mut BytesMut, len: usize, flexible: bool) -> Result<(), WireError> {
    if flexible {
        let n = u32::try_from(len).ok().and_then(|n| n.checked_add(1)).ok_or(WireError::ArrayTooLong(len))?;
        put_uvarint(out, n);
    } else {
        out.put_i32(i32::try_from(len).map_err(|_| WireError::ArrayTooLong(len))?);
    }
    Ok(())
}

/// A non-null string: an i16 length before flexible versions, a compact
/// length in them. Kafka refuses strings longer than an i16 in both.
pub fn put_string(out: &mut BytesMut, s: &str, flexible: bool) -> Result<(), WireError> {
    let len = i16::try_from(s.len()).map_err(|_| WireError::StringTooLong(s.len()))?;
    if flexible {
        put_uvarint(out, len as u32 + 1);
    } else {
        out.put_i16(len);
    }
    out.put_slice(s.as_bytes());
    Ok(())
}

/// A UUID (topic ids): 16 bytes, most significant first.
pub fn put_uuid(out: &mut BytesMut, id: &uuid::Uuid) {
    out.put_u128(id.as_u128());
}

/// The end of a structure in a flexible version: no tagged fields.
pub fn put_no_tags(out: &mut BytesMut, flexible: bool) {
    if flexible {
        put_uvarint(out, 0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compact_lengths_are_varints_of_length_plus_one() {
        let mut out = BytesMut::new();
        put_array_len(&mut out, 0, true).unwrap();
        put_array_len(&mut out, 127, true).unwrap();
        put_array_len(&mut out, 300, true).unwrap();
        assert_eq!(&out[..], &[0x01, 0x80, 0x01, 0xad, 0x02]);
    }

    #[test]
    fn strings_longer_than_an_i16_are_refused() {
        let long = "x".repeat(40_000);
        assert_eq!(put_string(&mut BytesMut::new(), &long, false), Err(WireError::StringTooLong(40_000)));
        assert_eq!(put_string(&mut BytesMut::new(), &long, true), Err(WireError::StringTooLong(40_000)));
    }
}
