"""One sidecar process fronting a whole cluster whose brokers change: a
broker that joins the upstream gets a listener of its own, and clients
produce to and consume from the partitions it leads through it; a broker
that leaves keeps its listener and stays listed in Metadata (librdkafka
>= 2.10 forgets unlisted brokers), and no upstream address ever reaches a
client."""

import pytest
from confluent_kafka import Consumer
from confluent_kafka.admin import AdminClient

import rawkafka
from conftest import wait_for
from sidecar_harness import MockCluster, Sidecar, Stats
from test_sidecar import CONSUMER, consume, produce, show_logs_on_failure  # noqa: F401

TOPIC = "joins"


@pytest.fixture
def mock(tmp_path):
    m = MockCluster(tmp_path / "mock", brokers=2, topics=[f"{TOPIC}:2:2"]).start()
    yield m
    m.stop()


def sidecar_metadata(addr):
    with rawkafka.Conn(addr) as c:
        md, body = rawkafka.metadata(c, 9)
    return md, body


def test_a_broker_joining_the_upstream_is_fronted_and_one_leaving_stays_listed(mock, tmp_path):
    s = Sidecar(tmp_path / "sidecar", mock.bootstrap, settings=["sidecar.metadata_refresh_ms=200"]).start()
    try:
        assert len(s.listeners) == 2
        mock.cmd("add", 3)

        def upstream_brokers():
            with rawkafka.Conn(mock.addresses[1]) as c:
                return rawkafka.metadata(c, 9, strict=False)[0]["brokers"]

        upstream = upstream_brokers()
        assert sorted(upstream) == [1, 2, 3], upstream
        mock_ports = {int(a.rsplit(":", 1)[1]) for a in upstream.values()}
        md = wait_for("node 3 in the sidecar's Metadata",
                      lambda: (m := sidecar_metadata(s.listeners[0])[0]) and 3 in m["brokers"] and m, timeout=60)
        new = md["brokers"][3]
        host, port = new.rsplit(":", 1)
        assert host == s.host and new not in s.listeners and int(port) not in mock_ports, (new, s.listeners)
        nodes = {1: s.listeners[0], 2: s.listeners[1], 3: new}
        assert md["brokers"] == nodes
        # The new listener answers like the others.
        assert sidecar_metadata(new)[0]["brokers"] == nodes

        # Broker 3 leads partition 1: clients reach it through its listener.
        mock.set_leader(TOPIC, 1, 3)
        wait_for("partition 1 led by 3 through the sidecar",
                 lambda: sidecar_metadata(new)[0]["topics"][TOPIC]["partitions"][1]["leader"] == 3, timeout=30)
        keys = produce(s.bootstrap, TOPIC, 40, "j", partitions=2)
        stats = Stats()
        c = Consumer({"bootstrap.servers": s.bootstrap, "group.id": "joins-g", **CONSUMER,
                      "statistics.interval.ms": 500, "stats_cb": stats})
        c.subscribe([TOPIC])
        try:
            got = consume(c, 40)
            wait_for("statistics", lambda: c.poll(0.2) is None and stats.count > 1, timeout=30)
        finally:
            c.close()
        assert sorted(k for _, _, k in got) == sorted(keys)
        assert {p for p, _, _ in got} == {0, 1}
        assert new in stats.broker_addresses() and stats.broker_addresses() <= set(nodes.values())

        # Broker 3 leaves the upstream: its node stays listed, at the same address.
        mock.cmd("decommission", 3)

        wait_for("broker 3 gone from the upstream's Metadata", lambda: 3 not in upstream_brokers(), timeout=30)
        def answered(addr):
            try:
                return sidecar_metadata(addr)
            except ConnectionError:
                # A link still open to the departed broker closes, as the
                # broker's own connection would; clients reconnect.
                return None

        for addr in nodes.values():
            md, body = wait_for(f"Metadata through {addr}", lambda: answered(addr), timeout=30)
            assert md["brokers"] == nodes, (addr, md["brokers"])
            body = body.replace(md["cluster_id"].encode(), b"")
            assert [p for p in mock_ports if rawkafka.mentions_port(body, p)] == [], f"{addr} mentions a mock port"
        admin = AdminClient({"bootstrap.servers": new})
        listed = admin.list_topics(TOPIC, timeout=30)
        assert {b.id: f"{b.host}:{b.port}" for b in listed.brokers.values()} == nodes
        # The mock spreads the partitions over the brokers left.
        assert {p.leader for p in listed.topics[TOPIC].partitions.values()} <= {1, 2}
    finally:
        code = s.stop()
    assert code == 0, f"sidecar exited with {code}; log:\n{s.log_tail()}"
