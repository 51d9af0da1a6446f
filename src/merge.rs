//! Parallel merge (`--rank_size/--tp/--pp/--vpp/--order`): msprobe's `GraphMerger`
//! (`visualization/builder/graph_merger.py`). The graphs of the ranks of one step are merged into
//! one graph per parallel group before they are exported (build) or compared (compare, with fuzzy
//! matching and the parallel-merge checker set).
//!
//! Implemented: the strategy selection and parameter validation, `NoParallelMerger` (the
//! `Apis_Between_Modules_All_Ranks` collections) and `TPMerger` (statistics merged over the TP
//! group with the `parallel_merge_info` lines, the RowParallelLinear/ColumnParallelLinear special
//! cases). PP, VPP, TP+PP and full merges are refused with an error.
//!
//! The merged graph is the main rank's [`Graph`]: nodes taken over from other ranks are appended
//! to its arena, their items (and stacks) copied into the main rank's store; merged statistics
//! are kept in [`Graph::io_override`], the lines in [`Graph::merge_info`].

use crate::compare::{compare, compare_mode, CompareOptions};
use crate::dump::RankDump;
use crate::error::{Error, Result};
use crate::graph::{Graph, NodeId, NodeOp, Stack, ROOT};
use crate::items::{k, Item, ItemMap, Mode, Num, Py};
use crate::json::{Store, Val};
use crate::pyfmt::float_repr;
use crate::run::{Files, PairResult, RunOptions, Side};

/// One side's parallel parameters (`ParallelParam`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParallelParams {
    pub rank_size: i64,
    pub tp: i64,
    pub pp: i64,
    pub vpp: i64,
    pub order: String,
}

impl ParallelParams {
    pub fn new(rank_size: i64, tp: i64, pp: i64) -> ParallelParams {
        ParallelParams {
            rank_size,
            tp,
            pp,
            vpp: 1,
            order: DEFAULT_ORDER.to_string(),
        }
    }
}

pub const DEFAULT_ORDER: &str = "tp-cp-ep-dp-pp";

/// `GraphMerger._select_strategy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Strategy {
    NoParallel,
    Tp,
    Pp,
    Vpp,
    TpPp,
    Full,
}

impl Strategy {
    pub fn of(p: &ParallelParams) -> Strategy {
        let pp_or_vpp = if p.vpp == 1 {
            Strategy::Pp
        } else {
            Strategy::Vpp
        };
        if p.tp == 1 && p.pp == 1 && p.rank_size == 1 {
            Strategy::NoParallel
        } else if p.tp == p.rank_size {
            Strategy::Tp
        } else if p.pp == p.rank_size {
            pp_or_vpp
        } else if p.pp == 1 {
            Strategy::Tp
        } else if p.tp == 1 {
            pp_or_vpp
        } else if p.tp * p.pp == p.rank_size {
            Strategy::TpPp
        } else {
            Strategy::Full
        }
    }
    fn name(self) -> &'static str {
        match self {
            Strategy::NoParallel => "no-parallel",
            Strategy::Tp => "TP",
            Strategy::Pp => "PP",
            Strategy::Vpp => "VPP",
            Strategy::TpPp => "TP+PP",
            Strategy::Full => "TP+PP+DP",
        }
    }
}

/// `validate_parallel_param`: `ranks` is the number of rank folders of the side's dump folder
/// `place`; `prefix` is `[NPU]` or `[Bench]`. The messages are msprobe's.
pub fn validate(p: &ParallelParams, ranks: usize, place: &str, prefix: &str) -> Result<()> {
    let fail = |msg: String| Err(Error::input(place, format!("{prefix} {msg}")));
    if ranks as i64 != p.rank_size {
        return fail(format!(
            "The parallel param \"rank_size\" error, you set {} but expected {ranks}.",
            p.rank_size
        ));
    }
    if [p.tp, p.pp, p.rank_size, p.vpp].iter().any(|x| *x <= 0) {
        return fail("The parallel params \"tp/pp/vpp/rank_size\" must be greater than 0!".into());
    }
    if p.tp > p.rank_size {
        return fail(
            "The parallel param \"tp\" must be less than or equal to \"rank_size\"!".into(),
        );
    }
    if p.pp > p.rank_size {
        return fail(
            "The parallel param \"pp\" must be less than or equal to \"rank_size\"!".into(),
        );
    }
    if p.rank_size % p.tp != 0 {
        return fail("The parallel param \"rank_size\" must be divisible by \"tp\"!".into());
    }
    if p.rank_size % p.pp != 0 {
        return fail("The parallel param \"rank_size\" must be divisible by \"pp\"!".into());
    }
    if p.tp * p.pp > p.rank_size {
        return fail(
            "The parallel params \"tp * pp\" must be less than or equal to \"rank_size\"!".into(),
        );
    }
    if p.vpp > 1 && p.pp < 2 {
        return fail(
            "When configuring the parallel param \"vpp\", the \"pp\" param must be greater than 1!"
                .into(),
        );
    }
    if p.order.is_empty() || !p.order.bytes().all(|b| b.is_ascii_lowercase() || b == b'-') {
        return fail(format!(
            "The parallel param \"order\" must consist of lowercase letters and \"-\", got \"{}\"!",
            p.order
        ));
    }
    Ok(())
}

