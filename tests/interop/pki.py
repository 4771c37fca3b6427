"""A throwaway CA, a server certificate for localhost/127.0.0.1, and kcoord
credentials files, made per test with the openssl command line and
`kcoord users add`; nothing secret is committed."""

import shutil
import subprocess

from conftest import KCOORD_BIN


def openssl(*args, cwd):
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def make_pki(pki):
    """Writes ca.pem, server.pem and server.key into directory `pki`."""
    pki.mkdir(exist_ok=True)
    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=kcoord test CA",
            "-keyout", "ca.key", "-out", "ca.pem", cwd=pki)
    openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=localhost", "-keyout", "server.key",
            "-out", "server.csr", cwd=pki)
    (pki / "san.ext").write_text("subjectAltName=DNS:localhost,IP:127.0.0.1\n")
    openssl("x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
            "-days", "2", "-extfile", "san.ext", "-out", "server.pem", cwd=pki)
    return pki


def make_client_cert(pki, name, subject):
    """Writes <name>.pem and <name>.key into `pki`: a client certificate for
    `subject` (e.g. "/O=Example/CN=alice") signed by the CA of make_pki."""
    openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", subject, "-keyout", f"{name}.key",
            "-out", f"{name}.csr", cwd=pki)
    # Extensions make it an X.509 v3 certificate: rustls refuses v1.
    (pki / f"{name}.ext").write_text("basicConstraints=CA:FALSE\nextendedKeyUsage=clientAuth\n")
    openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
            "-days", "2", "-extfile", f"{name}.ext", "-out", f"{name}.pem", cwd=pki)
    return pki / f"{name}.pem", pki / f"{name}.key"


def make_pkcs12(pki, name, password):
    """Writes <name>.p12: <name>.pem and .key of `pki` (and the CA) as
    `openssl pkcs12 -export` stores them, OpenSSL 3's defaults."""
    openssl("pkcs12", "-export", "-name", name, "-in", f"{name}.pem", "-inkey", f"{name}.key",
            "-certfile", "ca.pem", "-passout", f"pass:{password}", "-out", f"{name}.p12", cwd=pki)
    return pki / f"{name}.p12"


def keytool_available():
    return shutil.which("keytool") is not None


def make_jks_stores(pki, name, password):
    """With Java's keytool, writes <name>.jks (the key store of
    <name>.pem/.key) and truststore.jks (the CA); returns both paths."""
    source = make_pkcs12(pki, name, password)
    subprocess.run(["keytool", "-importkeystore", "-noprompt", "-srckeystore", str(source),
                    "-srcstoretype", "PKCS12", "-srcstorepass", password, "-destkeystore", str(pki / f"{name}.jks"),
                    "-deststoretype", "JKS", "-deststorepass", password, "-destkeypass", password],
                   check=True, capture_output=True)
    subprocess.run(["keytool", "-importcert", "-noprompt", "-alias", "ca", "-file", str(pki / "ca.pem"),
                    "-keystore", str(pki / "truststore.jks"), "-storetype", "JKS", "-storepass", password],
                   check=True, capture_output=True)
    return pki / f"{name}.jks", pki / "truststore.jks"


def add_user(users, user, password):
    """Adds `user` to the credentials file `users` (salted, never the password)."""
    subprocess.run([KCOORD_BIN, "users", "add", "--file", str(users), user], input=password + "\n",
                   text=True, check=True, capture_output=True)
    assert password not in users.read_text()


def tls_listener_settings(pki, users, listeners='["SASL_SSL://127.0.0.1:0"]'):
    """kcoord settings for TLS/SASL listeners with the certificate of `pki`."""
    return [
        f"server.listeners={listeners}",
        f'security.tls_certificate="{pki / "server.pem"}"',
        f'security.tls_private_key="{pki / "server.key"}"',
        f'security.credentials_file="{users}"',
    ]
