"""Connecting to Cassandra and running statements with bounded retries.

Kept apart from the store so that the store reads as table logic only. The driver is imported
here, in `cassandra_security.py` (logins, TLS) and in `cassandra.py`, and nowhere else in the
product.
"""

from __future__ import annotations

import logging
import re
import socket
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from functools import partial
from typing import TYPE_CHECKING, Any, TypeVar, cast

from cassandra import (
    ConsistencyLevel,
    InvalidRequest,
    OperationTimedOut,
    ProtocolVersion,
    ReadTimeout,
    Unauthorized,
    Unavailable,
    UnresolvableContactPoints,
    WriteTimeout,
)
from cassandra.cluster import (
    EXEC_PROFILE_DEFAULT,
    Cluster,
    ExecutionProfile,
    NoHostAvailable,
    Session,
)
from cassandra.connection import ProtocolError
from cassandra.policies import (
    DCAwareRoundRobinPolicy,
    ExponentialReconnectionPolicy,
    TokenAwarePolicy,
)
from cassandra.protocol import ConfigurationException as CqlConfigurationException
from cassandra.protocol import ServerError
from cassandra.query import BatchStatement, BatchType, PreparedStatement, tuple_factory

from scheduler.errors import BackendUnavailableError, ConfigurationError
from scheduler.stores._retry import RetryPolicy, call_with_retries
from scheduler.stores.cassandra_security import (
    not_permitted,
    per_node,
    refusal,
    server_words,
    unreachable_hint,
)
from scheduler.wording import counted

if TYPE_CHECKING:
    from scheduler.stores.cassandra import CassandraTaskStore

log = logging.getLogger(__name__)

T = TypeVar("T")

#: How long opening a store waits for the schema another process is creating to reach the node
#: it asks (a table opening, or not known there yet) before the error stands.
SCHEMA_SETTLE_S = 60.0

#: Errors worth another try: the cluster answered "not now" or did not answer in time. Failures
#: such as ReadFailure (too many tombstones) or InvalidRequest repeat identically, so they are not.
TRANSIENT: tuple[type[BaseException], ...] = (
    Unavailable,
    WriteTimeout,
    ReadTimeout,
    OperationTimedOut,
    NoHostAvailable,
)

#: Requests one store has in flight at most (`Runner.many`).
_CONCURRENCY = 64

#: The longest wait for any one request beyond its own timeout (see `Runner._bounded`).
_HANG_LIMIT_S = 5.0

Params = Sequence[Any]
Item = tuple[Any, Params | None]
"""A statement (prepared or batch) and its parameters, as `Session.execute_async` takes them."""

#: Single-partition batches stay under Cassandra's batch_size_warn_threshold (5 KiB by default,
#: counted on the mutation, so the estimate of the values below leaves room for overhead).
_BATCH_BYTES = 3000
_BATCH_ROWS = 50


ANY_REFUSED = (
    "reads cannot use ANY (Cassandra refuses them), and a write at ANY is acknowledged once a "
    "coordinator holds a hint for it, before any replica has it, so a task could be lost with "
    "that node"
)


def consistency_level(name: str) -> int:
    """The driver's value of a level name such as "LOCAL_QUORUM"; the serial levels (for
    lightweight transactions only) and ANY are refused: the store reads and writes at one."""
    level = name.strip().upper()
    if level == "ANY":
        raise ConfigurationError(
            f"Cassandra consistency level {name!r} cannot be used: {ANY_REFUSED}; use ONE or "
            "above (LOCAL_QUORUM by default)"
        )
    levels = {
        known: value
        for known, value in ConsistencyLevel.name_to_value.items()
        if not known.endswith("SERIAL") and known != "ANY"
    }
    try:
        return int(levels[level])
    except KeyError:
        raise ConfigurationError(
            f"unknown Cassandra consistency level {name!r}; use one of {', '.join(sorted(levels))}"
        ) from None


