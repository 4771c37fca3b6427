#!/usr/bin/env python3
"""Standalone-mode data plane measured with librdkafka (confluent-kafka):
produce and fetch throughput for a message size, and end-to-end latency.

    bench_data_plane.py BOOTSTRAP TOPIC PARTITIONS LABEL [--size N] [--count N]
        [--compression none|gzip|snappy|lz4|zstd]
        [--produce-only | --latency-only | --consume-only]
        [--latency-rate N] [--latency-secs S] [--cpu-of NAME=PID,...]
        [--samples-out FILE]

--cpu-of adds each named process's CPU time (user + system, from /proc)
during each phase to its metrics, as cpu_ms_NAME: CPU per message moved is
steadier than throughput on a shared machine.

End-to-end latency reports p50 and p99, the worst sample, and how many
samples took longer than 50 ms (`stalls`): a whole-pipeline pause shows up
there even when it is too short or too rare to move p99. --samples-out
appends every latency sample (ms) of the run to FILE, one per line, so that
a caller can pool the samples of many runs: one run's p99 rests on its 80
slowest samples of 8,000, and a single 15 ms pause of the whole machine
delays about that many.

Prints one JSON object per result, like kcoord-bench --json. Bounded: a fixed
message count for throughput, a fixed duration for latency. The Python loop
calling produce() is part of what is measured (~1 µs per call), so small
messages are bounded by the client as much as by the broker.
"""

import argparse
import json
import os
import threading
import time

from confluent_kafka import Consumer, Producer, TopicPartition


class CpuMeter:
    """CPU time (ms) used by named processes since the last reading."""

    def __init__(self, spec):
        self.pids = dict(item.split("=", 1) for item in spec.split(",")) if spec else {}
        self.tick_ms = 1000 / os.sysconf("SC_CLK_TCK")
        self.last = self.read()

    def read(self):
        out = {}
        for name, pid in self.pids.items():
            with open(f"/proc/{pid}/stat") as f:
                # Fields after the parenthesised command; utime and stime are 14 and 15.
                fields = f.read().rsplit(")", 1)[1].split()
            out[name] = (int(fields[11]) + int(fields[12])) * self.tick_ms
        return out

    def lap(self):
        now = self.read()
        used = {f"cpu_ms_{n}": round(now[n] - self.last[n]) for n in now}
        self.last = now
        return used


def report(scenario, params, metrics):
    print(json.dumps({"scenario": scenario, "params": params, "metrics": metrics}), flush=True)


def produce(bootstrap, topic, size, count, compression="none"):
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5,
                  "batch.size": 1048576, "queue.buffering.max.messages": 1000000,
                  "queue.buffering.max.kbytes": 1048576, "compression.type": compression})
    # Compressed runs send 1,000 distinct hex payloads (about 2:1 compressible),
    # so that batches do not shrink to nothing.
    payloads = [b"x" * size] if compression == "none" else [os.urandom(size).hex()[:size].encode() for _ in range(1000)]
    failed = []

    def on_delivery(err, _msg):
        if err is not None:
            failed.append(err)

    start = time.perf_counter()
    for i in range(count):
        while True:
            try:
                p.produce(topic, payloads[i % len(payloads)], on_delivery=on_delivery)
                break
            except BufferError:
                p.poll(0.01)
        if i % 10000 == 0:
            p.poll(0)
    remaining = p.flush(120)
    took = time.perf_counter() - start
    if remaining or failed:
        raise SystemExit(f"produce failed: {remaining} undelivered, errors {failed[:3]}")
    return took


def consume(bootstrap, topic, partitions, count):
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-unused", "enable.auto.commit": False,
                  "fetch.max.bytes": 52428800, "max.partition.fetch.bytes": 10485760})
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    got = 0
    # Timed from the first message: connecting and finding the leaders are
    # not throughput (and cost a sidecar a few more round trips).
    first = None
    deadline = time.perf_counter() + 300
    while got < count and time.perf_counter() < deadline:
        for m in c.consume(num_messages=10000, timeout=1.0):
            if m.error() is None:
                if first is None:
                    first = time.perf_counter()
                got += 1
    took = time.perf_counter() - (first or 0)
    c.close()
    if got < count:
        raise SystemExit(f"consumed only {got} of {count}")
    return took


