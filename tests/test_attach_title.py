"""``cmux attach`` gives the outer terminal its title back: it pushes the terminal's title
on the title stack (``CSI 22;0t``) before it shows the pane, sets the pane's title while
attached, and pops it (``CSI 23;0t``) on the way out, after every title it set.

The client runs on a pseudo-terminal this test holds the other end of (``pty_terminal``),
so every byte it writes to its terminal is recorded in order (no outer terminal or tmux is
involved).
"""

from __future__ import annotations

from pty_terminal import Terminal

from cmux_core.testing import ServerProcess, wait_until

PUSH = b"\x1b[22;0t"
POP = b"\x1b[23;0t"


def set_title(server: ServerProcess, title: str) -> None:
    server.call("pane.send_text", {"pane_id": "w1:p1",
                                   "text": f"printf '\\033]2;%s\\007' {title}\r"})


def pane_title(server: ServerProcess) -> str:
    return str(server.call("pane.surfaces", {"pane_id": "w1:p1"})["surfaces"][0]["title"])


def test_attach_pushes_the_title_and_pops_it_after_the_last_one_it_set(
        server: ServerProcess) -> None:
    set_title(server, "first-pane-title")
    wait_until(lambda: pane_title(server) == "first-pane-title", 30, message="pane title")
    # A terminal without kitty graphics, of 24 by 80 cells and no pixel size.
    term = Terminal(server, "attach", "w1:p1", kitty=False, size=(24, 80), cell=(0, 0))
    try:
        term.until(lambda: b"\x1b]2;first-pane-title\x07" in term.out)
        set_title(server, "second-pane-title")
        term.until(lambda: b"\x1b]2;second-pane-title\x07" in term.out)
        term.type(b"\x1c")  # ctrl+\ detaches
        assert term.exited(30) == 0
        term.until(lambda: b"[detached]" in term.out, 10)
    finally:
        term.close()
    out = term.out
    assert out.count(PUSH) == 1 and out.count(POP) == 1
    first_title = out.index(b"\x1b]2;")
    last_title = out.rindex(b"\x1b]2;")
    # Saved before the pane's title is shown, given back after the last one it set.
    assert out.index(PUSH) < first_title
    assert out.index(POP) > last_title
    # Back on the main screen when the title is given back.
    assert out.rindex(b"\x1b[?1049l") < out.index(POP)
