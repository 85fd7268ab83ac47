"""Errors are typed, and mapped to a message and an exit code in one place only."""

from __future__ import annotations

import json
import os
import re
import signal
from pathlib import Path
from typing import Annotated

import pytest
import typer
from test_cli import write_ids
from typer.testing import CliRunner

import swarm_cli
from swarm_cli import errors, run
from swarm_cli.cli import app
from swarm_cli.cli.exits import SwarmGroup, exit_meaning
from swarm_cli.errors import (
    CredentialsError,
    Interrupted,
    LedgerFailure,
    RefusedError,
    SwarmError,
    UsageError,
    error_for,
)
from swarm_cli.ledger import LedgerError, LedgerWriteError

IDS = ["i-0123456789abcdef0", "i-0123456789abcdef1", "i-0123456789abcdef2"]


def swarm(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, list(args))
    assert not result.exception or isinstance(result.exception, SystemExit), result.exception
    return result.exit_code, result.stdout, result.stderr


def ids_file(tmp_path: Path) -> str:
    path = tmp_path / "ids.txt"
    path.write_text("".join(f"{i}\n" for i in IDS))
    return str(path)


def test_the_codes_are_the_documented_ones() -> None:
    # The README's exit codes, which CI scripts branch on: a change here breaks them.
    assert (errors.EXIT_FAILED, errors.EXIT_USAGE, errors.EXIT_REFUSED) == (1, 2, 3)
    assert (errors.EXIT_CREDENTIALS, errors.EXIT_LEDGER, errors.EXIT_INTERRUPTED) == (4, 74, 130)
    assert run.EXIT_OK == 0


@pytest.mark.parametrize(
    ("error", "code"),
    [
        (UsageError("u"), 2),
        (RefusedError("r"), 3),
        (CredentialsError("c"), 4),
        (LedgerFailure("l"), 74),
        (Interrupted("i"), 130),
        (Interrupted("i", signum=signal.SIGTERM), 143),
        (Interrupted("i", signum=signal.SIGHUP), 129),
        (SwarmError("s"), 1),
    ],
)
def test_each_kind_carries_its_exit_code(error: SwarmError, code: int) -> None:
    assert error.exit_code == code
    assert isinstance(error_for(code, "again"), type(error))
    assert error_for(code, "again").exit_code == code


# Through the command line itself: one case of each kind a user can meet.


def test_bad_usage_is_2_with_one_error_line() -> None:
    code, out, err = swarm("terminate")
    assert code == 2 and out == ""
    assert err.startswith("error: say which instances: --ids FILE")


def test_a_refusal_is_3(tmp_path: Path) -> None:
    code, _, err = swarm("terminate", "--ids", ids_file(tmp_path), "--max-count", "1", "--yes")
    assert code == 3
    assert "error: refusing to terminate 3 instances: --max-count is 1; nothing was sent" in err


def test_credentials_are_4(tmp_path: Path) -> None:
    code, _, err = swarm("terminate", "--ids", ids_file(tmp_path), "--profile", "nosuch", "--yes")
    assert code == 4
    assert "error: The config profile (nosuch) could not be found" in err


