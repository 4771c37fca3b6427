//! PKCS#12 key stores (RFC 7292): what `openssl pkcs12 -export` and Java's
//! keytool (the default store type since Java 9) write.
//!
//! Read: the integrity MAC (HMAC with SHA-1, SHA-256, SHA-384 or SHA-512,
//! keyed by the PKCS#12 key derivation), unencrypted and password-encrypted
//! contents, private keys (plain or shrouded) and X.509 certificates.
//! Encryptions: PBES2 (PBKDF2 with AES-CBC: OpenSSL 3 and Java 12+), and the
//! legacy PKCS#12 ones older stores use (SHA-1 with 3DES or RC2: OpenSSL 1.x
//! and Java 8). Public-key-encrypted contents and PBMAC1 are refused.

use std::borrow::Cow;

use ring::{digest, hmac};

use super::ber::{self, Ber};
use super::{Entries, KeyEntry};

const DATA: &str = "1.2.840.113549.1.7.1";
const ENCRYPTED_DATA: &str = "1.2.840.113549.1.7.6";
const ENVELOPED_DATA: &str = "1.2.840.113549.1.7.3";
const KEY_BAG: &str = "1.2.840.113549.1.12.10.1.1";
const SHROUDED_KEY_BAG: &str = "1.2.840.113549.1.12.10.1.2";
const CERT_BAG: &str = "1.2.840.113549.1.12.10.1.3";
const SAFE_CONTENTS_BAG: &str = "1.2.840.113549.1.12.10.1.6";
const X509_CERTIFICATE: &str = "1.2.840.113549.1.9.22.1";
const FRIENDLY_NAME: &str = "1.2.840.113549.1.9.20";
const LOCAL_KEY_ID: &str = "1.2.840.113549.1.9.21";
/// Java's mark of a trusted certificate entry ("trustedKeyUsage").
const JAVA_TRUSTED: &str = "2.16.840.1.113894.746875.1.1";
const PBES2: &str = "1.2.840.113549.1.5.13";
const PBMAC1: &str = "1.2.840.113549.1.5.14";
const PBE_SHA1_3DES: &str = "1.2.840.113549.1.12.1.3";
const PBE_SHA1_2DES: &str = "1.2.840.113549.1.12.1.4";
const PBE_SHA1_RC2_128: &str = "1.2.840.113549.1.12.1.5";
const PBE_SHA1_RC2_40: &str = "1.2.840.113549.1.12.1.6";
/// Java refuses larger iteration counts too (a file could otherwise stall
/// start-up for hours).
const MAX_ITERATIONS: u64 = 5_000_000;
/// Safe contents nested in safe contents, at most.
const MAX_BAG_NESTING: usize = 4;

/// The passwords a store is opened with.
pub struct Passwords<'p> {
    /// Checks the MAC and decrypts the certificates; None: not given, so
    /// the MAC is not checked (as Java does for a trust store without
    /// `ssl.truststore.password`).
    pub store: Option<&'p str>,
    /// Decrypts the private keys.
    pub key: &'p str,
}

/// Reads the store in `data`.
pub fn read(data: &[u8], passwords: &Passwords<'_>) -> Result<Entries, String> {
    let mut pfx = Ber::new(data).sequence("PFX")?;
    if pfx.small_uint("PFX version")? != 3 {
        return Err("not a PKCS#12 version 3 file".into());
    }
    let mut auth_safe = pfx.sequence("authSafe")?;
    if auth_safe.oid("authSafe content type")? != DATA {
        return Err("the store is signed with a public key (not supported); use a password-protected store".into());
    }
    let contents = auth_safe.explicit(0, "authSafe content")?.octets("authSafe")?;
    // A store without a MAC (Java 18's password-less trust stores) has
    // nothing to check.
    if let (false, Some(password)) = (pfx.is_empty(), passwords.store) {
        check_mac(&mut pfx.sequence("macData")?, &contents, password)?;
    }
    let mut bags = Vec::new();
    let mut infos = Ber::new(&contents).sequence("AuthenticatedSafe")?;
    while !infos.is_empty() {
        let mut info = infos.sequence("ContentInfo")?;
        let safe_contents: Cow<'_, [u8]> = match info.oid("ContentInfo type")?.as_str() {
            DATA => info.explicit(0, "data")?.octets("data")?,
            ENCRYPTED_DATA => {
                let mut encrypted = info.explicit(0, "encryptedData")?.sequence("EncryptedData")?;
                encrypted.small_uint("EncryptedData version")?;
                let mut content_info = encrypted.sequence("EncryptedContentInfo")?;
                content_info.oid("encrypted content type")?;
                let algorithm = content_info.element()?;
                let ciphertext = ber::octets_of(&content_info.element()?, 0x80, "encryptedContent")?;
                let password = passwords.store.unwrap_or_default();
                Cow::Owned(decrypt(algorithm.encoded, &ciphertext, password).map_err(|e| {
                    if passwords.store.is_none() {
                        "its certificates are encrypted: the trust store's password is needed".to_string()
                    } else {
                        e
                    }
                })?)
            }
            ENVELOPED_DATA => return Err("contents encrypted with a public key are not supported".into()),
            other => return Err(format!("unknown content type {other}")),
        };
        collect_bags(&safe_contents, 0, &mut bags)?;
    }
    entries(bags, passwords.key)
}

