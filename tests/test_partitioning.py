"""Our murmur2 must match Kafka's byte for byte, or keys land on other partitions than Java's."""

from __future__ import annotations

import pytest

from scheduler.partitioning import murmur2, partition_for

# org.apache.kafka.common.utils.UtilsTest#testMurmur2
KAFKA_VECTORS = [
    (b"21", -973932308),
    (b"foobar", -790332482),
    (b"a-little-bit-long-string", -985981536),
    (b"a-little-bit-longer-string", -1486304829),
    (b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971),
    (b"abc", 479470107),
]


@pytest.mark.parametrize(("key", "expected"), KAFKA_VECTORS)
def test_murmur2_matches_kafkas_utils_test_vectors(key: bytes, expected: int) -> None:
    assert murmur2(key) == expected


def test_partition_for_masks_the_sign_bit_like_kafkas_to_positive() -> None:
    assert partition_for(b"foobar", 100) == (-790332482 & 0x7FFFFFFF) % 100
    assert all(0 <= partition_for(f"k{i}".encode(), 7) < 7 for i in range(1000))
