#!/usr/bin/env bash
# What the tests need beyond scripts/setup.sh: the S3-compatible server the object-store tests
# start (S3Proxy, from Maven Central), Rerun's training loaders' extra (from PyPI), and Debian
# packages installed with apt-get if missing.
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

# Rerun's training loaders (rerun.experimental.dataloader), which the loader tests run on strata's
# endpoint and on Rerun's server: rerun-sdk's 'dataloader' extra, installed once into
# .cache/dataloader (about 5.5 GB: PyPI's torch brings its CUDA libraries, and PyPI has no CPU-only
# torch), which tests/loaders.py puts on sys.path. strata itself never imports them.
loader_pins="torch==2.15.0 torchvision==0.29.2 av==18.1.0 pillow==13.0.0"
loader_dir="$root/.cache/dataloader"
if [ -f "$loader_dir/.installed" ] && [ "$(cat "$loader_dir/.installed")" = "$loader_pins" ]; then
  echo "test dependencies: Rerun's loaders' extra ($loader_pins) in $loader_dir"
else
  echo "test dependencies: installing Rerun's loaders' extra ($loader_pins) into $loader_dir"
  rm -rf "$loader_dir"
  # shellcheck disable=SC2086  # the pins are words
  "$root/.venv/bin/python" -m pip install --disable-pip-version-check -q --target "$loader_dir" $loader_pins
  echo "$loader_pins" > "$loader_dir/.installed"
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
