r"""Regexes from manifests, clients and plugins: the Rust ``regex`` dialect, run by RE2.

Every regex the server runs is compiled here. It is written in the syntax of Rust's
``regex`` crate, translated to RE2's and compiled with ``google-re2``, so a search takes
time linear in the length of the text whatever the pattern: there is no backtracking.
What the dialect does not allow (look-around, backreferences, possessive quantifiers,
atomic groups) raises ``ValueError`` when the pattern is compiled.

The translation keeps the Rust meaning where RE2's syntax differs:

* ``\d``, ``\s``, ``\w`` and their negations are Unicode-aware: decimal digits (``Nd``),
  Unicode ``White_Space``, and alphabetic, mark, digit, connector and join-control
  characters;
* ``\x{…}``, ``\u{…}``, ``\U{…}``, ``\uXXXX`` and ``\UXXXXXXXX`` name code points;
* ``\p{…}``/``\P{…}`` accept general categories by short or long name, loosely spelt
  (``\pL``, ``\p{lu}``, ``\p{Uppercase_Letter}``, ``\p{gc=Nd}``), scripts
  (``\p{Greek}``, ``\p{sc=Greek}``) and ``Alphabetic``, ``White_Space``, ``ASCII``, ``Any``;
* ``(?x)`` ignores whitespace and ``#`` comments; ``(?u)`` is accepted (always on);
* a character class may hold another one (``[a-c[xy]]``, a union).

Not available on RE2, and so errors: ``\<``, ``\>`` and ``\b{…}`` word-edge assertions,
class set operations (``&&``, ``--``, ``~~``), negated nested classes, a negated class
holding ``\W`` or ``\P{Alphabetic}`` beside other items, ``(?R)`` and ``(?-u)``, other
binary Unicode properties. Two meanings differ: ``\b``/``\B`` see only ASCII letters,
digits and ``_`` as word characters, and a script name means the Script property (Rust
uses Script_Extensions).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import re2

__all__ = ["Pattern", "compile_pattern", "encode", "translate"]

_WHITE_SPACE = ((0x09, 0x0D), (0x20, 0x20), (0x85, 0x85), (0xA0, 0xA0), (0x1680, 0x1680),
                (0x2000, 0x200A), (0x2028, 0x2029), (0x202F, 0x202F), (0x205F, 0x205F),
                (0x3000, 0x3000))
"""Unicode ``White_Space``: what Rust's ``\\s`` matches."""

