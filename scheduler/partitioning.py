"""Kafka's default partitioner, so every adapter puts a key on the same partition number.

Kafka's Java producer (and confluent-kafka with `partitioner=murmur2_random`) sends a keyed
record to `toPositive(murmur2(key)) % partitions`. The embedded log computes the same, so data
written in embedded mode keeps its partition numbers if it is ever moved to Kafka, and tests can
predict partitions without a broker.
"""

from __future__ import annotations

_SEED = 0x9747B28C
_M = 0x5BD1E995
_MASK = 0xFFFFFFFF


def murmur2(data: bytes) -> int:
    """MurmurHash2 as `org.apache.kafka.common.utils.Utils.murmur2`, as a signed 32-bit int."""
    length = len(data)
    h = (_SEED ^ length) & _MASK
    whole = length - length % 4
    for i in range(0, whole, 4):
        k = data[i] | data[i + 1] << 8 | data[i + 2] << 16 | data[i + 3] << 24
        k = (k * _M) & _MASK
        k ^= k >> 24
        k = (k * _M) & _MASK
        h = ((h * _M) & _MASK) ^ k
    tail = length % 4
    if tail == 3:
        h ^= data[whole + 2] << 16
    if tail >= 2:
        h ^= data[whole + 1] << 8
    if tail >= 1:
        h ^= data[whole]
        h = (h * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def partition_for(key: bytes, partitions: int) -> int:
    """The partition Kafka's default partitioner picks for a non-null `key`."""
    return (murmur2(key) & 0x7FFFFFFF) % partitions
