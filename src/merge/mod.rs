//! Parallel merge (`--rank_size/--tp/--pp/--vpp/--order`): msprobe's `GraphMerger`
//! (`visualization/builder/graph_merger.py`). The graphs of the ranks of one step are merged into
//! one graph per parallel group before they are exported (build) or compared (compare, with fuzzy
//! matching and the parallel-merge checker set).
//!
//! Implemented: the strategy selection and parameter validation, `NoParallelMerger` (the
//! `Apis_Between_Modules_All_Ranks` collections), `TPMerger` (statistics merged over the TP
//! group with the `parallel_merge_info` lines, the RowParallelLinear/ColumnParallelLinear special
//! cases), `PPMerger` (modules split over the stages moved into the main graph, re-ordered and
//! renumbered), `VPPMerger` (then the model chunks folded into chunk 0), `TPPPMerger` (PP
//! within each PP group, then TP across them) and `FullMerger` (the same per DP replica).
//!
//! The merged graph is the main rank's [`Graph`]: nodes taken over from other ranks are appended
//! to its arena, their items (and stacks) copied into the main rank's store; merged statistics
//! are kept in [`Graph::io_override`], the lines in [`Graph::merge_info`].
//!
//! This file holds the merges themselves (rank groups, TP, PP, VPP); `params.rs` the parameters
//! and their checks, `step.rs` a step as the hosts run it, `json.rs` the `--file_type json`
//! writer.

use crate::base::error::{Error, Result};
use crate::formats::dump::RankDump;
use crate::formats::json::{Store, Val};
use crate::formats::keys::k;
use crate::formats::pyfmt::float_repr;
use crate::graph::items::{Item, ItemMap, Num, Py};
use crate::graph::{Graph, Node, NodeId, NodeOp, Stack, ROOT};

mod json;
mod params;
mod step;

pub use json::json_files;
pub use params::{
    default_groups, load_params, validate, Groups, ParallelArgs, ParallelParams, Strategy,
    DEFAULT_ORDER,
};
pub use step::{plan, run_parallel_step, run_step, MergedPair, ParallelStep, SideOf};

/// One rank's built graph, before and after the merge.
#[derive(Debug)]
pub struct RankGraph {
    pub rank: i64,
    /// The rank folder, relative to the dump root.
    pub dir: String,
    pub dump: RankDump,
    pub graph: Graph,
    pub micro_steps: i64,
    /// Nodes taken over from another rank -> that rank (msprobe's `node.rank`; others: `rank`).
    pub origin: crate::base::HashMap<NodeId, i64>,
    /// `node_map` insertion order of nodes (re)inserted by a merge (others: their id, i.e. the
    /// builder's order); a renamed node moves to the end, as in a Python dict.
    pub map_seq: crate::base::HashMap<NodeId, u64>,
    next_seq: u64,
    /// VPP: (chunk-0 node, last-chunk node, outputs?) whose items are the same Python objects in
    /// msprobe, so the node exported second sees them already formatted ([`settle_shared`]).
    pub shared: Vec<(NodeId, NodeId, bool)>,
}

impl RankGraph {
    /// The rank a node comes from.
    fn node_rank(&self, id: NodeId) -> i64 {
        self.origin.get(&id).copied().unwrap_or(self.rank)
    }
    /// Records a (re)insertion into the name index.
    fn touch(&mut self, id: NodeId) {
        self.next_seq += 1;
        self.map_seq.insert(id, (1u64 << 32) + self.next_seq);
    }
    /// The nodes of the name index in `node_map` order.
    fn map_order(&self) -> Vec<NodeId> {
        let mut v: Vec<(u64, NodeId)> = self
            .graph
            .index
            .ids()
            .filter(|id| (*id as usize) < self.graph.nodes.len())
            .map(|id| (self.map_seq.get(&id).copied().unwrap_or(id as u64), id))
            .collect();
        v.sort_unstable();
        v.into_iter().map(|(_, id)| id).collect()
    }
}

impl RankGraph {
    /// `_build_graph_result`: build, page by micro step, overflow check (`-oc`).
    pub fn build(rank: i64, dir: String, dump: RankDump, overflow: bool) -> Result<RankGraph> {
        let mut graph = Graph::build(&dump)?;
        let micro_steps = graph.paging_by_micro_step(None);
        if overflow {
            graph.apply_overflow(&dump);
        }
        Ok(RankGraph {
            rank,
            dir,
            dump,
            graph,
            micro_steps,
            origin: Default::default(),
            map_seq: Default::default(),
            next_seq: 0,
            shared: Vec::new(),
        })
    }
}

/// `GraphMerger(results, param).merge_graph()`: one merged graph per parallel group.
pub fn merge(ranks: Vec<RankGraph>, p: &ParallelParams) -> Result<Vec<RankGraph>> {
    match Strategy::of(p) {
        Strategy::NoParallel => {
            let mut ranks = ranks;
            merge_api_collections(&mut ranks);
            Ok(ranks)
        }
        Strategy::Tp => {
            let groups = tp_groups(&ranks, p)?;
            let mut out = Vec::new();
            for mut members in split_groups(ranks, &groups, "--tp")? {
                merge_api_collections(&mut members);
                out.push(merge_group(members, 0)?);
            }
            Ok(out)
        }
        Strategy::Pp | Strategy::Vpp => {
            let groups = pp_groups(&ranks, p)?;
            let mut out = Vec::new();
            for mut members in split_groups(ranks, &groups, "--pp")? {
                merge_api_collections(&mut members);
                out.push(merge_group(members, p.vpp.max(1))?);
            }
            Ok(out)
        }
        Strategy::TpPp => {
            // `TPPPMerger`: API collections of all ranks, PP within each PP group, then TP over
            // the PP results with the TP groups' rank mapping.
            let pp = pp_groups(&ranks, p)?;
            let tp = tp_groups(&ranks, p)?;
            let mapping: Vec<(i64, Vec<i64>)> = tp
                .iter()
                .skip(1)
                .filter_map(|g| g.split_first().map(|(f, rest)| (*f, rest.to_vec())))
                .collect();
            let mut ranks = ranks;
            merge_api_collections(&mut ranks);
            let mut pp_results = Vec::new();
            for members in split_groups(ranks, &pp, "--pp")? {
                pp_results.push(merge_group(members, p.vpp.max(1))?);
            }
            let mut res = merge_group_mapped(pp_results, 0, mapping)?;
            sort_merged_api_collection(&mut res.graph);
            Ok(vec![res])
        }
        Strategy::Full => {
            // `FullMerger`: PP within each PP group (with its API collections), then TP within
            // each TP group over the PP results: one graph per DP replica.
            let pp = pp_groups(&ranks, p)?;
            let tp = tp_groups(&ranks, p)?;
            if tp.is_empty() {
                return Err(Error::input(
                    "--tp",
                    "Graph merged error, and tp_groups is [].",
                ));
            }
            let mapping: Vec<(i64, Vec<i64>)> = tp
                .iter()
                .skip(1)
                .filter_map(|g| g.split_first().map(|(f, rest)| (*f, rest.to_vec())))
                .collect();
            let mut pp_results: Vec<RankGraph> = Vec::new();
            for mut members in split_groups(ranks, &pp, "--pp")? {
                merge_api_collections(&mut members);
                pp_results.push(merge_group(members, p.vpp.max(1))?);
            }
            let mut out = Vec::new();
            for g in &tp {
                let mut list = Vec::new();
                for r in g {
                    if let Some(i) = pp_results.iter().position(|x| x.rank == *r) {
                        list.push(pp_results.remove(i));
                    }
                }
                if list.is_empty() {
                    continue;
                }
                merge_api_collections(&mut list);
                let mut res = merge_group_mapped(list, 0, mapping.clone())?;
                sort_merged_api_collection(&mut res.graph);
                out.push(res);
            }
            Ok(out)
        }
    }
}

/// `split_graph_results_by_groups`: the ranks of each group, in the group's order.
fn split_groups(ranks: Vec<RankGraph>, groups: &Groups, flag: &str) -> Result<Vec<Vec<RankGraph>>> {
    let mut slots: Vec<Option<RankGraph>> = ranks.into_iter().map(Some).collect();
    let mut out = Vec::new();
    for g in groups {
        let mut members = Vec::new();
        for r in g {
            let pos = slots
                .iter()
                .position(|s| s.as_ref().is_some_and(|x| x.rank == *r));
            match pos.and_then(|i| slots[i].take()) {
                Some(x) => members.push(x),
                None => {
                    return Err(Error::input(
                        flag,
                        format!("the parallel group {g:?} names rank {r}, which is not among the dumped ranks (or is in two groups)"),
                    ))
                }
            }
        }
        if !members.is_empty() {
            out.push(members);
        }
    }
    Ok(out)
}

