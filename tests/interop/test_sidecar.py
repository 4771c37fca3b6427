"""Sidecar mode (`kcoord sidecar`) in front of an upstream Kafka cluster —
librdkafka's 3-broker mock cluster — with real clients: kcoord serves the
consumer groups, the upstream everything else, and clients only ever see the
sidecars' addresses."""

import subprocess
import threading
import time

import pytest
from confluent_kafka import Consumer, ConsumerGroupState, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

import rawkafka
from conftest import kcat_path, needs_kcat, node_script, wait_for
from groups import stop_all, wait_balanced
from java_client import JavaClient, needs_java
from sidecar_harness import (FETCH, HEARTBEAT, JOIN_GROUP, LEAVE_GROUP, OFFSET_COMMIT, PRODUCE, STARTED, SYNC_GROUP,
                             MockCluster, Sidecar, Stats, free_ports, group_owned_by, owner_of, per_broker_sidecars,
                             rdk_worker, read_records)

# Every test has its own topic on the upstream, created before the sidecars start.
TOPICS = {"selftest": 2, "grp": 6, "restart": 3, "legacy": 3, "wt": 3, "moves": 3, "clients": 3, "pb": 6}
GROUP_APIS = {JOIN_GROUP: "JoinGroup", HEARTBEAT: "Heartbeat", LEAVE_GROUP: "LeaveGroup", SYNC_GROUP: "SyncGroup"}
CONSUMER = {"auto.offset.reset": "earliest", "enable.auto.commit": False, "session.timeout.ms": 6000,
            "heartbeat.interval.ms": 500}


@pytest.fixture(scope="module")
def mock(tmp_path_factory):
    m = MockCluster(tmp_path_factory.mktemp("mock"), brokers=3, topics=[f"{t}:{p}:3" for t, p in TOPICS.items()]).start()
    yield m
    m.stop()


@pytest.fixture(scope="module")
def sidecar(mock, tmp_path_factory):
    """One sidecar process fronting the whole mock cluster (one listener per broker)."""
    s = Sidecar(tmp_path_factory.mktemp("sidecar") / "data", mock.bootstrap).start()
    yield s
    code = s.stop()
    assert code == 0, f"sidecar exited with {code}; log:\n{s.log_tail()}"


@pytest.fixture(autouse=True)
def show_logs_on_failure(request):
    """When a test fails, prints what every sidecar logged during it."""
    failed = request.session.testsfailed
    offsets = {}

    def size(path):
        try:
            return path.stat().st_size
        except OSError:
            return 0

    for s in STARTED:
        offsets[s.log_path] = size(s.log_path)
    yield
    if request.session.testsfailed == failed:
        return
    tr = request.config.pluginmanager.get_plugin("terminalreporter")
    for path in dict.fromkeys(s.log_path for s in STARTED):
        try:
            with open(path, "rb") as f:
                f.seek(offsets.get(path, 0))
                lines = f.read().decode(errors="replace").splitlines()
        except OSError:
            continue
        if tr and lines:
            tr.write_line(f"\n---- {path} during {request.node.name} (last 60 lines) ----")
            for line in lines[-60:]:
                tr.write_line(line)


def produce(bootstrap, topic, n, prefix, partitions=None):
    """Produces n keyed messages (round-robin over `partitions` if given);
    returns their keys. Every one must be acknowledged."""
    errors = []
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "enable.idempotence": True})
    keys = [f"{prefix}-{i}" for i in range(n)]
    for i, key in enumerate(keys):
        kw = {"partition": i % partitions} if partitions else {}
        p.produce(topic, key=key, value=f"value-{key}", on_delivery=lambda e, m: e and errors.append(e), **kw)
        p.poll(0)
    assert p.flush(60) == 0
    assert errors == []
    return keys


def consume(consumer, n, timeout=60):
    """Polls until n messages arrived; returns them as (partition, offset, key)."""
    got = []
    deadline = time.time() + timeout
    while len(got) < n and time.time() < deadline:
        for m in consumer.consume(num_messages=n - len(got), timeout=0.5):
            assert m.error() is None, m.error()
            got.append((m.partition(), m.offset(), m.key().decode()))
    assert len(got) >= n, f"only {len(got)} of {n} messages arrived"
    return got


