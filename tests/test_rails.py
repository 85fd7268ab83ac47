from __future__ import annotations

import io
import os
import select as io_select
import socket
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.config import Config
from test_cli import swarm

from swarm_cli.ec2 import make_client
from swarm_cli.errors import EXIT_REFUSED, EXIT_USAGE
from swarm_cli.rails import (
    PROTECTED_CODE,
    SAMPLE_SIZE,
    RailError,
    account_alias,
    ask,
    check_account,
    check_max_count,
    confirmation_text,
    protect_tag,
    protect_tags,
    split_protected,
)
from swarm_cli.sandbox import ACCOUNT, Sandbox
from swarm_cli.select import Selected, parse_filters, select

OTHER = "111111111111"
REGION = "us-east-1"


def closed_endpoint() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}"


NO_RETRIES = Config(retries={"mode": "standard", "total_max_attempts": 1}, connect_timeout=2)


# --- the account ---------------------------------------------------------------------------


def test_check_account_returns_the_account(sandbox: Sandbox) -> None:
    assert check_account(sandbox.client(service="sts"), ACCOUNT) == ACCOUNT


def test_check_account_from_a_session_in_another_account(sandbox: Sandbox) -> None:
    session = boto3.session.Session(region_name=REGION, **sandbox.credentials(OTHER))
    assert check_account(session, OTHER, endpoint_url=sandbox.endpoint) == OTHER
    with pytest.raises(RailError) as caught:
        check_account(session, ACCOUNT, endpoint_url=sandbox.endpoint)
    assert caught.value.code == EXIT_REFUSED
    assert OTHER in caught.value.message and ACCOUNT in caught.value.message


def test_check_account_refuses_a_mismatch(sandbox: Sandbox) -> None:
    with pytest.raises(RailError) as caught:
        check_account(sandbox.client(service="sts"), OTHER)
    assert caught.value.code == EXIT_REFUSED
    message = caught.value.message
    assert f"account {ACCOUNT}" in message and f"not {OTHER}" in message
    assert "\n" not in message


def test_check_account_refuses_a_bad_expectation(sandbox: Sandbox) -> None:
    with pytest.raises(RailError) as caught:
        check_account(sandbox.client(service="sts"), "12345")
    assert caught.value.code == EXIT_USAGE


def test_check_account_refuses_when_it_cannot_check() -> None:
    sts = boto3.client("sts", region_name=REGION, endpoint_url=closed_endpoint(), config=NO_RETRIES)
    with pytest.raises(RailError) as caught:
        check_account(sts, ACCOUNT)
    assert caught.value.code == EXIT_REFUSED
    assert "EndpointConnectionError" in caught.value.message


def test_account_alias(sandbox: Sandbox) -> None:
    iam = sandbox.client(service="iam")
    assert account_alias(iam) is None
    iam.create_account_alias(AccountAlias="ci-sandbox")
    assert account_alias(iam) == "ci-sandbox"
    # Aliases are per account: the other account has none.
    other = boto3.client("iam", endpoint_url=sandbox.endpoint, **sandbox.credentials(OTHER))
    assert account_alias(other) is None


def test_account_alias_is_none_on_any_error() -> None:
    iam = boto3.client("iam", region_name=REGION, endpoint_url=closed_endpoint(), config=NO_RETRIES)
    assert account_alias(iam) is None


# --- protected tags ------------------------------------------------------------------------


def test_protect_tag_key_matches_any_value() -> None:
    test = protect_tag("keep")
    assert test({"keep": "yes"}) and test({"keep": ""})
    assert not test({"Keep": "yes"}) and not test({})


def test_protect_tag_key_value_matches_that_value() -> None:
    test = protect_tag("env=prod")
    assert test({"env": "prod"})
    assert not test({"env": "Prod"}) and not test({"env": "ci"}) and not test({"other": "prod"})
    assert protect_tag("note=a=b")({"note": "a=b"})
    assert protect_tag("empty=")({"empty": ""}) and not protect_tag("empty=")({"empty": "x"})


@pytest.mark.parametrize("spec", ["", "=x", " =x"])
def test_protect_tag_refuses_no_key(spec: str) -> None:
    with pytest.raises(RailError) as caught:
        protect_tag(spec)
    assert caught.value.code == EXIT_USAGE


def test_protect_tags_any_of_several() -> None:
    assert protect_tags([]) is None
    test = protect_tags(["keep", "env=prod"])
    assert test is not None
    assert test({"keep": "1"}) and test({"env": "prod"}) and not test({"env": "ci"})


