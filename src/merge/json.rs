//! `--file_type json` (`GraphJsonExporter`): a merged build graph written back as the three
//! files of a rank folder (construct.json, dump.json, stack.json).

use super::STATS;
use crate::formats::dump::RankDump;
use crate::formats::json::{Store, Val};
use crate::formats::pyfmt::float_repr;
use crate::graph::items::{Item, ItemMap, Py};
use crate::graph::{Graph, NodeId, Stack, ROOT};

/// A JSON value as Python's `json.dump` writes it.
#[derive(Debug, Clone, PartialEq)]
enum J {
    Null,
    Bool(bool),
    Int(String),
    Float(f64),
    Str(String),
    List(Vec<J>),
    Obj(Vec<(String, J)>),
}

impl J {
    fn from_val(store: &Store, v: Val) -> J {
        match v {
            Val::Null => J::Null,
            Val::Bool(b) => J::Bool(b),
            Val::Int(i) => J::Int(i.to_string()),
            Val::BigInt(r) => J::Int(store.str(r).to_string()),
            Val::Float(f) => J::Float(f),
            Val::Str(r) => J::Str(store.str(r).to_string()),
            Val::List { .. } => J::List(
                store
                    .list(v)
                    .iter()
                    .map(|x| J::from_val(store, x))
                    .collect(),
            ),
            Val::Obj { .. } => J::Obj(
                store
                    .obj(v)
                    .iter()
                    .map(|(k2, x)| (store.key(k2).to_string(), J::from_val(store, x)))
                    .collect(),
            ),
        }
    }
    fn from_py(store: &Store, v: &Py) -> J {
        match v {
            Py::None => J::Null,
            Py::V(x) => J::from_val(store, *x),
            Py::S(t) => J::Str(t.clone()),
            Py::Pct(_) => J::Str(v.to_py_str(store)),
            Py::Lit(t) => J::Str(t.to_string()),
            Py::F(f) => J::Float(*f),
            Py::I(i) => J::Int(i.to_string()),
            Py::B(b) => J::Bool(*b),
        }
    }
    fn get(&self, key: &str) -> Option<&J> {
        match self {
            J::Obj(m) => m.iter().find(|(k2, _)| k2 == key).map(|(_, v)| v),
            _ => None,
        }
    }
    /// `d[key] = v`.
    fn set(&mut self, key: &str, v: J) {
        if let J::Obj(m) = self {
            match m.iter_mut().find(|(k2, _)| k2 == key) {
                Some(slot) => slot.1 = v,
                None => m.push((key.to_string(), v)),
            }
        }
    }
    fn remove(&mut self, key: &str) {
        if let J::Obj(m) = self {
            m.retain(|(k2, _)| k2 != key);
        }
    }
    /// `json.dump(v, f, indent=2)`.
    fn write(&self, level: usize, out: &mut String) {
        let pad = |n: usize, out: &mut String| {
            out.push('\n');
            for _ in 0..n * 2 {
                out.push(' ');
            }
        };
        match self {
            J::Null => out.push_str("null"),
            J::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
            J::Int(i) => out.push_str(i),
            J::Float(f) => {
                if f.is_nan() {
                    out.push_str("NaN");
                } else if f.is_infinite() {
                    out.push_str(if *f > 0.0 { "Infinity" } else { "-Infinity" });
                } else {
                    out.push_str(&float_repr(*f));
                }
            }
            J::Str(t) => crate::formats::pyfmt::json_str(t, out),
            J::List(l) => {
                if l.is_empty() {
                    out.push_str("[]");
                    return;
                }
                out.push('[');
                for (i, x) in l.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    pad(level + 1, out);
                    x.write(level + 1, out);
                }
                pad(level, out);
                out.push(']');
            }
            J::Obj(m) => {
                if m.is_empty() {
                    out.push_str("{}");
                    return;
                }
                out.push('{');
                for (i, (k2, x)) in m.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    pad(level + 1, out);
                    crate::formats::pyfmt::json_str(k2, out);
                    out.push_str(": ");
                    x.write(level + 1, out);
                }
                pad(level, out);
                out.push('}');
            }
        }
    }
}

fn item_json(store: &Store, it: &Item) -> J {
    J::Obj(
        it.fields
            .iter()
            .map(|(k2, v)| (store.key(*k2).to_string(), J::from_py(store, v)))
            .collect(),
    )
}

