#!/usr/bin/env bash
# Fuzzes the core's input parsers with cargo-fuzz (libFuzzer) for a bounded time per target.
#
#   scripts/fuzz.sh [target...]        targets: dump_parse graph_build mapping (default: all)
#   FUZZ_SECONDS=600                   time per target (default 600)
#   FUZZ_JOBS=1                        parallel libFuzzer jobs per target
#
# Needs a nightly toolchain and cargo-fuzz; both are installed when missing. Seeds come from the
# bad-input corpus (tests/bad_inputs), the fixtures' mappings and mappings/. Corpora grow in
# fuzz/corpus/<target>/ (kept between runs, not committed); a crash is written to
# fuzz/artifacts/<target>/ and makes this script exit 1. Turn each crash into a case in
# tests/bad_inputs/ (via tests/bad_inputs/make.py) once fixed.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
SECONDS_PER=${FUZZ_SECONDS:-600}
JOBS=${FUZZ_JOBS:-1}
TARGETS=("$@")
[ ${#TARGETS[@]} -eq 0 ] && TARGETS=(dump_parse graph_build mapping)

if ! rustup toolchain list | grep -q '^nightly'; then
  rustup toolchain install nightly --profile minimal
fi
if ! cargo fuzz --version >/dev/null 2>&1; then
  cargo install cargo-fuzz
fi

seed() {
  local t=$1 dir="$ROOT/fuzz/corpus/$1"
  mkdir -p "$dir"
  (cd "$ROOT"
  case $t in
    dump_parse)
      for c in tests/bad_inputs/*/npu; do
        [ -f "$c/dump.json" ] || continue
        local n; n=$(basename "$(dirname "$c")")
        { cat "$c/dump.json"; printf '\0'; cat "$c/construct.json" 2>/dev/null || true; printf '\0';
          cat "$c/stack.json" 2>/dev/null || true; } > "$dir/seed-$n"
      done ;;
    graph_build)
      for f in tests/bad_inputs/*/npu/construct.json; do
        cp "$f" "$dir/seed-$(basename "$(dirname "$(dirname "$f")")")"
      done ;;
    mapping)
      for f in tests/bad_inputs/*/layer_mapping.yaml tests/fixtures/*/layer_mapping*.yaml mappings/*.yaml; do
        if [ -f "$f" ]; then cp "$f" "$dir/seed-$(echo "$f" | tr '/' '_')"; fi
      done ;;
  esac)
}

status=0
summary=()
cd fuzz
cargo +nightly fuzz build -s none
for t in "${TARGETS[@]}"; do
  seed "$t"
  mkdir -p "artifacts/$t"
  before=$(ls "artifacts/$t" | wc -l)
  log="artifacts/$t.log"
  echo "fuzz: $t for ${SECONDS_PER}s ..."
  par=()
  if [ "$JOBS" -gt 1 ]; then par=(-jobs="$JOBS" -workers="$JOBS"); fi
  set +e
  cargo +nightly fuzz run -s none "$t" "corpus/$t" -- \
    -max_total_time="$SECONDS_PER" -timeout=10 -rss_limit_mb=2048 -max_len=131072 \
    -print_final_stats=1 "${par[@]}" >"$log" 2>&1
  rc=$?
  set -e
  after=$(ls "artifacts/$t" | wc -l)
  execs=$( (grep -h 'stat::number_of_executed_units' "$log" fuzz-*.log 2>/dev/null || true) | awk '{s+=$2} END {print s+0}')
  corpus=$(ls "corpus/$t" | wc -l)
  crashes=$((after - before))
  if [ "$execs" -eq 0 ]; then
    summary+=("$t: did not run (exit $rc), see fuzz/$log")
    status=1
  else
    summary+=("$t: ${SECONDS_PER}s, $execs execs, corpus $corpus, new crashes $crashes (exit $rc)")
  fi
  if [ "$crashes" -gt 0 ]; then status=1; fi
  rm -f fuzz-*.log
done
printf '%s\n' "${summary[@]}"
exit $status
