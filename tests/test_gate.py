"""A gate that sees what is missing: ``swarm ledger failed --ids LIST LEDGER...``.

Every ID of the list that no ledger shows done is listed, those no ledger has
any record of included (a shard whose job died before writing); permanent
failures are told from what a retry can fix.
"""

from __future__ import annotations

import csv
import json
import os
import shlex
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

from test_cli import swarm, write_ids

from swarm_cli.ledger import fold, read_records
from swarm_cli.sandbox import BucketSpec, Sandbox, SandboxConfig

IDS = [f"i-0000000{n}" for n in range(1, 7)]


def record(instance_id: str, status: str, code: str | None = None) -> str:
    fields = {"v": 1, "ts": "2026-01-01T00:00:00Z", "run": "r", "seq": 1, "action": "stop"}
    return json.dumps({**fields, "id": instance_id, "status": status, "code": code}) + "\n"


def shards(tmp_path: Path) -> tuple[str, str, str]:
    one, two = tmp_path / "shard1.jsonl", tmp_path / "shard2.jsonl"
    one.write_text(
        record(IDS[0], "succeeded")
        + record(IDS[1], "failed", "OperationNotPermitted")
        + record(IDS[2], "pending", "CallTimeout")
    )
    two.write_text(record(IDS[3], "succeeded"))
    # IDS[4] and IDS[5] were in a third shard whose job died before writing anything.
    return write_ids(tmp_path / "ids.txt", IDS), str(one), str(two)


def test_every_id_of_the_list_not_known_done_is_listed_with_those_in_no_ledger(
    tmp_path: Path,
) -> None:
    ids, one, two = shards(tmp_path)
    code, out, err = swarm("ledger", "failed", "--ids", ids, one, two)
    assert code == 1
    assert out.split() == [IDS[1], IDS[2], IDS[4], IDS[5]]
    assert "4 of 6 ID(s)" in err and "not known stopped, 2 of them in no ledger at all" in err
    assert "1 failed permanently (1 OperationNotPermitted)" in err
    # Without the list, the same ledgers look nearly finished: the gate's point.
    code, out, _ = swarm("ledger", "failed", one, two)
    assert code == 0 and out.split() == [IDS[1], IDS[2]]


def test_ids_in_no_ledger_do_not_turn_one_regions_list_into_csv(tmp_path: Path) -> None:
    """A gate over one region's ledger printed CSV (with a blank region for the IDs no
    ledger held) where the README promises CSV only for several regions or accounts."""
    ledger = tmp_path / "l.jsonl"
    ledger.write_text(
        "".join(
            json.dumps({**json.loads(record(i, status)), "region": "us-east-1"}) + "\n"
            for i, status in ((IDS[0], "succeeded"), (IDS[1], "pending"))
        )
    )
    code, out, err = swarm(
        "ledger", "failed", "--ids", write_ids(tmp_path / "ids.txt", IDS[:3]), str(ledger)
    )
    assert code == 1, err
    assert out.split() == [IDS[1], IDS[2]]


def test_retryable_leaves_out_permanent_failures(tmp_path: Path) -> None:
    ids, one, two = shards(tmp_path)
    code, out, err = swarm("ledger", "failed", "--retryable", "--ids", ids, one, two)
    assert code == 1
    assert out.split() == [IDS[2], IDS[4], IDS[5]]
    assert "left out (--retryable)" in err
    # The gate still counts them: a protected instance still running is not done.
    assert "4 of 6 ID(s)" in err and "(1 failed permanently, not listed)" in err
    only = write_ids(tmp_path / "only.txt", [IDS[0], IDS[1]])
    code, out, err = swarm("ledger", "failed", "--retryable", "--ids", only, one, two)
    assert (code, out) == (1, ""), err
    # The list from standard input, as the help says "-" reads it.
    code, out, err = swarm("ledger", "failed", "--ids", "-", one, two, stdin=f"{IDS[2]}\n")
    assert (code, out.split()) == (1, [IDS[2]]), err


