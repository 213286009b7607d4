// The camera: frames from getUserMedia to the camera socket, one at a time (the next only after
// its frame_ack), the perception overlay (boxes, OCR text, dial readings), questions typed or
// spoken (push to talk, one recorder per press, or hands-free: web/js/handsfree.js finds each
// utterance and records it on its own), goal, coach mode and procedures, answers
// spoken aloud, the agent's follow-ups and confirmations; and watch-only viewers over WebRTC.

import { api, el, setStatus } from "./api.js";
import { confirmCard } from "./cards.js";
import { HandsFree } from "./handsfree.js";

const LONG_SIDE = 640;
const MIN_GAP_MS = 120;

function socketUrl(query) {
  return `${location.protocol === "https:" ? "wss" : "ws"}://${location.host}/v1/camera/ws${query ? "?" + query : ""}`;
}

class Stream {
  constructor(ui) {
    this.ui = ui;
    this.ws = null;
    this.media = null;
    this.waiting = false;
    this.maxBytes = 1_000_000;
    this.frameSize = { w: 0, h: 0 };
    this.peers = new Map();
    this.canvas = document.createElement("canvas");
    this.frames = 0;
  }

  async start() {
    this.media = await navigator.mediaDevices.getUserMedia({ video: { facingMode: "environment", width: { ideal: 1280 } }, audio: false });
    this.ui.video.srcObject = this.media;
    await this.ui.video.play().catch(() => {});
    const params = new URLSearchParams();
    if (this.ui.procedure.value) params.set("procedure", this.ui.procedure.value);
    this.ws = new WebSocket(socketUrl(params.toString()));
    this.ws.binaryType = "arraybuffer";
    this.ws.addEventListener("message", (e) => this.onMessage(JSON.parse(e.data)));
    this.ws.addEventListener("close", (e) => { this.log("state", `Camera stream closed (${e.code}${e.reason ? ": " + e.reason : ""})`); this.stop(false); });
  }

  stop(close = true) {
    if (close && this.ws) this.ws.close(1000);
    this.ws = null;
    if (this.media) for (const t of this.media.getTracks()) t.stop();
    this.media = null;
    for (const pc of this.peers.values()) pc.close();
    this.peers.clear();
    this.ui.onStopped();
  }

  send(msg) { if (this.ws && this.ws.readyState === 1) this.ws.send(JSON.stringify(msg)); }

  // One frame out; the next waits for this one's frame_ack, so the server always has the newest.
  async sendFrame() {
    if (!this.ws || this.ws.readyState !== 1 || this.waiting) return;
    const v = this.ui.video;
    if (!v.videoWidth) { setTimeout(() => this.sendFrame(), 100); return; }
    const scale = Math.min(1, LONG_SIDE / Math.max(v.videoWidth, v.videoHeight));
    this.canvas.width = Math.round(v.videoWidth * scale);
    this.canvas.height = Math.round(v.videoHeight * scale);
    this.canvas.getContext("2d").drawImage(v, 0, 0, this.canvas.width, this.canvas.height);
    let quality = 0.75;
    let blob = await new Promise((r) => this.canvas.toBlob(r, "image/jpeg", quality));
    while (blob && blob.size > this.maxBytes && quality > 0.3) {
      quality -= 0.15;
      blob = await new Promise((r) => this.canvas.toBlob(r, "image/jpeg", quality));
    }
    if (!blob || !this.ws || this.ws.readyState !== 1) return;
    this.frameSize = { w: this.canvas.width, h: this.canvas.height };
    this.waiting = true;
    this.ws.send(await blob.arrayBuffer());
    this.frames += 1;
  }

