"""swarm under the faults a CI job step meets: signals, kill -9, a full disk, a hung or
restarting endpoint, throttles without a body, expired credentials.

Every test drives the real CLI (a subprocess where a signal or a kill is involved)
against the sandbox over real HTTP, and checks the promise: after any of these,
``swarm ledger failed`` lists every instance not known to be done.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import resource
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from test_cli import swarm, terminate_json, write_ids

from swarm_cli.ledger import LedgerError, LedgerWriter, fold, read_records
from swarm_cli.sandbox import BucketSpec, Sandbox, SandboxConfig

# Slow enough that a run of a few hundred instances lasts a few seconds.
OPEN_BUCKETS = BucketSpec(100_000, 100_000)
THROTTLED = SandboxConfig(BucketSpec(5, 40), BucketSpec(100_000, 100_000), latency=0.02)


def start(
    box: Sandbox,
    ids_file: str,
    ledger: Path,
    *extra: str,
    preexec: Callable[[], None] | None = None,
    action: str = "terminate",
) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "swarm_cli",
            action,
            "--ids",
            ids_file,
            "--yes",
            "--ledger",
            str(ledger),
            "--endpoint-url",
            box.endpoint,
            "--output",
            "json",
            "--progress",
            "plain",
            *extra,
        ],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=preexec,
    )


def wait_until(done: Callable[[], bool], proc: subprocess.Popen[str], limit: float = 60) -> None:
    deadline = time.monotonic() + limit
    while not done():
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the run never got there"
        time.sleep(0.02)


def lines(path: Path) -> int:
    # The run checks the ledger's place by creating it and removing it again
    # while it is empty, so the file may come and go before the first intent.
    try:
        return path.read_bytes().count(b"\n")
    except FileNotFoundError:
        return 0


def failed_list(*ledgers: Path) -> set[str]:
    code, out, err = swarm("ledger", "failed", *map(str, ledgers))
    assert code == 0, err
    return set(out.split())


def running(box: Sandbox, ids: Sequence[str]) -> set[str]:
    return {i for i, state in box.states(ids).items() if state == "running"}


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
def test_sigterm_and_sighup_stop_in_order_and_leave_nothing_unlisted(
    tmp_path: Path, sig: signal.Signals
) -> None:
    ledger = tmp_path / "l.jsonl"
    with Sandbox(THROTTLED) as box:
        ids = box.launch(300)
        proc = start(box, write_ids(tmp_path / "ids.txt", ids), ledger, "--batch-size", "1")
        wait_until(lambda: lines(ledger) >= 300 + 40, proc)
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=30)
        left = running(box, ids)
        listed = failed_list(ledger)
        assert proc.returncode == 128 + sig, err
        report = json.loads(out)
        assert report["signal"] == sig.name and report["interrupted"]
        assert f"interrupted by {sig.name}" in err
        done = report["counts"]["succeeded"]
        assert 0 < done < 300 and f"{done} of 300 succeeded" in err  # what was done, not 100%
        assert left and left <= listed, "every instance still running is listed"
        # Retrying exactly what is listed finishes the job.
        retry = start(box, write_ids(tmp_path / "left.txt", sorted(listed)), ledger)
        retry.communicate(timeout=60)
        assert retry.returncode == 0
        assert running(box, ids) == set()
        assert failed_list(ledger) == set()


def test_a_run_under_nohup_outlives_its_terminal(tmp_path: Path) -> None:
    """nohup ignores SIGHUP so that a run outlives the terminal it began in: swarm put its
    own handler in, and stopped at the hang-up with most of the run left."""
    ledger = tmp_path / "l.jsonl"
    with Sandbox(THROTTLED) as box:
        ids = box.launch(80)

        def nohup() -> None:
            signal.signal(signal.SIGHUP, signal.SIG_IGN)

        proc = start(
            box, write_ids(tmp_path / "ids.txt", ids), ledger, "--batch-size", "1", preexec=nohup
        )
        wait_until(lambda: lines(ledger) >= 80 + 10, proc)
        proc.send_signal(signal.SIGHUP)
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
        assert json.loads(out)["counts"]["succeeded"] == 80
        assert running(box, ids) == set()


def test_a_terminal_that_hangs_up_stops_the_run_as_sighup(tmp_path: Path) -> None:
    """The terminal's window closed mid-run: the live view's next frame failed (EIO) and
    broke off the run before its summary, and the command ended 1, not 129."""
    import fcntl
    import pty
    import termios

    ledger = tmp_path / "l.jsonl"
    with Sandbox(THROTTLED) as box:
        ids = box.launch(300)
        ids_file = write_ids(tmp_path / "ids.txt", ids)
        master, slave = pty.openpty()

        def own_terminal() -> None:
            os.setsid()
            fcntl.ioctl(0, termios.TIOCSCTTY, 0)

        env = {**os.environ, "AWS_ENDPOINT_URL": box.endpoint, "AWS_REGION": "us-east-1"}
        env.pop("CI", None)  # a person's terminal: the live view
        proc = subprocess.Popen(
            [sys.executable, "-m", "swarm_cli", "terminate", "--ids", ids_file, "--yes",
             "--ledger", str(ledger), "--batch-size", "1"],
            stdin=slave, stdout=slave, stderr=slave, preexec_fn=own_terminal, env=env,
        )  # fmt: skip
        os.close(slave)
        os.set_blocking(master, False)
        deadline = time.monotonic() + 60
        while lines(ledger) < 300 + 40:
            assert proc.poll() is None and time.monotonic() < deadline
            with contextlib.suppress(OSError):
                os.read(master, 65536)  # the view draws on: read, as a terminal does
            time.sleep(0.02)
        os.close(master)  # the window closes: SIGHUP, and every write fails
        assert proc.wait(timeout=30) == 128 + signal.SIGHUP
        records = fold(read_records(str(ledger))).values()
        pending = [r for r in records if r.status == "pending"]
        assert pending and all("SIGHUP" in (r.message or "") for r in pending)
        assert running(box, ids) <= {r.id for r in pending}


@pytest.mark.slow
def test_kill_9_at_random_points_then_retrying_ledger_failed_terminates_everything(
    tmp_path: Path,
) -> None:
    rng = random.Random(7)
    ledger = tmp_path / "l.jsonl"
    kills = 3
    with Sandbox(THROTTLED) as box:
        ids = box.launch(400)
        todo = list(ids)
        for kill in range(kills):
            ids_file = write_ids(tmp_path / f"ids{kill}.txt", todo)
            before, sent = lines(ledger), box.counters.accepted + box.counters.throttled
            proc = start(box, ids_file, ledger, "--batch-size", "1", "--max-window", "16")
            # Anywhere from while the intents are written ahead to well into the run.
            target = before + rng.choice([1, len(todo) // 2, len(todo) + rng.randrange(1, 60)])
            wait_until(lambda t=target: lines(ledger) >= t, proc)  # type: ignore[misc]
            proc.kill()
            proc.communicate(timeout=10)
            code, out, err = swarm("ledger", "failed", str(ledger))
            listed = set(out.split())
            left = running(box, ids)
            if "sent nothing" in err:  # killed while writing ahead: the run never began
                assert code == 1, "a list known to be short must not pass for the whole"
                assert box.counters.accepted + box.counters.throttled == sent
                assert left == set(todo)
                continue
            assert left <= listed, f"kill {kill}: running but not listed: {sorted(left - listed)}"
            todo = sorted(listed)
        final = start(box, write_ids(tmp_path / "last.txt", todo), ledger)
        final.communicate(timeout=60)
        assert final.returncode == 0
        assert running(box, ids) == set()
        # A kill can repeat at most the calls in flight and the outcomes not yet on disk.
        assert box.counters.repeats <= kills * 32


def test_a_device_as_ledger_is_refused_and_a_full_disk_stops_before_anything_is_sent(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    ids = sandbox.launch(5)
    ids_file = write_ids(tmp_path / "ids.txt", ids)
    base = ["terminate", "--ids", ids_file, "--endpoint-url", sandbox.endpoint, "--yes"]
    for device in ("/dev/full", "/dev/null"):
        code, _, err = swarm(*base, "--ledger", device)
        assert code == 2 and "is not a regular file" in err
    # No room at all for the write-ahead block: nothing may be sent.
    proc = start(
        sandbox,
        ids_file,
        tmp_path / "l.jsonl",
        preexec=lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (0, 0)),
    )
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 74, err
    assert "cannot write the ledger" in err and "nothing was sent" in err
    assert json.loads(out)["counts"]["pending"] == 5
    assert sandbox.counters.accepted + sandbox.counters.throttled == 0
    # Room for part of the block: `ledger failed` would list only those intents, so
    # the summary must not offer its list as "the rest".
    many = write_ids(tmp_path / "many.txt", [f"i-{n:017x}" for n in range(1, 301)])
    proc = start(
        sandbox,
        many,
        tmp_path / "part.jsonl",
        "--output",
        "text",
        preexec=lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096)),
    )
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 74, err
    code, listed, warned = swarm("ledger", "failed", str(tmp_path / "part.jsonl"))
    assert code == 1 and 0 < len(listed.split()) < 300
    assert "stopped while recording its intents" in warned
    assert "retry the rest" not in out + err
    assert "run the same command again" in out
    assert sandbox.counters.accepted + sandbox.counters.throttled == 0


@pytest.mark.slow
def test_a_ledger_that_fills_up_mid_run_stops_the_run_and_prints_the_unrecorded(
    tmp_path: Path,
) -> None:
    ledger = tmp_path / "l.jsonl"
    with Sandbox(THROTTLED) as box:
        ids = box.launch(200)
        # Room for the write-ahead block and a few outcomes, then EFBIG.
        probe = LedgerWriter(str(tmp_path / "probe.jsonl"), "0" * 12, "terminate", "us-east-1")
        probe.write_ahead(ids)
        probe.close()
        limit = (tmp_path / "probe.jsonl").stat().st_size + 3000

        def cap_file_size() -> None:
            resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

        proc = start(
            box,
            write_ids(tmp_path / "ids.txt", ids),
            ledger,
            "--batch-size",
            "1",
            preexec=cap_file_size,
        )
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 74, err
        assert "cannot write the ledger" in err and "File too large" in err
        report = json.loads(out)
        assert report["unrecorded"] > 0 and report["calls"] < 200  # stopped early
        # The outcomes the ledger could not take are on stderr, as ledger lines.
        printed = [json.loads(x) for x in err.splitlines() if x.startswith('{"')]
        assert len(printed) == report["unrecorded"]
        states = box.states(ids)
    # Nothing terminated is unaccounted for: the ledger says pending at worst.
    on_disk = fold(read_records(str(ledger)))
    assert {i for (_, i) in on_disk} == set(ids)
    assert all(on_disk[("terminate", i)].status in ("succeeded", "pending") for i in ids)
    assert {i for i, s in states.items() if s == "running"} <= failed_list(ledger)


@pytest.mark.slow
def test_an_endpoint_that_never_answers_is_given_up_with_everything_recorded(
    tmp_path: Path,
) -> None:
    ledger = tmp_path / "l.jsonl"
    with Sandbox(THROTTLED) as box:
        ids = box.launch(20)
        box.hang()
        proc = start(
            box,
            write_ids(tmp_path / "ids.txt", ids),
            ledger,
            "--call-timeout",
            "0.3",
            "--max-outage",
            "2",
        )
        out, err = proc.communicate(timeout=60)
        box.hang(False)
    assert proc.returncode == 1, err
    report = json.loads(out)
    assert report["gave_up"] and report["counts"]["pending"] == 20
    assert report["timeouts"] >= 3
    assert failed_list(ledger) == set(ids)
    codes = {r.code for r in read_records(str(ledger)) if r.code}
    assert codes <= {"EndpointUnreachable", "CallTimeout"} and "EndpointUnreachable" in codes


@pytest.mark.slow
def test_ctrl_c_during_a_hung_call_exits_within_the_drain_timeout(tmp_path: Path) -> None:
    ledger = tmp_path / "l.jsonl"
    with Sandbox(THROTTLED) as box:
        ids = box.launch(10)
        box.hang()
        proc = start(box, write_ids(tmp_path / "ids.txt", ids), ledger, "--drain-timeout", "0.5")
        wait_until(lambda: box.counters.hung >= 1, proc)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=20)
        box.hang(False)
    assert proc.returncode == 130, err
    assert json.loads(out)["counts"]["pending"] == 10
    in_flight = [r for r in read_records(str(ledger)) if r.message and "in flight" in r.message]
    assert in_flight, "the call in flight is recorded as such"
    assert failed_list(ledger) == set(ids)


@pytest.mark.slow
def test_an_outage_mid_run_loses_nothing_and_fails_nothing(tmp_path: Path) -> None:
    ledger = tmp_path / "l.jsonl"
    with Sandbox(THROTTLED) as box:
        ids = box.launch(200)
        proc = start(box, write_ids(tmp_path / "ids.txt", ids), ledger, "--batch-size", "1")
        wait_until(lambda: lines(ledger) >= 200 + 30, proc)
        box.outage(3.0)  # connections refused for 3 s, then the same port again
        out, err = proc.communicate(timeout=60)
        assert running(box, ids) == set()
    assert proc.returncode == 0, err
    report = json.loads(out)
    assert report["counts"]["failed"] == 0 and report["outages"] >= 1
    assert failed_list(ledger) == set()


def test_a_ledger_moved_during_the_run_stops_it_and_says_where_its_records_went(
    tmp_path: Path,
) -> None:
    """Its path holds neither the run's records nor its lock any more: a second run could
    start on it and send everything again. The run stops, and says the records are in
    the moved file (not that none were written)."""
    ledger, moved = tmp_path / "l.jsonl", tmp_path / "moved.jsonl"
    with Sandbox(THROTTLED) as box:
        ids = box.launch(200)
        proc = start(box, write_ids(tmp_path / "ids.txt", ids), ledger, "--batch-size", "1")
        wait_until(lambda: lines(ledger) >= 200 + 10, proc)
        ledger.rename(moved)
        out, err = proc.communicate(timeout=60)
        done = 200 - len(running(box, ids))
    assert proc.returncode == 74, err
    said = " ".join(err.split())
    assert "moved or replaced during the run" in said, err
    assert "what it recorded is in the moved file" in said and "none written" not in said
    # No command on the path it moved from: it names no ledger of this run now.
    assert "merge the moved file" in said and "retry the rest: swarm" not in said
    assert not ledger.exists()
    # The moved file is the run's ledger: what it lists as left is what is still running
    # (those whose outcomes it could not hold are printed on stderr, and listed as left).
    left = failed_list(moved)
    assert len(left) >= 200 - done and json.loads(out)["exit_code"] == 74


@pytest.mark.slow
def test_an_endpoint_answering_500_while_it_restarts_fails_nothing(tmp_path: Path) -> None:
    """Every call answered 500 InternalError for three seconds from the first: the
    endpoint is down, not the instances; the run rides it out as an outage (probes, no
    attempt charged) and terminates them all once it answers again."""
    ledger = tmp_path / "l.jsonl"
    with Sandbox(THROTTLED) as box:
        ids = box.launch(30)
        box.fail_action("TerminateInstances", 500)
        proc = start(
            box,
            write_ids(tmp_path / "ids.txt", ids),
            ledger,
            *("--batch-size", "3", "--max-attempts", "8"),
        )
        wait_until(lambda: box.counters.injected >= 1, proc)
        time.sleep(3.0)
        box.fail_action("TerminateInstances", None)
        out, err = proc.communicate(timeout=120)
        assert running(box, ids) == set()
    assert proc.returncode == 0, err
    report = json.loads(out)
    assert report["counts"]["failed"] == 0 and report["outages"] >= 1
    assert "OUTAGE: only errors from the endpoint (InternalError), probing" in err
    assert failed_list(ledger) == set()


@pytest.mark.parametrize("status", [429, 503])
def test_throttles_without_a_body_shrink_the_window_and_fail_nothing(
    tmp_path: Path, status: int
) -> None:
    # A refill well below what even a loaded machine sends: the startup's first round
    # trips overshoot it.
    config = SandboxConfig(
        BucketSpec(3, 20), BucketSpec(100_000, 100_000), empty_throttle_status=status
    )
    with Sandbox(config) as box:
        ids = box.launch(60)
        code, report = terminate_json(
            box, write_ids(tmp_path / "ids.txt", ids), tmp_path / "l.jsonl", "--batch-size", "1"
        )
        assert running(box, ids) == set()
    assert code == 0
    assert report["counts"]["succeeded"] == 60 and report["retries"] == 0
    assert report["throttled_calls"] > 0 and report["window"]["decreases"] > 0


def test_answers_nobody_can_read_leave_the_intents_unknown_not_failed(tmp_path: Path) -> None:
    """A 200 with an empty body (a proxy that cut the answer off): the call may have
    happened, so the intents end pending, listed for a resume, which finds them done."""
    with Sandbox(SandboxConfig(BucketSpec(100, 100), BucketSpec(100_000, 100_000))) as box:
        ids = box.launch(12)
        ids_file = write_ids(tmp_path / "ids.txt", ids)
        ledger = tmp_path / "l.jsonl"
        box.unreadable_answers("TerminateInstances")
        code, report = terminate_json(box, ids_file, ledger, "--max-attempts", "2")
        assert running(box, ids) == set()  # they did happen
        assert report["counts"]["failed"] == 0, report["counts"]
        assert report["counts"]["pending"] == 12 and code != 0
        state = fold(read_records(str(ledger)))
        assert {r.code for r in state.values()} == {"ResponseParserError"}
        assert failed_list(ledger) == set(ids)
        box.unreadable_answers("TerminateInstances", on=False)
        sent = box.calls_by("TerminateInstances")
        code, report = terminate_json(box, ids_file, ledger, "--resume")
        assert code == 0 and report["counts"]["succeeded"] == 12, report
        assert box.calls_by("TerminateInstances") == sent  # DescribeInstances said so
        assert failed_list(ledger) == set()


def test_a_fifth_of_calls_throttled_at_random_neither_stalls_nor_loses_the_run(
    tmp_path: Path,
) -> None:
    # A generous bucket that also answers a fifth of calls with an empty 503 at random:
    # slowing down does not reduce those, and a run that took them for the limit would
    # cut its pace for each (once, swarm's stalled for minutes on this).
    config = SandboxConfig(
        BucketSpec(100, 100),
        BucketSpec(100_000, 100_000),
        latency=0.02,
        throttle_share=0.2,
        empty_throttle_status=503,
    )
    with Sandbox(config) as box:
        ids = box.launch(100)
        code, report = terminate_json(
            box, write_ids(tmp_path / "ids.txt", ids), tmp_path / "l.jsonl", "--batch-size", "1"
        )
        assert running(box, ids) == set()
        throttled = box.counters.throttled
    assert code == 0
    assert report["counts"]["succeeded"] == 100 and report["retries"] == 0
    # Every throttle the endpoint sent was met, and answered by sending that call again
    # (how many there are depends on which calls the sandbox's draws land on: not checked).
    assert report["throttled_calls"] == throttled > 0
    assert report["calls"] == 100 + throttled


def profile_of(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, helper: Path) -> None:
    """An AWS config whose profile ``name`` gets its credentials from the Python script
    ``helper`` (a credential_process), and no credentials in the environment."""
    config = tmp_path / "config"
    config.write_text(
        f"[profile {name}]\ncredential_process = {sys.executable} {helper}\nregion = us-east-1\n"
    )
    monkeypatch.setenv("AWS_CONFIG_FILE", str(config))
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")


def terminate_as(
    box: Sandbox, tmp_path: Path, ids: list[str], profile: str
) -> tuple[int, str, str]:
    """``swarm terminate`` of ``ids`` with ``--profile``, in-process."""
    return swarm(
        *("terminate", "--ids", write_ids(tmp_path / "ids.txt", ids), "--yes"),
        *("--ledger", str(tmp_path / "l.jsonl"), "--endpoint-url", box.endpoint),
        *("--profile", profile),
    )


def credential_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, good: int, then: str = "fail"
) -> None:
    """A profile whose credentials come from a process that works ``good`` times, then
    fails (exits 1), or with ``then="prompt"`` prints a login prompt and exits 0.

    The credentials it gives expire within botocore's mandatory refresh window, so
    every call asks for new ones, as a run outliving an SSO session does.
    """
    failing = (
        "    print('Please run: helper login'); sys.exit(0)\n"
        if then == "prompt"
        else "    sys.exit('the SSO session has expired')\n"
    )
    count = tmp_path / "count"
    helper = tmp_path / "sso.py"
    helper.write_text(
        "import datetime, json, pathlib, sys\n"
        f"count = pathlib.Path({str(count)!r})\n"
        "n = int(count.read_text()) if count.exists() else 0\n"
        "count.write_text(str(n + 1))\n"
        f"if n >= {good}:\n"
        f"{failing}"
        "soon = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(minutes=2)\n"
        "print(json.dumps({'Version': 1, 'AccessKeyId': 'testing', 'SecretAccessKey': 'testing',"
        " 'Expiration': soon.strftime('%Y-%m-%dT%H:%M:%SZ')}))\n"
    )
    profile_of(tmp_path, monkeypatch, "ci", helper)


def test_credentials_that_fail_to_refresh_mid_run_stop_with_four_and_say_why(
    sandbox: Sandbox, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    credential_process(tmp_path, monkeypatch, good=1)  # enough to make the client only
    ids = sandbox.launch(4)
    ledger = tmp_path / "l.jsonl"
    code, report = terminate_json(
        sandbox, write_ids(tmp_path / "ids.txt", ids), ledger, "--profile", "ci"
    )
    assert code == 4
    assert report["fatal"]["code"] == "CredentialRetrievalError"
    assert "SSO session has expired" in report["fatal"]["message"]
    reasons = {r.code for r in read_records(str(ledger)) if r.status == "pending" and r.code}
    assert reasons == {"CredentialRetrievalError"}
    assert failed_list(ledger) == set(ids)
    assert running(sandbox, ids) == set(ids)


def test_a_stop_whose_credentials_fail_mid_run_does_not_wait_with_them(
    sandbox: Sandbox, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The run stops on its credentials (4); its --wait went on with the same ones, and
    a helper that hung made the command take another minute. What the run stopped is
    recorded not checked, and the helper is not asked again."""
    credential_process(tmp_path, monkeypatch, good=3)
    ids = sandbox.launch(6)
    ledger = tmp_path / "l.jsonl"
    code, out, err = swarm(
        *("stop", "--ids", write_ids(tmp_path / "ids.txt", ids), "--yes", "-o", "json"),
        *("--ledger", str(ledger), "--endpoint-url", sandbox.endpoint, "--profile", "ci"),
        *("--wait", "--batch-size", "1"),
    )
    assert code == 4, err
    report = json.loads(out)
    assert report["fatal"]["code"] == "CredentialRetrievalError"
    stopped = report["counts"]["succeeded"]
    assert stopped >= 1, report
    assert "--wait skipped in us-east-1: the run stopped on its credentials" in err
    wait = report["wait"]
    assert (wait["reached"], wait["not_checked"]) == (0, stopped)
    assert "CredentialRetrievalError" in wait["not_checked_why"]
    # In the shape a wait's own summary has, with what it did not check listed.
    assert {"timed_out", "wrong_state", "not_listed", "outages", "gave_up"} <= set(wait)
    assert [p["code"] for p in wait["problems"]] == ["NotChecked"] * stopped
    unchecked = {r.id for r in read_records(str(ledger)) if r.code == "NotChecked"}
    assert len(unchecked) == stopped
    assert failed_list(ledger) == set(ids)