# Other_Alphabetic (Unicode 17): with L and Nl it makes Alphabetic. RE2 has no table of it.
_OTHER_ALPHABETIC = """
    345 363-36F 5B0-5BD 5BF 5C1-5C2 5C4-5C5 5C7-5C9 610-61A 64B-657 659-65F 670 6D6-6DC
    6E1-6E4 6E7-6E8 6ED 711 730-73F 7A6-7B0 816-817 81B-823 825-827 829-82C 897 8D4-8DF
    8E3-8E9 8F0-903 93A-93B 93E-94C 94E-94F 955-957 962-963 981-983 9BE-9C4 9C7-9C8 9CB-9CC
    9D7 9E2-9E3 A01-A03 A3E-A42 A47-A48 A4B-A4C A51 A70-A71 A75 A81-A83 ABE-AC5 AC7-AC9
    ACB-ACC AE2-AE3 AFA-AFC B01-B03 B3E-B44 B47-B48 B4B-B4C B56-B57 B62-B63 B82 BBE-BC2
    BC6-BC8 BCA-BCC BD7 C00-C04 C3E-C44 C46-C48 C4A-C4C C55-C56 C62-C63 C81-C83 CBE-CC4
    CC6-CC8 CCA-CCC CD5-CD6 CE2-CE3 CF3 D00-D03 D3E-D44 D46-D48 D4A-D4C D57 D62-D63 D81-D83
    DCF-DD4 DD6 DD8-DDF DF2-DF3 E31 E34-E3A E4D EB1 EB4-EB9 EBB-EBC ECD F71-F83 F8D-F97
    F99-FBC 102B-1036 1038 103B-103E 1056-1059 105E-1060 1062-1064 1067-106D 1071-1074
    1082-108D 108F 109A-109D 1712-1713 1732-1733 1752-1753 1772-1773 17B6-17C8 1885-1886
    18A9 1920-192B 1930-1938 1A17-1A1B 1A55-1A5E 1A61-1A74 1ABF-1AC0 1ACC-1ACE 1B00-1B04
    1B35-1B43 1B80-1B82 1BA1-1BA9 1BAC-1BAD 1BE7-1BF1 1C24-1C36 1DD3-1DF4 24B6-24E9
    2DE0-2DFF A674-A67B A69E-A69F A802 A80B A823-A827 A880-A881 A8B4-A8C3 A8C5 A8FF
    A926-A92A A947-A952 A980-A983 A9B4-A9BF A9E5 AA29-AA36 AA43 AA4C-AA4D AA7B-AA7D AAB0
    AAB2-AAB4 AAB7-AAB8 AABE AAEB-AAEF AAF5 ABE3-ABEA FB1E 10376-1037A 10A01-10A03
    10A05-10A06 10A0C-10A0F 10D24-10D27 10D69 10EAB-10EAC 10ECB-10ECD 10EF3 10EF5
    10EF7-10EF8 10EFA-10EFC 11000-11002 11038-11045 11073-11074 11080-11082 110B0-110B8
    110C2 11100-11102 11127-11132 11145-11146 11180-11182 111B3-111BF 111CE-111CF
    1122C-11234 11237 1123E 11241 112DF-112E8 11300-11303 1133E-11344 11347-11348
    1134B-1134C 11357 11362-11363 113B8-113C0 113C2 113C5 113C7-113CA 113CC-113CD
    11435-11441 11443-11445 114B0-114C1 115AF-115B5 115B8-115BE 115DC-115DD 11630-1163E
    11640 116AB-116B5 1171D-1172A 1182C-11838 11930-11935 11937-11938 1193B-1193C 11940
    11942 119D1-119D7 119DA-119DF 119E4 11A01-11A0A 11A35-11A39 11A3B-11A3E 11A51-11A5B
    11A8A-11A97 11B60-11B67 11C2F-11C36 11C38-11C3E 11C92-11CA7 11CA9-11CB6 11D31-11D36
    11D3A 11D3C-11D3D 11D3F-11D41 11D43 11D47 11D8A-11D8E 11D90-11D91 11D93-11D96 11DF0
    11EF3-11EF6 11F00-11F01 11F03 11F34-11F3A 11F3E-11F40 1611E-1612E 16F4F 16F51-16F87
    16F8F-16F92 16FF0-16FF1 1BC9E 1E000-1E006 1E008-1E018 1E01B-1E021 1E023-1E024
    1E026-1E02A 1E08F 1E6E3 1E6E6 1E6EE-1E6EF 1E6F5 1E947 1F130-1F149 1F150-1F169
    1F170-1F189
"""

_MAX_CODE_POINT = 0x10FFFF


def _cp(cp: int) -> str:
    return f"\\x{{{cp:X}}}"


def _span(lo: int, hi: int) -> str:
    return _cp(lo) if lo == hi else f"{_cp(lo)}-{_cp(hi)}"


def _table(text: str) -> str:
    spans = []
    for item in text.split():
        lo, _, hi = item.partition("-")
        spans.append(_span(int(lo, 16), int(hi or lo, 16)))
    return "".join(spans)


def _complement(spans: tuple[tuple[int, int], ...]) -> str:
    out, at = [], 0
    for lo, hi in spans:
        if lo > at:
            out.append(_span(at, lo - 1))
        at = hi + 1
    out.append(_span(at, _MAX_CODE_POINT))
    return "".join(out)


# Class bodies (the inside of ``[...]``) for the sets RE2 spells differently from Rust.
_SPACE = "".join(_span(lo, hi) for lo, hi in _WHITE_SPACE)
_NOT_SPACE = _complement(_WHITE_SPACE)
_ALPHABETIC = r"\p{L}\p{Nl}" + _table(_OTHER_ALPHABETIC)
_WORD = (r"\p{L}\p{Nl}\p{M}\p{Nd}\p{Pc}\x{200C}\x{200D}"
         + _table("24B6-24E9 1F130-1F149 1F150-1F169 1F170-1F189"))