def test_a_list_all_done_passes_the_gate(tmp_path: Path) -> None:
    _, one, two = shards(tmp_path)
    done = write_ids(tmp_path / "done.txt", [IDS[0], IDS[3]])
    code, out, err = swarm("ledger", "failed", "--ids", done, one, two)
    assert (code, out) == (0, ""), err
    assert "0 of 2 ID(s)" in err


def test_an_id_ec2_did_not_find_is_left_unless_the_gate_says_missing_is_ok(
    tmp_path: Path,
) -> None:
    """A list sent to the wrong region ends all `missing`: the instances still run
    elsewhere, so the gate fails; --missing-ok (as the runs' own) lets them pass."""
    ledger = tmp_path / "l.jsonl"
    ledger.write_text(record(IDS[0], "succeeded") + "".join(record(i, "missing") for i in IDS[1:3]))
    ids = write_ids(tmp_path / "ids.txt", IDS[:3])
    code, out, err = swarm("ledger", "failed", "--ids", ids, str(ledger))
    assert code == 1 and out.split() == IDS[1:3], err
    assert "2 of 3 ID(s)" in err and "2 of them that EC2 said do not exist" in err
    code, out, err = swarm("ledger", "failed", "--ids", ids, "--missing-ok", str(ledger))
    assert (code, out) == (0, ""), err
    # Without the list, the list of what to retry stays failed and pending, as before.
    code, out, _ = swarm("ledger", "failed", str(ledger))
    assert (code, out) == (0, "")
    code, _, err = swarm("ledger", "failed", "--missing-ok", str(ledger))
    assert code == 2 and "--missing-ok is for a gate with --ids" in err


def test_a_csv_of_what_is_left_names_the_resources_own_id_column(tmp_path: Path) -> None:
    """Fed back as --ids, a volume list reads as one (an instance_id column over vol- IDs
    reads as a mistake to whoever opens it)."""
    vol = "vol-0123456789abcdef0"
    fields = {"v": 1, "ts": "2026-01-01T00:00:00Z", "run": "r", "seq": 1, "region": "eu-west-1"}
    ledger = tmp_path / "l.jsonl"
    ledger.write_text(
        json.dumps({**fields, "action": "delete-volume", "id": vol, "status": "pending"}) + "\n"
    )
    code, out, err = swarm("ledger", "failed", "--format", "csv", str(ledger))
    assert code == 0, err
    assert out.splitlines() == ["volume_id,region,account", f"{vol},eu-west-1,"]
    # A field of a tampered ledger that holds a comma keeps its column, quoted.
    tampered = {**fields, "region": "us-east-1,eu-west-1", "account": '=HYPERLINK("x")'}
    ledger.write_text(
        json.dumps({**tampered, "action": "delete-volume", "id": vol, "status": "pending"}) + "\n"
    )
    code, out, err = swarm("ledger", "failed", "--format", "csv", str(ledger))
    rows = list(csv.reader(out.splitlines()))
    assert rows[1] == [vol, "us-east-1,eu-west-1", '=HYPERLINK("x")'], out


def test_the_gate_leaves_out_what_the_runs_were_told_to_exclude(tmp_path: Path) -> None:
    """Runs given --exclude-ids never send those: the gate given the same file does not
    count them left (a shard whose IDs were all excluded writes no ledger)."""
    ids, one, two = shards(tmp_path)
    spare = write_ids(tmp_path / "spare.txt", [IDS[4], IDS[5]])
    code, out, err = swarm("ledger", "failed", "--ids", ids, "--exclude-ids", spare, one, two)
    assert code == 1 and out.split() == [IDS[1], IDS[2]], err
    assert "2 of 4 ID(s)" in err and "(2 excluded)" in err and "no ledger at all" not in err
    code, _, err = swarm("ledger", "failed", "--exclude-ids", spare, one)
    assert code == 2 and "--exclude-ids is for a gate with --ids" in err
    # Every ID of the list excluded: nothing left, the gate passes.
    everything = write_ids(tmp_path / "all.txt", IDS)
    code, out, err = swarm("ledger", "failed", "--ids", ids, "--exclude-ids", everything, one, two)
    assert (code, out) == (0, ""), err
    # An empty list passes nothing: the command that made it most likely failed.
    empty = write_ids(tmp_path / "empty.txt", [])
    code, out, err = swarm("ledger", "failed", "--ids", empty, one, two)
    assert code == 1 and "lists no ID: nothing to check the ledgers against" in err, err
    code, _, err = swarm("ledger", "failed", "--ids", "-", "--exclude-ids", "-", one, stdin="")
    assert code == 2 and "cannot both read standard input" in err


