//! Kafka's client security settings, as kcoord reads them: in TOML (the
//! sidecar's `[sidecar.upstream_security]`, with `_` for Kafka's `.`), or
//! from a Kafka-style client configuration file (`key=value` lines, as
//! `kafka-consumer-groups.sh --command-config` reads; simple TOML too).

use serde::{Deserialize, Serialize};

/// The environment variable that holds the password when neither
/// `sasl_password` nor `sasl_password_file` is set (keeps it off command
/// lines and out of configuration files).
pub const PASSWORD_ENV: &str = "KCOORD_SASL_PASSWORD";

/// The OAuth grants kcoord's token requests use (RFC 6749 §4.4, RFC 7523).
pub const CLIENT_CREDENTIALS: &str = "client_credentials";
pub const JWT_BEARER: &str = "urn:ietf:params:oauth:grant-type:jwt-bearer";

/// Client security settings, named after Kafka's client properties.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ClientSecurityConfig {
    /// PLAINTEXT | SSL | SASL_PLAINTEXT | SASL_SSL (Kafka: security.protocol).
    pub security_protocol: String,
    /// PLAIN | SCRAM-SHA-256 | SCRAM-SHA-512 (Kafka: sasl.mechanism).
    pub sasl_mechanism: String,
    pub sasl_username: String,
    pub sasl_password: String,
    /// A file whose first line is the password.
    pub sasl_password_file: String,
    /// SCRAM with a delegation token (KIP-48): `sasl_username` is the
    /// token's id and the password its HMAC (Java: `tokenauth="true"` in
    /// ScramLoginModule's sasl.jaas.config).
    pub sasl_tokenauth: bool,
    /// PEM CA certificates the broker's certificate must chain to (Kafka:
    /// ssl.ca.location); without it or a trust store, the system's CAs
    /// (also with librdkafka's `probe`).
    pub ssl_ca_location: String,
    /// PEM client certificate and key, for brokers that ask for one (mTLS).
    pub ssl_certificate_location: String,
    pub ssl_key_location: String,
    /// The password of an encrypted (PKCS#8, PBES2) key, or of the key in
    /// a key store when it differs from the store's (ssl.key.password).
    pub ssl_key_password: String,
    /// A key store with the client certificate and its key instead of the
    /// two PEM files: JKS, PKCS#12 (librdkafka's ssl.keystore.location) or
    /// PEM; the type is told from the content (Kafka: ssl.keystore.location,
    /// ssl.keystore.type, ssl.keystore.password).
    pub ssl_keystore_location: String,
    pub ssl_keystore_type: String,
    pub ssl_keystore_password: String,
    /// A trust store with the CAs instead of ssl.ca.location: JKS, PKCS#12
    /// or PEM; without a password its integrity is not checked, as in Java
    /// (Kafka: ssl.truststore.location, ssl.truststore.type,
    /// ssl.truststore.password).
    pub ssl_truststore_location: String,
    pub ssl_truststore_type: String,
    pub ssl_truststore_password: String,
    /// Inline PEM instead of files (KIP-651; Kafka: ssl.keystore.key,
    /// ssl.keystore.certificate.chain, ssl.truststore.certificates): the
    /// key (encrypted with ssl.key.password, or not), its chain, the CAs.
    /// Line breaks may be lost (a properties value continued with
    /// backslashes): the PEM blocks are read whole.
    pub ssl_keystore_key: String,
    pub ssl_keystore_certificate_chain: String,
    pub ssl_truststore_certificates: String,
    /// TLS versions offered, comma-separated (Kafka:
    /// ssl.enabled.protocols, default TLSv1.2,TLSv1.3).
    pub ssl_enabled_protocols: String,
    /// Cipher suites offered, by Java's or OpenSSL's names, separated by
    /// commas or colons; empty: all (Kafka and librdkafka: ssl.cipher.suites).
    pub ssl_cipher_suites: String,
    /// "https" (the default) checks that the certificate names the host
    /// connected to; "none" does not (Kafka:
    /// ssl.endpoint.identification.algorithm).
    pub ssl_endpoint_identification_algorithm: String,
    /// OAUTHBEARER: where tokens come from, an OAuth 2 token endpoint
    /// (https:// or http://, client-credentials grant) or a file (file://)
    /// (Kafka and librdkafka: sasl.oauthbearer.token.endpoint.url).
    pub sasl_oauthbearer_token_endpoint_url: String,
    /// OAUTHBEARER: the client id and secret presented to the token
    /// endpoint (librdkafka: sasl.oauthbearer.client.id, .client.secret).
    pub sasl_oauthbearer_client_id: String,
    pub sasl_oauthbearer_client_secret: String,
    /// OAUTHBEARER: the scope asked for; empty: none (sasl.oauthbearer.scope).
    pub sasl_oauthbearer_scope: String,
    /// OAUTHBEARER: SASL extensions sent with the token, `key=value,...`
    /// (RFC 7628; Confluent Cloud wants `logicalCluster=lkc-...,
    /// identityPoolId=pool-...`) (librdkafka: sasl.oauthbearer.extensions;
    /// Java: `extension_<key>="value"` in sasl.jaas.config).
    pub sasl_oauthbearer_extensions: String,
    /// OAUTHBEARER: how kcoord authenticates to the token endpoint:
    /// "client_credentials" (the id and secret above) or
    /// "urn:ietf:params:oauth:grant-type:jwt-bearer", a JWT assertion signed
    /// with a private key (RFC 7523; librdkafka: sasl.oauthbearer.grant.type;
    /// Kafka: sasl.oauthbearer.jwt.retriever.class=...JwtBearerJwtRetriever).
    pub sasl_oauthbearer_grant_type: String,
    /// jwt-bearer: RS256 or ES256 (sasl.oauthbearer.assertion.algorithm).
    pub sasl_oauthbearer_assertion_algorithm: String,
    /// jwt-bearer: the unencrypted PEM private key signing the assertion, as
    /// a file or inline (sasl.oauthbearer.assertion.private.key.file, .pem).
    pub sasl_oauthbearer_assertion_private_key_file: String,
    pub sasl_oauthbearer_assertion_private_key_pem: String,
    /// jwt-bearer: the password of an encrypted (PKCS#8, PBES2) key
    /// (sasl.oauthbearer.assertion.private.key.passphrase).
    pub sasl_oauthbearer_assertion_private_key_passphrase: String,
    /// jwt-bearer: a ready-made assertion, read at every token request,
    /// instead of signing one (sasl.oauthbearer.assertion.file).
    pub sasl_oauthbearer_assertion_file: String,
    /// jwt-bearer: the assertion's `sub`, `iss` and `aud` claims; empty: left
    /// out (or the template's) (sasl.oauthbearer.assertion.claim.sub, ...).
    pub sasl_oauthbearer_assertion_claim_sub: String,
    pub sasl_oauthbearer_assertion_claim_iss: String,
    pub sasl_oauthbearer_assertion_claim_aud: String,
    /// jwt-bearer: `exp` is now plus this, `nbf` now minus this
    /// (sasl.oauthbearer.assertion.claim.exp.seconds, .nbf.seconds).
    pub sasl_oauthbearer_assertion_claim_exp_seconds: u64,
    pub sasl_oauthbearer_assertion_claim_nbf_seconds: u64,
    /// jwt-bearer: a random `jti` in every assertion
    /// (sasl.oauthbearer.assertion.claim.jti.include).
    pub sasl_oauthbearer_assertion_claim_jti_include: bool,
    /// jwt-bearer: a JSON file `{"header": {...}, "payload": {...}}` whose
    /// fields every assertion carries (librdkafka:
    /// sasl.oauthbearer.assertion.jwt.template.file; Kafka: ...template.file).
    pub sasl_oauthbearer_assertion_jwt_template_file: String,
    /// PEM CA certificates for an https token endpoint; empty: the system's
    /// (librdkafka: https.ca.location).
    pub https_ca_location: String,
    /// GSSAPI: the broker's Kerberos service name (Kafka:
    /// sasl.kerberos.service.name).
    pub sasl_kerberos_service_name: String,
    /// GSSAPI: the client principal; empty: the keytab's first, or the
    /// ticket cache's (librdkafka: sasl.kerberos.principal; Java: the JAAS
    /// `principal`).
    pub sasl_kerberos_principal: String,
    /// GSSAPI: the keytab kcoord logs in with and renews its tickets from;
    /// empty: the ticket cache `KRB5CCNAME` (librdkafka:
    /// sasl.kerberos.keytab; Java: the JAAS `keyTab`).
    pub sasl_kerberos_keytab: String,
    /// Deadline of the TLS handshake plus the SASL exchange.
    pub handshake_timeout_ms: u64,
    /// A Kafka-style client configuration file; the settings above, where
    /// set, override it.
    pub properties_file: String,
}

