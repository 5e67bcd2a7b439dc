"""``cmux plugin list|enable|disable|link|unlink|install|upgrade|uninstall|new``.

``list``, ``enable``, ``disable``, ``link`` and ``unlink`` call the running server's
``plugin.*`` methods; ``install``, ``upgrade`` and ``uninstall`` change this environment's
distributions and then ask a running server to follow (:mod:`cmux_core.cli.plugin_install`);
``new`` writes a plugin distribution skeleton to disk and needs no server.
"""

from __future__ import annotations

import argparse
import re
import textwrap
from pathlib import Path
from typing import Any

from cmux_core.cli.common import AddCommon, add_subcommand, add_subcommand_group, client, print_json
from cmux_core.cli.plugin_install import cmd_install, cmd_outdated, cmd_uninstall
from cmux_core.errors import CmuxError, InvalidParams
from cmux_core.version import __version__

_NAME_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_-]{0,63}$")


def add_plugin_commands(subparsers: Any, add_common: AddCommon) -> None:
    """Add the ``plugin`` command group to the ``cmux`` parser's subparsers."""
    sub = add_subcommand_group(subparsers, "plugin", add_common,
                               help="install, list, enable, link and scaffold plugins",
                               description="Install, list, enable, disable, link and "
                               "scaffold plugins.")

    p = add_subcommand(sub, "list", add_common, cmd_list,
                       help="every plugin: status, version, source, hooks, errors")
    p.add_argument("plugin_id", nargs="?", metavar="PLUGIN", help="show only this plugin")
    p.add_argument("--outdated", action="store_true", help="instead: the installed plugin "
                   "distributions with a newer release (asks the package index)")

    for action, text in (("install", "install a plugin distribution into this environment "
                          "and load it into the running server"),
                         ("upgrade", "upgrade a plugin distribution and reload it")):
        p = add_subcommand(sub, action, add_common, cmd_install, help=text,
                           description=text[:1].upper() + text[1:] +
                           ". Refused when it needs another cmux-core than this one.")
        p.add_argument("target", metavar="NAME|PATH|URL", help="a distribution name, a "
                       "project directory, a wheel file or a URL")

    p = add_subcommand(sub, "uninstall", add_common, cmd_uninstall,
                       help="uninstall a plugin distribution and unload it")
    p.add_argument("name", metavar="NAME", help="the distribution's name (pip's)")

    for action, text in (("enable", "load a plugin and keep it enabled"),
                         ("disable", "unload a plugin and keep it disabled")):
        p = add_subcommand(sub, action, add_common, cmd_set_enabled, help=text)
        p.add_argument("plugin_id", metavar="PLUGIN", help="the plugin's id (cmux plugin list)")
        p.set_defaults(action=action)

    p = add_subcommand(sub, "link", add_common, cmd_link,
                       help="load a plugin directory or .py file now and on restart")
    p.add_argument("path", help="a plugin distribution directory, a .py file or a "
                   "directory of .py files")
    p.add_argument("--disabled", action="store_true", help="link without enabling")

    p = add_subcommand(sub, "unlink", add_common, cmd_unlink, help="forget a linked plugin")
    p.add_argument("plugin_id", metavar="PLUGIN", help="the linked plugin's id")

    p = add_subcommand(sub, "new", add_common, cmd_new,
                       help="scaffold a distributable plugin in ./NAME")
    p.add_argument("name", help="distribution and plugin id, e.g. cmux-hello")
    p.add_argument("--dir", default=".", help="parent directory (default: current)")


def _call(args: argparse.Namespace, method: str, params: dict[str, Any]) -> dict[str, Any]:
    with client(args, timeout=None) as c:
        return c.call(method, params)


def _emit(args: argparse.Namespace, result: dict[str, Any], human: list[str]) -> int:
    if args.json:
        print_json(result)
    else:
        for line in human:
            print(line)
    return 0