# A sidecar that just started may still be loading its coordinator shards
# (storage.fsync=always makes that slow on a busy machine); librdkafka does
# not retry a synchronous commit or committed() that gets these errors.
RETRIABLE = {KafkaError.COORDINATOR_LOAD_IN_PROGRESS, KafkaError.COORDINATOR_NOT_AVAILABLE, KafkaError.NOT_COORDINATOR}


def retrying(fn, timeout=30):
    deadline = time.time() + timeout
    while True:
        try:
            return fn()
        except KafkaException as e:
            if e.args[0].code() not in RETRIABLE or time.time() > deadline:
                raise
            time.sleep(0.2)


def commit(bootstrap, group, offsets):
    """A simple commit (no group membership) through `bootstrap`."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        retrying(lambda: c.commit(offsets=offsets, asynchronous=False))
    finally:
        c.close()


def committed(bootstrap, group, topic, partitions, timeout=10):
    """{partition: (offset, metadata)} committed for the group, asked through `bootstrap`."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        got = retrying(lambda: c.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=timeout))
        return {t.partition: (t.offset, t.metadata) for t in got}
    finally:
        c.close()


def group_requests(mock):
    """The group-membership requests the upstream received (it must receive none)."""
    return [(ts, broker, GROUP_APIS[key]) for ts, broker, key in mock.track_dump() if key in GROUP_APIS]


def test_the_mock_cluster_serves_a_producer_and_a_consumer_directly(mock):
    """Harness self-test: the upstream works on its own and tracks requests."""
    mock.track_clear()
    keys = produce(mock.bootstrap, "selftest", 20, "self")
    c = Consumer({"bootstrap.servers": mock.bootstrap, "group.id": "selftest-g", **CONSUMER})
    c.subscribe(["selftest"])
    try:
        got = consume(c, 20)
    finally:
        c.close()
    assert sorted(k for _, _, k in got) == sorted(keys)
    seen = {key for _, _, key in mock.track_dump()}
    assert {PRODUCE, FETCH, JOIN_GROUP, SYNC_GROUP} <= seen, seen
    assert len(mock.addresses) == 3


def test_confluent_kafka_group_shares_partitions_and_rebalances_through_the_sidecar(mock, sidecar, tmp_path):
    group, partitions = "sc-rdk", [("grp", p) for p in range(6)]
    assert len(sidecar.listeners) == 3, sidecar.serving_line()
    assert "(nodes 1,2,3," in sidecar.serving_line(), sidecar.serving_line()
    mock.track_clear()
    records = [tmp_path / f"m{i}.rec" for i in range(3)]
    members = [rdk_worker(tmp_path, f"m{i}", sidecar.bootstrap, group, "grp", record=records[i], auto_commit=True)
               for i in range(3)]
    sent = []

    def consumed_everything():
        return set(sent) <= {k for _, _, k in read_records(records)}

    try:
        wait_balanced(members, partitions, timeout=90)
        assert sidecar.rebalance_causes(group)[0] == "member_joined"
        sent += produce(sidecar.bootstrap, "grp", 300, "first")
        wait_for("the first batch to be consumed", consumed_everything, timeout=60)

        # A member that closes leaves the group: the others take over without waiting for a session timeout.
        causes = sidecar.rebalance_causes(group)
        members[0].close()
        wait_balanced(members[1:], partitions, timeout=30)
        assert sidecar.wait_rebalance_after(group, len(causes)) == "member_left", sidecar.rebalance_causes(group)
        sent += produce(sidecar.bootstrap, "grp", 300, "second")
        wait_for("the second batch to be consumed", consumed_everything, timeout=60)

        # A member killed without leaving is removed once its session (6 s) expires.
        causes = sidecar.rebalance_causes(group)
        members[1].kill()
        killed_at = time.time()
        wait_balanced(members[2:], partitions, timeout=60)
        assert time.time() - killed_at >= 5, "the survivor took over before the session expired"
        assert sidecar.wait_rebalance_after(group, len(causes)) == "session_expired", sidecar.rebalance_causes(group)
        sent += produce(sidecar.bootstrap, "grp", 300, "third")
        wait_for("the third batch to be consumed", consumed_everything, timeout=60)
    finally:
        stop_all(members)

    recs = read_records(records)
    assert {k for _, _, k in recs} == set(sent), "nothing lost, nothing made up"
    at = {}
    for p, o, k in recs:
        assert at.setdefault((p, o), k) == k, f"two keys at partition {p} offset {o}"
    assert len(at) == len(sent), "every message is at exactly one position"
    # The upstream served the data (forwarded) but never saw the group.
    seen = {key for _, _, key in mock.track_dump()}
    assert {PRODUCE, FETCH} <= seen, seen
    assert group_requests(mock) == []


