"""The installable web app in real headless Chromium against the real server and the scripted
model: install criteria, chat (markdown, an inert script, the conversation list, the input
limit), an upload after a reload, a confirmation from its card, memory search, pairing a
device from the Devices page with the desktop client, owner keys without a restart, push, and
the camera with a fake device. One browser for the module; several checks per page load.
Screenshots (desktop and 390x844) go to test-artifacts/screenshots/."""

from __future__ import annotations

import io
import json
import re
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from playwright.async_api import async_playwright

from tests import scripted_openai as so
from tests.conftest import OWNER_KEY, OWNER_PIN
from tests.waiting import WAIT_MS

pytestmark = pytest.mark.e2e
CHROMIUM = "/usr/bin/chromium"
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--use-fake-device-for-media-stream",
        "--use-fake-ui-for-media-stream",
        # WebRTC host candidates as plain loopback addresses: the test machine resolves no mDNS.
        "--disable-features=WebRtcHideLocalIpsWithMdns"]
SHOTS = Path(__file__).resolve().parent.parent / "test-artifacts" / "screenshots"
DESKTOP = {"width": 1280, "height": 800}
PHONE = {"width": 390, "height": 844}


@pytest.fixture(scope="module")
async def browser():
    assert Path(CHROMIUM).exists(), "install Debian's chromium (make test does it)"
    async with async_playwright() as pw:
        b = await pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=ARGS)
        yield b
        await b.close()


@pytest.fixture
async def page(browser, server, model):
    context = await browser.new_context(viewport=DESKTOP, permissions=["camera", "microphone", "notifications"])
    context.set_default_timeout(WAIT_MS)
    page = await context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.errors = errors
    yield page
    await context.close()
    assert not errors, errors


async def shoot(page, name: str) -> None:
    """The page at desktop and phone sizes, for a person to look at."""
    SHOTS.mkdir(parents=True, exist_ok=True)
    await page.set_viewport_size(DESKTOP)
    await page.screenshot(path=str(SHOTS / f"{name}-desktop.png"))
    await page.set_viewport_size(PHONE)
    await page.wait_for_timeout(250)
    await page.screenshot(path=str(SHOTS / f"{name}-phone.png"))
    await page.set_viewport_size(DESKTOP)


async def signed_in(page, server, hash_: str = "") -> None:
    await page.goto(f"{server.url}/#key={OWNER_KEY}")
    await page.wait_for_selector("#chat-form:not([hidden])")
    if hash_:
        await page.evaluate(f"location.hash = {hash_!r}")


def png(color: tuple[int, int, int]) -> bytes:
    from PIL import Image

    out = io.BytesIO()
    Image.new("RGB", (64, 48), color).save(out, format="PNG")
    return out.getvalue()


async def test_installable_with_a_service_worker_and_an_offline_shell(page, server) -> None:
    # `iriis serve` ended its short start-up with the block that says where to go.
    out = server.output()
    assert "iriis: ready: http://" in out and "Connecting to existing Serve app" not in out
    assert "Token authentication is enabled" not in out
    await page.goto(server.url + "/")
    manifest = await (await page.request.get(server.url + "/manifest.webmanifest")).json()
    assert manifest["display"] == "standalone" and manifest["name"] == "Iriis" and manifest["start_url"] == "/"
    assert manifest["theme_color"] and manifest["background_color"]
    sizes = {(i["sizes"], i["purpose"]) for i in manifest["icons"]}
    assert {("192x192", "maskable"), ("512x512", "maskable"), ("192x192", "any"), ("512x512", "any")} <= sizes
    for icon in manifest["icons"]:
        res = await page.request.get(server.url + icon["src"])
        assert res.ok and res.headers["content-type"] == "image/png"
        from PIL import Image

        assert "%dx%d" % Image.open(io.BytesIO(await res.body())).size == icon["sizes"]
    assert await page.evaluate("() => document.querySelector('link[rel=manifest]').href.endsWith('/manifest.webmanifest')")
    state = await page.evaluate("""async () => { const r = await navigator.serviceWorker.ready;
        await new Promise((ok) => { const w = r.active; if (w.state === 'activated') ok(); else w.addEventListener('statechange', ok); });
        return { state: r.active.state, scope: r.scope }; }""")
    assert state == {"state": "activated", "scope": server.url + "/"}
    # The sign-in screen says where the key is.
    assert "make serve" in await page.locator("#auth .hint").text_content()
    await page.reload()
    await page.wait_for_function("() => navigator.serviceWorker.controller !== null")
    await shoot(page, "sign-in")

    # Offline: the shell still opens, and says the server is unreachable.
    await page.context.set_offline(True)
    await page.reload()
    status = page.locator("#status")
    await status.wait_for()
    assert "Server unreachable" in await status.text_content()
    await shoot(page, "offline")
    await page.context.set_offline(False)


