"""What outlives the process: the run history (`RunHistory`: events, runs and LangGraph checkpoints in
`<storage>/runs.sqlite`), its queries (`queries`, shared with PostgreSQL's `echo_tools.pg.history`), the
batching writer (`writer`) and recordings of runs for replay (`recording`).
"""

from echo_tools.history.runs import (
    DEFAULT_LIMIT,
    DEFAULT_RETENTION_DAYS,
    HISTORY_FILE,
    MAX_LIMIT,
    RunHistory,
    check_limit,
    check_since,
)

__all__ = [
    "DEFAULT_LIMIT",
    "DEFAULT_RETENTION_DAYS",
    "HISTORY_FILE",
    "MAX_LIMIT",
    "RunHistory",
    "check_limit",
    "check_since",
]
