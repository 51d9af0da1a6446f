//! Matching NPU nodes to bench nodes and comparing their tensors (msprobe's `GraphComparator`,
//! `get_accuracy` and the indicator checkers).
//!
//! Results are a side table ([`Comparison::results_of`]): for each compared NPU node, the compare
//! columns of each of its items. The graphs only receive `partner` links and `precision_index`.
//! A statistics or md5 compare keeps only which pair gave a node its rows and derives the rows
//! again when they are written or shown (as items are derived from the dump); real-tensor metrics
//! and the rows of a parallel merge, whose graphs change after the compare, are stored.

pub mod diagnose;
pub mod pair;
pub mod realdata;
pub mod suggest;

use crate::base::error::{Diagnostic, Error, Result};
use crate::base::HashMap;
use crate::formats::dump::RankDump;
use crate::formats::json::{KeyId, Store};
use crate::formats::keys::k;
use crate::graph::cells::{Cell, ItemResult};
use crate::graph::items::{Item, ItemMap, Mode, Num, Py, State};
use crate::graph::{Graph, NodeId, NodeOp, Precision, ROOT};
use crate::mapping::{api_mapping, api_mapping_of_sides, ApiMapping, LayerMapping, MappingSide};
use std::collections::VecDeque;

/// Options of one compare.
#[derive(Debug, Clone, Default)]
pub struct CompareOptions {
    /// `-fm`
    pub fuzzy: bool,
    /// `-lm [yaml]`: Some(mapping) enables layer-mapping matching (an empty mapping = bare `-lm`).
    pub layer_mapping: Option<LayerMapping>,
    /// Beyond msprobe (default off): tensors whose shapes are permutations of each other (Megatron
    /// `[s, b, h]` vs HF `[b, s, h]`) pass the shape check and are judged on their statistics,
    /// which a permutation does not change.
    pub layout_aware: bool,
    /// Parallel-merge compare (`--rank_size`): msprobe's `STATISTICS_CHECKERS_PARALLEL_MERGE` (no
    /// shape check) and `_rank<N>` stripped from API names for the ignore rules.
    pub parallel_merge: bool,
    /// The host's way to run independent work side by side (see [`crate::base::Join`]).
    pub join: Option<crate::base::Join>,
    /// Keep no rows: [`Comparison::results_of`] derives a node's rows again from its pair when
    /// asked (the rows of a large pair are tens of MB). Only for graphs whose items do not
    /// change after the compare (not a parallel merge's, see `merge::settle_shared`).
    pub derive_results: bool,
    /// With [`CompareOptions::derive_results`], for a host that reads every node's rows once
    /// after the compare (the CLI's export): the matched pairs are only recorded, and their
    /// rows and verdicts are made when they are read ([`Comparison::judge_with_io`]), so each
    /// pair is compared once instead of twice (in the compare and again in the export). The
    /// nodes' `precision` stays unset until then, except where the compare itself needs it:
    /// the children of an API collection (its verdict is their worst). The rows, verdicts and
    /// warnings are the same; the warnings come from the reads, in the reader's order.
    pub defer_verdicts: bool,
}

impl ItemResult {
    /// `values` (the compare's own columns, the first of `keys`) and then the verdict columns a
    /// statistics or real-tensor compare ends with: requires_grad consistency, result, messages.
    pub(crate) fn with_verdict(
        keys: &'static [KeyId],
        values: impl IntoIterator<Item = Py>,
        rg_consistent: bool,
        level: Level,
        msgs: &[&'static str],
    ) -> ItemResult {
        let mut cells: Vec<Cell> = Vec::with_capacity(keys.len());
        cells.extend(values.into_iter().map(Cell::from_py));
        cells.push(Cell::B(rg_consistent));
        cells.push(Cell::Lit(level.lit()));
        cells.push(Cell::Lit(err_message(msgs)));
        ItemResult {
            keys,
            cells: cells.into_boxed_slice(),
        }
    }
}

/// `results[name] = cols` on a node's ordered dict of item results: replaced in place, else
/// appended.
pub(crate) fn set_result(results: &mut Vec<(String, ItemResult)>, name: String, cols: ItemResult) {
    match results.iter_mut().find(|(kk, _)| *kk == name) {
        Some(slot) => slot.1 = cols,
        None => results.push((name, cols)),
    }
}

/// The columns of a statistics compare.
pub const STAT_COLUMNS: [KeyId; 11] = [
    k::MAX_DIFF,
    k::MIN_DIFF,
    k::MEAN_DIFF,
    k::NORM_DIFF,
    k::MAX_REL,
    k::MIN_REL,
    k::MEAN_REL,
    k::NORM_REL,
    k::RG_CONSISTENT,
    k::RESULT,
    k::ERR_MESSAGE,
];

/// The columns of an md5 compare.
pub const MD5_COLUMNS: [KeyId; 3] = [k::RESULT, k::RG_CONSISTENT, k::ERR_MESSAGE];

/// The two graphs and dumps of a compare, from which [`Comparison::results_of`] derives rows.
#[derive(Clone, Copy)]
pub struct Sides<'a> {
    pub gn: &'a Graph,
    pub dn: &'a RankDump,
    pub gb: &'a Graph,
    pub db: &'a RankDump,
}

/// A node's compare columns per item key, in the order msprobe writes them.
pub type NodeResults = Vec<(String, ItemResult)>;

/// The outcome of comparing two graphs.
#[derive(Debug)]
pub struct Comparison {
    /// Stored results: NPU node -> (item key -> compare columns). Read them through
    /// [`Comparison::results_of`], which also derives the ones not stored.
    pub results: HashMap<NodeId, NodeResults>,
    /// With [`CompareOptions::derive_results`]: NPU node -> the Bench node whose compare gave it
    /// rows ([`NO_NODE`]: none); the rows themselves are derived again on demand.
    derived: Vec<NodeId>,
    derive: bool,
    /// [`CompareOptions::defer_verdicts`] was in effect: the derived pairs' verdicts are made
    /// when they are read.
    deferred: bool,
    mode: Mode,
    pub diagnostics: Vec<Diagnostic>,
    /// Real-data mode: matched (NPU, bench) pairs whose tensors are still to be compared
    /// (msprobe's `compare_nodes`, done after matching by `realdata::compare_tensors`).
    pub real_data: Vec<(NodeId, NodeId)>,
    /// The compare was made with [`CompareOptions::layout_aware`]; manual matches follow it.
    pub layout_aware: bool,
    /// The compare was made with [`CompareOptions::parallel_merge`].
    pub parallel_merge: bool,
}

/// No node (an empty slot of [`Comparison`]'s derived pairs).
const NO_NODE: NodeId = NodeId::MAX;

