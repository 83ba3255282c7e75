"""Static checks of a tool file written by ``write_tool`` — the code is parsed, never run.

Policy (DESIGN.md §6): importing a user tool runs its module body inside the
Navi process, so code the agent writes may only *define* things at module level:
imports, docstrings, assignments of call-free values, plain ``def``/``class``
(no decorators, call-free defaults and annotations), and ``if``/``try`` blocks
made of the same. Any call at module level (``os.system(...)``, ``print(...)``,
``open(...)``) is refused; it belongs inside ``execute``. Imports must resolve to
installed packages or Navi's own modules, never to a directory the agent can
write to (tools dir, session files, data dir, FS_ALLOWED_PATHS). The tool itself
can still do anything when *called*, which is why ``write_tool`` is staff-only.
"""
from __future__ import annotations

import ast
import importlib.util
from collections.abc import Iterator, Sequence
from pathlib import Path

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError

_SIDE_EFFECTS = (ast.Call, ast.Await, ast.Yield, ast.YieldFrom, ast.NamedExpr)


def _walk_evaluated(node: ast.AST) -> Iterator[ast.AST]:
    """Nodes evaluated when the expression runs (lambda bodies run later, so they are skipped)."""
    yield node
    for child in ast.iter_child_nodes(node):
        if not isinstance(child, ast.Lambda):
            yield from _walk_evaluated(child)


def _snippet(node: ast.AST) -> str:
    text = ast.unparse(node).splitlines()[0] if hasattr(ast, "unparse") else type(node).__name__
    return text if len(text) <= 80 else text[:79] + "…"


def _call_free(expr: ast.AST | None, what: str, problems: list[str]) -> None:
    if expr is None:
        return
    for node in _walk_evaluated(expr):
        if isinstance(node, _SIDE_EFFECTS):
            problems.append(
                f"line {node.lineno}: {what} `{_snippet(node)}` would run when the tool is imported; "
                "module level may only define things — move the call inside execute()"
            )
            return


def _check_def(node: ast.FunctionDef | ast.AsyncFunctionDef, problems: list[str]) -> None:
    if node.decorator_list:
        problems.append(f"line {node.lineno}: decorators run at import and are not allowed on {node.name}()")
    args = node.args
    for default in [*args.defaults, *args.kw_defaults]:
        _call_free(default, "default value", problems)
    for arg in [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg]:
        if arg is not None:
            _call_free(arg.annotation, "annotation", problems)
    _call_free(node.returns, "annotation", problems)


def _check_class(node: ast.ClassDef, problems: list[str]) -> None:
    if node.decorator_list or node.keywords:
        problems.append(f"line {node.lineno}: class {node.name}: decorators and metaclass/keywords are not allowed")
    for base in node.bases:
        _call_free(base, "base class", problems)
    check_body(node.body, problems)


def _check_assign(node: ast.Assign | ast.AnnAssign | ast.AugAssign, problems: list[str]) -> None:
    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
    for target in targets:
        names = target.elts if isinstance(target, ast.Tuple | ast.List) else [target]
        if not all(isinstance(n, ast.Name) for n in names):
            problems.append(f"line {node.lineno}: only plain names may be assigned at module level "
                            f"(`{_snippet(target)}` changes another object)")
    _call_free(node.value, "expression", problems)
    if isinstance(node, ast.AnnAssign):
        _call_free(node.annotation, "annotation", problems)


def check_body(body: Sequence[ast.stmt], problems: list[str]) -> None:
    """Append a problem for each statement that would do something at import time."""
    for node in body:
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            continue  # docstring
        if isinstance(node, ast.Import | ast.ImportFrom | ast.Pass):
            continue
        if isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign):
            _check_assign(node, problems)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            _check_def(node, problems)
        elif isinstance(node, ast.ClassDef):
            _check_class(node, problems)
        elif isinstance(node, ast.If):
            _call_free(node.test, "condition", problems)
            check_body(node.body + node.orelse, problems)
        elif isinstance(node, ast.Try):
            for handler in node.handlers:
                _call_free(handler.type, "exception type", problems)
                check_body(handler.body, problems)
            check_body(node.body + node.orelse + node.finalbody, problems)
        else:
            problems.append(
                f"line {node.lineno}: `{_snippet(node)}` would run when the tool is imported; module level may "
                "only hold imports, constants, def and class — put this inside execute()"
            )


