"""A thin, synchronous IMAP (imapclient) and SMTP (smtplib) client for one mail account.

Each call opens its own connection, logs in, does its work and logs out: a personal mailbox sees
a few calls a minute, and a fresh connection survives a server restart between two of them. Every
failure is a MailError whose text says what happened and what to do next, never a password. The
MCP server runs these calls in a thread (asyncio.to_thread) under a deadline.
"""

from __future__ import annotations

import re
import smtplib
import ssl
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from email.message import EmailMessage
from typing import Any
from zoneinfo import ZoneInfo

from imapclient import IMAPClient
from imapclient import imapclient as imap
from imapclient.exceptions import IMAPClientAbortError, IMAPClientError, LoginError

from actors.common.errors import IriisError
from actors.tools.mail import messages
from actors.tools.mail.messages import MAX_UID, Summary
from actors.tools.mail.settings import MailSettings

MAX_MESSAGE_BYTES = 60 * 1024 * 1024
MAX_FOLDER_CHARS = 200
FLAGS = {"seen": (True, imap.SEEN), "unseen": (False, imap.SEEN),
         "flagged": (True, imap.FLAGGED), "unflagged": (False, imap.FLAGGED)}
_APPENDUID = re.compile(rb"APPENDUID\s+\d+\s+(\d+)", re.I)


class MailError(IriisError):
    """A mail operation that failed; the text is for the model and the owner (no secrets)."""

    code = "mail_error"


