"""Test certificates for the secured local servers: a private CA, a node and a client certificate.

Made with the `openssl` and `keytool` command-line tools (both present wherever the launcher's
Java is), once per state dir, and kept: a client's CA file stays valid across node restarts.
The node gets a PKCS12 keystore and truststore (what Cassandra's default SSL context factory
and a Kafka broker read); the client gets PEM files, what Python's `ssl` module and librdkafka
read.
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from scheduler.services.errors import ServiceError

STORE_PASSWORD = "scheduler-local"
"""Password of the node's keystore and truststore. These files guard a loopback test node."""
_DAYS = "3650"


@dataclass(frozen=True)
class TlsFiles:
    """Where the certificates of one secured server live (``<server dir>/tls``)."""

    root: Path

    @property
    def ca(self) -> Path:
        """The CA certificate (PEM): what a client trusts."""
        return self.root / "ca.pem"

    @property
    def client_cert(self) -> Path:
        return self.root / "client.pem"

    @property
    def client_key(self) -> Path:
        return self.root / "client.key"

    @property
    def node_keystore(self) -> Path:
        return self.root / "node.p12"

    @property
    def node_truststore(self) -> Path:
        return self.root / "truststore.p12"

    def made(self) -> bool:
        """Whether every file `make` writes exists."""
        made = (
            self.ca,
            self.client_cert,
            self.client_key,
            self.node_keystore,
            self.node_truststore,
        )
        return all(path.is_file() for path in made)

    def require(self, server: str) -> None:
        """Raise a `ServiceError` saying so unless the certificates exist: no client of the
        secured `server` gets in without them."""
        if not self.made():
            raise ServiceError(
                f"not set up from this state dir: the certificates a client needs are not in "
                f"{self.root}; `scheduler services up {server}` makes them and starts it"
            )

    def make(self, java: str) -> None:
        """Make the CA and both certificates, unless all their files exist already (then they
        are kept; if any is missing, all are made anew, so that they chain to one CA)."""
        if self.made():
            return
        openssl = shutil.which("openssl")
        if openssl is None:
            raise ServiceError(
                "the secured servers need the `openssl` command to make their test "
                "certificates; install OpenSSL (Debian: apt-get install openssl)"
            )
        keytool = str(Path(java).with_name("keytool"))
        self.root.mkdir(parents=True, exist_ok=True)
        ca_key = self.root / "ca.key"
        node_key, node_cert = self.root / "node.key", self.root / "node.pem"
        _run(
            [openssl, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", _DAYS],
            ["-keyout", ca_key, "-out", self.ca, "-subj", "/CN=scheduler local test CA"],
            ["-addext", "basicConstraints=critical,CA:TRUE"],
            ["-addext", "keyUsage=critical,keyCertSign,cRLSign"],
        )
        # The node's certificate names 127.0.0.1: cassandra-driver reaches nodes at the IP
        # addresses they advertise (a host name is resolved first), and checks the name there.
        self._signed(
            openssl,
            ca_key,
            node_key,
            node_cert,
            "/CN=127.0.0.1",
            "serverAuth",
            "subjectAltName=IP:127.0.0.1",
        )
        self._signed(
            openssl, ca_key, self.client_key, self.client_cert, "/CN=scheduler", "clientAuth"
        )
        _run(
            [openssl, "pkcs12", "-export", "-name", "node", "-in", node_cert],
            ["-inkey", node_key, "-certfile", self.ca, "-out", self.node_keystore],
            ["-passout", f"pass:{STORE_PASSWORD}"],
        )
        self.node_truststore.unlink(missing_ok=True)  # keytool refuses to overwrite an alias
        _run(
            [keytool, "-importcert", "-noprompt", "-alias", "ca", "-file", self.ca],
            ["-keystore", self.node_truststore, "-storetype", "PKCS12"],
            ["-storepass", STORE_PASSWORD],
        )

    def _signed(
        self,
        openssl: str,
        ca_key: Path,
        key: Path,
        cert: Path,
        subject: str,
        usage: str,
        *extensions: str,
    ) -> None:
        request = cert.with_suffix(".csr")
        extfile = cert.with_suffix(".ext")
        extfile.write_text("\n".join([f"extendedKeyUsage={usage}", *extensions]) + "\n")
        _run(
            [openssl, "req", "-newkey", "rsa:2048", "-nodes", "-keyout", key],
            ["-out", request, "-subj", subject],
        )
        _run(
            [openssl, "x509", "-req", "-in", request, "-CA", self.ca, "-CAkey", ca_key],
            ["-CAcreateserial", "-days", _DAYS, "-extfile", extfile, "-out", cert],
        )


def _run(*parts: list[str | Path]) -> None:
    argv = [str(item) for part in parts for item in part]
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise ServiceError(
            f"making the test certificates failed: {' '.join(argv[:3])} ... exited "
            f"{done.returncode}: {(done.stderr or done.stdout).strip()[-600:]}"
        )
