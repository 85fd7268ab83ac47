"""--output json: stdout holds exactly one object, refusals and errors included."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from swarm_cli.cli import app
from swarm_cli.sandbox import Sandbox


def run(*args: str, stdin: str | None = None) -> tuple[int, Any, str]:
    result = CliRunner().invoke(app, list(args), input=stdin)
    assert not result.exception or isinstance(result.exception, SystemExit), result.exception
    return result.exit_code, json.loads(result.stdout), result.stderr


def ids_file(tmp_path: Path, ids: list[str]) -> str:
    path = tmp_path / "ids.txt"
    path.write_text("".join(f"{i}\n" for i in ids))
    return str(path)


IDS = ["i-0123456789abcdef0", "i-0123456789abcdef1", "i-0123456789abcdef2"]


@pytest.mark.parametrize("flag", [["-o", "json"], ["--output", "json"], ["--output=json"]])
def test_a_usage_error_of_swarm_is_one_object(flag: list[str]) -> None:
    code, data, err = run("terminate", *flag)
    assert code == 2
    assert data["exit_code"] == 2 and "bad usage" in data["meaning"]
    assert "--ids FILE" in data["error"] and "--ids FILE" in err


def test_a_usage_error_of_the_option_parser_is_one_object() -> None:
    code, data, _ = run("terminate", "-o", "json", "--batch-size", "lots", "--ids", "x")
    assert code == 2
    assert data["exit_code"] == 2 and "lots" in data["error"]
    code, data, _ = run("terminate", "-o", "json", "--no-such-option")
    assert code == 2 and "no-such-option" in data["error"]


def test_bad_input_lines_are_one_object(tmp_path: Path) -> None:
    code, data, _ = run("terminate", "-o", "json", "--ids", ids_file(tmp_path, ["nope"]))
    assert code == 2
    assert "invalid line" in data["error"]


def test_a_rail_refusal_is_one_object(tmp_path: Path) -> None:
    path = ids_file(tmp_path, IDS)
    code, data, _ = run("terminate", "-o", "json", "--ids", path, "--max-count", "1", "--yes")
    assert code == 3
    assert data == {
        "exit_code": 3,
        "meaning": "refused by a rail or at the confirmation",
        "error": "refusing to terminate 3 instances: --max-count is 1; nothing was sent",
    }


def test_no_confirmation_possible_is_one_object(sandbox: Sandbox, tmp_path: Path) -> None:
    ids = sandbox.launch(2)
    code, data, _ = run(
        "terminate",
        "-o",
        "json",
        "--ids",
        ids_file(tmp_path, ids),
        "--endpoint-url",
        sandbox.endpoint,
        "--ledger",
        str(tmp_path / "l.jsonl"),
    )
    assert code == 3
    assert "without confirmation" in data["error"]
    assert set(sandbox.states(ids).values()) == {"running"}


def test_missing_credentials_are_one_object(
    sandbox: Sandbox, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    code, data, _ = run(
        "terminate",
        "-o",
        "json",
        "--ids",
        ids_file(tmp_path, IDS),
        "--endpoint-url",
        sandbox.endpoint,
        "--ledger",
        str(tmp_path / "l.jsonl"),
        "--yes",
        "--expect-account",
        "123456789012",
    )
    assert code == 4
    assert data["exit_code"] == 4 and data["meaning"] == "credentials or permission"
    assert "credentials" in data["error"].lower()


def test_a_run_prints_its_report_once_with_its_meaning(sandbox: Sandbox, tmp_path: Path) -> None:
    ids = sandbox.launch(2)
    code, data, _ = run(
        "terminate",
        "-o",
        "json",
        "--ids",
        ids_file(tmp_path, ids),
        "--endpoint-url",
        sandbox.endpoint,
        "--ledger",
        str(tmp_path / "l.jsonl"),
        "--yes",
        "--progress",
        "none",
    )
    assert code == 0
    assert data["counts"]["succeeded"] == 2
    assert data["exit_code"] == 0 and data["meaning"] == "all done"


@pytest.mark.parametrize(
    "command",
    [["terminate", "--dry-run"], ["plan", "stop"], ["ec2", "delete-snapshot", "--dry-run"]],
)
def test_a_plan_of_an_empty_list_is_a_plan(tmp_path: Path, command: list[str]) -> None:
    code, data, err = run(*command, "--ids", ids_file(tmp_path, []), "-o", "json")
    assert code == 0 and "nothing to do" in err
    assert data["dry_run"] is True and data["rows"] == [] and data["would_act"] == 0
    assert data["exit_code"] == 0 and "nothing was sent" in data["meaning"]


def test_a_listing_that_fails_means_failed_not_intents() -> None:
    """swarm list has no intents and no ledger: its 1 is the error, said as such."""
    import socket

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    code, data, _ = run("list", "--endpoint-url", f"http://127.0.0.1:{port}", "-o", "json")
    assert code == 1 and data["exit_code"] == 1
    assert data["meaning"] == "failed: see error"
    assert "DescribeInstances failed: EndpointConnectionError" in data["error"]
