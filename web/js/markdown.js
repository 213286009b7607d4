// Model text to safe DOM: marked parses the markdown, DOMPurify sanitises the HTML (no script,
// no event handlers, no style), then `[file:N]` markers become attachments and code blocks get
// a copy button. Nothing else in the app assigns innerHTML.

import DOMPurify from "../vendor/purify.es.js";
import { marked } from "../vendor/marked.esm.js";
import { bytes, el, request } from "./api.js";

marked.setOptions({ gfm: true, breaks: true });

DOMPurify.addHook("afterSanitizeAttributes", (node) => {
  if (node.tagName === "A" && node.getAttribute("href")) {
    const href = node.getAttribute("href");
    if (!href.startsWith("#") && !href.startsWith("/")) {
      node.setAttribute("target", "_blank");
      node.setAttribute("rel", "noopener noreferrer");
    }
  }
  // Remote images would leak that the message was read; only our own files are shown.
  if (node.tagName === "IMG") {
    const src = node.getAttribute("src") || "";
    if (!src.startsWith("/v1/files/")) node.replaceWith(document.createTextNode(node.getAttribute("alt") || ""));
  }
});

const PURIFY = {
  RETURN_DOM_FRAGMENT: true,
  FORBID_TAGS: ["style", "form", "input", "button", "textarea", "select", "iframe", "object", "embed"],
  FORBID_ATTR: ["style"],
  ADD_ATTR: ["data-file", "data-name"],
};

// `[file:12]` (a tool's artefact) and `[attachment file:12 report.pdf]` (an upload).
export const FILE_MARKER = /\[(?:attachment )?file:(\d+)(?: ([^\]\n]{1,200}))?\]/g;

function markersToSpans(text) {
  return text.replace(FILE_MARKER, (_m, id, name) =>
    `<span class="file-ref" data-file="${id}"${name ? ` data-name="${escapeAttr(name)}"` : ""}></span>`);
}

function escapeAttr(s) {
  return s.replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" }[c]));
}

// Markdown to a sanitised fragment, attachments and copy buttons added.
export function renderMarkdown(text) {
  const html = marked.parse(markersToSpans(String(text || "")));
  const frag = DOMPurify.sanitize(html, PURIFY);
  const box = el("div", "md");
  box.append(frag);
  for (const span of box.querySelectorAll("span.file-ref[data-file]")) {
    span.replaceWith(attachment(Number(span.dataset.file), span.dataset.name || null));
  }
  for (const pre of box.querySelectorAll("pre")) addCopy(pre);
  return box;
}

// Plain text (what a person typed) with attachment lines shown as attachments.
export function renderPlain(text) {
  const box = el("div", "plain");
  let last = 0;
  const src = String(text || "");
  for (const m of src.matchAll(FILE_MARKER)) {
    const before = src.slice(last, m.index).replace(/\n+$/, "");
    if (before) box.append(el("span", "text", before));
    box.append(attachment(Number(m[1]), m[2] || null));
    last = m.index + m[0].length;
  }
  const rest = src.slice(last).replace(/^\n+/, "");
  if (rest) box.append(el("span", "text", rest));
  return box;
}

function addCopy(pre) {
  const wrap = el("div", "code-block");
  pre.replaceWith(wrap);
  const copy = el("button", "copy ghost", "Copy");
  copy.type = "button";
  copy.setAttribute("aria-label", "Copy code");
  copy.addEventListener("click", async () => {
    const text = pre.innerText;
    try {
      await navigator.clipboard.writeText(text);
    } catch {
      const range = document.createRange();
      range.selectNodeContents(pre);
      const sel = getSelection();
      sel.removeAllRanges();
      sel.addRange(range);
      document.execCommand("copy");
      sel.removeAllRanges();
    }
    copy.textContent = "Copied";
    setTimeout(() => { copy.textContent = "Copy"; }, 1500);
  });
  wrap.append(copy, pre);
}

const EXT = {
  image: /\.(png|jpe?g|gif|webp|bmp|svg)$/i,
  audio: /\.(mp3|wav|ogg|oga|m4a|aac|flac|opus)$/i,
  video: /\.(mp4|webm|mov|m4v|ogv)$/i,
};

function kindOf(mime, name) {
  if (mime) {
    if (mime === "image/svg+xml") return "file"; // drawn only as a download: scripts live in SVG
    for (const k of ["image", "audio", "video"]) if (mime.startsWith(k + "/")) return k;
    return "file";
  }
  if (name) for (const [k, re] of Object.entries(EXT)) if (re.test(name) && !/\.svg$/i.test(name)) return k;
  return null;
}

// What a stored file is: one byte asked for, the headers tell type, name and size.
const probes = new Map();
function probe(id) {
  if (!probes.has(id)) {
    probes.set(id, request(`/v1/files/${id}`, { headers: { Range: "bytes=0-0" } }).then((res) => {
      if (!res.ok && res.status !== 206) return { missing: true };
      const mime = (res.headers.get("content-type") || "").split(";")[0];
      const disp = res.headers.get("content-disposition") || "";
      const nm = /filename\*=UTF-8''([^;]+)|filename="?([^";]+)"?/i.exec(disp);
      const range = res.headers.get("content-range") || "";
      const size = Number(range.split("/")[1]) || Number(res.headers.get("content-length")) || null;
      let name = null;
      if (nm) { try { name = decodeURIComponent(nm[1] || nm[2]); } catch { name = nm[1] || nm[2]; } }
      res.body && res.body.cancel && res.body.cancel().catch(() => {});
      return { mime, name, size };
    }).catch(() => ({ missing: true })));
  }
  return probes.get(id);
}

export function attachment(id, name) {
  const url = `/v1/files/${id}`;
  const box = el("figure", "attachment");
  box.dataset.file = String(id);
  const draw = (kind, info) => {
    box.replaceChildren();
    box.dataset.kind = kind;
    const label = (info && info.name) || name || `file ${id}`;
    if (kind === "image") {
      const img = el("img");
      img.src = url;
      img.alt = label;
      img.loading = "lazy";
      const link = el("a");
      link.href = url;
      link.target = "_blank";
      link.append(img);
      box.append(link);
    } else if (kind === "audio" || kind === "video") {
      const media = el(kind);
      media.controls = true;
      media.preload = "metadata";
      media.src = url; // served with byte ranges, so seeking works
      box.append(media);
    }
    if (kind !== "image") {
      const card = el("a", "download");
      card.href = url;
      card.download = label;
      card.append(el("span", "file-icon", "⬇"), el("span", "file-name", label));
      if (info && info.size) card.append(el("span", "file-size", bytes(info.size)));
      if (kind === "file" || kind === "missing") box.append(card);
      else box.append(el("figcaption", null, label));
    }
    if (kind === "missing") box.querySelector(".file-name").textContent = `${label} (no longer available)`;
  };
  const guess = kindOf(null, name);
  draw(guess || "file", null);
  probe(id).then((info) => draw(info.missing ? "missing" : (kindOf(info.mime, info.name || name) || "file"), info));
  return box;
}
