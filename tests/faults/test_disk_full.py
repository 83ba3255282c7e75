"""The disk fills up during an upload (a 512 KB tmpfs as the session-files directory): the client
gets a clear 507, nothing partial stays on disk, what was saved before is intact, and the next
upload that fits works."""
from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def small_disk(tmp_path: Path, settings: Any) -> Iterator[Path]:
    mount = tmp_path / "files"
    mount.mkdir()
    made = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=512k", "tmpfs", str(mount)],
                          capture_output=True, text=True)
    if made.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here: {made.stderr.strip()}")
    settings.SESSION_FILES_DIR = mount
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def _upload(api: Any, sid: str, name: str, data: bytes) -> Any:
    return api.client.post(f"/sessions/{sid}/files", data={"file": SimpleUploadedFile(name, data)})


def test_upload_on_a_full_disk(api: Any, user: Any, small_disk: Path) -> None:
    from sessions_app import services
    from sessions_app.models import SessionFile

    sid = str(services.session_create(owner=user).id)
    kept = _upload(api, sid, "kept.txt", b"saved before the disk filled")
    assert kept.status_code == 201, kept.content
    resp = _upload(api, sid, "big.bin", os.urandom(2 * 1024 * 1024))
    assert resp.status_code == 507, resp.content
    assert "disk is full" in resp.json()["detail"] and "upload it again" in resp.json()["detail"]
    on_disk = sorted(p.name for p in small_disk.rglob("*") if p.is_file())
    assert len(on_disk) == 1 and on_disk[0].endswith("_kept.txt")  # nothing partial left
    assert Path(kept.json()["path"]).read_bytes() == b"saved before the disk filled"
    assert SessionFile.objects.count() == 1
    again = _upload(api, sid, "small.txt", b"fits")
    assert again.status_code == 201, again.content
    assert [f["name"] for f in api.get(f"/sessions/{sid}/files").json()] == ["kept.txt", "small.txt"]
