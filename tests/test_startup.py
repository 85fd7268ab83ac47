"""The command line imports only what an action run needs: the rest waits for its command."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest

# Modules no terminate, stop, start or reboot needs before its first call: the fake EC2
# and its server, the live view's machinery (a terminal may not be there), the report
# writers, the dry run, selections, --wait and the failure budget; pydantic, which Typer
# uses to check option values (test_quick_params: a run's own options never need it).
DEFERRED = (
    "moto",
    "flask",
    "werkzeug",
    "swarm_cli.sandbox",
    "swarm_cli.rehearse",
    "swarm_cli.html_report",
    "swarm_cli.summary_md",
    "swarm_cli.plan",
    "swarm_cli.describe",
    "swarm_cli.select",
    "swarm_cli.wait",
    "swarm_cli.saga",
    "rich.live",
    "rich.table",
    "yaml",
    "pydantic",
    "typer._adapters",
)


def last_json(code: str) -> Any:
    """What a fresh interpreter running ``code`` printed last, read as JSON."""
    done = subprocess.run(
        [sys.executable, "-c", code], check=True, capture_output=True, text=True, timeout=60
    )
    return json.loads(done.stdout.splitlines()[-1])


def imported_after(statement: str) -> set[str]:
    return set(last_json(f"import json, sys\n{statement}\nprint(json.dumps(sorted(sys.modules)))"))


def test_the_command_line_defers_what_an_action_run_does_not_need() -> None:
    loaded = imported_after("import swarm_cli.cli, swarm_cli.run")
    assert "swarm_cli.cli.act" in loaded  # the commands are all registered
    assert loaded.isdisjoint(DEFERRED), sorted(loaded & set(DEFERRED))


def test_the_sandbox_commands_still_find_the_fake_ec2() -> None:
    loaded = imported_after(
        "from swarm_cli.cli.sandbox import _sandbox_config\n"
        "from swarm_cli.cli.options import Preset\n"
        "_sandbox_config(Preset.quick, rate=None, burst=None, resource_rate=None,"
        " resource_burst=None, latency=None, error_rate=0.0, seed=0)"
    )
    assert "swarm_cli.sandbox" in loaded


def test_the_collector_pauses_for_the_imports_of_the_command_line_only() -> None:
    code = (
        "import gc, json, sys\n"
        "before = [s['collections'] for s in gc.get_stats()]\n"
        "import swarm_cli.cli\n"
        "after = [s['collections'] for s in gc.get_stats()]\n"
        "print(json.dumps([gc.isenabled(), before, after]))"
    )
    enabled, before, after = last_json(code)
    assert enabled  # as it was before the import
    # Next to no pass over the objects the imports made (typer, rich, swarm's modules):
    # without the pause there are some forty, a few of them over the older ones too.
    assert after[0] - before[0] <= 5 and after[1:] == before[1:], (before, after)


def test_help_and_usage_errors_never_import_boto3() -> None:
    """``swarm --help``, a command's help and a wrong option answer at once: boto3 and
    botocore (a third of a second) wait until a command acts."""
    code = (
        "import json, sys\n"
        "from swarm_cli.cli import main\n"
        "for argv in (['--help'], ['terminate', '--help'], ['terminate', '--no-such']):\n"
        "    sys.argv = ['swarm', *argv]\n"
        "    try:\n"
        "        main()\n"
        "    except SystemExit:\n"
        "        pass\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.startswith('boto'))))"
    )
    assert last_json(code) == []


def test_a_command_line_builds_only_the_command_it_names(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Typer builds every command's options before parsing: a run builds its own only.
    Anything that needs the others (help, an unknown name, completion) gets them all."""
    from typer.main import get_command

    from swarm_cli.cli import app, command_app

    monkeypatch.delenv("_SWARM_COMPLETE", raising=False)
    built = get_command(command_app(["terminate", "--ids", "ids.txt"]))
    assert list(built.commands) == ["terminate"]  # type: ignore[attr-defined]
    ec2 = get_command(command_app(["ec2", "delete-snapshot", "--ids", "-"])).commands["ec2"]  # type: ignore[attr-defined]
    assert list(ec2.commands) == ["delete-snapshot"]
    plan = get_command(command_app(["plan", "--help"])).commands["plan"]  # type: ignore[attr-defined]
    assert "terminate" in plan.commands and "stop" in plan.commands  # the group's help lists all
    assert list(get_command(command_app(["sandbox"])).commands) == ["sandbox"]  # type: ignore[attr-defined]
    for argv in ([], ["--help"], ["--version"], ["nosuch"], ["-v", "terminate"]):
        assert command_app(argv) is app, argv
    monkeypatch.setenv("_SWARM_COMPLETE", "complete_bash")
    assert command_app(["terminate"]) is app
    monkeypatch.delenv("_SWARM_COMPLETE")
    # Each of the whole app's commands is found by its name alone.
    names = set(get_command(app).commands)  # type: ignore[attr-defined]
    assert {"terminate", "plan", "ec2", "ledger", "sandbox", "version"} <= names
    for name in names:
        assert list(get_command(command_app([name])).commands) == [name]  # type: ignore[attr-defined]


