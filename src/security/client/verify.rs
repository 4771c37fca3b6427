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
use crate::security::keystore::{self, IdentitySource, StoreFile, TrustSource};
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

/// The one of `sources` (setting names, whether each is set, what it
/// gives) that is set, if any: at most one may be.
fn one_of<T>(what: &str, sources: Vec<(&str, bool, T)>) -> Result<Option<T>, String> {
    let mut set: Vec<(&str, T)> = sources.into_iter().filter(|s| s.1).map(|(name, _, t)| (name, t)).collect();
    if set.len() > 1 {
        let names: Vec<&str> = set.iter().map(|s| s.0).collect();
        return Err(format!("{} all name {what}: set one", names.join(" and ")));
    }
    Ok(set.pop().map(|s| s.1))
}

/// The CAs the broker's certificate must chain to: a PEM file
/// (ssl.ca.location), a trust store (ssl.truststore.location) or inline PEM
/// (ssl.truststore.certificates, KIP-651); without any of them (or with
/// librdkafka's `ssl.ca.location=probe`) the system's, as Kafka's clients
/// do, so that a cluster with a public CA's certificate needs no setting.
fn roots(c: &ClientSecurityConfig) -> Result<rustls::RootCertStore, String> {
    let probe = c.ssl_ca_location.eq_ignore_ascii_case("probe");
    let store = StoreFile {
        location: c.ssl_truststore_location.clone(),
        kind: c.ssl_truststore_type.clone(),
        password: c.ssl_truststore_password.clone(),
    };
    let source = one_of(
        "the CAs",
        vec![
            ("ssl.ca.location", probe, TrustSource::System),
            ("ssl.ca.location", !c.ssl_ca_location.is_empty() && !probe, TrustSource::File(&c.ssl_ca_location)),
            ("ssl.truststore.location", !store.location.is_empty(), TrustSource::Store(&store)),
            (
                "ssl.truststore.certificates",
                !c.ssl_truststore_certificates.is_empty(),
                TrustSource::Inline(&c.ssl_truststore_certificates, "ssl.truststore.certificates"),
            ),
        ],
    )?
    .unwrap_or(TrustSource::System);
    source.roots()
}

/// The client certificate, if any: PEM files (ssl.certificate.location and
/// ssl.key.location), a key store (ssl.keystore.location) or inline PEM
/// (ssl.keystore.certificate.chain and ssl.keystore.key, KIP-651).
fn identity(c: &ClientSecurityConfig) -> Result<Option<keystore::Identity>, String> {
    let files = (!c.ssl_certificate_location.is_empty(), !c.ssl_key_location.is_empty());
    let inline = (!c.ssl_keystore_certificate_chain.is_empty(), !c.ssl_keystore_key.is_empty());
    if files.0 != files.1 {
        return Err("a client certificate needs both ssl.certificate.location and ssl.key.location".into());
    }
    if inline.0 != inline.1 {
        return Err("a client certificate needs both ssl.keystore.certificate.chain and ssl.keystore.key".into());
    }
    let store = StoreFile {
        location: c.ssl_keystore_location.clone(),
        kind: c.ssl_keystore_type.clone(),
        password: c.ssl_keystore_password.clone(),
    };
    let source = one_of(
        "the client certificate",
        vec![
            (
                "ssl.certificate.location/ssl.key.location",
                files.0,
                IdentitySource::Files { certificate: &c.ssl_certificate_location, private_key: &c.ssl_key_location },
            ),
            ("ssl.keystore.location", !store.location.is_empty(), IdentitySource::Store(&store)),
            (
                "ssl.keystore.certificate.chain/ssl.keystore.key",
                inline.0,
                IdentitySource::Inline {
                    chain: &c.ssl_keystore_certificate_chain,
                    private_key: &c.ssl_keystore_key,
                    names: ["ssl.keystore.certificate.chain", "ssl.keystore.key"],
                },
            ),
        ],
    )?;
    source.map(|s| s.load(&c.ssl_key_password)).transpose()
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
