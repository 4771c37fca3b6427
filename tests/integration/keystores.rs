//! Java key stores as Kafka deployments have them: the listener's
//! certificate from a PKCS#12 or JKS key store and client CAs from a trust
//! store, and the same on the client side (the admin CLI with Kafka's
//! `ssl.keystore.*` and `ssl.truststore.*` properties). The stores are
//! written by the tools users write them with: `openssl pkcs12` (OpenSSL 3's
//! defaults and its `-legacy` RC2/3DES form) and Java's keytool (JKS, and
//! its PKCS#12 with Java's trusted-certificate marks). keytool comes with a
//! Java runtime; without one its stores are skipped, and the test says so.

use std::path::Path;
use std::process::Command;

use crate::common::{self, TestServer};
use crate::security::{client_config, tls_connect, Pki, TlsFiles};

const STORE_PASSWORD: &str = "store secret";

fn run(cmd: &mut Command) {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(out.status.success(), "{cmd:?}: {}", String::from_utf8_lossy(&out.stderr));
}

fn keytool_available() -> bool {
    let found = Command::new("keytool").arg("-help").output().is_ok();
    if !found {
        eprintln!("keytool not found (no Java runtime): its key stores are skipped");
    }
    found
}

/// A server certificate for localhost signed by `pki`, as PEM files, and
/// the key stores made from them.
struct Stores<'a> {
    files: &'a TlsFiles,
    cert: String,
    key: String,
    ca: String,
}