impl Default for ClientSecurityConfig {
    fn default() -> Self {
        ClientSecurityConfig {
            security_protocol: String::new(),
            sasl_mechanism: String::new(),
            sasl_username: String::new(),
            sasl_password: String::new(),
            sasl_password_file: String::new(),
            sasl_tokenauth: false,
            ssl_ca_location: String::new(),
            ssl_certificate_location: String::new(),
            ssl_key_location: String::new(),
            ssl_key_password: String::new(),
            ssl_keystore_location: String::new(),
            ssl_keystore_type: "JKS".into(),
            ssl_keystore_password: String::new(),
            ssl_truststore_location: String::new(),
            ssl_truststore_type: "JKS".into(),
            ssl_truststore_password: String::new(),
            ssl_keystore_key: String::new(),
            ssl_keystore_certificate_chain: String::new(),
            ssl_truststore_certificates: String::new(),
            ssl_enabled_protocols: "TLSv1.2,TLSv1.3".into(),
            ssl_cipher_suites: String::new(),
            ssl_endpoint_identification_algorithm: "https".into(),
            sasl_oauthbearer_token_endpoint_url: String::new(),
            sasl_oauthbearer_client_id: String::new(),
            sasl_oauthbearer_client_secret: String::new(),
            sasl_oauthbearer_scope: String::new(),
            sasl_oauthbearer_extensions: String::new(),
            sasl_oauthbearer_grant_type: CLIENT_CREDENTIALS.into(),
            sasl_oauthbearer_assertion_algorithm: "RS256".into(),
            sasl_oauthbearer_assertion_private_key_file: String::new(),
            sasl_oauthbearer_assertion_private_key_pem: String::new(),
            sasl_oauthbearer_assertion_private_key_passphrase: String::new(),
            sasl_oauthbearer_assertion_file: String::new(),
            sasl_oauthbearer_assertion_claim_sub: String::new(),
            sasl_oauthbearer_assertion_claim_iss: String::new(),
            sasl_oauthbearer_assertion_claim_aud: String::new(),
            sasl_oauthbearer_assertion_claim_exp_seconds: 300,
            sasl_oauthbearer_assertion_claim_nbf_seconds: 60,
            sasl_oauthbearer_assertion_claim_jti_include: false,
            sasl_oauthbearer_assertion_jwt_template_file: String::new(),
            https_ca_location: String::new(),
            sasl_kerberos_service_name: "kafka".into(),
            sasl_kerberos_principal: String::new(),
            sasl_kerberos_keytab: String::new(),
            handshake_timeout_ms: 30_000,
            properties_file: String::new(),
        }
    }
}