def describe(plugin: dict[str, Any]) -> list[str]:
    """Human lines for one ``plugin.list`` entry."""
    version = f" {plugin['version']}" if plugin.get("version") else ""
    lines = [f"{plugin['plugin_id']}{version}  [{plugin['status']}]"
             f"{'' if plugin.get('enabled') else ' (disabled)'}  {plugin['source']['origin']}"]
    hooks = ", ".join(plugin.get("hooks") or []) or "-"
    lines.append(f"    hooks: {hooks}")
    if plugin.get("isolation") == "process":
        running = f"pid {plugin['pid']}" if plugin.get("pid") else "none running"
        lines.append(f"    runs in a process of its own ({running})")
    regs = {k: v for k, v in (plugin.get("registrations") or {}).items() if v}
    for kind, names in regs.items():
        lines.append(f"    {kind}: {', '.join(names)}")
    if plugin.get("error"):
        lines.append(f"    error: {plugin['error']}")
    for fault in (plugin.get("errors") or [])[-3:]:
        lines.append(f"    recent error in {fault['hook']}: {fault['message']}")
    for warning in (plugin.get("warnings") or [])[-3:]:
        lines.append(f"    warning: {warning}")
    return lines


def cmd_list(args: argparse.Namespace) -> int:
    if args.outdated:
        return cmd_outdated(args)
    result = _call(args, "plugin.list", {"plugin_id": args.plugin_id} if args.plugin_id else {})
    plugins = result.get("plugins") or []
    lines = [line for plugin in plugins for line in describe(plugin)] or ["no plugins"]
    return _emit(args, result, lines)


def cmd_set_enabled(args: argparse.Namespace) -> int:
    result = _call(args, f"plugin.{args.action}", {"plugin_id": args.plugin_id})
    return _emit(args, result, describe(result["plugin"]))


def cmd_link(args: argparse.Namespace) -> int:
    path = str(Path(args.path).expanduser().resolve())
    result = _call(args, "plugin.link", {"path": path, "enabled": not args.disabled})
    lines = [line for plugin in result.get("plugins") or [] for line in describe(plugin)]
    return _emit(args, result, lines)


def cmd_unlink(args: argparse.Namespace) -> int:
    result = _call(args, "plugin.unlink", {"plugin_id": args.plugin_id})
    removed = result.get("plugin_ids") or []
    return _emit(args, result, [f"unlinked {', '.join(removed)}" if removed
                                else f"{args.plugin_id} is not linked"])


def cmd_new(args: argparse.Namespace) -> int:
    root = scaffold(args.name, Path(args.dir))
    return _emit(args, {"type": "plugin_scaffold", "path": str(root)}, [
        f"created {root}",
        f"next: cmux plugin install {root}   (while developing: cmux plugin link {root})",
    ])


def scaffold(name: str, parent: Path) -> Path:
    """Write a plugin distribution ``parent/name``; returns its path.

    Raises ``invalid_params`` for a bad name and ``plugin_scaffold_exists`` when the
    directory already exists (nothing is overwritten).
    """
    if not _NAME_RE.match(name):
        raise InvalidParams("name", "use 1-64 of A-Z a-z 0-9 _ - starting with a letter")
    module = name.replace("-", "_").lower()
    root = parent.expanduser().resolve() / name
    if root.exists():
        raise CmuxError("plugin_scaffold_exists", f"{root} already exists")
    files = {
        "pyproject.toml": _PYPROJECT, "README.md": _README, ".gitignore": _GITIGNORE,
        ".github/workflows/test.yml": _WORKFLOW, f"src/{module}/__init__.py": _MODULE,
        f"src/{module}/py.typed": "", f"tests/test_{module}.py": _TEST,
    }
    # The scaffold needs this cmux-core's series or a later one.
    core = ".".join(__version__.split(".")[:2])
    for rel, template in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(template).lstrip().format(name=name, module=module,
                                                                  core=core))
    return root


