"""A generated corpus of hostile names: strings no identifier slot may accept.

Each string is built from a plain base name (`events`, `events-landing`, `amount`) by one hostile
mutation: a control character, a newline or space at either end, a Unicode look-alike or
zero-width character, a quote or backtick, an SQL fragment, a path, a format or markup string,
a very long run, dots in the wrong places, or nothing at all. `is_hostile` says, without the
project's patterns, why each one is refused by every slot, so the corpus cannot drift into names
that are legitimately valid somewhere.
"""

from __future__ import annotations

ALLOWED = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-")
BASES = ("events", "events-landing", "amount", "db.events", "T_1")

_CONTROL = [chr(c) for c in range(32)] + ["\x7f"]
_SPACES = [" ", "\t", "\n", "\r\n", "\r", "\x0b", "\x0c", "\u00a0", "\u1680", "\u2000", "\u2003"]
_SPACES += ["\u2007", "\u200a", "\u2028", "\u2029", "\u202f", "\u205f", "\u3000", "\x85"]
_INVISIBLE = ["\u200b", "\u200c", "\u200d", "\u2060", "\ufeff", "\u00ad", "\u180e", "\u034f"]
_INVISIBLE += ["\u202e", "\u202d", "\u2066", "\u2069", "\u061c", "\u115f", "\u3164"]
_LOOKALIKES = [
    "\u0435vents",  # Cyrillic
    "ev\u0435nts",
    "\u0435v\u0435nts",
    "events\u0435",
    "\u0430mount",  # Cyrillic
    "am\u043eunt",  # Cyrillic
    "amount\u0301",  # combining accent
    "e\u0301vents",
    "\uff45\uff56\uff45\uff4e\uff54\uff53",  # fullwidth
    "events\uff0elanding",  # fullwidth dot
    "events\u2024x",  # one-dot leader
    "events\u2010landing",  # hyphen
    "events\u2011landing",  # non-breaking hyphen
    "events\u2013landing",  # en dash
    "events\u2212landing",  # minus sign
    "events\uff3flanding",  # fullwidth low line
    "\u212avents",  # Kelvin sign, folds to k
    "\u0130vents",  # dotted capital I
    "ev\u0131nts",  # dotless i
    "\u03b5vents",  # Greek epsilon
    "\u0435v\u0435nts-l\u0430nding",
    "\U0001d41e\U0001d42f\U0001d41e\U0001d427\U0001d42d\U0001d42c",  # mathematical bold
    "events\U000e0001",  # language tag
    "\u00e9v\u00e9nements",
    "\u4e8b\u4ef6",
    "events\U0001f642",
    "ev\u00e9nts",
    "\u0665events",  # Arabic-Indic digit
    "events\u00b2",  # superscript two
    "T\u2081",  # subscript one
]
_QUOTES = ["`", "``", "'", '"', "\\", "\\'", "'\"", "`;`", "\\x00", "\\n"]
_SQL = [
    "events; DROP TABLE events",
    "events;",
    ";events",
    "events--",
    "events -- x",
    "events/*x*/",
    "/*",
    "x' OR '1'='1",
    'x" OR "1"="1',
    "events UNION SELECT 1",
    "a); DROP TABLE b; --",
    "events` ; DROP TABLE `x",
    "`events`",
    "[events]",
    "events WHERE 1=1",
    "events,users",
    "events users",
    "events(1)",
    "events=1",
    "events*",
    "events%",
    "events?",
    "events|x",
    "events&x",
    "events$x",
    "events#x",
    "events@x",
    "events!x",
    "events^x",
    "events~x",
    "events+x",
    "events:x",
    "events<x>",
    "events{x}",
    "SELECT * FROM events",
    "1; SELECT pg_sleep(10)",
    "reflect('java.lang.Runtime','getRuntime')",
    "java_method('x','y')",
    "default.events; DROP",
    "delta.`/tmp/x`",
]
_PATHS = [
    "../events",
    "../../etc/passwd",
    "..",
    ".",
    "./events",
    "/etc/passwd",
    "/events",
    "events/",
    "events/../x",
    "a/b",
    "a\\b",
    "..\\..\\x",
    "~",
    "~/events",
    "C:\\events",
    "file:///etc/passwd",
    "s3a://bucket/x",
    "hdfs:///x",
    "//server/share",
    "events/.",
    "\\\\?\\C:\\x",
    "%2e%2e%2f",
    "..%2f..%2f",
]
_FORMATS = [
    "{0}",
    "{events}",
    "%s",
    "%n",
    "${env:HOME}",
    "${jndi:ldap://x/a}",
    "$(rm -rf ~)",
    "`rm -rf ~`",
    "[red]events[/]",
    "[/]",
    "[bold]",
    ":smile:",
    "root:x:0:0",
    "\x1b[31mred\x1b[0m",
    "\x1b]0;title\x07",
    "events\x08\x08\x08",
    "<script>",
    "&amp;",
    "events\\",
    "-events",
    "--help",
    "-h",
    "--",
    "-",
    "--app-id",
    "- events",
]
_DOTS = [
    ".events",
    "events.",
    "..events",
    "events..x",
    "db..events",
    "db.events.",
    ".db.events",
    "...",
    "a..b..c",
    "events.-x",
    "-.",
    ".-",
    "_.",
    "events-.",
]
_EMPTY = ["", " ", "  ", "\n", "\t", "\r\n", "\x00", "\u200b", "\ufeff", "\u3000"]
_LONG = [
    "a" * 129,
    "a" * 257,
    "a" * 1000,
    "a" * 10_000,
    "events" * 2000,
    "x" * 10_000 + "\n",
    "\n" + "y" * 10_000,
    "é" * 10_000,
    "a." * 5000,
    "A" * 300 + ";",
    "_" * 129,
    "1" * 129,
    "events-" * 30,
]
_NUL = ["\x00events", "events\x00", "ev\x00ents", "\x00" * 10, "events\x00.x"]
#: Strings a shell hands over when argv holds bytes that are not UTF-8 (surrogateescape).
SURROGATES = ["events\udcff", "\udcc3\udca9vents", "\udc80"]