/// `PPMerger.get_groups`: chains of the first send/isend `dst` (or batch_isend_irecv isend peer)
/// of each rank; the default groups if there are none or the first chain's length is not pp.
fn pp_groups(ranks: &[RankGraph], p: &ParallelParams) -> Result<Groups> {
    let mut mapping: Vec<(i64, i64)> = Vec::new();
    for r in ranks {
        let mut target: Option<i64> = None;
        for (id, n) in r.graph.nodes.iter().enumerate() {
            let name = r.graph.name_of(n);
            if r.graph.get(name) != Some(id as NodeId) || !name.starts_with("Distributed.") {
                continue;
            }
            if name.contains(".batch_isend_irecv.") {
                for (op, peer, _) in crate::graph::batch_p2p_info(&r.dump, &r.graph, id as NodeId) {
                    let peer = peer.num(&r.dump.store);
                    let is_isend = op.as_str(&r.dump.store) == Some("isend");
                    if let Some(Num::Int(t)) = peer {
                        if t as i64 != r.rank && is_isend {
                            target = Some(t as i64);
                            break;
                        }
                    }
                }
            } else if name.contains(".send.") || name.contains(".isend.") {
                let (input, _) = r.graph.io(&r.dump, id as NodeId);
                let key = format!("{name}.input.dst");
                let dst = input
                    .iter()
                    .find(|(kk, _)| *kk == key)
                    .and_then(|(_, it)| it.get(k::VALUE))
                    .and_then(|v| v.num(&r.dump.store));
                if let Some(Num::Int(d)) = dst {
                    target = Some(d as i64);
                    break;
                }
            }
            if target.is_some() {
                break;
            }
        }
        if let Some(t) = target {
            if let Some(slot) = mapping.iter_mut().find(|(k, _)| *k == r.rank) {
                slot.1 = t;
            } else {
                mapping.push((r.rank, t));
            }
        }
    }
    // `_trace_p2p_mapping`
    let mut visited: Vec<i64> = Vec::new();
    let mut groups: Groups = Vec::new();
    for (start, _) in &mapping {
        if visited.contains(start) {
            continue;
        }
        let mut chain = Vec::new();
        let mut cur = *start;
        while let Some((_, next)) = mapping.iter().find(|(k, _)| *k == cur) {
            if visited.contains(&cur) {
                break;
            }
            chain.push(cur);
            visited.push(cur);
            cur = *next;
        }
        if !chain.is_empty() {
            groups.push(chain);
        }
    }
    if groups.is_empty() || groups[0].len() as i64 != p.pp {
        return Ok(default_groups(p)?.1);
    }
    Ok(groups)
}

/// `TPMerger.get_groups`: the `group_ranks` of the first all_reduce/reduce_scatter of each rank,
/// else (or if their size is not tp) the default groups.
fn tp_groups(ranks: &[RankGraph], p: &ParallelParams) -> Result<Vec<Vec<i64>>> {
    let mut groups: Vec<Vec<i64>> = Vec::new();
    for r in ranks {
        for (id, n) in r.graph.nodes.iter().enumerate() {
            let name = r.graph.name_of(n);
            if r.graph.get(name) != Some(id as NodeId) {
                continue;
            }
            if !(name.contains("reduce_scatter") || name.contains("all_reduce")) {
                continue;
            }
            let (input, _) = r.graph.io(&r.dump, id as NodeId);
            let key = format!("{name}.input.group");
            let ranks = input
                .iter()
                .find(|(kk, _)| *kk == key)
                .and_then(|(_, it)| it.get(k::GROUP_RANKS))
                .and_then(|v| int_list(&r.dump.store, v));
            if let Some(g) = ranks {
                if !g.is_empty() && !groups.contains(&g) {
                    groups.push(g);
                }
            }
            break;
        }
    }
    if groups.is_empty() || groups[0].len() as i64 != p.tp {
        return Ok(default_groups(p)?.0);
    }
    Ok(groups)
}

fn int_list(store: &Store, v: &Py) -> Option<Vec<i64>> {
    let Py::V(l @ Val::List { .. }) = v else {
        return None;
    };
    store
        .list(*l)
        .iter()
        .map(|x| match x {
            Val::Int(i) => Some(i),
            _ => None,
        })
        .collect()
}

const ABM: &str = "Apis_Between_Modules";
const ABM_ALL: &str = "Apis_Between_Modules_All_Ranks";

/// `merge_graph_api_collection`: each root `Apis_Between_Modules.k` of the main rank becomes
/// `Apis_Between_Modules_All_Ranks.j` holding `Apis_Between_Modules_Rank{r}.k` of every rank that
/// has it; the APIs of the other ranks get `_rank{r}` after their API name.
fn merge_api_collections(ranks: &mut [RankGraph]) {
    let Some((main, others)) = ranks.split_first_mut() else {
        return;
    };
    let root_children = main.graph.nodes[ROOT as usize].children.clone();
    let mut new_children = Vec::with_capacity(root_children.len());
    let mut counter = 0usize;
    for c in root_children {
        let name = main.graph.name(c).to_string();
        if name.starts_with(ABM_ALL) {
            // Already merged (FullMerger's second round): the other graphs' per-rank collections
            // join this one.
            new_children.push(c);
            for o in others.iter() {
                let Some(oc) = o.graph.get(&name) else {
                    continue;
                };
                for sub in o.graph.nodes[oc as usize].children.clone() {
                    main.graph.dedupe_names = true;
                    let copy = adopt_plain(main, o, sub, c, 0);
                    main.graph.nodes[c as usize].children.push(copy);
                }
            }
            continue;
        }
        if !name.starts_with(ABM) {
            new_children.push(c);
            continue;
        }
        let all_name = format!("{ABM_ALL}.{counter}");
        counter += 1;
        let mut all = main.graph.new_node(&all_name, NodeOp::ApiCollection);
        all.set_parent(Some(ROOT));
        all.children = vec![c];
        let all_id = main.graph.nodes.len() as NodeId;
        main.graph.nodes.push(all);
        main.graph.index_insert(all_id);
        main.touch(all_id);
        new_children.push(all_id);
        let seg = name.rsplit('.').next().unwrap_or("").to_string();
        let renamed = format!("{ABM}_Rank{}.{seg}", main.rank);
        main.graph.index_remove(&name);
        main.graph.set_name(c, &renamed);
        main.graph.nodes[c as usize].set_parent(Some(all_id));
        main.graph.index_insert(c);
        main.touch(c);
        for o in others.iter() {
            let Some(oc) = o.graph.get(&name) else {
                continue;
            };
            let coll = adopt(
                main,
                o,
                oc,
                Some(all_id),
                Some(format!("{ABM}_Rank{}.{seg}", o.rank)),
                0,
            );
            main.graph.nodes[all_id as usize].children.push(coll);
        }
    }
    main.graph.nodes[ROOT as usize].children = new_children;
}

/// `sort_merged_api_collection`: the per-rank collections in rank order.
fn sort_merged_api_collection(g: &mut Graph) {
    let rank_of = |name: &str| -> Option<i64> {
        let p = name.find("_Rank")?;
        let d: String = name[p + 5..]
            .chars()
            .take_while(|c| c.is_ascii_digit())
            .collect();
        d.parse().ok()
    };
    for c in g.nodes[ROOT as usize].children.clone() {
        if g.nodes[c as usize].op == NodeOp::ApiCollection && g.name(c).starts_with(ABM_ALL) {
            let mut kids = g.nodes[c as usize].children.clone();
            kids.sort_by_key(|k| rank_of(g.name(*k)));
            g.nodes[c as usize].children = kids;
        }
    }
}

/// Copies node `id` of graph `o` (and its subtree) unrenamed into the main graph under `parent`;
/// it and its children are indexed (`node_map[id] = node`: a new name goes to the end).
fn adopt_plain(
    main: &mut RankGraph,
    o: &RankGraph,
    id: NodeId,
    parent: NodeId,
    depth: usize,
) -> NodeId {
    // Iterative pre-order (a crafted dump may nest deeper than the call stack allows).
    let mut top = ROOT;
    let mut stack = vec![(id, parent, depth, true)];
    while let Some((id, parent, depth, is_top)) = stack.pop() {
        let nid = adopt_plain_one(main, o, id, parent, depth);
        if is_top {
            top = nid;
        } else {
            main.graph.nodes[parent as usize].children.push(nid);
        }
        for c in o.graph.nodes[id as usize].children.iter().rev() {
            stack.push((*c, nid, depth + 1, false));
        }
    }
    top
}

/// Node `id` of another rank copied for the main graph: without links, entry or verdict (its
/// items go to `io_override`), its stack value moved into the main store.
/// Node `id` of rank `o`, copied for the main graph: its name (its text: a name is an id in its
/// graph's names) and stack in the main rank's, its links and data cleared.
fn node_copy(o: &RankGraph, id: NodeId, main: &mut RankGraph, parent: Option<NodeId>) -> Node {
    let src = &o.graph.nodes[id as usize];
    let stack = match o.graph.stack(src.stack) {
        Stack::Val(v) => Stack::Val(transplant(&o.dump.store, v, &mut main.dump.store)),
        s => s,
    };
    let mut n = src.clone();
    n.stack = main.graph.stack_id(stack);
    n.name = main.graph.names.intern(o.graph.name(id));
    n.set_parent(parent);
    n.children = Vec::new();
    n.set_entry(None);
    n.set_partner(None);
    n.set_precision(None);
    n.modified = false;
    n
}

fn adopt_plain_one(
    main: &mut RankGraph,
    o: &RankGraph,
    id: NodeId,
    parent: NodeId,
    depth: usize,
) -> NodeId {
    let n = node_copy(o, id, main, Some(parent));
    let io = io_copy(o, id, &mut main.dump.store, None);
    let nid = push_copy(main, o, id, n, io);
    if depth <= 1 && main.graph.index_insert(nid).is_none() {
        main.touch(nid);
    }
    nid
}

