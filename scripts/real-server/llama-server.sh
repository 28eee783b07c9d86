#!/usr/bin/env bash
# Run a REAL OpenAI-compatible server (llama.cpp's own `llama-server`) on
# loopback with a tiny random-weight model, then run an optional command
# against it.
#
#   scripts/real-server/llama-server.sh [COMMAND [ARGS...]]
#
# Steps: make (or reuse) a venv, pip install cmake, ninja, gguf and numpy,
# download the llama-cpp-python sdist from PyPI (it vendors llama.cpp under
# vendor/llama.cpp; the pinned llama.cpp commit is read from its CHANGELOG),
# configure it with CMake (Release, CPU only, LLAMA_CURL=OFF) and build only
# the `llama-server` target (the first time: 13 minutes on one core for
# 0.3.36, 5 for 0.3.16), write a tiny GGUF model with
# `make_tiny_gguf.py --tools-template`, start
#   llama-server --jinja --host 127.0.0.1 --port $PORT --alias tiny
# wait until GET /health and GET /v1/models answer, run COMMAND with
#   SUBAGENTS_OPENAI_BASE_URL=http://127.0.0.1:$PORT/v1
#   SUBAGENTS_OPENAI_MODEL=tiny
#   LLAMA_SERVER_LOG=$LLAMA_DIR/server-$PORT.log   (the server's log)
# exported, and stop the server (by its pid) on exit. Without COMMAND it only
# checks that the server answers, unless KEEP_RUNNING=1, when it waits until
# interrupted.
#
# `--jinja` makes the server render the model's chat template with tools, so
# `tools` and `tool_choice` work. The template is Qwen2.5's (tools in the
# system turn, calls as <tool_call>{"name": ..., "arguments": ...}</tool_call>):
# llama-server learns the tool-call format from it and constrains the output
# with a grammar (forced for `required`, triggered by <tool_call> for `auto`);
# with plain ChatML, newer builds ignore the tools.
#
# Environment (all optional):
#   PORT                      default 8766
#   LLAMA_DIR                 work folder, default /tmp/llama-server
#   VENV                      default $LLAMA_DIR/venv
#   LLAMA_CPP_PYTHON_VERSION  sdist that vendors llama.cpp, default 0.3.36
#                             (llama.cpp 0c1e5709; 0.3.16 has 4227c9be)
#   CMAKE_BUILD_PARALLEL_LEVEL default 2
#   STARTUP_TIMEOUT           seconds to wait for the server, default 120
#   KEEP_RUNNING              1: with no COMMAND, serve until interrupted
#   LLAMA_SERVER_ARGS         extra arguments for llama-server (word-split)
#
# Idempotent: the venv, the sdist, the built llama-server (per version) and
# the model are reused.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
PORT="${PORT:-8766}"
LLAMA_DIR="${LLAMA_DIR:-/tmp/llama-server}"
VENV="${VENV:-$LLAMA_DIR/venv}"
LLAMA_CPP_PYTHON_VERSION="${LLAMA_CPP_PYTHON_VERSION:-0.3.36}"
STARTUP_TIMEOUT="${STARTUP_TIMEOUT:-120}"
KEEP_RUNNING="${KEEP_RUNNING:-0}"
LLAMA_SERVER_ARGS="${LLAMA_SERVER_ARGS:-}"
export CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-2}"

SRC="$LLAMA_DIR/llama_cpp_python-$LLAMA_CPP_PYTHON_VERSION"
BUILD="$LLAMA_DIR/build-$LLAMA_CPP_PYTHON_VERSION"
SERVER_BIN="$BUILD/bin/llama-server"
MODEL="$LLAMA_DIR/tiny-tools.gguf"
PID_FILE="$LLAMA_DIR/server-$PORT.pid"
SERVER_LOG="$LLAMA_DIR/server-$PORT.log"
BASE="http://127.0.0.1:$PORT"
PY="$VENV/bin/python"

log() { printf '[llama-server.sh] %s\n' "$*" >&2; }

mkdir -p "$LLAMA_DIR"

# 1. venv and packages (cmake and ninja come from PyPI too).
if [ ! -x "$PY" ]; then
    log "creating venv $VENV"
    python3 -m venv "$VENV"
fi

if ! "$PY" -c 'import gguf, numpy, cmake, ninja' 2>/dev/null; then
    log "installing cmake, ninja, gguf and numpy"
    "$PY" -m pip install --quiet --upgrade pip
    "$PY" -m pip install --quiet cmake ninja gguf numpy
fi
export PATH="$VENV/bin:$PATH"

