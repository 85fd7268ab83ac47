"""Every action, every region and account, and shards, end to end through the CLI against
the sandbox over real HTTP."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from test_cli import swarm, terminate_json, write_ids

from swarm_cli.ledger import fold, read_records
from swarm_cli.sandbox import BucketSpec, Sandbox, SandboxConfig

OPEN = SandboxConfig(BucketSpec(10_000, 10_000), BucketSpec(100_000, 100_000))
ACCOUNTS = ("111111111111", "222222222222")
REGIONS = ("us-east-1", "eu-west-1", "ap-southeast-2")


def act(box: Sandbox, action: str, ids_file: str, ledger: Path, *extra: str) -> tuple[int, Any]:
    return terminate_json(box, ids_file, ledger, *extra, action=action)


def states(box: Sandbox, ids: Sequence[str], region: str = "us-east-1") -> set[str]:
    return set(box.states(ids, region=region).values())


@pytest.mark.parametrize(
    ("action", "before", "after"),
    [
        ("stop", "running", "stopped"),
        ("start", "stopped", "running"),
        ("reboot", "running", "running"),
        ("terminate", "running", "terminated"),
    ],
)
def test_each_action_moves_120_instances_to_its_state_and_waits_for_it(
    tmp_path: Path, action: str, before: str, after: str
) -> None:
    with Sandbox(OPEN) as box:
        ids = box.launch(120)
        if before == "stopped":
            box.client().stop_instances(InstanceIds=ids)
        assert states(box, ids) == {before}
        ledger = tmp_path / "l.jsonl"
        code, report = act(
            box,
            action,
            write_ids(tmp_path / "ids.txt", ids),
            ledger,
            "--batch-size",
            "25",
            "--wait",
        )
        assert states(box, ids) == {after}
        assert box.counters.accepted_by_action.get(f"{action.capitalize()}Instances") == 120
    assert code == 0, report
    assert report["action"] == action and report["counts"]["succeeded"] == 120
    assert report["wait"]["reached"] == 120
    reached = [r for r in read_records(str(ledger)) if r.code == "Reached"]
    assert {r.id for r in reached} == set(ids) and all(r.action == action for r in reached)


def test_a_reboot_of_terminated_instances_is_not_sent_and_not_a_success(tmp_path: Path) -> None:
    # EC2 answers a reboot of a terminated instance with success and does nothing: a
    # success recorded for it would say it was rebooted.
    with Sandbox(OPEN) as box:
        ids = box.launch(12)
        gone = ids[::3]
        box.client().terminate_instances(InstanceIds=gone)
        ledger = tmp_path / "l.jsonl"
        listed = write_ids(tmp_path / "ids.txt", ids)
        planned, out, _ = swarm(
            "plan", "reboot", "--ids", listed, "--endpoint-url", box.endpoint, "-o", "json"
        )
        plan = json.loads(out)
        assert planned == 1 and plan["would_fail"] == len(gone)  # as the run will: exit 1
        before = box.counters.accepted_by_action.get("RebootInstances", 0)  # its DryRun
        code, report = act(box, "reboot", listed, ledger)
        sent = box.counters.accepted_by_action.get("RebootInstances", 0) - before
    assert code == 1, report
    assert sent == len(ids) - len(gone)
    assert report["counts"]["succeeded"] == len(ids) - len(gone)
    assert report["counts"]["failed"] == len(gone)
    state = fold(read_records(str(ledger)))
    assert {i for (_, i), r in state.items() if r.status == "succeeded"} == set(ids) - set(gone)
    assert {i for (_, i), r in state.items() if r.code == "Ignored"} == set(gone)
    left, out, _ = swarm("ledger", "failed", "--retryable", str(ledger))
    assert left == 0 and out.split() == []


def test_a_reboot_whose_look_up_cannot_read_sends_all_and_says_so(tmp_path: Path) -> None:
    # Denied, the look-up gives up at once (throttled all along, once no answer has read
    # anything for its patience: tests/test_ec2.py): the reboots go as they did before
    # any look-up, and the run says they went unchecked.
    with Sandbox(OPEN) as box:
        ids = box.launch(6)
        box.client().terminate_instances(InstanceIds=ids[:2])
        box.fail_action("DescribeInstances", 403, "UnauthorizedOperation", "no")
        ledger = tmp_path / "l.jsonl"
        result = subprocess.run(
            [sys.executable, "-m", "swarm_cli", "reboot", "--ids",
             write_ids(tmp_path / "ids.txt", ids), "--endpoint-url", box.endpoint, "--yes",
             "--ledger", str(ledger), "--max-outage", "2", "--progress", "none", "--output",
             "json", "--report", str(tmp_path / "r.html")],
            capture_output=True, text=True, timeout=120, check=False,
            env={**os.environ, "AWS_ACCESS_KEY_ID": "x", "AWS_SECRET_ACCESS_KEY": "x",
                 "AWS_REGION": "us-east-1", "GITHUB_STEP_SUMMARY": str(tmp_path / "s.md")},
        )  # fmt: skip
        sent = box.counters.accepted_by_action.get("RebootInstances")
    assert result.returncode == 0, result.stderr
    assert sent == len(ids)
    warned = " ".join(result.stderr.split())
    assert "6 instance(s) could not be looked up in us-east-1" in warned, warned
    assert "(UnauthorizedOperation" in warned and "sent unchecked" in warned
    assert json.loads(result.stdout)["look_up_unchecked"] == 6  # a script sees it too
    assert "**Unchecked:** 6 instance(s) could not be looked up" in (tmp_path / "s.md").read_text()
    assert "unchecked: 6 instance(s) could not be looked up" in (tmp_path / "r.html").read_text()


def test_a_reboot_looks_up_even_with_no_patience_for_outages(tmp_path: Path) -> None:
    # --max-outage 0 gives up on an endpoint at once; the look-up still asks once.
    with Sandbox(OPEN) as box:
        ids = box.launch(4)
        box.client().terminate_instances(InstanceIds=ids[:1])
        code, report = act(
            box, "reboot", write_ids(tmp_path / "ids.txt", ids), tmp_path / "l.jsonl",
            "--max-outage", "0",
        )  # fmt: skip
    assert code == 1 and report["counts"] == {
        "succeeded": 3, "failed": 1, "missing": 0, "pending": 0
    }, report  # fmt: skip
    assert "look_up_unchecked" not in report


def test_a_stop_whose_error_budget_is_spent_rolls_back_to_all_running(tmp_path: Path) -> None:
    with Sandbox(OPEN) as box:
        ids = box.launch(60, stop_protected=6)
        ids = ids[6:] + ids[:6]  # the protected ones last: most are stopped before the budget goes
        ledger = tmp_path / "l.jsonl"
        code, report = act(
            box,
            "stop",
            write_ids(tmp_path / "ids.txt", ids),
            ledger,
            "--batch-size",
            "5",
            "--max-errors",
            "3",
            "--rollback",
            "--wait",  # for the undo's state: the run's is undone
        )
        assert states(box, ids) == {"running"}
    assert code == 1
    assert "wait" not in report
    assert report["stopped"]["code"] == "MaxErrors"
    assert report["counts"]["failed"] >= 3
    undone = report["rollback"]
    # What it stopped, and those in flight when the budget stopped it that did stop
    # (looked up first): as many or more, however the calls fell on a busy machine.
    assert undone["action"] == "start"
    assert undone["counts"]["succeeded"] >= report["counts"]["succeeded"]
    assert (
        undone["counts"]["succeeded"] <= report["counts"]["succeeded"] + report["counts"]["pending"]
    )
    actions = {r.action for r in read_records(str(ledger))}
    assert actions == {"stop", "start"}
    # Waited for: the undo's instances back running, none of the run's stopped.
    assert undone["wait"]["reached"] == undone["counts"]["succeeded"]
    waits = [r for r in read_records(str(ledger)) if r.code in ("WaitTimeout", "Reached")]
    assert {r.action for r in waits} == {"start"} and len(waits) == undone["counts"]["succeeded"]


def test_a_rollback_after_a_run_rolled_back_has_nothing_left_to_undo(tmp_path: Path) -> None:
    """`swarm rollback LEDGER` after a run whose --rollback undid it took that undo (a
    start) for the latest run and undid it: the fleet stopped again, exit 0. A rollback
    says on its intents which run it undoes, and the ledger's rollback finds nothing left."""
    with Sandbox(OPEN) as box:
        ids = box.launch(12, stop_protected=2)
        ids = ids[2:] + ids[:2]
        ledger = tmp_path / "l.jsonl"
        listed = write_ids(tmp_path / "ids.txt", ids)
        code, report = act(
            box, "stop", listed, ledger, "--batch-size", "1", "--max-errors", "0", "--rollback"
        )
        assert code == 1 and report["rollback"]["action"] == "start"
        assert states(box, ids) == {"running"}
        records = read_records(str(ledger))
        undo = [r for r in records if r.action == "start" and r.status == "pending" and not r.code]
        assert undo and {r.message for r in undo} == {f"undo of run {report['run']}"}
        code, out, err = swarm(
            "rollback", str(ledger), "--yes", "--output", "json", "--endpoint-url", box.endpoint
        )
        assert code == 0, err
        assert json.loads(out)["nothing_to_undo"]
        assert f"rollback of run {report['run']}" in " ".join(err.split())
        assert states(box, ids) == {"running"}
        # The same after `swarm rollback` itself: a second one has nothing left.
        stopped = tmp_path / "s.jsonl"
        assert act(box, "stop", write_ids(tmp_path / "few.txt", ids[:4]), stopped)[0] == 0
        base = ("--yes", "--output", "json", "--endpoint-url", box.endpoint)
        assert swarm("rollback", str(stopped), *base)[0] == 0
        assert states(box, ids[:4]) == {"running"}
        code, out, err = swarm("rollback", str(stopped), *base)
        assert code == 0 and json.loads(out)["nothing_to_undo"], err
        assert states(box, ids[:4]) == {"running"}