/// Rank groups, each a list of ranks.
pub type Groups = Vec<Vec<i64>>;

/// `get_tp_pp_default_groups` (Megatron's `RankGenerator` with cp = ep = 1): (tp groups, pp groups).
pub fn default_groups(p: &ParallelParams) -> Result<(Groups, Groups)> {
    let bad = |msg: String| Err(Error::input("--order", msg));
    let product = p.tp * p.pp;
    if product <= 0 || p.rank_size % product != 0 {
        return bad(format!(
            "the world size ({}) is not divisible by tp * pp ({product})",
            p.rank_size
        ));
    }
    let dp = p.rank_size / product;
    let sizes = [("tp", p.tp), ("pp", p.pp), ("dp", dp), ("ep", 1), ("cp", 1)];
    let mut order = p.order.to_lowercase();
    if order.contains("ep") && !order.contains("ep-dp") && !order.contains("dp-ep") {
        return bad(format!(
            "The ep and dp must be adjacent in order ({}).",
            p.order
        ));
    }
    for (name, size) in sizes {
        if !order.contains(name) {
            if size != 1 {
                return bad(format!(
                    "The parallel size ({name}) is ({size}), but it's not specified in order ({}).",
                    p.order
                ));
            }
            order.push('-');
            order.push_str(name);
        }
    }
    let items: Vec<&str> = order.split('-').filter(|i| *i != "ep").collect();
    let mut dims = Vec::new();
    for it in &items {
        match sizes.iter().find(|(n, _)| n == it) {
            Some((_, s)) => dims.push(*s),
            None => {
                return bad(format!(
                    "unknown parallel dimension \"{it}\" in order ({})",
                    p.order
                ))
            }
        }
    }
    let groups = |token: &str| -> Vec<Vec<i64>> {
        let mask: Vec<bool> = items.iter().map(|i| *i == token).collect();
        masked_rank_groups(p.rank_size, &dims, &mask)
    };
    Ok((groups("tp"), groups("pp")))
}

/// `RankGroupGenerator.create_masked_rank_groups`.
fn masked_rank_groups(total: i64, dims: &[i64], mask: &[bool]) -> Vec<Vec<i64>> {
    let prefix = |d: &[i64]| -> Vec<i64> {
        let mut out = vec![1];
        let mut cur = 1;
        for x in d {
            cur *= x;
            out.push(cur);
        }
        out
    };
    let decompose = |mut index: i64, shape: &[i64]| -> Vec<i64> {
        let mut out = Vec::new();
        for d in shape {
            out.push(index % d.max(&1));
            index /= d.max(&1);
        }
        out
    };
    let masked: Vec<i64> = dims
        .iter()
        .zip(mask)
        .filter(|(_, m)| **m)
        .map(|(d, _)| *d)
        .collect();
    let unmasked: Vec<i64> = dims
        .iter()
        .zip(mask)
        .filter(|(_, m)| !**m)
        .map(|(d, _)| *d)
        .collect();
    let strides = prefix(dims);
    let ms: Vec<i64> = strides
        .iter()
        .zip(mask)
        .filter(|(_, m)| **m)
        .map(|(s, _)| *s)
        .collect();
    let us: Vec<i64> = strides
        .iter()
        .zip(mask)
        .filter(|(_, m)| !**m)
        .map(|(s, _)| *s)
        .collect();
    let group = prefix(&masked).last().copied().unwrap_or(1).max(1);
    let dot = |a: &[i64], b: &[i64]| -> i64 { a.iter().zip(b).map(|(x, y)| x * y).sum() };
    (0..total / group)
        .map(|g| {
            let dg = decompose(g, &unmasked);
            (0..group)
                .map(|r| dot(&decompose(r, &masked), &ms) + dot(&dg, &us))
                .collect()
        })
        .collect()
}

