"""The failure budget and compensation from ledgers written as runs write them."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from swarm_cli.actions import ACTIONS
from swarm_cli.ledger import REACHED_CODE, LedgerWriter
from swarm_cli.report import Pair, Report
from swarm_cli.saga import (
    UNDONE_LATER,
    SagaError,
    UndoPlan,
    parse_budget,
    undo_plan,
    undo_report,
)

EAST, WEST, ACCOUNT = "us-east-1", "eu-west-1", "210987654321"


@pytest.mark.parametrize(
    ("text", "total", "budget"),
    [
        ("10", 1000, 10),
        ("1", 0, 1),
        ("0", 100, 0),  # stop at the first failure
        (" 7 ", 3, 7),  # a count may exceed the run: it then never stops it
        ("5%", 200, 10),  # exactly 10, not 11 from 10.000000000000002 rounded up
        ("5%", 201, 11),
        ("5%", 10, 1),  # rounded up
        ("5%", 0, 0),
        ("0.5%", 1000, 5),
        ("100%", 37, 37),
    ],
)
def test_parse_budget(text: str, total: int, budget: int) -> None:
    assert parse_budget(text, total) == budget


@pytest.mark.parametrize("text", ["-1", "101%", "x", "", "%", "5 %", "1.5", "1e2", "nan%", "10%%"])
def test_parse_budget_refuses(text: str) -> None:
    with pytest.raises(ValueError) as info:
        parse_budget(text, 100)
    message = str(info.value)
    assert "\n" not in message
    assert repr(text) in message


def write_run(
    path: Path,
    run: str,
    action: str,
    outcomes: Sequence[tuple[str, str]],
    *,
    region: str = EAST,
    account: str | None = None,
    reached: Sequence[str] = (),
    undoes: str | None = None,
    waits: str | None = None,
    unseen: Sequence[tuple[str, str]] = (),
) -> None:
    """A run as run_job records it: intents ahead, then outcomes, then --wait's records.
    An outcome "killed" writes none (the run was killed with its call in flight);
    ``undoes`` makes it the rollback of that run; ``waits`` a run that was to --wait,
    whose wait left ``unseen`` (ID, code) pending."""
    writer = LedgerWriter(str(path), run, action, region, account, waits=waits)
    note = None if undoes is None else f"undo of run {undoes}"
    writer.write_ahead([i for i, _ in outcomes], message=note)
    for instance_id, status in outcomes:
        if status == "killed":
            continue
        writer.write(instance_id, status, code=None if status == "succeeded" else "SomeError")
    for instance_id in reached:
        writer.write(instance_id, "succeeded", code=REACHED_CODE, reached="2024-01-01T00:00:00Z")
    for instance_id, code in unseen:
        writer.write(instance_id, "pending", code=code)
    assert writer.close() == []


def test_the_only_reversible_run_is_undone_by_its_opposite(tmp_path: Path) -> None:
    ledger = tmp_path / "l.jsonl"
    write_run(ledger, "r2", "start", [("i-2", "succeeded"), ("i-3", "failed"), ("i-4", "pending")])
    write_run(ledger, "r3", "terminate", [("i-5", "succeeded")])  # later, but not reversible
    write_run(ledger, "r4", "reboot", [("i-6", "succeeded")])

    plan = undo_plan([str(ledger)])

    assert plan == UndoPlan("r2", ACTIONS["stop"], {Pair(None, EAST): ["i-2"]})
    assert plan.total == 1


def test_several_reversible_runs_are_listed_not_guessed(tmp_path: Path) -> None:
    ledger = tmp_path / "l.jsonl"
    write_run(ledger, "r1", "stop", [("i-1", "succeeded")])
    write_run(ledger, "r2", "stop", [("i-2", "succeeded"), ("i-3", "succeeded")])

    with pytest.raises(SagaError, match=r"2 runs .* r1 \(stop, 1 to start.*r2 \(stop, 2 to start"):
        undo_plan([str(ledger)])
    # The shards of one job are undone together by naming them.
    plan = undo_plan([str(ledger)], run=["r1", "r2"])
    assert plan.groups == {Pair(None, EAST): ["i-1", "i-2", "i-3"]}


def test_runs_with_nothing_left_to_undo_are_named_apart(tmp_path: Path) -> None:
    """A stop, a start and a stop of the same instances: only the last has anything to
    undo (the others were undone by the runs after them): the ledger's undo is its,
    without --run. An earlier run alone with something left is named as the one to pass,
    the others as having nothing left: the latest is what a user means by the undo."""
    ledger = tmp_path / "l.jsonl"
    both = [("i-1", "succeeded"), ("i-2", "succeeded")]
    write_run(ledger, "r1", "stop", both)
    write_run(ledger, "r2", "start", both)
    write_run(ledger, "r3", "stop", both)

    plan = undo_plan([str(ledger)])
    assert plan.run == "r3" and plan.groups == {Pair(None, EAST): ["i-1", "i-2"]}
    assert undo_plan([str(ledger)], run="r3").groups == plan.groups
    write_run(ledger, "r4", "start", [("i-3", "failed")])  # it changed nothing

    with pytest.raises(SagaError) as info:
        undo_plan([str(ledger)])

    message = str(info.value)
    assert message.startswith("one run in ")
    assert "r3 (stop, 2 to start" in message
    assert "r1 (undone by later runs), r2 (undone by later runs), r4 (it changed nothing)" in (
        message
    )
    assert message.endswith("pass --run r3")
    for run in ("r1", "r2"):
        with pytest.raises(SagaError, match="undone by later runs"):
            undo_plan([str(ledger)], run=run)


def test_a_rollback_cut_short_then_finished_leaves_nothing_to_undo(tmp_path: Path) -> None:
    """A rollback stopped midway, then finished by another: two runs with something to
    undo, both the undo of the first. The ledger's undo is done; undoing them would stop
    what they started again."""
    ledger = tmp_path / "l.jsonl"
    three = ["i-1", "i-2", "i-3"]
    write_run(ledger, "r1", "stop", [(i, "succeeded") for i in three])
    write_run(
        ledger,
        "r2",
        "start",
        [("i-1", "succeeded"), ("i-2", "succeeded"), ("i-3", "failed")],
        undoes="r1",
    )
    write_run(ledger, "r3", "start", [("i-3", "succeeded")], undoes="r1")

    with pytest.raises(SagaError) as info:
        undo_plan([str(ledger)])

    assert info.value.why == UNDONE_LATER
    assert "runs r2, r3 in " in str(info.value)
    assert "are the rollbacks of run r1, which they undid" in str(info.value)
    assert str(info.value).endswith("(to undo those rollbacks, pass --run r2 --run r3)")
    # Named, each is still undone as asked.
    assert undo_plan([str(ledger)], run=["r2", "r3"]).groups == {Pair(None, EAST): three}


def test_a_rollback_killed_midway_is_named_with_the_way_to_finish_it(tmp_path: Path) -> None:
    ledger = tmp_path / "l.jsonl"
    three = ["i-1", "i-2", "i-3"]
    write_run(ledger, "r1", "stop", [(i, "succeeded") for i in three])
    write_run(
        ledger,
        "r2",
        "start",
        [("i-1", "succeeded"), ("i-2", "killed"), ("i-3", "killed")],
        undoes="r1",
    )

    with pytest.raises(SagaError) as info:
        undo_plan([str(ledger)])

    message = str(info.value)
    assert "r2 (start, 1 to stop, 2 pending to look up" in message
    assert ", the rollback of run r1)" in message
    assert "to finish the rollback of run r1, pass --run r1 (" in message
    finish = undo_plan([str(ledger)], run="r1", allow_empty=True)
    assert finish.groups == {Pair(None, EAST): ["i-2", "i-3"]}


def _stop_then_undo_waited(ledger: Path, **undo: object) -> None:
    """r1 stops i-1, i-2 and i-3; r2, its rollback with --wait, started them all: its
    wait saw i-1 arrive, timed out on i-2, could not look at i-3."""
    three = [("i-1", "succeeded"), ("i-2", "succeeded"), ("i-3", "succeeded")]
    write_run(ledger, "r1", "stop", three)
    args: dict[str, object] = {
        "undoes": "r1",
        "waits": "running",
        "reached": ["i-1"],
        "unseen": [("i-2", "WaitTimeout"), ("i-3", "NotChecked")],
    }
    args.update(undo)
    write_run(ledger, "r2", "start", three, **args)  # type: ignore[arg-type]


def test_what_a_rollbacks_wait_did_not_see_is_still_to_undo(tmp_path: Path) -> None:
    ledger = tmp_path / "l.jsonl"
    _stop_then_undo_waited(ledger)
    assert undo_plan([str(ledger)], run="r1").groups == {Pair(None, EAST): ["i-2", "i-3"]}
    with pytest.raises(SagaError) as info:
        undo_plan([str(ledger)])
    assert "to finish the rollback of run r1, pass --run r1 (" in str(info.value)


def test_a_rollback_ended_before_its_wait_leaves_its_instances_to_undo(tmp_path: Path) -> None:
    ledger = tmp_path / "l.jsonl"
    _stop_then_undo_waited(ledger, reached=[], unseen=[])  # killed before its wait said a word
    assert undo_plan([str(ledger)], run="r1").total == 3


def test_a_later_run_not_a_rollback_keeps_what_it_undid_waited_or_not(tmp_path: Path) -> None:
    ledger = tmp_path / "l.jsonl"
    _stop_then_undo_waited(ledger, undoes=None)  # a swarm start --wait of its own
    with pytest.raises(SagaError) as info:
        undo_plan([str(ledger)], run="r1")
    assert info.value.why == UNDONE_LATER


@pytest.mark.parametrize("after", ["stop", "rollback"])
def test_what_a_run_did_after_an_unseen_rollback_stands(tmp_path: Path, after: str) -> None:
    """A stop on purpose after the rollback, or the rollback of that rollback: what they
    stopped is theirs; finishing the first undo does not start it again."""
    ledger = tmp_path / "l.jsonl"
    _stop_then_undo_waited(ledger)
    undoes = "r2" if after == "rollback" else None
    stopped = [("i-2", "succeeded"), ("i-3", "succeeded")]
    write_run(ledger, "r3", "stop", stopped, undoes=undoes, reached=["i-2", "i-3"])
    with pytest.raises(SagaError) as info:
        undo_plan([str(ledger)], run="r1")
    assert info.value.why == UNDONE_LATER


@pytest.mark.parametrize(
    "then",
    ["finish timed out again", "finish refused", "stop refused", "tagged", "stop never sent"],
)
def test_what_changed_nothing_since_leaves_the_unseen_to_undo(tmp_path: Path, then: str) -> None:
    """Another try at finishing that did not see them either (or was refused), a stop EC2
    refused, a run that changes no state, a run killed before it sent anything: none of
    them made the instances what they are; the undo is still not done."""
    ledger = tmp_path / "l.jsonl"
    _stop_then_undo_waited(ledger)
    two = [("i-2", "succeeded"), ("i-3", "succeeded")]
    if then == "finish timed out again":
        unseen = [("i-2", "WaitTimeout"), ("i-3", "WaitTimeout")]
        write_run(ledger, "r3", "start", two, undoes="r1", waits="running", unseen=unseen)
    elif then == "finish refused":
        write_run(ledger, "r3", "start", [("i-2", "failed"), ("i-3", "failed")], undoes="r1")
    elif then == "stop refused":
        write_run(ledger, "r3", "stop", [("i-2", "failed"), ("i-3", "failed")])
    elif then == "tagged":
        write_run(ledger, "r3", "create-tags", two)
    else:
        writer = LedgerWriter(str(ledger), "r3", "stop", EAST)
        writer.write_ahead(["i-2", "i-3"])
        for i in ("i-2", "i-3"):  # stopped in order before its calls left
            writer.write(i, "pending", code="NotSent", attempts=0)
        assert writer.close() == []
    assert undo_plan([str(ledger)], run="r1").groups == {Pair(None, EAST): ["i-2", "i-3"]}


def test_unfinished_rollbacks_of_two_actions_are_finished_one_by_one(tmp_path: Path) -> None:
    ledger = tmp_path / "l.jsonl"
    write_run(ledger, "a1", "stop", [("i-1", "succeeded"), ("i-2", "succeeded")])
    write_run(ledger, "b1", "start", [("i-1", "succeeded"), ("i-2", "killed")], undoes="a1")
    write_run(ledger, "a2", "start", [("i-3", "succeeded"), ("i-4", "succeeded")])
    write_run(ledger, "b2", "stop", [("i-3", "succeeded"), ("i-4", "killed")], undoes="a2")
    with pytest.raises(SagaError) as info:
        undo_plan([str(ledger)])
    assert "to finish the rollback of run a1, pass --run a1; of run a2, pass --run a2 (" in str(
        info.value
    )


def test_no_run_left_to_undo_says_so(tmp_path: Path) -> None:
    ledger = tmp_path / "l.jsonl"
    write_run(ledger, "r1", "stop", [("i-1", "succeeded")])
    write_run(ledger, "r2", "stop", [("i-2", "succeeded")])
    write_run(ledger, "r3", "terminate", [("i-1", "succeeded"), ("i-2", "succeeded")])

    with pytest.raises(SagaError, match=r"none of .* r1 \(terminated since\), r2 \(terminated"):
        undo_plan([str(ledger)])


def test_a_named_run_is_undone_whatever_came_later(tmp_path: Path) -> None:
    ledger = tmp_path / "l.jsonl"
    write_run(ledger, "r1", "stop", [("i-1", "succeeded"), ("i-2", "succeeded")])
    write_run(ledger, "r2", "start", [("i-3", "succeeded")])

    plan = undo_plan([str(ledger)], run="r1")

    assert plan.action is ACTIONS["start"]
    assert plan.groups == {Pair(None, EAST): ["i-1", "i-2"]}


def test_instances_are_grouped_by_their_records_pairs_in_ledger_order(tmp_path: Path) -> None:
    east, west = tmp_path / "east.jsonl", tmp_path / "west.jsonl"
    # One run over two pairs, sharded into two ledgers; --wait added Reached records.
    write_run(east, "r1", "stop", [("i-b", "succeeded"), ("i-a", "succeeded")], reached=["i-b"])
    write_run(
        west,
        "r1",
        "stop",
        [("i-d", "succeeded"), ("i-c", "missing"), ("i-e", "succeeded")],
        region=WEST,
        account=ACCOUNT,
        reached=["i-e", "i-d"],
    )

    plan = undo_plan([str(east), str(west)])

    assert plan.groups == {
        Pair(None, EAST): ["i-b", "i-a"],
        Pair(ACCOUNT, WEST): ["i-d", "i-e"],
    }
    # A ledger passed twice (or merged with its own input) lists nothing twice.
    assert undo_plan([str(east), str(east), str(west)]).groups == plan.groups


def test_an_instance_whose_last_record_is_reached_is_undone_too(tmp_path: Path) -> None:
    ledger = tmp_path / "l.jsonl"
    writer = LedgerWriter(str(ledger), "r1", "stop", EAST)
    writer.write("i-1", "succeeded", code=REACHED_CODE)  # all a merge may keep of it
    writer.close()

    assert undo_plan([str(ledger)]).groups == {Pair(None, EAST): ["i-1"]}


@pytest.mark.parametrize("action", ["terminate", "reboot"])
def test_an_irreversible_run_cannot_be_undone(tmp_path: Path, action: str) -> None:
    ledger = tmp_path / "l.jsonl"
    write_run(ledger, "r1", action, [("i-1", "succeeded")])

    with pytest.raises(SagaError) as named:
        undo_plan([str(ledger)], run="r1")
    assert (
        str(named.value) == f"run r1: {action} cannot be undone: no action of EC2's takes it back"
    )
    with pytest.raises(SagaError, match="no run of a reversible action"):
        undo_plan([str(ledger)])


def test_errors_name_the_missing_run_and_the_empty_one(tmp_path: Path) -> None:
    ledger = tmp_path / "l.jsonl"
    write_run(ledger, "r1", "stop", [("i-1", "failed"), ("i-2", "pending")])

    with pytest.raises(SagaError, match="no run nope in"):
        undo_plan([str(ledger)], run="nope")
    with pytest.raises(SagaError, match=r"run r1 \(stop\) changed nothing: nothing to undo"):
        undo_plan([str(ledger)])
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    with pytest.raises(SagaError, match="no run of a reversible action"):
        undo_plan([str(empty)])


def test_a_report_without_a_ledger_can_be_undone_too() -> None:
    done = {Pair(None, EAST): ["i-1", "i-2"], Pair(ACCOUNT, WEST): []}
    report = Report(run="r9", action="start", done=done)

    plan = undo_report(report)

    assert plan == UndoPlan("r9", ACTIONS["stop"], {Pair(None, EAST): ["i-1", "i-2"]})
    with pytest.raises(SagaError, match="terminate cannot be undone"):
        undo_report(Report(run="r9", action="terminate", done=done))
    with pytest.raises(SagaError, match="nothing to undo"):
        undo_report(Report(run="r9", action="stop"))


def test_the_list_of_runs_counts_what_a_killed_run_leaves_to_look_up(tmp_path: Path) -> None:
    ledger = tmp_path / "l.jsonl"
    ids = ["i-1", "i-2"]
    killed = LedgerWriter(str(ledger), "r1", "stop", EAST)
    killed.write_ahead(ids)  # a kill -9 before any outcome
    assert killed.close() == []
    resumed = LedgerWriter(str(ledger), "r2", "stop", EAST)
    for i in ids:
        resumed.write(i, "succeeded", code="AlreadyInState", message="stopped; not sent")
    assert resumed.close() == []

    with pytest.raises(SagaError) as info:
        undo_plan([str(ledger)])

    message = str(info.value)
    assert "r1 (stop, 2 pending to look up, last at " in message
    assert "nothing left to undo in r2 (it changed nothing)" in message
    assert message.endswith("pass --run r1")
