"""Backoff (kafkalog.retry), the one retry policy: growing waits up to a cap, never past the budget,
no wait at all once the budget or the attempts are spent. A fake clock: no test sleeps."""

from __future__ import annotations

import pytest

from kafkalog.retry import Backoff


class Clock:
    def __init__(self) -> None:
        self.now = 100.0
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(round(seconds, 6))
        self.now += seconds


def test_waits_grow_to_the_cap_and_stop_at_the_budget() -> None:
    clock = Clock()
    backoff = Backoff(first=0.1, cap=0.5, budget_s=1.5, clock=clock, sleep=clock.sleep)
    while backoff.wait():
        pass
    assert clock.slept == [0.1, 0.2, 0.4, 0.5, 0.3]  # the last wait ends exactly at the budget
    assert backoff.spent and backoff.elapsed == pytest.approx(1.5) and backoff.made == 6
    assert not backoff.wait() and len(clock.slept) == 5, "a spent backoff never sleeps"


def test_attempts_limit_the_tries() -> None:
    clock = Clock()
    backoff = Backoff(first=0.2, cap=1.0, attempts=3, clock=clock, sleep=clock.sleep)
    assert [backoff.wait() for _ in range(4)] == [True, True, False, False]
    assert clock.slept == [0.2, 0.4] and backoff.made == 3


def test_a_zero_budget_allows_the_first_attempt_only() -> None:
    clock = Clock()
    backoff = Backoff(budget_s=0, clock=clock, sleep=clock.sleep)
    assert backoff.spent and not backoff.wait() and clock.slept == []


def test_time_spent_in_the_attempts_counts() -> None:
    clock = Clock()
    backoff = Backoff(first=1.0, cap=1.0, budget_s=5, clock=clock, sleep=clock.sleep)
    clock.now += 4.5  # a slow first attempt
    assert backoff.wait() and clock.slept == [0.5]
    assert not backoff.wait()


@pytest.mark.parametrize(("first", "cap", "factor"), [(-1, 1, 2), (2, 1, 2), (0.1, 1, 0.5)])
def test_a_policy_that_cannot_work_is_refused(first: float, cap: float, factor: float) -> None:
    with pytest.raises(ValueError, match="need 0 <= first <= cap and factor >= 1"):
        Backoff(first=first, cap=cap, factor=factor)