impl Comparison {
    /// The compare columns of NPU node `n`: stored, or derived again from the pair whose compare
    /// gave them (the same rows: the compare is a function of the two nodes' items).
    pub fn results_of(
        &self,
        sides: Sides,
        n: NodeId,
    ) -> Option<std::borrow::Cow<'_, [(String, ItemResult)]>> {
        self.results_with_io(sides, n, None)
    }

    /// [`Comparison::results_of`] with the node's own items (`Graph::io`) when the caller has
    /// them already (the export formats them anyway).
    pub fn results_with_io(
        &self,
        sides: Sides,
        n: NodeId,
        io: Option<(&ItemMap, &ItemMap)>,
    ) -> Option<std::borrow::Cow<'_, [(String, ItemResult)]>> {
        self.read(sides, n, io, None).rows
    }

    /// The Bench node whose items a read of `n`'s rows derives (its rows are derived again
    /// from that pair, not stored): a caller that needs that node's items anyway derives them
    /// once and passes them to [`Comparison::judge_with_io`].
    pub fn derived_partner(&self, n: NodeId) -> Option<NodeId> {
        if self.results.contains_key(&n) {
            return None;
        }
        self.derived
            .get(n as usize)
            .copied()
            .filter(|b| *b != NO_NODE)
    }

    /// [`Comparison::results_with_io`] with the node's verdict: the graph's, or, where the
    /// compare deferred it, the one its rows give now, and the warning a pair that cannot be
    /// compared gives (reported by the compare itself when nothing was deferred). `partner_io`:
    /// the items of `n`'s [`Comparison::derived_partner`] when the caller has them (`Graph::io`
    /// on the Bench side), or None to derive them here.
    pub fn judge_with_io(
        &self,
        sides: Sides,
        n: NodeId,
        io: Option<(&ItemMap, &ItemMap)>,
        partner_io: Option<(&ItemMap, &ItemMap)>,
    ) -> Judged<'_> {
        let graph = sides.gn.node(n).precision().map(|p| p.0);
        let mut j = self.read(sides, n, io, partner_io);
        if self.deferred {
            j.precision = j.precision.or(graph);
        } else {
            j.precision = graph;
            j.warning = None;
        }
        j
    }

    /// Node `n`'s rows: stored, or derived again from its pair, then with the precision and
    /// warning that compare gives (none for stored rows).
    fn read(
        &self,
        sides: Sides,
        n: NodeId,
        io: Option<(&ItemMap, &ItemMap)>,
        partner_io: Option<(&ItemMap, &ItemMap)>,
    ) -> Judged<'_> {
        let mut j = Judged {
            rows: None,
            precision: None,
            warning: None,
        };
        if let Some(r) = self.results.get(&n) {
            j.rows = Some(std::borrow::Cow::Borrowed(r.as_slice()));
            return j;
        }
        let Some(b) = self.derived_partner(n) else {
            return j;
        };
        let Sides { gn, dn, gb, db } = sides;
        match pair_outcome(gn, dn, gb, db, self.mode, self, n, b, io, partner_io) {
            PairOutcome::Rows(r, p) => {
                j.rows = Some(std::borrow::Cow::Owned(r));
                j.precision = Some(p);
            }
            PairOutcome::Warn(d) => j.warning = Some(d),
            PairOutcome::Nothing | PairOutcome::Judged(_) => {}
        }
        j
    }

    /// The NPU nodes that have compare columns, in id order.
    pub fn nodes_with_results(&self) -> Vec<NodeId> {
        let mut v: Vec<NodeId> = self.results.keys().copied().collect();
        v.extend(
            (0..self.derived.len() as NodeId).filter(|n| self.derived[*n as usize] != NO_NODE),
        );
        v.sort_unstable();
        v.dedup();
        v
    }

    /// Drops the compare columns of NPU node `n`.
    fn forget(&mut self, n: NodeId) {
        self.results.remove(&n);
        if let Some(b) = self.derived.get_mut(n as usize) {
            *b = NO_NODE;
        }
    }

    /// Sets the compare columns of NPU node `n`, compared with Bench node `b`.
    fn keep(&mut self, n: NodeId, b: NodeId, rows: Option<NodeResults>) {
        match rows {
            Some(rows) if !self.derive => {
                self.results.insert(n, rows);
            }
            _ => {
                self.results.remove(&n);
                let i = n as usize;
                if self.derived.len() <= i {
                    self.derived.resize(i + 1, NO_NODE);
                }
                self.derived[i] = b;
            }
        }
    }
}

/// msprobe's compare mode from the two dumps (`get_dump_mode`).
pub fn compare_mode(npu: &RankDump, bench: &RankDump) -> Result<Mode> {
    for d in [npu, bench] {
        if d.task.as_deref().unwrap_or("").is_empty() {
            return Err(Error::schema(
                &d.names.dump,
                "task",
                "the dump task is empty or missing",
            ));
        }
        if !d.has_data_key {
            return Err(Error::schema(
                &d.names.dump,
                "data",
                "missing 'data' in dump.json",
            ));
        }
    }
    let (tn, tb) = (
        npu.task.as_deref().unwrap_or(""),
        bench.task.as_deref().unwrap_or(""),
    );
    if tn != tb {
        return Err(Error::input(
            format!("{} / {}", npu.names.dump, bench.names.dump),
            format!("the dump tasks differ (NPU \"{tn}\", Bench \"{tb}\"); both sides must be dumped with the same task"),
        ));
    }
    match tn {
        "tensor" => Ok(Mode::RealData),
        "structure" => Ok(Mode::Structure),
        "statistics" => match (npu.has_md5, bench.has_md5) {
            (true, true) => Ok(Mode::Md5),
            (false, false) => Ok(Mode::Summary),
            _ => Err(Error::input(
                format!("{} / {}", npu.names.dump, bench.names.dump),
                "one side has md5 values and the other has not; dump both sides with the same summary_mode (statistics or md5)",
            )),
        },
        other => Err(Error::schema(
            &npu.names.dump,
            "task",
            format!("compare applies only to task \"tensor\", \"statistics\" or \"structure\", found \"{other}\""),
        )),
    }
}

/// The `task` written to tb_config for a mode.
pub fn mode_task(mode: Mode) -> &'static str {
    match mode {
        Mode::Build => "",
        Mode::Summary => "summary",
        Mode::Md5 => "md5",
        Mode::RealData => "all",
        Mode::Structure => "structure",
    }
}

struct Ctx<'a> {
    gn: &'a mut Graph,
    dn: &'a RankDump,
    gb: &'a mut Graph,
    db: &'a RankDump,
    mode: Mode,
    out: &'a mut Comparison,
    /// Pairs whose rows wait for [`Ctx::flush`] (the matching walk: nothing in it reads a
    /// verdict or removes a result, so the rows can be made afterwards, side by side); None:
    /// each pair is compared when it is linked (manual matching unlinks as it goes).
    pending: Option<Vec<(NodeId, NodeId)>>,
}

/// A node's compare columns and verdict as [`Comparison::judge_with_io`] reads them.
pub struct Judged<'a> {
    pub rows: Option<std::borrow::Cow<'a, [(String, ItemResult)]>>,
    pub precision: Option<f64>,
    /// Why a deferred pair was not compared (see [`CompareOptions::defer_verdicts`]).
    pub warning: Option<Diagnostic>,
}

/// What comparing one matched pair gives.
enum PairOutcome {
    Nothing,
    Warn(Diagnostic),
    /// The rows per item key and the node's precision.
    Rows(NodeResults, f64),
    /// The node's precision, its rows dropped to be derived again ([`Comparison::results_of`]).
    Judged(f64),
}

/// Matches and compares `gn` (NPU) against `gb` (bench), as `GraphComparator.compare`.
pub fn compare(
    gn: &mut Graph,
    dn: &RankDump,
    gb: &mut Graph,
    db: &RankDump,
    mode: Mode,
    opts: &CompareOptions,
) -> Comparison {
    let mapping = layer_mapping_of(dn, db, opts);
    compare_mapped(gn, dn, gb, db, mode, opts, mapping)
}

/// What [`CompareOptions::layer_mapping`] maps on these dumps (None without a layer mapping):
/// a function of the dumps alone, so a host may make it before it builds the graphs (its
/// working set is then not on top of theirs) and pass it to [`compare_mapped`].
pub fn layer_mapping_of<'a>(
    dn: &'a RankDump,
    db: &'a RankDump,
    opts: &CompareOptions,
) -> Option<std::result::Result<ApiMapping<'a>, String>> {
    let lm = opts.layer_mapping.as_ref()?;
    Some(api_mapping(dn, db, lm, opts.join))
}

/// [`layer_mapping_of`] with either side's part made already ([`MappingSide::new`] on that
/// dump, e.g. while the other dump was still being parsed).
pub fn layer_mapping_of_sides<'a>(
    dn: &'a RankDump,
    db: &'a RankDump,
    opts: &CompareOptions,
    npu_side: Option<MappingSide<'a>>,
    bench_side: Option<MappingSide<'a>>,
) -> Option<std::result::Result<ApiMapping<'a>, String>> {
    let lm = opts.layer_mapping.as_ref()?;
    Some(api_mapping_of_sides(
        dn, db, lm, opts.join, npu_side, bench_side,
    ))
}

