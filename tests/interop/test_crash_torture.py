"""The crash torture's checker (torture_checks.py) and a quick run of the
torture itself (torture.py; the long run is scripts/crash-torture)."""

import pytest

from torture import Torture, parse_args
from torture_checks import CommitOp, check_commit, check_messages, parse_events

KEY = ("g", 0)


def test_events_pair_each_answer_with_its_attempt_and_skip_a_torn_last_line():
    events = parse_events([
        "A 1 g 0 5\n", "A 1 g 1 7\n", "C 2 g 0 5\n", "F 2 g 1 7\n",
        "A 3 g 0 9\n",                      # in flight at the kill
        "J 3 g 3\n", "M 4 2 10 p/1-0\n", "M 5 2 11 p/1-1\n", "M 6 2 1",
    ])
    assert events.commits[("g", 0)] == [CommitOp(5, 1, 2, True), CommitOp(9, 3)]
    assert events.commits[("g", 1)] == [CommitOp(7, 1, 2, False)]
    assert events.commits_acked == 1 and events.assignments == 1
    assert events.messages == {(2, 10): "p/1-0", (2, 11): "p/1-1"}


def test_two_acknowledged_values_for_one_offset_are_a_conflict():
    events = parse_events(["M 1 0 3 a\n", "M 2 0 3 b\n"])
    assert events.conflicts and "'a' and 'b'" in events.conflicts[0]


def test_the_committed_offset_must_equal_the_last_acknowledged_when_nothing_else_was_in_flight():
    ops = [CommitOp(5, 1, 2, True), CommitOp(8, 3, 4, True)]
    verdict = check_commit(KEY, ops, baseline=None, fetched=8)
    assert verdict.exact and verdict.loss is None
    assert "commit lost" in check_commit(KEY, ops, None, fetched=5).loss
    assert "commit lost" in check_commit(KEY, ops, None, fetched=None).loss
    assert "commit changed" in check_commit(KEY, ops, None, fetched=9).loss


def test_a_commit_in_flight_or_failed_after_the_last_acknowledged_one_may_have_been_applied():
    ops = [CommitOp(5, 1, 2, True), CommitOp(7, 3, 4, False), CommitOp(9, 5)]
    for fetched in (5, 7, 9):
        verdict = check_commit(KEY, ops, None, fetched)
        assert not verdict.exact and verdict.loss is None, fetched
    # A failed commit finished before the acknowledged one was sent cannot be last.
    assert "changed" in check_commit(KEY, [CommitOp(9, 1, 2, False), CommitOp(5, 3, 4, True)], None, 9).loss


def test_without_a_commit_this_cycle_the_previous_cycles_offset_must_survive():
    assert check_commit(KEY, [], baseline=42, fetched=42).exact
    assert "lost" in check_commit(KEY, [], baseline=42, fetched=None).loss
    assert check_commit(KEY, [], baseline=None, fetched=None).loss is None
    # Only unanswered commits this cycle: the old offset or one of theirs.
    assert check_commit(KEY, [CommitOp(50, 1)], baseline=42, fetched=50).loss is None
    assert check_commit(KEY, [CommitOp(50, 1)], baseline=42, fetched=42).loss is None


def test_messages_must_be_read_back_with_their_acknowledged_values():
    acked = {(0, 0): "a", (0, 1): "b", (1, 0): "c"}
    assert check_messages(acked, dict(acked), {0: 2, 1: 1}) == []
    losses = check_messages(acked, {(0, 0): "a", (1, 0): "x"}, {0: 1, 1: 1})
    assert losses == ["message lost: partition 0 offset 1 value 'b' (high watermark 1)",
                      "message changed: partition 1 offset 0 acknowledged 'c', read 'x'"]


def run_torture(tmp_path, *extra):
    torture = Torture(parse_args(["--cycles", "2", "--seconds", "1.5", "--seed", "7", "--work-dir",
                                  str(tmp_path / "torture"), *extra]))
    return torture.run(), torture


@pytest.mark.timeout(120)
def test_two_sigkill_cycles_under_real_clients_lose_nothing_acknowledged(tmp_path):
    code, torture = run_torture(tmp_path)
    assert torture.losses == [] and code == 0
    assert torture.totals["messages acknowledged"] > 0


@pytest.mark.timeout(120)
def test_the_torture_reports_the_losses_of_a_wiped_data_dir(tmp_path):
    code, torture = run_torture(tmp_path, "--wipe-before-restart", "2")
    assert code == 1
    assert any("commit lost" in loss for loss in torture.losses), torture.losses[:5]
    assert any("message lost" in loss for loss in torture.losses), torture.losses[:5]