@pytest.mark.parametrize("good", [1, 0], ids=["mid-run", "at-start"])
def test_a_credential_process_that_prints_no_credentials_stops_with_four(
    sandbox: Sandbox, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, good: int
) -> None:
    """A helper that prints a login prompt and exits 0: botocore fails to parse it with a
    ValueError of its own, not a credentials error. It was retried as a server error,
    every ID recorded failed (exit 1), the helper run hundreds of times."""
    credential_process(tmp_path, monkeypatch, good=good, then="prompt")
    ids = sandbox.launch(4)
    ledger = tmp_path / "l.jsonl"
    code, out, err = swarm(
        *("terminate", "--ids", write_ids(tmp_path / "ids.txt", ids), "--yes", "-o", "json"),
        *("--ledger", str(ledger), "--endpoint-url", sandbox.endpoint, "--profile", "ci"),
    )
    assert code == 4, err
    assert "a credential_process must print its credentials as JSON" in err
    assert int((tmp_path / "count").read_text()) <= good + 3
    assert running(sandbox, ids) == set(ids)
    if good:
        report = json.loads(out)
        assert report["fatal"]["code"] == "CredentialRetrievalError"
        assert {r.status for r in read_records(str(ledger)) if r.status != "intent"} <= {"pending"}
        assert failed_list(ledger) == set(ids)
    # A plan meets the same: the run would stop (4), not "4 unknown" (1).
    code, out, err = swarm(
        *("plan", "terminate", "--ids", str(tmp_path / "ids.txt"), "--profile", "ci"),
        *("--endpoint-url", sandbox.endpoint),
    )
    assert code == 4, out + err
    # And roles assumed from them: STS's client meets it first.
    role = "arn:aws:iam::123456789012:role/x"
    code, out, err = swarm(
        *("terminate", "--ids", str(tmp_path / "ids.txt"), "--yes", "--profile", "ci"),
        *("--ledger", str(tmp_path / "r.jsonl"), "--endpoint-url", sandbox.endpoint),
        *("--role-arn", role, "-o", "json"),
    )
    assert code == 4, out + err
    assert "Traceback" not in err
    assert running(sandbox, ids) == set(ids)


