"""Every ID-keyed EC2 operation swarm runs (``swarm ec2 OPERATION``), one entry each.

An entry says what botocore's service model cannot: which error codes mean the
resource is missing or in use, whether a repeat is harmless, how a Describe call shows
it done, EC2's buckets for it, and its inverse. What the model does say (the ID
parameter's shape, so how many IDs one call may carry, and the boto3 method) is read
from it, not restated: see :meth:`Operation.model`.

Adding an operation is one entry in :data:`OPERATIONS` plus its tests.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from functools import cache
from typing import Any

from ..targets import IdRule
from . import ACTIONS
from .base import ActionSpec, Bucket, Limits

# EC2's default bucket for mutating actions with none of their own (EC2 API throttling
# page: "mutating actions", 50 calls burst, 5 per second).
MUTATING = Bucket(50, 5)
# A list parameter whose documentation states no limit: EC2's usual one.
LIST_LIMIT = 1000
_UP_TO = re.compile(r"Up to (\d+)")
# Any EC2 resource ID: a type (tgw-attach, eipalloc, snap), a dash, hex digits.
ANY_ID = re.compile(r"[a-z][a-z0-9]*(?:-[a-z0-9]+)*-(?:[0-9a-f]{8}|[0-9a-f]{17})")


# Why EC2 would refuse a resource its Describe call shows, or None; the second argument
# maps each snapshot the account's AMIs use to its AMI (asked only when called).
InUse = Callable[[Mapping[str, Any], Callable[[], Mapping[str, str]]], str | None]


@dataclass(frozen=True)
class Observe:
    """How a Describe call shows whether a resource is still there.

    ``method`` is called with ``Filters=[{"Name": filter, "Values": ids}]`` (a filter
    lists what exists and never fails on an unknown ID); ``key`` is the answer's list
    and ``id_key`` each item's ID. An item whose ``State`` is in ``gone_states``, or an
    ID not listed, is gone. Of those states, ``passing_states`` are on the way (a
    volume ``deleting``): gone for a resume (EC2 took the call), not yet for
    ``--wait``. ``in_use(item, images)`` says why EC2 would refuse it, or None;
    ``images()`` maps each snapshot the account's AMIs use to its AMI.
    """

    method: str
    filter: str
    key: str
    id_key: str
    gone_states: frozenset[str] = frozenset()
    passing_states: frozenset[str] = frozenset()
    in_use: InUse | None = None
    # Listing them all (``swarm list snapshots``, ``--filter``): what names the account's
    # own (DescribeSnapshots and DescribeImages list every public one without it), the
    # largest page (None: the call has no pages), the item's creation time and its kind.
    owned: tuple[tuple[str, tuple[str, ...]], ...] = ()
    # Asked of every call: DescribeImages leaves disabled AMIs out (they still hold their
    # snapshots, and can be deregistered) unless IncludeDisabled.
    always: tuple[tuple[str, bool], ...] = ()
    page_size: int | None = 1000
    created: str | None = None
    type_key: str | None = None

    @property
    def api(self) -> str:
        """The Describe call's API name: "DescribeSnapshots"."""
        return "".join(part.capitalize() for part in self.method.split("_"))


def _snapshot_in_use(
    item: Mapping[str, Any], images: Callable[[], Mapping[str, str]]
) -> str | None:
    image = images().get(str(item.get("SnapshotId")))
    return None if image is None else f"in use by {image}: InvalidSnapshot.InUse"


def _volume_in_use(item: Mapping[str, Any], images: Callable[[], Mapping[str, str]]) -> str | None:
    state = item.get("State")
    if state == "creating":  # EC2 deletes an available volume (or one in error) only
        return "still creating: IncorrectState"
    if state != "in-use":
        return None
    to = ", ".join(a.get("InstanceId", "?") for a in item.get("Attachments") or [])
    return f"attached to {to or 'an instance'}: VolumeInUse"


def _image_in_use(item: Mapping[str, Any], images: Callable[[], Mapping[str, str]]) -> str | None:
    # "enabled" or "enabled-with-cooldown": EC2 refuses to deregister it until disabled;
    # "disabled-until TIME": disabled, but its cooldown lasts until then.
    protection = str(item.get("DeregistrationProtection") or "")
    if protection.startswith("disabled-until"):
        until = _when(protection.removeprefix("disabled-until").strip())
        if until is not None and until <= datetime.now(timezone.utc):
            return None
    elif not protection.startswith("enabled"):
        return None
    return f"deregistration protection {protection}: OperationNotPermitted"


def _when(text: str) -> datetime | None:
    """An ISO 8601 time EC2 gives ("2026-05-17T21:00:01.000Z"), or None if it is not one."""
    try:
        at = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return at if at.tzinfo is not None else at.replace(tzinfo=timezone.utc)


def _address_in_use(item: Mapping[str, Any], images: Callable[[], Mapping[str, str]]) -> str | None:
    to = item.get("InstanceId") or item.get("NetworkInterfaceId") or item.get("AssociationId")
    return f"associated with {to}: InvalidIPAddress.InUse" if to else None