/// [`compare`] with the layer mapping [`layer_mapping_of`] made on `dn` and `db`.
pub fn compare_mapped(
    gn: &mut Graph,
    dn: &RankDump,
    gb: &mut Graph,
    db: &RankDump,
    mode: Mode,
    opts: &CompareOptions,
    layer_mapping: Option<std::result::Result<ApiMapping, String>>,
) -> Comparison {
    let mut mapping: Option<ApiMapping> = None;
    let mut diagnostics = Vec::new();
    if let Some(made) = layer_mapping {
        match made {
            Ok(m) => mapping = Some(m),
            Err(why) => {
                diagnostics.push(Diagnostic::warning(
                    "",
                    format!("the layer mapping is not effective (msprobe: \"The layer mapping file parsing failed\"): {why}"),
                ));
                mapping = Some(ApiMapping::default());
            }
        }
    }
    let mut out = Comparison {
        results: HashMap::default(),
        derived: Vec::new(),
        derive: opts.derive_results,
        deferred: opts.derive_results && opts.defer_verdicts,
        mode,
        diagnostics,
        real_data: Vec::new(),
        layout_aware: opts.layout_aware,
        parallel_merge: opts.parallel_merge,
    };
    let mut cx = Ctx {
        gn,
        dn,
        gb,
        db,
        mode,
        out: &mut out,
        pending: Some(Vec::new()),
    };
    let mut queue: VecDeque<NodeId> = VecDeque::from([ROOT]);
    while let Some(n) = queue.pop_front() {
        if opts.fuzzy {
            cx.fuzzy_one(n);
        } else if let Some(m) = &mapping {
            let name = cx.gn.name(n);
            // A dump name (nearly all) by its id: the mapping is indexed by the NPU dump's names.
            let mapped = match cx.gn.names.dump_id(cx.gn.nodes[n as usize].name) {
                Some(id) => m.get_id(id),
                None => m.get(name),
            };
            let target = mapped.unwrap_or(name);
            if let Some(b) = cx.gb.get(target) {
                cx.link(n, b);
                cx.compare_pair(n, b);
            }
        } else {
            let name = cx.gn.name(n);
            if let Some(b) = cx.gb.get(name) {
                let an: Vec<&str> = cx.gn.ancestors(n).iter().map(|a| cx.gn.name(*a)).collect();
                let ab: Vec<&str> = cx.gb.ancestors(b).iter().map(|a| cx.gb.name(*a)).collect();
                if an == ab {
                    cx.link(n, b);
                    cx.compare_pair(n, b);
                }
            }
        }
        queue.extend(cx.gn.nodes[n as usize].children.iter().copied());
    }
    // The matching is done: its name map is not kept through the compare of the pairs.
    drop(mapping);
    cx.flush(opts.join);
    collection_index(cx.gn);
    out
}

/// Manual matching (the page's Match button): links `n` (NPU) and `b` (bench), compares them by
/// msprobe's rules for `mode`, and with `recursive` also matches their descendants whose names
/// correspond under the new pair (same name, or the same name with the pair's module path
/// swapped). Every node it links is marked `modified`. Returns the NPU nodes it linked.
#[allow(clippy::too_many_arguments)]
pub fn manual_match(
    gn: &mut Graph,
    dn: &RankDump,
    gb: &mut Graph,
    db: &RankDump,
    mode: Mode,
    out: &mut Comparison,
    n: NodeId,
    b: NodeId,
    recursive: bool,
) -> Vec<NodeId> {
    let mut cx = Ctx {
        gn,
        dn,
        gb,
        db,
        mode,
        out,
        pending: None,
    };
    let mut linked = Vec::new();
    let mut todo = vec![(n, b)];
    while let Some((n, b)) = todo.pop() {
        cx.unlink(n, true);
        cx.unlink(b, false);
        cx.link(n, b);
        cx.gn.nodes[n as usize].modified = true;
        cx.gb.nodes[b as usize].modified = true;
        cx.compare_pair(n, b);
        linked.push(n);
        if !recursive {
            continue;
        }
        let pn = module_path(cx.gn.name(n));
        let pb = module_path(cx.gb.name(b));
        let bench_children: HashMap<String, NodeId> = cx.gb.nodes[b as usize]
            .children
            .iter()
            .map(|c| (cx.gb.name(*c).to_string(), *c))
            .collect();
        for c in cx.gn.nodes[n as usize].children.clone() {
            let name = cx.gn.name(c).to_string();
            let swapped = match (&pn, &pb) {
                (Some(a), Some(z)) if name.starts_with(a.as_str()) => {
                    Some(format!("{z}{}", &name[a.len()..]))
                }
                _ => None,
            };
            let hit = bench_children
                .get(&name)
                .or_else(|| swapped.as_ref().and_then(|s| bench_children.get(s)));
            if let Some(&bc) = hit {
                todo.push((c, bc));
            }
        }
    }
    collection_index(cx.gn);
    linked
}

/// Removes the link of `id` (NPU side if `npu`) and of its partner, with the compare results.
pub fn unmatch(gn: &mut Graph, gb: &mut Graph, out: &mut Comparison, id: NodeId, npu: bool) {
    let (n, b) = if npu {
        (Some(id), gn.nodes[id as usize].partner())
    } else {
        (gb.nodes[id as usize].partner(), Some(id))
    };
    if let Some(n) = n {
        if npu || gn.nodes[n as usize].partner() == b {
            let node = &mut gn.nodes[n as usize];
            node.set_partner(None);
            node.set_precision(None);
            node.modified = true;
            out.forget(n);
        }
    }
    if let Some(b) = b {
        if !npu || gb.nodes[b as usize].partner() == n {
            let node = &mut gb.nodes[b as usize];
            node.set_partner(None);
            node.modified = true;
        }
    }
    collection_index(gn);
}

/// The module path of a module node name (`Module.a.b.Linear.forward.0` -> `Module.a.b.`), used to
/// carry a manual pair's renaming down to its children.
fn module_path(name: &str) -> Option<String> {
    let segs: Vec<&str> = name.split('.').collect();
    if segs.len() < 5 || !(segs[0] == "Module" || segs[0] == "Cell") {
        return None;
    }
    Some(format!("{}.", segs[..segs.len() - 3].join(".")))
}

/// `_handle_api_collection_index`: a collection takes the worst verdict of its APIs.
pub fn collection_index(gn: &mut Graph) {
    fn worst(gn: &mut Graph, c: NodeId) {
        let mut p = 0.0f64;
        for a in gn.nodes[c as usize].children.clone() {
            let v = gn.nodes[a as usize].precision().map(|x| x.0).unwrap_or(0.0);
            if v > p {
                p = v;
            }
        }
        gn.nodes[c as usize].set_precision(Some(Precision(p)));
    }
    let root_children = gn.nodes[ROOT as usize].children.clone();
    for c in root_children {
        if gn.nodes[c as usize].op != NodeOp::ApiCollection {
            continue;
        }
        // A parallel merge's `Apis_Between_Modules_All_Ranks.k`: its per-rank collections first.
        if gn.name(c).starts_with("Apis_Between_Modules_All_Ranks") {
            for sub in gn.nodes[c as usize].children.clone() {
                worst(gn, sub);
            }
        }
        worst(gn, c);
    }
}