/// Copies node `id` of rank `o` (and its subtree) into the main graph under `parent`.
/// `depth` 0 is the collection (renamed to `name`), 1 its APIs (`_rank{r}` added, indexed).
fn adopt(
    main: &mut RankGraph,
    o: &RankGraph,
    id: NodeId,
    parent: Option<NodeId>,
    name: Option<String>,
    depth: usize,
) -> NodeId {
    // Iterative pre-order (a crafted dump may nest deeper than the call stack allows).
    let mut top = ROOT;
    let mut stack = vec![(id, parent, name, depth, true)];
    while let Some((id, parent, name, depth, is_top)) = stack.pop() {
        let nid = adopt_one(main, o, id, parent, name, depth);
        if is_top {
            top = nid;
        } else if let Some(p) = parent {
            main.graph.nodes[p as usize].children.push(nid);
        }
        for c in o.graph.nodes[id as usize].children.iter().rev() {
            stack.push((*c, Some(nid), None, depth + 1, false));
        }
    }
    top
}

fn adopt_one(
    main: &mut RankGraph,
    o: &RankGraph,
    id: NodeId,
    parent: Option<NodeId>,
    name: Option<String>,
    depth: usize,
) -> NodeId {
    let old = o.graph.name(id).to_string();
    let new_name = match (name, depth) {
        (Some(n), _) => n,
        (None, 1) => {
            let mut parts: Vec<String> = old.split('.').map(str::to_string).collect();
            if parts.len() > 1 {
                parts[1].push_str(&format!("_rank{}", o.rank));
            }
            parts.join(".")
        }
        (None, _) => old.clone(),
    };
    let mut n = node_copy(o, id, main, parent);
    n.name = main.graph.names.intern(&new_name);
    let rename = (depth == 1).then_some((old.as_str(), new_name.as_str()));
    let io = io_copy(o, id, &mut main.dump.store, rename);
    let nid = push_copy(main, o, id, n, io);
    if depth <= 1 {
        main.graph.index_insert(nid);
        main.touch(nid);
    }
    nid
}

/// The items of node `id` of another rank, copied into `to`; with `rename` = (old, new), the
/// node's old name is replaced by its new one in their keys and full op names.
fn io_copy(
    o: &RankGraph,
    id: NodeId,
    to: &mut Store,
    rename: Option<(&str, &str)>,
) -> (ItemMap, ItemMap) {
    let (input, output) = o.graph.io(&o.dump, id);
    let mut conv = |m: ItemMap| -> ItemMap {
        m.into_iter()
            .map(|(key, it)| {
                let mut it = copy_item(&o.dump.store, &it, to);
                let key = match rename {
                    Some((old, new)) => {
                        it.full_op_name = it.full_op_name.replace(old, new);
                        key.replace(old, new)
                    }
                    None => key,
                };
                (key, it)
            })
            .collect()
    };
    (conv(input), conv(output))
}

/// Appends `n` (a copy of node `id` of rank `o`) to the main graph with its rank of origin and
/// its copied items; returns its id (not indexed: the callers differ in that).
fn push_copy(
    main: &mut RankGraph,
    o: &RankGraph,
    id: NodeId,
    n: Node,
    io: (ItemMap, ItemMap),
) -> NodeId {
    let nid = main.graph.nodes.len() as NodeId;
    main.graph.nodes.push(n);
    main.origin.insert(nid, o.node_rank(id));
    if !io.0.is_empty() || !io.1.is_empty() {
        main.graph.io_override.insert(nid, io);
    }
    nid
}

/// A value of one store, copied into another.
fn transplant(src: &Store, v: Val, dst: &mut Store) -> Val {
    match v {
        Val::Str(r) => Val::Str(dst.push_str(src.str(r))),
        Val::BigInt(r) => Val::BigInt(dst.push_str(src.str(r))),
        Val::List { .. } => {
            let items: Vec<Val> = src
                .list(v)
                .iter()
                .map(|x| transplant(src, x, dst))
                .collect();
            dst.new_list(&items)
        }
        Val::Obj { .. } => {
            let items: Vec<_> = src
                .obj(v)
                .iter()
                .map(|(kk, x)| {
                    let key = dst.intern_key(src.key(kk));
                    (key, transplant(src, x, dst))
                })
                .collect();
            dst.new_obj(&items)
        }
        other => other,
    }
}

fn copy_item(src: &Store, it: &Item, dst: &mut Store) -> Item {
    Item {
        fields: it
            .fields
            .iter()
            .map(|(kk, v)| {
                let key = dst.intern_key(src.key(*kk));
                let v = match v {
                    Py::V(x) => Py::V(transplant(src, *x, dst)),
                    other => other.clone(),
                };
                (key, v)
            })
            .collect(),
        state: it.state,
        full_op_name: it.full_op_name.clone(),
    }
}

const STATS: [(&str, crate::formats::json::KeyId); 4] = [
    ("Max", k::MAX),
    ("Min", k::MIN),
    ("Mean", k::MEAN),
    ("Norm", k::NORM),
];

const DTYPES: [&str; 10] = [
    "torch.int8",
    "torch.int32",
    "torch.int64",
    "torch.bfloat16",
    "torch.float16",
    "torch.float32",
    "torch.float64",
    "Float16",
    "Float32",
    "BFloat16",
];

const TP_MERGED_INFO: &str =
    "This data is the merged data after tensor parallelism(TP), and the data is merged from rank ";

/// The statistics of one item as msprobe's merge reads them.
#[derive(Clone, Debug)]
struct Param {
    dtype: Option<String>,
    nums: [Option<Num>; 4],
    reprs: [String; 4],
}

fn param(store: &Store, it: &Item) -> Param {
    let get = |key| it.get(key).cloned().unwrap_or(Py::None);
    Param {
        dtype: get(k::DTYPE).as_str(store).map(str::to_string),
        nums: STATS.map(|(_, kk)| get(kk).num(store)),
        reprs: STATS.map(|(_, kk)| get(kk).to_py_str(store)),
    }
}

impl Param {
    fn mergeable(&self) -> bool {
        self.dtype.as_deref().is_some_and(|d| DTYPES.contains(&d))
    }
}

/// `_compare_value_same`.
fn value_same(a: Option<Num>, b: Option<Num>, uncertain: bool) -> bool {
    let (Some(a), Some(b)) = (a, b) else {
        return true;
    };
    if !uncertain {
        return num_eq(a, b);
    }
    let (x, y) = (a.as_f64(), b.as_f64());
    let diff = (x - y).abs();
    if diff.is_nan() {
        return x.is_nan() && y.is_nan();
    }
    if diff.is_infinite() {
        return x.is_infinite() && y.is_infinite();
    }
    if x == 0.0 {
        diff < 1e-6
    } else {
        (diff / x).abs() < 1e-6
    }
}

fn num_eq(a: Num, b: Num) -> bool {
    match (a, b) {
        (Num::Int(x), Num::Int(y)) => x == y,
        _ => a.as_f64() == b.as_f64(),
    }
}

fn num_gt(a: Num, b: Num) -> bool {
    match (a, b) {
        (Num::Int(x), Num::Int(y)) => x > y,
        _ => a.as_f64() > b.as_f64(),
    }
}

/// `compare_param_same`.
fn param_same(a: &Param, b: &Param, uncertain: bool) -> bool {
    value_same(a.nums[0], b.nums[0], false)
        && value_same(a.nums[1], b.nums[1], false)
        && value_same(a.nums[2], b.nums[2], uncertain)
        && value_same(a.nums[3], b.nums[3], uncertain)
}

/// Where a main-graph item is: (node, output side, index in its map).
type Slot = (NodeId, bool, usize);

/// One entry of `compare_node_param_data`'s result: the main item and the other ranks' params.
struct ToMerge {
    key: String,
    slot: Slot,
    params: Vec<Param>,
}

struct Tp<'a> {
    main: &'a mut RankGraph,
    others: &'a [RankGraph],
    /// PP: main nodes judged split (`is_pp_merged`).
    pp_merged: std::collections::HashSet<NodeId>,
    /// PP: `pp_index` of re-ordered nodes.
    pp_index: crate::base::HashMap<NodeId, i64>,
    /// PP: per other rank, its nodes moved into the main graph -> their copy.
    moved: Vec<crate::base::HashMap<NodeId, NodeId>>,
    /// TP after PP: `tp_merge_mapping` (first rank of a TP group -> the other ranks).
    mapping: Vec<(i64, Vec<i64>)>,
}

/// `merge_tp_graphs` (`pp` 0) or `merge_pp_graphs` (`pp` = vpp: 1 PP, > 1 VPP) of one group.
fn merge_group(members: Vec<RankGraph>, pp: i64) -> Result<RankGraph> {
    merge_group_mapped(members, pp, Vec::new())
}

fn merge_group_mapped(
    mut members: Vec<RankGraph>,
    pp: i64,
    mapping: Vec<(i64, Vec<i64>)>,
) -> Result<RankGraph> {
    let rest = members.split_off(1.min(members.len()));
    let Some(mut main) = members.pop() else {
        return Err(Error::input("--rank_size", "an empty parallel group"));
    };
    if rest.is_empty() {
        return Ok(main);
    }
    let mut m = Tp {
        main: &mut main,
        others: &rest,
        pp_merged: Default::default(),
        pp_index: Default::default(),
        moved: vec![Default::default(); rest.len()],
        mapping,
    };
    if pp > 0 {
        m.run_pp();
        if pp > 1 {
            m.merge_vpp_data(pp);
            m.merge_vpp_chunks(pp);
        }
    } else {
        m.run();
    }
    Ok(main)
}

