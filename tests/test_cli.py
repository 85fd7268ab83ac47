"""The real CLI against the sandbox over real HTTP."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from swarm_cli.cli import app
from swarm_cli.ledger import LedgerWriter, read_records
from swarm_cli.sandbox import BucketSpec, Sandbox, SandboxConfig, fake_ids

runner = CliRunner()


def swarm(*args: str, stdin: str | None = None) -> tuple[int, str, str]:
    result = runner.invoke(app, list(args), input=stdin)
    if result.exception and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result.exit_code, result.stdout, result.stderr


def write_ids(path: Path, ids: list[str]) -> str:
    path.write_text("".join(f"{i}\n" for i in ids))
    return str(path)


def terminate_json(
    box: Sandbox, ids_file: str, ledger: Path, *extra: str, action: str = "terminate"
) -> tuple[int, Any]:
    code, out, err = swarm(
        action,
        "--ids",
        ids_file,
        "--endpoint-url",
        box.endpoint,
        "--ledger",
        str(ledger),
        "--yes",
        "--output",
        "json",
        "--progress",
        "none",
        *extra,
    )
    assert out, err
    return code, json.loads(out)


def ledger_by_id(path: Path) -> dict[str, list[str]]:
    seen: dict[str, list[str]] = {}
    for record in read_records(str(path)):
        seen.setdefault(record.id, []).append(record.status)
    return seen


@pytest.mark.slow
def test_throttled_run_terminates_everything_and_the_window_backs_off(tmp_path: Path) -> None:
    # A refill under what even a loaded machine sends, so throttles come.
    config = SandboxConfig(BucketSpec(5, 25), BucketSpec(10_000, 10_000), latency=0.02)
    with Sandbox(config) as box:
        ids = box.launch(150)
        code, report = terminate_json(
            box,
            write_ids(tmp_path / "ids.txt", ids),
            tmp_path / "l.jsonl",
            "--batch-size",
            "1",
            "--max-window",
            "64",
        )
        states = box.states(ids)
    assert code == 0
    assert set(states.values()) == {"terminated"}
    assert ledger_by_id(tmp_path / "l.jsonl") == {i: ["pending", "succeeded"] for i in ids}
    assert report["counts"]["succeeded"] == 150
    assert report["throttled_calls"] > 0
    window = [cwnd for _, cwnd in report["window"]["trajectory"]]
    # It backed off; that it grows again is the prober's, checked on a virtual clock
    # (tests/test_controller.py), since a short real run may end before a probe.
    assert any(window[k] < window[k - 1] for k in range(1, len(window))), window


def test_clean_run_exits_zero_and_ledger_accounts_once(sandbox: Sandbox, tmp_path: Path) -> None:
    ids = sandbox.launch(40)
    code, report = terminate_json(
        sandbox, write_ids(tmp_path / "ids.txt", ids), tmp_path / "l.jsonl", "--batch-size", "3"
    )
    assert code == 0
    assert set(sandbox.states(ids).values()) == {"terminated"}
    assert ledger_by_id(tmp_path / "l.jsonl") == {i: ["pending", "succeeded"] for i in ids}
    assert report["calls"] >= 14


def test_malformed_id_exits_two_before_any_call(sandbox: Sandbox, tmp_path: Path) -> None:
    ids = sandbox.launch(3)
    path = tmp_path / "ids.txt"
    path.write_text(f"{ids[0]}\ni-XYZ\n{ids[1]}\nnot-an-id\n")
    code, _, err = swarm(
        "terminate",
        "--ids",
        str(path),
        "--endpoint-url",
        sandbox.endpoint,
        "--yes",
        "--ledger",
        str(tmp_path / "l.jsonl"),
    )
    assert code == 2
    assert "line 2" in err and "line 4" in err
    assert sandbox.counters.accepted + sandbox.counters.throttled == 0
    assert set(sandbox.states(ids).values()) == {"running"}
    assert not (tmp_path / "l.jsonl").exists()


def test_ids_that_do_not_exist_exit_one_and_are_named(sandbox: Sandbox, tmp_path: Path) -> None:
    ids = sandbox.launch(10)
    ghosts = fake_ids(2)
    ledger = tmp_path / "l.jsonl"
    code, report = terminate_json(sandbox, write_ids(tmp_path / "ids.txt", ids + ghosts), ledger)
    assert code == 1
    assert set(sandbox.states(ids).values()) == {"terminated"}
    seen = ledger_by_id(ledger)
    assert {i: seen[i] for i in ghosts} == {g: ["pending", "missing"] for g in ghosts}
    assert {p["id"] for p in report["problems"]} == set(ghosts)
    code, out, _ = swarm("ledger", "failed", str(ledger))
    assert code == 0 and out == ""  # nothing worth retrying: they do not exist
    code, out, _ = swarm("ledger", "failed", "--missing", str(ledger))
    assert code == 0 and sorted(out.split()) == sorted(ghosts)
    code, _ = terminate_json(
        sandbox, write_ids(tmp_path / "ids.txt", ids + ghosts), ledger, "--missing-ok"
    )
    assert code == 0


def test_protected_instances_fail_and_the_rest_terminate(sandbox: Sandbox, tmp_path: Path) -> None:
    ids = sandbox.launch(12, protected=2)
    code, report = terminate_json(
        sandbox, write_ids(tmp_path / "ids.txt", ids), tmp_path / "l.jsonl", "--batch-size", "12"
    )
    assert code == 1
    states = sandbox.states(ids)
    assert [states[i] for i in ids[:2]] == ["running", "running"]
    assert {states[i] for i in ids[2:]} == {"terminated"}
    assert {(p["id"], p["code"]) for p in report["problems"]} == {
        (i, "OperationNotPermitted") for i in ids[:2]
    }


def test_dry_run_terminates_nothing_and_writes_no_ledger(sandbox: Sandbox, tmp_path: Path) -> None:
    ids = sandbox.launch(5)
    ledger = tmp_path / "l.jsonl"
    code, report = terminate_json(
        sandbox, write_ids(tmp_path / "ids.txt", ids), ledger, "--dry-run"
    )
    assert code == 0
    assert report["dry_run"] is True and report["would_act"] == 5
    assert report["exit_code"] == 0 and "nothing was sent" in report["meaning"]
    assert set(sandbox.states(ids).values()) == {"running"}
    assert not ledger.exists()
    # One that would fail: exit 1, said in the object too.
    code, report = terminate_json(
        sandbox,
        write_ids(tmp_path / "more.txt", [*ids, "i-0000000000000dead"]),
        ledger,
        "--dry-run",
    )
    assert (code, report["exit_code"]) == (1, 1)
    assert report["meaning"] == "some would fail or could not be read; nothing was sent"


def test_no_terminal_and_no_yes_refuses_with_three(sandbox: Sandbox, tmp_path: Path) -> None:
    ids = sandbox.launch(2)
    code, _, err = swarm(
        "terminate",
        "--ids",
        write_ids(tmp_path / "ids.txt", ids),
        "--endpoint-url",
        sandbox.endpoint,
        "--ledger",
        str(tmp_path / "l"),
    )
    assert code == 3
    assert "--yes" in err
    assert set(sandbox.states(ids).values()) == {"running"}


def test_ids_from_stdin(sandbox: Sandbox, tmp_path: Path) -> None:
    ids = sandbox.launch(4)
    stdin = "\ufeff# to go\r\n" + "".join(f"  {i}\r\n" for i in ids) + ids[0] + "\n"
    code, _, err = swarm(
        "terminate",
        "--ids",
        "-",
        "--endpoint-url",
        sandbox.endpoint,
        "--yes",
        "--ledger",
        str(tmp_path / "l"),
        "--progress",
        "none",
        stdin=stdin,
    )
    assert code == 0, err
    assert "more than once" in err
    assert set(sandbox.states(ids).values()) == {"terminated"}


def test_resume_sends_only_what_is_not_done(sandbox: Sandbox, tmp_path: Path) -> None:
    ids = sandbox.launch(6, protected=1)
    ids_file = write_ids(tmp_path / "ids.txt", ids)
    ledger = tmp_path / "l.jsonl"
    code, _ = terminate_json(sandbox, ids_file, ledger, "--batch-size", "1")
    assert code == 1
    sandbox.client().modify_instance_attribute(
        InstanceId=ids[0], DisableApiTermination={"Value": False}
    )
    before = sandbox.counters.accepted
    code, report = terminate_json(sandbox, ids_file, ledger, "--resume", "--batch-size", "1")
    assert code == 0
    assert report["total"] == 1
    assert sandbox.counters.accepted - before == 1
    _, out, _ = swarm("ledger", "failed", str(ledger))
    assert out == ""


def test_missing_credentials_stop_with_four_and_record_pending(
    sandbox: Sandbox, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    ids = sandbox.launch(5)
    ledger = tmp_path / "l.jsonl"
    code, report = terminate_json(sandbox, write_ids(tmp_path / "ids.txt", ids), ledger)
    assert code == 4
    assert report["fatal"]["code"] == "NoCredentialsError"
    assert ledger_by_id(ledger) == {i: ["pending", "pending"] for i in ids}
    assert set(sandbox.states(ids).values()) == {"running"}
    pending = [r for r in read_records(str(ledger)) if r.code]
    assert {r.code for r in pending} == {"NoCredentialsError"}, "the pending records say why"


def test_rehearsal_runs_exactly_the_listed_ids(tmp_path: Path) -> None:
    ids = [f"i-{n:017x}" for n in range(1, 26)]
    code, out, err = swarm(
        "terminate",
        "--ids",
        write_ids(tmp_path / "ids.txt", ids),
        "--sandbox",
        "--output",
        "json",
        "--progress",
        "none",
        "--ledger",
        str(tmp_path / "l.jsonl"),
    )
    assert code == 0, err
    report = json.loads(out)
    assert "Nothing leaves this machine" in err
    assert report["sandbox"]["terminated"] == 25
    assert report["endpoint"].startswith("http://127.0.0.1:")
    assert not (tmp_path / "l.jsonl").exists()


def demo_json(tmp_path: Path, *args: str) -> tuple[dict[str, Any], str]:
    """``swarm demo`` with a JSON report and a ledger in ``tmp_path``, refilling 200/s;
    it must exit 0. Returns the report and what it printed on stderr."""
    code, out, err = swarm(
        "demo",
        "--rate",
        "200",
        *args,
        "--progress",
        "none",
        "--output",
        "json",
        "--ledger",
        str(tmp_path / "demo.jsonl"),
    )
    assert code == 0, err
    return json.loads(out), err


def test_demo_terminates_every_instance(tmp_path: Path) -> None:
    report, err = demo_json(tmp_path, "--count", "40")
    assert report["sandbox"]["terminated"] == 40
    assert report["sandbox"]["still_running"] == 0
    assert "local fake EC2" in err
    assert len(ledger_by_id(tmp_path / "demo.jsonl")) == 40


def test_demo_with_calls_throttled_at_random_still_terminates_every_instance(
    tmp_path: Path,
) -> None:
    report, err = demo_json(
        tmp_path, "--count", "30", "--error-rate", "0", "--throttle-share", "0.3"
    )
    assert report["sandbox"]["terminated"] == 30
    assert report["counts"]["succeeded"] == 30
    assert report["throttled_calls"] > 0  # the random ones: the bucket alone never runs dry
    assert "30% throttled at random" in err


def sandbox_process(env_file: Path, *args: str) -> tuple[subprocess.Popen[str], dict[str, str]]:
    """``swarm sandbox --port 0 ARGS --env-out ENV_FILE`` as a process, once it is ready;
    with the environment its env file exports."""
    command = [sys.executable, "-m", "swarm_cli", "sandbox", "--port", "0"]
    proc = subprocess.Popen(
        [*command, *args, "--env-out", str(env_file)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 60
    while not env_file.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise AssertionError(f"the sandbox did not get ready: {proc.communicate()}")
        time.sleep(0.1)
    exports = env_file.read_text().splitlines()
    return proc, dict(line.removeprefix("export ").split("=", 1) for line in exports)


def test_the_sandbox_says_which_kinds_it_put_in_use(tmp_path: Path) -> None:
    """--in-use applies to snapshots, volumes and addresses, up to as many as were made:
    the banner said "of each kind in use" with images made, none of which can be."""
    made = ("--snapshots", "2", "--volumes", "5", "--images", "1", "--in-use", "3")
    proc, _ = sandbox_process(tmp_path / "e.env", "--count", "1", *made)
    proc.terminate()
    _, err = proc.communicate(timeout=60)
    # No more of a kind in use than were made.
    said = "made 2 snapshots, 5 volumes, 1 images; 2 of the snapshots and 3 of the volumes in use"
    assert said in err, err


def test_sandbox_process_and_terminate_pair(tmp_path: Path) -> None:
    env_file, ids_file = tmp_path / "sandbox.env", tmp_path / "ids.txt"
    proc, env = sandbox_process(env_file, "--count", "30", "--ids-out", str(ids_file))
    try:
        run = subprocess.run(
            [
                sys.executable,
                "-m",
                "swarm_cli",
                "terminate",
                "--ids",
                str(ids_file),
                "--yes",
                "--ledger",
                str(tmp_path / "l.jsonl"),
                "--output",
                "json",
            ],
            env={**os.environ, **env},
            capture_output=True,
            text=True,
            timeout=120,
            stdin=subprocess.DEVNULL,
        )
        assert run.returncode == 0, run.stderr
        report = json.loads(run.stdout)
        assert report["counts"]["succeeded"] == 30
        assert report["endpoint"] == env["AWS_ENDPOINT_URL"]
        assert "terminate:" in run.stderr  # plain progress/summary on stderr when piped
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=20)
    assert proc.returncode == 0, err
    assert "sandbox stopped" in err
    assert not env_file.exists()  # its endpoint is gone: a later wait must not find it


def test_a_sandbox_s_instances_are_new_each_time_and_protected_as_asked(tmp_path: Path) -> None:
    """Launched through moto's RunInstances, 50,000 instances took over ten minutes: made
    directly now, their IDs are still new each time (a ledger left from an earlier sandbox
    must never find them, even with the same --seed); --protected protects the first."""
    lists = []
    for k in range(2):
        env_file, ids_file = tmp_path / f"s{k}.env", tmp_path / f"ids{k}.txt"
        proc, env = sandbox_process(
            env_file, "--count", "5", "--protected", "2", "--seed", "7", "--ids-out", str(ids_file)
        )
        try:
            ids = ids_file.read_text().split()
            run = subprocess.run(
                [sys.executable, "-m", "swarm_cli", "terminate", "--ids", str(ids_file),
                 "--yes", "--ledger", str(tmp_path / f"l{k}.jsonl"), "--output", "json"],
                env={**os.environ, **env}, capture_output=True, text=True, timeout=120,
                stdin=subprocess.DEVNULL,
            )  # fmt: skip
            report = json.loads(run.stdout)
            assert report["counts"] == {"succeeded": 3, "failed": 2, "missing": 0, "pending": 0}
            refused = {p["id"] for p in report["problems"]}
            assert refused == set(ids[:2]), report["problems"]
        finally:
            proc.terminate()
            proc.communicate(timeout=20)
        lists.append(ids)
    assert len(lists[0]) == 5 and not set(lists[0]) & set(lists[1])


def test_a_sandbox_stops_instances_through_stopping_when_asked(tmp_path: Path) -> None:
    env_file, ids_file = tmp_path / "sandbox.env", tmp_path / "ids.txt"
    proc, env = sandbox_process(
        env_file, "--count", "3", "--ids-out", str(ids_file), "--transition-seconds", "60"
    )
    try:
        run = subprocess.run(
            [sys.executable, "-m", "swarm_cli", "stop", "--ids", str(ids_file), "--yes",
             "--ledger", str(tmp_path / "l.jsonl"), "--progress", "none"],
            env={**os.environ, **env}, capture_output=True, text=True, timeout=120,
            stdin=subprocess.DEVNULL,
        )  # fmt: skip
        assert run.returncode == 0, run.stderr
        listed = subprocess.run(
            [sys.executable, "-m", "swarm_cli", "list", "--state", "stopping"],
            env={**os.environ, **env}, capture_output=True, text=True, timeout=120,
            stdin=subprocess.DEVNULL,
        )  # fmt: skip
        assert sorted(listed.stdout.split()) == sorted(ids_file.read_text().split())
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=20)
    assert "stopping and pending for 60 s" in err


def test_a_sandbox_over_accounts_writes_a_list_swarm_takes_missing_ids_included(
    tmp_path: Path,
) -> None:
    env_file, ids_file, accounts = (tmp_path / n for n in ("s.env", "ids.csv", "accounts.yml"))
    proc, env = sandbox_process(
        env_file,
        *("--count", "3", "--regions", "2", "--accounts", "2", "--protected", "1"),
        *("--missing", "2", "--ids-out", str(ids_file), "--accounts-out", str(accounts)),
    )
    try:
        rows = ids_file.read_text().splitlines()[1:]
        assert len(rows) == 4 * 3 + 2 and all(row.split(",")[2] for row in rows)
        plan = subprocess.run(
            [
                *(sys.executable, "-m", "swarm_cli", "plan", "terminate", "--ids", str(ids_file)),
                *("--accounts", str(accounts), "--output", "json"),
            ],
            env={**os.environ, **env},
            capture_output=True,
            text=True,
            timeout=120,
            stdin=subprocess.DEVNULL,
        )
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=20)
    assert plan.returncode == 1, plan.stderr  # some would fail: the protected and the gone
    report = json.loads(plan.stdout)
    assert report["would_act"] == 4 * 2 and report["total"] == 4 * 3 + 2
    assert Counter(row["prediction"] for row in report["rows"])["would act"] == 4 * 2
    assert "12 running instance(s), 4 protected" in err


def test_a_sandbox_that_cannot_listen_says_why_and_leaves_no_stale_env_file(
    tmp_path: Path,
) -> None:
    env_file = tmp_path / "sandbox.env"
    env_file.write_text("export AWS_ENDPOINT_URL=http://127.0.0.1:9\n")  # an earlier run's
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        code, _out, err = swarm("sandbox", "--port", str(port), "--env-out", str(env_file))
    assert code == 2
    assert f"cannot listen on 127.0.0.1:{port}" in err and "--port 0" in err
    assert not env_file.exists()


def test_sandbox_accounts_out_without_accounts_is_refused(tmp_path: Path) -> None:
    out = tmp_path / "accounts.yml"
    code, _out, err = swarm("sandbox", "--port", "0", "--regions", "2", "--accounts-out", str(out))
    assert code == 2 and "--accounts N" in err
    assert not out.exists()


def test_ctrl_c_finishes_calls_in_flight_and_records_the_rest_pending(tmp_path: Path) -> None:
    config = SandboxConfig(BucketSpec(2, 8), BucketSpec(10_000, 10_000), latency=0.05)
    ledger = tmp_path / "l.jsonl"
    with Sandbox(config) as box:
        ids = box.launch(200)
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "swarm_cli",
                "terminate",
                "--ids",
                write_ids(tmp_path / "ids.txt", ids),
                "--yes",
                "--batch-size",
                "1",
                "--ledger",
                str(ledger),
                "--endpoint-url",
                box.endpoint,
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        deadline = time.monotonic() + 60
        # Every ID is written ahead as pending; wait for a few outcomes after those.
        while not ledger.exists() or len(ledger.read_text().splitlines()) < len(ids) + 5:
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline
            time.sleep(0.05)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
        states = box.states(ids)
    assert proc.returncode == 130, err
    assert "interrupted" in out
    seen = ledger_by_id(ledger)
    assert sorted(seen) == sorted(ids), "every ID is recorded: written ahead, then resolved"
    done = {i for i, v in seen.items() if v == ["pending", "succeeded"]}
    pending = {i for i, v in seen.items() if v == ["pending", "pending"]}
    assert done and pending and done | pending == set(ids)
    assert {states[i] for i in done} == {"terminated"}
    assert {states[i] for i in pending} == {"running"}


def test_ledger_commands_merge_shards_and_warn_of_damage(tmp_path: Path) -> None:
    from swarm_cli.ledger import LedgerWriter

    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    first = LedgerWriter(str(a), "run-a", "terminate", "us-east-1")
    first.write("i-00000001", "failed", code="InternalError")
    first.write("i-00000002", "succeeded")
    first.write("i-00000003", "pending")
    first.close()
    second = LedgerWriter(str(b), "run-b", "terminate", "us-east-1")
    second.write("i-00000001", "succeeded")
    second.close()
    with open(b, "a") as handle:
        handle.write('{"v":1,"id":"i-0')
    code, out, err = swarm("ledger", "failed", str(b), str(a))
    assert code == 0
    assert out.split() == ["i-00000003"]
    assert "1 damaged ledger line" in err and "line 2" in err
    code, out, _ = swarm("ledger", "summary", str(a), str(b), "--output", "json")
    assert json.loads(out)["actions"]["terminate"] == {
        "pending": 1,
        "missing": 0,
        "failed": 0,
        "succeeded": 2,
    }
    # What the counts may lack is said in the JSON too, for a script that reads only it.
    assert json.loads(out)["incomplete"] == {
        "damaged_lines": 1,
        "cut_short_runs": [],
        "empty_ledgers": [],
        "unaccounted_intents": 0,
        "being_written": [],
    }
    (tmp_path / "empty.jsonl").write_text("")
    code, out, _ = swarm("ledger", "summary", str(a), str(tmp_path / "empty.jsonl"), "-o", "json")
    assert json.loads(out)["incomplete"]["empty_ledgers"] == [str(tmp_path / "empty.jsonl")]
    code, _, err = swarm("ledger", "failed", str(tmp_path / "nope.jsonl"))
    assert code == 2 and "does not exist" in err


def test_verbose_logs_one_line_per_call_and_quiet_says_nothing_on_success(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    ids = sandbox.launch(20)
    ids_file = write_ids(tmp_path / "ids.txt", ids)
    base = ("--ids", ids_file, "--endpoint-url", sandbox.endpoint, "--yes", "--batch-size", "5")
    code, out, err = swarm("terminate", *base, "--ledger", str(tmp_path / "a.jsonl"), "-v")
    assert code == 0
    calls = [line for line in err.splitlines() if line.startswith("terminate 5 ID(s) ")]
    assert len(calls) == 4 and all(" ms · ok · cwnd " in line for line in calls)
    code, out, err = swarm("terminate", *base, "--ledger", str(tmp_path / "b.jsonl"), "-q")
    assert code == 0 and out == "" and err == ""


def test_version_names_boto3_botocore_and_python() -> None:
    import botocore

    code, out, _ = swarm("version")
    assert code == 0 and out.startswith("swarm ") and f"botocore {botocore.__version__}" in out


def test_messages_with_brackets_are_printed_as_they_are(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "moto" else real(name, *a)
    )
    code, _, err = swarm("demo")
    assert code == 2 and "pip install '.[sandbox]'" in err
    assert "'swarm-cli[sandbox] @ git+URL@TAG'" in err
    bad = tmp_path / "ids.txt"
    bad.write_text("i-00000001\n[/oops] not an id\n")
    code, _, err = swarm("terminate", "--ids", str(bad), "--yes")
    assert code == 2 and "'[/oops]'" in err


def test_plan_out_without_a_dry_run_is_refused(tmp_path: Path) -> None:
    ids = write_ids(tmp_path / "ids.txt", ["i-0123456789abcdef0"])
    code, _, err = swarm("terminate", "--ids", ids, "--plan-out", str(tmp_path / "p.txt"), "--yes")
    assert code == 2 and "--plan-out writes what a plan predicts: add --dry-run" in err
    assert not (tmp_path / "p.txt").exists() and not (tmp_path / "swarm-ledger.jsonl").exists()


def test_an_id_listed_in_two_regions_is_refused_and_nothing_sent(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    """The ledger keeps one record per ID: listed in two regions, one would succeed and
    the other end missing, and the ledger commands would count one of them."""
    ids = sandbox.launch(2)
    path = tmp_path / "ids.csv"
    path.write_text(
        "instance_id,region\n"
        f"{ids[0]},us-east-1\n{ids[0]},eu-west-1\n{ids[1]},us-east-1\n{ids[1]},\n"
    )
    code, report = terminate_json(sandbox, str(path), tmp_path / "l.jsonl")
    assert code == 2
    assert "listed in more than one account/region" in report["error"]
    assert f"{ids[0]}: us-east-1 (default account), eu-west-1 (default account)" in report["error"]
    assert ids[1] not in report["error"], "with the default spelled out it is one place"
    assert set(sandbox.states(ids).values()) == {"running"}


@pytest.mark.parametrize("region", ["mars-1", "US-EAST-1", "us-east-1 "])
def test_a_region_not_shaped_as_one_is_refused_as_in_a_list(
    sandbox: Sandbox, tmp_path: Path, region: str
) -> None:
    ids = sandbox.launch(1)
    code, report = terminate_json(
        sandbox, write_ids(tmp_path / "ids.txt", ids), tmp_path / "l.jsonl", "--region", region
    )
    assert code == 2 and f"bad region {region!r} (--region, AWS_REGION" in report["error"]
    assert sandbox.states(ids) == {ids[0]: "running"}
    assert not (tmp_path / "l.jsonl").exists() or not read_records(str(tmp_path / "l.jsonl"))


def test_a_bad_default_region_that_no_line_uses_is_no_error(
    sandbox: Sandbox, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ids = sandbox.launch(1)
    path = tmp_path / "ids.csv"
    path.write_text(f"instance_id,region\n{ids[0]},us-east-1\n")
    monkeypatch.setenv("AWS_REGION", "RegionOne")
    code, report = terminate_json(sandbox, str(path), tmp_path / "l.jsonl")
    assert code == 0 and report["counts"]["succeeded"] == 1


def test_demo_missing_ids_are_in_the_first_region_only(tmp_path: Path) -> None:
    code, out, err = swarm(
        "demo", "--rate", "200", "--count", "5", "--regions", "3", "--missing", "2",
        "--progress", "none", "--output", "json", "--ledger", str(tmp_path / "d.jsonl"),
    )  # fmt: skip
    report = json.loads(out)
    assert code == 1, err
    assert report["total"] == 17 and report["counts"]["missing"] == 2
    summary = swarm("ledger", "summary", str(tmp_path / "d.jsonl"))[1]
    assert "2 missing" in summary and "15 succeeded" in summary


def test_ledger_summary_says_which_pending_a_later_run_may_have_undone(tmp_path: Path) -> None:
    ledger = tmp_path / "l.jsonl"
    ids = ["i-00000001", "i-00000002"]
    stop = LedgerWriter(str(ledger), "run-a", "stop", "us-east-1")
    stop.write_ahead(ids)
    for i in ids:
        stop.write(i, "succeeded")
    stop.close()
    start = LedgerWriter(str(ledger), "run-b", "start", "us-east-1")
    start.write_ahead(ids[:1])
    start.write(ids[0], "succeeded")
    start.close()
    code, out, _ = swarm("ledger", "summary", str(ledger))
    assert code == 0
    assert "stop: 1 pending · 0 missing · 0 failed · 1 succeeded (1 of the pending done once, " \
        "then a later run of start may have undone it)" in out  # fmt: skip
    code, out, _ = swarm("ledger", "summary", str(ledger), "-o", "json")
    assert json.loads(out)["undone"] == {"stop": 1}


def test_ledger_failed_formats_keep_each_id_in_its_place_or_say_they_do_not(
    tmp_path: Path,
) -> None:
    ledger = tmp_path / "l.jsonl"
    for run, region, i in (
        ("run-a", "us-east-1", "i-00000001"),
        ("run-b", "eu-west-1", "i-00000002"),
    ):
        writer = LedgerWriter(str(ledger), run, "terminate", region)
        writer.write_ahead([i])
        writer.write(i, "failed", code="InternalError")
        writer.close()
    code, out, err = swarm("ledger", "failed", str(ledger))
    assert code == 0
    assert out.splitlines() == [
        "instance_id,region,account",
        "i-00000001,us-east-1,",
        "i-00000002,eu-west-1,",
    ]
    assert "note" not in err
    code, out, err = swarm("ledger", "failed", str(ledger), "--format", "ids")
    assert out.split() == ["i-00000001", "i-00000002"]
    assert "in 2 accounts/regions, which --format ids leaves out" in " ".join(err.split())


def test_ledger_failed_ids_of_one_place_say_where_they_are(tmp_path: Path) -> None:
    ledger = tmp_path / "l.jsonl"
    writer = LedgerWriter(str(ledger), "run-a", "terminate", "eu-west-1", account="111111111111")
    writer.write_ahead(["i-00000001"])
    writer.write("i-00000001", "failed", code="InternalError")
    writer.close()
    code, out, err = swarm("ledger", "failed", str(ledger), "--format", "ids")
    assert code == 0 and out.split() == ["i-00000001"]
    said = " ".join(err.split())
    assert "these IDs are in 111111111111/eu-west-1, which --format ids leaves out" in said


def test_demo_refuses_protected_images_and_gives_each_run_its_own_ledger() -> None:
    code, _, err = swarm("demo", "--operation", "deregister-image", "--protected", "3")
    assert code == 2 and "the sandbox cannot protect an image from deregistration" in err
    ledgers = []
    for _ in range(2):  # within one second: the name's time is the same
        code, out, err = swarm("demo", "--count", "2", "--rate", "200", "--progress", "none",
                               "--output", "json")  # fmt: skip
        assert code == 0, err
        ledgers.append(json.loads(out)["ledger"])
    assert ledgers[0] != ledgers[1]
    for path in ledgers:
        assert len({r.run for r in read_records(path)}) == 1
        os.unlink(path)
