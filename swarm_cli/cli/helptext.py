"""What ``--help`` shows around the commands: a summary that is never cut, an example at
the end of each command's help, and arguments named as a person reads them.

One table for every command (its one-line summary in listings, and its example), applied
to the Typer apps once their commands are registered (``apply``).
"""

from __future__ import annotations

from typing import Any

import typer
from typer.core import TyperCommand

from . import quick_params

try:  # Typer carries its own click from 0.2x on; before, it used click itself
    from typer import _click as click
except ImportError:  # pragma: no cover
    import click  # type: ignore[no-redef]

# command path -> (summary in command listings, at most 60 characters; an example)
HELP: dict[str, tuple[str, str]] = {
    "": (
        "Bulk EC2 mutations, paced under the API's rate limits.",
        "swarm demo",
    ),
    "version": (
        "Print the versions of swarm, boto3, botocore and Python.",
        "swarm version",
    ),
    "terminate": (
        "Terminate EC2 instances, paced under the rate limit.",
        "swarm terminate --ids ids.txt --region eu-west-1 --max-count 500",
    ),
    "stop": (
        "Stop EC2 instances (--force, --hibernate).",
        "swarm stop --filter tag:env=ci --older-than 2h --yes",
    ),
    "start": (
        "Start stopped EC2 instances.",
        "swarm start --ids ids.csv --accounts accounts.yml --wait",
    ),
    "reboot": (
        "Reboot running EC2 instances.",
        "swarm reboot --ids ids.txt --region us-east-1 --yes",
    ),
    "plan": (
        "Predict what an action would do; change nothing.",
        "swarm plan terminate --ids ids.txt --plan-out acting.txt",
    ),
    "plan terminate": (
        "Predict what terminate would do; change nothing.",
        "swarm plan terminate --ids ids.txt --plan-out acting.txt",
    ),
    "plan stop": (
        "Predict what stop would do; change nothing.",
        "swarm plan stop --filter tag:env=ci",
    ),
    "plan start": (
        "Predict what start would do; change nothing.",
        "swarm plan start --ids ids.csv --accounts accounts.yml",
    ),
    "plan reboot": (
        "Predict what reboot would do; change nothing.",
        "swarm plan reboot --ids ids.txt --output json",
    ),
    "rollback": (
        "Undo a stop or start run from its ledger.",
        "swarm rollback swarm-ledger.jsonl --yes",
    ),
    "list": (
        "Print the instances, snapshots, volumes… that filters select.",
        "swarm list --filter tag:env=ci | swarm stop --ids - --yes",
    ),
    "demo": (
        "Watch swarm run against a local fake EC2.",
        "swarm demo --regions 3",
    ),
    "sandbox": (
        "Serve a fake EC2 on 127.0.0.1 until Ctrl-C.",
        "swarm sandbox --count 200 --ids-out ids.txt --env-out sandbox.env",
    ),
    "shards": (
        "Split the account/region pairs into N balanced shards.",
        "swarm shards --ids ids.csv --accounts accounts.yml --n 8",
    ),
    "ledger": (
        "Read and merge ledgers: what failed, what is done.",
        "swarm ledger failed swarm-ledger.jsonl",
    ),
    "ledger failed": (
        "Print the IDs worth retrying: failed or pending.",
        "swarm ledger failed --retryable --action terminate swarm-ledger.jsonl >left.txt "
        "&& swarm terminate --ids left.txt --resume --yes",
    ),
    "ledger summary": (
        "Count the intents by state, ledgers merged.",
        "swarm ledger summary ledger-*.jsonl",
    ),
    "ledger merge": (
        "Merge ledgers (one per shard, say) into one.",
        "swarm ledger merge ledger-*.jsonl -o ledger.jsonl",
    ),
}


def epilog(example: str) -> str:
    # \b: click keeps the paragraph as written (no rewrapping of the command).
    return f"\b\nExample:\n  {example}"


def _argument_name(param: click.Parameter) -> str:
    """``LEDGER...``, ``[LEDGER]``: the metavar, never Typer's braces or Python types."""
    name = (param.metavar or (param.name or "").upper()).removesuffix("...")
    if param.nargs != 1:
        name += "..."
    return name if param.required else f"[{name}]"


class SwarmCommand(TyperCommand):
    """Typer's command, with arguments shown by name in usage lines and in the help, and
    its values checked without pydantic where Typer's result is had directly (see
    ``quick_params``)."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        quick_params.install_for(self, ctx)
        return super().parse_args(ctx, args)

    def collect_usage_pieces(self, ctx: click.Context) -> list[str]:
        pieces = [self.options_metavar] if self.options_metavar else []
        pieces += [
            _argument_name(p) for p in self.get_params(ctx) if p.param_type_name == "argument"
        ]
        return pieces

    def format_options(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        arguments, options = [], []
        for param in self.get_params(ctx):
            record = param.get_help_record(ctx)
            if param.param_type_name == "argument":
                arguments.append((_argument_name(param), getattr(param, "help", None) or ""))
            elif record is not None:
                options.append(record)
        if arguments:
            with formatter.section("Arguments"):
                formatter.write_dl(arguments)
        if options:
            with formatter.section("Options"):
                formatter.write_dl(options)


def _name(info: Any) -> str:
    if info.name:
        return str(info.name)
    return str(info.callback.__name__).removesuffix("_cmd").replace("_", "-")


def apply(app: typer.Typer, path: str = "") -> None:
    """Give every command of ``app`` (and its groups) its summary, example and class."""
    for command in app.registered_commands:
        key = f"{path} {_name(command)}".strip()
        summary, example = HELP[key]
        command.short_help = summary
        command.epilog = epilog(example)
        if command.cls in (None, TyperCommand):
            command.cls = SwarmCommand
    for group in app.registered_groups:
        key = f"{path} {group.name}".strip()
        summary, example = HELP[key]
        group.short_help = summary
        group.epilog = epilog(example)
        assert group.typer_instance is not None
        apply(group.typer_instance, key)
    if not path:
        app.info.epilog = epilog(HELP[""][1])
