from __future__ import annotations

import itertools
import json
from pathlib import Path

from test_cli import swarm, terminate_json, write_ids

from swarm_cli.actions import ACTIONS
from swarm_cli.batching import AUTO_MOST, AUTO_SECONDS, AutoBatch, initial_size, least_size
from swarm_cli.sandbox import PRESETS, Sandbox
from swarm_cli.window import PROFILES, RATE, Window, new_controller


def test_initial_size_is_half_a_second_of_the_documented_instance_rate() -> None:
    assert initial_size(ACTIONS["terminate"].limits) == 10  # 20 instances/s
    assert initial_size(ACTIONS["reboot"].limits) == 1000  # no instance bucket: full calls


def test_a_start_spends_its_instance_burst_with_its_few_calls_then_goes_as_low_as_one() -> None:
    """StartInstances: 5 calls burst, 2 a second; 1000 instances burst, 2 a second. Calls
    of one ID (half a second of its instance rate) would start 2 instances a second from
    the first, its burst of 1000 unspent: calls of 200 spend both bursts together."""
    limits = ACTIONS["start"].limits
    assert least_size(limits) == 1 and initial_size(limits) == 200
    batch = AutoBatch(initial_size(limits), limits)
    assert batch.least == 1 and batch.seconds == 1.0  # calls once a second: half its refill
    assert initial_size(ACTIONS["stop"].limits) == 20  # 1000 / 50
    assert AutoBatch(10, ACTIONS["terminate"].limits).seconds == AUTO_SECONDS


def test_a_start_at_ec2s_documented_limits_is_done_in_a_few_calls(tmp_path: Path) -> None:
    with Sandbox(PRESETS["ec2"]) as box:
        ids = box.launch(120)
        ids_file = write_ids(tmp_path / "ids.txt", ids)
        code, report = terminate_json(box, ids_file, tmp_path / "stop.jsonl", action="stop")
        assert code == 0 and report["counts"]["succeeded"] == 120
        code, report = terminate_json(box, ids_file, tmp_path / "start.jsonl", action="start")
        assert code == 0 and report["counts"]["succeeded"] == 120
        # One ID a call would have taken 60 s and 120 calls.
        assert report["calls"] <= 3
        assert set(box.states(ids).values()) == {"running"}
        # A rollback of a stop is a start: it starts where a start does (it began at 10).
        stopped = tmp_path / "stop2.jsonl"
        assert terminate_json(box, ids_file, stopped, action="stop")[0] == 0
        code, out, err = swarm(
            "rollback", str(stopped), "--yes", "--output", "json", "--endpoint-url", box.endpoint
        )
        assert code == 0, err
        assert json.loads(out)["calls"] <= 3
        assert set(box.states(ids).values()) == {"running"}


def feed(
    w: Window,
    batch: AutoBatch,
    ids_per_second: float,
    start: float,
    end: float,
    throttle_every: int = 0,
) -> list[int]:
    """Answers carrying ``ids_per_second`` from ``start`` to ``end`` (every
    ``throttle_every``-th call throttled); the sizes on the way."""
    sizes, now, step = [], start, 0.05
    for k in itertools.count(1):
        now += step
        if now >= end:
            break
        ticket = w.on_send(now)
        throttle = throttle_every > 0 and k % throttle_every == 0
        if throttle:
            w.on_throttle(ticket, now)
        else:
            w.on_success(ticket, 0.04, now, 1, size=round(ids_per_second * step))
        batch.on_answer(now, throttle)
        size = batch.update(w, now)
        if not sizes or sizes[-1] != size:
            sizes.append(size)
    return sizes


def throttled() -> Window:
    w = Window(RATE)
    w.on_throttle(w.on_send(0.0), 0.0)
    return w


