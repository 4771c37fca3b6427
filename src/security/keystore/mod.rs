//! Key stores in Java's formats, so that a Kafka deployment's
//! `ssl.keystore.*` and `ssl.truststore.*` files work as they are: PKCS#12
//! (keytool's default since Java 9, `openssl pkcs12 -export`), JKS, JCEKS,
//! and Kafka's PEM store type (one PEM file with the key and its chain).
//!
//! As Java does with `keystore.type.compat`, the format is told from the
//! file's content, so a PKCS#12 file named as JKS (or the other way round)
//! still loads; the configured type must only be one Kafka knows.
//!
//! A key store must hold exactly one private key: kcoord presents that key
//! and its chain. A trust store's certificates are the roots peers must
//! chain to: JKS trusted-certificate entries (and, as in Java, each key
//! entry's own certificate), PKCS#12 certificates Java marked as trusted,
//! or, in a store without such marks (OpenSSL's), every certificate.

pub mod ber;
mod jks;
mod pkcs12;

use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

/// A store file and how it opens (Kafka: `ssl.keystore.location`,
/// `ssl.keystore.type`, `ssl.keystore.password`, and the same for the trust
/// store).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StoreFile {
    pub location: String,
    /// JKS, JCEKS, PKCS12 or PEM, any case; empty: JKS, Kafka's default.
    pub kind: String,
    pub password: String,
}

/// A certificate chain (end entity first) and its private key.
#[derive(Debug)]
pub struct Identity {
    pub chain: Vec<CertificateDer<'static>>,
    pub key: PrivateKeyDer<'static>,
}

/// What a store holds, whatever its format.
#[derive(Debug, Default)]
pub struct Entries {
    pub keys: Vec<KeyEntry>,
    /// DER certificates a trust store trusts.
    pub trusted: Vec<Vec<u8>>,
}

/// A private key entry.
#[derive(Debug)]
pub struct KeyEntry {
    pub alias: String,
    /// PKCS#8 PrivateKeyInfo, DER.
    pub key: Vec<u8>,
    /// DER certificates, end entity first.
    pub chain: Vec<Vec<u8>>,
}

/// The formats, as told from a file's first bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Format {
    Jks,
    Pkcs12,
    Pem,
}

/// Whether `kind` names a store type kcoord reads.
pub fn check_kind(kind: &str) -> Result<(), String> {
    match kind.to_ascii_uppercase().as_str() {
        "" | "JKS" | "JCEKS" | "PKCS12" | "PEM" => Ok(()),
        other => Err(format!("store type {other:?} is not supported (JKS, JCEKS, PKCS12 or PEM)")),
    }
}

fn format_of(data: &[u8]) -> Format {
    if data.starts_with(&jks::MAGIC) || data.starts_with(&jks::JCEKS_MAGIC) {
        Format::Jks
    } else if data.first() == Some(&ber::SEQUENCE) {
        Format::Pkcs12
    } else {
        Format::Pem
    }
}

/// Reads a store's entries from `data`. `store_password` None: not given
/// (integrity unchecked); `key_password` decrypts private keys.
pub fn parse(data: &[u8], store_password: Option<&str>, key_password: &str) -> Result<Entries, String> {
    match format_of(data) {
        Format::Jks => jks::read(data, store_password, key_password),
        Format::Pkcs12 => pkcs12::read(data, &pkcs12::Passwords { store: store_password, key: key_password }),
        Format::Pem => {
            let text = std::str::from_utf8(data).map_err(|_| "neither JKS, PKCS#12 nor PEM".to_string())?;
            let certs: Vec<Vec<u8>> = super::pem::parse_certs(text)?.iter().map(|c| c.to_vec()).collect();
            let key = if text.contains("PRIVATE KEY-----") {
                let key = super::pem::parse_private_key(text, key_password)?;
                vec![KeyEntry { alias: String::new(), key: pkcs8_of(key)?, chain: certs.clone() }]
            } else {
                Vec::new()
            };
            Ok(Entries { keys: key, trusted: certs })
        }
    }
}

/// Rustls takes PKCS#1 and SEC1 keys too; stores hold PKCS#8 only, so a
/// PEM store's key is kept in whichever form it came.
fn pkcs8_of(key: PrivateKeyDer<'static>) -> Result<Vec<u8>, String> {
    match key {
        PrivateKeyDer::Pkcs8(k) => Ok(k.secret_pkcs8_der().to_vec()),
        _ => Err("a PEM store's private key must be PKCS#8 (`openssl pkcs8 -topk8`)".into()),
    }
}

