"""A throwaway OAuth identity provider for OAUTHBEARER tests: an RSA key
made with the openssl command line, its JSON Web Key Set, RS256 access
tokens signed with `openssl dgst`, and an OAuth 2 token endpoint
(client-credentials grant, and the jwt-bearer grant of RFC 7523 with
RS256 assertions checked against each client's public key) on 127.0.0.1,
as librdkafka's `sasl.oauthbearer.method=oidc` calls it. Nothing secret is
committed."""

import base64
import json
import subprocess
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs

JWT_BEARER = "urn:ietf:params:oauth:grant-type:jwt-bearer"


def b64url(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def b64url_decode(text):
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def make_rsa_key(path, traditional=False):
    """An RSA private key at `path` (PKCS#8 PEM, or PKCS#1 with
    `traditional`); returns the path of its public key."""
    args = ["openssl", "genrsa", "-out", str(path)] + (["-traditional"] if traditional else []) + ["2048"]
    subprocess.run(args, check=True, capture_output=True)
    public = Path(f"{path}.pub")
    subprocess.run(["openssl", "rsa", "-in", str(path), "-pubout", "-out", str(public)], check=True,
                   capture_output=True)
    return public


def assertion_client(assertion, public_keys, audience):
    """The client an RS256 jwt-bearer assertion authenticates, or None: its
    signature must verify with the public key of the client it names as
    issuer and subject, its audience must be the endpoint's, and it must be
    within exp and nbf."""
    try:
        header, payload, signature = assertion.split(".")
        claims = json.loads(b64url_decode(payload))
        if json.loads(b64url_decode(header)).get("alg") != "RS256":
            return None
    except ValueError:
        return None
    client = claims.get("sub")
    now = time.time()
    if client not in public_keys or claims.get("iss") != client or claims.get("aud") != audience \
            or not claims.get("exp", 0) > now or not claims.get("nbf", now + 1) <= now:
        return None
    with tempfile.NamedTemporaryFile() as sig:
        sig.write(b64url_decode(signature))
        sig.flush()
        verified = subprocess.run(["openssl", "dgst", "-sha256", "-verify", str(public_keys[client]), "-signature",
                                   sig.name], input=f"{header}.{payload}".encode(), capture_output=True)
    return client if verified.returncode == 0 else None


class Issuer:
    """An RSA signing key and the tokens it signs."""

    def __init__(self, directory, kid="test-key"):
        directory.mkdir(parents=True, exist_ok=True)
        self.key = directory / f"{kid}.key"
        self.kid = kid
        subprocess.run(["openssl", "genrsa", "-out", str(self.key), "2048"], check=True, capture_output=True)
        out = subprocess.run(["openssl", "rsa", "-in", str(self.key), "-noout", "-modulus"], check=True,
                             capture_output=True, text=True).stdout
        self.modulus = bytes.fromhex(out.strip().split("=", 1)[1])

    def jwks(self):
        return json.dumps({"keys": [{"kty": "RSA", "kid": self.kid, "use": "sig", "alg": "RS256",
                                     "n": b64url(self.modulus), "e": b64url((65537).to_bytes(3, "big"))}]})

    def write_jwks(self, path):
        path.write_text(self.jwks())
        return path

    def token(self, sub, lifetime_s=600, **claims):
        now = int(time.time())
        header = {"alg": "RS256", "typ": "JWT", "kid": self.kid}
        body = {"sub": sub, "iat": now, "exp": now + lifetime_s, **claims}
        signing_input = f"{b64url(json.dumps(header).encode())}.{b64url(json.dumps(body).encode())}"
        signature = subprocess.run(["openssl", "dgst", "-sha256", "-sign", str(self.key)],
                                   input=signing_input.encode(), check=True, capture_output=True).stdout
        return f"{signing_input}.{b64url(signature)}"


class TokenEndpoint:
    """An OAuth 2 token endpoint: POST /token with the client-credentials
    grant and HTTP Basic client authentication (`clients`: id -> secret),
    or with the jwt-bearer grant and an assertion signed by the client's key
    (`assertion_keys`: id -> public key PEM path), returns a token whose
    subject is the client id; GET /certs returns the key set (jwks_uri).
    Counts the tokens it issued, per grant."""

    def __init__(self, issuer, clients, assertion_keys=None):
        self.issuer = issuer
        self.clients = clients
        self.assertion_keys = assertion_keys or {}
        self.issued = 0
        self.issued_by_grant = {}
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                if self.path != "/certs":
                    self.send_response(404)
                    self.end_headers()
                    return
                body = endpoint.issuer.jwks().encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_POST(self):
                length = int(self.headers.get("Content-Length", 0))
                form = {k: v[0] for k, v in parse_qs(self.rfile.read(length).decode()).items()}
                grant = form.get("grant_type")
                if grant == JWT_BEARER:
                    client = assertion_client(form.get("assertion", ""), endpoint.assertion_keys, endpoint.url)
                else:
                    auth = self.headers.get("Authorization", "")
                    client, _, secret = base64.b64decode(auth.removeprefix("Basic ")).decode().partition(":") \
                        if auth.startswith("Basic ") else ("", "", "")
                    if grant != "client_credentials" or endpoint.clients.get(client) != secret:
                        client = None
                if self.path != "/token" or client is None:
                    self.send_response(401)
                    self.end_headers()
                    return
                endpoint.issued += 1
                endpoint.issued_by_grant[grant] = endpoint.issued_by_grant.get(grant, 0) + 1
                body = json.dumps({"access_token": endpoint.issuer.token(client), "token_type": "bearer",
                                   "expires_in": 600}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/token"
        self.jwks_url = f"http://127.0.0.1:{self.server.server_address[1]}/certs"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()
