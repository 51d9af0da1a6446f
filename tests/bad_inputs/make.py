#!/usr/bin/env python3
"""Generates the bad-input corpus under tests/bad_inputs/<case>/ (run from anywhere).

Every case is derived from one tiny valid rank folder: eight nodes of the real fixture
tests/fixtures/qwen_mix_statistics/npu/step0/proc23598 (construct, dump entries and stacks of the
embedding part of the model). A case folder holds:

  npu/ [bench/]          dump roots, run from inside the case as `-tp npu [-gp bench]`
  layer_mapping.yaml     (optional) passed as `-lm layer_mapping.yaml`
  args.txt               (optional) extra CLI flags, one per line
  materialize.txt        (optional) files too big to commit, made by tests/it/bad_inputs.rs in a copy:
                           sparse <path> <bytes>     a sparse file of that size
                           chain <path> <depth>      a construct.json whose parent chain is <depth> deep
  msprobe.vis.db.gz      (result cases) msprobe's own output; ours must equal it cell by cell
                         (made by `make.py --msprobe`, which runs msprobe graph_visualize)
  expected.txt           one line:
                           an error message: the CLI must print `probelens: error: <line>` and exit 1;
                           `warning: ...`/`info: ...`: a diagnostic it must print, then exit 0;
                           `ok`: exit 0 without any error or warning line.

The expected lines are probelens' decisions (see README.md here); msprobe's behaviour on each case
is listed there too. Re-running this script rewrites every case folder it knows and leaves others.
"""

import json
import os
import random
import shutil

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
SRC = os.path.join(ROOT, "tests/fixtures/qwen_mix_statistics/npu/step0/proc23598")

KEEP = [
    "Tensor.__setitem__.0.forward",
    "Functional.embedding.0.forward",
    "Module.0.module.Float16Module.forward.0",
    "Module.0.module.module.GPTModel.forward.0",
    "Module.0.module.module.embedding.LanguageModelEmbedding.forward.0",
    "Module.0.module.module.embedding.word_embeddings.VocabParallelEmbedding.forward.0",
    "Functional.dropout.0.forward",
    "Module.0.module.module.embedding.embedding_dropout.Dropout.forward.0",
]
DROPOUT = "Functional.dropout.0.forward"


def load(name):
    with open(os.path.join(SRC, name), encoding="utf-8") as f:
        return json.load(f)


def base():
    """(dump, construct, stack) of the tiny valid rank, as Python objects."""
    construct = {k: v for k, v in load("construct.json").items() if k in KEEP}
    dump = load("dump.json")
    dump["data"] = {k: v for k, v in dump["data"].items() if k in KEEP}
    stack = {}
    for _, (names, frames) in load("stack.json").items():
        kept = [n for n in names if n in KEEP]
        if kept:
            stack[str(len(stack))] = [kept, frames[:2]]
    return dump, construct, stack


def dumps(obj):
    # msprobe writes json.dump(..., indent=1); NaN/Infinity stay bare tokens.
    return json.dumps(obj, indent=1).encode()


def rank(dump, construct, stack):
    return {"dump.json": dumps(dump), "construct.json": dumps(construct), "stack.json": dumps(stack)}


def under(prefix, files):
    return {f"{prefix}/{k}": v for k, v in files.items()}


def pair(npu=None, bench=None):
    """Compare case: npu (mutated) against the untouched base."""
    n = npu if npu is not None else rank(*base())
    b = bench if bench is not None else rank(*base())
    return {**under("npu", n), **under("bench", b)}


CASES = {}


def case(fn):
    CASES[fn.__name__] = fn
    return fn


def truncate_in(text, needle, keep):
    """The text up to `keep` bytes into the first occurrence of needle."""
    i = text.index(needle)
    return text[: i + keep]


@case
def dump_truncated_mid_string():
    files = rank(*base())
    files["dump.json"] = truncate_in(files["dump.json"], b'"torch.float32"', 6)
    return pair(files), None


