"""``manage.py skills list|install|export|check``: the skill store from the command line.

    manage.py skills list                      every skill, where it comes from, its version and profiles
    manage.py skills check [PATH ...]          validate skill folders/archives (default: every skill); exit 1 on problems
    manage.py skills install PATH [--replace] [--enable PROFILE,...]   a folder, .zip or .skill file
    manage.py skills export NAME [-o FILE]     write NAME.zip (one folder named like the skill)

Install and export work on ``SKILLS_DIR`` like the web page does; the command runs as the
administrator of the machine, so it needs no Navi account.
"""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from navi_site.errors import Conflict, NaviError
from skills_app.format import SkillFormatError
from skills_app.selectors import skill_export
from skills_app.services import skill_install
from skills_app.store import SkillNotFound, get_store
from skills_app.tree import Files, check_tree, read_archive, read_folder


def _read_source(path: Path) -> tuple[Files, str | None]:
    """The files of a skill folder or archive, and the folder name the skill must match."""
    if path.is_dir():
        return read_folder(path), path.name  # refuses a link to a folder, and links inside it
    if not path.exists():
        raise SkillFormatError(f"{path} does not exist")
    try:
        if path.stat().st_size > 50 * 1024 * 1024:
            raise SkillFormatError(f"{path} is larger than 50 MB; that is not a skill archive")
        data = path.read_bytes()
    except OSError as exc:
        raise SkillFormatError(f"{path} cannot be read ({exc.strerror or exc})") from None
    return read_archive(data, what=str(path))


class Command(BaseCommand):
    help = "List, check, install and export skills (SKILL.md folders)."

    def add_arguments(self, parser: CommandParser) -> None:
        sub = parser.add_subparsers(dest="action", required=True)
        sub.add_parser("list", help="List every skill and every broken skill folder.")
        check = sub.add_parser("check", help="Validate skills; exit status 1 when one is invalid.")
        check.add_argument("paths", nargs="*", help="Skill folders or archives (default: every installed skill).")
        install = sub.add_parser("install", help="Install a skill from a folder or a .zip/.skill archive.")
        install.add_argument("path")
        install.add_argument("--replace", action="store_true", help="Save it as a new version of an existing skill.")
        install.add_argument("--enable", default="", help="Comma-separated profile ids to list it in.")
        export = sub.add_parser("export", help="Write a skill as a zip archive.")
        export.add_argument("name")
        export.add_argument("-o", "--output", help="Output file (default: ./<name>.zip; '-' for stdout).")

    def handle(self, *args: Any, **options: Any) -> None:
        action = options["action"]
        getattr(self, f"_{action}")(options)

    # ------------------------------------------------------------------ actions
    def _list(self, options: dict[str, Any]) -> None:
        from profiles_app.models import AgentProfile

        store = get_store()
        scan = store.scan()
        profiles = list(AgentProfile.objects.values_list("id", "enabled_skills"))
        self.stdout.write(f"Skills directory: {store.root}  (bundled: {store.bundled})")
        if not scan.skills:
            self.stdout.write("No skills.")
        for name, skill in scan.skills.items():
            version = store.current_version(name)
            where = "bundled" if skill.source == "bundled" else f"user, version {version or 'edited by hand'}"
            if skill.replaces_bundled:
                where += ", replaces the bundled one"
            listed = [pid for pid, names in profiles if name in (names or []) or "*" in (names or [])]
            self.stdout.write(f"{name}  [{where}]  profiles: {', '.join(listed) or 'none'}")
            self.stdout.write(f"    {skill.description}")
        for name, versions in store.removed(scan):
            self.stdout.write(f"REMOVED {name}  ({len(versions)} version{'s' if len(versions) != 1 else ''} kept; "
                              "restore one on the skills page)")
        for broken in scan.broken:
            self.stdout.write(self.style.ERROR(f"BROKEN {broken.source} folder {broken.folder}: {broken.error}"))

    def _check(self, options: dict[str, Any]) -> None:
        problems = 0
        if options["paths"]:
            for raw in options["paths"]:
                try:
                    files, folder = _read_source(Path(raw))
                    doc = check_tree(files, folder=folder)
                except SkillFormatError as exc:
                    problems += 1
                    self.stdout.write(self.style.ERROR(f"INVALID {raw}: {exc}"))
                    continue
                self.stdout.write(f"ok {raw}: {doc.name}" + "".join(f" (warning: {w})" for w in doc.warnings))
        else:
            scan = get_store().scan()
            for name, skill in scan.skills.items():
                warnings = "".join(f" (warning: {w})" for w in skill.doc.warnings)
                self.stdout.write(f"ok {name} [{skill.source}]{warnings}")
            for broken in scan.broken:
                problems += 1
                self.stdout.write(self.style.ERROR(f"INVALID {broken.path}: {broken.error}"))
        if problems:
            raise CommandError(f"{problems} skill(s) are invalid (see above); they are skipped until fixed.")

    def _install(self, options: dict[str, Any]) -> None:
        path = Path(options["path"]).expanduser()
        enabled = [p.strip() for p in options["enable"].split(",") if p.strip()]
        try:
            files, folder = _read_source(path)
            name, version = skill_install(user=None, files=files, folder=folder, replace=options["replace"],
                                          enable_for=enabled)
        except SkillFormatError as exc:
            raise CommandError(f"The skill was not installed: {exc}") from None
        except NaviError as exc:
            hint = " (pass --replace to save it as the next version)" if isinstance(exc, Conflict) else ""
            raise CommandError(exc.message + hint) from None
        note = f"; listed in: {', '.join(enabled)}" if enabled else "; enable it for a profile on the skills page"
        self.stdout.write(self.style.SUCCESS(f"Installed {name} as version {version.number}{note}."))

    def _export(self, options: dict[str, Any]) -> None:
        name = options["name"]
        try:
            data = skill_export(name=name)
        except SkillNotFound as exc:
            raise CommandError(f"{exc}; see `manage.py skills list`") from None
        except SkillFormatError as exc:
            raise CommandError(f"The skill {name!r} cannot be exported: {exc}") from None
        output = options.get("output") or f"{name}.zip"
        if output == "-":
            sys.stdout.buffer.write(data)
            return
        try:
            Path(output).write_bytes(data)
        except OSError as exc:
            raise CommandError(f"Navi could not write {output} ({exc.strerror or exc}); choose another file with -o") from None
        self.stdout.write(self.style.SUCCESS(f"Wrote {output} ({len(data)} bytes)."))
