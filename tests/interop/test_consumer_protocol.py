"""KIP-848 consumer groups with a real client: librdkafka (confluent-kafka
2.16.1) with group.protocol=consumer, against the coordinator's server-side
assignor."""

import time

import pytest
from confluent_kafka import Consumer, ConsumerGroupState, ConsumerGroupType, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from conftest import wait_for
from groups import rdk_member, stop_all, wait_balanced

SIX = [("t6", p) for p in range(6)]
# Short consumer-protocol timers for two shared cores (Kafka: 45 s / 5 s).
FAST_848 = [
    "group.consumer.min_session_timeout_ms=6000",
    "group.consumer.session_timeout_ms=6000",
    "group.consumer.min_heartbeat_interval_ms=500",
    "group.consumer.heartbeat_interval_ms=500",
]


@pytest.fixture
def k(make_kcoord):
    return make_kcoord(topics=["t6:6"], settings=FAST_848)


def test_three_consumer_protocol_members_share_six_partitions_and_survive_close_and_kill(k, tmp_path):
    members = [rdk_member(tmp_path, f"m{i}", k, "g848", "t6", "consumer") for i in range(3)]
    try:
        wait_balanced(members, SIX)
        assert all(len(m.assigned()) == 2 for m in members), [m.assigned() for m in members]
        # A member that leaves (epoch -1) hands its partitions over.
        members[0].close()
        wait_balanced(members[1:], SIX, timeout=30)
        # A member killed without leaving is fenced after its session timeout.
        members[1].kill()
        killed_at = time.time()
        wait_balanced(members[2:], SIX, timeout=60)
        assert time.time() - killed_at >= 5, "the survivor took over before the session expired"
        assert not any(m.state().get("fatal") for m in members), [m.state() for m in members]
    finally:
        stop_all(members)


def test_a_consumer_protocol_member_consumes_commits_and_is_described(k):
    p = Producer({"bootstrap.servers": k.bootstrap})
    for i in range(60):
        p.produce("t6", str(i).encode(), partition=i % 6)
    assert p.flush(30) == 0
    c = Consumer({"bootstrap.servers": k.bootstrap, "group.id": "g848c", "group.protocol": "consumer",
                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
    c.subscribe(["t6"])
    got = 0
    deadline = time.time() + 60
    while got < 60 and time.time() < deadline:
        m = c.poll(0.2)
        if m is not None and m.error() is None:
            got += 1
    assert got == 60
    c.commit(asynchronous=False)
    admin = AdminClient({"bootstrap.servers": k.bootstrap})
    g = admin.describe_consumer_groups(["g848c"])["g848c"].result(30)
    assert (g.type, g.state, len(g.members), g.partition_assignor) == (
        ConsumerGroupType.CONSUMER, ConsumerGroupState.STABLE, 1, "uniform")
    assert sorted(tp.partition for tp in g.members[0].assignment.topic_partitions) == list(range(6))
    listed = admin.list_consumer_groups().result(30)
    assert [(x.group_id, x.type) for x in listed.valid if x.group_id == "g848c"] == [("g848c", ConsumerGroupType.CONSUMER)]
    committed = c.committed([TopicPartition("t6", i) for i in range(6)], timeout=30)
    assert [tp.offset for tp in committed] == [10] * 6
    c.close()
