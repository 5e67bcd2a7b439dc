from __future__ import annotations

import base64
import itertools
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cmux_core.terminal.emulator import Row, TerminalSignal

try:
    from cmux_core.terminal.ghostty import GhosttyEmulator, OscCapture
except (ImportError, OSError) as exc:  # the native wheel exists for Linux x86_64/aarch64 only
    pytest.skip(f"pyghostty is not available: {exc}", allow_module_level=True)


def texts(rows: list[Row]) -> list[str]:
    return [row.text for row in rows]


def announced(signals: list[TerminalSignal]) -> list[tuple[str, str, str | None]]:
    return [(s.kind, s.value, s.title) for s in signals]


def screen(columns: int = 20, lines: int = 5, data: bytes = b"", **kwargs: int) -> GhosttyEmulator:
    emulator = GhosttyEmulator(columns, lines, **kwargs)
    emulator.feed(data)
    return emulator


# --- screen contents ---------------------------------------------------------------------------


def test_plain_text_rows_and_cursor() -> None:
    emulator = screen(data=b"hello\r\nworld")
    assert emulator.backend == "ghostty"
    assert texts(emulator.visible_rows()) == ["hello", "world", "", "", ""]
    assert emulator.cursor() == (5, 1)


def test_rows_are_exactly_the_screen_height_and_trimmed() -> None:
    emulator = screen(10, 3, b"ab   \r\n")
    rows = emulator.visible_rows()
    assert len(rows) == 3
    assert rows[0] == Row("ab", "ab", False)


def test_soft_wrap_flags_and_full_width_wrapped_rows() -> None:
    emulator = screen(6, 5, b"hello world wrap\r\nshort\r\n")
    rows = emulator.visible_rows()
    assert [(r.text, r.wrapped) for r in rows[:4]] == [
        ("hello ", True),  # the trailing space belongs to the logical line
        ("world ", True),
        ("wrap", False),
        ("short", False),
    ]
    assert "".join(r.text for r in rows[:3]) == "hello world wrap"


def test_wide_character_that_does_not_fit_wraps_without_a_gap() -> None:
    emulator = screen(6, 3, "abcde中x".encode())
    rows = emulator.visible_rows()
    assert (rows[0].text, rows[0].wrapped) == ("abcde", True)
    assert rows[1].text == "中x"


def test_styled_rows_carry_sgr_and_are_self_contained() -> None:
    emulator = screen(10, 4, b"a \x1b[1;31mred\x1b[0m\r\n\x1b[44mBLUEBLUEBLUE\x1b[0m\r\n")
    rows = emulator.visible_rows()
    assert rows[0].text == "a red"
    assert rows[0].ansi.startswith("a ")
    assert "\x1b[" in rows[0].ansi and rows[0].ansi.endswith("\x1b[0m")
    # A style running across a soft wrap is restated on the continuation row.
    assert rows[2].text == "UE"
    assert rows[2].ansi.startswith("\x1b[0m\x1b[") and rows[2].ansi.endswith("UE\x1b[0m")


def test_warning_emoji_prompt_renders_in_full() -> None:
    line = "⚠️ Do you want to proceed?"
    prompt = "\N{HEAVY RIGHT-POINTING ANGLE QUOTATION MARK ORNAMENT} 1. Yes"
    emulator = screen(40, 3, f"{line}\r\n{prompt}".encode())
    assert texts(emulator.visible_rows())[:2] == [line, prompt]


FAMILY = "\U0001f468\u200d\U0001f469\u200d\U0001f467"
TECHNOLOGIST = "\U0001f469\u200d\U0001f4bb"
FLAG = "\U0001f1ef\U0001f1f5"
CLUSTER_LINE = f"[{FAMILY}][{TECHNOLOGIST}][{FLAG}{FLAG}][\u26a0\ufe0f][\U0001f44d\U0001f3fd]|"
CLUSTER_COLUMN = 23
"""Where ``|`` lands in tmux 3.3a: 2 cells for each ZWJ cluster and flag, 1 for the
warning sign (VS16 does not widen it), 4 for a thumb and its skin tone (two emoji)."""


def bar_column(emulator: GhosttyEmulator) -> int:
    """The cursor's column (zero-based), as the program would learn it from DSR 6."""
    emulator.feed(b"\x1b[6n")
    reply = emulator.take_replies().decode()
    assert reply.startswith("\x1b[") and reply.endswith("R"), reply
    return int(reply[2:-1].split(";")[1]) - 1


def test_emoji_clusters_take_the_cells_tmux_gives_them() -> None:
    emulator = screen(40, 3, CLUSTER_LINE.encode())
    assert bar_column(emulator) == CLUSTER_COLUMN + 1
    assert texts(emulator.visible_rows())[0] == CLUSTER_LINE


