"""The controller's parts, each with time passed in, and the controller they make."""

from __future__ import annotations

import heapq
import itertools
import math
import threading
from collections.abc import Callable
from dataclasses import replace

import pytest

from swarm_cli.control import Controller, ControllerProfile
from swarm_cli.control.controller import MOST_GAP
from swarm_cli.control.estimator import DeliveryEstimator
from swarm_cli.control.noise import AFTER, NoiseFloor
from swarm_cli.control.pacing import Pacer, cap_for
from swarm_cli.runtime import VirtualRuntime


def test_estimator_counts_the_refill_between_two_throttles() -> None:
    e = DeliveryEstimator(few=4)
    e.on_answer(1.0, 1, False, 0.1)  # the bucket was empty at 1.0
    for k in range(10):  # ten successes sent between 1.0 and 3.0
        e.on_answer(1.1 + 0.19 * k, 1, True, 0.1)
    e.on_answer(3.0, 1, False, 0.1)  # and empty again at 3.0
    assert e.rate(now=10.0, rtt=0.1) == pytest.approx(10 / 2.0)
    assert e.upper(now=10.0, rtt=0.1, size=1) == pytest.approx(11 / 2.0)
    assert e.solid(now=10.0)


def test_estimator_counts_calls_not_ids_before_a_span_is_solid() -> None:
    """Two calls of ten IDs are two samples of the refill, not twenty: the span that
    ends at the last throttle reaches back until it holds enough calls."""
    e = DeliveryEstimator(few=4)
    e.on_answer(0.0, 10, False, 0.1)
    for k in range(8):  # eight calls of ten IDs in four seconds
        e.on_answer(0.25 + 0.5 * k, 10, True, 0.1)
    e.on_answer(4.0, 10, False, 0.1)
    e.on_answer(4.3, 10, True, 0.1)
    e.on_answer(4.6, 10, True, 0.1)  # two calls, 20 IDs, in 0.7 s
    e.on_answer(4.7, 10, False, 0.1)
    assert e.solid(now=10.0)
    # From the first throttle to the last (each met the bucket half-way): 100 IDs in 4.7 s,
    # not the last two calls' 20 IDs in 0.7 s.
    assert e.rate(now=10.0, rtt=0.1) == pytest.approx(100 / 4.7)
    assert e.upper(now=10.0, rtt=0.1, size=10) == pytest.approx(110 / 4.7)


def test_estimator_has_nothing_to_say_before_a_throttle() -> None:
    e = DeliveryEstimator()
    e.on_answer(0.0, 5, True, 0.1)
    assert not e.started
    assert e.rate(1.0, 0.1) == 0.0
    assert math.isinf(e.upper(1.0, 0.1, 1))


def test_estimator_upper_sinks_while_no_success_comes() -> None:
    """A slow refill: only throttles, so the estimate is one call over a growing span."""
    e = DeliveryEstimator()
    e.on_answer(0.0, 1, False, 0.02)
    uppers = []
    for t in (1.0, 2.0, 4.0):
        e.on_answer(t, 1, False, 0.02)
        uppers.append(e.upper(now=t + 0.02, rtt=0.02, size=1))
    assert uppers == pytest.approx([1.0, 0.5, 0.25])


def test_estimator_prefers_the_latest_span_with_enough_successes() -> None:
    e = DeliveryEstimator(few=4)
    e.on_answer(0.0, 1, False, 0.1)
    e.on_answer(5.0, 1, True, 0.1)  # one success in five seconds: the bucket sat full
    e.on_answer(10.0, 1, False, 0.1)
    for k in range(8):  # eight in one second, between two throttles
        e.on_answer(10.05 + 0.1 * k, 1, True, 0.1)
    e.on_answer(11.0, 1, False, 0.1)
    assert e.rate(now=20.0, rtt=0.1) == pytest.approx(8.0)


def test_estimator_sinks_smoothly_through_a_long_stretch_of_throttles() -> None:
    """A hundred calls a second go through, then others take the bucket and every call
    throttles for five seconds, 400 of them: the estimate still counts the successes
    before the stretch over the time since, and sinks with it. (Kept to the last 256
    throttles, it lost them at once and fell to one call over the stretch: the next
    call went twenty seconds later.)"""
    e = DeliveryEstimator()
    t = 0.0
    for k in range(200):
        e.on_answer(t, 1, k % 10 != 9, 0.0)
        t += 0.01
    start = t
    rates = []
    for k in range(400):
        e.on_answer(t, 1, False, 0.0)
        t += 0.0125
        if k % 100 == 99:
            rates.append(e.rate(now=t, rtt=0.02))
    assert all(r >= 16 / (t - start + 1) for r in rates)
    assert rates == sorted(rates, reverse=True)


