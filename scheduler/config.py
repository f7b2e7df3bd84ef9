"""Reading the settings from a TOML file, the environment and the command line, with errors that
name the source.

Precedence is command line over `SCHEDULER_*` environment over the file over the defaults, the
usual order for twelve-factor services: an operator can override one value of a shared file for
one process without editing it. Every failure (no such file, bad TOML, an unknown key, a value of
the wrong type or out of range, two settings that contradict each other) becomes one
`ConfigurationError` whose message says where the bad value came from and what is accepted,
never a pydantic traceback.
"""

from __future__ import annotations

import difflib
import os
import tomllib
import typing
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import ValidationError
from pydantic_core import ErrorDetails

from scheduler.errors import ConfigurationError
from scheduler.settings import (
    BUILT_IN_EXECUTORS,
    CONSISTENCY_LEVELS,
    ENV_PREFIX,
    Settings,
    env_name,
    file_values,
)

CONFIG_ENV = "SCHEDULER_CONFIG"
"""The environment variable naming the TOML settings file (like `--config`)."""

Source = Literal["default", "file", "env", "cli"]

_PAIRS = "key=value pairs separated by commas, a JSON object or a TOML table"

ACCEPTED = {
    "data_dir": "a directory path (created if missing)",
    "executor": f"one of: {', '.join(BUILT_IN_EXECUTORS)}, or a 'package.module:callable' path",
    "cassandra_consistency": f"one of: {', '.join(CONSISTENCY_LEVELS)}",
    "cassandra_keyspace": "a letter, then up to 47 letters, digits or _",
    "cassandra_ordering_index": "auto, true or false",
    "topic": "up to 249 ASCII letters, digits, '.', '_' and '-' (Kafka's rule; not '.' or '..')",
    "cassandra_hosts": "host names or addresses separated by commas, e.g. 10.0.0.1,10.0.0.2",
    "spark_job_modules": "Python package names separated by commas",
    "kafka_config": _PAIRS,
    "kafka_producer_config": _PAIRS,
    "kafka_consumer_config": _PAIRS,
    "spark_conf": _PAIRS,
    "cassandra_datacenters": "datacenter:replicas pairs separated by commas, e.g. dc1:3,dc2:3",
}
"""What a setting accepts, where its type alone does not say it (for errors and the docs)."""


def load_settings(
    config: Path | str | None = None, overrides: Mapping[str, Any] | None = None
) -> Settings:
    """The effective settings; `config` defaults to `$SCHEDULER_CONFIG`, overrides are options.

    `overrides` whose value is None are ignored (an option the user did not give).
    """
    path = Path(config) if config else env_config()
    values = read_toml(path) if path else {}
    given = {name: value for name, value in (overrides or {}).items() if value is not None}
    token = file_values.set(values)
    try:
        return Settings(**given)
    except ValidationError as error:
        problems = [_describe(detail, path, values, given) for detail in error.errors()]
        raise ConfigurationError("; ".join(problems)) from None
    finally:
        file_values.reset(token)


def read_toml(path: Path) -> dict[str, Any]:
    """The flat table of a settings file, or a `ConfigurationError` naming the file and key."""
    try:
        with path.open("rb") as stream:
            values = tomllib.load(stream)
    except FileNotFoundError:
        raise ConfigurationError(
            f"settings file {str(path)!r} does not exist; fix --config or {CONFIG_ENV}"
        ) from None
    except (OSError, UnicodeDecodeError) as error:
        raise ConfigurationError(f"cannot read settings file {str(path)!r}: {error}") from None
    except tomllib.TOMLDecodeError as error:
        raise ConfigurationError(
            f"settings file {str(path)!r} is not valid TOML: {error}; write one `name = value` "
            "line per setting, strings in quotes"
        ) from None
    known = Settings.model_fields
    for key, value in values.items():
        if key not in known and isinstance(value, dict):
            raise ConfigurationError(
                f"settings file {str(path)!r}: table [{key}] is not a setting; settings are "
                f"flat `name = value` lines at the top of the file ({_unknown_key(key)})"
            )
        if key not in known:
            raise ConfigurationError(f"settings file {str(path)!r}: {_unknown_key(key)}")
    return values


