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

import os
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from scheduler.services.base import classpath
from scheduler.services.errors import ServiceError
from scheduler.services.kafka import KAFKA_VERSION, LOG4J_VERSION, Kafka
from scheduler.services.maven import Artifact, is_resolved, resolve
from scheduler.services.process import require_java17

TOOLS: dict[str, str] = {
    "kafka-consumer-groups": "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand",
    "kafka-topics": "org.apache.kafka.tools.TopicCommand",
    "kafka-get-offsets": "org.apache.kafka.tools.GetOffsetShell",
    "kafka-console-consumer": "org.apache.kafka.tools.consumer.ConsoleConsumer",
    "kafka-delete-records": "org.apache.kafka.tools.DeleteRecordsCommand",
    "kafka-acls": "org.apache.kafka.tools.AclCommand",
    "kafka-configs": "kafka.admin.ConfigCommand",
}
"""Script names of a Kafka 4.1 distribution's `bin/`, and the class each one runs."""

_IN_THE_BROKER = {"kafka.admin.ConfigCommand"}
"""Classes that have not moved out of the broker's own jar (`kafka_2.13`) into `kafka-tools`:
they run on the broker's jars, which `scheduler services up` resolves too."""

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
_CONFIG_OPTIONS = ("--command-config", "--consumer.config")
"""How the tools take a client properties file: kafka-console-consumer.sh has its own name."""

_JAAS_MODULES = {
    "PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
    "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule",
}
_SAME_NAME = ("security.protocol", "ssl.key.password", "ssl.keystore.password")


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


def names_config(args: Sequence[str]) -> bool:
    """Whether `args` give the tool a client properties file of their own."""
    return any(arg.split("=", 1)[0] in _CONFIG_OPTIONS for arg in args)


def client_properties(config: Mapping[str, Any]) -> tuple[dict[str, str], list[str]]:
    """The Java client properties that say what librdkafka `config` (the scheduler's
    SCHEDULER_KAFKA_CONFIG) says about security, and the security keys it could not translate.

    librdkafka and the Java client name most security settings alike but differ in three:
    a SASL login is `sasl.username`/`sasl.password` there and a JAAS line here, certificates
    are PEM file paths there and keystores here (which take PEM too, inline or as a file), and
    "no host name check" is `none` there and empty here. Keys that are not about security
    (tuning, ids) do not concern a tool and are left out.
    """
    props: dict[str, str] = {}
    left: list[str] = []
    for key in _SAME_NAME:
        if key in config:
            props[key] = str(config[key])
    mechanism = str(config.get("sasl.mechanism", config.get("sasl.mechanisms", ""))).upper()
    if mechanism:
        props["sasl.mechanism"] = mechanism
    if "sasl.username" in config:
        module = _JAAS_MODULES.get(mechanism)
        if module is None:
            left.append("sasl.username")
        else:
            user, password = (
                _jaas_quoted(config.get(k, "")) for k in ("sasl.username", "sasl.password")
            )
            props["sasl.jaas.config"] = f"{module} required username={user} password={password};"
    ca = config.get("ssl.ca.location")
    if ca is not None:
        props["ssl.truststore.type"] = "PEM"
        props["ssl.truststore.location"] = str(ca)
    certificate, private_key = (
        config.get("ssl.certificate.location"),
        config.get("ssl.key.location"),
    )
    if certificate is not None and private_key is not None:
        # Inline: a PEM keystore file would have to hold the key and the chain together.
        props["ssl.keystore.type"] = "PEM"
        props["ssl.keystore.certificate.chain"] = Path(str(certificate)).read_text()
        props["ssl.keystore.key"] = Path(str(private_key)).read_text()
    elif "ssl.keystore.location" in config:  # a PKCS#12 file, in librdkafka as in Java
        props["ssl.keystore.type"] = "PKCS12"
        props["ssl.keystore.location"] = str(config["ssl.keystore.location"])
    if "ssl.endpoint.identification.algorithm" in config:
        algorithm = str(config["ssl.endpoint.identification.algorithm"])
        props["ssl.endpoint.identification.algorithm"] = "" if algorithm == "none" else algorithm
    handled = {
        *_SAME_NAME,
        "sasl.mechanism",
        "sasl.mechanisms",
        "sasl.password",
        "ssl.ca.location",
        "ssl.certificate.location",
        "ssl.key.location",
        "ssl.keystore.location",
        "ssl.endpoint.identification.algorithm",
        "sasl.username",  # in `left` already when its mechanism has no JAAS module here
    }
    left += [k for k in config if k.startswith(("sasl.", "ssl.")) and k not in handled]
    return props, sorted(set(left))


def _jaas_quoted(value: object) -> str:
    escaped = str(value).replace("\\", "\\\\").replace('"', '\\"')
    return f'"{escaped}"'


def write_client_properties(props: Mapping[str, str], directory: Path) -> Path:
    """`props` as a properties file only its owner can read (it may hold a password)."""
    directory.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(prefix="client-", suffix=".properties", dir=directory)
    with os.fdopen(fd, "w") as handle:  # mkstemp made it 0600
        handle.write("# Written by `scheduler services kafka-tool`, from SCHEDULER_KAFKA_CONFIG\n")
        for key, value in props.items():
            handle.write(f"{key}={_escaped(value)}\n")
    return Path(name)


def _escaped(value: str) -> str:
    """A value as java.util.Properties reads it back: backslashes, line ends and a leading
    space escaped (PEM text spans lines)."""
    value = value.replace("\\", "\\\\").replace("\n", "\\n").replace("\r", "\\r")
    return "\\" + value if value.startswith(" ") else value


def command(
    name: str,
    args: Sequence[str],
    *,
    bootstrap: str,
    cache: Path,
    client_config: Path | None = None,
) -> list[str]:
    """The command line that runs tool `name` with `args`, resolving its jars on first use.
    `client_config`, a properties file, is passed as the tool's option for one, unless `args`
    pass their own."""
    main_class = tool_class(name)
    java = require_java17()
    jars = resolve(*_jar_set(main_class), cache)
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
        *_config_option(main_class, args, client_config),
    ]


def _jar_set(main_class: str) -> tuple[str, list[Artifact]]:
    """The cache name and the artifacts of the jars `main_class` runs on."""
    if main_class in _IN_THE_BROKER:
        broker = Kafka()
        return broker.distribution, broker.artifacts()
    return "kafka-tools", ARTIFACTS


def needs_fetch(name: str, cache: Path) -> bool:
    """Whether running tool `name` fetches jars with Maven first."""
    return not is_resolved(*_jar_set(tool_class(name)), cache)


def _config_option(main_class: str, args: Sequence[str], client_config: Path | None) -> list[str]:
    if client_config is None or names_config(args):
        return []
    console = main_class == TOOLS["kafka-console-consumer"]
    return ["--consumer.config" if console else "--command-config", str(client_config)]


def run(
    name: str,
    args: Sequence[str],
    *,
    bootstrap: str,
    cache: Path,
    client_props: Mapping[str, str] | None = None,
) -> int:
    """Run tool `name` in the foreground, its output to ours; its exit code. `client_props`,
    Java client properties (`client_properties`), reach the tool in a file unless `args` name
    a file of their own."""
    properties = None
    if client_props and not names_config(args):
        properties = write_client_properties(client_props, cache / "kafka-tools" / "run")
    try:
        argv = command(name, args, bootstrap=bootstrap, cache=cache, client_config=properties)
        return subprocess.run(argv, check=False).returncode
    finally:
        if properties is not None:
            properties.unlink(missing_ok=True)
