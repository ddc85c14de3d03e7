"""A tool's output as a JSON value: the one normaliser every backend and the executor use."""

from __future__ import annotations

import dataclasses
import datetime as dt
import decimal
import enum
from typing import Any

_SCALARS = (str, int, float, bool, type(None))


def to_json_value(value: Any, _depth: int = 0) -> Any:
    """A tool's output as a JSON value.

    Pydantic models and dataclasses become dicts; tuples and sets lists; enums their value; dates and
    times ISO 8601 text; bytes UTF-8 text; `Decimal` a float; anything else its `str()`.
    """
    if isinstance(value, _SCALARS):
        return value.value if isinstance(value, enum.Enum) else value
    if _depth > 100:
        return str(value)
    if isinstance(value, dict):
        return {k if isinstance(k, str) else str(k): to_json_value(v, _depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [to_json_value(v, _depth + 1) for v in value]
    dump = getattr(value, "model_dump", None)
    if callable(dump) and not isinstance(value, type):
        return to_json_value(dump(mode="json"), _depth + 1)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return to_json_value(dataclasses.asdict(value), _depth + 1)
    if isinstance(value, enum.Enum):
        return to_json_value(value.value, _depth + 1)
    if isinstance(value, (dt.datetime, dt.date, dt.time)):
        return value.isoformat()
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).decode("utf-8", errors="replace")
    if isinstance(value, decimal.Decimal):
        return float(value)
    return str(value)