def test_committed_offsets_survive_a_sidecar_restart(mock, tmp_path):
    group, n = "restart-g", 3
    base = free_ports(3, consecutive=True)[0]
    s = Sidecar(tmp_path / "data", mock.bootstrap, settings=["storage.fsync=always"], port=base).start()
    try:
        ports = [f"127.0.0.1:{base + i}" for i in range(3)]
        assert s.listeners == ports, s.serving_line()
        produce(s.bootstrap, "restart", 60, "r", partitions=n)
        commit(s.bootstrap, group, [TopicPartition("restart", p, 10 + p, metadata=f"meta-{p}") for p in range(n)])
        # Once written through, the upstream's copy is changed behind the sidecar's back: after
        # the restart kcoord answers from its own log, it does not import the group again.
        wait_for("the commit to be written through",
                 lambda: {p: o for p, (o, _) in committed(mock.bootstrap, group, "restart", n).items()} == {p: 10 + p for p in range(n)},
                 timeout=30)
        commit(mock.bootstrap, group, [TopicPartition("restart", p, 1) for p in range(n)])

        assert s.stop() == 0, s.log_tail()
        s.start()
        assert s.listeners == ports, "restarted on the same ports"
        got = wait_for("the committed offsets after the restart", lambda: committed(s.bootstrap, group, "restart", n))
        assert got == {p: (10 + p, f"meta-{p}") for p in range(n)}

        # A member of the group resumes from them.
        c = Consumer({"bootstrap.servers": s.bootstrap, "group.id": group, **CONSUMER})
        c.subscribe(["restart"])
        first = {}
        try:
            deadline = time.time() + 60
            while len(first) < n and time.time() < deadline:
                for m in c.consume(num_messages=100, timeout=0.5):
                    assert m.error() is None, m.error()
                    first.setdefault(m.partition(), m.offset())
        finally:
            c.close()
        assert first == {p: 10 + p for p in range(n)}
    finally:
        code = s.stop()
    assert code == 0, s.log_tail()


def test_a_group_deleted_through_the_sidecar_stays_deleted_after_a_restart(mock, tmp_path):
    """The upstream keeps its written-through copy when it cannot delete
    groups (the mock has no DeleteGroups; a real cluster may fail to): that
    copy must not be imported again as if the group were new."""
    group, n = "deleted-g", 3
    s = Sidecar(tmp_path / "data", mock.bootstrap, settings=["storage.fsync=always"],
                port=free_ports(3, consecutive=True)[0]).start()
    try:
        commit(s.bootstrap, group, [TopicPartition("restart", p, 5) for p in range(n)])
        wait_for("the commit to be written through",
                 lambda: {p: o for p, (o, _) in committed(mock.bootstrap, group, "restart", n).items()} == {p: 5 for p in range(n)},
                 timeout=30)
        admin = AdminClient({"bootstrap.servers": s.bootstrap})  # kept alive until its futures complete
        admin.delete_consumer_groups([group], request_timeout=30)[group].result(timeout=60)
        del admin
        gone = {p: -1001 for p in range(n)}  # no committed offset

        def offsets():
            return {p: o for p, (o, _) in committed(s.bootstrap, group, "restart", n).items()}

        assert offsets() == gone
        assert s.stop() == 0, s.log_tail()
        s.start()
        assert offsets() == gone, "the deleted group came back from the upstream"
    finally:
        code = s.stop()
    assert code == 0, s.log_tail()


