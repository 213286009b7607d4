import io
import logging
from collections.abc import Iterator

import pytest

from actors.logmask import MASKED_LOGGERS, MaskingFilter, install_log_masking, mask_secrets

KEY = "sk-proj-abcdefghijklmnop1234"
IRAD = "irad_ZYXWVUTSRQPONMLK9876"


def test_bearer_token() -> None:
    assert mask_secrets("sent Bearer abc.def-ghi_jkl") == "sent Bearer ***"


def test_authorization_header() -> None:
    assert mask_secrets("Authorization: Basic dXNlcjpwYXNz") == "Authorization: ***"
    out = mask_secrets("{'authorization': 'Bearer tok123', 'host': 'x'}")
    assert "tok123" not in out and "'host': 'x'" in out


@pytest.mark.parametrize("name", ["token", "key", "api_key", "access_token"])
def test_query_params(name: str) -> None:
    out = mask_secrets(f"GET /ws?{name}=s3cretvalue&room=1 HTTP/1.1")
    assert out == f"GET /ws?{name}=***&room=1 HTTP/1.1"


def test_param_lookalikes_untouched() -> None:
    assert mask_secrets("monkey=banana tokens_used=12") == "monkey=banana tokens_used=12"


def test_quoted_field() -> None:
    assert mask_secrets('{"api_key": "plainsecret"}') == '{"api_key": "***"}'


def test_prefixed_keys_keep_four_chars() -> None:
    assert mask_secrets(f"using {KEY} now") == "using sk-p*** now"
    assert mask_secrets(f"device {IRAD}") == "device irad***"
    assert mask_secrets("iriis_0123456789abcdefXYZ") == "irii***"


def test_short_or_embedded_prefixes_untouched() -> None:
    assert mask_secrets("sk-short") == "sk-short"
    assert mask_secrets("task-abcdefghijklmnopqrstuv") == "task-abcdefghijklmnopqrstuv"


def test_masking_is_idempotent() -> None:
    text = f"Bearer {KEY} token={KEY} {KEY}"
    once = mask_secrets(text)
    assert KEY not in once
    assert mask_secrets(once) == once


@pytest.fixture
def capture() -> Iterator[tuple[logging.Logger, io.StringIO]]:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logging.Formatter("%(levelname)s %(message)s"))
    logger = logging.getLogger("iriis.test.logmask")
    logger.propagate = False
    logger.setLevel(logging.DEBUG)
    logger.addHandler(handler)
    handler.addFilter(MaskingFilter())
    try:
        yield logger, stream
    finally:
        logger.removeHandler(handler)


def test_filter_masks_args(capture: tuple[logging.Logger, io.StringIO]) -> None:
    logger, stream = capture
    logger.info("calling with %s and %r", KEY, {"Authorization": f"Bearer {IRAD}"})
    out = stream.getvalue()
    assert KEY not in out and IRAD not in out
    assert "sk-p***" in out


def test_filter_masks_exception_text(capture: tuple[logging.Logger, io.StringIO]) -> None:
    logger, stream = capture
    try:
        raise RuntimeError(f"bad url https://x/?token={KEY}")
    except RuntimeError:
        logger.exception("request failed")
    out = stream.getvalue()
    assert "RuntimeError" in out and "Traceback" in out
    assert KEY not in out


def test_filter_keeps_uvicorn_access_args() -> None:
    record = logging.LogRecord(
        "uvicorn.access", logging.INFO, __file__, 1, '%s - "%s %s HTTP/%s" %d',
        ("1.2.3.4:5", "GET", f"/ws?token={KEY}", "1.1", 101), None,
    )
    MaskingFilter().filter(record)
    # uvicorn's AccessFormatter unpacks args itself, so they must stay a 5-tuple.
    assert isinstance(record.args, tuple) and len(record.args) == 5
    assert record.args[2] == "/ws?token=***"
    assert record.args[4] == 101
    assert KEY not in record.getMessage()


def test_filter_survives_bad_format_string() -> None:
    record = logging.LogRecord("x", logging.INFO, __file__, 1, f"{KEY} %d", ("not-int",), None)
    assert MaskingFilter().filter(record) is True
    assert KEY not in str(record.msg)


@pytest.fixture
def clean_loggers() -> Iterator[None]:
    names = ["", *MASKED_LOGGERS]
    before = {n: list(logging.getLogger(n).filters) for n in names}
    handlers = {n: {h: list(h.filters) for h in logging.getLogger(n).handlers} for n in names}
    try:
        yield
    finally:
        for n in names:
            logging.getLogger(n).filters[:] = before[n]
            for h, filters in handlers[n].items():
                h.filters[:] = filters


def test_install_is_idempotent_and_masks_root_handlers(clean_loggers: None) -> None:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    root = logging.getLogger()
    root.addHandler(handler)
    old_level = root.level
    root.setLevel(logging.INFO)
    try:
        install_log_masking()
        install_log_masking()
        count = lambda f: sum(isinstance(x, MaskingFilter) for x in f)  # noqa: E731
        assert count(handler.filters) == 1
        assert count(root.filters) == 1
        for name in MASKED_LOGGERS:
            assert count(logging.getLogger(name).filters) == 1
        # A child logger's record reaches root handlers without passing the
        # root logger's own filters, so the handler filter is what masks it.
        logging.getLogger("iriis.some.module").warning("key is %s", KEY)
        assert KEY not in stream.getvalue()
        assert "sk-p***" in stream.getvalue()
    finally:
        root.removeHandler(handler)
        root.setLevel(old_level)


def test_caplog_sees_masked_message(caplog: pytest.LogCaptureFixture, clean_loggers: None) -> None:
    caplog.handler.addFilter(MaskingFilter())
    with caplog.at_level(logging.INFO):
        logging.getLogger("iriis.x").info("Authorization: Bearer %s", KEY)
    assert KEY not in caplog.text
    assert "Authorization: ***" in caplog.text
