"""The sandbox's own set-up and check calls, which the front lets through untouched."""

from __future__ import annotations

import random
import re
import secrets
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from .config import (
    ACCOUNT,
    ADMIN_HEADER,
    CREDENTIALS,
    IMAGE_ID,
    INSTANCE_TYPE,
    ROLE_NAME,
    SandboxConfig,
)
from .front import Ec2Front
from .moto_backend import LOAD_CHUNK, LoadProgress, _InstanceIndex, _quick_launch, _run_instances

if TYPE_CHECKING:
    from .server import Sandbox


class SandboxAdmin(ABC):
    """The set-up and check calls of :class:`~swarm_cli.sandbox.server.Sandbox`.

    They carry the ``x-swarm-sandbox-admin`` header (``ADMIN_HEADER``), or act
    in moto's backend directly, so that checking the sandbox never spends the
    tokens of the client under test. ``Sandbox`` provides what is declared here.
    """

    config: SandboxConfig
    _credentials: dict[str, dict[str, str]]
    _credentials_lock: threading.Lock

    @property
    @abstractmethod
    def endpoint(self) -> str: ...

    @abstractmethod
    def _front(self) -> Ec2Front: ...

    def credentials(self, account: str) -> dict[str, str]:
        """boto3 keyword arguments for acting in ``account``.

        The default account's are ``CREDENTIALS``; any other's come from STS
        AssumeRole of ``arn:aws:iam::<account>:role/swarm`` on the sandbox itself
        (moto maps the key it hands out to that account), made once per start.
        """
        if account == ACCOUNT:
            return dict(CREDENTIALS)
        if not re.fullmatch(r"\d{12}", account):
            raise ValueError(f"an AWS account ID is 12 digits, not {account!r}")
        with self._credentials_lock:
            cached = self._credentials.get(account)
            if cached is None:
                sts = self.client(service="sts")
                reply = sts.assume_role(
                    RoleArn=f"arn:aws:iam::{account}:role/{ROLE_NAME}",
                    RoleSessionName="swarm-sandbox",
                )["Credentials"]
                cached = {
                    "aws_access_key_id": reply["AccessKeyId"],
                    "aws_secret_access_key": reply["SecretAccessKey"],
                    "aws_session_token": reply["SessionToken"],
                }
                self._credentials[account] = cached
            return dict(cached)

    def client(
        self,
        region: str | None = None,
        account: str | None = None,
        *,
        admin: bool = True,
        config: Any = None,
        service: str = "ec2",
    ) -> Any:
        """A boto3 client of the sandbox, acting in ``region`` and ``account``.

        By default an admin client, for setting up and checking the sandbox: the
        front lets its calls through unthrottled and uncounted. ``admin=False``
        gives a client like any other, spending the buckets of its (account,
        region) pair; ``config`` is a ``botocore.config.Config`` for it.
        """
        from ..ec2 import profileless_session

        # The sandbox's own keys, whatever profile AWS_PROFILE names.
        client = profileless_session().client(
            service,
            region_name=region or self.config.region,
            endpoint_url=self.endpoint,
            config=config,
            **self.credentials(account or ACCOUNT),
        )
        if admin:
            client.meta.events.register("before-sign", _mark_admin)
        return client

    def launch(
        self,
        count: int,
        *,
        protected: int = 0,
        stop_protected: int = 0,
        region: str | None = None,
        account: str | None = None,
    ) -> list[str]:
        """Start ``count`` running instances in ``region`` and ``account``.

        The first ``protected`` refuse termination (DisableApiTermination) and the
        first ``stop_protected`` refuse stopping (DisableApiStop): both set after
        launch, as moto ignores DisableApiTermination given at launch.
        """
        client = self.client(region, account)
        ids: list[str] = []
        while len(ids) < count:
            n = min(500, count - len(ids))
            reply = client.run_instances(
                ImageId=IMAGE_ID, MinCount=n, MaxCount=n, InstanceType=INSTANCE_TYPE
            )
            ids.extend(i["InstanceId"] for i in reply["Instances"])
        self.protect(ids[:protected], region=region, account=account)
        for instance_id in ids[:stop_protected]:
            client.modify_instance_attribute(InstanceId=instance_id, DisableApiStop={"Value": True})
        return ids

    def protect(
        self, ids: list[str], *, region: str | None = None, account: str | None = None
    ) -> None:
        """Turn termination protection on (DisableApiTermination) for these instances."""
        client = self.client(region, account)
        for instance_id in ids:
            client.modify_instance_attribute(
                InstanceId=instance_id, DisableApiTermination={"Value": True}
            )

    def seed(
        self,
        *,
        snapshots: int = 0,
        volumes: int = 0,
        images: int = 0,
        addresses: int = 0,
        in_use: int = 0,
        region: str | None = None,
        account: str | None = None,
    ) -> dict[str, list[str]]:
        """Make resources for ``swarm ec2`` to act on: kind -> IDs, those in use first.

        Of each kind, the first ``in_use`` (at most all) are in use as EC2 would refuse
        to delete them: a snapshot an AMI uses (the AMI's own, which is also listed
        under ``in-use-images``), a volume attached to an instance, an Elastic IP
        associated with one. Images use a snapshot each, as registered AMIs do.
        """
        client = self.client(region, account)
        zone = f"{region or self.config.region}a"
        busy = {
            kind: min(in_use, n)
            for kind, n in (
                ("snapshots", snapshots),
                ("volumes", volumes),
                ("addresses", addresses),
            )
        }
        hosts = (
            self.launch(1, region=region, account=account)
            if busy["volumes"] or busy["addresses"]
            else []
        )
        out: dict[str, list[str]] = {}

        def register(n: int, label: str) -> list[str]:
            made = []
            for k in range(n):
                made.append(
                    client.register_image(
                        Name=f"swarm-sandbox-{label}-{len(out.get(label, [])) + k}",
                        RootDeviceName="/dev/sda1",
                    )["ImageId"]
                )
            return made

        used_by = register(busy["snapshots"], "in-use-images")
        out["in-use-images"] = used_by
        described = client.describe_images(ImageIds=used_by)["Images"] if used_by else []
        by_image = {
            d["ImageId"]: d["BlockDeviceMappings"][0]["Ebs"]["SnapshotId"] for d in described
        }
        out["snapshots"] = [by_image[i] for i in used_by]
        if snapshots > busy["snapshots"]:
            out["snapshots"] += self._snapshots(
                snapshots - busy["snapshots"], zone, region, account
            )
        out["volumes"] = []
        for k in range(volumes):
            volume = client.create_volume(Size=1, AvailabilityZone=zone)["VolumeId"]
            if k < busy["volumes"]:
                client.attach_volume(
                    VolumeId=volume, InstanceId=hosts[0], Device=f"/dev/sd{chr(102 + k % 20)}"
                )
            out["volumes"].append(volume)
        out["images"] = register(images, "images")
        out["addresses"] = []
        for k in range(addresses):
            allocation = client.allocate_address(Domain="vpc")["AllocationId"]
            if k < busy["addresses"]:
                client.associate_address(AllocationId=allocation, InstanceId=hosts[0])
            out["addresses"].append(allocation)
        return out

    def _snapshots(
        self, count: int, zone: str, region: str | None, account: str | None
    ) -> list[str]:
        """Snapshots made in moto's backend directly: thousands in a second, not a minute."""
        from moto.ec2.models import ec2_backends

        with self._front()._moto:
            backend = ec2_backends[account or ACCOUNT][region or self.config.region]
            source = backend.create_volume(size=1, zone_name=zone)
            made = [backend.create_snapshot(source.id, "swarm sandbox").id for _ in range(count)]
            backend.delete_volume(source.id)
        return [str(i) for i in made]

    def load_ids(
        self,
        ids: list[str],
        *,
        region: str | None = None,
        account: str | None = None,
        progress: LoadProgress | None = None,
    ) -> None:
        """Make exactly these IDs exist as running instances (a rehearsal of a real list).

        The instances are launched in moto's backend directly, ``LOAD_CHUNK`` to
        a reservation, and given the IDs; ``progress`` hears (loaded, total)
        before the first chunk and after each. An ID listed twice is made once,
        and one the backend already holds is left as it is. The backend keeps
        an ID index (``_InstanceIndex``) so that the calls of the run that
        follows cost the same at 100,000 instances as at 100.
        """
        from moto.ec2.models import ec2_backends

        front = self._front()
        with front._moto:
            backend = ec2_backends[account or ACCOUNT][region or self.config.region]
            index = _InstanceIndex.of(backend)
            unique = list(dict.fromkeys(ids))
            held = index.held(unique)
            todo = [i for i in unique if i not in held]
        total = len(todo)
        if progress is not None:
            progress(0, total)
        for start in range(0, total, LOAD_CHUNK):
            chunk = todo[start : start + LOAD_CHUNK]
            # Lock per chunk, not per load: the endpoint stays answerable meanwhile.
            with front._moto, _quick_launch(backend):
                launched = _run_instances(backend, len(chunk))
                for instance, new_id in zip(launched, chunk, strict=True):
                    index.rename(instance, new_id)
            if progress is not None:
                progress(start + len(chunk), total)

    def load_resources(
        self,
        ids: list[str],
        *,
        region: str | None = None,
        account: str | None = None,
        progress: LoadProgress | None = None,
    ) -> None:
        """Make exactly these IDs exist, each as the resource its prefix names (a rehearsal
        of a real list for swarm ec2): a free snapshot (``snap-``), an unattached volume
        (``vol-``), an AMI (``ami-``), an unassociated Elastic IP (``eipalloc-``), a
        running instance (``i-``). Made in moto's backend directly and given the IDs; one
        the backend already holds is left as it is. Raises ValueError, before making any,
        for an ID of another kind."""
        from moto.ec2.models import ec2_backends

        kinds: dict[str, list[str]] = {}
        for i in dict.fromkeys(ids):
            kind = i.rsplit("-", 1)[0]
            if kind not in _LOADABLE:
                raise ValueError(
                    f"the sandbox cannot make {i}: it makes {', '.join(_LOADABLE.values())}"
                )
            kinds.setdefault(kind, []).append(i)
        instances = kinds.pop("i", [])
        total = len(instances) + sum(map(len, kinds.values()))
        if progress is not None:
            progress(0, total)
        done = 0
        if instances:
            self.load_ids(instances, region=region, account=account)
            done = len(instances)
            if progress is not None:
                progress(done, total)
        front = self._front()
        region = region or self.config.region
        for kind, todo in kinds.items():
            for start in range(0, len(todo), LOAD_CHUNK):
                chunk = todo[start : start + LOAD_CHUNK]
                with front._moto:
                    backend = ec2_backends[account or ACCOUNT][region]
                    _load(backend, kind, chunk, f"{region}a")
                done += len(chunk)
                if progress is not None:
                    progress(done, total)

    def held_states(
        self, ids: Iterable[str], *, region: str | None = None, account: str | None = None
    ) -> dict[str, str]:
        """Instance ID -> state name for these IDs, read from moto's backend; unknown IDs left out.

        The names ``states`` gives, without DescribeInstances: rendering and
        parsing every instance as XML takes about 2 ms per instance, 20 s at
        10,000, too long for the check that ends a rehearsal (or cuts one short).
        """
        from moto.ec2.models import ec2_backends

        with self._front()._moto:
            backend = ec2_backends[account or ACCOUNT][region or self.config.region]
            index = _InstanceIndex.of(backend)
            return {i: str(entry.instance.state) for i, entry in index.held(ids).items()}

    def states(
        self,
        ids: Iterable[str] | None = None,
        *,
        region: str | None = None,
        account: str | None = None,
    ) -> dict[str, str]:
        """Instance ID -> state name, as describe_instances reports it (unthrottled)."""
        client = self.client(region, account)
        wanted = None if ids is None else set(ids)
        out: dict[str, str] = {}
        for page in client.get_paginator("describe_instances").paginate():
            for reservation in page["Reservations"]:
                for inst in reservation["Instances"]:
                    if wanted is None or inst["InstanceId"] in wanted:
                        out[inst["InstanceId"]] = inst["State"]["Name"]
        return out


