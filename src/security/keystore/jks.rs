//! Java's JKS key stores (`keytool -storetype JKS`, Java 8's default), the
//! format of `sun.security.provider.JavaKeyStore`:
//!
//! - magic `FEEDFEED`, version 1 or 2, an entry count, then entries: tag 1,
//!   a private key (alias, date, the key protected by Sun's SHA-1 keystream,
//!   its certificate chain), or tag 2, a trusted certificate;
//! - last, SHA-1 over the password (UTF-16BE), "Mighty Aphrodite" and every
//!   byte before it: the store's integrity check.
//!
//! JCEKS stores (`keytool -storetype JCEKS`, `com.sun.crypto.provider.
//! JceKeyStore`) have the same layout with magic `CECECECE`; their private
//! keys are protected by PBEWithMD5AndTripleDES instead (MD5-derived 3DES
//! key and IV, CBC), and they may hold secret keys (tag 3), serialized Java
//! objects a TLS store has no use for, which are refused.

use ring::digest;

use super::{Entries, KeyEntry};

pub const MAGIC: [u8; 4] = [0xfe, 0xed, 0xfe, 0xed];
pub const JCEKS_MAGIC: [u8; 4] = [0xce, 0xce, 0xce, 0xce];
/// Sun's key protection algorithm (`KeyProtector`).
const SUN_KEY_PROTECTOR: &str = "1.3.6.1.4.1.42.2.17.1.1";
/// JCEKS's key protection: PBEWithMD5AndTripleDES.
const PBE_MD5_TRIPLE_DES: &str = "1.3.6.1.4.1.42.2.19.1";
const DIGEST_LEN: usize = 20;
/// Entries at most: the count comes from the file, and nothing is
/// allocated for it before the entries are read.
const MAX_ENTRIES: u32 = 100_000;

/// Reads the store in `data`; `store_password` None: not given, so the
/// integrity check is skipped (as Java does for a trust store without
/// `ssl.truststore.password`).
pub fn read(data: &[u8], store_password: Option<&str>, key_password: &str) -> Result<Entries, String> {
    let jceks = data.starts_with(&JCEKS_MAGIC);
    let (kind, magic) = if jceks { ("JCEKS", JCEKS_MAGIC) } else { ("JKS", MAGIC) };
    let body_len = data.len().checked_sub(DIGEST_LEN).ok_or(format!("truncated {kind} file"))?;
    let (body, stored_digest) = data.split_at(body_len);
    if let Some(password) = store_password {
        let mut ctx = digest::Context::new(&digest::SHA1_FOR_LEGACY_USE_ONLY);
        ctx.update(&utf16_be(password));
        ctx.update(b"Mighty Aphrodite");
        ctx.update(body);
        if ctx.finish().as_ref() != stored_digest {
            return Err("the integrity check failed: wrong password, or a damaged file".into());
        }
    }
    let mut r = Reader(body);
    if r.take(4)? != magic {
        return Err("not a JKS file".into());
    }
    let version = r.u32()?;
    if version != 1 && version != 2 {
        return Err(format!("{kind} version {version} is not known"));
    }
    let count = r.u32()?;
    if count > MAX_ENTRIES {
        return Err(format!("{count} entries: too many"));
    }
    let mut out = Entries::default();
    for _ in 0..count {
        let tag = r.u32()?;
        let alias = String::from_utf8_lossy(r.utf()?).into_owned();
        r.take(8)?; // creation date
        match tag {
            1 => {
                let protected = r.bytes()?;
                let chain_len = r.u32()?;
                let mut chain = Vec::new();
                for _ in 0..chain_len {
                    chain.push(r.certificate(version)?);
                }
                let recover = if jceks { recover_jceks_key } else { recover_key };
                let key = recover(protected, key_password).map_err(|e| {
                    format!("the private key {alias:?}: {e} (the key password; Kafka: ssl.key.password)")
                })?;
                out.keys.push(KeyEntry { alias, key, chain });
            }
            2 => out.trusted.push(r.certificate(version)?),
            3 => return Err(format!("entry {alias:?} is a secret key; a {kind} store for TLS holds none")),
            other => return Err(format!("unknown {kind} entry type {other}")),
        }
    }
    if !r.0.is_empty() {
        return Err(format!("bytes after the last {kind} entry"));
    }
    // Java trusts the certificate of each private key entry too.
    let leaves: Vec<Vec<u8>> = out.keys.iter().filter_map(|k| k.chain.first().cloned()).collect();
    out.trusted.extend(leaves);
    Ok(out)
}

