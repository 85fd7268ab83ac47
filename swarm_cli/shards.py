"""Splitting work across machines by (account, region), never inside one pair.

EC2 throttles per account and region, so a pair's instances all go to one
shard: a bucket split over two machines is still one bucket, and two windows
draining it would each see the other's throttles as their own.

The shard of a pair is a hash of its name (sha256, not Python's ``hash``,
which changes from one process to the next), so every machine of a CI matrix
computes the same split from the same input without talking to the others.
Fill in the default account before sharding (``targets.group`` with the
account the credentials are for): a pair named once with its account and once
without would otherwise hash to two shards.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from typing import Any

# GitHub Actions runs at most 256 jobs from one matrix.
MAX_MATRIX_JOBS = 256
_SPEC = re.compile(r"(\d+)\s*/\s*(\d+)", re.ASCII)


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


def shard_of(account: str | None, region: str, n: int) -> int:
    """The shard (1 to n) of an (account, region) pair; the same on every machine."""
    if n < 1:
        raise ShardError(f"{n} shards: need at least 1")
    digest = hashlib.sha256(f"{account or ''}/{region}".encode()).digest()
    return int.from_bytes(digest[:8], "big") % n + 1


def in_shard(account: str | None, region: str, k: int, n: int) -> bool:
    return shard_of(account, region, n) == k


def pair_label(account: str | None, region: str) -> str:
    """``account/region``, or the region alone for the run's default account."""
    return f"{account}/{region}" if account else region


def matrix(pairs: Iterable[tuple[str | None, str]], n: int) -> dict[str, Any]:
    """A GitHub Actions ``strategy.matrix`` (through ``fromJSON``) of n shards.

    Every shard 1..n is listed, even one with no pairs, so the matrix keeps its
    shape as the input changes; a job whose shard is empty has nothing to do.
    Each shard's pairs are sorted so that the JSON is the same for any input
    order. GitHub runs at most 256 jobs from one matrix, so n is capped there.
    """
    if n > MAX_MATRIX_JOBS:
        raise ShardError(f"{n} shards: a GitHub Actions matrix runs at most {MAX_MATRIX_JOBS} jobs")
    if n < 1:
        raise ShardError(f"{n} shards: need at least 1")
    shards: list[set[str]] = [set() for _ in range(n)]
    for account, region in pairs:
        shards[shard_of(account, region, n) - 1].add(pair_label(account, region))
    return {
        "include": [
            {"shard": f"{k}/{n}", "pairs": sorted(labels)}
            for k, labels in enumerate(shards, start=1)
        ]
    }
