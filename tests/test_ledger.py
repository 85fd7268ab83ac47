from __future__ import annotations

import errno
import itertools
import json
import os
import random
import re
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterable
from dataclasses import fields, replace
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from swarm_cli.ledger import (
    FORMAT_VERSION,
    REACHED_CODE,
    STATUS_RANK,
    STATUSES,
    CutShort,
    Damaged,
    LedgerError,
    LedgerVersionError,
    LedgerWriteError,
    LedgerWriter,
    Record,
    WriteAheadCheck,
    check_ledger_path,
    describe_damage,
    fold,
    fold_files,
    merge_files,
    read_records,
    succeeded_ids,
    utc_now,
)
from swarm_cli.ledger import record as record_module
from swarm_cli.ledger.record import json_line
from swarm_cli.ledger.writer import _outcome_line

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
        "block": None,
        "run_intents": None,
        "reached": None,
        "started": writer.started,
        "tags": None,
        "waits": None,
    }
    assert line["ts"].endswith("Z") and writer.started <= line["ts"]
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


def _dumps(values: tuple[Any, ...]) -> str:
    """A record's line as json.dumps writes it: the format every ledger line keeps."""
    names = [f.name for f in fields(Record)]
    return json.dumps(dict(zip(names, values, strict=True)), separators=(",", ":"), sort_keys=True)


_TEXT = st.none() | st.text(max_size=12)


@settings(max_examples=300, deadline=None)
@given(
    values=st.tuples(
        st.text(max_size=30),  # ts
        st.text(max_size=12),  # run
        st.integers(min_value=0, max_value=2**63),  # seq
        st.text(max_size=12),  # action
        st.text(max_size=20),  # id
        st.sampled_from(STATUSES),
        _TEXT,  # region
        _TEXT,  # account
        _TEXT,  # code
        st.none() | st.text(max_size=40),  # message
        st.none() | st.integers(min_value=100, max_value=599),  # http_status
        st.integers(min_value=0, max_value=1000),  # attempts
        _TEXT,  # request_id
        st.none() | st.integers(min_value=0, max_value=10**6),  # intents
        st.none() | st.integers(min_value=1, max_value=10**6),  # block
        st.none() | st.integers(min_value=0, max_value=10**6),  # run_intents
        _TEXT,  # reached
        _TEXT,  # started
        _TEXT,  # tags
        _TEXT,  # waits
        st.just(FORMAT_VERSION) | st.integers(min_value=0, max_value=3),
    )
)
def test_lines_are_json_dumps_of_the_record_text_for_text(values: tuple[Any, ...]) -> None:
    expected = _dumps(values)
    assert Record(*values).to_json() == expected
    assert json_line(values) == expected
    assert _outcome_line(values) == expected


def test_outcome_lines_fall_back_to_json_for_values_of_other_types() -> None:
    values: tuple[Any, ...] = (
        "t", "r", 1, "stop", "i-1", "failed", None, None, 7, None, True, 2, None,
        None, None, None, None, "s", None, None, 1,
    )  # fmt: skip
    assert _outcome_line(values) == json_line(values) == _dumps(values)
    assert '"code":7' in _outcome_line(values) and '"http_status":true' in _outcome_line(values)


def test_written_outcomes_read_back_exactly(tmp_path: Path) -> None:
    path = tmp_path / "l.jsonl"
    writer = LedgerWriter(str(path), "r", "terminate", "eu-west-1", account="123456789012")
    writer.write_ahead(["i-1", 'i-"2"'])
    writer.write("i-1", "succeeded", attempts=1, request_id="req-ü")
    writer.write(
        'i-"2"',
        "failed",
        code="Boom",
        message='no\n"way" \u2603',
        http_status=400,
        attempts=3,
        region=None,
        account="210987654321",
        action="stop",
    )
    writer.write("i-1", "succeeded", code=REACHED_CODE, reached="2026-01-01T00:00:00.000001Z")
    assert writer.close() == []
    lines = path.read_text(encoding="ascii").splitlines()
    records = list(read_records(str(path)))
    assert [r.to_json() for r in records] == lines
    assert [(r.id, r.status, r.seq, r.action, r.region, r.account) for r in records[2:]] == [
        ("i-1", "succeeded", 3, "terminate", "eu-west-1", "123456789012"),
        ('i-"2"', "failed", 4, "stop", None, "210987654321"),
        ("i-1", "succeeded", 5, "terminate", "eu-west-1", "123456789012"),
    ]
    assert records[3].message == 'no\n"way" \u2603' and records[2].request_id == "req-ü"
    assert records[4].reached == "2026-01-01T00:00:00.000001Z"
    assert {r.started for r in records} == {writer.started}


def test_utc_now_reads_as_now_to_the_microsecond() -> None:
    before = datetime.now(timezone.utc)
    now = utc_now()
    after = datetime.now(timezone.utc)
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z", now), now
    read = datetime.fromisoformat(now.replace("Z", "+00:00"))
    assert before - timedelta(milliseconds=1) <= read <= after + timedelta(milliseconds=1)
    assert utc_now() >= now


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


def test_a_byte_order_mark_an_editor_added_is_not_damage(tmp_path: Path) -> None:
    path = tmp_path / "l.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + json.dumps(_valid(id="i-1")).encode() + b"\n")
    damaged: list[Damaged] = []
    assert [r.id for r in read_records(str(path), damaged)] == ["i-1"]
    assert damaged == []


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


def test_a_fine_ledger_path_passes_and_leaves_no_file_behind(tmp_path: Path) -> None:
    path = tmp_path / "l.jsonl"
    check_ledger_path(str(path), ids_path="-")
    assert not path.exists()  # a run refused or not confirmed later leaves no empty ledger
    line = (
        '{"v": 1, "ts": "2026-01-01T00:00:00Z", "run": "r", "seq": 1, "action": "stop", '
        '"id": "i-00000001", "status": "failed"}\n'
    )
    path.write_text(line)
    check_ledger_path(str(path))
    assert path.read_text() == line
    # A file of something else would have records appended to it.
    path.write_text("kept\n")
    with pytest.raises(LedgerError, match="is not a swarm ledger"):
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


