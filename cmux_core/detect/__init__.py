"""Agent detection: manifests that describe an agent's screens, and the engine that
classifies a screen into ``idle``/``working``/``blocked``/``unknown`` with them.

:mod:`.manifest` parses and validates the manifest TOML format (the herdr format at
engine version 3 plus ``process_names``); :mod:`.regions` cuts a screen into the text
slices rules look at; :mod:`.engine` runs a manifest's rules over one screen and
explains the result.
"""

from __future__ import annotations
