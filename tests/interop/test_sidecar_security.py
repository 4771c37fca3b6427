"""A sidecar next to a secured cluster, with real clients: the upstream is a
standalone kcoord with only a SASL_SSL listener and a SCRAM-SHA-512 user
for the sidecar (librdkafka's mock cluster speaks neither TLS nor SASL);
the sidecar logs in with its own credentials (password from a file) and
serves clients on its own SASL_SSL listener with its own users.
confluent-kafka (SCRAM-SHA-512) and kcat (PLAIN and SCRAM-SHA-512) consume
in a group and commit through it. Then a cluster that only speaks
OAUTHBEARER: the sidecar fetches its own tokens from the identity provider,
and librdkafka clients keep their OAuth settings."""

import subprocess
import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from conftest import kcat_path, needs_kcat, wait_for
from groups import stop_all
from java_client import JavaClient, needs_java
from pki import add_user, make_pki, tls_listener_settings
from sidecar_harness import Sidecar

SIDECAR_USER, SIDECAR_PASSWORD = "kcoord-sidecar", "upstream-secret"
USER, PASSWORD = "alice", "alice-secret"


@pytest.fixture(params=["local", "upstream"])
def secured(make_kcoord, tmp_path, request):
    """(sidecar, upstream, ca path): both SASL_SSL only. With "local" the
    sidecar authenticates alice from its own users; with "upstream"
    (sidecar.client_authentication) only the upstream knows her, and the
    sidecar relays her logins there."""
    pki = make_pki(tmp_path / "pki")
    upstream_users = tmp_path / "upstream-users.json"
    add_user(upstream_users, SIDECAR_USER, SIDECAR_PASSWORD)
    sidecar_users = tmp_path / "sidecar-users.json"
    if request.param == "upstream":
        add_user(upstream_users, USER, PASSWORD)
        add_user(sidecar_users, "someone-else", "sidecar-only-secret")
    else:
        add_user(sidecar_users, USER, PASSWORD)
    upstream = make_kcoord(topics=["secure:3"], settings=tls_listener_settings(pki, upstream_users))
    relay = [f'sidecar.client_authentication="{request.param}"']
    sidecar = Sidecar(tmp_path / "sidecar", upstream.bootstrap,
                      settings=tls_listener_settings(pki, sidecar_users) + relay + sidecar_login(pki, tmp_path)).start()
    yield sidecar, upstream, str(pki / "ca.pem")
    sidecar.stop()


def sidecar_login(pki, tmp_path):
    """Settings that make a sidecar log in upstream as SIDECAR_USER."""
    password_file = tmp_path / "upstream-password"
    password_file.write_text(SIDECAR_PASSWORD + "\n")
    return [
        'sidecar.upstream_security.security_protocol="SASL_SSL"',
        'sidecar.upstream_security.sasl_mechanism="SCRAM-SHA-512"',
        f'sidecar.upstream_security.sasl_username="{SIDECAR_USER}"',
        f'sidecar.upstream_security.sasl_password_file="{password_file}"',
        f'sidecar.upstream_security.ssl_ca_location="{pki / "ca.pem"}"',
    ]


def client_conf(addr, ca, user=USER, password=PASSWORD):
    return {"bootstrap.servers": addr, "security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.username": user, "sasl.password": password, "ssl.ca.location": ca}


def java_props(ca, user=USER, password=PASSWORD):
    """Apache Kafka's Java client over SASL_SSL with SCRAM-SHA-512."""
    return {"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.jaas.config": "org.apache.kafka.common.security.scram.ScramLoginModule required "
                                f'username="{user}" password="{password}";',
            "ssl.truststore.type": "PEM", "ssl.truststore.location": ca}


def produce(conf, n):
    p = Producer(conf)
    for i in range(n):
        p.produce("secure", key=f"k{i}", value=f"v{i}", partition=i % 3)
    assert p.flush(60) == 0


def committed(conf, group):
    c = Consumer({**conf, "group.id": group})
    try:
        return {tp.partition: tp.offset for tp in
                c.committed([TopicPartition("secure", p) for p in range(3)], timeout=30)}
    finally:
        c.close()