def test_emoji_clusters_split_anywhere_give_the_same_cells() -> None:
    data = CLUSTER_LINE.encode()
    for size in (1, 2, 3, 5, 7):
        emulator = screen(40, 3)
        for start in range(0, len(data), size):
            emulator.feed(data[start:start + size])
        assert texts(emulator.visible_rows())[0] == CLUSTER_LINE, size
        assert bar_column(emulator) == CLUSTER_COLUMN + 1, size


def test_cluster_joining_leaves_sequences_and_the_programs_mode_alone() -> None:
    # A ZWJ inside an OSC title is part of the title, not a cluster to join.
    emulator = screen(40, 3, f"\x1b]0;{FAMILY} title\x07ok".encode())
    assert emulator.title == f"{FAMILY} title"
    assert texts(emulator.visible_rows())[0] == "ok"
    # The program's own mode 2027 is reported as it left it ...
    emulator.feed(f"{FAMILY}\x1b[?2027$p".encode())
    assert emulator.take_replies() == b"\x1b[?2027;2$y"
    # ... and when it switches 2027 on, VS16 widens as the program asked.
    emulator = screen(40, 3, "\x1b[?2027h\u26a0\ufe0f|".encode())
    assert bar_column(emulator) == 3
    assert emulator.take_replies() == b""
    emulator.feed(b"\x1b[?2027$p")
    assert emulator.take_replies() == b"\x1b[?2027;1$y"


def test_history_rows_cover_scrollback_then_screen() -> None:
    emulator = screen(20, 3, b"".join(b"line %d\r\n" % i for i in range(10)))
    rows, total = emulator.history_rows(5)
    assert total == 11  # 8 rows scrolled off + 3 on screen
    assert texts(rows) == ["line 6", "line 7", "line 8", "line 9", ""]
    assert emulator.history_rows(0) == ([], total)
    everything, _ = emulator.history_rows(1000)
    assert texts(everything)[0] == "line 0" and len(everything) == total


def test_scrollback_keeps_at_least_ten_thousand_rows() -> None:
    emulator = GhosttyEmulator(80, 24)
    data = b"".join(b"\x1b[3%dmrow %d\x1b[0m plain\r\n" % (i % 8, i) for i in range(15000))
    for i in range(0, len(data), 8192):
        emulator.feed(data[i : i + 8192])
    rows, total = emulator.history_rows(20000)
    assert total - emulator.lines >= 10000
    numbers = [int(r.text.split()[1]) for r in rows if r.text]
    assert numbers == list(range(numbers[0], 15000))
    assert numbers[0] <= 15000 - 10000


def test_style_heavy_rows_keep_the_requested_depth() -> None:
    # Words in their own 24-bit colours cost libghostty far more bytes per row than
    # plain text (about two thirds of the rows with the first budget): it must grow.
    rng = random.Random(7)
    emulator = GhosttyEmulator(40, 10, scrollback_lines=3000)
    for n in range(9000):
        words = b"".join(
            b"\x1b[38;2;%d;%d;%dmw%d\x1b[0m " % (*rng.randbytes(3), w) for w in range(6))
        emulator.feed(words + b"%d\r\n" % n)
    rows, total = emulator.history_rows(3010)
    assert total - emulator.lines >= 3000
    numbers = [int(r.text.split()[-1]) for r in rows if r.text]
    assert numbers == list(range(9000 - 3009, 9000))


def test_alternate_screen_never_enters_scrollback() -> None:
    emulator = screen(20, 4, b"".join(b"primary %d\r\n" % i for i in range(10)))
    before, before_total = emulator.history_rows(100)
    emulator.feed(b"\x1b[?1049h" + b"".join(b"alt %d\r\n" % i for i in range(50)))
    assert emulator.modes.alt_screen
    alt_rows, alt_total = emulator.history_rows(100)
    assert alt_total == 4
    assert texts(alt_rows)[:3] == ["alt 47", "alt 48", "alt 49"]
    emulator.feed(b"\x1b[?1049l")
    after, after_total = emulator.history_rows(100)
    assert not emulator.modes.alt_screen
    assert after_total == before_total
    assert texts(after) == texts(before)
    assert not any(r.text.startswith("alt") for r in after)


def test_resize_changes_the_visible_row_count_and_reflows() -> None:
    emulator = screen(10, 4, b"0123456789abcdef\r\n")
    emulator.resize(20, 6)
    assert (emulator.columns, emulator.lines) == (20, 6)
    rows = emulator.visible_rows()
    assert len(rows) == 6
    assert rows[0].text == "0123456789abcdef"


