"""swarm ec2 OPERATION: every operation of the registry end to end against the sandbox
(throttled, over real HTTP), its plan, a kill -9 and a resume of each, --wait, and
create-tags batched."""

from __future__ import annotations

import json
import random
import re
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import OPEN
from rich.console import Console
from test_cli import swarm, write_ids
from test_faults import lines, wait_until

from swarm_cli.actions import ACTIONS
from swarm_cli.actions.operations import OPERATIONS
from swarm_cli.cli.pairs import succeeded
from swarm_cli.ledger import fold, read_records
from swarm_cli.outcome import Kind
from swarm_cli.sandbox import BucketSpec, Sandbox, SandboxConfig, fake_ids

# Every action's call bucket scaled to 2.5 burst / 40 per second: tens of calls throttle.
THROTTLED = SandboxConfig(BucketSpec(5, 40), BucketSpec(100_000, 100_000), latency=0.01)
# A refill that the startup's first window outruns however slow the machine (its round
# trip would have to pass a second), so the bucket's limit is always met.
STINGY = SandboxConfig(BucketSpec(5, 5), BucketSpec(100_000, 100_000), latency=0.01)
# Operation -> (the kind Sandbox.seed makes, the Describe filter that finds it, its list).
DELETIONS = {
    "delete-snapshot": ("snapshots", "describe_snapshots", "snapshot-id", "Snapshots"),
    "delete-volume": ("volumes", "describe_volumes", "volume-id", "Volumes"),
    "deregister-image": ("images", "describe_images", "image-id", "Images"),
    "release-address": ("addresses", "describe_addresses", "allocation-id", "Addresses"),
}


def ec2(box: Sandbox, op: str, ids_file: str, ledger: Path, *extra: str) -> tuple[int, Any, str]:
    code, out, err = swarm(
        "ec2",
        op,
        "--ids",
        ids_file,
        "--endpoint-url",
        box.endpoint,
        "--ledger",
        str(ledger),
        "--yes",
        "--output",
        "json",
        "--progress",
        "none",
        *extra,
    )
    assert out, err
    return code, json.loads(out), err


def still_there(box: Sandbox, op: str, ids: list[str]) -> set[str]:
    _, method, name, key = DELETIONS[op]
    answer = getattr(box.client(), method)(Filters=[{"Name": name, "Values": ids}])
    id_key = {"Addresses": "AllocationId"}.get(key, key[:-1] + "Id")
    return {item[id_key] for item in answer[key]}


def statuses(ledger: Path) -> dict[str, tuple[str, str | None]]:
    return {i: (r.status, r.code) for (_, i), r in fold(read_records(str(ledger))).items()}


def test_each_entry_reads_its_id_parameter_and_ids_per_call_from_botocore() -> None:
    snapshot, tags = OPERATIONS["delete-snapshot"].model, OPERATIONS["create-tags"].model
    assert (snapshot.method, snapshot.many, snapshot.per_call) == ("delete_snapshot", False, 1)
    assert (tags.method, tags.many, tags.per_call) == ("create_tags", True, 1000)
    assert OPERATIONS["release-address"].spec.limits.per_call == 1
    # The instance operations are the instance actions themselves: one ledger, one resume.
    assert OPERATIONS["terminate-instances"].spec is ACTIONS["terminate"]
    assert OPERATIONS["start-instances"].inverse == "stop-instances"
    for op in OPERATIONS.values():
        assert op.model.id_param == op.id_param


def test_swarm_ec2_help_lists_every_operation() -> None:
    code, out, _ = swarm("ec2", "--help")
    assert code == 0
    for name in OPERATIONS:
        assert name in out


@pytest.mark.parametrize("op", sorted(DELETIONS))
def test_a_deletion_removes_the_free_ones_and_fails_those_in_use_with_their_reason(
    tmp_path: Path, op: str
) -> None:
    kind = DELETIONS[op][0]
    with Sandbox(STINGY) as box:
        made = box.seed(**{kind: 12}, in_use=2)[kind]
        ledger = tmp_path / "l.jsonl"
        code, report, err = ec2(box, op, write_ids(tmp_path / "ids.txt", made), ledger)
        busy = set(made[:2]) if op != "deregister-image" else set()  # an AMI is never in use
        assert still_there(box, op, made) == busy
        seen = statuses(ledger)
        assert {i for i, (status, _) in seen.items() if status == "succeeded"} == set(made) - busy
        assert report["counts"]["failed"] == len(busy)
        assert code == (1 if busy else 0), err
        in_use = OPERATIONS[op].in_use_codes
        for problem in report["problems"]:
            assert problem["code"] in in_use and problem["message"], problem
        # Each ID reached EC2 once (throttled calls never do): those in use were not retried.
        assert box.calls_by(OPERATIONS[op].api) == len(made)
        assert box.throttles_by(OPERATIONS[op].api) > 0  # it ran at the bucket's limit


def test_the_plan_predicts_in_use_and_missing_and_sends_nothing(tmp_path: Path) -> None:
    with Sandbox(THROTTLED) as box:
        made = box.seed(snapshots=5, in_use=1)["snapshots"]
        unknown = "snap-0123456789abcdef0"
        ids = write_ids(tmp_path / "ids.txt", [*made, unknown])
        code, plan, err = ec2(box, "delete-snapshot", ids, tmp_path / "l.jsonl", "--dry-run")
        assert code == 1, err
        rows = {r["id"]: r for r in plan["rows"]}
        assert rows[made[0]]["prediction"] == "wrong state"
        assert "InvalidSnapshot.InUse" in rows[made[0]]["reason"]
        assert rows[unknown]["prediction"] == "does not exist"
        assert [rows[i]["prediction"] for i in made[1:]] == ["would act"] * 4
        # One DryRun call checked the permission; nothing was deleted.
        assert box.calls_by("DeleteSnapshot") == 1 and box.done_by("DeleteSnapshot") == {}
        assert plan["calls"] == {
            "DescribeSnapshots": 1,
            "DescribeImages": 1,  # which AMIs use them
            "DeleteSnapshot (DryRun)": 1,
        }
        assert still_there(box, "delete-snapshot", made) == set(made)
        # For people: a snapshot's columns (created, no type), and why a row would fail.
        code, out, err = swarm(
            "plan", "delete-snapshot", "--ids", ids, "--endpoint-url", box.endpoint
        )
        assert code == 1, err
        header = out.splitlines()[2]
        assert "created" in header and "launched" not in header and "type" not in header, out
        assert "wrong state: in use by ami-" in out and "InvalidSnapshot.InUse" in out, out
        assert "would act:" not in out, out  # a row that would go as asked needs no why
        # --protect-tag reads the tags as the run will: its DescribeTags calls are counted.
        code, plan, err = ec2(
            box, "delete-snapshot", ids, tmp_path / "l.jsonl", "--dry-run", "--protect-tag", "k"
        )
        assert code == 1, err
        assert plan["calls"] == {
            "DescribeSnapshots": 1,
            "DescribeImages": 1,
            "DescribeTags": 1,
            "DeleteSnapshot (DryRun)": 1,
        }
        # Tags take any ID and nothing shows them done: each would act, none looked up.
        code, out, err = swarm(
            "ec2",
            "create-tags",
            "--ids",
            ids,
            "--tag",
            "a=b",
            "--dry-run",
            "--endpoint-url",
            box.endpoint,
        )
        assert code == 0 and "6 would act" in out, err
        assert "the tags it would set: a=b" in out
        # Its DryRun (on the first ID) checks the permission, and that is all it sends.
        assert "the plan cost 1 CreateTags (DryRun) call(s)" in out, out
        assert box.calls_by("CreateTags") == 1
        tags = box.client().describe_tags(Filters=[{"Name": "key", "Values": ["a"]}])["Tags"]
        assert tags == []


@pytest.mark.parametrize(
    ("op", "item", "reason"),
    [
        ("delete-volume", {"VolumeId": "vol-1", "State": "creating"}, "IncorrectState"),
        ("delete-volume", {"VolumeId": "vol-1", "State": "available"}, None),
        ("delete-volume", {"VolumeId": "vol-1", "State": "error"}, None),
        ("deregister-image", {"ImageId": "ami-1", "DeregistrationProtection": "enabled"}, "On"),
        (
            "deregister-image",
            {"ImageId": "ami-1", "DeregistrationProtection": "enabled-with-cooldown"},
            "On",
        ),
        ("deregister-image", {"ImageId": "ami-1", "DeregistrationProtection": "disabled"}, None),
        (  # disabled, but in its cooldown until then
            "deregister-image",
            {"ImageId": "ami-1", "DeregistrationProtection": "disabled-until 2999-05-17T21:00:01Z"},
            "On",
        ),
        (
            "deregister-image",
            {"ImageId": "ami-1", "DeregistrationProtection": "disabled-until 2020-05-17T21:00:01Z"},
            None,
        ),
        ("deregister-image", {"ImageId": "ami-1"}, None),
    ],
)
def test_the_plan_reads_the_states_ec2_refuses_that_the_sandbox_cannot_make(
    op: str, item: dict[str, str], reason: str | None
) -> None:
    # A volume still creating and an AMI under deregistration protection: moto makes
    # neither, so the Describe item is given as EC2 documents it.
    observe = OPERATIONS[op].observe
    assert observe is not None and observe.in_use is not None
    said = observe.in_use(item, dict)
    if reason is None:
        assert said is None
    else:
        assert said is not None
        code = said.rsplit(": ", 1)[1]
        assert code in OPERATIONS[op].in_use_codes, said
        if reason == "On":
            assert item["DeregistrationProtection"] in said


