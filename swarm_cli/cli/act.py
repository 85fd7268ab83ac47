"""``swarm terminate | stop | start | reboot``: one command per action, every option shared.

Each command is built from its :class:`ActionSpec` by :func:`register`; Typer reads the
options from the generated function's signature, so this module resolves its
annotations at definition time (no ``from __future__ import annotations``).
"""

import contextlib
import os
import signal
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Annotated, Any, Protocol

import typer
from rich.console import Console

from ..accounts import Account
from ..actions import ACTIONS, ActionSpec
from ..errors import (
    CredentialsError,
    Interrupted,
    RefusedError,
    SwarmError,
    UsageError,
    error_for,
)
from ..ledger import (
    Damaged,
    LedgerError,
    check_ledger_path,
    describe_damage,
    fold,
    read_records,
)
from ..outcome import Kind, Outcome
from ..rails import (
    PROTECTED_CODE,
    SAMPLE_SIZE,
    UNVERIFIED_CODE,
    RailError,
    account_alias,
    ask,
    check_account,
    check_max_count,
    confirmation_text,
    protect_tags,
    split_protected,
)
from ..report import Pair, Report
from ..run import (
    EXIT_FAILED,
    EXIT_LEDGER,
    EXIT_REFUSED,
    Job,
    RunOptions,
    run_job,
)
from ..targets import Targets, TargetsError, read_ids
from ..text import clip, literal
from .common import (
    AccountsOpt,
    BatchSize,
    CallTimeout,
    DrainTimeout,
    EndpointOpt,
    ExcludeOpt,
    ExpectAccountOpt,
    FilterOpt,
    Headroom,
    MaxAttempts,
    MaxCountOpt,
    MaxOutage,
    MaxWindow,
    MinWindow,
    MissingOk,
    OlderThanOpt,
    Output,
    OutputOpt,
    ProfileOpt,
    ProgressChoice,
    ProgressOpt,
    ProtectTagOpt,
    QuietOpt,
    RegionOpt,
    RoleArnOpt,
    TraceOpt,
    VerboseOpt,
    WindowChoice,
    WindowOpt,
    app,
    batch_options,
    consoles,
    finish,
    interruptible,
    require_sandbox,
    window_profile,
)
from .exits import emit_json, error, warn

if TYPE_CHECKING:
    from ..saga import UndoPlan

EXIT_CODES = (
    "Exit codes: 0 all done · 1 some failed or pending (see the ledger) · 2 bad usage or "
    "input · 3 not confirmed · 4 credentials or permission · 74 the ledger could not be "
    "written · 130 interrupted (Ctrl-C) · 128+N stopped by signal N (143 SIGTERM, 129 SIGHUP)."
)


@dataclass(frozen=True)
class Flags:
    """What a user asked of one action run, gathered from the command line."""

    ids: str | None
    region: str | None
    profile: str | None
    endpoint_url: str | None
    ledger: str
    resume: bool
    yes: bool
    dry_run: bool
    sandbox: bool
    params: Mapping[str, Any]
    options: RunOptions
    output: Output
    accounts: str | None = None
    role_arn: str | None = None
    shard: str | None = None
    max_errors: str | None = None
    rollback: bool = False
    wait: bool = False
    wait_timeout: float = 600.0
    quiet: bool = False
    report: str | None = None
    filters: Sequence[str] = ()
    older_than: str | None = None
    exclude_ids: str | None = None
    expect_account: str | None = None
    protect_tags: Sequence[str] = ()
    max_count: int | None = None
    check_protection: bool = True
    plan_out: str | None = None


class _Stage:
    """How far a command got: once ``sending``, a stop is the run's own to record."""

    def __init__(self) -> None:
        self.sending = False


def run_action(spec: ActionSpec, flags: Flags) -> int:
    """One action command; whatever stops it before anything is sent says so, and leaves
    no empty ledger behind (one this command created and never wrote to)."""
    stage = _Stage()
    ledger = flags.ledger if not (flags.sandbox or flags.dry_run) else None
    existed = ledger is None or os.path.lexists(ledger)
    try:
        code = _run_action(spec, flags, stage)
    except KeyboardInterrupt as exc:
        if stage.sending:
            raise
        if not existed and ledger is not None:
            remove_empty(ledger)
        name = getattr(exc, "signal", "SIGINT")
        raise Interrupted(
            f"interrupted by {name} before anything was sent: nothing was sent",
            signum=signal.Signals[name].value,
        ) from None
    except (SwarmError, LedgerError):
        if not stage.sending and not existed and ledger is not None:
            remove_empty(ledger)
        raise
    if not stage.sending and not existed and ledger is not None:
        remove_empty(ledger)
    return code


def remove_empty(path: str) -> None:
    """Delete ``path`` if it is a regular file holding nothing (a ledger nobody wrote)."""
    import stat

    with contextlib.suppress(OSError):
        if stat.S_ISREG(os.lstat(path).st_mode) and os.lstat(path).st_size == 0:
            os.unlink(path)


