from __future__ import annotations

from pathlib import Path

import pytest

from swarm_cli.targets import TargetsError, parse_ids, read_ids


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