impl Tp<'_> {
    fn g(&self) -> &Graph {
        &self.main.graph
    }

    /// Loads a main node's items into the override table (the working copy).
    fn load(&mut self, id: NodeId) {
        if !self.main.graph.io_override.contains_key(&id) {
            let io = self.main.graph.io(&self.main.dump, id);
            self.main.graph.io_override.insert(id, io);
        }
    }

    fn map(&mut self, id: NodeId, out: bool) -> &mut ItemMap {
        self.load(id);
        let io = self
            .main
            .graph
            .io_override
            .entry(id)
            .or_insert_with(|| (Vec::new(), Vec::new()));
        if out {
            &mut io.1
        } else {
            &mut io.0
        }
    }

    fn info(&mut self, id: NodeId) -> &mut Vec<String> {
        self.main.graph.merge_info.entry(id).or_default()
    }

    fn has_info(&self, id: NodeId) -> bool {
        self.g().merge_info.get(&id).is_some_and(|v| !v.is_empty())
    }

    fn in_node_map(&self, id: NodeId) -> bool {
        self.g().get(self.g().name(id)) == Some(id)
    }

    fn run(&mut self) {
        for id in self.main.map_order() {
            if !self.in_node_map(id) {
                continue;
            }
            let n = &self.g().nodes[id as usize];
            let Some(p) = n.parent() else { continue };
            let pn = &self.g().nodes[p as usize];
            let pname = self.g().name(p);
            if pn.op != NodeOp::Module
                || pname == "clip_grad"
                || pname == "optimizer"
                || self.g().name(id).starts_with("Distributed")
                || self.has_info(id)
            {
                continue;
            }
            self.matmul_reduce(id);
            let others = self.need_merge(id);
            let (pin, pout) = self.param_data(id, &others, true);
            if !pin.is_empty() || !pout.is_empty() {
                let line = self.ranks_line(id, &others);
                self.info(id).push(line);
                let mut lines = self.merge_params(pin);
                lines.extend(self.merge_params(pout));
                self.info(id).extend(lines);
            }
        }
        for id in self.main.map_order() {
            if self.in_node_map(id) {
                self.column_row(id);
            }
        }
    }

    fn ranks_line(&self, id: NodeId, others: &[(usize, NodeId)]) -> String {
        let mut ranks = vec![self.main.node_rank(id).to_string()];
        ranks.extend(
            others
                .iter()
                .map(|(r, oid)| self.others[*r].node_rank(*oid).to_string()),
        );
        format!("{TP_MERGED_INFO}[{}].", ranks.join(", "))
    }

    /// `_get_need_merge_node`: the same name (with a TP mapping, `_rank{r}.` replaced by the
    /// mapped rank's) with the same ancestors in every other rank, else none.
    fn need_merge(&self, id: NodeId) -> Vec<(usize, NodeId)> {
        let g = self.g();
        let own = g.name(id);
        let mut names: Vec<String> = vec![own.to_string(); self.others.len()];
        if let (Some(r), false) = (rank_tag(own), self.mapping.is_empty()) {
            let Some((_, targets)) = self.mapping.iter().find(|(k, _)| *k == r) else {
                return Vec::new();
            };
            if targets.len() != self.others.len() {
                return Vec::new();
            }
            names = targets.iter().map(|t| rank_tag_sub(own, *t)).collect();
        }
        let anc: Vec<&str> = g.ancestors(id).iter().map(|a| g.name(*a)).collect();
        let mut out = Vec::new();
        for (r, o) in self.others.iter().enumerate() {
            let Some(oid) = o.graph.get(&names[r]) else {
                return Vec::new();
            };
            let oanc: Vec<&str> = o
                .graph
                .ancestors(oid)
                .iter()
                .map(|a| o.graph.name(*a))
                .collect();
            if oanc != anc {
                return Vec::new();
            }
            out.push((r, oid));
        }
        out
    }

    /// `compare_node_param_data`: (inputs, outputs) to merge, keyed without the node name.
    fn param_data(
        &mut self,
        id: NodeId,
        others: &[(usize, NodeId)],
        compare_data: bool,
    ) -> (Vec<ToMerge>, Vec<ToMerge>) {
        if others.is_empty() {
            return (Vec::new(), Vec::new());
        }
        self.load(id);
        let name = self.g().name(id).to_string();
        let prefix = format!("{name}.");
        let other_io: Vec<(usize, ItemMap, ItemMap, String)> = others
            .iter()
            .map(|(r, oid)| {
                let o = &self.others[*r];
                let (i, out) = o.graph.io(&o.dump, *oid);
                (*r, i, out, o.graph.name(*oid).to_string())
            })
            .collect();
        let mut res = (Vec::new(), Vec::new());
        for out in [false, true] {
            let main_map = self.map(id, out).clone();
            let dst: &mut Vec<ToMerge> = if out { &mut res.1 } else { &mut res.0 };
            for (idx, (key, item)) in main_map.iter().enumerate() {
                let mp = param(&self.main.dump.store, item);
                if !mp.mergeable() {
                    continue;
                }
                let mut same = compare_data;
                let mut params = vec![mp.clone()];
                for (r, oi, oo, oname) in &other_io {
                    let om = if out { oo } else { oi };
                    let store = &self.others[*r].dump.store;
                    let okey = if *oname != name {
                        key.replace(&name, oname)
                    } else {
                        key.clone()
                    };
                    let op = match om.iter().find(|(kk, _)| *kk == okey) {
                        Some((_, it)) => param(store, it),
                        None => Param {
                            dtype: None,
                            nums: [None; 4],
                            reprs: Default::default(),
                        },
                    };
                    if !op.mergeable() {
                        break;
                    }
                    if compare_data && !param_same(&mp, &op, true) {
                        same = false;
                    }
                    params.push(op);
                }
                if !same {
                    let k2 = key.replace(&prefix, "");
                    let entry = ToMerge {
                        key: k2.clone(),
                        slot: (id, out, idx),
                        params,
                    };
                    if let Some(slot) = dst.iter_mut().find(|t| t.key == k2) {
                        *slot = entry;
                    } else {
                        dst.push(entry);
                    }
                }
            }
        }
        res
    }

    /// `_merge_params`: merges into the main items, returns the formula lines.
    fn merge_params(&mut self, list: Vec<ToMerge>) -> Vec<String> {
        let mut lines = Vec::new();
        for t in list {
            if t.params.len() < 2 {
                continue;
            }
            let dtype = t.params[0].dtype.clone().unwrap_or_default();
            for (si, (stat, key)) in STATS.iter().enumerate() {
                if t.params.iter().any(|p| p.nums[si].is_none()) {
                    continue;
                }
                let nums: Vec<Num> = t.params.iter().filter_map(|p| p.nums[si]).collect();
                let reprs: Vec<&str> = t.params.iter().map(|p| p.reprs[si].as_str()).collect();
                let n = nums.len();
                let (value, formula) = match si {
                    0 => {
                        let mut cur = nums[0];
                        for x in &nums[1..] {
                            if num_gt(*x, cur) {
                                cur = *x;
                            }
                        }
                        (cur, format!("max({})", reprs.join(", ")))
                    }
                    1 => {
                        let mut cur = nums[0];
                        for x in &nums[1..] {
                            if num_gt(cur, *x) {
                                cur = *x;
                            }
                        }
                        (cur, format!("min({})", reprs.join(", ")))
                    }
                    2 => {
                        let mut cur = nums[0];
                        for x in &nums[1..] {
                            cur = match (cur, *x) {
                                (Num::Int(a), Num::Int(b)) => Num::Int(a.saturating_add(b)),
                                (a, b) => Num::Float(a.as_f64() + b.as_f64()),
                            };
                        }
                        let mean = match cur {
                            Num::Int(a) => int_div(a, n as i128),
                            Num::Float(f) => f / n as f64,
                        };
                        (Num::Float(mean), format!("({}) / {n}", reprs.join(" + ")))
                    }
                    _ => {
                        let mut sum = 0.0f64;
                        for x in &nums {
                            let v = x.as_f64();
                            sum += v * v;
                        }
                        let parts: Vec<String> =
                            reprs.iter().map(|r| format!("{r} ** 2")).collect();
                        (
                            Num::Float(sum.sqrt()),
                            format!("({}) ** 0.5", parts.join(" + ")),
                        )
                    }
                };
                let value = match value {
                    Num::Float(f) => Num::Float(cast_to_dtype(f, &dtype)),
                    v => v,
                };
                let (py, text) = match value {
                    Num::Int(i) => (
                        i64::try_from(i).map(Py::I).unwrap_or(Py::F(i as f64)),
                        i.to_string(),
                    ),
                    Num::Float(f) => (Py::F(f), float_repr(f)),
                };
                let (nid, out, idx) = t.slot;
                if let Some((_, it)) = self.map(nid, out).get_mut(idx) {
                    it.set(*key, py);
                }
                lines.push(format!(
                    "The {stat} value merging method for {} is: {formula} = {text}",
                    t.key
                ));
            }
        }
        lines
    }

    fn item(&mut self, id: NodeId, out: bool, idx: usize) -> Option<Item> {
        self.map(id, out).get(idx).map(|(_, it)| it.clone())
    }

    /// `_handle_tp_matmul_reduce`: in a RowParallelLinear forward or ColumnParallelLinear backward,
    /// the matmul's output becomes the following all_reduce/reduce_scatter's output.
    fn matmul_reduce(&mut self, id: NodeId) {
        let n = &self.g().nodes[id as usize];
        if n.op != NodeOp::Module {
            return;
        }
        let splits: Vec<&str> = self.g().name(id).split('.').collect();
        if splits.len() < 4 {
            return;
        }
        let (dir, class) = (splits[splits.len() - 2], splits[splits.len() - 3]);
        let row_fwd = dir == "forward" && class.contains("RowParallelLinear");
        let col_bwd = dir == "backward" && class.contains("ColumnParallelLinear");
        if !row_fwd && !col_bwd {
            return;
        }
        let mut matmuls = Vec::new();
        let mut reduces = Vec::new();
        for c in &n.children {
            let cn = self.g().name(*c);
            if cn.contains("matmul") {
                matmuls.push(*c);
            }
            if cn.contains("_reduce_scatter_base")
                || cn.contains("reduce_scatter_tensor")
                || cn.contains("all_reduce")
            {
                reduces.push(*c);
            }
        }
        if matmuls.is_empty() || reduces.is_empty() {
            return;
        }
        for m in matmuls {
            if self.map(m, true).is_empty() {
                continue;
            }
            let Some(mo) = self.item(m, true, 0) else {
                continue;
            };
            let mo_p = param(&self.main.dump.store, &mo);
            for ri in 0..reduces.len() {
                let r = reduces[ri];
                if self.map(r, true).is_empty() {
                    continue;
                }
                let all_reduce = self.g().name(r).contains("all_reduce");
                let in_idx = if all_reduce { 0 } else { 1 };
                let Some(rin) = self.item(r, false, in_idx) else {
                    continue;
                };
                if !param_same(&mo_p, &param(&self.main.dump.store, &rin), false) {
                    continue;
                }
                let others = self.need_merge(m);
                let (pin, _) = self.param_data(m, &others, true);
                if !pin.is_empty() {
                    let line = self.ranks_line(m, &others);
                    self.info(m).push(line);
                    let lines = self.merge_params(pin);
                    self.info(m).extend(lines);
                }
                let Some(rout) = self.item(r, true, 0) else {
                    break;
                };
                if let Some((_, it)) = self.map(m, true).get_mut(0) {
                    for (_, key) in STATS {
                        it.set(key, rout.get_or_none(key));
                    }
                }
                let name = if rout.full_op_name.is_empty() {
                    self.g().name(r).to_string()
                } else {
                    rout.full_op_name.clone()
                };
                self.info(m)
                    .push(format!("The output of this data is merged from {name}"));
                reduces.remove(ri);
                break;
            }
        }
    }

    /// `_merge_tp_megatron_column_row_parallel`: the nodes from a ColumnParallelLinear forward to
    /// the last RowParallelLinear among its siblings are merged unconditionally.
    fn column_row(&mut self, id: NodeId) {
        let n = &self.g().nodes[id as usize];
        if n.op != NodeOp::Module || self.has_info(id) {
            return;
        }
        let splits: Vec<&str> = self.g().name(id).split('.').collect();
        if splits.len() < 4 {
            return;
        }
        if !(splits[splits.len() - 2] == "forward"
            && splits[splits.len() - 3].contains("ColumnParallelLinear"))
        {
            return;
        }
        let Some(p) = n.parent() else { return };
        let siblings = &self.g().nodes[p as usize].children;
        let (mut start, mut end) = (None, None);
        for (i, s) in siblings.iter().enumerate() {
            let sn = self.g().name(*s);
            if sn.contains(self.g().name(id)) {
                start = Some(i);
            } else if sn.contains("RowParallelLinear") {
                end = Some(i);
            }
        }
        let (Some(start), Some(end)) = (start, end) else {
            return;
        };
        if end < start + 1 {
            return;
        }
        let span: Vec<NodeId> = siblings[start..=end].to_vec();
        let (first, last) = (span[0], span[span.len() - 1]);
        let mut stack = span.clone();
        while let Some(cur) = stack.pop() {
            stack.extend(self.g().nodes[cur as usize].children.iter().rev().copied());
            if self.has_info(cur) || self.g().name(cur).starts_with("Distributed") {
                continue;
            }
            let others = self.need_merge(cur);
            let (mut pin, mut pout) = self.param_data(cur, &others, false);
            if pin.is_empty() && pout.is_empty() {
                continue;
            }
            let line = self.ranks_line(cur, &others);
            self.info(cur).push(line);
            let cn = &self.g().nodes[cur as usize];
            let matmul = self.g().name(cur).contains("matmul");
            if cur == first || (matmul && cn.parent() == Some(first)) {
                pin.retain(|t| t.key != "input.0");
            } else if cur == last || (matmul && cn.parent() == Some(last)) {
                pout.clear();
                pin.retain(|t| t.key != "parameters.bias");
            }
            let mut lines = self.merge_params(pin);
            lines.extend(self.merge_params(pout));
            self.info(cur).extend(lines);
        }
    }
}

