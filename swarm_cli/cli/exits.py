"""How a command ends: the one place errors become a message on stderr and an exit code.

Commands return their exit code (0 when they return nothing) or raise a
:class:`~swarm_cli.errors.SwarmError` kind; :class:`SwarmGroup`, the top command, maps
both, as pip's ``base_command`` does. The ledger's own errors, which reach a command
from below, are mapped here too. With ``--output json``, stdout holds one
object whatever happens.
"""

from __future__ import annotations

import contextlib
import errno
import io
import json
import os
import select
import sys
from collections.abc import Mapping, Sequence
from typing import Any

import typer
from rich.console import Console
from rich.text import Text
from typer.core import TyperGroup
from typer.exceptions import TyperException

from ..errors import (
    EXIT_CREDENTIALS,
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_LEDGER,
    EXIT_SIGNALLED,
    EXIT_USAGE,
    SwarmError,
    error_for,
)
from ..files import NO_ROOM
from ..ledger import LedgerError, LedgerInUse, LedgerWriteError
from ..text import literal
from . import quick_params

EXIT_MEANINGS = {
    0: "all done",
    1: "some intents failed, are missing or are pending (the ledger names them)",
    2: "bad usage or input; nothing was sent",
    3: "refused by a rail or at the confirmation",
    4: "credentials or permission",
    74: "the ledger (or an output) could not be written",
    130: "interrupted (SIGINT)",
}


def exit_meaning(code: int) -> str:
    """What an exit code says, in words (the README's table)."""
    if code in EXIT_MEANINGS:
        return EXIT_MEANINGS[code]
    if code > EXIT_SIGNALLED:
        import signal

        try:
            return f"stopped by {signal.Signals(code - EXIT_SIGNALLED).name}"
        except ValueError:
            pass
    return "unexpected"


class _JsonOutput:
    """With --output json: whether the one object has been written, and the first error."""

    def __init__(self) -> None:
        self.written = False
        self.error: str | None = None


_json = _JsonOutput()


class _Output:
    """Whether standard output's reader closed it (``| head``): the rest of what the
    command prints goes nowhere, and it ends saying so."""

    closed = False


def stdout_closed() -> None:
    """Standard output's reader is gone: what is still printed goes to /dev/null (a write
    to the pipe would fail again, and the interpreter's last flush with it)."""
    _Output.closed = True
    _to_devnull(sys.stdout)


def _to_devnull(stream: Any) -> None:
    """Point a standard stream's file at /dev/null: what it holds back and what comes
    after go nowhere, and its last flush (the interpreter's, at exit) succeeds."""
    with contextlib.suppress(OSError, ValueError, AttributeError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, stream.fileno())
        os.close(devnull)


def _flush_standard_streams() -> OSError | None:
    """Flush what standard output and error hold back before the exit code is settled: a
    closed one failed the interpreter's own last flush (exit 120, a traceback). Returns
    standard output's error other than its closing (a full disk), to be said."""
    failed = None
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except OSError as exc:
            if stream is sys.stdout and exc.errno in (errno.EPIPE, errno.EIO):
                stdout_closed()
            else:
                if stream is sys.stdout:
                    failed = exc
                _to_devnull(stream)
    return failed


def _standard_streams() -> None:
    """Standard output and error as swarm writes them. One closed at launch (``>&-``)
    is /dev/null, standard output's loss said at the end (a run's JSON object crashed on
    it). An unbuffered standard output (``python -u``, PYTHONUNBUFFERED, as container
    images set) is given a buffer: a text stream straight over the file takes a short
    write for a whole one, and output cut by a closed pipe was lost without a word, exit
    0. (Standard error stays as it is: what a closed one held back would fail the
    interpreter's last flush.)"""
    for name in ("stdout", "stderr"):
        stream = getattr(sys, name)
        if stream is None:
            setattr(sys, name, open(os.devnull, "w", encoding="utf-8"))  # noqa: SIM115
            if name == "stdout":
                _Output.closed = True
            continue
        raw = getattr(stream, "buffer", None)
        if name == "stdout" and isinstance(raw, io.FileIO):
            wrapped = io.TextIOWrapper(
                io.BufferedWriter(raw),
                encoding=stream.encoding,
                errors=stream.errors,
                line_buffering=True,  # as unbuffered as a person reading it needs
            )
            setattr(sys, name, wrapped)


