"""Which incarnation of the topic a committed offset belongs to: Kafka's topic IDs.

A topic deleted and created again under the same name is a new topic with a new ID (KIP-516),
its offsets starting again at 0. A worker that ran across the deletion still holds its old
offsets and commits them again once the name exists again; the next owner of a partition would
then start there and skip the new records before it.

So every commit names the topic ID it was made on, in front of the commit's metadata (Kafka keeps
4096 bytes by default; the reload mark stays under 3800). A committed offset that names another
ID is one of a deleted topic: the partition is read from its first record (stored tasks are
written again, idempotently by key). Commits that name no ID (another tool's) are taken as they
are.
"""

from __future__ import annotations

_TAG = "topic-id:"
_END = " "
"""Ends the ID: base64 (Kafka's text form of a topic ID) has no space."""
_NO_ID = "AAAAAAAAAAAAAAAAAAAAAA"
"""The all-zero ID brokers before Kafka 2.8 (or topics made before their upgrade) answer."""


def tagged(topic_id: str | None, metadata: str) -> str:
    """`metadata` as committed on the topic whose ID is `topic_id` (unchanged without one)."""
    return metadata if topic_id is None else f"{_TAG}{topic_id}{_END}{metadata}"


def untagged(metadata: str) -> tuple[str | None, str]:
    """(the topic ID a commit names or None, the commit's own metadata)."""
    if not metadata.startswith(_TAG):
        return None, metadata
    topic_id, _, rest = metadata[len(_TAG) :].partition(_END)
    return topic_id, rest


def known(topic_id: str) -> str | None:
    """`topic_id` as the brokers answered it, or None if they do not keep IDs."""
    return None if not topic_id or topic_id == _NO_ID else topic_id


def committed_elsewhere(metadata: str, topic_id: str | None) -> str | None:
    """The ID of the earlier topic a commit with `metadata` was made on, if it is not the topic
    whose ID is `topic_id` (None when it is, or when either side names no ID)."""
    committed_on, _ = untagged(metadata)
    if committed_on is None or topic_id is None or committed_on == topic_id:
        return None
    return committed_on
