# ruff: noqa: RUF001, RUF002  (screens are made of look-alike glyphs)
"""Screen shapes every agent draws the same way, whatever its words: the shared rule
library that manifest rules reference with ``shape = [...]``.

A *choice dialog* is a selection cursor (``❯ › > ▸ ▶ ➜ →``, or a radio mark ``●``) in
front of one of several option lines, with a key hint near it that confirms or cancels
(``Enter to confirm · Esc to cancel``, ``esc to go back``, ``↵ select``, in any order) or
a question right above the options (a line ending in ``?`` or ``:``). Options may be
numbered or not, drawn inside a box or not, and say anything.

An *input dialog* is a field inside a box (or between two horizontal rules) with a hint
below it that both submits and cancels (``Enter to submit · Esc to cancel``), or a field
under its label (a box, or an unboxed line starting with a prompt mark, ``> ``) with a hint
line right below that only goes back (``Paste code here if prompted`` / field / ``Esc to go
back``): a key or code entry of a sign-in flow, as opposed to an agent's own prompt box,
whose hints neither submit nor cancel.

A *notice* waits for one key before anything goes on: ``Press Enter to continue``, a
yes/no question on the last line (``Run it? (Y)es/(N)o [Yes]:``), or a status line saying
a running command awaits input (``! Shell awaiting input``), whatever the title says.

:func:`find_dialog` returns where a dialog is and its first line (its heading), which
``agent.prompt`` names when it refuses to type into one.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

SHAPES = ("choice_dialog", "input_dialog", "notice")
"""The shape names a manifest's ``shape`` matcher may use."""

CURSORS = "❯›>▸▶➜→●"
_BORDER = "│┃║|"
_CURSOR_LINE = re.compile(
    rf"^(?P<lead>[\s{_BORDER}]*)[{CURSORS}]\s+(?:[✔✓☑●◉]\s*)?(?P<label>\S.*)$")
_OPTION = re.compile(rf"^(?P<lead>[\s{_BORDER}]*)(?P<label>\S.*)$")
_NUMBERED = re.compile(r"^\(?\d{1,2}[.):]\s")
_CONFIRM = re.compile(r"(?i)(?:\benter\b|\breturn\b|[↵⏎]).{0,24}?"
                      r"\b(?:confirm|select|submit|continue|choose|pick|save|accept|send|apply)"
                      r"|\b(?:confirm|select|submit|choose)\b.{0,4}(?:\benter\b|[↵⏎])")
_CANCEL = re.compile(r"(?i)\b(?:esc|escape)\b.{0,24}?\b(?:cancel|back|exit|close|dismiss|"
                     r"skip|reject|deny|quit)|\bcancel|\bgo back\b")
_PARTS = re.compile(r"\s+[·•|—–]\s+")
"""What separates the parts of a status line (``Usage limit has reset · Press enter to
continue``)."""
_BACK_HINT = re.compile(r"(?i)^(?:press\s+)?(?:esc|escape)\s+to\s+(?:cancel|go\s+back|back)\W*$")
"""A hint line that only cancels or goes back (``Esc to go back``)."""
_FIELD_LINE = re.compile(rf"^\s*[{CURSORS.replace('●', '')}](?:\s.*)?$")
"""An unboxed entry field: a prompt mark alone or before what was typed (``> ``,
``> sk-…``)."""
_NOTICE = re.compile(r"(?i)^\W*(?:(?:press|hit)\s+)?(?:the\s+)?(?:enter|return|any key|[↵⏎])"
                     r"(?:\s+key)?\s+to\s+(?:continue|proceed|dismiss|acknowledge|go on)\b")
"""A line waiting for one key: ``Press Enter to continue``, ``Enter to continue``,
``↵ to dismiss``, ``Hit the return key to proceed``."""
_AWAITING = re.compile(r"(?i)^\W{0,3}(?:the\s+)?(?:shell|command|process|program|terminal|tool)"
                       r"\s+(?:is\s+)?(?:awaiting|waiting\s+for|needs)\s+(?:your\s+|user\s+)?"
                       r"input\b")
