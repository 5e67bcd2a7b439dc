"""Installing the running cmux on a remote machine, with no network there.

:func:`install` is the whole contract: given a :class:`Runner` (something that runs one
command on the remote, as an ``ssh`` exec channel does, feeding it bytes on stdin), it
copies wheels of the running installation (see :mod:`cmux_core.fleet.wheels` for which and
how they are made) and installs them into a private virtual environment on the remote,
:data:`REMOTE_VENV`, then checks that the installed ``cmux`` runs and reports its version.

On the remote it needs only a POSIX login shell and ``python3`` (3.11 or later) with its
``venv`` module; when ``uv`` is on the remote's ``PATH`` it makes the environment and installs
instead of ``venv`` and pip. Nothing there is downloaded: pip and uv are run with
``--no-index`` on the copied files. The pip that runs here is carried too and runs there
from its wheel, so the environment is made without ``ensurepip`` (which some systems leave
out of their python3); only when no pip runs here does the remote's ``ensurepip`` provide
one. Bytecode is not compiled at install: the first run of each module compiles it.

Wheels of compiled distributions (pydantic's core, orjson, RE2, uvloop) are this machine's,
so the remote must run the same Python implementation and version on the same kind of
machine; a remote that does not is refused before anything is copied
(``remote_incompatible``). Optional extras (the ghostty screen backend) are not carried: the
remote uses the pyte backend.

Idempotent: the environment keeps the names and SHA-256 of the wheels installed into it
(``cmux-install.json``). A second install copies and installs only the wheels that changed,
and none when nothing did; the check runs every time. Every step blocks the calling thread
(builds, copies, the remote install): call it from a thread when on an event loop.
"""

from __future__ import annotations

import io
import json
import platform
import shlex
import subprocess
import sys
import tarfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from cmux_core.config import cache_dir as default_cache_dir
from cmux_core.errors import CmuxError
from cmux_core.fleet.wheels import Wheel, installed, last_lines, running_distributions, wheel_of

REMOTE_VENV = "$HOME/.local/share/cmux/venv"
"""Where the environment goes on the remote, as a shell word (``$HOME`` is the remote's)."""
STAMP = "cmux-install.json"
MIN_PYTHON = (3, 11)


@dataclass(frozen=True, slots=True)
class RemoteResult:
    """What one remote command ended with."""

    returncode: int
    stdout: bytes
    stderr: bytes


class Runner(Protocol):
    """Runs ``command`` (a POSIX shell command line) on the remote with ``stdin`` as its
    standard input, and returns once it has exited. It raises (a :class:`CmuxError`) only
    when the remote cannot be reached at all; a command that fails is a
    :class:`RemoteResult` with its code."""

    def __call__(self, command: str, stdin: bytes = b"") -> RemoteResult: ...


@dataclass(frozen=True, slots=True)
class CommandRunner:
    """A :class:`Runner` that runs ``prefix + [command]`` here: ``["ssh", ..., "host"]``
    reaches a remote, ``["sh", "-c"]`` (with ``env`` giving another ``HOME``) stands for
    one on this machine, exactly as an ssh exec channel would run it."""

    prefix: Sequence[str]
    env: Mapping[str, str] | None = None
    timeout_s: float | None = 600.0

    def __call__(self, command: str, stdin: bytes = b"") -> RemoteResult:
        """Run it; ``remote_unreachable`` when ``prefix`` cannot be started or the command
        outlives ``timeout_s`` (it is killed then)."""
        try:
            done = subprocess.run([*self.prefix, command], input=stdin, capture_output=True,
                                  env=dict(self.env) if self.env is not None else None,
                                  timeout=self.timeout_s, check=False)
        except OSError as exc:
            raise CmuxError("remote_unreachable",
                            f"cannot run {self.prefix[0]}: {exc.strerror}") from None
        except subprocess.TimeoutExpired:
            raise CmuxError("remote_unreachable", f"the remote command did not end within "
                            f"{self.timeout_s:g} s") from None
        return RemoteResult(done.returncode, done.stdout, done.stderr)


@dataclass(frozen=True, slots=True)
class InstallReport:
    """What :func:`install` did: the remote's cmux version after it, which wheels were
    copied (none when the environment already held them all), and where it is."""

    version: str
    copied: list[str]
    venv: str
    used_uv: bool
    python: str
    distributions: list[str] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return bool(self.copied)


@dataclass(frozen=True, slots=True)
class RemotePython:
    """What the probe found on the remote."""

    executable: str
    version: tuple[int, int, int]
    implementation: str
    machine: str
    platform: str
    venv_module: bool
    ensurepip: bool
    uv: str | None
    venv: str
    stamp: dict[str, str]


