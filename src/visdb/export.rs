//! The rows of msprobe's `.vis.db` (tables `tb_nodes`, `tb_stack`, `tb_config`) as plain values,
//! cell for cell, and the distributed post-analysis that fills `matched_distributed`.
//!
//! The core never touches the SQLite library: `visdb` turns these rows into the values that
//! `sqlite_writer` packs into the file the CLI writes.
//!
//! [`GraphRows`] fixes a graph's node order and stack ids first, then formats any range of its
//! rows: a `RowWriter` per thread keeps the caches and one reused buffer per text column, and a
//! [`Sink`] gets each row borrowing them, with no allocation per cell. [`PairRows`] formats a
//! pair's graphs so that each Bench node's items are derived once: the NPU row of a pair whose
//! compare columns are derived as it is written also writes its Bench partner's row; the other
//! Bench rows are written on their own.

use crate::base::error::Diagnostic;
use crate::compare::pair::PairResult;
use crate::compare::{Comparison, Sides};
use crate::formats::dump::RankDump;
use crate::formats::pyfmt::{json_dumps, json_str, json_str_iter_into, json_str_list};
use crate::graph::items::{ItemMap, ItemWriter, Mode, NodeFormat};
use crate::graph::{Graph, NodeId, Stack, NO_FORWARD_STACK};
use std::collections::HashMap;

/// One `tb_nodes` row: owned (`NodeRow`), or, as the export hands rows to a [`Sink`],
/// borrowing its texts from the formatter's buffers (`NodeRow<&str>`, no allocation per cell).
#[derive(Debug, Clone, PartialEq)]
pub struct NodeRow<S = String> {
    pub id: S,
    pub graph_id: S,
    pub node_order: i64,
    pub node_name: S,
    pub node_type: S,
    pub up_node: S,
    pub sub_nodes: S,
    pub precision_index: Option<f64>,
    pub overflow_level: Option<&'static str>,
    pub micro_step_id: i64,
    pub matched_node_link: S,
    pub stack_id: S,
    pub parallel_merge_info: S,
    pub matched_distributed: S,
    pub modified: i64,
    pub input_data: S,
    pub output_data: S,
    pub data_source: &'static str,
    pub dump_data_dir: Option<S>,
    pub step: i64,
    pub rank: i64,
    pub is_distributed: i64,
}

impl NodeRow<&str> {
    /// The row with its texts copied out.
    pub fn owned(&self) -> NodeRow {
        NodeRow {
            id: self.id.to_owned(),
            graph_id: self.graph_id.to_owned(),
            node_order: self.node_order,
            node_name: self.node_name.to_owned(),
            node_type: self.node_type.to_owned(),
            up_node: self.up_node.to_owned(),
            sub_nodes: self.sub_nodes.to_owned(),
            precision_index: self.precision_index,
            overflow_level: self.overflow_level,
            micro_step_id: self.micro_step_id,
            matched_node_link: self.matched_node_link.to_owned(),
            stack_id: self.stack_id.to_owned(),
            parallel_merge_info: self.parallel_merge_info.to_owned(),
            matched_distributed: self.matched_distributed.to_owned(),
            modified: self.modified,
            input_data: self.input_data.to_owned(),
            output_data: self.output_data.to_owned(),
            data_source: self.data_source,
            dump_data_dir: self.dump_data_dir.map(str::to_owned),
            step: self.step,
            rank: self.rank,
            is_distributed: self.is_distributed,
        }
    }
}

/// One `tb_stack` row.
#[derive(Debug, Clone, PartialEq)]
pub struct StackRow {
    pub id: String,
    pub stack_info: String,
}

/// The `tb_config` row.
#[derive(Debug, Clone, PartialEq)]
pub struct ConfigRow {
    pub graph_type: &'static str,
    pub task: &'static str,
    pub tool_tip: Option<String>,
    pub micro_steps: i64,
    pub overflow_check: i64,
    pub node_colors: String,
    pub rank_list: String,
    pub step_list: String,
}

impl ConfigRow {
    /// The row of a run in `mode` (`compare`: a Bench side was given), as msprobe writes it.
    pub fn new(
        compare: bool,
        mode: Mode,
        micro_steps: i64,
        overflow_check: bool,
        rank_list: &[i64],
        step_list: &[i64],
    ) -> ConfigRow {
        ConfigRow {
            graph_type: if compare { "compare" } else { "build" },
            task: if compare {
                crate::compare::mode_task(mode)
            } else {
                ""
            },
            tool_tip: compare.then(|| tool_tip(mode)),
            micro_steps,
            overflow_check: overflow_check as i64,
            node_colors: if compare {
                node_colors(mode)
            } else {
                "null".into()
            },
            rank_list: int_list(rank_list),
            step_list: int_list(step_list),
        }
    }
}

/// Where rows go (the CLI's SQLite writer, or a collector).
pub trait Sink {
    /// A node row; its texts are valid for the call only.
    fn node(&mut self, row: NodeRow<&str>);
    fn stack(&mut self, row: StackRow);
}

impl Sink for (Vec<NodeRow>, Vec<StackRow>) {
    fn node(&mut self, row: NodeRow<&str>) {
        self.0.push(row.owned());
    }
    fn stack(&mut self, row: StackRow) {
        self.1.push(row);
    }
}

