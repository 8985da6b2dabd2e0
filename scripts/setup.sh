#!/usr/bin/env bash
# Everything both README commands need, idempotent and quick when nothing changed:
#   1. a Docker engine that answers (installs Debian's docker.io and starts dockerd when root on Debian);
#   2. build tools for local images, Java 17 for Spark, Chromium for the report's browser test
#      (Debian packages, only those missing);
#   3. the virtualenv .venv with the pinned requirements (installed by uv), reinstalled only when they change.
# Images and Spark jars are made present by `chaos images ensure` / `chaos jars ensure` (see Makefile).
set -euo pipefail

cd "$(dirname "$0")/.."
DOCKERD_LOG=${CHAOS_DOCKERD_LOG:-/var/log/chaos-harness-dockerd.log}
PYTHON=${PYTHON:-python3.11}

say() { printf '[setup] %s\n' "$*" >&2; }
die() { printf '[setup] error: %s\n' "$*" >&2; exit 1; }

is_root_debian() { [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null 2>&1; }

apt_updated=0
apt_install() {
  is_root_debian || die "missing: $* — install them (Debian: sudo apt-get install -y $*) and rerun"
  if [[ $apt_updated -eq 0 ]]; then
    say "apt-get update"
    apt-get update -qq >/dev/null
    apt_updated=1
  fi
  say "apt-get install $*"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}

engine_answers() { timeout 10 docker info >/dev/null 2>&1; }

ensure_docker() {
  if command -v docker >/dev/null 2>&1 && engine_answers; then
    return
  fi
  if ! is_root_debian; then
    die "no Docker engine answers. Start one (e.g. 'sudo systemctl start docker', or run dockerd as root), make sure 'docker info' works for this user, then rerun"
  fi
  command -v dockerd >/dev/null 2>&1 || apt_install docker.io
  command -v docker >/dev/null 2>&1 || die "docker.io is installed but the docker client is not on PATH"
  if ! pgrep -x dockerd >/dev/null 2>&1; then
    say "starting dockerd in the background (log: $DOCKERD_LOG)"
    mkdir -p "$(dirname "$DOCKERD_LOG")"
    nohup dockerd >>"$DOCKERD_LOG" 2>&1 </dev/null &
  fi
  for _ in $(seq 1 60); do
    engine_answers && { say "docker engine is up"; return; }
    sleep 1
  done
  die "dockerd did not answer within 60 s; see $DOCKERD_LOG"
}

ensure_tools() {
  local missing=()
  command -v debootstrap >/dev/null 2>&1 || missing+=(debootstrap)
  command -v mvn >/dev/null 2>&1 || missing+=(maven)
  if ! java -version 2>&1 | grep -qE 'version "(1[7-9]|[2-9][0-9])'; then missing+=(openjdk-17-jre-headless); fi
  command -v javac >/dev/null 2>&1 || missing+=(openjdk-17-jdk-headless)  # compiles the Java client worker
  command -v chromium >/dev/null 2>&1 || missing+=(chromium)  # renders reports in the browser test
  # the reports quote the seeds' Chinese symptoms: without a CJK font Chromium draws them as boxes
  fc-list 2>/dev/null | grep -qi "Noto Sans CJK" || missing+=(fonts-noto-cjk)
  if [[ ${#missing[@]} -gt 0 ]]; then apt_install "${missing[@]}"; fi
  command -v go >/dev/null 2>&1 || say "warning: Go (>= 1.23) is not on PATH; local toxiproxy/reaper images cannot be built"
}

# uv installs the lock in ~16 s where pip took ~70 s: it hard-links the files from its cache and
# byte-compiles them in parallel (compiled here, as pip does: with PYTHONDONTWRITEBYTECODE set, nothing
# writes them later, and each process then took ~3 s more to import pyspark and pandas). Packages PyPI serves only as source (pyspark) are built into a wheel once
# and kept in the wheelhouse: uv's own cache of a built source distribution is dropped whenever the index
# answers its revalidation with a full response, and pyspark then took ~25 s to build on every install.
UV_VERSION=0.13.9
SOURCE_ONLY=(pyspark)
WHEELHOUSE=${CHAOS_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/chaos-harness}/wheels

ensure_wheelhouse() {  # $1: a python with pip
  mkdir -p "$WHEELHOUSE"
  local name pin
  for name in "${SOURCE_ONLY[@]}"; do
    pin=$(grep -E "^${name}==" requirements.lock) || continue
    compgen -G "$WHEELHOUSE/${name}-${pin#*==}-*.whl" >/dev/null && continue
    say "building a wheel of $pin once into $WHEELHOUSE"
    local tmp
    tmp=$(mktemp -d "$WHEELHOUSE/.build.XXXXXX")  # moved in whole: an interrupted build leaves no wheel
    if ! "$1" -m pip wheel -q --no-deps -w "$tmp" "$pin"; then rm -rf "$tmp"; return 1; fi
    mv "$tmp"/*.whl "$WHEELHOUSE"/ && rm -rf "$tmp"
  done
}

ensure_venv() {
  command -v "$PYTHON" >/dev/null 2>&1 || die "$PYTHON not found; install Python 3.11 or set PYTHON=/path/to/python3.11"
  local stamp=.venv/.chaos-setup-stamp want
  want=$( { cat requirements.lock pyproject.toml; echo "uv $UV_VERSION"; } | sha256sum | cut -c1-32)
  if [[ -f $stamp && $(cat "$stamp") == "$want" && -x .venv/bin/chaos ]]; then
    return
  fi
  say "installing the pinned requirements into .venv (log: .venv/setup-pip.log)"
  [[ -x .venv/bin/python ]] || "$PYTHON" -m venv .venv
  local log=.venv/setup-pip.log uv=.venv/bin/uv
  if ! { { [[ -x $uv && $($uv --version) == "uv $UV_VERSION"* ]] ||
           .venv/bin/python -m pip install -q "uv==$UV_VERSION"; } &&
         ensure_wheelhouse .venv/bin/python &&
         $uv pip install --python .venv/bin/python --compile-bytecode --find-links "$WHEELHOUSE" \
           -r requirements.lock &&
         $uv pip install --python .venv/bin/python --no-deps -e .; } >"$log" 2>&1; then
    tail -n 30 "$log" >&2
    die "installing failed; full log in $log"
  fi
  echo "$want" >"$stamp"
}

ensure_docker
ensure_tools
ensure_venv
say "ready"
