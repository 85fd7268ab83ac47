"""What stands between the pairs and the first call: the output paths checked, the rails
(``--protect-tag``), the tags read for them, and the confirmation."""

from __future__ import annotations

import math
import os
import shlex
import sys
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import replace

from rich.console import Console

from ..actions import ActionSpec
from ..actions.operations import Operation
from ..errors import (
    RefusedError,
    UsageError,
    error_for,
)
from ..outcome import Kind, Outcome
from ..rails import (
    PROTECTED_CODE,
    SAMPLE_SIZE,
    UNVERIFIED_CODE,
    RailError,
    TagPredicate,
    ask,
    confirmation_text,
    protect_tags,
)
from ..report import Pair
from ..run import (
    RunOptions,
)
from ..text import one_or_more
from .exits import error, warn
from .options import Flags
from .pairs import Instance
from .reach import Reach


def check_outputs(flags: Flags) -> None:
    """--trace, --report, --plan-out: never the ledger, an input or each other; never a link.

    Each is replaced or truncated when written: onto the ledger it would wipe
    the record of earlier runs, onto the ID list the list itself.
    """
    from ..ledger import same_file

    inputs = {
        "--ledger": flags.ledger,
        "--ids": flags.ids,
        "--exclude-ids": flags.exclude_ids,
        "--accounts": flags.accounts,
    }
    outputs = {
        "--trace": flags.options.trace,
        "--report": flags.report,
        "--plan-out": flags.plan_out,
    }
    named = [(k, v) for k, v in inputs.items() if v and v != "-"]
    for option, path in outputs.items():
        if path is None:
            continue
        if not path.strip():
            raise UsageError(f"{option}: the path is empty (nothing was sent)")
        if os.path.islink(path):
            raise UsageError(f"{option} {path} is a symbolic link: pass the real path")
        # What the run is for, checked now; a trace is an aid, which a warning covers.
        folder = os.path.dirname(path) or "."
        if option != "--trace" and os.path.isdir(path):
            raise UsageError(f"{option} {path} is a folder: pass a file's path (nothing was sent)")
        if option != "--trace" and not os.path.isdir(folder):
            raise UsageError(f"{option} {path}: no folder {folder} (nothing was sent)")
        if option == "--report" and os.path.exists(path) and not os.path.isfile(path):
            # The page replaces what is there (a rename): never a device or a FIFO.
            raise UsageError(f"{option} {path} is not a regular file (nothing was sent)")
        for other, taken in named:
            if same_file(path, taken):
                raise UsageError(
                    f"{option} {path} is the {other} file: writing it would destroy it; pass "
                    "another path (nothing was sent)"
                )
        named.append((option, path))


