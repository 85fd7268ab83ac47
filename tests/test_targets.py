from __future__ import annotations

import gc
import json
from pathlib import Path

import pytest

from swarm_cli.targets import (
    Target,
    TargetsError,
    group,
    parse_ids,
    parse_targets,
    read_ids,
    read_targets,
)


def test_comments_blank_lines_whitespace_crlf_and_bom_are_tolerated() -> None:
    lines = ["\ufeffi-0123456789abcdef0\r", "", "  # a comment", "\ti-abcdef01  # web-1 ", "  "]
    targets = parse_ids(lines)
    assert targets.ids == ["i-0123456789abcdef0", "i-abcdef01"]
    assert targets.bad == []


def test_every_invalid_line_is_reported_with_its_number() -> None:
    lines = [
        "i-0123456789abcdef0",
        "i-0123",
        "I-0123456789ABCDEF0",
        "vol-0123456789abcdef0",
        "i-0123456789abcdefg",
        "i-abcdef01",
    ]
    targets = parse_ids(lines)
    assert [(b.line, b.text) for b in targets.bad] == [
        (2, "i-0123"),
        (3, "I-0123456789ABCDEF0"),
        (4, "vol-0123456789abcdef0"),
        (5, "i-0123456789abcdefg"),
    ]
    assert "lowercase" in targets.bad[1].reason
    assert targets.ids == ["i-0123456789abcdef0", "i-abcdef01"]


def test_duplicates_keep_first_place_and_are_counted() -> None:
    targets = parse_ids(["i-abcdef01", "i-abcdef02", "i-abcdef01", "i-abcdef01"])
    assert targets.ids == ["i-abcdef01", "i-abcdef02"]
    assert targets.duplicates == {"i-abcdef01": [1, 3, 4]}


def test_read_ids_file_errors_are_clear(tmp_path: Path) -> None:
    with pytest.raises(TargetsError, match="no such file"):
        read_ids(str(tmp_path / "nope.txt"))
    with pytest.raises(TargetsError, match="folder"):
        read_ids(str(tmp_path))
    binary = tmp_path / "bin"
    binary.write_bytes(b"\xff\xfe\x00i")
    with pytest.raises(TargetsError, match="UTF-8"):
        read_ids(str(binary))


def test_read_ids_from_a_file_with_crlf(tmp_path: Path) -> None:
    path = tmp_path / "ids.txt"
    path.write_bytes(b"\xef\xbb\xbfi-0123456789abcdef0\r\ni-abcdef01\r\n")
    assert read_ids(str(path)).ids == ["i-0123456789abcdef0", "i-abcdef01"]


def test_several_ids_a_line_as_aws_cli_text_output_prints_them() -> None:
    lines = ["i-0123456789abcdef0\ti-abcdef01\ti-abcdef02", "i-abcdef03 i-XYZ  # more"]
    targets = parse_targets(lines)
    assert targets.format == "plain"
    assert targets.ids == ["i-0123456789abcdef0", "i-abcdef01", "i-abcdef02", "i-abcdef03"]
    assert [(b.line, b.text) for b in targets.bad] == [(2, "i-XYZ")]
    assert all(t.region is None and t.account is None for t in targets.items)


def test_csv_with_header_region_account_quotes_and_extra_columns() -> None:
    lines = [
        "\ufeff# exported from the inventory",
        "Name,InstanceId,Region,account_id",
        '"web, 1",i-abcdef01,us-east-1,111111111111',
        'db,"i-abcdef02",eu-west-1,',
        "",
        "cache,i-abcdef03,,222222222222",
    ]
    targets = parse_targets(lines)
    assert targets.format == "csv"
    assert targets.bad == []
    assert targets.items == [
        Target("i-abcdef01", "us-east-1", "111111111111"),
        Target("i-abcdef02", "eu-west-1", None),
        Target("i-abcdef03", None, "222222222222"),
    ]


def test_tsv_is_sniffed_from_the_header() -> None:
    targets = parse_targets(["instance_id\tregion", "i-abcdef01\tus-west-2", "i-abcdef02\t"])
    assert targets.format == "tsv"
    assert targets.items == [Target("i-abcdef01", "us-west-2"), Target("i-abcdef02")]


