"""An operation of the registry (:mod:`swarm_cli.actions.operations`) as an engine action.

One call carries one ID (``DeleteSnapshot(SnapshotId=...)``) or a list of them
(``CreateTags(Resources=[...])``), as botocore's model says. An error whose code the
entry lists as missing or in use settles the IDs it names; the rest of a batch is sent
again in halves (:func:`~swarm_cli.ec2.split_batch`), as for instances.

A deletion that a repeat finds missing is done, not missing: the earlier call's answer
was lost (a timeout, a 5xx after EC2 acted, a kill while it was in flight), and the
resource is gone, which is what the run was for. A repeat is a call after one whose
outcome is not known, in this run or a run it resumes: a call refused before EC2 could
act (throttled, answered 4xx, never connected) is none, so an ID throttled first and then
not found is missing, as a mistyped ID or one in another region is.
"""

from __future__ import annotations

import json
import threading
import unicodedata
from collections.abc import Collection, Mapping, Sequence
from dataclasses import replace
from typing import Any

from .actions.operations import Operation
from .ec2 import ID_IN_MESSAGE, BatchCall, answered_by, refused_before_acting, split_batch
from .outcome import Kind, Outcome
from .text import not_utf8

# What EC2 answers a call on a resource of another account (a public AMI): a failure of
# that resource when the message names it, of the credentials when it names none.
NOT_YOURS_CODE = "AuthFailure"

# The code of a resource recorded done without being acted on: it was gone already.
ALREADY_GONE_CODE = "AlreadyGone"


# EC2's limits on a tag, in characters, and on the tags of one resource.
MAX_TAG_KEY = 128
MAX_TAG_VALUE = 256
MAX_TAGS = 50


def parse_tags(values: Sequence[str], *, need_value: bool) -> list[dict[str, str]]:
    """``--tag KEY=VALUE`` as EC2's Tags; a bare KEY (for delete-tags) matches any value.

    What EC2 refuses is refused here, before anything is sent: a key over 128
    characters or a value over 256, a key starting ``aws:`` (AWS's own), more than 50
    tags, and control characters, which no tag needs and a terminal would act on.
    """
    tags: list[dict[str, str]] = []
    for text in values:
        if (bad := not_utf8("--tag", text)) is not None:
            raise ValueError(bad)
        shown = repr(text[:60] + ("…" if len(text) > 60 else ""))
        key, eq, value = text.partition("=")
        if not key.strip():
            form = "KEY=VALUE" if need_value else "KEY or KEY=VALUE"
            raise ValueError(f"--tag {shown}: a tag needs a key ({form})")
        if need_value and not eq:
            raise ValueError(f"--tag {shown}: create-tags needs KEY=VALUE")
        if len(key) > MAX_TAG_KEY:
            raise ValueError(f"--tag {shown}: a key holds at most {MAX_TAG_KEY} characters")
        if len(value) > MAX_TAG_VALUE:
            raise ValueError(f"--tag {shown}: a value holds at most {MAX_TAG_VALUE} characters")
        if key.lower().startswith("aws:"):
            raise ValueError(f"--tag {shown}: keys starting aws: are AWS's own")
        if any(unicodedata.category(c) == "Cc" for c in text):
            raise ValueError(f"--tag {shown}: holds a control character")
        if any(t["Key"] == key for t in tags):
            # A resource holds one value per key: EC2 keeps the last, and a resume that
            # checks for both would never find it done.
            raise ValueError(f"--tag {shown}: the key {key!r} is given twice; give it once")
        tags.append({"Key": key, "Value": value} if eq else {"Key": key})
    if len(tags) > MAX_TAGS:
        raise ValueError(f"{len(tags)} tags: a resource holds at most {MAX_TAGS}")
    return tags


