"""A tool type is its backend class: each backend checks its own `execution_config` at registration."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from echo_tools import ToolDef, ToolRegistrationError, ToolRegistry, ToolType
from echo_tools.backends import check_execution_config
from echo_tools.backends.base import ToolBackend
from echo_tools.backends.catalog import BACKENDS, backend_class
from echo_tools.backends.local import LocalBackend


@pytest.mark.parametrize("kind", sorted(BACKENDS, key=lambda kind: kind.value))
def test_each_built_in_type_checks_its_config_in_its_own_backend_class(kind: ToolType) -> None:
    cls = backend_class(kind)
    assert issubclass(cls, ToolBackend)
    assert cls.check_config.__func__ is not ToolBackend.check_config.__func__  # type: ignore[attr-defined]


def test_a_bad_config_is_refused_by_its_backend_naming_the_field() -> None:
    tool = ToolDef(name="ftp", tool_type="api", execution_config={"url": "ftp://example.org/x"})
    with pytest.raises(ToolRegistrationError) as refused:
        backend_class(ToolType.API).check_config(tool, [])
    assert refused.value.field == "execution_config.url" and "ftp://example.org/x" in refused.value.message


def test_a_plugged_in_type_is_checked_by_its_plugged_in_backend() -> None:
    tool = ToolDef(name="flow", tool_type="workflow", execution_config={"workflow_id": "../etc/passwd"})
    with pytest.raises(ToolRegistrationError) as refused:
        check_execution_config(tool, [])
    assert refused.value.field == "execution_config.workflow_id"


def test_registration_asks_the_backend_of_the_tools_type(monkeypatch: pytest.MonkeyPatch) -> None:
    asked: list[tuple[str, list[str]]] = []

    def check(cls: type, tool: ToolDef, allowed: Sequence[str], egress: Any = None) -> None:
        asked.append((tool.tool_id, list(allowed)))

    monkeypatch.setattr(LocalBackend, "check_config", classmethod(check))
    registry = ToolRegistry(allowed_modules=["somewhere"])
    registry.register({"name": "anything", "execution_config": {"module": "os", "function": "system"}})
    assert asked == [("tool_anything", ["somewhere"])]  # the backend's check alone decides


def test_a_config_that_is_not_an_object_is_refused_before_any_backend_is_asked() -> None:
    tool = ToolDef.model_construct(tool_id="odd", name="odd", tool_type=ToolType.LOCAL, execution_config=[1])
    with pytest.raises(ToolRegistrationError) as refused:
        check_execution_config(tool, [])
    assert refused.value.field == "execution_config"