impl Ctx<'_> {
    /// Drops an existing link of a node before it is linked anew.
    fn unlink(&mut self, id: NodeId, npu: bool) {
        if npu {
            if let Some(old) = self.gn.nodes[id as usize].take_partner() {
                if self.gb.nodes[old as usize].partner() == Some(id) {
                    self.gb.nodes[old as usize].set_partner(None);
                }
            }
            self.gn.nodes[id as usize].set_precision(None);
            self.out.forget(id);
        } else if let Some(old) = self.gb.nodes[id as usize].take_partner() {
            if self.gn.nodes[old as usize].partner() == Some(id) {
                self.gn.nodes[old as usize].set_partner(None);
                self.gn.nodes[old as usize].set_precision(None);
                self.out.forget(old);
            }
        }
    }

    fn link(&mut self, n: NodeId, b: NodeId) {
        self.gn.nodes[n as usize].set_partner(Some(b));
        self.gb.nodes[b as usize].set_partner(Some(n));
    }

    fn fuzzy_one(&mut self, n: NodeId) {
        if self.gn.nodes[n as usize].op == NodeOp::FunctionApi {
            return;
        }
        let Some(b) = self.gb.get(self.gn.name(n)) else {
            return;
        };
        self.link(n, b);
        self.compare_pair(n, b);
        let rn = recount(self.gn, n);
        let rb: HashMap<String, NodeId> = recount(self.gb, b).into_iter().collect();
        for (key, api_n) in rn {
            // msprobe resolves the recounted ids through `node_map` (which matters where a
            // parallel merge left two nodes of one name: the map holds the later one).
            let Some(api_n) = self.gn.get(self.gn.name(api_n)) else {
                continue;
            };
            let Some(&api_b) = rb.get(&key) else { continue };
            let Some(api_b) = self.gb.get(self.gb.name(api_b)) else {
                continue;
            };
            self.link(api_n, api_b);
            self.compare_pair(api_n, api_b);
        }
    }

    fn compare_pair(&mut self, n: NodeId, b: NodeId) {
        if matches!(self.mode, Mode::RealData) {
            // The metrics need the tensor files: queued for `realdata::compare_tensors`.
            self.out.real_data.push((n, b));
            return;
        }
        if let Some(p) = &mut self.pending {
            p.push((n, b));
            return;
        }
        let o = pair_outcome(
            self.gn, self.dn, self.gb, self.db, self.mode, self.out, n, b, None, None,
        );
        self.apply(n, b, o);
    }

    /// Compares the pending pairs (in two halves through `join`) and applies the outcomes in
    /// the order the pairs were linked.
    fn flush(&mut self, join: Option<crate::base::Join>) {
        let Some(pending) = self.pending.take() else {
            return;
        };
        // Deferred: only the pairs whose verdicts the compare reads are compared now (an API
        // collection's children: `collection_index`); the others are recorded for the reads.
        let pending = if self.out.deferred {
            let gn = &*self.gn;
            let (now, later): (Vec<_>, Vec<_>) = pending.into_iter().partition(|&(n, _)| {
                gn.node(n)
                    .parent()
                    .is_some_and(|p| gn.node(p).op == NodeOp::ApiCollection)
            });
            for (n, b) in later {
                self.out.keep(n, b, None);
            }
            now
        } else {
            pending
        };
        let (gn, dn, gb, db, mode) = (&*self.gn, self.dn, &*self.gb, self.db, self.mode);
        let out = &*self.out;
        let derive = out.derive;
        let run = |pairs: &[(NodeId, NodeId)]| -> Vec<PairOutcome> {
            pairs
                .iter()
                .map(
                    |&(n, b)| match pair_outcome(gn, dn, gb, db, mode, out, n, b, None, None) {
                        // Rows to be derived again are dropped as soon as they are judged.
                        PairOutcome::Rows(_, p) if derive => PairOutcome::Judged(p),
                        o => o,
                    },
                )
                .collect()
        };
        let (a, z) = pending.split_at(pending.len() / 2);
        let (oa, oz) = crate::base::join2(join, || run(a), || run(z));
        for (&(n, b), o) in pending.iter().zip(oa.into_iter().chain(oz)) {
            self.apply(n, b, o);
        }
    }

    fn apply(&mut self, n: NodeId, b: NodeId, o: PairOutcome) {
        let (rows, p) = match o {
            PairOutcome::Nothing => return,
            PairOutcome::Warn(d) => return self.out.diagnostics.push(d),
            PairOutcome::Rows(res, p) => (Some(res), p),
            PairOutcome::Judged(p) => (None, p),
        };
        self.out.keep(n, b, rows);
        self.gn.nodes[n as usize].set_precision(Some(Precision(p)));
    }
}

/// Compares the matched pair (`n`, `b`): rows, checkers, the node's verdict. `io`: `n`'s items
/// (`gn.io(dn, n)`) and `partner_io`: `b`'s (`gb.io(db, b)`) when the caller has them, else
/// they are derived here.
#[allow(clippy::too_many_arguments)]
fn pair_outcome(
    gn: &Graph,
    dn: &RankDump,
    gb: &Graph,
    db: &RankDump,
    mode: Mode,
    out: &Comparison,
    n: NodeId,
    b: NodeId,
    io: Option<(&ItemMap, &ItemMap)>,
    partner_io: Option<(&ItemMap, &ItemMap)>,
) -> PairOutcome {
    let (own, partner);
    let (in_n, out_n) = match io {
        Some(io) => io,
        None => {
            own = gn.io(dn, n);
            (&own.0, &own.1)
        }
    };
    let (in_b, out_b) = match partner_io {
        Some(io) => io,
        None => {
            partner = gb.io(db, b);
            (&partner.0, &partner.1)
        }
    };
    let name = gn.name(n);
    let rows = match rows_for(&dn.store, in_n, out_n, &db.store, in_b, out_b, mode) {
        Ok(r) => r,
        Err(why) => {
            return PairOutcome::Warn(Diagnostic::warning(
                &dn.names.dump,
                format!("{name}: not compared: {why}"),
            ))
        }
    };
    if rows.is_empty() {
        return PairOutcome::Nothing;
    }
    if mode == Mode::Structure {
        return PairOutcome::Warn(Diagnostic::warning(
            &dn.names.dump,
            format!("{name}: a structure dump with data cannot be compared (msprobe fails here)"),
        ));
    }
    let (level, rows) = run_checkers(
        &dn.store,
        &db.store,
        rows,
        mode,
        out.layout_aware,
        out.parallel_merge,
    );
    let mut res: Vec<(String, ItemResult)> = Vec::new();
    for mut r in rows {
        let n_name = std::mem::take(&mut r.n_name);
        set_result(&mut res, n_name, r.into_columns(mode));
    }
    let mut p = match level {
        Level::Pass => 0.0,
        Level::Warning => 0.5,
        Level::Error => 1.0,
    };
    if let Some(seg) = name.split('.').nth(1) {
        if IGNORE_PRECISION.contains(&seg) {
            p = if mode == Mode::Md5 { 1.0 } else { 0.0 };
        }
    }
    PairOutcome::Rows(res, p)
}

pub(crate) const IGNORE_PRECISION: [&str; 6] = [
    "empty",
    "empty_like",
    "empty_with_format",
    "new_empty_strided",
    "new_empty",
    "empty_strided",
];

/// `_recount_api_node`: direct API children keyed by name without call counters, numbered 1, 2, ...
fn recount(g: &Graph, id: NodeId) -> Vec<(String, NodeId)> {
    let mut counts: HashMap<String, usize> = HashMap::default();
    let mut out = Vec::new();
    for c in &g.nodes[id as usize].children {
        let node = &g.nodes[*c as usize];
        if node.op != NodeOp::FunctionApi {
            continue;
        }
        let mut key = strip_counters(g.name_of(node));
        if key.contains("_rank") {
            key = strip_rank(&key);
        }
        let n = counts.entry(key.clone()).or_insert(0);
        *n += 1;
        out.push((format!("{key}{n}"), *c));
    }
    out
}

/// `re.sub(r'\.\d+\.', '.', s)`: non-overlapping `.digits.` runs become `.`.
fn strip_counters(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = String::with_capacity(s.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'.' {
            let mut j = i + 1;
            while j < b.len() && b[j].is_ascii_digit() {
                j += 1;
            }
            if j > i + 1 && j < b.len() && b[j] == b'.' {
                out.push('.');
                i = j + 1;
                continue;
            }
        }
        // Push one char (UTF-8 safe).
        let ch = s[i..].chars().next().unwrap_or('\u{FFFD}');
        out.push(ch);
        i += ch.len_utf8();
    }
    out
}

/// `re.sub(r'_rank\d+$', '', api)`.
fn strip_rank_suffix(api: &str) -> &str {
    match api.rfind("_rank") {
        Some(p) if p + 5 < api.len() && api[p + 5..].bytes().all(|b| b.is_ascii_digit()) => {
            &api[..p]
        }
        _ => api,
    }
}

/// `re.sub(r'_rank\d+', '', s)`.
fn strip_rank(s: &str) -> String {
    let mut out = String::new();
    let mut rest = s;
    while let Some(p) = rest.find("_rank") {
        let after = &rest[p + 5..];
        let digits = after.bytes().take_while(|c| c.is_ascii_digit()).count();
        if digits > 0 {
            out.push_str(&rest[..p]);
            rest = &after[digits..];
        } else {
            out.push_str(&rest[..p + 5]);
            rest = after;
        }
    }
    out.push_str(rest);
    out
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    Pass,
    Warning,
    Error,
}

impl Level {
    pub fn as_str(self) -> &'static str {
        self.lit()
    }
    pub(crate) fn lit(self) -> &'static &'static str {
        match self {
            Level::Pass => &"pass",
            Level::Warning => &"warning",
            Level::Error => &"error",
        }
    }
}