STALL_SECS = 0.05


def latency(bootstrap, topic, partitions, size, rate, seconds):
    """Messages stamped with send time, at `rate`/s; a consumer reading from
    the end measures receive time minus send time. Returns the metrics."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-unused", "enable.auto.commit": False,
                  "fetch.wait.max.ms": 500})
    ends = [c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in range(partitions)]
    c.assign([TopicPartition(topic, p, e) for p, e in enumerate(ends)])
    samples = []
    total = int(rate * seconds)
    done = threading.Event()

    def reader():
        while len(samples) < total and not done.is_set():
            # poll(), not consume(n): consume waits to fill its batch.
            m = c.poll(0.5)
            if m is not None and m.error() is None:
                samples.append(time.time() - float(m.value()[:20]))

    t = threading.Thread(target=reader)
    t.start()
    time.sleep(1)  # the consumer's first fetches are in flight
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0})
    pad = b"x" * max(0, size - 20)
    start = time.perf_counter()
    for i in range(total):
        target = start + i / rate
        while time.perf_counter() < target:
            p.poll(0.0005)
        p.produce(topic, b"%20.6f" % time.time() + pad)
    p.flush(60)
    t.join(timeout=60)
    done.set()
    c.close()
    samples.sort()
    if not samples:
        raise SystemExit("no latency samples")
    pick = lambda q: samples[min(len(samples) - 1, int(q * len(samples)))] * 1000
    metrics = {"samples": len(samples), "latency_p50_ms": pick(0.5), "latency_p99_ms": pick(0.99),
               "latency_max_ms": samples[-1] * 1000, "stalls": sum(1 for x in samples if x > STALL_SECS)}
    return metrics, samples


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("bootstrap")
    ap.add_argument("topic")
    ap.add_argument("partitions", type=int)
    ap.add_argument("label", help="e.g. the fsync policy, recorded in the params")
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--count", type=int, default=300000)
    ap.add_argument("--latency-rate", type=int, default=1000)
    ap.add_argument("--latency-secs", type=float, default=5)
    ap.add_argument("--compression", default="none", choices=["none", "gzip", "snappy", "lz4", "zstd"])
    only = ap.add_mutually_exclusive_group()
    only.add_argument("--produce-only", action="store_true")
    only.add_argument("--latency-only", action="store_true", help="skip the throughput phases")
    only.add_argument("--consume-only", action="store_true",
                      help="only fetch the topic's first COUNT messages (produced before)")
    ap.add_argument("--cpu-of", default="", help="NAME=PID,...: report these processes' CPU time per phase")
    ap.add_argument("--samples-out", help="append every latency sample (ms, one per line) to this file")
    a = ap.parse_args()
    cpu = CpuMeter(a.cpu_of)
    params = {"size": a.size, "count": a.count, "partitions": a.partitions, "fsync": a.label,
              "compression": a.compression}
    if a.latency_only:
        report_latency(a, params)
        return
    if a.consume_only:
        report_fetch(a, params, cpu)
        return
    took = produce(a.bootstrap, a.topic, a.size, a.count, a.compression)
    report("produce", params, {"msgs_per_sec": a.count / took, "mb_per_sec": a.count * a.size / took / 1e6,
                               **cpu.lap()})
    if a.produce_only:
        return
    report_fetch(a, params, cpu)
    report_latency(a, params)


def report_fetch(a, params, cpu):
    took = consume(a.bootstrap, a.topic, a.partitions, a.count)
    report("fetch", params, {"msgs_per_sec": a.count / took, "mb_per_sec": a.count * a.size / took / 1e6,
                             **cpu.lap()})


def report_latency(a, params):
    metrics, samples = latency(a.bootstrap, a.topic, a.partitions, a.size, a.latency_rate, a.latency_secs)
    if a.samples_out:
        with open(a.samples_out, "a") as f:
            f.writelines(f"{x * 1000:.4f}\n" for x in samples)
    report("end-to-end", dict(params, rate=a.latency_rate), metrics)


if __name__ == "__main__":
    main()