def test_admin_client_lists_describes_and_deletes_groups_through_the_sidecar(sidecar, tmp_path):
    admin = AdminClient({"bootstrap.servers": sidecar.bootstrap})
    live = "adm-live"
    member = rdk_worker(tmp_path, "adm", sidecar.bootstrap, live, "clients")
    try:
        wait_for("the member to own every partition", lambda: member.assigned() == {("clients", p) for p in range(3)},
                 timeout=60)
        for g in ("adm-a", "adm-b"):
            commit(sidecar.bootstrap, g, [TopicPartition("clients", 0, 1)])
        listed = admin.list_consumer_groups(request_timeout=30).result()
        assert listed.errors == [], listed.errors
        ids = [g.group_id for g in listed.valid]
        # librdkafka asks every broker; every listener is the same process.
        assert len(ids) == len(set(ids)), f"a group listed twice: {sorted(ids)}"
        states = {g.group_id: g.state for g in listed.valid}
        assert states[live] == ConsumerGroupState.STABLE, states
        assert states["adm-a"] == states["adm-b"] == ConsumerGroupState.EMPTY, states

        desc = admin.describe_consumer_groups([live], request_timeout=30)[live].result()
        assert desc.state == ConsumerGroupState.STABLE and len(desc.members) == 1
        assert {(tp.topic, tp.partition) for tp in desc.members[0].assignment.topic_partitions} == {("clients", p) for p in range(3)}
        with rawkafka.Conn(sidecar.listeners[0]) as c:
            fc, _ = rawkafka.find_coordinator(c, 3, live)
        assert (desc.coordinator.id, f"{desc.coordinator.host}:{desc.coordinator.port}") == (fc["node"], fc["addr"])

        with pytest.raises(KafkaException) as e:
            admin.delete_consumer_groups([live], request_timeout=30)[live].result()
        assert "NON_EMPTY_GROUP" in str(e.value)
        admin.delete_consumer_groups(["adm-a"], request_timeout=30)["adm-a"].result()
        ids = [g.group_id for g in admin.list_consumer_groups(request_timeout=30).result().valid]
        assert "adm-a" not in ids and "adm-b" in ids and live in ids, ids
    finally:
        stop_all([member])


def test_a_group_that_committed_upstream_resumes_where_it_was_through_the_sidecar(mock, sidecar):
    group, n = "legacy-g", 3
    produce(mock.bootstrap, "legacy", 30, "legacy", partitions=n)
    # The group's life so far: consumed and committed on the upstream itself.
    c = Consumer({"bootstrap.servers": mock.bootstrap, "group.id": group, **CONSUMER})
    c.subscribe(["legacy"])
    try:
        consume(c, 30)
        c.commit(offsets=[TopicPartition("legacy", p, 5 + p) for p in range(n)], asynchronous=False)
    finally:
        c.close()

    # Moved to the sidecar: it starts at the upstream's commits, nothing before them again.
    c = Consumer({"bootstrap.servers": sidecar.bootstrap, "group.id": group, **CONSUMER})
    c.subscribe(["legacy"])
    try:
        got = []
        deadline = time.time() + 60
        while {p for p, o, _ in got if o == 9} != set(range(n)) and time.time() < deadline:
            for m in c.consume(num_messages=100, timeout=0.5):
                assert m.error() is None, m.error()
                got.append((m.partition(), m.offset(), m.key().decode()))
        first = {p: min(o for q, o, _ in got if q == p) for p in {q for q, _, _ in got}}
        assert first == {p: 5 + p for p in range(n)}, sorted(got)
        assert len(got) == len(set(got)) == sum(10 - (5 + p) for p in range(n))
        got_committed = c.committed([TopicPartition("legacy", p) for p in range(n)], timeout=30)
        assert [t.offset for t in got_committed] == [5 + p for p in range(n)]
        # From now on the sidecar has the group: its own commits are what it answers.
        c.commit(offsets=[TopicPartition("legacy", p, 10) for p in range(n)], asynchronous=False)
    finally:
        c.close()
    assert {p: o for p, (o, _) in committed(sidecar.bootstrap, group, "legacy", n).items()} == {p: 10 for p in range(n)}


