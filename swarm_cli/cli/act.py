"""The commands that act: ``swarm terminate | stop | start | reboot`` (one per action, every
option shared), ``swarm plan <action>``, ``swarm rollback`` and ``swarm list``.

Each command reads its options (``options``), reaches the accounts (``reach``), makes
the pairs (``pairs``), passes the guards (``guards``), runs, and follows up
(``follow_up``). Each action command is built from its :class:`ActionSpec` by
:func:`register`; Typer reads the options from the generated function's signature, so
this module resolves its annotations at definition time (no ``from __future__ import
annotations``).
"""

import contextlib
import os
import signal
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console

from ..actions import ACTIONS, ActionSpec
from ..actions.operations import Operation
from ..batching import initial_size
from ..errors import (
    EXIT_CREDENTIALS,
    EXIT_FAILED,
    EXIT_REFUSED,
    CredentialsError,
    Interrupted,
    SwarmError,
    UsageError,
    error_for,
)
from ..ledger import (
    LedgerError,
    LedgerInUse,
    Record,
    check_ledger_path,
    describe_damage,
)
from ..outcome import Kind, Outcome
from ..rails import (
    PROTECTED_CODE,
    RailError,
    check_max_count,
    protect_tags,
)
from ..report import Pair, Recorded, Report
from ..run import Job, RunOptions, heeded
from ..targets import INSTANCES
from ..text import literal, one_or_more, plural, shell_quote
from ..views import run_job
from .common import app, consoles, finish, interruptible, require_sandbox
from .exits import emit_json, exit_meaning, warn
from .follow_up import (
    checked_by_wait,
    follow_up,
    reconcile_undo,
    run_plan,
    save_report,
    settle,
    step_summary,
)
from .guards import (
    check_outputs,
    confirm,
    ignored,
    protected_by_tags,
    protected_resources,
    rail_note,
    rail_of,
    read_protected_tags,
    unverified_count,
)
from .options import (
    BATCH_SIZE_HELP,
    FILTER_HELP,
    OLDER_THAN_HELP,
    AccountsOpt,
    CallTimeout,
    DrainTimeout,
    EndpointOpt,
    ExcludeOpt,
    ExpectAccountOpt,
    Flags,
    MaxAttempts,
    MaxOutage,
    MaxWindow,
    MinWindow,
    MissingOk,
    Output,
    OutputOpt,
    ProfileOpt,
    ProgressChoice,
    ProgressOpt,
    ProtectTagOpt,
    QuietOpt,
    RegionOpt,
    RoleArnOpt,
    VerboseOpt,
    WindowChoice,
    WindowOpt,
    batch_options,
    check_batch_size,
    headroom_option,
    max_count_help,
    protect_tag_help,
    trace_option,
    window_profile,
)
from .pairs import (  # the benchmarks read load_targets and plan_groups from here too
    NOT_SELECTED_CODE,
    Instance,
    apply_shard,
    check_tag_ledger,
    exclude_from,
    load_exclusions,
    load_targets,
    plan_groups,
    reconcile_resume,
    select_groups,
    succeeded,
    unread_fate,
)
from .reach import (
    Reach,
    default_region,
    expect_account,
    expect_account_of,
    load_account_map,
)

if TYPE_CHECKING:
    from ..plan import Estimate, Plan, Row

DEFAULT_WAIT_TIMEOUT = 600.0  # --wait-timeout, seconds
PROTECTED_REASON = "carries a --protect-tag tag"  # a plan's row that the rail refuses
REHEARSAL_REGION = "us-east-1"  # --sandbox without --region or AWS_REGION
EXIT_CODES = (
    "Exit codes: 0 all done · 1 some failed, missing or pending (see the ledger), or the run "
    "ended on an unexpected error · 2 bad usage or input (nothing sent) · 3 refused by a "
    "rail (--expect-account, --max-count, --protect-tag unable to read tags) or not "
    "confirmed · 4 credentials or permission · 74 the ledger (or the output) could not be "
    "written · 130 interrupted (Ctrl-C) · 128+N stopped by signal N (143 SIGTERM, 129 SIGHUP)."
)
PLAN_EXIT_CODES = (
    "Exit codes: 0 every one would be acted on, or is already done · 1 some would fail or "
    "could not be read · 2 bad usage or input · 3 refused by a rail (as the run: "
    "--protect-tag unable to read tags) · 4 credentials or "
    "permission · 74 the plan (--plan-out, or the output) could not be written · 130 "
    "interrupted (Ctrl-C)."
)


class _Stage:
    """How far a command got: once ``sending``, a stop is the run's own to record. It holds
    the ledger (``hold``) until the command ends: the run, its --wait, its --rollback."""

    def __init__(self, holds: contextlib.ExitStack | None = None) -> None:
        self.sending = False
        self._holds = holds

    def hold(self, ledger: str, why: str | None = None) -> None:
        """Hold ``ledger`` for this command alone (see ``ledger.lock``); ``why`` says, if
        another holds it, why this command must wait."""
        from ..ledger import hold_ledger

        if self._holds is not None:
            self._holds.enter_context(hold_ledger(ledger, why))


def run_action(spec: ActionSpec, flags: Flags, operation: Operation | None = None) -> int:
    """One action command; whatever stops it before anything is sent says so, and leaves
    no empty ledger behind (one this command created and never wrote to).

    ``operation``: an operation of the registry that is not an instance action (``swarm
    ec2 delete-snapshot``): its calls, plan and resume are the operation's.
    """
    # The ledger, once its path is checked, is held to the end; a file the command made
    # and never wrote to goes with the hold (ledger.lock), never another run's.
    with contextlib.ExitStack() as holds, _nothing_sent_if_stopped(stage := _Stage(holds)):
        return _run_action(spec, flags, stage, operation)


class _Signalled(KeyboardInterrupt):
    """SIGTERM or SIGHUP before anything was sent: a stop, as Ctrl-C is."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.signal = name


@contextlib.contextmanager
def _stops_before_sending(stage: _Stage) -> Iterator[None]:
    """SIGTERM and SIGHUP while the command reads, checks and asks end it as Ctrl-C does
    (exit 143 or 129, "nothing was sent", one JSON object), not by the signal's default.
    Once sending, the run's own handlers record them; between those, the default stands.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(signum: int, frame: object) -> None:
        if not stage.sending:
            raise _Signalled(signal.Signals(signum).name)
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)

    previous = {s: signal.getsignal(s) for s in heeded((signal.SIGTERM, signal.SIGHUP))}
    for s in previous:
        signal.signal(s, stop)
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


def _warn_moved(
    groups: Mapping[Pair, Sequence[str]], left_at: Mapping[str, Pair], err: Console
) -> None:
    """A resume that sends intents the ledger holds for another region or account
    elsewhere (a list that lost its region column) says so: they are found missing
    there, and the ledger's word for them is then that, not where they are left."""
    moved = [
        (i, left_at[i])
        for p, ids in groups.items()
        for i in ids
        if i in left_at and not _same_place(left_at[i], p)
    ]
    if not moved:
        return
    first, there = moved[0]
    here = next(p for p, ids in groups.items() if first in ids)
    place = "/".join(x for x in (there.account, there.region) if x)
    now = "/".join(x for x in (here.account, here.region) if x)
    warn(
        err,
        f"resume: {len(moved)} ID(s) the ledger holds as left to do in another region or "
        f"account are sent to this run's (e.g. {literal(first)}: {literal(place)} in the "
        f"ledger, {literal(now)} now); a list without its region column? "
        "`swarm ledger failed --format csv` keeps each in its place",
    )


def _same_place(done: Pair | None, here: Pair) -> bool:
    """Whether a ledger's success at ``done`` is one at ``here``: the same region, and the
    same account where both name one (a ledger made with default credentials names
    none). A record holds for its own place only: the same ID done in another region says
    nothing of this one."""
    if done is None:
        return True
    if done.region and done.region != here.region:
        return False
    return done.account is None or here.account is None or done.account == here.account


