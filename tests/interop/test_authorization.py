"""ACLs as real clients meet them: over SASL_PLAINTEXT with PLAIN, user
alice may read topic "acl" but not yet use her group, so librdkafka and
kafka-python report GROUP_AUTHORIZATION_FAILED; once `kcoord acls add`
grants the group (the running daemon reloads the file), the same consumers
consume and commit. User admin is a super user and produces."""

import subprocess

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from conftest import KCOORD_BIN, wait_for

TOPIC = "acl"


def kcoord_cli(*args):
    out = subprocess.run([KCOORD_BIN, *args], capture_output=True, text=True, check=True)
    return out.stdout


def sasl_conf(addr, user):
    """librdkafka settings for `user` (password `<user>-secret`) over SASL_PLAINTEXT."""
    return {"bootstrap.servers": addr, "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
            "sasl.username": user, "sasl.password": f"{user}-secret"}


def start_guarded(make_kcoord, tmp_path, topics, alice_may, settings=()):
    """A kcoord enforcing ACLs on a SASL_PLAINTEXT listener, with users alice
    and admin (super user); `alice_may` are the `kcoord acls add` resource
    arguments of alice's one READ grant. Returns (addr, acl file)."""
    users = tmp_path / "users.json"
    for user in ("alice", "admin"):
        subprocess.run([KCOORD_BIN, "users", "add", "--file", str(users), user], input=f"{user}-secret\n",
                       text=True, check=True, capture_output=True)
    acls = tmp_path / "acls.json"
    kcoord_cli("acls", "add", "--file", str(acls), "--allow-principal", "User:alice", "--operation", "Read",
               *alice_may)
    k = make_kcoord(topics=topics, settings=[
        'server.listeners=["SASL_PLAINTEXT://127.0.0.1:0"]',
        f'security.credentials_file="{users}"',
        'authorizer.enabled=true',
        'authorizer.super_users="User:admin"',
        f'authorizer.acl_file="{acls}"',
        *settings,
    ])
    line = next(l for l in k._lines if "serving on" in l)
    return line.split("serving on ")[1].split()[0].split(",")[0], acls


@pytest.fixture
def guarded(make_kcoord, tmp_path):
    """start_guarded with topic "acl" (10 records, produced by admin), which
    alice may read. Returns (addr, acl file)."""
    addr, acls = start_guarded(make_kcoord, tmp_path, [f"{TOPIC}:1"], ["--topic", TOPIC])
    p = Producer(sasl_conf(addr, "admin"))
    for i in range(10):
        p.produce(TOPIC, value=f"v{i}", partition=0)
    assert p.flush(30) == 0
    return addr, acls


def rdk_consumer(addr, group):
    return Consumer({**sasl_conf(addr, "alice"), "group.id": group, "auto.offset.reset": "earliest",
                     "enable.auto.commit": False, "session.timeout.ms": 6000})


def grant_group(acls, group):
    out = kcoord_cli("acls", "add", "--file", str(acls), "--allow-principal", "User:alice", "--operation", "Read",
                     "--group", group)
    assert "operation=READ" in out
    listed = kcoord_cli("acls", "list", "--file", str(acls), "--group", group)
    assert f"name={group}, patternType=LITERAL" in listed and "principal=User:alice" in listed


def test_confluent_kafka_without_the_group_acl_gets_group_authorization_failed_then_consumes_with_it(guarded):
    addr, acls = guarded
    c = rdk_consumer(addr, "rdk-acl")
    c.subscribe([TOPIC])

    def group_error():
        m = c.poll(0.5)
        if m is not None and m.error():
            return m.error().code()
        return None

    assert wait_for("librdkafka reports the group error", group_error) == KafkaError.GROUP_AUTHORIZATION_FAILED
    c.close()

    grant_group(acls, "rdk-acl")

    def consumes():
        c = rdk_consumer(addr, "rdk-acl")
        c.subscribe([TOPIC])
        seen = 0
        for _ in range(30):
            m = c.poll(1.0)
            if m is not None and m.error() and m.error().code() == KafkaError.GROUP_AUTHORIZATION_FAILED:
                c.close()
                return None  # the daemon has not reloaded the file yet
            if m is not None and not m.error():
                seen += 1
                if seen == 5:
                    break
        c.commit(offsets=[TopicPartition(TOPIC, 0, 5)], asynchronous=False)
        committed = c.committed([TopicPartition(TOPIC, 0)], timeout=30)[0].offset
        c.close()
        return committed

    assert wait_for("alice consumes and commits with the group ACL", consumes, timeout=90) == 5


def test_kafka_python_without_the_group_acl_gets_group_authorization_failed_then_commits_with_it(guarded):
    from kafka import KafkaConsumer, TopicPartition as KTP
    from kafka.errors import GroupAuthorizationFailedError
    from kafka.structs import OffsetAndMetadata

    addr, acls = guarded

    def consumer():
        return KafkaConsumer(TOPIC, bootstrap_servers=addr, group_id="kp-acl", security_protocol="SASL_PLAINTEXT",
                             sasl_mechanism="PLAIN", sasl_plain_username="alice", sasl_plain_password="alice-secret",
                             auto_offset_reset="earliest", enable_auto_commit=False, session_timeout_ms=6000,
                             heartbeat_interval_ms=500)

    c = consumer()
    with pytest.raises(GroupAuthorizationFailedError):
        for _ in range(30):
            c.poll(timeout_ms=1000)
    c.close()

    grant_group(acls, "kp-acl")

    def commits():
        c = consumer()
        try:
            seen = 0
            for _ in range(30):
                for records in c.poll(timeout_ms=1000).values():
                    seen += len(records)
                if seen >= 5:
                    break
            c.commit({KTP(TOPIC, 0): OffsetAndMetadata(5, "", -1)})
            return c.committed(KTP(TOPIC, 0))
        except GroupAuthorizationFailedError:
            return None  # not reloaded yet
        finally:
            c.close()

    assert wait_for("alice commits with the group ACL", commits, timeout=90) == 5


def test_a_regex_subscription_is_assigned_only_the_topics_the_member_may_describe(make_kcoord, tmp_path):
    # KIP-848 with librdkafka's group.protocol=consumer: alice subscribes to
    # ^orders-.*; she may read orders-eu but has no ACL on orders-us, so the
    # coordinator resolves the pattern to orders-eu alone (Kafka's
    # filterTopicDescribeAuthorizedTopics) and she is assigned only its
    # partitions.
    from groups import FAST_848

    addr, _ = start_guarded(make_kcoord, tmp_path, ["orders-eu:2", "orders-us:2"],
                            ["--topic", "orders-eu", "--group", "regex-acl"], FAST_848)
    c = Consumer({**sasl_conf(addr, "alice"), "group.id": "regex-acl", "group.protocol": "consumer",
                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
    # What the coordinator assigned, as the super user sees it (the client
    # itself would not show a topic its metadata hides from it).
    admin = AdminClient(sasl_conf(addr, "admin"))

    def assigned():
        c.poll(0.5)
        g = admin.describe_consumer_groups(["regex-acl"])["regex-acl"].result(30)
        got = sorted((tp.topic, tp.partition) for m in g.members for tp in m.assignment.topic_partitions)
        return got or None

    try:
        c.subscribe(["^orders-.*"])
        assert wait_for("an assignment", assigned, timeout=60) == [("orders-eu", 0), ("orders-eu", 1)]
    finally:
        c.close()
