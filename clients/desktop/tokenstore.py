"""Where the device token lives: the OS keyring (macOS Keychain, Windows Credential Locker,
Secret Service) by default; a file only when the person asks for one with --token-file."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

SERVICE = "iriis-device"
ACCOUNT = "device"
USE_A_FILE = "run again with --token-file PATH to keep the token in a file only you can read"
NO_KEYRING = f"no OS keyring is available here (no Keychain, Credential Locker or Secret Service); {USE_A_FILE}"


class TokenStoreError(Exception):
    """The token cannot be kept or read where the person asked; the message says what to do."""


def _keyring() -> Any:
    import keyring
    from keyring.backends import fail

    if isinstance(keyring.get_keyring(), fail.Keyring):
        raise TokenStoreError(NO_KEYRING)
    return keyring


class TokenStore:
    def __init__(self, token_file: Path | None = None) -> None:
        self.file = token_file

    def check(self) -> None:
        """Fail before pairing, not after: a code is single-use, and a token that cannot be
        kept would be lost with it."""
        if self.file is None:
            _keyring()

    def save(self, record: dict[str, Any]) -> None:
        text = json.dumps(record)
        if self.file is not None:
            self.file.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w") as out:
                out.write(text)
            return
        from keyring.errors import KeyringError

        try:
            _keyring().set_password(SERVICE, ACCOUNT, text)
        except KeyringError as exc:
            raise TokenStoreError(f"the keyring refused the token ({exc}); {USE_A_FILE}") from exc

    def load(self) -> dict[str, Any] | None:
        if self.file is not None:
            return json.loads(self.file.read_text()) if self.file.exists() else None
        from keyring.errors import KeyringError

        try:
            text = _keyring().get_password(SERVICE, ACCOUNT)
        except KeyringError as exc:
            raise TokenStoreError(f"the keyring could not be read ({exc})") from exc
        return json.loads(text) if text else None

    def delete(self) -> None:
        if self.file is not None:
            self.file.unlink(missing_ok=True)
            return
        from keyring.errors import PasswordDeleteError

        try:
            _keyring().delete_password(SERVICE, ACCOUNT)
        except PasswordDeleteError:
            pass
