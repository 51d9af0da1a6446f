#!/usr/bin/env python3
"""Dev check: does bench/gen_scale.py generate the same dumps as the team's shared generator?

Runs both generators with the same small arguments on both fixture templates and compares, per
rank folder: file sizes, node counts, the dump header, the dump.json data keys (in order) and
the shape of every entry (field names, dtypes, shapes; numbers compared with a relative
tolerance), construct.json (keys and parents), stack.json (group ids, members, frames), and
whether the files are byte-identical. Not a test: it needs /work/shared/tools/gen_scale.py.

  python3 bench/check_gen.py                          # --layers 3 --api_repeat 2 (+ a 2x2 step/rank case)
  python3 bench/check_gen.py --layers 5 --api_repeat 3
  python3 bench/check_gen.py --against bench/out/npu /tmp/scale/npu   # compare two existing roots
"""
from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
OURS = os.path.join(HERE, "gen_scale.py")
SHARED = "/work/shared/tools/gen_scale.py"
FIX = os.path.join(ROOT, "tests", "fixtures", "qwen_mix_statistics")
TEMPLATES = {
    "npu": os.path.join(FIX, "npu", "step0", "proc23598"),
    "bench": os.path.join(FIX, "bench", "step0", "proc23368"),
}
FILES = ("dump.json", "construct.json", "stack.json")


def rank_folders(root):
    out = []
    for step in sorted(os.listdir(root)):
        sdir = os.path.join(root, step)
        if os.path.isdir(sdir):
            out += [os.path.join(step, r) for r in sorted(os.listdir(sdir)) if os.path.isdir(os.path.join(sdir, r))]
    return out


def sha(path):
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def same_value(a, b, where, problems, rel=1e-9):
    """Structural equality; numbers within a relative tolerance. Records at most a few problems."""
    if len(problems) > 20:
        return
    if isinstance(a, dict) and isinstance(b, dict):
        if list(a) != list(b):
            problems.append(f"{where}: fields {list(a)} != {list(b)}")
            return
        for k in a:
            same_value(a[k], b[k], f"{where}.{k}", problems, rel)
    elif isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            problems.append(f"{where}: list length {len(a)} != {len(b)}")
            return
        for i, (x, y) in enumerate(zip(a, b)):
            same_value(x, y, f"{where}[{i}]", problems, rel)
    elif isinstance(a, float) and isinstance(b, float):
        if not (math.isclose(a, b, rel_tol=rel) or (math.isnan(a) and math.isnan(b))):
            problems.append(f"{where}: {a!r} != {b!r}")
    elif type(a) is not type(b) or a != b:
        problems.append(f"{where}: {a!r} != {b!r}")


def compare_rank(ours, theirs):
    """Compare one rank folder of each generator; returns (report lines, ok)."""
    lines, ok = [], True
    for f in FILES:
        a, b = os.path.getsize(os.path.join(ours, f)), os.path.getsize(os.path.join(theirs, f))
        ident = a == b and sha(os.path.join(ours, f)) == sha(os.path.join(theirs, f))
        diff = 100.0 * (a - b) / b if b else 0.0
        lines.append(f"  {f:15s} ours {a:>12,d} B  shared {b:>12,d} B  ({diff:+.2f}%)"
                     f"  {'byte-identical' if ident else 'differs'}")
        ok &= abs(diff) <= 3.0

    def load(folder, f):
        with open(os.path.join(folder, f), encoding="utf-8") as fh:
            return json.load(fh)

    problems = []
    da, db = load(ours, "dump.json"), load(theirs, "dump.json")
    ha = {k: v for k, v in da.items() if k != "data"}
    hb = {k: v for k, v in db.items() if k != "data"}
    if ha != hb:
        problems.append(f"dump header {ha} != {hb}")
    ka, kb = list(da["data"]), list(db["data"])
    lines.append(f"  dump.json data  ours {len(ka)} entries, shared {len(kb)}; "
                 f"same keys: {set(ka) == set(kb)}, same order: {ka == kb}")
    for k in set(ka) & set(kb):
        same_value(da["data"][k], db["data"][k], k, problems)
    del da, db

    ca, cb = load(ours, "construct.json"), load(theirs, "construct.json")
    parents = sum(1 for k in set(ca) & set(cb) if ca[k] != cb[k])
    lines.append(f"  construct.json  ours {len(ca)} nodes, shared {len(cb)}; same keys: {set(ca) == set(cb)}, "
                 f"same order: {list(ca) == list(cb)}, different parents: {parents}")
    ok &= list(ca) == list(cb) and parents == 0
    del ca, cb

    sa, sb = load(ours, "stack.json"), load(theirs, "stack.json")
    members = sum(1 for g in set(sa) & set(sb) if sa[g][0] != sb[g][0])
    frames = sum(1 for g in set(sa) & set(sb) if sa[g][1] != sb[g][1])
    lines.append(f"  stack.json      ours {len(sa)} groups / {sum(len(v[0]) for v in sa.values())} names, "
                 f"shared {len(sb)} / {sum(len(v[0]) for v in sb.values())}; same ids: {list(sa) == list(sb)}, "
                 f"groups with other members: {members}, other frames: {frames}")
    ok &= list(sa) == list(sb) and members == 0 and frames == 0

    ok &= ka == kb and not problems
    lines += [f"  ! {p}" for p in problems[:20]]
    return lines, ok


def compare_roots(ours, theirs):
    ra, rb = rank_folders(ours), rank_folders(theirs)
    if ra != rb:
        print(f"rank folders differ: {ra} vs {rb}")
        return False
    ok = True
    for r in ra:
        print(f"{r}:")
        lines, good = compare_rank(os.path.join(ours, r), os.path.join(theirs, r))
        print("\n".join(lines))
        ok &= good
    return ok


def run(gen, template, out, extra):
    cmd = [sys.executable, gen, "--template", template, "--out", out, *extra]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--layers", type=int, default=3)
    p.add_argument("--api_repeat", type=int, default=2)
    p.add_argument("--shared", default=SHARED, help="the shared generator to compare with")
    p.add_argument("--against", nargs=2, metavar=("OURS", "SHARED_OUT"),
                   help="only compare two existing output roots")
    a = p.parse_args()
    if a.against:
        return 0 if compare_roots(*a.against) else 1
    if not os.path.exists(a.shared):
        print(f"check_gen: {a.shared} not found", file=sys.stderr)
        return 2
    base = ["--layers", str(a.layers), "--api_repeat", str(a.api_repeat)]
    cases = [
        ("npu", base + ["--defect_layer", str(a.layers // 2)]),
        ("bench", base),
        ("bench", base + ["--steps", "2", "--ranks", "2", "--rank_dir", "proc"]),
    ]
    ok = True
    with tempfile.TemporaryDirectory(prefix="check_gen_") as tmp:
        for i, (side, extra) in enumerate(cases):
            print(f"== {side} template, {' '.join(extra)}")
            mine, theirs = os.path.join(tmp, f"{i}_ours"), os.path.join(tmp, f"{i}_shared")
            run(OURS, TEMPLATES[side], mine, extra)
            run(a.shared, TEMPLATES[side], theirs, extra)
            ok &= compare_roots(mine, theirs)
    print("check_gen: OK, same structure" if ok else "check_gen: DIFFERENT")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
