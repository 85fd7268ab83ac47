"""swarm ec2 OPERATION's rails and selection beyond instances: --protect-tag read with
DescribeTags (failing closed), and resources selected by filter, against the sandbox."""

from __future__ import annotations

from pathlib import Path

from test_cli import write_ids
from test_ec2_ops import ec2, statuses, still_there

from swarm_cli.sandbox import Sandbox

KEEP = [{"Key": "keep", "Value": "yes"}]


def test_protect_tag_spares_tagged_snapshots_in_the_plan_and_the_run(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    made = sandbox.seed(snapshots=6)["snapshots"]
    sandbox.client().create_tags(Resources=made[:2], Tags=KEEP)
    sandbox.client().create_tags(Resources=[made[2]], Tags=[{"Key": "keep", "Value": "no"}])
    ids = write_ids(tmp_path / "ids.txt", made)
    ledger = tmp_path / "l.jsonl"
    code, plan, err = ec2(
        sandbox, "delete-snapshot", ids, ledger, "--dry-run", "--protect-tag", "keep=yes"
    )
    assert code == 1, err
    rows = {r["id"]: r["prediction"] for r in plan["rows"]}
    assert [rows[i] for i in made] == ["protected"] * 2 + ["would act"] * 4
    assert sandbox.calls_by("DeleteSnapshot") == 0

    code, report, err = ec2(sandbox, "delete-snapshot", ids, ledger, "--protect-tag", "keep=yes")
    assert code == 1, err
    assert still_there(sandbox, "delete-snapshot", made) == set(made[:2])
    assert set(sandbox.done_by("DeleteSnapshot")) == set(made[2:])  # never sent the others
    seen = statuses(ledger)
    assert {seen[i] for i in made[:2]} == {("failed", "Protected")}
    assert "2 snapshot(s) protected" in err


def test_protect_tag_refuses_every_resource_whose_tags_cannot_be_read(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    made = sandbox.seed(volumes=4)["volumes"]
    ids = write_ids(tmp_path / "ids.txt", made)
    ledger = tmp_path / "l.jsonl"
    sandbox.fail_action("DescribeTags", 403, "UnauthorizedOperation", "not allowed to read tags")
    code, plan, err = ec2(
        sandbox, "delete-volume", ids, ledger, "--dry-run", "--protect-tag", "keep"
    )
    assert code == 1, err
    assert {r["prediction"] for r in plan["rows"]} == {"unknown"}
    assert "UnauthorizedOperation" in plan["rows"][0]["reason"]

    code, report, err = ec2(sandbox, "delete-volume", ids, ledger, "--protect-tag", "keep")
    assert code == 3, err  # a rail that cannot see refuses
    assert sandbox.calls_by("DeleteVolume") == 0
    assert still_there(sandbox, "delete-volume", made) == set(made)
    assert {statuses(ledger)[i] for i in made} == {("failed", "RailUnverified")}
    assert "could not read the tags of 4 volume(s)" in err and "UnauthorizedOperation" in err


def test_protect_tag_guards_tag_operations_too(sandbox: Sandbox, tmp_path: Path) -> None:
    made = sandbox.seed(addresses=3)["addresses"]
    sandbox.client().create_tags(Resources=[made[0]], Tags=KEEP)
    ids = write_ids(tmp_path / "ids.txt", made)
    code, _, err = ec2(
        sandbox, "delete-tags", ids, tmp_path / "l.jsonl", "--tag", "keep", "--protect-tag", "keep"
    )
    assert code == 1, err
    tags = sandbox.client().describe_tags(Filters=[{"Name": "resource-id", "Values": made}])
    assert [(t["ResourceId"], t["Key"]) for t in tags["Tags"]] == [(made[0], "keep")]
