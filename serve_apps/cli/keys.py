"""`iriis key new` (another owner key, printed once) and `iriis pin set` (the action PIN)."""

from __future__ import annotations

import argparse
import asyncio
import sys
from typing import Any

from actors.common.hashing import hash_pin
from actors.store.migrate import migrate
from actors.store.store import Store, resolve_url
from serve_apps.cli.common import OWNER_KEYS_KV, settings_or_exit
from serve_apps.http.auth import hash_key, new_owner_key


def key_command(args: argparse.Namespace) -> int:
    """Add an owner key (e.g. one per integration) without printing the others."""
    settings = settings_or_exit()
    database_url = resolve_url(settings.database_url, settings.iriis_home)

    async def add() -> str:
        store = Store.open(database_url)
        try:
            await migrate(store)
            key = new_owner_key()
            hashes: list[str] = await store.get_kv(OWNER_KEYS_KV, [])
            await store.set_kv(OWNER_KEYS_KV, sorted(set(hashes) | {hash_key(key)}))
            return key
        finally:
            await store.close()

    key = asyncio.run(add())
    print(key)
    print("iriis: added; restart `iriis serve` for it to take effect.", file=sys.stderr)
    return 0


def pin_command(args: argparse.Namespace) -> int:
    """Set the owner's action PIN (needed to approve PIN-tier actions)."""
    import getpass

    if getattr(args, "user", None):
        from serve_apps.cli.people import user_pin_command

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
    new_p.set_defaults(func=key_command)
    pin_p = sub.add_parser("pin", help="the owner's action PIN")
    pin_sub = pin_p.add_subparsers(dest="pin_command", required=True)
    set_p = pin_sub.add_parser("set", help="set the PIN that approves PIN-tier actions")
    set_p.add_argument("--stdin", action="store_true", help="read the PIN from standard input")
    set_p.add_argument("--user", help="a person's email (default: the owner)")
    set_p.set_defaults(func=pin_command)
