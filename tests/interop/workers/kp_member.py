"""A kafka-python consumer group member for interop tests; reports its
assignment through a JSON state file (see rdk_member.py)."""

import argparse
import signal
import sys

from kafka import KafkaConsumer
from kafka.consumer.subscription_state import ConsumerRebalanceListener

from member_state import MemberState


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--group", required=True)
    ap.add_argument("--topic", required=True)
    ap.add_argument("--state-file", required=True)
    ap.add_argument("--session-ms", type=int, default=6000)
    ap.add_argument("--strategy", default="range")
    ap.add_argument("--instance-id")
    args = ap.parse_args()
    state = MemberState(args.state_file, consumed=0)
    save = state.save

    class Listener(ConsumerRebalanceListener):
        def on_partitions_revoked(self, revoked):
            state["revocations"] += 1
            state["assigned"] = []
            save()

        def on_partitions_assigned(self, assigned):
            state["generations"] += 1
            state["assigned"] = sorted((tp.topic, tp.partition) for tp in assigned)
            save()

    from kafka.coordinator.assignors.range import RangePartitionAssignor
    from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor

    assignor = {"range": RangePartitionAssignor, "roundrobin": RoundRobinPartitionAssignor}[args.strategy]
    kwargs = {}
    if args.instance_id:
        kwargs["group_instance_id"] = args.instance_id
    consumer = KafkaConsumer(
        bootstrap_servers=args.bootstrap,
        group_id=args.group,
        session_timeout_ms=args.session_ms,
        heartbeat_interval_ms=500,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        partition_assignment_strategy=[assignor],
        **kwargs,
    )
    consumer.subscribe([args.topic], listener=Listener())
    save()
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    signal.signal(signal.SIGINT, lambda *_: stop.append(1))
    while not stop:
        batch = consumer.poll(timeout_ms=100)
        state["consumed"] += sum(len(v) for v in batch.values())
    consumer.close()
    state["closed"] = True
    save()


if __name__ == "__main__":
    sys.exit(main())