def _run_action(spec: ActionSpec, flags: Flags, stage: _Stage) -> int:
    from ..ec2 import redact_url

    out, err = consoles()
    if flags.rollback and not spec.reversible:
        raise UsageError(f"{spec.name} cannot be undone: --rollback is for stop and start")
    selecting = bool(flags.filters or flags.older_than)
    if bool(flags.ids) == selecting:
        raise UsageError(
            "say which instances: --ids FILE, or --filter NAME=VALUE (with --older-than, "
            "--exclude-ids), not both"
        )
    if selecting and flags.sandbox:
        raise UsageError("--sandbox rehearses an ID list: pass --ids (swarm list prints one)")
    check_outputs(flags, err)
    accounts = load_account_map(flags.accounts, flags.role_arn, err)
    region = flags.region or session_region(flags.profile, err)
    reach = Reach(flags, accounts, flags.options.window.max_window)
    if flags.expect_account and not flags.sandbox:  # a rehearsal checks it in the sandbox
        expect_account(flags, region, err)
    found: dict[str, Instance] = {}
    if selecting:
        groups = select_groups(spec, flags, accounts, region, reach, found, err)
    else:
        targets = load_targets(flags.ids or "-", err)
        groups = plan_groups(targets, accounts, region, err)
    groups = apply_shard(groups, flags.shard, err, by_count=not selecting)
    # Last of the checks of the command line: it creates the ledger (proving it writable).
    writes_ledger = not (flags.sandbox or flags.dry_run)
    if writes_ledger:
        try:
            check_ledger_path(flags.ledger, ids_path=flags.ids)
        except LedgerError as exc:
            raise UsageError(str(exc)) from exc
    resumed = 0
    done = succeeded(flags.ledger, spec.name, err) if flags.resume else None
    if flags.resume and done is None:
        err.print(
            f"resume: no records in {literal(flags.ledger)} yet; every ID is to go", markup=False
        )
    elif done is not None:
        before = sum(len(ids) for ids in groups.values())
        groups = {p: [i for i in ids if i not in done] for p, ids in groups.items()}
        left = sum(len(ids) for ids in groups.values())
        resumed = before - left
        err.print(
            f"resume: {before - left} already {spec.verb} per {literal(flags.ledger)}; {left} not "
            f"known {spec.verb}",
            markup=False,
        )
    groups = {p: ids for p, ids in groups.items() if ids}
    total = sum(len(ids) for ids in groups.values())
    try:
        check_max_count(total, flags.max_count, action=spec.name)
    except RailError as exc:
        raise error_for(exc.code, exc.message) from exc
    options = replace(
        flags.options,
        already_done=resumed,
        endpoint=redact_url(flags.endpoint_url),
        ledger=flags.ledger if writes_ledger else None,
        max_errors=budget(flags.max_errors, total, err),
    )
    title = f"{spec.name} (dry run)" if flags.dry_run else spec.name
    if flags.shard and not groups:
        err.print(f"shard {flags.shard} holds no account/region pair of this list: nothing to do")
    if not groups:
        err.print(f"nothing to do: no instance IDs to {spec.name}")
        if flags.output is Output.json:
            empty = Job(spec, {}, replace(options, ledger=None, progress="none"))
            report = run_job(empty, _never, err)
            emit_json(report.to_dict())
        return 0
    if flags.sandbox:
        require_sandbox(err)
        from ..rehearse import rehearse

        stage.sending = True
        with interruptible(err):
            try:
                report = rehearse(
                    Job(spec, groups, options, title), err, expect_account=flags.expect_account
                )
            except RailError as exc:
                raise error_for(exc.code, exc.message) from exc
        if flags.report:
            save_report(report, flags.report, err)
        return finish(report, flags.output, out, err, quiet=flags.quiet)

    from ..ec2 import InstanceCall, classify_exception

    reach.connect(groups, err)
    endpoint = reach.endpoint or ""
    if flags.dry_run:
        return show_plan(spec, flags, groups, reach, replace(options, endpoint=endpoint), out, err)
    already = reconcile_resume(spec, flags, groups, reach, options, found, err)
    settled = protected_by_tags(spec, flags, groups, reach, options, found, err)
    for pair, outcomes in already.items():  # already done: recorded so, whatever a rail says
        settled[pair] = {**settled.get(pair, {}), **outcomes}
    to_send = {p: [i for i in ids if i not in already.get(p, {})] for p, ids in groups.items()}
    to_send = {p: ids for p, ids in to_send.items() if ids}
    if not flags.yes and to_send:
        confirm(spec, to_send, endpoint, flags, reach, found, err)
    job = Job(spec, groups, replace(options, endpoint=endpoint), title, settled)
    stage.sending = True

    def action(pair: Pair) -> InstanceCall:
        return InstanceCall(reach.client(pair), spec, params=flags.params)

    report = run_job(job, action, err, classify=classify_exception)
    unverified = unverified_count(settled)
    if unverified:
        report.extra["rail_unverified"] = unverified
        if report.exit_code in (0, EXIT_FAILED):  # a rail that could not see refused them
            report.exit_code = EXIT_REFUSED
    follow_up(spec, flags, job, report, reach, err)
    step_summary(report, err)
    if flags.report:
        save_report(report, flags.report, err)
    return finish(report, flags.output, out, err, quiet=flags.quiet)


def check_outputs(flags: Flags, err: Console) -> None:
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
        if not path:
            continue
        if os.path.islink(path):
            raise UsageError(f"{option} {path} is a symbolic link: pass the real path")
        for other, taken in named:
            if same_file(path, taken):
                raise UsageError(
                    f"{option} {path} is the {other} file: writing it would destroy it; pass "
                    "another path (nothing was sent)"
                )
        named.append((option, path))


def reconcile_resume(
    spec: ActionSpec,
    flags: Flags,
    groups: Mapping[Pair, Sequence[str]],
    reach: "Reach",
    options: RunOptions,
    found: dict[str, "Instance"],
    err: Console,
) -> dict[Pair, dict[str, Outcome]]:
    """--resume: the intents not known done that EC2 shows done already; none are sent."""
    from ..resume import observable, reconcile

    if not flags.resume or not groups:
        return {}
    if not observable(spec.name):
        count = sum(len(ids) for ids in groups.values())
        err.print(
            f"resume: {spec.name} leaves no state to check; the {count} not known "
            f"{spec.verb} are sent again",
            markup=False,
        )
        return {}
    seen = reconcile(spec.name, groups, reach.client, err, options=options)
    found.update(seen.found)
    text = (
        f"resume: DescribeInstances shows {seen.already} of {seen.checked} already "
        f"{spec.verb} (recorded, not sent); {seen.checked - seen.already} to send"
    )
    if seen.unread:
        text += f" ({seen.unread} could not be read: they are sent)"
    err.print(text, markup=False)
    return seen.done


class Instance(Protocol):
    """What a describe or a selection knows of an instance."""

    @property
    def id(self) -> str: ...
    @property
    def name(self) -> str | None: ...
    @property
    def tags(self) -> Mapping[str, str]: ...


def expect_account_of(flags: Flags, pair: Pair | None, err: Console) -> None:
    """--expect-account for a ledger's pairs: checked in the first pair's region."""
    expect_account(flags, pair.region if pair is not None else None, err)


def expect_account(flags: Flags, region: str | None, err: Console) -> None:
    """--expect-account: checked with STS before anything else is read or sent."""
    from ..ec2 import new_session

    assert flags.expect_account is not None
    try:
        session = new_session(profile=flags.profile)
        got = check_account(
            session, flags.expect_account, endpoint_url=flags.endpoint_url, region=region
        )
    except RailError as exc:
        raise error_for(exc.code, exc.message) from exc
    except Exception as exc:
        raise client_error(exc) from exc
    err.print(f"account {literal(got)}: as expected", markup=False)


