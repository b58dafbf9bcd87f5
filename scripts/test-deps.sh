#!/usr/bin/env bash
# What the tests need beyond scripts/setup.sh: the PostgreSQL server (Debian's postgresql
# package) that the store tests start on a port of their own. Installed with apt-get if missing.
set -euo pipefail

if ls /usr/lib/postgresql/*/bin/pg_ctl >/dev/null 2>&1; then
  echo "test dependencies: PostgreSQL $(ls /usr/lib/postgresql | sort -n | tail -n1) installed"
  exit 0
fi
if [ "$(id -u)" != 0 ]; then
  echo "the tests need PostgreSQL's server: run 'sudo apt-get install postgresql' and try again" >&2
  exit 1
fi
echo "test dependencies: installing postgresql with apt-get"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends postgresql >/dev/null
