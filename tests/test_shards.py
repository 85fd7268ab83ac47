from __future__ import annotations

import io
import json
import random
from collections import Counter
from pathlib import Path

import pytest
from rich.console import Console
from test_cli import swarm

from swarm_cli.cli.pairs import apply_shard, load_targets, plan_groups
from swarm_cli.shards import (
    ShardError,
    assign,
    empty_shards,
    keep_shard,
    matrix,
    pair_label,
    parse_shard,
)

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


def _weights(seed: int, pairs: int = len(PAIRS)) -> dict[tuple[str | None, str], int]:
    rng = random.Random(seed)
    # Lopsided, as fleets are: most pairs small, a few large.
    return {pair: rng.choice([1, 2, 5, 10, 40, 300, 1200]) for pair in PAIRS[:pairs]}


def test_shards_balance_by_instance_count() -> None:
    weights = _weights(1, pairs=30)
    owners = assign(weights, 4)
    loads = Counter[int]()
    for pair, k in owners.items():
        loads[k] += weights[pair]
    assert set(loads) == {1, 2, 3, 4}
    # Largest first onto the lightest: no shard exceeds another by more than one pair.
    assert max(loads.values()) - min(loads.values()) <= max(weights.values())
    # Pinned once on a case worked by hand: 10, 7, 5, 4, 3 over 2 shards.
    small = {(None, "a"): 10, (None, "b"): 7, (None, "c"): 5, (None, "d"): 4, (None, "e"): 3}
    assert assign(small, 2) == {
        (None, "a"): 1,
        (None, "b"): 2,
        (None, "c"): 2,
        (None, "d"): 1,
        (None, "e"): 2,
    }


def test_the_split_does_not_depend_on_input_order() -> None:
    weights = _weights(2)
    items = list(weights.items())
    random.Random(3).shuffle(items)
    assert assign(dict(items), 7) == assign(weights, 7)
    assert matrix(dict(items), 7) == matrix(weights, 7)


def test_every_pair_is_in_exactly_one_shard() -> None:
    weights = _weights(4)
    for n in (1, 2, 3, 7, 300):
        kept = [keep_shard(weights, k, n) for k in range(1, n + 1)]
        assert sum(len(pairs) for pairs in kept) == len(PAIRS)
        assert set().union(*kept) == set(PAIRS)


def test_thousands_of_shards_need_no_github_limit() -> None:
    weights = {(f"{a:012d}", r): 1 + a % 7 for a in range(1000) for r in REGIONS[:5]}
    result = matrix(weights, 3000)
    jobs = result["include"]
    assert len(jobs) == 3000 and all(len(j["pairs"]) >= 1 for j in jobs)
    assert sum(j["instances"] for j in jobs) == sum(weights.values())
    assert len({p for j in jobs for p in j["pairs"]}) == 5000


def test_matrix_lists_only_shards_with_pairs() -> None:
    pairs = {**dict.fromkeys(PAIRS[:20], 3), (None, "us-east-1"): 1}
    result = matrix(pairs, 30)
    json.dumps(result)  # what fromJSON gets
    assert empty_shards(len(pairs), 30) == 9
    assert [job["shard"] for job in result["include"]] == [f"{k}/30" for k in range(1, 22)]
    listed = [pair for job in result["include"] for pair in job["pairs"]]
    expected = {f"{a}/{r}" for a, r in PAIRS[:20]} | {"us-east-1"}
    assert sorted(listed) == sorted(expected)
    owners = assign(pairs, 30)
    for job in result["include"]:
        k = int(job["shard"].split("/")[0])
        assert job["pairs"] == sorted(job["pairs"])
        assert job["pairs"] == sorted(pair_label(*p) for p, o in owners.items() if o == k)
    assert matrix({}, 4) == {"include": []}
    with pytest.raises(ShardError, match="at least 1"):
        matrix(pairs, 0)
    # Any number of shards costs what the pairs do: none is made for nothing.
    huge = 10**20
    assert assign(pairs, huge) == assign(pairs, len(pairs)) == assign(pairs, 30)
    assert keep_shard(pairs, huge, huge) == set()


def _csv(path: Path, weights: dict[tuple[str | None, str], int]) -> Path:
    rows = ["instance_id,region,account"]
    serial = 0
    for (account, region), count in weights.items():
        for _ in range(count):
            serial += 1
            rows.append(f"i-{serial:017x},{region},{account}")
    path.write_text("\n".join(rows) + "\n")
    return path


def test_shards_command_and_dash_dash_shard_agree(tmp_path: Path) -> None:
    weights = _weights(5, pairs=30)
    ids = _csv(tmp_path / "ids.csv", weights)
    code, out, err = swarm("shards", "--ids", str(ids), "--n", "4")
    assert code == 0, err
    jobs = json.loads(out)["include"]
    assert [j["shard"] for j in jobs] == ["1/4", "2/4", "3/4", "4/4"]
    loads = [j["instances"] for j in jobs]
    assert sum(loads) == sum(weights.values())
    assert max(loads) - min(loads) <= max(weights.values())
    # What each job's --shard K/N keeps is what the matrix listed for K.
    console = Console(file=io.StringIO())
    groups = plan_groups(load_targets(str(ids), console), {}, None, console)
    for job in jobs:
        kept = apply_shard(dict(groups), job["shard"], console)
        assert sorted(pair_label(p.account, p.region) for p in kept) == job["pairs"]
        assert sum(map(len, kept.values())) == job["instances"]


def test_shards_command_leaves_empty_shards_out_and_says_so(tmp_path: Path) -> None:
    ids = _csv(tmp_path / "ids.csv", _weights(6, pairs=30))
    code, out, err = swarm("shards", "--ids", str(ids), "--n", "64")
    assert code == 0, err
    assert len(json.loads(out)["include"]) == 30
    assert "34 shard(s) would be empty" in err and "--n 30" in err


def test_shards_command_goes_past_256_with_a_warning(tmp_path: Path) -> None:
    weights = {(f"{a:012d}", r): 1 for a in range(100) for r in REGIONS[:4]}
    ids = _csv(tmp_path / "ids.csv", weights)
    code, out, err = swarm("shards", "--ids", str(ids), "--n", "300")
    assert code == 0, err
    assert len(json.loads(out)["include"]) == 300
    assert "at most 256" in err and "k8s-indexed-job.yaml" in err
