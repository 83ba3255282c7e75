"""Command policy for the ``terminal`` tool.

No shell is ever used: the command line is split with ``shlex.split`` and run
with ``create_subprocess_exec``. Therefore:

- Shell operators (``;``, ``|``, ``&&``, ``||``, ``&``, ``>``, ``<``, ``>>``,
  ``(``, ``)``) are refused with a message that pipes and redirections are not
  available; ``$(...)``, ``${...}`` and backticks are refused too (they would only
  be literal text, which is never what the caller meant). No glob expansion.
- ``argv[0]`` must be a bare program name in TERMINAL_ALLOWED_COMMANDS (``*`` =
  any, then a path is accepted too) and is resolved with ``shutil.which`` on a
  fixed safe PATH.
- Flags that make an allowed program run another program, or write where it
  should not, are refused (best effort, per program):
  find ``-exec -execdir -ok -okdir -delete -fprint -fprint0 -fprintf -fls``;
  git ``-c``/``--config``/``--config-env``/``--exec-path``/``--upload-pack``/
  ``--receive-pack``/``-u``/``--exec``/``--ext-diff``/``-O``/``--open-files-in-pager``,
  the sub-commands difftool, mergetool, filter-branch, bisect, submodule, config
  (except reading), daemon, instaweb, send-email, credential*, and
  ``rebase -x/--exec``; ``-C``/``--git-dir``/``--work-tree`` must point inside the
  filesystem tool's allowed directories. Repository hooks, pager and fsmonitor
  are switched off by the terminal tool itself (``-c`` overrides it adds).
  sort ``--compress-program``/``-o``/``--output``; uniq with an output file;
  env running a program (only NAME=VALUE arguments); date ``-s``/``--set``;
  hostname with an argument that sets the name; tar ``--to-command``,
  ``--use-compress-program``/``-I``, ``--checkpoint-action``,
  ``--info-script``/``--new-volume-script``/``-F``, ``--rsh-command``;
  awk/gawk/mawk programs using ``system``, pipes to/from commands, output
  redirection, ``-f``/``-l``/``-i``/``-E``; xargs only when named explicitly
  in the allowlist (never through ``*``); sed ``-i``/``e``/``w`` are NOT parsed:
  do not allowlist sed where that matters.
- Arguments are otherwise not path-checked: an allowlisted ``cat`` can read any
  file the server user can read. That is why the tool is staff-only.
"""
from __future__ import annotations

import re
import shlex
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings

from tools_app.base import ToolError
from tools_app.safety.paths import resolve_path

SAFE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
_OPERATOR_CHARS = frozenset("();<>|&")
_SUBSTITUTION = re.compile(r"\$\(|\$\{|`")


