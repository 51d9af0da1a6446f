//! Plain DTOs for the page: a compact, column-wise form of both graphs and per-node details.
//! They are the only `Serialize` types besides the file formats; the core's graph types are not.

use crate::compare::apply_results;
use crate::export::{link_json, node_colors, precision_text, stack_lines, tool_tip};
use crate::graph::{Graph, NodeId};
use crate::items::{formatted_fields, ItemMap, Mode, State};
use crate::run::PairResult;
use serde::Serialize;

/// One graph in pre-order, column-wise (`names`, `parent`, `nodeType`, `precision`,
/// `overflow`, `matched`, `microStep`, `subtreeEnd`). The columns are written straight from the
/// graph when serialized: no copy of the names or of any column is made (a page's graph can
/// have millions of nodes).
#[derive(Debug)]
pub struct GraphDto<'a> {
    g: &'a Graph,
    order: &'a Order,
    other: Option<&'a Order>,
    subtree_end: Vec<u32>,
}

/// A column: a sequence made on demand from an iterator.
struct Column<F>(F);

impl<F, I> Serialize for Column<F>
where
    F: Fn() -> I,
    I: Iterator,
    I::Item: Serialize,
{
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq((self.0)())
    }
}

impl Serialize for GraphDto<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let (g, order, other) = (self.g, self.order, self.other);
        let nodes = || order.ids.iter().map(move |&id| g.node(id));
        let mut m = s.serialize_struct("GraphDto", 8)?;
        m.serialize_field("names", &Column(|| nodes().map(|n| n.name.as_str())))?;
        m.serialize_field(
            "parent",
            &Column(|| nodes().map(|n| n.parent.map(|p| order.index_of[p as usize]).unwrap_or(-1))),
        )?;
        m.serialize_field("nodeType", &Column(|| nodes().map(|n| n.op.value())))?;
        m.serialize_field(
            "precision",
            &Column(|| nodes().map(|n| n.precision.map(|p| p.0))),
        )?;
        m.serialize_field(
            "overflow",
            &Column(|| nodes().map(|n| n.overflow.map(|o| o.as_str()))),
        )?;
        m.serialize_field(
            "matched",
            &Column(|| {
                nodes().map(|n| match (other, n.partner) {
                    (Some(o), Some(p)) => o.index_of.get(p as usize).copied().unwrap_or(-1),
                    _ => -1,
                })
            }),
        )?;
        m.serialize_field(
            "microStep",
            &Column(|| nodes().map(|n| n.micro_step.unwrap_or(0))),
        )?;
        m.serialize_field("subtreeEnd", &self.subtree_end)?;
        m.end()
    }
}

/// The answer to `run`.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RunDto<'a> {
    pub graph_type: &'static str,
    pub task: &'static str,
    pub micro_steps: i64,
    pub node_colors: serde_json::Value,
    pub tool_tip: serde_json::Value,
    pub diagnostics: Vec<crate::error::Diagnostic>,
    pub npu: GraphDto<'a>,
    pub bench: Option<GraphDto<'a>>,
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

fn graph_dto<'a>(g: &'a Graph, order: &'a Order, other: Option<&'a Order>) -> GraphDto<'a> {
    let n = order.ids.len();
    let mut subtree_end = vec![0u32; n];
    // Subtree ends: walk backwards, a node's subtree ends where its last descendant ends (the
    // children of a node are contiguous after it in pre-order).
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
    GraphDto {
        g,
        order,
        other,
        subtree_end,
    }
}

/// The pre-orders of a result's graphs (kept to resolve node indices later).
pub fn orders(res: &PairResult) -> (Order, Option<Order>) {
    let on = Order::of(&res.npu.graph);
    let ob = res.bench.as_ref().map(|b| Order::of(&b.graph));
    (on, ob)
}

/// The `run` answer over the pre-orders of [`orders`] (it borrows the result; serialize it).
pub fn run_dto<'a>(res: &'a PairResult, on: &'a Order, ob: Option<&'a Order>) -> RunDto<'a> {
    let npu = graph_dto(&res.npu.graph, on, ob);
    let bench = res
        .bench
        .as_ref()
        .map(|b| graph_dto(&b.graph, ob.unwrap_or(on), Some(on)));
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