def test_table_errors_name_line_and_reason() -> None:
    lines = [
        "id,region,account",
        "i-abcdef01,us-east-1,111111111111",
        "i-ABCDEF02,us-east-1,111111111111",
        "i-abcdef03,useast1,111111111111",
        "i-abcdef04,us-east-1,11111111111",
        "i-abcdef05",
        "vol-1234,mars,x",
    ]
    targets = parse_targets(lines)
    assert targets.ids == ["i-abcdef01"]
    reasons = {b.line: b.reason for b in targets.bad}
    assert sorted(reasons) == [3, 4, 5, 6, 7]
    assert "bad ID" in reasons[3] and "lowercase" in reasons[3]
    assert "bad region 'useast1'" in reasons[4]
    assert "bad account" in reasons[5] and "leading zeros" in reasons[5]
    assert "missing column" in reasons[6]
    assert all(word in reasons[7] for word in ("bad ID", "bad region", "bad account"))


def test_table_without_an_id_column_says_so() -> None:
    targets = parse_targets(["name,region", "web,us-east-1"])
    assert targets.items == []
    assert [b.line for b in targets.bad] == [1]
    assert "missing column" in targets.bad[0].reason
    assert "instance_id" in targets.bad[0].reason


def test_json_lines() -> None:
    lines = [
        '{"instance_id": "i-abcdef01", "region": "us-east-1", "account": "111111111111"}',
        '{"InstanceId": "i-abcdef02", "account_id": "222222222222", "tags": {"a": 1}}',
        '{"id": "i-abcdef03", "region": null}',
        "# a comment",
        '{"id": "i-abcdef04", "account": 111111111111}',
        '{"id": "i-abcdef05", "region": "Moon"}',
        "not json",
        '["i-abcdef06"]',
        '{"region": "us-east-1"}',
    ]
    targets = parse_targets(lines)
    assert targets.format == "jsonl"
    assert targets.items == [
        Target("i-abcdef01", "us-east-1", "111111111111"),
        Target("i-abcdef02", None, "222222222222"),
        Target("i-abcdef03"),
    ]
    reasons = {b.line: b.reason for b in targets.bad}
    assert sorted(reasons) == [5, 6, 7, 8, 9]
    assert "account must be a string" in reasons[5] and "quote" in reasons[5]
    assert "bad region" in reasons[6]
    assert reasons[7].startswith("not JSON")
    assert reasons[8] == "not a JSON object"
    assert "missing field" in reasons[9]


def test_swarm_lists_json_document_is_a_list_of_targets_item_by_item() -> None:
    # What `swarm list --output json` prints: one object, the list under the kind's name,
    # pretty-printed over many lines (or on one, as jq -c prints it).
    document = {
        "instances": [
            {"region": "us-east-1", "account": None, "id": "i-abcdef01", "tags": {}},
            {"region": "eu-west-1", "account": "111111111111", "id": "i-abcdef02"},
            {"region": "us-east-1", "account": None, "id": "i-abcdef01"},
            {"region": "us-east-1", "id": "i-nothex"},
        ]
    }
    for text in (json.dumps(document, indent=2), json.dumps(document)):
        targets = parse_targets(text.splitlines())
        assert targets.format == "json" and targets.unit == "item"
        assert targets.items == [
            Target("i-abcdef01", "us-east-1"),
            Target("i-abcdef02", "eu-west-1", "111111111111"),
        ]
        assert targets.duplicates == {"us-east-1/i-abcdef01": [1, 3]}
        assert [(b.line, "bad ID" in b.reason) for b in targets.bad] == [(4, True)]
        assert targets.bad_count() == "1 invalid item(s)"
    # JSON lines stay JSON lines, a line at a time.
    lines = [json.dumps(i) for i in document["instances"]]
    assert parse_targets(lines).format == "jsonl"
    assert parse_targets(lines[:1]).format == "jsonl"
    # A listing that selected nothing is nothing to do, as its text (no line) is.
    for text in ('{\n  "instances": []\n}', '{"snapshots": []}'):
        empty = parse_targets(text.splitlines())
        assert empty.format == "json" and empty.items == [] and empty.bad == []
    assert parse_targets(['{"id": []}']).bad  # no ID, and no listing
    # An object whose only key is no list of objects is one JSON line, judged as such.
    one = parse_targets(['{"instances": "i-abcdef01"}'])
    assert one.format == "jsonl" and "missing field" in one.bad[0].reason