def _unselected(
    groups: Mapping[Pair, Sequence[str]],
    maybe: set[str],
    listed: set[str],
    recorded: Recorded,
    unsent: Recorded | None = None,
    unplaced: list[str] | None = None,
) -> dict[Pair, list[str]]:
    """The IDs of the ledger's intents not known done that a selection made again
    (``listed``) leaves out, by the selection's pair the ledger holds each in: those a
    stopped run may have acted on (``maybe``, where ``recorded``), and the others
    (``unsent``). Into ``unplaced``, those whose records name no region (a ledger edited,
    or of an old swarm): not looked up, and so not known done."""
    out: dict[Pair, list[str]] = {}
    todo = [(i, recorded) for i in sorted(maybe - listed)]
    if unsent is not None:
        todo += [(i, unsent) for i in sorted(unsent.ids() - maybe - listed)]
    for i, where in todo:
        # Only where the ledger names the region: one looked up in the wrong one would
        # be taken as gone (even in a selection of one region: the intent may be of
        # another).
        pair = next((p for p in groups if where.holds(i, p, named=True)), None)
        if pair is not None:
            out.setdefault(pair, []).append(i)
        elif unplaced is not None and any(where.holds(i, p) for p in groups):
            unplaced.append(i)
    return out


def _settle_unselected(
    groups: Mapping[Pair, Sequence[str]],
    unselected: Mapping[Pair, Sequence[str]],
    already: Mapping[Pair, Mapping[str, Any]],
    ledger: str,
    err: Console,
) -> tuple[dict[Pair, list[str]], dict[Pair, dict[str, Outcome]]]:
    """``groups`` without the unselected IDs the look-up did not find done, and those,
    settled failed (``NotSelected``): never sent, the run that meant them is not done with
    them, and the ledger says so once (a later resume leaves them be), the user told."""
    left = {
        p: {i: NOT_SELECTED for i in ids if i not in already.get(p, {})}
        for p, ids in unselected.items()
    }
    left = {p: v for p, v in left.items() if v}
    count = sum(map(len, left.values()))
    if count:
        err.print(
            f"resume: {count} of them are not known done and not selected now: not sent, "
            f"recorded failed ({NOT_SELECTED_CODE}) in {literal(ledger)} (swarm ledger failed "
            "lists them)",
            markup=False,
        )
    kept = {p: [i for i in ids if i not in left.get(p, {})] for p, ids in groups.items()}
    return kept, left


def _held_by_rail(
    groups: Mapping[Pair, Sequence[str]],
    railed: Mapping[str, Record],
    flags: Flags,
    noun: str,
    err: Console,
) -> tuple[dict[Pair, dict[str, Outcome]], tuple[str, ...]]:
    """A resume: what an earlier run's --protect-tag held back (protected, or its tags
    unread) is held back again, failed with the same code, never sent, unless this resume
    gives that rail again (then it checks them again itself); a rail the record does not
    name (an older swarm's) is taken as given by any --protect-tag. Returns them, and the
    rails that held them."""
    held: dict[Pair, dict[str, Outcome]] = {}
    rails: dict[str, None] = {}
    given = set(flags.protect_tags)
    for pair, ids in groups.items():
        for i in ids:
            record = railed.get(i)
            if record is None:
                continue
            earlier = rail_of(record.message)
            if (given and earlier is None) or (earlier and given.issuperset(earlier)):
                continue
            rails.update(dict.fromkeys(earlier or ()))
            # The rail named again, so that a later resume holds it back by the same one.
            message = "an earlier run's --protect-tag held it back; not sent: give that " + (
                f"rail again to check it again {rail_note(earlier)}"
                if earlier
                else "rail again (--protect-tag) to check it again"
            )
            held.setdefault(pair, {})[i] = Outcome(Kind.PERMANENT, record.code, message)
    count = sum(map(len, held.values()))
    if count:
        shown = " ".join(f"--protect-tag {shell_quote(r)}" for r in rails) or "--protect-tag"
        err.print(
            f"resume: {count} {one_or_more(noun)} an earlier run's {shown} held back "
            "(protected, or their tags unread) are held back again, not sent: this resume "
            f"does not give that rail; give it again ({shown}) to check them again",
            markup=False,
        )
    return held, tuple(rails)


NOT_SELECTED = Outcome(
    Kind.PERMANENT,
    NOT_SELECTED_CODE,
    "a run of this ledger meant it, and the selection made again leaves it out; not sent",
)


@contextlib.contextmanager
def _nothing_sent_if_stopped(stage: _Stage) -> Iterator[None]:
    """Ctrl-C, SIGTERM or SIGHUP before ``stage.sending``: exit 130/143/129 saying
    nothing was sent (a command that appends nothing before it sends)."""
    try:
        with _stops_before_sending(stage):
            yield
    except KeyboardInterrupt as exc:
        if stage.sending:
            raise
        name = getattr(exc, "signal", "SIGINT")
        raise Interrupted(
            f"interrupted by {name}: nothing was sent", signum=signal.Signals[name].value
        ) from None


