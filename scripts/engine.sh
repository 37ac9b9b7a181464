#!/usr/bin/env bash
# A Docker engine of this repository's own, from Debian's docker.io (dockerd
# with its containerd and runc): its images, state and socket under DIR, no
# default bridge and no iptables rules, so it touches neither the host's
# firewall nor another engine on the machine. Containers publish ports on
# loopback through docker-proxy and reach each other on user-defined networks.
#
#   eval "$(scripts/engine.sh start DIR)"   # start it, wait until it answers (60 s at most),
#                                           # print: export DOCKER_HOST=unix://DIR/docker.sock
#   scripts/engine.sh stop DIR              # stop it, and wait until it has (60 s at most)
#
# .ci/run starts one with DIR in ~/.cache/mcpqueue-images, so its images are
# kept for the next run, and stops it on exit.
set -euo pipefail

usage() { echo "usage: $0 start|stop DIR" >&2; exit 2; }
[ $# -eq 2 ] || usage
dir=$(mkdir -p "$2" && cd "$2" && pwd)
sock="$dir/docker.sock" pidfile="$dir/dockerd.pid"
export DOCKER_HOST="unix://$sock"

running() { [ -s "$pidfile" ] && kill -0 "$(cat "$pidfile")" 2>/dev/null; }
answers() { docker version --format '{{.Server.Version}}' >/dev/null 2>&1; }

# wait_for WHAT SECONDS COMMAND...: polls COMMAND every 0.2 s until it succeeds.
wait_for() {
  local what=$1 deadline=$((SECONDS + $2))
  shift 2
  until "$@"; do
    if [ $SECONDS -ge $deadline ]; then
      echo "engine.sh: $what" >&2
      return 1
    fi
    sleep 0.2
  done
}

case $1 in
start)
  command -v dockerd >/dev/null || { echo "engine.sh: no dockerd: apt-get install docker.io" >&2; exit 1; }
  if running; then
    wait_for "dockerd $(cat "$pidfile") runs but does not answer on $sock" 60 answers
  else
    rm -rf "$dir/run" "$sock" # what an engine that was killed left behind
    dockerd --data-root "$dir/data" --exec-root "$dir/run" --pidfile "$pidfile" \
      -H "unix://$sock" --bridge=none --iptables=false --log-level=warn \
      >>"$dir/dockerd.log" 2>&1 </dev/null &
    if ! wait_for "dockerd did not answer on $sock within 60 s" 60 answers; then
      kill -TERM $! 2>/dev/null || true
      tail -30 "$dir/dockerd.log" >&2
      exit 1
    fi
  fi
  echo "export DOCKER_HOST=unix://$sock"
  ;;
stop)
  if running; then
    pid=$(cat "$pidfile")
    kill -TERM "$pid"
    stopped() { ! kill -0 "$pid" 2>/dev/null; }
    if ! wait_for "dockerd $pid still runs 60 s after SIGTERM: killing it" 60 stopped; then
      kill -KILL "$pid" 2>/dev/null || true
    fi
  fi
  ;;
*) usage ;;
esac