/// The private key of a key store and its chain. `key_password` empty: the
/// store's password, as Kafka does when `ssl.key.password` is not set.
pub fn read_identity(store: &StoreFile, key_password: &str) -> Result<Identity, String> {
    let context = |e: String| format!("{}: {e}", store.location);
    check_kind(&store.kind).map_err(context)?;
    let data = std::fs::read(&store.location).map_err(|e| context(e.to_string()))?;
    let key_password = if key_password.is_empty() { &store.password } else { key_password };
    let mut entries = parse(&data, Some(&store.password), key_password).map_err(context)?;
    let entry = match entries.keys.len() {
        1 => entries.keys.remove(0),
        0 => return Err(context("the key store holds no private key".into())),
        n => {
            let aliases: Vec<&str> = entries.keys.iter().map(|k| k.alias.as_str()).collect();
            return Err(context(format!("the key store holds {n} private keys ({aliases:?}); keep one")));
        }
    };
    if entry.chain.is_empty() {
        return Err(context(format!("the private key {:?} has no certificate", entry.alias)));
    }
    Ok(Identity {
        chain: entry.chain.into_iter().map(CertificateDer::from).collect(),
        key: PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(entry.key)),
    })
}

/// The certificates a trust store trusts, at least one. Without a
/// password its integrity is not checked, as Java does.
pub fn read_trusted(store: &StoreFile) -> Result<Vec<CertificateDer<'static>>, String> {
    let context = |e: String| format!("{}: {e}", store.location);
    check_kind(&store.kind).map_err(context)?;
    let data = std::fs::read(&store.location).map_err(|e| context(e.to_string()))?;
    let password = Some(store.password.as_str()).filter(|p| !p.is_empty());
    let entries = parse(&data, password, &store.password).map_err(context)?;
    if entries.trusted.is_empty() {
        return Err(context("the trust store holds no certificate".into()));
    }
    Ok(entries.trusted.into_iter().map(CertificateDer::from).collect())
}