def test_compress_keeps_rows_readable() -> None:
    emulator = GhosttyEmulator(80, 24)
    emulator.feed(b"".join(b"\x1b[32mline %d\x1b[0m\r\n" % i for i in range(20000)))
    before = emulator.history_rows(10000)
    steps = 0
    while emulator.compress():
        steps += 1
        assert steps < 10000
    assert emulator.compress() is False  # nothing new since the completed pass
    assert emulator.history_rows(10000) == before


# --- replies -----------------------------------------------------------------------------------


def test_cursor_position_report_is_answered_and_cleared() -> None:
    emulator = screen(data=b"\x1b[3;5H\x1b[6n")
    assert emulator.take_replies() == b"\x1b[3;5R"
    assert emulator.take_replies() == b""


def test_status_device_attributes_and_size_queries_are_answered() -> None:
    emulator = screen(30, 7, b"\x1b[5n\x1b[c\x1b[>c\x1b[18t")
    replies = emulator.take_replies()
    assert replies.startswith(b"\x1b[0n\x1b[?")
    assert b"\x1b[>" in replies
    assert replies.endswith(b"\x1b[8;7;30t")


def test_background_colour_query_is_answered_with_a_dark_background() -> None:
    emulator = screen(data=b"\x1b]11;?\x1b\\")
    assert emulator.take_replies() == b"\x1b]11;rgb:0000/0000/0000\x1b\\"


def test_kitty_graphics_are_not_stored_or_acknowledged() -> None:
    emulator = screen(data=b"\x1b_Gi=31,s=1,v=1,a=q,t=d,f=24;AAAA\x1b\\\x1b[c")
    replies = emulator.take_replies()
    assert b"\x1b_G" not in replies and replies.startswith(b"\x1b[?")
    assert texts(emulator.visible_rows())[0] == ""


# --- modes -------------------------------------------------------------------------------------


def test_bracketed_paste_mode_flag() -> None:
    emulator = screen()
    assert not emulator.modes.bracketed_paste
    emulator.feed(b"\x1b[?2004h")
    assert emulator.modes.bracketed_paste
    emulator.feed(b"\x1b[?2004l")
    assert not emulator.modes.bracketed_paste


def test_kitty_keyboard_flags_push_set_pop_and_query() -> None:
    emulator = screen(data=b"\x1b[>5u")
    assert emulator.modes.kitty_flags == 5
    emulator.feed(b"\x1b[?u")
    assert emulator.take_replies() == b"\x1b[?5u"
    emulator.feed(b"\x1b[=3;1u")
    assert emulator.modes.kitty_flags == 3
    emulator.feed(b"\x1b[<u")
    assert emulator.modes.kitty_flags == 0
    emulator.feed(b"\x1b[?u")
    assert emulator.take_replies() == b"\x1b[?0u"


def test_input_modes_follow_the_program() -> None:
    emulator = screen(data=b"\x1b[?1h\x1b=\x1b[?1004h\x1b[?1002h\x1b[?1006h")
    modes = emulator.modes
    assert (modes.app_cursor, modes.app_keypad, modes.focus_reporting) == (True, True, True)
    assert (modes.mouse_tracking, modes.mouse_sgr) == (1002, True)
    emulator.feed(b"\x1b[?1l\x1b>\x1b[?1004l\x1b[?1002l\x1b[?1006l")
    assert (modes.app_cursor, modes.app_keypad, modes.focus_reporting) == (False, False, False)
    assert (modes.mouse_tracking, modes.mouse_sgr) == (0, False)


# --- OSC signals -------------------------------------------------------------------------------


def test_title_signals_and_attribute() -> None:
    emulator = screen(data=b"\x1b]0;\xe2\xa0\x8b working\x07\x1b]2;second\x1b\\\x1b]2;second\x07")
    assert announced(emulator.take_signals()) == [
        ("title", "⠋ working", None),
        ("title", "second", None),  # repeating the same title is no new signal
    ]
    assert emulator.title == "second"
    emulator.feed(b"\x1b]0;\x07")
    assert emulator.title == ""
    emulator.feed(b"\x1b]2;" + b"x" * 300 + b"\x07")
    assert emulator.title == "x" * 256


def test_cwd_signal_decodes_the_file_url() -> None:
    emulator = screen(data=b"\x1b]7;file://host/home/me/my%20dir\x07")
    assert announced(emulator.take_signals()) == [("cwd", "/home/me/my dir", None)]
    assert emulator.cwd == "/home/me/my dir"