async def test_chat_markdown_an_inert_script_the_list_and_the_input_limit(page, server, model) -> None:
    await signed_in(page, server)
    await page.click("#new-chat")
    welcome = page.locator("#welcome")
    await welcome.locator(".example").first.wait_for()
    assert "scripted-model" in await welcome.locator(".model").text_content()
    assert await welcome.locator(".example").count() == 3
    await shoot(page, "welcome")

    reply = ("Here is **bold** and a list:\n\n- one\n- two\n\n```python\nprint('hi')\n```\n\n"
             "<script>window.__pwned = 1</script><img src=x onerror=\"window.__pwned = 2\"> The end.")
    model.enqueue(so.text(reply, chunk_delay=0.05))
    await page.fill("#message", "Show me some markdown")
    await page.click("#send")
    await page.wait_for_selector(".msg.assistant[data-done='true']", timeout=WAIT_MS)
    msg = page.locator(".msg.assistant").last
    assert await msg.locator(".md strong").text_content() == "bold"
    assert await msg.locator(".md li").count() == 2
    assert "print('hi')" in await msg.locator(".code-block pre").text_content()
    assert await msg.locator(".code-block button.copy").count() == 1
    assert await msg.locator("script").count() == 0 and await msg.locator("img").count() == 0
    assert await page.evaluate("window.__pwned") is None
    # The new conversation is listed, named after its first message; rename it.
    item = page.locator("#conversations li.conversation", has_text="Show me some markdown")
    await item.wait_for()
    assert await page.locator("#conversations li.conversation.active .title").text_content() == "Show me some markdown"
    await item.locator("button.rename").click()
    await page.fill("#conversations .rename-form input", "Markdown test")
    await page.press("#conversations .rename-form input", "Enter")
    await page.wait_for_function("() => [...document.querySelectorAll('#conversations .title')].some(t => t.textContent === 'Markdown test')")
    await shoot(page, "chat-markdown")

    # Over the limit: the count shows before sending, Send is off, and nothing is lost.
    await page.fill("#message", "x" * 100_001)
    counter = page.locator("#counter.over")
    await counter.wait_for()
    assert "1 too many" in await counter.text_content()
    assert await page.locator("#send").is_disabled()
    await counter.locator("button").click()  # sent as a file instead
    await page.wait_for_selector("#tray .chip.uploaded")
    assert await page.input_value("#message") == ""
    await page.click("#tray .chip button")

    # Delete a conversation from the list; the open #key= link works in an open tab too.
    page.once("dialog", lambda d: d.accept())
    await page.locator("#conversations li.conversation", has_text="Markdown test").locator("button.delete").click()
    await page.wait_for_function("() => !document.querySelector('#conversations .title') || "
                                 "![...document.querySelectorAll('#conversations .title')].some(t => t.textContent === 'Markdown test')")
    await page.request.post(server.url + "/v1/auth/logout")
    await page.reload()
    await page.wait_for_selector("#auth:not([hidden])")
    await page.evaluate(f"location.hash = '#key={OWNER_KEY}'")
    await page.wait_for_selector("#chat-form:not([hidden])")


