from __future__ import annotations

import http.client
import threading
import time
from collections.abc import Callable
from typing import Any

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError, EndpointConnectionError, ReadTimeoutError

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

# As conftest's OPEN, for tests that start and stop a sandbox themselves.
OPEN = SandboxConfig(BucketSpec(10_000, 10_000), BucketSpec(100_000, 100_000))
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
    # The rest is bisected: it travels next in halves, so a second bad ID costs half.
    assert {(outcomes[i].kind, outcomes[i].batch_limit) for i in ids[1:4]} == {(Kind.REQUEUE, 2)}
    outcomes = action([ids[0], ids[4]])
    assert outcomes[ids[0]].kind is Kind.PERMANENT
    assert outcomes[ids[0]].code == "OperationNotPermitted"
    assert (outcomes[ids[4]].kind, outcomes[ids[4]].batch_limit) == (Kind.REQUEUE, 1)
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


def timed_client(box: Sandbox, read_timeout: float, connect_timeout: float = 1.0) -> Any:
    config = Config(
        retries={"mode": "standard", "total_max_attempts": 1},
        read_timeout=read_timeout,
        connect_timeout=connect_timeout,
    )
    return boto3.client(
        "ec2", region_name="us-east-1", endpoint_url=box.endpoint, config=config, **CREDENTIALS
    )


def raw_terminate(box: Sandbox, instance_id: str) -> tuple[int, bytes, str | None]:
    """One unsigned TerminateInstances POST: status, body and Content-Length as sent."""
    connection = http.client.HTTPConnection(box.host, box.port, timeout=5)
    try:
        connection.request(
            "POST",
            "/",
            body=f"Action=TerminateInstances&Version=2016-11-15&InstanceId.1={instance_id}",
            headers={"Content-Type": "application/x-www-form-urlencoded"},
        )
        response = connection.getresponse()
        return response.status, response.read(), response.getheader("Content-Length")
    finally:
        connection.close()


def wait_for(condition: Callable[[], bool], timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.01)


def test_hang_mode_holds_mutating_calls_until_released(sandbox: Sandbox) -> None:
    ids = sandbox.launch(2)
    client = timed_client(sandbox, read_timeout=0.3)
    sandbox.hang()
    with pytest.raises(ReadTimeoutError):
        client.terminate_instances(InstanceIds=[ids[0]])
    assert sandbox.counters.hung == 1
    # Held before admission: nothing happened, and reads still answer.
    assert sandbox.states(ids) == dict.fromkeys(ids, "running")
    sandbox.hang(False)
    client.terminate_instances(InstanceIds=[ids[1]])
    assert sandbox.counters.hung == 1


def test_hang_after_effect_withholds_only_the_answer(sandbox: Sandbox) -> None:
    ids = sandbox.launch(1)
    client = timed_client(sandbox, read_timeout=0.3)
    sandbox.hang(after_effect=True)
    with pytest.raises(ReadTimeoutError):
        client.terminate_instances(InstanceIds=ids)
    assert sandbox.accepted_ids() == set(ids)
    assert sandbox.states(ids)[ids[0]] != "running"
    sandbox.hang(False)


def test_stop_returns_promptly_while_a_call_is_hung() -> None:
    box = Sandbox(OPEN).start()
    errors: list[Exception] = []
    try:
        ids = box.launch(1)
        client = timed_client(box, read_timeout=30)
        box.hang()

        def call() -> None:
            try:
                client.terminate_instances(InstanceIds=ids)
            except Exception as err:
                errors.append(err)

        caller = threading.Thread(target=call, daemon=True)
        caller.start()
        wait_for(lambda: box.counters.hung == 1)
    finally:
        stopper = threading.Thread(target=box.stop, daemon=True)
        stopper.start()
        stopper.join(timeout=5)
    assert not stopper.is_alive()
    caller.join(timeout=5)
    assert not caller.is_alive()
    assert len(errors) == 1, "a call cut loose by stop() must not look answered"


def test_empty_bucket_can_answer_with_an_empty_body() -> None:
    config = SandboxConfig(BucketSpec(1, 0.1), BucketSpec(1000, 1000), empty_throttle_status=429)
    with Sandbox(config) as box:
        ids = box.launch(2)
        raw_client(box).terminate_instances(InstanceIds=[ids[0]])
        assert raw_terminate(box, ids[1]) == (429, b"", "0")
        box.empty_throttles(503)
        assert raw_terminate(box, ids[1]) == (503, b"", "0")
        box.empty_throttles(None)
        with pytest.raises(ClientError) as caught:
            raw_client(box).terminate_instances(InstanceIds=[ids[1]])
        assert caught.value.response["Error"]["Code"] == "RequestLimitExceeded"
        assert box.counters.throttled == 3
        assert box.states(ids)[ids[1]] == "running"


def test_outage_refuses_connections_and_keeps_state(sandbox: Sandbox) -> None:
    ids = sandbox.launch(2)
    client = timed_client(sandbox, read_timeout=2)
    client.terminate_instances(InstanceIds=[ids[0]])  # leaves a keep-alive connection open
    front, endpoint = sandbox.front, sandbox.endpoint
    sandbox.down()
    with pytest.raises(EndpointConnectionError):
        client.terminate_instances(InstanceIds=[ids[1]])
    sandbox.up()
    assert sandbox.endpoint == endpoint and sandbox.front is front
    states = sandbox.states(ids)
    assert states[ids[0]] != "running" and states[ids[1]] == "running"
    client.terminate_instances(InstanceIds=[ids[1]])
    assert sandbox.counters.accepted == 2


def test_background_outage_comes_back_on_the_same_port(sandbox: Sandbox) -> None:
    ids = sandbox.launch(1)
    endpoint = sandbox.endpoint
    outage = sandbox.outage_in_background(0.2)
    wait_for(lambda: not sandbox.is_up or not outage.is_alive())
    outage.join(timeout=5)
    assert not outage.is_alive() and sandbox.is_up
    assert sandbox.endpoint == endpoint
    assert sandbox.states(ids) == {ids[0]: "running"}


def test_stop_ends_an_outage_at_once() -> None:
    box = Sandbox(OPEN).start()
    outage = box.outage_in_background(60)
    wait_for(lambda: not box.is_up)
    box.stop()
    outage.join(timeout=5)
    assert not outage.is_alive() and not box.is_up
    with pytest.raises(RuntimeError):
        box.up()


def test_repeated_terminations_are_counted(sandbox: Sandbox) -> None:
    ids = sandbox.launch(2)
    client = raw_client(sandbox)
    client.terminate_instances(InstanceIds=[ids[0]])
    client.terminate_instances(InstanceIds=ids)
    assert sandbox.counters.repeats == 1
    with pytest.raises(ClientError):
        client.terminate_instances(InstanceIds=[ids[0], *fake_ids(1)])
    assert sandbox.counters.repeats == 1, "a refused call accepted nothing"
    assert sandbox.accepted_ids() == set(ids)


def test_hang_mode_can_hold_every_call(sandbox: Sandbox) -> None:
    client = timed_client(sandbox, read_timeout=0.3)
    sandbox.hang(every_call=True)
    with pytest.raises(ReadTimeoutError):
        client.describe_instances()
    sandbox.hang(False)
    assert client.describe_instances()["Reservations"] == []
