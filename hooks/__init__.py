"""The hook programs agents run inside cmux panes, installed as the package ``cmux_core._hooks``.

This directory is package data (see ``[tool.setuptools]`` in pyproject.toml): integration
plugins read these files through :mod:`cmux_core.plugin_host.hook_kit` and copy them into
the user's config directory; nothing here is imported by cmux itself.
"""