@dataclass(frozen=True)
class Model:
    """What botocore's service model says of an operation."""

    api: str
    method: str  # boto3's
    id_param: str
    many: bool  # the ID parameter is a list
    per_call: int  # IDs one call may carry


@dataclass(frozen=True)
class Operation:
    """One ID-keyed EC2 operation, as data."""

    name: str  # the AWS CLI's name: "delete-snapshot"
    api: str  # botocore's operation: "DeleteSnapshot"
    id_param: str  # the parameter the IDs go in: "SnapshotId"
    resource: str  # for people: "snapshot"
    verb: str  # for people: "deleted"
    calls: Bucket = MUTATING
    missing_codes: frozenset[str] = frozenset()
    # Codes that mean the resource exists but is in use (or refused): failed with EC2's
    # reason, never retried.
    in_use_codes: frozenset[str] = frozenset()
    idempotent: bool = False  # a repeat on a resource already done answers success
    observe: Observe | None = None  # None: nothing shows it done
    inverse: str | None = None  # the operation that undoes this one
    # The instance action it is (terminate-instances is what swarm terminate runs).
    instance_action: str | None = None
    # Whether --tag KEY=VALUE is asked for (CreateTags, DeleteTags).
    tags: bool = False
    # The IDs' prefix ("snap"); None: any resource's (CreateTags takes any).
    prefix: str | None = None
    summary: str = ""

    def is_missing(self, code: str | None) -> bool:
        """Whether an error of ``code`` says an ID of the call does not exist. A tag call
        takes any resource's ID, and EC2 names each kind's own (InvalidGroup.NotFound)."""
        if code in self.missing_codes:
            return True
        return self.prefix is None and code is not None and bool(_ANY_NOT_FOUND.fullmatch(code))

    @property
    def model(self) -> Model:
        return _model(self.api, self.id_param)

    @property
    def spec(self) -> ActionSpec:
        """The ActionSpec the runner, the engine and the ledger know it by."""
        if self.instance_action is not None:
            return ACTIONS[self.instance_action]
        return _spec(self)

    @property
    def id_rule(self) -> IdRule:
        """What an ID of its list must look like."""
        # The ID column as the AWS CLI and exports name it (SnapshotId, snapshot_id), then
        # swarm list's own (id), then an instance list's.
        stem = re.sub(r"(?<!^)(?=[A-Z])", "_", self.id_param.removesuffix("s")).lower()
        stem = "resource_id" if stem == "resource" else stem
        columns = tuple(
            dict.fromkeys((stem, stem.replace("_", ""), "id", "instance_id", "instanceid"))
        )
        if self.prefix is None:
            return IdRule(ANY_ID, "a resource ID (such as vol-0123456789abcdef0)", "", columns)
        return IdRule(
            re.compile(rf"{self.prefix}-(?:[0-9a-f]{{8}}|[0-9a-f]{{17}})"),
            f"{'an' if self.resource[0] in 'aeiou' else 'a'} {self.resource} ID (expected "
            f"{self.prefix}- followed by 8 or 17 hex digits)",
            f"{self.prefix}-",
            columns,
        )

    @property
    def outline(self) -> ActionSpec:
        """:attr:`spec` without what the service model says: enough to build the command
        (reading the model costs every start of swarm half a second)."""
        if self.instance_action is not None:
            return ACTIONS[self.instance_action]
        return ActionSpec(
            name=self.name,
            api=self.api,
            method="",
            verb=self.verb,
            limits=Limits(calls=self.calls),
            wrong_state_codes=self.in_use_codes,
            resource=self.resource,
        )


@cache
def _spec(op: Operation) -> ActionSpec:
    model = op.model
    return ActionSpec(
        name=op.name,
        api=op.api,
        method=model.method,
        verb=op.verb,
        limits=Limits(calls=op.calls, per_call=model.per_call),
        wrong_state_codes=op.in_use_codes,
        resource=op.resource,
    )


@cache
def _model(api: str, id_param: str) -> Model:
    from botocore import xform_name

    from ..ec2 import profileless_session

    service = profileless_session("us-east-1").client("ec2").meta.service_model
    shape = service.operation_model(api).input_shape.members.get(id_param)
    if shape is None:
        raise ValueError(f"{api} has no parameter {id_param}")
    many = shape.type_name == "list"
    per_call = 1
    if many:
        found = _UP_TO.search(shape.documentation or "")
        per_call = int(found.group(1)) if found else LIST_LIMIT
    return Model(api, xform_name(api), id_param, many, per_call)


_DESCRIBE_SNAPSHOTS = Observe(
    "describe_snapshots",
    "snapshot-id",
    "Snapshots",
    "SnapshotId",
    in_use=_snapshot_in_use,
    owned=(("OwnerIds", ("self",)),),
    created="StartTime",
)
_DESCRIBE_VOLUMES = Observe(
    "describe_volumes",
    "volume-id",
    "Volumes",
    "VolumeId",
    frozenset({"deleting", "deleted"}),
    passing_states=frozenset({"deleting"}),
    in_use=_volume_in_use,
    page_size=500,
    created="CreateTime",
    type_key="VolumeType",
)
_DESCRIBE_IMAGES = Observe(
    "describe_images",
    "image-id",
    "Images",
    "ImageId",
    frozenset({"deregistered"}),
    owned=(("Owners", ("self",)),),
    in_use=_image_in_use,
    always=(("IncludeDisabled", True),),
    created="CreationDate",
    type_key="Architecture",
)
_DESCRIBE_ADDRESSES = Observe(
    "describe_addresses",
    "allocation-id",
    "Addresses",
    "AllocationId",
    in_use=_address_in_use,
    page_size=None,
    type_key="Domain",
)

