"""Resuming reversible actions: the latest run decides, and resume asks EC2 first.

The scenario of issue 16: stop 20 instances, start them, stop them again and
``kill -9`` the last stop midway, all into one ledger. The ledger must list the
instances still running, and ``--resume`` must act on exactly those.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_cli import swarm, write_ids
from test_faults import lines, wait_until

from swarm_cli.sandbox import BucketSpec, Sandbox, SandboxConfig

# One StopInstances call every 0.2 s: a run of 20 single-ID calls lasts seconds.
SLOW = SandboxConfig(BucketSpec(1, 5), BucketSpec(100_000, 100_000), latency=0.02)


def act(box: Sandbox, action: str, ids_file: str, ledger: Path, *extra: str) -> tuple[int, str]:
    code, _, err = swarm(
        action,
        "--ids",
        ids_file,
        "--endpoint-url",
        box.endpoint,
        "--ledger",
        str(ledger),
        "--yes",
        "--progress",
        "none",
        *extra,
    )
    return code, err


def stop_killed_midway(box: Sandbox, ids_file: str, ledger: Path, done: int) -> None:
    """A ``swarm stop`` killed with -9 once ``done`` outcomes are in the ledger."""
    before = lines(ledger)
    proc = subprocess.Popen(
        [
            *(sys.executable, "-m", "swarm_cli", "stop", "--ids", ids_file, "--yes"),
            *("--ledger", str(ledger), "--endpoint-url", box.endpoint, "--progress", "none"),
            *("--batch-size", "1", "--max-window", "1"),
        ],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    # The write-ahead (20 lines), then one line per outcome.
    wait_until(lambda: lines(ledger) >= before + 20 + done, proc)
    proc.kill()
    proc.communicate(timeout=10)


Scenario = tuple[Sandbox, list[str], Path, str]


@pytest.fixture
def stopped_started_stopped_midway(tmp_path: Path) -> Iterator[Scenario]:
    with Sandbox(SLOW) as box:
        ids = box.launch(20)
        ids_file = write_ids(tmp_path / "ids.txt", ids)
        ledger = tmp_path / "l.jsonl"
        assert act(box, "stop", ids_file, ledger)[0] == 0
        assert act(box, "start", ids_file, ledger)[0] == 0
        stop_killed_midway(box, ids_file, ledger, done=8)
        yield box, ids, ledger, ids_file


def running(box: Sandbox, ids: list[str]) -> set[str]:
    return {i for i, s in box.states(ids).items() if s == "running"}


def stops_sent(box: Sandbox) -> int:
    return box.counters.accepted_by_action.get("StopInstances", 0)


@pytest.mark.slow
def test_after_stop_start_and_a_stop_killed_midway_the_running_ones_are_listed_and_resumed(
    stopped_started_stopped_midway: Scenario,
) -> None:
    box, ids, ledger, ids_file = stopped_started_stopped_midway
    left = running(box, ids)
    assert 0 < len(left) < 20
    code, out, err = swarm("ledger", "failed", "--action", "stop", str(ledger))
    assert left <= set(out.split()), err  # the last run decides, not the first one's success
    code, err = act(box, "stop", ids_file, ledger, "--resume")
    assert code == 0, err
    assert "; 0 to go" not in err
    assert running(box, ids) == set()
    code, out, err = swarm("ledger", "failed", "--action", "stop", str(ledger))
    assert (code, out) == (0, ""), err
