"""Refuse secret-looking text at write time: memory is injected into every prompt and sent to
providers, so a password that reaches it leaks on every turn.

Two kinds of signal. Machine-shaped secrets (labelled `password: x`, bearer tokens, issued API
key shapes, PEM blocks) are what `actors.common.redact` already finds, so a text it would
change is a secret here. Owners also say secrets in plain speech ("my password is hunter2",
"the door code is 1234", "PIN 4821"), which redaction, written for config files and HTTP
output, does not look for; the patterns below cover those. The words alone are never enough
("the key to success", "pin the poster", "the wifi password is on the router"): a value that
looks like a credential must follow them.
"""

from __future__ import annotations

import re

from actors.common.redact import redact_secrets

# Words that can follow "password is" without being the password, so that where a secret is
# kept ("on the router") or what happened to it ("expired") can still be remembered.
_NOT_A_VALUE: frozenset[str] = frozenset("""
a an the my your his her our their its this that it in on at under inside behind near by with
for from of to into somewhere here there stored saved written printed kept taped stuck
same different changed expired wrong right correct incorrect invalid weak strong long short
too very not also still now required needed missing lost forgotten reset locked case sensitive
protected encrypted hidden secret known unknown new old
""".split())

# Any word-ish run a person could type as a password: letters, digits and common symbols.
_VALUE = r"(?P<value>[^\s,;]{3,})"
# Optional "for gmail" / "for the front door" between the label and its value.
_FOR = r"(?:\s+(?:for|to|on)\s+(?:the\s+|my\s+|our\s+)?(?!(?:is|was)\b)[\w-]+(?:\s+(?!(?:is|was)\b)[\w-]+)?)?"
# "is", "was", ":" or "=" between label and value; a bare space is told apart (`link` empty)
# because "password manager" is a phrase while "password is manager" names a value.
_LINK = r"(?P<link>\s*(?:=|:|->)\s*|\s+(?:is|was)\s*:?\s*|\s+-\s+)?(?(link)|\s+)"
_QUOTE = r"(?P<quote>[\"'“‘])?"

# Labels whose value is a secret whatever it looks like (as long as it is not an ordinary
# word that happens to follow, per _NOT_A_VALUE).
_PASSWORD = re.compile(
    rf"(?i)\b(?:pass(?:word|phrase|code)s?|passwd|pwd|(?:wi-?fi|wlan|network)\s+password)"
    rf"{_FOR}{_LINK}{_QUOTE}{_VALUE}")

# Short numeric codes: PINs and the codes that open doors, alarms, safes and phones.
_CODE_LABEL = (r"(?:pin(?:\s+(?:code|number))?|(?:door|gate|alarm|safe|lock|locker|garage|entry|access|"
               r"security|entrance|building|keypad|bike\s+lock|padlock|unlock|phone|sim|atm|card|"
               r"verification|otp|2fa|one[- ]time)\s+(?:code|pin|combination)|"
               r"combination|passcode)")
_NUMERIC_CODE = re.compile(
    rf"(?i)\b{_CODE_LABEL}{_FOR}{_LINK}[\"'“‘#]?(?P<value>\d[\d\s-]{{2,10}}\d|\d{{3,12}})\b")
# "1234 is the door code", "4821 is my PIN".
_CODE_FIRST = re.compile(rf"(?i)\b\d{{3,12}}\s+(?:is|was)\s+(?:the|my|our|his|her|their)\s+{_CODE_LABEL}\b")

# Keys and tokens: "key" has many harmless senses, so the value must look issued (a digit in
# it, or long and unbroken) rather than be any word.
_KEY_LABEL = (r"(?:(?:api|access|secret|private|ssh|license|licence|product|wi-?fi|encryption|recovery|"
              r"activation|auth|signing|client)[\s_-]?key|key|token|secret|(?:client|app)\s+secret|"
              r"seed\s+phrase|recovery\s+phrase|cvv|cvc|security\s+answer)")
_KEY = re.compile(rf"(?i)\b{_KEY_LABEL}{_FOR}{_LINK}{_QUOTE}(?P<value>[A-Za-z0-9][A-Za-z0-9_\-./+=:]{{2,}})")

# 13-19 digits, optionally grouped, that pass the Luhn check: a payment card number.
_CARD = re.compile(r"(?<!\d)(?:\d[ -]?){12,18}\d(?!\d)")


def _credential_like(value: str) -> bool:
    """Issued keys and tokens are random: they hold a digit, or run long without a break."""
    core = value.strip("\"'“”‘’.,;:!?)")
    if len(core) < 3:
        return False
    return any(c.isdigit() for c in core) or (len(core) >= 16 and not core.isalpha()) or len(core) >= 24


def _password_value(match: re.Match[str]) -> bool:
    """Quoted, or after "is"/":", any word that is not ordinary grammar counts; after a bare
    space only a credential-looking one does ("password hunter2", not "password manager")."""
    if match.group("quote"):
        return True
    if not match.group("link"):
        return _credential_like(match.group("value"))
    core = match.group("value").strip("\"'“”‘’.,;:!?)")
    return len(core) >= 3 and core.lower() not in _NOT_A_VALUE


def _luhn(digits: str) -> bool:
    total = 0
    for i, ch in enumerate(reversed(digits)):
        n = int(ch)
        if i % 2:
            n = n * 2 - 9 if n > 4 else n * 2
        total += n
    return total % 10 == 0


def _has_card_number(text: str) -> bool:
    for match in _CARD.finditer(text):
        digits = re.sub(r"\D", "", match.group(0))
        # All-same digits ("0000 0000 0000 0000") pass Luhn but are placeholders.
        if 13 <= len(digits) <= 19 and len(set(digits)) > 1 and _luhn(digits):
            return True
    return False


def looks_secret(text: str) -> bool:
    """True when `text` appears to contain a password, PIN, key, token or card number."""
    if not text or not text.strip():
        return False
    if redact_secrets(text) != text:
        return True
    if any(_password_value(m) for m in _PASSWORD.finditer(text)):
        return True
    if _NUMERIC_CODE.search(text) or _CODE_FIRST.search(text):
        return True
    if any(_credential_like(m.group("value")) for m in _KEY.finditer(text)):
        return True
    return _has_card_number(text)
