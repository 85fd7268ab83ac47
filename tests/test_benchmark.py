"""The performance benchmark's smoke run: it runs, and its JSON says what it should."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
ROW_FIELDS = {
    "contender",
    "wall_s",
    "x_bound",
    "calls",
    "throttled",
    "throttled_share",
    "lost",
    "cpu_s",
    "cpu_per_call_ms",
    "max_rss_mb",
    "error",
    "runs",
}


@pytest.mark.slow
def test_smoke_run_of_swarm_on_one_bucket(tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "compare.py"),
            "--smoke",
            "--scenario",
            "a",
            "--only",
            "swarm default",
            "--json",
            str(out),
            "--charts",
            str(tmp_path / "charts"),
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads(out.read_text())
    assert report["smoke"] is True
    scenario = report["scenarios"]["a"]
    assert scenario["bound_s"] >= 0
    assert scenario["config"]["requests"] == {"burst": 20, "rate": 50}
    (row,) = scenario["rows"]
    assert row.keys() >= ROW_FIELDS
    assert row["contender"] == "swarm default"
    assert row["error"] is None, row["error"]
    assert row["lost"] == 0
    assert row["calls"] >= scenario["instances_per_client"]  # batch 1: a call per ID at least
    assert 0 <= row["throttled_share"] <= 1
    assert row["cpu_s"] > 0 and row["max_rss_mb"] > 0
    (run,) = row["runs"]
    assert run["processes"][0]["exit_code"] == 0
    assert (tmp_path / "charts" / "a.svg").read_text().startswith("<svg")