def selection_pairs(
    accounts: Mapping[str, Account], region: str | None, err: Console
) -> list[Pair]:
    """Where a selection looks: each account's regions (or --region), or --region alone."""
    if not accounts:
        if region is None:
            raise UsageError("no AWS region: pass --region or set AWS_REGION")
        return [Pair(None, region)]
    pairs = []
    for account in accounts.values():
        regions = account.regions or ((region,) if region else ())
        if not regions:
            raise UsageError(f"account {account.id} lists no regions: pass --region")
        pairs += [Pair(account.id, r) for r in regions]
    return pairs


# The states an action can apply to: a selection looks only at those, unless the user
# filters on instance-state-name himself (terminated instances stay listed for an hour).
SOURCE_STATES = {
    "terminate": ["pending", "running", "stopping", "stopped"],
    "stop": ["pending", "running"],
    "start": ["stopped"],
    "reboot": ["running"],
}


def select_groups(
    spec: ActionSpec | None,
    flags: Flags,
    accounts: Mapping[str, Account],
    region: str | None,
    reach: "Reach",
    found: dict[str, Instance],
    err: Console,
) -> dict[Pair, list[str]]:
    """--filter, --older-than, --exclude-ids: DescribeInstances, every page, per pair."""
    from datetime import datetime, timezone

    from ..select import SelectError, parse_age, parse_filters, select

    try:
        filters = parse_filters(flags.filters)
        older = parse_age(flags.older_than) if flags.older_than else None
    except SelectError as exc:
        raise UsageError(exc.message) from exc
    if spec is not None and not any(f["Name"] == "instance-state-name" for f in filters):
        filters.append({"Name": "instance-state-name", "Values": SOURCE_STATES[spec.name]})
    exclude: set[str] = set()
    if flags.exclude_ids:
        exclude = set(load_targets(flags.exclude_ids, err).ids)
    pairs = selection_pairs(accounts, region, err)
    reach.connect({p: [] for p in pairs}, err)
    now = datetime.now(timezone.utc)
    groups: dict[Pair, list[str]] = {}
    for pair in pairs:
        try:
            chosen = select(reach.client(pair), filters, older_than=older, exclude=exclude, now=now)
        except SelectError as exc:
            raise error_for(exc.exit_code, f"{pair.label}: {exc.message}") from exc
        except Exception as exc:  # an account that could not be reached
            raise CredentialsError(f"{pair.label}: {exc}") from exc
        groups[pair] = [i.id for i in chosen]
        found.update({i.id: i for i in chosen})
    shown = literal(", ".join(f"{f['Name']}={','.join(f['Values'])}" for f in filters))
    extra = (f", older than {flags.older_than}" if older else "") + (
        f", minus {len(exclude)} excluded" if exclude else ""
    )
    count = sum(len(v) for v in groups.values())
    err.print(
        f"selected {count} instance(s) in {len(pairs)} pair(s) by {shown}{extra}", markup=False
    )
    return groups


def protected_by_tags(
    spec: ActionSpec,
    flags: Flags,
    groups: Mapping[Pair, Sequence[str]],
    reach: "Reach",
    options: RunOptions,
    found: dict[str, Instance],
    err: Console,
) -> dict[Pair, dict[str, Outcome]]:
    """--protect-tag: instances carrying the tag are never sent; they are recorded failed.

    The rail fails closed: an instance whose tags could not be read (DescribeInstances
    denied, failing, or silent about it) is not sent either; it is recorded failed
    (``RailUnverified``) with the reason, and the run exits 3.
    """
    try:
        predicate = protect_tags(flags.protect_tags)
    except RailError as exc:
        raise error_for(exc.code, exc.message) from exc
    if predicate is None:
        return {}
    unread = describe_missing(groups, reach, options, found, err)
    refused = Outcome(
        Kind.PERMANENT, PROTECTED_CODE, "carries a tag that --protect-tag protects; not sent"
    )
    settled: dict[Pair, dict[str, Outcome]] = {}
    for pair, ids in groups.items():
        known = [found[i] for i in ids if i in found]
        _, protected = split_protected(known, predicate)
        if protected:
            settled[pair] = {i.id: refused for i in protected}
        for i in ids:
            if i in unread:
                settled.setdefault(pair, {})[i] = Outcome(
                    Kind.PERMANENT,
                    UNVERIFIED_CODE,
                    f"--protect-tag could not read its tags ({unread[i]}); not sent",
                )
    count = sum(o.code == PROTECTED_CODE for v in settled.values() for o in v.values())
    if count:
        err.print(f"--protect-tag: {count} instance(s) protected; they will be recorded, not sent")
    if unread:
        example = next(iter(unread.values()))
        error(
            err,
            f"--protect-tag could not read the tags of {len(unread)} instance(s) (e.g. "
            f"{example}): they will not be sent, and are recorded failed ({UNVERIFIED_CODE})",
        )
    return settled


def unverified_count(settled: Mapping[Pair, Mapping[str, Outcome]]) -> int:
    """Intents a rail could not check, settled unsent: the run then exits 3."""
    return sum(o.code == UNVERIFIED_CODE for v in settled.values() for o in v.values())


NOT_LISTED = "NotListed"  # describe.NOT_LISTED_CODE, without importing it at start-up


