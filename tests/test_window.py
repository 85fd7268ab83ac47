from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from swarm_cli.window import RATE, RENO, SEED, Window, WindowProfile


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def advance(self, seconds: float) -> float:
        self.now += seconds
        return self.now


def round_trip(window: Window, clock: FakeClock, latency: float = 0.05) -> list[float]:
    """Send a full window of calls, answer them all; return cwnd after each answer."""
    tickets = [window.on_send() for _ in range(window.limit)]
    clock.advance(latency)
    seen = []
    for t in tickets:
        # The engine refills the window as it grows, so the whole round trip counts as in use.
        window.on_success(t, latency, clock.now, len(tickets))
        seen.append(window.cwnd)
    return seen


def test_seed_slow_start_doubles_per_round_trip_to_sixteen() -> None:
    clock, w = FakeClock(), Window(SEED)
    sizes = [w.limit]
    for _ in range(4):
        round_trip(w, clock)
        sizes.append(w.limit)
    assert sizes == [1, 2, 4, 8, 16]
    assert w.phase == "avoidance"


def test_seed_additive_increase_at_most_once_per_dampening_interval() -> None:
    clock, w = FakeClock(), Window(SEED)
    for _ in range(4):
        round_trip(w, clock)
    assert w.cwnd == 16
    clock.advance(0.1)
    # A whole round trip of 16 fast answers at the same instant adds 5 once.
    t = [w.on_send() for _ in range(16)]
    for ticket in t:
        w.on_success(ticket, 0.05, clock.now, 16)
    assert w.cwnd == 21
    clock.advance(0.05)
    w.on_success(w.on_send(), 0.05, clock.now, 21)
    assert w.cwnd == 21, "a change 50 ms after the last one is dampened"
    clock.advance(0.05)
    w.on_success(w.on_send(), 0.05, clock.now, 21)
    assert w.cwnd == 26


def test_seed_slow_answers_do_not_grow_the_window() -> None:
    clock, w = FakeClock(), Window(SEED)
    for _ in range(4):
        round_trip(w, clock)
    clock.advance(1.0)
    w.on_success(w.on_send(), 0.3, clock.now, 16)
    assert w.cwnd == 16


def test_seed_throttle_halves_and_floors_at_minimum() -> None:
    clock, w = FakeClock(), Window(SEED.bounded(min_window=3))
    for _ in range(4):
        round_trip(w, clock)
    trajectory = []
    for _ in range(5):
        clock.advance(0.1)
        w.on_throttle(w.on_send(), clock.now)
        trajectory.append(w.cwnd)
    assert trajectory == [8.0, 4.0, 3.0, 3.0, 3.0]
    assert w.phase == "avoidance"


def test_seed_error_in_slow_start_collapses_to_one() -> None:
    clock, w = FakeClock(), Window(SEED)
    round_trip(w, clock)
    round_trip(w, clock)
    assert w.cwnd == 4
    w.on_error(w.on_send(), clock.now)
    assert w.cwnd == 1
    assert w.phase == "slow-start"
    assert w.ssthresh == 16


def test_seed_server_error_after_slow_start_is_ignored() -> None:
    clock, w = FakeClock(), Window(SEED)
    for _ in range(4):
        round_trip(w, clock)
    clock.advance(1)
    assert not w.on_error(w.on_send(), clock.now)
    assert w.cwnd == 16


def test_reno_throttle_burst_from_one_round_trip_halves_once() -> None:
    clock, w = FakeClock(), Window(RENO)
    for _ in range(4):
        round_trip(w, clock)
    for _ in range(8):
        clock.advance(0.1)
        round_trip(w, clock)
    before = w.cwnd
    tickets = [w.on_send() for _ in range(w.limit)]
    clock.advance(0.05)
    for t in tickets:
        w.on_throttle(t, clock.now)
    assert w.cwnd == before / 2
    assert w.ssthresh == before / 2
    # A call sent after the decrease carries news: it may halve again.
    clock.advance(0.001)
    w.on_throttle(w.on_send(), clock.now)
    assert w.cwnd == before / 4


