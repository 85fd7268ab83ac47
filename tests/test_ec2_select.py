"""swarm ec2 OPERATION's rails and selection beyond instances: --protect-tag read with
DescribeTags (failing closed), and resources selected by filter, against the sandbox."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from test_actions import ACCOUNTS, REGIONS, accounts_file
from test_cli import swarm, write_ids
from test_ec2_ops import ec2, statuses, still_there

from swarm_cli.ledger import fold, read_records
from swarm_cli.sandbox import Sandbox, fake_ids

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
    assert sandbox.calls_by("DeleteSnapshot") == 1  # its DryRun, the permission check
    assert sandbox.done_by("DeleteSnapshot") == {}

    code, _report, err = ec2(sandbox, "delete-snapshot", ids, ledger, "--protect-tag", "keep=yes")
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
    assert code == 3, err  # as the run: a rail that cannot see refuses
    assert {r["prediction"] for r in plan["rows"]} == {"unknown"}
    assert plan["rail_unverified"] == 4
    assert "UnauthorizedOperation" in plan["rows"][0]["reason"]
    dry_run = sandbox.calls_by("DeleteVolume")

    code, _report, err = ec2(sandbox, "delete-volume", ids, ledger, "--protect-tag", "keep")
    assert code == 3, err  # a rail that cannot see refuses
    assert sandbox.calls_by("DeleteVolume") == dry_run
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


def test_swarm_list_lists_each_kind_and_unused_leaves_out_what_ec2_would_refuse(
    sandbox: Sandbox,
) -> None:
    made = sandbox.seed(snapshots=4, volumes=3, images=2, addresses=3, in_use=1)
    for kind in ("snapshots", "volumes", "addresses"):
        code, out, err = swarm("list", kind, "--endpoint-url", sandbox.endpoint)
        assert code == 0, err
        assert set(made[kind]) <= set(out.split())
        code, out, err = swarm("list", kind, "--unused", "--endpoint-url", sandbox.endpoint)
        assert code == 0, err
        free = set(out.split())
        assert free & set(made[kind]) == set(made[kind][1:]), kind  # the first is in use
        assert "not in use" in err
    # Only the account's own: none of the public AMIs' snapshots moto also holds.
    code, out, err = swarm("list", "images", "--endpoint-url", sandbox.endpoint)
    assert code == 0 and set(out.split()) == set(made["images"]) | _ami_of(sandbox), err
    # None is under deregistration protection (moto has none): --unused keeps them all.
    code, out, err = swarm("list", "images", "--unused", "--endpoint-url", sandbox.endpoint)
    assert code == 0 and set(out.split()) == set(made["images"]) | _ami_of(sandbox), err
    code, out, err = swarm(
        "list", "snapshots", "--output", "json", "--endpoint-url", sandbox.endpoint
    )
    rows = {r["id"]: r for r in json.loads(out)["snapshots"]}
    assert "InvalidSnapshot.InUse" in rows[made["snapshots"][0]]["in_use"]
    assert rows[made["snapshots"][1]]["in_use"] is None
    assert rows[made["snapshots"][1]]["created"]
    for bad, why in (
        (("list", "buckets"), "expected instances, snapshots"),
        (("list", "volumes", "--state", "available"), "--state is for instances"),
        (("list", "--unused"), "snapshots, volumes, images and addresses, not instances"),
    ):
        code, out, err = swarm(*bad, "--endpoint-url", sandbox.endpoint)
        assert code == 2 and why in err and out == "", (bad, err)


def _ami_of(box: Sandbox) -> set[str]:
    """The AMIs Sandbox.seed made for its in-use snapshots."""
    images = box.client().describe_images(Owners=["self"])["Images"]
    return {i["ImageId"] for i in images}


def test_a_filter_selects_the_resources_an_operation_acts_on(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    made = sandbox.seed(volumes=5)["volumes"]
    sandbox.client().create_tags(Resources=made[:3], Tags=[{"Key": "team", "Value": "a"}])
    where = ("--endpoint-url", sandbox.endpoint)
    code, out, err = swarm("plan", "delete-volume", "--filter", "tag:team=a", "-o", "json", *where)
    assert code == 0, err
    assert {r["id"]: r["prediction"] for r in json.loads(out)["rows"]} == dict.fromkeys(
        made[:3], "would act"
    )
    code, _, err = swarm(
        "ec2", "delete-volume", "--filter", "tag:team=a", "--max-count", "2", "--yes", *where
    )
    assert code == 3 and "refusing to delete-volume 3 volumes" in err, err
    code, _, err = swarm("plan", "delete-volume", "--filter", "tag:team=b", *where)
    assert code == 0 and "nothing to do: no volume IDs" in err, err
    assert sandbox.calls_by("DeleteVolume") == 1  # the first plan's DryRun
    assert sandbox.done_by("DeleteVolume") == {}
    code, _, err = swarm(
        "ec2",
        "delete-volume",
        "--filter",
        "tag:team=a",
        "--yes",
        "--ledger",
        str(tmp_path / "l.jsonl"),
        "--endpoint-url",
        sandbox.endpoint,
    )
    assert code == 0, err
    assert "selected 3 volume(s)" in err
    assert still_there(sandbox, "delete-volume", made) == set(made[3:])
    code, _out, err = swarm(
        "ec2",
        "create-tags",
        "--filter",
        "tag:team=a",
        "--tag",
        "x=y",
        "--endpoint-url",
        sandbox.endpoint,
    )
    assert code == 2 and "takes any resource ID" in err, err
    assert sandbox.calls_by("CreateTags") == 0


def test_exclude_ids_spares_its_resources_from_a_filter_and_from_an_id_list(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    made = sandbox.seed(volumes=6)["volumes"]
    sandbox.client().create_tags(Resources=made[:3], Tags=[{"Key": "team", "Value": "x"}])
    spare = write_ids(tmp_path / "spare.txt", [made[0], made[3]])
    where = ("--endpoint-url", sandbox.endpoint)
    code, out, err = swarm(
        "list", "volumes", "--filter", "tag:team=x", "--exclude-ids", spare, *where
    )
    assert code == 0, err
    assert out.split() == made[1:3] and "leaving out any of the 2 ID(s) of --exclude-ids" in err, (
        err
    )
    ledger = tmp_path / "l.jsonl"
    code, _, err = swarm(
        "ec2", "delete-volume", "--filter", "tag:team=x", "--exclude-ids", spare,
        "--yes", "--ledger", str(ledger), *where,
    )  # fmt: skip
    assert code == 0, err
    assert still_there(sandbox, "delete-volume", made) == {made[0], *made[3:]}
    # With an ID list: the excluded ones are never sent, nor recorded.
    ids = write_ids(tmp_path / "ids.txt", made[3:])
    code, _, err = swarm(
        "ec2", "delete-volume", "--ids", ids, "--exclude-ids", spare,
        "--yes", "--ledger", str(ledger), *where,
    )  # fmt: skip
    assert code == 0, err
    assert "1 ID(s) of the list left out" in err, err
    assert still_there(sandbox, "delete-volume", made) == {made[0], made[3]}
    assert made[3] not in statuses(ledger) and made[0] not in statuses(ledger)
    # An exclusion list of another kind is refused before anything is sent.
    wrong = write_ids(tmp_path / "wrong.txt", ["i-0123456789abcdef0"])
    code, _, err = swarm(
        "ec2", "delete-volume", "--ids", ids, "--exclude-ids", wrong, "--yes", *where
    )
    assert code == 2 and "not a volume ID" in err, err
    assert still_there(sandbox, "delete-volume", made) == {made[0], made[3]}
    # Both from standard input: refused; an exclusion file with no ID is said, not skipped.
    code, _, err = swarm(
        "ec2", "delete-volume", "--ids", "-", "--exclude-ids", "-", "--dry-run", *where
    )
    assert code == 2 and "cannot both read standard input" in err, err
    empty = tmp_path / "empty.txt"
    empty.write_text("# made by a command that failed\n")
    code, _, err = swarm(
        "ec2", "delete-volume", "--ids", ids, "--exclude-ids", str(empty), "--dry-run", *where
    )
    assert "lists no ID: nothing is excluded" in err, err


def test_older_than_is_refused_for_a_kind_ec2_gives_no_creation_time() -> None:
    for command in (("list", "addresses"), ("ec2", "release-address")):
        code, out, err = swarm(
            *command, "--older-than", "1d", "--endpoint-url", "http://127.0.0.1:9"
        )
        assert code == 2 and "EC2 gives no creation time for addresses" in err, err
        assert out == ""


@pytest.mark.parametrize("output", ["text", "json"])
def test_unused_snapshots_listed_then_deleted_through_a_pipe(
    sandbox: Sandbox, tmp_path: Path, output: str
) -> None:
    made = sandbox.seed(snapshots=6, in_use=2)["snapshots"]
    code, listed, err = swarm(
        "list", "snapshots", "--unused", "--output", output, "--endpoint-url", sandbox.endpoint
    )
    assert code == 0, err
    assert listed.startswith('{\n  "snapshots": [') == (output == "json")  # its own JSON too
    code, _out, err = swarm(
        "ec2",
        "delete-snapshot",
        "--ids",
        "-",
        "--yes",
        "--ledger",
        str(tmp_path / "l.jsonl"),
        "--endpoint-url",
        sandbox.endpoint,
        stdin=listed,
    )
    assert code == 0, err  # none in use was asked for
    assert still_there(sandbox, "delete-snapshot", made) == set(made[:2])


def test_swarm_demo_runs_a_deletion_on_resources_it_makes(tmp_path: Path) -> None:
    code, out, err = swarm(
        "demo",
        "--operation",
        "delete-volume",
        "--count",
        "20",
        "--protected",
        "2",
        "--error-rate",
        "0",
        "--ledger",
        str(tmp_path / "l.jsonl"),
        "--output",
        "json",
        "--progress",
        "none",
    )
    report = json.loads(out)
    assert code == 1, err  # the two attached volumes fail
    assert report["action"] == "delete-volume"
    assert report["counts"]["succeeded"] == 18
    assert {p["code"] for p in report["problems"]} == {"VolumeInUse"}
    assert report["sandbox"]["deleted"] == 18
    assert report["demo"]["volumes"] == 20
    code, _, err = swarm("demo", "--operation", "create-tags")
    assert code == 2 and "expected terminate-instances or delete-snapshot" in err, err


def test_an_operation_across_accounts_and_regions_in_two_shards_with_report_and_summary(
    sandbox: Sandbox, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    made: dict[tuple[str, str], list[str]] = {}
    rows = ["id,region,account"]
    for account in ACCOUNTS:
        for region in REGIONS[:2]:
            made[(account, region)] = sandbox.seed(snapshots=3, region=region, account=account)[
                "snapshots"
            ]
            rows += [f"{i},{region},{account}" for i in made[(account, region)]]
    ids = tmp_path / "ids.csv"
    ids.write_text("\n".join(rows) + "\n")
    summary = tmp_path / "summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    for k in (1, 2):
        code, report, err = ec2(
            sandbox,
            "delete-snapshot",
            str(ids),
            tmp_path / f"shard{k}.jsonl",
            "--accounts",
            str(accounts_file(tmp_path)),
            "--shard",
            f"{k}/2",
            "--report",
            str(tmp_path / f"shard{k}.html"),
        )
        assert code == 0, err
        assert report["counts"]["succeeded"] == 6  # two of the four pairs
    for (account, region), snapshots in made.items():
        left = sandbox.client(region, account).describe_snapshots(
            Filters=[{"Name": "snapshot-id", "Values": snapshots}]
        )["Snapshots"]
        assert left == [], (account, region)
    merged = tmp_path / "merged.jsonl"
    code, _, err = swarm(
        "ledger",
        "merge",
        str(tmp_path / "shard1.jsonl"),
        str(tmp_path / "shard2.jsonl"),
        "-o",
        str(merged),
    )
    assert code == 0, err
    done = fold(read_records(str(merged)))
    assert {(a, i) for a, i in done} == {
        ("delete-snapshot", i) for snapshots in made.values() for i in snapshots
    }
    assert {(r.account, r.region) for r in done.values()} == set(made)
    assert summary.read_text().count("delete-snapshot") >= 2
    assert "delete-snapshot" in (tmp_path / "shard1.html").read_text()


def test_a_protect_tag_key_with_a_wildcard_is_matched_exactly(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    made = sandbox.seed(snapshots=3)["snapshots"]
    client = sandbox.client()
    client.create_tags(Resources=[made[0]], Tags=[{"Key": "k*y", "Value": "v"}])
    client.create_tags(Resources=[made[1]], Tags=[{"Key": "kxy", "Value": "v"}])  # not k*y
    ids = write_ids(tmp_path / "ids.txt", made)
    code, _, err = ec2(
        sandbox, "delete-snapshot", ids, tmp_path / "l.jsonl", "--protect-tag", "k*y"
    )
    assert code == 1, err
    assert still_there(sandbox, "delete-snapshot", made) == {made[0]}


def test_sandbox_rehearses_an_operation_on_the_real_list_and_writes_no_ledger(
    tmp_path: Path,
) -> None:
    rng = random.Random(3)
    snapshots = fake_ids(30, rng, "snap")
    ledger = tmp_path / "l.jsonl"
    code, out, err = swarm(
        "ec2",
        "delete-snapshot",
        "--ids",
        write_ids(tmp_path / "s.txt", snapshots),
        "--sandbox",
        "--ledger",
        str(ledger),
        "-o",
        "json",
        "--progress",
        "none",
    )
    assert code == 0, err
    report = json.loads(out)
    assert report["counts"]["succeeded"] == 30 and report["ledger"] is None
    assert "loaded 30 IDs as snapshots (none in use)" in err
    assert "rehearsal" in report and not ledger.exists()
    mixed = [*fake_ids(2, rng, "vol"), *fake_ids(2, rng, "ami"), *fake_ids(2, rng, "eipalloc")]
    mixed += fake_ids(2, rng)
    code, out, err = swarm(
        "ec2",
        "create-tags",
        "--ids",
        write_ids(tmp_path / "m.txt", mixed),
        "--tag",
        "a=b",
        "--sandbox",
        "-o",
        "json",
        "--progress",
        "none",
    )
    assert code == 0 and json.loads(out)["counts"]["succeeded"] == 8, err
    assert "8 IDs are loaded" in err and "loaded 8 IDs" in err  # the instances counted too
    code, out, err = swarm(
        "ec2",
        "create-tags",
        "--ids",
        write_ids(tmp_path / "b.txt", ["sg-0123456789abcdef0"]),
        "--tag",
        "a=b",
        "--sandbox",
    )
    assert code == 2 and "the sandbox cannot make sg-0123456789abcdef0" in err, err


def test_ids_given_as_arguments_are_refused_with_where_they_go() -> None:
    for command in (("terminate",), ("ec2", "delete-volume")):
        code, out, err = swarm(*command, "vol-0123456789abcdef0")
        assert code == 2 and out == "", err
        assert "IDs are not arguments" in err and "--ids -" in err


def test_a_filter_name_ec2_does_not_take_is_bad_usage_with_nothing_sent(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    """The sandbox answered it with a 500 page (moto's unknown filter), read as an endpoint
    failure; EC2 answers InvalidParameterValue, and that is the command line's to mend."""
    made = sandbox.seed(volumes=3)["volumes"]
    ledger = tmp_path / "l.jsonl"
    code, _, err = swarm(
        "ec2",
        "delete-volume",
        "--filter",
        "bogus-name=x",
        "--yes",
        "--ledger",
        str(ledger),
        "--endpoint-url",
        sandbox.endpoint,
    )
    assert code == 2, err
    assert "DescribeVolumes failed: InvalidParameterValue: The filter 'bogus-name' is" in err
    assert "check --filter against DescribeVolumes's filter names" in err
    assert still_there(sandbox, "delete-volume", made) == set(made)
    assert not ledger.exists()


def test_an_instance_filter_name_ec2_does_not_take_is_bad_usage_too(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    ids = sandbox.launch(2)
    code, _, err = swarm("list", "--filter", "bogus=1", "--endpoint-url", sandbox.endpoint)
    assert code == 2, err
    assert "DescribeInstances failed: InvalidParameterValue: The filter 'bogus' is" in err
    assert sandbox.states(ids) == dict.fromkeys(ids, "running")


def test_a_resume_without_the_protect_tag_holds_back_what_the_first_run_protected(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    made = sandbox.seed(snapshots=6)["snapshots"]
    sandbox.client().create_tags(Resources=made[:2], Tags=KEEP)
    ids = write_ids(tmp_path / "ids.txt", made)
    ledger = tmp_path / "l.jsonl"
    code, _report, err = ec2(sandbox, "delete-snapshot", ids, ledger, "--protect-tag", "keep")
    assert code == 1, err
    assert still_there(sandbox, "delete-snapshot", made) == set(made[:2])

    # The rail left out of the resume: what it protected stays, failed as it was; the dry
    # run says so first.
    code, plan, err = ec2(sandbox, "delete-snapshot", ids, ledger, "--resume", "--dry-run")
    assert code == 1, err
    rows = {r["id"]: r["prediction"] for r in plan["rows"]}
    assert [rows[i] for i in made[:2]] == ["protected"] * 2
    code, report, err = ec2(sandbox, "delete-snapshot", ids, ledger, "--resume")
    assert code == 1, err
    assert still_there(sandbox, "delete-snapshot", made) == set(made[:2])
    assert set(sandbox.done_by("DeleteSnapshot")) == set(made[2:])
    assert {p["code"] for p in report["problems"]} == {"Protected"}
    assert {statuses(ledger)[i] for i in made[:2]} == {("failed", "Protected")}
    assert "2 snapshot(s) an earlier run's --protect-tag keep held back" in err
    assert report["problems"][0]["message"].endswith("(rail: --protect-tag keep)")

    # Another rail is not that one: held back all the same, even untagged since.
    sandbox.client().delete_tags(Resources=[made[0]], Tags=[{"Key": "keep"}])
    code, report, err = ec2(
        sandbox, "delete-snapshot", ids, ledger, "--resume", "--protect-tag", "other"
    )
    assert code == 1, err
    assert still_there(sandbox, "delete-snapshot", made) == set(made[:2])
    assert "--protect-tag keep held back" in err

    # Given again, the rail checks them again: untagged since, it is deleted.
    code, _report, err = ec2(
        sandbox, "delete-snapshot", ids, ledger, "--resume", "--protect-tag", "keep"
    )
    assert code == 1, err
    assert still_there(sandbox, "delete-snapshot", made) == {made[1]}
    assert statuses(ledger)[made[0]][0] == "succeeded"


def test_a_selection_in_a_region_botocore_does_not_know_is_warned(sandbox: Sandbox) -> None:
    """An ID list's unknown region was warned of as a typo; a selection's (--region, or
    an accounts file's regions) went on without a word, to a raw error of the endpoint."""
    code, _, err = swarm("list", "--region", "us-eats-1", "--endpoint-url", sandbox.endpoint)
    assert "warning: region us-eats-1 is not one botocore knows: a typo?" in err, (code, err)
