"""Index sets as ranges: the same members as a plain set, whatever is added or taken away."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from scheduler.batch.intervals import Intervals

changes = st.lists(st.tuples(st.booleans(), st.integers(-20, 20), st.integers(0, 10)), max_size=30)


@given(changes, st.integers(-25, 25), st.integers(0, 8))
def test_intervals_hold_exactly_the_members_a_set_would(
    steps: list[tuple[bool, int, int]], probe: int, width: int
) -> None:
    members: set[int] = set()
    intervals = Intervals()
    for adding, lo, length in steps:
        span = set(range(lo, lo + length))
        if adding:
            members |= span
            intervals = intervals.with_range(lo, lo + length)
        else:
            members -= span
            intervals = intervals.without_range(lo, lo + length)
    assert sorted(intervals) == sorted(members)
    assert (probe in intervals) == (probe in members)
    assert intervals.covers(probe, probe + width) == all(
        n in members for n in range(probe, probe + width)
    )
    missing = intervals.next_missing(probe)
    assert missing not in members and all(n in members for n in range(probe, missing))
    assert intervals.count_between(probe, probe + width) == len(
        members & set(range(probe, probe + width))
    )
    assert intervals.last == (max(members) if members else None)
    assert sorted(intervals.shifted(3)) == sorted(n + 3 for n in members)
    # Touching ranges merge: the representation is canonical.
    ranges = intervals.ranges
    assert all(ranges[i][1] < ranges[i + 1][0] for i in range(len(ranges) - 1))