/// Where a TLS identity (certificate chain and key) comes from. Which
/// settings may go together is checked where they are named (configuration
/// validation, the client settings).
#[derive(Debug, Clone, Copy)]
pub enum IdentitySource<'a> {
    /// PEM files (`security.tls_certificate` and `tls_private_key`;
    /// `ssl.certificate.location` and `ssl.key.location`).
    Files { certificate: &'a str, private_key: &'a str },
    /// A key store (`security.tls_keystore`, `ssl.keystore.location`).
    Store(&'a StoreFile),
    /// Inline PEM (Kafka's `ssl.keystore.certificate.chain` and
    /// `ssl.keystore.key`, KIP-651), with the names of the two settings
    /// for messages.
    Inline { chain: &'a str, private_key: &'a str, names: [&'a str; 2] },
}

impl IdentitySource<'_> {
    /// The chain and key; `key_password` decrypts an encrypted key (for a
    /// store, empty means the store's password, as in Kafka).
    pub fn load(&self, key_password: &str) -> Result<Identity, String> {
        use super::pem;
        match *self {
            IdentitySource::Files { certificate, private_key } => Ok(Identity {
                chain: pem::read_certs(certificate)?,
                key: pem::read_private_key(private_key, key_password)?,
            }),
            IdentitySource::Store(store) => read_identity(store, key_password),
            IdentitySource::Inline { chain, private_key, names: [chain_name, key_name] } => Ok(Identity {
                chain: pem::parse_certs(&pem::normalize(chain)).map_err(|e| format!("{chain_name}: {e}"))?,
                key: pem::parse_private_key(&pem::normalize(private_key), key_password)
                    .map_err(|e| format!("{key_name}: {e}"))?,
            }),
        }
    }
}

/// Where the CAs peers' certificates must chain to come from.
#[derive(Debug, Clone, Copy)]
pub enum TrustSource<'a> {
    /// A PEM file (`security.tls_ca`, `ssl.ca.location`).
    File(&'a str),
    /// A trust store (`security.tls_truststore`, `ssl.truststore.location`).
    Store(&'a StoreFile),
    /// Inline PEM (Kafka's `ssl.truststore.certificates`, KIP-651), and
    /// the setting's name for messages.
    Inline(&'a str, &'a str),
    /// The operating system's CAs, as Kafka clients trust by default (Java
    /// its runtime's `cacerts`, librdkafka OpenSSL's default paths); the
    /// usual `SSL_CERT_FILE` and `SSL_CERT_DIR` variables point elsewhere.
    System,
}

impl TrustSource<'_> {
    pub fn roots(&self) -> Result<rustls::RootCertStore, String> {
        let (certs, source) = match *self {
            TrustSource::File(path) => (super::pem::read_certs(path)?, path),
            TrustSource::Store(store) => (read_trusted(store)?, store.location.as_str()),
            TrustSource::Inline(text, name) => {
                (super::pem::parse_certs(&super::pem::normalize(text)).map_err(|e| format!("{name}: {e}"))?, name)
            }
            TrustSource::System => {
                let found = rustls_native_certs::load_native_certs();
                let mut roots = rustls::RootCertStore::empty();
                let (added, _) = roots.add_parsable_certificates(found.certs);
                if added == 0 {
                    let why = found.errors.first().map(|e| format!(" ({e})")).unwrap_or_default();
                    return Err(format!("no CA is configured and the system has no CA certificates{why}"));
                }
                return Ok(roots);
            }
        };
        let mut roots = rustls::RootCertStore::empty();
        for cert in certs {
            roots.add(cert).map_err(|e| format!("{source}: {e}"))?;
        }
        Ok(roots)
    }
}

/// Subject and issuer names of a DER certificate, raw.
fn names(der: &[u8]) -> Option<(Vec<u8>, Vec<u8>)> {
    let (_, cert) = x509_parser::parse_x509_certificate(der).ok()?;
    Some((cert.subject().as_raw().to_vec(), cert.issuer().as_raw().to_vec()))
}

/// The certificate of `pool` that issued none of the others: the end
/// entity of a single chain.
fn leaf_of(pool: &[Vec<u8>]) -> Option<Vec<u8>> {
    let named: Vec<_> = pool.iter().filter_map(|der| Some((der, names(der)?))).collect();
    named
        .iter()
        .find(|(der, (subject, _))| !named.iter().any(|(other, (_, issuer))| other != der && issuer == subject))
        .map(|(der, _)| (*der).clone())
}

/// `leaf` and then its issuers from `pool`, as far as they are there.
fn chain(leaf: Vec<u8>, pool: &[Vec<u8>]) -> Vec<Vec<u8>> {
    const MAX_CHAIN: usize = 10;
    let mut chain = vec![leaf];
    while chain.len() < MAX_CHAIN {
        let Some((subject, issuer)) = chain.last().and_then(|c| names(c)) else { break };
        if subject == issuer {
            break; // self-signed: the root
        }
        let next = pool.iter().find(|c| !chain.contains(c) && names(c).is_some_and(|(s, _)| s == issuer));
        match next {
            Some(next) => chain.push(next.clone()),
            None => break,
        }
    }
    chain
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A CA, an intermediate it signed and a leaf the intermediate signed
    /// (DER), and the leaf's key (PEM).
    fn three_level_chain() -> (Vec<Vec<u8>>, String) {
        let ca_key = rcgen::KeyPair::generate().unwrap();
        let mut p = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        p.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        p.distinguished_name.push(rcgen::DnType::CommonName, "root");
        let ca = p.self_signed(&ca_key).unwrap();
        let mid_key = rcgen::KeyPair::generate().unwrap();
        let mut p = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        p.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        p.distinguished_name.push(rcgen::DnType::CommonName, "intermediate");
        let mid = p.signed_by(&mid_key, &ca, &ca_key).unwrap();
        let leaf_key = rcgen::KeyPair::generate().unwrap();
        let mut p = rcgen::CertificateParams::new(vec!["localhost".to_string()]).unwrap();
        p.distinguished_name.push(rcgen::DnType::CommonName, "leaf");
        let leaf = p.signed_by(&leaf_key, &mid, &mid_key).unwrap();
        (vec![leaf.der().to_vec(), mid.der().to_vec(), ca.der().to_vec()], leaf_key.serialize_pem())
    }

    #[test]
    fn a_chain_is_put_in_order_from_certificates_in_any_order() {
        let (ordered, _) = three_level_chain();
        let shuffled = vec![ordered[2].clone(), ordered[0].clone(), ordered[1].clone()];
        let leaf = leaf_of(&shuffled).unwrap();
        assert_eq!(leaf, ordered[0]);
        assert_eq!(chain(leaf, &shuffled), ordered);
        // A chain stops where its issuer is missing.
        assert_eq!(chain(ordered[0].clone(), &[ordered[0].clone()]), vec![ordered[0].clone()]);
    }

    #[test]
    fn a_pem_store_holds_the_key_and_its_chain_in_one_file() {
        let (chain, key) = three_level_chain();
        let pem = |der: &Vec<u8>| {
            use base64::Engine as _;
            let b64 = base64::engine::general_purpose::STANDARD.encode(der);
            format!("-----BEGIN CERTIFICATE-----\n{b64}\n-----END CERTIFICATE-----\n")
        };
        let text = format!("{key}{}", chain.iter().map(pem).collect::<String>());
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("server.pem");
        std::fs::write(&path, &text).unwrap();
        let store = StoreFile { location: path.display().to_string(), kind: "PEM".into(), password: String::new() };
        let identity = read_identity(&store, "").unwrap();
        assert_eq!(identity.chain.iter().map(|c| c.to_vec()).collect::<Vec<_>>(), chain);
        // As a trust store the same file trusts its certificates.
        assert_eq!(read_trusted(&store).unwrap().len(), 3);
        let bad = StoreFile { kind: "BCFKS".into(), ..store };
        assert!(read_identity(&bad, "").unwrap_err().contains("not supported"));
    }
}