# What Sandbox.load_resources makes, by ID prefix.
_LOADABLE = {
    "snap": "snapshots",
    "vol": "volumes",
    "ami": "images",
    "eipalloc": "addresses",
    "i": "instances",
}


def _load(backend: Any, kind: str, ids: list[str], zone: str) -> None:
    """Make ``ids`` in moto's ``backend`` as resources of ``kind``; those held stay."""
    if kind == "eipalloc":
        held = {a.allocation_id for a in backend.addresses}
        for i in ids:
            if i not in held:
                address = backend.allocate_address(domain="vpc")
                address.allocation_id = address.id = i
        return
    store = {"snap": backend.snapshots, "vol": backend.volumes, "ami": backend.amis}[kind]
    todo = [i for i in ids if i not in store]
    if not todo:
        return
    source = backend.create_volume(size=1, zone_name=zone)  # what the snapshots are of
    for i in todo:
        if kind == "snap":
            made = backend.create_snapshot(source.id, "swarm rehearsal", backend.account_id)
        elif kind == "vol":
            made = backend.create_volume(size=1, zone_name=zone)
        else:
            made = backend.register_image(name=f"swarm-rehearsal-{i}")
        del store[made.id]
        made.id = i
        store[i] = made
    backend.delete_volume(source.id)