  onMessage(ev) {
    switch (ev.type) {
      case "hello":
        this.streamId = ev.stream_id;
        this.maxBytes = ev.max_frame_bytes || this.maxBytes;
        this.ui.onHello(ev);
        this.sendFrame();
        break;
      case "frame_ack":
        this.waiting = false;
        setTimeout(() => this.sendFrame(), MIN_GAP_MS);
        break;
      case "perception": this.ui.drawPerception(ev, this.frameSize); break;
      case "thinking": this.log("thinking", ev.question); break;
      case "answer": {
        const reading = ev.reading ? ` (${ev.reading.value} ${ev.reading.unit || ""})` : "";
        this.log("answer", ev.say + reading, ev.status);
        this.ui.speak(ev.say);
        break;
      }
      case "alert": case "coach": case "notice":
        this.log(ev.type, ev.say || ev.text, ev.status);
        this.ui.speak(ev.say);
        break;
      case "agent": this.log("agent", ev.text); this.ui.speak(ev.text); break;
      case "transcript": this.log("you said", ev.text); break;
      case "state": this.ui.drawState(ev); break;
      case "confirm": this.ui.confirm(ev, this); break;
      case "confirmation": this.log("confirmation", ev.status || ev.message || ""); break;
      case "job": this.log("review", `${ev.stage} ${Math.round((ev.progress || 0) * 100)}%`); break;
      case "report": this.log("report", ev.summary || JSON.stringify(ev)); break;
      case "viewer": if (ev.joined) this.offer(ev.viewer); else this.peers.get(ev.viewer)?.close(); break;
      case "webrtc": this.onSignal(ev); break;
      case "error":
        if (ev.frame != null) this.waiting = false;
        this.log("error", ev.message);
        break;
    }
  }

  log(kind, text, status) { this.ui.log(kind, text, status); }

  // The phone's video to a watch-only viewer: we offer, it answers, candidates both ways.
  async offer(viewer) {
    const pc = new RTCPeerConnection({ iceServers: [] });
    this.peers.set(viewer, pc);
    for (const track of this.media ? this.media.getTracks() : []) pc.addTrack(track, this.media);
    pc.onicecandidate = (e) => { if (e.candidate) this.send({ type: "webrtc", to: viewer, candidate: e.candidate.toJSON() }); };
    await pc.setLocalDescription(await pc.createOffer());
    this.send({ type: "webrtc", to: viewer, sdp: pc.localDescription.toJSON() });
    this.log("viewer", "someone is watching");
  }

  async onSignal(ev) {
    const pc = this.peers.get(ev.from);
    if (!pc) return;
    if (ev.sdp) await pc.setRemoteDescription(ev.sdp);
    if (ev.candidate) await pc.addIceCandidate(ev.candidate).catch(() => {});
  }
}

// Watching someone's stream (another device of the owner): answer the phone's offer.
function watch(streamId, ui) {
  const ws = new WebSocket(socketUrl("watch=" + encodeURIComponent(streamId)));
  const pc = new RTCPeerConnection({ iceServers: [] });
  pc.ontrack = (e) => { ui.video.srcObject = e.streams[0]; ui.video.play().catch(() => {}); };
  pc.onicecandidate = (e) => { if (e.candidate) ws.send(JSON.stringify({ type: "webrtc", candidate: e.candidate.toJSON() })); };
  ws.addEventListener("message", async (e) => {
    const ev = JSON.parse(e.data);
    if (ev.type === "webrtc" && ev.sdp) {
      await pc.setRemoteDescription(ev.sdp);
      await pc.setLocalDescription(await pc.createAnswer());
      ws.send(JSON.stringify({ type: "webrtc", sdp: pc.localDescription.toJSON() }));
    } else if (ev.type === "webrtc" && ev.candidate) {
      await pc.addIceCandidate(ev.candidate).catch(() => {});
    } else if (ev.type === "perception") ui.drawPerception(ev, { w: ui.video.videoWidth, h: ui.video.videoHeight });
    else if (ev.type === "answer") ui.log("answer", ev.say, ev.status);
  });
  ws.addEventListener("close", (e) => ui.log("state", `Watching ended (${e.code})`));
  return { stop: () => { ws.close(); pc.close(); } };
}