def test_an_aws_profile_that_names_no_profile_is_4_not_a_traceback(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Met where the list's regions are checked, before --profile's own check would be.
    monkeypatch.setenv("AWS_PROFILE", "nosuch")
    monkeypatch.setenv("AWS_CONFIG_FILE", os.devnull)
    monkeypatch.setenv("AWS_REGION", "us-east-1")
    for command in (("terminate", "--yes"), ("plan", "terminate")):
        code, _, err = swarm(*command, "--ids", ids_file(tmp_path))
        assert code == 4, err
        assert "error: The config profile (nosuch) could not be found" in err
        assert "Traceback" not in err and "--profile or AWS_PROFILE" in err


def test_bad_input_lines_follow_their_error(tmp_path: Path) -> None:
    path = tmp_path / "ids.txt"
    path.write_text("nope\n")
    code, _, err = swarm("terminate", "--ids", str(path))
    lines = err.splitlines()
    assert code == 2
    assert lines[0] == f"error: 1 invalid line(s) in {path}; nothing was sent:"
    assert lines[1].startswith("  line 1: ")


def test_bad_ids_on_one_line_count_as_one_line(tmp_path: Path) -> None:
    path = tmp_path / "ids.txt"
    path.write_text("i-bad1 i-bad2 i-bad3\ni-0123456789abcdef0\n")
    code, _, err = swarm("terminate", "--ids", str(path))
    lines = err.splitlines()
    assert code == 2
    assert lines[0] == f"error: 1 invalid line(s) (3 invalid entries) in {path}; nothing was sent:"
    assert [line.split(":")[0] for line in lines[1:]] == ["  line 1"] * 3


def test_neither_ids_nor_a_selection_and_both_are_told_apart(tmp_path: Path) -> None:
    code, _, neither = swarm("terminate", "--region", "us-east-1")
    assert code == 2 and "not both" not in neither and "--ids FILE, or --filter" in neither
    code, _, both = swarm(
        "terminate", "--ids", ids_file(tmp_path), "--filter", "tag:env=ci", "--region", "us-east-1"
    )
    assert code == 2 and "not both" in both


def test_a_ledger_error_from_below_is_2(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    code, _, err = swarm("ledger", "summary", str(fifo))
    assert code == 2
    assert err == (
        f"error: cannot read the ledger {fifo}: it is not a regular file (a FIFO, a device), "
        "not a swarm ledger\n"
    )
    code, out, _ = swarm("ledger", "summary", "-o", "json", str(fifo))
    assert code == 2
    assert json.loads(out)["error"].startswith("cannot read the ledger")


def test_a_command_that_returns_ends_0() -> None:
    code, out, _ = swarm("version")
    assert code == 0 and out.startswith("swarm ")


# Every kind, through the one place: a command of a small app made the same way.


def kinds_app() -> typer.Typer:
    test_app = typer.Typer(cls=SwarmGroup)

    @test_app.callback()
    def main() -> None:
        """Every kind of error."""

    @test_app.command()
    def fail(
        kind: str,
        output: Annotated[str, typer.Option("--output", "-o")] = "text",
    ) -> None:
        raise {
            "usage": UsageError("bad [usage]"),
            "refused": RefusedError("refused"),
            "declined": RefusedError("not confirmed; nothing was sent", plain=True),
            "credentials": CredentialsError("no usable credentials"),
            "ledger": LedgerFailure("cannot write the ledger"),
            "ledger-write": LedgerWriteError("cannot write the ledger"),
            "ledger-read": LedgerError("cannot read the ledger"),
            "sigint": Interrupted("interrupted"),
            "sigterm": Interrupted("interrupted by SIGTERM", signum=signal.SIGTERM),
            "details": UsageError("2 bad lines:", details=["  line 1: a", "  line 2: b"]),
        }[kind]

    @test_app.command()
    def ends(code: int) -> int:
        return code

    return test_app


@pytest.mark.parametrize(
    ("kind", "code", "stderr"),
    [
        ("usage", 2, "error: bad [usage]\n"),
        ("refused", 3, "error: refused\n"),
        ("declined", 3, "not confirmed; nothing was sent\n"),
        ("credentials", 4, "error: no usable credentials\n"),
        ("ledger", 74, "error: cannot write the ledger\n"),
        ("ledger-write", 74, "error: cannot write the ledger\n"),
        ("ledger-read", 2, "error: cannot read the ledger\n"),
        ("sigint", 130, "error: interrupted\n"),
        ("sigterm", 143, "error: interrupted by SIGTERM\n"),
        ("details", 2, "error: 2 bad lines:\n  line 1: a\n  line 2: b\n"),
    ],
)
def test_each_kind_ends_with_its_code_and_message(kind: str, code: int, stderr: str) -> None:
    result = CliRunner().invoke(kinds_app(), ["fail", kind])
    assert (result.exit_code, result.stdout, result.stderr) == (code, "", stderr)
    result = CliRunner().invoke(kinds_app(), ["fail", kind, "-o", "json"])
    data = json.loads(result.stdout)
    assert result.exit_code == code
    assert data["exit_code"] == code and data["meaning"] == exit_meaning(code)
    # All stderr said, the lines under the message too (without their indent).
    said = "\n".join(line.strip() for line in stderr.splitlines())
    assert data["error"] == (said if kind == "declined" else said.removeprefix("error: "))


@pytest.mark.parametrize("code", [0, 1, 3])
def test_a_returned_code_is_the_exit_code(code: int) -> None:
    assert CliRunner().invoke(kinds_app(), ["ends", str(code)]).exit_code == code


def test_a_bug_is_still_a_traceback() -> None:
    test_app = typer.Typer(cls=SwarmGroup)

    @test_app.callback()
    def main() -> None:
        """A bug."""

    @test_app.command()
    def bug() -> None:
        raise ZeroDivisionError

    result = CliRunner().invoke(test_app, ["bug"])
    assert isinstance(result.exception, ZeroDivisionError)


# Nothing but the one place ends the process.

EXITS = re.compile(r"\bsys\.exit\(|\btyper\.Exit\(|\braise SystemExit\b|\bos\._exit\(")


def test_only_the_one_place_exits() -> None:
    root = Path(swarm_cli.__file__).parent
    one_place = root / "cli" / "exits.py"
    # Ctrl-C while the command line (that place with it) is still being imported.
    before_it = root / "entry.py"
    found = [
        f"{path.relative_to(root)}:{n}: {line.strip()}"
        for path in sorted(root.rglob("*.py"))
        if path not in (one_place, before_it)
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if EXITS.search(line)
    ]
    assert found == []
    assert len(EXITS.findall(one_place.read_text(encoding="utf-8"))) == 1
    assert len(EXITS.findall(before_it.read_text(encoding="utf-8"))) == 1


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("http://[::1", "is not a URL (Invalid IPv6 URL)"),
        ("http://u:secret@127.0.0.1:99999", "'http://***@127.0.0.1:99999' is not a URL (Port"),
        ("ftp://x", "is not an http:// or https:// URL with a host"),
        ("http://", "is not an http:// or https:// URL with a host"),
    ],
)
@pytest.mark.parametrize("command", [["terminate"], ["ec2", "delete-volume"], ["list"]])
def test_a_malformed_endpoint_url_is_a_usage_error_with_nothing_written(
    tmp_path: Path, url: str, says: str, command: list[str]
) -> None:
    ids = tmp_path / "ids.txt"
    ids.write_text("vol-0123456789abcdef0\n" if "ec2" in command else "i-0123456789abcdef0\n")
    ledger = tmp_path / "l.jsonl"
    args = [] if command == ["list"] else ["--ids", str(ids), "--yes", "--ledger", str(ledger)]
    result = CliRunner().invoke(app, [*command, *args], env={"AWS_ENDPOINT_URL": url})
    assert result.exit_code == 2, result.output
    assert says in " ".join(result.output.split())
    assert "secret" not in result.output
    assert not ledger.exists()