def _reader_gone(exc: SystemExit) -> bool:
    """Whether ``exc`` is click's exit after a write to a pipe whose reader is gone, and
    that pipe is standard output (with standard error closed, standard output stands)."""
    cause = exc.__context__
    if not (isinstance(cause, OSError) and cause.errno == errno.EPIPE):
        return False
    try:
        poll = select.poll()
        poll.register(sys.__stdout__.fileno() if sys.__stdout__ else 1, select.POLLOUT)
        return any(events & (select.POLLERR | select.POLLHUP) for _, events in poll.poll(0))
    except (OSError, ValueError, AttributeError):
        return False


OUTPUT_CLOSED = (
    "could not write the output: standard output is closed (a pipe whose reader is gone, a "
    "terminal that hung up, or >&-); what was printed is cut short (what a run did is in "
    "its ledger all the same)"
)


class SwarmConsole(Console):
    """A rich console whose closed pipe ends nothing. rich's own answer to one points
    standard output at /dev/null, whichever stream it was, and raises SystemExit in the
    thread that printed (a view's, mid-run): a log pipe that died on standard error then
    lost the run's JSON on standard output, and the command still exited 0. Here a closed
    standard error only silences this console; a closed standard output is
    :func:`stdout_closed`."""

    def on_broken_pipe(self) -> None:
        self.quiet = True
        if getattr(self, "_file", None) is not None:
            return
        if self.stderr:
            _to_devnull(sys.stderr)  # what it held back would fail the last flush
        else:
            stdout_closed()

    def _check_buffer(self) -> None:
        # A terminal that hung up (its window closed) fails every write with EIO: the live
        # view's last frame then broke off the run before its summary and its ledger's
        # last records, and the command ended 1, not as stopped by SIGHUP.
        try:
            super()._check_buffer()
        except OSError as exc:
            if exc.errno != errno.EIO:
                raise
            del self._buffer[:]
            self.on_broken_pipe()


def _wants_json(argv: Sequence[str]) -> bool:
    for k, arg in enumerate(argv):
        if arg in ("--output=json", "-ojson"):
            return True
        if arg in ("--output", "-o") and k + 1 < len(argv) and argv[k + 1] == "json":
            return True
    return False


def emit_json(data: Mapping[str, Any]) -> None:
    """The one object --output json prints on stdout."""
    _json.written = True
    try:
        sys.stdout.write(json.dumps(data, indent=2, default=str) + "\n")
        sys.stdout.flush()
    except BrokenPipeError:
        stdout_closed()


def error(err: Console, message: str) -> None:
    """One error line; the message is text, never markup (it may hold paths, IDs, [extras]),
    its control characters made visible (see ``swarm_cli.text``)."""
    if _json.error is None:
        _json.error = message
    err.print(Text.assemble(("error:", "bold red"), " ", literal(message)))


def warn(err: Console, message: str) -> None:
    err.print(Text.assemble(("warning:", "yellow"), " ", literal(message)))


def as_swarm_error(exc: BaseException) -> SwarmError | None:
    """``exc`` as the kind of error it is, or None when it is none of swarm's."""
    if isinstance(exc, SwarmError):
        return exc
    if isinstance(exc, LedgerWriteError):
        return error_for(EXIT_LEDGER, str(exc))
    if isinstance(exc, LedgerInUse):  # another run writes it: nothing was sent or changed
        return error_for(EXIT_LEDGER, f"{exc}; nothing was done")
    if isinstance(exc, LedgerError):  # a ledger that cannot be opened, read or created
        return error_for(EXIT_USAGE, str(exc))
    if type(exc).__name__ == "ProfileNotFound" and "botocore" in type(exc).__module__:
        # AWS_PROFILE naming no profile, met wherever a session is first made.
        from ..ec2 import CREDENTIAL_HINTS

        return error_for(EXIT_CREDENTIALS, f"{exc}: {CREDENTIAL_HINTS['ProfileNotFound']}")
    from ..ec2 import unreadable_credentials, unreadable_credentials_text

    if unreadable_credentials(exc):
        return error_for(EXIT_CREDENTIALS, unreadable_credentials_text(exc))
    if isinstance(exc, BrokenPipeError):  # a write of its own to standard output (JSON)
        stdout_closed()
        return error_for(EXIT_LEDGER, OUTPUT_CLOSED)
    if isinstance(exc, OSError) and exc.errno in NO_ROOM:
        # Standard output on a full disk (or a device that takes nothing): what the command
        # did is done, only not all said; a run's ledger holds it all.
        return error_for(
            EXIT_LEDGER,
            f"could not write the output: {exc.strerror or exc}; what was printed is cut "
            "short (what a run did is in its ledger all the same)",
        )
    return None


