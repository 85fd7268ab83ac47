"""What every command shares: the Typer app, the consoles, the version, and how a run ends
(its summary, and the exit code the command returns)."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from .. import __version__
from ..display import render_summary
from ..errors import Interrupted, UsageError
from ..report import Report
from .exits import SwarmConsole, SwarmGroup, emit_json, exit_meaning
from .options import Output

app = typer.Typer(
    name="swarm",
    cls=SwarmGroup,
    help="Bulk cloud mutations as fast as the API allows, without losing an intent.\n\n"
    "Start with swarm demo: it runs against a local fake EC2, no AWS account needed.",
    no_args_is_help=True,
    add_completion=True,
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"]},
)
ledger_app = typer.Typer(
    help="Read and merge ledgers: what failed, what is done.", no_args_is_help=True
)
app.add_typer(ledger_app, name="ledger")


def consoles() -> tuple[Console, Console]:
    # Soft wrap: long IDs and paths stay whole in logs and when piped.
    return (
        SwarmConsole(soft_wrap=True, highlight=False),
        SwarmConsole(stderr=True, soft_wrap=True, highlight=False),
    )


def version_text() -> str:
    import platform

    return (
        f"swarm {__version__} (boto3 {_version_of('boto3')}, botocore {_version_of('botocore')}, "
        f"Python {platform.python_version()})"
    )


def _version_of(name: str) -> str:
    """An installed package's version, from its metadata: importing boto3 to ask it would
    double the time --version takes."""
    from importlib import import_module, metadata

    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:  # not installed as a distribution: ask the module
        return str(import_module(name).__version__)


def _version(ctx: typer.Context, value: bool) -> None:
    if value:
        typer.echo(version_text())
        ctx.exit()  # click's way for an eager option: the command ends here, with 0


@app.command("version")
def version_cmd() -> None:
    """Print swarm's version and the boto3, botocore and Python it runs on."""
    typer.echo(version_text())


@app.callback()
def main_options(
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_version, is_eager=True, help="Print the version and exit."
        ),
    ] = False,
) -> None:
    """Bulk cloud mutations as fast as the API allows."""


def require_sandbox() -> None:
    """A command that runs against the sandbox alone: its extra is installed, and no AWS
    profile is read (one AWS_PROFILE names that does not exist would fail moto's own
    sessions; the sandbox has its keys)."""
    from ..sandbox import missing_extra

    problem = missing_extra()
    if problem:
        raise UsageError(problem)
    for name in ("AWS_PROFILE", "AWS_DEFAULT_PROFILE"):
        os.environ.pop(name, None)


def finish(
    report: Report, output: Output, out: Console, err: Console, *, quiet: bool = False
) -> int:
    """Print the run's summary (and its JSON object); the exit code the command returns."""
    speak = not quiet or report.exit_code != 0
    if output is Output.json:
        if speak:
            render_summary(report, err)
        emit_json({**report.to_dict(), "meaning": exit_meaning(report.exit_code)})
    elif speak:
        render_summary(report, out)
    return report.exit_code


@contextlib.contextmanager
def interruptible() -> Iterator[None]:
    """Ctrl-C while a sandbox is being set up: stop cleanly with 130, no traceback."""
    try:
        yield
    except KeyboardInterrupt:
        raise Interrupted("interrupted", plain=True) from None


def write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)
