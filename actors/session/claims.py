"""Detect replies that claim an action was performed.

A model that ran no tool this turn sometimes still answers "I've set a
reminder for 5pm". The loop uses ``claims_action`` to catch such replies and
withhold them. A false positive withholds an honest reply, so the rules favour
precision: each one needs a clear signal that the *assistant* completed the
action (first-person past/perfect, a headline like "Email sent.", a passive
"has been scheduled", or "Done!"), and questions, offers, negations,
conditionals and third-party agents are ruled out.

The rules are plain regexes over sentences, so a surprising verdict can be
traced to one pattern and fixed there.
"""

from __future__ import annotations

import re

# Past forms of the actions a personal agent performs. Verbs whose past form
# is also a common non-action word ("noted", "wrote" in "as I wrote above",
# "called" in "the function called") are left out on purpose.
_ACTION_VERBS: tuple[str, ...] = (
    r"set(?:\s+up)?",
    "scheduled",
    "rescheduled",
    "sent",
    "saved",
    "booked",
    "created",
    "cancell?ed",
    "added",
    "updated",
    "deleted",
    "removed",
    r"turned\s+(?:on|off|up|down)",
    r"switched\s+(?:on|off)",
    "emailed",
    "texted",
    "messaged",
    "forwarded",
    "reserved",
    "ordered",
    "purchased",
    "paid",
    "transferred",
    "posted",
    "uploaded",
    "stored",
    "moved",
    "renamed",
    "changed",
    "completed",
    "submitted",
    "archived",
    "shared",
    "invited",
    "notified",
    "locked",
    "unlocked",
    "dimmed",
    "muted",
    "unmuted",
    "enabled",
    "disabled",
    "activated",
    "deactivated",
    "cleared",
    "confirmed",
    "arranged",
    "put",
    "logged",
    "recorded",
    "reminded",
    "started",
    "stopped",
    "paused",
)
_VERB = r"(?:" + "|".join(_ACTION_VERBS) + r")\b"

# Adverbs that may sit between the subject/auxiliary and the verb without
# changing who acted: "I've just set", "I have now also booked".
_ADVERBS = r"(?:(?:just|already|now|also|successfully|finally|quickly|gone\s+ahead\s+and|went\s+ahead\s+and)\s+)*"

# Openers a reply commonly starts a sentence with before a headline claim.
_OPENER = r"(?:(?:ok(?:ay)?|alright|all\s+right|sure|great|perfect|got\s+it|no\s+problem|yes|yep|and|just|also)[\s,!.:-]+)*"

# Rule A: the assistant in first person, past or perfect: "I've set",
# "I have scheduled", "I booked", "We've sent", "I went ahead and saved".
_FIRST_PERSON = re.compile(rf"\b(?:i(?:'ve|\s+have)?|we(?:'ve|\s+have))\s+{_ADVERBS}{_VERB}")

# Rule B: a subject-less past form opening the sentence: "Created the
# document", "Sent!", "Added it to your calendar". Only when followed by an
# object/preposition or nothing, so "Scheduled tasks run nightly" stays out.
# "set"/"put" equal their imperative, so they need "for/to/up" or nothing.
_AFTER_HEADLINE_VERB = (
    r"(?:it|them|that|this|these|those|the|a|an|your|you|for|to|on|at|in|with|successfully)\b"
)
_HEADLINE_VERB = re.compile(
    rf"^{_OPENER}(?:(?!set\b|put\b){_VERB}(?=\s+{_AFTER_HEADLINE_VERB}|\s*[.!,;:]*$)"
    rf"|(?:set|put)(?=\s+(?:for|to|up)\b|\s*[.!]*$))"
)

# Words that cannot be part of the noun in a headline like "Reminder set":
# pronouns, articles, auxiliaries, modals, negations and conjunctions. They
# mark a clause ("The sun set", "You can set", "Nothing saved") rather than a
# terse report.
_NOT_NOUN = (
    r"(?:i|you|he|she|it|we|they|me|him|her|us|them|my|his|its|our|their|"
    r"the|a|an|this|that|these|those|some|any|"
    r"is|are|was|were|be|been|has|have|had|do|does|did|will|would|can|could|"
    r"should|shall|may|might|must|let|please|to|"
    r"no|not|nothing|never|none|if|when|once|after|before|until|unless|whether)\b"
)