/// One rank's built graph, before and after the merge.
#[derive(Debug)]
pub struct RankGraph {
    pub rank: i64,
    /// The rank folder, relative to the dump root.
    pub dir: String,
    pub dump: RankDump,
    pub graph: Graph,
    pub micro_steps: i64,
}

impl RankGraph {
    /// `_build_graph_result`: build, page by micro step (overflow check is refused upstream).
    pub fn build(rank: i64, dir: String, dump: RankDump) -> Result<RankGraph> {
        let mut graph = Graph::build(&dump)?;
        let micro_steps = graph.paging_by_micro_step(None);
        Ok(RankGraph {
            rank,
            dir,
            dump,
            graph,
            micro_steps,
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
            let mut slots: Vec<Option<RankGraph>> = ranks.into_iter().map(Some).collect();
            let mut out = Vec::new();
            for g in groups {
                let mut members = Vec::new();
                for r in &g {
                    let pos = slots
                        .iter()
                        .position(|s| s.as_ref().is_some_and(|x| x.rank == *r));
                    match pos.and_then(|i| slots[i].take()) {
                        Some(x) => members.push(x),
                        None => {
                            return Err(Error::input(
                                "--tp",
                                format!("the TP group {g:?} names rank {r}, which is not among the dumped ranks (or is in two groups)"),
                            ))
                        }
                    }
                }
                merge_api_collections(&mut members);
                out.push(merge_tp(members));
            }
            Ok(out)
        }
        s => Err(Error::input(
            "--pp",
            format!(
                "parallel merge with the {} strategy (tp={}, pp={}, vpp={}, rank_size={}) is not supported yet; probelens merges tensor parallelism only (pp 1)",
                s.name(),
                p.tp,
                p.pp,
                p.vpp,
                p.rank_size
            ),
        )),
    }
}

/// `TPMerger.get_groups`: the `group_ranks` of the first all_reduce/reduce_scatter of each rank,
/// else (or if their size is not tp) the default groups.
fn tp_groups(ranks: &[RankGraph], p: &ParallelParams) -> Result<Vec<Vec<i64>>> {
    let mut groups: Vec<Vec<i64>> = Vec::new();
    for r in ranks {
        for (id, n) in r.graph.nodes.iter().enumerate() {
            if r.graph.get(&n.name) != Some(id as NodeId) {
                continue;
            }
            if !(n.name.contains("reduce_scatter") || n.name.contains("all_reduce")) {
                continue;
            }
            let (input, _) = r.graph.io(&r.dump, id as NodeId);
            let key = format!("{}.input.group", n.name);
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
            Val::Int(i) => Some(*i),
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
        let name = main.graph.nodes[c as usize].name.clone();
        if name.starts_with(ABM_ALL) {
            new_children.push(c);
            continue;
        }
        if !name.starts_with(ABM) {
            new_children.push(c);
            continue;
        }
        let all_name = format!("{ABM_ALL}.{counter}");
        counter += 1;
        let mut all = main.graph.nodes[c as usize].clone();
        all.name = all_name.clone();
        all.op = NodeOp::ApiCollection;
        all.parent = Some(ROOT);
        all.children = vec![c];
        all.entry = None;
        all.stack = Stack::Empty;
        all.micro_step = None;
        all.precision = None;
        all.overflow = None;
        all.partner = None;
        all.modified = false;
        let all_id = main.graph.nodes.len() as NodeId;
        main.graph.nodes.push(all);
        main.graph.index.insert(all_name, all_id);
        new_children.push(all_id);
        let seg = name.rsplit('.').next().unwrap_or("").to_string();
        let renamed = format!("{ABM}_Rank{}.{seg}", main.rank);
        main.graph.index.remove(&name);
        main.graph.nodes[c as usize].name = renamed.clone();
        main.graph.nodes[c as usize].parent = Some(all_id);
        main.graph.index.insert(renamed, c);
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
    let src = &o.graph.nodes[id as usize];
    let old = src.name.clone();
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
    let mut n = src.clone();
    n.name = new_name.clone();
    n.parent = parent;
    n.children = Vec::new();
    n.entry = None;
    n.partner = None;
    n.precision = None;
    n.modified = false;
    n.stack = match src.stack {
        Stack::Val(v) => Stack::Val(transplant(&o.dump.store, v, &mut main.dump.store)),
        s => s,
    };
    let (input, output) = o.graph.io(&o.dump, id);
    let rename = depth == 1;
    let mut conv = |m: ItemMap| -> ItemMap {
        m.into_iter()
            .map(|(key, it)| {
                let mut it = copy_item(&o.dump.store, &it, &mut main.dump.store);
                let key = if rename {
                    it.full_op_name = it.full_op_name.replace(&old, &new_name);
                    key.replace(&old, &new_name)
                } else {
                    key
                };
                (key, it)
            })
            .collect()
    };
    let io = (conv(input), conv(output));
    let nid = main.graph.nodes.len() as NodeId;
    main.graph.nodes.push(n);
    if depth <= 1 {
        main.graph.index.insert(new_name, nid);
    }
    if !io.0.is_empty() || !io.1.is_empty() {
        main.graph.io_override.insert(nid, io);
    }
    let kids = src.children.clone();
    for c in kids {
        let cid = adopt(main, o, c, Some(nid), None, depth + 1);
        main.graph.nodes[nid as usize].children.push(cid);
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
                .map(|x| transplant(src, *x, dst))
                .collect();
            dst.new_list(&items)
        }
        Val::Obj { .. } => {
            let items: Vec<_> = src
                .obj(v)
                .iter()
                .map(|(kk, x)| {
                    let key = dst.intern_key(src.key(*kk));
                    (key, transplant(src, *x, dst))
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

const STATS: [(&str, crate::json::KeyId); 4] = [
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
}

fn merge_tp(mut members: Vec<RankGraph>) -> RankGraph {
    if members.len() < 2 {
        // A one-rank group is returned as is.
        return members.remove(0);
    }
    let mut rest = members.split_off(1);
    let mut main = members.remove(0);
    {
        let mut tp = Tp {
            main: &mut main,
            others: &rest,
        };
        tp.run();
    }
    rest.clear();
    main
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
        self.g().get(&self.g().nodes[id as usize].name) == Some(id)
    }

    fn run(&mut self) {
        let count = self.g().nodes.len();
        for i in 0..count {
            let id = i as NodeId;
            if !self.in_node_map(id) {
                continue;
            }
            let n = &self.g().nodes[i];
            let Some(p) = n.parent else { continue };
            let pn = &self.g().nodes[p as usize];
            if pn.op != NodeOp::Module
                || pn.name == "clip_grad"
                || pn.name == "optimizer"
                || n.name.starts_with("Distributed")
                || self.has_info(id)
            {
                continue;
            }
            self.matmul_reduce(id);
            let others = self.need_merge(id);
            let (pin, pout) = self.param_data(id, &others, true);
            if !pin.is_empty() || !pout.is_empty() {
                let line = self.ranks_line(&others);
                self.info(id).push(line);
                let mut lines = self.merge_params(pin);
                lines.extend(self.merge_params(pout));
                self.info(id).extend(lines);
            }
        }
        for i in 0..self.g().nodes.len() {
            let id = i as NodeId;
            if self.in_node_map(id) {
                self.column_row(id);
            }
        }
    }

    fn ranks_line(&self, others: &[(usize, NodeId)]) -> String {
        let mut ranks = vec![self.main.rank.to_string()];
        ranks.extend(others.iter().map(|(r, _)| self.others[*r].rank.to_string()));
        format!("{TP_MERGED_INFO}[{}].", ranks.join(", "))
    }

    /// `_get_need_merge_node` (no TP mapping): the same name with the same ancestors in every other
    /// rank, else none.
    fn need_merge(&self, id: NodeId) -> Vec<(usize, NodeId)> {
        let g = self.g();
        let name = &g.nodes[id as usize].name;
        let anc: Vec<&str> = g
            .ancestors(id)
            .iter()
            .map(|a| g.nodes[*a as usize].name.as_str())
            .collect();
        let mut out = Vec::new();
        for (r, o) in self.others.iter().enumerate() {
            let Some(oid) = o.graph.get(name) else {
                return Vec::new();
            };
            let oanc: Vec<&str> = o
                .graph
                .ancestors(oid)
                .iter()
                .map(|a| o.graph.nodes[*a as usize].name.as_str())
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
        let name = self.g().nodes[id as usize].name.clone();
        let prefix = format!("{name}.");
        let other_io: Vec<(usize, ItemMap, ItemMap)> = others
            .iter()
            .map(|(r, oid)| {
                let o = &self.others[*r];
                let (i, out) = o.graph.io(&o.dump, *oid);
                (*r, i, out)
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
                for (r, oi, oo) in &other_io {
                    let om = if out { oo } else { oi };
                    let store = &self.others[*r].dump.store;
                    let op = match om.iter().find(|(kk, _)| kk == key) {
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
        let splits: Vec<&str> = n.name.split('.').collect();
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
            let cn = &self.g().nodes[*c as usize].name;
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
                let all_reduce = self.g().nodes[r as usize].name.contains("all_reduce");
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
                    let line = self.ranks_line(&others);
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
                    self.g().nodes[r as usize].name.clone()
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
        let splits: Vec<&str> = n.name.split('.').collect();
        if splits.len() < 4 {
            return;
        }
        if !(splits[splits.len() - 2] == "forward"
            && splits[splits.len() - 3].contains("ColumnParallelLinear"))
        {
            return;
        }
        let Some(p) = n.parent else { return };
        let siblings = &self.g().nodes[p as usize].children;
        let (mut start, mut end) = (None, None);
        for (i, s) in siblings.iter().enumerate() {
            let sn = &self.g().nodes[*s as usize].name;
            if sn.contains(n.name.as_str()) {
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
            if self.has_info(cur) || self.g().nodes[cur as usize].name.starts_with("Distributed") {
                continue;
            }
            let others = self.need_merge(cur);
            let (mut pin, mut pout) = self.param_data(cur, &others, false);
            if pin.is_empty() && pout.is_empty() {
                continue;
            }
            let line = self.ranks_line(&others);
            self.info(cur).push(line);
            let cn = &self.g().nodes[cur as usize];
            let matmul = cn.name.contains("matmul");
            if cur == first || (matmul && cn.parent == Some(first)) {
                pin.retain(|t| t.key != "input.0");
            } else if cur == last || (matmul && cn.parent == Some(last)) {
                pout.clear();
                pin.retain(|t| t.key != "parameters.bias");
            }
            let mut lines = self.merge_params(pin);
            lines.extend(self.merge_params(pout));
            self.info(cur).extend(lines);
        }
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

/// The rank folders of one step of a parallel run, per side.
#[derive(Debug, Clone)]
pub struct ParallelStep {
    pub step: i64,
    /// The step folder ("" without step folders), per side.
    pub npu_dir: String,
    pub bench_dir: Option<String>,
    /// (rank, folder) sorted by rank.
    pub npu: Vec<(i64, String)>,
    pub bench: Vec<(i64, String)>,
}

/// The steps of a parallel run (`_build_graph_ranks_parallel` / `_compare_graph_ranks_parallel`
/// per step): unlike a plain run, each side keeps its own rank folders.
pub fn plan(npu: &dyn Files, bench: Option<&dyn Files>) -> Result<(Vec<ParallelStep>, Vec<i64>)> {
    let p = crate::run::plan(npu, bench)?;
    let mut steps: Vec<ParallelStep> = Vec::new();
    for pair in &p.pairs {
        if steps.iter().any(|s| s.step == pair.step) {
            continue;
        }
        let parent = |d: &str| {
            d.rsplit_once('/')
                .map(|(a, _)| a.to_string())
                .unwrap_or_default()
        };
        let nd = parent(&pair.npu_dir);
        let bd = pair.bench_dir.as_deref().map(parent);
        let npu_ranks = crate::run::rank_folders(npu, &nd)?;
        let bench_ranks = match (bench, &bd) {
            (Some(b), Some(d)) => crate::run::rank_folders(b, d)?,
            _ => Vec::new(),
        };
        steps.push(ParallelStep {
            step: pair.step,
            npu_dir: nd,
            bench_dir: bd,
            npu: npu_ranks,
            bench: bench_ranks,
        });
    }
    Ok((steps, p.step_list))
}

/// One merged result of a step: the rank it is exported as, the rank folders, the pair.
#[derive(Debug)]
pub struct MergedPair {
    pub rank: i64,
    pub npu_dir: String,
    pub bench_dir: Option<String>,
    pub result: PairResult,
}

/// A whole parallel step: validate, build every rank, merge each side, then (with a bench side)
/// compare the i-th merged NPU graph with the i-th merged bench graph, with fuzzy matching and the
/// parallel-merge checker set.
pub fn run_step(
    npu: Vec<(i64, String, RankDump)>,
    bench: Option<Vec<(i64, String, RankDump)>>,
    params: &[ParallelParams],
    opts: &RunOptions,
) -> Result<Vec<MergedPair>> {
    if opts.overflow_check {
        return Err(Error::input(
            "-oc",
            "the overflow check (-oc) with parallel merge (--rank_size) is not supported yet",
        ));
    }
    let build = |side: Vec<(i64, String, RankDump)>| -> Result<Vec<RankGraph>> {
        side.into_iter()
            .map(|(r, d, dump)| RankGraph::build(r, d, dump))
            .collect()
    };
    let pn = params
        .first()
        .ok_or_else(|| Error::input("--rank_size", "missing parallel parameters"))?;
    let merged_n = merge(build(npu)?, pn)?;
    let Some(bench) = bench else {
        return Ok(merged_n
            .into_iter()
            .map(|mut m| {
                let diagnostics = std::mem::take(&mut m.dump.diagnostics);
                MergedPair {
                    rank: m.rank,
                    npu_dir: m.dir,
                    bench_dir: None,
                    result: PairResult {
                        npu: Side {
                            dump: m.dump,
                            graph: m.graph,
                        },
                        bench: None,
                        comparison: None,
                        mode: Mode::Build,
                        micro_steps: m.micro_steps,
                        diagnostics,
                    },
                }
            })
            .collect());
    };
    let pb = params
        .get(1)
        .ok_or_else(|| Error::input("--rank_size", "Parallel params error in compare graph!"))?;
    let merged_b = merge(build(bench)?, pb)?;
    if merged_n.len() != merged_b.len() {
        return Err(Error::input(
            "--rank_size",
            format!(
                "Parallel merge failed because the dp of npu: {} is inconsistent with that of bench: {}!",
                merged_n.len(),
                merged_b.len()
            ),
        ));
    }
    let mut out = Vec::new();
    for (mut n, mut b) in merged_n.into_iter().zip(merged_b) {
        let mut diagnostics = std::mem::take(&mut n.dump.diagnostics);
        diagnostics.append(&mut b.dump.diagnostics);
        let fw = |d: &RankDump| {
            d.framework.ok_or_else(|| {
                Error::input(&d.names.dump, "the dump must be based on the MindSpore or PyTorch framework (no framework key and no torch/mindspore tensor type found)")
            })
        };
        if fw(&n.dump)? != fw(&b.dump)? && opts.layer_mapping.is_none() {
            return Err(Error::input(
                format!("{} / {}", n.dump.names.dump, b.dump.names.dump),
                "the two dumps come from different frameworks; a cross-framework compare needs a layer mapping (-lm)",
            ));
        }
        let mode = compare_mode(&n.dump, &b.dump)?;
        crate::run::compare_framework(&n.dump, &b.dump)?;
        let copts = CompareOptions {
            fuzzy: true,
            layer_mapping: opts.layer_mapping.clone(),
            layout_aware: opts.layout_aware,
            parallel_merge: true,
        };
        let mut cmp = compare(&mut n.graph, &n.dump, &mut b.graph, &b.dump, mode, &copts);
        let micro_steps = n.graph.paging_by_micro_step(Some(&mut b.graph));
        diagnostics.append(&mut cmp.diagnostics);
        out.push(MergedPair {
            rank: n.rank,
            npu_dir: n.dir,
            bench_dir: Some(b.dir),
            result: PairResult {
                npu: Side {
                    dump: n.dump,
                    graph: n.graph,
                },
                bench: Some(Side {
                    dump: b.dump,
                    graph: b.graph,
                }),
                comparison: Some(cmp),
                mode,
                micro_steps,
                diagnostics,
            },
        });
    }
    Ok(out)
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
}
