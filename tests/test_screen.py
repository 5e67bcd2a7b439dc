"""The emulated screen: read sources, the pyte backend's fixes, replies, modes and OSC capture.

Tests that only use the :class:`Emulator` protocol run against every backend that
imports (``make_emulator`` with ``pyte`` and ``ghostty``); the rest check the
pyte backend's own storage.
"""

from __future__ import annotations

import base64
import importlib
from dataclasses import astuple
from itertools import pairwise
from typing import TypeVar

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pyte.screens import Char

from cmux_core.errors import CmuxError, InvalidParams
from cmux_core.terminal.backends import make_emulator
from cmux_core.terminal.emulator import (
    Emulator,
    ReadFormat,
    Row,
    TerminalSignal,
    read_text,
    strip_title,
)
from cmux_core.terminal.pyte.emulator import PyteEmulator

ESC = "\x1b"
E = TypeVar("E", bound=Emulator)


def _ghostty_available() -> bool:
    try:
        importlib.import_module("cmux_core.terminal.ghostty")
    except (ImportError, OSError):
        return False
    return True


BACKENDS = [
    "pyte",
    pytest.param(
        "ghostty",
        marks=pytest.mark.skipif(not _ghostty_available(), reason="ghostty backend not importable"),
    ),
]


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    name: str = request.param
    return name


def emulator(backend: str, columns: int = 40, lines: int = 6) -> Emulator:
    made = make_emulator(backend, columns, lines)
    assert made.backend == backend
    return made


def fed(em: E, *chunks: str | bytes) -> E:
    for chunk in chunks:
        em.feed(chunk.encode() if isinstance(chunk, str) else chunk)
    return em


def visible(em: Emulator) -> str:
    return read_text(em, "visible", None, "text")[0]


# -- read sources ------------------------------------------------------------------------------


def test_visible_trims_rows_and_blank_tail(backend: str) -> None:
    em = fed(emulator(backend), "one   \r\n\r\ntwo\r\n\r\n")
    assert read_text(em, "visible", None, "text") == ("one\n\ntwo\n", False)


def test_visible_of_empty_screen_is_empty(backend: str) -> None:
    assert read_text(emulator(backend), "visible", None, "text") == ("", False)
    assert read_text(emulator(backend), "visible", 3, "text") == ("", False)


def test_visible_last_n_lines_and_truncated(backend: str) -> None:
    em = fed(emulator(backend), "a\r\nb\r\nc")
    assert read_text(em, "visible", 2, "text") == ("b\nc\n", True)
    assert read_text(em, "visible", 3, "text") == ("a\nb\nc\n", False)
    assert read_text(em, "visible", 10, "text") == ("a\nb\nc\n", False)
    assert read_text(em, "visible", 0, "text") == ("", True)


def test_detection_is_the_screen_in_plain_text(backend: str) -> None:
    em = fed(emulator(backend), f"{ESC}[31mred{ESC}[0m\r\nplain")
    assert read_text(em, "detection", None, "ansi") == ("red\nplain\n", False)
    assert read_text(em, "detection", 1, "text") == ("plain\n", True)


def test_visible_ansi_keeps_styling(backend: str) -> None:
    em = fed(emulator(backend), f"{ESC}[1;31mred{ESC}[0m plain")
    text, truncated = read_text(em, "visible", None, "ansi")
    assert not truncated
    assert "red" in text and "plain" in text
    assert f"{ESC}[" in text
    assert text.endswith("plain\n")


def test_recent_reads_scrollback_and_screen(backend: str) -> None:
    em = fed(emulator(backend, 20, 5), "".join(f"line {i}\r\n" for i in range(100)))
    text, truncated = read_text(em, "recent", None, "text")
    # The last 80 lines of output: the blank cursor row below them is not output.
    assert text == "".join(f"line {i}\n" for i in range(20, 100))
    assert truncated
    assert read_text(em, "recent", 3, "text") == ("line 97\nline 98\nline 99\n", True)
    assert read_text(em, "recent", 0, "text") == ("", True)


def test_recent_skips_the_blank_rows_below_the_last_output(backend: str) -> None:
    em = fed(emulator(backend, 20, 6), "$ prompt")
    assert read_text(em, "recent", 3, "text") == ("$ prompt\n", True)
    assert read_text(em, "recent", 6, "text") == ("$ prompt\n", False)
    assert read_text(em, "recent", None, "text") == ("$ prompt\n", False)


def test_recent_is_not_truncated_when_the_buffer_fits(backend: str) -> None:
    em = fed(emulator(backend, 20, 6), "a\r\nb")
    assert read_text(em, "recent", 6, "text") == ("a\nb\n", False)
    assert read_text(em, "recent", 1000, "text") == ("a\nb\n", False)


def test_lines_are_clamped_to_1000(backend: str) -> None:
    em = fed(emulator(backend, 20, 5), "".join(f"{i}\r\n" for i in range(1500)))
    text, truncated = read_text(em, "recent", 5000, "text")
    assert truncated
    assert text.count("\n") == 1000 and text.startswith("500\n")  # the last 1000 lines


def test_soft_wrap_and_recent_unwrapped(backend: str) -> None:
    em = fed(emulator(backend, 10, 5), "abcdefghijKLMNO\r\nhello worlds\r\nnext")
    assert read_text(em, "recent", None, "text")[0] == "abcdefghij\nKLMNO\nhello worl\nds\nnext\n"
    assert read_text(em, "recent_unwrapped", None, "text") == (
        "abcdefghijKLMNO\nhello worlds\nnext\n",
        False,
    )


def test_recent_unwrapped_keeps_a_space_at_the_wrap_point(backend: str) -> None:
    em = fed(emulator(backend, 6, 4), "hello world\r\n")
    assert read_text(em, "recent_unwrapped", None, "text")[0] == "hello world\n"


def test_recent_unwrapped_joins_across_scrollback(backend: str) -> None:
    long_line = "x" * 25 + "END"
    em = fed(emulator(backend, 10, 3), long_line + "\r\n" + "tail\r\n" * 4)
    text = read_text(em, "recent_unwrapped", None, "text")[0]
    assert text.splitlines()[0] == long_line


def test_recent_unwrapped_ansi_joins_styled_rows(backend: str) -> None:
    em = fed(emulator(backend, 5, 4), f"{ESC}[32mgreen-text{ESC}[0m\r\n")
    text = read_text(em, "recent_unwrapped", None, "ansi")[0]
    assert text.count("\n") == 1
    plain = read_text(em, "recent_unwrapped", None, "text")[0]
    assert plain == "green-text\n"


