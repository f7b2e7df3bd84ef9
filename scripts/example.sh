#!/usr/bin/env bash
# Install, then run the example data pipeline (hourly and daily PySpark jobs) on the embedded
# default: one process, the embedded log and a SQLite store under .scheduler/, local Spark.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/scheduler example run "$@"
