"""The mail MCP server as a real stdio subprocess against a real Dovecot (IMAP) and an aiosmtpd
SMTP server that delivers into Dovecot: what the owner would check in their own mail client."""

from __future__ import annotations

import itertools
import socket
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from email import policy
from email.parser import BytesParser
from typing import Any

import pytest
from imapclient import IMAPClient
from mcp import Client

from actors.store.migrate import migrate
from actors.store.store import Store
from tests.mail_servers import INJECTION, PDF, REFUSED_DOMAIN, Dovecot, SmtpSink, seed
from tests.server_proc import free_port
from tests.test_servers_core_web import served, text_of

pytestmark = pytest.mark.e2e

_names = itertools.count(1)


@dataclass
class Mail:
    dovecot: Dovecot
    sink: SmtpSink
    database: str


@dataclass
class Account:
    address: str
    password: str
    uids: dict[str, int]


@pytest.fixture(scope="module")
def servers() -> Iterator[tuple[Dovecot, SmtpSink]]:
    dovecot = Dovecot()
    sink = SmtpSink(dovecot)
    try:
        dovecot.start()
        sink.start()
        yield dovecot, sink
    finally:
        sink.stop()
        dovecot.close()


@pytest.fixture(scope="module")
async def mail(servers: tuple[Dovecot, SmtpSink], tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Mail]:
    url = f"sqlite+aiosqlite:///{tmp_path_factory.mktemp('mail-store') / 't.db'}"
    store = Store.open(url)
    await migrate(store)
    await store.close()
    yield Mail(*servers, database=url)


@pytest.fixture
def owner(mail: Mail) -> Account:
    """A fresh mailbox of its own for each test, seeded with the four test messages."""
    name = f"owner{next(_names)}"
    address = mail.dovecot.add_user(name, f"{name}-pass")
    return Account(address, f"{name}-pass", seed(mail.dovecot, address))


def account_env(mail: Mail, account: Account, **changes: str) -> dict[str, str]:
    env = {"IRIIS_MAIL_IMAP_HOST": "127.0.0.1", "IRIIS_MAIL_IMAP_PORT": str(mail.dovecot.port),
           "IRIIS_MAIL_SMTP_HOST": "127.0.0.1", "IRIIS_MAIL_SMTP_PORT": str(mail.sink.port),
           "IRIIS_MAIL_USER": account.address, "IRIIS_MAIL_PASSWORD": account.password,
           "IRIIS_MAIL_SECURITY": "plain", "IRIIS_MAIL_TIMEOUT": "10", "IRIIS_TIMEZONE": "UTC",
           "IRIIS_DATABASE_URL": mail.database}
    return {**env, **changes}


def imap(mail: Mail, address: str) -> IMAPClient:
    """A plain IMAP login, as the owner's own mail client would make."""
    return mail.dovecot.login(address)


def folder_messages(mail: Mail, address: str, folder: str) -> dict[int, tuple[list[bytes], Any]]:
    """uid -> (flags, parsed message) of every message in `folder` ({} when there is no such folder)."""
    client = imap(mail, address)
    try:
        if not client.folder_exists(folder):
            return {}
        client.select_folder(folder, readonly=True)
        data = client.fetch(client.search(), ["FLAGS", "BODY.PEEK[]"])
        return {uid: (list(item[b"FLAGS"]), BytesParser(policy=policy.default).parsebytes(item[b"BODY[]"]))
                for uid, item in data.items()}
    finally:
        client.logout()


async def call(client: Client, tool: str, arguments: dict[str, Any]) -> tuple[bool, str, dict[str, Any]]:
    result = await client.call_tool(tool, arguments)
    return result.is_error, text_of(result), result.structured_content or {}


async def test_tools_are_there_only_when_an_account_is_configured(mail: Mail, owner: Account) -> None:
    async with served("mail", {"IRIIS_DATABASE_URL": mail.database}) as client:
        assert (await client.list_tools()).tools == []
        assert "IRIIS_MAIL_IMAP_HOST" in (client.instructions or "")
    outside = account_env(mail, owner, IRIIS_MAIL_IMAP_HOST="imap.example.com")
    async with served("mail", outside) as client:
        assert (await client.list_tools()).tools == []
        assert "plain is only allowed to this machine" in (client.instructions or "")
    async with served("mail", account_env(mail, owner)) as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        assert set(tools) == {"list_mail", "read_mail", "move_mail", "flag_mail", "archive_mail", "draft_mail",
                              "send_mail"}
        for name in ("list_mail", "read_mail"):
            assert tools[name].annotations is not None and tools[name].annotations.read_only_hint
        for name in ("move_mail", "flag_mail", "archive_mail", "draft_mail"):
            assert tools[name].annotations is not None and tools[name].annotations.destructive_hint is False
        assert "ctx" not in tools["read_mail"].input_schema["properties"]
        assert owner.address in (client.instructions or "")


