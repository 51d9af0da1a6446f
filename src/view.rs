//! Plain DTOs for the page: the `run` answer, a compact, column-wise binary form of both graphs
//! ([`graph_columns`]) and per-node details. They are the only `Serialize` types besides the file
//! formats; the core's graph types are not.

use crate::compare::apply_results;
use crate::dump::OverflowLevel;
use crate::export::{link_json, node_colors, precision_text, stack_lines, tool_tip};
use crate::graph::{Graph, NodeId};
use crate::items::{formatted_fields, ItemMap, Mode, State};
use crate::run::PairResult;
use serde::Serialize;

/// The answer to `run` (JSON): everything but the graphs' columns, which cross as one binary
/// buffer per side ([`graph_columns`]).
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RunDto {
    pub graph_type: &'static str,
    pub task: &'static str,
    pub micro_steps: i64,
    pub node_colors: serde_json::Value,
    pub tool_tip: serde_json::Value,
    pub diagnostics: Vec<crate::error::Diagnostic>,
    pub npu: GraphSize,
    pub bench: Option<GraphSize>,
}

/// A graph of the `run` answer: its node count (`{"nodes": n}`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct GraphSize {
    pub nodes: usize,
}

/// Pre-order of a graph and the inverse map.
#[derive(Debug, Clone)]
pub struct Order {
    pub ids: Vec<NodeId>,
    pub index_of: Vec<i64>,
}

impl Order {
    pub fn of(g: &Graph) -> Order {
        let ids = g.pre_order();
        let mut index_of = vec![-1i64; g.nodes.len()];
        for (i, id) in ids.iter().enumerate() {
            index_of[*id as usize] = i as i64;
        }
        Order { ids, index_of }
    }
}

/// Where each node's subtree ends in a pre-order: the subtree of `i` is `[i, end[i])`.
fn subtree_ends(g: &Graph, order: &Order) -> Vec<u32> {
    let n = order.ids.len();
    let mut subtree_end = vec![0u32; n];
    // Walk backwards, a node's subtree ends where its last descendant ends (the children of a
    // node are contiguous after it in pre-order).
    for i in (0..n).rev() {
        let mut end = i as u32 + 1;
        if let Some(&last) = g.node(order.ids[i]).children.last() {
            let li = order.index_of[last as usize];
            if li >= 0 {
                end = subtree_end[li as usize];
            }
        }
        subtree_end[i] = end;
    }
    subtree_end
}

/// The first bytes of a [`graph_columns`] buffer.
pub const COLUMNS_MAGIC: [u8; 4] = *b"PLGC";
/// The layout version of [`graph_columns`] (in the header after the magic).
pub const COLUMNS_VERSION: u32 = 1;
/// The overflow levels by code: code `k >= 1` is `COLUMNS_OVERFLOW[k - 1]`, 0 is none.
pub const COLUMNS_OVERFLOW: [OverflowLevel; 3] = [
    OverflowLevel::Medium,
    OverflowLevel::High,
    OverflowLevel::Critical,
];

/// A node's overflow code: its level's place in [`COLUMNS_OVERFLOW`] plus one, 0 for none.
fn overflow_code(o: Option<OverflowLevel>) -> u8 {
    o.and_then(|o| COLUMNS_OVERFLOW.iter().position(|l| *l == o))
        .map_or(0, |k| k as u8 + 1)
}

