"""The `iriis` command: the parser, one module per command group.

`serve` (serve.py), `key new` and `pin set` (keys.py), `user` and `device` (people.py), `relay`
(relay.py); what they share is in common.py.
"""

from __future__ import annotations

import argparse
from importlib.metadata import PackageNotFoundError, version
from typing import Any

from serve_apps.cli.keys import add_key_parsers
from serve_apps.cli.people import add_people_parsers
from serve_apps.cli.relay import add_relay_parser
from serve_apps.cli.serve import add_serve_parser


def package_version() -> str:
    try:
        return version("iriis")
    except PackageNotFoundError:
        return "unknown (not installed)"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="iriis", description="Iriis: one owner's agent system on Ray.",
        epilog="Configuration is read from the environment; see README.md.")
    parser.add_argument("--version", action="version", version=f"iriis {package_version()}")
    sub = parser.add_subparsers(dest="command", required=True)
    add_serve_parser(sub)
    add_key_parsers(sub)
    add_people_parsers(sub)
    add_relay_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    result: Any = args.func(args)
    return int(result or 0)


if __name__ == "__main__":
    raise SystemExit(main())
