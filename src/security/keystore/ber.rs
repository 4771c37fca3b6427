//! Just enough ASN.1 BER to walk PKCS#12 files: tag, length, content.
//!
//! PKCS#12 files are mostly DER, but some writers (Windows, NSS, older
//! OpenSSL) use BER's indefinite lengths and constructed OCTET STRINGs for
//! the outer layers, so both are read. Every read is bounds-checked and
//! nesting is limited: a damaged or hostile file is an error, never a panic.

use std::borrow::Cow;

pub const SEQUENCE: u8 = 0x30;
pub const SET: u8 = 0x31;
pub const INTEGER: u8 = 0x02;
pub const OCTET_STRING: u8 = 0x04;
pub const OID: u8 = 0x06;
pub const BMP_STRING: u8 = 0x1e;
/// The constructed form of OCTET STRING (BER only).
const OCTET_STRING_CONSTRUCTED: u8 = 0x24;
/// Nesting deeper than this is refused (PKCS#12 needs about ten levels).
const MAX_DEPTH: usize = 48;

/// What a malformed file gets.
pub fn malformed(what: &str) -> String {
    format!("malformed ASN.1 ({what})")
}

/// A run of BER elements, read front to back.
#[derive(Debug, Clone, Copy)]
pub struct Ber<'a> {
    rest: &'a [u8],
    depth: usize,
}

/// One element: its tag, its content, and the whole encoding.
#[derive(Debug, Clone, Copy)]
pub struct Element<'a> {
    pub tag: u8,
    pub content: &'a [u8],
    /// Tag, length and content as they appear in the input.
    pub encoded: &'a [u8],
    depth: usize,
}

impl<'a> Element<'a> {
    /// The elements inside a constructed element.
    pub fn children(&self) -> Ber<'a> {
        Ber { rest: self.content, depth: self.depth + 1 }
    }
}

impl<'a> Ber<'a> {
    pub fn new(data: &'a [u8]) -> Ber<'a> {
        Ber { rest: data, depth: 0 }
    }

    pub fn is_empty(&self) -> bool {
        self.rest.is_empty()
    }

    pub fn peek_tag(&self) -> Option<u8> {
        self.rest.first().copied()
    }

    /// The next element, whatever its tag.
    pub fn element(&mut self) -> Result<Element<'a>, String> {
        if self.depth > MAX_DEPTH {
            return Err(malformed("nested too deeply"));
        }
        let (element, rest) = split_element(self.rest, self.depth)?;
        self.rest = rest;
        Ok(element)
    }

    /// The next element, which must carry `tag`.
    pub fn expect(&mut self, tag: u8, what: &str) -> Result<Element<'a>, String> {
        let element = self.element()?;
        if element.tag != tag {
            return Err(malformed(&format!("{what}: tag {:#04x} where {tag:#04x} belongs", element.tag)));
        }
        Ok(element)
    }

    /// The elements of the next SEQUENCE.
    pub fn sequence(&mut self, what: &str) -> Result<Ber<'a>, String> {
        Ok(self.expect(SEQUENCE, what)?.children())
    }

    /// The next OBJECT IDENTIFIER, in dotted form.
    pub fn oid(&mut self, what: &str) -> Result<String, String> {
        dotted_oid(self.expect(OID, what)?.content).ok_or_else(|| malformed(what))
    }

    /// The next OCTET STRING's bytes (primitive, or BER's constructed form).
    pub fn octets(&mut self, what: &str) -> Result<Cow<'a, [u8]>, String> {
        octets_of(&self.element()?, OCTET_STRING, what)
    }

    /// The next INTEGER, which must be small and not negative.
    pub fn small_uint(&mut self, what: &str) -> Result<u64, String> {
        let content = self.expect(INTEGER, what)?.content;
        if content.is_empty() || content.len() > 9 || content.first().is_some_and(|b| b & 0x80 != 0) {
            return Err(malformed(&format!("{what}: not a small non-negative integer")));
        }
        let mut value: u64 = 0;
        for b in content {
            value = value.checked_mul(256).ok_or_else(|| malformed(what))? | u64::from(*b);
        }
        Ok(value)
    }

    /// The content of an `[n] EXPLICIT` wrapper.
    pub fn explicit(&mut self, n: u8, what: &str) -> Result<Ber<'a>, String> {
        Ok(self.expect(0xa0 | n, what)?.children())
    }
}

/// The bytes of an OCTET STRING `element` whose primitive tag is
/// `primitive` (`[0] IMPLICIT` ones too), joining BER's chunks.
pub fn octets_of<'a>(element: &Element<'a>, primitive: u8, what: &str) -> Result<Cow<'a, [u8]>, String> {
    if element.tag == primitive {
        return Ok(Cow::Borrowed(element.content));
    }
    let constructed = if primitive == OCTET_STRING { OCTET_STRING_CONSTRUCTED } else { primitive | 0x20 };
    if element.tag != constructed {
        return Err(malformed(&format!("{what}: tag {:#04x} where an OCTET STRING belongs", element.tag)));
    }
    let mut joined = Vec::new();
    let mut chunks = element.children();
    while !chunks.is_empty() {
        joined.extend_from_slice(&octets_of(&chunks.element()?, OCTET_STRING, what)?);
    }
    Ok(Cow::Owned(joined))
}