/// `json.dumps(stack_info)`.
pub fn stack_json(d: &RankDump, s: Stack) -> String {
    match s {
        Stack::Empty => "[]".into(),
        Stack::NoForward => json_str_list(&[NO_FORWARD_STACK]),
        Stack::Val(v) => {
            let mut out = String::new();
            json_dumps(&d.store, v, &mut out);
            out
        }
    }
}

/// The stack lines of a node, for views.
pub fn stack_lines(d: &RankDump, s: Stack) -> Vec<String> {
    match s {
        Stack::Empty => Vec::new(),
        Stack::NoForward => vec![NO_FORWARD_STACK.to_string()],
        Stack::Val(v) => match v {
            crate::formats::json::Val::List { .. } => d
                .store
                .list(v)
                .iter()
                .map(|x| crate::formats::pyfmt::py_str(&d.store, x))
                .collect(),
            other => vec![crate::formats::pyfmt::py_str(&d.store, other)],
        },
    }
}

/// A graph to export and its context.
pub struct GraphExport<'a> {
    pub graph: &'a Graph,
    pub dump: &'a RankDump,
    /// The other side's graph (for `matched_node_link`) and dump (the NPU side's compare rows
    /// are derived from both sides).
    pub other: Option<(&'a Graph, &'a RankDump)>,
    /// Compare results (NPU side only).
    pub comparison: Option<&'a Comparison>,
    pub mode: Mode,
    pub data_source: &'static str,
    pub step: i64,
    pub rank: i64,
    pub dump_data_dir: Option<String>,
}

impl<'a> GraphExport<'a> {
    /// The NPU graph of a pair's result (no `dump_data_dir`).
    pub fn npu(res: &'a PairResult, step: i64, rank: i64) -> GraphExport<'a> {
        GraphExport {
            graph: &res.npu.graph,
            dump: &res.npu.dump,
            other: res.bench.as_ref().map(|b| (&b.graph, &*b.dump)),
            comparison: res.comparison.as_ref(),
            mode: res.mode,
            data_source: "NPU",
            step,
            rank,
            dump_data_dir: None,
        }
    }

    /// The Bench graph of a pair's result, if it has one (no `dump_data_dir`).
    pub fn bench(res: &'a PairResult, step: i64, rank: i64) -> Option<GraphExport<'a>> {
        let b = res.bench.as_ref()?;
        Some(GraphExport {
            graph: &b.graph,
            dump: &b.dump,
            other: Some((&res.npu.graph, &res.npu.dump)),
            comparison: None,
            mode: res.mode,
            data_source: "Bench",
            step,
            rank,
            dump_data_dir: None,
        })
    }
}

/// A distributed node kept for the post-analysis.
#[derive(Debug, Clone)]
pub struct DistNode {
    pub name: String,
    pub input_data: String,
    pub precision: Option<f64>,
    pub overflow: Option<&'static str>,
}

/// `precision_index` as the db holds it and as `str()` prints it.
pub fn precision_text(p: f64) -> String {
    if p.fract() == 0.0 {
        format!("{}", p as i64)
    } else {
        crate::formats::pyfmt::float_repr(p)
    }
}

/// The JSON list of the partner's path (`matched_node_link`).
pub fn link_json(other: Option<&Graph>, partner: Option<NodeId>) -> String {
    LinkWriter::default().link(other, partner)
}

/// Writes `matched_node_link`s into one other graph (the same one at every call), keeping the
/// JSON of the last partner's parent path: the export goes through the nodes in order, so one
/// partner's siblings come one after another and share all of their link but the last name.
#[derive(Default)]
struct LinkWriter {
    /// The parent whose path `prefix` is (`Some(None)`: no parent).
    parent: Option<Option<NodeId>>,
    /// `[` and the JSON strings of the parent's path, comma-separated; no closing bracket.
    prefix: String,
    /// The parent's chain up to the root repeats a node (then so does its children's:
    /// `Graph::path` is the node alone, its `ancestors` being empty on a cycle).
    cyclic: bool,
    chain: Vec<NodeId>,
}

impl LinkWriter {
    /// `json.dumps` of the partner's path, or `[]`.
    fn link(&mut self, other: Option<&Graph>, partner: Option<NodeId>) -> String {
        let mut out = String::new();
        self.link_into(other, partner, &mut out);
        out
    }

    /// [`LinkWriter::link`] into `out` (cleared first).
    fn link_into(&mut self, other: Option<&Graph>, partner: Option<NodeId>, out: &mut String) {
        out.clear();
        let (Some(o), Some(p)) = (other, partner) else {
            out.push_str("[]");
            return;
        };
        let parent = o.node(p).parent();
        if self.parent != Some(parent) {
            self.set_parent(o, parent);
        }
        let name = o.name(p);
        out.reserve(self.prefix.len() + name.len() + 5);
        if self.cyclic {
            out.push('[');
        } else {
            out.push_str(&self.prefix);
            if parent.is_some() {
                out.push_str(", ");
            }
        }
        json_str(name, out);
        out.push(']');
    }

    fn set_parent(&mut self, o: &Graph, parent: Option<NodeId>) {
        self.parent = Some(parent);
        self.prefix.clear();
        self.prefix.push('[');
        // The parent, then its ancestors up to the root; longer than the node count is a cycle.
        self.chain.clear();
        let mut cur = parent;
        while let Some(c) = cur {
            if self.chain.len() >= o.nodes.len() {
                self.cyclic = true;
                return;
            }
            self.chain.push(c);
            cur = o.node(c).parent();
        }
        self.cyclic = false;
        for (i, id) in self.chain.iter().rev().enumerate() {
            if i > 0 {
                self.prefix.push_str(", ");
            }
            json_str(o.name(*id), &mut self.prefix);
        }
    }
}

/// Writes every node reachable from the root, in post-order (`node_to_db`), then its stacks.
/// Returns the distributed nodes for [`distributed_analyse`].
///
/// A deferred compare's warnings ([`crate::compare::CompareOptions::defer_verdicts`]) are in
/// [`RowWriter::warnings`]: a host that defers writes through [`GraphRows`] (the CLI does).
pub fn export_graph(x: &GraphExport, sink: &mut dyn Sink) -> Vec<DistNode> {
    let rows = GraphRows::new(x);
    let mut w = rows.writer();
    let dist = rows.write(&mut w, 0..rows.len(), sink);
    rows.write_stacks(sink);
    dist
}

/// A graph's rows, ready to be formatted in parts (by several threads, in any order): the
/// nodes in post-order and each one's stack id, decided in that order as msprobe does.
pub struct GraphRows<'a> {
    x: &'a GraphExport<'a>,
    graph_id: String,
    order: Vec<NodeId>,
    /// The stack (an index in `stacks`) of each node of `order`.
    stack_of: Vec<u32>,
    /// Stack texts, in first-seen order (msprobe dedupes the texts).
    stacks: Vec<String>,
}

/// What a thread keeps while it formats rows of one graph (caches and buffers).
pub struct RowWriter<'s> {
    items: ItemWriter<'s>,
    links: LinkWriter,
    /// A row's texts, formatted into buffers reused from row to row.
    input: String,
    output: String,
    id: String,
    sub_nodes: String,
    stack_id: String,
    link: String,
    merge_info: String,
    /// Warnings of pairs compared as their rows were written (a deferred compare,
    /// [`crate::compare::CompareOptions::defer_verdicts`]), with the row's position.
    pub warnings: Vec<(usize, Diagnostic)>,
}

