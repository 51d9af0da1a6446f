#!/usr/bin/env python3
"""Summarise a scripts/bench.sh run: medians, goal checks, Markdown table, BENCHMARKS.md update.

Reads the logs scripts/bench.sh leaves in its work folder:
  meta.txt                        key=value lines (date, machine, git, load average, ...)
  full-<i>.log / .rc / .db        /usr/bin/time -v + `--timing` stderr of run i with .vis.db output
  nodb-<i>.* or nodb.missing      the same for --no-db (compare only), or why it was not run
  msprobe.log/.rc/.db or msprobe.missing   optional msprobe run (BENCH_MSPROBE=1)
  node.md or node.failed          output of bench/node.mjs (the page's core under Node)
  browser.md or browser.failed    output of bench/browser.mjs (front-end hook)
prints the section and, with --write FILE, replaces the section of the same date in FILE (or
appends it before the `<!-- bench:runs-end -->` marker).
"""
from __future__ import annotations

import argparse
import os
import re
import statistics
import sys

# From issue #7: msprobe graph_visualize on this pair, on this kind of machine.
MSPROBE_ISSUE_S = 181.8
MSPROBE_ISSUE_RSS_GB = 2.29
GOAL_E2E_S = 3.0
GOAL_SPEEDUP = 60.0
GOAL_NODB_S = 1.2
GOAL_RSS_X = 1.0

# `--timing` lines; --no-db runs have no export stage.
TIMING = re.compile(r"probelens: step (\d+) rank (\d+): parse ([\d.]+)s, build\+compare ([\d.]+)s(?:, export ([\d.]+)s)?")
TOTALS = re.compile(r"probelens: indexes ([\d.]+)s, total ([\d.]+)s")
RUNS_END = "<!-- bench:runs-end -->"


def read(path, default=None):
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            return fh.read()
    except FileNotFoundError:
        return default


def wall_seconds(text):
    m = re.search(r"Elapsed \(wall clock\) time \(h:mm:ss or m:ss\): ([\d:.]+)", text)
    if not m:
        return None
    secs = 0.0
    for part in m.group(1).split(":"):
        secs = secs * 60 + float(part)
    return secs


def cpu_seconds(text):
    user = re.search(r"User time \(seconds\): ([\d.]+)", text)
    system = re.search(r"System time \(seconds\): ([\d.]+)", text)
    return float(user.group(1)) + float(system.group(1)) if user and system else None


def peak_rss_mb(text):
    m = re.search(r"Maximum resident set size \(kbytes\): (\d+)", text)
    return int(m.group(1)) * 1024 / 1e6 if m else None


def parse_run(work, name):
    """One timed run: wall, rss, summed stage timings, db sizes."""
    text = read(os.path.join(work, name + ".log"))
    if text is None:
        return None
    stages = [tuple(float(x or 0) for x in m.groups()[2:]) for m in TIMING.finditer(text)]
    totals = TOTALS.search(text)
    dbs = [int(x) for x in (read(os.path.join(work, name + ".db"), "") or "").split()]
    return {
        "wall": wall_seconds(text),
        "cpu": cpu_seconds(text),
        "rss": peak_rss_mb(text),
        "parse": sum(s[0] for s in stages) if stages else None,
        "compare": sum(s[1] for s in stages) if stages else None,
        "export": sum(s[2] for s in stages) if stages else None,
        "indexes": float(totals.group(1)) if totals else None,
        "db": sum(dbs) if dbs else None,
        "rc": (read(os.path.join(work, name + ".rc"), "?") or "?").strip(),
    }


def runs(work, prefix):
    out, i = [], 1
    while (r := parse_run(work, f"{prefix}-{i}")) is not None:
        out.append(r)
        i += 1
    return out


def median(rs, key):
    vals = [r[key] for r in rs if r.get(key) is not None]
    return statistics.median(vals) if vals else None


def input_sizes(roots):
    total = dumps = 0
    per = []
    for root in roots:
        d = 0
        for dirpath, _, files in os.walk(root):
            for f in files:
                if f.endswith(".json"):
                    n = os.path.getsize(os.path.join(dirpath, f))
                    total += n
                    if f == "dump.json":
                        d += n
        dumps += d
        per.append(d)
    return total / 1e6, dumps / 1e6, [x / 1e6 for x in per]


def fmt(v, unit="", nd=2):
    return "n/a" if v is None else f"{v:.{nd}f}{unit}"


