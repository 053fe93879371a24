#!/usr/bin/env bash
# Makes sure the local RabbitMQ and Postgres that Rover's demo and tests use are running.
# Starts them if they are installed but stopped; says exactly what to install if they are not.
# Idempotent: running it with both already up changes nothing.
set -euo pipefail

say() { printf 'rover: %s\n' "$*" >&2; }

ensure_rabbitmq() {
  if ! command -v rabbitmqctl >/dev/null 2>&1; then
    say "RabbitMQ is not installed. Install it with: apt-get install -y rabbitmq-server"
    return 1
  fi
  if rabbitmqctl -q status >/dev/null 2>&1; then
    return 0
  fi
  say "starting RabbitMQ (rabbitmq-server -detached)"
  rabbitmq-server -detached >/dev/null 2>&1 || true
  # The node takes a few seconds to register; until then rabbitmqctl fails at once.
  for _ in $(seq 1 120); do
    if rabbitmqctl -q status >/dev/null 2>&1 && timeout 60 rabbitmqctl -q await_startup >/dev/null 2>&1; then
      say "RabbitMQ is up"
      return 0
    fi
    sleep 1
  done
  say "RabbitMQ did not start; see /var/log/rabbitmq/ and try: rabbitmq-server -detached"
  return 1
}

ensure_postgres() {
  if ! command -v pg_isready >/dev/null 2>&1; then
    say "Postgres is not installed. Install it with: apt-get install -y postgresql"
    return 1
  fi
  if pg_isready -q -h 127.0.0.1 -p 5432; then
    return 0
  fi
  local version
  version=$(ls /etc/postgresql 2>/dev/null | sort -V | tail -n 1)
  if [ -z "$version" ]; then
    say "no Postgres cluster under /etc/postgresql; create one with: pg_createcluster <version> main"
    return 1
  fi
  say "starting Postgres $version (pg_ctlcluster $version main start)"
  pg_ctlcluster --skip-systemctl-redirect "$version" main start >/dev/null 2>&1 || true
  for _ in $(seq 1 60); do
    pg_isready -q -h 127.0.0.1 -p 5432 && { say "Postgres is up"; return 0; }
    sleep 1
  done
  say "Postgres did not start; try: pg_ctlcluster --skip-systemctl-redirect $version main start"
  return 1
}

# RabbitMQ cancels a consumer holding an unacked message longer than `consumer_timeout` (30 min by
# default, and RabbitMQ 3.10 ignores the per-queue `x-consumer-timeout`). A worker holds a turn
# unacked for the whole turn, so the timeout is set explicitly above the longest allowed turn
# (`agent.turn_timeout_ms`, 10 min by default): 40 min. Deployments set it in rabbitmq.conf.
ROVER_CONSUMER_TIMEOUT_MS=${ROVER_CONSUMER_TIMEOUT_MS:-2400000}
configure_rabbitmq() {
  rabbitmqctl -q eval "application:set_env(rabbit, consumer_timeout, ${ROVER_CONSUMER_TIMEOUT_MS})." >/dev/null
}

# The tools queue was a quorum queue before the RPC path moved to a classic one, and RabbitMQ refuses
# to redeclare a queue with another type: a local broker that still has the old one (default vhost,
# `make run`) drops it. Tool calls are transient and retried by their callers; nothing durable is lost.
migrate_tools_queue() {
  if rabbitmqctl -q list_queues name type 2>/dev/null | awk '$1 == "rover.tools" && $2 == "quorum" { found = 1 } END { exit !found }'; then
    say "replacing the old quorum queue rover.tools (the RPC path is a classic queue now)"
    rabbitmqctl -q delete_queue rover.tools >/dev/null
  fi
}

ensure_rabbitmq
configure_rabbitmq
migrate_tools_queue
ensure_postgres