@pytest.mark.parametrize("action", ["stop", "start"])
def test_a_wait_asks_for_many_instances_in_one_call(tmp_path: Path, action: str) -> None:
    """DescribeInstances spends no instance token: the wait's calls carry up to 200 IDs,
    whatever size the action's calls start at (a start's is 1, its bucket is small)."""
    with Sandbox(replace(SLOW, transition_seconds=3.0)) as box:
        ids = box.launch(50)
        if action == "start":
            box.client().stop_instances(InstanceIds=ids)
            deadline = time.monotonic() + 30
            while states(box, ids) != {"stopped"}:
                assert time.monotonic() < deadline
                time.sleep(0.1)
        ledger = tmp_path / "l.jsonl"
        asked = box.calls_by("DescribeInstances")
        code, out, err = swarm(
            *(action, "--ids", write_ids(tmp_path / "ids.txt", ids), "--yes", "--wait"),
            *("--endpoint-url", box.endpoint, "--ledger", str(ledger), "-o", "json"),
            *("--progress", "plain"),
        )
        polls = box.calls_by("DescribeInstances") - asked
    report = json.loads(out)
    assert code == 0 and report["wait"]["reached"] == 50, report
    # What the calls did is said before the wait (which a kill may cut short).
    target = "stopped" if action == "stop" else "running"
    said = f"{action}: 50 of 50 succeeded in "
    assert said in err and f"; --wait: until they are {target} (at most 600s)" in err, err
    assert err.index(said) < err.index(f"wait for {target}: "), err
    # A poll every 2 s over a 3 s transition, a call each (not one per instance).
    assert polls <= 10, polls


def test_a_wait_run_rolled_back_keeps_what_it_never_changed_done(tmp_path: Path) -> None:
    """stop --wait --rollback: the undo leaves the instances that were stopped already,
    and the wait does not come. Their successes read done, not a wait cut short."""
    with Sandbox(OPEN) as box:
        before = box.launch(3)
        box.client().stop_instances(InstanceIds=before)
        movable, protected = box.launch(6), box.launch(2, stop_protected=2)
        ledger = tmp_path / "l.jsonl"
        code, report = act(
            box,
            "stop",
            write_ids(tmp_path / "ids.txt", [*before, *movable, *protected]),
            ledger,
            *("--batch-size", "1", "--max-window", "1", "--max-errors", "0"),
            *("--rollback", "--wait"),
        )
        assert states(box, movable) == {"running"} and states(box, before) == {"stopped"}
    assert code == 1 and report["rollback"]["counts"]["succeeded"] == 6, report
    code, out, err = swarm("ledger", "failed", str(ledger), "--action", "stop")
    assert code == 0, err
    assert set(out.split()) == {*movable, *protected}, "undone or refused: left; the rest done"
    assert "NotChecked" not in err


