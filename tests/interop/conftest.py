"""Interop harness: runs the kcoord release binary on a free 127.0.0.1 port
with a temporary data dir, for tests that drive real Kafka clients."""

import json
import os
import re
import shutil
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
INTEROP = Path(__file__).resolve().parent
KCOORD_BIN = os.environ.get("KCOORD_BIN") or str(ROOT / "target" / "release" / "kcoord")

# Fast protocol timers for tests on two shared cores.
FAST = [
    "group.initial_rebalance_delay_ms=0",
    "group.min_session_timeout_ms=1000",
]


class Kcoord:
    """One kcoord process; can be stopped, killed and restarted on the same data dir."""

    def __init__(self, data_dir, settings=(), topics=(), port=0, extra_args=()):
        self.data_dir = Path(data_dir)
        self.settings = list(FAST) + list(settings)
        self.topics = list(topics)
        self.extra_args = list(extra_args)
        self.port = port
        self.proc = None
        self.bootstrap = None
        self.log_path = self.data_dir.parent / f"{self.data_dir.name}.log"
        self._lines = []

    def args(self):
        a = [KCOORD_BIN, "--listen", f"127.0.0.1:{self.port}", "--data-dir", str(self.data_dir),
             "--log-level", os.environ.get("KCOORD_LOG", "info")]
        for s in self.settings:
            a += ["--set", s]
        for t in self.topics:
            a += ["--topic", t]
        return a + self.extra_args

    def start(self, timeout=30):
        log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(self.args(), stdout=subprocess.PIPE, stderr=log, text=True)
        ready = threading.Event()

        def pump():
            for line in self.proc.stdout:
                self._lines.append(line)
                if "serving on" in line:
                    ready.set()

        threading.Thread(target=pump, daemon=True).start()
        if not ready.wait(timeout):
            self.proc.kill()
            raise RuntimeError(f"kcoord did not start; log:\n{self.log()}")
        line = next(l for l in self._lines if "serving on" in l)
        self.bootstrap = line.split("serving on ")[1].split()[0]
        self.metrics = line.split("metrics http://")[1].split("/")[0] if "metrics http://" in line else None
        # Restarts reuse the port clients already know.
        self.port = int(self.bootstrap.rsplit(":", 1)[1])
        return self

    def log(self):
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def stop(self, sig=signal.SIGTERM, timeout=30):
        """Stops the process; returns its exit code."""
        if self.proc is None or self.proc.poll() is not None:
            return self.proc.returncode if self.proc else None
        self.proc.send_signal(sig)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise RuntimeError("kcoord did not stop in time")

    def kill(self):
        return self.stop(signal.SIGKILL)

    def restart(self, **kw):
        self.stop()
        return self.start(**kw)

    @property
    def host(self):
        return self.bootstrap.rsplit(":", 1)[0]

    def http_json(self, path):
        """GET a JSON document from the metrics/HTTP listener."""
        import urllib.request
        with urllib.request.urlopen(f"http://{self.metrics}{path}", timeout=30) as r:
            return json.loads(r.read())

    def request_versions(self, api):
        """The versions of `api` (e.g. "OffsetCommit") the daemon has received, with their counts."""
        import urllib.request
        with urllib.request.urlopen(f"http://{self.metrics}/metrics", timeout=30) as r:
            text = r.read().decode()
        seen = {}
        for m in re.finditer(r'^kcoord_requests_total\{api="([^"]+)",version="(\d+)"\} (\d+)', text, re.M):
            if m.group(1) == api and int(m.group(3)) > 0:
                seen[int(m.group(2))] = int(m.group(3))
        return seen

    def rebalance_causes(self, group):
        """The causes of the group's remembered rebalances, oldest first."""
        return [r["cause"]["kind"] for r in self.http_json(f"/v1/groups/{group}")["rebalances"]]

    def wait_rebalance_after(self, group, seen, timeout=60):
        """Waits for a rebalance after the first `seen` ones; returns its cause.

        The cause of the first rebalance after an event is the event's, even
        if clients rebalance again afterwards (e.g. a leader rejoining)."""
        causes = wait_for(f"a rebalance of {group} after {seen}", lambda: self.rebalance_causes(group)[seen:], timeout=timeout)
        return causes[0]


class KcoordFactory:
    """Starts daemons in a directory and stops them all at the end, failing
    if one exited with an error."""

    def __init__(self):
        self.started = []

    def start(self, directory, settings=(), topics=(), extra_args=()):
        k = Kcoord(directory / f"data{len(self.started)}", settings, topics, extra_args=extra_args).start()
        self.started.append(k)
        return k

    def stop_all(self):
        for k in self.started:
            code = k.stop()
            assert code in (0, -signal.SIGKILL, None), f"kcoord exited with {code}; log:\n{k.log()}"


@pytest.fixture
def make_kcoord(tmp_path):
    """Factory: make_kcoord(settings=[...], topics=["t:6"]) -> started Kcoord."""
    factory = KcoordFactory()
    yield lambda settings=(), topics=(), extra_args=(): factory.start(tmp_path, settings, topics, extra_args)
    factory.stop_all()


@pytest.fixture(scope="module")
def make_kcoord_module():
    """Factory for daemons shared by a module's tests:
    make_kcoord_module(directory, settings=[...], topics=[...]) -> started Kcoord."""
    factory = KcoordFactory()
    yield factory.start
    factory.stop_all()


@pytest.fixture
def kcoord(make_kcoord):
    return make_kcoord(topics=["t1:4", "orders:6"])


@pytest.fixture(scope="session")
def java_classpath(tmp_path_factory):
    """The Java client driver, compiled once a run (java_client.py)."""
    from java_client import compile_client
    return compile_client(tmp_path_factory.mktemp("java-classes"))


def kcat_path():
    return shutil.which("kcat")


needs_kcat = pytest.mark.skipif(kcat_path() is None, reason="kcat is not installed (scripts/test installs it when run as root)")


def node_script(name, *args, timeout=120):
    """Runs tests/interop/js/<name>.js with args; returns its JSON output."""
    out = subprocess.run(["node", str(INTEROP / "js" / f"{name}.js"), *map(str, args)],
                         capture_output=True, text=True, timeout=timeout, cwd=INTEROP)
    if out.returncode != 0:
        raise AssertionError(f"node {name} failed ({out.returncode}):\n{out.stdout}\n{out.stderr}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def wait_for(what, fn, timeout=60, interval=0.1):
    """Polls fn() until it returns a truthy value."""
    deadline = time.time() + timeout
    last = None
    while time.time() < deadline:
        last = fn()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError(f"timed out waiting for {what}; last value: {last!r}")
