"""The pure cache plan: points on what the next request repeats, read points checked."""

from __future__ import annotations

from bot.context.cache_plan import ReadPoints, plan_cache, session_cache_key
from bot.context.compaction import SUMMARY_PREFIX
from bot.context.history_trim import breadcrumb_message
from bot.domain.messages import ChatMessage, ToolCall

SYSTEM = ChatMessage(role="system", content="prompt")
SUMMARY = ChatMessage(role="user", content=f"{SUMMARY_PREFIX} m1–m9]\nthey talked")


def user(text: str) -> ChatMessage:
    return ChatMessage(role="user", content=text)


def test_the_first_request_of_a_turn_marks_the_message_before_the_current_one() -> None:
    messages = [SYSTEM, breadcrumb_message(), SUMMARY, user("a"), user("b"), user("now + blocks")]
    plan = plan_cache(messages, current=5, session_key="k").plan
    assert (plan.system_end, plan.window_head, plan.previous_read, plan.last_stable) == (
        0,
        2,
        None,
        4,
    )
    assert 5 not in plan.points()


def test_a_tool_loop_marks_its_last_result_and_the_next_turn_reads_the_turn_point() -> None:
    call = ToolCall(id="c1", name="lookup")
    turn = [SYSTEM, user("a"), user("now + blocks")]
    loop = [
        *turn,
        ChatMessage(role="assistant", tool_calls=(call,)),
        ChatMessage(role="tool", content="found", tool_call_id="c1"),
    ]
    first = plan_cache(turn, current=2)
    second = plan_cache(loop, current=2, previous=first.remember)
    assert (second.plan.previous_read, second.plan.last_stable) == (1, 4)
    points = ReadPoints()
    points.remember(7, "m", first.remember)
    points.remember(7, "m", second.remember)
    # next turn: the current message lost its blocks, so only the turn point still holds
    next_turn = [SYSTEM, user("a"), user("now"), loop[3], loop[4], user("reply"), user("new")]
    third = plan_cache(next_turn, current=6, previous=points.get(7, "m"))
    assert third.plan.previous_read == 1
    assert third.plan.last_stable == 5


def test_a_read_point_whose_prefix_changed_is_not_read() -> None:
    before = plan_cache([SYSTEM, user("a"), user("b"), user("now")], current=3)
    moved = [SYSTEM, breadcrumb_message(), user("b"), user("c"), user("now")]
    assert plan_cache(moved, current=4, previous=before.remember).plan.previous_read is None
    prompt = [ChatMessage(role="system", content="new prompt"), user("a"), user("b"), user("x")]
    assert plan_cache(prompt, current=3, previous=before.remember).plan.previous_read is None


def test_one_opaque_key_per_session_and_a_bounded_memory() -> None:
    assert session_cache_key(1) == session_cache_key(1) != session_cache_key(2)
    assert session_cache_key(1).startswith("s")
    assert len(session_cache_key(1)) == 25
    points = ReadPoints(max_sessions=2)
    remembered = plan_cache([SYSTEM, user("a"), user("now")], current=2).remember
    for session in (1, 2, 3):
        points.remember(session, "m", remembered)
    assert points.get(1, "m") == ()
    assert points.get(3, "m") == remembered
    assert points.get(3, "other model") == ()


def test_a_route_without_markers_gets_the_positions_and_no_digests() -> None:
    turn = [SYSTEM, breadcrumb_message(), SUMMARY, user("a"), user("now + blocks")]
    marked = plan_cache(turn, current=4, session_key="k")
    plain = plan_cache(turn, current=4, session_key="k", digests=False)
    assert plain.remember == ()
    assert marked.remember, "a marking route remembers where it wrote"
    assert plain.plan == marked.plan
    later = [*turn[:4], user("now"), user("next")]
    read = plan_cache(later, current=5, previous=marked.remember, digests=False)
    assert read.plan.previous_read is None, "no digest, so no read point is claimed"
