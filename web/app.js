"use strict";
(() => {
  const SESSION_KEY = "iriis.session";
  const LOST = "Connection lost — try again";
  const $ = (id) => document.getElementById(id);
  const ui = {
    auth: $("auth"), keyForm: $("key-form"), keyInput: $("key-input"), authError: $("auth-error"),
    transcript: $("transcript"), chatForm: $("chat-form"), message: $("message"),
    send: $("send"), stop: $("stop"), newChat: $("new-chat"), status: $("status"),
  };
  let busy = false;
  let controller = null;

  // ---- small helpers ----
  const store = {
    get() { try { return localStorage.getItem(SESSION_KEY); } catch { return null; } },
    set(id) { try { if (id) localStorage.setItem(SESSION_KEY, id); } catch { /* ignore */ } },
    clear() { try { localStorage.removeItem(SESSION_KEY); } catch { /* ignore */ } },
  };

  function el(tag, cls, text) {
    const node = document.createElement(tag);
    if (cls) node.className = cls;
    if (text != null) node.textContent = String(text);
    return node;
  }

  function scrollDown() { ui.transcript.scrollTop = ui.transcript.scrollHeight; }

  function addBubble(kind, text) {
    const bubble = el("div", "msg " + kind, text);
    ui.transcript.append(bubble);
    scrollDown();
    return bubble;
  }

  const addError = (message) => addBubble("error", message || "Something went wrong.");

  function setStatus(text) {
    ui.status.textContent = text || "";
    ui.status.hidden = !text;
  }

  function setBusy(value) {
    busy = value;
    ui.send.disabled = value;
    ui.stop.hidden = !value;
    ui.chatForm.setAttribute("aria-busy", String(value));
  }

  async function errorMessage(res) {
    try {
      const body = await res.json();
      if (body && body.error && body.error.message) return String(body.error.message);
    } catch { /* not JSON */ }
    return `Request failed (${res.status})`;
  }

  const request = (url, opts = {}) => fetch(url, { credentials: "same-origin", ...opts });

  // ---- auth ----
  function showSignIn(show) {
    ui.auth.hidden = !show;
    ui.transcript.hidden = show;
    ui.chatForm.hidden = show;
    ui.newChat.hidden = show;
    if (show) ui.keyInput.focus();
  }

  async function signIn(key) {
    ui.authError.textContent = "";
    let res;
    try {
      res = await request("/v1/auth/cookie", { method: "POST", headers: { Authorization: "Bearer " + key } });
    } catch {
      setStatus(LOST);
      return false;
    }
    setStatus("");
    if (res.ok) return true;
    ui.authError.textContent = res.status === 401 ? "That key was not accepted." : await errorMessage(res);
    return false;
  }

  async function signedIn() {
    showSignIn(false);
    await loadHistory();
    ui.message.focus();
  }

  ui.keyForm.addEventListener("submit", async (event) => {
    event.preventDefault();
    const key = ui.keyInput.value.trim();
    if (!key) return;
    if (await signIn(key)) {
      ui.keyInput.value = "";
      await signedIn();
    }
  });

  // ---- history ----
  async function loadHistory() {
    const id = store.get();
    if (!id) return;
    let res;
    try {
      res = await request(`/v1/sessions/${encodeURIComponent(id)}/messages`);
    } catch {
      setStatus(LOST);
      return;
    }
    if (res.status === 404) { store.clear(); return; }
    if (res.status === 401) { showSignIn(true); return; }
    if (!res.ok) { addError(await errorMessage(res)); return; }
    const body = await res.json().catch(() => null);
    ui.transcript.replaceChildren();
    for (const m of (body && body.data) || []) {
      if (m.role === "user") addBubble("user", m.content);
      else if (m.role === "assistant") addBubble("assistant", m.content).dataset.done = "true";
    }
    // A turn still running (the page was closed mid-reply): follow it again from its start.
    const state = await request(`/v1/sessions/${encodeURIComponent(id)}/state`).then(
      (r) => (r.ok ? r.json() : null), () => null);
    if (state && state.running) {
      stream(() => request(`/v1/sessions/${encodeURIComponent(id)}/stream`, { signal: controller.signal }));
    }
  }

  // ---- streaming ----
  function parseEvent(block) {
    let type = "message";
    const data = [];
    for (const line of block.split("\n")) {
      if (!line || line.startsWith(":")) continue;
      const colon = line.indexOf(":");
      const field = colon < 0 ? line : line.slice(0, colon);
      let value = colon < 0 ? "" : line.slice(colon + 1);
      if (value.startsWith(" ")) value = value.slice(1);
      if (field === "event") type = value;
      else if (field === "data") data.push(value);
    }
    if (!data.length) return null;
    try { return { type, data: JSON.parse(data.join("\n")) }; } catch { return null; }
  }

  async function readStream(res, onEvent) {
    const reader = res.body.getReader();
    const decoder = new TextDecoder();
    let buf = "";
    const drain = () => {
      buf = buf.replace(/\r\n|\r(?!$)/g, "\n");
      let idx;
      while ((idx = buf.indexOf("\n\n")) >= 0) {
        const ev = parseEvent(buf.slice(0, idx));
        buf = buf.slice(idx + 2);
        if (ev) onEvent(ev);
      }
    };
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buf += decoder.decode(value, { stream: true });
      drain();
    }
    buf += decoder.decode() + "\n\n";
    drain();
  }

  // A confirm-tier action waits for the owner's answer: Allow / Decline, with the PIN if needed.
  function confirmCard(data) {
    const card = el("div", "confirm");
    card.dataset.id = String(data.id || "");
    card.append(el("p", "question", data.question || "Allow this action?"));
    // Why the yes is needed: this turn read something that is not the owner's own words.
    if (data.reason && data.sources && data.sources.length) {
      card.append(el("p", "confirm-reason", data.reason.charAt(0).toUpperCase() + data.reason.slice(1) + "."));
    }
    let pin = null;
    if (data.needs_pin) {
      pin = el("input");
      pin.type = "password";
      pin.inputMode = "numeric";
      pin.placeholder = "PIN";
      pin.className = "pin";
      pin.setAttribute("aria-label", "PIN");
      card.append(pin);
    }
    const yes = el("button", "approve", "Allow");
    const no = el("button", "decline ghost", "Decline");
    yes.type = no.type = "button";
    const note = el("p", "confirm-note");
    const answer = async (approve) => {
      yes.disabled = no.disabled = true;
      const body = { approve };
      if (approve && pin) body.pin = pin.value;
      try {
        const res = await request("/v1/confirmations/" + encodeURIComponent(card.dataset.id), {
          method: "POST",
          headers: { "Content-Type": "application/json" },
          body: JSON.stringify(body),
        });
        if (res.ok) {
          card.dataset.answer = approve ? "approved" : "declined";
          note.textContent = approve ? "Allowed." : "Declined.";
        } else {
          note.textContent = await errorMessage(res);
          yes.disabled = no.disabled = false;
        }
      } catch (err) {
        note.textContent = LOST;
        yes.disabled = no.disabled = false;
      }
    };
    yes.addEventListener("click", () => answer(true));
    no.addEventListener("click", () => answer(false));
    card.append(yes, no, note);
    return card;
  }

  function makeReply() {
    const typing = el("div", "typing");
    typing.setAttribute("aria-label", "Iriis is typing");
    typing.append(el("span"), el("span"), el("span"));
    ui.transcript.append(typing);
    scrollDown();

    let bubble = null;
    const tools = new Map();
    const ensure = () => {
      if (!bubble) {
        bubble = el("div", "msg assistant");
        ui.transcript.insertBefore(bubble, typing.isConnected ? typing : null);
      }
      return bubble;
    };
    const addSentence = (text) => {
      typing.remove();
      ensure().append(el("span", "sentence", text), " ");
    };

    let finished = false;
    let lastIndex = -1;
    const handle = ({ type, data }) => {
      data = data || {};
      switch (type) {
        case "session":
          store.set(data.session_id);
          break;
        case "sentence":
          addSentence(data.text);
          if (typeof data.index === "number") lastIndex = data.index;
          break;
        case "tool": {
          const name = String(data.name || "tool");
          let line = data.status === "start" ? null : tools.get(name);
          if (!line) {
            line = ensure().appendChild(el("div", "tool"));
            tools.set(name, line);
          }
          if (data.status === "done") line.textContent = "✓ " + name;
          else if (data.status === "error") { line.textContent = "✗ " + name; line.classList.add("failed"); }
          else line.textContent = "using " + name + "…";
          break;
        }
        case "confirm":
          ensure().append(confirmCard(data));
          break;
        case "done":
          finished = true;
          store.set(data.session_id);
          if (!bubble && data.text) addSentence(data.text);
          typing.remove();
          ensure().dataset.done = "true";
          break;
        case "error":
          finished = true;
          typing.remove();
          addError(data.message);
          break;
      }
      scrollDown();
    };
    return { handle, typing, isFinished: () => finished, lastIndex: () => lastIndex };
  }

  let current = null;

  // Open a stream (a new chat turn, or a running one followed again) and render its events.
  async function stream(open) {
    setBusy(true);
    setStatus("");
    const reply = makeReply();
    current = reply;
    controller = controller || new AbortController();
    try {
      const res = await open();
      if (!res.ok) {
        reply.typing.remove();
        addError(await errorMessage(res));
        if (res.status === 401) showSignIn(true);
        return;
      }
      await readStream(res, reply.handle);
      if (!reply.isFinished()) setStatus(LOST);
    } catch (err) {
      if (err && err.name === "AbortError") return;
      setStatus(LOST);
    } finally {
      reply.typing.remove();
      controller = null;
      current = null;
      setBusy(false);
    }
  }

  function send(text) {
    addBubble("user", text);
    controller = new AbortController();
    // background: the reply finishes (and you are notified) even if this page closes.
    const body = { message: text, background: true };
    const sid = store.get();
    if (sid) body.session_id = sid;
    return stream(() => request("/v1/chat", {
      method: "POST",
      headers: { "Content-Type": "application/json", Accept: "text/event-stream" },
      body: JSON.stringify(body),
      signal: controller.signal,
    }));
  }

  // Barge-in: stop the reply; the server keeps only the sentences shown so far.
  ui.stop.addEventListener("click", async () => {
    const sid = store.get();
    if (!sid || !current) return;
    try {
      await request(`/v1/sessions/${encodeURIComponent(sid)}/cancel`, {
        method: "POST",
        headers: { "Content-Type": "application/json" },
        body: JSON.stringify({ heard_index: current.lastIndex() }),
      });
    } catch {
      setStatus(LOST);
    }
  });

  // ---- composer ----
  function resizeInput() {
    ui.message.style.height = "auto";
    ui.message.style.height = Math.min(ui.message.scrollHeight, 200) + "px";
  }

  ui.chatForm.addEventListener("submit", (event) => {
    event.preventDefault();
    const text = ui.message.value.trim();
    if (!text || busy) return;
    ui.message.value = "";
    resizeInput();
    send(text);
  });

  ui.message.addEventListener("keydown", (event) => {
    if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
      event.preventDefault();
      ui.chatForm.requestSubmit();
    }
  });
  ui.message.addEventListener("input", resizeInput);

  ui.newChat.addEventListener("click", () => {
    if (controller) controller.abort();
    store.clear();
    ui.transcript.replaceChildren();
    setStatus("");
    ui.message.focus();
  });

  window.addEventListener("offline", () => setStatus("You are offline"));
  window.addEventListener("online", () => setStatus(""));

  // ---- start ----
  async function start() {
    const match = /^#key=(.*)$/.exec(location.hash);
    if (match) {
      history.replaceState(null, "", location.pathname + location.search);
      let key = match[1];
      try { key = decodeURIComponent(key); } catch { /* use raw */ }
      if (key && (await signIn(key))) return signedIn();
      return showSignIn(true);
    }
    let res;
    try {
      res = await request("/v1/auth/check");
    } catch {
      setStatus(LOST);
      return showSignIn(true);
    }
    if (res.ok) return signedIn();
    if (res.status !== 401) setStatus(await errorMessage(res));
    showSignIn(true);
  }

  start();
})();
