"""Writing: the ledger and the other files swarm writes are nobody else's.

The ledger is opened with O_NOFOLLOW in the call that creates it and its
folder synced; --trace, --report and --plan-out may not be the ledger or an
input and are never written through a symbolic link; modes follow the umask;
--wait's reached records continue the run's seqs, and a ledger that fails
them is exit 74 with a message.
"""

from __future__ import annotations

import errno
import json
import os
import resource
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from test_cli import swarm, write_ids

from swarm_cli.html_report import write_html
from swarm_cli.ledger import LedgerError, LedgerWriter, fold, read_records
from swarm_cli.report import Report
from swarm_cli.sandbox import Sandbox
from swarm_cli.trace import Trace


@pytest.fixture
def umask_027() -> Iterator[None]:
    old = os.umask(0o027)
    try:
        yield
    finally:
        os.umask(old)


def test_the_ledger_is_never_written_through_a_symbolic_link(tmp_path: Path) -> None:
    target = tmp_path / "other.jsonl"
    target.write_text("someone else's\n")
    link = tmp_path / "l.jsonl"
    link.symlink_to(target)
    with pytest.raises(LedgerError, match="cannot open the ledger"):
        LedgerWriter(str(link), "r", "stop", "us-east-1")
    assert target.read_text() == "someone else's\n"


def test_creating_the_ledger_syncs_its_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    synced: list[bool] = []
    real = os.fsync

    def fsync(fd: int) -> None:
        synced.append(stat.S_ISDIR(os.fstat(fd).st_mode))
        real(fd)

    monkeypatch.setattr("swarm_cli.ledger.writer.os.fsync", fsync)
    writer = LedgerWriter(str(tmp_path / "l.jsonl"), "r", "stop", "us-east-1")
    assert synced == [True]  # the folder, before any record
    writer.write_ahead(["i-00000001"])
    assert writer.close() == [] and synced[1:] and not any(synced[1:])


def test_trace_plan_out_and_report_never_follow_a_link_and_follow_the_umask(
    tmp_path: Path, umask_027: None
) -> None:
    victim = tmp_path / "victim"
    victim.write_text("keep\n")
    link = tmp_path / "link"
    link.symlink_to(victim)
    with pytest.raises(OSError) as caught:
        Trace(str(link))
    assert caught.value.errno == errno.ELOOP
    assert victim.read_text() == "keep\n"
    trace = Trace(str(tmp_path / "t.jsonl"))
    trace.close()
    report = Report(run="r", action="stop")
    write_html(report, str(tmp_path / "r.html"))
    write_html(report, str(link))  # replaces the link itself, never writes its target
    assert victim.read_text() == "keep\n" and not link.is_symlink()
    for name in ("t.jsonl", "r.html"):
        assert stat.S_IMODE((tmp_path / name).stat().st_mode) == 0o640, name


def stop(box: Sandbox, tmp_path: Path, *extra: str) -> tuple[int, str, str]:
    ids_file = tmp_path / "ids.txt"
    if not ids_file.exists():
        write_ids(ids_file, box.launch(2))
    return swarm(
        "stop",
        "--ids",
        str(ids_file),
        "--endpoint-url",
        box.endpoint,
        "--ledger",
        str(tmp_path / "l.jsonl"),
        "--yes",
        "--progress",
        "none",
        *extra,
    )


@pytest.mark.parametrize(
    ("option", "onto"),
    [
        ("--trace", "l.jsonl"),
        ("--report", "l.jsonl"),
        ("--trace", "ids.txt"),
        ("--report", "ids.txt"),
        ("--plan-out", "l.jsonl"),
    ],
)
def test_an_output_onto_the_ledger_or_the_id_list_is_refused_before_anything_is_sent(
    sandbox: Sandbox, tmp_path: Path, option: str, onto: str
) -> None:
    ledger = tmp_path / "l.jsonl"
    ledger.write_text("earlier runs\n")
    write_ids(tmp_path / "ids.txt", sandbox.launch(2))
    before = {p: p.read_bytes() for p in (ledger, tmp_path / "ids.txt")}
    extra = ["--dry-run"] if option == "--plan-out" else []
    code, _, err = stop(sandbox, tmp_path, option, str(tmp_path / onto), *extra)
    assert code == 2, err
    assert "writing it would destroy it" in err
    assert {p: p.read_bytes() for p in before} == before
    assert sandbox.counters.accepted == 0


