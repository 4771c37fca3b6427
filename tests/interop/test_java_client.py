"""Consumer groups with Apache Kafka's own Java client (kafka-clients 4.3.0):
classic groups with the eager and the cooperative assignors, static members,
KIP-848 groups and an online upgrade between the two, the Admin client's
group calls and their errors, and the same client through a sidecar."""

import subprocess

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from conftest import wait_for
from groups import FAST_848, departs, stop_all, wait_balanced
from java_client import JavaClient, needs_java

pytestmark = needs_java

SIX = [("t6", p) for p in range(6)]


@pytest.fixture
def k(make_kcoord):
    return make_kcoord(topics=["t6:6", "other:2"], settings=FAST_848 + ["metrics.listen=127.0.0.1:0"])


@pytest.fixture
def java(k, java_classpath):
    return JavaClient(java_classpath, k.bootstrap)


def consumed_everything(members, total):
    return sum(m.state().get("consumed", 0) for m in members) >= total


def committed_offsets(java, group):
    return {key: v["offset"] for key, v in java.admin("offsets", group=group)["offsets"].items()}


@pytest.mark.parametrize("strategy", ["range", "cooperative-sticky"])
def test_java_classic_members_consume_commit_and_rebalance_on_leave_and_session_expiry(k, java, tmp_path, strategy):
    group = f"java-{strategy}"
    members = [java.member(tmp_path, f"m{i}", group, "t6", strategy=strategy) for i in range(3)]
    try:
        wait_balanced(members, SIX, timeout=90)
        assert java.produce("t6", 60, partitions=6) == 60
        wait_for("60 records consumed", lambda: consumed_everything(members, 60))
        wait_for("every partition committed at 10",
                 lambda: committed_offsets(java, group) == {f"t6:{p}": 10 for p in range(6)})
        assert k.rebalance_causes(group)[0] == "member_joined"

        # close() sends LeaveGroup: the group rebalances at once.
        assert departs(k, group, members[0], members[1:], SIX, "close", timeout=30) == "member_left"
        assert members[0].state().get("closed"), members[0].log_text()
        # A killed JVM sends nothing: its session (6 s) expires.
        assert departs(k, group, members[1], members[2:], SIX, "kill") == "session_expired"
        assert not any(m.state().get("errors") for m in members[2:]), members[2].state()
    finally:
        stop_all(members)


def test_a_java_static_member_comes_back_without_a_rebalance_and_a_duplicate_is_fenced(k, java, tmp_path):
    group = "java-static"
    a = java.member(tmp_path, "a", group, "t6", instance_id="instance-a", session_ms=15000)
    b = java.member(tmp_path, "b", group, "t6", instance_id="instance-b", session_ms=15000)
    members = [a, b]
    try:
        wait_balanced(members, SIX, timeout=90)
        before_a, before_b = a.assigned(), b.assigned()
        causes = k.rebalance_causes(group)
        # The Java client's static members do not leave the group on close.
        a.close()
        a2 = java.member(tmp_path, "a2", group, "t6", instance_id="instance-a", session_ms=15000)
        members.append(a2)
        wait_for("the returning static member to get its partitions back", lambda: a2.assigned() == before_a, timeout=60)
        assert b.assigned() == before_b
        assert k.rebalance_causes(group) == causes, "the member's return caused no rebalance"

        # A second process with b's instance id takes over; the first is fenced.
        b2 = java.member(tmp_path, "b2", group, "t6", instance_id="instance-b", session_ms=15000)
        members.append(b2)
        wait_for("the old instance-b to be fenced", lambda: b.state().get("fatal") == "FencedInstanceIdException",
                 timeout=60)
        wait_balanced([a2, b2], SIX, timeout=60)
    finally:
        stop_all(members)


def test_java_consumer_protocol_members_share_consume_commit_and_survive_close_and_kill(k, java, tmp_path):
    group = "java-848"
    members = [java.member(tmp_path, f"c{i}", group, "t6", strategy="consumer") for i in range(3)]
    try:
        wait_balanced(members, SIX, timeout=90, even=True)
        assert java.produce("t6", 60, partitions=6) == 60
        wait_for("60 records consumed", lambda: consumed_everything(members, 60))
        wait_for("every partition committed at 10",
                 lambda: committed_offsets(java, group) == {f"t6:{p}": 10 for p in range(6)})
        # kafka-clients 4.3's consumer-protocol consumer commits and fetches
        # by topic id (v10) where the broker offers it.
        seen = {api: k.request_versions(api) for api in ("OffsetCommit", "OffsetFetch")}
        assert 10 in seen["OffsetCommit"] and 10 in seen["OffsetFetch"], seen
        described = java.admin("describe-groups", groups=group)["groups"][group]
        assert (described["type"], described["state"], described["assignor"], len(described["members"])) == (
            "Consumer", "Stable", "uniform", 3), described
        members[0].close()
        wait_balanced(members[1:], SIX, timeout=30, even=True)
        members[1].kill()
        wait_balanced(members[2:], SIX, timeout=60)
        assert not any(m.state().get("fatal") for m in members), [m.state() for m in members]
    finally:
        stop_all(members)


