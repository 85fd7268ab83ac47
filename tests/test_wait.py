"""--wait against the sandbox over HTTP: real boto3, real engine, real DescribeInstances."""

from __future__ import annotations

import io
import json
import threading
from collections.abc import Mapping, Sequence
from typing import Any

import boto3
import pytest
from rich.console import Console

from swarm_cli.actions import ACTIONS
from swarm_cli.ec2 import make_client
from swarm_cli.engine import Engine
from swarm_cli.ledger import REACHED_CODE, LedgerError, fold, read_records
from swarm_cli.outcome import Kind, Outcome
from swarm_cli.report import Pair, Problem
from swarm_cli.run import Job, RunOptions
from swarm_cli.sandbox import CREDENTIALS, BucketSpec, Sandbox, SandboxConfig
from swarm_cli.wait import (
    WAIT_SPEC,
    WaitForState,
    WaitReport,
    dead_ends,
    record_reached,
    unreached,
    wait_for,
)
from swarm_cli.window import RATE, Window

EAST, WEST = "us-east-1", "eu-west-1"
QUIET = RunOptions(progress="none")


def quiet() -> Console:
    return Console(file=io.StringIO(), width=100)


def plain_client(box: Sandbox, region: str = EAST) -> Any:
    """A client as any user has: no admin header, default retries."""
    return boto3.client("ec2", region_name=region, endpoint_url=box.endpoint, **CREDENTIALS)


def clients(box: Sandbox) -> Any:
    def make(pair: Pair) -> Any:
        return make_client(pair.region, endpoint_url=box.endpoint, credentials=CREDENTIALS)

    return make


def job(action: str, done: Mapping[Pair, Sequence[str]], options: RunOptions = QUIET) -> Job:
    return Job(ACTIONS[action], done, options)


def test_wait_spec_is_not_an_action_users_can_run() -> None:
    assert WAIT_SPEC.api == "DescribeInstances"
    assert WAIT_SPEC not in ACTIONS.values()


def test_dead_ends_are_the_states_that_only_lead_to_termination() -> None:
    assert dead_ends("terminated") == frozenset()
    assert dead_ends("stopped") == {"shutting-down", "terminated"}
    assert dead_ends("running") == {"shutting-down", "terminated"}


def test_stopped_instances_in_two_regions_all_reach_stopped(sandbox: Sandbox) -> None:
    done: dict[Pair, list[str]] = {}
    for region in (EAST, WEST):
        ids = sandbox.launch(10, region=region)
        plain_client(sandbox, region).stop_instances(InstanceIds=ids)
        done[Pair(None, region)] = ids

    report = wait_for(job("stop", done), done, clients(sandbox), quiet(), timeout=30)

    assert isinstance(report, WaitReport)
    assert report.action == "wait"
    assert report.counts["succeeded"] == 20
    assert report.problems == []
    assert report.exit_code == 0
    assert {p: sorted(ids) for p, ids in report.done.items()} == {
        p: sorted(ids) for p, ids in done.items()
    }
    assert set(report.reached_at) == {i for ids in done.values() for i in ids}
    assert report.extra["wait"]["target"] == "stopped"
    assert report.extra["wait"]["reached"] == 20
    json.dumps(report.to_dict(), default=str)  # the --output json view holds it


def test_waiting_for_running_on_terminated_instances_is_a_wrong_state(sandbox: Sandbox) -> None:
    ids = sandbox.launch(5)
    plain_client(sandbox).terminate_instances(InstanceIds=ids)
    done = {Pair(None, EAST): ids}

    report = wait_for(job("start", done), done, clients(sandbox), quiet(), timeout=30)

    assert report.counts["failed"] == 5
    assert {p.code for p in report.problems} == {"WrongState"}
    assert "can no longer become running" in (report.problems[0].message or "")
    assert report.done[Pair(None, EAST)] == []
    assert report.exit_code == 1


