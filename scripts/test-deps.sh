#!/usr/bin/env bash
# What the tests need beyond scripts/setup.sh: the S3-compatible server the object-store tests
# start (S3Proxy, from Maven Central), and Debian packages installed with apt-get if missing.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
s3proxy="org.gaul:s3proxy:4.1.0:jar:jar-with-dependencies"
s3proxy_dir="$root/.cache/jars/s3proxy"
if ls "$s3proxy_dir"/s3proxy-4.1.0-*.jar >/dev/null 2>&1; then
  echo "test dependencies: S3Proxy 4.1.0 in $s3proxy_dir"
else
  echo "test dependencies: fetching S3Proxy 4.1.0 from Maven Central"
  mvn -B -ntp -q -Dmaven.repo.local="$root/.cache/m2" dependency:copy \
    -Dartifact="$s3proxy" -DoutputDirectory="$s3proxy_dir"
fi

# Debian packages: PostgreSQL's server, openssl (the secured-connection tests make their
# certificates with it), iproute2 (the several-hosts test makes network namespaces with ip), and
# chromium with its driver (the dashboard's browser tests).
missing=()
ls /usr/lib/postgresql/*/bin/pg_ctl >/dev/null 2>&1 || missing+=(postgresql)
command -v openssl >/dev/null || missing+=(openssl)
command -v ip >/dev/null || missing+=(iproute2)
[ -x /usr/bin/chromium ] || missing+=(chromium)
[ -x /usr/bin/chromedriver ] || missing+=(chromium-driver)
if [ ${#missing[@]} = 0 ]; then
  echo "test dependencies: PostgreSQL $(ls /usr/lib/postgresql | sort -n | tail -n1), openssl, ip, chromium and chromedriver installed"
  exit 0
fi
if [ "$(id -u)" != 0 ]; then
  echo "the tests need ${missing[*]}: run 'sudo apt-get install ${missing[*]}' and try again" >&2
  exit 1
fi
echo "test dependencies: installing ${missing[*]} with apt-get"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