async def test_list_and_search(mail: Mail, owner: Account) -> None:
    uids = owner.uids
    async with served("mail", account_env(mail, owner)) as client:
        error, text, data = await call(client, "list_mail", {})
        assert not error
        lines = text.splitlines()
        assert lines[0] == "INBOX: 4 of 4 messages, newest first:"
        assert lines[1] == f"#{uids['trip']} · Ana Lopes <ana@example.test> · Trip to Lisbon · 2026-12-06 09:30 · unread"
        assert [line.split(" · ")[0] for line in lines[1:]] == [
            f"#{uids[k]}" for k in ("trip", "evil", "budget", "news")]
        assert lines[3].endswith("· unread · attachment") and "unread" not in lines[4]
        assert data["sources"] == ["mail:ana@example.test", "mail:bob@example.test", "mail:mallory@evil.example",
                                   "mail:news@shop.example"]

        async def subjects(**arguments: Any) -> list[str]:
            error, text, data = await call(client, "list_mail", arguments)
            assert not error, text
            return [row["subject"] for row in data["messages"]]

        assert await subjects(unread=True) == ["Trip to Lisbon", "Urgent: account notice", "Budget for the trip"]
        assert await subjects(unread=False) == ["Weekly deals"]
        assert await subjects(sender="ana") == ["Trip to Lisbon"]
        assert await subjects(subject="BUDGET") == ["Budget for the trip"]
        assert await subjects(since="3 days ago") == ["Trip to Lisbon", "Urgent: account notice"]
        week_ago = (datetime.now(timezone.utc) - timedelta(days=7)).date().isoformat()
        assert await subjects(since=week_ago) == ["Trip to Lisbon", "Urgent: account notice", "Budget for the trip"]
        assert await subjects(sender="nobody-sent-this") == []
        assert await subjects(limit=1) == ["Trip to Lisbon"]
        assert (await call(client, "list_mail", {"limit": 2}))[1].startswith("INBOX: 2 of 4 messages")
        assert (await call(client, "list_mail", {"limit": 100}))[0] is False

        for arguments, says in (({"limit": 0}, "limit"), ({"limit": 101}, "limit"),
                                ({"since": "the day the music died"}, "could not read the date"),
                                ({"folder": "Nope"}, "there is no folder 'Nope'; the folders are: INBOX")):
            error, text, _ = await call(client, "list_mail", arguments)
            assert error and says in text, (arguments, text)


async def test_read_plain_html_and_an_injected_instruction(mail: Mail, owner: Account) -> None:
    uids = owner.uids
    async with served("mail", account_env(mail, owner)) as client:
        error, text, data = await call(client, "read_mail", {"uid": uids["trip"]})
        assert not error
        assert text.startswith(f"Message #{uids['trip']} in INBOX\nFrom: Ana Lopes <ana@example.test>\n"
                               f"To: {owner.address}\nDate: 2026-12-06 09:30\nSubject: Trip to Lisbon\n")
        assert "Shall we go to Lisbon in March?\nI found cheap flights." in text
        assert data["sources"] == ["mail:ana@example.test"] and data["files"] == [] and data["file_id"] is None
        # Reading marks it seen, as a mail client does.
        assert b"\\Seen" in folder_messages(mail, owner.address, "INBOX")[uids["trip"]][0]

        error, text, _ = await call(client, "read_mail", {"uid": uids["news"]})
        assert not error and "Half price on walking boots this week." in text and "Weekly deals" in text
        assert "script-leak" not in text and "style-leak" not in text and "<p>" not in text

        error, text, data = await call(client, "read_mail", {"uid": uids["evil"]})
        assert not error and INJECTION in text  # shown as the sender's text, for the model to weigh
        assert "written by mallory@evil.example" in text
        assert data["sources"] == ["mail:mallory@evil.example"]


async def test_attachments_land_in_the_files_table(mail: Mail, owner: Account) -> None:
    async with served("mail", account_env(mail, owner)) as client:
        error, text, data = await call(client, "read_mail", {"uid": owner.uids["budget"]})
    assert not error, text
    pdf, notes = data["attachments"]
    assert data["file_id"] == pdf["file_id"] and data["files"] == [pdf["file_id"], notes["file_id"]]
    assert (pdf["name"], pdf["mime"], pdf["size"]) == ("budget.pdf", "application/pdf", len(PDF))
    assert (notes["name"], notes["mime"]) == ("notes.txt", "text/plain")
    assert f"[file:{pdf['file_id']}] budget.pdf (application/pdf, {len(PDF)} bytes)" in text
    assert f"[file:{notes['file_id']}] notes.txt (text/plain," in text
    store = Store.open(mail.database)
    try:
        found = await store.get_file(pdf["file_id"])
        assert found is not None and found[1] == PDF and found[0].name == "budget.pdf"
        found = await store.get_file(notes["file_id"])
        # A text part travels with CRLF line ends (its canonical form) and is saved so.
        assert found is not None and found[1].replace(b"\r\n", b"\n") == b"Hotel Sol, 3 nights\nHotel Mar, 2 nights\n"
    finally:
        await store.close()


