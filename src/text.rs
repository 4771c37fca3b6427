//! Text read from the wire and from disk.

/// `bytes` as text, if they are UTF-8.
///
/// Kafka's strings (group, member, topic and client ids) are nearly always
/// ASCII, and every request and record carries several: a word-at-a-time
/// ASCII check answers those in a fraction of what the general UTF-8
/// validation costs on short strings (it was ~4 % of a commit's
/// instructions, docs/benchmarks.md, "Smaller request futures"); anything
/// else is validated in full.
pub fn utf8(bytes: &[u8]) -> Option<&str> {
    if bytes.is_ascii() {
        // SAFETY: every ASCII byte sequence is valid UTF-8.
        Some(unsafe { std::str::from_utf8_unchecked(bytes) })
    } else {
        std::str::from_utf8(bytes).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_is_read_as_utf8_would_read_it() {
        let cases: [&[u8]; 8] = [
            b"",
            b"consumer-group-1",
            "grüße-ñ-日本".as_bytes(),
            b"\xff",
            b"abc\xc3",
            b"\xed\xa0\x80",
            b"a long ascii member id 0123456789abcdef0123456789abcdef",
            b"long prefix in ascii before a bad byte \x80",
        ];
        for bytes in cases {
            assert_eq!(utf8(bytes), std::str::from_utf8(bytes).ok(), "{bytes:?}");
        }
    }
}