/// Undoes Sun's `KeyProtector`: an EncryptedPrivateKeyInfo whose data is a
/// 20-byte salt, the key XORed with a keystream of chained SHA-1 digests
/// of the password, and SHA-1 of password and key as a check.
fn recover_key(encrypted_info: &[u8], password: &str) -> Result<Vec<u8>, String> {
    use super::ber::Ber;
    let mut info = Ber::new(encrypted_info).sequence("EncryptedPrivateKeyInfo")?;
    let algorithm = info.sequence("key protection algorithm")?.oid("key protection algorithm")?;
    if algorithm != SUN_KEY_PROTECTOR {
        return Err(format!("key protection {algorithm} is not JKS's"));
    }
    let protected = info.octets("protected key")?;
    let key_len = protected.len().checked_sub(2 * DIGEST_LEN).ok_or("the protected key is truncated")?;
    let (salt, rest) = protected.split_at(DIGEST_LEN);
    let (encrypted, check) = rest.split_at(key_len);
    let password = utf16_be(password);
    let sha1 = &digest::SHA1_FOR_LEGACY_USE_ONLY;
    let mut block = salt.to_vec();
    let mut key = Vec::with_capacity(key_len);
    for chunk in encrypted.chunks(DIGEST_LEN) {
        let mut ctx = digest::Context::new(sha1);
        ctx.update(&password);
        ctx.update(&block);
        block = ctx.finish().as_ref().to_vec();
        key.extend(chunk.iter().zip(&block).map(|(c, k)| c ^ k));
    }
    let mut ctx = digest::Context::new(sha1);
    ctx.update(&password);
    ctx.update(&key);
    if ctx.finish().as_ref() != check {
        return Err("wrong password".into());
    }
    Ok(key)
}

/// Undoes JCEKS's `KeyProtector`: an EncryptedPrivateKeyInfo encrypted
/// with PBEWithMD5AndTripleDES under an 8-byte salt and an iteration
/// count, whose plaintext is the PKCS#8 key.
fn recover_jceks_key(encrypted_info: &[u8], password: &str) -> Result<Vec<u8>, String> {
    use super::ber::Ber;
    let mut info = Ber::new(encrypted_info).sequence("EncryptedPrivateKeyInfo")?;
    let mut algorithm = info.sequence("key protection algorithm")?;
    let oid = algorithm.oid("key protection algorithm")?;
    if oid != PBE_MD5_TRIPLE_DES {
        return Err(format!("key protection {oid} is not JCEKS's"));
    }
    let mut parameters = algorithm.sequence("PBE parameters")?;
    let salt = parameters.octets("salt")?;
    let iterations = super::pkcs12::bounded(parameters.small_uint("iteration count")?)?;
    let salt: [u8; 8] = salt.as_ref().try_into().map_err(|_| "the salt is not 8 bytes".to_string())?;
    let encrypted = info.octets("protected key")?;
    // Java's PBE keys take printable ASCII only, a byte a character.
    if !password.bytes().all(|b| (0x20..=0x7e).contains(&b)) {
        return Err("wrong password (JCEKS passwords are printable ASCII)".into());
    }
    let derived = md5_triple_des_key(password.as_bytes(), salt, iterations);
    let (key, iv) = derived.split_at(24);
    super::pkcs12::Legacy::TripleDes.decrypt(key, iv, &encrypted).ok_or_else(|| "wrong password".to_string())
}

