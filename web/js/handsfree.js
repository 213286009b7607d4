// Hands-free questions for pages that send whole recordings (the camera): the microphone
// stays open, the page's voice detection finds where each utterance starts and ends, and each
// one is recorded by its own Recorder (private chunks, so every file keeps its header).
//
//   const ears = new HandsFree(micStream, { onUtterance(blob) { ... }, onState(text) { ... } });
//   ears.start();  ...  ears.stop();
//
// An utterance starts at the first loud 20 ms piece (recording begins at once, so its first
// syllable is kept) and counts once it has lasted SPEECH_PIECES pieces; a blip shorter than
// that is thrown away. It ends after SILENCE_MS of quiet, or at MAX_MS. `paused()` (the page
// is speaking an answer aloud) keeps the page from hearing itself.

// The same thresholds as the voice panel's own detection.
import { Recorder, SILENCE_MS, SPEECH_PIECES, SPEECH_RMS } from "./voice.js";

const PIECE_MS = 20;
const MAX_MS = 15_000;

export class HandsFree {
  constructor(stream, { onUtterance, onState = () => {}, paused = () => false } = {}) {
    Object.assign(this, { stream, onUtterance, onState, paused });
    this.ctx = null;
    this.timer = null;
    this.recorder = null;
  }

  start() {
    this.ctx = new AudioContext();
    const analyser = this.ctx.createAnalyser();
    analyser.fftSize = 1024;
    this.ctx.createMediaStreamSource(this.stream).connect(analyser);
    const samples = new Float32Array(analyser.fftSize);
    let loud = 0;
    let startedAt = 0;
    let quietSince = null;
    this.onState("Listening…");
    this.timer = setInterval(() => {
      analyser.getFloatTimeDomainData(samples);
      let energy = 0;
      for (const v of samples) energy += v * v;
      const speech = Math.sqrt(energy / samples.length) > SPEECH_RMS && !this.paused();
      const now = performance.now();
      if (!this.recorder) {
        if (speech) { this.recorder = new Recorder(this.stream, "audio/webm").start(100); loud = 1; startedAt = now; quietSince = null; }
        return;
      }
      if (speech) { loud += 1; quietSince = null; if (loud === SPEECH_PIECES) this.onState("Hearing you…"); }
      else quietSince = quietSince || now;
      const confirmed = loud >= SPEECH_PIECES;
      if (!confirmed && quietSince && now - quietSince > 4 * PIECE_MS) { this.finish(false); return; }
      if (confirmed && ((quietSince && now - quietSince > SILENCE_MS) || now - startedAt > MAX_MS)) this.finish(true);
    }, PIECE_MS);
  }

  async finish(send) {
    const recorder = this.recorder;
    this.recorder = null;
    if (!recorder) return;
    const blob = await recorder.stop();
    this.onState("Listening…");
    if (send && blob.size) this.onUtterance(blob);
  }

  stop() {
    clearInterval(this.timer);
    this.timer = null;
    if (this.recorder) this.recorder.stop();
    this.recorder = null;
    if (this.ctx) this.ctx.close();
    this.ctx = null;
    for (const t of this.stream.getTracks()) t.stop();
  }
}
