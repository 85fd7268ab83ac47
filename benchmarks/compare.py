"""swarm's performance benchmark: the real CLI against thread pools, behind the same buckets.

Every contender is a child process (``swarm terminate`` itself, or
``benchmarks/pool.py``) run one after the other against a fresh sandbox (moto
behind EC2-like token buckets) in this process, with the same settings, so the
ratios between them hold even on a busy machine. Wall time runs from the launch
of the child to its exit; client CPU is the child's own (``os.wait4``), so the
sandbox is never counted; "lost" instances are those whose termination the
sandbox never accepted.

    python benchmarks/compare.py                        # every scenario, a-i
    python benchmarks/compare.py --scenario a --scenario e --repeat 3
    python benchmarks/compare.py --smoke                # seconds, for CI: tiny sizes
    python benchmarks/compare.py --only "swarm default" --scenario c

Prints one table per scenario (with each scenario's targets, met or missed),
saves every number as JSON (``--json``, default benchmarks/results/latest.json)
and draws the window and the calls in flight over time per contender as SVG
(``--charts``, default benchmarks/results/<scenario>.svg). The exit code is 0
unless a run crashed (a child killed, timed out or failing in a way that is not
an answer); targets never change it.

The scenarios:

a  one bucket (20 burst, 50 calls/s), 40 +- 20 ms, 500 IDs, batch 1
b  EC2's two buckets at 10x (calls 100 burst 50/s, instances 1000 burst 200/s),
   80 +- 40 ms, 3000 IDs, swarm with --batch-size auto (and batch 1 alongside)
c  100 calls/s, 300 ms, 1000 IDs, swarm with --max-window 200
d  (a) with 3% injected HTTP 500s
e  two clients at once on (a)'s bucket, each with its own 500 IDs
f  (a) with a neighbour sending 5 TerminateInstances/s on the same bucket
g  100,000 IDs against an unthrottled sandbox: parsing, memory, CPU per call
h  a stingy bucket (3 burst, 0.5 calls/s), 100 ms, 40 IDs; the sim's prediction beside it
i  a slow API with a high ceiling (80 calls/s), 250 ms, 800 IDs; the sim's prediction too
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import platform
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import charts
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError

from swarm_cli.rehearse import bound_seconds
from swarm_cli.sandbox import BucketSpec, Sandbox, SandboxConfig, environment, fake_ids

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
SWARM = (sys.executable, "-m", "swarm_cli")
POOL = (sys.executable, str(HERE / "pool.py"))
SPAWN = (sys.executable, str(HERE / "spawn.py"))
SAMPLE_EVERY = 0.05
UNLIMITED = BucketSpec(10**7, 10**7)


@dataclass(frozen=True)
class Contender:
    name: str
    kind: str  # "swarm" or "pool"
    args: tuple[str, ...] = ()  # swarm: extra options; pool: ("--mode", MODE)
    batch: str | None = None  # swarm: overrides the scenario's --batch-size


CONTENDERS = {
    c.name: c
    for c in (
        Contender("swarm default", "swarm"),
        Contender("swarm seed", "swarm", ("--window-profile", "seed")),
        Contender("swarm rate", "swarm", ("--window-profile", "rate")),
        Contender("swarm batch 1", "swarm", batch="1"),
        Contender("swarm headroom 0.2", "swarm", ("--headroom", "0.2")),
        Contender("pool legacy", "pool", ("--mode", "legacy")),
        Contender("pool standard", "pool", ("--mode", "standard")),
        Contender("pool adaptive", "pool", ("--mode", "adaptive")),
        Contender("pool tenacity", "pool", ("--mode", "tenacity")),
    )
}
EVERYONE = ("swarm default", "swarm seed", *(n for n in CONTENDERS if n.startswith("pool")))


@dataclass(frozen=True)
class Scenario:
    key: str
    title: str
    config: SandboxConfig
    instances: int  # per client process
    swarm_batch: str | None  # --batch-size given to swarm; None: its default
    pool_batch: int  # IDs per call of the pools (g: swarm's own mean, once it ran)
    contenders: tuple[str, ...] = EVERYONE
    swarm_args: tuple[str, ...] = ()
    processes: int = 1  # clients at once, each with its own IDs
    neighbour_rate: float = 0.0  # calls/s of a neighbour on the same bucket
    bound_batch: int | None = 1  # batch size of the bound; None: the best one

    @property
    def smoke_contenders(self) -> tuple[str, ...]:
        """A smoke run's: swarm as the scenario runs it, and a pool where its path differs."""
        # The seed and 0.2's rate mode are baselines: on a stingy bucket they take minutes.
        baselines = ("swarm seed", "swarm rate")
        mine = tuple(n for n in self.contenders if n.startswith("swarm") and n not in baselines)
        pool = {"a": "pool tenacity", "d": "pool standard", "e": "pool tenacity"}
        if self.key == "g":
            return (*mine, "pool legacy")
        return (*mine, pool[self.key]) if self.key in pool else mine

    @property
    def total(self) -> int:
        return self.instances * self.processes

    @property
    def bound(self) -> float:
        if self.bound_batch is not None:
            return bound_seconds(self.config, self.total, self.bound_batch)
        return min(bound_seconds(self.config, self.total, b) for b in range(1, 1001))


