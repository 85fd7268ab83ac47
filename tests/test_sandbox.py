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
    ACCOUNT,
    CREDENTIALS,
    PRESETS,
    BucketSpec,
    Ec2Front,
    Sandbox,
    SandboxConfig,
    environment,
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


def test_describe_instances_names_every_unknown_id_as_ec2_does(
    sandbox: Sandbox, tmp_path: Any
) -> None:
    """moto names one unknown ID per DescribeInstances, EC2 all of them: a plan of a list
    with 300 gone cost a call per gone ID against the sandbox."""
    ids = sandbox.launch(3)
    ghosts = fake_ids(3)
    with pytest.raises(ClientError) as caught:
        raw_client(sandbox).describe_instances(InstanceIds=[ids[0], *ghosts, ids[1]])
    error = caught.value.response["Error"]
    assert error["Code"] == "InvalidInstanceID.NotFound"
    assert error["Message"] == f"The instance IDs '{', '.join(ghosts)}' do not exist"
    with pytest.raises(ClientError, match=f"The instance ID '{ghosts[0]}' does not exist"):
        raw_client(sandbox).describe_instances(InstanceIds=ghosts[:1])
    from test_cli import swarm, write_ids

    listed = write_ids(tmp_path / "ids.txt", [*ids, *fake_ids(300)])
    before = sandbox.calls_by("DescribeInstances")
    code, _, err = swarm(
        "plan", "terminate", "--ids", listed, "--endpoint-url", sandbox.endpoint,
        "--missing-ok", "--no-check-protection",
    )  # fmt: skip
    assert code == 0, err
    assert sandbox.calls_by("DescribeInstances") - before < 40


def test_dry_run_terminates_nothing(sandbox: Sandbox) -> None:
    ids = sandbox.launch(3)
    outcomes = Terminate(raw_client(sandbox), dry_run=True)(ids)
    assert {o.code for o in outcomes.values()} == {"DryRunOperation"}
    assert {o.http_status for o in outcomes.values()} == {412}
    assert set(sandbox.states(ids).values()) == {"running"}


def test_first_call_at_marks_the_first_instance_action_only(sandbox: Sandbox) -> None:
    ids = sandbox.launch(2)  # the sandbox's own calls do not count
    raw_client(sandbox).describe_instances(InstanceIds=ids)  # nor does a describe
    assert sandbox.first_call_at is None
    before = time.time()
    raw_client(sandbox).terminate_instances(InstanceIds=ids[:1])
    first = sandbox.first_call_at
    assert first is not None and before <= first <= time.time()
    raw_client(sandbox).terminate_instances(InstanceIds=ids[1:])
    assert sandbox.first_call_at == first


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


# Per action, region and account, as EC2 keeps its buckets.

OTHER_ACCOUNT = "111111111111"


def user_client(box: Sandbox, region: str | None = None, account: str | None = None) -> Any:
    """A client under test: it spends its pair's buckets and sends each call once."""
    return box.client(region, account, admin=False, config=NO_RETRIES)


def throttled(call: Callable[[], object]) -> bool:
    try:
        call()
    except ClientError as err:
        assert err.response["Error"]["Code"] == "RequestLimitExceeded"
        return True
    return False


def error_code(call: Callable[[], object]) -> str | None:
    try:
        call()
    except ClientError as err:
        return str(err.response["Error"]["Code"])
    return None


# One call per instance at most, so the Start bucket (1/s here) cannot refill between tries.
ONE_START = {"StartInstances": (BucketSpec(1, 0.001), BucketSpec(1000, 1000))}


def test_ec2_preset_gives_every_action_its_documented_buckets() -> None:
    limits = PRESETS["ec2"].action_limits()
    assert limits["TerminateInstances"] == (BucketSpec(100, 5), BucketSpec(1000, 20))
    assert limits["StopInstances"] == (BucketSpec(50, 5), BucketSpec(1000, 20))
    assert limits["StartInstances"] == (BucketSpec(5, 2), BucketSpec(1000, 2))
    assert limits["RebootInstances"] == (BucketSpec(50, 5), None)
    assert limits["DescribeInstances"] == (BucketSpec(100, 20), None)