def test_offsets_committed_through_the_sidecar_are_written_through_to_the_upstream(mock, sidecar):
    group, n = "wt-g", 3
    mock.track_clear()
    c = Consumer({"bootstrap.servers": sidecar.bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        retrying(lambda: c.commit(offsets=[TopicPartition("wt", p, 11 + p, metadata=f"wt-{p}") for p in range(n)], asynchronous=False))
        upstream = wait_for(
            "the commit to reach the upstream",
            lambda: (lambda got: got if {p: o for p, (o, _) in got.items()} == {p: 11 + p for p in range(n)} else None)(
                committed(mock.bootstrap, group, "wt", n)),
            timeout=30)
        # A later commit replaces it there too.
        c.commit(offsets=[TopicPartition("wt", p, 21 + p, metadata=f"wt2-{p}") for p in range(n)], asynchronous=False)
        wait_for("the second commit to reach the upstream",
                 lambda: {p: o for p, (o, _) in committed(mock.bootstrap, group, "wt", n).items()} == {p: 21 + p for p in range(n)},
                 timeout=30)
    finally:
        c.close()
    assert {key for _, _, key in mock.track_dump()} & {OFFSET_COMMIT}, "written with OffsetCommit"
    assert group_requests(mock) == [], "simple commits: the upstream saw no group membership"
    assert upstream == {p: (11 + p, f"wt-{p}") for p in range(n)}, "the commit metadata is written through too"


def test_producing_and_consuming_through_the_sidecar_continue_across_upstream_leader_moves(mock, sidecar):
    n, topic = 1500, "moves"
    c_stats, p_stats = Stats(), Stats()
    consumer = Consumer({"bootstrap.servers": sidecar.bootstrap, "group.id": "moves-g", **CONSUMER,
                         "statistics.interval.ms": 500, "stats_cb": c_stats})
    consumer.subscribe([topic])
    received = {}
    try:
        def poll(t=0.2):
            for m in consumer.consume(num_messages=500, timeout=t):
                assert m.error() is None, m.error()
                received[m.key().decode()] = (m.partition(), m.offset())

        wait_for("the consumer to be assigned", lambda: poll() or consumer.assignment(), timeout=60)

        delivered, errors = [], []
        producer = Producer({"bootstrap.servers": sidecar.bootstrap, "linger.ms": 5, "enable.idempotence": True,
                             "statistics.interval.ms": 500, "stats_cb": p_stats})

        def on_delivery(err, msg):
            (errors if err else delivered).append(err or msg.key().decode())

        def produce_slowly():
            for i in range(n):
                producer.produce(topic, key=f"mv-{i}", value=f"v{i}", partition=i % 3, on_delivery=on_delivery)
                producer.poll(0)
                time.sleep(0.004)
            producer.flush(60)

        t = threading.Thread(target=produce_slowly)
        t.start()
        # Every partition's leader moves twice upstream while both clients work.
        for round_, at in enumerate((0.2, 0.5)):
            wait_for(f"{int(at * 100)}% of the messages delivered", lambda: poll() or len(delivered) >= n * at, timeout=60)
            for p in range(3):
                mock.set_leader(topic, p, (p + round_ + 1) % 3 + 1)
        while t.is_alive():
            poll()
        t.join()
        assert errors == [], errors[:5]
        assert len(delivered) == n
        wait_for("every delivered message to be consumed", lambda: poll() or set(delivered) <= set(received), timeout=60)
        # Both clients report the brokers they know (statistics) after the moves.
        counts = (c_stats.count, p_stats.count)

        def fresh_stats():
            poll()
            producer.poll(0)
            return c_stats.count > counts[0] + 1 and p_stats.count > counts[1] + 1

        wait_for("fresh statistics from both clients", fresh_stats, timeout=30)
    finally:
        consumer.close()
    assert len(set(received.values())) == len(received), "each message at one position"
    # The clients see the upstream's leaders, moved twice...
    md = AdminClient({"bootstrap.servers": sidecar.bootstrap}).list_topics(topic, timeout=30)
    assert {p: md.topics[topic].partitions[p].leader for p in range(3)} == {p: (p + 2) % 3 + 1 for p in range(3)}
    # ...and know every broker (each led a partition) by its sidecar address only: no
    # upstream address reached them (Metadata, or the leader hints of Produce/Fetch).
    for stats in (c_stats, p_stats):
        assert stats.broker_addresses() == set(sidecar.listeners), (stats.broker_addresses(), sidecar.listeners)


def test_no_upstream_address_reaches_a_client(mock, sidecar):
    """Raw Metadata and FindCoordinator, every version, on every listener:
    broker N is the sidecar's N-th listener, never a mock broker."""
    by_node = dict(enumerate(sidecar.listeners, start=1))
    mock_ports = mock.ports
    assert not mock_ports & {int(a.rsplit(":", 1)[1]) for a in sidecar.listeners}

    def leaks(body, cluster_id=None):
        if cluster_id:
            body = body.replace(cluster_id.encode(), b"")
        return sorted(p for p in mock_ports if rawkafka.mentions_port(body, p))

    for addr in sidecar.listeners:
        with rawkafka.Conn(addr) as c:
            versions = rawkafka.api_versions(c)
            lo, hi = versions[3]
            assert lo <= 1 and hi >= 12, f"Metadata versions {lo}-{hi}"
            for v in range(1, min(hi, 13) + 1):
                for topics in (None, ["grp", "moves"]):
                    md, body = rawkafka.metadata(c, v, topics)
                    assert md["brokers"] == by_node, (v, md["brokers"], by_node)
                    if topics is None:
                        assert set(TOPICS) <= set(md["topics"]), (v, sorted(md["topics"]))
                    else:
                        assert sorted(md["topics"]) == sorted(topics)
                    for name, t in md["topics"].items():
                        assert t["error"] == 0, (v, name, t)
                        if name in TOPICS:
                            assert len(t["partitions"]) == TOPICS[name]
                        for p in t["partitions"]:
                            assert p["leader"] in by_node and set(p["replicas"]) <= set(by_node), (v, name, p)
                    assert leaks(body, md.get("cluster_id")) == [], f"Metadata v{v} mentions a mock port"
            lo, hi = versions[10]
            assert lo <= 1 and hi >= 3, f"FindCoordinator versions {lo}-{hi}"
            for v in range(1, min(hi, 6) + 1):
                for key, key_type in (("leak-group", 0), ("leak-txn", 1)):
                    fc, body = rawkafka.find_coordinator(c, v, key, key_type)
                    assert fc["error"] == 0, (v, key_type, fc)
                    assert fc["addr"] == by_node.get(fc["node"]), (v, key_type, fc, by_node)
                    assert leaks(body) == [], f"FindCoordinator v{v} (key type {key_type}) mentions a mock port"

    # What a client library makes of it: one broker per listener, every topic.
    md = AdminClient({"bootstrap.servers": sidecar.bootstrap}).list_topics(timeout=30)
    assert {b.id: f"{b.host}:{b.port}" for b in md.brokers.values()} == by_node
    assert {t: len(md.topics[t].partitions) for t in TOPICS} == TOPICS


@pytest.fixture(scope="module")
def clients_messages(sidecar):
    """30 messages, 10 per partition of "clients", for the other clients' groups."""
    return produce(sidecar.bootstrap, "clients", 30, "cl", partitions=3)


def assert_committed_everything(sidecar, group):
    got = wait_for(f"{group}'s commits", lambda: committed(sidecar.bootstrap, group, "clients", 3))
    assert {p: o for p, (o, _) in got.items()} == {0: 10, 1: 10, 2: 10}


def test_kafka_python_consumes_and_commits_in_a_group_through_the_sidecar(sidecar, clients_messages):
    from kafka import KafkaConsumer, TopicPartition as KTP

    c = KafkaConsumer("clients", bootstrap_servers=sidecar.bootstrap.split(","), group_id="kp-sc",
                      auto_offset_reset="earliest", enable_auto_commit=False, session_timeout_ms=6000,
                      heartbeat_interval_ms=500)
    got = []
    try:
        deadline = time.time() + 60
        while len(got) < 30 and time.time() < deadline:
            for records in c.poll(timeout_ms=500).values():
                got.extend(r.key.decode() for r in records)
        c.commit()
        assert [c.committed(KTP("clients", p)) for p in range(3)] == [10, 10, 10]
    finally:
        c.close()
    assert sorted(got) == sorted(clients_messages)
    assert_committed_everything(sidecar, "kp-sc")


def test_aiokafka_consumes_and_commits_in_a_group_through_the_sidecar(sidecar, clients_messages):
    import asyncio

    from aiokafka import AIOKafkaConsumer, TopicPartition as ATP

    async def consume_and_commit():
        c = AIOKafkaConsumer("clients", bootstrap_servers=sidecar.bootstrap.split(","), group_id="aio-sc",
                             auto_offset_reset="earliest", enable_auto_commit=False, session_timeout_ms=6000,
                             heartbeat_interval_ms=500)
        await c.start()
        got = []
        try:
            while len(got) < 30:
                for records in (await c.getmany(timeout_ms=500)).values():
                    got.extend(r.key.decode() for r in records)
            await c.commit()
            return got, [await c.committed(ATP("clients", p)) for p in range(3)]
        finally:
            await c.stop()

    got, fetched = asyncio.run(asyncio.wait_for(consume_and_commit(), 90))
    assert fetched == [10, 10, 10]
    assert sorted(got) == sorted(clients_messages)
    assert_committed_everything(sidecar, "aio-sc")


def test_kafkajs_consumes_and_commits_in_a_group_through_the_sidecar(sidecar, clients_messages):
    out = node_script("group_consume_commit", sidecar.bootstrap, "js-sc", "clients", 30)
    assert sorted(m["key"] for m in out["messages"]) == sorted(clients_messages)
    assert out["fetched"] == [{"partition": p, "offset": 10} for p in range(3)]
    assert_committed_everything(sidecar, "js-sc")


@needs_kcat
def test_kcat_consumes_and_commits_in_a_group_through_the_sidecar(sidecar, clients_messages):
    out = subprocess.run(
        ["timeout", "-s", "INT", "90", kcat_path(), "-b", sidecar.bootstrap, "-G", "kcat-sc", "clients",
         "-X", "auto.offset.reset=earliest", "-X", "session.timeout.ms=6000", "-X", "heartbeat.interval.ms=500",
         "-c", "30", "-f", "%p|%o|%k\\n"],
        capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    keys = [line.split("|", 2)[2] for line in out.stdout.splitlines()]
    assert sorted(keys) == sorted(clients_messages), out.stderr
    # kcat commits when it closes (auto commit).
    assert_committed_everything(sidecar, "kcat-sc")


@needs_java
@pytest.mark.parametrize("strategy", ["range", "consumer"])
def test_the_java_client_consumes_and_commits_in_a_group_through_the_sidecar(mock, sidecar, clients_messages,
                                                                              java_classpath, tmp_path, strategy):
    group = f"java-sc-{strategy}"
    java = JavaClient(java_classpath, sidecar.bootstrap)
    member = java.member(tmp_path, "m", group, "clients", strategy=strategy)
    try:
        wait_for("30 records consumed and committed",
                 lambda: member.state().get("positions") == {f"clients:{p}": 10 for p in range(3)}, timeout=90)
        assert member.state()["consumed"] == 30, member.state()
        assert_committed_everything(sidecar, group)
        assert java.admin("describe-groups", groups=group)["groups"][group]["state"] == "Stable"
    finally:
        stop_all([member])
    assert member.state().get("closed"), member.log_text()
    assert not member.state()["errors"], member.state()
    assert group_requests(mock) == [], "the upstream saw group requests"


@pytest.fixture
def per_broker(mock, tmp_path):
    with per_broker_sidecars(mock, tmp_path) as nodes:
        yield nodes


def heartbeat_answers(conn, group, expected, timeout=30):
    """Heartbeats of a made-up member until the answer is `expected` or the
    deadline passes; returns the error codes answered."""
    answers = []
    deadline = time.time() + timeout
    while (not answers or answers[-1] != expected) and time.time() < deadline:
        if answers:
            time.sleep(0.2)
        answers.append(rawkafka.heartbeat(conn, group))
    return answers


def test_per_broker_sidecars_route_each_group_to_the_owner_of_its_shard(mock, per_broker, tmp_path):
    peers = {i: n.bootstrap for i, n in per_broker.items()}
    for i, n in per_broker.items():
        assert n.listeners == [peers[i]] and f"(node {i}," in n.serving_line(), n.serving_line()
    # Group names that Kafka's partitionFor and the static shard ownership give to each node.
    groups = {owner: group_owned_by(owner, peers, "pb") for owner in peers}
    assert all(owner_of(g, peers) == owner for owner, g in groups.items())
    mock.track_clear()

    for i, addr in peers.items():
        with rawkafka.Conn(addr) as c:
            for v in (1, 9, 12):
                md, _ = rawkafka.metadata(c, v)
                assert md["brokers"] == peers, (i, v, md["brokers"])
            for owner, group in groups.items():
                for v in (1, 2, 3):
                    fc, _ = rawkafka.find_coordinator(c, v, group)
                    assert (fc["error"], fc["node"], fc["addr"]) == (0, owner, peers[owner]), (i, v, group, fc)
                # A made-up member's heartbeat: the owner does not know it, the other nodes are not
                # the coordinator. (While loading, Kafka and kcoord answer heartbeats with NONE.)
                expected = rawkafka.UNKNOWN_MEMBER_ID if i == owner else rawkafka.NOT_COORDINATOR
                answers = heartbeat_answers(c, group, expected)
                assert answers[-1] == expected, f"node {i}, {group} owned by {owner}: heartbeat answers {answers}"

    # A confluent-kafka group through all three: its coordinator is the owner.
    bootstrap = ",".join(peers.values())
    active = groups[2]
    records = [tmp_path / f"pb{i}.rec" for i in range(2)]
    members = [rdk_worker(tmp_path, f"pb{i}", bootstrap, active, "pb", record=records[i], auto_commit=True) for i in range(2)]
    try:
        wait_balanced(members, [("pb", p) for p in range(6)], timeout=90)
        sent = produce(bootstrap, "pb", 120, "pb")
        wait_for("every message to be consumed", lambda: set(sent) <= {k for _, _, k in read_records(records)}, timeout=60)
        assert per_broker[2].rebalance_causes(active)[0] == "member_joined"
        # The other two groups only commit (Empty groups on nodes 1 and 3).
        for owner in (1, 3):
            commit(bootstrap, groups[owner], [TopicPartition("pb", 0, 7)])

        admin = AdminClient({"bootstrap.servers": bootstrap})
        listed = admin.list_consumer_groups(request_timeout=30).result()
        assert listed.errors == [], listed.errors
        ids = [g.group_id for g in listed.valid]
        assert sorted(g for g in ids if g in groups.values()) == sorted(groups.values()), ids
        states = {g.group_id: g.state for g in listed.valid}
        assert states[active] == ConsumerGroupState.STABLE
        assert states[groups[1]] == states[groups[3]] == ConsumerGroupState.EMPTY
        desc = admin.describe_consumer_groups([active], request_timeout=30)[active].result()
        assert desc.state == ConsumerGroupState.STABLE and len(desc.members) == 2
        assert (desc.coordinator.id, f"{desc.coordinator.host}:{desc.coordinator.port}") == (2, peers[2])
    finally:
        stop_all(members)
    assert group_requests(mock) == []


@needs_java
@pytest.mark.parametrize("strategy", ["cooperative-sticky", "consumer"])
def test_the_java_client_finds_its_groups_coordinator_among_per_broker_sidecars(mock, per_broker, java_classpath,
                                                                                 tmp_path, strategy):
    peers = {i: n.bootstrap for i, n in per_broker.items()}
    group = group_owned_by(1, peers, f"java-pb-{strategy}")
    # Bootstrapped from node 3 only: FindCoordinator sends it to node 1.
    java = JavaClient(java_classpath, peers[3])
    members = [java.member(tmp_path, f"m{i}", group, "pb", strategy=strategy) for i in range(2)]
    try:
        wait_balanced(members, [("pb", p) for p in range(6)], timeout=90)
        assert per_broker[1].rebalance_causes(group)[0] == "member_joined"
        described = java.admin("describe-groups", groups=group)["groups"][group]
        assert (described["state"], described["coordinator"], len(described["members"])) == ("Stable", 1, 2), described
        # The Admin client asks every node for its groups and merges them.
        listed = java.admin("list-groups")["groups"]
        assert listed.get(group, {}).get("state") == "Stable", listed
    finally:
        stop_all(members)
    assert all(not m.state()["errors"] for m in members), [m.state() for m in members]
    assert group_requests(mock) == []
