"""KIP-848 consumer groups with a real client: librdkafka (confluent-kafka
2.16.1) with group.protocol=consumer, against the coordinator's server-side
assignor."""

import sys
import time

import pytest
from confluent_kafka import Consumer, ConsumerGroupState, ConsumerGroupType, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic

from conftest import wait_for
from groups import FAST_848, Member, WORKERS, rdk_member, stop_all, wait_balanced

SIX = [("t6", p) for p in range(6)]


@pytest.fixture
def k(make_kcoord):
    return make_kcoord(topics=["t6:6"], settings=FAST_848)


def test_three_consumer_protocol_members_share_six_partitions_and_survive_close_and_kill(k, tmp_path):
    members = [rdk_member(tmp_path, f"m{i}", k, "g848", "t6", "consumer") for i in range(3)]
    try:
        wait_balanced(members, SIX, even=True)
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
    # A shard still loading on a busy machine answers ListGroups with
    # COORDINATOR_LOAD_IN_PROGRESS (librdkafka reports it, not retries it).
    def listed():
        r = admin.list_consumer_groups().result(30)
        return [(x.group_id, x.type) for x in r.valid if x.group_id == "g848c"]

    assert wait_for("the group in ListGroups", listed) == [("g848c", ConsumerGroupType.CONSUMER)]
    committed = c.committed([TopicPartition("t6", i) for i in range(6)], timeout=30)
    assert [tp.offset for tp in committed] == [10] * 6
    c.close()


def _rdk_consumer(tmp_path, name, kcoord, group, topic):
    """A consumer-protocol librdkafka member that also consumes."""
    argv = [sys.executable, str(WORKERS / "rdk_member.py"), "--bootstrap", kcoord.bootstrap, "--group", group,
            "--topic", topic, "--strategy", "consumer", "--consume", "--record", str(tmp_path / f"{name}.rec")]
    return Member(tmp_path, name, argv)


def _consumed_partitions(tmp_path, names):
    """(partition, key) of every message the named members recorded."""
    seen = set()
    for n in names:
        path = tmp_path / f"{n}.rec"
        if path.exists():
            for line in path.read_text().splitlines():
                parts = line.split(" ", 2)
                if len(parts) == 3:
                    seen.add((int(parts[0]), parts[2]))
    return seen


def test_a_regex_subscription_picks_up_a_topic_created_later(make_kcoord, tmp_path):
    k = make_kcoord(topics=["rx-a:2", "other:1"], settings=FAST_848)
    m = rdk_member(tmp_path, "rx", k, "g848rx", "^rx-.*", "consumer")
    try:
        wait_for("the regex member to get rx-a", lambda: m.assigned() == {("rx-a", 0), ("rx-a", 1)})
        admin = AdminClient({"bootstrap.servers": k.bootstrap})
        admin.create_topics([NewTopic("rx-b", 2, 1)])["rx-b"].result(30)
        # The group re-resolves its pattern (at most every 10 s) and the
        # new topic's partitions are assigned.
        want = {("rx-a", 0), ("rx-a", 1), ("rx-b", 0), ("rx-b", 1)}
        wait_for("the regex member to get rx-b too", lambda: m.assigned() == want, timeout=60)
        g = admin.describe_consumer_groups(["g848rx"])["g848rx"].result(30)
        assert g.type == ConsumerGroupType.CONSUMER
        assert not m.state().get("fatal"), m.state()
    finally:
        stop_all([m])


def test_partitions_grow_while_three_consumers_run_and_the_assignment_follows(make_kcoord, tmp_path):
    k = make_kcoord(topics=["tg:3"], settings=FAST_848)
    names = [f"grow{i}" for i in range(3)]
    members = [_rdk_consumer(tmp_path, n, k, "g848grow", "tg") for n in names]
    try:
        wait_balanced(members, [("tg", p) for p in range(3)])
        admin = AdminClient({"bootstrap.servers": k.bootstrap})
        admin.create_partitions([NewPartitions("tg", 6)])["tg"].result(30)
        six = [("tg", p) for p in range(6)]
        wait_balanced(members, six, timeout=60, even=True)
        assert all(len(m.assigned()) == 2 for m in members), [m.assigned() for m in members]
        p = Producer({"bootstrap.servers": k.bootstrap})
        sent = set()
        for i in range(60):
            p.produce("tg", str(i).encode(), key=f"k{i}".encode(), partition=i % 6)
            sent.add((i % 6, f"k{i}"))
        assert p.flush(30) == 0
        wait_for("every message, new partitions included, to be consumed",
                 lambda: sent <= _consumed_partitions(tmp_path, names), timeout=60)
        assert not any(m.state().get("fatal") for m in members), [m.state() for m in members]
    finally:
        stop_all(members)


def test_a_static_member_restarting_within_its_session_gets_its_partitions_back_without_a_rebalance(make_kcoord,
                                                                                                     tmp_path):
    # A 20 s session leaves room for a new process to start on a loaded machine.
    k = make_kcoord(topics=["t6:6"], settings=FAST_848 + ["group.consumer.session_timeout_ms=20000",
                                                          "metrics.listen=127.0.0.1:0"])
    a = rdk_member(tmp_path, "sa", k, "g848static", "t6", "consumer", instance_id="static-a")
    others = [rdk_member(tmp_path, f"s{i}", k, "g848static", "t6", "consumer") for i in range(2)]
    a2 = None
    try:
        wait_balanced([a] + others, SIX)
        view = wait_for("the group to be stable", lambda: (lambda v: v if v["state"] == "Stable" else None)(
            k.http_json("/v1/groups/g848static")))
        mine = a.assigned()
        theirs = [o.assigned() for o in others]
        epochs = {m["member_id"]: m["member_epoch"] for m in view["members"] if m["group_instance_id"] is None}
        # The static member leaves temporarily (epoch -2) and a new process
        # with the same instance id takes its place.
        a.close()
        a2 = rdk_member(tmp_path, "sa2", k, "g848static", "t6", "consumer", instance_id="static-a")
        wait_for("the restarted static member to own its partitions again", lambda: a2.assigned() == mine, timeout=60)
        after = k.http_json("/v1/groups/g848static")
        assert after["group_epoch"] == view["group_epoch"], "no new target assignment was computed"
        assert len(after["rebalances"]) == len(view["rebalances"]), after["rebalances"]
        assert [o.assigned() for o in others] == theirs, "the other members kept their partitions"
        assert {m["member_id"]: m["member_epoch"] for m in after["members"] if m["group_instance_id"] is None} == epochs
        static = [m for m in after["members"] if m["group_instance_id"] == "static-a"]
        assert len(static) == 1 and static[0]["member_epoch"] == view["group_epoch"], static
        assert not any(m.state().get("fatal") for m in [a2] + others)
    finally:
        stop_all(others + ([a2] if a2 else []) + [a])
