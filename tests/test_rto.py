from __future__ import annotations

import math

import pytest

from swarm_cli.outage import Outage
from swarm_cli.rto import FixedTimeout, Rto


def test_rto_starts_at_its_initial_value_then_follows_rfc_6298() -> None:
    rto = Rto(floor=0.0, ceiling=100.0, initial=5.0)
    assert rto.timeout() == 5.0
    rto.sample(1.0)  # srtt 1, rttvar 0.5
    assert rto.timeout() == pytest.approx(3.0)
    rto.sample(1.0)  # rttvar 0.375, srtt 1
    assert rto.timeout() == pytest.approx(2.5)
    rto.sample(3.0)  # rttvar 0.28125 + 0.5, srtt 1.25
    assert rto.srtt == pytest.approx(1.25)
    assert rto.timeout() == pytest.approx(1.25 + 4 * (0.75 * 0.375 + 0.25 * 2.0))


def test_calls_near_the_mean_do_not_shrink_the_timeout_below_twice_the_round_trip() -> None:
    rto = Rto(floor=0.0, ceiling=100.0, initial=5.0)
    for _ in range(50):
        rto.sample(2.0)  # many calls at the mean: the variation falls to nothing
    assert rto.rttvar < 0.01
    assert rto.timeout() == pytest.approx(4.0)  # a 2.8 s call (1.4x) is not late


def test_rto_is_floored_and_capped_and_doubles_per_timeout_until_an_answer() -> None:
    rto = Rto(floor=2.0, ceiling=30.0, initial=5.0)
    rto.sample(0.05)
    assert rto.timeout() == 2.0  # a fast API still gets the floor
    rto.on_timeout()
    assert rto.timeout() == 4.0
    for _ in range(10):
        rto.on_timeout()
    assert rto.timeout() == 30.0 and rto.backoff < 10  # capped, and stops counting
    rto.sample(0.05)
    assert rto.timeout() == 2.0


def test_a_fixed_timeout_ignores_what_it_sees() -> None:
    fixed = FixedTimeout(7.0)
    fixed.sample(0.1)
    fixed.on_timeout()
    assert fixed.timeout() == 7.0


def test_outage_is_declared_after_a_streak_and_ended_by_any_answer() -> None:
    outage = Outage(threshold=3, max_outage=10.0, first_gap=0.5, max_gap=2.0)
    assert outage.probe_at() == -math.inf and outage.give_up_at() == math.inf
    assert not outage.on_unreachable(sent_at=1.0, now=1.1)
    assert not outage.on_unreachable(sent_at=0.5, now=1.2)
    assert outage.give_up_at() == 10.5  # from the first call that got no answer
    assert outage.on_unreachable(sent_at=1.2, now=1.3)
    assert outage.down and outage.probe_at() == pytest.approx(1.8)
    outage.on_unreachable(sent_at=1.8, now=1.9)  # a failed probe: the gap doubles
    assert outage.probe_at() == pytest.approx(2.9)
    outage.on_unreachable(sent_at=2.9, now=3.0)
    outage.on_unreachable(sent_at=5.0, now=5.0)
    assert outage.probe_at() == pytest.approx(7.0)  # capped at max_gap
    assert outage.on_answer()
    assert not outage.down and outage.give_up_at() == math.inf


def test_an_answer_between_failures_resets_the_streak() -> None:
    outage = Outage(threshold=2)
    outage.on_unreachable(sent_at=0.0, now=0.1)
    assert not outage.on_answer()
    assert not outage.on_unreachable(sent_at=0.2, now=0.3)
    assert not outage.down
