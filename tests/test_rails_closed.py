"""Rails fail closed: an instance whose tags nobody could read is never acted on."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_cli import ledger_by_id, swarm, terminate_json, write_ids

from swarm_cli.errors import EXIT_REFUSED
from swarm_cli.sandbox import Sandbox

DENIED = (403, "UnauthorizedOperation", "You are not authorized to perform this operation.")
FAILING = (500, "InternalError", "An internal error has occurred.")


@pytest.mark.parametrize("fault", [DENIED, FAILING], ids=["denied", "failing"])
def test_protect_tag_with_describe_unreadable_sends_nothing_and_exits_3(
    sandbox: Sandbox, tmp_path: Path, fault: tuple[int, str, str]
) -> None:
    ids = sandbox.launch(6)
    sandbox.client().create_tags(Resources=ids[:3], Tags=[{"Key": "keep", "Value": "yes"}])
    status, code_name, message = fault
    sandbox.fail_action("DescribeInstances", status, code_name, message)
    ledger = tmp_path / "l.jsonl"
    code, report = terminate_json(
        sandbox,
        write_ids(tmp_path / "ids.txt", ids),
        ledger,
        "--protect-tag",
        "keep",
        "--max-attempts",
        "2",
    )
    assert code == EXIT_REFUSED
    assert report["exit_code"] == EXIT_REFUSED
    assert report["rail_unverified"] == 6
    assert set(sandbox.states(ids).values()) == {"running"}
    assert sandbox.counters.instances_accepted == 0
    problems = {p["id"]: p for p in report["problems"]}
    assert {p["code"] for p in problems.values()} == {"RailUnverified"}
    assert all(code_name in p["message"] for p in problems.values())
    recorded = ledger_by_id(ledger)
    assert {i: r[-1] for i, r in recorded.items()} == dict.fromkeys(ids, "failed")


def test_protect_tag_with_instances_left_out_of_describe_sends_only_the_seen(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    ids = sandbox.launch(6)
    sandbox.client().create_tags(Resources=ids[:2], Tags=[{"Key": "keep", "Value": "yes"}])
    # Two protected and one plain instance are not in DescribeInstances' answers.
    unseen = [ids[0], ids[1], ids[5]]
    sandbox.omit_from_describe(unseen)
    ledger = tmp_path / "l.jsonl"
    code, report = terminate_json(
        sandbox, write_ids(tmp_path / "ids.txt", ids), ledger, "--protect-tag", "keep"
    )
    assert code == EXIT_REFUSED
    states = sandbox.states(ids)
    assert {states[i] for i in unseen} == {"running"}
    assert {states[i] for i in ids[2:5]} == {"terminated"}
    codes = {p["id"]: p["code"] for p in report["problems"]}
    assert codes == dict.fromkeys(unseen, "RailUnverified")
    recorded = {i: r[-1] for i, r in ledger_by_id(ledger).items()}
    assert {recorded[i] for i in unseen} == {"failed"}


def test_protect_tag_still_sends_what_ec2_says_does_not_exist(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    from swarm_cli.sandbox import fake_ids

    ids = sandbox.launch(2)
    ghost = fake_ids(1)
    code, report = terminate_json(
        sandbox,
        write_ids(tmp_path / "ids.txt", ids + ghost),
        tmp_path / "l.jsonl",
        "--protect-tag",
        "keep",
    )
    assert code == 1  # missing, as without the rail: no rail was blind
    assert "rail_unverified" not in report
    assert {p["id"]: p["status"] for p in report["problems"]} == dict.fromkeys(ghost, "missing")


def test_a_plan_predicts_protect_tag_as_the_run_records_it(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    from test_cli import swarm

    ids = sandbox.launch(4)
    sandbox.client().create_tags(Resources=ids[:2], Tags=[{"Key": "keep", "Value": "yes"}])
    ids_file = write_ids(tmp_path / "ids.txt", ids)
    code, out, err = swarm(
        "plan", "terminate", "--ids", ids_file, "--endpoint-url", sandbox.endpoint,
        "--protect-tag", "keep", "-o", "json",
    )  # fmt: skip
    assert code == 1, err
    predicted = {row["id"]: row["prediction"] for row in json.loads(out)["rows"]}
    assert predicted == {
        **dict.fromkeys(ids[:2], "protected"),
        **dict.fromkeys(ids[2:], "would act"),
    }
    code, report = terminate_json(sandbox, ids_file, tmp_path / "l.jsonl", "--protect-tag", "keep")
    assert {p["id"]: p["code"] for p in report["problems"]} == dict.fromkeys(ids[:2], "Protected")


def test_a_resume_without_the_protect_tag_sends_none_whose_tags_were_unread(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    ids = sandbox.launch(4)
    sandbox.client().create_tags(Resources=ids[:2], Tags=[{"Key": "keep", "Value": "yes"}])
    sandbox.fail_action("DescribeInstances", *DENIED)
    ledger = tmp_path / "l.jsonl"
    listed = write_ids(tmp_path / "ids.txt", ids)
    code, _ = terminate_json(sandbox, listed, ledger, "--protect-tag", "keep")
    assert code == EXIT_REFUSED
    sandbox.fail_action("DescribeInstances", None)

    # Without the rail the resume would have terminated the two tagged ones: it holds all
    # four back, refused as before, and says how to check them.
    code, report = terminate_json(sandbox, listed, ledger, "--resume")
    assert code == EXIT_REFUSED
    assert report["rail_unverified"] == 4
    assert set(sandbox.states(ids).values()) == {"running"}
    assert sandbox.counters.instances_accepted == 0
    assert {p["code"] for p in report["problems"]} == {"RailUnverified"}
    assert report["problems"][0]["message"].endswith(
        "give that rail again to check it again (rail: --protect-tag keep)"
    )
    # The retry the summary names gives that rail again.
    code, out, _err = swarm(
        "terminate", "--ids", listed, "--endpoint-url", sandbox.endpoint, "--ledger",
        str(ledger), "--yes", "--resume", "--progress", "none",
    )  # fmt: skip
    assert code == EXIT_REFUSED
    retry = " ".join(out.split())
    retry = retry[retry.index("retry the rest:") :]
    assert "--protect-tag keep" in retry and "--resume" in retry

    code, report = terminate_json(sandbox, listed, ledger, "--resume", "--protect-tag", "keep")
    assert code == 1
    states = sandbox.states(ids)
    assert [states[i] for i in ids[:2]] == ["running"] * 2
    assert {states[i] for i in ids[2:]} <= {"shutting-down", "terminated"}


def test_a_plan_of_a_rail_that_cannot_see_exits_3_as_the_run_does(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    ids = sandbox.launch(4)
    sandbox.client().create_tags(Resources=ids[:2], Tags=[{"Key": "keep", "Value": "yes"}])
    sandbox.fail_action("DescribeInstances", *DENIED)
    listed = write_ids(tmp_path / "ids.txt", ids)
    where = ("--endpoint-url", sandbox.endpoint, "--protect-tag", "keep")
    code, out, err = swarm("plan", "terminate", "--ids", listed, *where, "-o", "json")
    assert code == EXIT_REFUSED, err
    plan = json.loads(out)
    assert plan["exit_code"] == EXIT_REFUSED and plan["rail_unverified"] == 4
    assert {row["prediction"] for row in plan["rows"]} == {"unknown"}
    code, out, err = swarm("plan", "terminate", "--ids", listed, *where)
    assert code == EXIT_REFUSED
    assert "refused: 4 instance(s) a rail could not check would not be sent" in out, out
    # Without the rail the same plan predicts them unknown, and the run would send them.
    code, out, err = swarm("plan", "terminate", "--ids", listed, "--endpoint-url", sandbox.endpoint)
    assert code == 1, err
    assert "a rail could not check" not in out
    code, report = terminate_json(sandbox, listed, tmp_path / "l.jsonl", "--protect-tag", "keep")
    assert code == EXIT_REFUSED and report["rail_unverified"] == 4


def test_a_plan_of_an_operation_whose_tags_cannot_be_read_exits_3_as_the_run_does(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    ids = sandbox.launch(3)
    sandbox.fail_action("DescribeTags", *FAILING)
    listed = write_ids(tmp_path / "ids.txt", ids)
    args = ("ec2", "create-tags", "--ids", listed, "--tag", "a=b", "--protect-tag", "keep")
    where = ("--endpoint-url", sandbox.endpoint, "--max-attempts", "2")
    code, out, err = swarm(*args, *where, "--dry-run", "-o", "json")
    assert code == EXIT_REFUSED, err
    plan = json.loads(out)
    assert plan["rail_unverified"] == 3
    assert {row["prediction"] for row in plan["rows"]} == {"unknown"}
    code, out, err = swarm(
        *args, *where, "--yes", "--ledger", str(tmp_path / "l.jsonl"), "-o", "json"
    )
    assert code == EXIT_REFUSED, err
    assert json.loads(out)["rail_unverified"] == 3
    sandbox.fail_action("DescribeTags", None)
    tags = sandbox.client().describe_tags(Filters=[{"Name": "key", "Values": ["a"]}])["Tags"]
    assert tags == []


def test_a_resume_whose_look_up_is_denied_does_not_say_protect_tag_will_send_them(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    """The resume's look-up and --protect-tag both read DescribeInstances: where one is
    denied, the resume line does not promise the rail's refused IDs are sent."""
    ids = sandbox.launch(3)
    listed = write_ids(tmp_path / "ids.txt", ids)
    ledger = tmp_path / "l.jsonl"
    sandbox.fail_action("DescribeInstances", *DENIED)
    code, _out, err = swarm(
        "stop", "--ids", listed, "--endpoint-url", sandbox.endpoint, "--ledger", str(ledger),
        "--yes", "--resume", "--protect-tag", "keep", "--progress", "none",
    )  # fmt: skip
    assert code == EXIT_REFUSED, err
    text = " ".join(err.split())
    assert "3 could not be read (UnauthorizedOperation x 3): they are sent unless" in text, text
    assert "--protect-tag cannot read their tags either" in text
    assert "they are sent)" not in text
    assert sandbox.counters.instances_accepted == 0
    assert set(sandbox.states(ids).values()) == {"running"}