def test_an_option_given_to_a_group_says_to_name_a_command_first() -> None:
    code, _, err = swarm("plan", "--ids", "ids.txt")
    assert code == 2
    assert "plan takes a command first, then its options:" in err
    assert "plan terminate --ids" in err
    code, _, err = swarm("ec2", "--filter", "status=available")
    assert code == 2 and "ec2 delete-snapshot --filter" in err
    # An option none of its commands takes: no hint that would mislead.
    code, _, err = swarm("ledger", "--bogus")
    assert code == 2 and "hint:" not in err


def test_a_list_of_another_kind_of_id_says_which_and_what_acts_on_them(tmp_path: Path) -> None:
    instances = tmp_path / "instances.txt"
    instances.write_text("i-0123456789abcdef0\ni-0123456789abcdef1\n")
    code, _, err = swarm("ec2", "delete-snapshot", "--ids", str(instances), "--yes")
    assert code == 2
    assert err.splitlines()[-1] == (
        "hint: these are instance IDs (i-…): swarm terminate, stop, start or reboot act on them"
    )
    snapshots = tmp_path / "snapshots.txt"
    snapshots.write_text("snap-0123456789abcdef0\n")
    code, _, err = swarm("terminate", "--ids", str(snapshots), "--yes")
    assert code == 2
    assert "hint: these are snapshot IDs (snap-…): swarm ec2 delete-snapshot acts on them" in err
    # With a comment after it, the ID still says.
    snapshots.write_text("snap-0123456789abcdef0  # the old backup\n")
    code, _, err = swarm("terminate", "--ids", str(snapshots), "--yes")
    assert code == 2 and "hint: these are snapshot IDs" in err, err
    # Names that only start as IDs of a kind do (snap-shot-1): no hint that would mislead.
    snapshots.write_text("snap-shot-host-1\n")
    code, _, err = swarm("terminate", "--ids", str(snapshots), "--yes")
    assert code == 2 and "hint:" not in err, err
    # The same from a table, JSON lines, or swarm list's JSON: the ID, not the line, says.
    for listed in (
        "id,region\nsnap-0123456789abcdef0,us-east-1\n",
        '{"id": "snap-0123456789abcdef0", "region": "us-east-1"}\n',
        '{"snapshots": [{"id": "snap-0123456789abcdef0", "in_use": null}]}\n',
    ):
        snapshots.write_text(listed)
        code, _, err = swarm("stop", "--ids", str(snapshots), "--yes")
        assert code == 2 and "hint: these are snapshot IDs (snap-…)" in err, (listed, err)
    # Malformed IDs of the kind asked for, or a mix: no hint that would mislead.
    mixed = tmp_path / "mixed.txt"
    mixed.write_text("i-xyz\nsnap-0123456789abcdef0\n")
    code, _, err = swarm("terminate", "--ids", str(mixed), "--yes")
    assert code == 2 and "hint:" not in err
    bad = tmp_path / "bad.txt"
    bad.write_text("i-xyz\n")
    code, _, err = swarm("terminate", "--ids", str(bad), "--yes")
    assert code == 2 and "hint:" not in err