def test_seed_throttle_burst_in_one_instant_halves_once_by_dampening() -> None:
    clock, w = FakeClock(), Window(SEED)
    for _ in range(4):
        round_trip(w, clock)
    clock.advance(0.2)
    for t in [w.on_send() for _ in range(16)]:
        w.on_throttle(t, clock.now)
    assert w.cwnd == 8


def test_reno_gate_follows_lowest_latency() -> None:
    clock, w = FakeClock(), Window(RENO)
    for _ in range(4):
        round_trip(w, clock, latency=0.3)
    assert w.cwnd == 16
    assert w.gate() == 0.6
    clock.advance(0.1)
    w.on_success(w.on_send(), 0.35, clock.now, 16)
    assert w.cwnd == 21
    seed = Window(SEED)
    for _ in range(4):
        round_trip(seed, clock, latency=0.3)
    clock.advance(0.1)
    seed.on_success(seed.on_send(), 0.35, clock.now, 16)
    assert seed.cwnd == 16, "the fixed 100 ms gate never opens at 300 ms"


def test_reno_probes_gently_once_a_throttle_has_shown_the_limit() -> None:
    clock, w = FakeClock(), Window(RENO)
    for _ in range(4):
        round_trip(w, clock)
    clock.advance(0.1)
    w.on_success(w.on_send(), 0.05, clock.now, 16)
    assert w.cwnd == 21, "+5 while no throttle has been seen"
    w.on_throttle(w.on_send(), clock.now)
    assert w.cwnd == 10.5
    steps = []
    for _ in range(3):
        clock.advance(0.1)
        w.on_success(w.on_send(), 0.05, clock.now, 11)
        steps.append(w.cwnd)
    assert steps == [11.5, 12.5, 13.5]


def test_reno_grows_only_while_window_is_used() -> None:
    clock, w = FakeClock(), Window(RENO)
    for _ in range(4):
        round_trip(w, clock)
    clock.advance(0.5)
    assert not w.on_success(w.on_send(), 0.05, clock.now, in_flight=7)
    assert w.on_success(w.on_send(), 0.05, clock.now, in_flight=8)
    assert w.cwnd == 21


def test_reno_throttle_in_slow_start_sets_ssthresh_to_half() -> None:
    clock, w = FakeClock(), Window(RENO)
    for _ in range(3):
        round_trip(w, clock)
    assert w.cwnd == 8
    w.on_throttle(w.on_send(), clock.now)
    assert (w.cwnd, w.ssthresh, w.phase) == (1, 4, "slow-start")
    sizes = []
    for _ in range(3):
        round_trip(w, clock)
        sizes.append(w.limit)
    assert sizes == [2, 4, 4]
    assert w.phase == "avoidance"


def test_reno_paces_sends_when_throttled_at_the_floor() -> None:
    clock, w = FakeClock(), Window(RENO)
    w.on_success(w.on_send(clock.now), 0.05, clock.advance(0.05), 1)
    assert w.cwnd == 2
    w.on_throttle(w.on_send(clock.now), clock.advance(0.05))
    assert (w.cwnd, w.pace) == (1, 0), "first the window halves to the floor"
    gaps = []
    for _ in range(3):
        w.on_throttle(w.on_send(clock.now), clock.advance(0.05))
        gaps.append(round(w.pace, 4))
        assert w.send_at() == clock.now + w.pace
    assert gaps == [0.05, 0.1, 0.2]
    assert w.cwnd == 1
    # Successes shrink the gap and do not grow the window until pacing ends.
    paces = []
    while w.pace:
        w.on_success(w.on_send(clock.now), 0.05, clock.advance(0.05), 1)
        paces.append(round(w.pace, 4))
        assert w.cwnd == 1
    assert paces[0] == 0.18 and len(paces) == 20  # 0.2 * 0.9**20 < 0.05 / 2
    assert w.send_at() == float("-inf")
    w.on_success(w.on_send(clock.now), 0.05, clock.advance(0.05), 1)
    assert w.cwnd == 2


def test_seed_never_paces() -> None:
    clock, w = FakeClock(), Window(SEED)
    for _ in range(5):
        w.on_throttle(w.on_send(clock.now), clock.advance(0.2))
    assert w.pace == 0 and w.send_at() == float("-inf")


