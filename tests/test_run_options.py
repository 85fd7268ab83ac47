"""RunOptions: what tunes the engines and where results go, split from one set of options."""

from __future__ import annotations

from dataclasses import fields

from swarm_cli.run import EngineOptions, RunOptions, Sinks
from swarm_cli.window import ADAPTIVE

POLICY = {"dry_run", "missing_ok", "max_errors"}  # the run's own, in neither part


def test_every_option_goes_to_exactly_one_part() -> None:
    engine = {f.name for f in fields(EngineOptions)}
    sinks = {f.name for f in fields(Sinks)}
    assert not engine & sinks and not (engine | sinks) & POLICY
    assert {f.name for f in fields(RunOptions)} == engine | sinks | POLICY


def test_the_parts_carry_the_options_given() -> None:
    bounded = ADAPTIVE.bounded(max_window=8)
    options = RunOptions(
        batch_size=3,
        window=bounded,
        call_timeout=2.0,
        ledger="l.jsonl",
        progress="none",
        badges=("SANDBOX",),
        max_errors=1,
    )
    assert options.tuning == EngineOptions(batch_size=3, window=bounded, call_timeout=2.0)
    assert options.sinks == Sinks(ledger="l.jsonl", progress="none", badges=("SANDBOX",))
    assert RunOptions().tuning == EngineOptions() and RunOptions().sinks == Sinks()


def test_a_batch_size_in_other_digits_is_a_usage_error_not_a_crash() -> None:
    from test_cli import swarm

    for value in ("\u00b2", "\u0661\u0660", "0", "1001", "ten"):
        code, _, err = swarm("terminate", "--ids", "x", "--batch-size", value, "--dry-run")
        assert code == 2 and "neither auto nor a whole number from 1 to 1000" in err, (value, err)
