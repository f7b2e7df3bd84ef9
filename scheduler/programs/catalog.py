"""The programs a deployment declares: read from a TOML or JSON file, or registered in Python.

File shape (TOML; JSON is the same tree)::

    [programs.hourly-clean]
    kind = "command"
    argv = ["python", "-m", "jobs.clean", "--hour", "{{logical_time}}"]
    properties = {table = "clicks"}
    description = "cleans one hour of clicks"

    [programs.rollup]
    kind = "spark"
    job = "scheduler.examples.clicks.jobs:rollup"

Everything but `kind`, `properties` and `description` is the executor's task data (`spec`).
"""

from __future__ import annotations

import json
import logging
import threading
import time
import tomllib
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from scheduler.errors import ConfigurationError, DeploymentFileError, UnknownProgramError
from scheduler.programs.model import Program, ProgramKind

logger = logging.getLogger(__name__)

_REQUIRED = {ProgramKind.SPARK: "job", ProgramKind.SPARK_SUBMIT: "application"}
_REQUIRED[ProgramKind.COMMAND] = "argv"


class ProgramCatalog:
    """Programs by name. Thread-safe; unknown names are refused with the known ones."""

    def __init__(self, programs: Iterable[Program] = ()) -> None:
        self._programs: dict[str, Program] = {}
        self._lock = threading.Lock()
        for program in programs:
            self.register(program)

    def register(self, program: Program) -> None:
        """Declare `program` (replacing one of the same name)."""
        if not program.name or any(c.isspace() for c in program.name):
            raise ConfigurationError(
                f"program name {program.name!r} must be non-empty and without spaces"
            )
        with self._lock:
            self._programs[program.name] = program

    def _all(self) -> dict[str, Program]:
        with self._lock:
            return dict(self._programs)

    def names(self) -> list[str]:
        return sorted(self._all())

    def programs(self) -> list[Program]:
        found = self._all()
        return [found[name] for name in sorted(found)]

    def get(self, name: str) -> Program:
        """The program called `name`, or `UnknownProgramError` listing the known ones."""
        program = self._all().get(name)
        if program is None:
            known = ", ".join(self.names()) or "none"
            raise UnknownProgramError(
                f"unknown program {name!r}; known programs: {known}. Declare it in the programs "
                "file (setting programs_file) or with ProgramCatalog.register"
            )
        return program


class ProgramsFile(ProgramCatalog):
    """The programs of a file, read again when it changes, under those registered in Python.

    A worker runs for weeks; a program declared in its file after it started must not fail the
    launches that name it until a restart. The file's modification time and size are checked at
    most every `RECHECK_S` when a program is looked up, and at once when a name is missing; a
    changed file is read again. A file
    that no longer reads or validates keeps the programs read before (logged once per change:
    what is wrong and that the last good ones are in use), as the batch jobs' file does.
    Programs registered in Python (the batch jobs' built-ins, an embedded deployment's own) stay
    across reloads and win over the file's of the same name."""

    RECHECK_S = 1.0

    def __init__(self, path: str | Path) -> None:
        super().__init__()
        self.path = Path(path).expanduser()
        self._seen = self._signature()
        self._declared = _read_programs(self.path)  # the first read's errors are the caller's
        self._checked = time.monotonic()

    def _signature(self) -> tuple[int, int] | None:
        try:
            stat = self.path.stat()
        except OSError:
            return None
        return stat.st_mtime_ns, stat.st_size

    def _all(self) -> dict[str, Program]:
        self._refresh()
        with self._lock:
            return {**self._declared, **self._programs}

    def get(self, name: str) -> Program:
        try:
            return super().get(name)
        except UnknownProgramError:
            self._refresh(force=True)  # declared a moment ago: a miss is worth a look now
            return super().get(name)

    def _refresh(self, *, force: bool = False) -> None:
        now = time.monotonic()
        with self._lock:
            if not force and now - self._checked < self.RECHECK_S:
                return
            self._checked = now
        seen = self._signature()
        with self._lock:
            if seen == self._seen:
                return
            self._seen = seen
        try:
            declared = _read_programs(self.path)
        except ConfigurationError as error:
            logger.error("%s; keeping the programs read before from it", error)
            return
        with self._lock:
            self._declared = declared
        logger.info("programs file %s read again: %s", self.path, ", ".join(sorted(declared)))