impl ClientSecurityConfig {
    /// Reads a Kafka-style properties file, or a TOML file with the same
    /// keys (`security.protocol = "SASL_SSL"`).
    pub fn from_file(path: &std::path::Path) -> Result<ClientSecurityConfig, String> {
        let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
        Self::parse(&text).map_err(|e| format!("{}: {e}", path.display()))
    }

    /// Parses the text of a client configuration file.
    pub fn parse(text: &str) -> Result<ClientSecurityConfig, String> {
        let pairs = match toml::from_str::<toml::Table>(text) {
            Ok(table) => {
                let mut out = Vec::new();
                flatten("", &table, &mut out);
                out
            }
            Err(_) => properties(text),
        };
        let mut c = ClientSecurityConfig::default();
        for (key, value) in pairs {
            c.apply(&key, value)?;
        }
        Ok(c)
    }

    /// Sets one Kafka property. Properties that are not about security
    /// (client.id, ...) are ignored, as one file often configures a client
    /// fully.
    fn apply(&mut self, key: &str, value: String) -> Result<(), String> {
        let field = match key.replace('_', ".").as_str() {
            "security.protocol" => &mut self.security_protocol,
            "sasl.mechanism" | "sasl.mechanisms" => &mut self.sasl_mechanism,
            "sasl.username" => &mut self.sasl_username,
            "sasl.password" => &mut self.sasl_password,
            "sasl.password.file" => &mut self.sasl_password_file,
            "ssl.ca.location" => &mut self.ssl_ca_location,
            "ssl.certificate.location" => &mut self.ssl_certificate_location,
            "ssl.key.location" => &mut self.ssl_key_location,
            "ssl.key.password" => &mut self.ssl_key_password,
            "ssl.keystore.location" => &mut self.ssl_keystore_location,
            "ssl.keystore.type" => &mut self.ssl_keystore_type,
            "ssl.keystore.password" => &mut self.ssl_keystore_password,
            "ssl.truststore.location" => &mut self.ssl_truststore_location,
            "ssl.truststore.type" => &mut self.ssl_truststore_type,
            "ssl.truststore.password" => &mut self.ssl_truststore_password,
            "ssl.keystore.key" => &mut self.ssl_keystore_key,
            "ssl.keystore.certificate.chain" => &mut self.ssl_keystore_certificate_chain,
            "ssl.truststore.certificates" => &mut self.ssl_truststore_certificates,
            "ssl.enabled.protocols" => &mut self.ssl_enabled_protocols,
            "ssl.cipher.suites" => &mut self.ssl_cipher_suites,
            "ssl.endpoint.identification.algorithm" => &mut self.ssl_endpoint_identification_algorithm,
            "sasl.oauthbearer.token.endpoint.url" => &mut self.sasl_oauthbearer_token_endpoint_url,
            "sasl.oauthbearer.client.id" | "sasl.oauthbearer.client.credentials.client.id" => {
                &mut self.sasl_oauthbearer_client_id
            }
            "sasl.oauthbearer.client.secret" | "sasl.oauthbearer.client.credentials.client.secret" => {
                &mut self.sasl_oauthbearer_client_secret
            }
            "sasl.oauthbearer.scope" => &mut self.sasl_oauthbearer_scope,
            "https.ca.location" => &mut self.https_ca_location,
            "sasl.oauthbearer.extensions" => &mut self.sasl_oauthbearer_extensions,
            "sasl.oauthbearer.grant.type" => &mut self.sasl_oauthbearer_grant_type,
            "sasl.oauthbearer.jwt.retriever.class" => {
                // Kafka 4.1's way of choosing the grant.
                if value.ends_with("JwtBearerJwtRetriever") {
                    self.sasl_oauthbearer_grant_type = JWT_BEARER.into();
                } else if value.ends_with("ClientCredentialsJwtRetriever") {
                    self.sasl_oauthbearer_grant_type = CLIENT_CREDENTIALS.into();
                }
                return Ok(());
            }
            "sasl.oauthbearer.assertion.algorithm" => &mut self.sasl_oauthbearer_assertion_algorithm,
            "sasl.oauthbearer.assertion.private.key.file" => &mut self.sasl_oauthbearer_assertion_private_key_file,
            "sasl.oauthbearer.assertion.private.key.pem" => &mut self.sasl_oauthbearer_assertion_private_key_pem,
            "sasl.oauthbearer.assertion.private.key.passphrase" => {
                &mut self.sasl_oauthbearer_assertion_private_key_passphrase
            }
            "sasl.oauthbearer.assertion.file" => &mut self.sasl_oauthbearer_assertion_file,
            "sasl.oauthbearer.assertion.claim.sub" => &mut self.sasl_oauthbearer_assertion_claim_sub,
            "sasl.oauthbearer.assertion.claim.iss" => &mut self.sasl_oauthbearer_assertion_claim_iss,
            "sasl.oauthbearer.assertion.claim.aud" => &mut self.sasl_oauthbearer_assertion_claim_aud,
            "sasl.oauthbearer.assertion.claim.exp.seconds" | "sasl.oauthbearer.assertion.claim.nbf.seconds" => {
                let seconds = value.parse().map_err(|_| format!("{key}: {value:?} is not a number of seconds"))?;
                if key.replace('_', ".").contains(".exp.") {
                    self.sasl_oauthbearer_assertion_claim_exp_seconds = seconds;
                } else {
                    self.sasl_oauthbearer_assertion_claim_nbf_seconds = seconds;
                }
                return Ok(());
            }
            "sasl.oauthbearer.assertion.claim.jti.include" => {
                self.sasl_oauthbearer_assertion_claim_jti_include =
                    value.parse().map_err(|_| format!("{key}: {value:?} is not true or false"))?;
                return Ok(());
            }
            "sasl.oauthbearer.assertion.jwt.template.file" | "sasl.oauthbearer.assertion.template.file" => {
                &mut self.sasl_oauthbearer_assertion_jwt_template_file
            }
            "sasl.tokenauth" => {
                self.sasl_tokenauth = value.parse().map_err(|_| format!("{key}: {value:?} is not true or false"))?;
                return Ok(());
            }
            "handshake.timeout.ms" => {
                self.handshake_timeout_ms = value.parse().map_err(|_| format!("{key}: {value:?} is not a number"))?;
                return Ok(());
            }
            "sasl.kerberos.service.name" => &mut self.sasl_kerberos_service_name,
            "sasl.kerberos.principal" => &mut self.sasl_kerberos_principal,
            "sasl.kerberos.keytab" => &mut self.sasl_kerberos_keytab,
            "sasl.jaas.config" => {
                self.apply_jaas(&value).map_err(|e| format!("sasl.jaas.config: {e}"))?;
                return Ok(());
            }
            _ => return Ok(()),
        };
        *field = value;
        Ok(())
    }