def test_instances_the_wait_could_not_check_are_counted_with_why(sandbox: Sandbox) -> None:
    ids = sandbox.launch(3)
    done = {Pair(None, EAST): ids}
    sandbox.fail_action("DescribeInstances", 403, "UnauthorizedOperation", "no")
    options = RunOptions(progress="none", max_attempts=2)
    report = wait_for(job("stop", done, options), done, clients(sandbox), quiet(), timeout=30)
    waited = report.extra["wait"]
    assert (waited["reached"], waited["timed_out"], waited["not_checked"]) == (0, 0, 3)
    assert waited["not_checked_why"].startswith("UnauthorizedOperation")
    assert report.exit_code != 0


def test_a_describe_failing_a_while_is_asked_again_not_given_up(sandbox: Sandbox) -> None:
    """One call carries every instance, and each failed call charges each an attempt:
    a second of 5xx spent a run's few attempts, and an instance the wait was about to
    see was given up, not checked. The wait asks again, for up to half a minute."""
    ids = sandbox.launch(3)
    plain_client(sandbox).stop_instances(InstanceIds=ids)
    done = {Pair(None, EAST): ids}
    sandbox.fail_action("DescribeInstances", 500, "InternalError", "no")
    back = threading.Timer(1.5, sandbox.fail_action, ("DescribeInstances", None))
    back.start()
    try:
        options = RunOptions(progress="none", max_attempts=2)
        report = wait_for(job("stop", done, options), done, clients(sandbox), quiet(), timeout=60)
    finally:
        back.cancel()
    assert report.extra["wait"]["reached"] == 3, report.extra["wait"]
    assert sandbox.calls_by("DescribeInstances") >= 1


def test_a_timeout_of_zero_times_every_instance_out_without_a_call(sandbox: Sandbox) -> None:
    ids = sandbox.launch(7)  # running: they would never become stopped
    done = {Pair(None, EAST): ids}

    report = wait_for(job("stop", done), done, clients(sandbox), quiet(), timeout=0)

    assert report.counts["failed"] == 7
    assert {p.code for p in report.problems} == {"WaitTimeout"}
    assert sandbox.calls_by("DescribeInstances") == 0
    assert report.extra["wait"]["timed_out"] == 7


def test_the_wait_keeps_the_jobs_options_but_no_ledger_or_budget(
    sandbox: Sandbox, tmp_path: Any
) -> None:
    ids = sandbox.launch(3)
    plain_client(sandbox).stop_instances(InstanceIds=ids)
    done = {Pair(None, EAST): ids}
    ledger = tmp_path / "run.jsonl"
    options = RunOptions(progress="none", ledger=str(ledger), max_errors=1, batch_size=500)

    report = wait_for(job("stop", done, options), done, clients(sandbox), quiet(), timeout=30)

    assert report.counts["succeeded"] == 3
    assert report.ledger is None and not ledger.exists()
    assert report.batch_size == 200  # DescribeInstances' batches stay small
    assert report.window_profile == options.window.name


def test_a_terminate_wait_counts_vanished_instances_as_reached(sandbox: Sandbox) -> None:
    ids = sandbox.launch(4)
    plain_client(sandbox).terminate_instances(InstanceIds=ids)
    gone = ["i-0000000000000dead", "i-0000000000000beef"]  # terminated long ago: forgotten
    done = {Pair(None, EAST): [*ids, *gone]}

    report = wait_for(job("terminate", done), done, clients(sandbox), quiet(), timeout=30)

    assert report.counts["succeeded"] == 6
    assert report.exit_code == 0


