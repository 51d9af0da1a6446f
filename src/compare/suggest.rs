//! Match suggestions for grey (unmatched) nodes — beyond msprobe.
//!
//! For every unmatched NPU node, [`suggest`] ranks unmatched Bench nodes by a score in [0, 1]
//! with a short reason. The evidence, combined as independent signals (noisy-or) and then
//! discounted by contrary evidence:
//!
//! - **structure**: the candidate should lie under the partner of the node's nearest matched
//!   ancestor (or, weaker, of the next ones up), at a similar depth below it;
//! - **call order**: between two consecutive matched nodes the free nodes of one kind are aligned by
//!   position when both sides have the same number of them; otherwise a weak proportional hint;
//! - **backward of a matched forward**: `X.backward` pairs with the backward of `X.forward`'s partner
//!   (also parameter gradients), the strongest signal; a backward whose forward is grey waits;
//! - **names**: the same node name (msprobe's own key), or for modules similar class and instance
//!   names (`RMSNorm` ~ `Qwen2RMSNorm`, `ColumnParallelLinear` ~ `Linear`);
//! - **data**: the tensors of each section (outputs weigh double) are paired by dtype, shape (also
//!   permuted layouts: Megatron `[s,b,h]` vs HF `[b,s,h]`) and statistics; Max/Min/Mean/Norm do not
//!   change under a permutation, so equal statistics are strong evidence when the runs are close.
//!   Comparable tensors (same shape up to permutation) whose statistics all differ count against;
//! - **containment**: for modules, how many of its matched descendants have their partner under the
//!   candidate, and the other way round.
//!
//! [`accept_all`] accepts, round after round until nothing changes, every pair above a score that
//! is unambiguous (the best by a margin), mutually best, and not better left to a grey parent that
//! also wants the same candidate; each accepted pair anchors its descendants for the next round.
//! Pairs are applied with [`crate::compare::manual_match`], so they are compared by msprobe's rules.
//!
//! Scale: candidates come from indexes keyed by (anchor, kind, direction, API name), by gap between
//! matched nodes, by name and by forward twin; never all pairs.

use crate::base::HashMap;
use crate::compare::manual_match;
use crate::compare::pair::PairResult;
use crate::formats::json::Store;
use crate::formats::keys::k;
use crate::graph::items::{Item, Py, State};
use crate::graph::{Graph, NodeId, NodeOp, ROOT};

/// The default minimum score of a suggestion that "accept all" takes.
pub const DEFAULT_MIN_SCORE: f64 = 0.65;

/// One suggested pair.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Suggestion {
    pub npu: NodeId,
    pub bench: NodeId,
    /// In [0, 1].
    pub score: f64,
    /// A short human-readable reason.
    pub reason: String,
}

/// How many candidates [`suggest`] lists per NPU node.
const PER_NODE: usize = 3;
/// Accepted only if better than the runner-up by this much.
const MARGIN: f64 = 0.03;
/// A grey parent that wants the same candidate within this much goes first.
const DEFER: f64 = 0.05;
/// At most this many tensors per node section are looked at.
const MAX_TENSORS: usize = 32;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Kind {
    Module,
    Api,
    Other,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Dir {
    Forward,
    Backward,
    ParamGrad,
    None,
}

impl Dir {
    fn word(self) -> &'static str {
        match self {
            Dir::Forward => "forward",
            Dir::Backward => "backward",
            Dir::ParamGrad => "parameters_grad",
            Dir::None => "",
        }
    }
}

/// A node name taken apart.
#[derive(Debug, Clone)]
struct Parsed {
    kind: Kind,
    dir: Dir,
    /// API: `Tensor.__add__`; module: `Module.<path>.<Class>`.
    base: String,
    /// The call counter.
    n: String,
    class: String,
    inst: String,
}

fn parse_name(name: &str, op: NodeOp) -> Parsed {
    let segs: Vec<&str> = name.split('.').collect();
    let n = segs.len();
    let other = || Parsed {
        kind: Kind::Other,
        dir: Dir::None,
        base: name.to_string(),
        n: String::new(),
        class: String::new(),
        inst: String::new(),
    };
    match op {
        NodeOp::Module if (segs[0] == "Module" || segs[0] == "Cell") && n >= 4 => {
            // Module.<path>.<Class>.<forward|backward|parameters_grad>.<n>, or ...parameters_grad
            let (dir_i, counter) = if segs[n - 1] == "parameters_grad" {
                (n - 1, String::new())
            } else {
                (n - 2, segs[n - 1].to_string())
            };
            let dir = match segs[dir_i] {
                "forward" => Dir::Forward,
                "backward" => Dir::Backward,
                "parameters_grad" => Dir::ParamGrad,
                _ => return other(),
            };
            if dir_i < 3 {
                return other();
            }
            Parsed {
                kind: Kind::Module,
                dir,
                base: segs[..dir_i].join("."),
                n: counter,
                class: segs[dir_i - 1].to_string(),
                inst: segs[dir_i - 2].to_string(),
            }
        }
        NodeOp::FunctionApi if n >= 4 => {
            let dir = match segs[n - 1] {
                "forward" => Dir::Forward,
                "backward" => Dir::Backward,
                _ => return other(),
            };
            Parsed {
                kind: Kind::Api,
                dir,
                base: segs[..n - 2].join("."),
                n: segs[n - 2].to_string(),
                class: String::new(),
                inst: String::new(),
            }
        }
        _ => other(),
    }
}

