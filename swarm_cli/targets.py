"""Reading and checking the list of instances to act on.

Three formats, told apart by their first line (after blank and ``#`` lines):

* plain: instance IDs separated by whitespace, one or several a line, so the
  output of ``aws ec2 describe-instances --query
  'Reservations[].Instances[].InstanceId' --output text`` (tab-separated IDs)
  can be used as it is; ``#`` starts a comment;
* CSV or TSV with a header row naming the ID column (``instance_id``,
  ``InstanceId`` or ``id``) and optionally ``region`` and ``account``
  (``account_id``); other columns are ignored;
* JSON lines: one object a line with the same field names (in any case, as a header);
  or one JSON object holding a list of such objects under its only key, as ``swarm
  list --output json`` prints.

A swarm ledger is refused: it holds finished intents as well as unfinished
ones, and ``swarm ledger failed`` is what turns one into a list of targets.
"""

from __future__ import annotations

import codecs
import contextlib
import csv
import gc
import json
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import TextIO

INSTANCE_ID = re.compile(r"i-(?:[0-9a-f]{8}|[0-9a-f]{17})")
REGION = re.compile(r"[a-z]{2}(?:-[a-z]+)+-\d+", re.ASCII)
ACCOUNT_ID = re.compile(r"\d{12}", re.ASCII)


@dataclass(frozen=True)
class IdRule:
    """What an ID of the list must look like: instance IDs, or an operation's resources."""

    pattern: re.Pattern[str]
    what: str  # "an instance ID (expected i- followed by 8 or 17 hex digits)"
    prefix: str = "i-"
    # Names of the ID column or field, case-insensitive, in order of preference: a file
    # with both a row number column "id" and an "instance_id" column means the latter.
    columns: tuple[str, ...] = ("instance_id", "instanceid", "id")

    @property
    def column_hint(self) -> str:
        """The names an error asks for: "instance_id (or InstanceId, id)"."""
        first = self.columns[0]
        camel = "".join(word.capitalize() for word in first.split("_"))
        return f"{first} (or {camel}, id)"


INSTANCES = IdRule(INSTANCE_ID, "an instance ID (expected i- followed by 8 or 17 hex digits)")

REGION_COLUMNS = ("region",)
ACCOUNT_COLUMNS = ("account", "account_id", "accountid")
# The keys swarm list --output json puts its list under.
LISTED_KINDS = frozenset({"instances", "snapshots", "volumes", "images", "addresses"})
# Fields that every ledger record has and no list of targets is likely to.
_LEDGER_FIELDS = frozenset({"run", "seq", "status"})


@dataclass(frozen=True)
class Target:
    """One instance; ``None`` region or account means the run's default."""

    id: str
    region: str | None = None
    account: str | None = None

    @property
    def label(self) -> str:
        """``account/region/id`` with the parts left to the defaults omitted."""
        return "/".join(part for part in (self.account, self.region, self.id) if part)


# Longest line read whole: a longer one is reported by its start and its length, never
# held in memory (an ID list is short lines; a 1 GiB line is a mistake or an attack).
MAX_LINE = 65536
# A line this long is no mistake in an ID list: the reading stops (a stream with no line
# end, such as /dev/zero, would never end).
ENDLESS_LINE = 1 << 26
# The longest first line read whole as JSON (swarm list's object through jq -c: some
# 400,000 instances); held whole, its characters may take 4 bytes each.
WHOLE_LINE = 1 << 25
# Characters of a bad line (or value) quoted back to the user.
QUOTE_WIDTH = 80


class _LongLine(str):
    """The first ``MAX_LINE`` characters of a longer line; ``length`` is the whole line's."""

    length: int = 0


def quote(text: str, length: int | None = None, width: int = QUOTE_WIDTH) -> str:
    """``text`` quoted as Python would (control characters escaped), cut to ``width``
    characters with an ellipsis and the whole length when longer."""
    n = len(text) if length is None else length
    if n <= width:
        return repr(text)
    return f"{text[:width]!r}… ({n:,} characters)"


@dataclass(frozen=True)
class BadLine:
    line: int
    text: str  # at most MAX_LINE characters of it
    reason: str
    length: int | None = None  # the whole line's, when ``text`` is its start only
    value: str | None = None  # the ID it gives, when one was read (a table's, a JSON one's)

    def quoted(self, width: int = QUOTE_WIDTH) -> str:
        """The line as shown in an error: quoted, cut short when long."""
        return quote(self.text, self.length, width)