/// `LAYERS_PATTERN.search`: `(layers\.|layer\.)\d+(\.)` somewhere in `s`.
fn layers_find(s: &str, from: usize) -> Option<(usize, usize, usize)> {
    let b = s.as_bytes();
    let mut i = from;
    while i < b.len() {
        for pre in ["layers.", "layer."] {
            if b[i..].starts_with(pre.as_bytes()) {
                let d0 = i + pre.len();
                let mut d = d0;
                while d < b.len() && b[d].is_ascii_digit() {
                    d += 1;
                }
                if d > d0 && d < b.len() && b[d] == b'.' {
                    // (start, end of the prefix, end of the match)
                    return Some((i, d0, d + 1));
                }
            }
        }
        i += 1;
    }
    None
}

fn has_layers(s: &str) -> bool {
    layers_find(s, 0).is_some()
}

/// `LAYERS_PATTERN.sub(r"\g<1>" + index + r"\g<2>", s)`: every match.
fn layers_sub(s: &str, index: &str) -> String {
    let mut out = String::new();
    let mut at = 0;
    while let Some((start, pre_end, end)) = layers_find(s, at) {
        out.push_str(&s[at..pre_end]);
        out.push_str(index);
        out.push('.');
        let _ = start;
        at = end;
    }
    out.push_str(&s[at..]);
    out
}

/// `RANK_PATTERN` (`_rank(\d+)\.`): the first tagged rank in an id.
fn rank_tag(s: &str) -> Option<i64> {
    let mut from = 0;
    while let Some(p) = s[from..].find("_rank") {
        let d0 = from + p + 5;
        let digits = s[d0..].bytes().take_while(|b| b.is_ascii_digit()).count();
        if digits > 0 && s.as_bytes().get(d0 + digits) == Some(&b'.') {
            return s[d0..d0 + digits].parse().ok();
        }
        from = from + p + 5;
    }
    None
}

/// `RANK_PATTERN.sub(f"_rank{rank}.", s)`: every tag.
fn rank_tag_sub(s: &str, rank: i64) -> String {
    let mut out = String::new();
    let mut from = 0;
    while let Some(p) = s[from..].find("_rank") {
        let d0 = from + p + 5;
        let digits = s[d0..].bytes().take_while(|b| b.is_ascii_digit()).count();
        if digits > 0 && s.as_bytes().get(d0 + digits) == Some(&b'.') {
            out.push_str(&s[from..from + p]);
            out.push_str(&format!("_rank{rank}."));
            from = d0 + digits + 1;
        } else {
            out.push_str(&s[from..d0]);
            from = d0;
        }
    }
    out.push_str(&s[from..]);
    out
}

/// `MARK_PATTERN` (`%(\d+)%(\d+)$`): (position, rank) of a marked id.
fn mark_of(s: &str) -> Option<(i64, i64)> {
    let (head, rank) = s.rsplit_once('%')?;
    let (_, pos) = head.rsplit_once('%')?;
    let num = |t: &str| -> Option<i64> {
        if t.is_empty() || !t.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        t.parse().ok()
    };
    Some((num(pos)?, num(rank)?))
}

/// `MARK_PATTERN.sub("", s)`.
fn strip_mark(s: &str) -> String {
    if mark_of(s).is_none() {
        return s.to_string();
    }
    let Some((head, _)) = s.rsplit_once('%') else {
        return s.to_string();
    };
    head.rsplit_once('%')
        .map(|(h, _)| h)
        .unwrap_or(head)
        .to_string()
}

/// `_update_node_data_key` on a main node's items.
fn rename_items(g: &mut Graph, id: NodeId, old: &str, new: &str) {
    if let Some((i, o)) = g.io_override.get_mut(&id) {
        for (key, it) in i.iter_mut().chain(o.iter_mut()) {
            *key = key.replace(old, new);
            it.full_op_name = it.full_op_name.replace(old, new);
        }
    }
}

