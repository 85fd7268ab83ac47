"""Ctrl-C before anything is sent: exit 130, "nothing was sent", no empty ledger left."""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from swarm_cli.cli import app, guards
from swarm_cli.sandbox import Sandbox


def test_ctrl_c_at_the_confirmation_sends_nothing_and_leaves_no_ledger(
    sandbox: Sandbox, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ids = sandbox.launch(3)
    ledger = tmp_path / "l.jsonl"

    def ctrl_c(prompt: str, **kwargs: object) -> bool:
        # The ledger is held while the person is asked (no other run may take it), still
        # empty: nothing is written before the answer.
        assert ledger.exists() and ledger.stat().st_size == 0
        raise KeyboardInterrupt

    monkeypatch.setattr(guards, "ask", ctrl_c)
    result = CliRunner().invoke(
        app,
        [
            "terminate",
            "--ids",
            "-",
            "--endpoint-url",
            sandbox.endpoint,
            "--ledger",
            str(ledger),
            "-o",
            "json",
        ],
        input="".join(f"{i}\n" for i in ids),
    )
    assert result.exit_code == 130
    assert "nothing was sent" in result.stderr
    assert json.loads(result.stdout)["exit_code"] == 130
    assert not ledger.exists()
    assert set(sandbox.states(ids).values()) == {"running"}


@pytest.mark.parametrize(("signum", "code"), [(signal.SIGTERM, 143), (signal.SIGHUP, 129)])
def test_sigterm_or_sighup_at_the_confirmation_ends_as_ctrl_c_does(
    sandbox: Sandbox,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    signum: signal.Signals,
    code: int,
) -> None:
    ids = sandbox.launch(2)
    ledger = tmp_path / "l.jsonl"

    def signalled(prompt: str, **kwargs: object) -> bool:
        os.kill(os.getpid(), signum)  # a runner cancelling the job while it asks
        time.sleep(5)  # the handler runs at once: never reached
        return True

    monkeypatch.setattr(guards, "ask", signalled)
    before = signal.getsignal(signum)
    result = CliRunner().invoke(
        app,
        [
            *("terminate", "--ids", "-", "--endpoint-url", sandbox.endpoint),
            *("--ledger", str(ledger), "-o", "json"),
        ],
        input="".join(f"{i}\n" for i in ids),
    )
    assert result.exit_code == code, result.output
    assert f"interrupted by {signum.name}: nothing was sent" in result.stderr
    assert json.loads(result.stdout)["exit_code"] == code
    assert not ledger.exists()
    assert set(sandbox.states(ids).values()) == {"running"}
    # The handlers are the process's own again afterwards.
    assert signal.getsignal(signum) == before


def test_an_existing_ledger_is_kept_after_ctrl_c(
    sandbox: Sandbox, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ids = sandbox.launch(1)
    ledger = tmp_path / "l.jsonl"
    ledger.write_text("")  # someone's, from before: not this command's to remove

    def ctrl_c(prompt: str, **kwargs: object) -> bool:
        raise KeyboardInterrupt

    monkeypatch.setattr(guards, "ask", ctrl_c)
    result = CliRunner().invoke(
        app,
        ["terminate", "--ids", "-", "--endpoint-url", sandbox.endpoint, "--ledger", str(ledger)],
        input=f"{ids[0]}\n",
    )
    assert result.exit_code == 130
    assert ledger.exists()


def sigint_once_held(sandbox: Sandbox, signum: int = signal.SIGINT) -> threading.Thread:
    """SIGINT (or ``signum``) to this process as soon as the sandbox holds a call
    unanswered."""

    def send() -> None:
        deadline = time.monotonic() + 30
        while sandbox.counters.hung < 1 and time.monotonic() < deadline:
            time.sleep(0.02)
        os.kill(os.getpid(), signum)

    thread = threading.Thread(target=send, daemon=True)
    thread.start()
    return thread


@pytest.mark.parametrize(
    "command",
    [
        ["plan", "terminate"],
        ["terminate", "--protect-tag", "keep", "--yes"],
    ],
    ids=["plan", "protect-tag"],
)
def test_ctrl_c_during_the_reads_before_sending_is_130(
    sandbox: Sandbox, tmp_path: Path, command: list[str]
) -> None:
    ids = sandbox.launch(3)
    path = tmp_path / "ids.txt"
    path.write_text("".join(f"{i}\n" for i in ids))
    ledger = tmp_path / "l.jsonl"
    sandbox.hang(every_call=True)
    sender = sigint_once_held(sandbox)
    try:
        result = CliRunner().invoke(
            app,
            [
                *command,
                "--ids",
                str(path),
                "--endpoint-url",
                sandbox.endpoint,
                "--ledger",
                str(ledger),
                "--drain-timeout",
                "0.2",
                "--progress",
                "none",
            ],
        )
    finally:
        sender.join()
        sandbox.hang(False)
    assert result.exit_code == 130, result.output
    assert "nothing was sent" in result.stderr
    assert not ledger.exists()
    assert sandbox.accepted_ids() == set()
    assert set(sandbox.states(ids).values()) == {"running"}


def test_sigterm_during_a_rollbacks_look_up_sends_nothing(sandbox: Sandbox, tmp_path: Path) -> None:
    from swarm_cli.ledger import LedgerWriter

    ids = sandbox.launch(2)
    ledger = tmp_path / "l.jsonl"
    writer = LedgerWriter(str(ledger), "r1", "stop", "us-east-1")
    writer.write_ahead(ids)  # pending: the rollback looks them up first
    writer.close()
    before = ledger.read_bytes()
    sandbox.hang(every_call=True)
    sender = sigint_once_held(sandbox, signal.SIGTERM)
    try:
        result = CliRunner().invoke(
            app,
            [
                *("rollback", str(ledger), "--endpoint-url", sandbox.endpoint, "--yes"),
                *("--progress", "none", "-o", "json"),
            ],
        )
    finally:
        sender.join()
        sandbox.hang(False)
    assert result.exit_code == 143, result.output
    assert "interrupted by SIGTERM: nothing was sent" in result.stderr
    assert json.loads(result.stdout)["exit_code"] == 143
    assert ledger.read_bytes() == before
    assert sandbox.accepted_ids() == set()


def test_sigterm_before_a_runs_undo_began_is_143_and_points_at_the_undo(tmp_path: Path) -> None:
    """The run's budget is spent, and its --rollback is reading what to wait for when a
    SIGTERM comes: nothing is undone. It exited 1 and told to finish the stop."""
    from swarm_cli.sandbox import BucketSpec, SandboxConfig

    config = SandboxConfig(
        BucketSpec(10_000, 10_000), BucketSpec(100_000, 100_000), transition_seconds=60
    )
    with Sandbox(config) as box:
        ids = box.launch(6, stop_protected=1)
        listed = tmp_path / "ids.txt"
        listed.write_text("\n".join([*ids[1:], ids[0]]) + "\n")  # the protected one last
        ledger = tmp_path / "l.jsonl"

        def hang_then_signal() -> None:
            deadline = time.monotonic() + 30
            while box.calls_by("StopInstances") < 6 and time.monotonic() < deadline:
                time.sleep(0.01)
            box.hang(every_call=True)  # the undo's first look-up is held ...
            while box.counters.hung < 1 and time.monotonic() < deadline:
                time.sleep(0.01)
            os.kill(os.getpid(), signal.SIGTERM)  # ... and the signal comes meanwhile

        sender = threading.Thread(target=hang_then_signal, daemon=True)
        sender.start()
        try:
            result = CliRunner().invoke(
                app,
                [
                    *("stop", "--ids", str(listed), "--endpoint-url", box.endpoint, "--yes"),
                    *("--ledger", str(ledger), "--max-errors", "0", "--rollback"),
                    *("--max-window", "1", "--batch-size", "1", "--progress", "none"),
                    *("-o", "json"),
                ],
            )
        finally:
            sender.join()
            box.hang(False)
        assert box.calls_by("StartInstances") == 0
    assert result.exit_code == 143, result.output
    report = json.loads(result.stdout)
    assert report["exit_code"] == 143 and "rollback" not in report
    undo = f"swarm rollback {ledger} --run {report['run']}"
    assert report["rollback_stopped"] == {"signal": "SIGTERM", "undo": undo}
    assert f"rollback: stopped by SIGTERM before anything was undone: {undo}" in result.stderr
    assert "retry the rest" not in result.stderr


def test_sigterm_while_refusals_are_looked_up_stops_the_command_as_143(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """After a start refused while instances were stopping, the run looks them up; a
    SIGTERM then (the look-up raises ReadInterrupted) was swallowed, and the command went
    on to its --wait."""
    from rich.console import Console

    from swarm_cli.actions import ACTIONS
    from swarm_cli.cli import follow_up as after
    from swarm_cli.cli.options import Flags, Output
    from swarm_cli.describe import ReadInterrupted
    from swarm_cli.report import Pair, Report
    from swarm_cli.run import Job, RunOptions

    def interrupted(*args: object) -> None:
        raise ReadInterrupted("SIGTERM")

    def no_wait(*args: object, **kwargs: object) -> None:
        raise AssertionError("the command went on to its --wait")

    monkeypatch.setattr(after, "on_their_way", interrupted)
    monkeypatch.setattr("swarm_cli.wait.wait_for", no_wait)
    flags = Flags(
        ids=None, region="us-east-1", profile=None, endpoint_url=None, ledger=None,
        resume=False, yes=True, dry_run=False, sandbox=False, params={},
        options=RunOptions(), output=Output.text, wait=True,
    )  # fmt: skip
    spec = ACTIONS["start"]
    pair = Pair(None, "us-east-1")
    report = Report("r1", "start", done={pair: ["i-0123456789abcdef0"]})
    after.follow_up(spec, flags, Job(spec, {pair: []}, RunOptions()), report, None, Console())  # type: ignore[arg-type]
    assert report.signal == "SIGTERM" and report.exit_code == 143
    assert "wait" not in report.extra


def test_a_rolled_back_wait_run_reads_done_only_what_a_whole_undo_left(tmp_path: Path) -> None:
    """stop --wait --rollback: the wait does not come. When the undo ran to its end, what
    it left (nothing to undo, or refused) is recorded again without the wait, done as it
    was; when a signal stopped the undo, nothing is, and those stay not known done."""
    from rich.console import Console

    from swarm_cli.actions import ACTIONS
    from swarm_cli.cli import follow_up as after
    from swarm_cli.cli.options import Flags, Output
    from swarm_cli.ledger import LedgerWriter, fold, read_records, undone
    from swarm_cli.report import Pair, Report
    from swarm_cli.run import Job, RunOptions

    spec, pair = ACTIONS["stop"], Pair(None, "us-east-1")
    i = "i-0123456789abcdef0"
    for signal_name, left in ((None, "succeeded"), ("SIGTERM", "pending")):
        ledger = tmp_path / f"{signal_name}.jsonl"
        run = LedgerWriter(str(ledger), "r1", "stop", "us-east-1", waits="stopped")
        run.write_ahead([i])
        run.write(i, "succeeded", code="WasAlready")
        run.close()
        flags = Flags(
            ids=None, region="us-east-1", profile=None, endpoint_url=None,
            ledger=str(ledger), resume=False, yes=True, dry_run=False, sandbox=False,
            params={}, options=RunOptions(), output=Output.text, wait=True,
        )  # fmt: skip
        report = Report("r1", "stop", done={pair: [i]}, signal=signal_name)
        report.ledger_started, report.ledger_seq = run.started, run.last_seq
        job = Job(spec, {pair: [i]}, RunOptions(ledger=str(ledger)))
        after._rolled_back(spec, flags, job, report, Console())
        state = undone(fold(read_records(str(ledger))))[("stop", i)]
        assert state.status == left, state