@dataclass
class Targets:
    items: list[Target] = field(default_factory=list)
    # Target.label of each repeated target -> every line it is on, the kept one first.
    duplicates: dict[str, list[int]] = field(default_factory=dict)
    bad: list[BadLine] = field(default_factory=list)
    format: str = "plain"  # plain, csv, tsv, jsonl or json (one document: swarm list's)

    @property
    def unit(self) -> str:
        """What a bad entry's number counts: lines, or a document's items."""
        return "item" if self.format == "json" else "line"

    @property
    def ids(self) -> list[str]:
        """The instance IDs in order (regions and accounts left out)."""
        return [target.id for target in self.items]

    def bad_count(self) -> str:
        """How many lines are invalid, and how many entries on them when more: for errors."""
        lines = len({bad.line for bad in self.bad})
        more = f" ({len(self.bad)} invalid entries)" if len(self.bad) > lines else ""
        return f"{lines} invalid {self.unit}(s){more}"


class TargetsError(ValueError):
    """The input cannot be used; nothing has been sent."""


def parse_targets(
    lines: Iterable[str], *, source: str = "input", rule: IdRule = INSTANCES
) -> Targets:
    """Read targets in whichever format the content is in (see the module's doc).

    Every invalid line is collected (not just the first), so one run of the
    command shows all that needs fixing. Duplicates are per (account, region,
    ID) and keep their first place. Raises ``TargetsError`` for a swarm ledger.
    """
    with _collector_paused():
        return _parse_targets(lines, source, rule)