def describe_missing(
    groups: Mapping[Pair, Sequence[str]],
    reach: "Reach",
    options: RunOptions,
    found: dict[str, Instance],
    err: Console,
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
        wanted, reach.client, err, options=replace(options, ledger=None, progress="none")
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


def show_plan(
    spec: ActionSpec,
    flags: Flags,
    groups: Mapping[Pair, Sequence[str]],
    reach: "Reach",
    options: RunOptions,
    out: Console,
    err: Console,
) -> int:
    """--dry-run / swarm plan: look every instance up and predict its outcome; send nothing."""
    from ..plan import Prediction, estimate, make_plan, plan_json, render_plan, write_plan_ids

    plan = make_plan(
        spec,
        groups,
        reach.client,
        err,
        options=replace(options, ledger=None, progress="none"),
        check_protection=flags.check_protection,
        params=flags.params,
    )
    try:
        predicate = protect_tags(flags.protect_tags)
    except RailError as exc:
        raise error_for(exc.code, exc.message) from exc
    if predicate is not None:
        # As the run will: a tagged instance is recorded failed (Protected), never sent;
        # one whose tags could not be read is already predicted unknown.
        plan.rows = [
            replace(r, prediction=Prediction.PROTECTED, reason="carries a --protect-tag tag")
            if r.info is not None and predicate(r.info.tags)
            else r
            for r in plan.rows
        ]
    est = estimate(spec, plan, options.batch_size)
    if flags.plan_out:
        count = write_plan_ids(plan, flags.plan_out)
        err.print(
            f"plan: {count} instance(s) that would be acted on written to "
            f"{literal(flags.plan_out)}",
            markup=False,
        )
    if flags.output is Output.json:
        render_plan(plan, est, err)
        emit_json({"dry_run": True, **plan_json(plan, est)})
    else:
        render_plan(plan, est, out)
    return EXIT_FAILED if plan.would_fail or plan.unknown else 0


def follow_up(
    spec: ActionSpec, flags: Flags, job: Job, report: Report, reach: "Reach", err: Console
) -> None:
    """After the run: undo it when --rollback and its failure budget is spent; then --wait.

    Neither starts after a signal (a runner that sent it kills soon after) or when the
    ledger could not be written (neither could their records).
    """
    if report.interrupted or report.ledger_error:
        if flags.rollback or flags.wait:
            err.print("--rollback and --wait skipped: the run was stopped short", markup=False)
        return
    if flags.rollback and report.budget_spent is not None:
        from ..saga import SagaError, undo_plan, undo_report

        try:
            # From the ledger when there is one: what is on disk is what was done.
            ledger = job.options.ledger
            if ledger:
                plan = undo_plan([ledger], report.run, allow_empty=True)
            else:
                plan = undo_report(report)
        except (SagaError, LedgerError) as exc:
            err.print(f"rollback: {literal(exc)}", markup=False)
        else:
            # Calls still unanswered when the budget stopped the run may have been done.
            groups = reconcile_undo(plan, reach, job.options, err)
            count = sum(len(ids) for ids in groups.values())
            if not count:
                err.print(f"rollback: run {plan.run} got nothing done: nothing to undo")
            else:
                err.print(
                    f"rollback: the failure budget is spent; {plan.action.name} the "
                    f"{count} instance(s) this run {spec.verb}"
                )
                undo = run_plan(plan.action, groups, job.options, reach, err, "rollback")
                report.extra["rollback"] = undo.to_dict()
                if undo.exit_code:
                    report.exit_code = undo.exit_code
    if flags.wait and not flags.dry_run and spec.target_state and report.done:
        from ..wait import record_reached, wait_for

        waited = wait_for(job, report.done, reach.client, err, timeout=flags.wait_timeout)
        report.extra["wait"] = waited.extra.get("wait", {})
        if job.options.ledger:
            try:
                record_reached(
                    job.options.ledger,
                    report.run,
                    spec.name,
                    waited,
                    started=report.ledger_started,
                    seq_after=report.ledger_seq,
                )
            except LedgerError as exc:
                error(err, f"--wait: {exc}")
                report.ledger_error = str(exc)
                report.exit_code = EXIT_LEDGER
                return
        if waited.exit_code and not report.exit_code:
            report.exit_code = waited.exit_code


def run_plan(
    spec: ActionSpec,
    groups: Mapping[Pair, Sequence[str]],
    options: RunOptions,
    reach: "Reach",
    err: Console,
    title: str,
    settled: Mapping[Pair, Mapping[str, Outcome]] | None = None,
) -> Report:
    from ..ec2 import InstanceCall, classify_exception

    def action(pair: Pair) -> InstanceCall:
        return InstanceCall(reach.client(pair), spec, dry_run=options.dry_run)

    job = Job(spec, {p: list(ids) for p, ids in groups.items()}, options, title, settled or {})
    report = run_job(job, action, err, classify=classify_exception)
    unverified = unverified_count(settled or {})
    if unverified:
        report.extra["rail_unverified"] = unverified
        if report.exit_code in (0, EXIT_FAILED):  # a rail that could not see refused them
            report.exit_code = EXIT_REFUSED
    return report


def save_report(report: Report, path: str, err: Console) -> None:
    """--report: one self-contained HTML page of the run; failing to write it loses nothing."""
    from ..html_report import write_html

    try:
        write_html(report, path)
    except OSError as exc:
        warn(err, f"could not write the report {path}: {exc.strerror or exc}")
    else:
        err.print(f"report: {literal(path)}", markup=False)


def step_summary(report: Report, err: Console) -> None:
    """In a GitHub Actions job, the run's summary on the job's page too."""
    import os

    from ..summary_md import append_step_summary

    path = os.environ.get("GITHUB_STEP_SUMMARY")
    if path and append_step_summary(report) is None:
        warn(err, f"could not append the summary to {path}")


def load_account_map(
    accounts_file: str | None, role_arn: str | None, err: Console
) -> dict[str, Account]:
    """The accounts a run may act in, by ID: from --accounts, or the one of --role-arn."""
    from ..accounts import ROLE_ARN, AccountsError, load_accounts

    if accounts_file and role_arn:
        raise UsageError("--accounts and --role-arn cannot be used together")
    if role_arn:
        match = ROLE_ARN.fullmatch(role_arn)
        if match is None:
            raise UsageError(f"--role-arn {role_arn} is not an IAM role ARN")
        return {match.group(2): Account(match.group(2), role_arn=role_arn)}
    if not accounts_file:
        return {}
    try:
        return {a.id: a for a in load_accounts(accounts_file)}
    except AccountsError as exc:
        raise UsageError(str(exc)) from exc


def plan_groups(
    targets: Targets,
    accounts: Mapping[str, Account],
    default_region: str | None,
    err: Console,
) -> dict[Pair, list[str]]:
    """Each (account, region) pair and its IDs: one window each."""
    default_account = next(iter(accounts)) if len(accounts) == 1 else None
    unnamed = [t for t in targets.items if t.account is None]
    if unnamed and len(accounts) > 1:
        raise UsageError(
            f"{len(unnamed)} ID(s) name no account (e.g. {unnamed[0].id}) and --accounts lists "
            f"{len(accounts)}: add an account column to the ID list"
        )
    strangers = sorted({t.account for t in targets.items if t.account} - set(accounts))
    if strangers and accounts:
        raise UsageError(
            f"the ID list names account(s) {', '.join(strangers)}, which --accounts or "
            "--role-arn does not: nothing was sent"
        )
    groups: dict[Pair, list[str]] = {}
    seen: set[tuple[Pair, str]] = set()
    for target in targets.items:
        account = target.account or default_account
        region = target.region or _account_region(accounts.get(account or "")) or default_region
        if region is None:
            raise UsageError("no AWS region: pass --region or set AWS_REGION")
        pair = Pair(account, region)
        if (pair, target.id) not in seen:  # the same instance, once with defaults spelled out
            seen.add((pair, target.id))
            groups.setdefault(pair, []).append(target.id)
    warn_unknown_regions({p.region for p in groups}, err)
    return groups


def warn_unknown_regions(regions: set[str], err: Console) -> None:
    """A region botocore does not know is more likely a typo than a new region."""
    from ..ec2 import new_session

    session = new_session()
    known = {
        r
        for partition in session.get_available_partitions()
        for r in session.get_available_regions("ec2", partition_name=partition)
    }
    for region in sorted(regions - known):
        warn(err, f"region {region} is not one botocore knows: a typo?")


def apply_shard(
    groups: dict[Pair, list[str]], shard: str | None, err: Console, *, by_count: bool = True
) -> dict[Pair, list[str]]:
    """--shard K/N: keep the pairs of shard K, so that no bucket is split across machines.

    The split is swarm shards' (shards.assign): by instance count for an ID list, by
    pairs for a selection (whose counts the shards command cannot know).
    """
    from ..shards import ShardError, keep_shard, parse_shard

    if not shard:
        return groups
    try:
        k, n = parse_shard(shard)
    except ShardError as exc:
        raise UsageError(str(exc)) from exc
    weights = {(p.account, p.region): len(ids) if by_count else 1 for p, ids in groups.items()}
    mine = keep_shard(weights, k, n)
    kept = {p: ids for p, ids in groups.items() if (p.account, p.region) in mine}
    err.print(
        f"shard {k}/{n}: {len(kept)} of {len(groups)} account/region pair(s), "
        f"{sum(map(len, kept.values()))} of {sum(map(len, groups.values()))} instance(s)"
    )
    return kept


def _account_region(account: Account | None) -> str | None:
    return account.regions[0] if account is not None and len(account.regions) == 1 else None


def session_region(profile: str | None, err: Console) -> str | None:
    from botocore.exceptions import ProfileNotFound

    from ..ec2 import new_session

    try:
        region = new_session(profile=profile).region_name
    except ProfileNotFound as exc:
        raise CredentialsError(str(exc)) from exc
    return str(region) if region else None


def budget(text: str | None, total: int, err: Console) -> int | None:
    if text is None:
        return None
    from ..saga import parse_budget

    try:
        return parse_budget(text, total)
    except ValueError as exc:
        raise UsageError(f"--max-errors: {exc}") from exc


class Reach:
    """How to reach each pair: one client per pair, with that account's credentials.

    Credentials are resolved before the confirmation, one account at a time (a boto3
    session is not thread-safe). An account that cannot be reached stops its own
    pairs only: their intents are recorded pending with the reason.
    """

    def __init__(self, flags: Flags, accounts: Mapping[str, Account], max_pool: int) -> None:
        self.flags = flags
        self.accounts = accounts
        self.max_pool = max_pool
        self.endpoint: str | None = None
        self._clients: dict[Pair, Any] = {}
        self._errors: dict[str | None, Exception] = {}
        self._credentials: dict[str | None, Any] = {}

    def connect(self, groups: Mapping[Pair, Sequence[str]], err: Console) -> None:
        """Credentials and a client for every pair not reached yet (calling again is cheap)."""
        from botocore.exceptions import BotoCoreError, ClientError

        from ..accounts import AccountsError, assume
        from ..ec2 import make_client, new_session, redact_url

        f = self.flags
        credentials = self._credentials
        try:
            session = new_session(profile=f.profile)
        except Exception as exc:
            raise client_error(exc) from exc
        for pair in groups:
            account = pair.account
            if account is None or account in credentials or account in self._errors:
                continue
            known = self.accounts.get(account, Account(account))
            try:
                got = assume(
                    known, region=pair.region, endpoint_url=f.endpoint_url, session=session
                )
            except (AccountsError, BotoCoreError, ClientError) as exc:
                self._errors[account] = exc
                error(err, f"{exc}; its pairs send nothing")
                continue
            credentials[account] = got
        for pair in groups:
            if pair.account in self._errors or pair in self._clients:
                continue
            known_credentials = credentials.get(pair.account)
            try:
                client = make_client(
                    pair.region,
                    profile=f.profile if pair.account is None else None,
                    endpoint_url=f.endpoint_url,
                    max_pool=self.max_pool,
                    credentials=known_credentials.session_kwargs() if known_credentials else None,
                    renewing=known_credentials.source if known_credentials else None,
                )
            except Exception as exc:
                if pair.account is None:
                    raise client_error(exc) from exc
                self._errors[pair.account] = exc
                continue
            self._clients[pair] = client
            self.endpoint = self.endpoint or redact_url(client.meta.endpoint_url)

    @property
    def unreachable(self) -> list[str]:
        return [a or "(default)" for a in self._errors]

    def alias(self, pair: Pair) -> str | None:
        """The account's alias, where IAM lets us read it (a nicety: None otherwise)."""
        from ..ec2 import new_session

        if pair not in self._clients:
            return None
        try:
            got = self._credentials.get(pair.account)
            kwargs = got.session_kwargs() if got else {}
            profile = self.flags.profile if pair.account is None else None
            session = new_session(profile=profile, **kwargs)
            iam = session.client(
                "iam", region_name=pair.region, endpoint_url=self.flags.endpoint_url
            )
        except Exception:
            return None
        return account_alias(iam)

    def client(self, pair: Pair) -> Any:
        if pair.account in self._errors:
            raise self._errors[pair.account]
        return self._clients[pair]


def _never(pair: Pair) -> Callable[[Any], Mapping[str, Any]]:
    raise AssertionError("a job with no pairs makes no action")


def load_targets(ids: str, err: Console) -> Targets:
    try:
        targets = read_ids(ids, sys.stdin if ids == "-" else None)
    except TargetsError as exc:
        raise UsageError(str(exc)) from exc
    if targets.bad:
        shown = targets.bad[:20]
        details = [f"  line {bad.line}: {bad.quoted()}: {clip(bad.reason, 300)}" for bad in shown]
        if len(targets.bad) > len(shown):
            details.append(f"  … and {len(targets.bad) - len(shown)} more")
        raise UsageError(
            f"{len(targets.bad)} invalid line(s) in {ids}; nothing was sent:", details=details
        )
    if targets.duplicates:
        dup = len(targets.duplicates)
        extra = sum(len(lines) - 1 for lines in targets.duplicates.values())
        example, lines = next(iter(targets.duplicates.items()))
        warn(
            err,
            f"{dup} ID(s) listed more than once; {extra} repeat(s) "
            f"dropped (e.g. {example} on lines {', '.join(map(str, lines))})",
        )
    return targets


def succeeded(ledger: str, action: str, err: Console) -> set[str] | None:
    """IDs the ledger holds as done for ``action``: what a resume skips.

    None when there is no ledger yet, or one without records (a run stopped
    before its first intent); a file that is not a swarm ledger (no line is a
    swarm record, a FIFO, a device) is refused before anything is sent.
    """
    if not os.path.lexists(ledger):
        return None
    damaged: list[Damaged] = []
    try:
        state = fold(read_records(ledger, damaged))
    except LedgerError as exc:
        raise UsageError(f"--resume: {exc}; nothing was sent") from exc
    if damaged:
        warn(err, describe_damage(damaged))
    if not state:
        return None
    return {r.id for (act, _), r in state.items() if act == action and r.status == "succeeded"}


def confirm(
    spec: ActionSpec,
    groups: Mapping[Pair, Sequence[str]],
    where: str,
    flags: Flags,
    reach: "Reach",
    found: dict[str, Instance],
    err: Console,
) -> None:
    """Name what is about to happen (account, regions, count, endpoint, a sample) and ask."""
    count = sum(len(v) for v in groups.values())
    first = next(iter(groups.items()))
    sample_ids = list(first[1][:SAMPLE_SIZE])
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
    )
    on_stdin = flags.ids == "-"
    if not sys.stdin.isatty() and not on_stdin:
        raise RefusedError(
            f"refusing to {spec.name} {count} instance(s) without confirmation: no terminal to "
            "ask on. Pass --yes to confirm (scripts and CI)."
        )
    if not ask(f"{text}\nContinue? [y/N] ", stdin_is_ids=on_stdin):
        raise RefusedError("not confirmed; nothing was sent", plain=True)