def met(ok):
    return "n/a" if ok is None else ("yes" if ok else "**no**")


def build_section(work, roots):
    meta = {}
    for line in (read(os.path.join(work, "meta.txt"), "") or "").splitlines():
        k, _, v = line.partition("=")
        meta[k] = v
    date = meta.get("date", "unknown-date")
    all_mb, dump_mb, per = input_sizes(roots)
    full = runs(work, "full")
    nodb = runs(work, "nodb")
    nodb_missing = os.path.exists(os.path.join(work, "nodb.missing"))

    e2e = median(full, "wall")
    rss = median(full, "rss")
    parse = median(full, "parse")
    n_wall = median(nodb, "wall")
    n_rss = median(nodb, "rss")
    n_parse = median(nodb, "parse")
    speedup = MSPROBE_ISSUE_S / e2e if e2e else None

    ms = parse_run(work, "msprobe")
    ms_missing = read(os.path.join(work, "msprobe.missing"))

    def all_runs(rs, key, unit, nd=2):
        return ", ".join(fmt(r[key], unit, nd) for r in rs) if rs else ""

    n_runs = len(full)
    nodb_text = ("**missing**: `probelens graph_visualize --no-db` is not implemented yet" if nodb_missing
                 else fmt(n_wall, " s"))
    rows = [
        ("end to end with .vis.db, wall", f"≤ {GOAL_E2E_S:g} s", fmt(e2e, " s"),
         met(None if e2e is None else e2e <= GOAL_E2E_S), all_runs(full, "wall", " s"),
         f"{MSPROBE_ISSUE_S} s"),
        (f"speed-up vs msprobe's {MSPROBE_ISSUE_S} s", f"≥ {GOAL_SPEEDUP:g}×", fmt(speedup, "×", 1),
         met(None if speedup is None else speedup >= GOAL_SPEEDUP), "", "1×"),
        ("compare only (--no-db), wall", f"≤ {GOAL_NODB_S:g} s", nodb_text,
         met(None if n_wall is None else n_wall <= GOAL_NODB_S), all_runs(nodb, "wall", " s"), ""),
        ("CPU time (user+sys) with .vis.db", "", fmt(median(full, "cpu"), " s"), "", all_runs(full, "cpu", " s"), ""),
    ]
    if nodb:
        rows.append(("CPU time (user+sys) --no-db", "", fmt(median(nodb, "cpu"), " s"), "",
                     all_runs(nodb, "cpu", " s"), ""))
    rows += [
        ("peak RSS with .vis.db", f"≤ {GOAL_RSS_X:g}× input ({dump_mb:.0f} MB)",
         f"{fmt(rss, ' MB', 0)} = {fmt(rss / dump_mb if rss else None, '×')}",
         met(None if rss is None else rss <= GOAL_RSS_X * dump_mb), all_runs(full, "rss", " MB", 0),
         f"{MSPROBE_ISSUE_RSS_GB} GB"),
    ]
    if nodb:
        rows.append(("peak RSS --no-db", f"≤ {GOAL_RSS_X:g}× input", f"{fmt(n_rss, ' MB', 0)} = "
                     f"{fmt(n_rss / dump_mb if n_rss else None, '×')}",
                     met(None if n_rss is None else n_rss <= GOAL_RSS_X * dump_mb), all_runs(nodb, "rss", " MB", 0),
                     ""))
    rows += [
        ("parse stage (`--timing`)", "", f"{fmt(parse, ' s', 3)} = {fmt(all_mb / parse if parse else None, ' MB/s', 0)}",
         "", all_runs(full, "parse", " s", 3), ""),
        ("build+compare stage", "", fmt(median(full, "compare"), " s", 3), "", all_runs(full, "compare", " s", 3), ""),
        ("export stage (rows formatted and written to the file)", "", fmt(median(full, "export"), " s", 3), "",
         all_runs(full, "export", " s", 3), ""),
        ("index phase (the indexes ranked, sorted and written at the end since 007ca39; before: index creation)", "", fmt(median(full, "indexes"), " s", 3), "", all_runs(full, "indexes", " s", 3), ""),
        (".vis.db size", "", fmt(median(full, "db") / 1e6 if median(full, "db") else None, " MB", 0), "", "", ""),
    ]
    if nodb and n_parse:
        rows.insert(-4, ("parse stage, --no-db runs", "", f"{fmt(n_parse, ' s', 3)} = {fmt(all_mb / n_parse, ' MB/s', 0)}",
                         "", all_runs(nodb, "parse", " s", 3), ""))
    if ms is not None:
        ratio = ms["wall"] / e2e if (ms["wall"] and e2e) else None
        rows.append(("msprobe, same machine and run", "", f"{fmt(ms['wall'], ' s', 1)} wall, {fmt(ms['cpu'], ' s', 1)} CPU, "
                     f"{fmt(ms['rss'], ' MB', 0)} peak RSS (exit {ms['rc']}{', msprobe ' + meta['msprobe_version'] if meta.get('msprobe_version') else ''}); "
                     f"wall ratio msprobe / probelens median = {fmt(ratio, '×', 1)}", "", "1 run", ""))
    elif ms_missing:
        rows.append(("msprobe, same machine and run", "", f"not run: msprobe {ms_missing.strip()}", "", "", ""))
    else:
        rows.append(("msprobe, same machine and run", "", "not run (set BENCH_MSPROBE=1, ~3 min)", "", "", ""))

    head = "| measurement | goal | probelens (median) | goal met | runs | msprobe (issue #7) |"
    lines = [
        f"<!-- bench:run {date} -->",
        f"### {date} — scripts/bench.sh, {n_runs} run{'s' if n_runs != 1 else ''}, medians",
        "",
        f"Machine: {meta.get('cpu', '?')}, `nproc` {meta.get('nproc', '?')}, `free -g` total "
        f"{meta.get('mem_total_g', '?')} GB, Linux {meta.get('kernel', '?')}. Load average (1/5/15 min) "
        f"{meta.get('load_before', '?')} before, {meta.get('load_after', '?')} after (the 2 cores are shared).",
        f"Build: {meta.get('probelens', '?')}, {meta.get('git', '?')}; {meta.get('rustc', '?')}, "
        f"`cargo build --release`. Started {meta.get('date', '?')} {meta.get('time', '?')} UTC. "
        f"Untimed warm-up runs before the timed ones: {meta.get('warmup', '0 (before 2026-12-01 06:10 UTC)')}.",
        f"Input: dump.json {' + '.join(f'{x:.1f}' for x in per)} = {dump_mb:.1f} MB "
        f"({all_mb:.1f} MB with construct.json and stack.json; parse MB/s uses the {all_mb:.1f} MB).",
        "",
        head,
        "|" + " --- |" * 6,
    ]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    lines += hook_part(work, "node", "WASM under Node (the page's core, one thread):", None)
    lines += hook_part(
        work,
        "browser",
        "Browser (drop → first graph, WASM memory, expand latency, frame time):",
        "not measured yet (hook: `bench/browser.mjs`, to be added by the front-end).",
    )
    lines.append("<!-- /bench:run -->")
    return date, "\n".join(lines) + "\n"