_ANY = _span(0, _MAX_CODE_POINT)

_CATEGORIES = {
    "l": "L", "letter": "L", "lu": "Lu", "uppercaseletter": "Lu", "ll": "Ll",
    "lowercaseletter": "Ll", "lt": "Lt", "titlecaseletter": "Lt", "lm": "Lm",
    "modifierletter": "Lm", "lo": "Lo", "otherletter": "Lo",
    "m": "M", "mark": "M", "combiningmark": "M", "mn": "Mn", "nonspacingmark": "Mn",
    "mc": "Mc", "spacingmark": "Mc", "me": "Me", "enclosingmark": "Me",
    "n": "N", "number": "N", "nd": "Nd", "decimalnumber": "Nd", "digit": "Nd", "nl": "Nl",
    "letternumber": "Nl", "no": "No", "othernumber": "No",
    "p": "P", "punctuation": "P", "punct": "P", "pc": "Pc", "connectorpunctuation": "Pc",
    "pd": "Pd", "dashpunctuation": "Pd", "ps": "Ps", "openpunctuation": "Ps", "pe": "Pe",
    "closepunctuation": "Pe", "pi": "Pi", "initialpunctuation": "Pi", "pf": "Pf",
    "finalpunctuation": "Pf", "po": "Po", "otherpunctuation": "Po",
    "s": "S", "symbol": "S", "sm": "Sm", "mathsymbol": "Sm", "sc": "Sc",
    "currencysymbol": "Sc", "sk": "Sk", "modifiersymbol": "Sk", "so": "So",
    "othersymbol": "So",
    "z": "Z", "separator": "Z", "zs": "Zs", "spaceseparator": "Zs", "zl": "Zl",
    "lineseparator": "Zl", "zp": "Zp", "paragraphseparator": "Zp",
    "c": "C", "other": "C", "cc": "Cc", "control": "Cc", "cntrl": "Cc", "cf": "Cf",
    "format": "Cf", "cs": "Cs", "surrogate": "Cs", "co": "Co", "privateuse": "Co",
}
_CASED_LETTER = r"\p{Lu}\p{Ll}\p{Lt}"


@dataclass(frozen=True, slots=True)
class _Set:
    """A set of characters as a class body; ``negated`` means its complement."""

    body: str
    negated: bool = False

    def atom(self) -> str:
        return f"[^{self.body}]" if self.negated else f"[{self.body}]"


_CLASS_ESCAPES = {
    "d": _Set(r"\p{Nd}"), "D": _Set(r"\P{Nd}"), "s": _Set(_SPACE), "S": _Set(_NOT_SPACE),
    "w": _Set(_WORD), "W": _Set(_WORD, negated=True),
}
"""The character classes ``\\d \\D \\s \\S \\w \\W`` as Unicode sets."""


def _options() -> Any:
    options = re2.Options()
    options.log_errors = False
    options.never_capture = True
    return options


_OPTIONS = _options()


def _re2_error(exc: Exception) -> str:
    reason = exc.args[0] if exc.args else str(exc)
    return reason.decode("utf-8", "replace") if isinstance(reason, bytes) else str(reason)


def _loose(name: str) -> str:
    """A property name as Rust compares it: case, spaces, ``_`` and ``-`` ignored."""
    return "".join(c for c in name.lower() if c not in " _-\t")


def _script(name: str) -> str | None:
    """RE2's spelling of a script name, or None when RE2 knows no such script."""
    words = name.replace("-", " ").replace("_", " ").split()
    for candidate in (name.strip(), "_".join(w[:1].upper() + w[1:].lower() for w in words)):
        if candidate and candidate.replace("_", "").isalnum():
            try:
                re2.compile(f"\\p{{{candidate}}}", _OPTIONS)
            except re2.error:
                continue
            return candidate
    return None


