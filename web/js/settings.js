// Settings: the owner's keys (by label and last use; add one, revoke any, no restart), the
// action PIN, notifications on this device (Web Push), the owner's accounts and other tool
// servers (each one's state, last use and last error, and a switch), and the chat models.

import { api, auth, el, showError, when } from "./api.js";

function section(root, title) {
  const box = el("section", "card");
  box.append(el("h3", null, title));
  root.append(box);
  return box;
}

function keysSection(root) {
  const box = section(root, "Owner keys");
  const list = el("ul", "rows keys");
  const form = el("form", "inline-form");
  const label = el("input");
  label.placeholder = "What the new key is for, e.g. Home Assistant";
  label.maxLength = 80;
  label.setAttribute("aria-label", "New key label");
  const add = el("button", null, "New key");
  add.type = "submit";
  const out = el("div");
  const error = el("p", "error-line");
  error.hidden = true;
  const env = el("p", "meta");
  form.append(label, add);
  box.append(list, env, form, out, error);
  const refresh = async () => {
    const body = await api("/v1/keys");
    list.replaceChildren();
    for (const k of body.data) {
      const li = el("li", "row key");
      li.dataset.id = String(k.id);
      const main = el("div", "row-main");
      main.append(el("strong", null, k.label + (k.current ? " (this browser)" : "")),
        el("span", "meta", `created ${when(k.created)} · last used ${when(k.last_used)}`));
      const revoke = el("button", "ghost small", "Revoke");
      revoke.type = "button";
      revoke.addEventListener("click", async () => {
        const warn = k.current ? " This browser signs in with it: you will be signed out." : "";
        if (!confirm(`Revoke “${k.label}”? Whatever uses it stops working within seconds.${warn}`)) return;
        try { await api(`/v1/keys/${k.id}`, { method: "DELETE" }); await refresh(); } catch (err) { showError(error, err); }
      });
      li.append(main, revoke);
      list.append(li);
    }
    if (!body.data.length) list.append(el("li", "empty", "No stored keys."));
    env.textContent = body.from_environment ? `${body.from_environment} more from IRIIS_OWNER_KEYS (changed only in the environment).` : "";
  };
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    try {
      const made = await api("/v1/keys", { method: "POST", body: { label: label.value.trim() } });
      label.value = "";
      out.replaceChildren(el("p", "ok-line", "Your new key, shown this once (it works now):"), el("p", "secret new-key", made.key));
      showError(error, null);
      await refresh();
    } catch (err) { showError(error, err); }
  });
  return refresh;
}

function pinSection(root) {
  const box = section(root, "Action PIN");
  const form = el("form", "inline-form");
  const cur = el("input");
  const next = el("input");
  for (const [input, ph] of [[cur, "Current PIN (if one is set)"], [next, "New PIN, 4-12 digits"]]) {
    input.type = "password";
    input.inputMode = "numeric";
    input.autocomplete = "off";
    input.placeholder = ph;
    input.setAttribute("aria-label", ph);
  }
  next.pattern = "[0-9]{4,12}";
  next.required = true;
  const save = el("button", null, "Set PIN");
  save.type = "submit";
  const note = el("p", "ok-line");
  note.hidden = true;
  const error = el("p", "error-line");
  error.hidden = true;
  form.append(cur, next, save, note, error);
  box.append(el("p", "meta", "PIN-tier actions and new device grants ask for it."), form);
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    try {
      await api("/v1/auth/pin", { method: "POST", body: { pin: next.value, current: cur.value || null } });
      cur.value = next.value = "";
      showError(error, null);
      note.textContent = "PIN changed.";
      note.hidden = false;
    } catch (err) { note.hidden = true; showError(error, err); }
  });
}

function b64ToBytes(s) {
  const pad = "=".repeat((4 - (s.length % 4)) % 4);
  const raw = atob((s + pad).replace(/-/g, "+").replace(/_/g, "/"));
  return Uint8Array.from(raw, (c) => c.charCodeAt(0));
}

const ID_KEY = "iriis.push_id";

// The browser's PushSubscription (as JSON) registered with the server; its id kept to undo it.
export async function registerSubscription(json) {
  const saved = await api("/v1/push/subscriptions", { method: "POST", body: json });
  try { localStorage.setItem(ID_KEY, String(saved && saved.id)); } catch { /* ignore */ }
  return saved;
}

