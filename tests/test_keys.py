from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cmux_core.errors import InvalidKey
from cmux_core.terminal.emulator import TerminalModes
from cmux_core.terminal.keys import (
    FunctionKey,
    KeyEvent,
    KeyModes,
    NamedKey,
    encode_key,
    encode_keys,
    parse_key,
)

LEGACY = KeyModes()
APP_CURSOR = KeyModes(app_cursor=True)
KITTY = KeyModes(kitty_flags=1)


def enc(key: str, modes: KeyModes = LEGACY) -> bytes:
    return encode_key(parse_key(key), modes)


# --- grammar ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("a", KeyEvent("a")),
        ("A", KeyEvent("a", shift=True)),
        ("shift+a", KeyEvent("a", shift=True)),
        ("shift+A", KeyEvent("a", shift=True)),
        ("ctrl+c", KeyEvent("c", ctrl=True)),
        ("Ctrl+C", KeyEvent("c", ctrl=True, shift=True)),
        ("control+x", KeyEvent("x", ctrl=True)),
        ("C-c", KeyEvent("c", ctrl=True)),
        ("c-c", KeyEvent("c", ctrl=True)),
        ("  C-c  ", KeyEvent("c", ctrl=True)),
        ("+", KeyEvent("+")),
        (" + ", KeyEvent("+")),
        ("plus", KeyEvent("+")),
        ("ctrl+plus", KeyEvent("+", ctrl=True)),
        ("alt+x", KeyEvent("x", alt=True)),
        ("option+x", KeyEvent("x", alt=True)),
        ("meta+x", KeyEvent("x", alt=True)),
        ("cmd+x", KeyEvent("x", super=True)),
        ("command+x", KeyEvent("x", super=True)),
        ("super+x", KeyEvent("x", super=True)),
        ("hyper+x", KeyEvent("x", hyper=True)),
        ("ctrl+ctrl+x", KeyEvent("x", ctrl=True)),
        ("x+ctrl", KeyEvent("x", ctrl=True)),
        (" ctrl + shift + x ", KeyEvent("x", ctrl=True, shift=True)),
        ("CTRL+ALT+SHIFT+SUPER+HYPER+x", KeyEvent("x", True, True, True, True, True)),
        ("space", KeyEvent(" ")),
        (" ", KeyEvent(" ")),
        ("SPACE", KeyEvent(" ")),
        ("enter", KeyEvent(NamedKey.ENTER)),
        ("Return", KeyEvent(NamedKey.ENTER)),
        ("esc", KeyEvent(NamedKey.ESC)),
        ("ESCAPE", KeyEvent(NamedKey.ESC)),
        ("tab", KeyEvent(NamedKey.TAB)),
        ("shift+tab", KeyEvent(NamedKey.BACKTAB)),
        ("tab+shift+alt", KeyEvent(NamedKey.BACKTAB, alt=True)),
        ("backspace", KeyEvent(NamedKey.BACKSPACE)),
        ("bs", KeyEvent(NamedKey.BACKSPACE)),
        ("up", KeyEvent(NamedKey.UP)),
        ("Down", KeyEvent(NamedKey.DOWN)),
        ("left", KeyEvent(NamedKey.LEFT)),
        ("right", KeyEvent(NamedKey.RIGHT)),
        ("f1", KeyEvent(FunctionKey(1))),
        ("F12", KeyEvent(FunctionKey(12))),
        ("f0", KeyEvent(FunctionKey(0))),
        ("f255", KeyEvent(FunctionKey(255))),
        ("f", KeyEvent("f")),
        ("é", KeyEvent("é")),
        ("É", KeyEvent("É")),
        ("ü", KeyEvent("ü")),
        ("-", KeyEvent("-")),
        ("ctrl+-", KeyEvent("-", ctrl=True)),
    ],
)
def test_parse(text: str, expected: KeyEvent) -> None:
    assert parse_key(text) == expected