/// Which store a row value lives in (NPU or bench items).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct V {
    pub(crate) py: Py,
    pub(crate) bench: bool,
}

/// One compare row (a line of msprobe's compare table).
#[derive(Debug, Clone)]
pub(crate) struct Row {
    pub(crate) n_name: String,
    pub(crate) b_name: String,
    pub(crate) n_dtype: Py,
    pub(crate) b_dtype: V,
    pub(crate) n_shape: Py,
    pub(crate) b_shape: V,
    pub(crate) n_rg: Py,
    pub(crate) b_rg: V,
    /// Max/Min/Mean/L2norm diff, then the four relative errors.
    pub(crate) cols: [Py; 8],
    pub(crate) n_stats: [Py; 4],
    pub(crate) b_stats: [V; 4],
    pub(crate) n_md5: Py,
    pub(crate) b_md5: V,
    pub(crate) rg_consistent: bool,
    pub(crate) level: Level,
    pub(crate) msgs: Vec<&'static str>,
    pub(crate) extra: bool,
}

impl Row {
    pub(crate) fn is_output(&self) -> bool {
        crate::base::has(&self.n_name, ".output.")
    }
    /// The compare columns of the row (consumes it: the cells move, nothing is copied).
    fn into_columns(self, mode: Mode) -> ItemResult {
        match mode {
            Mode::Md5 => ItemResult {
                keys: &MD5_COLUMNS,
                cells: Box::new([
                    Cell::Lit(self.level.lit()),
                    Cell::B(self.rg_consistent),
                    Cell::Lit(err_message(&self.msgs)),
                ]),
            },
            _ => ItemResult::with_verdict(
                &STAT_COLUMNS,
                self.cols,
                self.rg_consistent,
                self.level,
                &self.msgs,
            ),
        }
    }
}

/// `json.dumps(messages)` for a row's messages. The messages are this crate's own texts, so
/// their lists are few (a handful of combinations in any run): each distinct list is written
/// once per process and shared by every row that has it, instead of a string per row.
pub(crate) fn err_message(msgs: &[&'static str]) -> &'static &'static str {
    use std::sync::{Mutex, OnceLock};
    type Seen = Mutex<HashMap<Vec<&'static str>, &'static &'static str>>;
    static SEEN: OnceLock<Seen> = OnceLock::new();
    if msgs.is_empty() {
        return &"[]";
    }
    let seen = SEEN.get_or_init(|| Mutex::new(HashMap::default()));
    let mut m = match seen.lock() {
        Ok(m) => m,
        Err(p) => p.into_inner(),
    };
    if let Some(s) = m.get(msgs) {
        return s;
    }
    let text: &'static str = Box::leak(crate::formats::pyfmt::json_str_list(msgs).into_boxed_str());
    let s: &'static &'static str = Box::leak(Box::new(text));
    m.insert(msgs.to_vec(), s);
    s
}

struct Merged {
    names: Vec<String>,
    rg: Vec<Py>,
    summary: Vec<[Py; 4]>,
    /// (dtype, shape, md5) per section: input, parameters, output, parameters_grad.
    structs: [Vec<(Py, Py, Py)>; 4],
}

fn merge<'i>(items: impl Iterator<Item = &'i Item>) -> Result<Merged, String> {
    let n = items.size_hint().0;
    let mut m = Merged {
        names: Vec::with_capacity(n),
        rg: Vec::with_capacity(n),
        summary: Vec::with_capacity(n),
        structs: Default::default(),
    };
    let mut debug = 0usize;
    for it in items {
        m.names.push(it.full_op_name.clone());
        m.rg.push(it.get_or_none(k::REQUIRES_GRAD));
        let sec = match it.state {
            State::Input => 0,
            State::Parameters => 1,
            State::Output => 2,
            State::ParametersGrad => 3,
            State::Debug => {
                debug += 1;
                continue;
            }
        };
        m.structs[sec].push((
            it.get_or_none(k::DTYPE),
            it.get_or_none(k::SHAPE),
            it.get_or_none(k::MD5),
        ));
        let s = |key| {
            let v = it.get_or_none(key);
            if v.is_none() {
                Py::Lit("None")
            } else {
                v
            }
        };
        m.summary
            .push([s(k::MAX), s(k::MIN), s(k::MEAN), s(k::NORM)]);
    }
    if debug > 0 {
        return Err("debug items cannot be compared (names and structs do not match)".into());
    }
    Ok(m)
}

/// `v[i]` moved out (a default left behind), or the default when `v` is shorter.
fn take<T: Default>(v: &mut [T], i: usize) -> T {
    v.get_mut(i).map(std::mem::take).unwrap_or_default()
}

fn is_num(p: &Py, store: &Store) -> Option<Num> {
    p.num(store)
}

/// `process_summary_data`: NaN floats become the string 'Nan'.
fn process(p: &Py) -> Py {
    match p {
        Py::F(f) | Py::V(crate::formats::json::Val::Float(f)) if f.is_nan() => Py::Lit("Nan"),
        other => other.clone(),
    }
}

/// `str(x) in ('inf', '-inf', 'nan')`, without formatting every number.
fn is_tab_value(p: &Py, store: &Store) -> bool {
    match p {
        Py::F(f) | Py::V(crate::formats::json::Val::Float(f)) => !f.is_finite(),
        Py::S(s) => s == "inf" || s == "-inf" || s == "nan",
        Py::Lit(s) => *s == "inf" || *s == "-inf" || *s == "nan",
        Py::V(crate::formats::json::Val::Str(r)) => matches!(store.str(*r), "inf" | "-inf" | "nan"),
        _ => false,
    }
}

fn tabbed(p: &Py, store: &Store) -> Py {
    if is_tab_value(p, store) {
        Py::S(format!("{}\t", p.to_py_str(store)))
    } else {
        p.clone()
    }
}

#[allow(clippy::too_many_arguments)]
pub(crate) fn rows_for(
    sn: &Store,
    in_n: &ItemMap,
    out_n: &ItemMap,
    sb: &Store,
    in_b: &ItemMap,
    out_b: &ItemMap,
    mode: Mode,
) -> Result<Vec<Row>, String> {
    // Each merged value goes to one row: moved out, not copied.
    let mut mn = merge(in_n.iter().chain(out_n.iter()).map(|(_, it)| it))?;
    let mut mb = merge(in_b.iter().chain(out_b.iter()).map(|(_, it)| it))?;
    let mut rows = Vec::with_capacity(mn.structs.iter().map(Vec::len).sum());
    let (mut n_start, mut b_start) = (0usize, 0usize);
    for sec in 0..4 {
        let n_len = mn.structs[sec].len();
        let b_len = mb.structs[sec].len();
        for index in 0..n_len.min(b_len) {
            let n_struct = take(&mut mn.structs[sec], index);
            let b_struct = take(&mut mb.structs[sec], index);
            let n_rg = take(&mut mn.rg, n_start + index);
            let b_rg = take(&mut mb.rg, b_start + index);
            let rg_consistent = py_eq_cross(&n_rg, sn, &b_rg, sb);
            let mut row = Row {
                n_name: take(&mut mn.names, n_start + index),
                b_name: take(&mut mb.names, b_start + index),
                n_dtype: n_struct.0,
                b_dtype: V {
                    py: b_struct.0,
                    bench: true,
                },
                n_shape: n_struct.1,
                b_shape: V {
                    py: b_struct.1,
                    bench: true,
                },
                n_rg,
                b_rg: V {
                    py: b_rg,
                    bench: true,
                },
                cols: std::array::from_fn(|_| Py::Lit(" ")),
                n_stats: std::array::from_fn(|_| Py::None),
                b_stats: std::array::from_fn(|_| V {
                    py: Py::None,
                    bench: true,
                }),
                n_md5: n_struct.2,
                b_md5: V {
                    py: b_struct.2,
                    bench: true,
                },
                rg_consistent,
                level: Level::Pass,
                msgs: Vec::new(),
                extra: false,
            };
            if mode != Mode::Md5 {
                let ns = take(&mut mn.summary, n_start + index);
                let bs = take(&mut mb.summary, b_start + index);
                row.n_stats = std::array::from_fn(|i| process(&ns[i]));
                row.b_stats = std::array::from_fn(|i| V {
                    py: process(&bs[i]),
                    bench: true,
                });
                if mode == Mode::Summary {
                    for i in 0..4 {
                        let (d, r) = rela_diff(&ns[i], sn, &bs[i], sb);
                        row.cols[i] = d;
                        row.cols[i + 4] = r;
                    }
                    for c in row.cols.iter_mut() {
                        *c = tabbed(c, sn);
                    }
                    for c in row.n_stats.iter_mut() {
                        *c = tabbed(c, sn);
                    }
                    for c in row.b_stats.iter_mut() {
                        c.py = tabbed(&c.py, sb);
                    }
                }
            }
            rows.push(row);
        }
        if n_len > b_len {
            for index in b_len..n_len {
                let n_struct = take(&mut mn.structs[sec], index);
                let nan = || V {
                    py: Py::Lit("Nan"),
                    bench: true,
                };
                let ns = take(&mut mn.summary, n_start + index);
                rows.push(Row {
                    n_name: take(&mut mn.names, n_start + index),
                    b_name: "Nan".into(),
                    n_dtype: n_struct.0,
                    b_dtype: nan(),
                    n_shape: n_struct.1,
                    b_shape: nan(),
                    n_rg: take(&mut mn.rg, n_start + index),
                    b_rg: nan(),
                    cols: std::array::from_fn(|_| Py::Lit(" ")),
                    n_stats: ns,
                    b_stats: std::array::from_fn(|_| nan()),
                    n_md5: n_struct.2,
                    b_md5: nan(),
                    rg_consistent: false,
                    level: Level::Pass,
                    msgs: Vec::new(),
                    extra: true,
                });
            }
        }
        n_start += n_len;
        b_start += b_len;
    }
    Ok(rows)
}

