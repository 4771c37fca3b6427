"""Consumer groups with real clients: librdkafka (confluent-kafka 2.16.1),
membership changes, static membership, and the admin API."""

import time

import pytest
from confluent_kafka import ConsumerGroupState, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient

from conftest import wait_for
from groups import balanced, rdk_member, stop_all, wait_balanced

SIX = [("t6", p) for p in range(6)]


@pytest.fixture
def k(make_kcoord):
    return make_kcoord(topics=["t6:6"], settings=["group.initial_rebalance_delay_ms=500", "metrics.listen=127.0.0.1:0"])


@pytest.mark.parametrize("strategy", ["range", "roundrobin", "cooperative-sticky"])
def test_three_members_share_six_partitions_and_survive_close_and_kill(k, tmp_path, strategy):
    group = f"g-{strategy}"
    members = [rdk_member(tmp_path, f"m{i}", k, group, "t6", strategy) for i in range(3)]
    try:
        wait_balanced(members, SIX)
        assert k.rebalance_causes(group)[0] == "member_joined"
        # A member that closes (LeaveGroup) hands its partitions over promptly.
        members[0].close()
        wait_balanced(members[1:], SIX, timeout=30)
        assert k.rebalance_causes(group)[-1] == "member_left"
        # A member killed without leaving is removed after its session timeout (6 s).
        members[1].kill()
        killed_at = time.time()
        wait_balanced(members[2:], SIX, timeout=60)
        assert time.time() - killed_at >= 5, "the survivor took over before the session expired"
        assert k.rebalance_causes(group)[-1] == "session_expired"
    finally:
        stop_all(members)


def test_a_restarted_static_member_gets_its_partitions_back_without_a_rebalance(k, tmp_path):
    a = rdk_member(tmp_path, "a", k, "static", "t6", instance_id="instance-a", session_ms=10000)
    b = rdk_member(tmp_path, "b", k, "static", "t6", instance_id="instance-b", session_ms=10000)
    try:
        wait_balanced([a, b], SIX)
        before_a, before_b = a.assigned(), b.assigned()
        revocations_b = b.state()["revocations"]
        causes_before = k.rebalance_causes("static")
        # A static member does not leave the group when it stops; it comes
        # back under the same instance id well within its session timeout.
        a.kill()
        a2 = rdk_member(tmp_path, "a2", k, "static", "t6", instance_id="instance-a", session_ms=10000)
        wait_for("the restarted static member to be assigned", lambda: a2.assigned() == before_a, timeout=30)
        assert b.assigned() == before_b
        assert b.state()["revocations"] == revocations_b, "the other member was not disturbed"
        assert k.rebalance_causes("static") == causes_before, "the replacement caused no rebalance"
        a2.close()
    finally:
        stop_all([a, b])


def test_a_second_live_member_with_the_same_instance_id_fences_the_first(k, tmp_path):
    first = rdk_member(tmp_path, "first", k, "fence", "t6", instance_id="same-id", session_ms=10000)
    members = [first]
    try:
        wait_for("the first member to own everything", lambda: first.assigned() == set(SIX), timeout=30)
        causes_before = k.rebalance_causes("fence")
        assert causes_before[0] == "member_joined", causes_before
        second = rdk_member(tmp_path, "second", k, "fence", "t6", instance_id="same-id", session_ms=10000)
        members.append(second)
        wait_for("the second member to take over", lambda: second.assigned() == set(SIX), timeout=30)
        # The first one is told it was fenced (librdkafka raises a fatal
        # error and logs it) instead of sharing partitions...
        wait_for("the first member to be fenced", lambda: "fenced by other consumer" in first.log_text(), timeout=30)
        # ...and the group holds exactly one member for the instance id: the second.
        admin = AdminClient({"bootstrap.servers": k.bootstrap})
        desc = admin.describe_consumer_groups(["fence"], request_timeout=30)["fence"].result()
        assert [(m.member_id, m.group_instance_id) for m in desc.members] == [(second.state()["member_id"], "same-id")]
        assert "fenced" not in second.log_text()
        # The Stable group replaced the static member in place, as Kafka
        # does: no rebalance, so the history is unchanged.
        assert k.rebalance_causes("fence") == causes_before
    finally:
        stop_all(members)


