"""Transactional consume-transform-produce through a sidecar: the
transaction coordinator is the upstream's, kcoord admits TxnOffsetCommit
(member and generation of its own group) and delegates it, with the group's
offsets, to the upstream's group coordinator.

librdkafka's mock cluster answers TxnOffsetCommit after checking the
producer id and the coordinator, but does not store transactional offsets
(nor materialize them at EndTxn); so what the upstream received is asserted
through the mock's request tracking, and the offsets the group resumes from
are those the upstream stores: kcoord's handed-over offsets and the plain
commits forwarded after delegation."""

import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from conftest import wait_for
from groups import FAST_848
from java_client import JavaClient, needs_java
from sidecar_harness import OFFSET_COMMIT, MockCluster, Sidecar
from test_sidecar import (CONSUMER, commit, committed, group_requests, produce, retrying,  # noqa: F401
                          show_logs_on_failure)

TXN_OFFSET_COMMIT, ADD_OFFSETS_TO_TXN, END_TXN = 28, 25, 26
TOPICS = {"txin-classic": 3, "txin-consumer": 3, "txin-aio": 3, "txin-java-range": 3, "txin-java-consumer": 3,
          "txout": 3}


@pytest.fixture(scope="module")
def mock(tmp_path_factory):
    m = MockCluster(tmp_path_factory.mktemp("mocktxn"), brokers=3,
                    topics=[f"{t}:{p}:3" for t, p in TOPICS.items()]).start()
    yield m
    m.stop()


@pytest.fixture(scope="module")
def sidecar(mock, tmp_path_factory):
    s = Sidecar(tmp_path_factory.mktemp("sidecartxn") / "data", mock.bootstrap, settings=FAST_848).start()
    yield s
    code = s.stop()
    assert code == 0, f"sidecar exited with {code}; log:\n{s.log_tail()}"


def consumer(bootstrap, group, protocol):
    conf = {"bootstrap.servers": bootstrap, "group.id": group, **CONSUMER}
    if protocol == "consumer":
        conf = {k: v for k, v in conf.items() if k not in ("session.timeout.ms", "heartbeat.interval.ms")}
        conf["group.protocol"] = "consumer"
    return Consumer(conf)


def first_offsets(c, n, timeout=60):
    """The offset of the first record the consumer gets from each of its n partitions."""
    first = {}
    deadline = time.time() + timeout
    while len(first) < n and time.time() < deadline:
        for m in c.consume(num_messages=100, timeout=0.5):
            assert m.error() is None, m.error()
            first.setdefault(m.partition(), m.offset())
    return first


def wait_assigned(c, n, timeout=60):
    deadline = time.time() + timeout
    while len(c.assignment()) < n and time.time() < deadline:
        c.poll(0.2)
    assert len(c.assignment()) == n, c.assignment()


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_a_transactional_consume_transform_produce_app_commits_its_offsets_through_the_sidecar(mock, sidecar, protocol):
    topic, group, n = f"txin-{protocol}", f"txg-{protocol}", 3
    produce(mock.bootstrap, topic, 30, f"in-{protocol}", partitions=n)
    # Before any transaction: a plain commit, kept by kcoord.
    commit(sidecar.bootstrap, group, [TopicPartition(topic, q, 2) for q in range(n)])
    c = consumer(sidecar.bootstrap, group, protocol)
    c.subscribe([topic])
    p = Producer({"bootstrap.servers": sidecar.bootstrap, "transactional.id": f"tx-{protocol}", "linger.ms": 5})
    try:
        wait_assigned(c, n)
        # Nothing before kcoord's commit (the mock may leave an offset unused).
        assert all(o >= 2 for o in first_offsets(c, n).values())
        p.init_transactions(60)
        mock.track_clear()

        p.begin_transaction()
        for q in range(n):
            p.produce("txout", key=f"out-{q}", value="x", partition=q)
        # As if every input record had been transformed: the offsets after them.
        positions = [TopicPartition(topic, q, 10) for q in range(n)]
        p.send_offsets_to_transaction(positions, c.consumer_group_metadata(), 60)
        p.commit_transaction(60)

        seen = [key for _, _, key in sorted(mock.track_dump())]
        assert TXN_OFFSET_COMMIT in seen, "the transactional offsets reached the upstream's group coordinator"
        assert {ADD_OFFSETS_TO_TXN, END_TXN} <= set(seen), "the transaction is the upstream's"
        # kcoord's own offsets were handed over before the transactional commit.
        assert OFFSET_COMMIT in seen[:seen.index(TXN_OFFSET_COMMIT)], seen
        assert {q: o for q, (o, _) in committed(mock.bootstrap, group, topic, n).items()} == {q: 2 for q in range(n)}

        # From now on the group's offsets are the upstream's: a plain commit
        # through the sidecar is there at once (not after a write-through).
        retrying(lambda: c.commit(offsets=[TopicPartition(topic, q, 7) for q in range(n)], asynchronous=False))
        assert {q: o for q, (o, _) in committed(mock.bootstrap, group, topic, n).items()} == {q: 7 for q in range(n)}

        # An aborted transaction leaves the offsets as they were.
        p.begin_transaction()
        p.produce("txout", key="aborted", value="x", partition=0)
        p.send_offsets_to_transaction([TopicPartition(topic, q, 9) for q in range(n)], c.consumer_group_metadata(), 60)
        p.abort_transaction(60)
    finally:
        c.close()
        p.flush(10)
    assert {q: o for q, (o, _) in committed(sidecar.bootstrap, group, topic, n).items()} == {q: 7 for q in range(n)}

    # A new member of the group resumes where the upstream has it.
    c = consumer(sidecar.bootstrap, group, protocol)
    c.subscribe([topic])
    try:
        first = first_offsets(c, n)
        assert len(first) == n and all(7 <= o < 10 for o in first.values()), first
    finally:
        c.close()
    assert "handed the group's offsets over to the upstream" in sidecar.log()


