"""Committed offsets with every client: commit, fetch back, and resume from
them after the daemon restarts."""

import time

from confluent_kafka import Consumer, Producer, TopicPartition

from conftest import node_script, wait_for


def produce(k, topic, n=20):
    p = Producer({"bootstrap.servers": k.bootstrap})
    for i in range(n):
        p.produce(topic, key=str(i), value=f"v{i}", partition=0)
    assert p.flush(30) == 0


def test_confluent_kafka_resumes_from_its_commit_after_a_restart(make_kcoord):
    k = make_kcoord(topics=["resume:1"], settings=["storage.fsync=always"])
    produce(k, "resume")
    conf = {"bootstrap.servers": k.bootstrap, "group.id": "rdk-resume", "auto.offset.reset": "earliest",
            "enable.auto.commit": False, "session.timeout.ms": 6000}
    c = Consumer(conf)
    c.subscribe(["resume"])
    seen = 0
    while seen < 10:
        m = c.poll(1.0)
        if m is not None and not m.error():
            seen += 1
    c.commit(offsets=[TopicPartition("resume", 0, 10, metadata="after ten")], asynchronous=False)
    c.close()
    k.restart()
    c = Consumer(conf)
    c.subscribe(["resume"])
    first = wait_for("a message after the restart", lambda: (lambda m: m if m is not None and not m.error() else None)(c.poll(1.0)))
    assert first.offset() == 10
    committed = c.committed([TopicPartition("resume", 0)], timeout=30)[0]
    assert (committed.offset, committed.metadata) == (10, "after ten")
    c.close()


def test_kafka_python_commits_fetches_and_resumes(make_kcoord):
    from kafka import KafkaConsumer, TopicPartition as KTP
    from kafka.structs import OffsetAndMetadata

    k = make_kcoord(topics=["resume:1"], settings=["storage.fsync=always"])
    produce(k, "resume")
    kw = dict(bootstrap_servers=k.bootstrap, group_id="kp-resume", auto_offset_reset="earliest",
              enable_auto_commit=False, session_timeout_ms=6000, heartbeat_interval_ms=500)
    c = KafkaConsumer("resume", **kw)
    seen = 0
    deadline = time.time() + 60
    while seen < 10 and time.time() < deadline:
        for records in c.poll(timeout_ms=500, max_records=10 - seen).values():
            seen += len(records)
    tp = KTP("resume", 0)
    c.commit({tp: OffsetAndMetadata(10, "kp-meta", -1)})
    assert c.committed(tp) == 10
    assert c.committed(tp, metadata=True).metadata == "kp-meta"
    c.close()
    k.restart()
    c = KafkaConsumer("resume", **kw)
    first = None
    deadline = time.time() + 60
    while first is None and time.time() < deadline:
        for records in c.poll(timeout_ms=500, max_records=1).values():
            first = records[0]
    assert first is not None and first.offset == 10
    c.close()


def test_kafkajs_commits_fetches_and_resumes(make_kcoord):
    k = make_kcoord(topics=["resume:1"], settings=["storage.fsync=always"])
    produce(k, "resume")
    out = node_script("commit_resume", k.bootstrap, "js-resume", "resume", "commit")
    assert out["fetched"] == [{"partition": 0, "offset": 10}]
    k.restart()
    out = node_script("commit_resume", k.bootstrap, "js-resume", "resume", "resume")
    assert out["first"] == 10


def test_aiokafka_commits_fetches_and_resumes(make_kcoord):
    import asyncio

    from aiokafka import AIOKafkaConsumer, TopicPartition as ATP
    from aiokafka.structs import OffsetAndMetadata

    k = make_kcoord(topics=["resume:1"], settings=["storage.fsync=always"])
    produce(k, "resume")
    tp = ATP("resume", 0)

    def consumer():
        return AIOKafkaConsumer("resume", bootstrap_servers=k.bootstrap, group_id="aio-resume",
                                auto_offset_reset="earliest", enable_auto_commit=False, session_timeout_ms=6000,
                                heartbeat_interval_ms=500)

    async def consume_and_commit():
        c = consumer()
        await c.start()
        try:
            seen = []
            while len(seen) < 10:
                seen.extend((await c.getmany(timeout_ms=500, max_records=10 - len(seen))).get(tp, []))
            await c.commit({tp: OffsetAndMetadata(10, "aio-meta")})
            return await c.committed(tp)
        finally:
            await c.stop()

    async def first_after_restart():
        c = consumer()
        await c.start()
        try:
            while True:
                records = (await c.getmany(timeout_ms=500, max_records=1)).get(tp, [])
                if records:
                    return records[0].offset
        finally:
            await c.stop()

    assert asyncio.run(asyncio.wait_for(consume_and_commit(), 90)) == 10
    # Another client reads the commit's metadata back.
    c = Consumer({"bootstrap.servers": k.bootstrap, "group.id": "aio-resume"})
    committed = c.committed([TopicPartition("resume", 0)], timeout=30)[0]
    c.close()
    assert (committed.offset, committed.metadata) == (10, "aio-meta")
    k.restart()
    assert asyncio.run(asyncio.wait_for(first_after_restart(), 90)) == 10
