#!/usr/bin/env bash
# Create .venv (Python 3.11+) and install the project with its test and benchmark extras.
# Idempotent: a second run only checks that everything is installed.
set -euo pipefail
cd "$(dirname "$0")/.."

python=${PYTHON:-python3}
if ! "$python" -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
  echo "error: Python 3.11 or newer is needed (found $("$python" --version 2>&1)); set PYTHON=..." >&2
  exit 2
fi
if ! command -v java >/dev/null; then
  echo "error: Java 17 is needed for Spark (and for the local Kafka/Cassandra servers); install openjdk-17-jre" >&2
  exit 2
fi
[ -x .venv/bin/python ] || "$python" -m venv .venv
# The C path (scheduler/_speedups.c) is compiled by the install: a change to it installs again.
stamp=.venv/.installed-$(cat pyproject.toml scheduler/_speedups.c | sha1sum | cut -c1-12)
if [ ! -f "$stamp" ]; then
  .venv/bin/python -m pip install --quiet --upgrade pip
  .venv/bin/python -m pip install --quiet -e '.[dev,bench]'
  touch "$stamp"
fi
