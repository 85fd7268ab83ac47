from __future__ import annotations

import threading

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

from swarm_cli.ec2 import Terminate
from swarm_cli.outcome import Kind
from swarm_cli.sandbox import (
    CREDENTIALS,
    BucketSpec,
    Ec2Front,
    Sandbox,
    SandboxConfig,
    fake_ids,
)

NO_RETRIES = Config(retries={"mode": "standard", "total_max_attempts": 1}, max_pool_connections=32)


def raw_client(box: Sandbox):  # type: ignore[no-untyped-def]
    return boto3.client(
        "ec2", region_name="us-east-1", endpoint_url=box.endpoint, config=NO_RETRIES, **CREDENTIALS
    )


def test_empty_request_bucket_answers_like_ec2() -> None:
    config = SandboxConfig(BucketSpec(2, 0.01), BucketSpec(1000, 1000))
    with Sandbox(config) as box:
        ids = box.launch(3)
        client = raw_client(box)
        client.terminate_instances(InstanceIds=[ids[0]])
        client.terminate_instances(InstanceIds=[ids[1]])
        with pytest.raises(ClientError) as caught:
            client.terminate_instances(InstanceIds=[ids[2]])
        response = caught.value.response
        assert response["Error"]["Code"] == "RequestLimitExceeded"
        assert response["ResponseMetadata"]["HTTPStatusCode"] == 503
        assert response["ResponseMetadata"]["RequestId"]
        assert box.counters.throttled == 1 and box.counters.accepted == 2
        assert box.states(ids)[ids[2]] == "running"


def test_resource_bucket_throttles_a_large_batch() -> None:
    config = SandboxConfig(BucketSpec(100, 100), BucketSpec(50, 0.01))
    with Sandbox(config) as box:
        ids = box.launch(90)
        client = raw_client(box)
        with pytest.raises(ClientError) as caught:
            client.terminate_instances(InstanceIds=ids[:60])
        assert caught.value.response["Error"]["Code"] == "RequestLimitExceeded"
        assert box.counters.throttled_by_resources == 1
        client.terminate_instances(InstanceIds=ids[:40])
        with pytest.raises(ClientError):
            client.terminate_instances(InstanceIds=ids[40:51])
        states = box.states(ids)
        assert sum(s != "running" for s in states.values()) == 40


def test_server_errors_appear_at_their_set_rate() -> None:
    config = SandboxConfig(
        BucketSpec(10_000, 10_000), BucketSpec(10_000, 10_000), error_rate=0.25, seed=7
    )
    with Sandbox(config) as box:
        ids = box.launch(1)
        client = raw_client(box)
        errors = 0
        for _ in range(400):
            try:
                client.terminate_instances(InstanceIds=ids)
            except ClientError as err:
                assert err.response["Error"]["Code"] == "InternalError"
                assert err.response["ResponseMetadata"]["HTTPStatusCode"] == 500
                errors += 1
        assert errors == box.counters.faults
        assert 70 <= errors <= 130  # 100 expected; the seed makes it repeatable


def test_token_bucket_refills_at_its_rate() -> None:
    now = [0.0]
    front = Ec2Front(
        lambda e, s: [], SandboxConfig(BucketSpec(3, 2), BucketSpec(100, 10)), clock=lambda: now[0]
    )
    assert [front.admit("TerminateInstances", 1) for _ in range(4)] == [None] * 3 + ["requests"]
    now[0] = 0.5  # one token back
    assert front.admit("TerminateInstances", 1) is None
    assert front.admit("TerminateInstances", 1) == "requests"
    assert front.admit("StopInstances", 1) is None, "each action has its own buckets"
    now[0] = 10.0
    assert front.admit("TerminateInstances", 101) == "resources"
    assert front.admit("TerminateInstances", 97) is None


def test_terminate_splits_a_batch_on_protected_and_missing_ids(sandbox: Sandbox) -> None:
    ids = sandbox.launch(6, protected=1)
    ghost = fake_ids(1)[0]
    action = Terminate(raw_client(sandbox))
    outcomes = action([*ids[1:4], ghost])
    assert outcomes[ghost].kind is Kind.MISSING
    assert outcomes[ghost].code == "InvalidInstanceID.NotFound"
    assert all(outcomes[i].kind is Kind.REQUEUE for i in ids[1:4])
    outcomes = action([ids[0], ids[4]])
    assert outcomes[ids[0]].kind is Kind.PERMANENT
    assert outcomes[ids[0]].code == "OperationNotPermitted"
    assert outcomes[ids[4]].kind is Kind.REQUEUE
    assert all(o.kind is Kind.SUCCEEDED for o in action(ids[1:4]).values())


def test_dry_run_terminates_nothing(sandbox: Sandbox) -> None:
    ids = sandbox.launch(3)
    outcomes = Terminate(raw_client(sandbox), dry_run=True)(ids)
    assert {o.code for o in outcomes.values()} == {"DryRunOperation"}
    assert {o.http_status for o in outcomes.values()} == {412}
    assert set(sandbox.states(ids).values()) == {"running"}


def test_load_ids_makes_exactly_those_instances(sandbox: Sandbox) -> None:
    wanted = ["i-0123456789abcdef0", "i-00000001", "i-fedcba9876543210f"]
    sandbox.load_ids(wanted)
    assert sandbox.states() == dict.fromkeys(wanted, "running")


def test_counters_see_concurrent_calls() -> None:
    config = SandboxConfig(BucketSpec(1000, 1000), BucketSpec(1000, 1000), latency=0.05)
    with Sandbox(config) as box:
        ids = box.launch(8)
        client = raw_client(box)
        threads = [
            threading.Thread(target=client.terminate_instances, kwargs={"InstanceIds": [i]})
            for i in ids
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert box.counters.accepted == 8
        assert box.counters.peak_in_flight > 1
        assert box.counters.in_flight == 0