def test_a_rollback_leaves_alone_what_the_run_never_changed(tmp_path: Path) -> None:
    """Every instance was stopped before the run. Two IDs that do not exist spend the
    budget, each refusing the batch it travels in (EC2 checks a call before it acts):
    the run changed nothing, so its undo starts nothing, whatever its intents' attempts
    say (a refused batch, a throttle, counts an attempt)."""
    with Sandbox(OPEN) as box:
        ids = box.launch(30)
        box.client().stop_instances(InstanceIds=ids)
        unknown = ["i-0123456789abcdef0", "i-0123456789abcdef1"]
        listed = [ids[0], unknown[0], *ids[1:10], unknown[1], *ids[10:]]
        ledger = tmp_path / "l.jsonl"
        code, report = act(
            box,
            "stop",
            write_ids(tmp_path / "ids.txt", listed),
            ledger,
            *("--batch-size", "10", "--max-errors", "1", "--rollback"),
        )
        assert states(box, ids) == {"stopped"}
        assert box.counters.accepted_by_action.get("StartInstances") is None
    assert code == 1
    assert report["stopped"]["code"] == "MaxErrors"
    pending = [r for r in read_records(str(ledger)) if r.code == "MaxErrors"]
    assert pending and any(r.attempts for r in pending)  # refused in a batch, or throttled
    assert "rollback" not in report  # nothing undone: no undo ran


def test_swarm_rollback_undoes_a_stop_later_from_its_ledger(tmp_path: Path) -> None:
    with Sandbox(OPEN) as box:
        ids = box.launch(40)
        ledger = tmp_path / "l.jsonl"
        assert act(box, "stop", write_ids(tmp_path / "ids.txt", ids), ledger)[0] == 0
        assert states(box, ids) == {"stopped"}
        code, out, err = swarm(
            "rollback", str(ledger), "--endpoint-url", box.endpoint, "--yes", "--output", "json"
        )
        assert code == 0, err
        assert json.loads(out)["action"] == "start"
        assert states(box, ids) == {"running"}
    code, _, err = swarm("rollback", str(tmp_path / "nope.jsonl"), "--yes")
    assert code == 2 and "cannot read the ledger" in err


# Instances stop and start as EC2's do: "stopping" (or "pending") for a while first.
SLOW = SandboxConfig(
    BucketSpec(10_000, 10_000), BucketSpec(100_000, 100_000), transition_seconds=2.0
)


def test_a_rollback_right_after_a_stop_waits_for_the_instances_to_be_stopped(
    tmp_path: Path,
) -> None:
    # EC2 starts no instance still stopping (IncorrectInstanceState): an undo sent at once
    # failed every start, and called them failures no retry would mend.
    with Sandbox(SLOW) as box:
        ids = box.launch(12)
        ledger = tmp_path / "l.jsonl"
        assert act(box, "stop", write_ids(tmp_path / "ids.txt", ids), ledger)[0] == 0
        assert states(box, ids) == {"stopping"}
        code, out, err = swarm(
            "rollback", str(ledger), "--endpoint-url", box.endpoint, "--yes", "--output", "json"
        )
        assert code == 0, err
        assert "12 instance(s) still stopping: waiting up to 600 s until they are stopped" in err
        assert json.loads(out)["counts"]["succeeded"] == 12
        assert states(box, ids) <= {"pending", "running"}


def test_a_rollback_right_after_a_start_waits_for_the_instances_to_run(tmp_path: Path) -> None:
    # EC2 stops no instance still pending.
    with Sandbox(replace(SLOW, transition_seconds=1.0)) as box:
        ids = box.launch(6)
        box.client().stop_instances(InstanceIds=ids)
        deadline = time.monotonic() + 30
        while states(box, ids) != {"stopped"} and time.monotonic() < deadline:
            time.sleep(0.05)
        ledger = tmp_path / "l.jsonl"
        assert act(box, "start", write_ids(tmp_path / "ids.txt", ids), ledger)[0] == 0
        assert states(box, ids) == {"pending"}
        code, out, err = swarm(
            "rollback", str(ledger), "--endpoint-url", box.endpoint, "--yes", "--output", "json"
        )
        assert code == 0, err
        assert "6 instance(s) still pending: waiting up to 600 s until they are running" in err
        assert json.loads(out)["counts"]["succeeded"] == 6
        assert states(box, ids) <= {"stopping", "stopped"}


def test_instances_someone_else_was_stopping_are_left_alone_by_the_rollback(
    tmp_path: Path,
) -> None:
    # EC2 answers a stop of an instance stopping with PreviousState stopping: the call
    # changed nothing, as for one stopped already. The undo started all six.
    with Sandbox(replace(SLOW, transition_seconds=1.0)) as box:
        ids = box.launch(6)
        box.client().stop_instances(InstanceIds=ids[:3])  # someone else's, under way
        ledger = tmp_path / "l.jsonl"
        code, report = act(box, "stop", write_ids(tmp_path / "ids.txt", ids), ledger)
        assert code == 0, report
        was = {r.id for r in read_records(str(ledger)) if r.code == "WasAlready"}
        assert was == set(ids[:3])
        code, out, err = swarm(
            "rollback", str(ledger), "--endpoint-url", box.endpoint, "--yes", "--output", "json"
        )
        assert code == 0, err
        assert json.loads(out)["counts"]["succeeded"] == 3
        assert states(box, ids[:3]) <= {"stopping", "stopped"}
        assert states(box, ids[3:]) <= {"pending", "running"}


def test_a_stop_rolled_back_in_the_run_waits_for_what_it_stopped_and_has_no_budget(
    tmp_path: Path,
) -> None:
    with Sandbox(SLOW) as box:
        ids = box.launch(30, stop_protected=3)
        ids = ids[3:] + ids[:3]  # the protected ones last
        ledger = tmp_path / "l.jsonl"
        code, report = act(
            box,
            "stop",
            write_ids(tmp_path / "ids.txt", ids),
            ledger,
            "--batch-size",
            "3",
            "--max-errors",
            "0",
            "--rollback",
        )
        assert states(box, ids) <= {"pending", "running"}
    assert code == 1 and report["stopped"]["code"] == "MaxErrors"
    undone = report["rollback"]
    assert undone["counts"]["failed"] == 0 and undone["counts"]["pending"] == 0, undone
    assert undone["counts"]["succeeded"] >= report["counts"]["succeeded"] > 0


def test_a_rollback_whose_wait_ran_out_says_so_before_ec2_refuses(tmp_path: Path) -> None:
    with Sandbox(replace(SLOW, transition_seconds=60)) as box:
        ids = box.launch(4)
        ledger = tmp_path / "l.jsonl"
        assert act(box, "stop", write_ids(tmp_path / "ids.txt", ids), ledger)[0] == 0
        code, out, err = swarm(
            "rollback", str(ledger), "--endpoint-url", box.endpoint, "--yes", "--output", "json",
            "--wait-timeout", "0",
        )  # fmt: skip
    assert code == 1, err
    assert (
        "rollback: 4 of them not stopped after 0 s (--wait-timeout): start them all the same; "
        "EC2 refuses those still stopping (IncorrectInstanceState)"
    ) in " ".join(err.split())
    assert json.loads(out)["counts"]["failed"] == 4


