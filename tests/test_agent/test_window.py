"""`Windows` owns a turn's window: the window is plain state, every move on it is the owner's."""

from __future__ import annotations

import typing
from dataclasses import fields

from bot.agent.window import Windows
from bot.agent.window_fold import WindowFolds
from bot.agent.window_state import ConversationWindow


def test_the_window_holds_no_reference_to_its_owner() -> None:
    hints = typing.get_type_hints(ConversationWindow)
    assert all(hints[f.name] is not Windows for f in fields(ConversationWindow))
    assert not any(
        callable(getattr(ConversationWindow, name, None)) for name in ("drop_oldest", "forget")
    )
    assert callable(WindowFolds.drop_oldest)
    assert callable(WindowFolds.forget)
