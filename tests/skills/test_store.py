"""The SKILL.md format, discovery in SKILLS_DIR and the bundled skills, versions, rollback, archives.

Every bad input is refused with a message that names the problem, and what was saved before is untouched.
"""
from __future__ import annotations

import os
import re
import zipfile
from pathlib import Path
from typing import Any

import pytest

from skills_app.format import SkillFormatError, parse_skill
from skills_app.store import SkillNotFound, SkillStore, SkillStoreError
from skills_app.tree import (
    MAX_FILE_BYTES,
    MAX_FILES,
    MAX_SKILL_BYTES,
    check_tree,
    read_archive,
    read_folder,
    write_archive,
)
from tests.skills.conftest import make_skill, make_zip, skill_md

REPO_SKILLS = Path(__file__).resolve().parents[2] / "skills"


# -- the format --------------------------------------------------------------------------------


def test_a_full_skill_md_parses() -> None:
    doc = parse_skill(
        "---\nname: pdf-tools\ndescription: Extract text from PDFs. Use when handling PDFs.\nlicense: MIT\n"
        "compatibility: Needs poppler\nmetadata:\n  author: me\n  version: 2\nallowed-tools: filesystem code_exec\n"
        "x-custom: 1\n---\n\n# PDF tools\n\nSteps.\n", folder="pdf-tools")
    assert (doc.name, doc.description, doc.license, doc.compatibility) == (
        "pdf-tools", "Extract text from PDFs. Use when handling PDFs.", "MIT", "Needs poppler")
    assert doc.metadata == {"author": "me", "version": "2"} and doc.allowed_tools == ("filesystem", "code_exec")
    assert doc.body == "# PDF tools\n\nSteps."
    assert doc.warnings == ("unknown front matter field(s) x-custom kept but not used",)
    listed = parse_skill("---\nname: a\ndescription: d\nallowed-tools: [web_search, web_view]\n---\nbody")
    assert listed.allowed_tools == ("web_search", "web_view")


@pytest.mark.parametrize(("text", "message"), [
    ("# just markdown\n", "must start with YAML front matter"),
    ("---\nname: a\ndescription: d\n", "must start with YAML front matter"),
    ("---\nname: [unclosed\ndescription: d\n---\nbody", "is not valid YAML (line 3, column 12"),
    ("---\n- a\n- b\n---\nbody", "must be a YAML mapping"),
    ("---\ndescription: d\n---\nbody", "has no 'name' field"),
    ("---\nname: a\n---\nbody", "has no 'description' field"),
    ("---\nname: a\ndescription: '  '\n---\nbody", "'description' field is empty"),
    ("---\nname: a\ndescription: 12\n---\nbody", "'description' field must be text"),
    ("---\nname: Bad-Name\ndescription: d\n---\nbody", "the name 'Bad-Name' is not valid"),
    ("---\nname: bad--name\ndescription: d\n---\nbody", "not valid: use lowercase letters"),
    ("---\nname: -bad\ndescription: d\n---\nbody", "not valid"),
    ("---\nname: ../etc\ndescription: d\n---\nbody", "not valid"),
    (f"---\nname: {'a' * 65}\ndescription: d\n---\nbody", "65 characters long; at most 64"),
    (f"---\nname: a\ndescription: {'d' * 1025}\n---\nbody", "1025 characters long; at most 1024"),
    (f"---\nname: a\ndescription: d\ncompatibility: {'c' * 501}\n---\nbody", "at most 500"),
    ("---\nname: a\ndescription: d\nmetadata: just text\n---\nbody", "'metadata' field must be a mapping"),
    ("---\nname: a\ndescription: d\nallowed-tools: {x: 1}\n---\nbody", "'allowed-tools' field must be"),
    ("---\nname: a\ndescription: one\ndescription: two\n---\nbody",
     "the front matter of SKILL.md has 'description' twice (lines 3 and 4); keep one"),
    ("---\nname: a\nname: b\ndescription: d\n---\nbody", "has 'name' twice (lines 2 and 3)"),
    ("---\nname: a\ndescription: d\nmetadata:\n  k: 1\n  k: 2\n---\nbody", "has 'k' twice (lines 5 and 6)"),
])
def test_malformed_front_matter_is_refused_with_the_reason(text: str, message: str) -> None:
    with pytest.raises(SkillFormatError, match=re.escape(message)):
        parse_skill(text)