def program_from_mapping(name: str, entry: Mapping[str, Any], *, where: str = "") -> Program:
    """A `Program` from one entry of a programs file, with errors that name the field."""
    at = f"{where}: " if where else ""
    raw_kind = entry.get("kind")
    kinds = [str(k) for k in ProgramKind]
    if raw_kind is None:
        # Another field holding a kind's name (`type = "command"`) is the likely slip.
        named = next((k for k, v in entry.items() if isinstance(v, str) and v in kinds), None)
        hint = f" (`{named}` names one: the field is `kind`)" if named else ""
        raise ConfigurationError(
            f"{at}program {name!r} has no `kind`{hint}; add kind = one of {', '.join(kinds)}"
        )
    try:
        kind = ProgramKind(str(raw_kind))
    except ValueError:
        raise ConfigurationError(
            f"{at}program {name!r} has kind {raw_kind!r}; use one of {', '.join(kinds)}"
        ) from None
    required = _REQUIRED[kind]
    if required not in entry:
        raise ConfigurationError(f"{at}program {name!r} of kind {kind} needs {required!r}")
    if kind is ProgramKind.COMMAND and not (
        isinstance(entry["argv"], list)
        and entry["argv"]
        and all(isinstance(a, str) for a in entry["argv"])
    ):
        raise ConfigurationError(
            f"{at}program {name!r}: argv must be a non-empty list of strings, got {entry['argv']!r}"
        )
    properties = entry.get("properties", {})
    if not isinstance(properties, Mapping):
        raise ConfigurationError(
            f"{at}program {name!r}: properties must be a table of names to values, "
            f"got {properties!r}"
        )
    spec = {k: v for k, v in entry.items() if k not in ("kind", "properties", "description")}
    return Program(
        name=name,
        kind=kind,
        spec=spec,
        properties=dict(properties),
        description=str(entry.get("description", "")),
    )


def load_programs(path: str | Path) -> ProgramCatalog:
    """The programs declared in a TOML (`.toml`) or JSON file, under a `programs` table."""
    return ProgramCatalog(_read_programs(Path(path).expanduser()).values())


def _read_programs(path: Path) -> dict[str, Program]:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        raise DeploymentFileError(
            f"programs file {str(path)!r} cannot be read ({error}); check SCHEDULER_PROGRAMS_FILE"
        ) from error
    try:
        tree = json.loads(text) if path.suffix == ".json" else tomllib.loads(text)
    except (ValueError, tomllib.TOMLDecodeError) as error:
        raise DeploymentFileError(f"programs file {str(path)!r} does not parse: {error}") from error
    entries = tree.get("programs") if isinstance(tree, Mapping) else None
    if not isinstance(entries, Mapping):
        raise DeploymentFileError(
            f"programs file {str(path)!r} has no `programs` table; declare each program as "
            "[programs.NAME] with a kind"
        )
    try:
        checked = ProgramCatalog(  # names checked as `register` checks them
            program_from_mapping(str(name), entry, where=str(path))
            if isinstance(entry, Mapping)
            else _not_a_table(path, str(name))
            for name, entry in entries.items()
        )
    except ConfigurationError as error:  # a program's fields: the file's to fix
        raise DeploymentFileError(str(error)) from error
    return {program.name: program for program in checked.programs()}


def _not_a_table(path: Path, name: str) -> Program:
    raise ConfigurationError(f"programs file {str(path)!r}: programs.{name} must be a table")
