from __future__ import annotations

import errno
import itertools
import json
import os
import subprocess
import sys
import textwrap
import threading
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from swarm_cli.ledger import (
    FORMAT_VERSION,
    STATUSES,
    Damaged,
    LedgerError,
    LedgerVersionError,
    LedgerWriteError,
    LedgerWriter,
    Record,
    check_ledger_path,
    describe_damage,
    fold,
    fold_files,
    read_records,
    succeeded_ids,
)

# The writer


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
    # On disk once flushed, before close.
    writer.flush()
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
        "intents": None,
    }
    assert line["ts"].endswith("Z")
    assert writer.close() == []
    again = LedgerWriter(str(path), "run2", "terminate", "eu-west-1")
    again.write("i-abcdef01", "succeeded")
    assert again.close() == []
    assert [r.run for r in read_records(str(path))] == ["run1", "run2"]
    assert succeeded_ids(str(path), "terminate") == {"i-abcdef01"}


def test_write_ahead_leaves_every_intent_pending(tmp_path: Path) -> None:
    path = tmp_path / "l.jsonl"
    ids = [f"i-{n:017x}" for n in range(10_000)]
    writer = LedgerWriter(str(path), "r", "terminate", "eu-west-1", account="123456789012")
    writer.write_ahead(ids)
    # Durable without close: what a kill -9 right after dispatch leaves behind.
    lines = path.read_text().splitlines()
    assert len(lines) == len(ids)
    state = fold_files([str(path)])
    assert {key[1] for key in state} == set(ids)
    assert {r.status for r in state.values()} == {"pending"}
    assert [r.seq for r in read_records(str(path))] == list(range(1, len(ids) + 1))
    writer.close()


def test_write_ahead_lines_are_encoded_exactly_like_records(tmp_path: Path) -> None:
    path = tmp_path / "l.jsonl"
    writer = LedgerWriter(str(path), "r", "terminate", None)
    writer.write_ahead(['i-"quoted"\n', "i-ü"], code="Queued", message="waiting")
    writer.close()
    for line in path.read_text().splitlines():
        assert Record(**json.loads(line)).to_json() == line
    first = next(read_records(str(path)))
    assert (first.id, first.code, first.message, first.attempts) == (
        'i-"quoted"\n',
        "Queued",
        "waiting",
        0,
    )


def test_outcomes_after_write_ahead_fold_over_pending(tmp_path: Path) -> None:
    path = tmp_path / "l.jsonl"
    writer = LedgerWriter(str(path), "r", "terminate", None)
    writer.write_ahead(["i-1", "i-2", "i-3"])
    writer.write("i-1", "succeeded", attempts=1)
    writer.write("i-2", "failed", code="Boom", attempts=5)
    assert writer.close() == []
    state = fold_files([str(path)])
    assert {k[1]: r.status for k, r in state.items()} == {
        "i-1": "succeeded",
        "i-2": "failed",
        "i-3": "pending",
    }
    # Sequence numbers follow call order and the file keeps that order.
    assert [r.seq for r in read_records(str(path))] == [1, 2, 3, 4, 5]


def test_write_ahead_on_a_full_disk_raises_a_one_line_error() -> None:
    writer = LedgerWriter("/dev/full", "r", "terminate", None)
    with pytest.raises(
        LedgerWriteError, match=r"^cannot write the ledger /dev/full: No space left on device$"
    ):
        writer.write_ahead(["i-1", "i-2"])
    assert writer.error is not None and writer.error.errno == errno.ENOSPC
    assert writer.close() == []


def test_a_full_disk_keeps_every_outcome_and_reports_once() -> None:
    errors: list[OSError] = []
    threads: list[threading.Thread] = []

    def on_error(err: OSError) -> None:
        threads.append(threading.current_thread())
        errors.append(err)

    writer = LedgerWriter("/dev/full", "r", "terminate", None, on_error=on_error)
    writer.write("i-1", "succeeded")
    writer.flush()
    writer.write("i-2", "failed", code="Boom")
    writer.write("i-3", "missing")
    lost = writer.close()
    assert [(r.id, r.status, r.seq) for r in lost] == [
        ("i-1", "succeeded", 1),
        ("i-2", "failed", 2),
        ("i-3", "missing", 3),
    ]
    assert len(errors) == 1 and errors[0].errno == errno.ENOSPC
    assert threads[0] is not threading.current_thread()  # reported from the writer's thread
    assert writer.error is errors[0]
    assert writer.close() == lost  # idempotent