def test_max_window_caps_growth() -> None:
    clock, w = FakeClock(), Window(SEED.bounded(max_window=6))
    for _ in range(5):
        clock.advance(0.2)
        round_trip(w, clock)
    assert w.cwnd == 6


def test_bounds_are_checked() -> None:
    import pytest

    with pytest.raises(ValueError):
        SEED.bounded(min_window=0)
    with pytest.raises(ValueError):
        SEED.bounded(min_window=10, max_window=5)


events = st.lists(
    st.tuples(
        st.sampled_from(["ok", "slow", "throttle", "error"]),
        st.floats(min_value=0, max_value=0.5),
        st.integers(min_value=0, max_value=40),
    ),
    max_size=300,
)


@given(
    events,
    st.sampled_from([SEED, RENO, RATE]),
    st.integers(min_value=1, max_value=8),
    st.integers(min_value=8, max_value=100),
)
def test_window_stays_within_bounds(
    script: list[tuple[str, float, int]], base: WindowProfile, lo: int, hi: int
) -> None:
    w = Window(base.bounded(min_window=lo, max_window=hi))
    now = 0.0
    for kind, dt, in_flight in script:
        now += dt
        ticket = w.on_send()
        if kind == "ok":
            w.on_success(ticket, 0.02, now, in_flight)
        elif kind == "slow":
            w.on_success(ticket, 0.4, now, in_flight)
        elif kind == "throttle":
            w.on_throttle(ticket, now)
        else:
            w.on_error(ticket, now)
        assert lo <= w.cwnd <= hi
        assert lo <= w.limit <= hi


@given(st.integers(min_value=2, max_value=200), st.integers(min_value=0, max_value=30))
def test_burst_of_throttles_from_one_round_trip_halves_once(k: int, grow: int) -> None:
    w = Window(RENO)
    now = 0.0
    for _ in range(grow):
        now += 0.2
        w.on_success(w.on_send(), 0.01, now, 10_000)
    tickets = [w.on_send() for _ in range(k)]
    start = w.cwnd
    for t in tickets:
        now += 0.5  # however spread out in time they arrive
        w.on_throttle(t, now)
    expected = 1.0 if start < 16 else max(start * 0.5, 1.0)
    assert w.cwnd == expected


def test_reno_timeouts_halve_once_per_round_trip_like_throttles() -> None:
    clock = FakeClock()
    w = Window(RENO)
    for _ in range(5):
        round_trip(w, clock)
    assert w.phase == "avoidance"
    before = w.cwnd
    tickets = [w.on_send() for _ in range(w.limit)]
    clock.advance(1.0)
    changed = [w.on_timeout(t, clock.now) for t in tickets]
    assert changed.count(True) == 1
    assert w.cwnd == before / 2


def test_seed_timeouts_follow_the_seed_error_rule() -> None:
    clock = FakeClock()
    w = Window(SEED)
    for _ in range(5):
        round_trip(w, clock)
    cwnd = w.cwnd
    assert not w.on_timeout(w.on_send(), clock.advance(1.0))  # ignored after slow start
    assert w.cwnd == cwnd
    fresh = Window(SEED)
    round_trip(fresh, clock)
    assert fresh.on_timeout(fresh.on_send(), clock.advance(1.0))  # collapses in slow start
    assert fresh.cwnd == 1


def test_restart_after_an_outage_slow_starts_without_pacing() -> None:
    clock = FakeClock()
    w = Window(RENO)
    for _ in range(3):
        w.on_throttle(w.on_send(), clock.advance(0.1))  # at the floor: pacing
    assert w.pace > 0
    w.restart(clock.advance(1.0))
    assert w.pace == 0 and w.cwnd == 1 and w.phase == "slow-start"


def test_reno_gate_follows_an_api_that_slows_down_for_good() -> None:
    clock = FakeClock()
    w = Window(RENO)
    for _ in range(5):
        round_trip(w, clock, latency=0.04)
    assert w.gate() == RENO.latency_gate  # twice 40 ms is under the 100 ms floor
    grown_at_fast = w.cwnd
    # The API now answers in 500 ms: for a while nothing grows, then the gate follows.
    for _ in range(30):
        round_trip(w, clock, latency=0.5)
    assert w.min_latency == 0.5 and w.gate() == 1.0
    assert w.cwnd > grown_at_fast