/// PPMerger.
impl Tp<'_> {
    /// `merge_pp_graphs` on the main rank and the other ranks of one PP group.
    fn run_pp(&mut self) {
        let mut i = 0;
        // The root's list may grow while it is walked (as in msprobe's for loop).
        while i < self.g().nodes[ROOT as usize].children.len() {
            let c = self.g().nodes[ROOT as usize].children[i];
            let n = &self.g().nodes[c as usize];
            let name = self.g().name(c);
            if n.op == NodeOp::Module && name != "clip_grad" && name != "optimizer" {
                self.pp_merge_node(c, 0);
                self.pp_sort(c);
            }
            i += 1;
        }
        self.root_unique();
    }

    /// The current id of another rank's node (moved ones carry their main copy's id).
    fn cur_name(&self, r: usize, id: NodeId) -> &str {
        match self.moved[r].get(&id) {
            Some(m) => self.main.graph.name(*m),
            None => self.others[r].graph.name(id),
        }
    }

    /// `_merge_nodes`.
    fn pp_merge_node(&mut self, id: NodeId, depth: usize) {
        if depth > 1000 {
            return;
        }
        let name = self.g().name(id).to_string();
        let mut others = Vec::new();
        for (r, o) in self.others.iter().enumerate() {
            match o.graph.get(&name) {
                Some(oid) => others.push((r, oid)),
                None => return,
            }
        }
        if !others.is_empty() {
            let (pin, pout) = self.param_data(id, &others, true);
            let mut split = !pin.is_empty() && !pout.is_empty() && has_layers(&name);
            if name.contains(".backward.") {
                let f = name.replace(".backward.", ".forward.");
                if self
                    .g()
                    .get(&f)
                    .is_some_and(|f| self.pp_merged.contains(&f))
                {
                    split = true;
                }
            }
            if split {
                self.pp_merged.insert(id);
                let up = self.g().nodes[id as usize].parent();
                for (r, oid) in others {
                    let copy = self.move_marked(r, oid, up);
                    if let Some(u) = up {
                        self.main.graph.nodes[u as usize].children.push(copy);
                    }
                }
                return;
            } else if pin.is_empty() && !pout.is_empty() && name.contains(".forward.") {
                if let Some((r, oid)) = others.last().copied() {
                    let out = self.other_items(r, oid).1;
                    self.load(id);
                    if let Some(io) = self.main.graph.io_override.get_mut(&id) {
                        io.1 = out;
                    }
                }
            } else if !pin.is_empty() && pout.is_empty() && name.contains(".backward.") {
                if let Some((r, oid)) = others.last().copied() {
                    let inp = self.other_items(r, oid).0;
                    self.load(id);
                    if let Some(io) = self.main.graph.io_override.get_mut(&id) {
                        io.0 = inp;
                    }
                }
            }
            self.pp_unique_children(id, &others);
        }
        let mut i = 0;
        while i < self.g().nodes[id as usize].children.len() {
            let c = self.g().nodes[id as usize].children[i];
            if self.g().nodes[c as usize].op == NodeOp::Module {
                self.pp_merge_node(c, depth + 1);
            }
            i += 1;
        }
    }

    /// Another rank's items, copied into the main store.
    fn other_items(&mut self, r: usize, oid: NodeId) -> (ItemMap, ItemMap) {
        let o = &self.others[r];
        let (i, out) = o.graph.io(&o.dump, oid);
        let store = &mut self.main.dump.store;
        let conv = |m: ItemMap, store: &mut Store| -> ItemMap {
            m.into_iter()
                .map(|(key, it)| (key, copy_item(&o.dump.store, &it, store)))
                .collect()
        };
        let a = conv(i, store);
        let b = conv(out, store);
        (a, b)
    }

    /// `_merge_other_unique_nodes`: children only another rank has are moved under `id`.
    fn pp_unique_children(&mut self, id: NodeId, others: &[(usize, NodeId)]) {
        let main_ids: Vec<String> = self.g().nodes[id as usize]
            .children
            .iter()
            .map(|c| self.g().name(*c).to_string())
            .collect();
        let lists: Vec<Vec<(usize, NodeId, String)>> = others
            .iter()
            .map(|(r, oid)| {
                self.others[*r].graph.nodes[*oid as usize]
                    .children
                    .iter()
                    .map(|c| (*r, *c, self.cur_name(*r, *c).to_string()))
                    .collect()
            })
            .collect();
        use std::collections::HashSet;
        let main_set: HashSet<&str> = main_ids.iter().map(String::as_str).collect();
        let sets: Vec<HashSet<&str>> = lists
            .iter()
            .map(|l| l.iter().map(|(_, _, n)| n.as_str()).collect())
            .collect();
        let mut unique = Vec::new();
        for (i, list) in lists.iter().enumerate() {
            // A dict keeps the last node of a repeated id, at the first one's place.
            let mut last: crate::base::HashMap<&str, NodeId> = Default::default();
            for (_, c, n) in list {
                last.insert(n.as_str(), *c);
            }
            let mut seen: HashSet<&str> = HashSet::new();
            for (r, c, n) in list {
                let elsewhere = main_set.contains(n.as_str())
                    || sets
                        .iter()
                        .enumerate()
                        .any(|(j, set)| j != i && set.contains(n.as_str()));
                if elsewhere || !seen.insert(n.as_str()) {
                    continue;
                }
                unique.push((*r, last.get(n.as_str()).copied().unwrap_or(*c)));
            }
        }
        for (r, c) in unique {
            let copy = self.move_marked(r, c, Some(id));
            self.main.graph.nodes[id as usize].children.push(copy);
        }
    }

    /// `_mark_node_id_position_rank` + `_add_node_to_main_graph`: copies another rank's node and
    /// its subtree into the main graph with `%position%rank` after every id.
    fn move_marked(&mut self, r: usize, oid: NodeId, parent: Option<NodeId>) -> NodeId {
        let rank = self.others[r].node_rank(oid);
        self.move_marked_as(r, oid, parent, rank)
    }

    fn move_marked_as(
        &mut self,
        r: usize,
        oid: NodeId,
        parent: Option<NodeId>,
        rank: i64,
    ) -> NodeId {
        // Iterative pre-order: the same order as msprobe's recursion, without its depth.
        let mut top = ROOT;
        let mut stack = vec![(oid, parent, true)];
        while let Some((oid, parent, is_top)) = stack.pop() {
            let nid = self.move_one(r, oid, parent, rank);
            if is_top {
                top = nid;
            } else if let Some(p) = parent {
                self.main.graph.nodes[p as usize].children.push(nid);
            }
            for c in self.others[r].graph.nodes[oid as usize]
                .children
                .iter()
                .rev()
            {
                stack.push((*c, Some(nid), false));
            }
        }
        top
    }

    fn move_one(&mut self, r: usize, oid: NodeId, parent: Option<NodeId>, rank: i64) -> NodeId {
        let orig = self.cur_name(r, oid).to_string();
        let position = match self.others[r].graph.nodes[oid as usize].parent() {
            Some(p) => self.others[r].graph.nodes[p as usize]
                .children
                .iter()
                .position(|s| self.cur_name(r, *s) == orig)
                .unwrap_or(0),
            None => 0,
        };
        let name = format!("{orig}%{position}%{rank}");
        let mut n = node_copy(&self.others[r], oid, self.main, parent);
        n.name = self.main.graph.names.intern(&name);
        let io = self.other_items(r, oid);
        let nid = self.main.graph.nodes.len() as NodeId;
        self.main.graph.nodes.push(n);
        self.main.graph.io_override.insert(nid, io);
        let origin = self.others[r].node_rank(oid);
        self.main.origin.insert(nid, origin);
        if self.main.graph.get(&name).is_none() {
            self.main.graph.index_insert(nid);
            self.main.touch(nid);
        }
        self.moved[r].insert(oid, nid);
        nid
    }

    /// `_sort_nodes`: the siblings of every marked node are re-ordered and renumbered.
    fn pp_sort(&mut self, start: NodeId) {
        let mut stack = vec![start];
        while let Some(node) = stack.pop() {
            let name = self.g().name(node).to_string();
            if mark_of(&name).is_some() {
                if let Some(parent) = self.g().nodes[node as usize].parent() {
                    let forward = name.contains(".forward.") || name.contains(".forward%");
                    let sibs = self.g().nodes[parent as usize].children.clone();
                    let (s1, mut s2): (Vec<NodeId>, Vec<NodeId>) = sibs
                        .iter()
                        .partition(|c| mark_of(self.g().name(**c)).is_none());
                    s2.sort_by_key(|c| {
                        let (pos, rank) = mark_of(self.g().name(*c)).unwrap_or((0, 0));
                        if forward {
                            (rank, pos)
                        } else {
                            (-rank, pos)
                        }
                    });
                    let new: Vec<NodeId> = if forward {
                        s1.iter().chain(s2.iter()).copied().collect()
                    } else {
                        s2.iter().chain(s1.iter()).copied().collect()
                    };
                    let mut index = -1i64;
                    let walk: Vec<NodeId> = if forward {
                        new.clone()
                    } else {
                        new.iter().rev().copied().collect()
                    };
                    for it in walk {
                        let n = self.g().name(it);
                        if has_layers(n) {
                            index += 1;
                        }
                        if mark_of(n).is_some() {
                            self.pp_index.insert(it, index);
                        }
                    }
                    for it in &s2 {
                        self.pp_update_id(*it);
                    }
                    self.main.graph.nodes[parent as usize].children = new;
                }
            }
            stack.extend(self.g().nodes[node as usize].children.iter().copied());
        }
    }

    /// `_update_node_id`: marks removed, `layers.N` renumbered, `_rank{r}` after API names.
    fn pp_update_id(&mut self, start: NodeId) {
        let mut stack = vec![(start, String::new())];
        while let Some((node, mut ppi)) = stack.pop() {
            let name = self.g().name(node).to_string();
            if self.g().get(&name).is_some() {
                self.main.graph.index_remove(&name);
                let old = strip_mark(&name);
                let mut new = name.clone();
                if self.g().nodes[node as usize].op == NodeOp::Module {
                    if has_layers(&new) && mark_of(&new).is_some() {
                        if let Some(pi) = self.pp_index.get(&node) {
                            ppi = pi.to_string();
                        }
                        new = layers_sub(&new, &ppi);
                    }
                } else {
                    let rank = new.rsplit('%').next().unwrap_or("").to_string();
                    let mut parts: Vec<String> = new.split('.').map(str::to_string).collect();
                    if parts.len() > 1 {
                        parts[1].push_str(&format!("_rank{rank}"));
                    }
                    new = parts.join(".");
                }
                let new = strip_mark(&new);
                rename_items(&mut self.main.graph, node, &old, &new);
                self.main.graph.set_name(node, &new);
                self.main.graph.index_insert(node);
                self.main.touch(node);
            }
            for c in self.g().nodes[node as usize].children.clone() {
                stack.push((c, ppi.clone()));
            }
        }
    }

    /// `_merge_root_unique_subnodes`: with layers right under the root, the root children only
    /// other ranks have are appended and renumbered.
    fn root_unique(&mut self) {
        let root_kids = self.g().nodes[ROOT as usize].children.clone();
        if !root_kids.iter().any(|c| has_layers(self.g().name(*c))) {
            return;
        }
        let main_ids: Vec<String> = root_kids
            .iter()
            .map(|c| self.g().name(*c).to_string())
            .collect();
        let mut to_merge = Vec::new();
        for (r, o) in self.others.iter().enumerate() {
            for c in &o.graph.nodes[ROOT as usize].children {
                let n = self.cur_name(r, *c);
                if !main_ids.iter().any(|m| m == n) && !n.starts_with(ABM) {
                    to_merge.push((r, *c));
                }
            }
        }
        if to_merge.is_empty() {
            return;
        }
        for (r, c) in to_merge {
            let copy = self.move_marked(r, c, Some(ROOT));
            self.main.graph.nodes[ROOT as usize].children.push(copy);
        }
        let kids = self.g().nodes[ROOT as usize].children.clone();
        let (unmarked, mut marked): (Vec<NodeId>, Vec<NodeId>) = kids
            .iter()
            .partition(|c| mark_of(self.g().name(**c)).is_none());
        marked.sort_by_key(|c| {
            let (pos, rank) = mark_of(self.g().name(*c)).unwrap_or((0, 0));
            (rank, pos)
        });
        self.main.graph.nodes[ROOT as usize].children =
            unmarked.iter().chain(marked.iter()).copied().collect();
        let mut idx = unmarked
            .iter()
            .filter(|c| has_layers(self.g().name(**c)))
            .count() as i64
            - 1;
        for m in marked {
            if has_layers(self.g().name(m)) {
                idx += 1;
                self.pp_index.insert(m, idx);
            }
            self.pp_update_id(m);
        }
    }
}