def test_a_start_right_after_a_stop_says_how_to_send_those_refused_once_stopped(
    tmp_path: Path,
) -> None:
    with Sandbox(replace(SLOW, transition_seconds=1.0)) as box:
        ids = box.launch(5)
        ledger = tmp_path / "l.jsonl"
        listed = write_ids(tmp_path / "ids.txt", ids)
        assert act(box, "stop", listed, ledger)[0] == 0
        code, out, err = swarm(
            "start", "--ids", listed, "--endpoint-url", box.endpoint, "--ledger", str(ledger),
            "--yes", "--progress", "none",
        )  # fmt: skip
        assert code == 1
        flat = " ".join((out + err).split())
        said = (
            "5 refused while stopping: once they are stopped, swarm ledger failed --retryable "
            f"--action start {ledger}"
        )
        assert said in flat, err
        # Refused only while on their way: no failure for good, so a retry list keeps them.
        latest = fold(read_records(str(ledger)))
        assert {r.code for r in latest.values() if r.action == "start"} == {"InTransition"}
        code, retryable, _ = swarm(
            "ledger", "failed", "--retryable", "--action", "start", str(ledger)
        )
        assert sorted(retryable.split()) == sorted(ids)
        assert "failed permanently" not in flat
        command = flat[
            flat.index(said) + len("5 refused while stopping: once they are stopped, ") :
        ]
        first, second = command.split(" && ")
        deadline = time.monotonic() + 30
        while states(box, ids) != {"stopped"} and time.monotonic() < deadline:
            time.sleep(0.05)
        listing, into = first.split(" >")
        code, left, _ = swarm(*listing.split()[1:])
        assert sorted(left.split()) == sorted(ids), code
        Path(into).write_text(left)
        code, _, err = swarm(*second.split()[1:], "--progress", "none")
        assert code == 0, err
        assert states(box, ids) <= {"pending", "running"}


def test_a_refusal_while_stopping_is_no_failure_for_good_even_once_stopped(
    tmp_path: Path,
) -> None:
    # The look-up comes after the run: a long run finds its first refusals stopped by
    # then, and recorded them as failures a retry would repeat. Those still stopping,
    # and those stopped since, are InTransition; a terminated one stays a failure.
    from rich.console import Console

    from swarm_cli.actions import ACTIONS as SPECS
    from swarm_cli.cli.follow_up import on_their_way
    from swarm_cli.cli.options import Flags, Output
    from swarm_cli.cli.reach import Reach
    from swarm_cli.report import Pair, Problem, Report
    from swarm_cli.run import Job, RunOptions

    with Sandbox(replace(SLOW, transition_seconds=60)) as box:
        from swarm_cli.sandbox.config import ACCOUNT
        from swarm_cli.sandbox.moto_backend import _set_states_in_moto

        stopping, stopped, gone = box.launch(2), box.launch(2), box.launch(1)
        client = box.client()
        client.stop_instances(InstanceIds=[*stopping, *stopped])
        client.terminate_instances(InstanceIds=gone)
        _set_states_in_moto(ACCOUNT, "us-east-1", stopped, "stopped", 80)  # there by now
        ids = [*stopping, *stopped, *gone]
        pair = Pair(None, "us-east-1")
        refused = "The instance is not in a state from which it can be started."
        report = Report(
            "r1",
            "start",
            problems=[
                Problem(i, "failed", "IncorrectInstanceState", refused, "us-east-1") for i in ids
            ],
        )
        flags = Flags(
            ids=None, region="us-east-1", profile=None, endpoint_url=box.endpoint,
            ledger=None, resume=False, yes=True, dry_run=False, sandbox=False, params={},
            options=RunOptions(), output=Output.text,
        )  # fmt: skip
        reach = Reach(flags, {}, 10)
        reach.connect({pair: ids}, Console(stderr=True))
        job = Job(SPECS["start"], {pair: ids}, RunOptions())
        on_their_way(SPECS["start"], job, report, reach, Console(stderr=True))
    codes = {p.id: p.code for p in report.problems}
    assert codes == {
        **dict.fromkeys(stopping + stopped, "InTransition"),
        gone[0]: "IncorrectInstanceState",
    }


def _stopped_then_two_started(box: Sandbox, ids: list[str]) -> None:
    """Once ``ids`` are stopped, someone starts the first two again (and they run)."""
    deadline = time.monotonic() + 30
    while states(box, ids) != {"stopped"} and time.monotonic() < deadline:
        time.sleep(0.1)
    box.client().start_instances(InstanceIds=ids[:2])
    while states(box, ids[:2]) != {"running"} and time.monotonic() < deadline:
        time.sleep(0.1)


def test_a_resume_that_waits_sees_to_what_no_wait_saw_arrive(tmp_path: Path) -> None:
    # A run without --wait (or killed while waiting) left its stops accepted, not seen
    # stopped; meanwhile someone started two again. `--resume --wait` said "nothing to
    # do" and neither looked nor waited: the ledger and the gate said all stopped.
    with Sandbox(SLOW) as box:
        ids = box.launch(10)
        ledger = tmp_path / "l.jsonl"
        listed = write_ids(tmp_path / "ids.txt", ids)
        assert act(box, "stop", listed, ledger)[0] == 0
        _stopped_then_two_started(box, ids)
        before = box.calls_by("StopInstances")
        code, report = act(box, "stop", listed, ledger, "--resume", "--wait")
        assert states(box, ids) == {"stopped"}
        assert box.calls_by("StopInstances") > before  # the two started again, and no more
    assert code == 0, report
    assert report["counts"]["succeeded"] == 10 and report["wait"]["reached"] == 10
    latest = fold(read_records(str(ledger)))
    assert {r.code for r in latest.values()} == {"Reached"}
    resumed = [r for r in read_records(str(ledger)) if r.run == report["run"]]
    assert {r.id for r in resumed if r.status == "succeeded" and r.code is None} == set(ids[:2])
    assert {r.id for r in resumed if r.code == "AlreadyInState"} == set(ids[2:])


