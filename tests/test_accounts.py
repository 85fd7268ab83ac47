from __future__ import annotations

from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber

import swarm_cli.accounts as accounts_module
from swarm_cli.accounts import (
    Account,
    AccountsError,
    AssumeError,
    Credentials,
    assume,
    load_accounts,
    role_for,
)
from swarm_cli.sandbox import ACCOUNT, Sandbox

YAML = """\
# c7n-org style
accounts:
  - account_id: "111111111111"
    name: prod
    role: arn:aws:iam::111111111111:role/swarm
    regions: [us-east-1, eu-west-1, us-east-1]
    external_id: s3cret
    tags: [env:prod]
    vars: {owner: ops}
  - account_id: "022222222222"
    role_arn: arn:aws-us-gov:iam::022222222222:role/ops/swarm
  - account_id: "333333333333"
"""

TOML = """\
[[accounts]]
account_id = "111111111111"
name = "prod"
role = "arn:aws:iam::111111111111:role/swarm"
regions = ["us-east-1", "eu-west-1", "us-east-1"]
external_id = "s3cret"
tags = ["env:prod"]

[[accounts]]
account_id = "022222222222"
role_arn = "arn:aws-us-gov:iam::022222222222:role/ops/swarm"

[[accounts]]
account_id = "333333333333"
"""

EXPECTED = [
    Account(
        id="111111111111",
        name="prod",
        role_arn="arn:aws:iam::111111111111:role/swarm",
        regions=("us-east-1", "eu-west-1"),
        external_id="s3cret",
    ),
    Account(id="022222222222", role_arn="arn:aws-us-gov:iam::022222222222:role/ops/swarm"),
    Account(id="333333333333"),
]


