"""Standalone mode end to end: real clients produce to kcoord and consume
their own messages back through consumer groups."""

import signal
import subprocess
import threading
import time

import pytest
from confluent_kafka import Consumer, Producer

from conftest import kcat_path, needs_kcat, node_script, wait_for

N_KCAT = 10_000


def expected_messages(prefix, n):
    return {(f"{prefix}-k{i}", f"{prefix}-v{i}") for i in range(n)}


class Kcat:
    """A `kcat -G` group member whose stdout/stderr are collected by threads."""

    def __init__(self, bootstrap, group, topic):
        args = ["timeout", "-s", "INT", "150", kcat_path(), "-b", bootstrap, "-G", group, topic,
                "-X", "auto.offset.reset=earliest", "-X", "session.timeout.ms=6000",
                "-X", "heartbeat.interval.ms=1000", "-u", "-f", "%p|%o|%k|%s\\n"]
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.out, self.err = [], []
        for stream, sink in ((self.proc.stdout, self.out), (self.proc.stderr, self.err)):
            threading.Thread(target=lambda s=stream, k=sink: [k.append(line) for line in s], daemon=True).start()

    def assigned(self):
        """Partitions of the latest `assigned:` rebalance line (None if none yet)."""
        lines = [l for l in list(self.err) if "rebalanced" in l and "assigned:" in l]
        if not lines:
            return None
        return {p.strip().rstrip("]").split("[")[-1] for p in lines[-1].split("assigned:")[1].split(",")}

    def stop(self):
        self.proc.send_signal(signal.SIGINT)
        self.proc.wait(60)


@needs_kcat
def test_kcat_produces_and_a_two_member_kcat_group_consumes_exactly_those_messages(make_kcoord):
    k = make_kcoord(topics=["kc:6"])
    members = [Kcat(k.bootstrap, "kcat-group", "kc") for _ in range(2)]
    try:
        # Both members own half of the partitions before anything is produced,
        # so the assignment no longer changes and nothing is consumed twice.
        def balanced():
            a, b = members[0].assigned(), members[1].assigned()
            return a and b and len(a) == 3 and len(b) == 3 and not (a & b)

        wait_for("both kcat members to get 3 partitions each", balanced, timeout=90)
        lines = "".join(f"kc-k{i}:kc-v{i}\n" for i in range(N_KCAT))
        produced = subprocess.run([kcat_path(), "-b", k.bootstrap, "-P", "-t", "kc", "-K:"], input=lines,
                                  capture_output=True, text=True, timeout=120)
        assert produced.returncode == 0, produced.stderr
        wait_for("every message to be consumed", lambda: sum(len(m.out) for m in members) >= N_KCAT, timeout=90)
    finally:
        for m in members:
            m.stop()
    records = [line.rstrip("\n").split("|", 3) for m in members for line in m.out]
    assert len(records) == N_KCAT, "no message consumed twice"
    assert {(key, value) for _, _, key, value in records} == expected_messages("kc", N_KCAT)
    assert len({(p, o) for p, o, _, _ in records}) == N_KCAT
    assert {p for p, _, _, _ in records} == {str(i) for i in range(6)}, "keys spread over every partition"
    for m in members:
        assert any("rebalanced" in line for line in m.err), "".join(m.err)


def consume_all(bootstrap, group, topic, n, timeout=90):
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                  "session.timeout.ms": 6000, "heartbeat.interval.ms": 1000})
    c.subscribe([topic])
    got = []
    deadline = time.time() + timeout
    try:
        while len(got) < n and time.time() < deadline:
            for m in c.consume(num_messages=1000, timeout=1.0):
                assert m.error() is None, m.error()
                got.append((m.key().decode(), m.value().decode()))
    finally:
        c.close()
    return got