def test_a_dash_is_not_a_ledger(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(LedgerError, match="pass --ledger FILE, not -"):
        check_ledger_path("-")
    assert not (tmp_path / "-").exists()


def test_an_empty_ledger_path_is_named_as_such() -> None:
    for empty in ("", "  "):
        with pytest.raises(LedgerError, match="the ledger path is empty: pass --ledger FILE"):
            check_ledger_path(empty)


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


@pytest.mark.parametrize("device", ["/dev/null", "/dev/full", "/dev/zero"])
def test_a_device_that_keeps_nothing_is_refused_as_a_ledger(device: str) -> None:
    with pytest.raises(LedgerError, match="is not a regular file"):
        check_ledger_path(device)


@pytest.mark.parametrize("how", ["deleted", "moved", "replaced", "folder replaced by a file"])
def test_a_ledger_deleted_or_moved_during_the_run_stops_it(tmp_path: Path, how: str) -> None:
    """Its path no longer holds the run's records, nor its lock: a second run could start
    on it and send every intent again."""
    (tmp_path / "d").mkdir()
    path = tmp_path / "d" / "l.jsonl"
    errors: list[OSError] = []
    writer = LedgerWriter(str(path), "r", "terminate", None, on_error=errors.append)
    writer.write_ahead(["i-00000001", "i-00000002"])
    if how == "deleted":
        path.unlink()
    elif how == "folder replaced by a file":
        (tmp_path / "d").rename(tmp_path / "d2")
        (tmp_path / "d").write_text("")  # the path's folder is a file now: ENOTDIR
    else:
        path.rename(tmp_path / "moved.jsonl")
        if how == "replaced":
            path.write_text("")
    writer.write("i-00000001", "succeeded")
    lost = writer.close()
    said = "deleted" if how == "deleted" else "moved or replaced"
    assert len(errors) == 1 and said in str(errors[0])
    assert writer.error is not None
    assert [r.id for r in lost] == ["i-00000001"]


# Merging


TIMES = [f"2026-01-0{day}T00:00:00.000000Z" for day in range(1, 4)]

# Few values per field, so records of one intent collide and tie often.
records = st.builds(
    Record,
    ts=st.sampled_from(TIMES),
    run=st.sampled_from(["a", "b", "c"]),
    seq=st.integers(1, 4),
    action=st.sampled_from(["terminate", "stop"]),
    id=st.sampled_from(["i-00000001", "i-00000002", "i-00000003"]),
    status=st.sampled_from(STATUSES),
    region=st.sampled_from([None, "eu-west-1", "us-east-1"]),
    account=st.sampled_from([None, "111111111111"]),
    code=st.sampled_from([None, "Boom", REACHED_CODE]),
    reached=st.sampled_from([None, TIMES[0]]),
    started=st.sampled_from([None, *TIMES]),
)
record_sets = st.lists(records, max_size=12)
State = dict[tuple[str, str], Record]


def merge(*parts: Iterable[Record]) -> State:
    return fold(itertools.chain(*parts))


@settings(max_examples=200, deadline=None)
@given(record_sets, record_sets, record_sets, st.randoms(use_true_random=False))
def test_merge_is_commutative_associative_and_idempotent(
    a: list[Record], b: list[Record], c: list[Record], rng: random.Random
) -> None:
    assert merge(a, b) == merge(b, a)
    shuffled = list(a)
    rng.shuffle(shuffled)
    assert merge(shuffled) == merge(a)
    assert merge(merge(a, b).values(), c) == merge(a, merge(b, c).values())
    assert merge(merge(a).values(), c) == merge(a, merge(c).values()) == merge(a, c)
    assert merge(a, a) == merge(a) == merge(merge(a).values())


def _write_ledger(path: Path, part: Iterable[Record]) -> str:
    path.write_text("".join(record.to_json() + "\n" for record in part))
    return str(path)


@pytest.fixture(scope="module")
def shard_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # Module-scoped: hypothesis reuses it across examples, each writing its files anew.
    return tmp_path_factory.mktemp("shards")


@settings(max_examples=150, deadline=None)
@given(record_sets, st.lists(st.integers(0, 3), max_size=12))
def test_shard_ledgers_of_any_split_merge_to_the_whole(
    shard_dir: Path, whole: list[Record], shard_of: list[int]
) -> None:
    shards: list[list[Record]] = [[] for _ in range(4)]
    for index, record in enumerate(whole):
        shards[shard_of[index] if index < len(shard_of) else 0].append(record)
    paths = [_write_ledger(shard_dir / f"{n}.jsonl", part) for n, part in enumerate(shards)]
    expected = fold(whole)
    assert merge(*(fold(part).values() for part in shards)) == expected
    assert fold_files(paths) == expected
    out = shard_dir / "merged.jsonl"
    out.unlink(missing_ok=True)  # another example's (the folder outlives one)
    assert merge_files(paths, str(out)) == len(expected)
    assert fold_files([str(out)]) == expected
    merged = list(read_records(str(out)))
    # Every record of the shards, once: what a rollback reads under the winners too.
    marks = {(r.run, r.seq, r.action, r.id) for r in whole}
    assert len(merged) == len(marks)
    assert {(r.run, r.seq, r.action, r.id) for r in merged} == marks
    before = out.read_bytes()
    assert merge_files([str(out)], str(out)) == len(expected)  # a merged ledger is a fixpoint
    assert out.read_bytes() == before


@settings(max_examples=200, deadline=None)
@given(
    record_sets,
    st.lists(
        st.builds(
            Record,
            ts=st.sampled_from([*TIMES, "2099-12-31T23:59:59.999999Z"]),
            run=st.sampled_from(["a", "b", "z"]),
            seq=st.integers(1, 1000),
            action=st.sampled_from(["terminate", "stop"]),
            id=st.sampled_from(["i-00000001", "i-00000002", "i-00000003"]),
            status=st.just("pending"),
            intents=st.sampled_from([None, 3]),
            started=st.sampled_from([None, *TIMES]),
        ),
        max_size=12,
    ),
)
def test_pending_records_mask_only_what_a_later_run_may_undo(
    outcomes: list[Record], pending: list[Record]
) -> None:
    before = fold(outcomes)
    after = merge(outcomes, pending)
    for key, record in before.items():
        if record.status == "pending":
            continue
        run = (record.started or record.ts, record.run)
        later = [p for p in pending if (p.action, p.id) == key and (p.started or p.ts, p.run) > run]
        if (record.action == "terminate" and record.status == "succeeded") or not later:
            assert after[key] is record  # a termination is final; its own run's intent is no news
        else:
            assert after[key].status == "pending"  # a later run is at it again: not known done


RUNS = {"a": TIMES[0], "b": TIMES[1], "c": TIMES[1], "d": TIMES[2]}  # b and c started together


@st.composite
def run_records(draw: st.DrawFn) -> Record:
    """A record as writers write them: every record of a run names the run's start."""
    run = draw(st.sampled_from(sorted(RUNS)))
    return Record(
        ts=draw(st.sampled_from([*TIMES, "2026-01-04T00:00:00.000000Z"])),
        run=run,
        seq=draw(st.integers(1, 6)),
        action=draw(st.sampled_from(["terminate", "stop", "start", "reboot"])),
        id=draw(st.sampled_from(["i-00000001", "i-00000002"])),
        status=draw(st.sampled_from(STATUSES)),
        started=None if run == "a" and draw(st.booleans()) else RUNS[run],
    )


def _expected(records: list[Record]) -> dict[tuple[str, str], tuple[str, str]]:
    """(run, status) of each intent, by the rule as DESIGN.md states it."""
    out: dict[tuple[str, str], tuple[str, str]] = {}
    for key in {(r.action, r.id) for r in records}:
        mine = [r for r in records if (r.action, r.id) == key]
        if key[0] == "terminate" and any(r.status == "succeeded" for r in mine):
            done = [r for r in mine if r.status == "succeeded"]
            out[key] = (max(done, key=lambda r: (r.started or r.ts, r.run)).run, "succeeded")
            continue
        latest = max(mine, key=lambda r: (r.started or r.ts, r.run))
        runs = [
            r
            for r in mine
            if (r.started or r.ts, r.run) == (latest.started or latest.ts, latest.run)
        ]
        out[key] = (latest.run, max(runs, key=lambda r: STATUS_RANK[r.status]).status)
    return out


@settings(max_examples=300, deadline=None)
@given(
    st.lists(run_records(), max_size=16),
    st.lists(st.integers(0, 3), max_size=16),
    st.randoms(use_true_random=False),
)
def test_the_fold_follows_the_action_over_any_interleaving_of_runs_and_shards(
    whole: list[Record], shard_of: list[int], rng: random.Random
) -> None:
    expected = _expected(whole)
    state = fold(whole)
    assert {k: (r.run, r.status) for k, r in state.items()} == expected
    shards: list[list[Record]] = [[] for _ in range(4)]
    for index, record in enumerate(whole):
        shards[shard_of[index] if index < len(shard_of) else 0].append(record)
    for part in shards:
        rng.shuffle(part)
    rng.shuffle(shards)
    # Shards folded on their own, then merged in any order and grouping: the same state.
    folded = [list(fold(part).values()) for part in shards]
    assert merge(*folded) == state
    assert (
        merge(merge(folded[0], folded[1]).values(), merge(folded[2], folded[3]).values()) == state
    )
    assert merge(merge(*folded).values(), whole) == state


def test_the_latest_run_decides_a_stop_and_a_success_is_final_for_terminate() -> None:
    first = Record(TIMES[0], "a", 2, "stop", "i-00000001", "succeeded", started=TIMES[0])
    # A later run of the same stop, killed before this intent was answered.
    again = Record(TIMES[1], "b", 1, "stop", "i-00000001", "pending", started=TIMES[1])
    assert fold([first, again])[("stop", "i-00000001")] is again
    kill = replace(first, action="terminate")
    retry = replace(again, action="terminate")
    assert fold([retry, kill])[("terminate", "i-00000001")] is kill
    # Within one run, the status rank: its outcome beats its own write-ahead record.
    answer = replace(again, seq=5, ts=TIMES[0], status="failed")
    assert fold([answer, again])[("stop", "i-00000001")] is answer


def test_a_tie_between_two_records_does_not_depend_on_input_order() -> None:
    # Only a reused run id can tie; the merge must still be a function of the set.
    one = Record(TIMES[0], "a", 1, "terminate", "i-00000001", "failed", code="X")
    two = Record(TIMES[0], "a", 1, "terminate", "i-00000001", "failed", code="Y")
    assert fold([one, two]) == fold([two, one])


def test_succeeded_beats_a_later_failure() -> None:
    done = Record("2026-01-01T00:00:00Z", "a", 1, "terminate", "i-00000001", "succeeded")
    later = Record("2026-02-01T00:00:00Z", "b", 1, "terminate", "i-00000001", "failed")
    assert fold([later, done])[("terminate", "i-00000001")] is done


def test_a_run_starting_while_its_ledger_is_asked_about_is_not_refused(tmp_path: Path) -> None:
    """A merge or a ledger read asks whether a run holds a ledger by taking its lock for
    an instant: a run starting in that instant waits it out, and is not refused as if
    another run held it."""
    import fcntl

    from swarm_cli.ledger.lock import hold_ledger

    def held_then_written() -> None:
        with hold_ledger(str(path)):
            LedgerWriter(str(path), "run-a", "reboot", "us-east-1").close()

    path = tmp_path / "l.jsonl"
    path.touch()
    for start in (
        held_then_written,
        lambda: LedgerWriter(str(path), "run-b", "reboot", "us-east-1").close(),
    ):
        probe = os.open(path, os.O_RDONLY)
        fcntl.flock(probe, fcntl.LOCK_EX | fcntl.LOCK_NB)  # what in_use holds, for an instant
        threading.Timer(0.05, os.close, (probe,)).start()
        start()
    # Held for good (another run), it is still refused.
    other = os.open(path, os.O_RDONLY)
    fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)
    try:
        with pytest.raises(LedgerError, match="is in use by another swarm run"):
            LedgerWriter(str(path), "run-c", "reboot", "us-east-1")
        with pytest.raises(LedgerError, match="is in use by another swarm run"):
            hold_ledger(str(path)).__enter__()
    finally:
        os.close(other)


