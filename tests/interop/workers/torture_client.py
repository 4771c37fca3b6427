"""A client process of the crash torture (tests/interop/torture.py): an
acks=all producer or a consumer group member that commits synchronously.
Each step it takes is written to its event file (format: torture_checks.py)
and flushed before the next, so SIGKILL loses nothing it already did.
SIGTERM makes a consumer commit, close (LeaveGroup) and exit; the torture
SIGKILLs whatever still runs when it kills the daemon.
"""

import argparse
import random
import signal
import time

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition


class EventLog:
    def __init__(self, path):
        self.out = open(path, "a", buffering=1)

    def write(self, *fields):
        self.out.write(" ".join([fields[0], str(time.monotonic_ns())] + [str(f) for f in fields[1:]]) + "\n")
        self.out.flush()


def produce(args, log):
    """Produces unique values to random partitions at a bounded rate,
    recording each acknowledged (partition, offset, value)."""
    rng = random.Random(args.seed)
    producer = Producer({
        "bootstrap.servers": args.bootstrap,
        "acks": "all",
        "enable.idempotence": args.idempotent,
        "linger.ms": 5,
        "retry.backoff.ms": 50,
        "reconnect.backoff.max.ms": 200,
    })

    def delivered(err, msg):
        if err is None:
            log.write("M", msg.partition(), msg.offset(), msg.value().decode())

    i = 0
    while True:
        for _ in range(args.batch):
            try:
                producer.produce(args.topic, value=f"{args.name}-{i}", partition=rng.randrange(args.partitions),
                                 on_delivery=delivered)
            except BufferError:  # the daemon is down and the queue full: wait for it
                break
            i += 1
        # poll() returns as soon as it served a callback: sleep for the rate.
        producer.poll(0)
        time.sleep(args.pause)


def consume(args, log):
    """Consumes and commits what it consumed after each batch, synchronously,
    until SIGTERM; then commits, leaves and exits."""
    stopping = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(True))
    consumer = Consumer({
        "bootstrap.servers": args.bootstrap,
        "group.id": args.group,
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
        "partition.assignment.strategy": args.strategy,
        "session.timeout.ms": args.session_ms,
        "heartbeat.interval.ms": max(100, args.session_ms // 5),
        "reconnect.backoff.max.ms": 200,
    })
    done = {}  # partition -> next offset consumed but not yet committed

    def commit():
        if not done:
            return
        for p, o in done.items():
            log.write("A", args.group, p, o)
        try:
            result = consumer.commit(offsets=[TopicPartition(args.topic, p, o) for p, o in done.items()],
                                     asynchronous=False)
        except KafkaException:
            # Retried with the next batch's commit (unless revoked by then).
            for p, o in done.items():
                log.write("F", args.group, p, o)
            return
        for tp in result:
            log.write("F" if tp.error else "C", args.group, tp.partition, tp.offset)
            if not tp.error and done.get(tp.partition) == tp.offset:
                del done[tp.partition]

    def on_revoke(c, partitions):
        # Never commit a revoked partition later: it may be another member's.
        commit()
        for tp in partitions:
            done.pop(tp.partition, None)

    def on_assign(c, partitions):
        log.write("J", args.group, len(partitions))

    consumer.subscribe([args.topic], on_assign=on_assign, on_revoke=on_revoke)
    while not stopping:
        for m in consumer.consume(num_messages=args.batch, timeout=args.pause):
            if m.error() is None:
                done[m.partition()] = m.offset() + 1
        commit()
    commit()
    consumer.close()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("role", choices=["produce", "consume"])
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--topic", required=True)
    ap.add_argument("--events", required=True)
    ap.add_argument("--name", required=True)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--batch", type=int, default=50)
    ap.add_argument("--pause", type=float, default=0.02, help="seconds between batches")
    ap.add_argument("--partitions", type=int, default=1)
    ap.add_argument("--idempotent", action="store_true")
    ap.add_argument("--group")
    ap.add_argument("--strategy", default="range")
    ap.add_argument("--session-ms", type=int, default=2000)
    args = ap.parse_args()
    log = EventLog(args.events)
    (produce if args.role == "produce" else consume)(args, log)


if __name__ == "__main__":
    main()
