"""Replies that claim an action was done are caught; questions, offers and descriptions are not."""

from __future__ import annotations

import pytest

from actors.session.claims import claim_sentence, claims_action, split_sentences

CLAIMS: list[str] = [
    "I've set a reminder for 5pm.",
    "I have scheduled the meeting for Tuesday at 10.",
    "Reminder set for 5pm",
    "Email sent.",
    "I saved the file to your documents.",
    "I booked a table for two at 8.",
    "Created the document.",
    "I cancelled the meeting with Tom.",
    "I canceled your 3pm call.",
    "Done!",
    "All done.",
    "I've added it to your calendar.",
    "I've updated your shopping list.",
    "I've deleted the old drafts.",
    "I've turned off the lights in the kitchen.",
    "I've emailed Sarah the agenda.",
    "Your meeting has been scheduled.",
    "The email has been sent to Anna.",
    "Your file has been saved.",
    "A table has been booked for Friday.",
    "The event has been created.",
    "Your appointment has been cancelled.",
    "It's been sent.",
    "Okay, I've just set an alarm for 6am.",
    "Sure! I went ahead and booked the 7:15 train.",
    "Sent!",
    "Added to your calendar.",
    "Timer set.",
    "Alarm set for 7am tomorrow.",
    "Your reminder is now set for 5pm.",
    "You're all set.",
    "It's done.",
    "We've booked the hotel for you.",
    "I've successfully uploaded the photo.",
    "I\u2019ve sent the invitation.",
    "Lights turned off.",
    "Your meeting has been scheduled by me for Monday.",
]

NOT_CLAIMS: list[str] = [
    "Should I send it?",
    "Do you want me to schedule it?",
    "Have I sent it already?",
    "I will send it once you confirm.",
    "I can book it for you.",
    "I'd schedule it for the morning.",
    "I'm going to send it now.",
    "I haven't sent it yet.",
    "I did not save the file.",
    "I couldn't book a table, the restaurant is full.",
    "I have not scheduled anything.",
    "Nothing has been sent.",
    "No reminder has been set.",
    "You can set a reminder in settings.",
    "You sent me a file earlier.",
    "You've already scheduled that meeting.",
    "The sun has set.",
    "The sun set at 7pm.",
    "The meeting was scheduled by Anna last week.",
    "Your meeting has been scheduled by Anna.",
    "Once I've sent it, I'll let you know.",
    "If the email has been sent, you'll see it in your outbox.",
    "Let me know when you're done.",
    "Scheduled tasks run every night.",
    "Set a reminder in the app to get notified.",
    "Please confirm and I will book it.",
    "The meeting is scheduled to start at 10.",
    "Would you like me to cancel it?",
    "I would have sent it, but I need the address.",
    "Here is a draft of the email you asked for.",
    "Your flight departs at 9:40 from gate 12.",
    "Email sent?",
    "The key to success is consistency.",
]


@pytest.mark.parametrize("text", CLAIMS)
def test_claims_are_detected(text: str) -> None:
    assert claims_action(text) is True


@pytest.mark.parametrize("text", NOT_CLAIMS)
def test_non_claims_are_not_flagged(text: str) -> None:
    assert claims_action(text) is False


def test_lists_are_big_enough_to_mean_something() -> None:
    assert len(CLAIMS) >= 25 and len(NOT_CLAIMS) >= 25


def test_one_claiming_sentence_in_a_longer_reply_is_enough() -> None:
    reply = "Sure thing. I've set a reminder for 5pm tomorrow. Want me to add a note to it?"
    assert claims_action(reply) is True
    assert [claim_sentence(s) for s in split_sentences(reply)] == [False, True, False]


def test_claim_in_second_clause_after_a_failure_still_counts() -> None:
    assert claims_action("I couldn't book the table, but I've saved a draft of the request.") is True


def test_offer_followed_by_question_is_not_a_claim() -> None:
    reply = "I can schedule that for Tuesday at 10.\nShould I go ahead and send the invite?"
    assert claims_action(reply) is False


def test_claim_on_its_own_line_counts() -> None:
    assert claims_action("Here you go:\nReminder set for 5pm\nAnything else?") is True


def test_markdown_emphasis_does_not_hide_a_claim() -> None:
    assert claims_action("**Done!** The lights are off.") is True


def test_empty_reply_is_not_a_claim() -> None:
    assert claims_action("") is False
    assert claim_sentence("   ") is False
