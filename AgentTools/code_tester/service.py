"""The code_tester tool: run test cases or pytest-style `test_*` functions against code, in the sandbox.

The code under test, the cases and a small runner go into the code_executor sandbox together, so a test
run has the same limits and isolation as any executed code. The runner reports each case as it finishes;
when the run times out, the cases that did not finish are reported as such.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from AgentTools.code_executor.service import MAX_CODE_CHARS, limits_for
from echo_tools.sandbox import run_python

_RUNNER = (Path(__file__).parent / "runner.py").read_text(encoding="utf-8")
_MARK = "\x1eCASE "
MAX_CASES = 500


def _check_cases(test_cases: list[dict[str, Any]]) -> None:
    if len(test_cases) > MAX_CASES:
        raise ValueError(f"test_cases has {len(test_cases)} cases; at most {MAX_CASES} are allowed")
    for index, case in enumerate(test_cases):
        function = case.get("function") if isinstance(case, dict) else None
        if not isinstance(function, str) or not function.isidentifier():
            raise ValueError(f"test_cases[{index}].function must be a Python function name, got {function!r}")
        inputs = case.get("inputs", [])
        if not isinstance(inputs, (list, dict)):
            raise ValueError(
                f"test_cases[{index}].inputs must be a list (positional) or object (keyword), got {inputs!r}"
            )
        if "expected" not in case and "expect_exception" not in case:
            raise ValueError(f"test_cases[{index}] needs 'expected' (or 'expect_exception')")


def _parse(stdout: str) -> tuple[list[dict[str, Any]], str]:
    results, other = [], []
    for line in stdout.split("\n"):  # not splitlines(): it also splits at \x1e
        if line.startswith(_MARK):
            try:
                results.append(json.loads(line[len(_MARK) :]))
                continue
            except ValueError:
                pass
        other.append(line)
    return results, "\n".join(other)


class CodeTesterService:
    """Runs tests against code in the code_executor sandbox."""

    async def run_tests(
        self,
        code: str,
        test_cases: list[dict[str, Any]] | None = None,
        test_code: str | None = None,
        timeout_seconds: float = 20.0,
        memory_mb: int = 256,
        tolerance: float = 1e-9,
        **_ignored: Any,
    ) -> dict[str, Any]:
        """Run the tests; returns passed, failed, total, success and per-case results.

        Raises:
            ValueError: no tests given, malformed cases, oversized code.
        """
        if not code.strip():
            raise ValueError("code is empty; give the code under test")
        doctests = not test_cases and not (test_code and test_code.strip())
        if doctests and ">>>" not in code:
            raise ValueError(
                "give test_cases (function, inputs, expected) or test_code (def test_* functions), "
                "or put doctest examples (>>> lines) in the code's docstrings"
            )
        for field, text in (("code", code), ("test_code", test_code or "")):
            if len(text) > MAX_CODE_CHARS:
                raise ValueError(
                    f"{field} is {len(text)} characters long; at most {MAX_CODE_CHARS} are allowed"
                )
        _check_cases(test_cases or [])
        spec = {
            "test_cases": test_cases or [],
            "test_code": test_code,
            "tolerance": tolerance,
            "doctests": doctests,
        }
        run = await run_python(
            _RUNNER,
            limits=limits_for(timeout_seconds, memory_mb),
            files={"solution.py": code, "cases.json": json.dumps(spec)},
        )
        results, stdout = _parse(run.stdout)
        expected_count = len(test_cases or [])
        if run.timed_out or (run.exit_code not in (0, None) and len(results) < expected_count):
            reason = (
                "not run: the test run timed out" if run.timed_out else "not run: the test process crashed"
            )
            results.append({"name": "<remaining>", "passed": False, "error": reason})
        passed = sum(1 for r in results if r.get("passed"))
        return {
            "passed": passed,
            "failed": len(results) - passed,
            "total": len(results),
            "success": bool(results) and passed == len(results) and not run.timed_out,
            "results": results,
            "stdout": stdout,
            "stderr": run.stderr,
            "exit_code": run.exit_code,
            "timed_out": run.timed_out,
            "limit_hit": run.limit_hit,
            "duration_ms": round(run.duration_ms, 2),
        }