/// The forward node's name of a backward / parameter-gradient node.
fn forward_name(p: &Parsed) -> Option<String> {
    match (p.kind, p.dir) {
        (Kind::Api, Dir::Backward) => Some(format!("{}.{}.forward", p.base, p.n)),
        (Kind::Module, Dir::Backward) => Some(format!("{}.forward.{}", p.base, p.n)),
        (Kind::Module, Dir::ParamGrad) => Some(format!("{}.forward.0", p.base)),
        _ => None,
    }
}

/// One tensor (or scalar) of a node, reduced to what the score looks at.
#[derive(Debug, Clone)]
struct Tensor {
    /// 0 input, 1 parameters, 2 output (parameter gradients count as outputs).
    sec: u8,
    dtype: u32,
    /// None when the dump has no shape.
    shape: Option<(u32, u8)>,
    /// Max, Min, Mean, Norm; NaN = absent.
    stats: [f64; 4],
}

struct SideIx {
    order: Vec<NodeId>,
    /// Pre-order position per node id (u32::MAX: unreachable).
    pos: Vec<u32>,
    /// End (exclusive) of the subtree in pre-order, per position.
    end: Vec<u32>,
    depth: Vec<u32>,
    parsed: Vec<Parsed>,
    /// API name or module class, interned per side pair (0 = none).
    op: Vec<u32>,
    tensors: Vec<Vec<Tensor>>,
    shapes: Vec<i64>,
    /// Backward / parameter-gradient nodes by their forward node: (forward, dir) -> node.
    twins: HashMap<(NodeId, Dir), NodeId>,
    /// Forward node of a backward / parameter-gradient node.
    forward: Vec<Option<NodeId>>,
}

struct Interner {
    ids: HashMap<String, u32>,
}

impl Interner {
    fn id(&mut self, s: &str) -> u32 {
        if s.is_empty() {
            return 0;
        }
        let next = self.ids.len() as u32 + 1;
        *self.ids.entry(s.to_string()).or_insert(next)
    }
}

fn num_of(p: Option<&Py>, store: &Store) -> f64 {
    match p {
        Some(Py::V(crate::formats::json::Val::Bool(b))) | Some(Py::B(b)) => {
            if *b {
                1.0
            } else {
                0.0
            }
        }
        Some(p) => p.num(store).map(|n| n.as_f64()).unwrap_or(f64::NAN),
        None => f64::NAN,
    }
}

fn tensor_of(
    it: &Item,
    store: &Store,
    dtypes: &mut Interner,
    shapes: &mut Vec<i64>,
) -> Option<Tensor> {
    let sec = match it.state {
        State::Input => 0,
        State::Parameters => 1,
        State::Output | State::ParametersGrad => 2,
        State::Debug => return None,
    };
    let stats = [
        num_of(it.get(k::MAX), store),
        num_of(it.get(k::MIN), store),
        num_of(it.get(k::MEAN), store),
        num_of(it.get(k::NORM), store),
    ];
    if stats.iter().all(|s| s.is_nan()) {
        return None;
    }
    let dtype = it
        .get(k::DTYPE)
        .map(|d| dtypes.id(&d.to_py_str(store)))
        .unwrap_or(0);
    let shape = match it.get(k::SHAPE) {
        Some(Py::V(v @ crate::formats::json::Val::List { .. })) => {
            let dims = store.list(*v);
            if dims.len() > 255 {
                None
            } else {
                let off = shapes.len() as u32;
                for d in dims {
                    shapes.push(Py::V(d).num(store).map(|n| n.as_f64() as i64).unwrap_or(-1));
                }
                Some((off, dims.len() as u8))
            }
        }
        Some(p) if p.as_str(store) == Some("[]") => Some((shapes.len() as u32, 0)),
        _ => None,
    };
    Some(Tensor {
        sec,
        dtype,
        shape,
        stats,
    })
}

impl SideIx {
    fn build(
        g: &Graph,
        dump: &crate::formats::dump::RankDump,
        ops: &mut Interner,
        dtypes: &mut Interner,
    ) -> SideIx {
        let order = g.pre_order();
        let n = g.nodes.len();
        let mut pos = vec![u32::MAX; n];
        for (i, id) in order.iter().enumerate() {
            pos[*id as usize] = i as u32;
        }
        let mut end = vec![0u32; order.len()];
        for i in (0..order.len()).rev() {
            let id = order[i];
            end[i] = match g.node(id).children.last() {
                Some(&c) if pos[c as usize] != u32::MAX => end[pos[c as usize] as usize],
                _ => i as u32 + 1,
            };
        }
        let mut depth = vec![0u32; n];
        for &id in &order {
            if let Some(p) = g.node(id).parent() {
                depth[id as usize] = depth[p as usize] + 1;
            }
        }
        let parsed: Vec<Parsed> = g
            .nodes
            .iter()
            .map(|nd| parse_name(g.name_of(nd), nd.op))
            .collect();
        let op: Vec<u32> = parsed
            .iter()
            .map(|p| match p.kind {
                Kind::Api => ops.id(&p.base),
                Kind::Module => ops.id(&p.class),
                Kind::Other => 0,
            })
            .collect();
        let mut shapes = Vec::new();
        let mut tensors = vec![Vec::new(); n];
        for &id in &order {
            if parsed[id as usize].kind == Kind::Other {
                continue;
            }
            let (i, o) = g.io(dump, id);
            let mut per = [0usize; 3];
            let mut ts = Vec::new();
            for (_, it) in i.iter().chain(o.iter()) {
                if let Some(t) = tensor_of(it, &dump.store, dtypes, &mut shapes) {
                    if per[t.sec as usize] < MAX_TENSORS {
                        per[t.sec as usize] += 1;
                        ts.push(t);
                    }
                }
            }
            tensors[id as usize] = ts;
        }
        let mut twins = HashMap::default();
        let mut forward = vec![None; n];
        for &id in &order {
            let p = &parsed[id as usize];
            if let Some(f) = forward_name(p)
                .and_then(|f| g.get(&f))
                .filter(|f| pos[*f as usize] != u32::MAX)
            {
                forward[id as usize] = Some(f);
                twins.entry((f, p.dir)).or_insert(id);
            }
        }
        SideIx {
            order,
            pos,
            end,
            depth,
            parsed,
            op,
            tensors,
            shapes,
            twins,
            forward,
        }
    }

