"""The mail tool's pure parts, in-process and without servers: the account settings, message
summaries and text, attachments, composing and replying, search criteria and the send preview."""

from __future__ import annotations

from datetime import date, datetime, timezone
from email import policy
from email.message import EmailMessage
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from actors.common.toolspec import ToolSpec
from actors.session.loop import question_for
from actors.tools.mail import messages
from actors.tools.mail.messages import MessageError
from actors.tools.mail.settings import MailConfigError, mail_settings, read_secrets_file
from actors.tools.previews import send_preview
from tests.mail_servers import with_body

UTC = ZoneInfo("UTC")
PARIS = ZoneInfo("Europe/Paris")
NOW = datetime(2026, 12, 9, 15, 0, tzinfo=timezone.utc)  # a Wednesday
BASE = {"IRIIS_MAIL_IMAP_HOST": "imap.example.com", "IRIIS_MAIL_SMTP_HOST": "smtp.example.com",
        "IRIIS_MAIL_USER": "owner@example.com", "IRIIS_MAIL_PASSWORD": "hunter2-secret"}


def _message(text: str | None = "Hello there.", html: str | None = None, **headers: str) -> EmailMessage:
    msg = EmailMessage()
    msg["From"] = headers.get("sender", "Ana Lopes <ana@example.com>")
    msg["To"] = headers.get("to", "owner@example.com")
    msg["Subject"] = headers.get("subject", "Trip to Lisbon")
    msg["Date"] = headers.get("date", "Sun, 06 Dec 2026 09:30:00 +0000")
    msg["Message-ID"] = headers.get("message_id", "<trip-1@example.com>")
    for name in ("References", "In-Reply-To"):
        if name.lower().replace("-", "_") in headers:
            msg[name] = headers[name.lower().replace("-", "_")]
    return messages.parse(with_body(msg, text, html).as_bytes(policy=policy.SMTP))


# -- settings ----------------------------------------------------------------------------------


def test_settings_need_the_four_required_variables() -> None:
    assert mail_settings({}) is None
    for key in BASE:
        assert mail_settings({k: v for k, v in BASE.items() if k != key}) is None
    assert mail_settings({**BASE, "IRIIS_MAIL_PASSWORD": "  "}) is None


def test_settings_defaults_follow_the_security() -> None:
    ssl = mail_settings(BASE)
    assert ssl is not None
    assert (ssl.imap_port, ssl.smtp_port, ssl.security) == (993, 465, "ssl")
    assert (ssl.imap_tls(), ssl.smtp_tls()) == ("ssl", "ssl")
    assert ssl.address == "owner@example.com"
    assert (ssl.drafts, ssl.archive, ssl.sent) == ("Drafts", "Archive", "Sent")
    assert "hunter2" not in repr(ssl) and "hunter2" not in str(ssl.model_dump())

    starttls = mail_settings({**BASE, "IRIIS_MAIL_SECURITY": "STARTTLS"})
    assert starttls is not None and (starttls.imap_port, starttls.smtp_port) == (143, 587)
    assert (starttls.imap_tls(), starttls.smtp_tls()) == ("starttls", "starttls")

    # A provider's usual pair, IMAP on 993 and submission on 587, under one `ssl`.
    mixed = mail_settings({**BASE, "IRIIS_MAIL_SMTP_PORT": "587"})
    assert mixed is not None and (mixed.imap_tls(), mixed.smtp_tls()) == ("ssl", "starttls")

    named = mail_settings({**BASE, "IRIIS_MAIL_ADDRESS": "me@example.org", "IRIIS_MAIL_DRAFTS": "Brouillons",
                           "IRIIS_MAIL_ARCHIVE": "All", "IRIIS_MAIL_SENT": "none", "IRIIS_MAIL_IMAP_PORT": "1143"})
    assert named is not None
    assert (named.address, named.drafts, named.archive, named.sent, named.imap_port) == (
        "me@example.org", "Brouillons", "All", None, 1143)


def test_plain_is_only_allowed_to_this_machine() -> None:
    local = {**BASE, "IRIIS_MAIL_SECURITY": "plain", "IRIIS_MAIL_IMAP_HOST": "127.0.0.1",
             "IRIIS_MAIL_SMTP_HOST": "localhost"}
    settings = mail_settings(local)
    assert settings is not None and settings.imap_tls() == "plain" and settings.smtp_tls() == "plain"
    assert mail_settings({**local, "IRIIS_MAIL_IMAP_HOST": "::1"}) is not None
    with pytest.raises(MailConfigError, match="IRIIS_MAIL_SMTP_HOST=smtp.example.com"):
        mail_settings({**local, "IRIIS_MAIL_SMTP_HOST": "smtp.example.com"})
    with pytest.raises(MailConfigError, match="only allowed to this machine"):
        mail_settings({**local, "IRIIS_MAIL_IMAP_HOST": "192.168.1.10"})


