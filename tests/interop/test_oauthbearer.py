"""SASL/OAUTHBEARER with every stock client: kcoord trusts the keys of a
throwaway identity provider (oauth.py: an RSA key, its key set at a
jwks_uri, RS256 tokens, a client-credentials token endpoint). librdkafka fetches its tokens
from the token endpoint itself (`sasl.oauthbearer.method=oidc`);
kafka-python, aiokafka and kafkajs are handed a token. The principal is the
token's subject, so ACLs apply to it: alice may consume in her groups,
mallory may not, and a token signed by anyone else does not log in at all.
librdkafka's unsecured development tokens log in where kcoord is told to
accept them."""

import time

import pytest
from confluent_kafka import Consumer, KafkaError, Producer

from conftest import node_script, wait_for
from oauth import Issuer, TokenEndpoint
from pki import make_pki
from test_authorization import kcoord_cli
from test_security_clients import (aiokafka_consume_and_commit, confluent_consume_and_commit,
                                   kafka_python_consume_and_commit)

TOPIC = "oauth"
CLIENTS = {"alice": "alice-secret", "admin": "admin-secret", "mallory": "mallory-secret"}


@pytest.fixture(scope="module")
def idp(tmp_path_factory):
    issuer = Issuer(tmp_path_factory.mktemp("idp"))
    endpoint = TokenEndpoint(issuer, CLIENTS)
    yield issuer, endpoint
    endpoint.close()


@pytest.fixture(scope="module")
def oauth_kcoord(make_kcoord_module, tmp_path_factory, idp):
    """kcoord with a SASL_SSL listener offering OAUTHBEARER only, trusting
    the idp's keys and enforcing ACLs: alice may read TOPIC and the groups
    "oauth-*", admin is a super user. 10 records in TOPIC, produced by admin.
    Returns {"addr", "ca"}."""
    issuer, endpoint = idp
    tmp = tmp_path_factory.mktemp("oauth-kcoord")
    pki = make_pki(tmp / "pki")
    acls = tmp / "acls.json"
    kcoord_cli("acls", "add", "--file", str(acls), "--allow-principal", "User:alice", "--operation", "Read",
               "--topic", TOPIC)
    kcoord_cli("acls", "add", "--file", str(acls), "--allow-principal", "User:alice", "--operation", "Read",
               "--group", "oauth-", "--resource-pattern-type", "prefixed")
    k = make_kcoord_module(tmp, topics=[f"{TOPIC}:1"], settings=[
        'server.listeners=["SASL_SSL://127.0.0.1:0"]',
        f'security.tls_certificate="{pki / "server.pem"}"',
        f'security.tls_private_key="{pki / "server.key"}"',
        'security.sasl_enabled_mechanisms=["OAUTHBEARER"]',
        f'security.oauthbearer_jwks_endpoint_url="{endpoint.jwks_url}"',
        'authorizer.enabled=true',
        'authorizer.super_users="User:admin"',
        f'authorizer.acl_file="{acls}"',
    ])
    line = next(l for l in k._lines if "serving on" in l)
    env = {"addr": line.split("serving on ")[1].split()[0], "ca": str(pki / "ca.pem")}
    p = Producer(oidc_conf(env, endpoint, "admin"))
    for i in range(10):
        p.produce(TOPIC, value=f"v{i}", partition=0)
    assert p.flush(60) == 0
    return env


def oidc_conf(env, endpoint, client):
    """librdkafka fetching its own tokens (client-credentials grant)."""
    return {"bootstrap.servers": env["addr"], "security.protocol": "SASL_SSL", "ssl.ca.location": env["ca"],
            "sasl.mechanism": "OAUTHBEARER", "sasl.oauthbearer.method": "oidc",
            "sasl.oauthbearer.client.id": client, "sasl.oauthbearer.client.secret": CLIENTS[client],
            "sasl.oauthbearer.token.endpoint.url": endpoint.url}


def test_confluent_kafka_fetches_its_token_from_the_token_endpoint_and_consumes_and_commits(oauth_kcoord, idp):
    _, endpoint = idp
    issued = endpoint.issued
    assert confluent_consume_and_commit(oidc_conf(oauth_kcoord, endpoint, "alice"), "oauth-rdk", TOPIC) == 5
    assert endpoint.issued > issued, "librdkafka asked the token endpoint"


