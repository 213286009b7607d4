// Devices: pair a new one (kind, name, skills, the PIN: a code and its QR come back), and the
// list with last seen, skills switched on (needs the PIN) and off (never does), and revoke.

import { api, el, setStatus, showError, when } from "./api.js";

const KINDS = [["mac", "Mac"], ["windows", "Windows PC"], ["linux", "Linux PC"], ["android", "Android phone"], ["ios", "iPhone"]];
const SKILLS = {
  desktop: ["files", "clipboard", "shell"],
  phone: ["calls", "contacts", "messages", "reminders", "notifications", "location"],
};
const skillsFor = (kind) => (kind === "android" || kind === "ios" ? SKILLS.phone : SKILLS.desktop);

function pairForm(onPaired) {
  const form = el("form", "card pair-form");
  form.append(el("h3", null, "Pair a device"));
  const row = el("div", "inline-form");
  const kind = el("select");
  kind.id = "pair-kind";
  kind.setAttribute("aria-label", "Kind of device");
  for (const [v, t] of KINDS) { const o = el("option", null, t); o.value = v; kind.append(o); }
  const label = el("input");
  label.id = "pair-label";
  label.placeholder = "Its name, e.g. Office Mac";
  label.required = true;
  label.maxLength = 100;
  label.setAttribute("aria-label", "Device name");
  row.append(kind, label);
  const skills = el("fieldset", "skills");
  skills.append(el("legend", null, "Skills it may use"));
  const drawSkills = () => {
    for (const node of [...skills.querySelectorAll("label")]) node.remove();
    for (const s of skillsFor(kind.value)) {
      const lab = el("label");
      const box = el("input");
      box.type = "checkbox";
      box.value = s;
      box.name = "skill";
      box.checked = s !== "shell";
      lab.append(box, s);
      skills.append(lab);
    }
  };
  kind.addEventListener("change", drawSkills);
  drawSkills();
  const pinRow = el("div", "inline-form");
  const pin = el("input");
  pin.id = "pair-pin";
  pin.type = "password";
  pin.inputMode = "numeric";
  pin.placeholder = "Your action PIN";
  pin.autocomplete = "off";
  pin.setAttribute("aria-label", "Your PIN");
  const go = el("button", null, "Get a pairing code");
  go.type = "submit";
  pinRow.append(pin, go);
  const error = el("p", "error-line");
  error.hidden = true;
  const result = el("div", "pair-result");
  result.hidden = true;
  form.append(row, skills, pinRow, error, result);
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    showError(error, null);
    const chosen = [...skills.querySelectorAll("input:checked")].map((b) => b.value);
    try {
      const code = await api("/v1/me/devices/codes", {
        method: "POST", body: { kind: kind.value, label: label.value.trim(), skills: chosen, pin: pin.value || null },
      });
      pin.value = "";
      result.replaceChildren();
      const qr = el("img", "qr");
      qr.alt = "QR code of the pairing link";
      qr.src = "data:image/png;base64," + code.qr_png;
      const text = el("div");
      text.append(el("p", "meta", "Enter this code on the device (once, within 10 minutes):"),
        el("p", "pair-code", code.code), el("p", "meta", "or scan the QR code, or open " + code.link));
      if (kind.value === "mac" || kind.value === "windows" || kind.value === "linux") {
        text.append(el("p", "meta", "On a computer: "), el("code", "secret",
          `iriis-device pair ${code.code} --server ${location.origin}`));
      }
      result.append(qr, text);
      result.hidden = false;
      onPaired();
    } catch (err) {
      showError(error, err);
    }
  });
  return form;
}

function deviceRow(d, refresh) {
  const li = el("li", "row device");
  li.dataset.id = String(d.id);
  const main = el("div", "row-main");
  const status = d.online ? "online" : "last seen " + when(d.last_seen);
  main.append(el("strong", null, d.label), el("span", "meta", `${d.kind} · ${status}`));
  const skills = el("div", "skills");
  const all = [...new Set([...(d.skills || []), ...(d.off || []), ...(d.reported || []), ...skillsFor(d.kind)])].sort();
  for (const s of all) {
    const lab = el("label");
    const box = el("input");
    box.type = "checkbox";
    box.checked = (d.skills || []).includes(s);
    box.dataset.skill = s;
    box.addEventListener("change", async () => {
      const on = box.checked;
      // Switching a skill on is a new grant: it needs the PIN. Off never does.
      const pin = on ? prompt(`Your PIN, to let ${d.label} use ${s}:`) : null;
      if (on && !pin) { box.checked = false; return; }
      try {
        await api(`/v1/me/devices/${d.id}/skills/${encodeURIComponent(s)}`, { method: "PUT", body: { on, pin } });
      } catch (err) {
        box.checked = !on;
        setStatus(err.message);
      }
    });
    lab.append(box, s);
    skills.append(lab);
  }
  main.append(skills);
  const revoke = el("button", "ghost small danger-text", "Revoke");
  revoke.type = "button";
  revoke.addEventListener("click", async () => {
    if (!confirm(`Revoke ${d.label}? It is disconnected and its token stops working.`)) return;
    await api(`/v1/me/devices/${d.id}`, { method: "DELETE" }).catch((err) => setStatus(err.message));
    refresh();
  });
  li.append(main, revoke);
  return li;
}

export function mount(root) {
  root.replaceChildren(el("h2", null, "Devices"));
  const list = el("ul", "rows devices");
  const error = el("p", "error-line");
  error.hidden = true;
  const refresh = async () => {
    try {
      const body = await api("/v1/me/devices");
      showError(error, null);
      list.replaceChildren();
      const devices = ((body && body.data) || []).filter((d) => !d.revoked);
      for (const d of devices) list.append(deviceRow(d, refresh));
      if (!devices.length) list.append(el("li", "empty", "No devices paired yet."));
    } catch (err) { showError(error, err); }
  };
  root.append(pairForm(() => setTimeout(refresh, 500)), el("h3", null, "Your devices"), error, list);
  return { refresh };
}
