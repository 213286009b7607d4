// The microphone's AudioWorklet: mono float samples at the context's rate in, PCM16 at
// 16 kHz out (posted to voice.js in pieces of about 20 ms), with each piece's level for the
// page's voice detection. Loaded by web/js/voice.js; nothing else uses it.

const TARGET = 16000;
const PIECE = 320; // 20 ms at 16 kHz

class PcmDownsampler extends AudioWorkletProcessor {
  constructor() {
    super();
    this.ratio = sampleRate / TARGET;
    this.pos = 0;          // fractional read position into the incoming stream
    this.out = new Int16Array(PIECE);
    this.fill = 0;
    this.energy = 0;
    this.last = 0;
  }

  process(inputs) {
    const channel = inputs[0] && inputs[0][0];
    if (!channel) return true;
    // Linear interpolation from the context's rate down to 16 kHz.
    while (this.pos < channel.length - 1) {
      const i = Math.floor(this.pos);
      const frac = this.pos - i;
      // Between the last sample of the previous block (i = -1) and the first of this one.
      const a = i < 0 ? this.last : channel[i];
      const v = a * (1 - frac) + channel[i + 1] * frac;
      const clipped = Math.max(-1, Math.min(1, v));
      this.out[this.fill++] = clipped < 0 ? clipped * 0x8000 : clipped * 0x7fff;
      this.energy += clipped * clipped;
      if (this.fill === PIECE) {
        const rms = Math.sqrt(this.energy / PIECE);
        this.port.postMessage({ pcm: this.out.buffer, rms }, [this.out.buffer]);
        this.out = new Int16Array(PIECE);
        this.fill = 0;
        this.energy = 0;
      }
      this.pos += this.ratio;
    }
    this.pos -= channel.length;
    this.last = channel[channel.length - 1];
    return true;
  }
}

registerProcessor("pcm-downsampler", PcmDownsampler);
