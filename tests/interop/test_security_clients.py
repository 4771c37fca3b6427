"""Every stock client over every security setup users run: confluent-kafka,
kafka-python, kafkajs, aiokafka, kcat and Apache Kafka's Java client each join a group, consume, commit and read
their commit back over SASL_SSL with SCRAM-SHA-512 and with PLAIN, and over
mutual TLS, where the principal is the certificate's subject: alice's
certificate is granted by the ACLs, mallory's is refused with Kafka's
authorization errors, and a client without a certificate does not get past
the handshake. The CA and certificates are made per test with openssl."""

import subprocess
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

from conftest import KCOORD_BIN, kcat_path, needs_kcat, node_script, wait_for
from groups import stop_all
from java_client import JavaClient, needs_java
from pki import (add_user, keytool_available, make_client_cert, make_jks_stores, make_pkcs12, make_pki,
                 tls_listener_settings)

USER, PASSWORD = "alice", "alice-secret"
TOPIC = "sec"
ALICE = "User:CN=alice,O=Example"
SASL_MECHANISMS = ["SCRAM-SHA-512", "PLAIN"]


def serving_addresses(k, names):
    line = next(l for l in k._lines if "serving on" in l)
    return dict(zip(names, line.split("serving on ")[1].split()[0].split(",")))


@pytest.fixture(scope="module")
def sasl_ssl(make_kcoord_module, tmp_path_factory):
    """A kcoord with a SASL_SSL listener, user alice and delegation tokens
    on; 10 records in TOPIC. Returns {"addr", "ca"}."""
    tmp = tmp_path_factory.mktemp("sasl-ssl")
    pki = make_pki(tmp / "pki")
    users = tmp / "users.json"
    add_user(users, USER, PASSWORD)
    settings = tls_listener_settings(pki, users) + ['security.delegation_token_secret_key="interop-token-key"']
    k = make_kcoord_module(tmp, topics=[f"{TOPIC}:1"], settings=settings)
    env = {"addr": serving_addresses(k, ["SASL_SSL"])["SASL_SSL"], "ca": str(pki / "ca.pem")}
    produce({**sasl_conf(env, "PLAIN")})
    return env


def mtls_listener(pki, acls):
    """kcoord settings: an SSL listener requiring client certificates from
    the CA of `pki`, and ACLs from the file `acls` enforced."""
    return ['server.listeners=["SSL://127.0.0.1:0"]',
            f'security.tls_certificate="{pki / "server.pem"}"',
            f'security.tls_private_key="{pki / "server.key"}"',
            f'security.tls_ca="{pki / "ca.pem"}"',
            'security.tls_client_auth="required"',
            'authorizer.enabled=true',
            f'authorizer.acl_file="{acls}"']


@pytest.fixture(scope="module")
def mtls(make_kcoord_module, tmp_path_factory):
    """A kcoord with an SSL listener that requires client certificates from
    its CA and enforces ACLs: alice's certificate subject may read and write
    TOPIC and read groups starting with "mtls-"; mallory's has no ACL.
    Returns {"addr", "ca", "alice": (cert, key), "mallory": (cert, key)}."""
    tmp = tmp_path_factory.mktemp("mtls")
    pki = make_pki(tmp / "pki")
    acls = tmp / "acls.json"

    def grant(*args):
        subprocess.run([KCOORD_BIN, "acls", "add", "--file", str(acls), "--allow-principal", ALICE, *args],
                       capture_output=True, text=True, check=True)

    grant("--operation", "Read", "--operation", "Write", "--topic", TOPIC)
    grant("--operation", "Read", "--group", "mtls-", "--resource-pattern-type", "prefixed")
    k = make_kcoord_module(tmp, topics=[f"{TOPIC}:1"], settings=mtls_listener(pki, acls))
    env = {"addr": serving_addresses(k, ["SSL"])["SSL"], "ca": str(pki / "ca.pem"),
           "alice": tuple(map(str, make_client_cert(pki, "alice", "/O=Example/CN=alice"))),
           "mallory": tuple(map(str, make_client_cert(pki, "mallory", "/O=Example/CN=mallory")))}
    produce(mtls_conf(env, "alice"))
    return env