def test_a_ledger_is_locked_as_nfs_needs_it(tmp_path: Path) -> None:
    """Over NFS, flock is a byte-range lock: an exclusive one (a run's) needs the file
    open for writing, and a shared one (what a question about it takes) does not."""
    import fcntl

    from swarm_cli.ledger.lock import hold_ledger, in_use

    path = tmp_path / "l.jsonl"
    path.touch()

    def modes() -> list[int]:
        """The access modes of this process's descriptors of the ledger."""
        mine = path.stat()
        found = []
        for fd in os.listdir("/proc/self/fd"):
            try:
                there = os.stat(f"/proc/self/fd/{fd}")
                info = Path(f"/proc/self/fdinfo/{fd}").read_text()
            except OSError:
                continue
            if (there.st_dev, there.st_ino) == (mine.st_dev, mine.st_ino):
                flags = re.search(r"flags:\s+(\d+)", info)
                assert flags is not None
                found.append(int(flags.group(1), 8) & os.O_ACCMODE)
        return found

    with hold_ledger(str(path)):
        assert modes() == [os.O_RDWR]
    # Another question's shared lock is no run; a run's exclusive one is.
    for lock, holds in ((fcntl.LOCK_SH, False), (fcntl.LOCK_EX, True)):
        other = os.open(path, os.O_RDONLY)
        fcntl.flock(other, lock | fcntl.LOCK_NB)
        try:
            assert in_use(str(path)) is holds
        finally:
            os.close(other)


