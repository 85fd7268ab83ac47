"""--sandbox means local: nothing, STS included, leaves the machine."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from swarm_cli.cli import app
from swarm_cli.errors import EXIT_USAGE
from swarm_cli.sandbox import ACCOUNT, fake_ids

# A closed port: any call that tried to leave through the environment's endpoints fails.
NOWHERE = "http://127.0.0.1:1"


@pytest.fixture
def nowhere(monkeypatch: pytest.MonkeyPatch) -> None:
    for service in ("", "_STS", "_EC2", "_IAM"):
        monkeypatch.setenv(f"AWS_ENDPOINT_URL{service}", NOWHERE)


def rehearse(ids: Path, *extra: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(
        app,
        [
            "terminate",
            "--ids",
            str(ids),
            "--sandbox",
            "--yes",
            "-o",
            "json",
            "--progress",
            "none",
            *list(extra),
        ],
    )
    return result.exit_code, result.stdout, result.stderr


@pytest.mark.parametrize("account", [ACCOUNT, "210987654321"])
def test_a_rehearsal_checks_expect_account_with_the_sandbox_sts(
    nowhere: None, tmp_path: Path, account: str
) -> None:
    ids = tmp_path / "ids.txt"
    listed = fake_ids(5)
    ids.write_text("\n".join(listed) + "\n")
    code, out, err = rehearse(ids, "--expect-account", account)
    assert code == 0, err
    assert f"account {account}: as expected (the sandbox's STS)" in err
    report = json.loads(out)
    assert report["counts"]["succeeded"] == 5
    assert report["sandbox"]["terminated"] == 5


def test_a_rehearsal_still_refuses_a_malformed_account(nowhere: None, tmp_path: Path) -> None:
    ids = tmp_path / "ids.txt"
    ids.write_text("\n".join(fake_ids(2)) + "\n")
    code, _, err = rehearse(ids, "--expect-account", "12345")
    assert code == EXIT_USAGE
    assert "12 digits" in err


def test_the_banner_gives_every_actions_buckets_not_terminates_alone() -> None:
    """--rate 4 --burst 4 set TerminateInstances' buckets; a start here refills 1.6 calls
    a second, which the banner did not say (it gave terminate's alone)."""
    from swarm_cli.cli.sandbox import other_limits
    from swarm_cli.sandbox import BucketSpec, SandboxConfig

    text = other_limits(SandboxConfig(BucketSpec(4, 4), BucketSpec(40, 40)))
    assert "StartInstances: 1 call burst, 1.6/s, 40 instances burst, 4/s" in text
    assert "StopInstances: 2 calls burst, 4/s, 40 instances burst, 40/s" in text
    assert "TerminateInstances" not in text
    (tags,) = [part for part in text.split("; ") if "CreateTags" in part]
    assert "RebootInstances" in tags and "instances burst" not in tags
