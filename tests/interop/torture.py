"""Crash torture: cycles of mixed load from real clients against one daemon
on a persistent data dir, each ended by a SIGKILL of the daemon at a seeded
random moment; after each restart, nothing the clients saw acknowledged may
be lost (torture_checks.py says exactly what is checked).

A cycle: acks=all producers (one idempotent, one not) and consumers in two
groups (eager `range` and `cooperative-sticky`) that join late, leave
(LeaveGroup) or crash (SIGKILL) at seeded times, committing synchronously
what they consume; the daemon is SIGKILLed, then every client; the daemon
restarts on the same port and data dir, the committed offsets of every
group and partition and the messages acknowledged in the cycle are read
back and checked. A share of the restarts (`--recovery-kills`) is first
SIGKILLed again within 0.3 s of starting, during recovery. Every `--full-check-every` cycles and at the end, every
message acknowledged since the start is read back.

A benchmark-style run, not a CI gate: scripts/crash-torture runs it (and
builds the daemon); results go in docs/testing.md, "Crash torture".

    python tests/interop/torture.py --cycles 100 --seconds 4 [--seed S] [--set storage.fsync=never]
"""

import argparse
import random
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from confluent_kafka import Consumer, KafkaException, TopicPartition

from conftest import Kcoord
from torture_checks import Events, check_commit, check_messages, parse_events

CLIENT = Path(__file__).resolve().parent / "workers" / "torture_client.py"
TOPIC = "torture"
PARTITIONS = 6
GROUPS = {"torture-range": "range", "torture-coop": "cooperative-sticky"}
# Waits for the restarted daemon and for reads; generous for two busy cores.
READ_TIMEOUT_S = 60
# Longest wait for the load to flow before the kill's window opens.
WARM_UP_S = 30


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Clients:
    """The client processes of one cycle, each writing its own event file."""

    def __init__(self, bootstrap, cycle, cycle_dir, rng):
        self.bootstrap, self.cycle, self.dir, self.rng = bootstrap, cycle, cycle_dir, rng
        self.procs = {}

    def start(self, name, role, *args):
        argv = [sys.executable, str(CLIENT), role, "--bootstrap", self.bootstrap, "--topic", TOPIC,
                "--events", str(self.dir / f"{name}.events"), "--name", f"{name}/{self.cycle}",
                "--seed", str(self.rng.randrange(1 << 32)), *map(str, args)]
        self.procs[name] = subprocess.Popen(argv, stdout=subprocess.DEVNULL,
                                            stderr=open(self.dir / f"{name}.err", "w"))

    def producer(self, name, idempotent):
        self.start(name, "produce", "--partitions", PARTITIONS, "--batch", 10, *(["--idempotent"] if idempotent else []))

    def consumer(self, name, group):
        self.start(name, "consume", "--group", group, "--strategy", GROUPS[group])

    def signal(self, name, sig):
        proc = self.procs.get(name)
        if proc is not None and proc.poll() is None:
            proc.send_signal(sig)

    def kill_all(self):
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.kill()
        for proc in self.procs.values():
            proc.wait()

    def events(self):
        events = Events()
        for f in sorted(self.dir.glob("*.events")):
            with open(f) as lines:
                parse_events(lines, events)
        return events


def start_initial_clients(clients):
    """Two producers (one idempotent) and two members per group."""
    clients.producer("p-idem", True)
    clients.producer("p-plain", False)
    for g, group in enumerate(GROUPS):
        clients.consumer(f"c{g}a", group)
        clients.consumer(f"c{g}b", group)


def load_flowing(events):
    """Both producers have a message acknowledged and every group a commit
    (the groups' first rebalance after a restart waits for the members the
    kill left behind to time out)."""
    producers = {value.split("/", 1)[0] for value in events.messages.values()}
    groups = {g for (g, _), ops in events.commits.items() if any(op.acked for op in ops)}
    return producers >= {"p-idem", "p-plain"} and groups >= set(GROUPS)


