"""``swarm ec2 OPERATION``: one command per entry of the operation registry
(:mod:`swarm_cli.actions.operations`), each built by :func:`act.register` as the instance
actions are, so that every run goes through the same runner, engine, controller, ledger
and plan."""

from __future__ import annotations

import typer

from ..actions.operations import OPERATIONS, RESOURCE_OPERATIONS
from ..text import plural
from .act import plan_app, register
from .common import app
from .helptext import HELP

ec2_app = typer.Typer(
    help="Run any ID-keyed EC2 operation (its AWS CLI name) on a list of IDs, as fast as "
    "the account's limit for it allows, with the ledger, --resume and --dry-run.",
    no_args_is_help=True,
)
app.add_typer(ec2_app, name="ec2")
HELP["ec2"] = (
    "Any ID-keyed EC2 operation: delete-snapshot, create-tags and more.",
    "swarm ec2 delete-snapshot --ids snapshots.txt --dry-run",
)


def _tag_example(name: str) -> str:
    """The --tag of a tag operation's example: delete-tags by its key alone (any value)."""
    return " --tag team" if name == "delete-tags" else " --tag team=data"


for _op in OPERATIONS.values():
    register(_op.outline, _op.summary, into=ec2_app, name=_op.name, operation=_op)
    _tag = _tag_example(_op.name) if _op.tags else ""
    HELP[f"ec2 {_op.name}"] = (
        _op.summary,
        f"swarm ec2 {_op.name} --ids {plural(_op.resource)}.txt{_tag} --yes",
    )
for _op in RESOURCE_OPERATIONS.values():
    register(
        _op.outline,
        f"Predict what swarm ec2 {_op.name} would do to each {_op.resource}; change nothing.",
        into=plan_app,
        plan=True,
        name=_op.name,
        operation=_op,
    )
    HELP[f"plan {_op.name}"] = (
        f"Predict ec2 {_op.name}; change nothing.",
        f"swarm plan {_op.name} --ids {plural(_op.resource)}.txt"
        + (_tag_example(_op.name) if _op.tags else ""),
    )
