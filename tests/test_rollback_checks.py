"""``swarm rollback`` validates what it reads from the ledger, and asks EC2 about
the intents the ledger cannot know (pending: in flight at a kill) before undoing."""

from __future__ import annotations

import json
import shlex
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from test_cli import swarm, write_ids

from swarm_cli.actions import ACTIONS
from swarm_cli.ledger import MAYBE_DONE, LedgerWriter, read_records
from swarm_cli.report import Pair
from swarm_cli.saga import SagaError, UndoPlan, check_ids, undo_plan
from swarm_cli.sandbox import Sandbox

EAST = "us-east-1"


def write_run(path: Path, run: str, action: str, ids: list[str]) -> None:
    """A run of ``action`` that got every one of ``ids`` done."""
    writer = LedgerWriter(str(path), run, action, EAST)
    writer.write_ahead(ids)
    for instance_id in ids:
        writer.write(instance_id, "succeeded")
    assert writer.close() == []


def write_stop(path: Path, outcomes: list[tuple[str, str]], region: str = EAST) -> None:
    writer = LedgerWriter(str(path), "run1", "stop", region)
    writer.write_ahead([i for i, _ in outcomes])
    for instance_id, status in outcomes:
        if status != "pending":  # a pending intent has only its write-ahead record
            writer.write(instance_id, status)
    assert writer.close() == []


@pytest.mark.parametrize(
    ("groups", "shown"),
    [
        ({Pair(None, EAST): ["\x1b[31mi-00000001"]}, r"ID '\x1b[31mi-00000001'"),
        ({Pair(None, EAST): ["I-0000000A"]}, "ID 'I-0000000A'"),
        ({Pair(None, EAST): [" i-00000001"]}, "ID ' i-00000001'"),
        ({Pair(None, "evil.example.com/x"): ["i-00000001"]}, "region 'evil.example.com/x'"),
        ({Pair("12345", EAST): ["i-00000001"]}, "account '12345'"),
    ],
)
def test_an_undo_plan_with_values_ec2_would_not_name_is_refused(
    groups: dict[Pair, list[str]], shown: str
) -> None:
    plan = UndoPlan("r", ACTIONS["start"], groups, "stop")
    with pytest.raises(SagaError, match="nothing was sent") as caught:
        check_ids(plan)
    assert shown in str(caught.value)
    check_ids(UndoPlan("r", ACTIONS["start"], {Pair("123456789012", EAST): ["i-00000001"]}))


def test_the_pending_intents_of_a_run_are_unsure(tmp_path: Path) -> None:
    ledger = tmp_path / "l.jsonl"
    ids = ["i-00000001", "i-00000002", "i-00000003"]
    write_stop(ledger, [(ids[0], "succeeded"), (ids[1], "pending"), (ids[2], "failed")])
    plan = undo_plan([str(ledger)])
    assert plan.groups == {Pair(None, EAST): [ids[0]]}
    assert plan.unsure == {Pair(None, EAST): [ids[1]]} and plan.of == "stop"
    # A run that stopped in order says which intents it never sent (0 attempts) and
    # which it sent only to be refused before EC2 acted (throttled, or with the rest of
    # a batch): those are known not done; one sent without an answer, or answered with
    # an error of the endpoint's own (a 5xx), is not known.
    stopped = tmp_path / "stopped.jsonl"
    more = [*ids, "i-00000004", "i-00000005"]
    writer = LedgerWriter(str(stopped), "run1", "stop", EAST)
    writer.write_ahead(more)
    writer.write(ids[0], "succeeded", attempts=1)
    writer.write(ids[1], "pending", code="NotSent")
    writer.write(ids[2], "pending", code="CallTimeout", message=f"no answer: {MAYBE_DONE}")
    budget = "the failure budget is spent: 2 failed or missing, over --max-errors 1"
    writer.write(more[3], "pending", code="MaxErrors", message=budget, attempts=1)
    writer.write(more[4], "pending", code="MaxErrors", message=f"{budget}: {MAYBE_DONE}")
    assert writer.close() == []
    assert undo_plan([str(stopped)]).unsure == {Pair(None, EAST): [ids[2], more[4]]}
    nothing = tmp_path / "nothing.jsonl"
    write_stop(nothing, [(ids[1], "pending")])
    with pytest.raises(SagaError, match="changed nothing"):
        undo_plan([str(nothing)])
    assert undo_plan([str(nothing)], allow_empty=True).unsure == {Pair(None, EAST): [ids[1]]}


