"""Which instances, where: an ID list or a selection made into (account, region) pairs and
their IDs, a shard of them kept, and what a resume finds already done."""

from __future__ import annotations

import itertools
import os
import re
import sys
from collections.abc import Mapping, Sequence
from typing import Protocol

from rich.console import Console

from ..accounts import Account
from ..actions import ActionSpec
from ..actions.operations import Operation
from ..errors import (
    CredentialsError,
    UsageError,
    error_for,
)
from ..ledger import (
    NOT_CHECKED_CODE,
    REACHED_CODE,
    Damaged,
    LedgerError,
    Record,
    describe_damage,
    fold,
    may_have_acted,
    permanent,
    read_records,
    undone,
)
from ..ledger.merge import UNDOES, UNDONE_CODE, Latest, keep_latest
from ..outcome import Outcome
from ..rails import PROTECTED_CODE, UNVERIFIED_CODE
from ..report import Pair, Recorded
from ..run import (
    RunOptions,
)
from ..targets import INSTANCES, IdRule, Targets, TargetsError, read_ids
from ..text import clip, literal, one_or_more, plural
from .exits import warn
from .options import Flags
from .reach import Reach, used_region


class Instance(Protocol):
    """What a describe or a selection knows of an instance."""

    @property
    def id(self) -> str: ...
    @property
    def name(self) -> str | None: ...
    @property
    def tags(self) -> Mapping[str, str]: ...
    @property
    def state(self) -> str: ...


# Which commands act on the IDs of each kind, by prefix.
_KINDS = {
    "i-": ("instance", "swarm terminate, stop, start or reboot"),
    "snap-": ("snapshot", "swarm ec2 delete-snapshot"),
    "vol-": ("volume", "swarm ec2 delete-volume"),
    "ami-": ("image", "swarm ec2 deregister-image"),
    "eipalloc-": ("address", "swarm ec2 release-address"),
}


def _other_kind_hint(targets: Targets, rule: IdRule) -> str | None:
    """When every bad line holds an ID of one other kind (a list of instances given to a
    snapshot command): one line saying which, and what acts on them."""
    given = [(bad.value or bad.text).strip() for bad in targets.bad]
    prefixes = {value.split("-", 1)[0] + "-" for value in given}
    if len(prefixes) != 1:
        return None
    (prefix,) = prefixes
    if not rule.prefix or prefix == rule.prefix or prefix not in _KINDS:
        return None
    # IDs of that kind, each of them: a name that only starts so (snap-shot-1) is none.
    shape = re.compile(re.escape(prefix) + r"(?:[0-9a-f]{8}|[0-9a-f]{17})")
    if not all(shape.fullmatch(value) for value in given):
        return None
    kind, commands = _KINDS[prefix]
    verb = "act" if " or " in commands else "acts"
    return f"hint: these are {kind} IDs ({prefix}…): {commands} {verb} on them"


def load_targets(ids: str, err: Console, rule: IdRule | None = None) -> Targets:
    try:
        targets = read_ids(ids, sys.stdin if ids == "-" else None, rule=rule or INSTANCES)
    except TargetsError as exc:
        raise UsageError(str(exc)) from exc
    if targets.bad:
        shown = targets.bad[:20]
        details = [
            f"  {targets.unit} {bad.line}: {bad.quoted()}: {clip(bad.reason, 300)}" for bad in shown
        ]
        if len(targets.bad) > len(shown):
            details.append(f"  … and {len(targets.bad) - len(shown)} more")
        hint = _other_kind_hint(targets, rule or INSTANCES)
        if hint:
            details.append(hint)
        source = "standard input" if ids == "-" else ids
        raise UsageError(f"{targets.bad_count()} in {source}; nothing was sent:", details=details)
    if targets.duplicates:
        dup = len(targets.duplicates)
        extra = sum(len(lines) - 1 for lines in targets.duplicates.values())
        example, lines = next(iter(targets.duplicates.items()))
        distinct = list(dict.fromkeys(lines))
        unit = targets.unit
        where = (
            f"{len(lines)} times on {unit} {distinct[0]}"
            if len(distinct) == 1
            else f"on {unit}s {', '.join(map(str, distinct))}"
        )
        warn(
            err,
            f"{dup} ID(s) listed more than once; {extra} repeat(s) dropped "
            f"(e.g. {example} {where})",
        )
    return targets