def client_error(exc: Exception) -> SwarmError:
    """Why no EC2 client could be made, as the error that stops the command."""
    from botocore.exceptions import NoRegionError, ProfileNotFound

    from ..ec2 import CREDENTIAL_ERRORS, classify_exception

    if isinstance(exc, NoRegionError):
        return UsageError("no AWS region: pass --region or set AWS_REGION")
    if isinstance(exc, ProfileNotFound):
        return CredentialsError(str(exc))
    if isinstance(exc, CREDENTIAL_ERRORS):  # resolved when the client is made; nothing sent
        return CredentialsError(f"no usable credentials: {classify_exception(exc).message}")
    return UsageError(f"cannot set up the EC2 client: {exc}")


def register(
    spec: ActionSpec, summary: str, *, into: typer.Typer = app, plan: bool = False
) -> None:
    """Add ``swarm <spec.name>`` with every shared option (and the action's own flags).

    With ``plan``, the command only predicts (``swarm plan <action>``, as ``--dry-run``).
    """
    is_stop = "force" in spec.flags

    def command(
        ids: Annotated[
            str | None,
            typer.Option(
                "--ids",
                metavar="FILE",
                help="Instance IDs: one or more per line (# comments allowed), or a CSV/TSV "
                "with instance_id[,region][,account] columns, or JSON lines; - reads stdin.",
                show_default=False,
            ),
        ] = None,
        filters: FilterOpt = None,
        older_than: OlderThanOpt = None,
        exclude_ids: ExcludeOpt = None,
        expect_account: ExpectAccountOpt = None,
        protect_tag: ProtectTagOpt = None,
        max_count: MaxCountOpt = None,
        check_protection: Annotated[
            bool,
            typer.Option(
                "--check-protection/--no-check-protection",
                help="With --dry-run: ask each instance's termination or stop protection "
                "(DescribeInstanceAttribute: one call per instance).",
            ),
        ] = True,
        plan_out: Annotated[
            str | None,
            typer.Option(
                "--plan-out",
                metavar="FILE",
                help="With --dry-run: write the IDs that would be acted on, ready for --ids.",
            ),
        ] = None,
        region: RegionOpt = None,
        profile: ProfileOpt = None,
        endpoint_url: EndpointOpt = None,
        ledger: Annotated[
            str,
            typer.Option(
                "--ledger",
                metavar="PATH",
                help="JSONL file: every instance as pending before the first call, then "
                "its outcome.",
            ),
        ] = "swarm-ledger.jsonl",
        resume: Annotated[
            bool,
            typer.Option("--resume", help=f"Skip IDs the ledger already records as {spec.verb}."),
        ] = False,
        yes: Annotated[
            bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")
        ] = False,
        dry_run: Annotated[
            bool,
            typer.Option(
                "--dry-run",
                hidden=plan,
                help=f"{spec.name.capitalize()} nothing: look every instance up and predict "
                "its outcome (would act, already done, missing, wrong state, protected, not "
                "permitted), and how long the run would take; exit 1 if any would fail.",
            ),
        ] = False,
        sandbox: Annotated[
            bool,
            typer.Option(
                "--sandbox",
                help="Rehearse: load exactly these IDs into a local fake EC2 with EC2's "
                "default limits and run against it. Nothing leaves this machine.",
            ),
        ] = False,
        force: Annotated[
            bool,
            typer.Option(
                "--force",
                hidden=not is_stop,
                help="Stop without a clean shutdown (the OS gets no chance to flush).",
            ),
        ] = False,
        hibernate: Annotated[
            bool,
            typer.Option(
                "--hibernate",
                hidden=not is_stop,
                help="Hibernate instead of stopping (instances must be set up for it).",
            ),
        ] = False,
        accounts: AccountsOpt = None,
        role_arn: RoleArnOpt = None,
        shard: Annotated[
            str | None,
            typer.Option(
                "--shard",
                metavar="K/N",
                help="K/N: keep only the account/region pairs of shard K of N (see swarm "
                "shards), so N machines split the work without sharing a bucket.",
            ),
        ] = None,
        max_errors: Annotated[
            str | None,
            typer.Option(
                "--max-errors",
                metavar="N|P%",
                help="N or P%: stop sending once that many instances have failed.",
            ),
        ] = None,
        rollback: Annotated[
            bool,
            typer.Option(
                "--rollback",
                help="When --max-errors stops the run, undo what it did (start what it "
                "stopped, stop what it started). Terminate cannot be undone.",
            ),
        ] = False,
        wait: Annotated[
            bool,
            typer.Option(
                "--wait",
                help="Then wait until each instance reaches the action's state (stopped, "
                "running, terminated), asking DescribeInstances through a window of its own.",
            ),
        ] = False,
        wait_timeout: Annotated[
            float,
            typer.Option(
                "--wait-timeout", metavar="SECONDS", min=0, help="Seconds --wait waits at most."
            ),
        ] = 600.0,
        batch_size: BatchSize = "auto",
        headroom: Headroom = 0.0,
        max_window: MaxWindow = 500,
        min_window: MinWindow = 1,
        window_profile_: WindowOpt = WindowChoice.adaptive,
        max_attempts: MaxAttempts = 5,
        output: OutputOpt = Output.text,
        progress: ProgressOpt = ProgressChoice.auto,
        verbose: VerboseOpt = False,
        quiet: QuietOpt = False,
        report: Annotated[
            str | None,
            typer.Option(
                "--report",
                metavar="PATH.html",
                help="Also write one self-contained HTML page: summary, the window over time "
                "with throttles marked, rows per pair, what did not succeed.",
            ),
        ] = None,
        drain_timeout: DrainTimeout = 3.0,
        call_timeout: CallTimeout = None,
        max_outage: MaxOutage = 45.0,
        missing_ok: MissingOk = False,
        trace: TraceOpt = None,
    ) -> int:
        _, err = consoles()
        size, auto_batch = batch_options(batch_size, spec.limits)
        if (force or hibernate) and not is_stop:
            raise UsageError(f"--force and --hibernate are for swarm stop, not {spec.name}")
        if force and hibernate:
            raise UsageError("--force and --hibernate cannot be used together")
        params = {
            spec.flags[k]: True for k, on in (("force", force), ("hibernate", hibernate)) if on
        }
        return run_action(
            spec,
            Flags(
                ids=ids,
                filters=filters or (),
                older_than=older_than,
                exclude_ids=exclude_ids,
                expect_account=expect_account,
                protect_tags=protect_tag or (),
                max_count=max_count,
                check_protection=check_protection,
                plan_out=plan_out,
                region=region,
                profile=profile,
                endpoint_url=endpoint_url,
                ledger=ledger,
                resume=resume,
                yes=yes,
                sandbox=sandbox,
                dry_run=dry_run or plan,
                params=params,
                output=output,
                accounts=accounts,
                role_arn=role_arn,
                shard=shard,
                max_errors=max_errors,
                rollback=rollback,
                wait=wait,
                wait_timeout=wait_timeout,
                quiet=quiet,
                report=report,
                options=RunOptions(
                    dry_run=dry_run or plan,
                    batch_size=size,
                    auto_batch=auto_batch,
                    headroom=headroom,
                    trace=trace,
                    max_attempts=max_attempts,
                    window=window_profile(window_profile_, min_window, max_window, err),
                    progress="none" if quiet else progress.value,
                    verbose=verbose,
                    drain_timeout=drain_timeout,
                    call_timeout=call_timeout,
                    max_outage=max_outage,
                    missing_ok=missing_ok,
                ),
            ),
        )

    # One line per paragraph: rich keeps a docstring's line breaks.
    command.__doc__ = "\n\n".join(
        [
            summary,
            "Calls in flight follow a congestion window: it starts at 1, doubles per round "
            "trip up to 16, then grows while answers come quickly. Once throttles have shown "
            "the account's limit, calls leave paced a little under the rate measured, probing "
            "upward gently every half second.",
            "Before the first call, every instance is in the ledger as pending; SIGINT, "
            "SIGTERM and SIGHUP stop sending, wait --drain-timeout for calls in flight, and "
            "record the rest. Retry what is left with: swarm "
            f"{spec.name} --ids <(swarm ledger failed --action {spec.name} LEDGER)",
            EXIT_CODES,
        ]
    )
    into.command(spec.name)(command)