def write(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return str(path)


@pytest.mark.parametrize(("name", "text"), [("a.yml", YAML), ("a.yaml", YAML), ("a.toml", TOML)])
def test_load_yaml_and_toml(tmp_path: Path, name: str, text: str) -> None:
    assert load_accounts(write(tmp_path, name, text)) == EXPECTED


def test_role_in_another_account_names_file_account_and_line(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "accounts.yml",
        'accounts:\n  - account_id: "111111111111"\n'
        '  - account_id: "222222222222"\n    role: arn:aws:iam::1111:role/x\n',
    )
    with pytest.raises(AccountsError) as caught:
        load_accounts(path)
    assert str(caught.value) == (
        f"{path}: account 2 (line 4): role arn:aws:iam::1111:role/x is in account 1111, "
        "not 222222222222"
    )


@pytest.mark.parametrize(
    ("entry", "match"),
    [
        ("account_id: 111111111111", "is a number .read as 111111111111"),
        ("account_id: 011111111111", "read as 1227133513: an unquoted number loses"),
        ('account_id: "11111111111"', "expected 12 digits"),
        (f'account_id: "{chr(0xFF11) * 12}"', "expected 12 digits"),  # full-width digits
        (f'account_id: "111111111111"\n    regions: [us-east-{chr(0x661)}]', "is not a region"),
        (
            'account_id: "111111111111"\n    role: "arn:aws:iam::111111111111:role/a b"',
            "not a role name IAM accepts",
        ),
        ("name: x", "no account_id"),
        ('account_id: "111111111111"\n    role: swarm', "not an IAM role ARN"),
        (
            'account_id: "111111111111"\n    role: arn:aws:iam::111111111111:role/a\n'
            "    role_arn: arn:aws:iam::111111111111:role/b",
            "role and role_arn differ",
        ),
        ('account_id: "111111111111"\n    regions: us-east-1', "must be a list"),
        ('account_id: "111111111111"\n    regions: [useast1]', "'useast1' is not a region"),
        ('account_id: "111111111111"\n    external_id: 42', "external_id must be a string"),
        ('account_id: "111111111111"\n    external_id: x', "external_id must be 2 to 1224"),
    ],
)
def test_bad_entries_are_refused(tmp_path: Path, entry: str, match: str) -> None:
    path = write(tmp_path, "a.yml", f"accounts:\n  - {entry}\n")
    with pytest.raises(AccountsError, match=match) as caught:
        load_accounts(path)
    assert str(caught.value).startswith(f"{path}: account 1 (line ")


def test_a_long_bad_role_is_repeated_cut_short(tmp_path: Path) -> None:
    name = "a b" + "x" * 5000
    path = write(
        tmp_path, "a.yml", f'accounts:\n  - account_id: "111111111111"\n    role: '
        f'"arn:aws:iam::111111111111:role/{name}"\n',
    )  # fmt: skip
    with pytest.raises(AccountsError, match="is not a role name IAM accepts") as caught:
        load_accounts(path)
    said = str(caught.value)
    assert f"{name!r}"[:79] + "… is not a role name" in said and len(said) < 400
    # Any other kind of value too: a list where a string belongs, a key given twice.
    listed = write(
        tmp_path, "b.yml", 'accounts:\n  - account_id: "111111111111"\n    name: ['
        + ", ".join(str(n) for n in range(300)) + "]\n",
    )  # fmt: skip
    with pytest.raises(AccountsError, match=r"name must be a string, not \[0, 1, 2") as caught:
        load_accounts(listed)
    assert len(str(caught.value)) < 300


def test_duplicate_account_ids_are_refused(tmp_path: Path) -> None:
    text = (
        '[[accounts]]\naccount_id = "111111111111"\n\n[[accounts]]\naccount_id = "111111111111"\n'
    )
    with pytest.raises(
        AccountsError, match=r"account 2: account_id 111111111111 is listed already"
    ):
        load_accounts(write(tmp_path, "a.toml", text))


@pytest.mark.parametrize(
    ("name", "text", "match"),
    [
        ("a.json", "{}", r"expected a \.yml, \.yaml or \.toml"),
        ("a.yml", "", "top-level 'accounts' list"),
        ("a.yml", "accounts: []\n", "empty"),
        ("a.yml", "accounts:\n  - [1, 2\n", r"a\.yml:3: not valid YAML"),
        ("a.toml", "[[accounts]\n", r"not valid TOML: .*line 1"),
        ("a.toml", "accounts = 3\n", "top-level 'accounts' list"),
    ],
)
def test_bad_files_are_refused(tmp_path: Path, name: str, text: str, match: str) -> None:
    with pytest.raises(AccountsError, match=match):
        load_accounts(write(tmp_path, name, text))


def test_a_key_given_twice_is_refused_not_kept_last(tmp_path: Path) -> None:
    """Two accounts files put one after the other: YAML alone would keep the second
    ``accounts:`` and drop the first's accounts without a word."""
    one = 'accounts:\n  - account_id: "111111111111"\n'
    two = 'accounts:\n  - account_id: "222222222222"\n'
    path = write(tmp_path, "a.yml", one + two)
    with pytest.raises(AccountsError, match=r"a\.yml:3: 'accounts' is given twice.*line 1"):
        load_accounts(path)
    twice = 'accounts:\n  - account_id: "111111111111"\n    regions: [us-east-1]\n'
    path = write(tmp_path, "b.yml", twice + "    regions: [us-west-2]\n")
    with pytest.raises(AccountsError, match=r"b\.yml:4: 'regions' is given twice"):
        load_accounts(path)
    # A merge key overriding what an anchor holds is YAML's own way, and stays.
    text = (
        "base: &b\n  regions: [us-east-1]\naccounts:\n  - <<: *b\n"
        '    account_id: "111111111111"\n    regions: [eu-west-1]\n'
    )
    (account,) = load_accounts(write(tmp_path, "c.yml", text))
    assert account.regions == ("eu-west-1",)


def test_unreadable_files(tmp_path: Path) -> None:
    with pytest.raises(AccountsError, match="no such file"):
        load_accounts(str(tmp_path / "none.yml"))
    (tmp_path / "dir.yml").mkdir()
    with pytest.raises(AccountsError, match="folder"):
        load_accounts(str(tmp_path / "dir.yml"))
    (tmp_path / "bin.yml").write_bytes(b"\xff\xfe")
    with pytest.raises(AccountsError, match="UTF-8"):
        load_accounts(str(tmp_path / "bin.yml"))


def test_role_for() -> None:
    assert role_for("111111111111", "swarm") == "arn:aws:iam::111111111111:role/swarm"
    assert role_for("111111111111", "/ops/swarm/") == "arn:aws:iam::111111111111:role/ops/swarm"
    assert (
        role_for("111111111111", "x", partition="aws-cn") == "arn:aws-cn:iam::111111111111:role/x"
    )
    with pytest.raises(AccountsError, match="12 digits"):
        role_for("1111", "swarm")
    with pytest.raises(AccountsError, match="role name"):
        role_for("111111111111", "arn:aws:iam::111111111111:role/swarm")


def test_credentials_repr_hides_secrets() -> None:
    credentials = Credentials("AKIA", "very-secret", "very-token", "111111111111", None)
    assert "very" not in repr(credentials)
    assert credentials.session_kwargs() == {
        "aws_access_key_id": "AKIA",
        "aws_secret_access_key": "very-secret",
        "aws_session_token": "very-token",
    }


# STS against the fake AWS: moto answers AssumeRole with credentials of the role's account.


def test_assume_a_role(sandbox: Sandbox) -> None:
    account = Account(
        id="111111111111", role_arn="arn:aws:iam::111111111111:role/swarm", external_id="ext-1"
    )
    credentials = assume(account, region="us-east-1", endpoint_url=sandbox.endpoint)
    assert credentials.account == "111111111111"
    assert credentials.token
    assert credentials.access_key != "testing"
    assert credentials.expiration is not None
    assert credentials.expiration.tzinfo == timezone.utc
    left = credentials.expiration - datetime.now(timezone.utc)
    assert timedelta(minutes=55) < left <= timedelta(hours=1, minutes=1)
    sts = boto3.session.Session(region_name="us-east-1", **credentials.session_kwargs()).client(
        "sts", endpoint_url=sandbox.endpoint
    )
    assert sts.get_caller_identity()["Account"] == "111111111111"


def test_an_account_without_a_role_uses_the_current_credentials(sandbox: Sandbox) -> None:
    credentials = assume(Account(id=ACCOUNT), region="us-east-1", endpoint_url=sandbox.endpoint)
    assert (credentials.access_key, credentials.secret_key) == ("testing", "testing")
    assert credentials.account == ACCOUNT
    with pytest.raises(AssumeError, match=f"credentials are account {ACCOUNT}'s"):
        assume(Account(id="999999999999"), region="us-east-1", endpoint_url=sandbox.endpoint)


# STS answers moto does not give: another account, throttles, refusals.


class FakeSession:
    """Hands out stubbed STS clients in order, as boto3's Session.client would."""

    def __init__(self) -> None:
        self.stubs: list[Stubber] = []
        self.kwargs: list[dict[str, Any]] = []

    def stub(self) -> Stubber:
        client = boto3.session.Session(region_name="us-east-1").client("sts")
        stubber = Stubber(client)
        stubber.activate()
        self.stubs.append(stubber)
        return stubber

    def client(self, service: str, **kwargs: Any) -> Any:
        assert service == "sts"
        self.kwargs.append(kwargs)
        return self.stubs[len(self.kwargs) - 1].client


ROLE = Account(id="111111111111", role_arn="arn:aws:iam::111111111111:role/swarm")
ISSUED = {
    "Credentials": {
        "AccessKeyId": "ASIAEXAMPLEEXAMPLE",
        "SecretAccessKey": "secret",
        "SessionToken": "token",
        "Expiration": datetime(2030, 1, 1, tzinfo=timezone.utc),
    }
}
REQUEST = {"RoleArn": ROLE.role_arn, "RoleSessionName": "swarm", "DurationSeconds": 3600}


def identity(account: str) -> dict[str, str]:
    return {"UserId": "AROAEXAMPLE:swarm", "Account": account, "Arn": f"arn:aws:sts::{account}:x"}


def test_a_role_that_lands_in_another_account_is_refused() -> None:
    session = FakeSession()
    session.stub().add_response("assume_role", ISSUED, REQUEST)
    session.stub().add_response("get_caller_identity", identity("444444444444"), {})
    with pytest.raises(AssumeError, match=r"assumed arn:aws:iam::111111111111:role/swarm but got "):
        assume(ROLE, region="us-east-1", session=session)
    assert session.kwargs[1]["aws_session_token"] == "token"


def test_throttled_sts_calls_are_tried_a_few_times(monkeypatch: pytest.MonkeyPatch) -> None:
    sleeps: list[float] = []
    monkeypatch.setattr(accounts_module, "_sleep", sleeps.append)
    session = FakeSession()
    assume_stub = session.stub()
    for _ in range(2):
        assume_stub.add_client_error("assume_role", "Throttling", http_status_code=400)
    assume_stub.add_response("assume_role", ISSUED, REQUEST)
    session.stub().add_response("get_caller_identity", identity("111111111111"), {})
    credentials = assume(ROLE, region="us-east-1", session=session)
    assert credentials.expiration == datetime(2030, 1, 1, tzinfo=timezone.utc)
    assert len(sleeps) == 2
    for stubber in session.stubs:
        stubber.assert_no_pending_responses()

    session = FakeSession()
    assume_stub = session.stub()
    for _ in range(3):
        assume_stub.add_client_error("assume_role", "Throttling", http_status_code=400)
    with pytest.raises(AssumeError, match="Throttling"):
        assume(ROLE, region="us-east-1", session=session)


def test_a_page_that_is_not_stss_is_tried_again_then_the_account_is_not_reached(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A proxy's page in place of STS's answer: no traceback; the account is not reached."""
    from botocore.parsers import ResponseParserError

    sleeps: list[float] = []
    monkeypatch.setattr(accounts_module, "_sleep", sleeps.append)
    calls = 0

    def page() -> None:
        nonlocal calls
        calls += 1
        raise ResponseParserError("Unable to parse response (<head><title>503</title></head>)")

    with pytest.raises(AssumeError, match=r"cannot assume: an answer that is not STS's \(Unable"):
        accounts_module._sts_call(ROLE, "assume", page)
    assert calls == 3 and len(sleeps) == 2

    def xhtml() -> None:  # XML that parses, holding no AssumeRoleResult: botocore's KeyError
        raise KeyError("AssumeRoleResult")

    with pytest.raises(AssumeError, match="an answer that is not STS's"):
        accounts_module._sts_call(ROLE, "assume", xhtml)


def test_a_refused_role_fails_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(accounts_module, "_sleep", lambda _: pytest.fail("no retry expected"))
    session = FakeSession()
    stub = session.stub()
    stub.add_client_error(
        "assume_role",
        "AccessDenied",
        "not authorized",
        http_status_code=403,
        expected_params={**REQUEST, "ExternalId": "ext-1"},
    )
    external = Account(id=ROLE.id, role_arn=ROLE.role_arn, external_id="ext-1")
    with pytest.raises(AssumeError, match=r"cannot assume .*AccessDenied: not authorized"):
        assume(external, region="us-east-1", session=session)


def test_a_value_sts_would_refuse_is_an_accounts_error() -> None:
    session = FakeSession()
    session.stub().add_response("assume_role", ISSUED)  # never sent: botocore refuses it first
    with pytest.raises(AccountsError, match="RoleSessionName"):
        assume(ROLE, region="us-east-1", session=session, session_name="x")


def test_a_misspelt_key_is_refused_with_a_hint(tmp_path: Path) -> None:
    path = tmp_path / "accounts.yml"
    path.write_text(
        'accounts:\n  - account_id: "111111111111"\n    rol: arn:aws:iam::111111111111:role/x\n'
    )
    with pytest.raises(AccountsError, match=r"unknown key 'rol' \(did you mean 'role'\?\)"):
        load_accounts(str(path))


def renewing_client(sandbox: Sandbox) -> tuple[Any, Any, Any]:
    """ROLE assumed in the sandbox: its credentials, their renewing source, an EC2 client."""
    from swarm_cli.ec2 import make_client

    credentials = assume(ROLE, region="us-east-1", endpoint_url=sandbox.endpoint)
    renewing = credentials.source
    assert renewing is not None
    client = make_client(
        "us-east-1",
        endpoint_url=sandbox.endpoint,
        credentials=credentials.session_kwargs(),
        renewing=renewing,
    )
    return credentials, renewing, client


def test_an_assumed_role_renews_itself_before_it_expires(sandbox: Sandbox) -> None:
    """A run longer than a role session's hour: botocore assumes the role again."""
    credentials, renewing, client = renewing_client(sandbox)
    client.describe_instances()
    assert renewing.get_frozen_credentials().access_key == credentials.access_key
    # The hour is almost over: the next call must not go out with the old keys.
    renewing._expiry_time = datetime.now(timezone.utc) + timedelta(seconds=30)
    client.describe_instances()
    renewed = renewing.get_frozen_credentials()
    assert renewed.access_key != credentials.access_key
    assert renewing._expiry_time - datetime.now(timezone.utc) > timedelta(minutes=50)
    sts = boto3.session.Session(
        region_name="us-east-1",
        aws_access_key_id=renewed.access_key,
        aws_secret_access_key=renewed.secret_key,
        aws_session_token=renewed.token,
    ).client("sts", endpoint_url=sandbox.endpoint)
    assert sts.get_caller_identity()["Account"] == ROLE.id


@pytest.mark.parametrize(
    ("status", "code", "kind"),
    [
        (403, "RegionDisabledException", "fatal"),
        (500, "InternalFailure", "fatal"),
        (400, "Throttling", "throttled"),  # STS busy: sent again later, nothing stops
    ],
)
def test_a_renewal_that_fails_stops_the_credentials_not_the_ids(
    sandbox: Sandbox, status: int, code: str, kind: str
) -> None:
    """The role's renewal, inside an EC2 call, refused or failing: the credentials'
    failure (nothing more sent with them, exit 4), never the instances' own."""
    from swarm_cli.actions import ACTIONS
    from swarm_cli.ec2 import InstanceCall
    from swarm_cli.outcome import Kind

    instance = "i-0123456789abcdef0"  # never reached: the renewal fails first
    _, renewing, client = renewing_client(sandbox)
    renewing._expiry_time = datetime.now(timezone.utc) + timedelta(seconds=30)
    sandbox.fail_action("AssumeRole", status, code, "no renewal")
    try:
        outcome = InstanceCall(client, ACTIONS["terminate"])([instance])[instance]
    finally:
        sandbox.fail_action("AssumeRole", None)
    assert outcome.kind is Kind(kind), outcome
    assert outcome.code == code and "getting the credentials (AssumeRole)" in (
        outcome.message or ""
    )
    assert sandbox.calls_by("TerminateInstances") == 0


def test_credentials_renewed_but_expired_already_are_fatal() -> None:
    from swarm_cli.ec2 import classify_exception
    from swarm_cli.outcome import Kind

    err = RuntimeError(
        "Credentials were refreshed, but the refreshed credentials are still expired."
    )
    outcome = classify_exception(err)
    assert outcome.kind is Kind.FATAL and "clock" in (outcome.message or "")
    with pytest.raises(RuntimeError):
        classify_exception(RuntimeError("something else"))


def test_a_role_renews_itself_in_its_region_when_the_session_names_none(
    sandbox: Sandbox, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No AWS_REGION, no profile region, the region given per pair: botocore's renewal
    names no region of its own, and must not fail for want of one an hour in."""
    monkeypatch.delenv("AWS_REGION", raising=False)
    monkeypatch.delenv("AWS_DEFAULT_REGION", raising=False)
    session = boto3.session.Session()
    assert session.region_name is None
    credentials = assume(ROLE, region="eu-west-1", endpoint_url=sandbox.endpoint, session=session)
    renewing = credentials.source
    assert renewing is not None
    renewing._expiry_time = datetime.now(timezone.utc) + timedelta(seconds=30)
    assert renewing.get_frozen_credentials().access_key != credentials.access_key


def test_without_a_role_the_default_chain_renews_itself(sandbox: Sandbox) -> None:
    session = boto3.session.Session(region_name="us-east-1")
    credentials = assume(
        Account(id=ACCOUNT), region="us-east-1", endpoint_url=sandbox.endpoint, session=session
    )
    assert credentials.source is session.get_credentials()


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("deep.yml", "accounts: " + "[" * 900 + "]" * 900 + "\n"),
        ("deep.toml", "x = " + "[" * 5000 + "]" * 5000 + "\n"),
    ],
)
def test_a_file_nested_too_deep_is_refused_not_a_crash(
    tmp_path: Path, name: str, text: str
) -> None:
    path = write(tmp_path, name, text)
    with pytest.raises(AccountsError, match="nested too deep to read"):
        load_accounts(path)


def test_a_list_naming_accounts_no_role_reaches_is_refused_saying_how_to_reach_them(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    """A CSV naming other accounts, with no --accounts: every intent was written pending
    (AssumeError), exit 4, and neither the error nor the printed retry said --accounts."""
    from test_cli import swarm

    ids = sandbox.launch(3)
    listed = tmp_path / "ids.csv"
    listed.write_text("instance_id,region,account\n" + "".join(
        f"{i},us-east-1,999999999999\n" for i in ids
    ))  # fmt: skip
    ledger = tmp_path / "l.jsonl"
    code, _, err = swarm(
        "terminate", "--ids", str(listed), "--yes", "--ledger", str(ledger),
        "--endpoint-url", sandbox.endpoint,
    )  # fmt: skip
    said = " ".join(err.split())
    assert code == 4, err
    assert "cannot reach any account of the list (999999999999): pass --accounts FILE" in said
    assert "nothing was sent" in said and not ledger.exists()
    assert set(sandbox.states(ids).values()) == {"running"}
    # One of two reached: the other's error says how to reach it, and the run goes on.
    mixed = tmp_path / "mixed.csv"
    mixed.write_text(
        "instance_id,region,account\n"
        f"{ids[0]},us-east-1,{ACCOUNT}\n{ids[1]},us-east-1,999999999999\n"
    )
    code, _, err = swarm(
        "terminate", "--ids", str(mixed), "--yes", "--ledger", str(tmp_path / "m.jsonl"),
        "--endpoint-url", sandbox.endpoint,
    )  # fmt: skip
    said = " ".join(err.split())
    assert code == 4, err
    assert "its pairs send nothing (pass --accounts FILE naming its role, or --role-arn" in said
    assert sandbox.states(ids[:2]) == {ids[0]: "terminated", ids[1]: "running"}


def test_a_start_waiting_on_an_accounts_role_names_that_role(
    sandbox: Sandbox, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """While STS did not answer an account's AssumeRole, the wait's warning named only the
    default credential chain, which had answered. It names the account and its role, and
    the chain it is asked with; the sandbox answers again only once that has been said, so
    the run ends only if it was."""
    from test_cli import swarm

    import swarm_cli.cli.reach as reach

    other = "222222222222"
    role = f"arn:aws:iam::{other}:role/swarm"
    ids = sandbox.launch(2, account=other)
    listed = tmp_path / "ids.csv"
    listed.write_text("instance_id,region,account\n" + "".join(
        f"{i},us-east-1,{other}\n" for i in ids
    ))  # fmt: skip
    accounts = tmp_path / "accounts.yml"
    accounts.write_text(f'accounts:\n  - account_id: "{other}"\n    role: {role}\n')
    monkeypatch.setattr(reach, "CREDENTIALS_PATIENCE", 0.5)
    warn, said = reach.warn, []

    def warn_then_answer(err: Any, message: str) -> None:
        warn(err, message)
        said.append(message)
        sandbox.hang(False)

    monkeypatch.setattr(reach, "warn", warn_then_answer)
    sandbox.hang(every_call=True)
    code, _, err = swarm(
        "terminate", "--ids", str(listed), "--accounts", str(accounts), "--yes",
        "--ledger", str(tmp_path / "l.jsonl"), "--endpoint-url", sandbox.endpoint,
    )  # fmt: skip
    assert code == 0, err
    assert said and said[0].startswith(
        f"still waiting for credentials for account {other}'s role {role}: STS, or the "
        "default credential chain it is asked with, does not answer"
    )
    assert set(sandbox.states(ids, account=other).values()) == {"terminated"}