def load_exclusions(flags: Flags, err: Console, operation: Operation | None = None) -> set[str]:
    """--exclude-ids: the IDs never to act on, of the kind the command acts on."""
    if not flags.exclude_ids:
        return set()
    if flags.exclude_ids == "-" and flags.ids == "-":
        raise UsageError("--ids - and --exclude-ids - cannot both read standard input")
    rule = operation.id_rule if operation is not None else None
    exclude = set(load_targets(flags.exclude_ids, err, rule).ids)
    if not exclude:
        # Most often the command that should have written it failed: said, not passed over.
        warn(err, f"--exclude-ids {flags.exclude_ids} lists no ID: nothing is excluded")
    return exclude


def exclude_from(
    groups: Mapping[Pair, list[str]], exclude: set[str], err: Console
) -> dict[Pair, list[str]]:
    """An ID list's groups less the IDs of --exclude-ids, saying how many it took out."""
    if not exclude:
        return dict(groups)
    kept = {pair: [i for i in ids if i not in exclude] for pair, ids in groups.items()}
    kept = {pair: ids for pair, ids in kept.items() if ids}
    taken = sum(map(len, groups.values())) - sum(map(len, kept.values()))
    err.print(
        f"--exclude-ids: {taken} ID(s) of the list left out ({len(exclude)} listed to exclude)",
        markup=False,
    )
    return kept


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
    where: dict[str, Pair] = {}
    elsewhere: dict[str, list[Pair]] = {}
    default_checked = False
    for target in targets.items:
        account = target.account or default_account
        region = target.region or _account_region(accounts.get(account or ""))
        if region is None:
            if default_region is None:
                raise UsageError("no AWS region: pass --region or set AWS_REGION")
            if not default_checked:
                used_region(default_region)  # refused here if it is no region's name
                default_checked = True
            region = default_region
        pair = Pair(account, region)
        first = where.setdefault(target.id, pair)
        if first is pair:
            groups.setdefault(pair, []).append(target.id)
        elif first != pair:
            elsewhere.setdefault(target.id, [first]).append(pair)
        # else: the same instance, once with defaults spelled out
    if elsewhere:
        raise UsageError(
            f"{len(elsewhere)} ID(s) listed in more than one account/region (a blank "
            "account or region is the default one); an ID names one resource, and the "
            "ledger keeps one record of each: keep one line for it, in its own account "
            "and region. Nothing was sent:",
            details=[
                f"  {i}: {', '.join(_where(p) for p in pairs)}"
                for i, pairs in itertools.islice(elsewhere.items(), 20)
            ]
            + ([f"  … and {len(elsewhere) - 20} more"] if len(elsewhere) > 20 else []),
        )
    warn_unknown_regions({p.region for p in groups}, err)
    return groups


def _where(pair: Pair) -> str:
    return f"{pair.account}/{pair.region}" if pair.account else f"{pair.region} (default account)"


def warn_unknown_regions(regions: set[str], err: Console) -> None:
    """A region botocore does not know is more likely a typo than a new region."""
    from ..ec2 import unknown_regions

    for region in unknown_regions(regions):
        warn(err, f"region {region} is not one botocore knows: a typo?")


def apply_shard(
    groups: dict[Pair, list[str]], shard: str | None, err: Console
) -> dict[Pair, list[str]]:
    """--shard K/N of an ID list: keep the pairs of shard K, so that no bucket is split
    across machines. The split is swarm shards' (shards.assign), by instance count; a
    selection's is by pairs (:func:`shard_pairs`), whose counts it cannot know."""
    if not shard:
        return groups
    k, n, mine = _shard_of({(p.account, p.region): len(ids) for p, ids in groups.items()}, shard)
    kept = {p: ids for p, ids in groups.items() if (p.account, p.region) in mine}
    err.print(
        f"shard {k}/{n}: {len(kept)} of {len(groups)} account/region pair(s), "
        f"{sum(map(len, kept.values()))} of {sum(map(len, groups.values()))} instance(s)"
    )
    return kept


def shard_pairs(pairs: list[Pair], shard: str, err: Console) -> list[Pair]:
    """--shard K/N of a selection: the pairs of shard K, by pairs (swarm shards' split of
    an accounts file), chosen before any is listed."""
    k, n, mine = _shard_of({(p.account, p.region): 1 for p in pairs}, shard)
    kept = [p for p in pairs if (p.account, p.region) in mine]
    err.print(f"shard {k}/{n}: {len(kept)} of {len(pairs)} account/region pair(s)")
    return kept


def _shard_of(
    weights: Mapping[tuple[str | None, str], int], shard: str
) -> tuple[int, int, set[tuple[str | None, str]]]:
    """K, N and the (account, region) pairs of shard K of N (swarm shards' split)."""
    from ..shards import ShardError, keep_shard, parse_shard

    try:
        k, n = parse_shard(shard)
    except ShardError as exc:
        raise UsageError(str(exc)) from exc
    return k, n, keep_shard(weights, k, n)


