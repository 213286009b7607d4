"""The mail account, from environment variables (or a secrets file): pure, no network.

* ``IRIIS_MAIL_IMAP_HOST``, ``IRIIS_MAIL_SMTP_HOST``, ``IRIIS_MAIL_USER``, ``IRIIS_MAIL_PASSWORD``:
  required; without all four the account is not configured (`mail_settings` answers None).
* ``IRIIS_MAIL_SECURITY``: ``ssl`` (the default: TLS from the first byte), ``starttls`` (plain,
  then upgraded with STARTTLS before the login) or ``plain`` (no TLS at all, allowed only to a
  loopback host: tests and local bridges such as Proton Bridge). With ``ssl``, the STARTTLS ports
  143 (IMAP) and 587 (SMTP) upgrade with STARTTLS, so a provider's usual 993 + 587 works.
* ``IRIIS_MAIL_IMAP_PORT`` / ``IRIIS_MAIL_SMTP_PORT``: default 993 / 465 (``ssl``), 143 / 587
  (``starttls``), 143 / 25 (``plain``).
* ``IRIIS_MAIL_ADDRESS``: the From address (default: the user, when it is an address).
* ``IRIIS_MAIL_DRAFTS``, ``IRIIS_MAIL_ARCHIVE``, ``IRIIS_MAIL_SENT``: folder names (default
  Drafts, Archive, Sent); ``IRIIS_MAIL_SENT=none`` keeps no copy of sent mail (for a provider
  that files one itself).
* ``IRIIS_MAIL_TIMEOUT``: seconds for one server exchange (default 30).
* ``IRIIS_MAIL_FILE``: a secrets file of ``KEY=VALUE`` lines, read for the variables above that
  the environment does not set.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError

from actors.common.errors import IriisError

Security = Literal["ssl", "starttls", "plain"]
PREFIX = "IRIIS_MAIL_"
REQUIRED = ("IRIIS_MAIL_IMAP_HOST", "IRIIS_MAIL_SMTP_HOST", "IRIIS_MAIL_USER", "IRIIS_MAIL_PASSWORD")
DEFAULT_PORTS: dict[str, tuple[int, int]] = {"ssl": (993, 465), "starttls": (143, 587), "plain": (143, 25)}
STARTTLS_PORTS = frozenset({143, 587, 25})
NO_SENT = "none"


class MailConfigError(IriisError, ValueError):
    """The mail settings are present but wrong; the message says which variable to fix."""

    code = "mail_config"


class MailSettings(BaseModel):
    """One mail account: where its servers are, how to log in, and its folder names."""

    model_config = ConfigDict(frozen=True)

    imap_host: str = Field(min_length=1)
    imap_port: int = Field(ge=1, le=65535)
    smtp_host: str = Field(min_length=1)
    smtp_port: int = Field(ge=1, le=65535)
    user: str = Field(min_length=1)
    password: SecretStr
    address: str = Field(min_length=3)
    security: Security = "ssl"
    drafts: str = Field(default="Drafts", min_length=1)
    archive: str = Field(default="Archive", min_length=1)
    sent: str | None = "Sent"
    timeout: float = Field(default=30.0, gt=0, le=600)

    def imap_tls(self) -> Literal["ssl", "starttls", "plain"]:
        return _tls(self.security, self.imap_port)

    def smtp_tls(self) -> Literal["ssl", "starttls", "plain"]:
        return _tls(self.security, self.smtp_port)


def _tls(security: Security, port: int) -> Literal["ssl", "starttls", "plain"]:
    if security == "ssl" and port in STARTTLS_PORTS:
        return "starttls"
    return security


def is_loopback(host: str) -> bool:
    """Whether `host` names this machine without asking DNS: localhost or a loopback address."""
    name = host.strip().strip("[]").lower()
    if name == "localhost" or name.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def read_secrets_file(text: str) -> dict[str, str]:
    """`KEY=VALUE` lines (blank lines, `# comments` and a leading `export ` allowed; a value may be
    quoted). Only the IRIIS_MAIL_ keys are kept."""
    found: dict[str, str] = {}
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        line = line.removeprefix("export ").strip()
        key, sep, value = line.partition("=")
        key, value = key.strip(), value.strip()
        if not sep or not key.startswith(PREFIX):
            continue
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
        found[key] = value
    return found


def _merged(env: Mapping[str, str]) -> dict[str, str]:
    """The IRIIS_MAIL_ variables: the environment's, then the secrets file's for those unset."""
    values = {k: v.strip() for k, v in env.items() if k.startswith(PREFIX) and v.strip()}
    path = values.get("IRIIS_MAIL_FILE")
    if path:
        try:
            text = Path(path).expanduser().read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise MailConfigError(f"IRIIS_MAIL_FILE: could not read {path} ({type(exc).__name__})") from None
        for key, value in read_secrets_file(text).items():
            values.setdefault(key, value)
    return values


def _port(values: Mapping[str, str], key: str, default: int) -> int:
    raw = values.get(key)
    if raw is None:
        return default
    try:
        return int(raw)
    except ValueError:
        raise MailConfigError(f"{key} must be a port number, got {raw!r}") from None


def _timeout(values: Mapping[str, str]) -> float:
    raw = values.get("IRIIS_MAIL_TIMEOUT", "30")
    try:
        return float(raw)
    except ValueError:
        raise MailConfigError(f"IRIIS_MAIL_TIMEOUT must be a number of seconds, got {raw!r}") from None


def mail_settings(env: Mapping[str, str]) -> MailSettings | None:
    """The account `env` configures; None when it configures none (a required variable unset).
    Raises MailConfigError, naming the variable, when a value is wrong."""
    values = _merged(env)
    if any(not values.get(key) for key in REQUIRED):
        return None
    security = values.get("IRIIS_MAIL_SECURITY", "ssl").lower()
    if security not in DEFAULT_PORTS:
        raise MailConfigError(f"IRIIS_MAIL_SECURITY must be ssl, starttls or plain, got {security!r}")
    imap_default, smtp_default = DEFAULT_PORTS[security]
    user = values["IRIIS_MAIL_USER"]
    address = values.get("IRIIS_MAIL_ADDRESS") or user
    if "@" not in address:
        raise MailConfigError("IRIIS_MAIL_ADDRESS is needed (the From address): the user name is not an address")
    if security == "plain":
        for key in ("IRIIS_MAIL_IMAP_HOST", "IRIIS_MAIL_SMTP_HOST"):
            if not is_loopback(values[key]):
                raise MailConfigError(f"IRIIS_MAIL_SECURITY=plain is only allowed to this machine (localhost, "
                                      f"127.0.0.1), not {key}={values[key]}: use ssl or starttls")
    sent = values.get("IRIIS_MAIL_SENT", "Sent")
    try:
        return MailSettings(
            imap_host=values["IRIIS_MAIL_IMAP_HOST"], imap_port=_port(values, "IRIIS_MAIL_IMAP_PORT", imap_default),
            smtp_host=values["IRIIS_MAIL_SMTP_HOST"], smtp_port=_port(values, "IRIIS_MAIL_SMTP_PORT", smtp_default),
            user=user, password=SecretStr(values["IRIIS_MAIL_PASSWORD"]), address=address,
            security=security,  # type: ignore[arg-type]
            drafts=values.get("IRIIS_MAIL_DRAFTS", "Drafts"), archive=values.get("IRIIS_MAIL_ARCHIVE", "Archive"),
            sent=None if sent.lower() == NO_SENT else sent, timeout=_timeout(values),
        )
    except ValidationError as exc:
        where = ", ".join(f"{PREFIX}{'.'.join(str(p) for p in e['loc']).upper()}: {e['msg']}" for e in exc.errors())
        raise MailConfigError(f"the mail settings are not valid ({where})") from None