def test_json_field_names_are_read_in_any_case_as_a_header_is() -> None:
    # A "Region" read as no region put the run in the default one; with --missing-ok it
    # passed, the instances still running where the list said they were.
    lines = [
        '{"InstanceId": "i-abcdef01", "Region": "eu-west-1", "AccountId": "111111111111"}',
        '{"INSTANCE_ID": "i-abcdef02", "REGION": "eu-west-1", "Account": "222222222222"}',
        '{"Id": "i-abcdef03", "Region": null}',
        '{"instance_id": "i-abcdef04", "Instance_Id": "i-abcdef05"}',
        '{"instance_id": "i-abcdef06", "InstanceId": "i-abcdef07"}',
        '{"id": "7", "instance_id": "i-abcdef08", "region": "us-east-1", "Region": "eu-west-1"}',
        '{"Account": "111111111111", "account_id": "111111111111", "id": "i-abcdef09"}',
    ]
    targets = parse_targets(lines)
    assert targets.items == [
        Target("i-abcdef01", "eu-west-1", "111111111111"),
        Target("i-abcdef02", "eu-west-1", "222222222222"),
        Target("i-abcdef03"),
    ]
    reasons = {b.line: b.reason for b in targets.bad}
    assert reasons == {
        4: "instance_id and Instance_Id name one field twice; keep one of them",
        5: "instance_id and InstanceId name one field twice; keep one of them",
        6: "region and Region name one field twice; keep one of them",
        7: "Account and account_id name one field twice; keep one of them",
    }


def test_a_ledger_is_refused() -> None:
    record = (
        '{"action":"terminate","id":"i-abcdef01","run":"r1","seq":1,'
        '"status":"succeeded","ts":"2024-01-01T00:00:00Z","v":1}'
    )
    with pytest.raises(TargetsError, match="swarm ledger failed"):
        parse_targets([record], source="run.jsonl")


def test_duplicates_are_per_account_region_and_id() -> None:
    lines = [
        "instance_id,region,account",
        "i-abcdef01,us-east-1,111111111111",
        "i-abcdef01,us-east-1,222222222222",
        "i-abcdef01,eu-west-1,111111111111",
        "i-abcdef01,us-east-1,111111111111",
        "i-abcdef01,,",
    ]
    targets = parse_targets(lines)
    assert len(targets.items) == 4
    assert targets.duplicates == {"111111111111/us-east-1/i-abcdef01": [2, 5]}


def test_group_fills_in_defaults_and_keeps_order() -> None:
    targets = parse_targets(
        [
            "instance_id,region,account",
            "i-abcdef01,,",
            "i-abcdef02,eu-west-1,",
            "i-abcdef03,,222222222222",
            "i-abcdef04,us-east-1,",
            "i-abcdef01,us-east-1,",  # the first line spelled out: one instance
        ]
    )
    assert group(targets, "us-east-1", None) == {
        (None, "us-east-1"): ["i-abcdef01", "i-abcdef04"],
        (None, "eu-west-1"): ["i-abcdef02"],
        ("222222222222", "us-east-1"): ["i-abcdef03"],
    }
    assert group(targets.items, "us-west-2", "111111111111") == {
        ("111111111111", "us-west-2"): ["i-abcdef01"],
        ("111111111111", "eu-west-1"): ["i-abcdef02"],
        ("222222222222", "us-west-2"): ["i-abcdef03"],
        ("111111111111", "us-east-1"): ["i-abcdef04", "i-abcdef01"],
    }


def test_read_targets_detects_the_format_of_a_file(tmp_path: Path) -> None:
    path = tmp_path / "targets.csv"
    path.write_bytes(b"\xef\xbb\xbfinstance_id,region\r\ni-abcdef01,us-east-2\r\n")
    targets = read_targets(str(path))
    assert targets.items == [Target("i-abcdef01", "us-east-2")]
    assert read_ids is read_targets
    stdin = ['{"id": "i-abcdef01"}']
    assert read_targets("-", stdin).items == [Target("i-abcdef01")]
    with pytest.raises(TargetsError, match="standard input"):
        read_targets("-")


