"""How quickly swarm starts: time from launch to the first EC2 call, and the cost of big lists.

Prints a table (median of ``--rounds`` runs, each against a fresh sandbox):

* first call: ``swarm terminate --ids FILE --endpoint-url <sandbox> --yes`` launched as
  a subprocess; the time from just before the launch to the arrival of its first
  TerminateInstances at the sandbox (``Sandbox.first_call_at``), with the live view
  (stdin, stdout and stderr on a pseudo-terminal) and with plain progress (no terminal);
* the same for a bare boto3 script (import boto3, make the EC2 client, call): what any
  Python tool pays before its first call on this machine; and swarm's plain first call
  less the bare script's, the two launched one after the other in each round;
* ``swarm --help`` and ``swarm terminate --help``, wall time;
* reading and checking a list of 100,000 IDs in-process, as the command line does
  before anything is sent (read, validate, group by account and region);
* the same first-call time and the peak RSS of a whole run over 100,000 IDs against an
  unthrottled sandbox.

swarm's modules are compiled to bytecode first and the children may use it (as an
installed swarm does), whatever PYTHONDONTWRITEBYTECODE says: compiling every module
at each launch would be measured otherwise.
"""

from __future__ import annotations

import argparse
import json
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
# The children's environment: bytecode allowed, no GitHub step summary.
CHILD_ENV = {
    k: v
    for k, v in os.environ.items()
    if k not in ("PYTHONDONTWRITEBYTECODE", "GITHUB_STEP_SUMMARY")
}


@dataclass
class Run:
    first_call: float  # seconds from launch to the first TerminateInstances at the sandbox
    wall: float
    peak_rss_mb: float  # the child's VmHWM, polled while it runs
    code: int


def _watch_peak(pid: int, peak: list[int]) -> None:
    """Poll the child's VmHWM (kB) until it exits.

    Not ``ru_maxrss``: a child forked from this process, which holds the sandbox and
    its instances, inherits this process's high-water mark until it execs, and Linux
    keeps the larger of the two.
    """
    while True:
        try:
            with open(f"/proc/{pid}/status") as status:
                for line in status:
                    if line.startswith("VmHWM:"):
                        peak[0] = max(peak[0], int(line.split()[1]))
        except OSError:
            return
        time.sleep(0.02)


def _drain(fd: int) -> None:
    """Read a pseudo-terminal's output until the child closes it (so it never blocks)."""
    while True:
        try:
            if not os.read(fd, 65536):
                return
        except OSError:
            return


def tree_env(tree: Path | None) -> dict[str, str]:
    """The children's environment; with ``tree``, its swarm_cli is the one imported.

    Children also run in ``tree``: ``-m`` and ``-c`` put the working folder first on the path.
    """
    if tree is None:
        return dict(CHILD_ENV)
    return {**CHILD_ENV, "PYTHONPATH": str(tree)}


def run_cli(box: Sandbox, ids: list[str], tty: bool, tree: Path | None = None) -> Run:
    with tempfile.TemporaryDirectory() as tmp:
        ids_file = Path(tmp, "ids.txt")
        ids_file.write_text("\n".join(ids) + "\n")
        env = {**tree_env(tree), **environment(box)}
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
            child = subprocess.Popen(
                args, env=env, cwd=tree, stdin=slave, stdout=slave, stderr=slave
            )
            os.close(slave)
            reader = threading.Thread(target=_drain, args=(master,), daemon=True)
            reader.start()
        else:
            log = open(Path(tmp, "stderr.txt"), "w+b")  # noqa: SIM115
            launched = time.time()
            child = subprocess.Popen(
                args,
                env=env,
                cwd=tree,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=log,
            )
        peak = [0]
        watcher = threading.Thread(target=_watch_peak, args=(child.pid, peak), daemon=True)
        watcher.start()
        child.wait()
        watcher.join(timeout=5)
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
        peak_rss_mb=peak[0] / 1024,
        code=child.returncode,
    )


# The least any Python tool pays before its first call: import boto3, make the client, call.
BARE = """
import sys
import boto3
boto3.client("ec2", endpoint_url=sys.argv[1]).terminate_instances(InstanceIds=[sys.argv[2]])
"""


def bare_first_call() -> float:
    """Launch to first TerminateInstances of a bare boto3 script: the floor."""
    with Sandbox(OPEN) as box:
        ids = fake_ids(1)
        box.load_ids(ids)
        launched = time.time()
        subprocess.run(
            [sys.executable, "-c", BARE, box.endpoint, ids[0]],
            env={**CHILD_ENV, **environment(box)},
            check=True,
            stdout=subprocess.DEVNULL,
        )
        first = box.first_call_at
    if first is None:
        raise SystemExit("the bare boto3 script made no call")
    return first - launched


def over_bare(count: int, tree: Path | None) -> float:
    """swarm's first call (plain) less a bare boto3 script's, launched one after the other."""
    return first_call(count, False, tree).first_call - bare_first_call()


def first_call(count: int, tty: bool, tree: Path | None) -> Run:
    with Sandbox(OPEN) as box:
        ids = fake_ids(count)
        box.load_ids(ids)
        run = run_cli(box, ids, tty, tree)
    if run.code != 0:
        raise SystemExit(f"swarm exited {run.code}")
    return run