def test_progress_signals_and_raw_payload() -> None:
    emulator = screen(data=b"\x1b]9;4;1;42\x07\x1b]9;4;3\x07")
    signals = emulator.take_signals()
    assert [(s.kind, s.value, s.raw) for s in signals] == [
        ("progress", "1;42", "4;1;42"),
        ("progress", "3;", "4;3"),
    ]
    assert emulator.progress == "4;3"
    emulator.feed(b"\x1b]9;4;0;\x07")
    assert emulator.take_signals()[0].value == "0;"
    assert emulator.progress == "4;0;"


def test_notification_signals_osc_9_777_and_99() -> None:
    body = base64.b64encode("héllo".encode()).decode().encode()
    emulator = screen(data=(
        b"\x1b]9;Build finished\x07"
        b"\x1b]9;1;100\x07"  # ConEmu sleep command: not a notification
        b"\x1b]777;notify;Claude;Needs input\x07"
        b"\x1b]99;i=7:d=0;Kitty\x1b\\\x1b]99;i=7:d=0; title\x1b\\"
        b"\x1b]99;i=7:p=body:e=1;" + body + b"\x1b\\"
    ))
    assert announced(emulator.take_signals()) == [
        ("notification", "Build finished", None),
        ("notification", "Needs input", "Claude"),
        ("notification", "héllo", "Kitty title"),
    ]


def test_sequences_split_across_feeds() -> None:
    data = ("\x1b]0;split title\x1b\\\x1b[31mré\x1b[0md ✓\x1b]9;4;1;5\x07\x1b[6n"
            "\x1b[?2004h\x1b]777;notify;T;B\x07").encode()
    emulator = GhosttyEmulator(20, 3)
    for byte in data:
        emulator.feed(bytes([byte]))
    assert emulator.visible_rows()[0].text == "réd ✓"
    assert [s.kind for s in emulator.take_signals()] == ["title", "progress", "notification"]
    assert emulator.title == "split title"
    assert emulator.take_replies() == b"\x1b[1;6R"
    assert emulator.modes.bracketed_paste


def test_cancelled_and_oversized_osc_are_dropped() -> None:
    emulator = screen(data=b"\x1b]0;cancelled\x18\x1b]0;" + b"y" * 9000 + b"\x07\x1b]0;kept\x07")
    assert announced(emulator.take_signals()) == [("title", "kept", None)]


def test_escape_ends_an_osc_like_libghostty() -> None:
    capture = OscCapture()
    capture.feed(b"\x1b]2;ended by esc\x1b[0m\x1b]2;next\x1b")
    capture.feed(b"\\")
    assert [s.value for s in capture.take_signals()] == ["ended by esc", "next"]


FRAGMENTS = [
    b"plain text ",
    b"\r\n",
    b"\x1b[1;32mgreen\x1b[0m",
    "⚠️ Do you want to proceed? ".encode(),
    "中文 ✓ ".encode(),
    b"\x1b]0;title \xe2\xa0\x8b\x07",
    b"\x1b]2;other\x1b\\",
    b"\x1b]7;file:///tmp/x\x07",
    b"\x1b]9;4;1;50\x1b\\",
    b"\x1b]9;done\x07",
    b"\x1b]777;notify;a;b\x07",
    b"\x1b]99;i=1:d=0;t\x1b\\\x1b]99;i=1:p=body;b\x1b\\",
    b"\x1b[6n",
    b"\x1b[?2004h",
    b"\x1b[>1u",
    b"\x1b[2;3H",
    # What the output filter rewrites or holds: zero counts, IL/DL, joiners and flags.
    b"\x1b[0P",
    b"\x1b[12;3H\x1b[2M",
    b"ab\x1b[3L",
    "\U0001f468\u200d\U0001f469".encode(),
    "a\u200d\x1b[31mb\x1b[m".encode(),
    "\U0001f1ef\U0001f1f5".encode(),
]


@settings(max_examples=150, deadline=None)
@given(
    parts=st.lists(st.sampled_from(FRAGMENTS), min_size=1, max_size=25),
    cuts=st.lists(st.integers(min_value=0, max_value=2000), max_size=12),
)
def test_any_split_of_the_stream_gives_the_same_result(parts: list[bytes],
                                                       cuts: list[int]) -> None:
    data = b"".join(parts)
    whole = screen(30, 6, data)
    split = GhosttyEmulator(30, 6)
    bounds = sorted({0, len(data), *(c % (len(data) + 1) for c in cuts)})
    for start, end in itertools.pairwise(bounds):
        split.feed(data[start:end])
    assert split.visible_rows() == whole.visible_rows()
    assert split.take_signals() == whole.take_signals()
    assert split.take_replies() == whole.take_replies()
    assert split.modes == whole.modes
    assert split.cursor() == whole.cursor()
    assert (split.title, split.cwd, split.progress) == (whole.title, whole.cwd, whole.progress)
