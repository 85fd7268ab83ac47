from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from itertools import pairwise
from typing import Any

import pytest

from swarm_cli.ec2 import make_client
from swarm_cli.errors import EXIT_FAILED, EXIT_USAGE
from swarm_cli.sandbox import ACCOUNT, IMAGE_ID, BucketSpec, Sandbox
from swarm_cli.select import (
    FIRST_PAUSE,
    MAX_PAUSE,
    Selected,
    SelectError,
    filter_text,
    parse_age,
    parse_filter,
    parse_filters,
    select,
)
from swarm_cli.window import ADAPTIVE, SEED, new_controller
from tests.conftest import OPEN

REGION = "us-east-1"


class Sleeps:
    """Records each pause asked for, and waits a little of it for real.

    The sandbox's buckets refill in real time, so a sleep that waited nothing would
    spin against an empty bucket; capping the wait keeps the test quick.
    """

    def __init__(self) -> None:
        self.asked: list[float] = []

    def __call__(self, seconds: float) -> None:
        self.asked.append(seconds)
        time.sleep(min(seconds, 0.3))


def tag(admin: Any, ids: list[str], **tags: str) -> None:
    admin.create_tags(Resources=ids, Tags=[{"Key": k, "Value": v} for k, v in tags.items()])


def populate(box: Sandbox) -> dict[str, list[str]]:
    """Instances in several reservations, tags and states; returned by group."""
    admin = box.client(REGION)

    def launch(count: int) -> list[str]:
        # One reservation per call; one admin client for all (making one is the slow part).
        reply = admin.run_instances(
            ImageId=IMAGE_ID, MinCount=count, MaxCount=count, InstanceType="t3.micro"
        )
        return [i["InstanceId"] for i in reply["Instances"]]

    groups = {
        "ci_a": launch(3),
        "ci_b": launch(2),
        "prod_a": launch(2),
        "untagged": launch(2),
        "ci_c": launch(1),
    }
    # More small reservations, so that a page of 5 (moto pages by reservation) leaves some.
    groups["extra"] = [i for _ in range(4) for i in launch(1)]
    tag(admin, groups["ci_a"], env="ci", team="a", Name="ci-a")
    tag(admin, groups["ci_b"], env="ci", team="b")
    tag(admin, groups["prod_a"], env="prod", team="a", Name="prod")
    tag(admin, groups["ci_c"], env="ci", team="c")
    tag(admin, groups["extra"], env="ci")
    admin.stop_instances(InstanceIds=[groups["ci_b"][0], groups["ci_c"][0]])
    admin.terminate_instances(InstanceIds=[groups["prod_a"][0], groups["extra"][0]])
    return groups


def truth(box: Sandbox, filters: list[dict[str, Any]]) -> set[str]:
    """What plain boto3 finds for the filters, all pages, unthrottled."""
    pages = box.client(REGION).get_paginator("describe_instances").paginate(Filters=filters)
    return {i["InstanceId"] for page in pages for r in page["Reservations"] for i in r["Instances"]}


def now() -> datetime:
    return datetime.now(timezone.utc)


@pytest.fixture
def populated(sandbox: Sandbox) -> Iterator[tuple[Sandbox, dict[str, list[str]]]]:
    yield sandbox, populate(sandbox)


FILTER_SETS = [
    ["tag:env=ci"],
    ["instance-state-name=running"],
    ["tag:env=ci", "instance-state-name=running"],
    ["tag:team=a,b"],
    ["instance-state-name=stopped,terminated"],
    ["tag:env=c*"],
    ["tag:Name=prod", "instance-state-name=running"],
    [],
]


def test_select_finds_what_describe_finds(
    populated: tuple[Sandbox, dict[str, list[str]]],
) -> None:
    box, _ = populated
    client = make_client(REGION, endpoint_url=box.endpoint)
    for specs in FILTER_SETS:
        filters = parse_filters(specs)
        got = select(client, filters, now=now(), page_size=5)
        expected = truth(box, filters)
        assert expected, specs  # a filter set matching nothing would prove little
        assert sorted(s.id for s in got) == sorted(expected), specs
        assert len(got) == len({s.id for s in got}), specs


