"""The accounts to act in, and credentials for each through STS.

An accounts file follows c7n-org's layout, in YAML or TOML (by extension)::

    accounts:
      - account_id: "111111111111"
        name: prod
        role: arn:aws:iam::111111111111:role/swarm
        regions: [us-east-1, eu-west-1]
        external_id: shared-secret

``role_arn`` may stand for ``role``; c7n-org's other keys (email, tags, vars) are
ignored, and any other key is refused as a likely typo. An
account without a role is acted on with the caller's own credentials, which
must then be that account's.
"""

from __future__ import annotations

import difflib
import importlib
import random
import re
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, cast

from .targets import ACCOUNT_ID, REGION

if TYPE_CHECKING:
    import boto3
    from botocore.config import Config

ROLE_ARN = re.compile(r"arn:(aws[a-z-]*):iam::([^:]*):role/(.+)")
# STS's own limits, checked here so that the error can name the file and line.
EXTERNAL_ID = re.compile(r"[\w+=,.@:/-]{2,1224}", re.ASCII)
ROLE_NAME = re.compile(r"(?:[\w+=,.@-]+/)*[\w+=,.@-]{1,64}", re.ASCII)
# Throttled STS calls are tried this many times in all; any other error at once
# fails, since credentials that are refused now will not be accepted in a second.
STS_ATTEMPTS = 3
SESSION_SECONDS = 3600

_T = TypeVar("_T")


class AccountsError(ValueError):
    """An accounts file that cannot be used, or an account that cannot be reached."""


class AssumeError(AccountsError):
    """No credentials for an account: a role refused, or the wrong account's."""


@dataclass(frozen=True)
class Account:
    id: str
    name: str | None = None
    role_arn: str | None = None
    regions: tuple[str, ...] = ()
    external_id: str | None = None

    @property
    def label(self) -> str:
        return f"{self.id} ({self.name})" if self.name else self.id


@dataclass(frozen=True)
class Credentials:
    access_key: str
    # Kept out of repr so that a logged or printed Credentials leaks nothing.
    secret_key: str = field(repr=False)
    token: str | None = field(repr=False)
    account: str
    expiration: datetime | None
    # botocore's credentials object behind them, which renews itself before it expires
    # (an assumed role's, through botocore's AssumeRoleCredentialFetcher; or the default
    # chain's own): a run may last longer than a role session's hour.
    source: Any = field(default=None, repr=False, compare=False)

    def session_kwargs(self) -> dict[str, str]:
        """Keyword arguments for ``Session``, ``Session.client`` and ``ec2.make_client``."""
        kwargs = {"aws_access_key_id": self.access_key, "aws_secret_access_key": self.secret_key}
        if self.token is not None:
            kwargs["aws_session_token"] = self.token
        return kwargs


def role_for(account_id: str, role_name: str, *, partition: str = "aws") -> str:
    """The ARN of role ``role_name`` (a path is allowed: ``ops/swarm``) in an account."""
    if not ACCOUNT_ID.fullmatch(account_id):
        raise AccountsError(f"account {account_id!r}: expected 12 digits")
    name = role_name.strip("/")
    if not ROLE_NAME.fullmatch(name):
        raise AccountsError(
            f"role {role_name!r}: expected a role name such as OrganizationAccountAccessRole"
        )
    return f"arn:{partition}:iam::{account_id}:role/{name}"


def load_accounts(path: str) -> list[Account]:
    """Read and check an accounts file; every error names the file and the account."""
    suffix = Path(path).suffix.lower()
    if suffix not in (".yml", ".yaml", ".toml"):
        raise AccountsError(f"{path}: expected a .yml, .yaml or .toml accounts file")
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise AccountsError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise AccountsError(f"{path}: is a folder, not an accounts file") from None
    except UnicodeDecodeError as err:
        raise AccountsError(f"{path}: not UTF-8 text ({err.reason} at byte {err.start})") from None
    except PermissionError:
        raise AccountsError(f"{path}: permission denied") from None
    lines: Callable[[int, str | None], int | None]
    if suffix == ".toml":
        data, lines = _load_toml(path, text), _no_lines
    else:
        data, lines = _load_yaml(path, text)
    if not isinstance(data, dict) or not isinstance(data.get("accounts"), list):
        raise AccountsError(f"{path}: expected a top-level 'accounts' list")
    if not data["accounts"]:
        raise AccountsError(f"{path}: the 'accounts' list is empty")
    accounts: list[Account] = []
    first: dict[str, int] = {}
    for number, entry in enumerate(data["accounts"], start=1):

        def where(key: str | None, number: int = number) -> str:
            line = lines(number - 1, key)
            return f"{path}: account {number}" + (f" (line {line})" if line else "")

        account = _account(entry, where)
        if account.id in first:
            raise AccountsError(
                f"{where('account_id')}: account_id {account.id} is listed already "
                f"(account {first[account.id]})"
            )
        first[account.id] = number
        accounts.append(account)
    return accounts