@case
def dump_truncated_mid_number():
    files = rank(*base())
    files["dump.json"] = truncate_in(files["dump.json"], b"5.656854152679443", 7)
    return pair(files), None


@case
def dump_not_json():
    files = rank(*base())
    files["dump.json"] = b"task: statistics\ndata: none of this is JSON\n"
    return pair(files), None


@case
def dump_json_array():
    d, c, s = base()
    files = rank(d, c, s)
    files["dump.json"] = dumps([d])
    return pair(files), None


@case
def dump_task_not_string():
    d, c, s = base()
    d["task"] = 1
    return pair(rank(d, c, s)), None


@case
def dump_data_missing():
    d, c, s = base()
    del d["data"]
    return pair(rank(d, c, s)), None


@case
def dump_data_not_object():
    d, c, s = base()
    d["data"] = list(d["data"].items())
    return pair(rank(d, c, s)), None


@case
def entry_not_object():
    d, c, s = base()
    d["data"][DROPOUT] = ["input_args", "output"]
    return pair(rank(d, c, s)), None


@case
def input_args_not_list():
    d, c, s = base()
    d["data"][DROPOUT]["input_args"] = 5
    return pair(rank(d, c, s)), None


@case
def item_type_not_string():
    d, c, s = base()
    d["data"][DROPOUT]["input_args"][0]["type"] = 7
    return pair(rank(d, c, s)), None


@case
def shape_not_list():
    d, c, s = base()
    d["data"][DROPOUT]["output"][0]["shape"] = "16x2x64"
    return pair(rank(d, c, s)), None


@case
def max_is_string():
    d, c, s = base()
    d["data"][DROPOUT]["output"][0]["Max"] = "big"
    return pair(rank(d, c, s)), None


@case
def entry_nesting_over_400():
    files = rank(*base())
    deep = b"[" * 402 + b'{"type": "int", "value": 1}' + b"]" * 402
    files["dump.json"] = files["dump.json"].replace(b'"input_kwargs": {}', b'"input_kwargs": {"deep": ' + deep + b"}", 1)
    return pair(files), None


@case
def json_nesting_over_512():
    files = rank(*base())
    deep = b"[" * 600 + b"]" * 600
    files["dump.json"] = files["dump.json"].replace(b'"input_kwargs": {}', b'"input_kwargs": ' + deep, 1)
    return pair(files), None


@case
def construct_cycle():
    d, c, s = base()
    c["Module.0.a.A.forward.0"] = "Module.0.b.B.forward.0"
    c["Module.0.b.B.forward.0"] = "Module.0.a.A.forward.0"
    return pair(rank(d, c, s)), None


@case
def construct_parent_never_appears():
    d, c, s = base()
    c[DROPOUT] = "Module.0.module.module.embedding.ghost.Ghost.forward.0"
    return pair(rank(d, c, s)), None


@case
def construct_parent_not_string():
    d, c, s = base()
    c[DROPOUT] = ["Module.0.module.module.embedding.embedding_dropout.Dropout.forward.0"]
    return pair(rank(d, c, s)), None


@case
def construct_deep_chain_10000():
    files = rank(*base())
    del files["construct.json"]
    return under("npu", files), ["chain npu/construct.json 10000"]


@case
def construct_deep_chain_10000_compare():
    # Compare without a database: the db of a 10,000-deep compare is ~5.6 GB (every matched node
    # stores its partner's ancestor path, msprobe's format), see README Limits.
    files = rank(*base())
    del files["construct.json"]
    return (
        {**under("npu", files), **under("bench", dict(files)), "args.txt": b"--no-db\n"},
        ["chain npu/construct.json 10000", "chain bench/construct.json 10000"],
    )


