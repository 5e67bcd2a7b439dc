"""Key combos: the grammar clients write (``ctrl+c``, ``shift+tab``, ``f5``) and the bytes a
program reading the terminal expects for them.

Grammar (:func:`parse_key`). The string is trimmed; then whole-string aliases apply:
``C-c``/``c-c`` → ``ctrl+c``, ``+`` → ``plus``, and the signal names of ``surface.send_key``
(case-insensitive): ``sigint`` (ctrl+c), ``eof`` (ctrl+d), ``sigtstp`` (ctrl+z), ``sigquit``
(ctrl+\\), ``kill-line`` (ctrl+u), ``ctrl-\\`` and ``ctrl-<a..z>``. A string that is exactly one
space is the space key. Anything else is ``part(+part)*``: every part is trimmed and must not be
empty (so a literal ``+`` is written ``plus``). Parts are case-insensitive and are either

* modifiers, repeatable: ``ctrl``/``control``, ``shift``, ``alt``/``option``/``meta``,
  ``cmd``/``command``/``super``, ``hyper``; or
* exactly one key: ``space``; ``enter``/``return``; ``esc``/``escape``; ``tab`` (with Shift it
  becomes BackTab and Shift is dropped); ``backspace``/``bs``; ``up`` ``down`` ``left``
  ``right``; ``home``; ``end``; ``pageup``/``page_up``/``pgup``; ``pagedown``/``page_down``/
  ``pgdn``; ``delete``/``del``; ``insert``/``ins``; named punctuation ``minus`` ``comma``
  ``period`` ``slash`` ``backslash`` ``quote`` ``double_quote``/``double-quote`` ``semicolon``
  ``colon`` ``percent`` ``ampersand`` ``backtick`` ``plus``; ``f0``..``f255``; or any single
  character (an ASCII capital adds Shift and is lowered: ``A`` is shift+a).

Anything else raises :class:`~cmux_core.errors.InvalidKey` carrying the original string.

Encoding (:func:`encode_key`) follows what xterm-compatible terminals send, adjusted by the
modes the program switched on: application cursor keys (DECCKM) and the kitty keyboard
protocol. Only F1..F12 have bytes; other function keys encode to ``b""``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from enum import Enum
from typing import Protocol, TypeAlias

from cmux_core.errors import InvalidKey

ESC = "\x1b"


class NamedKey(Enum):
    """A key that is not a character."""

    ENTER = "enter"
    TAB = "tab"
    BACKTAB = "backtab"
    BACKSPACE = "backspace"
    ESC = "esc"
    UP = "up"
    DOWN = "down"
    LEFT = "left"
    RIGHT = "right"
    HOME = "home"
    END = "end"
    PAGE_UP = "pageup"
    PAGE_DOWN = "pagedown"
    DELETE = "delete"
    INSERT = "insert"


@dataclass(frozen=True)
class FunctionKey:
    """Function key F<number>, 0..255."""

    number: int


Key: TypeAlias = str | NamedKey | FunctionKey
"""A ``str`` key is always exactly one character."""


@dataclass(frozen=True)
class KeyEvent:
    """One key press: the key and the modifiers held with it."""

    key: Key
    shift: bool = False
    alt: bool = False
    ctrl: bool = False
    super: bool = False
    hyper: bool = False

    @property
    def modifier_param(self) -> int:
        """The xterm/kitty modifier parameter: 1 + shift·1 + alt·2 + ctrl·4 + super·8 + hyper·16."""
        return (
            1
            + self.shift
            + 2 * self.alt
            + 4 * self.ctrl
            + 8 * self.super
            + 16 * self.hyper
        )


@dataclass
class KeyModes:
    """Input modes of the program receiving keys.

    ``kitty_flags`` is the kitty keyboard protocol flag set the program pushed (0: not in use).
    ``app_keypad`` is carried for completeness: no nameable key is on the numeric keypad.
    """

    app_cursor: bool = False
    app_keypad: bool = False
    kitty_flags: int = 0


class SupportsKeyModes(Protocol):
    """Anything exposing the modes encoding depends on (:class:`KeyModes`, the screen's modes)."""

    @property
    def app_cursor(self) -> bool: ...

    @property
    def kitty_flags(self) -> int: ...


_MODIFIERS = {
    "ctrl": "ctrl",
    "control": "ctrl",
    "shift": "shift",
    "alt": "alt",
    "option": "alt",
    "meta": "alt",
    "cmd": "super",
    "command": "super",
    "super": "super",
    "hyper": "hyper",
}

_NAMED_KEYS: dict[str, Key] = {
    "space": " ",
    "enter": NamedKey.ENTER,
    "return": NamedKey.ENTER,
    "esc": NamedKey.ESC,
    "escape": NamedKey.ESC,
    "tab": NamedKey.TAB,
    "backspace": NamedKey.BACKSPACE,
    "bs": NamedKey.BACKSPACE,
    "up": NamedKey.UP,
    "down": NamedKey.DOWN,
    "left": NamedKey.LEFT,
    "right": NamedKey.RIGHT,
    "home": NamedKey.HOME,
    "end": NamedKey.END,
    "pageup": NamedKey.PAGE_UP,
    "page_up": NamedKey.PAGE_UP,
    "pgup": NamedKey.PAGE_UP,
    "pagedown": NamedKey.PAGE_DOWN,
    "page_down": NamedKey.PAGE_DOWN,
    "pgdn": NamedKey.PAGE_DOWN,
    "delete": NamedKey.DELETE,
    "del": NamedKey.DELETE,
    "insert": NamedKey.INSERT,
    "ins": NamedKey.INSERT,
    "minus": "-",
    "comma": ",",
    "period": ".",
    "slash": "/",
    "backslash": "\\",
    "quote": "'",
    "double_quote": '"',
    "double-quote": '"',
    "semicolon": ";",
    "colon": ":",
    "percent": "%",
    "ampersand": "&",
    "backtick": "`",
    "plus": "+",
}

_SIGNAL_NAMES = {
    "sigint": KeyEvent("c", ctrl=True),
    "eof": KeyEvent("d", ctrl=True),
    "sigtstp": KeyEvent("z", ctrl=True),
    "sigquit": KeyEvent("\\", ctrl=True),
    "ctrl-\\": KeyEvent("\\", ctrl=True),
    "kill-line": KeyEvent("u", ctrl=True),
}
_CTRL_DASH = re.compile(r"ctrl-([a-z])")
_FUNCTION_KEY = re.compile(r"f([0-9]{1,3})")


def parse_key(s: str) -> KeyEvent:
    """Parse one key combo (grammar in the module docstring); raises ``InvalidKey(s)``."""
    if s == " ":
        return KeyEvent(" ")
    text = s.strip()
    if text in ("C-c", "c-c"):
        text = "ctrl+c"
    elif text == "+":
        text = "plus"
    lowered = text.lower()
    if lowered in _SIGNAL_NAMES:
        return _SIGNAL_NAMES[lowered]
    if m := _CTRL_DASH.fullmatch(lowered):
        return KeyEvent(m[1], ctrl=True)

    key: Key | None = None
    flags = {"shift": False, "alt": False, "ctrl": False, "super": False, "hyper": False}
    for raw_part in text.split("+"):
        part = raw_part.strip()
        if not part:
            raise InvalidKey(s)
        modifier = _MODIFIERS.get(part.lower())
        if modifier is not None:
            flags[modifier] = True
            continue
        if key is not None:
            raise InvalidKey(s)
        key = _parse_key_part(part, s)
        if isinstance(key, str) and "A" <= key <= "Z":
            key = key.lower()
            flags["shift"] = True
    if key is None:
        raise InvalidKey(s)
    event = KeyEvent(key, **flags)
    if key is NamedKey.TAB and event.shift:
        event = replace(event, key=NamedKey.BACKTAB, shift=False)
    return event


def _parse_key_part(part: str, original: str) -> Key:
    if len(part) == 1:
        return part
    lowered = part.lower()
    named = _NAMED_KEYS.get(lowered)
    if named is not None:
        return named
    m = _FUNCTION_KEY.fullmatch(lowered)
    if m is not None and int(m[1]) <= 255:
        return FunctionKey(int(m[1]))
    raise InvalidKey(original)


# Final byte of the CSI/SS3 form of cursor-like keys, and the number of the "~" keys.
_CURSOR_FINAL = {
    NamedKey.UP: "A",
    NamedKey.DOWN: "B",
    NamedKey.RIGHT: "C",
    NamedKey.LEFT: "D",
    NamedKey.HOME: "H",
    NamedKey.END: "F",
}
_TILDE_NUMBER = {
    NamedKey.INSERT: 2,
    NamedKey.DELETE: 3,
    NamedKey.PAGE_UP: 5,
    NamedKey.PAGE_DOWN: 6,
}
_F1_TO_F4_FINAL = {1: "P", 2: "Q", 3: "R", 4: "S"}
_F5_TO_F12_NUMBER = {5: 15, 6: 17, 7: 18, 8: 19, 9: 20, 10: 21, 11: 23, 12: 24}
_PLAIN_NAMED = {
    NamedKey.ENTER: "\r",
    NamedKey.TAB: "\t",
    NamedKey.BACKTAB: ESC + "[Z",
    NamedKey.BACKSPACE: "\x7f",
    NamedKey.ESC: ESC,
}
# Keys the kitty protocol reports as CSI <codepoint> u once disambiguation is on.
_KITTY_CODEPOINT = {
    NamedKey.ENTER: 13,
    NamedKey.TAB: 9,
    NamedKey.BACKTAB: 9,
    NamedKey.BACKSPACE: 127,
    NamedKey.ESC: 27,
}
_CTRL_PUNCTUATION = {
    " ": 0x00,
    "@": 0x00,
    "2": 0x00,
    "[": 0x1B,
    "3": 0x1B,
    "\\": 0x1C,
    "4": 0x1C,
    "]": 0x1D,
    "5": 0x1D,
    "^": 0x1E,
    "6": 0x1E,
    "_": 0x1F,
    "/": 0x1F,
    "7": 0x1F,
    "-": 0x1F,
}


def encode_key(ev: KeyEvent, modes: SupportsKeyModes) -> bytes:
    """The bytes to write to the terminal for ``ev`` under the program's current ``modes``.

    With kitty flags set, Esc and modified characters, Enter, Tab and Backspace become
    ``CSI <codepoint> [; <mods>] u``; Shift alone on a character still sends its text.
    Keys without a legacy encoding (F0, F13..F255) give ``b""``. Never raises.
    """
    if modes.kitty_flags:
        kitty = _encode_kitty(ev)
        if kitty is not None:
            return kitty.encode()
    return _encode_legacy(ev, modes.app_cursor).encode()


def encode_keys(keys: list[str], modes: SupportsKeyModes) -> list[bytes]:
    """Parse every combo in ``keys``, then encode each in order.

    Raises ``InvalidKey`` for the first combo that does not parse, before anything is
    encoded, so a caller writing the result never sends part of a bad request.
    """
    events = [parse_key(k) for k in keys]
    return [encode_key(ev, modes) for ev in events]


def _encode_kitty(ev: KeyEvent) -> str | None:
    m = ev.modifier_param
    key = ev.key
    if key is NamedKey.BACKTAB:
        m += 1  # BackTab is Tab with the Shift the parser folded into it
    if isinstance(key, NamedKey):
        if key not in _KITTY_CODEPOINT or (m == 1 and key is not NamedKey.ESC):
            return None
        codepoint = _KITTY_CODEPOINT[key]
    elif isinstance(key, str) and (ev.alt or ev.ctrl or ev.super or ev.hyper):
        codepoint = ord(key)
    else:
        return None
    return f"{ESC}[{codepoint}u" if m == 1 else f"{ESC}[{codepoint};{m}u"


def _encode_legacy(ev: KeyEvent, app_cursor: bool) -> str:
    key = ev.key
    m = ev.modifier_param
    if isinstance(key, str):
        return (ESC if ev.alt else "") + _legacy_char(key, ev.shift, ev.ctrl)
    if isinstance(key, FunctionKey):
        return _legacy_function_key(key.number, m)
    if key in _CURSOR_FINAL:
        final = _CURSOR_FINAL[key]
        if m > 1:
            return f"{ESC}[1;{m}{final}"
        return f"{ESC}O{final}" if app_cursor else f"{ESC}[{final}"
    if key in _TILDE_NUMBER:
        n = _TILDE_NUMBER[key]
        return f"{ESC}[{n};{m}~" if m > 1 else f"{ESC}[{n}~"
    return (ESC if ev.alt else "") + _PLAIN_NAMED[key]


def _legacy_char(ch: str, shift: bool, ctrl: bool) -> str:
    if ctrl:
        if "a" <= ch.lower() <= "z" and ch.isascii():
            return chr(ord(ch.lower()) - ord("a") + 1)
        if ch in _CTRL_PUNCTUATION:
            return chr(_CTRL_PUNCTUATION[ch])
    if shift and ch.islower() and len(ch.upper()) == 1:
        return ch.upper()
    return ch


def _legacy_function_key(n: int, m: int) -> str:
    if n in _F1_TO_F4_FINAL:
        final = _F1_TO_F4_FINAL[n]
        return f"{ESC}[1;{m}{final}" if m > 1 else f"{ESC}O{final}"
    if n in _F5_TO_F12_NUMBER:
        number = _F5_TO_F12_NUMBER[n]
        return f"{ESC}[{number};{m}~" if m > 1 else f"{ESC}[{number}~"
    return ""