/// One safe bag of interest.
enum Bag {
    Key {
        key: Vec<u8>,
        attributes: Attributes,
    },
    /// A key still encrypted: the AlgorithmIdentifier and the ciphertext.
    ShroudedKey {
        algorithm: Vec<u8>,
        ciphertext: Vec<u8>,
        attributes: Attributes,
    },
    Cert {
        der: Vec<u8>,
        attributes: Attributes,
    },
}

#[derive(Default)]
struct Attributes {
    alias: Option<String>,
    local_key_id: Option<Vec<u8>>,
    java_trusted: bool,
}

fn collect_bags(safe_contents: &[u8], nesting: usize, out: &mut Vec<Bag>) -> Result<(), String> {
    if nesting > MAX_BAG_NESTING {
        return Err("safe contents nested too deeply".into());
    }
    let mut bags = Ber::new(safe_contents).sequence("SafeContents")?;
    while !bags.is_empty() {
        let mut bag = bags.sequence("SafeBag")?;
        let kind = bag.oid("bag type")?;
        let mut value = bag.explicit(0, "bag value")?;
        let attributes = if bag.is_empty() { Attributes::default() } else { attributes(&mut bag)? };
        match kind.as_str() {
            KEY_BAG => out.push(Bag::Key { key: value.element()?.encoded.to_vec(), attributes }),
            SHROUDED_KEY_BAG => {
                let mut info = value.sequence("EncryptedPrivateKeyInfo")?;
                let algorithm = info.element()?.encoded.to_vec();
                let ciphertext = info.octets("encrypted key")?.into_owned();
                out.push(Bag::ShroudedKey { algorithm, ciphertext, attributes });
            }
            CERT_BAG => {
                let mut cert_bag = value.sequence("CertBag")?;
                if cert_bag.oid("certificate type")? == X509_CERTIFICATE {
                    let der = cert_bag.explicit(0, "certificate")?.octets("certificate")?.into_owned();
                    out.push(Bag::Cert { der, attributes });
                }
            }
            SAFE_CONTENTS_BAG => collect_bags(value.element()?.encoded, nesting + 1, out)?,
            _ => {} // CRLs, secret keys: not for TLS
        }
    }
    Ok(())
}

fn attributes(bag: &mut Ber<'_>) -> Result<Attributes, String> {
    let mut out = Attributes::default();
    let mut set = bag.expect(ber::SET, "bag attributes")?.children();
    while !set.is_empty() {
        let mut attribute = set.sequence("attribute")?;
        let kind = attribute.oid("attribute type")?;
        let mut values = attribute.expect(ber::SET, "attribute values")?.children();
        match kind.as_str() {
            FRIENDLY_NAME => {
                let bmp = values.expect(ber::BMP_STRING, "friendlyName")?.content;
                let units: Vec<u16> =
                    bmp.chunks_exact(2).filter_map(|c| Some(u16::from_be_bytes(c.try_into().ok()?))).collect();
                out.alias = Some(String::from_utf16_lossy(&units));
            }
            LOCAL_KEY_ID => out.local_key_id = Some(values.octets("localKeyId")?.into_owned()),
            JAVA_TRUSTED => out.java_trusted = true,
            _ => {}
        }
    }
    Ok(out)
}

/// Pairs keys with their certificates: a key's chain starts at the
/// certificate with the same localKeyId. Trusted certificates are those Java
/// marked as trusted; in a store with no such marks (OpenSSL's), every
/// certificate.
fn entries(bags: Vec<Bag>, key_password: &str) -> Result<Entries, String> {
    let mut certs = Vec::new();
    let mut keys = Vec::new();
    for bag in bags {
        match bag {
            Bag::Cert { der, attributes } => certs.push((der, attributes)),
            Bag::Key { key, attributes } => keys.push((key, attributes)),
            Bag::ShroudedKey { algorithm, ciphertext, attributes } => {
                let key = decrypt(&algorithm, &ciphertext, key_password)
                    .map_err(|e| format!("its private key: {e} (the key password; Kafka: ssl.key.password)"))?;
                keys.push((key, attributes));
            }
        }
    }
    let any_marked = certs.iter().any(|(_, a)| a.java_trusted);
    let trusted = certs.iter().filter(|(_, a)| a.java_trusted || !any_marked).map(|(der, _)| der.clone()).collect();
    let pool: Vec<Vec<u8>> = certs.iter().map(|(der, _)| der.clone()).collect();
    let mut out = Entries { keys: Vec::new(), trusted };
    for (key, attributes) in keys {
        let leaf = match &attributes.local_key_id {
            Some(id) => certs.iter().find(|(_, a)| a.local_key_id.as_ref() == Some(id)).map(|(der, _)| der.clone()),
            None => None,
        };
        let leaf = match leaf {
            Some(leaf) => leaf,
            None if certs.len() == 1 => pool.first().cloned().unwrap_or_default(),
            None => super::leaf_of(&pool).ok_or("a private key whose certificate cannot be told (no localKeyId)")?,
        };
        let chain = super::chain(leaf, &pool);
        out.keys.push(KeyEntry { alias: attributes.alias.unwrap_or_default(), key, chain });
    }
    Ok(out)
}

