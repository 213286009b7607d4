// The conversation on screen: history from the server, a turn streamed sentence by sentence,
// the reply drawn as safe markdown when it is done, tool lines, confirmations, and the
// actions on a message (copy, delete, regenerate).

import { LOST, api, countdown, el, errorMessage, readStream, request, retryAfter, setStatus } from "./api.js";
import { confirmCard, linkPreview, setToolLine, toolLine } from "./cards.js";
import { renderMarkdown, renderPlain } from "./markdown.js";

// A busy server (503 with Retry-After: nothing was accepted) is asked again this many times.
const BUSY_TRIES = 5;

// The conversation on screen survives a reload; the owner's and a person's are kept apart.
const sessionKey = () => (routes.owner ? "iriis.session" : "iriis.session.person");
export const current = {
  get() { try { return localStorage.getItem(sessionKey()); } catch { return null; } },
  set(id) { try { if (id) localStorage.setItem(sessionKey(), id); } catch { /* ignore */ } },
  clear() { try { localStorage.removeItem(sessionKey()); } catch { /* ignore */ } },
};

// Where conversations live: the owner's routes, or a signed-in person's own (they see only
// the conversations they started, chat through /v1/ask/stream, and answer their own
// confirmations; deleting messages stays the owner's).
export const routes = {
  owner: true,
  list() { return this.owner ? "/v1/sessions" : "/v1/me/sessions"; },
  messages(id) { return `${this.owner ? "/v1/sessions" : "/v1/me/sessions"}/${encodeURIComponent(id)}/messages`; },
  send() { return this.owner ? "/v1/chat" : "/v1/ask/stream"; },
  confirm() { return this.owner ? "/v1/confirmations/" : "/v1/ask/confirmations/"; },
};

export class Chat {
  constructor({ transcript, onBusy, onSession, onSignedOut, onEmpty }) {
    this.transcript = transcript;
    this.onBusy = onBusy;
    this.onSession = onSession;
    this.onSignedOut = onSignedOut;
    this.onEmpty = onEmpty;
    this.controller = null;
    this.reply = null;
    this.busy = false;
    this.waiting = false;   // counting down a busy server's Retry-After
  }

  scrollDown() { this.transcript.scrollTop = this.transcript.scrollHeight; }

  clear() {
    if (this.controller) this.controller.abort();
    this.transcript.replaceChildren();
    this.onEmpty(true);
  }

  bubble(kind, node) {
    const msg = el("div", "msg " + kind);
    if (node) msg.append(node);
    this.transcript.append(msg);
    this.onEmpty(false);
    this.scrollDown();
    return msg;
  }

  addError(message) { return this.bubble("error", document.createTextNode(message || "Something went wrong.")); }

  userBubble(text, id) {
    const msg = this.bubble("user", renderPlain(text));
    msg.dataset.text = text;
    if (id) msg.dataset.id = id;
    this.actions(msg);
    return msg;
  }

  // A finished assistant message: its tool lines, then its text as markdown.
  assistantBubble(m) {
    const msg = this.bubble("assistant");
    for (const t of (m.meta && m.meta.tools) || []) msg.append(toolLine(t.name, t.status || "done"));
    this.finish(msg, m.content, m.id);
    if (m.meta && m.meta.interrupted) msg.append(el("p", "note", "(stopped)"));
    return msg;
  }

  finish(msg, text, id) {
    msg.querySelector(".sentences")?.remove();
    const md = renderMarkdown(text);
    msg.append(md);
    if (id) msg.dataset.id = id;
    msg.dataset.text = text || "";
    msg.dataset.done = "true";
    linkPreview(md);
    this.actions(msg);
  }

  actions(msg) {
    msg.querySelector(".msg-actions")?.remove();
    const bar = el("div", "msg-actions");
    const copy = el("button", "ghost small", "Copy");
    copy.type = "button";
    copy.addEventListener("click", () => navigator.clipboard?.writeText(msg.dataset.text || "").catch(() => {}));
    const del = el("button", "ghost small delete-msg", "Delete");
    del.type = "button";
    del.addEventListener("click", () => this.deleteMessage(msg));
    bar.append(copy);
    if (!routes.owner) { msg.append(bar); return; }
    bar.append(del);
    if (msg.classList.contains("assistant")) {
      const again = el("button", "ghost small regenerate", "Regenerate");
      again.type = "button";
      again.addEventListener("click", () => this.regenerate(msg));
      bar.append(again);
    }
    msg.append(bar);
  }