def test_carries_half_a_second_of_what_gets_through_moving_by_half_or_double() -> None:
    w = throttled()
    batch = AutoBatch(10)
    *growing, settled = feed(w, batch, 200, 0.0, 6.0)
    assert growing == [10, 20, 40, 80] and 95 <= settled <= 105  # 200 IDs/s: about 100 per call
    shrinking = feed(w, batch, 20, 6.0, 12.0)
    settled = shrinking[-1]
    assert all(a // 2 <= b < a for a, b in itertools.pairwise(shrinking))
    assert 9 <= settled <= 11  # then 20 IDs/s: about 10 per call


def test_never_smaller_than_it_starts_where_calls_are_what_is_scarce() -> None:
    """2 IDs a second get through: half a second of that is 1, but calls of 1 would
    spend the call bucket ten times faster for the same IDs."""
    assert feed(throttled(), AutoBatch(10), 2, 0.0, 10.0) == [10]


def test_halves_when_most_calls_of_its_size_are_throttled_and_stays_under_it() -> None:
    w, batch = throttled(), AutoBatch(10)
    assert feed(w, batch, 200, 0.0, 1.5)[-1] == 40
    assert feed(w, batch, 200, 1.5, 2.5, throttle_every=1) == [40, 20]
    assert batch.most == 20
    assert feed(w, batch, 400, 2.5, 10.0) == [20]  # 40 proved too big: not tried again


def test_goes_below_where_it_started_when_no_call_of_that_size_gets_through() -> None:
    # An account's instance bucket of 4: a call of 8 needs more tokens than it ever holds.
    # Every call throttled, for ever, the size held at its floor.
    w, batch = throttled(), AutoBatch(8)
    sizes = feed(w, batch, 0, 0.0, 5.0, throttle_every=1)
    assert sizes[0] == 8 and sizes[-1] < 8 and batch.least < 8
    # Where one in four gets through (the call bucket is what is scarce: smaller calls
    # would get fewer IDs through), it stays at its floor.
    w, batch = throttled(), AutoBatch(8)
    for k in range(200):
        now = 0.05 * k
        ticket = w.on_send(now)
        if k % 4:
            w.on_throttle(ticket, now)
        else:
            w.on_success(ticket, 0.04, now, 1, size=8)
        batch.on_answer(now, k % 4 != 0)
        assert batch.update(w, now) == 8


def test_a_dozen_throttles_in_a_row_now_and_then_keep_the_floor() -> None:
    # A bucket of one token behind uneven latency (or what others leave of it) refuses a
    # dozen calls in a row now and then: the calls' size is not what keeps them out.
    w, batch = throttled(), AutoBatch(8)
    for k in range(400):
        now = 0.05 * k
        ticket = w.on_send(now)
        through = k % 13 == 12
        if through:
            w.on_success(ticket, 0.04, now, 1, size=8)
        else:
            w.on_throttle(ticket, now)
        batch.on_answer(now, not through)
        batch.update(w, now)
    assert batch.least == 8


def test_does_not_grow_while_many_calls_are_throttled() -> None:
    # A third of the calls throttled: what gets through would ask for 100 per call.
    assert feed(throttled(), AutoBatch(10), 200, 0.0, 5.0, throttle_every=3) == [10]


def test_grows_with_the_window_before_any_throttle() -> None:
    w = new_controller(PROFILES["adaptive"])
    batch = AutoBatch(10)
    seen: dict[int, set[int]] = {}
    for k in range(31):
        now = k * 0.05
        w.on_success(w.on_send(now, batch.size), 0.04, now, 1, size=batch.size)
        batch.on_answer(now, False)
        size = batch.update(w, now)
        seen.setdefault(size, set()).add(int(w.cwnd))
    assert w.phase == "startup" and not w.throttled
    # The size doubles each time the window has doubled from the initial window of 10.
    assert seen == {10: set(range(10, 20)), 20: set(range(20, 40)), 40: {40}}


def test_keeps_its_size_until_throttles_show_the_limit() -> None:
    w = Window(RATE)
    for k in range(20):
        w.on_success(w.on_send(k * 0.05), 0.04, k * 0.05, 1, size=10)
    batch = AutoBatch(10)
    assert [batch.update(w, 1.0 + k) for k in range(3)] == [10, 10, 10]


def test_grows_when_the_window_is_as_wide_as_it_may_be() -> None:
    w = Window(RATE.bounded(max_window=2))
    for k in range(4):
        w.on_success(w.on_send(k * 0.05), 0.04, k * 0.05, 2, size=10)
    assert w.cwnd == 2
    batch = AutoBatch(10, most=30)
    assert [batch.update(w, 1.0 + k) for k in range(3)] == [20, 30, 30]


def test_never_above_the_most() -> None:
    assert feed(throttled(), AutoBatch(500), 10_000, 0.0, 3.0)[-1] == AUTO_MOST


def test_the_limits_are_handed_in_by_the_action() -> None:
    """Batching reads what the action's limits say, and imports nothing of the cloud."""
    import ast

    import swarm_cli.batching
    from swarm_cli.actions.base import Bucket, Limits

    tree = ast.parse(Path(swarm_cli.batching.__file__).read_text())
    imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    assert not {m for m in imported if m and "actions" in m}
    narrow = Limits(Bucket(5, 5), Bucket(100, 40), per_call=15)
    assert initial_size(narrow) == 15  # 20 by the rate, but a call takes 15
    assert feed(throttled(), AutoBatch(10, narrow), 10_000, 0.0, 3.0)[-1] == 15
    assert AutoBatch(10, ACTIONS["stop"].limits).most == AUTO_MOST


def test_a_run_with_auto_batches_and_traces(sandbox: Sandbox, tmp_path: Path) -> None:
    ids = sandbox.launch(60)
    trace = tmp_path / "trace.jsonl"
    code, report = terminate_json(
        sandbox, write_ids(tmp_path / "ids.txt", ids), tmp_path / "l.jsonl", "--trace", str(trace)
    )
    assert code == 0 and report["batch_size"] == "auto"
    assert report["counts"]["succeeded"] == 60
    lines = [json.loads(line) for line in trace.read_text().splitlines()]
    sent = [x for x in lines if x["event"] == "sent"]
    assert sent and all(x["batch"] >= 1 for x in sent)
    assert {"t", "cwnd", "in_flight", "pace", "phase", "done"} <= set(sent[0])
    assert max(x["done"] for x in lines) <= 60


def test_a_trace_that_cannot_be_written_is_a_warning_not_a_stop(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    ids = sandbox.launch(5)
    code, out, err = swarm(
        "terminate",
        "--ids",
        write_ids(tmp_path / "ids.txt", ids),
        "--endpoint-url",
        sandbox.endpoint,
        "--ledger",
        str(tmp_path / "l.jsonl"),
        "--yes",
        "--progress",
        "none",
        "--trace",
        str(tmp_path / "no-such-folder" / "trace.jsonl"),
    )
    assert code == 0, err
    assert "no trace" in err
    assert "5 of 5 succeeded" in out