def _property(spec: str, negated: bool) -> _Set:
    """The set ``\\p{spec}`` (``\\P{spec}`` when ``negated``) names."""
    key, value = "", spec
    for sep in ("!=", "=", ":"):
        if sep in spec:
            key, _, value = spec.partition(sep)
            negated ^= sep == "!="
            break
    key, loose = _loose(key), _loose(value)
    if key in ("", "gc", "generalcategory"):
        if loose in ("lc", "casedletter", "l&"):
            return _Set(_CASED_LETTER, negated)
        short = _CATEGORIES.get(loose)
        if short is not None:
            return _Set(f"\\{'P' if negated else 'p'}{{{short}}}")
    if key == "":
        if loose in ("alphabetic", "alpha"):
            return _Set(_ALPHABETIC, negated)
        if loose in ("whitespace", "wspace", "space"):
            return _Set(_NOT_SPACE if negated else _SPACE)
        if loose == "ascii":
            return _Set(_span(0x80, _MAX_CODE_POINT) if negated else _span(0, 0x7F))
        if loose == "any":
            return _Set(_ANY, negated)
    if key in ("", "sc", "script"):
        name = _script(value)
        if name is not None:
            return _Set(f"\\{'P' if negated else 'p'}{{{name}}}")
    if key in ("scx", "scriptextensions"):
        raise ValueError(f"Unicode property {spec!r} is not supported (Script_Extensions)")
    raise ValueError(f"unknown or unsupported Unicode property {spec!r}")


_LINE_ANCHORS = {"^": "(?m:^)", "$": "(?m:$)", "\\A": "(?m:^)", "\\z": "(?m:$)"}
_HEX = frozenset("0123456789abcdefABCDEF")
_SIMPLE_ESCAPES = frozenset("afnrtv")
_ASSERTIONS = frozenset("AzbB")