  async idsFromServer() {
    const sid = current.get();
    if (!sid) return [];
    const body = await api(routes.messages(sid));
    return (body.data || []).filter((m) => m.role === "user" || m.role === "assistant");
  }

  // Messages streamed in this page have no id yet: match them to the stored ones by position.
  async ensureIds() {
    const shown = [...this.transcript.querySelectorAll(".msg.user, .msg.assistant")];
    if (shown.every((m) => m.dataset.id)) return;
    const stored = await this.idsFromServer();
    if (stored.length !== shown.length) return;
    shown.forEach((m, i) => { m.dataset.id = stored[i].id; });
  }

  async deleteMessage(msg) {
    if (!confirm("Delete this message for good? The agent forgets it too.")) return;
    try {
      await this.ensureIds();
      if (!msg.dataset.id) throw new Error("Reload the page, then try again.");
      await api(`/v1/messages/${encodeURIComponent(msg.dataset.id)}`, { method: "DELETE" });
      msg.remove();
      if (!this.transcript.querySelector(".msg")) this.onEmpty(true);
    } catch (err) {
      setStatus(err.message);
    }
  }

  // Ask again: the last reply and the message before it go, and that message is sent anew.
  async regenerate(msg) {
    if (this.busy) return;
    const prev = msg.previousElementSibling;
    if (!prev || !prev.classList.contains("user")) return;
    try {
      await this.ensureIds();
      for (const m of [msg, prev]) {
        if (m.dataset.id) await api(`/v1/messages/${encodeURIComponent(m.dataset.id)}`, { method: "DELETE" });
      }
    } catch (err) {
      setStatus(err.message);
      return;
    }
    const text = prev.dataset.text;
    msg.remove();
    prev.remove();
    await this.send(text);
  }

  async load(id) {
    this.transcript.replaceChildren();
    if (!id) { this.onEmpty(true); return; }
    let body;
    try {
      body = await api(routes.messages(id));
    } catch (err) {
      if (err.status === 404) { current.clear(); this.onEmpty(true); return; }
      if (err.status === 401) { this.onSignedOut(); return; }
      if (err.status === 0) setStatus(LOST); else this.addError(err.message);
      return;
    }
    current.set(id);
    // A turn still running (the page was closed mid-reply) is followed again from its start,
    // so its stored partial reply is not drawn as well.
    const state = routes.owner ? await api(`/v1/sessions/${encodeURIComponent(id)}/state`).catch(() => null) : null;
    const running = Boolean(state && state.running);
    const msgs = (body && body.data) || [];
    for (const m of msgs) {
      if (m.role === "user") this.userBubble(m.content, m.id);
      else if (m.role === "assistant" && !(running && m.meta && m.meta.pending)) this.assistantBubble(m);
    }
    this.onEmpty(!this.transcript.querySelector(".msg"));
    if (running) {
      this.controller = new AbortController();
      const signal = this.controller.signal;
      this.stream(() => request(`/v1/sessions/${encodeURIComponent(id)}/stream`, { signal }));
    }
  }