@pytest.mark.parametrize("settings", [
    {},
    {"enable.idempotence": True},
    {"compression.type": "lz4"},
    {"compression.type": "zstd", "enable.idempotence": True},
    {"compression.type": "gzip"},
    {"compression.type": "snappy"},
], ids=["plain", "idempotent", "lz4", "zstd-idempotent", "gzip", "snappy"])
def test_confluent_kafka_produces_and_consumes_its_own_messages(make_kcoord, settings):
    k = make_kcoord(topics=["ck:3"])
    n = 3000
    errors = []
    p = Producer({"bootstrap.servers": k.bootstrap, "linger.ms": 5, **settings})
    for i in range(n):
        p.produce("ck", key=f"ck-k{i}", value=f"ck-v{i}", on_delivery=lambda e, m: e and errors.append(e))
        p.poll(0)
    assert p.flush(60) == 0
    assert errors == []
    got = consume_all(k.bootstrap, "ck-group", "ck", n)
    assert len(got) == n
    assert set(got) == expected_messages("ck", n)


def test_kafka_python_idempotent_producer_and_consumer(make_kcoord):
    from kafka import KafkaConsumer, KafkaProducer

    k = make_kcoord(topics=["kp:3"])
    n = 2000
    producer = KafkaProducer(bootstrap_servers=k.bootstrap, linger_ms=5, compression_type="gzip")
    assert producer.config["enable_idempotence"], "kafka-python >= 3 is idempotent by default"
    futures = [producer.send("kp", key=f"kp-k{i}".encode(), value=f"kp-v{i}".encode()) for i in range(n)]
    producer.flush(60)
    offsets = [f.get(timeout=60) for f in futures]
    producer.close()
    assert len({(m.partition, m.offset) for m in offsets}) == n
    consumer = KafkaConsumer("kp", bootstrap_servers=k.bootstrap, group_id="kp-group", auto_offset_reset="earliest",
                             session_timeout_ms=6000, heartbeat_interval_ms=1000)
    got = []
    deadline = time.time() + 90
    try:
        while len(got) < n and time.time() < deadline:
            for records in consumer.poll(timeout_ms=1000).values():
                got.extend((r.key.decode(), r.value.decode()) for r in records)
    finally:
        consumer.close()
    assert len(got) == n
    assert set(got) == expected_messages("kp", n)


def test_aiokafka_idempotent_producer_and_consumer(make_kcoord):
    import asyncio

    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

    k = make_kcoord(topics=["aio:3"])
    n = 2000

    async def produce_then_consume():
        producer = AIOKafkaProducer(bootstrap_servers=k.bootstrap, linger_ms=5, compression_type="gzip",
                                    enable_idempotence=True)
        await producer.start()
        try:
            sent = [await producer.send("aio", key=f"aio-k{i}".encode(), value=f"aio-v{i}".encode())
                    for i in range(n)]
            metadata = await asyncio.gather(*sent)
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer("aio", bootstrap_servers=k.bootstrap, group_id="aio-group",
                                    auto_offset_reset="earliest", session_timeout_ms=6000, heartbeat_interval_ms=1000)
        await consumer.start()
        got = []
        try:
            while len(got) < n:
                for records in (await consumer.getmany(timeout_ms=1000)).values():
                    got.extend((r.key.decode(), r.value.decode()) for r in records)
        finally:
            await consumer.stop()
        return metadata, got

    metadata, got = asyncio.run(asyncio.wait_for(produce_then_consume(), 120))
    assert len({(m.partition, m.offset) for m in metadata}) == n
    assert len(got) == n
    assert set(got) == expected_messages("aio", n)


@pytest.mark.parametrize("idempotent", [False, True], ids=["plain", "idempotent"])
def test_kafkajs_produces_and_consumes_its_own_messages(make_kcoord, idempotent):
    k = make_kcoord(topics=["kj:3"])
    n = 1000
    out = node_script("produce_consume", k.bootstrap, "kj", n, "kj-group", "1" if idempotent else "0", timeout=150)
    got = [(m["key"], m["value"]) for m in out["messages"]]
    assert len(got) == n
    assert set(got) == expected_messages("kj", n)
    assert len({(m["partition"], m["offset"]) for m in out["messages"]}) == n