@pytest.mark.parametrize(("extra", "says"), [
    ({"IRIIS_MAIL_SECURITY": "tls1.3"}, "IRIIS_MAIL_SECURITY must be ssl, starttls or plain"),
    ({"IRIIS_MAIL_IMAP_PORT": "nine"}, "IRIIS_MAIL_IMAP_PORT must be a port number"),
    ({"IRIIS_MAIL_SMTP_PORT": "70000"}, "IRIIS_MAIL_SMTP_PORT"),
    ({"IRIIS_MAIL_USER": "owner"}, "IRIIS_MAIL_ADDRESS is needed"),
    ({"IRIIS_MAIL_TIMEOUT": "soon"}, "IRIIS_MAIL_TIMEOUT"),
])
def test_wrong_settings_name_the_variable(extra: dict[str, str], says: str) -> None:
    with pytest.raises(MailConfigError, match=says) as caught:
        mail_settings({**BASE, **extra})
    assert "hunter2" not in str(caught.value)


def test_secrets_file_fills_what_the_environment_leaves_unset(tmp_path: Path) -> None:
    secrets = tmp_path / "mail.env"
    secrets.write_text("# the mail account\nexport IRIIS_MAIL_IMAP_HOST=imap.file.example\n"
                       "IRIIS_MAIL_SMTP_HOST = 'smtp.file.example'\nIRIIS_MAIL_USER=\"me@file.example\"\n"
                       "IRIIS_MAIL_PASSWORD=p@ss=word\nOTHER_SECRET=ignored\nnot a line\n")
    settings = mail_settings({"IRIIS_MAIL_FILE": str(secrets), "IRIIS_MAIL_USER": "env@example.com"})
    assert settings is not None
    assert (settings.imap_host, settings.smtp_host) == ("imap.file.example", "smtp.file.example")
    assert settings.user == "env@example.com"  # the environment wins
    assert settings.password.get_secret_value() == "p@ss=word"
    assert "OTHER_SECRET" not in read_secrets_file(secrets.read_text())
    with pytest.raises(MailConfigError, match="IRIIS_MAIL_FILE: could not read"):
        mail_settings({"IRIIS_MAIL_FILE": str(tmp_path / "missing.env")})


# -- reading -----------------------------------------------------------------------------------


def test_summary_row_of_an_unread_message() -> None:
    row = messages.summarize(12, _message(), [], PARIS)
    assert row.line() == "#12 · Ana Lopes <ana@example.com> · Trip to Lisbon · 2026-12-06 10:30 · unread"
    assert (row.sender, row.sender_name, row.to, row.unread, row.flagged) == (
        "ana@example.com", "Ana Lopes", ["owner@example.com"], True, False)
    read = messages.summarize(3, _message(sender="bob@example.com", subject=""), [b"\\Seen", b"\\Flagged"], UTC,
                              has_attachments=True)
    assert read.line() == "#3 · bob@example.com · (no subject) · 2026-12-06 09:30 · flagged · attachment"


def test_summary_date_falls_back_to_the_arrival_time() -> None:
    arrived = datetime(2026, 12, 1, 8, 0, tzinfo=timezone.utc)
    row = messages.summarize(1, _message(date="not a date"), [], UTC, internal_date=arrived)
    assert row.date == "2026-12-01 08:00"


def test_plain_text_is_preferred_and_html_is_reduced_to_words() -> None:
    html = "<p>HTML <b>version</b></p>"
    assert messages.body_text(_message("Plain version.", html)) == "Plain version."
    page = ("<html><head><style>.x{color:red} style-leak</style><script>var a='script-leak'</script></head>"
            "<body><h1>Deals</h1><p>Half price on <b>boots</b>.</p><div hidden>hidden-leak</div></body></html>")
    text = messages.body_text(_message(None, page))
    assert "Half price on boots." in text and "Deals" in text
    for leak in ("style-leak", "script-leak", "hidden-leak", "<p>"):
        assert leak not in text


def test_long_text_is_cut_with_a_note() -> None:
    assert messages.cap_text("short", 100) == "short"
    cut = messages.cap_text("x" * 2500, 1000)
    assert cut.startswith("x" * 1000) and cut.endswith("[cut: showing 1000 of 2500 characters of this message]")


