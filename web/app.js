// The app's entry: sign-in (owner key by form, by the #key= link, or a person's email and
// password), the page router (#/chat, #/memory, ...), the service worker, and the ringing
// screen for calls. Every page lives in its own module under js/.

import { LOST, api, auth, request, setStatus } from "./js/api.js";
import { Chat, current, routes } from "./js/chat.js";
import { Composer, voiceAvailable } from "./js/composer.js";
import { Conversations } from "./js/conversations.js";
import { drawWelcome } from "./js/welcome.js";
import { Ringing } from "./js/calls.js";

const $ = (id) => document.getElementById(id);
const PAGES = {
  camera: () => import("./js/camera.js"),
  memory: () => import("./js/memory.js"),
  devices: () => import("./js/devices.js"),
  tasks: () => import("./js/tasks.js"),
  calls: () => import("./js/calls.js"),
  errors: () => import("./js/errors.js"),
  settings: () => import("./js/settings.js"),
};
const mounted = new Map();
const ringing = new Ringing($("ringing"), async (answer) => {
  location.hash = "#/chat";
  if (answer.conversation_id) await chat.load(answer.conversation_id);
  if (answer.opening) setStatus("Call: " + answer.opening);
  else if (answer.turn) await chat.send(answer.turn);
  conversations.refresh(current.get());
});

const welcome = $("welcome");
const chat = new Chat({
  transcript: $("transcript"),
  onBusy: (busy) => composer.setBusy(busy),
  onSession: (id, done) => { conversations.mark(id); if (done) conversations.refresh(id); },
  onSignedOut: () => showSignIn(true),
  onEmpty: (empty) => {
    welcome.hidden = !empty;
    $("transcript").hidden = empty && !$("transcript").children.length;
    if (empty && welcome.dataset.drawn !== "1") {
      welcome.dataset.drawn = "1";
      drawWelcome(welcome, (text) => { $("message").value = text; composer.submit(); });
    }
  },
});
const composer = new Composer({
  form: $("chat-form"), input: $("message"), send: $("send"), stop: $("stop"), attach: $("attach"),
  fileInput: $("file-input"), counter: $("counter"), tray: $("tray"), talk: $("talk"),
  dropZone: $("drop-zone"), onSend: (text) => chat.send(text), onStop: () => chat.stop(),
});
const conversations = new Conversations({
  list: $("conversations"),
  onOpen: (id) => { closeMenu(); location.hash = "#/chat"; chat.load(id); },
  onDeleted: () => newChat(),
});

// A voice session in the chat page: its conversation becomes the one on screen.
let voiceSession = null;
window.addEventListener("iriis:voice", ({ detail }) => {
  if (detail.type === "ready") voiceSession = detail.session_id;
  if (detail.type === "done" && voiceSession) { current.set(voiceSession); conversations.refresh(voiceSession); }
  if (detail.type === "closed" && voiceSession) { current.set(voiceSession); chat.load(voiceSession); voiceSession = null; }
});

function newChat() {
  current.clear();
  chat.clear();
  conversations.mark(null);
  setStatus("");
  closeMenu();
  if (location.hash && !location.hash.startsWith("#/chat")) location.hash = "#/chat";
  $("message").focus();
}
$("new-chat").addEventListener("click", newChat);
$("sidebar-new").addEventListener("click", newChat);

function closeMenu() { document.body.classList.remove("menu-open"); $("menu").setAttribute("aria-expanded", "false"); }
$("menu").addEventListener("click", () => {
  const open = document.body.classList.toggle("menu-open");
  $("menu").setAttribute("aria-expanded", String(open));
});

// ---- signing in ----
function showSignIn(show) {
  $("auth").hidden = !show;
  $("app").hidden = show;
  $("nav").hidden = show;
  $("new-chat").hidden = show;
  $("menu").hidden = show;
  for (const id of ["transcript", "chat-form"]) $(id).hidden = show;
  if (show) $("key-input").focus();
}

async function signIn(key) {
  $("auth-error").textContent = "";
  let res;
  try {
    res = await request("/v1/auth/cookie", { method: "POST", headers: { Authorization: "Bearer " + key } });
  } catch {
    setStatus(LOST);
    return false;
  }
  setStatus("");
  if (res.ok) { auth.setToken(null); auth.role = "owner"; return true; }
  $("auth-error").textContent = res.status === 401 ? "That key was not accepted." : `Sign-in failed (${res.status})`;
  return false;
}