/// The page's columns of one graph (nodes in the pre-order `order`; `other`: the other side's
/// pre-order, for `matched`) as one little-endian buffer, laid out so that the page makes
/// typed-array views on it without a copy. Offsets are from the buffer's start, `n` is the node
/// count, `T` the size of the level table, `H` = `16 + T` rounded up to a multiple of 8:
///
/// | at | type | what |
/// |---|---|---|
/// | 0 | `[u8; 4]` | [`COLUMNS_MAGIC`] `PLGC` |
/// | 4 | u32 | [`COLUMNS_VERSION`] |
/// | 8 | u32 | `n` |
/// | 12 | u32 | `T` |
/// | 16 | `T` bytes | the overflow levels (UTF-8, joined with `\0`: `medium\0high\0critical`); code `k >= 1` of the overflow section is the `k`-th, 0 none; zero bytes up to `H` |
/// | `H` | f64 × n | precision; NaN = none (also a non-finite one, which JSON carried as `null`) |
/// | `H + 8n` | i32 × n | parent's index, -1 for the root |
/// | `H + 12n` | i32 × n | matched: the counterpart's index in the other graph, -1 if none |
/// | `H + 16n` | i32 × n | micro step (0 if none; the low 32 bits, as JS's `Int32Array.from` took them) |
/// | `H + 20n` | i32 × n | subtree end: the subtree of `i` is `[i, end)` |
/// | `H + 24n` | u8 × n | node type (`NodeOp::value`) |
/// | `H + 25n` | u8 × n | overflow level code |
/// | `H + 26n` | to the end | the names, UTF-8, joined with `\0` (none after the last) |
///
/// These are the columns of the page's `Graph` (`www/protocol.js`: `names`, `parent`,
/// `nodeType`, `precision`, `overflow`, `matched`, `microStep`, `subtreeEnd`), with the values
/// the `run` answer's JSON columns had, as the worker converted them to typed arrays. A name
/// holding a `\0` is not escaped (the page splits the names on it, as it split the joined JSON
/// names before).
pub fn graph_columns(g: &Graph, order: &Order, other: Option<&Order>) -> Vec<u8> {
    let n = order.ids.len();
    let nodes = || order.ids.iter().map(|&id| g.node(id));
    let levels = COLUMNS_OVERFLOW.map(OverflowLevel::as_str).join("\0");
    let head = (16 + levels.len()).div_ceil(8) * 8;
    let names_len = nodes().map(|x| x.name.len()).sum::<usize>() + n.saturating_sub(1);
    // Every section is sized here and filled below in one pass over the nodes.
    let mut out = vec![0u8; head + 26 * n + names_len];
    let (header, body) = out.split_at_mut(head);
    let (precision, body) = body.split_at_mut(8 * n);
    let (parent, body) = body.split_at_mut(4 * n);
    let (matched, body) = body.split_at_mut(4 * n);
    let (micro_step, body) = body.split_at_mut(4 * n);
    let (subtree_end, body) = body.split_at_mut(4 * n);
    let (node_type, body) = body.split_at_mut(n);
    let (overflow, names) = body.split_at_mut(n);
    header[0..4].copy_from_slice(&COLUMNS_MAGIC);
    header[4..8].copy_from_slice(&COLUMNS_VERSION.to_le_bytes());
    // Node ids are u32, so is a pre-order's length.
    header[8..12].copy_from_slice(&(n as u32).to_le_bytes());
    header[12..16].copy_from_slice(&(levels.len() as u32).to_le_bytes());
    header[16..16 + levels.len()].copy_from_slice(levels.as_bytes());
    let index = |o: &Order, id: Option<NodeId>| -> i32 {
        id.and_then(|id| o.index_of.get(id as usize).copied())
            .unwrap_or(-1) as i32
    };
    let mut name_at = 0;
    for (i, (x, end)) in nodes().zip(subtree_ends(g, order)).enumerate() {
        let p = x.precision.map(|p| p.0).filter(|p| p.is_finite());
        precision[8 * i..8 * i + 8].copy_from_slice(&p.unwrap_or(f64::NAN).to_le_bytes());
        let at = 4 * i..4 * i + 4;
        parent[at.clone()].copy_from_slice(&index(order, x.parent).to_le_bytes());
        let m = other.map_or(-1, |o| index(o, x.partner));
        matched[at.clone()].copy_from_slice(&m.to_le_bytes());
        let ms = x.micro_step.unwrap_or(0) as i32;
        micro_step[at.clone()].copy_from_slice(&ms.to_le_bytes());
        subtree_end[at].copy_from_slice(&(end as i32).to_le_bytes());
        node_type[i] = x.op.value();
        overflow[i] = overflow_code(x.overflow);
        // The separator before every name but the first is the zero already there.
        name_at += usize::from(i > 0);
        names[name_at..name_at + x.name.len()].copy_from_slice(x.name.as_bytes());
        name_at += x.name.len();
    }
    out
}