def test_create_tags_carries_a_thousand_ids_per_call_and_delete_tags_takes_them_off(
    tmp_path: Path,
) -> None:
    with Sandbox(THROTTLED) as box:
        instances = fake_ids(1001, random.Random(3))
        box.load_ids(instances)  # straight into moto: launching them would take seconds
        unknown = "vol-0123456789abcdef0"
        ids = write_ids(tmp_path / "ids.txt", [*instances, unknown])
        ledger = tmp_path / "l.jsonl"
        code, report, err = ec2(
            box, "create-tags", ids, ledger, "--tag", "team=data", "--batch-size", "1000"
        )
        assert code == 1, err
        assert report["counts"]["succeeded"] == 1001 and report["counts"]["missing"] == 1
        # 1000 + 2 IDs; the unknown one fails its call, which names it: settled, and the
        # other sent again alone.
        assert box.calls_by("CreateTags") == 3
        tagged = box.client().describe_tags(Filters=[{"Name": "key", "Values": ["team"]}])
        assert {t["ResourceId"] for t in tagged["Tags"]} == set(instances)
        code, report, err = ec2(
            box,
            "delete-tags",
            write_ids(tmp_path / "i.txt", instances),
            ledger,
            "--tag",
            "team",
        )
        assert code == 0, err
        assert (
            box.client().describe_tags(Filters=[{"Name": "key", "Values": ["team"]}])["Tags"] == []
        )
        # --batch-size auto (the default): tags spend no instance tokens, so each call
        # carries as many IDs as EC2 takes.
        assert report["batch_size"] == "auto", report
        assert box.calls_by("DeleteTags") == 2


def test_tags_are_asked_for_and_instance_options_refused(sandbox: Sandbox, tmp_path: Path) -> None:
    ids = write_ids(tmp_path / "ids.txt", ["vol-0123456789abcdef0"])
    code, _, err = swarm("ec2", "delete-tags", "--ids", ids, "--yes")
    assert code == 2 and "--tag" in err  # DeleteTags without Tags would remove every tag
    code, _, err = swarm("ec2", "delete-volume", "--ids", ids, "--yes", "--rollback")
    assert code == 2 and "--rollback" in err
    # A deletion's undo is not a matter of tags: EC2 does not bring a volume back.
    assert "tags" not in err and "does not come back" in " ".join(err.split()), err
    # Nothing shows a tag done: there is nothing to wait for.
    tags = ("--ids", ids, "--tag", "a=b", "--yes", "--wait", "--endpoint-url", sandbox.endpoint)
    code, _, err = swarm("ec2", "create-tags", *tags)
    assert code == 2 and "--wait: nothing to wait for" in err, err
    assert sandbox.calls_by("CreateTags") == 0
    code, _, err = swarm("ec2", "delete-snapshot", "--ids", ids, "--yes")
    assert code == 2 and "not a snapshot ID" in err


def test_delete_volume_wait_ends_with_the_deleted_volumes_gone_and_records_it(
    tmp_path: Path,
) -> None:
    with Sandbox(THROTTLED) as box:
        made = box.seed(volumes=8, in_use=2)["volumes"]
        ledger = tmp_path / "l.jsonl"
        ids = write_ids(tmp_path / "ids.txt", made)
        code, report, err = ec2(box, "delete-volume", ids, ledger, "--wait")
        assert code == 1, err  # the two attached volumes fail; the wait does not
        assert still_there(box, "delete-volume", made) == set(made[:2])
        wait = report["wait"]
        assert (wait["target"], wait["reached"], wait["timed_out"]) == ("deleted", 6, 0), wait
        # Each deleted volume's run has its Reached record; the attached ones none.
        reached = {r.id for r in read_records(str(ledger)) if r.code == "Reached"}
        assert reached == set(made[2:])
        assert statuses(ledger)[made[2]] == ("succeeded", "Reached")


