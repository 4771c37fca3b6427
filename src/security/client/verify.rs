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
use crate::security::tls_policy::TlsPolicy;

pub fn client_config(c: &ClientSecurityConfig) -> Result<ClientConfig, String> {
    if c.ssl_ca_location.is_empty() && c.ssl_truststore_location.is_empty() {
        return Err("SSL and SASL_SSL need ssl.ca.location (a PEM CA file) or ssl.truststore.location (a JKS, \
                    PKCS#12 or PEM trust store); system roots are not used"
            .into());
    }
    if !c.ssl_ca_location.is_empty() && !c.ssl_truststore_location.is_empty() {
        return Err("ssl.ca.location and ssl.truststore.location both name CAs: set one".into());
    }
    let pem_identity = !c.ssl_certificate_location.is_empty() || !c.ssl_key_location.is_empty();
    if pem_identity && !c.ssl_keystore_location.is_empty() {
        return Err("ssl.keystore.location and ssl.certificate.location/ssl.key.location both name the client \
                    certificate: set one"
            .into());
    }
    let split = |v: &str| -> Vec<String> { v.split([',', ':']).map(|s| s.trim().to_string()).collect() };
    let policy = TlsPolicy::new(
        &split(&c.ssl_enabled_protocols),
        &split(&c.ssl_cipher_suites),
        ("ssl.enabled.protocols", "ssl.cipher.suites"),
    )?;
    let provider = policy.provider.clone();
    let truststore = StoreFile {
        location: c.ssl_truststore_location.clone(),
        kind: c.ssl_truststore_type.clone(),
        password: c.ssl_truststore_password.clone(),
    };
    let roots = keystore::roots(&c.ssl_ca_location, &truststore)?;
    let chain = WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider.clone())
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
    let keystore = StoreFile {
        location: c.ssl_keystore_location.clone(),
        kind: c.ssl_keystore_type.clone(),
        password: c.ssl_keystore_password.clone(),
    };
    if c.ssl_certificate_location.is_empty() != c.ssl_key_location.is_empty() {
        return Err("a client certificate needs both ssl.certificate.location and ssl.key.location".into());
    }
    match keystore::identity(&c.ssl_certificate_location, &c.ssl_key_location, &c.ssl_key_password, &keystore)? {
        None => Ok(builder.with_no_client_auth()),
        Some(identity) => builder
            .with_client_auth_cert(identity.chain, identity.key)
            .map_err(|e| format!("the client certificate: {e}")),
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