def ignored(
    spec: ActionSpec,
    groups: Mapping[Pair, Sequence[str]],
    reach: Reach,
    options: RunOptions,
    found: dict[str, Instance],
    err: Console,
    *,
    settled: Mapping[Pair, Mapping[str, Outcome]] = {},
) -> tuple[dict[Pair, dict[str, Outcome]], int]:
    """The instances EC2 would answer with success and leave as they are (a reboot of a
    terminated one: "Requests to reboot terminated instances are ignored"): looked up
    before the run and recorded failed (``Ignored``), never sent, so that no success says
    they were done. What a selection or a rail read is not read again, and what is
    ``settled`` already (a rail's refusal, a resume's) is not looked up. The look-up gives
    up once no answer has read anything for ``--max-outage`` seconds (10 s at least: the
    least a read is waited for), a Describe throttled, failing or hung all that while:
    what it could not read is sent, said so, as before such a look-up. Returns those
    outcomes and how many instances went unchecked."""
    from ..describe import READ_MIN_TIMEOUT
    from ..ledger import IGNORED_CODE
    from ..plan import STATE_RULES, Prediction

    rules = STATE_RULES.get(spec.name, {})
    states = {state for state, p in rules.items() if p is Prediction.IGNORED}
    wanted = {p: [i for i in ids if i not in settled.get(p, {})] for p, ids in groups.items()}
    wanted = {p: ids for p, ids in wanted.items() if ids}
    if not states or not wanted:
        return {}, 0
    unknown = sum(1 for ids in wanted.values() for i in ids if i not in found)
    if unknown >= LOOK_UP_SAID and options.progress != "none":
        err.print(
            f"{spec.name}: looking up {unknown} {one_or_more(spec.resource)} first (EC2 "
            f"ignores a {spec.name} of a terminated one and answers success)",
            markup=False,
        )
    patience = max(options.max_outage, READ_MIN_TIMEOUT)
    unread = describe_missing(wanted, reach, options, found, err, patience=patience)
    out: dict[Pair, dict[str, Outcome]] = {}
    for pair, ids in wanted.items():
        for i in ids:
            info = found.get(i)
            if info is not None and info.state in states:
                message = (
                    f"{info.state}: EC2 answers a {spec.name} of it with success and does "
                    "nothing; not sent"
                )
                out.setdefault(pair, {})[i] = Outcome(Kind.PERMANENT, IGNORED_CODE, message)
    count = sum(len(o) for o in out.values())
    if count:
        err.print(
            f"{spec.name}: {count} {one_or_more(spec.resource)} terminated or shutting down, "
            f"not sent (EC2 would answer success and do nothing): recorded failed "
            f"({IGNORED_CODE})",
            markup=False,
        )
    if unread:
        why = Counter(reason.partition(":")[0] for reason in unread.values())
        said = ", ".join(f"{reason} x {n}" for reason, n in why.most_common(3))
        where = sorted(p.label for p, ids in wanted.items() if any(i in unread for i in ids))
        shown = ", ".join(where[:3]) + (f" and {len(where) - 3} more" if len(where) > 3 else "")
        warn(
            err,
            f"{spec.name}: {len(unread)} {one_or_more(spec.resource)} could not be looked up "
            f"in {shown} ({said}): sent unchecked, so a terminated one among them is "
            f"recorded {spec.verb} (EC2 answers success), and a --resume does not look at "
            f"it again; swarm plan {spec.name} on the same list shows any, once "
            "DescribeInstances answers",
        )
    return out, len(unread)


# A look-up this large says so before it starts: a few seconds with nothing shown.
LOOK_UP_SAID = 1000


def protected_by_tags(
    spec: ActionSpec,
    flags: Flags,
    groups: Mapping[Pair, Sequence[str]],
    reach: Reach,
    options: RunOptions,
    found: dict[str, Instance],
    err: Console,
) -> dict[Pair, dict[str, Outcome]]:
    """--protect-tag: instances carrying the tag are never sent; they are recorded failed.

    The rail fails closed: an instance whose tags could not be read (DescribeInstances
    denied, failing, or silent about it) is not sent either; it is recorded failed
    (``RailUnverified``) with the reason, and the run exits 3.
    """
    predicate = _predicate(flags)
    if predicate is None:
        return {}
    unread = describe_missing(groups, reach, options, found, err)
    tags = {i: found[i].tags for ids in groups.values() for i in ids if i in found}
    return _settle(groups, tags, unread, predicate, spec.resource, err, flags.protect_tags)


def protected_resources(
    operation: Operation,
    flags: Flags,
    groups: Mapping[Pair, Sequence[str]],
    reach: Reach,
    options: RunOptions,
    err: Console,
) -> dict[Pair, dict[str, Outcome]]:
    """--protect-tag for an operation of the registry: each resource's tags read with
    DescribeTags (any resource type); fails closed as for instances."""
    predicate = _predicate(flags)
    if predicate is None:
        return {}
    read, why = read_protected_tags(flags, groups, reach, options, err)
    tags = {i: t for on in read.values() for i, t in on.items()}
    unread = {
        i: why.get(i) or "DescribeTags did not answer for it"
        for ids in groups.values()
        for i in ids
        if i not in tags
    }
    return _settle(groups, tags, unread, predicate, operation.resource, err, flags.protect_tags)


