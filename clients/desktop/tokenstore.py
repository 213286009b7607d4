"""Where the device token lives: the OS keyring (macOS Keychain, Windows Credential Locker,
Secret Service) by default; a file only when the person asks for one with --token-file."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

SERVICE = "iriis-device"
ACCOUNT = "device"


class TokenStore:
    def __init__(self, token_file: Path | None = None) -> None:
        self.file = token_file

    def save(self, record: dict[str, Any]) -> None:
        text = json.dumps(record)
        if self.file is not None:
            self.file.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w") as out:
                out.write(text)
            return
        import keyring

        keyring.set_password(SERVICE, ACCOUNT, text)

    def load(self) -> dict[str, Any] | None:
        if self.file is not None:
            return json.loads(self.file.read_text()) if self.file.exists() else None
        import keyring

        text = keyring.get_password(SERVICE, ACCOUNT)
        return json.loads(text) if text else None

    def delete(self) -> None:
        if self.file is not None:
            self.file.unlink(missing_ok=True)
            return
        import keyring
        from keyring.errors import PasswordDeleteError

        try:
            keyring.delete_password(SERVICE, ACCOUNT)
        except PasswordDeleteError:
            pass
