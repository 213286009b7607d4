// Voice for the chat page: talk to the agent over GET /v1/voice/ws.
//
//   import { mountVoice } from "./voice.js";
//   const voice = mountVoice(container, { token, sessionId, text, opening, onEvent });
//   voice.close();
//
// mountVoice builds, inside `container`, a talk button (hold to talk, or tap once to talk and
// again to send), a hands-free switch (the microphone stays open and the page's voice
// detection marks where each utterance ends), a stop button and the live transcript (what
// you said, then the reply sentence by sentence as it is spoken). Options: `token` a session
// token (the owner's page uses its cookie and needs none), `sessionId` the conversation to
// continue (new when absent), `text` a first turn sent at once (an answered call:
// "[call answered] <reason>"), `opening` a prepared line spoken as it is, `onEvent(event)` to
// see every JSON event (`ready`, `transcript`, `turn`, `sentence`, `tool`, `confirm`, `done`,
// `spoken`, `error`). Barge-in: speaking while the reply plays, or tapping stop or talk, cuts
// the reply off; the server is told the last audio frame played, so history keeps only what
// you heard.
//
// The chat page's hooks use `start({ composer })` (the talk button) and `answerCall(call)`
// (the ringing screen's Answer). `Recorder` records one gesture into its own chunk buffer.
//
// Wire: PCM16 16 kHz mono upstream in binary messages; downstream binary frames are an 8-byte
// header (uint32 LE sequence number, uint32 LE sentence position) then PCM16 mono at the rate
// the `ready` event names.

const HEADER_BYTES = 8;
export const SPEECH_RMS = 0.02;       // a 20 ms piece louder than this is speech
export const SPEECH_PIECES = 3;       // ... for this many pieces in a row starts an utterance
export const SILENCE_MS = 700;        // this much quiet after speech ends it
export const PAUSE_MS = 200;          // this much tells the server to start speech to text early
const PREROLL_PIECES = 15;     // 300 ms before speech was detected is sent with it
const PLAYED_EVERY_MS = 500;

// -- recorders: one per gesture, each with its own chunks ------------------------------------

// A MediaRecorder wrapped so that every gesture gets a fresh recorder and a private chunk list
// (two recordings that overlap never share a buffer, so each file keeps its own header).
export class Recorder {
  constructor(stream, mimeType) {
    this.chunks = [];
    const options = mimeType && MediaRecorder.isTypeSupported(mimeType) ? { mimeType } : undefined;
    this.recorder = new MediaRecorder(stream, options);
    this.recorder.addEventListener("dataavailable", (e) => { if (e.data && e.data.size) this.chunks.push(e.data); });
    this.done = new Promise((resolve) => {
      this.recorder.addEventListener("stop", () => resolve(new Blob(this.chunks, { type: this.recorder.mimeType })));
    });
  }
  start(timeslice = 250) { this.recorder.start(timeslice); return this; }
  stop() { if (this.recorder.state !== "inactive") this.recorder.stop(); return this.done; }
}

// -- the audio out ------------------------------------------------------------------------------

class Player {
  constructor(onPlayed) {
    this.ctx = null;
    this.rate = 22050;
    this.next = 0;
    this.sources = new Set();
    this.lastPlayed = null;
    this.onPlayed = onPlayed;
  }
  ensure() {
    if (!this.ctx) this.ctx = new AudioContext();
    if (this.ctx.state === "suspended") this.ctx.resume();
  }
  get playing() { return this.sources.size > 0; }
  play(frame) {
    this.ensure();
    const view = new DataView(frame);
    const seq = view.getUint32(0, true);
    const count = (frame.byteLength - HEADER_BYTES) / 2;
    const buffer = this.ctx.createBuffer(1, Math.max(1, count), this.rate);
    const data = buffer.getChannelData(0);
    for (let i = 0; i < count; i++) data[i] = view.getInt16(HEADER_BYTES + i * 2, true) / 32768;
    const source = this.ctx.createBufferSource();
    source.buffer = buffer;
    source.connect(this.ctx.destination);
    const at = Math.max(this.ctx.currentTime + 0.02, this.next);
    source.start(at);
    this.next = at + buffer.duration;
    this.sources.add(source);
    source.onended = () => {
      this.sources.delete(source);
      if (source.cut) return;
      if (this.lastPlayed === null || seq > this.lastPlayed) this.lastPlayed = seq;
      this.onPlayed(seq);
    };
  }
  // Barge-in: silence at once; what had not been heard is never counted as played.
  cut() {
    for (const s of this.sources) { s.cut = true; try { s.stop(); } catch { /* ended */ } }
    this.sources.clear();
    this.next = 0;
    return this.lastPlayed;
  }
}

// -- the microphone -----------------------------------------------------------------------------

