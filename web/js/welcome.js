// What an empty conversation shows: what this server can do right now (a model or the offline
// stand-in, which tool servers are on) and three example prompts that work on it.

import { api, el } from "./api.js";

const OFFLINE = ["What is 15% of 80?", "What is the date today?", "What is 12*(3+4)?"];

function examples(model, servers) {
  if (!model) return OFFLINE;
  const on = new Set(servers.filter((s) => s.state === "on").map((s) => s.name));
  const out = ["What is 15% of 80, and what day is it today?"];
  if (on.has("studio")) out.push("Make a bar chart of rainfall: Jan 40, Feb 32, Mar 55");
  if (on.has("tasks")) out.push("Remind me in 10 minutes to stretch");
  if (on.has("memory")) out.push("Remember that my dentist is Dr. Rivera");
  out.push("Explain what you can do for me, in three bullet points");
  out.push("Write a short poem about rain");
  return out.slice(0, 3);
}

export async function drawWelcome(box, onPrompt) {
  box.replaceChildren(el("h2", null, "What this server can do now"));
  const [providers, tools] = await Promise.all([
    api("/v1/providers").catch(() => null),
    api("/v1/tools").catch(() => null),
  ]);
  const models = ((providers && providers.data) || []).map((p) => p.key).filter((k) => k && k !== "offline/offline");
  const servers = (tools && tools.data) || [];
  const facts = el("ul", "facts");
  facts.append(el("li", "model", models.length
    ? "Chat model: " + models.join(", ")
    : "Offline: no model key is set, so a built-in stand-in answers arithmetic, dates and times. Set OPENAI_BASE_URL, OPENAI_API_KEY and IRIIS_CHAT_MODEL and restart for a real model."));
  const on = servers.filter((s) => s.state === "on").map((s) => s.name);
  const off = servers.filter((s) => s.state !== "on").map((s) => s.name);
  if (servers.length) {
    facts.append(el("li", "tools", "Tools on: " + (on.join(", ") || "none") + (off.length ? ` · off: ${off.join(", ")}` : "")));
  }
  box.append(facts, el("h3", null, "Try"));
  const list = el("div", "examples");
  for (const text of examples(models.length > 0, servers)) {
    const b = el("button", "example", text);
    b.type = "button";
    b.addEventListener("click", () => onPrompt(text));
    list.append(b);
  }
  box.append(list);
}