    fn shape(&self, t: &Tensor) -> Option<&[i64]> {
        t.shape
            .map(|(o, l)| &self.shapes[o as usize..o as usize + l as usize])
    }

    fn reachable(&self, id: NodeId) -> bool {
        self.pos[id as usize] != u32::MAX
    }
}

// ---------------------------------------------------------------- names

fn tokens(s: &str, stop: &[String]) -> Vec<String> {
    // CamelCase (with acronyms) and snake_case into lowercase words; digits split words.
    let chars: Vec<char> = s.chars().collect();
    let mut words: Vec<String> = Vec::new();
    let mut cur = String::new();
    for i in 0..chars.len() {
        let c = chars[i];
        if !c.is_ascii_alphabetic() {
            if !cur.is_empty() {
                words.push(std::mem::take(&mut cur));
            }
            continue;
        }
        let boundary = c.is_ascii_uppercase()
            && !cur.is_empty()
            && (chars[i - 1].is_ascii_lowercase()
                || chars.get(i + 1).is_some_and(|n| n.is_ascii_lowercase()));
        if boundary {
            words.push(std::mem::take(&mut cur));
        }
        cur.push(c.to_ascii_lowercase());
    }
    if !cur.is_empty() {
        words.push(cur);
    }
    words.retain(|w| !stop.contains(w));
    words.sort();
    words.dedup();
    words
}

fn jaccard(a: &[String], b: &[String]) -> f64 {
    if a.is_empty() || b.is_empty() {
        return 0.0;
    }
    let inter = a.iter().filter(|x| b.contains(x)).count();
    inter as f64 / (a.len() + b.len() - inter) as f64
}