def sasl_conf(env, mechanism):
    return {"bootstrap.servers": env["addr"], "security.protocol": "SASL_SSL", "sasl.mechanism": mechanism,
            "sasl.username": USER, "sasl.password": PASSWORD, "ssl.ca.location": env["ca"]}


def mtls_conf(env, who):
    cert, key = env[who]
    return {"bootstrap.servers": env["addr"], "security.protocol": "SSL", "ssl.ca.location": env["ca"],
            "ssl.certificate.location": cert, "ssl.key.location": key}


def produce(conf, n=10):
    p = Producer(conf)
    for i in range(n):
        p.produce(TOPIC, value=f"v{i}", partition=0)
    assert p.flush(30) == 0


def confluent_consume_and_commit(conf, group, topic=TOPIC):
    """Consumes 5 records in `group`, commits offset 5; returns the committed offset read back."""
    c = Consumer({**conf, "group.id": group, "auto.offset.reset": "earliest", "enable.auto.commit": False,
                  "session.timeout.ms": 6000, "heartbeat.interval.ms": 500})
    try:
        c.subscribe([topic])
        seen = 0
        while seen < 5:
            m = c.poll(1.0)
            if m is not None and not m.error():
                seen += 1
        c.commit(offsets=[TopicPartition(topic, 0, 5)], asynchronous=False)
        return c.committed([TopicPartition(topic, 0)], timeout=30)[0].offset
    finally:
        c.close()


def kafka_python_consume_and_commit(security, group, topic=TOPIC):
    from kafka import KafkaConsumer, TopicPartition as KTP
    from kafka.structs import OffsetAndMetadata

    c = KafkaConsumer(topic, group_id=group, auto_offset_reset="earliest", enable_auto_commit=False,
                      session_timeout_ms=6000, heartbeat_interval_ms=500, **security)
    try:
        seen = 0
        while seen < 5:
            for records in c.poll(timeout_ms=1000).values():
                seen += len(records)
        c.commit({KTP(topic, 0): OffsetAndMetadata(5, "", -1)})
        return c.committed(KTP(topic, 0))
    finally:
        c.close()


def aiokafka_consume_and_commit(security, group, topic=TOPIC):
    """As kafka_python_consume_and_commit, with aiokafka; `security` holds
    the consumer's keyword arguments and, over TLS, "tls": create_ssl_context's."""
    import asyncio

    from aiokafka import AIOKafkaConsumer, TopicPartition as ATP
    from aiokafka.helpers import create_ssl_context

    security = dict(security)
    if "tls" in security:
        security["ssl_context"] = create_ssl_context(**security.pop("tls"))

    async def run():
        c = AIOKafkaConsumer(topic, group_id=group, auto_offset_reset="earliest", enable_auto_commit=False,
                             session_timeout_ms=6000, heartbeat_interval_ms=500, **security)
        await c.start()
        try:
            seen = 0
            while seen < 5:
                seen += sum(len(r) for r in (await c.getmany(timeout_ms=1000, max_records=5 - seen)).values())
            await c.commit({ATP(topic, 0): 5})
            return await c.committed(ATP(topic, 0))
        finally:
            await c.stop()

    return asyncio.run(asyncio.wait_for(run(), 90))


