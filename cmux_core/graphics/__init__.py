"""Pane graphics: image layers over panes, their budgets, streams and plugin sources.

:mod:`~cmux_core.graphics.layers` keeps every pane's layers (by ``layer_id``) and enforces
the limits; :mod:`~cmux_core.graphics.sources` pulls frames from plugins' graphics sources
into layers; :mod:`~cmux_core.graphics.leases` holds frames leased from files in the
server's frame directory; :mod:`~cmux_core.graphics.program` turns the kitty graphics
commands a program writes in a pane (found by :mod:`~cmux_core.graphics.kitty_apc`) into
layers of that pane. Nothing here draws: attached clients watch the book for changes
and draw the layers themselves.
"""