def wait_flowing(clients, timeout=WARM_UP_S):
    """Waits (bounded) for the load to flow; returns the seconds it took, or None."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        if load_flowing(clients.events()):
            return time.monotonic() - t0
        time.sleep(0.1)
    return None


def plan_cycle(rng, seconds):
    """The seeded schedule once the load flows: (time, action, args) sorted by
    time, and when the daemon is killed. Per group a member joins late and
    one of the first two leaves (LeaveGroup) or crashes."""
    kill_at = rng.uniform(0, seconds)
    plan = []
    for g, group in enumerate(GROUPS):
        plan.append((rng.uniform(0, seconds), "consumer", (f"c{g}c", group)))
        plan.append((rng.uniform(0, seconds), rng.choice(["leave", "crash"]), (f"c{g}{rng.choice('ab')}",)))
    return sorted(plan, key=lambda step: step[0]), kill_at


def run_plan(clients, plan, kill_at):
    """Runs the plan until `kill_at` (then the caller kills)."""
    started = time.monotonic()
    for at, action, args in plan:
        if at >= kill_at:
            break
        time.sleep(max(0.0, started + at - time.monotonic()))
        if action == "consumer":
            clients.consumer(*args)
        else:
            clients.signal(args[0], signal.SIGTERM if action == "leave" else signal.SIGKILL)
    time.sleep(max(0.0, started + kill_at - time.monotonic()))


def kill_during_recovery(daemon, rng):
    """Starts the daemon and SIGKILLs it within its first 0.3 s, while it
    recovers its logs (a crash during recovery must lose nothing either)."""
    with open(daemon.log_path, "ab") as log:
        proc = subprocess.Popen(daemon.args(), stdout=subprocess.DEVNULL, stderr=log)
    time.sleep(rng.uniform(0, 0.3))
    proc.kill()
    proc.wait()


def retry(what, fn, timeout=READ_TIMEOUT_S):
    """fn() until it stops raising KafkaException (the daemon may still be
    loading: COORDINATOR_LOAD_IN_PROGRESS)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return fn()
        except KafkaException as e:
            if time.monotonic() > deadline:
                raise RuntimeError(f"{what}: {e}") from e
            time.sleep(0.05)


def fetch_committed(bootstrap, group):
    """{partition: committed offset or None} of a group (OffsetFetch)."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})

    def fetch():
        tps = c.committed([TopicPartition(TOPIC, p) for p in range(PARTITIONS)], timeout=10)
        # A partition's error (still loading, say) is no answer: ask again.
        if errors := [tp.error for tp in tps if tp.error]:
            raise KafkaException(errors[0])
        return {tp.partition: (tp.offset if tp.offset >= 0 else None) for tp in tps}

    try:
        return retry(f"OffsetFetch of {group}", fetch)
    finally:
        c.close()


def read_partitions(bootstrap, ranges):
    """Reads {partition: (first, end)} offsets [first, end) back, stopping at
    the high watermark; returns ({(partition, offset): value}, {partition: high})."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "torture-reader", "enable.auto.commit": False,
                  "enable.partition.eof": True})
    read, highs = {}, {}
    try:
        for p in ranges:
            highs[p] = retry(f"watermarks of {p}",
                             lambda p=p: c.get_watermark_offsets(TopicPartition(TOPIC, p), timeout=10))[1]
        todo = {p: min(end, highs[p]) for p, (first, end) in ranges.items() if first < min(end, highs[p])}
        c.assign([TopicPartition(TOPIC, p, ranges[p][0]) for p in todo])
        deadline = time.monotonic() + READ_TIMEOUT_S
        while todo and time.monotonic() < deadline:
            for m in c.consume(num_messages=5000, timeout=0.5):
                if m.error() is not None:
                    continue
                read[(m.partition(), m.offset())] = m.value().decode()
                if m.offset() + 1 >= todo.get(m.partition(), 0):
                    todo.pop(m.partition(), None)
    finally:
        c.close()
    return read, highs


def ranges_of(messages):
    """The offset range [first, last + 1) per partition of {(partition, offset): value}."""
    ranges = {}
    for p, o in messages:
        first, end = ranges.get(p, (o, o + 1))
        ranges[p] = (min(first, o), max(end, o + 1))
    return ranges


def stats(values):
    values = sorted(values)
    if not values:
        return "n/a"
    p95 = values[min(len(values) - 1, int(0.95 * len(values)))]
    return (f"min {values[0]:.2f} / median {statistics.median(values):.2f} / p95 {p95:.2f} / "
            f"max {values[-1]:.2f} s")