def test_select_pages_through_everything(
    populated: tuple[Sandbox, dict[str, list[str]]],
) -> None:
    box, groups = populated
    client = make_client(REGION, endpoint_url=box.endpoint)
    everything = {i for ids in groups.values() for i in ids}
    assert {s.id for s in select(client, [], now=now(), page_size=5)} == everything
    # Nine reservations, five a page in moto: two calls.
    assert box.calls_by("DescribeInstances", region=REGION) == 2
    assert {s.id for s in select(client, [], now=now())} == everything
    assert box.calls_by("DescribeInstances", region=REGION) == 3


def test_selected_carries_state_type_tags_and_name(
    populated: tuple[Sandbox, dict[str, list[str]]],
) -> None:
    box, groups = populated
    client = make_client(REGION, endpoint_url=box.endpoint)
    by_id = {s.id: s for s in select(client, parse_filters(["tag:team=a,b"]), now=now())}
    first = by_id[groups["ci_a"][0]]
    assert first.state == "running"
    assert first.type == "t3.micro"
    assert first.tags == {"env": "ci", "team": "a", "Name": "ci-a"}
    assert first.name == "ci-a"
    assert first.launch_time is not None and first.launch_time.tzinfo is not None
    unnamed = by_id[groups["ci_b"][1]]
    assert unnamed.name is None
    assert by_id[groups["ci_b"][0]].state == truth_state(box, groups["ci_b"][0])
    assert by_id[groups["prod_a"][0]].state == "terminated"
    # Frozen and hashable despite the tags dict: usable in sets.
    assert len({first, first}) == 1
    row = first.to_dict()
    assert row["id"] == first.id and row["name"] == "ci-a" and row["tags"] == first.tags
    assert datetime.fromisoformat(row["launch_time"]) == first.launch_time
    json.dumps(row)


def truth_state(box: Sandbox, instance_id: str) -> str:
    return box.states([instance_id], region=REGION)[instance_id]


def test_older_than(populated: tuple[Sandbox, dict[str, list[str]]]) -> None:
    box, groups = populated
    client = make_client(REGION, endpoint_url=box.endpoint)
    filters = parse_filters(["tag:env=ci"])
    everyone = truth(box, filters)
    # moto sets LaunchTime to the moment of launch: none is an hour old, all are 0s old.
    assert select(client, filters, older_than=parse_age("1h"), now=now()) == []
    assert {s.id for s in select(client, filters, older_than=timedelta(0), now=now())} == everyone

    # Age some instances in moto's backend (no call is in flight meanwhile).
    from moto.ec2.models import ec2_backends

    backend = ec2_backends[ACCOUNT][REGION]
    old = groups["ci_a"][:2]
    for instance_id in old:
        launched = datetime.now(timezone.utc) - timedelta(hours=3)
        backend.get_instance(instance_id).launch_time = launched.replace(tzinfo=None)
    got = select(client, filters, older_than=parse_age("2h"), now=now())
    assert sorted(s.id for s in got) == sorted(old)
    # ``now`` decides: seen from four hours on, an hour-old rule takes all.
    later = now() + timedelta(hours=4)
    assert {s.id for s in select(client, filters, older_than=parse_age("1h"), now=later)} == (
        everyone
    )


def test_exclude(populated: tuple[Sandbox, dict[str, list[str]]]) -> None:
    box, groups = populated
    client = make_client(REGION, endpoint_url=box.endpoint)
    filters = parse_filters(["tag:env=ci"])
    spared = {groups["ci_a"][0], groups["ci_c"][0], "i-0000000000000dead"}
    got = {s.id for s in select(client, filters, exclude=spared, now=now())}
    assert got == truth(box, filters) - spared
    assert groups["ci_a"][1] in got


