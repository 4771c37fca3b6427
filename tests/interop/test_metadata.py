"""Bootstrap and Metadata with every stock client."""

import subprocess

from confluent_kafka.admin import AdminClient

from conftest import kcat_path, needs_kcat, node_script


@needs_kcat
def test_kcat_lists_the_broker_as_controller_and_the_topics(kcoord):
    out = subprocess.run([kcat_path(), "-b", kcoord.bootstrap, "-L"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert f"broker 0 at {kcoord.bootstrap} (controller)" in out.stdout
    assert 'topic "orders" with 6 partitions:' in out.stdout
    assert 'topic "t1" with 4 partitions:' in out.stdout
    assert "partition 5, leader 0, replicas: 0, isrs: 0" in out.stdout


def test_confluent_admin_lists_topics(kcoord):
    admin = AdminClient({"bootstrap.servers": kcoord.bootstrap})
    md = admin.list_topics(timeout=30)
    assert md.controller_id == 0
    assert {b.id: (b.host, b.port) for b in md.brokers.values()} == {0: (kcoord.host, kcoord.port)}
    assert len(md.topics["orders"].partitions) == 6
    assert len(md.topics["t1"].partitions) == 4
    assert md.cluster_id and len(md.cluster_id) == 22


def test_kafka_python_bootstraps_with_api_versions_v4(kcoord):
    from kafka import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=kcoord.bootstrap, request_timeout_ms=30000)
    try:
        assert set(admin.list_topics()) >= {"orders", "t1"}
        cluster = admin.describe_cluster()
        assert cluster["controller_id"] == 0
        assert [(b["broker_id"], b["host"], b["port"]) for b in cluster["brokers"]] == [(0, kcoord.host, kcoord.port)]
        # kafka-python infers a broker version from our ApiVersions answer; it
        # must be new enough for idempotent producers (>= 0.11).
        assert admin._client.check_version() >= (0, 11)
    finally:
        admin.close()


def test_kafkajs_fetches_topic_metadata(kcoord):
    out = node_script("metadata", kcoord.bootstrap)
    topics = {t["name"]: len(t["partitions"]) for t in out["topics"]}
    assert topics["orders"] == 6 and topics["t1"] == 4
    assert out["brokers"] == [{"nodeId": 0, "host": kcoord.host, "port": kcoord.port}]
    assert out["controller"] == 0
