"""Quotas: at most `limit` calls in any `per_s` seconds per tool, principal, user or run; over quota the
call fails with error_type "quota" and retry_after_s, and is not counted; counts in memory or PostgreSQL."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from echo_tools import Quota, ToolContext, ToolDef
from echo_tools.governance.quotas import MemoryQuotaCounter

from ._executor_support import local_tool, make_executor

COUNT_SCHEMA = {"type": "object", "properties": {"key": {"type": "string"}}, "required": ["key"]}


def counted(name: str, *quotas: dict[str, object]) -> dict[str, object]:
    return local_tool(name, "count_calls", input_schema=COUNT_SCHEMA, quotas=list(quotas))


def test_a_tool_quota_refuses_the_call_past_its_limit_with_retry_after() -> None:
    executor, log = make_executor(counted("Q1", {"limit": 2, "per_s": 60}))
    results = [executor.invoke_sync("Q1", {"key": "gov-q1"}) for _ in range(3)]
    assert [r.success for r in results] == [True, True, False]
    over = results[2]
    assert over.error_type == "quota"
    assert 0 < over.metadata["retry_after_s"] <= 60
    assert "2 calls per 60 s" in (over.error or "")
    assert over.metadata["quota"] == {"limit": 2, "per_s": 60.0, "scope": "tool"}
    assert results[1].output == 2  # the refused call never reached the tool
    assert [e.type for e in log.events][-1] == "tool.failed"


def test_a_user_quota_counts_each_user_apart_and_calls_without_a_user_together() -> None:
    executor, _ = make_executor(counted("Q2", {"limit": 3, "per_s": 60, "scope": "user"}))
    alice, bob = ToolContext(user_id="alice"), ToolContext(user_id="bob")
    assert all(executor.invoke_sync("Q2", {"key": "gov-q2"}, alice).success for _ in range(3))
    assert executor.invoke_sync("Q2", {"key": "gov-q2"}, alice).error_type == "quota"
    assert executor.invoke_sync("Q2", {"key": "gov-q2"}, bob).success
    refused = executor.invoke_sync("Q2", {"key": "gov-q2"}, alice)
    assert "for user 'alice'" in (refused.error or "")


def test_a_run_quota_counts_each_run_apart() -> None:
    executor, _ = make_executor(counted("Q3", {"limit": 1, "per_s": 60, "scope": "run"}))
    assert executor.invoke_sync("Q3", {"key": "gov-q3"}, ToolContext(run_id="r1")).success
    assert executor.invoke_sync("Q3", {"key": "gov-q3"}, ToolContext(run_id="r1")).error_type == "quota"
    assert executor.invoke_sync("Q3", {"key": "gov-q3"}, ToolContext(run_id="r2")).success


def test_an_executor_quota_counts_every_tool_together() -> None:
    executor, _ = make_executor(
        counted("Q4a"), counted("Q4b"), quotas=[Quota(limit=2, per_s=60, scope="principal")]
    )
    assert executor.invoke_sync("Q4a", {"key": "gov-q4"}).success
    assert executor.invoke_sync("Q4b", {"key": "gov-q4"}).success
    over = executor.invoke_sync("Q4a", {"key": "gov-q4"})
    assert over.error_type == "quota" and "executor quota" in (over.error or "")


def test_the_window_slides_a_call_fits_again_once_the_oldest_leaves() -> None:
    now = [100.0]
    counter = MemoryQuotaCounter(clock=lambda: now[0])
    assert counter.take("k", 2, 60) == 0.0
    now[0] = 130.0
    assert counter.take("k", 2, 60) == 0.0
    assert counter.take("k", 2, 60) == pytest.approx(30.0)  # the first call leaves the window at 160
    now[0] = 160.0
    assert counter.take("k", 2, 60) == 0.0
    assert counter.take("k", 2, 60) == pytest.approx(30.0)  # now the one of 130 is the oldest


def test_a_bad_quota_is_refused_at_definition_naming_the_field() -> None:
    with pytest.raises(ValidationError, match="limit"):
        ToolDef.model_validate({"name": "x", "quotas": [{"limit": 0, "per_s": 60}]})
    with pytest.raises(ValidationError, match="scope"):
        Quota.model_validate({"limit": 1, "per_s": 60, "scope": "planet"})


def test_quotas_round_trip_through_storage() -> None:
    tool = ToolDef.model_validate(counted("Q5", {"limit": 3, "per_s": 60, "scope": "user"}))
    again = ToolDef.model_validate(tool.to_storage_dict())
    assert again.quotas == [Quota(limit=3, per_s=60, scope="user")]


def test_two_replicas_on_one_postgresql_share_one_count(dsn: str) -> None:
    from echo_tools.governance.pg import PgQuotaCounter
    from echo_tools.pg.database import PgDatabase

    quota = {"limit": 3, "per_s": 60, "scope": "user"}
    with PgDatabase(dsn) as first_db, PgDatabase(dsn) as second_db:  # two pools, as two replicas have
        first, _ = make_executor(counted("Q6", quota), quota_counter=PgQuotaCounter(first_db))
        second, _ = make_executor(counted("Q6", quota), quota_counter=PgQuotaCounter(second_db))
        alice = ToolContext(user_id="alice")
        outcomes = [
            (first if i % 2 else second).invoke_sync("Q6", {"key": "gov-q6"}, alice).error_type
            for i in range(4)
        ]
        assert outcomes == [None, None, None, "quota"]
        refused = first.invoke_sync("Q6", {"key": "gov-q6"}, alice)
        assert 0 < refused.metadata["retry_after_s"] <= 60
        assert second.invoke_sync("Q6", {"key": "gov-q6"}, ToolContext(user_id="bob")).success


async def test_the_postgresql_count_is_taken_off_the_event_loop(dsn: str) -> None:
    from echo_tools.governance.pg import PgQuotaCounter

    counter = PgQuotaCounter(dsn)
    try:
        executor, _ = make_executor(counted("Q7", {"limit": 1, "per_s": 60}), quota_counter=counter)
        assert (await executor.invoke("Q7", {"key": "gov-q7"})).success
        assert (await executor.invoke("Q7", {"key": "gov-q7"})).error_type == "quota"
    finally:
        counter.close()


def test_a_full_window_refuses_until_its_oldest_call_leaves_and_calls_without_a_user_share_it() -> None:
    now = [0.0]
    counter = MemoryQuotaCounter(clock=lambda: now[0])
    window = counter.window("tool|user:|3/10", 3, 10)
    assert [window.take(None) for _ in range(2)] == [0.0, 0.0]  # no user: one shared count
    assert window.take("") == 0.0  # an empty user id is no user
    assert window.take("ann") == 0.0  # a user counts apart
    now[0] = 4.0
    assert window.take(None) == pytest.approx(6.0)  # refused, not counted: the oldest leaves at 10
    now[0] = 10.0  # the three of 0.0 have left the window (10 - 10 = 0): three fit again
    assert [window.take(None) for _ in range(3)] == [0.0, 0.0, 0.0]
    assert window.take(None) == pytest.approx(10.0)


def test_threads_taking_at_once_are_counted_exactly_up_to_the_limit() -> None:
    import threading

    window = MemoryQuotaCounter().window("k", 100, 3600)
    start, answers = threading.Barrier(8), []

    def caller() -> None:
        start.wait()
        answers.extend(window.take("ann") for _ in range(50))

    threads = [threading.Thread(target=caller) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert answers.count(0.0) == 100 and len(answers) == 400  # 100 counted, 300 refused


def _refused_by_the_second_quota_is_not_counted_by_the_first(**counter: object) -> None:
    # a tool quota of 3 calls shared by everyone, and an executor quota of 1 call per user
    executor, _ = make_executor(
        counted("Q9", {"limit": 3, "per_s": 60}),
        quotas=[Quota(limit=1, per_s=60, scope="user")],
        **counter,
    )
    ann, ben = ToolContext(user_id="ann"), ToolContext(user_id="ben")
    outcomes = [executor.invoke_sync("Q9", {"key": "gov-q9"}, ann).error_type for _ in range(4)]
    assert outcomes == [None, "quota", "quota", "quota"]  # refused by ann's quota: 1 call ran
    assert executor.invoke_sync("Q9", {"key": "gov-q9"}, ben).success  # the tool's quota counted 1, not 4
    assert executor.invoke_sync("Q9", {"key": "gov-q9"}, ToolContext(user_id="cy")).success
    over = executor.invoke_sync("Q9", {"key": "gov-q9"}, ToolContext(user_id="di"))
    assert over.error_type == "quota" and "tool quota" in (over.error or "")  # 3 calls ran: now it is full


def test_a_call_refused_by_a_later_quota_is_not_counted_by_an_earlier_one() -> None:
    _refused_by_the_second_quota_is_not_counted_by_the_first()


def test_a_call_refused_by_a_later_quota_is_not_counted_on_postgresql_either(dsn: str) -> None:
    from echo_tools.governance.pg import PgQuotaCounter

    counter = PgQuotaCounter(dsn)
    try:
        _refused_by_the_second_quota_is_not_counted_by_the_first(quota_counter=counter)
    finally:
        counter.close()
