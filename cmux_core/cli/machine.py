"""``cmux machine``: the saved machines of the fleet (add, list, remove, rename, enable,
disable, check, install), served by the local server's ``machine.*`` methods, which own
the file and the connections.
"""

from __future__ import annotations

import argparse
from typing import Any

from cmux_core.cli.common import (
    AddCommon,
    Command,
    EnvAction,
    Result,
    add_arguments,
    add_group,
    arg,
    client,
    fields,
    print_json,
    show_nothing,
    show_table,
)
from cmux_core.cli.machine_ssh import add_machine_ssh_command

NAME = arg("machine", metavar="NAME", help="the machine's name")


def show_machine(r: Result) -> None:
    fields({k: v for k, v in r["machine"].items() if v not in (None, "", {}, [])})


def add_params(ns: argparse.Namespace) -> Result:
    return {"machine": ns.machine, "destination": ns.destination,
            "ssh_options": ns.ssh_options or {}, "session": ns.remote_session,
            "accept_new": ns.accept_new}


COMMANDS = [
    Command("add", "machine.add", "save a machine reached with ssh DESTINATION and connect it",
            (NAME, arg("destination", metavar="DESTINATION",
                       help="what ssh takes: user@host or a Host alias of ~/.ssh/config"),
             arg("--ssh-option", dest="ssh_options", action=EnvAction,
                 metavar="KEY=VALUE", help="an ssh -o option (repeatable)"),
             arg("--remote-session", dest="remote_session", metavar="SESSION",
                 help="the remote server's session name (default: its default socket)"),
             arg("--accept-new", action="store_true",
                 help="trust the host key the first time it is seen "
                      "(StrictHostKeyChecking=accept-new)")),
            show_machine, params=add_params),
    Command("list", "machine.list", "saved machines and their connection state", (),
            show_table("machines", [
                ("name", lambda m: m["name"]), ("destination", lambda m: m["destination"]),
                ("state", lambda m: m["state"] if m["enabled"] else "disabled"),
                ("version", lambda m: m.get("version")),
                ("reason", lambda m: m.get("reason") or m.get("ssh_error"))])),
    Command("status", "machine.status", "one machine's settings and state", (NAME,),
            show_machine),
    Command("remove", "machine.remove", "forget a machine (its server keeps running)",
            (NAME,), show_nothing),
    Command("rename", "machine.rename", "rename a machine",
            (NAME, arg("new_name", metavar="NEW", help="the new name")), show_nothing),
    Command("enable", "machine.enable", "connect a machine and keep it connected", (NAME,),
            show_nothing),
    Command("disable", "machine.disable", "close a machine's connection", (NAME,),
            show_nothing),
]


def state_line(name: str, machine: Result) -> str:
    """``NAME: state``, with the reason of a state that has one."""
    reason = machine.get("reason")
    return f"{name}: {machine['state']}" + (f" ({reason})" if reason else "")


def cmd_check(args: argparse.Namespace) -> int:
    with client(args, timeout=None) as c:
        row = c.call("machine.check", {"machine": args.machine})["machine"]
    if args.json:
        print_json(row)
        return 0 if not row["missing"] else 1
    print(state_line(row["name"], row))
    if row.get("version") is not None:
        print(f"remote cmux {row['version']} (protocol {row['protocol']})")
    if row.get("round_trip_ms") is not None:
        print(f"round trip {row['round_trip_ms']:.2f} ms")
    if row.get("transport") == "forward":
        print("calls go to the remote socket forwarded over the master")
    elif row.get("transport") == "bridge":
        print("calls go through cmux bridge (the remote sshd allows no stream-local "
              "forwarding)")
    if row.get("ssh_error"):
        print(f"ssh said: {row['ssh_error']}")
    for missing in row["missing"]:
        print(f"missing: {missing}")
    return 0 if not row["missing"] else 1


def cmd_install(args: argparse.Namespace) -> int:
    with client(args, timeout=None) as c:
        r = c.call("machine.install", {"machine": args.machine, "plugins": args.plugins})
    if args.json:
        print_json(r)
        return 0
    copied = f"{len(r['copied'])} wheels copied" if r["copied"] else "already current"
    print(f"{args.machine}: cmux {r['version']} in {r['venv']} ({copied}; python {r['python']})")
    print(state_line(args.machine, r["machine"]))
    return 0


def add_machine_commands(sub: Any, add_common: AddCommon) -> None:
    inner = add_group(sub, "machine", "saved machines reached over ssh (the fleet)", COMMANDS,
                      add_common)
    p = inner.add_parser("check", help="connect now; show the remote cmux version and "
                         "protocol, the round trip and what is missing")
    add_arguments(p, (NAME,))
    add_common(p)
    p.set_defaults(func=cmd_check)
    p = inner.add_parser("install", help="copy this cmux to the machine over ssh and install "
                         "it in a private environment there (no network needed there)")
    add_arguments(p, (NAME,))
    p.add_argument("--plugin", dest="plugins", action="append", metavar="DIST",
                   help="carry only these plugin distributions (repeatable; default: every "
                        "installed one)")
    add_common(p)
    p.set_defaults(func=cmd_install)
    add_machine_ssh_command(inner, add_common)