def assume(
    account: Account,
    *,
    region: str,
    endpoint_url: str | None = None,
    session: boto3.session.Session | None = None,
    session_name: str = "swarm",
) -> Credentials:
    """Credentials for ``account``, checked to be that account's.

    With a role: STS AssumeRole (an hour long; ExternalId when set), then
    GetCallerIdentity with the new credentials. Without one: the session's own
    credentials, whose GetCallerIdentity must name this account. A boto3
    session is not thread-safe: call this from one thread, or give each thread
    its own session.
    """
    if session is None:
        from .ec2 import new_session

        session = new_session(region=region)
    from botocore.config import Config

    # Our own throttle retries below; botocore's would also retry what is not one.
    config = Config(
        retries={"mode": "standard", "total_max_attempts": 1},
        connect_timeout=10,
        read_timeout=30,
        user_agent_extra="swarm-cli",
    )
    sts = session.client("sts", region_name=region, endpoint_url=endpoint_url, config=config)
    if account.role_arn is None:
        own = session.get_credentials()
        if own is None:
            raise AssumeError(f"account {account.label}: no AWS credentials found")
        frozen = own.get_frozen_credentials()
        credentials = Credentials(
            frozen.access_key, frozen.secret_key, frozen.token, account.id, None, own
        )
        checker = sts
    else:
        request: dict[str, Any] = {
            "RoleArn": account.role_arn,
            "RoleSessionName": session_name,
            "DurationSeconds": SESSION_SECONDS,
        }
        if account.external_id is not None:
            request["ExternalId"] = account.external_id
        answer = _sts_call(
            account, f"assume {account.role_arn}", lambda: sts.assume_role(**request)
        )
        issued = answer["Credentials"]
        expiration = issued.get("Expiration")
        credentials = Credentials(
            access_key=issued["AccessKeyId"],
            secret_key=issued["SecretAccessKey"],
            token=issued.get("SessionToken"),
            account=account.id,
            expiration=expiration.astimezone(timezone.utc)
            if isinstance(expiration, datetime)
            else None,
        )
        checker = session.client(
            "sts",
            region_name=region,
            endpoint_url=endpoint_url,
            config=config,
            **credentials.session_kwargs(),
        )
    identity = _sts_call(
        account, "check whose credentials these are", lambda: checker.get_caller_identity()
    )
    got, arn = identity.get("Account"), identity.get("Arn")
    if got != account.id:
        if account.role_arn is None:
            raise AssumeError(
                f"account {account.label}: the current credentials are account {got}'s ({arn}); "
                "give this account a role to assume"
            )
        raise AssumeError(
            f"account {account.label}: assumed {account.role_arn} but got account {got} ({arn})"
        )
    if account.role_arn is not None:
        renewing = _renewing(session, account, request, credentials, region, endpoint_url, config)
        credentials = replace(credentials, source=renewing)
    return credentials


def _renewing(
    session: boto3.session.Session,
    account: Account,
    request: dict[str, Any],
    issued: Credentials,
    region: str,
    endpoint_url: str | None,
    config: Config,
) -> Any:
    """The role's credentials as botocore keeps them fresh: these first, then AssumeRole
    again (with the session's own credentials) shortly before they expire."""
    from botocore.credentials import AssumeRoleCredentialFetcher, RefreshableCredentials

    core = getattr(session, "_session", None)  # boto3 keeps its botocore session here
    if core is None:
        return None  # not a boto3 session: the credentials as issued, for their hour

    def create_client(service: str, **kwargs: Any) -> Any:
        # botocore's renewal names no region: the session's alone (none without
        # AWS_REGION or a profile's) would fail it an hour into the run.
        kwargs.setdefault("region_name", region)
        kwargs.setdefault("endpoint_url", endpoint_url)
        kwargs["config"] = config
        return core.create_client(service, **kwargs)

    extra = {k: v for k, v in request.items() if k != "RoleArn"}
    fetcher = AssumeRoleCredentialFetcher(
        client_creator=create_client,
        source_credentials=session.get_credentials(),
        role_arn=account.role_arn,
        extra_args=extra,
    )
    expiry = issued.expiration or datetime.now(timezone.utc) + timedelta(seconds=SESSION_SECONDS)
    return RefreshableCredentials.create_from_metadata(
        metadata={
            "access_key": issued.access_key,
            "secret_key": issued.secret_key,
            "token": issued.token,
            "expiry_time": expiry.isoformat(),
        },
        refresh_using=fetcher.fetch_credentials,
        method="assume-role",
    )