def test_a_resume_that_waits_sees_to_what_a_repeat_found_on_its_way(tmp_path: Path) -> None:
    # A stop without --wait, then its repeat while they were stopping: EC2 answered the
    # repeat "previous state stopping", recorded WasAlready. Someone started two again
    # since. `--resume --wait` said "10 already stopped", nothing to do, exit 0.
    with Sandbox(SLOW) as box:
        ids = box.launch(10)
        ledger = tmp_path / "l.jsonl"
        listed = write_ids(tmp_path / "ids.txt", ids)
        assert act(box, "stop", listed, ledger)[0] == 0
        assert act(box, "stop", listed, ledger)[0] == 0
        assert {r.code for r in fold(read_records(str(ledger))).values()} == {"WasAlready"}
        _stopped_then_two_started(box, ids)
        code, report = act(box, "stop", listed, ledger, "--resume", "--wait")
        assert states(box, ids) == {"stopped"}
    assert code == 0, report
    assert report["wait"]["reached"] == 10
    assert {r.code for r in fold(read_records(str(ledger))).values()} == {"Reached"}


def accounts_file(tmp_path: Path, *extra: str) -> Path:
    path = tmp_path / "accounts.yml"
    lines = ["accounts:"]
    for account in ACCOUNTS:
        lines += [f'  - account_id: "{account}"', f"    role: arn:aws:iam::{account}:role/swarm"]
    path.write_text("\n".join([*lines, *extra]) + "\n")
    return path


def mixed_list(
    box: Sandbox, tmp_path: Path, per_pair: int
) -> tuple[Path, dict[tuple[str, str], list[str]]]:
    launched: dict[tuple[str, str], list[str]] = {}
    rows = ["instance_id,region,account"]
    for account in ACCOUNTS:
        for region in REGIONS:
            ids = box.launch(per_pair, region=region, account=account)
            launched[(account, region)] = ids
            rows += [f"{i},{region},{account}" for i in ids]
    path = tmp_path / "mixed.csv"
    path.write_text("\n".join(rows) + "\n")
    return path, launched


def test_a_shard_is_the_one_swarm_shards_lists_whatever_exclude_ids_leaves_out(
    tmp_path: Path,
) -> None:
    # The matrix knows nothing of --exclude-ids: each job's shard must still be the
    # matrix's (its pairs, its count), the exclusions then taken out of it.
    accounts = accounts_file(tmp_path)
    with Sandbox() as box:
        ids_file, launched = mixed_list(box, tmp_path, per_pair=2)
        biggest = next(iter(launched))
        extra = box.launch(6, region=biggest[1], account=biggest[0])
        with ids_file.open("a") as handle:
            handle.writelines(f"{i},{biggest[1]},{biggest[0]}\n" for i in extra)
        excluded = write_ids(tmp_path / "exclude.txt", [*launched[biggest], *extra])
        code, out, err = swarm(
            "shards", "--accounts", str(accounts), "--ids", str(ids_file), "--n", "2"
        )
        assert code == 0, err
        for job in json.loads(out)["include"]:
            code, out, err = swarm(
                "plan", "terminate", "--ids", str(ids_file), "--accounts", str(accounts),
                "--shard", job["shard"], "--exclude-ids", excluded,
                "--endpoint-url", box.endpoint, "--output", "json",
            )  # fmt: skip
            assert code == 0, err
            pairs, instances = len(job["pairs"]), job["instances"]
            assert f"{pairs} of {len(launched)} account/region pair(s), {instances} of" in err
            mine = "/".join(biggest) in job["pairs"]
            assert json.loads(out)["total"] == instances - (8 if mine else 0)


@pytest.mark.slow
def test_a_mixed_list_of_three_regions_and_two_accounts_terminates_everything(
    tmp_path: Path,
) -> None:
    config = SandboxConfig(BucketSpec(5, 40), BucketSpec(100_000, 100_000), latency=0.01)
    with Sandbox(config) as box:
        ids_file, launched = mixed_list(box, tmp_path, per_pair=40)
        code, report = act(
            box,
            "terminate",
            str(ids_file),
            tmp_path / "l.jsonl",
            "--accounts",
            str(accounts_file(tmp_path)),
            "--batch-size",
            "1",
        )
        for (account, region), ids in launched.items():
            assert set(box.states(ids, region=region, account=account).values()) == {"terminated"}
            # Each pair had a bucket of its own, and its own share of the calls.
            assert box.calls_by("TerminateInstances", account=account, region=region) >= 40
    assert code == 0
    rows = {(p["account"], p["region"]): p for p in report["pairs"]}
    assert set(rows) == set(launched)
    assert all(p["counts"]["succeeded"] == 40 and p["window"]["peak"] > 1 for p in rows.values())
    on_disk = fold(read_records(str(tmp_path / "l.jsonl")))
    assert {(r.account, r.region) for r in on_disk.values()} == set(launched)


def test_one_account_that_cannot_be_reached_stops_only_its_own_pairs(tmp_path: Path) -> None:
    with Sandbox(OPEN) as box:
        ids_file, launched = mixed_list(box, tmp_path, per_pair=3)
        # An account with no role: the caller's own credentials are another account's.
        path = accounts_file(tmp_path)
        text = path.read_text().replace("    role: arn:aws:iam::222222222222:role/swarm\n", "")
        path.write_text(text)
        code, report = act(
            box, "terminate", str(ids_file), tmp_path / "l.jsonl", "--accounts", str(path)
        )
        reached = {
            key: set(box.states(ids, region=key[1], account=key[0]).values())
            for key, ids in launched.items()
        }
    assert code == 4
    for (account, _), seen in reached.items():
        assert seen == ({"terminated"} if account == ACCOUNTS[0] else {"running"})
    rows = {(p["account"], p["region"]): p for p in report["pairs"]}
    assert all(rows[(ACCOUNTS[1], r)]["counts"]["pending"] == 3 for r in REGIONS)
    assert all(rows[(ACCOUNTS[1], r)]["calls"] == 0 for r in REGIONS), "they sent nothing"
    assert all(rows[(ACCOUNTS[0], r)]["counts"]["succeeded"] == 3 for r in REGIONS)