async def test_a_reply_is_regenerated_and_a_message_deleted_for_good(page, server, model, client) -> None:
    await signed_in(page, server)
    await page.click("#new-chat")
    model.enqueue(so.text("Octopuses have three hearts."))
    await page.fill("#message", "Tell me an animal fact")
    await page.click("#send")
    await page.wait_for_selector(".msg.assistant[data-done='true']", timeout=WAIT_MS)
    sid = await page.evaluate("localStorage.getItem('iriis.session')")

    def stored() -> list[str]:
        return [m["content"] for m in client.get(f"/v1/sessions/{sid}/messages").json()["data"]]

    # Regenerate: the reply and the message before it go, and the message is asked again.
    model.enqueue(so.text("A snail can sleep for three years."))
    reply = page.locator(".msg.assistant").last
    await reply.hover()
    await reply.locator("button.regenerate").click()
    await page.wait_for_function("() => [...document.querySelectorAll('.msg.assistant')].map(m => m.dataset.text)"
                                 ".join('|') === 'A snail can sleep for three years.'", timeout=WAIT_MS)
    assert await page.locator(".msg.user").count() == 1
    assert stored() == ["Tell me an animal fact", "A snail can sleep for three years."]
    assert "Octopuses" not in str(model.requests[-1]["body"]["messages"])

    # Delete a message: gone from the page, the store, and what the agent sees next.
    page.once("dialog", lambda d: d.accept())
    user = page.locator(".msg.user").last
    await user.hover()
    await user.locator("button.delete-msg").click()
    await page.wait_for_function("() => !document.querySelector('.msg.user')")
    assert stored() == ["A snail can sleep for three years."]
    await page.reload()
    await page.wait_for_selector(".msg.assistant[data-done='true']")
    assert await page.locator(".msg.user").count() == 0
    model.enqueue(so.text("Noted."))
    await page.fill("#message", "Thanks")
    await page.click("#send")
    await page.wait_for_function("() => [...document.querySelectorAll('.msg.assistant')].length === 2", timeout=WAIT_MS)
    sent = [m["content"] for m in model.requests[-1]["body"]["messages"] if m["role"] == "user"]
    assert "Tell me an animal fact" not in sent and sent[-1] == "Thanks"


async def test_a_reply_still_being_written_is_followed_again_after_a_reload(page, server, model, client) -> None:
    await signed_in(page, server)
    await page.click("#new-chat")
    words = " ".join(f"Step {i}." for i in range(40))
    model.enqueue(so.text("Here is the plan. " + words, chunk_delay=0.1))
    await page.fill("#message", "Plan my week, slowly")
    await page.click("#send")
    await page.wait_for_selector(".msg.assistant .sentence")
    # The page goes away mid-reply (a background turn: it keeps going on the server) ...
    await page.reload()
    # ... and, opened again, follows the running turn to its end.
    await page.wait_for_selector(".msg.assistant[data-done='true']", timeout=WAIT_MS)
    shown = await page.locator(".msg.assistant").last.get_attribute("data-text")
    assert shown.startswith("Here is the plan.") and shown.endswith("Step 39.")
    sid = await page.evaluate("localStorage.getItem('iriis.session')")
    stored = [(m["role"], m["content"]) for m in client.get(f"/v1/sessions/{sid}/messages").json()["data"]]
    assert stored == [("user", "Plan my week, slowly"), ("assistant", "Here is the plan. " + words)]
    assert await page.locator(".msg.user").count() == 1


async def test_a_link_in_a_reply_gets_a_preview_card_drawn_as_text(page, server, model) -> None:
    """The page's half of link previews. The server's half (GET /v1/preview through the SSRF
    guard, which refuses this machine's loopback test servers) is tested in test_ssrf.py and
    test_servers_core_web.py; here the route's answer is given in its documented shape."""
    asked: list[str] = []

    async def preview(route) -> None:
        asked.append(route.request.url)
        await route.fulfill(json={"url": "https://garden.example/guide", "final_url": "https://garden.example/guide",
                                  "status": 200, "site_name": "Garden Club", "title": "Tomato <b>guide</b>",
                                  "description": "Grow <img src=x onerror=\"window.__pwned = 3\"> tomatoes in pots."})
    await page.route("**/v1/preview?*", preview)
    await signed_in(page, server)
    await page.click("#new-chat")
    model.enqueue(so.text("Read [the guide](https://garden.example/guide) before planting."))
    await page.fill("#message", "How do I grow tomatoes?")
    await page.click("#send")
    card = page.locator(".msg.assistant a.preview")
    await card.wait_for(timeout=WAIT_MS)
    assert await card.locator(".preview-title").text_content() == "Tomato <b>guide</b>"
    assert await card.locator("img, b").count() == 0 and await page.evaluate("window.__pwned") is None
    assert await card.get_attribute("href") == "https://garden.example/guide"
    assert await card.get_attribute("rel") == "noopener noreferrer"
    assert asked and "url=https%3A%2F%2Fgarden.example%2Fguide" in asked[0]
    await shoot(page, "link-preview")