# Sleeping between throttled STS calls; tests replace it.
_sleep: Callable[[float], None] = time.sleep


def _sts_call(account: Account, doing: str, call: Callable[[], _T]) -> _T:
    from botocore.exceptions import (
        ClientError,
        NoCredentialsError,
        ParamValidationError,
        PartialCredentialsError,
    )
    from botocore.parsers import ResponseParserError

    from .ec2 import THROTTLE_CODES, THROTTLE_STATUSES

    for attempt in range(1, STS_ATTEMPTS + 1):
        try:
            return call()
        except ClientError as err:
            error = err.response.get("Error", {})
            code = error.get("Code") or "Unknown"
            status = err.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
            throttled = code in THROTTLE_CODES or status in THROTTLE_STATUSES
            # A server's error (or a proxy's 502 in front of it) is tried again too.
            if (throttled or (status or 0) >= 500) and attempt < STS_ATTEMPTS:
                _sleep(random.uniform(0.5, 1.0) * 2 ** (attempt - 1))
                continue
            message = error.get("Message") or ""
            raise AssumeError(
                f"account {account.label}: cannot {doing}: {code}"
                + (f": {message}" if message else "")
            ) from None
        except (NoCredentialsError, PartialCredentialsError) as err:
            raise AssumeError(f"account {account.label}: cannot {doing}: {err}") from None
        except (ResponseParserError, KeyError) as err:
            # KeyError: XML that parses but holds no STS result (a proxy's XHTML page).
            # An answer that is not STS's (a proxy's or a balancer's page): tried again,
            # as a throttle is, then the account is not reached.
            if attempt < STS_ATTEMPTS:
                _sleep(random.uniform(0.5, 1.0) * 2 ** (attempt - 1))
                continue
            first = " ".join(str(err).split())[:200]
            raise AssumeError(
                f"account {account.label}: cannot {doing}: an answer that is not STS's ({first})"
            ) from None
        except ParamValidationError as err:
            # A value botocore refuses before sending (a session name too short, say).
            raise AccountsError(f"account {account.label}: cannot {doing}: {err}") from None
    raise AssertionError("unreachable: the last attempt returns or raises")


def _no_lines(index: int, key: str | None) -> int | None:
    return None


def _load_toml(path: str, text: str) -> Any:
    try:
        if sys.version_info >= (3, 11):
            import tomllib

            return tomllib.loads(text)
        # The tomllib backport, a dependency on Python 3.10 only.
        tomli = importlib.import_module("tomli")
        return tomli.loads(text)
    except ValueError as err:  # TOMLDecodeError, which names the line and column
        raise AccountsError(f"{path}: not valid TOML: {err}") from None
    except RecursionError:
        raise AccountsError(f"{path}: nested too deep to read") from None


def _load_yaml(path: str, text: str) -> tuple[Any, Callable[[int, str | None], int | None]]:
    # Imported as a module object so that mypy needs no PyYAML stubs.
    yaml: Any = importlib.import_module("yaml")
    try:
        data = yaml.load(text, Loader=yaml.SafeLoader)
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark is not None else path
        problem = getattr(err, "problem", None) or str(err)
        raise AccountsError(f"{where}: not valid YAML: {problem}") from None
    except RecursionError:
        raise AccountsError(f"{path}: nested too deep to read") from None
    _refuse_repeated_keys(path, root, yaml)
    # Line numbers of each account and of each of its keys, for error messages.
    items: list[tuple[int, dict[str, int]]] = []
    if isinstance(root, yaml.MappingNode):
        for key, value in root.value:
            if key.value == "accounts" and isinstance(value, yaml.SequenceNode):
                for item in value.value:
                    keys: dict[str, int] = {}
                    if isinstance(item, yaml.MappingNode):
                        keys = {k.value: v.start_mark.line + 1 for k, v in item.value}
                    items.append((item.start_mark.line + 1, keys))

    def lines(index: int, key: str | None) -> int | None:
        if index >= len(items):
            return None
        line, keys = items[index]
        return keys.get(key, line) if key else line

    return data, lines


def _refuse_repeated_keys(path: str, root: Any, yaml: Any) -> None:
    """A key given twice in one mapping: YAML keeps the last silently, so two accounts
    files put one after the other (``accounts:`` twice) would drop the first's accounts,
    and a second ``regions:`` the first's regions. (``<<`` merges are YAML's own way to
    override, and stay allowed; TOML refuses repeats itself.)"""
    stack, seen = [root], set()
    while stack:
        node = stack.pop()
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))  # an alias shares its node: each is walked once
        if isinstance(node, yaml.MappingNode):
            first: dict[str, int] = {}
            for key, value in node.value:
                name = key.value if isinstance(key, yaml.ScalarNode) else None
                if name is not None and key.tag != "tag:yaml.org,2002:merge":
                    line = key.start_mark.line + 1
                    if name in first:
                        raise AccountsError(
                            f"{path}:{line}: {_shown(name)} is given twice in one table (first on "
                            f"line {first[name]}); YAML would keep only the last: merge them"
                        )
                    first[name] = line
                stack.extend((key, value))
        elif isinstance(node, yaml.SequenceNode):
            stack.extend(node.value)


