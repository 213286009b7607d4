// Iriis service worker: keeps the app shell so the app opens offline (and says the server is
// unreachable instead of showing a browser error), and shows calls and notifications pushed
// through Web Push. The API itself is never cached.

const CACHE = "iriis-shell-v1";
const SHELL = [
  "/", "/manifest.webmanifest", "/static/offline.html", "/static/app.js", "/static/style.css",
  "/static/js/api.js", "/static/js/chat.js", "/static/js/cards.js", "/static/js/markdown.js",
  "/static/js/composer.js", "/static/js/files.js", "/static/js/conversations.js", "/static/js/welcome.js",
  "/static/js/calls.js", "/static/js/settings.js", "/static/js/memory.js", "/static/js/devices.js",
  "/static/js/tasks.js", "/static/js/errors.js", "/static/js/camera.js", "/static/js/handsfree.js",
  "/static/js/voice.js", "/static/js/voice-worklet.js",
  "/static/vendor/purify.es.js", "/static/vendor/marked.esm.js",
  "/icons/icon-192.png", "/icons/icon-512.png", "/icons/badge-96.png",
];

self.addEventListener("install", (event) => {
  event.waitUntil((async () => {
    const cache = await caches.open(CACHE);
    // One missing file must not stop the worker from installing: add them one by one.
    await Promise.all(SHELL.map((url) => cache.add(new Request(url, { cache: "reload" })).catch(() => null)));
    await self.skipWaiting();
  })());
});

self.addEventListener("activate", (event) => {
  event.waitUntil((async () => {
    for (const name of await caches.keys()) if (name !== CACHE) await caches.delete(name);
    await self.clients.claim();
  })());
});

function isShell(url) {
  return url.pathname === "/" || url.pathname === "/pair" || url.pathname.startsWith("/static/") ||
    url.pathname.startsWith("/icons/") || url.pathname === "/manifest.webmanifest";
}

// The network first (so a new version shows at once), the cached copy when it is unreachable.
async function shellFirstNetwork(request) {
  const cache = await caches.open(CACHE);
  try {
    const response = await fetch(request);
    if (response.ok && request.method === "GET") cache.put(request, response.clone()).catch(() => {});
    return response;
  } catch {
    const url = new URL(request.url);
    const key = request.mode === "navigate" ? "/" : url.pathname;
    return (await cache.match(key)) || (await cache.match("/static/offline.html")) ||
      new Response("Server unreachable", { status: 503, headers: { "Content-Type": "text/plain" } });
  }
}

self.addEventListener("fetch", (event) => {
  const request = event.request;
  if (request.method !== "GET") return;
  const url = new URL(request.url);
  if (url.origin !== self.location.origin) return;
  if (request.mode === "navigate" || isShell(url)) {
    if (request.headers.has("range")) return;
    event.respondWith(shellFirstNetwork(request));
  }
  // Everything else (the API, files, streams) goes to the network untouched.
});

// ---- Web Push: calls ring with Answer and Decline; other notices are plain ----
// The payload: {title, body, url, tag, data: {kind, call_id, reason, opening, ...}}.
self.addEventListener("push", (event) => {
  let msg = {};
  try { msg = event.data ? event.data.json() : {}; } catch { msg = { title: "Iriis", body: event.data && event.data.text() }; }
  const data = msg.data || {};
  event.waitUntil((async () => {
    const windows = await self.clients.matchAll({ type: "window", includeUncontrolled: true });
    if (data.kind === "call") {
      const call = { id: data.call_id, reason: data.reason || msg.body || "", opening: data.opening || null };
      // Open pages ring in-page as well.
      for (const client of windows) client.postMessage({ type: "call", call });
      await self.registration.showNotification(msg.title || "Iriis is calling", {
        body: call.reason, tag: `call-${call.id}`, renotify: true, requireInteraction: true,
        icon: "/icons/icon-192.png", badge: "/icons/badge-96.png", vibrate: [400, 200, 400, 200, 400],
        data: { kind: "call", call_id: call.id, url: msg.url || `/?call=${call.id}` },
        actions: [{ action: "answer", title: "Answer" }, { action: "decline", title: "Decline" }],
      });
      return;
    }
    if (data.kind === "call_ended") {
      for (const n of await self.registration.getNotifications({ tag: `call-${data.call_id}` })) n.close();
      for (const client of windows) client.postMessage({ type: "call-ended", call_id: data.call_id });
      return;
    }
    await self.registration.showNotification(msg.title || "Iriis", {
      body: msg.body || "", tag: msg.tag || undefined, icon: "/icons/icon-192.png", badge: "/icons/badge-96.png",
      data: { ...data, url: msg.url || "/" },
    });
  })());
});

self.addEventListener("notificationclick", (event) => {
  const data = event.notification.data || {};
  event.notification.close();
  event.waitUntil((async () => {
    if (data.kind === "call" && event.action === "decline") {
      await fetch(`/v1/calls/${data.call_id}/decline`, { method: "POST", credentials: "same-origin" }).catch(() => null);
      return;
    }
    const windows = await self.clients.matchAll({ type: "window", includeUncontrolled: true });
    if (windows.length) {
      const client = windows[0];
      await client.focus();
      // The page answers (and opens the voice session); one answer, from one place.
      if (data.kind === "call") client.postMessage({ type: "call-answer", call_id: data.call_id });
      return;
    }
    // No page open: the call link opens one, which answers it (or calls back).
    await self.clients.openWindow(data.kind === "call" ? `/?call=${data.call_id}` : (data.url || "/"));
  })());
});
