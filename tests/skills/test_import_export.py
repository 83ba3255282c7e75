"""Import and export: the /skills API (upload, export, enable, versions, rollback, remove) and
``manage.py skills list|install|export|check``. Bad input is refused with the reason; what was
installed before is untouched."""
from __future__ import annotations

import io
import zipfile
from pathlib import Path
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command
from django.core.management.base import CommandError

from profiles_app.models import AgentProfile
from skills_app.store import SkillStore
from skills_app.tree import read_folder
from tests.skills.conftest import make_skill, make_zip, skill_md

pytestmark = pytest.mark.django_db


def _upload(api: Any, data: bytes, name: str = "skill.zip", **fields: str) -> Any:
    return api.client.post("/skills", {"file": SimpleUploadedFile(name, data, "application/zip"), **fields})


def test_list_and_detail_show_skills_broken_folders_and_profiles(api: Any, skills_root: Path, settings: Any) -> None:
    make_skill(Path(settings.SKILLS_BUNDLED_DIR), "bundled-one", description="From the source tree.",
               files={"references/r.md": "ref"})
    make_skill(skills_root, "mine", description="My own.", body="# Mine\n\nStep.")
    (skills_root / "broken").mkdir()
    (skills_root / "broken" / "SKILL.md").write_text("---\nname: broken\n---\n")
    AgentProfile.objects.filter(pk="secretary").update(enabled_skills=["mine"])
    data = api.get("/skills").json()
    assert [(s["name"], s["source"]) for s in data["skills"]] == [("bundled-one", "bundled"), ("mine", "user")]
    assert data["skills"][1]["enabled_in"] == ["secretary"]
    assert data["broken"] == [{"folder": "broken", "source": "user", "path": str(skills_root / "broken"),
                               "error": "the front matter has no 'description' field; add 'description: ...' (it is required)"}]
    assert data["can_manage"] is True
    detail = api.get("/skills/mine").json()
    assert detail["body"] == "# Mine\n\nStep." and detail["content"].startswith("---\nname: mine\n")
    assert api.get("/skills/bundled-one/file", data={"path": "references/r.md"}).json()["text"] == "ref"
    missing = api.get("/skills/nope")
    assert missing.status_code == 404 and missing.json()["detail"] == "There is no skill named 'nope'."
    bad_path = api.get("/skills/bundled-one/file", data={"path": "../mine/SKILL.md"})
    assert bad_path.status_code == 400 and "contains '..'" in bad_path.json()["detail"]


def test_upload_installs_enables_and_exports_the_same_files(api: Any, skills_root: Path, settings: Any) -> None:
    archive = make_zip({"report/SKILL.md": skill_md("report", "Weekly report."),
                        "report/scripts/run.py": "print('hi')\n"})
    response = _upload(api, archive, "report.skill", enable_for="secretary,server_admin")
    assert response.status_code == 201 and response.json() == {"name": "report", "version": 1}
    assert AgentProfile.objects.get(pk="server_admin").enabled_skills[-1] == "report"
    exported = api.get("/skills/report/export")
    assert exported["Content-Disposition"] == 'attachment; filename="report.zip"'
    names = sorted(zipfile.ZipFile(io.BytesIO(exported.content)).namelist())
    assert names == ["report/SKILL.md", "report/scripts/run.py"]
    # The same name again is a conflict unless it is meant as the next version.
    again = _upload(api, archive)
    assert again.status_code == 409 and "already exists" in again.json()["detail"]
    bundled = make_zip({"tips/SKILL.md": skill_md("tips", "My tips.")})
    make_skill(Path(settings.SKILLS_BUNDLED_DIR), "tips", description="Bundled tips.")
    clash = _upload(api, bundled)
    assert clash.status_code == 409 and clash.json()["detail"].startswith("A bundled skill is named 'tips'; install with replace")
    assert _upload(api, bundled, replace="true").json() == {"name": "tips", "version": 1}
    newer = make_zip({"report/SKILL.md": skill_md("report", "Weekly report, better.")})
    assert _upload(api, newer, replace="true").json() == {"name": "report", "version": 2}
    versions = api.get("/skills/report").json()["versions"]
    assert [(v["number"], v["source"], v["by"]) for v in versions] == [(2, "install", "alice"), (1, "install", "alice")]
    old = api.get("/skills/report/versions/1").json()
    assert old["files"] == ["scripts/run.py"] and "Weekly report." in old["content"]