function pushSection(root) {
  const box = section(root, "Notifications on this device");
  const state = el("p", "meta push-state");
  const on = el("button", null, "Turn on notifications");
  on.type = "button";
  const off = el("button", "ghost", "Turn off");
  off.type = "button";
  const error = el("p", "error-line");
  error.hidden = true;
  box.append(el("p", "meta", "Calls ring here with Answer and Decline, and finished work is announced."), state, on, off, error);
  const refresh = async () => {
    if (!("serviceWorker" in navigator) || !("PushManager" in window)) {
      state.textContent = "This browser cannot receive Web Push.";
      on.hidden = off.hidden = true;
      return;
    }
    const reg = await navigator.serviceWorker.ready;
    const sub = await reg.pushManager.getSubscription();
    state.textContent = sub ? "On for this device." : `Off (permission: ${Notification.permission}).`;
    on.hidden = !!sub;
    off.hidden = !sub;
  };
  on.addEventListener("click", async () => {
    showError(error, null);
    try {
      const { key } = await api("/v1/push/key");
      if ((await Notification.requestPermission()) !== "granted") throw new Error("Notifications are blocked for this site in the browser's settings.");
      const reg = await navigator.serviceWorker.ready;
      const sub = await reg.pushManager.subscribe({ userVisibleOnly: true, applicationServerKey: b64ToBytes(key) });
      const saved = await registerSubscription(sub.toJSON());
      box.dataset.subscription = String(saved && saved.id);
    } catch (err) {
      showError(error, err.status === 404 ? new Error("Push is not set up on this server yet.")
        : new Error("Notifications could not be turned on: " + (err.message || err.name)));
    }
    refresh();
  });
  off.addEventListener("click", async () => {
    const reg = await navigator.serviceWorker.ready;
    const sub = await reg.pushManager.getSubscription();
    let id = null;
    try { id = localStorage.getItem(ID_KEY); } catch { /* ignore */ }
    if (id && id !== "undefined") await api(`/v1/push/subscriptions/${encodeURIComponent(id)}`, { method: "DELETE" }).catch(() => null);
    if (sub) await sub.unsubscribe();
    refresh();
  });
  return refresh;
}

// ---- accounts: the tool servers of mcp.yaml, the owner's mail and calendar first ----
const TITLES = { mail: "Mail", calendar: "Calendar and contacts", builtin: "Built-in tools" };
const FIRST = ["mail", "calendar"];
const RELATIVE = new Intl.RelativeTimeFormat(undefined, { numeric: "auto" });
const STEPS = [[60, "second"], [60, "minute"], [24, "hour"], [7, "day"], [4.35, "week"], [12, "month"], [Infinity, "year"]];

// "5 minutes ago", "yesterday", "now": epoch seconds `ts` from `now`.
export function ago(ts, now = Date.now() / 1000) {
  let amount = Math.min(0, ts - now);
  for (const [size, unit] of STEPS) {
    if (Math.abs(amount) < size) return RELATIVE.format(Math.round(amount), unit);
    amount /= size;
  }
  return RELATIVE.format(Math.round(amount), "year");
}

// A server's state in words: connected, off: why, down: the error, starting.
export function stateWords(s) {
  if (s.state === "on") return s.side === "device" ? "connected (through a device)" : "connected";
  if (s.state === "off") return "off" + (s.reason ? `: ${s.reason}` : "");
  if (s.state === "down") return "down" + (s.reason ? `: ${s.reason}` : "");
  return "starting";
}

function titleOf(name) {
  return TITLES[name] || name.charAt(0).toUpperCase() + name.slice(1);
}

function ordered(servers) {
  const rank = (s) => (FIRST.includes(s.name) ? FIRST.indexOf(s.name) : s.name === "builtin" ? FIRST.length + 2 : FIRST.length);
  return [...servers].sort((a, b) => rank(a) - rank(b));
}