/// Words that say which framework a class comes from rather than what it does: Megatron's
/// parallel-layer vocabulary, and a word found in most class names of one side and in none of
/// the other (a model-family prefix like `Qwen2`).
fn stop_words(a: &SideIx, b: &SideIx) -> Vec<String> {
    let mut stop: Vec<String> = ["parallel", "column", "row", "vocab", "fused", "module"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let classes = |s: &SideIx| -> Vec<Vec<String>> {
        let mut c: Vec<&str> = s
            .parsed
            .iter()
            .filter(|p| p.kind == Kind::Module)
            .map(|p| p.class.as_str())
            .collect();
        c.sort_unstable();
        c.dedup();
        c.iter().map(|x| tokens(x, &[])).collect()
    };
    let (ca, cb) = (classes(a), classes(b));
    for (one, other) in [(&ca, &cb), (&cb, &ca)] {
        let mut count: HashMap<&str, usize> = HashMap::default();
        for t in one.iter().flatten() {
            *count.entry(t.as_str()).or_default() += 1;
        }
        for (w, c) in count {
            if one.len() >= 4 && c * 2 >= one.len() && !other.iter().flatten().any(|x| x == w) {
                stop.push(w.to_string());
            }
        }
    }
    stop
}

struct Names {
    stop: Vec<String>,
    cache: HashMap<(String, String), f64>,
}

impl Names {
    fn sim(&mut self, a: &str, b: &str) -> f64 {
        if a == b {
            return 1.0;
        }
        if let Some(v) = self.cache.get(&(a.to_string(), b.to_string())) {
            return *v;
        }
        let mut s = jaccard(&tokens(a, &self.stop), &tokens(b, &self.stop));
        if a.len() >= 3 && b.len() >= 3 && (a.ends_with(b) || b.ends_with(a)) {
            s = s.max(0.7);
        }
        self.cache.insert((a.to_string(), b.to_string()), s);
        s
    }
}

// ---------------------------------------------------------------- data

fn stat_close(a: &[f64; 4], b: &[f64; 4]) -> f64 {
    let scale = a[..2]
        .iter()
        .chain(b[..2].iter())
        .filter(|x| x.is_finite())
        .fold(1e-30f64, |m, x| m.max(x.abs()));
    let mut worst: Option<f64> = None;
    for i in 0..4 {
        let (x, y) = (a[i], b[i]);
        if x.is_nan() || y.is_nan() {
            if x.is_nan() != y.is_nan() {
                return 0.0;
            }
            continue;
        }
        let d = if x == y {
            0.0
        } else if !x.is_finite() || !y.is_finite() {
            f64::INFINITY
        } else {
            (x - y).abs() / x.abs().max(y.abs()).max(1e-6 * scale).max(1e-30)
        };
        worst = Some(worst.map_or(d, |w: f64| w.max(d)));
    }
    match worst {
        None => 0.0,
        Some(d) if d <= 1e-5 => 1.0,
        Some(d) if d >= 0.1 => 0.0,
        Some(d) => 1.0 - (d / 1e-5).log10() / 4.0,
    }
}

/// 1 equal, 0.9 a permutation of each other, 0.6 same element count, 0 otherwise (0.5 unknown).
fn shape_sim(a: Option<&[i64]>, b: Option<&[i64]>) -> f64 {
    let (Some(a), Some(b)) = (a, b) else {
        return 0.5;
    };
    if a == b {
        return 1.0;
    }
    if is_permutation(a, b) {
        return 0.9;
    }
    let numel = |s: &[i64]| s.iter().map(|&d| d.max(0) as i128).product::<i128>();
    if numel(a) == numel(b) {
        0.6
    } else {
        0.0
    }
}

/// Whether two shapes are permutations of each other.
pub fn is_permutation(a: &[i64], b: &[i64]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let mut x = a.to_vec();
    let mut y = b.to_vec();
    x.sort_unstable();
    y.sort_unstable();
    x == y
}

fn weight(t: &Tensor, shape: Option<&[i64]>) -> f64 {
    if t.stats[2].is_nan() || t.stats[3].is_nan() {
        0.3
    } else if shape.is_some_and(|s| s.iter().product::<i64>() <= 1) {
        0.5
    } else {
        1.0
    }
}

/// Evidence from the tensors of a candidate pair.
#[derive(Debug, Clone, Copy, Default)]
struct DataEv {
    /// Overlap in [0, 1]; None when a side has no tensors.
    sim: Option<f64>,
    /// Multiplier for contrary evidence (comparable tensors with different statistics).
    mult: f64,
    /// A matched tensor pair had permuted shapes.
    permuted: bool,
}

fn data_ev(ni: &SideIx, u: NodeId, bi: &SideIx, v: NodeId) -> DataEv {
    let (tu, tv) = (&ni.tensors[u as usize], &bi.tensors[v as usize]);
    let mut ev = DataEv {
        sim: None,
        mult: 1.0,
        permuted: false,
    };
    if tu.is_empty() || tv.is_empty() {
        return ev;
    }
    let (mut num, mut den) = (0.0, 0.0);
    for (sec, w, pen) in [(2u8, 2.0, 0.25), (0, 1.0, 0.6), (1, 1.0, 0.6)] {
        let a: Vec<&Tensor> = tu.iter().filter(|t| t.sec == sec).collect();
        let b: Vec<&Tensor> = tv.iter().filter(|t| t.sec == sec).collect();
        if a.is_empty() && b.is_empty() {
            continue;
        }
        let s = if a.is_empty() || b.is_empty() {
            0.0
        } else {
            let mut pairs: Vec<(f64, usize, usize, bool)> = Vec::new();
            for (i, x) in a.iter().enumerate() {
                for (j, y) in b.iter().enumerate() {
                    let (sx, sy) = (ni.shape(x), bi.shape(y));
                    let sh = shape_sim(sx, sy);
                    if sh == 0.0 {
                        continue;
                    }
                    let dt = if x.dtype == y.dtype { 1.0 } else { 0.5 };
                    let s = stat_close(&x.stats, &y.stats) * sh * dt;
                    if s > 0.0 {
                        let perm = sh == 0.9;
                        pairs.push((s * weight(x, sx).min(weight(y, sy)), i, j, perm));
                    }
                }
            }
            pairs.sort_by(|p, q| q.0.total_cmp(&p.0));
            let (mut ua, mut ub) = (vec![false; a.len()], vec![false; b.len()]);
            let mut tot = 0.0;
            for (s, i, j, perm) in pairs {
                if ua[i] || ub[j] {
                    continue;
                }
                ua[i] = true;
                ub[j] = true;
                tot += s;
                ev.permuted |= perm && s > 0.5;
            }
            let wa: f64 = a.iter().map(|t| weight(t, ni.shape(t))).sum();
            let wb: f64 = b.iter().map(|t| weight(t, bi.shape(t))).sum();
            let s = 2.0 * tot / (wa + wb);
            if s < 0.3 {
                // Comparable float tensors (same shape up to permutation) that all disagree.
                let mut comparable = false;
                let mut best: f64 = 0.0;
                for x in &a {
                    for y in &b {
                        let (sx, sy) = (ni.shape(x), bi.shape(y));
                        if weight(x, sx) >= 1.0
                            && weight(y, sy) >= 1.0
                            && matches!((sx, sy), (Some(p), Some(q)) if is_permutation(p, q))
                        {
                            comparable = true;
                            best = best.max(stat_close(&x.stats, &y.stats));
                        }
                    }
                }
                if comparable && best < 0.3 {
                    ev.mult *= pen;
                }
            }
            s
        };
        num += w * s;
        den += w;
    }
    if den > 0.0 {
        ev.sim = Some(num / den);
    }
    ev
}

// ---------------------------------------------------------------- rounds

/// The matched nodes before and after a free node in pre-order.
type Gap = (Option<NodeId>, Option<NodeId>);
/// A gap and a node kind.
type GapKey = (Option<NodeId>, Option<NodeId>, Kind, Dir, u32);

/// The state of one round: links, anchors and candidate indexes.
struct Round {
    pn: Vec<Option<NodeId>>,
    pb: Vec<Option<NodeId>>,
    /// Nearest matched ancestor per node.
    nma_n: Vec<Option<NodeId>>,
    nma_b: Vec<Option<NodeId>>,
    groups_b: HashMap<(NodeId, Kind, Dir, u32), Vec<NodeId>>,
    /// Rank of a free node in its anchor group, and the group size.
    rank_n: Vec<(u32, u32)>,
    rank_b: Vec<(u32, u32)>,
    /// Previous / next matched node in pre-order, per free node.
    gap_n: Vec<Gap>,
    gaps_n: HashMap<GapKey, Vec<NodeId>>,
    gaps_b: HashMap<GapKey, Vec<NodeId>>,
    grank_n: Vec<u32>,
    /// The next matched bench node after a matched bench node, in pre-order.
    next_mb: Vec<Option<NodeId>>,
    /// Partner positions of matched descendants, per module (computed on demand).
    desc_n: HashMap<NodeId, Vec<u32>>,
    desc_b: HashMap<NodeId, Vec<u32>>,
}

fn key(s: &SideIx, id: NodeId) -> (Kind, Dir, u32) {
    let p = &s.parsed[id as usize];
    let op = if p.kind == Kind::Api {
        s.op[id as usize]
    } else {
        0
    };
    (p.kind, p.dir, op)
}

fn nma(g: &Graph, s: &SideIx, partner: &[Option<NodeId>]) -> Vec<Option<NodeId>> {
    let mut out = vec![None; g.nodes.len()];
    for &id in &s.order {
        if let Some(p) = g.node(id).parent() {
            out[id as usize] = if partner[p as usize].is_some() {
                Some(p)
            } else {
                out[p as usize]
            };
        }
    }
    out
}

fn gaps(
    s: &SideIx,
    partner: &[Option<NodeId>],
) -> (Vec<Gap>, HashMap<GapKey, Vec<NodeId>>, Vec<u32>) {
    let n = s.pos.len();
    let mut gap = vec![(None, None); n];
    let mut last = None;
    for &id in &s.order {
        if partner[id as usize].is_some() {
            last = Some(id);
        } else {
            gap[id as usize].0 = last;
        }
    }
    last = None;
    for &id in s.order.iter().rev() {
        if partner[id as usize].is_some() {
            last = Some(id);
        } else {
            gap[id as usize].1 = last;
        }
    }
    let mut groups: HashMap<GapKey, Vec<NodeId>> = HashMap::default();
    let mut rank = vec![0u32; n];
    for &id in &s.order {
        if partner[id as usize].is_some() || s.parsed[id as usize].kind == Kind::Other {
            continue;
        }
        let (kd, d, op) = key(s, id);
        let g = groups
            .entry((gap[id as usize].0, gap[id as usize].1, kd, d, op))
            .or_default();
        rank[id as usize] = g.len() as u32;
        g.push(id);
    }
    (gap, groups, rank)
}

impl Round {
    fn new(gn: &Graph, gb: &Graph, ni: &SideIx, bi: &SideIx) -> Round {
        let pn: Vec<Option<NodeId>> = gn.nodes.iter().map(|x| x.partner()).collect();
        let pb: Vec<Option<NodeId>> = gb.nodes.iter().map(|x| x.partner()).collect();
        let nma_n = nma(gn, ni, &pn);
        let nma_b = nma(gb, bi, &pb);
        let mut groups_n: HashMap<(NodeId, Kind, Dir, u32), Vec<NodeId>> = HashMap::default();
        let mut groups_b: HashMap<(NodeId, Kind, Dir, u32), Vec<NodeId>> = HashMap::default();
        let mut rank_n = vec![(0u32, 0u32); gn.nodes.len()];
        let mut rank_b = vec![(0u32, 0u32); gb.nodes.len()];
        for (s, part, nm, groups, rank) in [
            (ni, &pn, &nma_n, &mut groups_n, &mut rank_n),
            (bi, &pb, &nma_b, &mut groups_b, &mut rank_b),
        ] {
            for &id in &s.order {
                if part[id as usize].is_some() || s.parsed[id as usize].kind == Kind::Other {
                    continue;
                }
                let Some(a) = nm[id as usize] else { continue };
                let (kd, d, op) = key(s, id);
                let g = groups.entry((a, kd, d, op)).or_default();
                rank[id as usize].0 = g.len() as u32;
                g.push(id);
            }
            for g in groups.values() {
                for &id in g {
                    rank[id as usize].1 = g.len() as u32;
                }
            }
        }
        let (gap_n, gaps_n, grank_n) = gaps(ni, &pn);
        let (_, gaps_b, _) = gaps(bi, &pb);
        let mut next_mb = vec![None; gb.nodes.len()];
        let mut last = None;
        for &id in bi.order.iter().rev() {
            if pb[id as usize].is_some() {
                next_mb[id as usize] = last;
                last = Some(id);
            }
        }
        Round {
            pn,
            pb,
            nma_n,
            nma_b,
            groups_b,
            rank_n,
            rank_b,
            gap_n,
            gaps_n,
            gaps_b,
            grank_n,
            next_mb,
            desc_n: HashMap::default(),
            desc_b: HashMap::default(),
        }
    }
}

/// Matched descendants of `id` on side `s`, as the pre-order positions of their partners.
fn matched_desc(s: &SideIx, other: &SideIx, partner: &[Option<NodeId>], id: NodeId) -> Vec<u32> {
    let p = s.pos[id as usize] as usize;
    let mut out: Vec<u32> = s.order[p + 1..s.end[p] as usize]
        .iter()
        .filter_map(|d| partner[*d as usize])
        .map(|q| other.pos[q as usize])
        .filter(|q| *q != u32::MAX)
        .collect();
    out.sort_unstable();
    out
}

fn count_in(sorted: &[u32], lo: u32, hi: u32) -> usize {
    let a = sorted.partition_point(|x| *x <= lo);
    let b = sorted.partition_point(|x| *x < hi);
    b.saturating_sub(a)
}

struct Scorer<'a> {
    gn: &'a Graph,
    gb: &'a Graph,
    ni: &'a SideIx,
    bi: &'a SideIx,
    names: Names,
}

