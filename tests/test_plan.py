"""Plans against the sandbox over HTTP: each prediction is checked against the real run."""

from __future__ import annotations

import io
import json
from collections.abc import Callable, Iterator, Mapping
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from botocore.awsrequest import AWSResponse
from botocore.exceptions import NoCredentialsError
from rich.console import Console
from rich.text import Text
from typer.testing import CliRunner

from swarm_cli.actions import ACTIONS
from swarm_cli.cli import app
from swarm_cli.describe import AttributeCheck, InstanceInfo, describe, read_attribute
from swarm_cli.ec2 import InstanceCall, classify_exception, make_client
from swarm_cli.outcome import Kind
from swarm_cli.plan import Plan, Prediction, Row, estimate, make_plan, predict
from swarm_cli.plan_view import plan_json, render_plan, write_plan_ids
from swarm_cli.report import Pair
from swarm_cli.run import Job, RunOptions
from swarm_cli.sandbox import CREDENTIALS, BucketSpec, Sandbox, SandboxConfig, fake_ids
from swarm_cli.targets import read_targets
from swarm_cli.views import run_job

EAST, WEST = "us-east-1", "eu-west-1"
# As conftest's OPEN: no bucket sets the pace, but DescribeInstances' own, which a test sets.
OPEN = SandboxConfig(BucketSpec(10_000, 10_000), BucketSpec(100_000, 100_000))
HERE = Pair(None, EAST)
QUIET = RunOptions(progress="none")
A, D, IG, W, P, M = (
    Prediction.WOULD_ACT,
    Prediction.ALREADY,
    Prediction.IGNORED,
    Prediction.WRONG_STATE,
    Prediction.PROTECTED,
    Prediction.DOES_NOT_EXIST,
)
# What each prediction means for the run's record of that instance.
RECORDED = {A: "succeeded", D: "succeeded", IG: "succeeded", M: "missing", W: "failed", P: "failed"}


def quiet() -> Console:
    return Console(file=io.StringIO(), width=200)


def clients(box: Sandbox, hooks: Mapping[str, Callable[..., Any]] | None = None) -> Any:
    """Clients as swarm makes them, spending the sandbox's buckets as any user's would."""

    def make(pair: Pair) -> Any:
        client = make_client(pair.region, endpoint_url=box.endpoint, credentials=CREDENTIALS)
        for event, handler in (hooks or {}).items():
            client.meta.events.register(event, handler)
        return client

    return make


@pytest.fixture
def fleet(sandbox: Sandbox) -> Iterator[dict[str, str]]:
    """Nine instances in every state a plan tells apart, and two IDs that do not exist.

    Names: p0, p1 running with termination and stop protection; s2 running with stop
    protection; r3, r4 running; x5, x6 stopped; t7 terminated; q8 stopped with
    termination protection; m9, m10 missing.
    """
    ids = sandbox.launch(9, protected=2, stop_protected=3)
    admin = sandbox.client()
    admin.stop_instances(InstanceIds=[ids[5], ids[6], ids[8]])
    admin.terminate_instances(InstanceIds=[ids[7]])
    admin.modify_instance_attribute(InstanceId=ids[8], DisableApiTermination={"Value": True})
    admin.create_tags(
        Resources=[ids[0], ids[3]],
        Tags=[{"Key": "Name", "Value": "web-1"}, {"Key": "team", "Value": "blue"}],
    )
    names = ["p0", "p1", "s2", "r3", "r4", "x5", "x6", "t7", "q8"]
    by_name = dict(zip(names, ids, strict=True))
    by_name.update(zip(["m9", "m10"], fake_ids(2), strict=True))
    yield by_name


# The prediction for each instance of ``fleet``, per action.
EXPECTED = {
    "terminate": {
        **dict.fromkeys(["p0", "p1", "q8"], P),
        **dict.fromkeys(["s2", "r3", "r4", "x5", "x6"], A),
        "t7": D,
        **dict.fromkeys(["m9", "m10"], M),
    },
    "stop": {
        **dict.fromkeys(["p0", "p1", "s2"], P),
        **dict.fromkeys(["r3", "r4"], A),
        **dict.fromkeys(["x5", "x6", "q8"], D),
        "t7": W,
        **dict.fromkeys(["m9", "m10"], M),
    },
    "start": {
        **dict.fromkeys(["p0", "p1", "s2", "r3", "r4"], D),
        **dict.fromkeys(["x5", "x6", "q8"], A),
        "t7": W,
        **dict.fromkeys(["m9", "m10"], M),
    },
    "reboot": {
        **dict.fromkeys(["p0", "p1", "s2", "r3", "r4"], A),
        **dict.fromkeys(["x5", "x6", "q8"], W),
        "t7": IG,
        **dict.fromkeys(["m9", "m10"], M),
    },
}
# Missing IDs among the others, so that the real run's batches hold them.
ORDER = ["r3", "m9", "p0", "x5", "t7", "s2", "m10", "q8", "p1", "r4", "x6"]