ONE_BUCKET = SandboxConfig(BucketSpec(20, 50), UNLIMITED, latency=0.04, jitter=0.02)


def scenarios(smoke: bool) -> dict[str, Scenario]:
    n = (lambda full: 40) if smoke else (lambda full: full)
    return {
        s.key: s
        for s in (
            Scenario("a", "one bucket, 40 ms", ONE_BUCKET, n(500), "1", 1),
            Scenario(
                "b",
                "EC2's two buckets at 10x, 80 ms, --batch-size auto",
                SandboxConfig(
                    BucketSpec(100, 50), BucketSpec(1000, 200), latency=0.08, jitter=0.04
                ),
                n(3000),
                "auto",
                10,
                contenders=("swarm default", "swarm batch 1", *EVERYONE[1:]),
                bound_batch=None,
            ),
            Scenario(
                "c",
                "100 calls/s, 300 ms, --max-window 200",
                SandboxConfig(BucketSpec(100, 100), UNLIMITED, latency=0.3, jitter=0.03),
                n(1000),
                "1",
                1,
                swarm_args=("--max-window", "200"),
            ),
            Scenario(
                "d", "(a) with 3% HTTP 500s", replace(ONE_BUCKET, error_rate=0.03), n(500), "1", 1
            ),
            Scenario(
                "e", "two clients at once on (a)'s bucket", ONE_BUCKET, n(500), "1", 1, processes=2
            ),
            Scenario(
                "f",
                "(a) with a neighbour at 5 calls/s",
                ONE_BUCKET,
                n(500),
                "1",
                1,
                contenders=("swarm default", "swarm headroom 0.2", *EVERYONE[1:]),
                neighbour_rate=5.0,
            ),
            Scenario(
                "h",
                "a stingy bucket: burst 3, 0.5 calls/s, 100 ms",
                SandboxConfig(BucketSpec(3, 0.5), UNLIMITED, latency=0.1, jitter=0.04),
                8 if smoke else 40,
                "1",
                1,
                contenders=("swarm default", "swarm rate", "pool legacy", "pool adaptive"),
            ),
            Scenario(
                "i",
                "a slow API with a high ceiling: 250 ms, 80 calls/s",
                SandboxConfig(BucketSpec(80, 80), UNLIMITED, latency=0.25, jitter=0.1),
                n(800),
                "1",
                1,
                contenders=("swarm default", "swarm rate", "pool legacy", "pool adaptive"),
            ),
            Scenario(
                "g",
                "100,000 IDs, unthrottled",
                SandboxConfig(UNLIMITED, BucketSpec(10**8, 10**8)),
                2000 if smoke else 100_000,
                None,
                10,
                contenders=("swarm default", "pool legacy"),
            ),
        )
    }


# --- running one contender -----------------------------------------------------------