    /// Java clients' form, `...LoginModule required username="u"
    /// password="p";`: the user and password of PlainLoginModule and
    /// ScramLoginModule (and ScramLoginModule's `tokenauth`),
    /// OAuthBearerLoginModule's client-credentials options and
    /// `extension_<key>` extensions, Krb5LoginModule's keytab login.
    fn apply_jaas(&mut self, text: &str) -> Result<(), String> {
        let entry = super::jaas::parse_client_entry(text)?;
        for (option, field) in [
            ("username", &mut self.sasl_username),
            ("password", &mut self.sasl_password),
            ("clientId", &mut self.sasl_oauthbearer_client_id),
            ("clientSecret", &mut self.sasl_oauthbearer_client_secret),
            ("scope", &mut self.sasl_oauthbearer_scope),
            ("keyTab", &mut self.sasl_kerberos_keytab),
            ("principal", &mut self.sasl_kerberos_principal),
        ] {
            if let Some(v) = entry.option(option) {
                *field = v.to_string();
            }
        }
        let extensions: Vec<String> = entry
            .options
            .iter()
            .filter_map(|(name, value)| Some(format!("{}={value}", name.strip_prefix("extension_")?)))
            .collect();
        if !extensions.is_empty() {
            self.sasl_oauthbearer_extensions = extensions.join(",");
        }
        // Only ScramLoginModule reads `tokenauth`, and only "true" (in any
        // case) turns it on.
        if entry.is_module("ScramLoginModule") {
            self.sasl_tokenauth = entry.option("tokenauth").is_some_and(|v| v.eq_ignore_ascii_case("true"));
        }
        Ok(())
    }