# EC2's code for an ID of some kind that does not exist: InvalidGroup.NotFound,
# InvalidSubnetID.NotFound, InvalidVpcID.NotFound...
_ANY_NOT_FOUND = re.compile(r"Invalid[A-Za-z0-9]+\.NotFound")
# What CreateTags and DeleteTags answer for an ID that does not exist, by its kind: the
# call names it, and it is split off while the rest of the call is sent again.
_TAGGED_MISSING = frozenset(
    {
        "InvalidID",
        "InvalidInstanceID.NotFound",
        "InvalidSnapshot.NotFound",
        "InvalidVolume.NotFound",
        "InvalidAMIID.NotFound",
        "InvalidAllocationID.NotFound",
    }
)

_ENTRIES = (
    Operation(
        name="delete-snapshot",
        api="DeleteSnapshot",
        id_param="SnapshotId",
        resource="snapshot",
        prefix="snap",
        verb="deleted",
        missing_codes=frozenset({"InvalidSnapshot.NotFound"}),
        in_use_codes=frozenset({"InvalidSnapshot.InUse"}),
        observe=_DESCRIBE_SNAPSHOTS,
        summary="Delete EBS snapshots; those an AMI uses fail.",
    ),
    Operation(
        name="delete-volume",
        api="DeleteVolume",
        id_param="VolumeId",
        resource="volume",
        prefix="vol",
        verb="deleted",
        missing_codes=frozenset({"InvalidVolume.NotFound"}),
        in_use_codes=frozenset({"VolumeInUse", "IncorrectState"}),
        observe=_DESCRIBE_VOLUMES,
        summary="Delete EBS volumes; attached ones fail.",
    ),
    Operation(
        name="deregister-image",
        api="DeregisterImage",
        id_param="ImageId",
        resource="image",
        prefix="ami",
        verb="deregistered",
        missing_codes=frozenset({"InvalidAMIID.NotFound", "InvalidAMIID.Unavailable"}),
        in_use_codes=frozenset({"OperationNotPermitted"}),
        observe=_DESCRIBE_IMAGES,
        summary="Deregister AMIs (their snapshots stay).",
    ),
    Operation(
        name="release-address",
        api="ReleaseAddress",
        id_param="AllocationId",
        resource="address",
        prefix="eipalloc",
        verb="released",
        missing_codes=frozenset({"InvalidAllocationID.NotFound"}),
        in_use_codes=frozenset({"InvalidIPAddress.InUse"}),
        observe=_DESCRIBE_ADDRESSES,
        summary="Release Elastic IPs; associated ones fail.",
    ),
    Operation(
        name="create-tags",
        api="CreateTags",
        id_param="Resources",
        resource="resource",
        verb="tagged",
        missing_codes=_TAGGED_MISSING,
        idempotent=True,
        inverse="delete-tags",
        tags=True,
        summary="Tag any resources (--tag KEY=VALUE).",
    ),
    Operation(
        name="delete-tags",
        api="DeleteTags",
        id_param="Resources",
        resource="resource",
        verb="untagged",
        missing_codes=_TAGGED_MISSING,
        idempotent=True,
        inverse="create-tags",
        tags=True,
        summary="Remove tags (--tag KEY) from any resources.",
    ),
    Operation(
        name="terminate-instances",
        api="TerminateInstances",
        id_param="InstanceIds",
        resource="instance",
        verb="terminated",
        idempotent=True,
        instance_action="terminate",
        summary="Terminate instances (as swarm terminate).",
    ),
    Operation(
        name="stop-instances",
        api="StopInstances",
        id_param="InstanceIds",
        resource="instance",
        verb="stopped",
        idempotent=True,
        inverse="start-instances",
        instance_action="stop",
        summary="Stop instances (as swarm stop).",
    ),
    Operation(
        name="start-instances",
        api="StartInstances",
        id_param="InstanceIds",
        resource="instance",
        verb="started",
        idempotent=True,
        inverse="stop-instances",
        instance_action="start",
        summary="Start instances (as swarm start).",
    ),
    Operation(
        name="reboot-instances",
        api="RebootInstances",
        id_param="InstanceIds",
        resource="instance",
        verb="rebooted",
        instance_action="reboot",
        summary="Reboot instances (as swarm reboot).",
    ),
)

OPERATIONS: dict[str, Operation] = {op.name: op for op in _ENTRIES}
# The operations that are not instance actions, by the ActionSpec name their runs carry.
RESOURCE_OPERATIONS: dict[str, Operation] = {
    op.name: op for op in _ENTRIES if op.instance_action is None
}
