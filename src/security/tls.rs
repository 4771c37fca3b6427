//! TLS for SSL and SASL_SSL listeners (rustls, ring provider): PEM files
//! or Java key stores, optional client certificates checked against a CA (mTLS) with Kafka's
//! principal, and reload of the files on SIGHUP.

use std::sync::{Arc, RwLock};

use rustls::pki_types::CertificateDer;

use super::keystore::{IdentitySource, StoreFile, TrustSource};
use rustls::server::WebPkiClientVerifier;
use rustls::ServerConfig;
use tokio_rustls::TlsAcceptor;

use crate::config::SecurityConfig;

/// Whether and how clients present certificates (Kafka's `ssl.client.auth`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientAuth {
    None,
    Requested,
    Required,
}

/// The files a TLS listener is built from.
#[derive(Debug, Clone, PartialEq)]
pub struct TlsFiles {
    pub certificate: String,
    pub private_key: String,
    /// Decrypts an encrypted private key (Kafka: ssl.key.password).
    pub private_key_password: String,
    /// Kafka's ssl.principal.mapping.rules.
    pub principal_mapping_rules: String,
    pub ca: String,
    /// A key store instead of `certificate` and `private_key` (Kafka:
    /// ssl.keystore.*).
    pub keystore: StoreFile,
    /// A trust store instead of `ca` (Kafka: ssl.truststore.*).
    pub truststore: StoreFile,
    /// Inline PEM instead of files (Kafka: ssl.keystore.certificate.chain
    /// and ssl.keystore.key, ssl.truststore.certificates).
    pub inline_chain: String,
    pub inline_key: String,
    pub inline_cas: String,
    pub client_auth: ClientAuth,
    /// Kafka's ssl.enabled.protocols and ssl.cipher.suites.
    pub protocols: Vec<String>,
    pub cipher_suites: Vec<String>,
}

impl TlsFiles {
    pub fn from_config(c: &SecurityConfig) -> TlsFiles {
        let client_auth = match c.tls_client_auth.as_str() {
            "required" => ClientAuth::Required,
            "requested" => ClientAuth::Requested,
            _ => ClientAuth::None,
        };
        TlsFiles {
            certificate: c.tls_certificate.clone(),
            private_key: c.tls_private_key.clone(),
            private_key_password: c.tls_private_key_password.clone(),
            principal_mapping_rules: c.ssl_principal_mapping_rules.clone(),
            ca: c.tls_ca.clone(),
            keystore: StoreFile {
                location: c.tls_keystore.clone(),
                kind: c.tls_keystore_type.clone(),
                password: c.tls_keystore_password.clone(),
            },
            truststore: StoreFile {
                location: c.tls_truststore.clone(),
                kind: c.tls_truststore_type.clone(),
                password: c.tls_truststore_password.clone(),
            },
            inline_chain: c.tls_keystore_certificate_chain.clone(),
            inline_key: c.tls_keystore_key.clone(),
            inline_cas: c.tls_truststore_certificates.clone(),
            client_auth,
            protocols: c.ssl_enabled_protocols.clone(),
            cipher_suites: c.ssl_cipher_suites.clone(),
        }
    }
}

impl TlsFiles {
    /// Where the listener's certificate and key come from (configuration
    /// validation allows one source), and its name for messages.
    fn identity(&self) -> (IdentitySource<'_>, &str) {
        if !self.keystore.location.is_empty() {
            (IdentitySource::Store(&self.keystore), &self.keystore.location)
        } else if !self.inline_key.is_empty() {
            let names = ["security.tls_keystore_certificate_chain", "security.tls_keystore_key"];
            let source = "security.tls_keystore_certificate_chain/tls_keystore_key";
            (IdentitySource::Inline { chain: &self.inline_chain, private_key: &self.inline_key, names }, source)
        } else {
            (
                IdentitySource::Files { certificate: &self.certificate, private_key: &self.private_key },
                &self.certificate,
            )
        }
    }

