"""The settings page's Accounts in real headless Chromium (Debian's), driven by Playwright, against
the shared server whose `mail` talks to a real Dovecot: the owner sees Mail connected, when it was
last used and its last error, switches it off from the page (and the server has it off), and on
again until it is connected. Screenshots of the Accounts card go to the test's tmp dir
(accounts-connected.png, accounts-off.png, accounts-on.png)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest
from playwright.async_api import Page, async_playwright

from tests import scripted_openai as so
from tests.conftest import OWNER_KEY
from tests.sse import chat
from tests.test_page import ARGS, CHROMIUM
from tests.test_tools_switch import servers, switch, wait_on
from tests.waiting import WAIT_MS

pytestmark = pytest.mark.e2e
MAIL_STATE = "document.querySelector('.account[data-name=mail] .account-state')?.textContent"


@pytest.fixture
def http(server) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.url, timeout=60, headers={"Authorization": f"Bearer {OWNER_KEY}"}) as c:
        yield c


@pytest.fixture
def mail_back_on(http: httpx.Client) -> Iterator[None]:
    """However the test ends, `mail` is switched on again and connected for the next one."""
    yield
    switch(http, "mail", True)
    wait_on(http, "mail")


@pytest.fixture
async def page(server, model) -> AsyncIterator[Page]:
    assert Path(CHROMIUM).exists(), "install Debian's chromium (make test does it)"
    async with async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=ARGS)
        try:
            # Tall enough for the whole Accounts card in a screenshot.
            context = await browser.new_context(viewport={"width": 1100, "height": 1600})
            context.set_default_timeout(WAIT_MS)
            page = await context.new_page()
            errors: list[str] = []
            page.on("pageerror", lambda exc: errors.append(str(exc)))
            yield page
            assert not errors, errors
        finally:
            await browser.close()


async def mail_state_is(page: Page, words: str) -> None:
    await page.wait_for_function(f"(words) => {MAIL_STATE} === words", arg=words, timeout=WAIT_MS)


async def shoot(page: Page, path: Path) -> None:
    await page.locator("section.card", has=page.locator(".accounts")).screenshot(path=str(path))


async def test_the_owner_sees_mail_connected_switches_it_off_and_on_again(
        page: Page, server, model, http: httpx.Client, mail_back_on, tmp_path: Path) -> None:
    # Mail used once, then a call that failed: both are on the page.
    model.enqueue(so.tools(("list_mail", {"limit": 2})), so.text("Two messages."),
                  so.tools(("list_mail", {"since": "when pigs fly"})), so.text("That is not a date I know."))
    chat(http, OWNER_KEY, "List my two latest mails.")
    chat(http, OWNER_KEY, "Any mail since when pigs fly?")
    await page.goto(f"{server.url}/#key={OWNER_KEY}")
    await page.wait_for_selector("#chat-form:not([hidden])")
    await page.evaluate("location.hash = '#/settings'")
    await mail_state_is(page, "connected")
    rows = await page.locator(".account").evaluate_all("rows => rows.map((r) => r.dataset.name)")
    assert rows[:2] == ["mail", "calendar"] and rows[-1] == "builtin"  # the owner's accounts first
    mail = page.locator(".account[data-name=mail]")
    assert await mail.locator("strong").text_content() == "Mail"
    used = await mail.locator(".account-used").text_content()
    assert used.startswith("7 tools · last used ") and ("ago" in used or "now" in used), used
    error = await mail.locator(".account-error").text_content()
    assert "Last error: list_mail: could not read the date 'when pigs fly'" in error, error
    mail_switch = page.get_by_role("switch", name="Mail", exact=True)
    assert await mail_switch.is_checked()
    # The state is what the switch is described by, for a screen reader.
    assert await mail_switch.get_attribute("aria-describedby") == "account-state-mail"
    # The calendar's switch is its own.
    assert await page.get_by_role("switch", name="Calendar and contacts").is_checked()
    await shoot(page, tmp_path / "accounts-connected.png")

    await mail_switch.click()
    await mail_state_is(page, "off: switched off by the owner")
    assert not await mail_switch.is_checked()
    assert servers(http)["mail"]["state"] == "off"
    assert await page.get_by_role("switch", name="Calendar and contacts").is_checked()
    await shoot(page, tmp_path / "accounts-off.png")

    await mail_switch.click()
    # Starting, then connected: the page looks again by itself while a server is starting.
    await mail_state_is(page, "connected")
    assert await mail_switch.is_checked()
    assert servers(http)["mail"]["state"] == "on"
    await shoot(page, tmp_path / "accounts-on.png")