def test_attachments_with_names_types_bytes_and_the_size_cap() -> None:
    msg = _message("See attached.")
    msg.add_attachment(b"%PDF-1.4 tiny", maintype="application", subtype="pdf", filename="../../etc/plan.pdf")
    msg.add_attachment(b"\x00" * 50, maintype="application", subtype="octet-stream")
    msg.add_attachment("a,b\n1,2\n", subtype="csv", filename="numbers.csv")
    found = messages.attachments(messages.parse(msg.as_bytes()))
    assert [(a.name, a.mime, a.size) for a in found] == [
        ("plan.pdf", "application/pdf", 13), ("attachment-2.bin", "application/octet-stream", 50),
        ("numbers.csv", "text/csv", 8)]
    assert found[0].data == b"%PDF-1.4 tiny"
    capped = messages.attachments(messages.parse(msg.as_bytes()), max_bytes=20)
    assert [a.data is None for a in capped] == [False, True, False]
    assert messages.summarize(1, messages.parse(msg.as_bytes()), [], UTC).has_attachments


def test_attachment_disposition_in_an_imap_bodystructure() -> None:
    text = (b"text", b"plain", (b"charset", b"utf-8"), None, None, b"7bit", 44, 1, None, None, None, None)
    pdf = (b"application", b"pdf", (b"name", b"budget.pdf"), None, None, b"base64", 200, None,
           (b"attachment", (b"filename", b"budget.pdf")), None, None)
    assert messages.structure_has_attachment(([text, pdf], b"mixed", (b"boundary", b"x"), None, None, None))
    assert not messages.structure_has_attachment(text)
    assert not messages.structure_has_attachment(None)


# -- writing -----------------------------------------------------------------------------------


def test_recipients_from_lists_and_comma_separated_text() -> None:
    assert messages.parse_recipients("ana@example.com, Bob Stone <bob@example.org>; cy@example.net") == [
        ("", "ana@example.com"), ("Bob Stone", "bob@example.org"), ("", "cy@example.net")]
    assert messages.parse_recipients(["ana@example.com", "Bob <bob@example.org>"]) == [
        ("", "ana@example.com"), ("Bob", "bob@example.org")]
    assert messages.parse_recipients(None) == []
    for bad in ("ana", "ana@", "ana@example", "ana@example.com\nBcc: evil@example.net", "a b@example.com"):
        with pytest.raises(MessageError, match="not an email address"):
            messages.parse_recipients(bad)


def test_send_limits_at_and_over() -> None:
    fifty = [("", f"p{n}@example.com") for n in range(50)]
    messages.check_send(fifty[:40], fifty[40:], "s" * 998, "b" * 1_000_000)
    with pytest.raises(MessageError, match="too many recipients \\(51\\); at most 50"):
        messages.check_send(fifty, [("", "one@example.com")], "hi", "")
    with pytest.raises(MessageError, match="at most 998"):
        messages.check_send(fifty[:1], [], "s" * 999, "")
    with pytest.raises(MessageError, match="larger than 1 MB"):
        messages.check_send(fifty[:1], [], "hi", "é" * 500_001)
    with pytest.raises(MessageError, match="no recipient"):
        messages.check_send([], fifty[:1], "hi", "")
    with pytest.raises(MessageError, match="one line"):
        messages.check_send(fifty[:1], [], "hi\r\nBcc: x@example.com", "")


def test_a_new_message() -> None:
    msg = messages.compose("owner@example.com", [("Ana", "ana@example.com")], "Dinner", "See you at 8.",
                           cc=[("", "bob@example.org")], now=NOW)
    assert (msg["From"], msg["To"], msg["Cc"], msg["Subject"]) == (
        "owner@example.com", "Ana <ana@example.com>", "bob@example.org", "Dinner")
    assert msg["In-Reply-To"] is None and msg["Message-ID"].endswith("@example.com>")
    assert msg.get_content().strip() == "See you at 8."
    assert b"\r\n" in msg.as_bytes()
    # A name with a comma or accents stays one address.
    named = messages.compose("owner@example.com", [("Lopes, Ana", "ana@example.com"), ("Zoë", "zoe@example.com")],
                             "Hi", "x", now=NOW)
    parsed = messages.parse(named.as_bytes())
    assert messages.addresses(parsed, "To") == [("Lopes, Ana", "ana@example.com"), ("Zoë", "zoe@example.com")]


