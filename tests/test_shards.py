from __future__ import annotations

import json
from collections import Counter

import pytest

from swarm_cli.shards import ShardError, in_shard, matrix, parse_shard, shard_of

REGIONS = ["us-east-1", "us-east-2", "us-west-2", "eu-west-1", "eu-central-1", "ap-southeast-2"]
# 50 accounts x 6 regions = 300 pairs.
PAIRS = [
    (f"{n:012d}", region) for n in range(100_000_000_000, 100_000_000_050) for region in REGIONS
]


def test_parse_shard() -> None:
    assert parse_shard("2/3") == (2, 3)
    assert parse_shard(" 1 / 1 ") == (1, 1)
    with pytest.raises(ShardError, match="count from 1"):
        parse_shard("0/3")
    with pytest.raises(ShardError, match="only 3 shards"):
        parse_shard("4/3")
    with pytest.raises(ShardError, match="expected K/N"):
        parse_shard("x")
    with pytest.raises(ShardError, match="expected K/N"):
        parse_shard("-1/3")
    with pytest.raises(ShardError, match="at least 1"):
        parse_shard("0/0")


@pytest.mark.parametrize(
    ("account", "region", "expected"),
    [
        # Pinned once: a change here moves pairs between the machines of a running matrix.
        ("111111111111", "us-east-1", [1, 3, 4, 137]),
        ("222222222222", "eu-west-1", [1, 3, 1, 157]),
        (None, "us-east-1", [2, 1, 4, 20]),
        ("123456789012", "ap-southeast-2", [2, 1, 5, 198]),
    ],
)
def test_shard_of_is_stable(account: str | None, region: str, expected: list[int]) -> None:
    assert [shard_of(account, region, n) for n in (2, 3, 5, 256)] == expected


def test_every_pair_is_in_exactly_one_shard() -> None:
    for n in (1, 2, 3, 7):
        for account, region in PAIRS:
            owners = [k for k in range(1, n + 1) if in_shard(account, region, k, n)]
            assert len(owners) == 1


def test_pairs_spread_roughly_evenly() -> None:
    counts = Counter(shard_of(account, region, 3) for account, region in PAIRS)
    assert set(counts) == {1, 2, 3}
    for count in counts.values():
        assert 0.20 <= count / len(PAIRS) <= 0.46


def test_matrix_lists_every_shard_and_every_pair_once() -> None:
    pairs = [*PAIRS[:20], (None, "us-east-1"), PAIRS[0]]
    result = matrix(pairs, 3)
    json.dumps(result)  # what fromJSON gets
    assert [job["shard"] for job in result["include"]] == ["1/3", "2/3", "3/3"]
    listed = [pair for job in result["include"] for pair in job["pairs"]]
    expected = {f"{a}/{r}" for a, r in PAIRS[:20]} | {"us-east-1"}
    assert sorted(listed) == sorted(expected)
    for k, job in enumerate(result["include"], start=1):
        assert job["pairs"] == sorted(job["pairs"])
        for label in job["pairs"]:
            account, _, region = label.rpartition("/")
            assert shard_of(account or None, region, 3) == k


def test_matrix_keeps_empty_shards_and_caps_at_github_limit() -> None:
    result = matrix([("111111111111", "us-east-1")], 4)
    assert len(result["include"]) == 4
    assert sum(len(job["pairs"]) for job in result["include"]) == 1
    assert len(matrix([], 256)["include"]) == 256
    with pytest.raises(ShardError, match="256"):
        matrix([], 257)
