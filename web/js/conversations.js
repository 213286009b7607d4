// The conversation list: newest first, open one, rename it in place, delete it for good.

import { api, el, setStatus, when } from "./api.js";
import { routes } from "./chat.js";

export class Conversations {
  constructor({ list, onOpen, onDeleted }) {
    this.list = list;
    this.onOpen = onOpen;
    this.onDeleted = onDeleted;
    this.active = null;
  }

  async refresh(activeId) {
    if (activeId !== undefined) this.active = activeId;
    let body;
    try {
      body = await api(routes.list());
    } catch (err) {
      if (err.status !== 401) setStatus(err.message);
      return;
    }
    this.list.replaceChildren();
    const rows = (body && body.data) || [];
    if (!rows.length) this.list.append(el("li", "empty", "No conversations yet."));
    for (const c of rows) this.list.append(this.row(c));
  }

  mark(id) {
    this.active = id;
    for (const li of this.list.querySelectorAll("li[data-id]")) li.classList.toggle("active", li.dataset.id === id);
  }

  row(c) {
    const li = el("li", "conversation");
    li.dataset.id = c.id;
    if (c.id === this.active) li.classList.add("active");
    const open = el("button", "open");
    open.type = "button";
    open.append(el("span", "title", c.title || "Untitled"), el("span", "when", when(c.updated)));
    open.addEventListener("click", () => { this.mark(c.id); this.onOpen(c.id); });
    const rename = el("button", "ghost small rename", "Rename");
    rename.type = "button";
    rename.setAttribute("aria-label", "Rename " + (c.title || "conversation"));
    rename.addEventListener("click", () => this.rename(li, c));
    const del = el("button", "ghost small delete", "Delete");
    del.type = "button";
    del.setAttribute("aria-label", "Delete " + (c.title || "conversation"));
    del.addEventListener("click", () => this.remove(c));
    li.append(open);
    // Renaming and deleting are the owner's; a person's list is read-only.
    if (routes.owner) {
      li.append(el("span", "row-actions"));
      li.lastChild.append(rename, del);
    }
    return li;
  }

  rename(li, c) {
    const form = el("form", "rename-form");
    const input = el("input");
    input.value = c.title || "";
    input.maxLength = 120;
    input.setAttribute("aria-label", "New name");
    const save = el("button", "small", "Save");
    save.type = "submit";
    form.append(input, save);
    li.replaceChildren(form);
    input.focus();
    input.select();
    const done = () => this.refresh();
    input.addEventListener("keydown", (e) => { if (e.key === "Escape") done(); });
    form.addEventListener("submit", async (e) => {
      e.preventDefault();
      const title = input.value.trim();
      if (!title) return done();
      try {
        await api(`/v1/sessions/${encodeURIComponent(c.id)}`, { method: "PATCH", body: { title } });
      } catch (err) {
        setStatus(err.message);
      }
      done();
    });
  }

  async remove(c) {
    if (!confirm(`Delete “${c.title || "this conversation"}” and all its messages for good?`)) return;
    try {
      await api(`/v1/sessions/${encodeURIComponent(c.id)}`, { method: "DELETE" });
    } catch (err) {
      setStatus(err.message);
      return;
    }
    if (c.id === this.active) this.onDeleted(c.id);
    await this.refresh();
  }
}