def _top_assignments(tree: ast.Module) -> dict[str, ast.expr]:
    found: dict[str, ast.expr] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    found[target.id] = node.value
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
            found[node.target.id] = node.value
    return found


def _check_format(tree: ast.Module, expected_name: str, problems: list[str]) -> None:
    values = _top_assignments(tree)
    name = values.get("name")
    if not (isinstance(name, ast.Constant) and name.value == expected_name):
        problems.append(f'the module must set name = "{expected_name}" (the same as the file name)')
    description = values.get("description")
    if not (isinstance(description, ast.Constant) and isinstance(description.value, str) and description.value.strip()):
        problems.append("the module must set description = \"...\" (a non-empty string written for the model)")
    if "parameters" not in values:
        problems.append("the module must set parameters = {\"type\": \"object\", \"properties\": {...}}")
    else:
        _check_parameters(values["parameters"], problems)
    funcs = [n for n in tree.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef) and n.name == "execute"]
    if not funcs or not (funcs[-1].args.posonlyargs or funcs[-1].args.args):
        problems.append("the module must define `async def execute(params: dict) -> str` at module level")


def _check_parameters(node: ast.expr, problems: list[str]) -> None:
    try:
        schema = ast.literal_eval(node)
    except ValueError:
        problems.append("parameters must be a literal dict (JSON-like values only, no names or calls)")
        return
    if not isinstance(schema, dict) or schema.get("type") != "object":
        problems.append('parameters must be a JSON schema with "type": "object"')
        return
    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError as exc:
        problems.append(f"parameters is not a valid JSON schema: {exc.message}")


def _inside(path: Path, roots: Sequence[Path]) -> bool:
    resolved = path.resolve()
    return any(resolved.is_relative_to(root.resolve()) for root in roots)


def _check_imports(tree: ast.Module, forbidden_roots: Sequence[Path], problems: list[str]) -> None:
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level:
            problems.append(f"line {node.lineno}: relative imports are not allowed")
            continue
        if isinstance(node, ast.Import):
            modules = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            modules = [node.module or ""]
        else:
            continue
        for module in modules:
            problem = _import_problem(module.split(".")[0], forbidden_roots)
            if problem:
                problems.append(f"line {node.lineno}: {problem}")


def _import_problem(top: str, forbidden_roots: Sequence[Path]) -> str | None:
    if top == "navi_user_tools":
        return "user tools may not import other user tools"
    try:
        spec = importlib.util.find_spec(top)
    except (ImportError, ValueError):
        spec = None
    if spec is None:
        return f"module '{top}' is not installed"
    places = [spec.origin] if spec.origin and spec.origin not in {"built-in", "frozen"} else []
    places += list(spec.submodule_search_locations or [])
    if any(_inside(Path(place), forbidden_roots) for place in places):
        return f"module '{top}' lives in a directory the agent can write to; import installed packages only"
    return None


def check_tool_source(source: str, *, expected_name: str, forbidden_roots: Sequence[Path]) -> list[str]:
    """Every reason ``source`` may not be installed as user tool ``expected_name`` ([] = acceptable)."""
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        return [f"syntax error on line {exc.lineno}: {exc.msg}"]
    except (ValueError, RecursionError, MemoryError) as exc:  # NUL bytes, absurd nesting
        return [f"the code cannot be parsed: {type(exc).__name__}"]
    problems: list[str] = []
    check_body(tree.body, problems)
    _check_format(tree, expected_name, problems)
    _check_imports(tree, forbidden_roots, problems)
    return problems
