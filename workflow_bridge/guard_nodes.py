"""Failsafe and Self-Review: nodes that watch another node's work and send it round again.

A Failsafe guards the node it leads to: that node runs up to `1 + retryAttempts` times, each attempt
within `timeout` seconds (tool calls get what is left of it, an agent's crew is given up on), and when it
still fails the run takes the Failsafe's failure edge. A Self-Review scores the output of the node before
it with a model (the node's own model; the offline rehearsal scores by a fixed rule, so tests run
offline) and, below `confidenceThreshold`, runs that node again with the reviewer's feedback, at most
`maxIterations` times in all.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from typing import Any

from workflow_bridge.crewai_adapter import FAILED_MARK, Node, original_request
from workflow_bridge.flow_config import FailsafeConfig, ReviewConfig, node_label
from workflow_bridge.node_deadline import deadline_in
from workflow_bridge.nodes import _message
from workflow_bridge.text_arguments import json_objects_in
from workflow_bridge.topology import END_NODE, GuardPlan, ReviewPlan

OK, FAILED, AGAIN, PASS = "ok", "failed", "again", "pass"
_WORD = re.compile(r"[a-z0-9]+")
_STOP_WORDS = frozenset(
    "about above after again also and any are been before being below between both but can could does doing "
    "each every for from have having here how into its just more most much must not now off only other "
    "our out over own please same should some such than that the their them then there these they this "
    "those through too under until very was were what when where which while who whom why will with would "
    "you your".split()
)


def _failure(delta: Any) -> str | None:
    messages = delta.get("messages") if isinstance(delta, Mapping) else None
    for message in reversed(messages or []):
        if isinstance(message, Mapping) and message.get("status") == "failed":
            return str(message.get("error") or "failed")
    return None


class GuardedNode:
    """The node a Failsafe guards: retried and bounded; its route says whether it succeeded."""

    def __init__(
        self,
        fn: Node,
        plan: GuardPlan,
        config: FailsafeConfig,
        failsafe: Mapping[str, Any],
        names: Mapping[str, str] | None = None,
    ) -> None:
        self.fn = fn
        self.plan = plan
        self.config = config
        self.failsafe = failsafe
        self.names = dict(names or {})  # node id -> canvas name, for the messages

    def _name(self, node_id: str) -> str:
        name = self.names.get(node_id)
        return f"{name!r} ({node_id})" if name else repr(node_id)

    def __call__(self, state: dict[str, Any]) -> dict[str, Any]:
        from langgraph.errors import GraphBubbleUp

        events: list[Any] = []
        messages: list[Any] = []
        errors: list[str] = []
        for _ in range(1 + self.config.retries):
            try:
                with deadline_in(self.config.timeout_s):
                    delta = dict(self.fn(state))
                error = _failure(delta)
            except GraphBubbleUp:
                raise  # a pause (HITL, an approval), not a failure
            except Exception as exc:  # boundary: whatever the guarded node raised is one failed attempt
                delta, error = {"tool_events": list(getattr(exc, "events", []) or [])}, str(exc)
            if error is None:
                delta["tool_events"] = [*events, *(delta.get("tool_events") or [])]
                delta["_routes"] = {**(delta.get("_routes") or {}), self.plan.guarded: OK}
                return delta
            errors.append(error)
            events.extend(delta.get("tool_events") or [])
            # each attempt is kept, marked retried: the Failsafe's own message below is the failure
            messages.extend(
                {**m, "status": "retried", "attempt": len(errors)}
                if isinstance(m, Mapping) and m.get("status") == "failed"
                else m
                for m in delta.get("messages") or []
            )
        failure = self.plan.failure
        where = f"the failure edge to {self._name(failure)}" if failure else "the end of the run"
        summary = (
            f"{node_label(self.failsafe)}: the node it guards, {self._name(self.plan.guarded)}, failed "
            f"{len(errors)} time(s) (1 + retryAttempts={self.config.retries}); last error: {errors[-1]}; "
            f"taking {where}"
        )
        failed = _message(self.failsafe, status="failed", error=summary, error_type="failsafe")
        return {
            "tool_events": events,
            "messages": [*messages, failed],
            "_routes": {self.plan.guarded: FAILED},
            "original_user_input": original_request(state),
        }


def guarded_route(plan: GuardPlan, exits: list[str]) -> tuple[Callable[[Mapping[str, Any]], Any], list[str]]:
    """The guarded node's route: on to its own next nodes, or the Failsafe's failure edge."""
    after = exits or [END_NODE]
    failure = plan.failure or END_NODE

    def route(state: Mapping[str, Any]) -> Any:
        return failure if (state.get("_routes") or {}).get(plan.guarded) == FAILED else after

    return route, sorted({*after, failure})


def failsafe_node(agent: Mapping[str, Any], plan: GuardPlan) -> Node:
    """The Failsafe node itself: it records what it guards and hands over."""

    def failsafe(state: dict[str, Any]) -> dict[str, Any]:
        return {
            "original_user_input": original_request(state),
            "messages": [_message(agent, guards=plan.guarded, failure_edge=plan.failure)],
        }

    return failsafe


def _leaves(text: str) -> list[str]:
    """The words a request asks about: its text, or, for a JSON request, the values (not the keys)."""
    try:
        value = json.loads(text)
    except ValueError:
        return [text]
    out: list[str] = []
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
        elif item is not None:
            out.append(str(item))
    return out[::-1]


def rehearsal_score(request: str, output: str, config: ReviewConfig) -> tuple[float, str]:
    """The offline rehearsal's review, a fixed rule: completeness is the share of the request's words (four
    letters or more, common words left out; a JSON request's values) that the output uses; accuracy is 0
    for an output marked failed or reporting an error, else 1; the score is their mean (1.0 when nothing
    is checked)."""
    text = (output or "").lower()
    if not text.strip():
        return 0.0, "the output is empty"
    scores: list[float] = []
    issues: list[str] = []
    if config.completeness:
        request = " ".join(_leaves(request))
        words = list(
            dict.fromkeys(w for w in _WORD.findall(request.lower()) if len(w) >= 4 and w not in _STOP_WORDS)
        )
        missing = [w for w in words if w not in text]
        scores.append(1.0 - len(missing) / len(words) if words else 1.0)
        if missing:
            issues.append(f"it does not cover: {', '.join(missing[:20])}")
    if config.accuracy:
        broken = FAILED_MARK in text or "traceback" in text or text.startswith("error")
        scores.append(0.0 if broken else 1.0)
        if broken:
            issues.append("it reports a failure")
    score = sum(scores) / len(scores) if scores else 1.0
    return round(score, 4), "; ".join(issues)


def _model_score(llm: Any, request: str, output: str, config: ReviewConfig) -> tuple[float | None, str]:
    checks = [
        name
        for name, on in (
            ("completeness (does it cover every part of the request)", config.completeness),
            ("accuracy (is every statement correct and supported)", config.accuracy),
            ("tone (is it professional and fitting)", config.tone),
        )
        if on
    ]
    prompt = (
        "You review the output of one step of a workflow.\n"
        f"Check: {'; '.join(checks) or 'overall quality'}.\n"
        + (f"Reviewer's instructions: {config.prompt}\n" if config.prompt else "")
        + f"\nREQUEST:\n{request}\n\nOUTPUT TO REVIEW:\n{output}\n\n"
        'Answer with one JSON object only: {"score": <a number from 0 to 1>, "issues": "<what to fix>"}'
    )
    answer = str(llm.call([{"role": "user", "content": prompt}]))
    for found in json_objects_in(answer):
        score = found.get("score", found.get("confidence"))
        if isinstance(score, (int, float)) and not isinstance(score, bool) and 0 <= score <= 1:
            return float(score), str(found.get("issues") or "")
    number = re.search(r"\b(0(?:\.\d+)?|1(?:\.0+)?)\b", answer)
    return (float(number.group(1)), answer[:500]) if number else (None, answer[:500])


class ReviewNode:
    """A Self-Review node: scores the previous output and sends its node round again when it is too low."""

    def __init__(
        self, agent: Mapping[str, Any], node_id: str, config: ReviewConfig, plan: ReviewPlan, llm: Any
    ) -> None:
        self.agent = agent
        self.node_id = node_id
        self.config = config
        self.plan = plan
        self.llm = llm
        self.label = node_label(agent)

    def score(self, state: Mapping[str, Any]) -> tuple[float | None, str]:
        from workflow_bridge.llm import is_rehearsal

        request, output = original_request(state), str(state.get("crew_result") or "")
        if is_rehearsal(self.llm):
            return rehearsal_score(request, output, self.config)
        return _model_score(self.llm, request, output, self.config)

    def __call__(self, state: dict[str, Any]) -> dict[str, Any]:
        rounds = int(((state.get("_reviews") or {}).get(self.node_id) or {}).get("rounds", 0)) + 1
        try:
            score, issues = self.score(state)
        except Exception as exc:  # boundary: a model that fails is a failed review, the output goes on
            score, issues = None, f"the review model failed: {exc}"
        threshold = self.config.threshold
        fields: dict[str, Any] = {"score": score, "threshold": threshold, "round": rounds, "issues": issues}
        delta: dict[str, Any] = {"review_score": score, "original_user_input": original_request(state)}
        if score is not None and score < threshold and rounds < self.config.max_rounds:
            delta.update(
                _reviews={self.node_id: {"rounds": rounds}},
                _routes={self.node_id: AGAIN},
                review_feedback=issues or f"the review scored {score:.2f}, below {threshold:.2f}",
                messages=[_message(self.agent, status="revise", **fields)],
            )
            return delta
        if score is None:
            fields.update(status="failed", error=f"{self.label}: no score: {issues}", error_type="review")
        elif score < threshold:
            error = (
                f"{self.label}: the output scored {score:.2f}, below confidenceThreshold {threshold:.2f}, "
                f"after {rounds} round(s) (maxIterations={self.config.max_rounds}); it goes on as it is"
            )
            fields.update(status="failed", error=error, error_type="bound")
        else:
            fields["status"] = "completed"
        delta.update(
            _reviews={self.node_id: {"rounds": 0}},
            _routes={self.node_id: PASS},
            review_feedback=None,
            messages=[_message(self.agent, **fields)],
        )
        return delta


def review_route(node_id: str, plan: ReviewPlan) -> tuple[Callable[[Mapping[str, Any]], Any], list[str]]:
    """The Self-Review's route: back to the checked node, or on."""
    after = plan.exits or [END_NODE]

    def route(state: Mapping[str, Any]) -> Any:
        return plan.checked if (state.get("_routes") or {}).get(node_id) == AGAIN else after

    return route, sorted({plan.checked, *after})