def test_a_reply_threads_and_quotes() -> None:
    original = _message("Shall we go in March?\n" + "".join(f"line {n}\n" for n in range(30)),
                        subject="Re: Trip", references="<a@example.com>", message_id="<b@example.com>")
    reply = messages.compose("owner@example.com", [("", "ana@example.com")], "", "Yes, count me in!",
                             original=original, zone=UTC)
    assert reply["Subject"] == "Re: Trip"
    assert reply["In-Reply-To"] == "<b@example.com>"
    assert reply["References"] == "<a@example.com> <b@example.com>"
    body = reply.get_content()
    assert body.startswith("Yes, count me in!\n\nOn 2026-12-06 09:30, Ana Lopes <ana@example.com> wrote:\n"
                           "> Shall we go in March?\n> line 0\n")
    assert "> line 18\n> [...]" in body and "line 19" not in body


@pytest.mark.parametrize(("given", "original", "subject"), [
    ("", "Trip", "Re: Trip"), ("Trip", "whatever", "Re: Trip"), ("RE: re: Trip", "", "Re: Trip"),
    ("Re[2]: Trip", "", "Re: Trip"), ("AW: Reise", "", "Re: Reise")])
def test_reply_subject_has_one_re(given: str, original: str, subject: str) -> None:
    assert messages.reply_subject(given, original) == subject


# -- searching and the preview --------------------------------------------------------------------


def test_search_criteria_from_friendly_arguments() -> None:
    assert messages.search_criteria() == ["ALL"]
    assert messages.search_criteria(unread=True, sender="Ana", subject=" trip ") == [
        "UNSEEN", "FROM", "Ana", "SUBJECT", "trip"]
    assert messages.search_criteria(unread=False) == ["SEEN"]
    assert messages.search_criteria(since="yesterday", now=NOW, zone=UTC) == ["SINCE", date(2026, 12, 8)]
    assert messages.search_criteria(since="3 days ago", now=NOW, zone=UTC) == ["SINCE", date(2026, 12, 6)]
    assert messages.search_criteria(since="2026-11-30", now=NOW, zone=UTC) == ["SINCE", date(2026, 11, 30)]
    # 23:30 UTC is already the next day in Paris.
    late = datetime(2026, 12, 9, 23, 30, tzinfo=timezone.utc)
    assert messages.search_criteria(since="today", now=late, zone=PARIS) == ["SINCE", date(2026, 12, 10)]
    assert messages.needs_utf8(messages.search_criteria(subject="Café"))
    assert not messages.needs_utf8(messages.search_criteria(subject="Cafe"))


@pytest.mark.parametrize(("arguments", "says"), [
    ({"since": "the day the music died"}, "could not read the date"),
    ({"sender": " \n "}, "sender to search for is empty"),
    ({"subject": "x" * 201}, "longer than 200 characters"),
])
def test_search_arguments_refused_with_a_sentence(arguments: dict[str, str], says: str) -> None:
    with pytest.raises(MessageError, match=says):
        messages.search_criteria(**arguments, now=NOW, zone=UTC)  # type: ignore[arg-type]


def test_send_preview_is_the_confirmation_question() -> None:
    preview = send_preview({"to": "ana@x.example, Bob <bob@y.example>", "subject": "Re: Trip",
                                     "body": "Yes, count me in!\nSee you."})
    assert preview == "Send mail to ana@x.example, bob@y.example — subject 'Re: Trip' — 'Yes, count me in! See you.'"
    long = send_preview({"to": ["ana@x.example"], "cc": "cy@z.example", "subject": "Notes",
                                  "body": "word " * 100, "reply_to_uid": 12})
    assert long.startswith("Send mail to ana@x.example (cc cy@z.example), replying to message #12 — subject 'Notes'")
    assert long.endswith("word…'") and len(long) < 250
    # Whatever the model sent, the question is still asked.
    assert send_preview({"to": 42}) == "Send mail to 42 — subject '(none)'"
    assert send_preview({}) == "Send mail to (no recipient) — subject '(none)'"


def test_the_owner_is_asked_with_a_read_back_not_the_raw_call() -> None:
    send = ToolSpec(name="send_mail", description="Send a mail.", parameters={}, source="mail", tier=2)
    question = question_for(send, {"to": ["ana@x.example"], "subject": "Trip", "body": "Yes!"})
    assert question == "Send mail to ana@x.example — subject 'Trip' — 'Yes!'?"
    invite = ToolSpec(name="calendar__invite", description="Invite.", parameters={}, source="calendar", tier=2)
    assert question_for(invite, {"event_id": "1a2b3c4d", "attendees": ["Zoé <zoe@x.example>", "carl@y.example"]}) == (
        "Invite zoe@x.example, carl@y.example to event #1a2b3c4d: the calendar sends each an invitation from you?")
    # A tool of the same name on another server is asked about as a plain call.
    other = ToolSpec(name="send_mail", description="Send.", parameters={}, source="hq", tier=2)
    assert question_for(other, {"to": "a@b.example"}).startswith("Allow send_mail(")