# --- the seed, clause by clause (DESIGN.md's control loop) ---------------------------


def test_seed_constants_are_the_reference_profile() -> None:
    p = SEED
    assert (p.initial, p.ssthresh, p.increase, p.decrease) == (1.0, 16.0, 5.0, 0.5)
    assert (p.dampening, p.latency_gate, p.min_window, p.max_window) == (0.1, 0.1, 1, 500)
    assert not (p.rate_mode or p.pacing or p.once_per_round_trip or p.require_use)


def test_seed_throttle_in_slow_start_collapses_to_one_and_keeps_ssthresh() -> None:
    clock, w = FakeClock(), Window(SEED)
    for _ in range(3):
        round_trip(w, clock)
    assert w.cwnd == 8
    assert w.on_throttle(w.on_send(), clock.now)
    assert (w.cwnd, w.ssthresh, w.phase) == (1, 16, "slow-start")


def test_seed_a_decrease_starts_the_dampening_interval_for_growth_too() -> None:
    clock, w = FakeClock(), Window(SEED)
    for _ in range(4):
        round_trip(w, clock)
    clock.advance(0.2)
    assert w.on_throttle(w.on_send(), clock.now)
    assert w.cwnd == 8
    assert not w.on_success(w.on_send(), 0.01, clock.advance(0.05), 8), "50 ms after a change"
    assert w.on_success(w.on_send(), 0.01, clock.advance(0.05), 8)
    assert w.cwnd == 13


def test_seed_a_change_to_the_same_value_does_not_restart_the_interval() -> None:
    clock, w = FakeClock(), Window(SEED.bounded(max_window=16))
    for _ in range(4):
        round_trip(w, clock)
    clock.advance(0.2)
    assert not w.on_success(w.on_send(), 0.01, clock.now, 16), "already at the most"
    # The no-op above must not silence a throttle 50 ms later.
    assert w.on_throttle(w.on_send(), clock.advance(0.05))
    assert w.cwnd == 8
    at_floor = Window(SEED)
    at_floor.on_throttle(at_floor.on_send(), clock.advance(0.2))  # 1 -> 1: nothing changes
    assert at_floor.on_success(at_floor.on_send(), 0.01, clock.advance(0.01), 1)


def test_seed_grows_per_round_trip_in_slow_start_whatever_the_latency() -> None:
    clock, w = FakeClock(), Window(SEED)
    round_trip(w, clock, latency=2.0)
    assert w.cwnd == 2, "the latency gate applies above ssthresh only"


# --- adaptive: rate mode once throttles have shown the limit ---------------------------


def _measured_window(headroom: float = 0.0) -> tuple[FakeClock, Window]:
    """An adaptive window that has just gone to rate mode, having seen 40 IDs/s get through."""
    clock, w = FakeClock(), Window(RATE, headroom=headroom)
    for _ in range(3):
        round_trip(w, clock)
    w.on_throttle(w.on_send(clock.now), clock.now)  # the burst is spent: one at a time
    assert (w.cwnd, w.phase) == (1, "slow-start")
    for _ in range(20):  # 0.5 s of answers, 40 IDs/s
        w.on_success(w.on_send(clock.now, size=2), 0.04, clock.advance(0.05), 1, size=2)
    w.on_throttle(w.on_send(clock.now, size=2), clock.now)
    return clock, w


def test_adaptive_paces_a_little_under_what_got_through() -> None:
    clock, w = _measured_window()
    assert w.phase == "paced"
    assert w.rate is not None and abs(w.rate - 0.9 * 40) < 1.0
    assert abs(w.pace - 2 / w.rate) < 1e-9, "a call of 2 IDs waits 2 / rate"
    assert w.send_at() > clock.now