class Microphone {
  constructor({ onPiece }) {
    this.onPiece = onPiece;
    this.stream = null;
    this.ctx = null;
  }
  async open() {
    if (this.stream) return;
    this.stream = await navigator.mediaDevices.getUserMedia({
      audio: { channelCount: 1, echoCancellation: true, noiseSuppression: true, autoGainControl: true },
    });
    this.ctx = new AudioContext();
    const source = this.ctx.createMediaStreamSource(this.stream);
    if (this.ctx.audioWorklet) {
      await this.ctx.audioWorklet.addModule(new URL("./voice-worklet.js", import.meta.url));
      const node = new AudioWorkletNode(this.ctx, "pcm-downsampler");
      node.port.onmessage = (e) => this.onPiece(new Int16Array(e.data.pcm), e.data.rms);
      source.connect(node);
      // Pulled by the graph only when it reaches the output (it writes nothing there).
      node.connect(this.ctx.destination);
      this.node = node;
    } else {
      // Older browsers: a ScriptProcessor doing the same conversion on the main thread.
      const node = this.ctx.createScriptProcessor(4096, 1, 1);
      const ratio = this.ctx.sampleRate / 16000;
      node.onaudioprocess = (e) => {
        const input = e.inputBuffer.getChannelData(0);
        const out = new Int16Array(Math.floor(input.length / ratio));
        let energy = 0;
        for (let i = 0; i < out.length; i++) {
          const v = Math.max(-1, Math.min(1, input[Math.floor(i * ratio)]));
          out[i] = v < 0 ? v * 0x8000 : v * 0x7fff;
          energy += v * v;
        }
        this.onPiece(out, Math.sqrt(energy / Math.max(1, out.length)));
      };
      source.connect(node);
      node.connect(this.ctx.destination);
      this.node = node;
    }
  }
  close() {
    if (this.stream) for (const t of this.stream.getTracks()) t.stop();
    if (this.ctx) this.ctx.close();
    this.stream = null;
    this.ctx = null;
  }
}

// -- the session --------------------------------------------------------------------------------

function socketUrl({ token, sessionId, text, opening }) {
  const url = new URL("/v1/voice/ws", location.href);
  url.protocol = location.protocol === "https:" ? "wss:" : "ws:";
  if (token) url.searchParams.set("token", token);
  if (sessionId) url.searchParams.set("session_id", sessionId);
  if (opening) url.searchParams.set("opening", opening);
  else if (text) url.searchParams.set("text", text);
  return url.toString();
}

function node(tag, cls, text) {
  const n = document.createElement(tag);
  if (cls) n.className = cls;
  if (text !== undefined) n.textContent = text;
  return n;
}

