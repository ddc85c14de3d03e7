"""The static checks of the code reviewer: one `ast` walk per concern, each finding an `Issue` with a line.

Python gets the full set (complexity, long functions, docstrings, bare excepts, mutable defaults, unused
imports and names, dangerous calls, secrets); other languages get the line-based checks only.
"""

from __future__ import annotations

import ast
import builtins
import re

from AgentTools.code_reviewer.lines import Issue, check_lines

COMPLEXITY_WARNING = 10
COMPLEXITY_CRITICAL = 20
LONG_FUNCTION_LINES = 50
MAX_ARGUMENTS = 7

_SECRET_NAME = re.compile(r"(pass(word|wd)?|secret|token|api_?key|private_?key|access_?key|credential)", re.I)
_PLACEHOLDER = re.compile(r"^(|x+|\*+|changeme|your[_-].*|<.*>|\$\{.*\}|example|test|dummy|none|null)$", re.I)
_DANGEROUS = {
    "eval": "eval() runs arbitrary code from a string; parse the data instead (ast.literal_eval, json.loads)",
    "exec": "exec() runs arbitrary code from a string; call the functions you need directly",
    "pickle.loads": "pickle.loads() on untrusted bytes runs arbitrary code; use json or a schema'd format",
    "pickle.load": "pickle.load() on untrusted files runs arbitrary code; use json or a schema'd format",
    "marshal.loads": "marshal.loads() is not safe for untrusted data; use json",
    "os.system": "os.system() goes through the shell; use subprocess.run([...]) with a list of arguments",
    "os.popen": "os.popen() goes through the shell; use subprocess.run([...], capture_output=True)",
    "yaml.load": "yaml.load() without SafeLoader can build arbitrary objects; use yaml.safe_load()",
}
_BUILTIN_NAMES = frozenset(dir(builtins))