def read_protected_tags(
    flags: Flags,
    groups: Mapping[Pair, Sequence[str]],
    reach: Reach,
    options: RunOptions,
    err: Console,
    calls: dict[str, int] | None = None,
) -> tuple[dict[Pair, dict[str, dict[str, str]]], dict[str, str]]:
    """The tags ``--protect-tag`` names, of every resource, read with DescribeTags; and
    the IDs that could not be read, with why. The calls made are added to ``calls``."""
    from ..observe import tags_of

    return tags_of(
        groups,
        [spec.partition("=")[0] for spec in flags.protect_tags],
        reach.client,
        err,
        options=replace(options, ledger=None, progress="none"),
        calls=calls,
    )


def _predicate(flags: Flags) -> TagPredicate | None:
    try:
        return protect_tags(flags.protect_tags)
    except RailError as exc:
        raise error_for(exc.code, exc.message) from exc


def _settle(
    groups: Mapping[Pair, Sequence[str]],
    tags: Mapping[str, Mapping[str, str]],
    unread: Mapping[str, str],
    predicate: TagPredicate,
    noun: str,
    err: Console,
    specs: Sequence[str],
) -> dict[Pair, dict[str, Outcome]]:
    """Protected IDs and IDs whose tags could not be read, each settled failed, unsent;
    each one's message names the rail (``specs``), for a resume to hold it back by."""
    named = rail_note(specs)
    refused = Outcome(
        Kind.PERMANENT,
        PROTECTED_CODE,
        f"carries a tag that --protect-tag protects; not sent {named}",
    )
    settled: dict[Pair, dict[str, Outcome]] = {}
    for pair, ids in groups.items():
        for i in ids:
            if i in unread:
                settled.setdefault(pair, {})[i] = Outcome(
                    Kind.PERMANENT,
                    UNVERIFIED_CODE,
                    f"--protect-tag could not read its tags ({unread[i]}); not sent {named}",
                )
            elif i in tags and predicate(tags[i]):
                settled.setdefault(pair, {})[i] = refused
    count = sum(o.code == PROTECTED_CODE for v in settled.values() for o in v.values())
    if count:
        err.print(
            f"--protect-tag: {count} {one_or_more(noun)} protected; they will be recorded, not sent"
        )
    if unread:
        example = next(iter(unread.values()))
        error(
            err,
            f"--protect-tag could not read the tags of {len(unread)} {one_or_more(noun)} (e.g. "
            f"{example}): they will not be sent, and are recorded failed ({UNVERIFIED_CODE})",
        )
    return settled


def rail_note(specs: Sequence[str]) -> str:
    """The rail, as a record's message ends with it: ``(rail: --protect-tag keep)``."""
    return "(rail: " + " ".join(f"--protect-tag {shlex.quote(s)}" for s in specs) + ")"


def rail_of(message: str | None) -> tuple[str, ...] | None:
    """The ``--protect-tag`` specs a record's message names (see :func:`rail_note`);
    None when it names none (a record of an older swarm). One that names a rail this
    cannot read (a hand-edited line) holds :data:`UNREAD_RAIL`, which no rail releases."""
    head = "(rail: "
    if not message or head not in message:
        return None
    # The note ends the message; what comes before it (EC2's words) and the specs
    # themselves may hold its head too: the first place from which the rest reads whole.
    start = message.find(head)
    while start >= 0:
        try:
            words = shlex.split(message[start + len(head) : -1]) if message[-1] == ")" else []
        except ValueError:
            words = []
        if words and len(words) % 2 == 0 and all(w == "--protect-tag" for w in words[::2]):
            return tuple(words[1::2])
        start = message.find(head, start + 1)
    return UNREAD_RAIL


# A rail a record names and that cannot be read back: held back until a new run decides.
UNREAD_RAIL = ("(a rail this swarm cannot read back)",)


