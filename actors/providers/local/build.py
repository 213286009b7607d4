"""Installing the local model runtime: llama-cpp-python, built from source once, reused after.

There is no llama-cpp-python wheel for this platform (the prebuilt ones need glibc 2.38), so it
is compiled: ~4 minutes on 2 cores without the multimodal part. The wheel lands in a wheels
folder in the data folder (and pip's own wheel cache), so it is built once per machine and a
later install takes seconds. Progress comes from the build's own "[n/N]" steps.

`python -m actors.providers.local.build [--models NAME ...] [--models-dir DIR]` does it with a
progress line in a terminal (the Makefile's `install-test` runs it). No Ray import.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from actors.common.errors import IriisError
from actors.providers.local.catalog import CATALOG, choose
from actors.providers.local.weights import WeightsError, ensure_weights
from actors.settings import load_settings

VERSION = "0.3.36"
REQUIREMENT = f"llama-cpp-python=={VERSION}"
CMAKE_ARGS = "-DGGML_NATIVE=OFF -DLLAVA_BUILD=OFF"
_STEP = re.compile(r"\[(\d+)/(\d+)\]")

Progress = Callable[[str, str], None]


class BuildError(IriisError):
    """llama-cpp-python could not be built or installed; the message says why in one line."""

    code = "build_failed"


def runtime_ready(python: str = sys.executable) -> bool:
    """The runtime and its server import in `python` (a subprocess: a half-installed native
    library must not take this process down)."""
    done = subprocess.run([python, "-c", "import llama_cpp, llama_cpp.server.app"], capture_output=True)
    return done.returncode == 0


def find_wheel(wheels_dir: Path) -> Path | None:
    found = sorted(wheels_dir.glob(f"llama_cpp_python-{VERSION}-*.whl"))
    return found[-1] if found else None


def _nice() -> None:  # pragma: no cover - runs in the child
    os.nice(10)


def build_wheel(wheels_dir: Path, progress: Progress, python: str = sys.executable,
                log_path: Path | None = None) -> Path:
    """Compile the wheel into `wheels_dir`, reporting "step n of N" as ninja goes."""
    wheels_dir.mkdir(parents=True, exist_ok=True)
    log_path = log_path or wheels_dir / "llama-build.log"
    env = {**os.environ, "CMAKE_ARGS": os.environ.get("CMAKE_ARGS", CMAKE_ARGS),
           "CMAKE_BUILD_PARALLEL_LEVEL": os.environ.get("CMAKE_BUILD_PARALLEL_LEVEL", str(os.cpu_count() or 2))}
    started = time.monotonic()
    progress("build", "compiling llama.cpp (about 4 minutes on 2 cores)")
    with log_path.open("w") as log:
        proc = subprocess.Popen([python, "-m", "pip", "wheel", "--no-deps", "-v", "--disable-pip-version-check",
                                 REQUIREMENT, "-w", str(wheels_dir)], stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True, env=env, preexec_fn=_nice)
        assert proc.stdout is not None
        for line in proc.stdout:
            log.write(line)
            match = _STEP.search(line)
            if match:
                minutes = (time.monotonic() - started) / 60
                progress("build", f"compiling llama.cpp: step {match.group(1)} of {match.group(2)}, "
                                  f"{minutes:.1f} min")
        code = proc.wait()
    wheel = find_wheel(wheels_dir)
    if code != 0 or wheel is None:
        tail = [ln.strip() for ln in log_path.read_text(errors="replace").splitlines() if ln.strip()][-1:]
        raise BuildError(f"building {REQUIREMENT} failed ({tail[0][:160] if tail else 'no output'}); "
                         f"log: {log_path}")
    return wheel


def ensure_runtime(wheels_dir: Path, progress: Progress, python: str = sys.executable) -> None:
    """llama-cpp-python with its server importable in `python`: installed from the cached
    wheel, or built first."""
    if runtime_ready(python):
        return
    wheel = find_wheel(wheels_dir) or build_wheel(wheels_dir, progress, python)
    progress("install", f"installing {wheel.name}")
    done = subprocess.run([python, "-m", "pip", "install", "-q", "--disable-pip-version-check",
                           f"{wheel}[server]"], capture_output=True, text=True)
    if done.returncode != 0 or not runtime_ready(python):
        tail = (done.stderr or done.stdout or "").strip().splitlines()[-1:] or ["it does not import"]
        raise BuildError(f"installing {wheel.name} failed: {tail[0][:200]}")


def _terminal(stage: str, detail: str) -> None:
    print(f"\ririis-local: {stage}: {detail}".ljust(100)[:100], end="", flush=True)


def main(argv: list[str] | None = None) -> int:
    settings = load_settings()
    parser = argparse.ArgumentParser(description="build the local model runtime and fetch model weights")
    parser.add_argument("--models", nargs="*", default=[], choices=sorted(CATALOG))
    parser.add_argument("--models-dir", type=Path, default=None)
    parser.add_argument("--wheels-dir", type=Path, default=settings.iriis_home / "wheels")
    args = parser.parse_args(argv)
    started = time.monotonic()
    try:
        ensure_runtime(args.wheels_dir, _terminal)
        for name in args.models:
            ensure_weights(choose(name, False), args.models_dir or settings.iriis_home / "models", _terminal)
    except (BuildError, WeightsError) as exc:
        print(f"\niriis-local: {exc}", file=sys.stderr)
        return 1
    print(f"\niriis-local: ready ({time.monotonic() - started:.0f} s)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