def generate() -> list[str]:
    """The corpus: every mutation of every base, without repeats, in a stable order."""
    corpus: list[str] = []
    for base in BASES:
        for char in _CONTROL:
            corpus += [char + base, base + char, base[:2] + char + base[2:]]
        for char in _SPACES:
            corpus += [char + base, base + char]
        for char in _INVISIBLE:
            corpus += [char + base, base + char, base[:3] + char + base[3:]]
        for quote in _QUOTES:
            corpus += [base + quote, quote + base + quote]
    corpus += _LOOKALIKES + _SQL + _PATHS + _FORMATS + _DOTS + _EMPTY + _LONG + _NUL
    corpus += [f"{base}\n{base}" for base in BASES]
    corpus += [f"{base};{fragment}" for base in BASES for fragment in ("", " --", "DROP")]
    unique = list(dict.fromkeys(corpus))
    return [s for s in unique if is_hostile(s)]


def is_hostile(name: str) -> str:
    """Why no identifier slot may take `name` (a non-empty reason), judged without regexes."""
    if not name:
        return "empty"
    if len(name) > 128 and "." not in name:
        return "longer than 128 characters"
    if len(name) > 257:
        return "longer than any dotted name"
    outside = sorted({c for c in name if c not in ALLOWED})
    if outside:
        return f"holds {outside[0]!r}, which no slot allows"
    if name[0] in ".-":
        return "starts with a dot or a hyphen"
    if ".." in name or name.endswith("."):
        return "has an empty dotted part"
    return ""


def corpus() -> list[str]:
    """The generated corpus plus the strings only an argv can carry (surrogate escapes)."""
    return generate() + SURROGATES