def test_an_unknown_command_still_lists_the_way_to_help() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "swarm_cli", "termnate", "--ids", "x"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2 and "No such command 'termnate'" in done.stderr


def as_cli_is_imported(statement: str) -> str:
    """Code that runs ``statement`` as swarm's command line package is imported: where a
    signal that comes a few tenths of a second after launch lands."""
    return (
        "import builtins\n"
        "real = builtins.__import__\n"
        "def meet(name, globals=None, locals=None, fromlist=(), level=0):\n"
        "    if name == 'cli' and level == 1:\n"
        f"        {statement}\n"
        "    return real(name, globals, locals, fromlist, level)\n"
        "builtins.__import__ = meet\n"
    )


@pytest.mark.parametrize("where", ["import", "build"])
@pytest.mark.parametrize("json_output", [False, True], ids=["text", "json"])
def test_ctrl_c_while_the_command_line_starts_is_130_not_a_traceback(
    json_output: bool, where: str
) -> None:
    """A runner's SIGINT in a step's first tenths of a second lands while typer and swarm's
    modules are imported, or while typer builds the command; each is made to meet it here."""
    argv = ["swarm", "terminate", "--ids", "x.txt", *(("-o", "json") if json_output else ())]
    meet = (
        as_cli_is_imported("raise KeyboardInterrupt")
        if where == "import"
        else "import typer.main\n"
        "def meet(*args, **kwargs):\n"
        "    raise KeyboardInterrupt\n"
        "typer.main.get_command = meet\n"
    )
    code = f"import sys\n{meet}from swarm_cli.entry import main\nsys.argv = {argv!r}\nmain()\n"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 130, done.stderr
    assert done.stderr == "error: interrupted by SIGINT while starting: nothing was read or sent\n"
    if json_output:
        assert json.loads(done.stdout)["exit_code"] == 130
    else:
        assert done.stdout == ""


@pytest.mark.parametrize("json_output", [False, True], ids=["text", "json"])
def test_sigterm_while_the_command_line_is_imported_is_143_with_a_word(json_output: bool) -> None:
    """A pod deleted as it starts: the SIGTERM comes while swarm's modules are imported
    (a few tenths of a second), before any command has a handler for it. A real signal,
    sent to the process itself as the command line's package is imported."""
    argv = ["swarm", "terminate", "--ids", "x.txt", *(("-o", "json") if json_output else ())]
    meet = as_cli_is_imported("import os, signal; os.kill(os.getpid(), signal.SIGTERM)")
    code = f"import sys\n{meet}from swarm_cli.entry import main\nsys.argv = {argv!r}\nmain()\n"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 143, done.stderr
    assert done.stderr == "error: interrupted by SIGTERM while starting: nothing was read or sent\n"
    if json_output:
        found = json.loads(done.stdout)
        assert found["exit_code"] == 143 and found["meaning"] == "stopped by SIGTERM"
    else:
        assert done.stdout == ""
    # Once imported, SIGTERM is as it was until a command sets its own handling: one
    # that came in the middle of a plan would not say "nothing was read".
    after = (
        "import signal, swarm_cli.cli\n"
        "swarm_cli.cli.main = lambda: print(signal.getsignal(signal.SIGTERM) is signal.SIG_DFL)\n"
        "from swarm_cli.entry import main\n"
        "main()\n"
    )
    done = subprocess.run([sys.executable, "-c", after], capture_output=True, text=True, timeout=60)
    assert done.stdout == "True\n", done.stderr