"""A status line saying a running command reads from the terminal: nothing goes on until
a person types into it, whatever the title says."""
_YES_NO = re.compile(r"(?i)\?\s*[\[(]?\s*\(?y\)?(?:es)?\s*[/,|]\s*\(?n\)?(?:o)?\b.*[:?\])]$")
"""A question whose last words offer yes and no, waiting on the last line."""
_STATUS = re.compile(r"(?i)\(\d+m?s\b|\binterrupt\b")
"""A working status line ("(4s · esc to cancel)"): its Esc stops a turn, it cancels no
dialog, unless the line also confirms ("enter to submit answer | esc to interrupt")."""
_MARKER = re.compile(r"^[✦●⏺✻✳✶✢⎿•◆■✓✗⚠\u2800-\u28ff]")
"""What starts a message or status line of a transcript rather than an option."""
_BOX_EDGE = re.compile(rf"^[\s{_BORDER}]*[╭┌╔+┏╰└╚┗][^{_BORDER}]{{0,40}}?[─━═\-╌┄]{{3,}}"
                       r"|^\s*[─━═╌┄]{8,}")
"""A box's top or bottom edge, also one drawn inside another box, or a horizontal rule."""
_ASKS = re.compile(r"(?i)(?:[?:]|\bto continue\.?)$")
_QUESTION = re.compile(r"^(?!.*://\S*$).*\w\)?\?$")
"""A line that asks: it ends in ``?`` after a word, and is not a link."""
_QUESTION_LINK = re.compile(r"://\S*$")
QUESTION_REACH = 10
"""Lines above a dialog's options searched for its question."""
WINDOW = 14
"""Lines a dialog's parts may lie apart: the cursor, its sibling options, the hint."""
HEADING_REACH = 24
"""Lines above a dialog's options searched for the border it is drawn under."""


@dataclass(frozen=True, slots=True)
class Dialog:
    """A dialog found on a screen: its shape, the index of its anchor line (the cursor
    line, the field, or the notice) and its first line."""

    shape: str
    line: int
    heading: str


def _strip(line: str) -> str:
    return line.strip().strip(_BORDER).strip()


def _hint_near(lines: list[str], start: int, *, both: bool) -> bool:
    """A confirm or cancel hint (``both``: a hint line that does both) within
    :data:`WINDOW` lines below ``start``, or a few above it, not on ``start`` itself."""
    for i in range(max(0, start - 3), min(len(lines), start + WINDOW)):
        line = lines[i]
        if i == start:
            continue
        confirm, cancel = bool(_CONFIRM.search(line)), bool(_CANCEL.search(line))
        if _STATUS.search(line) and not confirm:
            continue
        if (confirm and cancel) if both else (confirm or cancel):
            return True
    return False


def _siblings(lines: list[str], at: int, column: int, numbered: bool) -> int:
    """Option lines next to the cursor line ``at``: lines of the same block whose label
    starts near ``column``, where the cursor line's does (or that are numbered, as it is)."""
    count = 0
    for step in (-1, 1):
        i = at + step
        gaps = 0
        while 0 <= i < len(lines) and abs(i - at) <= WINDOW:
            line = lines[i]
            if not _strip(line):
                gaps += 1
                if gaps > 1:
                    break
                i += step
                continue
            gaps = 0
            found = _OPTION.match(line)
            if found is None or _CURSOR_LINE.match(line) or _MARKER.match(found.group("label")):
                break
            label = found.group("label")
            indent = len(found.group("lead"))
            option = (_NUMBERED.match(label) is not None if numbered
                      else abs(indent - column) <= 2 and not _CONFIRM.search(line)
                      and not _CANCEL.search(line))
            if option:
                count += 1
            elif indent < column - 2:
                break
            i += step
    return count


def _asked_above(lines: list[str], at: int, column: int) -> bool:
    """The options around the cursor line ``at`` sit under a question: a line ending in
    ``?`` among the few above their block (within the same box), or one ending in ``:``
    or "to continue." right above it (one blank line between allowed)."""
    top = at
    while top > 0 and _strip(lines[top - 1]) and (
            len(lines[top - 1]) - len(lines[top - 1].lstrip(" " + _BORDER)) >= column - 1):
        top -= 1
    above = top - 1
    if above >= 0 and not _strip(lines[above]):
        above -= 1
    if above >= 0 and _ASKS.search(_strip(lines[above])) \
            and not _QUESTION_LINK.search(lines[above]):
        return True
    for i in range(above, max(-1, above - QUESTION_REACH), -1):
        if _BOX_EDGE.match(lines[i]):
            return False
        if _QUESTION.search(_strip(lines[i])):
            return True
    return False