@pytest.mark.parametrize("profile", [None, ADAPTIVE, SEED])
def test_throttled_pages_are_asked_again(profile: Any) -> None:
    # Pages are asked one after another: a refill under what even a loaded machine asks
    # for throttles some.
    limits = {"DescribeInstances": (BucketSpec(1, 2), None)}
    with Sandbox(OPEN.with_(limits=limits)) as box:
        groups = populate(box)
        filters = parse_filters(["tag:env=ci"])
        client = make_client(REGION, endpoint_url=box.endpoint)
        sleeps = Sleeps()
        window = None if profile is None else new_controller(profile)
        got = select(client, filters, now=now(), page_size=5, window=window, sleep=sleeps)
        assert {s.id for s in got} == truth(box, filters)
        assert {i for ids in groups.values() for i in ids} >= {s.id for s in got}
        throttles = box.throttles_by("DescribeInstances", region=REGION)
        assert throttles >= 1
        assert sleeps.asked and all(0 < s <= MAX_PAUSE for s in sleeps.asked)
        if window is not None:
            assert window.throttled
        # The controller always paces; of the windows, only profiles that say so.
        paces = window is not None and getattr(window.profile, "pacing", True)
        if not paces:
            # No pacing window: one pause per throttle, from FIRST_PAUSE, doubling in a row.
            assert len(sleeps.asked) == throttles
            assert sleeps.asked[0] == FIRST_PAUSE
            for before, after in pairwise(sleeps.asked):
                assert after in (FIRST_PAUSE, min(before * 2, MAX_PAUSE))


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_other_errors_raise_with_the_code() -> None:
    client = make_client(REGION, endpoint_url=f"http://127.0.0.1:{closed_port()}", timeout=2)
    sleeps = Sleeps()
    with pytest.raises(SelectError) as caught:
        select(client, [], now=now(), sleep=sleeps)
    assert caught.value.code == "EndpointConnectionError"
    assert caught.value.exit_code == EXIT_FAILED
    assert "\n" not in str(caught.value)
    assert sleeps.asked == []  # not a throttle: no second try


def test_a_filter_moto_lacks_is_an_error_not_an_empty_selection(sandbox: Sandbox) -> None:
    sandbox.launch(1, region=REGION)
    client = make_client(REGION, endpoint_url=sandbox.endpoint)
    # moto fails on a filter it does not implement (EC2 knows "platform"): the sandbox
    # answers as EC2 does for one it does not know, and says it may be its own lack.
    with pytest.raises(SelectError) as caught:
        select(client, parse_filters(["platform=windows"]), now=now())
    assert caught.value.code == "InvalidParameterValue"
    assert "the sandbox cannot apply" in caught.value.message


def test_page_size_bounds() -> None:
    with pytest.raises(ValueError):
        select(object(), [], now=now(), page_size=4)
    with pytest.raises(ValueError):
        select(object(), [], now=now(), page_size=1001)


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("tag:env=ci", {"Name": "tag:env", "Values": ["ci"]}),
        (
            "instance-state-name=running,stopped",
            {
                "Name": "instance-state-name",
                "Values": ["running", "stopped"],
            },
        ),
        ("tag:team=a, b,a", {"Name": "tag:team", "Values": ["a", "b"]}),
        ("tag:url=https://x/?a=b", {"Name": "tag:url", "Values": ["https://x/?a=b"]}),
        ("tag:Cost Center=42", {"Name": "tag:Cost Center", "Values": ["42"]}),
        ("tag-key=env", {"Name": "tag-key", "Values": ["env"]}),
        # A comma inside a value is escaped: one value, never two (a broader selection).
        ("tag:Name=a=b\\,c", {"Name": "tag:Name", "Values": ["a=b,c"]}),
        ("tag:Name=a\\,b,c", {"Name": "tag:Name", "Values": ["a,b", "c"]}),
        # Any other backslash is EC2's own escape (\\* a literal *): passed as typed.
        ("tag:p=a\\\\\\*,d\\e", {"Name": "tag:p", "Values": ["a\\\\\\*", "d\\e"]}),
    ],
)
def test_parse_filter(spec: str, expected: dict[str, Any]) -> None:
    assert parse_filter(spec) == expected
    # Shown as asked: read back, the same filter.
    assert parse_filter(filter_text([expected])) == expected


@pytest.mark.parametrize(
    "spec",
    ["tag:env", "=ci", "tag:env=", "tag:=ci", "tag:env=a,,b", "", "Name=tag:env,Values=ci"],
)
def test_parse_filter_refuses_bad_forms(spec: str) -> None:
    with pytest.raises(SelectError) as caught:
        parse_filter(spec)
    assert caught.value.exit_code == EXIT_USAGE
    assert "\n" not in caught.value.message


