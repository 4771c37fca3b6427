//! Kafka's text form of a UUID (`Uuid.toString()`): its 16 bytes as
//! URL-safe base64 without padding, 22 characters. Cluster ids and KIP-848
//! member ids look like this.

const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

/// URL-safe base64 of `bytes`, without padding.
pub fn base64_url(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    let letter = |six_bits: u32| ALPHABET.get((six_bits & 0x3f) as usize).map(|&c| c as char);
    let mut acc: u32 = 0;
    let mut bits = 0;
    for b in bytes {
        acc = (acc << 8) | u32::from(*b);
        bits += 8;
        while bits >= 6 {
            bits -= 6;
            out.extend(letter(acc >> bits));
        }
    }
    if bits > 0 {
        out.extend(letter(acc << (6 - bits)));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uuids_print_as_kafka_prints_them() {
        assert_eq!(base64_url(&[0u8; 16]), "AAAAAAAAAAAAAAAAAAAAAA");
        assert_eq!(base64_url(&[0xfb, 0xff]), "-_8");
        assert_eq!(base64_url(uuid::Uuid::new_v4().as_bytes()).len(), 22);
        assert_eq!(base64_url(b"Man"), "TWFu");
    }
}