impl<'a> GraphRows<'a> {
    pub fn new(x: &'a GraphExport<'a>) -> GraphRows<'a> {
        let g = x.graph;
        let order = g.post_order();
        let mut stacks: Vec<String> = Vec::new();
        let mut by_text: crate::base::HashMap<String, u32> = crate::base::HashMap::default();
        // Many nodes share one stack value (stack.json groups them): format and look up each
        // value once, then map the value straight to its id.
        let mut by_key: crate::base::HashMap<(u8, u32, u32), u32> = crate::base::HashMap::default();
        let stack_of = order
            .iter()
            .map(|&id| {
                let stack = g.stack(g.node(id).stack);
                let key = crate::graph::stack_key(stack);
                if let Some(&sid) = key.and_then(|k| by_key.get(&k)) {
                    return sid;
                }
                let st = stack_json(x.dump, stack);
                let sid = *by_text.entry(st).or_insert_with_key(|st| {
                    stacks.push(st.clone());
                    stacks.len() as u32 - 1
                });
                if let Some(k) = key {
                    by_key.insert(k, sid);
                }
                sid
            })
            .collect();
        GraphRows {
            x,
            graph_id: format!("{}_{}_{}", x.data_source, x.step, x.rank),
            order,
            stack_of,
            stacks,
        }
    }

    /// The number of node rows.
    pub fn len(&self) -> usize {
        self.order.len()
    }

    pub fn is_empty(&self) -> bool {
        self.order.is_empty()
    }

    /// A writer for [`GraphRows::write`] (one per thread; it keeps caches across calls).
    pub fn writer(&self) -> RowWriter<'a> {
        RowWriter {
            items: ItemWriter::new(&self.x.dump.store),
            links: LinkWriter::default(),
            input: String::new(),
            output: String::new(),
            id: String::new(),
            sub_nodes: String::new(),
            stack_id: String::new(),
            link: String::new(),
            merge_info: String::new(),
            warnings: Vec::new(),
        }
    }

    /// Formats the node rows `range` (positions in post-order) into `sink`; returns the
    /// distributed nodes among them, in order.
    pub fn write(
        &self,
        w: &mut RowWriter<'a>,
        range: std::ops::Range<usize>,
        sink: &mut dyn Sink,
    ) -> Vec<DistNode> {
        let mut dist = Vec::new();
        let range = range.start.min(self.len())..range.end.min(self.len());
        for order in range {
            let (input, output) = self.x.graph.io(self.x.dump, self.order[order]);
            if let Some(d) = self.write_row(w, order, (&input, &output), None, sink) {
                dist.push(d);
            }
        }
        dist
    }

    /// Formats row `order` (its node's items `io`) into `sink`; `partner_io`: the items of the
    /// node's [`Comparison::derived_partner`] when the caller has them. Returns the node when
    /// it is a distributed one.
    fn write_row(
        &self,
        w: &mut RowWriter<'a>,
        order: usize,
        (input, output): (&ItemMap, &ItemMap),
        partner_io: Option<(&ItemMap, &ItemMap)>,
        sink: &mut dyn Sink,
    ) -> Option<DistNode> {
        let x = self.x;
        let g = x.graph;
        let graph_id = self.graph_id.as_str();
        let mut dist = None;
        let id = self.order[order];
        let n = g.node(id);
        let name = g.name(id);
        // The compare columns are written over the items as they are formatted
        // (`compare::apply_results` without its copies).
        let mut precision = n.precision().map(|p| p.0);
        let results = match (x.comparison, x.other) {
            (Some(c), Some((gb, db))) => {
                let sides = Sides {
                    gn: g,
                    dn: x.dump,
                    gb,
                    db,
                };
                let j = c.judge_with_io(sides, id, Some((input, output)), partner_io);
                precision = j.precision;
                if let Some(d) = j.warning {
                    w.warnings.push((order, d));
                }
                j.rows
            }
            _ => None,
        };
        let results = results.as_deref();
        // Every text of the row goes into a buffer of `w` (no allocation per cell).
        let f = NodeFormat::new(name, x.mode);
        w.input.clear();
        w.items
            .map_with_results_into(input, results, f, &mut w.input);
        w.output.clear();
        w.items
            .map_with_results_into(output, results, f, &mut w.output);
        w.sub_nodes.clear();
        if !n.children.is_empty() {
            json_str_iter_into(n.children.iter().map(|c| g.name(*c)), &mut w.sub_nodes);
        }
        w.id.clear();
        w.id.push_str(graph_id);
        w.id.push('_');
        w.id.push_str(name);
        w.stack_id.clear();
        w.stack_id.push_str(graph_id);
        w.stack_id.push('_');
        w.stack_id
            .push_str(itoa::Buffer::new().format(self.stack_of[order]));
        w.links
            .link_into(x.other.map(|o| o.0), n.partner(), &mut w.link);
        w.merge_info.clear();
        if let Some(v) = g.merge_info.get(&id).filter(|v| !v.is_empty()) {
            json_str_iter_into(v.iter().map(String::as_str), &mut w.merge_info);
        }
        let is_distributed = name.starts_with("Distributed");
        if is_distributed {
            dist = Some(DistNode {
                name: name.to_string(),
                input_data: w.input.clone(),
                precision,
                overflow: n.overflow.map(|o| o.as_str()),
            });
        }
        sink.node(NodeRow {
            id: &w.id,
            graph_id,
            node_order: order as i64,
            node_name: name,
            node_type: itoa::Buffer::new().format(n.op.value()),
            up_node: n.parent().map_or("", |p| g.name(p)),
            sub_nodes: &w.sub_nodes,
            precision_index: precision,
            overflow_level: n.overflow.map(|o| o.as_str()),
            micro_step_id: n.micro_step().unwrap_or(0),
            matched_node_link: &w.link,
            stack_id: &w.stack_id,
            parallel_merge_info: &w.merge_info,
            matched_distributed: "{}",
            modified: n.modified as i64,
            input_data: &w.input,
            output_data: &w.output,
            data_source: x.data_source,
            dump_data_dir: x.dump_data_dir.as_deref(),
            step: x.step,
            rank: x.rank,
            is_distributed: is_distributed as i64,
        });
        dist
    }

    /// The `tb_stack` rows, in first-seen order.
    pub fn write_stacks(&self, sink: &mut dyn Sink) {
        for (i, st) in self.stacks.iter().enumerate() {
            sink.stack(StackRow {
                id: format!("{}_{i}", self.graph_id),
                stack_info: st.clone(),
            });
        }
    }
}