# Rule C: "Reminder set for 5pm", "Email sent.", "Your lights turned off".
_NOUN_HEADLINE = re.compile(
    rf"^{_OPENER}(?:your\s+)?(?:(?!{_NOT_NOUN})[a-z][\w'-]*\s+){{1,3}}?{_ADVERBS}{_VERB}"
    r"(?=\s+(?:for|to|at|on|in|and|with|as|successfully)\b|\s*[.!,;:]*$)"
)

# Rule D: a passive claim: "Your meeting has been scheduled", "It's been
# sent", "The lights are now off"-style "are now turned off". A bare "is set"
# describes a state as often as an action ("the stage is set", "is scheduled
# to start"), so present passive needs "now", "all" or "successfully".
_PASSIVE = re.compile(
    rf"(?:(?:'s|'ve|\bhas|\bhave)\s+(?:now\s+|just\s+|already\s+|successfully\s+|all\s+)*been"
    rf"|(?:'s|'re|\bis|\bare|\bwas|\bwere)\s+(?:now|successfully|all)(?:\s+(?:now|successfully|all))*)"
    rf"\s+{_VERB}"
)

# Rule E: "Done!", "All done.", "It's done", "That's all done", "You're all set".
_DONE = re.compile(
    rf"^{_OPENER}(?:all\s+)?done\b"
    r"|\b(?:it|that|this|everything|all|those|they)(?:'s|\s+is|'re|\s+are|\s+has\s+been|\s+have\s+been)\s+(?:now\s+|all\s+)*done\b"
    r"|\byou(?:'re|\s+are)\s+all\s+set\b"
)

# A clause containing any of these before the verb is negated or
# hypothetical: "I couldn't book", "Nothing has been sent", "Once I've sent
# it". Checked on the clause only, so "I couldn't book it, but I've saved a
# draft" still counts the second clause.
_BLOCKERS = re.compile(
    r"\b(?:not|no|never|nothing|none|neither|nor|without|unable|failed|cannot|"
    r"if|once|when|whenever|after|before|until|unless|whether|as\s+soon\s+as)\b|n't\b"
)
_CLAUSE_BREAK = re.compile(r"[,;:()\u2014]|\s-\s|\bbut\b|\bthough\b|\bso\b")

# "scheduled by Anna": an explicit agent other than the assistant.
_AGENT = re.compile(r"^[^,;.]*?\bby\s+(?!me\b|us\b|myself\b|iriis\b)[a-z]")

_SENTENCE_SPLIT = re.compile(r"(?<=[.!?])\s+|\n+")


def _normalise(sentence: str) -> str:
    # Models emit curly apostrophes as often as straight ones.
    text = sentence.replace("\u2019", "'").replace("\u2018", "'").lower()
    return re.sub(r"\s+", " ", text).strip().strip("*_`\"> ")


def _clause_prefix(text: str, start: int) -> str:
    prefix = text[:start]
    breaks = list(_CLAUSE_BREAK.finditer(prefix))
    return prefix[breaks[-1].end():] if breaks else prefix


def _match_counts(text: str, match: re.Match[str], agent_matters: bool) -> bool:
    if _BLOCKERS.search(_clause_prefix(text, match.start())):
        return False
    return not (agent_matters and _AGENT.search(text[match.end():]))


# (pattern, whether a "by <someone>" after it makes it someone else's act).
# First-person rules name the assistant as the actor already.
_RULES: tuple[tuple[re.Pattern[str], bool], ...] = (
    (_FIRST_PERSON, False),
    (_HEADLINE_VERB, True),
    (_NOUN_HEADLINE, True),
    (_PASSIVE, True),
    (_DONE, False),
)


def claim_sentence(sentence: str) -> bool:
    """True when this one sentence asserts the assistant performed an action."""
    text = _normalise(sentence)
    if not text or text.endswith("?"):
        return False
    for pattern, agent_matters in _RULES:
        for match in pattern.finditer(text):
            if _match_counts(text, match, agent_matters):
                return True
    return False


def split_sentences(text: str) -> list[str]:
    """Sentences and lines of ``text``, without empty ones."""
    return [part for part in _SENTENCE_SPLIT.split(text) if part.strip()]


def claims_action(text: str) -> bool:
    """True when any sentence of ``text`` claims an action was performed."""
    return any(claim_sentence(sentence) for sentence in split_sentences(text))