@pytest.mark.parametrize(("archive", "message"), [
    (b"PK\x03\x04 not really", "is not a zip archive"),
    (make_zip({"../evil/SKILL.md": skill_md("evil")}), "contains '..'"),
    (make_zip({"/abs/SKILL.md": skill_md("abs")}), "is absolute"),
    (make_zip({"x/SKILL.md": skill_md("x")}, symlinks={"x/link": "/etc/passwd"}), "symbolic link"),
    (make_zip({"x/SKILL.md": "---\nname: x\ndescription: [broken\n---\n"}), "not valid YAML"),
    (make_zip({"x/SKILL.md": skill_md("y")}), "named 'y' but its folder is 'x'"),
    (make_zip({"x/SKILL.md": b"---\nname: x\ndescription: caf\xe9\n---\n"}), "is not UTF-8 text"),
    (make_zip({"x/SKILL.md": skill_md("x"), "x/a": "1", "x/a/b.md": "2"}), "both a file and a folder named 'a'"),
    (make_zip({"x/SKILL.md": skill_md("x"), "x/" + "n" * 300: "1"}), "is too long"),
])
def test_bad_uploads_are_refused_and_nothing_changes(api: Any, skills_root: Path, archive: bytes, message: str) -> None:
    SkillStore().save("keep", {"SKILL.md": skill_md("keep").encode()}, source="install")
    before = read_folder(skills_root / "keep")
    response = _upload(api, archive)
    assert response.status_code == 400 and response.json()["detail"].startswith("The skill was not installed: ")
    assert message in response.json()["detail"]
    assert sorted(p.name for p in skills_root.iterdir()) == [".navi", "keep"] and read_folder(skills_root / "keep") == before


def test_an_oversized_upload_is_413_and_non_staff_may_not_install(api: Any, other_api: Any, skills_root: Path,
                                                                  settings: Any) -> None:
    settings.SKILLS_UPLOAD_MAX_MB = 0.01
    big = _upload(api, b"PK" + b"\0" * 20_000)
    assert big.status_code == 413 and "larger than 0.01 MB (SKILLS_UPLOAD_MAX_MB)" in big.json()["detail"]
    # The limit holds for the whole request: many files each under it are not kept in memory either.
    parts = {f"file{i}": SimpleUploadedFile(f"s{i}.zip", b"PK" + b"\0" * 4000) for i in range(4)}
    many = api.client.post("/skills", {"file": SimpleUploadedFile("s.zip", b"PK" + b"\0" * 4000), **parts})
    assert many.status_code == 413 and "larger than 0.01 MB" in many.json()["detail"]
    settings.SKILLS_UPLOAD_MAX_MB = 5
    denied = _upload(other_api, make_zip({"x/SKILL.md": skill_md("x")}))
    assert denied.status_code == 403 and denied.json()["detail"] == "Only staff users may install skills; ask an administrator."
    assert other_api.get("/skills").json()["can_manage"] is False


def test_enable_disable_rollback_and_remove(api: Any, other_api: Any, skills_root: Path, settings: Any) -> None:
    make_skill(Path(settings.SKILLS_BUNDLED_DIR), "tips", description="Bundled tips.")
    store = SkillStore()
    store.save("tips", {"SKILL.md": skill_md("tips", "My tips v1.").encode()}, source="install")
    store.save("tips", {"SKILL.md": skill_md("tips", "My tips v2.").encode()}, source="install")
    on = api.client.put("/skills/tips/profiles/smart_home", data={"enabled": True}, content_type="application/json")
    assert on.json()["enabled_skills"][-1] == "tips"
    off = api.client.put("/skills/tips/profiles/smart_home", data={"enabled": False}, content_type="application/json")
    assert "tips" not in off.json()["enabled_skills"]
    forbidden = other_api.client.put("/skills/tips/profiles/smart_home", data={"enabled": True},
                                     content_type="application/json")
    assert forbidden.status_code == 403
    assert other_api.post("/skills/tips/rollback", {"version": 1}).status_code == 403
    assert api.post("/skills/tips/rollback", {"version": 7}).json()["detail"] == "The skill 'tips' has no version 7."
    assert api.post("/skills/tips/rollback", {"version": 1}).json() == {"name": "tips", "version": 3}
    assert store.get("tips").description == "My tips v1."
    assert other_api.delete("/skills/tips").status_code == 403
    assert api.delete("/skills/tips").json() == {"ok": True}
    assert store.get("tips").source == "bundled"  # the bundled one shows again; the versions stay
    assert [v["number"] for v in api.get("/skills/tips").json()["versions"]] == [3, 2, 1]
    bundled = api.delete("/skills/tips")  # it is there (the bundled one): not "no skill named 'tips'"
    assert bundled.status_code == 409 and bundled.json()["detail"] == (
        "'tips' is a bundled skill: it cannot be removed. Disable it for the profiles that list it, or install "
        "your own version of it (replace).")
    assert api.delete("/skills/nope").json()["detail"] == "There is no skill named 'nope'."


