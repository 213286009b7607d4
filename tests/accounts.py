"""The owner's accounts for the shared test server: a real Dovecot with an SMTP server that
delivers into it, and a real Radicale, started once per run for the `server` group.

`OwnerAccounts.start()` seeds the owner's mailbox (tests/mail_servers.py `seed`) and calendar
(tests/calendar_servers.py `seed`) through their protocols; `env()` is what `iriis serve` is
given, and `MCP_YAML` the two servers' entries in the shared server's mcp.yaml (the same
commands, tiers and keywords as the shipped mcp.yaml).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import yaml

from tests.calendar_servers import OWNER as CAL_OWNER
from tests.calendar_servers import OWNER_EMAIL as CAL_EMAIL
from tests.calendar_servers import PASSWORD as CAL_PASSWORD
from tests.calendar_servers import ZONE, Radicale
from tests.calendar_servers import seed as seed_calendar
from tests.mail_servers import Dovecot, SmtpSink
from tests.mail_servers import seed as seed_mail

ROOT = Path(__file__).resolve().parent.parent
MAIL_USER = "owner"
MAIL_PASSWORD = "owner-mail-pass"


def shipped_entries() -> str:
    """The `mail` and `calendar` entries of the shipped mcp.yaml, as YAML under `servers:`."""
    servers = yaml.safe_load((ROOT / "mcp.yaml").read_text())["servers"]
    picked = {name: servers[name] for name in ("mail", "calendar")}
    return "\n".join("  " + line for line in yaml.safe_dump(picked, sort_keys=False).splitlines())


@dataclass
class OwnerAccounts:
    dovecot: Dovecot = field(default_factory=Dovecot)
    radicale: Radicale = field(default_factory=Radicale)
    sink: SmtpSink | None = None
    address: str = ""
    uids: dict[str, int] = field(default_factory=dict)

    def start(self) -> OwnerAccounts:
        self.dovecot.start()
        self.sink = SmtpSink(self.dovecot).start()
        self.address = self.dovecot.add_user(MAIL_USER, MAIL_PASSWORD)
        self.uids = seed_mail(self.dovecot, self.address)
        self.radicale.start()
        self.radicale.make_collections()
        seed_calendar(self.radicale, datetime.now(ZONE).date())
        return self

    def env(self) -> dict[str, str]:
        assert self.sink is not None
        return {"IRIIS_MAIL_IMAP_HOST": "127.0.0.1", "IRIIS_MAIL_IMAP_PORT": str(self.dovecot.port),
                "IRIIS_MAIL_SMTP_HOST": "127.0.0.1", "IRIIS_MAIL_SMTP_PORT": str(self.sink.port),
                "IRIIS_MAIL_USER": self.address, "IRIIS_MAIL_PASSWORD": MAIL_PASSWORD,
                "IRIIS_MAIL_SECURITY": "plain", "IRIIS_MAIL_TIMEOUT": "20",
                "IRIIS_CALDAV_URL": self.radicale.url, "IRIIS_CALDAV_USER": CAL_OWNER,
                "IRIIS_CALDAV_PASSWORD": CAL_PASSWORD, "IRIIS_CALDAV_EMAIL": CAL_EMAIL}

    def close(self) -> None:
        try:
            if self.sink is not None:
                self.sink.stop()
            self.radicale.close()
        finally:
            self.dovecot.close()