def test_an_output_that_is_a_symbolic_link_is_refused(sandbox: Sandbox, tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_text("keep\n")
    (tmp_path / "t.jsonl").symlink_to(victim)
    code, _, err = stop(sandbox, tmp_path, "--trace", str(tmp_path / "t.jsonl"))
    assert code == 2 and "is a symbolic link" in err, err
    assert victim.read_text() == "keep\n" and sandbox.counters.accepted == 0


@pytest.mark.parametrize(
    ("option", "where", "says"),
    [
        ("--report", "folder", "is a folder"),
        ("--report", "nowhere/r.html", "no folder"),
        ("--plan-out", "nowhere/p.txt", "no folder"),
        ("--report", "fifo", "is not a regular file"),
        ("--report", "", "the path is empty"),
    ],
)
def test_an_output_that_cannot_be_a_file_is_refused_before_the_run(
    sandbox: Sandbox, tmp_path: Path, option: str, where: str, says: str
) -> None:
    (tmp_path / "folder").mkdir()
    os.mkfifo(tmp_path / "fifo")
    plan = ("--dry-run",) if option == "--plan-out" else ()  # a plan's output
    code, _, err = stop(sandbox, tmp_path, option, str(tmp_path / where) if where else "", *plan)
    assert code == 2 and says in err, err
    assert sandbox.counters.accepted == 0
    assert (tmp_path / "fifo").is_fifo()


def test_reached_records_continue_the_runs_seqs(sandbox: Sandbox, tmp_path: Path) -> None:
    code, _, err = stop(sandbox, tmp_path, "--wait")
    assert code == 0, err
    records = [json.loads(line) for line in (tmp_path / "l.jsonl").read_text().splitlines()]
    assert [r["code"] for r in records].count("Reached") == 2
    assert len({r["run"] for r in records}) == 1 and len({r["started"] for r in records}) == 1
    seqs = [r["seq"] for r in records]
    assert seqs == list(range(1, len(records) + 1))  # 2 intents, 2 outcomes, 2 reached


def test_a_ledger_that_fails_the_reached_records_is_exit_74_with_a_message(
    sandbox: Sandbox, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import swarm_cli.wait as wait

    real = wait.wait_for
    ledger = tmp_path / "l.jsonl"

    def wait_for(*args: Any, **kwargs: Any) -> Any:
        report = real(*args, **kwargs)
        # The ledger is swapped for a symbolic link while the run waited.
        ledger.rename(tmp_path / "moved.jsonl")
        ledger.symlink_to(tmp_path / "moved.jsonl")
        return report

    monkeypatch.setattr(wait, "wait_for", wait_for)
    code, out, err = stop(sandbox, tmp_path, "--wait")
    assert code == 74, err
    assert "--wait: cannot open the ledger" in err
    assert "Traceback" not in err + out


def test_a_trace_the_disk_refuses_is_said_to_be_cut_short(sandbox: Sandbox, tmp_path: Path) -> None:
    code, _, err = stop(sandbox, tmp_path, "--trace", "/dev/full")
    assert code == 0, err  # an aid: the run stands
    assert "/dev/full is cut short: No space left on device" in " ".join(err.split())


def _cli(box: Sandbox, *args: str, **kwargs: Any) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "AWS_ACCESS_KEY_ID": "x", "AWS_SECRET_ACCESS_KEY": "x"}
    env.update(AWS_REGION="us-east-1", AWS_ENDPOINT_URL=box.endpoint)
    command = [sys.executable, "-m", "swarm_cli", *args]
    return subprocess.run(command, env=env, text=True, stderr=subprocess.PIPE, **kwargs)


def test_standard_output_on_a_full_disk_is_one_line_and_exit_74(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    # The run terminated all it was given, then printed its summary onto a full disk: a
    # traceback and exit 1 ("some intents failed"), which none had.
    ids = write_ids(tmp_path / "ids.txt", sandbox.launch(3))
    ledger = str(tmp_path / "l.jsonl")
    with open("/dev/full", "w") as full:
        done = _cli(sandbox, "terminate", "--ids", ids, "--ledger", ledger, "--yes",
                    "--progress", "none", "--output", "json", stdout=full)  # fmt: skip
        listed = _cli(sandbox, "list", "--state", "terminated", stdout=full)
    assert done.returncode == 74 and listed.returncode == 74, done.stderr + listed.stderr
    for ran in (done, listed):
        assert "Traceback" not in ran.stderr
        assert "error: could not write the output: No space left on device" in ran.stderr
    assert {r.status for r in fold(read_records(ledger)).values()} == {"succeeded"}
    # A refusal whose one JSON object found no room: still the refusal's exit code.
    with open("/dev/full", "w") as full:
        refused = _cli(sandbox, "stop", "--ids", ids, "--yes", "--max-count", "1",
                       "--output", "json", stdout=full)  # fmt: skip
    assert refused.returncode == 3, refused.stderr
    assert "Traceback" not in refused.stderr and "could not write the output" in refused.stderr


def _closed_pipe() -> int:
    """The write end of a pipe whose reader is gone (``| true``, a log pipe that died)."""
    read, write = os.pipe()
    os.close(read)
    return write


def test_a_closed_standard_error_loses_nothing_of_standard_output(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    """stderr into a log pipe that died: rich's answer to the broken pipe pointed stdout at
    /dev/null, so the run's JSON was lost, and the command exited 0 all the same."""
    ids = write_ids(tmp_path / "ids.txt", sandbox.launch(30))
    ledger = str(tmp_path / "l.jsonl")
    dead = _closed_pipe()
    try:
        env = {**os.environ, "AWS_REGION": "us-east-1", "AWS_ENDPOINT_URL": sandbox.endpoint}
        ran = subprocess.run(
            [sys.executable, "-m", "swarm_cli", "terminate", "--ids", ids, "--ledger", ledger,
             "--yes", "--progress", "plain", "--output", "json"],
            env=env, stdout=subprocess.PIPE, stderr=dead, text=True,
        )  # fmt: skip
    finally:
        os.close(dead)
    assert ran.returncode == 0
    assert json.loads(ran.stdout)["counts"]["succeeded"] == 30


def test_a_closed_standard_output_is_said_and_exit_74(sandbox: Sandbox, tmp_path: Path) -> None:
    """``swarm ... | true``: exit 1 ("some intents failed"), nothing said, for a run that
    did all it was given; the same for a listing."""
    ids = write_ids(tmp_path / "ids.txt", sandbox.launch(30))
    ledger = str(tmp_path / "l.jsonl")
    for args in (
        ("terminate", "--ids", ids, "--ledger", ledger, "--yes", "--progress", "none"),
        ("list", "--state", "terminated", "--output", "json"),
        ("list", "--state", "terminated"),
    ):
        dead = _closed_pipe()
        try:
            ran = _cli(sandbox, *args, stdout=dead)
        finally:
            os.close(dead)
        assert ran.returncode == 74, (args, ran.stderr)
        assert "Traceback" not in ran.stderr
        assert "could not write the output: standard output is closed" in ran.stderr
    assert {r.status for r in fold(read_records(ledger)).values()} == {"succeeded"}
    # Unbuffered (PYTHONUNBUFFERED, as container images set): a short write into the pipe
    # was taken for a whole one, and 700 KB cut to 64 KB ended 0, nothing said.
    many = write_ids(tmp_path / "many.txt", sandbox.launch(1000))
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    listing = subprocess.Popen(
        [sys.executable, "-m", "swarm_cli", "list", "--output", "json", "--endpoint-url",
         sandbox.endpoint, "--region", "us-east-1"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert listing.stdout is not None
    listing.stdout.readline()
    listing.stdout.close()  # | head -1
    _, err = listing.communicate(timeout=120)
    assert listing.returncode == 74 and "standard output is closed" in err, err
    assert many
    # Closed at launch (>&-): the run's JSON crashed on a None stdout, exit 1.
    again = write_ids(tmp_path / "again.txt", sandbox.launch(2))
    closed = subprocess.run(
        [sys.executable, "-m", "swarm_cli", "terminate", "--ids", again, "--yes", "--ledger",
         str(tmp_path / "c.jsonl"), "--output", "json", "--endpoint-url", sandbox.endpoint,
         "--region", "us-east-1"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        preexec_fn=lambda: os.close(1),
    )  # fmt: skip
    assert closed.returncode == 74 and "Traceback" not in closed.stderr, closed.stderr
    assert "standard output is closed" in closed.stderr


def test_a_plan_file_the_disk_refuses_is_not_left_cut_short(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    ids = write_ids(tmp_path / "ids.txt", sandbox.launch(3))
    plan_out = tmp_path / "would.txt"

    def small_files() -> None:  # a file-size limit: writes past 8 bytes fail (EFBIG)
        resource.setrlimit(resource.RLIMIT_FSIZE, (8, 8))

    planned = _cli(sandbox, "plan", "terminate", "--ids", ids, "--plan-out", str(plan_out),
                   stdout=subprocess.DEVNULL, preexec_fn=small_files)  # fmt: skip
    assert planned.returncode == 74, planned.stderr
    assert f"--plan-out {plan_out}: File too large; no plan file written" in planned.stderr
    assert not plan_out.exists()


def test_a_plan_file_that_cannot_be_created_is_exit_74_with_a_message(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    """A folder that takes no new file (/proc): one line, not a traceback, and 74 (1 would
    read as a plan in which some would fail)."""
    ids = write_ids(tmp_path / "ids.txt", sandbox.launch(2))
    planned = _cli(
        sandbox, "plan", "terminate", "--ids", ids, "--plan-out", "/proc/swarm-plan.txt",
        stdout=subprocess.PIPE,
    )  # fmt: skip
    assert planned.returncode == 74, planned.stderr
    assert "Traceback" not in planned.stderr
    assert "--plan-out /proc/swarm-plan.txt: " in planned.stderr
    assert "no plan file written" in planned.stderr
    assert "predicted: " in planned.stdout  # the plan itself is not lost with its file