register(
    ACTIONS["terminate"], "Terminate EC2 instances, as fast as the account's rate limit allows."
)
register(ACTIONS["stop"], "Stop EC2 instances (--force, --hibernate), as fast as the limit allows.")
register(ACTIONS["start"], "Start stopped EC2 instances, as fast as the account's limit allows.")
register(ACTIONS["reboot"], "Reboot EC2 instances, as fast as the account's rate limit allows.")

plan_app = typer.Typer(
    help="Predict what an action would do to each instance, and how long it would take; "
    "change nothing.",
    no_args_is_help=True,
)
app.add_typer(plan_app, name="plan")
for _spec in ACTIONS.values():
    register(
        _spec,
        f"Predict what swarm {_spec.name} would do to each instance; change nothing.",
        into=plan_app,
        plan=True,
    )


@app.command()
def rollback(
    ledger: Annotated[str, typer.Argument(metavar="LEDGER", help="The ledger of the run to undo.")],
    run: Annotated[
        list[str] | None,
        typer.Option(
            "--run",
            metavar="RUN",
            help="A run to undo; repeat it to undo several together (the shards of one job). "
            "Without it, the ledger must hold one stop or start run; if it holds more, they "
            "are listed.",
        ),
    ] = None,
    endpoint_url: EndpointOpt = None,
    profile: ProfileOpt = None,
    accounts: AccountsOpt = None,
    role_arn: RoleArnOpt = None,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")] = False,
    wait: Annotated[
        bool, typer.Option("--wait", help="Then wait until each instance is back.")
    ] = False,
    output: OutputOpt = Output.text,
    progress: ProgressOpt = ProgressChoice.auto,
    expect_account: ExpectAccountOpt = None,
    protect_tag: ProtectTagOpt = None,
    max_count: MaxCountOpt = None,
) -> int:
    """Undo a stop or start run from its ledger: start what it stopped, stop what it started.

    The undo is a run of its own, appended to the same ledger. Terminate and reboot cannot be undone.
    """  # noqa: E501 - rich keeps a docstring's line breaks
    from ..saga import SagaError, check_ids, undo_plan

    out, err = consoles()
    try:
        plan = undo_plan([ledger], run or None, allow_empty=True)
        check_ids(plan)
    except (SagaError, LedgerError) as exc:
        raise UsageError(str(exc)) from exc
    flags = Flags(
        ids=ledger,
        region=None,
        profile=profile,
        endpoint_url=endpoint_url,
        ledger=ledger,
        resume=False,
        yes=yes,
        dry_run=False,
        sandbox=False,
        params={},
        options=RunOptions(ledger=ledger, progress=progress.value),
        output=output,
        accounts=accounts,
        role_arn=role_arn,
        wait=wait,
        expect_account=expect_account,
        protect_tags=tuple(protect_tag or ()),
        max_count=max_count,
    )
    if expect_account is not None:
        expect_account_of(flags, next(iter({**plan.groups, **plan.unsure}), None), err)
    reach = Reach(flags, load_account_map(accounts, role_arn, err), 500)
    reach.connect({**plan.groups, **plan.unsure}, err)
    if reach.unreachable:
        # An undo is all or nothing: nothing is written or sent until every account is in reach.
        raise CredentialsError(
            f"cannot reach account(s) {', '.join(sorted(reach.unreachable))}: pass --accounts "
            "FILE or --role-arn ARN to reach them; nothing was sent"
        )
    endpoint = reach.endpoint or ""
    groups = reconcile_undo(plan, reach, flags.options, err)
    if not groups:
        raise UsageError(f"run {plan.run} ({plan.of}) got nothing done: nothing to undo")
    try:
        check_max_count(sum(map(len, groups.values())), max_count, action=plan.action.name)
    except RailError as exc:
        raise error_for(exc.code, exc.message) from exc
    found: dict[str, Instance] = {}
    settled = protected_by_tags(plan.action, flags, groups, reach, flags.options, found, err)
    if not yes:
        confirm(plan.action, groups, endpoint, flags, reach, found, err)
    options = replace(flags.options, endpoint=endpoint)
    title = f"rollback of {plan.run}"
    report = run_plan(plan.action, groups, options, reach, err, title, settled)
    job = Job(plan.action, groups, options)
    follow_up(plan.action, flags, job, report, reach, err)
    return finish(report, output, out, err)