#[derive(Debug, Clone)]
struct Cand {
    v: NodeId,
    score: f64,
    reason: String,
}

impl Scorer<'_> {
    /// Ranked candidates (best first) of a free NPU node.
    fn candidates(&mut self, r: &mut Round, u: NodeId) -> Vec<Cand> {
        let (ni, bi) = (self.ni, self.bi);
        let pu = &ni.parsed[u as usize];
        if pu.kind == Kind::Other {
            return Vec::new();
        }
        let free_b = |r: &Round, v: NodeId| bi.reachable(v) && r.pb[v as usize].is_none();
        // A backward (or parameter gradient) follows its forward: the twin of the forward's
        // partner, or nothing while the forward is grey.
        if let Some(f) = ni.forward[u as usize] {
            let Some(bf) = r.pn[f as usize] else {
                return Vec::new();
            };
            let Some(&tw) = bi.twins.get(&(bf, pu.dir)) else {
                return Vec::new();
            };
            if !free_b(r, tw) || bi.parsed[tw as usize].kind != pu.kind {
                return Vec::new();
            }
            let d = data_ev(ni, u, bi, tw);
            let mut score = 0.95;
            if d.sim.is_some_and(|s| s < 0.1) {
                score *= d.mult;
            }
            return vec![Cand {
                v: tw,
                score,
                reason: format!("{} of the matched forward", pu.dir.word()),
            }];
        }
        let ku = key(ni, u);
        // Anchors: the nearest matched ancestors, with the distance to each.
        let mut anchors: Vec<(NodeId, u32)> = Vec::new();
        let mut a = r.nma_n[u as usize];
        while let Some(x) = a {
            if anchors.len() == 3 {
                break;
            }
            anchors.push((x, ni.depth[u as usize] - ni.depth[x as usize]));
            a = r.nma_n[x as usize];
        }
        let mut cands: Vec<NodeId> = Vec::new();
        let name = self.gn.name(u);
        let same = self.gb.get(name).filter(|&v| free_b(r, v));
        if let Some(v) = same {
            cands.push(v);
        }
        let (ru, m) = r.rank_n[u as usize];
        for (i, &(a, _)) in anchors.iter().enumerate() {
            let Some(pa) = r.pn[a as usize] else { continue };
            let Some(g) = r.groups_b.get(&(pa, ku.0, ku.1, ku.2)) else {
                continue;
            };
            let kk = g.len();
            if i == 0 {
                let e = (ru as f64 + 0.5) * kk as f64 / m.max(1) as f64 - 0.5;
                let lo = (e.floor() as i64 - 4).max(0) as usize;
                let hi = ((e.floor() as i64 + 6).max(0) as usize).min(kk);
                cands.extend(g[lo.min(hi)..hi].iter().copied());
            }
            if kk <= 40 {
                cands.extend(g.iter().copied());
            }
        }
        // Exact alignment between two consecutive matched nodes.
        let mut gap_v = None;
        let (gp, gq) = r.gap_n[u as usize];
        if let Some(p) = gp {
            if let Some(bp) = r.pn[p as usize] {
                let bq = gq.and_then(|q| r.pn[q as usize]);
                if r.next_mb[bp as usize] == bq {
                    let hn = r.gaps_n.get(&(gp, gq, ku.0, ku.1, ku.2));
                    let hb = r.gaps_b.get(&(Some(bp), bq, ku.0, ku.1, ku.2));
                    if let (Some(hn), Some(hb)) = (hn, hb) {
                        if hn.len() == hb.len() {
                            gap_v = hb.get(r.grank_n[u as usize] as usize).copied();
                            cands.extend(gap_v);
                        }
                    }
                }
            }
        }
        cands.sort_unstable();
        cands.dedup();
        let mut out: Vec<Cand> = Vec::new();
        for v in cands {
            if key(bi, v) != ku || !free_b(r, v) {
                continue;
            }
            if let Some(c) = self.score(r, u, v, &anchors, same == Some(v), gap_v == Some(v)) {
                out.push(c);
            }
        }
        out.sort_by(|a, b| b.score.total_cmp(&a.score).then(a.v.cmp(&b.v)));
        out
    }

    #[allow(clippy::too_many_arguments)]
    fn score(
        &mut self,
        r: &mut Round,
        u: NodeId,
        v: NodeId,
        anchors: &[(NodeId, u32)],
        same_name: bool,
        in_gap: bool,
    ) -> Option<Cand> {
        let (ni, bi) = (self.ni, self.bi);
        let (pu, pv) = (&ni.parsed[u as usize], &bi.parsed[v as usize]);
        let d = data_ev(ni, u, bi, v);
        let mut mult = d.mult;
        let mut ev: Vec<f64> = Vec::new();
        let mut why: Vec<String> = Vec::new();
        if same_name {
            ev.push(match d.sim {
                None => 0.7,
                Some(s) => 0.3 + 0.4 * s,
            });
            why.push("same name".into());
        }
        if pu.kind == Kind::Module {
            let c = self.names.sim(&pu.class, &pv.class);
            let i = self.names.sim(&pu.inst, &pv.inst);
            let ns = 0.6 * c + 0.4 * i;
            if ns > 0.0 {
                ev.push(0.6 * ns);
                if ns >= 0.3 && !same_name {
                    if c >= 0.5 {
                        why.push(if pu.class == pv.class {
                            format!("same class {}", pu.class)
                        } else {
                            format!("similar class ({} ~ {})", pu.class, pv.class)
                        });
                    }
                    if pu.inst == pv.inst {
                        why.push(format!("same instance name {}", pu.inst));
                    } else if i >= 0.3 {
                        why.push(format!("similar instance name ({} ~ {})", pu.inst, pv.inst));
                    }
                }
            }
        }
        if let Some(s) = d.sim.filter(|s| *s > 0.0) {
            ev.push(0.9 * s);
            if s >= 0.5 {
                why.push(format!(
                    "{} statistics{}",
                    if s >= 0.9 { "equal" } else { "close" },
                    if d.permuted { " (permuted layout)" } else { "" }
                ));
            }
        }
        // Structure: which anchor's partner the candidate lies under.
        let bn = r.nma_b[v as usize];
        let level = anchors
            .iter()
            .enumerate()
            .find(|(_, (a, _))| r.pn[*a as usize].is_some() && r.pn[*a as usize] == bn);
        match level {
            Some((i, &(a, du))) => {
                let lf = [1.0, 0.7, 0.5][i];
                let pa = r.pn[a as usize].unwrap_or(ROOT);
                let dv = bi.depth[v as usize].saturating_sub(bi.depth[pa as usize]);
                let dm = match dv.abs_diff(du) {
                    0 => 1.0,
                    1 => 0.5,
                    _ => 0.0,
                };
                let (mut osc, mut oe) = (0.0, 0.1);
                if in_gap {
                    osc = 1.0;
                    oe = 0.35;
                    why.push("same position between matched neighbours".into());
                } else if i == 0 {
                    let (ru, m) = r.rank_n[u as usize];
                    let (rv, kk) = r.rank_b[v as usize];
                    let e = (ru as f64 + 0.5) * kk as f64 / m.max(1) as f64 - 0.5;
                    osc = (1.0 - (rv as f64 - e).abs() / 3.0).max(0.0);
                    if m == 1 && kk == 1 {
                        osc = 1.0;
                        oe = 0.3;
                        why.push("the only candidate under the matched parent".into());
                    }
                }
                ev.push(lf * (oe * osc + 0.15 * dm));
            }
            None if !same_name => return None,
            None => why.push("outside the matched parent's partner".into()),
        }
        // Containment of matched descendants.
        if pu.kind == Kind::Module {
            let pvp = bi.pos[v as usize];
            let (du_len, du_in) = {
                let du = r
                    .desc_n
                    .entry(u)
                    .or_insert_with(|| matched_desc(ni, bi, &r.pn, u));
                (du.len(), count_in(du, pvp, bi.end[pvp as usize]))
            };
            if du_len > 0 {
                let dvs = r
                    .desc_b
                    .entry(v)
                    .or_insert_with(|| matched_desc(bi, ni, &r.pb, v));
                let cu = du_in as f64 / du_len as f64;
                let cv = if dvs.is_empty() {
                    0.0
                } else {
                    let pup = ni.pos[u as usize];
                    count_in(dvs, pup, ni.end[pup as usize]) as f64 / dvs.len() as f64
                };
                let cont = (cu + cv) / 2.0;
                ev.push(0.85 * cont);
                if cont >= 0.8 {
                    why.push("holds the partners of its matched children".into());
                }
                if cont < 0.5 {
                    mult *= 0.5;
                }
            }
        }
        let mut score = 1.0
            - ev.iter()
                .fold(1.0, |acc, e| acc * (1.0 - e.clamp(0.0, 1.0)));
        score *= mult;
        if d.sim.is_none() && !same_name && pu.kind == Kind::Api {
            score *= 0.6;
        }
        if mult < 1.0 {
            why.push("some statistics disagree".into());
        }
        if why.is_empty() {
            why.push("same kind of node in the same place".into());
        }
        Some(Cand {
            v,
            score: score.clamp(0.0, 1.0),
            reason: why.join("; "),
        })
    }
}

