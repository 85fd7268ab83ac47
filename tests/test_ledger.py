from __future__ import annotations

import itertools
import json
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from swarm_cli.ledger import (
    STATUSES,
    LedgerWriter,
    Record,
    fold,
    fold_files,
    read_records,
    succeeded_ids,
)


def test_writer_appends_flushed_records_with_every_field(tmp_path: Path) -> None:
    path = tmp_path / "l.jsonl"
    writer = LedgerWriter(str(path), "run1", "terminate", "eu-west-1")
    writer.write(
        "i-abcdef01",
        "failed",
        code="OperationNotPermitted",
        message="protected",
        http_status=400,
        attempts=2,
        request_id="req-1",
    )
    # Flushed as written: readable before close.
    line = json.loads(path.read_text().splitlines()[0])
    assert line == {
        "v": 1,
        "ts": line["ts"],
        "run": "run1",
        "seq": 1,
        "action": "terminate",
        "id": "i-abcdef01",
        "status": "failed",
        "region": "eu-west-1",
        "account": None,
        "code": "OperationNotPermitted",
        "message": "protected",
        "http_status": 400,
        "attempts": 2,
        "request_id": "req-1",
    }
    assert line["ts"].endswith("Z")
    writer.close()
    again = LedgerWriter(str(path), "run2", "terminate", "eu-west-1")
    again.write("i-abcdef01", "succeeded")
    again.close()
    assert [r.run for r in read_records(str(path))] == ["run1", "run2"]
    assert succeeded_ids(str(path), "terminate") == {"i-abcdef01"}


def test_a_line_cut_short_by_a_crash_is_skipped_and_reported(tmp_path: Path) -> None:
    path = tmp_path / "l.jsonl"
    writer = LedgerWriter(str(path), "r", "terminate", None)
    writer.write("i-abcdef01", "succeeded")
    writer.close()
    with open(path, "a") as handle:
        handle.write('{"v":1,"ts":"2026-')
    damaged: list = []
    state = fold_files([str(path)], damaged)
    assert list(state) == [("terminate", "i-abcdef01")]
    assert len(damaged) == 1 and damaged[0].line == 2


records = st.builds(
    Record,
    ts=st.sampled_from(["2026-01-01T00:00:00Z", "2026-01-02T00:00:00Z"]),
    run=st.sampled_from(["a", "b"]),
    seq=st.integers(1, 3),
    action=st.just("terminate"),
    id=st.sampled_from(["i-00000001", "i-00000002"]),
    status=st.sampled_from(STATUSES),
)


@given(st.lists(records, max_size=8), st.lists(records, max_size=8), st.lists(records, max_size=8))
def test_merge_is_commutative_associative_and_idempotent(
    a: list[Record], b: list[Record], c: list[Record]
) -> None:
    def merge(*parts: list[Record]) -> dict:
        return fold(itertools.chain(*parts))

    assert merge(a, b) == merge(b, a)
    left = list(merge(a, b).values())
    right = list(merge(b, c).values())
    assert merge(left, c) == merge(a, right)
    assert merge(a, a) == merge(a)


def test_succeeded_beats_a_later_failure() -> None:
    done = Record("2026-01-01T00:00:00Z", "a", 1, "terminate", "i-00000001", "succeeded")
    later = Record("2026-02-01T00:00:00Z", "b", 1, "terminate", "i-00000001", "failed")
    assert fold([later, done])[("terminate", "i-00000001")] is done