def report(exc: SwarmError) -> int:
    """Say why the command stopped, on stderr; the exit code it ends with."""
    err = SwarmConsole(stderr=True, soft_wrap=True, highlight=False)
    if exc.plain:
        err.print(exc.message, markup=False)
        if _json.error is None:  # the object says what stderr said
            _json.error = exc.message
    else:
        error(err, exc.message)
    for line in exc.details:
        err.print(line, markup=False)
    if exc.details and _json.error == exc.message:
        # The object says all stderr said: the bad lines too, not only the heading.
        _json.error = "\n".join([exc.message, *(line.strip() for line in exc.details)])
    return exc.exit_code


IDS_HINT = (
    "IDs are not arguments: pass them in a file (--ids FILE, one per line) or on standard "
    "input (--ids -), e.g. swarm list snapshots --unused | swarm ec2 delete-snapshot --ids -"
)


def _help_of(exc: Exception) -> str:
    """The options of the command a usage error is about ("" if unknown)."""
    ctx = getattr(exc, "ctx", None)
    command = getattr(ctx, "command", None)
    params = getattr(command, "params", None) or ()
    return " ".join(opt for p in params for opt in getattr(p, "opts", ()))


def _command_first_hint(exc: Exception) -> str | None:
    """An option given to a group of commands (``swarm plan --ids``): name a command first."""
    ctx = getattr(exc, "ctx", None)
    commands = getattr(getattr(ctx, "command", None), "commands", None)
    option = getattr(exc, "option_name", None)
    if ctx is None or ctx.parent is None or not commands or not option:
        return None
    # Only where one of its commands takes that option, named in their own order.
    names = [
        name
        for name, command in commands.items()
        if any(option in getattr(p, "opts", ()) for p in command.params)
    ]
    if not names:
        return None
    shown = ", ".join(names[:6]) + (", …" if len(names) > 6 else "")
    return (
        f"hint: {ctx.command_path} takes a command first, then its options: "
        f"{ctx.command_path} {names[0]} {option} … (those that take {option}: {shown})"
    )


class SwarmGroup(TyperGroup):
    """The top command: every command's end, mapped to an exit code here and only here.

    With --output json, refusals, usage errors and failures that end before a
    command prints its own object print ``{"exit_code", "meaning", "error"}``
    instead of nothing.

    Its values, like its commands', are checked without pydantic where Typer's result
    is had directly (``quick_params``).
    """

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        quick_params.install_for(self, ctx)
        return super().parse_args(ctx, args)

    def main(self, *args: Any, **kwargs: Any) -> Any:
        if not kwargs.get("standalone_mode", True):  # a caller that maps the end itself
            return super().main(*args, **kwargs)
        argv = kwargs.get("args", args[0] if args else None)
        argv = list(sys.argv[1:] if argv is None else argv)
        wants_json = _wants_json(argv)
        global _json
        _json = _JsonOutput()
        _Output.closed = False
        _standard_streams()
        kwargs["standalone_mode"] = False
        summary = _summary_size()
        twice = _given_twice(argv, self)
        if twice is not None:
            typer.echo(f"error: {twice}", err=True)
            _json.error, code = twice, EXIT_USAGE
        else:
            code = self._run(wants_json, *args, **kwargs)
        if wants_json and not _json.written:
            # 1 here is a command that ended on an error before any run: no intent failed.
            meaning = "failed: see error" if code == EXIT_FAILED else exit_meaning(code)
            try:
                emit_json({"exit_code": code, "meaning": meaning, "error": _json.error})
            except OSError as exc:
                full = as_swarm_error(exc)
                if full is None:
                    raise
                said = report(full)
                # The command's own end stands where it had one (a rail's refusal, say).
                code = said if code == 0 else code
        failed = _flush_standard_streams()
        full = as_swarm_error(failed) if failed is not None else None
        if full is not None or _Output.closed:
            said = report(full or error_for(EXIT_LEDGER, OUTPUT_CLOSED))
            code = code or said  # a run's own end (failures, a signal) says more
        if code != 0 and summary is not None and _summary_size() == summary:
            _summarize_early_end(argv, code)
        sys.exit(code)

    def _run(self, wants_json: bool, *args: Any, **kwargs: Any) -> int:
        try:
            returned = super().main(*args, **kwargs)
        except typer.Abort:
            if wants_json:
                return EXIT_INTERRUPTED
            typer.echo("Aborted!", err=True)
            return 1
        except TyperException as exc:  # click's usage errors, as typer carries them
            getattr(exc, "show", lambda: None)()
            format_message = getattr(exc, "format_message", None)
            message = str(format_message() if format_message else exc)
            if "unexpected extra argument" in message and "--ids" in _help_of(exc):
                typer.echo(IDS_HINT, err=True)
            hint = _command_first_hint(exc)
            if hint:
                typer.echo(hint, err=True)
            _json.error = _json.error or message
            return int(getattr(exc, "exit_code", 1))
        except SystemExit as exc:
            if _reader_gone(exc):
                # click's own answer to a write to a closed pipe (exit 1, nothing said).
                stdout_closed()
                return 0
            return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        except Exception as exc:
            known = as_swarm_error(exc)
            if known is not None:
                return report(known)
            if not wants_json:
                raise
            import traceback  # a bug: still one object, and the traceback on stderr

            traceback.print_exc()
            _json.error = f"{type(exc).__name__}: {exc}"
            return 1
        return returned if isinstance(returned, int) else 0