def test_a_list_or_a_ledger_given_twice_is_refused_before_anything_is_read(
    tmp_path: Path,
) -> None:
    """click keeps the last of a repeated option: the first list's IDs would be dropped
    without a word."""
    five, one = tmp_path / "five.txt", tmp_path / "one.txt"
    five.write_text("".join(f"i-0123456789abcdef{k}\n" for k in range(5)))
    one.write_text("i-0123456789abcdef9\n")
    code, _, err = swarm("plan", "terminate", "--ids", str(five), f"--ids={one}")
    assert code == 2 and "--ids is given 2 times" in err and "cat a.txt b.txt" in err
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    code, _, err = swarm("stop", "--ids", str(one), "--ledger", str(a), f"--ledger={b}", "--yes")
    assert code == 2 and "--ledger is given 2 times; one ledger only" in err
    assert not (a.exists() or b.exists())
    # Once each is no matter.
    code, out, err = swarm("terminate", "--ids", str(one), "--exclude-ids", str(five), "--help")
    assert code == 0 and "given" not in err and "--exclude-ids" in out
    # Nor is a word that is another option's value (a tag key that reads "--ids").
    code, out, err = swarm("terminate", "--ids", str(one), "--protect-tag", "--ids", "--help")
    assert code == 0 and "given" not in err and "--protect-tag" in out
    # A value that reads "--" ends nothing: the lists after it still count.
    code, _, err = swarm("stop", "--protect-tag", "--", "--ids", str(one), f"--ids={five}")
    assert code == 2 and "--ids is given 2 times" in err


def test_where_to_act_and_a_rail_s_limit_given_twice_or_empty_are_refused(tmp_path: Path) -> None:
    """A second --region acted in that one alone; a second --max-count raised the rail
    silently; --region "$R" with R unset acted in the default region."""
    one = tmp_path / "one.txt"
    one.write_text("i-0123456789abcdef9\n")
    base = ("stop", "--ids", str(one), "--yes", "--ledger", str(tmp_path / "l.jsonl"))
    for twice, option in (
        (("--region", "us-east-1", "--region=eu-west-1"), "--region"),
        (("--max-count", "5", "--max-count", "500"), "--max-count"),
        (
            ("--expect-account", "111111111111", "--expect-account", "222222222222"),
            "--expect-account",
        ),
        (
            ("--endpoint-url", "http://127.0.0.1:1", "--endpoint-url", "http://127.0.0.1:2"),
            "--endpoint-url",
        ),
        # The Action passes its own: a user's in its args was dropped without a word.
        (("--report", "mine.html", "--report", "r.html"), "--report"),
        (("--progress", "none", "--progress", "plain"), "--progress"),
    ):
        code, _, err = swarm(*base, *twice)
        assert code == 2 and f"{option} is given 2 times; one value only" in err, err
    code, _, err = swarm(*base, "--region", "")
    assert code == 2 and "is empty (a variable that was not set?)" in err, err
    assert not (tmp_path / "l.jsonl").exists()


def test_profile_stands_whatever_aws_profile_names_and_the_sandbox_reads_none(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from swarm_cli.cli.reach import default_region
    from swarm_cli.ec2 import new_session

    config = tmp_path / "config"
    config.write_text("[profile good]\nregion = eu-west-1\n")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(config))
    monkeypatch.setenv("AWS_PROFILE", "nosuch")
    monkeypatch.delenv("AWS_REGION", raising=False)
    monkeypatch.delenv("AWS_DEFAULT_REGION", raising=False)
    assert new_session(profile="good").region_name == "eu-west-1"
    assert default_region(None, "good") == "eu-west-1"
    # A rehearsal uses no AWS account: no profile is read, not even a missing one.
    ids = write_ids(tmp_path / "ids.txt", [f"i-{n:017x}" for n in range(1, 4)])
    code, _, err = swarm(
        "terminate", "--ids", ids, "--region", "us-east-1", "--sandbox", "--progress", "none",
        "--ledger", str(tmp_path / "l.jsonl"),
    )  # fmt: skip
    assert code == 0, err


def test_no_check_protection_on_a_real_run_is_said_to_do_nothing(tmp_path: Path) -> None:
    """A plan-only option on a run was taken without a word, as if it did something."""
    one = tmp_path / "one.txt"
    one.write_text("i-0123456789abcdef9\n")
    code, _, err = swarm(
        "terminate", "--ids", str(one), "--no-check-protection", "--max-count", "0"
    )
    assert code == 3 and "warning: --no-check-protection is for --dry-run and swarm plan" in err
    code, _, err = swarm("terminate", "--ids", str(one), "--max-count", "0")
    assert code == 3 and "check-protection" not in err
