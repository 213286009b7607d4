"""Secrets in tool output and tool arguments are replaced; ordinary prose is left alone."""

from __future__ import annotations

import json

import pytest

from actors.common.redact import REDACTED, is_secret_field, redact_secrets, redact_value

PEM = (
    "-----BEGIN RSA PRIVATE KEY-----\n"
    "MIIEowIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo4lgOEePzNm0tRgeLezV6ffAt0gun\n"
    "VTLw7onLRnrq0/IzW7yWR7QkrmBL7jTKEn5u+qKhbwKfBstIs+bMY2Zkp18gnTxK\n"
    "-----END RSA PRIVATE KEY-----"
)
JWT = (
    "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9"
    ".eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4ifQ"
    ".SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c"
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("password: hunter2", "password: [redacted]"),
        ("passwd=s3cr3t", "passwd=[redacted]"),
        ("pwd = letmein", "pwd = [redacted]"),
        ("secret: abc123", "secret: [redacted]"),
        ("token=abcdef", "token=[redacted]"),
        ("api_key: 12345abcde", "api_key: [redacted]"),
        ("apikey=xyz987", "apikey=[redacted]"),
        ("key=value123", "key=[redacted]"),
        ("pin: 4321", "pin: [redacted]"),
        ("Your PIN: 4321", "Your PIN: [redacted]"),
        ("DB_PASSWORD=pa55word", "DB_PASSWORD=[redacted]"),
        ("client_secret: zzz", "client_secret: [redacted]"),
        ("x-api-key: k-123", "x-api-key: [redacted]"),
    ],
)
def test_labelled_values_are_redacted_and_label_kept(text: str, expected: str) -> None:
    assert redact_secrets(text) == expected


def test_json_fields_stay_valid_json() -> None:
    raw = json.dumps({"user": "bob", "password": 'p@ss "word"', "api_key": "abc", "pin": 1234})
    out = redact_secrets(raw)
    parsed = json.loads(out)
    assert parsed == {"user": "bob", "password": REDACTED, "api_key": REDACTED, "pin": REDACTED}


def test_json_null_is_not_hidden() -> None:
    assert redact_secrets('{"token": null}') == '{"token": null}'


def test_url_query_token_is_redacted_but_the_rest_of_the_url_stays() -> None:
    out = redact_secrets("GET https://api.example.com/v1?token=abc123&page=2")
    assert out == "GET https://api.example.com/v1?token=[redacted]&page=2"


def test_bearer_token() -> None:
    assert redact_secrets("call with Bearer abc.def-ghi_jkl now") == "call with Bearer [redacted] now"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Authorization: Basic dXNlcjpwYXNz", "Authorization: [redacted]"),
        ("authorization: Bearer tok123\nHost: x", "authorization: [redacted]\nHost: x"),
        ("{'Authorization': 'Bearer tok123', 'Host': 'x'}", "{'Authorization': '[redacted]', 'Host': 'x'}"),
        ('curl -H "Authorization: Token abc" https://x', 'curl -H "Authorization: [redacted]" https://x'),
    ],
)
def test_authorization_header_values(text: str, expected: str) -> None:
    assert redact_secrets(text) == expected


@pytest.mark.parametrize(
    "secret",
    [
        "sk-proj-Abc123def456ghi789jkl",
        "sk-ant-api03-AbCdEf1234567890xyz",
        "ghp_ABCDEFGHIJKLMNOPQRSTuvwxyz0123456789",
        "github_pat_11ABCDEFG0123456789_abcdefghijklmnop",
        "xoxb-123456789012-abcdefABCDEF",
        "xoxp-123456789012-abcdefABCDEF",
        "AKIAIOSFODNN7EXAMPLE",
        "AIzaSyA-1234567890abcdefghijklmnopqrstu",
        "irad_ZYXWVUTSRQPONMLK9876",
        "iriis_q8Yh3kZ-Lm2Np4Rs6Tu8Vw0Xy",
        "glpat-abcdefGHIJ1234567890",
        JWT,
    ],
)
def test_well_known_key_shapes(secret: str) -> None:
    out = redact_secrets(f"found {secret} in the env")
    assert secret not in out
    assert out == f"found {REDACTED} in the env"


def test_pem_private_key_body_is_removed_markers_kept() -> None:
    out = redact_secrets(f"id_rsa:\n{PEM}\ndone")
    assert "MIIEow" not in out and "BstIs" not in out
    assert out == f"id_rsa:\n-----BEGIN RSA PRIVATE KEY-----\n{REDACTED}\n-----END RSA PRIVATE KEY-----\ndone"


def test_truncated_pem_block_is_removed_to_the_end() -> None:
    cut = PEM.split("-----END")[0]
    out = redact_secrets("key file:\n" + cut)
    assert "MIIEow" not in out
    assert out.endswith(REDACTED)


@pytest.mark.parametrize(
    "prose",
    [
        "the key to success is patience",
        "press any key to continue",
        "PIN code is required",
        "a token bucket limits the rate",
        "monkey: banana, spin=3",
        "tokens: 1200, key_count=3",
        "the task-abcdefghijklmnopqrs1 finished",
        "settings.iriis_session_idle_seconds is 600",
        "use the sk-learn-compatible-wrapper here",
        "-----BEGIN PUBLIC KEY-----\nMFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAE\n-----END PUBLIC KEY-----",
    ],
)
def test_ordinary_text_is_untouched(prose: str) -> None:
    assert redact_secrets(prose) == prose


@pytest.mark.parametrize(
    "text",
    ["password: hunter2", "Authorization: Bearer abc", f"x {JWT}", PEM, '{"token": "abc"}'],
)
def test_redacting_twice_changes_nothing_more(text: str) -> None:
    once = redact_secrets(text)
    assert once != text
    assert redact_secrets(once) == once


def test_redact_value_walks_nested_tool_arguments() -> None:
    args = {
        "url": "https://x.example/?api_key=abc123",
        "headers": {"Authorization": "Bearer tok", "Accept": "json"},
        "login": {"username": "bob", "password": "hunter2", "pin": 1234},
        "items": [{"access_token": "t0k"}, "plain text", 42],
        "key": "favourite_colour",
        "notes": None,
    }
    out = redact_value(args)
    assert out == {
        "url": "https://x.example/?api_key=[redacted]",
        "headers": {"Authorization": REDACTED, "Accept": "json"},
        "login": {"username": "bob", "password": REDACTED, "pin": REDACTED},
        "items": [{"access_token": REDACTED}, "plain text", 42],
        "key": "favourite_colour",
        "notes": None,
    }
    # The caller's arguments are still needed to run the tool.
    assert args["login"]["password"] == "hunter2"


def test_redact_value_keeps_empty_secret_fields_visible() -> None:
    assert redact_value({"password": "", "token": None}) == {"password": "", "token": None}


def test_redact_value_handles_tuples_and_scalars() -> None:
    assert redact_value(("Bearer abc", 3, True)) == ("Bearer [redacted]", 3, True)
    assert redact_value(7) == 7


@pytest.mark.parametrize(
    ("name", "secret"),
    [
        ("password", True),
        ("DB_PASSWORD", True),
        ("x-api-key", True),
        ("access_token", True),
        ("private_key", True),
        ("credentials", True),
        ("key", False),
        ("max_tokens", False),
        ("token_count", False),
        ("username", False),
    ],
)
def test_secret_field_names(name: str, secret: bool) -> None:
    assert is_secret_field(name) is secret