@pytest.mark.slow
def test_two_shards_as_two_processes_then_merged_equal_the_whole_run(tmp_path: Path) -> None:
    config = SandboxConfig(BucketSpec(20, 100), BucketSpec(100_000, 100_000))
    accounts = accounts_file(tmp_path)
    with Sandbox(config) as box:
        ids_file, launched = mixed_list(box, tmp_path, per_pair=10)
        code, out, _ = swarm(
            "shards", "--accounts", str(accounts), "--ids", str(ids_file), "--n", "2"
        )
        assert code == 0
        matrix = json.loads(out)["include"]
        assert [m["shard"] for m in matrix] == ["1/2", "2/2"]
        assert sorted(p for m in matrix for p in m["pairs"]) == sorted(
            f"{a}/{r}" for a, r in launched
        )
        procs = [
            subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "swarm_cli",
                    "terminate",
                    "--ids",
                    str(ids_file),
                    "--accounts",
                    str(accounts),
                    "--shard",
                    shard,
                    "--endpoint-url",
                    box.endpoint,
                    "--ledger",
                    str(tmp_path / f"shard{k}.jsonl"),
                    "--yes",
                    "--progress",
                    "none",
                ],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for k, shard in enumerate(("1/2", "2/2"))
        ]
        for proc in procs:
            _, err = proc.communicate(timeout=120)
            assert proc.returncode == 0, err
        merged = tmp_path / "merged.jsonl"
        code, _, err = swarm(
            "ledger",
            "merge",
            str(tmp_path / "shard0.jsonl"),
            str(tmp_path / "shard1.jsonl"),
            "-o",
            str(merged),
        )
        assert code == 0, err
        for (account, region), ids in launched.items():
            assert set(box.states(ids, region=region, account=account).values()) == {"terminated"}
        # A shard resumed once all its instances are done: its pairs are there, and done.
        code, _, err = swarm(
            "terminate", "--ids", str(ids_file), "--accounts", str(accounts), "--shard", "1/2",
            "--endpoint-url", box.endpoint, "--ledger", str(tmp_path / "shard0.jsonl"),
            "--resume", "--yes", "--progress", "none",
        )  # fmt: skip
        assert code == 0, err
        assert "not known terminated" in err and "nothing to do" in err
        assert "holds no instance of" not in err
    # The unsharded run, on a fresh sandbox holding the same instances, ends the same.
    with Sandbox(config) as box:
        for (account, region), ids in launched.items():
            box.load_ids(ids, region=region, account=account)
        code, _ = act(
            box, "terminate", str(ids_file), tmp_path / "whole.jsonl", "--accounts", str(accounts)
        )
        assert code == 0

    def final(path: Path) -> dict[str, tuple[str, str | None, str | None]]:
        return {
            k[1]: (r.status, r.account, r.region) for k, r in fold(read_records(str(path))).items()
        }

    assert final(merged) == final(tmp_path / "whole.jsonl")
    assert {s for s, _, _ in final(merged).values()} == {"succeeded"}


def test_shards_prints_a_matrix_from_an_accounts_file(tmp_path: Path) -> None:
    path = accounts_file(tmp_path, "    regions: [us-east-1, eu-west-1]")
    code, out, err = swarm("shards", "--accounts", str(path), "--n", "3", "--region", "us-east-1")
    assert code == 0, err
    include = json.loads(out)["include"]
    assert len(include) == 3
    pairs = sorted(p for m in include for p in m["pairs"])
    assert pairs == sorted(
        ["111111111111/us-east-1", "222222222222/us-east-1", "222222222222/eu-west-1"]
    )
    # No ID list: nothing counts instances, and no job claims a number of them.
    assert all("instances" not in m for m in include)


def test_an_instance_the_wait_did_not_see_arrive_is_not_done_in_the_ledger(
    tmp_path: Path,
) -> None:
    """A start accepted whose instance the wait never saw running (it fell back to
    stopped, or the wait ran out): ledger failed lists it, and --resume looks it up
    and starts it again instead of taking the ledger's word."""
    with Sandbox(OPEN) as box:
        ids = box.launch(4)
        box.client().stop_instances(InstanceIds=ids)
        ids_file = write_ids(tmp_path / "ids.txt", ids)
        ledger = tmp_path / "l.jsonl"
        code, report = act(box, "start", ids_file, ledger, "--wait", "--wait-timeout", "0")
        assert code == 1 and report["wait"]["timed_out"] == 4
        _, out, _ = swarm("ledger", "failed", "--action", "start", str(ledger))
        assert sorted(out.split()) == sorted(ids)
        last = {r.id: r for r in read_records(str(ledger))}
        assert {(r.status, r.code) for r in last.values()} == {("pending", "WaitTimeout")}
        # Behind swarm's back the starts did not hold: two are stopped again.
        box.client().stop_instances(InstanceIds=ids[:2])
        code, report = act(box, "start", ids_file, ledger, "--resume")
        assert code == 0, report
        assert states(box, ids) == {"running"}
        assert box.calls_by("StartInstances") >= 2  # the two were sent again
        _, out, _ = swarm("ledger", "failed", "--action", "start", str(ledger))
        assert out == ""


