"""Client CPU per call: swarm against a plain 32-thread boto3 pool, side by side in one run.

Each contender is a child process (``swarm terminate``, or ``benchmarks/pool.py`` in
botocore's legacy retry mode) launched through ``spawn.py``, which reports the child's
own CPU time (user + system, ``os.wait4``): the sandbox serving the calls (moto behind
unlimited buckets, in this process) is never counted. Every run gets a fresh sandbox and
the same IDs; the contenders take turns within a repeat, so a busy machine slows them
alike. The pool sends as many IDs per call as swarm does, so both make the same calls.

    python benchmarks/cpu.py                          # 5000 IDs, batch 10, 3 repeats
    python benchmarks/cpu.py --ids 20000 --repeat 5 --trace
    python benchmarks/cpu.py --tree before=/tmp/old --tree after=.   # two source trees

Prints, per contender, the median (min-max) CPU seconds per run and milliseconds per
call, and each swarm's ratio to the pool's (the median of the per-repeat ratios). CPU
per call includes start-up (imports, reading the list) as a user pays it; ``--ids``
sets how far it is spread.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from swarm_cli.sandbox import BucketSpec, Sandbox, SandboxConfig, environment, fake_ids

HERE = Path(__file__).resolve().parent
SPAWN = (sys.executable, str(HERE / "spawn.py"))
POOL = (sys.executable, str(HERE / "pool.py"))
OPEN = SandboxConfig(BucketSpec(10**7, 10**7), BucketSpec(10**8, 10**8))


@dataclass(frozen=True)
class Contender:
    name: str
    argv: tuple[str, ...]  # before the per-run arguments
    tree: Path | None = None  # a source tree whose swarm_cli is imported (PYTHONPATH)
    swarm: bool = True


@dataclass(frozen=True)
class Cost:
    cpu_s: float
    calls: int

    @property
    def per_call_ms(self) -> float:
        return 1000 * self.cpu_s / self.calls if self.calls else float("nan")


def child_env(box: Sandbox, tree: Path | None) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "GITHUB_STEP_SUMMARY")
        and k != "PYTHONDONTWRITEBYTECODE"
    }
    env.update(environment(box))
    if tree is not None:
        env["PYTHONPATH"] = str(tree)
    return env


def run_once(who: Contender, ids: list[str], batch: int, trace: bool) -> Cost:
    with tempfile.TemporaryDirectory(prefix="swarm-cpu-") as tmp, Sandbox(OPEN) as box:
        box.load_ids(ids)
        work = Path(tmp)
        ids_file = work / "ids.txt"
        ids_file.write_text("\n".join(ids) + "\n", encoding="utf-8")
        argv = [*who.argv, "--ids", str(ids_file), "--endpoint-url", box.endpoint]
        argv += ["--batch-size", str(batch)]
        if who.swarm:
            argv += ["--yes", "--ledger", str(work / "ledger.jsonl")]
            argv += ["--progress", "none", "--output", "json"]
            if trace:
                argv += ["--trace", str(work / "trace.jsonl")]
        else:
            argv += ["--threads", "32"]
        cost = work / "cost.json"
        done = subprocess.run(
            [*SPAWN, str(cost), "--", *argv],
            env=child_env(box, who.tree),
            cwd=who.tree,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            check=False,
        )
        if done.returncode != 0:
            sys.stderr.write(done.stderr.decode(errors="replace")[-2000:])
            raise SystemExit(f"{who.name} exited {done.returncode}")
        lost = len(set(ids) - box.accepted_ids())
        if lost:
            raise SystemExit(f"{who.name} left {lost} instances running")
        calls = box.counters.accepted + box.counters.throttled + box.counters.faults
        return Cost(json.loads(cost.read_text(encoding="utf-8"))["cpu_s"], calls)


def cell(values: list[float], digits: int) -> str:
    low, mid, high = min(values), statistics.median(values), max(values)
    return f" {mid:.{digits}f} ({low:.{digits}f}-{high:.{digits}f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ids", type=int, default=5000, help="instances per run")
    parser.add_argument("--batch", type=int, default=10, help="IDs per call, both contenders")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--trace", action="store_true", help="swarm writes its --trace too")
    parser.add_argument(
        "--swarm-args", default="", help='more options for swarm, e.g. "--max-window 32"'
    )
    parser.add_argument(
        "--tree",
        action="append",
        default=[],
        metavar="NAME=DIR",
        help="a source tree whose swarm_cli is measured (on PYTHONPATH); repeatable, side "
        "by side; default: the installed swarm_cli",
    )
    args = parser.parse_args()
    swarm = (sys.executable, "-m", "swarm_cli", "terminate", *args.swarm_args.split())
    contenders = [Contender("swarm", swarm)]
    if args.tree:
        contenders = []
        for spec in args.tree:
            name, _, folder = spec.partition("=")
            contenders.append(Contender(name, swarm, Path(folder).resolve()))
    contenders.append(Contender("pool legacy", (*POOL, "--mode", "legacy"), swarm=False))
    for who in contenders:
        if who.swarm:  # bytecode compiled once, as an installed swarm has it
            package = (who.tree or HERE.parent) / "swarm_cli"
            subprocess.run([sys.executable, "-m", "compileall", "-q", str(package)], check=True)
    ids = fake_ids(args.ids)
    costs: dict[str, list[Cost]] = {who.name: [] for who in contenders}
    for k in range(args.repeat):
        for who in contenders:
            print(f"  repeat {k + 1}/{args.repeat}: {who.name} ...", file=sys.stderr, flush=True)
            costs[who.name].append(run_once(who, ids, args.batch, args.trace))
    pool = costs["pool legacy"]
    print(
        f"{args.ids} IDs, batch {args.batch}, {args.repeat} repeats"
        f"{', swarm with --trace' if args.trace else ''}"
        f"{', swarm ' + args.swarm_args if args.swarm_args else ''}; median (min-max)"
    )
    print(f"{'contender':<16}{'calls':>8}{'cpu s':>22}{'cpu ms/call':>24}{'/ pool':>20}")
    for who in contenders:
        got = costs[who.name]
        ratios = [c.per_call_ms / p.per_call_ms for c, p in zip(got, pool, strict=True)]
        print(
            f"{who.name:<16}{statistics.median(c.calls for c in got):>8.0f}"
            f"{cell([c.cpu_s for c in got], 2):>22}"
            f"{cell([c.per_call_ms for c in got], 3):>24}"
            f"{cell(ratios, 2):>20}"
        )


if __name__ == "__main__":
    main()
