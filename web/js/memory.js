// Memory: what the agent remembers, searched with the same score the prompt uses
// (GET /v1/memory/search), read by kind, deleted; the persona (and mood), goals and playbook;
// and the log of what memory did.

import { api, el, setStatus, showError, when } from "./api.js";

const KINDS = ["fact", "person", "insight", "pattern", "lesson", "playbook", "skill", "open_loop", "goal"];

function itemRow(item, onDelete) {
  const li = el("li", "row memory-item");
  li.dataset.id = String(item.id);
  const main = el("div", "row-main");
  main.append(el("span", "text", item.text));
  const bits = [item.kind, `importance ${Number(item.importance ?? 0).toFixed(2)}`];
  if (item.last_used) bits.push("used " + when(item.last_used));
  if (item.from_outside) bits.push("learned from outside content");
  main.append(el("span", "meta", bits.join(" · ")));
  li.append(main);
  if (item.score != null) {
    const score = el("span", "score", item.score.toFixed(3));
    if (item.why) score.title = Object.entries(item.why).map(([k, v]) => `${k}: ${Number(v).toFixed(3)}`).join("\n");
    li.append(score);
  }
  const del = el("button", "ghost small", "Delete");
  del.type = "button";
  del.setAttribute("aria-label", "Delete memory " + item.id);
  del.addEventListener("click", async () => {
    if (!confirm("Forget this for good?")) return;
    try { await api(`/v1/memory/${item.id}`, { method: "DELETE" }); li.remove(); onDelete?.(); } catch (err) { setStatus(err.message); }
  });
  li.append(del);
  return li;
}

function persona(box, record) {
  box.replaceChildren();
  if (!record) { box.append(el("p", "empty", "No persona yet: it is written once memory knows a few things about you.")); return; }
  for (const [key, value] of Object.entries(record)) {
    if (value == null || value === "") continue;
    const text = typeof value === "object" ? JSON.stringify(value, null, 1) : String(value);
    const row = el("div", "persona-field");
    row.append(el("h3", null, key.replace(/_/g, " ")), el("p", null, key.match(/(^|_)(at|updated|created)$/) && typeof value === "number" ? when(value) : text));
    box.append(row);
  }
}

export function mount(root) {
  root.replaceChildren(el("h2", null, "Memory"));
  const tabs = el("div", "tabs");
  const panes = {};
  const error = el("p", "error-line");
  error.hidden = true;
  const show = async (name) => {
    for (const b of tabs.children) b.setAttribute("aria-pressed", String(b.dataset.tab === name));
    for (const [k, p] of Object.entries(panes)) p.hidden = k !== name;
    showError(error, null);
    try { await loaders[name](); } catch (err) { showError(error, err); }
  };
  for (const [name, label] of [["items", "What it remembers"], ["persona", "Persona and mood"], ["goals", "Goals and playbook"], ["events", "Events"]]) {
    const b = el("button", "small", label);
    b.type = "button";
    b.dataset.tab = name;
    b.addEventListener("click", () => show(name));
    tabs.append(b);
    panes[name] = el("div", "pane");
  }

  // Items: search (ranked as the prompt ranks) or browse by kind.
  const search = el("form", "inline-form card");
  const q = el("input");
  q.type = "search";
  q.id = "memory-q";
  q.placeholder = "Search, e.g. who is my dentist?";
  q.setAttribute("aria-label", "Search memory");
  const kind = el("select");
  kind.setAttribute("aria-label", "Kind");
  for (const k of ["", ...KINDS]) { const o = el("option", null, k || "any kind"); o.value = k; kind.append(o); }
  const go = el("button", null, "Search");
  go.type = "submit";
  search.append(q, kind, go);
  const add = el("form", "inline-form card");
  const text = el("input");
  text.placeholder = "Tell it something to remember";
  text.maxLength = 2000;
  text.setAttribute("aria-label", "Something to remember");
  const save = el("button", "ghost", "Remember");
  save.type = "submit";
  add.append(text, save);
  const results = el("ul", "rows memory-results");
  const caption = el("p", "meta");
  panes.items.append(search, caption, results, add);
  const loadItems = async () => {
    const query = q.value.trim();
    const params = new URLSearchParams();
    if (kind.value) params.set("kind", kind.value);
    let body;
    if (query) {
      params.set("q", query);
      body = await api("/v1/memory/search?" + params);
      caption.textContent = `Best first, by the score the prompt uses (${body.count} found).`;
    } else {
      params.set("active", "true");
      body = await api("/v1/memory?" + params);
      caption.textContent = `${body.count} items.`;
    }
    results.replaceChildren();
    for (const item of body.data || []) results.append(itemRow(item));
    if (!(body.data || []).length) results.append(el("li", "empty", query ? "Nothing matches." : "Nothing remembered yet."));
  };
  search.addEventListener("submit", (e) => { e.preventDefault(); loadItems().catch((err) => showError(error, err)); });
  add.addEventListener("submit", async (e) => {
    e.preventDefault();
    if (!text.value.trim()) return;
    try {
      await api("/v1/memory", { method: "POST", body: { kind: "fact", text: text.value.trim() } });
      text.value = "";
      await loadItems();
    } catch (err) { showError(error, err); }
  });

  const loadPersona = async () => {
    let record = null;
    try { record = await api("/v1/memory/persona"); } catch (err) { if (err.status !== 404) throw err; }
    persona(panes.persona, record);
  };

  const loadGoals = async () => {
    panes.goals.replaceChildren();
    for (const [k, title] of [["goal", "Goals"], ["playbook", "Playbook rules"], ["open_loop", "Open loops"]]) {
      const body = await api(`/v1/memory?kind=${k}&active=true`);
      const ul = el("ul", "rows");
      for (const item of body.data || []) ul.append(itemRow(item));
      if (!(body.data || []).length) ul.append(el("li", "empty", "None yet."));
      panes.goals.append(el("h3", null, title), ul);
    }
  };

  const loadEvents = async () => {
    const body = await api("/v1/memory/events?limit=200");
    const table = el("table", "log");
    const head = el("tr");
    for (const h of ["when", "event", "item", "detail"]) head.append(el("th", null, h));
    table.append(head);
    for (const ev of body.data || []) {
      const tr = el("tr");
      const detail = ev.detail ?? ev.text ?? ev.data ?? "";
      tr.append(el("td", null, when(ev.at ?? ev.created ?? ev.ts)), el("td", null, ev.event ?? ev.kind ?? ""),
        el("td", null, ev.item_id ?? ""), el("td", "wrap", typeof detail === "object" ? JSON.stringify(detail) : detail));
      table.append(tr);
    }
    panes.events.replaceChildren(table);
    if (!(body.data || []).length) panes.events.append(el("p", "empty", "Nothing yet."));
  };

  const loaders = { items: loadItems, persona: loadPersona, goals: loadGoals, events: loadEvents };
  root.append(tabs, error, ...Object.values(panes));
  let first = true;
  return {
    refresh: () => {
      if (first) { first = false; return show("items"); }
      const open = [...tabs.children].find((b) => b.getAttribute("aria-pressed") === "true");
      return show(open ? open.dataset.tab : "items");
    },
  };
}