def test_an_unwritable_skills_directory_is_reported_with_its_path(api: Any, tmp_path: Path, settings: Any) -> None:
    settings.SKILLS_DIR = tmp_path / "not-a-dir"
    settings.SKILLS_DIR.write_text("a file where the directory should be")
    response = _upload(api, make_zip({"x/SKILL.md": skill_md("x")}))
    assert response.status_code == 500
    assert response.json()["detail"].startswith(f"Navi could not write to the skills directory {settings.SKILLS_DIR} (")


# -- manage.py skills ------------------------------------------------------------------------------


def _run(*args: str) -> str:
    out = io.StringIO()
    call_command("skills", *args, stdout=out)
    return out.getvalue()


def test_command_install_list_export_and_check(skills_root: Path, tmp_path: Path, db: Any) -> None:
    from tests.support.users import make_user

    make_user("admin", staff=True)  # installs the default profiles
    source = make_skill(tmp_path / "src", "garden-log", description="Log what was planted.",
                        files={"references/plants.md": "tomato"})
    assert _run("install", str(source), "--enable", "secretary") == (
        "Installed garden-log as version 1; listed in: secretary.\n")
    with pytest.raises(CommandError, match="already exists; .*pass --replace"):
        _run("install", str(source))
    listing = _run("list")
    assert "garden-log  [user, version 1]  profiles: secretary\n    Log what was planted." in listing
    out = tmp_path / "out.zip"
    assert _run("export", "garden-log", "-o", str(out)).startswith(f"Wrote {out}")
    assert sorted(zipfile.ZipFile(out).namelist()) == ["garden-log/SKILL.md", "garden-log/references/plants.md"]
    assert "INVALID" not in _run("check")
    assert _run("check", str(out)) == f"ok {out}: garden-log\n"
    bad = tmp_path / "bad-skill"
    bad.mkdir()
    (bad / "SKILL.md").write_text("---\nname: other-name\ndescription: d\n---\n")
    with pytest.raises(CommandError, match="1 skill.s. are invalid"):
        _run("check", str(bad))
    with pytest.raises(CommandError, match="The skill was not installed: the skill is named 'other-name' but its folder"):
        _run("install", str(bad))
    with pytest.raises(CommandError, match="there is no skill named 'nope'"):
        _run("export", "nope")
    (skills_root / "broken").mkdir()
    with pytest.raises(CommandError, match="1 skill.s. are invalid"):
        _run("check")


def test_admin_lists_skills_and_rolls_back_in_one_click(user: Any, skills_root: Path, client: Any) -> None:
    store = SkillStore()
    store.save("tips", {"SKILL.md": skill_md("tips", "Tips v1.").encode()}, source="install")
    store.save("tips", {"SKILL.md": skill_md("tips", "Tips v2.").encode()}, source="install")
    client.force_login(user)
    page = client.get("/admin/skills_app/skillproposal/")
    assert page.status_code == 200
    html = page.content.decode()
    assert 'data-skill="tips"' in html and "Roll back to v1" in html and "(current)" in html
    done = client.post("/admin/skills_app/skillproposal/rollback/", {"name": "tips", "version": "1"})
    assert done.status_code == 302 and store.get("tips").description == "Tips v1."
    assert store.current_version("tips") == 3
    bad = client.post("/admin/skills_app/skillproposal/rollback/", {"name": "tips", "version": "9"}, follow=True)
    assert "The skill &#x27;tips&#x27; has no version 9." in bad.content.decode()