def test_kafka_python_logs_in_with_a_bearer_token_and_consumes_and_commits(oauth_kcoord, idp):
    from kafka.net.sasl.oauth import AbstractTokenProvider

    issuer, _ = idp

    class Tokens(AbstractTokenProvider):
        def token(self):
            return issuer.token("alice")

    security = {"bootstrap_servers": oauth_kcoord["addr"], "security_protocol": "SASL_SSL",
                "ssl_cafile": oauth_kcoord["ca"], "sasl_mechanism": "OAUTHBEARER",
                "sasl_oauth_token_provider": Tokens()}
    assert kafka_python_consume_and_commit(security, "oauth-kp", TOPIC) == 5


def test_aiokafka_logs_in_with_a_bearer_token_and_consumes_and_commits(oauth_kcoord, idp):
    from aiokafka.abc import AbstractTokenProvider

    issuer, _ = idp

    class Tokens(AbstractTokenProvider):
        async def token(self):
            return issuer.token("alice")

    security = {"bootstrap_servers": oauth_kcoord["addr"], "security_protocol": "SASL_SSL",
                "tls": {"cafile": oauth_kcoord["ca"]}, "sasl_mechanism": "OAUTHBEARER",
                "sasl_oauth_token_provider": Tokens()}
    assert aiokafka_consume_and_commit(security, "oauth-aio", TOPIC) == 5


def test_kafkajs_logs_in_with_a_bearer_token_and_consumes_and_commits(oauth_kcoord, idp):
    issuer, _ = idp
    out = node_script("secure_commit", oauth_kcoord["addr"], "oauth-js", TOPIC, oauth_kcoord["ca"], "oauthbearer",
                      issuer.token("alice"), "")
    assert out["fetched"] == [{"partition": 0, "offset": 5}]


def test_a_foreign_token_does_not_log_in_and_an_unauthorized_subject_gets_kafkas_acl_error(oauth_kcoord, idp,
                                                                                             tmp_path):
    issuer, endpoint = idp
    stranger = Issuer(tmp_path / "stranger", kid=issuer.kid)
    errors = []
    foreign = {"bootstrap.servers": oauth_kcoord["addr"], "security.protocol": "SASL_SSL",
               "ssl.ca.location": oauth_kcoord["ca"], "sasl.mechanism": "OAUTHBEARER",
               "oauth_cb": lambda _: (stranger.token("alice"), time.time() + 600),
               "error_cb": lambda e: errors.append(e)}
    p = Producer(foreign)
    wait_for("an authentication error", lambda: p.poll(0.5) is not None and any(
        e.code() == KafkaError._AUTHENTICATION for e in errors), timeout=60)
    assert any("invalid_token" in e.str() for e in errors), [e.str() for e in errors]

    p.purge()
    del p

    # mallory's token is genuine, but no ACL lets mallory use a group.
    c = Consumer({**oidc_conf(oauth_kcoord, endpoint, "mallory"), "group.id": "oauth-mallory"})
    c.subscribe([TOPIC])

    def group_error():
        m = c.poll(0.5)
        return m.error().code() if m is not None and m.error() else None

    try:
        assert wait_for("mallory's group error", group_error) == KafkaError.GROUP_AUTHORIZATION_FAILED
    finally:
        c.close()


def test_librdkafka_unsecured_development_tokens_log_in_where_kcoord_accepts_them(make_kcoord):
    k = make_kcoord(topics=["dev:1"], settings=[
        'server.listeners=["SASL_PLAINTEXT://127.0.0.1:0"]',
        'security.sasl_enabled_mechanisms=["OAUTHBEARER"]',
        'security.oauthbearer_allow_unsecured_jwt=true',
    ])
    line = next(l for l in k._lines if "serving on" in l)
    conf = {"bootstrap.servers": line.split("serving on ")[1].split()[0], "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "OAUTHBEARER", "enable.sasl.oauthbearer.unsecure.jwt": True,
            "sasl.oauthbearer.config": "principal=dev lifeSeconds=600"}
    p = Producer(conf)
    p.produce("dev", value="hello", partition=0)
    assert p.flush(30) == 0
    c = Consumer({**conf, "group.id": "dev-group", "auto.offset.reset": "earliest", "enable.auto.commit": False})
    try:
        c.subscribe(["dev"])
        m = wait_for("the record", lambda: (lambda m: m if m is not None and not m.error() else None)(c.poll(1.0)),
                     timeout=60)
        assert m.value() == b"hello"
        c.commit(message=m, asynchronous=False)
    finally:
        c.close()