@contextlib.contextmanager
def _collector_paused() -> Iterator[None]:
    """No garbage collection while a list is read: it makes no cycles, only many objects.

    At 100,000 lines, the collector would otherwise walk every target read so far
    again and again, which takes about as long as reading them.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _too_long(numbered: list[tuple[int, str]], builder: _Builder) -> list[tuple[int, str]]:
    """The lines of a sane length; each longer one is reported bad by its start."""
    if not any(isinstance(text, _LongLine) for _, text in numbered):
        return numbered
    kept = []
    for number, text in numbered:
        if isinstance(text, _LongLine):
            reason = f"line too long ({text.length:,} characters; at most {MAX_LINE - 1:,})"
            builder.targets.bad.append(BadLine(number, str(text), reason, text.length))
        else:
            kept.append((number, text))
    return kept


def _cut_short(numbered: list[tuple[int, str]]) -> list[tuple[int, str]]:
    """A first line read whole (JSON on one line) that is no document: as any long line."""
    cut = []
    for number, text in numbered:
        if len(text) >= MAX_LINE and not isinstance(text, _LongLine):
            long = _LongLine(text[:MAX_LINE])
            long.length = len(text.rstrip("\r\n"))
            text = long
        cut.append((number, text))
    return cut


def _parse_targets(lines: Iterable[str], source: str, rule: IdRule = INSTANCES) -> Targets:
    builder = _Builder(rule)
    numbered = _too_long(list(_numbered(lines)), builder)
    first = next((text for _, text in numbered if _content(text)), "")
    head = first.strip()
    if head.startswith("{") and (document := _document(numbered)) is not None:
        builder.targets.format = "json"
        _parse_document(document, builder, source)
    elif head.startswith("{"):
        builder.targets.format = "jsonl"
        _parse_jsonl(_too_long(_cut_short(numbered), builder), builder, source)
    elif (delimiter := _table_delimiter(head, rule)) is not None:
        builder.targets.format = "tsv" if delimiter == "\t" else "csv"
        _parse_table(numbered, delimiter, builder)
    else:
        _parse_plain(numbered, builder)
    builder.targets.bad.sort(key=lambda bad: bad.line)
    return builder.targets


def parse_ids(lines: Iterable[str]) -> Targets:
    """Plain format only: instance IDs separated by whitespace, ``#`` comments.

    Whitespace, CRLF and a UTF-8 byte order mark are tolerated.
    """
    builder = _Builder()
    with _collector_paused():
        _parse_plain(_too_long(list(_numbered(lines)), builder), builder)
    builder.targets.bad.sort(key=lambda bad: bad.line)
    return builder.targets


def read_targets(
    path: str, stdin: Iterable[str] | None = None, *, rule: IdRule = INSTANCES
) -> Targets:
    """Read a file of targets, or standard input when ``path`` is ``-``."""
    if path == "-":
        if stdin is None:
            raise TargetsError("no standard input to read IDs from")
        if hasattr(stdin, "readline"):  # a stream, not a list of lines already read
            stdin = bounded_lines(stdin)  # type: ignore[arg-type]
        return parse_targets(stdin, source="standard input", rule=rule)
    try:
        with open(path, encoding="utf-8", newline="") as handle:
            return parse_targets(bounded_lines(handle), source=path, rule=rule)
    except FileNotFoundError:
        raise TargetsError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise TargetsError(f"{path}: is a folder, not a file of IDs") from None
    except UnicodeDecodeError as err:
        line = _undecodable_line(path)
        where = f"line {line}: " if line is not None else ""
        raise TargetsError(
            f"{path}: {where}not UTF-8 text ({err.reason}){_utf16_hint(err)}"
        ) from None
    except PermissionError:
        raise TargetsError(f"{path}: permission denied") from None


def _undecodable_line(path: str) -> int | None:
    """The number of the first line of ``path`` that is not UTF-8 (read again in chunks:
    the error of a text stream counts bytes of its own buffer, not lines)."""
    decoder = codecs.getincrementaldecoder("utf-8")()
    line, after_cr = 1, False
    try:
        with open(path, "rb") as handle:
            while chunk := handle.read(1 << 16):
                held = len(decoder.getstate()[0])  # bytes of a character the last chunk began
                try:
                    decoder.decode(chunk)
                except UnicodeDecodeError as err:
                    # The error counts from the held-back bytes, not from this chunk.
                    return line + _line_ends(chunk[: max(err.start - held, 0)], after_cr)
                line += _line_ends(chunk, after_cr)
                after_cr = chunk.endswith(b"\r")
    except OSError:
        return None
    return None


def _line_ends(data: bytes, after_cr: bool) -> int:
    """Line ends in ``data`` as the list is read (LF, CRLF or CR alone), a LF right after
    the CR that ended the data before it not counted again."""
    ends = data.count(b"\n") + data.count(b"\r") - data.count(b"\r\n")
    return ends - 1 if after_cr and data.startswith(b"\n") else ends


def _utf16_hint(err: UnicodeDecodeError) -> str:
    """What to do with UTF-16 (what PowerShell's > writes): it starts with its byte-order
    mark, or has a NUL beside every ASCII character."""
    head = bytes(err.object[:64])
    if head[:2] in (b"\xff\xfe", b"\xfe\xff") or (len(head) >= 4 and head[1::2].count(0) > 1):
        return "; it looks like UTF-16: convert it with iconv -f UTF-16 -t UTF-8 FILE"
    return ""


# The name callers used before files could carry regions and accounts.
read_ids = read_targets


def group(
    targets: Targets | Iterable[Target], default_region: str, default_account: str | None
) -> dict[tuple[str | None, str], list[str]]:
    """(account, region) -> instance IDs in input order, defaults filled in.

    Each key is one of EC2's throttling scopes, so each gets its own window. A
    target named once with the defaults left blank and once with them spelled
    out is the same instance: it is kept once, in its first place.
    """
    items = targets.items if isinstance(targets, Targets) else targets
    groups: dict[tuple[str | None, str], list[str]] = {}
    seen: set[tuple[str | None, str, str]] = set()
    for target in items:
        account = target.account or default_account
        region = target.region or default_region
        if (account, region, target.id) in seen:
            continue
        seen.add((account, region, target.id))
        groups.setdefault((account, region), []).append(target.id)
    return groups


class _Builder:
    def __init__(self, rule: IdRule = INSTANCES) -> None:
        self.rule = rule
        self.targets = Targets()
        # (id, region, account) -> first line: a plain tuple hashes in C, a Target in Python.
        self.first_seen: dict[tuple[str, str | None, str | None], int] = {}

    def add(self, target: Target, line: int) -> None:
        seen = len(self.first_seen)
        first = self.first_seen.setdefault((target.id, target.region, target.account), line)
        if len(self.first_seen) == seen:  # listed before
            lines = self.targets.duplicates.setdefault(target.label, [first])
            lines.append(line)
            return
        self.targets.items.append(target)

    def bad(self, line: int, text: str, reason: str, value: str | None = None) -> None:
        self.targets.bad.append(BadLine(line, text, reason, value=value))


def bounded_lines(
    handle: TextIO, limit: int = MAX_LINE, endless: int = ENDLESS_LINE
) -> Iterator[str]:
    """The lines of ``handle``, none held longer than ``limit`` characters.

    A longer line comes as a ``_LongLine``: its first ``limit`` characters and its
    length, the rest read and dropped a piece at a time. One past ``endless`` characters
    ends the reading (``TargetsError``): an ID list has no such line, and a stream with
    no line end (``/dev/zero``) would be read for ever.
    """
    number = 0
    while line := handle.readline(limit):
        number += 1
        if len(line) < limit or line.endswith(("\n", "\r")):
            yield line
            continue
        if number == 1 and line.lstrip("\ufeff \t").startswith("{"):
            # JSON on one line (swarm list's, through jq -c): read whole, up to WHOLE_LINE.
            yield _whole(handle, line, limit, min(endless, WHOLE_LINE))
            continue
        length = len(line)
        while more := handle.readline(limit):
            ended = more.endswith(("\n", "\r"))
            length += len(more) - (1 if ended else 0)
            if ended or len(more) < limit:
                break
            if length > endless:
                raise TargetsError(
                    f"line {number} runs past {endless:,} characters with no line end: "
                    "not a list of IDs; nothing was sent"
                )
        long = _LongLine(line)
        long.length = length
        yield long


def _whole(handle: TextIO, start: str, limit: int, endless: int) -> str:
    """The rest of the line that begins with ``start``, read ``limit`` at a time."""
    parts, length = [start], len(start)
    while more := handle.readline(limit):
        parts.append(more)
        length += len(more)
        if more.endswith(("\n", "\r")) or len(more) < limit:
            break
        if length > endless:
            raise TargetsError(
                f"line 1 runs past {endless:,} characters: too long to read as one JSON "
                "object (give swarm list's as JSON lines: jq -c '.instances[]'); nothing "
                "was sent"
            )
    return "".join(parts)


def _numbered(lines: Iterable[str]) -> Iterator[tuple[int, str]]:
    for number, raw in enumerate(lines, start=1):
        if isinstance(raw, _LongLine):
            yield number, raw
            continue
        text = raw.lstrip("\ufeff") if number == 1 else raw
        yield number, text.rstrip("\r\n")


def _content(text: str) -> bool:
    """Not blank and not a whole-line comment."""
    stripped = text.strip()
    return bool(stripped) and not stripped.startswith("#")


def _table_delimiter(head: str, rule: IdRule = INSTANCES) -> str | None:
    """The header's delimiter if ``head`` is a CSV/TSV header, else None (plain)."""
    if "," in head:
        # No instance ID holds a comma, so this is a table even if its header is
        # wrong; the table parser says what is missing.
        return ","
    if "\t" not in head:
        return "," if _column_kind(head.strip('"'), rule) == "id" else None
    cells = next(csv.reader([head], delimiter="\t"))
    if any(_column_kind(cell, rule) for cell in cells) and not any(
        cell.strip().startswith("i-") for cell in cells
    ):
        return "\t"
    return None


def _column_kind(name: str, rule: IdRule = INSTANCES) -> str | None:
    key = name.strip().lower()
    if key in rule.columns:
        return "id"
    if key in REGION_COLUMNS:
        return "region"
    if key in ACCOUNT_COLUMNS:
        return "account"
    return None


def _parse_plain(numbered: list[tuple[int, str]], builder: _Builder) -> None:
    for number, text in numbered:
        tokens = text.split("#", 1)[0].split()
        for token in tokens:
            if builder.rule.pattern.fullmatch(token):
                builder.add(Target(token), number)
            else:
                # With one ID a line, the whole line says most; with several, the token.
                reason = _id_reason(token, builder.rule)
                builder.bad(number, text if len(tokens) == 1 else token, reason, value=token)


def _parse_table(numbered: list[tuple[int, str]], delimiter: str, builder: _Builder) -> None:
    rows = [(number, text) for number, text in numbered if _content(text)]
    header_line, header_text = rows[0]
    header = [cell.strip() for cell in next(csv.reader([header_text], delimiter=delimiter))]
    lowered = [name.lower() for name in header]
    columns: dict[str, int] = {}
    for kind, names in (
        ("id", builder.rule.columns),
        ("region", REGION_COLUMNS),
        ("account", ACCOUNT_COLUMNS),
    ):
        # A bare "id" names the column only where no other name does (beside one, it is
        # a row number or another column; see below).
        name = next((n for n in names if n in lowered and n != "id"), None)
        name = name or next((n for n in names if n in lowered), None)
        if name is None:
            continue
        # Two names of one column (instance_id and InstanceId, account and account_id):
        # which holds it is a guess. A bare "id" beside a named one is another column, and
        # so is another kind's (a volume list's instance_id: the instance it is attached to).
        aliases = [
            n
            for n in names
            if n in lowered
            and not (n == "id" and n != name)
            and (kind != "id" or n.replace("_", "") == name.replace("_", ""))
        ]
        if len(aliases) > 1:
            builder.bad(
                header_line,
                header_text,
                f"the header names one column twice: {' and '.join(aliases)}; keep one of them",
            )
            return
        if lowered.count(name) > 1:
            # Which of them holds the IDs (or the place) is anyone's guess.
            builder.bad(
                header_line,
                header_text,
                f"the header names the {name} column {lowered.count(name)} times; keep one of them",
            )
            return
        columns[kind] = lowered.index(name)
    if "id" not in columns:
        if any(builder.rule.pattern.fullmatch(name) for name in header):
            found = "this first line holds IDs; separate plain IDs with spaces, not commas"
        else:
            found = "it has " + (", ".join(repr(name) for name in header) or "nothing")
        builder.bad(
            header_line,
            header_text,
            f"missing column: the header names no {builder.rule.column_hint} column; {found}",
        )
        return
    others = _other_id_columns(header, header[columns["id"]], builder.rule)
    if others:
        builder.bad(header_line, header_text, others)
        return
    # A bare "id" beside the named ID column: a row number, unless it holds IDs too.
    spares = [k for k, name in enumerate(lowered) if name == "id" and k != columns["id"]]
    # Bad records are reported with their own line numbers and text, a quoted
    # field running over several lines included.
    consumed: list[tuple[int, str]] = []

    def feed() -> Iterator[str]:
        for number, text in rows[1:]:
            consumed.append((number, text))
            # With its line end: a quoted field running over two lines keeps the break
            # (and is refused), where two lines glued would make another ID.
            yield text + "\n"

    reader = csv.reader(feed(), delimiter=delimiter)
    start = 0
    needed = max(columns.values()) + 1
    while True:
        try:
            row = next(reader)
        except StopIteration:
            break
        except csv.Error as err:
            # A quoted field left open runs to the end of the file, and a field
            # larger than the csv module's limit cannot be read: what follows
            # cannot be trusted either, so the rest of the file is not read.
            number = consumed[start][0]
            builder.bad(
                number,
                consumed[start][1],
                f"not a CSV record ({err}); the file from this line on was not read",
            )
            return
        number = consumed[start][0]
        text = "\n".join(text for _, text in consumed[start : reader.line_num])
        start = reader.line_num
        cells = [cell.strip() for cell in row]
        if not any(cells):
            continue
        if len(cells) < needed:
            missing = [kind for kind, index in columns.items() if index >= len(cells)]
            builder.bad(
                number,
                text,
                f"missing column: {len(cells)} field(s) but the header has {len(header)} "
                f"(no {' or '.join(header[columns[kind]] for kind in missing)})",
            )
            continue
        if any(cells[len(header) :]):
            builder.bad(
                number,
                text,
                f"{len(cells)} fields but the header names {len(header)}: a field with no "
                "column (an account or region the header does not name?) would be dropped",
            )
            continue
        region = cells[columns["region"]] if "region" in columns else ""
        account = cells[columns["account"]] if "account" in columns else ""
        chosen, named = cells[columns["id"]], header[columns["id"]]
        clash = next(
            filter(
                None, (_two_ids(builder.rule, header[k], cells[k], named, chosen) for k in spares)
            ),
            None,
        )
        if clash:
            builder.bad(number, text, clash)
            continue
        _check(builder, number, text, chosen, region or None, account or None)


def _document(numbered: list[tuple[int, str]]) -> list[object] | None:
    """The items of one JSON object that holds a list under its only key, as ``swarm list
    --output json`` prints (``{"instances": [...]}``, over many lines or one); None for
    anything else (JSON lines: the second object is past the end of the first)."""
    try:
        data = json.loads("\n".join(text for _, text in numbered), object_pairs_hook=_no_repeats)
    except (ValueError, RecursionError):  # _RepeatedKey and JSONDecodeError are ValueErrors
        return None
    if isinstance(data, dict) and len(data) == 1:
        ((key, items),) = data.items()
        if not isinstance(items, list) or not all(isinstance(i, dict) for i in items):
            return None
        # An empty list is one only under what swarm list names its kinds: a listing that
        # selected nothing is nothing to do, where {"id": []} is a line with no ID.
        if items or key in LISTED_KINDS:
            return items
    return None


def _parse_document(items: list[object], builder: _Builder, source: str) -> None:
    """Each item of the document is read as a JSON line is; its number is its place."""
    for number, data in enumerate(items, 1):
        assert isinstance(data, dict)
        _json_record(builder, number, json.dumps(data), data, source, "item")


def _parse_jsonl(numbered: list[tuple[int, str]], builder: _Builder, source: str) -> None:
    for number, text in numbered:
        if not _content(text):
            continue
        try:
            data = json.loads(text, object_pairs_hook=_no_repeats)
        except _RepeatedKey as err:
            builder.bad(number, text, f"the key {err.key!r} is given twice")
            continue
        except json.JSONDecodeError as err:
            builder.bad(number, text, f"not JSON ({err.msg} at column {err.colno})")
            continue
        except RecursionError:
            builder.bad(number, text, "nested too deep to read")
            continue
        if not isinstance(data, dict):
            builder.bad(number, text, "not a JSON object")
            continue
        _json_record(builder, number, text, data, source, "line")


def _json_record(
    builder: _Builder, number: int, text: str, data: dict[str, object], source: str, unit: str
) -> None:
    """One JSON object of the list (a line, or an item of a document): its target."""
    if data.keys() >= _LEDGER_FIELDS:
        raise TargetsError(
            f"{source}: {unit} {number} is a swarm ledger record; a ledger is not a list "
            "of targets (it holds finished intents too): `swarm ledger failed LEDGER` "
            "lists the ones not known to be done"
        )
    reasons: list[str] = []
    keys = _json_fields(data, builder.rule, reasons)
    instance = _field(data, keys.get("id"), reasons)
    region = _field(data, keys.get("region"), reasons)
    account = _field(data, keys.get("account"), reasons)
    for spare in (key for key in data if key.strip().lower() == "id"):
        if instance is not None and spare != keys.get("id"):
            clash = _two_ids(builder.rule, spare, data[spare], keys["id"], instance)
            if clash:
                reasons.append(clash)
                break
    if reasons:
        builder.bad(number, text, "; ".join(reasons))
    elif instance is None:
        builder.bad(number, text, f"missing field: {builder.rule.column_hint}")
    else:
        _check(builder, number, text, instance, region, account)


class _RepeatedKey(ValueError):
    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


def _no_repeats(pairs: list[tuple[str, object]]) -> dict[str, object]:
    """A JSON object whose keys are all different: the last of two would win silently."""
    data: dict[str, object] = {}
    for key, value in pairs:
        if key in data:
            raise _RepeatedKey(key)
        data[key] = value
    return data


def _json_fields(data: dict[str, object], rule: IdRule, reasons: list[str]) -> dict[str, str]:
    """The key of each kind of field a JSON line gives ("id", "region", "account"), named
    as a CSV header names its columns: in any case, by any of its names. One field given
    under two names (or two cases of one) is a reason, not a guess."""
    given: dict[str, list[str]] = {}
    for key, value in data.items():
        if value is not None:
            given.setdefault(key.strip().lower(), []).append(key)
    keys: dict[str, str] = {}
    for kind, names in (
        ("id", rule.columns),
        ("region", REGION_COLUMNS),
        ("account", ACCOUNT_COLUMNS),
    ):
        present = [name for name in names if name in given]
        if not present:
            continue
        # A bare "id" names the field only where no other name does, as in a table.
        first = next((name for name in present if name != "id"), present[0])
        # A bare "id" beside a named ID field is another field, as in a table.
        aliases = [
            name
            for name in present
            if not (name == "id" and name != first)
            and (kind != "id" or name.replace("_", "") == first.replace("_", ""))
        ]
        found = [key for name in aliases for key in given[name]]
        if len(found) > 1:
            reasons.append(f"{' and '.join(found)} name one field twice; keep one of them")
        else:
            keys[kind] = found[0]
    named = [key for keys_ in given.values() for key in keys_]
    others = _other_id_columns(named, keys.get("id"), rule, "field")
    if others:
        reasons.append(others)
    return keys


# The ID columns of exports whose rows are resources attached to an instance, and name
# it (describe-volumes, describe-addresses, describe-network-interfaces): beside one of
# them, an InstanceId column is the attachment, not what the row is.
_ATTACHED = frozenset({"volumeid", "allocationid", "associationid", "networkinterfaceid"})


def _other_id_columns(
    names: list[str], chosen: str | None, rule: IdRule, what: str = "column"
) -> str | None:
    """Why a list of any resource (a tag operation's) cannot use its instance ID column:
    beside it, the ID column of a resource attached to an instance (an export of volumes
    names the instance each is attached to). Which of them to act on is a guess: None
    when there is none (an export of instances, with their image and subnet, is one)."""
    if rule.prefix or chosen is None or chosen.strip().lower().replace("_", "") != "instanceid":
        return None
    others = [
        name
        for name in names
        if name != chosen and name.strip().lower().replace("_", "") in _ATTACHED
    ]
    if not others:
        return None
    return (
        f"{chosen} beside {', '.join(others)}: which resources to act on is a guess; name "
        f"their {what} resource_id"
    )


def _two_ids(rule: IdRule, spare: str, value: object, named: str, chosen: str) -> str | None:
    """Why a row whose bare "id" holds another ID than its named ID column cannot be
    read: which of the two to act on is a guess (a row number there is no matter)."""
    if not isinstance(value, str) or value.strip() == chosen.strip():
        return None
    if not rule.pattern.fullmatch(value.strip()):
        return None
    return (
        f"{spare} holds {quote(value.strip(), width=40)} and {named} {quote(chosen, width=40)}:"
        f" which to act on is a guess; keep one of them"
    )


def _field(data: dict[str, object], name: str | None, reasons: list[str]) -> str | None:
    if name is None:
        return None
    value = data[name]
    if isinstance(value, str):
        return value or None
    number = isinstance(value, int) and not isinstance(value, bool)
    hint = " (quote it: a number loses leading zeros)" if number else ""
    reasons.append(f"{name} must be a string, not {json.dumps(value)}{hint}")
    return None


def _check(
    builder: _Builder,
    number: int,
    text: str,
    instance: str,
    region: str | None,
    account: str | None,
) -> None:
    reasons: list[str] = []
    if not builder.rule.pattern.fullmatch(instance):
        reasons.append(
            f"bad ID {quote(instance, width=40)}: {_id_reason(instance, builder.rule)}"
            if instance
            else "no ID"
        )
    if region is not None and not REGION.fullmatch(region):
        reasons.append(
            f"bad region {quote(region, width=40)}: expected a region name such as us-east-1"
        )
    if account is not None and not ACCOUNT_ID.fullmatch(account):
        hint = " (leading zeros lost?)" if account.isdigit() and len(account) < 12 else ""
        reasons.append(f"bad account {quote(account, width=40)}: expected 12 digits{hint}")
    if reasons:
        builder.bad(number, text, "; ".join(reasons), value=instance)
    else:
        builder.add(Target(instance, region, account), number)


def _id_reason(text: str, rule: IdRule = INSTANCES) -> str:
    if "\x00" in text:
        if 2 * text.count("\x00") >= len(text.strip("\x00")):
            # UTF-16 without its byte-order mark reads as UTF-8 with a NUL beside each letter.
            return "the list looks like UTF-16: convert it with iconv -f UTF-16 -t UTF-8 FILE"
        return "holds a NUL character"
    if any("\udc80" <= c <= "\udcff" for c in text):  # standard input's undecodable bytes
        return "not UTF-8 text"
    odd = next((c for c in text if not c.isascii()), None)
    if odd is not None:
        # A look-alike of a letter or a hyphen (a word processor's), or an invisible one.
        return (
            f"holds U+{ord(odd):04X}, which is not ASCII (a look-alike of a letter or a "
            "hyphen, or an invisible character, copied with the ID?)"
        )
    if ";" in text:  # a CSV of a spreadsheet in a locale whose separator is ;
        return "the list's columns are separated by commas or tabs, not ;"
    if rule is not INSTANCES:
        if rule.pattern.fullmatch(text.lower()):
            return "IDs are lowercase"
        return f"not {rule.what}"
    if INSTANCE_ID.fullmatch(text.lower()):
        return "instance IDs are lowercase"
    if not text.startswith("i-"):
        return "not an instance ID (expected i- followed by 8 or 17 hex digits)"
    return "expected i- followed by 8 or 17 lowercase hex digits"
