#!/usr/bin/env bash
# Try the harness under a rootless Docker engine (docs/platforms.md, "Linux, rootless Docker"): as root,
# install Debian's rootless pieces, start a rootless engine for the user chaos-nonroot (created by
# `make platforms`, or here), load the local images into it, run the smoke test, a crash, a network cut,
# a cut follower and D3 as that user against it, then stop the engine. Prints pytest's summary.
# Not part of `make test`: it changes the machine (packages, /dev/net/tun's mode, a user).
set -euo pipefail
cd "$(dirname "$0")/.."

USER_NAME=chaos-nonroot
[[ $(id -u) == 0 ]] || { echo "run as root: it installs packages and starts an engine for $USER_NAME" >&2; exit 2; }
id "$USER_NAME" >/dev/null 2>&1 || useradd --create-home --groups docker "$USER_NAME"
USER_ID=$(id -u "$USER_NAME")
DEBIAN_FRONTEND=noninteractive apt-get install -y -q rootlesskit uidmap slirp4netns >/dev/null
# slirp4netns opens /dev/net/tun as the user: 0666 on a normal host, 0600 in some containers (this one)
chmod 666 /dev/net/tun

RUNTIME=$(mktemp -d /tmp/chaos-rootless-run-XXXX)
HOME_DIR=$(mktemp -d /tmp/chaos-rootless-home-XXXX)
chown "$USER_ID" "$RUNTIME" "$HOME_DIR"
chmod 700 "$RUNTIME"
SOCKET="unix://$RUNTIME/docker.sock"
as_user() { su "$USER_NAME" -s /bin/bash -c "export XDG_RUNTIME_DIR=$RUNTIME DOCKER_HOST=$SOCKET HOME=$HOME_DIR; $1"; }
stop_engine() {
  pkill -u "$USER_NAME" -f rootlesskit || true
  sleep 2
  rm -rf "$RUNTIME" "$HOME_DIR"
}
trap stop_engine EXIT

as_user "PATH=/usr/share/docker.io/contrib:/usr/sbin:/usr/bin:/sbin:/bin nohup dockerd-rootless.sh >$RUNTIME/dockerd.log 2>&1 &"
for _ in $(seq 1 60); do as_user "docker info >/dev/null 2>&1" && break; sleep 1; done
as_user "docker info --format 'rootless engine {{.ServerVersion}}, cgroup {{.CgroupVersion}} driver {{.CgroupDriver}}'"

KAFKA=$(.venv/bin/python -c 'from chaos import versions; print(versions.KAFKA_VERSION)')
IMAGES=$(.venv/bin/python -c 'from chaos.cluster.images.local import recipes; print(" ".join(r.tag for r in recipes().values()))')
.venv/bin/chaos images ensure --source local --kafka-version "$KAFKA" >/dev/null
docker save $IMAGES | as_user "docker load" >/dev/null

SITE=$(.venv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
PYTEST="cd $PWD && CHAOS_IMAGES=local CHAOS_CACHE_DIR=$HOME_DIR/cache PYTHONDONTWRITEBYTECODE=1 \
  PYTHONPATH=$PWD:$SITE timeout 1200 /usr/bin/python3 -m pytest -q -p no:cacheprovider \
  --chaos-report-dir $HOME_DIR/reports"
status=0
as_user "$PYTEST tests/integration/test_smoke.py -k '$KAFKA and not spark' 2>&1 | tail -n 3" || status=1
as_user "$PYTEST tests/integration/test_faults_semantics.py::test_crash_refuses_fast_cut_and_pause_are_silent \
  tests/integration/test_faults_replication.py::test_cut_follower_leaves_isr_within_lag_time_and_rejoins \
  'scenarios/test_d3_crash_before_commit.py::test_d3[remediated]' 2>&1 | grep -E 'cannot pause|passed|failed' \
  | tail -n 5" || status=1
exit $status