def test_admin_client_lists_describes_and_deletes_groups(k, tmp_path):
    admin = AdminClient({"bootstrap.servers": k.bootstrap})
    a = rdk_member(tmp_path, "a", k, "admin-g", "t6")
    b = rdk_member(tmp_path, "b", k, "admin-g", "t6")
    try:
        wait_balanced([a, b], SIX)
        # A group that only committed offsets is listed as Empty.
        from confluent_kafka import Consumer

        c = Consumer({"bootstrap.servers": k.bootstrap, "group.id": "committed-only"})
        c.commit(offsets=[TopicPartition("t6", 0, 5)], asynchronous=False)
        c.close()

        listed = admin.list_consumer_groups(request_timeout=30).result()
        states = {g.group_id: g.state for g in listed.valid}
        assert states["admin-g"] == ConsumerGroupState.STABLE
        assert states["committed-only"] == ConsumerGroupState.EMPTY
        stable = admin.list_consumer_groups(states={ConsumerGroupState.STABLE}, request_timeout=30).result()
        assert [g.group_id for g in stable.valid] == ["admin-g"]

        desc = admin.describe_consumer_groups(["admin-g"], request_timeout=30)["admin-g"].result()
        assert desc.state == ConsumerGroupState.STABLE
        assert desc.partition_assignor == "range"
        assert len(desc.members) == 2
        owned = set()
        for m in desc.members:
            assert m.host.startswith("/127.0.0.1"), m.host
            assert m.client_id
            owned |= {(tp.topic, tp.partition) for tp in m.assignment.topic_partitions}
        assert owned == set(SIX)

        futures = admin.delete_consumer_groups(["admin-g"], request_timeout=30)
        with pytest.raises(KafkaException) as e:
            futures["admin-g"].result()
        assert "NON_EMPTY_GROUP" in str(e.value)
        stop_all([a, b])
        admin.delete_consumer_groups(["admin-g"], request_timeout=30)["admin-g"].result()
        listed = admin.list_consumer_groups(request_timeout=30).result()
        assert "admin-g" not in {g.group_id for g in listed.valid}
    finally:
        stop_all([a, b])


def test_committed_offsets_and_metadata_round_trip_and_survive_a_restart(make_kcoord):
    from confluent_kafka import Consumer

    k = make_kcoord(topics=["t6:6"], settings=["storage.fsync=always"])
    admin = AdminClient({"bootstrap.servers": k.bootstrap})
    c = Consumer({"bootstrap.servers": k.bootstrap, "group.id": "commits", "enable.auto.commit": False})
    tps = [TopicPartition("t6", p, 100 + p, metadata=f"meta-{p}") for p in range(6)]
    c.commit(offsets=tps, asynchronous=False)
    got = c.committed([TopicPartition("t6", p) for p in range(6)], timeout=30)
    assert [(t.partition, t.offset, t.metadata) for t in got] == [(p, 100 + p, f"meta-{p}") for p in range(6)]
    c.close()
    from confluent_kafka import ConsumerGroupTopicPartitions

    res = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions("commits")], request_timeout=30)["commits"].result()
    assert sorted((t.partition, t.offset, t.metadata) for t in res.topic_partitions) == [(p, 100 + p, f"meta-{p}") for p in range(6)]

    k.restart()
    c = Consumer({"bootstrap.servers": k.bootstrap, "group.id": "commits", "enable.auto.commit": False})
    got = wait_for("committed offsets after restart", lambda: c.committed([TopicPartition("t6", p) for p in range(6)], timeout=10))
    assert [(t.offset, t.metadata) for t in got] == [(100 + p, f"meta-{p}") for p in range(6)]
    c.close()


def test_admin_cli_describes_a_live_group_and_resets_it_once_inactive(k, tmp_path):
    import subprocess

    from confluent_kafka import Consumer, Producer

    from conftest import KCOORD_BIN

    p = Producer({"bootstrap.servers": k.bootstrap})
    for i in range(60):
        p.produce("t6", key=str(i), value=f"v{i}", partition=i % 6)
    p.flush(30)
    c = Consumer({"bootstrap.servers": k.bootstrap, "group.id": "cli-live", "auto.offset.reset": "earliest",
                  "enable.auto.commit": False, "client.id": "cli-consumer"})
    c.subscribe(["t6"])
    seen = 0
    deadline = time.time() + 60
    while seen < 30 and time.time() < deadline:
        m = c.poll(0.2)
        if m is not None and not m.error():
            seen += 1
            c.commit(message=m, asynchronous=False)

    def cli(*args):
        return subprocess.run([KCOORD_BIN, "groups", *args, "--bootstrap", k.bootstrap], capture_output=True, text=True, timeout=60)

    out = cli("describe", "--group", "cli-live")
    assert out.returncode == 0, out.stderr
    rows = [l.split() for l in out.stdout.splitlines() if l.startswith("cli-live")]
    assert len(rows) == 6, out.stdout
    for row in rows:
        group, topic, partition, current, end, lag, member, host, client = row
        assert (topic, end, host, client) == ("t6", "10", "/127.0.0.1", "cli-consumer"), row
        assert member == c.memberid()
        assert current == "-" or int(lag) == 10 - int(current)
    assert sum(int(r[3]) for r in rows if r[3] != "-") == 30

    out = cli("reset-offsets", "--group", "cli-live", "--all-topics", "--to-earliest", "--execute")
    assert out.returncode == 1 and "inactive" in out.stderr, out.stderr
    c.close()
    out = cli("reset-offsets", "--group", "cli-live", "--topic", "t6", "--to-latest", "--execute")
    assert out.returncode == 0, out.stderr
    out = cli("describe", "--group", "cli-live")
    rows = [l.split() for l in out.stdout.splitlines() if l.startswith("cli-live")]
    assert all(r[3] == "10" and r[5] == "0" for r in rows), out.stdout
