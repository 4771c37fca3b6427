"""What the crash torture (torture.py) checks after each SIGKILL and restart:
nothing a client saw acknowledged is lost. Pure functions over the events
the client processes (workers/torture_client.py) recorded, so the checker is
tested without a daemon (test_crash_torture.py).

Event lines, one per step, flushed before the next step so a SIGKILL of the
client loses nothing it already did (times are CLOCK_MONOTONIC ns, comparable
across processes):

    A <t> <group> <partition> <offset>     commit attempted (sent)
    C <t> <group> <partition> <offset>     commit acknowledged
    F <t> <group> <partition> <offset>     commit answered with an error
    M <t> <partition> <offset> <value>     acks=all produce acknowledged
    J <t> <group> <partitions>             partitions assigned (a rebalance ended)
"""

from dataclasses import dataclass, field

NEVER = float("inf")


@dataclass
class CommitOp:
    """One synchronous commit of one partition: sent at `sent`, finished
    (acknowledged or failed) at `done`, or never answered (`done` is NEVER)."""

    offset: int
    sent: float
    done: float = NEVER
    acked: bool = False


@dataclass
class Events:
    """A cycle's events from every client."""

    commits: dict = field(default_factory=dict)  # (group, partition) -> [CommitOp]
    messages: dict = field(default_factory=dict)  # (partition, offset) -> value
    commits_acked: int = 0
    assignments: int = 0
    conflicts: list = field(default_factory=list)  # two acknowledged values for one offset


def parse_events(lines, events=None):
    """Adds one client's event lines to `events`. A commit's A/C/F lines come
    from one synchronous call, so a C or F finishes the latest open attempt of
    its (group, partition) in this client. A torn last line (the client was
    killed while writing it) is skipped."""
    events = events or Events()
    open_ops = {}
    for line in lines:
        parts = line.rstrip("\n").split(" ", 4)
        try:
            kind, t = parts[0], int(parts[1])
            if kind in ("A", "C", "F") and len(parts) == 5:
                key, offset = (parts[2], int(parts[3])), int(parts[4])
                if kind == "A":
                    op = CommitOp(offset, t)
                    events.commits.setdefault(key, []).append(op)
                    open_ops[key] = op
                elif (op := open_ops.pop(key, None)) is not None and op.offset == offset:
                    op.done, op.acked = t, kind == "C"
                    events.commits_acked += kind == "C"
            elif kind == "J":
                events.assignments += 1
            elif kind == "M" and len(parts) == 5:
                key, value = (int(parts[2]), int(parts[3])), parts[4]
                if events.messages.setdefault(key, value) != value:
                    events.conflicts.append(f"partition {key[0]} offset {key[1]} acknowledged as both "
                                            f"{events.messages[key]!r} and {value!r}")
        except (IndexError, ValueError):
            continue
    return events


@dataclass
class CommitVerdict:
    """The check of one (group, partition): `loss` describes a violation."""

    expected: int | None  # the last acknowledged offset (or the previous cycle's), None if none
    allowed: set
    exact: bool  # no other commit could have been applied last: fetched must equal `expected`
    loss: str | None = None


def check_commit(key, ops, baseline, fetched):
    """`fetched` (the committed offset read after the restart, None if none)
    against the commits of one (group, partition): `baseline` is what the
    previous check read (None if nothing), `ops` this cycle's commits.

    The last acknowledged commit is the one acknowledged last. After the
    restart the committed offset must be it, or the offset of a commit that
    may have been applied after it: one not finished before it was sent (still
    in flight at the kill, answered with an error, or concurrent with it).
    Consumers here commit what they consumed from the committed position, so
    commits only go forward: an offset below the last acknowledged one is a
    loss even if a concurrent commit named it."""
    acked = [op for op in ops if op.acked]
    last = max(acked, key=lambda op: op.done) if acked else CommitOp(baseline, -NEVER, -NEVER, True)
    later = {op.offset for op in ops if op is not last and op.done > last.sent}
    allowed = {last.offset} | later
    verdict = CommitVerdict(last.offset, allowed, exact=allowed == {last.offset})
    group, partition = key
    lost = last.offset is not None and (fetched is None or fetched < last.offset)
    if lost or fetched not in allowed:
        what = "lost" if lost else "changed"
        verdict.loss = (f"commit {what}: group {group} partition {partition}: last acknowledged "
                        f"{last.offset}, may also be one of {sorted(later)}, read {fetched}")
    return verdict


def check_messages(acked, read, high_watermarks):
    """Acknowledged messages `acked` {(partition, offset): value} against what
    was read back `read` (same shape) and each partition's high watermark;
    returns the descriptions of losses."""
    losses = []
    for (p, o), value in sorted(acked.items()):
        got = read.get((p, o))
        if got == value:
            continue
        if got is None:
            why = f"high watermark {high_watermarks.get(p)}" if o >= high_watermarks.get(p, 0) else "not read back"
            losses.append(f"message lost: partition {p} offset {o} value {value!r} ({why})")
        else:
            losses.append(f"message changed: partition {p} offset {o} acknowledged {value!r}, read {got!r}")
    return losses