/// The rows of a pair's graphs (the NPU graph and, for a compare, the Bench graph), formatted so
/// that each Bench node's items are derived once: the NPU row of a pair whose compare columns are
/// derived as they are written ([`Comparison::derived_partner`]) writes its Bench partner's row
/// too, with the partner's items its compare derives anyway (each such Bench node's items were
/// derived twice: for that compare and for its own row). The other Bench rows are written on
/// their own. Rows carry their `node_order`, so the order in which they reach the sink does not
/// matter.
pub struct PairRows<'a> {
    pub npu: GraphRows<'a>,
    pub bench: Option<GraphRows<'a>>,
    /// Per NPU row: the Bench row written with it (`u32::MAX`: none).
    with: Vec<u32>,
    /// Per Bench row: written with an NPU row.
    taken: Vec<bool>,
}

impl<'a> PairRows<'a> {
    /// `npu` and, for a compare, `bench`: the graphs of one pair (rows are written together only
    /// when `bench`'s graph and dump are `npu`'s other side).
    pub fn new(npu: GraphRows<'a>, bench: Option<GraphRows<'a>>) -> PairRows<'a> {
        let mut with = vec![u32::MAX; npu.len()];
        let mut taken = vec![false; bench.as_ref().map_or(0, GraphRows::len)];
        let same_pair = |b: &GraphRows| {
            npu.x
                .other
                .is_some_and(|(gb, db)| std::ptr::eq(gb, b.x.graph) && std::ptr::eq(db, b.x.dump))
        };
        if let (Some(c), Some(bench)) = (npu.x.comparison, bench.as_ref().filter(|b| same_pair(b)))
        {
            let mut pos = vec![u32::MAX; bench.x.graph.nodes.len()];
            for (i, &b) in bench.order.iter().enumerate() {
                if let Some(p) = pos.get_mut(b as usize) {
                    *p = i as u32;
                }
            }
            // A Bench node is written with the first NPU row (in row order) that compares
            // against it.
            for (i, &n) in npu.order.iter().enumerate() {
                let Some(p) = c
                    .derived_partner(n)
                    .and_then(|b| pos.get(b as usize).copied())
                    .filter(|&p| p != u32::MAX)
                else {
                    continue;
                };
                if let Some(t) = taken.get_mut(p as usize).filter(|t| !**t) {
                    *t = true;
                    with[i] = p;
                }
            }
        }
        PairRows {
            npu,
            bench,
            with,
            taken,
        }
    }

    /// The number of rows of each graph (NPU, then Bench if any).
    pub fn lens(&self) -> Vec<usize> {
        std::iter::once(&self.npu)
            .chain(&self.bench)
            .map(GraphRows::len)
            .collect()
    }

    /// Writers for [`PairRows::write`] (one set per thread).
    pub fn writers(&self) -> PairWriters<'a> {
        PairWriters(
            std::iter::once(&self.npu)
                .chain(&self.bench)
                .map(GraphRows::writer)
                .collect(),
        )
    }

    /// Formats the rows `range` of graph `graph` (0: NPU, with the Bench rows that go with
    /// them; 1: Bench, but those) into `sink`, the Bench rows written with NPU rows into
    /// `partners` (a host that keeps each graph's rows together); returns the distributed
    /// nodes among them with their graph and row.
    pub fn write(
        &self,
        graph: usize,
        w: &mut PairWriters<'a>,
        range: std::ops::Range<usize>,
        sink: &mut dyn Sink,
        partners: &mut dyn Sink,
    ) -> Vec<(usize, usize, DistNode)> {
        let mut dist = Vec::new();
        // `writers` made one per graph.
        let Some((wn, rest)) = w.0.split_first_mut() else {
            return dist;
        };
        let mut bench = self.bench.as_ref().zip(rest.first_mut());
        if graph == 0 {
            let x = self.npu.x;
            let range = range.start.min(self.npu.len())..range.end.min(self.npu.len());
            for order in range {
                let (input, output) = x.graph.io(x.dump, self.npu.order[order]);
                let partner = match (self.with[order], &bench) {
                    (u32::MAX, _) | (_, None) => None,
                    (p, Some((b, _))) => {
                        let p = p as usize;
                        Some((p, b.x.graph.io(b.x.dump, b.order[p])))
                    }
                };
                let partner_io = partner.as_ref().map(|(_, (i, o))| (i, o));
                let d = self
                    .npu
                    .write_row(wn, order, (&input, &output), partner_io, sink);
                dist.extend(d.map(|d| (0, order, d)));
                if let (Some((p, (i, o))), Some((b, wb))) = (&partner, &mut bench) {
                    let d = b.write_row(wb, *p, (i, o), None, partners);
                    dist.extend(d.map(|d| (1, *p, d)));
                }
            }
        } else if let (1, Some((b, wb))) = (graph, bench) {
            let x = b.x;
            let range = range.start.min(b.len())..range.end.min(b.len());
            for order in range.filter(|&o| !self.taken[o]) {
                let (input, output) = x.graph.io(x.dump, b.order[order]);
                let d = b.write_row(wb, order, (&input, &output), None, sink);
                dist.extend(d.map(|d| (1, order, d)));
            }
        }
        dist
    }

    /// The `tb_stack` rows of each graph.
    pub fn write_stacks(&self, sink: &mut dyn Sink) {
        self.npu.write_stacks(sink);
        if let Some(b) = &self.bench {
            b.write_stacks(sink);
        }
    }
}