def plain_texts(rows: list[Row], *, unwrap: bool) -> list[str]:
    """The plain reads' reference: each row's text without trailing spaces, one per
    soft-wrapped run with ``unwrap``."""
    out: list[str] = []
    run: list[str] = []
    for row in rows:
        run.append(row.text)
        if not (unwrap and row.wrapped):
            out.append("".join(run).rstrip(" "))
            run = []
    if run:
        out.append("".join(run).rstrip(" "))
    return out


@settings(max_examples=60, deadline=None)
@given(
    pieces=st.lists(
        st.one_of(
            st.text(alphabet="ab ", max_size=14),
            st.sampled_from(["\r\n", "\u4e2d", f"{ESC}[31m", f"{ESC}[m", f"{ESC}[?7l",
                             f"{ESC}[?7h", f"{ESC}[?1049h", f"{ESC}[?1049l", f"{ESC}[H",
                             f"{ESC}[2J", f"{ESC}[3J", "   \r\n"]),
        ),
        max_size=40,
    ),
    limit=st.sampled_from([0, 1, 3, 80]),
)
@pytest.mark.parametrize("name", BACKENDS)
def test_plain_reads_match_the_rows(name: str, pieces: list[str], limit: int) -> None:
    """The plain-text fast path (history_text, visible_text) reads what the rows say."""
    em = fed(emulator(name, 7, 4), "".join(pieces))
    rows, total = em.history_rows(limit)
    assert em.history_text(limit, unwrap=False) == (plain_texts(rows, unwrap=False), total)
    assert em.history_text(limit, unwrap=True) == (plain_texts(rows, unwrap=True), total)
    assert em.visible_text() == plain_texts(em.visible_rows(), unwrap=False)


MAN, WOMAN, GIRL, LAPTOP = "\U0001f468", "\U0001f469", "\U0001f467", "\U0001f4bb"
ZWJ = "\u200d"
# What tmux 3.3a shows for each cluster, and how many cells it takes.
TMUX_CLUSTERS = [
    (f"{MAN}{ZWJ}{WOMAN}{ZWJ}{GIRL}", f"{MAN}{ZWJ}{WOMAN}{ZWJ}{GIRL}", 2),
    (f"{WOMAN}{ZWJ}{LAPTOP}", f"{WOMAN}{ZWJ}{LAPTOP}", 2),
    ("\U0001f1ef\U0001f1f5", "\U0001f1ef\U0001f1f5", 2),
    ("\u26a0\ufe0f", "\u26a0\ufe0f", 1),
    ("\U0001f44d\U0001f3fd", "\U0001f44d\U0001f3fd", 4),
    # Joiners in a row count once; SGRs between a joiner and its emoji do not separate them.
    (f"{MAN}{ZWJ}{ZWJ}{WOMAN}", f"{MAN}{ZWJ}{WOMAN}", 2),
    (f"{MAN}{ZWJ}{ESC}[31m{WOMAN}{ESC}[m", f"{MAN}{ZWJ}{WOMAN}", 2),
    # A joiner followed by ASCII joins nothing and is not kept.
    (f"a{ZWJ}b", "ab", 2),
    (f"{MAN}{ZWJ}", MAN, 2),
]


@pytest.mark.parametrize(("sent", "shown", "cells"), TMUX_CLUSTERS)
def test_clusters_take_the_cells_tmux_gives_them(backend: str, sent: str, shown: str,
                                                 cells: int) -> None:
    em = fed(emulator(backend, 20, 2), f"[{sent}]")
    assert visible(em) == f"[{shown}]\n"
    assert em.cursor() == (cells + 2, 0)


def test_pyte_counts_regional_indicators_and_joins_like_tmux() -> None:
    # A lone regional indicator is one cell and a flag two (libghostty gives a lone one two).
    for sent, cells in [("\U0001f1fa", 1), ("\U0001f1fa\U0001f1f8\U0001f1ec", 3)]:
        em = fed(emulator("pyte", 20, 2), f"[{sent}]")
        assert visible(em) == f"[{sent}]\n" and em.cursor() == (cells + 2, 0)
    # Whatever follows a joiner joins the cell before it, however wide it is.
    for sent, cells in [("\u65e5\u200d\u672c", 2), ("\u2764\ufe0f\u200d\U0001f525", 1)]:
        em = fed(emulator("pyte", 20, 2), f"[{sent}]")
        assert visible(em) == f"[{sent}]\n" and em.cursor() == (cells + 2, 0)


@pytest.mark.parametrize(("char", "cells"), [
    ("\u2630", 1),  # trigram: wide in the wcwidth package, narrow in tmux
    ("\u3248", 2),  # circled number on a black square
    ("\u3164", 2),  # Hangul filler
    ("\uffa0", 1),  # halfwidth Hangul filler
    ("\u093e", 1),  # Devanagari vowel sign AA: a spacing combining mark
    ("\u0301", 0),  # a non-spacing mark stays in the cell before
    ("\u65e5", 2),
])
def test_pyte_widths_follow_tmux(char: str, cells: int) -> None:
    em = fed(emulator("pyte", 20, 2), f"x{char}|")
    assert visible(em) == f"x{char}|\n"
    assert em.cursor() == (cells + 2, 0)


@pytest.mark.parametrize("cluster", [
    "\U0001f441\ufe0f\u200d\U0001f5e8\ufe0f",  # eye in speech bubble: narrow emoji joined
    "\U0001f3f3\ufe0f\u200d\U0001f308",  # rainbow flag
    "\U0001f468\u200d\U0001f469\u200d\U0001f467",  # family
    "\U0001f1ef\U0001f1f5\U0001f1fa\U0001f1f8",  # two flags
    *(sent for sent, _, _ in TMUX_CLUSTERS),
])
def test_a_cluster_fed_byte_by_byte_lands_like_one_fed_whole(backend: str, cluster: str) -> None:
    data = f"[{cluster}]|".encode()
    whole = fed(emulator(backend, 20, 2), data)
    bytewise = emulator(backend, 20, 2)
    for i in range(len(data)):
        bytewise.feed(data[i:i + 1])
    assert visible(bytewise) == visible(whole)
    assert bytewise.cursor() == whole.cursor()


