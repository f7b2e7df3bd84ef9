#!/usr/bin/env bash
# The peer schedulers' servers for `scheduler bench peer`: Redis from Debian's packages (Celery's
# broker) and a check that PostgreSQL's initdb/pg_ctl are on PATH (db-scheduler, Quartz and
# APScheduler's PostgreSQL store). The bench starts private instances of both on free loopback
# ports in its scratch directory; it never uses a system server. Idempotent.
set -euo pipefail
if ! command -v redis-server >/dev/null 2>&1; then
  if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    echo "installing redis-server (Debian package)"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q redis-server >/dev/null
    # The package starts a system service; the bench runs its own, so stop that one.
    (systemctl disable --now redis-server 2>/dev/null || service redis-server stop 2>/dev/null) || true
  else
    echo "redis-server is missing: install it (apt-get install -y redis-server) as root" >&2
  fi
fi
for tool in initdb pg_ctl; do
  command -v "$tool" >/dev/null 2>&1 || echo "$tool is missing: install PostgreSQL 15 (apt-get install -y postgresql)" >&2
done
command -v mvn >/dev/null 2>&1 || echo "mvn is missing: db-scheduler and Quartz need Maven (apt-get install -y maven)" >&2
echo "peer servers: redis-server $(command -v redis-server || echo missing), initdb $(command -v initdb || echo missing)"