def test_the_wait_rides_out_describe_throttles() -> None:
    config = SandboxConfig(
        BucketSpec(10_000, 10_000),
        BucketSpec(100_000, 100_000),
        limits={"DescribeInstances": (BucketSpec(2, 40), None)},
    )
    with Sandbox(config) as box:
        ids = box.launch(20)
        box.client().stop_instances(InstanceIds=ids)  # admin: spends no bucket
        done = {Pair(None, EAST): ids}
        options = RunOptions(progress="none", batch_size=1)

        report = wait_for(job("stop", done, options), done, clients(box), quiet(), timeout=30)

        assert report.counts["succeeded"] == 20
        assert box.throttles_by("DescribeInstances") > 0
        assert report.total_of("throttled_calls") > 0


# The action's answers, one call at a time over HTTP.


def action(box: Sandbox, target: str, **kwargs: Any) -> WaitForState:
    return WaitForState(
        make_client(EAST, endpoint_url=box.endpoint, credentials=CREDENTIALS), target, **kwargs
    )


def test_each_state_maps_to_an_outcome(sandbox: Sandbox) -> None:
    running, stopped, terminated = (sandbox.launch(1)[0] for _ in range(3))
    admin = sandbox.client()
    admin.stop_instances(InstanceIds=[stopped])
    admin.terminate_instances(InstanceIds=[terminated])
    ids = [running, stopped, terminated]

    to_stopped = action(sandbox, "stopped")(ids)
    assert to_stopped[running].kind is Kind.NOT_YET
    assert to_stopped[stopped] == Outcome(
        Kind.SUCCEEDED,
        REACHED_CODE,
        "stopped",
        to_stopped[stopped].http_status,
        to_stopped[stopped].request_id,
    )
    assert to_stopped[stopped].http_status == 200
    assert to_stopped[terminated].kind is Kind.PERMANENT
    assert to_stopped[terminated].code == "WrongState"

    to_terminated = action(sandbox, "terminated")(ids)
    assert [to_terminated[i].kind for i in ids] == [Kind.NOT_YET, Kind.NOT_YET, Kind.SUCCEEDED]


def test_an_unknown_id_is_named_and_the_rest_asked_again(sandbox: Sandbox) -> None:
    ids = sandbox.launch(4)
    bad = "i-00000000000000bad"
    batch = [ids[0], bad, *ids[1:]]

    to_stopped = action(sandbox, "stopped")(batch)
    assert to_stopped[bad].kind is Kind.MISSING
    assert to_stopped[bad].code == "NotListed"
    requeued = [to_stopped[i] for i in ids]
    assert {o.kind for o in requeued} == {Kind.REQUEUE}
    assert {o.batch_limit for o in requeued} == {2}  # the four good ones, bisected

    to_terminated = action(sandbox, "terminated")(batch)
    assert to_terminated[bad].kind is Kind.SUCCEEDED  # forgotten once terminated long enough
    assert {to_terminated[i].kind for i in ids} == {Kind.REQUEUE}


def test_past_the_deadline_nothing_is_sent(sandbox: Sandbox) -> None:
    ids = sandbox.launch(2)
    waiting = action(sandbox, "stopped", deadline=0.0, clock=lambda: 1.0)

    outcomes = waiting(ids)

    assert {o.code for o in outcomes.values()} == {"WaitTimeout"}
    assert {o.kind for o in outcomes.values()} == {Kind.PERMANENT}
    assert "never seen" in (outcomes[ids[0]].message or "")
    assert sandbox.calls_by("DescribeInstances") == 0


def test_a_timed_out_instance_says_where_it_was_last_seen(sandbox: Sandbox) -> None:
    ids = sandbox.launch(1)
    now = [0.0]
    waiting = action(sandbox, "stopped", deadline=10.0, clock=lambda: now[0])
    assert waiting(ids)[ids[0]].kind is Kind.NOT_YET
    now[0] = 10.0

    timed_out = waiting(ids)[ids[0]]

    assert timed_out.code == "WaitTimeout"
    assert "last seen running" in (timed_out.message or "")


