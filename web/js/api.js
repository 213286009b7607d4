// Talking to the server: fetch with the page's credentials, plain error messages, the SSE
// reader for chat turns, and the small DOM helper every page uses.

export const LOST = "Server unreachable — check that iriis serve is running, then try again";

// A person who is not the owner signs in with email and password and gets a session token,
// kept for this tab only; the owner uses the HTTP-only cookie set from the key.
const TOKEN_KEY = "iriis.person_token";
export const auth = {
  token() { try { return sessionStorage.getItem(TOKEN_KEY); } catch { return null; } },
  setToken(t) { try { if (t) sessionStorage.setItem(TOKEN_KEY, t); else sessionStorage.removeItem(TOKEN_KEY); } catch { /* ignore */ } },
  role: "owner",
  person: null,
};

export function request(url, opts = {}) {
  const headers = new Headers(opts.headers || {});
  const token = auth.token();
  if (token && !headers.has("Authorization")) headers.set("Authorization", "Bearer " + token);
  return fetch(url, { credentials: "same-origin", ...opts, headers });
}

export async function errorMessage(res) {
  try {
    const body = await res.json();
    if (body && body.error && body.error.message) return String(body.error.message);
  } catch { /* not JSON */ }
  if (res.status === 413) return "That is too large for this server.";
  return `Request failed (${res.status})`;
}

export class ApiFailure extends Error {
  constructor(message, status) { super(message); this.status = status; }
}

// JSON in, JSON out; throws ApiFailure with the server's own message (status 0: unreachable).
export async function api(url, { method = "GET", body, headers } = {}) {
  let res;
  try {
    res = await request(url, {
      method,
      headers: body === undefined ? headers : { "Content-Type": "application/json", ...(headers || {}) },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
  } catch {
    throw new ApiFailure(LOST, 0);
  }
  if (!res.ok) throw new ApiFailure(await errorMessage(res), res.status);
  if (res.status === 204) return null;
  return res.json().catch(() => null);
}

export function el(tag, cls, text) {
  const node = document.createElement(tag);
  if (cls) node.className = cls;
  if (text != null) node.textContent = String(text);
  return node;
}

export function button(label, cls, onClick) {
  const b = el("button", cls, label);
  b.type = "button";
  if (onClick) b.addEventListener("click", onClick);
  return b;
}

export function when(ts) {
  if (!ts) return "never";
  const d = new Date(ts * 1000);
  const today = new Date();
  const sameDay = d.toDateString() === today.toDateString();
  return sameDay ? d.toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" })
    : d.toLocaleDateString([], { month: "short", day: "numeric" }) + " " +
      d.toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" });
}

export function bytes(n) {
  if (n == null) return "";
  if (n < 1024) return n + " B";
  if (n < 1024 * 1024) return (n / 1024).toFixed(1) + " KB";
  return (n / 1024 / 1024).toFixed(1) + " MB";
}

// ---- server-sent events over fetch (so the cookie and a POST body can be used) ----
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

// Seconds a 503 asks us to wait (Retry-After: seconds or an HTTP date); null when it says none.
export function retryAfter(res) {
  const raw = res.headers.get("Retry-After");
  if (!raw) return null;
  const seconds = /^\d+$/.test(raw.trim()) ? Number(raw) : (Date.parse(raw) - Date.now()) / 1000;
  return Number.isFinite(seconds) ? Math.min(300, Math.max(1, Math.ceil(seconds))) : null;
}

// Wait `seconds`, calling onTick(left) each second; rejects with an AbortError on `signal`.
export function countdown(seconds, signal, onTick) {
  return new Promise((resolve, reject) => {
    let left = seconds;
    let timer = null;
    const aborted = () => { clearInterval(timer); reject(new DOMException("stopped", "AbortError")); };
    if (signal && signal.aborted) { aborted(); return; }
    onTick(left);
    timer = setInterval(() => {
      left -= 1;
      if (left > 0) { onTick(left); return; }
      clearInterval(timer);
      if (signal) signal.removeEventListener("abort", aborted);
      resolve();
    }, 1000);
    if (signal) signal.addEventListener("abort", aborted, { once: true });
  });
}

export async function readStream(res, onEvent) {
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

// A small status line under the header, shared by every page.
export function setStatus(text) {
  const node = document.getElementById("status");
  node.textContent = text || "";
  node.hidden = !text;
}

// A page's own error line.
export function showError(node, err) {
  node.textContent = err ? (err.message || String(err)) : "";
  node.hidden = !err;
}
