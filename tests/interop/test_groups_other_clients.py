"""Consumer groups with kafka-python and kafkajs, and what happens when
clients with no protocol in common meet in one group."""

from conftest import wait_for
from groups import js_member, kp_member, rdk_member, stop_all, wait_balanced

import pytest

SIX = [("t6", p) for p in range(6)]


@pytest.fixture
def k(make_kcoord):
    return make_kcoord(topics=["t6:6"], settings=["group.initial_rebalance_delay_ms=500", "metrics.listen=127.0.0.1:0"])


def test_kafka_python_group_forms_and_rebalances(k, tmp_path):
    members = [kp_member(tmp_path, f"kp{i}", k, "kp-group", "t6") for i in range(3)]
    try:
        wait_balanced(members, SIX)
        causes = k.rebalance_causes("kp-group")
        assert causes[0] == "member_joined", causes
        # A member that closes sends LeaveGroup...
        members[0].close()
        wait_balanced(members[1:], SIX, timeout=30)
        assert k.wait_rebalance_after("kp-group", len(causes)) == "member_left", k.rebalance_causes("kp-group")
        # ...one killed is removed when its session expires.
        causes = k.rebalance_causes("kp-group")
        members[1].kill()
        wait_balanced(members[2:], SIX, timeout=60)
        assert k.wait_rebalance_after("kp-group", len(causes)) == "session_expired", k.rebalance_causes("kp-group")
    finally:
        stop_all(members)


def test_kafkajs_group_forms_and_rebalances(k, tmp_path):
    members = [js_member(tmp_path, f"js{i}", k, "js-group", "t6") for i in range(2)]
    try:
        wait_balanced(members, SIX)
        causes = k.rebalance_causes("js-group")
        assert causes[0] == "member_joined", causes
        members[0].close()
        wait_balanced(members[1:], SIX, timeout=30)
        assert k.wait_rebalance_after("js-group", len(causes)) == "member_left", k.rebalance_causes("js-group")
    finally:
        stop_all(members)


def test_kafkajs_and_librdkafka_members_share_no_protocol(k, tmp_path):
    rdk = rdk_member(tmp_path, "rdk", k, "mixed", "t6")
    members = [rdk]
    try:
        wait_for("the librdkafka member to own everything", lambda: rdk.assigned() == set(SIX), timeout=30)
        js = js_member(tmp_path, "js", k, "mixed", "t6")
        members.append(js)
        # kafkajs offers only "RoundRobinAssigner": INCONSISTENT_GROUP_PROTOCOL.
        wait_for(
            "kafkajs to be refused",
            lambda: "INCONSISTENT_GROUP_PROTOCOL" in " ".join(js.state().get("errors", [])) or "INCONSISTENT_GROUP_PROTOCOL" in js.log_text(),
            timeout=60,
        )
        assert rdk.assigned() == set(SIX), "the librdkafka member is unaffected"
    finally:
        stop_all(members)