_PYPROJECT = '''
    [build-system]
    requires = ["setuptools>=77"]
    build-backend = "setuptools.build_meta"

    [project]
    name = "{name}"
    version = "0.1.0"
    description = "A cmux plugin"
    readme = "README.md"
    requires-python = ">=3.11"
    license = "MIT"
    # cmux plugin install refuses a plugin whose cmux-core range excludes the running one.
    dependencies = ["cmux-core>={core}"]
    classifiers = [
        "Development Status :: 3 - Alpha",
        "Operating System :: POSIX :: Linux",
        "Programming Language :: Python :: 3",
        "Programming Language :: Python :: 3.11",
        "Typing :: Typed",
    ]

    [project.optional-dependencies]
    test = ["pytest>=8"]

    # The cmux server loads every entry point in group "cmux"; the name is the plugin id.
    [project.entry-points.cmux]
    {name} = "{module}"

    [tool.setuptools.packages.find]
    where = ["src"]

    [tool.setuptools.package-data]
    {module} = ["py.typed"]

    [tool.pytest.ini_options]
    testpaths = ["tests"]
'''

_README = '''
    # {name}

    A plugin for cmux_core: it adds the socket method `plugin.{name}.hello`.

    ```sh
    cmux plugin install {name}        # from the package index, into cmux's environment
    cmux call plugin.{name}.hello '{{"name": "you"}}'
    ```

    ## Developing

    ```sh
    pip install -e '.[test]'          # a running server loads it after: cmux plugin link "$PWD"
    pytest                            # against a real server (the cmux_core.testing fixtures)
    ```

    ## Publishing

    ```sh
    python -m pip install build twine
    python -m build                   # dist/{module}-0.1.0-py3-none-any.whl and the sdist
    cmux plugin install dist/{module}-0.1.0-py3-none-any.whl   # try the wheel first
    python -m twine upload dist/*
    ```

    Hooks and what a plugin may do: cmux_core's `docs/plugins.md`.
'''

_GITIGNORE = '''
    __pycache__/
    *.egg-info/
    build/
    dist/
'''

_WORKFLOW = '''
    name: test
    on: [push, pull_request]
    jobs:
      test:
        runs-on: ubuntu-latest
        strategy:
          matrix:
            python: ["3.11", "3.12", "3.13"]
        steps:
          - uses: actions/checkout@v4
          - uses: actions/setup-python@v5
            with:
              python-version: ${{{{ matrix.python }}}}
          - run: python -m pip install -e '.[test]'
          - run: python -m pytest
          - run: python -m pip install build && python -m build
'''

_MODULE = '''
    """{name}: a cmux plugin.

    Each function marked with ``hookimpl`` implements the ``cmux_*`` hook of the same name;
    see docs/plugins.md in cmux_core for every hook and what it may do.
    """

    from __future__ import annotations

    from typing import Any

    from cmux_core.hookspecs import RegisterMethod, hookimpl

    __version__ = "0.1.0"


    @hookimpl
    def cmux_register_methods(register: RegisterMethod) -> None:
        """Add the socket method ``plugin.{name}.hello``.

        Called once when the plugin is loaded. The handler runs for each request; it is
        async, so it runs on the server loop and must not block.
        """

        async def hello(call: Any, params: dict[str, Any]) -> dict[str, Any]:
            return {{"type": "greeting", "greeting": f"hello, {{params.get('name', 'world')}}"}}

        register("hello", hello, doc="Answer with a greeting for params.name.")
'''

_TEST = '''
    """Runs against a real cmux server started by the cmux_core.testing fixtures."""

    from __future__ import annotations

    from pathlib import Path

    from cmux_core.client import Client

    ROOT = Path(__file__).resolve().parents[1]


    def test_hello(cmux_client: Client) -> None:
        # Linking loads the plugin whether or not it is installed in this environment.
        cmux_client.call("plugin.link", {{"path": str(ROOT)}})
        result = cmux_client.call("plugin.{name}.hello", {{"name": "tests"}})
        assert result == {{"type": "greeting", "greeting": "hello, tests"}}

        listed = cmux_client.call("plugin.list", {{"plugin_id": "{name}"}})["plugins"][0]
        assert listed["status"] == "loaded" and listed["errors"] == []
'''
