"""What every `iriis` command shares: loading the settings, or stopping with one clear line,
and where the owner keys are kept."""

from __future__ import annotations

import sys

from actors.settings import Settings, SettingsError, load_settings


def settings_or_exit() -> Settings:
    """The settings from the environment; a malformed value exits 2 naming the variable."""
    try:
        return load_settings()
    except SettingsError as exc:
        print(f"iriis: configuration error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None


# The store's key-value entry holding the owner keys' digests.
OWNER_KEYS_KV = "owner_key_hashes"