def test_one_run_at_a_time_writes_a_ledger(tmp_path: Path) -> None:
    """Two runs on one ledger would both send its intents (a pod restarted beside its
    old self): the second is refused before anything is sent; once the first closes,
    or is killed, the ledger is free."""
    path = tmp_path / "l.jsonl"
    first = LedgerWriter(str(path), "run-a", "reboot", "us-east-1")
    with pytest.raises(LedgerError, match="is in use by another swarm run"):
        LedgerWriter(str(path), "run-b", "reboot", "us-east-1")
    # Another process: as a second swarm would be.
    code = (
        "import sys; from swarm_cli.ledger import LedgerWriter, LedgerError\n"
        "try: LedgerWriter(sys.argv[1], 'run-c', 'reboot', 'us-east-1')\n"
        "except LedgerError as e: print(e); sys.exit(3)\n"
    )
    other = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True)
    assert other.returncode == 3 and "in use" in other.stdout, other.stderr
    first.close()
    LedgerWriter(str(path), "run-b", "reboot", "us-east-1").close()
    # A device is no file to hold: two runs may write to /dev/null.
    LedgerWriter(os.devnull, "a", "reboot", None)
    LedgerWriter(os.devnull, "b", "reboot", None)


def test_a_command_holds_its_ledger_between_its_writers(tmp_path: Path) -> None:
    """A run's writer closes before its --wait writes: the command's hold keeps the
    ledger its own in between, and its own writers open it as they please."""
    from swarm_cli.ledger import LedgerInUse, hold_ledger

    path = tmp_path / "l.jsonl"
    code = (
        "import sys; from swarm_cli.ledger import LedgerWriter, LedgerError\n"
        "try: LedgerWriter(sys.argv[1], 'other', 'reboot', 'us-east-1')\n"
        "except LedgerError as e: print(e); sys.exit(3)\n"
    )

    def other() -> int:
        return subprocess.run(
            [sys.executable, "-c", code, str(path)], capture_output=True
        ).returncode

    with hold_ledger(str(path)):
        run = LedgerWriter(str(path), "run", "reboot", "us-east-1")
        run.write_ahead(["i-00000001"])
        run.close()
        assert other() == 3  # between the run and its wait: still held
        wait = LedgerWriter(str(path), "run", "reboot", "us-east-1", seq_after=1)
        wait.close()
    assert other() == 0
    # A merge does not replace a ledger a run holds.
    with hold_ledger(str(path)):
        before = path.read_bytes()
        code_merge = (
            "import sys; from swarm_cli.ledger import merge_files, LedgerInUse\n"
            "try: merge_files([sys.argv[1]], sys.argv[1])\n"
            "except LedgerInUse as e: print(e); sys.exit(3)\n"
        )
        merged = subprocess.run(
            [sys.executable, "-c", code_merge, str(path)], capture_output=True, text=True
        )
        assert merged.returncode == 3 and "merge once that run has ended" in merged.stdout
        assert path.read_bytes() == before
    # A hold on a file it made, that nothing wrote to, leaves no file behind.
    fresh = tmp_path / "fresh.jsonl"
    with hold_ledger(str(fresh)):
        assert fresh.exists()
    assert not fresh.exists()
    with pytest.raises(LedgerInUse):
        held = subprocess.Popen(
            [sys.executable, "-c", "import sys,time; from swarm_cli.ledger import hold_ledger\n"
             "with hold_ledger(sys.argv[1]):\n print('held', flush=True); time.sleep(30)\n",
             str(fresh)],
            stdout=subprocess.PIPE, text=True,
        )  # fmt: skip
        try:
            assert held.stdout is not None and held.stdout.readline().strip() == "held"
            with hold_ledger(str(fresh)):
                pass
        finally:
            held.kill()
            held.wait()


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


# One ledger for many accounts, regions and actions


def test_each_record_may_name_its_own_account_region_and_action(tmp_path: Path) -> None:
    path = tmp_path / "l.jsonl"
    writer = LedgerWriter(str(path), "r", "terminate", "eu-west-1", account="111111111111")
    writer.write_ahead(["i-1", "i-2"], region="us-east-1", account="222222222222", action="stop")
    writer.write_ahead(["i-3"])
    writer.write("i-1", "succeeded", region="us-east-1", account="222222222222", action="stop")
    writer.write("i-3", "failed", region=None, account=None)  # None is a value, not "default"
    assert writer.close() == []
    got = [
        (r.seq, r.action, r.id, r.status, r.region, r.account, r.block, r.intents)
        for r in read_records(str(path))
    ]
    assert got == [
        (1, "stop", "i-1", "pending", "us-east-1", "222222222222", 1, 2),
        (2, "stop", "i-2", "pending", "us-east-1", "222222222222", 1, 2),
        (3, "terminate", "i-3", "pending", "eu-west-1", "111111111111", 3, 1),
        (4, "stop", "i-1", "succeeded", "us-east-1", "222222222222", None, None),
        (5, "terminate", "i-3", "failed", None, None, None, None),
    ]
    state = fold_files([str(path)])
    assert (state[("stop", "i-1")].account, state[("stop", "i-1")].region) == (
        "222222222222",
        "us-east-1",
    )


def test_a_reached_record_merges_by_the_usual_order(tmp_path: Path) -> None:
    path = tmp_path / "l.jsonl"
    writer = LedgerWriter(str(path), "r", "stop", "eu-west-1")
    writer.write("i-1", "succeeded", attempts=1)
    writer.write("i-1", "succeeded", code=REACHED_CODE, reached="2026-01-01T00:00:05Z")
    writer.close()
    done, reached = read_records(str(path))
    assert (reached.code, reached.reached, done.reached) == (
        REACHED_CODE,
        "2026-01-01T00:00:05Z",
        None,
    )
    assert fold([reached, done])[("stop", "i-1")] == reached  # the later of two succeeded
    # The reached time is no part of the order: an earlier record wins nothing by it.
    early = Record(TIMES[0], "a", 1, "stop", "i-1", "succeeded", reached=TIMES[2])
    late = Record(TIMES[1], "a", 2, "stop", "i-1", "succeeded")
    assert early.order() < late.order()
    assert fold([early, late])[("stop", "i-1")] is late


def test_an_unknown_status_is_refused_before_it_reaches_the_ledger(tmp_path: Path) -> None:
    writer = LedgerWriter(str(tmp_path / "l.jsonl"), "r", "terminate", None)
    with pytest.raises(ValueError, match="unknown status 'done'"):
        writer.write("i-1", "done")
    assert writer.close() == []


def test_old_records_without_an_account_are_the_same_intent_as_new_ones(tmp_path: Path) -> None:
    # Ledgers of older swarms name the region but no account.
    old = Record(TIMES[0], "old", 1, "terminate", "i-1", "pending", region="eu-west-1")
    path = tmp_path / "l.jsonl"
    _write_ledger(path, [old])
    writer = LedgerWriter(str(path), "new", "terminate", "eu-west-1", account="111111111111")
    writer.write("i-1", "succeeded")
    writer.close()
    state = fold_files([str(path)])
    assert list(state) == [("terminate", "i-1")]
    assert (state[("terminate", "i-1")].status, state[("terminate", "i-1")].account) == (
        "succeeded",
        "111111111111",
    )