def test_adaptive_rate_drops_once_per_round_trip() -> None:
    clock, w = _measured_window()
    early = [w.on_send(clock.now, size=2) for _ in range(5)]
    w.on_throttle(w.on_send(clock.now, size=2), clock.advance(0.05))
    rate = w.rate
    for ticket in early:  # sent before the decrease: no news
        w.on_throttle(ticket, clock.advance(0.01))
    assert w.rate == rate


def test_adaptive_probes_up_additively_on_a_clock() -> None:
    clock, w = _measured_window()
    assert w.rate is not None
    start, rates = w.rate, []
    for _ in range(42):  # 2.1 s of answers, no throttle
        w.on_success(w.on_send(clock.now, size=2), 0.04, clock.advance(0.05), 1, size=2)
        rates.append(w.rate)
    steps = sorted({round(b - a, 6) for a, b in zip([start, *rates], rates, strict=False)} - {0})
    assert len(steps) == 1, "every probe adds the same step"
    assert steps[0] == 0.05 * w.found, "5% of the rate found"
    assert rates[-1] == start + 4 * steps[0], "one probe per half second"


def test_adaptive_headroom_settles_under_the_rate_found() -> None:
    clock, w = _measured_window(headroom=0.2)
    assert w.rate is not None and w.rate <= 0.8 * w.found + 1e-9
    for _ in range(200):  # 10 s without a throttle
        w.on_success(w.on_send(clock.now, size=2), 0.04, clock.advance(0.05), 1, size=2)
        assert w.rate <= 0.8 * w.found + 1e-9


def test_adaptive_timeout_in_rate_mode_halves_the_rate() -> None:
    clock, w = _measured_window()
    rate = w.rate
    assert rate is not None
    w.on_timeout(w.on_send(clock.now, size=2), clock.advance(3.0))
    assert w.rate == rate / 2


def test_restart_leaves_rate_mode() -> None:
    clock, w = _measured_window()
    w.restart(clock.advance(1.0))
    assert w.rate is None and w.pace == 0 and w.phase == "slow-start" and not w.throttled


def test_headroom_is_checked() -> None:
    import pytest

    for bad in (-0.1, 1.0):
        with pytest.raises(ValueError):
            Window(RATE, headroom=bad)


def test_adaptive_does_not_probe_a_rate_nothing_uses() -> None:
    clock, w = _measured_window()
    w.on_success(w.on_send(clock.now, size=2), 0.04, clock.advance(1.0), 1, size=2)
    rate = w.rate  # that call left at its pace: the probe was due
    for _ in range(40):  # calls leave a second apart, far slower than the pace allows
        w.on_success(w.on_send(clock.now, size=2), 0.04, clock.advance(1.0), 1, size=2)
    assert w.rate == rate


def test_adaptive_growth_follows_the_smoothed_latency_not_one_quick_answer() -> None:
    def after_a_quick_answer(profile: WindowProfile) -> float:
        clock, w = FakeClock(), Window(profile)
        for _ in range(4):
            round_trip(w, clock, latency=0.05)
        for _ in range(20):  # the API queues: answers now take 0.4 s
            clock.advance(0.1)
            w.on_success(w.on_send(), 0.4, clock.now, w.limit)
        before = w.cwnd
        clock.advance(0.1)
        w.on_success(w.on_send(), 0.05, clock.now, w.limit)
        return w.cwnd - before

    assert after_a_quick_answer(RATE) == 0
    assert after_a_quick_answer(RENO) == 5, "one answer under the gate grows reno's window"


def test_adaptive_slow_start_takes_fewer_round_trips_when_they_are_long() -> None:
    def sizes(profile: WindowProfile, latency: float) -> list[int]:
        clock, w = FakeClock(), Window(profile)
        seen = [w.limit]
        while w.phase == "slow-start":
            round_trip(w, clock, latency=latency)
            seen.append(w.limit)
        return seen

    assert sizes(RATE, 0.04) == [1, 2, 4, 8, 16], "a quick API doubles per round trip"
    # +3 per answer at 300 ms (within a round trip, growth stops once half is unused).
    assert sizes(RATE, 0.3) == [1, 4, 10, 16]
    assert sizes(SEED, 0.3) == [1, 2, 4, 8, 16], "the seed doubles whatever the latency"