def _run_action(
    spec: ActionSpec, flags: Flags, stage: _Stage, operation: Operation | None = None
) -> int:
    from ..ec2 import redact_url

    out, err = consoles()
    if operation is not None:
        _refuse_instance_options(operation, flags)
        from .follow_up import refuse_wait

        refuse_wait(operation, flags)
    if flags.rollback and not spec.reversible:
        raise UsageError(f"{spec.name} cannot be undone: --rollback is for stop and start")
    if flags.rollback and flags.max_errors is None and not flags.dry_run:
        warn(
            err,
            "--rollback undoes a run when its --max-errors budget is spent: without "
            "--max-errors, nothing is undone",
        )
    selecting = bool(flags.filters or flags.older_than)
    if flags.ids and selecting:
        raise UsageError(
            f"say which {plural(spec.resource)} by --ids FILE or by --filter and --older-than, "
            "not both"
        )
    if not flags.ids and not selecting:
        raise UsageError(
            f"say which {plural(spec.resource)}: --ids FILE, or --filter NAME=VALUE or "
            "--older-than AGE (with --exclude-ids FILE)"
        )
    if selecting and flags.sandbox:
        raise UsageError("--sandbox rehearses an ID list: pass --ids (swarm list prints one)")
    check_outputs(flags)
    try:
        protect_tags(flags.protect_tags)  # a rail given wrong is said before anything is read
    except RailError as exc:
        raise error_for(exc.code, exc.message) from exc
    accounts = load_account_map(flags.accounts, flags.role_arn)
    region = default_region(flags.region, flags.profile)
    if region is None and flags.sandbox:
        region = REHEARSAL_REGION  # nothing leaves the machine: any region will do
    reach = Reach(flags, accounts, flags.options.window.max_window)
    if flags.expect_account and not flags.sandbox:  # a rehearsal checks it in the sandbox
        expect_account(flags, region, err)
    found: dict[str, Instance] = {}
    if selecting:
        groups = select_groups(spec, flags, accounts, region, reach, found, err, operation)
    else:
        rule = operation.id_rule if operation is not None else None
        targets = load_targets(flags.ids or "-", err, rule)
        exclude = load_exclusions(flags, err, operation)
        # The shard before the exclusions: its split depends on the ID list alone, as
        # swarm shards' does (which knows nothing of them).
        groups = apply_shard(plan_groups(targets, accounts, region, err), flags.shard, err)
        groups = exclude_from(groups, exclude, err)
    # Last of the checks of the command line: it creates the ledger (proving it writable).
    writes_ledger = not (flags.sandbox or flags.dry_run)
    ledger_was = os.path.lexists(flags.ledger)  # before the check makes it
    if writes_ledger:
        try:
            check_ledger_path(flags.ledger, ids_path=flags.ids)
        except LedgerError as exc:
            raise UsageError(str(exc)) from exc
        stage.hold(flags.ledger)  # before it is read (--resume): no other run writes it
    tags: str | None = None
    if operation is not None and operation.tags:
        from ..operation_call import tags_text

        tags = tags_text(flags.params["Tags"])
    if tags is not None and (writes_ledger or (flags.dry_run and os.path.isfile(flags.ledger))):
        # A plan refuses what the run would, before it sends anything.
        check_tag_ledger(flags.ledger, spec.name, tags, err)
    resumed = 0
    # Where a run of the ledger may have acted on each ID without an answer saying so (a
    # call in flight at a kill can land after the look-up below, and its repeat here then
    # finds the resource gone): one of them gone may be that run's doing.
    recorded = Recorded()
    # A resume that waits sees to what no wait saw arrive as well (a kill while waiting).
    waits = flags.wait and operation is None and spec.target_state is not None
    unconfirmed: set[str] | None = set() if waits else None
    # A selection made again no longer holds what a stopped run deleted before it could
    # record so: those are looked up too (and never sent), or the ledger keeps them pending.
    # (A dry run of such a resume predicts what the run would record of them.)
    maybe: set[str] | None = set() if selecting and not flags.sandbox else None
    # ... and so are the other intents not known done (never sent, or failed), or the
    # ledger keeps them so while the resume reports none of them.
    unsent = Recorded() if maybe is not None else None
    # What a rail of an earlier run held back: without that rail now, it stays unsent.
    railed: dict[str, Record] = {}
    known: set[str] = set()
    done_at: dict[str, Pair] = {}
    left_at: dict[str, Pair] = {}
    done = (
        succeeded(
            flags.ledger,
            spec.name,
            err,
            pending=maybe,
            recorded=recorded,
            unconfirmed=unconfirmed,
            railed=railed,
            unsent=unsent,
            known=known,
            done_at=done_at,
            left_at=left_at,
        )
        if flags.resume
        else None
    )
    unselected: dict[Pair, list[str]] = {}
    unplaced: list[str] = []
    if done is not None and operation is not None and operation.tags:
        # What counts is the tags each resource carries now: they are read.
        err.print(
            "resume: each resource's tags are read (DescribeTags); those already as "
            "asked are done, unsent",
            markup=False,
        )
    elif flags.resume and done is None:
        if ledger_was:
            err.print(
                f"resume: no records in {literal(flags.ledger)} yet; every ID is to go",
                markup=False,
            )
        else:
            warn(
                err,
                f"resume: there is no {literal(flags.ledger)} (a first run, or a mistyped "
                "--ledger?); every ID is to go, recorded there",
            )
    elif done is not None:
        before = sum(len(ids) for ids in groups.values())
        if before and not any(i in known for ids in groups.values() for i in ids):
            holds = (
                f"holds {len(known)} other {spec.name} intent(s)"
                if known
                else f"holds no {spec.name} intent (another command's ledger?)"
            )
            warn(
                err,
                f"resume: none of the {before} ID(s) is in {literal(flags.ledger)}, which "
                f"{holds} (another list, or another ledger?); every ID is to go",
            )
        groups = {
            p: [i for i in ids if i not in done or not _same_place(done_at.get(i), p)]
            for p, ids in groups.items()
        }
        left = sum(len(ids) for ids in groups.values())
        resumed = before - left
        _warn_moved(groups, left_at, err)
        err.print(
            f"resume: {before - left} already {spec.verb} per {literal(flags.ledger)}; {left} not "
            f"known {spec.verb}",
            markup=False,
        )
        listed = {i for ids in groups.values() for i in ids}
        unselected = _unselected(groups, maybe or set(), listed, recorded, unsent, unplaced)
        if unplaced:
            warn(
                err,
                f"resume: {len(unplaced)} intent(s) of the ledger not known {spec.verb} are "
                "not selected now, and their records name no region (an edited ledger, or "
                "an old one): they cannot be looked up, and stay not known done "
                f"(e.g. {unplaced[0]}; swarm ledger failed lists them)",
            )
        if unselected:
            count = sum(map(len, unselected.values()))
            some = sum(1 for ids in unselected.values() for i in ids if i in (maybe or ()))
            what = (
                f"a stopped run of the ledger may have {spec.verb}"
                if some == count
                else f"the ledger holds not known {spec.verb}"
            )
            err.print(
                f"resume: {count} more {what} are not selected now: looked up, never sent",
                markup=False,
            )
            for pair, ids in unselected.items():
                groups[pair] = [*groups.get(pair, ()), *ids]
        unseen = len(listed & (unconfirmed or set()))
        if unseen:
            err.print(
                f"resume: {unseen} of them were {spec.verb} without a wait seeing them "
                f"{spec.target_state} (--wait): looked up again, sent again where not there yet",
                markup=False,
            )
    groups = {p: ids for p, ids in groups.items() if ids}
    held, held_by = _held_by_rail(groups, railed, flags, spec.resource, err)
    # (Those no longer selected are looked up, never sent: no rail counts them.)
    total = sum(len(ids) for ids in groups.values()) - sum(map(len, unselected.values()))
    try:
        check_max_count(
            total,
            flags.max_count,
            action=spec.name,
            resource=spec.resource,
            protecting=bool(flags.protect_tags),
        )
    except RailError as exc:
        raise error_for(exc.code, exc.message) from exc
    options = replace(
        flags.options,
        already_done=resumed,
        endpoint=redact_url(flags.endpoint_url),
        ledger=flags.ledger if writes_ledger else None,
        max_errors=budget(flags.max_errors, total),
    )
    title = f"{spec.name} (dry run)" if flags.dry_run else spec.name
    if not groups:
        if flags.shard and not resumed:
            what = "this selection" if selecting else "this list"
            err.print(f"shard {flags.shard} holds no {spec.resource} of {what}: nothing to do")
        else:
            err.print(f"nothing to do: no {spec.resource} IDs to {spec.name}")
        if flags.output is Output.json and flags.dry_run:
            # A plan of nothing, shaped as every plan is.
            from ..plan import Plan, estimate

            nothing = Plan(spec, [])
            _emit_plan(nothing, estimate(spec, nothing, options.batch_size), 0)
        elif flags.output is Output.json:
            empty = Job(spec, {}, replace(options, ledger=None, progress="none"))
            report = run_job(empty, _never, err)
            if unplaced and not flags.dry_run:
                report.exit_code = EXIT_FAILED
            emit_json({**report.to_dict(), "meaning": exit_meaning(report.exit_code)})
        # Intents left not known done are no success.
        return EXIT_FAILED if unplaced and not flags.dry_run else 0
    if flags.sandbox:
        require_sandbox()
        from ..rehearse import rehearse

        stage.sending = True
        with interruptible():
            try:
                report = rehearse(
                    Job(spec, groups, options, title),
                    err,
                    expect_account=flags.expect_account,
                    params=flags.params if operation is not None else None,
                )
            except RailError as exc:
                raise error_for(exc.code, exc.message) from exc
        if flags.report:
            save_report(report, flags.report, err)
        return finish(report, flags.output, out, err, quiet=flags.quiet)

    from ..ec2 import InstanceCall, classify_exception

    reach.connect(groups, err)
    if groups and not any(reach.reachable(p) for p in groups):
        # No pair can send: its intents would all be written pending, to no end.
        failures = reach.failures
        hint = (
            "check their roles"
            if flags.accounts or flags.role_arn
            else "pass --accounts FILE naming each one's role, or --role-arn ARN"
        )
        raise CredentialsError(
            f"cannot reach any account of the list ({', '.join(sorted(failures))}): {hint}; "
            "nothing was sent"
        )
    endpoint = reach.endpoint or ""
    if flags.dry_run:
        _warn_run_only(flags, err)
        # A resume's look-up, as the run makes it: what it shows done is predicted done.
        looked = (
            reconcile_resume(spec, flags, groups, reach, options, {}, err, recorded)
            if operation is None
            else reconcile_operation(operation, flags, groups, reach, options, err, recorded)
        )
        return show_plan(
            spec,
            flags,
            groups,
            reach,
            replace(options, endpoint=endpoint),
            out,
            err,
            operation,
            held,
            {i for ids in unselected.values() for i in ids},
            looked,
        )
    if operation is None:
        already = reconcile_resume(spec, flags, groups, reach, options, found, err, recorded)
    else:
        already = reconcile_operation(operation, flags, groups, reach, options, err, recorded)
    groups, left_out = _settle_unselected(groups, unselected, already, flags.ledger, err)
    unchecked = 0  # instances a reboot's look-up could not read
    if operation is None:
        settled = protected_by_tags(spec, flags, groups, reach, options, found, err)
        kept = {p: {**held.get(p, {}), **already.get(p, {}), **settled.get(p, {})} for p in groups}
        skipped, unchecked = ignored(spec, groups, reach, options, found, err, settled=kept)
        for pair, outcomes in skipped.items():
            settled[pair] = {**outcomes, **settled.get(pair, {})}
    else:
        settled = protected_resources(operation, flags, groups, reach, options, err)
    for pair, outcomes in held.items():
        settled[pair] = {**outcomes, **settled.get(pair, {})}
    for pair, outcomes in already.items():  # already done: recorded so, whatever a rail says
        settled[pair] = {**settled.get(pair, {}), **outcomes}
    to_send = {p: [i for i in ids if i not in already.get(p, {})] for p, ids in groups.items()}
    to_send = {p: ids for p, ids in to_send.items() if ids}
    for pair, outcomes in left_out.items():
        groups[pair] = [*groups.get(pair, ()), *outcomes]
        settled[pair] = {**settled.get(pair, {}), **outcomes}
    if not flags.yes and to_send:
        confirm(spec, to_send, endpoint, flags, reach, found, err)
    # A --wait after a stop or a start: on the run's records, so that a kill before the
    # wait ended leaves what it acted on not known done (a terminate's success is final).
    waited = spec.target_state if waits and checked_by_wait(spec.name) else None
    job = Job(spec, groups, replace(options, endpoint=endpoint), title, settled, tags, waited)
    stage.sending = True

    def action(pair: Pair) -> Callable[[Sequence[str]], Mapping[str, Any]]:
        if operation is not None:
            from ..operation_call import OperationCall

            # Where a run of the ledger may have acted on them (here, not in another region).
            before = [i for i in groups.get(pair, ()) if recorded.holds(i, pair)]
            return OperationCall(
                reach.client(pair), operation, params=flags.params, sent_before=before
            )
        return InstanceCall(reach.client(pair), spec, params=flags.params)

    report = run_job(job, action, err, classify=classify_exception)
    if unchecked:
        # Sent without the look-up that keeps an ignored call from reading as done.
        report.extra["look_up_unchecked"] = unchecked
    unverified = unverified_count(settled)
    if unverified:
        report.extra["rail_unverified"] = unverified
        if report.exit_code in (0, EXIT_FAILED):  # a rail that could not see refused them
            report.exit_code = EXIT_REFUSED
    if unplaced and report.exit_code == 0:
        report.exit_code = EXIT_FAILED  # intents the resume could not look up: not done
    follow_up(spec, flags, job, report, reach, err)
    # The retry goes where the run went: its one region (a list's region column, which
    # `ledger failed` prints no column of for a single region), not this command's default.
    regions = {row.pair.region for row in report.pairs if row.pair.region}
    where = replace(flags, region=regions.pop()) if len(regions) == 1 else flags
    report.retry_args = retry_args(spec, where) + tuple(
        part
        for rail in held_by
        if rail not in flags.protect_tags
        for part in ("--protect-tag", rail)
    )
    step_summary(report, err)
    if flags.report:
        save_report(report, flags.report, err)
    return finish(report, flags.output, out, err, quiet=flags.quiet)


