//! PEM certificates and private keys, read the same way for kcoord's
//! listeners (`security.tls_*`), its own TLS client (`ssl.*`) and its
//! jwt-bearer assertions: certificate chains, and unencrypted keys (PKCS#8,
//! PKCS#1, SEC1) or PKCS#8 keys encrypted with a password (PBES2, what
//! `openssl genpkey -aes256` and `openssl pkcs8 -topk8 -v2 aes256` write;
//! Kafka: `ssl.key.password`).

use std::io::BufReader;

use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

/// The certificates of the PEM file at `path`, at least one.
pub fn read_certs(path: &str) -> Result<Vec<CertificateDer<'static>>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{path}: {e}"))?;
    parse_certs(&text).map_err(|e| format!("{path}: {e}"))
}

/// The certificates in PEM `text`, at least one.
pub fn parse_certs(text: &str) -> Result<Vec<CertificateDer<'static>>, String> {
    let certs: Vec<_> = rustls_pemfile::certs(&mut BufReader::new(text.as_bytes()))
        .collect::<Result<_, _>>()
        .map_err(|e| e.to_string())?;
    if certs.is_empty() {
        return Err("no PEM certificate found".into());
    }
    Ok(certs)
}

/// PEM `text` with each block on lines of its own: Kafka's inline PEM
/// settings (KIP-651) often arrive on one line, when a properties value
/// continued with backslashes loses its line breaks, which Kafka accepts
/// too. Text outside the blocks is dropped.
pub fn normalize(text: &str) -> String {
    const BEGIN: &str = "-----BEGIN ";
    const DASHES: &str = "-----";
    let mut out = String::new();
    let mut rest = text;
    while let Some(at) = rest.find(BEGIN) {
        let after = rest.get(at + BEGIN.len()..).unwrap_or_default();
        let Some(label_len) = after.find(DASHES) else { break };
        let label = after.get(..label_len).unwrap_or_default();
        let body_and_more = after.get(label_len + DASHES.len()..).unwrap_or_default();
        let end = format!("-----END {label}-----");
        let Some(body_len) = body_and_more.find(&end) else { break };
        let body: String =
            body_and_more.get(..body_len).unwrap_or_default().chars().filter(|c| !c.is_whitespace()).collect();
        out.push_str(&format!("{BEGIN}{label}{DASHES}\n"));
        for line in body.as_bytes().chunks(64) {
            out.push_str(&String::from_utf8_lossy(line));
            out.push('\n');
        }
        out.push_str(&end);
        out.push('\n');
        rest = body_and_more.get(body_len + end.len()..).unwrap_or_default();
    }
    out
}

/// The private key of the PEM file at `path`; `password` decrypts an
/// encrypted one (empty: none given).
pub fn read_private_key(path: &str, password: &str) -> Result<PrivateKeyDer<'static>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{path}: {e}"))?;
    parse_private_key(&text, password).map_err(|e| format!("{path}: {e}"))
}

/// The private key in PEM `text`.
pub fn parse_private_key(text: &str, password: &str) -> Result<PrivateKeyDer<'static>, String> {
    if text.contains("Proc-Type: 4,ENCRYPTED") {
        return Err("a key in OpenSSL's legacy encrypted form: convert it with \
                    `openssl pkcs8 -topk8 -v2 aes256` (encrypted) or `-nocrypt`"
            .into());
    }
    if let Some(start) = text.find("-----BEGIN ENCRYPTED PRIVATE KEY-----") {
        if password.is_empty() {
            return Err("the private key is encrypted and no password is given (Kafka: ssl.key.password)".into());
        }
        use pkcs8::der::Decode;
        let (label, der) = pkcs8::der::pem::decode_vec(text.as_bytes().get(start..).unwrap_or_default())
            .map_err(|e| format!("the encrypted private key is not valid PEM: {e}"))?;
        if label != "ENCRYPTED PRIVATE KEY" {
            return Err(format!("unexpected PEM label {label:?}"));
        }
        let encrypted = pkcs8::EncryptedPrivateKeyInfo::from_der(&der)
            .map_err(|e| format!("the encrypted private key is not PKCS#8: {e}"))?;
        let plain = encrypted.decrypt(password).map_err(|_| {
            "the private key could not be decrypted: wrong password, or an encryption other than PBES2 \
             (PBKDF2 or scrypt, AES-CBC)"
                .to_string()
        })?;
        return Ok(PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(plain.as_bytes().to_vec())));
    }
    rustls_pemfile::private_key(&mut BufReader::new(text.as_bytes()))
        .map_err(|e| e.to_string())?
        .ok_or_else(|| "no PEM private key found".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fresh P-256 key, encrypted as `openssl pkcs8 -topk8 -v2 aes256`
    /// encrypts (PBES2, PBKDF2-HMAC-SHA256, AES-256-CBC) with `password`.
    fn encrypted_key(password: &str) -> String {
        use pkcs8::der::EncodePem;
        let rng = ring::rand::SystemRandom::new();
        let pkcs8 =
            ring::signature::EcdsaKeyPair::generate_pkcs8(&ring::signature::ECDSA_P256_SHA256_FIXED_SIGNING, &rng)
                .unwrap();
        let params = pkcs8::pkcs5::pbes2::Parameters::pbkdf2_sha256_aes256cbc(2048, &[7u8; 16], &[9u8; 16]).unwrap();
        let info = pkcs8::PrivateKeyInfo::try_from(pkcs8.as_ref()).unwrap();
        let encrypted = info.encrypt_with_params(params, password).unwrap();
        let der = encrypted.as_bytes().to_vec();
        pkcs8::EncryptedPrivateKeyInfo::try_from(der.as_slice()).unwrap().to_pem(pkcs8::LineEnding::LF).unwrap()
    }

    #[test]
    fn an_encrypted_pkcs8_key_opens_with_its_password_only() {
        let pem = encrypted_key("kcoord-test");
        assert!(pem.starts_with("-----BEGIN ENCRYPTED PRIVATE KEY-----"), "{pem}");
        let key = parse_private_key(&pem, "kcoord-test").unwrap();
        assert!(matches!(key, PrivateKeyDer::Pkcs8(_)));
        assert!(parse_private_key(&pem, "wrong").unwrap_err().contains("wrong password"));
        assert!(parse_private_key(&pem, "").unwrap_err().contains("ssl.key.password"));
    }

    #[test]
    fn pem_on_one_line_reads_as_pem_on_many() {
        let pem = encrypted_key("pw");
        let one_line = pem.replace('\n', " ");
        assert_ne!(one_line, pem);
        assert_eq!(normalize(&one_line), normalize(&pem));
        assert!(parse_private_key(&normalize(&one_line), "pw").is_ok());
        assert_eq!(normalize("no pem here"), "");
    }

    #[test]
    fn legacy_encrypted_keys_are_refused_with_the_conversion() {
        let legacy = "-----BEGIN RSA PRIVATE KEY-----\nProc-Type: 4,ENCRYPTED\nDEK-Info: AES-256-CBC,00\n\nAAAA\n-----END RSA PRIVATE KEY-----\n";
        assert!(parse_private_key(legacy, "pw").unwrap_err().contains("openssl pkcs8"));
    }
}