def test_java_consumer_protocol_static_members_come_back_and_a_duplicate_is_refused(k, java, tmp_path):
    group = "java-848-static"
    a = java.member(tmp_path, "a", group, "t6", strategy="consumer", instance_id="instance-a")
    b = java.member(tmp_path, "b", group, "t6", strategy="consumer", instance_id="instance-b")
    members = [a, b]
    try:
        wait_balanced(members, SIX, timeout=90, even=True)
        before_a, before_b = a.assigned(), b.assigned()
        # b may have given partitions up while the group formed; none after.
        revocations_b = b.state()["revocations"]
        # A static member's close is a temporary leave (epoch -2): its
        # partitions wait for it until its session expires.
        a.close()
        a2 = java.member(tmp_path, "a2", group, "t6", strategy="consumer", instance_id="instance-a")
        members.append(a2)
        wait_for("the returning static member to get its partitions back", lambda: a2.assigned() == before_a, timeout=60)
        assert b.assigned() == before_b and b.state()["revocations"] == revocations_b, b.state()
        # While instance-b is live, a second instance-b is refused (KIP-848:
        # UNRELEASED_INSTANCE_ID), and the first keeps its partitions.
        b2 = java.member(tmp_path, "b2", group, "t6", strategy="consumer", instance_id="instance-b")
        members.append(b2)
        wait_for("the duplicate to be refused", lambda: b2.state().get("fatal") == "UnreleasedInstanceIdException",
                 timeout=60)
        assert b.assigned() == before_b and not b.state()["errors"], b.state()
    finally:
        stop_all(members)


def test_java_admin_removes_consumer_protocol_members_by_instance_id_and_all_at_once(k, java, tmp_path):
    # Kafka 4.0+ (KAFKA-18188): removeMembersFromConsumerGroup works on
    # KIP-848 members too. A removed member finds out on its next heartbeat
    # (UNKNOWN_MEMBER_ID), drops its partitions as lost and joins again.
    group = "java-848-remove"
    a = java.member(tmp_path, "a", group, "t6", strategy="consumer", instance_id="instance-a")
    b = java.member(tmp_path, "b", group, "t6", strategy="consumer")
    members = [a, b]
    try:
        wait_balanced(members, SIX, timeout=90, even=True)
        assert java.admin("remove-members", group=group, instances="instance-a")["result"] == "ok"
        wait_for("instance-a to lose its partitions", lambda: a.state()["lost"] >= 1, timeout=60)
        assert b.state()["lost"] == 0, b.state()
        wait_balanced(members, SIX, timeout=60, even=True)
        assert java.admin("remove-members", group=group)["result"] == "ok"
        wait_for("both to lose their partitions", lambda: a.state()["lost"] >= 2 and b.state()["lost"] >= 1,
                 timeout=60)
        wait_balanced(members, SIX, timeout=60, even=True)
        assert not any(m.state().get("fatal") for m in members), [m.state() for m in members]
    finally:
        stop_all(members)


def test_a_java_classic_group_upgrades_online_to_the_consumer_protocol(k, java, tmp_path):
    group = "java-upgrade"
    classic = [java.member(tmp_path, f"old{i}", group, "t6", strategy="cooperative-sticky") for i in range(2)]
    members = list(classic)
    try:
        wait_balanced(classic, SIX, timeout=90)
        assert java.admin("describe-groups", groups=group)["groups"][group]["type"] == "Classic"
        # A consumer-protocol member joins the live classic group: the group
        # becomes a consumer group with the classic members still in it.
        new = java.member(tmp_path, "new0", group, "t6", strategy="consumer")
        members.append(new)
        wait_balanced(members, SIX, timeout=90)
        described = java.admin("describe-groups", groups=group)["groups"][group]
        assert (described["type"], len(described["members"])) == ("Consumer", 3), described
        # The classic members leave; the upgraded group carries on.
        for m in classic:
            m.close()
        wait_balanced([new], SIX, timeout=60)
        assert java.admin("describe-groups", groups=group)["groups"][group]["type"] == "Consumer"
        assert not any(m.state().get("fatal") for m in members), [m.state() for m in members]
    finally:
        stop_all(members)