  makeReply() {
    const typing = el("div", "typing");
    typing.setAttribute("aria-label", "Iriis is typing");
    typing.append(el("span"), el("span"), el("span"));
    this.transcript.append(typing);
    this.scrollDown();
    let msg = null;
    let sentences = null;
    const tools = new Map();
    const ensure = () => {
      if (!msg) {
        msg = el("div", "msg assistant");
        this.transcript.insertBefore(msg, typing.isConnected ? typing : null);
        this.onEmpty(false);
      }
      return msg;
    };
    const addSentence = (text) => {
      typing.remove();
      if (!sentences) sentences = ensure().appendChild(el("div", "sentences"));
      sentences.append(el("span", "sentence", text), " ");
    };
    const state = { finished: false, lastIndex: -1, started: false };
    const handle = ({ type, data }) => {
      data = data || {};
      switch (type) {
        case "session":
          state.started = true;
          current.set(data.session_id);
          this.onSession(data.session_id);
          break;
        case "sentence":
          addSentence(data.text);
          if (typeof data.index === "number") state.lastIndex = data.index;
          break;
        case "tool": {
          const name = String(data.name || "tool");
          let line = data.status === "start" ? null : tools.get(name);
          if (!line) {
            line = toolLine(name, data.status);
            ensure().insertBefore(line, sentences);
            tools.set(name, line);
          } else setToolLine(line, name, data.status);
          break;
        }
        case "confirm":
          typing.remove();
          ensure().insertBefore(confirmCard(data, routes.confirm()), sentences);
          break;
        case "done":
          state.finished = true;
          typing.remove();
          current.set(data.session_id);
          this.finish(ensure(), data.text || (sentences ? sentences.textContent.trim() : ""), data.message_id);
          if (data.cancelled) msg.append(el("p", "note", "(stopped)"));
          this.onSession(data.session_id, true);
          break;
        case "error":
          state.finished = true;
          typing.remove();
          this.addError(data.message);
          break;
      }
      this.scrollDown();
    };
    return { handle, typing, state };
  }

  // Open a stream (a new turn, or a running one followed again) and draw its events.
  // Resolves to false when the server refused the turn before it started.
  async stream(open) {
    this.busy = true;
    this.onBusy(true);
    setStatus("");
    const reply = this.makeReply();
    this.reply = reply;
    let accepted = true;
    try {
      let res = await open();
      for (let tries = 0; res.status === 503 && tries < BUSY_TRIES; tries++) {
        const wait = retryAfter(res);
        if (wait === null) break;
        // The server's reason, without its own "try again in N s": the countdown says that.
        const why = (await errorMessage(res)).replace(/[;,.]?\s*try again in \d+ s\.?$/i, ".");
        this.waiting = true;
        try {
          await countdown(wait, this.controller && this.controller.signal,
            (left) => setStatus(`${why} Sending again in ${left} s (Stop to give up).`));
        } catch (err) {
          accepted = false;    // stopped while waiting: never sent, so the text comes back
          throw err;
        } finally {
          this.waiting = false;
          setStatus("");
        }
        res = await open();
      }
      if (!res.ok) {
        accepted = false;
        reply.typing.remove();
        this.addError(await errorMessage(res));
        if (res.status === 401) this.onSignedOut();
        return false;
      }
      await readStream(res, reply.handle);
      if (!reply.state.finished) setStatus(LOST);
    } catch (err) {
      if (!(err && err.name === "AbortError")) {
        setStatus(LOST);
        accepted = reply.state.started; // a network error before the turn began: give the text back
      }
    } finally {
      reply.typing.remove();
      this.controller = null;
      this.reply = null;
      this.busy = false;
      this.onBusy(false);
    }
    return accepted;
  }

  // Send a message; resolves to false when it was refused (the caller gives the text back).
  async send(text) {
    const bubble = this.userBubble(text);
    this.controller = new AbortController();
    const signal = this.controller.signal;
    // background: the reply finishes (and you are notified) even if this page closes.
    const body = routes.owner ? { message: text, background: true } : { message: text };
    const sid = current.get();
    if (sid) body.session_id = sid;
    const ok = await this.stream(() => request(routes.send(), {
      method: "POST",
      headers: { "Content-Type": "application/json", Accept: "text/event-stream" },
      body: JSON.stringify(body),
      signal,
    }));
    if (!ok) bubble.classList.add("refused");
    return ok;
  }

  // Barge-in: stop the reply; the server keeps only the sentences shown so far.
  async stop() {
    // Still waiting out a busy server: nothing was sent, so stopping only ends the wait.
    if (this.waiting) { if (this.controller) this.controller.abort(); return; }
    const sid = current.get();
    if (!sid || !this.reply) return;
    if (!routes.owner) { if (this.controller) this.controller.abort(); return; }
    try {
      await api(`/v1/sessions/${encodeURIComponent(sid)}/cancel`, {
        method: "POST", body: { heard_index: this.reply.state.lastIndex },
      });
    } catch {
      setStatus(LOST);
    }
  }
}
