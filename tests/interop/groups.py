"""Helpers for group interop tests: member processes that report their
assignments through state files."""

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

from conftest import wait_for

WORKERS = Path(__file__).resolve().parent / "workers"


class Member:
    """A consumer group member running in its own process."""

    def __init__(self, tmp_path, name, argv, state_argv=lambda path: ["--state-file", str(path)], cwd=None):
        """Starts `argv` plus `state_argv(path of the state file)`."""
        self.name = name
        self.state_file = tmp_path / f"{name}.json"
        self.log_path = tmp_path / f"{name}.log"
        self.log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(argv + state_argv(self.state_file), stdout=self.log, stderr=subprocess.STDOUT,
                                     cwd=cwd)

    def state(self):
        try:
            return json.loads(self.state_file.read_text())
        except (OSError, ValueError):
            return {}

    def log_text(self):
        self.log.flush()
        return self.log_path.read_text(errors="replace")

    def assigned(self):
        return {tuple(p) for p in self.state().get("assigned", [])}

    def close(self, timeout=30):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(timeout)

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def alive(self):
        return self.proc.poll() is None


def rdk_member(tmp_path, name, kcoord, group, topic, strategy="range", instance_id=None, session_ms=6000,
               extra=()):
    argv = [sys.executable, str(WORKERS / "rdk_member.py"), "--bootstrap", kcoord.bootstrap, "--group", group,
            "--topic", topic, "--strategy", strategy, "--session-ms", str(session_ms)] + list(extra)
    if instance_id:
        argv += ["--instance-id", instance_id]
    return Member(tmp_path, name, argv)


def balanced(members, partitions, even=False):
    """The members' assignments are disjoint and cover every partition;
    with `even`, their sizes also differ by at most one."""
    sets = [m.assigned() for m in members]
    union = set().union(*sets) if sets else set()
    covered = sum(len(s) for s in sets) == len(union) and union == set(partitions) and all(sets)
    return covered and (not even or max(map(len, sets)) - min(map(len, sets)) <= 1)


def wait_balanced(members, partitions, timeout=60, even=False):
    """Waits until `balanced`. KIP-848 reconciliation passes through states
    that cover every partition before the target is reached (a member still
    owns what it must give up; its new owner waits for it), so a test that
    looks at the final sizes waits for `even` ones."""
    return wait_for(
        f"{[m.name for m in members]} to share {len(partitions)} partitions",
        lambda: balanced(members, partitions, even),
        timeout=timeout,
    )


def departs(kcoord, group, member, survivors, partitions, how, timeout=60):
    """`member` leaves `group`: "close" sends LeaveGroup, "kill" sends
    nothing and leaves its session to expire. Waits until `survivors` share
    `partitions` and returns the cause of the rebalance that followed
    (`member_left`, `session_expired`)."""
    causes = kcoord.rebalance_causes(group)
    getattr(member, how)()
    wait_balanced(survivors, partitions, timeout=timeout)
    return kcoord.wait_rebalance_after(group, len(causes))


def stop_all(members):
    for m in members:
        try:
            m.close(timeout=15)
        except Exception:
            m.kill()


def kp_member(tmp_path, name, kcoord, group, topic, strategy="range", session_ms=6000):
    argv = [sys.executable, str(WORKERS / "kp_member.py"), "--bootstrap", kcoord.bootstrap, "--group", group,
            "--topic", topic, "--strategy", strategy, "--session-ms", str(session_ms)]
    return Member(tmp_path, name, argv)


def aio_member(tmp_path, name, kcoord, group, topic, strategy="roundrobin", instance_id=None, session_ms=6000):
    argv = [sys.executable, str(WORKERS / "aio_member.py"), "--bootstrap", kcoord.bootstrap, "--group", group,
            "--topic", topic, "--strategy", strategy, "--session-ms", str(session_ms)]
    if instance_id:
        argv += ["--instance-id", instance_id]
    return Member(tmp_path, name, argv)


def js_member(tmp_path, name, kcoord, group, topic):
    script = Path(__file__).resolve().parent / "js" / "group_member.js"
    return Member(tmp_path, name, ["node", str(script), kcoord.bootstrap, group, topic],
                  state_argv=lambda path: [str(path)], cwd=script.parent.parent)


# Short consumer-protocol (KIP-848) timers for two shared cores (Kafka: 45 s
# session, 5 s heartbeat interval).
FAST_848 = [
    "group.consumer.min_session_timeout_ms=6000",
    "group.consumer.session_timeout_ms=6000",
    "group.consumer.min_heartbeat_interval_ms=500",
    "group.consumer.heartbeat_interval_ms=500",
]
