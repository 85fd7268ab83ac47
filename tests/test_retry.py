"""The wait before an intent's next try: full jitter, its random source handed in."""

from __future__ import annotations

import random

from swarm_cli.engine import Engine
from swarm_cli.retry import FullJitter, default_backoff


def test_the_interval_doubles_from_a_quarter_second_up_to_ten() -> None:
    jitter = FullJitter()
    assert [jitter.ceiling(n) for n in range(1, 10)] == [0.25, 0.5, 1, 2, 4, 8, 10, 10, 10]
    assert jitter.ceiling(10_000) == 10, "no overflow however many errors"


def test_waits_are_drawn_from_the_whole_interval_by_the_generator_handed_in() -> None:
    a, b = FullJitter(rng=random.Random(5)), FullJitter(rng=random.Random(5))
    waits = [a(n) for n in range(1, 200)]
    assert waits == [b(n) for n in range(1, 200)], "the same seed, the same waits"
    assert all(0 <= w <= a.ceiling(n) for n, w in zip(range(1, 200), waits, strict=True))
    late = waits[20:]
    assert min(late) < 1 and max(late) > 9, "anywhere from 0 to the cap"


def test_the_engine_backs_off_by_full_jitter_unless_told_otherwise() -> None:
    assert Engine.__init__.__kwdefaults__["backoff"] is default_backoff
    assert isinstance(default_backoff, FullJitter)
    assert (default_backoff.base, default_backoff.cap) == (0.25, 10.0)
