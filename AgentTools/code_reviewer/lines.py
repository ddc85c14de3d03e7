"""The finding record of the code reviewer, and its line-based checks that work for any language.

Secret formats (AWS, GitHub, OpenAI, Slack, Google keys, private key blocks), long lines and TODO markers
are found line by line; languages other than Python also get a few risky constructs by pattern.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass

LONG_LINE = 120

_SECRET_VALUE = re.compile(
    r"(AKIA[0-9A-Z]{16}|-----BEGIN [A-Z ]*PRIVATE KEY-----|gh[pousr]_[A-Za-z0-9]{30,}|sk-[A-Za-z0-9_-]{20,}"
    r"|xox[abprs]-[A-Za-z0-9-]{10,}|AIza[0-9A-Za-z_-]{35})"
)


@dataclass
class Issue:
    """One finding: where, what, how bad, and what to do."""

    line: int
    category: str  # bugs, security, performance, readability, maintainability
    severity: str  # critical, warning, suggestion
    code: str
    message: str
    suggestion: str
    column: int = 0

    def to_dict(self) -> dict[str, object]:
        """The JSON-ready dict (also usable as EchoAI's critical_issues entry)."""
        out: dict[str, object] = asdict(self)
        out["description"] = self.message
        out["fix"] = self.suggestion
        return out


def check_lines(source: str) -> list[Issue]:
    """Language-independent line checks: secret literals, long lines, TODO markers."""
    issues = []
    for number, line in enumerate(source.splitlines(), start=1):
        if _SECRET_VALUE.search(line):
            issues.append(
                Issue(
                    number,
                    "security",
                    "critical",
                    "secret-literal",
                    "The line contains what looks like a real credential (key or token format)",
                    "Remove it from the code, rotate it, and load it from the environment",
                )
            )
        if len(line) > LONG_LINE:
            issues.append(
                Issue(
                    number,
                    "readability",
                    "suggestion",
                    "long-line",
                    f"Line is {len(line)} characters long (limit {LONG_LINE})",
                    "Break it up; name intermediate values",
                )
            )
        if re.search(r"(#|//)\s*(TODO|FIXME|XXX|HACK)\b", line):
            issues.append(
                Issue(
                    number,
                    "maintainability",
                    "suggestion",
                    "todo",
                    "An open TODO/FIXME marker",
                    "Resolve it or track it in the issue tracker",
                )
            )
    return issues


_GENERIC_DANGEROUS = {
    "javascript": (
        r"\beval\s*\(|new Function\s*\(|child_process\.exec\s*\(|innerHTML\s*=",
        "eval/new Function/exec/innerHTML",
    ),
    "typescript": (
        r"\beval\s*\(|new Function\s*\(|child_process\.exec\s*\(|innerHTML\s*=",
        "eval/new Function/exec/innerHTML",
    ),
    "java": (r"Runtime\.getRuntime\(\)\.exec|ObjectInputStream", "Runtime.exec/ObjectInputStream"),
    "go": (r"exec\.Command\(\s*\"(sh|bash)\"", "exec.Command of a shell"),
    "rust": (r"\bunsafe\s*\{", "unsafe block"),
    "c++": (r"\b(gets|strcpy|sprintf|system)\s*\(", "gets/strcpy/sprintf/system"),
    "c#": (r"Process\.Start|BinaryFormatter", "Process.Start/BinaryFormatter"),
}


def check_generic(source: str, language: str) -> list[Issue]:
    """Line-based checks for languages without a parser here."""
    issues = check_lines(source)
    pattern = _GENERIC_DANGEROUS.get(language)
    if pattern:
        for number, line in enumerate(source.splitlines(), start=1):
            if re.search(pattern[0], line):
                issues.append(
                    Issue(
                        number,
                        "security",
                        "warning",
                        "dangerous-call",
                        f"Risky construct ({pattern[1]})",
                        "Check that no untrusted input reaches it; prefer a safe API",
                    )
                )
    return issues
