"""SASL/GSSAPI (Kerberos) with the stock clients that speak it: kcat
(Debian's librdkafka with Cyrus SASL, logging in from a keytab through its
kinit command), kafka-python and aiokafka (python-gssapi, from a ticket
cache), and kcoord's own client side: the admin CLI and a sidecar in front
of a Kerberized cluster, logging in from their keytabs. A throwaway realm
(kerberos.py) issues the tickets. The principal is the client's short name
under Kafka's principal-to-local rules, so the ACLs name User:alice: alice
consumes in her groups, mallory is refused the group, a rule can map her to
alice, and a ticket for a service key kcoord does not hold fails with
Kafka's authentication error."""

import subprocess
import time

import pytest

from conftest import KCOORD_BIN, kcat_path, needs_kcat, wait_for
from kerberos import Realm, kdc_available
from sidecar_harness import Sidecar
from test_authorization import kcoord_cli
from test_security_clients import aiokafka_consume_and_commit, kafka_python_consume_and_commit, kcat_consume

pytestmark = pytest.mark.skipif(not kdc_available(),
                                reason="MIT Kerberos' KDC is not installed (scripts/test installs it when root)")

TOPIC = "krb"
PYTHON_GSSAPI = {"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "GSSAPI",
                 "sasl_kerberos_service_name": "kafka"}


@pytest.fixture(scope="module")
def realm(tmp_path_factory):
    r = Realm(tmp_path_factory.mktemp("realm"), {
        "kafka.keytab": ["kafka/127.0.0.1", "kafka/localhost"],
        "localhost-only.keytab": ["kafka/localhost"],
        "alice.keytab": ["alice"],
        "mallory.keytab": ["mallory"],
        "admin.keytab": ["admin"],
        "sidecar.keytab": ["kcoord-sidecar"],
    })
    # Every process of this module (daemons, clients) uses the realm.
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("KRB5_CONFIG", r.krb5_conf)
        yield r
    r.close()


@pytest.fixture
def ccache(tmp_path, monkeypatch):
    """A ticket cache of the test's own (kcat's kinit writes there)."""
    path = tmp_path / "ccache"
    monkeypatch.setenv("KRB5CCNAME", f"FILE:{path}")
    return path


def gssapi_listener(realm, keytab="kafka.keytab"):
    return ['server.listeners=["SASL_PLAINTEXT://127.0.0.1:0"]',
            'security.sasl_enabled_mechanisms=["GSSAPI"]',
            f'security.sasl_kerberos_keytab="{realm.keytab(keytab)}"']


def acl_settings(tmp, may_read):
    """ACLs letting `may_read` read TOPIC and the groups "krb-*"; admin and
    the sidecar are super users."""
    acls = tmp / "acls.json"
    for resource in (["--topic", TOPIC], ["--group", "krb-", "--resource-pattern-type", "prefixed"]):
        kcoord_cli("acls", "add", "--file", str(acls), "--allow-principal", f"User:{may_read}", "--operation", "Read",
                   *resource)
    return ["authorizer.enabled=true", 'authorizer.super_users="User:admin;User:kcoord-sidecar"',
            f'authorizer.acl_file="{acls}"']


def kcat_conf(realm, addr, who):
    """librdkafka settings logging `who` in from its keytab."""
    return {"bootstrap.servers": addr, "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "GSSAPI",
            "sasl.kerberos.service.name": "kafka", "sasl.kerberos.principal": who,
            "sasl.kerberos.keytab": realm.keytab(f"{who}.keytab"),
            "sasl.kerberos.kinit.cmd": "kinit -k -t %{sasl.kerberos.keytab} %{sasl.kerberos.principal}"}


