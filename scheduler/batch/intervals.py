"""Sets of partition indexes kept as disjoint half-open ranges: a year of hourly successes with
no gap is one range, not 8 760 entries."""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterable, Iterator


class Intervals:
    """An immutable set of integers as sorted, disjoint, non-touching ranges [lo, hi)."""

    __slots__ = ("_his", "_los")

    def __init__(self, ranges: Iterable[tuple[int, int]] = ()) -> None:
        los: list[int] = []
        his: list[int] = []
        for lo, hi in sorted(r for r in ranges if r[0] < r[1]):
            if his and lo <= his[-1]:
                his[-1] = max(his[-1], hi)
            else:
                los.append(lo)
                his.append(hi)
        self._los = tuple(los)
        self._his = tuple(his)

    @property
    def ranges(self) -> tuple[tuple[int, int], ...]:
        return tuple(zip(self._los, self._his, strict=True))

    def __contains__(self, n: object) -> bool:
        if not isinstance(n, int):
            return False
        i = bisect_right(self._los, n) - 1
        return i >= 0 and n < self._his[i]

    def __len__(self) -> int:
        return sum(hi - lo for lo, hi in self.ranges)

    def __iter__(self) -> Iterator[int]:
        for lo, hi in self.ranges:
            yield from range(lo, hi)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Intervals) and self.ranges == other.ranges

    def __hash__(self) -> int:
        return hash(self.ranges)

    def __repr__(self) -> str:
        return f"Intervals({list(self.ranges)})"

    def count_between(self, lo: int, hi: int) -> int:
        """How many members lie in [lo, hi)."""
        return sum(max(min(b, hi) - max(a, lo), 0) for a, b in self.ranges)

    def covers(self, lo: int, hi: int) -> bool:
        """Whether every integer of [lo, hi) is in the set."""
        i = bisect_right(self._los, lo) - 1
        return lo >= hi or (i >= 0 and hi <= self._his[i])

    def next_missing(self, n: int) -> int:
        """The smallest integer >= n not in the set."""
        i = bisect_right(self._los, n) - 1
        return self._his[i] if i >= 0 and n < self._his[i] else n

    @property
    def last(self) -> int | None:
        """The largest member, or None when empty."""
        return self._his[-1] - 1 if self._his else None

    def with_range(self, lo: int, hi: int) -> Intervals:
        return Intervals((*self.ranges, (lo, hi)))

    def with_(self, n: int) -> Intervals:
        return self.with_range(n, n + 1)

    def without_range(self, lo: int, hi: int) -> Intervals:
        kept: list[tuple[int, int]] = []
        for a, b in self.ranges:
            kept.extend(r for r in ((a, min(b, lo)), (max(a, hi), b)) if r[0] < r[1])
        return Intervals(kept)

    def without(self, n: int) -> Intervals:
        return self.without_range(n, n + 1)

    def shifted(self, k: int) -> Intervals:
        return Intervals((lo + k, hi + k) for lo, hi in self.ranges)