def real_outcomes(box: Sandbox, action: str, ids: list[str]) -> dict[str, str]:
    """Run the action for real, in batches of 4, and record each instance's status."""
    spec = ACTIONS[action]
    make = clients(box)
    report = run_job(
        Job(spec, {HERE: ids}, RunOptions(progress="none", batch_size=4)),
        lambda pair: InstanceCall(make(pair), spec),
        quiet(),
        classify=classify_exception,
    )
    out = dict.fromkeys(report.done[HERE], "succeeded")
    out.update({p.id: p.status for p in report.problems})
    return out


@pytest.mark.parametrize("action", ["terminate", "stop", "start", "reboot"])
def test_each_prediction_is_what_the_real_run_then_records(
    sandbox: Sandbox, fleet: dict[str, str], action: str
) -> None:
    spec = ACTIONS[action]
    ids = [fleet[n] for n in ORDER]
    states_before = sandbox.states()

    plan = make_plan(spec, {HERE: ids}, clients(sandbox), quiet(), options=QUIET)

    name_of = {i: n for n, i in fleet.items()}
    predicted = {name_of[r.id]: r.prediction for r in plan.rows}
    assert predicted == EXPECTED[action]
    assert [r.id for r in plan.rows] == ids  # in the list's order
    assert sandbox.states() == states_before  # the plan changed nothing
    assert sandbox.accepted_ids() == set()
    assert plan.permission[HERE].allowed is True
    assert plan.acting_ids() == {HERE: [r.id for r in plan.rows if r.prediction is A]}

    outcomes = real_outcomes(sandbox, action, ids)

    assert {name_of[i]: s for i, s in outcomes.items()} == {
        n: RECORDED[p] for n, p in EXPECTED[action].items()
    }


def test_a_plan_says_what_each_kind_of_call_cost(sandbox: Sandbox, fleet: dict[str, str]) -> None:
    ids = [fleet[n] for n in ORDER]

    plan = make_plan(ACTIONS["terminate"], {HERE: ids}, clients(sandbox), quiet(), options=QUIET)

    # One DescribeInstances holding the missing IDs: bisected until they are named.
    assert plan.calls["DescribeInstances"] >= 2
    # The instances that would be terminated, and the two protected ones among them.
    assert plan.calls["DescribeInstanceAttribute"] == 8
    assert plan.calls["TerminateInstances (DryRun)"] == 1
    assert sandbox.calls_by("TerminateInstances") == 1
    assert sandbox.calls_by("DescribeInstances") == plan.calls["DescribeInstances"]
    assert plan.protection_checked
    assert [fleet[n] for n in ("p0", "q8", "p1")] == [r.id for r in plan.rows if r.prediction is P]
    assert len(plan.would_fail) == 5  # three protected, two missing
    assert plan.counts["would act"] == 5
    assert plan.counts["already in target state"] == 1


def test_without_the_protection_check_protected_instances_would_act(
    sandbox: Sandbox, fleet: dict[str, str]
) -> None:
    ids = [fleet[n] for n in ("p0", "s2", "r3")]

    plan = make_plan(
        ACTIONS["stop"],
        {HERE: ids},
        clients(sandbox),
        quiet(),
        options=QUIET,
        check_protection=False,
    )

    assert [r.prediction for r in plan.rows] == [A, A, A]
    assert "DescribeInstanceAttribute" not in plan.calls
    assert not plan.protection_checked


def test_start_and_reboot_read_no_protection(sandbox: Sandbox, fleet: dict[str, str]) -> None:
    for action in ("start", "reboot"):
        plan = make_plan(
            ACTIONS[action], {HERE: [fleet["p0"]]}, clients(sandbox), quiet(), options=QUIET
        )
        assert "DescribeInstanceAttribute" not in plan.calls


def test_describe_reads_state_type_launch_time_and_tags(
    sandbox: Sandbox, fleet: dict[str, str]
) -> None:
    ids = [fleet[n] for n in ("p0", "x5", "t7", "m9")]

    found = describe({HERE: ids}, clients(sandbox), quiet(), options=QUIET)[HERE]

    web = found[fleet["p0"]]
    assert web is not None
    assert (web.state, web.type, web.name) == ("running", "t3.micro", "web-1")
    assert web.tags == {"Name": "web-1", "team": "blue"}
    assert isinstance(web.launch_time, datetime)
    stopped, gone = found[fleet["x5"]], found[fleet["t7"]]
    assert stopped is not None and stopped.state == "stopped" and stopped.name is None
    assert gone is not None and gone.state == "terminated"
    assert found[fleet["m9"]] is None