def kcat_consume(conf, group, count=10, topic=TOPIC):
    """kcat (Debian's librdkafka) consumes `count` records in `group` with
    auto-commit; returns the values it printed."""
    args = []
    for k, v in conf.items():
        if k != "bootstrap.servers":
            args += ["-X", f"{'sasl.mechanisms' if k == 'sasl.mechanism' else k}={v}"]
    out = subprocess.run(
        ["timeout", "-s", "INT", "90", kcat_path(), "-b", conf["bootstrap.servers"], "-G", group, topic, *args,
         "-X", "auto.offset.reset=earliest", "-X", "session.timeout.ms=6000", "-X", "heartbeat.interval.ms=500",
         "-c", str(count), "-f", "%s\\n"],
        capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return out.stdout.split()


def committed(conf, group):
    c = Consumer({**conf, "group.id": group})
    try:
        return c.committed([TopicPartition(TOPIC, 0)], timeout=30)[0].offset
    finally:
        c.close()


def java_consume_and_commit(classpath, addr, props, group, tmp_path):
    """Apache Kafka's Java client consumes TOPIC's 10 records in `group`,
    committing as it goes; returns the group's committed offset read back
    with its Admin client."""
    java = JavaClient(classpath, addr, props)
    member = java.member(tmp_path, group, group, TOPIC)
    try:
        wait_for(f"{group} to consume and commit 10 records",
                 lambda: member.state().get("positions") == {f"{TOPIC}:0": 10} or member.state().get("fatal"),
                 timeout=90)
    finally:
        stop_all([member])
    assert not member.state().get("fatal"), member.state()
    return java.admin("offsets", group=group)["offsets"][f"{TOPIC}:0"]["offset"]


JAAS = {"PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
        "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule"}


# --- SASL_SSL ---------------------------------------------------------------


@pytest.mark.parametrize("mechanism", SASL_MECHANISMS)
def test_confluent_kafka_over_sasl_ssl_consumes_and_commits(sasl_ssl, mechanism):
    assert confluent_consume_and_commit(sasl_conf(sasl_ssl, mechanism), f"rdk-{mechanism}") == 5


@pytest.mark.parametrize("mechanism", SASL_MECHANISMS)
def test_kafka_python_over_sasl_ssl_consumes_and_commits(sasl_ssl, mechanism):
    security = {"bootstrap_servers": sasl_ssl["addr"], "security_protocol": "SASL_SSL",
                "sasl_mechanism": mechanism, "sasl_plain_username": USER, "sasl_plain_password": PASSWORD,
                "ssl_cafile": sasl_ssl["ca"]}
    assert kafka_python_consume_and_commit(security, f"kp-{mechanism}") == 5


@pytest.mark.parametrize("mechanism", SASL_MECHANISMS)
def test_kafkajs_over_sasl_ssl_consumes_and_commits(sasl_ssl, mechanism):
    out = node_script("secure_commit", sasl_ssl["addr"], f"js-{mechanism}", TOPIC, sasl_ssl["ca"],
                      mechanism.lower(), USER, PASSWORD)
    assert out["fetched"] == [{"partition": 0, "offset": 5}]


@pytest.mark.parametrize("mechanism", SASL_MECHANISMS)
def test_aiokafka_over_sasl_ssl_consumes_and_commits(sasl_ssl, mechanism):
    security = {"bootstrap_servers": sasl_ssl["addr"], "security_protocol": "SASL_SSL",
                "sasl_mechanism": mechanism, "sasl_plain_username": USER, "sasl_plain_password": PASSWORD,
                "tls": {"cafile": sasl_ssl["ca"]}}
    assert aiokafka_consume_and_commit(security, f"aio-{mechanism}") == 5


@needs_java
@pytest.mark.parametrize("mechanism", SASL_MECHANISMS)
def test_the_java_client_over_sasl_ssl_consumes_and_commits(sasl_ssl, mechanism, java_classpath, tmp_path):
    # The Java client checks the server's name against its certificate
    # (ssl.endpoint.identification.algorithm=https by default).
    props = {"security.protocol": "SASL_SSL", "sasl.mechanism": mechanism,
             "sasl.jaas.config": f'{JAAS[mechanism]} required username="{USER}" password="{PASSWORD}";',
             "ssl.truststore.type": "PEM", "ssl.truststore.location": sasl_ssl["ca"]}
    assert java_consume_and_commit(java_classpath, sasl_ssl["addr"], props, f"java-{mechanism}", tmp_path) == 10


def java_scram_props(env, user, password, extra=""):
    """Java client settings for SCRAM-SHA-512 over SASL_SSL."""
    return {"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.jaas.config": f'{JAAS["SCRAM-SHA-512"]} required username="{user}" password="{password}"{extra};',
            "ssl.truststore.type": "PEM", "ssl.truststore.location": env["ca"]}


@needs_java
def test_the_java_client_gets_a_delegation_token_and_consumes_and_commits_with_it(sasl_ssl, java_classpath, tmp_path):
    """KIP-48: alice gets a token with Admin.createDelegationToken; a consumer
    that logs in with it (ScramLoginModule tokenauth="true") is alice, and
    joins, consumes and commits; kcoord's admin CLI logs in with it too; the
    token cannot get tokens; once expired it logs nobody in."""
    alice = JavaClient(java_classpath, sasl_ssl["addr"], java_scram_props(sasl_ssl, USER, PASSWORD))
    token = alice.admin("create-token", renewers="User:bob")
    assert (token.get("owner"), token.get("requester")) == ("User:alice", "User:alice"), token
    assert token["issued"] < token["expiry"] <= token["max"], token
    described = alice.admin("describe-tokens")["tokens"]
    assert described[token["token_id"]] == {"owner": "User:alice", "renewers": "User:bob", "hmac": token["hmac"]}

    with_token = java_scram_props(sasl_ssl, token["token_id"], token["hmac"], ' tokenauth="true"')
    assert java_consume_and_commit(java_classpath, sasl_ssl["addr"], with_token, "java-token", tmp_path) == 10
    as_token = JavaClient(java_classpath, sasl_ssl["addr"], with_token)
    assert as_token.admin("create-token") == {"error": "UnsupportedByAuthenticationException"}

    props = tmp_path / "token.properties"
    props.write_text("security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\n"
                     f"sasl.jaas.config={with_token['sasl.jaas.config']}\nssl.ca.location={sasl_ssl['ca']}\n")
    cli = [KCOORD_BIN, "groups", "--command-config", str(props), "list", "--bootstrap", sasl_ssl["addr"]]
    listed = subprocess.run(cli, capture_output=True, text=True, timeout=60)
    assert listed.returncode == 0 and "java-token" in listed.stdout, listed.stderr

    expired = alice.admin("expire-token", hmac=token["hmac"], period=-1)
    assert "expiry" in expired, expired
    assert token["token_id"] not in alice.admin("describe-tokens")["tokens"]
    refused = subprocess.run(cli, capture_output=True, text=True, timeout=60)
    assert refused.returncode != 0 and "invalid credentials" in refused.stderr, refused.stderr


@needs_kcat
@pytest.mark.parametrize("mechanism", SASL_MECHANISMS)
def test_kcat_over_sasl_ssl_consumes_in_a_group_and_commits(sasl_ssl, mechanism):
    conf = sasl_conf(sasl_ssl, mechanism)
    group = f"kcat-{mechanism}"
    assert kcat_consume(conf, group) == [f"v{i}" for i in range(10)]
    # kcat commits what it consumed when it leaves.
    assert committed(conf, group) == 10


# --- mutual TLS -------------------------------------------------------------


def test_confluent_kafka_over_mtls_consumes_and_commits(mtls):
    assert confluent_consume_and_commit(mtls_conf(mtls, "alice"), "mtls-rdk") == 5


def test_kafka_python_over_mtls_consumes_and_commits(mtls):
    cert, key = mtls["alice"]
    security = {"bootstrap_servers": mtls["addr"], "security_protocol": "SSL", "ssl_cafile": mtls["ca"],
                "ssl_certfile": cert, "ssl_keyfile": key}
    assert kafka_python_consume_and_commit(security, "mtls-kp") == 5


def test_aiokafka_over_mtls_consumes_and_commits(mtls):
    cert, key = mtls["alice"]
    security = {"bootstrap_servers": mtls["addr"], "security_protocol": "SSL",
                "tls": {"cafile": mtls["ca"], "certfile": cert, "keyfile": key}}
    assert aiokafka_consume_and_commit(security, "mtls-aio") == 5


def test_kafkajs_over_mtls_consumes_and_commits(mtls):
    cert, key = mtls["alice"]
    out = node_script("secure_commit", mtls["addr"], "mtls-js", TOPIC, mtls["ca"], "mtls", cert, key)
    assert out["fetched"] == [{"partition": 0, "offset": 5}]


@needs_java
def test_the_java_client_over_mtls_consumes_and_commits_and_a_certificate_without_acls_is_refused(
        mtls, java_classpath, tmp_path):
    def props(who):
        store = make_pkcs12(Path(mtls["ca"]).parent, who, "store-secret")
        return {"security.protocol": "SSL", "ssl.truststore.type": "PEM", "ssl.truststore.location": mtls["ca"],
                "ssl.keystore.type": "PKCS12", "ssl.keystore.location": str(store),
                "ssl.keystore.password": "store-secret"}

    assert java_consume_and_commit(java_classpath, mtls["addr"], props("alice"), "mtls-java", tmp_path) == 10
    java = JavaClient(java_classpath, mtls["addr"], props("mallory"))
    member = java.member(tmp_path, "mallory", "mtls-java-mallory", TOPIC)
    try:
        wait_for("mallory to be refused", lambda: member.state().get("errors") or member.state().get("fatal"),
                 timeout=60)
    finally:
        stop_all([member])
    refused = member.state().get("fatal") or " ".join(member.state()["errors"])
    assert "AuthorizationException" in refused, member.state()


@needs_kcat
def test_kcat_over_mtls_consumes_in_a_group_and_commits(mtls):
    conf = mtls_conf(mtls, "alice")
    assert kcat_consume(conf, "mtls-kcat") == [f"v{i}" for i in range(10)]
    assert committed(conf, "mtls-kcat") == 10


def test_a_certificate_without_acls_is_refused_the_group_and_the_topic(mtls):
    # The principal is the certificate's subject: mallory's chains to the CA
    # but no ACL names it.
    conf = mtls_conf(mtls, "mallory")
    c = Consumer({**conf, "group.id": "mtls-mallory", "auto.offset.reset": "earliest",
                  "session.timeout.ms": 6000})
    try:
        c.subscribe([TOPIC])

        def group_error():
            m = c.poll(0.5)
            return m.error().code() if m is not None and m.error() else None

        assert wait_for("the group error", group_error) == KafkaError.GROUP_AUTHORIZATION_FAILED
    finally:
        c.close()
    p = Producer(conf)
    errors = []
    p.produce(TOPIC, value="x", partition=0, on_delivery=lambda err, _msg: errors.append(err))
    p.flush(30)
    assert [e.code() for e in errors] == [KafkaError.TOPIC_AUTHORIZATION_FAILED]


def test_a_client_without_a_certificate_does_not_get_past_the_handshake(mtls):
    conf = {"bootstrap.servers": mtls["addr"], "security.protocol": "SSL", "ssl.ca.location": mtls["ca"]}
    with pytest.raises(KafkaException):
        Producer(conf).list_topics(timeout=5)


def test_ssl_principal_mapping_rules_name_certificate_users_as_kafka_does(make_kcoord, tmp_path):
    """Kafka's ssl.principal.mapping.rules: alice's subject
    "CN=alice,O=Example" maps to User:alice, whom the ACLs name; a subject
    no rule maps (the rules end without DEFAULT) cannot connect at all."""
    pki = make_pki(tmp_path / "pki")
    acls = tmp_path / "acls.json"
    for resource in (["--topic", TOPIC], ["--group", "mapped-", "--resource-pattern-type", "prefixed"]):
        subprocess.run([KCOORD_BIN, "acls", "add", "--file", str(acls), "--allow-principal", "User:alice",
                        "--operation", "Read", "--operation", "Write", *resource], check=True, capture_output=True)
    k = make_kcoord(topics=[f"{TOPIC}:1"], settings=mtls_listener(pki, acls) + [
        'security.ssl_principal_mapping_rules="RULE:^CN=([a-z]+),O=Example$/$1/L"'])
    env = {"addr": serving_addresses(k, ["SSL"])["SSL"], "ca": str(pki / "ca.pem"),
           "alice": tuple(map(str, make_client_cert(pki, "alice", "/O=Example/CN=alice"))),
           "stranger": tuple(map(str, make_client_cert(pki, "stranger", "/O=Elsewhere/CN=stranger")))}
    produce(mtls_conf(env, "alice"))
    assert confluent_consume_and_commit(mtls_conf(env, "alice"), "mapped-alice") == 5
    p = Producer({**mtls_conf(env, "stranger"), "message.timeout.ms": 5000})
    errors = []
    p.produce(TOPIC, value="x", partition=0, on_delivery=lambda err, _msg: errors.append(err))
    p.flush(30)
    assert len(errors) == 1 and errors[0] is not None, errors
    assert "maps to no principal" in wait_for("the refusal in kcoord's log",
                                              lambda: "maps to no principal" in k.log() and k.log())


@pytest.mark.skipif(not keytool_available(), reason="keytool (a Java runtime) is not installed")
def test_a_listener_on_jks_stores_serves_librdkafka_clients_with_pkcs12_certificates(make_kcoord, tmp_path):
    """The stores a Kafka broker has: kcoord's listener reads its certificate
    from a keytool JKS key store and the client CA from a JKS trust store;
    confluent-kafka presents its certificate from a PKCS#12 file
    (librdkafka's ssl.keystore.location). A client with a certificate from
    another CA does not get in."""
    pki = make_pki(tmp_path / "pki")
    keystore, truststore = make_jks_stores(pki, "server", "broker-secret")
    k = make_kcoord(topics=[f"{TOPIC}:1"], settings=[
        'server.listeners=["SSL://127.0.0.1:0"]',
        f'security.tls_keystore="{keystore}"',
        'security.tls_keystore_password="broker-secret"',
        f'security.tls_truststore="{truststore}"',
        'security.tls_truststore_password="broker-secret"',
        'security.tls_client_auth="required"'])
    make_client_cert(pki, "alice", "/O=Example/CN=alice")
    conf = {"bootstrap.servers": serving_addresses(k, ["SSL"])["SSL"], "security.protocol": "SSL",
            "ssl.ca.location": str(pki / "ca.pem"), "ssl.keystore.location": str(make_pkcs12(pki, "alice", "alice-pw")),
            "ssl.keystore.password": "alice-pw"}
    produce(conf)
    assert confluent_consume_and_commit(conf, "jks-group") == 5
    other = make_pki(tmp_path / "other")
    make_client_cert(other, "mallory", "/CN=mallory")
    stranger = {**conf, "ssl.keystore.location": str(make_pkcs12(other, "mallory", "pw")),
                "ssl.keystore.password": "pw"}
    with pytest.raises(KafkaException):
        Producer(stranger).list_topics(timeout=5)


def test_admin_client_manages_scram_users_who_then_log_in(make_kcoord, tmp_path):
    """KIP-554 through librdkafka's AdminClient (what kafka-configs.sh
    --entity-type users sends): alice gives bob SCRAM-SHA-256 and -512
    credentials, bob produces with them at once, describe lists users and
    mechanisms (never secrets), and once bob's credentials are deleted he
    cannot log in."""
    from confluent_kafka.admin import (AdminClient, ScramCredentialInfo, ScramMechanism,
                                       UserScramCredentialDeletion, UserScramCredentialUpsertion)

    pki = make_pki(tmp_path / "pki")
    users = tmp_path / "users.json"
    add_user(users, USER, PASSWORD)
    k = make_kcoord(topics=[f"{TOPIC}:1"], settings=tls_listener_settings(pki, users))
    env = {"addr": serving_addresses(k, ["SASL_SSL"])["SASL_SSL"], "ca": str(pki / "ca.pem")}
    admin = AdminClient(sasl_conf(env, "SCRAM-SHA-512"))

    def alter(*alterations):
        # One alteration per user and request: Kafka refuses a user altered twice.
        for alteration in alterations:
            for future in admin.alter_user_scram_credentials([alteration]).values():
                future.result(timeout=30)

    alter(UserScramCredentialUpsertion("bob", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), b"bob-pw"),
          UserScramCredentialUpsertion("bob", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192), b"bob-pw"))
    assert "bob-pw" not in users.read_text()
    for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
        produce({**sasl_conf(env, mechanism), "sasl.username": "bob", "sasl.password": "bob-pw"}, n=1)

    described = admin.describe_user_scram_credentials().result(timeout=30)
    assert sorted(described) == [USER, "bob"]
    bob = {(i.mechanism, i.iterations) for i in described["bob"].scram_credential_infos}
    assert bob == {(ScramMechanism.SCRAM_SHA_256, 4096), (ScramMechanism.SCRAM_SHA_512, 8192)}

    alter(UserScramCredentialDeletion("bob", ScramMechanism.SCRAM_SHA_256),
          UserScramCredentialDeletion("bob", ScramMechanism.SCRAM_SHA_512))
    with pytest.raises(KafkaException):
        admin.describe_user_scram_credentials(["bob"])["bob"].result(timeout=30)
    p = Producer({**sasl_conf(env, "SCRAM-SHA-512"), "sasl.username": "bob", "sasl.password": "bob-pw"})
    with pytest.raises(KafkaException):
        p.list_topics(timeout=5)