/// The password as PKCS#12's key derivation takes it: UTF-16 big-endian
/// with a terminating zero.
fn bmp_password(password: &str) -> Vec<u8> {
    password.encode_utf16().chain(std::iter::once(0)).flat_map(u16::to_be_bytes).collect()
}

fn check_mac(mac_data: &mut Ber<'_>, contents: &[u8], password: &str) -> Result<(), String> {
    let mut digest_info = mac_data.sequence("DigestInfo")?;
    let mut algorithm = digest_info.sequence("digest algorithm")?;
    let oid = algorithm.oid("digest algorithm")?;
    let expected = digest_info.octets("MAC")?;
    let salt = mac_data.octets("MAC salt")?;
    let iterations = if mac_data.is_empty() { 1 } else { mac_data.small_uint("MAC iterations")? };
    if oid == PBMAC1 {
        return Err("the integrity MAC is PBMAC1 (not supported); write the store with an HMAC MAC".into());
    }
    let (hash, mac) = hash_by_oid(&oid).ok_or_else(|| format!("unsupported MAC digest {oid}"))?;
    let key = kdf(hash, &bmp_password(password), &salt, bounded(iterations)?, 3, hash.output_len());
    hmac::verify(&hmac::Key::new(mac, &key), contents, &expected)
        .map_err(|_| "the integrity check failed: wrong password, or a damaged file".to_string())
}

fn hash_by_oid(oid: &str) -> Option<(&'static digest::Algorithm, hmac::Algorithm)> {
    Some(match oid {
        "1.3.14.3.2.26" => (&digest::SHA1_FOR_LEGACY_USE_ONLY, hmac::HMAC_SHA1_FOR_LEGACY_USE_ONLY),
        "2.16.840.1.101.3.4.2.1" => (&digest::SHA256, hmac::HMAC_SHA256),
        "2.16.840.1.101.3.4.2.2" => (&digest::SHA384, hmac::HMAC_SHA384),
        "2.16.840.1.101.3.4.2.3" => (&digest::SHA512, hmac::HMAC_SHA512),
        _ => return None,
    })
}

pub(super) fn bounded(iterations: u64) -> Result<u32, String> {
    if iterations == 0 || iterations > MAX_ITERATIONS {
        return Err(format!("iteration count {iterations} is out of range (1 to {MAX_ITERATIONS})"));
    }
    u32::try_from(iterations).map_err(|_| "iteration count out of range".to_string())
}

/// PKCS#12's key derivation (RFC 7292, appendix B.2): `n` bytes for
/// purpose `id` (1: key, 2: IV, 3: MAC key).
fn kdf(hash: &'static digest::Algorithm, password: &[u8], salt: &[u8], iterations: u32, id: u8, n: usize) -> Vec<u8> {
    let v = hash.block_len();
    let fill = |x: &[u8]| -> Vec<u8> { x.iter().copied().cycle().take(v * x.len().div_ceil(v)).collect() };
    let mut i = fill(salt);
    i.extend(fill(password));
    let d = vec![id; v];
    let mut out = Vec::with_capacity(n);
    loop {
        let mut ctx = digest::Context::new(hash);
        ctx.update(&d);
        ctx.update(&i);
        let mut a = ctx.finish();
        for _ in 1..iterations {
            a = digest::digest(hash, a.as_ref());
        }
        out.extend(a.as_ref().iter().take(n - out.len()));
        if out.len() >= n {
            return out;
        }
        // I_j = (I_j + B + 1) mod 2^v for each v-byte block, B being A
        // repeated to v bytes.
        let b: Vec<u8> = a.as_ref().iter().copied().cycle().take(v).collect();
        for block in i.chunks_mut(v) {
            let mut carry = 1u16;
            for (x, y) in block.iter_mut().rev().zip(b.iter().rev()) {
                let sum = u16::from(*x) + u16::from(*y) + carry;
                *x = sum as u8;
                carry = sum >> 8;
            }
        }
    }
}