def _dotted(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = _dotted(node.value)
        return f"{base}.{node.attr}" if base else node.attr
    return ""


def complexity(func: ast.AST) -> int:
    """McCabe-style cyclomatic complexity of one function (nested functions excluded)."""
    score = 1
    stack = list(ast.iter_child_nodes(func))
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            continue
        if isinstance(
            node, (ast.If, ast.For, ast.AsyncFor, ast.While, ast.IfExp, ast.ExceptHandler, ast.Assert)
        ):
            score += 1
        elif isinstance(node, ast.BoolOp):
            score += len(node.values) - 1
        elif isinstance(node, ast.comprehension):
            score += 1 + len(node.ifs)
        elif isinstance(node, ast.match_case):
            score += 1
        stack.extend(ast.iter_child_nodes(node))
    return score


def check_python(source: str) -> tuple[list[Issue], dict[str, int]]:
    """All checks on Python source; a syntax error is the single (critical) issue."""
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        issue = Issue(
            exc.lineno or 1,
            "bugs",
            "critical",
            "syntax-error",
            f"The code does not parse: {exc.msg}",
            "Fix the syntax error first; nothing else can be checked until the code parses",
            exc.offset or 0,
        )
        return [issue], {"lines": source.count("\n") + 1, "functions": 0, "classes": 0, "max_complexity": 0}
    issues: list[Issue] = []
    functions = [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    classes = [n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)]
    max_cc = 0
    for func in functions:
        max_cc = max(max_cc, _check_function(func, issues))
    for cls in classes:
        if not cls.name.startswith("_") and ast.get_docstring(cls) is None:
            issues.append(
                Issue(
                    cls.lineno,
                    "maintainability",
                    "suggestion",
                    "missing-docstring",
                    f"Class {cls.name!r} has no docstring",
                    "Add a one-line docstring saying what it represents",
                )
            )
    if tree.body and ast.get_docstring(tree) is None and len(source.splitlines()) > 20:
        issues.append(
            Issue(
                1,
                "maintainability",
                "suggestion",
                "missing-docstring",
                "The module has no docstring",
                "Start the file with a docstring saying what the module is for",
            )
        )
    _check_nodes(tree, issues)
    _check_unused_imports(tree, issues)
    issues.extend(check_lines(source))
    metrics = {
        "lines": len(source.splitlines()),
        "functions": len(functions),
        "classes": len(classes),
        "max_complexity": max_cc,
    }
    return issues, metrics


def _check_function(func: ast.FunctionDef | ast.AsyncFunctionDef, issues: list[Issue]) -> int:
    cc = complexity(func)
    if cc > COMPLEXITY_WARNING:
        severity = "critical" if cc > COMPLEXITY_CRITICAL else "warning"
        issues.append(
            Issue(
                func.lineno,
                "maintainability",
                severity,
                "high-complexity",
                f"Function {func.name!r} has cyclomatic complexity {cc} (limit {COMPLEXITY_WARNING})",
                "Split it into smaller functions; replace long if/elif chains with a lookup table",
            )
        )
    length = (func.end_lineno or func.lineno) - func.lineno + 1
    if length > LONG_FUNCTION_LINES:
        issues.append(
            Issue(
                func.lineno,
                "maintainability",
                "warning",
                "long-function",
                f"Function {func.name!r} is {length} lines long (limit {LONG_FUNCTION_LINES})",
                "Extract the separate steps into helper functions",
            )
        )
    if not func.name.startswith("_") and ast.get_docstring(func) is None:
        issues.append(
            Issue(
                func.lineno,
                "readability",
                "suggestion",
                "missing-docstring",
                f"Function {func.name!r} has no docstring",
                "Add a docstring: what it does, its arguments and what it returns",
            )
        )
    args = func.args
    count = len(args.posonlyargs) + len(args.args) + len(args.kwonlyargs)
    if count > MAX_ARGUMENTS:
        issues.append(
            Issue(
                func.lineno,
                "maintainability",
                "suggestion",
                "too-many-arguments",
                f"Function {func.name!r} takes {count} arguments (limit {MAX_ARGUMENTS})",
                "Group related arguments into a dataclass or use keyword-only arguments",
            )
        )
    for default in [*args.defaults, *(d for d in args.kw_defaults if d is not None)]:
        if isinstance(default, (ast.List, ast.Dict, ast.Set)) or (
            isinstance(default, ast.Call) and _dotted(default.func) in ("list", "dict", "set")
        ):
            issues.append(
                Issue(
                    default.lineno,
                    "bugs",
                    "warning",
                    "mutable-default",
                    f"Function {func.name!r} has a mutable default argument; it is shared between calls",
                    "Use None as the default and create the list/dict inside the function",
                )
            )
    _check_unused_locals(func, issues)
    return cc


def _check_unused_locals(func: ast.FunctionDef | ast.AsyncFunctionDef, issues: list[Issue]) -> None:
    stored: dict[str, int] = {}
    loaded: set[str] = set()
    declared: set[str] = set()
    for node in ast.walk(func):
        if isinstance(node, (ast.Global, ast.Nonlocal)):
            declared.update(node.names)
        elif isinstance(node, ast.Name):
            if isinstance(node.ctx, ast.Store):
                stored.setdefault(node.id, node.lineno)
            else:
                loaded.add(node.id)
    for name, line in stored.items():
        if name not in loaded and name not in declared and not name.startswith("_"):
            issues.append(
                Issue(
                    line,
                    "maintainability",
                    "suggestion",
                    "unused-variable",
                    f"Local name {name!r} in {func.name!r} is assigned but never used",
                    "Remove it, or name it '_' if the value is deliberately ignored",
                )
            )


def _check_unused_imports(tree: ast.Module, issues: list[Issue]) -> None:
    imported: dict[str, int] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                imported[alias.asname or alias.name.split(".")[0]] = node.lineno
        elif isinstance(node, ast.ImportFrom):
            for alias in node.names:
                if alias.name == "*":
                    issues.append(
                        Issue(
                            node.lineno,
                            "maintainability",
                            "warning",
                            "star-import",
                            f"'from {node.module} import *' hides where names come from",
                            "Import the names you use explicitly",
                        )
                    )
                elif node.module != "__future__":
                    imported[alias.asname or alias.name] = node.lineno
    used = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
    exported: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and any(_dotted(t) == "__all__" for t in node.targets):
            if isinstance(node.value, (ast.List, ast.Tuple)):
                exported.update(
                    e.value
                    for e in node.value.elts
                    if isinstance(e, ast.Constant) and isinstance(e.value, str)
                )
    # names used only inside string annotations still count as used
    strings = " ".join(
        n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)
    )
    for name, line in imported.items():
        if name not in used and name not in exported and not re.search(rf"\b{re.escape(name)}\b", strings):
            issues.append(
                Issue(
                    line,
                    "maintainability",
                    "suggestion",
                    "unused-import",
                    f"Import {name!r} is never used",
                    "Remove the import",
                )
            )


def _check_nodes(tree: ast.Module, issues: list[Issue]) -> None:
    loop_depth_nodes = (ast.For, ast.While, ast.AsyncFor)
    for node in ast.walk(tree):
        if isinstance(node, ast.ExceptHandler):
            _check_handler(node, issues)
        elif isinstance(node, ast.Call):
            _check_call(node, issues)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            _check_secret_assignment(node, issues)
        elif isinstance(node, ast.Compare):
            for op, right in zip(node.ops, node.comparators, strict=True):
                if (
                    isinstance(op, (ast.Eq, ast.NotEq))
                    and isinstance(right, ast.Constant)
                    and right.value is None
                ):
                    issues.append(
                        Issue(
                            node.lineno,
                            "readability",
                            "suggestion",
                            "compare-to-none",
                            "Comparison to None with == or !=",
                            "Use 'is None' / 'is not None'",
                        )
                    )
        elif isinstance(node, loop_depth_nodes):
            _check_loop(node, issues)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) or (
            isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store)
        ):
            name = getattr(node, "name", None) or getattr(node, "id", "")
            if name in _BUILTIN_NAMES and name not in ("_",) and not name.startswith("__"):
                issues.append(
                    Issue(
                        node.lineno,
                        "bugs",
                        "suggestion",
                        "shadowed-builtin",
                        f"The name {name!r} shadows a Python builtin",
                        f"Rename it (e.g. '{name}_')",
                    )
                )