impl<'a> Stores<'a> {
    fn new(pki: &Pki, files: &'a TlsFiles, name: &str) -> Stores<'a> {
        let (cert, key) = pki.issue(&["localhost", "127.0.0.1"], name, None);
        Stores {
            files,
            cert: files.write(&format!("{name}.pem"), &cert),
            key: files.write(&format!("{name}.key"), &key),
            ca: files.write("ca.pem", &pki.ca_pem),
        }
    }

    fn path(&self, name: &str) -> String {
        self.files.dir.path().join(name).display().to_string()
    }

    /// `openssl pkcs12 -export` of the key, its certificate and the CA,
    /// with `extra` options (`-legacy`).
    fn openssl_pkcs12(&self, name: &str, extra: &[&str]) -> String {
        let out = self.path(name);
        run(Command::new("openssl")
            .args(["pkcs12", "-export", "-name", "kcoord", "-in", &self.cert, "-inkey", &self.key])
            .args(["-certfile", &self.ca, "-passout", &format!("pass:{STORE_PASSWORD}"), "-out", &out])
            .args(extra));
        out
    }

    /// The OpenSSL store converted by keytool to `store_type`.
    fn keytool_store(&self, name: &str, store_type: &str) -> String {
        let source = self.openssl_pkcs12(&format!("{name}.source.p12"), &[]);
        let out = self.path(name);
        run(Command::new("keytool")
            .args(["-importkeystore", "-noprompt", "-srckeystore", &source, "-srcstoretype", "PKCS12"])
            .args(["-srcstorepass", STORE_PASSWORD, "-destkeystore", &out, "-deststoretype", store_type])
            .args(["-deststorepass", STORE_PASSWORD, "-destkeypass", STORE_PASSWORD]));
        out
    }

    /// A trust store holding only the CA: keytool's (`store_type`) or,
    /// with `store_type` "openssl", `openssl pkcs12 -nokeys`.
    fn trust_store(&self, name: &str, store_type: &str) -> String {
        let out = self.path(name);
        if store_type == "openssl" {
            run(Command::new("openssl").args(["pkcs12", "-export", "-nokeys", "-in", &self.ca]).args([
                "-passout",
                &format!("pass:{STORE_PASSWORD}"),
                "-out",
                &out,
            ]));
        } else {
            run(Command::new("keytool")
                .args(["-importcert", "-noprompt", "-alias", "test-ca", "-file", &self.ca, "-keystore", &out])
                .args(["-storetype", store_type, "-storepass", STORE_PASSWORD]));
        }
        out
    }

    /// Every key store this machine's tools can write, by name.
    fn key_stores(&self) -> Vec<(&'static str, String)> {
        let mut stores = vec![
            ("openssl pkcs12", self.openssl_pkcs12("openssl.p12", &[])),
            ("openssl pkcs12 -legacy", self.openssl_pkcs12("legacy.p12", &["-legacy"])),
        ];
        if keytool_available() {
            stores.push(("keytool PKCS12", self.keytool_store("keytool.p12", "PKCS12")));
            stores.push(("keytool JKS", self.keytool_store("keytool.jks", "JKS")));
            stores.push(("keytool JCEKS", self.keytool_store("keytool.jceks", "JCEKS")));
        }
        stores
    }
}

fn settings(pairs: &[(&str, &str)]) -> Vec<String> {
    let mut out = vec!["server.listeners=[\"SSL://127.0.0.1:0\"]".to_string()];
    out.extend(pairs.iter().map(|(k, v)| format!("security.{k}=\"{v}\"")));
    out
}

async fn start(settings: &[String]) -> TestServer {
    TestServer::start_with(&settings.iter().map(String::as_str).collect::<Vec<_>>()).await
}

#[tokio::test]
async fn a_listener_serves_the_certificate_of_a_pkcs12_or_jks_key_store_from_openssl_or_keytool() {
    let pki = Pki::new("test CA");
    let files = TlsFiles { dir: tempfile::tempdir().unwrap() };
    let stores = Stores::new(&pki, &files, "server");
    for (tool, store) in stores.key_stores() {
        let s = start(&settings(&[("tls_keystore", &store), ("tls_keystore_password", STORE_PASSWORD)])).await;
        let ssl = s.daemon.as_ref().unwrap().local_addrs()[0];
        let mut c = tls_connect(ssl, client_config(&pki.ca_pem, None))
            .await
            .unwrap_or_else(|e| panic!("{tool}: the handshake failed: {e}"));
        assert_eq!(c.metadata().await.unwrap().brokers[0].port, i32::from(ssl.port()), "{tool}");
        s.shutdown().await;
    }
}

#[tokio::test]
async fn a_replaced_key_store_is_served_once_the_file_changes() {
    let first = Pki::new("first CA");
    let files = TlsFiles { dir: tempfile::tempdir().unwrap() };
    let store = Stores::new(&first, &files, "server").openssl_pkcs12("server.p12", &[]);
    let s = start(&settings(&[("tls_keystore", &store), ("tls_keystore_password", STORE_PASSWORD)])).await;
    let ssl = s.daemon.as_ref().unwrap().local_addrs()[0];
    assert!(tls_connect(ssl, client_config(&first.ca_pem, None)).await.is_ok());
    // A store from another CA replaces the file (written aside, then
    // renamed in, as deployment tools do).
    let next = Pki::new("second CA");
    let next_files = TlsFiles { dir: tempfile::tempdir().unwrap() };
    let replacement = Stores::new(&next, &next_files, "server").openssl_pkcs12("server.p12", &[]);
    std::fs::copy(&replacement, format!("{store}.new")).unwrap();
    std::fs::rename(format!("{store}.new"), &store).unwrap();
    common::eventually("the new key store is served", || async {
        tls_connect(ssl, client_config(&next.ca_pem, None)).await.ok().map(|_| ())
    })
    .await;
    s.shutdown().await;
}

#[tokio::test]
async fn a_wrong_store_password_or_a_store_without_a_key_stops_the_start_naming_the_file() {
    let pki = Pki::new("test CA");
    let files = TlsFiles { dir: tempfile::tempdir().unwrap() };
    let stores = Stores::new(&pki, &files, "server");
    for (tool, store) in stores.key_stores() {
        let err = common::start_error(&settings(&[("tls_keystore", &store), ("tls_keystore_password", "wrong")])).await;
        assert!(err.contains("wrong password") && err.contains(&store), "{tool}: {err}");
    }
    let trust = stores.trust_store("trust.p12", "openssl");
    let err =
        common::start_error(&settings(&[("tls_keystore", &trust), ("tls_keystore_password", STORE_PASSWORD)])).await;
    assert!(err.contains("no private key"), "{err}");
    let both =
        settings(&[("tls_keystore", &trust), ("tls_certificate", &stores.cert), ("tls_private_key", &stores.key)]);
    assert!(common::start_error(&both).await.contains("set one"));
}

#[tokio::test]
async fn client_certificates_are_checked_against_a_jks_or_pkcs12_trust_store() {
    let pki = Pki::new("test CA");
    let files = TlsFiles { dir: tempfile::tempdir().unwrap() };
    let stores = Stores::new(&pki, &files, "server");
    let mut trust_stores = vec![("openssl pkcs12 -nokeys", stores.trust_store("openssl-trust.p12", "openssl"))];
    if keytool_available() {
        trust_stores.push(("keytool JKS", stores.trust_store("trust.jks", "JKS")));
        trust_stores.push(("keytool PKCS12", stores.trust_store("trust.p12", "PKCS12")));
        trust_stores.push(("keytool JCEKS", stores.trust_store("trust.jceks", "JCEKS")));
    }
    for (tool, trust) in trust_stores {
        let server = |password: &str| {
            settings(&[
                ("tls_certificate", &stores.cert),
                ("tls_private_key", &stores.key),
                ("tls_truststore", &trust),
                ("tls_truststore_password", password),
                ("tls_client_auth", "required"),
            ])
        };
        let s = start(&server(STORE_PASSWORD)).await;
        let ssl = s.daemon.as_ref().unwrap().local_addrs()[0];
        let alice = pki.issue(&[], "alice", None);
        let mut c = tls_connect(ssl, client_config(&pki.ca_pem, Some(alice))).await.unwrap();
        assert!(c.metadata().await.is_ok(), "{tool}");
        let stranger = Pki::new("other CA").issue(&[], "mallory", None);
        let refused = match tls_connect(ssl, client_config(&pki.ca_pem, Some(stranger))).await {
            Err(_) => true,
            Ok(mut c) => c.metadata().await.is_err(),
        };
        assert!(refused, "{tool}: a certificate from another CA was accepted");
        s.shutdown().await;
        // Without a password a JKS trust store loads unchecked, as in
        // Java; PKCS#12 ones encrypt their certificates, and where Java
        // would then trust nothing, kcoord says what is missing.
        if tool.contains("JKS") || tool.contains("JCEKS") {
            start(&server("")).await.shutdown().await;
        } else {
            let err = common::start_error(&server("")).await;
            assert!(err.contains("password is needed"), "{tool}: {err}");
        }
        let err = common::start_error(&server("wrong")).await;
        assert!(err.contains("wrong password"), "{tool}: {err}");
    }
}

/// A daemon whose SSL listener (PEM files) requires certificates from
/// `pki`'s CA, and that listener's address.
async fn mtls_server(pki: &Pki, files: &TlsFiles) -> (TestServer, std::net::SocketAddr) {
    let server = Stores::new(pki, files, "server");
    let s = start(&settings(&[
        ("tls_certificate", &server.cert),
        ("tls_private_key", &server.key),
        ("tls_ca", &server.ca),
        ("tls_client_auth", "required"),
    ]))
    .await;
    let ssl = s.daemon.as_ref().unwrap().local_addrs()[0];
    (s, ssl)
}

#[tokio::test]
async fn the_admin_cli_reads_kafkas_trust_and_key_store_properties() {
    let pki = Pki::new("test CA");
    let files = TlsFiles { dir: tempfile::tempdir().unwrap() };
    let (s, ssl) = mtls_server(&pki, &files).await;
    let admin = Stores::new(&pki, &files, "admin");
    let (truststore, keystore) = if keytool_available() {
        (admin.trust_store("cli-trust.jks", "JKS"), admin.keytool_store("admin.jks", "JKS"))
    } else {
        (admin.trust_store("cli-trust.p12", "openssl"), admin.openssl_pkcs12("admin.p12", &[]))
    };
    let cli = |password: &str| {
        let props = files.write(
            "client.properties",
            &format!(
                "security.protocol=SSL\nssl.truststore.location={truststore}\nssl.truststore.password={STORE_PASSWORD}\n\
                 ssl.keystore.location={keystore}\nssl.keystore.password={password}\n"
            ),
        );
        common::groups_list_with(ssl.port(), props)
    };
    let out = cli(STORE_PASSWORD).await;
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let out = cli("wrong").await;
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("wrong password") && err.contains(&keystore), "{err}");
    s.shutdown().await;
}