/// One thread's writers for [`PairRows::write`]: one per graph of the pair, NPU first.
pub struct PairWriters<'a>(Vec<RowWriter<'a>>);

impl PairWriters<'_> {
    /// The deferred compares' warnings the writers met: (graph, row, warning), each graph's in
    /// the order its rows were written.
    pub fn warnings(self) -> Vec<(usize, usize, Diagnostic)> {
        self.0
            .into_iter()
            .enumerate()
            .flat_map(|(g, w)| w.warnings.into_iter().map(move |(o, d)| (g, o, d)))
            .collect()
    }
}

const DESC_SUMMARY: &str = "此节点所有输入输出的统计量误差, 颜色越深代表调试侧与标杆侧的偏差越大";
const DESC_REAL: &str = "此节点所有输入输出的 tensor 误差, 颜色越深代表调试侧与标杆侧的偏差越大";
const DESC_MD5_N: &str = "与标杆相比, 此节点任意输入输出的md5值不同";
const DESC_MD5_Y: &str = "与标杆相比, 此节点所有输入输出的md5值相同";
const DESC_UNMATCHED: &str = "比对过程中节点未匹配上";

/// The legend (`NodeColors.get_node_colors`) as JSON text.
pub fn node_colors(mode: Mode) -> String {
    let mut entries: Vec<(&str, &str, &str, &str)> = Vec::new();
    let (d1, d2, d3) = match mode {
        Mode::Summary => (DESC_SUMMARY, DESC_SUMMARY, DESC_SUMMARY),
        Mode::RealData => (DESC_REAL, DESC_REAL, DESC_REAL),
        Mode::Md5 => (DESC_MD5_Y, DESC_MD5_N, DESC_MD5_N),
        Mode::Structure | Mode::Build => ("", "", ""),
    };
    if matches!(mode, Mode::Summary | Mode::RealData | Mode::Md5) {
        entries.push(("#FFFCF3", "[0, 0.3]", d1, "pass"));
        entries.push(("#FFDC7F", "[0.3, 0.6]", d2, "warning"));
        entries.push(("#FF704D", "[0.6, 1]", d3, "error"));
    }
    entries.push(("#C7C7C7", "[]", DESC_UNMATCHED, "unmatched node"));
    let mut out = String::from("{");
    for (i, (hex, range, desc, level)) in entries.iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        json_str(hex, &mut out);
        out.push_str(": {\"value\": ");
        out.push_str(range);
        out.push_str(", \"description\": ");
        json_str(desc, &mut out);
        out.push_str(", \"accuracy_level\": ");
        json_str(level, &mut out);
        out.push('}');
    }
    out.push('}');
    out
}