def reconcile_undo(
    plan: "UndoPlan", reach: Reach, options: RunOptions, err: Console
) -> dict[Pair, list[str]]:
    """What to undo: the run's successes, and those of its pending intents EC2 shows done.

    A call in flight when the run was killed may have been carried out though
    the ledger says pending; DescribeInstances tells (in batches, through a
    window). Those in the run's end state are undone with the rest.
    """
    from ..resume import reconcile

    groups = {p: list(ids) for p, ids in plan.groups.items()}
    count = sum(len(ids) for ids in plan.unsure.values())
    if not count:
        return groups
    seen = reconcile(plan.of, plan.unsure, reach.client, err, options=options)
    for pair, done in seen.done.items():
        groups.setdefault(pair, []).extend(done)
    err.print(
        f"rollback: {count} intent(s) of the run were left pending; DescribeInstances shows "
        f"{seen.already} of them {ACTIONS[plan.of].verb}: they are undone too",
        markup=False,
    )
    return groups


EC2_STATES = ("pending", "running", "stopping", "stopped", "shutting-down", "terminated")
LISTED_STATES = ("pending", "running", "stopping", "stopped")  # swarm list's default


def list_state_filter(filters: Sequence[str], states: Sequence[str], err: Console) -> list[str]:
    """swarm list's --state as a filter on instance-state-name (none for all)."""
    named = [v.strip() for state in states for v in state.split(",") if v.strip()]
    by_filter = any(f.partition("=")[0].strip() == "instance-state-name" for f in filters)
    if named and by_filter:
        raise UsageError("--state or --filter instance-state-name=..., not both")
    if by_filter or named == ["all"]:
        return []
    unknown = sorted(set(named) - set(EC2_STATES))
    if unknown:
        raise UsageError(
            f"--state {', '.join(unknown)}: EC2's states are {', '.join(EC2_STATES)}, or all"
        )
    return [f"instance-state-name={','.join(named or LISTED_STATES)}"]