# Each sequence below, followed by "|", on a 20x8 screen, and what tmux 3.3a shows
# (trailing blank rows left out). pyte's own Screen got most of these wrong, and failed an
# assertion on VPA in origin mode without a region.
TMUX_EDITS = [
    ("dl-below-unwritten", "\x1b[4;1Habc\x1b[4;1H\x1b[M", ["", "", "", "|"]),
    ("il-above-unwritten", "\x1b[5;1Habc\x1b[4;1H\x1b[L", ["", "", "", "|", "", "abc"]),
    ("ri-above-region", "\x1b[4;8r\x1bMx", ["x|"]),
    ("cuu-above-region", "\x1b[4;8r\x1b[2;3H\x1b[5Ax", ["  x|"]),
    ("decrc-keeps-autowrap", "\x1b7\x1b[?7l\x1b8\x1b[1;19Habcd", [" " * 18 + "a|"]),
    ("no-autowrap-el", "\x1b[?7l\x1b[1;18Habcde\x1b[K", [" " * 17 + "ab|"]),
    ("no-autowrap-wide", "\x1b[?7l\x1b[1;18Hab\u4e2d\u6587x", [" " * 17 + "ab|"]),
    ("cud-below-region", "\x1b[2;4r\x1b[6;3H\x1b[5Bx", ["", "", "", "", "", "", "", "  x|"]),
    ("decaln-homes-and-drops-region", "\x1b[2;3r\x1b[3;5H\x1b#8x\x1b[3;1H\n\n\n\n\n\n",
     ["E" * 20] * 7 + ["|"]),
    ("decstr-leaves-modes", "\x1b[4h\x1b[?7l\x1b[!pab\x1b[Hx\x1b[1;19Hcde\x1b[4l",
     ["xab" + " " * 15 + "c|"]),
    ("ich-then-dch", "\x1b#8\x1b[2@\x1b[4P", ["|" + "E" * 15] + ["E" * 20] * 7),
    ("vpa-origin-without-region", "\x1b[?6h\x1b[3dx\x1b[?6l", ["|", "", "x"]),
    # libghostty put the cursor in the first column after IL and DL, and did nothing
    # for a count of 0 in DCH, DL and SU.
    ("il-keeps-column", "\x1b[2;1Hxy\x1b[2;5H\x1b[Lz", ["", "    z|", "xy"]),
    ("dl-keeps-column", "\x1b[2;1Hxy\r\nqq\x1b[2;5H\x1b[Mz", ["", "qq  z|"]),
    ("zero-dch", "abcd\x1b[2G\x1b[0P", ["a|d"]),
    ("zero-dl", "ab\r\ncd\x1b[A\x1b[0M", ["cd|"]),
    ("zero-su", "\r\nab\x1b[0S", ["ab", "  |"]),
]


@pytest.mark.parametrize(("name", "sent", "shown"), TMUX_EDITS, ids=[c[0] for c in TMUX_EDITS])
def test_edits_and_margins_like_tmux(backend: str, name: str, sent: str, shown: list[str]) -> None:
    data = f"{sent}|".encode()
    whole = fed(emulator(backend, 20, 8), data)
    assert visible(whole) == "".join(f"{row}\n" for row in shown)
    bytewise = emulator(backend, 20, 8)
    for i in range(len(data)):
        bytewise.feed(data[i:i + 1])
    assert visible(bytewise) == visible(whole)


# -- alternate screen ------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["1049", "1047", "47"])
def test_alternate_screen_round_trip(backend: str, mode: str) -> None:
    em = fed(emulator(backend, 20, 4), "primary 1\r\nprimary 2\r\n")
    fed(em, f"{ESC}[?{mode}h{ESC}[H{ESC}[2Jfull screen app")
    assert em.modes.alt_screen
    assert visible(em) == "full screen app\n"
    assert read_text(em, "recent", None, "text") == ("full screen app\n", False)
    fed(em, f"{ESC}[?{mode}l")
    assert not em.modes.alt_screen
    assert visible(em).startswith("primary 1\nprimary 2\n")


def test_alternate_screen_restores_cursor_with_1049(backend: str) -> None:
    em = fed(emulator(backend, 20, 4), "abc")
    assert em.cursor() == (3, 0)
    fed(em, f"{ESC}[?1049h{ESC}[3;5Hx{ESC}[?1049l")
    assert em.cursor() == (3, 0)
    fed(em, "def")
    assert visible(em) == "abcdef\n"


def test_alternate_screen_content_never_enters_scrollback(backend: str) -> None:
    em = fed(emulator(backend, 20, 3), "before\r\n")
    fed(em, f"{ESC}[?1049h" + "".join(f"alt {i}\r\n" for i in range(20)) + f"{ESC}[?1049l")
    fed(em, "after\r\n" * 5)
    text = read_text(em, "recent", 100, "text")[0]
    assert "alt" not in text
    assert text.startswith("before\n")


def test_pyte_alternate_screen_keeps_scrollback_rows() -> None:
    em = PyteEmulator(20, 3)
    fed(em, "".join(f"p{i}\r\n" for i in range(10)))
    stored = list(em.scrollback)
    fed(em, f"{ESC}[?1049h" + "".join(f"alt {i}\r\n" for i in range(10)) + f"{ESC}[?1049l")
    assert list(em.scrollback) == stored


# -- the pyte bugs, fixed --------------------------------------------------------------------


def test_variation_selector_does_not_drop_the_rest_of_the_text(backend: str) -> None:
    em = fed(emulator(backend), "\u26a0\ufe0f Do you want to proceed?")
    assert visible(em) == "\u26a0\ufe0f Do you want to proceed?\n"


def test_zero_width_joiner_does_not_drop_the_rest_of_the_text(backend: str) -> None:
    em = fed(emulator(backend), "\U0001f468\u200d\U0001f4bb done, e\u0301t\u00e9")
    assert visible(em) == "\U0001f468\u200d\U0001f4bb done, e\u0301t\u00e9\n"


def test_multi_digit_osc_codes_do_not_clobber_the_title(backend: str) -> None:
    em = fed(
        emulator(backend),
        f"{ESC}]2;real title\x07{ESC}]133;A\x07{ESC}]22;pointer{ESC}\\"
        f"{ESC}]8;;http://x{ESC}\\link{ESC}]8;;{ESC}\\{ESC}]52;c;aGk=\x07text",
    )
    assert em.title == "real title"
    assert visible(em) == "linktext\n"


def test_kitty_keyboard_sequences_do_not_leak(backend: str) -> None:
    em = fed(emulator(backend), f"a{ESC}[>1u{ESC}[<u{ESC}[=5;1u{ESC}[<2ub")
    assert visible(em) == "ab\n"