def test_with_the_list_a_ledger_cut_short_does_not_fail_the_gate_by_itself(
    tmp_path: Path,
) -> None:
    from swarm_cli.ledger import LedgerWriter

    ids = write_ids(tmp_path / "ids.txt", IDS)
    first, second = tmp_path / "first.jsonl", tmp_path / "second.jsonl"
    writer = LedgerWriter(str(first), "r1", "stop", None)
    writer.write_ahead(IDS)
    writer.close()
    # The first run was stopped while writing its intents: half of them are on disk.
    lines = first.read_bytes().splitlines(keepends=True)
    first.write_bytes(b"".join(lines[:3]))
    # Without the list, what is printed may not be the whole: exit 1.
    code, out, err = swarm("ledger", "failed", str(first))
    assert code == 1 and out.split() == IDS[:3]
    assert "stopped while recording its intents" in err
    # ... and how to check, once the list has run again, that nothing is left.
    assert "swarm ledger failed --ids LIST LEDGER exits 0 if nothing of it is left" in " ".join(
        err.split()
    )
    # With it, the IDs no ledger holds are listed: the gate says exactly what is left.
    code, out, err = swarm("ledger", "failed", "--ids", ids, str(first))
    assert code == 1 and out.split() == IDS
    # A later run from the whole list did them all.
    later = (record(i, "succeeded").replace("2026-01-01", "2099-01-01") for i in IDS)
    second.write_text("".join(later))
    code, out, err = swarm("ledger", "failed", "--ids", ids, str(first), str(second))
    assert (code, out) == (0, ""), err
    assert "0 of 6 ID(s)" in err


def test_a_bad_list_is_refused(tmp_path: Path) -> None:
    _, one, _ = shards(tmp_path)
    bad = tmp_path / "bad.txt"
    bad.write_text("i-00000001\nnot an id\n")
    code, out, err = swarm("ledger", "failed", "--ids", str(bad), one)
    assert code == 2 and out == "" and "invalid line" in err