def test_the_name_must_match_the_folder() -> None:
    with pytest.raises(SkillFormatError, match="named 'a' but its folder is 'b'"):
        parse_skill("---\nname: a\ndescription: d\n---\n", folder="b")


def test_non_utf8_and_binary_text_is_refused() -> None:
    with pytest.raises(SkillFormatError, match="SKILL.md is not UTF-8 text .invalid byte 0xe9"):
        check_tree({"SKILL.md": skill_md("a").encode() + "caf\u00e9".encode("latin-1")})
    with pytest.raises(SkillFormatError, match="references/notes.md is not UTF-8"):
        check_tree({"SKILL.md": skill_md("a").encode(), "references/notes.md": b"\xff\xfe\x00x"})
    # binary assets are fine
    assert check_tree({"SKILL.md": skill_md("a").encode(), "assets/logo.png": b"\x89PNG\x00\xff"}).name == "a"


def test_every_bundled_skill_is_valid() -> None:
    scan = SkillStore(root=Path("/nonexistent"), bundled=REPO_SKILLS).scan()
    assert scan.broken == ()
    assert {"server-health-check", "morning-briefing", "reading-list"} <= set(scan.skills)
    health = scan.skills["server-health-check"]
    assert health.source == "bundled" and "references/thresholds.md" in health.files


# -- discovery -----------------------------------------------------------------------------------


def test_one_bad_skill_is_listed_with_its_reason_and_the_others_load(skills_root: Path, settings: Any) -> None:
    make_skill(skills_root, "good-one")
    make_skill(skills_root, "wrong-folder", folder="other-folder")
    bad = skills_root / "no-front"
    bad.mkdir()
    (bad / "SKILL.md").write_text("no front matter here")
    (skills_root / "empty-folder").mkdir()
    (skills_root / "latin1").mkdir()
    (skills_root / "latin1" / "SKILL.md").write_bytes(b"---\nname: latin1\ndescription: caf\xe9\n---\n")
    os.symlink(skills_root / "good-one", skills_root / "linked")
    (skills_root / "stray.txt").write_text("not a skill")
    scan = SkillStore().scan()
    assert list(scan.skills) == ["good-one"]
    reasons = {b.folder: b.error for b in scan.broken}
    assert set(reasons) == {"other-folder", "no-front", "empty-folder", "latin1", "linked"}
    assert "named 'wrong-folder' but its folder is 'other-folder'" in reasons["other-folder"]
    assert "must start with YAML front matter" in reasons["no-front"]
    assert "no SKILL.md" in reasons["empty-folder"]
    assert "not UTF-8" in reasons["latin1"]
    assert "symbolic link" in reasons["linked"]


def test_a_user_skill_replaces_the_bundled_one_of_the_same_name(skills_root: Path, settings: Any) -> None:
    make_skill(Path(settings.SKILLS_BUNDLED_DIR), "shared", description="Bundled version.")
    make_skill(Path(settings.SKILLS_BUNDLED_DIR), "only-bundled")
    make_skill(skills_root, "shared", description="My version.")
    scan = SkillStore().scan()
    assert scan.skills["shared"].source == "user" and scan.skills["shared"].description == "My version."
    assert scan.skills["shared"].replaces_bundled
    assert scan.skills["only-bundled"].source == "bundled"


def test_reading_files_stays_inside_the_skill(skills_root: Path) -> None:
    make_skill(skills_root, "refs", files={"references/a.md": "alpha", "assets/pic.png": b"\x89PNG\x00"})
    (skills_root / "secret.txt").write_text("top secret")
    store = SkillStore()
    assert store.read_file("refs", "references/a.md") == "alpha"
    for bad in ("../secret.txt", "/etc/passwd", "references/../../secret.txt"):
        with pytest.raises(SkillFormatError, match="'..'|absolute"):
            store.read_file("refs", bad)
    with pytest.raises(SkillNotFound, match="has no file 'references/b.md'; its files: assets/pic.png, references/a.md"):
        store.read_file("refs", "references/b.md")
    with pytest.raises(SkillFormatError, match="not a text file"):
        store.read_file("refs", "assets/pic.png")


