#!/usr/bin/env python3
"""Scale a real, small msprobe dump up to benchmark size (Python 3.11, stdlib only).

probelens' own generator for the benchmark pair (issue #7). It follows the same rules as the
team's /work/shared/tools/gen_scale.py, so that both produce the same dumps for the same
arguments (bench/check_gen.py verifies it):

* A node belongs to layer N when it is a ``Module.`` node whose name contains ``.layers.N.``
  (``--layer_token``), or when its parent chain in construct.json leads to such a module.
* Every contiguous run of layer nodes (in file order) is replaced by ``--layers`` copies of its
  layer-0 nodes: copies 0..L-1 when the run starts at layer 0 (forward), L-1..0 otherwise
  (backward). Runs without layer-0 nodes are dropped. API nodes (not ``Module.``) of a copy are
  repeated ``--api_repeat`` times.
* Module names get the copy index (``.layers.0.`` -> ``.layers.<copy>.``); API call counters
  (``Tensor.__mul__.<N>.forward``) are renumbered per API in call order, and a backward node
  takes the counter of its forward in the same copy/repeat.
* construct.json parents follow the renaming; stack.json keeps every group and its frames with
  the renamed node lists; dump.json entries that construct.json does not list (parameters_grad)
  only get the module renaming.
* Max/Min/Mean/Norm of ``torch.float*`` tensors are multiplied by a factor that depends only on
  (copy, step, rank), so an NPU and a bench template generated with the same arguments stay
  comparable. ``--defect_layer`` additionally multiplies the non-input fields (outputs,
  gradients) of one copy by ``--defect_factor``: a localized error msprobe flags.

Output: OUT/step<s>/rank<r>/{dump.json,construct.json,stack.json}, byte for byte what
``json.dump(obj, f, indent=1)`` writes (msprobe's format). The writer encodes every
(template entry, copy) once and reuses the text for the API repeats, which keeps the 80-layer
pair to well under a minute.

Example (the benchmark pair, ~97 MB + ~80 MB of dump.json):
  python3 bench/gen_scale.py --template tests/fixtures/qwen_mix_statistics/npu/step0/proc23598 \\
      --layers 80 --api_repeat 19 --defect_layer 40 --out bench/out/npu
  python3 bench/gen_scale.py --template tests/fixtures/qwen_mix_statistics/bench/step0/proc23368 \\
      --layers 80 --api_repeat 19 --out bench/out/bench
"""
from __future__ import annotations

import argparse
import glob
import json
import math
import os
import re
import sys
import time
from itertools import groupby

API_NAME = re.compile(r"^(?!Module\.)(?P<api>.+)\.(?P<count>\d+)\.(?P<dir>forward|backward)$")
STATS = frozenset(("Max", "Min", "Mean", "Norm"))
OUTSIDE = None  # copy index of nodes outside the decoder layers


# ---------------------------------------------------------------------------------------------
# template


class Template:
    """One rank folder of a real dump plus the layer each node belongs to."""

    def __init__(self, folder: str, layer_token: str):
        def read(name):
            with open(os.path.join(folder, name), encoding="utf-8") as fh:
                return json.load(fh)

        self.folder = folder
        self.dump = read("dump.json")
        self.construct = read("construct.json")
        self.stack = read("stack.json")
        self.token = layer_token
        self._layer_in_name = re.compile(re.escape(layer_token) + r"(\d+)\.")
        self._layer = {}

    def layer(self, name: str | None) -> int | None:
        """Layer index of a node (own name for modules, else the nearest ancestor's)."""
        chain = []
        found = None
        while name is not None and len(chain) <= 200:
            if name in self._layer:
                found = self._layer[name]
                break
            chain.append(name)
            m = self._layer_in_name.search(name) if name.startswith("Module.") else None
            if m:
                found = int(m.group(1))
                break
            name = self.construct.get(name)
        for n in chain:
            self._layer[n] = found
        return found

    def with_copy(self, name: str | None, copy: int | None) -> str | None:
        """Module renaming: first ``.layers.<n>.`` becomes ``.layers.<copy>.``."""
        if name is None or copy is None:
            return name
        return self._layer_in_name.sub(f"{self.token}{copy}.", name, count=1)