def test_protection_attributes_are_read_one_instance_a_call(
    sandbox: Sandbox, fleet: dict[str, str]
) -> None:
    ids = [fleet[n] for n in ("p0", "s2", "r3", "m9")]
    groups = {HERE: ids}

    stop = read_attribute(
        groups, clients(sandbox), quiet(), attribute="disableApiStop", options=QUIET
    )
    term = read_attribute(
        groups, clients(sandbox), quiet(), attribute="disableApiTermination", options=QUIET
    )

    assert stop[HERE] == {fleet["p0"]: True, fleet["s2"]: True, fleet["r3"]: False}
    assert term[HERE] == {fleet["p0"]: True, fleet["s2"]: False, fleet["r3"]: False}


def test_an_attribute_check_sends_a_larger_batch_back_to_travel_alone() -> None:
    class NoCalls:
        def describe_instance_attribute(self, **_: Any) -> Any:
            raise AssertionError("no call for a batch of two")

    outcomes = AttributeCheck(NoCalls(), "disableApiStop")(["i-1", "i-2"])

    assert {o.kind for o in outcomes.values()} == {Kind.REQUEUE}
    assert {o.batch_limit for o in outcomes.values()} == {1}


def test_a_throttled_describe_still_reads_every_instance() -> None:
    config = SandboxConfig(
        OPEN.requests, OPEN.resources, limits={"DescribeInstances": (BucketSpec(2, 20), None)}
    )
    with Sandbox(config) as box:
        ids = box.launch(40)
        missing = fake_ids(3)

        found = describe(
            {HERE: ids[:20] + missing + ids[20:]},
            clients(box),
            quiet(),
            options=QUIET,
            batch_size=3,
        )[HERE]

        assert box.throttles_by("DescribeInstances") > 0
    assert {i for i, info in found.items() if info is not None} == set(ids)
    assert {i for i, info in found.items() if info is None} == set(missing)


def ec2_error(request: Any, status: int, code: str, message: str) -> AWSResponse:
    """EC2's error answer, as a botocore before-send handler returns it instead of sending."""
    body = (
        '<?xml version="1.0" encoding="UTF-8"?><Response><Errors><Error>'
        f"<Code>{code}</Code><Message>{message}</Message></Error></Errors>"
        "<RequestID>r-1</RequestID></Response>"
    ).encode()

    class Raw:
        def stream(self, **_: Any) -> Iterator[bytes]:
            yield body

    return AWSResponse(request.url, status, {"Content-Type": "text/xml"}, Raw())


def _unauthorized(request: Any, **_: Any) -> AWSResponse:
    """EC2's answer to a caller whose policy does not allow the action."""
    return ec2_error(
        request, 403, "UnauthorizedOperation", "You are not authorized to perform this operation."
    )


def test_a_refused_dry_run_makes_every_action_of_its_pair_not_permitted(
    sandbox: Sandbox, fleet: dict[str, str]
) -> None:
    # moto never refuses a DryRun, so this pair's action calls get EC2's refusal here;
    # its reads still go over HTTP to the sandbox.
    refuse = clients(sandbox, {"before-send.ec2.TerminateInstances": _unauthorized})
    ids = [fleet[n] for n in ORDER]

    plan = make_plan(
        ACTIONS["terminate"],
        {HERE: ids},
        lambda pair: refuse(pair),
        quiet(),
        options=QUIET,
    )

    permission = plan.permission[HERE]
    assert permission.allowed is False
    assert permission.code == "UnauthorizedOperation"
    assert permission.checked_id == fleet["r3"]  # the first that would act
    assert plan.acting_ids() == {}
    assert plan.counts["not permitted"] == 5
    assert len(plan.would_fail) == 10  # everything but the terminated one
    assert estimate(ACTIONS["terminate"], plan, 10).pairs == []
    # The run would stop on that refusal (exit 4): so does the plan.
    assert plan.fatal is not None and "UnauthorizedOperation" in plan.fatal


def info(i: str, state: str = "running") -> InstanceInfo:
    return InstanceInfo(i, state, "t3.micro", None, {}, None)


def synthetic(counts: dict[Pair, int], action: str = "terminate") -> Plan:
    rows = [
        Row(pair, f"i-{n:017x}", info(f"i-{n:017x}"), A)
        for pair, count in counts.items()
        for n in range(count)
    ]
    return Plan(ACTIONS[action], rows)


