// Tasks: background work and reminders the scheduler runs, with their status and reports;
// a new one, and cancelling one.

import { api, el, setStatus, showError, when } from "./api.js";
import { renderMarkdown } from "./markdown.js";

function taskRow(t, refresh) {
  const li = el("li", "row task");
  li.dataset.status = t.status;
  const main = el("div", "row-main");
  const head = el("div");
  head.append(el("strong", null, t.title), " ", el("span", "pill", t.status));
  main.append(head, el("span", "meta", [t.kind, t.repeat ? "repeats " + t.repeat : null,
    t.next_run ? "next " + when(t.next_run) : null, `${t.runs} runs`, "updated " + when(t.updated)].filter(Boolean).join(" · ")));
  if (t.result || t.error || t.notes) {
    const details = el("details");
    details.append(el("summary", null, t.error ? "Error" : "Report"));
    if (t.error) details.append(el("p", "error-line", t.error));
    if (t.result) details.append(renderMarkdown(t.result));
    if (t.notes) details.append(el("p", "meta", t.notes));
    main.append(details);
  }
  li.append(main);
  if (!["done", "failed", "cancelled"].includes(t.status)) {
    const cancel = el("button", "ghost small", "Cancel");
    cancel.type = "button";
    cancel.addEventListener("click", async () => {
      await api(`/v1/tasks/${t.id}`, { method: "DELETE" }).catch((err) => setStatus(err.message));
      refresh();
    });
    li.append(cancel);
  }
  return li;
}

export function mount(root) {
  root.replaceChildren(el("h2", null, "Tasks"));
  const form = el("form", "card inline-form");
  const title = el("input");
  title.placeholder = "Title";
  title.required = true;
  title.maxLength = 200;
  title.setAttribute("aria-label", "Title");
  const goal = el("input");
  goal.placeholder = "What should be done";
  goal.required = true;
  goal.maxLength = 8000;
  goal.setAttribute("aria-label", "Goal");
  const add = el("button", null, "Add task");
  add.type = "submit";
  const error = el("p", "error-line");
  error.hidden = true;
  form.append(title, goal, add, error);
  const sched = el("p", "meta");
  const list = el("ul", "rows");
  const refresh = async () => {
    try {
      const [body, status] = await Promise.all([api("/v1/tasks"), api("/v1/scheduler").catch(() => null)]);
      showError(error, null);
      list.replaceChildren();
      for (const t of (body && body.data) || []) list.append(taskRow(t, refresh));
      if (!(body && body.data && body.data.length)) list.append(el("li", "empty", "No tasks yet. Ask in the chat: “remind me at 5 to call the dentist”."));
      sched.textContent = status ? `Scheduler: ${status.running === false ? "stopped" : "running"}` : "";
    } catch (err) { showError(error, err); }
  };
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    try {
      await api("/v1/tasks", { method: "POST", body: { title: title.value.trim(), goal: goal.value.trim() } });
      title.value = goal.value = "";
    } catch (err) { showError(error, err); return; }
    refresh();
  });
  root.append(form, sched, list);
  return { refresh };
}
