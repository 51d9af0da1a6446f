#!/usr/bin/env python3
"""A dump pair with one very wide module, for the expand benchmark (issue #7: "expanding a module
with 1,000 children <= 50 ms"). Python 3.11, stdlib only, deterministic.

OUT/npu and OUT/bench are rank folders (dump.json, construct.json, stack.json, written as msprobe
writes them, ``json.dump(indent=1)``). Each has one top-level module ``Module.model.Wide.forward.0``
whose ``--children`` direct children are modules ``Module.model.blocks.<i>.Block.forward.0``, each
with ``--grandchildren`` API calls (``Torch.add.<k>.forward``) under it. The bench side has the
same names and shapes with every statistic scaled by 1.01 (the pair compares and matches fully).

  python3 bench/gen_wide.py --children 1000 --out /tmp/probelens-wide
"""
from __future__ import annotations

import argparse
import json
import os
import sys


def stat(v: float, scale: float) -> dict:
    return {"type": "torch.Tensor", "dtype": "torch.float32", "shape": [4, 8], "Max": v * scale,
            "Min": -v * scale, "Mean": v * scale / 10, "Norm": v * scale * 3, "requires_grad": False}


def write_side(folder: str, children: int, grandchildren: int, scale: float) -> int:
    os.makedirs(folder, exist_ok=True)
    construct: dict[str, str | None] = {}
    data: dict[str, dict] = {}
    top = "Module.model.Wide.forward.0"
    construct[top] = None
    data[top] = {"input_args": [stat(1.0, scale)], "input_kwargs": {}, "output": [stat(2.0, scale)]}
    api = 0
    for i in range(children):
        mod = f"Module.model.blocks.{i}.Block.forward.0"
        construct[mod] = top
        v = 1.0 + i % 7
        data[mod] = {"input_args": [stat(v, scale)], "input_kwargs": {}, "output": [stat(v * 2, scale)]}
        for k in range(grandchildren):
            name = f"Torch.add.{api}.forward"
            api += 1
            construct[name] = mod
            w = 1.0 + (i + k) % 13
            data[name] = {"input_args": [stat(w, scale), stat(w / 2, scale)], "input_kwargs": {},
                          "output": [stat(w, scale)]}
    dump = {"task": "statistics", "level": "mix", "framework": "pytorch", "dump_data_dir": None, "data": data}
    stack = {"0": [list(construct), ["File /home/user/train/wide.py, line 1, in <module>, \n main()"]]}
    for name, obj in (("dump.json", dump), ("construct.json", construct), ("stack.json", stack)):
        with open(os.path.join(folder, name), "w", encoding="utf-8") as fh:
            json.dump(obj, fh, indent=1)
    return len(construct)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", required=True, help="output folder (npu/ and bench/ are created inside)")
    p.add_argument("--children", type=int, default=1000, help="direct children of the wide module (default 1000)")
    p.add_argument("--grandchildren", type=int, default=2, help="API calls under each child (default 2)")
    a = p.parse_args(argv)
    n = write_side(os.path.join(a.out, "npu"), a.children, a.grandchildren, 1.0)
    write_side(os.path.join(a.out, "bench"), a.children, a.grandchildren, 1.01)
    print(f"{a.out}: npu and bench, {n} construct nodes each, Module.model.Wide.forward.0 has {a.children} children")
    return 0


if __name__ == "__main__":
    sys.exit(main())
