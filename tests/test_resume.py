"""Resuming reversible actions: the latest run decides, and resume asks EC2 first.

The scenario of issue 16: stop 20 instances, start them, stop them again and
``kill -9`` the last stop midway, all into one ledger. The ledger must list the
instances still running, and ``--resume`` must act on exactly those.
"""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_cli import swarm, write_ids
from test_faults import lines, wait_until

from swarm_cli.sandbox import BucketSpec, Sandbox, SandboxConfig

# One StopInstances call every 0.2 s: a run of 20 single-ID calls lasts seconds.
SLOW = SandboxConfig(BucketSpec(1, 10), BucketSpec(100_000, 100_000), latency=0.02)


def act(box: Sandbox, action: str, ids_file: str, ledger: Path, *extra: str) -> tuple[int, str]:
    code, _, err = swarm(
        action,
        "--ids",
        ids_file,
        "--endpoint-url",
        box.endpoint,
        "--ledger",
        str(ledger),
        "--yes",
        "--progress",
        "none",
        *extra,
    )
    return code, err


def stop_killed_midway(
    box: Sandbox, ids_file: str, ledger: Path, done: int, action: str = "stop"
) -> None:
    """A ``swarm stop`` (or ``action``) killed with -9 once ``done`` outcomes are in the
    ledger."""
    before = lines(ledger)
    proc = subprocess.Popen(
        [
            *(sys.executable, "-m", "swarm_cli", action, "--ids", ids_file, "--yes"),
            *("--ledger", str(ledger), "--endpoint-url", box.endpoint, "--progress", "none"),
            *("--batch-size", "1", "--max-window", "1"),
        ],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    # The write-ahead (20 lines), then one line per outcome.
    wait_until(lambda: lines(ledger) >= before + 20 + done, proc)
    proc.kill()
    proc.communicate(timeout=10)


Scenario = tuple[Sandbox, list[str], Path, str]


@pytest.fixture
def stopped_started_stopped_midway(tmp_path: Path) -> Iterator[Scenario]:
    with Sandbox(SLOW) as box:
        ids = box.launch(20)
        ids_file = write_ids(tmp_path / "ids.txt", ids)
        ledger = tmp_path / "l.jsonl"
        assert act(box, "stop", ids_file, ledger)[0] == 0
        assert act(box, "start", ids_file, ledger)[0] == 0
        stop_killed_midway(box, ids_file, ledger, done=8)
        yield box, ids, ledger, ids_file


def running(box: Sandbox, ids: list[str]) -> set[str]:
    return {i for i, s in box.states(ids).items() if s == "running"}


def stops_sent(box: Sandbox) -> int:
    return box.counters.accepted_by_action.get("StopInstances", 0)


@pytest.mark.slow
def test_after_stop_start_and_a_stop_killed_midway_the_running_ones_are_listed_and_resumed(
    stopped_started_stopped_midway: Scenario,
) -> None:
    box, ids, ledger, ids_file = stopped_started_stopped_midway
    left = running(box, ids)
    assert 0 < len(left) < 20
    code, out, err = swarm("ledger", "failed", "--action", "stop", str(ledger))
    assert left <= set(out.split()), err  # the last run decides, not the first one's success
    code, err = act(box, "stop", ids_file, ledger, "--resume")
    assert code == 0, err
    assert "; 0 to go" not in err
    assert running(box, ids) == set()
    code, out, err = swarm("ledger", "failed", "--action", "stop", str(ledger))
    assert (code, out) == (0, ""), err


@pytest.mark.slow
def test_a_resume_sends_only_what_describe_instances_shows_is_not_done(
    stopped_started_stopped_midway: Scenario,
) -> None:
    box, ids, ledger, ids_file = stopped_started_stopped_midway
    # Someone else stops two of those the ledger holds as not done.
    code, out, _ = swarm("ledger", "failed", "--action", "stop", str(ledger))
    listed = sorted(out.split())
    box.client().stop_instances(InstanceIds=listed[:2])
    left = running(box, ids)
    assert len(left) == len(listed) - 2 or len(left) == len(listed) - 3  # a call was in flight
    before, looked = stops_sent(box), box.calls_by("DescribeInstances")
    code, err = act(box, "stop", ids_file, ledger, "--resume")
    assert code == 0, err
    assert running(box, ids) == set()
    assert stops_sent(box) - before == len(left), err  # the rest was found stopped: not sent
    assert box.calls_by("DescribeInstances") > looked  # Describe calls, not mutations
    assert f"shows {len(listed) - len(left)} of {len(listed)} already stopping or stopped" in err
    records = [json.loads(line) for line in ledger.read_text().splitlines()]
    already = {r["id"] for r in records if r.get("code") == "AlreadyInState"}
    assert already == set(listed) - left and len(already) >= 2
    code, out, err = swarm("ledger", "failed", "--action", "stop", str(ledger))
    assert (code, out) == (0, ""), err


@pytest.mark.slow
def test_a_stop_resumed_after_a_start_killed_midway_looks_again(tmp_path: Path) -> None:
    """stop, then start killed midway, then stop --resume: the first stop's successes
    are older than the start, so they no longer say the instances are stopped."""
    with Sandbox(SLOW) as box:
        ids = box.launch(20)
        ids_file = write_ids(tmp_path / "ids.txt", ids)
        ledger = tmp_path / "l.jsonl"
        assert act(box, "stop", ids_file, ledger)[0] == 0
        stop_killed_midway(box, ids_file, ledger, done=8, action="start")
        started = running(box, ids)
        assert 0 < len(started) < 20
        code, out, err = swarm("ledger", "failed", "--action", "stop", str(ledger))
        assert started <= set(out.split()), err
        before = stops_sent(box)
        code, err = act(box, "stop", ids_file, ledger, "--resume")
        assert code == 0, err
        assert "older than a start" in err and "nothing to do" not in err
        assert running(box, ids) == set()
        assert stops_sent(box) - before == len(started), err  # the others were looked up
        code, out, err = swarm("ledger", "failed", "--action", "stop", str(ledger))
        assert (code, out) == (0, ""), err


def test_a_resumed_reboot_resends_what_is_not_known_done(sandbox: Sandbox, tmp_path: Path) -> None:
    ids = sandbox.launch(3)
    ids_file = write_ids(tmp_path / "ids.txt", ids)
    ledger = tmp_path / "l.jsonl"
    ledger.write_text(
        "".join(
            json.dumps(
                {
                    "v": 1,
                    "ts": "2026-01-01T00:00:00Z",
                    "run": "r",
                    "seq": n + 1,
                    "action": "reboot",
                    "id": i,
                    "status": status,
                    "region": "us-east-1",
                }
            )
            + "\n"
            for n, (i, status) in enumerate(
                zip(ids, ["succeeded", "pending", "failed"], strict=True)
            )
        )
    )
    code, err = act(sandbox, "reboot", ids_file, ledger, "--resume")
    assert code == 0, err
    assert "reboot leaves no state to check; the 2 not known rebooted are sent again" in err
    assert sandbox.counters.accepted_by_action.get("RebootInstances") == 2


def test_a_resumed_instance_not_listed_is_done_only_if_the_ledger_sent_it(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    ids = sandbox.launch(3)
    ids_file = write_ids(tmp_path / "ids.txt", ids)
    ledger = tmp_path / "l.jsonl"
    base = ("terminate", "--ids", ids_file, "--endpoint-url", sandbox.endpoint, "--yes")
    code, out, err = swarm(
        *base, "--ledger", str(ledger), "--resume", "--region", "eu-west-1", "--output", "json"
    )
    assert code == 1, err
    assert json.loads(out)["counts"]["missing"] == 3
    assert set(sandbox.states(ids).values()) == {"running"}
    code, listed, _ = swarm("ledger", "failed", "--missing", str(ledger))
    assert set(listed.split()) == set(ids)


def test_a_resume_in_another_region_than_the_ledgers_intents_finds_them_missing(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    """The ledger holds the intents, in us-east-1; a resume in eu-west-1 cannot see them
    there, which says nothing of whether they are done."""
    from swarm_cli.ledger import LedgerWriter

    ids = sandbox.launch(3)
    ledger = tmp_path / "l.jsonl"
    writer = LedgerWriter(str(ledger), "r1", "terminate", "us-east-1")
    writer.write_ahead(ids)  # pending: a run stopped before any answer
    writer.close()
    code, out, err = swarm(
        *("terminate", "--ids", write_ids(tmp_path / "ids.txt", ids)),
        *("--endpoint-url", sandbox.endpoint, "--yes", "--ledger", str(ledger), "--resume"),
        *("--region", "eu-west-1", "--output", "json"),
    )
    assert code == 1, err
    assert json.loads(out)["counts"]["missing"] == 3
    assert set(sandbox.states(ids).values()) == {"running"}
    # In its own region, the same resume acts on them.
    code, out, err = swarm(
        *("terminate", "--ids", write_ids(tmp_path / "ids.txt", ids)),
        *("--endpoint-url", sandbox.endpoint, "--yes", "--ledger", str(ledger), "--resume"),
        *("--region", "us-east-1", "--output", "json"),
    )
    assert code == 0, err
    assert set(sandbox.states(ids).values()) <= {"shutting-down", "terminated"}


def test_a_resumed_typo_stays_missing(sandbox: Sandbox, tmp_path: Path) -> None:
    """EC2 said the ID does not exist: a resume that does not find it either is no success."""
    typo = "i-0123456789abcdef0"
    ledger = tmp_path / "l.jsonl"
    run = (
        *("terminate", "--ids", write_ids(tmp_path / "ids.txt", [typo])),
        *("--endpoint-url", sandbox.endpoint, "--yes", "--ledger", str(ledger), "--output", "json"),
    )
    code, out, err = swarm(*run)
    assert code == 1 and json.loads(out)["counts"]["missing"] == 1, err
    code, out, err = swarm(*run, "--resume")
    assert code == 1, err
    assert json.loads(out)["counts"] == {"succeeded": 0, "failed": 0, "missing": 1, "pending": 0}
    code, listed, _ = swarm("ledger", "failed", "--missing", str(ledger))
    assert listed.split() == [typo]


def test_calls_that_never_connected_leave_a_typo_missing_on_the_resume(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    """No connection was made: nothing can have happened, so the resume does not take an
    instance it cannot find for done."""
    ids = [*sandbox.launch(2), "i-0123456789abcdef0"]
    ledger = tmp_path / "l.jsonl"
    listed = write_ids(tmp_path / "ids.txt", ids)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{s.getsockname()[1]}"  # closed again before the run
    common = ("terminate", "--ids", listed, "--yes", "--ledger", str(ledger), "--output", "json")
    code, out, err = swarm(*common, "--endpoint-url", dead, "--max-outage", "1")
    assert code == 1 and json.loads(out)["counts"]["pending"] == 3, err
    code, out, err = swarm(*common, "--endpoint-url", sandbox.endpoint, "--resume")
    assert code == 1, err
    assert json.loads(out)["counts"] == {"succeeded": 2, "failed": 0, "missing": 1, "pending": 0}


def test_a_resumed_terminate_of_an_id_not_listed_soon_after_is_sent_again(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    """A run may have terminated all four (killed, or a call timed out), but EC2 lists a
    terminated instance for about an hour: one not listed at all minutes later was never
    there (it lives in another region, here). It was taken as done: exit 0, the gate
    green, the instance running. An hour on, not being listed says nothing either way."""
    from swarm_cli.ledger import LedgerWriter

    ids = sandbox.launch(3)
    elsewhere = sandbox.launch(1, region="eu-west-1")[0]
    listed = write_ids(tmp_path / "ids.txt", [*ids, elsewhere])
    ledger = tmp_path / "l.jsonl"
    writer = LedgerWriter(str(ledger), "r1", "terminate", "us-east-1")
    writer.write_ahead([*ids, elsewhere])  # bare intents: their calls may have left
    writer.close()
    run = (
        *("terminate", "--ids", listed, "--endpoint-url", sandbox.endpoint, "--yes"),
        *("--ledger", str(ledger), "--output", "json"),
    )
    code, out, err = swarm(*run, "--resume")
    assert code == 1, err
    assert json.loads(out)["counts"]["missing"] == 1
    assert "1 ID(s) a run may have terminated in the last 45 min are not listed at all" in (
        " ".join(err.split())
    )
    code, _, _ = swarm("ledger", "failed", "--ids", listed, str(ledger))
    assert code == 1
    assert sandbox.states([elsewhere], region="eu-west-1") == {elsewhere: "running"}
    # A long run: its intents written an hour ago, its last record just now (killed): a
    # call of any bare intent may have left a moment ago.
    long_run = tmp_path / "long.jsonl"
    writer = LedgerWriter(str(long_run), "r3", "terminate", "us-east-1")
    fresh = sandbox.launch(1)
    writer.write_ahead([*fresh, elsewhere])
    writer.close()
    text = long_run.read_text().replace('"ts":"20', '"ts":"19')
    writer = LedgerWriter(str(long_run), "r3", "terminate", "us-east-1", seq_after=2)
    writer.write(fresh[0], "pending", code="Throttled", message="throttled")  # a later word
    writer.close()
    long_run.write_text(text + long_run.read_text()[len(text) :])
    resumed = (
        *("terminate", "--ids", write_ids(tmp_path / "two.txt", [*fresh, elsewhere])),
        *("--endpoint-url", sandbox.endpoint, "--yes", "--output", "json", "--resume"),
    )
    code, out, err = swarm(*resumed, "--ledger", str(long_run))
    assert code == 1 and json.loads(out)["counts"]["missing"] == 1, err
    # A time that cannot be read is taken as recent, not as old.
    odd = tmp_path / "odd.jsonl"
    writer = LedgerWriter(str(odd), "r4", "terminate", "us-east-1")
    fresh = sandbox.launch(1)
    writer.write_ahead([*fresh, elsewhere])
    writer.close()
    odd.write_text(re.sub(r'"ts":"[^"]*"', '"ts":"not-a-time"', odd.read_text()))
    code, out, err = swarm(
        *("terminate", "--ids", write_ids(tmp_path / "three.txt", [*fresh, elsewhere])),
        *("--endpoint-url", sandbox.endpoint, "--yes", "--output", "json", "--resume"),
        *("--ledger", str(odd)),
    )
    assert code == 1 and json.loads(out)["counts"]["missing"] == 1, err
    # Intents an hour old or more: what the run terminated may have vanished since.
    fresh = sandbox.launch(1)
    writer = LedgerWriter(str(tmp_path / "old.jsonl"), "r2", "terminate", "us-east-1")
    writer.write_ahead([*fresh, elsewhere])
    writer.close()
    aged = (tmp_path / "old.jsonl").read_text().replace('"ts":"20', '"ts":"19')
    assert aged.count('"ts":"19') == 2
    (tmp_path / "old.jsonl").write_text(aged)
    code, out, err = swarm(
        *("terminate", "--ids", write_ids(tmp_path / "two.txt", [*fresh, elsewhere])),
        *("--endpoint-url", sandbox.endpoint, "--yes", "--ledger", str(tmp_path / "old.jsonl")),
        *("--output", "json", "--resume"),
    )
    assert code == 0, err
    assert json.loads(out)["counts"]["succeeded"] == 2


def test_a_look_up_that_meets_only_errors_says_so_and_the_resume_goes_on(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    """DescribeInstances answers 500 to every call of the resume's look-up: it says it
    is probing an outage (not silent for --max-outage), names the errors, and sends all."""
    ids = sandbox.launch(4)
    ids_file = write_ids(tmp_path / "ids.txt", ids)
    ledger = tmp_path / "l.jsonl"
    ledger.write_text(
        "".join(
            json.dumps(
                {
                    "v": 1,
                    "ts": "2026-01-01T00:00:00Z",
                    "run": "r",
                    "seq": n + 1,
                    "action": "stop",
                    "id": i,
                    "status": "pending",
                    "region": "us-east-1",
                }
            )
            + "\n"
            for n, i in enumerate(ids)
        )
    )
    sandbox.fail_action("DescribeInstances", 500)
    code, _, err = swarm(
        *("stop", "--ids", ids_file, "--endpoint-url", sandbox.endpoint, "--yes"),
        *("--ledger", str(ledger), "--resume", "--max-outage", "2", "--progress", "none"),
    )
    assert code == 0, err
    text = " ".join(err.split())
    assert (
        "DescribeInstances: OUTAGE: only errors from the endpoint (InternalError), probing" in text
    )
    # Each ID's look-up ends when the outage gives up on it (EndpointErrors) or, a moment
    # sooner, when its own attempts are spent (InternalError): which, the clock decides.
    read = re.search(r"4 could not be read \(([^)]*)\)", text)
    assert read is not None, text
    named = dict(part.split(" x ") for part in read.group(1).split(", "))
    assert set(named) <= {"EndpointErrors", "InternalError"}, text
    assert sum(map(int, named.values())) == 4, text
    assert set(sandbox.states(ids).values()) == {"stopped"}


def test_a_run_where_nothing_exists_suggests_the_region_and_the_gate_says_what_it_leaves_out(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    ids = sandbox.launch(3)
    ids_file = write_ids(tmp_path / "ids.txt", ids)
    ledger = tmp_path / "l.jsonl"
    code, out, err = swarm(
        *("terminate", "--ids", ids_file, "--endpoint-url", sandbox.endpoint, "--yes"),
        *("--ledger", str(ledger), "--region", "eu-west-1", "--progress", "none"),
    )
    assert code == 1, err
    said = " ".join((out + err).split())
    assert "none of the 3 exists where it was sent: another region or account?" in said
    code, listed, err = swarm("ledger", "failed", str(ledger))
    assert code == 0 and listed == ""
    assert "3 ID(s) EC2 said do not exist where they were sent are not listed" in err
    assert "--missing lists them" in err


def test_a_resume_by_filter_leaves_a_success_a_later_run_undid_be(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    """A stop a later start of the ledger undid is not known stopped now, but it was
    sent, and the start was someone's will: a stop resumed by a selection that no longer
    holds it recorded it failed "not sent" (NotSelected), exit 1."""
    from swarm_cli.ledger import fold, read_records

    a, b = sandbox.launch(2)
    ledger = str(tmp_path / "l.jsonl")
    common = ("--endpoint-url", sandbox.endpoint, "--ledger", ledger, "--yes")
    code, _, err = swarm("stop", "--ids", write_ids(tmp_path / "ab.txt", [a, b]), *common)
    assert code == 0, err
    code, _, err = swarm("start", "--ids", write_ids(tmp_path / "b.txt", [b]), *common)
    assert code == 0, err
    code, _, err = swarm("stop", "--filter", f"instance-id={a}", "--resume", *common)
    assert code == 0, err
    stops = {r.id: r for (act, _), r in fold(read_records(ledger)).items() if act == "stop"}
    assert stops[b].code != "NotSelected" and stops[a].status == "succeeded"
    assert sandbox.states([a, b]) == {a: "stopped", b: "running"}


def test_a_selection_s_resume_of_intents_whose_records_name_no_region_is_no_success(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    """A ledger whose records name no region (edited, or an old swarm's), two intents
    left not known done, no longer selected: the resume said "nothing to do" and exited
    0, and they stayed not known done for good. They cannot be looked up (in the wrong
    region one would be taken as gone): said, and the run fails."""
    from swarm_cli.sandbox import ACCOUNT

    ids = sandbox.launch(2)
    client = sandbox.client()
    client.create_tags(Resources=ids, Tags=[{"Key": "team", "Value": "q"}])
    accounts = tmp_path / "accounts.yml"
    accounts.write_text(
        f'accounts:\n  - account_id: "{ACCOUNT}"\n    regions: [us-east-1, eu-west-1]\n'
    )
    where = {"one": ("--region", "us-east-1"), "two": ("--accounts", str(accounts))}
    for name, place in where.items():
        ledger = tmp_path / f"{name}.jsonl"
        args = ("stop", "--filter", "tag:team=q", *place, "--endpoint-url", sandbox.endpoint,
                "--yes", "--ledger", str(ledger), "--progress", "none")  # fmt: skip
        code, _, err = swarm(*args)
        assert code == 0, err
        # Killed before its outcomes were written; the records' regions edited away.
        kept = []
        for line in ledger.read_text().splitlines():
            record = json.loads(line)
            if record["status"] != "succeeded":
                record.pop("region", None)
                kept.append(json.dumps(record) + "\n")
        ledger.write_text("".join(kept))
        client.delete_tags(Resources=ids, Tags=[{"Key": "team"}])
        client.start_instances(InstanceIds=ids)
        code, _, err = swarm(*args, "--resume")
        said = " ".join(err.split())
        assert code == 1, err
        assert "resume: 2 intent(s) of the ledger not known stopped are not selected" in said
        assert "their records name no region" in said
        client.create_tags(Resources=ids, Tags=[{"Key": "team", "Value": "q"}])
