"""An aiokafka consumer group member for interop tests; reports its
assignment through a JSON state file (see rdk_member.py).

aiokafka speaks older request versions than the other clients (JoinGroup
v5, SyncGroup v3, OffsetCommit and OffsetFetch v3, Heartbeat and
LeaveGroup v1) and assigns round-robin unless told otherwise. A static
member (`--instance-id`) sends no LeaveGroup when it stops, as Kafka's
clients do not.
"""

import argparse
import asyncio
import signal
import sys

from aiokafka import AIOKafkaConsumer
from aiokafka.abc import ConsumerRebalanceListener
from aiokafka.coordinator.assignors.range import RangePartitionAssignor
from aiokafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor

from member_state import MemberState


async def run(args):
    state = MemberState(args.state_file, consumed=0)
    save = state.save

    class Listener(ConsumerRebalanceListener):
        async def on_partitions_revoked(self, revoked):
            state["revocations"] += 1
            state["assigned"] = []
            save()

        async def on_partitions_assigned(self, assigned):
            state["generations"] += 1
            state["assigned"] = sorted((tp.topic, tp.partition) for tp in assigned)
            save()

    assignor = {"range": RangePartitionAssignor, "roundrobin": RoundRobinPartitionAssignor}[args.strategy]
    consumer = AIOKafkaConsumer(
        bootstrap_servers=args.bootstrap,
        group_id=args.group,
        group_instance_id=args.instance_id,
        session_timeout_ms=args.session_ms,
        heartbeat_interval_ms=500,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        partition_assignment_strategy=(assignor,),
    )
    consumer.subscribe([args.topic], listener=Listener())
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await consumer.start()
    save()
    try:
        while not stop.is_set():
            batch = await consumer.getmany(timeout_ms=100)
            state["consumed"] += sum(len(v) for v in batch.values())
    finally:
        await consumer.stop()
    state["closed"] = True
    save()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--group", required=True)
    ap.add_argument("--topic", required=True)
    ap.add_argument("--state-file", required=True)
    ap.add_argument("--session-ms", type=int, default=6000)
    ap.add_argument("--strategy", default="roundrobin")
    ap.add_argument("--instance-id")
    asyncio.run(run(ap.parse_args()))


if __name__ == "__main__":
    sys.exit(main())
