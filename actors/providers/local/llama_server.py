"""llama-cpp-python's OpenAI-compatible server as a child process on a loopback port.

Why a child process and not `llama_cpp.Llama` inside the actor: the server already speaks the
API the router uses (streaming, `response_format` with a schema), so the local model is one
more provider on the same adapter, with the same timeouts and health records; a crash in
native code ends the child, not the actor, which restarts it; and the same slot is what a GPU
cluster fills with vLLM or Ray Serve LLM at another base URL. No Ray import.
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
from collections import deque
from pathlib import Path

import httpx

PDEATHSIG = 1  # prctl(PR_SET_PDEATHSIG): the child dies with its parent (SIGKILL: a paused
# child would leave a SIGTERM pending forever)
WARM_SCHEMA = {"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# The child sets its own death signal, then runs the server module: no `preexec_fn` (Python run
# between fork and exec in a threaded parent can deadlock on a lock another thread held at the
# fork, such as the dynamic loader's; a test's server start once hung there until its timeout).
LAUNCH = (f"import ctypes, runpy; ctypes.CDLL('libc.so.6').prctl({PDEATHSIG}, {int(signal.SIGKILL)}); "
          "runpy.run_module('llama_cpp.server', run_name='__main__', alter_sys=True)")


def command(python: str, model: Path, alias: str, port: int, n_ctx: int, threads: int) -> list[str]:
    return [python, "-c", LAUNCH, "--model", str(model), "--model_alias", alias,
            "--host", "127.0.0.1", "--port", str(port), "--n_ctx", str(n_ctx),
            "--n_threads", str(threads), "--n_threads_batch", str(threads),
            # A new request must wait, not cut off the answer someone is hearing.
            # No `--cache`: llama-cpp-python's RAM prompt cache copies the logits buffer into
            # every saved state (measured: the server's peak rose from 3.2 GB to 18.8 GB).
            "--interrupt_requests", "false", "--verbose", "false"]


class LlamaServer:
    def __init__(self, model: Path, alias: str, n_ctx: int, threads: int | None = None,
                 python: str = sys.executable) -> None:
        self.model, self.alias, self.n_ctx = model, alias, n_ctx
        self.threads = threads or max(1, os.cpu_count() or 1)
        self.python = python
        self.port = 0
        self.proc: subprocess.Popen[str] | None = None
        self.tail: deque[str] = deque(maxlen=20)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def last_words(self) -> str:
        lines = [ln for ln in self.tail if ln.strip() and "warn" not in ln.lower()]
        return lines[-1].strip()[:200] if lines else "no output"

    async def start(self, timeout: float = 300.0) -> None:
        """Start the child and wait until it lists its model; raises RuntimeError saying why
        it did not come up."""
        self.port = free_port()
        self.proc = subprocess.Popen(command(self.python, self.model, self.alias, self.port, self.n_ctx, self.threads),
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        asyncio.get_running_loop().run_in_executor(None, self._read)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        async with httpx.AsyncClient() as client:
            while loop.time() < deadline:
                if not self.running():
                    raise RuntimeError(f"the llama.cpp server exited while loading {self.model.name}: "
                                       f"{self.last_words()}")
                try:
                    resp = await client.get(f"{self.base_url}/models", timeout=2.0)
                    if resp.status_code == 200:
                        await self.warm(client)
                        return
                except httpx.HTTPError:
                    pass
                await asyncio.sleep(0.3)
        self.stop()
        raise RuntimeError(f"the llama.cpp server did not come up within {timeout:.0f} s")

    async def warm(self, client: httpx.AsyncClient) -> None:
        """One tiny schema-constrained request before anyone waits on one: the first request
        after loading pages the weights in and sets up the grammar code, several times a later
        request's time (benchmarks/MEASURED.md)."""
        body = {"model": self.alias, "max_tokens": 2, "temperature": 0,
                "messages": [{"role": "user", "content": "Say hi."}],
                "response_format": {"type": "json_object", "schema": WARM_SCHEMA}}
        try:
            await client.post(f"{self.base_url}/chat/completions", json=body, timeout=120.0)
        except httpx.HTTPError:
            pass  # only a warm-up: the first real request pays instead

    def _read(self) -> None:
        proc = self.proc
        if proc is None or proc.stdout is None:
            return
        for line in proc.stdout:
            self.tail.append(line)

    def pause(self, paused: bool) -> None:
        """Stop the child where it is (it keeps its memory and its half-read prompt) or let it
        go on: how memory's learning server gives its cores to a chat turn at once."""
        if self.running():
            assert self.proc is not None
            os.kill(self.proc.pid, signal.SIGSTOP if paused else signal.SIGCONT)

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.pause(False)
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
