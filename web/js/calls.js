// Calls: the ringing screen (from a push through the service worker, or seen while the page
// is open), and the Calls page: schedule one, and the scheduled, ringing and missed ones.

import { api, el, setStatus, showError, when } from "./api.js";

const LOOK_EVERY_MS = 10_000;

export class Ringing {
  constructor(root, onAnswered) {
    this.root = root;
    this.onAnswered = onAnswered;
    this.call = null;
    this.timer = null;
    this.seen = new Set();
    root.querySelector("#ring-answer").addEventListener("click", () => this.answer());
    root.querySelector("#ring-decline").addEventListener("click", () => this.decline());
  }

  // While the page is open, a ringing call shows even with no push set up.
  start() {
    if (this.timer) return;
    const look = async () => {
      try {
        const body = await api("/v1/calls?status=ringing");
        const ringingNow = ((body && body.data) || []).find((c) => c.status === "ringing");
        if (ringingNow && !this.seen.has(ringingNow.id)) this.ring(ringingNow);
      } catch (err) {
        if (err.status === 404 || err.status === 405) { clearInterval(this.timer); return; }
      }
    };
    this.timer = setInterval(look, LOOK_EVERY_MS);
    look();
  }

  ring(call) {
    if (!call || call.id == null) return;
    this.call = call;
    this.seen.add(call.id);
    this.root.querySelector("#ringing-reason").textContent = call.reason || call.body || "";
    this.root.hidden = false;
    this.root.dataset.callId = String(call.id);
    if (navigator.vibrate) navigator.vibrate([400, 200, 400, 200, 400]);
  }

  stopRinging() {
    this.root.hidden = true;
    if (navigator.vibrate) navigator.vibrate(0);
  }

  // Answered from the notification's button or a call link: answering again is harmless (a
  // call that stopped ringing becomes a call-back), and it says where the voice session opens.
  async answered(callId) {
    this.seen.add(callId);
    this.call = { id: callId };
    await this.answer();
  }

  async answer() {
    const call = this.call;
    this.stopRinging();
    if (!call) return;
    try {
      const answered = await api(`/v1/calls/${call.id}/answer`, { method: "POST" });
      await this.openVoice(answered || { call });
    } catch (err) {
      setStatus(err.message);
    }
  }

  async decline() {
    const call = this.call;
    this.stopRinging();
    if (!call) return;
    await api(`/v1/calls/${call.id}/decline`, { method: "POST" }).catch((err) => setStatus(err.message));
  }

  // A voice session when the voice module is there; otherwise the call goes on in the chat:
  // its conversation opens, and with no opening line the agent is asked to speak first.
  async openVoice(answer) {
    try {
      const voice = await import("./voice.js");
      if (voice.answerCall) return voice.answerCall(answer);
    } catch { /* no voice module on this server */ }
    if (this.onAnswered) await this.onAnswered(answer);
  }
}

function callRow(c, refresh) {
  const li = el("li", "row call");
  li.dataset.status = c.status || "";
  const main = el("div", "row-main");
  main.append(el("strong", null, c.reason || "Call"), el("span", "meta",
    `${c.status || ""} · ${when(c.at)}${c.repeat ? " · repeats " + c.repeat : ""}`));
  li.append(main);
  if (c.status === "scheduled" || c.status === "ringing") {
    const cancel = el("button", "ghost small", "Cancel");
    cancel.type = "button";
    cancel.addEventListener("click", async () => {
      await api(`/v1/calls/${c.id}/cancel`, { method: "POST" }).catch((err) => setStatus(err.message));
      refresh();
    });
    li.append(cancel);
  }
  return li;
}

export function mount(root) {
  root.replaceChildren();
  root.append(el("h2", null, "Calls"));
  const form = el("form", "card inline-form");
  const at = el("input");
  at.type = "datetime-local";
  at.required = true;
  at.setAttribute("aria-label", "When");
  const reason = el("input");
  reason.placeholder = "What the call is about";
  reason.required = true;
  reason.maxLength = 500;
  reason.setAttribute("aria-label", "Reason");
  const repeat = el("select");
  repeat.setAttribute("aria-label", "Repeat");
  for (const [v, t] of [["", "once"], ["daily", "every day"], ["every 1h", "every hour"]]) {
    const o = el("option", null, t);
    o.value = v;
    repeat.append(o);
  }
  const add = el("button", null, "Schedule a call");
  add.type = "submit";
  const error = el("p", "error-line");
  error.hidden = true;
  form.append(at, reason, repeat, add, error);
  const lists = el("div", "call-lists");
  root.append(form, lists);
  const refresh = async () => {
    let body;
    try {
      body = await api("/v1/calls");
      showError(error, null);
    } catch (err) {
      showError(error, err.status === 404 ? new Error("Calls are not available on this server yet.") : err);
      return;
    }
    lists.replaceChildren();
    const calls = (body && body.data) || [];
    const groups = [["Ringing", (c) => c.status === "ringing"], ["Scheduled", (c) => c.status === "scheduled"],
      ["Missed", (c) => c.status === "missed"], ["Earlier", (c) => !["ringing", "scheduled", "missed"].includes(c.status)]];
    for (const [title, test] of groups) {
      const items = calls.filter(test);
      if (!items.length) continue;
      const ul = el("ul", "rows");
      for (const c of items) ul.append(callRow(c, refresh));
      lists.append(el("h3", null, title), ul);
    }
    if (!calls.length) lists.append(el("p", "empty", "No calls yet."));
  };
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    const body = { at: new Date(at.value).getTime() / 1000, reason: reason.value.trim() };
    if (repeat.value) body.repeat = repeat.value;
    try {
      await api("/v1/calls", { method: "POST", body });
      reason.value = "";
      showError(error, null);
    } catch (err) { showError(error, err); }
    refresh();
  });
  return { refresh };
}