def test_a_long_plan_shows_the_rows_not_to_be_acted_on_first() -> None:
    """An approver reads the table in a job's summary: a protected row far down the list
    must not fall past the rows shown."""
    plan = synthetic({HERE: 280})
    for k in (120, 260):
        plan.rows[k] = replace(plan.rows[k], prediction=P, reason="termination protection")
    plan.rows[200] = replace(plan.rows[200], prediction=Prediction.UNKNOWN, reason="?")
    console = quiet()

    render_plan(plan, estimate(ACTIONS["terminate"], plan, 2), console)

    text = console.file.getvalue()  # type: ignore[attr-defined]
    shown = [line for line in text.splitlines() if "i-0" in line]
    assert [plan.rows[k].id in shown[n] for n, k in enumerate((120, 200, 260))] == [True] * 3
    assert plan.rows[0].id in text and plan.rows[47].id not in text
    assert "… and 230 more rows (rows that would fail or could not be read come first" in text
    many = synthetic({HERE: 280})
    many.rows = [replace(r, prediction=P) if k % 4 == 0 else r for k, r in enumerate(many.rows)]
    render_plan(many, estimate(ACTIONS["terminate"], many, 2), console)
    assert (
        "230 more rows, 20 of them that would fail or could not be read" in console.file.getvalue()
    )  # type: ignore[attr-defined]


def test_the_estimate_is_the_longest_pairs_bound_times_the_overhead() -> None:
    plan = synthetic({HERE: 280, Pair(None, WEST): 10})

    est = estimate(ACTIONS["terminate"], plan, 2)

    # 140 calls: 100 from the burst, 40 more at 5 per second; 280 instances fit in 1000.
    assert est.bound_seconds == pytest.approx(8.0)
    assert est.expected_seconds == pytest.approx(8.4)
    assert est.longest is not None and est.longest.pair == HERE


def test_the_instance_bucket_can_set_the_bound() -> None:
    plan = synthetic({HERE: 1200}, "stop")

    est = estimate(ACTIONS["stop"], plan, 100)

    # 12 calls fit the burst of 50; 1200 instances are 200 past the burst of 1000, at 20/s.
    assert est.bound_seconds == pytest.approx(10.0)
    assert est.pairs[0].calls == 12


def test_an_auto_batch_is_estimated_at_the_quicker_of_its_first_size_and_its_largest() -> None:
    """2,000 instances and 2 IDs that do not exist: in calls of 1,000 each missing one
    sends about 999 instances again (the instance bucket pays: 3x the time); auto starts
    at 10 and stays small when refusals come, so its estimate is the small batch's. A
    clean list is the large batch's, which auto grows to."""
    spec = ACTIONS["terminate"]
    plan = synthetic({HERE: 2000})
    for k in (500, 1500):
        plan.rows[k] = Row(HERE, f"i-gone{k}", None, M)
    # 1,000 instances past the burst at 20/s, and about 9 more per missing ID (in calls
    # of 10) or 999 more (in calls of 1,000).
    assert estimate(spec, plan, spec.limits.per_call).bound_seconds == pytest.approx(149.9)
    assert estimate(spec, plan, 10, auto=True).bound_seconds == pytest.approx(50.9)
    clean = synthetic({HERE: 2000})
    assert estimate(spec, clean, 10, auto=True).bound_seconds == pytest.approx(50.0)


def test_refused_ids_cost_the_calls_of_their_split() -> None:
    plan = synthetic({HERE: 20})
    plan.rows[3] = Row(HERE, "i-gone", None, M)
    plan.rows[12] = Row(HERE, "i-prot", info("i-prot"), P)

    whole = estimate(ACTIONS["terminate"], plan, 10)
    acting = estimate(ACTIONS["terminate"], plan, 10, only_acting=True)

    assert whole.pairs[0].calls == 2 + 2 * 2
    assert acting.pairs[0].calls == 2
    assert acting.pairs[0].ids == 18


def test_predictions_for_states_the_sandbox_never_shows() -> None:
    terminate, stop, start, reboot = (ACTIONS[a] for a in ("terminate", "stop", "start", "reboot"))
    assert predict(terminate, info("i-1", "shutting-down"), None) is D
    assert predict(stop, info("i-1", "stopping"), None) is D
    assert predict(start, info("i-1", "stopping"), None) is W
    assert predict(stop, info("i-1", "pending"), None) is W  # EC2 stops none still pending
    # ... only until they get there: said so.
    from swarm_cli.plan import _judge

    assert _judge(start, info("i-1", "stopping"), None)[1] == (
        "stopping: IncorrectInstanceState until it is stopped"
    )
    assert _judge(stop, info("i-1", "pending"), None)[1] == (
        "pending: IncorrectInstanceState until it is running"
    )
    assert _judge(start, info("i-1", "terminated"), None)[1] == "terminated: IncorrectInstanceState"
    # A reboot is refused stopped as well: a stopping instance is no passing refusal.
    assert _judge(reboot, info("i-1", "stopping"), None)[1] == "stopping: IncorrectInstanceState"
    assert predict(reboot, info("i-1", "shutting-down"), None) is IG
    assert predict(terminate, info("i-1", "stopped"), True) is P
    assert predict(terminate, info("i-1", "terminated"), True) is D  # protection is moot
    assert predict(stop, None, None) is M
    assert predict(stop, info("i-1", "hibernating"), None) is Prediction.UNKNOWN


