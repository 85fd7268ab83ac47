"""Reading and checking the list of instance IDs to act on."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field

INSTANCE_ID = re.compile(r"i-(?:[0-9a-f]{8}|[0-9a-f]{17})")


@dataclass(frozen=True)
class BadLine:
    line: int
    text: str
    reason: str


@dataclass
class Targets:
    ids: list[str] = field(default_factory=list)
    duplicates: dict[str, list[int]] = field(default_factory=dict)
    bad: list[BadLine] = field(default_factory=list)


class TargetsError(ValueError):
    """The input cannot be used; nothing has been sent."""


def parse_ids(lines: Iterable[str]) -> Targets:
    """One ID per line; blank lines and ``#`` comments are skipped.

    Whitespace, CRLF and a UTF-8 byte order mark are tolerated. Every invalid
    line is collected (not just the first), so one run of the command shows
    all that needs fixing. Duplicates keep their first place.
    """
    result = Targets()
    first_seen: dict[str, int] = {}
    for number, raw in enumerate(lines, start=1):
        text = raw.lstrip("\ufeff") if number == 1 else raw
        text = text.split("#", 1)[0].strip()
        if not text:
            continue
        if not INSTANCE_ID.fullmatch(text):
            result.bad.append(BadLine(number, raw.rstrip("\r\n"), _reason(text)))
            continue
        if text in first_seen:
            result.duplicates.setdefault(text, [first_seen[text]]).append(number)
            continue
        first_seen[text] = number
        result.ids.append(text)
    return result


def _reason(text: str) -> str:
    if INSTANCE_ID.fullmatch(text.lower()):
        return "instance IDs are lowercase"
    if not text.startswith("i-"):
        return "not an instance ID (expected i- followed by 8 or 17 hex digits)"
    return "expected i- followed by 8 or 17 lowercase hex digits"


def read_ids(path: str, stdin: Iterable[str] | None = None) -> Targets:
    """Read a file of IDs, or standard input when ``path`` is ``-``."""
    if path == "-":
        if stdin is None:
            raise TargetsError("no standard input to read IDs from")
        return parse_ids(stdin)
    try:
        with open(path, encoding="utf-8", newline="") as handle:
            return parse_ids(handle.read().splitlines())
    except FileNotFoundError:
        raise TargetsError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise TargetsError(f"{path}: is a folder, not a file of IDs") from None
    except UnicodeDecodeError as err:
        raise TargetsError(f"{path}: not UTF-8 text ({err.reason} at byte {err.start})") from None
    except PermissionError:
        raise TargetsError(f"{path}: permission denied") from None