# Telling a cut-short write-ahead from a whole one, block by block

BLOCKS = {"eu-west-1": ["i-a1", "i-a2"], "us-east-1": ["i-b1", "i-b2", "i-b3"]}
BLOCKS["ap-south-1"] = ["i-c1", "i-c2", "i-c3", "i-c4"]
BLOCK_ENDS = [2, 5, 9]  # the number of lines after each block


def _three_blocks(path: Path, *, run_intents: int | None) -> list[bytes]:
    writer = LedgerWriter(str(path), "r", "terminate", None)
    for region, ids in BLOCKS.items():
        writer.write_ahead(ids, region=region, run_intents=run_intents)
    writer.write("i-b2", "succeeded", region="us-east-1")
    writer.write("i-c4", "failed", region="ap-south-1")
    writer.close()
    return path.read_bytes().splitlines(keepends=True)


@pytest.mark.parametrize("run_intents", [None, 9])
@pytest.mark.parametrize("torn", [False, True])
def test_a_kill_at_any_line_of_several_blocks_is_told_from_a_whole_run(
    tmp_path: Path, run_intents: int | None, torn: bool
) -> None:
    lines = _three_blocks(tmp_path / "whole.jsonl", run_intents=run_intents)
    cut = tmp_path / "cut.jsonl"
    for kept in range(len(lines) + 1):
        # What a kill -9 after `kept` lines leaves, maybe with half of the next one.
        tail = lines[kept][:20] if torn and kept < len(lines) else b""
        cut.write_bytes(b"".join(lines[:kept]) + tail)
        found: list[CutShort] = []
        fold_files([str(cut)], cut_short=found)
        if run_intents is None:
            # Between two blocks nothing tells a kill from a run that had no more.
            expected = 0 < kept < 9 and kept not in BLOCK_ENDS
            declared = next((end for end in BLOCK_ENDS if end >= kept), 9)
        else:
            expected = 0 < kept < 9
            declared = 9
        assert found == ([CutShort("r", kept, declared)] if expected else []), kept


def test_later_records_of_the_run_prove_its_blocks_whole() -> None:
    watch = WriteAheadCheck()
    for seq in (1, 2):  # a block of 3 with its last record missing ...
        watch(Record(TIMES[0], "r", seq, "stop", f"i-{seq}", "pending", intents=3, block=1))
    assert watch.cut_short() == [CutShort("r", 2, 3)]
    watch(Record(TIMES[1], "r", 9, "stop", "i-3", "succeeded"))  # ... and a record after it
    assert watch.cut_short() == []


def test_a_block_with_a_hole_but_its_last_record_is_whole() -> None:
    # A kill leaves a prefix; a hole is a merged ledger where another run
    # decided that intent, so the block was written whole.
    watch = WriteAheadCheck()
    for seq in (1, 3):
        watch(Record(TIMES[0], "r", seq, "stop", f"i-{seq}", "pending", intents=3, block=1))
    watch(Record(TIMES[1], "r2", 1, "stop", "i-2", "succeeded"))
    assert watch.cut_short() == []


def test_a_merge_keeps_the_evidence_of_a_block_cut_short(tmp_path: Path) -> None:
    # A run stopped after 3 of its 5 intents; a later run did those 3. Merged, the
    # ledger must still say the first run's list was not all recorded.
    ids = [f"i-{n:08x}" for n in range(5)]
    cut = tmp_path / "cut.jsonl"
    writer = LedgerWriter(str(cut), "r1", "terminate", None)
    writer.write_ahead(ids)
    writer.close()
    cut.write_bytes(b"".join(cut.read_bytes().splitlines(keepends=True)[:3]))
    later = tmp_path / "later.jsonl"
    writer = LedgerWriter(str(later), "r2", "terminate", None)
    writer.write_ahead(ids[:3])
    for instance in ids[:3]:
        writer.write(instance, "succeeded")
    writer.close()
    merged = tmp_path / "merged.jsonl"
    found: list[CutShort] = []
    assert merge_files([str(cut), str(later)], str(merged), cut_short=found) == 3
    assert found == [CutShort("r1", 3, 5)]
    again: list[CutShort] = []
    state = fold_files([str(merged)], cut_short=again)
    assert again == found
    assert state == fold_files([str(cut), str(later)])
    assert {r.status for r in state.values()} == {"succeeded"}
    # Every record of both, once; merging the merged ledger keeps it, and adds no line.
    assert len(merged.read_bytes().splitlines()) == 3 + 6
    before = merged.read_bytes()
    assert merge_files([str(merged)], str(merged), cut_short=again) == 3
    assert merged.read_bytes() == before
    assert again == found * 2


def test_a_block_seen_twice_counts_once_and_old_records_still_check(tmp_path: Path) -> None:
    # Records of the previous format: `intents` but no `block`, one block per run.
    old = [Record(TIMES[0], "old", n, "stop", f"i-{n}", "pending", intents=4) for n in (1, 2, 3)]
    path = _write_ledger(tmp_path / "old.jsonl", old)
    found: list[CutShort] = []
    fold_files([path, path], cut_short=found)
    assert found == [CutShort("old", 3, 4)]
    whole = _write_ledger(tmp_path / "whole.jsonl", [*old, replace(old[0], seq=4, id="i-4")])
    found.clear()
    fold_files([whole, whole], cut_short=found)
    assert found == []


def test_outcomes_queued_during_a_write_ahead_reach_the_file_after_the_block(
    tmp_path: Path,
) -> None:
    # WriteAheadCheck takes a later record of the run as proof a block is whole;
    # that holds only if no such record reaches the file before the block ends.
    path = tmp_path / "l.jsonl"
    writer = LedgerWriter(str(path), "r", "terminate", None)
    stop = threading.Event()

    def outcomes() -> None:
        n = 0
        while not stop.is_set():
            writer.write(f"i-out-{n}", "succeeded")
            n += 1

    thread = threading.Thread(target=outcomes)
    thread.start()
    try:
        for block in range(5):
            writer.write_ahead([f"i-{block}-{n}" for n in range(5000)])
    finally:
        stop.set()
        thread.join()
    assert writer.close() == []
    position: dict[int, int] = {}
    blocks: dict[int, int] = {}
    for index, record in enumerate(read_records(str(path))):
        position[record.seq] = index
        if record.block is not None:
            blocks[record.block] = record.block + record.intents - 1  # type: ignore[operator]
    assert len(blocks) == 5
    for last in blocks.values():
        assert all(position[seq] > position[last] for seq in position if seq > last)