@app.command("list")
def list_cmd(
    filters: FilterOpt = None,
    older_than: OlderThanOpt = None,
    exclude_ids: ExcludeOpt = None,
    region: RegionOpt = None,
    profile: ProfileOpt = None,
    endpoint_url: EndpointOpt = None,
    accounts: AccountsOpt = None,
    role_arn: RoleArnOpt = None,
    output: OutputOpt = Output.text,
    states: Annotated[
        list[str] | None,
        typer.Option(
            "--state",
            metavar="STATE",
            help="List instances in these states (pending, running, stopping, stopped, "
            "shutting-down, terminated; repeatable, or a,b), or all. Default: every state but "
            "shutting-down and terminated (EC2 shows terminated instances for about an hour).",
        ),
    ] = None,
) -> None:
    """Print the instances the filters select: IDs one per line (a CSV with region and account across several), ready for --ids.

    It composes: swarm list --filter tag:env=ci | swarm stop --ids - --yes. Terminated and shutting-down instances are left out unless --state (or a filter on instance-state-name) asks for them.
    """  # noqa: E501 - rich keeps a docstring's line breaks
    out, err = consoles()
    filters = [*(filters or ()), *list_state_filter(filters or (), states or (), err)]
    flags = Flags(
        ids=None,
        region=region,
        profile=profile,
        endpoint_url=endpoint_url,
        ledger="",
        resume=False,
        yes=True,
        dry_run=True,
        sandbox=False,
        params={},
        options=RunOptions(),
        output=output,
        accounts=accounts,
        role_arn=role_arn,
        filters=filters,
        older_than=older_than,
        exclude_ids=exclude_ids,
    )
    account_map = load_account_map(accounts, role_arn, err)
    reach = Reach(flags, account_map, 10)
    found: dict[str, Instance] = {}
    groups = select_groups(
        None, flags, account_map, region or session_region(profile, err), reach, found, err
    )
    if output is Output.json:
        rows = [
            {"region": p.region, "account": p.account, **found[i].to_dict()}  # type: ignore[attr-defined]
            for p, ids in groups.items()
            for i in ids
        ]
        emit_json({"instances": rows})
        return
    if len(groups) > 1 or any(p.account for p in groups):
        out.file.write("instance_id,region,account\n")
        for p, ids in groups.items():
            out.file.write(
                "".join(f"{literal(i)},{literal(p.region)},{p.account or ''}\n" for i in ids)
            )
    else:
        out.file.write("".join(f"{literal(i)}\n" for ids in groups.values() for i in ids))
