// The owner's view of what went wrong and what was done: the recent-errors ring and the audit
// log of every tool call (tier, whether it was confirmed, what it read that was not theirs).

import { api, el, showError, when } from "./api.js";

function table(headers, rows) {
  const t = el("table", "log");
  const head = el("tr");
  for (const h of headers) head.append(el("th", null, h));
  t.append(head);
  for (const cells of rows) {
    const tr = el("tr");
    for (const c of cells) tr.append(c instanceof Node ? wrapCell(c) : el("td", "wrap", c ?? ""));
    t.append(tr);
  }
  return t;
}

function wrapCell(node) { const td = el("td", "wrap"); td.append(node); return td; }

function trace(e) {
  const d = el("details");
  d.append(el("summary", null, e.error), el("pre", null, e.trace || ""));
  if (e.request && Object.keys(e.request).length) d.append(el("pre", null, JSON.stringify(e.request, null, 1)));
  return d;
}

export function mount(root) {
  root.replaceChildren(el("h2", null, "Errors and audit"));
  const error = el("p", "error-line");
  error.hidden = true;
  const errors = el("div");
  const audit = el("div");
  root.append(error, el("h3", null, "Recent errors"), errors, el("h3", null, "What was done (audit log)"), audit);
  const refresh = async () => {
    try {
      const [errs, log] = await Promise.all([api("/v1/errors?limit=100"), api("/v1/audit?limit=200")]);
      showError(error, null);
      errors.replaceChildren(errs.data.length
        ? table(["when", "where", "error"], errs.data.map((e) => [when(e.ts), `${e.source}${e.path ? " " + e.path : ""}`, trace(e)]))
        : el("p", "empty", "No errors recorded."));
      audit.replaceChildren(log.data.length
        ? table(["when", "tool", "tier", "confirmed", "outcome"], log.data.map((a) => [when(a.ts), a.tool, a.tier,
          a.confirmed == null ? "" : a.confirmed ? "yes" : "no",
          (a.error ? "error: " + a.error : (a.result || "").slice(0, 160)) + (a.tainted ? " (after outside content)" : "")]))
        : el("p", "empty", "No tool calls yet."));
    } catch (err) { showError(error, err); }
  };
  return { refresh };
}
