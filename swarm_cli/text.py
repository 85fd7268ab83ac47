"""Text from outside (tags, names, filters, API messages, ledger fields, paths) shown as text.

Whatever an instance's tags or an endpoint's error message hold is printed literally
in every view: never parsed as rich markup, never let through as a control character.
An escape sequence could redraw the screen, a carriage return hide what came before it,
a newline forge a line, and U+202E (or another bidi control) reverse what a person reads
before confirming. Each such character is shown as its escape (``\\x1b``, ``\\u202e``),
so one item stays one line and nothing is hidden.
"""

from __future__ import annotations

import html
import re
import shlex

from rich.text import Text


def _escape(char: str) -> str:
    code = ord(char)
    if code < 0x100:
        return f"\\x{code:02x}"
    if code < 0x10000:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


def literal(value: object) -> str:
    """``value`` as one line of visible text: every non-printable character as its escape.

    Non-printable is Python's: control characters (C0, DEL, C1), format characters
    (bidi overrides and isolates, zero-width ones), separators other than the space
    (line and paragraph separators), surrogates and unassigned code points.
    """
    s = value if isinstance(value, str) else str(value)
    if s.isprintable():
        return s
    return "".join(c if c.isprintable() else _escape(c) for c in s)


def shell_quote(value: str) -> str:
    """``value`` as one word of a shell command that is visible text and runs as given:
    shlex's quoting, or where it holds characters :func:`literal` would escape, bash's
    ``$'...'`` with those as the escapes of their UTF-8 bytes (a byte not valid UTF-8,
    held as a surrogate, as that byte)."""
    if value.isprintable():
        return shlex.quote(value)
    return "$'" + "".join(_ansi_c(c) for c in value) + "'"


def _ansi_c(char: str) -> str:
    if char in "\\'":
        return "\\" + char
    if char.isprintable():
        return char
    # As UTF-8 bytes: bash reads a \u escape by the shell's locale (as text in C's).
    return "".join(f"\\x{b:02x}" for b in char.encode("utf-8", "surrogateescape"))


def text(value: object, style: str = "") -> Text:
    """A rich :class:`Text` of ``literal(value)``: never parsed as markup, whatever it holds."""
    return Text(literal(value), style=style)


def clip(value: object, width: int) -> str:
    """``literal(value)``, cut to ``width`` characters with an ellipsis when longer."""
    s = literal(value)
    return s if len(s) <= width else s[: max(0, width - 1)] + "…"


def html_text(value: object) -> str:
    """``literal(value)`` escaped for HTML (element text and quoted attributes)."""
    return html.escape(literal(value), quote=True)


# Characters that mean something inside a line of GitHub's Markdown (emphasis, code,
# links, table cells, strikethrough, maths); a backslash before each makes it literal.
# Those that matter only at the start of a line (#, -, +, >) are left: swarm never
# starts a line with outside text.
_MARKDOWN_SPECIAL = frozenset("\\`*_[]|~$")


def markdown_text(value: object) -> str:
    """``literal(value)`` for Markdown, table cells included: one line, no markup, no HTML.

    ``<``, ``>`` and ``&`` become HTML entities (GitHub renders raw HTML in a step
    summary); the punctuation of inline Markdown is backslash-escaped.
    """
    out = []
    for c in literal(value):
        if c == "<":
            out.append("&lt;")
        elif c == ">":
            out.append("&gt;")
        elif c == "&":
            out.append("&amp;")
        elif c in _MARKDOWN_SPECIAL:
            out.append("\\" + c)
        else:
            out.append(c)
    return "".join(out)


def markdown_code(value: object) -> str:
    """``literal(value)`` as a Markdown code span, or as escaped text if it holds a backtick."""
    s = literal(value)
    return markdown_text(s) if "`" in s else f"`{s}`"


def plural(noun: str) -> str:
    """``snapshot`` -> ``snapshots``, ``address`` -> ``addresses``."""
    return noun + ("es" if noun.endswith("s") else "s")


def one_or_more(noun: str) -> str:
    """``snapshot`` -> ``snapshot(s)``, ``address`` -> ``address(es)``: after a count."""
    return noun + ("(es)" if noun.endswith("s") else "(s)")


_ID_LIST = re.compile(r"'([a-z]+-[0-9a-zA-Z]+(?:,\s*[a-z]+-[0-9a-zA-Z]+)+)'")


def own_part(message: str, resource_id: str) -> str:
    """EC2's message with a list of its call's IDs that holds ``resource_id`` cut to that
    one ("The instance IDs 'i-a' (and 9 more of its call) do not exist"): a row per ID
    otherwise repeats the whole list."""

    def cut(m: re.Match[str]) -> str:
        ids = [i.strip() for i in m.group(1).split(",")]
        if resource_id not in ids:
            return m.group(0)
        return f"'{resource_id}' (and {len(ids) - 1} more of its call)"

    return _ID_LIST.sub(cut, message)


def not_utf8(option: str, value: str) -> str | None:
    """Why ``value`` given to ``option`` cannot go to EC2 (None: it can): bytes that are
    not UTF-8 on the command line, which Python keeps as lone surrogates and no API call
    can encode."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return (
            f"{option} {literal(value)}: not valid UTF-8 (check the encoding of the shell "
            "or of the file it came from)"
        )
    return None
