"""Who may call the API: bearer tokens with a role, kept as hashes in a tokens file.

A token is 32 random bytes (`secrets.token_urlsafe`), shown once by `scheduler api tokens
create`; the file keeps its SHA-256 hash, its name and its role, never the token. A slow hash
(scrypt) protects guessable passwords; a random 256-bit token cannot be guessed, so one SHA-256
is enough and keeps every request's check cheap. The file is read again when it changes, so a
token created or removed while the API runs counts at once.

Roles are ordered: `read` sees everything, `operate` also changes tasks (schedule, cancel,
retry, rerun), `admin` also deletes them (drop). A request without a valid token is answered
401; with a token whose role is too small, 403.
"""

from __future__ import annotations

import enum
import hashlib
import hmac
import json
import os
import secrets
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from scheduler.errors import ConfigurationError, DeploymentFileError

TOKEN_PREFIX = "sch_"
"""Every token starts with it, so that a leaked one is easy to recognise in a secret scanner."""


class Role(enum.StrEnum):
    """What a token may do; each role may do what the ones before it may."""

    READ = "read"
    """See tasks, the fleet and health."""
    OPERATE = "operate"
    """Also schedule, cancel, retry and rerun tasks."""
    ADMIN = "admin"
    """Also drop tasks (delete their status rows), change schedules and batch configurations,
    and manage tokens."""

    @property
    def rank(self) -> int:
        return list(Role).index(self)

    def allows(self, needed: Role) -> bool:
        return self.rank >= needed.rank


CHANGE_ROLES: dict[str, Role] = {
    "cancel": Role.OPERATE,
    "retry": Role.OPERATE,
    "rerun": Role.OPERATE,
    "drop": Role.ADMIN,
}
"""The role each change to tasks needs, in the API and the dashboard alike."""


@dataclass(frozen=True, slots=True)
class TokenEntry:
    """One token as the tokens file keeps it."""

    name: str
    """Who or what holds it (for the operator; unique in the file)."""
    role: Role
    """What it may do."""
    sha256: str
    """The hex SHA-256 of the token."""
    created: str
    """When it was made (ISO 8601 UTC)."""


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


class TokenFile:
    """The tokens file: a JSON array of `TokenEntry` objects, readable by its owner only."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._stamp: tuple[float, int] | None = None
        self._by_hash: dict[str, TokenEntry] = {}

    def entries(self) -> list[TokenEntry]:
        """Every token of the file (none if there is no file yet)."""
        with self._lock:
            self._refresh()
            return list(self._by_hash.values())

    def verify(self, token: str) -> TokenEntry | None:
        """The entry of `token`, or None when it is not a token of the file."""
        digest = token_hash(token)
        with self._lock:
            self._refresh()
            for known, entry in self._by_hash.items():
                if hmac.compare_digest(known, digest):
                    return entry
        return None

    def current(self, entry: TokenEntry) -> TokenEntry | None:
        """`entry` as the file has it now: None once its token is revoked."""
        with self._lock:
            self._refresh()
            return self._by_hash.get(entry.sha256)

    def create(self, role: Role, name: str) -> str:
        """A new token for `role` named `name`, added to the file; the only time it is seen."""
        token = TOKEN_PREFIX + secrets.token_urlsafe(32)
        with self._lock:
            self._refresh()
            if any(entry.name == name for entry in self._by_hash.values()):
                raise ConfigurationError(
                    f"a token named {name!r} exists in {self.path}; give another --name, or "
                    f"revoke it first with `scheduler api tokens revoke {name}`"
                )
            created = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
            entry = TokenEntry(name, role, token_hash(token), created)
            self._write([*self._by_hash.values(), entry])
        return token

    def revoke(self, name: str) -> bool:
        """Remove the token named `name`; whether there was one."""
        with self._lock:
            self._refresh()
            kept = [entry for entry in self._by_hash.values() if entry.name != name]
            if len(kept) == len(self._by_hash):
                return False
            self._write(kept)
            return True

    def _write(self, entries: list[TokenEntry]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        temporary = self.path.with_name(self.path.name + ".tmp")
        text = json.dumps([asdict(entry) for entry in entries], indent=2) + "\n"
        descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(descriptor, "w", encoding="utf-8") as file:
            file.write(text)
        os.replace(temporary, self.path)
        self._stamp = None
        self._refresh()

    def _refresh(self) -> None:
        try:
            stat = self.path.stat()
        except FileNotFoundError:
            self._stamp, self._by_hash = None, {}
            return
        stamp = (stat.st_mtime, stat.st_size)
        if stamp == self._stamp:
            return
        try:
            raw = json.loads(self.path.read_text(encoding="utf-8"))
            entries = [
                TokenEntry(item["name"], Role(item["role"]), item["sha256"], item["created"])
                for item in raw
            ]
        except (ValueError, KeyError, TypeError) as error:
            raise DeploymentFileError(
                f"the API tokens file {self.path} is not what `scheduler api tokens create` "
                f"writes ({error}); repair it, or move it away and create the tokens again"
            ) from None
        self._by_hash = {entry.sha256: entry for entry in entries}
        self._stamp = stamp


@dataclass(frozen=True, slots=True)
class Session:
    """A dashboard login: the token's entry, held by the server; the cookie holds only its id."""

    entry: TokenEntry
    expires: float


class Sessions:
    """The dashboard's logins, in the API process's memory (a restart logs everyone out)."""

    def __init__(self, lifetime_s: float = 12 * 3600.0) -> None:
        self.lifetime_s = lifetime_s
        self._lock = threading.Lock()
        self._sessions: dict[str, Session] = {}

    def open(self, entry: TokenEntry) -> str:
        session_id = secrets.token_urlsafe(32)
        with self._lock:
            now = time.monotonic()
            self._sessions = {k: s for k, s in self._sessions.items() if s.expires > now}
            self._sessions[session_id] = Session(entry, now + self.lifetime_s)
        return session_id

    def get(self, session_id: str) -> TokenEntry | None:
        with self._lock:
            session = self._sessions.get(session_id)
            if session is None or session.expires <= time.monotonic():
                self._sessions.pop(session_id, None)
                return None
            return session.entry

    def close(self, session_id: str) -> None:
        with self._lock:
            self._sessions.pop(session_id, None)