def open_runner(store: CassandraTaskStore, policy: RetryPolicy) -> tuple[Cluster, Runner]:
    """Connect with the store's settings (retrying a node that is still starting), or raise
    `BackendUnavailableError` saying which setting to fix; a refused login or TLS handshake
    raises `ConfigurationError` at once. Statements go token-aware to a replica, DC-aware so
    that LOCAL_* consistency never waits on another data center; protocol v4 (Cassandra 3.0 to
    5.x) spares the driver a probe."""
    local_dc, credentials, tls, target = store.local_dc, store.credentials, store.tls, store.target
    profile = ExecutionProfile(
        load_balancing_policy=TokenAwarePolicy(DCAwareRoundRobinPolicy(local_dc=local_dc)),
        consistency_level=store.consistency,
        # The LWT's Paxos round spans all DCs so that workers in different DCs agree.
        serial_consistency_level=ConsistencyLevel.SERIAL,
        request_timeout=store.request_timeout_s,
        row_factory=tuple_factory,
    )
    auth_provider = None if credentials is None else credentials.provider()
    ssl_context = None if tls is None else tls.context()

    def attempt() -> tuple[Cluster, Session]:
        cluster = Cluster(
            contact_points=list(store.hosts),
            port=store.port,
            protocol_version=ProtocolVersion.V4,
            execution_profiles={EXEC_PROFILE_DEFAULT: profile},
            connect_timeout=store.connect_timeout_s,
            control_connection_timeout=store.connect_timeout_s,
            # The default waits up to 10 minutes between reconnection attempts to a node that
            # went down; a restarted node must be used again within seconds.
            reconnection_policy=ExponentialReconnectionPolicy(base_delay=0.5, max_delay=5.0),
            auth_provider=auth_provider,
            ssl_context=ssl_context,
        )
        try:
            with _driver_quiet_on_this_thread():
                return cluster, cluster.connect()
        except BaseException as error:
            elsewhere = _datacenters_if_not(local_dc, cluster)
            cluster.shutdown()
            if elsewhere:
                raise ConfigurationError(
                    f"SCHEDULER_CASSANDRA_LOCAL_DC={local_dc!r} is no datacenter of the "
                    f"Cassandra cluster at {target}, whose nodes are in {', '.join(elsewhere)}; "
                    "set it to the datacenter this process runs in, or leave it empty to take "
                    "the first contact point's"
                ) from None
            refused = refusal(error, target=target, credentials=credentials) or _foreign(
                error, target
            )
            if refused is not None:
                raise refused from None
            raise

    def describe(error: BaseException) -> str:
        return (
            f"cannot reach Cassandra at {target} ({_why(error)}"
            f"{unreachable_hint(error, tls=tls)}{_silence_hint(error)}); point "
            "SCHEDULER_CASSANDRA_HOSTS (hosts, "
            "comma-separated, or host:port) and SCHEDULER_CASSANDRA_PORT (the port, when the "
            "hosts name none) at a running node, or run `scheduler services up` to start a "
            "local one"
        )

    def announce(error: BaseException, tries: int, took_s: float) -> None:
        # A try can last the whole connect timeout: without these lines a silent address meant
        # a minute without a word before the error. Quick refusals need none.
        if took_s < _SLOW_TRY_S:
            log.debug("Cassandra at %s did not answer (%s); trying again", target, _why(error))
            return
        log.warning(
            "Cassandra at %s did not answer (%s); trying again (%d of %d tries made)",
            target,
            _why(error),
            tries,
            policy.attempts,
        )

    # A host name that does not resolve is retried too: DNS may not know a new node yet.
    cluster, session = call_with_retries(
        attempt,
        policy=policy,
        transient=(*TRANSIENT, UnresolvableContactPoints),
        describe=describe,
        announce=announce,
    )
    return cluster, Runner(session, target=target, concurrency=_CONCURRENCY, policy=policy)


#: A try to connect that failed after this long is announced before the next.
_SLOW_TRY_S = 1.0

#: Where a node listens for clients, when an address turns out to be another server's.
_NATIVE_PORT = "native_transport_port (9042 unless cassandra.yaml says otherwise)"