/// The tool tip (`ModeAdapter.get_tool_tip`) as JSON text.
pub fn tool_tip(mode: Mode) -> String {
    let pairs: Vec<(&str, &str)> = match mode {
        Mode::Summary => vec![
            ("Max diff", "NPU与标杆API统计信息比对，最大值的差值"),
            ("Min diff", "NPU与标杆API统计信息比对，最小值的差值"),
            ("Mean diff", "NPU与标杆API统计信息比对，平均值的差值"),
            (
                "L2norm diff",
                "NPU与标杆API统计信息比对，2范数（平方根）的差值",
            ),
        ],
        Mode::Md5 => vec![("md5", "数据MD5信息，用于比较两个数据信息是否完全一致")],
        _ => vec![
            ("Cosine", ""),
            ("EucDist", ""),
            ("MaxAbsErr", ""),
            ("MaxRelativeErr", ""),
            ("One Thousandth Err Ratio", ""),
            ("Five Thousandths Err Ratio", ""),
        ],
    };
    let mut out = String::from("{");
    for (i, (kk, v)) in pairs.iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        json_str(kk, &mut out);
        out.push_str(": ");
        json_str(v, &mut out);
    }
    out.push('}');
    out
}

/// `json.dumps(list_of_ints)`.
pub fn int_list(v: &[i64]) -> String {
    format!(
        "[{}]",
        v.iter()
            .map(|x| x.to_string())
            .collect::<Vec<_>>()
            .join(", ")
    )
}

/// An UPDATE of `matched_distributed`.
#[derive(Debug, Clone, PartialEq)]
pub struct DistUpdate {
    pub data_source: &'static str,
    pub step: i64,
    pub rank: i64,
    pub node_name: String,
    pub matched_distributed: String,
}

type JMap = serde_json::Map<String, serde_json::Value>;

struct DNode {
    name: String,
    input: JMap,
    precision: Option<f64>,
    overflow: Option<&'static str>,
    matched: Option<serde_json::Value>,
}

/// A communication API's counterpart: (the peer's API, the parameter naming the other rank,
/// this side's `communications_type`, point to point).
type CommConfig = (&'static str, &'static str, &'static str, bool);

/// msprobe's table of the communication APIs whose peers are found through a rank parameter.
fn comm_config() -> HashMap<&'static str, CommConfig> {
    HashMap::from([
        ("send", ("recv", "dst", "send", true)),
        ("isend", ("irecv", "dst", "send", true)),
        ("recv", ("send", "src", "receive", true)),
        ("irecv", ("isend", "src", "receive", true)),
        ("broadcast", ("broadcast", "1", "send", false)),
        ("scatter", ("scatter", "src", "send", false)),
        ("gather", ("gather", "dst", "receive", false)),
        ("reduce", ("reduce", "1", "receive", false)),
    ])
}

/// The API of a node name (`Distributed.send.0.forward` → `send`).
fn api_of(name: &str) -> String {
    name.split('.').nth(1).unwrap_or("").to_string()
}

/// The value of the node's input `param` (the other rank of a communication), if not null.
fn target_rank(n: &DNode, param: &str) -> Option<serde_json::Value> {
    let key = format!("{}.input.{param}", n.name);
    match n.input.get(&key) {
        Some(serde_json::Value::Object(m)) => m.get("value").filter(|v| !v.is_null()).cloned(),
        _ => None,
    }
}

/// The node's process group: its ranks and its id, both non-empty.
fn group_info(n: &DNode) -> Option<(Vec<serde_json::Value>, String)> {
    use serde_json::Value;
    let key = format!("{}.input.group", n.name);
    let Some(Value::Object(g)) = n.input.get(&key) else {
        return None;
    };
    let ranks = g.get("group_ranks")?;
    let ranks = match ranks {
        Value::Array(a) if !a.is_empty() => a.clone(),
        Value::String(s) if !s.is_empty() => match serde_json::from_str::<Value>(s) {
            Ok(Value::Array(a)) if !a.is_empty() => a,
            _ => return None,
        },
        _ => return None,
    };
    let gid = match g.get("group_id") {
        Some(Value::String(s)) if !s.is_empty() => s.clone(),
        _ => return None,
    };
    Some((ranks, gid))
}

