//! The TLS client configuration: the broker's certificate must chain to
//! the configured CA, and (by default, as Kafka's
//! `ssl.endpoint.identification.algorithm=https`) name the host connected
//! to; a client certificate is presented when one is configured (mTLS).

use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{CertificateError, ClientConfig, DigitallySignedStruct, SignatureScheme};

use super::ClientSecurityConfig;
use crate::security::keystore::{self, StoreFile};
use crate::security::pem;
use crate::security::tls_policy::TlsPolicy;

pub fn client_config(c: &ClientSecurityConfig) -> Result<ClientConfig, String> {
    let split = |v: &str| -> Vec<String> { v.split([',', ':']).map(|s| s.trim().to_string()).collect() };
    let policy = TlsPolicy::new(
        &split(&c.ssl_enabled_protocols),
        &split(&c.ssl_cipher_suites),
        ("ssl.enabled.protocols", "ssl.cipher.suites"),
    )?;
    let provider = policy.provider.clone();
    let chain = WebPkiServerVerifier::builder_with_provider(Arc::new(roots(c)?), provider.clone())
        .build()
        .map_err(|e| format!("the CA: {e}"))?;
    let verifier: Arc<dyn ServerCertVerifier> =
        match c.ssl_endpoint_identification_algorithm.to_ascii_lowercase().as_str() {
            "https" => chain,
            "none" | "" => Arc::new(AnyName(chain)),
            other => return Err(format!("ssl.endpoint.identification.algorithm {other:?}: expected https or none")),
        };
    let builder = ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(&policy.versions)
        .map_err(|e| e.to_string())?
        .dangerous()
        .with_custom_certificate_verifier(verifier);
    match identity(c)? {
        None => Ok(builder.with_no_client_auth()),
        Some(identity) => builder
            .with_client_auth_cert(identity.chain, identity.key)
            .map_err(|e| format!("the client certificate: {e}")),
    }
}

/// Which of `sources` (setting names, and whether each is set) is set: at
/// most one may be.
fn one_of(what: &str, sources: &[(&str, bool)]) -> Result<Option<usize>, String> {
    let set: Vec<usize> = (0..sources.len()).filter(|i| sources.get(*i).is_some_and(|s| s.1)).collect();
    match set.as_slice() {
        [] => Ok(None),
        [one] => Ok(Some(*one)),
        _ => {
            let names: Vec<&str> = set.iter().filter_map(|i| sources.get(*i).map(|s| s.0)).collect();
            Err(format!("{} all name {what}: set one", names.join(" and ")))
        }
    }
}

/// The CAs the broker's certificate must chain to: a PEM file
/// (ssl.ca.location), a trust store (ssl.truststore.location) or inline PEM
/// (ssl.truststore.certificates, KIP-651).
fn roots(c: &ClientSecurityConfig) -> Result<rustls::RootCertStore, String> {
    let source = one_of(
        "the CAs",
        &[
            ("ssl.ca.location", !c.ssl_ca_location.is_empty()),
            ("ssl.truststore.location", !c.ssl_truststore_location.is_empty()),
            ("ssl.truststore.certificates", !c.ssl_truststore_certificates.is_empty()),
        ],
    )?;
    let certs = match source {
        None => {
            return Err("SSL and SASL_SSL need ssl.ca.location (a PEM CA file), ssl.truststore.location (a JKS, \
                        PKCS#12 or PEM trust store) or ssl.truststore.certificates; system roots are not used"
                .into())
        }
        Some(0) => pem::read_certs(&c.ssl_ca_location)?,
        Some(1) => keystore::read_trusted(&StoreFile {
            location: c.ssl_truststore_location.clone(),
            kind: c.ssl_truststore_type.clone(),
            password: c.ssl_truststore_password.clone(),
        })?,
        Some(_) => pem::parse_certs(&pem::normalize(&c.ssl_truststore_certificates))
            .map_err(|e| format!("ssl.truststore.certificates: {e}"))?,
    };
    let mut roots = rustls::RootCertStore::empty();
    for cert in certs {
        roots.add(cert).map_err(|e| format!("the CA: {e}"))?;
    }
    Ok(roots)
}

/// The client certificate, if any: PEM files (ssl.certificate.location and
/// ssl.key.location), a key store (ssl.keystore.location) or inline PEM
/// (ssl.keystore.certificate.chain and ssl.keystore.key, KIP-651).
fn identity(c: &ClientSecurityConfig) -> Result<Option<keystore::Identity>, String> {
    let files = (!c.ssl_certificate_location.is_empty(), !c.ssl_key_location.is_empty());
    let inline = (!c.ssl_keystore_certificate_chain.is_empty(), !c.ssl_keystore_key.is_empty());
    let source = one_of(
        "the client certificate",
        &[
            ("ssl.certificate.location/ssl.key.location", files.0 || files.1),
            ("ssl.keystore.location", !c.ssl_keystore_location.is_empty()),
            ("ssl.keystore.certificate.chain/ssl.keystore.key", inline.0 || inline.1),
        ],
    )?;
    match source {
        None => Ok(None),
        Some(0) if files.0 && files.1 => Ok(Some(keystore::Identity {
            chain: pem::read_certs(&c.ssl_certificate_location)?,
            key: pem::read_private_key(&c.ssl_key_location, &c.ssl_key_password)?,
        })),
        Some(0) => Err("a client certificate needs both ssl.certificate.location and ssl.key.location".into()),
        Some(1) => keystore::read_identity(
            &StoreFile {
                location: c.ssl_keystore_location.clone(),
                kind: c.ssl_keystore_type.clone(),
                password: c.ssl_keystore_password.clone(),
            },
            &c.ssl_key_password,
        )
        .map(Some),
        Some(_) if inline.0 && inline.1 => Ok(Some(keystore::Identity {
            chain: pem::parse_certs(&pem::normalize(&c.ssl_keystore_certificate_chain))
                .map_err(|e| format!("ssl.keystore.certificate.chain: {e}"))?,
            key: pem::parse_private_key(&pem::normalize(&c.ssl_keystore_key), &c.ssl_key_password)
                .map_err(|e| format!("ssl.keystore.key: {e}"))?,
        })),
        Some(_) => Err("a client certificate needs both ssl.keystore.certificate.chain and ssl.keystore.key".into()),
    }
}

/// The CA check without the host name check
/// (`ssl.endpoint.identification.algorithm=none`).
#[derive(Debug)]
struct AnyName(Arc<WebPkiServerVerifier>);

impl ServerCertVerifier for AnyName {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        match self.0.verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now) {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}