@needs_java
@pytest.mark.parametrize("strategy", ["range", "consumer"])
def test_the_java_client_runs_a_transactional_consume_transform_produce_app_through_the_sidecar(
        mock, sidecar, java_classpath, strategy):
    topic, group = f"txin-java-{strategy}", f"txg-java-{strategy}"
    produce(mock.bootstrap, topic, 30, f"in-java-{strategy}", partitions=3)
    mock.track_clear()
    java = JavaClient(java_classpath, sidecar.bootstrap)
    # One transaction per polled batch, each with sendOffsetsToTransaction
    # and the consumer's group metadata (KIP-447: member id, generation).
    out = java.transform(group, topic, "txout", f"tx-java-{strategy}", 30, strategy=strategy)
    assert out["processed"] == 30, out
    seen = [key for _, _, key in sorted(mock.track_dump())]
    assert seen.count(TXN_OFFSET_COMMIT) >= out["transactions"], "every transaction's offsets reached the upstream"
    assert seen.count(END_TXN) >= out["transactions"], "the transactions are the upstream's"
    assert group_requests(mock) == [], "the group itself stayed with kcoord"


def test_aiokafka_commits_transactional_offsets_through_the_sidecar(mock, sidecar):
    """aiokafka sends TxnOffsetCommit v0, which names the group only (no
    member or generation): kcoord admits it in any state, as Kafka does, and
    delegates it like the others."""
    import asyncio

    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition as ATP

    topic, group, n = "txin-aio", "txg-aio", 3
    produce(mock.bootstrap, topic, 30, "in-aio", partitions=n)
    commit(sidecar.bootstrap, group, [TopicPartition(topic, q, 2) for q in range(n)])
    bootstrap = sidecar.bootstrap.split(",")

    async def transform():
        c = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False,
                             session_timeout_ms=6000, heartbeat_interval_ms=500, isolation_level="read_committed")
        p = AIOKafkaProducer(bootstrap_servers=bootstrap, transactional_id="tx-aio")
        await c.start()
        await p.start()
        try:
            first = {}
            while len(first) < n:
                for tp, records in (await c.getmany(timeout_ms=500)).items():
                    first.setdefault(tp.partition, records[0].offset)
            mock.track_clear()
            async with p.transaction():
                for q in range(n):
                    await p.send_and_wait("txout", b"x", key=f"out-{q}".encode(), partition=q)
                await p.send_offsets_to_transaction({ATP(topic, q): 10 for q in range(n)}, group)
            return first
        finally:
            await p.stop()
            await c.stop()

    first = asyncio.run(asyncio.wait_for(transform(), 120))
    assert all(o >= 2 for o in first.values()), first
    seen = [key for _, _, key in sorted(mock.track_dump())]
    assert TXN_OFFSET_COMMIT in seen, "the transactional offsets reached the upstream's group coordinator"
    assert OFFSET_COMMIT in seen[:seen.index(TXN_OFFSET_COMMIT)], seen
    assert {q: o for q, (o, _) in committed(mock.bootstrap, group, topic, n).items()} == {q: 2 for q in range(n)}
    # The group's offsets are the upstream's from now on.
    commit(sidecar.bootstrap, group, [TopicPartition(topic, q, 7) for q in range(n)])
    assert {q: o for q, (o, _) in committed(mock.bootstrap, group, topic, n).items()} == {q: 7 for q in range(n)}
    assert {q: o for q, (o, _) in committed(sidecar.bootstrap, group, topic, n).items()} == {q: 7 for q in range(n)}


def test_a_stale_generation_cannot_commit_transactional_offsets(mock, sidecar):
    """kcoord validates the member before anything goes upstream: a producer
    holding a previous generation's metadata is told so, as by Kafka."""
    topic, group, n = "txin-classic", "txg-stale", 3
    c1 = consumer(sidecar.bootstrap, group, "classic")
    c1.subscribe([topic])
    p = Producer({"bootstrap.servers": sidecar.bootstrap, "transactional.id": "tx-stale", "linger.ms": 5})
    c2 = None
    try:
        wait_assigned(c1, n)
        stale = c1.consumer_group_metadata()
        # A second member makes a new generation.
        c2 = consumer(sidecar.bootstrap, group, "classic")
        c2.subscribe([topic])
        wait_for("the rebalance", lambda: (c1.poll(0.1), c2.poll(0.1), len(c1.assignment()) + len(c2.assignment()) == n
                                           and c2.assignment())[-1], timeout=60)
        p.init_transactions(60)
        mock.track_clear()
        p.begin_transaction()
        with pytest.raises(Exception) as refused:
            p.send_offsets_to_transaction([TopicPartition(topic, 0, 1)], stale, 60)
        assert "generation" in str(refused.value).lower() or "ILLEGAL_GENERATION" in str(refused.value), refused.value
        p.abort_transaction(60)
    finally:
        c1.close()
        if c2:
            c2.close()
    assert TXN_OFFSET_COMMIT not in [key for _, _, key in mock.track_dump()], "refused here, never sent upstream"
