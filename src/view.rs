//! Plain DTOs for the page: the `run` answer, a compact, column-wise binary form of both graphs
//! ([`graph_columns`]) and per-node details. They are the only `Serialize` types besides the file
//! formats; the core's graph types are not.

use crate::compare::apply_results;
use crate::compare::pair::PairResult;
use crate::formats::dump::OverflowLevel;
use crate::graph::items::{formatted_fields, ItemMap, Mode, State};
use crate::graph::{Graph, NodeId};
use crate::visdb::export::{link_json, node_colors, precision_text, stack_lines, tool_tip};
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
    pub diagnostics: Vec<crate::base::error::Diagnostic>,
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
    let mut out = vec![0u8; columns_len(g, order)];
    write_columns(g, order, other, &mut |at, bytes| {
        out[at..at + bytes.len()].copy_from_slice(bytes)
    });
    out
}

/// The length of the [`graph_columns`] buffer of `order`.
pub fn columns_len(g: &Graph, order: &Order) -> usize {
    let n = order.ids.len();
    let names_len =
        order.ids.iter().map(|&id| g.name(id).len()).sum::<usize>() + n.saturating_sub(1);
    columns_head() + 26 * n + names_len
}

/// The header's length (magic, version, node count, the overflow levels; 8-byte aligned).
fn columns_head() -> usize {
    (16 + overflow_levels().len()).div_ceil(8) * 8
}

fn overflow_levels() -> String {
    COLUMNS_OVERFLOW.map(OverflowLevel::as_str).join("\0")
}

/// Bytes of a [`graph_columns`] buffer handed on in pieces of about [`Pieces::SIZE`].
struct Pieces<'a> {
    at: usize,
    buf: Vec<u8>,
    put: &'a mut dyn FnMut(usize, &[u8]),
}

impl Pieces<'_> {
    const SIZE: usize = 1 << 16;
    fn bytes(&mut self, b: &[u8]) {
        self.buf.extend_from_slice(b);
        if self.buf.len() >= Self::SIZE {
            self.flush();
        }
    }
    fn flush(&mut self) {
        if !self.buf.is_empty() {
            (self.put)(self.at, &self.buf);
            self.at += self.buf.len();
            self.buf.clear();
        }
    }
}