def occurrences(tpl: Template, names, layers: int, api_repeat: int):
    """The generated sequence of (template name, copy, repeat) for names in file order."""
    out = []
    for inside, run in groupby(names, key=lambda n: tpl.layer(n) is not None):
        run = list(run)
        if not inside:
            out.extend((n, OUTSIDE, 0) for n in run)
            continue
        layer0 = [n for n in run if tpl.layer(n) == 0]
        if not layer0:
            continue
        copies = range(layers) if tpl.layer(run[0]) == 0 else range(layers - 1, -1, -1)
        reps = [api_repeat if API_NAME.match(n) else 1 for n in layer0]
        for c in copies:
            for n, k in zip(layer0, reps):
                out.extend((n, c, r) for r in range(k))
    return out


def new_names(tpl: Template, seq):
    """(name, copy, repeat) -> generated name; API counters renumbered in call order."""
    next_count = {}
    forward_count = {}
    names = {}
    for occ in seq:
        name, c, r = occ
        m = API_NAME.match(name)
        if m is None:
            names[occ] = tpl.with_copy(name, c)
            continue
        api = m["api"]
        key = (api, m["count"], c, r)
        n = forward_count.get(key) if m["dir"] == "backward" else None
        if n is None:
            n = next_count.get(api, 0)
            next_count[api] = n + 1
            forward_count[key] = n
        names[occ] = f"{api}.{n}.{m['dir']}"
    return names


# ---------------------------------------------------------------------------------------------
# statistics


def stat_factor(copy: int | None, step: int, rank: int) -> float:
    c = -1 if copy is None else copy
    return 1.0 + 0.25 * math.sin(0.7 * c + 0.3) + 0.01 * step + 0.001 * rank


def scaled(value, f: float):
    """Copy of a dump entry (or part of it) with float tensor statistics multiplied by f."""
    if isinstance(value, list):
        return [scaled(v, f) for v in value]
    if not isinstance(value, dict):
        return value
    dtype = value.get("dtype")
    is_float = isinstance(dtype, str) and dtype.startswith("torch.float")
    out = {}
    for k, v in value.items():
        if is_float and k in STATS and type(v) in (int, float):
            out[k] = v * f
        else:
            out[k] = scaled(v, f)
    return out


def with_defect(entry: dict, f: float, scope: str) -> dict:
    if scope == "all":
        return scaled(entry, f)
    return {k: (v if k.startswith("input") else scaled(v, f)) for k, v in entry.items()}


# ---------------------------------------------------------------------------------------------
# output in json.dump(indent=1) format


def encode(value, level: int) -> str:
    """json.dumps(value, indent=1) for a value nested `level` deep in the document."""
    text = json.dumps(value, indent=1)
    return text.replace("\n", "\n" + " " * level) if level else text


def object_pieces(items, level: int = 0):
    """Text pieces of a dict given as (key, encoded value) pairs, json.dump(indent=1) style.
    An encoded value is a string or an iterable of strings (a nested object being streamed)."""
    pad = " " * (level + 1)
    first = True
    for key, value in items:
        yield ("{\n" if first else ",\n") + pad + json.dumps(key) + ": "
        if isinstance(value, str):
            yield value
        else:
            yield from value
        first = False
    yield "{}" if first else "\n" + " " * level + "}"


# ---------------------------------------------------------------------------------------------


class Scaled:
    """The renamed structure of one generated rank (identical for every step and rank)."""

    def __init__(self, tpl: Template, args):
        self.tpl = tpl
        c_seq = occurrences(tpl, list(tpl.construct), args.layers, args.api_repeat)
        self.names = new_names(tpl, c_seq)

        self.construct = {}
        for occ in c_seq:
            name, c, _ = occ
            self.construct[self.names[occ]] = self._parent(tpl.construct[name], c)

        group_of = {}
        for gid, (members, _frames) in tpl.stack.items():
            for n in members:
                group_of[n] = gid
        members = {gid: [] for gid in tpl.stack}
        for occ in c_seq:
            gid = group_of.get(occ[0])
            if gid is not None:
                members[gid].append(self.names[occ])
        self.stack = {gid: [members[gid], tpl.stack[gid][1]] for gid in tpl.stack}

        # dump.json: generated name -> (template name, copy); a later duplicate replaces the value
        # but keeps the first position, like assigning into a dict.
        self.data = {}
        for occ in occurrences(tpl, list(tpl.dump["data"]), args.layers, args.api_repeat):
            name, c, _ = occ
            new = self.names.get(occ)
            if new is None:
                new = tpl.with_copy(name, c)
            self.data[new] = (name, c)

    def _parent(self, parent, c):
        if parent is None:
            return None
        for occ in ((parent, c, 0), (parent, OUTSIDE, 0)):
            if occ in self.names:
                return self.names[occ]
        return self.tpl.with_copy(parent, c)