def kcat_produce(conf, n):
    args = [a for k, v in conf.items() if k != "bootstrap.servers"
            for a in ("-X", f"{'sasl.mechanisms' if k == 'sasl.mechanism' else k}={v}")]
    out = subprocess.run([kcat_path(), "-P", "-b", conf["bootstrap.servers"], "-t", TOPIC, "-p", "0", *args],
                         input="".join(f"v{i}\n" for i in range(n)), capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr


def cli(realm, tmp, who, addr, *args):
    """The admin CLI logged in as `who` from its keytab, or (`who` None)
    from the ticket cache KRB5CCNAME; returns the completed process."""
    props = tmp / f"{who}.properties"
    login = f"sasl.kerberos.principal={who}\nsasl.kerberos.keytab={realm.keytab(who + '.keytab')}\n" if who else ""
    props.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=GSSAPI\n" + login)
    return subprocess.run([KCOORD_BIN, "groups", *args, "--bootstrap", addr, "--command-config", str(props)],
                          capture_output=True, text=True, timeout=120)


def committed_offset(realm, tmp, who, addr, group):
    """The group's committed offset of TOPIC partition 0 as the CLI reads it, or None."""
    out = cli(realm, tmp, who, addr, "offsets", "--group", group)
    assert out.returncode == 0, out.stderr
    for line in out.stdout.splitlines():
        cols = line.split()
        if cols[:3] == [group, TOPIC, "0"] and cols[3].isdigit():
            return int(cols[3])
    return None


def gssapi_logins(k, result):
    """kcoord_authentications_total{mechanism="GSSAPI"} of `result` on `k`'s metrics listener."""
    import urllib.request

    with urllib.request.urlopen(f"http://{k.metrics}/metrics", timeout=30) as r:
        text = r.read().decode()
    return sum(int(float(line.split()[-1])) for line in text.splitlines()
               if line.startswith("kcoord_authentications_total{") and 'mechanism="GSSAPI"' in line
               and f'result="{result}"' in line)


@pytest.fixture(scope="module")
def cluster(realm, make_kcoord_module, tmp_path_factory):
    """A kcoord with only a GSSAPI listener, enforcing ACLs for alice; 10
    records in TOPIC, produced with kcat by admin."""
    tmp = tmp_path_factory.mktemp("gssapi-kcoord")
    k = make_kcoord_module(tmp, topics=[f"{TOPIC}:1"], settings=gssapi_listener(realm) + acl_settings(tmp, "alice"))
    if kcat_path():
        with pytest.MonkeyPatch.context() as mp:
            mp.setenv("KRB5CCNAME", f"FILE:{tmp / 'admin-ccache'}")
            kcat_produce(kcat_conf(realm, k.bootstrap, "admin"), 10)
    return k


@needs_kcat
def test_kcat_logs_in_from_a_keytab_consumes_in_a_group_and_the_cli_reads_the_commit(realm, cluster, ccache, tmp_path):
    values = kcat_consume(kcat_conf(realm, cluster.bootstrap, "alice"), "krb-kcat", count=10, topic=TOPIC)
    assert values == [f"v{i}" for i in range(10)]
    # The admin CLI logs in with its own keytab (kcoord's client side).
    assert wait_for("the commit", lambda: committed_offset(realm, tmp_path, "admin", cluster.bootstrap,
                                                           "krb-kcat") == 10)


def python_gssapi():
    try:
        import gssapi  # noqa: F401
        return True
    except ImportError:
        return False


needs_python_gssapi = pytest.mark.skipif(
    not python_gssapi(), reason="python-gssapi is not built (scripts/test builds it where libkrb5-dev is installed)")


@needs_kcat
@needs_python_gssapi
@pytest.mark.parametrize("client", ["kafka-python", "aiokafka"])
def test_python_clients_log_in_from_a_ticket_cache_consume_and_commit(realm, cluster, ccache, client):
    realm.kinit("alice", "alice.keytab", ccache)
    security = {**PYTHON_GSSAPI, "bootstrap_servers": cluster.bootstrap}
    if client == "kafka-python":
        assert kafka_python_consume_and_commit(security, f"krb-{client}", topic=TOPIC) == 5
    else:
        assert aiokafka_consume_and_commit(security, f"krb-{client}", topic=TOPIC) == 5


@needs_kcat
def test_the_admin_cli_without_a_keytab_uses_the_operators_ticket_cache(realm, cluster, ccache, tmp_path):
    out = cli(realm, tmp_path, None, cluster.bootstrap, "list")
    assert out.returncode != 0 and "credentials" in out.stderr.lower(), out.stderr
    realm.kinit("admin", "admin.keytab", ccache)
    out = cli(realm, tmp_path, None, cluster.bootstrap, "list")
    assert out.returncode == 0, out.stderr


@needs_kcat
def test_a_principal_the_acls_do_not_name_is_refused_the_group(realm, cluster, tmp_path):
    out = cli(realm, tmp_path, "mallory", cluster.bootstrap, "offsets", "--group", "krb-kcat")
    assert out.returncode != 0
    assert "GROUP_AUTHORIZATION_FAILED" in out.stderr, out.stderr


@needs_kcat
@needs_python_gssapi
def test_principal_to_local_rules_map_a_kerberos_name_to_the_user_the_acls_name(realm, make_kcoord, tmp_path, ccache):
    rule = 'security.sasl_kerberos_principal_to_local_rules=["RULE:[1:$1@$0](mallory@KCOORD.TEST)s/.*/alice/", "DEFAULT"]'
    k = make_kcoord(topics=[f"{TOPIC}:1"], settings=gssapi_listener(realm) + acl_settings(tmp_path, "alice") + [rule])
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("KRB5CCNAME", f"FILE:{tmp_path / 'admin-ccache'}")
        kcat_produce(kcat_conf(realm, k.bootstrap, "admin"), 10)
    realm.kinit("mallory", "mallory.keytab", ccache)
    assert kafka_python_consume_and_commit({**PYTHON_GSSAPI, "bootstrap_servers": k.bootstrap}, "krb-mapped",
                                           topic=TOPIC) == 5


def test_a_ticket_for_a_service_key_kcoord_lacks_fails_with_kafkas_authentication_error(realm, make_kcoord, tmp_path):
    # Clients connect to 127.0.0.1 and ask for kafka/127.0.0.1; this keytab
    # holds kafka/localhost only.
    k = make_kcoord(settings=gssapi_listener(realm, keytab="localhost-only.keytab"))
    out = cli(realm, tmp_path, "alice", k.bootstrap, "list")
    assert out.returncode != 0
    assert ("Authentication failed during authentication due to invalid credentials with SASL mechanism GSSAPI"
            in out.stderr), out.stderr
    assert "GSSAPI authentication failed" in wait_for("the reason in kcoord's log",
                                                      lambda: "GSSAPI authentication failed" in k.log() and k.log())


@needs_kcat
def test_a_sidecar_of_a_kerberized_cluster_logs_in_with_its_keytab_and_serves_kerberos_clients(
        realm, cluster, ccache, tmp_path):
    sidecar = Sidecar(tmp_path / "sidecar", cluster.bootstrap, settings=gssapi_listener(realm) + [
        'sidecar.upstream_security.security_protocol="SASL_PLAINTEXT"',
        'sidecar.upstream_security.sasl_mechanism="GSSAPI"',
        'sidecar.upstream_security.sasl_kerberos_principal="kcoord-sidecar"',
        f'sidecar.upstream_security.sasl_kerberos_keytab="{realm.keytab("sidecar.keytab")}"',
    ]).start()
    try:
        values = kcat_consume(kcat_conf(realm, sidecar.bootstrap, "alice"), "krb-sidecar", count=10, topic=TOPIC)
        assert values == [f"v{i}" for i in range(10)]
        # Written through to the Kerberized upstream by the sidecar's login.
        assert wait_for("the offsets upstream", lambda: committed_offset(realm, tmp_path, "admin", cluster.bootstrap,
                                                                         "krb-sidecar") == 10)
    finally:
        sidecar.stop()


def test_a_sidecar_logs_in_again_from_its_keytab_after_its_tickets_expire(tmp_path, make_kcoord):
    """Tickets live 8 s and the upstream ends sessions after 3 s: the
    sidecar's upstream links log in again every few seconds, long after its
    first tickets expired, so the Kerberos library must fetch new ones from
    the keytab (librdkafka runs kinit for the same)."""
    from confluent_kafka import Consumer, Producer, TopicPartition

    short = Realm(tmp_path / "short-realm", {"kafka.keytab": ["kafka/127.0.0.1", "kafka/localhost"],
                                             "sidecar.keytab": ["kcoord-sidecar"], "admin.keytab": ["admin"]},
                  ticket_lifetime="8s")
    try:
        with pytest.MonkeyPatch.context() as mp:
            mp.setenv("KRB5_CONFIG", short.krb5_conf)
            upstream = make_kcoord(topics=[f"{TOPIC}:1"],
                                   settings=gssapi_listener(short) + ["security.connections_max_reauth_ms=3000",
                                                                      "metrics.listen=127.0.0.1:0"])
            sidecar = Sidecar(tmp_path / "sidecar", upstream.bootstrap, settings=[
                'sidecar.upstream_security.security_protocol="SASL_PLAINTEXT"',
                'sidecar.upstream_security.sasl_mechanism="GSSAPI"',
                'sidecar.upstream_security.sasl_kerberos_principal="kcoord-sidecar"',
                f'sidecar.upstream_security.sasl_kerberos_keytab="{short.keytab("sidecar.keytab")}"',
            ]).start()
            try:
                p = Producer({"bootstrap.servers": sidecar.bootstrap})
                deadline = time.time() + 20
                sent = 0
                while time.time() < deadline:
                    errors = []
                    p.produce(TOPIC, value=f"r{sent}", partition=0, on_delivery=lambda e, _m: errors.append(e))
                    assert p.flush(30) == 0 and errors == [None], errors
                    sent += 1
                    time.sleep(0.5)
                c = Consumer({"bootstrap.servers": sidecar.bootstrap, "group.id": "krb-renewal",
                              "auto.offset.reset": "earliest", "enable.auto.commit": False})
                c.assign([TopicPartition(TOPIC, 0)])
                got = 0
                while got < sent:
                    m = c.poll(1.0)
                    got += m is not None and not m.error()
                c.commit(offsets=[TopicPartition(TOPIC, 0, sent)], asynchronous=False)
                c.close()
                assert wait_for("the offsets upstream", lambda: committed_offset(
                    short, tmp_path, "admin", upstream.bootstrap, "krb-renewal") == sent)
                # Logins went on for the whole run, past the tickets' 8 s.
                assert gssapi_logins(upstream, "success") >= 6
                assert gssapi_logins(upstream, "failure") == 0
            finally:
                sidecar.stop()
    finally:
        short.close()


@needs_python_gssapi
def test_a_client_of_the_v0_handshake_exchanges_raw_gssapi_tokens_as_with_a_kafka_broker(realm, cluster, ccache):
    """Kafka clients before 1.0 (SaslHandshake v0) send the GSSAPI tokens
    as bare length-prefixed frames, here from python-gssapi: the context,
    the security-layer offer and choice, then no last frame from the
    broker (Java's acceptor has no last token), so the next answer the
    client reads is its next request's."""
    import struct

    import gssapi
    import rawkafka

    realm.kinit("alice", "alice.keytab", ccache)
    host = cluster.bootstrap.rsplit(":", 1)[0]
    with rawkafka.Conn(cluster.bootstrap) as c:
        handshake = rawkafka.Reader(c.request(17, 0, rawkafka.Writer().string("GSSAPI").bytes()))
        assert handshake.int16() == 0

        def send(token, answered=True):
            c.sock.sendall(struct.pack(">i", len(token)) + token)
            return c._recv(struct.unpack(">i", c._recv(4))[0]) if answered else None

        context = gssapi.SecurityContext(name=gssapi.Name(f"kafka@{host}", gssapi.NameType.hostbased_service),
                                          usage="initiate")
        answer = send(context.step())
        while not context.complete:
            answer = send(context.step(answer) or b"")
        offer = context.unwrap(answer).message
        assert offer[0] & 1, "no security layer is offered"
        send(context.wrap(b"\x01\x00\x00\x00", False).message, answered=False)
        # Authenticated: served, and the answer read is this request's.
        assert 10 in rawkafka.api_versions(c)