    /// These settings over those of `properties_file`, if any.
    pub fn resolved(&self) -> Result<ClientSecurityConfig, String> {
        if self.properties_file.is_empty() {
            return Ok(self.clone());
        }
        let mut base = Self::from_file(std::path::Path::new(&self.properties_file))?;
        let default = ClientSecurityConfig::default();
        macro_rules! over {
            ($($f:ident),*) => {$( if self.$f != default.$f { base.$f = self.$f.clone(); } )*};
        }
        over!(
            security_protocol,
            sasl_mechanism,
            sasl_username,
            sasl_password,
            sasl_password_file,
            sasl_tokenauth,
            ssl_ca_location,
            ssl_certificate_location,
            ssl_key_location,
            ssl_key_password,
            ssl_keystore_location,
            ssl_keystore_type,
            ssl_keystore_password,
            ssl_truststore_location,
            ssl_truststore_type,
            ssl_truststore_password,
            ssl_keystore_key,
            ssl_keystore_certificate_chain,
            ssl_truststore_certificates,
            ssl_enabled_protocols,
            ssl_cipher_suites,
            ssl_endpoint_identification_algorithm,
            sasl_oauthbearer_token_endpoint_url,
            sasl_oauthbearer_client_id,
            sasl_oauthbearer_client_secret,
            sasl_oauthbearer_scope,
            sasl_oauthbearer_extensions,
            sasl_oauthbearer_grant_type,
            sasl_oauthbearer_assertion_algorithm,
            sasl_oauthbearer_assertion_private_key_file,
            sasl_oauthbearer_assertion_private_key_pem,
            sasl_oauthbearer_assertion_private_key_passphrase,
            sasl_oauthbearer_assertion_file,
            sasl_oauthbearer_assertion_claim_sub,
            sasl_oauthbearer_assertion_claim_iss,
            sasl_oauthbearer_assertion_claim_aud,
            sasl_oauthbearer_assertion_claim_exp_seconds,
            sasl_oauthbearer_assertion_claim_nbf_seconds,
            sasl_oauthbearer_assertion_claim_jti_include,
            sasl_oauthbearer_assertion_jwt_template_file,
            https_ca_location,
            sasl_kerberos_service_name,
            sasl_kerberos_principal,
            sasl_kerberos_keytab,
            handshake_timeout_ms
        );
        base.properties_file.clear();
        Ok(base)
    }

    /// The password: `sasl_password`, else the first line of
    /// `sasl_password_file`, else the environment variable [`PASSWORD_ENV`].
    pub fn password(&self) -> Result<String, String> {
        if !self.sasl_password.is_empty() {
            return Ok(self.sasl_password.clone());
        }
        if !self.sasl_password_file.is_empty() {
            let text = std::fs::read_to_string(&self.sasl_password_file)
                .map_err(|e| format!("sasl.password.file {}: {e}", self.sasl_password_file))?;
            return Ok(text.lines().next().unwrap_or_default().to_string());
        }
        match std::env::var(PASSWORD_ENV) {
            Ok(p) if !p.is_empty() => Ok(p),
            _ => {
                Err(format!("SASL needs sasl.password, sasl.password.file or the {PASSWORD_ENV} environment variable"))
            }
        }
    }
}