# The keys of a c7n-org account entry. Anything else is more likely a typo ("rol:",
# "region:") that would silently drop a role or a region than a field to ignore.
KNOWN_KEYS = frozenset(
    {"account_id", "name", "role", "role_arn", "regions", "external_id", "email", "tags", "vars"}
)


SHOWN = 80  # characters of a bad value an error repeats: enough to find it in the file


def _shown(value: object, quoted: bool = True) -> str:
    """A bad value as an error repeats it: quoted (a string) or as Python writes it (a
    list, a number), and cut short when long."""
    text = repr(value) if quoted or not isinstance(value, str) else value
    return text if len(text) <= SHOWN else text[: SHOWN - 1] + "…"


def _account(entry: object, where: Callable[[str | None], str]) -> Account:
    if not isinstance(entry, dict):
        raise AccountsError(f"{where(None)}: expected a table of keys such as account_id")
    unknown = sorted(str(k) for k in entry if k not in KNOWN_KEYS)
    if unknown:
        near = {k: difflib.get_close_matches(k, KNOWN_KEYS, n=1) for k in unknown}
        hints = [
            _shown(k) + (f" (did you mean {near[k][0]!r}?)" if near[k] else "") for k in unknown
        ]
        raise AccountsError(
            f"{where(unknown[0])}: unknown key {', '.join(hints)}; the keys are "
            f"{', '.join(sorted(KNOWN_KEYS))}"
        )
    raw_id = entry.get("account_id")
    if raw_id is None:
        raise AccountsError(f"{where(None)}: no account_id")
    if isinstance(raw_id, int) and not isinstance(raw_id, bool):
        raise AccountsError(
            f"{where('account_id')}: account_id is a number (read as {raw_id}: an unquoted "
            "number loses its leading zeros, and YAML reads one that starts with 0 as "
            "octal): write it in quotes, as a string of 12 digits"
        )
    if not isinstance(raw_id, str) or not ACCOUNT_ID.fullmatch(raw_id):
        raise AccountsError(
            f"{where('account_id')}: account_id {_shown(raw_id)}: expected 12 digits"
        )
    account_id = raw_id

    def text(key: str) -> str | None:
        value = entry.get(key)
        if value is None or isinstance(value, str):
            return value
        raise AccountsError(f"{where(key)}: {key} must be a string, not {_shown(value)}")

    name = text("name")
    role, role_arn = text("role"), text("role_arn")
    if role is not None and role_arn is not None and role != role_arn:
        raise AccountsError(f"{where('role_arn')}: role and role_arn differ; give one")
    role = role or role_arn
    role_key = "role" if "role" in entry else "role_arn"
    if role is not None:
        found = ROLE_ARN.fullmatch(role)
        if found is None:
            raise AccountsError(
                f"{where(role_key)}: {role_key} {_shown(role)} is not an IAM role ARN "
                f"(arn:aws:iam::{account_id}:role/NAME)"
            )
        if found[2] != account_id:
            raise AccountsError(
                f"{where(role_key)}: role {_shown(role, quoted=False)} is in account "
                f"{found[2]}, not {account_id}"
            )
        if not ROLE_NAME.fullmatch(found[3]):
            raise AccountsError(
                f"{where(role_key)}: {_shown(found[3])} is not a role name IAM accepts (letters, "
                "digits and +=,.@_- up to 64, after an optional path)"
            )
    regions = entry.get("regions", [])
    if regions is None:
        regions = []
    if not isinstance(regions, list) or not all(isinstance(r, str) for r in regions):
        raise AccountsError(f"{where('regions')}: regions must be a list of region names")
    for region in regions:
        if not REGION.fullmatch(region):
            raise AccountsError(
                f"{where('regions')}: region {_shown(region)} is not a region name "
                "such as us-east-1"
            )
    external_id = text("external_id")
    if external_id is not None and not EXTERNAL_ID.fullmatch(external_id):
        raise AccountsError(
            f"{where('external_id')}: external_id must be 2 to 1224 letters, digits "
            "or any of +=,.@:/-"
        )
    return Account(
        id=account_id,
        name=name,
        role_arn=role,
        regions=tuple(dict.fromkeys(cast(list[str], regions))),
        external_id=external_id,
    )
