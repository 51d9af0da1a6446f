#!/usr/bin/env python3
"""Regenerates the expectations of the golden cases by running msprobe itself.

Usage (from the repository root):

    python3 tests/golden/regen.py                 # every case
    python3 tests/golden/regen.py graph_sibling_order compare_rel_err_strings   # some cases
    python3 tests/golden/regen.py --missing       # only cases without a .db.json yet
    python3 tests/golden/regen.py -j 2 ...        # run two msprobe processes at once

For each `tests/golden/cases/<name>.case` it writes the case's files into a temporary folder
(`npu/`, `bench/`, `mapping.yaml`), runs

    msprobe graph_visualize -tp npu [-gp bench] -o out <args of the case>

from that folder (msprobe 26.2 as installed: `pip install mindstudio-probe==26.2.0`), and freezes
the resulting `.vis.db` as `tests/golden/cases/<name>.db.json`: every row of `tb_nodes`, `tb_stack`
and `tb_config` keyed by its `id`, every column (`tb_nodes.dump_data_dir` with the case folder's
real path written as `$CASE`).
If msprobe exits non-zero (with or without a partial db, e.g. when one rank of a pool fails), the
file is `{"error": "<its ERROR line>", ...}` and the Rust side must fail too.
(The message is msprobe's first ERROR line other than the CANN and "unexpected error" ones.)

The `.case` format (parsed the same way by tests/it/common.rs):

    # comment lines: which rule of msprobe-format.md the case pins down
    args: -fm -oc                  (optional; extra flags after -tp/-gp/-o)
    --- npu/dump.json
    <file text, byte for byte up to the next '--- ' line>
    --- bench/dump.json = npu/dump.json      (a copy of an earlier file)
    --- npu/dump_tensor_data/X.npy = npy f4 [2,2] 1 2 nan inf   (a NumPy file: descr, shape, values)

A folder with a dump.json but no stack.json gets `{}` as stack.json. `-gp bench` is passed when
any `bench/` file exists.
"""

import importlib.util
import json
import os
import re
import sqlite3
import struct
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor

HERE = os.path.dirname(os.path.abspath(__file__))
CASES = os.path.join(HERE, "cases")


def parse_case(text):
    args, files, cur = [], {}, None
    for line in text.splitlines(keepends=True):
        if line.startswith("--- "):
            if cur:
                files[cur[0]] = "".join(cur[1])
            rest = line[4:].strip()
            if " = npy " in rest:
                path, spec = rest.split(" = npy ", 1)
                files[path.strip()] = make_npy(spec)
                cur = None
            elif " = " in rest:
                path, src = rest.split(" = ", 1)
                files[path.strip()] = files[src.strip()]
                cur = None
            else:
                cur = (rest, [])
            continue
        if cur is not None:
            cur[1].append(line)
        elif line.strip().startswith("args:"):
            args = line.strip()[len("args:"):].split()
    if cur:
        files[cur[0]] = "".join(cur[1])
    for p in list(files):
        if p.endswith("dump.json"):
            files.setdefault(p[: -len("dump.json")] + "stack.json", "{}\n")
    return args, files


NPY_CODES = {"f2": "e", "f4": "f", "f8": "d", "i1": "b", "i2": "h", "i4": "i", "i8": "q", "u1": "B", "b1": "?"}


def make_npy(spec):
    """The bytes of a NumPy .npy file (format 1.0, C order, little endian) from a case line's
    `<descr> [<shape>] <values…>`, e.g. `f4 [2,2] 1 2 nan inf` or `b1 [] 1` (0-d)."""
    descr, shape, *values = spec.split()
    dims = [int(x) for x in shape.strip("[]").split(",") if x.strip()]
    code = NPY_CODES[descr]
    conv = float if code in "efd" else int
    body = struct.pack("<%d%s" % (len(values), code), *[conv(v) for v in values])
    shape_repr = "(%s)" % (", ".join(map(str, dims)) + ("," if len(dims) == 1 else ""))
    order = "|" if descr in ("b1", "i1", "u1") else "<"
    header = "{'descr': '%s%s', 'fortran_order': False, 'shape': %s, }" % (order, descr, shape_repr)
    header += " " * (63 - (10 + len(header)) % 64) + "\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode("latin1") + body