def test_colon_sgr_sub_parameters_do_not_leak(backend: str) -> None:
    sequence = f"{ESC}[4:3mcurly{ESC}[58:2::255:0:0m red{ESC}[38:2::1:2:3m!{ESC}[0m"
    em = fed(emulator(backend), sequence)
    assert visible(em) == "curly red!\n"


def test_pyte_colon_sgr_styles_are_kept() -> None:
    em = fed(PyteEmulator(40, 3), f"{ESC}[4:3mu{ESC}[4:0mn{ESC}[38:2::1:2:3mc{ESC}[38:5:208mp")
    ansi = read_text(em, "visible", None, "ansi")[0]
    assert ansi == f"{ESC}[0;4mu{ESC}[0mn{ESC}[0;38;2;1;2;3mc{ESC}[0;38;5;208mp{ESC}[0m\n"


def test_pyte_repeated_sgr_sequences_apply_to_the_pen_they_meet() -> None:
    em = fed(
        PyteEmulator(40, 3),
        f"{ESC}[31m{ESC}[1mA{ESC}[m{ESC}[1mB{ESC}[31mC{ESC}[m{ESC}[31m{ESC}[1mD{ESC}[4mE"
        f"{ESC}[22mF",
    )
    assert read_text(em, "visible", None, "ansi")[0] == (
        f"{ESC}[0;1;31mA{ESC}[0;1mB{ESC}[0;1;31mCD{ESC}[0;1;4;31mE{ESC}[0;4;31mF{ESC}[0m\n"
    )


def test_dcs_and_apc_payloads_are_swallowed(backend: str) -> None:
    em = fed(
        emulator(backend),
        f"a{ESC}Pq#0;2;0;0;0#0!10~-{ESC}\\b{ESC}_Gf=100,a=T;AAAA{ESC}\\c"
        f"{ESC}Ptmux;{ESC}{ESC}]2;x\x07{ESC}\\d",
    )
    assert visible(em) == "abcd\n"


# -- OSC capture -----------------------------------------------------------------------------


def test_title_is_sanitised_and_capped(backend: str) -> None:
    em = fed(emulator(backend), f"{ESC}]0;a\x01b\x7fc{ESC}\\")
    assert em.title == "abc"
    fed(em, f"{ESC}]2;{'t' * 300}\x07")
    assert em.title == "t" * 256
    fed(em, f"{ESC}]2;\x07")
    assert em.title == ""


def test_pyte_osc_signals() -> None:
    em = PyteEmulator(40, 4)
    assert em.title is None and em.cwd is None and em.progress is None
    fed(
        em,
        f"{ESC}]0;\u280b working\x07",
        f"{ESC}]7;file://host/home/me/my%20dir\x07",
        f"{ESC}]9;4;1;42\x07",
        f"{ESC}]9;Build finished\x07",
        f"{ESC}]777;notify;Claude;Needs input{ESC}\\",
    )
    assert em.title == "\u280b working"
    assert em.cwd == "/home/me/my dir"
    assert em.progress == "Build finished"
    assert [(s.kind, s.value, s.title) for s in em.take_signals()] == [
        ("title", "\u280b working", None),
        ("cwd", "/home/me/my dir", None),
        ("progress", "1;42", None),
        ("notification", "Build finished", None),
        ("notification", "Needs input", "Claude"),
    ]
    assert em.take_signals() == []


def test_pyte_osc_progress_is_raw_for_detection() -> None:
    em = fed(PyteEmulator(40, 4), f"{ESC}]9;4;0;{ESC}\\")
    assert em.progress == "4;0;"
    assert em.take_signals() == [TerminalSignal("progress", "0;", raw="4;0;")]
    fed(em, f"{ESC}]9;4;3\x07")
    assert em.progress == "4;3"


def test_pyte_kitty_notification_chunks() -> None:
    em = PyteEmulator(40, 4)
    body = base64.b64encode("done ✓".encode()).decode()
    fed(em, f"{ESC}]99;i=1:d=0;Title{ESC}\\", f"{ESC}]99;i=1:p=body:e=1;{body}{ESC}\\")
    signal = em.take_signals()[0]
    assert (signal.kind, signal.value, signal.title) == ("notification", "done ✓", "Title")
    fed(em, f"{ESC}]99;;Just a title{ESC}\\")
    signal = em.take_signals()[0]
    assert (signal.value, signal.title) == ("", "Just a title")


def test_pyte_title_signal_only_on_change() -> None:
    em = fed(PyteEmulator(40, 4), f"{ESC}]2;same\x07{ESC}]2;same\x07{ESC}]1;icon\x07")
    assert [s.kind for s in em.take_signals()] == ["title"]


@pytest.mark.parametrize(
    ("title", "stripped"),
    [
        ("\u280b task", "task"),
        ("\u280b \u2819 task", "\u2819 task"),
        ("\u2605 x", "\u2605 x"),
        ("  \u2733 Claude Code  ", "Claude Code"),
        ("\u00b7 idle", "idle"),
        ("\u2722\u2733 two glyphs", "\u2722\u2733 two glyphs"),
        ("\u2800", None),
        ("   ", None),
        ("", None),
        (None, None),
        ("plain", "plain"),
    ],
)
def test_strip_title(title: str | None, stripped: str | None) -> None:
    assert strip_title(title) == stripped


# -- replies and modes -----------------------------------------------------------------------


def test_device_status_and_attribute_replies(backend: str) -> None:
    em = fed(emulator(backend, 40, 6), "ab\r\ncd")
    assert em.take_replies() == b""
    fed(em, f"{ESC}[5n")
    assert em.take_replies() == b"\x1b[0n"
    fed(em, f"{ESC}[6n")
    assert em.take_replies() == b"\x1b[2;3R"
    fed(em, f"{ESC}[c")
    assert em.take_replies().startswith(b"\x1b[?")
    fed(em, f"{ESC}[>c")
    assert em.take_replies().startswith(b"\x1b[>")
    assert em.take_replies() == b""


def test_cursor_report_at_the_right_edge_stays_on_screen(backend: str) -> None:
    em = fed(emulator(backend, 10, 3), "0123456789")
    fed(em, f"{ESC}[6n")
    assert em.take_replies() == b"\x1b[1;10R"


