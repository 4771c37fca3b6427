//! Which TLS versions and cipher suites a connection may use: Kafka's
//! `ssl.enabled.protocols` and `ssl.cipher.suites`, for kcoord's listeners
//! and its own client alike.
//!
//! Versions are TLSv1.2 and TLSv1.3 (Kafka's default is both; rustls has
//! nothing older, so TLSv1 and TLSv1.1 are refused with that reason).
//! Cipher suites are named as Java names them (IANA: `TLS_AES_256_GCM_SHA384`,
//! `TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256`) or as OpenSSL and librdkafka
//! do (`ECDHE-RSA-AES128-GCM-SHA256`); an empty list keeps rustls's
//! defaults (all of those below), as Kafka keeps the JVM's. A name kcoord
//! does not know stops the start, as Java's "Unsupported CipherSuite".

use std::sync::Arc;

use rustls::crypto::CryptoProvider;
use rustls::{SupportedCipherSuite, SupportedProtocolVersion};

/// The versions and the provider (with its cipher suites) of a TLS config.
#[derive(Debug, Clone)]
pub struct TlsPolicy {
    pub versions: Vec<&'static SupportedProtocolVersion>,
    pub provider: Arc<CryptoProvider>,
}

impl Default for TlsPolicy {
    fn default() -> Self {
        TlsPolicy {
            versions: vec![&rustls::version::TLS12, &rustls::version::TLS13],
            provider: Arc::new(rustls::crypto::ring::default_provider()),
        }
    }
}

/// Each suite rustls (ring) offers, with its IANA and OpenSSL names.
fn names(suite: &SupportedCipherSuite) -> (String, Option<&'static str>) {
    use rustls::CipherSuite::*;
    let iana = match suite.suite() {
        // rustls prefixes the TLS 1.3 suites with TLS13_; Java and OpenSSL
        // call them TLS_AES_128_GCM_SHA256 and so on.
        TLS13_AES_128_GCM_SHA256 => "TLS_AES_128_GCM_SHA256".to_string(),
        TLS13_AES_256_GCM_SHA384 => "TLS_AES_256_GCM_SHA384".to_string(),
        TLS13_CHACHA20_POLY1305_SHA256 => "TLS_CHACHA20_POLY1305_SHA256".to_string(),
        other => format!("{other:?}"),
    };
    let openssl = match suite.suite() {
        TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256 => Some("ECDHE-ECDSA-AES128-GCM-SHA256"),
        TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384 => Some("ECDHE-ECDSA-AES256-GCM-SHA384"),
        TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256 => Some("ECDHE-ECDSA-CHACHA20-POLY1305"),
        TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256 => Some("ECDHE-RSA-AES128-GCM-SHA256"),
        TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384 => Some("ECDHE-RSA-AES256-GCM-SHA384"),
        TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256 => Some("ECDHE-RSA-CHACHA20-POLY1305"),
        _ => None,
    };
    (iana, openssl)
}

impl TlsPolicy {
    /// The policy of `protocols` (`TLSv1.2`, `TLSv1.3`) and `suites`
    /// (names as above; empty: every suite); `what` names the settings in
    /// errors.
    pub fn new(protocols: &[String], suites: &[String], what: (&str, &str)) -> Result<TlsPolicy, String> {
        let mut versions: Vec<&'static SupportedProtocolVersion> = Vec::new();
        for p in protocols.iter().map(|p| p.trim()).filter(|p| !p.is_empty()) {
            let v = match p {
                "TLSv1.3" => &rustls::version::TLS13,
                "TLSv1.2" => &rustls::version::TLS12,
                "TLSv1" | "TLSv1.1" | "SSLv3" => {
                    return Err(format!("{}: {p} is not supported (TLSv1.2 and TLSv1.3 only)", what.0))
                }
                other => return Err(format!("{}: unknown protocol {other:?} (TLSv1.2, TLSv1.3)", what.0)),
            };
            if !versions.contains(&v) {
                versions.push(v);
            }
        }
        if versions.is_empty() {
            return Err(format!("{}: no protocol enabled", what.0));
        }
        let mut provider = rustls::crypto::ring::default_provider();
        let wanted: Vec<&str> = suites.iter().map(|s| s.trim()).filter(|s| !s.is_empty()).collect();
        if !wanted.is_empty() {
            let all = provider.cipher_suites.clone();
            let mut chosen = Vec::new();
            for name in wanted {
                let suite = all
                    .iter()
                    .find(|s| {
                        let (iana, openssl) = names(s);
                        iana.eq_ignore_ascii_case(name) || openssl.is_some_and(|o| o.eq_ignore_ascii_case(name))
                    })
                    .ok_or_else(|| {
                        let known: Vec<String> = all.iter().map(|s| names(s).0).collect();
                        format!("{}: unsupported cipher suite {name:?} (supported: {})", what.1, known.join(", "))
                    })?;
                if !chosen.iter().any(|c: &SupportedCipherSuite| c.suite() == suite.suite()) {
                    chosen.push(*suite);
                }
            }
            let usable = chosen.iter().any(|s| versions.iter().any(|v| s.version() == *v));
            if !usable {
                return Err(format!("{}: no cipher suite for the enabled protocols ({})", what.1, what.0));
            }
            provider.cipher_suites = chosen;
        }
        Ok(TlsPolicy { versions, provider: Arc::new(provider) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const WHAT: (&str, &str) = ("ssl.enabled.protocols", "ssl.cipher.suites");

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn suites_are_known_by_their_java_and_openssl_names() {
        let p = TlsPolicy::new(
            &s(&["TLSv1.2", "TLSv1.3"]),
            &s(&["TLS_AES_256_GCM_SHA384", "ECDHE-RSA-AES128-GCM-SHA256", "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384"]),
            WHAT,
        )
        .unwrap();
        let got: Vec<String> = p.provider.cipher_suites.iter().map(|c| names(c).0).collect();
        assert_eq!(
            got,
            vec![
                "TLS_AES_256_GCM_SHA384",
                "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
                "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384"
            ]
        );
        assert_eq!(p.versions.len(), 2);
    }

    #[test]
    fn unsupported_protocols_and_suites_are_refused_with_what_is_supported() {
        let e = TlsPolicy::new(&s(&["TLSv1.1"]), &[], WHAT).unwrap_err();
        assert!(e.contains("TLSv1.2 and TLSv1.3 only"), "{e}");
        let e = TlsPolicy::new(&s(&["TLSv1.3"]), &s(&["TLS_RSA_WITH_AES_128_CBC_SHA"]), WHAT).unwrap_err();
        assert!(e.contains("unsupported cipher suite") && e.contains("TLS_AES_128_GCM_SHA256"), "{e}");
        let e = TlsPolicy::new(&s(&["TLSv1.3"]), &s(&["ECDHE-RSA-AES128-GCM-SHA256"]), WHAT).unwrap_err();
        assert!(e.contains("no cipher suite for the enabled protocols"), "{e}");
        assert!(TlsPolicy::new(&[], &[], WHAT).unwrap_err().contains("no protocol enabled"));
    }
}