def test_rendering_samples_fifty_rows_and_states_the_estimate() -> None:
    plan = synthetic({HERE: 280})
    plan.calls = {"DescribeInstances": 2, "TerminateInstances (DryRun)": 1}
    console = quiet()

    render_plan(plan, estimate(ACTIONS["terminate"], plan, 2), console)

    text = console.file.getvalue()  # type: ignore[attr-defined]
    assert "… and 230 more rows" in text and "of them not to be acted on" not in text
    assert plan.rows[49].id in text and plan.rows[50].id not in text
    assert "280 would act" in text
    assert "2 DescribeInstances, 1 TerminateInstances (DryRun)" in text
    assert (
        "at EC2's default limits for TerminateInstances: bound 8.0 s, expected about 8.4 s" in text
    )


def test_in_a_log_the_table_is_as_wide_as_its_cells_and_on_a_terminal_fits_it() -> None:
    name = "build-runner-" + "x" * 40
    account = "111111111111"
    rows = [
        Row(Pair(account, region), f"i-{n:017x}", replace(info(f"i-{n:017x}"), name=name), M)
        for n, region in enumerate((EAST, WEST))
    ]
    plan = Plan(ACTIONS["terminate"], rows)
    est = estimate(ACTIONS["terminate"], plan, 2)
    log = Console(file=io.StringIO(), width=80)  # not a terminal: rich's 80 columns
    render_plan(plan, est, log)
    lines = log.file.getvalue().splitlines()  # type: ignore[attr-defined]
    for row in rows:
        (line,) = [line for line in lines if row.id in line]
        assert name in line and f"{account}/" in line and "does not exist" in line
    assert "…" not in "".join(lines)
    screen = Console(file=io.StringIO(), width=80, force_terminal=True)
    render_plan(plan, est, screen)
    shown = screen.file.getvalue().splitlines()  # type: ignore[attr-defined]
    assert max(len(Text.from_ansi(line).plain) for line in shown) <= 80
    # A Name tag of EC2's 256 characters is cut at 64 in a log: not every line that wide.
    long = "n" * 256
    rows[0] = replace(rows[0], info=replace(info(rows[0].id), name=long))
    log = Console(file=io.StringIO(), width=80)
    render_plan(Plan(ACTIONS["terminate"], rows), est, log)
    lines = log.file.getvalue().splitlines()  # type: ignore[attr-defined]
    (line,) = [line for line in lines if rows[0].id in line]
    assert "n" * 63 + "…" in line and "n" * 64 not in line
    assert max(len(line) for line in lines) < 200


def test_the_json_holds_every_row_and_the_estimate(sandbox: Sandbox, fleet: dict[str, str]) -> None:
    spec = ACTIONS["stop"]
    plan = make_plan(
        spec, {HERE: [fleet[n] for n in ORDER]}, clients(sandbox), quiet(), options=QUIET
    )

    data = json.loads(json.dumps(plan_json(plan, estimate(spec, plan, 10))))

    assert data["counts"] == plan.counts
    assert data["would_fail"] == 6 and data["would_act"] == 2
    assert len(data["rows"]) == 11
    web = next(r for r in data["rows"] if r["id"] == fleet["r3"])
    assert web["name"] == "web-1" and web["tags"]["team"] == "blue"
    assert web["prediction"] == "would act" and web["state"] == "running"
    assert data["estimate"]["api"] == "StopInstances"
    assert data["calls"]["StopInstances (DryRun)"] == 1


def test_one_pair_writes_plain_ids_that_the_cli_then_acts_on(
    sandbox: Sandbox, fleet: dict[str, str], tmp_path: Path
) -> None:
    spec = ACTIONS["terminate"]
    plan = make_plan(
        spec, {HERE: [fleet[n] for n in ORDER]}, clients(sandbox), quiet(), options=QUIET
    )
    path = tmp_path / "acting.txt"

    assert write_plan_ids(plan, str(path)) == 5
    targets = read_targets(str(path))
    assert targets.format == "plain" and targets.ids == plan.acting_ids()[HERE]

    result = CliRunner().invoke(
        app,
        [
            "terminate",
            "--ids",
            str(path),
            "--endpoint-url",
            sandbox.endpoint,
            "--yes",
            "--output",
            "json",
            "--progress",
            "none",
            "--ledger",
            str(tmp_path / "ledger.jsonl"),
        ],
    )
    summary = json.loads(result.stdout)
    assert summary["counts"]["succeeded"] == 5 and summary["exit_code"] == 0


