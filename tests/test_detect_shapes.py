# ruff: noqa: RUF001  (agent screens are made of these look-alike glyphs)
"""Dialog shapes, and every ``blocked`` case of every bundled manifest under the mechanical
changes a new release of its agent might bring.

Each variant is made from the case's screen text: the selection cursor drawn with another
glyph, the options renumbered or unnumbered, the option text reworded, the box borders
drawn in another style, the horizontal rules at widths from 60 to 200 columns, the parts
of a key-hint footer in another order. The agent's own manifest must still read each one
``blocked``: a rule that holds on one variant only fails here. Pure classification, no
server.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from functools import cache

import pytest

from cmux_core.cli.manifests import Case, cases_for, manifest_paths
from cmux_core.detect.engine import ScreenInput, classify
from cmux_core.detect.manifest import (
    Manifest,
    ManifestError,
    bundled_manifests_dir,
    load_manifest,
    parse_manifest,
)
from cmux_core.detect.shapes import choice_dialog, find_dialog, input_dialog, notice

CURSOR = re.compile(r"^(?P<lead>[\s│┃|]*)(?P<glyph>[❯›>▸▶])(?P<gap>\s+)(?P<rest>\S.*)$")
NUMBER = re.compile(
    r"^(?P<lead>[\s│┃|]*(?:[❯›>▸▶]\s+)?)(?P<n>\d{1,2})\.(?P<gap>\s+)(?P<label>\S.*)$")
HINT_SPLIT = re.compile(r"\s+(·|\|)\s+")
BORDERS = [str.maketrans("│╭╮╰╯─", "┃┏┓┗┛━"), str.maketrans("│╭╮╰╯", "|++++"),
           str.maketrans("│╭╮╰╯", "║╔╗╚╝")]
REWORDS = {"yes": "sure", "no": "nope", "allow": "permit", "proceed": "go on", "trust": "rely on",
           "approve": "okay", "deny": "refuse", "always": "every time", "once": "this time",
           "don't": "do not", "folder": "directory", "continue": "carry on"}


def cursor_glyph(glyph: str) -> Callable[[list[str]], list[str]]:
    def change(lines: list[str]) -> list[str]:
        return [CURSOR.sub(lambda m: f"{m['lead']}{glyph}{m['gap']}{m['rest']}", line)
                for line in lines]
    return change


def renumbered(lines: list[str]) -> list[str]:
    return [NUMBER.sub(lambda m: f"{m['lead']}{m['n']}){m['gap']}{m['label']}", line)
            for line in lines]


def unnumbered(lines: list[str]) -> list[str]:
    return [NUMBER.sub(lambda m: f"{m['lead']}{m['label']}", line) for line in lines]


def reworded(lines: list[str]) -> list[str]:
    """Option labels (the lines after a cursor or a number) with their words replaced."""
    def swap(text: str) -> str:
        return re.sub(r"[A-Za-z']+", lambda w: REWORDS.get(w[0].lower(), w[0]), text)
    out = []
    for line in lines:
        m = NUMBER.match(line) or CURSOR.match(line)
        out.append(line[:m.start(m.lastgroup or 0)] + swap(line[m.start(m.lastgroup or 0):])
                   if m else line)
    return out


HINT_WORDS = [(r"(?i)\bto go back\b", "to cancel"), (r"(?i)\bto cancel\b", "to go back"),
              (r"(?i)\bpress enter to\b", "Enter to"), (r"(?i)\bto confirm\b", "to select"),
              (r"(?i)\bto select\b", "to choose"), (r"(?i)\bto submit\b", "to send")]


def hints_reworded(lines: list[str]) -> list[str]:
    """Key hints in other words: go back for cancel and back, select for confirm, ..."""
    out = []
    for line in lines:
        if re.search(r"(?i)\b(?:esc|enter)\b", line) and not CURSOR.match(line):
            for pattern, words in HINT_WORDS:
                changed = re.sub(pattern, words, line)
                if changed != line:
                    line = changed
                    break
        out.append(line)
    return out


def bordered(table: dict[int, int]) -> Callable[[list[str]], list[str]]:
    return lambda lines: [line.translate(table) for line in lines]


def ruled(width: int) -> Callable[[list[str]], list[str]]:
    def change(lines: list[str]) -> list[str]:
        return [("─" * width) if line.strip() and set(line.strip()) == {"─"} else line
                for line in lines]
    return change


def footer_reversed(lines: list[str]) -> list[str]:
    out = []
    for line in lines:
        parts = HINT_SPLIT.split(line.strip())
        if len(parts) >= 3 and re.search(r"(?i)\besc\b|\benter\b", line):
            words = parts[::2][::-1]
            indent = line[:len(line) - len(line.lstrip())]
            line = indent + f" {parts[1]} ".join(words)
        out.append(line)
    return out


VARIANTS: dict[str, Callable[[list[str]], list[str]]] = {
    **{f"cursor {g}": cursor_glyph(g) for g in "❯›>▸"},
    "renumbered": renumbered, "unnumbered": unnumbered, "reworded": reworded,
    **{f"borders {i}": bordered(t) for i, t in enumerate(BORDERS)},
    **{f"width {w}": ruled(w) for w in (60, 120, 200)},
    "footer reversed": footer_reversed, "hints reworded": hints_reworded,
}


@cache
def bundled() -> list[tuple[Manifest, list[Case]]]:
    return [(load_manifest(path), cases_for(path) or [])
            for path in manifest_paths([bundled_manifests_dir()])]


def blocked_cases() -> Iterator[tuple[str, str]]:
    for manifest, cases in bundled():
        for case in cases:
            if case.state == "blocked":
                yield manifest.id, case.name


@pytest.mark.parametrize(("agent", "name"), list(blocked_cases()),
                         ids=lambda v: str(v)[:60])
def test_blocked_case_survives_mechanical_variations(agent: str, name: str) -> None:
    manifest, cases = next((m, c) for m, c in bundled() if m.id == agent)
    case = next(c for c in cases if c.name == name)
    lines = case.screen.split("\n")
    missed = []
    for variant, change in VARIANTS.items():
        screen = "\n".join(change(lines))
        if screen == case.screen:
            continue
        result = classify(manifest, ScreenInput(screen, case.title, case.progress))
        if result.state != "blocked":
            missed.append(f"{variant}: {result.state} ({result.matched_rule})")
    assert not missed, "\n".join(missed) + "\n" + case.screen


def test_variations_change_the_screens() -> None:
    """The generators really rewrite dialogs (a test of the test)."""
    lines = ["─" * 80, " Trust this folder?", "", " ▶ 1. Yes, continue", "   2. No, exit", "",
             " Enter to confirm · Esc to cancel", "│ boxed │"]
    for variant, change in VARIANTS.items():
        assert change(lines) != lines, variant
    assert footer_reversed(lines)[-2] == " Esc to cancel · Enter to confirm"
    assert unnumbered(lines)[3:5] == [" ▶ Yes, continue", "   No, exit"]


DIALOG = """\
────────────────────────────────────────
 Accessing workspace:

 /home/user/project

 ❯ No, exit
   Yes, I trust this folder

 Enter to confirm · Esc to cancel
