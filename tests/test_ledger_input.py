"""Ledger readers refuse what is not a swarm ledger, and no command leaves an empty one.

``--resume`` and every ``swarm ledger`` command: a file without a single swarm
record, a FIFO or a device is refused (exit 2, nothing sent, nothing
appended); a ledger without records is said to be one, and ``ledger failed``
does not pass it for "nothing left".
"""

from __future__ import annotations

import gzip
import json
import os
from pathlib import Path

import pytest
from test_cli import swarm, write_ids

from swarm_cli.ledger import MAX_LINE_BYTES, Damaged, LedgerError, read_records
from swarm_cli.sandbox import Sandbox

NOT_A_LEDGER = 'null\n[1,2]\n"x"\n'
RECORD = {"v": 1, "ts": "2026-01-01T00:00:00Z", "run": "r", "seq": 1, "action": "stop"}


def record(instance_id: str, status: str) -> str:
    return json.dumps({**RECORD, "id": instance_id, "status": status}) + "\n"


def test_a_file_without_a_swarm_record_is_not_a_ledger(tmp_path: Path) -> None:
    path = tmp_path / "l.jsonl"
    path.write_text(NOT_A_LEDGER)
    with pytest.raises(LedgerError, match="is not a swarm ledger: none of its 3 line"):
        list(read_records(str(path)))


@pytest.mark.parametrize("command", [["failed"], ["summary"], ["merge", "-o", "OUT"]])
def test_ledger_commands_refuse_a_file_that_is_not_a_ledger(
    tmp_path: Path, command: list[str]
) -> None:
    path = tmp_path / "l.jsonl"
    path.write_text(NOT_A_LEDGER)
    args = [a.replace("OUT", str(tmp_path / "out.jsonl")) for a in command]
    code, out, err = swarm("ledger", *args, str(path))
    assert code == 2 and out == "", err
    assert "not a swarm ledger" in err
    assert path.read_text() == NOT_A_LEDGER and not (tmp_path / "out.jsonl").exists()


@pytest.mark.parametrize("command", [["failed"], ["summary"], ["merge", "-o", "OUT"]])
def test_ledger_commands_refuse_a_fifo_and_a_device_without_hanging(
    tmp_path: Path, command: list[str]
) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    args = [a.replace("OUT", str(tmp_path / "out.jsonl")) for a in command]
    for path in (str(fifo), "/dev/zero"):
        code, out, err = swarm("ledger", *args, path)
        assert code == 2 and out == "", err
        assert "not a regular file" in err


def test_an_empty_ledger_is_no_records_and_ledger_failed_says_so(tmp_path: Path) -> None:
    empty = tmp_path / "empty.jsonl"
    empty.write_bytes(b"")
    code, out, err = swarm("ledger", "failed", str(empty))
    # A CI gate `[ -z "$(swarm ledger failed L)" ]` must not pass: exit 1, a line on stderr.
    assert code == 1 and out == ""
    assert f"{empty} holds no records" in err
    # Among other ledgers (a shard whose job died before writing), the same.
    other = tmp_path / "other.jsonl"
    other.write_text(record("i-00000001", "failed"))
    code, out, err = swarm("ledger", "failed", str(other), str(empty))
    assert code == 1 and out.split() == ["i-00000001"] and "holds no records" in err
    code, out, err = swarm("ledger", "summary", str(empty))
    assert "holds no records" in err
    # Merged, the merged ledger no longer shows it: the merge's exit code does.
    merged = tmp_path / "merged.jsonl"
    code, _, err = swarm("ledger", "merge", str(other), str(empty), "-o", str(merged))
    assert code == 1 and "holds no records" in err, err


def test_a_ledger_of_an_action_swarm_does_not_know_names_no_command_and_passes_no_gate(
    tmp_path: Path,
) -> None:
    # Its lines parse; `ledger failed` listed them and named `swarm frobnicate ...`.
    ledger = tmp_path / "l.jsonl"
    ledger.write_text(record("i-00000001", "pending").replace('"stop"', '"frobnicate"'))
    code, out, err = swarm("ledger", "failed", str(ledger))
    assert code == 2 and out == ""
    assert "records are of frobnicate, which this swarm does not know" in err
    assert "swarm frobnicate" not in err
    # Its summary counts them, and says they are none of swarm's.
    code, out, err = swarm("ledger", "summary", str(ledger))
    assert code == 0 and "frobnicate: 1 pending" in out
    assert "no action this swarm knows" in out
    code, out, err = swarm("ledger", "summary", str(ledger), "--output", "json")
    assert json.loads(out)["unknown"] == ["frobnicate"]