async def test_move_flag_and_archive_show_in_a_mail_client(mail: Mail, owner: Account) -> None:
    uids = owner.uids
    client = imap(mail, owner.address)
    client.create_folder("Trips")
    client.logout()
    async with served("mail", account_env(mail, owner)) as tools:
        error, text, _ = await call(tools, "move_mail", {"uid": uids["trip"], "to_folder": "Trips"})
        assert not error and text == f"moved #{uids['trip']} from INBOX to Trips"
        moved = folder_messages(mail, owner.address, "Trips")
        assert [m["Subject"] for _, m in moved.values()] == ["Trip to Lisbon"]
        assert uids["trip"] not in folder_messages(mail, owner.address, "INBOX")

        error, text, _ = await call(tools, "flag_mail", {"uid": uids["budget"], "flag": "flagged"})
        assert not error and b"\\Flagged" in folder_messages(mail, owner.address, "INBOX")[uids["budget"]][0]
        await call(tools, "flag_mail", {"uid": uids["news"], "flag": "unseen"})
        assert b"\\Seen" not in folder_messages(mail, owner.address, "INBOX")[uids["news"]][0]
        await call(tools, "flag_mail", {"uid": uids["budget"], "flag": "seen"})
        await call(tools, "flag_mail", {"uid": uids["budget"], "flag": "unflagged"})
        assert folder_messages(mail, owner.address, "INBOX")[uids["budget"]][0] == [b"\\Seen"]

        error, text, _ = await call(tools, "archive_mail", {"uid": uids["news"]})
        assert not error and text == f"archived #{uids['news']} (moved from INBOX to Archive)"
        assert [m["Subject"] for _, m in folder_messages(mail, owner.address, "Archive").values()] == ["Weekly deals"]

        for tool, arguments, says in (
                ("move_mail", {"uid": uids["evil"], "to_folder": "Nowhere"}, "there is no folder 'Nowhere'"),
                ("move_mail", {"uid": 999, "to_folder": "Trips"}, "there is no message #999 in INBOX"),
                ("flag_mail", {"uid": 999, "flag": "seen"}, "there is no message #999 in INBOX"),
                ("flag_mail", {"uid": uids["evil"], "flag": "starred"}, "flag"),
                ("read_mail", {"uid": 10**30}, "uid"),
                ("read_mail", {"uid": 0}, "uid")):
            error, text, _ = await call(tools, tool, arguments)
            assert error and says in text, (tool, arguments, text)
            assert "Traceback" not in text
        # The server is still answering after the refusals.
        assert not (await call(tools, "list_mail", {"folder": "Archive"}))[0]


async def test_a_draft_lands_in_drafts(mail: Mail, owner: Account) -> None:
    async with served("mail", account_env(mail, owner)) as client:
        error, text, data = await call(client, "draft_mail", {
            "to": "ana@example.test", "subject": "", "body": "Yes, March works for me.",
            "reply_to_uid": owner.uids["trip"]})
    assert not error, text
    assert data["folder"] == "Drafts" and text == f"saved a draft to ana@example.test in Drafts as #{data['uid']}"
    flags, draft = folder_messages(mail, owner.address, "Drafts")[data["uid"]]
    assert b"\\Draft" in flags
    assert draft["Subject"] == "Re: Trip to Lisbon" and draft["In-Reply-To"] == "<trip-1@example.test>"
    assert "> Hi! Shall we go to Lisbon in March?\r\n> I found cheap flights." in draft.get_content()
    # Replying reads the original without marking it seen.
    assert b"\\Seen" not in folder_messages(mail, owner.address, "INBOX")[owner.uids["trip"]][0]