/// msprobe formats a node's items in place when it exports it; items shared by two nodes (VPP)
/// are therefore formatted twice for the node exported second: its numbers are already strings
/// (`str(x)`), which the second pass rounds like any decimal string. This gives the second node
/// those strings. Call after the compare, before the export.
pub fn settle_shared(graph: &mut Graph, shared: &[(NodeId, NodeId, bool)], store: &Store) {
    if shared.is_empty() {
        return;
    }
    let mut pos = vec![usize::MAX; graph.nodes.len()];
    for (i, id) in graph.post_order().into_iter().enumerate() {
        pos[id as usize] = i;
    }
    for (a, b, out) in shared {
        let (pa, pb) = (pos[*a as usize], pos[*b as usize]);
        if pa == usize::MAX || pb == usize::MAX {
            continue;
        }
        let later = if pa > pb { *a } else { *b };
        if !graph.io_override.contains_key(&later) {
            continue;
        }
        if let Some(io) = graph.io_override.get_mut(&later) {
            let map = if *out { &mut io.1 } else { &mut io.0 };
            for (_, it) in map.iter_mut() {
                for (key, v) in it.fields.iter_mut() {
                    if *key == k::STATE || *key == k::FULL_OP_NAME {
                        continue;
                    }
                    let text = match &*v {
                        Py::None | Py::S(_) | Py::Pct(..) | Py::Lit(_) => continue,
                        Py::V(Val::Null) | Py::V(Val::Str(_)) => continue,
                        other => other.to_py_str(store),
                    };
                    *v = Py::S(text);
                }
            }
        }
    }
}

/// `VPPMerger._replace_vpp_id`: the chunk number (2nd segment, if digits) replaced.
fn replace_vpp_id(s: &str, id: &str) -> String {
    let mut parts: Vec<&str> = s.split('.').collect();
    if parts.len() < 2 || parts[1].is_empty() || !parts[1].bytes().all(|b| b.is_ascii_digit()) {
        return s.to_string();
    }
    parts[1] = id;
    parts.join(".")
}

/// `FORWARD_PATTERN` (`\.forward\.\d+$`).
fn forward_tail(s: &str) -> bool {
    match s.rsplit_once('.') {
        Some((head, d)) => {
            !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()) && head.ends_with(".forward")
        }
        None => false,
    }
}

/// VPPMerger.
impl Tp<'_> {
    fn chunk_of(name: &str) -> Option<&str> {
        name.split('.').nth(1)
    }

    /// `_merge_vpp_data`: chunk-0 module wrappers take the last chunk's outputs (forward) or
    /// inputs (backward).
    fn merge_vpp_data(&mut self, vpp: i64) {
        let last = (vpp - 1).to_string();
        let mut stack: Vec<NodeId> = self.g().nodes[ROOT as usize]
            .children
            .iter()
            .rev()
            .copied()
            .filter(
                |c| matches!(Self::chunk_of(self.g().name(*c)), Some(p) if p == "0" || p == last),
            )
            .collect();
        while let Some(cur) = stack.pop() {
            let n = &self.g().nodes[cur as usize];
            if self.pp_merged.contains(&cur)
                || self.pp_index.contains_key(&cur)
                || n.op != NodeOp::Module
            {
                continue;
            }
            let name = self.g().name(cur).to_string();
            let forward = forward_tail(&name);
            stack.extend(n.children.iter().rev().copied());
            let Some(t) = self.g().get(&replace_vpp_id(&name, &last)) else {
                continue;
            };
            let tname = self.g().name(t).to_string();
            self.load(t);
            self.load(cur);
            let rename = |m: &ItemMap| -> ItemMap {
                m.iter()
                    .map(|(k2, it)| {
                        let mut it = it.clone();
                        it.full_op_name = it.full_op_name.replace(&tname, &name);
                        (k2.replace(&tname, &name), it)
                    })
                    .collect()
            };
            let Some((ti, to)) = self.main.graph.io_override.get(&t).cloned() else {
                continue;
            };
            if let Some(io) = self.main.graph.io_override.get_mut(&cur) {
                if forward {
                    io.1 = rename(&to);
                } else {
                    io.0 = rename(&ti);
                }
            }
            if cur != t {
                self.main.shared.push((cur, t, forward));
            }
        }
    }

    /// `_merge_vpp_chunks`: the layers of the other chunks move into chunk 0 and are renumbered;
    /// the other chunks' module chains leave the graph.
    fn merge_vpp_chunks(&mut self, vpp: i64) {
        let mut stack: Vec<NodeId> = self.g().nodes[ROOT as usize]
            .children
            .iter()
            .rev()
            .copied()
            .filter(|c| Self::chunk_of(self.g().name(*c)) == Some("0"))
            .collect();
        if stack.is_empty() {
            return;
        }
        let mut parents: Vec<(String, NodeId)> = Vec::new();
        while let Some(cur) = stack.pop() {
            let up = self.g().nodes[cur as usize].parent();
            let up_name = up.map(|u| self.g().name(u).to_string());
            let known = up_name
                .as_ref()
                .is_some_and(|n| parents.iter().any(|(k2, _)| k2 == n));
            if self.pp_merged.contains(&cur) || (self.pp_index.contains_key(&cur) && !known) {
                if let (Some(u), Some(un)) = (up, up_name) {
                    if let Some(slot) = parents.iter_mut().find(|(k2, _)| *k2 == un) {
                        slot.1 = u;
                    } else {
                        parents.push((un, u));
                    }
                }
                continue;
            }
            stack.extend(self.g().nodes[cur as usize].children.iter().rev().copied());
        }
        for (_, node) in parents {
            let forward = forward_tail(self.g().name(node));
            for vpp_id in 1..vpp {
                let tname = replace_vpp_id(self.g().name(node), &vpp_id.to_string());
                let Some(t) = self.g().get(&tname) else {
                    continue;
                };
                let kids = self.g().nodes[t as usize].children.clone();
                let g = &mut self.main.graph;
                if forward {
                    g.nodes[node as usize].children.extend(kids.iter().copied());
                } else {
                    let mut v = kids.clone();
                    v.extend(g.nodes[node as usize].children.iter().copied());
                    g.nodes[node as usize].children = v;
                }
                for k2 in &kids {
                    g.nodes[*k2 as usize].set_parent(Some(node));
                }
                let anc = g.ancestors(t);
                if anc.len() < 2 {
                    continue;
                }
                let names: Vec<String> = anc[1..].iter().map(|a| g.name(*a).to_string()).collect();
                for n in &names {
                    g.index_remove(n);
                }
                let drop = names[0].clone();
                let root_kids: Vec<NodeId> = g.nodes[ROOT as usize]
                    .children
                    .iter()
                    .copied()
                    .filter(|c| g.name(*c) != drop)
                    .collect();
                g.nodes[ROOT as usize].children = root_kids;
            }
            self.sort_layers(node, forward);
        }
    }

    /// `_sort_layers`: the children of `parent` from other chunks get chunk 0 and the running
    /// layer number.
    fn sort_layers(&mut self, parent: NodeId, forward: bool) {
        let mut list = self.g().nodes[parent as usize].children.clone();
        if !forward {
            list.reverse();
        }
        let mut index = -1i64;
        for n in list {
            let name = self.g().name(n).to_string();
            let m = layers_find(&name, 0);
            if m.is_some() {
                index += 1;
            }
            if Self::chunk_of(&name).is_none_or(|c| c == "0") {
                continue;
            }
            let (new_id, prefix) = match m {
                Some((start, pre_end, end)) => {
                    let p = replace_vpp_id(
                        &format!("{}{}{index}.", &name[..start], &name[start..pre_end]),
                        "0",
                    );
                    (format!("{p}{}", &name[end..]), p)
                }
                None => (replace_vpp_id(&name, "0"), String::new()),
            };
            self.rename_node(n, &new_id);
            let mut stack = self.g().nodes[n as usize].children.clone();
            while let Some(cur) = stack.pop() {
                if self.g().nodes[cur as usize].op != NodeOp::Module {
                    continue;
                }
                stack.extend(self.g().nodes[cur as usize].children.iter().rev().copied());
                let cname = self.g().name(cur).to_string();
                let new_cur = match layers_find(&cname, 0) {
                    Some((_, _, e)) => format!("{prefix}{}", &cname[e..]),
                    None => replace_vpp_id(&cname, "0"),
                };
                self.rename_node(cur, &new_cur);
            }
        }
    }

    /// A main node renamed: its items' keys, the name index (popped, re-inserted at the end).
    fn rename_node(&mut self, id: NodeId, new: &str) {
        let old = self.g().name(id).to_string();
        self.load(id);
        self.main.graph.index_remove(&old);
        rename_items(&mut self.main.graph, id, &old, new);
        self.main.graph.set_name(id, new);
        self.main.graph.index_insert(id);
        self.main.touch(id);
    }
}