/// The dimensions of a shape value (a list of ints, or the text `[]` of a scalar).
fn shape_dims(p: &Py, store: &Store) -> Option<Vec<i64>> {
    match p {
        Py::V(v @ crate::formats::json::Val::List { .. }) => store
            .list(*v)
            .iter()
            .map(|d| match d {
                crate::formats::json::Val::Int(i) => Some(i),
                _ => None,
            })
            .collect(),
        _ if p.as_str(store) == Some("[]") => Some(Vec::new()),
        _ => None,
    }
}

/// Whether two shapes hold the same dimensions in another order (layout-aware compare).
fn permuted_shapes(a: &Py, sa: &Store, b: &Py, sb: &Store) -> bool {
    match (shape_dims(a, sa), shape_dims(b, sb)) {
        (Some(mut x), Some(mut y)) if x.len() == y.len() => {
            x.sort_unstable();
            y.sort_unstable();
            x == y
        }
        _ => false,
    }
}

/// Python `==` between a value of the NPU store and one of the bench store.
pub(crate) fn py_eq_cross(a: &Py, sa: &Store, b: &Py, sb: &Store) -> bool {
    if let (Some(x), Some(y)) = (a.num(sa), b.num(sb)) {
        return match (x, y) {
            (Num::Int(p), Num::Int(q)) => p == q,
            _ => x.as_f64() == y.as_f64(),
        };
    }
    let boolv = |p: &Py| match p {
        Py::B(v) | Py::V(crate::formats::json::Val::Bool(v)) => Some(*v),
        _ => None,
    };
    match (boolv(a), boolv(b)) {
        (Some(x), Some(y)) => return x == y,
        (Some(x), None) => return b.num(sb).is_some_and(|n| n.as_f64() == x as i64 as f64),
        (None, Some(y)) => return a.num(sa).is_some_and(|n| n.as_f64() == y as i64 as f64),
        _ => {}
    }
    if a.is_none() || b.is_none() {
        return a.is_none() && b.is_none();
    }
    match (a.as_str(sa), b.as_str(sb)) {
        (Some(x), Some(y)) => x == y,
        (None, None) => {
            // Lists/dicts: equal Python reprs (a list never equals a str).
            if let (Py::V(va), Py::V(vb)) = (a, b) {
                return same_repr(sa, *va, sb, *vb);
            }
            false
        }
        _ => false,
    }
}

/// `repr(a) == repr(b)` for two values of the same kind (a list is never equal to a dict),
/// without writing the reprs where that is plain: repr is injective on JSON values (a float's
/// repr has a '.', an 'e', "inf" or "nan", a str's its quotes), so equal reprs are equal
/// ints, texts, booleans, floats of the same bits (any NaN is "nan"), and lists of the same
/// length whose items have equal reprs. Dicts are compared by their written reprs.
fn same_repr(
    sa: &Store,
    a: crate::formats::json::Val,
    sb: &Store,
    b: crate::formats::json::Val,
) -> bool {
    use crate::formats::json::Val;
    match (a, b) {
        (Val::Null, Val::Null) => true,
        (Val::Bool(x), Val::Bool(y)) => x == y,
        (Val::Int(x), Val::Int(y)) => x == y,
        (Val::Float(x), Val::Float(y)) => x.to_bits() == y.to_bits() || (x.is_nan() && y.is_nan()),
        (Val::Str(x), Val::Str(y)) | (Val::BigInt(x), Val::BigInt(y)) => sa.str(x) == sb.str(y),
        (Val::List { .. }, Val::List { .. }) => {
            let (x, y) = (sa.list(a), sb.list(b));
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| same_repr(sa, p, sb, q))
        }
        (Val::Obj { .. }, Val::Obj { .. }) => {
            let (mut x, mut y) = (String::new(), String::new());
            crate::formats::pyfmt::py_repr(sa, a, &mut x);
            crate::formats::pyfmt::py_repr(sb, b, &mut y);
            x == y
        }
        _ => false,
    }
}

/// `get_rela_diff_summary_mode` for one statistic: (diff, relative error).
fn rela_diff(n: &Py, sn: &Store, b: &Py, sb: &Store) -> (Py, Py) {
    let (Some(x), Some(y)) = (is_num(n, sn), is_num(b, sb)) else {
        return (Py::Lit("N/A"), Py::Lit("N/A"));
    };
    let diff: Num = match (x, y) {
        (Num::Int(p), Num::Int(q)) => Num::Int(p - q),
        _ => Num::Float(x.as_f64() - y.as_f64()),
    };
    if let Num::Float(f) = diff {
        if f.is_nan() {
            return (Py::Lit("Nan"), Py::Lit("Nan"));
        }
    }
    let bench_zero = y.as_f64() == 0.0;
    let rel = if !bench_zero {
        let q = match (diff, y) {
            (Num::Int(p), Num::Int(q)) => p as f64 / q as f64,
            _ => diff.as_f64() / y.as_f64(),
        };
        Py::Pct((q * 100.0).abs())
    } else {
        Py::Lit("N/A")
    };
    let d = match diff {
        Num::Int(i) => match i64::try_from(i) {
            Ok(v) => Py::I(v),
            Err(_) => Py::S(i.to_string()),
        },
        Num::Float(f) => Py::F(f),
    };
    (d, rel)
}

/// `str2float`: '23.4%' -> 0.234; anything unparsable -> 0.
pub(crate) fn str2float(p: &Py, store: &Store) -> f64 {
    // The number the text `float_repr(f)%` would parse back to.
    if let Py::Pct(f) = p {
        return f / 100.0;
    }
    match p.as_str(store) {
        Some(s) => parse_py_float(s.trim_matches('%'))
            .map(|f| f / 100.0)
            .unwrap_or(0.0),
        None => 0.0,
    }
}

/// Python's `float(str)`.
pub fn parse_py_float(s: &str) -> Option<f64> {
    let t = s.trim();
    if t.is_empty() || t.contains("__") || t.starts_with('_') || t.ends_with('_') {
        return None;
    }
    let t = t.replace('_', "");
    let lower = t.to_ascii_lowercase();
    let body = lower.trim_start_matches(['+', '-']);
    if ["nan", "inf", "infinity"].contains(&body) {
        let neg = lower.starts_with('-');
        return Some(match body {
            "nan" => f64::NAN,
            _ => {
                if neg {
                    f64::NEG_INFINITY
                } else {
                    f64::INFINITY
                }
            }
        });
    }
    if !t
        .bytes()
        .all(|c| c.is_ascii_digit() || matches!(c, b'.' | b'e' | b'E' | b'+' | b'-'))
    {
        return None;
    }
    t.parse::<f64>().ok()
}

