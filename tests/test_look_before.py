"""Look before you leap, through the CLI: the plan, selection by filters, and the rails."""

from __future__ import annotations

import json
from pathlib import Path

from test_cli import swarm, terminate_json, write_ids

from swarm_cli.sandbox import ACCOUNT, Sandbox, fake_ids

# What a real run records, for each prediction of the plan.
EXPECTED = {
    "would act": "succeeded",
    "already in target state": "succeeded",
    "ignored": "succeeded",
    "does not exist": "missing",
    "wrong state": "failed",
    "protected": "failed",
}


def test_the_plan_predicts_each_instance_s_real_outcome(sandbox: Sandbox, tmp_path: Path) -> None:
    ids = sandbox.launch(12, protected=2)
    admin = sandbox.client()
    admin.stop_instances(InstanceIds=ids[2:5])
    admin.terminate_instances(InstanceIds=ids[5:7])
    listed = ids + fake_ids(2)
    ids_file = write_ids(tmp_path / "ids.txt", listed)
    code, out, err = swarm(
        "plan",
        "terminate",
        "--ids",
        ids_file,
        "--endpoint-url",
        sandbox.endpoint,
        "--output",
        "json",
        "--plan-out",
        str(tmp_path / "acting.txt"),
    )
    assert code == 1, err  # some would fail: the protected and the missing
    plan = json.loads(out)
    predicted = {row["id"]: row["prediction"] for row in plan["rows"]}
    assert predicted.keys() == set(listed)
    assert plan["calls"]["DescribeInstanceAttribute"] > 0
    assert plan["estimate"]["expected_seconds"] >= plan["estimate"]["bound_seconds"] >= 0
    assert "would act" in err and "TerminateInstances" in err  # the table and the estimate
    acting = (tmp_path / "acting.txt").read_text().split()
    assert {i for i in acting if i.startswith("i-")} == {
        i for i, p in predicted.items() if p == "would act"
    }
    _, report = terminate_json(sandbox, ids_file, tmp_path / "l.jsonl")
    real = {p["id"]: p["status"] for p in report["problems"]}
    for instance, prediction in predicted.items():
        assert real.get(instance, "succeeded") == EXPECTED[prediction], (instance, prediction)


def test_filters_select_what_boto3_selects_and_list_composes(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    ids = sandbox.launch(9)
    admin = sandbox.client()
    admin.create_tags(Resources=ids[:5], Tags=[{"Key": "env", "Value": "ci"}])
    admin.create_tags(Resources=ids[3:7], Tags=[{"Key": "team", "Value": "a"}])
    admin.stop_instances(InstanceIds=ids[4:5])
    base = ("--endpoint-url", sandbox.endpoint, "--region", "us-east-1")
    for filters in (["tag:env=ci"], ["tag:env=ci", "tag:team=a"], ["instance-state-name=stopped"]):
        args = [a for f in filters for a in ("--filter", f)]
        code, out, err = swarm("list", *args, *base)
        assert code == 0, err
        boto = admin.describe_instances(
            Filters=[
                {"Name": f.split("=")[0], "Values": f.split("=")[1].split(",")} for f in filters
            ]
        )
        expected = {i["InstanceId"] for r in boto["Reservations"] for i in r["Instances"]}
        assert set(out.split()) == expected
    # An action selects the same way, restricted to the states it applies to.
    code, report = terminate_json(sandbox, "", tmp_path / "l.jsonl", "--filter", "tag:env=ci")
    assert code == 0, report
    terminated = {i for i, s in sandbox.states(ids).items() if s == "terminated"}
    assert terminated == set(ids[:5])


def test_each_rail_refuses_with_its_exit_code_and_sends_nothing(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    ids = sandbox.launch(6)
    ids_file = write_ids(tmp_path / "ids.txt", ids)
    base = ["terminate", "--ids", ids_file, "--endpoint-url", sandbox.endpoint, "--yes"]
    code, _, err = swarm(
        *base, "--ledger", str(tmp_path / "a.jsonl"), "--expect-account", "999999999999"
    )
    assert code == 3 and ACCOUNT in err
    code, _, err = swarm(*base, "--ledger", str(tmp_path / "b.jsonl"), "--max-count", "5")
    assert code == 3 and "refusing to terminate 6 instances: --max-count is 5" in err
    # Counted before any tag is read: a --protect-tag that would keep some does not lower it.
    code, _, err = swarm(
        *base, "--ledger", str(tmp_path / "b2.jsonl"), "--max-count", "5", "--protect-tag", "keep"
    )
    assert code == 3
    assert "6 instances (counted before --protect-tag keeps any): --max-count is 5" in err
    code, _, err = swarm(*base[:-1], "--ledger", str(tmp_path / "c.jsonl"))  # no --yes, no tty
    assert code == 3
    assert sandbox.counters.accepted + sandbox.counters.throttled == 0
    assert set(sandbox.states(ids).values()) == {"running"}
    # The right account and a count within bounds let it through.
    code, _, err = swarm(
        *base,
        "--ledger",
        str(tmp_path / "d.jsonl"),
        "--expect-account",
        ACCOUNT,
        "--max-count",
        "6",
    )
    assert code == 0, err


def test_a_protected_tag_is_never_touched_and_is_recorded(sandbox: Sandbox, tmp_path: Path) -> None:
    ids = sandbox.launch(6)
    sandbox.client().create_tags(Resources=ids[:2], Tags=[{"Key": "keep", "Value": "yes"}])
    code, report = terminate_json(
        sandbox,
        write_ids(tmp_path / "ids.txt", ids),
        tmp_path / "l.jsonl",
        "--protect-tag",
        "keep=yes",
    )
    assert code == 1
    states = sandbox.states(ids)
    assert [states[i] for i in ids[:2]] == ["running", "running"]
    assert {states[i] for i in ids[2:]} == {"terminated"}
    assert {p["id"]: p["code"] for p in report["problems"]} == dict.fromkeys(ids[:2], "Protected")
    assert sandbox.counters.instances_accepted == 4


def test_protected_instances_do_not_spend_the_failure_budget(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    ids = sandbox.launch(4)
    sandbox.client().create_tags(Resources=ids[:2], Tags=[{"Key": "keep", "Value": "yes"}])
    code, report = terminate_json(
        sandbox,
        write_ids(tmp_path / "ids.txt", ids),
        tmp_path / "l.jsonl",
        "--protect-tag",
        "keep",
        "--max-errors",
        "0",
    )
    assert code == 1  # the protected ones are recorded failed
    assert report["stopped"] is None and report["counts"]["succeeded"] == 2
