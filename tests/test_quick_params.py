"""Option values checked without pydantic come out exactly as Typer's own adapters make them."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from typing import Any

import pytest
import typer.main

from swarm_cli.cli import app, quick_params

TYPICAL = [
    "--ids",
    "ids.txt",
    "--endpoint-url",
    "http://127.0.0.1:5000",
    "--batch-size",
    "10",
    "--yes",
    "--ledger",
    "run.jsonl",
    "--progress",
    "none",
    "--output",
    "json",
    "--max-window",
    "32",
    "--drain-timeout",
    "2.5",
]
WRONG = [
    ["--progress", "bogus"],
    ["--progress", "NONE"],
    ["--max-window", "0"],
    ["--max-window", "-3"],
    ["--max-window", "\uff11\uff12"],  # digits, but not ASCII ones
    ["--max-window", "twelve"],
    ["--drain-timeout", "soon"],
    ["--drain-timeout", "-1"],
    ["--drain-timeout", "1.5.2"],
]


def parsed(args: list[str], command: str = "terminate") -> dict[str, Any] | str:
    """The values of ``swarm COMMAND ARGS``, or the usage error's message."""
    group: Any = typer.main.get_command(app)
    try:
        ctx = group.commands[command].make_context(command, list(args))
    except Exception as err:
        return f"{type(err).__name__}: {err.format_message()}"  # type: ignore[attr-defined]
    return {key: repr(value) for key, value in ctx.params.items()}


def typers_own(monkeypatch: pytest.MonkeyPatch, args: list[str], command: str) -> Any:
    with monkeypatch.context() as patched:
        patched.setattr(quick_params, "install", lambda params: None)
        return parsed(args, command)


@pytest.mark.parametrize(
    "args",
    [
        TYPICAL,
        ["--ids", "-"],
        ["--ids", "ids.txt", "--region", "eu-west-1", "--max-count", "7"],
        [
            "--ids",
            "ids.txt",
            "--drain-timeout",
            "3",
            "--call-timeout",
            "1e1",
            "--max-window",
            "007",
        ],
    ],
)
@pytest.mark.parametrize("command", ["terminate", "stop"])
def test_values_are_typers_own(
    monkeypatch: pytest.MonkeyPatch, args: list[str], command: str
) -> None:
    quick = parsed(args, command)
    assert isinstance(quick, dict), quick
    assert quick == typers_own(monkeypatch, args, command)


@pytest.mark.parametrize("wrong", WRONG)
def test_a_wrong_value_gets_typers_own_message(
    monkeypatch: pytest.MonkeyPatch, wrong: list[str]
) -> None:
    quick = parsed(["--ids", "ids.txt", *wrong])
    assert isinstance(quick, str) and "BadParameter" in quick, quick
    # A choice's is said plainly, without the "Value error, " of pydantic's wording.
    assert "Value error" not in quick
    own = typers_own(monkeypatch, ["--ids", "ids.txt", *wrong], "terminate")
    assert quick == own.replace("Value error, ", "")


def test_a_run_command_line_never_imports_pydantic() -> None:
    code = (
        "import json, sys\n"
        "import typer.main\n"
        "from swarm_cli.cli import app\n"
        "group = typer.main.get_command(app)\n"
        f"group.make_context('swarm', ['terminate', *{TYPICAL!r}])\n"
        "ctx = group.commands['terminate'].make_context('terminate', list(sys.argv[1:]))\n"
        "print(json.dumps([ctx.params['max_window'], 'pydantic' in sys.modules]))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, *TYPICAL],
        check=True,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert json.loads(done.stdout) == [32, False]


def test_the_installed_typer_has_the_shape_it_stands_in_for() -> None:
    from typer._coercion import RuntimeParam

    assert quick_params.fits(RuntimeParam)


def test_a_typer_of_another_shape_keeps_its_own_coercion() -> None:
    @dataclasses.dataclass(frozen=True)
    class Moved:
        parameter_info: Any
        annotation: Any

        def _coerce_value(self, value: Any, ctx: Any) -> Any:
            return value

    @dataclasses.dataclass(frozen=True)
    class Grown:
        parameter_info: Any
        annotation: Any
        default: Any

        def _coerce_value(self, value: Any, param: Any, ctx: Any) -> Any:
            return value

    assert not quick_params.fits(Moved)
    assert not quick_params.fits(Grown)
    assert not quick_params.fits(object)
