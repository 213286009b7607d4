"""`iriis-device`: pair, run, notify, uninstall."""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import platform
import sys
import time
from pathlib import Path

import httpx

from clients.desktop.agent import DeviceAgent, say_bye
from clients.desktop.tokenstore import TokenStore, TokenStoreError
from clients.desktop.tools import desktop_tools

HOME = Path.home() / ".iriis-device"


def default_kind() -> str:
    return {"Darwin": "mac", "Windows": "windows"}.get(platform.system(), "linux")


def _store(args: argparse.Namespace) -> TokenStore:
    return TokenStore(Path(args.token_file) if args.token_file else None)


def pair_command(args: argparse.Namespace) -> int:
    kind = args.kind or default_kind()
    store = _store(args)
    store.check()
    response = httpx.post(args.server.rstrip("/") + "/v1/devices/pair", json={"code": args.code, "kind": kind},
                          timeout=30)
    if response.status_code != 200:
        print(f"iriis-device: pairing failed: {response.json().get('error', {}).get('message', response.text)}",
              file=sys.stderr)
        return 1
    paired = response.json()
    store.save({"server": args.server, "token": paired["token"], "device_id": paired["device_id"],
                       "kind": kind, "label": paired["label"]})
    print(f"iriis-device: paired as device {paired['device_id']} ({paired['label']}); skills on: "
          f"{', '.join(paired['skills']) or 'none'}")
    return 0


def run_command(args: argparse.Namespace) -> int:
    record = _store(args).load()
    if not record:
        print("iriis-device: not paired yet; run `iriis-device pair CODE --server URL`.", file=sys.stderr)
        return 1
    tools = desktop_tools(Path(args.root), allow_shell=not args.no_shell, allow_write=not args.no_write)
    agent = DeviceAgent(record["server"], record["token"], record["kind"], args.label or record["label"], tools,
                        spool=Path(args.spool), event_seconds=args.event_seconds)
    why = asyncio.run(agent.run_forever())
    print(f"iriis-device: stopped: {why}", file=sys.stderr)
    return 1


def notify_command(args: argparse.Namespace) -> int:
    spool = Path(args.spool)
    spool.mkdir(parents=True, exist_ok=True)
    event = {"event": args.event, "title": args.title, "text": args.text, "data": {}}
    (spool / f"{time.time_ns()}.json").write_text(json.dumps(event))
    return 0


def uninstall_command(args: argparse.Namespace) -> int:
    store = _store(args)
    record = store.load()
    if record:
        asyncio.run(say_bye(record["server"], record["token"]))
        store.delete()
    print("iriis-device: the token is revoked and forgotten.", file=sys.stderr)
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="iriis-device", description="This computer as an Iriis device.")
    parser.add_argument("--token-file", help="keep the token in this file instead of the OS keyring")
    parser.add_argument("--spool", default=str(HOME / "events"), help="folder of events waiting to be sent")
    sub = parser.add_subparsers(dest="command", required=True)
    pair_p = sub.add_parser("pair", help="pair with a code from the Devices page")
    pair_p.add_argument("code")
    pair_p.add_argument("--server", required=True, help="e.g. http://127.0.0.1:8000")
    pair_p.add_argument("--kind", choices=["mac", "windows", "linux"])
    pair_p.set_defaults(func=pair_command)
    run_p = sub.add_parser("run", help="connect and offer this computer's tools")
    run_p.add_argument("--root", default=str(Path.home()), help="the folder the file tools may read")
    run_p.add_argument("--label", default="")
    run_p.add_argument("--no-shell", action="store_true", help="do not offer the shell tool")
    run_p.add_argument("--no-write", action="store_true", help="do not offer the file-writing tool")
    run_p.add_argument("--event-seconds", type=float, default=30.0, help=argparse.SUPPRESS)
    run_p.set_defaults(func=run_command)
    notify_p = sub.add_parser("notify", help="queue an event for the person")
    notify_p.add_argument("title")
    notify_p.add_argument("text", nargs="?", default="")
    notify_p.add_argument("--event", default="task_done",
                          choices=["watch_done", "task_progress", "task_done", "task_failed", "task_reply"])
    notify_p.set_defaults(func=notify_command)
    bye_p = sub.add_parser("uninstall", help="revoke this device's token and forget it")
    bye_p.set_defaults(func=uninstall_command)
    return parser


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except TokenStoreError as exc:
        print(f"iriis-device: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
