#!/usr/bin/env bash
# probelens benchmark (issue #7): `npm run bench` or `bash scripts/bench.sh`.
#
#   1. generates the 80-layer pair with bench/gen_scale.py into bench/out/ (skipped when
#      bench/out/.stamp says it is up to date with the generator, templates and arguments);
#   2. cargo build --release (BENCH_REV=<commit>: of a clean checkout of that commit);
#   3. BENCH_RUNS (default 3) runs of the native CLI with .vis.db output and with --no-db
#      (compare only), each under /usr/bin/time -v, with --timing for the parse stage;
#   4. BENCH_MSPROBE=1: one `msprobe graph_visualize` run on the same pair (~3 min);
#   5. browser part: runs bench/browser.mjs when it exists (BENCH_BROWSER=0 skips it);
#   6. bench/report.py prints the table and adds/updates today's section in BENCHMARKS.md
#      (BENCH_WRITE=0: print only).
#
# Heavy and timed: never part of the test suite. Run it on an otherwise idle machine when you can;
# the load average is recorded next to the numbers.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

RUNS="${BENCH_RUNS:-3}"
WARMUP="${BENCH_WARMUP:-1}"
PY="${PYTHON:-python3}"
OUT="bench/out"
FIX="tests/fixtures/qwen_mix_statistics"
NPU_TPL="$FIX/npu/step0/proc23598"
BENCH_TPL="$FIX/bench/step0/proc23368"
MAPPING="$FIX/layer_mapping.yaml"
GEN_ARGS=(--layers 80 --api_repeat 19)
DEFECT_ARGS=(--defect_layer 40)
BIN="target/release/probelens"
TIME=/usr/bin/time

case "$RUNS" in '' | *[!0-9]* | 0) echo "bench: BENCH_RUNS must be a positive integer" >&2; exit 2 ;; esac
case "$WARMUP" in '' | *[!0-9]*) echo "bench: BENCH_WARMUP must be a non-negative integer" >&2; exit 2 ;; esac
[ -x "$TIME" ] || { echo "bench: $TIME (GNU time) is required for wall time and peak RSS" >&2; exit 2; }

log() { printf '\033[1mbench:\033[0m %s\n' "$*" >&2; }

WORK="$(mktemp -d "${TMPDIR:-/tmp}/probelens-bench.XXXXXX")"
cleanup() { rm -rf "$WORK"; }
trap cleanup EXIT