/// `text` (PEM) as a Java properties value continued over its lines, as
/// Kafka's documentation writes inline PEM: the line breaks are lost.
fn continued(text: &str) -> String {
    text.trim_end().lines().collect::<Vec<_>>().join(" \\\n    ")
}

#[tokio::test]
async fn the_admin_cli_takes_inline_pem_as_kafkas_properties_write_it() {
    let pki = Pki::new("test CA");
    let files = TlsFiles { dir: tempfile::tempdir().unwrap() };
    let (s, ssl) = mtls_server(&pki, &files).await;
    let cli = |(chain, key): (String, String)| {
        let props = files.write(
            "inline.properties",
            &format!(
                "security.protocol=SSL\nssl.keystore.type=PEM\nssl.truststore.type=PEM\n\
                 ssl.truststore.certificates={}\nssl.keystore.certificate.chain={}\nssl.keystore.key={}\n",
                continued(&pki.ca_pem),
                continued(&chain),
                continued(&key)
            ),
        );
        common::groups_list_with(ssl.port(), props)
    };
    let out = cli(pki.issue(&[], "admin", None)).await;
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    // A certificate from another CA is refused by the listener.
    let out = cli(Pki::new("other CA").issue(&[], "mallory", None)).await;
    assert!(!out.status.success());
    s.shutdown().await;
}