/// Splits the first element off `data`.
fn split_element(data: &[u8], depth: usize) -> Result<(Element<'_>, &[u8]), String> {
    let (&tag, after_tag) = data.split_first().ok_or_else(|| malformed("truncated"))?;
    if tag & 0x1f == 0x1f {
        return Err(malformed("multi-byte tags are not used by PKCS#12"));
    }
    let (&first, after_length_byte) = after_tag.split_first().ok_or_else(|| malformed("truncated length"))?;
    let header = data.len() - after_length_byte.len();
    if first == 0x80 {
        // Indefinite length: constructed content up to an end-of-contents
        // marker (two zero bytes), found by walking the children.
        if tag & 0x20 == 0 {
            return Err(malformed("indefinite length on a primitive element"));
        }
        if depth > MAX_DEPTH {
            return Err(malformed("nested too deeply"));
        }
        let mut rest = after_length_byte;
        loop {
            if rest.starts_with(&[0, 0]) {
                let content_len = after_length_byte.len() - rest.len();
                let content = after_length_byte.get(..content_len).ok_or_else(|| malformed("truncated"))?;
                let total = header + content_len + 2;
                let encoded = data.get(..total).ok_or_else(|| malformed("truncated"))?;
                let tail = data.get(total..).ok_or_else(|| malformed("truncated"))?;
                return Ok((Element { tag, content, encoded, depth }, tail));
            }
            let (_, next) = split_element(rest, depth + 1)?;
            rest = next;
        }
    }
    let (length, after_length) = if first & 0x80 == 0 {
        (usize::from(first), after_length_byte)
    } else {
        let count = usize::from(first & 0x7f);
        if count > 4 {
            return Err(malformed("length too large"));
        }
        let bytes = after_length_byte.get(..count).ok_or_else(|| malformed("truncated length"))?;
        let length = bytes.iter().fold(0usize, |n, b| (n << 8) | usize::from(*b));
        (length, after_length_byte.get(count..).ok_or_else(|| malformed("truncated length"))?)
    };
    let content = after_length.get(..length).ok_or_else(|| malformed("truncated content"))?;
    let total = data.len() - after_length.len() + length;
    let encoded = data.get(..total).ok_or_else(|| malformed("truncated"))?;
    let tail = after_length.get(length..).ok_or_else(|| malformed("truncated"))?;
    Ok((Element { tag, content, encoded, depth }, tail))
}

/// An OBJECT IDENTIFIER's content in dotted form (`1.2.840.113549.1.7.1`).
pub fn dotted_oid(content: &[u8]) -> Option<String> {
    let mut arcs: Vec<u64> = Vec::new();
    let mut value: u64 = 0;
    for (i, b) in content.iter().enumerate() {
        if value == 0 && *b == 0x80 {
            return None; // not minimal
        }
        value = value.checked_mul(128)? | u64::from(b & 0x7f);
        if b & 0x80 == 0 {
            if arcs.is_empty() {
                let first = (value / 40).min(2);
                arcs.push(first);
                arcs.push(value - first * 40);
            } else {
                arcs.push(value);
            }
            value = 0;
        } else if i + 1 == content.len() {
            return None; // truncated arc
        }
    }
    if arcs.is_empty() {
        return None;
    }
    Some(arcs.iter().map(u64::to_string).collect::<Vec<_>>().join("."))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn object_identifiers_read_in_dotted_form() {
        // 1.2.840.113549.1.7.1 (PKCS#7 data)
        let data = [0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x07, 0x01];
        assert_eq!(dotted_oid(&data).unwrap(), "1.2.840.113549.1.7.1");
        assert_eq!(dotted_oid(&[0x88, 0x37]).unwrap(), "2.999");
        assert!(dotted_oid(&[0x2a, 0x86]).is_none());
        assert!(dotted_oid(&[]).is_none());
    }

    #[test]
    fn indefinite_lengths_and_chunked_octet_strings_read_like_their_der_form() {
        // SEQUENCE (indefinite) { OCTET STRING (constructed, indefinite) { "ab", "c" } } INTEGER 5
        let ber = [0x30, 0x80, 0x24, 0x80, 0x04, 0x02, b'a', b'b', 0x04, 0x01, b'c', 0, 0, 0, 0, 0x02, 0x01, 5];
        let mut outer = Ber::new(&ber);
        let mut seq = outer.sequence("outer").unwrap();
        assert_eq!(&*seq.octets("chunks").unwrap(), b"abc");
        assert!(seq.is_empty());
        assert_eq!(outer.small_uint("five").unwrap(), 5);
        assert!(outer.is_empty());
    }

    #[test]
    fn damaged_input_is_an_error_not_a_panic() {
        for bad in [&[0x30, 0x05, 0x02][..], &[0x30, 0x84, 0xff, 0xff, 0xff, 0xff], &[0x30, 0x80, 0x02, 0x01], &[0x1f]]
        {
            let mut r = Ber::new(bad);
            assert!(r.element().and_then(|e| e.children().element()).is_err(), "{bad:?}");
        }
        // Deep nesting stops at the limit instead of exhausting the stack.
        let deep: Vec<u8> = std::iter::repeat_n([0x30, 0x80], 10_000).flatten().collect();
        assert!(Ber::new(&deep).element().is_err());
    }
}