def rollback(box: Sandbox, ledger: Path) -> tuple[int, str]:
    code, _, err = swarm(
        "rollback", str(ledger), "--endpoint-url", box.endpoint, "--yes", "--progress", "none"
    )
    return code, err


def test_rollback_refuses_a_hostile_id_and_sends_nothing(sandbox: Sandbox, tmp_path: Path) -> None:
    ids = sandbox.launch(2)
    ledger = tmp_path / "l.jsonl"
    write_stop(ledger, [(ids[0], "succeeded"), ("\x1b]0;owned\x07" + ids[1], "succeeded")])
    code, err = rollback(sandbox, ledger)
    assert code == 2, err
    assert r"\x1b]0;owned\x07" in err and "\x1b" not in err
    assert sandbox.counters.accepted == 0


def test_rollback_undoes_a_pending_call_that_was_carried_out(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    ids = sandbox.launch(3)
    client = sandbox.client()
    # The run stopped ids[0] (recorded) and ids[1] (in flight at a kill: pending);
    # ids[2] was never sent and is still running.
    client.stop_instances(InstanceIds=ids[:2])
    ledger = tmp_path / "l.jsonl"
    write_stop(ledger, [(ids[0], "succeeded"), (ids[1], "pending"), (ids[2], "pending")])
    code, err = rollback(sandbox, ledger)
    assert code == 0, err
    assert "2 intent(s) of the run were left pending; DescribeInstances shows 1 of the 2" in err
    assert sandbox.counters.accepted_by_action.get("StartInstances") == 2
    assert set(sandbox.states(ids).values()) == {"running"}
    # A run that recorded nothing done but left a call carried out is undone too.
    client.stop_instances(InstanceIds=ids[:1])
    only = tmp_path / "only.jsonl"
    write_stop(only, [(ids[0], "pending"), (ids[1], "pending")])
    code, err = rollback(sandbox, only)
    assert code == 0, err
    assert set(sandbox.states(ids).values()) == {"running"}


def test_rollback_leaves_alone_a_pending_intent_ec2_says_was_stopped_before_the_run(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    """A kill left ids pending; DescribeInstances shows them stopped, but its
    StateTransitionReason dates the stop an hour before the run began: someone else's,
    not undone."""
    ids = sandbox.launch(3)
    sandbox.client().stop_instances(InstanceIds=ids[:2])
    ledger = tmp_path / "l.jsonl"
    write_stop(ledger, [(ids[0], "pending"), (ids[1], "pending"), (ids[2], "pending")])
    # The run as if it began an hour after those stops (the ledger's own times moved).
    later = (datetime.now(timezone.utc) + timedelta(hours=1)).isoformat().replace("+00:00", "Z")
    lines = [json.loads(line) for line in ledger.read_text().splitlines()]
    for line in lines:
        line["ts"] = line["started"] = later
    ledger.write_text("".join(json.dumps(line) + "\n" for line in lines))
    code, err = rollback(sandbox, ledger)
    assert code == 0, err  # nothing of the run's to undo: the state before it stands
    text = " ".join(err.split())
    assert (
        "DescribeInstances shows none of the 3 it could read stopping or stopped since the run "
        "began (2 stopped before it, as EC2 says: left alone): nothing more to undo"
    ) in text, text
    assert sandbox.counters.accepted_by_action.get("StartInstances") is None
    assert set(sandbox.states(ids[:2]).values()) == {"stopped"}
    (began,) = {line["started"] for line in lines}
    assert undo_plan([str(ledger)], allow_empty=True).began == began


def test_rollback_that_cannot_look_up_pending_intents_sends_nothing_and_says_so(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    ids = sandbox.launch(3)
    # Both pending calls were carried out; nobody can tell while DescribeInstances fails.
    sandbox.client().stop_instances(InstanceIds=ids[:2])
    ledger = tmp_path / "l.jsonl"
    write_stop(ledger, [(ids[0], "pending"), (ids[1], "pending"), (ids[2], "pending")])
    sandbox.fail_action("DescribeInstances", 403, "UnauthorizedOperation", "no")
    code, err = rollback(sandbox, ledger)
    assert code == 1, err
    text = " ".join(err.split())
    assert "3 pending intent(s) of run run1 could not be looked up (UnauthorizedOperation" in text
    assert "nothing was sent" in text and "nothing to undo" not in text
    assert sandbox.counters.accepted_by_action.get("StartInstances") is None
    sandbox.fail_action("DescribeInstances", None)
    code, err = rollback(sandbox, ledger)
    assert code == 0, err
    assert set(sandbox.states(ids).values()) == {"running"}


def test_rollback_keeps_the_rails_of_a_run(sandbox: Sandbox, tmp_path: Path) -> None:
    """--protect-tag, --max-count and --expect-account guard an undo as they guard a run."""
    ids = sandbox.launch(3)
    client = sandbox.client()
    client.stop_instances(InstanceIds=ids)
    client.create_tags(Resources=[ids[0]], Tags=[{"Key": "keep", "Value": "yes"}])
    ledger = tmp_path / "l.jsonl"
    write_stop(ledger, [(i, "succeeded") for i in ids])
    base = ("rollback", str(ledger), "--endpoint-url", sandbox.endpoint, "--yes")
    code, _, err = swarm(*base, "--max-count", "2", "--progress", "none")
    assert code == 3, err
    code, _, err = swarm(*base, "--expect-account", "999999999999", "--progress", "none")
    assert code == 3, err
    assert sandbox.counters.accepted_by_action.get("StartInstances") is None
    code, _, err = swarm(*base, "--protect-tag", "keep", "--progress", "none")
    assert code == 1, err  # the protected one is recorded failed (Protected)
    states = sandbox.states(ids)
    assert states[ids[0]] == "stopped"
    assert {states[ids[1]], states[ids[2]]} == {"running"}


def test_the_retry_a_rollback_prints_keeps_its_rails_and_where_it_went(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    ids = sandbox.launch(2)
    sandbox.client().stop_instances(InstanceIds=ids)
    ledger = tmp_path / "l.jsonl"
    write_stop(ledger, [(i, "succeeded") for i in ids])
    sandbox.fail_action("DescribeInstances", 403, "UnauthorizedOperation", "no")
    code, out, err = swarm(
        *("rollback", str(ledger), "--endpoint-url", sandbox.endpoint, "--yes"),
        *("--protect-tag", "keep", "--progress", "none"),
    )
    assert code == 3, err  # the rail could not see: refused
    retry = next(line for line in (out + err).splitlines() if "to finish it:" in line)
    assert f"swarm rollback {ledger} --run run1 " in retry  # the undo again, of that run
    assert f"--endpoint-url {sandbox.endpoint}" in retry
    assert "--protect-tag keep" in retry
    assert "retry the rest" not in out + err
    assert sandbox.counters.accepted_by_action.get("StartInstances") is None


def test_what_an_undo_cut_short_prints_finishes_that_run_and_no_other(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    """A ledger also holding a start of other instances left pending (an outage): the
    undo's start, left short, is finished by the undo of its run, not by a retry of every
    start the ledger holds (which started the other run's instances too)."""
    theirs, ours = sandbox.launch(2), sandbox.launch(2)
    client = sandbox.client()
    client.stop_instances(InstanceIds=theirs + ours)
    ledger = tmp_path / "l.jsonl"
    other = LedgerWriter(str(ledger), "run0", "start", EAST)
    other.write_ahead(theirs)  # sent nowhere: pending
    assert other.close() == []
    write_stop(ledger, [(i, "succeeded") for i in ours])
    # A rail that cannot see refuses the undo's instances (exit 3), leaving them to finish.
    sandbox.fail_action("DescribeInstances", 403, "UnauthorizedOperation", "no")
    base = ("rollback", str(ledger), "--run", "run1", "--endpoint-url", sandbox.endpoint)
    code, out, err = swarm(*base, "--protect-tag", "keep", "--yes", "--progress", "none")
    assert code == 3, err
    (finish,) = [line for line in (out + err).splitlines() if "to finish it:" in line]
    assert "ledger failed" not in finish
    argv = shlex.split(finish.split("to finish it: ", 1)[1])
    assert argv[:5] == ["swarm", "rollback", str(ledger), "--run", "run1"]
    sandbox.fail_action("DescribeInstances", None)
    code, out, err = swarm(*argv[1:], "--yes", "--progress", "none")
    assert code == 0, err
    states = sandbox.states(theirs + ours)
    assert [states[i] for i in ours] == ["running", "running"]
    assert [states[i] for i in theirs] == ["stopped", "stopped"]  # not the other run's


def test_rollback_of_a_ledger_behind_a_link_is_refused_before_anything(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    ids = sandbox.launch(1)
    sandbox.client().stop_instances(InstanceIds=ids)
    ledger = tmp_path / "l.jsonl"
    write_stop(ledger, [(ids[0], "succeeded")])
    (tmp_path / "link.jsonl").symlink_to(ledger)
    looked = sandbox.calls_by("DescribeInstances")
    code, err = rollback(sandbox, tmp_path / "link.jsonl")
    assert code == 2 and "is a symbolic link" in err, err
    assert sandbox.calls_by("DescribeInstances") == looked
    assert sandbox.counters.accepted_by_action.get("StartInstances") is None


def test_rollback_with_an_accounts_file_names_the_refused_role_not_a_flag_given(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    from test_actions import ACCOUNTS, accounts_file

    ids = sandbox.launch(1, account=ACCOUNTS[0])
    ledger = tmp_path / "l.jsonl"
    writer = LedgerWriter(str(ledger), "run1", "stop", EAST, ACCOUNTS[0])
    writer.write_ahead(ids)
    writer.write(ids[0], "succeeded")
    assert writer.close() == []
    sandbox.fail_action("AssumeRole", 403, "AccessDenied", "not this role")
    code, _, err = swarm(
        *("rollback", str(ledger), "--endpoint-url", sandbox.endpoint, "--yes"),
        *("--accounts", str(accounts_file(tmp_path)), "--progress", "none"),
    )
    text = " ".join(err.split())
    assert code == 4, err
    assert f"cannot reach account(s) {ACCOUNTS[0]}" in text and "not this role" in text, err
    assert "pass --accounts" not in text and "check their roles; nothing was sent" in text
    assert sandbox.counters.accepted == 0


def test_rollback_leaves_alone_what_a_later_terminate_in_the_ledger_got_done(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    """One ledger for several commands: a stop, then a terminate of some of them. The
    rollback of the stop starts the others; a terminated one can only fail."""
    ids = sandbox.launch(3)
    client = sandbox.client()
    client.stop_instances(InstanceIds=ids)
    ledger = tmp_path / "l.jsonl"
    write_stop(ledger, [(i, "succeeded") for i in ids])
    client.terminate_instances(InstanceIds=ids[:1])
    later = LedgerWriter(str(ledger), "run2", "terminate", EAST)
    later.write_ahead(ids[:1])
    later.write(ids[0], "succeeded")
    assert later.close() == []
    code, err = rollback(sandbox, ledger)
    assert code == 0, err
    assert "1 instance(s) of the run were terminated since" in err
    assert sandbox.counters.accepted_by_action.get("StartInstances") == 2
    assert sandbox.states(ids[1:]) == dict.fromkeys(ids[1:], "running")


def test_rollback_says_which_ledger_lines_it_could_not_read(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    ids = sandbox.launch(2)
    ledger = tmp_path / "l.jsonl"
    write_stop(ledger, [(ids[0], "succeeded"), (ids[1], "succeeded")])
    sandbox.client().stop_instances(InstanceIds=ids)
    lines = ledger.read_bytes().splitlines(keepends=True)
    outcome = next(k for k, line in enumerate(lines) if ids[1].encode() in line and k > 2)
    lines[outcome] = b"\xff" + lines[outcome][1:]  # the outcome of ids[1], unreadable now
    ledger.write_bytes(b"".join(lines))
    code, err = rollback(sandbox, ledger)
    assert code == 0, err
    # Its intent is left pending, so EC2 is asked; the user is told why.
    assert f"1 damaged ledger line(s) skipped: {ledger} line {outcome + 1} (not UTF-8)" in err
    assert "unknown to the undo" in err
    assert "1 intent(s) of the run were left pending" in err


def test_rollback_leaves_alone_what_a_resume_found_already_stopped(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    ids = sandbox.launch(4)
    sandbox.client().stop_instances(InstanceIds=ids[:2])  # stopped before any run
    ids_file = write_ids(tmp_path / "ids.txt", ids)
    ledger = tmp_path / "l.jsonl"
    code, _, err = swarm(
        *("stop", "--ids", ids_file, "--endpoint-url", sandbox.endpoint, "--ledger", str(ledger)),
        *("--yes", "--progress", "none", "--resume"),
    )
    assert code == 0, err
    # The resume recorded ids[:2] AlreadyInState, unsent: the run changed only ids[2:].
    code, err = rollback(sandbox, ledger)
    assert code == 0, err
    assert sandbox.states(ids) == {
        **dict.fromkeys(ids[:2], "stopped"),
        **dict.fromkeys(ids[2:], "running"),
    }
    assert sandbox.counters.accepted_by_action.get("StartInstances") == 2


def test_a_resume_s_already_in_state_is_undone_when_the_killed_run_may_have_sent_it(
    tmp_path: Path,
) -> None:
    ledger = tmp_path / "l.jsonl"
    ids = ["i-00000001", "i-00000002"]
    killed = LedgerWriter(str(ledger), "run1", "stop", EAST)
    killed.write_ahead(ids)  # a kill -9: both calls may have left
    assert killed.close() == []
    resumed = LedgerWriter(str(ledger), "run2", "stop", EAST)
    resumed.write(ids[0], "succeeded", code="AlreadyInState", message="stopped; not sent")
    resumed.write(ids[1], "succeeded")
    assert resumed.close() == []
    plan = undo_plan([str(ledger)], ["run1", "run2"])
    assert plan.groups == {Pair(None, EAST): ids}  # the killed run may have stopped ids[0]
    # Undone alone, the resume found ids[0] stopped and changed nothing of it.
    assert undo_plan([str(ledger)], "run2").groups == {Pair(None, EAST): ids[1:]}
    # The killed run undone alone: the resume's call found ids[1] still running and
    # stopped it (a success, no WasAlready); the killed run's call did not. ids[0] is
    # still unsure: looked up, as the killed run may have stopped it.
    alone = undo_plan([str(ledger)], "run1", allow_empty=True)
    assert alone.groups == {} and alone.unsure == {Pair(None, EAST): ids[:1]}


def test_an_undo_leaves_alone_what_later_runs_undid_already(tmp_path: Path) -> None:
    run = write_run
    ids = ["i-00000001", "i-00000002"]
    ledger = tmp_path / "l.jsonl"
    run(ledger, "run1", "stop", ids)
    run(ledger, "run2", "start", ids[:1])
    # run2 started ids[0] again: it is run2's now. A later stop (a resume, say) goes on
    # with run1 and takes nothing from it.
    run(ledger, "run3", "stop", ids[1:])
    plan = undo_plan([str(ledger)], "run1")
    assert plan.groups == {Pair(None, EAST): ids[1:]} and plan.superseded == 1
    # Stop, start, stop, all of them: an undo of the first would start what the last
    # stopped. Nothing of it is left to undo; the latest run is undone as ever.
    chain = tmp_path / "chain.jsonl"
    for name, action in (("a", "stop"), ("b", "start"), ("c", "stop")):
        run(chain, name, action, ids)
    with pytest.raises(SagaError, match="undone by later runs of the ledger already"):
        undo_plan([str(chain)], "a")
    assert undo_plan([str(chain)], "c").groups == {Pair(None, EAST): ids}


def test_a_merged_ledger_of_a_stop_that_waited_undoes_what_the_ledger_itself_does(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    """The merge kept one record per intent: the wait's success won over the call's
    WasAlready, and a rollback of the merged ledger started an instance stopped before
    the run (exit 0). Every record is kept now."""
    from swarm_cli.ledger.merge import merge_files

    ids = sandbox.launch(3)
    sandbox.client().stop_instances(InstanceIds=ids[:1])  # stopped by someone else first
    ledger = tmp_path / "l.jsonl"
    code, _, err = swarm(
        *("stop", "--ids", write_ids(tmp_path / "ids.txt", ids), "--wait", "--yes"),
        *("--endpoint-url", sandbox.endpoint, "--ledger", str(ledger), "--progress", "none"),
    )
    assert code == 0, err
    merged = tmp_path / "merged.jsonl"
    assert merge_files([str(ledger)], str(merged)) == 3
    assert undo_plan([str(merged)], None).groups == undo_plan([str(ledger)], None).groups
    assert undo_plan([str(merged)], None).groups == {Pair(None, "us-east-1"): ids[1:]}
    code, err = rollback(sandbox, merged)
    assert code == 0, err
    assert sandbox.states(ids) == {ids[0]: "stopped", **dict.fromkeys(ids[1:], "running")}


def test_a_rollback_writes_its_step_summary_as_a_run_does(
    sandbox: Sandbox, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ids = sandbox.launch(2)
    sandbox.client().stop_instances(InstanceIds=ids)
    ledger = tmp_path / "l.jsonl"
    write_stop(ledger, [(i, "succeeded") for i in ids])
    summary = tmp_path / "summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    code, _, err = swarm(
        "rollback", str(ledger), "--endpoint-url", sandbox.endpoint, "--yes", "--progress", "none"
    )
    assert code == 0, err
    text = summary.read_text()
    # Headed as what it is: the undo of a run, not a start of its own.
    run = next(read_records(str(ledger))).run
    assert text.startswith(f"## swarm rollback of run {run} (start): 2 of 2 succeeded"), text
    assert set(sandbox.states(ids).values()) == {"running"}


def test_a_run_whose_records_name_two_actions_is_named_not_said_absent(tmp_path: Path) -> None:
    """A hand-edited ledger: one record of a stop run made a start. The error names the
    run and its actions, as with --run, not "no run of a reversible action"."""
    ledger = tmp_path / "l.jsonl"
    write_stop(ledger, [("i-00000001", "succeeded"), ("i-00000002", "succeeded")])
    records = [json.loads(line) for line in ledger.read_text().splitlines()]
    records[-1]["action"] = "start"
    ledger.write_text("".join(json.dumps(r) + "\n" for r in records))
    for run in (None, "run1"):
        with pytest.raises(SagaError, match=r"run run1 .*several actions \(start, stop\)"):
            undo_plan([str(ledger)], run=run)


def test_the_finish_of_an_undo_of_several_runs_names_each_and_runs_as_printed(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    first, second = sandbox.launch(2), sandbox.launch(2)
    sandbox.client().stop_instances(InstanceIds=first + second)
    ledger = tmp_path / "l.jsonl"
    write_run(ledger, "shard1", "stop", first)
    write_run(ledger, "shard2", "stop", second)
    sandbox.fail_action("DescribeInstances", 403, "UnauthorizedOperation", "no")
    base = ("rollback", str(ledger), "--run", "shard1", "--run", "shard2")
    code, out, err = swarm(
        *base, "--endpoint-url", sandbox.endpoint, "--protect-tag", "keep", "--yes", "-o", "json"
    )
    assert code == 3, err
    finish = json.loads(out)["finish"]
    argv = shlex.split(finish)
    assert argv[:7] == ["swarm", "rollback", str(ledger), "--run", "shard1", "--run", "shard2"]
    sandbox.fail_action("DescribeInstances", None)
    code, _, err = swarm(*argv[1:], "--yes", "--progress", "none")
    assert code == 0, err
    assert set(sandbox.states(first + second).values()) == {"running"}


def test_an_undo_its_wait_did_not_see_through_is_finished_by_the_undo_not_a_retry(
    tmp_path: Path,
) -> None:
    """The wait saw none of them back (the Describe calls it made were all answered by a
    login page): the way on is the undo again, with its wait; a retry of the ledger's
    starts would start another run's instances too."""
    from test_ec2_ops import LOGIN_PAGE

    from swarm_cli.sandbox import BucketSpec, SandboxConfig

    with Sandbox(SandboxConfig(BucketSpec(10_000, 10_000), BucketSpec(100_000, 100_000))) as box:
        theirs, ours = box.launch(2), box.launch(2)
        box.client().stop_instances(InstanceIds=theirs + ours)
        ledger = tmp_path / "l.jsonl"
        other = LedgerWriter(str(ledger), "run0", "start", EAST)
        other.write_ahead(theirs)  # left pending
        assert other.close() == []
        write_run(ledger, "run1", "stop", ours)

        box.unreadable_answers("DescribeInstances", body=LOGIN_PAGE)
        code, out, err = swarm(
            *("rollback", str(ledger), "--run", "run1", "--endpoint-url", box.endpoint),
            *("--wait", "--wait-timeout", "2", "--yes", "--progress", "none"),
        )
        text = out + err
        assert code == 1, text
        assert "ledger failed" not in text, text
        (line,) = [x for x in text.splitlines() if "to finish it:" in x]
        argv = shlex.split(line.split("to finish it: ", 1)[1])
        assert argv[3:5] == ["--run", "run1"] and "--wait" in argv
        assert set(box.states(theirs).values()) == {"stopped"}

        # The command as printed finishes it: it looks the undo's instances up and waits
        # for them, one stopped since by someone else included, instead of finding them
        # "undone by later runs" because the undo's calls were taken.
        box.unreadable_answers("DescribeInstances", on=False)
        box.client().stop_instances(InstanceIds=ours[:1])
        assert argv[-1] == "--yes"  # as printed, in a job with no terminal
        code, out, err = swarm(*argv[1:], "--progress", "none", "--output", "json")
        assert code == 0, out + err
        assert set(box.states(ours).values()) == {"running"}, out + err
        assert set(box.states(theirs).values()) == {"stopped"}


def test_a_runs_rollback_its_wait_did_not_see_through_names_the_command_that_finishes_it(
    tmp_path: Path,
) -> None:
    """A run's --rollback whose wait could not look (Describe answered by a login page):
    the summary names the undo of the run, with its wait and --yes, and that command, run
    as printed once Describe answers, sees the instances back."""
    from test_ec2_ops import LOGIN_PAGE

    from swarm_cli.sandbox import BucketSpec, SandboxConfig

    with Sandbox(SandboxConfig(BucketSpec(10_000, 10_000), BucketSpec(100_000, 100_000))) as box:
        ours = box.launch(3)
        ids = write_ids(tmp_path / "ids.txt", [*ours, "i-0000000000000dead"])  # spends the budget
        ledger = tmp_path / "l.jsonl"
        box.unreadable_answers("DescribeInstances", body=LOGIN_PAGE)
        code, out, err = swarm(
            *("stop", "--ids", ids, "--ledger", str(ledger), "--endpoint-url", box.endpoint),
            *("--max-errors", "0", "--rollback", "--wait", "--wait-timeout", "2", "--yes"),
            *("--progress", "none", "--batch-size", "1"),
        )
        text = out + err
        (line,) = [x for x in text.splitlines() if "to finish it:" in x]
        argv = shlex.split(line.split("to finish it: ", 1)[1])
        assert argv[:3] == ["swarm", "rollback", str(ledger)], line
        assert "--wait" in argv and argv[-1] == "--yes", line
        box.unreadable_answers("DescribeInstances", on=False)
        box.client().stop_instances(InstanceIds=ours[:1])  # since stopped by someone else
        assert f"--endpoint-url={box.endpoint}" in line or box.endpoint in argv, line
        code, out, err = swarm(*argv[1:], "--progress", "none")
        assert code == 0, out + err
        assert set(box.states(ours).values()) == {"running"}, out + err