def test_text_files_of_any_kind_can_be_read(skills_root: Path) -> None:
    """Skills written for other agents bring scripts and templates Navi has no suffix list entry for
    (Ruby, PowerShell, Jinja): skill_view reads every file that is UTF-8 text, not only known suffixes."""
    make_skill(skills_root, "polyglot", files={"scripts/check.rb": "puts `df -h`\n", "scripts/backup.ps1": "Get-Date\n",
                                               "assets/report.md.j2": "# {{ title }}\n", "assets/blob.bin": b"\x00\x01"})
    store = SkillStore()
    assert store.read_file("polyglot", "scripts/check.rb") == "puts `df -h`\n"
    assert store.read_file("polyglot", "scripts/backup.ps1") == "Get-Date\n"
    assert store.read_file("polyglot", "assets/report.md.j2") == "# {{ title }}\n"
    with pytest.raises(SkillFormatError, match="^assets/blob.bin is not a text file; only text files can be read$"):
        store.read_file("polyglot", "assets/blob.bin")


# -- versions --------------------------------------------------------------------------------------


def _files(name: str, body: str, **extra: bytes) -> dict[str, bytes]:
    return {"SKILL.md": skill_md(name, body=body).encode(), **extra}


def test_save_keeps_every_version_and_rollback_restores_one(skills_root: Path) -> None:
    store = SkillStore()
    v1 = store.save("notes", _files("notes", "first", **{"references/r.md": b"ref"}), source="install", by="alice")
    v2 = store.save("notes", _files("notes", "second"), source="proposal", by="alice", note="better")
    assert (v1.number, v2.number) == (1, 2)
    assert store.read_file("notes", "SKILL.md").endswith("second\n")
    assert store.get("notes").files == ()  # v2 has no reference file
    assert store.save("notes", _files("notes", "second"), source="proposal").number == 2  # same content: no-op
    v3 = store.rollback("notes", 1, by="bob")
    assert v3.number == 3 and v3.source == "rollback" and v3.note == "rolled back to version 1"
    assert store.read_file("notes", "SKILL.md").endswith("first\n") and store.get("notes").files == ("references/r.md",)
    assert [v.number for v in store.versions("notes")] == [1, 2, 3]
    assert store.current_version("notes") == 3
    with pytest.raises(SkillNotFound, match="no version 9"):
        store.rollback("notes", 9)


def test_hand_edits_are_kept_as_a_version_before_a_change(skills_root: Path) -> None:
    store = SkillStore()
    store.save("notes", _files("notes", "saved"), source="install")
    (skills_root / "notes" / "SKILL.md").write_text(skill_md("notes", body="edited by hand"))
    assert store.current_version("notes") is None
    store.save("notes", _files("notes", "from a proposal"), source="proposal")
    versions = store.versions("notes")
    assert [(v.number, v.source) for v in versions] == [(1, "install"), (2, "disk"), (3, "proposal")]
    assert store.version_files("notes", 2)["SKILL.md"].decode().endswith("edited by hand\n")


def test_an_invalid_save_changes_nothing(skills_root: Path) -> None:
    store = SkillStore()
    store.save("notes", _files("notes", "good"), source="install")
    before = read_folder(skills_root / "notes")
    for files, message in [
        ({"SKILL.md": b"no front matter"}, "front matter"),
        ({"SKILL.md": skill_md("other").encode()}, "named 'other' but its folder is 'notes'"),
        (_files("notes", "x", **{"big.md": b"x" * (MAX_FILE_BYTES + 1)}), "one file may be at most"),
    ]:
        with pytest.raises(SkillFormatError, match=message):
            store.save("notes", files, source="install")
    assert read_folder(skills_root / "notes") == before and len(store.versions("notes")) == 1


def test_remove_keeps_the_versions_and_uncovers_the_bundled_skill(skills_root: Path, settings: Any) -> None:
    make_skill(Path(settings.SKILLS_BUNDLED_DIR), "shared", description="Bundled version.")
    store = SkillStore()
    store.save("shared", {"SKILL.md": skill_md("shared", "Mine.").encode()}, source="proposal")
    store.remove("shared")
    assert store.get("shared").source == "bundled" and store.versions("shared")[0].source == "proposal"
    store.rollback("shared", 1)
    assert store.get("shared").description == "Mine."


