"""Harness for sidecar-mode tests: an upstream Kafka cluster (librdkafka's
mock cluster, run by mockctl.py in its own process) and `kcoord sidecar`
processes in front of it."""

import os
import queue
import random
import socket
import subprocess
import sys
import threading
from contextlib import contextmanager
from pathlib import Path

import rawkafka
from conftest import KCOORD_BIN, Kcoord

INTEROP = Path(__file__).resolve().parent
MOCKCTL = INTEROP / "mockctl.py"

# Write-through every 200 ms instead of every second.
SIDECAR_FAST = ["sidecar.write_through_interval_ms=200"]

# Group APIs the upstream must never see from a sidecar (its own coordinator answers them).
JOIN_GROUP, HEARTBEAT, LEAVE_GROUP, SYNC_GROUP = 11, 12, 13, 14
PRODUCE, FETCH, OFFSET_COMMIT, OFFSET_FETCH = 0, 1, 8, 9


class MockCluster:
    """A librdkafka mock cluster with brokers 1..N, driven through mockctl's
    stdin line protocol; every command answers one "OK ..." line."""

    def __init__(self, workdir, brokers=3, topics=()):
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.brokers = brokers
        self.topics = list(topics)
        self.proc = None
        self.bootstrap = None
        self.addresses = {}  # broker id -> "host:port"
        self.log_path = self.workdir / "mock.log"
        self._lines = queue.Queue()
        self._lock = threading.Lock()

    def start(self, timeout=30):
        argv = [sys.executable, str(MOCKCTL), "--brokers", str(self.brokers)]
        for t in self.topics:
            argv += ["--topic", t]
        log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, text=True, bufsize=1)

        def pump():
            for line in self.proc.stdout:
                self._lines.put(line.rstrip("\n"))
            self._lines.put(None)

        threading.Thread(target=pump, daemon=True).start()
        first = self._next(timeout)
        if not first.startswith("BOOTSTRAP "):
            raise RuntimeError(f"mockctl did not start: {first!r}; log:\n{self.log()}")
        self.bootstrap = first.split()[1]
        # The broker ids behind the bootstrap addresses, from the mock's own Metadata.
        with rawkafka.Conn(self.bootstrap.split(",")[0]) as c:
            md, _ = rawkafka.metadata(c, 1)
        self.addresses = md["brokers"]
        assert sorted(self.addresses) == list(range(1, self.brokers + 1)), self.addresses
        assert set(self.addresses.values()) == set(self.bootstrap.split(",")), (self.addresses, self.bootstrap)
        self.cmd("rebalance_delay", 0)
        self.cmd("track", "on")
        return self

    @property
    def ports(self):
        return {int(a.rsplit(":", 1)[1]) for a in self.addresses.values()}

    def log(self):
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def _next(self, timeout):
        try:
            line = self._lines.get(timeout=timeout)
        except queue.Empty:
            raise RuntimeError("mockctl did not answer in time") from None
        if line is None:
            raise RuntimeError(f"mockctl exited ({self.proc.poll()}); log:\n{self.log()}")
        return line

    def _send(self, words):
        self.proc.stdin.write(" ".join(map(str, words)) + "\n")
        self.proc.stdin.flush()

    def cmd(self, *words, timeout=30):
        """Runs one command; returns its "OK ..." line, raises on "ERR ..."."""
        with self._lock:
            self._send(words)
            line = self._next(timeout)
        if not line.startswith("OK"):
            raise RuntimeError(f"mock command {' '.join(map(str, words))!r}: {line}")
        return line

    def create_topic(self, name, partitions, rf=3):
        return self.cmd("topic", name, partitions, rf)

    def set_leader(self, topic, partition, broker):
        return self.cmd("leader", topic, partition, broker)

    def track_clear(self):
        self.cmd("track", "clear")

    def track_dump(self, timeout=60):
        """Every request the mock's brokers received since tracking started
        (or the last clear), as (timestamp µs, broker id, api key)."""
        out = []
        with self._lock:
            self._send(["track", "dump"])
            while True:
                line = self._next(timeout)
                if line.startswith("REQ "):
                    _, ts, broker, key = line.split()
                    out.append((int(ts), int(broker), int(key)))
                    continue
                if not line.startswith("OK"):
                    raise RuntimeError(f"track dump: {line}")
                assert int(line.split()[1]) == len(out), line
                return out

    def stop(self, timeout=30):
        if self.proc is None or self.proc.poll() is not None:
            return
        try:
            self._send(["quit"])
            self.proc.wait(timeout)
        except (OSError, subprocess.TimeoutExpired):
            self.proc.kill()
            self.proc.wait()


# Every sidecar started, so that a failing test can show what they logged.
STARTED = []


