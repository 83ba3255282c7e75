"""The open SKILL.md format (agentskills.io specification): parsing and validation.

A skill is a folder named like the skill, holding ``SKILL.md``: YAML front matter between two
``---`` lines, then Markdown instructions. The front matter has ``name`` (1-64 characters,
lowercase letters, digits and single hyphens, not at either end; equal to the folder's name) and
``description`` (1-1024 characters, what the skill does and when to use it), optionally
``license``, ``compatibility`` (at most 500 characters), ``metadata`` (a string-to-string map) and
``allowed-tools`` (a space-separated string or a list of strings; recorded, not enforced: every tool
call still passes the normal permission rules). Other keys are kept and reported as warnings, so
skills written for other agents still install.

Everything here is pure (no files, no Django): the store reads the bytes, this checks them.
Every problem raises ``SkillFormatError`` with a message that names the field and what to do.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import yaml

SKILL_FILE = "SKILL.md"
MAX_NAME = 64
MAX_DESCRIPTION = 1024
MAX_COMPATIBILITY = 500
KNOWN_FIELDS = ("name", "description", "license", "compatibility", "metadata", "allowed-tools")
NAME_RE = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")
# The front matter is the first lines of the file between two "---" lines.
_FRONT = re.compile(r"\A(?:\ufeff)?---[ \t]*\r?\n(.*?)^---[ \t]*(?:\r?\n|\Z)", re.S | re.M)


class SkillFormatError(ValueError):
    """A SKILL.md (or its folder) does not follow the format; the message says what to fix."""


@dataclass(frozen=True, slots=True, kw_only=True)
class SkillDoc:
    """One parsed SKILL.md."""

    name: str
    description: str
    body: str
    license: str = ""
    compatibility: str = ""
    metadata: dict[str, str] = field(default_factory=dict)
    allowed_tools: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()


def name_problem(name: object) -> str | None:
    """Why ``name`` is not a valid skill name, or None."""
    if not isinstance(name, str) or not name.strip():
        return "the 'name' field must be a non-empty text"
    if len(name) > MAX_NAME:
        return f"the name {name[:80]!r} is {len(name)} characters long; at most {MAX_NAME} are allowed"
    if not NAME_RE.match(name):
        return (f"the name {name!r} is not valid: use lowercase letters a-z, digits and single hyphens, "
                "not at the start or end (for example 'weekly-backup-check')")
    return None


def decode_text(data: bytes, *, what: str) -> str:
    """UTF-8 text of ``data`` (a leading BOM is dropped); raises SkillFormatError naming ``what``."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SkillFormatError(
            f"{what} is not UTF-8 text (invalid byte 0x{data[exc.start]:02x} at position {exc.start}); "
            "save it as UTF-8 and try again") from None
    if "\x00" in text:
        raise SkillFormatError(f"{what} contains NUL bytes: it looks like a binary file, not text")
    return text.removeprefix("\ufeff")


class _Loader(yaml.SafeLoader):
    """PyYAML's safe loader, except that a key given twice in one mapping is an error: YAML's
    last-one-wins would silently drop the first 'description', say, and the user would not know."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            if not isinstance(key_node, yaml.ScalarNode) or key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node, deep=True)  # type: ignore[no-untyped-call]
            line = key_node.start_mark.line + 2  # the front matter starts on the file's line 2
            if key in seen:
                raise SkillFormatError(f"the front matter of SKILL.md has {str(key)!r} twice (lines {seen[key]} and "
                                       f"{line}); keep one")
            seen[key] = line
        return super().construct_mapping(node, deep=deep)


def _front_matter(text: str) -> tuple[dict[str, Any], str]:
    match = _FRONT.match(text)
    if match is None:
        raise SkillFormatError(
            "SKILL.md must start with YAML front matter: a line '---', then 'name: ...' and "
            "'description: ...', then a closing line '---', then the Markdown instructions")
    try:
        data = yaml.load(match.group(1), Loader=_Loader)  # noqa: S506 - a SafeLoader
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 2}, column {mark.column + 1} of SKILL.md)" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise SkillFormatError(f"the front matter of SKILL.md is not valid YAML{where}: {problem}") from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise SkillFormatError("the front matter of SKILL.md must be a YAML mapping of 'key: value' lines")
    return data, text[match.end():]


def _text_field(data: dict[str, Any], key: str, limit: int, *, required: bool) -> str:
    value = data.get(key)
    if value is None:
        if required:
            raise SkillFormatError(f"the front matter has no '{key}' field; add '{key}: ...' (it is required)")
        return ""
    if not isinstance(value, str):
        raise SkillFormatError(f"the '{key}' field must be text, not {type(value).__name__}")
    value = value.strip()
    if required and not value:
        raise SkillFormatError(f"the '{key}' field is empty; write what the skill does and when to use it")
    if len(value) > limit:
        raise SkillFormatError(f"the '{key}' field is {len(value)} characters long; at most {limit} are allowed")
    return value


def _metadata(value: Any) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise SkillFormatError("the 'metadata' field must be a mapping of keys to values (e.g. 'author: me')")
    out: dict[str, str] = {}
    for key, item in value.items():
        if isinstance(item, (dict, list)):
            raise SkillFormatError(f"metadata '{key}' must be a single value, not a {type(item).__name__}")
        out[str(key)] = "" if item is None else str(item)
    return out


def _allowed_tools(value: Any) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        return tuple(value.split())
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return tuple(v.strip() for v in value if v.strip())
    raise SkillFormatError("the 'allowed-tools' field must be a space-separated text or a list of texts")


def parse_skill(text: str, *, folder: str | None = None) -> SkillDoc:
    """Parse and validate the text of a SKILL.md; ``folder`` is the name of the folder holding it."""
    data, body = _front_matter(text)
    name = data.get("name")
    problem = name_problem(name)
    if problem:
        raise SkillFormatError(problem if "name" in data else
                               "the front matter has no 'name' field; add 'name: my-skill' (it is required)")
    assert isinstance(name, str)
    if folder is not None and folder != name:
        raise SkillFormatError(f"the skill is named {name!r} but its folder is {folder!r}: they must be equal")
    description = _text_field(data, "description", MAX_DESCRIPTION, required=True)
    extra = sorted(str(k) for k in data if k not in KNOWN_FIELDS)
    warnings = (f"unknown front matter field(s) {', '.join(extra)} kept but not used",) if extra else ()
    return SkillDoc(
        name=name, description=description, body=body.strip("\n"),
        license=_text_field(data, "license", 200, required=False),
        compatibility=_text_field(data, "compatibility", MAX_COMPATIBILITY, required=False),
        metadata=_metadata(data.get("metadata")), allowed_tools=_allowed_tools(data.get("allowed-tools")),
        warnings=warnings,
    )


def render_skill(*, name: str, description: str, body: str, extra: dict[str, Any] | None = None) -> str:
    """A SKILL.md text for these fields (used for examples and tests; YAML quoting done by PyYAML)."""
    front = {"name": name, "description": description, **(extra or {})}
    dumped = yaml.safe_dump(front, sort_keys=False, allow_unicode=True, width=1000)
    return f"---\n{dumped}---\n\n{body.strip()}\n"
