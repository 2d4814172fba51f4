#!/usr/bin/env bash
# Drive LoreKit's own CLI (unmodified, outside this repository) against a fresh `cairn serve`.
#
#   scripts/peer_lorekit.sh [PEER_DIR]      # default: ../shared/peers/lorekit-cli from the repo root
#
# Skips (exit 0) when the peer's CLI or node is missing. Each check runs one LoreKit command the way
# its users run it (env URL and token, scratch HOME, telemetry off) and looks at its output; the
# summary lists PASS/FAIL per check and the script exits 1 when any failed. Nothing here is part of
# the project's test suite: tests/compat/lorekit/ checks the same surface in the project's own words.
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PEER=${1:-$ROOT/../shared/peers/lorekit-cli}
if [ $# -eq 0 ] && [ ! -d "$PEER" ]; then  # a worktree: the shared directory sits beside the main checkout
  MAIN=$(dirname "$(git -C "$ROOT" rev-parse --path-format=absolute --git-common-dir 2>/dev/null || echo "$ROOT/.git")")
  PEER=$MAIN/../shared/peers/lorekit-cli
fi
CAIRN=${CAIRN_BIN:-$ROOT/.venv/bin/cairn}
PY=${PYTHON_BIN:-$ROOT/.venv/bin/python}
if [ ! -f "$PEER/bin/lorekit.mjs" ]; then echo "skipped: no LoreKit CLI at $PEER"; exit 0; fi
if ! command -v node >/dev/null; then echo "skipped: node is not installed (apt-get install -y nodejs)"; exit 0; fi

WORK=$(mktemp -d)
SERVE_PID=""
cleanup() { [ -n "$SERVE_PID" ] && kill "$SERVE_PID" 2>/dev/null; wait 2>/dev/null; rm -rf "$WORK"; }
trap cleanup EXIT

export CAIRN_HOME=$WORK/cairn CAIRN_NO_DAEMON=1 CAIRN_SERVE_AUTO_START=0
mkdir -p "$CAIRN_HOME"
PORT=$("$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
TOKEN=$("$CAIRN" --json token create --perm admin --lorekit --expires 1d | "$PY" -c 'import json,sys; print(json.load(sys.stdin)["data"]["token"])')
"$CAIRN" serve --port "$PORT" --no-sweep >"$WORK/serve.log" 2>&1 &
SERVE_PID=$!
for _ in $(seq 1 100); do
  curl -sf "http://127.0.0.1:$PORT/lorekit/functions/v1/health" >/dev/null 2>&1 && break
  sleep 0.2
done

export HOME=$WORK/home LOREKIT_HOME=$WORK/home/.lorekit LOREKIT_TELEMETRY=0 DO_NOT_TRACK=1 LOREKIT_MODE=remote
export LOREKIT_MCP_URL=http://127.0.0.1:$PORT/lorekit/functions/v1/mcp LOREKIT_TOKEN=$TOKEN
export CLAUDE_PLUGIN_DATA=$WORK/plugin-data
mkdir -p "$HOME" "$CLAUDE_PLUGIN_DATA" "$WORK/proj"
cd "$WORK/proj" && git init -q . && git remote add origin https://github.com/acme/widget.git
git checkout -q -b main 2>/dev/null
LK=(node "$PEER/bin/lorekit.mjs")

PASSED=0; FAILED=0; RESULTS=()
check() {  # check NAME EXPECTED_REGEX COMMAND... : the command exits 0 and its output matches
  local name=$1 want=$2; shift 2
  local out rc
  out=$("$@" 2>&1); rc=$?
  if [ $rc -eq 0 ] && grep -Eq -- "$want" <<<"$out"; then
    PASSED=$((PASSED + 1)); RESULTS+=("PASS  $name")
  else
    FAILED=$((FAILED + 1)); RESULTS+=("FAIL  $name (exit $rc)")
    printf -- '--- %s (exit %s)\n%s\n' "$name" "$rc" "$(head -c 2000 <<<"$out")" >&2
  fi
}
hook() {  # hook EVENT JSON
  printf '%s' "$2" | "${LK[@]}" hook --adapter claude --event "$1" --dir "$PWD"
}

check "doctor --deep (connectivity, authentication, round-trip)" "PASS round-trip" \
  bash -c '"$@" doctor --deep | grep -E "connectivity|authentication|round-trip"' _ "${LK[@]}"
check "write global::linter" '"store": "remote"' "${LK[@]}" write global::run-linter "always run the linter before committing" --remote --json
check "write repo scope with tags" '"store": "remote"' "${LK[@]}" write repo::acme/widget::shellcheck "when the bash linter fails run shellcheck locally first" --tags ci,bash --remote --json
check "write overwrite (a new version in Cairn)" '"store": "remote"' "${LK[@]}" write global::run-linter "always run the linter and the type checker before committing" --remote --json
check "show" 'type checker' "${LK[@]}" show global::run-linter --json
check "list" 'run-linter' "${LK[@]}" list --json
check "search" 'shellcheck' "${LK[@]}" search shellcheck --json
check "scopes" '"repo::acme/widget"' "${LK[@]}" scopes --json
check "archive" '"ok": true' "${LK[@]}" archive global::run-linter --json
check "show after archive finds nothing remote" '^remote found: False$' bash -c '"$@" show global::run-linter --json | "$0" -c "import json,sys; print(\"remote found:\", json.load(sys.stdin)[\"remote\"][\"found\"])"' "$PY" "${LK[@]}"
check "restore" '"ok": true' "${LK[@]}" restore global::run-linter --json
check "delete --force" '"ok": true' "${LK[@]}" delete repo::acme/widget::shellcheck --force --json
check "rewrite of forgotten content is refused" 'Error writing' bash -c '! "$@" write global::again "when the bash linter fails run shellcheck locally first" --remote' _ "${LK[@]}"
check "purge --retention-days 30" '"purged": [0-9]+' "${LK[@]}" purge --retention-days 30 --yes --json
check "purge-expired" '"purged": [0-9]+' "${LK[@]}" purge-expired --yes --json
"${LK[@]}" write global::flaky-tests "the flaky integration test needs the database started first" --remote >/dev/null 2>&1
check "hook SessionStart" 'run-linter' hook SessionStart '{"hook_event_name":"SessionStart","session_id":"s1","cwd":"'"$PWD"'"}'
check "hook PostToolUseFailure" 'related memor' hook PostToolUseFailure '{"hook_event_name":"PostToolUseFailure","session_id":"s1","cwd":"'"$PWD"'","tool_name":"Bash","tool_response":{"exit_code":1,"stderr":"linter failed before committing"}}'
check "hook UserPromptSubmit" 'flaky' hook UserPromptSubmit '{"hook_event_name":"UserPromptSubmit","session_id":"s2","cwd":"'"$PWD"'","prompt":"why is the flaky integration test failing again"}'
check "lorekit mcp (stdio proxy over REST): memory.read" 'type checker' bash -c 'printf "%s\n" "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{}}" "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/call\",\"params\":{\"name\":\"memory.read\",\"arguments\":{\"scope\":\"global\",\"key\":\"run-linter\"}}}" | "$@" mcp' _ "${LK[@]}"
check "MCP surface (what mcp-remote speaks): tools/call memory.list" 'run-linter' \
  curl -s -XPOST "$LOREKIT_MCP_URL" -H "Authorization: Bearer $LOREKIT_TOKEN" -H 'content-type: application/json' \
  -H 'accept: application/json, text/event-stream' \
  -d '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"memory.list","arguments":{"scope":"global"}}}'

# The local store LoreKit writes itself, imported into a second Cairn home.
LOREKIT_MODE=local "${LK[@]}" write global::local-one "a lesson written to LoreKit's local store" --local --tags ci >/dev/null 2>&1
LOREKIT_MODE=local "${LK[@]}" write project::proj::local-two "a project lesson kept offline" --local --ttl-days 30 >/dev/null 2>&1
LOREKIT_MODE=local "${LK[@]}" write repo::acme/widget::local-three "archived later" --local >/dev/null 2>&1
LOREKIT_MODE=local "${LK[@]}" archive repo::acme/widget::local-three >/dev/null 2>&1
check "cairn import --from lorekit (LoreKit-written local store)" '"created": 3' \
  env CAIRN_HOME="$WORK/imported" "$CAIRN" --json import --from lorekit "$LOREKIT_HOME" --no-embed
check "cairn import --from lorekit again (idempotent)" '"unchanged": 3' \
  env CAIRN_HOME="$WORK/imported" "$CAIRN" --json import --from lorekit "$LOREKIT_HOME" --no-embed

if grep -q "Traceback\| 500 " "$WORK/serve.log"; then
  FAILED=$((FAILED + 1)); RESULTS+=("FAIL  server log has a traceback or a 500"); cat "$WORK/serve.log" >&2
else
  PASSED=$((PASSED + 1)); RESULTS+=("PASS  no traceback or 500 in the server log")
fi
printf '%s\n' "${RESULTS[@]}"
echo "LoreKit CLI $(node -e "console.log(require('$PEER/package.json').version)") against cairn serve: $PASSED passed, $FAILED failed"
[ "$FAILED" -eq 0 ]
