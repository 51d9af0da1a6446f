#!/usr/bin/env bash
# Many-ranks benchmark (issue 25): `npm run bench:ranks` or `bash scripts/bench-ranks.sh`.
#
#   1. generates a 16-rank x 2-step pair with bench/gen_scale.py into bench/out/ranks/ (40 layers x
#      19 API repeats: ~105 MB and ~1 s per pair; skipped when its stamp is up to date);
#   2. cargo build --release;
#   3. runs graph_visualize with -j 1 and -j 2 under /usr/bin/time -v (wall, CPU, peak RSS), then
#      -j 2 with --max-memory = 2x the peak RSS of -j 1, then --shard 0/4 .. 3/4 and merge-db,
#      then diagnose -j 1 / -j 2 / four parts merged;
#   4. checks that every db has the content of -j 1's (each table's rows in id order, streamed out
#      of SQLite and hashed: visdb_diff.py holds a whole db in Python objects, ~3x its size, too
#      much for these 8 GB dbs; each db is deleted once hashed) and every diagnosis the JSON of
#      -j 1's, and that the budgeted run stays under its budget;
#   5. prints a markdown table for BENCHMARKS.md, with the scaling expected on C cores worked out
#      from the per-unit CPU time and the export, which one unit at a time does not overlap.
#
# Heavy and timed: never part of the test suite.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

PY="${PYTHON:-python3}"
OUT="bench/out/ranks"
FIX="tests/fixtures/qwen_mix_statistics"
NPU_TPL="$FIX/npu/step0/proc23598"
BENCH_TPL="$FIX/bench/step0/proc23368"
MAPPING="$FIX/layer_mapping.yaml"
GEN_ARGS=(--layers 40 --api_repeat 19 --ranks 16 --steps 2)
BIN="$ROOT/target/release/probelens"
TIME=/usr/bin/time
command -v sqlite3 >/dev/null || { echo "bench-ranks: sqlite3 is required" >&2; exit 2; }

log() { printf '\033[1mbench-ranks:\033[0m %s\n' "$*" >&2; }
[ -x "$TIME" ] || { echo "bench-ranks: $TIME (GNU time) is required" >&2; exit 2; }

WORK="$(mktemp -d "${TMPDIR:-/tmp}/probelens-bench-ranks.XXXXXX")"
trap 'rm -rf "$WORK"' EXIT

want="$( { echo "${GEN_ARGS[*]}"; sha256sum bench/gen_scale.py "$NPU_TPL"/*.json "$BENCH_TPL"/*.json; } | sha256sum | cut -d' ' -f1)"
if [ "$want" = "$(cat "$OUT/.stamp" 2>/dev/null || true)" ] && [ -s "$OUT/bench/step1/rank15/dump.json" ]; then
    log "input pair in $OUT is up to date"
else
    log "generating the 16-rank x 2-step pair into $OUT"
    rm -rf "$OUT"
    mkdir -p "$OUT"
    "$PY" bench/gen_scale.py --template "$NPU_TPL" "${GEN_ARGS[@]}" --defect_layer 20 --out "$OUT/npu" >/dev/null
    "$PY" bench/gen_scale.py --template "$BENCH_TPL" "${GEN_ARGS[@]}" --out "$OUT/bench" >/dev/null
    echo "$want" >"$OUT/.stamp"
fi
input_mb=$(du -sbL "$OUT/npu" "$OUT/bench" | awk '{s += $1} END {printf "%.0f", s / 1e6}')

log "cargo build --release"
cargo build --release --quiet

# timed NAME ARGS...: runs probelens under GNU time; prints "wall cpu rss_kb"
timed() {
    local name="$1"; shift
    "$TIME" -v -o "$WORK/$name.time" "$BIN" "$@" >"$WORK/$name.out" 2>"$WORK/$name.err" || {
        cat "$WORK/$name.err" >&2; echo "bench-ranks: $name failed" >&2; exit 1; }
    awk -F': ' '
        /Elapsed \(wall clock\)/ { n = split($2, p, ":"); w = 0; for (i = 1; i <= n; i++) w = w * 60 + p[i] }
        /User time/ { u = $2 } /System time/ { s = $2 } /Maximum resident/ { r = $2 }
        END { printf "%.2f %.2f %d\n", w, u + s, r }' "$WORK/$name.time"
}

# content DIR: a hash of the rows of the one .vis.db in DIR (tables in id order), then deletes it.
content() {
    local db; db="$(ls "$1"/*.vis.db)"
    for t in tb_nodes tb_stack tb_config; do sqlite3 -batch "$db" "SELECT * FROM $t ORDER BY id"; done | sha256sum | cut -c1-16
    rm -f "$db"
}

GV=(graph_visualize -tp "$OUT/npu" -gp "$OUT/bench" -lm "$MAPPING" --no-progress)
DG=(diagnose -tp "$OUT/npu" -gp "$OUT/bench" -lm "$MAPPING" --json)
units=32
nproc_=$(nproc)
load=$(cut -d' ' -f1-3 /proc/loadavg)