def test_split_protected_on_a_real_selection(sandbox: Sandbox) -> None:
    ids = sandbox.launch(4, region=REGION)
    admin = sandbox.client(REGION)
    admin.create_tags(Resources=ids, Tags=[{"Key": "env", "Value": "ci"}])
    admin.create_tags(Resources=ids[:1], Tags=[{"Key": "keep", "Value": "true"}])
    admin.create_tags(Resources=ids[1:2], Tags=[{"Key": "env", "Value": "prod"}])
    chosen = select(
        make_client(REGION, endpoint_url=sandbox.endpoint),
        parse_filters(["tag:env=ci,prod"]),
        now=datetime.now(timezone.utc),
    )
    acting, protected = split_protected(chosen, protect_tags(["keep", "env=prod"]))
    assert sorted(s.id for s in protected) == sorted(ids[:2])
    assert sorted(s.id for s in acting) == sorted(ids[2:])
    assert split_protected(chosen, None) == (chosen, [])
    assert PROTECTED_CODE == "Protected"


def test_split_protected_keeps_order() -> None:
    items = [Selected(f"i-{n}", "running", None, None, {"k": str(n % 2)}) for n in range(6)]
    acting, protected = split_protected(items, protect_tag("k=1"))
    assert [s.id for s in acting] == ["i-0", "i-2", "i-4"]
    assert [s.id for s in protected] == ["i-1", "i-3", "i-5"]


# --- max count -----------------------------------------------------------------------------


def test_check_max_count() -> None:
    check_max_count(1000, 1000)
    check_max_count(5, None)
    check_max_count(0, 0)
    with pytest.raises(RailError) as caught:
        check_max_count(1200, 1000)
    assert caught.value.code == EXIT_REFUSED
    assert caught.value.message.startswith(
        "refusing to terminate 1200 instances: --max-count is 1000"
    )
    with pytest.raises(RailError) as stopped:
        check_max_count(2, 1, action="stop")
    assert "refusing to stop 2 instances" in stopped.value.message
    with pytest.raises(RailError) as bad:
        check_max_count(1, -1)
    assert bad.value.code == EXIT_USAGE


# --- confirmation --------------------------------------------------------------------------


def test_confirmation_text_names_everything() -> None:
    sample = [(f"i-{n:017x}", f"web-{n}" if n % 2 else None) for n in range(8)]
    text = confirmation_text(
        "terminate",
        1200,
        {f"{ACCOUNT}/us-east-1": 1000, f"{ACCOUNT}/eu-west-1": 200},
        "https://user:secret@ec2.example.com/?token=abc",
        ACCOUNT,
        "prod-main",
        sample,
    )
    assert "TERMINATE 1200 instances" in text
    assert f"{ACCOUNT} (prod-main)" in text
    assert f"{ACCOUNT}/us-east-1: 1000" in text and f"{ACCOUNT}/eu-west-1: 200" in text
    assert "ec2.example.com" in text and "secret" not in text and "abc" not in text
    for instance_id, name in sample[:SAMPLE_SIZE]:
        assert instance_id in text
        if name:
            assert name in text
    assert sample[SAMPLE_SIZE][0] not in text
    assert "(no Name tag)" in text
    assert f"and {1200 - SAMPLE_SIZE} more" in text
    # An empty or blank Name is a tag all the same, and shown as one.
    blank = confirmation_text("stop", 2, {"x": 2}, None, None, None, [("i-1", ""), ("i-2", "  ")])
    assert "(Name tag '')" in blank and "(Name tag '  ')" in blank and "no Name" not in blank


def test_confirmation_text_names_apart_the_accounts_it_could_not_reach() -> None:
    text = confirmation_text(
        "terminate",
        20,
        {f"{ACCOUNT}/us-east-1": 20},
        None,
        ACCOUNT,
        None,
        [("i-1", None)],
        unreachable={"222222222222": 20},
    )
    assert "TERMINATE 20 instances" in text and "222222222222/" not in text
    assert "not reached (nothing is sent there, recorded pending): 222222222222: 20" in text


def test_confirmation_text_without_account_or_alias() -> None:
    text = confirmation_text("stop", 1, {"us-west-2": 1}, None, None, None, [("i-1", "db")])
    assert "STOP 1 instance\n" in text
    assert "not checked" in text
    assert "us-west-2: 1" in text
    assert "more" not in text


def test_confirmation_text_defuses_terminal_escapes() -> None:
    text = confirmation_text(
        "terminate", 1, {"us-east-1": 1}, None, ACCOUNT, "a\x1b[2J", [("i-1", "x\x1b[1A\u202ey")]
    )
    assert "\x1b" not in text and "\u202e" not in text
    assert "x\\x1b[1A\\u202ey" in text


