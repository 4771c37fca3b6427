"""Consumer groups with kafka-python, kafkajs and aiokafka, and what happens
when clients with no protocol in common meet in one group."""

from conftest import wait_for
from groups import aio_member, departs, js_member, kp_member, rdk_member, stop_all, wait_balanced

import pytest

SIX = [("t6", p) for p in range(6)]


@pytest.fixture
def k(make_kcoord):
    return make_kcoord(topics=["t6:6"], settings=["group.initial_rebalance_delay_ms=500", "metrics.listen=127.0.0.1:0"])


@pytest.mark.parametrize("client", ["kafka-python", "aiokafka"])
def test_python_clients_groups_form_and_rebalance_on_leave_and_session_expiry(k, tmp_path, client):
    member, group = {"kafka-python": (kp_member, "kp-group"), "aiokafka": (aio_member, "aio-group")}[client]
    members = [member(tmp_path, f"{group}-{i}", k, group, "t6") for i in range(3)]
    try:
        wait_balanced(members, SIX)
        causes = k.rebalance_causes(group)
        assert causes[0] == "member_joined", causes
        # A member that closes sends LeaveGroup...
        assert departs(k, group, members[0], members[1:], SIX, "close", timeout=30) == "member_left"
        # ...one killed is removed when its session expires.
        assert departs(k, group, members[1], members[2:], SIX, "kill") == "session_expired"
    finally:
        stop_all(members)


def test_an_aiokafka_static_member_that_stops_and_comes_back_keeps_its_partitions_without_a_rebalance(k, tmp_path):
    # aiokafka's static members send no LeaveGroup when they stop: the group
    # keeps the member until its session expires, and the same instance id
    # coming back in time takes its place and its partitions.
    a = aio_member(tmp_path, "a", k, "aio-static", "t6", instance_id="instance-a", session_ms=10000)
    b = aio_member(tmp_path, "b", k, "aio-static", "t6", instance_id="instance-b", session_ms=10000)
    members = [a, b]
    try:
        wait_balanced(members, SIX)
        before_a, before_b = a.assigned(), b.assigned()
        revocations_b = b.state()["revocations"]
        causes = k.rebalance_causes("aio-static")
        a.close()
        assert a.state().get("closed"), a.log_text()
        a2 = aio_member(tmp_path, "a2", k, "aio-static", "t6", instance_id="instance-a", session_ms=10000)
        members.append(a2)
        wait_for("the returning static member to be assigned", lambda: a2.assigned() == before_a, timeout=30)
        assert b.assigned() == before_b
        assert b.state()["revocations"] == revocations_b, "the other member was not disturbed"
        assert k.rebalance_causes("aio-static") == causes, "the member's return caused no rebalance"
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