@pytest.mark.parametrize(
    ("name", "char"),
    [
        ("minus", "-"),
        ("comma", ","),
        ("period", "."),
        ("slash", "/"),
        ("backslash", "\\"),
        ("quote", "'"),
        ("double_quote", '"'),
        ("double-quote", '"'),
        ("semicolon", ";"),
        ("colon", ":"),
        ("percent", "%"),
        ("ampersand", "&"),
        ("backtick", "`"),
        ("plus", "+"),
    ],
)
def test_named_punctuation(name: str, char: str) -> None:
    assert parse_key(name) == KeyEvent(char)
    assert parse_key(name.upper()) == KeyEvent(char)
    assert enc(name) == char.encode()


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ("home", NamedKey.HOME),
        ("end", NamedKey.END),
        ("pageup", NamedKey.PAGE_UP),
        ("page_up", NamedKey.PAGE_UP),
        ("PgUp", NamedKey.PAGE_UP),
        ("pagedown", NamedKey.PAGE_DOWN),
        ("page_down", NamedKey.PAGE_DOWN),
        ("pgdn", NamedKey.PAGE_DOWN),
        ("delete", NamedKey.DELETE),
        ("del", NamedKey.DELETE),
        ("insert", NamedKey.INSERT),
        ("ins", NamedKey.INSERT),
    ],
)
def test_navigation_keys(text: str, key: NamedKey) -> None:
    assert parse_key(text) == KeyEvent(key)
    assert parse_key("ctrl+" + text) == KeyEvent(key, ctrl=True)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "   ",
        "ctrl",
        "shift+alt",
        "ctrl+",
        "+ctrl",
        "ctrl++",
        "ctrl+ +a",
        "a+b",
        "ctrl+a+b",
        "prefix+x",
        "f256",
        "f1000",
        "f-1",
        "fx",
        "C-x",
        "C-C",
        "ab",
        "enterr",
        "ctrl-",
        "ctrl-1",
        "e\u0301",  # two code points: not a single character
    ],
)
def test_invalid_keys_raise_with_original_string(text: str) -> None:
    with pytest.raises(InvalidKey) as info:
        parse_key(text)
    assert info.value.code == "invalid_key"
    assert info.value.data == {"key": text}
    assert info.value.message == f"unsupported key {text}"


# --- cmux surface.send_key names ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "byte"),
    [
        ("ctrl-c", b"\x03"),
        ("CTRL-C", b"\x03"),
        ("ctrl+c", b"\x03"),
        ("sigint", b"\x03"),
        ("SIGINT", b"\x03"),
        ("ctrl-d", b"\x04"),
        ("eof", b"\x04"),
        ("ctrl-z", b"\x1a"),
        ("sigtstp", b"\x1a"),
        ("ctrl-\\", b"\x1c"),
        ("sigquit", b"\x1c"),
        ("ctrl-u", b"\x15"),
        ("kill-line", b"\x15"),
        ("ctrl-f", b"\x06"),
        ("ctrl-a", b"\x01"),
        ("enter", b"\r"),
        ("return", b"\r"),
        ("tab", b"\t"),
        ("escape", b"\x1b"),
        ("esc", b"\x1b"),
        ("backspace", b"\x7f"),
        ("delete", b"\x1b[3~"),
        ("space", b" "),
        ("up", b"\x1b[A"),
        ("down", b"\x1b[B"),
        ("right", b"\x1b[C"),
        ("left", b"\x1b[D"),
    ],
)
def test_cmux_send_key_names(name: str, byte: bytes) -> None:
    assert enc(name) == byte


def test_every_ctrl_dash_letter() -> None:
    for i, letter in enumerate("abcdefghijklmnopqrstuvwxyz", start=1):
        assert enc(f"ctrl-{letter}") == bytes([i])


# --- legacy encoding ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("a", b"a"),
        ("A", b"A"),
        ("shift+a", b"A"),
        ("shift+1", b"1"),
        ("shift+!", b"!"),
        ("shift+ü", "Ü".encode()),
        ("é", "é".encode()),
        ("€", "€".encode()),
        ("space", b" "),
        ("enter", b"\r"),
        ("tab", b"\t"),
        ("shift+tab", b"\x1b[Z"),
        ("backspace", b"\x7f"),
        ("esc", b"\x1b"),
        ("ctrl+a", b"\x01"),
        ("ctrl+z", b"\x1a"),
        ("ctrl+A", b"\x01"),
        ("ctrl+shift+a", b"\x01"),
        ("alt+x", b"\x1bx"),
        ("alt+X", b"\x1bX"),
        ("alt+ctrl+c", b"\x1b\x03"),
        ("alt+enter", b"\x1b\r"),
        ("alt+backspace", b"\x1b\x7f"),
        ("alt+esc", b"\x1b\x1b"),
        ("alt+shift+tab", b"\x1b\x1b[Z"),
        ("alt+plus", b"\x1b+"),
        ("super+a", b"a"),
        ("ctrl+1", b"1"),
        ("ctrl+é", "é".encode()),
    ],
)
def test_legacy_encoding(text: str, expected: bytes) -> None:
    assert enc(text) == expected