def test_other_actions_scale_with_the_terminate_buckets() -> None:
    config = SandboxConfig(BucketSpec(10, 50), BucketSpec(100, 40))  # /10 bursts, x10 and x2 rates
    limits = config.action_limits()
    assert limits["StopInstances"] == (BucketSpec(5, 50), BucketSpec(100, 40))
    assert limits["StartInstances"] == (BucketSpec(1, 20), BucketSpec(100, 4))
    assert limits["DescribeInstances"] == (BucketSpec(10, 200), None)
    tiny = SandboxConfig(BucketSpec(1, 1), BucketSpec(1, 1)).action_limits()
    assert tiny["StartInstances"][0].burst == 1, "a bucket never scales below one token"
    given = config.with_(limits=ONE_START, throttle_describe=False).action_limits()
    assert given["StartInstances"] == ONE_START["StartInstances"]
    assert given["StopInstances"] == limits["StopInstances"]
    assert "DescribeInstances" not in given
    with pytest.raises(ValueError):
        SandboxConfig(
            BucketSpec(1, 1), BucketSpec(1, 1), limits={"RunInstance": ONE_START["StartInstances"]}
        )
    with pytest.raises(ValueError):
        SandboxConfig(
            BucketSpec(1, 1),
            BucketSpec(1, 1),
            limits={"TerminateInstances": (BucketSpec(2, 2), None)},
        )


def test_front_keys_buckets_by_account_region_and_action() -> None:
    now = [0.0]
    config = SandboxConfig(BucketSpec(100, 5), BucketSpec(1000, 20), limits=ONE_START)
    front = Ec2Front(lambda e, s: [], config, clock=lambda: now[0])
    assert front.admit("StartInstances", 1) is None
    assert front.admit("StartInstances", 1) == "requests"
    assert front.admit("StartInstances", 1, region="eu-west-1") is None
    assert front.admit("StartInstances", 1, account=OTHER_ACCOUNT) is None
    assert front.admit("RebootInstances", 5000) is None, "reboot has no instance bucket"
    assert front.admit("DescribeInstances", 0) is None
    assert front.admit("RunInstances", 1) is None, "actions without buckets pass"
    assert front.calls_by("StartInstances") == 3
    assert front.calls_by("StartInstances", account=ACCOUNT, region="us-east-1") == 1
    assert front.throttles_by("StartInstances", region="us-east-1") == 1
    assert front.counters.accepted_by_action == {"StartInstances": 3, "RebootInstances": 5000}
    assert front.counters.accepted == 4, "DescribeInstances is not an instance action"


def test_start_throttles_after_its_burst_while_terminate_does_not() -> None:
    with Sandbox(PRESETS["ec2"].with_(latency=0.0, jitter=0.0)) as box:
        ids = box.launch(12)
        client = user_client(box)
        # Starting a running instance succeeds, so the same call can be repeated.
        starts = [throttled(lambda: client.start_instances(InstanceIds=ids[:1])) for _ in ids]
        terminates = [
            throttled(lambda i=i: client.terminate_instances(InstanceIds=[i])) for i in ids
        ]
        assert not any(starts[:5]) and any(starts[5:])
        assert not any(terminates)
        assert box.throttles_by("StartInstances") == box.counters.throttled == sum(starts)
        assert box.counters.accepted_by_action == {
            "StartInstances": 12 - sum(starts),
            "TerminateInstances": 12,
        }
        assert set(box.states(ids).values()) == {"terminated"}