/// `key=value` (or `key: value`) lines; `#` and `!` start comments.
fn properties(text: &str) -> Vec<(String, String)> {
    logical_lines(text)
        .into_iter()
        .filter_map(|line| {
            // The key ends at the first unescaped '=', ':' or blank; the
            // separator is blanks around at most one '=' or ':'.
            let mut key_end = line.len();
            let mut escaped = false;
            for (i, c) in line.char_indices() {
                if escaped {
                    escaped = false;
                } else if c == '\\' {
                    escaped = true;
                } else if c == '=' || c == ':' || c.is_whitespace() {
                    key_end = i;
                    break;
                }
            }
            let key = line.get(..key_end)?;
            let rest = line.get(key_end..).unwrap_or_default().trim_start();
            let rest = rest.strip_prefix(['=', ':']).unwrap_or(rest).trim_start();
            let key = unescape(key);
            (!key.is_empty()).then(|| (key, unescape(rest).trim_end().to_string()))
        })
        .collect()
}

/// Java `Properties` logical lines: comments (`#`, `!`) and blank lines
/// dropped, and a line ending in an odd number of backslashes joined with
/// the next, whose leading blanks are dropped, as Kafka's client.properties
/// files write `sasl.jaas.config` over several lines.
fn logical_lines(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut current: Option<String> = None;
    for raw in text.lines() {
        let line = raw.trim_start();
        let continuing = current.is_some();
        if !continuing && (line.is_empty() || line.starts_with('#') || line.starts_with('!')) {
            continue;
        }
        let trailing = line.chars().rev().take_while(|c| *c == '\\').count();
        let (body, more) = match trailing % 2 == 1 {
            true => (line.get(..line.len() - 1).unwrap_or_default(), true),
            false => (line, false),
        };
        let mut joined = current.take().unwrap_or_default();
        joined.push_str(body);
        if more {
            current = Some(joined);
        } else {
            out.push(joined);
        }
    }
    out.extend(current);
    out
}

/// Java `Properties` escapes: `\t`, `\n`, `\r`, `\f`, `\uXXXX`, and `\x`
/// for any other `x`.
fn unescape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('t') => out.push('\t'),
            Some('n') => out.push('\n'),
            Some('r') => out.push('\r'),
            Some('f') => out.push('\u{c}'),
            Some('u') => {
                let hex: String = chars.by_ref().take(4).collect();
                match u32::from_str_radix(&hex, 16).ok().and_then(char::from_u32) {
                    Some(u) => out.push(u),
                    None => {
                        out.push_str("\\u");
                        out.push_str(&hex);
                    }
                }
            }
            Some(other) => out.push(other),
            None => {}
        }
    }
    out
}

/// TOML tables flattened to dotted keys; values as text.
fn flatten(prefix: &str, table: &toml::Table, out: &mut Vec<(String, String)>) {
    for (k, v) in table {
        let key = if prefix.is_empty() { k.clone() } else { format!("{prefix}.{k}") };
        match v {
            toml::Value::Table(t) => flatten(&key, t, out),
            toml::Value::String(s) => out.push((key, s.clone())),
            other => out.push((key, other.to_string())),
        }
    }
}

