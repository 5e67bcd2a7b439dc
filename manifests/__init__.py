"""The bundled agent-detection manifests, installed as the package ``cmux_core._manifests``.

This directory is package data (see ``[tool.setuptools]`` in pyproject.toml); only the
``*.toml`` files and ``fixtures/`` beside this file are read.
"""
