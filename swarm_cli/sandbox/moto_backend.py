"""Inside moto's EC2 backend: states read directly, instances launched directly, IDs indexed."""

from __future__ import annotations

import contextlib
import copy
import uuid
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from .config import IMAGE_ID, INSTANCE_TYPE


def _states_in_moto(account: str, region: str, ids: list[str]) -> dict[str, str] | None:
    """Instance ID -> state name in moto's backend, or None if moto should answer alone.

    None when an ID is unknown (moto then refuses the whole call with
    InvalidInstanceID.NotFound, as EC2 does) or the region is not one moto has.
    """
    from moto.ec2.exceptions import InvalidInstanceIdError
    from moto.ec2.models import ec2_backends

    if not ids:
        return None
    try:
        instances = ec2_backends[account][region].get_multi_instances_by_id(ids)
    except (KeyError, InvalidInstanceIdError):
        return None
    return {i.id: str(i.state) for i in instances}


def _unknown_instances(account: str, region: str, ids: list[str]) -> list[str]:
    """Those of ``ids`` moto's backend has no instance of, in their order ([] when the
    region is not one moto has: moto answers alone)."""
    from moto.ec2.models import ec2_backends

    try:
        backend = ec2_backends[account][region]
    except KeyError:
        return []
    index = backend.__dict__.get("_swarm_index")
    if index is not None:
        held = index.held(ids)
        return [i for i in ids if i not in held]
    known = {i.id for r in backend.reservations.values() for i in r.instances}
    return [i for i in ids if i not in known]


def not_found_message(ids: list[str]) -> str:
    """EC2's InvalidInstanceID.NotFound message: every unknown ID of the call."""
    if len(ids) == 1:
        return f"The instance ID '{ids[0]}' does not exist"
    return f"The instance IDs '{', '.join(ids)}' do not exist"


# A state on the way, the state it leads to, and their codes (EC2's low byte).
ON_THE_WAY = {
    "StopInstances": ("stopping", 64, "stopped", 80),
    "StartInstances": ("pending", 0, "running", 16),
}


def _set_states_in_moto(
    account: str, region: str, ids: list[str], name: str, code: int, only_from: str | None = None
) -> None:
    """Put moto's instances ``ids`` in state ``name`` (``code``): those in ``only_from``
    alone, when given (a later call may have moved them on already)."""
    from moto.ec2.exceptions import InvalidInstanceIdError
    from moto.ec2.models import ec2_backends

    try:
        instances = ec2_backends[account][region].get_multi_instances_by_id(ids)
    except (KeyError, InvalidInstanceIdError):
        return
    for instance in instances:
        state = instance._state  # moto keeps it here, name and code
        if only_from is None or state.name == only_from:
            state.name, state.code = name, code


def _image_owner(account: str, region: str, image_id: str) -> str | None:
    """The account that owns an AMI moto has (its built-in ones are Amazon's), or None."""
    from moto.ec2.models import ec2_backends

    try:
        image = ec2_backends[account][region].amis.get(image_id)
    except KeyError:
        return None
    return None if image is None else str(image.owner_id)


# What EC2 answers a tag call naming a resource it does not have, by the ID's prefix.
_NOT_FOUND = {
    "i-": ("InvalidInstanceID.NotFound", "The instance ID '{}' does not exist"),
    "vol-": ("InvalidVolume.NotFound", "The volume '{}' does not exist."),
    "snap-": ("InvalidSnapshot.NotFound", "The snapshot '{}' does not exist."),
    "ami-": ("InvalidAMIID.NotFound", "The image id '[{}]' does not exist"),
    "eipalloc-": ("InvalidAllocationID.NotFound", "The allocation ID '{}' does not exist"),
}


def _untaggable(account: str, region: str, ids: list[str]) -> tuple[str, str] | None:
    """(code, message) of the first resource of a tag call that moto does not have, as
    EC2 refuses the call for it (moto tags any ID, there or not); None if all are there
    or of a kind not checked."""
    from moto.ec2.models import ec2_backends

    try:
        backend = ec2_backends[account][region]
    except KeyError:
        return None
    instances = {i.id for r in backend.reservations.values() for i in r.instances}
    kinds = {"i-": instances, "vol-": backend.volumes, "snap-": backend.snapshots}
    kinds["ami-"] = backend.amis
    kinds["eipalloc-"] = {a.allocation_id for a in backend.addresses if a.allocation_id}
    for resource in ids:
        prefix = resource.split("-", 1)[0] + "-"
        known = kinds.get(prefix)
        if known is not None and resource not in known:
            code, message = _NOT_FOUND[prefix]
            return code, message.format(resource)
    return None


