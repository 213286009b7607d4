// The pieces a chat reply is made of besides its text: tool lines, confirmation cards (with why
// a yes is needed) and link previews.

import { LOST, api, el, errorMessage, request } from "./api.js";

const TOOL_MARK = { done: "✓", error: "✗", declined: "⊘", start: "…" };

// One line per tool call: "using x…" while it runs, then its outcome (kept in history too).
export function toolLine(name, status) {
  const line = el("div", "tool");
  setToolLine(line, name, status);
  return line;
}

export function setToolLine(line, name, status) {
  line.dataset.status = status;
  line.classList.toggle("failed", status === "error");
  if (status === "done") line.textContent = "✓ " + name;
  else if (status === "error") line.textContent = "✗ " + name;
  else if (status === "declined") line.textContent = "⊘ " + name + " (declined)";
  else if (status === "start") line.textContent = "using " + name + "…";
  else line.textContent = (TOOL_MARK[status] || "•") + " " + name;
}

function why(data) {
  if (data.reason && data.sources && data.sources.length) {
    const r = String(data.reason);
    return r.charAt(0).toUpperCase() + r.slice(1) + ".";
  }
  if (data.needs_pin) return `${data.tool || "This action"} is PIN-protected: it runs only with your PIN.`;
  return `${data.tool || "This action"} acts in your name, so it waits for your yes.`;
}

// A confirm-tier action waits for the owner's answer: Allow / Decline, with the PIN if needed.
export function confirmCard(data, url = "/v1/confirmations/") {
  const card = el("div", "confirm");
  card.dataset.id = String(data.id || "");
  card.append(el("p", "question", data.question || "Allow this action?"));
  card.append(el("p", "confirm-reason", why(data)));
  if (data.sources && data.sources.length) {
    card.append(el("p", "confirm-sources", "This turn read: " + data.sources.join(", ")));
  }
  if (data.arguments && Object.keys(data.arguments).length) {
    const details = el("details", "confirm-args");
    details.append(el("summary", null, "Details"), el("pre", null, JSON.stringify(data.arguments, null, 2)));
    card.append(details);
  }
  let pin = null;
  if (data.needs_pin) {
    pin = el("input", "pin");
    pin.type = "password";
    pin.inputMode = "numeric";
    pin.autocomplete = "off";
    pin.placeholder = "PIN";
    pin.setAttribute("aria-label", "PIN");
  }
  const yes = el("button", "approve", "Allow");
  const no = el("button", "decline ghost", "Decline");
  yes.type = no.type = "button";
  const note = el("p", "confirm-note");
  note.setAttribute("role", "status");
  const answer = async (approve) => {
    yes.disabled = no.disabled = true;
    const body = { approve };
    if (approve && pin) body.pin = pin.value;
    try {
      const res = await request(url + encodeURIComponent(card.dataset.id), {
        method: "POST",
        headers: { "Content-Type": "application/json" },
        body: JSON.stringify(body),
      });
      if (res.ok) {
        card.dataset.answer = approve ? "approved" : "declined";
        note.textContent = approve ? "Allowed." : "Declined.";
        if (pin) pin.disabled = true;
      } else {
        note.textContent = await errorMessage(res);
        yes.disabled = no.disabled = false;
      }
    } catch {
      note.textContent = LOST;
      yes.disabled = no.disabled = false;
    }
  };
  yes.addEventListener("click", () => answer(true));
  no.addEventListener("click", () => answer(false));
  const row = el("div", "confirm-actions");
  if (pin) row.append(pin);
  row.append(yes, no);
  card.append(row, note);
  if (data.expires_in) {
    card.append(el("p", "confirm-expiry", `Waits ${Math.round(data.expires_in / 60) || 1} min for an answer, then counts as no.`));
  }
  return card;
}

// A card for the first outside link in a reply, fetched by the server through its SSRF guard.
const previews = new Map();
export function linkPreview(box) {
  const link = [...box.querySelectorAll("a[href^='http']")][0];
  if (!link) return;
  const url = link.href;
  if (!previews.has(url)) previews.set(url, api("/v1/preview?url=" + encodeURIComponent(url)).catch(() => null));
  previews.get(url).then((p) => {
    if (!p || !(p.title || p.description)) return;
    const card = el("a", "preview");
    card.href = p.final_url || url;
    card.target = "_blank";
    card.rel = "noopener noreferrer";
    card.append(el("span", "preview-site", p.site_name || new URL(card.href).hostname));
    if (p.title) card.append(el("strong", "preview-title", p.title));
    if (p.description) card.append(el("span", "preview-desc", String(p.description).slice(0, 240)));
    box.append(card);
  });
}