/// Python's `str()` of a JSON scalar.
fn py_str_of(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// Each rank's nodes, in order, with their `input_data` parsed (rank as text, as msprobe keys it).
type RankNodes = Vec<(String, Vec<DNode>)>;

/// `distributed_analyse` over the distributed nodes of one data source and step, keyed by rank
/// (ranks in export order, nodes in post-order).
pub fn distributed_analyse(
    ranks: &[(i64, Vec<DistNode>)],
    overflow_check: bool,
    data_source: &'static str,
    step: i64,
) -> Vec<DistUpdate> {
    let mut info = dist_nodes(ranks);
    let config = comm_config();
    let analysis = DistAnalysis {
        mapping: unique_ids(&info, &config),
        config,
        overflow_check,
    };
    for ri in 0..info.len() {
        for ni in 0..info[ri].1.len() {
            if info[ri].1[ni].matched.is_some() {
                continue;
            }
            let api = api_of(&info[ri].1[ni].name);
            if api == "batch_isend_irecv" {
                continue;
            }
            let cfg = analysis.config.get(api.as_str()).copied();
            match cfg.filter(|c| c.3) {
                Some(c) => analysis.point_to_point(&mut info, ri, ni, &api, c),
                None => analysis.collective(&mut info, ri, ni, cfg),
            }
        }
    }
    let mut out = Vec::new();
    for (rank, nodes) in &info {
        for n in nodes {
            if let Some(m) = &n.matched {
                out.push(DistUpdate {
                    data_source,
                    step,
                    rank: rank.parse().unwrap_or(0),
                    node_name: n.name.clone(),
                    matched_distributed: python_json(m),
                });
            }
        }
    }
    out
}

/// The nodes of [`distributed_analyse`] whose `input_data` is a JSON object.
fn dist_nodes(ranks: &[(i64, Vec<DistNode>)]) -> RankNodes {
    use serde_json::Value;
    let mut info: RankNodes = Vec::new();
    for (rank, nodes) in ranks {
        let mut v = Vec::new();
        for n in nodes {
            let Ok(Value::Object(input)) = serde_json::from_str::<Value>(&n.input_data) else {
                continue;
            };
            v.push(DNode {
                name: n.name.clone(),
                input,
                precision: n.precision,
                overflow: n.overflow,
                matched: None,
            });
        }
        info.push((rank.to_string(), v));
    }
    info
}

/// Unique ids per rank: node name → `<group or peer><count>` and back.
fn unique_ids(
    info: &RankNodes,
    config: &HashMap<&'static str, CommConfig>,
) -> HashMap<String, HashMap<String, String>> {
    let mut mapping: HashMap<String, HashMap<String, String>> = HashMap::new();
    for (rank, nodes) in info {
        let mut count: HashMap<String, usize> = HashMap::new();
        let m = mapping.entry(rank.clone()).or_default();
        for n in nodes {
            let api = api_of(&n.name);
            if api == "batch_isend_irecv" {
                // Nodes rebuilt from the db carry no batch p2p info: nothing to map.
                continue;
            }
            let gid = match config.get(api.as_str()) {
                Some(c) if c.3 => match target_rank(n, c.1) {
                    Some(t) => format!("{api}rank{}", py_str_of(&t)),
                    None => continue,
                },
                _ => match group_info(n) {
                    Some((_, gid)) => format!("{gid}{api}"),
                    None => continue,
                },
            };
            let c = count.entry(gid.clone()).or_insert(0);
            *c += 1;
            let unique = format!("{gid}\u{FFFD}{c}");
            m.insert(unique.clone(), n.name.clone());
            m.insert(n.name.clone(), unique);
        }
    }
    mapping
}

/// What the matching of [`distributed_analyse`] reads.
struct DistAnalysis {
    config: HashMap<&'static str, CommConfig>,
    /// [`unique_ids`].
    mapping: HashMap<String, HashMap<String, String>>,
    overflow_check: bool,
}

impl DistAnalysis {
    /// The index a peer is shown with: its overflow level or its precision index.
    fn index_text(&self, n: &DNode) -> String {
        if self.overflow_check {
            n.overflow
                .map(str::to_string)
                .unwrap_or_else(|| "Nan".into())
        } else {
            n.precision
                .map(precision_text)
                .unwrap_or_else(|| "Nan".into())
        }
    }

    /// (rank index, node index) of `name` on `rank`.
    fn find(info: &RankNodes, rank: &str, name: &str) -> Option<(usize, usize)> {
        let ri = info.iter().position(|(r, _)| r == rank)?;
        let ni = info[ri].1.iter().position(|n| n.name == name)?;
        Some((ri, ni))
    }

    /// This rank's unique id of `name`.
    fn unique(&self, rank: &str, name: &str) -> String {
        self.mapping
            .get(rank)
            .and_then(|m| m.get(name))
            .cloned()
            .unwrap_or_default()
    }

    /// A point-to-point node (`c`: its row of [`comm_config`]) and its peer, each pointing to the
    /// other when the peer's rank parameter names this rank back.
    fn point_to_point(&self, info: &mut RankNodes, ri: usize, ni: usize, api: &str, c: CommConfig) {
        let rank = info[ri].0.clone();
        let name = info[ri].1[ni].name.clone();
        let unique = self.unique(&rank, &name);
        let Some(t) = target_rank(&info[ri].1[ni], c.1) else {
            return;
        };
        let t = py_str_of(&t);
        let target_unique = unique
            .replace(&format!("rank{t}"), &format!("rank{rank}"))
            .replace(api, c.0);
        let Some(tname) = self
            .mapping
            .get(&t)
            .and_then(|m| m.get(&target_unique))
            .cloned()
        else {
            return;
        };
        let Some((tri, tni)) = Self::find(info, &t, &tname) else {
            return;
        };
        let Some(tc) = self.config.get(c.0).copied() else {
            return;
        };
        let Some(src) = target_rank(&info[tri].1[tni], tc.1) else {
            return;
        };
        if py_str_of(&src) != rank {
            return;
        }
        let m1 = serde_json::json!({"communications_type": c.2, "nodes_info": {t.clone(): [self.index_text(&info[tri].1[tni]), tname.clone()]}});
        let m2 = serde_json::json!({"communications_type": tc.2, "nodes_info": {rank.clone(): [self.index_text(&info[ri].1[ni]), name.clone()]}});
        info[ri].1[ni].matched = Some(m1);
        info[tri].1[tni].matched = Some(m2);
    }

    /// A collective node (`cfg`: its row of [`comm_config`], if any) and the nodes of the same
    /// unique id and group on the group's other ranks.
    fn collective(&self, info: &mut RankNodes, ri: usize, ni: usize, cfg: Option<CommConfig>) {
        let rank = info[ri].0.clone();
        let name = info[ri].1[ni].name.clone();
        let unique = self.unique(&rank, &name);
        let mut comm = "send_receive";
        if let Some(c) = cfg {
            let Some(src) = target_rank(&info[ri].1[ni], c.1) else {
                return;
            };
            if py_str_of(&src) != rank {
                return;
            }
            comm = c.2;
        }
        let Some((group_ranks, gid)) = group_info(&info[ri].1[ni]) else {
            return;
        };
        let mut nodes_info = serde_json::Map::new();
        for tr in group_ranks {
            let t = py_str_of(&tr);
            if t == rank {
                continue;
            }
            let Some(tname) = self.mapping.get(&t).and_then(|m| m.get(&unique)).cloned() else {
                continue;
            };
            let Some((tri, tni)) = Self::find(info, &t, &tname) else {
                continue;
            };
            let Some((_, tgid)) = group_info(&info[tri].1[tni]) else {
                continue;
            };
            if tgid != gid {
                continue;
            }
            nodes_info.insert(
                t.clone(),
                serde_json::json!([self.index_text(&info[tri].1[tni]), tname.clone()]),
            );
            if let Some(c) = cfg {
                let rev = match c.2 {
                    "send" => "receive",
                    "receive" => "send",
                    o => o,
                };
                info[tri].1[tni].matched = Some(
                    serde_json::json!({"communications_type": rev, "nodes_info": {rank.clone(): [self.index_text(&info[ri].1[ni]), name.clone()]}}),
                );
            }
        }
        if !nodes_info.is_empty() {
            info[ri].1[ni].matched =
                Some(serde_json::json!({"communications_type": comm, "nodes_info": nodes_info}));
        }
    }
}

/// `json.dumps` of a serde_json value (", " and ": " separators, ASCII escapes).
pub fn python_json(v: &serde_json::Value) -> String {
    use serde_json::Value;
    let mut out = String::new();
    fn rec(v: &Value, out: &mut String) {
        match v {
            Value::Null => out.push_str("null"),
            Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
            Value::Number(n) => out.push_str(&n.to_string()),
            Value::String(s) => json_str(s, out),
            Value::Array(a) => {
                out.push('[');
                for (i, x) in a.iter().enumerate() {
                    if i > 0 {
                        out.push_str(", ");
                    }
                    rec(x, out);
                }
                out.push(']');
            }
            Value::Object(m) => {
                out.push('{');
                for (i, (kk, x)) in m.iter().enumerate() {
                    if i > 0 {
                        out.push_str(", ");
                    }
                    json_str(kk, out);
                    out.push_str(": ");
                    rec(x, out);
                }
                out.push('}');
            }
        }
    }
    rec(v, &mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The link written from reused ids is `json.dumps` of `Graph::path`, on every node of a
    /// small graph and again with a cycle in it.
    #[test]
    fn link_is_the_path() {
        let construct = br#"{"Module.a.A.forward.0": null, "Module.a.b.B.forward.0": "Module.a.A.forward.0",
            "Torch.add.0.forward": "Module.a.b.B.forward.0", "Torch.mul.1.forward": "Module.a.b.B.forward.0",
            "Module.q\"uote.C.forward.0": "Module.a.A.forward.0"}"#;
        let dump = br#"{"task": "statistics", "level": "mix", "dump_data_dir": null, "data": {}}"#;
        let d = RankDump::parse(
            crate::formats::dump::FileNames::in_dir(""),
            dump,
            construct,
            b"{}",
        )
        .unwrap();
        let mut g = Graph::build(&d).unwrap();
        let check = |g: &Graph| {
            // One writer through ids in order, backwards and shuffled (its kept parent path
            // reused and replaced), against `Graph::path` of each.
            let n = g.nodes.len() as NodeId;
            let order: Vec<NodeId> = (0..n)
                .chain((0..n).rev())
                .chain((0..n * 7).map(|i| (i * 5 + 3) % n))
                .collect();
            let mut links = LinkWriter::default();
            for id in order {
                assert_eq!(links.link(Some(g), Some(id)), json_str_list(&g.path(id)));
                assert_eq!(link_json(Some(g), Some(id)), json_str_list(&g.path(id)));
            }
            assert_eq!(links.link(None, Some(0)), "[]");
            assert_eq!(links.link(Some(g), None), "[]");
        };
        check(&g);
        assert!(g.nodes.len() >= 6, "{}", g.nodes.len());
        let b = g.get("Module.a.b.B.forward.0").unwrap();
        let add = g.get("Torch.add.0.forward").unwrap();
        g.nodes[b as usize].set_parent(Some(add));
        check(&g);
    }
}
