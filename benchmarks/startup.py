"""How quickly swarm starts: time from launch to the first EC2 call, and the cost of big lists.

Prints a table (median of ``--rounds`` runs, each against a fresh sandbox):

* first call: ``swarm terminate --ids FILE --endpoint-url <sandbox> --yes`` launched as
  a subprocess; the time from just before the launch to the arrival of its first
  TerminateInstances at the sandbox (``Sandbox.first_call_at``), with the live view
  (stdin, stdout and stderr on a pseudo-terminal) and with plain progress (no terminal);
* ``swarm --help`` and ``swarm terminate --help``, wall time;
* reading and checking a list of 100,000 IDs in-process, as the command line does
  before anything is sent (read, validate, group by account and region);
* the same first-call time and the peak RSS of a whole run over 100,000 IDs against an
  unthrottled sandbox.
"""

from __future__ import annotations

import argparse
import io
import os
import pty
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from swarm_cli.sandbox import BucketSpec, Sandbox, SandboxConfig, environment, fake_ids

OPEN = SandboxConfig(BucketSpec(1_000_000, 1_000_000), BucketSpec(10_000_000, 10_000_000))
SWARM = [sys.executable, "-m", "swarm_cli"]


@dataclass
class Run:
    first_call: float  # seconds from launch to the first TerminateInstances at the sandbox
    wall: float
    max_rss_mb: float
    code: int


def _drain(fd: int) -> None:
    """Read a pseudo-terminal's output until the child closes it (so it never blocks)."""
    while True:
        try:
            if not os.read(fd, 65536):
                return
        except OSError:
            return


def run_cli(box: Sandbox, ids: list[str], tty: bool) -> Run:
    with tempfile.TemporaryDirectory() as tmp:
        ids_file = Path(tmp, "ids.txt")
        ids_file.write_text("\n".join(ids) + "\n")
        env = {**os.environ, **environment(box)}
        env.pop("GITHUB_STEP_SUMMARY", None)
        args = [
            *SWARM,
            "terminate",
            "--ids",
            str(ids_file),
            "--endpoint-url",
            box.endpoint,
            "--yes",
            "--ledger",
            str(Path(tmp, "ledger.jsonl")),
        ]
        reader: threading.Thread | None = None
        if tty:
            master, slave = pty.openpty()
            launched = time.time()
            child = subprocess.Popen(args, env=env, stdin=slave, stdout=slave, stderr=slave)
            os.close(slave)
            reader = threading.Thread(target=_drain, args=(master,), daemon=True)
            reader.start()
        else:
            log = open(Path(tmp, "stderr.txt"), "w+b")  # noqa: SIM115
            launched = time.time()
            child = subprocess.Popen(
                args, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=log
            )
        _, status, usage = os.wait4(child.pid, 0)
        child.returncode = os.waitstatus_to_exitcode(status)
        wall = time.time() - launched
        if reader is not None:
            reader.join(timeout=5)
            os.close(master)
        else:
            log.seek(0)
            if child.returncode != 0:
                sys.stderr.write(log.read().decode(errors="replace")[-2000:])
            log.close()
    first = box.first_call_at
    return Run(
        first_call=float("nan") if first is None else first - launched,
        wall=wall,
        max_rss_mb=usage.ru_maxrss / 1024,
        code=child.returncode,
    )


def first_call(count: int, tty: bool, rounds: int) -> list[Run]:
    runs = []
    for _ in range(rounds):
        with Sandbox(OPEN) as box:
            ids = fake_ids(count)
            box.load_ids(ids)
            run = run_cli(box, ids, tty)
            if run.code != 0:
                raise SystemExit(f"swarm exited {run.code}")
            runs.append(run)
    return runs


def wall(args: list[str], rounds: int) -> list[float]:
    times = []
    for _ in range(rounds):
        started = time.perf_counter()
        subprocess.run([*SWARM, *args], check=True, stdout=subprocess.DEVNULL)
        times.append(time.perf_counter() - started)
    return times


def parse_and_validate(count: int, rounds: int) -> list[float]:
    """What the command line does with an ID list before anything is sent, in-process."""
    from rich.console import Console

    from swarm_cli.cli.act import load_targets, plan_groups

    err = Console(file=io.StringIO())
    times = []
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp, "ids.txt")
        path.write_text("\n".join(fake_ids(count)) + "\n")
        for _ in range(rounds):
            started = time.perf_counter()
            groups = plan_groups(load_targets(str(path), err), {}, "us-east-1", err)
            times.append(time.perf_counter() - started)
            assert sum(map(len, groups.values())) == count
    return times


def median(values: list[float]) -> float:
    return statistics.median(values)


def row(name: str, values: list[float], unit: str, fmt: Callable[[float], str]) -> None:
    spread = f"{fmt(min(values))}-{fmt(max(values))}"
    print(f"{name:<44} {fmt(median(values)):>9} {unit:<3} {spread:>15}   n={len(values)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--count", type=int, default=1000, help="IDs of the first-call runs")
    parser.add_argument("--big", type=int, default=100_000, help="IDs of the big-list rows")
    parser.add_argument("--no-big", action="store_true", help="skip the 100,000-ID run")
    args = parser.parse_args()
    seconds = lambda v: f"{v:.3f}"  # noqa: E731
    print(f"{'measure':<44} {'median':>9} {'':<3} {'min-max':>15}")
    for tty, how in ((True, "live view (tty)"), (False, "plain (no tty)")):
        runs = first_call(args.count, tty=tty, rounds=args.rounds)
        row(f"first call, {args.count} IDs, {how}", [r.first_call for r in runs], "s", seconds)
    row("swarm --help", wall(["--help"], args.rounds), "s", seconds)
    row("swarm terminate --help", wall(["terminate", "--help"], args.rounds), "s", seconds)
    row(f"parse+validate {args.big} IDs", parse_and_validate(args.big, args.rounds), "s", seconds)
    if not args.no_big:
        big = first_call(args.big, tty=False, rounds=1)
        row(f"first call, {args.big} IDs, plain", [r.first_call for r in big], "s", seconds)
        row(f"whole run, {args.big} IDs, plain", [r.wall for r in big], "s", seconds)
        row(f"peak RSS, {args.big} IDs", [r.max_rss_mb for r in big], "MB", lambda v: f"{v:.0f}")


if __name__ == "__main__":
    main()