def retry_args(spec: ActionSpec, flags: Flags) -> tuple[str, ...]:
    """The options a retry of what is left repeats: where the run acted, its rails, the
    action's own flags and the share it left to others; not how its IDs were named (the
    ledger names them) nor what one run writes. An endpoint URL is shown redacted."""
    from ..ec2 import redact_url

    tags = [
        f"{t['Key']}={t['Value']}" if "Value" in t else t["Key"]
        for t in flags.params.get("Tags", ())
    ]
    valued = [
        ("--region", flags.region),
        ("--profile", flags.profile),
        ("--endpoint-url", redact_url(flags.endpoint_url)),
        ("--accounts", flags.accounts),
        ("--role-arn", flags.role_arn),
        ("--expect-account", flags.expect_account),
        *(("--protect-tag", t) for t in flags.protect_tags),
        ("--max-count", flags.max_count),
        *(("--tag", t) for t in tags),
        ("--headroom", flags.options.headroom or None),
    ]
    args = [part for name, value in valued if value is not None for part in (name, str(value))]
    args += [f"--{name}" for name, api in spec.flags.items() if flags.params.get(api)]
    args += ["--missing-ok"] if flags.options.missing_ok else []
    args += ["--wait", "--wait-timeout", f"{flags.wait_timeout:g}"] if flags.wait else []
    # The run's failure budget (and its undo) holds for the retry too; a fixed batch size.
    args += ["--max-errors", flags.max_errors] if flags.max_errors is not None else []
    args += ["--rollback"] if flags.rollback else []
    tuning = flags.options
    # A size given, whatever it is (one equal to auto's start is no auto: it stays).
    args += [] if tuning.auto_batch else ["--batch-size", str(tuning.batch_size)]
    if tuning.max_outage != RunOptions().max_outage:
        args += ["--max-outage", f"{tuning.max_outage:g}"]
    return tuple(args)


def _refuse_instance_options(operation: Operation, flags: Flags) -> None:
    """What only instances have: undo."""
    if flags.rollback:
        why = (
            "an undo of tags would need each resource's tags from before the run"
            if operation.name in ("create-tags", "delete-tags")
            else "what EC2 deleted, deregistered or released does not come back"
        )
        raise UsageError(
            f"--rollback: for stop and start; swarm ec2 {operation.name} cannot be undone ({why})"
        )


def reconcile_operation(
    operation: Operation,
    flags: Flags,
    groups: Mapping[Pair, Sequence[str]],
    reach: "Reach",
    options: RunOptions,
    err: Console,
    recorded: Recorded,
) -> dict[Pair, dict[str, Outcome]]:
    """--resume of an operation: those its Describe call shows gone are done, unsent, if the
    ledger holds an intent of them (``recorded``)."""
    from ..observe import observe_api, reconcile_gone

    if not flags.resume or not groups:
        return {}
    count = sum(len(ids) for ids in groups.values())
    if operation.tags:
        done, checked = _reconcile_tags(operation, flags, groups, reach, options, err)
        api = "DescribeTags"
    elif operation.observe is None:
        err.print(
            f"resume: {operation.name} leaves nothing to look up; the {count} not known "
            f"{operation.verb} are sent again",
            markup=False,
        )
        return {}
    else:
        done, checked = reconcile_gone(
            operation,
            groups,
            reach.client,
            err,
            options=replace(options, ledger=None, progress="none"),
            recorded=recorded,
        )
        api = observe_api(operation)
    already = sum(len(v) for v in done.values())
    err.print(
        f"resume: {api} shows {already} of {count} already {operation.verb} (to be recorded "
        f"done, not sent); {count - already} not done yet"
        + (
            f" ({count - checked} could not be read: {unread_fate(flags)})"
            if checked < count
            else ""
        ),
        markup=False,
    )
    return done


def _warn_run_only(flags: Flags, err: Console) -> None:
    """A plan sends nothing: the options of a run's sending, given to one, say so (not
    refused: a CI job passes one set of options to its plan and its run)."""
    given = [
        name
        for name, on in (
            ("--report", flags.report),
            ("--trace", flags.options.trace),
            ("--wait", flags.wait),
            ("--max-errors", flags.max_errors),
            ("--rollback", flags.rollback),
            ("--headroom", flags.options.headroom),
        )
        if on
    ]
    if given:
        warn(
            err,
            f"a plan sends nothing: {', '.join(given)} (a run's option"
            f"{'s' if len(given) > 1 else ''}) ignored; no report or trace is written",
        )


def _reconcile_tags(
    operation: Operation,
    flags: Flags,
    groups: Mapping[Pair, Sequence[str]],
    reach: "Reach",
    options: RunOptions,
    err: Console,
) -> tuple[dict[Pair, dict[str, Outcome]], int]:
    """--resume of create-tags / delete-tags: the resources whose tags already are as the
    run asks (every tag set with its value; every tag named gone), as done, unsent.

    DescribeTags shows nothing of a resource without tags, nor of one that does not exist
    (a mistyped ID, another region or account): only one it shows with other tags is
    known untagged. The rest are sent again (a tag call is idempotent) and get EC2's own
    answer."""
    from ..observe import tags_of

    asked = [(t["Key"], t.get("Value")) for t in flags.params.get("Tags", [])]
    setting = operation.name == "create-tags"
    read, _ = tags_of(
        groups,
        [key for key, _ in asked] if setting else [],  # all of them: proof it exists
        reach.client,
        err,
        options=replace(options, ledger=None, progress="none"),
    )

    def as_asked(tags: Mapping[str, str]) -> bool:
        if setting:
            return all(tags.get(key) == value for key, value in asked)
        gone = not any(key in tags and value in (None, tags[key]) for key, value in asked)
        return gone and bool(tags)

    done: dict[Pair, dict[str, Outcome]] = {}
    already = Outcome(
        Kind.SUCCEEDED, "AlreadyDone", f"DescribeTags shows it {operation.verb}; not sent"
    )
    for pair, on in read.items():
        for i, tags in on.items():
            if as_asked(tags):
                done.setdefault(pair, {})[i] = already
    return done, sum(len(on) for on in read.values())


