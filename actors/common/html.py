"""What a fetched HTML page says: its readable text, and a link preview of its metadata.

Pure parsing with the standard library's HTMLParser; no network. The page is untrusted, so
hidden and scripted parts are left out and only web URLs come back as preview images.
"""

from __future__ import annotations

from html.parser import HTMLParser
from urllib.parse import urljoin, urlsplit

_SKIP_TAGS = frozenset({"script", "style", "noscript", "nav", "template", "svg", "canvas",
                        "iframe", "head", "select", "button", "object"})
_BLOCK_TAGS = frozenset({"p", "div", "section", "article", "main", "header", "footer", "aside",
                         "ul", "ol", "li", "br", "tr", "table", "blockquote", "pre", "dd", "dt",
                         "dl", "figcaption", "figure", "hr", "address", "details", "summary",
                         "h1", "h2", "h3", "h4", "h5", "h6", "td", "th"})
_VOID_TAGS = frozenset({"br", "hr", "img", "input", "meta", "link", "area", "base", "col",
                        "embed", "source", "track", "wbr"})


class _TextExtractor(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self._skipping: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if self._skipping:
            if tag == self._skipping[-1]:
                self._skipping.append(tag)
            return
        hidden = any(k == "hidden" or (k == "aria-hidden" and v == "true") for k, v in attrs)
        if tag in _SKIP_TAGS or (hidden and tag not in _VOID_TAGS):
            self._skipping.append(tag)
            return
        if tag in _BLOCK_TAGS:
            self.parts.append("\n")
        if len(tag) == 2 and tag[0] == "h" and tag[1] in "123456":
            self.parts.append("#" * int(tag[1]) + " ")
        elif tag == "li":
            self.parts.append("- ")
        elif tag in ("td", "th"):
            self.parts.append(" ")

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if not self._skipping and tag in _BLOCK_TAGS:
            self.parts.append("\n")

    def handle_endtag(self, tag: str) -> None:
        if self._skipping:
            if tag == self._skipping[-1]:
                self._skipping.pop()
            return
        if tag in _BLOCK_TAGS:
            self.parts.append("\n")

    def handle_data(self, data: str) -> None:
        if not self._skipping:
            self.parts.append(data)


def readable_text(html: str) -> str:
    """The words a person would read on the page: headings, paragraphs, lists, link text."""
    parser = _TextExtractor()
    parser.feed(html)
    parser.close()
    lines: list[str] = []
    for raw in "".join(parser.parts).split("\n"):
        line = " ".join(raw.split())
        if line and line not in ("-", "#", "##", "###", "####", "#####", "######"):
            lines.append(line)
    return "\n".join(lines)


class _MetaExtractor(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.meta: dict[str, str] = {}
        self.title: str = ""
        self._in_title = False
        self._title_done = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "title" and not self._title_done:
            self._in_title = True
        elif tag == "meta":
            values = {k.lower(): (v or "") for k, v in attrs}
            key = (values.get("property") or values.get("name") or "").strip().lower()
            if key and "content" in values and key not in self.meta:
                self.meta[key] = values["content"].strip()

    def handle_endtag(self, tag: str) -> None:
        if tag == "title" and self._in_title:
            self._in_title = False
            self._title_done = True

    def handle_data(self, data: str) -> None:
        if self._in_title:
            self.title += data


def link_preview(html: str, url: str) -> dict[str, str | None]:
    """Title, description, image and site name from OpenGraph, Twitter cards or plain HTML."""
    parser = _MetaExtractor()
    parser.feed(html)
    parser.close()
    meta = parser.meta

    def first(*keys: str) -> str | None:
        for key in keys:
            value = " ".join(meta.get(key, "").split())
            if value:
                return value
        return None

    title = first("og:title", "twitter:title") or (" ".join(parser.title.split()) or None)
    image = first("og:image", "og:image:url", "og:image:secure_url", "twitter:image")
    if image is not None:
        image = urljoin(url, image)
        # A preview image is shown to a person; only web URLs, never javascript: or data:.
        if urlsplit(image).scheme not in ("http", "https"):
            image = None
    site_name = first("og:site_name", "application-name") or (urlsplit(url).hostname or None)
    return {
        "title": title,
        "description": first("og:description", "description", "twitter:description"),
        "image": image,
        "site_name": site_name,
    }
