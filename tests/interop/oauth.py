"""A throwaway OAuth identity provider for OAUTHBEARER tests: an RSA key
made with the openssl command line, its JSON Web Key Set, RS256 access
tokens signed with `openssl dgst`, and an OAuth 2 token endpoint
(client-credentials grant) on 127.0.0.1, as librdkafka's
`sasl.oauthbearer.method=oidc` calls it. Nothing secret is committed."""

import base64
import json
import subprocess
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def b64url(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


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
    grant and HTTP Basic client authentication returns a token whose
    subject is the client id; GET /certs returns the key set (jwks_uri).
    Counts the tokens it issued."""

    def __init__(self, issuer, clients):
        self.issuer = issuer
        self.clients = clients
        self.issued = 0
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
                form = dict(p.split("=", 1) for p in self.rfile.read(length).decode().split("&") if "=" in p)
                auth = self.headers.get("Authorization", "")
                client, _, secret = base64.b64decode(auth.removeprefix("Basic ")).decode().partition(":") \
                    if auth.startswith("Basic ") else ("", "", "")
                if self.path != "/token" or form.get("grant_type") != "client_credentials" \
                        or endpoint.clients.get(client) != secret:
                    self.send_response(401)
                    self.end_headers()
                    return
                endpoint.issued += 1
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