struct Ix {
    ni: SideIx,
    bi: SideIx,
    stop: Vec<String>,
}

fn index(res: &PairResult) -> Option<Ix> {
    let b = res.bench.as_ref()?;
    let mut ops = Interner {
        ids: HashMap::default(),
    };
    let mut dtypes = Interner {
        ids: HashMap::default(),
    };
    let ni = SideIx::build(&res.npu.graph, &res.npu.dump, &mut ops, &mut dtypes);
    let bi = SideIx::build(&b.graph, &b.dump, &mut ops, &mut dtypes);
    let stop = stop_words(&ni, &bi);
    Some(Ix { ni, bi, stop })
}

/// All candidates of every free NPU node for the current links (best first per node).
fn round_candidates(
    gn: &Graph,
    gb: &Graph,
    ix: &Ix,
    names: Names,
) -> (Round, Vec<(NodeId, Vec<Cand>)>, Names) {
    let mut r = Round::new(gn, gb, &ix.ni, &ix.bi);
    let mut sc = Scorer {
        gn,
        gb,
        ni: &ix.ni,
        bi: &ix.bi,
        names,
    };
    let mut out = Vec::new();
    for &u in &ix.ni.order {
        if r.pn[u as usize].is_some() {
            continue;
        }
        let c = sc.candidates(&mut r, u);
        if !c.is_empty() {
            out.push((u, c));
        }
    }
    (r, out, sc.names)
}