def test_listeners_with_their_own_certificates_and_mechanisms_serve_librdkafka(make_kcoord, tmp_path):
    """Kafka's listener.name.<name>.*: an INTERNAL listener with the internal
    CA's certificate that requires client certificates, an EXTERNAL one with
    another CA's certificate and SCRAM-SHA-512 only. confluent-kafka consumes
    and commits through each with that listener's settings; PLAIN on
    EXTERNAL is refused."""
    internal = make_pki(tmp_path / "internal")
    external = make_pki(tmp_path / "external")
    users = tmp_path / "users.json"
    add_user(users, USER, PASSWORD)
    k = make_kcoord(topics=[f"{TOPIC}:1"], settings=[
        'server.listeners=["INTERNAL://127.0.0.1:0", "EXTERNAL://127.0.0.1:0"]',
        'server.listener_security_protocol_map="INTERNAL:SSL,EXTERNAL:SASL_SSL"',
        f'security.credentials_file="{users}"',
        f'security.tls_certificate="{internal / "server.pem"}"',
        f'security.tls_private_key="{internal / "server.key"}"',
        f'security.tls_ca="{internal / "ca.pem"}"',
        'security.tls_client_auth="required"',
        f'security.listener.EXTERNAL.tls_certificate="{external / "server.pem"}"',
        f'security.listener.EXTERNAL.tls_private_key="{external / "server.key"}"',
        'security.listener.EXTERNAL.tls_client_auth="none"',
        'security.listener.EXTERNAL.sasl_enabled_mechanisms=["SCRAM-SHA-512"]'])
    addrs = serving_addresses(k, ["INTERNAL", "EXTERNAL"])
    cert, key = make_client_cert(internal, "broker-tool", "/CN=broker-tool")
    inside = {"bootstrap.servers": addrs["INTERNAL"], "security.protocol": "SSL",
              "ssl.ca.location": str(internal / "ca.pem"), "ssl.certificate.location": str(cert),
              "ssl.key.location": str(key)}
    produce(inside)
    assert confluent_consume_and_commit(inside, "internal-group") == 5
    outside = sasl_conf({"addr": addrs["EXTERNAL"], "ca": str(external / "ca.pem")}, "SCRAM-SHA-512")
    assert confluent_consume_and_commit(outside, "external-group") == 5
    with pytest.raises(KafkaException):
        Producer({**outside, "sasl.mechanism": "PLAIN"}).list_topics(timeout=5)