def test_pyte_extra_replies() -> None:
    em = fed(PyteEmulator(30, 7), f"{ESC}[18t{ESC}[?2004h{ESC}[?2004$p{ESC}[?9999$p")
    assert em.take_replies() == b"\x1b[8;7;30t\x1b[?2004;1$y\x1b[?9999;0$y"
    fed(em, f"{ESC}]11;?\x07{ESC}]10;?{ESC}\\")
    assert em.take_replies() == (
        b"\x1b]11;rgb:0000/0000/0000\x07\x1b]10;rgb:ffff/ffff/ffff\x1b\\"
    )


def test_input_modes(backend: str) -> None:
    em = emulator(backend)
    fed(em, f"{ESC}[?2004h{ESC}[?1h{ESC}={ESC}[?1004h")
    assert em.modes.bracketed_paste and em.modes.app_cursor
    assert em.modes.app_keypad and em.modes.focus_reporting
    fed(em, f"{ESC}[?2004l{ESC}[?1l{ESC}>{ESC}[?1004l")
    assert not em.modes.bracketed_paste and not em.modes.app_cursor
    assert not em.modes.app_keypad and not em.modes.focus_reporting


def test_kitty_keyboard_flags_and_query(backend: str) -> None:
    em = emulator(backend)
    fed(em, f"{ESC}[?u")
    assert em.take_replies() == b"\x1b[?0u"
    fed(em, f"{ESC}[>1u{ESC}[>3u")
    assert em.modes.kitty_flags == 3
    fed(em, f"{ESC}[?u")
    assert em.take_replies() == b"\x1b[?3u"
    fed(em, f"{ESC}[<u")
    assert em.modes.kitty_flags == 1
    fed(em, f"{ESC}[=4;2u")
    assert em.modes.kitty_flags == 5
    fed(em, f"{ESC}[=1;3u")
    assert em.modes.kitty_flags == 4
    fed(em, f"{ESC}[<5u")
    assert em.modes.kitty_flags == 0


def test_pyte_kitty_flags_are_per_screen() -> None:
    em = fed(PyteEmulator(20, 4), f"{ESC}[>1u{ESC}[?1049h")
    assert em.modes.kitty_flags == 0
    fed(em, f"{ESC}[>8u{ESC}[?1049l")
    assert em.modes.kitty_flags == 1


def test_pyte_mouse_modes() -> None:
    em = fed(PyteEmulator(20, 4), f"{ESC}[?1002h{ESC}[?1006h")
    assert (em.modes.mouse_tracking, em.modes.mouse_sgr) == (1002, True)
    fed(em, f"{ESC}[?1002l{ESC}[?1006l")
    assert (em.modes.mouse_tracking, em.modes.mouse_sgr) == (0, False)


def test_reset_returns_to_primary_and_clears_modes(backend: str) -> None:
    em = fed(emulator(backend), f"{ESC}[?2004h{ESC}[?1049hx{ESC}c")
    assert not em.modes.alt_screen and not em.modes.bracketed_paste
    assert visible(em) == ""


# -- screen behaviour --------------------------------------------------------------------------


def test_dec_line_drawing(backend: str) -> None:
    em = fed(emulator(backend), f"{ESC}(0lqqk{ESC}(B lqk")
    assert visible(em) == "\u250c\u2500\u2500\u2510 lqk\n"


def test_wide_characters(backend: str) -> None:
    em = fed(emulator(backend, 10, 3), "\u4e2d\u6587ab")
    assert visible(em) == "\u4e2d\u6587ab\n"
    assert em.cursor() == (6, 0)


def test_wide_character_that_does_not_fit_wraps(backend: str) -> None:
    em = fed(emulator(backend, 5, 3), "abcd\u4e2dx")
    assert read_text(em, "recent", None, "text")[0] == "abcd\n\u4e2dx\n"
    assert read_text(em, "recent_unwrapped", None, "text")[0] == "abcd\u4e2dx\n"


def test_overwriting_half_of_a_wide_character_blanks_the_other_half() -> None:
    em = fed(PyteEmulator(10, 3), f"\u4e2d\u6587{ESC}[1;2Hx")
    assert visible(em) == " x\u6587\n"


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (f"\u4e2d{ESC}[1;2Hx", " x"),  # a run starting on a right half
        (f"{ESC}[1;3H\u4e2dd{ESC}[1;1Habc", "abc d"),  # a run ending on a left half
        (f"{ESC}[1;3H\u4e2dd{ESC}[1;2Hab", " ab d"),  # both halves, through the middle
    ],
)
def test_a_narrow_run_over_half_a_wide_character_blanks_the_other_half(
    backend: str, data: str, expected: str
) -> None:
    assert visible(fed(emulator(backend, 10, 3), data)) == expected + "\n"


def test_scroll_region_does_not_feed_scrollback() -> None:
    em = fed(PyteEmulator(10, 5), f"{ESC}[2;4r{ESC}[4;1H" + "r\n" * 10)
    assert len(em.scrollback) == 0
    fed(em, f"{ESC}[r{ESC}[5;1H" + "x\n" * 3)
    assert len(em.scrollback) == 3


def test_erase_display_2_moves_screen_to_scrollback_and_3_clears_it() -> None:
    em = fed(PyteEmulator(10, 4), "one\r\ntwo\r\n")
    fed(em, f"{ESC}[H{ESC}[2J")
    assert [row.text for row in em.scrollback] == ["one", "two"]
    assert visible(em) == ""
    fed(em, f"{ESC}[3J")
    assert len(em.scrollback) == 0


def test_resize_keeps_the_cursor_row_and_pushes_the_top_to_scrollback() -> None:
    em = fed(PyteEmulator(20, 6), "".join(f"r{i}\r\n" for i in range(5)) + "prompt$ ")
    em.resize(10, 3)
    assert visible(em) == "r3\nr4\nprompt$\n"
    assert [row.text for row in em.scrollback] == ["r0", "r1", "r2"]
    assert em.cursor() == (8, 2)
    em.resize(30, 8)
    assert em.cursor() == (8, 2)
    fed(em, f"{ESC}[8;30H{ESC}[6n")
    assert em.take_replies() == b"\x1b[8;30R"


def test_shrinking_trims_blank_rows_below_the_cursor_before_pushing_any_up(
        backend: str) -> None:
    em = fed(emulator(backend, 30, 12), "$ echo hi\r\nhi\r\n$ ")
    em.resize(20, 6)
    assert visible(em) == "$ echo hi\nhi\n$\n" and em.scrolled == 0
    em.resize(20, 2)
    assert visible(em) == "hi\n$\n" and em.scrolled == 1