_PROBE = f"""
import json, os, platform, shutil, sys
venv = os.path.expandvars({REMOTE_VENV!r})
try:
    with open(os.path.join(venv, {STAMP!r})) as f:
        stamp = json.load(f)
except (OSError, ValueError):
    stamp = {{}}
if not os.access(os.path.join(venv, "bin", "python"), os.X_OK):
    stamp = {{}}
def has(module):
    try:
        __import__(module)
    except ImportError:
        return False
    return True
print(json.dumps({{"executable": sys.executable, "version": list(sys.version_info[:3]),
    "implementation": sys.implementation.name, "machine": platform.machine(),
    "platform": sys.platform, "venv_module": has("venv"), "ensurepip": has("ensurepip"),
    "uv": shutil.which("uv"), "venv": venv, "stamp": stamp}}))
"""

# Run by the remote's python3 with the new wheels as a tar stream on stdin; argv[1] is
# "uv" or "pip", argv[2] the stamp to write. A copied pip wheel installs the others (and
# itself): pip runs from its wheel, so the environment is made without ensurepip. Exit 3:
# the environment could not be made; 4: the install failed; 5: a requirement is missing.
# The tool's output is on stderr.
_INSTALL = f"""
import json, os, shutil, subprocess, sys, tarfile, tempfile
venv = os.path.expandvars({REMOTE_VENV!r})
use_uv = sys.argv[1] == "uv"
carried_pip = any(name.startswith("pip-") for name in json.loads(sys.argv[2]))
os.makedirs(os.path.dirname(venv), exist_ok=True)
def run(argv, code):
    done = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if done.returncode != 0:
        sys.stderr.write(done.stdout)
        sys.exit(code)
python = os.path.join(venv, "bin", "python")
if not os.access(python, os.X_OK):
    shutil.rmtree(venv, ignore_errors=True)
    run(["uv", "venv", "--quiet", "--python", sys.executable, venv] if use_uv else
        [sys.executable, "-m", "venv"] + (["--without-pip"] if carried_pip else []) + [venv],
        3)
work = tempfile.mkdtemp(prefix="wheels-", dir=os.path.dirname(venv))
try:
    with tarfile.open(fileobj=sys.stdin.buffer, mode="r|") as archive:
        # The "data" filter (3.11.4 and later) refuses links and paths out of work.
        kw = dict(filter="data") if hasattr(tarfile, "data_filter") else dict()
        archive.extractall(work, **kw)
    wheels = sorted(os.path.join(work, n) for n in os.listdir(work) if n.endswith(".whl"))
    pip_wheel = [w for w in wheels if os.path.basename(w).startswith("pip-")]
    pip = [python] + ([os.path.join(pip_wheel[0], "pip")] if pip_wheel else ["-m", "pip"])
    pip += ["--isolated", "--disable-pip-version-check"]
    install = (["uv", "pip", "install", "--quiet", "--python", python, "--reinstall"]
               if use_uv else pip + ["install", "--quiet", "--no-compile", "--force-reinstall"])
    if wheels:
        run(install + ["--no-index", "--no-deps"] + wheels, 4)
    run(["uv", "pip", "check", "--python", python] if use_uv
        else [python, "-m", "pip", "--isolated", "--disable-pip-version-check", "check"], 5)
finally:
    shutil.rmtree(work, ignore_errors=True)
stamp = os.path.join(venv, {STAMP!r})
with open(stamp + ".tmp", "w") as f:
    f.write(sys.argv[2])
os.replace(stamp + ".tmp", stamp)
"""

_CHECK = ('import importlib.metadata as m, cmux_core; '
          'print(cmux_core.__version__, m.version("cmux-core"))')


def _python_command(program: str, *args: str) -> str:
    """A shell command line running ``program`` with the remote's ``python3``; exit 127
    when there is none."""
    words = " ".join(shlex.quote(a) for a in args)
    return (f"command -v python3 >/dev/null 2>&1 || exit 127; "
            f"exec python3 -c {shlex.quote(program)} {words}").rstrip()


def probe(runner: Runner) -> RemotePython:
    """Find the remote's python3, its venv module, uv and what the environment holds.

    Raises ``remote_python_missing`` (no python3 on the remote's ``PATH``),
    ``remote_python_unsupported`` (older than 3.11) or ``remote_probe_failed``.
    """
    done = runner(_python_command(_PROBE))
    if done.returncode == 127:
        raise CmuxError("remote_python_missing", "the remote has no python3 on its PATH: "
                        "install Python 3.11 or later there")
    try:
        found = json.loads(done.stdout.decode().strip().splitlines()[-1])
    except (ValueError, IndexError):
        raise CmuxError("remote_probe_failed", "probing the remote's python3 failed "
                        f"(exit {done.returncode}): {_tail(done.stderr)}") from None
    major, minor, micro = found["version"]
    remote = RemotePython(found["executable"], (major, minor, micro),
                          found["implementation"], found["machine"], found["platform"],
                          found["venv_module"], found["ensurepip"], found["uv"], found["venv"],
                          found["stamp"])
    if remote.version[:2] < MIN_PYTHON:
        raise CmuxError("remote_python_unsupported",
                        f"the remote's python3 is {_dotted(remote.version)}; cmux needs "
                        f"{_dotted(MIN_PYTHON)} or later")
    return remote


