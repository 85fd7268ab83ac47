from __future__ import annotations

import io
from pathlib import Path

import pytest
from rich.console import Console
from test_cli import swarm

from swarm_cli.actions import ACTIONS
from swarm_cli.display import render_summary
from swarm_cli.rehearse import LoadReporter, rehearse
from swarm_cli.report import Pair
from swarm_cli.run import Job, RunOptions
from swarm_cli.sandbox import fake_ids


def plain_console() -> Console:
    return Console(
        file=io.StringIO(), width=200, soft_wrap=True, highlight=False, color_system=None
    )


def printed(console: Console) -> list[str]:
    file = console.file
    assert isinstance(file, io.StringIO)
    return file.getvalue().splitlines()


def test_a_rehearsal_loads_every_pair_runs_and_writes_no_ledger(tmp_path: Path) -> None:
    east, west = fake_ids(30), fake_ids(25)
    ledger = tmp_path / "ledger.jsonl"
    job = Job(
        ACTIONS["terminate"],
        {Pair(None, "us-east-1"): east, Pair(None, "eu-west-1"): west},
        RunOptions(progress="none", ledger=str(ledger)),
        "terminate",
    )
    console = plain_console()
    report = rehearse(job, console)
    lines = printed(console)
    assert lines[0] == "rehearsal: no ledger is written"
    assert "loaded 55 IDs as running instances" in "\n".join(lines)
    assert report.ledger is None and not ledger.exists()
    assert report.counts["succeeded"] == 55
    assert report.extra["sandbox"]["terminated"] == 55
    assert lines[-1].startswith("rehearsal: at EC2's default limits the real run would take")
    summary = plain_console()
    render_summary(report, summary)
    assert not any("ledger" in line for line in printed(summary))


def test_load_reporter_prints_at_most_every_interval_over_all_pairs() -> None:
    now = [0.0]
    console = plain_console()
    reporter = LoadReporter(console, 3_000, every=2.0, clock=lambda: now[0])
    first = reporter.pair()
    for done, at in ((0, 0.1), (1_000, 1.0), (2_000, 2.5)):
        now[0] = at
        first(done, 2_000)
    second = reporter.pair()
    for done, at in ((0, 2.6), (1_000, 3.0)):
        now[0] = at
        second(done, 1_000)
    now[0] = 3.2
    reporter.finish()
    assert printed(console) == [
        "loading 3,000 IDs into the fake EC2: 2,000 done",
        "loaded 3,000 IDs as running instances in 3.2s; the rehearsal starts",
    ]


def test_a_rehearsal_needs_no_region(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Nothing leaves the machine: without --region or AWS_REGION it still runs."""
    for name in ("AWS_REGION", "AWS_DEFAULT_REGION", "AWS_PROFILE", "AWS_CONFIG_FILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))
    ids = tmp_path / "ids.txt"
    ids.write_text("".join(f"{i}\n" for i in fake_ids(3)))
    code, _out, err = swarm("terminate", "--ids", str(ids), "--sandbox", "--progress", "none")
    assert code == 0, err
    assert "no AWS region" not in err


def test_a_rehearsal_in_a_region_no_one_knows_is_a_usage_error(tmp_path: Path) -> None:
    """A typo'd region has no fake EC2 to load: exit 2 with the region named, no traceback."""
    ids = tmp_path / "ids.txt"
    ids.write_text("".join(f"{i}\n" for i in fake_ids(2)))
    code, _out, err = swarm(
        "terminate", "--ids", str(ids), "--sandbox", "--region", "us-eats-1", "--progress", "none"
    )
    assert code == 2, err
    assert "us-eats-1" in err and "nothing was sent" in err


def test_a_rehearsal_names_and_bounds_the_actions_own_buckets(tmp_path: Path) -> None:
    """A reboot spends no instance token: neither terminate's buckets nor its bound."""
    ids = tmp_path / "ids.txt"
    ids.write_text("".join(f"{i}\n" for i in fake_ids(1100)))
    code, out, err = swarm("reboot", "--ids", str(ids), "--sandbox", "--progress", "none")
    text = " ".join((out + err).split())
    assert code == 0, err
    assert "RebootInstances: 50 calls burst, 5/s," in text and "instances burst" not in text
    assert "TerminateInstances" not in text
    assert "It fits in the limits' bursts" in text and "(within the limits' bursts)" in text