function accountRow(s, onSwitch) {
  const li = el("li", "row account");
  li.dataset.name = s.name;
  li.dataset.state = s.state;
  const main = el("div", "row-main");
  const title = titleOf(s.name);
  const state = el("span", "account-state");
  state.id = `account-state-${s.name}`;
  state.append(el("span", `pill state-${s.state}`, stateWords(s)));
  const facts = [s.state === "on" ? `${s.tools} tool${s.tools === 1 ? "" : "s"}` : null,
    s.name === "builtin" ? null : s.last_ok ? `last used ${ago(s.last_ok)}` : "not used since Iriis started"].filter(Boolean);
  main.append(el("strong", null, title), state, el("span", "meta account-used", facts.join(" · ")));
  // The MCP SDK's "Error executing tool x: " becomes "x: ".
  if (s.last_error) main.append(el("span", "account-error", "Last error: " + s.last_error.replace(/^Error executing tool (\S+): /, "$1: ")));
  li.append(main);
  if (s.name === "builtin") {
    li.append(el("span", "meta", "always on"));
    return li;
  }
  // Checked while the owner wants it on; off for want of a setting, the switch cannot help.
  const label = el("label", "switch");
  const box = el("input");
  box.type = "checkbox";
  box.setAttribute("role", "switch");
  box.setAttribute("aria-label", title);
  box.setAttribute("aria-describedby", state.id);
  box.checked = s.enabled !== false && s.state !== "off";
  box.disabled = s.enabled !== false && s.state === "off";
  const words = el("span", "switch-text", box.checked ? "On" : "Off");
  box.addEventListener("change", () => {
    words.textContent = box.checked ? "On" : "Off";
    onSwitch(s.name, box.checked, box);
  });
  label.append(box, words);
  li.append(label);
  return li;
}

function accountsSection(root) {
  const box = section(root, "Accounts");
  const note = el("p", "meta", "Your mail and calendar, and the other tool servers the assistant can use. "
    + "Switched off, one is stopped and its tools are not offered until you switch it on again.");
  const list = el("ul", "rows accounts");
  const error = el("p", "error-line");
  error.hidden = true;
  box.append(note, list, error);
  let polling = null;
  const draw = (servers) => {
    list.replaceChildren(...ordered(servers).map((s) => accountRow(s, flip)));
    if (!servers.length) list.append(el("li", "empty", "No tool servers."));
  };
  const refresh = async () => {
    const body = await api("/v1/tools");
    draw(body.data);
    // One starting (just switched on) or down (being restarted) is looked at again shortly,
    // while this page is on screen.
    clearTimeout(polling);
    const states = new Set(body.data.map((s) => s.state));
    const every = states.has("starting") ? 1000 : states.has("down") ? 5000 : 0;
    if (every && !root.hidden && !document.hidden) polling = setTimeout(() => refresh().catch(() => null), every);
  };
  async function flip(name, on, input) {
    input.disabled = true;
    showError(error, null);
    try {
      await api(`/v1/tools/${encodeURIComponent(name)}`, { method: "PUT", body: { enabled: on } });
    } catch (err) {
      input.checked = !on;
      showError(error, new Error(`${titleOf(name)} could not be switched ${on ? "on" : "off"}: ${err.message}`));
    }
    await refresh().catch((err) => { input.disabled = false; showError(error, err); });
  }
  return refresh;
}

function serverSection(root) {
  const box = section(root, "What this server runs");
  const body = el("div");
  box.append(body);
  return async () => {
    const providers = await api("/v1/providers").catch(() => null);
    body.replaceChildren();
    const models = ((providers && providers.data) || []).map((p) => p.key + (p.retired ? " (retired)" : ""));
    body.append(el("p", null, "Chat models: " + (models.join(", ") || "none")));
    if (models.length === 1 && models[0] === "offline/offline") {
      body.append(el("p", "meta", "Offline stand-in: arithmetic, dates and times only. Set OPENAI_BASE_URL, OPENAI_API_KEY and IRIIS_CHAT_MODEL (or IRIIS_PROVIDERS) and restart."));
    }
  };
}

export function mount(root) {
  root.replaceChildren(el("h2", null, "Settings"));
  const out = el("button", "ghost", "Sign out");
  out.type = "button";
  out.addEventListener("click", async () => {
    await api("/v1/auth/logout", { method: "POST" }).catch(() => null);
    auth.setToken(null);
    location.hash = "";
    location.reload();
  });
  if (auth.role !== "owner") {
    const refreshPush = pushSection(root);
    root.append(out);
    return { refresh: () => refreshPush().catch(() => null) };
  }
  const parts = [keysSection(root)];
  pinSection(root);
  parts.push(pushSection(root), accountsSection(root), serverSection(root));
  root.append(out);
  return { refresh: () => Promise.all(parts.map((p) => p().catch(() => null))) };
}