def test_the_step_summary_and_the_report_list_what_the_wait_did_not_see_arrive(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Accepted calls whose instances no wait saw get there are pending in the ledger:
    the step summary and the HTML report say so in their title and list them among what
    is not done, where they read "4 of 4 succeeded" and listed nothing."""
    summary, html = tmp_path / "summary.md", tmp_path / "report.html"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    with Sandbox(OPEN) as box:
        ids = box.launch(4)
        box.client().stop_instances(InstanceIds=ids)
        ids_file = write_ids(tmp_path / "ids.txt", ids)
        code, report = act(
            box, "start", ids_file, tmp_path / "l.jsonl",
            "--wait", "--wait-timeout", "0", "--report", str(html),
        )  # fmt: skip
    assert code == 1 and report["wait"]["timed_out"] == 4
    text = summary.read_text()
    title = text.splitlines()[0]
    assert "4 of 4 succeeded, 4 not seen running" in title, title
    assert "| not seen running (--wait) | 4 |" in text
    assert "### Not done (4)" in text
    rows = [line for line in text.splitlines() if "WaitTimeout" in line]
    assert sorted(line.split("|")[1].strip() for line in rows) == sorted(ids)
    page = html.read_text()
    assert "4 not seen running" in page and "not seen running (--wait)" in page
    assert "Instances not done (4)" in page
    assert all(i in page for i in ids) and "WaitTimeout" in page


def test_rollback_leaves_alone_what_the_run_found_already_in_its_state(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """EC2's answer says which instances a stop found stopped already (PreviousState):
    the run changed nothing of them, and undoing it must not start them."""
    with Sandbox(OPEN) as box:
        ids = box.launch(8)
        box.client().stop_instances(InstanceIds=ids[:3])
        ledger = tmp_path / "l.jsonl"
        code, report = act(box, "stop", write_ids(tmp_path / "ids.txt", ids), ledger)
        assert code == 0 and report["counts"]["succeeded"] == 8
        assert report["unchanged"] == 3  # said, not hidden among the successes
        codes = {r.id: r.code for r in read_records(str(ledger)) if r.status == "succeeded"}
        assert {codes[i] for i in ids[:3]} == {"WasAlready"}
        assert {codes[i] for i in ids[3:]} == {None}
        code, out, err = swarm(
            "rollback", str(ledger), "--endpoint-url", box.endpoint, "--yes", "--output", "json"
        )
        assert code == 0, err
        assert json.loads(out)["total"] == 5
        assert box.states(ids) == {
            **dict.fromkeys(ids[:3], "stopped"),
            **dict.fromkeys(ids[3:], "running"),
        }
        # Stopped again, the summaries say which calls changed nothing.
        step = tmp_path / "step.md"
        monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(step))
        code, out, err = swarm(
            "stop", "--ids", write_ids(tmp_path / "all.txt", ids), "--yes", "--ledger",
            str(tmp_path / "again.jsonl"), "--endpoint-url", box.endpoint, "--progress", "none",
            "--report", str(tmp_path / "r.html"),
        )  # fmt: skip
        for page in (step.read_text(), (tmp_path / "r.html").read_text()):
            text = re.sub(r"<[^>]+>", " ", page)  # the report's cells, as words
            assert re.search(r"succeeded without a change \(there already\)\W+3\b", text), page
        said = " ".join(out.split())
        assert code == 0 and "stop: 8 of 8 succeeded" in said, out + err
        assert "3 of those were stopped (or on their way) already: their calls changed" in said


def test_rollback_of_a_run_killed_while_writing_its_intents_sends_nothing(tmp_path: Path) -> None:
    """A block cut short means the run sent nothing: its pending intents are nobody's
    doing, even those whose instances are in its end state."""
    from swarm_cli.ledger import LedgerWriter

    with Sandbox(OPEN) as box:
        ids = box.launch(6)
        box.client().stop_instances(InstanceIds=ids[:2])  # stopped before, by someone else
        ledger = tmp_path / "l.jsonl"
        writer = LedgerWriter(str(ledger), "run-a", "stop", "us-east-1")
        writer.write_ahead(ids[:4], run_intents=6)  # the kill came before the rest
        writer.close()
        code, _, err = swarm("rollback", str(ledger), "--endpoint-url", box.endpoint, "--yes")
        # As it was before the run already: the rollback's job is done.
        assert code == 0 and "changed nothing: nothing to undo" in err, err
        assert box.states(ids[:2]) == dict.fromkeys(ids[:2], "stopped")
        assert box.calls_by("StartInstances") == 0


def test_rollback_of_a_run_that_changed_nothing_passes_and_says_so(tmp_path: Path) -> None:
    """A CI step that rolls back after a failed run: the run found every instance stopped
    already, so there is nothing to undo, and the step passes (exit 0) saying so, in its
    JSON too. A run whose instances were terminated since cannot be undone: refused."""
    with Sandbox(OPEN) as box:
        ids = box.launch(4)
        box.client().stop_instances(InstanceIds=ids)
        ledger = tmp_path / "l.jsonl"
        assert act(box, "stop", write_ids(tmp_path / "ids.txt", ids), ledger)[0] == 0
        code, out, err = swarm(
            "rollback", str(ledger), "--endpoint-url", box.endpoint, "--yes", "--output", "json"
        )
        assert code == 0, err
        said = json.loads(out)
        assert said["exit_code"] == 0 and "changed nothing" in said["nothing_to_undo"], said
        assert box.calls_by("StartInstances") == 0
        assert box.states(ids) == dict.fromkeys(ids, "stopped")

        other = box.launch(2)
        gone = tmp_path / "gone.jsonl"
        assert act(box, "stop", write_ids(tmp_path / "o.txt", other), gone)[0] == 0
        assert act(box, "terminate", write_ids(tmp_path / "o.txt", other), gone)[0] == 0
        # Lines of the ledger that cannot be read may have held what the run changed: its
        # intent and its success for the one instance it stopped. "Nothing to undo" would
        # be a guess: refused, saying why.
        moved = box.launch(1)
        damaged = tmp_path / "damaged.jsonl"
        listed = write_ids(tmp_path / "d.txt", [*ids[:2], *moved])
        assert act(box, "stop", listed, damaged)[0] == 0
        text = damaged.read_text().splitlines(keepends=True)
        damaged.write_text(
            "".join("{garbage" + line if moved[0] in line else line for line in text)
        )
        code, out, err = swarm(
            "rollback", str(damaged), "--endpoint-url", box.endpoint, "--yes", "--output", "json"
        )
        assert code == 2 and "damaged ledger line" in err, err
        assert box.calls_by("StartInstances") == 0

        stop = next(r.run for r in read_records(str(gone)) if r.action == "stop")
        code, out, err = swarm(
            "rollback", str(gone), "--endpoint-url", box.endpoint, "--yes", "--run", stop
        )
        assert code == 2 and "terminated since" in err, err


def test_rollback_wait_is_bounded_by_its_wait_timeout(tmp_path: Path) -> None:
    with Sandbox(OPEN) as box:
        ids = box.launch(3)
        ledger = tmp_path / "l.jsonl"
        assert act(box, "stop", write_ids(tmp_path / "ids.txt", ids), ledger)[0] == 0
        code, out, err = swarm(
            "rollback", str(ledger), "--endpoint-url", box.endpoint, "--yes", "--output", "json",
            "--wait", "--wait-timeout", "0",
        )  # fmt: skip
        assert code == 1, err
        assert json.loads(out)["wait"]["timed_out"] == 3


def test_a_selection_shard_reaches_only_its_own_accounts(tmp_path: Path) -> None:
    """With --filter, each shard assumed every account's role and listed it: a role
    refused in the other shard's account stopped this one too (exit 4, nothing sent), and
    each shard's job needed every account's role."""
    with Sandbox(OPEN) as box:
        made = {a: box.launch(3, account=a) for a in ACCOUNTS}
        for account, ids in made.items():
            box.client(account=account).create_tags(
                Resources=ids, Tags=[{"Key": "team", "Value": "a"}]
            )
        accounts = accounts_file(tmp_path)  # both accounts, in us-east-1 (--region)
        for k in (1, 2):
            listed = box.calls_by("DescribeInstances")
            code, _, err = swarm(
                "terminate", "--filter", "tag:team=a", "--accounts", str(accounts),
                "--region", "us-east-1", "--shard", f"{k}/2", "--endpoint-url", box.endpoint,
                "--yes", "--ledger", str(tmp_path / f"s{k}.jsonl"), "--progress", "none",
            )  # fmt: skip
            assert code == 0, err
            assert "shard" in err and "1 of 2 account/region pair(s)" in err, err
            assert box.calls_by("DescribeInstances") - listed == 1  # its own pair alone
        for account, ids in made.items():
            assert set(box.states(ids, account=account).values()) <= {"shutting-down", "terminated"}


def test_a_terminate_not_seen_terminated_is_not_given_a_retry_that_does_nothing(
    tmp_path: Path,
) -> None:
    """A terminate EC2 accepted stays done in the ledger, so `ledger failed` lists none
    of those the wait did not see terminated: the retry command printed for them made an
    empty list and said "nothing to do". The summary says so instead, and a resume with
    --wait on the same list is what looks them up again."""
    with Sandbox(SLOW) as box:
        ids = box.launch(3)
        ledger = tmp_path / "l.jsonl"
        listed = write_ids(tmp_path / "ids.txt", ids)
        common = ("--ids", listed, "--endpoint-url", box.endpoint, "--ledger", str(ledger))
        code, out, err = swarm(
            "terminate", *common, "--yes", "--progress", "none", "--wait", "--wait-timeout", "0"
        )
        assert code == 1, err
        flat = " ".join((out + err).split())
        assert "not seen terminated: EC2 accepted their calls" in flat, flat
        assert "the same command with --resume looks them up" in flat, flat
        assert "failed --retryable --action terminate" not in flat, flat
        assert swarm("ledger", "failed", str(ledger))[1] == ""
        code, out, err = swarm(
            "terminate", *common, "--yes", "--progress", "none", "--wait", "--resume"
        )
        assert code == 0, err
        assert "3 reached" in " ".join((out + err).split())


def test_a_terminate_its_wait_could_not_read_is_looked_up_again_once_it_can(
    tmp_path: Path,
) -> None:
    with Sandbox(SLOW) as box:
        ids = box.launch(2)
        box.fail_action("DescribeInstances", 403, "UnauthorizedOperation", "no")
        code, out, err = swarm(
            *("terminate", "--ids", write_ids(tmp_path / "ids.txt", ids), "--yes"),
            *("--endpoint-url", box.endpoint, "--ledger", str(tmp_path / "l.jsonl")),
            *("--progress", "none", "--wait", "--wait-timeout", "30"),
        )
    assert code == 4, out + err
    flat = " ".join((out + err).split())
    assert "2 not checked (UnauthorizedOperation" in flat, flat
    assert "waits for them again (once their state can be read)" in flat, flat


def test_a_wait_not_seen_through_says_how_to_look_again_and_wrong_state_is_for_good(
    tmp_path: Path,
) -> None:
    from swarm_cli.ledger import LedgerWriter

    with Sandbox(replace(SLOW, transition_seconds=60)) as box:
        ids = box.launch(2)
        ledger = tmp_path / "l.jsonl"
        code, out, err = swarm(
            "stop", "--ids", write_ids(tmp_path / "ids.txt", ids), "--endpoint-url",
            box.endpoint, "--ledger", str(ledger), "--yes", "--progress", "none",
            "--wait", "--wait-timeout", "0",
        )  # fmt: skip
    assert code == 1, err
    flat = " ".join((out + err).split())
    # Those a retry cannot help (WrongState, refused for good) are left out of it.
    said = f"not seen stopped: swarm ledger failed --retryable --action stop {ledger}"
    assert said in flat, flat
    assert "--resume" in flat[flat.index("not seen stopped") :]
    # An instance a wait saw terminated can never be stopped: no retry lists it.
    writer = LedgerWriter(str(tmp_path / "w.jsonl"), "r1", "stop", "us-east-1")
    writer.write_ahead(ids)
    writer.write(ids[0], "failed", code="WrongState", message="terminated: never stopped")
    writer.close()
    _, listed, _ = swarm("ledger", "failed", "--retryable", str(tmp_path / "w.jsonl"))
    assert listed.split() == [ids[1]]


def test_rollback_without_a_budget_says_it_will_undo_nothing(tmp_path: Path) -> None:
    with Sandbox(OPEN) as box:
        ids = box.launch(1)
        code, _, err = swarm(
            "stop", "--ids", write_ids(tmp_path / "ids.txt", ids), "--endpoint-url",
            box.endpoint, "--ledger", str(tmp_path / "l.jsonl"), "--yes", "--rollback",
        )  # fmt: skip
    assert code == 0, err
    assert "without --max-errors, nothing is undone" in " ".join(err.split())


def test_with_missing_ok_what_does_not_exist_spends_no_failure_budget(tmp_path: Path) -> None:
    """--missing-ok counts a missing ID done: the plan predicted exit 0, and the run spent
    its --max-errors 0 on the first missing one, stopped, and left the rest running."""
    with Sandbox(OPEN) as box:
        ids = box.launch(8)
        unknown = ["i-0123456789abcdef0", "i-0123456789abcdef1"]
        listed = write_ids(tmp_path / "ids.txt", [*unknown, *ids])
        code, _out, err = swarm(
            "plan", "stop", "--ids", listed, "--missing-ok", "--endpoint-url", box.endpoint
        )
        assert code == 0, err
        code, report = act(
            box,
            "stop",
            listed,
            tmp_path / "l.jsonl",
            *("--missing-ok", "--max-errors", "0", "--batch-size", "1"),
        )
        assert states(box, ids) <= {"stopping", "stopped"}
    assert code == 0, report
    assert report["counts"]["missing"] == 2 and report["counts"]["succeeded"] == 8


def test_a_rollback_cut_short_names_the_command_that_finishes_it(tmp_path: Path) -> None:
    """A resume of the run would stop again what the undo started: the summary names
    `swarm rollback --run` instead, and it finishes the undo."""
    with Sandbox(OPEN) as box:
        ids = box.launch(6)
        listed = write_ids(tmp_path / "ids.txt", [*ids, "i-0123456789abcdef0"])
        ledger = tmp_path / "l.jsonl"
        box.fail_action("StartInstances", 500, "InternalError", "no starts now")
        code, report = act(
            box,
            "stop",
            listed,
            ledger,
            *("--batch-size", "1", "--max-errors", "0", "--rollback", "--max-attempts", "2"),
        )
        assert code == 1 and report["rollback"]["counts"]["succeeded"] == 0, report
        finish = report["rollback"]["finish"]
        # The undo of the run, where it acted (its endpoint), with --yes: as printed.
        assert finish.startswith(f"swarm rollback {ledger} --run {report['run']} ")
        assert f"--endpoint-url {box.endpoint}" in finish and finish.endswith(" --yes")
        box.fail_action("StartInstances", None)
        code, _out, err = swarm(*shlex.split(finish)[1:], "--progress", "none")
        assert code == 0, err
        assert states(box, ids) <= {"pending", "running"}
