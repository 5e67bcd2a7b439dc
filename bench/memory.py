"""(n) memory: the server's resident set with 11 idle panes, against tmux's.

Each run starts a fresh server, opens 10 tabs running ``cat`` beside the default shell,
and reads the server's steady RSS (``VmRSS``, within 1 % for a second); cmux and tmux
runs alternate. This is what a user pays for a server that sits there with a few
terminals open: mostly the interpreter and the modules it imported at start-up.
"""

from __future__ import annotations

from .cmux import CmuxSide
from .context import Context
from .paired import Runs, paired_row
from .proc import rss_bytes, steady_rss
from .report import Row
from .tmux import Tmux

IDLE_PANES = 11
"""The default pane plus 10 more, each idle."""
IDLE_ARGV = ["cat"]
MIB = 1 << 20


def memory_cmux(side: CmuxSide, panes: int = IDLE_PANES) -> int:
    """Steady server RSS in bytes once ``side`` has ``panes`` idle panes."""
    for _ in range(panes - 1):
        side.new_pane(IDLE_ARGV)
    return steady_rss(side.pid)


def memory_tmux(tmux: Tmux, panes: int = IDLE_PANES) -> int:
    tmux.new_session("main", ["sh"])
    for _ in range(panes - 1):
        tmux.new_window("main", IDLE_ARGV)
    return steady_rss(tmux.server_pid())


def case_memory(ctx: Context) -> list[Row]:
    cmux, tmux = Runs(), Runs()
    peak: list[int] = []
    for _ in range(ctx.repeat):
        with ctx.cmux() as side:
            cmux.add(memory_cmux(side) / MIB)
            peak.append(_peak_rss(side.pid))
            ctx.backends.add(side.backend)
        with ctx.tmux() as server:
            tmux.add(memory_tmux(server) / MIB)
    return [paired_row("memory_idle_rss_mib", f"server RSS, {IDLE_PANES} idle panes (MiB)",
                       cmux, tmux, "lower",
                       f"steady VmRSS of a fresh server with the default shell and "
                       f"{IDLE_PANES - 1} cat tabs; goal <= 30 MiB",
                       detail={"cmux_peak_rss_mib": [p / MIB for p in peak]})]


def _peak_rss(pid: int) -> int:
    """``VmHWM``: the highest RSS since the process started (start-up included)."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return rss_bytes(pid)
