"""The exception tree: one root, the drawn shape, error types, and fields that survive pickling."""

from __future__ import annotations

import pickle

import pytest

import echo_tools.errors as errors_module
from echo_tools.errors import (
    EgressDeniedError,
    MCPConnectionError,
    ToolConfigError,
    ToolDisabledError,
    ToolError,
    ToolExecutionError,
    ToolNameConflictError,
    ToolNotFoundError,
    ToolOutputValidationError,
    ToolPermissionError,
    ToolRegistrationError,
    ToolStorageError,
    ToolTimeoutError,
    ToolValidationError,
    error_for_result,
)
from echo_tools.models import ToolResult

ALL_ERRORS = [
    EgressDeniedError,
    MCPConnectionError,
    ToolConfigError,
    ToolDisabledError,
    ToolExecutionError,
    ToolNameConflictError,
    ToolNotFoundError,
    ToolOutputValidationError,
    ToolPermissionError,
    ToolRegistrationError,
    ToolStorageError,
    ToolTimeoutError,
    ToolValidationError,
]


def test_every_error_descends_from_tool_error_and_is_drawn_in_the_docstring() -> None:
    doc = errors_module.__doc__ or ""
    for cls in ALL_ERRORS:
        assert issubclass(cls, ToolError)
        assert cls.__name__ in doc
        assert cls.__doc__ and cls.__doc__.strip()


def test_the_tree_has_the_documented_parents() -> None:
    assert issubclass(ToolNameConflictError, ToolRegistrationError)
    assert issubclass(ToolOutputValidationError, ToolValidationError)
    assert issubclass(EgressDeniedError, ToolExecutionError)
    assert issubclass(MCPConnectionError, ToolExecutionError)


@pytest.mark.parametrize(
    ("cls", "error_type"),
    [
        (ToolNotFoundError, "not_found"),
        (ToolDisabledError, "disabled"),
        (ToolPermissionError, "permission_denied"),
        (ToolValidationError, "validation"),
        (ToolOutputValidationError, "output_validation"),
        (ToolExecutionError, "execution"),
        (EgressDeniedError, "execution"),
        (ToolTimeoutError, "timeout"),
    ],
)
def test_each_error_carries_its_result_error_type(cls: type[ToolError], error_type: str) -> None:
    assert cls.error_type == error_type


@pytest.mark.parametrize("cls", ALL_ERRORS)
def test_errors_keep_message_tool_id_and_field_through_pickle(cls: type[ToolError]) -> None:
    error = cls("Tool 'x': input.q must be a string, got 5", tool_id="tool_x", field="input.q")
    copy = pickle.loads(pickle.dumps(error))
    assert type(copy) is cls
    assert (copy.message, copy.tool_id, copy.field) == (error.message, "tool_x", "input.q")
    assert str(copy) == "Tool 'x': input.q must be a string, got 5"


def test_error_for_result_falls_back_to_an_execution_error() -> None:
    result = ToolResult(tool_id="tool_x", name="X", success=False, error=None, error_type="something_new")
    error = error_for_result(result)
    assert type(error) is ToolExecutionError
    assert "tool_x" in str(error)