def test_an_instance_not_there_yet_is_asked_again_until_it_is(sandbox: Sandbox) -> None:
    """Through the engine (whose poll interval run_job cannot set yet), with a short poll."""
    ids = sandbox.launch(6)
    waiting = action(sandbox, "stopped")
    calls: list[int] = []

    def stop_after_first_look(batch: Sequence[str]) -> Mapping[str, Outcome]:
        outcomes = waiting(batch)
        calls.append(len(batch))
        if len(calls) == 1:
            sandbox.client().stop_instances(InstanceIds=ids)
        return outcomes

    engine = Engine(stop_after_first_look, Window(RATE), batch_size=10, poll_interval=0.01)
    result = engine.run(ids)

    assert result.counts["succeeded"] == 6
    assert len(calls) >= 2
    assert set(waiting.reached_at) == set(ids)


def test_record_reached_appends_one_record_per_instance_to_the_runs_ledger(
    sandbox: Sandbox, tmp_path: Any
) -> None:
    east, west = sandbox.launch(3, region=EAST), sandbox.launch(2, region=WEST)
    for region, ids in ((EAST, east), (WEST, west)):
        plain_client(sandbox, region).stop_instances(InstanceIds=ids)
    done = {Pair(None, EAST): east, Pair("123456789012", WEST): west}

    def make(pair: Pair) -> Any:
        return make_client(pair.region, endpoint_url=sandbox.endpoint, credentials=CREDENTIALS)

    report = wait_for(job("stop", done), done, make, quiet(), timeout=30)
    ledger = tmp_path / "l.jsonl"

    assert record_reached(str(ledger), "run1", "stop", report) == 5

    records = list(read_records(str(ledger)))
    assert {r.code for r in records} == {REACHED_CODE}
    assert {(r.run, r.action, r.status) for r in records} == {("run1", "stop", "succeeded")}
    by_id = {r.id: r for r in records}
    assert {by_id[i].region for i in east} == {EAST} and {by_id[i].account for i in east} == {None}
    assert {by_id[i].account for i in west} == {"123456789012"}
    assert all(r.reached == report.reached_at[r.id] for r in records)
    assert all(r.message == f"stopped at {r.reached}" for r in records)
    assert {key[1] for key in fold(records)} == {*east, *west}


def test_a_wait_needs_a_state_and_a_real_run() -> None:
    done = {Pair(None, EAST): ["i-1"]}
    no_target = Job(WAIT_SPEC, done, QUIET)
    with pytest.raises(ValueError, match="no state to wait for"):
        wait_for(no_target, done, lambda pair: None, quiet())
    dry = job("stop", done, RunOptions(progress="none", dry_run=True))
    with pytest.raises(ValueError, match="dry run"):
        wait_for(dry, done, lambda pair: None, quiet())


def test_record_reached_says_when_the_ledger_cannot_be_written(tmp_path: Any) -> None:
    report = WaitReport(run="w", action="wait", done={Pair(None, EAST): ["i-1"]}, target="stopped")
    with pytest.raises(LedgerError, match="cannot open the ledger"):
        record_reached(str(tmp_path / "no-such-folder" / "l.jsonl"), "run1", "stop", report)


def test_an_unchecked_instance_is_said_in_a_look_ups_words_and_in_doubt_once() -> None:
    """The wait's engine speaks of sending; the record is about looking an instance up,
    and only the action's own call may or may not be done."""
    stopped = Problem(
        "i-1", "pending", "Interrupted", "stopped by SIGTERM before it was sent again"
    )
    assert unreached(stopped, "stopped") == (
        "pending",
        "NotChecked",
        "--wait could not check it (Interrupted: stopped by SIGTERM before it was looked up "
        "again); may or may not be done",
    )
    hung = Problem(
        "i-2",
        "pending",
        "EndpointUnreachable",
        "in flight when the run stopped: may or may not be done",
    )
    status, _, message = unreached(hung, "stopped")
    assert message == (
        "--wait could not check it (EndpointUnreachable: in flight when the run stopped); "
        "may or may not be done"
    )
    assert message.count("may or may not be done") == 1 and status == "pending"