/// Decrypts `ciphertext` with the password-based encryption
/// `algorithm` (a DER AlgorithmIdentifier).
fn decrypt(algorithm: &[u8], ciphertext: &[u8], password: &str) -> Result<Vec<u8>, String> {
    let mut id = Ber::new(algorithm).sequence("encryption algorithm")?;
    let oid = id.oid("encryption algorithm")?;
    if oid == PBES2 {
        use pkcs8::der::Decode;
        let scheme = pkcs8::pkcs5::EncryptionScheme::from_der(algorithm)
            .map_err(|e| format!("unsupported PBES2 parameters: {e}"))?;
        if let Some(count) = scheme.pbes2().and_then(|p| p.kdf.pbkdf2()).map(|p| p.iteration_count) {
            bounded(u64::from(count))?;
        }
        return scheme.decrypt(password.as_bytes(), ciphertext).map_err(|_| "wrong password".to_string());
    }
    let (key_len, cipher) = match oid.as_str() {
        PBE_SHA1_3DES => (24, Legacy::TripleDes),
        PBE_SHA1_2DES => (16, Legacy::TwoKeyDes),
        PBE_SHA1_RC2_128 => (16, Legacy::Rc2(128)),
        PBE_SHA1_RC2_40 => (5, Legacy::Rc2(40)),
        other => return Err(format!("unsupported encryption {other}")),
    };
    let mut params = id.sequence("PBE parameters")?;
    let salt = params.octets("PBE salt")?;
    let iterations = bounded(params.small_uint("PBE iterations")?)?;
    let sha1 = &digest::SHA1_FOR_LEGACY_USE_ONLY;
    let password = bmp_password(password);
    let key = kdf(sha1, &password, &salt, iterations, 1, key_len);
    let iv = kdf(sha1, &password, &salt, iterations, 2, 8);
    cipher.decrypt(&key, &iv, ciphertext).ok_or_else(|| "wrong password".to_string())
}

/// The legacy PKCS#12 ciphers (all CBC with PKCS#7 padding, 8-byte blocks).
pub(super) enum Legacy {
    TripleDes,
    TwoKeyDes,
    /// RC2 with this many effective key bits.
    Rc2(usize),
}

impl Legacy {
    pub(super) fn decrypt(&self, key: &[u8], iv: &[u8], ciphertext: &[u8]) -> Option<Vec<u8>> {
        use cbc::cipher::block_padding::Pkcs7;
        use cbc::cipher::{BlockDecryptMut, InnerIvInit, KeyIvInit};
        match self {
            Legacy::TripleDes => cbc::Decryptor::<des::TdesEde3>::new_from_slices(key, iv)
                .ok()?
                .decrypt_padded_vec_mut::<Pkcs7>(ciphertext)
                .ok(),
            Legacy::TwoKeyDes => cbc::Decryptor::<des::TdesEde2>::new_from_slices(key, iv)
                .ok()?
                .decrypt_padded_vec_mut::<Pkcs7>(ciphertext)
                .ok(),
            Legacy::Rc2(bits) => cbc::Decryptor::inner_iv_slice_init(rc2::Rc2::new_with_eff_key_len(key, *bits), iv)
                .ok()?
                .decrypt_padded_vec_mut::<Pkcs7>(ciphertext)
                .ok(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Values from OpenSSL (`openssl kdf ... PKCS12KDF`, the password
    /// "smeg" as BMPString, salt 0A58CF64530D823F).
    #[test]
    fn the_key_derivation_matches_openssl() {
        let hex = |s: &str| {
            (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect::<Vec<u8>>()
        };
        let salt = hex("0A58CF64530D823F");
        let password = bmp_password("smeg");
        let sha1 = &digest::SHA1_FOR_LEGACY_USE_ONLY;
        assert_eq!(kdf(sha1, &password, &salt, 1, 1, 24), hex("8AAAE6297B6CB04642AB5B077851284EB7128F1A2A7FBCA3"));
        assert_eq!(kdf(sha1, &password, &salt, 1, 2, 8), hex("79993DFE048D3B76"));
        assert_eq!(
            kdf(&digest::SHA256, &password, &salt, 1000, 3, 32),
            hex("35AC16A454D608FB10C8D7C6338CA85818587AED0FF771FD265957E412C2C03C")
        );
    }

    #[test]
    fn garbage_is_refused_without_a_panic() {
        let passwords = Passwords { store: Some("pw"), key: "pw" };
        for data in [&b""[..], b"\x30\x03\x02\x01\x03", b"\x30\x80\x02\x01\x03\x30\x80", &[0xff; 64]] {
            assert!(read(data, &passwords).is_err());
        }
    }
}
