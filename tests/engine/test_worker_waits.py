"""The worker's waits on its actors end: a stuck TopicSupervisor stops the worker, not hangs it."""

from __future__ import annotations

import pykka
import pytest

from scheduler.errors import SchedulerError
from scheduler.worker import _answer


def test_an_answer_that_never_comes_raises_an_error_naming_the_question_and_the_wait():
    never: pykka.ThreadingFuture[int] = pykka.ThreadingFuture()
    with pytest.raises(SchedulerError, match=r"did not answer 'persist' within 0\.05 s"):
        _answer(never, 0.05, "persist")


def test_an_answer_that_comes_is_returned():
    future: pykka.ThreadingFuture[int] = pykka.ThreadingFuture()
    future.set(7)
    assert _answer(future, 1.0, "owned") == 7