def tags_text(tags: Sequence[Mapping[str, str]]) -> str:
    """A tag run's tags as its ledger records them: one text for one set, whatever the
    order given (JSON of the sorted [key, value] pairs; value null: any value)."""
    pairs = sorted(([t["Key"], t.get("Value")] for t in tags), key=lambda kv: (kv[0], kv[1] or ""))
    return json.dumps(pairs, separators=(",", ":"))


def tags_shown(text: str) -> str:
    """:func:`tags_text` as a person reads it: ``team=data, env``."""
    try:
        pairs = json.loads(text)
        return ", ".join(f"{k}={v}" if v is not None else str(k) for k, v in pairs)
    except (ValueError, TypeError):
        return text


class OperationCall(BatchCall):
    """One operation on a batch of IDs: one API call, one outcome per ID."""

    def __init__(
        self,
        client: Any,
        op: Operation,
        *,
        dry_run: bool = False,
        params: Mapping[str, Any] | None = None,
        sent_before: Collection[str] = (),
    ) -> None:
        self.op = op
        # IDs an earlier run may have acted on (--resume): their first call here is a repeat.
        self.sent_before = frozenset(sent_before)
        self.name = op.name
        self.dry_run = dry_run
        self.params = dict(params or {})
        model = op.model
        self._many = model.many
        self._param = model.id_param
        self._method = getattr(client, model.method)
        self.split_codes = op.missing_codes | op.in_use_codes
        # A deletion: gone is done (its Describe call shows it so).
        self._gone_is_done = op.observe is not None
        self._lock = threading.Lock()  # the engine calls from several worker threads
        self._sent: dict[str, int] = {}  # ID -> calls that carried it, not surely refused

    def send(self, ids: Sequence[str]) -> Mapping[str, Any]:
        if not self._many and len(ids) != 1:
            raise ValueError(f"{self.op.api} takes one ID per call, not {len(ids)}")
        with self._lock:
            for i in ids:
                self._sent[i] = self._sent.get(i, 0) + 1
        value: Any = list(ids) if self._many else ids[0]
        try:
            response: Mapping[str, Any] = self._method(
                **{self._param: value}, DryRun=self.dry_run, **self.params
            )
        except Exception as exc:
            if refused_before_acting(exc):
                with self._lock:  # EC2 did nothing: a later call is no repeat of this one
                    for i in ids:
                        self._sent[i] -= 1
            raise
        return response

    def read(self, ids: Sequence[str], response: Mapping[str, Any]) -> Mapping[str, Outcome]:
        return dict.fromkeys(ids, Outcome(Kind.SUCCEEDED, None, None, *answered_by(response)))

    def splits(self, code: str | None) -> bool:
        return code in self.split_codes or self.op.is_missing(code)

    def failed(self, ids: Sequence[str], outcome: Outcome) -> dict[str, Outcome]:
        named = set(ID_IN_MESSAGE.findall(outcome.message or "")) & set(ids)
        if outcome.code == NOT_YOURS_CODE and named:
            # "Not authorized for image:ami-...": that resource is another account's (a
            # public AMI), not the credentials at fault. It fails alone, for good.
            theirs = replace(
                outcome,
                kind=Kind.PERMANENT,
                message=f"{outcome.message} (another account's {self.op.resource}?)",
            )
            return split_batch(ids, theirs)
        return super().failed(ids, outcome)

    def named(self, instance_id: str, outcome: Outcome) -> Outcome:
        if self.op.is_missing(outcome.code):
            with self._lock:
                # This call, refused, is not counted: only earlier ones of unknown outcome.
                repeat = self._sent.get(instance_id, 0) > 0 or instance_id in self.sent_before
            if repeat and self._gone_is_done:
                message = (
                    f"{outcome.code} when sent again: an earlier call's answer was lost, "
                    f"and the {self.op.resource} is gone"
                )
                return replace(
                    outcome, kind=Kind.SUCCEEDED, code=ALREADY_GONE_CODE, message=message
                )
            return replace(outcome, kind=Kind.MISSING)
        return outcome
