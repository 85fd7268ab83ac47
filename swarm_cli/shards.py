"""Splitting work across machines by (account, region), never inside one pair.

EC2 throttles per account and region, so a pair's instances all go to one
shard: a bucket split over two machines is still one bucket, and two windows
draining it would each see the other's throttles as their own.

Shards are balanced by instance count: the pairs, largest first, each go to the
shard holding the fewest instances so far (then the fewest pairs, then the
lowest K). This depends only on the pairs and their counts, never on the order
of the input or on the machine, so every job of a matrix computes the same
split from the same ID list without talking to the others, and ``swarm
shards`` prints exactly what each ``--shard K/N`` keeps. Without counts (a
selection by filters, or an accounts file alone) every pair weighs one.
Fill in the default account before sharding (``plan_groups``): a pair named
once with its account and once without would otherwise be two pairs.
"""

from __future__ import annotations

import heapq
import re
from collections.abc import Mapping
from typing import Any

# GitHub Actions runs at most 256 jobs from one matrix; swarm itself has no such limit.
MAX_MATRIX_JOBS = 256
_SPEC = re.compile(r"(\d+)\s*/\s*(\d+)", re.ASCII)

PairKey = tuple[str | None, str]


class ShardError(ValueError):
    """A shard spec that cannot be used."""


def parse_shard(spec: str) -> tuple[int, int]:
    """``"K/N"`` -> ``(K, N)``: shard K (counting from 1) of N."""
    text = spec.strip()
    found = _SPEC.fullmatch(text)
    if found is None:
        raise ShardError(f"shard {spec!r}: expected K/N, such as 2/3 (shard 2 of 3)")
    k, n = int(found[1]), int(found[2])
    if n < 1:
        raise ShardError(f"shard {text}: N must be at least 1")
    if k < 1:
        raise ShardError(f"shard {text}: shards count from 1 (1/{n} to {n}/{n})")
    if k > n:
        raise ShardError(f"shard {text}: there are only {n} shards (1/{n} to {n}/{n})")
    return k, n


def pair_label(account: str | None, region: str) -> str:
    """``account/region``, or the region alone for the run's default account."""
    return f"{account}/{region}" if account else region


def assign(weights: Mapping[PairKey, int], n: int) -> dict[PairKey, int]:
    """The shard (1 to n) of each pair: largest pair first onto the lightest shard.

    ``weights`` is each pair's instance count (1 each when counts are unknown).
    Deterministic: ties go by the pair's label, then to the lowest shard.
    """
    if n < 1:
        raise ShardError(f"{n} shards: need at least 1")
    # (instances, pairs, K): the lightest shard is always on top of the heap. With more
    # shards than pairs, pair i goes to shard i whatever n is: no heap of n entries.
    heap = [(0, 0, k) for k in range(1, min(n, len(weights)) + 1)]
    shard: dict[PairKey, int] = {}
    for pair, weight in sorted(weights.items(), key=lambda i: (-i[1], pair_label(*i[0]))):
        load, count, k = heapq.heappop(heap)
        shard[pair] = k
        heapq.heappush(heap, (load + max(weight, 0), count + 1, k))
    return shard


def keep_shard(weights: Mapping[PairKey, int], k: int, n: int) -> set[PairKey]:
    """The pairs ``--shard K/N`` keeps."""
    return {pair for pair, owner in assign(weights, n).items() if owner == k}


def matrix(weights: Mapping[PairKey, int], n: int, *, counted: bool = True) -> dict[str, Any]:
    """A GitHub Actions ``strategy.matrix`` (through ``fromJSON``) of the non-empty shards.

    Each job: ``shard`` (``K/N``, for ``--shard``), its ``pairs`` (sorted) and,
    when ``weights`` are instance counts (``counted``), their ``instances``. A
    shard that holds no pair (n larger than the pairs)
    is left out, so no job starts with nothing to do: ``empty_shards`` counts
    them. The JSON is the same for any input order.
    """
    owners = assign(weights, n)
    labels: dict[int, list[str]] = {}
    instances: dict[int, int] = {}
    for pair, k in owners.items():
        labels.setdefault(k, []).append(pair_label(*pair))
        instances[k] = instances.get(k, 0) + weights[pair]
    return {
        "include": [
            {"shard": f"{k}/{n}", "pairs": sorted(labels[k])}
            | ({"instances": instances[k]} if counted else {})
            for k in sorted(labels)
        ]
    }


def empty_shards(pairs: int, n: int) -> int:
    """How many of n shards hold no pair."""
    return max(n - pairs, 0)