def test_regions_keep_separate_instances_and_buckets() -> None:
    with Sandbox(OPEN.with_(limits=ONE_START)) as box:
        east = box.launch(2)
        west = box.launch(2, region="eu-west-1")
        assert box.states() == dict.fromkeys(east, "running")
        assert box.states(region="eu-west-1") == dict.fromkeys(west, "running")
        east_client, west_client = user_client(box), user_client(box, "eu-west-1")
        assert error_code(lambda: east_client.stop_instances(InstanceIds=west[:1])) == (
            "InvalidInstanceID.NotFound"
        )
        assert not throttled(lambda: east_client.start_instances(InstanceIds=east[:1]))
        assert not throttled(lambda: west_client.start_instances(InstanceIds=west[:1]))
        assert throttled(lambda: east_client.start_instances(InstanceIds=east[1:]))
        assert box.calls_by("StartInstances", region="us-east-1") == 1
        assert box.calls_by("StartInstances", region="eu-west-1") == 1
        assert box.throttles_by("StartInstances", region="us-east-1") == 1


def test_an_assumed_role_acts_in_its_own_account() -> None:
    with Sandbox(OPEN.with_(limits=ONE_START)) as box:
        # Any client may assume the role on the sandbox, as on AWS.
        sts = boto3.client("sts", region_name="us-east-1", endpoint_url=box.endpoint, **CREDENTIALS)
        assert sts.get_caller_identity()["Account"] == ACCOUNT
        reply = sts.assume_role(
            RoleArn=f"arn:aws:iam::{OTHER_ACCOUNT}:role/swarm", RoleSessionName="test"
        )
        assumed = boto3.client(
            "sts",
            region_name="us-east-1",
            endpoint_url=box.endpoint,
            aws_access_key_id=reply["Credentials"]["AccessKeyId"],
            aws_secret_access_key=reply["Credentials"]["SecretAccessKey"],
            aws_session_token=reply["Credentials"]["SessionToken"],
        )
        assert assumed.get_caller_identity()["Account"] == OTHER_ACCOUNT
        other_sts = box.client(account=OTHER_ACCOUNT, service="sts")
        assert other_sts.get_caller_identity()["Account"] == OTHER_ACCOUNT
        assert box.credentials(OTHER_ACCOUNT) == box.credentials(OTHER_ACCOUNT), "cached"
        env = environment(box, account=OTHER_ACCOUNT)
        assert env["AWS_SESSION_TOKEN"] == box.credentials(OTHER_ACCOUNT)["aws_session_token"]

        mine = box.launch(1)
        theirs = box.launch(2, account=OTHER_ACCOUNT)
        assert box.states() == dict.fromkeys(mine, "running")
        assert box.states(account=OTHER_ACCOUNT) == dict.fromkeys(theirs, "running")
        client, other = user_client(box), user_client(box, account=OTHER_ACCOUNT)
        assert error_code(lambda: client.stop_instances(InstanceIds=theirs[:1])) == (
            "InvalidInstanceID.NotFound"
        )
        assert not throttled(lambda: client.start_instances(InstanceIds=mine))
        assert not throttled(lambda: other.start_instances(InstanceIds=theirs[:1]))
        assert throttled(lambda: other.start_instances(InstanceIds=theirs[1:]))
        assert box.calls_by("StartInstances", account=ACCOUNT) == 1
        assert box.calls_by("StartInstances", account=OTHER_ACCOUNT) == 1
        assert box.throttles_by("StartInstances", account=OTHER_ACCOUNT) == 1


