"""Every command's --help: summaries never cut, arguments by name, an example at the end."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import typer
from test_cli import swarm

from swarm_cli.cli import app
from swarm_cli.cli.helptext import HELP


def _paths(command: Any, path: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    found = [path]
    if hasattr(command, "commands"):  # a group (of Typer's click, or click's)
        for name, sub in command.commands.items():
            found += _paths(sub, (*path, name))
    return found


PATHS = _paths(typer.main.get_command(app))
# Python's type names where a person expects a placeholder: <list[Path]>, <str>, ...
PYTHON_TYPES = re.compile(r"<(?:list\[|str>|int>|float>|bool>|Path>|path>)")


def test_every_command_is_walked() -> None:
    names = {" ".join(p) for p in PATHS}
    assert {"terminate", "plan terminate", "ledger failed", "shards", "list"} <= names
    assert names == set(HELP), "each command has its summary and example in helptext.HELP"


@pytest.mark.parametrize("path", PATHS, ids=lambda p: " ".join(p) or "swarm")
def test_help_of(path: tuple[str, ...]) -> None:
    code, out, err = swarm(*path, "--help")
    assert code == 0, err
    usage = out.splitlines()[0]
    assert usage.startswith(f"Usage: swarm {' '.join(path)}".rstrip())
    assert "{" not in usage and "}" not in usage
    assert not PYTHON_TYPES.search(out), out
    # The example comes last, and runs this very command.
    lines = out.rstrip().splitlines()
    assert lines[-2].strip() == "Example:"
    assert lines[-1].strip().startswith("swarm ")
    assert f"swarm {' '.join(path)}".rstrip() in lines[-1]
    # A listing of subcommands shows each one's whole summary.
    if "Commands:" in out:
        listing = out.split("Commands:", 1)[1].split("Example:", 1)[0]
        rows = [line for line in listing.splitlines() if line.strip()]
        assert rows
        for row in rows:
            name, summary = row.split(None, 1)
            assert summary == HELP[" ".join((*path, name))][0], row
            assert not summary.endswith("..."), row


def test_metavars_say_what_goes_there() -> None:
    _, out, _ = swarm("sandbox", "--help")
    assert re.search(r"--accounts N\b", out)  # a count, not a file
    _, out, _ = swarm("terminate", "--help")
    assert re.search(r"--accounts FILE\b", out)
    _, out, _ = swarm("ledger", "merge", "--help")
    assert "Usage: swarm ledger merge [OPTIONS] LEDGER..." in out
    assert re.search(r"^  LEDGER\.\.\.  ", out, re.M)


def _paragraph(out: str, start: str) -> str:
    text = " ".join(line.strip() for line in out.split("Options:", 1)[0].splitlines())
    return text[text.index(start) :]


def test_the_exit_codes_in_help_are_the_readmes_and_plan_has_its_own() -> None:
    readme = (Path(__file__).parent.parent / "README.md").read_text()
    table = readme.split("### Exit codes", 1)[1].split("\n## ", 1)[0]
    codes = re.findall(r"^\| (\d+(?:\+N)?) \|", table, re.M)
    assert {"0", "1", "2", "3", "4", "74", "130", "128+N"} == set(codes)
    _, out, _ = swarm("terminate", "--help")
    listed = _paragraph(out, "Exit codes:")
    assert all(f" {code} " in listed for code in codes), listed
    assert "rail" in listed  # 3 is a rail's refusal as well as no confirmation
    assert "starts at 1" not in out and "goes alone" in out  # the controller as it is
    _, plan, _ = swarm("plan", "terminate", "--help")
    assert "in the ledger as pending" not in plan and "Writes no ledger" in _paragraph(plan, "")
    # A plan writes no ledger: its 74 is its file's (or standard output's), never a ledger's.
    assert "74 the plan (--plan-out" in _paragraph(plan, "Exit codes:")
    assert "ledger" not in _paragraph(plan, "Exit codes:")
    # A plan sends nothing: the options of a run's sending are not offered.
    for run_only in (
        "--report",
        "--wait",
        "--max-errors",
        "--rollback",
        "--trace",
        "--headroom",
        "With --dry-run",
    ):
        assert run_only not in plan, run_only


def test_a_resource_operation_speaks_of_its_own_resource() -> None:
    _, out, _ = swarm("ec2", "delete-snapshot", "--help")
    flat = " ".join(out.split())
    assert "Select snapshots instead of --ids, with DescribeSnapshots's filter names" in flat
    assert "Select snapshots created at least this long ago" in flat
    assert "DeleteSnapshot takes one ID per call." in flat
    assert "header names snapshot_id (or SnapshotId, id)" in flat
    assert "Never touch snapshots carrying this tag" in flat
    assert "a run of more than N snapshots" in flat
    for instance_only in ("--check-protection", "--rollback"):
        assert instance_only not in out
    # What is recorded and how to retry it comes before how calls are paced.
    paragraphs = out.split("Options:", 1)[0].split("\n\n")
    assert " ".join(paragraphs[1].split()) == "Delete EBS snapshots; those an AMI uses fail."
    assert " ".join(paragraphs[2].split()).startswith(
        "Before the first call, every snapshot is in the ledger as pending"
    ), paragraphs[:3]
    assert " ".join(paragraphs[3].split()).startswith("The first call goes alone")
    _, out, _ = swarm("ec2", "create-tags", "--help")
    flat = " ".join(out.split())
    assert (
        "a tag operation looks nothing up but the tags --protect-tag needs: every ID would act"
        in flat
    )
    assert "--wait" not in out
    assert "look every resource up" not in flat  # the plan of a tag operation does not
    assert "record as done, unsent, those it shows already tagged" in flat
    assert "already there" not in flat
    assert "repeatable, up to 50. As EC2 takes them: a key of at most 128 characters" in flat
    _, out, _ = swarm("ec2", "release-address", "--help")
    flat = " ".join(out.split())
    assert "Never touch addresses carrying this tag" in flat and "--ids addresses.txt" in flat
    assert "addresss" not in out
    _, out, _ = swarm("terminate", "--help")
    assert "--check-protection" in out and "--rollback" in out and "--wait" in out
    assert "Select instances instead of --ids" in " ".join(out.split())
    # What a resume takes as done, in each one's own words.
    assert (
        "(DescribeInstances) and record as done, unsent, those it shows already "
        "shutting-down or terminated" in " ".join(out.split())
    )
    _, out, _ = swarm("ec2", "delete-snapshot", "--help")
    assert "those it shows already deleted." in " ".join(out.split())
    _, out, _ = swarm("reboot", "--help")
    assert "the rest are sent again (reboot leaves no state to look up)" in " ".join(out.split())


def test_rollback_speaks_of_its_own_options() -> None:
    _, out, _ = swarm("rollback", "--help")
    flat = " ".join(out.split())
    assert "--shard" not in flat and "an undo of more than N instances" in flat
    assert "--wait-timeout" in flat
    # As the README and the command have it: a run and its --resume need no --run.
    assert "latest stop or start run is undone when it alone has something left" in flat
    code, _, err = swarm("rollback", "/nonexistent-folder/l.jsonl", "--yes")
    said = " ".join(err.split())
    assert (
        code == 2 and "--ledger" not in said and "the undo is appended to the run's ledger" in said
    )


@pytest.mark.parametrize("path", [(), ("stop",), ("ledger", "failed")])
def test_dash_h_is_help_where_a_usage_error_points_to_it(path: tuple[str, ...]) -> None:
    """A usage error says "Try '... -h' for help": -h answers, on every command."""
    code, _, err = swarm(*path, "--bogus")
    assert code == 2 and "-h' for help" in err
    code, out, err = swarm(*path, "-h")
    assert code == 0 and out.startswith("Usage: "), err