async def test_a_person_chats_and_sees_only_their_own_conversations(page, server, model, client) -> None:
    from tests.test_devices_agent import add_member

    email = "reader@example.com"
    await add_member(server, email)  # password "member-password"
    model.enqueue(so.text("This one is the owner's."))
    owners = client.post("/v1/chat", json={"message": "An owner-only conversation"}, headers={"Accept": "text/event-stream"})
    assert owners.status_code == 200
    await page.goto(server.url + "/")
    await page.wait_for_selector("#auth:not([hidden])")
    await page.click(".people-sign-in summary")
    await page.fill("#login-email", email)
    await page.fill("#login-password", "member-password")
    await page.click("#login-form button[type=submit]")
    await page.wait_for_selector("#chat-form:not([hidden])")
    model.enqueue(so.text("Hello, **reader**."))
    await page.fill("#message", "Hi, I am the reader")
    await page.click("#send")
    await page.wait_for_selector(".msg.assistant[data-done='true']", timeout=WAIT_MS)
    assert await page.locator(".msg.assistant .md strong").text_content() == "reader"
    item = page.locator("#conversations li.conversation", has_text="Hi, I am the reader")
    await item.wait_for()
    titles = await page.locator("#conversations .title").all_text_contents()
    assert "An owner-only conversation" not in titles
    assert await item.locator("button.rename").count() == 0  # renaming and deleting are the owner's
    await shoot(page, "person-chat")
    # A reload (same tab, same sign-in) shows the conversation again from the person's own route.
    await page.reload()
    await page.wait_for_selector(".msg.assistant[data-done='true']")
    assert "Hi, I am the reader" in await page.locator(".msg.user").last.text_content()
    assert await page.locator("#nav a[data-page=memory]").is_hidden()


async def test_an_upload_shows_in_history_after_a_reload(page, server, model) -> None:
    await signed_in(page, server)
    await page.click("#new-chat")
    await page.set_input_files("#file-input", files=[{"name": "square.png", "mimeType": "image/png", "buffer": png((200, 30, 30))},
                                                     {"name": "notes.txt", "mimeType": "text/plain", "buffer": b"plain words"}])
    await page.wait_for_function("() => document.querySelectorAll('#tray .chip.uploaded').length === 2")
    model.enqueue(so.text("Got both files."))
    await page.fill("#message", "Here are two files")
    await page.click("#send")
    await page.wait_for_selector(".msg.assistant[data-done='true']", timeout=WAIT_MS)
    await page.reload()
    await page.wait_for_selector(".msg.user .attachment[data-kind=image] img")
    # The element is there before its picture has loaded: wait for the load, then measure.
    await page.wait_for_function("() => document.querySelector('.msg.user .attachment img').complete",
                                 timeout=WAIT_MS)
    assert await page.evaluate("() => document.querySelector('.msg.user .attachment img').naturalWidth") == 64
    card = page.locator(".msg.user .attachment[data-kind=file] .download")
    assert "notes.txt" in await card.text_content()
    assert "Here are two files" in await page.locator(".msg.user").last.text_content()
    await shoot(page, "upload")


async def test_a_confirmation_from_its_card_is_kept_in_history(page, server, model) -> None:
    await signed_in(page, server)
    await page.click("#new-chat")
    model.enqueue(so.tools(("save_note", {"title": "Plants", "text": "water the fern"})), so.text("Saved the note."))
    await page.fill("#message", "note: water the fern")
    await page.click("#send")
    card = page.locator(".msg.assistant .confirm")
    await card.locator("button.approve").wait_for()
    assert "your yes" in await card.locator(".confirm-reason").text_content()
    await shoot(page, "confirm")
    await card.locator("button.approve").click()
    await page.wait_for_selector(".msg.assistant[data-done='true']", timeout=WAIT_MS)
    assert await card.get_attribute("data-answer") == "approved"
    await page.reload()
    await page.wait_for_selector(".msg.assistant .tool")
    assert "✓ save_note" in await page.locator(".msg.assistant .tool").all_text_contents()


async def test_memory_search_ranks_the_right_item_first(page, server, client) -> None:
    for text in ("My dentist is Dr. Rivera at Sunrise Dental", "I like green tea in the morning",
                 "The car is due for service in May"):
        assert client.post("/v1/memory", json={"kind": "fact", "text": text}).status_code == 201
    await signed_in(page, server, "#/memory")
    await page.wait_for_selector("#memory-q")
    await page.fill("#memory-q", "who is my dentist?")
    await page.press("#memory-q", "Enter")
    await page.wait_for_function("() => /dentist/i.test(document.querySelector('.memory-results .memory-item .text')?.textContent || '')")
    first = await page.locator(".memory-results .memory-item .text").first.text_content()
    assert "Dr. Rivera" in first
    await shoot(page, "memory")