/// The SASL extensions of `sasl.oauthbearer.extensions` (`key=value,...`),
/// checked as RFC 7628 and Kafka check them: alphabetic keys other than
/// `auth`, values of printable ASCII.
pub fn oauth_extensions(text: &str) -> Result<Vec<(String, String)>, String> {
    let mut out = Vec::new();
    for pair in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (key, value) =
            pair.split_once('=').ok_or_else(|| format!("sasl.oauthbearer.extensions: {pair:?} is not key=value"))?;
        let key_ok = !key.is_empty() && key.chars().all(|c| c.is_ascii_alphabetic()) && key != "auth";
        let value_ok = !value.is_empty() && value.chars().all(|c| matches!(c, '\u{21}'..='\u{7e}' | ' ' | '\t'));
        if !key_ok || !value_ok {
            return Err(format!(
                "sasl.oauthbearer.extensions: {pair:?}: keys are letters (not \"auth\"), values printable ASCII"
            ));
        }
        out.push((key.to_string(), value.to_string()));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kafka_properties_files_are_read_ignoring_what_is_not_security() {
        let c = ClientSecurityConfig::parse(
            "# tools\nsecurity.protocol=SASL_SSL\nsasl.mechanism = SCRAM-SHA-512\nsasl.username=alice\nsasl.password=pw=1\nssl.ca.location=/ca.pem\nclient.id=x\n",
        )
        .unwrap();
        assert_eq!(c.security_protocol, "SASL_SSL");
        assert_eq!(c.sasl_mechanism, "SCRAM-SHA-512");
        assert_eq!(c.sasl_username, "alice");
        assert_eq!(c.sasl_password, "pw=1");
        assert_eq!(c.ssl_ca_location, "/ca.pem");
    }

    #[test]
    fn toml_files_with_the_same_keys_are_read_too() {
        let c = ClientSecurityConfig::parse(
            "security.protocol = \"SSL\"\nssl.endpoint.identification.algorithm = \"none\"\nhandshake.timeout.ms = 500\n",
        )
        .unwrap();
        assert_eq!(c.security_protocol, "SSL");
        assert_eq!(c.ssl_endpoint_identification_algorithm, "none");
        assert_eq!(c.handshake_timeout_ms, 500);
    }

    #[test]
    fn java_jaas_lines_give_the_user_and_password() {
        let c = ClientSecurityConfig::parse(
            "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username=\"bob\" password=\"s3\";",
        )
        .unwrap();
        assert_eq!((c.sasl_username.as_str(), c.sasl_password.as_str()), ("bob", "s3"));
    }

    #[test]
    fn a_scram_login_module_with_tokenauth_logs_in_with_a_delegation_token() {
        let scram = "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required";
        let token =
            ClientSecurityConfig::parse(&format!("{scram} username=\"t0k3n\" password=\"hmac\" tokenauth=true;"))
                .unwrap();
        assert!(token.sasl_tokenauth);
        assert_eq!((token.sasl_username.as_str(), token.sasl_password.as_str()), ("t0k3n", "hmac"));
        for (option, on) in
            [("tokenauth=\"TRUE\"", true), ("tokenauth=\"false\"", false), ("tokenauth=yes", false), ("", false)]
        {
            let c = ClientSecurityConfig::parse(&format!("{scram} username=u password=p {option};")).unwrap();
            assert_eq!(c.sasl_tokenauth, on, "{option}");
        }
        // PlainLoginModule has no tokenauth option.
        let plain = ClientSecurityConfig::parse(
            "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username=u password=p tokenauth=true;",
        )
        .unwrap();
        assert!(!plain.sasl_tokenauth);
        // kcoord's own key, in TOML or a properties file.
        assert!(ClientSecurityConfig::parse("sasl.tokenauth=true\n").unwrap().sasl_tokenauth);
    }

    #[test]
    fn a_jaas_line_java_refuses_is_refused_instead_of_half_read() {
        let err = ClientSecurityConfig::parse(
            "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username=\"u\" password=123;",
        )
        .unwrap_err();
        assert_eq!(err, "sasl.jaas.config: Value not specified for key 'password' in JAAS config");
        let err = ClientSecurityConfig::parse(
            "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username=\"u\"\n",
        )
        .unwrap_err();
        assert_eq!(err, "sasl.jaas.config: JAAS config entry not terminated by semi-colon");
    }

    #[test]
    fn oauthbearer_clients_are_configured_with_librdkafkas_or_javas_keys() {
        let c = ClientSecurityConfig::parse(
            "sasl.mechanism=OAUTHBEARER\nsasl.oauthbearer.method=oidc\nsasl.oauthbearer.client.id=svc\n\
             sasl.oauthbearer.client.secret=s3\nsasl.oauthbearer.scope=kafka\n\
             sasl.oauthbearer.token.endpoint.url=https://idp/token\nhttps.ca.location=/idp-ca.pem\n",
        )
        .unwrap();
        assert_eq!(c.sasl_oauthbearer_client_id, "svc");
        assert_eq!(c.sasl_oauthbearer_client_secret, "s3");
        assert_eq!(c.sasl_oauthbearer_scope, "kafka");
        assert_eq!(c.sasl_oauthbearer_token_endpoint_url, "https://idp/token");
        assert_eq!(c.https_ca_location, "/idp-ca.pem");
        let java = ClientSecurityConfig::parse(
            "sasl.jaas.config=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required \
             clientId=\"app\" clientSecret=\"pw\" scope=\"read\";",
        )
        .unwrap();
        assert_eq!(
            (java.sasl_oauthbearer_client_id.as_str(), java.sasl_oauthbearer_client_secret.as_str()),
            ("app", "pw")
        );
        assert_eq!(java.sasl_oauthbearer_scope, "read");
    }

    #[test]
    fn oauthbearer_extensions_come_from_librdkafkas_key_or_javas_jaas_options() {
        let c = ClientSecurityConfig::parse("sasl.oauthbearer.extensions=logicalCluster=lkc-1,identityPoolId=pool-2\n")
            .unwrap();
        assert_eq!(
            oauth_extensions(&c.sasl_oauthbearer_extensions).unwrap(),
            vec![("logicalCluster".into(), "lkc-1".into()), ("identityPoolId".into(), "pool-2".into())]
        );
        let java = ClientSecurityConfig::parse(
            "sasl.jaas.config=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required \
             clientId=\"svc\" extension_logicalCluster=\"lkc-1\" extension_identityPoolId=\"pool-2\";\n",
        )
        .unwrap();
        assert_eq!(java.sasl_oauthbearer_extensions, "logicalCluster=lkc-1,identityPoolId=pool-2");
        for bad in ["auth=x", "a-b=c", "k=", "k"] {
            assert!(oauth_extensions(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn kerberos_clients_are_configured_with_librdkafkas_or_javas_keys() {
        let c = ClientSecurityConfig::parse(
            "security.protocol=SASL_SSL\nsasl.mechanism=GSSAPI\nsasl.kerberos.service.name=kafka-svc\n\
             sasl.kerberos.principal=alice@EXAMPLE.COM\nsasl.kerberos.keytab=/etc/alice.keytab\n\
             sasl.kerberos.kinit.cmd=kinit -k\n",
        )
        .unwrap();
        assert_eq!(c.sasl_kerberos_service_name, "kafka-svc");
        assert_eq!(c.sasl_kerberos_principal, "alice@EXAMPLE.COM");
        assert_eq!(c.sasl_kerberos_keytab, "/etc/alice.keytab");
        let java = ClientSecurityConfig::parse(
            "sasl.mechanism=GSSAPI\nsasl.jaas.config=com.sun.security.auth.module.Krb5LoginModule required \
             useKeyTab=true storeKey=true keyTab=\"/etc/bob.keytab\" principal=\"bob@EXAMPLE.COM\";\n",
        )
        .unwrap();
        assert_eq!(java.sasl_kerberos_service_name, "kafka");
        assert_eq!(java.sasl_kerberos_principal, "bob@EXAMPLE.COM");
        assert_eq!(java.sasl_kerberos_keytab, "/etc/bob.keytab");
    }

    #[test]
    fn java_key_store_settings_are_read_with_kafkas_names() {
        let c = ClientSecurityConfig::parse(
            "security.protocol=SSL\nssl.truststore.location=/etc/kafka/truststore.jks\n\
             ssl.truststore.password=changeit\nssl.keystore.location=/etc/kafka/client.p12\n\
             ssl.keystore.type=PKCS12\nssl.keystore.password=store\nssl.key.password=key\n",
        )
        .unwrap();
        assert_eq!(c.ssl_truststore_location, "/etc/kafka/truststore.jks");
        assert_eq!(c.ssl_truststore_type, "JKS");
        assert_eq!(c.ssl_truststore_password, "changeit");
        assert_eq!(c.ssl_keystore_location, "/etc/kafka/client.p12");
        assert_eq!(c.ssl_keystore_type, "PKCS12");
        assert_eq!(c.ssl_keystore_password, "store");
        assert_eq!(c.ssl_key_password, "key");
    }

    #[test]
    fn properties_files_are_read_as_java_reads_them() {
        // Kafka's documented client.properties: a JAAS line continued over
        // several lines, comments, `key value` and `key:value` separators,
        // escapes.
        let c = ClientSecurityConfig::parse(
            "# a comment\n! another\nsecurity.protocol SASL_SSL\nsasl.mechanism:SCRAM-SHA-512\n\
             sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required \\\n    \
             username=\"alice\" \\\n    password=\"s3cr\\u0065t\";\nssl.ca.location = /etc/ca\\ dir/ca.pem  \n",
        )
        .unwrap();
        assert_eq!(c.security_protocol, "SASL_SSL");
        assert_eq!(c.sasl_mechanism, "SCRAM-SHA-512");
        assert_eq!(c.sasl_username, "alice");
        assert_eq!(c.sasl_password, "s3cret");
        assert_eq!(c.ssl_ca_location, "/etc/ca dir/ca.pem");
    }

    #[test]
    fn the_password_comes_from_a_file_when_not_given() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("pw");
        std::fs::write(&f, "secret\n").unwrap();
        let c = ClientSecurityConfig { sasl_password_file: f.display().to_string(), ..Default::default() };
        assert_eq!(c.password().unwrap(), "secret");
    }
}