@pytest.mark.parametrize(
    ("char", "byte"),
    [
        ("space", 0x00),
        ("@", 0x00),
        ("2", 0x00),
        ("[", 0x1B),
        ("3", 0x1B),
        ("backslash", 0x1C),
        ("4", 0x1C),
        ("]", 0x1D),
        ("5", 0x1D),
        ("^", 0x1E),
        ("6", 0x1E),
        ("_", 0x1F),
        ("slash", 0x1F),
        ("7", 0x1F),
        ("minus", 0x1F),
    ],
)
def test_ctrl_punctuation(char: str, byte: int) -> None:
    assert enc("ctrl+" + char) == bytes([byte])


@pytest.mark.parametrize(
    ("name", "final"), [("up", "A"), ("down", "B"), ("right", "C"), ("left", "D")]
)
def test_arrows(name: str, final: str) -> None:
    assert enc(name) == f"\x1b[{final}".encode()
    assert enc(name, APP_CURSOR) == f"\x1bO{final}".encode()
    # modified arrows use the CSI form whatever the cursor mode
    assert enc("shift+" + name) == f"\x1b[1;2{final}".encode()
    assert enc("alt+" + name, APP_CURSOR) == f"\x1b[1;3{final}".encode()
    assert enc("ctrl+" + name) == f"\x1b[1;5{final}".encode()
    assert enc("ctrl+shift+alt+" + name) == f"\x1b[1;8{final}".encode()


@pytest.mark.parametrize(
    ("mods", "param"),
    [
        ("", 1),
        ("shift+", 2),
        ("alt+", 3),
        ("alt+shift+", 4),
        ("ctrl+", 5),
        ("ctrl+shift+", 6),
        ("ctrl+alt+", 7),
        ("ctrl+alt+shift+", 8),
        ("super+", 9),
        ("hyper+", 17),
        ("hyper+super+ctrl+alt+shift+", 32),
    ],
)
def test_modifier_arithmetic(mods: str, param: int) -> None:
    assert parse_key(mods + "up").modifier_param == param
    expected = b"\x1b[A" if param == 1 else f"\x1b[1;{param}A".encode()
    assert enc(mods + "up") == expected


def test_home_end() -> None:
    assert enc("home") == b"\x1b[H"
    assert enc("end") == b"\x1b[F"
    assert enc("home", APP_CURSOR) == b"\x1bOH"
    assert enc("end", APP_CURSOR) == b"\x1bOF"
    assert enc("shift+home") == b"\x1b[1;2H"
    assert enc("ctrl+end", APP_CURSOR) == b"\x1b[1;5F"


@pytest.mark.parametrize(
    ("name", "number"), [("insert", 2), ("delete", 3), ("pageup", 5), ("pagedown", 6)]
)
def test_tilde_keys(name: str, number: int) -> None:
    assert enc(name) == f"\x1b[{number}~".encode()
    assert enc(name, APP_CURSOR) == f"\x1b[{number}~".encode()
    assert enc("ctrl+" + name) == f"\x1b[{number};5~".encode()
    assert enc("shift+alt+" + name) == f"\x1b[{number};4~".encode()


@pytest.mark.parametrize(
    ("n", "plain", "modified"),
    [
        (1, b"\x1bOP", b"\x1b[1;5P"),
        (2, b"\x1bOQ", b"\x1b[1;5Q"),
        (3, b"\x1bOR", b"\x1b[1;5R"),
        (4, b"\x1bOS", b"\x1b[1;5S"),
        (5, b"\x1b[15~", b"\x1b[15;5~"),
        (6, b"\x1b[17~", b"\x1b[17;5~"),
        (7, b"\x1b[18~", b"\x1b[18;5~"),
        (8, b"\x1b[19~", b"\x1b[19;5~"),
        (9, b"\x1b[20~", b"\x1b[20;5~"),
        (10, b"\x1b[21~", b"\x1b[21;5~"),
        (11, b"\x1b[23~", b"\x1b[23;5~"),
        (12, b"\x1b[24~", b"\x1b[24;5~"),
    ],
)
def test_function_keys(n: int, plain: bytes, modified: bytes) -> None:
    assert enc(f"f{n}") == plain
    assert enc(f"ctrl+f{n}") == modified


