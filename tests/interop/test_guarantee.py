"""The consumer-group guarantee, end to end: a group of three confluent-kafka
consumers (separate processes) reads 100,000 messages, committing after
processing, while members are closed, SIGKILLed and restarted and the daemon
itself is SIGKILLed and restarted. At the end every message was processed at
least once, and every duplicate is explained by a crash:
- it is at or after the partition's last acknowledged commit (a reprocessing
  below an acknowledged commit would mean a lost commit), and
- a crash happened before it, and the message was first processed before the
  partition's first acknowledged commit after that crash (so the crash can
  have kept it from being committed). A graceful close explains nothing.

Each consumer process records what it did in its own file, one line per
event, written (flushed to the kernel) before the next step, so a SIGKILL
loses nothing already done:

    P <monotonic ns> <partition> <offset> <value>     processed
    C <monotonic ns> <partition> <next offset>        commit acknowledged
    E <monotonic ns> <message>                        commit failed

Run as a script (`python test_guarantee.py worker BOOTSTRAP TOPIC GROUP FILE`)
this module is that consumer process.
"""

import signal
import subprocess
import sys
import time
from collections import defaultdict

import pytest

TOPIC = "guarantee"
PARTITIONS = 6
N = 100_000
GROUP = "guarantee-group"
# Simulated work per batch, so that the run lasts long enough for the
# disruptions below to land while messages are still flowing.
BATCH = 200
WORK_S = 0.05


def worker(bootstrap, topic, group, path):
    from confluent_kafka import Consumer, KafkaException, TopicPartition

    stopping = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(True))
    out = open(path, "a", buffering=1)
    done = {}  # partition -> next offset processed but not yet committed

    def log(line):
        out.write(f"{line}\n")
        out.flush()

    def commit(consumer):
        if not done:
            return
        offsets = [TopicPartition(topic, p, o) for p, o in done.items()]
        try:
            consumer.commit(offsets=offsets, asynchronous=False)
        except KafkaException as e:
            log(f"E {time.monotonic_ns()} {e}")
            return
        now = time.monotonic_ns()
        for p, o in done.items():
            log(f"C {now} {p} {o}")
        done.clear()

    consumer = Consumer({
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
        "session.timeout.ms": 6000,
        "heartbeat.interval.ms": 1000,
        "max.poll.interval.ms": 30000,
    })
    def on_revoke(c, partitions):
        # Commit what was processed before partitions move (eager
        # rebalance); never commit revoked partitions later, even if this
        # commit failed: they may belong to another member by then.
        commit(c)
        for tp in partitions:
            done.pop(tp.partition, None)

    consumer.subscribe([topic], on_revoke=on_revoke)
    while not stopping:
        batch = consumer.consume(num_messages=BATCH, timeout=0.5)
        for m in batch:
            if m.error():
                log(f"E {time.monotonic_ns()} {m.error()}")
                continue
            log(f"P {time.monotonic_ns()} {m.partition()} {m.offset()} {m.value().decode()}")
            done[m.partition()] = m.offset() + 1
        if batch:
            # The batch's work happens between processing and committing, so
            # a SIGKILL usually leaves processed but uncommitted messages.
            time.sleep(WORK_S)
        commit(consumer)
    commit(consumer)
    consumer.close()


class Member:
    """One consumer process; each incarnation writes its own file."""

    def __init__(self, bootstrap, dirpath, name):
        self.bootstrap, self.dir, self.name, self.runs = bootstrap, dirpath, name, 0
        self.proc = None
        self.start()

    def start(self):
        self.runs += 1
        path = self.dir / f"{self.name}-{self.runs}.log"
        self.proc = subprocess.Popen([sys.executable, __file__, "worker", self.bootstrap, TOPIC, GROUP, str(path)],
                                     stderr=open(self.dir / f"{self.name}-{self.runs}.err", "w"))

    def close(self):
        self.proc.send_signal(signal.SIGTERM)
        assert self.proc.wait(60) == 0, f"{self.name} did not close cleanly"

    def kill(self):
        self.proc.kill()
        self.proc.wait(30)


def read_events(dirpath):
    processed, commits = [], defaultdict(list)
    for f in dirpath.glob("*.log"):
        for line in f.read_text().splitlines():
            parts = line.split(" ", 4)
            if parts[0] == "P" and len(parts) == 5:
                processed.append((int(parts[1]), int(parts[2]), int(parts[3]), parts[4]))
            elif parts[0] == "C" and len(parts) == 4:
                commits[int(parts[2])].append((int(parts[1]), int(parts[3])))
    processed.sort()
    for c in commits.values():
        c.sort()
    return processed, commits