def test_several_pairs_write_a_csv_with_each_ids_region(sandbox: Sandbox, tmp_path: Path) -> None:
    east = sandbox.launch(3, protected=1, region=EAST)
    west = sandbox.launch(2, region=WEST)
    west_pair = Pair(None, WEST)
    groups = {HERE: east, west_pair: west + fake_ids(1)}

    plan = make_plan(ACTIONS["terminate"], groups, clients(sandbox), quiet(), options=QUIET)

    assert plan.acting_ids() == {HERE: east[1:], west_pair: west}
    assert sandbox.calls_by("TerminateInstances", region=EAST) == 1
    assert sandbox.calls_by("TerminateInstances", region=WEST) == 1
    path = tmp_path / "acting.csv"
    write_plan_ids(plan, str(path))
    targets = read_targets(str(path))
    assert targets.format == "csv"
    assert [(t.id, t.region, t.account) for t in targets.items] == [
        *((i, EAST, None) for i in east[1:]),
        *((i, WEST, None) for i in west),
    ]


def test_a_pair_that_cannot_be_read_is_unknown_not_missing(sandbox: Sandbox) -> None:
    east = sandbox.launch(2, region=EAST)
    west_pair = Pair(None, WEST)
    reach = clients(sandbox)

    def make(pair: Pair) -> Any:
        if pair == west_pair:
            raise NoCredentialsError()
        return reach(pair)

    plan = make_plan(
        ACTIONS["stop"], {HERE: east, west_pair: fake_ids(2)}, make, quiet(), options=QUIET
    )

    assert plan.acting_ids() == {HERE: east}
    unknown = plan.unknown
    assert [r.pair for r in unknown] == [west_pair, west_pair]
    assert "NoCredentialsError" in unknown[0].reason
    assert plan.would_fail == []
    # The run would send the unread ones too: their pair's DryRun fails as the reads did.
    assert list(plan.permission) == [HERE, west_pair]
    assert plan.permission[HERE].allowed is True
    assert (plan.permission[west_pair].allowed, plan.permission[west_pair].code) == (
        None,
        "NoCredentialsError",
    )
    assert plan.fatal is not None and "NoCredentialsError" in plan.fatal


@pytest.mark.parametrize("command", [["plan", "terminate"], ["terminate", "--dry-run"]])
def test_a_plan_without_credentials_exits_four_as_the_run_would(
    sandbox: Sandbox, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, command: list[str]
) -> None:
    """Every row unknown for want of credentials is not a prediction (exit 1, which a CI
    plan step passes with a warning): the run would stop with 4, and so does its plan."""
    ids = sandbox.launch(3)
    path = tmp_path / "ids.txt"
    path.write_text("".join(f"{i}\n" for i in ids))
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    result = CliRunner().invoke(
        app, [*command, "--ids", str(path), "--endpoint-url", sandbox.endpoint, "-o", "json"]
    )
    data = json.loads(result.stdout)
    assert result.exit_code == 4 and data["exit_code"] == 4
    assert data["meaning"].startswith("credentials")
    assert data["counts"]["unknown"] == 3
    assert set(sandbox.states(ids).values()) == {"running"}


def test_a_runs_chart_series_ends_at_every_id_and_peaks_as_the_run_did(sandbox: Sandbox) -> None:
    """The HTML report's rate and in-flight curves come from the series: its last point
    holds every ID resolved (an answer's sample is taken before its IDs resolve), and its
    peak in flight is the run's (a sample at an answer sees one call fewer)."""
    ids = sandbox.launch(60) + fake_ids(3)
    spec = ACTIONS["terminate"]
    make = clients(sandbox)
    report = run_job(
        Job(spec, {HERE: ids}, RunOptions(progress="none", batch_size=1)),
        lambda pair: InstanceCall(make(pair), spec),
        quiet(),
        classify=classify_exception,
    )
    row = report.pairs[0]
    assert row.series[-1].done == 63 == row.counts["succeeded"] + row.counts["missing"]
    assert row.series[-1].t == pytest.approx(row.elapsed_seconds, abs=1e-3)
    assert max(s.in_flight for s in row.series) == row.peak_in_flight > 1


