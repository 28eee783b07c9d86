#!/usr/bin/env bash
# Record raw responses of a running llama-cpp-python server as test fixtures.
# Meant to run under llama-cpp-python.sh, which starts the server and exports
# SUBAGENTS_OPENAI_BASE_URL and SUBAGENTS_OPENAI_MODEL:
#
#   scripts/real-server/llama-cpp-python.sh \
#       scripts/real-server/record-llama-cpp-python-fixtures.sh [OUT_DIR]
#
# OUT_DIR defaults to actors/tests/fixtures/sse. For each fixture NAME it
# writes NAME.request.json (the body sent) and the response: NAME.sse is the
# exact streamed body (curl -N, no decoding), NAME.txt is `curl -i` output
# (status line, headers and body).
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
OUT="${1:-$HERE/../../actors/tests/fixtures/sse}"
: "${SUBAGENTS_OPENAI_BASE_URL:?run this under llama-cpp-python.sh}"
MODEL="${SUBAGENTS_OPENAI_MODEL:-tiny}"
URL="$SUBAGENTS_OPENAI_BASE_URL/chat/completions"
mkdir -p "$OUT"

write_request() { # NAME JSON
    printf '%s\n' "$2" >"$OUT/$1.request.json"
}

stream() { # NAME JSON: raw SSE body into NAME.sse
    write_request "$1" "$2"
    curl -N -sS --max-time 120 -H 'Content-Type: application/json' \
        --data-binary @"$OUT/$1.request.json" "$URL" >"$OUT/$1.sse"
    printf 'recorded %s.sse (%s bytes)\n' "$1" "$(wc -c <"$OUT/$1.sse")" >&2
}

with_status() { # NAME JSON: status line, headers and body into NAME.txt
    write_request "$1" "$2"
    curl -N -sS -i --max-time 120 -H 'Content-Type: application/json' \
        --data-binary @"$OUT/$1.request.json" "$URL" >"$OUT/$1.txt"
    printf 'recorded %s.txt: %s\n' "$1" "$(head -n 1 "$OUT/$1.txt" | tr -d '\r')" >&2
}

SYSTEM='{"role": "system", "content": "You are a terse assistant."}'
USER='{"role": "user", "content": "Say hello."}'
TOOLS='[{"type": "function", "function": {"name": "get_weather", "description": "Current weather in a city", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]'
TOOL_CHOICE='{"type": "function", "function": {"name": "get_weather"}}'
WEATHER_USER='{"role": "user", "content": "What is the weather in Paris?"}'
TOOL_CALLS='[{"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\"}"}}]'
TOOL_RESULT='{"role": "tool", "tool_call_id": "call_1", "content": "sunny"}'

stream llama-cpp-python-text "{
  \"model\": \"$MODEL\",
  \"messages\": [$SYSTEM, $USER],
  \"stream\": true,
  \"max_tokens\": 8,
  \"temperature\": 0,
  \"stream_options\": {\"include_usage\": true}
}"

stream llama-cpp-python-length "{
  \"model\": \"$MODEL\",
  \"messages\": [$SYSTEM, $USER],
  \"stream\": true,
  \"max_tokens\": 2,
  \"temperature\": 0,
  \"stream_options\": {\"include_usage\": true}
}"

stream llama-cpp-python-tool-call "{
  \"model\": \"$MODEL\",
  \"messages\": [$WEATHER_USER],
  \"tools\": $TOOLS,
  \"tool_choice\": $TOOL_CHOICE,
  \"stream\": true,
  \"max_tokens\": 32,
  \"temperature\": 0,
  \"stream_options\": {\"include_usage\": true}
}"

history() { # CONTENT_JSON_OR_EMPTY: assistant tool-call turn + tool result
    local content=""
    if [ -n "$1" ]; then content="\"content\": $1, "; fi
    printf '%s, {"role": "assistant", %s"tool_calls": %s}, %s' \
        "$WEATHER_USER" "$content" "$TOOL_CALLS" "$TOOL_RESULT"
}

for variant in null empty omitted; do
    case "$variant" in
        null) content=null ;;
        empty) content='""' ;;
        omitted) content="" ;;
    esac
    with_status "llama-cpp-python-content-$variant" "{
  \"model\": \"$MODEL\",
  \"messages\": [$(history "$content")],
  \"tools\": $TOOLS,
  \"stream\": true,
  \"max_tokens\": 4,
  \"temperature\": 0,
  \"stream_options\": {\"include_usage\": true}
}"
done

# Omitted content breaks this chat template only when it renders, which for a
# streamed request happens after the 200 headers went out (the body is then
# empty). The same request unstreamed shows the error itself.
with_status llama-cpp-python-content-omitted-nonstream "{
  \"model\": \"$MODEL\",
  \"messages\": [$(history "")],
  \"tools\": $TOOLS,
  \"stream\": false,
  \"max_tokens\": 4,
  \"temperature\": 0
}"