def consume_all_and_commit(conf, group, n):
    """Consumes the n records produce() wrote (keys k0..), commits, and
    checks the commit reads back: n/3 on each partition."""
    c = Consumer({**conf, "group.id": group, "auto.offset.reset": "earliest", "enable.auto.commit": False,
                  "session.timeout.ms": 6000, "heartbeat.interval.ms": 500})
    c.subscribe(["secure"])
    keys = []
    while len(keys) < n:
        m = c.poll(1.0)
        if m is not None and not m.error():
            keys.append(m.key().decode())
    assert sorted(keys) == sorted(f"k{i}" for i in range(n))
    c.commit(asynchronous=False)
    c.close()
    assert committed(conf, group) == {p: n // 3 for p in range(3)}


def test_confluent_kafka_over_sasl_ssl_produces_consumes_and_commits_through_a_sidecar_of_a_sasl_ssl_cluster(secured):
    sidecar, upstream, ca = secured
    conf = client_conf(sidecar.bootstrap, ca)
    produce(conf, 30)
    consume_all_and_commit(conf, "secure-rdk", 30)
    # Metadata named only the sidecar's SASL_SSL listener.
    md = Producer(conf).list_topics(timeout=30)
    assert [f"{b.host}:{b.port}" for b in md.brokers.values()] == [sidecar.bootstrap]
    # Written through to the upstream under the sidecar's own identity.
    upstream_conf = client_conf(upstream.bootstrap, ca, SIDECAR_USER, SIDECAR_PASSWORD)
    from conftest import wait_for
    wait_for("the offsets upstream", lambda: committed(upstream_conf, "secure-rdk") == {0: 10, 1: 10, 2: 10})


@needs_kcat
@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-512"])
def test_kcat_over_sasl_ssl_consumes_in_a_group_through_a_sidecar_of_a_sasl_ssl_cluster(secured, mechanism):
    # Debian's kcat is librdkafka 2.0.2, which sends its SCRAM client nonce
    # twice; kcoord accepts that as Kafka's ScramSaslServer does.
    sidecar, _, ca = secured
    conf = client_conf(sidecar.bootstrap, ca)
    produce(conf, 12)
    security = []
    for k, v in {**conf, "sasl.mechanism": mechanism}.items():
        if k != "bootstrap.servers":
            security += ["-X", f"{k.replace('sasl.mechanism', 'sasl.mechanisms')}={v}"]
    out = subprocess.run(
        ["timeout", "-s", "INT", "90", kcat_path(), "-b", sidecar.bootstrap, "-G", f"secure-kcat-{mechanism}", "secure",
         *security, "-X", "auto.offset.reset=earliest", "-X", "session.timeout.ms=6000",
         "-X", "heartbeat.interval.ms=500", "-c", "12", "-f", "%k\\n"],
        capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert sorted(out.stdout.split()) == sorted(f"k{i}" for i in range(12)), out.stderr


@pytest.fixture(params=["client_credentials", "jwt-bearer"])
def oauth_cluster(make_kcoord, tmp_path, request):
    """A cluster that only speaks OAUTHBEARER over SASL_SSL, its identity
    provider (oauth.py), and a sidecar that logs in upstream with tokens of
    its own client id and lets clients log in with tokens from the same
    provider. The sidecar and the clients authenticate to the provider with
    client secrets, or (jwt-bearer) with RS256 assertions signed by their
    own keys, the sidecar's a PKCS#1 key, alice's PKCS#8. Returns
    (sidecar, upstream, ca path, token endpoint, {client: librdkafka
    settings for the token endpoint})."""
    from oauth import JWT_BEARER, Issuer, TokenEndpoint, make_rsa_key

    issuer = Issuer(tmp_path / "idp")
    keys = {"kcoord-sidecar": tmp_path / "sidecar.key", "alice": tmp_path / "alice.key"}
    public = {c: make_rsa_key(k, traditional=c == "kcoord-sidecar") for c, k in keys.items()}
    endpoint = TokenEndpoint(issuer, {"kcoord-sidecar": "sidecar-secret", "alice": "alice-secret"},
                             assertion_keys=public)
    if request.param == "jwt-bearer":
        logins = {c: {"sasl.oauthbearer.grant.type": JWT_BEARER, "sasl.oauthbearer.assertion.algorithm": "RS256",
                      "sasl.oauthbearer.assertion.private.key.file": str(k), "sasl.oauthbearer.assertion.claim.sub": c,
                      "sasl.oauthbearer.assertion.claim.iss": c, "sasl.oauthbearer.assertion.claim.aud": endpoint.url,
                      "sasl.oauthbearer.assertion.claim.jti.include": "true"}
                  for c, k in keys.items()}
    else:
        # With SASL extensions, as Confluent Cloud wants them: kcoord accepts
        # librdkafka's and sends its own.
        logins = {c: {"sasl.oauthbearer.client.id": c, "sasl.oauthbearer.client.secret": f"{c.split('-')[-1]}-secret",
                      "sasl.oauthbearer.extensions": "logicalCluster=lkc-1,identityPoolId=pool-2"}
                  for c in keys}
    pki = make_pki(tmp_path / "pki")
    jwks = issuer.write_jwks(tmp_path / "jwks.json")
    oauth_listener = [
        'server.listeners=["SASL_SSL://127.0.0.1:0"]',
        f'security.tls_certificate="{pki / "server.pem"}"',
        f'security.tls_private_key="{pki / "server.key"}"',
        'security.sasl_enabled_mechanisms=["OAUTHBEARER"]',
        f'security.oauthbearer_jwks_endpoint_url="file://{jwks}"',
    ]
    upstream = make_kcoord(topics=["secure:3"], settings=oauth_listener)
    # The sidecar takes librdkafka's keys with "_" for ".".
    sidecar_login = [f'sidecar.upstream_security.{k.replace(".", "_")}={json_value(v)}'
                     for k, v in logins["kcoord-sidecar"].items()]
    sidecar = Sidecar(tmp_path / "sidecar", upstream.bootstrap, settings=oauth_listener + sidecar_login + [
        'sidecar.upstream_security.security_protocol="SASL_SSL"',
        'sidecar.upstream_security.sasl_mechanism="OAUTHBEARER"',
        f'sidecar.upstream_security.sasl_oauthbearer_token_endpoint_url="{endpoint.url}"',
        f'sidecar.upstream_security.ssl_ca_location="{pki / "ca.pem"}"',
    ]).start()
    yield sidecar, upstream, str(pki / "ca.pem"), endpoint, logins
    sidecar.stop()
    endpoint.close()


def json_value(v):
    """A setting's value as kcoord's --set takes it (TOML)."""
    return v if v == "true" else f'"{v}"'


def oidc_conf(addr, ca, endpoint, login):
    return {"bootstrap.servers": addr, "security.protocol": "SASL_SSL", "ssl.ca.location": ca,
            "sasl.mechanism": "OAUTHBEARER", "sasl.oauthbearer.method": "oidc",
            "sasl.oauthbearer.token.endpoint.url": endpoint.url, **login}


def test_a_sidecar_of_an_oauth_cluster_serves_clients_that_keep_their_oauth_settings(oauth_cluster):
    from conftest import wait_for

    sidecar, upstream, ca, endpoint, logins = oauth_cluster
    conf = oidc_conf(sidecar.bootstrap, ca, endpoint, logins["alice"])
    produce(conf, 30)
    consume_all_and_commit(conf, "secure-oauth", 30)
    # Written through to the upstream by the sidecar's own OAUTHBEARER login.
    upstream_conf = oidc_conf(upstream.bootstrap, ca, endpoint, logins["kcoord-sidecar"])
    wait_for("the offsets upstream", lambda: committed(upstream_conf, "secure-oauth") == {0: 10, 1: 10, 2: 10})
    # Every token came through the grant under test (librdkafka's and kcoord's).
    assert list(endpoint.issued_by_grant) == [
        "urn:ietf:params:oauth:grant-type:jwt-bearer" if "sasl.oauthbearer.grant.type" in logins["alice"]
        else "client_credentials"]


@pytest.fixture
def relaying(make_kcoord, tmp_path):
    """(sidecar, ca): a sidecar that lets the upstream authenticate its
    clients (sidecar.client_authentication = "upstream"). Only the upstream
    knows alice; it ends SASL sessions after 3 s (KIP-368), so clients must
    re-authenticate through the sidecar while they work."""
    pki = make_pki(tmp_path / "pki")
    upstream_users = tmp_path / "upstream-users.json"
    add_user(upstream_users, SIDECAR_USER, SIDECAR_PASSWORD)
    add_user(upstream_users, USER, PASSWORD)
    upstream = make_kcoord(topics=["secure:3"], settings=tls_listener_settings(pki, upstream_users) + [
        "security.connections_max_reauth_ms=3000"])
    nobody = tmp_path / "sidecar-users.json"
    add_user(nobody, "someone-else", "sidecar-only-secret")
    sidecar = Sidecar(tmp_path / "sidecar", upstream.bootstrap, settings=tls_listener_settings(pki, nobody) + [
        'sidecar.client_authentication="upstream"'] + sidecar_login(pki, tmp_path)).start()
    yield sidecar, str(pki / "ca.pem")
    sidecar.stop()


def relayed_logins(sidecar):
    """(successful logins relayed, links opened for them) on the sidecar."""
    import urllib.request
    with urllib.request.urlopen(f"http://{sidecar.metrics}/metrics", timeout=30) as r:
        lines = r.read().decode().splitlines()

    def total(prefix, part):
        return sum(float(l.rsplit(" ", 1)[1]) for l in lines if l.startswith(prefix) and part in l)
    return total("kcoord_authentications_total", 'result="success"'), \
        total("kcoord_sidecar_upstream_connects_total", 'use="relay"')


def test_confluent_kafka_logs_in_upstream_through_a_relaying_sidecar_and_re_authenticates_there(relaying):
    import time
    sidecar, ca = relaying
    conf = client_conf(sidecar.bootstrap, ca)
    produce(conf, 30)
    # A consumer that keeps working over three upstream session lifetimes:
    # librdkafka re-authenticates each connection (KIP-368) through the
    # sidecar, which relays it, so nothing is cut off.
    c = Consumer({**conf, "group.id": "relayed", "auto.offset.reset": "earliest", "enable.auto.commit": False,
                  "session.timeout.ms": 6000, "heartbeat.interval.ms": 500})
    c.subscribe(["secure"])
    keys, errors = [], []
    end = time.monotonic() + 10
    p = Producer(conf)
    sent = 0
    while time.monotonic() < end or len(keys) < 30 + sent:
        assert time.monotonic() < end + 60, f"only {len(keys)} of {30 + sent} records"
        if time.monotonic() < end and sent < 20 and len(keys) >= 30:
            p.produce("secure", key=f"late{sent}", value="x", partition=sent % 3)
            p.flush(30)
            sent += 1
        m = c.poll(0.2)
        if m is None:
            continue
        if m.error():
            errors.append(str(m.error()))
        else:
            keys.append(m.key().decode())
    c.commit(asynchronous=False)
    c.close()
    assert not errors, errors
    assert sorted(keys) == sorted([f"k{i}" for i in range(30)] + [f"late{i}" for i in range(sent)])
    assert sum(committed(conf, "relayed").values()) == 30 + sent
    # Logins outnumber the links they were relayed over: sessions were
    # renewed on their connections, not by reconnecting.
    logins, links = relayed_logins(sidecar)
    assert links >= 1 and logins >= links + 2, (logins, links)
    # A password only the sidecar's own file knows is refused: the
    # upstream decides.
    bad = Producer({**client_conf(sidecar.bootstrap, ca, "someone-else", "sidecar-only-secret"),
                    "message.timeout.ms": 3000})
    outcome = []
    bad.produce("secure", value="no", on_delivery=lambda err, msg: outcome.append(err))
    bad.flush(30)
    assert len(outcome) == 1 and outcome[0] is not None, outcome


@needs_java
def test_the_java_client_consumes_and_commits_through_a_secured_sidecar(secured, java_classpath, tmp_path):
    sidecar, upstream, ca = secured
    produce(client_conf(sidecar.bootstrap, ca), 30)
    java = JavaClient(java_classpath, sidecar.bootstrap, java_props(ca))
    member = java.member(tmp_path, "m", "secure-java", "secure")
    try:
        wait_for("30 records consumed and committed",
                 lambda: member.state().get("positions") == {f"secure:{p}": 10 for p in range(3)}, timeout=90)
    finally:
        stop_all([member])
    assert not member.state()["errors"], member.state()
    assert {k: v["offset"] for k, v in java.admin("offsets", group="secure-java")["offsets"].items()} == {
        f"secure:{p}": 10 for p in range(3)}


@needs_java
def test_the_java_client_re_authenticates_upstream_through_a_relaying_sidecar(relaying, java_classpath, tmp_path):
    sidecar, ca = relaying
    conf = client_conf(sidecar.bootstrap, ca)
    produce(conf, 30)
    java = JavaClient(java_classpath, sidecar.bootstrap, java_props(ca))
    member = java.member(tmp_path, "m", "relayed-java", "secure")
    try:
        wait_for("the first 30 records", lambda: member.state().get("consumed", 0) >= 30, timeout=90)
        # Keep the member working over three upstream session lifetimes
        # (3 s): one record at a time, each consumed before the next.
        p = Producer(conf)
        sent, end = 0, time.monotonic() + 10
        while time.monotonic() < end:
            p.produce("secure", key=f"late{sent}", value="x", partition=sent % 3)
            p.flush(30)
            sent += 1
            wait_for(f"late record {sent}", lambda: member.state().get("consumed", 0) >= 30 + sent, timeout=30)
        wait_for("every record committed",
                 lambda: sum(committed(conf, "relayed-java").values()) == 30 + sent, timeout=30)
    finally:
        stop_all([member])
    assert member.state()["consumed"] == 30 + sent and not member.state()["errors"], member.state()
    logins, links = relayed_logins(sidecar)
    assert links >= 1 and logins >= links + 2, (logins, links)