def test_resize_while_in_alternate_screen_keeps_primary(backend: str) -> None:
    em = fed(emulator(backend, 20, 5), "keep me\r\n", f"{ESC}[?1049halt")
    em.resize(30, 5)
    fed(em, f"{ESC}[?1049l")
    assert visible(em).startswith("keep me\n")


def test_cursor_save_restore_is_one_slot() -> None:
    em = PyteEmulator(20, 5)
    fed(em, f"{ESC}[2;3H{ESC}7{ESC}[4;4H{ESC}7{ESC}[H{ESC}8{ESC}8")
    assert em.cursor() == (3, 3)


def test_repeat_and_insert_mode(backend: str) -> None:
    em = fed(emulator(backend), f"ab{ESC}[3b", f"\r{ESC}[4hX{ESC}[4l")
    assert visible(em) == "Xabbbb\n"


# -- scrollback storage --------------------------------------------------------------------------


def test_scrollback_is_compact_rows_not_cells() -> None:
    em = PyteEmulator(80, 24)
    fed(em, "".join(f"{ESC}[3{i % 8}mcoloured line {i}{ESC}[0m plain\r\n" for i in range(10_024)))
    rows = list(em.scrollback)
    assert len(rows) == 10_000
    assert all(type(row) is Row for row in rows)
    assert all(type(row.text) is str and type(row.ansi) is str for row in rows)
    assert not any(isinstance(value, Char) for row in rows for value in astuple(row))
    assert rows[-1].text == "coloured line 10000 plain"
    assert rows[-1].ansi == f"{ESC}[0;30mcoloured line 10000{ESC}[0m plain"
    assert rows[0].text == "coloured line 1 plain"
    plain = fed(PyteEmulator(80, 3), "plain\r\n" * 5)
    assert all(row.ansi is row.text for row in plain.scrollback)


def test_scrollback_line_limit() -> None:
    em = fed(PyteEmulator(20, 3, scrollback_lines=5), "".join(f"{i}\r\n" for i in range(20)))
    assert [row.text for row in em.scrollback] == ["13", "14", "15", "16", "17"]
    none = fed(PyteEmulator(20, 3, scrollback_lines=0), "x\r\n" * 10)
    assert len(none.scrollback) == 0


def test_scrollback_byte_limit_evicts_oldest() -> None:
    limit = 20_000
    em = PyteEmulator(80, 5, scrollback_bytes=limit)
    fed(em, "".join(f"{ESC}[1;3{i % 8}m{i:06d}{'#' * 60}{ESC}[0m\r\n" for i in range(2000)))
    assert 0 < em.scrollback_bytes <= limit
    texts = [row.text for row in em.scrollback]
    assert texts[-1].startswith("001995")  # rows 1996..1999 are still on screen
    assert len(texts) < 200
    assert [int(text[:6]) for text in texts] == list(range(1996 - len(texts), 1996))


def test_history_rows_total_and_limit() -> None:
    em = fed(PyteEmulator(10, 3), "".join(f"{i}\r\n" for i in range(10)))
    rows, total = em.history_rows(4)
    assert total == 8 + 3
    assert [row.text for row in rows] == ["7", "8", "9", ""]
    rows, total = em.history_rows(100)
    assert len(rows) == total == 11
    assert em.history_rows(0) == ([], 11)


# -- fast paths: the same screen as drawing one byte at a time ----------------------------------


def pyte_state(em: PyteEmulator) -> tuple[object, ...]:
    """Everything the fast paths could get wrong, scrollback and its byte count included."""
    return (
        [astuple(row) for row in em.visible_rows()],
        [astuple(row) for row in em.scrollback],
        em.scrollback_bytes,
        em.cursor(),
        astuple(em.modes),
    )


def bytewise(columns: int, lines: int, data: str, **limits: int) -> PyteEmulator:
    """``data`` fed one byte per call, so no run or whole line ever reaches the screen at once."""
    em = PyteEmulator(columns, lines, **limits)
    for byte in data.encode():
        em.feed(bytes([byte]))
    return em


def same_as_bytewise(columns: int, lines: int, data: str, **limits: int) -> PyteEmulator:
    em = fed(PyteEmulator(columns, lines, **limits), data)
    assert pyte_state(em) == pyte_state(bytewise(columns, lines, data, **limits))
    return em


def recent(em: Emulator, fmt: ReadFormat = "text") -> str:
    return read_text(em, "recent", 1000, fmt)[0]


NUMBERS = "".join(f"{i}\r\n" for i in range(1, 41))


@pytest.mark.parametrize(
    "limits",
    [{}, {"scrollback_lines": 0}, {"scrollback_lines": 7}, {"scrollback_bytes": 700}],
)
def test_plain_lines_scrolling_off_match_drawing_them_one_by_one(limits: dict[str, int]) -> None:
    em = same_as_bytewise(10, 4, "prompt$ seq\r\n" + NUMBERS + "\r\n  \r\nend", **limits)
    assert visible(em) == "40\n\n\nend\n"
    if not limits:
        assert [row.text for row in em.scrollback] == ["prompt$ se", "q", *map(str, range(1, 40))]


def test_plain_lines_in_every_slice_size_give_the_same_screen() -> None:
    data = ("x" * 9 + "\r\n" + "abc\r\n" * 3) * 20
    expected = pyte_state(bytewise(9, 3, data, scrollback_lines=25))
    for size in (2, 5, 13, 64, len(data)):
        em = PyteEmulator(9, 3, scrollback_lines=25)
        for start in range(0, len(data), size):
            em.feed(data[start : start + size].encode())
        assert pyte_state(em) == expected, f"slices of {size}"


def test_plain_line_exactly_as_wide_as_the_screen_does_not_wrap(backend: str) -> None:
    em = fed(emulator(backend, 8, 3), "".join(f"{i:08d}\r\n" for i in range(6)) + "next")
    assert visible(em) == "00000004\n00000005\nnext\n"
    assert read_text(em, "recent_unwrapped", 1000, "text")[0].splitlines()[-3:] == [
        "00000004", "00000005", "next",
    ]
    same_as_bytewise(8, 3, "".join(f"{i:08d}\r\n" for i in range(6)) + "next")


def test_plain_line_one_wider_than_the_screen_wraps_inside_a_run(backend: str) -> None:
    data = "a\r\n" * 4 + "123456789\r\n" + "b\r\n" * 2
    em = fed(emulator(backend, 8, 3), data)
    assert recent(em).splitlines()[-4:] == ["12345678", "9", "b", "b"]
    unwrapped = read_text(em, "recent_unwrapped", 1000, "text")[0].splitlines()
    assert unwrapped[-3:] == ["123456789", "b", "b"]
    same_as_bytewise(8, 3, data)