def wall(args: list[str], tree: Path | None) -> float:
    started = time.perf_counter()
    subprocess.run(
        [*SWARM, *args], check=True, stdout=subprocess.DEVNULL, env=tree_env(tree), cwd=tree
    )
    return time.perf_counter() - started


# Run in a fresh interpreter, as the command line runs: the heap of this process (the
# sandbox, its instances) would slow the garbage collector and blur the figure.
PARSE_AND_VALIDATE = """
import io, json, sys, time
from rich.console import Console
from swarm_cli.cli.act import load_targets, plan_groups

path, count, rounds = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
err = Console(file=io.StringIO())
times = []
for _ in range(rounds):
    started = time.perf_counter()
    groups = plan_groups(load_targets(path, err), {}, "us-east-1", err)
    times.append(time.perf_counter() - started)
    assert sum(map(len, groups.values())) == count
    del groups
print(json.dumps(times))
"""


def parse_and_validate(path: Path, count: int, tree: Path | None) -> float:
    """What the command line does with an ID list before anything is sent: read, check, group."""
    args = [sys.executable, "-c", PARSE_AND_VALIDATE, str(path), str(count), "1"]
    done = subprocess.run(
        args, check=True, capture_output=True, text=True, env=tree_env(tree), cwd=tree
    )
    return float(json.loads(done.stdout)[0])


Measure = Callable[[Path | None], float]


def table(trees: dict[str, Path | None], rounds: int, rows: list[tuple[str, str, Measure]]) -> None:
    """Each row's median over ``rounds`` per tree, the trees taking turns within a round."""
    head = "".join(f"{name:>22}" for name in trees)
    print(f"{'median (min-max), n=' + str(rounds):<40}{head}", flush=True)
    for label, unit, measure in rows:
        got: dict[str, list[float]] = {name: [] for name in trees}
        for _ in range(rounds):
            for name, tree in trees.items():
                got[name].append(measure(tree))
        digits = 0 if unit == "MB" else 3
        cells = "".join(
            f"{f'{statistics.median(v):.{digits}f} ({min(v):.{digits}f}-{max(v):.{digits}f})':>22}"
            for v in got.values()
        )
        print(f"{label + ' [' + unit + ']':<40}{cells}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--count", type=int, default=1000, help="IDs of the first-call runs")
    parser.add_argument("--big", type=int, default=100_000, help="IDs of the big-list rows")
    parser.add_argument("--big-rounds", type=int, default=1, help="rounds of the big run")
    parser.add_argument("--no-big", action="store_true", help="skip the whole big run")
    parser.add_argument(
        "--tree",
        action="append",
        default=[],
        metavar="NAME=DIR",
        help="a source tree to measure (its swarm_cli on PYTHONPATH), e.g. a git worktree "
        "of another commit; repeatable, side by side; default: the installed swarm_cli",
    )
    args = parser.parse_args()
    trees: dict[str, Path | None] = {"swarm": None}
    if args.tree:
        trees = {}
        for spec in args.tree:
            name, _, folder = spec.partition("=")
            trees[name] = Path(folder).resolve()
    for tree in trees.values():
        package = (tree or Path(__file__).resolve().parent.parent) / "swarm_cli"
        subprocess.run([sys.executable, "-m", "compileall", "-q", str(package)], check=True)
    big_list = Path(tempfile.mkdtemp(prefix="swarm-startup-"), "ids.txt")
    big_list.write_text("\n".join(fake_ids(args.big)) + "\n")
    n = args.count
    rows: list[tuple[str, str, Measure]] = [
        (f"first call, {n} IDs, live view", "s", lambda t: first_call(n, True, t).first_call),
        (f"first call, {n} IDs, plain", "s", lambda t: first_call(n, False, t).first_call),
        ("first call, a bare boto3 script", "s", lambda t: bare_first_call()),
        ("  plain less the bare script", "s", lambda t: over_bare(n, t)),
        ("swarm --help", "s", lambda t: wall(["--help"], t)),
        ("swarm terminate --help", "s", lambda t: wall(["terminate", "--help"], t)),
        (
            f"parse+validate {args.big} IDs",
            "s",
            lambda t: parse_and_validate(big_list, args.big, t),
        ),
    ]
    table(trees, args.rounds, rows)
    if not args.no_big:
        runs: dict[Path | None, Run] = {}

        def big(tree: Path | None) -> Run:
            runs[tree] = first_call(args.big, False, tree)
            return runs[tree]

        big_rows: list[tuple[str, str, Measure]] = [
            (f"first call, {args.big} IDs, plain", "s", lambda t: big(t).first_call),
            (f"  whole run, {args.big} IDs", "s", lambda t: runs[t].wall),
            (f"  peak RSS, {args.big} IDs", "MB", lambda t: runs[t].peak_rss_mb),
        ]
        table(trees, args.big_rounds, big_rows[:1])
        for label, unit, measure in big_rows[1:]:
            cells = "".join(
                f"{measure(tree):>22.{0 if unit == 'MB' else 3}f}" for tree in trees.values()
            )
            print(f"{label + ' [' + unit + ']':<40}{cells}")
    big_list.unlink()
    big_list.parent.rmdir()


if __name__ == "__main__":
    main()