@pytest.mark.parametrize("text", ["f0", "f13", "f24", "f255", "ctrl+f13"])
def test_function_keys_without_bytes(text: str) -> None:
    assert enc(text) == b""
    assert enc(text, KITTY) == b""


def test_app_keypad_changes_no_nameable_key() -> None:
    keypad = KeyModes(app_keypad=True)
    for text in ["up", "home", "delete", "enter", "5", "plus", "minus", "f1"]:
        assert enc(text, keypad) == enc(text)


# --- kitty keyboard protocol -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("a", b"a"),
        ("A", b"A"),
        ("shift+1", b"1"),
        ("é", "é".encode()),
        ("space", b" "),
        ("enter", b"\r"),
        ("tab", b"\t"),
        ("backspace", b"\x7f"),
        ("esc", b"\x1b[27u"),
        ("shift+esc", b"\x1b[27;2u"),
        ("ctrl+c", b"\x1b[99;5u"),
        ("ctrl+shift+a", b"\x1b[97;6u"),
        ("alt+x", b"\x1b[120;3u"),
        ("ctrl+alt+x", b"\x1b[120;7u"),
        ("super+x", b"\x1b[120;9u"),
        ("hyper+x", b"\x1b[120;17u"),
        ("ctrl+space", b"\x1b[32;5u"),
        ("ctrl+é", b"\x1b[233;5u"),
        ("shift+enter", b"\x1b[13;2u"),
        ("ctrl+enter", b"\x1b[13;5u"),
        ("alt+enter", b"\x1b[13;3u"),
        ("shift+tab", b"\x1b[9;2u"),
        ("ctrl+shift+tab", b"\x1b[9;6u"),
        ("ctrl+tab", b"\x1b[9;5u"),
        ("alt+backspace", b"\x1b[127;3u"),
        ("sigint", b"\x1b[99;5u"),
        ("up", b"\x1b[A"),
        ("ctrl+up", b"\x1b[1;5A"),
        ("super+up", b"\x1b[1;9A"),
        ("pageup", b"\x1b[5~"),
        ("f1", b"\x1bOP"),
        ("ctrl+f5", b"\x1b[15;5~"),
    ],
)
def test_kitty_encoding(text: str, expected: bytes) -> None:
    assert enc(text, KITTY) == expected


def test_kitty_keeps_application_cursor_for_plain_arrows() -> None:
    modes = KeyModes(app_cursor=True, kitty_flags=0b11111)
    assert enc("up", modes) == b"\x1bOA"
    assert enc("ctrl+up", modes) == b"\x1b[1;5A"


# --- encode_keys and mode sources --------------------------------------------------------------


def test_encode_keys_in_order() -> None:
    assert encode_keys(["up", "enter"], LEGACY) == [b"\x1b[A", b"\r"]
    assert encode_keys(["C-c", "+", "f13"], LEGACY) == [b"\x03", b"+", b""]
    assert encode_keys([], LEGACY) == []


def test_encode_keys_rejects_whole_batch_on_first_invalid() -> None:
    with pytest.raises(InvalidKey) as info:
        encode_keys(["a", "home", "bogus", "ctrl+", "b"], LEGACY)
    assert info.value.data == {"key": "bogus"}


def test_screen_terminal_modes_drive_encoding() -> None:
    modes = TerminalModes(app_cursor=True)
    assert encode_key(parse_key("left"), modes) == b"\x1bOD"
    modes.kitty_flags = 1
    assert encode_key(parse_key("ctrl+c"), modes) == b"\x1b[99;5u"


@settings(max_examples=200)
@given(st.characters(blacklist_categories=("Cs", "Zs", "Cc", "Zl", "Zp")))
def test_any_single_character_is_a_key(ch: str) -> None:
    event = parse_key(ch)
    if "A" <= ch <= "Z":
        assert event == KeyEvent(ch.lower(), shift=True)
        assert encode_key(event, LEGACY) == ch.encode()
    elif ch == "+":
        assert event == KeyEvent("+")
    else:
        assert event == KeyEvent(ch)
        assert encode_key(event, LEGACY) == ch.encode()
        assert encode_key(event, KITTY) == ch.encode()