#[tokio::test]
async fn without_a_configured_ca_the_admin_cli_trusts_the_systems_cas_as_kafka_clients_do() {
    let pki = Pki::new("public CA");
    let files = TlsFiles { dir: tempfile::tempdir().unwrap() };
    let server = Stores::new(&pki, &files, "server");
    let s = start(&settings(&[("tls_certificate", &server.cert), ("tls_private_key", &server.key)])).await;
    let ssl = s.daemon.as_ref().unwrap().local_addrs()[0];
    let other = files.write("other-ca.pem", &Pki::new("other CA").ca_pem);
    let empty_dir = files.dir.path().join("no-certs");
    std::fs::create_dir(&empty_dir).unwrap();
    let empty_dir = empty_dir.display().to_string();
    // The system's CAs stand in as SSL_CERT_FILE (and an empty
    // SSL_CERT_DIR), which OpenSSL and kcoord both honour.
    for properties in ["security.protocol=SSL\n", "security.protocol=SSL\nssl.ca.location=probe\n"] {
        let props = files.write("system.properties", properties);
        let system_has = |ca: &str| {
            let env = [("SSL_CERT_FILE", ca.to_string()), ("SSL_CERT_DIR", empty_dir.clone())];
            let props = props.clone();
            async move {
                let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
                common::groups_list_with_env(ssl.port(), props, &env).await
            }
        };
        let out = system_has(&server.ca).await;
        assert!(out.status.success(), "{properties}: {}", String::from_utf8_lossy(&out.stderr));
        let out = system_has(&other).await;
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success() && err.contains("UnknownIssuer"), "{properties}: {err}");
    }
    s.shutdown().await;
}

/// `pairs` as `--set` settings whose values are TOML strings with their
/// line breaks (inline PEM).
fn text_settings(pairs: &[(&str, &str)]) -> Vec<String> {
    let mut out = vec!["server.listeners=[\"SSL://127.0.0.1:0\"]".to_string()];
    out.extend(pairs.iter().map(|(k, v)| format!("security.{k}={}", toml::Value::String(v.to_string()))));
    out
}

#[tokio::test]
async fn a_listener_serves_inline_pem_and_checks_clients_against_inline_cas() {
    let pki = Pki::new("test CA");
    let (chain, key) = pki.issue(&["localhost", "127.0.0.1"], "server", None);
    let s = start(&text_settings(&[
        ("tls_keystore_certificate_chain", &chain),
        ("tls_keystore_key", &key),
        ("tls_truststore_certificates", &pki.ca_pem),
        ("tls_client_auth", "required"),
    ]))
    .await;
    let ssl = s.daemon.as_ref().unwrap().local_addrs()[0];
    let alice = pki.issue(&[], "alice", None);
    let mut c = tls_connect(ssl, client_config(&pki.ca_pem, Some(alice))).await.unwrap();
    assert!(c.metadata().await.is_ok());
    let stranger = Pki::new("other CA").issue(&[], "mallory", None);
    let refused = match tls_connect(ssl, client_config(&pki.ca_pem, Some(stranger))).await {
        Err(_) => true,
        Ok(mut c) => c.metadata().await.is_err(),
    };
    assert!(refused, "a certificate from another CA was accepted");
    s.shutdown().await;
}