/// `GraphJsonExporter._convert_entry`.
fn convert_entry(store: &Store, it: &Item) -> J {
    let mut e = item_json(store, it);
    for f in ["data_name", "full_op_name", "state"] {
        e.remove(f);
    }
    match e.get("requires_grad").cloned() {
        Some(J::Null) => e.remove("requires_grad"),
        Some(J::Str(t)) => e.set("requires_grad", J::Bool(t == "True")),
        _ => {}
    }
    if let Some(J::Str(t)) = e.get("shape").cloned() {
        // `ast.literal_eval` of a list/tuple of ints, else []
        let inner = t
            .trim()
            .trim_start_matches(['[', '('])
            .trim_end_matches([']', ')']);
        let parsed: Option<Vec<J>> = if inner.trim().is_empty() {
            Some(Vec::new())
        } else {
            inner
                .split(',')
                .filter(|x| !x.trim().is_empty())
                .map(|x| x.trim().parse::<i64>().ok().map(|i| J::Int(i.to_string())))
                .collect()
        };
        e.set("shape", J::List(parsed.unwrap_or_default()));
    }
    match &e {
        J::Obj(m) if m.iter().all(|(_, v)| *v == J::Null) => J::Null,
        _ => e,
    }
}

/// `--file_type json` (`GraphJsonExporter.to_json`) of a merged build graph: the texts of
/// construct.json, dump.json and stack.json. `dump_data_dir` is the graph's tensor folder (as the
/// db's column).
pub fn json_files(graph: &Graph, dump: &RankDump, dump_data_dir: Option<&str>) -> [String; 3] {
    let order = graph.post_order();
    let construct = json_construct(graph, &order);
    let stack = json_stack(graph, dump, &order);
    let dump_json = json_dump(graph, dump, &order, dump_data_dir);
    let mut out = [String::new(), String::new(), String::new()];
    construct.write(0, &mut out[0]);
    dump_json.write(0, &mut out[1]);
    stack.write(0, &mut out[2]);
    out
}

/// [`item_lookup`]'s map.
type ItemLookup = crate::base::HashMap<(String, String), Item>;

/// construct.json of [`json_files`]: each node's parent, in post-order.
fn json_construct(graph: &Graph, order: &[NodeId]) -> J {
    let mut construct: Vec<(String, J)> = Vec::new();
    for id in order {
        let n = graph.node(*id);
        if let Some(p) = n.parent() {
            let parent = J::Str(graph.name(p).to_string());
            let name = graph.name(*id);
            match construct.iter_mut().find(|(k2, _)| k2 == name) {
                Some(slot) => slot.1 = parent,
                None => construct.push((name.to_string(), parent)),
            }
        }
    }
    J::Obj(construct)
}

/// stack.json of [`json_files`]: the nodes grouped by their stack, groups in post-order of their
/// first node.
fn json_stack(graph: &Graph, dump: &RankDump, order: &[NodeId]) -> J {
    let mut groups: Vec<(Vec<String>, Vec<J>)> = Vec::new();
    for id in order {
        let n = graph.node(*id);
        let info: Vec<J> = match graph.stack(n.stack) {
            Stack::Empty => Vec::new(),
            Stack::NoForward => vec![J::Str(crate::graph::NO_FORWARD_STACK.to_string())],
            Stack::Val(v @ Val::List { .. }) => dump
                .store
                .list(v)
                .iter()
                .map(|x| J::from_val(&dump.store, x))
                .collect(),
            Stack::Val(Val::Null) => Vec::new(),
            Stack::Val(v) => vec![J::from_val(&dump.store, v)],
        };
        if info.is_empty() {
            continue;
        }
        match groups.iter_mut().find(|(_, t)| *t == info) {
            Some(g) => g.0.push(graph.name(*id).to_string()),
            None => groups.push((vec![graph.name(*id).to_string()], info)),
        }
    }
    J::Obj(
        groups
            .into_iter()
            .enumerate()
            .map(|(i, (ids, t))| {
                (
                    i.to_string(),
                    J::List(vec![
                        J::List(ids.into_iter().map(J::Str).collect()),
                        J::List(t),
                    ]),
                )
            })
            .collect(),
    )
}