class _Translator:
    """One pass over a Rust-dialect pattern, writing the RE2 spelling."""

    def __init__(self, pattern: str, lines: bool = False) -> None:
        self.p = pattern
        self.i = 0
        self.verbose = False
        self.lines = lines

    def fail(self, message: str) -> ValueError:
        return ValueError(f"{message} at offset {self.i}")

    def skip_verbose(self) -> None:
        """In ``(?x)`` mode, step over whitespace and ``#`` comments."""
        p = self.p
        while self.verbose and self.i < len(p):
            if p[self.i].isspace():
                self.i += 1
            elif p[self.i] == "#":
                end = p.find("\n", self.i)
                self.i = len(p) if end < 0 else end + 1
            else:
                return

    def code_point(self, kind: str) -> str:
        """``\\x``/``\\u``/``\\U`` at ``self.i`` (the backslash) as an RE2 escape."""
        p, start = self.p, self.i
        if p.startswith("{", start + 2):
            end = p.find("}", start + 3)
            if end < 0:
                raise self.fail(f"unterminated \\{kind}{{ escape")
            digits, self.i = p[start + 3:end], end + 1
        else:
            width = {"x": 2, "u": 4, "U": 8}[kind]
            digits, self.i = p[start + 2:start + 2 + width], start + 2 + width
            if len(digits) != width:
                raise self.fail(f"\\{kind} needs {width} hex digits or braces")
        if not digits or not set(digits) <= _HEX or int(digits, 16) > _MAX_CODE_POINT \
                or 0xD800 <= int(digits, 16) <= 0xDFFF:
            raise self.fail(f"invalid code point \\{kind}{{{digits}}}")
        return _cp(int(digits, 16))

    def escape(self) -> str | _Set:
        """The escape at ``self.i``: RE2 text for one character or an assertion, or a set."""
        p = self.p
        if self.i + 1 >= len(p):
            raise self.fail("pattern ends with a lone backslash")
        c = p[self.i + 1]
        if c in "xuU":
            return self.code_point(c)
        if c in "pP":
            negated = c == "P"
            if p.startswith("{", self.i + 2):
                end = p.find("}", self.i + 3)
                if end < 0:
                    raise self.fail("unterminated \\p{ property")
                spec, self.i = p[self.i + 3:end], end + 1
            elif self.i + 2 < len(p):
                spec, self.i = p[self.i + 2], self.i + 3
            else:
                raise self.fail(f"\\{c} needs a property name")
            return _property(spec, negated)
        self.i += 2
        if c in _CLASS_ESCAPES:
            return _CLASS_ESCAPES[c]
        if c == "b" and p.startswith("{", self.i):
            raise self.fail("word-edge assertions \\b{...} are not supported")
        if c in _SIMPLE_ESCAPES or c in _ASSERTIONS:
            return "\\" + c
        if c.isdigit():
            raise self.fail("backreferences are not supported")
        if c in "<>":
            raise self.fail(f"the word-edge assertion \\{c} is not supported")
        if c.isascii() and not c.isalnum() and (c != " " or self.verbose) and c != "\n":
            return "\\" + c
        raise self.fail(f"unrecognized escape sequence \\{c}")

    def char_class(self) -> str | _Set:
        """The class opening at ``self.i``; a set, or RE2 text when it needs alternation."""
        p = self.p
        self.i += 1
        negated = p.startswith("^", self.i)
        if negated:
            self.i += 1
        body: list[str] = []
        complements: list[str] = []
        first = True
        last_char: str | None = None  # the previous item when it is one character
        while True:
            self.skip_verbose()
            if self.i >= len(p):
                raise self.fail("unclosed character class")
            c = p[self.i]
            if c == "]" and not first:
                self.i += 1
                break
            first = False
            if p.startswith(("&&", "--", "~~"), self.i):
                raise self.fail(f"class set operation {p[self.i:self.i + 2]!r} is not supported")
            if c == "[":
                if p.startswith("[:", self.i):
                    end = p.find(":]", self.i + 2)
                    if end >= 0:
                        body.append(p[self.i:end + 2])
                        self.i, last_char = end + 2, None
                        continue
                inner = self.char_class()
                if not isinstance(inner, _Set) or inner.negated:
                    raise self.fail("a negated class inside a class is not supported")
                body.append(inner.body)
                last_char = None
                continue
            if c == "-" and last_char is not None and not p.startswith("]", self.i + 1):
                self.i += 1
                self.skip_verbose()
                high = self.class_char()
                if high is None:
                    raise self.fail("invalid range in character class")
                body.append("-" + high)
                last_char = None
                continue
            item = self.class_char()
            if item is not None:
                body.append(item)
                last_char = item
                continue
            found = self.escape()
            assert isinstance(found, _Set)
            (complements if found.negated else body).append(found.body)
            last_char = None
        own = "".join(body)
        if not complements:
            return _Set(own, negated)
        if negated:
            if own or len(complements) > 1:
                raise self.fail("a negated class with \\W or \\P{...} beside other items "
                                "is not supported")
            return _Set(complements[0])
        atoms = ([f"[{own}]"] if own else []) + [f"[^{x}]" for x in complements]
        return "(?:" + "|".join(atoms) + ")"

    def class_char(self) -> str | None:
        """One character of a class at ``self.i`` in RE2 spelling; None for a set escape."""
        p = self.p
        c = p[self.i]
        if c == "\\":
            start = self.i
            found = self.escape()
            if isinstance(found, _Set):
                self.i = start
                return None
            if found[1:] in _ASSERTIONS:
                raise self.fail(f"{found} is not allowed in a character class")
            return found
        self.i += 1
        return "\\" + c if c in "\\]-^[" else c

    def group(self) -> tuple[str, bool]:
        """The opening of the group at ``self.i``: RE2 text and whether it opens a group
        (False for a flags-only ``(?flags)``)."""
        p = self.p
        if not p.startswith("(?", self.i):
            self.i += 1
            return "(", True
        rest = p[self.i + 2:self.i + 4]
        if rest[:1] in ("=", "!") or rest in ("<=", "<!"):
            raise self.fail("look-around is not supported")
        if rest[:1] == ">":
            raise self.fail("atomic groups are not supported")
        if rest[:1] in ("<", "P", ":"):
            self.i += 2
            return "(?", True
        end = self.i + 2
        while end < len(p) and p[end] in "imsUxuR-":
            end += 1
        if end >= len(p) or p[end] not in "):" or end == self.i + 2:
            raise self.fail("invalid group or flags")
        on, _, off = p[self.i + 2:end].partition("-")
        if "R" in on + off:
            raise self.fail("CRLF mode (?R) is not supported")
        if "u" in off:
            raise self.fail("disabling Unicode (?-u) is not supported")
        if "x" in on:
            self.verbose = True
        if "x" in off:
            self.verbose = False
        on, off = on.replace("x", "").replace("u", ""), off.replace("x", "")
        flags = on + ("-" + off if off else "")
        opens = p[end] == ":"
        self.i = end + 1
        if opens:
            return f"(?{flags}:" if flags else "(?:", True
        return (f"(?{flags})" if flags else ""), False

    def run(self) -> str:
        p = self.p
        out: list[str] = []
        stack: list[bool] = []  # the verbose flag in force where each open group began
        while True:
            self.skip_verbose()
            if self.i >= len(p):
                break
            c = p[self.i]
            if c == "\\":
                found = self.escape()
                if self.lines and found in _LINE_ANCHORS:
                    found = _LINE_ANCHORS[found]
                out.append(found.atom() if isinstance(found, _Set) else found)
            elif self.lines and c in _LINE_ANCHORS:
                out.append(_LINE_ANCHORS[c])
                self.i += 1
            elif c == "[":
                found = self.char_class()
                out.append(found.atom() if isinstance(found, _Set) else found)
            elif c == "(":
                outer = self.verbose
                text, opens = self.group()
                if opens:
                    stack.append(outer)
                out.append(text)
            elif c == ")":
                if stack:
                    self.verbose = stack.pop()
                out.append(")")
                self.i += 1
            else:
                out.append(c)
                self.i += 1
        return "".join(out)