class Child:
    """A client process, launched through ``spawn.py`` (which measures it alone) and
    reaped by a thread of its own."""

    def __init__(self, argv: Sequence[str], env: dict[str, str], work: Path, name: str) -> None:
        self.argv = list(argv)
        self.out, self.err = work / f"{name}.out", work / f"{name}.err"
        self.cost = work / f"{name}.cost.json"
        self.code: int | None = None
        self.cpu = 0.0
        self.max_rss_mb = 0.0
        self.ended: float | None = None
        self.timed_out = False
        with open(self.out, "wb") as stdout, open(self.err, "wb") as stderr:
            self.launched = time.monotonic()
            self.proc = subprocess.Popen(
                [*SPAWN, str(self.cost), "--", *self.argv],
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=stdout,
                stderr=stderr,
                start_new_session=True,  # its own process group: a time-out ends it all
            )
        self._reaper = threading.Thread(target=self._reap, daemon=True)
        self._reaper.start()

    def _reap(self) -> None:
        code = self.proc.wait()
        self.ended = time.monotonic()
        self.code = code
        try:
            cost = json.loads(self.cost.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return  # killed before it could say
        self.launched, self.ended = cost["launched"], cost["ended"]
        self.code = cost["exit_code"]
        self.cpu = cost["cpu_s"]
        self.max_rss_mb = cost["max_rss_kib"] / 1024  # KiB on Linux

    def wait(self, deadline: float) -> None:
        self._reaper.join(max(0.0, deadline - time.monotonic()))
        if self._reaper.is_alive():
            self.timed_out = True
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self._reaper.join()

    @property
    def wall(self) -> float:
        return (self.ended or time.monotonic()) - self.launched

    def stdout_json(self) -> dict[str, Any] | None:
        text = self.out.read_text(encoding="utf-8", errors="replace").strip()
        if not text:
            return None
        try:
            data = json.loads(text[text.index("{") :])
        except ValueError:
            return None
        return data if isinstance(data, dict) else None

    def stderr_tail(self, lines: int = 2) -> str:
        """The last lines of its stderr, without the frames rich draws around errors."""
        text = self.err.read_text(encoding="utf-8", errors="replace").splitlines()
        kept = [t.strip(" │╭╮╰╯─") for t in text]
        kept = [t.removeprefix("Error: ") for t in kept]
        kept = [t for t in kept if t and t != "Error" and not t.startswith(("Try ", "Usage:"))]
        return " | ".join(kept[-lines:])


class Sampler(threading.Thread):
    """What the sandbox sees, every 50 ms: calls in flight, accepted, throttled."""

    def __init__(self, box: Sandbox, t0: float, groups: Sequence[set[str]] = ()) -> None:
        super().__init__(daemon=True)
        self.box, self.t0, self.groups = box, t0, list(groups)
        self.points: list[dict[str, Any]] = []
        self.first_answer = threading.Event()
        self.first_answer_t: float | None = None
        self.stopped = threading.Event()

    def run(self) -> None:
        while True:
            stop = self.stopped.wait(SAMPLE_EVERY)
            c = self.box.counters
            point: dict[str, Any] = {
                "t": time.monotonic() - self.t0,
                "in_flight": c.in_flight,
                "answered": c.accepted + c.throttled + c.faults,
                "throttled": c.throttled,
            }
            if self.groups:
                accepted = self.box.accepted_ids()
                point["accepted"] = [len(g & accepted) for g in self.groups]
            self.points.append(point)
            if point["answered"] and not self.first_answer.is_set():
                self.first_answer_t = point["t"]
                self.first_answer.set()
            if stop:
                return

    def throttle_times(self) -> list[float]:
        out: list[float] = []
        before = 0
        for p in self.points:
            out.extend([p["t"]] * min(50, p["throttled"] - before))
            before = p["throttled"]
        return out


class Neighbour(threading.Thread):
    """Another client of the same bucket: one TerminateInstances of its own at a steady
    rate, no retries. Starts at the contender's first answer, stops when it exits."""

    def __init__(self, box: Sandbox, ids: list[str], rate: float, start: threading.Event) -> None:
        super().__init__(daemon=True)
        self.box, self.ids, self.rate, self.start_after = box, ids, rate, start
        self.stopped = threading.Event()
        self.accepted = self.throttled = self.other = 0

    def run(self) -> None:
        client = self.box.client(
            admin=False,
            config=Config(retries={"total_max_attempts": 1}, read_timeout=10, connect_timeout=5),
        )
        while not self.start_after.wait(0.05):
            if self.stopped.is_set():
                return
        due = time.monotonic()
        k = 0
        while not self.stopped.is_set():
            try:
                client.terminate_instances(InstanceIds=[self.ids[k % len(self.ids)]])
                self.accepted += 1
            except ClientError as exc:
                status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
                code = exc.response.get("Error", {}).get("Code")
                if status == 503 or code == "RequestLimitExceeded":
                    self.throttled += 1
                else:
                    self.other += 1
            except BotoCoreError:
                self.other += 1
            k += 1
            due += 1 / self.rate
            self.stopped.wait(max(0.0, due - time.monotonic()))

    @property
    def calls(self) -> int:
        return self.accepted + self.throttled

    def summary(self) -> dict[str, Any]:
        return {
            "rate": self.rate,
            "calls": self.calls,
            "throttled": self.throttled,
            "other_errors": self.other,
            "throttled_share": self.throttled / self.calls if self.calls else None,
        }


_SWARM_OPTIONS: str | None = None


def swarm_supports(option: str) -> bool:
    """Whether ``swarm terminate`` knows ``option`` (asked once, from its --help)."""
    global _SWARM_OPTIONS
    if _SWARM_OPTIONS is None:
        done = subprocess.run(
            [*SWARM, "terminate", "--help"],
            capture_output=True,
            text=True,
            env={**os.environ, "COLUMNS": "200", "NO_COLOR": "1", "TERM": "dumb"},
        )
        _SWARM_OPTIONS = done.stdout
    return option in _SWARM_OPTIONS


def child_env(box: Sandbox) -> dict[str, str]:
    env = {**os.environ, **environment(box)}
    for name in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "GITHUB_STEP_SUMMARY"):
        env.pop(name, None)
    env.update(environment(box))  # a sandbox's own session token, if it has one
    env["PYTHONUNBUFFERED"] = "1"
    return env