/// dump.json of [`json_files`]: the header, then the entry of every node with items, in
/// post-order.
fn json_dump(graph: &Graph, dump: &RankDump, order: &[NodeId], dump_data_dir: Option<&str>) -> J {
    let lookup = item_lookup(graph, dump);
    let store = &dump.store;
    let mut data: Vec<(String, J)> = Vec::new();
    for id in order {
        if *id == ROOT {
            continue;
        }
        let (input, output) = graph.io(dump, *id);
        if input.is_empty() && output.is_empty() {
            continue;
        }
        let nid = graph.name(*id);
        let raw = dump
            .entry(nid)
            .map(|e| J::from_val(store, store.val(e.value)));
        let entry = match raw {
            Some(J::Obj(fields)) => overlaid_entry(fields, nid, &lookup, store),
            _ => match entry_from_items(&input, &output, nid, store) {
                Some(e) => e,
                None => continue,
            },
        };
        match data.iter_mut().find(|(k2, _)| k2 == nid) {
            Some(slot) => slot.1 = entry,
            None => data.push((nid.to_string(), entry)),
        }
    }
    settle_entries(graph, &mut data);
    let text_or_null = |v: &Option<String>, absent: &str| -> J {
        match v {
            Some(t) => J::Str(t.clone()),
            None => J::Str(absent.to_string()),
        }
    };
    J::Obj(vec![
        ("task".into(), text_or_null(&dump.task, "")),
        ("level".into(), text_or_null(&dump.level, "")),
        (
            "framework".into(),
            J::Str(
                dump.framework_key
                    .clone()
                    .unwrap_or_else(|| "pytorch".into()),
            ),
        ),
        (
            "dump_data_dir".into(),
            dump_data_dir
                .map(|d| J::Str(d.to_string()))
                .unwrap_or(J::Null),
        ),
        ("is_merged".into(), J::Bool(true)),
        ("data".into(), J::Obj(data)),
    ])
}

/// Every node's items by (node name, item name), for [`overlay`].
fn item_lookup(graph: &Graph, dump: &RankDump) -> ItemLookup {
    let mut lookup: crate::base::HashMap<(String, String), Item> = Default::default();
    let mut ids: Vec<NodeId> = graph.index.ids().collect();
    ids.sort_unstable();
    for id in ids {
        let name = graph.name(id);
        let (i, o) = graph.io(dump, id);
        for (key, it) in i.into_iter().chain(o) {
            let f = if it.full_op_name.is_empty() {
                key
            } else {
                it.full_op_name.clone()
            };
            lookup.insert((name.to_string(), f), it);
        }
    }
    lookup
}

/// A dump.json item `orig` with the statistics of the merged item `fname` of node `nid`.
fn overlay(orig: &J, fname: String, nid: &str, lookup: &ItemLookup, store: &Store) -> J {
    let mut r = orig.clone();
    if !matches!(r, J::Obj(_)) {
        return r;
    }
    if let Some(m) = lookup.get(&(nid.to_string(), fname)) {
        for (stat, key) in STATS {
            if let Some(v) = m.get(key) {
                r.set(stat, J::from_py(store, v));
            }
        }
    }
    r
}

/// A node's dump.json entry as it was dumped (`fields`), its items' statistics the merged ones.
fn overlaid_entry(fields: Vec<(String, J)>, nid: &str, lookup: &ItemLookup, store: &Store) -> J {
    let overlay_at = |x: &J, fname: String, nid: &str| overlay(x, fname, nid, lookup, store);
    let mut out = Vec::new();
    for (f, v) in fields {
        let nv = match (f.as_str(), &v) {
            ("input_args", J::List(l)) => J::List(
                l.iter()
                    .enumerate()
                    .map(|(i, x)| overlay_at(x, format!("{nid}.input.{i}"), nid))
                    .collect(),
            ),
            ("input_kwargs", J::Obj(m)) => J::Obj(
                m.iter()
                    .map(|(k2, x)| {
                        let y = if matches!(x, J::Obj(_)) && x.get("type").is_some() {
                            overlay_at(x, format!("{nid}.input.{k2}"), nid)
                        } else {
                            x.clone()
                        };
                        (k2.clone(), y)
                    })
                    .collect(),
            ),
            ("output", J::List(l)) => J::List(
                l.iter()
                    .enumerate()
                    .map(|(i, x)| overlay_at(x, format!("{nid}.output.{i}"), nid))
                    .collect(),
            ),
            ("parameters", J::List(l)) => J::List(
                l.iter()
                    .enumerate()
                    .map(|(i, x)| overlay_at(x, format!("{nid}.parameters.{i}"), nid))
                    .collect(),
            ),
            _ => v.clone(),
        };
        out.push((f, nv));
    }
    J::Obj(out)
}