def sources(settings_path: Path | str | None, overrides: Mapping[str, Any]) -> dict[str, Source]:
    """Where each effective value came from, for `settings show`."""
    path = Path(settings_path) if settings_path else env_config()
    in_file = read_toml(path) if path else {}
    result: dict[str, Source] = {}
    for name in Settings.model_fields:
        if overrides.get(name) is not None:
            result[name] = "cli"
        elif _env_value(name) is not None:
            result[name] = "env"
        elif name in in_file:
            result[name] = "file"
        else:
            result[name] = "default"
    return result


def accepted(name: str) -> str:
    """What a setting accepts, in words: from `ACCEPTED`, else from its type and bounds."""
    if name in ACCEPTED:
        return ACCEPTED[name]
    field = Settings.model_fields[name]
    annotation = field.annotation
    optional = False
    args = typing.get_args(annotation)
    if type(None) in args:
        optional = True
        annotation = next(arg for arg in args if arg is not type(None))
    metadata = list(field.metadata)
    if typing.get_origin(annotation) is Annotated:  # `Port | None`: the bounds sit inside
        annotation, *inner = typing.get_args(annotation)
        for item in inner:  # a `Field(ge=...)` there keeps its bounds in its own metadata
            metadata += getattr(item, "metadata", [item])
    bounds = _bounds(metadata)
    if typing.get_origin(annotation) is Literal:
        text = "one of: " + ", ".join(str(arg) for arg in typing.get_args(annotation))
    elif annotation is bool:
        text = "true or false"
    elif annotation is int:
        text = f"an integer{bounds}"
    elif annotation is float:
        text = f"a number{bounds}"
    elif annotation is Path:
        text = "a file path"
    else:
        text = "a non-empty string"
    return f"{text}, or empty for none" if optional else text


def _bounds(metadata: list[Any]) -> str:
    words = []
    for item in metadata:
        for attribute, word in (("ge", ">="), ("gt", ">"), ("le", "<="), ("lt", "<")):
            value = getattr(item, attribute, None)
            if value is not None:
                words.append(f"{word} {value}")
    return " " + " and ".join(words) if words else ""


def _describe(
    detail: ErrorDetails, path: Path | None, in_file: Mapping[str, Any], given: Mapping[str, Any]
) -> str:
    loc = detail["loc"]
    reason = detail["msg"].removeprefix("Value error, ")
    if not loc:  # a model validator: its message names the settings already
        return reason
    name = str(loc[0])
    if name not in Settings.model_fields:  # unknown --option passed by code, not by a user
        return f"{name}: {reason}"
    where, value = _set_at(name, path, in_file, given) or (name, detail.get("input"))
    if detail["type"] == "literal_error":
        return f"{where}={value!r} is not one of: {accepted(name).removeprefix('one of: ')}"
    return f"{where}={value!r} is invalid ({reason[:1].lower()}{reason[1:]}); use {accepted(name)}"


def _set_at(
    name: str, path: Path | None, in_file: Mapping[str, Any], given: Mapping[str, Any]
) -> tuple[str, Any] | None:
    """Where the user set `name`, named as they wrote it (`--executor`, `SCHEDULER_EXECUTOR`,
    `settings file 'x.toml': executor`), and the value written there; None if it is the
    default. Same precedence as `load_settings`: options, environment, file."""
    if name in given:
        return f"--{name.replace('_', '-')}", given[name]
    if (raw := _env_value(name)) is not None:
        return env_name(name), raw
    if name in in_file:
        return f"settings file {str(path)!r}: {name}", in_file[name]
    return None


def origin(name: str, config: Path | str | None, overrides: Mapping[str, Any]) -> str:
    """How an error should name setting `name` for a subcommand with this `--config` and these
    options: where its value was written, or the bare name for a default."""
    path = Path(config) if config else env_config()
    in_file = read_toml(path) if path else {}
    given = {key: value for key, value in overrides.items() if value is not None}
    found = _set_at(name, path, in_file, given)
    return found[0] if found else name