def test_table_lines_keep_their_numbers_across_a_multi_line_field() -> None:
    lines = [
        "instance_id,note,region",
        'i-abcdef01,"two',
        'lines",us-east-1',
        "i-abcdef02,x,nowhere",
    ]
    targets = parse_targets(lines)
    assert targets.items == [Target("i-abcdef01", "us-east-1")]
    assert [(b.line, b.text) for b in targets.bad] == [(4, "i-abcdef02,x,nowhere")]


def test_comma_separated_ids_without_a_header_get_a_hint() -> None:
    targets = parse_targets(["i-abcdef01,i-abcdef02"])
    assert "not commas" in targets.bad[0].reason


def test_reading_leaves_the_garbage_collector_as_it_found_it() -> None:
    assert gc.isenabled()
    parse_targets(["i-0123456789abcdef0"])
    assert gc.isenabled()
    with pytest.raises(TargetsError):
        parse_targets(['{"run": "r", "seq": 1, "status": "pending", "id": "i-00000001"}'])
    assert gc.isenabled()
    gc.disable()
    try:
        parse_targets(["i-0123456789abcdef0"])
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_a_huge_bad_line_is_reported_by_its_start_and_length(tmp_path: Path) -> None:
    from swarm_cli.targets import MAX_LINE, QUOTE_WIDTH, bounded_lines

    huge = "x" * (5 * 1024 * 1024)  # a few MB on one line
    path = tmp_path / "ids.txt"
    path.write_text(f"i-0123456789abcdef0\n{huge}\ni-0123456789abcdef1\r\n")
    targets = read_targets(str(path))
    assert targets.ids == ["i-0123456789abcdef0", "i-0123456789abcdef1"]
    [bad] = targets.bad
    assert bad.line == 2 and bad.length == len(huge)
    assert len(bad.text) <= MAX_LINE  # never held whole
    shown = bad.quoted()
    assert shown.startswith("'xxx") and f"… ({len(huge):,} characters)" in shown
    assert len(shown) < QUOTE_WIDTH + 40
    # Lines are read a bounded piece at a time, whatever their length.
    with open(path, encoding="utf-8", newline="") as handle:
        assert max(map(len, bounded_lines(handle, limit=1000))) <= 1000


def test_swarm_lists_json_on_one_long_line_is_read_whole(tmp_path: Path) -> None:
    from swarm_cli.targets import MAX_LINE

    # jq -c of swarm list's object: one line far past the longest line an ID list has.
    items = [{"id": f"i-{k:017x}", "region": "us-east-1", "tags": {"pad": "x" * 200}}
             for k in range(400)]  # fmt: skip
    text = json.dumps({"instances": items})
    assert len(text) > MAX_LINE
    path = tmp_path / "listed.json"
    path.write_text(text + "\n")
    targets = read_targets(str(path))
    assert targets.format == "json" and targets.bad == []
    assert targets.ids == [i["id"] for i in items]
    # Not swarm list's, or not on the first line: cut short and reported, as before.
    for first, number in (("", 1), ('{"id": "i-0123456789abcdef0"}\n', 2)):
        path.write_text(first + "{" + "x" * (2 * MAX_LINE) + "\n")
        [bad] = read_targets(str(path)).bad
        assert bad.line == number and len(bad.text) <= MAX_LINE
        assert bad.length == 2 * MAX_LINE + 1 and "line too long" in bad.reason
    # Held whole only up to a bound: past it, the reading stops.
    from swarm_cli.targets import bounded_lines

    path.write_text("{" + "x" * 10_000 + "\n")
    with open(path, encoding="utf-8") as handle, pytest.raises(TargetsError, match="jq -c"):
        list(bounded_lines(handle, limit=1000, endless=5000))