# -- archives and folders -------------------------------------------------------------------------------


def test_export_and_import_round_trip(skills_root: Path) -> None:
    store = SkillStore()
    store.save("notes", _files("notes", "body", **{"scripts/run.py": b"print(1)\n"}), source="install")
    data = write_archive("notes", read_folder(skills_root / "notes"))
    names = zipfile.ZipFile(__import__("io").BytesIO(data)).namelist()
    assert names == ["notes/SKILL.md", "notes/scripts/run.py"]
    files, top = read_archive(data)
    assert top == "notes" and files == read_folder(skills_root / "notes")
    flat, top = read_archive(make_zip({"SKILL.md": skill_md("flat")}))
    assert top is None and check_tree(flat).name == "flat"


@pytest.mark.parametrize(("archive", "message"), [
    (b"this is not a zip", "is not a zip archive"),
    (make_zip({"/etc/evil/SKILL.md": "x"}), "is absolute"),
    (make_zip({"a/../../evil.md": "x", "a/SKILL.md": skill_md("a")}), "contains '..'"),
    (make_zip({"a\\SKILL.md": "x"}), "backslashes"),
    (make_zip({"a/SKILL.md": skill_md("a")}, symlinks={"a/link": "/etc/passwd"}), "symbolic link"),
    (make_zip({"readme.txt": "no skill"}), "has no SKILL.md"),
    (make_zip({"a/SKILL.md": skill_md("a"), "b/SKILL.md": skill_md("b")}),
     "^the archive holds 2 skills .a, b.; upload one skill per archive$"),
    (make_zip({"a/SKILL.md": skill_md("a"), "a/caf\u00e9.md": "x"}).replace("caf\u00e9".encode(), b"caf\xff\xfe"),
     "^the archive names a file in a way that is not UTF-8 although it says it is; pack it again with another tool$"),
    (make_zip({"a/SKILL.md": skill_md("a"), "a/huge.bin": b"\0" * (MAX_FILE_BYTES + 1)}), "one file may be at most"),
    (make_zip({f"a/f{i}.md": "x" for i in range(MAX_FILES + 1)} | {"a/SKILL.md": skill_md("a")}), "at most 200"),
    (make_zip({"a/SKILL.md": skill_md("a"), "a/notes": "x", "a/notes/more.md": "y"}),
     "has both a file and a folder named 'notes'"),
    (make_zip({"a/SKILL.md": skill_md("a"), "a/SKILL.md/x.md": "y"}), "both a file and a folder named 'SKILL.md'"),
    (make_zip({"a/SKILL.md": skill_md("a"), "a/" + "x" * 256 + ".md": "y"}), "is too long: one name in a path"),
    (make_zip({"a/SKILL.md": skill_md("a"), "a/" + "d/" * 2000 + "x.md": "y"}), "is nested too deeply"),
    (make_zip({"a/SKILL.md": skill_md("a"), "a/" + "abcdefghi/" * 15 + "x.md": "y"}), "is nested too deeply"),
    (make_zip({"a/SKILL.md": skill_md("a"), "a/two\nlines.md": "y"}), "contains a control character"),
])
def test_bad_archives_are_refused_with_the_reason(archive: bytes, message: str) -> None:
    with pytest.raises(SkillFormatError, match=message):
        files, top = read_archive(archive)
        check_tree(files, folder=top)


def test_a_save_the_disk_refuses_leaves_no_trace(skills_root: Path) -> None:
    store = SkillStore()
    store.save("a", {"SKILL.md": skill_md("a").encode()}, source="install")
    versions = skills_root / ".navi" / "versions"
    (versions / "b").write_text("a file where the versions folder of 'b' should be")
    with pytest.raises(SkillStoreError, match="could not write to the skills directory"):
        store.save("b", {"SKILL.md": skill_md("b").encode()}, source="install")
    assert not (skills_root / "b").exists() and store.read_file("a", "SKILL.md") == skill_md("a")
    assert list((skills_root / ".navi" / "tmp").iterdir()) == []  # the folder written aside is gone too