def test_a_run_ending_at_the_last_column_then_more_text_autowraps(backend: str) -> None:
    data = "a\r\n" * 4 + "12345678" + "9\r\nc"
    em = fed(emulator(backend, 8, 3), data)
    assert visible(em) == "12345678\n9\nc\n"
    same_as_bytewise(8, 3, data)
    no_wrap = f"{ESC}[?7l" + "a\r\n" * 4 + "123456789\r\nc"
    assert visible(fed(emulator(backend, 8, 3), no_wrap)) == "a\n12345679\nc\n"
    same_as_bytewise(8, 3, no_wrap)


def test_wide_characters_right_after_plain_lines(backend: str) -> None:
    data = "ab\r\n" * 5 + "\u4e2d\u6587x\r\n" + "cd\r\n" + "1234567\u4e2d"
    em = fed(emulator(backend, 8, 4), data)
    assert visible(em) == "\u4e2d\u6587x\ncd\n1234567\n\u4e2d\n"
    same_as_bytewise(8, 4, data)


def test_sgr_in_the_middle_of_plain_lines(backend: str) -> None:
    data = "a\r\n" * 4 + f"x{ESC}[31mred{ESC}[0my\r\n{ESC}[1m" + "b\r\n" * 2 + f"{ESC}[mc\r\n"
    em = fed(emulator(backend, 10, 3), data)
    assert recent(em).splitlines()[-4:] == ["xredy", "b", "b", "c"]
    styled = recent(em, "ansi").splitlines()[-4:]
    assert [ESC in line for line in styled] == [True, True, True, False]
    if backend == "pyte":
        assert styled[:2] == [f"x{ESC}[0;31mred{ESC}[0my", f"{ESC}[0;1mb{ESC}[0m"]
    same_as_bytewise(10, 3, data)


def test_plain_lines_in_insert_mode(backend: str) -> None:
    data = "a\r\n" * 4 + f"{ESC}[4h" + "xy\r\n" * 3 + f"{ESC}[A12{ESC}[4l\r\n"
    em = fed(emulator(backend, 8, 3), data)
    assert visible(em) == "xy\n12xy\n"
    same_as_bytewise(8, 3, data)


def test_plain_lines_inside_a_scroll_region_do_not_enter_scrollback(backend: str) -> None:
    rows = "".join(f"r{i}\r\n" for i in range(9))
    data = f"top\r\n{ESC}[2;4r{ESC}[4;1H{rows}{ESC}[5;1Hbottom"
    em = fed(emulator(backend, 10, 5), data)
    assert visible(em) == "top\nr7\nr8\n\nbottom\n"
    assert em.history_rows(100)[1] == 5
    same_as_bytewise(10, 5, data)
    full_region = f"{ESC}[1;5r{ESC}[5;1H" + NUMBERS
    assert visible(fed(emulator(backend, 10, 5), full_region)) == "37\n38\n39\n40\n"
    same_as_bytewise(10, 5, full_region)


def test_plain_lines_on_the_alternate_screen_do_not_enter_scrollback(backend: str) -> None:
    data = "kept\r\n" + f"{ESC}[?1049h{ESC}[5;1H" + NUMBERS + f"{ESC}[?1049l"
    em = fed(emulator(backend, 10, 5), data)
    assert visible(em) == "kept\n"
    assert em.history_rows(100)[1] == 5
    same_as_bytewise(10, 5, data)


def test_plain_lines_in_origin_mode(backend: str) -> None:
    data = f"{ESC}[1;4r{ESC}[?6h{ESC}[4;1H" + NUMBERS + f"{ESC}[1;1Hhome{ESC}[?6l{ESC}[r"
    em = fed(emulator(backend, 10, 5), data)
    assert visible(em) == "home\n39\n40\n"
    same_as_bytewise(10, 5, data)


def test_plain_lines_with_a_coloured_pen_or_line_drawing_charset(backend: str) -> None:
    pen = f"{ESC}[32m" + "g\r\n" * 6 + f"{ESC}[m"
    em = fed(emulator(backend, 10, 3), pen)
    assert recent(em).splitlines() == ["g"] * 6
    assert all(ESC in line for line in recent(em, "ansi").splitlines())
    same_as_bytewise(10, 3, pen)
    charset = f"{ESC}(0" + "qqq\r\n" * 6 + f"{ESC}(B" + "qqq\r\n"
    em = fed(emulator(backend, 10, 3), charset)
    assert recent(em).splitlines() == ["\u2500" * 3] * 6 + ["qqq"]
    same_as_bytewise(10, 3, charset)


def test_plain_lines_over_a_bottom_row_that_has_text(backend: str) -> None:
    data = "a\r\n" * 3 + f"LONGTEXT{ESC}[A\r\n" + "xy\r\n" + "z\r\n"
    em = fed(emulator(backend, 10, 3), data)
    assert visible(em) == "xyNGTEXT\nz\n"
    same_as_bytewise(10, 3, data)


def test_repeat_after_plain_lines_repeats_their_last_character(backend: str) -> None:
    data = "a\r\n" * 4 + "xyz\r\n\r\n" + f"{ESC}[2b"
    assert visible(fed(emulator(backend, 10, 3), data)) == "xyz\n\nzz\n"
    same_as_bytewise(10, 3, data)


@settings(max_examples=80, deadline=None)
@given(
    pieces=st.lists(
        st.one_of(
            st.text(alphabet="ab ", max_size=9).map(lambda line: line + "\r\n"),
            st.sampled_from(
                ["\r\n", "\n", "\t", "\u4e2d", "e\u0301", f"{ESC}[31m", f"{ESC}[m", f"{ESC}[4h",
                 f"{ESC}[4l", f"{ESC}[2;3r", f"{ESC}[r", f"{ESC}[?6h", f"{ESC}[?6l", f"{ESC}[?7l",
                 f"{ESC}[?7h", f"{ESC}[?1049h", f"{ESC}[?1049l", f"{ESC}(0", f"{ESC}(B", f"{ESC}[H",
                 f"{ESC}[9;1H", f"{ESC}[A", f"{ESC}[2J", f"{ESC}[41m {ESC}[m", f"{ESC}[3b"]
            ),
        ),
        max_size=40,
    ),
    size=st.tuples(st.integers(1, 9), st.integers(1, 5)),
    scrollback=st.sampled_from([0, 3, 10_000]),
)
def test_plain_line_runs_match_drawing_byte_by_byte(
    pieces: list[str], size: tuple[int, int], scrollback: int
) -> None:
    same_as_bytewise(*size, "".join(pieces), scrollback_lines=scrollback)