def show_plan(
    spec: ActionSpec,
    flags: Flags,
    groups: Mapping[Pair, Sequence[str]],
    reach: "Reach",
    options: RunOptions,
    out: Console,
    err: Console,
    operation: Operation | None = None,
    held: Mapping[Pair, Mapping[str, Outcome]] | None = None,
    unselected: set[str] | None = None,
    already: Mapping[Pair, Mapping[str, Outcome]] | None = None,
) -> int:
    """--dry-run / swarm plan: look every instance up and predict its outcome; send nothing.

    ``held``: what a resume holds back unsent (see :func:`_held_by_rail`), predicted so;
    ``unselected``: what a resume by selection looks up and never sends (gone, it is
    done; still there, not selected); ``already``: what a resume's look-up shows done
    (recorded done by the run, unsent)."""
    from ..plan import Prediction, estimate, make_plan
    from ..plan_view import render_plan, write_plan_ids

    if operation is not None:
        from ..observe import plan_operation

        plan = plan_operation(
            operation,
            spec,
            groups,
            reach.client,
            err,
            options=replace(options, ledger=None),
            params=flags.params,
            permission=False,
        )
    else:
        # The reads show their progress as a run does: a plan of 100,000 instances asks
        # each one's protection, one call each, for minutes.
        plan = make_plan(
            spec,
            groups,
            reach.client,
            err,
            options=replace(options, ledger=None),
            check_protection=flags.check_protection,
            params=flags.params,
            permission=False,
        )
    plan.missing_ok = options.missing_ok
    unseen: set[tuple[Pair, str]] = set()  # rows a rail could not check
    try:
        predicate = protect_tags(flags.protect_tags)
    except RailError as exc:
        raise error_for(exc.code, exc.message) from exc
    if predicate is not None and operation is not None:
        # As the run will: tags read with DescribeTags; one that could not be read is
        # not sent, so predicted unknown.
        read, why = read_protected_tags(flags, groups, reach, options, err, calls=plan.calls)
        unread = "--protect-tag could not read its tags"
        plan.rows = [
            replace(r, prediction=Prediction.UNKNOWN, reason=f"{unread} ({why.get(r.id, '?')})")
            if r.id not in read.get(r.pair, {})
            else replace(r, prediction=Prediction.PROTECTED, reason=PROTECTED_REASON)
            if predicate(read[r.pair][r.id]) and r.prediction is not Prediction.DOES_NOT_EXIST
            else r
            for r in plan.rows
        ]
        unseen = {(r.pair, r.id) for r in plan.rows if r.id not in read.get(r.pair, {})}
    elif predicate is not None:
        # As the run will: a tagged instance is recorded failed (Protected), never sent;
        # one whose tags could not be read is already predicted unknown (and refused), as
        # is one DescribeInstances left out of its answer with no error naming it.
        plan.rows = [
            replace(
                r,
                prediction=Prediction.UNKNOWN,
                reason="not listed by DescribeInstances, no error naming it: its tags unread",
            )
            if (r.pair, r.id) in plan.unlisted and r.prediction is Prediction.DOES_NOT_EXIST
            else r
            for r in plan.rows
        ]
        unseen = {
            (r.pair, r.id)
            for r in plan.rows
            if r.info is None and r.prediction is Prediction.UNKNOWN
        }
        plan.rows = [
            replace(r, prediction=Prediction.PROTECTED, reason=PROTECTED_REASON)
            if r.info is not None and predicate(r.info.tags)
            else r
            for r in plan.rows
        ]
    if held:
        unseen |= {
            (r.pair, r.id)
            for r in plan.rows
            if r.id in held.get(r.pair, {})
            and r.prediction is Prediction.WOULD_ACT
            and held[r.pair][r.id].code != PROTECTED_CODE
        }
        plan.rows = [
            replace(
                r,
                prediction=Prediction.PROTECTED
                if held[r.pair][r.id].code == PROTECTED_CODE
                else Prediction.UNKNOWN,
                reason=held[r.pair][r.id].message or "",
            )
            if r.id in held.get(r.pair, {}) and r.prediction is Prediction.WOULD_ACT
            else r
            for r in plan.rows
        ]
    if unselected:
        from ..resume import GONE_IS_DONE

        # As the run's look-up: gone is done where the action makes things vanish (a
        # deletion, a terminate) and a stopped run may have acted on it; what is still
        # there, or gone with no run's call of it, is left out.
        gone_done = operation is not None or spec.name in GONE_IS_DONE
        kept = (Prediction.ALREADY, Prediction.IGNORED)
        plan.rows = [
            r
            if r.id not in unselected or r.prediction in kept
            else replace(r, prediction=Prediction.ALREADY, reason="gone: a stopped run's doing")
            if r.prediction is Prediction.DOES_NOT_EXIST
            and gone_done
            and r.id in (already or {}).get(r.pair, {})
            else replace(r, prediction=Prediction.NOT_SELECTED, reason=NOT_SELECTED.message or "")
            for r in plan.rows
        ]
    if already:
        # As the run: what its look-up shows done is recorded so, whatever a rail says.
        plan.rows = [
            replace(r, prediction=Prediction.ALREADY, reason=_already_reason(already, r))
            if r.id in already.get(r.pair, {})
            else r
            for r in plan.rows
        ]
        unseen = {(pair, i) for pair, i in unseen if i not in already.get(pair, {})}
    plan.rail_unseen = len(unseen)
    # What the run records without a call: a rail's refusals (tagged, or unseen), what it
    # leaves unselected or finds done, and a reboot of what EC2 would ignore.
    plan.unsent = unseen | {
        (r.pair, r.id)
        for r in plan.rows
        if r.reason == PROTECTED_REASON
        or r.id in (held or {}).get(r.pair, {})
        or r.id in (unselected or ())
        or r.id in (already or {}).get(r.pair, {})
        or (operation is None and r.prediction is Prediction.IGNORED)
    }
    # The permission last, on an ID the run would send: never one a rail keeps back.
    from ..ec2 import InstanceCall
    from ..observe import dry_run_calls
    from ..plan import check_plan_permission

    check_plan_permission(
        plan,
        dry_run_calls(operation, reach.client, flags.params)
        if operation is not None
        else lambda pair: InstanceCall(reach.client(pair), spec, dry_run=True, params=flags.params),
        err,
        options=replace(options, ledger=None, progress="none"),
        unknown_sent=predicate is None,
    )
    est = estimate(spec, plan, options.batch_size, auto=options.auto_batch)
    unchecked = any(perm.allowed is None for perm in plan.permission.values())
    code = (
        EXIT_CREDENTIALS
        if plan.fatal is not None
        else EXIT_REFUSED  # as the run: a rail that could not see refuses
        if plan.rail_unseen
        else EXIT_FAILED
        if plan.would_fail or plan.unknown or unchecked  # a permission not checked is unread
        else 0
    )
    shown = err if flags.output is Output.json else out
    render_plan(plan, est, shown)
    if operation is not None and operation.tags:
        from ..operation_call import tags_shown, tags_text

        verb = "set" if operation.name == "create-tags" else "take off"
        tags = tags_shown(tags_text(flags.params["Tags"]))
        shown.print(f"the tags it would {verb}: {literal(tags)}", markup=False, highlight=False)
    if flags.plan_out:
        # After the table: a file that cannot be written (exit 74) does not take it along.
        count = write_plan_ids(plan, flags.plan_out)
        err.print(
            f"plan: {count} {one_or_more(spec.resource)} that would be acted on written to "
            f"{literal(flags.plan_out)}",
            markup=False,
        )
    if flags.output is Output.json:
        _emit_plan(plan, est, code)
    return code


def _already_reason(already: Mapping[Pair, Mapping[str, Outcome]], row: "Row") -> str:
    outcome = already[row.pair][row.id]
    return outcome.message or outcome.code or "done already, as the look-up shows"


def _emit_plan(plan: "Plan", est: "Estimate", code: int) -> None:
    """A plan's one JSON object: the plan, its exit code and what that code means."""
    from ..plan_view import plan_json

    emit_json(
        {"dry_run": True, **plan_json(plan, est), "exit_code": code, "meaning": _plan_meaning(code)}
    )


def _plan_meaning(code: int) -> str:
    """A dry run's exit code in words: its 1 is not a run's (nothing was sent)."""
    if code == EXIT_FAILED:
        return "some would fail or could not be read; nothing was sent"
    return (
        "every one would be acted on, or is already done; nothing was sent"
        if code == 0
        else exit_meaning(code)
    )


def budget(text: str | None, total: int) -> int | None:
    if text is None:
        return None
    from ..saga import parse_budget

    try:
        return parse_budget(text, total)
    except ValueError as exc:
        raise UsageError(f"--max-errors: {exc}") from exc


def _never(pair: Pair) -> Callable[[Any], Mapping[str, Any]]:
    raise AssertionError("a job with no pairs makes no action")