def test_stop_start_and_reboot_follow_ec2s_state_rules(sandbox: Sandbox) -> None:
    running, stopped, terminated = sandbox.launch(3)
    client = user_client(sandbox)
    client.stop_instances(InstanceIds=[stopped])
    client.terminate_instances(InstanceIds=[terminated])
    cases: list[tuple[str, str, str | None, str]] = [
        # action, instance, error code, state after
        ("stop", stopped, None, "stopped"),
        ("start", running, None, "running"),
        ("reboot", running, None, "running"),
        ("reboot", stopped, "IncorrectInstanceState", "stopped"),
        ("stop", terminated, "IncorrectInstanceState", "terminated"),
        ("start", terminated, "IncorrectInstanceState", "terminated"),
        ("reboot", terminated, None, "terminated"),  # EC2 ignores it
    ]
    for action, instance, code, after in cases:
        call = getattr(client, f"{action}_instances")
        assert error_code(lambda c=call, i=instance: c(InstanceIds=[i])) == code, (action, after)
        assert sandbox.states([instance])[instance] == after, (action, code)
    # A refused batch changes nothing; a reboot skips only the terminated.
    assert error_code(lambda: client.stop_instances(InstanceIds=[running, terminated])) == (
        "IncorrectInstanceState"
    )
    assert sandbox.states([running])[running] == "running"
    client.reboot_instances(InstanceIds=[terminated, running])
    assert sandbox.states([running, terminated]) == {
        running: "running",
        terminated: "terminated",
    }
    client.start_instances(InstanceIds=[stopped])
    assert sandbox.states([stopped])[stopped] == "running"
    assert sandbox.counters.repeats == 0, "repeats count terminations only"


def test_stop_protection_refuses_stop(sandbox: Sandbox) -> None:
    guarded, free = sandbox.launch(2, stop_protected=1)
    client = user_client(sandbox)
    assert error_code(lambda: client.stop_instances(InstanceIds=[guarded])) == (
        "OperationNotPermitted"
    )
    client.stop_instances(InstanceIds=[free])
    assert sandbox.states() == {guarded: "running", free: "stopped"}


def test_describe_spends_its_own_bucket_and_states_spend_none() -> None:
    config = OPEN.with_(limits={"DescribeInstances": (BucketSpec(2, 0.001), None)})
    with Sandbox(config) as box:
        ids = box.launch(2)
        client = user_client(box)
        assert [throttled(client.describe_instances) for _ in range(3)] == [False, False, True]
        for _ in range(5):
            assert box.states(ids) == dict.fromkeys(ids, "running")
        assert box.throttles_by("DescribeInstances") == 1
        assert box.calls_by("DescribeInstances") == 2
        client.terminate_instances(InstanceIds=ids[:1])
        box.client().terminate_instances(InstanceIds=ids[1:])  # admin: not counted
        assert (box.counters.accepted, box.counters.throttled) == (1, 0)
        assert box.accepted_ids() == set(ids[:1])
    with Sandbox(config.with_(throttle_describe=False)) as box:
        client = user_client(box)
        assert not any(throttled(client.describe_instances) for _ in range(4))
        assert box.calls_by("DescribeInstances") == 0


def backend_of(region: str = "us-east-1", account: str = ACCOUNT) -> Any:
    from moto.ec2.models import ec2_backends

    return ec2_backends[account][region]


