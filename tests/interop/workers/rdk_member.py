"""A confluent-kafka (librdkafka) consumer group member for interop tests.

Joins a group, and after every rebalance event writes what it owns to a JSON
state file (atomically), so a test can watch assignments from outside and
kill this process with SIGKILL. SIGTERM/SIGINT close the consumer cleanly
(LeaveGroup for dynamic members).
"""

import argparse
import signal
import sys
import time

from confluent_kafka import Consumer, KafkaException

from member_state import MemberState


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--group", required=True)
    ap.add_argument("--topic", action="append", required=True)
    ap.add_argument("--strategy", default="range")
    ap.add_argument("--state-file", required=True)
    ap.add_argument("--instance-id")
    ap.add_argument("--session-ms", type=int, default=6000)
    ap.add_argument("--consume", action="store_true", help="record consumed messages too")
    ap.add_argument("--record", help="append a 'partition offset key' line per consumed message to this file")
    ap.add_argument("--auto-commit", action="store_true", help="enable.auto.commit (every 500 ms)")
    ap.add_argument("--events", help="append a timestamped processing log: 'T assign P', 'T revoke P', "
                    "'T msg P OFFSET KEY', 'T closed'")
    args = ap.parse_args()
    record = open(args.record, "a", buffering=1) if args.record else None
    events = open(args.events, "a", buffering=1) if args.events else None

    def event(*fields):
        if events:
            events.write(" ".join([f"{time.time():.6f}"] + [str(f) for f in fields]) + "\n")

    state = MemberState(args.state_file, errors=[], fatal=None, member_id=None, consumed=0)
    save = state.save

    owned = set()

    def on_assign(consumer, partitions):
        for p in partitions:
            event("assign", p.partition)
        owned.update((p.topic, p.partition) for p in partitions)
        state["assigned"] = sorted(owned)
        state["generations"] += 1
        state["member_id"] = consumer.memberid()
        save()

    def on_revoke(consumer, partitions):
        for p in partitions:
            event("revoke", p.partition)
        owned.difference_update((p.topic, p.partition) for p in partitions)
        state["assigned"] = sorted(owned)
        state["revocations"] += 1
        save()

    def on_lost(consumer, partitions):
        on_revoke(consumer, partitions)

    def on_error(err):
        # Keep the last few errors only: a member outliving its daemon keeps failing to connect.
        state["errors"] = (state["errors"] + [f"{err.code()}:{err.name()}:{err.str()}"])[-20:]
        if err.fatal():
            state["fatal"] = err.str()
        save()

    conf = {
        "bootstrap.servers": args.bootstrap,
        "group.id": args.group,
        "session.timeout.ms": args.session_ms,
        "heartbeat.interval.ms": 500,
        "partition.assignment.strategy": args.strategy,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": args.auto_commit,
        "auto.commit.interval.ms": 500,
        "error_cb": on_error,
    }
    if args.strategy == "consumer":
        # KIP-848: the coordinator assigns and times sessions; librdkafka
        # refuses the classic protocol's settings with it.
        for key in ("session.timeout.ms", "heartbeat.interval.ms", "partition.assignment.strategy"):
            del conf[key]
        conf["group.protocol"] = "consumer"
    if args.instance_id:
        conf["group.instance.id"] = args.instance_id
    consumer = Consumer(conf)
    consumer.subscribe(args.topic, on_assign=on_assign, on_revoke=on_revoke, on_lost=on_lost)
    save()

    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    signal.signal(signal.SIGINT, lambda *_: stop.append(1))
    while not stop:
        try:
            msg = consumer.poll(0.1)
        except KafkaException as e:
            # Fatal errors (e.g. a fenced static member) are raised by poll().
            state["fatal"] = str(e)
            save()
            break
        if msg is not None and not msg.error():
            state["consumed"] += 1
            key = msg.key().decode() if msg.key() is not None else ""
            if record:
                record.write(f"{msg.partition()} {msg.offset()} {key}\n")
            event("msg", msg.partition(), msg.offset(), key)
        elif msg is not None and msg.error() and msg.error().fatal():
            state["fatal"] = msg.error().str()
            save()
            break
    while state["fatal"] and not stop:
        time.sleep(0.1)
    try:
        consumer.close()
    except KafkaException:
        pass
    event("closed")
    state["closed"] = True
    save()


if __name__ == "__main__":
    sys.exit(main())