@case
def duplicate_keys():
    files = rank(*base())
    text = files["dump.json"]
    # A second "task" (last wins, like a Python dict) and a duplicated entry whose second copy wins.
    text = text.replace(b'"level": "mix"', b'"task": "nonsense",\n "level": "mix",\n "task": "statistics"', 1)
    i = text.index(b'"Functional.dropout.0.forward"')
    text = text[:i] + b'"Functional.dropout.0.forward": {"input_args": 3},\n  ' + text[i:]
    files["dump.json"] = text
    return pair(files), None


@case
def empty_files():
    return pair({"dump.json": b"", "construct.json": b"", "stack.json": b""}), None


@case
def stack_missing():
    files = rank(*base())
    del files["stack.json"]
    return pair(files), None


@case
def construct_missing():
    files = rank(*base())
    del files["construct.json"]
    return pair(files), None


@case
def l1_empty_construct():
    d, c, s = base()
    d["level"] = "L1"
    return under("npu", rank(d, {}, s)), None


@case
def tasks_statistics_vs_md5():
    d, c, s = base()
    for entry in d["data"].values():
        for v in entry.values():
            if isinstance(v, list):
                for item in v:
                    if isinstance(item, dict) and item.get("type") == "torch.Tensor":
                        item["md5"] = "0badf00d"
    return pair(bench=rank(d, c, s)), None


@case
def steps_do_not_intersect():
    files = rank(*base())
    return {**under("npu/step0/rank0", files), **under("bench/step1/rank0", files)}, None


@case
def ranks_do_not_intersect():
    files = rank(*base())
    return {**under("npu/rank0", files), **under("bench/rank1", files)}, None


@case
def yaml_not_a_mapping():
    return {**pair(), "layer_mapping.yaml": b"- GPTModel\n- decoder: model\n"}, None


@case
def yaml_bad_indent():
    return {**pair(), "layer_mapping.yaml": b"GPTModel:\n  decoder: model\n embedding: embed_tokens\n"}, None


@case
def yaml_alias_bomb():
    lines = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    prev = "a"
    for name in "bcdefghi":
        lines.append(f"{name}: &{name} [" + ",".join([f"*{prev}"] * 9) + "]")
        prev = name
    return {**pair(), "layer_mapping.yaml": ("\n".join(lines) + "\n").encode()}, None


@case
def binary_garbage():
    files = rank(*base())
    rnd = random.Random(5)
    files["dump.json"] = bytes([0x89, 0x50, 0x4E, 0x47]) + bytes(rnd.randrange(256) for _ in range(2000))
    return pair(files), None


@case
def invalid_utf8_in_name():
    files = rank(*base())
    files["dump.json"] = files["dump.json"].replace(b'"Functional.dropout.0.forward"', b'"Functional.drop\xffout.0.forward"', 1)
    return pair(files), None


@case
def html_in_node_name():
    d, c, s = base()
    evil = "Module.0.module.<img src=x onerror=alert(1)>.</script><script>alert(2)</script>.Evil.forward.0"
    parent = "Module.0.module.module.embedding.LanguageModelEmbedding.forward.0"
    c[evil] = parent
    d["data"][evil] = d["data"][DROPOUT]
    s[str(len(s))] = [[evil], ['File "<img src=x onerror=alert(3)>", line 1, in </script>, \n x = "\'"']]
    return pair(rank(d, c, s), rank(d, c, s)), None


@case
def valid_base():
    return pair(), None


@case
def floats_beyond_f64():
    files = rank(*base())
    text = files["dump.json"]
    # Python reads 1e999 as inf.
    text = text.replace(b'"Max": 5.656854152679443', b'"Max": 1e999', 1)
    text = text.replace(b'"Min": 1.0', b'"Min": -1e999', 1)
    files["dump.json"] = text
    return pair(files), None


@case
def int_beyond_f64():
    files = rank(*base())
    # A Python int, but float() of it overflows.
    files["dump.json"] = files["dump.json"].replace(b'"Norm": 3.619074821472168', b'"Norm": 1' + b"0" * 400, 1)
    return pair(files), None