def test_load_ids_loads_thousands_in_big_reservations_and_reports_progress(
    sandbox: Sandbox, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Reservations of 1,000 (LOAD_CHUNK), shown here at a tenth of the size: the same
    # chunking and progress, without moto describing thousands of instances.
    monkeypatch.setattr("swarm_cli.sandbox.admin.LOAD_CHUNK", 100)
    wanted = fake_ids(200)
    heard: list[tuple[int, int]] = []
    sandbox.load_ids(wanted, progress=lambda done, total: heard.append((done, total)))
    assert heard == [(0, 200), (100, 200), (200, 200)]
    assert sandbox.states() == dict.fromkeys(wanted, "running")
    reservations = sandbox.client().describe_instances()["Reservations"]
    assert sorted(len(r["Instances"]) for r in reservations) == [100, 100]
    assert sandbox.held_states(wanted[:5]) == dict.fromkeys(wanted[:5], "running")


def test_loaded_ids_answer_as_moto_does(sandbox: Sandbox) -> None:
    wanted = fake_ids(30)
    sandbox.load_ids(wanted)
    client = user_client(sandbox)
    ghost = fake_ids(1)[0]
    assert error_code(lambda: client.terminate_instances(InstanceIds=[wanted[0], ghost])) == (
        "InvalidInstanceID.NotFound"
    )
    asked = [wanted[7], wanted[3], wanted[20]]
    reply = client.describe_instances(InstanceIds=asked)
    shown = [i["InstanceId"] for r in reply["Reservations"] for i in r["Instances"]]
    assert shown == [wanted[3], wanted[7], wanted[20]], "moto's order: as launched"
    terminated = client.terminate_instances(InstanceIds=wanted[:10])["TerminatingInstances"]
    assert [t["InstanceId"] for t in terminated] == wanted[:10]
    states = sandbox.states(wanted)
    assert [states[i] for i in wanted] == ["terminated"] * 10 + ["running"] * 20
    assert sandbox.held_states([*wanted[8:12], ghost]) == {
        wanted[8]: "terminated",
        wanted[9]: "terminated",
        wanted[10]: "running",
        wanted[11]: "running",
    }
    # Volumes go with their instances, as for launched ones.
    assert len(sandbox.client().describe_volumes()["Volumes"]) == 20


def test_the_id_index_agrees_with_moto_on_every_lookup(sandbox: Sandbox) -> None:
    from moto.ec2.exceptions import InvalidInstanceIdError
    from moto.ec2.models.instances import InstanceBackend

    sandbox.load_ids(fake_ids(12))
    launched = sandbox.launch(3)  # over HTTP, after the index was made
    backend = backend_of()
    everything = [i.id for i in backend.all_instances()]
    cases = [everything, everything[::-3], launched, everything[:2] + launched[:1]]
    for ids in cases:
        fast = backend.get_reservations_by_instance_ids(ids, filters={})
        slow = InstanceBackend.get_reservations_by_instance_ids(backend, ids, filters={})
        assert [(r.id, [i.id for i in r.instances]) for r in fast] == [
            (r.id, [i.id for i in r.instances]) for r in slow
        ]
        multi = backend.get_multi_instances_by_id(ids)
        assert multi == InstanceBackend.get_multi_instances_by_id(backend, ids)
        assert all(backend.get_instance(i).id == i for i in ids)
    ghost = fake_ids(1)[0]
    for lookup in (backend.get_instance, backend.get_multi_instances_by_id):
        with pytest.raises(InvalidInstanceIdError):
            lookup(ghost if lookup is backend.get_instance else [everything[0], ghost])
    assert backend.get_instance_by_id(ghost) is None
    # An instance renamed behind the index's back is found by its new ID only.
    moved = backend.get_instance(launched[0])
    moved.id = "i-0000000000000dead"
    assert backend.get_instance("i-0000000000000dead") is moved
    with pytest.raises(InvalidInstanceIdError):
        backend.get_instance(launched[0])


def test_load_ids_makes_each_id_once(sandbox: Sandbox) -> None:
    first, second = fake_ids(2)
    sandbox.load_ids([first, first])
    heard: list[tuple[int, int]] = []
    sandbox.load_ids([first, second], progress=lambda d, t: heard.append((d, t)))
    assert heard == [(0, 1), (1, 1)], "an ID already held is not made again"
    assert sandbox.states() == {first: "running", second: "running"}


def test_load_speedups_stay_on_the_sandboxs_own_backends() -> None:
    from moto.ec2.models.instances import InstanceBackend

    moto_lookup = InstanceBackend.get_instance
    with Sandbox(OPEN) as box:
        box.load_ids(fake_ids(3), region="eu-west-1")
        loaded, other = backend_of("eu-west-1"), backend_of("us-east-1")
        assert "get_instance" in vars(loaded) and "get_instance" not in vars(other)
        # The image and volume shortcuts last only while loading.
        assert "describe_images" not in vars(loaded)
        assert "describe_volumes" not in vars(loaded)
        assert InstanceBackend.get_instance is moto_lookup
    with Sandbox(OPEN) as box:  # moto's reset makes new backends
        fresh = backend_of("eu-west-1")
        assert fresh is not loaded and "get_instance" not in vars(fresh)
        assert box.states(region="eu-west-1") == {}


def test_instances_stop_and_start_through_their_states_on_the_way_as_ec2s() -> None:
    config = SandboxConfig(BucketSpec(1000, 1000), BucketSpec(1000, 1000), transition_seconds=0.5)
    with Sandbox(config) as box:
        ids = box.launch(2)
        client = box.client()
        client.stop_instances(InstanceIds=ids)
        assert set(box.states(ids).values()) == {"stopping"}
        with pytest.raises(ClientError) as refused:
            client.start_instances(InstanceIds=ids[:1])
        assert refused.value.response["Error"]["Code"] == "IncorrectInstanceState"
        client.stop_instances(InstanceIds=ids[1:])  # already stopping: it keeps its time
        deadline = time.monotonic() + 10
        while set(box.states(ids).values()) != {"stopped"} and time.monotonic() < deadline:
            time.sleep(0.05)
        assert set(box.states(ids).values()) == {"stopped"}
        client.start_instances(InstanceIds=ids)
        assert set(box.states(ids).values()) == {"pending"}
        with pytest.raises(ClientError) as refused:
            client.stop_instances(InstanceIds=ids[:1])  # EC2 stops none still pending
        assert refused.value.response["Error"]["Code"] == "IncorrectInstanceState"
        while set(box.states(ids).values()) != {"running"} and time.monotonic() < deadline:
            time.sleep(0.05)
        assert set(box.states(ids).values()) == {"running"}


def test_a_stop_of_an_instance_stopping_keeps_its_one_timer() -> None:
    # A second timer for the second stop would end a later stop of it early. (Long enough
    # that a loaded machine does not see it arrive between a call and the look after it.)
    config = SandboxConfig(BucketSpec(1000, 1000), BucketSpec(1000, 1000), transition_seconds=1.5)
    with Sandbox(config) as box:
        (one,) = box.launch(1)
        client = box.client()

        def until(state: str) -> None:
            deadline = time.monotonic() + 10
            while box.states([one])[one] != state and time.monotonic() < deadline:
                time.sleep(0.02)
            assert box.states([one])[one] == state

        front = box.front
        assert front is not None
        client.stop_instances(InstanceIds=[one])
        client.stop_instances(InstanceIds=[one])  # still stopping: no second timer
        assert box.states([one])[one] == "stopping" and len(front._timers) == 1
        until("stopped")
        client.start_instances(InstanceIds=[one])
        until("running")
        client.stop_instances(InstanceIds=[one])
        assert box.states([one])[one] == "stopping" and len(front._timers) == 1
        until("stopped")
        assert not front._timers


def test_a_tag_no_describe_answer_could_carry_is_refused_as_ec2_refuses_it(
    sandbox: Sandbox,
) -> None:
    """moto would keep an ESC in a tag and then answer every Describe of the instance
    with XML no parser reads; the sandbox refuses it at the call that sets it."""
    ids = sandbox.launch(2)
    client = sandbox.client(admin=False)
    for tags in ([{"Key": "Name", "Value": "a\x1b[31mb"}], [{"Key": "\x07", "Value": "v"}]):
        with pytest.raises(ClientError) as refused:
            client.create_tags(Resources=ids[:1], Tags=tags)
        assert refused.value.response["Error"]["Code"] == "InvalidParameterValue"
    # What XML carries (markup, a tab) is kept, and read back as it was.
    client.create_tags(Resources=ids[:1], Tags=[{"Key": "Name", "Value": "<b>x</b>\ty"}])
    found = client.describe_instances(InstanceIds=ids)["Reservations"]
    tags = [i.get("Tags") for r in found for i in r["Instances"]]
    assert [{"Key": "Name", "Value": "<b>x</b>\ty"}] in tags
