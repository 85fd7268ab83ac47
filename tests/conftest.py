from __future__ import annotations

from collections.abc import Iterator

import pytest

from swarm_cli.sandbox import BucketSpec, Sandbox, SandboxConfig

# Fast enough that functional tests are not rate-bound; throttle tests set their own.
OPEN = SandboxConfig(BucketSpec(10_000, 10_000), BucketSpec(100_000, 100_000))


@pytest.fixture(autouse=True)
def aws_env(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> None:
    """No test may reach real AWS or read the developer's own AWS set-up."""
    empty = tmp_path_factory.mktemp("aws")
    for name in (
        "AWS_PROFILE",
        "AWS_DEFAULT_PROFILE",
        "AWS_ENDPOINT_URL",
        "AWS_SESSION_TOKEN",
        "AWS_ENDPOINT_URL_EC2",
        "AWS_RETRY_MODE",
        "AWS_MAX_ATTEMPTS",
    ):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_REGION", "us-east-1")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(empty / "config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(empty / "credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")


@pytest.fixture
def sandbox() -> Iterator[Sandbox]:
    with Sandbox(OPEN) as box:
        yield box