# -- feeding in pieces ---------------------------------------------------------------------------

SAMPLE = (
    f"plain \u4e2d\u6587 \u26a0\ufe0f caf\u00e9\r\n"
    f"{ESC}[1;31mred{ESC}[0m {ESC}[38:2::1:2:3mrgb{ESC}[m"
    f"{ESC}]0;my title\x07{ESC}]133;A{ESC}\\{ESC}]9;4;1;50\x07{ESC}]7;file://h/tmp%20x{ESC}\\"
    f"{ESC}Pq#0;2;0;0;0#0!10~{ESC}\\{ESC}_Gf=100;QUFB{ESC}\\{ESC}[?2004h{ESC}[>1u{ESC}[<u"
    f"{ESC}[6n{ESC}[c{ESC}[?1049halt screen{ESC}[?1049l{ESC}(0qq{ESC}(B\r\n"
    f"wrap {'w' * 30}\r\n"
    f"{ESC}[2;5H{ESC}[Kend\u200d\U0001f600 \x9b31mc1\x9b0m"
).encode()


def snapshot(em: Emulator) -> tuple[object, ...]:
    return (
        [astuple(row) for row in em.visible_rows()],
        [astuple(row) for row in em.history_rows(100)[0]],
        em.cursor(),
        astuple(em.modes),
        em.title,
        em.cwd,
        em.progress,
        em.take_replies(),
        em.take_signals(),
    )


def whole(backend: str, data: bytes) -> tuple[object, ...]:
    return snapshot(fed(emulator(backend, 24, 5), data))


def test_sample_renders_as_expected() -> None:
    em = fed(PyteEmulator(24, 5), SAMPLE)
    assert em.title == "my title"
    assert em.cwd == "/tmp x"
    assert read_text(em, "recent", None, "text")[0] == (
        "plain \u4e2d\u6587 \u26a0\ufe0f caf\u00e9\n"
        "red end\u200d\U0001f600 c1\n"
        "wrap wwwwwwwwwwwwwwwwwww\n"
        "wwwwwwwwwww\n"
    )
    assert read_text(em, "recent_unwrapped", None, "text")[0].splitlines()[2] == "wrap " + "w" * 30
    ansi = read_text(em, "visible", None, "ansi")[0].splitlines()[1]
    assert ansi == f"{ESC}[0;1;31mred{ESC}[0m end\u200d\U0001f600 {ESC}[0;31mc1{ESC}[0m"


def test_every_split_point_gives_the_same_screen(backend: str) -> None:
    expected = whole(backend, SAMPLE)
    for cut in range(1, len(SAMPLE)):
        em = fed(emulator(backend, 24, 5), SAMPLE[:cut], SAMPLE[cut:])
        assert snapshot(em) == expected, f"split at byte {cut}"


@settings(max_examples=60, deadline=None)
@given(cuts=st.lists(st.integers(min_value=0, max_value=len(SAMPLE)), max_size=12))
def test_any_split_into_many_pieces_gives_the_same_screen(cuts: list[int]) -> None:
    points = [0, *sorted(cuts), len(SAMPLE)]
    pieces = [SAMPLE[a:b] for a, b in pairwise(points)]
    assert snapshot(fed(PyteEmulator(24, 5), *pieces)) == whole("pyte", SAMPLE)


@settings(max_examples=150, deadline=None)
@given(
    data=st.lists(
        st.one_of(
            st.binary(max_size=40),
            st.sampled_from(
                [b"\x1b", b"\x1b[", b"\x1b]", b"\x1bP", b"\x07", b"\x1b\\", b"\r\n", b";", b"?",
                 b"\xe4\xb8", b"\xad", b"1049h", b"m", b"\x9b", b"\xc2\x9d", b"38:2:", b"\x18"]
            ),
        ),
        max_size=40,
    ),
    size=st.tuples(st.integers(1, 30), st.integers(1, 8)),
)
def test_arbitrary_bytes_never_break_the_emulator(data: list[bytes], size: tuple[int, int]) -> None:
    em = PyteEmulator(*size)
    for chunk in data:
        em.feed(chunk)
    rows = em.visible_rows()
    assert len(rows) == size[1]
    x, y = em.cursor()
    assert 0 <= x < size[0] and 0 <= y < size[1]
    for source in ("visible", "recent", "recent_unwrapped", "detection"):
        read_text(em, source, None, "ansi")
    em.resize(max(1, size[0] // 2), max(1, size[1] - 1))
    assert len(em.visible_rows()) == max(1, size[1] - 1)


# -- backend selection ---------------------------------------------------------------------------


def test_make_emulator_backends() -> None:
    em = make_emulator("pyte", 30, 7, scrollback_lines=5)
    assert isinstance(em, PyteEmulator)
    assert (em.columns, em.lines) == (30, 7)
    assert make_emulator("auto", 30, 7).backend in ("pyte", "ghostty")
    with pytest.raises(InvalidParams):
        make_emulator("vt100", 30, 7)


def test_make_emulator_ghostty_unavailable_is_an_error() -> None:
    if _ghostty_available():
        assert make_emulator("ghostty", 30, 7).backend == "ghostty"
        assert make_emulator("auto", 30, 7).backend == "ghostty"
        return
    with pytest.raises(CmuxError) as info:
        make_emulator("ghostty", 30, 7)
    assert info.value.code == "emulator_unavailable"
    assert make_emulator("auto", 30, 7).backend == "pyte"


def test_pyte_joins_zwj_sequences_and_flags_into_one_two_cell_cluster() -> None:
    emulator = make_emulator("pyte", 20, 3)
    emulator.feed("a\U0001f468\u200d\U0001f469\u200d\U0001f467b".encode())
    assert emulator.cursor() == (4, 0)
    emulator.feed("\r\n\U0001f1ef\U0001f1f5\U0001f1fa\U0001f1f8|".encode())
    assert emulator.cursor() == (5, 1)
    text, _ = read_text(emulator, "visible", None, "text")
    assert text.splitlines() == ["a\U0001f468\u200d\U0001f469\u200d\U0001f467b",
                                 "\U0001f1ef\U0001f1f5\U0001f1fa\U0001f1f8|"]