def test_the_summary_tells_permanent_failures_from_what_a_retry_can_fix(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    ids = sandbox.launch(3)
    sandbox.client().create_tags(Resources=ids[:1], Tags=[{"Key": "keep", "Value": "1"}])
    ledger = tmp_path / "l.jsonl"
    code, summary, err = swarm(
        *("stop", "--ids", write_ids(tmp_path / "ids.txt", ids), "--yes"),
        *("--endpoint-url", sandbox.endpoint, "--ledger", str(ledger), "--progress", "none"),
        *("--protect-tag", "keep"),
    )
    assert code == 1, err
    assert "failed permanently: 1 (1 Protected); a retry fails again" in summary
    assert "retry the rest" not in summary  # nothing a retry can fix
    code, out, err = swarm("ledger", "failed", "--retryable", str(ledger))
    assert (code, out) == (0, "") and "1 failed permanently (1 Protected)" in err


def run_printed(command: str, cwd: Path) -> None:
    """A command swarm printed, run by bash where the run was, with this swarm first on
    the PATH."""
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    done = subprocess.run(["bash", "-c", command], cwd=cwd, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_the_retry_command_acts_where_the_run_did_with_its_rails(tmp_path: Path) -> None:
    """The printed retry repeats --region, --endpoint-url, the rails and the failure
    budget, not the ID source."""
    config = SandboxConfig(BucketSpec(100, 100), BucketSpec(1000, 1000), error_rate=1.0)
    with Sandbox(config) as box:
        ids = box.launch(4, region="eu-west-1")
        ledger = tmp_path / "l.jsonl"
        code, summary, err = swarm(
            *("terminate", "--ids", write_ids(tmp_path / "ids.txt", ids), "--yes"),
            *("--endpoint-url", box.endpoint, "--region", "eu-west-1", "--ledger", str(ledger)),
            *("--protect-tag", "keep=yes", "--max-attempts", "1", "--progress", "none"),
            *("--max-errors", "10", "--batch-size", "2", "--max-outage", "30"),
        )
        assert code == 1, err
        (line,) = [x for x in summary.splitlines() if "retry the rest:" in x]
        printed = line.split("retry the rest:", 1)[1].strip()
        command = shlex.split(printed.split(" && ", 1)[1])
        assert command[:2] == ["swarm", "terminate"]
        given = dict(zip(command[2::2], command[3::2], strict=False))
        assert given["--region"] == "eu-west-1" and given["--endpoint-url"] == box.endpoint
        assert given["--protect-tag"] == "keep=yes"
        # The run's failure budget holds for the retry, and its fixed batch size.
        assert given["--max-errors"] == "10" and given["--batch-size"] == "2"
        assert given["--max-outage"] == "30"
        assert "--max-attempts" not in command and "ids.txt" not in line
        # A resume of the ledger: what a call may have done before its answer was lost is
        # looked up, not sent again (it would be found missing).
        assert "--resume" in command
        # Run it as printed, by a shell, where the run was.
        box._front().config = replace(config, error_rate=0.0)
        run_printed(printed, tmp_path)
        assert (tmp_path / "l.jsonl.left").read_text().split() == ids
        assert box.states(ids, region="eu-west-1") == {i: "terminated" for i in ids}


def test_the_retry_keeps_a_batch_size_given_even_one_auto_would_start_from(
    tmp_path: Path,
) -> None:
    """--batch-size 10 on a terminate (auto's start there): the retry dropped it and ran
    auto, which grows past 10."""
    config = SandboxConfig(BucketSpec(100, 100), BucketSpec(1000, 1000), error_rate=1.0)
    with Sandbox(config) as box:
        ids = box.launch(3)
        code, summary, err = swarm(
            *("terminate", "--ids", write_ids(tmp_path / "ids.txt", ids), "--yes"),
            *("--endpoint-url", box.endpoint, "--ledger", str(tmp_path / "l.jsonl")),
            *("--max-attempts", "1", "--batch-size", "10", "--progress", "none"),
        )
    assert code == 1, err
    (line,) = [x for x in summary.splitlines() if "retry the rest:" in x]
    assert "--batch-size 10" in line


def test_the_retry_of_a_list_whose_column_names_the_region_goes_there(tmp_path: Path) -> None:
    """A CSV whose region column (eu-west-1) is not the default region: `ledger failed`
    prints bare IDs for one region, and the retry said --region us-east-1. Run as
    printed, every ID was sent there and recorded missing, and the gate then passed with
    them running."""
    config = SandboxConfig(BucketSpec(100, 100), BucketSpec(1000, 1000), error_rate=1.0)
    with Sandbox(config) as box:
        ids = box.launch(3, region="eu-west-1")
        listed = tmp_path / "ids.csv"
        listed.write_text("instance_id,region\n" + "".join(f"{i},eu-west-1\n" for i in ids))
        code, summary, err = swarm(
            *("terminate", "--ids", str(listed), "--yes", "--endpoint-url", box.endpoint),
            *("--ledger", str(tmp_path / "l.jsonl"), "--max-attempts", "1"),
            *("--progress", "none"),
        )
        assert code == 1, err
        (line,) = [x for x in summary.splitlines() if "retry the rest:" in x]
        printed = line.split("retry the rest:", 1)[1].strip()
        assert "--region eu-west-1" in printed and "us-east-1" not in printed
        # A resume that sends them elsewhere all the same is warned of.
        bare = write_ids(tmp_path / "bare.txt", ids)
        code, _, err = swarm(
            *("terminate", "--ids", bare, "--yes", "--endpoint-url", box.endpoint),
            *("--ledger", str(tmp_path / "l.jsonl"), "--resume", "--region", "us-east-1"),
            *("--progress", "none", "--dry-run"),
        )
        said = " ".join(err.split())
        assert "3 ID(s) the ledger holds as left to do in another region" in said, said
        assert "eu-west-1 in the ledger, us-east-1 now" in said
        box._front().config = replace(config, error_rate=0.0)
        run_printed(printed, tmp_path)
        assert box.states(ids, region="eu-west-1") == {i: "terminated" for i in ids}


def test_a_resume_to_where_the_ledger_found_them_missing_is_not_warned_of(
    tmp_path: Path,
) -> None:
    """IDs sent to the wrong region are recorded missing there: that is where they were
    not found, not where they are left to do, and the right list is no mistake."""
    with Sandbox(SandboxConfig(BucketSpec(100, 100), BucketSpec(1000, 1000))) as box:
        ids = box.launch(2, region="eu-west-1")
        ledger = str(tmp_path / "l.jsonl")
        common = ("--yes", "--endpoint-url", box.endpoint, "--ledger", ledger)
        bare = write_ids(tmp_path / "bare.txt", ids)
        code, _, _ = swarm("terminate", "--ids", bare, *common, "--region", "us-east-1")
        assert code == 1  # missing there
        listed = tmp_path / "ids.csv"
        listed.write_text("instance_id,region\n" + "".join(f"{i},eu-west-1\n" for i in ids))
        code, _, err = swarm("terminate", "--ids", str(listed), *common, "--resume")
        assert code == 0, err
        assert "left to do in another region" not in " ".join(err.split())
        assert box.states(ids, region="eu-west-1") == dict.fromkeys(ids, "terminated")


def test_intents_sent_again_to_the_wrong_region_stay_left_where_they_are(
    tmp_path: Path,
) -> None:
    """Pending in eu-west-1, then a resume of bare IDs sent them to us-east-1: recorded
    missing there, they fell out of `ledger failed`, and the gate passed with them
    running. They are listed where they are left, and a CSV retry finishes them."""
    config = SandboxConfig(BucketSpec(100, 100), BucketSpec(1000, 1000), error_rate=1.0)
    with Sandbox(config) as box:
        ids = box.launch(3, region="eu-west-1")
        ledger = str(tmp_path / "l.jsonl")
        common = ("--yes", "--endpoint-url", box.endpoint, "--ledger", ledger)
        listed = tmp_path / "ids.csv"
        listed.write_text("instance_id,region\n" + "".join(f"{i},eu-west-1\n" for i in ids))
        code, _, _ = swarm("terminate", "--ids", str(listed), *common, "--max-attempts", "1")
        assert code == 1
        box._front().config = replace(config, error_rate=0.0)
        bare = write_ids(tmp_path / "bare.txt", ids)
        code, _, _ = swarm("terminate", "--ids", bare, *common, "--resume", "--region", "us-east-1")
        assert code == 1  # not found there
        code, out, err = swarm("ledger", "failed", ledger)
        assert code == 0 and sorted(out.split()) == sorted(ids), err
        assert "sent again to another and not found there" in " ".join(err.split())
        assert "eu-west-1" in err  # where: the note of --format ids
        code, out, _ = swarm("ledger", "failed", "--format", "csv", ledger)
        left = tmp_path / "left.csv"
        left.write_text(out)
        assert all(f"{i},eu-west-1," in out for i in ids)
        code, _, err = swarm("terminate", "--ids", str(left), *common, "--resume")
        assert code == 0, err
        assert box.states(ids, region="eu-west-1") == dict.fromkeys(ids, "terminated")
    assert swarm("ledger", "failed", ledger)[1] == ""


def test_the_retry_of_a_run_over_two_regions_keeps_each_id_in_its_place(tmp_path: Path) -> None:
    """Two regions, what is left in one: `ledger failed` printed bare IDs, which the retry
    sent to the default region, where they were recorded missing and the gate passed."""
    config = SandboxConfig(
        BucketSpec(10_000, 10_000), BucketSpec(100_000, 100_000), transition_seconds=4.0
    )
    with Sandbox(config) as box:
        east = box.launch(2)
        west = box.launch(2, region="eu-west-1")
        box.client().stop_instances(InstanceIds=east)
        deadline = time.monotonic() + 30
        while set(box.states(east).values()) != {"stopped"} and time.monotonic() < deadline:
            time.sleep(0.2)
        listed = tmp_path / "ids.csv"
        rows = [f"{i},us-east-1" for i in east] + [f"{i},eu-west-1" for i in west]
        listed.write_text("instance_id,region\n" + "".join(f"{r}\n" for r in rows))
        code, summary, err = swarm(
            *("stop", "--ids", str(listed), "--yes", "--endpoint-url", box.endpoint),
            *("--ledger", str(tmp_path / "l.jsonl"), "--wait", "--wait-timeout", "1"),
            *("--progress", "none"),
        )
        assert code == 1, err
        (line,) = [x for x in summary.splitlines() if "not seen stopped:" in x]
        printed = line.split("not seen stopped:", 1)[1].strip()
        assert "--format csv" in printed
        while set(box.states(west, region="eu-west-1").values()) != {"stopped"}:
            assert time.monotonic() < deadline + 30
            time.sleep(0.2)
        run_printed(printed, tmp_path)
    code, out, _ = swarm("ledger", "failed", "--action", "stop", str(tmp_path / "l.jsonl"))
    assert code == 0 and out == ""
    latest = fold(read_records(str(tmp_path / "l.jsonl")))
    assert {r.id: r.region for r in latest.values() if r.id in west} == dict.fromkeys(
        west, "eu-west-1"
    )
    assert {r.status for r in latest.values()} == {"succeeded"}


def test_an_action_the_ledger_does_not_hold_does_not_pass_the_gate(tmp_path: Path) -> None:
    _, one, _ = shards(tmp_path)  # stop records, one failed and one pending
    for typo in ("sotp", "start"):
        code, out, err = swarm("ledger", "failed", "--action", typo, one)
        assert code == 2 and out == "", err
    assert "no such action" in swarm("ledger", "failed", "--action", "sotp", one)[2]
    # The API's name is the action's: the same list.
    code, out, err = swarm("ledger", "failed", "--action", "stop-instances", one)
    assert code == 0 and out.split() == [IDS[1], IDS[2]], err


def test_a_damaged_line_that_may_have_held_an_intent_fails_the_gate(tmp_path: Path) -> None:
    from swarm_cli.ledger import LedgerWriter

    ledger = tmp_path / "l.jsonl"
    writer = LedgerWriter(str(ledger), "r1", "stop", None)
    writer.write_ahead(IDS)
    for i in IDS:
        if i != IDS[2]:  # in flight when the run was killed
            writer.write(i, "succeeded")
    writer.close()
    lines = ledger.read_bytes().splitlines(keepends=True)
    assert IDS[2].encode() in lines[2] and b'"pending"' in lines[2]
    # A disk error garbles that intent: no readable line names IDS[2] any more.
    lines[2] = b'{"v":1,"ts":\x00\x00\x00\n'
    ledger.write_bytes(b"".join(lines))
    code, out, err = swarm("ledger", "failed", str(ledger))
    assert code == 1 and out == "", err
    assert "1 damaged ledger line(s) skipped" in err
    assert "1 intent(s) have no readable record" in err and "--ids LIST" in err
    # The list the runs were meant to cover says exactly what is left.
    ids = write_ids(tmp_path / "ids.txt", IDS)
    code, out, err = swarm("ledger", "failed", "--ids", ids, str(ledger))
    assert code == 1 and out.split() == [IDS[2]]


def test_a_damaged_intent_whose_outcome_is_recorded_fails_no_gate(tmp_path: Path) -> None:
    """The garbled line held an intent, but the ID's outcome is on a line of its own:
    every intent is accounted for, and a finished job's gate passes."""
    from swarm_cli.ledger import LedgerWriter

    ledger, merged = tmp_path / "l.jsonl", tmp_path / "m.jsonl"
    writer = LedgerWriter(str(ledger), "r1", "stop", None)
    writer.write_ahead(IDS)
    for i in IDS:
        writer.write(i, "succeeded")
    writer.close()
    lines = ledger.read_bytes().splitlines(keepends=True)
    assert IDS[2].encode() in lines[2] and b'"pending"' in lines[2]
    lines[2] = b"garbage!!\n"
    ledger.write_bytes(b"".join(lines))
    code, out, err = swarm("ledger", "failed", str(ledger))
    assert (code, out) == (0, ""), err
    assert "1 damaged ledger line(s) skipped" in err and "no readable record" not in err
    code, _, err = swarm("ledger", "merge", str(ledger), "-o", str(merged))
    assert code == 0 and "no readable record" not in err, err


def test_a_line_cut_by_a_kill_then_mended_by_the_next_run_does_not_fail_the_gate(
    tmp_path: Path,
) -> None:
    from swarm_cli.ledger import LedgerWriter

    ledger = tmp_path / "l.jsonl"
    writer = LedgerWriter(str(ledger), "r1", "stop", None)
    writer.write_ahead(IDS)
    for i in IDS[:3]:
        writer.write(i, "succeeded")
    writer.close()
    # Killed while writing the outcome of IDS[3]: half a line at the end.
    with ledger.open("ab") as handle:
        handle.write(b'{"v":1,"ts":"2026-01-01T00:00:00Z","run":"r1","id":"' + IDS[3].encode())
    # The next run ends that line and records the rest.
    writer = LedgerWriter(str(ledger), "r2", "stop", None)
    writer.write_ahead(IDS[3:])
    for i in IDS[3:]:
        writer.write(i, "succeeded")
    writer.close()
    code, out, err = swarm("ledger", "failed", str(ledger))
    assert (code, out) == (0, ""), err
    assert "1 damaged ledger line(s) skipped" in err and "no readable record" not in err


def test_a_whole_block_lost_to_damage_fails_the_gate(tmp_path: Path) -> None:
    """A pair with one ID is a block of one line: garbled with its outcome, nothing of it
    is left but the run's count of intents."""
    from swarm_cli.ledger import LedgerWriter

    ledger = tmp_path / "l.jsonl"
    writer = LedgerWriter(str(ledger), "r1", "stop", None)
    for n, region in enumerate(("us-east-1", "eu-west-1", "us-west-2")):
        writer.write_ahead([IDS[n]], region=region, run_intents=3)
    for n, region in enumerate(("us-east-1", "eu-west-1", "us-west-2")):
        status = "failed" if n == 1 else "succeeded"
        writer.write(
            IDS[n], status, code="OperationNotPermitted" if n == 1 else None, region=region
        )
    writer.close()
    lines = ledger.read_bytes().splitlines(keepends=True)
    assert IDS[1].encode() in lines[1] and IDS[1].encode() in lines[4]
    lines[1] = lines[4] = b"\x00" * 40 + b"\n"  # its intent and its failure, garbled
    ledger.write_bytes(b"".join(lines))
    code, out, err = swarm("ledger", "failed", str(ledger))
    assert code == 1 and out == "", err
    assert "1 intent(s) have no readable record" in err


def test_a_merge_over_damage_that_may_have_held_intents_exits_1(tmp_path: Path) -> None:
    from swarm_cli.ledger import LedgerWriter

    ledger, merged = tmp_path / "l.jsonl", tmp_path / "m.jsonl"
    writer = LedgerWriter(str(ledger), "r1", "stop", None)
    writer.write_ahead(IDS)
    for i in IDS[:-1]:
        writer.write(i, "succeeded")
    writer.close()
    lines = ledger.read_bytes().splitlines(keepends=True)
    lines[len(IDS) - 1] = b"{garbled\n"  # the intent of the last ID, never answered
    ledger.write_bytes(b"".join(lines))
    code, _, err = swarm("ledger", "merge", str(ledger), "-o", str(merged))
    assert code == 1 and "1 intent(s) have no readable record" in err
    assert merged.exists()  # written all the same, for what it holds


def test_the_retry_command_carries_a_tag_shown_escaped_as_it_was_given(tmp_path: Path) -> None:
    """A tag with a bidi override was printed in the retry escaped (\\u202e) inside
    shell quotes: run as printed, the resume was refused (another run's tags), and with a
    new ledger it would have set the escape's text on every resource left."""
    config = SandboxConfig(BucketSpec(100, 100), BucketSpec(1000, 1000), error_rate=1.0)
    tag = "who=\u202eevil"
    with Sandbox(config) as box:
        volumes = box.seed(volumes=2)["volumes"]
        code, summary, err = swarm(
            *("ec2", "create-tags", "--ids", write_ids(tmp_path / "ids.txt", volumes)),
            *("--tag", tag, "--yes", "--endpoint-url", box.endpoint, "--progress", "none"),
            *("--ledger", str(tmp_path / "l.jsonl"), "--max-attempts", "1"),
        )
        assert code == 1, err
        (line,) = [x for x in summary.splitlines() if "retry the rest:" in x]
        printed = line.split("retry the rest:", 1)[1].strip()
        assert "$'who=\\xe2\\x80\\xaeevil'" in printed and "\u202e" not in printed
        box._front().config = replace(config, error_rate=0.0)
        run_printed(printed, tmp_path)
        tags = box.client().describe_tags(Filters=[{"Name": "key", "Values": ["who"]}])["Tags"]
        assert sorted((t["ResourceId"], t["Value"]) for t in tags) == sorted(
            (v, "\u202eevil") for v in volumes
        )


def test_a_list_of_ids_in_no_ledger_prints_them_in_every_format(tmp_path: Path) -> None:
    """Every ID left in no ledger, with --format ids: the place check met no place at
    all and ended in a traceback."""
    ledger = tmp_path / "l.jsonl"
    ledger.write_text(
        json.dumps({**json.loads(record(IDS[0], "succeeded")), "region": "eu-west-1"}) + "\n"
    )
    ids = write_ids(tmp_path / "ids.txt", IDS[1:3])
    for form in ("ids", "auto", "csv"):
        code, out, err = swarm("ledger", "failed", "--ids", ids, "--format", form, str(ledger))
        assert code == 1 and "Traceback" not in err, err
        assert [line.split(",")[0] for line in out.split()][-2:] == IDS[1:3], form


def test_an_id_done_in_another_region_than_the_list_s_is_left(tmp_path: Path) -> None:
    """The list names eu-west-1; the ledger has them stopped in us-east-1. A resume of the
    list sends them there (a success counts for its own place), and the gate passed them
    as done: green over a list whose resume fails every time."""
    ledger = tmp_path / "l.jsonl"
    ledger.write_text(
        "".join(
            record(i, "succeeded").replace('"id"', '"region": "us-east-1", "id"') for i in IDS[:3]
        )
    )
    here = tmp_path / "here.csv"
    here.write_text("instance_id,region\n" + "".join(f"{i},us-east-1\n" for i in IDS[:3]))
    code, out, err = swarm("ledger", "failed", "--ids", str(here), str(ledger))
    assert code == 0 and out == "", err
    there = tmp_path / "there.csv"
    there.write_text("instance_id,region\n" + "".join(f"{i},eu-west-1\n" for i in IDS[:2]))
    code, out, err = swarm("ledger", "failed", "--ids", str(there), str(ledger))
    assert code == 1, err
    assert out.split() == IDS[:2]
    assert "2 of them done in another region or account than the list's" in err
    # A plain list names no region: the ledger's is the one meant.
    plain = write_ids(tmp_path / "plain.txt", IDS[:3])
    assert swarm("ledger", "failed", "--ids", plain, str(ledger))[0] == 0