@case
def nan_stats_everywhere():
    d, c, s = base()

    def nanify(v):
        if isinstance(v, dict):
            for k in v:
                if k in ("Max", "Min", "Mean", "Norm"):
                    v[k] = float("nan")
                else:
                    nanify(v[k])
        elif isinstance(v, list):
            for x in v:
                nanify(x)

    nanify(d["data"])
    return pair(rank(d, c, s), rank(d, c, s)), None


@case
def file_over_4gib():
    files = rank(*base())
    del files["dump.json"]
    return pair(files), ["sparse npu/dump.json 4294967296"]


def write_case(name, files, materialize):
    d = os.path.join(HERE, name)
    ref = os.path.join(d, "msprobe.vis.db.gz")
    kept = open(ref, "rb").read() if os.path.exists(ref) else None
    if os.path.isdir(d):
        shutil.rmtree(d)
    if kept is not None:
        os.makedirs(d)
        with open(ref, "wb") as f:
            f.write(kept)
    for rel, data in sorted(files.items()):
        p = os.path.join(d, rel)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, "wb") as f:
            f.write(data)
    if materialize:
        with open(os.path.join(d, "materialize.txt"), "w") as f:
            f.write("\n".join(materialize) + "\n")
    exp = EXPECTED.get(name)
    if exp is not None:
        with open(os.path.join(d, "expected.txt"), "w", encoding="utf-8") as f:
            f.write(exp + "\n")


# What probelens must print (see README.md for msprobe's behaviour and why).
DROP = 'data["Functional.dropout.0.forward"]'
EXPECTED = {
    "binary_garbage": "npu/dump.json: line 1, column 1: invalid JSON: expected a value, found byte 0x89",
    "construct_cycle": "ok",
    "construct_deep_chain_10000": "ok",
    "construct_deep_chain_10000_compare": "ok",
    "construct_missing": "npu/construct.json: file not found (graph_visualize needs dump.json, construct.json and stack.json in every rank folder)",
    "construct_parent_never_appears": "ok",
    "construct_parent_not_string": 'npu/construct.json: $["Functional.dropout.0.forward"]: expected a parent node name (string) or null, found a list',
    "dump_data_missing": "npu/dump.json: data: missing 'data' in dump.json",
    "dump_data_not_object": "npu/dump.json: line 6, column 10: data: expected an object mapping node names to entries, found a list",
    "dump_json_array": 'npu/dump.json: line 1, column 1: expected a JSON object with "task" and "data" at the top, found a list',
    "dump_not_json": "npu/dump.json: line 1, column 1: invalid JSON: expected a value, found 't'",
    "dump_task_not_string": 'npu/dump.json: line 2, column 10: task: expected a string such as "statistics", found a number',
    "dump_truncated_mid_number": "npu/dump.json: line 19, column 21: invalid JSON: expected ',' or '}', found end of file",
    "dump_truncated_mid_string": "npu/dump.json: line 11, column 21: invalid JSON: unterminated string (file ends inside it)",
    "duplicate_keys": "ok",
    "empty_files": "npu/dump.json: line 1, column 1: the file is empty, expected a JSON object",
    "entry_nesting_over_400": 'npu/dump.json: line 41, column 429: data["Tensor.__setitem__.0.forward"].input_kwargs.deep[0][0][0][0]...(390 levels)...[0][0][0][0][0][0]: items nest deeper than 400 levels (msprobe\'s limit)',
    "entry_not_object": f"npu/dump.json: line 142, column 35: {DROP}: expected an object with the entry's input_args, input_kwargs, output... (or null), found a list",
    "file_over_4gib": "npu/dump.json: the file is 4294967296 bytes; probelens reads files of at most 4294967295 bytes (4 GiB)",
    "floats_beyond_f64": "ok",
    "html_in_node_name": "ok",
    "input_args_not_list": f"npu/dump.json: line 143, column 18: {DROP}.input_args: expected a list or an object of items (or null), found a number",
    "int_beyond_f64": 'npu/dump.json: line 71, column 14: data["Functional.embedding.0.forward"].input_args[1].Norm: the integer 100000000000...(401 digits) is beyond the range of a float (msprobe fails converting it)',
    "invalid_utf8_in_name": "npu/dump.json: line 142, column 19: invalid JSON: invalid UTF-8 in a string",
    "item_type_not_string": f"warning: npu/dump.json: line 145, column 14: {DROP}.input_args[0].type: expected a string (the item's type), found a number; read as msprobe reads it",
    "json_nesting_over_512": "npu/dump.json: line 41, column 530: invalid JSON: nesting deeper than 512 levels",
    "l1_empty_construct": "npu/construct.json: construct.json is empty, so no model structure can be built; dump with level L0 or mix (an L1 dump has no module structure)",
    "max_is_string": f"warning: npu/dump.json: line 181, column 13: {DROP}.output[0].Max: expected a number, a boolean or null, found a string; read as msprobe reads it",
    "nan_stats_everywhere": "ok",
    "ranks_do_not_intersect": "npu / bench: the ranks of the two runs are completely different, unable to match the ranks",
    "shape_not_list": f"warning: npu/dump.json: line 176, column 15: {DROP}.output[0].shape: expected a list of dimensions or null, found a string; read as msprobe reads it",
    "stack_missing": "npu/stack.json: file not found (graph_visualize needs dump.json, construct.json and stack.json in every rank folder)",
    "steps_do_not_intersect": "npu / bench: the two runs have no step in common",
    "tasks_statistics_vs_md5": "npu/dump.json / bench/dump.json: one side has md5 values and the other has not; dump both sides with the same summary_mode (statistics or md5)",
    "valid_base": "ok",
    "yaml_alias_bomb": 'layer_mapping.yaml: the YAML expands its aliases (*name) too many times, as a "billion laughs" document does; a layer mapping needs none',
    "yaml_bad_indent": "layer_mapping.yaml: line 3, column 2: invalid YAML: did not find expected key",
    "yaml_not_a_mapping": 'warning: the layer mapping is not effective (msprobe: "The layer mapping file parsing failed"): layer_mapping.yaml: the layer mapping must be a mapping of class names to {source: destination} rules, found a list',
}


