//! Request and response headers, parsed by hand.
//!
//! kafka-protocol's header decoder indexes the buffer before checking its
//! length (a frame shorter than four bytes panics it), and it needs to know an
//! API key it may not recognise. The header is small and fixed, so we read it
//! ourselves with every length checked.

use bytes::{Buf, BufMut, Bytes, BytesMut};

/// The fields of a request header that kcoord uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestHeader {
    pub api_key: i16,
    pub api_version: i16,
    pub correlation_id: i32,
    /// The client id as sent; `None` when the client sent a null string.
    /// A slice of the request frame, read as text only by the few users
    /// that need it ([`RequestHeader::client_id`]): every request carries
    /// one, and copying (and validating) it each time was an allocation
    /// per request.
    pub client_id_bytes: Option<Bytes>,
}

impl RequestHeader {
    /// The client id as Kafka reads it, leniently: bytes that are not
    /// UTF-8 become replacement characters.
    pub fn client_id(&self) -> Option<std::borrow::Cow<'_, str>> {
        self.client_id_bytes.as_deref().map(String::from_utf8_lossy)
    }
}

/// Why a frame could not be read as a request.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HeaderError {
    #[error("frame of {0} bytes is too short for a request header")]
    TooShort(usize),
    #[error("client id is malformed")]
    BadClientId,
    #[error("tagged fields in the request header are malformed")]
    BadTaggedFields,
}

/// The first eight bytes of every request: enough to route it and to answer
/// with the right correlation id even if the rest is unreadable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RequestPrefix {
    pub api_key: i16,
    pub api_version: i16,
    pub correlation_id: i32,
}

/// Reads the fixed prefix without consuming it.
pub fn peek_prefix(frame: &[u8]) -> Result<RequestPrefix, HeaderError> {
    let Some(mut b) = frame.get(..8) else {
        return Err(HeaderError::TooShort(frame.len()));
    };
    Ok(RequestPrefix { api_key: b.get_i16(), api_version: b.get_i16(), correlation_id: b.get_i32() })
}

/// Consumes a request header (v1, or v2 when `flexible`) from `frame`,
/// leaving the body.
pub fn parse_request_header(frame: &mut Bytes, flexible: bool) -> Result<RequestHeader, HeaderError> {
    let prefix = peek_prefix(frame)?;
    frame.advance(8);
    if frame.remaining() < 2 {
        return Err(HeaderError::BadClientId);
    }
    let len = frame.get_i16();
    let client_id = match len {
        -1 => None,
        n if n >= 0 => {
            let n = n as usize;
            if frame.remaining() < n {
                return Err(HeaderError::BadClientId);
            }
            Some(frame.split_to(n))
        }
        _ => return Err(HeaderError::BadClientId),
    };
    if flexible {
        skip_tagged_fields(frame).ok_or(HeaderError::BadTaggedFields)?;
    }
    Ok(RequestHeader {
        api_key: prefix.api_key,
        api_version: prefix.api_version,
        correlation_id: prefix.correlation_id,
        client_id_bytes: client_id,
    })
}

/// Reads an unsigned varint (at most five bytes).
pub fn read_uvarint(buf: &mut Bytes) -> Option<u32> {
    let mut value: u32 = 0;
    for i in 0..5 {
        if !buf.has_remaining() {
            return None;
        }
        let b = buf.get_u8();
        value |= ((b & 0x7f) as u32) << (7 * i);
        if b & 0x80 == 0 {
            return Some(value);
        }
    }
    None
}

pub(crate) fn skip_tagged_fields(buf: &mut Bytes) -> Option<()> {
    let count = read_uvarint(buf)?;
    for _ in 0..count {
        let _tag = read_uvarint(buf)?;
        let size = read_uvarint(buf)? as usize;
        if buf.remaining() < size {
            return None;
        }
        buf.advance(size);
    }
    Some(())
}

/// Writes a response header: v0 is the correlation id; v1 adds an empty
/// tagged-field section.
pub fn write_response_header(out: &mut BytesMut, correlation_id: i32, flexible: bool) {
    out.put_i32(correlation_id);
    if flexible {
        out.put_u8(0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(parts: &[&[u8]]) -> Bytes {
        let mut b = BytesMut::new();
        for p in parts {
            b.extend_from_slice(p);
        }
        b.freeze()
    }

    #[test]
    fn short_frames_are_rejected_not_panicking() {
        for n in 0..8 {
            let f = vec![0u8; n];
            assert_eq!(peek_prefix(&f), Err(HeaderError::TooShort(n)));
        }
        let mut f = Bytes::from_static(&[0, 18, 0, 3, 0, 0, 0, 1]);
        assert_eq!(parse_request_header(&mut f, false), Err(HeaderError::BadClientId));
    }

    #[test]
    fn parses_v1_and_v2_headers() {
        let mut f = frame(&[&[0, 11, 0, 5, 0, 0, 0, 7, 0, 3], b"abc", b"body"]);
        let h = parse_request_header(&mut f, false).unwrap();
        assert_eq!(h.api_key, 11);
        assert_eq!(h.api_version, 5);
        assert_eq!(h.correlation_id, 7);
        assert_eq!(h.client_id().as_deref(), Some("abc"));
        assert_eq!(&f[..], b"body");

        let mut f = frame(&[&[0, 11, 0, 6, 0, 0, 0, 7, 0xff, 0xff, 1, 9, 2, 0xaa, 0xbb], b"x"]);
        let h = parse_request_header(&mut f, true).unwrap();
        assert_eq!(h.client_id(), None);
        assert_eq!(&f[..], b"x");
    }

    #[test]
    fn a_client_id_that_is_not_utf8_is_read_leniently() {
        let mut f = frame(&[&[0, 12, 0, 3, 0, 0, 0, 7, 0, 3], b"a\xffb"]);
        let h = parse_request_header(&mut f, false).unwrap();
        assert_eq!(h.client_id().as_deref(), Some("a\u{fffd}b"));
    }

    #[test]
    fn truncated_tagged_fields_are_rejected() {
        let mut f = frame(&[&[0, 11, 0, 6, 0, 0, 0, 7, 0, 0, 1, 9, 200]]);
        assert_eq!(parse_request_header(&mut f, true), Err(HeaderError::BadTaggedFields));
    }
}
