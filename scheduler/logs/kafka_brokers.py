"""Whether a running client reaches any Kafka broker, from librdkafka's statistics.

librdkafka says when its brokers go away but never that they are back; its statistics report
each broker connection's state, so the probes can say "no broker answers" exactly while it lasts.

They also show a client that knows no broker at all: a metadata answer listing none (a KRaft
broker sends one while it shuts down) makes librdkafka drop every broker it knew, and it never
connects again (librdkafka issue 5301). `known_none_for` says how long that has lasted; the
consumer and the producer replace such a client.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from typing import Any

from scheduler.logs.kafka_config import logger
from scheduler.logs.kafka_security import RefusalRecorder

SAY_AFTER_S = 3.0
"""How long no broker must have answered before the worker logs it and its probes name it: a
broker that restarts in a second or two is not worth two WARNING lines."""
RENEW_AFTER_S = 5.0
"""How long a consumer's or producer's client may know no broker at all before it is replaced
(`_renew_if_stranded`): five statistics reports."""


_NOT_BROKERS = frozenset({"logical", "internal"})
"""Sources of the entries of librdkafka's broker list that are no connection to a broker: the
group coordinator's alias, and the client's internal pseudo-broker."""


class BrokerWatch:
    """A `stats_cb` for one client: notes when no broker connection is up, and when one is
    again. librdkafka calls it on the polling thread; `problem` reads it from any thread.

    `excused` says whether the brokers are refusing the client's login: then they do answer,
    and the client's `RefusalRecorder` says what to change instead."""

    def __init__(
        self,
        bootstrap: str,
        *,
        client: str,
        excused: Callable[[], bool] = lambda: False,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._bootstrap = bootstrap
        self._client = client
        self._excused = excused
        self._clock = clock
        self._down_since: float | None = None
        self._said = False
        """Whether the outage going on was logged (so its end is logged too)."""
        self._none_known_since: float | None = None
        """Since when the reports list no broker at all (only the logical GroupCoordinator)."""

    def __call__(self, stats: str) -> None:
        try:
            brokers = json.loads(stats)["brokers"]
            up = any(broker.get("state") == "UP" for broker in brokers.values())
            known = any(broker.get("source") not in _NOT_BROKERS for broker in brokers.values())
        except (ValueError, KeyError, TypeError, AttributeError):
            return  # a report we cannot read says nothing either way
        now = self._clock()
        if known:
            self._none_known_since = None
        elif self._none_known_since is None:
            self._none_known_since = now
        if up:
            since, said = self._down_since, self._said
            self._down_since, self._said = None, False
            if said and since is not None:
                logger.warning(
                    "%s: Kafka at %s answers again, after %.0f s or more with no broker up",
                    self._client,
                    self._bootstrap,
                    now - since,
                )
            return
        if self._down_since is None:
            self._down_since = now
        if not self._said and now - self._down_since >= SAY_AFTER_S and not self._excused():
            self._said = True
            logger.warning(
                "%s: no Kafka broker at %s has answered for %.0f s or more; the consumer keeps "
                "trying and loses nothing",
                self._client,
                self._bootstrap,
                now - self._down_since,
            )

    def known_none_for(self) -> float:
        """For how many seconds the reports have listed no broker at all (0 while they list
        one): the client has none left to connect to (librdkafka issue 5301)."""
        since = self._none_known_since
        return 0.0 if since is None else self._clock() - since

    def say_renewing(self, stranded_s: float, starting: str) -> None:
        """Log that the client, which has known no broker for `stranded_s`, is replaced by a
        new one (`starting` says what that does)."""
        logger.warning(
            "%s: librdkafka has known no Kafka broker for %.0f s (a metadata answer listed none, "
            "as a broker sends while it shuts down, and it dropped every broker it knew: "
            "librdkafka issue 5301), so it would never reconnect; starting a new %s",
            self._client,
            stranded_s,
            starting,
        )

    def renewed(self) -> None:
        """The consumer replaced its client: the reports of the old one say nothing more."""
        self._none_known_since = None

    def problem(self) -> str | None:
        """What the probes say once no broker has answered for `SAY_AFTER_S`; None before and
        while one does. The grace is the log's: a client moving from its bootstrap connection
        to the broker it learned, or reconnecting after a broker closed a connection, has no
        connection up for a report or so, and a probe naming that as an outage would flap."""
        since = self._down_since
        if since is None or self._clock() - since < SAY_AFTER_S:
            return None
        return (
            f"no Kafka broker at {self._bootstrap} has answered for {self._clock() - since:.0f} s "
            "or more: the worker loses nothing meanwhile (accepted tasks are in the topic and the "
            "store), gives its partitions up once session.timeout.ms passes and rejoins its group "
            "by itself when a broker answers; if this lasts, check that the brokers are up and "
            "reachable from here"
        )


def watch_client(
    bootstrap: str,
    config: Mapping[str, Any],
    *,
    client: str,
    meanwhile: str,
    clock: Callable[[], float],
) -> tuple[RefusalRecorder, BrokerWatch]:
    """The `error_cb` and the `stats_cb` of a running `client` (see `RefusalRecorder`): the
    brokers that refuse its login do answer, so no broker answering is not said meanwhile."""
    refusals = RefusalRecorder(bootstrap, config, client=client, meanwhile=meanwhile)
    return refusals, BrokerWatch(
        bootstrap, client=client, excused=lambda: refusals.recent() is not None, clock=clock
    )