def test_writes_that_start_failing_midway_lose_exactly_the_unwritten_records(
    tmp_path: Path,
) -> None:
    # A file-size limit makes the kernel cut a write short, then refuse the
    # next one (EFBIG): the same shape as a disk filling up during a run.
    path = tmp_path / "l.jsonl"
    script = textwrap.dedent(
        """
        import json, resource, sys
        from swarm_cli.ledger import LedgerWriter

        resource.setrlimit(resource.RLIMIT_FSIZE, (2000, 2000))
        errors = []
        writer = LedgerWriter(sys.argv[1], "r", "terminate", None, on_error=errors.append)
        for n in range(40):
            writer.write(f"i-{n:08x}", "succeeded")
        lost = writer.close()
        print(json.dumps({"errors": [e.errno for e in errors], "lost": [r.seq for r in lost]}))
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script, str(path)], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["errors"] == [errno.EFBIG]
    damaged: list[Damaged] = []
    written = [r.seq for r in read_records(str(path), damaged)]
    assert written and report["lost"]
    assert sorted(written + report["lost"]) == list(range(1, 41))
    assert len(damaged) <= 1  # at most the one line the limit cut


def test_records_that_stop_coming_are_synced_without_waiting_for_close(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    synced = threading.Event()
    real_fsync = os.fsync

    def fsync(fd: int) -> None:
        real_fsync(fd)
        synced.set()

    monkeypatch.setattr(os, "fsync", fsync)
    writer = LedgerWriter(str(tmp_path / "l.jsonl"), "r", "terminate", None, fsync_interval=0.01)
    writer.write("i-1", "succeeded")
    assert synced.wait(30)
    writer.close()


def test_close_without_writes_returns_nothing_and_writing_after_close_is_refused(
    tmp_path: Path,
) -> None:
    writer = LedgerWriter(str(tmp_path / "l.jsonl"), "r", "terminate", None)
    assert writer.close() == []
    assert writer.close() == []
    assert writer.error is None
    with pytest.raises(ValueError):
        writer.write("i-1", "succeeded")


def test_a_ledger_in_a_missing_folder_cannot_be_opened(tmp_path: Path) -> None:
    path = tmp_path / "nope" / "l.jsonl"
    with pytest.raises(
        LedgerError, match=r"^cannot open the ledger .*: No such file or directory$"
    ):
        LedgerWriter(str(path), "r", "terminate", None)


# The reader


def _valid(**changes: Any) -> dict[str, Any]:
    line: dict[str, Any] = Record(
        "2026-01-01T00:00:00Z", "r", 1, "terminate", "i-1", "failed"
    ).to_dict()
    line.update(changes)
    return line


def _ledger(path: Path, middle: bytes) -> str:
    first = json.dumps(_valid(id="i-first")).encode()
    last = json.dumps(_valid(id="i-last")).encode()
    path.write_bytes(first + b"\n" + middle + b"\n" + last + b"\n")
    return str(path)


def test_a_line_cut_short_by_a_crash_is_skipped_and_reported(tmp_path: Path) -> None:
    path = tmp_path / "l.jsonl"
    writer = LedgerWriter(str(path), "r", "terminate", None)
    writer.write("i-abcdef01", "succeeded")
    writer.close()
    with open(path, "a") as handle:
        handle.write('{"v":1,"ts":"2026-')
    damaged: list[Damaged] = []
    state = fold_files([str(path)], damaged)
    assert list(state) == [("terminate", "i-abcdef01")]
    assert len(damaged) == 1 and damaged[0].line == 2


def _without(name: str) -> dict[str, Any]:
    line = _valid()
    del line[name]
    return line


@pytest.mark.parametrize(
    ("middle", "reason"),
    [
        (b'\xff\xfe{"v":1}', "not UTF-8"),
        (b'{"v":1,"ts":', "not JSON"),
        (b"[" * 100_000, "not JSON"),
        (b"null", "not an object"),
        (b"[]", "not an object"),
        (b"3", "not an object"),
        (b'"x"', "not an object"),
        (json.dumps(_without("id")).encode(), "no field 'id'"),
        (json.dumps(_without("v")).encode(), "no format version"),
        (json.dumps(_valid(seq="1")).encode(), "'seq' is not an integer"),
        (json.dumps(_valid(seq=True)).encode(), "'seq' is not an integer"),
        (json.dumps(_valid(attempts=False)).encode(), "'attempts' is not an integer"),
        (json.dumps(_valid(http_status="400")).encode(), "'http_status' is not an integer or null"),
        (json.dumps(_valid(code=5)).encode(), "'code' is not a string or null"),
        (json.dumps(_valid(ts=None)).encode(), "'ts' is not a string"),
        (json.dumps(_valid(v="1")).encode(), "'v' is not an integer"),
        (json.dumps(_valid(v=0)).encode(), "unknown format version 0"),
        (json.dumps(_valid(status="done")).encode(), "unknown status 'done'"),
    ],
)
def test_a_damaged_line_is_skipped_with_its_reason(
    tmp_path: Path, middle: bytes, reason: str
) -> None:
    path = _ledger(tmp_path / "l.jsonl", middle)
    damaged: list[Damaged] = []
    assert [r.id for r in read_records(path, damaged)] == ["i-first", "i-last"]
    assert damaged == [Damaged(path, 2, reason)]


def test_unknown_fields_of_a_known_format_are_ignored(tmp_path: Path) -> None:
    path = _ledger(tmp_path / "l.jsonl", json.dumps(_valid(id="i-mid", shard=7)).encode())
    damaged: list[Damaged] = []
    assert [r.id for r in read_records(path, damaged)] == ["i-first", "i-mid", "i-last"]
    assert damaged == []


def test_a_newer_format_stops_the_reader_with_a_clear_message(tmp_path: Path) -> None:
    newer = FORMAT_VERSION + 1
    path = _ledger(tmp_path / "l.jsonl", json.dumps(_valid(v=newer, status="new")).encode())
    with pytest.raises(LedgerVersionError) as caught:
        list(read_records(path))
    assert str(caught.value) == (
        f"{path} line 2: written by a newer swarm (format {newer}; this swarm reads format "
        f"{FORMAT_VERSION}): upgrade swarm to read it"
    )


@pytest.mark.parametrize("name", ["missing.jsonl", "folder"])
def test_an_unreadable_ledger_raises_a_one_line_error(tmp_path: Path, name: str) -> None:
    (tmp_path / "folder").mkdir()
    path = str(tmp_path / name)
    with pytest.raises(LedgerError, match=r"^cannot read the ledger ") as caught:
        list(read_records(path))
    assert path in str(caught.value) and "\n" not in str(caught.value)


def test_damage_is_described_in_one_line() -> None:
    damaged = [
        Damaged("a.jsonl", 3, "not JSON"),
        Damaged("a.jsonl", 9, "not an object"),
        Damaged("b.jsonl", 2, "not UTF-8"),
        Damaged("b.jsonl", 4, "not JSON"),
        Damaged("b.jsonl", 5, "not JSON"),
    ]
    assert describe_damage(damaged) == (
        "5 damaged ledger line(s) skipped: a.jsonl line 3 (not JSON), "
        "line 9 (not an object), b.jsonl line 2 (not UTF-8) and 2 more"
    )
    assert (
        describe_damage(damaged[:1])
        == "1 damaged ledger line(s) skipped: a.jsonl line 3 (not JSON)"
    )
    assert describe_damage([]) == ""


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=12,
)


@st.composite
def almost_records(draw: st.DrawFn) -> dict[str, Any]:
    line = _valid(status=draw(st.sampled_from(STATUSES)))
    name = draw(st.sampled_from([*line, "extra"]))
    if draw(st.booleans()) and name in line:
        del line[name]
    else:
        line[name] = draw(json_values)
    return line


def _encode(value: object) -> bytes:
    return json.dumps(value).encode()


ledger_lines = st.one_of(
    st.binary(max_size=60),
    json_values.map(_encode),
    almost_records().map(_encode),
    st.just(_encode(_valid())),
)


@pytest.fixture(scope="module")
def fuzz_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # Module-scoped: hypothesis reuses it across examples, each writing it anew.
    return tmp_path_factory.mktemp("fuzz") / "l.jsonl"


@settings(max_examples=200, deadline=None)
@given(lines=st.lists(ledger_lines, max_size=8), end=st.sampled_from([b"\n", b"\r\n"]))
def test_the_reader_yields_records_or_raises_a_ledger_error(
    fuzz_path: Path, lines: list[bytes], end: bytes
) -> None:
    fuzz_path.write_bytes(end.join(lines))
    damaged: list[Damaged] = []
    try:
        records = list(read_records(str(fuzz_path), damaged))
    except LedgerError:
        return
    assert all(isinstance(r, Record) for r in records)
    assert all(isinstance(d, Damaged) for d in damaged)
    assert len(records) + len(damaged) <= len(lines) + sum(line.count(b"\n") for line in lines)
    fold(records)  # every record read can be merged


# The path check


def test_a_fine_ledger_path_passes_and_is_created_empty(tmp_path: Path) -> None:
    path = tmp_path / "l.jsonl"
    check_ledger_path(str(path), ids_path="-")
    assert path.read_bytes() == b""
    path.write_text("kept\n")
    check_ledger_path(str(path))
    assert path.read_text() == "kept\n"


def test_a_ledger_in_a_missing_folder_is_refused(tmp_path: Path) -> None:
    folder = tmp_path / "nope"
    with pytest.raises(LedgerError, match="does not exist: create it or pass --ledger elsewhere"):
        check_ledger_path(str(folder / "l.jsonl"))
    assert not folder.exists()


def test_a_folder_is_refused_as_a_ledger(tmp_path: Path) -> None:
    with pytest.raises(LedgerError, match="is a folder"):
        check_ledger_path(str(tmp_path))


def test_a_symbolic_link_is_refused_as_a_ledger(tmp_path: Path) -> None:
    target = tmp_path / "real.jsonl"
    target.write_text("")
    link = tmp_path / "link.jsonl"
    link.symlink_to(target)
    with pytest.raises(LedgerError, match="is a symbolic link: pass the real path"):
        check_ledger_path(str(link))


def test_the_id_list_is_refused_as_a_ledger(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ids = tmp_path / "ids.txt"
    ids.write_text("i-1\n")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(LedgerError, match="is the ID list"):
        check_ledger_path(str(ids), ids_path="ids.txt")
    assert ids.read_text() == "i-1\n"
    check_ledger_path(str(tmp_path / "l.jsonl"), ids_path="ids.txt")


def test_a_fifo_is_refused_as_a_ledger(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(LedgerError, match="is not a regular file"):
        check_ledger_path(str(fifo))


def test_a_character_device_is_accepted_as_a_ledger() -> None:
    check_ledger_path("/dev/full")


# Merging


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
    def merge(*parts: list[Record]) -> dict[tuple[str, str], Record]:
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


def test_a_new_run_after_a_line_cut_short_starts_on_a_line_of_its_own(tmp_path: Path) -> None:
    path = tmp_path / "l.jsonl"
    path.write_bytes(b'{"v":1,"ts":')  # a crash in the middle of a line
    writer = LedgerWriter(str(path), "run", "terminate", "us-east-1")
    writer.write_ahead(["i-00000001"])
    writer.close()
    damaged: list[Damaged] = []
    assert [r.id for r in read_records(str(path), damaged)] == ["i-00000001"]
    assert [d.line for d in damaged] == [1]


def test_a_write_ahead_block_cut_short_is_reported_and_a_whole_one_is_not(tmp_path: Path) -> None:
    from swarm_cli.ledger import CutShort

    whole, cut = tmp_path / "whole.jsonl", tmp_path / "cut.jsonl"
    writer = LedgerWriter(str(whole), "r1", "terminate", None)
    writer.write_ahead([f"i-{n:08x}" for n in range(5)])
    writer.close()
    cut.write_bytes(b"".join(whole.read_bytes().splitlines(keepends=True)[:3]))
    found: list[CutShort] = []
    fold_files([str(whole), str(whole)], cut_short=found)  # the same block twice is still whole
    assert found == []
    fold_files([str(cut)], cut_short=found)
    assert found == [CutShort("r1", 3, 5)]
    assert "sent nothing" in found[0].describe()