export function mountVoice(container, options = {}) {
  const ui = node("div", "voice");
  const talk = node("button", "voice-talk", "Hold to talk");
  talk.type = "button";
  const handsFree = node("label", "voice-handsfree");
  const handsFreeBox = node("input");
  handsFreeBox.type = "checkbox";
  handsFree.append(handsFreeBox, " Hands-free");
  const stop = node("button", "voice-stop ghost", "Stop");
  stop.type = "button";
  const status = node("p", "voice-status", "Connecting…");
  const transcript = node("ol", "voice-transcript");
  ui.append(talk, handsFree, stop, status, transcript);
  container.append(ui);

  let ws = null;
  let recording = false;     // sending microphone PCM now
  let loud = 0;              // loud pieces in a row
  let quietSince = null;
  let paused = false;        // told the server about this quiet stretch already
  const preroll = [];
  let reply = null;          // the transcript line the reply is written into
  let lastReported = null;
  let reportTimer = null;

  const send = (data) => { if (ws && ws.readyState === WebSocket.OPEN) ws.send(data); };
  const player = new Player(() => {});
  const line = (who, text) => {
    const li = node("li", `voice-${who}`, text);
    transcript.append(li);
    li.scrollIntoView({ block: "nearest" });
    return li;
  };

  function bargeIn() {
    if (!player.playing) return;
    const heard = player.cut();
    send(JSON.stringify({ type: "interrupt", heard_seq: heard }));
  }

  function beginUtterance() {
    bargeIn();
    recording = true;
    paused = false;
    for (const piece of preroll.splice(0)) send(piece);
    status.textContent = "Listening…";
    talk.classList.add("active");
  }

  function endUtterance() {
    if (!recording) return;
    recording = false;
    talk.classList.remove("active");
    send(JSON.stringify({ type: "end" }));
    status.textContent = "Thinking…";
  }

  const mic = new Microphone({
    onPiece(pcm, rms) {
      const bytes = pcm.buffer.slice(0);
      if (recording) send(bytes);
      else { preroll.push(bytes); if (preroll.length > PREROLL_PIECES) preroll.shift(); }
      if (!handsFreeBox.checked) return;
      // The page's voice detection: speech starts after a few loud pieces, ends after quiet.
      if (rms > SPEECH_RMS) {
        loud += 1;
        quietSince = null;
        paused = false;
        if (!recording && loud >= SPEECH_PIECES) beginUtterance();
      } else {
        loud = 0;
        if (recording) {
          quietSince = quietSince || performance.now();
          const quiet = performance.now() - quietSince;
          // Early speech to text on what was said so far; `end` still decides (speech after
          // this makes the server transcribe the whole utterance again).
          if (!paused && quiet > PAUSE_MS) { paused = true; send(JSON.stringify({ type: "pause" })); }
          if (quiet > SILENCE_MS) endUtterance();
        }
      }
    },
  });

  function onEvent(event) {
    if (options.onEvent) options.onEvent(event);
    switch (event.type) {
      case "ready": player.rate = event.audio.rate; status.textContent = "Ready"; break;
      case "transcript": line("you", event.text || "(nothing heard)"); break;
      case "turn": reply = null; break;
      case "sentence":
        if (!reply) reply = line("agent", "");
        reply.textContent = (reply.textContent ? reply.textContent + " " : "") + event.text;
        status.textContent = "Speaking…";
        break;
      case "tool": if (event.status === "start" || event.status === "started") line("tool", `Using ${event.name}…`); break;
      case "confirm": line("confirm", event.question); break;
      case "done":
        if (event.cancelled && reply) { reply.textContent = event.text; reply.classList.add("interrupted"); }
        break;
      case "spoken": status.textContent = handsFreeBox.checked ? "Listening…" : "Ready"; break;
      case "error": status.textContent = event.message; break;
      default: break;
    }
  }

  function connect() {
    ws = new WebSocket(socketUrl(options));
    ws.binaryType = "arraybuffer";
    ws.onmessage = (e) => {
      if (typeof e.data === "string") onEvent(JSON.parse(e.data));
      else player.play(e.data);
    };
    ws.onclose = (e) => {
      status.textContent = e.code === 4401 ? "Sign in to talk." : e.code === 1000 ? "Voice closed."
        : e.code === 1013 ? `${e.reason || "The server is busy."} Press Talk to try again.` : `Voice closed (${e.code}).`;
    };
    reportTimer = setInterval(() => {
      if (player.lastPlayed !== null && player.lastPlayed !== lastReported) {
        lastReported = player.lastPlayed;
        send(JSON.stringify({ type: "played", seq: lastReported }));
      }
    }, PLAYED_EVERY_MS);
  }

  async function openMic() {
    try { await mic.open(); player.ensure(); return true; } catch (err) {
      status.textContent = `No microphone: ${err.message || err}`;
      return false;
    }
  }

  // Hold to talk; a quick tap starts and a second tap sends.
  let pressedAt = 0;
  talk.addEventListener("pointerdown", async () => {
    if (recording) { endUtterance(); return; }
    pressedAt = performance.now();
    if (await openMic()) beginUtterance();
  });
  talk.addEventListener("pointerup", () => { if (recording && performance.now() - pressedAt > 400) endUtterance(); });
  handsFreeBox.addEventListener("change", async () => {
    if (handsFreeBox.checked) {
      if (await openMic()) status.textContent = "Listening…";
    } else if (recording) endUtterance();
  });
  stop.addEventListener("click", bargeIn);

  connect();
  return {
    element: ui,
    get socket() { return ws; },
    say(text) { bargeIn(); send(JSON.stringify({ type: "text", text })); },
    interrupt: bargeIn,
    close() {
      clearInterval(reportTimer);
      player.cut();
      mic.close();
      if (ws) ws.close(1000);
      ui.remove();
    },
  };
}

// -- the chat page's hooks ------------------------------------------------------------------------

let mounted = null;

async function pageContext() {
  let token = null;
  let sessionId = null;
  try { token = (await import("./api.js")).auth.token(); } catch { /* standalone */ }
  try { sessionId = (await import("./chat.js")).current.get(); } catch { /* standalone */ }
  return { token, sessionId };
}

function panel() {
  let host = document.getElementById("voice-panel");
  if (!host) {
    host = node("section", "voice-panel");
    host.id = "voice-panel";
    const form = document.getElementById("chat-form");
    // Above the composer, so the spoken exchange sits where the conversation ends.
    (form && form.parentNode ? form.parentNode : document.body).insertBefore(host, form || null);
  }
  return host;
}

// The page hears about the voice session through "iriis:voice" events on window (the chat
// list refreshes after each spoken turn; closing the panel shows the whole conversation).
function tell(event) { window.dispatchEvent(new CustomEvent("iriis:voice", { detail: event })); }

// The talk button: opens (or closes) the voice panel for the conversation on screen.
export async function start() {
  if (mounted) { mounted.close(); mounted = null; tell({ type: "closed" }); return null; }
  mounted = mountVoice(panel(), { ...(await pageContext()), onEvent: tell });
  return mounted;
}

// The voice session on screen, if any (its `say(text)` sends a typed turn).
export function current() { return mounted; }

// The ringing screen's Answer: a voice session where the agent speaks first.
export async function answerCall(call) {
  if (mounted) mounted.close();
  const { token } = await pageContext();
  const opening = call.opening || null;
  const text = call.turn || `[call answered] ${call.reason || ""}`.trim();
  const sessionId = call.conversation_id || null;
  mounted = mountVoice(panel(), { token, sessionId, opening, text: opening ? null : text, onEvent: tell });
  return mounted;
}