def _account_region(account: Account | None) -> str | None:
    return account.regions[0] if account is not None and len(account.regions) == 1 else None


def selection_pairs(accounts: Mapping[str, Account], region: str | None) -> list[Pair]:
    """Where a selection looks: each account's regions (or --region), or --region alone."""
    if not accounts:
        if region is None:
            raise UsageError("no AWS region: pass --region or set AWS_REGION")
        return [Pair(None, used_region(region))]
    pairs = []
    for account in accounts.values():
        regions = account.regions or ((region,) if region else ())
        if not regions:
            raise UsageError(f"account {account.id} lists no regions: pass --region")
        if not account.regions:
            used_region(regions[0])
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
    reach: Reach,
    found: dict[str, Instance],
    err: Console,
    operation: Operation | None = None,
    unused: bool = False,
) -> dict[Pair, list[str]]:
    """--filter, --older-than, --exclude-ids: DescribeInstances, every page, per pair (or
    ``operation``'s Describe call for its resources; ``unused``: only those EC2 would not
    refuse as in use)."""
    from datetime import datetime, timezone

    from ..select import INSTANCES as INSTANCE_LISTING
    from ..select import SelectError, filter_text, parse_age, parse_filters, select

    try:
        filters = parse_filters(flags.filters)
        older = parse_age(flags.older_than) if flags.older_than else None
    except SelectError as exc:
        raise UsageError(exc.message) from exc
    if operation is not None and operation.observe is None:
        raise UsageError(
            f"{operation.name} takes any resource ID and has no Describe call to select with: "
            "pass --ids (swarm list snapshots|volumes|images|addresses prints them)"
        )
    timeless = (
        operation is not None and operation.observe is not None and not operation.observe.created
    )
    if older is not None and operation is not None and timeless:
        # Nothing would be old enough: "none selected" would read as "none that old".
        raise UsageError(
            f"--older-than: EC2 gives no creation time for {plural(operation.resource)}; "
            "select them with --filter"
        )
    if (
        operation is None
        and spec is not None
        and not any(f["Name"] == "instance-state-name" for f in filters)
    ):
        filters.append({"Name": "instance-state-name", "Values": SOURCE_STATES[spec.name]})
    exclude = load_exclusions(flags, err, operation)
    pairs = selection_pairs(accounts, region)
    warn_unknown_regions({p.region for p in pairs}, err)  # an accounts file's regions too
    if flags.shard:
        # The shard's pairs alone are reached and listed: another shard's account (its
        # role, its permissions) is none of this one's.
        pairs = shard_pairs(pairs, flags.shard, err)
    reach.connect({p: [] for p in pairs}, err)
    now = datetime.now(timezone.utc)
    groups: dict[Pair, list[str]] = {}
    noun = "instance" if operation is None else operation.resource
    for pair in pairs:
        try:
            client = reach.client(pair)
            if operation is None:
                kind = INSTANCE_LISTING
            else:
                from ..observe import listing

                kind = listing(operation, client)
            chosen = select(
                client, filters, older_than=older, exclude=exclude, now=now, listing=kind
            )
            if unused:
                chosen = [i for i in chosen if i.in_use is None]
        except SelectError as exc:
            raise error_for(exc.exit_code, f"{pair.label}: {exc.message}") from exc
        except Exception as exc:  # an account that could not be reached
            raise CredentialsError(f"{pair.label}: {exc}") from exc
        groups[pair] = [i.id for i in chosen]
        found.update({i.id: i for i in chosen})
    shown = literal(filter_text(filters))
    extra = (f", older than {flags.older_than}" if older else "") + (
        f", leaving out any of the {len(exclude)} ID(s) of --exclude-ids" if exclude else ""
    )
    if unused:
        extra += ", not in use"
    count = sum(len(v) for v in groups.values())
    err.print(
        f"selected {count} {one_or_more(noun)} in {len(pairs)} pair(s)"
        + (f" by {shown}" if shown else "")
        + extra,
        markup=False,
    )
    return groups


# What a resume by selection finds of a stopped run's intents still there and no longer
# selected (retagged, say): not sent, and not done.
NOT_SELECTED_CODE = "NotSelected"
# What a rail held back unsent: a resume without that rail must not send it.
RAIL_CODES = frozenset({PROTECTED_CODE, UNVERIFIED_CODE})