# ---------------------------------------------------------------------------------------------
# 1. input pair
stamp() {
    {
        echo "args: ${GEN_ARGS[*]} | npu: ${DEFECT_ARGS[*]}"
        sha256sum bench/gen_scale.py "$NPU_TPL"/*.json "$BENCH_TPL"/*.json
    } | sha256sum | cut -d' ' -f1
}
want="$(stamp)"
have="$(cat "$OUT/.stamp" 2>/dev/null || true)"
complete=1
for side in npu bench; do
    for f in dump construct stack; do
        [ -s "$OUT/$side/step0/rank0/$f.json" ] || complete=0
    done
done
if [ "$want" = "$have" ] && [ "$complete" = 1 ]; then
    log "input pair in $OUT is up to date"
else
    log "generating the input pair into $OUT"
    rm -rf "$OUT/npu" "$OUT/bench" "$OUT/.stamp"
    mkdir -p "$OUT"
    "$PY" bench/gen_scale.py --template "$NPU_TPL" "${GEN_ARGS[@]}" "${DEFECT_ARGS[@]}" --out "$OUT/npu"
    "$PY" bench/gen_scale.py --template "$BENCH_TPL" "${GEN_ARGS[@]}" --out "$OUT/bench"
    echo "$want" >"$OUT/.stamp"
fi

# ---------------------------------------------------------------------------------------------
# 2. build
# Default: the working tree as it is (other people's uncommitted src/ edits included; the report
# lists them). BENCH_REV=<commit>: a clean `git archive` of that commit, built with its own
# target dir under bench/out/, so the numbers belong to exactly one commit.
if [ -n "${BENCH_REV:-}" ]; then
    rev="$(git rev-parse --verify "${BENCH_REV}^{commit}")"
    log "cargo build --release of a clean checkout of $BENCH_REV (${rev:0:12})"
    mkdir -p "$WORK/src"
    git archive "$rev" | tar -x -C "$WORK/src"
    (cd "$WORK/src" && CARGO_TARGET_DIR="$ROOT/bench/out/target" cargo build --release --quiet)
    BIN="$ROOT/bench/out/target/release/probelens"
    built="commit ${rev:0:12} (BENCH_REV=$BENCH_REV, clean checkout)"
else
    log "cargo build --release (working tree)"
    cargo build --release --quiet
    dirty="$(git status --porcelain -- src Cargo.toml Cargo.lock build.rs 2>/dev/null | awk '{print $2}' | tr '\n' ' ')"
    built="working tree at $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
    [ -z "$dirty" ] || built="$built + uncommitted changes in: ${dirty% }"
fi
# The page's parts (5a, 5) measure www/pkg and dist/: build them from the same working tree, or
# they would measure whatever build was left there (BENCH_PAGE_BUILD=0 keeps the present one).
if [ "${BENCH_PAGE_BUILD:-1}" != 0 ] && { [ "${BENCH_NODE:-1}" != 0 ] || [ "${BENCH_BROWSER:-1}" != 0 ]; }; then
    log "npm run build (the page and its wasm, working tree)"
    npm run build --silent >"$WORK/page-build.log" 2>&1 || { log "npm run build failed:"; tail -n 20 "$WORK/page-build.log" >&2; exit 1; }
    [ -z "${BENCH_REV:-}" ] || built="$built; the page (Node and browser parts) from the working tree"
fi
"$BIN" version >"$WORK/version.txt" 2>&1 || echo "unknown" >"$WORK/version.txt"

# ---------------------------------------------------------------------------------------------
# machine / context
{
    echo "date=$(date -u +%Y-%m-%d)"
    echo "time=$(date -u +%H:%M)"
    echo "nproc=$(nproc)"
    echo "mem_total_g=$(free -g | awk '/^Mem:/ {print $2}')"
    echo "cpu=$(awk -F': ' '/^model name/ {print $2; exit}' /proc/cpuinfo)"
    echo "kernel=$(uname -r)"
    echo "git=$built"
    echo "rustc=$(rustc --version 2>/dev/null || echo unknown)"
    echo "probelens=$(head -n1 "$WORK/version.txt")"
    echo "runs=$RUNS"
    echo "warmup=$WARMUP"
    echo "load_before=$(cut -d' ' -f1-3 /proc/loadavg)"
} >"$WORK/meta.txt"

# ---------------------------------------------------------------------------------------------
# 3. native CLI
CLI_ARGS=(graph_visualize -tp "$OUT/npu" -gp "$OUT/bench" -lm "$MAPPING" --timing --no-progress)

run_cli() { # run_cli NAME I [extra flags...]: one timed run, logs in $WORK/NAME-I.log
    local name="$1" i="$2"
    shift 2
    local dir="$WORK/$name-$i"
    mkdir -p "$dir"
    local rc=0
    "$TIME" -v "$BIN" "${CLI_ARGS[@]}" -o "$dir" "$@" >"$WORK/$name-$i.out" 2>"$WORK/$name-$i.log" || rc=$?
    echo "$rc" >"$WORK/$name-$i.rc"
    find "$dir" -maxdepth 1 -name '*.vis.db' -printf '%s\n' >"$WORK/$name-$i.db" # sizes of written dbs
    rm -rf "$dir"
    return "$rc"
}

# Untimed first: the first run after the builds above met their files still being written back
# (one run in three took 3.8 s instead of 1.8 s, its parse stage 2.4 s instead of 0.5 s).
for i in $(seq 1 "$WARMUP"); do
    log "native with .vis.db, warm-up run $i/$WARMUP (not counted)"
    run_cli warmup "$i" || true
done
for i in $(seq 1 "$RUNS"); do
    log "native with .vis.db, run $i/$RUNS"
    if ! run_cli full "$i"; then
        log "probelens failed (exit $(cat "$WORK/full-$i.rc")):"
        tail -n 20 "$WORK/full-$i.log" >&2
        exit 1
    fi
done

usage="$("$BIN" graph_visualize --help 2>&1 || true)"
if [[ "$usage" == *--no-db* ]]; then
    for i in $(seq 1 "$RUNS"); do
        log "native compare only (--no-db), run $i/$RUNS"
        if ! run_cli nodb "$i" --no-db; then
            log "probelens --no-db failed (exit $(cat "$WORK/nodb-$i.rc")):"
            tail -n 20 "$WORK/nodb-$i.log" >&2
            exit 1
        fi
    done
else
    log "--no-db is not in 'probelens graph_visualize --help': compare-only timing skipped (reported as missing)"
    echo "missing" >"$WORK/nodb.missing"
fi

# ---------------------------------------------------------------------------------------------
# 4. msprobe (optional, same pair, once)
if [ "${BENCH_MSPROBE:-0}" = 1 ]; then
    if command -v msprobe >/dev/null 2>&1 && "$PY" -m pip show mindstudio-probe >/dev/null 2>&1; then
        "$PY" -m pip show mindstudio-probe 2>/dev/null | awk -F': ' '/^Version/ {print "msprobe_version=" $2}' >>"$WORK/meta.txt"
        log "msprobe graph_visualize on the same pair (takes minutes)"
        mkdir -p "$WORK/msprobe"
        rc=0
        "$TIME" -v msprobe graph_visualize -tp "$OUT/npu" -gp "$OUT/bench" -lm "$MAPPING" -o "$WORK/msprobe" \
            >"$WORK/msprobe.out" 2>"$WORK/msprobe.log" || rc=$?
        echo "$rc" >"$WORK/msprobe.rc"
        find "$WORK/msprobe" -maxdepth 1 -name '*.vis.db' -printf '%s\n' >"$WORK/msprobe.db"
        rm -rf "$WORK/msprobe"
        [ "$rc" = 0 ] || { log "msprobe failed (exit $rc), see below"; tail -n 20 "$WORK/msprobe.log" >&2; }
    else
        log "BENCH_MSPROBE=1 but msprobe (pip package mindstudio-probe) is not installed: skipped"
        echo "not installed" >"$WORK/msprobe.missing"
    fi
fi

# ---------------------------------------------------------------------------------------------
# 5a. the page's core (www/pkg, built by `npm run build`) under Node, one thread: both parses, the
# run, the answer's decoding (JSON.parse, columns, decodeColumns), wasm memory; Markdown on stdout
# (bench/node.mjs).
if [ "${BENCH_NODE:-1}" != 0 ] && [ -f bench/node.mjs ]; then
    if [ -f www/pkg/probelens_bg.wasm ]; then
        log "WASM under Node (bench/node.mjs)"
        if ! BENCH_RUNS="$RUNS" node bench/node.mjs "$OUT/npu" "$OUT/bench" "$MAPPING" >"$WORK/node.md" 2>"$WORK/node.log"; then
            log "bench/node.mjs failed:"
            tail -n 20 "$WORK/node.log" >&2
            rm -f "$WORK/node.md"
            echo "bench/node.mjs failed (exit status non-zero)" >"$WORK/node.failed"
        fi
    else
        log "www/pkg/probelens_bg.wasm is missing (run npm run build): WASM under Node skipped"
        echo "www/pkg is not built (run \`npm run build\` first)" >"$WORK/node.failed"
    fi
fi

# ---------------------------------------------------------------------------------------------
# 5. browser (hook for the front-end's bench/browser.mjs)
# Contract: `node bench/browser.mjs <npu root> <bench root>` with BENCH_RUNS in the environment;
# it prints a Markdown fragment (drop -> first graph, WASM memory, expand latency, frame time)
# on stdout, which goes verbatim into the "Browser" part of the report; exit 0 on success.
if [ "${BENCH_BROWSER:-1}" != 0 ] && [ -f bench/browser.mjs ]; then
    log "browser benchmark (bench/browser.mjs)"
    if ! BENCH_RUNS="$RUNS" node bench/browser.mjs "$OUT/npu" "$OUT/bench" >"$WORK/browser.md" 2>"$WORK/browser.log"; then
        log "bench/browser.mjs failed:"
        tail -n 20 "$WORK/browser.log" >&2
        rm -f "$WORK/browser.md"
        echo "bench/browser.mjs failed (exit status non-zero)" >"$WORK/browser.failed"
    fi
fi

echo "load_after=$(cut -d' ' -f1-3 /proc/loadavg)" >>"$WORK/meta.txt"

# ---------------------------------------------------------------------------------------------
# 6. report
WRITE=()
[ "${BENCH_WRITE:-1}" = 0 ] || WRITE=(--write BENCHMARKS.md)
"$PY" bench/report.py --work "$WORK" --inputs "$OUT/npu" "$OUT/bench" "${WRITE[@]}"
