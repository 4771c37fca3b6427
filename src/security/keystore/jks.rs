//! Java's JKS key stores (`keytool -storetype JKS`, Java 8's default), the
//! format of `sun.security.provider.JavaKeyStore`:
//!
//! - magic `FEEDFEED`, version 1 or 2, an entry count, then entries: tag 1,
//!   a private key (alias, date, the key protected by Sun's SHA-1 keystream,
//!   its certificate chain), or tag 2, a trusted certificate;
//! - last, SHA-1 over the password (UTF-16BE), "Mighty Aphrodite" and every
//!   byte before it: the store's integrity check.
//!
//! JCEKS stores (`CECECECE`) are refused with the conversion command.

use ring::digest;

use super::{Entries, KeyEntry};

pub const MAGIC: [u8; 4] = [0xfe, 0xed, 0xfe, 0xed];
pub const JCEKS_MAGIC: [u8; 4] = [0xce, 0xce, 0xce, 0xce];
/// Sun's key protection algorithm (`KeyProtector`).
const SUN_KEY_PROTECTOR: &str = "1.3.6.1.4.1.42.2.17.1.1";
const DIGEST_LEN: usize = 20;
/// Entries at most: the count comes from the file, and nothing is
/// allocated for it before the entries are read.
const MAX_ENTRIES: u32 = 100_000;

/// Reads the store in `data`; `store_password` None: not given, so the
/// integrity check is skipped (as Java does for a trust store without
/// `ssl.truststore.password`).
pub fn read(data: &[u8], store_password: Option<&str>, key_password: &str) -> Result<Entries, String> {
    if data.starts_with(&JCEKS_MAGIC) {
        return Err("a JCEKS store (not supported): convert it with `keytool -importkeystore -srcstoretype JCEKS \
                    -deststoretype PKCS12`"
            .into());
    }
    let body_len = data.len().checked_sub(DIGEST_LEN).ok_or("truncated JKS file")?;
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
    if r.take(4)? != MAGIC {
        return Err("not a JKS file".into());
    }
    let version = r.u32()?;
    if version != 1 && version != 2 {
        return Err(format!("JKS version {version} is not known"));
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
                let key = recover_key(protected, key_password).map_err(|e| {
                    format!("the private key {alias:?}: {e} (the key password; Kafka: ssl.key.password)")
                })?;
                out.keys.push(KeyEntry { alias, key, chain });
            }
            2 => out.trusted.push(r.certificate(version)?),
            3 => return Err(format!("entry {alias:?} is a secret key; a JKS store for TLS holds none")),
            other => return Err(format!("unknown JKS entry type {other}")),
        }
    }
    if !r.0.is_empty() {
        return Err("bytes after the last JKS entry".into());
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

    #[test]
    fn damaged_stores_are_refused_without_a_panic() {
        let mut store = MAGIC.to_vec();
        store.extend(2u32.to_be_bytes());
        store.extend(u32::MAX.to_be_bytes());
        store.extend([0u8; 20]);
        assert!(read(&store, None, "").unwrap_err().contains("too many"));
        assert!(read(&store, Some("pw"), "").unwrap_err().contains("wrong password"));
        assert!(read(&[0xfe, 0xed], None, "").is_err());
        assert!(read(&JCEKS_MAGIC, None, "").unwrap_err().contains("keytool -importkeystore"));
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