def test_the_cli_quotes_a_huge_bad_line_cut_short(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from swarm_cli.cli import app

    huge = "i-" + "z" * (3 * 1024 * 1024)
    path = tmp_path / "ids.txt"
    path.write_text(f"{huge}\n")
    result = CliRunner().invoke(app, ["terminate", "--ids", str(path), "--yes"])
    assert result.exit_code == 2
    assert "nothing was sent" in result.stderr
    line = next(x for x in result.stderr.splitlines() if x.startswith("  line 1:"))
    assert len(line) < 300
    assert f"({len(huge):,} characters)" in line


def test_a_field_past_the_csv_limit_is_an_invalid_line_not_a_crash() -> None:
    # A quoted field left open swallows the file until it passes the csv module's
    # field limit: the line it starts on is invalid and nothing after it is trusted.
    lines = [
        "instance_id,note",
        "i-abcdef01,ok",
        'i-abcdef02,"' + "x" * 1000,
        *(["x" * 1000] * 200),
        "i-abcdef03,ok",
    ]
    targets = parse_targets(lines)
    assert targets.items == [Target("i-abcdef01")]
    assert [b.line for b in targets.bad] == [3]
    assert "field limit" in targets.bad[0].reason
    assert "not read" in targets.bad[0].reason


def test_a_header_naming_a_column_twice_is_refused() -> None:
    targets = parse_targets(["instance_id,region,Instance_ID", "i-abcdef01,us-east-1,i-abcdef02"])
    assert targets.items == []
    assert [b.line for b in targets.bad] == [1]
    assert "instance_id column 2 times" in targets.bad[0].reason
    # Another ID-like column beside instance_id is not a duplicate: instance_id wins.
    targets = parse_targets(["id,instance_id", "7,i-abcdef01"])
    assert targets.items == [Target("i-abcdef01")] and not targets.bad


def test_a_json_line_nested_too_deep_is_an_invalid_line() -> None:
    deep = '{"instance_id": ' + "[" * 5000 + "]" * 5000 + "}"
    targets = parse_targets(['{"instance_id": "i-abcdef01"}', deep])
    assert targets.items == [Target("i-abcdef01")]
    assert [(b.line, b.reason) for b in targets.bad] == [(2, "nested too deep to read")]


@pytest.mark.parametrize(
    ("lines", "says"),
    [
        (["InstanceId,instance_id", "i-abcdef01,i-abcdef02"], "instance_id and instanceid"),
        (["instance_id,account,account_id", "i-abcdef01,1,2"], "account and account_id"),
        (
            ['{"instance_id": "i-abcdef01", "region": "us-east-1", "region": "eu-west-1"}'],
            "the key 'region' is given twice",
        ),
        (
            ['{"instance_id": "i-abcdef01", "InstanceId": "i-abcdef02"}'],
            "instance_id and InstanceId name one field twice",
        ),
    ],
)
def test_two_names_for_one_field_are_refused_not_guessed(lines: list[str], says: str) -> None:
    targets = parse_targets(lines)
    assert targets.items == []
    assert len(targets.bad) == 1 and says in targets.bad[0].reason


def test_a_row_with_more_fields_than_the_header_is_bad_not_cut() -> None:
    """An account written on a row whose header names no account column would be dropped,
    and the ID sent to the default account."""
    targets = parse_targets(
        [
            "instance_id,region",
            "i-abcdef01,us-east-1,111111111111",
            "i-abcdef02,us-east-1,",  # a trailing comma: nothing dropped
            "i-abcdef03,eu-west-1",
        ]
    )
    assert [b.line for b in targets.bad] == [2]
    assert "3 fields but the header names 2" in targets.bad[0].reason
    assert [t.id for t in targets.items] == ["i-abcdef02", "i-abcdef03"]


def test_a_line_with_no_end_stops_the_reading_instead_of_running_for_ever() -> None:
    import io

    from swarm_cli.targets import bounded_lines

    stream = io.StringIO("i-abcdef01\n" + "\0" * 5000)
    with pytest.raises(TargetsError, match="line 2 runs past 1,000 characters with no line end"):
        list(bounded_lines(stream, limit=100, endless=1000))
    # A long line that ends is reported by its start and length, as before.
    lines = list(bounded_lines(io.StringIO("x" * 500 + "\ni-abcdef01\n"), limit=100))
    assert [len(line) for line in lines] == [100, 11]


def test_dev_zero_as_the_id_list_is_refused(tmp_path: Path) -> None:
    from test_cli import swarm

    code, _, err = swarm("plan", "terminate", "--ids", "/dev/zero", "--region", "us-east-1")
    assert code == 2 and "with no line end: not a list of IDs" in err


def test_a_resource_list_names_its_id_column_as_exports_do() -> None:
    """SnapshotId (the AWS CLI's), snapshot_id, or swarm list's id; a volume list's
    InstanceId (the instance it is attached to) is another column, not a second name."""
    from swarm_cli.actions.operations import OPERATIONS

    rule = OPERATIONS["delete-volume"].id_rule
    vol = "vol-0123456789abcdef0"
    for text in (
        f"SnapshotId\n{vol}\n",
        f"VolumeId,InstanceId,region\n{vol},i-0123456789abcdef0,eu-west-1\n",
        f"volume_id\n{vol}\n",
        f"id,region\n{vol},eu-west-1\n",
        f'{{"VolumeId": "{vol}", "InstanceId": "i-0123456789abcdef0"}}\n',
    ):
        got = parse_targets(text.splitlines(keepends=True), rule=rule)
        if text.startswith("SnapshotId"):
            # Another kind's column: a plain list whose first line is no volume ID.
            assert [b.text for b in got.bad] == ["SnapshotId"], got.bad
            continue
        assert [t.id for t in got.items] == [vol] and not got.bad, (text, got.bad)
    both = parse_targets(["VolumeId,volume_id\n", f"{vol},{vol}\n"], rule=rule)
    assert both.bad and "names one column twice" in both.bad[0].reason
    wrong = parse_targets(["SnapshotId,region\n", f"{vol},eu-west-1\n"], rule=rule)
    assert wrong.bad and "no volume_id (or VolumeId, id) column" in wrong.bad[0].reason


def test_a_tag_list_with_an_instance_column_beside_another_resources_is_refused() -> None:
    """A tag operation takes any resource's ID: an export of volumes (VolumeId, and the
    InstanceId each is attached to) tagged the instances. Which column is meant is a
    guess; an instance list alone, or a resource_id column, is not."""
    from swarm_cli.actions.operations import OPERATIONS

    rule = OPERATIONS["delete-tags"].id_rule
    vol, inst = "vol-0123456789abcdef0", "i-0123456789abcdef0"
    for text in (
        f"VolumeId,InstanceId\n{vol},{inst}\n",
        f"AllocationId,PublicIp,InstanceId\neipalloc-0123456789abcdef0,1.2.3.4,{inst}\n",
        f'{{"VolumeId": "{vol}", "InstanceId": "{inst}"}}\n',
    ):
        got = parse_targets(text.splitlines(keepends=True), rule=rule)
        assert got.items == [] and len(got.bad) == 1, (text, got)
        what = "field" if text.startswith("{") else "column"
        assert f"which resources to act on is a guess; name their {what} resource_id" in (
            got.bad[0].reason
        )
    for text, want in (
        (f"InstanceId,OwnerId,account_id\n{inst},111111111111,111111111111\n", inst),
        # An export of instances names their image, subnet and VPC: still instances.
        (f"InstanceId,ImageId,SubnetId,VpcId\n{inst},ami-12c6146b,subnet-1,vpc-1\n", inst),
        (f'{{"InstanceId": "{inst}", "VolumeId": null}}\n', inst),
        (f'{{" InstanceId ": "{inst}"}}\n', inst),
        (f"resource_id,InstanceId\n{vol},{inst}\n", vol),
        # A bare id beside a named column is a row number, as in an instance list.
        (f"id,instance_id\n1,{inst}\n", inst),
        (f"id\n{vol}\n", vol),
        (f'{{"InstanceId": "{inst}", "Region": "eu-west-1"}}\n', inst),
    ):
        got = parse_targets(text.splitlines(keepends=True), rule=rule)
        assert [t.id for t in got.items] == [want] and not got.bad, (text, got.bad)
    # ... and one that holds another ID makes which to act on a guess, whatever the order.
    for text in (f"id,instance_id\n{vol},{inst}\n", f"InstanceId,id\n{inst},{vol}\n"):
        got = parse_targets(text.splitlines(keepends=True), rule=rule)
        assert not got.items and "which to act on is a guess" in got.bad[0].reason, text


def test_a_quoted_csv_field_over_two_lines_is_not_glued_into_one_id() -> None:
    lines = ["instance_id,account", '"i-0123', '456789abcdef0",111111111111']
    got = parse_targets(lines)
    assert got.items == [] and len(got.bad) == 1, got
    lines = ["instance_id,account", 'i-0123456789abcdef0,"1111111', '11111"']
    got = parse_targets(lines)
    assert got.items == [] and len(got.bad) == 1, got


def test_a_utf16_list_and_a_semicolon_csv_are_refused_with_what_to_do(tmp_path: Path) -> None:
    """What PowerShell's > writes (UTF-16) and a spreadsheet's CSV in a locale that
    separates with ; are named as such, with the way out."""
    wide = tmp_path / "u16.txt"
    wide.write_text("i-0123456789abcdef0\n", encoding="utf-16")
    with pytest.raises(TargetsError) as caught:
        read_targets(str(wide))
    assert "it looks like UTF-16: convert it with iconv -f UTF-16 -t UTF-8 FILE" in str(
        caught.value
    )
    semi = tmp_path / "semi.csv"
    semi.write_text("instance_id;region\ni-0123456789abcdef0;us-east-1\n")
    read = read_targets(str(semi))
    assert read.items == [] and len(read.bad) == 2
    assert {b.reason for b in read.bad} == {
        "the list's columns are separated by commas or tabs, not ;"
    }
    # Without its byte-order mark, UTF-16 is UTF-8 with a NUL beside each character.
    bare = tmp_path / "u16le.txt"
    bare.write_bytes("i-0123456789abcdef0\n".encode("utf-16-le"))
    reasons = {b.reason for b in read_targets(str(bare)).bad}
    assert reasons == {"the list looks like UTF-16: convert it with iconv -f UTF-16 -t UTF-8 FILE"}
    # Other bytes that are not UTF-8 get no such guess.
    latin = tmp_path / "latin.txt"
    latin.write_bytes("i-0123456789abcdef0 # café\n".encode("latin-1"))
    with pytest.raises(TargetsError) as caught:
        read_targets(str(latin))
    assert "UTF-16" not in str(caught.value)


def test_bytes_that_are_not_utf8_are_named_by_their_line(tmp_path: Path) -> None:
    """The error named "byte 86" of the reader's buffer: a user finds a line, not a byte.
    A lone NUL is not UTF-16, and undecodable bytes on standard input say so too."""
    ids = [f"i-0123456789abcdef{k}" for k in range(4)]
    latin = tmp_path / "latin.txt"
    latin.write_bytes(("\n".join(ids) + "\ni-0123456789abcdef9 # café\n").encode("latin-1"))
    with pytest.raises(TargetsError) as caught:
        read_targets(str(latin))
    assert f"{latin}: line 5: not UTF-8 text (invalid continuation byte)" == str(caught.value)
    # Past the first chunk the reader decodes: counted over the whole file.
    long = tmp_path / "long.txt"
    long.write_bytes(("\n".join(ids * 20000) + "\n").encode() + b"i-\xe9\n")
    with pytest.raises(TargetsError) as caught:
        read_targets(str(long))
    assert "line 80001: not UTF-8" in str(caught.value)
    nul = tmp_path / "nul.txt"
    nul.write_bytes(f"{ids[0]}\n{ids[1]}\x00\n".encode())
    bad = read_targets(str(nul)).bad
    assert [(b.line, b.reason) for b in bad] == [(2, "holds a NUL character")]
    piped = parse_targets([f"{ids[0]}\n", "i-0123\udce9456789abcdef\n"], source="standard input")
    assert [(b.line, b.reason) for b in piped.bad] == [(2, "not UTF-8 text")]


def test_an_id_column_beside_the_instance_column_is_a_row_number_unless_it_holds_ids() -> None:
    """A bare id beside InstanceId is taken for a row number; one holding another
    instance ID makes which to act on a guess, and that row is refused (in a table or a
    JSON line), where a number, or the same ID, is no matter."""
    one, two = "i-0123456789abcdef0", "i-0123456789abcdef1"
    for text in (
        f"id,InstanceId\n{one},{two}\n",
        f"InstanceId,id\n{two},{one}\n",
        f'{{"id": "{one}", "InstanceId": "{two}"}}\n',
    ):
        got = parse_targets(text.splitlines(keepends=True))
        assert not got.items, text
        assert len(got.bad) == 1 and "which to act on is a guess" in got.bad[0].reason, text
    # A second bare id, or a second key of that name in another case, is checked too.
    for text in (
        f"id,InstanceId,id\n1,{two},{one}\n",
        f'{{"InstanceId": "{two}", "id": 7, "ID": "{one}"}}\n',
    ):
        got = parse_targets(text.splitlines(keepends=True))
        assert not got.items and "which to act on is a guess" in got.bad[0].reason, text
    for text in (
        f"id,InstanceId\n1,{two}\n{one},{one}\n",
        f'{{"id": 7, "InstanceId": "{two}"}}\n{{"id": "{one}", "instance_id": "{one}"}}\n',
    ):
        got = parse_targets(text.splitlines(keepends=True))
        assert [t.id for t in got.items] == [two, one] and not got.bad, (text, got.bad)


def test_a_line_not_utf8_is_counted_as_the_list_reads_its_lines(tmp_path: Path) -> None:
    """CR alone ends a line as the list is read: the error said line 1 for line 3. And a
    character split across the reader's 64 KiB chunks put the line one past its own."""
    ids = [f"i-0123456789abcdef{k}" for k in range(3)]
    cr = tmp_path / "cr.txt"
    cr.write_bytes(f"{ids[0]}\r{ids[1]}\r".encode() + b"\xff\r" + f"{ids[2]}\r".encode())
    with pytest.raises(TargetsError, match=r"cr\.txt: line 3: not UTF-8"):
        read_targets(str(cr))
    crlf = tmp_path / "crlf.txt"
    crlf.write_bytes(f"{ids[0]}\r\n{ids[1]}\r\n".encode() + b"\xff\r\n")
    with pytest.raises(TargetsError, match=r"crlf\.txt: line 3: not UTF-8"):
        read_targets(str(crlf))
    split = tmp_path / "split.txt"
    first = b"#" + b"x" * ((1 << 16) - 4) + b"\n"  # line 1 ends 2 bytes before the chunk's end
    split.write_bytes(first + "€".encode() + b"\xff\n" + ids[0].encode() + b"\n")
    with pytest.raises(TargetsError, match=r"split\.txt: line 2: not UTF-8"):
        read_targets(str(split))


def test_a_repeat_on_one_line_and_standard_input_are_named_as_a_person_reads_them(
    tmp_path: Path,
) -> None:
    """ "e.g. i-… on lines 1, 1" for an ID twice on one line, and "in -" for standard input."""
    from test_cli import swarm

    one = "i-0123456789abcdef0"
    listed = tmp_path / "dup.txt"
    listed.write_text(f"{one} {one}\ni-0123456789abcdef1\n")
    code, _, err = swarm("terminate", "--ids", str(listed), "--max-count", "0")
    assert f"(e.g. {one} 2 times on line 1)" in err, err
    code, _, err = swarm("terminate", "--ids", "-", "--yes", stdin="i-xyz\n")
    assert code == 2 and "1 invalid line(s) in standard input; nothing was sent" in err, err


def test_a_look_alike_or_invisible_character_is_named() -> None:
    """A hyphen a word processor made (U+2010) or a zero-width space copied with the ID
    read "not an instance ID", though the ID looks right on screen."""
    got = parse_targets(["i\u20100123456789abcdef0\n", "i-0123456789abcdef1\u200b\n"])
    assert [b.reason.split(",")[0] for b in got.bad] == [
        "holds U+2010",
        "holds U+200B",
    ]
    assert all("not ASCII" in b.reason for b in got.bad)


def test_the_kinds_a_listing_names_are_those_swarm_list_lists() -> None:
    from swarm_cli.cli.act import listed_kinds
    from swarm_cli.targets import LISTED_KINDS

    assert {"instances", *listed_kinds()} == LISTED_KINDS
