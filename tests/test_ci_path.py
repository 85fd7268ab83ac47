"""The CI user's path: installs that exist, the action, the workflow, the Kubernetes job."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import OPEN
from test_actions import accounts_file, mixed_list
from test_cli import swarm, write_ids
from test_faults import lines, wait_until

import swarm_cli
from swarm_cli.ledger import fold, read_records
from swarm_cli.sandbox import BucketSpec, Sandbox, SandboxConfig

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

ROOT = Path(__file__).resolve().parent.parent
# What a user copies: an install line in any of these must name a source, never a bare
# package name that nobody published.
USER_FILES = [ROOT / "README.md", *sorted((ROOT / "examples").iterdir())]
_INSTALL = re.compile(r"\b(?:pip|pipx|uv tool|uv pip)\s+install\b([^\n`]*)")


def _user_files() -> list[Path]:
    extra = [ROOT / "action.yml", *sorted((ROOT / "action").glob("*"))]
    return [p for p in [*USER_FILES, *extra] if p.is_file()]


def test_installs_never_name_the_unpublished_package_alone() -> None:
    checked = 0
    for path in _user_files():
        for line in _INSTALL.findall(path.read_text()):
            checked += 1
            if "swarm-cli" in line or "swarm_cli" in line:
                assert "git+" in line or ".whl" in line, f"{path.name}: install {line!r}"
    assert checked >= 4  # the README's installs were found


def test_the_version_lives_in_one_place() -> None:
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "version" not in meta["project"]
    assert "version" in meta["project"]["dynamic"]
    assert meta["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "swarm_cli.__version__"}
    assert re.fullmatch(r"\d+\.\d+\.\d+", swarm_cli.__version__)
    # The README's install examples name the current release.
    assert f"@v{swarm_cli.__version__}" in (ROOT / "README.md").read_text()


# --- the GitHub Action's step, run here as the runner would run it -------------------

ACTION_STEP = ROOT / "action" / "run.sh"
# Slow enough that a run of a few hundred instances lasts several seconds.
SLOW = SandboxConfig(BucketSpec(5, 40), BucketSpec(100_000, 100_000), latency=0.02)


def _step_env(tmp_path: Path, box: Sandbox, **inputs: str) -> dict[str, str]:
    """The environment of the action's step: its inputs, GitHub's files, the sandbox."""
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"
    env["AWS_ENDPOINT_URL"] = box.endpoint
    env["GITHUB_ACTIONS"] = "true"
    env["CI"] = "true"
    for name in ("GITHUB_STEP_SUMMARY", "GITHUB_OUTPUT"):
        path = tmp_path / name.lower()
        path.touch()
        env[name] = str(path)
    env.update({f"SWARM_{k.upper()}": v for k, v in inputs.items()})
    return env


def _start(script: Path, env: dict[str, str], cwd: Path) -> subprocess.Popen[str]:
    """A step's script, started as a runner starts it: no terminal, output captured."""
    return subprocess.Popen(
        ["bash", str(script)],
        env=env,
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _cmdline(pid: int) -> str:
    return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()


@pytest.mark.slow
def test_the_action_step_stops_in_order_under_the_runners_cancel_sequence(
    tmp_path: Path,
) -> None:
    ledger = tmp_path / "ledger.jsonl"
    with Sandbox(SLOW) as box:
        ids = box.launch(160)
        env = _step_env(
            tmp_path,
            box,
            command="terminate",
            ids=write_ids(tmp_path / "ids.txt", ids),
            ledger=str(ledger),
            report=str(tmp_path / "report.html"),
            args="--batch-size 1 --max-count 1000",
        )
        # As the runner starts a step: bash running the step's script, which execs.
        step = subprocess.Popen(
            ["bash", "-eo", "pipefail", "-c", f'exec bash "{ACTION_STEP}"'],
            env=env,
            cwd=tmp_path,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        wait_until(lambda: lines(ledger) >= 160 + 15, step)
        # The signal goes to the step's own process, and that process is swarm.
        assert "swarm" in _cmdline(step.pid) and "terminate" in _cmdline(step.pid)
        step.send_signal(signal.SIGINT)
        try:  # the runner's SIGTERM comes 7.5 s later; here, after 0.5 s
            step.wait(timeout=0.5)
        except subprocess.TimeoutExpired:
            step.send_signal(signal.SIGTERM)
        out, err = step.communicate(timeout=30)
        still_running = {i for i, s in box.states(ids).items() if s == "running"}
        state = fold(read_records(str(ledger)))
        # The job's page names the command that retries what is left, to copy as it is.
        page = (tmp_path / "github_step_summary").read_text()
        (command,) = re.findall(r"```sh\n(swarm ledger failed [^\n]*)\n```", page)
        retried = subprocess.run(
            ["bash", "-c", command], env=env, cwd=tmp_path, capture_output=True, text=True
        )
        assert retried.returncode == 0, retried.stderr
        assert set(box.states(ids).values()) <= {"shutting-down", "terminated"}
    assert step.returncode == 130, err
    assert "interrupted by SIGINT" in out  # the human summary, in the step's log
    assert set(state) == {("terminate", i) for i in ids}, "every intent is in the ledger"
    pending = [r for r in state.values() if r.status == "pending"]
    assert pending and all(r.message for r in pending), "every pending intent says why"
    assert still_running and still_running <= {r.id for r in pending}
    summary = (tmp_path / "github_step_summary").read_text()
    assert "Interrupted" in summary and "SIGINT" in summary
    outputs = (tmp_path / "github_output").read_text().splitlines()
    assert f"ledger={ledger}" in outputs


def test_the_action_step_plans_into_the_step_summary(tmp_path: Path) -> None:
    with Sandbox(OPEN) as box:
        ids = box.launch(5)
        env = _step_env(
            tmp_path,
            box,
            command="plan",
            action="stop",
            ids=write_ids(tmp_path / "ids.txt", ids),
            plan_out=str(tmp_path / "would.txt"),
        )
        done = subprocess.run(
            ["bash", str(ACTION_STEP)], env=env, cwd=tmp_path, capture_output=True, text=True
        )
    assert done.returncode == 0, done.stderr
    summary = (tmp_path / "github_step_summary").read_text()
    assert summary.startswith("### swarm plan stop") and "would act" in summary
    assert all(i in summary for i in ids)
    would = [w for w in (tmp_path / "would.txt").read_text().split() if w.startswith("i-")]
    assert sorted(would) == sorted(ids)
    assert not (tmp_path / "swarm-ledger.jsonl").exists()  # a plan writes no ledger


def _children(pid: int) -> list[int]:
    """The processes whose parent is ``pid``."""
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[1]) == pid:
            out.append(int(stat.parent.name))
    return out


def _gone(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_cancelled_plan_step_stops_its_swarm_and_leaves_no_file_behind(
    tmp_path: Path, sig: signal.Signals
) -> None:
    """The plan step runs swarm as a child (its table is read after): the runner's signal
    reaches swarm through the step, and the step ends when swarm has."""
    with Sandbox(SandboxConfig(BucketSpec(100, 100), BucketSpec(1000, 1000), latency=0.5)) as box:
        ids = box.launch(50)  # each one's protection asked, half a second a call
        env = _step_env(tmp_path, box, command="plan", ids=write_ids(tmp_path / "ids.txt", ids))
        env["TMPDIR"] = str(tmp_path / "tmp")
        (tmp_path / "tmp").mkdir()
        step = _start(ACTION_STEP, env, tmp_path)
        wait_until(lambda: box.calls_by("DescribeInstances") >= 1, step)
        (child,) = _children(step.pid)
        assert "plan" in _cmdline(child)
        step.send_signal(sig)
        _out, err = step.communicate(timeout=30)
    assert step.returncode == 128 + sig.value, err
    assert _gone(child), "swarm outlived the step"
    assert not (tmp_path / "swarm-plan-ids.txt").exists()  # it stopped before its plan
    assert "plan-ids=" not in (tmp_path / "github_output").read_text()  # so it names none
    assert list((tmp_path / "tmp").iterdir()) == []  # its table is removed
    assert f"interrupted by {sig.name}" in err


@pytest.mark.parametrize("summary", ["/nonexistent/dir/summary.md", "/dev/full"])
def test_a_plan_step_whose_summary_cannot_be_written_warns_and_passes(
    tmp_path: Path, summary: str
) -> None:
    with Sandbox(OPEN) as box:
        ids = box.launch(3)
        env = _step_env(tmp_path, box, command="plan", ids=write_ids(tmp_path / "ids.txt", ids))
        env["GITHUB_STEP_SUMMARY"] = summary
        done = subprocess.run(
            ["bash", str(ACTION_STEP)], env=env, cwd=tmp_path, capture_output=True, text=True
        )
    assert done.returncode == 0, done.stderr
    reason = "No such file or directory" if "nonexistent" in summary else "No space left"
    warning = (
        "::warning title=swarm plan::could not append the plan to the step summary "
        f"({summary}): {reason}"
    )
    assert warning in done.stdout
    assert all(i in done.stdout for i in ids)  # the plan itself, in the step's log


@pytest.mark.parametrize("command", ["terminate", "plan"])
def test_a_step_whose_outputs_cannot_be_written_warns_and_runs(
    tmp_path: Path, command: str
) -> None:
    """GITHUB_OUTPUT on a full disk: the run is not lost to a shell's write error (exit 1,
    which reads as instances that failed); a warning names the output not set."""
    with Sandbox(OPEN) as box:
        ids = box.launch(3)
        env = _step_env(tmp_path, box, command=command, ids=write_ids(tmp_path / "ids.txt", ids))
        env["GITHUB_OUTPUT"] = "/dev/full"
        done = subprocess.run(
            ["bash", str(ACTION_STEP)], env=env, cwd=tmp_path, capture_output=True, text=True
        )
        states = set(box.states(ids).values())
    assert done.returncode == 0, done.stderr
    names = "plan-ids" if command == "plan" else "ledger, report"
    warning = (
        f"::warning title=swarm::could not set the step's outputs {names} (GITHUB_OUTPUT "
        "/dev/full): No space left on device"
    )
    assert warning in done.stdout, done.stdout + done.stderr
    if command == "plan":
        assert states == {"running"}
    else:
        assert states <= {"shutting-down", "terminated"}


def test_a_plan_table_the_disk_takes_only_part_of_is_taken_back(tmp_path: Path) -> None:
    """A file-size limit (a runner's full disk) past the page's start: the plan's table
    would be cut inside its fence, and all that follows on the page read as code."""
    import resource

    with Sandbox(OPEN) as box:
        ids = box.launch(30)
        env = _step_env(tmp_path, box, command="plan", ids=write_ids(tmp_path / "ids.txt", ids))
        page = Path(env["GITHUB_STEP_SUMMARY"])
        page.write_text("### an earlier step\n\n" + "x" * 6000 + "\n")
        before = page.read_bytes()

        def small_files() -> None:  # the page may grow by 200 bytes, the table needs more
            limit = len(before) + 200
            resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

        done = subprocess.run(
            ["bash", str(ACTION_STEP)],
            env=env,
            cwd=tmp_path,
            capture_output=True,
            text=True,
            preexec_fn=small_files,
        )
    assert done.returncode == 0, done.stderr
    assert "::warning title=swarm plan::could not append the plan" in done.stdout
    assert page.read_bytes() == before


def test_an_empty_command_is_bad_usage(tmp_path: Path) -> None:
    env = dict(os.environ, SWARM_COMMAND="")
    done = subprocess.run(
        ["bash", str(ACTION_STEP)], env=env, cwd=tmp_path, capture_output=True, text=True
    )
    assert done.returncode == 2
    assert "command is empty" in done.stderr


def test_a_plan_with_instances_that_would_fail_passes_its_step_with_a_warning(
    tmp_path: Path,
) -> None:
    with Sandbox(OPEN) as box:
        ids = box.launch(3)
        gone = "i-0123456789abcdef0"  # no such instance: the real run would record it missing
        env = _step_env(
            tmp_path,
            box,
            command="plan",
            ids=write_ids(tmp_path / "ids.txt", [*ids, gone]),
            plan_out=str(tmp_path / "would.txt"),
        )
        done = subprocess.run(
            ["bash", str(ACTION_STEP)], env=env, cwd=tmp_path, capture_output=True, text=True
        )
        # A bad list still fails the step: that is no plan for anyone to approve.
        (tmp_path / "bad.txt").write_text("not an id\n")
        env["SWARM_IDS"] = str(tmp_path / "bad.txt")
        bad = subprocess.run(
            ["bash", str(ACTION_STEP)], env=env, cwd=tmp_path, capture_output=True, text=True
        )
    assert done.returncode == 0, done.stderr
    assert "::warning title=swarm plan::some instances would fail" in done.stdout
    summary = (tmp_path / "github_step_summary").read_text()
    assert gone in summary and all(i in summary for i in ids)
    assert bad.returncode == 2 and "::warning" not in bad.stdout
    # Its summary says there was no plan, rather than an empty table.
    assert "exited 2 before a plan: its error is in the step's log" in summary


def test_a_plan_that_ended_on_an_error_before_its_table_fails_its_step(tmp_path: Path) -> None:
    """Exit 1 is also a command that crashed: with no table, there is nothing to approve."""
    fake = tmp_path / "bin" / "swarm"
    fake.parent.mkdir()
    fake.write_text("#!/bin/sh\necho 'error: something broke' >&2\nexit 1\n")
    fake.chmod(0o755)
    with Sandbox(OPEN) as box:
        env = _step_env(tmp_path, box, command="plan", ids="ids.txt")
    env["PATH"] = f"{fake.parent}{os.pathsep}{env['PATH']}"
    done = subprocess.run(
        ["bash", str(ACTION_STEP)], env=env, cwd=tmp_path, capture_output=True, text=True
    )
    assert done.returncode == 1 and "::warning" not in done.stdout, done.stdout
    assert "exited 1 before a plan" in (tmp_path / "github_step_summary").read_text()


def test_the_action_refuses_quotes_in_its_args_rather_than_keep_them(tmp_path: Path) -> None:
    """args is split on whitespace, not as a shell would: --protect-tag "keep" would
    protect a tag named with its quotes, and no instance tagged keep."""
    with Sandbox(OPEN) as box:
        ids = box.launch(1)
        for args in ('--protect-tag "keep"', "--protect-tag 'keep'", r"--protect-tag k\ eep"):
            env = _step_env(
                tmp_path,
                box,
                command="terminate",
                ids=write_ids(tmp_path / "ids.txt", ids),
                args=args,
            )
            done = subprocess.run(
                ["bash", str(ACTION_STEP)], env=env, cwd=tmp_path, capture_output=True, text=True
            )
            assert done.returncode == 2 and "holds a quote or a backslash" in done.stderr
        env = _step_env(tmp_path, box, command="terminate", ids="x", ledger="l.jsonl\nmatrix=[]")
        done = subprocess.run(
            ["bash", str(ACTION_STEP)], env=env, cwd=tmp_path, capture_output=True, text=True
        )
        assert done.returncode == 2 and "holds a line end" in done.stderr
        assert box.states(ids) == {ids[0]: "running"}
    assert "matrix" not in (tmp_path / "github_output").read_text()


# --- the workflow worth copying ----------------------------------------------------------


def test_the_example_workflow_keeps_its_guards() -> None:
    flow = yaml.safe_load((ROOT / "examples" / "github-actions.yml").read_text())
    jobs = flow["jobs"]
    assert flow["concurrency"]["group"] and flow["concurrency"]["cancel-in-progress"] is False
    assert "id-token" not in flow["permissions"]
    for name, job in jobs.items():
        assert job.get("timeout-minutes"), f"{name}: no timeout-minutes"
        assumes = any("configure-aws-credentials" in s.get("uses", "") for s in job["steps"])
        token = job.get("permissions", {}).get("id-token")
        assert (token == "write") == assumes, f"{name}: id-token only where a role is assumed"
        for step in job["steps"]:
            assert "swarm-cli" not in step.get("run", "") or "git+" in step["run"]
    shard = jobs["shard"]
    assert shard["needs"] == "plan" and shard["environment"]  # approved by a person first
    (act,) = [s for s in shard["steps"] if s.get("uses") == "./"]
    for rail in ("--max-count", "--protect-tag", "--expect-account"):
        assert rail in act["with"]["args"]
    assert act["with"]["shard"] == "${{ matrix.shard }}"
    uploads = [s for s in shard["steps"] if "upload-artifact" in s.get("uses", "")]
    assert uploads and all(s["if"] == "always()" for s in uploads)
    (ledger_upload,) = [s for s in uploads if "ledger" in s["with"]["name"]]
    assert ledger_upload["with"]["if-no-files-found"] == "error"
    plan_steps = [s for s in jobs["plan"]["steps"] if s.get("uses") == "./"]
    assert plan_steps and plan_steps[0]["with"]["command"] == "plan"
    merge = jobs["merge"]
    assert "always()" in merge["if"]
    script = "\n".join(s.get("run", "") for s in merge["steps"])
    assert "needs.plan.outputs.shards" in str(merge) and '-ne "$SHARDS"' in script
    assert "swarm ledger failed --ids" in script
    # Its exit code fails the step, after the count is said (bash -e stops at a failing
    # command that is not tested).
    assert "swarm ledger failed --ids ids.csv ledgers/*.jsonl >left.csv || status=$?" in script
    assert 'exit "$status"' in script


# --- Kubernetes past 256 -------------------------------------------------------------------

K8S_STEP = ROOT / "examples" / "k8s-shard.sh"


def test_the_k8s_job_and_its_script_agree_on_n() -> None:
    (job,) = list(yaml.safe_load_all((ROOT / "examples" / "k8s-indexed-job.yaml").read_text()))
    spec = job["spec"]
    assert spec["completionMode"] == "Indexed" and spec["parallelism"] >= 1
    (container,) = spec["template"]["spec"]["containers"]
    env = {e["name"]: e["value"] for e in container["env"]}
    assert int(env["SWARM_SHARDS"]) == spec["completions"] > 256
    assert container["command"][-1].endswith("/k8s-shard.sh")
    # Not swarm as the container's process 1, which the kernel sends no signal it has no
    # handler for yet: an init that passes SIGTERM on.
    assert container["command"][:2] == ["tini", "--"]
    assert container["image"] == container["image"].lower()  # no capitals in an image name
    # A verdict is not retried; a ledger another pod still holds (74) is.
    (fail,) = [r for r in spec["podFailurePolicy"]["rules"] if r["action"] == "FailIndex"]
    assert set(fail["onExitCodes"]["values"]) == {2, 3, 4}


@pytest.mark.slow
def test_the_k8s_shard_script_covers_every_pair_once(tmp_path: Path) -> None:
    n = 4
    accounts = accounts_file(tmp_path)
    with Sandbox(OPEN) as box:
        ids_file, launched = mixed_list(box, tmp_path, per_pair=3)
        code, out, err = swarm(
            "shards", "--accounts", str(accounts), "--ids", str(ids_file), "--n", str(n)
        )
        assert code == 0, err
        matrix = {job["shard"]: job["pairs"] for job in json.loads(out)["include"]}
        pods = []
        for index in range(n):  # all at once, as the Job's parallelism runs them
            env = _step_env(tmp_path, box)
            env.update(
                JOB_COMPLETION_INDEX=str(index),
                SWARM_SHARDS=str(n),
                SWARM_IDS=str(ids_file),
                SWARM_ACCOUNTS=str(accounts),
                SWARM_LEDGERS=str(tmp_path / "ledgers"),
                SWARM_ARGS="--max-count 18",
            )
            pods.append(_start(K8S_STEP, env, tmp_path))
        for index, pod in enumerate(pods):
            _, err = pod.communicate(timeout=120)
            assert pod.returncode == 0, err
            ledger = tmp_path / "ledgers" / f"ledger-{index}.jsonl"
            pairs = {f"{r.account}/{r.region}" for r in read_records(str(ledger))}
            # Pod i ran shard i+1 of n: exactly the pairs swarm shards lists for it.
            assert sorted(pairs) == matrix.get(f"{index + 1}/{n}", [])
        for (account, region), ids in launched.items():
            assert set(box.states(ids, region=region, account=account).values()) == {"terminated"}
    # Outside an Indexed Job (no JOB_COMPLETION_INDEX) the script refuses to guess.
    alone = subprocess.run(["bash", str(K8S_STEP)], capture_output=True, text=True)
    assert alone.returncode != 0 and "JOB_COMPLETION_INDEX" in alone.stderr


def test_the_k8s_shard_script_refuses_quotes_it_would_keep_in_a_value(tmp_path: Path) -> None:
    # Split on whitespace, --protect-tag "keep" would protect a tag named with its quotes
    # and act on the instances tagged keep: refused before swarm runs.
    for args in ('--protect-tag "keep"', "--protect-tag 'keep'", r"--protect-tag k\eep"):
        env = {
            **os.environ,
            "JOB_COMPLETION_INDEX": "0",
            "SWARM_SHARDS": "1",
            "SWARM_LEDGERS": str(tmp_path / "ledgers"),
            "SWARM_ARGS": args,
            "PATH": f"{tmp_path}{os.pathsep}{os.environ['PATH']}",
        }
        (tmp_path / "swarm").write_text("#!/bin/sh\necho ran >&2\n")  # must not be reached
        (tmp_path / "swarm").chmod(0o755)
        done = subprocess.run(["bash", str(K8S_STEP)], env=env, capture_output=True, text=True)
        assert done.returncode == 2, done.stderr
        assert "quote or a backslash" in done.stderr and "ran" not in done.stderr


# --- readable at scale: swarm list ---------------------------------------------------------


def test_list_leaves_terminated_out_so_the_readmes_pipe_works(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    ids = sandbox.launch(6)
    admin = sandbox.client()
    admin.create_tags(Resources=ids, Tags=[{"Key": "env", "Value": "ci"}])
    admin.terminate_instances(InstanceIds=ids[:2])
    base = ("--filter", "tag:env=ci", "--endpoint-url", sandbox.endpoint)
    code, out, err = swarm("list", *base)
    assert code == 0, err
    assert sorted(out.split()) == sorted(ids[2:])
    code, out, _ = swarm("list", *base, "--state", "terminated")
    assert sorted(out.split()) == sorted(ids[:2])
    code, out, _ = swarm("list", *base, "--state", "all")
    assert sorted(out.split()) == sorted(ids)
    code, _, err = swarm("list", *base, "--state", "runing")
    assert code == 2 and "runing" in err
    # The README's pipe, as written there.
    env = _step_env(tmp_path, sandbox)
    done = subprocess.run(
        ["bash", "-c", "swarm list --filter tag:env=ci | swarm stop --ids - --yes"],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    assert set(sandbox.states(ids[2:]).values()) == {"stopped"}


# --- the README's first screen -----------------------------------------------------------


def test_the_readmes_test_command_is_what_ci_runs_and_installs_quietly() -> None:
    readme = (ROOT / "README.md").read_text()
    first_screen = readme.split("\n## ", 1)[0]
    commands = [line for line in first_screen.splitlines() if line.startswith(("python3", "{"))]
    demo, tests = commands
    assert demo.endswith(".venv/bin/swarm demo")
    assert tests in (ROOT / ".ci" / "run").read_text().splitlines()  # verbatim
    install = tests.split("apt-get install", 1)[1].split(";", 1)[0]
    assert "--no-install-recommends" in install and "-qq" in install
    assert ">/tmp/swarm-apt.log 2>&1" in install  # apt's output to a log, not the screen
    assert tests.endswith(".venv/bin/python -m pytest")


def test_the_workflow_passes_only_inputs_the_action_has() -> None:
    action = yaml.safe_load((ROOT / "action.yml").read_text())
    inputs = action["inputs"]
    assert action["runs"]["using"] == "composite"
    steps = action["runs"]["steps"]
    # Installed from the action's own checkout: pinned by the ref the user `uses:`.
    assert '"$GITHUB_ACTION_PATH"' in steps[0]["run"] and "pip" in steps[0]["run"]
    assert steps[-1]["run"].startswith("exec bash ")  # the step's process becomes swarm
    env = steps[-1]["env"]
    used = {v.removeprefix("${{ inputs.").removesuffix(" }}") for v in env.values()}
    assert used | {"python"} == set(inputs), "every input reaches the step"
    # The outputs are what the step wrote to GITHUB_OUTPUT, read through its id.
    script = (ROOT / "action" / "run.sh").read_text()
    for name, output in action["outputs"].items():
        assert output["value"] == f"${{{{ steps.{steps[-1]['id']}.outputs.{name} }}}}"
        assert f'"{name}=$' in script and "set_outputs" in script, name
    flow = yaml.safe_load((ROOT / "examples" / "github-actions.yml").read_text())
    calls = [s for job in flow["jobs"].values() for s in job["steps"] if s.get("uses") == "./"]
    assert len(calls) == 2
    for call in calls:
        assert set(call["with"]) <= set(inputs), call["with"]
        assert {k for k, v in inputs.items() if v.get("required")} <= set(call["with"])


def test_the_action_puts_only_swarm_on_the_jobs_path(tmp_path: Path) -> None:
    """The install step, run as the runner runs it: later steps of the job find swarm,
    and not the venv's python or pip in place of the job's own."""
    action = yaml.safe_load((ROOT / "action.yml").read_text())
    install = action["runs"]["steps"][0]
    source = tmp_path / "action"  # pip builds in the tree it installs: not in this one
    shutil.copytree(
        ROOT,
        source,
        ignore=shutil.ignore_patterns(".*", "build", "*.egg-info", "tests", "benchmarks"),
    )
    github_path = tmp_path / "github_path"
    env = {
        **os.environ,
        "RUNNER_TEMP": str(tmp_path / "runner"),
        "GITHUB_PATH": str(github_path),
        "GITHUB_ACTION_PATH": str(source),
        "SWARM_PYTHON": sys.executable,
    }
    (tmp_path / "runner").mkdir()
    done = subprocess.run(
        ["bash", "-e", "-c", install["run"]], env=env, capture_output=True, text=True, timeout=240
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("swarm ")  # its --version
    (added,) = github_path.read_text().splitlines()
    assert sorted(p.name for p in Path(added).iterdir()) == ["swarm"]
    version = subprocess.run(
        ["swarm", "--version"],
        env={**env, "PATH": f"{added}{os.pathsep}{env['PATH']}"},
        capture_output=True,
        text=True,
    )
    assert version.returncode == 0 and version.stdout == done.stdout
