"""``swarm shards``: the GitHub Actions matrix that splits a job by account/region pair."""

from __future__ import annotations

import json
from typing import Annotated

import typer

from ..run import EXIT_USAGE
from ..shards import ShardError, matrix
from .act import (
    load_account_map,
    load_targets,
    plan_groups,
    session_region,
    warn_unknown_regions,
)
from .common import AccountsOpt, RegionOpt, app, consoles, fail


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

    Every job of the matrix runs the same command with --shard K/N and keeps only its
    own account/region pairs, so one pair's bucket is never shared by two machines. A
    matrix runs at most 256 jobs; past that, split the accounts file, or drive the
    shards from a workflow engine with no such ceiling (e.g. Step Functions' Distributed
    Map running one swarm task per pair).
    """
    _, err = consoles()
    if not accounts and not ids:
        fail(err, "pass --accounts FILE or --ids FILE: the pairs come from one of them", EXIT_USAGE)
    account_map = load_account_map(accounts, None, err)
    default_region = region or session_region(None, err)
    pairs: set[tuple[str | None, str]] = set()
    if ids:
        targets = load_targets(ids, err)
        pairs |= {
            (p.account, p.region) for p in plan_groups(targets, account_map, default_region, err)
        }
    else:
        for account in account_map.values():
            regions = account.regions or ((default_region,) if default_region else ())
            if not regions:
                fail(err, f"account {account.id} lists no regions: pass --region", EXIT_USAGE)
            pairs |= {(account.id, r) for r in regions}
    warn_unknown_regions({region for _, region in pairs}, err)
    try:
        typer.echo(json.dumps(matrix(sorted(pairs, key=str), n), separators=(",", ":")))
    except ShardError as exc:
        fail(err, str(exc), EXIT_USAGE)