def test_write_ahead_refuses_a_run_total_below_its_block(tmp_path: Path) -> None:
    writer = LedgerWriter(str(tmp_path / "l.jsonl"), "r", "terminate", None)
    with pytest.raises(ValueError, match="run_intents"):
        writer.write_ahead(["i-1", "i-2"], run_intents=1)
    writer.close()


# Merging into one ledger


def test_merging_a_resumed_multi_region_run_reports_no_cut_short_block(tmp_path: Path) -> None:
    first = tmp_path / "first.jsonl"
    lines = _three_blocks(first, run_intents=9)
    killed = tmp_path / "killed.jsonl"
    killed.write_bytes(b"".join(lines[:4]))  # killed inside the second block
    resume = tmp_path / "resume.jsonl"
    writer = LedgerWriter(str(resume), "r2", "terminate", None)
    # The resume decides the tail of the first run's blocks, and only that.
    writer.write_ahead(["i-a2"], region="eu-west-1")
    writer.write_ahead(["i-c4"], region="ap-south-1")
    writer.write("i-a2", "succeeded", region="eu-west-1")
    writer.close()
    out = tmp_path / "merged.jsonl"
    found: list[CutShort] = []
    assert merge_files([str(first), str(resume)], str(out), cut_short=found) == 9
    assert found == []
    fold_files([str(out)], cut_short=found)
    assert found == []
    # A cut-short input is reported by the merge, which still sees every record.
    assert (
        merge_files([str(killed), str(resume)], str(tmp_path / "again.jsonl"), cut_short=found) == 5
    )
    assert found == [CutShort("r", 4, 9)]


def test_a_merge_copies_every_line_verbatim_once(tmp_path: Path) -> None:
    later = dict(_valid(id="i-2", status="succeeded"), shard=7)  # a field a later swarm added
    a = tmp_path / "a.jsonl"
    a.write_bytes(
        json.dumps(later).encode()
        + b"\r\n"
        + json.dumps(_valid(id="i-1", action="stop")).encode()
        + b"\n"
        + b'{"v":1,"ts":\n'
    )
    b = _write_ledger(
        tmp_path / "b.jsonl", [Record(TIMES[0], "x", 1, "terminate", "i-2", "failed")]
    )
    out = tmp_path / "out.jsonl"
    damaged: list[Damaged] = []
    assert merge_files([str(a), b], str(out), damaged) == 2
    # Every record, once, as read (the CRLF aside): a field a later swarm added is kept.
    assert sorted(out.read_bytes().splitlines()) == sorted(
        [
            json.dumps(_valid(id="i-1", action="stop")).encode(),
            json.dumps(later).encode(),
            Path(b).read_bytes().rstrip(b"\n"),
        ]
    )
    before = out.read_bytes()
    assert merge_files([str(out)], str(out)) == 2
    assert out.read_bytes() == before
    assert damaged == [Damaged(str(a), 3, "not JSON")]


def test_a_merge_may_write_over_one_of_its_inputs(tmp_path: Path) -> None:
    a = _write_ledger(tmp_path / "a.jsonl", [Record(TIMES[0], "x", 1, "stop", "i-1", "pending")])
    b = _write_ledger(tmp_path / "b.jsonl", [Record(TIMES[1], "y", 1, "stop", "i-1", "succeeded")])
    os.chmod(a, 0o600)
    expected = fold_files([a, b])
    assert merge_files([a, b], a) == 1
    assert fold_files([a]) == expected
    assert os.stat(a).st_mode & 0o777 == 0o600  # a private ledger stays private
    assert sorted(os.listdir(tmp_path)) == ["a.jsonl", "b.jsonl"]  # no temporary file left


def test_a_merge_never_replaces_a_link_a_device_or_a_fifo(tmp_path: Path) -> None:
    a = _write_ledger(tmp_path / "a.jsonl", [Record(TIMES[0], "x", 1, "stop", "i-1", "pending")])
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "link").symlink_to(a)
    for out, says in (
        (tmp_path / "fifo", "is not a regular file"),
        (Path("/dev/null"), "is not a regular file"),
        (tmp_path / "link", "is a symbolic link"),
    ):
        with pytest.raises(LedgerError, match=says):
            merge_files([a], str(out))
    assert (tmp_path / "fifo").is_fifo() and (tmp_path / "link").is_symlink()
    assert Path("/dev/null").is_char_device()


def test_a_merge_never_replaces_a_file_that_is_not_a_ledger(tmp_path: Path) -> None:
    a = _write_ledger(tmp_path / "a.jsonl", [Record(TIMES[0], "x", 1, "stop", "i-1", "pending")])
    ids = tmp_path / "ids.txt"
    ids.write_text("i-0123456789abcdef0\n")
    with pytest.raises(LedgerError, match="is not a swarm ledger"):
        merge_files([a], str(ids))
    assert ids.read_text() == "i-0123456789abcdef0\n"
    with pytest.raises(LedgerError, match="pass a file path"):
        merge_files([a], "-")
    (tmp_path / "empty.jsonl").write_text("")
    assert merge_files([a], str(tmp_path / "empty.jsonl")) == 1  # an empty file is fine


def test_a_failed_merge_leaves_the_output_as_it_was(tmp_path: Path) -> None:
    newer = _ledger(tmp_path / "newer.jsonl", json.dumps(_valid(v=FORMAT_VERSION + 1)).encode())
    out = tmp_path / "out.jsonl"
    kept = json.dumps(_valid(id="i-9")) + "\n"
    out.write_text(kept)
    with pytest.raises(LedgerVersionError):
        merge_files([newer], str(out))
    assert out.read_text() == kept
    with pytest.raises(LedgerVersionError):  # a new output is not made before the end
        merge_files([newer], str(tmp_path / "new.jsonl"))
    assert not (tmp_path / "new.jsonl").exists()
    with pytest.raises(LedgerError, match=r"^cannot read the ledger .*: No such file"):
        merge_files([newer.replace("newer", "missing")], str(out))
    (tmp_path / "folder").mkdir()
    good = _write_ledger(
        tmp_path / "good.jsonl", [Record(TIMES[0], "x", 1, "stop", "i-1", "failed")]
    )
    with pytest.raises(LedgerError, match=r"^ledger .*folder is a folder"):
        merge_files([good], str(tmp_path / "folder"))
    with pytest.raises(LedgerError, match=r"^cannot write the ledger .*No such file"):
        merge_files([good], str(tmp_path / "nope" / "out.jsonl"))
    assert sorted(os.listdir(tmp_path)) == [
        "folder",
        "good.jsonl",
        "newer.jsonl",
        "out.jsonl",
    ]