def _check_venv_tools(remote: RemotePython, carried_pip: bool) -> None:
    """Raise ``remote_venv_unavailable`` when the remote cannot make the environment: uv,
    or the venv module, with ensurepip too unless a pip wheel is carried."""
    if remote.uv is not None or (remote.venv_module and (carried_pip or remote.ensurepip)):
        return
    missing = "venv module" if not remote.venv_module else "ensurepip module"
    raise CmuxError("remote_venv_unavailable",
                    f"the remote's python3 ({remote.executable}) has no {missing} and no uv "
                    "is on its PATH: install the system's venv package (e.g. python3-venv) "
                    "or uv there")


def compatible(remote: RemotePython, wheels: Iterable[Wheel]) -> None:
    """Raise ``remote_incompatible`` when a compiled wheel of this machine cannot run on
    the remote's interpreter (another implementation, version, machine or system)."""
    compiled = sorted(w.name for w in wheels if not w.pure)
    here = (sys.implementation.name, _dotted(sys.version_info[:2]), platform.machine(),
            sys.platform)
    there = (remote.implementation, _dotted(remote.version[:2]), remote.machine,
             remote.platform)
    if compiled and here != there:
        raise CmuxError(
            "remote_incompatible",
            f"the remote runs {' '.join(there)}, this machine {' '.join(here)}: the "
            f"compiled wheels made here ({', '.join(compiled)}) need the same Python "
            "version on the same kind of machine", {"here": here, "remote": there})


def install(runner: Runner, *, plugins: Iterable[str] | None = None,
            cache_dir: Path | None = None) -> InstallReport:
    """Install or update the running cmux in :data:`REMOTE_VENV` on the remote.

    ``plugins`` names the plugin distributions to carry (None: every installed one, see
    :func:`~cmux_core.fleet.wheels.running_distributions`); ``cache_dir`` keeps the wheels
    made here (default: ``cmux/wheels`` in the user's cache directory). Returns once the
    remote's ``cmux`` has been checked. Raises :class:`CmuxError`: the probe's errors (see
    :func:`probe`), ``remote_incompatible``, ``wheel_build_failed``,
    ``remote_venv_failed``, ``remote_install_failed`` (with pip's or uv's last lines) and
    ``remote_check_failed``. A failed install leaves the previous stamp, so the next try
    copies again.
    """
    remote = probe(runner)
    cache = cache_dir or default_cache_dir() / "wheels"
    names = running_distributions(plugins)
    # pip itself, when it runs here, installs the others there: then ensurepip is not needed.
    carried_pip = installed("pip") is not None
    _check_venv_tools(remote, carried_pip)
    if carried_pip:
        names.append("pip")
    wheels = [wheel_of(name, cache) for name in names]
    compatible(remote, wheels)
    stamp = {w.filename: w.sha256 for w in wheels}
    new = [w for w in wheels if remote.stamp.get(w.filename) != w.sha256]
    use_uv = remote.uv is not None
    if new or remote.stamp != stamp:
        _copy_and_install(runner, new, stamp, use_uv)
    return InstallReport(check(runner), [w.filename for w in new], remote.venv, use_uv,
                         remote.executable, names)


def _copy_and_install(runner: Runner, wheels: list[Wheel], stamp: dict[str, str],
                      use_uv: bool) -> None:
    archive = io.BytesIO()
    with tarfile.open(fileobj=archive, mode="w") as tar:
        for wheel in wheels:
            tar.add(wheel.path, arcname=wheel.filename)
    done = runner(_python_command(_INSTALL, "uv" if use_uv else "pip",
                                  json.dumps(stamp, sort_keys=True)), archive.getvalue())
    tool = "uv" if use_uv else "pip"
    failures = {3: ("remote_venv_failed", f"making the virtual environment ({tool}) failed"),
                4: ("remote_install_failed", f"{tool} install of the copied wheels failed"),
                5: ("remote_install_failed", f"{tool} check found a requirement missing")}
    if done.returncode in failures:
        code, what = failures[done.returncode]
        raise CmuxError(code, f"{what} on the remote: {_tail(done.stderr)}")
    if done.returncode != 0:
        raise CmuxError("remote_install_failed", f"the remote install ended with exit "
                        f"{done.returncode}: {_tail(done.stderr)}")


def check(runner: Runner) -> str:
    """The version of the ``cmux`` installed in :data:`REMOTE_VENV`, once its package
    imports and its ``cmux`` command runs; ``remote_check_failed`` otherwise."""
    venv = REMOTE_VENV
    done = runner(f'"{venv}/bin/python" -c {shlex.quote(_CHECK)} && '
                  f'"{venv}/bin/cmux" --help >/dev/null')
    words = done.stdout.decode().split()
    if done.returncode != 0 or len(words) != 2:
        raise CmuxError("remote_check_failed", "the installed cmux does not run on the "
                        f"remote (exit {done.returncode}): {_tail(done.stderr)}")
    return words[0]


def _dotted(version: Iterable[int]) -> str:
    return ".".join(str(part) for part in version)


def _tail(data: bytes) -> str:
    return last_lines(data.decode(errors="replace"))