def register(
    spec: ActionSpec,
    summary: str,
    *,
    into: typer.Typer = app,
    plan: bool = False,
    name: str | None = None,
    operation: Operation | None = None,
) -> None:
    """Add ``swarm <spec.name>`` with every shared option (and the action's own flags).

    With ``plan``, the command only predicts (``swarm plan <action>``, as ``--dry-run``).
    ``name`` names the command instead of the action; ``operation`` makes it run an
    operation of the registry that is not an instance action (``swarm ec2 ...``).
    """
    outline = spec  # with an operation, its spec is read from botocore's model when run
    is_stop = "force" in spec.flags
    takes_tags = operation is not None and operation.tags
    # An instance action under its operation's name runs as the short command does.
    runs = operation if operation is not None and operation.instance_action is None else None
    path = f"ec2 {operation.name}" if operation is not None else spec.name
    # What the help says of the IDs, the selection and the plan: a resource operation's own.
    noun = spec.resource
    header = (runs.id_rule if runs is not None else INSTANCES).column_hint
    if runs is not None:
        describe = runs.observe.api if runs.observe else None
        filter_help = (
            f"Select {plural(noun)} instead of --ids, with {describe}'s filter names (tag:env=ci, "
            "and its own; several values a,b; a comma inside a value \\,). Repeatable, each "
            "name once: all must match."
            if describe
            else f"Not for {runs.name}: it has no Describe call to select with."
        )
        if runs.observe is None:
            older_help = f"Not for {runs.name}: it has no Describe call to select with."
        elif runs.observe.created is None:
            older_help = f"Not for {runs.name}: EC2 gives no creation time to select by."
        else:
            older_help = f"Select {plural(noun)} created at least this long ago (30m, 2h, 7d, 1w)."
        # Not from botocore's model, which help must not load: the tag operations take a
        # list, the others one ID (a test holds the registry to the model).
        per_call = "" if runs.tags else f" {runs.api} takes one ID per call."
    else:
        filter_help, older_help, per_call = "", "", ""
    if runs is None:
        from ..states import done_words, observable

        resume_read = "DescribeInstances"
        resume_help = (
            "look the rest up first (DescribeInstances) and record as done, unsent, "
            f"those it shows already {done_words(spec.name)}."
            if observable(spec.name)
            else f"the rest are sent again ({spec.name} leaves no state to look up)."
        )
        wait_help = (
            "Then wait until each instance reaches the action's state (stopped, running, "
            "terminated), asking DescribeInstances through a window of its own."
        )
    else:
        resume_read = "DescribeTags" if runs.tags else describe or "its Describe call"
        resume_help = (
            f"look the rest up first ({resume_read}) and record as done, unsent, those it "
            f"shows already {runs.verb}."
        )
        wait_help = (
            f"Then wait until each {noun} is {runs.verb} (gone), asking {describe} through "
            "a window of its own."
        )

    def command(
        ids: Annotated[
            str | None,
            typer.Option(
                "--ids",
                metavar="FILE",
                help=f"{spec.resource.capitalize()} IDs: one or more per line (# comments "
                f"allowed), or a CSV/TSV whose header names {header} and optionally "
                "region and account, or JSON lines with those fields (or swarm list "
                "--output json's object); - reads stdin.",
                show_default=False,
            ),
        ] = None,
        filters: Annotated[
            list[str] | None,
            typer.Option(
                "--filter",
                metavar="NAME=VALUE",
                help=filter_help or FILTER_HELP,
                show_default=False,
            ),
        ] = None,
        older_than: Annotated[
            str | None,
            typer.Option("--older-than", metavar="AGE", help=older_help or OLDER_THAN_HELP),
        ] = None,
        exclude_ids: ExcludeOpt = None,
        expect_account: ExpectAccountOpt = None,
        protect_tag: Annotated[
            list[str] | None,
            typer.Option("--protect-tag", metavar="KEY[=VALUE]", help=protect_tag_help(noun)),
        ] = None,
        max_count: Annotated[
            int | None,
            typer.Option("--max-count", metavar="N", min=0, help=max_count_help(noun)),
        ] = None,
        check_protection: Annotated[
            bool,
            typer.Option(
                "--check-protection/--no-check-protection",
                hidden=runs is not None,
                help=("A" if plan else "With --dry-run: a")
                + "sk each instance's termination or stop protection "
                "(DescribeInstanceAttribute: one call per instance).",
            ),
        ] = True,
        plan_out: Annotated[
            str | None,
            typer.Option(
                "--plan-out",
                metavar="FILE",
                help=("W" if plan else "With --dry-run: w")
                + "rite the IDs that would be acted on, ready for --ids.",
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
                help=f"JSONL file: every {noun} as pending before the first call, then "
                "its outcome.",
            ),
        ] = "swarm-ledger.jsonl",
        resume: Annotated[
            bool,
            typer.Option(
                "--resume",
                help=f"Skip IDs the ledger already records as {spec.verb}; {resume_help}",
            ),
        ] = False,
        yes: Annotated[
            bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")
        ] = False,
        dry_run: Annotated[
            bool,
            typer.Option(
                "--dry-run",
                hidden=plan,
                help=(
                    "Change nothing: show the calls the run would make (a tag operation "
                    "looks nothing up but the tags --protect-tag needs: every ID would act, "
                    "as EC2 takes any ID), and how long the run would take."
                    if takes_tags
                    else f"Change nothing: look every {noun} up and predict its outcome "
                    "(would act, already done, missing, wrong state, protected, not "
                    "permitted), and how long the run would take; exit 1 if any would fail."
                ),
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
        tag: Annotated[
            list[str] | None,
            typer.Option(
                "--tag",
                metavar="KEY=VALUE",
                hidden=not takes_tags,
                help="A tag to add (create-tags: KEY=VALUE) or remove (delete-tags: KEY, or "
                "KEY=VALUE to remove it only with that value); repeatable, up to 50. As EC2 "
                "takes them: a key of at most 128 characters, not starting aws:, a value of "
                "at most 256, no control characters; refused otherwise, before anything is "
                "sent.",
            ),
        ] = None,
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
                hidden=plan,
                help="N or P%: stop sending once more than that many have failed or are "
                "missing (0: at the first).",
            ),
        ] = None,
        rollback: Annotated[
            bool,
            typer.Option(
                "--rollback",
                hidden=plan or runs is not None,
                help="When --max-errors stops the run, undo what it did (start what it "
                "stopped, stop what it started). Terminate cannot be undone.",
            ),
        ] = False,
        wait: Annotated[
            bool,
            typer.Option(
                "--wait",
                hidden=plan or (runs is not None and runs.observe is None),
                help=wait_help,
            ),
        ] = False,
        wait_timeout: Annotated[
            float,
            typer.Option(
                "--wait-timeout",
                metavar="SECONDS",
                min=0,
                hidden=plan or (runs is not None and runs.observe is None),
                help="Seconds --wait waits at most"
                + (
                    "."
                    if runs is not None
                    else " (and --rollback for the run's instances still stopping or pending, "
                    "which EC2 refuses to undo before they are there)."
                ),
            ),
        ] = DEFAULT_WAIT_TIMEOUT,
        batch_size: Annotated[
            str,
            typer.Option(
                "--batch-size",
                metavar="N|auto",
                callback=check_batch_size,
                help=BATCH_SIZE_HELP + per_call,
            ),
        ] = "auto",
        headroom: Annotated[float, headroom_option(hidden=plan)] = 0.0,
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
                hidden=plan,
                help="Also write one self-contained HTML page: summary, the window over time "
                "with throttles marked, rows per pair, what did not succeed.",
            ),
        ] = None,
        drain_timeout: DrainTimeout = 3.0,
        call_timeout: CallTimeout = None,
        max_outage: MaxOutage = 45.0,
        missing_ok: MissingOk = False,
        trace: Annotated[str | None, trace_option(hidden=plan)] = None,
    ) -> int:
        spec = runs.spec if runs is not None else outline
        size, auto_batch = batch_options(batch_size, spec.limits)
        if (force or hibernate) and not is_stop:
            raise UsageError(f"--force and --hibernate are for swarm stop, not {spec.name}")
        if force and hibernate:
            raise UsageError("--force and --hibernate cannot be used together")
        if plan_out and not (dry_run or plan):
            raise UsageError(
                f"--plan-out writes what a plan predicts: add --dry-run (or run swarm plan "
                f"{path.removeprefix('ec2 ')}); a run's outcomes are in its ledger"
            )
        params: dict[str, Any] = {
            spec.flags[k]: True for k, on in (("force", force), ("hibernate", hibernate)) if on
        }
        if not check_protection and not (dry_run or plan):
            warn(
                consoles()[1],
                "--no-check-protection is for --dry-run and swarm plan: a run asks no "
                "protection up front (EC2 refuses a protected instance, OperationNotPermitted)",
            )
        if tag and not takes_tags:
            raise UsageError(f"--tag is for swarm ec2 create-tags and delete-tags, not {spec.name}")
        if takes_tags:
            params["Tags"] = _tags(tag or (), spec.name)
        if runs is not None:
            if not auto_batch and runs.model.per_call < size:
                warn(
                    consoles()[1],
                    f"--batch-size {batch_size}: {runs.api} takes at most "
                    f"{runs.model.per_call} ID(s) per call; each call carries "
                    f"{runs.model.per_call}",
                )
            size = min(size, runs.model.per_call)
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
                    window=window_profile(window_profile_, min_window, max_window),
                    progress="none" if quiet else progress.value,
                    verbose=verbose,
                    drain_timeout=drain_timeout,
                    call_timeout=call_timeout,
                    max_outage=max_outage,
                    missing_ok=missing_ok,
                ),
            ),
            runs,
        )

    # One line per paragraph: rich keeps a docstring's line breaks.
    if plan:
        body = [
            f"Looks every {spec.resource} up, asks each one's protection (unless "
            "--no-check-protection), checks the permission with one DryRun call per account "
            f"and region, and predicts each {spec.resource}'s outcome and how long the real "
            "run would take at EC2's documented limits. Writes no ledger; --plan-out writes "
            "the IDs that would be acted on, ready for --ids.",
            PLAN_EXIT_CODES,
        ]
    else:
        body = [
            f"Before the first call, every {spec.resource} is in the ledger as pending; "
            "SIGINT, SIGTERM and SIGHUP stop sending, wait --drain-timeout for calls in "
            "flight, and record the rest. Retry what is left with: swarm ledger failed "
            f"--retryable --action {spec.name} LEDGER >left.txt && swarm {path} "
            f"--ledger LEDGER --ids left.txt --resume --yes{' --tag ...' if takes_tags else ''}",
            "The first call goes alone; after its success up to 10 calls may be in flight, "
            "paced over half a round trip, doubling each round trip until EC2 first "
            "throttles. From then on calls leave paced at the rate measured between "
            "throttles, probing upward every two round trips; throttles that slowing down "
            "does not reduce are taken as noise, not as the limit. --headroom leaves a share "
            "of the rate to the account's other clients.",
            EXIT_CODES,
        ]
    command.__doc__ = "\n\n".join([summary, *body])
    into.command(name or spec.name)(command)


