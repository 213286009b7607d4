// The message box: the length limit shown before sending (the text is never lost: a refused
// send puts it back), attachments by button, drag-and-drop and paste with progress, Enter to
// send, and the talk button, which loads the voice module when the server ships one.

import { bytes, el, setStatus } from "./api.js";
import { upload } from "./files.js";

export const MAX_MESSAGE_CHARS = 100_000; // the server's limit on one chat message
const WARN_AT = 0.8;

export class Composer {
  constructor({ form, input, send, stop, attach, fileInput, counter, tray, talk, dropZone, onSend, onStop }) {
    Object.assign(this, { form, input, sendBtn: send, stopBtn: stop, attach, fileInput, counter, tray, talk });
    this.onSend = onSend;
    this.attachments = []; // {file, chip, result, promise}
    this.busy = false;
    form.addEventListener("submit", (e) => { e.preventDefault(); this.submit(); });
    input.addEventListener("keydown", (e) => {
      if (e.key === "Enter" && !e.shiftKey && !e.isComposing) { e.preventDefault(); this.submit(); }
    });
    input.addEventListener("input", () => this.refresh());
    input.addEventListener("paste", (e) => this.paste(e));
    stop.addEventListener("click", onStop);
    attach.addEventListener("click", () => fileInput.click());
    fileInput.addEventListener("change", () => { this.addFiles(fileInput.files); fileInput.value = ""; });
    for (const type of ["dragenter", "dragover"]) {
      dropZone.addEventListener(type, (e) => {
        if (!e.dataTransfer || ![...e.dataTransfer.types].includes("Files")) return;
        e.preventDefault();
        dropZone.classList.add("dropping");
      });
    }
    dropZone.addEventListener("dragleave", (e) => { if (e.target === dropZone) dropZone.classList.remove("dropping"); });
    dropZone.addEventListener("drop", (e) => {
      dropZone.classList.remove("dropping");
      if (!e.dataTransfer || !e.dataTransfer.files.length) return;
      e.preventDefault();
      this.addFiles(e.dataTransfer.files);
    });
    talk.addEventListener("click", () => this.startVoice());
    this.refresh();
  }

  setBusy(busy) {
    this.busy = busy;
    this.stopBtn.hidden = !busy;
    this.form.setAttribute("aria-busy", String(busy));
    this.refresh();
  }

  // Show how long the message is once it nears the limit, and say plainly when it is over.
  refresh() {
    const n = this.input.value.length;
    this.input.style.height = "auto";
    this.input.style.height = Math.min(this.input.scrollHeight, 200) + "px";
    const over = n > MAX_MESSAGE_CHARS;
    this.counter.hidden = n < MAX_MESSAGE_CHARS * WARN_AT;
    this.counter.classList.toggle("over", over);
    this.counter.replaceChildren(`${n.toLocaleString()} / ${MAX_MESSAGE_CHARS.toLocaleString()} characters`);
    if (over) {
      this.counter.append(` — ${(n - MAX_MESSAGE_CHARS).toLocaleString()} too many. `);
      const asFile = el("button", "ghost small", "Send it as a file instead");
      asFile.type = "button";
      asFile.addEventListener("click", () => this.textAsFile());
      this.counter.append(asFile);
    }
    const uploading = this.attachments.some((a) => !a.result && !a.error);
    this.sendBtn.disabled = this.busy || over || uploading;
  }

  textAsFile() {
    const text = this.input.value;
    this.input.value = "";
    this.addFiles([new File([text], "message.txt", { type: "text/plain" })]);
    this.refresh();
  }

  // A paste bigger than the limit becomes a text file, instead of a box the server refuses.
  paste(e) {
    const data = e.clipboardData;
    if (!data) return;
    if (data.files && data.files.length) {
      e.preventDefault();
      this.addFiles(data.files);
      return;
    }
    const text = data.getData("text/plain");
    if (this.attach.hidden) return; // no uploads: the text goes in the box and the counter shows the limit
    if (text && text.length + this.input.value.length > MAX_MESSAGE_CHARS) {
      e.preventDefault();
      this.addFiles([new File([text], "pasted.txt", { type: "text/plain" })]);
    }
  }

  addFiles(list) {
    // Uploads are the owner's (the attach button is hidden for other people).
    if (this.attach.hidden) { setStatus("Only the owner can attach files here."); return; }
    for (const file of list) {
      const chip = el("div", "chip");
      const name = el("span", "chip-name", file.name || "file");
      const bar = el("progress");
      bar.max = 1;
      bar.value = 0;
      const size = el("span", "chip-size", bytes(file.size));
      const remove = el("button", "ghost small", "×");
      remove.type = "button";
      remove.setAttribute("aria-label", "Remove " + (file.name || "file"));
      chip.append(name, size, bar, remove);
      this.tray.append(chip);
      this.tray.hidden = false;
      const item = { file, chip, result: null, error: null };
      remove.addEventListener("click", () => {
        this.attachments = this.attachments.filter((a) => a !== item);
        chip.remove();
        this.tray.hidden = !this.attachments.length;
        this.refresh();
      });
      item.promise = upload(file, (p) => { bar.value = p; }).then((result) => {
        item.result = result;
        bar.value = 1;
        chip.classList.add("uploaded");
        chip.dataset.file = String(result.id);
      }, (err) => {
        item.error = err;
        chip.classList.add("failed");
        bar.replaceWith(el("span", "chip-error", err.message));
      }).finally(() => this.refresh());
      this.attachments.push(item);
    }
    this.refresh();
  }

  async submit() {
    if (this.busy) return;
    const text = this.input.value.trim();
    const ready = this.attachments.filter((a) => a.result);
    if ((!text && !ready.length) || text.length > MAX_MESSAGE_CHARS) return;
    if (this.attachments.some((a) => !a.result && !a.error)) return;
    const lines = ready.map((a) => a.result.attachment);
    const message = [text, ...lines].filter(Boolean).join("\n");
    const saved = { value: this.input.value, attachments: this.attachments };
    this.input.value = "";
    this.attachments = [];
    this.tray.replaceChildren();
    this.tray.hidden = true;
    this.refresh();
    const ok = await this.onSend(message);
    if (ok === false && !this.input.value) {
      // Refused: the words come back, to be changed and sent again.
      this.input.value = saved.value;
      for (const a of saved.attachments) { this.tray.append(a.chip); this.attachments.push(a); }
      this.tray.hidden = !this.attachments.length;
      this.refresh();
    }
  }

  // The voice helper's module, when present, takes over the talk button.
  async startVoice() {
    try {
      const voice = await import("./voice.js");
      if (voice && typeof voice.start === "function") {
        const open = await voice.start({ composer: this });
        this.talk.setAttribute("aria-pressed", open ? "true" : "false");
        this.talk.classList.toggle("active", Boolean(open));
      }
    } catch {
      this.talk.hidden = true;
    }
  }
}

// Whether web/js/voice.js exists on this server (the talk button shows only then).
export async function voiceAvailable() {
  try {
    const res = await fetch("/static/js/voice.js", { method: "HEAD", credentials: "same-origin" });
    return res.ok;
  } catch { return false; }
}