def test_command_refuses_links_odd_names_and_unwritable_outputs_with_the_reason(skills_root: Path, tmp_path: Path,
                                                                                db: Any) -> None:
    """No traceback for a user's mistake: each is a CommandError that names the problem."""
    import os

    source = make_skill(tmp_path / "src", "garden-log")
    link = tmp_path / "src" / "garden-link"
    os.symlink(source, link)
    with pytest.raises(CommandError, match=f"{link} is a symbolic link; give the real folder"):
        _run("install", str(link))
    out = io.StringIO()
    with pytest.raises(CommandError, match="1 skill.s. are invalid"):
        call_command("skills", "check", str(link), stdout=out)
    assert out.getvalue() == f"INVALID {link}: {link} is a symbolic link; give the real folder\n"
    odd = make_skill(tmp_path / "src", "odd-names")
    (odd / os.fsdecode(b"notes-\xff.md")).write_text("x")
    with pytest.raises(CommandError, match="the file name 'notes-\ufffd.md' is not UTF-8 text"):
        _run("install", str(odd))
    (skills_root / "odd-names").mkdir()
    (skills_root / "odd-names" / os.fsdecode(b"caf\xe9.md")).write_text("x")
    with pytest.raises(CommandError, match="1 skill.s. are invalid"):
        _run("check")
    assert "BROKEN user folder odd-names: " in _run("list")
    _run("install", str(source))
    with pytest.raises(CommandError, match=f"could not write {tmp_path / 'no-such-dir' / 'out.zip'} .No such file"):
        _run("export", "garden-log", "-o", str(tmp_path / "no-such-dir" / "out.zip"))


def test_enabling_for_a_profile_that_does_not_exist_installs_nothing(api: Any, skills_root: Path, db: Any) -> None:
    response = _upload(api, make_zip({"report/SKILL.md": skill_md("report")}), enable_for="secretary,secretray")
    detail = response.json()["detail"]
    assert response.status_code == 400 and detail.startswith(
        "The skill was not installed: there is no profile 'secretray'. Profiles: ") and "secretary" in detail
    with pytest.raises(CommandError, match="there is no profile 'nope'"):
        _run("install", str(make_skill(skills_root.parent / "src", "report")), "--enable", "nope")
    assert sorted(p.name for p in skills_root.iterdir()) == []
    assert "report" not in AgentProfile.objects.get(pk="secretary").enabled_skills


def test_the_profile_admin_refuses_a_skill_that_is_not_installed(user: Any, skills_root: Path) -> None:
    """Enabling per profile in the admin: a typo is an error naming it and the installed skills, not a
    name silently never listed; a name already listed (a skill removed since) does not block other edits."""
    from django.contrib import admin
    from django.test import RequestFactory

    make_skill(skills_root, "tips")
    make_skill(skills_root, "garden-log")
    profile = AgentProfile.objects.get(pk="secretary")
    profile.enabled_skills = ["removed-since"]
    profile.save()
    request = RequestFactory().get("/admin/")
    request.user = user
    model_admin = admin.site._registry[AgentProfile]
    form_class = model_admin.get_form(request, profile, change=True)
    assert "Installed skills: garden-log, tips." in form_class.base_fields["enabled_skills"].help_text
    blank = form_class(instance=profile)
    data = {name: blank[name].value() for name in blank.fields}
    data["enabled_skills"] = '["removed-since", "tips", "tipz"]'
    form = form_class(data, instance=profile)
    assert not form.is_valid()
    assert form.errors["enabled_skills"] == [
        "There is no skill named 'tipz'. Installed skills: garden-log, tips (or \"*\" for all of them)."]
    data["enabled_skills"] = '["removed-since", "tips"]'
    ok = form_class(data, instance=profile)
    assert ok.is_valid(), ok.errors
    data["enabled_skills"] = '["*"]'
    assert form_class(data, instance=profile).is_valid()


def test_a_removed_skill_is_listed_with_its_versions_and_can_be_restored(api: Any, user: Any, skills_root: Path,
                                                                        client: Any) -> None:
    """Remove says its versions are kept for a later rollback: the page, the admin and the command show
    them, and one rollback brings the skill back."""
    store = SkillStore()
    store.save("tips", {"SKILL.md": skill_md("tips", "Tips v1.").encode()}, source="install")
    store.save("tips", {"SKILL.md": skill_md("tips", "Tips v2.").encode()}, source="install")
    assert api.get("/skills").json()["removed"] == []
    assert api.delete("/skills/tips").json() == {"ok": True}
    data = api.get("/skills").json()
    assert "tips" not in [s["name"] for s in data["skills"]]
    assert data["removed"] == [{"name": "tips", "versions": 2, "latest": 2, "description": "Tips v2."}]
    assert "REMOVED tips  (2 versions kept; restore one on the skills page)" in _run("list")
    client.force_login(user)
    html = client.get("/admin/skills_app/skillproposal/").content.decode()
    assert 'data-skill="tips"' in html and "removed" in html and "Roll back to v1" in html
    assert api.post("/skills/tips/rollback", {"version": 2}).json() == {"name": "tips", "version": 3}
    assert store.get("tips").description == "Tips v2." and api.get("/skills").json()["removed"] == []
