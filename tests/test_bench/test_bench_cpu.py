"""The CPU-per-message row of `python -m bench`: three real bot processes under one load."""

from __future__ import annotations

import os

import pytest

from bench import bench_cpu


@pytest.mark.slow
def test_every_bot_answers_every_message_and_each_is_charged_its_own_cpu() -> None:
    result = bench_cpu.run(chats=3, per_chat=2)
    for bot in (result.echo, result.naive, result.ours):
        assert bot.answered == bot.messages == 6, bot.label
        assert bot.cpu_seconds > 0, bot.label
    assert result.echo.model_calls == 0
    assert result.naive.model_calls == 6
    assert result.ours.model_calls >= 6
    # connections are pooled: never more than the chats served at once
    assert 0 < result.ours.connections <= 3
    assert result.vs_echo == result.ours.ms_per_message / result.echo.ms_per_message
    names = [name for name, _, _ in result.targets()]
    assert any("naive" in name for name in names)
    assert any("echo" in name for name in names)
    assert "`tgbot run` (SQLite)" in result.markdown()


def test_cpu_seconds_reads_this_process_user_and_system_time() -> None:
    before = bench_cpu.cpu_seconds(os.getpid())
    sum(n * n for n in range(3_000_000))  # about 0.1 s of CPU: more than a clock tick
    assert bench_cpu.cpu_seconds(os.getpid()) > before
