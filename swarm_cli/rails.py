"""Safety rails: checks made before anything is sent, each refusing with its exit code.

A rail that refuses raises RailError and has sent no instance action; the CLI
prints the message and exits with ``code``. The checks that call AWS (the
account, its alias) use STS and IAM only.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Protocol, TextIO, TypeVar

from .errors import EXIT_CREDENTIALS, EXIT_REFUSED, EXIT_USAGE, SwarmError
from .outcome import Kind
from .targets import ACCOUNT_ID
from .text import clip, not_utf8, plural

# The ledger code of an instance left alone because --protect-tag matched it.
PROTECTED_CODE = "Protected"
# The ledger code of an instance left alone because a rail could not read what it checks.
UNVERIFIED_CODE = "RailUnverified"
SAMPLE_SIZE = 5  # instances named in a confirmation
PAIRS_SHOWN = 6  # (account, region) pairs named in a confirmation before "and N more"
_NAME_WIDTH = 60
_ANSWER_LIMIT = 1024  # bytes read from a terminal for one answer
_YES = frozenset({"y", "yes"})


class RailError(SwarmError):
    """A rail refused: ``message`` says why in one line, ``code`` is the exit code."""

    def __init__(self, message: str, code: int = EXIT_REFUSED) -> None:
        super().__init__(message, exit_code=code)
        self.code = code


class Tagged(Protocol):
    @property
    def tags(self) -> Mapping[str, str]: ...


T = TypeVar("T", bound=Tagged)
TagPredicate = Callable[[Mapping[str, str]], bool]


def check_account(
    session_or_client: Any,
    expected: str,
    *,
    endpoint_url: str | None = None,
    region: str | None = None,
    timeout: float | None = None,
) -> str:
    """The account the credentials act in (STS GetCallerIdentity), if it is ``expected``.

    ``timeout``: seconds to wait for an answer (--call-timeout; 10 by default), two
    tries: an STS that hangs is a refusal within seconds, not minutes of silence.

    Takes an STS client, or a boto3 session to make one from (``endpoint_url`` and
    ``region`` apply only then). Refuses (code 3) when the account differs, and when
    it cannot be learnt: a rail that cannot check must not let the run through.
    Refused credentials give code 4, as elsewhere in the CLI.
    """
    if not ACCOUNT_ID.fullmatch(expected):
        raise RailError(f"--expect-account {expected!r}: expected 12 digits", EXIT_USAGE)
    from botocore.config import Config

    from .ec2 import classify_exception

    try:
        if hasattr(session_or_client, "get_caller_identity"):
            sts = session_or_client
        else:
            # Inside the try: a session whose profile or credentials are broken fails here.
            sts = session_or_client.client(
                "sts",
                region_name=region,
                endpoint_url=endpoint_url,
                config=Config(
                    connect_timeout=min(10.0, timeout or 10.0),
                    read_timeout=timeout or 10.0,
                    retries={"mode": "standard", "total_max_attempts": 2},
                    user_agent_extra="swarm-cli",
                ),
            )
        identity = sts.get_caller_identity()
    except Exception as err:
        try:
            outcome = classify_exception(err)
        except Exception:  # not botocore's: still no identity, so still no run
            raise RailError(
                f"cannot check the account (--expect-account): {type(err).__name__}: {err}"
            ) from None
        detail = f": {outcome.message}" if outcome.message else ""
        raise RailError(
            f"cannot check the account (--expect-account {expected}): {outcome.code}{detail}",
            EXIT_CREDENTIALS if outcome.kind is Kind.FATAL else EXIT_REFUSED,
        ) from None
    got = str(identity.get("Account") or "")
    if got != expected:
        arn = identity.get("Arn")
        who = f" ({arn})" if arn else ""
        raise RailError(
            f"refusing: these credentials act in account {got or 'unknown'}{who}, "
            f"not {expected} (--expect-account); nothing was sent"
        )
    return got


def account_alias(iam_client: Any) -> str | None:
    """The account's alias (IAM ListAccountAliases), or None.

    Any failure gives None: the alias only helps a person recognise the account in a
    confirmation, and lacking iam:ListAccountAliases must not stop a run.
    """
    try:
        aliases = iam_client.list_account_aliases().get("AccountAliases") or []
    except Exception:
        return None
    return str(aliases[0]) if aliases else None


def protect_tag(spec: str) -> TagPredicate:
    """A test of an instance's tags: ``KEY`` matches any value, ``KEY=VALUE`` only VALUE.

    ``KEY=`` matches only an empty value (EC2 tags may have one). Keys and values are
    compared exactly, as EC2 compares them (case-sensitive).
    """
    if (bad := not_utf8("--protect-tag", spec)) is not None:
        raise RailError(bad, EXIT_USAGE)
    key, eq, value = spec.partition("=")
    if not key.strip():
        raise RailError(
            f"--protect-tag {spec!r}: expected KEY or KEY=VALUE (e.g. protected=true)",
            EXIT_USAGE,
        )
    if not eq:
        return lambda tags: key in tags
    return lambda tags: key in tags and tags[key] == value


def protect_tags(specs: Iterable[str]) -> TagPredicate | None:
    """Several ``--protect-tag``: protected when any of them matches; None when none given."""
    tests = [protect_tag(spec) for spec in specs]
    if not tests:
        return None
    return lambda tags: any(test(tags) for test in tests)


def split_protected(
    instances: Iterable[T], predicate: TagPredicate | None
) -> tuple[list[T], list[T]]:
    """(to act on, protected), each in the given order."""
    acting: list[T] = []
    protected: list[T] = []
    for instance in instances:
        if predicate is not None and predicate(instance.tags):
            protected.append(instance)
        else:
            acting.append(instance)
    return acting, protected


def check_max_count(
    count: int,
    max_count: int | None,
    *,
    action: str = "terminate",
    resource: str = "instance",
    protecting: bool = False,
) -> None:
    """Refuse (code 3) to act on more than ``max_count`` instances (or other resources);
    None is no limit. ``protecting``: a --protect-tag rail is to take some out after this
    count, which is made before any tag is read."""
    if max_count is None:
        return
    if max_count < 0:
        raise RailError(f"--max-count {max_count}: expected 0 or more", EXIT_USAGE)
    if count > max_count:
        noun = resource if count == 1 else plural(resource)
        before = " (counted before --protect-tag keeps any)" if protecting else ""
        raise RailError(
            f"refusing to {action} {count} {noun}{before}: --max-count is {max_count}; "
            "nothing was sent"
        )


def _printable(text: str, width: int = _NAME_WIDTH) -> str:
    # Tags are anyone's text: an escape sequence or a right-to-left override in a
    # Name could redraw or reverse the very lines a person is asked to confirm.
    return clip(text, width)


def confirmation_text(
    action: str,
    count: int,
    pairs: Mapping[str, int],
    endpoint: str | None,
    account: str | None,
    alias: str | None,
    sample: Sequence[tuple[str, str | None]],
    resource: str = "instance",
    unreachable: Mapping[str, int] | None = None,
) -> str:
    """What a person must see before saying yes: what, how many, where, and examples.

    ``pairs`` maps each (account, region) label (``Pair.label``) to its instance
    count; ``sample`` is (instance ID, Name tag) pairs, of which the first
    ``SAMPLE_SIZE`` are shown. ``unreachable`` counts, by account, the instances of
    accounts that could not be reached: named apart, for nothing is sent to them.
    """
    from .ec2 import redact_url

    noun = resource if count == 1 else plural(resource)
    if account is None:
        who = "not checked (pass --expect-account to check it)"
    else:
        who = _printable(account) + (f" ({_printable(alias)})" if alias else "")
    where = ", ".join(f"{_printable(label)}: {n}" for label, n in list(pairs.items())[:PAIRS_SHOWN])
    if len(pairs) > PAIRS_SHOWN:
        where += f" and {len(pairs) - PAIRS_SHOWN} more"
    lines = [
        f"About to {action.upper()} {count} {noun}",
        f"  account:  {who}",
        f"  regions:  {where or 'none'}",
        f"  endpoint: {clip(redact_url(endpoint) or 'AWS default', 200)}",
    ]
    shown = list(sample[:SAMPLE_SIZE])
    if shown:
        lines.append("  for example:")
        lines.extend(
            f"    {_printable(instance_id, 40)}  {_name_shown(name)}" for instance_id, name in shown
        )
        if count > len(shown):
            lines.append(f"    … and {count - len(shown)} more")
    if unreachable:
        held = ", ".join(f"{_printable(a)}: {n}" for a, n in unreachable.items())
        lines.append(f"  not reached (nothing is sent there, recorded pending): {held}")
    return "\n".join(lines)


def _ask_tty(prompt: str, tty_path: str) -> bool:
    try:
        # O_NOCTTY: a process without a terminal must not acquire one by asking.
        fd = os.open(tty_path, os.O_RDWR | os.O_NOCTTY)
    except OSError:
        return False
    try:
        os.write(fd, prompt.encode("utf-8", "replace"))
        answer = b""
        # A terminal in canonical mode hands over a whole line per read; the loop covers
        # one that does not, and an empty read is end of input (Ctrl-D): not a yes.
        while b"\n" not in answer and len(answer) < _ANSWER_LIMIT:
            chunk = os.read(fd, _ANSWER_LIMIT)
            if not chunk:
                break
            answer += chunk
    except OSError:
        return False
    finally:
        os.close(fd)
    return answer.decode("utf-8", "replace").strip().lower() in _YES


def ask(
    prompt: str,
    *,
    stdin_is_ids: bool,
    tty_path: str = "/dev/tty",
    stdin: TextIO | None = None,
    stderr: TextIO | None = None,
) -> bool:
    """Ask a person; True only for ``y`` or ``yes``.

    The answer comes from stdin when stdin is a terminal. When the ID list came on
    stdin (``--ids -``), or stdin is not a terminal, it comes from the terminal at
    ``tty_path`` instead: a pipe is not a person, and the next line of an ID list
    must never pass for a yes. No terminal to open (CI, cron) gives False, no error.
    """
    stdin = sys.stdin if stdin is None else stdin
    if stdin_is_ids or stdin is None or not stdin.isatty():
        return _ask_tty(prompt, tty_path)
    out = sys.stderr if stderr is None else stderr  # stdout may carry --output json
    out.write(prompt)
    out.flush()
    line = stdin.readline()
    return line.strip().lower() in _YES


def _name_shown(name: str | None) -> str:
    """A Name tag as the confirmation shows it: absent, empty and blank told apart."""
    if name is None:
        return "(no Name tag)"
    return _printable(name) if name.strip() else f"(Name tag {name!r})"