class Torture:
    def __init__(self, args):
        self.args = args
        self.work = Path(args.work_dir) if args.work_dir else Path(tempfile.mkdtemp(prefix="kcoord-torture-"))
        self.work.mkdir(parents=True, exist_ok=True)
        self.daemon = Kcoord(self.work / "data", settings=args.set, topics=[f"{TOPIC}:{PARTITIONS}"],
                             port=args.port or free_port())
        self.committed = {(g, p): None for g in GROUPS for p in range(PARTITIONS)}
        self.losses = []
        self.stalled = 0  # cycles whose load did not flow within WARM_UP_S
        self.ends = {}  # partition -> end of its highest acknowledged message so far
        self.totals = dict.fromkeys(["kills during recovery", "assignments", "commits acknowledged",
                                     "offsets checked", "offsets checked exactly", "messages acknowledged"], 0)
        self.restart_s, self.ready_s, self.warm_up_s = [], [], []

    def restart(self):
        """Starts the daemon; returns the seconds to serving, the seconds until
        every group's committed offsets were read, and those offsets."""
        t0 = time.monotonic()
        self.daemon.start(timeout=READ_TIMEOUT_S)
        serving = time.monotonic() - t0
        fetched = {(g, p): o for g in GROUPS for p, o in fetch_committed(self.daemon.bootstrap, g).items()}
        return serving, time.monotonic() - t0, fetched

    def check_offsets(self, n, events, fetched):
        exact = 0
        for key, baseline in self.committed.items():
            verdict = check_commit(key, events.commits.get(key, []), baseline, fetched.get(key))
            exact += verdict.exact
            if verdict.loss:
                self.losses.append(f"cycle {n}: {verdict.loss}")
        self.committed = fetched
        return exact

    def check_all_messages(self, cycles):
        """Reads every partition from the start; checks every message
        acknowledged in `cycles` (their event files)."""
        acked = Events()
        for c in cycles:
            for f in sorted((self.work / f"cycle-{c:04d}").glob("*.events")):
                with open(f) as lines:
                    parse_events(lines, acked)
        ranges = {p: (0, end) for p, (_, end) in ranges_of(acked.messages).items()}
        read, highs = read_partitions(self.daemon.bootstrap, ranges)
        return len(acked.messages), acked.conflicts + check_messages(acked.messages, read, highs)

    def load(self, n, rng):
        """Runs cycle n's clients until the kill; returns their events, how
        long the load took to flow (None: it never did) and when the kill came."""
        cycle_dir = self.work / f"cycle-{n:04d}"
        cycle_dir.mkdir()
        clients = Clients(self.daemon.bootstrap, n, cycle_dir, rng)
        try:
            start_initial_clients(clients)
            warm_up = wait_flowing(clients)
            plan, kill_at = plan_cycle(rng, self.args.seconds)
            run_plan(clients, plan, kill_at)
        finally:
            # The daemon first: what a client saw acknowledged until then counts.
            self.daemon.kill()
            clients.kill_all()
        return clients.events(), warm_up, kill_at

    def check_cycle_messages(self, n, events):
        """The cycle's acknowledged messages, and every partition's log end
        against the highest offset acknowledged in earlier cycles."""
        ranges = ranges_of(events.messages)
        read, highs = read_partitions(self.daemon.bootstrap, {p: (e, e) for p, e in self.ends.items()} | ranges)
        lost = events.conflicts + check_messages(events.messages, read, highs)
        lost += [f"partition {p} log end went back from {e} (acknowledged earlier) to {highs.get(p)}"
                 for p, e in sorted(self.ends.items()) if highs.get(p, 0) < e]
        self.ends.update({p: max(e, self.ends.get(p, 0)) for p, (_, e) in ranges.items()})
        self.losses += [f"cycle {n}: {loss}" for loss in lost]

    def cycle(self, n):
        rng = random.Random(f"{self.args.seed}-{n}")
        events, warm_up, kill_at = self.load(n, rng)
        if n == self.args.wipe_before_restart:
            shutil.rmtree(self.daemon.data_dir)
        recovery_killed = rng.random() < self.args.recovery_kills
        if recovery_killed:
            kill_during_recovery(self.daemon, rng)
        serving, ready, fetched = self.restart()
        exact = self.check_offsets(n, events, fetched)
        self.check_cycle_messages(n, events)
        self.restart_s.append(serving)
        self.ready_s.append(ready)
        self.warm_up_s.append(warm_up if warm_up is not None else WARM_UP_S)
        self.stalled += warm_up is None
        for key, value in [("kills during recovery", recovery_killed), ("assignments", events.assignments),
                           ("commits acknowledged", events.commits_acked), ("offsets checked", len(fetched)),
                           ("offsets checked exactly", exact), ("messages acknowledged", len(events.messages))]:
            self.totals[key] += value
        flowing = f"load flowing after {warm_up:.1f} s" if warm_up is not None else "LOAD NOT FLOWING"
        print(f"cycle {n:4d}/{self.args.cycles}: {flowing}, killed {kill_at:4.2f} s later; "
              f"{events.assignments:2d} assignments, {events.commits_acked:4d} commits and "
              f"{len(events.messages):5d} messages acknowledged; {exact}/{len(fetched)} offsets exact; "
              f"losses so far {len(self.losses)}; {'killed again in recovery; ' if recovery_killed else ''}"
              f"restart {serving:.2f} s, offsets readable {ready:.2f} s", flush=True)

    def run(self):
        a = self.args
        print(f"crash torture: {a.cycles} cycles of {a.seconds} s, seed {a.seed}, settings {a.set or 'default'}, "
              f"port {self.daemon.port}, work dir {self.work}", flush=True)
        started = time.monotonic()
        self.daemon.start(timeout=READ_TIMEOUT_S)
        full_checked = 0
        try:
            for n in range(1, a.cycles + 1):
                self.cycle(n)
                if n == a.cycles or (a.full_check_every and n % a.full_check_every == 0):
                    checked, lost = self.check_all_messages(range(1, n + 1))
                    self.losses += [f"full check after cycle {n}: {loss}" for loss in lost]
                    full_checked = checked
                    print(f"full check after cycle {n}: {checked} acknowledged messages read back, {len(lost)} lost",
                          flush=True)
        except BaseException:
            self.daemon.kill()
            print(f"stopped; work dir kept: {self.work}", flush=True)
            raise
        code = self.daemon.stop()
        self.summary(time.monotonic() - started, full_checked, code)
        good = not self.losses and not self.stalled and code == 0
        if good and not a.keep:
            shutil.rmtree(self.work, ignore_errors=True)
        return 0 if good else 1

    def summary(self, elapsed, full_checked, code):
        t = self.totals
        print(f"\nsummary: {len(self.restart_s)} cycles in {elapsed:.0f} s (seed {self.args.seed}), "
              f"{len(self.restart_s) + t['kills during recovery']} SIGKILLs "
              f"({t['kills during recovery']} of them during recovery)")
        print(f"  assignments received by members (rebalances x members): {t['assignments']}")
        print(f"  commits acknowledged: {t['commits acknowledged']}; committed offsets checked after restarts: "
              f"{t['offsets checked']} ({t['offsets checked exactly']} exactly equal to the last acknowledged)")
        print(f"  messages acknowledged (acks=all): {t['messages acknowledged']}, each read back after its cycle's "
              f"restart; {full_checked} read back again at the end")
        print(f"  restart (spawn to serving): {stats(self.restart_s)}")
        print(f"  recovery (spawn to committed offsets readable): {stats(self.ready_s)}")
        print(f"  load flowing after (clients start, first commit per group): {stats(self.warm_up_s)}")
        print(f"  cycles whose load did not flow within {WARM_UP_S} s: {self.stalled}")
        print(f"  final SIGTERM exit code: {code}")
        print(f"  losses: {len(self.losses)}")
        for loss in self.losses[:50]:
            print(f"    {loss}")
        if self.losses or self.stalled or code != 0 or self.args.keep:
            print(f"  work dir kept: {self.work} (daemon log {self.daemon.log_path})")


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cycles", type=int, default=100)
    ap.add_argument("--seconds", type=float, default=4.0, help="longest load per cycle; the kill lands in it")
    ap.add_argument("--seed", type=int, default=None, help="default: from the clock (printed)")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="daemon setting (repeatable)")
    ap.add_argument("--port", type=int, default=0, help="fixed 127.0.0.1 port (default: a free one)")
    ap.add_argument("--work-dir", help="data dir, logs and client events (default: a new temporary dir)")
    ap.add_argument("--full-check-every", type=int, default=25, help="cycles between reads of every message (0: end only)")
    ap.add_argument("--recovery-kills", type=float, default=0.2, metavar="P",
                    help="share of restarts first SIGKILLed again within 0.3 s of starting")
    ap.add_argument("--wipe-before-restart", type=int, metavar="CYCLE",
                    help="self-test of the checker: delete the data dir before that cycle's restart (losses expected)")
    ap.add_argument("--keep", action="store_true", help="keep the work dir even without losses")
    args = ap.parse_args(argv)
    if args.seed is None:
        args.seed = int(time.time())
    return args


def main(argv=None):
    return Torture(parse_args(argv)).run()


if __name__ == "__main__":
    sys.exit(main())