def _mark_admin(request: Any, **_: Any) -> None:
    """botocore ``before-sign`` handler: mark a request as the sandbox's own."""
    request.headers[ADMIN_HEADER] = "1"


def fake_ids(count: int, rng: random.Random | None = None, prefix: str = "i") -> list[str]:
    """IDs of the right shape (``prefix``-: ``i``, ``snap``) that no sandbox resource has."""
    make: Callable[[], str] = (
        (lambda: secrets.token_hex(9)[:17])
        if rng is None
        else (lambda: f"{rng.getrandbits(68):017x}")
    )
    return [f"{prefix}-{make()}" for _ in range(count)]


def environment(
    sandbox: Sandbox, *, region: str | None = None, account: str | None = None
) -> dict[str, str]:
    """What to export so that the AWS CLI, boto3 and swarm talk to the sandbox."""
    region = region or sandbox.config.region
    credentials = sandbox.credentials(account or ACCOUNT)
    out = {
        "AWS_ACCESS_KEY_ID": credentials["aws_access_key_id"],
        "AWS_SECRET_ACCESS_KEY": credentials["aws_secret_access_key"],
        "AWS_DEFAULT_REGION": region,
        "AWS_REGION": region,
        "AWS_ENDPOINT_URL": sandbox.endpoint,
    }
    if "aws_session_token" in credentials:
        out["AWS_SESSION_TOKEN"] = credentials["aws_session_token"]
    return out