def _check_handler(node: ast.ExceptHandler, issues: list[Issue]) -> None:
    """A bare `except:`, and a handler whose whole body is `pass`."""
    if node.type is None:
        issues.append(
            Issue(
                node.lineno,
                "bugs",
                "warning",
                "bare-except",
                "A bare 'except:' also catches KeyboardInterrupt and SystemExit",
                "Catch the specific exceptions you expect (at least 'except Exception:')",
            )
        )
    if len(node.body) == 1 and isinstance(node.body[0], ast.Pass):
        issues.append(
            Issue(
                node.lineno,
                "bugs",
                "warning",
                "swallowed-exception",
                "An exception is caught and silently ignored",
                "Log it or handle it; ignoring errors hides bugs",
            )
        )


def _check_loop(node: ast.For | ast.While | ast.AsyncFor, issues: list[Issue]) -> None:
    """The first string concatenated with `+=` inside the loop (quadratic time), once per loop."""
    for inner in ast.walk(node):
        if (
            isinstance(inner, ast.AugAssign)
            and isinstance(inner.op, ast.Add)
            and isinstance(inner.value, (ast.JoinedStr, ast.Constant))
            and isinstance(getattr(inner.value, "value", ""), str)
        ):
            issues.append(
                Issue(
                    inner.lineno,
                    "performance",
                    "suggestion",
                    "string-concat-in-loop",
                    "Strings are concatenated with += inside a loop (quadratic time)",
                    "Collect the parts in a list and ''.join() them once",
                )
            )
            break


def _check_call(node: ast.Call, issues: list[Issue]) -> None:
    name = _dotted(node.func)
    short = name.split(".")[-1]
    if name in _DANGEROUS or (short in ("eval", "exec") and name == short):
        issues.append(
            Issue(
                node.lineno,
                "security",
                "critical",
                "dangerous-call",
                f"Call to {name}()",
                _DANGEROUS.get(name, _DANGEROUS.get(short, "")),
            )
        )
    if name.startswith("subprocess.") or short in ("run", "call", "Popen", "check_output", "check_call"):
        for keyword in node.keywords:
            if (
                keyword.arg == "shell"
                and isinstance(keyword.value, ast.Constant)
                and keyword.value.value is True
            ):
                issues.append(
                    Issue(
                        node.lineno,
                        "security",
                        "critical",
                        "shell-true",
                        f"{name}() with shell=True runs its command through the shell (injection risk)",
                        "Pass a list of arguments and drop shell=True",
                    )
                )
    if name in (
        "requests.get",
        "requests.post",
        "requests.put",
        "requests.delete",
        "httpx.get",
        "httpx.post",
    ):
        if not any(k.arg == "timeout" for k in node.keywords):
            issues.append(
                Issue(
                    node.lineno,
                    "bugs",
                    "warning",
                    "no-timeout",
                    f"{name}() without a timeout can hang forever",
                    "Pass timeout=... (seconds)",
                )
            )
        for keyword in node.keywords:
            if (
                keyword.arg == "verify"
                and isinstance(keyword.value, ast.Constant)
                and keyword.value.value is False
            ):
                issues.append(
                    Issue(
                        node.lineno,
                        "security",
                        "critical",
                        "tls-verify-off",
                        f"{name}() with verify=False disables TLS checks",
                        "Keep certificate verification on; configure a CA bundle if needed",
                    )
                )


def _check_secret_assignment(node: ast.Assign | ast.AnnAssign, issues: list[Issue]) -> None:
    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
    value = node.value
    if not (isinstance(value, ast.Constant) and isinstance(value.value, str)):
        return
    for target in targets:
        name = _dotted(target) or (
            target.slice.value
            if isinstance(target, ast.Subscript) and isinstance(target.slice, ast.Constant)
            else ""
        )
        if (
            isinstance(name, str)
            and _SECRET_NAME.search(name)
            and not _PLACEHOLDER.match(value.value.strip())
            and len(value.value) >= 6
        ):
            issues.append(
                Issue(
                    node.lineno,
                    "security",
                    "critical",
                    "hardcoded-secret",
                    f"{name!r} is assigned a hard-coded secret-looking string",
                    "Read secrets from the environment or a secret store (os.environ['...'])",
                )
            )
            return