/// Ranked suggestions for the grey NPU nodes of a compared pair: up to three candidates per node
/// with a score of at least `min_score`, nodes in pre-order, best candidate first.
pub fn suggest(res: &PairResult, min_score: f64) -> Vec<Suggestion> {
    let Some(ix) = index(res) else {
        return Vec::new();
    };
    let Some(b) = res.bench.as_ref() else {
        return Vec::new();
    };
    let names = Names {
        stop: ix.stop.clone(),
        cache: HashMap::default(),
    };
    let (_, all, _) = round_candidates(&res.npu.graph, &b.graph, &ix, names);
    let mut out = Vec::new();
    for (u, cands) in all {
        for c in cands
            .into_iter()
            .filter(|c| c.score >= min_score)
            .take(PER_NODE)
        {
            out.push(Suggestion {
                npu: u,
                bench: c.v,
                score: c.score,
                reason: c.reason,
            });
        }
    }
    out
}

/// Accepts suggestions of at least `min_score` until nothing changes: in each round the pairs
/// that are unambiguous (best by a margin), mutually best and not left to a grey parent that
/// wants the same candidate. Pairs are linked and compared with [`manual_match`] (marked
/// modified). Returns the accepted (NPU, Bench) pairs in order.
pub fn accept_all(res: &mut PairResult, min_score: f64) -> Vec<(NodeId, NodeId)> {
    let Some(ix) = index(res) else {
        return Vec::new();
    };
    let mut names = Names {
        stop: ix.stop.clone(),
        cache: HashMap::default(),
    };
    let mut accepted = Vec::new();
    for _round in 0..200 {
        let Some(bs) = res.bench.as_ref() else { break };
        let (r, all, nm) = round_candidates(&res.npu.graph, &bs.graph, &ix, names);
        names = nm;
        let gn = &res.npu.graph;
        let gb = &bs.graph;
        let mut at: HashMap<NodeId, usize> = HashMap::default();
        for (i, (u, _)) in all.iter().enumerate() {
            at.insert(*u, i);
        }
        let score_of = |x: NodeId, v: NodeId| -> f64 {
            at.get(&x)
                .and_then(|&i| all[i].1.iter().find(|c| c.v == v))
                .map_or(0.0, |c| c.score)
        };
        let deferred = |u: NodeId, v: NodeId, s: f64| -> bool {
            if let Some(p) = gn.node(u).parent() {
                if r.pn[p as usize].is_none() && score_of(p, v) >= s - DEFER {
                    return true;
                }
            }
            if let Some(q) = gb.node(v).parent() {
                if r.pb[q as usize].is_none() && score_of(u, q) >= s - DEFER {
                    return true;
                }
            }
            false
        };
        let mut best_b: HashMap<NodeId, (f64, NodeId)> = HashMap::default();
        for (u, cands) in &all {
            for c in cands {
                if c.score < min_score || deferred(*u, c.v, c.score) {
                    continue;
                }
                let e = best_b.entry(c.v).or_insert((f64::NEG_INFINITY, *u));
                if c.score > e.0 {
                    *e = (c.score, *u);
                }
            }
        }
        let mut new: Vec<(NodeId, NodeId)> = Vec::new();
        for (u, cands) in &all {
            let top = &cands[0];
            if top.score < min_score {
                continue;
            }
            if cands.get(1).is_some_and(|c| top.score - c.score < MARGIN) {
                continue;
            }
            if deferred(*u, top.v, top.score) {
                continue;
            }
            if best_b.get(&top.v).map(|b| b.1) != Some(*u) {
                continue;
            }
            new.push((*u, top.v));
        }
        if new.is_empty() {
            break;
        }
        let (Some(bs), Some(cmp)) = (res.bench.as_mut(), res.comparison.as_mut()) else {
            break;
        };
        for &(u, v) in &new {
            manual_match(
                &mut res.npu.graph,
                &res.npu.dump,
                &mut bs.graph,
                &bs.dump,
                res.mode,
                cmp,
                u,
                v,
                false,
            );
        }
        accepted.extend(new);
    }
    accepted
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_of_class_names() {
        assert_eq!(tokens("GPTModel", &[]), ["gpt", "model"]);
        assert_eq!(tokens("Qwen2RMSNorm", &[]), ["norm", "qwen", "rms"]);
        assert_eq!(
            tokens("post_attention_layernorm", &[]),
            ["attention", "layernorm", "post"]
        );
        let stop = vec!["parallel".to_string(), "column".to_string()];
        assert_eq!(tokens("ColumnParallelLinear", &stop), ["linear"]);
    }

    #[test]
    fn statistics_closeness() {
        let a = [1.0, -1.0, 0.01, 3.0];
        assert_eq!(stat_close(&a, &a), 1.0);
        assert_eq!(stat_close(&a, &[1.0, -1.0, 0.0100000001, 3.0]), 1.0);
        assert!(stat_close(&a, &[1.001, -1.0, 0.01, 3.0]) > 0.3);
        assert_eq!(stat_close(&a, &[3.0, -3.0, 0.03, 9.0]), 0.0);
        let ints = [502.0, 0.0, f64::NAN, f64::NAN];
        assert_eq!(stat_close(&ints, &ints), 1.0);
        assert_eq!(stat_close(&ints, &a), 0.0);
    }

    #[test]
    fn shapes() {
        assert_eq!(shape_sim(Some(&[16, 2, 64]), Some(&[16, 2, 64])), 1.0);
        assert_eq!(shape_sim(Some(&[16, 2, 64]), Some(&[2, 16, 64])), 0.9);
        assert_eq!(shape_sim(Some(&[32, 64]), Some(&[2, 16, 64])), 0.6);
        assert_eq!(shape_sim(Some(&[16, 2, 64]), Some(&[2, 16, 128])), 0.0);
    }

    #[test]
    fn names_parse() {
        let p = parse_name(
            "Module.0.module.decoder.layers.0.mlp.MLP.backward.1",
            NodeOp::Module,
        );
        assert_eq!((p.kind, p.dir), (Kind::Module, Dir::Backward));
        assert_eq!(
            (p.class.as_str(), p.inst.as_str(), p.n.as_str()),
            ("MLP", "mlp", "1")
        );
        assert_eq!(
            forward_name(&p).as_deref(),
            Some("Module.0.module.decoder.layers.0.mlp.MLP.forward.1")
        );
        let p = parse_name("Module.a.Linear.parameters_grad.0", NodeOp::Module);
        assert_eq!(p.dir, Dir::ParamGrad);
        assert_eq!(
            forward_name(&p).as_deref(),
            Some("Module.a.Linear.forward.0")
        );
        let p = parse_name("Tensor.__add__.3.backward", NodeOp::FunctionApi);
        assert_eq!(
            forward_name(&p).as_deref(),
            Some("Tensor.__add__.3.forward")
        );
        assert_eq!(
            parse_name("Apis_Between_Modules.0", NodeOp::ApiCollection).kind,
            Kind::Other
        );
    }
}