def _address_user(account: str, region: str, allocation_id: str) -> str | None:
    """What an Elastic IP is associated with (an instance or interface), or None."""
    from moto.ec2.models import ec2_backends

    try:
        addresses = ec2_backends[account][region].addresses
    except KeyError:
        return None
    for address in addresses:
        if address.allocation_id == allocation_id:
            user = address.instance or address.eni
            return None if user is None else str(user.id)
    return None


# Instances per moto reservation when loading an ID list: few large RunInstances
# calls, as a fleet is launched, with a progress report after each.
LOAD_CHUNK = 1000
LoadProgress = Callable[[int, int], None]  # (IDs loaded so far, IDs to load)


@dataclass
class _Entry:
    instance: Any  # moto's Instance
    reservation: Any  # the live Reservation holding it
    position: int  # its place in the reservation, for moto's answer order


class _InstanceIndex:
    """Instance ID -> moto instance, for one moto EC2 backend (one account and region).

    moto finds instances by scanning all it holds, once per looked-up ID in
    places (``get_instance``, used by every volume attach and detach) and with
    list membership tests in DescribeInstances by ID: a rehearsal of N IDs costs
    O(N) per ID, minutes at 10,000. Installed on one backend object (never on
    moto's classes), these lookups answer from a dict, and hand any case they
    are not sure of (an unknown or repeated ID) to moto's own method, so errors
    and edge cases stay moto's. moto's reset empties the backend object's
    ``__dict__`` and drops the object, so nothing outlives the sandbox's state.

    moto only ever appends instances to a reservation, so new instances are
    found by indexing the tails of reservations that grew; an index entry
    whose instance has since been renamed is never trusted (its ID is checked).
    """

    def __init__(self, backend: Any) -> None:
        self.backend = backend
        self._entries: dict[str, _Entry] = {}
        self._indexed: dict[str, int] = {}  # reservation ID -> instances indexed from it

    @staticmethod
    def of(backend: Any) -> _InstanceIndex:
        """The backend's index, installed on first use."""
        index = backend.__dict__.get("_swarm_index")
        if isinstance(index, _InstanceIndex):
            return index
        index = _InstanceIndex(backend)
        index._install()
        return index

    def _install(self) -> None:
        from moto.ec2.utils import filter_reservations

        backend = self.backend
        # Bound before patching: moto's own methods, for every case not answered here.
        get_instance = backend.get_instance
        get_instance_by_id = backend.get_instance_by_id
        get_multi = backend.get_multi_instances_by_id
        get_reservations = backend.get_reservations_by_instance_ids

        def fast_get_instance(instance_id: str) -> Any:
            found = self.find(instance_id)
            return found.instance if found else get_instance(instance_id)

        def fast_get_instance_by_id(instance_id: str) -> Any:
            found = self.find(instance_id)
            return found.instance if found else get_instance_by_id(instance_id)

        def fast_get_multi(instance_ids: list[str], filters: Any = None) -> list[Any]:
            found = self.find_all(instance_ids)
            if found is None:
                return list(get_multi(instance_ids, filters))
            return [e.instance for e in found if e.instance.applies(filters)]

        def fast_get_reservations(instance_ids: list[str], filters: Any = None) -> list[Any]:
            found = self.find_all(instance_ids)
            if found is None or len(set(instance_ids)) != len(instance_ids):
                return list(get_reservations(instance_ids, filters))
            by_reservation: dict[str, list[_Entry]] = {}
            for entry in found:
                by_reservation.setdefault(entry.reservation.id, []).append(entry)
            # moto's answer: copies of the reservations in their order, each
            # holding only the asked-for instances in their order.
            out = []
            for reservation_id, reservation in backend.reservations.items():
                entries = by_reservation.get(reservation_id)
                if entries:
                    shown = copy.copy(reservation)
                    shown.instances = [
                        e.instance for e in sorted(entries, key=lambda e: e.position)
                    ]
                    out.append(shown)
            return out if filters is None else list(filter_reservations(out, filters))

        backend.get_instance = fast_get_instance
        backend.get_instance_by_id = fast_get_instance_by_id
        backend.get_multi_instances_by_id = fast_get_multi
        backend.get_reservations_by_instance_ids = fast_get_reservations
        backend._swarm_index = self

    def _catch_up(self) -> None:
        for reservation in self.backend.reservations.values():
            start = self._indexed.get(reservation.id, 0)
            instances = reservation.instances
            for position in range(start, len(instances)):
                instance = instances[position]
                self._entries[instance.id] = _Entry(instance, reservation, position)
            self._indexed[reservation.id] = len(instances)

    def find(self, instance_id: str) -> _Entry | None:
        """The entry of an instance with this ID now, or None if none is known."""
        entry = self._entries.get(instance_id)
        if entry is None or entry.instance.id != instance_id:
            self._catch_up()
            entry = self._entries.get(instance_id)
        return entry if entry is not None and entry.instance.id == instance_id else None

    def find_all(self, instance_ids: list[str]) -> list[_Entry] | None:
        """Every ID's entry in order, or None if any is unknown here."""
        out = []
        for instance_id in instance_ids:
            entry = self.find(instance_id)
            if entry is None:
                return None
            out.append(entry)
        return out

    def held(self, instance_ids: Iterable[str]) -> dict[str, _Entry]:
        """The entries of those of these IDs that instances have now.

        One catch-up for all of them, where ``find`` would catch up once per
        unknown ID: a load checks every ID it is given before making any.
        """
        self._catch_up()
        out = {}
        for instance_id in instance_ids:
            entry = self._entries.get(instance_id)
            if entry is not None and entry.instance.id == instance_id:
                out[instance_id] = entry
        return out

    def rename(self, instance: Any, new_id: str) -> None:
        """Give a moto instance another ID, keeping it findable under that ID."""
        old = self.find(instance.id)
        assert old is not None and old.instance is instance, "only indexed instances are renamed"
        del self._entries[instance.id]
        instance.id = new_id
        self._entries[new_id] = old