def test_credentials_that_fail_before_the_run_exit_four_with_nothing_sent(
    sandbox: Sandbox, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    credential_process(tmp_path, monkeypatch, good=0)
    ids = sandbox.launch(2)
    code, _, err = terminate_as(sandbox, tmp_path, ids, "ci")
    assert code == 4 and "SSO session has expired" in err
    assert len(err.strip().splitlines()) == 1
    assert sandbox.counters.accepted == 0


def test_a_start_that_waits_on_its_credentials_says_so(
    sandbox: Sandbox, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A credential_process that does not answer (an SSO helper waiting on a browser) held
    the run silent. The run now says what it waits for; here the process answers only
    once that has been said, so the run goes on only if it was."""
    import swarm_cli.cli.reach as reach

    said = tmp_path / "said"
    helper = tmp_path / "slow.py"
    helper.write_text(
        "import json, pathlib, sys, time\n"
        f"said = pathlib.Path({str(said)!r})\n"
        "for _ in range(600):\n"
        "    if said.exists():\n"
        "        print(json.dumps({'Version': 1, 'AccessKeyId': 'testing',"
        " 'SecretAccessKey': 'testing'}))\n"
        "        sys.exit(0)\n"
        "    time.sleep(0.1)\n"
        "sys.exit('nobody said it waits')\n"
    )
    profile_of(tmp_path, monkeypatch, "slow", helper)
    monkeypatch.setattr(reach, "CREDENTIALS_PATIENCE", 0.0)
    warn = reach.warn

    def warn_then_mark(err: Any, message: str) -> None:
        warn(err, message)
        said.write_text(message)

    monkeypatch.setattr(reach, "warn", warn_then_mark)
    ids = sandbox.launch(2)
    code, _, err = terminate_as(sandbox, tmp_path, ids, "slow")
    assert code == 0, err
    assert "still waiting for credentials from profile slow" in said.read_text()
    assert "nothing has been sent" in err
    assert running(sandbox, ids) == set()


@pytest.mark.parametrize("good", [0, 1], ids=["at-start", "mid-run"])
def test_a_run_stopped_while_its_credential_process_hangs_leaves_no_process_behind(
    sandbox: Sandbox, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, good: int
) -> None:
    """A helper that hangs, with a process of its own (a shell script's ``sleep``): at
    the start, or on a refresh mid-run (botocore waits on it inside a call). Neither it
    nor what it started outlives the run."""
    pids = tmp_path / "helper.pids"
    count = tmp_path / "count"
    helper = tmp_path / "hang.py"
    helper.write_text(
        "import datetime, json, os, pathlib, subprocess, sys, time\n"
        f"count = pathlib.Path({str(count)!r})\n"
        "n = int(count.read_text()) if count.exists() else 0\n"
        "count.write_text(str(n + 1))\n"
        f"if n < {good}:\n"
        "    soon = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(minutes=2)\n"
        "    print(json.dumps({'Version': 1, 'AccessKeyId': 'testing',"
        " 'SecretAccessKey': 'testing', 'Expiration': soon.strftime('%Y-%m-%dT%H:%M:%SZ')}))\n"
        "    sys.exit(0)\n"
        "child = subprocess.Popen(['sleep', '600'])\n"
        f"pathlib.Path({str(pids)!r}).write_text(f'{{os.getpid()}} {{child.pid}}')\n"
        "time.sleep(600)\n"
    )
    profile_of(tmp_path, monkeypatch, "hang", helper)
    ids = sandbox.launch(2)
    ledger = tmp_path / "l.jsonl"
    proc = start(sandbox, write_ids(tmp_path / "ids.txt", ids), ledger, "--profile", "hang")
    wait_until(lambda: pids.exists() and len(pids.read_text().split()) == 2, proc)
    hung = [int(pid) for pid in pids.read_text().split()]
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 143, err
    if not good:
        assert "nothing was sent" in err

    def gone(pid: int) -> bool:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        # A zombie waits for its parent (this test's process is not it): gone all the same.
        stat = Path(f"/proc/{pid}/stat")
        return stat.exists() and stat.read_text().rsplit(")", 1)[1].split()[0] == "Z"

    deadline = time.monotonic() + 30
    while not all(gone(pid) for pid in hung):
        if time.monotonic() > deadline:
            for pid in hung:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
            pytest.fail("the credential_process (or what it started) outlived the run")
        time.sleep(0.05)
    assert running(sandbox, ids) == set(ids)


def test_the_background_jobs_of_a_shell_that_execs_swarm_are_left_alone(tmp_path: Path) -> None:
    """After ``exec``, a shell's background jobs are the swarm process's children: they
    are no helper of swarm's, and outlive it as they would any other command."""
    pid_file = tmp_path / "bg.pid"
    script = (
        f"sleep 300 >/dev/null 2>&1 & echo $! > {pid_file}; "
        f"exec {sys.executable} -m swarm_cli --version"
    )
    done = subprocess.run(["sh", "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    pid = int(pid_file.read_text())
    try:
        stat = Path(f"/proc/{pid}/stat")
        alive = stat.exists() and stat.read_text().rsplit(")", 1)[1].split()[0] != "Z"
        assert alive, "swarm ended its shell's background job"
    finally:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)


def refreshing_helper(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, then_sleep: float) -> Path:
    """A profile "refresh" whose helper answers at once the first time, then sleeps
    ``then_sleep`` seconds before it answers (each answer expires within botocore's
    mandatory refresh window, so every call refreshes). Returns the file of its pids."""
    pids = tmp_path / "pids"
    helper = tmp_path / "refresh.py"
    helper.write_text(
        "import datetime, json, os, pathlib, time\n"
        f"pids = pathlib.Path({str(pids)!r})\n"
        "first = not pids.exists()\n"
        "with pids.open('a') as f:\n"
        "    f.write(f'{os.getpid()}\\n')\n"
        "if not first:\n"
        f"    time.sleep({then_sleep})\n"
        "soon = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(minutes=2)\n"
        "print(json.dumps({'Version': 1, 'AccessKeyId': 'testing', 'SecretAccessKey': 'testing',"
        " 'Expiration': soon.strftime('%Y-%m-%dT%H:%M:%SZ')}))\n"
    )
    profile_of(tmp_path, monkeypatch, "refresh", helper)
    return pids


def test_a_credential_refresh_that_hangs_mid_run_stops_with_four_not_as_an_outage(
    sandbox: Sandbox, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The endpoint is fine; the helper hangs on the first refresh. The calls waiting on
    it used to time out as if the endpoint did not answer: exit 1 after a 45 s "outage",
    every ID "may or may not be done" though none had left."""
    import swarm_cli.engine as engine

    monkeypatch.setattr(engine, "STUCK_PATIENCE", 3.0)
    pids = refreshing_helper(tmp_path, monkeypatch, then_sleep=600)
    ids = sandbox.launch(3)
    ledger = tmp_path / "l.jsonl"
    try:
        code, report = terminate_json(
            sandbox, write_ids(tmp_path / "ids.txt", ids), ledger,
            "--profile", "refresh", "--call-timeout", "1",
        )  # fmt: skip
    finally:
        for pid in map(int, pids.read_text().split()):
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
    assert code == 4, report
    assert report["fatal"]["code"] == "CredentialRetrievalError"
    assert "refreshing the credentials gave no answer" in report["fatal"]["message"]
    assert report["timeouts"] == 0 and report["outages"] == 0
    assert failed_list(ledger) == set(ids)
    assert running(sandbox, ids) == set(ids)


def test_a_slow_credential_refresh_is_waited_for_not_taken_for_a_hung_one(
    sandbox: Sandbox, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A helper that takes two seconds to answer, under calls that time out after one:
    the calls wait for it (up to a minute), and the run ends done."""
    refreshing_helper(tmp_path, monkeypatch, then_sleep=2)
    ids = sandbox.launch(3)
    code, report = terminate_json(
        sandbox, write_ids(tmp_path / "ids.txt", ids), tmp_path / "l.jsonl",
        "--profile", "refresh", "--call-timeout", "1",
    )  # fmt: skip
    assert code == 0, report
    assert running(sandbox, ids) == set()


def test_a_password_in_the_endpoint_url_is_never_echoed(sandbox: Sandbox, tmp_path: Path) -> None:
    ids = sandbox.launch(3)
    ledger = tmp_path / "l.jsonl"
    secret_url = sandbox.endpoint.replace("http://", "http://admin:hunter2@")
    code, out, err = swarm(
        "terminate",
        "--ids",
        write_ids(tmp_path / "ids.txt", ids),
        "--ledger",
        str(ledger),
        "--endpoint-url",
        secret_url,
        "--yes",
        "--output",
        "json",
    )
    assert code == 0, err
    assert json.loads(out)["endpoint"].startswith("http://***@127.0.0.1")
    assert "hunter2" not in out + err + ledger.read_text()
    # And when the endpoint is down, the connection error names it without the password.
    sandbox.down()
    code, out, err = swarm(
        "terminate",
        "--ids",
        write_ids(tmp_path / "ids.txt", ids),
        "--ledger",
        str(ledger),
        "--endpoint-url",
        secret_url,
        "--yes",
        "--output",
        "json",
        "--max-outage",
        "0.5",
    )
    sandbox.up()
    assert code == 1, out + err
    assert "hunter2" not in out + err + ledger.read_text()


@pytest.mark.parametrize(
    ("make", "says"),
    [
        (lambda d, ids: str(d / "no-such-folder" / "l.jsonl"), "does not exist"),
        (lambda d, ids: str(d), "is a folder"),
        (lambda d, ids: ids, "is the ID list"),
    ],
)
def test_a_bad_ledger_path_is_refused_before_anything_is_sent(
    sandbox: Sandbox, tmp_path: Path, make: Callable[[Path, str], str], says: str
) -> None:
    ids = sandbox.launch(3)
    ids_file = write_ids(tmp_path / "ids.txt", ids)
    code, _, err = swarm(
        "terminate", "--ids", ids_file, "--ledger", make(tmp_path, ids_file), "--yes"
    )
    assert code == 2 and says in err
    assert len(err.strip().splitlines()) == 1, "one line"
    assert sandbox.counters.accepted == 0
    assert Path(ids_file).read_text() == "".join(f"{i}\n" for i in ids)


def test_ledger_commands_survive_garbage_and_refuse_a_newer_format(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    ids = sandbox.launch(2)
    ledger = tmp_path / "l.jsonl"
    writer = LedgerWriter(str(ledger), "r", "terminate", "us-east-1")
    writer.write(ids[0], "succeeded")
    writer.write(ids[1], "failed", code="InternalError")
    writer.close()
    with open(ledger, "ab") as handle:
        handle.write(b'null\n[]\n{"v":1,"id":3}\n\xff\xfe\n{"v":1,"ts":')
    for command in (["ledger", "failed"], ["ledger", "summary"]):
        code, _out, err = swarm(*command, str(ledger))
        assert code == 0 and "5 damaged ledger line(s) skipped" in err
    assert failed_list(ledger) == {ids[1]}
    code, report = terminate_json(sandbox, write_ids(tmp_path / "ids.txt", ids), ledger, "--resume")
    assert code == 0 and report["total"] == 1  # the one already done is skipped
    newer = tmp_path / "newer.jsonl"
    # The new run's records start on a line of their own, after the cut-short one.
    assert failed_list(ledger) == set()
    record: dict[str, Any] = json.loads(ledger.read_bytes().splitlines()[0])
    newer.write_text(json.dumps({**record, "v": 99}) + "\n")
    code, _, err = swarm("ledger", "failed", str(newer))
    assert code == 2 and "newer swarm" in err


def test_output_json_is_printed_even_when_there_is_nothing_to_do(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    ids = sandbox.launch(2)
    ledger = tmp_path / "l.jsonl"
    assert terminate_json(sandbox, write_ids(tmp_path / "ids.txt", ids), ledger)[0] == 0
    code, report = terminate_json(sandbox, write_ids(tmp_path / "ids.txt", ids), ledger, "--resume")
    assert code == 0
    assert report["total"] == 0 and report["exit_code"] == 0 and report["meaning"] == "all done"


def test_the_environment_cannot_turn_botocore_retries_back_on(
    sandbox: Sandbox, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_RETRY_MODE", "legacy")
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "10")
    config = SandboxConfig(BucketSpec(2, 20), BucketSpec(100_000, 100_000))
    with Sandbox(config) as box:
        ids = box.launch(30)
        code, report = terminate_json(
            box, write_ids(tmp_path / "ids.txt", ids), tmp_path / "l.jsonl", "--batch-size", "1"
        )
        seen = box.counters.accepted + box.counters.throttled
    assert code == 0
    assert seen == report["calls"], "each call swarm counts is one request"


def test_sigterm_during_the_wait_says_the_command_was_stopped(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    ids = sandbox.launch(3)
    # The wait never sees the state: DescribeInstances throttled for good.
    sandbox.fail_action("DescribeInstances", 503, "RequestLimitExceeded", "slow down")
    proc = start(
        sandbox,
        write_ids(tmp_path / "ids.txt", ids),
        tmp_path / "l.jsonl",
        "--wait",
    )
    wait_until(lambda: sandbox.counters.accepted_by_action.get("TerminateInstances") == 3, proc)
    time.sleep(1.5)  # the run ends at its last answer; the wait polls from then on
    assert proc.poll() is None
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 143, err
    report = json.loads(out)
    assert report["signal"] == "SIGTERM" and report["interrupted"] is True
    assert report["counts"]["succeeded"] == 3  # the run itself was done and recorded


def test_a_second_run_on_a_ledger_in_use_sends_nothing(sandbox: Sandbox, tmp_path: Path) -> None:
    """Two pods of one shard on one volume, or a job started twice: the second run would
    send every intent the first sends. It is refused before its first call."""
    ids = sandbox.launch(3)
    ledger = tmp_path / "l.jsonl"
    running = LedgerWriter(str(ledger), "first", "reboot", "us-east-1")  # the first run
    try:
        listed = write_ids(tmp_path / "ids.txt", ids)
        for extra in ((), ("--resume",)):
            code, report = terminate_json(sandbox, listed, ledger, *extra, action="reboot")
            assert code == 74, report
            assert "in use by another swarm run" in report["error"]
            assert report["error"].endswith("nothing was done")
            assert sandbox.calls_by("RebootInstances") == 0
        # Nor is the ledger undone, or merged over, while that run writes it.
        code, _, err = swarm("rollback", str(ledger), "--yes", "--endpoint-url", sandbox.endpoint)
        assert code == 74 and "in use by another swarm run" in err, err
        code, _, err = swarm("ledger", "merge", str(ledger), "-o", str(ledger))
        assert code == 74 and "merge once that run has ended" in err, err
        # Merged into another file, it is read as far as written, and said so.
        code, _, err = swarm("ledger", "merge", str(ledger), "-o", str(tmp_path / "m.jsonl"))
        assert "is being written by a run" in err, err
        # Read while that run writes it: what it lists may still be sent; and a run that
        # has recorded nothing yet has not stopped.
        for command in ("failed", "summary"):
            code, _, err = swarm("ledger", command, str(ledger))
            said = " ".join(err.split())
            assert "is being written by a run" in said, (command, err)
            assert "pending intents may be on their way" in said
            assert "holds no records" not in said  # nothing written yet, but not stopped
    finally:
        running.close()
    code, _, err = swarm("ledger", "failed", str(ledger))
    assert "being written" not in err and "holds no records" in err, err
    code, report = terminate_json(sandbox, listed, ledger, action="reboot")
    assert code == 0, report


def test_ledger_failed_of_a_ledger_a_run_writes_is_not_final(tmp_path: Path) -> None:
    """Its pending intents may be on their way: a list of them given to another run (on
    another ledger, which no lock guards) would send them twice. It says so, exit 1."""
    ledger = tmp_path / "l.jsonl"
    running = LedgerWriter(str(ledger), "first", "stop", "us-east-1")
    ids = ["i-00000001", "i-00000002"]
    running.write_ahead(ids)
    running.write(ids[0], "succeeded")
    running.flush()
    try:
        code, out, err = swarm("ledger", "failed", str(ledger))
        assert code == 1 and out.split() == ids[1:], (code, out, err)
        assert "is being written by a run" in " ".join(err.split())
        # Nor is a gate's answer final, nor a merge of it: exit 1 too, with the warning.
        code, out, err = swarm("ledger", "failed", str(ledger), "--ids", "-", stdin=ids[0])
        assert code == 1 and "is being written by a run" in " ".join(err.split()), err
        code, _, err = swarm("ledger", "merge", str(ledger), "-o", str(tmp_path / "m.jsonl"))
        assert code == 1 and "is being written by a run" in " ".join(err.split()), err
        code, out, err = swarm("ledger", "summary", str(ledger), "--output", "json")
        assert json.loads(out)["incomplete"]["being_written"] == [str(ledger)], out
    finally:
        running.close()
    code, out, err = swarm("ledger", "failed", str(ledger))
    assert code == 0 and out.split() == ids[1:] and "being written" not in err, err


def _signalled_before_its_wait(
    sandbox: Sandbox, tmp_path: Path, action: str, api: str
) -> tuple[list[str], Path, str, str]:
    """``action --wait`` one call at a time, SIGTERM while its calls go out (the fourth
    held): its IDs, its ledger, its stdout and stderr."""
    ids = sandbox.launch(40)  # one at a time: the run is still sending when the hold comes
    ledger = tmp_path / "l.jsonl"
    listed = write_ids(tmp_path / "ids.txt", ids)
    wait = ("--wait", "--max-window", "1", "--batch-size", "1")
    proc = start(sandbox, listed, ledger, *wait, action=action)
    wait_until(lambda: sandbox.calls_by(api) >= 3, proc)
    sandbox.hang(True)
    try:
        wait_until(lambda: sandbox.counters.hung >= 1, proc)
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=30)
    finally:
        sandbox.hang(False)
    assert proc.returncode == 143, err
    return ids, ledger, out, err


def test_a_wait_run_stopped_before_its_wait_leaves_what_it_did_not_known_there(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    """stop --wait, SIGTERM while the stops go out: the stopped ones were never seen
    stopped. Recorded succeeded, the gate passed them, and the retry it prints (of what
    is left) never waited for them, though they were still stopping or started again
    since. They are recorded as a wait stopped midway records them: not known there."""
    ids, ledger, out, err = _signalled_before_its_wait(sandbox, tmp_path, "stop", "StopInstances")
    report = json.loads(out)
    assert report["signal"] == "SIGTERM"
    # Only what was given: no --rollback was.
    assert "--wait skipped: the run was stopped short" in err and "--rollback" not in err
    assert "are recorded not seen there (NotChecked)" in err
    stopped = {r.id for r in read_records(str(ledger)) if r.status == "succeeded"}
    assert len(stopped) >= 3
    assert report["wait"]["not_checked"] == len(stopped) and report["wait"]["reached"] == 0
    state = fold(read_records(str(ledger)))
    for i in stopped:
        last = state[("stop", i)]
        assert (last.status, last.code) == ("pending", "NotChecked"), last
        assert "stopped by SIGTERM before its --wait" in (last.message or "")
    assert failed_list(ledger) == set(ids), "every instance is left to the retry"
    # The undo still finds what the run stopped: looked up, not taken as never done.
    code, _, err = swarm("rollback", str(ledger), "--yes", "--endpoint-url", sandbox.endpoint)
    assert code == 0, err
    states = sandbox.states(ids)
    assert {states[i] for i in stopped} == {"running"}, states


def test_a_wait_run_killed_while_it_waits_leaves_what_it_did_not_known_done(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    """stop --wait, kill -9 after its calls (nothing is written after a kill): the
    stops' successes alone passed the gate with the instances still stopping. The run's
    records say it was to wait, so they are listed until a run sees them stopped."""
    ids = sandbox.launch(4)
    ledger = tmp_path / "l.jsonl"
    listed = write_ids(tmp_path / "ids.txt", ids)
    # The wait never sees the state: DescribeInstances throttled for good.
    sandbox.fail_action("DescribeInstances", 503, "RequestLimitExceeded", "slow down")
    proc = start(sandbox, listed, ledger, "--wait", action="stop")
    wait_until(lambda: sandbox.counters.accepted_by_action.get("StopInstances") == 4, proc)
    done = lambda: sum(r.status == "succeeded" for r in read_records(str(ledger))) == 4  # noqa: E731
    wait_until(done, proc)  # every stop recorded: from here on, the run waits
    proc.kill()
    proc.communicate(timeout=30)
    assert failed_list(ledger) == set(ids), "what no wait saw stopped is left to check"
    code, out, _ = swarm("ledger", "summary", str(ledger))
    assert code == 0 and "stop: 4 pending" in out, out
    assert "(4 of the pending accepted, and their run's --wait never said they got" in out
    code, out, _ = swarm("ledger", "summary", str(ledger), "-o", "json")
    assert code == 0 and json.loads(out)["unwaited"] == {"stop": 4}, out
    # The retry waits for them: seen stopped, they pass the gate.
    sandbox.fail_action("DescribeInstances", None)
    code, report = terminate_json(sandbox, listed, ledger, "--resume", "--wait", action="stop")
    assert code == 0, report
    assert failed_list(ledger) == set()
    assert set(sandbox.states(ids).values()) == {"stopped"}


def _all_recorded(ledger: Path, ids: Sequence[str], code: str | None) -> bool:
    """Whether every one of ``ids`` has a success with ``code`` in ``ledger``."""
    try:
        records = list(read_records(str(ledger)))
    except LedgerError:  # not there yet (the run makes it, then checks it)
        return False
    done = {r.id for r in records if r.status == "succeeded" and r.code == code}
    return done >= set(ids)


def test_a_resume_that_waits_killed_while_it_waits_leaves_what_it_found_on_the_way(
    tmp_path: Path,
) -> None:
    """A stop --wait killed, then its --resume --wait killed in its wait: the resume found
    them stopping and recorded them done without a call (AlreadyInState). Still stopping,
    they are left to check until a wait sees them stopped."""
    slow = SandboxConfig(OPEN_BUCKETS, OPEN_BUCKETS, transition_seconds=60.0)
    with Sandbox(slow) as box:
        ids = box.launch(4)
        ledger = tmp_path / "l.jsonl"
        listed = write_ids(tmp_path / "ids.txt", ids)
        for extra, code in (((), None), (("--resume",), "AlreadyInState")):
            proc = start(box, listed, ledger, "--wait", *extra, action="stop")
            wait_until(partial(_all_recorded, ledger, ids, code), proc)
            proc.kill()
            proc.communicate(timeout=30)
            assert failed_list(ledger) == set(ids)
        assert set(box.states(ids).values()) == {"stopping"}


@pytest.mark.parametrize("waits", [True, False])
def test_a_resume_by_selection_looks_up_what_a_killed_wait_run_left_unchecked(
    tmp_path: Path, waits: bool
) -> None:
    """stop --filter --wait killed while it waits, then resumed by the same selection once
    the instances are stopped: the selection (running ones) holds none of them, so only
    the ledger says to look them up; seen stopped, they pass the gate."""
    with Sandbox(SandboxConfig(OPEN_BUCKETS, OPEN_BUCKETS, transition_seconds=2.0)) as box:
        ids = box.launch(4)
        box.client().create_tags(Resources=ids, Tags=[{"Key": "team", "Value": "ci"}])
        ledger = tmp_path / "l.jsonl"
        base = [sys.executable, "-m", "swarm_cli", "stop", "--filter", "tag:team=ci", "--yes"]
        base += ["--ledger", str(ledger), "--endpoint-url", box.endpoint]
        proc = subprocess.Popen(
            [*base, "--wait", "--progress", "none"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        wait_until(partial(_all_recorded, ledger, ids, None), proc)
        proc.kill()
        proc.communicate(timeout=30)
        code, out, err = swarm("ledger", "failed", str(ledger))
        assert code == 0, err
        assert set(out.split()) == set(ids)
        note = "4 of them their run accepted and was to --wait for (stopped), and no record"
        assert note in err and f"swarm stop --ids LIST --ledger {ledger} --resume --wait" in err
        deadline = time.monotonic() + 30
        while set(box.states(ids).values()) != {"stopped"}:
            assert time.monotonic() < deadline
            time.sleep(0.1)
        again = [*base, "--resume", *(["--wait"] if waits else [])]
        done = subprocess.run(again, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        assert failed_list(ledger) == set()
        # Without --wait, one still stopping would be taken as done: said, with the cure.
        warned = "a run was to --wait for and no wait saw arrive" in done.stderr
        assert warned is not waits, done.stderr


def test_a_reboot_wait_stopped_before_its_wait_keeps_its_reboots_done(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    """A reboot leaves no state a resume could look up: recorded not known done, the
    instances it rebooted would be rebooted again by the retry."""
    ids, ledger, _, _ = _signalled_before_its_wait(sandbox, tmp_path, "reboot", "RebootInstances")
    state = fold(read_records(str(ledger)))
    rebooted = {i for (_, i), r in state.items() if r.status == "succeeded"}
    assert len(rebooted) >= 3
    assert failed_list(ledger) == set(ids) - rebooted


def test_a_terminate_wait_stopped_before_its_wait_keeps_its_terminations_done(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    """A terminate accepted stays done: nothing of it is recorded or counted unchecked."""
    ids, ledger, out, err = _signalled_before_its_wait(
        sandbox, tmp_path, "terminate", "TerminateInstances"
    )
    assert "NotChecked" not in ledger.read_text() and "wait" not in json.loads(out)
    assert "recorded not seen there" not in err
    state = fold(read_records(str(ledger)))
    terminated = {i for (_, i), r in state.items() if r.status == "succeeded"}
    assert len(terminated) >= 3
    assert failed_list(ledger) == set(ids) - terminated
    # Said, and true: the same command with --resume looks them up and waits for them.
    said = f"--wait: the {len(terminated)} it terminated stand done in the ledger"
    assert said in " ".join(err.split()), err
    code, out, err = swarm(
        "terminate", "--ids", str(tmp_path / "ids.txt"), "--endpoint-url", sandbox.endpoint,
        "--ledger", str(ledger), "--yes", "--resume", "--wait", "--output", "json",
        "--progress", "none",
    )  # fmt: skip
    assert code == 0, err
    assert json.loads(out)["wait"]["reached"] == len(ids)
    assert set(sandbox.states(ids).values()) <= {"terminated"}


def test_a_merge_that_finds_no_room_ends_74_and_leaves_nothing_behind(tmp_path: Path) -> None:
    """A full disk under `ledger merge -o` is the ledger that could not be written (74), as
    in a run, not bad usage (2); and no partial file is left."""
    ledger = tmp_path / "l.jsonl"
    writer = LedgerWriter(str(ledger), "0" * 12, "terminate", "us-east-1")
    writer.write_ahead([f"i-{n:017x}" for n in range(1, 201)])
    writer.close()
    out = tmp_path / "merged" / "m.jsonl"
    out.parent.mkdir()
    done = subprocess.run(
        [sys.executable, "-m", "swarm_cli", "ledger", "merge", "-o", str(out), str(ledger)],
        capture_output=True,
        text=True,
        preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096)),
        timeout=60,
    )
    assert done.returncode == 74, done.stderr
    assert "cannot write the ledger" in done.stderr and "File too large" in done.stderr
    assert list(out.parent.iterdir()) == []
    # A folder that is not there is a path given wrongly: still 2.
    code, _, err = swarm("ledger", "merge", "-o", str(tmp_path / "no" / "m.jsonl"), str(ledger))
    assert code == 2 and "cannot write the ledger" in err