    /// Where the CAs client certificates must chain to come from.
    fn trust(&self) -> TrustSource<'_> {
        if !self.truststore.location.is_empty() {
            TrustSource::Store(&self.truststore)
        } else if !self.inline_cas.is_empty() {
            TrustSource::Inline(&self.inline_cas, "security.tls_truststore_certificates")
        } else {
            TrustSource::File(&self.ca)
        }
    }
}

/// The current TLS configuration, replaced whole on reload: connections
/// accepted afterwards use the new certificate, existing ones keep theirs.
#[derive(Debug)]
pub struct TlsContext {
    files: TlsFiles,
    /// How a client certificate's subject becomes its principal name.
    names: super::ssl_principal::SslPrincipalMapper,
    current: RwLock<Arc<ServerConfig>>,
    /// Modification times and sizes of the files last looked at.
    seen: std::sync::Mutex<Vec<Option<(std::time::SystemTime, u64)>>>,
}

impl TlsContext {
    pub fn load(files: TlsFiles) -> Result<TlsContext, String> {
        let names = super::ssl_principal::SslPrincipalMapper::new(&files.principal_mapping_rules)
            .map_err(|e| format!("security.ssl_principal_mapping_rules: {e}"))?;
        let config = build(&files)?;
        let seen = std::sync::Mutex::new(stamps(&files));
        Ok(TlsContext { files, names, current: RwLock::new(Arc::new(config)), seen })
    }

    /// Kafka's principal for a TLS client: `User:` and the subject of its
    /// certificate in RFC 2253 form (Java's `X500Principal.getName()`, most
    /// specific attribute first: `User:CN=alice,OU=eng,O=Example`) through
    /// the mapping rules, or `User:ANONYMOUS` without a certificate. An
    /// error: no rule maps the subject (the connection must close).
    pub fn principal(&self, peer_certificates: Option<&[CertificateDer<'_>]>) -> Result<String, String> {
        match subject(peer_certificates) {
            Some(dn) => self.names.name(&dn).map(|name| format!("User:{name}")),
            None => Ok(super::ANONYMOUS.into()),
        }
    }

    /// The settings this context was built from.
    pub fn files(&self) -> &TlsFiles {
        &self.files
    }

    /// Reads the files again; on error the previous configuration stays.
    pub fn reload(&self) -> Result<(), String> {
        let stamps = stamps(&self.files);
        let config = build(&self.files);
        *self.seen.lock().unwrap_or_else(|e| e.into_inner()) = stamps;
        *self.current.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(config?);
        tracing::info!(certificate = %self.source(), "TLS certificate loaded");
        Ok(())
    }

    /// Reloads when a certificate, key or CA file changed since it was last
    /// read (a failed load is not retried until a file changes again).
    pub fn reload_if_changed(&self) {
        if stamps(&self.files) == *self.seen.lock().unwrap_or_else(|e| e.into_inner()) {
            return;
        }
        if let Err(e) = self.reload() {
            tracing::error!(error = %e, "cannot reload the TLS certificate; the previous one stays in use");
        }
    }

    /// Where the certificate comes from, for log lines.
    fn source(&self) -> &str {
        self.files.identity().1
    }

    pub fn acceptor(&self) -> TlsAcceptor {
        TlsAcceptor::from(self.current.read().unwrap_or_else(|e| e.into_inner()).clone())
    }
}

fn stamps(files: &TlsFiles) -> Vec<Option<(std::time::SystemTime, u64)>> {
    [&files.certificate, &files.private_key, &files.ca, &files.keystore.location, &files.truststore.location]
        .iter()
        .map(|p| std::fs::metadata(p).ok().and_then(|m| Some((m.modified().ok()?, m.len()))))
        .collect()
}

fn build(files: &TlsFiles) -> Result<ServerConfig, String> {
    let policy = super::tls_policy::TlsPolicy::new(
        &files.protocols,
        &files.cipher_suites,
        ("security.ssl_enabled_protocols", "security.ssl_cipher_suites"),
    )?;
    let provider = policy.provider.clone();
    let builder = ServerConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&policy.versions)
        .map_err(|e| e.to_string())?;
    let builder = match files.client_auth {
        ClientAuth::None => builder.with_no_client_auth(),
        auth => {
            let roots = files.trust().roots()?;
            let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider);
            let verifier = if auth == ClientAuth::Requested { verifier.allow_unauthenticated() } else { verifier };
            builder.with_client_cert_verifier(verifier.build().map_err(|e| format!("the client CA: {e}"))?)
        }
    };
    let (identity, source) = files.identity();
    let identity = identity.load(&files.private_key_password)?;
    builder.with_single_cert(identity.chain, identity.key).map_err(|e| format!("{source}: {e}"))
}