async def test_a_device_is_paired_from_the_devices_page(page, server, tmp_path) -> None:
    await signed_in(page, server, "#/devices")
    await page.wait_for_selector("#pair-label")
    await page.fill("#pair-label", "Test desktop")
    await page.select_option("#pair-kind", "linux")
    await page.fill("#pair-pin", OWNER_PIN)
    await page.click(".pair-form button[type=submit]")
    code = (await page.locator(".pair-code").text_content()).strip()
    assert re.fullmatch(r"[A-Z0-9]{4}-[A-Z0-9]{4}", code)
    assert await page.evaluate("() => document.querySelector('.pair-result img.qr').naturalWidth") > 50
    await shoot(page, "devices-code")
    device = Path(sys.executable).parent / "iriis-device"
    done = subprocess.run([str(device), "--token-file", str(tmp_path / "token.json"), "pair", code, "--server", server.url,
                           "--kind", "linux"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    await page.reload()
    row = page.locator(".devices .device", has_text="Test desktop")
    await row.wait_for()
    assert await row.locator("input[data-skill=files]").is_checked()
    # Off never needs the PIN.
    await row.locator("input[data-skill=files]").uncheck()
    await page.wait_for_timeout(500)
    await page.reload()
    await row.wait_for()
    assert not await row.locator("input[data-skill=files]").is_checked()
    await shoot(page, "devices-list")


async def test_keys_added_and_revoked_without_a_restart_and_push(page, server) -> None:
    await signed_in(page, server, "#/settings")
    await page.wait_for_selector(".keys")
    await page.fill("input[aria-label='New key label']", "from the settings page")
    await page.click("text=New key")
    new_key = (await page.locator(".new-key").text_content()).strip()
    row = page.locator(".keys .key", has_text="from the settings page")
    await row.wait_for()
    with httpx.Client(base_url=server.url, timeout=30) as http:
        auth = {"Authorization": f"Bearer {new_key}"}
        assert http.get("/v1/auth/check", headers=auth).status_code == 200
        await page.reload()
        await row.wait_for()
        assert "never" not in await row.locator(".meta").text_content()  # last use is shown
        page.once("dialog", lambda d: d.accept())
        await row.locator("button").click()
        await row.wait_for(state="detached")
        assert http.get("/v1/auth/check", headers=auth).status_code == 401
    # Push: the server's key and the page's registration of a browser subscription. Headless
    # Chromium has no push service to subscribe with, so the subscription's JSON is made here in
    # the browser's own shape and goes through the page's code to the real route.
    key = await (await page.request.get(server.url + "/v1/push/key")).json()
    assert key["key"]
    await page.click("text=Turn on notifications")
    await page.wait_for_function("() => document.querySelector('.push-state').textContent.startsWith('On') || "
                                 "!document.querySelector('#page-settings .card:nth-of-type(3) .error-line').hidden")
    endpoint = "https://push.example.test/send/abc123"
    saved = await page.evaluate("""async (endpoint) => (await import('/static/js/settings.js')).registerSubscription({
        endpoint, expirationTime: null,
        keys: { p256dh: 'BNcRdreALRFXTkOOUHK1EtK2wtaz5Ry4YfYCA_0QTpQtUbVlUls0VJXg7A8u-Ts1XbjhazAkj7I99e8QcYP7DkM',
                auth: 'tBHItJI5svbpez7KI4CCXg' } })""", endpoint)
    listed = await (await page.request.get(server.url + "/v1/push/subscriptions")).json()
    assert any(s.get("id") == saved["id"] for s in listed["data"])
    await shoot(page, "settings")


async def test_the_camera_streams_a_fake_camera_and_shows_perception(page, server) -> None:
    await signed_in(page, server, "#/camera")
    await page.click("text=Start camera")
    await page.wait_for_function("() => Number(document.querySelector('#page-camera').dataset.frames || 0) >= 2", timeout=WAIT_MS)
    assert (await page.locator("#camera-perception").text_content()).strip()
    await shoot(page, "camera")
    await page.click("#page-camera >> text=Stop")


async def test_the_camera_page_coaches_follows_a_procedure_and_a_viewer_watches_over_webrtc(
        page, browser, server, model, client) -> None:
    from tests.test_e2e_camera import PRESSURE, vlm

    made = client.post("/v1/procedures", json={**PRESSURE, "name": "Boiler check (page)"})
    assert made.status_code == 201
    def vision(body: dict) -> so.Reply | None:
        text = json.dumps(body)
        if "periodic check" in text:  # a coach look
            return vlm("The red bolt is loose.", "warning")
        if "Question: Is the valve open?" in text:
            return vlm("The valve looks open.")
        return None
    model.side_responder = vision
    model.responder = lambda body: so.text("NOTHING") if "[camera]" in json.dumps(body) else None
    await signed_in(page, server, "#/camera")
    await page.select_option("#page-camera select[aria-label=Procedure]", label="Boiler check (page)")
    await page.click("text=Start camera")
    await page.wait_for_function("() => Number(document.querySelector('#page-camera').dataset.frames || 0) >= 2",
                                 timeout=WAIT_MS)
    # The procedure's first step is shown; a typed question is answered by the vision model.
    await page.wait_for_function("() => document.querySelector('#page-camera .meta').textContent.includes('step 1/2')")
    assert "Open the valve" in await page.locator("#page-camera .meta").first.text_content()
    await page.fill("#camera-question", "Is the valve open?")
    await page.click("#page-camera button:text-is('Ask')")
    await page.locator(".camera-log li", has_text="The valve looks open.").wait_for(timeout=WAIT_MS)
    # Coach mode: a problem the model sees is said once.
    await page.check("#page-camera label:has-text('Coach mode') input")
    coach = page.locator(".camera-log li", has=page.locator(".kind", has_text="coach"))
    await coach.first.wait_for(timeout=WAIT_MS)
    assert "The red bolt is loose." in await coach.first.text_content()

    # A watch-only viewer on another device gets the phone's video as a WebRTC peer.
    stream_id = await page.get_attribute("#page-camera", "data-stream")
    context = await browser.new_context(viewport=DESKTOP)
    context.set_default_timeout(WAIT_MS)
    viewer = await context.new_page()
    try:
        await signed_in(viewer, server, f"#/camera?watch={stream_id}")
        await viewer.wait_for_function("() => (document.querySelector('#page-camera video')?.videoWidth || 0) > 0",
                                       timeout=WAIT_MS)
        await page.locator(".camera-log li", has_text="someone is watching").wait_for()
        # Watch-only: none of the camera owner's controls, and a way to use one's own camera.
        assert not await viewer.is_visible("#camera-question")
        assert not await viewer.is_visible("#page-camera select[aria-label=Procedure]")
        assert await viewer.is_visible("#page-camera >> text=Use my camera instead")
        assert await page.is_visible("#camera-question")
        await viewer.wait_for_timeout(500)
        await viewer.screenshot(path=str(SHOTS / "camera-viewer-desktop.png"))
    finally:
        await context.close()
    await shoot(page, "camera-coach")
    await page.click("#page-camera >> text=Stop")


async def test_the_camera_page_takes_hands_free_spoken_questions(server, model, tmp_path) -> None:
    from actors.voice.audio import resample_pcm, wav_bytes
    from actors.voice.engines import SpeechService
    from actors.voice.protocol import INPUT_RATE, OUTPUT_RATE
    from tests.test_e2e_camera import vlm

    said = await SpeechService(environ={}).synthesize("What is written on the sign?")
    silence = b"\x00\x00" * INPUT_RATE
    wav = tmp_path / "question.wav"
    wav.write_bytes(wav_bytes(silence + resample_pcm(said.pcm, OUTPUT_RATE, INPUT_RATE) + silence * 4, INPUT_RATE))
    model.transcript = "what is written on the sign"
    model.side_responder = lambda body: vlm("It says EXIT.") if "what is written on the sign" in json.dumps(body) else None
    model.responder = lambda body: so.text("NOTHING") if "[camera]" in json.dumps(body) else None
    async with async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=CHROMIUM, headless=True,
                                           args=[*ARGS, f"--use-file-for-fake-audio-capture={wav}%noloop"])
        context = await browser.new_context(viewport=DESKTOP, permissions=["camera", "microphone"])
        context.set_default_timeout(WAIT_MS)
        page = await context.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        try:
            await signed_in(page, server, "#/camera")
            await page.click("text=Start camera")
            await page.wait_for_function("() => Number(document.querySelector('#page-camera').dataset.frames || 0) >= 1",
                                         timeout=WAIT_MS)
            await page.check("#page-camera label:has-text('Hands-free') input")
            await page.locator(".camera-log li", has_text="It says EXIT.").wait_for(timeout=90_000)
            heard = page.locator(".camera-log li", has=page.locator(".kind", has_text="you said"))
            assert await heard.all_text_contents() == ["you saidwhat is written on the sign"]
            await page.wait_for_timeout(2500)  # the silence after it is not sent as more questions
            assert await heard.count() == 1
            await shoot(page, "camera-hands-free")
        finally:
            await browser.close()
    assert not errors, errors
    # One utterance, one recording: a real WebM of the spoken question, not a fragment.
    assert len(model.transcriptions) == 1, model.transcriptions
    assert model.transcriptions[0]["size"] > 4000


async def test_a_call_rings_in_the_page_and_is_answered(page, server, model) -> None:
    await signed_in(page, server)
    model.enqueue(so.text("Hello, you wanted a call about the oven."))
    made = await page.request.post(server.url + "/v1/calls", data={"reason": "check the oven"})
    assert made.status == 201, await made.text()
    ringing = page.locator("#ringing")
    await ringing.wait_for(state="visible", timeout=45_000)
    assert "check the oven" in await ringing.text_content()
    await shoot(page, "ringing")
    await page.click("#ring-answer")
    call = (await made.json())["id"]
    await page.wait_for_function(f"async () => (await (await fetch('/v1/calls/{call}')).json()).status === 'answered'")
    # The answer opens a voice session (web/js/voice.js) where the agent speaks first; without
    # that module the call goes on in the chat with the `[call answered]` turn.
    if (await page.request.get(server.url + "/static/js/voice.js")).ok:
        await page.wait_for_selector(".voice", timeout=WAIT_MS)
    else:
        await page.wait_for_selector(".msg.assistant[data-done='true']", timeout=WAIT_MS)
        assert "[call answered]" in await page.locator(".msg.user").last.text_content()
    await signed_in(page, server, "#/calls")
    await page.wait_for_selector("#page-calls .call")
    await shoot(page, "calls")


async def test_a_pushed_call_rings_through_the_service_worker_with_answer_and_decline(page, server) -> None:
    """Headless Chromium has no push service, so the push is handed to the service worker over
    the DevTools protocol (ServiceWorker.deliverPushMessage): the payload is the one the server
    encrypts for the push service, made by the server's own builders."""
    from actors.notify.calls import Call
    from actors.notify.channels import push_payload
    from actors.notify.config import NotifyConfig
    from actors.notify.watcher import ended_notice, ring_notice

    await signed_in(page, server)
    await page.evaluate("async () => { await navigator.serviceWorker.ready; }")
    made = await page.request.post(server.url + "/v1/calls", data={"reason": "the pushed call", "at": "2031-01-01T09:00"})
    assert made.status == 201, await made.text()
    public = await made.json()
    call = Call(id=public["id"], at=public["at"], reason="the pushed call", status="ringing",
                created=public["at"], updated=public["at"])
    config = NotifyConfig(app_url=server.url)
    cdp = await page.context.new_cdp_session(page)
    registrations: list[str] = []
    cdp.on("ServiceWorker.workerRegistrationUpdated",
           lambda e: registrations.extend(r["registrationId"] for r in e["registrations"] if not r.get("isDeleted")))
    await cdp.send("ServiceWorker.enable")
    for _ in range(50):
        if registrations:
            break
        await page.wait_for_timeout(100)
    assert registrations, "the app's service worker is not registered"

    async def push(notice) -> None:
        await cdp.send("ServiceWorker.deliverPushMessage", {
            "origin": server.url, "registrationId": registrations[-1], "data": push_payload(notice).decode()})

    await push(ring_notice(call, config))
    # The open page rings in-page, and the worker shows the persistent notification with both actions.
    await page.locator("#ringing").wait_for(state="visible", timeout=WAIT_MS)
    assert "the pushed call" in await page.locator("#ringing").text_content()
    # The worker shows its notification on its own time (the page rang first in one CI run): wait for it.
    tag = f"call-{call.id}"
    await page.wait_for_function("""async (tag) => (await (await navigator.serviceWorker.ready)
        .getNotifications({ tag })).length > 0""", arg=tag, timeout=WAIT_MS)
    shown = await page.evaluate("""async (tag) => (await (await navigator.serviceWorker.ready).getNotifications({ tag }))
        .map((n) => ({ title: n.title, body: n.body, actions: n.actions.map((a) => a.action), sticky: n.requireInteraction }))""",
                                tag)
    assert shown == [{"title": "Iriis is calling", "body": "the pushed call", "actions": ["answer", "decline"],
                      "sticky": True}]
    # The call ended elsewhere: the notification closes and the page stops ringing.
    await push(ended_notice(call.model_copy(update={"status": "declined"}), config))
    await page.locator("#ringing").wait_for(state="hidden", timeout=WAIT_MS)
    await page.wait_for_function("""async (tag) => (await (await navigator.serviceWorker.ready)
        .getNotifications({ tag })).length === 0""", arg=tag, timeout=WAIT_MS)
    await page.request.post(server.url + f"/v1/calls/{call.id}/cancel")


async def test_tasks_and_the_errors_and_audit_page(page, server, client) -> None:
    made = client.post("/v1/tasks", json={"title": "Water plants", "goal": "Remind me to water the plants",
                                          "run_at": "2099-01-01T09:00:00"})
    assert made.status_code == 201, made.text
    await signed_in(page, server, "#/tasks")
    row = page.locator("#page-tasks .task", has_text="Water plants")
    await row.wait_for()
    assert "scheduled" in (await row.text_content()) or "pending" in (await row.text_content())
    await shoot(page, "tasks")
    await page.evaluate("location.hash = '#/errors'")
    await page.wait_for_selector("#page-errors table.log, #page-errors .empty")
    # The save_note call from the confirmation test (same server) is in the audit log.
    assert await page.locator("#page-errors td", has_text="save_note").count() >= 1
    await shoot(page, "errors")


async def test_a_busy_server_is_asked_again_when_it_says_and_stop_gives_the_text_back(page, server, model, client) -> None:
    """A 503 with Retry-After (the server's shape for a burst of new conversations, tested in
    test_backpressure.py) accepted nothing: the page counts down where the person can see it,
    sends the same message once more, and the reply comes; Stop during the wait gives the text
    back and sends nothing."""
    sent: list[str] = []
    busy = {"left": 1}

    async def chat(route) -> None:
        sent.append(route.request.post_data or "")
        if busy["left"]:
            busy["left"] -= 1
            await route.fulfill(status=503, headers={"Retry-After": "2"}, json={"error": {
                "code": "overloaded", "message": "Too many new conversations are waiting for a process to start; try again in 2 s."}})
        else:
            await route.continue_()
    await page.route("**/v1/chat", chat)
    await signed_in(page, server)
    await page.click("#new-chat")
    model.enqueue(so.text("Served after the wait."))
    await page.fill("#message", "Are you busy?")
    await page.click("#send")
    status = page.locator("#status")
    await page.wait_for_function("() => /Sending again in \\d s/.test(document.getElementById('status').textContent)")
    shown = await status.text_content()
    assert shown.startswith("Too many new conversations are waiting for a process to start. Sending again in")
    assert "try again" not in shown
    await shoot(page, "chat-busy-countdown")
    await page.wait_for_selector(".msg.assistant[data-done='true']", timeout=WAIT_MS)
    assert (await page.locator(".msg.assistant").last.locator(".md").text_content()).strip() == "Served after the wait."
    assert len(sent) == 2 and all(json.loads(body)["message"] == "Are you busy?" for body in sent)
    assert await page.locator(".msg.user").count() == 1 and await status.is_hidden()
    # One conversation, holding the message once.
    [session] = [s for s in client.get("/v1/sessions").json()["data"] if s["title"] == "Are you busy?"]
    stored = client.get(f"/v1/sessions/{session['id']}/messages").json()["data"]
    assert [m["content"] for m in stored] == ["Are you busy?", "Served after the wait."]

    # Busy again, and the person stops waiting: nothing more is sent and the text is theirs.
    busy["left"] = 1
    await page.fill("#message", "Never mind then")
    await page.click("#send")
    await page.wait_for_function("() => /Sending again/.test(document.getElementById('status').textContent)")
    await page.click("#stop")
    await page.wait_for_function("() => document.getElementById('message').value === 'Never mind then'")
    assert len(sent) == 3 and await status.is_hidden()
    await page.wait_for_timeout(2500)      # past the Retry-After: still nothing sent
    assert len(sent) == 3