# The commands that act, and write a run's summary on a GitHub job's page.
_ACTING = frozenset({"terminate", "stop", "start", "reboot", "rollback", "ec2"})


def _summary_size() -> int | None:
    """The size of the file GITHUB_STEP_SUMMARY names (0 if there is none yet); None
    outside a GitHub Actions job."""
    path = os.environ.get("GITHUB_STEP_SUMMARY")
    if not path:
        return None
    try:
        return os.stat(path).st_size
    except OSError:
        return 0


def _summarize_early_end(argv: Sequence[str], code: int) -> None:
    """In a GitHub Actions job, a command that acts and ended without a run's summary
    (refused, bad usage) says why on the job's page too, not only in the log."""
    words = [a for a in argv if not a.startswith("-")]
    if not words or words[0] not in _ACTING:
        return
    if "--dry-run" in argv and code == EXIT_FAILED:  # a plan's exit 1 is a prediction
        return
    from ..summary_md import append_ended_early

    command = " ".join(words[:2]) if words[0] == "ec2" and len(words) > 1 else words[0]
    meaning = "failed: see error" if code == EXIT_FAILED else exit_meaning(code)
    why: list[str] = []
    path = os.environ.get("GITHUB_STEP_SUMMARY")
    if append_ended_early(command, code, meaning, _json.error, why=why) is None and why:
        err = SwarmConsole(stderr=True, soft_wrap=True, highlight=False)
        warn(err, f"could not append the summary to {path}: {why[0]}")


# Options of one value whose repeat would drop what the first named: click keeps the last.
# (Where to act, as whom, and the rails' limits: a second would act elsewhere, or unguarded.)
_ONCE = (
    "--ids",
    "--exclude-ids",
    "--ledger",
    "--region",
    "--endpoint-url",
    "--profile",
    "--accounts",
    "--role-arn",
    "--expect-account",
    "--max-count",
    "--max-errors",
    # What swarm writes, and how it shows the run (the Action passes its own): the first
    # file named would not be written.
    "--report",
    "--trace",
    "--plan-out",
    "--progress",
)
_LISTS = ("--ids", "--exclude-ids")


def _given_twice(argv: list[str], group: Any = None) -> str | None:
    """Why a command line that names a list or a ledger twice is refused: the first
    (five IDs, an earlier ledger) would be dropped without a word. A word that is the
    value of an option (``--protect-tag --ids``, a tag key) is no option of its own."""
    words = _option_words(argv, group)
    for option in _ONCE:
        given = [w for w in words if w == option or w.startswith(option + "=")]
        if len(given) > 1:
            what = "ledger" if option == "--ledger" else "list" if option in _LISTS else "value"
            return (
                f"{option} is given {len(given)} times; one {what} only (the last would "
                "win and the others be dropped)"
                + ("; put the IDs in one file: cat a.txt b.txt > all.txt" if what == "list" else "")
            )
    return None


def _option_words(argv: list[str], group: Any) -> list[str]:
    """The words of ``argv`` before ``--`` that are not the value of the option before
    them, as the (click) commands of ``group`` read them."""
    if group is None:
        return argv[: argv.index("--")] if "--" in argv else argv
    # A bare context, only to look subcommands up: nothing is parsed or cached with it
    # (the help option, which a context of other settings would cache without -h).
    ctx = group.context_class(group)
    command, takes_value = group, _valued(group)
    out: list[str] = []
    skip = False
    for word in argv:
        if skip:  # the value of the option before it, whatever it reads (even --)
            skip = False
            continue
        if word == "--":
            break
        out.append(word)
        if word.startswith("-"):
            skip = "=" not in word and word in takes_value
        elif hasattr(command, "get_command"):
            sub = command.get_command(ctx, word)
            if sub is not None:
                command, takes_value = sub, _valued(sub)
    return out


def _valued(command: Any) -> set[str]:
    """The spellings of ``command``'s options that take a value (not a flag's)."""
    return {
        name
        for param in command.params
        if param.param_type_name == "option" and not param.is_flag and not param.count
        for name in param.opts
    }
