"""The gate: who may do what (`Principal`, `Grants`, actions), how much (`Budget`, `BudgetMeter`), and the
scope every call carries (`CallScope`).

Every entry point passes it: an HTTP route declares its action with `Gatekeeper.requires(action)` (a
FastAPI dependency in `echo_tools.api.security`: key -> principal, action checked, 401/403 naming both);
a request or run is admitted as a `CallScope` (its principal's ceiling, one budget meter for the whole of
it, the end user), and every tool call under it is admitted by the executor against that scope. The CLI
and in-process Python are the `OPERATOR` principal. No web framework is imported here.

    principals.py   Principal, Grants, the actions, the principals file
    budget.py       Budget, BudgetMeter (kept and resumed across pauses), the executor's budget stage
    scope.py        CallScope, the scope of the work running now (acting_as), sealed scope records
"""

from echo_tools.gate.budget import MIB, Budget, BudgetMeter, admit, estimate_tokens, metered
from echo_tools.gate.principals import (
    ACTIONS,
    OPERATOR,
    PUBLIC,
    READ,
    Grants,
    Principal,
    hash_key,
    load_principals,
    principals_from,
)
from echo_tools.gate.scope import (
    CallScope,
    Nesting,
    PrincipalLookup,
    Seal,
    ToolOwnedError,
    acting,
    acting_as,
    acting_owner,
    check_owner,
    current_scope,
    may_store,
    under_acting,
)

__all__ = [
    "ACTIONS",
    "MIB",
    "OPERATOR",
    "PUBLIC",
    "READ",
    "Budget",
    "BudgetMeter",
    "CallScope",
    "Grants",
    "Nesting",
    "Principal",
    "PrincipalLookup",
    "Seal",
    "ToolOwnedError",
    "acting",
    "acting_as",
    "acting_owner",
    "admit",
    "check_owner",
    "current_scope",
    "estimate_tokens",
    "hash_key",
    "load_principals",
    "may_store",
    "metered",
    "principals_from",
    "under_acting",
]