async function signedIn() {
  showSignIn(false);
  // Pages only the owner may use are hidden from other people.
  for (const a of document.querySelectorAll("#nav a[data-owner]")) a.hidden = auth.role !== "owner";
  document.body.dataset.role = auth.role;
  const owner = auth.role === "owner";
  routes.owner = owner;
  $("attach").hidden = !owner;
  $("sidebar").hidden = false;
  $("chat-form").hidden = false;
  await Promise.all([chat.load(current.get()), conversations.refresh(current.get())]);
  voiceAvailable().then((yes) => { $("talk").hidden = !yes; });
  if (owner) {
    ringing.start();
    // A call link (<app>/?call=ID, from a notification): answer it, or call back if it stopped.
    const callId = new URLSearchParams(location.search).get("call");
    if (callId) {
      history.replaceState(null, "", location.pathname + location.hash);
      ringing.answered(Number(callId));
    }
  }
  route();
}

$("key-form").addEventListener("submit", async (event) => {
  event.preventDefault();
  const key = $("key-input").value.trim();
  if (!key) return;
  if (await signIn(key)) {
    $("key-input").value = "";
    await signedIn();
  }
});

$("login-form").addEventListener("submit", async (event) => {
  event.preventDefault();
  $("login-error").textContent = "";
  try {
    const body = await api("/v1/auth/login", {
      method: "POST", body: { email: $("login-email").value.trim(), password: $("login-password").value },
    });
    auth.setToken(body.token);
    auth.role = body.person.role || "member";
    auth.person = body.person;
    $("login-password").value = "";
    await signedIn();
  } catch (err) {
    $("login-error").textContent = err.message;
  }
});

// The #key= link (also when opened in a tab that is already open: hashchange).
async function keyFromHash() {
  const match = /^#key=(.*)$/.exec(location.hash);
  if (!match) return false;
  history.replaceState(null, "", location.pathname + location.search);
  let key = match[1];
  try { key = decodeURIComponent(key); } catch { /* use raw */ }
  if (key && (await signIn(key))) await signedIn();
  else showSignIn(true);
  return true;
}

// ---- pages ----
async function route() {
  if (!$("auth").hidden) return;
  let name = (/^#\/(\w+)/.exec(location.hash) || [])[1] || "chat";
  if (!(name in PAGES) && name !== "chat") name = "chat";
  if (auth.role !== "owner" && ["memory", "tasks", "calls", "errors"].includes(name)) name = "chat";
  for (const section of document.querySelectorAll(".page")) section.hidden = section.dataset.page !== name;
  for (const a of document.querySelectorAll("#nav a")) a.classList.toggle("active", a.dataset.page === name);
  $("new-chat").hidden = name !== "chat";
  $("menu").hidden = name !== "chat";
  document.body.dataset.page = name;
  if (name === "chat") return;
  const section = $("page-" + name);
  try {
    const mod = await PAGES[name]();
    if (!mounted.has(name)) mounted.set(name, mod.mount(section, { ringing, route }));
    await mounted.get(name).refresh?.();
  } catch (err) {
    section.textContent = "This page could not load: " + err.message;
  }
}

window.addEventListener("hashchange", async () => {
  if (await keyFromHash()) return;
  route();
});
window.addEventListener("offline", () => setStatus("You are offline"));
window.addEventListener("online", () => setStatus(""));

// ---- installable: the service worker caches the app shell ----
if ("serviceWorker" in navigator) {
  navigator.serviceWorker.register("/sw.js", { scope: "/" }).catch(() => { /* not over http(s) */ });
  navigator.serviceWorker.addEventListener("message", (event) => {
    const msg = event.data || {};
    if (msg.type === "call") ringing.ring(msg.call || {});
    if (msg.type === "call-answer") ringing.answered(msg.call_id);
    if (msg.type === "call-ended" && ringing.call && ringing.call.id === msg.call_id) ringing.stopRinging();
  });
}

// ---- start ----
async function start() {
  if (await keyFromHash()) return;
  let res;
  try {
    res = await request("/v1/auth/check");
  } catch {
    setStatus("Server unreachable — Iriis could not reach its server. Check that iriis serve is running.");
    document.body.dataset.offline = "true";
    return showSignIn(true);
  }
  if (res.ok) return signedIn();
  if (auth.token()) {
    try {
      const me = await api("/v1/me");
      auth.role = me.role || "member";
      auth.person = me;
      return signedIn();
    } catch { auth.setToken(null); }
  }
  if (res.status !== 401) setStatus(`The server answered ${res.status}`);
  showSignIn(true);
}

start();
