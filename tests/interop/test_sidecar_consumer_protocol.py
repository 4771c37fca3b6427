"""KIP-848 consumer groups (librdkafka with group.protocol=consumer) through
sidecars in front of librdkafka's mock cluster: kcoord's coordinator and
server-side assignor own the group, the upstream serves the records, and
the topic metadata the assignor works from is the upstream's."""

import pytest
from confluent_kafka import ConsumerGroupState, ConsumerGroupType
from confluent_kafka.admin import AdminClient

from conftest import wait_for
from groups import FAST_848, stop_all, wait_balanced
from sidecar_harness import (MockCluster, Sidecar, group_owned_by, owner_of, per_broker_sidecars, rdk_worker,
                             read_records)
from test_sidecar import committed, produce, show_logs_on_failure  # noqa: F401 (autouse: sidecar logs on failure)

TOPICS = {"c848": 6, "c848pb": 6}
# A metadata refresh short enough to see upstream topics appear.
SIDECAR_848 = FAST_848 + ["sidecar.metadata_refresh_ms=1000"]


@pytest.fixture(scope="module")
def mock(tmp_path_factory):
    m = MockCluster(tmp_path_factory.mktemp("mock848"), brokers=3,
                    topics=[f"{t}:{p}:3" for t, p in TOPICS.items()]).start()
    yield m
    m.stop()


@pytest.fixture(scope="module")
def sidecar(mock, tmp_path_factory):
    s = Sidecar(tmp_path_factory.mktemp("sidecar848") / "data", mock.bootstrap, settings=SIDECAR_848).start()
    yield s
    code = s.stop()
    assert code == 0, f"sidecar exited with {code}; log:\n{s.log_tail()}"


def upstream_offsets(mock, group, topic, partitions):
    """What the upstream itself has committed for the group (write-through)."""
    return {p: o for p, (o, _) in committed(mock.bootstrap, group, topic, partitions).items()}


def test_consumer_protocol_members_share_consume_and_commit_through_the_sidecar(mock, sidecar, tmp_path):
    six = [("c848", p) for p in range(6)]
    records = [tmp_path / f"m{i}.rec" for i in range(3)]
    members = [rdk_worker(tmp_path, f"m{i}", sidecar.bootstrap, "g848sc", "c848", record=records[i],
                          auto_commit=True, strategy="consumer") for i in range(3)]
    try:
        wait_balanced(members, six, timeout=90, even=True)
        assert all(len(m.assigned()) == 2 for m in members), [m.assigned() for m in members]
        sent = produce(sidecar.bootstrap, "c848", 120, "a", partitions=6)
        wait_for("every message to be consumed",
                 lambda: set(sent) <= {k for _, _, k in read_records(records)}, timeout=60)

        admin = AdminClient({"bootstrap.servers": sidecar.bootstrap})
        g = admin.describe_consumer_groups(["g848sc"])["g848sc"].result(30)
        assert (g.type, g.state, len(g.members), g.partition_assignor) == (
            ConsumerGroupType.CONSUMER, ConsumerGroupState.STABLE, 3, "uniform")
        # A killed member is fenced after its session timeout; the others take over its partitions.
        members[0].kill()
        wait_balanced(members[1:], six, timeout=60)
        more = produce(sidecar.bootstrap, "c848", 60, "b", partitions=6)
        wait_for("the rest to be consumed by the survivors",
                 lambda: set(more) <= {k for _, _, k in read_records(records[1:])}, timeout=60)
        # Auto-commits reach kcoord and are written through to the upstream's own offsets.
        wait_for("every partition's commit to be written through to the upstream",
                 lambda: upstream_offsets(mock, "g848sc", "c848", 6) == {p: 30 for p in range(6)}, timeout=60)
        assert not any(m.state().get("fatal") for m in members), [m.state() for m in members]
    finally:
        stop_all(members)


def test_a_topic_created_upstream_after_the_members_subscribed_is_assigned(mock, sidecar, tmp_path):
    members = [rdk_worker(tmp_path, f"l{i}", sidecar.bootstrap, "g848late", "late848", strategy="consumer")
               for i in range(2)]
    try:
        # The members have joined (and heartbeat) before the topic exists.
        admin = AdminClient({"bootstrap.servers": sidecar.bootstrap})
        wait_for("the group to have two members", lambda: len(
            admin.describe_consumer_groups(["g848late"])["g848late"].result(30).members) == 2, timeout=60)
        mock.create_topic("late848", 4)
        wait_balanced(members, [("late848", p) for p in range(4)], timeout=60)
    finally:
        stop_all(members)


@pytest.fixture
def per_broker(mock, tmp_path):
    with per_broker_sidecars(mock, tmp_path, settings=SIDECAR_848) as nodes:
        yield nodes


def test_per_broker_sidecars_serve_a_consumer_protocol_group_from_the_owner_of_its_shard(mock, per_broker, tmp_path):
    peers = {i: n.bootstrap for i, n in per_broker.items()}
    group = group_owned_by(3, peers, "c848pb")
    assert owner_of(group, peers) == 3
    # Each member bootstraps from a different node; both end up at node 3.
    members = [rdk_worker(tmp_path, f"pb{i}", peers[i], group, "c848pb", strategy="consumer") for i in (1, 2)]
    try:
        wait_balanced(members, [("c848pb", p) for p in range(6)], timeout=90)
        admin = AdminClient({"bootstrap.servers": peers[1]})
        g = admin.describe_consumer_groups([group])[group].result(30)
        assert (g.type, g.coordinator.id, len(g.members)) == (ConsumerGroupType.CONSUMER, 3, 2), g
    finally:
        stop_all(members)
