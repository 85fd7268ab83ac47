"""The wire: what the front reads from a request (caller, region, IDs), and its error answers."""

from __future__ import annotations

import io
import re
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl, urlencode
from xml.sax.saxutils import escape as xml_escape

from .config import ADMIN_HEADER

# Where moto acts on a call whose region it cannot read (an unsigned request).
_MOTO_DEFAULT_REGION = "us-east-1"
# SigV4: "AWS4-HMAC-SHA256 Credential=AKID/20240101/us-east-1/ec2/aws4_request, ..."
_CREDENTIAL_SCOPE = re.compile(r"Credential=([^/,\s]+)/[^/]+/([^/]+)/([^/]+)/")

StartResponse = Callable[..., Any]
WsgiApp = Callable[[dict[str, Any], StartResponse], Iterable[bytes]]


def _error_xml(code: str, message: str, ec2: bool = True) -> tuple[bytes, str]:
    """An error answer as EC2 writes it, or (``ec2`` False) as STS and IAM do."""
    request_id = str(uuid.uuid4())
    error = f"<Code>{xml_escape(code)}</Code><Message>{xml_escape(message)}</Message>"
    body = '<?xml version="1.0" encoding="UTF-8"?>\n' + (
        f"<Response><Errors><Error>{error}</Error></Errors>"
        f"<RequestID>{request_id}</RequestID></Response>"
        if ec2
        else f"<ErrorResponse><Error><Type>Sender</Type>{error}</Error>"
        f"<RequestId>{request_id}</RequestId></ErrorResponse>"
    )
    return body.encode(), request_id


@dataclass(frozen=True)
class _Caller:
    """Who a request comes from, as far as the front needs it."""

    access_key: str | None
    region: str
    service: str | None  # None: an unsigned request, taken for EC2 as moto takes it
    admin: bool

    @staticmethod
    def of(environ: dict[str, Any]) -> _Caller:
        admin = environ.get("HTTP_" + ADMIN_HEADER.upper().replace("-", "_")) == "1"
        match = _CREDENTIAL_SCOPE.search(environ.get("HTTP_AUTHORIZATION", ""))
        if match is None:
            return _Caller(None, _MOTO_DEFAULT_REGION, None, admin)
        return _Caller(match.group(1), match.group(2), match.group(3), admin)

    @property
    def is_ec2(self) -> bool:
        return self.service in (None, "ec2")


def _instance_ids(params: dict[str, list[str]]) -> list[str]:
    return [v[0] for k, v in params.items() if k.startswith("InstanceId.")]


# Where the operations of swarm ec2 put their IDs: one, or a list (ResourceId.N).
_ONE_ID = ("SnapshotId", "VolumeId", "ImageId", "AllocationId")


def _resource_ids(params: dict[str, list[str]]) -> list[str]:
    """The IDs a call names, whatever their kind."""
    ids = [v[0] for k, v in params.items() if k.startswith(("InstanceId.", "ResourceId."))]
    return ids + [params[k][0] for k in _ONE_ID if k in params]


def _form_with_ids(body: bytes, ids: list[str]) -> bytes:
    """The same form request, naming only ``ids``."""
    pairs = [
        (k, v)
        for k, v in parse_qsl(body.decode("utf-8", "replace"), keep_blank_values=True)
        if not k.startswith("InstanceId.")
    ]
    pairs += [(f"InstanceId.{n}", i) for n, i in enumerate(ids, 1)]
    return urlencode(pairs).encode()


def _form_owned_by(body: bytes, account: str) -> bytes:
    """DescribeSnapshots' ``Owner.N=self`` as a filter on ``account`` (moto ignores
    OwnerId and lists the snapshots of its built-in public AMIs too)."""
    pairs = [
        (k, v)
        for k, v in parse_qsl(body.decode("utf-8", "replace"), keep_blank_values=True)
        if not k.startswith("Owner.")
    ]
    n = 1 + max((int(k.split(".")[1]) for k, _ in pairs if k.startswith("Filter.")), default=0)
    pairs += [(f"Filter.{n}.Name", "owner-id"), (f"Filter.{n}.Value.1", account)]
    return urlencode(pairs).encode()


def _set_body(environ: dict[str, Any], body: bytes) -> None:
    environ["wsgi.input"] = io.BytesIO(body)
    environ["CONTENT_LENGTH"] = str(len(body))