@contextlib.contextmanager
def _quick_launch(backend: Any) -> Iterator[None]:
    """Spare each new instance moto's scans of every image and volume, while loading.

    For each instance it launches, moto looks its image up by filtering all
    ~1,300 known images and tags its root volume after finding it by scanning
    every volume. Both are answered from dicts here, only for the exact calls
    moto makes while launching, and only until the load is done (images could
    be registered later; the wrappers are not left behind).
    """
    describe_images = backend.describe_images
    describe_volumes = backend.describe_volumes
    images: dict[str, list[Any]] = {}

    def images_by_id(*args: Any, **kwargs: Any) -> Any:
        filters = kwargs.get("filters")
        if args or set(kwargs) != {"filters"} or not isinstance(filters, dict):
            return describe_images(*args, **kwargs)
        image_id = filters.get("image-id")
        if set(filters) != {"image-id"} or not isinstance(image_id, str):
            return describe_images(*args, **kwargs)
        if image_id not in images:
            images[image_id] = list(describe_images(**kwargs))
        return list(images[image_id])

    def volumes_by_id(*args: Any, **kwargs: Any) -> Any:
        wanted = kwargs.get("volume_ids")
        if (
            args
            or set(kwargs) != {"volume_ids"}
            or not isinstance(wanted, list)
            or len(wanted) != 1
            or wanted[0] not in backend.volumes
        ):
            return describe_volumes(*args, **kwargs)
        return [backend.volumes[wanted[0]]]

    backend.describe_images = images_by_id
    backend.describe_volumes = volumes_by_id
    try:
        yield
    finally:
        backend.__dict__.pop("describe_images", None)
        backend.__dict__.pop("describe_volumes", None)


def _run_instances(backend: Any, count: int) -> list[Any]:
    """Launch ``count`` running instances in one reservation, as ``launch`` does over HTTP.

    The arguments are those moto's RunInstances handler passes for launch's
    request (image, MinCount=MaxCount=count, instance type); called directly,
    the load skips rendering and parsing an XML answer for every instance.
    """
    reservation = backend.run_instances(
        IMAGE_ID,
        count,
        None,  # user data
        [],  # security group names
        instance_type=INSTANCE_TYPE,
        is_instance_type_default=False,
        placement=None,
        placement_hostid=None,
        region_name=backend.region_name,
        subnet_id=None,
        key_name=None,
        security_group_ids=[],
        nics=[],
        private_ip=None,
        associate_public_ip=None,
        tags={},
        ebs_optimized=False,
        disable_api_stop=False,
        instance_market_options={},
        instance_initiated_shutdown_behavior=None,
        launch_template={},
        hibernation_options={},
        iam_instance_profile_name=None,
        iam_instance_profile_arn=None,
        monitoring_state="disabled",
        ipv6_address_count=None,
        metadata_options={},
        client_token=str(uuid.uuid4()),
    )
    return list(reservation.instances)
