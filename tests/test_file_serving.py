"""How uploaded bytes are served: only media a browser shows without running it is inline."""

from __future__ import annotations

import pytest

from serve_apps.http.ranges import byte_range_response, content_headers


@pytest.mark.parametrize("mime", ["image/png", "image/jpeg", "audio/webm", "video/mp4", "application/pdf",
                                  "audio/ogg; codecs=opus"])
def test_media_is_shown_inline(mime: str) -> None:
    headers = content_headers(mime, "clip")
    assert headers["Content-Disposition"].startswith("inline;")
    assert headers["X-Content-Type-Options"] == "nosniff"
    assert "Content-Security-Policy" not in headers


@pytest.mark.parametrize("mime", ["text/html", "image/svg+xml", "application/javascript", "text/plain",
                                  "application/octet-stream", "TEXT/HTML; charset=utf-8"])
def test_anything_that_could_run_is_a_sandboxed_download(mime: str) -> None:
    headers = content_headers(mime, "page.html")
    assert headers["Content-Disposition"].startswith("attachment;")
    assert headers["Content-Security-Policy"].startswith("sandbox")


def test_a_hostile_name_cannot_break_the_header() -> None:
    headers = content_headers("text/plain", 'a"; evil\r\nX-Bad: 1.txt')
    value = headers["Content-Disposition"]
    assert "\r" not in value and "\n" not in value and value.count('"') == 2
    assert "filename*=UTF-8''a%22%3B%20evil%0D%0AX-Bad%3A%201.txt" in value


def test_ranges_keep_the_safety_headers() -> None:
    response = byte_range_response(b"0123456789", "text/html", "x.html", "bytes=2-4")
    assert response.status_code == 206 and response.body == b"234"
    assert response.headers["content-disposition"].startswith("attachment;")
