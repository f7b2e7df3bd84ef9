"""Kafka's own command-line tools (`kafka-consumer-groups.sh` and friends), run from Maven jars.

A Kafka distribution's `bin/` scripts are thin wrappers that run a Java class on the
distribution's `libs/`. Those classes live in `org.apache.kafka:kafka-tools`, which the broker's
jars do not include (the broker only needs `kafka-tools-api`), so the tools get a lib directory of
their own, resolved like a server's (see `maven.py`) on first use and cached beside the servers'.
That lets an operator on a machine without a Kafka distribution look at the scheduler's consumer
group and topic with the tools Kafka's own documentation describes, and lets the tests check that
what those tools print agrees with `scheduler group status`.
"""

from __future__ import annotations

import subprocess
from collections.abc import Sequence
from pathlib import Path

from scheduler.services.base import classpath
from scheduler.services.errors import ServiceError
from scheduler.services.kafka import KAFKA_VERSION, LOG4J_VERSION
from scheduler.services.maven import Artifact, resolve
from scheduler.services.process import port_open, require_java17

TOOLS: dict[str, str] = {
    "kafka-consumer-groups": "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand",
    "kafka-topics": "org.apache.kafka.tools.TopicCommand",
    "kafka-get-offsets": "org.apache.kafka.tools.GetOffsetShell",
    "kafka-console-consumer": "org.apache.kafka.tools.consumer.ConsoleConsumer",
    "kafka-delete-records": "org.apache.kafka.tools.DeleteRecordsCommand",
}
"""Script names of a Kafka 4.1 distribution's `bin/`, and the class each one runs."""

ARTIFACTS = [
    Artifact("org.apache.kafka", "kafka-tools", KAFKA_VERSION),
    # As for the broker: no published POM brings an slf4j binding, and without one the tools
    # print a warning about it before their output.
    Artifact("org.apache.logging.log4j", "log4j-slf4j-impl", LOG4J_VERSION),
    Artifact("org.apache.logging.log4j", "log4j-core", LOG4J_VERSION),
]

# The tools' own default (config/tools-log4j2.yaml in a distribution): warnings only, to stderr,
# so that their stdout stays the table or the records a script parses.
_LOG4J2 = """\
# Written by scheduler.services.kafka_tools.
status = warn
appender.console.type = Console
appender.console.name = STDERR
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = WARN
rootLogger.appenderRef.stderr.ref = STDERR
"""

_BOOTSTRAP_OPTIONS = ("--bootstrap-server", "--bootstrap-controller")


def tool_class(name: str) -> str:
    """The class that runs tool `name`, given as in `bin/` with or without `kafka-` and `.sh`."""
    script = name.removesuffix(".sh")
    if not script.startswith("kafka-"):
        script = f"kafka-{script}"
    try:
        return TOOLS[script]
    except KeyError:
        known = ", ".join(t.removeprefix("kafka-") for t in TOOLS)
        raise ServiceError(f"unknown Kafka tool {name!r}: choose one of {known}") from None


def names_server(args: Sequence[str]) -> bool:
    """Whether `args` name the server themselves (either option, `--option value` or
    `--option=value`)."""
    return any(arg.split("=", 1)[0] in _BOOTSTRAP_OPTIONS for arg in args)


def with_bootstrap(args: Sequence[str], bootstrap: str) -> list[str]:
    """`args`, with `--bootstrap-server bootstrap` in front unless they name a server already:
    the scheduler's own Kafka is the one an operator means when they do not say."""
    return list(args) if names_server(args) else ["--bootstrap-server", bootstrap, *args]


def any_broker_listens(bootstrap: str, timeout: float = 2.0) -> bool:
    """Whether any address of a bootstrap list (`host:port,...`, librdkafka's spelling, a
    `PLAINTEXT://` prefix allowed) accepts a TCP connection. The tools themselves wait 30 s
    for an unreachable broker and then print a Java stack trace; this answers in seconds."""
    for address in bootstrap.split(","):
        address = address.strip().rpartition("://")[2]
        host, _, port = address.rpartition(":")
        if host and port.isdigit() and port_open(host.strip("[]"), int(port), timeout):
            return True
    return False


def command(name: str, args: Sequence[str], *, bootstrap: str, cache: Path) -> list[str]:
    """The command line that runs tool `name` with `args`, resolving its jars on first use."""
    main_class = tool_class(name)
    java = require_java17()
    jars = resolve("kafka-tools", ARTIFACTS, cache)
    log_config = cache / "kafka-tools" / "log4j2.properties"
    if not log_config.is_file() or log_config.read_text() != _LOG4J2:
        log_config.write_text(_LOG4J2)
    return [
        java,
        "-Xmx256m",  # kafka-run-class.sh's heap for tools
        "-XX:+UseSerialGC",  # a short-lived JVM: the cheapest collector to start
        f"-Dlog4j2.configurationFile={log_config}",
        "-cp",
        classpath(jars),
        main_class,
        *with_bootstrap(args, bootstrap),
    ]


def run(name: str, args: Sequence[str], *, bootstrap: str, cache: Path) -> int:
    """Run tool `name` in the foreground, its output to ours; its exit code."""
    return subprocess.run(
        command(name, args, bootstrap=bootstrap, cache=cache), check=False
    ).returncode