def argv_for(
    sc: Scenario, who: Contender, ids: Path, box: Sandbox, work: Path, k: int, pool_batch: int
) -> tuple[list[str], Path]:
    trace = work / f"trace-{k}.jsonl"
    if who.kind == "pool":
        argv = [
            *POOL,
            *who.args,
            "--ids",
            str(ids),
            "--endpoint-url",
            box.endpoint,
            "--batch-size",
            str(pool_batch),
            "--threads",
            "32",
            "--trace",
            str(trace),
        ]
        return argv, trace
    argv = [
        *SWARM,
        "terminate",
        "--ids",
        str(ids),
        "--endpoint-url",
        box.endpoint,
        "--yes",
        "--ledger",
        str(work / f"ledger-{k}.jsonl"),
        "--progress",
        "none",
        "--output",
        "json",
    ]
    batch = who.batch or sc.swarm_batch
    if batch is not None:
        argv += ["--batch-size", batch]
    argv += [*sc.swarm_args, *who.args]
    if swarm_supports("--trace"):
        argv += ["--trace", str(trace)]
    return argv, trace


def child_failure(child: Child, kind: str) -> tuple[str | None, bool]:
    """(what went wrong, whether it counts as a crash) for one finished child."""
    if child.timed_out:
        return "timed out", True
    code = child.code
    if code == 0:
        return None, False
    if kind == "swarm" and code == 2:
        return f"rejected (exit 2): {child.stderr_tail()}", False
    if kind == "swarm" and code == 1 and child.stdout_json() is not None:
        return None, False  # an answer: some instances were left; "lost" says how many
    if code is not None and code < 0:
        return f"killed by signal {-code}", True
    return f"exit {code}: {child.stderr_tail()}", True


def run_once(
    sc: Scenario, who: Contender, seed: int, pool_batch: int, timeout: float
) -> dict[str, Any]:
    """One contender, one fresh sandbox: the numbers, and what the charts need."""
    rng = random.Random(seed)
    spare = 100 if sc.neighbour_rate else 0
    with (
        tempfile.TemporaryDirectory(prefix="swarm-bench-") as tmp,
        Sandbox(replace(sc.config, seed=seed)) as box,
    ):
        work = Path(tmp)
        everything = fake_ids(sc.total + spare, rng)
        box.load_ids(everything)
        groups = [
            everything[k * sc.instances : (k + 1) * sc.instances] for k in range(sc.processes)
        ]
        neighbour_ids = everything[sc.total :]
        env = child_env(box)
        plans = []
        for k, ids in enumerate(groups):
            path = work / f"ids-{k}.txt"
            path.write_text("\n".join(ids) + "\n", encoding="utf-8")
            plans.append(argv_for(sc, who, path, box, work, k, pool_batch))
        t0 = time.monotonic()
        sampler = Sampler(box, t0, [set(g) for g in groups] if sc.processes > 1 else ())
        sampler.start()
        neighbour = None
        if sc.neighbour_rate:
            neighbour = Neighbour(box, neighbour_ids, sc.neighbour_rate, sampler.first_answer)
            neighbour.start()
        children = []
        for k, (argv, _) in enumerate(plans):
            if who.kind == "pool":
                argv = [*argv, "--t0", repr(time.time())]
            children.append(Child(argv, env, work, f"client-{k}"))
        deadline = time.monotonic() + timeout
        for child in children:
            child.wait(deadline)
        if neighbour is not None:
            neighbour.stopped.set()
            neighbour.join()
        sampler.stopped.set()
        sampler.join()
        accepted = box.accepted_ids()
        counters = box.counters
        failures = [child_failure(c, who.kind) for c in children]
        processes = []
        for child, (problem, _), ids in zip(children, failures, groups, strict=True):
            processes.append(
                {
                    "wall_s": child.wall,
                    "cpu_s": child.cpu,
                    "max_rss_mb": child.max_rss_mb,
                    "exit_code": child.code,
                    "lost": sum(1 for i in ids if i not in accepted),
                    "client": child.stdout_json(),
                    "error": problem,
                }
            )
        traces = [charts.read_trace(trace) for _, trace in plans]
    n_calls = counters.accepted + counters.throttled + counters.faults
    n_throttled = counters.throttled
    run: dict[str, Any] = {
        "seed": seed,
        "wall_s": max(c.wall for c in children),
        "calls": n_calls - (neighbour.calls if neighbour else 0),
        "throttled": n_throttled - (neighbour.throttled if neighbour else 0),
        "faults": counters.faults,
        "lost": sum(p["lost"] for p in processes),
        "cpu_s": sum(c.cpu for c in children),
        "max_rss_mb": max(c.max_rss_mb for c in children),
        "peak_in_flight_at_sandbox": counters.peak_in_flight,
        "instances_accepted": counters.instances_accepted,
        "repeats": counters.repeats,
        "error": "; ".join(p for p, _ in failures if p) or None,
        "crashed": any(crash for _, crash in failures),
        "processes": processes,
    }
    if neighbour is not None:
        run["neighbour"] = neighbour.summary()
        # The neighbour's repeats (it cycles through its own IDs) are not the contender's.
        run["repeats"] = None
    if sc.processes > 1:
        run["fairness"] = fairness(sampler, children)
    run["_chart"] = {"sampler": sampler.points, "traces": traces, "kind": who.kind}
    run["_throttles"] = sampler.throttle_times()
    run["_first_answer"] = sampler.first_answer_t
    return run