def unverified_count(settled: Mapping[Pair, Mapping[str, Outcome]]) -> int:
    """Intents a rail could not check, settled unsent: the run then exits 3."""
    return sum(o.code == UNVERIFIED_CODE for v in settled.values() for o in v.values())


NOT_LISTED = "NotListed"  # describe.NOT_LISTED_CODE, without importing it at start-up


def describe_missing(
    groups: Mapping[Pair, Sequence[str]],
    reach: Reach,
    options: RunOptions,
    found: dict[str, Instance],
    err: Console,
    *,
    patience: float = math.inf,
) -> dict[str, str]:
    """Tags and names of listed instances a selection did not already read.

    Returns the IDs that could not be read, each with why: denied, failing, or left out
    of DescribeInstances' answer. Those EC2 names as unknown are not among them (an
    instance that does not exist cannot be harmed: its call fails as missing).
    """
    from ..describe import BAD_ID_CODES, describe_job

    wanted = {p: [i for i in ids if i not in found] for p, ids in groups.items()}
    wanted = {p: ids for p, ids in wanted.items() if ids}
    if not wanted:
        return {}
    read, report = describe_job(
        wanted,
        reach.client,
        err,
        options=replace(options, ledger=None, progress="none"),
        patience=patience,
    )
    for infos in read.values():
        found.update({i: info for i, info in infos.items() if info is not None})
    problems = {(p.region, p.account, p.id): p for p in report.problems}
    unread: dict[str, str] = {}
    for pair, ids in wanted.items():
        for i in ids:
            if i in found:
                continue
            problem = problems.get((pair.region, pair.account, i))
            if problem is not None and problem.code in BAD_ID_CODES:
                continue
            why = "not read" if problem is None else (problem.code or problem.status)
            if problem is not None and problem.message and problem.code != NOT_LISTED:
                why += f": {problem.message}"
            unread[i] = why
    return unread


def confirm(
    spec: ActionSpec,
    groups: Mapping[Pair, Sequence[str]],
    where: str,
    flags: Flags,
    reach: Reach,
    found: dict[str, Instance],
    err: Console,
) -> None:
    """Name what is about to happen (account, regions, count, endpoint, a sample) and ask."""
    # An account that could not be reached sends nothing: counted apart, not as acted on.
    held: dict[str, int] = {}
    for pair, ids in groups.items():
        if not reach.reachable(pair):
            label = pair.account or "(default)"
            held[label] = held.get(label, 0) + len(ids)
    groups = {p: ids for p, ids in groups.items() if reach.reachable(p)} or groups
    count = sum(len(v) for v in groups.values())
    first = next(iter(groups.items()))
    sample_ids = list(first[1][:SAMPLE_SIZE])
    if spec.resource == "instance":  # Name tags read with DescribeInstances
        describe_missing({first[0]: sample_ids}, reach, flags.options, found, err)
    sample = [(i, found[i].name if i in found else None) for i in sample_ids]
    accounts = {p.account for p in groups}
    account, alias = (accounts.pop() if len(accounts) == 1 else None), None
    if account is None and len(groups) == 1:
        account = flags.expect_account
    if account is not None and len(groups) == 1:
        alias = reach.alias(first[0])
    text = confirmation_text(
        spec.name,
        count,
        {p.label: len(v) for p, v in groups.items()},
        where,
        account,
        alias,
        sample,
        spec.resource,
        held,
    )
    on_stdin = flags.ids == "-"
    if not sys.stdin.isatty() and not on_stdin:
        raise RefusedError(
            f"refusing to {spec.name} {count} {one_or_more(spec.resource)} without "
            "confirmation: no terminal to ask on. Pass --yes to confirm (scripts and CI)."
        )
    if not ask(f"{text}\nContinue? [y/N] ", stdin_is_ids=on_stdin):
        raise RefusedError("not confirmed; nothing was sent", plain=True)