def hook_part(work, name, title, missing):
    """The report lines of a hook's output (`<name>.md`), or why it is missing (`<name>.failed`)."""
    out = read(os.path.join(work, f"{name}.md"))
    failed = read(os.path.join(work, f"{name}.failed"))
    lines = ["", title]
    if out and out.strip():
        lines += ["", out.strip()]
    elif failed:
        lines += ["", f"not measured: {failed.strip()}."]
    elif missing:
        lines += ["", missing]
    return lines


def write(path, date, section):
    text = read(path)
    if text is None:
        text = f"# probelens benchmarks\n\n## Results\n\n{RUNS_END}\n"
    pat = re.compile(rf"<!-- bench:run {re.escape(date)} -->.*?<!-- /bench:run -->\n?", re.S)
    if pat.search(text):
        text = pat.sub(lambda _: section, text, count=1)
        how = "updated"
    elif RUNS_END in text:
        text = text.replace(RUNS_END, section + "\n" + RUNS_END, 1)
        how = "added"
    else:
        text = text.rstrip("\n") + "\n\n" + section
        how = "appended"
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(text)
    return how


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--work", required=True, help="scripts/bench.sh work folder")
    p.add_argument("--inputs", nargs="+", required=True, help="the dump roots (npu, bench)")
    p.add_argument("--write", metavar="FILE", help="add/update the dated section in this Markdown file")
    a = p.parse_args()
    date, section = build_section(a.work, a.inputs)
    print()
    print(section)
    if a.write:
        print(f"bench: {write(a.write, date, section)} the {date} section in {a.write}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