# --- asking --------------------------------------------------------------------------------


@pytest.fixture
def pty() -> Iterator[tuple[int, str]]:
    """A pseudo-terminal: (master fd, the slave's path). The slave stays open meanwhile,
    so what is written to the master waits there as typed input."""
    master, slave = os.openpty()
    try:
        yield master, os.ttyname(slave)
    finally:
        os.close(slave)
        os.close(master)


def typed(master: int, text: str) -> None:
    os.write(master, text.encode())


def shown(master: int) -> str:
    """All the terminal has shown so far: the echo of what was typed and the prompt may
    come in separate reads."""
    chunks: list[bytes] = []
    while io_select.select([master], [], [], 0.2)[0]:
        try:
            data = os.read(master, 4096)
        except OSError:  # the slave side is closed: nothing more will come
            break
        if not data:
            break
        chunks.append(data)
    return b"".join(chunks).decode("utf-8", "replace")


@pytest.mark.parametrize(("answer", "expected"), [("y\n", True), ("YES\n", True), ("n\n", False)])
def test_ask_reads_the_terminal_when_ids_came_on_stdin(
    pty: tuple[int, str], answer: str, expected: bool
) -> None:
    master, path = pty
    typed(master, answer)
    stdin = io.StringIO("y\n")  # the ID list's stream: must not be read for the answer
    assert ask("Continue? ", stdin_is_ids=True, tty_path=path, stdin=stdin) is expected
    assert "Continue? " in shown(master)
    assert stdin.tell() == 0


def test_ask_end_of_input_is_no(pty: tuple[int, str]) -> None:
    master, path = pty
    typed(master, "\x04")  # Ctrl-D on an empty line: end of input
    assert ask("Continue? ", stdin_is_ids=True, tty_path=path) is False


def test_ask_without_a_terminal_is_no(tmp_path: Path) -> None:
    assert ask("Continue? ", stdin_is_ids=True, tty_path=str(tmp_path / "no-tty")) is False


def test_ask_reads_stdin_when_it_is_a_terminal(pty: tuple[int, str], tmp_path: Path) -> None:
    master, path = pty
    typed(master, "yes\n")
    err = io.StringIO()
    with open(path, encoding="utf-8") as terminal:
        missing = str(tmp_path / "no-tty")
        assert ask("Go? ", stdin_is_ids=False, tty_path=missing, stdin=terminal, stderr=err)
    assert err.getvalue() == "Go? "


def test_ask_never_takes_a_pipe_for_a_person(tmp_path: Path) -> None:
    missing = str(tmp_path / "no-tty")
    piped: Any = io.StringIO("y\n")
    assert ask("Go? ", stdin_is_ids=False, tty_path=missing, stdin=piped) is False


def test_an_sts_that_hangs_is_a_refusal_after_two_tries_of_the_call_timeout(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    ids = sandbox.launch(1)
    ids_file = tmp_path / "ids.txt"
    ids_file.write_text(f"{ids[0]}\n")
    sandbox.hang(every_call=True)
    try:
        code, _, err = swarm(
            *("terminate", "--ids", str(ids_file), "--endpoint-url", sandbox.endpoint),
            *("--expect-account", "123456789012", "--call-timeout", "0.3", "--yes"),
            *("--ledger", str(tmp_path / "l.jsonl")),
        )
        held = sandbox.counters.hung
    finally:
        sandbox.hang(False)
    assert code == 3 and "cannot check the account" in err, err
    assert held == 2  # two tries, each given up after --call-timeout
    assert set(sandbox.states(ids).values()) == {"running"}


@pytest.mark.parametrize("specs", [("keep",), ("x (rail: y",), ("a b", "c=d e"), ("it's",)])
def test_a_records_rail_reads_back_whatever_its_tag_holds(specs: tuple[str, ...]) -> None:
    from swarm_cli.cli.guards import rail_note, rail_of

    note = rail_note(specs)
    assert rail_of(f"carries a tag that --protect-tag protects; not sent {note}") == specs
    # EC2's words before it may hold the note's head too.
    why = "--protect-tag could not read its tags (boom (rail: --protect-tag z)); not sent"
    assert rail_of(f"{why} {note}") == specs


def test_a_rail_that_cannot_be_read_back_is_released_by_none() -> None:
    from swarm_cli.cli.guards import UNREAD_RAIL, rail_of

    assert rail_of("carries a tag that --protect-tag protects; not sent") is None  # older
    assert rail_of("not sent (rail: --protect-tag 'cut short)") == UNREAD_RAIL