def succeeded(
    ledger: str,
    action: str,
    err: Console,
    pending: set[str] | None = None,
    recorded: Recorded | None = None,
    unconfirmed: set[str] | None = None,
    railed: dict[str, Record] | None = None,
    unsent: Recorded | None = None,
    known: set[str] | None = None,
    done_at: dict[str, Pair] | None = None,
    left_at: dict[str, Pair] | None = None,
) -> set[str] | None:
    """IDs the ledger holds as done for ``action``: what a resume skips; and into
    ``pending`` and ``recorded`` (with where), when given, the IDs a run may have acted
    on without an answer saying so (see :func:`may_have_acted`): in flight at a kill, or
    never answered. A repeat of their call may find them gone, and that is done.

    With ``unconfirmed`` (a resume that waits), an ID held done that no wait saw reach the
    action's state (its call accepted by a run without --wait or killed while waiting, or
    found on its way there: a repeat's WasAlready, a resume's AlreadyInState) is not
    done: it goes into ``unconfirmed`` (and ``recorded``), to be looked up again.

    Into ``railed``, when given: the IDs a rail held back unsent (``--protect-tag``: a
    protected one, or one whose tags it could not read), with that record.

    Into ``known``, when given: every ID the ledger holds a record of for ``action``; into
    ``done_at``, where each ID held done was done (a record counts for its own account and
    region only); into ``left_at``, where each intent pending or failed is left to do.

    Into ``unsent``, when given (a resume by selection), with where: the other intents
    not known done that a retry would send (never sent, or failed for a reason a retry
    could mend). Left out by the selection made again, they would stay so in the
    ledger, unreported.

    None when there is no ledger yet, or one without records (a run stopped
    before its first intent); a file that is not a swarm ledger (no line is a
    swarm record, a FIFO, a device) is refused before anything is sent.
    """
    if not os.path.lexists(ledger):
        return None
    damaged: list[Damaged] = []
    try:
        records = list(read_records(ledger, damaged))
        state = fold(records)
    except LedgerError as exc:
        raise UsageError(f"--resume: {exc}; nothing was sent") from exc
    if damaged:
        warn(err, describe_damage(damaged))
    if not state:
        return None
    state = undone(state)
    turned = sum(1 for (act, _), r in state.items() if act == action and r.code == UNDONE_CODE)
    if turned:
        others = " or ".join(sorted(UNDOES.get(action, ())))
        err.print(
            f"resume: {turned} {action} success(es) in {literal(ledger)} are older than a "
            f"{others} of the same instance: not known {action} now, they are looked up",
            markup=False,
        )
    latest: Latest[None] = {}  # each run's latest record of each intent
    last_word: dict[str, str] = {}  # each run's latest record's time: its calls left before
    for r in records:
        if r.action == action:
            keep_latest(latest, r, None)
        if r.ts and r.ts > last_word.get(r.run, ""):
            last_word[r.run] = r.ts
    done = {r.id for (act, _), r in state.items() if act == action and r.status == "succeeded"}
    if known is not None:
        known.update(r.id for (act, _), r in state.items() if act == action)
    if done_at is not None:
        done_at.update(
            (r.id, Pair(r.account, r.region or ""))
            for (act, _), r in state.items()
            if act == action and r.status == "succeeded"
        )
    if left_at is not None:
        left_at.update(
            (r.id, Pair(r.account, r.region or ""))
            for (act, _), r in state.items()
            # Not missing: that is where it was not found, not where it is left to do.
            if act == action and r.status in ("pending", "failed")
        )
    if railed is not None:
        railed.update(
            (r.id, r)
            for (act, _), r in state.items()
            if act == action and r.status == "failed" and r.code in RAIL_CODES
        )
    if unconfirmed is not None:
        # Whatever its code: one found on its way there and taken as done (a resume
        # without --wait, a repeat whose answer said it was stopping) was not seen there.
        for (act, _), r in state.items():
            if act == action and r.status == "succeeded" and r.code != REACHED_CODE:
                done.discard(r.id)
                unconfirmed.add(r.id)
                if recorded is not None:
                    # EC2 took the call there: not listed now, it is gone, whenever.
                    recorded.add(r.id, r.region, r.account, accepted=True)
    # What a run that was to wait did and no wait saw (see ledger.unchecked): its own
    # latest record reads succeeded, the fold not known done. Looked up, as sent.
    noted = [
        r
        for (act, _), r in state.items()
        if act == action and r.code == NOT_CHECKED_CODE and r.waits is not None
    ]
    if noted and unconfirmed is None:
        err.print(
            f"resume: {len(noted)} of them a run was to --wait for and no wait saw arrive "
            f"({literal(noted[0].waits or '')}); without --wait, one found on its way there "
            "is taken as done: add --wait to see them there",
            markup=False,
        )
    # What a resume by selection found still there and no longer selected: settled so.
    left_out = {
        r.id for (act, _), r in state.items() if act == action and r.code == NOT_SELECTED_CODE
    }
    for r in [*(r for r, _ in latest.values()), *noted]:
        if r.id not in done and r.id not in left_out and may_have_acted(r):
            if recorded is not None:
                # A call of it may have left until the run's last record (a bare intent's
                # own time is the write-ahead's, before the first call).
                recorded.add(r.id, r.region, r.account, last_word.get(r.run))
            if pending is not None:
                pending.add(r.id)
    if unsent is not None:
        for (act, _), r in state.items():
            if (
                act == action
                and r.id not in left_out
                and (pending is None or r.id not in pending)
                and (
                    # Never sent (a success undone since was sent, and a later run's
                    # doing: left be) ...
                    (r.status == "pending" and r.code != UNDONE_CODE)
                    # ... or failed where a retry could help (not missing, not for good,
                    # not a rail's).
                    or (r.status == "failed" and not permanent(r) and r.code not in RAIL_CODES)
                )
            ):
                unsent.add(r.id, r.region, r.account, accepted=True)
    return done