export function mount(root) {
  root.replaceChildren(el("h2", null, "Camera"));
  const stage = el("div", "camera-stage");
  const video = el("video");
  video.muted = true;
  video.playsInline = true;
  video.setAttribute("playsinline", "");
  const overlay = el("canvas", "overlay");
  stage.append(video, overlay);
  const controls = el("div", "camera-controls");
  const start = el("button", null, "Start camera");
  start.type = "button";
  const stop = el("button", "ghost", "Stop");
  stop.type = "button";
  stop.hidden = true;
  const procedure = el("select");
  procedure.setAttribute("aria-label", "Procedure");
  const coach = el("label");
  const coachBox = el("input");
  coachBox.type = "checkbox";
  coach.append(coachBox, " Coach mode");
  const speakLabel = el("label");
  const speakBox = el("input");
  speakBox.type = "checkbox";
  speakBox.checked = true;
  speakLabel.append(speakBox, " Speak answers");
  const talk = el("button", "ghost", "Hold to ask");
  talk.type = "button";
  talk.disabled = true;
  const handsFree = el("label");
  const handsFreeBox = el("input");
  handsFreeBox.type = "checkbox";
  handsFreeBox.disabled = true;
  handsFree.append(handsFreeBox, " Hands-free questions");
  controls.append(start, stop, procedure, coach, speakLabel, talk, handsFree);
  const ask = el("form", "inline-form");
  const question = el("input");
  question.placeholder = "Ask about what the camera sees";
  question.maxLength = 2000;
  question.id = "camera-question";
  question.setAttribute("aria-label", "Question");
  const goal = el("input");
  goal.placeholder = "Goal (optional)";
  goal.maxLength = 300;
  goal.setAttribute("aria-label", "Goal");
  const send = el("button", null, "Ask");
  send.type = "submit";
  ask.append(question, send, goal);
  const perception = el("p", "perception");
  perception.id = "camera-perception";
  const state = el("p", "meta");
  const share = el("p", "meta");
  const log = el("ul", "camera-log");
  root.append(stage, controls, ask, perception, state, share, log);

  let stream = null;
  let watching = null;
  const ui = {
    video, procedure,
    log(kind, text, status) {
      const li = el("li");
      if (status) li.dataset.status = status;
      li.append(el("span", "kind", kind), text || "");
      log.prepend(li);
    },
    speak(text) {
      if (!speakBox.checked || !text || !("speechSynthesis" in window)) return;
      speechSynthesis.speak(new SpeechSynthesisUtterance(text));
    },
    onHello(ev) {
      talk.disabled = false;
      handsFreeBox.disabled = false;
      share.replaceChildren("Watch from another device: ", Object.assign(el("code", null, `${location.origin}/#/camera?watch=${ev.stream_id}`)));
      root.dataset.stream = ev.stream_id;
    },
    onStopped() {
      start.hidden = false; stop.hidden = true; talk.disabled = true;
      handsFreeBox.checked = false; handsFreeBox.disabled = true; stopEars();
    },
    drawState(ev) {
      state.textContent = [ev.goal ? "Goal: " + ev.goal : null, ev.coach ? "coach on" : null,
        ev.procedure ? `${ev.procedure}: step ${(ev.step_index ?? 0) + 1}/${ev.steps}${ev.step ? " — " + ev.step : ""}${ev.finished ? " (finished)" : ""}` : null,
        `${ev.frames} frames`].filter(Boolean).join(" · ");
    },
    drawPerception(ev, size) {
      const w = stage.clientWidth;
      const h = stage.clientHeight;
      overlay.width = w;
      overlay.height = h;
      const g = overlay.getContext("2d");
      g.clearRect(0, 0, w, h);
      if (ev.detections && size.w) {
        // The video is letterboxed (object-fit: contain): map frame pixels onto it.
        const s = Math.min(w / size.w, h / size.h);
        const ox = (w - size.w * s) / 2;
        const oy = (h - size.h * s) / 2;
        g.lineWidth = 2;
        g.font = "14px system-ui";
        for (const d of ev.detections) {
          const b = d.box || {};
          g.strokeStyle = "#5ec8be";
          g.strokeRect(ox + b.x * s, oy + b.y * s, b.w * s, b.h * s);
          g.fillStyle = "#5ec8be";
          g.fillText(`${d.label} ${Math.round((d.confidence || 0) * 100)}%`, ox + b.x * s + 3, oy + b.y * s + 15);
        }
      }
      root.dataset.frames = String(ev.frame);
      const parts = [];
      if (ev.detections) parts.push(ev.detections.length ? "Sees: " + ev.detections.map((d) => d.label).join(", ") : "Sees: nothing recognised");
      if (ev.ocr) parts.push("Reads: " + ev.ocr.replace(/\n/g, " / ").slice(0, 300));
      if (ev.dial && ev.dial.value != null) parts.push(`Dial: ${ev.dial.value}${ev.dial.unit ? " " + ev.dial.unit : ""}`);
      if (parts.length) perception.textContent = parts.join(" · ");
    },
    confirm(ev, s) {
      const card = confirmCard(ev);
      // Answered over the socket instead of the HTTP route: the camera's session decides.
      for (const b of card.querySelectorAll("button.approve, button.decline")) {
        const approve = b.classList.contains("approve");
        b.replaceWith(Object.assign(b.cloneNode(true), { onclick: () => {
          s.send({ type: "confirm", id: ev.id, approve, pin: card.querySelector(".pin")?.value || null });
          card.dataset.answer = approve ? "approved" : "declined";
          card.querySelector(".confirm-note").textContent = approve ? "Allowed." : "Declined.";
        } }));
      }
      const li = el("li");
      li.append(card);
      log.prepend(li);
    },
  };

  // Watching someone else's stream: only the video, the log and a way to use this camera.
  const ownControls = [procedure, coach, speakLabel, talk, handsFree, ask];
  const watchOnly = (on) => {
    for (const c of ownControls) c.hidden = on;
    start.textContent = on ? "Use my camera instead" : "Start camera";
  };

  start.addEventListener("click", async () => {
    if (watching) { watching.stop(); watching = null; watchOnly(false); }
    stream = new Stream(ui);
    try {
      await stream.start();
      start.hidden = true;
      stop.hidden = false;
    } catch (err) {
      setStatus("The camera could not start: " + (err.message || err.name));
      stream.stop();
    }
  });
  stop.addEventListener("click", () => stream && stream.stop());
  ask.addEventListener("submit", (e) => {
    e.preventDefault();
    if (!stream) return;
    if (goal.value.trim() !== (goal.dataset.sent || "")) {
      goal.dataset.sent = goal.value.trim();
      stream.send({ type: "goal", text: goal.value.trim() });
    }
    const text = question.value.trim();
    if (text) { stream.send({ type: "ask", text }); question.value = ""; }
  });
  coachBox.addEventListener("change", () => stream && stream.send({ type: "coach", on: coachBox.checked }));
  procedure.addEventListener("change", () => stream && stream.send({ type: "procedure", id: procedure.value ? Number(procedure.value) : null }));

  // A recorded question goes to the stream, which transcribes it and answers.
  const sendAudio = async (blob) => {
    if (!stream || !blob.size) return;
    const data = await new Promise((r) => { const fr = new FileReader(); fr.onload = () => r(String(fr.result).split(",")[1]); fr.readAsDataURL(blob); });
    if (data) stream.send({ type: "audio", data, mime: blob.type.split(";")[0] || "audio/webm" });
  };

  // Hands-free: the microphone stays open and each utterance is sent as it ends.
  let ears = null;
  function stopEars() { if (ears) ears.stop(); ears = null; talk.textContent = "Hold to ask"; }
  handsFreeBox.addEventListener("change", async () => {
    if (!handsFreeBox.checked) { stopEars(); return; }
    try {
      const mic = await navigator.mediaDevices.getUserMedia({ audio: { echoCancellation: true, noiseSuppression: true } });
      ears = new HandsFree(mic, {
        onUtterance: sendAudio,
        onState: (text) => { talk.textContent = text; },
        paused: () => "speechSynthesis" in window && speechSynthesis.speaking,
      });
      ears.start();
    } catch (err) {
      handsFreeBox.checked = false;
      setStatus("The microphone could not start: " + err.message);
    }
  });

  // Push to talk: a fresh recorder per press, with its own chunks (a shared buffer breaks WebM).
  let recorder = null;
  const down = async () => {
    if (!stream || recorder || ears) return;
    try {
      const mic = await navigator.mediaDevices.getUserMedia({ audio: true });
      const chunks = [];
      recorder = new MediaRecorder(mic);
      recorder.ondataavailable = (e) => { if (e.data.size) chunks.push(e.data); };
      recorder.onstop = async () => {
        for (const t of mic.getTracks()) t.stop();
        const blob = new Blob(chunks, { type: recorder.mimeType || "audio/webm" });
        recorder = null;
        await sendAudio(blob);
      };
      recorder.start();
      talk.textContent = "Listening… release to send";
    } catch (err) { setStatus("The microphone could not start: " + err.message); }
  };
  const up = () => { if (recorder && recorder.state === "recording") recorder.stop(); talk.textContent = "Hold to ask"; };
  talk.addEventListener("pointerdown", down);
  talk.addEventListener("pointerup", up);
  talk.addEventListener("pointerleave", up);

  const refresh = async () => {
    const body = await api("/v1/procedures").catch(() => null);
    const keep = procedure.value;
    procedure.replaceChildren(Object.assign(el("option", null, "No procedure"), { value: "" }));
    for (const p of (body && body.data) || []) procedure.append(Object.assign(el("option", null, p.name || p.title || `procedure ${p.id}`), { value: String(p.id) }));
    procedure.value = keep;
    const w = /watch=([\w-]+)/.exec(location.hash);
    if (w && !watching && !stream) { watching = watch(w[1], ui); watchOnly(true); ui.log("state", "Watching stream " + w[1]); }
  };
  return { refresh };
}
