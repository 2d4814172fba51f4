#!/usr/bin/env bash
# A guided tour of Cairn on a fresh embedded store: write, read, recurrence, supersede, forget and
# the refused re-write, history and the audit chain. Runs against a throwaway CAIRN_HOME.
set -uo pipefail
export CAIRN_HOME="${CAIRN_DEMO_HOME:-$(mktemp -d -t cairn-demo-XXXXXX)}"
export CAIRN_ACTOR="demo-agent"
bold=$(tput bold 2>/dev/null || true); dim=$(tput dim 2>/dev/null || true); off=$(tput sgr0 2>/dev/null || true)

step() { printf '\n%s== %s ==%s\n' "$bold" "$1" "$off"; }
run() { printf '%s$ %s%s\n' "$dim" "$*" "$off"; "$@"; local rc=$?; [ $rc -ne 0 ] && printf '%s(exit %s)%s\n' "$dim" "$rc" "$off"; return 0; }

echo "Cairn demo — a fresh store at $CAIRN_HOME"

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

printf '\nDone. Explore this store with: CAIRN_HOME=%s cairn --help\n' "$CAIRN_HOME"