def test_a_last_line_without_its_end_is_a_cut_record_only_if_it_begins_like_one(
    tmp_path: Path,
) -> None:
    # A run killed while writing its first record left the start of a JSON object.
    cut = tmp_path / "cut.jsonl"
    cut.write_bytes(b'{"v": 1, "ts": "20')
    damaged: list[Damaged] = []
    assert list(read_records(str(cut), damaged)) == [] and len(damaged) == 1
    # Zeros where the first write was (a power cut, as some file systems leave it): the same.
    cut.write_bytes(b"\x00" * 64)
    assert list(read_records(str(cut))) == []
    # Anything else with no line end is no ledger (a compressed one has a newline byte or
    # not by chance): refused, not read as "no records".
    for name, content in (("x.jsonl", b"hello"), ("l.jsonl.gz", gzip.compress(b"{}"))):
        path = tmp_path / name
        path.write_bytes(content)
        with pytest.raises(LedgerError, match="is not a swarm ledger"):
            list(read_records(str(path)))
        code, _, err = swarm("ledger", "failed", str(path))
        assert code == 2 and "not a swarm ledger" in err, err


def test_a_run_refuses_a_ledger_path_that_holds_something_else(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    ids_file = write_ids(tmp_path / "ids.txt", sandbox.launch(2))
    notes = tmp_path / "NOTES.md"
    notes.write_text("# my notes\nkeep this\n")
    code, err = run(sandbox, ids_file, notes, "--yes")
    assert code == 2 and "NOTES.md is not a swarm ledger" in err, err
    assert "pass --ledger elsewhere" in err
    assert notes.read_text() == "# my notes\nkeep this\n"  # nothing appended
    assert sandbox.counters.accepted == 0
    # A ledger of an earlier run is added to, as before.
    ledger = tmp_path / "l.jsonl"
    assert run(sandbox, ids_file, ledger, "--yes")[0] == 0
    code, err = run(sandbox, ids_file, ledger, "--yes")
    assert code == 0, err


def test_a_line_longer_than_the_bound_is_skipped_unread(tmp_path: Path) -> None:
    path = tmp_path / "l.jsonl"
    long = b'{"v": 1, "pad": "' + b"x" * (MAX_LINE_BYTES + 10) + b'"}\n'
    path.write_bytes(record("i-00000001", "failed").encode() + long + b"\n")
    with path.open("ab") as handle:
        handle.write(record("i-00000002", "pending").encode())
    damaged: list[Damaged] = []
    assert [r.id for r in read_records(str(path), damaged)] == ["i-00000001", "i-00000002"]
    assert [(d.line, d.reason) for d in damaged] == [(2, f"longer than {MAX_LINE_BYTES} bytes")]
    code, out, err = swarm("ledger", "failed", str(path))
    assert code == 0 and out.split() == ["i-00000001", "i-00000002"]
    assert "line 2 (longer than" in err
    # A line exactly at the bound is still read.
    exact = tmp_path / "exact.jsonl"
    line = record("i-00000003", "failed").encode()
    pad = MAX_LINE_BYTES - len(line)
    exact.write_bytes(line[:-2] + b', "pad": "' + b"y" * (pad - 11) + b'"}\n')
    assert len(exact.read_bytes()) == MAX_LINE_BYTES
    assert [r.id for r in read_records(str(exact))] == ["i-00000003"]


def run(
    box: Sandbox, ids_file: str, ledger: Path, *extra: str, stdin: str | None = None
) -> tuple[int, str]:
    code, _, err = swarm(
        "stop",
        "--ids",
        ids_file,
        "--endpoint-url",
        box.endpoint,
        "--ledger",
        str(ledger),
        "--progress",
        "none",
        *extra,
        stdin=stdin,
    )
    return code, err


def test_resume_refuses_a_file_that_is_not_a_ledger_and_sends_nothing(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    ids = sandbox.launch(3)
    ids_file = write_ids(tmp_path / "ids.txt", ids)
    ledger = tmp_path / "l.jsonl"
    ledger.write_text(NOT_A_LEDGER)
    code, err = run(sandbox, ids_file, ledger, "--resume", "--yes")
    assert code == 2, err
    assert "not a swarm ledger" in err and "nothing was sent" in err
    assert ledger.read_text() == NOT_A_LEDGER  # nothing appended
    assert sandbox.counters.accepted == 0
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    code, err = run(sandbox, ids_file, fifo, "--resume", "--yes")
    assert code == 2 and sandbox.counters.accepted == 0, err


def test_resume_with_an_empty_ledger_sends_everything(sandbox: Sandbox, tmp_path: Path) -> None:
    ids = sandbox.launch(2)
    ledger = tmp_path / "l.jsonl"
    ledger.write_bytes(b"")
    code, err = run(sandbox, write_ids(tmp_path / "ids.txt", ids), ledger, "--resume", "--yes")
    assert code == 0, err
    assert "no records in" in err
    assert sandbox.counters.accepted_by_action.get("StopInstances") == 2


def test_a_success_in_another_region_is_not_one_here(sandbox: Sandbox, tmp_path: Path) -> None:
    """A ledger's success counts for its own region: a resume in us-east-1 skipped two
    instances as stopped because the ledger had them stopped in eu-west-1, and exited 0
    with both still running."""
    from swarm_cli.ledger import LedgerWriter

    ids = sandbox.launch(3)
    ledger = tmp_path / "l.jsonl"
    elsewhere = LedgerWriter(str(ledger), "run-a", "stop", "eu-west-1")
    for i in ids[:2]:
        elsewhere.write(i, "succeeded")
    elsewhere.close()
    here = LedgerWriter(str(ledger), "run-b", "stop", "us-east-1")
    here.write(ids[2], "succeeded")
    here.close()
    code, err = run(sandbox, write_ids(tmp_path / "ids.txt", ids), ledger, "--resume", "--yes")
    assert code == 0, err
    assert "1 already stopped per" in " ".join(err.split()), err
    assert sandbox.counters.accepted_by_action.get("StopInstances") == 2
    assert set(sandbox.states(ids[:2]).values()) <= {"stopping", "stopped"}


def test_a_resume_of_a_list_the_ledger_knows_nothing_of_is_warned(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    """A resume pointed at the wrong ledger, or given another list, or a mistyped --ledger
    that does not exist: it sends the whole list all the same (a CI job passes --resume
    from its first run on), but says so."""
    first, other = sandbox.launch(3), sandbox.launch(2)
    ledger = tmp_path / "l.jsonl"
    assert run(sandbox, write_ids(tmp_path / "a.txt", first), ledger, "--yes")[0] == 0
    code, err = run(sandbox, write_ids(tmp_path / "b.txt", other), ledger, "--resume", "--yes")
    assert code == 0, err
    said = " ".join(err.split())
    assert "warning: resume: none of the 2 ID(s) is in" in said, err
    assert "which holds 3 other stop intent(s) (another list, or another ledger?)" in said
    # Part of the list in it: the usual resume, no warning.
    both = write_ids(tmp_path / "c.txt", [*first, *other])
    code, err = run(sandbox, both, ledger, "--resume", "--yes")
    assert code == 0 and "warning" not in err, err
    # A ledger of another command holds none of this one's intents: said so too.
    code, _, err = swarm(
        "start", "--ids", write_ids(tmp_path / "d.txt", other), "--endpoint-url", sandbox.endpoint,
        "--ledger", str(ledger), "--resume", "--yes", "--progress", "none",
    )  # fmt: skip
    assert code == 0 and "which holds no start intent" in " ".join(err.split()), err
    typo = tmp_path / "typo.jsonl"
    code, err = run(sandbox, both, typo, "--resume", "--yes")
    assert code == 0, err
    assert "(a first run, or a mistyped --ledger?)" in " ".join(err.split()), err


def test_no_command_leaves_an_empty_ledger_behind(sandbox: Sandbox, tmp_path: Path) -> None:
    ids = sandbox.launch(3)
    ids_file = write_ids(tmp_path / "ids.txt", ids)
    ledger = tmp_path / "l.jsonl"
    # Not confirmed: the IDs come on stdin and there is no terminal to ask on.
    code, err = run(sandbox, "-", ledger, stdin="".join(f"{i}\n" for i in ids))
    assert code == 3, err
    # Refused by a rail after the ledger path was checked.
    code, err = run(sandbox, ids_file, ledger, "--yes", "--max-count", "1")
    assert code == 3, err
    assert not ledger.exists()
    assert sandbox.counters.accepted == 0