def fairness(sampler: Sampler, children: Sequence[Child]) -> dict[str, Any]:
    """Each client's share of the instances accepted while all of them ran."""
    first_exit = min((c.ended or time.monotonic()) - sampler.t0 for c in children)
    before = [p for p in sampler.points if p["t"] <= first_exit and "accepted" in p]
    if not before:
        return {"overlap_s": first_exit, "shares": None}
    counts = before[-1]["accepted"]
    total = sum(counts)
    return {
        "overlap_s": first_exit,
        "accepted_while_all_ran": counts,
        "shares": [n / total for n in counts] if total else None,
    }


# --- one scenario ------------------------------------------------------------------------


NUMERIC = ("wall_s", "calls", "throttled", "faults", "lost", "cpu_s", "max_rss_mb")


def aggregate(name: str, runs: list[dict[str, Any]], bound: float) -> dict[str, Any]:
    good = [r for r in runs if not r["error"]] or runs
    row: dict[str, Any] = {"contender": name}
    for key in NUMERIC:
        row[key] = statistics.median(r[key] for r in good)
    row["x_bound"] = row["wall_s"] / bound if bound > 0 else None
    row["throttled_share"] = row["throttled"] / row["calls"] if row["calls"] else 0.0
    row["cpu_per_call_ms"] = 1000 * row["cpu_s"] / row["calls"] if row["calls"] else None
    row["error"] = next((r["error"] for r in runs if r["error"]), None)
    row["crashed"] = any(r["crashed"] for r in runs)
    if "neighbour" in runs[0]:
        shares = [r["neighbour"]["throttled_share"] for r in good]
        known = [s for s in shares if s is not None]
        row["neighbour_throttled_share"] = statistics.median(known) if known else None
    if "fairness" in runs[0]:
        spans = [r["fairness"]["shares"] for r in good if r["fairness"]["shares"]]
        row["shares_while_both_ran"] = (
            [statistics.median(s[k] for s in spans) for k in range(len(spans[0]))]
            if spans
            else None
        )
    row["runs"] = [{k: v for k, v in r.items() if not k.startswith("_")} for r in runs]
    return row


def check(name: str, value: float | None, limit: float, most: bool = True) -> dict[str, Any]:
    met = None if value is None else (value <= limit if most else value >= limit)
    return {
        "name": name,
        "value": value,
        "limit": limit,
        "kind": "max" if most else "min",
        "met": met,
    }