def test_parse_filters_keeps_each_name_and_refuses_one_given_twice() -> None:
    assert parse_filters(["tag:team=a,b", "instance-state-name=running", "tag:env=ci"]) == [
        {"Name": "tag:team", "Values": ["a", "b"]},
        {"Name": "instance-state-name", "Values": ["running"]},
        {"Name": "tag:env", "Values": ["ci"]},
    ]
    assert parse_filters([]) == []
    # Merged, two filters of one name would select either (broader than "all must
    # match"); the user is told how to say either, and how to say both tag keys.
    for specs in (["tag:team=a", "tag:team=b"], ["tag-key=tmp", "tag-key=ci"]):
        with pytest.raises(SelectError) as caught:
            parse_filters(specs)
        message = caught.value.message
        name = specs[0].partition("=")[0]
        assert f"--filter {name} is given twice" in message
        assert f"{name}={specs[0][-1] if name == 'tag:team' else 'tmp'}," in message
        assert "tag:a=* and tag:b=*" in message


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2h", timedelta(hours=2)),
        ("90s", timedelta(seconds=90)),
        ("30m", timedelta(minutes=30)),
        ("7d", timedelta(days=7)),
        ("2w", timedelta(weeks=2)),
        ("0s", timedelta(0)),
        ("1d12h", timedelta(days=1, hours=12)),
    ],
)
def test_parse_age(text: str, expected: timedelta) -> None:
    assert parse_age(text) == expected


@pytest.mark.parametrize("text", ["", "2", "h", "2y", "-1h", "1.5h", "2 h", "2H", "9999999999999w"])
def test_parse_age_refuses(text: str) -> None:
    with pytest.raises(SelectError) as caught:
        parse_age(text)
    assert caught.value.exit_code == EXIT_USAGE


def test_selected_without_tags() -> None:
    s = Selected("i-1", "running", "t3.micro", None)
    assert s.tags == {} and s.name is None


def test_an_endpoint_that_does_not_apply_the_filters_selects_nothing(
    populated: tuple[Sandbox, dict[str, list[str]]],
) -> None:
    """An endpoint that ignores Filters (a proxy, a stand-in for EC2) lists every
    instance, each with its own tags: the selection took them all, and a plan predicted
    "would act" of instances the filter left out. What it lists is checked against the
    filters its fields answer; one that does not match stops the selection."""
    box, _ = populated
    client = make_client(REGION, endpoint_url=box.endpoint)

    class Unfiltered:
        def describe_instances(self, **request: Any) -> Any:
            request.pop("Filters", None)
            return client.describe_instances(**request)

    for specs in (["tag:env=ci"], ["instance-state-name=stopped"], ["tag:env=c*"]):
        with pytest.raises(SelectError) as caught:
            select(Unfiltered(), parse_filters(specs), now=now(), page_size=5)
        assert caught.value.code == "FilterNotApplied" and caught.value.exit_code == EXIT_FAILED
        assert "does not match the filter" in str(caught.value), specs
    # Filters its fields do not answer are EC2's alone.
    assert select(Unfiltered(), parse_filters(["instance-type=t3.micro"]), now=now())


def test_filter_values_match_as_ec2s_wildcards() -> None:
    from swarm_cli.select import contradicts

    one = Selected("i-0123456789abcdef0", "running", None, None, {"env": "ci-1", "a*": "x"})

    def ok(*specs: str) -> bool:
        return contradicts(one, parse_filters(list(specs)), instances=True) is None

    assert ok("tag:env=ci-?") and ok("tag:env=c*") and ok("tag:env=prod,ci-1")
    assert not ok("tag:env=ci") and not ok("tag:env=CI-1") and not ok("tag:team=x")
    assert ok("tag-key=a\\*") and not ok("tag-key=ab") and ok("tag-key=e*")
    assert ok("instance-state-name=running,stopped") and not ok("instance-state-name=stopped")
    assert contradicts(one, parse_filters(["tag:env=ci"]), instances=True) == "tag:env=ci"