def test_delete_volume_wait_times_out_with_its_exit_code_and_says_so(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    made = sandbox.seed(volumes=3)["volumes"]
    ids = write_ids(tmp_path / "ids.txt", made)
    ledger = tmp_path / "l.jsonl"
    code, report, err = ec2(sandbox, "delete-volume", ids, ledger, "--wait", "--wait-timeout", "0")
    assert code == 1, err
    assert report["counts"]["succeeded"] == 3  # the run did its work; the wait ran out
    assert report["wait"]["timed_out"] == 3 and report["wait"]["reached"] == 0
    assert not any(r.code == "Reached" for r in read_records(str(ledger)))
    code, out, err = swarm(
        "ec2",
        "delete-volume",
        "--ids",
        write_ids(tmp_path / "more.txt", sandbox.seed(volumes=1)["volumes"]),
        "--endpoint-url",
        sandbox.endpoint,
        "--ledger",
        str(tmp_path / "m.jsonl"),
        "--yes",
        "--progress",
        "none",
        "--wait",
        "--wait-timeout",
        "0",
    )
    assert code == 1 and "wait for deleted: 0 reached, 1 timed out" in out + err, out + err
    # Counted done, as the ledger counts it: no retry whose list `ledger failed` leaves
    # empty, and no resume said to wait again (a deletion's does not).
    (line,) = [x for x in (out + err).splitlines() if "not seen deleted:" in x]
    assert "EC2 accepted their calls" in line and "--resume" not in line, line
    assert "ledger failed --retryable" not in out + err, out + err


def test_a_deletion_whose_answer_was_lost_is_done_when_its_repeat_finds_it_gone(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    """moto deletes the snapshot, the answer is lost (a 503 instead), the engine sends it
    again and hears InvalidSnapshot.NotFound: this run deleted it, it is not missing."""
    made = sandbox.seed(snapshots=3)["snapshots"]
    ledger = tmp_path / "l.jsonl"
    ids = write_ids(tmp_path / "ids.txt", made)
    sandbox.hang(after_effect=True)
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "swarm_cli",
            "ec2",
            "delete-snapshot",
            "--ids",
            ids,
            "--yes",
            "--ledger",
            str(ledger),
            "--endpoint-url",
            sandbox.endpoint,
            "--progress",
            "none",
        ],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_until(lambda: sandbox.counters.hung >= 1, proc)
    finally:
        sandbox.front.release_hung()  # the held call, done by moto, answers 503
        sandbox.hang(False)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert still_there(sandbox, "delete-snapshot", made) == set()
    assert set(sandbox.done_by("DeleteSnapshot").values()) == {1}  # each deleted once
    seen = statuses(ledger)
    assert {s for s, _ in seen.values()} == {"succeeded"}, seen
    assert [c for _, c in seen.values()].count("AlreadyGone") == 1, seen


def test_without_yes_and_no_terminal_nothing_is_asked_of_ec2_nor_sent(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    volumes = sandbox.seed(volumes=2)["volumes"]
    ids = write_ids(tmp_path / "ids.txt", volumes)
    code, _, err = swarm(
        "ec2",
        "delete-volume",
        "--ids",
        ids,
        "--endpoint-url",
        sandbox.endpoint,
        "--ledger",
        str(tmp_path / "l.jsonl"),
    )
    assert code == 3 and "refusing to delete-volume 2 volume(s)" in err, err
    assert sandbox.calls_by("DescribeInstances") == sandbox.calls_by("DeleteVolume") == 0
    assert still_there(sandbox, "delete-volume", volumes) == set(volumes)


def test_terminate_instances_is_swarm_terminate(sandbox: Sandbox, tmp_path: Path) -> None:
    ids = sandbox.launch(5)
    ledger = tmp_path / "l.jsonl"
    code, _, err = ec2(sandbox, "terminate-instances", write_ids(tmp_path / "ids.txt", ids), ledger)
    assert code == 0, err
    assert set(sandbox.states(ids).values()) == {"terminated"}
    assert {a for a, _ in fold(read_records(str(ledger)))} == {"terminate"}


def tagged(box: Sandbox, ids: list[str]) -> set[str]:
    answer = box.client().describe_tags(Filters=[{"Name": "key", "Values": ["team"]}])
    return {t["ResourceId"] for t in answer["Tags"]} & set(ids)


def _seed_kill_case(box: Sandbox, op: str, n: int) -> tuple[list[str], list[str]]:
    """The IDs a kill -9 case acts on, and the options it runs with."""
    if op in DELETIONS:
        return box.seed(**{DELETIONS[op][0]: n})[DELETIONS[op][0]], []
    ids = fake_ids(n, random.Random(7))
    box.load_ids(ids)
    if op == "delete-tags":
        # With a tag of their own besides: DescribeTags shows them, so a resume knows them
        # untagged (one with no tag left is sent again, as one that does not exist is).
        tags = [{"Key": "team", "Value": "data"}, {"Key": "Name", "Value": "x"}]
        box.client().create_tags(Resources=ids, Tags=tags)
        return ids, ["--tag", "team", "--batch-size", "1"]
    return ids, ["--tag", "team=data", "--batch-size", "1"]


def _left_to_do(box: Sandbox, op: str, ids: list[str]) -> set[str]:
    if op in DELETIONS:
        return still_there(box, op, ids)
    return set(ids) - tagged(box, ids) if op == "create-tags" else tagged(box, ids)


@pytest.mark.slow
@pytest.mark.parametrize("op", [*sorted(DELETIONS), "create-tags", "delete-tags"])
def test_kill_9_mid_run_then_resume_loses_nothing_and_repeats_only_what_was_in_flight(
    tmp_path: Path, op: str
) -> None:
    n = 24
    ledger = tmp_path / "l.jsonl"
    with Sandbox(THROTTLED) as box:
        made, extra = _seed_kill_case(box, op, n)
        ids = write_ids(tmp_path / "ids.txt", made)
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "swarm_cli",
                "ec2",
                op,
                "--ids",
                ids,
                "--yes",
                "--ledger",
                str(ledger),
                "--endpoint-url",
                box.endpoint,
                "--progress",
                "none",
                *extra,
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        wait_until(lambda: lines(ledger) >= n + n // 4, proc)  # written ahead, then 6 done
        proc.kill()
        proc.communicate(timeout=10)
        left = _left_to_do(box, op, made)
        assert 0 < len(left) < n, "killed mid-run"
        # What the killed run sent and never heard back from: the only IDs a resume may
        # act on twice (at most one window's calls).
        in_flight = {i for i, (status, _) in statuses(ledger).items() if status == "pending"}
        assert left <= in_flight
        api = OPERATIONS[op].api
        code, report, err = ec2(box, op, ids, ledger, "--resume", *extra)
        assert code == 0, err
        assert _left_to_do(box, op, made) == set()
        assert {s for s, _ in statuses(ledger).values()} == {"succeeded"}
        assert report["counts"]["succeeded"] >= len(left)
        if op in DELETIONS:
            # What was done before the kill is looked up, not sent again.
            assert f"already {OPERATIONS[op].verb}" in err
        else:
            # What counts is the tags each resource carries: DescribeTags shows what is done.
            # (a call in flight at the kill may land after the count above)
            shown = re.search(rf"DescribeTags shows (\d+) of {n} already", err)
            assert shown is not None and int(shown.group(1)) >= n - len(left), err
        done = box.done_by(api)
        assert set(done) == set(made)
        assert {i for i, k in done.items() if k > 1} <= in_flight - left
        code, out, err = swarm("ledger", "failed", "--ids", ids, str(ledger))
        assert code == 0 and out == "", err
        assert f"0 of {n} ID(s)" in err


def test_a_resumed_deletion_in_flight_at_the_kill_is_done_when_its_repeat_finds_it_gone(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    """The killed run's call lands after the resume looked the snapshot up: the resume's
    own call then hears InvalidSnapshot.NotFound, for a snapshot the runs deleted."""
    from swarm_cli.ledger import LedgerWriter
    from swarm_cli.operation_call import OperationCall

    made = sandbox.seed(snapshots=2)["snapshots"]
    ledger = tmp_path / "l.jsonl"
    writer = LedgerWriter(str(ledger), "r1", "delete-snapshot", "us-east-1")
    writer.write_ahead(made)  # the killed run: both pending, neither answered
    writer.close()
    assert in_doubt(str(ledger), "delete-snapshot") == set(made)
    assert in_doubt(str(ledger), "terminate") == set()
    sandbox.client().delete_snapshot(SnapshotId=made[0])  # the call in flight lands late
    op = OPERATIONS["delete-snapshot"]
    resumed = OperationCall(sandbox.client(), op, sent_before=in_doubt(str(ledger), op.name))
    (outcome,) = resumed([made[0]]).values()
    assert (outcome.kind, outcome.code) == (Kind.SUCCEEDED, "AlreadyGone")
    fresh = OperationCall(sandbox.client(), op)  # no earlier run: a first call finds it missing
    (outcome,) = fresh([made[0]]).values()
    assert outcome.kind is Kind.MISSING


def test_a_resume_with_other_tags_is_not_taken_as_done_by_the_ledger(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    made = sandbox.seed(volumes=4)["volumes"]
    ids = write_ids(tmp_path / "ids.txt", made)
    ledger = tmp_path / "l.jsonl"
    code, _, err = ec2(sandbox, "create-tags", ids, ledger, "--tag", "team=a")
    assert code == 0, err
    # The same ledger, other tags: every ID is succeeded in it, none carries cost=7 yet.
    code, _, err = ec2(sandbox, "create-tags", ids, ledger, "--tag", "cost=7", "--resume")
    assert code == 0, err
    assert "DescribeTags shows 0 of 4 already tagged" in err
    tags = sandbox.client().describe_tags(Filters=[{"Name": "resource-id", "Values": made}])
    assert {(t["ResourceId"], t["Key"], t["Value"]) for t in tags["Tags"]} == {
        (i, k, v) for i in made for k, v in (("team", "a"), ("cost", "7"))
    }
    # Removing one of them, resumed: the ones still carrying it are sent, the others not.
    sandbox.client().delete_tags(Resources=made[:1], Tags=[{"Key": "team"}])
    code, _, err = ec2(sandbox, "delete-tags", ids, ledger, "--tag", "team=a", "--resume")
    assert code == 0, err
    assert "DescribeTags shows 1 of 4 already untagged" in err
    assert sandbox.calls_by("DeleteTags") == 1  # made[1:] in one call (the sandbox's own
    # client is not counted)
    tags = sandbox.client().describe_tags(Filters=[{"Name": "resource-id", "Values": made}])
    assert {(t["ResourceId"], t["Key"]) for t in tags["Tags"]} == {(i, "cost") for i in made}


def test_a_delete_tags_resume_takes_only_a_resource_shown_with_other_tags_as_untagged(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    made = sandbox.seed(volumes=3)["volumes"]
    client = sandbox.client()
    client.create_tags(Resources=made, Tags=[{"Key": "env", "Value": "ci"}])
    client.create_tags(Resources=made[:1], Tags=[{"Key": "team", "Value": "a"}])
    client.delete_tags(Resources=made[:2], Tags=[{"Key": "env"}])
    ids = write_ids(tmp_path / "ids.txt", made)
    # made[0] is shown with another tag: known untagged. made[1] has no tag left, which
    # DescribeTags cannot tell from a volume that does not exist: sent again.
    code, _, err = ec2(
        sandbox, "delete-tags", ids, tmp_path / "l.jsonl", "--tag", "env", "--resume"
    )
    assert code == 0, err
    assert "DescribeTags shows 1 of 3 already untagged" in err
    assert not client.describe_tags(Filters=[{"Name": "key", "Values": ["env"]}])["Tags"]
    # In another region none of them is shown at all: none is taken as untagged.
    code, _, err = ec2(
        sandbox, "delete-tags", ids, tmp_path / "west.jsonl", "--tag", "env", "--resume",
        "--region", "eu-west-1",
    )  # fmt: skip
    assert "DescribeTags shows 0 of 3 already untagged" in err, err


@pytest.mark.parametrize("action", ["delete-snapshot", "terminate"])
def test_a_resume_whose_describe_lists_none_of_a_pair_takes_none_as_done(
    sandbox: Sandbox, tmp_path: Path, action: str
) -> None:
    """A kill left every intent bare (maybe sent); the resume runs with other credentials
    (a ledger of default ones names no account) or the IDs were mistyped: Describe lists
    none of them. That is no sign the run deleted them: they are sent, found missing."""
    from swarm_cli.ledger import LedgerWriter

    prefix = "snap-" if action == "delete-snapshot" else "i-"
    ids = [f"{prefix}{k:017x}" for k in range(1, 4)]  # in no account of the sandbox
    ledger = tmp_path / "l.jsonl"
    writer = LedgerWriter(str(ledger), "r1", action, "us-east-1")
    writer.write_ahead(ids)
    writer.close()
    ids_file = write_ids(tmp_path / "ids.txt", ids)
    if action == "terminate":
        code, _, err = swarm(
            *("terminate", "--ids", ids_file, "--endpoint-url", sandbox.endpoint),
            *("--ledger", str(ledger), "--yes", "--progress", "none", "--resume"),
        )
    else:
        code, _, err = ec2(sandbox, action, ids_file, ledger, "--resume")
    assert code == 1, err
    assert "EC2 lists none of the 3 ID(s) looked up: not taken as done" in err
    assert {s for s, _ in statuses(ledger).values()} == {"missing"}


def in_doubt(ledger: str, action: str) -> set[str]:
    """What --resume takes as maybe sent by the run it resumes."""
    pending: set[str] = set()
    succeeded(ledger, action, Console(stderr=True), pending)
    return pending


def test_a_fresh_resume_in_the_wrong_region_finds_the_resources_missing_not_done(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    """Not listed in eu-west-1 is not "deleted already": no run of this ledger acted on
    them, so they are sent and found missing."""
    made = sandbox.seed(snapshots=2)["snapshots"]
    ids = write_ids(tmp_path / "ids.txt", made)
    ledger = tmp_path / "l.jsonl"
    code, out, err = ec2(
        sandbox, "delete-snapshot", ids, ledger, "--resume", "--region", "eu-west-1"
    )
    assert code == 1, err
    assert out["counts"]["missing"] == 2 and out["counts"]["succeeded"] == 0
    assert "missing" in out["meaning"], out["meaning"]  # none failed, none pending
    assert still_there(sandbox, "delete-snapshot", made) == set(made)
    assert {s for s, _ in statuses(ledger).values()} == {"missing"}


def test_a_wait_that_cannot_read_says_how_many_it_could_not_check_and_why(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    made = sandbox.seed(volumes=2)["volumes"]
    sandbox.fail_action("DescribeVolumes", 403, "UnauthorizedOperation", "no")
    code, out, err = swarm(
        *("ec2", "delete-volume", "--ids", write_ids(tmp_path / "ids.txt", made)),
        *("--endpoint-url", sandbox.endpoint, "--ledger", str(tmp_path / "l.jsonl"), "--yes"),
        *("--progress", "none", "--wait", "--wait-timeout", "30"),
    )
    assert code == 4, out + err  # denied: the wait's own exit code
    text = " ".join((out + err).split())
    assert "wait for deleted: 0 reached, 2 not checked (UnauthorizedOperation" in text


@pytest.mark.parametrize(
    ("tag", "says"),
    [
        ("aws:owner=me", "keys starting aws: are AWS's own"),
        ("k" * 129 + "=v", "a key holds at most 128 characters"),
        ("k=" + "v" * 257, "a value holds at most 256 characters"),
        ("k=a\x1b[31mb", r"'k=a\x1b[31mb': holds a control character"),
        ("k=a\x00b", "holds a control character"),
        ("novalue", "create-tags needs KEY=VALUE"),
        # Bytes that are not UTF-8 on the command line: no call could encode them.
        ("k=\udcff", "--tag k=\\udcff: not valid UTF-8"),
    ],
)
def test_a_tag_ec2_would_refuse_is_refused_before_anything_is_sent(
    tmp_path: Path, tag: str, says: str
) -> None:
    ids = write_ids(tmp_path / "ids.txt", ["i-0123456789abcdef0"])
    ledger = str(tmp_path / "l.jsonl")  # none is made: refused before
    code, _, err = swarm(
        "ec2", "create-tags", "--ids", ids, "--tag", tag, "--yes", "--ledger", ledger
    )
    assert code == 2 and says in err, err
    assert not Path(ledger).exists()
    assert "\x1b" not in err
    # At the limits, in characters (not bytes): taken.
    from swarm_cli.operation_call import parse_tags

    ok = parse_tags(["k" * 128 + "=" + "é" * 256], need_value=True)
    assert ok == [{"Key": "k" * 128, "Value": "é" * 256}]
    # A tag with no key: what each operation takes is said (delete-tags takes a key alone).
    for need_value, form in ((True, "(KEY=VALUE)"), (False, "(KEY or KEY=VALUE)")):
        with pytest.raises(ValueError, match=re.escape(f"a tag needs a key {form}")):
            parse_tags(["=x"], need_value=need_value)


@pytest.mark.parametrize(
    "args",
    [
        ("list", "volumes", "--filter", "tag:env=\udcff"),
        ("ec2", "delete-volume", "--filter", "tag:env=\udcff", "--yes"),
        ("ec2", "delete-volume", "--ids", "IDS", "--protect-tag", "keep=\udcff", "--dry-run"),
        ("terminate", "--filter", "tag:env=x", "--protect-tag", "\udcff", "--yes"),
    ],
    ids=["list-filter", "filter", "protect-tag", "terminate-protect-tag"],
)
def test_text_that_is_not_utf8_is_a_usage_error_before_anything_is_read(
    sandbox: Sandbox, tmp_path: Path, args: tuple[str, ...]
) -> None:
    """Not a credentials error (exit 4), not a rail that protects nothing: exit 2."""
    ids = write_ids(tmp_path / "ids.txt", sandbox.seed(volumes=1)["volumes"])
    given = [ids if a == "IDS" else a for a in args]
    ledger = ["--ledger", str(tmp_path / "l.jsonl")] if args[0] != "list" else []
    reads = ("DescribeVolumes", "DescribeInstances", "DescribeTags")
    before = [sandbox.calls_by(a) for a in reads]
    code, _, err = swarm(*given, *ledger, "--endpoint-url", sandbox.endpoint)
    assert code == 2, err
    assert "not valid UTF-8" in " ".join(err.split()), err
    assert [sandbox.calls_by(a) for a in reads] == before


def test_a_plan_that_cannot_read_what_uses_a_snapshot_says_so_once_and_a_resume_never_asks(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    made = sandbox.seed(snapshots=3, in_use=1)["snapshots"]
    ids = write_ids(tmp_path / "ids.txt", made)
    code, plan, err = ec2(sandbox, "delete-snapshot", ids, tmp_path / "l.jsonl", "--dry-run")
    assert code == 1 and plan["calls"]["DescribeImages"] == 1, err
    sandbox.fail_action("DescribeImages", 403, "UnauthorizedOperation", "no images for you")
    code, plan, err = ec2(sandbox, "delete-snapshot", ids, tmp_path / "l.jsonl", "--dry-run")
    assert code == 1, err
    assert {r["prediction"] for r in plan["rows"]} == {"unknown"}
    assert "UnauthorizedOperation" in plan["rows"][0]["reason"]
    assert plan["calls"]["DescribeImages"] == 1, plan["calls"]  # refused: not asked again
    # A resume needs only what is gone: it never asks what uses a snapshot.
    ledger = tmp_path / "r.jsonl"
    code, report, err = ec2(sandbox, "delete-snapshot", ids, ledger, "--resume")
    assert code == 1 and report["counts"]["succeeded"] == 2, err
    assert report["counts"]["failed"] == 1  # the one in use, as EC2 answered


def test_more_tags_than_a_resource_holds_are_refused_before_anything_is_sent(
    tmp_path: Path,
) -> None:
    ids = write_ids(tmp_path / "ids.txt", ["i-0123456789abcdef0"])
    many = [arg for n in range(51) for arg in ("--tag", f"k{n}=v")]
    code, _, err = swarm("ec2", "create-tags", "--ids", ids, *many, "--yes")
    assert code == 2 and "51 tags: a resource holds at most 50" in err, err


def test_delete_tags_splits_off_an_id_of_any_kind_that_does_not_exist() -> None:
    """One volume that does not exist fails a whole DeleteTags call: it is named and
    split off (missing), the rest sent again, as for CreateTags."""
    import boto3
    from botocore.stub import Stubber

    from swarm_cli.operation_call import OperationCall
    from swarm_cli.outcome import Kind

    client = boto3.client("ec2", region_name="us-east-1")
    gone, kept = "vol-0123456789abcdef0", ["snap-0123456789abcdef0", "i-0123456789abcdef0"]
    with Stubber(client) as stub:
        stub.add_client_error(
            "delete_tags",
            "InvalidVolume.NotFound",
            f"The volume '{gone}' does not exist.",
            400,
        )
        outcomes = OperationCall(
            client, OPERATIONS["delete-tags"], params={"Tags": [{"Key": "k"}]}
        )([gone, *kept])
    assert outcomes[gone].kind is Kind.MISSING
    assert {outcomes[i].kind for i in kept} == {Kind.REQUEUE}


def test_a_tag_call_splits_off_ids_of_kinds_it_lists_no_code_for(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    """EC2 names each kind's missing ID by its own code (InvalidGroup.NotFound): one
    security group that does not exist failed a call's volumes with its error."""
    volumes = sandbox.seed(volumes=3)["volumes"]
    ghosts = ["sg-0123456789abcdef0", "subnet-0123456789abcdef0"]
    ledger = tmp_path / "l.jsonl"
    ids = write_ids(tmp_path / "ids.txt", [*ghosts, *volumes])
    code, report, err = ec2(sandbox, "create-tags", ids, ledger, "--tag", "team=data")
    assert code == 1, err
    assert report["counts"]["succeeded"] == 3 and report["counts"]["missing"] == 2, report
    found = statuses(ledger)
    assert {i: found[i][0] for i in ghosts} == dict.fromkeys(ghosts, "missing")
    tagged = sandbox.client().describe_tags(Filters=[{"Name": "key", "Values": ["team"]}])
    assert {t["ResourceId"] for t in tagged["Tags"]} == set(volumes)


def test_another_accounts_image_fails_alone_not_the_run_as_credentials(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    """EC2 answers AuthFailure ("Not authorized for image:ami-...") for a public AMI of
    another account: that image is not the caller's to deregister. It stopped the whole
    run as a credentials failure (exit 4), the caller's own images left registered."""
    from swarm_cli.sandbox.config import IMAGE_ID  # one of Amazon's, as moto serves it

    own = sandbox.seed(images=3)["images"]
    ledger = tmp_path / "l.jsonl"
    ids = write_ids(tmp_path / "ids.txt", [IMAGE_ID, *own])
    code, report, err = ec2(sandbox, "deregister-image", ids, ledger)
    assert code == 1, err
    assert report["counts"]["succeeded"] == 3 and report["counts"]["failed"] == 1, report
    assert statuses(ledger)[IMAGE_ID] == ("failed", "AuthFailure")
    left = sandbox.client().describe_images(ImageIds=[IMAGE_ID])["Images"]
    assert [i["ImageId"] for i in left] == [IMAGE_ID]
    code, out, _ = swarm("ledger", "failed", "--retryable", str(ledger))
    assert IMAGE_ID not in out  # a retry fails again


def test_an_id_throttled_then_not_found_is_missing_not_gone(tmp_path: Path) -> None:
    """A throttle is EC2 saying no before it acts: the call after it is no repeat, and an
    ID it then does not find (a typo, another region) is missing, not done."""
    ghosts = fake_ids(40, random.Random(3), prefix="snap")
    ledger = tmp_path / "l.jsonl"
    listed = write_ids(tmp_path / "g.txt", ghosts)
    with Sandbox(STINGY) as box:
        code, report, err = ec2(box, "delete-snapshot", listed, ledger)
    assert report["throttled_calls"] > 0, err
    records = list(read_records(str(ledger)))
    throttled_first = {r.id for r in records if r.status == "missing" and r.attempts > 1}
    assert throttled_first, "some ID was throttled before EC2 said it does not exist"
    assert code == 1 and report["counts"]["missing"] == 40 and report["counts"]["succeeded"] == 0
    assert {s for s, _ in statuses(ledger).values()} == {"missing"}


def test_a_resume_keeps_missing_what_ec2_did_not_find_and_what_was_never_sent(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    """Describe not listing an ID makes it done on a resume only where a run may have acted
    on it: not where EC2 already said it does not exist, nor where it was never sent."""
    typos = fake_ids(2, random.Random(5), prefix="snap")
    never = fake_ids(2, random.Random(6), prefix="snap")
    ledger = tmp_path / "l.jsonl"
    ids = write_ids(tmp_path / "ids.txt", typos + never)
    code, report, _ = ec2(sandbox, "delete-snapshot", write_ids(tmp_path / "t.txt", typos), ledger)
    assert code == 1 and report["counts"]["missing"] == 2
    # A later run of the whole list is stopped before it sends `never`: pending, not sent.
    from swarm_cli.ledger import LedgerWriter

    writer = LedgerWriter(str(ledger), "r2", "delete-snapshot", "us-east-1")
    writer.write_ahead(never)
    for i in never:
        writer.write(i, "pending", code="Interrupted", message="stopped by SIGTERM")
    writer.close()
    code, report, err = ec2(sandbox, "delete-snapshot", ids, ledger, "--resume")
    assert code == 1, err
    assert report["counts"]["missing"] == 4 and report["counts"]["succeeded"] == 0
    assert {s for s, _ in statuses(ledger).values()} == {"missing"}


def test_a_tag_plan_says_it_did_not_look_the_ids_up(sandbox: Sandbox, tmp_path: Path) -> None:
    ids = write_ids(tmp_path / "ids.txt", fake_ids(2, random.Random(9), prefix="vol"))
    code, plan, err = ec2(
        sandbox, "create-tags", ids, tmp_path / "l.jsonl", "--dry-run", "--tag", "a=b"
    )
    assert plan["would_act"] == 2
    assert plan["unchecked"].startswith("not looked up: CreateTags takes any resource ID")
    assert "an ID that does not exist ends missing when sent" in err
    # Its DryRun, on an ID that does not exist, could not check the permission: exit 1.
    (perm,) = plan["permission"]
    assert perm["allowed"] is None and perm["code"] == "InvalidVolume.NotFound"
    assert code == 1
    real = sandbox.seed(volumes=1)["volumes"]
    ids = write_ids(tmp_path / "real.txt", real)
    code, plan, err = ec2(
        sandbox, "create-tags", ids, tmp_path / "l.jsonl", "--dry-run", "--tag", "a=b"
    )
    assert code == 0 and plan["permission"][0]["allowed"] is True, err


def test_only_the_tag_operations_take_a_list_of_ids_as_their_help_says() -> None:
    for op in OPERATIONS.values():
        if op.instance_action is None:
            assert op.model.many == op.tags, op.name


def test_an_id_only_ever_throttled_before_a_stop_is_not_taken_as_done_by_a_resume(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    """Every call of these (mistyped) IDs is throttled, then SIGTERM stops the run: no call
    of them can have acted, so a resume that does not find them sends them, and they are
    missing, not done."""
    ghosts = fake_ids(3, random.Random(11), prefix="snap")
    ledger = tmp_path / "l.jsonl"
    ids = write_ids(tmp_path / "ids.txt", ghosts)
    sandbox.fail_action("DeleteSnapshot", 503, "RequestLimitExceeded", "Request limit exceeded.")
    argv = [sys.executable, "-m", "swarm_cli", "ec2", "delete-snapshot", "--ids", ids]
    argv += ["--yes", "--ledger", str(ledger), "--endpoint-url", sandbox.endpoint]
    proc = subprocess.Popen(
        [*argv, "--progress", "none"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_until(lambda: lines(ledger) >= 3 and sandbox.counters.injected >= 6, proc)
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
        sandbox.fail_action("DeleteSnapshot", None)
    assert proc.returncode == 143, err
    records = fold(read_records(str(ledger)))
    assert {r.status for r in records.values()} == {"pending"}
    assert any(r.attempts > 0 for r in records.values()), "sent, and throttled"
    code, report, err = ec2(sandbox, "delete-snapshot", ids, ledger, "--resume")
    assert code == 1, err
    assert report["counts"] == {"succeeded": 0, "failed": 0, "missing": 3, "pending": 0}


def test_a_deletion_resumed_in_another_region_is_missing_there_and_done_in_its_own(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    """The ledger's intents are bare (a kill while their calls were in flight), in
    us-east-1. A resume in eu-west-1 finds none of them: no repeat of a run's call there."""
    from swarm_cli.ledger import LedgerWriter

    made = sandbox.seed(snapshots=3)["snapshots"]
    ledger = tmp_path / "l.jsonl"
    writer = LedgerWriter(str(ledger), "r1", "delete-snapshot", "us-east-1")
    writer.write_ahead(made)
    writer.close()
    ids = write_ids(tmp_path / "ids.txt", made)
    code, report, err = ec2(
        sandbox, "delete-snapshot", ids, ledger, "--resume", "--region", "eu-west-1"
    )
    assert code == 1, err
    assert report["counts"]["missing"] == 3 and report["counts"]["succeeded"] == 0
    assert still_there(sandbox, "delete-snapshot", made) == set(made)
    code, report, err = ec2(
        sandbox, "delete-snapshot", ids, ledger, "--resume", "--region", "us-east-1"
    )
    assert code == 0, err
    assert still_there(sandbox, "delete-snapshot", made) == set()


def test_a_merged_ledger_keeps_what_a_resume_needs_of_a_run_that_may_have_acted(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    """Run A was killed with its call in flight (bare intent), the call landed; run B was
    stopped before it sent it again. Merged, the ledger still says A may have acted."""
    from swarm_cli.ledger import LedgerWriter

    # (Beside one never sent, still there: a Describe that lists none of the pair would
    # say nothing of a run having acted.)
    gone, kept = sandbox.seed(snapshots=2)["snapshots"]
    sandbox.client().delete_snapshot(SnapshotId=gone)  # A's call, whose answer was lost
    ledger, merged = tmp_path / "l.jsonl", tmp_path / "m.jsonl"
    for run in ("a", "b"):
        writer = LedgerWriter(str(ledger), run, "delete-snapshot", "us-east-1")
        writer.write_ahead([gone, kept])
        if run == "b":
            for i in (gone, kept):
                writer.write(i, "pending", code="Interrupted", message="stopped by SIGTERM")
        writer.close()
    code, _, err = swarm("ledger", "merge", str(ledger), "-o", str(merged))
    assert code == 0, err
    ids = write_ids(tmp_path / "ids.txt", [gone, kept])
    code, _, err = ec2(sandbox, "delete-snapshot", ids, merged, "--resume")
    assert code == 0, err
    assert statuses(merged)[gone] == ("succeeded", "AlreadyGone")
    assert statuses(merged)[kept][0] == "succeeded"


def test_a_deletion_plan_without_credentials_exits_four(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with Sandbox(THROTTLED) as box:
        made = box.seed(snapshots=2)["snapshots"]
        ids = write_ids(tmp_path / "ids.txt", made)
        monkeypatch.delenv("AWS_ACCESS_KEY_ID")
        monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
        code, plan, err = ec2(box, "delete-snapshot", ids, tmp_path / "l.jsonl", "--dry-run")
        assert code == 4 and plan["exit_code"] == 4, err
        assert [r["prediction"] for r in plan["rows"]] == ["unknown"] * 2
        assert still_there(box, "delete-snapshot", made) == set(made)


def test_an_operations_plan_checks_the_permission_with_one_dry_run(tmp_path: Path) -> None:
    """A refused DryRun makes the pair's rows not permitted, and the plan exits 4 as the
    run would: tag operations, which look nothing up, included."""
    with Sandbox(THROTTLED) as box:
        made = box.seed(snapshots=3)["snapshots"]
        ids = write_ids(tmp_path / "ids.txt", made)
        for op, extra in (("delete-snapshot", ()), ("create-tags", ("--tag", "a=b"))):
            api = OPERATIONS[op].api
            box.fail_action(api, 403, "UnauthorizedOperation", "not allowed")
            code, plan, err = ec2(box, op, ids, tmp_path / "l.jsonl", "--dry-run", *extra)
            assert code == 4 and plan["exit_code"] == 4, (op, err)
            assert [r["prediction"] for r in plan["rows"]] == ["not permitted"] * 3, op
            assert "UnauthorizedOperation" in plan["rows"][0]["reason"]
        assert still_there(box, "delete-snapshot", made) == set(made)


def test_a_refused_describe_leaves_the_rows_unknown_with_why_and_exit_one(
    tmp_path: Path,
) -> None:
    """The run of a deletion needs no Describe (without --resume or a rail): its refusal
    is no reason to say the run would stop (exit 4), but the rows say it."""
    with Sandbox(THROTTLED) as box:
        made = box.seed(snapshots=2)["snapshots"]
        ids = write_ids(tmp_path / "ids.txt", made)
        box.fail_action("DescribeSnapshots", 403, "UnauthorizedOperation", "no reads")
        code, plan, err = ec2(box, "delete-snapshot", ids, tmp_path / "l.jsonl", "--dry-run")
        assert code == 1 and plan["fatal"] is None, err
        assert [r["prediction"] for r in plan["rows"]] == ["unknown"] * 2
        assert "UnauthorizedOperation: no reads" in plan["rows"][0]["reason"]
        assert plan["permission"][0]["allowed"] is True
        assert still_there(box, "delete-snapshot", made) == set(made)


def test_a_tag_run_with_other_tags_is_refused_while_an_earlier_one_is_unfinished(
    tmp_path: Path,
) -> None:
    """One record per (action, ID): a later run with other tags would hide what the
    earlier one left undone from ledger failed, and those resources would lack its tags."""
    with Sandbox(THROTTLED) as box:
        made = box.seed(snapshots=3)["snapshots"]
        box.client().create_tags(Resources=[made[0]], Tags=[{"Key": "keep", "Value": "1"}])
        ids = write_ids(tmp_path / "ids.txt", made)
        ledger = tmp_path / "l.jsonl"
        rail = ("--protect-tag", "keep")
        code, _, err = ec2(box, "create-tags", ids, ledger, "--tag", "env=prod", *rail)
        assert code == 1, err  # the kept one failed (Protected): env=prod not on it
        assert {r.tags for r in read_records(str(ledger))} == {'[["env","prod"]]'}
        before = box.calls_by("CreateTags")
        code, _, err = ec2(box, "create-tags", ids, ledger, "--tag", "team=data")
        assert code == 2, err
        said = " ".join(err.split())
        assert "holds 1 create-tags intent(s) not known done of a run with other tags " \
            "(env=prod)" in said  # fmt: skip
        assert "own --ledger" in said and box.calls_by("CreateTags") == before
        # A merged ledger (one record per intent, no write-ahead line left) still says it.
        merged = tmp_path / "merged.jsonl"
        assert swarm("ledger", "merge", str(ledger), "-o", str(merged))[0] == 0
        code, _, err = ec2(box, "create-tags", ids, merged, "--tag", "team=data")
        assert code == 2 and "other tags (env=prod)" in " ".join(err.split()), err
        # The same tags are that run's to finish (its rail given again, to check the one
        # it held back): once done, another set may follow.
        box.client().delete_tags(Resources=[made[0]], Tags=[{"Key": "keep"}])
        code, _, err = ec2(box, "create-tags", ids, ledger, "--tag", "env=prod", "--resume", *rail)
        assert code == 0 and "other tags" not in err, err
        code, _, err = ec2(box, "create-tags", ids, ledger, "--tag", "team=data")
        assert code == 0, err
        tags = box.client().describe_tags(Filters=[{"Name": "resource-id", "Values": made}])
        assert {(t["ResourceId"], t["Key"]) for t in tags["Tags"]} >= {
            (i, k) for i in made for k in ("env", "team")
        }


def test_tags_text_is_one_text_per_tag_set_whatever_the_order() -> None:
    from swarm_cli.operation_call import parse_tags, tags_shown, tags_text

    one = tags_text(parse_tags(["team=data", "env=a,b=c"], need_value=True))
    assert one == tags_text(parse_tags(["env=a,b=c", "team=data"], need_value=True))
    assert one == '[["env","a,b=c"],["team","data"]]'
    assert tags_shown(one) == "env=a,b=c, team=data"
    assert tags_shown(tags_text(parse_tags(["old"], need_value=False))) == "old"


def test_a_tag_key_given_twice_is_refused_before_anything_is_sent(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    made = sandbox.seed(snapshots=1)["snapshots"]
    ids = write_ids(tmp_path / "ids.txt", made)
    code, _, err = swarm(
        "ec2", "create-tags", "--ids", ids, "--tag", "a=1", "--tag", "a=2", "--yes",
        "--endpoint-url", sandbox.endpoint, "--ledger", str(tmp_path / "l.jsonl"),
    )  # fmt: skip
    assert code == 2 and "the key 'a' is given twice" in err
    assert sandbox.calls_by("CreateTags") == 0


def test_disabled_amis_are_seen_by_every_describe_images_call() -> None:
    """A disabled AMI still holds its snapshots (EC2 refuses to delete them), and
    DescribeImages leaves disabled AMIs out unless asked; moto has none to show."""
    import boto3
    from botocore.stub import Stubber

    from swarm_cli.observe import images_using

    client = boto3.client("ec2", region_name="us-east-1")
    snap, ami = "snap-0123456789abcdef0", "ami-0123456789abcdef0"
    with Stubber(client) as stub:
        stub.add_response(
            "describe_images",
            {"Images": [{"ImageId": ami, "BlockDeviceMappings": [{"Ebs": {"SnapshotId": snap}}]}]},
            {"Owners": ["self"], "IncludeDisabled": True},
        )
        assert images_using(client) == {snap: ami}
    # A disabled AMI is there to a plan, a resume and a wait (not deregistered), and to
    # swarm list.
    from swarm_cli.observe import describe, listing

    images = OPERATIONS["deregister-image"]
    assert images.observe is not None
    with Stubber(client) as stub:
        stub.add_response(
            "describe_images",
            {"Images": [{"ImageId": ami, "State": "disabled"}]},
            {"Filters": [{"Name": "image-id", "Values": [ami]}], "IncludeDisabled": True},
        )
        assert describe(client, images.observe, [ami])["Images"][0]["State"] == "disabled"
    assert listing(images, client).request == {"Owners": ["self"], "IncludeDisabled": True}


def test_a_resume_by_filter_looks_up_what_a_killed_run_may_have_deleted_and_sends_it_not(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    """A selection made again no longer holds what the killed run deleted before it could
    record so: the resume exited 0 with those left pending in the ledger (and a retry of
    them then found them missing). They are looked up now: gone is done; one still there
    but no longer selected is never sent, and is recorded failed (NotSelected): the run
    exits 1, and a later resume leaves it be."""
    from swarm_cli.ledger import LedgerWriter

    made = sandbox.seed(volumes=5)["volumes"]
    client = sandbox.client()
    client.create_tags(Resources=made, Tags=[{"Key": "team", "Value": "x"}])
    ledger = tmp_path / "l.jsonl"
    writer = LedgerWriter(str(ledger), "r1", "delete-volume", "us-east-1")
    writer.write_ahead(made)  # the killed run: every intent pending, none answered
    writer.close()
    for gone in made[:2]:  # its calls that landed
        client.delete_volume(VolumeId=gone)
    moved = made[2]  # another team's since: not selected any more
    client.create_tags(Resources=[moved], Tags=[{"Key": "team", "Value": "y"}])
    again = (
        "ec2",
        "delete-volume",
        "--filter",
        "tag:team=x",
        "--endpoint-url",
        sandbox.endpoint,
        "--ledger",
        str(ledger),
        "--yes",
        "--resume",
        "--progress",
        "none",
        # The three no longer selected are never sent: no rail counts them.
        "--max-count",
        "2",
    )
    # Its dry run predicts as much: the one moved is not selected (a failure), the two
    # gone are done.
    code, out, err = swarm(*again, "--dry-run", "--output", "json")
    assert code == 1, err
    rows = {r["id"]: r["prediction"] for r in json.loads(out)["rows"]}
    assert rows[moved] == "not selected"
    assert [rows[i] for i in made[:2]] == ["already in target state"] * 2
    code, out, err = swarm(*again)
    assert code == 1, err
    assert "3 more a stopped run of the ledger may have deleted are not selected now" in err
    assert "1 of them are not known done and not selected now: not sent, recorded failed" in err
    assert still_there(sandbox, "delete-volume", made) == {moved}
    got = statuses(ledger)
    assert {i for i, (status, _) in got.items() if status == "succeeded"} == set(made) - {moved}
    assert got[moved] == ("failed", "NotSelected")
    code, out, _ = swarm("ledger", "failed", str(ledger))
    assert out.split() == [moved]
    code, out, _ = swarm("ledger", "failed", "--retryable", str(ledger))
    assert out.split() == []  # a retry by ID would delete what the selection left out
    code, out, err = swarm(*again)
    assert code == 0, err
    assert still_there(sandbox, "delete-volume", made) == {moved}


def test_a_resume_by_filter_accounts_for_intents_never_sent_the_selection_left_out(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    """A run stopped by SIGTERM records what it never sent pending (nothing of it left).
    A resume by --filter whose selection no longer holds some of them (retagged, or
    deleted by someone else) exited 0 and left them pending for good: the ledger's own
    gate (swarm ledger failed) failed on what the resume called done. They, and one
    that failed, are looked up as those a run may have acted on are: never sent, recorded
    failed (NotSelected), and the resume exits 1."""
    from swarm_cli.engine import INTERRUPTED
    from swarm_cli.ledger import LedgerWriter

    made = sandbox.seed(volumes=6)["volumes"]
    client = sandbox.client()
    client.create_tags(Resources=made, Tags=[{"Key": "team", "Value": "x"}])
    ledger = tmp_path / "l.jsonl"
    writer = LedgerWriter(str(ledger), "r1", "delete-volume", "us-east-1")
    writer.write_ahead(made)
    client.delete_volume(VolumeId=made[0])
    writer.write(made[0], "succeeded")
    for i in made[1:5]:
        writer.write(
            i, "pending", code=INTERRUPTED, message="stopped by SIGTERM before it was sent"
        )
    writer.write(made[5], "failed", code="InternalError", message="retry it")
    # Settled outcomes stay as they are: one missing, one failed for good.
    ghost = "vol-0123456789abcdef0"
    writer.write_ahead([ghost])
    writer.write(ghost, "missing", code="InvalidVolume.NotFound")
    writer.write(made[4], "failed", code="VolumeInUse", message="attached")
    writer.close()
    client.delete_volume(VolumeId=made[1])  # someone else's doing
    moved = [made[2], made[5]]  # another team's since
    client.create_tags(Resources=[*moved, made[4]], Tags=[{"Key": "team", "Value": "y"}])
    again = (
        "ec2", "delete-volume", "--filter", "tag:team=x", "--endpoint-url", sandbox.endpoint,
        "--ledger", str(ledger), "--yes", "--resume", "--progress", "none",
    )  # fmt: skip
    code, out, err = swarm(*again, "--dry-run", "--output", "json")
    assert code == 1, err
    rows = {r["id"]: r["prediction"] for r in json.loads(out)["rows"]}
    assert {i: rows[i] for i in [made[1], *moved]} == dict.fromkeys(
        [made[1], *moved], "not selected"
    )
    code, out, err = swarm(*again)
    assert code == 1, err
    assert "3 more the ledger holds not known deleted are not selected now" in err
    assert still_there(sandbox, "delete-volume", made) == {*moved, made[4]}
    got = statuses(ledger)
    assert {i for i, (status, _) in got.items() if status == "succeeded"} == {made[0], made[3]}
    assert (got[ghost], got[made[4]]) == (
        ("missing", "InvalidVolume.NotFound"),
        ("failed", "VolumeInUse"),
    )
    assert {i: got[i] for i in [made[1], *moved]} == dict.fromkeys(
        [made[1], *moved], ("failed", "NotSelected")
    )
    code, out, _ = swarm("ledger", "failed", str(ledger))
    assert sorted(out.split()) == sorted([made[1], *moved, made[4]])
    code, out, err = swarm(*again)
    assert code == 0, err


def test_the_sandbox_refuses_to_tag_what_it_does_not_have_as_ec2_does(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    """moto tags any ID, there or not: a rehearsal of tags on mistyped IDs said every one
    succeeded. EC2 refuses the call for the one it does not have, and swarm finds it
    missing and tags the rest."""
    (volume,) = sandbox.seed(volumes=1)["volumes"]
    (instance,) = sandbox.launch(1)
    ghosts = ["vol-0123456789abcdef0", "i-0123456789abcdef0"]
    ids = write_ids(tmp_path / "ids.txt", [volume, instance, *ghosts])
    for op, tag in (("create-tags", "team=a"), ("delete-tags", "team")):
        ledger = tmp_path / f"{op}.jsonl"
        code, report, err = ec2(sandbox, op, ids, ledger, "--tag", tag)
        assert code == 1, err
        assert report["counts"]["succeeded"] == 2 and report["counts"]["missing"] == 2
        got = statuses(ledger)
        assert {i for i, (s, _) in got.items() if s == "missing"} == set(ghosts)
        assert got["vol-0123456789abcdef0"][1] == "InvalidVolume.NotFound"
    tags = sandbox.client().describe_tags(Filters=[{"Name": "key", "Values": ["team"]}])["Tags"]
    assert tags == []


def test_a_resume_by_filter_leaves_an_intent_of_an_unnamed_region_alone() -> None:
    """An older ledger names no region: looked up in the selection's region, such an
    intent of another region would be taken as gone, and recorded done."""
    from swarm_cli.cli.act import _unselected
    from swarm_cli.report import Pair, Recorded

    recorded = Recorded()
    recorded.add("vol-00000001", None, None)
    recorded.add("vol-00000002", "us-east-1", None)
    here = Pair(None, "us-east-1")
    assert recorded.holds("vol-00000001", here)  # a resume of IDs still finds it
    got = _unselected({here: []}, {"vol-00000001", "vol-00000002"}, set(), recorded)
    assert got == {here: ["vol-00000002"]}


def test_with_missing_ok_the_plan_exits_as_the_run_does_on_what_does_not_exist(
    tmp_path: Path,
) -> None:
    """--missing-ok counts an ID that does not exist done: the plan and the dry run
    predict the run's exit code, and say why none would fail."""
    with Sandbox(THROTTLED) as box:
        made = box.seed(volumes=2)["volumes"]
        ids = write_ids(tmp_path / "ids.txt", [*made, "vol-0123456789abcdef0"])
        ledger = tmp_path / "l.jsonl"
        code, plan, err = ec2(box, "delete-volume", ids, ledger, "--dry-run", "--missing-ok")
        assert code == 0, err
        assert plan["counts"]["does not exist"] == 1 and plan["would_fail"] == 0
        code, out, err = swarm(
            "plan", "delete-volume", "--ids", ids, "--missing-ok", "--endpoint-url", box.endpoint
        )
        assert code == 0, err
        assert "0 would fail (--missing-ok: the 1 that do not exist count done)" in out
        code, plan, err = ec2(box, "delete-volume", ids, ledger, "--dry-run")
        assert code == 1 and plan["would_fail"] == 1, err
        code, _report, err = ec2(box, "delete-volume", ids, ledger, "--missing-ok")
        assert code == 0, err  # as the plan said


def test_a_resume_plan_predicts_what_the_resumes_look_up_shows_done(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    """After a kill: the plan of the resume looks up as the resume does. A deletion the
    killed run got done (and an ID it meant that never existed) is done, as the resume
    records it; a plan had them "does not exist", exit 1, where the resume ended 0."""
    from swarm_cli.ledger import LedgerWriter

    made = sandbox.seed(snapshots=4)["snapshots"]
    (ghost,) = fake_ids(1, random.Random(3), prefix="snap")
    ledger = tmp_path / "l.jsonl"
    writer = LedgerWriter(str(ledger), "r1", "delete-snapshot", "us-east-1")
    writer.write_ahead([*made, ghost])  # the killed run: every one pending
    writer.close()
    for snapshot in made[:2]:  # two of its calls landed
        sandbox.client().delete_snapshot(SnapshotId=snapshot)
    ids = write_ids(tmp_path / "ids.txt", [*made, ghost])
    code, plan, err = ec2(sandbox, "delete-snapshot", ids, ledger, "--resume", "--dry-run")
    assert code == 0, err
    rows = {r["id"]: r["prediction"] for r in plan["rows"]}
    assert rows == {
        **dict.fromkeys([*made[:2], ghost], "already in target state"),
        **dict.fromkeys(made[2:], "would act"),
    }
    code, report, err = ec2(sandbox, "delete-snapshot", ids, ledger, "--resume")
    assert code == 0 and report["counts"]["succeeded"] == 5, err


def test_a_tag_resume_plan_reads_the_tags_and_the_ledgers_other_tags_as_the_run(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    from swarm_cli.ledger import LedgerWriter
    from swarm_cli.operation_call import tags_text

    made = sandbox.seed(volumes=4)["volumes"]
    ids = write_ids(tmp_path / "ids.txt", made)
    ledger = tmp_path / "l.jsonl"
    owner_me = tags_text([{"Key": "owner", "Value": "me"}])
    writer = LedgerWriter(str(ledger), "r1", "create-tags", "us-east-1", tags=owner_me)
    writer.write_ahead(made)  # killed after three of them were tagged
    writer.close()
    sandbox.client().create_tags(Resources=made[:3], Tags=[{"Key": "owner", "Value": "me"}])
    tag = ("--tag", "owner=me", "--protect-tag", "owner")
    code, plan, err = ec2(sandbox, "create-tags", ids, ledger, "--resume", "--dry-run", *tag)
    # Those tagged are done (the rail does not hold back what is done); one would act.
    assert code == 0, err
    rows = {r["id"]: r["prediction"] for r in plan["rows"]}
    assert rows == {**dict.fromkeys(made[:3], "already in target state"), made[3]: "would act"}
    code, report, err = ec2(sandbox, "create-tags", ids, ledger, "--resume", *tag)
    assert code == 0 and report["counts"]["succeeded"] == 4, err
    # A run with other tags on that ledger is refused, by its plan as by itself.
    writer = LedgerWriter(str(ledger), "r2", "create-tags", "us-east-1", tags=owner_me)
    writer.write_ahead(made[:1])
    writer.close()
    for dry in (("--dry-run",), ()):
        code, _, err = ec2(sandbox, "create-tags", ids, ledger, "--tag", "other=1", *dry)
        assert code == 2 and "other tags" in err, err


def test_tagging_an_address_that_does_not_exist_is_refused_as_ec2_refuses_it(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    """moto tags any ID, there or not; EC2 answers InvalidAllocationID.NotFound."""
    from botocore.exceptions import ClientError

    (made,) = sandbox.seed(addresses=1)["addresses"]
    ghost = "eipalloc-0123456789abcdef0"
    from test_wait import plain_client  # as any user's: not the sandbox's own

    with pytest.raises(ClientError) as refused:
        plain_client(sandbox).create_tags(Resources=[ghost], Tags=[{"Key": "k", "Value": "v"}])
    assert refused.value.response["Error"]["Code"] == "InvalidAllocationID.NotFound"
    assert ghost in refused.value.response["Error"]["Message"]
    code, report, err = ec2(
        sandbox, "create-tags", write_ids(tmp_path / "ids.txt", [made, ghost]),
        tmp_path / "l.jsonl", "--tag", "k=v",
    )  # fmt: skip
    assert code == 1, err
    assert {p["id"]: p["status"] for p in report["problems"]} == {ghost: "missing"}


# A portal's login page, answered 200 in place of EC2's answer: XHTML, so it parses as XML.
LOGIN_PAGE = (
    b'<?xml version="1.0" encoding="UTF-8"?>\n'
    b'<html xmlns="http://www.w3.org/1999/xhtml"><body>Login required</body></html>'
)


def test_a_page_answered_200_in_place_of_ec2s_answer_is_no_deletion(tmp_path: Path) -> None:
    """botocore reads any XML as an answer: a deletion's would say nothing went wrong, and a
    Describe's would list nothing, so every resource would read gone. Neither is EC2's."""
    with Sandbox(OPEN) as box:
        ids = box.seed(snapshots=4)["snapshots"]
        ids_file = write_ids(tmp_path / "ids.txt", ids)
        ledger = tmp_path / "l.jsonl"
        box.unreadable_answers("DeleteSnapshot", body=LOGIN_PAGE)
        code, report, err = ec2(box, "delete-snapshot", ids_file, ledger, "--max-attempts", "2")
        assert code == 1, err
        assert report["counts"]["succeeded"] == 0, report["counts"]
        assert {code for _, code in statuses(ledger).values()} == {"ResponseParserError"}
        # Not known done: left for a resume, which looks them up (they were deleted here:
        # the page stood in front of EC2's answer).
        assert report["counts"]["pending"] == 4
        assert still_there(box, "delete-snapshot", ids) == set()
        box.unreadable_answers("DeleteSnapshot", on=False)

        more = box.seed(snapshots=3)["snapshots"]
        box.unreadable_answers("DescribeSnapshots", body=LOGIN_PAGE)
        code, report, err = ec2(
            box,
            "delete-snapshot",
            write_ids(tmp_path / "more.txt", more),
            tmp_path / "more.jsonl",
            "--wait",
            "--wait-timeout",
            "3",
        )
        assert report["counts"]["succeeded"] == 3  # the deletions themselves were answered
        assert report["wait"]["reached"] == 0, report["wait"]  # nothing read them gone
        # Not "timed out" as if seen taking their time: never checked, and why.
        assert report["wait"]["not_checked"] == 3 and report["wait"]["timed_out"] == 0
        assert report["wait"]["not_checked_why"] == "ResponseParserError x 3"
        assert {p["id"] for p in report["wait"]["problems"]} == set(more)
        # As the ledger has them: accepted, not known done.
        assert {(p["status"], p["code"]) for p in report["wait"]["problems"]} == {
            ("pending", "NotChecked")
        }
        assert all("ResponseParserError" in p["message"] for p in report["wait"]["problems"])
        assert code == 1, err


NO_LIST = (
    b'<?xml version="1.0" encoding="UTF-8"?>\n<{op}Response '
    b'xmlns="http://ec2.amazonaws.com/doc/2016-11-15/"><requestId>r-1</requestId></{op}Response>'
)


def test_a_describe_answer_without_its_list_is_no_answer_and_the_rail_refuses(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    """DescribeTags answered 200 without its <tagSet> (where EC2 sends an empty one):
    read as "no tags", --protect-tag let protected snapshots be deleted. Such an answer
    is no answer: the rail cannot see, so it refuses, and nothing is deleted."""
    made = sandbox.seed(snapshots=4)["snapshots"]
    sandbox.client().create_tags(Resources=made[:2], Tags=[{"Key": "keep", "Value": "yes"}])
    sandbox.unreadable_answers("DescribeTags", body=NO_LIST.replace(b"{op}", b"DescribeTags"))
    ids = write_ids(tmp_path / "ids.txt", made)
    code, _, err = ec2(
        sandbox, "delete-snapshot", ids, tmp_path / "l.jsonl", "--protect-tag", "keep",
        "--max-attempts", "2",
    )  # fmt: skip
    assert code == 3, err
    assert still_there(sandbox, "delete-snapshot", made) == set(made)
    assert {s for s, _ in statuses(tmp_path / "l.jsonl").values()} == {"failed"}


def test_a_look_up_follows_every_page_of_its_answer() -> None:
    """A resume's look-up made one filtered call and never read NextToken: the IDs on
    later pages were taken as gone, recorded done, and still existed."""
    import boto3
    from botocore.parsers import ResponseParserError
    from botocore.stub import Stubber

    from swarm_cli.observe import describe

    client = boto3.client("ec2", region_name="us-east-1")
    observe = OPERATIONS["delete-snapshot"].observe
    assert observe is not None
    ids = ["snap-0123456789abcdef0", "snap-0123456789abcdef1"]
    asked = {"Filters": [{"Name": "snapshot-id", "Values": ids}]}
    with Stubber(client) as stub:
        stub.add_response(
            "describe_snapshots", {"Snapshots": [{"SnapshotId": ids[0]}], "NextToken": "t1"}, asked
        )
        stub.add_response(
            "describe_snapshots",
            {"Snapshots": [{"SnapshotId": ids[1]}]},
            {**asked, "NextToken": "t1"},
        )
        got = describe(client, observe, ids)
    assert [s["SnapshotId"] for s in got["Snapshots"]] == ids
    with Stubber(client) as stub, pytest.raises(ResponseParserError, match="repeated a page token"):
        stub.add_response("describe_snapshots", {"Snapshots": [], "NextToken": "t1"}, asked)
        stub.add_response(
            "describe_snapshots", {"Snapshots": [], "NextToken": "t1"}, {**asked, "NextToken": "t1"}
        )
        describe(client, observe, ids)


def test_a_tag_read_that_repeats_its_page_token_reads_nothing() -> None:
    """DescribeTags repeating a page token: the pages after it were taken as no tags, so
    --protect-tag saw none on resources it had not read."""
    import boto3
    from botocore.parsers import ResponseParserError
    from botocore.stub import Stubber

    from swarm_cli.observe import TagLook

    client = boto3.client("ec2", region_name="us-east-1")
    ids = ["snap-0123456789abcdef0"]
    asked = {
        "Filters": [{"Name": "resource-id", "Values": ids}, {"Name": "key", "Values": ["keep"]}],
        "MaxResults": 1000,
    }
    look = TagLook(client, ["keep"])
    with Stubber(client) as stub, pytest.raises(ResponseParserError, match="repeated"):
        stub.add_response("describe_tags", {"Tags": [], "NextToken": "t1"}, asked)
        stub.add_response(
            "describe_tags", {"Tags": [], "NextToken": "t1"}, {**asked, "NextToken": "t1"}
        )
        look.send(ids)


def test_a_listing_whose_in_use_read_fails_says_so_not_credentials(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    """DescribeImages (which AMIs use the snapshots listed) answered without its list:
    the selection stopped as a credentials problem (exit 4). It is the listing's read
    that failed: exit 1, named so, nothing sent."""
    made = sandbox.seed(snapshots=3)["snapshots"]
    sandbox.unreadable_answers("DescribeImages", body=NO_LIST.replace(b"{op}", b"DescribeImages"))
    code, _, err = swarm(
        "ec2", "delete-snapshot", "--filter", "status=completed", "--yes", "--endpoint-url",
        sandbox.endpoint, "--ledger", str(tmp_path / "l.jsonl"), "--progress", "none",
    )  # fmt: skip
    assert code == 1, err
    assert "what uses them (DescribeImages) could not be read: ResponseParserError" in " ".join(
        err.split()
    )
    assert still_there(sandbox, "delete-snapshot", made) == set(made)


def test_a_throttled_in_use_read_is_asked_again(
    sandbox: Sandbox, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One throttle on DescribeImages (which AMIs use the snapshots listed) ended the
    whole listing, where a throttled page is asked again."""
    from botocore.exceptions import ClientError

    import swarm_cli.observe as observe

    made = sandbox.seed(snapshots=2)["snapshots"]
    real, calls = observe.images_using, []

    def throttled_once(client: Any) -> Any:
        calls.append(1)
        if len(calls) == 1:
            error = {"Error": {"Code": "RequestLimitExceeded", "Message": "slow down"}}
            raise ClientError(
                {**error, "ResponseMetadata": {"HTTPStatusCode": 503}}, "DescribeImages"
            )
        return real(client)

    monkeypatch.setattr(observe, "images_using", throttled_once)
    code, out, err = swarm("list", "snapshots", "--endpoint-url", sandbox.endpoint)
    assert code == 0, err
    assert sorted(out.split()) == sorted(made) and len(calls) == 2


def test_a_batch_size_an_operation_of_one_id_a_call_cannot_take_is_said(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    made = sandbox.seed(volumes=3)["volumes"]
    ids = write_ids(tmp_path / "ids.txt", made)
    code, report, err = ec2(
        sandbox, "delete-volume", ids, tmp_path / "l.jsonl", "--batch-size", "10"
    )
    assert code == 0 and report["counts"]["succeeded"] == 3, err
    assert "--batch-size 10: DeleteVolume takes at most 1 ID(s) per call" in " ".join(err.split())
    assert sandbox.calls_by("DeleteVolume") == 3
    code, _, err = ec2(sandbox, "delete-volume", ids, tmp_path / "m.jsonl", "--batch-size", "1")
    assert "--batch-size" not in err