def write_rank(folder: str, sc: Scaled, step: int, rank: int, args) -> int:
    os.makedirs(folder, exist_ok=True)
    src = sc.tpl.dump["data"]
    cache = {}

    def entry_text(name, c):
        key = (name, c)
        text = cache.get(key)
        if text is None:
            entry = scaled(src[name], stat_factor(c, step, rank))
            if args.defect_layer is not None and c == args.defect_layer:
                entry = with_defect(entry, args.defect_factor, args.defect_scope)
            text = cache[key] = encode(entry, 2)
        return text

    path = os.path.join(folder, "dump.json")
    header = [(k, encode(v, 1)) for k, v in sc.tpl.dump.items() if k != "data"]
    data = object_pieces(((k, entry_text(*src_c)) for k, src_c in sc.data.items()), 1)
    with open(path, "w", encoding="utf-8") as fh:
        fh.writelines(object_pieces(header + [("data", data)]))
    size = os.path.getsize(path)
    with open(os.path.join(folder, "construct.json"), "w", encoding="utf-8") as fh:
        fh.writelines(object_pieces((k, json.dumps(v)) for k, v in sc.construct.items()))
    with open(os.path.join(folder, "stack.json"), "w", encoding="utf-8") as fh:
        fh.writelines(object_pieces((k, encode(v, 1)) for k, v in sc.stack.items()))
    print(f"{folder}: dump.json {size / 1e6:.1f} MB, {len(sc.data)} entries, "
          f"construct {len(sc.construct)} nodes", flush=True)
    return size


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--template", required=True, help="real rank folder (dump.json, construct.json, stack.json); "
                   "a glob picks the first match")
    p.add_argument("--out", required=True, help="output dump root (step*/rank* are created inside)")
    p.add_argument("--layers", type=int, default=8, help="decoder layer copies (default 8)")
    p.add_argument("--api_repeat", type=int, default=1, help="repeat every API node inside a layer N times")
    p.add_argument("--steps", type=int, default=1)
    p.add_argument("--ranks", type=int, default=1)
    p.add_argument("--rank_dir", choices=["rank", "proc"], default="rank",
                   help="rank<r> folders, or proc<1000+r> like a single-process dump")
    p.add_argument("--layer_token", default=".layers.", help="text before the layer index in module names")
    p.add_argument("--defect_layer", type=int, default=None, help="layer copy that gets the defect")
    p.add_argument("--defect_factor", type=float, default=3.0,
                   help="multiplier of the defect (msprobe statistics mode flags an output NormRelativeErr > 50%% "
                        "with clean inputs, so > 1.5 with the default scope)")
    p.add_argument("--defect_scope", choices=["output", "all"], default="output",
                   help="scale only the non-input fields (default) or every statistic of the defect layer")
    args = p.parse_args(argv)

    folder = args.template
    if any(ch in folder for ch in "*?["):
        matches = sorted(glob.glob(folder))
        if not matches:
            p.error(f"no folder matches {folder}")
        folder = matches[0]
    t0 = time.time()
    sc = Scaled(Template(folder, args.layer_token), args)
    total = 0
    for step in range(args.steps):
        for rank in range(args.ranks):
            leaf = f"rank{rank}" if args.rank_dir == "rank" else f"proc{1000 + rank}"
            total += write_rank(os.path.join(args.out, f"step{step}", leaf), sc, step, rank, args)
    print(f"total dump.json bytes {total} ({total / 1e6:.1f} MB) in {time.time() - t0:.1f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
