"""`iriis key new|list|revoke` (owner keys: printed once, listed by label and last use, revoked
without a restart) and `iriis pin set` (the action PIN)."""

from __future__ import annotations

import argparse
import asyncio
import getpass
import sys
import time
from typing import Any

from actors.common.hashing import hash_pin
from actors.store.migrate import migrate
from actors.store.store import Store, resolve_url
from serve_apps.cli.common import settings_or_exit
from serve_apps.cli.people import user_pin_command
from serve_apps.http.auth import KEY_LAST_USED_KV, create_key, load_key_records, revoke_key


def _with_store(work: Any) -> Any:
    """Run `work(store)` on the migrated store named by the settings."""
    settings = settings_or_exit()
    database_url = resolve_url(settings.database_url, settings.iriis_home)

    async def run() -> Any:
        store = Store.open(database_url)
        try:
            await migrate(store)
            return await work(store)
        finally:
            await store.close()

    return asyncio.run(run())


def key_command(args: argparse.Namespace) -> int:
    """Add an owner key (e.g. one per integration) without printing the others; a running
    server accepts it within a few seconds."""
    label = getattr(args, "label", None) or "added with iriis key new"
    key, record = _with_store(lambda store: create_key(store, label, time.time()))
    print(key)
    print(f"iriis: added key {record['id']} ({record['label']}); it works at once, no restart needed.",
          file=sys.stderr)
    return 0


def _when(value: float | None) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(value)) if value else "never"


def key_list_command(args: argparse.Namespace) -> int:
    """The stored owner keys by id, label, creation and last use (never the keys)."""
    async def read(store: Store) -> tuple[list[dict[str, Any]], dict[str, float]]:
        return await load_key_records(store), dict(await store.get_kv(KEY_LAST_USED_KV, {}) or {})

    records, used = _with_store(read)
    if not records:
        print("iriis: no stored owner keys (keys from IRIIS_OWNER_KEYS are not listed).", file=sys.stderr)
        return 0
    print(f"{'id':>4}  {'label':<40} {'created':<16}  last used")
    for r in records:
        print(f"{r['id']:>4}  {r.get('label', '')[:40]:<40} {_when(r.get('created')):<16}  {_when(used.get(r['hash']))}")
    return 0


def key_revoke_command(args: argparse.Namespace) -> int:
    """Revoke a stored key by id; a running server refuses it within a few seconds."""
    if not _with_store(lambda store: revoke_key(store, args.id)):
        print(f"iriis: no stored key with id {args.id} (see `iriis key list`).", file=sys.stderr)
        return 1
    print(f"iriis: key {args.id} revoked; it stops working within a few seconds.", file=sys.stderr)
    return 0


def pin_command(args: argparse.Namespace) -> int:
    """Set the owner's action PIN (needed to approve PIN-tier actions)."""
    if getattr(args, "user", None):
        return user_pin_command(args)
    settings = settings_or_exit()
    if args.stdin:
        pin = sys.stdin.readline().strip()
    else:
        pin = getpass.getpass("New PIN (4-12 digits): ").strip()
        if getpass.getpass("Again: ").strip() != pin:
            print("iriis: the two PINs differ; nothing was changed.", file=sys.stderr)
            return 2
    try:
        stored = hash_pin(pin)
    except ValueError as exc:
        print(f"iriis: {exc}; nothing was changed.", file=sys.stderr)
        return 2
    database_url = resolve_url(settings.database_url, settings.iriis_home)

    async def save() -> None:
        store = Store.open(database_url)
        try:
            await migrate(store)
            await store.set_kv("owner_pin_hash", stored)
        finally:
            await store.close()

    asyncio.run(save())
    print("iriis: PIN set; it takes effect at once.", file=sys.stderr)
    return 0


def add_key_parsers(sub: Any) -> None:
    key_p = sub.add_parser("key", help="owner keys")
    key_sub = key_p.add_subparsers(dest="key_command", required=True)
    new_p = key_sub.add_parser("new", help="create an additional owner key and print it once")
    new_p.add_argument("--label", help="what the key is for (shown by `iriis key list`)")
    new_p.set_defaults(func=key_command)
    list_p = key_sub.add_parser("list", help="the stored owner keys: id, label, created, last used")
    list_p.set_defaults(func=key_list_command)
    revoke_p = key_sub.add_parser("revoke", help="revoke a stored owner key by its id")
    revoke_p.add_argument("id", type=int)
    revoke_p.set_defaults(func=key_revoke_command)
    pin_p = sub.add_parser("pin", help="the owner's action PIN")
    pin_sub = pin_p.add_subparsers(dest="pin_command", required=True)
    set_p = pin_sub.add_parser("set", help="set the PIN that approves PIN-tier actions")
    set_p.add_argument("--stdin", action="store_true", help="read the PIN from standard input")
    set_p.add_argument("--user", help="a person's email (default: the owner)")
    set_p.set_defaults(func=pin_command)
