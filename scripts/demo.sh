#!/usr/bin/env bash
# `make run`: a guided tour of Cairn on a fresh embedded store (write, read, recurrence, supersede,
# forget and the refused re-write, context, history, the audit chain), then `cairn serve` with the
# dashboard on that store, printing its URL and a sign-in token. Ctrl-C stops the server.
#
# The tour runs as a `demo` account with its own token, so what it writes is what the dashboard
# shows when you sign in with that token. CAIRN_DEMO_NO_SERVE=1 stops after the tour;
# CAIRN_DEMO_PORT picks the port (default: 8321, or the next free one).
set -uo pipefail
export CAIRN_HOME="${CAIRN_DEMO_HOME:-$(mktemp -d -t cairn-demo-XXXXXX)}"
export CAIRN_ACTOR="demo-agent"
bold=$(tput bold 2>/dev/null || true); dim=$(tput dim 2>/dev/null || true); off=$(tput sgr0 2>/dev/null || true)

step() { printf '\n%s== %s ==%s\n' "$bold" "$1" "$off"; }
run() { printf '%s$ %s%s\n' "$dim" "$*" "$off"; "$@"; local rc=$?; [ $rc -ne 0 ] && printf '%s(exit %s)%s\n' "$dim" "$rc" "$off"; return 0; }

echo "Cairn demo — a fresh store at $CAIRN_HOME"

step "An account for the demo, with its first token (the dashboard's sign-in)"
made=$(cairn --json user create demo) || { echo "$made"; exit 2; }
CAIRN_TOKEN=$(printf '%s' "$made" | python3 -c 'import json,sys; print(json.load(sys.stdin)["data"]["token"])')
export CAIRN_TOKEN
echo "account demo, token ${CAIRN_TOKEN:0:14}… (printed in full when the dashboard starts)"

step "An agent writes a lesson (agents' lessons start as unverified candidates)"
run cairn write repo::acme/widget docker-build-cache \
  "Docker layer cache goes stale when package-lock.json changes; rebuild with --no-cache after dependency bumps." \
  --tag docker --tag ci --source-agent claude-code --session s1

step "Another session learns the same thing: a recurrence, not a copy"
run cairn write repo::acme/widget docker-build-cache \
  "docker layer cache goes stale when package-lock.json changes — rebuild with --no-cache after dependency bumps" \
  --session s2

step "A malformed scope is refused with the corrected form"
run cairn write repo:acme/widget some-key "text"

step "Read it back"
run cairn read repo::acme/widget "Docker Build Cache"

step "Supersede it with a better lesson (the old one is retired and linked, in one transaction)"
run cairn supersede repo::acme/widget docker-layer-caching \
  "Pin the base image by digest and key the dependency layer on the lockfile hash; --no-cache is a last resort." \
  --supersedes repo::acme/widget docker-build-cache
run cairn read repo::acme/widget docker-build-cache
run cairn history repo::acme/widget docker-build-cache
run cairn neighborhood repo::acme/widget docker-layer-caching

step "A wrong lesson appears, and a person forgets it"
run cairn write global npm-fix "Run npm install with --force whenever peer dependencies conflict."
run cairn forget global npm-fix --reason "--force hides real peer conflicts; fix the versions instead"

step "The same content, reworded in case and punctuation, under a new key and scope: refused"
run cairn write repo::acme/widget peer-deps "run NPM install with --force, whenever peer dependencies conflict!"

step "What the next session in acme/widget reads: the context block, inside a character budget"
run cairn write global typecheck-first "Run the typecheck before you claim a change is done." --by-human
run cairn write repo::acme/widget loop::review-it1 "Reviewer loop note: iteration 1 flagged missing tests." --tag loop::reviewer
run cairn write repo::acme/widget loop::review-it2 "Reviewer loop note: iteration 2 flagged naming." --tag loop::reviewer
run cairn context --repo acme/widget --branch feat/docker-cache --max-chars 900
run cairn config show

step "The review queue, and the audit ledger with its hash chain"
run cairn review
run cairn audit
run cairn audit verify

step "A few more lessons, so each dashboard tab has something in it"
cairn write repo::acme/widget flaky-e2e "The checkout e2e test is flaky under parallel runs; run it with --workers 1." \
  --tag ci --source-agent cursor --session s3 >/dev/null
cairn write repo::acme/widget flaky-e2e "The checkout e2e test is flaky under parallel runs; pin --workers 1 until the fixture is isolated." \
  --tag ci --source-agent cursor --session s4 >/dev/null
cairn write project::widget env-files "Never commit .env files; the pre-commit hook checks for them." --tag security >/dev/null
cairn write project::widget old-node "Use Node 18 for the widget build." --session s5 >/dev/null
cairn archive project::widget old-node >/dev/null
cairn write global short-lived "Staging is frozen for the release this week." --ttl 2s >/dev/null
run cairn list

if [ -n "${CAIRN_DEMO_NO_SERVE:-}" ]; then
  printf '\nDone. Explore this store with: CAIRN_HOME=%s CAIRN_TOKEN=%s cairn --help\n' "$CAIRN_HOME" "$CAIRN_TOKEN"
  exit 0
fi

port="${CAIRN_DEMO_PORT:-$(python3 - <<'PY'
import socket
for port in range(8321, 8421):
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            continue
        print(port)
        break
PY
)}"
step "The dashboard"
printf '%sDashboard: http://127.0.0.1:%s/ui/%s\n' "$bold" "$port" "$off"
printf 'Sign in with this token: %s\n' "$CAIRN_TOKEN"
printf 'HTTP API: http://127.0.0.1:%s/docs · MCP: http://127.0.0.1:%s/mcp/ · the store: CAIRN_HOME=%s\n' "$port" "$port" "$CAIRN_HOME"
printf 'Ctrl-C stops the server.\n\n'
unset CAIRN_TOKEN  # the server resolves each request's own token
exec cairn serve --port "$port"