def targets(sc: Scenario, rows: dict[str, dict[str, Any]], extra: dict[str, Any]) -> None:
    """Each scenario's targets, set on the rows they judge."""
    me = rows.get("swarm default")
    if sc.key == "f":
        me = rows.get("swarm headroom 0.2")
    if me is None or me["error"]:
        return
    out: list[dict[str, Any]] = []
    if sc.key in "abcde":
        out.append(check("x bound", me["x_bound"], 1.10 if sc.key == "a" else 1.15))
    if sc.key in "abe":
        out.append(check("throttled", me["throttled_share"], 0.05 if sc.key == "a" else 0.10))
    if sc.key == "b":
        one = rows.get("swarm batch 1")
        if one is not None and not one["error"]:
            out.append(check("speed-up vs batch 1", one["wall_s"] / me["wall_s"], 5.0, most=False))
    if sc.key == "c":
        pools = [r["wall_s"] for n, r in rows.items() if n.startswith("pool") and not r["error"]]
        if pools:
            out.append(check("wall / fastest pool", me["wall_s"] / min(pools), 1.0))
    if sc.key == "d":
        out.append(check("lost", me["lost"], 0))
    if sc.key == "e":
        shares = me.get("shares_while_both_ran") or []
        out.append(check("smallest share", min(shares) if shares else None, 0.40, most=False))
        out.append(check("largest share", max(shares) if shares else None, 0.60))
    if sc.key == "f":
        out.append(check("neighbour throttled", me.get("neighbour_throttled_share"), 0.02))
    if sc.key == "h":
        out.append(check("x bound", me["x_bound"], 1.2))
        out.append(check("lost", me["lost"], 0))
    if sc.key == "i":
        for pool in ("pool legacy", "pool adaptive"):
            other = rows.get(pool)
            if other is not None and not other["error"]:
                out.append(check(f"wall / {pool}", me["wall_s"] / other["wall_s"], 1.0))
    if sc.key in "hi" and extra.get("sim_wall_s"):
        out.append(check("sim / real wall", extra["sim_wall_s"] / me["wall_s"], 1.2))
        out.append(check("real / sim wall", me["wall_s"] / extra["sim_wall_s"], 1.2))
    if sc.key == "g":
        out.append(check("parse+validate s", extra.get("parse_validate_s"), 1.0))
        out.append(check("peak RSS MB", me["max_rss_mb"], 200.0))
        pool = rows.get("pool legacy")
        if (
            pool is not None
            and not pool["error"]
            and pool["cpu_per_call_ms"]
            and me["cpu_per_call_ms"]
        ):
            ratio = me["cpu_per_call_ms"] / pool["cpu_per_call_ms"]
            out.append(check("CPU per call / pool's", ratio, 1.2))
    me["targets"] = out


def parse_and_validate_seconds(count: int, rounds: int) -> tuple[float, str]:
    """Reading and checking an ID list as the command line does before sending: seconds,
    and how it was measured.

    benchmarks/startup.py's measure (a fresh interpreter per round) when it is there
    and takes (path, count, tree); otherwise the same steps in this process.
    """
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp, "ids.txt")
        path.write_text("\n".join(fake_ids(count)) + "\n", encoding="utf-8")
        try:
            from startup import parse_and_validate

            times = [parse_and_validate(path, count, None) for _ in range(rounds)]
            return statistics.median(times), "benchmarks/startup.py, a fresh interpreter"
        except (ImportError, TypeError, subprocess.CalledProcessError, ValueError):
            pass
        from rich.console import Console

        from swarm_cli.cli.act import load_targets, plan_groups

        err = Console(file=io.StringIO())
        times = []
        for _ in range(rounds):
            started = time.perf_counter()
            groups = plan_groups(load_targets(str(path), err), {}, "us-east-1", err)
            times.append(time.perf_counter() - started)
            assert sum(map(len, groups.values())) == count
            del groups
    return statistics.median(times), "in this process"


def simulated_wall(sc: Scenario) -> float:
    """What benchmarks/sim.py predicts for the scenario's bucket, worst of three seeds, plus
    the start-up a real run pays (about half a second): the sim must not flatter."""
    from sim import Regime, simulate

    c = sc.config
    req = c.requests if isinstance(c.requests, BucketSpec) else UNLIMITED
    regime = Regime(
        req.burst, req.rate, c.latency, sc.total, jitter=c.jitter / c.latency if c.latency else 0
    )
    return max(simulate(regime, seed=k).wall_s for k in range(3)) + 0.5