class Sidecar(Kcoord):
    """One `kcoord sidecar` process (with conftest.FAST settings, plus SIDECAR_FAST). Without peers it fronts the whole
    upstream with one listener per upstream broker (bootstrap lists them all);
    with peers it fronts broker `node_id` only. Restarts keep the ports when
    the base port is fixed (non-zero)."""

    def __init__(self, data_dir, upstream, settings=(), port=0, node_id=None, peers=None, extra_args=()):
        super().__init__(data_dir, settings=list(SIDECAR_FAST) + list(settings), port=port, extra_args=extra_args)
        self.upstream = upstream
        self.node_id = node_id
        self.peers = peers  # {node id: "host:port"}
        self.base_port = port
        self.listeners = []

    def args(self):
        a = [KCOORD_BIN, "sidecar", "--upstream", self.upstream, "--listen", f"127.0.0.1:{self.base_port}",
             "--data-dir", str(self.data_dir), "--metrics-listen", "127.0.0.1:0",
             "--log-level", os.environ.get("KCOORD_LOG", "info")]
        if self.node_id is not None:
            a += ["--node-id", str(self.node_id)]
        if self.peers:
            a += ["--peers", ",".join(f"{i}={addr}" for i, addr in sorted(self.peers.items()))]
        for s in self.settings:
            a += ["--set", s]
        return a + self.extra_args

    def start(self, timeout=60):
        # Only this run's "serving on" line counts (the metrics port changes).
        self._lines = []
        super().start(timeout=timeout)
        self.listeners = self.bootstrap.split(",")
        self.port = self.base_port
        STARTED.append(self)
        return self

    @property
    def host(self):
        return self.listeners[0].rsplit(":", 1)[0]

    def serving_line(self):
        return next(l for l in self._lines if "serving on" in l).strip()

    def log_tail(self, n=80):
        return "\n".join(self.log().splitlines()[-n:])


def port_is_free(port):
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", port))
        return True
    except OSError:
        return False
    finally:
        s.close()


def free_ports(n, consecutive=False):
    """n ports that are free now, below the ephemeral range so that other
    processes' outgoing connections do not take them in the meantime."""
    rng = random.Random()
    for _ in range(1000):
        if consecutive:
            base = rng.randrange(20000, 32000 - n)
            ports = list(range(base, base + n))
        else:
            ports = rng.sample(range(20000, 32000), n)
        if all(port_is_free(p) for p in ports):
            return ports
    raise RuntimeError("no free ports")


def java_string_hash(s):
    """Java's String.hashCode over UTF-16 code units."""
    data = s.encode("utf-16-be")
    h = 0
    for i in range(0, len(data), 2):
        h = (31 * h + int.from_bytes(data[i:i + 2], "big")) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def partition_for(group, partitions=50):
    """Kafka's partitionFor(group): Utils.abs(hashCode) % partitions."""
    h = java_string_hash(group)
    return (0 if h == -(1 << 31) else abs(h)) % partitions


def owner_of(group, peer_ids, partitions=50):
    """The per-broker sidecar owning a group: sorted_peer_ids[shard % len]."""
    ids = sorted(peer_ids)
    return ids[partition_for(group, partitions) % len(ids)]


def group_owned_by(node, peer_ids, prefix):
    """A group name (prefix-N) that the ownership rule gives to `node`."""
    for i in range(10_000):
        g = f"{prefix}-{i}"
        if owner_of(g, peer_ids) == node:
            return g
    raise AssertionError(f"no group for node {node}")


def rdk_worker(tmp_path, name, bootstrap, group, topic, record=None, auto_commit=False, session_ms=6000, strategy="range"):
    """A confluent-kafka member process (workers/rdk_member.py) that can
    record what it consumes (one "partition offset key" line per message)
    and auto-commit."""
    from groups import WORKERS, Member

    argv = [sys.executable, str(WORKERS / "rdk_member.py"), "--bootstrap", bootstrap, "--group", group,
            "--topic", topic, "--strategy", strategy, "--session-ms", str(session_ms)]
    if record:
        argv += ["--record", str(record)]
    if auto_commit:
        argv += ["--auto-commit"]
    return Member(tmp_path, name, argv)


def read_records(paths):
    """(partition, offset, key) lines recorded by rdk workers."""
    out = []
    for p in paths:
        try:
            text = Path(p).read_text()
        except OSError:
            continue
        for line in text.splitlines():
            parts = line.split(" ", 2)
            if len(parts) == 3:
                out.append((int(parts[0]), int(parts[1]), parts[2]))
    return out


class Stats:
    """Keeps librdkafka's latest statistics (stats_cb) for a client: which
    brokers it knows, by address."""

    def __init__(self):
        self.latest = None
        self.count = 0

    def __call__(self, js):
        import json

        self.latest = json.loads(js)
        self.count += 1

    def broker_addresses(self):
        """host:port of every broker the client knows, bootstrap ones included."""
        if not self.latest:
            return set()
        return {b["nodename"] for b in self.latest["brokers"].values() if b.get("nodename")}



@contextmanager
def per_broker_sidecars(mock, workdir, settings=()):
    """Three sidecars, one per mock broker, each listing all three as peers
    (yields {node id: Sidecar}); all must exit cleanly."""
    ports = free_ports(3)
    peers = {i: f"127.0.0.1:{ports[i - 1]}" for i in (1, 2, 3)}
    nodes = {}
    try:
        for i in (1, 2, 3):
            # The broker it fronts first, then the rest of the cluster to bootstrap from.
            upstream = ",".join([mock.addresses[i]] + [mock.addresses[j] for j in (1, 2, 3) if j != i])
            nodes[i] = Sidecar(workdir / f"node{i}", upstream, settings=settings, node_id=i, peers=peers,
                               port=ports[i - 1]).start()
        yield nodes
    finally:
        codes = {i: n.stop() for i, n in nodes.items()}
    assert all(code == 0 for code in codes.values()), codes