def _tags(values: Sequence[str], action: str) -> list[dict[str, str]]:
    from ..operation_call import parse_tags

    if not values:
        # DeleteTags without Tags removes every tag: never by omission.
        raise UsageError(f"{action} needs at least one --tag")
    try:
        return parse_tags(values, need_value=action == "create-tags")
    except ValueError as exc:
        raise UsageError(str(exc)) from exc


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
            "Without it, the ledger's latest stop or start run is undone when it alone has "
            "something left to undo (a run and its --resume, for example); otherwise the runs "
            "with something left to undo are listed.",
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
    wait_timeout: Annotated[
        float,
        typer.Option(
            "--wait-timeout",
            metavar="SECONDS",
            min=0,
            help="Seconds --wait waits at most; and the undo first, for instances still "
            "stopping or pending (EC2 refuses to undo them before they are there).",
        ),
    ] = DEFAULT_WAIT_TIMEOUT,
    output: OutputOpt = Output.text,
    progress: ProgressOpt = ProgressChoice.auto,
    expect_account: ExpectAccountOpt = None,
    protect_tag: ProtectTagOpt = None,
    max_count: Annotated[
        int | None,
        typer.Option(
            "--max-count",
            metavar="N",
            min=0,
            help="Refuse (exit 3) an undo of more than N instances.",
        ),
    ] = None,
) -> int:
    """Undo a stop or start run from its ledger: start what it stopped, stop what it started.

    The undo is a run of its own, appended to the same ledger. Terminate and reboot cannot be undone.
    A run with nothing left to undo (it changed nothing, or later runs undid it) exits 0, saying so.

    Exit codes: 0 all undone, or nothing left to undo · 1 some failed or could not be looked up · 2 bad usage, or a run that cannot be undone (terminate, reboot, terminated since) · 3 refused by a rail or not confirmed · 4 credentials or permission · 74 the ledger (or the output) could not be written · 130 interrupted (Ctrl-C) · 128+N stopped by signal N.
    """  # noqa: E501 - rich keeps a docstring's line breaks
    with contextlib.ExitStack() as holds, _nothing_sent_if_stopped(stage := _Stage(holds)):
        from ..saga import SagaError, check_ids, undo_plan

        out, err = consoles()
        try:
            # The undo is appended to this ledger: refused now if it could not be, not after
            # the look-ups and the confirmation.
            check_ledger_path(
                ledger,
                fix="the undo is appended to the run's ledger: make it writable, or copy "
                "it to a file that is and roll back from the copy",
            )
            # Held before it is read: a run still writing it is not yet there to undo.
            if os.path.isfile(ledger):
                stage.hold(
                    ledger,
                    "a run (or another rollback) is still writing it: roll back once it has ended",
                )
            plan = undo_plan([ledger], run or None, allow_empty=True)
            check_ids(plan)
            if plan.damaged:
                warn(
                    err,
                    f"{describe_damage(plan.damaged)}: what they said is unknown to the undo (an "
                    "intent whose outcome was on one is taken as maybe done, and undone if EC2 "
                    "shows it so)",
                )
            if plan.terminated:
                err.print(
                    f"rollback: {plan.terminated} instance(s) of the run were terminated since "
                    "(a terminate in the ledger): left alone",
                    markup=False,
                )
            if plan.superseded:
                err.print(
                    f"rollback: {plan.superseded} instance(s) of the run were undone by later "
                    "runs of the ledger already: left alone (theirs now)",
                    markup=False,
                )
        except LedgerInUse:
            raise  # exit 74, as for a run
        except SagaError as exc:
            if exc.nothing_to_undo:
                return _nothing_to_undo(str(exc), output, err)
            raise UsageError(str(exc)) from exc
        except LedgerError as exc:
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
            # --batch-size auto: from where the undo's bursts are spent together (a start:
            # 200), sized from the answers after.
            options=RunOptions(
                ledger=ledger,
                progress=progress.value,
                batch_size=initial_size(plan.action.limits),
                auto_batch=True,
            ),
            output=output,
            accounts=accounts,
            role_arn=role_arn,
            wait=wait,
            wait_timeout=wait_timeout,
            expect_account=expect_account,
            protect_tags=tuple(protect_tag or ()),
            max_count=max_count,
        )
        if expect_account is not None:
            expect_account_of(flags, next(iter({**plan.groups, **plan.unsure}), None), err)
        reach = Reach(flags, load_account_map(accounts, role_arn), 500)
        reach.connect({**plan.groups, **plan.unsure}, err)
        if reach.unreachable:
            # An undo is all or nothing: nothing is written or sent until every account is in reach.
            failures = reach.failures
            hint = (
                "check their roles"
                if accounts or role_arn
                else "pass --accounts FILE or --role-arn ARN to reach them"
            )
            raise CredentialsError(
                f"cannot reach account(s) {', '.join(sorted(failures))} ("
                + "; ".join(failures[a] for a in sorted(failures))
                + f"): {hint}; nothing was sent"
            )
        endpoint = reach.endpoint or ""
        groups, unread = reconcile_undo(plan, reach, flags.options, err)
        if unread:
            # All or nothing: an undo of part of the run would be reported as the undo.
            raise SwarmError(
                f"rollback: {unread}; nothing was sent: run the rollback again once they "
                "can be read"
            )
        if not groups:
            # What it may have done was looked up: none of it is as it left it now.
            said = (
                f"run {plan.run} ({plan.of}) left nothing to undo: none of what it may have "
                "done is in its end state now"
            )
            if plan.damaged:
                # A damaged line may have held an intent of the run: not looked up.
                raise UsageError(
                    f"{said}; but {describe_damage(plan.damaged)}: what they held is "
                    "unknown, so this may not be so"
                )
            return _nothing_to_undo(said, output, err)
        try:
            check_max_count(
                sum(map(len, groups.values())),
                max_count,
                action=plan.action.name,
                protecting=bool(protect_tag),
            )
        except RailError as exc:
            raise error_for(exc.code, exc.message) from exc
        found: dict[str, Instance] = {}
        settled = protected_by_tags(plan.action, flags, groups, reach, flags.options, found, err)
        if not yes:
            confirm(plan.action, groups, endpoint, flags, reach, found, err)
        options = replace(flags.options, endpoint=endpoint)
        title = f"rollback of {plan.run}"
        settle(plan, groups, reach, options, err, wait_timeout)
        stage.sending = True
        report = run_plan(
            plan.action, groups, options, reach, err, title, settled, wait=wait, undoes=plan.runs
        )
        report.extra["undoes"] = plan.run  # what the step summary is headed by
        job = Job(plan.action, groups, options)
        follow_up(plan.action, flags, job, report, reach, err)
        # The retry goes where the undo went, behind the same rails: the ledger's one region
        # (the list it prints names no region), and this command's options.
        regions = {pair.region for pair in groups}
        where = replace(flags, region=regions.pop() if len(regions) == 1 else None)
        report.retry_args = retry_args(plan.action, where)
        # What is left of the undo is finished by the undo of the same run: it acts on
        # that run's instances only (its options, less the region the ledger names).
        runs = list(run) if run else [plan.run]
        again = finish_rollback(plan.action, report, ledger, runs, flags)
        if again:
            report.extra["finish"] = again
        step_summary(report, err)
        return finish(report, output, out, err)