def test_a_zip_bomb_is_refused_before_and_while_unpacking() -> None:
    # Declared sizes past the limit: refused from the headers.
    bomb = make_zip({f"a/{i}.txt": b"\0" * (MAX_FILE_BYTES - 10) for i in range(6)} | {"a/SKILL.md": skill_md("a")})
    with pytest.raises(SkillFormatError, match="would unpack to .* zip bomb"):
        read_archive(bomb)
    # A header that lies about the size: never more than the declared bytes are unpacked, and the
    # mismatch is reported.
    honest = make_zip({"a/SKILL.md": skill_md("a"), "a/data.txt": b"\0" * (MAX_FILE_BYTES + 4096)})
    lying = _shrink_declared_size(honest, b"a/data.txt", 100)
    with pytest.raises(SkillFormatError, match="data.txt in the archive cannot be read .*headers do not tell the real sizes"):
        read_archive(lying)
    assert MAX_SKILL_BYTES < 6 * MAX_FILE_BYTES


def _shrink_declared_size(data: bytes, name: bytes, size: int) -> bytes:
    """Rewrite the uncompressed size of ``name`` in the local and central headers (a lying archive)."""
    import struct

    out = bytearray(data)
    for sig, size_at, name_len_at, name_at in ((b"PK\x03\x04", 22, 26, 30), (b"PK\x01\x02", 24, 28, 46)):
        start = 0
        while (pos := out.find(sig, start)) != -1:
            length = struct.unpack_from("<H", out, pos + name_len_at)[0]
            if bytes(out[pos + name_at: pos + name_at + length]) == name:
                struct.pack_into("<I", out, pos + size_at, size)
            start = pos + 4
    return bytes(out)


def test_folders_with_symlinks_or_too_much_are_refused(tmp_path: Path) -> None:
    folder = make_skill(tmp_path, "linked")
    os.symlink("/etc/passwd", folder / "passwd")
    with pytest.raises(SkillFormatError, match="passwd is a symbolic link"):
        read_folder(folder)
    big = make_skill(tmp_path, "big", files={"a.bin": b"\0" * (MAX_FILE_BYTES + 1)})
    with pytest.raises(SkillFormatError, match="a.bin is 1,048,577 bytes; one file may be at most 1,048,576 bytes$"):
        read_folder(big)  # not "1.0 MB; at most 1.0 MB"
    bigger = make_skill(tmp_path, "bigger", files={"a.bin": b"\0" * (3 * MAX_FILE_BYTES // 2)})
    with pytest.raises(SkillFormatError, match="a.bin is 1.5 MB; one file may be at most 1.0 MB$"):
        read_folder(bigger)


def test_the_documented_example_is_a_valid_skill() -> None:
    import re

    text = (REPO_SKILLS.parent / "docs" / "skills.md").read_text(encoding="utf-8")
    example = re.search(r"`plant-watering/SKILL.md`:\n\n```markdown\n(.*?)```", text, re.S)
    assert example is not None
    doc = parse_skill(example.group(1), folder="plant-watering")
    assert doc.description.startswith("Water the balcony plants on schedule and keep a log. Use when")
    assert doc.metadata == {"author": "me"} and doc.body.startswith("# Plant watering")


def test_a_file_name_that_is_not_utf8_breaks_only_its_own_skill(skills_root: Path) -> None:
    """A name the disk holds as raw bytes (Python sees surrogates) is refused with a readable reason;
    the other skills still load and every message can be printed and sent as UTF-8."""
    make_skill(skills_root, "good-one")
    odd = make_skill(skills_root, "odd-name")
    (odd / os.fsdecode(b"notes-\xff.md")).write_text("x")
    make_skill(skills_root, "odd-folder", folder=os.fsdecode(b"caf\xe9"))
    scan = SkillStore().scan()
    assert list(scan.skills) == ["good-one"]
    reasons = {b.folder: b.error for b in scan.broken}
    assert reasons["odd-name"] == ("the file name 'notes-\ufffd.md' is not UTF-8 text; rename it "
                                   "(a skill's file names are UTF-8)")
    assert reasons["caf\ufffd"] == "the folder name 'caf\ufffd' is not UTF-8 text; rename it like the skill"
    for broken in scan.broken:
        (broken.folder + broken.error + str(broken.path)).encode("utf-8")  # no surrogates left to print
    with pytest.raises(SkillFormatError, match=r"the file name 'notes-\ufffd.md' is not UTF-8 text"):
        read_folder(odd)