def dump_db(path, tmp):
    """The tables by id; dump_data_dir with the case folder's real path written as $CASE."""
    real = os.path.realpath(tmp)
    con = sqlite3.connect(path)
    out = {}
    for table in ("tb_nodes", "tb_stack", "tb_config"):
        cur = con.execute(f"select * from {table}")
        cols = [d[0] for d in cur.description]
        rows = {}
        for r in cur.fetchall():
            row = dict(zip(cols, r))
            if isinstance(row.get("dump_data_dir"), str):
                row["dump_data_dir"] = row["dump_data_dir"].replace(real, "$CASE")
            rows[str(row["id"])] = row
        out[table] = dict(sorted(rows.items()))
    con.close()
    return out


def regen(name):
    with open(os.path.join(CASES, name + ".case"), encoding="utf-8") as f:
        args, files = parse_case(f.read())
    if any(p.endswith(".npy") for p in files) and importlib.util.find_spec("mindspore") is None:
        # msprobe's MindSpore real-data reader imports mindspore: without it msprobe fails, and
        # that failure is not msprobe's answer for the case (see README.md).
        return name, "skipped: .npy tensors need mindspore importable (kept the old .db.json)"
    with tempfile.TemporaryDirectory(prefix="golden-") as tmp:
        for p, body in files.items():
            full = os.path.join(tmp, p)
            os.makedirs(os.path.dirname(full), exist_ok=True)
            if isinstance(body, bytes):
                with open(full, "wb") as f:
                    f.write(body)
                continue
            with open(full, "w", encoding="utf-8") as f:
                f.write(body)
        cmd = ["msprobe", "graph_visualize", "-tp", "npu"]
        if any(p.startswith("bench/") for p in files):
            cmd += ["-gp", "bench"]
        cmd += ["-o", "out"] + args
        proc = subprocess.run(cmd, cwd=tmp, capture_output=True, text=True)
        log = proc.stdout + proc.stderr
        dbs = []
        if os.path.isdir(os.path.join(tmp, "out")):
            dbs = [x for x in os.listdir(os.path.join(tmp, "out")) if x.endswith(".vis.db")]
        if len(dbs) == 1 and proc.returncode == 0:
            result = {"msprobe": msprobe_version(), "cmd": " ".join(cmd[1:])}
            result.update(dump_db(os.path.join(tmp, "out", dbs[0]), tmp))
        else:
            errors = [l for l in log.splitlines() if "[ERROR]" in l and "CANN" not in l]
            useful = [l for l in errors if "An unexpected error occurred" not in l]
            msg = (useful or errors or ["exit code %d" % proc.returncode])[0]
            msg = re.sub(r"^\S+ \S+ \(\d+\) \[ERROR\] ", "", msg).replace(tmp + "/", "")
            result = {"msprobe": msprobe_version(), "cmd": " ".join(cmd[1:]), "error": msg,
                      "exit_code": proc.returncode, "partial_db": len(dbs) == 1}
    with open(os.path.join(CASES, name + ".db.json"), "w", encoding="utf-8") as f:
        json.dump(result, f, indent=1, ensure_ascii=False)
        f.write("\n")
    return name, "error: " + result["error"] if "error" in result else "ok"


_VERSION = None


def msprobe_version():
    global _VERSION
    if _VERSION is None:
        from importlib.metadata import version
        _VERSION = version("mindstudio-probe")
    return _VERSION


def main(argv):
    jobs = 1
    missing = False
    names = []
    i = 0
    while i < len(argv):
        if argv[i] == "-j":
            jobs = int(argv[i + 1])
            i += 1
        elif argv[i] == "--missing":
            missing = True
        else:
            names.append(argv[i].removesuffix(".case"))
        i += 1
    if not names:
        names = sorted(x[:-5] for x in os.listdir(CASES) if x.endswith(".case"))
    if missing:
        names = [n for n in names if not os.path.exists(os.path.join(CASES, n + ".db.json"))]
    if msprobe_version() != "26.2.0":
        print(f"warning: msprobe {msprobe_version()} installed; the cases were made with 26.2.0", file=sys.stderr)
    with ThreadPoolExecutor(max_workers=jobs) as ex:
        for name, status in ex.map(regen, names):
            print(f"{name}: {status}")


if __name__ == "__main__":
    main(sys.argv[1:])