log "-j 1"
read -r w1 c1 r1 < <(timed j1 "${GV[@]}" -o "$WORK/j1" -j 1 --timing)
db_mb=$(stat -c %s "$WORK"/j1/*.vis.db | awk '{printf "%.0f", $1 / 1e6}')
h1=$(content "$WORK/j1")
log "-j 2"
read -r w2 c2 r2 < <(timed j2 "${GV[@]}" -o "$WORK/j2" -j 2)
h2=$(content "$WORK/j2")
budget_kb=$((r1 * 2))
log "-j 2 --max-memory $((budget_kb / 1024))M (2x the peak RSS of -j 1)"
read -r wb cb rb < <(timed jb "${GV[@]}" -o "$WORK/jb" -j 2 --max-memory "${budget_kb}K")
hb=$(content "$WORK/jb")
log "--shard 0/4 .. 3/4, merge-db"
ws=0; cs=0; rs=0
for i in 0 1 2 3; do
    read -r w c r < <(timed "s$i" "${GV[@]}" -o "$WORK/shards" --shard "$i/4" -j 1)
    ws=$(echo "$ws + $w" | bc); cs=$(echo "$cs + $c" | bc); [ "$r" -gt "$rs" ] && rs=$r
    sw[$i]=$w
done
read -r wm cm rm_ < <(timed merge merge-db -o "$WORK/merged" "$WORK"/shards/*.vis.db)
rm -rf "$WORK/shards"
hm=$(content "$WORK/merged")
log "diagnose -j 1, -j 2, 4 parts merged"
read -r wd1 cd1 rd1 < <(timed d1 "${DG[@]}" -j 1)
read -r wd2 cd2 rd2 < <(timed d2 "${DG[@]}" -j 2)
for i in 0 1 2 3; do timed "dp$i" "${DG[@]}" -j 1 --shard "$i/4" >/dev/null; done
"$BIN" diagnose --json --merge "$WORK"/dp*.out >"$WORK/dmerged.out"

log "checking contents"
for h in "$h2:-j 2" "$hb:the budgeted run" "$hm:the merged shards"; do
    [ "${h%%:*}" = "$h1" ] || { echo "bench-ranks: ${h#*:} differs from -j 1" >&2; exit 1; }
done
cmp -s "$WORK/d1.out" "$WORK/d2.out" || { echo "bench-ranks: diagnose -j 2 differs" >&2; exit 1; }
cmp -s "$WORK/d1.out" "$WORK/dmerged.out" || { echo "bench-ranks: merged diagnose parts differ" >&2; exit 1; }
[ "$rb" -le "$budget_kb" ] || { echo "bench-ranks: peak RSS $rb KB over the budget $budget_kb KB" >&2; exit 1; }

# Per unit: wall and CPU; the parts no unit overlaps with another: rows packed into pages under
# the writer's lock, and the indexes sorted and written at the end.
pair_wall=$(echo "scale=3; $w1 / $units" | bc)
cpu_unit=$(echo "scale=3; $c1 / $units" | bc)
held=$(grep -o 'writer lock held [0-9.]*s' "$WORK/j1.err" | grep -o '[0-9.]*')
indexes=$(grep -o 'indexes [0-9.]*s, total' "$WORK/j1.err" | grep -o '[0-9.]*')
cpu_indexes=$(grep -o 'cpu .*' "$WORK/j1.err" | grep -o 'indexes [0-9.]*s' | grep -o '[0-9.]*')
serial_unit=$(echo "scale=3; $held / $units" | bc)
# On C cores with -j C/2: the units' CPU time (all but the indexes') spread over the cores, but
# not below the time the writer's lock was held (one unit at a time), then the indexes (two
# threads; they grow with the rows of the whole run).
expect() { echo "scale=1; p = ($c1 - $cpu_indexes) / $1; if ($held > p) p = $held; (p + $indexes) / 1" | bc; }
mb() { echo "$(( $1 / 1000 )) MB"; }
cat <<EOF

### Many ranks: 16 ranks x 2 steps ($(date -u +%Y-%m-%d) $(date -u +%H:%M) UTC, $(git rev-parse --short HEAD))

Input: \`bench/gen_scale.py ${GEN_ARGS[*]}\` (NPU side with \`--defect_layer 20\`), ${input_mb} MB in
${units} units (pairs); the db ${db_mb} MB. Machine: \`nproc\` ${nproc_}, load average before: ${load}.

| run | wall | CPU (user+sys) | peak RSS |
|---|---|---|---|
| \`-j 1\` | ${w1} s | ${c1} s | $(mb "$r1") |
| \`-j 2\` | ${w2} s | ${c2} s | $(mb "$r2") |
| \`-j 2 --max-memory $((budget_kb / 1024))M\` (2x the peak of \`-j 1\`) | ${wb} s | ${cb} s | $(mb "$rb") |
| \`--shard I/4 -j 1\`, each | ${sw[0]} / ${sw[1]} / ${sw[2]} / ${sw[3]} s | ${cs} s (sum) | $(mb "$rs") (max) |
| \`merge-db\` of the 4 | ${wm} s | ${cm} s | $(mb "$rm_") |
| \`diagnose -j 1\` / \`-j 2\` | ${wd1} / ${wd2} s | ${cd1} / ${cd2} s | $(mb "$rd1") / $(mb "$rd2") |

Same content: the dbs of \`-j 2\`, of the budgeted run and of the merged shards against \`-j 1\`'s
(every table's rows in id order, hashed: ${h1}); \`diagnose\` JSON byte-identical for \`-j 2\` and the merged parts.
Per unit with \`-j 1\`: ${pair_wall} s wall, ${cpu_unit} s CPU; the writer's lock was held ${held} s
in all (${serial_unit} s per unit: rows packed into pages, one unit at a time) and the indexes took
${indexes} s at the end (${cpu_indexes} s CPU). Expected wall for these 32 units with \`-j C/2\` on C
cores (the units' CPU time spread over the cores, not below the lock's share, plus the indexes):
4 cores $(expect 4) s, 8 cores $(expect 8) s, 32 cores $(expect 32) s.
EOF