# 2. llama-server, built from the llama.cpp that the sdist vendors.
if [ ! -x "$SERVER_BIN" ]; then
    if [ ! -d "$SRC/vendor/llama.cpp" ]; then
        log "downloading the llama-cpp-python $LLAMA_CPP_PYTHON_VERSION sdist"
        # --no-binary for this package only: its build dependencies
        # (pip prepares its metadata) may come as wheels.
        "$PY" -m pip download --quiet --no-deps \
            --no-binary llama-cpp-python \
            "llama-cpp-python==$LLAMA_CPP_PYTHON_VERSION" -d "$LLAMA_DIR/sdist"
        tar -xzf "$LLAMA_DIR/sdist/llama_cpp_python-$LLAMA_CPP_PYTHON_VERSION.tar.gz" \
            -C "$LLAMA_DIR"
    fi
    # The sdist has no git history: name the commit from the CHANGELOG
    # ("Update llama.cpp to ggerganov/llama.cpp@<sha>") so that
    # `llama-server --version` and GET /props say which llama.cpp it is.
    commit="$(awk -v v="## [$LLAMA_CPP_PYTHON_VERSION]" '
        $0 == v { on = 1; next }
        on && /^## \[/ { exit }
        on && match($0, /llama\.cpp@[0-9a-f]+/) {
            print substr($0, RSTART + 10, 8); exit
        }' "$SRC/CHANGELOG.md" 2>/dev/null || true)"
    commit="${commit:-unknown}"
    # Older llama.cpp keeps the server under examples/.
    examples=OFF
    if [ ! -d "$SRC/vendor/llama.cpp/tools/server" ]; then examples=ON; fi
    log "building llama-server (llama.cpp $commit) with $CMAKE_BUILD_PARALLEL_LEVEL jobs; takes minutes"
    start=$(date +%s)
    cmake -S "$SRC/vendor/llama.cpp" -B "$BUILD" -G Ninja \
        -DCMAKE_BUILD_TYPE=Release \
        -DBUILD_SHARED_LIBS=OFF \
        -DLLAMA_CURL=OFF \
        -DLLAMA_BUILD_TESTS=OFF \
        -DLLAMA_BUILD_EXAMPLES="$examples" \
        -DLLAMA_BUILD_TOOLS=ON \
        -DLLAMA_BUILD_SERVER=ON \
        -DLLAMA_BUILD_COMMIT="$commit" \
        >"$LLAMA_DIR/configure.log" 2>&1 \
        || { tail -n 30 "$LLAMA_DIR/configure.log" >&2; log "cmake configure failed"; exit 1; }
    cmake --build "$BUILD" --target llama-server -j "$CMAKE_BUILD_PARALLEL_LEVEL" \
        >"$LLAMA_DIR/build.log" 2>&1 \
        || { tail -n 30 "$LLAMA_DIR/build.log" >&2; log "build failed"; exit 1; }
    log "llama-server built in $(( $(date +%s) - start ))s"
fi
log "using $("$SERVER_BIN" --version 2>&1 | head -n 1)"

# 3. the tiny model, with a chat template that renders tools (rebuilt when
#    the generator changes).
if [ ! -s "$MODEL" ] || [ "$HERE/make_tiny_gguf.py" -nt "$MODEL" ]; then
    log "writing $MODEL"
    "$PY" "$HERE/make_tiny_gguf.py" --tools-template "$MODEL.tmp"
    mv "$MODEL.tmp" "$MODEL"
fi

# 4. the server.
if curl -sS -o /dev/null --max-time 2 "$BASE/v1/models" 2>/dev/null; then
    log "something already answers on $BASE; set PORT to a free port"
    exit 1
fi

SERVER_PID=""
stop_server() {
    if [ -n "$SERVER_PID" ] && kill -0 "$SERVER_PID" 2>/dev/null; then
        log "stopping server pid $SERVER_PID"
        kill "$SERVER_PID" 2>/dev/null || true
        for _ in $(seq 1 50); do
            kill -0 "$SERVER_PID" 2>/dev/null || break
            sleep 0.1
        done
        kill -9 "$SERVER_PID" 2>/dev/null || true
        wait "$SERVER_PID" 2>/dev/null || true
    fi
    rm -f "$PID_FILE"
}
trap stop_server EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

log "starting server on $BASE (log: $SERVER_LOG)"
# shellcheck disable=SC2086 # LLAMA_SERVER_ARGS is word-split on purpose
"$SERVER_BIN" \
    --model "$MODEL" \
    --alias tiny \
    --host 127.0.0.1 \
    --port "$PORT" \
    --ctx-size 2048 \
    --parallel 1 \
    --threads 1 \
    --jinja \
    $LLAMA_SERVER_ARGS \
    >"$SERVER_LOG" 2>&1 &
SERVER_PID=$!
echo "$SERVER_PID" >"$PID_FILE"

deadline=$(( $(date +%s) + STARTUP_TIMEOUT ))
# /health answers 503 while the model loads.
until curl -fsS -o /dev/null --max-time 2 "$BASE/health" 2>/dev/null \
    && curl -fsS -o /dev/null --max-time 2 "$BASE/v1/models" 2>/dev/null; do
    if ! kill -0 "$SERVER_PID" 2>/dev/null; then
        log "server exited during startup; last lines of its log:"
        tail -n 30 "$SERVER_LOG" >&2 || true
        exit 1
    fi
    if [ "$(date +%s)" -ge "$deadline" ]; then
        log "server did not answer within ${STARTUP_TIMEOUT}s"
        tail -n 30 "$SERVER_LOG" >&2 || true
        exit 1
    fi
    sleep 0.5
done
log "server is up (pid $SERVER_PID)"

# 5. the command.
export SUBAGENTS_OPENAI_BASE_URL="$BASE/v1"
export SUBAGENTS_OPENAI_MODEL=tiny
export LLAMA_SERVER_LOG="$SERVER_LOG"

if [ "$#" -gt 0 ]; then
    set +e
    "$@"
    rc=$?
    set -e
    exit "$rc"
fi

curl -fsS "$BASE/v1/models"
echo
if [ "$KEEP_RUNNING" = 1 ]; then
    log "serving on $SUBAGENTS_OPENAI_BASE_URL until interrupted"
    wait "$SERVER_PID"
fi
