#!/usr/bin/env bash
# Sets up everything strata needs, idempotently: the virtual environment with the pinned Python
# packages (.venv), and from Maven Central the Kafka broker and Spark's Kafka connector with their
# dependencies (.cache/jars). After it, nothing needs the network.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
venv="$root/.venv"
cache="$root/.cache"
python="${PYTHON:-python3}"

step() { printf '\n[setup %s] %s\n' "$1" "$2"; }
die() { printf '\nsetup failed: %s\n' "$1" >&2; exit 1; }

step 1/5 "checking Java 17+ and Maven"
command -v java >/dev/null || die "Java 17 or newer is required (Kafka and Spark run on the JVM). Install it, e.g. 'apt-get install openjdk-17-jdk-headless', and run this again."
java_major="$(java -version 2>&1 | sed -n 's/.*version "\([0-9]*\).*/\1/p' | head -n1)"
[ -n "$java_major" ] && [ "$java_major" -ge 17 ] \
  || die "Java 17 or newer is required, found '$(java -version 2>&1 | head -n1)'. Install openjdk-17 and put it first on PATH."
command -v mvn >/dev/null || die "Maven is required to fetch the Kafka and Spark jars. Install it, e.g. 'apt-get install maven', and run this again."
"$python" -c 'import sys; sys.exit(sys.version_info < (3, 11))' \
  || die "Python 3.11 or newer is required, found $("$python" --version 2>&1). Set PYTHON=/path/to/python3.11."
echo "java $java_major, $(mvn -v 2>/dev/null | head -n1 | sed 's/\x1b\[[0-9;]*m//g'), $("$python" --version)"

# A stamp file holds the hash of the inputs of each step, so a second run with the same inputs
# does nothing.
stamp_ok() { [ -f "$1" ] && [ "$(cat "$1")" = "$2" ]; }
inputs_hash() { cat "$@" | sha256sum | cut -d' ' -f1; }

step 2/5 "Python environment (.venv)"
py_hash="$(inputs_hash pyproject.toml)"
if stamp_ok "$venv/.strata-installed" "$py_hash"; then
  echo "up to date, nothing to do"
else
  [ -x "$venv/bin/python" ] || "$python" -m venv "$venv"
  "$venv/bin/python" -m pip install --disable-pip-version-check --progress-bar on -q --upgrade pip
  "$venv/bin/python" -m pip install --disable-pip-version-check --progress-bar on \
    --config-settings editable_mode=compat -e ".[all,test,docs]"
  echo "$py_hash" > "$venv/.strata-installed"
fi

fetch_jars() { # name
  local name="$1" pom="build/jars/$1.pom.xml" out="$cache/jars/$1"
  local hash; hash="$(inputs_hash "$pom")"
  if stamp_ok "$out/.fetched" "$hash"; then
    echo "$name: up to date, nothing to do"
    return
  fi
  rm -rf "$out"
  echo "$name: resolving $pom from Maven Central"
  mvn -B -ntp -f "$pom" -Dmaven.repo.local="$cache/m2" \
      dependency:copy-dependencies -DincludeScope=runtime -DoutputDirectory="$out" \
    | sed -n "s/^\[INFO\] Copying \([^ ]*\) to .*/  \1/p"
  echo "$hash" > "$out/.fetched"
  echo "$name: $(ls "$out"/*.jar | wc -l) jars in $out"
}

step 3/5 "Kafka broker jars (KRaft)"
fetch_jars kafka-broker

step 4/5 "Spark Kafka connector jars"
fetch_jars spark-kafka

step 5/5 "class-data sharing archives of the broker's and Spark's JVMs (a stack run once)"
# They hold classes of this JDK and these jars: made again when either changes.
cds_hash="$( (java -version 2>&1; cat "$cache/jars/kafka-broker/.fetched" "$cache/jars/spark-kafka/.fetched" \
  "$venv/.strata-installed" stack/class_data.py) | sha256sum | cut -d' ' -f1)"
cds_dir="$cache/jars/class-data"
if stamp_ok "$cds_dir/.made" "$cds_hash"; then
  echo "up to date, nothing to do"
else
  rm -rf "$cds_dir"
  STRATA_JARS_DIR="$cache/jars" "$venv/bin/python" -m stack.class_data \
    || echo "(stacks start without class-data sharing, a few seconds slower)"
  [ -d "$cds_dir" ] && echo "$cds_hash" > "$cds_dir/.made"
fi

printf '\nsetup done: %s, jars in %s\n' "$venv" "$cache/jars"
