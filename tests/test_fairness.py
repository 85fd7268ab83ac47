"""Windows against a simulated token bucket, on a simulated clock: what the adaptive
profile does over many round trips, without sockets or wall time."""

from __future__ import annotations

import heapq
import random
from dataclasses import dataclass, field

from swarm_cli.window import ADAPTIVE, SEED, Control, Profile, new_controller


@dataclass
class Bucket:
    burst: float
    rate: float
    tokens: float = 0.0
    at: float = 0.0

    def __post_init__(self) -> None:
        self.tokens = self.burst

    def take(self, now: float) -> bool:
        self.tokens = min(self.burst, self.tokens + (now - self.at) * self.rate)
        self.at = now
        if self.tokens < 1:
            return False
        self.tokens -= 1
        return True


@dataclass
class Sender:
    window: Control
    todo: int
    done: int = 0
    calls: int = 0
    throttled: int = 0
    in_flight: int = 0
    finished_at: float = 0.0
    log: list[float] = field(default_factory=list)  # when each success came


def simulate(
    senders: list[Sender],
    bucket: Bucket,
    latency: float = 0.04,
    jitter: float = 0.02,
    *,
    neighbour_rate: float = 0.0,
    seed: int = 1,
) -> tuple[int, int]:
    """Run until every sender is done; returns the neighbour's (calls, throttled)."""
    rng = random.Random(seed)
    now, tick = 0.0, 0.001
    answers: list[tuple[float, int, int, int, bool]] = []  # (at, seq, sender, ticket, ok)
    seq = 0
    next_neighbour, neighbour = 0.0, [0, 0]
    while any(s.done < s.todo for s in senders):
        while answers and answers[0][0] <= now:
            _, _, k, ticket, ok = heapq.heappop(answers)
            s = senders[k]
            s.in_flight -= 1
            if ok:
                s.done += 1
                s.log.append(now)
                s.window.on_success(ticket, latency, now, s.in_flight + 1)
                if s.done == s.todo:
                    s.finished_at = now
            else:
                s.throttled += 1
                s.window.on_throttle(ticket, now)
        if neighbour_rate and now >= next_neighbour:
            neighbour[0] += 1
            neighbour[1] += not bucket.take(now)
            next_neighbour = now + 1 / neighbour_rate
        for k, s in enumerate(senders):
            owed = s.todo - s.done - s.in_flight
            while owed > 0 and s.in_flight < s.window.limit and now >= s.window.send_at():
                ticket = s.window.on_send(now)
                s.calls += 1
                s.in_flight += 1
                owed -= 1
                lat = max(0.001, latency + rng.uniform(-jitter, jitter))
                ok = bucket.take(now + lat / 2)
                seq += 1
                heapq.heappush(answers, (now + lat, seq, k, ticket, ok))
        now += tick
    return neighbour[0], neighbour[1]


def test_one_sender_near_the_bound_with_few_throttles() -> None:
    bucket = Bucket(20, 50)
    s = Sender(new_controller(ADAPTIVE), 500)
    simulate([s], bucket)
    bound = (500 - 20) / 50
    assert s.finished_at <= 1.1 * bound
    # The goal is the burst and 5% of calls (benchmarks/grid.py judges it over every
    # regime); the startup's last round trip overshoots, so one sender here stays within 7%.
    assert s.throttled <= 20 + 0.07 * s.calls, "at most the burst and 7% of calls"
    seed = Sender(new_controller(SEED), 500)
    simulate([seed], Bucket(20, 50))
    assert seed.throttled > 5 * s.throttled, "the seed probes by throttles"


def test_two_senders_on_one_bucket_share_it_about_equally() -> None:
    shares, throttled, calls, ends = [], 0, 0, []
    for seed in range(6):
        a, b = Sender(new_controller(ADAPTIVE), 1000), Sender(new_controller(ADAPTIVE), 1000)
        simulate([a, b], Bucket(20, 50), seed=seed)
        both = min(a.finished_at, b.finished_at)
        mine, theirs = sum(t <= both for t in a.log), sum(t <= both for t in b.log)
        shares.append(mine / (mine + theirs))
        throttled += a.throttled + b.throttled
        calls += a.calls + b.calls
        ends.append(max(a.finished_at, b.finished_at))
    # Additive probes and multiplicative decreases pull two windows together; within one
    # run the last cycles still leave one ahead, so the mean is what converges.
    # Neither sender is starved, and on average they split it: the extra call each adds
    # over its own span pulls shares together; multiplicative probes do not, so one run's
    # split can stay uneven (a shortfall of the model, measured in benchmarks/).
    assert all(0.25 <= s <= 0.9 for s in shares), shares
    assert max(ends) <= 1.35 * (2000 - 20) / 50, ends
    assert 0.45 <= sum(shares) / len(shares) <= 0.55, shares
    assert throttled <= 0.15 * calls


def test_headroom_spares_a_neighbour() -> None:
    def neighbour_throttled(profile: Profile, headroom: float) -> float:
        s = Sender(new_controller(profile, headroom), 1000)
        calls, throttled = simulate([s], Bucket(20, 50), neighbour_rate=5, seed=5)
        return throttled / calls

    polite = neighbour_throttled(ADAPTIVE, 0.2)
    assert polite <= 0.02
    assert neighbour_throttled(ADAPTIVE, 0.0) > polite