/// [`graph_columns`] without the buffer: `put(offset, bytes)` gets each of its
/// [`columns_len`] bytes once, in order, in pieces of about 64 KiB (the page writes them
/// straight into a JS array, so the whole buffer never sits in the wasm memory).
pub fn write_columns(
    g: &Graph,
    order: &Order,
    other: Option<&Order>,
    put: &mut dyn FnMut(usize, &[u8]),
) {
    let n = order.ids.len();
    let nodes = || order.ids.iter().map(|&id| g.node(id));
    let levels = overflow_levels();
    let mut header = vec![0u8; columns_head()];
    header[0..4].copy_from_slice(&COLUMNS_MAGIC);
    header[4..8].copy_from_slice(&COLUMNS_VERSION.to_le_bytes());
    // Node ids are u32, so is a pre-order's length.
    header[8..12].copy_from_slice(&(n as u32).to_le_bytes());
    header[12..16].copy_from_slice(&(levels.len() as u32).to_le_bytes());
    header[16..16 + levels.len()].copy_from_slice(levels.as_bytes());
    let mut out = Pieces {
        at: 0,
        buf: Vec::with_capacity(Pieces::SIZE + 64),
        put,
    };
    out.bytes(&header);
    let index = |o: &Order, id: Option<NodeId>| -> i32 {
        id.and_then(|id| o.index_of.get(id as usize).copied())
            .unwrap_or(-1) as i32
    };
    // The sections in turn, each a pass over the nodes.
    for x in nodes() {
        let p = x.precision().map(|p| p.0).filter(|p| p.is_finite());
        out.bytes(&p.unwrap_or(f64::NAN).to_le_bytes());
    }
    for x in nodes() {
        out.bytes(&index(order, x.parent()).to_le_bytes());
    }
    for x in nodes() {
        let m = other.map_or(-1, |o| index(o, x.partner()));
        out.bytes(&m.to_le_bytes());
    }
    for x in nodes() {
        out.bytes(&(x.micro_step().unwrap_or(0) as i32).to_le_bytes());
    }
    for end in subtree_ends(g, order) {
        out.bytes(&(end as i32).to_le_bytes());
    }
    for x in nodes() {
        out.bytes(&[x.op.value()]);
    }
    for x in nodes() {
        out.bytes(&[overflow_code(x.overflow)]);
    }
    // Names, a zero between two.
    for (i, &id) in order.ids.iter().enumerate() {
        if i > 0 {
            out.bytes(&[0]);
        }
        out.bytes(g.name(id).as_bytes());
    }
    out.flush();
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
            if let (Some(c), Some(sides)) = (&res.comparison, res.sides()) {
                let r = c.results_with_io(sides, id, Some((&i, &o)));
                apply_results(&mut [&mut i, &mut o], r.as_deref());
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
                    formatted_fields(&side_ref.dump.store, it, g.name_of(node), mode),
                )
            })
            .collect()
    };
    let mut rows = Vec::new();
    if let (Some(p), Some(_)) = (node.partner(), other) {
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
        serde_json::from_str(&link_json(other, node.partner())).unwrap_or_default();
    Some(NodeDto {
        name: g.name_of(node).to_string(),
        node_type: node.op.value(),
        up_node: node
            .parent()
            .map(|p| g.name(p).to_string())
            .unwrap_or_default(),
        precision_index: node.precision().map(|p| precision_text(p.0)),
        overflow_level: node.overflow.map(|o| o.as_str()),
        matched_node_link: link,
        micro_step: node.micro_step().unwrap_or(0),
        modified: node.modified,
        stack: stack_lines(&side_ref.dump, g.stack(node.stack)),
        input_data: fmt(&input),
        output_data: fmt(&output),
        rows,
    })
}

/// The page's diagnosis of one pair (`Session::diagnose`): the verdict, the ranked suspects with
/// the pre-order indices of their nodes on both sides, and the layer cells of the heatmap.
pub fn diagnosis_dto(
    d: &crate::compare::diagnose::PairDiagnosis,
    npu_order: Option<&Order>,
    bench_order: Option<&Order>,
) -> serde_json::Value {
    let index = |o: Option<&Order>, id: Option<NodeId>| -> serde_json::Value {
        match (o, id) {
            (Some(o), Some(id)) => o
                .index_of
                .get(id as usize)
                .filter(|i| **i >= 0)
                .map_or(serde_json::Value::Null, |i| serde_json::json!(i)),
            _ => serde_json::Value::Null,
        }
    };
    let suspects: Vec<serde_json::Value> = d
        .suspects
        .iter()
        .map(|s| {
            serde_json::json!({
                "step": s.step,
                "rank": s.rank,
                "pass": s.pass,
                "node": s.node,
                "bench_node": s.bench_node,
                "score": s.score,
                "why": s.why,
                "npuIndex": index(npu_order, Some(s.node_id)),
                "benchIndex": index(bench_order, s.bench_id),
            })
        })
        .collect();
    serde_json::json!({
        "step": d.step,
        "rank": d.rank,
        "verdict": if d.diverged { "diverged" } else { "agree" },
        "suspects": suspects,
        "layers": d.layers,
        "measured": d.measured,
    })
}

/// Per node of `order` (pre-order), log10 of its output's divergence (NaN: not measured).
pub fn divergence_column(d: &crate::compare::diagnose::PairDiagnosis, order: &Order) -> Vec<f32> {
    order
        .ids
        .iter()
        .map(|id| d.node_div.get(*id as usize).copied().unwrap_or(f32::NAN))
        .collect()
}