def reconcile_resume(
    spec: ActionSpec,
    flags: Flags,
    groups: Mapping[Pair, Sequence[str]],
    reach: Reach,
    options: RunOptions,
    found: dict[str, Instance],
    err: Console,
    recorded: Recorded,
) -> dict[Pair, dict[str, Outcome]]:
    """--resume: the intents not known done that EC2 shows done already; none are sent.

    An instance DescribeInstances does not list is done only if ``recorded`` (the ledger
    holds an intent of it): otherwise no run of this ledger ever acted on it, and it is
    sent, to be found missing (a wrong region or account, a typo).
    """
    from ..resume import reconcile
    from ..states import done_words, observable

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
    seen = reconcile(spec.name, groups, reach.client, err, options=options, recorded=recorded)
    found.update(seen.found)
    text = (
        f"resume: DescribeInstances shows {seen.already} of {seen.checked} already "
        f"{done_words(spec.name)} (to be recorded done, not sent); "
        f"{seen.checked - seen.already} not done yet"
    )
    if seen.unread:
        why = f" ({seen.why})" if seen.why else ""
        text += f" ({seen.unread} could not be read{why}: {unread_fate(flags)})"
    err.print(text, markup=False)
    return seen.done


def unread_fate(flags: Flags) -> str:
    """What becomes of IDs a resume's look-up could not read: sent as not done, unless
    --protect-tag (which fails closed) cannot read them either."""
    if flags.protect_tags:
        return "they are sent unless --protect-tag cannot read their tags either"
    return "they are sent"


def check_tag_ledger(ledger: str, action: str, tags: str, err: Console) -> None:
    """A tag run on a ledger that holds intents of ``action`` not known done of a run with
    other tags is refused: the ledger keeps one record per (action, ID), so this run's
    outcomes would hide them from ``swarm ledger failed`` (the resources would not carry
    the earlier run's tags, and nothing would say so). A finished earlier run is no
    matter. Runs of an older swarm, whose records do not say their tags, are warned of.
    """
    from ..operation_call import tags_shown

    if not os.path.lexists(ledger):
        return
    try:
        records = list(read_records(ledger, []))
    except LedgerError as exc:
        raise UsageError(f"{exc}; nothing was sent") from exc
    runs: dict[str, str | None] = {}  # run -> its tags (None: a run that did not say)
    for r in records:
        if r.action == action and (r.tags is not None or r.run not in runs):
            runs[r.run] = r.tags
    # Pending or failed (a resource EC2 said does not exist has nothing to be left undone).
    left = [
        r
        for (act, _), r in fold(records).items()
        if act == action and r.status in ("pending", "failed")
    ]
    other = [r for r in left if runs[r.run] not in (tags, None)]
    unknown = [r for r in left if runs[r.run] is None]
    if other:
        theirs = tags_shown(runs[other[0].run] or "")
        raise UsageError(
            f"{literal(ledger)} holds {len(other)} {action} intent(s) not known done of a "
            f"run with other tags ({literal(theirs)}): this run's records would hide them "
            f"from swarm ledger failed. Give this run its own --ledger, or first finish "
            f"that one (the same command with --resume and its --tag). Nothing was sent"
        )
    if unknown:
        warn(
            err,
            f"{literal(ledger)} holds {len(unknown)} {action} intent(s) not known done of "
            "a run that did not record its tags (an older swarm): if its tags were not "
            "these, give this run its own --ledger",
        )