def finish_rollback(
    spec: ActionSpec, report: Report, ledger: str, runs: Sequence[str], flags: Flags
) -> str | None:
    """The command that finishes an undo cut short, refused in part or not seen through
    by its wait: the undo again, of the same runs, behind the same options (less the
    region the ledger names). None when nothing is left that another try could do."""
    stuck = sum(report.failed_for_good().values())
    waited = report.extra.get("wait") or {}
    unseen = waited.get("timed_out") or waited.get("not_checked")
    if report.counts["failed"] + report.counts["pending"] <= stuck and not unseen:
        return None
    args = list(retry_args(spec, flags))
    if not flags.wait and flags.wait_timeout != DEFAULT_WAIT_TIMEOUT:
        args += ["--wait-timeout", f"{flags.wait_timeout:g}"]  # also for instances on their way
    named = "".join(f" --run {shell_quote(r)}" for r in runs)
    given = "".join(f" {shell_quote(a)}" for a in args)
    # --yes: the instances are those this undo was already allowed to act on (as a
    # run's retry of the rest); without it, a job with no terminal is refused (exit 3).
    return f"swarm rollback {shell_quote(ledger)}{named}{given} --yes"


EC2_STATES = ("pending", "running", "stopping", "stopped", "shutting-down", "terminated")
LISTED_STATES = ("pending", "running", "stopping", "stopped")  # swarm list's default


def list_state_filter(filters: Sequence[str], states: Sequence[str]) -> list[str]:
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


def _nothing_to_undo(message: str, output: Output, err: Console) -> int:
    """A rollback whose run is as it was before already: said, and done (exit 0), so that
    a CI step that rolls back after a failed run passes when that run changed nothing."""
    err.print(f"rollback: {message}", markup=False)
    if output is Output.json:
        emit_json({"exit_code": 0, "meaning": exit_meaning(0), "nothing_to_undo": message})
    return 0


def _listed(item: Any, operation: Operation | None) -> dict[str, Any]:
    """One row of ``swarm list --output json`` (``item``: a ``select.Selected``)."""
    if operation is None:
        return dict(item.to_dict())
    return {
        "id": item.id,
        "state": item.state,
        "type": item.type,
        "created": None if item.launch_time is None else item.launch_time.isoformat(),
        "name": item.name,
        "tags": dict(item.tags),
        "in_use": item.in_use,
    }


def listed_kinds() -> dict[str, Operation]:
    """What ``swarm list KIND`` lists besides instances, by plural name: the resources of
    the operations that have a Describe call (the first of each resource)."""
    from ..actions.operations import RESOURCE_OPERATIONS

    kinds: dict[str, Operation] = {}
    for op in RESOURCE_OPERATIONS.values():
        if op.observe is not None:
            kinds.setdefault(plural(op.resource), op)
    return kinds


def _kind_of(kind: str) -> Operation | None:
    """The operation whose resources ``swarm list KIND`` lists; None for instances."""
    name = kind.strip().lower()
    if name in ("instances", "instance"):
        return None
    kinds = listed_kinds()
    found = kinds.get(name) or kinds.get(plural(name))
    if found is None:
        raise UsageError(f"swarm list {kind}: expected instances, {', '.join(kinds)}")
    return found


@app.command("list")
def list_cmd(
    kind: Annotated[
        str,
        typer.Argument(
            metavar="KIND",
            help="What to list: instances (the default), snapshots, volumes, images or "
            "addresses (the account's own).",
            show_default=False,
        ),
    ] = "instances",
    filters: Annotated[
        list[str] | None,
        typer.Option(
            "--filter",
            metavar="NAME=VALUE",
            help="Keep those EC2's filter selects, with the Describe call's filter names "
            "(instances: tag:env=ci, instance-state-name=running; snapshots: "
            "status=completed; several values a,b; a comma inside a value \\,). Repeatable, "
            "each name once: all must match.",
            show_default=False,
        ),
    ] = None,
    older_than: Annotated[
        str | None,
        typer.Option(
            "--older-than",
            metavar="AGE",
            help="Keep those launched (instances) or created at least this long ago (30m, "
            "2h, 7d, 1w); not for addresses, which EC2 gives no creation time.",
        ),
    ] = None,
    exclude_ids: Annotated[
        str | None,
        typer.Option(
            "--exclude-ids",
            metavar="FILE",
            help="IDs never to list, taken out of what the filters select (an ID list of the "
            "same kind, any format).",
        ),
    ] = None,
    region: RegionOpt = None,
    profile: ProfileOpt = None,
    endpoint_url: EndpointOpt = None,
    accounts: AccountsOpt = None,
    role_arn: RoleArnOpt = None,
    output: Annotated[
        Output,
        typer.Option(
            "--output",
            "-o",
            help="text: the IDs, one per line (a CSV across several pairs); json: one object "
            "on stdout with every item's details.",
        ),
    ] = Output.text,
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
    unused: Annotated[
        bool,
        typer.Option(
            "--unused",
            help="Snapshots no AMI of the account uses, volumes attached to nothing (and no "
            "longer creating), images without deregistration protection, addresses "
            "associated with nothing: those EC2 would delete, deregister or release.",
        ),
    ] = False,
) -> None:
    """Print the instances (or snapshots, volumes, images, addresses) the filters select: IDs one per line (a CSV with region and account across several), ready for --ids.

    It composes: swarm list --filter tag:env=ci | swarm stop --ids - --yes, and swarm list snapshots --unused --older-than 90d | swarm ec2 delete-snapshot --ids - --yes. Terminated and shutting-down instances are left out unless --state (or a filter on instance-state-name) asks for them. With --output json, one object: the list under the kind's name ("instances", "snapshots"...).

    Exit codes: 0 listed (an empty list included) · 1 the listing could not be read whole · 2 bad usage or input · 4 credentials or permission · 74 the output could not be written · 130 interrupted (Ctrl-C).
    """  # noqa: E501 - rich keeps a docstring's line breaks
    out, err = consoles()
    operation = _kind_of(kind)
    if operation is None:
        if unused:
            raise UsageError(
                "--unused is for snapshots, volumes, images and addresses, not instances"
            )
        filters = [*(filters or ()), *list_state_filter(filters or (), states or ())]
    else:
        if states:
            raise UsageError(
                f"--state is for instances: filter {plural(operation.resource)} with --filter "
                "(e.g. status=completed), as EC2 names them"
            )
        if unused and (operation.observe is None or operation.observe.in_use is None):
            raise UsageError(
                f"--unused: nothing makes EC2 refuse to {operation.name.split('-')[0]} "
                f"{plural(operation.resource)}; select with --filter or --older-than"
            )
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
        filters=filters or (),
        older_than=older_than,
        exclude_ids=exclude_ids,
    )
    account_map = load_account_map(accounts, role_arn)
    reach = Reach(flags, account_map, 10)
    found: dict[str, Instance] = {}
    groups = select_groups(
        None,
        flags,
        account_map,
        default_region(region, profile),
        reach,
        found,
        err,
        operation,
        unused,
    )
    if output is Output.json:
        rows = [
            {"region": p.region, "account": p.account, **_listed(found[i], operation)}
            for p, ids in groups.items()
            for i in ids
        ]
        emit_json({plural(operation.resource) if operation else "instances": rows})
        return
    if len(groups) > 1 or any(p.account for p in groups):
        out.file.write(f"{'id' if operation else 'instance_id'},region,account\n")
        for p, ids in groups.items():
            out.file.write(
                "".join(f"{literal(i)},{literal(p.region)},{p.account or ''}\n" for i in ids)
            )
    else:
        out.file.write("".join(f"{literal(i)}\n" for ids in groups.values() for i in ids))
