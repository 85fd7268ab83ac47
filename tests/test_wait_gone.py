"""--wait for an operation: its Describe call asked through the engine until each resource
is gone, against the sandbox over HTTP."""

from __future__ import annotations

import io
from collections.abc import Mapping, Sequence
from typing import Any

from rich.console import Console

from swarm_cli.actions.operations import OPERATIONS
from swarm_cli.ec2 import make_client
from swarm_cli.engine import Engine
from swarm_cli.outcome import Kind, Outcome
from swarm_cli.report import Pair
from swarm_cli.run import Job, RunOptions
from swarm_cli.sandbox import CREDENTIALS, Sandbox
from swarm_cli.wait_gone import WaitGone, wait_gone
from swarm_cli.window import RATE, Window

EAST = "us-east-1"


def waiting(box: Sandbox, op: str, sent: list[str] | None = None, **kwargs: Any) -> WaitGone:
    """The wait's action on a client as swarm makes one; ``sent`` collects its calls."""
    client = make_client(EAST, endpoint_url=box.endpoint, credentials=CREDENTIALS)
    if sent is not None:
        client.meta.events.register("before-call.ec2.*", lambda model, **_: sent.append(model.name))
    return WaitGone(client, OPERATIONS[op], **kwargs)


def test_a_resource_still_there_is_not_yet_then_times_out_saying_where_it_was(
    sandbox: Sandbox,
) -> None:
    kept, deleted = sandbox.seed(volumes=2)["volumes"]
    sandbox.client().delete_volume(VolumeId=deleted)
    now = [0.0]
    sent: list[str] = []
    wait = waiting(sandbox, "delete-volume", sent, deadline=10.0, clock=lambda: now[0])

    first = wait([kept, deleted])

    assert first[kept].kind is Kind.NOT_YET and first[kept].code == "available"
    assert first[deleted].kind is Kind.SUCCEEDED and first[deleted].code == "Reached"
    assert set(wait.reached_at) == {deleted}
    assert sent == ["DescribeVolumes"]  # one filtered call for both
    now[0] = 10.0
    timed_out = wait([kept])[kept]
    assert timed_out.code == "WaitTimeout" and timed_out.kind is Kind.PERMANENT
    assert timed_out.message == "not deleted when the wait timed out (last seen available)"
    assert sent == ["DescribeVolumes"]  # past the deadline: no call


def test_a_snapshot_not_yet_deleted_is_asked_again_until_it_is(sandbox: Sandbox) -> None:
    """Through the engine, with a short poll, as the instances' wait is tested."""
    ids = sandbox.seed(snapshots=5)["snapshots"]
    wait = waiting(sandbox, "delete-snapshot")
    calls: list[int] = []

    def delete_after_first_look(batch: Sequence[str]) -> Mapping[str, Outcome]:
        outcomes = wait(batch)
        calls.append(len(batch))
        if len(calls) == 1:
            for i in ids:
                sandbox.client().delete_snapshot(SnapshotId=i)
        return outcomes

    engine = Engine(delete_after_first_look, Window(RATE), batch_size=10, poll_interval=0.01)
    result = engine.run(ids)

    assert result.counts["succeeded"] == 5
    assert len(calls) >= 2
    assert set(wait.reached_at) == set(ids)


def test_wait_gone_reports_as_the_instances_wait_does(sandbox: Sandbox) -> None:
    made = sandbox.seed(images=3, addresses=2)
    admin = sandbox.client()
    for image in made["images"]:
        admin.deregister_image(ImageId=image)
    for address in made["addresses"]:
        admin.release_address(AllocationId=address)

    def clients(pair: Pair) -> Any:
        return make_client(pair.region, endpoint_url=sandbox.endpoint, credentials=CREDENTIALS)

    for op, kind in (("deregister-image", "images"), ("release-address", "addresses")):
        operation = OPERATIONS[op]
        done = {Pair(None, EAST): made[kind]}
        job = Job(operation.outline, done, RunOptions(progress="none", batch_size=500))
        console = Console(file=io.StringIO(), width=100)

        report = wait_gone(operation, job, done, clients, console, timeout=30)

        assert report.action == "wait" and report.exit_code == 0
        assert report.counts["succeeded"] == len(made[kind]) and report.problems == []
        assert report.extra["wait"]["target"] == operation.verb
        assert report.batch_size == 200  # a filter takes 200 values
        assert set(report.reached_at) == set(made[kind])