def distinct_processed(dirpath):
    return len({(p, o) for _, p, o, _ in read_events(dirpath)[0]})


def wait_progress(dirpath, fraction, timeout=120):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if distinct_processed(dirpath) >= fraction * N:
            return
        time.sleep(0.2)
    raise AssertionError(f"no progress to {fraction:.0%}: {distinct_processed(dirpath)} of {N} processed")


def produce_all(bootstrap):
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 20})
    errors = []
    for i in range(N):
        p.produce(TOPIC, key=f"k{i}", value=f"v{i}", on_delivery=lambda e, m: e and errors.append(e))
        if i % 1000 == 0:
            p.poll(0)
    assert p.flush(120) == 0 and not errors, errors[:3]


def check(processed, commits, crashes):
    """The guarantee, checked on the recorded events; returns a summary."""
    # Nothing missing, nothing invented, one value per offset.
    values = {}
    for _, p, o, v in processed:
        assert values.setdefault((p, o), v) == v, f"{p}/{o} was read as two different values"
    assert sorted(values.values(), key=lambda v: int(v[1:])) == [f"v{i}" for i in range(N)], "missing or extra messages"
    for p in range(PARTITIONS):
        offsets = sorted(o for (q, o) in values if q == p)
        assert offsets == list(range(len(offsets))), f"partition {p} has gaps"
    # Every duplicate is explained by a crash (see the module docs).
    first_seen = {}
    duplicates = 0
    for t, p, o, _ in processed:
        if (p, o) not in first_seen:
            first_seen[(p, o)] = t
            continue
        duplicates += 1
        t0 = first_seen[(p, o)]
        acked = [off for (ta, off) in commits.get(p, []) if ta <= t]
        assert o >= max(acked, default=0), f"{p}/{o} processed again below the acknowledged commit {max(acked)}"

        def explains(crash):
            first_ack_after = min((ta for (ta, _) in commits.get(p, []) if ta > crash), default=float("inf"))
            return crash <= t and t0 <= first_ack_after

        assert any(explains(c) for c in crashes), f"{p}/{o} processed again without a crash to explain it"
    return duplicates


def test_the_checker_rejects_losses_and_unexplained_duplicates():
    global N, PARTITIONS
    saved = N, PARTITIONS
    N, PARTITIONS = 3, 1
    try:
        ok = [(1, 0, 0, "v0"), (2, 0, 1, "v1"), (5, 0, 1, "v1"), (6, 0, 2, "v2")]
        # A crash at 3, before the first acknowledged commit after it (at 7).
        assert check(ok, {0: [(1, 1), (7, 3)]}, crashes=[3]) == 1
        with pytest.raises(AssertionError, match="without a crash"):
            check(ok, {0: [(1, 1), (7, 3)]}, crashes=[])
        with pytest.raises(AssertionError, match="below the acknowledged commit"):
            check(ok, {0: [(1, 1), (4, 2)]}, crashes=[3])
        with pytest.raises(AssertionError, match="missing"):
            check(ok[:2], {}, crashes=[])
    finally:
        N, PARTITIONS = saved


@pytest.mark.timeout(170)
def test_a_consumer_group_loses_nothing_across_closes_kills_and_a_daemon_crash(make_kcoord, tmp_path):
    started = time.time()
    k = make_kcoord(topics=[f"{TOPIC}:{PARTITIONS}"])
    produce_all(k.bootstrap)
    events = tmp_path / "events"
    events.mkdir()
    members = [Member(k.bootstrap, events, f"m{i}") for i in range(3)]
    crashes = []
    try:
        wait_progress(events, 0.10)
        members[0].close()
        members[0].start()

        wait_progress(events, 0.30)
        crashes.append(time.monotonic_ns())
        members[1].kill()
        members[1].start()

        wait_progress(events, 0.50)
        crashes.append(time.monotonic_ns())
        k.kill()
        k.start()

        wait_progress(events, 0.70)
        crashes.append(time.monotonic_ns())
        members[2].kill()
        members[2].start()

        wait_progress(events, 1.0)
    finally:
        for m in members:
            if m.proc.poll() is None:
                m.close()
    processed, commits = read_events(events)
    duplicates = check(processed, commits, crashes)
    print(f"\nguarantee: {len(processed)} processings of {N} messages, {duplicates} duplicates, "
          f"{len(crashes)} crashes, {time.time() - started:.1f} s")


if __name__ == "__main__" and len(sys.argv) == 6 and sys.argv[1] == "worker":
    worker(*sys.argv[2:])