@pytest.mark.parametrize("strategy,how", [("range", "pattern"), ("consumer", "pattern"), ("consumer", "re2")])
def test_a_java_regex_subscription_picks_up_a_topic_created_later(k, java_classpath, tmp_path, strategy, how):
    # `pattern` is matched by the client against Metadata (refreshed every
    # second here); `re2` is sent to the coordinator, which re-resolves it
    # at most every 10 s against the topics it knows.
    java = JavaClient(java_classpath, k.bootstrap, props={"metadata.max.age.ms": 1000})
    prefix = f"rx{strategy[0]}{how[0]}"
    admin = AdminClient({"bootstrap.servers": k.bootstrap})
    admin.create_topics([NewTopic(f"{prefix}-a", 2, 1)])[f"{prefix}-a"].result(30)
    m = java.member(tmp_path, prefix, f"java-{prefix}", strategy=strategy, **{how: f"{prefix}-.*"})
    try:
        wait_for("the member to get the first topic", lambda: m.assigned() == {(f"{prefix}-a", 0), (f"{prefix}-a", 1)},
                 timeout=60)
        admin.create_topics([NewTopic(f"{prefix}-b", 1, 1)])[f"{prefix}-b"].result(30)
        want = {(f"{prefix}-a", 0), (f"{prefix}-a", 1), (f"{prefix}-b", 0)}
        wait_for("the member to get the new topic too", lambda: m.assigned() == want, timeout=60)
        described = java.admin("describe-groups", groups=f"java-{prefix}")["groups"][f"java-{prefix}"]
        assert described["type"] == ("Consumer" if strategy == "consumer" else "Classic"), described
        assert not m.state().get("fatal"), m.state()
    finally:
        stop_all([m])


def test_java_admin_lists_describes_alters_and_deletes_groups_with_kafkas_errors(k, java, tmp_path):
    member = java.member(tmp_path, "m", "java-admin", "t6")
    try:
        wait_balanced([member], SIX, timeout=90)
        listed = java.admin("list-groups")["groups"]
        assert listed["java-admin"] == {"type": "Classic", "state": "Stable", "protocol": "consumer"}, listed
        assert "java-admin" in java.admin("list-groups", states="Stable")["groups"]
        assert "java-admin" not in java.admin("list-groups", states="Empty")["groups"]
        assert "java-admin" not in java.admin("list-groups", types="consumer")["groups"]

        described = java.admin("describe-groups", groups="java-admin,java-nobody")["groups"]
        assert described["java-nobody"] == {"error": "GroupIdNotFoundException"}, described
        g = described["java-admin"]
        assert (g["state"], g["type"], g["assignor"], g["coordinator"]) == ("Stable", "Classic", "range", 0), g
        (m,) = g["members"]
        assert (m["client_id"], m["host"], sorted(map(tuple, m["assignment"]))) == ("java-m", "/127.0.0.1", SIX), m

        # Kafka's refusals while the group has a live member.
        assert java.admin("delete-groups", groups="java-admin")["groups"] == {"java-admin": "GroupNotEmptyException"}
        assert java.admin("alter-offsets", group="java-admin", offsets="t6:0=5")["result"] == "UnknownMemberIdException"
        assert java.admin("delete-offsets", group="java-admin", partitions="t6:0")["result"] == \
            "GroupSubscribedToTopicException"

        # RemoveMembersFromConsumerGroup without names removes every member;
        # the consumer notices on its next heartbeat and joins again.
        causes = k.rebalance_causes("java-admin")
        assert java.admin("remove-members", group="java-admin")["result"] == "ok"
        assert k.wait_rebalance_after("java-admin", len(causes)) == "member_left", k.rebalance_causes("java-admin")
        wait_for("the removed member to rejoin", lambda: member.state().get("generations", 0) >= 2, timeout=60)
        wait_balanced([member], SIX, timeout=60)
    finally:
        stop_all([member])
    wait_for("the group to be empty", lambda: java.admin("list-groups", states="Empty")["groups"].get("java-admin"))
    assert java.admin("alter-offsets", group="java-admin", offsets="t6:0=5,t6:1=7,other:1=3")["result"] == "ok"
    offsets = java.admin("offsets", group="java-admin")["offsets"]
    assert {key: (v["offset"], v["metadata"]) for key, v in offsets.items()} == {
        "t6:0": (5, "altered"), "t6:1": (7, "altered"), "other:1": (3, "altered")}, offsets
    assert java.admin("delete-offsets", group="java-admin", partitions="other:1")["result"] == "ok"
    assert set(java.admin("offsets", group="java-admin")["offsets"]) == {"t6:0", "t6:1"}
    assert java.admin("delete-groups", groups="java-admin,java-nobody")["groups"] == {
        "java-admin": "ok", "java-nobody": "GroupIdNotFoundException"}
    assert java.admin("describe-groups", groups="java-admin")["groups"]["java-admin"] == {
        "error": "GroupIdNotFoundException"}


def test_a_java_transactional_producer_is_told_at_once_that_standalone_kcoord_has_no_transactions(java):
    # FindCoordinator(TRANSACTION) is refused with a non-retriable error and
    # a message, not COORDINATOR_NOT_AVAILABLE, which the client would retry
    # until max.block.ms (60 s) and then blame on coordinator discovery.
    argv = java.argv("transform", group="java-tx", topic="t6", out="other", txn="java-tx", count=1,
                     **{"prop.max.block.ms": 60000})
    out = subprocess.run(argv, capture_output=True, text=True, timeout=50)
    assert out.returncode != 0
    assert "kcoord does not coordinate transactions" in out.stderr, out.stderr