def msprobe_reference(name):
    """Runs msprobe on a case that yields a result and keeps its db as msprobe.vis.db.gz."""
    import gzip
    import subprocess
    import tempfile

    d = os.path.join(HERE, name)
    args = ["-tp", "npu"]
    if os.path.isdir(os.path.join(d, "bench")):
        args += ["-gp", "bench"]
    if os.path.exists(os.path.join(d, "layer_mapping.yaml")):
        args += ["-lm", "layer_mapping.yaml"]
    with tempfile.TemporaryDirectory() as out:
        subprocess.run(["msprobe", "graph_visualize", *args, "-o", out], cwd=d, check=True, capture_output=True)
        (db,) = [f for f in os.listdir(out) if f.endswith(".vis.db")]
        with open(os.path.join(out, db), "rb") as f, gzip.GzipFile(
            os.path.join(d, "msprobe.vis.db.gz"), "wb", compresslevel=9, mtime=0
        ) as g:
            g.write(f.read())


if __name__ == "__main__":
    import sys

    for name, fn in CASES.items():
        files, materialize = fn()
        write_case(name, files, materialize)
    print(f"{len(CASES)} cases in {HERE}")
    if "--msprobe" in sys.argv:
        # Cases whose result msprobe produces too; their db must equal ours (tests/it/bad_inputs.rs).
        for name, exp in EXPECTED.items():
            if exp == "ok" or exp.startswith("warning: "):
                if os.path.exists(os.path.join(HERE, name, "materialize.txt")):
                    continue
                msprobe_reference(name)
                print(f"msprobe reference for {name}")