def translate(pattern: str, *, lines: bool = False) -> str:
    """The RE2 spelling of a Rust-dialect regex; ``ValueError`` for what the translation
    rejects (see the module docstring). RE2 itself checks the rest when compiling.

    ``lines=True`` makes the text anchors (``^ $ \\A \\z``) line anchors: the result
    matches a text wherever the pattern matches one of its ``\\n``-separated lines (and
    maybe elsewhere), which lets one search rule out every line at once.
    """
    return _Translator(pattern, lines).run()


def encode(text: str) -> bytes:
    """``text`` as the UTF-8 RE2 searches. A lone surrogate (which UTF-8 cannot hold) is
    kept as its three bytes instead of raising."""
    return text.encode("utf-8", "surrogatepass")


@dataclass(frozen=True, slots=True)
class Pattern:
    """A regex as written (Rust dialect) and compiled by RE2."""

    source: str
    compiled: Any = field(compare=False, repr=False)
    in_lines: Any = field(default=None, compare=False, repr=False)
    """The ``lines=True`` translation compiled (see :func:`translate`), when asked for."""

    @property
    def size(self) -> int:
        """The compiled program's size in instructions: a search costs at worst about
        this many steps per byte of text (when RE2 has to leave its DFA)."""
        return int(self.compiled.programsize)

    def search(self, text: str) -> bool:
        """Whether the pattern matches anywhere in ``text``; linear in its length."""
        return self.compiled.search(encode(text)) is not None

    def search_utf8(self, data: bytes) -> bool:
        """:meth:`search` on text already :func:`encode`\\ d (to encode a text once for
        many patterns)."""
        return self.compiled.search(data) is not None

    def search_lines(self, data: bytes, lines: Sequence[bytes]) -> bool:
        """Whether the pattern matches one of ``lines``, the lines of ``data`` (Rust's
        ``str::lines``: split on ``\\n``, one trailing ``\\r`` dropped), all encoded.

        With :attr:`in_lines` and no ``\\r`` in ``data``, one search of ``data`` first
        rules out every line at once; the lines are searched one by one only after it.
        """
        if self.in_lines is not None and b"\r" not in data \
                and self.in_lines.search(data) is None:
            return False
        search = self.compiled.search
        return any(search(line) is not None for line in lines)


def compile_pattern(source: str, *, lines: bool = False) -> Pattern:
    """Translate and compile a Rust-dialect regex; ``ValueError`` says why one is refused.

    ``lines=True`` also compiles the line-anchored form :meth:`Pattern.search_lines` uses.
    """
    try:
        source.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError("the pattern holds a lone surrogate") from None
    try:
        compiled = re2.compile(translate(source), _OPTIONS)
        in_lines = re2.compile(translate(source, lines=True), _OPTIONS) if lines else None
    except re2.error as exc:
        raise ValueError(_re2_error(exc)) from None
    return Pattern(source, compiled, in_lines)