pub(crate) fn is_inf_or_nan(p: &Py, store: &Store) -> bool {
    match p {
        Py::F(f) | Py::V(crate::formats::json::Val::Float(f)) => f.is_nan() || f.is_infinite(),
        _ => match p.as_str(store) {
            Some(s) => {
                let t = s.trim().to_lowercase();
                t == "inf" || t == "-inf" || t == "nan"
            }
            None => false,
        },
    }
}

/// `get_min_or_max_value` over NormRelativeErr.
fn min_or_max(rows: &[&Row], is_min: bool, store: &Store) -> f64 {
    let mut acc = if is_min { 1.0 } else { 0.0 };
    for r in rows {
        let v = &r.cols[7];
        if v.is_none() {
            continue;
        }
        let val = if let Py::Pct(_) = v {
            // A str ending in '%'.
            str2float(v, store)
        } else if let Some(s) = v.as_str(store) {
            if s == "Nan" || s == "N/A" {
                continue;
            }
            if s.ends_with('%') {
                str2float(v, store)
            } else {
                continue;
            }
        } else {
            match v.num(store) {
                Some(n) => n.as_f64(),
                None => continue,
            }
        };
        // Python's min/max keep the first argument unless the second compares strictly.
        if is_min {
            if val < acc {
                acc = val;
            }
        } else if val > acc {
            acc = val;
        }
    }
    acc
}

pub(crate) fn raise(r: &mut Row, level: Level, msg: &'static str) {
    if level > r.level {
        r.level = level;
    }
    r.msgs.push(msg);
}

pub(crate) const MSG_INF_NAN: &str =
    "error: There is nan/inf/-inf in the maximum or minimum value of NPU.";
const MSG_REL_ERR: &str = "error: The NormRelativeErr of output is greater than 0.5.";
pub(crate) const MSG_RG: &str = "error: The Required_Grad of NPU and Bench are inconsistent";
pub(crate) const MSG_PARAMS: &str =
    "error: The scalar parameters of NPU and Bench are inconsistent.";
pub(crate) const MSG_DTYPE: &str = "error: The dtype of NPU and Bench are inconsistent.";
pub(crate) const MSG_SHAPE: &str = "error: The shape of NPU and Bench are inconsistent.";
const MSG_REL_WARN: &str = "warning: The norm relative error of output is 10 times that of input.";
const MSG_CRC_ERR: &str = "error: The CRC-32 value of NPU differs from that of the bench.";
const MSG_CRC_WARN: &str = "warning: The parameter of NPU does not match the bench.";

/// msprobe's ignore rule of an API (by its name's second segment): no checks, or outputs only.
#[derive(PartialEq)]
pub(crate) enum Ignore {
    All,
    Input,
    No,
}

/// The rows of one node as msprobe's checkers see them (`ApiData`): inputs (incl. parameters)
/// and outputs in row order, the API's ignore rule and the rows the per-row checkers look at.
/// The checkers shared by the statistics and the tensor sets are methods; each set calls them in
/// its own order (`run_checkers`, `realdata`'s `TENSOR_CHECKERS`).
pub(crate) struct ApiRows {
    pub(crate) in_idx: Vec<usize>,
    pub(crate) out_idx: Vec<usize>,
    pub(crate) ignore: Ignore,
    pub(crate) checked: Vec<usize>,
}

fn bench_named(r: &Row) -> bool {
    !r.b_name.is_empty() && r.b_name != "N/A"
}

impl ApiRows {
    /// `parallel_merge`: the API name loses its `_rank{r}` suffix before the ignore rule.
    pub(crate) fn new(rows: &[Row], parallel_merge: bool) -> ApiRows {
        let out_idx: Vec<usize> = (0..rows.len()).filter(|i| rows[*i].is_output()).collect();
        let in_idx: Vec<usize> = (0..rows.len()).filter(|i| !rows[*i].is_output()).collect();
        let ignore = match in_idx.first() {
            None => Ignore::No,
            Some(&i) => match rows[i].n_name.split('.').nth(1).map(|api| {
                if parallel_merge {
                    strip_rank_suffix(api)
                } else {
                    api
                }
            }) {
                Some(api)
                    if [
                        "empty",
                        "empty_like",
                        "numpy",
                        "to",
                        "__setitem__",
                        "empty_with_format",
                        "new_empty_strided",
                        "new_empty",
                        "empty_strided",
                    ]
                    .contains(&api) =>
                {
                    Ignore::All
                }
                Some(api)
                    if [
                        "_reduce_scatter_base",
                        "_all_gather_base",
                        "all_to_all_single",
                        "batch_isend_irecv",
                    ]
                    .contains(&api) =>
                {
                    Ignore::Input
                }
                _ => Ignore::No,
            },
        };
        let checked: Vec<usize> = match ignore {
            Ignore::All => Vec::new(),
            Ignore::Input => out_idx.clone(),
            Ignore::No => in_idx.iter().chain(out_idx.iter()).copied().collect(),
        };
        ApiRows {
            in_idx,
            out_idx,
            ignore,
            checked,
        }
    }

    /// InfNanErrChecker.
    pub(crate) fn inf_nan(&self, rows: &mut [Row], sn: &Store, sb: &Store) {
        for &i in &self.checked {
            let r = &mut rows[i];
            if is_inf_or_nan(&r.b_stats[0].py, sb) || is_inf_or_nan(&r.b_stats[1].py, sb) {
                continue;
            }
            if is_inf_or_nan(&r.n_stats[0], sn) || is_inf_or_nan(&r.n_stats[1], sn) {
                raise(r, Level::Error, MSG_INF_NAN);
            }
        }
    }

    /// RequiresGradErrChecker.
    pub(crate) fn requires_grad(&self, rows: &mut [Row], sn: &Store, sb: &Store) {
        for &i in &self.checked {
            let r = &mut rows[i];
            if !bench_named(r) {
                continue;
            }
            if !r.n_rg.truthy(sn) || !r.b_rg.py.truthy(sb) {
                continue;
            }
            if !py_eq_cross(&r.n_rg, sn, &r.b_rg.py, sb) {
                raise(r, Level::Error, MSG_RG);
            }
        }
    }

    /// ParametersErrChecker.
    pub(crate) fn parameters(&self, rows: &mut [Row], sn: &Store, sb: &Store) {
        if self.ignore != Ignore::No {
            return;
        }
        for &i in &self.in_idx {
            let r = &mut rows[i];
            if !bench_named(r) {
                continue;
            }
            if !r.n_dtype.truthy(sn) || !r.b_dtype.py.truthy(sb) {
                continue;
            }
            let has_class = |p: &Py, s: &Store| p.to_py_str(s).contains("class");
            if !has_class(&r.n_dtype, sn) || !has_class(&r.b_dtype.py, sb) {
                continue;
            }
            if r.n_shape.to_py_str(sn) != "[]" {
                continue;
            }
            if !py_eq_cross(&r.n_stats[0], sn, &r.b_stats[0].py, sb) {
                raise(r, Level::Error, MSG_PARAMS);
            }
        }
    }

    /// DTypeErrChecker.
    pub(crate) fn dtype(&self, rows: &mut [Row], sn: &Store, sb: &Store) {
        for &i in &self.checked {
            let r = &mut rows[i];
            if !bench_named(r) || r.n_name == "N/A" {
                continue;
            }
            if crate::base::has(&r.b_name, "qkv") || crate::base::has(&r.b_name, "gate_up") {
                continue;
            }
            if !r.n_dtype.truthy(sn) || !r.b_dtype.py.truthy(sb) {
                continue;
            }
            if !py_eq_cross(&r.n_dtype, sn, &r.b_dtype.py, sb) {
                raise(r, Level::Error, MSG_DTYPE);
            }
        }
    }

