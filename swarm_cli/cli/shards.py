"""``swarm shards``: the GitHub Actions matrix that splits a job by account/region pair."""

from __future__ import annotations

import json
from typing import Annotated

import typer

from ..errors import UsageError
from ..shards import MAX_MATRIX_JOBS, PairKey, ShardError, empty_shards, matrix
from .common import app, consoles
from .options import AccountsOpt, RegionOpt
from .pairs import load_targets, plan_groups, warn_unknown_regions
from .reach import default_region as checked_region
from .reach import load_account_map


@app.command()
def shards(
    n: Annotated[
        int, typer.Option("--n", metavar="N", min=1, help="How many shards (matrix jobs).")
    ],
    accounts: AccountsOpt = None,
    ids: Annotated[
        str | None,
        typer.Option(
            "--ids", metavar="FILE", help="ID list (with region/account columns): its pairs."
        ),
    ] = None,
    region: RegionOpt = None,
) -> None:
    """Print the matrix for strategy.matrix (fromJSON): which pairs each shard K/N runs.

    Shards are balanced by instance count (with --ids; by pairs with --accounts alone):
    the largest pair first, each onto the shard holding the fewest instances so far.
    Every job runs the same command, on the same ID list, with --shard K/N, and keeps
    exactly the pairs listed here for K, so one pair's bucket is never shared by two
    machines. Shards that would hold no pair (N larger than the pairs) are left out of
    the matrix, with a note on stderr. A GitHub matrix runs at most 256 jobs; swarm has
    no such limit (examples/k8s-indexed-job.yaml runs thousands of shards).

    Exit codes: 0 the matrix printed · 2 bad usage or input · 74 the output could not be written.
    """
    _, err = consoles()
    if not accounts and not ids:
        raise UsageError("pass --accounts FILE or --ids FILE: the pairs come from one of them")
    account_map = load_account_map(accounts, None)
    default_region = checked_region(region, None)
    weights: dict[PairKey, int] = {}
    if ids:
        targets = load_targets(ids, err)
        groups = plan_groups(targets, account_map, default_region, err)
        weights = {(p.account, p.region): len(v) for p, v in groups.items()}
    else:
        for account in account_map.values():
            regions = account.regions or ((default_region,) if default_region else ())
            if not regions:
                raise UsageError(f"account {account.id} lists no regions: pass --region")
            weights.update({(account.id, r): 1 for r in regions})
        warn_unknown_regions({region for _, region in weights}, err)
    if not weights:
        raise UsageError("no account/region pair to split: the list is empty")
    try:
        # Without --ids, every pair weighs 1: a count of pairs, not of instances.
        result = matrix(weights, n, counted=ids is not None)
    except ShardError as exc:
        raise UsageError(str(exc)) from exc
    empty = empty_shards(len(weights), n)
    if empty:
        err.print(
            f"note: {n} shards but {len(weights)} account/region pair(s): {empty} shard(s) "
            f"would be empty and are left out of the matrix (a pair is never split; "
            f"--n {len(weights)} gives one pair per shard)",
            markup=False,
        )
    jobs = len(result["include"])
    if jobs > MAX_MATRIX_JOBS:
        err.print(
            f"warning: {jobs} jobs; a GitHub Actions matrix runs at most {MAX_MATRIX_JOBS}: "
            "split the work over several workflows, or run the shards elsewhere "
            "(examples/k8s-indexed-job.yaml: a Kubernetes Indexed Job)",
            markup=False,
        )
    typer.echo(json.dumps(result, separators=(",", ":")))
