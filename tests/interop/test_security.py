"""Real clients over TLS and SASL beyond the client matrix of
test_security_clients.py: kafka-python over SASL_PLAINTEXT with PLAIN and
kafkajs over SASL_SSL with SCRAM-SHA-256 join a group and commit; a wrong
password is an authentication error; an SSL listener advertises itself. The CA and certificates are made per test with the
openssl command line; nothing secret is committed."""

import pytest
from confluent_kafka import KafkaException, Producer

from conftest import node_script, wait_for
from pki import add_user, make_pki, tls_listener_settings

USER, PASSWORD = "alice", "alice-secret"


@pytest.fixture
def secure(make_kcoord, tmp_path):
    """A kcoord with SASL_SSL and SASL_PLAINTEXT listeners and user alice.
    Returns (kcoord, {"SASL_SSL": addr, "SASL_PLAINTEXT": addr}, ca path)."""
    pki = make_pki(tmp_path / "pki")
    users = tmp_path / "users.json"
    add_user(users, USER, PASSWORD)
    k = make_kcoord(topics=["sec:1"], settings=tls_listener_settings(
        pki, users, '["SASL_SSL://127.0.0.1:0", "SASL_PLAINTEXT://127.0.0.1:0", "SSL://127.0.0.1:0"]'))
    line = next(l for l in k._lines if "serving on" in l)
    addrs = line.split("serving on ")[1].split()[0].split(",")
    listeners = dict(zip(["SASL_SSL", "SASL_PLAINTEXT", "SSL"], addrs))
    return k, listeners, str(pki / "ca.pem")


def rdk_conf(addr, ca, mechanism, password=PASSWORD):
    return {"bootstrap.servers": addr, "security.protocol": "SASL_SSL", "sasl.mechanism": mechanism,
            "sasl.username": USER, "sasl.password": password, "ssl.ca.location": ca}


def produce(conf, topic, n=10):
    p = Producer(conf)
    for i in range(n):
        p.produce(topic, value=f"v{i}", partition=0)
    assert p.flush(30) == 0


def test_confluent_kafka_with_a_wrong_password_gets_an_authentication_error(secure):
    _, listeners, ca = secure
    errors = []
    p = Producer({**rdk_conf(listeners["SASL_SSL"], ca, "SCRAM-SHA-512", password="wrong"),
                  "error_cb": lambda e: errors.append(e)})
    wait_for("an authentication error", lambda: p.poll(0.5) is not None and any(
        "Authentication failed" in e.str() or "AUTHENTICATION" in e.name() for e in errors), timeout=60)
    with pytest.raises(KafkaException):
        p.list_topics(timeout=3)


def test_kafka_python_over_sasl_plaintext_with_plain_joins_a_group_and_commits(secure):
    from kafka import KafkaConsumer, TopicPartition as KTP
    from kafka.structs import OffsetAndMetadata

    _, listeners, ca = secure
    produce(rdk_conf(listeners["SASL_SSL"], ca, "PLAIN"), "sec")
    c = KafkaConsumer("sec", bootstrap_servers=listeners["SASL_PLAINTEXT"], group_id="kp-plain",
                      security_protocol="SASL_PLAINTEXT", sasl_mechanism="PLAIN", sasl_plain_username=USER,
                      sasl_plain_password=PASSWORD, auto_offset_reset="earliest", enable_auto_commit=False,
                      session_timeout_ms=6000, heartbeat_interval_ms=500)
    seen = 0
    while seen < 5:
        for records in c.poll(timeout_ms=1000).values():
            seen += len(records)
    c.commit({KTP("sec", 0): OffsetAndMetadata(5, "", -1)})
    assert c.committed(KTP("sec", 0)) == 5
    c.close()


def test_kafkajs_over_sasl_ssl_with_scram_sha_256_joins_a_group_and_commits(secure):
    k, listeners, ca = secure
    produce(rdk_conf(listeners["SASL_SSL"], ca, "SCRAM-SHA-256"), "sec")
    out = node_script("secure_commit", listeners["SASL_SSL"], "js-scram", "sec", ca, "scram-sha-256", USER, PASSWORD)
    assert out["fetched"] == [{"partition": 0, "offset": 5}]


def test_confluent_kafka_over_ssl_lists_topics(secure):
    _, listeners, ca = secure
    admin_conf = {"bootstrap.servers": listeners["SSL"], "security.protocol": "SSL", "ssl.ca.location": ca}
    md = Producer(admin_conf).list_topics(timeout=30)
    assert "sec" in md.topics
    # The broker is advertised with the SSL listener's address.
    assert [f"{b.host}:{b.port}" for b in md.brokers.values()] == [listeners["SSL"]]