class CommandPolicyError(ToolError):
    """A command line the terminal policy refuses."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Command:
    argv: list[str]
    executable: str


def _operators(command: str) -> list[str]:
    """Shell operator characters outside quotes and not backslash-escaped (what a shell would act on)."""
    found: list[str] = []
    quote: str | None = None
    escaped = False
    for ch in command:
        if escaped:
            escaped = False
        elif ch == "\\" and quote != "'":
            escaped = True
        elif quote:
            quote = None if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch in _OPERATOR_CHARS:
            found.append(ch)
    return found


def split_command(command: str) -> list[str]:
    """argv for ``command``; CommandPolicyError for shell syntax or bad quoting."""
    if "\x00" in command:
        raise CommandPolicyError("The command contains a NUL byte.")
    if _SUBSTITUTION.search(command):
        raise CommandPolicyError(
            "Command substitution ($(...), ${...}, backticks) is not available: commands run without a "
            "shell. Run the inner command on its own first and use its output."
        )
    ops = _operators(command)
    if ops:
        raise CommandPolicyError(
            f"Shell operators ({' '.join(dict.fromkeys(ops))}) are not available: commands run without a "
            "shell, so pipes, redirections, '&&', ';' and background jobs do not work. Run one program per "
            "call; use the filesystem tool to write files."
        )
    try:
        argv = shlex.split(command)
    except ValueError as exc:
        raise CommandPolicyError(f"The command cannot be parsed ({exc}); check the quotes.") from None
    if not argv:
        raise CommandPolicyError("The command is empty.")
    return argv


def _allowlist() -> list[str]:
    return [str(c).strip() for c in getattr(settings, "TERMINAL_ALLOWED_COMMANDS", []) if str(c).strip()]


def _resolve_program(name: str, allowed: list[str]) -> str:
    if "*" not in allowed:
        if "/" in name:
            raise CommandPolicyError(f"Give the program name only (for example 'ls'), not a path: {name!r}.")
        if name not in allowed:
            raise CommandPolicyError(
                f"The program {name!r} is not allowed. Allowed programs: {', '.join(sorted(allowed)) or '(none)'}."
            )
    found = shutil.which(name, path=SAFE_PATH) if "/" not in name else (name if Path(name).is_file() else None)
    if not found:
        raise CommandPolicyError(f"The program {name!r} is not installed on this server.")
    return found


def _long_opt(arg: str, banned: tuple[str, ...]) -> str | None:
    """The banned long option ``arg`` spells, abbreviations included (GNU/git accept unique prefixes)."""
    opt = arg.split("=", 1)[0]
    if not opt.startswith("--") or len(opt) < 4:
        return None
    return next((b for b in banned if b.startswith(opt)), None)


def _short_opt(arg: str, letters: str) -> str | None:
    if arg.startswith("-") and not arg.startswith("--") and len(arg) > 1:
        return next((f"-{ch}" for ch in arg[1:] if ch in letters), None)
    return None


def _refuse(program: str, what: str) -> None:
    raise CommandPolicyError(f"'{program} {what}' is not allowed: it can run other programs or write files.")


def _check_find(args: list[str]) -> None:
    banned = {"-exec", "-execdir", "-ok", "-okdir", "-delete", "-fprint", "-fprint0", "-fprintf", "-fls"}
    for arg in args:
        if arg in banned:
            _refuse("find", arg)


_GIT_LONG = ("--config", "--config-env", "--exec-path", "--upload-pack", "--receive-pack", "--exec",
             "--ext-diff", "--open-files-in-pager", "--template")
_GIT_SUBCOMMANDS = {"difftool", "mergetool", "filter-branch", "bisect", "submodule", "daemon", "instaweb",
                    "send-email", "credential", "credential-store", "credential-cache", "upload-pack",
                    "receive-pack", "shell", "remote-ext", "imap-send", "p4", "svn", "cvsimport", "archimport"}
_GIT_PATH_OPTS = ("-C", "--git-dir", "--work-tree")


def _git_subcommand(args: list[str]) -> str | None:
    skip = False
    for arg in args:
        if skip:
            skip = False
            continue
        if arg in _GIT_PATH_OPTS or arg in {"--namespace"}:
            skip = True
            continue
        if not arg.startswith("-"):
            return arg
    return None


def _check_git_paths(args: list[str]) -> None:
    for i, arg in enumerate(args):
        opt, _, inline = arg.partition("=")
        if opt in _GIT_PATH_OPTS:
            value = inline if inline else (args[i + 1] if i + 1 < len(args) else "")
            resolve_path(value)  # raises PathPolicyError when outside the allowed directories


def _check_git(args: list[str]) -> None:
    for arg in args:
        if arg == "-c" or (arg.startswith("-c") and not arg.startswith("--") and "=" in arg):
            _refuse("git", "-c")
        if arg in {"-u", "-O"} or (arg.startswith("-O") and len(arg) > 2):
            _refuse("git", arg)
        hit = _long_opt(arg, _GIT_LONG)
        if hit:
            _refuse("git", hit)
    sub = _git_subcommand(args)
    if sub in _GIT_SUBCOMMANDS or (sub and sub.startswith("credential")):
        _refuse("git", sub)
    rest = args[args.index(sub) + 1:] if sub else []
    if sub == "config" and not any(a in {"--get", "--get-all", "--list", "-l", "--get-regexp"} for a in rest):
        _refuse("git", "config (changing configuration)")
    if sub == "rebase" and any(a in {"-x"} or _long_opt(a, ("--exec",)) for a in rest):
        _refuse("git", "rebase --exec")
    _check_git_paths(args)


def _check_sort(args: list[str]) -> None:
    for arg in args:
        hit = _long_opt(arg, ("--compress-program", "--output")) or _short_opt(arg, "o")
        if hit:
            _refuse("sort", hit)


def _check_uniq(args: list[str]) -> None:
    if len([a for a in args if not a.startswith("-") or a == "-"]) > 1:
        _refuse("uniq", "INPUT OUTPUT (writing an output file)")


def _check_env(args: list[str]) -> None:
    for arg in args:
        if arg in {"-0", "--null"}:
            continue
        if not re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", arg):
            _refuse("env", f"{arg} (env may only print the environment, not run a program)")


def _check_date(args: list[str]) -> None:
    for arg in args:
        hit = _long_opt(arg, ("--set",)) or _short_opt(arg, "s")
        if hit:
            raise CommandPolicyError(f"'date {hit}' would change the system clock; it is not allowed.")


def _check_hostname(args: list[str]) -> None:
    for arg in args:
        if not arg.startswith("-") or _long_opt(arg, ("--file", "--boot")) or _short_opt(arg, "Fb"):
            raise CommandPolicyError("'hostname' may only show the name; setting it is not allowed.")


def _check_tar(args: list[str]) -> None:
    banned = ("--to-command", "--use-compress-program", "--checkpoint-action", "--info-script",
              "--new-volume-script", "--rsh-command")
    for arg in args:
        hit = _long_opt(arg, banned) or (arg in {"-I", "-F"} and arg)
        if hit:
            _refuse("tar", str(hit))


_AWK_BAD = re.compile(r"\bsystem\s*\(|\|\s*getline|\|&|\"\s*\|\s*getline|\bprintf?\b[^;{}]*(>|\|)")


def _check_awk(args: list[str]) -> None:
    for arg in args:
        hit = _long_opt(arg, ("--file", "--load", "--include", "--exec")) or _short_opt(arg, "fliE")
        if hit:
            _refuse("awk", hit)
        if _AWK_BAD.search(arg):
            _refuse("awk", "with system(), command pipes or output redirection")


def _check_xargs(args: list[str]) -> None:
    if "xargs" not in _allowlist():
        raise CommandPolicyError("'xargs' runs other programs; it is only available when an admin names it explicitly.")


CHECKS: dict[str, Callable[[list[str]], None]] = {
    "find": _check_find, "git": _check_git, "sort": _check_sort, "uniq": _check_uniq, "env": _check_env,
    "date": _check_date, "hostname": _check_hostname, "tar": _check_tar, "awk": _check_awk,
    "gawk": _check_awk, "mawk": _check_awk, "nawk": _check_awk, "xargs": _check_xargs,
}


def parse_command(command: str) -> Command:
    """Check a command line against the policy; return argv and the resolved executable."""
    argv = split_command(command)
    executable = _resolve_program(argv[0], _allowlist())
    check = CHECKS.get(Path(argv[0]).name)
    if check:
        check(argv[1:])
    return Command(argv=argv, executable=executable)