/// The pre-orders of a result's graphs (kept to resolve node indices later).
pub fn orders(res: &PairResult) -> (Order, Option<Order>) {
    let on = Order::of(&res.npu.graph);
    let ob = res.bench.as_ref().map(|b| Order::of(&b.graph));
    (on, ob)
}

/// The `run` answer over the pre-orders of [`orders`] (serialize it); the graphs' columns are
/// [`graph_columns`] over the same pre-orders.
pub fn run_dto(res: &PairResult, on: &Order, ob: Option<&Order>) -> RunDto {
    let npu = GraphSize {
        nodes: on.ids.len(),
    };
    let bench = res.bench.as_ref().map(|_| GraphSize {
        nodes: ob.map_or(0, |o| o.ids.len()),
    });
    let compare = res.bench.is_some();
    let parse = |s: String| serde_json::from_str(&s).unwrap_or(serde_json::Value::Null);
    RunDto {
        graph_type: if compare { "compare" } else { "build" },
        task: if compare {
            crate::compare::mode_task(res.mode)
        } else {
            ""
        },
        micro_steps: res.micro_steps,
        node_colors: if compare {
            parse(node_colors(res.mode))
        } else {
            serde_json::json!({})
        },
        tool_tip: if compare {
            parse(tool_tip(res.mode))
        } else {
            serde_json::Value::Null
        },
        diagnostics: res.diagnostics.clone(),
        npu,
        bench,
    }
}

/// Which side of a pair.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SideSel {
    Npu,
    Bench,
}

/// One tensor row of the NPU-vs-Bench table.
#[derive(Debug, Serialize)]
pub struct PairRow {
    pub section: &'static str,
    pub npu: Option<String>,
    pub bench: Option<String>,
}

/// Details of one node.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeDto {
    pub name: String,
    pub node_type: u8,
    pub up_node: String,
    pub precision_index: Option<String>,
    pub overflow_level: Option<&'static str>,
    pub matched_node_link: Vec<String>,
    pub micro_step: i64,
    /// Linked or unlinked by hand (the db's `modified`).
    pub modified: bool,
    pub stack: Vec<String>,
    pub input_data: Vec<(String, Vec<(String, String)>)>,
    pub output_data: Vec<(String, Vec<(String, String)>)>,
    pub rows: Vec<PairRow>,
}

fn section_of(s: State) -> usize {
    match s {
        State::Input => 0,
        State::Parameters => 1,
        State::Output => 2,
        State::ParametersGrad => 3,
        State::Debug => 4,
    }
}

const SECTIONS: [&str; 5] = ["input", "parameters", "output", "parameters_grad", "debug"];

fn keys_by_section(input: &ItemMap, output: &ItemMap) -> [Vec<String>; 5] {
    let mut out: [Vec<String>; 5] = Default::default();
    for (k, it) in input.iter().chain(output.iter()) {
        out[section_of(it.state)].push(k.clone());
    }
    out
}

/// The io maps of a node with compare results applied (NPU side).
fn io_with_results(res: &PairResult, side: SideSel, id: NodeId) -> (ItemMap, ItemMap) {
    match side {
        SideSel::Npu => {
            let (mut i, mut o) = res.npu.graph.io(&res.npu.dump, id);
            if let Some(c) = &res.comparison {
                apply_results(&mut [&mut i, &mut o], c.results.get(&id));
            }
            (i, o)
        }
        SideSel::Bench => match &res.bench {
            Some(b) => b.graph.io(&b.dump, id),
            None => (Vec::new(), Vec::new()),
        },
    }
}