    /// ShapeErrChecker. `layout_aware` (our option, statistics only): shapes that are
    /// permutations of each other count as equal.
    pub(crate) fn shape(&self, rows: &mut [Row], sn: &Store, sb: &Store, layout_aware: bool) {
        for &i in &self.checked {
            let r = &mut rows[i];
            if !bench_named(r) {
                continue;
            }
            if r.n_shape.is_none() || r.b_shape.py.is_none() {
                continue;
            }
            let same = py_eq_cross(&r.n_shape, sn, &r.b_shape.py, sb)
                || (layout_aware && permuted_shapes(&r.n_shape, sn, &r.b_shape.py, sb));
            if !same {
                raise(r, Level::Error, MSG_SHAPE);
            }
        }
    }
}

fn run_checkers(
    sn: &Store,
    sb: &Store,
    mut rows: Vec<Row>,
    mode: Mode,
    layout_aware: bool,
    parallel_merge: bool,
) -> (Level, Vec<Row>) {
    let api = ApiRows::new(&rows, parallel_merge);
    let (in_idx, out_idx, checked) = (&api.in_idx, &api.out_idx, &api.checked);
    if mode == Mode::Md5 {
        for &i in checked {
            let r = &mut rows[i];
            if !py_eq_cross(&r.n_md5, sn, &r.b_md5.py, sb) {
                let null =
                    |p: &Py, s: &Store| matches!(p.as_str(s), Some("N/A") | Some("Nan") | Some(""));
                if null(&r.n_md5, sn) || null(&r.b_md5.py, sb) {
                    raise(r, Level::Warning, MSG_CRC_WARN);
                } else {
                    raise(r, Level::Error, MSG_CRC_ERR);
                }
            }
        }
    } else {
        api.inf_nan(&mut rows, sn, sb);
        // RelativeErrChecker
        if api.ignore == Ignore::No {
            let ins: Vec<&Row> = in_idx.iter().map(|i| &rows[*i]).collect();
            let rin = min_or_max(&ins, false, sn).abs();
            if rin < 0.1 {
                for &i in out_idx {
                    let r = &mut rows[i];
                    if str2float(&r.cols[7], sn).abs() > 0.5 {
                        raise(r, Level::Error, MSG_REL_ERR);
                    }
                }
            }
        }
        api.requires_grad(&mut rows, sn, sb);
        api.parameters(&mut rows, sn, sb);
        api.dtype(&mut rows, sn, sb);
        // ShapeErrChecker: not in the parallel-merge set
        if !parallel_merge {
            api.shape(&mut rows, sn, sb, layout_aware);
        }
        // RelativeWarnChecker
        if api.ignore == Ignore::No && !out_idx.is_empty() {
            let ins: Vec<&Row> = in_idx.iter().map(|i| &rows[*i]).collect();
            let outs: Vec<&Row> = out_idx.iter().map(|i| &rows[*i]).collect();
            let rin = min_or_max(&ins, false, sn).abs();
            let rout = min_or_max(&outs, false, sn).abs();
            let set = if rin == 0.0 {
                rout > 0.1
            } else {
                rout / rin > 10.0
            };
            if set {
                let first = out_idx[0];
                raise(&mut rows[first], Level::Warning, MSG_REL_WARN);
            }
        }
    }
    let level = rows.iter().map(|r| r.level).max().unwrap_or(Level::Pass);
    let _ = rows.iter().any(|r| r.extra);
    (level, rows)
}

/// The results of one node applied to its items (what `parse_result` writes into input_data
/// and output_data).
pub fn apply_results(maps: &mut [&mut ItemMap], results: Option<&[(String, ItemResult)]>) {
    let Some(results) = results else { return };
    for map in maps.iter_mut() {
        for (key, item) in map.iter_mut() {
            if let Some((_, cols)) = results.iter().find(|(kk, _)| kk == key) {
                for (kk, v) in cols.iter() {
                    item.set(kk, v);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `same_repr` says what comparing the written reprs says, over values of every kind and
    /// nesting (ints against floats, -0.0, NaN, big ints, strs with quotes, dicts, ragged lists).
    #[test]
    fn same_repr_is_repr_equality() {
        let text = br#"[[1, 2, 3], [1, 2, 3], [1, 2], [1.0, 2, 3], [1, 2, 3.0], [], [[]], [[1], [2]],
            [[1], [2.0]], [0.0], [-0.0], [NaN], [NaN], [1e300], [1e300], [true], [1], [null], [null],
            ["a"], ["a"], ["a, b"], ["a", "b"], ["it's"], [12345678901234567890], [12345678901234567890],
            [12345678901234567891], [{"a": 1}], [{"a": 1}], [{"a": 1.0}], [{"b": 1, "a": 2}],
            [{"a": 2, "b": 1}], {"x": [1]}, {"x": [1]}, 7, 7.5, "s"]"#;
        let (st, root) = crate::formats::json::parse(text).unwrap();
        let vals: Vec<crate::formats::json::Val> = st.list(root).to_vec();
        let repr = |v: crate::formats::json::Val| {
            let mut t = String::new();
            crate::formats::pyfmt::py_repr(&st, v, &mut t);
            t
        };
        let kind = |v: &crate::formats::json::Val| std::mem::discriminant(v);
        let mut equal_pairs = 0;
        for a in &vals {
            for b in &vals {
                let want = kind(a) == kind(b) && repr(*a) == repr(*b);
                equal_pairs += usize::from(want);
                assert_eq!(
                    same_repr(&st, *a, &st, *b),
                    want,
                    "{} vs {}",
                    repr(*a),
                    repr(*b)
                );
            }
        }
        assert!(
            equal_pairs > vals.len(),
            "the cases include equal pairs of distinct values"
        );
    }

    /// A cell gives back exactly the value it was made from (relative errors are kept as
    /// numbers only when their text comes back the same).
    #[test]
    fn cells_round_trip() {
        let mut texts: Vec<String> = [
            "abc%", "1.0e5%", "%", "0.10%", "-0.0%", "nan%", "inf%", "12%",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        for x in [
            0.0,
            -0.0,
            1.5,
            1e-300,
            123456.789,
            f64::NAN,
            f64::INFINITY,
            0.1 + 0.2,
            1e22,
        ] {
            texts.push(format!("{}%", crate::formats::pyfmt::float_repr(x)));
        }
        for t in texts {
            assert_eq!(
                Cell::from_py(Py::S(t.clone())).to_py(),
                Py::S(t.clone()),
                "{t}"
            );
        }
        for p in [
            Py::None,
            Py::F(2.5),
            Py::I(-3),
            Py::B(true),
            Py::Lit("N/A"),
            Py::Lit("odd"),
        ] {
            let back = Cell::from_py(p.clone()).to_py();
            assert_eq!(
                back.to_py_str(&Store::default()),
                p.to_py_str(&Store::default())
            );
        }
        assert!(matches!(Cell::from_py(Py::S("0.5%".into())), Cell::Pct(_)));
        assert!(matches!(Cell::from_py(Py::S("0.50%".into())), Cell::S(_)));
        // rela_diff's percentage keeps its number, and gives the same text back.
        let st = Store::default();
        let (_, p) = rela_diff(&Py::F(1.0), &st, &Py::F(3.0), &st);
        assert_eq!(p.to_py_str(&st), "66.66666666666666%");
        // The checkers read the number the text would give.
        assert_eq!(str2float(&p, &st), str2float(&Py::S(p.to_py_str(&st)), &st));
        let c = Cell::from_py(p);
        assert!(
            matches!(c, Cell::Pct(f) if f == (2.0f64 / 3.0 * 100.0)),
            "{c:?}"
        );
        assert_eq!(c.to_py().as_str(&st), Some("66.66666666666666%"));
        assert_eq!(std::mem::size_of::<Cell>(), 16);
    }

    #[test]
    fn counters_and_ranks() {
        assert_eq!(
            strip_counters("Functional.linear.3.forward"),
            "Functional.linear.forward"
        );
        assert_eq!(
            strip_counters("Torch.matmul.12.forward"),
            "Torch.matmul.forward"
        );
        assert_eq!(
            strip_rank("Torch.matmul_rank1.forward"),
            "Torch.matmul.forward"
        );
    }

    #[test]
    fn python_float_parse() {
        assert_eq!(parse_py_float("23.4"), Some(23.4));
        assert!(parse_py_float("Nan").is_some_and(f64::is_nan));
        assert_eq!(parse_py_float(" "), None);
        assert_eq!(parse_py_float("N/A"), None);
        assert_eq!(parse_py_float("inf"), Some(f64::INFINITY));
    }
}
