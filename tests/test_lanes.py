"""No run ends quietly wrong: a pair's thread that dies, or never starts, fails the run."""

from __future__ import annotations

import io
import threading
from pathlib import Path

import pytest
from rich.console import Console

from swarm_cli import run as run_module
from swarm_cli.actions import ACTIONS
from swarm_cli.ec2 import InstanceCall, classify_exception, make_client
from swarm_cli.engine import Event
from swarm_cli.errors import EXIT_FAILED
from swarm_cli.ledger import fold, read_records
from swarm_cli.report import Pair
from swarm_cli.run import Job, RunOptions
from swarm_cli.sandbox import Sandbox
from swarm_cli.stats import Stats
from swarm_cli.views import run_job

EAST, WEST = Pair(None, "us-east-1"), Pair(None, "eu-west-1")
SPEC = ACTIONS["terminate"]


def statuses(ledger: Path) -> dict[str, str]:
    return {r.id: r.status for r in fold(read_records(str(ledger))).values()}


def two_pairs(sandbox: Sandbox, ledger: Path) -> tuple[Job, list[str], list[str]]:
    east = sandbox.launch(4, region=EAST.region)
    west = sandbox.launch(4, region=WEST.region)
    options = RunOptions(progress="none", batch_size=2, ledger=str(ledger))
    return Job(SPEC, {EAST: east, WEST: west}, options), east, west


def action(sandbox: Sandbox):  # type: ignore[no-untyped-def]
    def make(pair: Pair) -> InstanceCall:
        return InstanceCall(make_client(pair.region, endpoint_url=sandbox.endpoint), SPEC)

    return make


def test_a_pair_whose_thread_cannot_start_fails_the_run_and_stays_pending(
    sandbox: Sandbox, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ledger = tmp_path / "ledger.jsonl"
    job, east, west = two_pairs(sandbox, ledger)
    start = threading.Thread.start

    def refuse_east(self: threading.Thread) -> None:
        if self.name == f"swarm-{EAST.label}":
            raise RuntimeError("can't start new thread")
        start(self)

    monkeypatch.setattr(threading.Thread, "start", refuse_east)
    console = Console(file=io.StringIO(), width=200)
    report = run_job(job, action(sandbox), console, classify=classify_exception)
    monkeypatch.undo()

    assert report.exit_code == EXIT_FAILED
    assert report.crashed is not None
    assert "RuntimeError: can't start new thread" in (report.crashed.message or "")
    assert "RuntimeError" in console.file.getvalue()  # type: ignore[attr-defined]
    by_pair = {p.pair: p for p in report.pairs}
    assert by_pair[EAST].counts["pending"] == 4
    assert by_pair[WEST].counts["succeeded"] == 4
    recorded = statuses(ledger)
    assert {recorded[i] for i in east} == {"pending"}
    assert {recorded[i] for i in west} == {"succeeded"}
    assert sandbox.accepted_ids() == set(west)
    assert report.to_dict()["crashed"]["code"] == "InternalError"


def test_a_pair_whose_thread_dies_mid_run_fails_the_run(
    sandbox: Sandbox, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ledger = tmp_path / "ledger.jsonl"
    job, east, _ = two_pairs(sandbox, ledger)

    class Breaks(Stats):
        """A subscriber that raises on its pair's own thread as the second call leaves."""

        sent = 0

        def __call__(self, event: Event) -> None:
            super().__call__(event)
            if event.type == "sent" and threading.current_thread().name == f"swarm-{EAST.label}":
                self.sent += 1
                if self.sent == 2:
                    raise ValueError("a subscriber broke")

    monkeypatch.setattr(run_module, "Stats", Breaks)
    console = Console(file=io.StringIO(), width=200)
    report = run_job(job, action(sandbox), console, classify=classify_exception)

    assert report.exit_code == EXIT_FAILED
    assert report.crashed is not None
    assert "ValueError: a subscriber broke" in (report.crashed.message or "")
    recorded = statuses(ledger)
    # Whatever the dying pair did not see through is still pending; nothing is lost.
    assert all(recorded[i] in ("pending", "succeeded") for i in east)
    assert any(recorded[i] == "pending" for i in east)
    left = {p.pair: p for p in report.pairs}[EAST].counts
    assert left["pending"] == sum(recorded[i] == "pending" for i in east)