/// A node's dump.json entry made from its items, for a node the dump has no object entry of
/// (None: no item to write).
fn entry_from_items(input: &ItemMap, output: &ItemMap, nid: &str, store: &Store) -> Option<J> {
    let mut args: Vec<(i64, J)> = Vec::new();
    let mut kwargs: Vec<(String, J)> = Vec::new();
    let mut outs: Vec<(i64, J)> = Vec::new();
    let mut params: Vec<J> = Vec::new();
    let mut seen_params: Vec<String> = Vec::new();
    let digits = |t: &str| !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit());
    for (is_out, map) in [(false, input), (true, output)] {
        for (key, it) in map {
            let f = if it.full_op_name.is_empty() {
                key.as_str()
            } else {
                it.full_op_name.as_str()
            };
            let suffix = match f.strip_prefix(nid) {
                Some(rest) => rest.get(1..).unwrap_or(""),
                None => f,
            };
            let Some((marker, idx)) = suffix.split_once('.') else {
                continue;
            };
            match (is_out, marker) {
                (false, "input") => {
                    if digits(idx) {
                        let pos: i64 = idx.parse().unwrap_or(i64::MAX);
                        if !args.iter().any(|(p, _)| *p == pos) {
                            args.push((pos, convert_entry(store, it)));
                        }
                    } else if !kwargs.iter().any(|(k2, _)| k2 == idx) {
                        kwargs.push((idx.to_string(), convert_entry(store, it)));
                    }
                }
                (false, "parameters") if digits(idx) && !seen_params.iter().any(|s2| s2 == idx) => {
                    seen_params.push(idx.to_string());
                    params.push(convert_entry(store, it));
                }
                (true, "output") if digits(idx) => {
                    let pos: i64 = idx.parse().unwrap_or(i64::MAX);
                    if !outs.iter().any(|(p, _)| *p == pos) {
                        outs.push((pos, convert_entry(store, it)));
                    }
                }
                _ => {}
            }
        }
    }
    let mut e = Vec::new();
    if !args.is_empty() {
        args.sort_by_key(|(p, _)| *p);
        e.push((
            "input_args".to_string(),
            J::List(args.into_iter().map(|(_, v)| v).collect()),
        ));
    }
    if !kwargs.is_empty() {
        e.push(("input_kwargs".to_string(), J::Obj(kwargs)));
    }
    if !outs.is_empty() {
        outs.sort_by_key(|(p, _)| *p);
        e.push((
            "output".to_string(),
            J::List(outs.into_iter().map(|(_, v)| v).collect()),
        ));
    }
    if !params.is_empty() {
        e.push(("parameters".to_string(), J::List(params)));
    }
    (!e.is_empty()).then_some(J::Obj(e))
}

/// The last touches of the entries of [`json_dump`]: each merged node's `parallel_merge_info`,
/// and no `md5` in any item.
fn settle_entries(graph: &Graph, data: &mut [(String, J)]) {
    for (nid, entry) in data.iter_mut() {
        if let Some(node) = graph.get(nid) {
            if let Some(info) = graph.merge_info.get(&node).filter(|v| !v.is_empty()) {
                entry.set(
                    "parallel_merge_info",
                    J::List(info.iter().cloned().map(J::Str).collect()),
                );
            }
        }
        if let J::Obj(fields) = entry {
            for (f, v) in fields.iter_mut() {
                match (f.as_str(), v) {
                    ("input_args" | "output" | "parameters", J::List(l)) => {
                        for x in l.iter_mut() {
                            x.remove("md5");
                        }
                    }
                    ("input_kwargs", J::Obj(m)) => {
                        for (_, x) in m.iter_mut() {
                            x.remove("md5");
                        }
                    }
                    _ => {}
                }
            }
        }
    }
}
