"""Params models that several families' methods take as they are."""

from __future__ import annotations

from cmux_core.hookspecs import Params


# No docstring: a model's docstring would become its schema's description.
class Empty(Params):
    pass