def test_pacer_spreads_calls_and_retimes_when_the_rate_changes() -> None:
    p = Pacer()
    p.on_send(10.0, size=2, rate=4.0)
    assert p.next_at() == pytest.approx(10.5)
    p.retime(1.0)
    assert p.next_at() == pytest.approx(12.0)
    p.hold(20.0)
    assert p.next_at() == 20.0


def test_cap_carries_the_rate_over_a_round_trip_with_slack() -> None:
    assert cap_for(rate=100.0, rtt=0.3, size=1, gain=2.0, slack=4) == 64
    assert cap_for(rate=100.0, rtt=0.3, size=10, gain=2.0, slack=4) == 10


def test_noise_floor_learns_throttles_that_do_not_answer_to_a_decrease() -> None:
    n = NoiseFloor()
    for k in range(64):
        n.on_answer(k, throttled=k % 5 == 0)
    backs = []
    for attempt, start in enumerate((64, 64 + AFTER + 1)):
        n.decreased(rate_before=100.0 - attempt, ticket=start)
        back = None
        for k in range(start + 1, start + 1 + AFTER):
            back = n.on_answer(k, throttled=k % 5 == 0) or back
        backs.append(back)
    assert backs == [None, 99.0], "the second decrease that did not help is undone"
    assert 0.1 <= n.floor <= 0.3
    assert n.quiet()


