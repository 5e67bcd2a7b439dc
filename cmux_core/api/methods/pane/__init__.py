"""The ``pane.*`` methods, with the ``pane.graphics.*`` and ``attach.*`` sub-families.

``lifecycle`` makes, lists, focuses and closes panes; ``io`` talks to a pane's terminal;
``arrangement`` moves and sizes panes in their tab; ``reports`` takes what agents' hooks
report; ``graphics`` holds image layers; ``attach`` streams a pane to a client terminal.
"""

from __future__ import annotations

from cmux_core.api.methods.pane import arrangement, attach, graphics, io, lifecycle, reports

__all__ = ["arrangement", "attach", "graphics", "io", "lifecycle", "reports"]
