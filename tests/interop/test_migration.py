"""Online migration with a real client (confluent-kafka / librdkafka): a live
classic group is rolled over to group.protocol=consumer one member at a
time while a producer keeps writing, then rolled back. Every member keeps a
timestamped processing log (assignments, revocations, each record); the test
checks that no produced record was lost and that no partition was ever
processed by two members at once."""

import threading
import time
from collections import defaultdict

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient

from conftest import wait_for
from groups import FAST_848, rdk_member, stop_all, wait_balanced

SIX = [("t6", p) for p in range(6)]


class Producing:
    """Produces keyed records to t6 until stopped; remembers what was acked."""

    def __init__(self, bootstrap):
        self.p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
        self.acked = set()
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self):
        i = 0

        def done(err, msg):
            if err is None:
                self.acked.add(msg.key().decode())

        while not self.stopped.is_set():
            self.p.produce("t6", str(i).encode(), key=str(i).encode(), partition=i % 6, on_delivery=done)
            self.p.poll(0)
            i += 1
            time.sleep(0.004)
        self.p.flush(30)

    def stop(self):
        self.stopped.set()
        self.thread.join(60)


def read_events(path):
    """(time, kind, partition, offset, key) per line of a member's log."""
    out = []
    try:
        text = path.read_text()
    except OSError:
        return out
    for line in text.splitlines():
        f = line.split()
        if len(f) < 2:
            continue
        t, kind = float(f[0]), f[1]
        part = int(f[2]) if len(f) > 2 else None
        off = int(f[3]) if len(f) > 3 else None
        key = f[4] if len(f) > 4 else None
        out.append((t, kind, part, off, key))
    return out


def ownership_intervals(name, events, end):
    """Per partition, the [assign, revoke) intervals of one member."""
    open_at, intervals = {}, defaultdict(list)
    for t, kind, part, _, _ in events:
        if kind == "assign":
            open_at.setdefault(part, t)
        elif kind == "revoke" and part in open_at:
            intervals[part].append((open_at.pop(part), t, name))
        elif kind == "closed":
            for p, start in open_at.items():
                intervals[p].append((start, t, name))
            open_at.clear()
    for p, start in open_at.items():
        intervals[p].append((start, end, name))
    return intervals


def check_processing_log(logs, produced):
    """No record lost; no partition owned (hence processed) by two members
    at once; every record processed inside its member's ownership."""
    end = time.time()
    consumed = set()
    per_partition = defaultdict(list)
    for name, path in logs.items():
        events = read_events(path)
        spans = ownership_intervals(name, events, end)
        for p, iv in spans.items():
            per_partition[p].extend(iv)
        for t, kind, part, _, key in events:
            if kind == "msg":
                consumed.add(key)
                assert any(s <= t <= e for s, e, _ in spans.get(part, [])), (
                    f"{name} processed t6-{part} at {t} outside its ownership {spans.get(part)}")
    lost = produced - consumed
    assert not lost, f"{len(lost)} acknowledged records never consumed, e.g. {sorted(lost, key=int)[:10]}"
    for p, iv in per_partition.items():
        iv.sort()
        for (s1, e1, m1), (s2, e2, m2) in zip(iv, iv[1:]):
            assert m1 == m2 or e1 <= s2, f"t6-{p} owned by {m1} until {e1} and by {m2} from {s2}"


@pytest.fixture
def k(make_kcoord):
    return make_kcoord(topics=["t6:6"], settings=FAST_848)


def group_type(k, group):
    admin = AdminClient({"bootstrap.servers": k.bootstrap})
    return admin.describe_consumer_groups([group])[group].result(30).type


def test_a_live_classic_group_rolls_over_to_the_consumer_protocol_and_back_without_loss_or_overlap(k, tmp_path):
    from confluent_kafka import ConsumerGroupType

    logs = {}
    members = {}

    def start(name, strategy):
        logs[name] = tmp_path / f"{name}.events"
        members[name] = rdk_member(tmp_path, name, k, "roll", "t6", strategy,
                                   extra=["--events", str(logs[name]), "--auto-commit"])
        return members[name]

    t0 = time.time()

    def mark(what):
        print(f"{time.time() - t0:6.1f}s {what}", flush=True)

    def processed(m):
        return sum(1 for e in read_events(logs[m.name]) if e[1] == "msg")

    def settle(step):
        """Balanced, and every member processing records again."""
        wait_balanced(live, SIX, even=True)
        before = {m.name: processed(m) for m in live}
        wait_for(f"every member to process records after {step}",
                 lambda: all(processed(m) >= before[m.name] + 20 for m in live))
        mark(step)

    producing = Producing(k.bootstrap)
    live = []
    try:
        live = [start(f"classic{i}", "range") for i in range(3)]
        settle("classic group formed")
        assert group_type(k, "roll") == ConsumerGroupType.CLASSIC

        # Upgrade: one member at a time, classic out, consumer protocol in.
        for i in range(3):
            old = members[f"classic{i}"]
            old.close()
            live.remove(old)
            live.append(start(f"consumer{i}", "consumer"))
            settle(f"upgrade step {i}")
            if i == 0:
                assert group_type(k, "roll") == ConsumerGroupType.CONSUMER, "upgraded by its first consumer member"

        # Downgrade: back to classic members, one at a time.
        for i in range(3):
            live.append(start(f"back{i}", "range"))
            old = members[f"consumer{i}"]
            old.close()
            live.remove(old)
            settle(f"downgrade step {i}")
        wait_for("the group to be classic again", lambda: group_type(k, "roll") == ConsumerGroupType.CLASSIC)
        assert "downgraded the consumer group to a classic group" in k.log()

        producing.stop()
        produced = set(producing.acked)
        assert len(produced) > 500, len(produced)
        keys = lambda: {e[4] for path in logs.values() for e in read_events(path) if e[1] == "msg"}
        wait_for("every acknowledged record to be consumed", lambda: produced <= keys(), timeout=60)
        mark("all consumed")
        for m in members.values():
            assert not m.state().get("fatal"), (m.name, m.state())
    finally:
        producing.stop()
        stop_all(list(members.values()))
    check_processing_log(logs, produced)