async def test_send_delivers_keeps_a_copy_and_threads_a_reply(mail: Mail, owner: Account) -> None:
    ana = Account(mail.dovecot.add_user(f"ana{next(_names)}", "ana-pass"), "ana-pass", {})
    async with served("mail", account_env(mail, owner)) as client:
        error, text, draft = await call(client, "draft_mail", {"to": ana.address, "subject": "x", "body": "draft"})
        assert not error
        error, text, sent = await call(client, "send_mail", {
            "to": f"Ana <{ana.address}>, someone@{REFUSED_DOMAIN}", "subject": "Dinner", "body": "At 8?",
            "cc": ["bob@example.test"], "reply_to_uid": owner.uids["trip"], "draft_uid": draft["uid"]})
    assert not error, text
    assert text == (f"sent to {ana.address}, bob@example.test (subject 'Re: Dinner'); "
                    f"the server refused someone@{REFUSED_DOMAIN}")
    inbox = [m for _, m in folder_messages(mail, ana.address, "INBOX").values()]
    assert len(inbox) == 1
    received = inbox[0]
    assert (received["From"], received["Subject"], received["Message-ID"]) == (
        owner.address, "Re: Dinner", sent["message_id"])
    assert received["In-Reply-To"] == "<trip-1@example.test>"
    assert received["References"] == "<trip-1@example.test>"
    assert received.get_content().replace("\r\n", "\n").startswith("At 8?\n\nOn 2026-12-06 09:30, Ana Lopes <ana@example.test> wrote:\n"
                                             "> Hi! Shall we go to Lisbon in March?\n")
    copies = folder_messages(mail, owner.address, "Sent")
    assert [(m["Message-ID"], b"\\Seen" in flags) for flags, m in copies.values()] == [(sent["message_id"], True)]
    assert folder_messages(mail, owner.address, "Drafts") == {}
    assert b"\\Answered" in folder_messages(mail, owner.address, "INBOX")[owner.uids["trip"]][0]
    envelope = next(r for r in mail.sink.received if ana.address in r.rcpt_tos)
    assert envelope.authenticated and envelope.mail_from == owner.address


async def test_send_limits_and_refusals(mail: Mail, owner: Account) -> None:
    fifty = [f"p{n}@elsewhere.example" for n in range(50)]
    async with served("mail", account_env(mail, owner)) as client:
        error, text, data = await call(client, "send_mail", {"to": fifty, "subject": "s" * 998, "body": "hi"})
        assert not error and data["to"] == fifty, text
        for arguments, says in (
                ({"to": fifty, "cc": "one@elsewhere.example"}, "too many recipients (51); at most 50"),
                ({"to": "ana"}, "'ana' is not an email address"),
                ({"to": "ana@example.test", "subject": "s" * 999}, "998"),
                ({"to": "ana@example.test", "draft_uid": 10**30}, "draft_uid"),
                ({"to": "ana@example.test", "reply_to_uid": 4_000_000}, "there is no message #4000000 in INBOX")):
            error, text, _ = await call(client, "send_mail", {"subject": "s", "body": "b", **arguments})
            assert error and says in text, (arguments, text)
    assert not [r for r in mail.sink.received if "one@elsewhere.example" in r.rcpt_tos]


async def test_a_server_that_is_gone_then_back(mail: Mail, owner: Account) -> None:
    closed = free_port()
    async with served("mail", account_env(mail, owner, IRIIS_MAIL_SMTP_PORT=str(closed))) as client:
        error, text, _ = await call(client, "send_mail", {"to": "ana@example.test", "subject": "s", "body": "b"})
        assert error and f"could not reach the mail server at 127.0.0.1:{closed}: Connection refused" in text
        assert not (await call(client, "list_mail", {}))[0]
        mail.dovecot.stop()
        try:
            error, text, _ = await call(client, "list_mail", {})
            assert error and (f"could not reach the mail server at 127.0.0.1:{mail.dovecot.port}: "
                              "Connection refused") in text
        finally:
            mail.dovecot.start()
        error, text, _ = await call(client, "list_mail", {})
        assert not error and text.startswith("INBOX: 4 of 4 messages")


async def test_a_server_that_never_answers_times_out(mail: Mail, owner: Account) -> None:
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", free_port()))
        silent.listen(4)  # accepts connections, never greets
        port = silent.getsockname()[1]
        env = account_env(mail, owner, IRIIS_MAIL_IMAP_PORT=str(port), IRIIS_MAIL_TIMEOUT="1")
        async with served("mail", env) as client:
            error, text, _ = await call(client, "list_mail", {})
    assert error and f"could not reach the mail server at 127.0.0.1:{port}: timed out" in text


# Last in this module: Dovecot makes every later login from the same address wait a few seconds
# after a failed one (its auth penalty), and the tests of a module run in file order.
async def test_a_wrong_password_is_a_clear_error(mail: Mail, owner: Account) -> None:
    async with served("mail", account_env(mail, owner, IRIIS_MAIL_PASSWORD="wrong-horse-battery")) as client:
        for tool, arguments in (("list_mail", {}), ("send_mail", {"to": "ana@example.test", "subject": "s",
                                                                  "body": "b"})):
            error, text, _ = await call(client, tool, arguments)
            assert error, text
            assert text.endswith(f": the mail server refused the login for {owner.address}: "
                                 "check IRIIS_MAIL_USER and IRIIS_MAIL_PASSWORD")
            assert "wrong-horse" not in text
