"""Operator commands for people and devices: `iriis user add|list|remove`, `iriis pin set
--user`, `iriis device code` (a long-lived pairing code: up to 14 days and 10 uses, logged)."""

from __future__ import annotations

import argparse
import asyncio
import getpass
import sys
from typing import Any

from actors.devices import people
from actors.devices import repository as repo
from actors.devices.protocol import CLOSE_GOING_AWAY, KINDS, SKILL_NAME
from actors.devices.settings import DeviceSettings
from actors.devices.tokens import pair_link
from actors.store.migrate import migrate
from actors.store.store import Store, resolve_url
from serve_apps.cli.common import settings_or_exit


def _database_url() -> str:
    settings = settings_or_exit()
    return resolve_url(settings.database_url, settings.iriis_home)


async def _with_store(work: Any) -> Any:
    store = Store.open(_database_url())
    try:
        await migrate(store)
        return await work(store)
    finally:
        await store.close()


def _secret(prompt: str, stdin: bool) -> str | None:
    if stdin:
        return sys.stdin.readline().strip()
    value = getpass.getpass(prompt).strip()
    if getpass.getpass("Again: ").strip() != value:
        print("iriis: the two entries differ; nothing was changed.", file=sys.stderr)
        return None
    return value


def user_add_command(args: argparse.Namespace) -> int:
    password = _secret("Password (8 characters or more): ", args.stdin)
    if password is None:
        return 2

    async def work(store: Store) -> people.Person:
        return await people.add_person(store, args.email, args.role, password)
    try:
        person = asyncio.run(_with_store(work))
    except ValueError as exc:
        print(f"iriis: {exc}; nothing was changed.", file=sys.stderr)
        return 2
    print(f"iriis: added {person.email} ({person.role}), person {person.id}.", file=sys.stderr)
    return 0


def user_list_command(_args: argparse.Namespace) -> int:
    async def work(store: Store) -> list[tuple[people.Person, int]]:
        found = await people.list_people(store)
        return [(p, len(await repo.list_devices(store, p.id))) for p in found]
    for person, devices in asyncio.run(_with_store(work)):
        print(f"{person.id}\t{person.email or '-'}\t{person.role}\t{devices} device{'s' if devices != 1 else ''}")
    return 0


def user_remove_command(args: argparse.Namespace) -> int:
    """Remove a person (the app reviewers' demo account once the review is over): their
    devices are revoked with them, and the removal goes into the change log."""
    async def work(store: Store) -> str | int:
        person = await people.person_by_email(store, args.email)
        if person is None:
            return f"no person has the email {args.email}"
        devices = len(await repo.list_devices(store, person.id))
        await people.remove_person(store, person.id, actor="operator")
        return devices
    try:
        outcome = asyncio.run(_with_store(work))
    except ValueError as exc:
        outcome = str(exc)
    if isinstance(outcome, str):
        print(f"iriis: {outcome}; nothing was changed.", file=sys.stderr)
        return 2
    print(f"iriis: removed {args.email} and revoked {outcome} device{'s' if outcome != 1 else ''}; a connected "
          "device is closed (4403) at its next ping.", file=sys.stderr)
    return 0


def user_pin_command(args: argparse.Namespace) -> int:
    """`iriis pin set --user EMAIL`: that person's action PIN."""
    pin = _secret("New PIN (4-12 digits): ", args.stdin)
    if pin is None:
        return 2

    async def work(store: Store) -> str | None:
        person = await people.person_by_email(store, args.user)
        if person is None:
            return f"no person has the email {args.user}"
        await people.set_pin(store, person.id, pin)
        return None
    try:
        problem = asyncio.run(_with_store(work))
    except ValueError as exc:
        problem = str(exc)
    if problem:
        print(f"iriis: {problem}; nothing was changed.", file=sys.stderr)
        return 2
    print("iriis: PIN set; it takes effect at once.", file=sys.stderr)
    return 0


def device_code_command(args: argparse.Namespace) -> int:
    if not 1 <= args.days <= repo.MAX_CODE_DAYS:
        print(f"iriis: --days is 1 to {repo.MAX_CODE_DAYS}.", file=sys.stderr)
        return 2
    if not 1 <= args.uses <= repo.MAX_CODE_USES:
        print(f"iriis: --uses is 1 to {repo.MAX_CODE_USES}.", file=sys.stderr)
        return 2
    skills = sorted({s.strip() for s in (args.skills or "").split(",") if s.strip()})
    bad = [s for s in skills if not SKILL_NAME.match(s)]
    if bad:
        print(f"iriis: not skill names: {', '.join(bad)}", file=sys.stderr)
        return 2

    async def work(store: Store) -> tuple[str, float] | None:
        person = await people.person_by_email(store, args.email)
        if person is None:
            return None
        return await repo.make_code(store, person.id, args.kind, args.label or f"{args.kind} device", skills,
                                    args.days * 86400.0, uses=args.uses, actor="operator")
    made = asyncio.run(_with_store(work))
    if made is None:
        print(f"iriis: no person has the email {args.email}", file=sys.stderr)
        return 2
    code, _expires = made

    settings = settings_or_exit()
    base = DeviceSettings().public_url or f"http://{settings.iriis_host}:{settings.iriis_port}"
    print(code)
    print(pair_link(base, code))
    print(f"iriis: works for {args.days} days and {args.uses} devices; written to the change log.",
          file=sys.stderr)
    return 0


def add_people_parsers(sub: Any) -> None:
    user_p = sub.add_parser("user", help="people who use this server")
    user_sub = user_p.add_subparsers(dest="user_command", required=True)
    add_p = user_sub.add_parser("add", help="add a person (asks for their password)")
    add_p.add_argument("--email", required=True)
    add_p.add_argument("--role", required=True, choices=["owner", "admin", "member", "staff"])
    add_p.add_argument("--stdin", action="store_true", help="read the password from standard input")
    add_p.set_defaults(func=user_add_command)
    list_p = user_sub.add_parser("list", help="everyone, with their role and devices")
    list_p.set_defaults(func=user_list_command)
    remove_p = user_sub.add_parser("remove", help="remove a person and revoke their devices")
    remove_p.add_argument("--email", required=True)
    remove_p.set_defaults(func=user_remove_command)

    device_p = sub.add_parser("device", help="personal devices")
    device_sub = device_p.add_subparsers(dest="device_command", required=True)
    code_p = device_sub.add_parser("code", help="a long-lived pairing code (up to 14 days, 10 uses)")
    code_p.add_argument("--email", required=True, help="whose devices it pairs")
    code_p.add_argument("--kind", required=True, choices=list(KINDS))
    code_p.add_argument("--days", type=int, default=7)
    code_p.add_argument("--uses", type=int, default=1)
    code_p.add_argument("--skills", default="", help="comma-separated skills switched on")
    code_p.add_argument("--label", default="", help="the devices' name")
    code_p.set_defaults(func=device_code_command)


def close_devices_for_shutdown() -> int:
    """Close every connected device with 1001 (going away) before Serve stops."""
    import ray  # lazy: imports Ray; keeps `iriis --help` fast

    from actors.devices.actor import live_devices  # lazy: imports Ray; keeps `iriis --help` fast

    refs = [actor.close.remote(CLOSE_GOING_AWAY, "the server is restarting")
            for actor in live_devices().values()]
    closed = 0
    for ref in refs:
        try:
            ray.get(ref, timeout=10)
            closed += 1
        except Exception:  # noqa: BLE001 - shutdown boundary: keep closing the others
            continue
    return closed