def test_a_plan_given_a_runs_options_says_it_ignores_them_and_writes_nothing(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    ids = sandbox.launch(2)
    path = tmp_path / "ids.txt"
    path.write_text("".join(f"{i}\n" for i in ids))
    report, trace = tmp_path / "plan.html", tmp_path / "trace.jsonl"
    result = CliRunner().invoke(
        app,
        ["plan", "stop", "--ids", str(path), "--endpoint-url", sandbox.endpoint,
         "--report", str(report), "--trace", str(trace), "--wait", "--max-errors", "1"],
    )  # fmt: skip
    assert result.exit_code == 0, result.stderr
    said = " ".join(result.stderr.split())
    assert "a plan sends nothing: --report, --trace, --wait, --max-errors (a run's options)" in said
    assert not report.exists() and not trace.exists()
    assert set(sandbox.states(ids).values()) == {"running"}


def plan_cli(box: Sandbox, tmp_path: Path, ids: list[str], *extra: str) -> tuple[int, Any]:
    path = tmp_path / "ids.txt"
    path.write_text("".join(f"{i}\n" for i in ids))
    result = CliRunner().invoke(
        app,
        [
            "plan",
            "terminate",
            "--ids",
            str(path),
            "--endpoint-url",
            box.endpoint,
            "-o",
            "json",
            *extra,
        ],
    )
    return result.exit_code, json.loads(result.stdout)


def test_a_refused_read_the_run_does_not_make_leaves_rows_unknown_and_exit_one(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    """Exit 4 is for what the run would meet too: a refused DescribeInstanceAttribute only
    leaves the protection unknown; the DryRun still checks the action's permission."""
    ids = sandbox.launch(3)
    sandbox.fail_action("DescribeInstanceAttribute", 403, "UnauthorizedOperation", "no")
    code, plan = plan_cli(sandbox, tmp_path, ids)
    assert code == 1 and plan["fatal"] is None
    assert {r["prediction"] for r in plan["rows"]} == {"unknown"}
    assert "--no-check-protection skips it" in plan["rows"][0]["reason"]
    assert plan["permission"][0]["allowed"] is True  # sent on an unread one
    assert sandbox.calls_by("TerminateInstances") == 1
    assert set(sandbox.states(ids).values()) == {"running"}


def test_a_dry_run_that_fails_for_good_makes_its_rows_unknown_and_exit_four(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    ids = sandbox.launch(2)
    sandbox.fail_action("TerminateInstances", 401, "OptInRequired", "not subscribed")
    code, plan = plan_cli(sandbox, tmp_path, ids, "--plan-out", str(tmp_path / "acting.txt"))
    assert code == 4 and "OptInRequired" in plan["fatal"]
    assert [r["prediction"] for r in plan["rows"]] == ["unknown"] * 2
    assert "the DryRun call failed: OptInRequired" in plan["rows"][0]["reason"]
    assert "0 instance(s)" in (tmp_path / "acting.txt").read_text()
    result = CliRunner().invoke(
        app, ["plan", "terminate", "--ids", str(tmp_path / "ids.txt"), "--endpoint-url",
              sandbox.endpoint],
    )  # fmt: skip
    said = " ".join(result.stdout.split())
    assert "the run would stop: OptInRequired: not subscribed (credentials or permission" in said


def test_the_dry_run_goes_to_an_id_the_run_would_send_never_one_a_rail_keeps(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    ids = sandbox.launch(3)
    sandbox.client().create_tags(Resources=ids[:2], Tags=[{"Key": "keep", "Value": "1"}])
    code, plan = plan_cli(sandbox, tmp_path, ids, "--protect-tag", "keep")
    assert code == 1
    assert [r["prediction"] for r in plan["rows"]] == ["protected", "protected", "would act"]
    assert plan["permission"][0]["checked_id"] == ids[2]
    # All kept back: no DryRun at all, so a refusal of it cannot fail the plan.
    sandbox.fail_action("TerminateInstances", 403, "UnauthorizedOperation", "no")
    code, plan = plan_cli(sandbox, tmp_path, ids[:2], "--protect-tag", "keep")
    assert code == 1 and plan["fatal"] is None and plan["permission"] == []
    assert sandbox.calls_by("TerminateInstances") == 1  # the first plan's only


def test_the_estimate_counts_no_call_for_what_the_run_records_without_one(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    ids = sandbox.launch(6)
    sandbox.client().create_tags(Resources=ids[:4], Tags=[{"Key": "keep", "Value": "1"}])
    code, plan = plan_cli(sandbox, tmp_path, ids, "--protect-tag", "keep", "--batch-size", "1")
    assert code == 1
    (pair,) = plan["estimate"]["pairs"]
    assert pair["calls"] == 2  # the two untagged: the tagged are recorded, never sent


def test_a_plan_where_none_would_act_still_asks_the_permission_the_run_needs(
    tmp_path: Path,
) -> None:
    """A start of instances still stopping acts on none, but the run sends every one (EC2
    refuses them): the plan said "permission not checked: the run would make no call"."""
    config = SandboxConfig(BucketSpec(1000, 1000), BucketSpec(1000, 1000), transition_seconds=60)
    with Sandbox(config) as box:
        ids = box.launch(3)
        box.client().stop_instances(InstanceIds=ids)
        plan = make_plan(ACTIONS["start"], {HERE: ids}, clients(box), quiet(), options=QUIET)
        assert {r.prediction for r in plan.rows} == {W}
        assert plan.permission[HERE].allowed is True
        assert box.calls_by("StartInstances") == 1  # the DryRun, which changes nothing
        assert set(box.states(ids).values()) == {"stopping"}


def test_a_plan_of_ids_that_do_not_exist_says_the_run_would_send_them(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    path = tmp_path / "ids.txt"
    path.write_text("i-0123456789abcdef0\ni-0123456789abcdef1\n")
    result = CliRunner().invoke(
        app, ["plan", "terminate", "--ids", str(path), "--endpoint-url", sandbox.endpoint]
    )
    said = " ".join((result.stdout + result.stderr).split())
    assert "the run would send the 2 that do not exist, to find them missing" in said, said
    assert "the run would make no call" not in said


def test_instances_on_a_later_page_of_describe_are_found_not_missing(sandbox: Sandbox) -> None:
    """Instances launched one by one are a reservation each, and an answer holds 100
    reservations and a NextToken: the plan, the rails and --wait read every page."""
    from swarm_cli.sandbox import IMAGE_ID, INSTANCE_TYPE
    from swarm_cli.wait import WaitForState

    admin = sandbox.client()
    ids = [
        admin.run_instances(ImageId=IMAGE_ID, MinCount=1, MaxCount=1, InstanceType=INSTANCE_TYPE)[
            "Instances"
        ][0]["InstanceId"]
        for _ in range(130)
    ]
    first = admin.describe_instances(InstanceIds=ids)
    assert "NextToken" in first and len(first["Reservations"]) < 130  # the sandbox pages

    found = describe({HERE: ids}, clients(sandbox), quiet(), options=QUIET)[HERE]
    assert all(found[i] is not None and found[i].state == "running" for i in ids)
    client = make_client(HERE.region, endpoint_url=sandbox.endpoint, credentials=CREDENTIALS)
    seen = WaitForState(client, "running")(ids)
    assert {o.code for o in seen.values()} == {"Reached"}


def test_a_read_that_got_no_answer_is_not_said_to_have_maybe_acted(tmp_path: Path) -> None:
    """A plan only reads: its rows unread for server errors said "an earlier call may
    have acted (HTTP 500): may or may not be done"."""
    with Sandbox(OPEN) as box:
        ids = box.launch(2)
        # A region the sandbox does not serve: every call answered 500.
        code, plan = plan_cli(box, tmp_path, ids, "--region", "eu-wset-1", "--max-attempts", "2")
    assert code == 1, plan
    reasons = [r["reason"] for r in plan["rows"]]
    assert all("HTTP 500" in r for r in reasons), reasons
    assert not any("may have acted" in r or "may or may not" in r for r in reasons), reasons


def test_an_instance_left_out_of_describes_answer_is_refused_by_the_plans_rail_as_the_runs(
    sandbox: Sandbox, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An answer that leaves an instance out with no error naming it (a proxy, a page
    lost): the run's --protect-tag cannot read its tags and refuses it (exit 3); the
    plan said "does not exist", and with --missing-ok passed (exit 0)."""
    import swarm_cli.describe as describe_module

    ids = sandbox.launch(3)
    hidden = ids[0]
    real = describe_module.describe_instances_by_id

    def leaving_out(client: Any, wanted: Any) -> Any:
        answer = dict(real(client, wanted))
        answer["Reservations"] = [
            {**r, "Instances": [i for i in r["Instances"] if i["InstanceId"] != hidden]}
            for r in answer["Reservations"]
        ]
        return answer

    monkeypatch.setattr(describe_module, "describe_instances_by_id", leaving_out)
    for extra in ((), ("--missing-ok",)):
        code, plan = plan_cli(sandbox, tmp_path, ids, "--protect-tag", "keep", *extra)
        assert code == 3, plan
        row = next(r for r in plan["rows"] if r["id"] == hidden)
        assert row["prediction"] == "unknown" and "not listed" in row["reason"], row
    # Without a rail, nothing reads its tags: as before, predicted not there.
    code, plan = plan_cli(sandbox, tmp_path, ids)
    assert next(r for r in plan["rows"] if r["id"] == hidden)["prediction"] == "does not exist"