/// Python's `int / int` (true division, correctly rounded for the sizes statistics have).
fn int_div(a: i128, b: i128) -> f64 {
    a as f64 / b as f64
}

/// `_cast_to_origin_dtype` with torch importable: the merged float goes through the item's dtype
/// (`torch.tensor(v, dtype).item()`: double → float → bfloat16/float16, round to nearest even).
pub fn cast_to_dtype(v: f64, dtype: &str) -> f64 {
    if v.is_nan() || v.is_infinite() {
        return v;
    }
    match dtype {
        "torch.float32" | "Float32" => v as f32 as f64,
        "torch.bfloat16" | "BFloat16" => bf16_round(v as f32) as f64,
        "torch.float16" | "Float16" => f16_round(v as f32) as f64,
        _ => v,
    }
}

/// c10's `round_to_nearest_even` float → bfloat16, widened back.
fn bf16_round(x: f32) -> f32 {
    if x.is_nan() {
        return x;
    }
    let bits = x.to_bits();
    let bias = ((bits >> 16) & 1) + 0x7FFF;
    f32::from_bits((bits.wrapping_add(bias) >> 16) << 16)
}

/// float → IEEE half (round to nearest even, overflow to inf, subnormals), widened back.
fn f16_round(x: f32) -> f32 {
    let v = x as f64;
    if !v.is_finite() || v == 0.0 {
        return x;
    }
    let a = v.abs();
    if a >= 65520.0 {
        return f32::INFINITY.copysign(x);
    }
    let e = (((a.to_bits() >> 52) & 0x7ff) as i32 - 1023).max(-14);
    let q = 2f64.powi(e - 10);
    ((v / q).round_ties_even() * q) as f32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strategies() {
        let p = |r, t, pp| ParallelParams::new(r, t, pp);
        assert_eq!(Strategy::of(&p(1, 1, 1)), Strategy::NoParallel);
        assert_eq!(Strategy::of(&p(2, 2, 1)), Strategy::Tp);
        assert_eq!(Strategy::of(&p(2, 1, 2)), Strategy::Pp);
        assert_eq!(Strategy::of(&p(8, 2, 1)), Strategy::Tp);
        assert_eq!(Strategy::of(&p(8, 1, 2)), Strategy::Pp);
        assert_eq!(Strategy::of(&p(4, 2, 2)), Strategy::TpPp);
        assert_eq!(Strategy::of(&p(8, 2, 2)), Strategy::Full);
        let mut v = p(4, 1, 4);
        v.vpp = 2;
        assert_eq!(Strategy::of(&v), Strategy::Vpp);
    }

    #[test]
    fn megatron_default_groups() {
        let (tp, pp) = default_groups(&ParallelParams::new(8, 2, 2)).unwrap_or_default();
        assert_eq!(tp, vec![vec![0, 1], vec![2, 3], vec![4, 5], vec![6, 7]]);
        assert_eq!(pp, vec![vec![0, 4], vec![1, 5], vec![2, 6], vec![3, 7]]);
        let (tp, _) = default_groups(&ParallelParams::new(2, 2, 1)).unwrap_or_default();
        assert_eq!(tp, vec![vec![0, 1]]);
    }

    #[test]
    fn casts() {
        assert_eq!(cast_to_dtype(0.1, "torch.float32"), 0.1f32 as f64);
        assert_eq!(cast_to_dtype(0.1, "torch.float64"), 0.1);
        assert_eq!(cast_to_dtype(1.0 + 1.0 / 256.0, "torch.bfloat16"), 1.0);
        assert_eq!(
            cast_to_dtype(1.0 + 3.0 / 256.0, "torch.bfloat16"),
            1.0 + 4.0 / 256.0
        );
        assert_eq!(cast_to_dtype(1.0 + 1.0 / 2048.0, "torch.float16"), 1.0);
        assert_eq!(cast_to_dtype(70000.0, "torch.float16"), f64::INFINITY);
        assert_eq!(cast_to_dtype(65504.0, "Float16"), 65504.0);
        assert!(cast_to_dtype(f64::NAN, "torch.float16").is_nan());
    }

    #[test]
    fn pp_patterns() {
        assert!(has_layers("Module.decoder.layers.0.mlp.MLP.forward.0"));
        assert!(has_layers("Module.h.layer.12.Block.forward.0"));
        assert!(!has_layers("Module.decoder.layers.x.forward.0"));
        assert!(!has_layers("Module.decoder.TransformerBlock.forward.0"));
        assert_eq!(
            layers_sub("Module.decoder.layers.0.mlp.layers.1.X.forward.0%3%1", "5"),
            "Module.decoder.layers.5.mlp.layers.5.X.forward.0%3%1"
        );
        assert_eq!(mark_of("Torch.matmul.3.forward%2%1"), Some((2, 1)));
        assert_eq!(mark_of("Torch.matmul.3.forward"), None);
        assert_eq!(mark_of("a%%1"), None);
        assert_eq!(
            strip_mark("Torch.matmul.3.forward%2%1"),
            "Torch.matmul.3.forward"
        );
        assert_eq!(strip_mark("a%b%1"), "a%b%1");
    }

    #[test]
    fn validation_messages() {
        let e = validate(&ParallelParams::new(4, 2, 1), 2, "npu", "[NPU]").err();
        assert!(e.is_some_and(|e| e.to_string().contains("you set 4 but expected 2")));
        let e = validate(&ParallelParams::new(4, 3, 1), 4, "npu", "[NPU]").err();
        assert!(e.is_some_and(|e| e.to_string().contains("divisible by \"tp\"")));
        let e = validate(&ParallelParams::new(4, 4, 2), 4, "npu", "[NPU]").err();
        assert!(e.is_some_and(|e| e.to_string().contains("tp * pp")));
        let mut v = ParallelParams::new(2, 2, 1);
        v.vpp = 2;
        assert!(validate(&v, 2, "npu", "[Bench]").is_err());
        assert!(validate(&ParallelParams::new(2, 2, 1), 2, "npu", "[NPU]").is_ok());
    }

    #[test]
    fn load_params_as_msprobe() {
        let mut a = ParallelArgs::default();
        assert_eq!(load_params(&a, true), Ok(None));
        a.rank_size = vec![2];
        assert_eq!(
            load_params(&a, false),
            Err("In the graph merge task, parameters \"tp/pp/rank_size\" is required!".into())
        );
        a.tp = vec![2];
        a.pp = vec![1];
        assert_eq!(
            load_params(&a, true),
            Err("In the graph merge compare task, the number of parameters \"rank_size\" to be filled in is either 2!".into())
        );
        assert_eq!(
            load_params(&a, false),
            Ok(Some(vec![ParallelParams::new(2, 2, 1)]))
        );
        a.rank_size = vec![2, 4];
        a.tp = vec![2, 2];
        a.pp = vec![1, 2];
        a.vpp = vec![1, 2];
        a.order = vec!["tp-dp-pp".into(), "tp-pp-dp".into()];
        let p = load_params(&a, true).unwrap().unwrap();
        assert_eq!((p[1].rank_size, p[1].tp, p[1].pp, p[1].vpp), (4, 2, 2, 2));
        assert_eq!(p[1].order, "tp-pp-dp");
        a.vpp = vec![2];
        assert_eq!(
            load_params(&a, true).unwrap().unwrap()[1].vpp,
            1,
            "vpp needs one value per side"
        );
    }
}