def test_a_later_opposite_run_undoes_a_success_only_where_it_may_have_acted(
    tmp_path: Path,
) -> None:
    from swarm_cli.ledger import MAYBE_DONE, undone

    path = tmp_path / "l.jsonl"
    ids = [f"i-0000000{n}" for n in range(1, 7)]
    stop = LedgerWriter(str(path), "run-a", "stop", "us-east-1")
    stop.write_ahead(ids)
    for i in ids:
        stop.write(i, "succeeded")
    stop.close()
    start = LedgerWriter(str(path), "run-b", "start", "us-east-1")
    start.write_ahead(ids)
    start.write(ids[0], "failed", code="RailUnverified", message="tags not read")
    start.write(ids[1], "pending", code="Interrupted", message="stopped before it was sent")
    start.write(ids[2], "pending", code="CallTimeout", message=f"no answer: {MAYBE_DONE}")
    start.write(ids[4], "failed", code="InternalError", http_status=500)  # may have acted
    start.write(ids[5], "failed", code="IncorrectInstanceState", http_status=400)
    start.close()  # ids[3]: its bare intent (a kill: maybe in flight)
    state = undone(fold(read_records(str(path))))
    stopped = {i: state[("stop", i)] for i in ids}
    statuses = [stopped[i].status for i in ids]
    assert statuses == ["succeeded", "succeeded", "pending", "pending", "pending", "succeeded"]
    assert {stopped[i].code for i in ids[2:5]} == {"UndoneSince"}


def test_of_two_overlapping_runs_the_one_that_acted_last_counts_merged(tmp_path: Path) -> None:
    """A stop of ten instances on one ledger, and a start of the last on another begun
    while the stop ran: the start answered first, the stop reached it after. Ranked by
    when each run began, the merged ledger said the start was done and the stop undone,
    where the instance was stopped."""
    import time

    from swarm_cli.ledger import undone

    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    x = "i-0000000a"
    stop = LedgerWriter(str(a), "run-a", "stop", "us-east-1")
    stop.write_ahead([x])
    time.sleep(0.01)
    start = LedgerWriter(str(b), "run-b", "start", "us-east-1")
    start.write_ahead([x])
    start.write(x, "succeeded", code="WasAlready")
    start.close()
    time.sleep(0.01)
    stop.write(x, "succeeded")
    stop.close()
    for paths in ([a, b], [b, a]):
        state = undone(fold(r for p in paths for r in read_records(str(p))))
        assert state[("stop", x)].status == "succeeded"
        assert (state[("start", x)].status, state[("start", x)].code) == ("pending", "UndoneSince")


def test_a_stop_a_wait_saw_arrive_before_a_start_of_another_run_is_undone_by_it(
    tmp_path: Path,
) -> None:
    """A wait writes its Reached records when it ends: ordered by that record's time, a
    stop whose wait went on after another run started the instance outranked the start,
    and the ledger said stopped of a running instance. It took effect when the wait
    saw it there."""
    import time

    from swarm_cli.ledger import undone, utc_now

    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    x = "i-0000000a"
    stop = LedgerWriter(str(a), "run-a", "stop", "us-east-1", waits="stopped")
    stop.write_ahead([x])
    stop.write(x, "succeeded", attempts=1)
    time.sleep(0.01)
    seen = utc_now()  # the wait saw it stopped ...
    time.sleep(0.01)
    start = LedgerWriter(str(b), "run-b", "start", "us-east-1")
    start.write_ahead([x])
    start.write(x, "succeeded", attempts=1)  # ... then another run started it
    start.close()
    time.sleep(0.01)
    stop.write(x, "succeeded", code=REACHED_CODE, reached=seen)  # the wait ends
    stop.close()
    for paths in ([a, b], [b, a]):
        state = undone(fold(r for p in paths for r in read_records(str(p))))
        assert (state[("stop", x)].status, state[("stop", x)].code) == ("pending", "UndoneSince")
        assert state[("start", x)].status == "succeeded"