def run_scenario(
    sc: Scenario,
    only: Sequence[str] | None,
    repeat: int,
    log: Callable[[str], None],
    smoke: bool = False,
) -> dict[str, Any]:
    bound = sc.bound
    extra: dict[str, Any] = {}
    if sc.key == "g":
        extra["parse_validate_s"], extra["parse_validate_how"] = parse_and_validate_seconds(
            sc.instances, 1 if sc.instances < 10_000 else 3
        )
    if sc.key in "hi" and not smoke:
        extra["sim_wall_s"] = simulated_wall(sc)
    rows: dict[str, dict[str, Any]] = {}
    chart_runs: dict[str, dict[str, Any]] = {}
    timeout = 120 + 10 * bound + sc.total / 200
    for name in sc.contenders:
        if (only and name not in only) or (smoke and not only and name not in sc.smoke_contenders):
            continue
        who = CONTENDERS[name]
        pool_batch = sc.pool_batch
        if sc.key == "g" and "swarm default" in rows and rows["swarm default"]["calls"]:
            # The same calls as swarm made: CPU per call compares like with like.
            pool_batch = max(1, round(sc.total / rows["swarm default"]["calls"]))
        runs = []
        for k in range(repeat):
            log(f"  {sc.key}: {name} (run {k + 1}/{repeat}) ...")
            runs.append(run_once(sc, who, k, pool_batch, timeout))
        row = aggregate(name, runs, bound)
        if who.kind == "pool":
            row["batch"] = pool_batch
        rows[name] = row
        chart_runs[name] = runs[-1]
    if not smoke:  # tiny runs are all start-up: nothing to judge
        targets(sc, rows, extra)
    return {
        "title": sc.title,
        "instances_per_client": sc.instances,
        "clients": sc.processes,
        "swarm_batch": sc.swarm_batch,
        "swarm_args": list(sc.swarm_args),
        "pool_batch": sc.pool_batch,
        "neighbour_rate": sc.neighbour_rate or None,
        "config": asdict(sc.config),
        "bound_s": bound,
        "extra": extra,
        "rows": list(rows.values()),
        "_charts": chart_runs,
    }


# --- output ------------------------------------------------------------------------------


def pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}"


def verdict(row: dict[str, Any]) -> str:
    if row["error"]:
        return "ERROR: " + str(row["error"])[:70]
    checks = row.get("targets")
    if not checks:
        return ""
    parts = []
    for c in checks:
        value = "n/a" if c["value"] is None else f"{c['value']:.3g}"
        sign = "<=" if c["kind"] == "max" else ">="
        mark = "ok" if c["met"] else ("??" if c["met"] is None else "MISSED")
        parts.append(f"{mark} {c['name']} {value} {sign} {c['limit']:g}")
    return "; ".join(parts)


def notes(key: str, row: dict[str, Any]) -> str:
    if key == "e" and row.get("shares_while_both_ran"):
        return "shares " + "/".join(f"{100 * s:.0f}" for s in row["shares_while_both_ran"])
    if key == "f":
        return f"nbr thr {pct(row.get('neighbour_throttled_share'))}%"
    if key == "g":
        per = row["cpu_per_call_ms"]
        return f"{per:.2f} ms/call, {row['max_rss_mb']:.0f} MB" if per else ""
    if row.get("batch") and row["batch"] != 1:
        return f"batch {row['batch']}"
    return ""


def print_table(key: str, result: dict[str, Any]) -> None:
    config = result["config"]
    req, res = config["requests"], config["resources"]
    print(
        f"\n{key}: {result['title']} — {result['clients']} x {result['instances_per_client']} IDs, "
        f"calls {req['burst']:g} burst {req['rate']:g}/s, instances {res['burst']:g} burst "
        f"{res['rate']:g}/s, {1000 * config['latency']:.0f} ± {1000 * config['jitter']:.0f} ms"
        + (f", {100 * config['error_rate']:.0f}% 500s" if config["error_rate"] else "")
        + f"; bound {result['bound_s']:.2f} s"
    )
    if result["extra"].get("parse_validate_s") is not None:
        print(
            f"   parse+validate {result['instances_per_client']} IDs: "
            f"{result['extra']['parse_validate_s']:.3f} s ({result['extra']['parse_validate_how']})"
        )
    print(
        f"{'contender':<20}{'wall s':>8}{'x bound':>9}{'calls':>7}{'thr %':>7}{'lost':>6}"
        f"{'cpu s':>7}  {'notes':<22} target"
    )
    for row in result["rows"]:
        if row["error"] and not row["calls"]:  # it never got going: its numbers say nothing
            print(
                f"{row['contender']:<20}{'-':>8}{'-':>9}{'-':>7}{'-':>7}{'-':>6}{'-':>7}  "
                f"{'':<22} {verdict(row)}"
            )
            continue
        xb = "-" if row["x_bound"] is None else f"{row['x_bound']:.2f}"
        print(
            f"{row['contender']:<20}{row['wall_s']:>8.2f}{xb:>9}{row['calls']:>7.0f}"
            f"{pct(row['throttled_share']):>7}{row['lost']:>6.0f}{row['cpu_s']:>7.2f}  "
            f"{notes(key, row):<22} {verdict(row)}"
        )


