"""The code_reviewer tool: a static review without an LLM, in EchoAI's output shape.

Keeps EchoAI's `CodeReviewService.review_code` entry point and input fields. Returns `review` (a readable
report), `summary` (scores 1-10 per category), `critical_issues` (EchoAI's list), plus `issues` with line
numbers and suggestions, `score` (0-100) and `metrics`.
"""

from __future__ import annotations

from typing import Any

from AgentTools.code_reviewer.checks import check_python
from AgentTools.code_reviewer.lines import Issue, check_generic

MAX_CODE_CHARS = 500_000
CATEGORIES = ("bugs", "security", "performance", "readability", "maintainability")
_PENALTY = {"critical": 3.0, "warning": 1.0, "suggestion": 0.25}
_SEVERITY_ORDER = {"critical": 0, "warning": 1, "suggestion": 2}
_FOCUS_WORDS = {
    "security": "security",
    "secur": "security",
    "bug": "bugs",
    "error": "bugs",
    "correct": "bugs",
    "perf": "performance",
    "speed": "performance",
    "read": "readability",
    "style": "readability",
    "maintain": "maintainability",
    "complex": "maintainability",
}
LANGUAGES = ("python", "javascript", "typescript", "java", "go", "rust", "c++", "c#")


def _scores(issues: list[Issue]) -> dict[str, int]:
    penalty: dict[str, float] = dict.fromkeys(CATEGORIES, 0.0)
    for issue in issues:
        penalty[issue.category] += _PENALTY[issue.severity]
    scores = {f"{c}_score": max(1, min(10, round(10 - penalty[c]))) for c in CATEGORIES}
    worst = min(scores.values())
    mean = sum(scores.values()) / len(scores)
    # one critical category drags the whole score down: a secret leak is not averaged away
    scores["overall_score"] = max(1, min(10, round(min(mean, worst + 3))))
    if any(issue.code == "syntax-error" for issue in issues):
        scores["bugs_score"] = scores["overall_score"] = 1  # code that does not run cannot score well
    return scores


def _focus(focus_areas: str | None) -> set[str]:
    if not focus_areas:
        return set()
    text = focus_areas.lower()
    return {category for word, category in _FOCUS_WORDS.items() if word in text}


def _report(
    language: str, issues: list[Issue], summary: dict[str, int], metrics: dict[str, int], focus: set[str]
) -> str:
    lines = [f"# Code review ({language}, static analysis)", ""]
    lines.append(f"Overall score: {summary['overall_score']}/10")
    lines.append(", ".join(f"{c}: {summary[f'{c}_score']}/10" for c in CATEGORIES))
    lines.append(", ".join(f"{k.replace('_', ' ')}: {v}" for k, v in metrics.items()))
    if focus:
        lines.append(f"Focus: {', '.join(sorted(focus))} (listed first)")
    lines.append("")
    if not issues:
        lines.append("No issues found by the static checks.")
    for severity in ("critical", "warning", "suggestion"):
        group = [i for i in issues if i.severity == severity]
        if group:
            lines.append(f"## {severity.capitalize()} ({len(group)})")
            lines.extend(
                f"- line {i.line} [{i.category}/{i.code}] {i.message}. Fix: {i.suggestion}" for i in group
            )
            lines.append("")
    if language != "python":
        lines.append(
            f"Note: {language} is checked with line-based rules only (no parser), so structure is not reviewed."
        )
    return "\n".join(lines).rstrip() + "\n"


class CodeReviewService:
    """EchoAI's reviewer entry point, now a deterministic static analyser."""

    def review_code(
        self,
        code: str,
        language: str = "python",
        focus_areas: str | None = None,
        review_type: str = "comprehensive",
        **_ignored: Any,
    ) -> dict[str, Any]:
        """Review `code` and return EchoAI's fields plus line-numbered issues.

        Raises:
            ValueError: empty or oversized code, an unknown language or review_type.
        """
        if not code.strip():
            raise ValueError("code is empty; give the source code to review")
        if len(code) > MAX_CODE_CHARS:
            raise ValueError(f"code is {len(code)} characters long; at most {MAX_CODE_CHARS} are allowed")
        language = language.lower()
        if language not in LANGUAGES:
            raise ValueError(
                f"language {language!r} is not supported; expected one of: {', '.join(LANGUAGES)}"
            )
        if review_type not in ("comprehensive", "quick"):
            raise ValueError(f"review_type must be 'comprehensive' or 'quick', got {review_type!r}")
        if language == "python":
            issues, metrics = check_python(code)
        else:
            issues = check_generic(code, language)
            metrics = {"lines": len(code.splitlines())}
        summary = _scores(issues)
        focus = _focus(focus_areas)
        if review_type == "quick":
            issues = [i for i in issues if i.severity != "suggestion"]
        issues.sort(key=lambda i: (i.category not in focus, _SEVERITY_ORDER[i.severity], i.line))
        critical = [
            {
                k: v
                for k, v in i.to_dict().items()
                if k in ("category", "severity", "description", "fix", "line")
            }
            for i in issues
            if i.severity in ("critical", "warning")
        ]
        return {
            "review": _report(language, issues, summary, metrics, focus),
            "summary": summary,
            "critical_issues": critical,
            "issues": [i.to_dict() for i in issues],
            "score": summary["overall_score"] * 10,
            "metrics": metrics,
            "language": language,
            "review_type": review_type,
        }