/// Details of node `id` on `side`.
pub fn node_dto(res: &PairResult, side: SideSel, id: NodeId) -> Option<NodeDto> {
    let (side_ref, other) = match side {
        SideSel::Npu => (&res.npu, res.bench.as_ref().map(|b| &b.graph)),
        SideSel::Bench => (res.bench.as_ref()?, Some(&res.npu.graph)),
    };
    let g = &side_ref.graph;
    let node = g.nodes.get(id as usize)?;
    let mode = if res.bench.is_some() {
        res.mode
    } else {
        Mode::Build
    };
    let (input, output) = io_with_results(res, side, id);
    let fmt = |m: &ItemMap| -> Vec<(String, Vec<(String, String)>)> {
        m.iter()
            .map(|(k, it)| {
                (
                    k.clone(),
                    formatted_fields(&side_ref.dump.store, it, &node.name, mode),
                )
            })
            .collect()
    };
    let mut rows = Vec::new();
    if let (Some(p), Some(_)) = (node.partner, other) {
        let other_side = match side {
            SideSel::Npu => SideSel::Bench,
            SideSel::Bench => SideSel::Npu,
        };
        let (oi, oo) = io_with_results(res, other_side, p);
        let mine = keys_by_section(&input, &output);
        let theirs = keys_by_section(&oi, &oo);
        for s in 0..5 {
            for i in 0..mine[s].len().max(theirs[s].len()) {
                let (a, b) = (mine[s].get(i).cloned(), theirs[s].get(i).cloned());
                let (npu, bench) = if side == SideSel::Npu { (a, b) } else { (b, a) };
                rows.push(PairRow {
                    section: SECTIONS[s],
                    npu,
                    bench,
                });
            }
        }
    }
    let link: Vec<String> =
        serde_json::from_str(&link_json(other, node.partner)).unwrap_or_default();
    Some(NodeDto {
        name: node.name.clone(),
        node_type: node.op.value(),
        up_node: node
            .parent
            .map(|p| g.node(p).name.clone())
            .unwrap_or_default(),
        precision_index: node.precision.map(|p| precision_text(p.0)),
        overflow_level: node.overflow.map(|o| o.as_str()),
        matched_node_link: link,
        micro_step: node.micro_step.unwrap_or(0),
        modified: node.modified,
        stack: stack_lines(&side_ref.dump, node.stack),
        input_data: fmt(&input),
        output_data: fmt(&output),
        rows,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Result;
    use crate::mapping::LayerMapping;
    use crate::run::{self, Files, RunOptions};
    use std::borrow::Cow;
    use std::collections::HashMap;
    use std::path::{Path, PathBuf};

    /// A dump root on disk.
    struct Dir(PathBuf);

    impl Files for Dir {
        fn list(&self, dir: &str) -> Result<Vec<(String, bool)>> {
            Ok(std::fs::read_dir(self.0.join(dir))
                .unwrap()
                .flatten()
                .map(|e| {
                    let name = e.file_name().to_string_lossy().into_owned();
                    (name, e.path().is_dir())
                })
                .collect())
        }
        fn read(&self, path: &str) -> Result<Cow<'_, [u8]>> {
            Ok(Cow::Owned(std::fs::read(self.0.join(path)).unwrap()))
        }
    }

    /// A `graph_columns` buffer read back by its documented layout.
    struct Decoded {
        levels: Vec<String>,
        precision: Vec<f64>,
        parent: Vec<i32>,
        matched: Vec<i32>,
        micro_step: Vec<i32>,
        subtree_end: Vec<i32>,
        node_type: Vec<u8>,
        overflow: Vec<u8>,
        names: Vec<String>,
    }

    fn decode(b: &[u8]) -> Decoded {
        let u32_at = |at: usize| u32::from_le_bytes(b[at..at + 4].try_into().unwrap()) as usize;
        assert_eq!(b[0..4], COLUMNS_MAGIC);
        assert_eq!(u32_at(4), COLUMNS_VERSION as usize);
        let (n, t) = (u32_at(8), u32_at(12));
        let levels = std::str::from_utf8(&b[16..16 + t]).unwrap();
        let head = (16 + t).div_ceil(8) * 8;
        assert!(b[16 + t..head].iter().all(|&x| x == 0), "padding");
        assert_eq!(head % 8, 0, "the f64 section is aligned");
        let section = |k: usize, width: usize| &b[head + k * n..head + (k + width) * n];
        let i32s = |k: usize| -> Vec<i32> {
            section(k, 4)
                .chunks_exact(4)
                .map(|c| i32::from_le_bytes(c.try_into().unwrap()))
                .collect()
        };
        let names = std::str::from_utf8(&b[head + 26 * n..]).unwrap();
        Decoded {
            levels: levels.split('\0').map(str::to_string).collect(),
            precision: section(0, 8)
                .chunks_exact(8)
                .map(|c| f64::from_le_bytes(c.try_into().unwrap()))
                .collect(),
            parent: i32s(8),
            matched: i32s(12),
            micro_step: i32s(16),
            subtree_end: i32s(20),
            node_type: section(24, 1).to_vec(),
            overflow: section(25, 1).to_vec(),
            names: if n == 0 {
                Vec::new()
            } else {
                names.split('\0').map(str::to_string).collect()
            },
        }
    }

    /// Checks every column of every node of a decoded buffer against the graph; returns what it
    /// saw: (precision none, precision some, unmatched, matched, overflow levels, non-ASCII names).
    fn check(g: &Graph, order: &Order, other: Option<&Order>) -> [usize; 6] {
        let d = decode(&graph_columns(g, order, other));
        let n = order.ids.len();
        assert_eq!(d.levels, ["medium", "high", "critical"]);
        for v in [&d.parent, &d.matched, &d.micro_step, &d.subtree_end] {
            assert_eq!(v.len(), n);
        }
        assert_eq!(
            (d.precision.len(), d.node_type.len(), d.names.len()),
            (n, n, n)
        );
        let pos = |o: &Order| -> HashMap<NodeId, i32> {
            o.ids
                .iter()
                .enumerate()
                .map(|(i, &id)| (id, i as i32))
                .collect()
        };
        let (mine, theirs) = (pos(order), other.map(pos));
        // Depth by the decoded parents, for the subtree ends: the subtree of i runs up to the
        // next node that is not deeper.
        let mut depth = vec![0usize; n];
        let mut seen = [0usize; 6];
        for (i, &id) in order.ids.iter().enumerate() {
            let x = g.node(id);
            assert_eq!(d.names[i], x.name, "name of {i}");
            let parent = x.parent.map_or(-1, |p| mine[&p]);
            assert_eq!(d.parent[i], parent, "parent of {}", x.name);
            assert!(parent < i as i32, "pre-order");
            if parent >= 0 {
                depth[i] = depth[parent as usize] + 1;
            }
            let matched = match (&theirs, x.partner) {
                (Some(t), Some(p)) => t.get(&p).copied().unwrap_or(-1),
                _ => -1,
            };
            assert_eq!(d.matched[i], matched, "matched of {}", x.name);
            match x.precision {
                Some(p) => assert_eq!(d.precision[i].to_bits(), p.0.to_bits(), "{}", x.name),
                None => assert!(d.precision[i].is_nan(), "precision of {}", x.name),
            }
            assert_eq!(d.micro_step[i], x.micro_step.unwrap_or(0) as i32);
            assert_eq!(d.node_type[i], x.op.value());
            let level = match d.overflow[i] {
                0 => None,
                k => Some(d.levels[k as usize - 1].as_str()),
            };
            assert_eq!(
                level,
                x.overflow.map(|o| o.as_str()),
                "overflow of {}",
                x.name
            );
            seen[0] += usize::from(x.precision.is_none());
            seen[1] += usize::from(x.precision.is_some());
            seen[2] += usize::from(matched < 0);
            seen[3] += usize::from(matched >= 0);
            seen[4] += usize::from(level.is_some());
            seen[5] += usize::from(!x.name.is_ascii());
            if x.micro_step == Some((1 << 32) + 7) {
                assert_eq!(d.micro_step[i], 7);
            }
        }
        for i in 0..n {
            let end = (i + 1..n).find(|&j| depth[j] <= depth[i]).unwrap_or(n);
            assert_eq!(d.subtree_end[i], end as i32, "subtree end of {i}");
        }
        seen
    }

    fn case() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/qwen_mix_statistics")
    }

    /// Step 0 of qwen_mix_statistics (Megatron NPU vs HF Bench, with its layer mapping), the
    /// NPU side alone unless `compare`.
    fn pair(compare: bool) -> PairResult {
        let (npu, bench) = (Dir(case().join("npu")), Dir(case().join("bench")));
        let plan = run::plan(&npu, Some(&bench)).unwrap();
        let p = plan.pairs.iter().find(|p| p.step == 0).unwrap();
        let text = std::fs::read_to_string(case().join("layer_mapping.yaml")).unwrap();
        let opts = RunOptions {
            layer_mapping: Some(LayerMapping::parse("layer_mapping.yaml", &text).unwrap()),
            overflow_check: true,
            ..Default::default()
        };
        let nd = run::load_rank(&npu, &p.npu_dir).unwrap();
        let bd = compare.then(|| run::load_rank(&bench, p.bench_dir.as_ref().unwrap()).unwrap());
        run::run_pair(nd, bd, &opts).unwrap()
    }

    /// The binary columns of both sides of a real compare hold, node for node, the graph's
    /// values in the pre-orders the page's indices refer to.
    #[test]
    fn graph_columns_of_a_compare() {
        let mut res = pair(true);
        // The fixture has no overflow levels, micro steps or non-ASCII names: give a few nodes of
        // each side some (every level; a micro step, one beyond i32 whose low 32 bits are 7, as
        // JS's `Int32Array.from` took it; a multi-byte name, a name that starts with a
        // byte-order mark).
        for g in [&mut res.npu.graph, &mut res.bench.as_mut().unwrap().graph] {
            for (k, level) in COLUMNS_OVERFLOW.into_iter().enumerate() {
                g.nodes[3 + k].overflow = Some(level);
            }
            g.nodes[7].name = format!("模块.{}.层·ü", g.nodes[7].name);
            g.nodes[8].name = format!("\u{feff}{}", g.nodes[8].name);
            g.nodes[9].micro_step = Some(2);
            g.nodes[10].micro_step = Some((1 << 32) + 7);
        }
        let (on, ob) = orders(&res);
        let ob = ob.unwrap();
        let bench = &res.bench.as_ref().unwrap().graph;
        let npu_seen = check(&res.npu.graph, &on, Some(&ob));
        let bench_seen = check(bench, &ob, Some(&on));
        // Every case is present: precision none and some (NPU), unmatched and matched nodes,
        // overflow levels, non-ASCII names.
        assert!(npu_seen.iter().all(|&c| c > 0), "{npu_seen:?}");
        assert!(
            bench_seen[2] > 0 && bench_seen[3] > 0 && bench_seen[4] >= 3 && bench_seen[5] == 2,
            "{bench_seen:?}"
        );
        assert_eq!(npu_seen[5], 2);
        assert_eq!(on.ids.len(), npu_seen[0] + npu_seen[1]);
    }

    /// A build (one side): no counterparts, no precision.
    #[test]
    fn graph_columns_of_a_build() {
        let res = pair(false);
        assert!(res.bench.is_none());
        let on = Order::of(&res.npu.graph);
        let seen = check(&res.npu.graph, &on, None);
        assert_eq!((seen[1], seen[3]), (0, 0));
        assert_eq!(seen[0], on.ids.len());
    }
}
