from __future__ import annotations

import pytest

from tests.fakes import RecordingMessenger


@pytest.fixture
def messenger() -> RecordingMessenger:
    return RecordingMessenger()
