"""The test runner that executes inside the sandbox, next to `solution.py` and `cases.json`.

It is sent to the sandbox as `main.py` source text, never imported by the server; importing it does nothing. It imports the code
under test, runs each case (a function call compared with its expected value, or a `test_*` function),
and prints one `\x1eCASE {json}` line per finished case so that a timeout still reports what ran.
"""

import contextlib
import io
import json
import linecache
import math
import sys
import time
import traceback

MARK = "\x1eCASE "


def _jsonable(value):
    try:
        return json.loads(json.dumps(value))
    except (TypeError, ValueError):
        return repr(value)


def _same(actual, expected, tolerance):
    if isinstance(actual, bool) or isinstance(expected, bool):
        return actual == expected
    if isinstance(actual, (int, float)) and isinstance(expected, (int, float)):
        return math.isclose(actual, expected, rel_tol=tolerance, abs_tol=tolerance)
    if isinstance(actual, list) and isinstance(expected, list):
        return len(actual) == len(expected) and all(
            _same(a, e, tolerance) for a, e in zip(actual, expected, strict=True)
        )
    if isinstance(actual, dict) and isinstance(expected, dict):
        return actual.keys() == expected.keys() and all(
            _same(actual[k], expected[k], tolerance) for k in actual
        )
    return actual == expected


def _report(result):
    sys.__stdout__.write(MARK + json.dumps(result) + "\n")
    sys.__stdout__.flush()


def _run(name, call):
    captured = io.StringIO()
    started = time.perf_counter()
    result = {"name": name}
    try:
        with contextlib.redirect_stdout(captured):
            outcome = call()
        result.update(outcome)
    except AssertionError as exc:
        frame = traceback.extract_tb(exc.__traceback__)[-1]
        result.update(
            passed=False,
            error=f"AssertionError: {exc}" if str(exc) else f"assertion failed: {frame.line.strip()}",
            line=frame.lineno,
        )
    except Exception as exc:  # boundary: the code under test may raise anything; that is a failed case
        result.update(passed=False, error=f"{type(exc).__name__}: {exc}")
    result["duration_ms"] = round((time.perf_counter() - started) * 1000, 3)
    if captured.getvalue():
        result["stdout"] = captured.getvalue()[:2000]
    _report(result)


def _case(namespace, case, tolerance):
    def call():
        fn = namespace.get(case["function"])
        if not callable(fn):
            return {"passed": False, "error": f"function {case['function']!r} is not defined by the code"}
        inputs = case.get("inputs", [])
        expected_error = case.get("expect_exception")
        try:
            actual = fn(**inputs) if isinstance(inputs, dict) else fn(*inputs)
        except Exception as exc:  # boundary: the function under test raised; maybe the expected error
            if expected_error and type(exc).__name__ == expected_error:
                return {"passed": True, "actual": f"raised {type(exc).__name__}"}
            raise
        if expected_error:
            return {
                "passed": False,
                "actual": _jsonable(actual),
                "error": f"expected {expected_error} to be raised",
            }
        actual = _jsonable(actual)
        return {
            "passed": _same(actual, case.get("expected"), tolerance),
            "actual": actual,
            "expected": case.get("expected"),
        }

    return call


def _compile(source, filename):
    # registered so that tracebacks and failed asserts can quote the line
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    return compile(source, filename, "exec")


def _defined_here(fn):
    code = getattr(fn, "__code__", None)
    return code is not None and code.co_filename == "test_code.py"


def _collect_tests(scope):
    """`test*` functions, and `test*` methods of `Test*` classes (a fresh instance per test), in order."""
    for name, value in list(scope.items()):
        if name.startswith("test") and callable(value) and _defined_here(value):
            yield name, value
        elif name.startswith("Test") and isinstance(value, type):
            for attr, method in vars(value).items():
                if attr.startswith("test") and callable(method) and _defined_here(method):
                    yield f"{name}.{attr}", (lambda cls=value, attr=attr: _run_method(cls, attr))


def _run_method(cls, attr):
    instance = cls()
    if hasattr(instance, "setup_method"):
        instance.setup_method(getattr(instance, attr))
    try:
        getattr(instance, attr)()
    finally:
        if hasattr(instance, "teardown_method"):
            instance.teardown_method(getattr(instance, attr))


def _doctests(namespace):
    """Run the `>>>` examples in the docstrings of the code under test, one result per docstring."""
    import doctest

    finder = doctest.DocTestFinder(exclude_empty=True)
    found = []
    for name, value in list(namespace.items()):
        defined_here = getattr(value, "__module__", None) == "solution" and callable(value)
        if defined_here:
            found.extend(finder.find(value, name, module=False, globs=dict(namespace)))
    seen = set()
    for test in found:
        if test.name in seen:
            continue
        seen.add(test.name)

        def call(test=test):
            out = io.StringIO()
            runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
            result = runner.run(test, out=out.write, clear_globs=True)
            if result.failed:
                return {"passed": False, "error": out.getvalue()[-2000:].strip()}
            return {"passed": True, "examples": result.attempted}

        yield f"doctest:{test.name}", call


def main():
    with open("cases.json", encoding="utf-8") as handle:
        spec = json.load(handle)
    namespace = {"__name__": "solution"}
    try:
        with open("solution.py", encoding="utf-8") as handle:
            exec(_compile(handle.read(), "solution.py"), namespace)
    except BaseException as exc:  # boundary: any failure to load the code is one failed result
        _report(
            {
                "name": "<import>",
                "passed": False,
                "error": f"the code under test failed to load: {type(exc).__name__}: {exc}",
            }
        )
        return
    tolerance = spec.get("tolerance", 1e-9)
    for index, case in enumerate(spec.get("test_cases", [])):
        _run(case.get("name") or f"case_{index + 1}:{case['function']}", _case(namespace, case, tolerance))
    if spec.get("doctests"):
        for name, call in _doctests(namespace):
            _run(name, call)
    if spec.get("test_code"):
        scope = dict(namespace)
        scope["__name__"] = "test_solution"
        try:
            exec(_compile(spec["test_code"], "test_code.py"), scope)
        except BaseException as exc:  # boundary: any failure to load the tests is one failed result
            _report(
                {
                    "name": "<test_code>",
                    "passed": False,
                    "error": f"test_code failed to load: {type(exc).__name__}: {exc}",
                }
            )
            return
        for name, test in _collect_tests(scope):
            _run(name, lambda test=test: (test(), {"passed": True})[1])


if __name__ == "__main__":  # run as the sandbox's main.py; importing this module must do nothing
    main()
