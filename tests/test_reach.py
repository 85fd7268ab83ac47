"""How each pair's client is made: its read time-out against --call-timeout."""

from __future__ import annotations

from pathlib import Path

import pytest
from rich.console import Console

from swarm_cli.cli.options import Flags, Output
from swarm_cli.cli.reach import READ_TIMEOUT, Reach
from swarm_cli.report import Pair
from swarm_cli.run import RunOptions


def flags(tmp_path: Path, call_timeout: float | None) -> Flags:
    return Flags(
        ids=None,
        region="us-east-1",
        profile=None,
        endpoint_url="http://127.0.0.1:9",  # never called: only the client is made
        ledger=str(tmp_path / "l.jsonl"),
        resume=False,
        yes=True,
        dry_run=False,
        sandbox=False,
        params={},
        options=RunOptions(call_timeout=call_timeout),
        output=Output.text,
    )


@pytest.mark.parametrize(
    ("call_timeout", "read"), [(None, READ_TIMEOUT), (5.0, READ_TIMEOUT), (90.0, 90.0)]
)
def test_a_call_timeout_past_botocores_read_timeout_raises_it(
    tmp_path: Path, call_timeout: float | None, read: float
) -> None:
    # Else botocore would cut a call at 30 s that --call-timeout 90 lets run for 90.
    reach = Reach(flags(tmp_path, call_timeout), {}, 10)
    pair = Pair(None, "us-east-1")
    reach.connect({pair: ["i-0123456789abcdef0"]}, Console(stderr=True))
    assert reach.client(pair).meta.config.read_timeout == read