def _unknown_key(key: str) -> str:
    close = difflib.get_close_matches(key, Settings.model_fields, n=1)
    hint = (
        f"did you mean {close[0]!r}?"
        if close
        else "accepted keys: " + ", ".join(Settings.model_fields)
    )
    return f"unknown key {key!r}; {hint} (`scheduler settings docs` lists every setting)"


def _env_value(name: str) -> str | None:
    """The raw environment value of a setting (names are case-insensitive, like pydantic's)."""
    wanted = env_name(name)
    for variable, value in os.environ.items():
        if variable.upper() == wanted:
            return value
    return None


def env_config() -> Path | None:
    value = os.environ.get(CONFIG_ENV, "").strip()
    return Path(value) if value else None


OWN_VARIABLES = (
    "SCHEDULER_TASK_KEY",
    "SCHEDULER_ATTEMPT",
    "SCHEDULER_LOGICAL_TIME",
    "SCHEDULER_SPEEDUPS",
)
"""What the command and spark-submit executors set for the processes they start, which may run
`scheduler` themselves; and `scheduler.speedups`' switch, read where clients are made, not a
setting of a deployment."""
OWN_PREFIXES = ("SCHEDULER_SERVICES_", "SCHEDULER_FLEET_", "SCHEDULER_BENCH_")
"""The service launcher's ports and paths, the fleet's and the benchmark's bookkeeping."""


def unknown_environment() -> list[str]:
    """A warning for each `SCHEDULER_*` variable that is no setting, with a guess at the setting
    meant: a misspelt variable is otherwise ignored without a word (`SCHEDULER_KAFKA_TOPIC` for
    `SCHEDULER_TOPIC`, and the worker reads the default topic). Warnings rather than errors: other
    tools may share the prefix, and the product's own non-setting variables are left out."""
    names = [env_name(name) for name in Settings.model_fields] + [CONFIG_ENV]
    found = []
    for variable in sorted(os.environ):
        upper = variable.upper()
        if (
            not upper.startswith(ENV_PREFIX)
            or upper in names
            or upper in OWN_VARIABLES
            or upper.startswith(OWN_PREFIXES)
        ):
            continue
        guess = _setting_meant(upper, names)
        hint = (
            f"did you mean {guess}?" if guess else "`scheduler settings docs` lists every setting"
        )
        found.append(f"{variable} is not a setting and is ignored; {hint}")
    return found


def _setting_meant(variable: str, names: list[str]) -> str | None:
    """The variable most like `variable`: by spelling (`SCHEDULER_PARTITONS`), else by the
    words they share (`SCHEDULER_KAFKA_TOPIC`: TOPIC; `SCHEDULER_CONSUMER_GROUP`: GROUP_ID).
    Spelling is compared after the prefix, which would make any two names look alike."""
    by_setting = {name.removeprefix(ENV_PREFIX): name for name in names}
    setting = variable.removeprefix(ENV_PREFIX)
    close = difflib.get_close_matches(setting, by_setting, n=1, cutoff=0.75)
    if close:
        return by_setting[close[0]]
    words = set(setting.split("_"))
    # A word many settings share (KAFKA, CASSANDRA, TLS) says less about the one meant than a
    # word only one has: `SCHEDULER_KAFKA_GROUP` means GROUP_ID, not KAFKA_BOOTSTRAP.
    settings_with = Counter(word for name in by_setting for word in set(name.split("_")))

    def likeness(name: str) -> tuple[bool, float, float]:
        """(shares half its words or more, how telling those words are, spelling)."""
        own = name.split("_")
        shared = words.intersection(own)
        telling = sum(1 / settings_with[word] for word in shared) / len(own)
        ratio = difflib.SequenceMatcher(None, setting, name).ratio()
        return len(shared) / len(own) >= 0.5, telling, ratio

    best = max(by_setting, key=likeness)
    return by_setting[best] if likeness(best)[0] else None