def _foreign(error: BaseException, target: str) -> ConfigurationError | None:
    """Every node answered, in something other than Cassandra's native protocol: a server that
    speaks first (SSH, SMTP, a database) on the port. Another try gets the same answer."""
    # The driver reads the reply's first byte as the protocol version it cannot speak.
    first_bytes = [
        re.search(r"does not support protocol version (\d+)", str(cause))
        if isinstance(cause, ProtocolError)
        else None
        for cause in per_node(error).values()
    ]
    if not first_bytes or not all(first_bytes):
        return None
    first = int(first_bytes[0].group(1))  # type: ignore[union-attr]  # all() checked it
    shown = f"{first} ({chr(first)!r})" if 32 <= first < 127 else str(first)
    return ConfigurationError(
        f"what answers at {target} does not speak Cassandra's native protocol (its reply "
        f"begins with byte {shown}): another server listens on that port. Point "
        f"SCHEDULER_CASSANDRA_HOSTS and SCHEDULER_CASSANDRA_PORT at a node's {_NATIVE_PORT}"
    )


def _silence_hint(error: BaseException) -> str:
    """For a node silent for the connect timeout: whether its port takes a connection at all
    (then it is most often another server's port: Kafka waits for the rest of what it reads as a
    64 MiB request), or not (a wrong address, or a firewall that drops the packets)."""
    silent = [str(node) for node, cause in per_node(error).items() if _timed_out(cause)]
    if not silent:
        return ""
    host, _, port = silent[0].rpartition(":")
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=2):
            accepted = True
    except (OSError, ValueError):
        accepted = False
    if accepted:
        return (
            f"; {silent[0]} takes connections but never answered Cassandra's handshake: if it "
            "is another server's port (Kafka's 9092, say), point the setting at the node's "
            f"{_NATIVE_PORT}"
        )
    return (
        f"; nothing at {silent[0]} took the connection in time: check the address, and that no "
        "firewall drops the packets"
    )


def _timed_out(cause: object) -> bool:
    return isinstance(cause, OperationTimedOut) or "timed out" in str(cause).lower()


def _datacenters_if_not(local_dc: str | None, cluster: Cluster) -> list[str]:
    """The cluster's datacenters if `local_dc` is set and none of them. The DC-aware policy
    then ignores every node (it uses none in remote datacenters), and the driver's error names
    only the contact points, as for nodes that are down."""
    if not local_dc:
        return []
    known = datacenters(cluster)
    return known if known and local_dc not in known else []


def datacenters(cluster: Cluster) -> list[str]:
    """The datacenters of the nodes the driver has learnt of, sorted."""
    return sorted({host.datacenter for host in cluster.metadata.all_hosts() if host.datacenter})


def _why(error: BaseException) -> str:
    """What went wrong with each node, rather than NoHostAvailable's nested tuple repr."""
    if causes := per_node(error):
        return "; ".join(f"{host}: {server_words(cause)}" for host, cause in causes.items())
    if isinstance(error, UnresolvableContactPoints):
        return "no host name resolves to an address"
    return str(error) or type(error).__name__


def _what_to_do(error: BaseException) -> str:
    """Advice for a request that failed on every try: too few replicas alive for the consistency
    level (nodes down, or a replication factor above the node count, which `schema apply` lets
    through with only the server's warning), or else nodes that did not answer."""
    causes = [error, *per_node(error).values()]
    short = next((cause for cause in causes if isinstance(cause, Unavailable)), None)
    if short is None:
        return "check that the nodes are up and reachable"
    level = ConsistencyLevel.value_to_name.get(short.consistency, short.consistency)
    return (
        f"{level} needs {short.required_replicas} replicas of the data alive, and the "
        f"coordinator counts {short.alive_replicas}: start the nodes that are down, or, if the "
        "keyspace's replication factor is above the number of nodes, lower it (ALTER KEYSPACE) "
        "or SCHEDULER_CASSANDRA_CONSISTENCY"
    )