def test_noise_floor_a_judgment_in_between_keeps_the_strike() -> None:
    # Random throttles at a fifth of calls, judged over sixteen answers each: one
    # decrease's answers held the share (4 of 16), the next's came out low by chance
    # (2 of 16: neither held nor plainly fell), the third's held again. That is two
    # decreases that did not help, not a streak broken.
    n = NoiseFloor()
    for k in range(64):
        n.on_answer(k, throttled=k % 5 == 0)
    backs = []
    start = 64
    for attempt, throttled in enumerate((4, 2, 4)):
        n.decreased(rate_before=100.0 - attempt, ticket=start)
        back = None
        for j in range(AFTER):
            back = n.on_answer(start + 1 + j, throttled=j % (AFTER // throttled) == 0) or back
        backs.append(back)
        start += AFTER + 1
    assert backs == [None, None, 98.0]
    assert 0.2 <= n.floor <= 0.3


def test_noise_floor_keeps_a_decrease_that_worked() -> None:
    n = NoiseFloor()
    for k in range(64):
        n.on_answer(k, throttled=k % 2 == 0)
    n.decreased(rate_before=100.0, ticket=64)
    results = [n.on_answer(k, throttled=False) for k in range(65, 65 + AFTER)]
    assert results == [None] * AFTER
    assert n.floor == 0.0


def test_noise_floor_takes_a_stretch_that_throttles_every_call_for_a_shut_out() -> None:
    """Others hold the bucket for a while: decreases do not reduce the throttles, but
    nothing at all gets by, which is no random share (once, the floor rose to a half and
    the run sent twice what got through for the rest of its life)."""
    n = NoiseFloor()
    for k in range(64):
        n.on_answer(k, throttled=k % 10 == 0)
    start = 64
    for attempt in range(3):
        n.decreased(rate_before=100.0 / 2**attempt, ticket=start)
        for k in range(start + 1, start + 1 + AFTER):
            assert n.on_answer(k, throttled=True) is None
        start += AFTER + 1
    assert n.floor == 0.0 and n.shut_out


def test_the_first_success_after_nothing_but_throttles_opens_the_first_window() -> None:
    """The run began while others held the bucket: its canary and every call after it
    throttled, the pace sinking. The first call that gets by is the canary's success,
    late: the window opens to ten as after one, not a probe at a time from the pace the
    throttles left (that took a minute to find a bucket of 100 a second)."""
    c = Controller(ControllerProfile())
    now = 0.0
    for _ in range(30):
        now = max(now, c.send_at())
        c.on_throttle(c.on_send(now), now + 0.02)
        now += 0.02
    assert c.phase == "paced" and c.rate is not None and c.rate < 1.0, c.rate
    now = max(now, c.send_at())
    c.on_success(c.on_send(now), 0.02, now + 0.02, in_flight=0)
    assert c.phase == "startup"
    assert c.limit == 10


def test_canary_goes_alone_then_the_window_opens_to_ten() -> None:
    c = Controller(ControllerProfile())
    assert c.limit == 1 and c.phase == "canary"
    t = c.on_send(0.0)
    c.on_success(t, 0.1, 0.1, in_flight=1)
    assert c.phase == "startup"
    assert c.limit == 10


def test_startup_paces_sends_across_the_round_trip() -> None:
    c = Controller(ControllerProfile())
    c.on_success(c.on_send(0.0), 0.1, 0.1, in_flight=1)
    c.on_send(1.0)
    # Ten calls at twice a window per round trip: one every 5 ms, never back to back.
    assert c.send_at() == pytest.approx(1.0 + 0.1 / (2 * 10))


def test_first_throttle_ends_startup_and_paces() -> None:
    c = Controller(ControllerProfile())
    c.on_success(c.on_send(0.0), 0.1, 0.1, in_flight=1)
    tickets = [c.on_send(0.1 + 0.005 * k) for k in range(10)]
    c.on_throttle(tickets[0], 0.2)
    assert c.phase == "paced"
    assert c.rate is not None and c.rate > 0
    assert c.throttled


def test_headroom_caps_the_rate_below_what_got_through() -> None:
    c = Controller(ControllerProfile(), headroom=0.2)
    c.found = 50.0
    c.rate = 0.0
    c._set_rate(100.0)
    assert c.rate == pytest.approx(40.0)


def _against_bucket(c: Controller, now: float, until: float, rate: float) -> float:
    """Calls at the controller's pace against a bucket of ``rate`` a second (burst 1),
    answered after 20 ms, until ``until``; returns the time."""
    tokens, at = 1.0, now
    while now < until:
        now = max(now, c.send_at())
        t = c.on_send(now)
        tokens, at = min(1.0, tokens + (now + 0.01 - at) * rate), now + 0.01
        if tokens >= 1:
            tokens -= 1
            c.on_success(t, 0.02, now + 0.02, in_flight=0)
        else:
            c.on_throttle(t, now + 0.02)
        now += 0.001
    return now


def test_probes_far_below_where_they_found_the_limit_come_at_the_shortest_interval() -> None:
    """Probes that keep finding the limit come less often. Others then take the whole
    bucket for a few seconds, and the rate falls far below it: those probes say nothing
    of this rate, and when the others let go, probes come at their shortest interval."""
    c = Controller(ControllerProfile())
    now = _against_bucket(c, 0.0, 30.0, 100.0)
    shortest = max(c.profile.probe_interval, c.profile.probe_rounds * c._rtt())
    assert c._probe_interval() >= 4 * shortest, "probes met the limit often"
    _against_bucket(c, now, now + 2.0, 0.0)
    assert c.rate is not None and c.rate < 40.0, c.rate
    assert c._probe_interval() == pytest.approx(shortest)


def test_bad_headroom_is_refused() -> None:
    with pytest.raises(ValueError):
        Controller(ControllerProfile(), headroom=1.0)


def test_max_window_bounds_the_cap() -> None:
    c = Controller(ControllerProfile().bounded(max_window=4))
    c.on_success(c.on_send(0.0), 0.1, 0.1, in_flight=1)
    assert c.limit == 4


def test_virtual_runtime_runs_work_half_way_and_answers_after_the_latency() -> None:
    rt = VirtualRuntime(latency=lambda: 1.0)
    seen: list[tuple[str, float]] = []
    rt.submit(lambda: seen.append(("work", rt.clock())) or 7, lambda r: seen.append(("done", r)))
    cond = threading.Condition()
    with cond:
        rt.wait(cond, 10.0)
        rt.wait(cond, 10.0)
    assert seen == [("work", 0.5), ("done", 7)]
    assert rt.clock() == 1.0
    with cond:
        rt.wait(cond, 2.0)  # nothing due: the clock moves by the timeout
    assert rt.clock() == 3.0


def test_a_call_given_up_before_it_leaves_is_never_sent() -> None:
    """A worker that reaches a call after its deadline drops it: no late, phantom call."""
    from swarm_cli.engine import Engine
    from swarm_cli.outage import Outage
    from swarm_cli.outcome import Kind, Outcome
    from swarm_cli.rto import FixedTimeout

    sent: list[list[str]] = []

    def action(ids: list[str]) -> dict[str, Outcome]:
        sent.append(list(ids))
        return dict.fromkeys(ids, Outcome(Kind.SUCCEEDED))

    # Every call would reach the API two seconds after it leaves; the deadline is one.
    runtime = VirtualRuntime(latency=lambda: 4.0)
    engine = Engine(
        action,
        Controller(ControllerProfile()),
        max_attempts=2,
        timeouts=FixedTimeout(1.0),
        outage=Outage(max_outage=30.0),
        backoff=lambda n: 0.0,
        runtime=runtime,
    )
    result = engine.run(["i-00000001"])
    assert sent == []
    assert result.counts["pending"] == 1


def test_probes_grow_while_they_find_room_and_step_back_at_the_limit() -> None:
    c = Controller(ControllerProfile())
    t = c.on_send(0.0)
    c.on_success(t, 0.1, 0.1, in_flight=1)
    t = c.on_send(0.1)
    c.on_throttle(t, 0.2)  # the burst is spent: paced from here
    assert c.phase == "paced" and c.rate is not None
    now, rates = 0.2, [c.rate]
    while now < 5.0:  # every call goes through: room above the pace
        now = max(now, c.send_at())
        t = c.on_send(now)
        c.on_success(t, 0.1, now + 0.1, in_flight=1)
        if c.rate != rates[-1]:
            rates.append(c.rate)
    steps = [b / a for a, b in itertools.pairwise(rates) if b > a]
    assert len(steps) >= 3, rates
    assert steps[1] > steps[0] and steps[2] > steps[1], steps  # 1.1x, then 1.2x, 1.4x ...
    assert max(steps) <= 2.0 + 1e-9
    before = c.rate
    # The limit: after the next probe, answers come back throttled.
    while c.rate == before:
        now = max(now, c.send_at())
        t = c.on_send(now)
        c.on_success(t, 0.1, now + 0.1, in_flight=1)
    probed = c.rate
    for _ in range(3):
        now = max(now, c.send_at())
        t = c.on_send(now)
        c.on_throttle(t, now + 0.1)
    assert c.rate < probed, "a probe that finds the limit steps back"


def test_an_endpoint_that_queues_is_not_flooded_in_startup() -> None:
    """A server that answers 100 calls a second, each after 20 ms plus its queue: with
    nothing throttled, more calls in flight only lengthen the queue, and calls that wait
    past their time-out are sent again."""
    from swarm_cli.engine import Engine
    from swarm_cli.events import Event, TimedOut
    from swarm_cli.outcome import Kind, Outcome

    holder: list[Engine] = []
    # It serves 100 calls a second: past the two that 20 ms carries, each call in flight
    # waits its turn (10 ms more).
    # The clock starts where a monotonic one might: nothing may count from zero.
    runtime = VirtualRuntime(
        latency=lambda: 0.02 + max(0, holder[0].in_flight - 2) / 100, start=50_000.0
    )

    def action(ids: list[str]) -> dict[str, Outcome]:
        return dict.fromkeys(ids, Outcome(Kind.SUCCEEDED))

    timed_out: list[Event] = []
    engine = Engine(
        action,
        Controller(ControllerProfile()),
        batch_size=1,
        runtime=runtime,
        subscribers=[lambda e: timed_out.append(e) if isinstance(e, TimedOut) else None],
    )
    holder.append(engine)
    result = engine.run([f"i-{k:08x}" for k in range(3000)])
    assert result.counts["succeeded"] == 3000
    assert len(timed_out) <= 30, f"{len(timed_out)} calls timed out"
    assert result.elapsed <= 1.2 * 3000 / 100  # virtual seconds: near what it serves


def _startup(c: Controller, calls: int) -> tuple[list[int], float]:
    """The canary answered at 0.1 s; ``calls`` more sent 5 ms apart, all on their way."""
    c.on_success(c.on_send(0.0), 0.1, 0.1, in_flight=1)
    return [c.on_send(0.1 + 0.005 * k) for k in range(calls)], 0.1 + 0.005 * calls


def _after(c: Controller, now: float, calls: int, every: int) -> float:
    """``calls`` sent at the pace from ``now`` on, each answered after 0.1 s; one in
    ``every`` throttled (0: none). Returns the time of the last answer."""
    for k in range(calls):
        now = max(now, c.send_at())
        t = c.on_send(now)
        if every and k % every == every - 1:
            c.on_throttle(t, now + 0.1)
        else:
            c.on_success(t, 0.1, now + 0.1, in_flight=1)
        if c.phase == "startup":
            break
    return now + 0.1


def test_a_throttle_in_startup_that_a_slower_pace_does_not_reduce_resumes_it() -> None:
    """A random throttle: the calls on their way go through, and those sent after it at
    half the pace throttle about as often. The startup goes on from the window it had,
    and the share of throttles that proved random is the noise floor."""
    c = Controller(ControllerProfile())
    tickets, now = _startup(c, 24)
    for t in tickets[:4]:
        c.on_success(t, 0.1, now, in_flight=20)
    window = c.limit
    c.on_throttle(tickets[4], now)
    assert c.phase == "paced" and c.throttled
    for k, t in enumerate(tickets[5:]):  # one in five of those on their way throttled
        if k % 5 == 4:
            c.on_throttle(t, now)
        else:
            c.on_success(t, 0.1, now, in_flight=10)
    assert c.phase == "paced"
    _after(c, now + 0.2, 40, every=5)
    assert c.phase == "startup"
    assert c.rate is None and not c.throttled, "what the random throttle taught is forgotten"
    assert c.limit == window
    assert 0.1 <= c.noise.floor <= 0.3


def test_a_throttle_in_startup_followed_by_throttles_ends_it() -> None:
    c = Controller(ControllerProfile())
    tickets, now = _startup(c, 24)
    for t in tickets[:4]:
        c.on_success(t, 0.1, now, in_flight=20)
    for t in tickets[4:]:  # the bucket is empty: the calls on their way come back throttled
        c.on_throttle(t, now)
    _after(c, now + 0.2, 40, every=5)
    assert c.phase == "paced" and c.rate is not None


def test_throttles_to_the_calls_on_their_way_bring_the_pace_down_to_what_gets_through() -> None:
    """A burst spent at the startup's pace (200 calls/s): the calls still on their way
    when the first throttle came all come back throttled. Each one lowers the pace toward
    the share of them the refill let through, down to a call per round trip, rather than
    leaving it at half the startup's pace until a round trip of answers is in."""
    c = Controller(ControllerProfile())
    tickets, now = _startup(c, 24)
    for t in tickets[:4]:
        c.on_success(t, 0.1, now, in_flight=20)
    c.on_throttle(tickets[4], now)
    assert c.rate is not None
    halved = c.rate
    for t in tickets[5:]:
        c.on_throttle(t, now)
    assert c.rate <= halved / 5
    assert c.rate >= 1 / 0.1  # a call per round trip


def test_calls_on_their_way_that_mostly_go_through_keep_the_pace() -> None:
    """One throttle among calls that otherwise go through: the startup's throttle is
    judged (it may be random), and the pace stays where the first throttle set it."""
    c = Controller(ControllerProfile())
    tickets, now = _startup(c, 24)
    c.on_throttle(tickets[0], now)
    assert c.rate is not None
    halved = c.rate
    for k, t in enumerate(tickets[1:12]):
        if k % 5 == 4:
            c.on_throttle(t, now)
        else:
            c.on_success(t, 0.1, now, in_flight=10)
    assert c.rate == pytest.approx(halved)


def test_a_bucket_that_a_slower_pace_no_longer_empties_ends_the_startup() -> None:
    """Met a little faster than it refills, a bucket throttles a few of the calls on
    their way, and none at half the pace: the startup is over."""
    c = Controller(ControllerProfile())
    tickets, now = _startup(c, 24)
    for t in tickets[:4]:
        c.on_success(t, 0.1, now, in_flight=20)
    c.on_throttle(tickets[4], now)
    for k, t in enumerate(tickets[5:]):
        if k % 6 == 5:
            c.on_throttle(t, now)
        else:
            c.on_success(t, 0.1, now, in_flight=10)
    _after(c, now + 0.2, 60, every=0)
    assert c.phase == "paced"


def test_after_a_random_throttle_only_a_share_of_throttles_ends_the_startup() -> None:
    c = Controller(ControllerProfile())
    tickets, now = _startup(c, 24)
    c.on_throttle(tickets[0], now)
    for k, t in enumerate(tickets[1:]):
        if k % 5 == 4:
            c.on_throttle(t, now)
        else:
            c.on_success(t, 0.1, now, in_flight=10)
    now = _after(c, now + 0.2, 40, every=5)
    assert c.phase == "startup"
    # One throttle in five goes on: what the endpoint throttles at random, not the bucket.
    more = [c.on_send(now + 0.001 * k) for k in range(200)]
    answers = iter(more)
    for k in range(60):
        t = next(answers)
        if k % 5 == 4:
            c.on_throttle(t, now)
        else:
            c.on_success(t, 0.1, now, in_flight=10)
        assert c.phase == "startup", k
    # The bucket runs dry: a run of throttles ends it within a dozen answers.
    for _ in range(12):
        c.on_throttle(next(answers), now)
        if c.phase == "paced":
            break
    assert c.phase == "paced"


def test_without_a_check_the_first_throttle_ends_the_startup_for_good() -> None:
    c = Controller(ControllerProfile(check_answers=0))
    tickets, now = _startup(c, 30)
    c.on_throttle(tickets[0], now)
    for t in tickets[1:]:
        c.on_success(t, 0.1, now, in_flight=10)
    _after(c, now + 0.2, 40, every=5)
    assert c.phase == "paced"


def test_pacer_may_let_the_next_call_go_sooner_but_never_later() -> None:
    p = Pacer()
    p.on_send(10.0, size=1, rate=0.25)
    assert p.next_at() == pytest.approx(14.0)
    p.sooner(11.0)
    assert p.next_at() == pytest.approx(11.0)
    p.sooner(13.0)
    assert p.next_at() == pytest.approx(11.0)


def test_noise_floor_takes_a_share_learned_elsewhere_up_to_its_most() -> None:
    n = NoiseFloor()
    n.learn(0.2)
    assert n.floor == pytest.approx(0.2)
    n.learn(0.1)
    assert n.floor == pytest.approx(0.2)
    n.learn(0.9)
    assert n.floor == pytest.approx(0.5)


def _slow_refill(profile: ControllerProfile) -> tuple[Controller, float]:
    """A minute against a bucket of one token refilled every 4 s, calls answered after
    20 ms; then one more call throttled, nothing else on its way. Returns the controller
    and that answer's time."""
    c = Controller(profile)
    tokens, at, now = 1.0, 0.0, 0.0
    while now < 60.0:
        now = max(now, c.send_at())
        t = c.on_send(now)
        tokens, at = min(1.0, tokens + (now + 0.01 - at) / 4), now + 0.01
        if tokens >= 1:
            tokens -= 1
            c.on_success(t, 0.02, now + 0.02, in_flight=0)
        else:
            c.on_throttle(t, now + 0.02)
        now += 0.02
    now = max(now, c.send_at())
    c.on_throttle(c.on_send(now), now + 0.02)
    return c, now + 0.02


def test_after_a_throttle_at_a_slow_refill_the_next_call_goes_sooner() -> None:
    """The token the call missed comes within a gap: waiting a whole gap for the next
    call makes the run wait up to a gap for its last ID."""
    c, now = _slow_refill(ControllerProfile())
    assert c.phase == "paced" and 2.0 < c.pace < 8.0, c.pace
    assert c.send_at() - now == pytest.approx(c.pace * c.profile.retry_share, rel=0.05)
    whole, then = _slow_refill(ControllerProfile(retry_share=0))
    assert whole.send_at() - then == pytest.approx(whole.pace, rel=0.05)


def test_a_rate_left_low_by_others_climbs_when_they_stop() -> None:
    """At a slow refill (what other clients leave of a bucket) answers are rare; when the
    others stop and every call goes through, probes keep to their clock rather than wait
    for answers that come once every few seconds."""
    c, now = _slow_refill(ControllerProfile())
    assert c.rate is not None and c.rate < 0.3, c.rate
    low, start = c.rate, now
    while c.rate < 8 * low and now < start + 120:
        now = max(now, c.send_at())
        t = c.on_send(now)
        c.on_success(t, 0.02, now + 0.02, in_flight=0)
        now += 0.02
    # Four answers per probe: 72 s to climb eightfold; two clean ones: 39 s.
    assert now - start < 50, (c.rate, now - start)


def test_a_slower_pace_that_throttled_few_is_asked_again_before_it_ends_the_startup() -> None:
    """One throttle in sixteen at half the pace leaves doubt (a random share comes in
    runs): sixteen more answers judge, and one in four of them throttled."""
    c = Controller(ControllerProfile())
    tickets, now = _startup(c, 24)
    for t in tickets[:4]:
        c.on_success(t, 0.1, now, in_flight=20)
    c.on_throttle(tickets[4], now)
    for k, t in enumerate(tickets[5:]):
        if k % 5 == 4:
            c.on_throttle(t, now)
        else:
            c.on_success(t, 0.1, now, in_flight=10)
    now = _after(c, now + 0.2, 16, every=16)
    assert c.phase == "paced", "one in sixteen does not decide it yet"
    _after(c, now, 16, every=4)
    assert c.phase == "startup"


def test_throttles_to_calls_sent_in_startup_do_not_lower_the_rate_a_queue_set() -> None:
    """Startup ends because answers slowed to several times the fastest (a queue at the
    endpoint); calls sent at the startup's pace and throttled afterwards say nothing of
    the rate it then set: each one alone would otherwise cut it to a call per round trip."""
    c = Controller(ControllerProfile())
    c.on_success(c.on_send(0.0), 0.1, 0.1, 0)  # the canary
    now, early = 0.1, []
    while c.phase == "startup":
        tickets = [c.on_send(now) for _ in range(int(c.cwnd))]
        early.extend(tickets[: len(tickets) // 2])
        latency = 0.1 if now < 0.5 else 0.5  # answers slow down: a queue builds
        for t in tickets[len(tickets) // 2 :]:
            now += 0.01
            c.on_success(t, latency, now, len(tickets))
            if c.phase != "startup":
                break
    assert c.rate is not None
    rate = c.rate
    for t in early[:8]:  # throttles to calls sent in startup, now answered
        now += 0.05
        c.on_throttle(t, now)
    # At most what the successes between those throttles measured: far above a call per
    # round trip (10/s).
    assert c.rate >= rate / 4, f"{c.rate} after {rate}"


def test_a_throttle_after_a_startup_a_queue_ended_halves_the_rate_until_measured() -> None:
    """Startup ends because answers slowed (a queue at the endpoint), before any throttle;
    then calls sent at the rate it set meet an empty bucket. Nothing measured the refill
    yet: the estimate from throttles with no success between them is a call per round
    trip, and taking it would cut the rate a hundredfold. Halve per round instead, as
    after a first throttle in startup, until answers cover a round trip."""
    c = Controller(ControllerProfile())
    c.on_success(c.on_send(0.0), 0.1, 0.1, 0)  # the canary
    now = 0.1
    while c.phase == "startup":
        tickets = [c.on_send(now) for _ in range(int(c.cwnd))]
        latency = 0.1 if now < 0.5 else 0.5  # answers slow down: a queue builds
        for t in tickets:
            now += 0.002
            c.on_success(t, latency, now, len(tickets))
            if c.phase != "startup":
                break
    assert c.rate is not None and not c.throttled
    rate = c.rate
    now = max(now, c.send_at())
    late = [c.on_send(now + 0.001 * k) for k in range(20)]  # sent at that rate
    now += 0.5
    for t in late[:5]:  # the bucket ran dry under them
        now += 0.001
        c.on_throttle(t, now)
    assert c.rate >= rate / 2, f"{c.rate} after {rate}"


def _drive(
    c: Controller,
    now: float,
    until: float,
    latency: float,
    through: Callable[[float], bool] = lambda sent: True,
) -> float:
    """Calls sent whenever the window and the pace allow, each answered ``latency``
    later: a success if ``through(sent at)``, else a throttle. Returns the time reached."""
    answers: list[tuple[float, int, float]] = []
    while now < until:
        if len(answers) < c.limit and c.send_at() <= now:
            heapq.heappush(answers, (now + latency, c.on_send(now), now))
            continue
        room = c.send_at() if len(answers) < c.limit else math.inf
        now = max(now, min(room, answers[0][0] if answers else math.inf))
        while answers and answers[0][0] <= now:
            at, ticket, sent = heapq.heappop(answers)
            if through(sent):
                c.on_success(ticket, at - sent, at, len(answers))
            else:
                c.on_throttle(ticket, at)
    return now


def test_a_throttle_at_a_rate_a_lagging_endpoint_set_is_a_decrease_not_a_probes_step_back() -> None:
    """Probes doubled the rate; then answers slowed to six times the fastest and the rate
    fell to what the endpoint answered. The next throttle meets that rate: it is lowered
    as any measured rate is (to no less than 0.7 of it), not divided by the last probe's
    step (2), which was taken from a rate long gone."""
    c = Controller(ControllerProfile())
    c.on_success(c.on_send(0.0), 0.1, 0.1, in_flight=1)
    c.on_throttle(c.on_send(0.1), 0.2)  # paced from here
    now = _drive(c, 0.2, 2.0, 0.1)
    probed = c.rate
    assert probed is not None and probed > 200  # the probes found room: steps of up to 2x
    now = _drive(c, now, 3.0, 0.6)  # the endpoint lags: answers take 0.6 s
    lagging = c.rate
    assert lagging is not None and lagging < probed / 2
    mark = now
    _drive(c, now, now + 1.0, 0.6, through=lambda sent: sent < mark)  # the bucket runs dry
    assert c.rate is not None
    assert c.rate >= ControllerProfile().most_decrease * lagging - 1e-9, (c.rate, lagging)


def test_a_stall_of_the_client_itself_is_not_an_endpoint_falling_behind() -> None:
    """On a starved machine the whole process stops for a second and a half: nothing is
    sent, and the one call in flight is answered late. Few answers in that interval, and
    a slow one, but the window never filled: the endpoint was not what held them back,
    and the pace stays where it was."""
    c = Controller(ControllerProfile())
    c.on_success(c.on_send(0.0), 0.1, 0.1, in_flight=1)
    c.on_throttle(c.on_send(0.1), 0.2)  # paced from here
    now = 0.2
    for _ in range(40):  # one call at a time, each answered in 0.07 s
        now = max(now, c.send_at())
        c.on_success(c.on_send(now), 0.07, now + 0.07, in_flight=1)
        now += 0.07
    rate = c.rate
    assert rate is not None
    ticket = c.on_send(now)
    now += 1.6  # the process stalls: nothing leaves, the answer is read late
    c.on_success(ticket, 1.6, now, in_flight=1)
    for _ in range(6):
        now = max(now, c.send_at())
        c.on_success(c.on_send(now), 0.07, now + 0.07, in_flight=1)
        now += 0.07
    assert c.rate >= ControllerProfile().most_decrease * rate, (c.rate, rate)


def test_throttles_too_frequent_for_a_round_trip_span_still_end_the_wait_for_one() -> None:
    """After the bucket ran dry the rate is a guess until answers between two throttles
    cover a round trip. With one call in five throttled at random, 200 calls a second
    and 1 s answers, no span with enough successes lasts a round trip (twenty calls
    take a tenth of a second): the guess would stay for the whole run, cut once per
    round. Three round trips of answers since it ran dry stand for one."""
    c = Controller(replace(ControllerProfile(), check_answers=0))
    c.on_success(c.on_send(0.0), 1.0, 1.0, in_flight=1)
    sends = [1.0 + k / 200 for k in range(1200)]  # 200 a second for six seconds
    events = sorted(
        [(t, 0, k) for k, t in enumerate(sends)] + [(t + 1.0, 1, k) for k, t in enumerate(sends)]
    )
    tickets: dict[int, int] = {}
    waiting = []
    for at, answer, k in events:
        if not answer:
            tickets[k] = c.on_send(at)
        elif k % 5 == 4:
            c.on_throttle(tickets[k], at)
        else:
            c.on_success(tickets[k], 1.0, at, in_flight=200)
        if answer and k % 5 == 4:
            waiting.append((at, c._until_ready))
    first = waiting[0][0]
    assert all(w for at, w in waiting if at < first + 2.5)  # a guess for a while
    assert not any(w for at, w in waiting if at > first + 3.5)


def test_while_every_call_throttles_the_gap_between_calls_stops_growing() -> None:
    """Ten minutes of others holding the whole bucket: the pace sank with the time since
    the last success (a call every 53 s at 55 s), so the first call after such a stretch
    came minutes after it ended. A throttled call takes no token."""
    c = Controller(ControllerProfile())
    now, sent = 0.0, []
    while now < 600.0:
        now = max(now, c.send_at())
        ticket = c.on_send(now)
        sent.append(now)
        now += 0.05
        c.on_throttle(ticket, now)
    gaps = [b - a for a, b in itertools.pairwise(sent)]
    assert max(gaps) <= MOST_GAP + 0.1
    assert min(gaps[-10:]) >= 1.0  # it did slow down: far less than a call a second