/// PBEWithMD5AndTripleDES's key derivation (Sun's `PBES1Core`): each salt
/// half (the first reversed when both are equal) is hashed with the
/// password, then its digest with the password, `iterations` times in
/// all; the two 16-byte digests are the 24-byte key and the 8-byte IV.
fn md5_triple_des_key(password: &[u8], mut salt: [u8; 8], iterations: u32) -> [u8; 32] {
    if salt[..4] == salt[4..] {
        salt[..4].reverse();
    }
    let mut out = [0u8; 32];
    for (half, slot) in salt.chunks(4).zip(out.chunks_mut(16)) {
        use md5::Digest;
        let mut value = half.to_vec();
        for _ in 0..iterations {
            let mut ctx = md5::Md5::new();
            ctx.update(&value);
            ctx.update(password);
            value = ctx.finalize().to_vec();
        }
        slot.copy_from_slice(&value);
    }
    out
}

/// Java's `char[]` password as the JKS digests take it.
fn utf16_be(password: &str) -> Vec<u8> {
    password.encode_utf16().flat_map(u16::to_be_bytes).collect()
}

/// Big-endian fields of a `DataInputStream`, bounds-checked.
struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        if self.0.len() < n {
            return Err("truncated JKS file".into());
        }
        let (head, tail) = self.0.split_at(n);
        self.0 = tail;
        Ok(head)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], String> {
        self.take(N)?.try_into().map_err(|_| "truncated JKS file".to_string())
    }

    fn u32(&mut self) -> Result<u32, String> {
        Ok(u32::from_be_bytes(self.array()?))
    }

    /// `readUTF`: a two-byte length and modified UTF-8.
    fn utf(&mut self) -> Result<&'a [u8], String> {
        let len = u16::from_be_bytes(self.array()?);
        self.take(usize::from(len))
    }

    /// A four-byte length and that many bytes.
    fn bytes(&mut self) -> Result<&'a [u8], String> {
        let len = self.u32()?;
        self.take(usize::try_from(len).map_err(|_| "length too large".to_string())?)
    }

    /// A certificate: its type name (version 2), then its encoding.
    fn certificate(&mut self, version: u32) -> Result<Vec<u8>, String> {
        if version == 2 {
            let kind = self.utf()?;
            if kind != b"X.509" {
                return Err(format!("certificate type {:?} is not X.509", String::from_utf8_lossy(kind)));
            }
        }
        Ok(self.bytes()?.to_vec())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A DER element.
    fn der(tag: u8, content: &[u8]) -> Vec<u8> {
        let mut out = vec![tag];
        match content.len() {
            n @ 0..=127 => out.push(n as u8),
            n => {
                let bytes: Vec<u8> = (n as u32).to_be_bytes().into_iter().skip_while(|b| *b == 0).collect();
                out.push(0x80 | bytes.len() as u8);
                out.extend(bytes);
            }
        }
        out.extend(content);
        out
    }

    /// A JCEKS store as keytool writes one, with `iterations` MD5 rounds:
    /// a private key entry (`key`, PKCS#8, and its certificate) and a
    /// trusted certificate.
    fn jceks(password: &str, key: &[u8], cert: &[u8], ca: &[u8], salt: [u8; 8], iterations: u32) -> Vec<u8> {
        use cbc::cipher::block_padding::Pkcs7;
        use cbc::cipher::{BlockEncryptMut, KeyIvInit};
        let derived = md5_triple_des_key(password.as_bytes(), salt, iterations);
        let encrypted = cbc::Encryptor::<des::TdesEde3>::new_from_slices(&derived[..24], &derived[24..])
            .unwrap()
            .encrypt_padded_vec_mut::<Pkcs7>(key);
        let oid = [0x2b, 0x06, 0x01, 0x04, 0x01, 0x2a, 0x02, 0x13, 0x01];
        let params = der(0x30, &[der(0x04, &salt), der(0x02, &iterations.to_be_bytes())].concat());
        let algorithm = der(0x30, &[der(0x06, &oid), params].concat());
        let info = der(0x30, &[algorithm, der(0x04, &encrypted)].concat());
        let utf = |s: &str| [(s.len() as u16).to_be_bytes().to_vec(), s.as_bytes().to_vec()].concat();
        let sized = |b: &[u8]| [(b.len() as u32).to_be_bytes().to_vec(), b.to_vec()].concat();
        let mut body = JCEKS_MAGIC.to_vec();
        body.extend(2u32.to_be_bytes());
        body.extend(2u32.to_be_bytes());
        body.extend(1u32.to_be_bytes());
        body.extend(utf("server"));
        body.extend([0u8; 8]);
        body.extend(sized(&info));
        body.extend(1u32.to_be_bytes());
        body.extend(utf("X.509"));
        body.extend(sized(cert));
        body.extend(2u32.to_be_bytes());
        body.extend(utf("ca"));
        body.extend([0u8; 8]);
        body.extend(utf("X.509"));
        body.extend(sized(ca));
        let mut ctx = digest::Context::new(&digest::SHA1_FOR_LEGACY_USE_ONLY);
        ctx.update(&utf16_be(password));
        ctx.update(b"Mighty Aphrodite");
        ctx.update(&body);
        body.extend(ctx.finish().as_ref());
        body
    }

    #[test]
    fn a_jceks_store_gives_its_key_chain_and_trusted_certificates_and_survives_damage() {
        let key_pair = rcgen::KeyPair::generate().unwrap();
        let params = rcgen::CertificateParams::new(vec!["localhost".to_string()]).unwrap();
        let cert = params.self_signed(&key_pair).unwrap().der().to_vec();
        let key = key_pair.serialize_der();
        // Equal salt halves take Sun's reversal of the first.
        for salt in [[1, 2, 3, 4, 5, 6, 7, 8], [9, 8, 7, 6, 9, 8, 7, 6]] {
            let store = jceks("changeit", &key, &cert, b"ca-der", salt, 10);
            let entries = read(&store, Some("changeit"), "changeit").unwrap();
            assert_eq!(entries.keys.len(), 1);
            assert_eq!(
                (entries.keys[0].key.as_slice(), entries.keys[0].chain.as_slice()),
                (key.as_slice(), &[cert.clone()][..])
            );
            assert_eq!(entries.trusted, vec![b"ca-der".to_vec(), cert.clone()]);
            assert!(read(&store, Some("other"), "changeit").unwrap_err().contains("wrong password"));
            assert!(read(&store, None, "other").unwrap_err().contains("wrong password"));
            assert!(read(&store, None, "caf\u{e9}").unwrap_err().contains("printable ASCII"));
        }
        let store = jceks("changeit", &key, &cert, b"ca-der", [1, 2, 3, 4, 5, 6, 7, 8], 10);
        let mut seed: u64 = 0x2545_f491_4f6c_dd1d;
        for round in 0..3_000u32 {
            let mut data = store.clone();
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let at = (seed as usize) % data.len();
            match round % 3 {
                0 => data[at] ^= 1 << ((seed >> 32) % 8),
                1 => data.truncate(at),
                _ => data[at] = [0x00, 0x7f, 0x80, 0xff][((seed >> 40) % 4) as usize],
            }
            let _ = read(&data, Some("changeit"), "changeit");
            let _ = read(&data, None, "changeit");
        }
    }

    #[test]
    fn damaged_stores_are_refused_without_a_panic() {
        let mut store = MAGIC.to_vec();
        store.extend(2u32.to_be_bytes());
        store.extend(u32::MAX.to_be_bytes());
        store.extend([0u8; 20]);
        assert!(read(&store, None, "").unwrap_err().contains("too many"));
        assert!(read(&store, Some("pw"), "").unwrap_err().contains("wrong password"));
        assert!(read(&[0xfe, 0xed], None, "").is_err());
        assert!(read(&JCEKS_MAGIC, None, "").unwrap_err().contains("truncated JCEKS"));
        let mut entry = MAGIC.to_vec();
        entry.extend(2u32.to_be_bytes());
        entry.extend(1u32.to_be_bytes());
        entry.extend(1u32.to_be_bytes()); // a private key
        entry.extend([0, 1, b'a']);
        entry.extend([0u8; 8]);
        entry.extend(u32::MAX.to_be_bytes()); // claims 4 GiB of key
        entry.extend([0u8; 20]);
        assert!(read(&entry, None, "").unwrap_err().contains("truncated"));
    }
}