@dataclass
class SendReport:
    """What a send did: the recipients the server refused, and notes on the follow-up steps."""

    refused: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def _reason(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return str(exc) or type(exc).__name__


def check_uid(uid: int) -> None:
    if not 1 <= uid <= MAX_UID:
        raise MailError(f"#{uid} is not a message number: they run from 1 to {MAX_UID}; list_mail shows them")


def check_folder(name: str) -> str:
    cleaned = name.strip()
    if not cleaned or len(cleaned) > MAX_FOLDER_CHARS or any(ord(c) < 32 for c in cleaned):
        raise MailError(f"{name!r} is not a folder name")
    return cleaned


class MailClient:
    """The account's mailbox (IMAP) and outgoing server (SMTP)."""

    def __init__(self, settings: MailSettings) -> None:
        self.settings = settings

    # -- connections ------------------------------------------------------------------------

    def _unreachable(self, kind: str, exc: BaseException) -> MailError:
        """`kind`: IMAP or SMTP, the server that could not be reached."""
        host, port = ((self.settings.imap_host, self.settings.imap_port) if kind == "IMAP"
                      else (self.settings.smtp_host, self.settings.smtp_port))
        return MailError(f"could not reach the mail server at {host}:{port}: {_reason(exc)}; check that it "
                         f"is running, and IRIIS_MAIL_{kind}_HOST, IRIIS_MAIL_{kind}_PORT and IRIIS_MAIL_SECURITY")

    def _refused_login(self) -> MailError:
        return MailError(f"the mail server refused the login for {self.settings.user}: "
                         "check IRIIS_MAIL_USER and IRIIS_MAIL_PASSWORD")

    def _open_imap(self) -> IMAPClient:
        s = self.settings
        tls = s.imap_tls()
        context = ssl.create_default_context()
        try:
            client = IMAPClient(s.imap_host, s.imap_port, ssl=tls == "ssl",
                                ssl_context=context if tls == "ssl" else None, timeout=s.timeout)
            if tls == "starttls":
                client.starttls(context)
        except (OSError, IMAPClientError) as exc:
            raise self._unreachable("IMAP", exc) from None
        try:
            client.login(s.user, s.password.get_secret_value())
        except LoginError:
            client.shutdown()
            raise self._refused_login() from None
        except (OSError, IMAPClientError) as exc:
            client.shutdown()
            raise self._unreachable("IMAP", exc) from None
        return client

    @contextmanager
    def _imap(self) -> Iterator[IMAPClient]:
        client = self._open_imap()
        s = self.settings
        try:
            yield client
        except (OSError, IMAPClientAbortError) as exc:
            raise MailError(f"the connection to the mail server at {s.imap_host}:{s.imap_port} was lost: "
                            f"{_reason(exc)}; try again") from None
        except IMAPClientError as exc:
            raise MailError(f"the mail server answered: {_reason(exc)}") from None
        finally:
            try:
                client.logout()
            except (OSError, IMAPClientError):
                client.shutdown()

    # -- folders and messages ---------------------------------------------------------------

    def _select(self, client: IMAPClient, folder: str, readonly: bool) -> None:
        name = check_folder(folder)
        try:
            client.select_folder(name, readonly=readonly)
        except IMAPClientError:
            if client.folder_exists(name):
                raise
            raise MailError(f"there is no folder {name!r}; the folders are: {', '.join(self._names(client))}") from None

    @staticmethod
    def _names(client: IMAPClient) -> list[str]:
        return [str(name) for flags, _, name in client.list_folders() if b"\\Noselect" not in flags]

    def _require(self, client: IMAPClient, folder: str, uid: int) -> dict[bytes, Any]:
        check_uid(uid)
        found = client.fetch([uid], ["FLAGS", "RFC822.SIZE"])
        if uid not in found:
            raise MailError(f"there is no message #{uid} in {folder}: list_mail shows the message numbers")
        return found[uid]

    def _special(self, client: IMAPClient, configured: str, flag: bytes) -> str:
        """The folder for drafts, sent mail or the archive: the configured one, else the one the
        server marks with the special-use flag, else the configured one created now."""
        name = check_folder(configured)
        if client.folder_exists(name):
            return name
        found = client.find_special_folder(flag)
        if found:
            return str(found)
        client.create_folder(name)
        client.subscribe_folder(name)
        return name

    def folders(self) -> list[str]:
        with self._imap() as client:
            return self._names(client)

    def list_messages(self, folder: str, criteria: list[Any], limit: int,
                      zone: ZoneInfo) -> tuple[int, list[Summary]]:
        """The newest `limit` messages matching `criteria`, newest first, and how many matched."""
        with self._imap() as client:
            self._select(client, folder, readonly=True)
            charset = "UTF-8" if messages.needs_utf8(criteria) else None
            uids = sorted(client.search(criteria, charset=charset), reverse=True)
            chosen = uids[:limit]
            data = client.fetch(chosen, ["FLAGS", "INTERNALDATE", "BODYSTRUCTURE", "BODY.PEEK[HEADER]"]) if chosen else {}
        rows = []
        for uid in chosen:
            item = data.get(uid)
            if item is None:  # expunged between the search and the fetch
                continue
            internal = item.get(b"INTERNALDATE")
            rows.append(messages.summarize(
                uid, messages.parse(item.get(b"BODY[HEADER]", b"")), item.get(b"FLAGS", ()), zone,
                internal_date=internal if isinstance(internal, datetime) else None,
                has_attachments=messages.structure_has_attachment(item.get(b"BODYSTRUCTURE"))))
        return len(uids), rows

    def read_message(self, folder: str, uid: int, mark_seen: bool = True) -> tuple[EmailMessage, list[bytes], datetime | None]:
        """Message `uid` parsed, its flags and its arrival time; reading it marks it seen unless
        `mark_seen` is False (a reply reads the original without changing it)."""
        with self._imap() as client:
            self._select(client, folder, readonly=not mark_seen)
            info = self._require(client, folder, uid)
            size = int(info.get(b"RFC822.SIZE", 0))
            if size > MAX_MESSAGE_BYTES:
                raise MailError(f"message #{uid} is {messages.human_size(size)}, larger than this tool reads "
                                f"({messages.human_size(MAX_MESSAGE_BYTES)})")
            item = client.fetch([uid], ["BODY.PEEK[]", "FLAGS", "INTERNALDATE"])[uid]
            flags = list(item.get(b"FLAGS", ()))
            if mark_seen:
                client.add_flags([uid], [imap.SEEN])
                flags.append(imap.SEEN)
        internal = item.get(b"INTERNALDATE")
        return (messages.parse(item.get(b"BODY[]", b"")), flags,
                internal if isinstance(internal, datetime) else None)

    def move(self, folder: str, uid: int, to_folder: str) -> str:
        """Move message `uid` into `to_folder` (which must exist); answers the folder's name."""
        with self._imap() as client:
            self._select(client, folder, readonly=False)
            self._require(client, folder, uid)
            target = check_folder(to_folder)
            if not client.folder_exists(target):
                raise MailError(f"there is no folder {target!r}; the folders are: {', '.join(self._names(client))}")
            self._move(client, uid, target)
            return target

    def archive(self, folder: str, uid: int) -> str:
        with self._imap() as client:
            self._select(client, folder, readonly=False)
            self._require(client, folder, uid)
            target = self._special(client, self.settings.archive, imap.ARCHIVE)
            self._move(client, uid, target)
            return target

    @staticmethod
    def _move(client: IMAPClient, uid: int, target: str) -> None:
        if client.has_capability("MOVE"):
            client.move([uid], target)
            return
        client.copy([uid], target)
        MailClient._expunge(client, uid)

    @staticmethod
    def _expunge(client: IMAPClient, uid: int) -> None:
        client.add_flags([uid], [imap.DELETED])
        if client.has_capability("UIDPLUS"):
            client.uid_expunge([uid])
        else:
            client.expunge()

    def flag(self, folder: str, uid: int, flag: str) -> None:
        self._mark(folder, uid, *FLAGS[flag])

    def _mark(self, folder: str, uid: int, add: bool, name: bytes) -> None:
        with self._imap() as client:
            self._select(client, folder, readonly=False)
            self._require(client, folder, uid)
            (client.add_flags if add else client.remove_flags)([uid], [name])

    def _append(self, client: IMAPClient, folder: str, message: EmailMessage, flags: list[bytes]) -> int | None:
        """Append `message` to `folder`; its new uid, when the server says it (UIDPLUS) or a
        search by its Message-ID finds it."""
        answer = client.append(folder, message.as_bytes(), flags=flags)
        found = _APPENDUID.search(answer if isinstance(answer, bytes) else str(answer).encode())
        if found:
            return int(found.group(1))
        message_id = messages.header(message, "Message-ID")
        if not message_id:
            return None
        client.select_folder(folder, readonly=True)
        uids = client.search(["HEADER", "Message-ID", message_id])
        return max(uids) if uids else None

    def save_draft(self, message: EmailMessage) -> tuple[str, int | None]:
        """Append `message` to the drafts folder (created when missing) flagged \\Draft."""
        with self._imap() as client:
            folder = self._special(client, self.settings.drafts, imap.DRAFTS)
            return folder, self._append(client, folder, message, [imap.DRAFT, imap.SEEN])

    # -- sending ----------------------------------------------------------------------------

    def _open_smtp(self) -> smtplib.SMTP:
        s = self.settings
        tls = s.smtp_tls()
        context = ssl.create_default_context()
        try:
            if tls == "ssl":
                smtp: smtplib.SMTP = smtplib.SMTP_SSL(s.smtp_host, s.smtp_port, timeout=s.timeout, context=context)
            else:
                smtp = smtplib.SMTP(s.smtp_host, s.smtp_port, timeout=s.timeout)
            if tls == "starttls":
                smtp.starttls(context=context)
            smtp.ehlo_or_helo_if_needed()
        except smtplib.SMTPNotSupportedError:
            raise MailError(f"the mail server at {s.smtp_host}:{s.smtp_port} does not offer STARTTLS: "
                            "check IRIIS_MAIL_SMTP_PORT and IRIIS_MAIL_SECURITY") from None
        except (OSError, smtplib.SMTPException) as exc:
            raise self._unreachable("SMTP", exc) from None
        if smtp.has_extn("auth"):
            try:
                smtp.login(s.user, s.password.get_secret_value())
            except smtplib.SMTPAuthenticationError:
                smtp.close()
                raise self._refused_login() from None
            except (OSError, smtplib.SMTPException) as exc:
                smtp.close()
                raise self._unreachable("SMTP", exc) from None
        return smtp

    def _submit(self, message: EmailMessage, recipients: list[str]) -> list[str]:
        """Hand `message` to the SMTP server for `recipients`; answers those it refused."""
        smtp = self._open_smtp()
        s = self.settings
        try:
            refused = smtp.send_message(message, from_addr=s.address, to_addrs=recipients)
        except smtplib.SMTPRecipientsRefused as exc:
            raise MailError(f"the mail server refused every recipient ({', '.join(exc.recipients)}); "
                            "nothing was sent") from None
        except smtplib.SMTPSenderRefused as exc:
            raise MailError(f"the mail server refused the sender address {s.address} ({exc.smtp_code}: "
                            f"{exc.smtp_error.decode(errors='replace')}): check IRIIS_MAIL_ADDRESS; "
                            "nothing was sent") from None
        except smtplib.SMTPDataError as exc:
            raise MailError(f"the mail server refused the message ({exc.smtp_code}: "
                            f"{exc.smtp_error.decode(errors='replace')}); nothing was sent") from None
        except (OSError, smtplib.SMTPException) as exc:
            raise MailError(f"sending through {s.smtp_host}:{s.smtp_port} failed: {_reason(exc)}; "
                            "it may not have been sent") from None
        finally:
            try:
                smtp.quit()
            except (OSError, smtplib.SMTPException):
                smtp.close()
        return sorted(refused)

    def send(self, message: EmailMessage, recipients: list[str], draft_uid: int | None = None,
             replied: tuple[str, int] | None = None) -> SendReport:
        """Send `message`, keep a copy in Sent, delete draft `draft_uid` and mark the message it
        answers (`replied`: folder and uid) answered. Once the message is sent, a failure of the
        follow-up steps is a note in the report, not an error (an error invites sending it twice)."""
        if draft_uid is not None:
            check_uid(draft_uid)
        report = SendReport(refused=self._submit(message, recipients))
        if replied is not None:
            try:
                self._mark(replied[0], replied[1], True, imap.ANSWERED)
            except MailError as exc:
                report.notes.append(f"#{replied[1]} was not marked answered ({exc})")
        if self.settings.sent is not None:
            try:
                with self._imap() as client:
                    folder = self._special(client, self.settings.sent, imap.SENT)
                    self._append(client, folder, message, [imap.SEEN])
            except MailError as exc:
                report.notes.append(f"no copy was saved in Sent ({exc})")
        if draft_uid is not None:
            try:
                self.delete_draft(draft_uid)
            except MailError as exc:
                report.notes.append(f"draft #{draft_uid} was not deleted ({exc})")
        return report

    def delete_draft(self, uid: int) -> None:
        with self._imap() as client:
            folder = self._special(client, self.settings.drafts, imap.DRAFTS)
            self._select(client, folder, readonly=False)
            flags = self._require(client, folder, uid).get(b"FLAGS", ())
            if imap.DRAFT not in flags:
                raise MailError(f"message #{uid} in {folder} is not a draft; it was left alone")
            self._expunge(client, uid)