/// The RFC 2253 subject of the client's certificate, if it sent one.
fn subject(peer_certificates: Option<&[CertificateDer<'_>]>) -> Option<String> {
    let cert = peer_certificates.and_then(|c| c.first())?;
    x509_parser::parse_x509_certificate(cert.as_ref()).ok().map(|(_, parsed)| rfc2253(parsed.subject()))
}

/// [`TlsContext::principal`] under the `DEFAULT` rule.
#[cfg(test)]
fn principal(peer_certificates: Option<&[CertificateDer<'_>]>) -> String {
    subject(peer_certificates).map_or_else(|| super::ANONYMOUS.into(), |dn| format!("User:{dn}"))
}

fn rfc2253(name: &x509_parser::x509::X509Name<'_>) -> String {
    let rdns: Vec<String> = name
        .iter()
        .map(|rdn| {
            rdn.iter()
                .map(|atv| {
                    let oid = atv.attr_type().to_id_string();
                    let key = match oid.as_str() {
                        "2.5.4.3" => "CN".to_string(),
                        "2.5.4.6" => "C".to_string(),
                        "2.5.4.7" => "L".to_string(),
                        "2.5.4.8" => "ST".to_string(),
                        "2.5.4.9" => "STREET".to_string(),
                        "2.5.4.10" => "O".to_string(),
                        "2.5.4.11" => "OU".to_string(),
                        "0.9.2342.19200300.100.1.25" => "DC".to_string(),
                        "0.9.2342.19200300.100.1.1" => "UID".to_string(),
                        other => other.to_string(),
                    };
                    let value = atv.as_str().map(escape).unwrap_or_else(|_| {
                        format!("#{}", atv.attr_value().data.iter().map(|b| format!("{b:02x}")).collect::<String>())
                    });
                    format!("{key}={value}")
                })
                .collect::<Vec<_>>()
                .join("+")
        })
        .collect();
    rdns.into_iter().rev().collect::<Vec<_>>().join(",")
}

/// RFC 2253 escaping of an attribute value.
fn escape(v: &str) -> String {
    let mut out = String::with_capacity(v.len());
    for (i, c) in v.chars().enumerate() {
        let edge = (i == 0 && (c == ' ' || c == '#')) || (i + 1 == v.chars().count() && c == ' ');
        if matches!(c, ',' | '+' | '"' | '\\' | '<' | '>' | ';') || edge {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cert_with_subject(attrs: &[(rcgen::DnType, &str)]) -> CertificateDer<'static> {
        let mut p = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        p.distinguished_name = rcgen::DistinguishedName::new();
        for (t, v) in attrs {
            p.distinguished_name.push(t.clone(), *v);
        }
        let key = rcgen::KeyPair::generate().unwrap();
        p.self_signed(&key).unwrap().der().clone()
    }

    #[test]
    fn the_principal_is_the_subject_most_specific_attribute_first_as_kafka_prints_it() {
        use rcgen::DnType::*;
        let cert =
            cert_with_subject(&[(CountryName, "DE"), (OrganizationName, "Example, Inc."), (CommonName, "alice")]);
        assert_eq!(principal(Some(&[cert])), "User:CN=alice,O=Example\\, Inc.,C=DE");
    }

    #[test]
    fn without_a_certificate_the_principal_is_anonymous() {
        assert_eq!(principal(None), "User:ANONYMOUS");
        assert_eq!(principal(Some(&[])), "User:ANONYMOUS");
        assert_eq!(principal(Some(&[CertificateDer::from(vec![1, 2, 3])])), "User:ANONYMOUS");
    }
}
