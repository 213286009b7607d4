"""The chat page in real headless Chromium (Debian's), driven by Playwright."""

from __future__ import annotations

from pathlib import Path

import pytest
from playwright.async_api import async_playwright

from tests import scripted_openai as so
from tests.conftest import OWNER_KEY
from tests.waiting import WAIT_MS

pytestmark = pytest.mark.e2e
CHROMIUM = "/usr/bin/chromium"
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]


@pytest.fixture
async def page(server, model, tmp_path: Path):
    assert Path(CHROMIUM).exists(), "install Debian's chromium (make test does it)"
    async with async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=ARGS)
        context = await browser.new_context()
        context.set_default_timeout(WAIT_MS)
        page = await context.new_page()
        yield page
        await page.screenshot(path=str(tmp_path / "page.png"))
        await browser.close()


async def test_sign_in_with_the_key_form_and_see_a_streamed_reply(page, server, model) -> None:
    await page.goto(server.url + "/")
    await page.fill("#key-input", "not-the-key")
    await page.click("#key-form button[type=submit]")
    await page.wait_for_function("() => document.querySelector('#auth-error').textContent.length > 0")

    await page.fill("#key-input", OWNER_KEY)
    await page.click("#key-form button[type=submit]")
    await page.wait_for_selector("#chat-form:not([hidden])")

    model.enqueue(so.text("Hello from the model. This arrives in pieces. The end is here.", chunk_delay=0.15))
    await page.fill("#message", "Say hello")
    await page.click("#send")
    # Streaming is visible: a sentence is on screen while the reply is not done yet.
    await page.wait_for_function(
        "() => { const b = document.querySelector('.msg.assistant');"
        " return b && b.querySelectorAll('.sentence').length >= 1 && b.dataset.done !== 'true'; }")
    await page.wait_for_selector(".msg.assistant[data-done='true']", timeout=30_000)
    # Once done, the streamed sentences give way to the whole reply drawn as markdown.
    assert (await page.locator(".msg.assistant .md").text_content()).strip() == (
        "Hello from the model. This arrives in pieces. The end is here.")
    assert await page.locator(".msg.user .plain").all_text_contents() == ["Say hello"]

    # The cookie is HTTP-only: the page's script cannot read the key.
    assert OWNER_KEY not in await page.evaluate("document.cookie")
    # History comes back after a reload, from the server.
    await page.reload()
    await page.wait_for_selector(".msg.assistant")
    assert "The end is here." in await page.locator(".msg.assistant").first.text_content()


async def test_key_in_the_link_signs_in_and_errors_show_plainly(page, server, model) -> None:
    await page.goto(f"{server.url}/#key={OWNER_KEY}")
    await page.wait_for_selector("#chat-form:not([hidden])")
    assert "key=" not in page.url  # the key does not linger in the address bar
    model.enqueue(so.status(400), so.status(400))
    await page.fill("#message", "This will fail")
    await page.click("#send")
    error = page.locator(".msg.error")
    await error.wait_for()
    assert "refused" in await error.text_content()


async def test_a_confirmation_is_answered_from_the_page(page, server, model) -> None:
    await page.goto(f"{server.url}/#key={OWNER_KEY}")
    await page.wait_for_selector("#chat-form:not([hidden])")
    await page.click("#new-chat")
    model.enqueue(so.tools(("save_note", {"title": "Plants", "text": "water the fern"})), so.text("Saved."))
    await page.fill("#message", "note: water the fern")
    await page.click("#send")
    card = page.locator(".msg.assistant .confirm")
    await card.locator("button.approve").wait_for()
    assert "save_note" in await card.locator(".question").text_content()
    await card.locator("button.approve").click()
    await page.wait_for_selector(".msg.assistant[data-done='true']", timeout=30_000)
    assert await card.get_attribute("data-answer") == "approved"
    assert "✓ save_note" in await page.locator(".msg.assistant .tool").all_text_contents()


async def test_stop_keeps_only_what_was_shown(page, server, model) -> None:
    await page.goto(f"{server.url}/#key={OWNER_KEY}")
    await page.wait_for_selector("#chat-form:not([hidden])")
    await page.click("#new-chat")
    model.enqueue(so.text("Shown first. " + " ".join(f"Later {i}." for i in range(80)), chunk_delay=0.1))
    await page.fill("#message", "talk for a while")
    await page.click("#send")
    await page.wait_for_selector(".msg.assistant .sentence")
    await page.click("#stop")
    await page.wait_for_selector(".msg.assistant[data-done='true']", timeout=30_000)
    assert await page.locator("#stop").is_hidden()
    await page.reload()
    await page.wait_for_selector(".msg.assistant")
    stored = await page.locator(".msg.assistant").last.text_content()
    assert stored.startswith("Shown first.") and "Later 79." not in stored