def chart(key: str, result: dict[str, Any], path: Path) -> None:
    panels = []
    colours = (("#1f77b4", "#2ca02c"), ("#9467bd", "#bcbd22"))
    for name, run in result["_charts"].items():
        data = run["_chart"]
        panel = charts.Panel(name)
        panel.lines.append(
            charts.Line(
                "in flight at sandbox",
                "#999",
                [(p["t"], p["in_flight"]) for p in data["sampler"]],
                dash="3,2",
            )
        )
        trace_throttles: list[float] = []
        for k, events in enumerate(data["traces"]):
            if not events:
                continue
            shift = 0.0
            if data["kind"] == "swarm":
                shift = trace_shift(events, run["_first_answer"])
            cwnd_colour, flight_colour = colours[k % 2]
            who = f" ({k + 1})" if len(data["traces"]) > 1 else ""
            if data["kind"] == "swarm":
                panel.lines.append(
                    charts.Line("cwnd" + who, cwnd_colour, charts.series(events, "cwnd", shift))
                )
            panel.lines.append(
                charts.Line(
                    "in flight" + who, flight_colour, charts.series(events, "in_flight", shift)
                )
            )
            trace_throttles += [
                float(e["t"]) + shift for e in events if e.get("event") == "throttled"
            ]
        if not any(data["traces"]):
            panel.note = "no client trace" if data["kind"] == "swarm" else ""
        panel.throttles = trace_throttles or run["_throttles"]
        if run["error"]:
            panel.note = "error: " + run["error"][:60]
        panels.append(panel)
    if panels:
        charts.write(path, f"{key}: {result['title']} (bound {result['bound_s']:.1f} s)", panels)


def trace_shift(events: list[dict[str, Any]], first_answer: float | None) -> float:
    """Seconds to add to a swarm trace's clock (from its own start) to reach ours (from
    the launch): its first answer lines up with the first answer the sandbox gave."""
    answers = [e["t"] for e in events if str(e.get("event", "")) in ("answered", "throttled")]
    mine = answers[0] if answers else events[0]["t"]
    return 0.0 if first_answer is None else first_answer - float(mine)


def git_revision() -> str | None:
    done = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=HERE
    )
    return done.stdout.strip() or None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=(__doc__ or "").splitlines()[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="\n".join((__doc__ or "").splitlines()[1:]),
    )
    parser.add_argument("--scenario", action="append", choices="abcdefghi", help="repeatable")
    parser.add_argument("--only", action="append", choices=sorted(CONTENDERS), help="repeatable")
    parser.add_argument("--repeat", type=int, default=1, help="runs per contender (median)")
    parser.add_argument("--smoke", action="store_true", help="tiny sizes: seconds, for CI")
    parser.add_argument("--json", type=Path, help="default: benchmarks/results/latest.json")
    parser.add_argument(
        "--charts", type=Path, help="folder of the SVGs; default: benchmarks/results"
    )
    args = parser.parse_args(argv)
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")
    default_dir = RESULTS / "smoke" if args.smoke else RESULTS
    json_path = args.json or default_dir / ("smoke.json" if args.smoke else "latest.json")
    chart_dir = args.charts or default_dir
    chosen = scenarios(args.smoke)
    keys = sorted(set(args.scenario or chosen))

    def log(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    report: dict[str, Any] = {
        "when": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "revision": git_revision(),
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "smoke": args.smoke,
        "repeat": args.repeat,
        "swarm_trace": swarm_supports("--trace"),
        "scenarios": {},
    }
    crashed = False
    for key in keys:
        result = run_scenario(chosen[key], args.only, args.repeat, log, args.smoke)
        print_table(key, result)
        sys.stdout.flush()
        chart(key, result, chart_dir / f"{key}.svg")
        del result["_charts"]
        report["scenarios"][key] = result
        crashed = crashed or any(r["crashed"] for r in result["rows"])
        # After each scenario: a run cut short keeps what it measured.
        json_path.parent.mkdir(parents=True, exist_ok=True)
        json_path.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    print(f"\nresults: {json_path}; charts: {chart_dir}/<scenario>.svg")
    return 1 if crashed else 0


if __name__ == "__main__":
    sys.exit(main())