def _heading(lines: list[str], top: int) -> str:
    """The first line of the dialog whose options start at ``top``: the first non-blank
    line under the nearest border above it, else the nearest paragraph's first line."""
    for i in range(top - 1, max(-1, top - HEADING_REACH), -1):
        if _BOX_EDGE.match(lines[i]):
            for line in lines[i + 1:top + 1]:
                if _strip(line) and not _BOX_EDGE.match(line):
                    return _strip(line)
            break
    i = top - 1
    while i >= 0 and not _strip(lines[i]):
        i -= 1
    while i > 0 and _strip(lines[i - 1]) and not _BOX_EDGE.match(lines[i - 1]):
        i -= 1
    return _strip(lines[i]) if i >= 0 else _strip(lines[top])


def choice_dialog(lines: list[str]) -> Dialog | None:
    """The lowest choice dialog of ``lines`` (see the module docstring), or None."""
    for at in range(len(lines) - 1, -1, -1):
        found = _CURSOR_LINE.match(lines[at])
        if found is None:
            continue
        numbered = bool(_NUMBERED.match(found.group("label")))
        if _siblings(lines, at, found.start("label"), numbered) < 1:
            continue
        if not _hint_near(lines, at, both=False) \
                and not _asked_above(lines, at, found.start("label")):
            continue
        return Dialog("choice_dialog", at, _heading(lines, at))
    return None


def input_dialog(lines: list[str]) -> Dialog | None:
    """The lowest input dialog of ``lines``: a boxed field above hints that submit and
    cancel (on one line or on lines next to each other)."""
    for at in range(len(lines) - 1, -1, -1):
        if not _CONFIRM.search(lines[at]):
            continue
        near = lines[max(0, at - 2):at + 3]
        if not any(_CANCEL.search(line) for line in near):
            continue
        first = next(i for i in range(max(0, at - 2), at + 1)
                     if _CONFIRM.search(lines[i]) or _CANCEL.search(lines[i]))
        edges = [i for i in range(max(0, first - 10), first) if _BOX_EDGE.match(lines[i])]
        if len(edges) >= 2:
            return Dialog("input_dialog", edges[0], _heading(lines, edges[0] + 1))
    return _labelled_field(lines)


def _labelled_field(lines: list[str]) -> Dialog | None:
    """A field under its label with a hint line right below that only goes back
    (``Paste code here if prompted`` / field / ``Esc to go back``); the label is its heading.
    The field is a box, or one unboxed line that starts with a prompt mark (``> ``)."""
    for at in range(len(lines) - 1, 1, -1):
        if not _BACK_HINT.match(_strip(lines[at])):
            continue
        bottom = next((i for i in range(at - 1, max(-1, at - 3), -1) if _strip(lines[i])), None)
        if bottom is None:
            continue
        if _BOX_EDGE.match(lines[bottom]):
            top = next((i for i in range(bottom - 1, max(-1, bottom - 6), -1)
                        if _BOX_EDGE.match(lines[i])), None)
        else:
            top = bottom if _FIELD_LINE.match(lines[bottom]) else None
        if top is None or top == 0:
            continue
        label = _strip(lines[top - 1])
        if label and not _BOX_EDGE.match(lines[top - 1]) and not _MARKER.match(label) \
                and not _FIELD_LINE.match(lines[top - 1]):
            return Dialog("input_dialog", top, label)
    return None


def notice(lines: list[str]) -> Dialog | None:
    """The lowest ``Press Enter to continue`` line of ``lines`` or status line of a command
    awaiting input, or a yes/no question on the last line (``Run it? (Y)es/(N)o [Yes]:``,
    ``Log in? [(y)es, (n)o]:``, ``(y/n)``); None without one."""
    last = next((i for i in range(len(lines) - 1, -1, -1) if _strip(lines[i])), None)
    if last is not None and _YES_NO.search(_strip(lines[last])):
        return Dialog("notice", last, _strip(lines[last]))
    for at in range(len(lines) - 1, -1, -1):
        if any(_NOTICE.match(part) for part in _PARTS.split(_strip(lines[at]))):
            return Dialog("notice", at, _heading(lines, at))
        if _AWAITING.match(_strip(lines[at])):
            return Dialog("notice", at, _strip(lines[at]))
    return None


FINDERS = {"choice_dialog": choice_dialog, "input_dialog": input_dialog, "notice": notice}


def find_dialog(lines: list[str]) -> Dialog | None:
    """The dialog of ``lines`` a person must answer, of any shape (the lowest on screen)."""
    found = [d for finder in FINDERS.values() if (d := finder(lines)) is not None]
    return max(found, key=lambda d: d.line, default=None)