def test_a_success_that_its_run_was_to_wait_for_and_never_did_is_not_known_done(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """stop --wait killed after its calls, before its wait recorded anything: a success
    alone would pass the gate with the instances still stopping (or started since). One
    the wait saw and a terminate's stay done; one a resume found on its way there is not
    done until its wait sees it; merged, the same."""
    from swarm_cli.ledger import MAYBE_DONE, undone

    path = tmp_path / "l.jsonl"
    ids = ["i-00000001", "i-00000002", "i-00000003", "i-00000004", "i-00000005"]
    run = LedgerWriter(str(path), "run-a", "stop", "us-east-1", waits="stopped")
    run.write_ahead(ids)
    run.write(ids[0], "succeeded", attempts=1)
    run.write(ids[1], "succeeded", attempts=1)
    run.write(ids[1], "succeeded", code=REACHED_CODE, reached="2026-01-01T00:00:05Z")
    # A resume that waits found one stopped, another still stopping: its wait sees to both.
    run.write(ids[2], "succeeded", code="AlreadyInState", message="stopped per Describe…")
    run.write(ids[2], "succeeded", code=REACHED_CODE, reached="2026-01-01T00:00:05Z")
    run.write(ids[3], "succeeded", code="AlreadyInState", message="stopping per Describe…")
    run.write(ids[4], "failed", code="IncorrectInstanceState", http_status=400)
    run.close()
    gone = LedgerWriter(str(path), "run-b", "terminate", "us-east-1", waits="terminated")
    gone.write_ahead(ids[:1])
    gone.write(ids[0], "succeeded", attempts=1)
    gone.close()
    assert all(r.waits == "stopped" for r in read_records(str(path)) if r.run == "run-a")
    merged = tmp_path / "m.jsonl"
    merge_files([str(path)], str(merged))
    for ledger in (path, merged):
        state = undone(fold(read_records(str(ledger))))
        first = state[("stop", ids[0])]
        assert (first.status, first.code) == ("pending", "NotChecked"), first
        assert first.message is not None and first.message.endswith(MAYBE_DONE)
        assert "its run was to --wait for it (stopped)" in first.message
        statuses = [state[("stop", i)].status for i in ids[1:]]
        assert statuses == ["succeeded", "succeeded", "pending", "failed"]
        assert state[("terminate", ids[0])].status == "succeeded"
        assert succeeded_ids(str(ledger), "stop") == set(ids[1:3])
    # A later run that saw it there decides.
    again = LedgerWriter(str(path), "run-c", "stop", "us-east-1")
    again.write_ahead(ids[:1])
    again.write(ids[0], "succeeded", code="AlreadyInState")
    again.close()
    assert undone(fold(read_records(str(path))))[("stop", ids[0])].status == "succeeded"
    # Format 2 for the records that say so, 1 for the rest: a swarm that reads format 1
    # would take the field for nothing and such a success for done, so it refuses them.
    versions = {(r.run, r.v) for r in read_records(str(path))}
    assert versions == {("run-a", 2), ("run-b", 2), ("run-c", 1)}
    monkeypatch.setattr(record_module, "FORMAT_VERSION", 1)
    with pytest.raises(LedgerVersionError, match="upgrade swarm"):
        list(read_records(str(path)))


def test_a_merge_keeps_what_a_rollback_reads_when_later_runs_decided_some_intents(
    tmp_path: Path,
) -> None:
    """Run A stops X and Y in one call, killed in flight; its resume B finds Y stopped
    already (AlreadyInState). Merged, A's block still reads whole, and A's bare intent of
    Y is kept: B changed nothing of Y, so A's undo must still look Y up."""
    from swarm_cli.saga import undo_plan

    path = tmp_path / "l.jsonl"
    a = LedgerWriter(str(path), "run-a", "stop", "us-east-1")
    a.write_ahead(["i-0000000x", "i-0000000y"])
    a.close()
    b = LedgerWriter(str(path), "run-b", "stop", "us-east-1")
    b.write_ahead(["i-0000000y"])
    b.write("i-0000000y", "succeeded", code="AlreadyInState")
    b.close()
    merged = tmp_path / "merged.jsonl"
    found: list[CutShort] = []
    merge_files([str(path)], str(merged), cut_short=found)
    assert found == []
    again: list[CutShort] = []
    assert fold_files([str(merged)], cut_short=again) == fold_files([str(path)])
    assert again == []
    plan = undo_plan([str(merged)], ["run-a", "run-b"], allow_empty=True)
    assert plan == undo_plan([str(path)], ["run-a", "run-b"], allow_empty=True)
    assert plan.unsure == undo_plan([str(path)], ["run-a", "run-b"], allow_empty=True).unsure
    assert [i for ids in plan.unsure.values() for i in ids] == ["i-0000000x"]
    alone = undo_plan([str(merged)], "run-a", allow_empty=True)  # B's Y kept A's in flight
    assert [i for ids in alone.unsure.values() for i in ids] == ["i-0000000x", "i-0000000y"]
    before = merged.read_bytes()
    merge_files([str(merged)], str(merged))
    assert merged.read_bytes() == before  # a fixpoint


def test_a_merge_never_shows_a_whole_block_cut_short(tmp_path: Path) -> None:
    """A stops X and Y in one call, killed in flight; its resume B stops Y (a real
    success) and finds X stopped already. Merged, A keeps X's bare intent (it may have
    acted) but not Y's (B's success wins): the block must still read whole, or a rollback
    of the merge takes A for a run that sent nothing and never looks X up."""
    from swarm_cli.saga import undo_plan

    path = tmp_path / "l.jsonl"
    a = LedgerWriter(str(path), "run-a", "stop", "us-east-1")
    a.write_ahead(["i-0000000x", "i-0000000y"])
    a.close()
    b = LedgerWriter(str(path), "run-b", "stop", "us-east-1")
    b.write_ahead(["i-0000000x", "i-0000000y"])
    b.write("i-0000000x", "succeeded", code="AlreadyInState")
    b.write("i-0000000y", "succeeded", attempts=1)
    b.close()
    whole: list[CutShort] = []
    fold_files([str(path)], cut_short=whole)
    assert whole == []
    merged = tmp_path / "merged.jsonl"
    found: list[CutShort] = []
    merge_files([str(path)], str(merged), cut_short=found)
    assert found == []
    again: list[CutShort] = []
    assert fold_files([str(merged)], cut_short=again) == fold_files([str(path)])
    assert again == []
    for runs in (["run-a"], ["run-a", "run-b"]):
        plan = undo_plan([str(merged)], runs, allow_empty=True)
        unmerged = undo_plan([str(path)], runs, allow_empty=True)
        assert plan.unsure == unmerged.unsure
        assert plan.groups == unmerged.groups
    alone = undo_plan([str(merged)], "run-a", allow_empty=True)
    assert "i-0000000x" in [i for ids in alone.unsure.values() for i in ids]
    before = merged.read_bytes()
    merge_files([str(merged)], str(merged))
    assert merged.read_bytes() == before


def test_a_merge_keeps_a_runs_success_under_a_later_one_that_changed_nothing(
    tmp_path: Path,
) -> None:
    """A stops X and Y; B, run again, finds X stopped already (WasAlready). Merged, A's
    success on X stays: undoing A and B together starts both, as from the ledger."""
    from swarm_cli.saga import undo_plan

    path = tmp_path / "l.jsonl"
    a = LedgerWriter(str(path), "run-a", "stop", "us-east-1")
    a.write_ahead(["i-0000000x", "i-0000000y"])
    a.write("i-0000000x", "succeeded", attempts=1)
    a.write("i-0000000y", "succeeded", attempts=1)
    a.close()
    b = LedgerWriter(str(path), "run-b", "stop", "us-east-1")
    b.write_ahead(["i-0000000x"])
    b.write("i-0000000x", "succeeded", code="WasAlready", attempts=1)
    b.close()
    merged = tmp_path / "merged.jsonl"
    merge_files([str(path)], str(merged))
    both = ["run-a", "run-b"]
    plan = undo_plan([str(merged)], both)
    assert sorted(i for ids in plan.groups.values() for i in ids) == ["i-0000000x", "i-0000000y"]
    unmerged = undo_plan([str(path)], both)
    assert sorted(i for ids in unmerged.groups.values() for i in ids) == [
        "i-0000000x",
        "i-0000000y",
    ]
    assert fold_files([str(merged)]) == fold_files([str(path)])
    before = merged.read_bytes()
    merge_files([str(merged)], str(merged))
    assert merged.read_bytes() == before


def test_a_merge_never_replaces_a_ledger_whose_records_the_inputs_lack(tmp_path: Path) -> None:
    """`ledger merge shard1 -o shard2` (a typo) replaced shard 2's records with shard 1's."""
    a = _write_ledger(tmp_path / "a.jsonl", [Record(TIMES[0], "x", 1, "stop", "i-1", "pending")])
    b = _write_ledger(tmp_path / "b.jsonl", [Record(TIMES[1], "y", 1, "stop", "i-2", "pending")])
    before = Path(b).read_bytes()
    with pytest.raises(LedgerError, match="holding 1 record"):
        merge_files([a], b)
    assert Path(b).read_bytes() == before
    out = tmp_path / "all.jsonl"
    assert merge_files([a, b], str(out)) == 2
    assert merge_files([a, b], str(out)) == 2  # again: every record of it is in the inputs
    with pytest.raises(LedgerError):
        merge_files([a], str(out))
