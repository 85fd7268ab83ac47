"""How each account is reached: its credentials, one EC2 client per (account, region) pair,
and the account checks made with them (``--expect-account``)."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from rich.console import Console

from ..accounts import Account
from ..errors import (
    CredentialsError,
    Interrupted,
    SwarmError,
    UsageError,
    error_for,
)
from ..rails import (
    RailError,
    account_alias,
    check_account,
)
from ..report import Pair
from ..text import literal
from .exits import error, warn
from .options import Flags

# Seconds before a start still waiting on credentials says so: a credential_process or an
# SSO helper that never returns would otherwise hold the run silent, with nothing sent.
CREDENTIALS_PATIENCE = 5.0


@contextlib.contextmanager
def credentials_wait(
    err: Console, profile: str | None, source: Callable[[], str | None] | None = None
) -> Iterator[None]:
    """Says once, after CREDENTIALS_PATIENCE seconds, that the run still waits for its
    credentials; a stop while it waits ends the process botocore started for them.
    ``source`` names what it waits on at that moment (an account's role), if not the
    profile's or the default chain's own credentials."""
    own = f"profile {profile}" if profile else "the default credential chain"

    def say() -> None:
        where = source() if source is not None else None
        waits = (
            f"for {where}: STS, or {own} it is asked with, does not answer (a "
            "credential_process, SSO login or endpoint that hangs?)"
            if where
            else f"from {own} (a credential_process, SSO login or role that does not answer?)"
        )
        warn(
            err, f"still waiting for credentials {waits}: nothing has been sent; Ctrl-C stops here"
        )

    timer = threading.Timer(CREDENTIALS_PATIENCE, say)
    timer.daemon = True
    timer.start()
    try:
        yield
    except (KeyboardInterrupt, Interrupted):
        # Stopped while waiting (Ctrl-C, SIGTERM): a credential_process botocore started
        # would outlive the run.
        from ..children import end_started

        end_started()
        raise
    finally:
        timer.cancel()


def expect_account_of(flags: Flags, pair: Pair | None, err: Console) -> None:
    """--expect-account for a ledger's pairs: checked in the first pair's region."""
    expect_account(flags, pair.region if pair is not None else None, err)


def expect_account(flags: Flags, region: str | None, err: Console) -> None:
    """--expect-account: checked with STS before anything else is read or sent."""
    from ..ec2 import new_session

    assert flags.expect_account is not None
    try:
        with credentials_wait(err, flags.profile):
            session = new_session(profile=flags.profile)
            got = check_account(
                session,
                flags.expect_account,
                endpoint_url=flags.endpoint_url,
                region=region,
                timeout=flags.options.call_timeout,
            )
    except RailError as exc:
        raise error_for(exc.code, exc.message) from exc
    except Exception as exc:
        raise client_error(exc) from exc
    err.print(f"account {literal(got)}: as expected", markup=False)


def load_account_map(accounts_file: str | None, role_arn: str | None) -> dict[str, Account]:
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


def session_region(profile: str | None) -> str | None:
    from botocore.exceptions import ProfileNotFound

    from ..ec2 import CREDENTIAL_HINTS, new_session

    try:
        region = new_session(profile=profile).region_name
    except ProfileNotFound as exc:
        raise CredentialsError(f"{exc}: {CREDENTIAL_HINTS['ProfileNotFound']}") from exc
    return str(region) if region else None


def default_region(given: str | None, profile: str | None) -> str | None:
    """The region of IDs whose list names none: ``--region`` (or AWS_REGION), else the
    profile's. Checked where it is used (:func:`used_region`), not here: a list whose
    every line names its region needs none."""
    return given or session_region(profile)


def used_region(region: str) -> str:
    """``region``, the default one, about to be used: a name that is not a region's shape
    is refused, as in an ID list's column (sent, every call would fail on an endpoint
    that does not exist)."""
    from ..targets import REGION

    if not REGION.fullmatch(region):
        raise UsageError(
            f"bad region {region!r} (--region, AWS_REGION, AWS_DEFAULT_REGION or the "
            "profile's): expected a region name such as us-east-1"
        )
    return region


READ_TIMEOUT = 30.0  # seconds botocore waits on a socket, the longest measured call time-out


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
        self._assuming: str | None = None  # the account's role being assumed, named

    def connect(self, groups: Mapping[Pair, Sequence[str]], err: Console) -> None:
        """Credentials and a client for every pair not reached yet (calling again is cheap)."""
        with credentials_wait(err, self.flags.profile, lambda: self._assuming):
            try:
                self._connect(groups, err)
            finally:
                self._assuming = None

    def _connect(self, groups: Mapping[Pair, Sequence[str]], err: Console) -> None:
        from botocore.exceptions import BotoCoreError, ClientError

        from ..accounts import AccountsError, assume
        from ..ec2 import make_client, new_session, redact_url

        f = self.flags
        credentials = self._credentials
        session = None  # made for the first account to assume: the default one needs none
        for pair in groups:
            account = pair.account
            if account is None or account in credentials or account in self._errors:
                continue
            known = self.accounts.get(account, Account(account))
            # What a wait for credentials names from here on (the session's own included).
            self._assuming = f"account {known.label}" + (
                f"'s role {known.role_arn}" if known.role_arn else ""
            )
            if session is None:
                try:
                    session = new_session(profile=f.profile)
                except Exception as exc:
                    raise client_error(exc) from exc
            try:
                got = assume(
                    known, region=pair.region, endpoint_url=f.endpoint_url, session=session
                )
            except (AccountsError, BotoCoreError, ClientError) as exc:
                self._errors[account] = exc
                hint = (
                    ""
                    if f.accounts or f.role_arn or account in self.accounts
                    else " (pass --accounts FILE naming its role, or --role-arn ARN)"
                )
                error(err, f"{exc}; its pairs send nothing{hint}")
                continue
            credentials[account] = got
        self._assuming = None
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
                    # A --call-timeout past botocore's read time-out would never be met.
                    timeout=max(READ_TIMEOUT, f.options.call_timeout or 0.0),
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

    def reachable(self, pair: Pair) -> bool:
        """Whether ``pair``'s account was reached (its calls can be made)."""
        return pair.account not in self._errors

    @property
    def failures(self) -> dict[str, str]:
        """Each unreachable account, with why."""
        return {a or "(default)": str(exc) for a, exc in self._errors.items()}

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


def client_error(exc: Exception) -> SwarmError:
    """Why no EC2 client could be made, as the error that stops the command."""
    from botocore.exceptions import NoRegionError, ProfileNotFound

    from ..ec2 import (
        CREDENTIAL_ERRORS,
        CREDENTIAL_HINTS,
        classify_exception,
        unreadable_credentials,
    )

    if isinstance(exc, NoRegionError):
        return UsageError("no AWS region: pass --region or set AWS_REGION")
    if isinstance(exc, ProfileNotFound):
        return CredentialsError(f"{exc}: {CREDENTIAL_HINTS['ProfileNotFound']}")
    if isinstance(exc, CREDENTIAL_ERRORS) or unreadable_credentials(exc):
        # Resolved when the client is made; nothing sent.
        return CredentialsError(f"no usable credentials: {classify_exception(exc).message}")
    return UsageError(f"cannot set up the EC2 client: {exc}")