#[tokio::test]
async fn inline_pem_that_is_incomplete_damaged_or_doubled_stops_the_start_naming_the_setting() {
    let pki = Pki::new("test CA");
    let files = TlsFiles { dir: tempfile::tempdir().unwrap() };
    let stores = Stores::new(&pki, &files, "server");
    let (chain, key) = pki.issue(&["localhost"], "server", None);
    // A complete inline chain and key, with `extra` settings beside them.
    let inline = |extra: &[(&'static str, &str)]| -> Vec<(&str, String)> {
        let mut pairs = vec![("tls_keystore_certificate_chain", chain.clone()), ("tls_keystore_key", key.clone())];
        pairs.extend(extra.iter().map(|(k, v)| (*k, v.to_string())));
        pairs
    };
    let damaged_key = "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n";
    let cases: Vec<(Vec<(&str, String)>, &str)> = vec![
        (vec![("tls_keystore_certificate_chain", chain.clone())], "go together"),
        (
            vec![("tls_keystore_certificate_chain", chain.clone()), ("tls_keystore_key", damaged_key.to_string())],
            "tls_keystore_key: unexpected error: failed to parse private key",
        ),
        (
            vec![("tls_keystore_certificate_chain", "not PEM".to_string()), ("tls_keystore_key", key.clone())],
            "security.tls_keystore_certificate_chain",
        ),
        (inline(&[("tls_certificate", &stores.cert), ("tls_private_key", &stores.key)]), "set one"),
        (inline(&[("tls_keystore_password", "x")]), "tls_private_key_password"),
        (inline(&[("tls_truststore_certificates", &pki.ca_pem), ("tls_ca", &stores.ca)]), "set one"),
    ];
    for (pairs, expected) in cases {
        let pairs: Vec<(&str, &str)> = pairs.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let err = common::start_error(&text_settings(&pairs)).await;
        assert!(err.contains(expected), "{pairs:?}: {err}");
    }
}

/// Flips, truncates and extends the bytes of real stores: every damaged
/// store is an error or (where the damage missed what is checked, with no
/// password) a store, never a panic.
#[test]
fn damaged_key_stores_are_refused_without_a_panic() {
    let pki = Pki::new("test CA");
    let files = TlsFiles { dir: tempfile::tempdir().unwrap() };
    let stores = Stores::new(&pki, &files, "server");
    let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    // Without encryption or MAC the damage reaches the bag parser itself.
    let plain = stores.openssl_pkcs12("plain.p12", &["-keypbe", "NONE", "-certpbe", "NONE", "-nomac"]);
    let mut all = stores.key_stores();
    all.push(("openssl pkcs12 unencrypted", plain));
    // keytool protects JCEKS keys with 200,000 MD5 rounds, too slow for
    // 1,200 reads; jks.rs damages a JCEKS store of few rounds instead.
    all.retain(|(tool, _)| !tool.contains("JCEKS"));
    for (tool, store) in all {
        let original = std::fs::read(Path::new(&store)).unwrap();
        assert!(kcoord::security::keystore::parse(&original, Some(STORE_PASSWORD), STORE_PASSWORD).is_ok(), "{tool}");
        for round in 0..600 {
            let mut data = original.clone();
            match round % 3 {
                0 => {
                    for _ in 0..1 + next() % 4 {
                        let i = (next() as usize) % data.len();
                        data[i] ^= 1 << (next() % 8);
                    }
                }
                1 => data.truncate((next() as usize) % data.len()),
                _ => {
                    let i = (next() as usize) % data.len();
                    data[i] = [0x80, 0x84, 0xff, 0x00][(next() % 4) as usize];
                }
            }
            let _ = kcoord::security::keystore::parse(&data, Some(STORE_PASSWORD), STORE_PASSWORD);
            let _ = kcoord::security::keystore::parse(&data, None, "");
        }
    }
}