"""


def test_choice_dialog_heading_and_what_is_not_one() -> None:
    found = choice_dialog(DIALOG.splitlines())
    assert found is not None and found.heading == "Accessing workspace:"
    prompt = ["> respond slowly please", "", "✦ word0 word1", "",
              "⠙ Thinking... (4s · esc to cancel)", "─" * 40, "> ", "─" * 40]
    assert find_dialog(prompt) is None, "a past prompt above a working status is no dialog"
    assert choice_dialog(["❯ 1. Yes", "  2. No"]) is None, "no hint: a list, not a dialog"
    assert choice_dialog(["❯ only option", "", "Enter to confirm · Esc to cancel"]) is None


def test_input_dialog_and_notice() -> None:
    box = ["Paste your API key:", "╭" + "─" * 30 + "╮", "│ sk-…                         │",
           "╰" + "─" * 30 + "╯", "Press Enter to submit · Esc to cancel"]
    assert input_dialog(box) is not None
    prompt_box = ["╭" + "─" * 30 + "╮", "│ > Type your message          │",
                  "╰" + "─" * 30 + "╯", "? for shortcuts"]
    assert input_dialog(prompt_box) is None, "the agent's own prompt box is no dialog"
    labelled = ["╭API key" + "─" * 30 + "╮", "│Paste or type your API key      │",
                "╰" + "─" * 37 + "╯", "  Press enter to save", "  Press esc to go back"]
    found = input_dialog(labelled)
    assert found is not None and found.heading == "Paste or type your API key"
    assert notice(["Security notes:", "", " Press Enter to continue"]) is not None
    assert notice(["$ touch approved.txt", "Run shell command? (Y)es/(N)o [Yes]:"]) is not None
    assert notice(["Would you like to log in? [(y)es, (n)o]:", "> later"]) is None, \
        "a yes/no question counts while it is the last line"


def test_an_input_box_inside_a_dialog_box_and_a_command_awaiting_input() -> None:
    """Gemini CLI 0.61.0 draws its key field as a box inside the dialog's box, Claude Code
    2.1.332 its sign-in code field under a label with only 'Esc to go back' below; a shell
    command reading from the terminal is a status line, while the title says working."""
    inner = "─" * 40
    nested = ["╭" + "─" * 44 + "╮", "│ Enter the service key" + " " * 22 + "│",
              f"│ ╭{inner}╮ │", "│ │ Paste the key here" + " " * 21 + "│ │", f"│ ╰{inner}╯ │",
              "│ (Press Enter to submit, Esc to cancel)" + " " * 5 + "│", "╰" + "─" * 44 + "╯"]
    found = input_dialog(nested)
    assert found is not None and found.heading == "Enter the service key"
    waiting = ["╭" + "─" * 30 + "╮", "│ Project name:" + " " * 16 + "│", "╰" + "─" * 30 + "╯",
               "", " ! Shell awaiting input (Tab to focus)          ? for shortcuts",
               "─" * 40, " >   Type your message"]
    labelled = [" Paste code here if prompted", " ╭" + "─" * 40 + "╮", " │" + " " * 40 + "│",
                " ╰" + "─" * 40 + "╯", "", " Esc to go back"]
    found = input_dialog(labelled)
    assert found is not None and found.heading == "Paste code here if prompted"
    assert input_dialog(["⏺ Done.", *labelled[1:4], "", " ? for shortcuts"]) is None, \
        "a prompt box whose hints do not go back is the agent's own"
    found = notice(waiting)
    assert found is not None and found.heading.startswith("! Shell awaiting input")
    assert notice(["The script is waiting for input from the user, so I stopped it."]) is None
    for manifest, _ in bundled():
        if manifest.id == "gemini":
            result = classify(manifest, ScreenInput("\n".join(waiting) + "\n",
                                                    "✦  Working… (work)"))
            assert (result.state, result.matched_rule) == ("blocked", "dialog_shape")


def test_an_unboxed_field_line_under_its_label_with_a_back_hint() -> None:
    """Claude Code 2.1.337 draws its sign-in code field as a bare '>' line under its label,
    where 2.1.332 drew a box; 'Esc to go back' alone below it still makes it a dialog."""
    for field in (" >", " > 4f9c-code", " ❯", " › typed"):
        found = input_dialog([" Hold Shift while selecting to copy", "",
                              " Paste code here if prompted", field, "", " Esc to go back"])
        assert found is not None and found.heading == "Paste code here if prompted", field
    assert input_dialog([" Paste code here if prompted", " >", "", " ? for shortcuts"]) is None, \
        "a field line whose hints do not go back is a prompt"
    assert input_dialog(["⏺ Done.", " >", "", " Esc to go back"]) is None, \
        "a transcript line is no label"
    assert input_dialog([" > earlier prompt", " >", "", " Esc to cancel"]) is None, \
        "a prompt line is no label"


@pytest.mark.parametrize("hint", ["Press Enter to continue", "Enter to continue",
                                  "↵ to dismiss", "Hit the return key to proceed",
                                  "Usage limit has reset · Press enter to continue"])
def test_every_manifest_reads_a_notice_over_a_pending_tool_call_as_blocked(hint: str) -> None:
    """A notice waiting for Enter drawn over a tool call still running, whatever its words
    and whatever the title says: nothing goes on until a person presses the key."""
    screen = "\n".join(["⏺ Bash(touch approved.txt)", "  ⎿  Running…", "",
                        " The settings file changed on disk.", "", f" {hint}"]) + "\n"
    wrong = {(m.id, title): classify(m, ScreenInput(screen, title)).state
             for m, _ in bundled() for title in ("", "⠋ fix the tests")}
    assert {key: state for key, state in wrong.items() if state != "blocked"} == {}
    assert notice(["Enter to send · Esc to cancel"]) is None, "a prompt box's hint waits on none"


def test_every_manifest_reads_a_question_form_with_an_interrupt_footer_as_blocked() -> None:
    form = ["  Question 1/1 (1 unanswered)", "  Which database?", "",
            "  › 1. PostgreSQL         A server", "    2. SQLite             A file", "",
            "  tab to add notes | enter to submit answer | esc to interrupt"]
    screen = "\n".join(form) + "\n"
    wrong = {m.id: classify(m, ScreenInput(screen)).state for m, _ in bundled()}
    assert {agent: state for agent, state in wrong.items() if state != "blocked"} == {}


def test_shape_matcher_is_checked_and_explained() -> None:
    manifest = parse_manifest('id = "x"\n[[rules]]\nid = "d"\nstate = "blocked"\n'
                              'shape = ["choice_dialog"]\n')
    assert classify(manifest, ScreenInput(DIALOG)).state == "blocked"
    with pytest.raises(ManifestError, match="shape names"):
        parse_manifest('id = "x"\n[[rules]]\nid = "d"\nshape = ["circle"]\n')


def test_title_spinners_of_every_glyph_family_read_alike() -> None:
    """Claude Code 2.1.332 spins half discs in its title where 2.1.197 spun braille."""
    for manifest, _ in bundled():
        braille = classify(manifest, ScreenInput("", "⠋ fix the tests")).state
        for glyph in "◐◑◒◓◴◵◶◷◜◝◞◟":
            state = classify(manifest, ScreenInput("", f"{glyph} fix the tests")).state
            assert state == braille, (manifest.id, glyph)