@contextmanager
def _driver_quiet_on_this_thread() -> Iterator[None]:
    """Silence the driver's log lines about this thread's connecting (a WARNING and an ERROR
    per try before the product's one error that names the setting), and its DSE-only advice on
    a refused login; other threads' records (a running store's reconnections) go through."""
    driver = logging.getLogger("cassandra.cluster")
    connection = logging.getLogger("cassandra.connection")
    this_thread = threading.get_ident()

    def quiet(record: logging.LogRecord) -> bool:
        return record.thread != this_thread

    def no_login_advice(record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith("Failed to authenticate")

    driver.addFilter(quiet)
    connection.addFilter(no_login_advice)
    try:
        yield
    finally:
        driver.removeFilter(quiet)
        connection.removeFilter(no_login_advice)


def statement_batches(
    writes: Sequence[tuple[PreparedStatement, Params]], *, key_columns: int = 2
) -> list[Item]:
    """Writes whose first `key_columns` values (by default (partition, bucket)) are one
    Cassandra partition key, in UNLOGGED batches of a few kilobytes: one mutation on one replica
    set, no batchlog, and one request instead of dozens (the driver's cost is per request).
    Rows of different tables with the same partition key share batches."""
    return unit_batches([(write,) for write in writes], key_columns=key_columns)


Write = tuple[PreparedStatement, Params]
"""One statement and its values."""


def unit_batches(units: Sequence[Sequence[Write]], *, key_columns: int = 2) -> list[Item]:
    """`statement_batches` over units never split: the writes of one unit, of one partition,
    go in one batch that each replica applies as one mutation (a task's final status and the
    delete of its schedule row are durable together)."""
    groups: dict[tuple[Any, ...], list[Sequence[Write]]] = {}
    for unit in units:
        groups.setdefault(tuple(unit[0][1][:key_columns]), []).append(unit)
    chunks: list[list[Write]] = []
    for group in groups.values():
        size = _BATCH_BYTES + 1  # start a chunk at the first unit
        for unit in group:
            weight = sum(len(v) if isinstance(v, str) else 8 for _, row in unit for v in row)
            if size + weight > _BATCH_BYTES or len(chunks[-1]) + len(unit) > _BATCH_ROWS:
                chunks.append([])
                size = 0
            chunks[-1].extend(unit)
            size += weight
    items: list[Item] = []
    for chunk in chunks:
        if len(chunk) == 1:  # a lone (perhaps large) row needs no batch around it
            items.append(chunk[0])
            continue
        batch = BatchStatement(batch_type=BatchType.UNLOGGED)
        for statement, row in chunk:
            batch.add(statement, row)
        items.append((batch, None))
    return items


class Runner:
    """Runs statements on a session; retries transient errors, then `BackendUnavailableError`."""

    def __init__(
        self, session: Session, *, target: str, concurrency: int, policy: RetryPolicy
    ) -> None:
        self.session = session
        self.target = target
        self._concurrency = concurrency
        self._policy = policy
        self.on_schema_gone: Callable[[], object] | None = None
        """Called when a statement finds the keyspace or a table dropped (see `schema_gone`)."""
        self.on_unavailable: Callable[[Runner], BaseException | None] | None = None
        """Called when a statement failed for good on unreachable nodes; returns the error to
        raise instead, if any (see `CassandraTaskStore._unavailable`)."""

    def one(self, statement: Any, params: Params | None, what: str) -> list[tuple[Any, ...]]:
        """Execute one statement; all its rows (every page) as tuples."""
        return cast(list[tuple[Any, ...]], self.result(statement, params, what, rows=True))

    def result(
        self,
        statement: Any,
        params: Params | None,
        what: str,
        *,
        timeout: float | None = None,
        rows: bool = False,
    ) -> Any:
        """Execute one statement; its ResultSet, or its rows if `rows` (read inside the retry,
        so that a failed page is retried too)."""

        def attempt() -> Any:
            result = self._bounded(statement, params, timeout)
            return list(result) if rows else result

        return self._retrying(attempt, what)

    def _bounded(self, statement: Any, params: Params | None, timeout: float | None) -> Any:
        """`session.execute`, but never waiting longer than the request timeout allows: the
        driver's own timer does not always end a request (right after a node restart), and a
        request that outlives the bound counts as a timeout (transient: retried)."""
        options = {} if timeout is None else {"timeout": timeout}
        future = self.session.execute_async(statement, params, **options)
        limit = self._default_limit() if timeout is None else timeout * 2 + _HANG_LIMIT_S
        answered = threading.Event()
        future.add_callbacks(lambda _: answered.set(), lambda _: answered.set())
        if not answered.wait(limit):
            raise OperationTimedOut(f"no answer within {limit:.0f}s")
        return future.result()

    def _default_limit(self) -> float:
        """How long a request sent with the session's default timeout may go unanswered."""
        return float(self.session.default_timeout or 0) + _HANG_LIMIT_S

    def many(self, items: Sequence[Item], what: str) -> list[list[tuple[Any, ...]]]:
        """Execute statements concurrently (at most `concurrency` in flight); rows of each, in
        order. Only the statements that failed transiently are sent again, so a retry after one
        timeout among a thousand writes costs one write, not a thousand."""
        results: list[list[tuple[Any, ...]]] = [[] for _ in items]
        pending = list(range(len(items)))

        def attempt() -> None:
            nonlocal pending
            round_ = _Round(
                self.session, items, concurrency=self._concurrency, limit=self._default_limit()
            )
            outcomes = round_.run(pending)
            failed: list[int] = []
            first: BaseException | None = None
            for index in pending:
                outcome = outcomes[index]
                if not isinstance(outcome, BaseException):
                    try:
                        results[index] = list(outcome)
                        continue
                    except TRANSIENT as error:  # a later page failed
                        outcome = error
                failed.append(index)
                first = first or outcome
            pending = failed
            if first is not None:
                raise first

        if items:
            self._retrying(attempt, what)
        return results

    def _retrying(self, attempt: Callable[[], T], what: str) -> T:
        """`attempt()`, retried on transient errors; a permission the role lacks is a
        configuration error (a retry gets the same answer, and a traceback helps nobody)."""

        def describe(error: BaseException) -> str:
            return (
                f"Cassandra at {self.target} failed to {what} after "
                f"{counted(self._policy.attempts, 'attempt')}: {_why(error)}; {_what_to_do(error)}"
            )

        try:
            return call_with_retries(
                attempt, policy=self._policy, transient=TRANSIENT, describe=describe
            )
        except Unauthorized as error:
            raise not_permitted(error, self.target, what) from None
        except BackendUnavailableError as error:
            instead = None if self.on_unavailable is None else self.on_unavailable(self)
            if instead is None:
                raise
            raise instead from error
        except InvalidRequest as error:
            gone = schema_gone(error, self.target, what)
            if gone is None:
                raise
            if self.on_schema_gone is not None:
                self.on_schema_gone()
            raise gone from None


def stored_value(result: Any, column: str) -> Any:
    """What a lightweight transaction that did not apply found in `column` of the stored row."""
    return result.one()[list(result.column_names).index(column)]


def schema_gone(error: InvalidRequest, target: str, what: str) -> ConfigurationError | None:
    """The keyspace or a table was dropped under a running store: say so and how to recover,
    instead of the server's bare "Invalid query"; None for any other invalid request."""
    text = str(error)
    if "does not exist" not in text and "unconfigured table" not in text:
        return None
    return ConfigurationError(
        f"Cassandra at {target} refused to {what}: {server_words(error)}; "
        "the scheduler's keyspace or one of its tables was dropped while it ran. Run `scheduler "
        "schema apply` to create them again: records not yet stored wait in the log and are "
        "stored then (tasks that were only in the dropped tables are gone)"
    )


class _Round:
    """One attempt of `Runner.many`: sends items, at most `concurrency` at a time, and keeps the
    first page (a ResultSet) or the transient error of each. Unlike `execute_concurrent`, a
    request is given up after `limit` (as `OperationTimedOut`; see `Runner._bounded`). As there,
    an answer's callback sends the next item itself: waking the caller for every answer halved
    the persistence rate. The caller wakes when every item is settled, or to expire requests."""

    def __init__(
        self, session: Session, items: Sequence[Item], *, concurrency: int, limit: float
    ) -> None:
        self._session = session
        self._items = items
        self._concurrency = concurrency
        self._limit = limit
        self._lock = threading.Condition()
        # All below are guarded by _lock. In flight: index -> deadline, in sending order, so the
        # first entry is always the next to expire.
        self._waiting: deque[int] = deque()
        self._in_flight: dict[int, float] = {}
        self._outcomes: dict[int, Any] = {}
        self._fatal: BaseException | None = None
        self._sending = False
        """True while this thread is in `_send_while_room`: an answer's callback that fires at
        once (the driver calls it inside `add_callbacks` if the answer is there) leaves the
        sending to that loop instead of recursing into it once per item."""

    def run(self, indices: Sequence[int]) -> dict[int, Any]:
        """The outcome of each of `indices`. After a non-transient error nothing more is sent,
        and it is raised once the requests in flight are settled, so that a caller who reacts
        to it never finds this call's requests still running beside its own."""
        with self._lock:
            self._waiting.extend(indices)
            self._send_while_room()
            while self._in_flight:
                earliest = next(iter(self._in_flight.values()))
                self._lock.wait(max(0.0, earliest - time.monotonic()))
                self._expire(time.monotonic())
                self._send_while_room()
        if self._fatal is not None:
            raise self._fatal
        return self._outcomes

    def _send_while_room(self) -> None:
        """Under the lock: send waiting items while there is room and no fatal error."""
        self._sending = True
        try:
            while (
                self._waiting and self._fatal is None and len(self._in_flight) < self._concurrency
            ):
                self._send(self._waiting.popleft())
        finally:
            self._sending = False

    def _send(self, index: int) -> None:
        statement, params = self._items[index]
        try:
            future = self._session.execute_async(statement, params)
        except Exception as error:  # parameters that do not bind, a session shut down
            self._settle(index, error)
            return
        self._in_flight[index] = time.monotonic() + self._limit
        # The condition's lock is re-entrant: a callback that fires at once runs on this thread.
        args = (index, future)
        future.add_callbacks(self._answered, self._answered, callback_args=args, errback_args=args)

    def _answered(self, _: Any, index: int, future: Any) -> None:
        with self._lock:
            if self._in_flight.pop(index, None) is None:
                return  # expired already; or a later page of a result the caller reads
            try:
                self._settle(index, future.result())
            except Exception as error:
                self._settle(index, error)
            if not self._sending:
                self._send_while_room()
            if not self._in_flight:
                self._lock.notify()

    def _expire(self, now: float) -> None:
        for index, deadline in list(self._in_flight.items()):
            if deadline > now:
                break
            del self._in_flight[index]
            self._settle(index, OperationTimedOut(f"no answer within {self._limit:g}s"))

    def _settle(self, index: int, outcome: Any) -> None:
        if isinstance(outcome, BaseException) and not isinstance(outcome, TRANSIENT):
            self._fatal = self._fatal or outcome
        else:
            self._outcomes[index] = outcome


def apply_schema(
    run: Runner,
    ddl: Sequence[str],
    *,
    timeout: float,
    settle_s: float = SCHEMA_SETTLE_S,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> None:
    """Run CREATE ... IF NOT EXISTS statements in order, each after every node agrees on the
    schema; a replication the nodes refuse (a datacenter they lack) is a configuration error. A
    statement refused for a keyspace or table that "does not exist" (another process creating
    it through another node) runs again, after schema agreement, for up to `settle_s`."""
    settled = partial(_settled, run, deadline=clock() + settle_s, clock=clock, sleep=sleep)
    for statement in ddl:
        try:
            apply = partial(run.result, statement, None, "apply the schema", timeout=timeout)
            settled(statement, apply, _schema_settling)
        except CqlConfigurationException as error:
            known = ", ".join(datacenters(run.session.cluster))
            raise ConfigurationError(
                f"Cassandra at {run.target} refused the schema: {server_words(error)}; check "
                "SCHEDULER_CASSANDRA_REPLICATION_STRATEGY, SCHEDULER_CASSANDRA_DATACENTERS "
                "(names the nodes report, in `SELECT data_center FROM system.local`) and "
                f"SCHEDULER_CASSANDRA_REPLICATION_FACTOR; this cluster's datacenters: "
                f"{known or 'unknown'}"
            ) from None
    # So that the statements prepared next find the tables on every node, not only this one's.
    run.session.cluster.control_connection.wait_for_schema_agreement()


def _settled(
    run: Runner,
    text: str,
    call: Callable[[], T],
    settling: Callable[[BaseException], bool],
    *,
    deadline: float,
    clock: Callable[[], float],
    sleep: Callable[[float], None],
) -> T:
    """`call()`, again after schema agreement while it fails with an error `settling` says is
    the schema still spreading from another creator; until `deadline`, then a clear error."""
    pause = 0.05
    while True:
        try:
            return call()
        except Exception as error:
            if not settling(error):
                raise
            if clock() >= deadline:
                raise BackendUnavailableError(
                    f"Cassandra at {run.target} still had the schema `{text}` needs being "
                    f"created after waiting for it ({error}); another process may be creating the "
                    "schema: run `scheduler schema apply` first, then start workers and commands"
                ) from error
        log.info("a table of `%s` is being created by another connection; trying again", text)
        run.session.cluster.control_connection.wait_for_schema_agreement(wait_time=pause * 20)
        sleep(pause)
        pause = min(pause * 2, 1.0)


def _schema_settling(error: BaseException) -> bool:
    """Whether a statement failed only because the schema another process is creating has not
    reached (or opened on) the node asked: a table opening, or one that does not exist yet."""
    return _table_opening(error) or _every_node(error, _missing)


def _missing(error: BaseException) -> bool:
    return isinstance(error, InvalidRequest) and any(
        words in str(error) for words in _TABLE_MISSING
    )


def _every_node(error: BaseException, matches: Callable[[BaseException], bool]) -> bool:
    """Whether `error` matches, or is `NoHostAvailable` with an error that matches from every
    node the driver tried."""
    if matches(error):
        return True
    if not isinstance(error, NoHostAvailable):
        return False
    causes = per_node(error).values()
    return bool(causes) and all(matches(cause) for cause in causes)


def _table_opening(error: BaseException) -> bool:
    """Whether a PREPARE failed only because its table is still opening: the server's own
    error, or the same error from every node the driver tried (it wraps a prepare that failed
    on each host it asked in `NoHostAvailable`)."""
    return _every_node(error, lambda e: isinstance(e, ServerError) and _TABLE_OPENING in str(e))


def _known_keyspace(run: Runner, keyspace: str) -> None:
    """Raise `InvalidRequest` ("does not exist") if the node asked does not know `keyspace`."""
    if replication_of(run, keyspace) is None:
        raise InvalidRequest(f"keyspace {keyspace} does not exist")


def release_major(run: Runner) -> int:
    """The major version of the node `run` reads from (its `release_version`, e.g. 5 of
    "5.0.9"); 0 when it says nothing readable."""
    rows = run.one("SELECT release_version FROM system.local", None, "read the node's version")
    version = str(rows[0][0]) if rows and rows[0][0] is not None else ""
    major = version.split(".", 1)[0]
    return int(major) if major.isdigit() else 0


def has_ordering_indexes(run: Runner, keyspace: str, names: Iterable[str]) -> bool:
    """Whether every index of `names` exists in `keyspace`."""
    rows = run.one(
        "SELECT index_name FROM system_schema.indexes WHERE keyspace_name = %s",
        (keyspace,),
        "read the keyspace's indexes",
    )
    return set(names) <= {str(row[0]) for row in rows}


def forget_deletes_at_once(run: Runner, keyspace: str, tables: Iterable[str]) -> None:
    """Set `gc_grace_seconds = 0` on `tables` of `keyspace` where it is not yet.

    For index tables whose every reader checks a row against the record it names, so that a
    deleted row coming back (a replica that missed the delete) is skipped or repaired, never
    believed. Their tombstones then stop counting at once: Cassandra leaves purgeable ones out
    of a read's count (and of `tombstone_failure_threshold`), where the default ten days of
    them, one per deleted row, would make a read of a busy partition fail. Hints for these
    tables are not kept (their lifetime is the grace period): a replica that was down misses
    the writes the quorum has, as it would a hint that expired."""
    wanted = set(tables)
    rows = run.one(
        "SELECT table_name, gc_grace_seconds FROM system_schema.tables WHERE keyspace_name = %s",
        (keyspace,),
        "read the tables' gc_grace_seconds",
    )
    stale = sorted(str(name) for name, grace in rows if name in wanted and grace != 0)
    alter = [f"ALTER TABLE {keyspace}.{table} WITH gc_grace_seconds = 0" for table in stale]
    if alter:
        apply_schema(run, alter, timeout=60.0)


def replication_of(run: Runner, keyspace: str) -> Mapping[str, str] | None:
    """The replication map of an existing keyspace, or None if it does not exist."""
    rows = run.one(
        "SELECT replication FROM system_schema.keyspaces WHERE keyspace_name = %s",
        (keyspace,),
        "read the keyspace definition",
    )
    return dict(rows[0][0]) if rows else None


#: What Cassandra answers a PREPARE naming a table another connection is creating: a CREATE
#: TABLE lists the table a little before it opens its storage (a second creator's IF NOT EXISTS
#: returns in between, so two processes creating the same keyspace at once meet it).
_TABLE_OPENING = "Unknown CF"

#: What a node answers a statement naming a keyspace or table created through another node
#: before the change reached it (Cassandra 5: "table t does not exist"; 4: "unconfigured table";
#: CREATE TABLE: "Keyspace 'k' doesn't exist"). Waited for only by a process that has just
#: applied the schema itself; one that has not is told to run `scheduler schema apply`.
_TABLE_MISSING = ("does not exist", "doesn't exist", "unconfigured table")


def prepare(
    run: Runner,
    keyspace: str,
    statements: Mapping[str, str],
    *,
    settle_s: float = SCHEMA_SETTLE_S,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
    expect_tables: bool = False,
) -> dict[str, Any]:
    """Prepare the store's statements, or say how to create the tables they need. A statement
    naming a table another connection is still creating is prepared again, after schema
    agreement, for up to `settle_s`; with `expect_tables` (the caller has just applied the
    schema), so is one naming a keyspace or table the node asked does not know yet."""
    settled = partial(_settled, run, deadline=clock() + settle_s, clock=clock, sleep=sleep)
    if expect_tables:
        settled(f"keyspace {keyspace}", partial(_known_keyspace, run, keyspace), _schema_settling)
    elif replication_of(run, keyspace) is None:
        # Said here rather than by the failed prepare, which the driver also logs as an ERROR.
        raise ConfigurationError(
            f"keyspace {keyspace!r} does not exist on {run.target} (SCHEDULER_CASSANDRA_KEYSPACE);"
            " check the name, or create it with `scheduler schema apply` (workers do on start)"
        )
    # Prepared again while its table is being created (see `_TABLE_OPENING`); with
    # `expect_tables`, also while a node says it does not exist (see `_TABLE_MISSING`).
    settling = _schema_settling if expect_tables else _table_opening
    try:
        prepared = {
            name: settled(text, partial(run.session.prepare, text), settling)
            for name, text in statements.items()
        }
    except Unauthorized as error:
        raise not_permitted(error, run.target, "prepare the store's statements") from None
    except InvalidRequest as error:
        raise ConfigurationError(
            f"the scheduler tables in keyspace {keyspace!r} are missing or outdated ({error}); "
            "run `scheduler schema apply` or open the store with create_schema=True"
        ) from error
    for name, statement in prepared.items():
        # Upserts and deletes may be sent twice without harm; so may the LWT (a second
        # IF NOT EXISTS returns the value the first stored).
        statement.is_idempotent = True
        if name == "probe":  # deciding that a bucket is empty must not trust one replica
            statement.consistency_level = ConsistencyLevel.ALL
    return prepared
