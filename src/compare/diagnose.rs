//! The diagnosis: where two runs part ways, and which module adds the error.
//!
//! msprobe's verdicts compare each matched pair of nodes on its own terms (shape, dtype, relative
//! error of each statistic), so across frameworks they mostly say "error" for reasons that are not
//! numerical. The diagnosis asks another question of the same graphs and matches: in execution
//! order, where does a tensor first differ by more than the pair's float noise, and which node
//! turns agreeing inputs into a differing output?
//!
//! - **Layout-invariant tensors.** A tensor is compared by its element count and its Max, Min,
//!   Mean and Norm, which do not change when its axes are permuted (Megatron `[s, b, h]` against
//!   HF `[b, s, h]`). A node's tensors are paired with the partner's tensors of the same role
//!   (inputs, outputs, parameters) and element count, each with the closest one: signatures that
//!   differ (an extra mask, a kwarg) do not shift the pairing.
//! - **The noise floor.** Each statistic's difference is relative to the tensor's scale (the
//!   largest magnitude for Max/Min, the RMS for Mean, the Norm itself), and divided by a tolerance
//!   set by the lower precision of the two dtypes (`noise_floor`), or by exact equality for
//!   integer and boolean tensors. The ratio is a tensor's divergence `r`: `r <= 1` is float noise.
//!   A pair whose dtypes differ in a few places only is judged by the higher precision there: a
//!   module computed at a lower precision than its counterpart is a fault to find, a bfloat16 run
//!   against a float32 one is not.
//! - **Grey nodes still carry data.** A tensor is one object however many entries record it: a
//!   module's output is its last child's output and the next node's input, with the same four
//!   statistics to the bit. Every tensor measured on a matched node lends its divergence to each
//!   entry that records the same statistics, so unmatched (grey) nodes and fused layers whose own
//!   outputs have no counterpart are judged by their neighbours' measurements.
//! - **Differences that go nowhere are not divergences.** msprobe pairs some nodes that do not
//!   compute the same quantity (Megatron's rotary frequencies against HF's cos and sin, two calls
//!   of a rotary product, the optimizer's calls across frameworks, which visit the parameters in
//!   other orders). Such a difference has no consequence: the innermost nodes that take it agree,
//!   or the module around it shows nothing of a large difference. A real divergence changes what
//!   is computed from it, if only a little (`drop_unpropagated`, `Search::contained`).
//! - **Attribution.** The data is taken in execution order: a node's inputs and parameters when it
//!   starts (its subtree's first dump entry), its outputs when it ends. The first place where the
//!   data differs names the suspect: a node whose output differs while its inputs agreed adds the
//!   error; a node whose parameters differ, its weights; a node whose inputs already differ
//!   points at its parent's own code between its children (and, as the next suspect, at the last
//!   module that ran before it there: statistics do not see a permutation). The modules around
//!   the suspect that also turn agreeing inputs into a differing output follow. The backward pass
//!   comes after the forward in execution order, so it is reached only when the forward agrees (a
//!   backward node's inputs are its outputs' gradients).
//!
//! One pair is [`diagnose_pair`]; [`Diagnosis::merge`] orders the pairs of a run (every step and
//! rank): the earliest step that parts ways first, and in it the pairs by the time of their first
//! difference (a rank that receives another's difference through a collective shows it later).
//! A step whose first difference is its weights, after a step of the rank that agreed, names that
//! step's optimizer first.

use crate::base::{join2, HashMap, Join};
use crate::compare::Sides;
use crate::formats::dump::RankDump;
use crate::formats::json::{KeyId, Store, Val};
use crate::formats::keys::k;
use crate::graph::items::{Item, Py, State};
use crate::graph::{Graph, NodeId, ROOT};

/// How far a float statistic may drift before it counts, relative to the tensor's scale, for a
/// dtype of epsilon `eps`. float32: 100 roundings (1.2e-5): two implementations of one layer on
/// one machine differ by at most ~5 after 2 layers and 2 steps (the clean pairs of
/// `tests/fixtures/diagnose` stay below 0.2 of it), and a float16 softmax cast back in one layer
/// moves its neighbours by ~20. A 16-bit float's statistics are reduced in float32 over rounded
/// elements, so its Max and Min move by whole roundings: 16 of float16's (1.6 %), 8 of bfloat16's
/// (6 %); float8 4 (50 %).
fn noise_floor(eps: f64) -> f64 {
    if eps >= 0.1 {
        eps * 4.0
    } else if eps >= 5e-3 {
        eps * 8.0
    } else if eps >= 5e-4 {
        eps * 16.0
    } else {
        eps * 100.0
    }
}
/// A divergence well inside the noise floor: data that agrees beyond doubt.
const CLEAN: f64 = 0.5;
/// A divergence of a value that should be exact (integers, booleans, md5): any difference.
const EXACT_MISMATCH: f64 = 1e12;

/// Forward or backward pass of a suspect.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Pass {
    Forward,
    Backward,
}

/// One ranked suspect: where the divergence shows, and why.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Suspect {
    pub step: i64,
    pub rank: i64,
    pub pass: Pass,
    /// The NPU node where the divergence shows.
    pub node: String,
    /// Its Bench counterpart (null for a grey NPU node).
    pub bench_node: Option<String>,
    /// How much error the node adds: log10 of its output's divergence over its inputs'.
    pub score: f64,
    pub why: String,
    /// The NPU node's id in its graph (the page reveals it).
    #[serde(skip)]
    pub node_id: NodeId,
    /// The Bench node's id in its graph.
    #[serde(skip)]
    pub bench_id: Option<NodeId>,
}

/// One layer's cell of a heatmap row.
#[derive(Debug, Clone, serde::Serialize)]
pub struct LayerCell {
    /// The layer's module path, e.g. `decoder.layers.1`.
    pub layer: String,
    /// log10 of the largest divergence of the layer's forward outputs (0: within noise).
    pub div: f64,
    /// The layer holds the pair's top suspect.
    pub source: bool,
}

/// The diagnosis of one (step, rank) pair. Its JSON (without the per-node and per-layer
/// columns, which the page alone shows) is what `diagnose --shard` writes and
/// [`Diagnosis::merge`] needs.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct PairDiagnosis {
    pub step: i64,
    pub rank: i64,
    /// Some measured tensor differs beyond the noise floor.
    pub diverged: bool,
    /// The dump entry of the first difference (execution order, comparable across ranks).
    pub first_time: u32,
    /// The first difference is a node's parameters (its inputs agreeing): the weights changed
    /// before this step ran.
    pub weights_first: bool,
    /// msprobe's `optimizer` node of the step, if any: name, and its Bench partner's.
    pub optimizer: Option<(String, Option<String>)>,
    /// Best first (empty when the pair agrees).
    pub suspects: Vec<Suspect>,
    /// Per NPU node (by id): log10 of its output's divergence, NaN where nothing was measured.
    #[serde(skip)]
    pub node_div: Vec<f32>,
    /// Per layer, in execution order.
    #[serde(skip)]
    pub layers: Vec<LayerCell>,
    /// Tensors measured (pairs of tensors compared).
    pub measured: usize,
}

/// The diagnosis of a run: every pair, the verdict, the ranked suspects.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Diagnosis {
    /// "agree" or "diverged".
    pub verdict: &'static str,
    pub suspects: Vec<Suspect>,
}

impl Diagnosis {
    /// The run's answer from its pairs' diagnoses: the suspects of the earliest step that parts
    /// ways first (a divergence in step 0 changes the weights of every later step), then by
    /// rank, each pair's own ranking kept; at most `top`.
    pub fn merge(pairs: &[PairDiagnosis], top: usize) -> Diagnosis {
        let mut order: Vec<&PairDiagnosis> = pairs.iter().filter(|p| p.diverged).collect();
        order.sort_by_key(|p| (p.step, p.first_time, p.rank));
        let Some(first) = order.first() else {
            return Diagnosis {
                verdict: "agree",
                suspects: Vec::new(),
            };
        };
        let first_step = first.step;
        let mut suspects: Vec<Suspect> = Vec::new();
        // The first step's pairs, earliest difference first: the best suspect of each, then the
        // rest of each (a rank that receives another rank's difference through a collective
        // shows it later than the rank where it arises).
        let firsts: Vec<&&PairDiagnosis> = order.iter().filter(|p| p.step == first_step).collect();
        for p in &firsts {
            if let Some(s) = optimizer_suspect(pairs, p) {
                suspects.push(s);
            }
        }
        let depth = firsts.iter().map(|p| p.suspects.len()).max().unwrap_or(0);
        for i in 0..depth {
            for p in &firsts {
                if let Some(s) = p.suspects.get(i) {
                    suspects.push(s.clone());
                }
            }
        }
        for p in order.iter().filter(|p| p.step != first_step) {
            suspects.extend(p.suspects.iter().cloned());
        }
        suspects.truncate(top.max(1));
        Diagnosis {
            verdict: "diverged",
            suspects,
        }
    }

    /// The human verdict line (names `suspects[0]`).
    pub fn verdict_line(&self) -> String {
        match self.suspects.first() {
            None => {
                "The runs agree within their float noise: no measured tensor differs beyond it."
                    .to_string()
            }
            Some(s) => format!(
                "The runs part ways at step {}, rank {}, in {} ({} pass).",
                s.step,
                s.rank,
                s.node,
                match s.pass {
                    Pass::Forward => "forward",
                    Pass::Backward => "backward",
                }
            ),
        }
    }
}

/// When the first difference of pair `p` is its weights and the rank's step before agreed:
/// that step's update (msprobe's `optimizer` node) as the suspect, named first.
fn optimizer_suspect(pairs: &[PairDiagnosis], p: &PairDiagnosis) -> Option<Suspect> {
    if !p.weights_first {
        return None;
    }
    let before = pairs
        .iter()
        .filter(|q| q.rank == p.rank && q.step < p.step)
        .max_by_key(|q| q.step)?;
    if before.diverged {
        return None;
    }
    let (node, bench_node) = before.optimizer.clone()?;
    let top = p.suspects.first()?;
    Some(Suspect {
        step: before.step,
        rank: p.rank,
        pass: Pass::Backward,
        node,
        bench_node,
        score: top.score,
        why: format!(
            "step {} agrees, but the parameters of step {} differ before any input does (first at {}): the update between them differs",
            before.step, p.step, top.node
        ),
        node_id: ROOT,
        bench_id: None,
    })
}

/// A tensor's layout-invariant summary.
#[derive(Debug, Clone, Copy)]
struct Tensor {
    numel: u64,
    /// Float tensor: its dtype's epsilon; integer, boolean or md5-only: None (compared exactly).
    eps: Option<f64>,
    max: f64,
    min: f64,
    mean: f64,
    norm: f64,
    /// The md5 of an md5-mode dump (0: none).
    md5: u64,
    /// The statistics' bits, the tensor's identity across entries.
    key: u64,
}

/// The epsilon of a dtype label (`torch.float32`, `Float16`, `torch.bfloat16`, ...); None for
/// integer and boolean types.
fn dtype_eps(dtype: &str) -> Option<f64> {
    let d = dtype.to_ascii_lowercase();
    let d = d.rsplit('.').next().unwrap_or(&d);
    if d.contains("bfloat16") || d == "bf16" {
        Some(7.8125e-3)
    } else if d.contains("float8") || d.contains("fp8") || d.contains("hif8") {
        Some(0.125)
    } else if d.contains("float16") || d == "half" || d == "fp16" {
        Some(9.765625e-4)
    } else if d.contains("float64") || d == "double" {
        Some(2.220446049250313e-16)
    } else if d.contains("float") || d.contains("complex") {
        Some(1.1920928955078125e-7)
    } else {
        None
    }
}

fn py_f64(p: Option<&Py>, store: &Store) -> f64 {
    match p {
        Some(Py::V(Val::Bool(b))) | Some(Py::B(b)) => f64::from(u8::from(*b)),
        Some(p) => p.num(store).map_or(f64::NAN, |n| n.as_f64()),
        None => f64::NAN,
    }
}

fn numel(p: Option<&Py>, store: &Store) -> Option<u64> {
    match p {
        Some(Py::V(v @ Val::List { .. })) => {
            let mut n: u64 = 1;
            for d in store.list(*v).iter() {
                match d {
                    Val::Int(i) if i >= 0 => n = n.saturating_mul(i as u64),
                    _ => return None,
                }
            }
            Some(n)
        }
        _ => None,
    }
}

/// A text's key (an md5 text, a dtype): stable across runs.
fn hash_str(s: &str) -> u64 {
    crate::base::fnv1a(s.as_bytes())
}

/// The summary of a tensor item (None for scalars, None-valued slots and non-tensors).
fn tensor_of(item: &Item, store: &Store) -> Option<Tensor> {
    let ty = item.get(k::TYPE)?.as_str(store)?;
    if !ty.ends_with("Tensor") {
        return None;
    }
    tensor_with(store, &|key| item.get(key).cloned())
}

/// The summary of a tensor whose fields `get` reads (None without a shape, or without any
/// statistic or md5).
fn tensor_with(store: &Store, get: &dyn Fn(KeyId) -> Option<Py>) -> Option<Tensor> {
    let n = numel(get(k::SHAPE).as_ref(), store)?;
    let dtype_py = get(k::DTYPE);
    let dtype = dtype_py
        .as_ref()
        .and_then(|d| d.as_str(store))
        .unwrap_or("");
    let md5 = get(k::MD5)
        .as_ref()
        .and_then(|m| m.as_str(store))
        .map_or(0, hash_str);
    let (max, min, mean, norm) = (get(k::MAX), get(k::MIN), get(k::MEAN), get(k::NORM));
    if md5 == 0
        && [&max, &min, &mean, &norm]
            .iter()
            .all(|p| p.as_ref().is_none_or(Py::is_none))
    {
        return None;
    }
    let t = Tensor {
        numel: n,
        eps: dtype_eps(dtype),
        max: py_f64(max.as_ref(), store),
        min: py_f64(min.as_ref(), store),
        mean: py_f64(mean.as_ref(), store),
        norm: py_f64(norm.as_ref(), store),
        md5,
        key: 0,
    };
    let mut key = hash_str(dtype) ^ n.rotate_left(17);
    for x in [t.max, t.min, t.mean, t.norm] {
        key = (key ^ x.to_bits())
            .wrapping_mul(0x9E37_79B9_7F4A_7C15)
            .rotate_left(23);
    }
    Some(Tensor {
        key: key ^ md5,
        ..t
    })
}

/// `|a - b| / scale`, 0 for two equal values (NaN equal to NaN), the mismatch for a NaN
/// against a number.
fn rel(a: f64, b: f64, scale: f64) -> f64 {
    if a.is_nan() || b.is_nan() {
        return if a.is_nan() == b.is_nan() {
            0.0
        } else {
            EXACT_MISMATCH
        };
    }
    if a == b {
        return 0.0;
    }
    // An infinity against a number beyond float16's range of the same sign: a masked score
    // (float32's lowest against float16's overflow), the same value to the computation after it.
    let saturated = |x: f64, y: f64| x.is_infinite() && y.is_finite() && y.abs() >= 65504.0;
    if (saturated(a, b) || saturated(b, a)) && a.signum() == b.signum() {
        return 0.0;
    }
    if !a.is_finite() || !b.is_finite() || scale <= 0.0 || !scale.is_finite() {
        return EXACT_MISMATCH;
    }
    (a - b).abs() / scale
}

/// The divergence of two tensors in units of their noise floor, or None when they cannot be
/// the same data (element counts or kinds differ).
fn divergence(a: &Tensor, b: &Tensor, strict_dtype: bool) -> Option<f64> {
    if a.numel != b.numel || a.eps.is_some() != b.eps.is_some() {
        return None;
    }
    let md5_only =
        |t: &Tensor| t.md5 != 0 && [t.max, t.min, t.mean, t.norm].iter().all(|x| x.is_nan());
    if md5_only(a) || md5_only(b) {
        if a.md5 == 0 || b.md5 == 0 {
            return None;
        }
        return Some(if a.md5 == b.md5 { 0.0 } else { EXACT_MISMATCH });
    }
    let Some(ea) = a.eps else {
        let same = rel(a.max, b.max, 1.0) == 0.0
            && rel(a.min, b.min, 1.0) == 0.0
            && rel(a.mean, b.mean, 1.0) == 0.0
            && rel(a.norm, b.norm, 1.0) == 0.0;
        return Some(if same { 0.0 } else { EXACT_MISMATCH });
    };
    let eb = b.eps.unwrap_or(ea);
    // Two dtypes: the lower precision sets the tolerance, unless the pair's dtypes differ in
    // a few places only (see `strict_dtype`).
    let tol = noise_floor(if strict_dtype { ea.min(eb) } else { ea.max(eb) });
    let mag = |x: f64| if x.is_finite() { x.abs() } else { 0.0 };
    let scale = mag(a.max).max(mag(a.min)).max(mag(b.max)).max(mag(b.min));
    let n = (a.numel.max(1) as f64).sqrt();
    let rms = (mag(a.norm) / n).max(mag(b.norm) / n);
    let d = rel(a.max, b.max, scale)
        .max(rel(a.min, b.min, scale))
        .max(rel(a.mean, b.mean, rms))
        .max(rel(a.norm, b.norm, mag(a.norm).max(mag(b.norm))));
    Some(d / tol)
}

/// The tensors of one node, by role.
#[derive(Debug, Default)]
struct NodeTensors {
    inputs: Vec<Tensor>,
    outputs: Vec<Tensor>,
    params: Vec<Tensor>,
}

/// A node's tensors: read straight from its dump.json entry (the items `Graph::io` derives are
/// strings and dicts this needs none of), or from its items where a parallel merge replaced them.
fn tensors_of(g: &Graph, d: &RankDump, id: NodeId) -> NodeTensors {
    if !g.io_override.contains_key(&id) {
        let node = g.node(id);
        let entry = node
            .entry()
            .and_then(|e| d.entries.get(e as usize))
            .map(|e| d.store.val(e.value));
        let mut t = NodeTensors::default();
        if let Some(v @ Val::Obj { .. }) = entry {
            let name = g.name(id);
            let grads = name.rsplit('.').take(2).any(|p| p == "parameters_grad");
            for (key, x) in d.store.obj(v).iter() {
                let role = match key {
                    _ if grads => &mut t.outputs,
                    k::INPUT_ARGS | k::INPUT_KWARGS | k::INPUT => &mut t.inputs,
                    k::OUTPUT => &mut t.outputs,
                    k::PARAMETERS => &mut t.params,
                    _ => continue,
                };
                walk_tensors(&d.store, x, role, 0);
            }
        }
        return t;
    }
    let (inp, out) = g.io(d, id);
    let mut t = NodeTensors::default();
    for (_, item) in inp.iter().chain(out.iter()) {
        let Some(x) = tensor_of(item, &d.store) else {
            continue;
        };
        match item.state {
            State::Input => t.inputs.push(x),
            State::Output | State::ParametersGrad => t.outputs.push(x),
            State::Parameters => t.params.push(x),
            State::Debug => {}
        }
    }
    t
}

/// The tensors in a dump value (lists, tuples and dicts of them, a P2P op's tensor), in order.
fn walk_tensors(store: &Store, v: Val, out: &mut Vec<Tensor>, depth: usize) {
    if depth > 64 {
        return;
    }
    match v {
        Val::List { .. } => {
            for x in store.list(v).iter() {
                walk_tensors(store, x, out, depth + 1);
            }
        }
        Val::Obj { .. } => {
            let o = store.obj(v);
            let is_tensor = o
                .get(k::TYPE)
                .and_then(|t| store.as_str(t))
                .is_some_and(|t| t.ends_with("Tensor"));
            if is_tensor {
                if let Some(t) = tensor_with(store, &|key| o.get(key).map(Py::V)) {
                    out.push(t);
                }
                return;
            }
            for (_, x) in o.iter() {
                walk_tensors(store, x, out, depth + 1);
            }
        }
        _ => {}
    }
}

/// Measures `a`'s tensors against `b`'s (same role, same element count, the closest), and
/// records each measured tensor's divergence under its identity.
fn measure(a: &[Tensor], b: &[Tensor], strict: bool, known: &mut HashMap<u64, f64>) -> usize {
    let mut n = 0;
    for t in a {
        let best = b
            .iter()
            .filter_map(|u| divergence(t, u, strict))
            .fold(None, |m: Option<f64>, r| Some(m.map_or(r, |m| m.min(r))));
        if let Some(r) = best {
            n += 1;
            known
                .entry(t.key)
                .and_modify(|v| *v = v.min(r))
                .or_insert(r);
        }
    }
    n
}

/// The largest known divergence among `ts` (None: none known).
fn worst(ts: &[Tensor], known: &HashMap<u64, f64>) -> Option<f64> {
    ts.iter()
        .filter_map(|t| known.get(&t.key).copied())
        .fold(None, |m, r| Some(m.map_or(r, |m: f64| m.max(r))))
}

/// A node's measured divergences (None: not measured).
#[derive(Debug, Clone, Copy, Default)]
struct Measure {
    inp: Option<f64>,
    out: Option<f64>,
    par: Option<f64>,
}

fn is_backward(name: &str) -> bool {
    name.contains(".backward") || name.contains("parameters_grad")
}

/// The state of one pair's search.
struct Search<'a> {
    g: &'a Graph,
    m: Vec<Measure>,
    /// Per node: the earliest dump entry of its subtree (when it starts).
    start: Vec<u32>,
    /// Per node: the latest dump entry of its subtree (when it ends).
    end: Vec<u32>,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Reason {
    /// Inputs agree, outputs differ.
    Adds,
    /// Inputs agree, parameters differ.
    Weights,
    /// The node's child receives differing inputs while everything before agreed: the node's
    /// own code between its children.
    Between(NodeId),
    /// The first node that shows a difference, its inputs differing already (at the top level).
    First,
    /// A module around the first suspect whose output differs while its inputs agree.
    Contains,
    /// The node that ran just before the first one that receives differing inputs: its
    /// statistics agree, but a permutation does not change statistics.
    Before(NodeId),
}

/// One point of the execution where data is seen: a node's inputs (and parameters) when it
/// starts, its outputs when it ends.
#[derive(Debug, Clone, Copy)]
struct Event {
    time: u32,
    /// 0: inputs, 1: outputs.
    kind: u8,
    depth: u32,
    node: NodeId,
}

impl Search<'_> {
    fn diverged(r: Option<f64>) -> bool {
        r.is_some_and(|r| r > 1.0)
    }

    /// The nodes' measured data in execution order: inputs before outputs at one time, the
    /// outer node's inputs first (a module starts with its first child) and the inner node's
    /// outputs first (a module ends with its last child).
    fn events(&self, order: &[NodeId]) -> Vec<Event> {
        let mut ev = Vec::new();
        for &id in order {
            let m = self.m[id as usize];
            let depth = self.g.ancestors(id).len() as u32;
            if m.inp.is_some() || m.par.is_some() {
                ev.push(Event {
                    time: self.start[id as usize],
                    kind: 0,
                    depth,
                    node: id,
                });
            }
            if m.out.is_some() {
                ev.push(Event {
                    time: self.end[id as usize],
                    kind: 1,
                    depth,
                    node: id,
                });
            }
        }
        ev.sort_by_key(|e| {
            let d = if e.kind == 0 {
                e.depth
            } else {
                u32::MAX - e.depth
            };
            (e.time, e.kind, d)
        });
        ev
    }

    /// Whether the module around `n` (the nearest one with a measured output) gives an output
    /// that agrees well inside the noise: a difference that does not reach it is no divergence
    /// (two calls msprobe paired that are not the same computation).
    fn contained(&self, n: NodeId, r: f64) -> bool {
        for a in self.g.ancestors(n).into_iter().rev() {
            if a == ROOT {
                return false;
            }
            if let Some(out) = self.m[a as usize].out {
                // A large difference gone without a trace; a small one may be diluted (a float16
                // softmax cast back moves its module's output by a fraction of the noise).
                return out < CLEAN && r > 300.0 * out.max(0.01);
            }
        }
        false
    }

    /// The first place where the data differs, and the node it is laid on, deepest first, with
    /// the modules around it that also turn agreeing inputs into a differing output.
    /// Also the time of that first difference (its dump entry).
    fn locate(&self, order: &[NodeId]) -> (Vec<(NodeId, Reason)>, u32) {
        let ev = self.events(order);
        // The nodes whose outputs agreed before the first difference, in order.
        let mut ok: Vec<NodeId> = Vec::new();
        let Some(first) = ev.iter().find(|e| {
            let m = self.m[e.node as usize];
            let r = if e.kind == 0 {
                m.inp.unwrap_or(0.0).max(m.par.unwrap_or(0.0))
            } else {
                m.out.unwrap_or(0.0)
            };
            let found = r > 1.0 && !self.contained(e.node, r);
            if e.kind == 1 && !found {
                ok.push(e.node);
            }
            found
        }) else {
            return (Vec::new(), 0);
        };
        let n = first.node;
        let m = self.m[n as usize];
        let mut chain = Vec::new();
        if first.kind == 1 {
            chain.push((n, Reason::Adds));
        } else if Self::diverged(m.par) && !Self::diverged(m.inp) {
            chain.push((n, Reason::Weights));
        } else {
            match self.g.node(n).parent().filter(|p| *p != ROOT) {
                Some(p) => {
                    chain.push((p, Reason::Between(n)));
                    // The last module that ran before, inside the same parent: its statistics
                    // agree, and statistics do not see a permutation (heads or halves swapped
                    // in a converted weight).
                    let inside = |b: &NodeId| *b != p && self.g.ancestors(*b).contains(&p);
                    let module = |b: &NodeId| self.g.node(*b).op == crate::graph::NodeOp::Module;
                    if let Some(&b) = ok
                        .iter()
                        .rev()
                        .find(|b| inside(b) && module(b))
                        .or_else(|| ok.iter().rev().find(|b| inside(b)))
                    {
                        chain.push((b, Reason::Before(n)));
                    }
                }
                None => chain.push((n, Reason::First)),
            }
        }
        // The modules around it that take agreeing inputs and give a differing output.
        let Some(&(below, _)) = chain.first() else {
            return (chain, first.time);
        };
        for a in self.g.ancestors(below).into_iter().rev() {
            if a == ROOT {
                break;
            }
            let am = self.m[a as usize];
            if Self::diverged(am.out) && !Self::diverged(am.inp) {
                chain.push((a, Reason::Contains));
            }
        }
        (chain, first.time)
    }
}

fn fmt_r(r: Option<f64>) -> String {
    match r {
        None => "unmeasured".into(),
        Some(r) if r >= EXACT_MISMATCH => "not equal".into(),
        Some(r) if r >= 100.0 => format!("{r:.2e} x the noise floor"),
        Some(r) => format!("{r:.2} x the noise floor"),
    }
}

/// Diagnoses one compared pair: measures every matched node's tensors, spreads the measures
/// to every entry of the same tensors, and searches the NPU graph from its root. `join`: the
/// host's way to read the two sides' tensors side by side (the CLI's two threads), or None.
pub fn diagnose_pair(sides: Sides, step: i64, rank: i64, join: Option<Join>) -> PairDiagnosis {
    let gn = sides.gn;
    let (order, search, measured) = measure_pair(sides, join);
    let mut suspects = Vec::new();
    let (chain, first_time) = search.locate(&order);
    let weights_first = chain.first().is_some_and(|c| c.1 == Reason::Weights);
    for (id, reason) in chain {
        suspects.push(suspect(&search, gn, sides.gb, step, rank, id, reason));
    }
    let optimizer = gn.node(ROOT).children.iter().find_map(|c| {
        (gn.name(*c) == "optimizer").then(|| {
            (
                gn.name(*c).to_string(),
                gn.node(*c).partner().map(|b| sides.gb.name(b).to_string()),
            )
        })
    });
    let diverged = !suspects.is_empty();
    let node_div: Vec<f32> = search
        .m
        .iter()
        .map(|x| x.out.map_or(f32::NAN, |r| r.max(1.0).log10() as f32))
        .collect();
    let layers = layer_cells(&search, gn, &order, suspects.first().map(|s| s.node_id));
    PairDiagnosis {
        step,
        rank,
        diverged,
        first_time,
        weights_first,
        optimizer,
        suspects,
        node_div,
        layers,
        measured,
    }
}

/// Every node's measures, one line each in execution order (for `probelens diagnose --trace`).
pub fn trace_pair(sides: Sides) -> String {
    let (order, search, _) = measure_pair(sides, None);
    let mut ids = order.clone();
    ids.sort_by_key(|id| search.start[*id as usize]);
    let f = |r: Option<f64>| r.map_or("-".to_string(), |r| format!("{r:.3e}"));
    let mut out = String::new();
    for id in ids {
        let m = search.m[id as usize];
        let depth = sides.gn.ancestors(id).len();
        out.push_str(&format!(
            "{:>6} {}{} in={} out={} par={}{}\n",
            search.start[id as usize],
            "  ".repeat(depth.min(20)),
            sides.gn.name(id),
            f(m.inp),
            f(m.out),
            f(m.par),
            if sides.gn.node(id).partner().is_some() {
                ""
            } else {
                " (grey)"
            }
        ));
    }
    out
}

/// Measures a pair: the nodes in post-order and the search over their measures.
fn measure_pair(sides: Sides<'_>, join: Option<Join>) -> (Vec<NodeId>, Search<'_>, usize) {
    let Sides { gn, dn, gb, db } = sides;
    let order = gn.post_order();
    let n_nodes = gn.nodes.len();
    let to_measure = pairs_to_measure(gn, gb, &order);
    let (tens, pairs) = join2(
        join,
        || {
            let mut tens: Vec<Option<NodeTensors>> = (0..n_nodes).map(|_| None).collect();
            for &id in &order {
                tens[id as usize] = Some(tensors_of(gn, dn, id));
            }
            tens
        },
        || {
            to_measure
                .iter()
                .map(|&(id, b)| (id, tensors_of(gb, db, b)))
                .collect::<Vec<(NodeId, NodeTensors)>>()
        },
    );
    let strict = strict_dtype(&tens, &pairs);
    let mut known: HashMap<u64, f64> = HashMap::default();
    let mut measured = 0;
    // Forward pairs first: a backward pair whose forward twin's data differs is not measured
    // (two calls msprobe paired that are not the same computation, such as the two products
    // of a rotary embedding, receive one gradient and give different ones).
    let mut fwd_differs: HashMap<&str, ()> = HashMap::default();
    for (id, bt) in &pairs {
        let Some(nt) = &tens[*id as usize] else {
            continue;
        };
        let name = gn.name(*id);
        if forward_twin(name).is_some_and(|f| fwd_differs.contains_key(f.as_str())) {
            continue;
        }
        let mut pair: HashMap<u64, f64> = HashMap::default();
        measured += measure(&nt.inputs, &bt.inputs, strict, &mut pair);
        // Outputs of another count are other quantities (Megatron's rotary embedding gives
        // its frequencies, HF's the cos and sin of them).
        if nt.outputs.len() == bt.outputs.len() {
            measured += measure(&nt.outputs, &bt.outputs, strict, &mut pair);
        }
        measured += measure(&nt.params, &bt.params, strict, &mut pair);
        if pair.values().any(|r| *r > 1.0) && !is_backward(name) {
            fwd_differs.insert(name, ());
        }
        for (k, r) in pair {
            known.entry(k).and_modify(|v| *v = v.min(r)).or_insert(r);
        }
    }
    drop_unpropagated(gn, &order, &tens, &mut known);
    let mut m = vec![Measure::default(); n_nodes];
    let mut start = vec![u32::MAX; n_nodes];
    let mut end = vec![0u32; n_nodes];
    for &id in &order {
        if let Some(t) = &tens[id as usize] {
            m[id as usize] = Measure {
                inp: worst(&t.inputs, &known),
                out: worst(&t.outputs, &known),
                par: worst(&t.params, &known),
            };
        }
        let node = gn.node(id);
        let own = node.entry().unwrap_or(u32::MAX);
        let kids = node
            .children
            .iter()
            .map(|c| start[*c as usize])
            .min()
            .unwrap_or(u32::MAX);
        start[id as usize] = own.min(kids);
        let last = node
            .children
            .iter()
            .map(|c| end[*c as usize])
            .max()
            .unwrap_or(0);
        end[id as usize] = node.entry().unwrap_or(0).max(last);
    }
    (
        order,
        Search {
            g: gn,
            m,
            start,
            end,
        },
        measured,
    )
}

/// The matched NPU nodes to measure with their partners: forward first, then backward. The
/// optimizer step (APIs outside every module after the backward pass) only between runs of the
/// same code (nine in ten matched nodes named as their partners): msprobe pairs its calls by count,
/// and two frameworks visit their parameters in other orders.
fn pairs_to_measure(gn: &Graph, gb: &Graph, order: &[NodeId]) -> Vec<(NodeId, NodeId)> {
    let first_backward = order
        .iter()
        .filter(|id| is_backward(gn.name(**id)))
        .filter_map(|id| gn.node(*id).entry())
        .min()
        .unwrap_or(u32::MAX);
    let matched: Vec<(NodeId, NodeId)> = order
        .iter()
        .filter_map(|id| gn.node(*id).partner().map(|b| (*id, b)))
        .collect();
    let same_names = matched
        .iter()
        .filter(|(id, b)| gn.name(*id) == gb.name(*b))
        .count();
    let same_code = same_names * 10 >= matched.len() * 9;
    let optimizer = |id: NodeId| {
        gn.node(id).entry().is_some_and(|e| e > first_backward)
            && !is_backward(gn.name(id))
            && outside_modules(gn, id)
    };
    let mut out: Vec<(NodeId, NodeId)> = matched
        .iter()
        .copied()
        .filter(|(id, _)| !is_backward(gn.name(*id)))
        .collect();
    out.extend(matched.iter().filter(|(id, _)| is_backward(gn.name(*id))));
    out.retain(|(id, _)| same_code || !optimizer(*id));
    out
}

/// Whether the pair's dtypes differ in a few places only (at most one measured float tensor in
/// twenty): a module computed at a lower precision than its counterpart is then a difference to
/// find, judged by the higher precision's noise. Where they differ throughout (a bfloat16 run
/// against a float32 one), the lower precision sets the noise everywhere.
fn strict_dtype(tens: &[Option<NodeTensors>], pairs: &[(NodeId, NodeTensors)]) -> bool {
    let (mut total, mut differ) = (0usize, 0usize);
    for (id, bt) in pairs {
        let Some(nt) = &tens[*id as usize] else {
            continue;
        };
        let roles = [
            (&nt.inputs, &bt.inputs),
            (&nt.outputs, &bt.outputs),
            (&nt.params, &bt.params),
        ];
        for (a, b) in roles {
            for t in a.iter().filter(|t| t.eps.is_some()) {
                let same_size: Vec<&Tensor> = b.iter().filter(|u| u.numel == t.numel).collect();
                if same_size.is_empty() {
                    continue;
                }
                total += 1;
                if !same_size.iter().any(|u| u.eps == t.eps) {
                    differ += 1;
                }
            }
        }
    }
    differ * 20 <= total
}

/// The forward node of a backward one (`X.backward.N` -> `X.forward.N`, `Api.N.backward` ->
/// `Api.N.forward`).
fn forward_twin(name: &str) -> Option<String> {
    if let Some(api) = name.strip_suffix(".backward") {
        return Some(format!("{api}.forward"));
    }
    let (head, n) = name.rsplit_once('.')?;
    let module = head.strip_suffix(".backward")?;
    Some(format!("{module}.forward.{n}"))
}

/// No module of the model above `id` (API collections and msprobe's `optimizer` node do not
/// count).
fn outside_modules(g: &Graph, id: NodeId) -> bool {
    let mut p = g.node(id).parent();
    while let Some(x) = p {
        if x == ROOT {
            return true;
        }
        if g.node(x).op == crate::graph::NodeOp::Module && g.name(x).contains('.') {
            return false;
        }
        p = g.node(x).parent();
    }
    true
}

/// Drops the measures of differing tensors whose difference goes nowhere. The evidence is the
/// innermost nodes that take such a tensor while their other inputs agree (not the modules
/// around them, which may hold another difference): when one of them computes an output that
/// agrees well inside the noise and none computes one that differs, the two tensors were never
/// the same quantity (Megatron's rotary frequencies against HF's cos/sin have one element count
/// and no relation). A real divergence changes what is computed from it, if only a little (a
/// residual add that dilutes it stays above a twentieth of the noise floor).
fn drop_unpropagated(
    g: &Graph,
    order: &[NodeId],
    tens: &[Option<NodeTensors>],
    known: &mut HashMap<u64, f64>,
) {
    let differs = |known: &HashMap<u64, f64>, key: u64| known.get(&key).is_some_and(|r| *r > 1.0);
    // key -> clean consumers (node, its output's divergence)
    let mut consumers: HashMap<u64, Vec<(NodeId, f64)>> = HashMap::default();
    // The differing integer and boolean tensors.
    let mut exact: HashMap<u64, ()> = HashMap::default();
    for t in tens.iter().flatten() {
        for x in t
            .inputs
            .iter()
            .chain(t.outputs.iter())
            .chain(t.params.iter())
        {
            if x.eps.is_none() && differs(known, x.key) {
                exact.insert(x.key, ());
            }
        }
    }
    for &id in order {
        let Some(t) = &tens[id as usize] else {
            continue;
        };
        let Some(out) = worst(&t.outputs, known) else {
            continue;
        };
        // A module with measured children may hold a difference of its own: its differing
        // output is no evidence (its agreeing output is).
        let measured_child = g.node(id).children.iter().any(|c| {
            tens[*c as usize]
                .as_ref()
                .is_some_and(|ct| worst(&ct.outputs, known).is_some())
        });
        if measured_child && out > 1.0 {
            continue;
        }
        let mut differing = t
            .inputs
            .iter()
            .chain(t.params.iter())
            .map(|x| x.key)
            // A tensor a node passes through unchanged is not consumed by it.
            .filter(|k| !t.outputs.iter().any(|o| o.key == *k))
            .filter(|k| differs(known, *k));
        // Only a node whose one differing input is this tensor tells what it does.
        if let (Some(key), None) = (differing.next(), differing.next()) {
            consumers.entry(key).or_default().push((id, out));
        }
    }
    for (key, list) in &consumers {
        let ids: Vec<NodeId> = list.iter().map(|c| c.0).collect();
        let mut outer: Vec<NodeId> = Vec::new();
        for &c in &ids {
            outer.extend(g.ancestors(c).into_iter().filter(|a| ids.contains(a)));
        }
        let inner = list.iter().filter(|c| !outer.contains(&c.0));
        let (mut agree, mut differ) = (0, 0);
        for &(_, out) in inner {
            if out > 1.0 {
                differ += 1;
            } else if out < CLEAN {
                agree += 1;
            }
        }
        if (agree > 0 || exact.contains_key(key)) && differ == 0 {
            known.remove(key);
        }
    }
    // An integer or boolean tensor (token ids, labels, positions, masks) that differs counts
    // only where it changes what is computed from it: two frameworks shift labels or build
    // masks and positions their own ways.
    for key in exact.into_keys() {
        if !consumers.contains_key(&key) {
            known.remove(&key);
        }
    }
}

fn suspect(
    s: &Search,
    gn: &Graph,
    gb: &Graph,
    step: i64,
    rank: i64,
    id: NodeId,
    reason: Reason,
) -> Suspect {
    let name = gn.name(id).to_string();
    let m = s.m[id as usize];
    let gain = |out: Option<f64>, inp: Option<f64>| {
        out.unwrap_or(1.0).max(1.0).log10() - inp.unwrap_or(1.0).max(1.0).log10()
    };
    let (score, why) = match reason {
        Reason::Adds => (
            gain(m.out, m.inp),
            match m.inp {
                Some(r) if r > 1.0 => format!(
                    "its output differs ({}), the first data that does beyond what its enclosing module shows; its inputs differ by {}",
                    fmt_r(m.out),
                    fmt_r(m.inp)
                ),
                Some(_) => format!(
                    "its output differs ({}) while its inputs agree ({})",
                    fmt_r(m.out),
                    fmt_r(m.inp)
                ),
                None => format!(
                    "its output differs ({}), the first data that does; its inputs have no counterpart to measure",
                    fmt_r(m.out)
                ),
            },
        ),
        Reason::Weights => (
            gain(m.out.or(m.par), m.inp),
            format!(
                "its parameters differ ({}) while its inputs agree ({})",
                fmt_r(m.par),
                fmt_r(m.inp)
            ),
        ),
        Reason::Between(c) => {
            let cm = s.m[c as usize];
            (
                gain(cm.inp.or(cm.out), m.inp),
                format!(
                    "the error arises in its own code: its child {} already receives differing inputs ({}) after the children before it agreed",
                    gn.name(c),
                    fmt_r(cm.inp.or(cm.out))
                ),
            )
        }
        Reason::First => (
            gain(m.out, None),
            format!(
                "the first node whose data differs ({}); its inputs differ already ({})",
                fmt_r(m.out),
                fmt_r(m.inp)
            ),
        ),
        Reason::Before(c) => (
            0.0,
            format!(
                "it ran last before {} first received differing inputs; its statistics agree, which a permutation of its output (heads or halves swapped) would not change",
                gn.name(c)
            ),
        ),
        Reason::Contains => (
            gain(m.out, m.inp),
            format!(
                "it holds the first difference: its output differs ({}) while its inputs agree ({})",
                fmt_r(m.out),
                fmt_r(m.inp)
            ),
        ),
    };
    Suspect {
        step,
        rank,
        pass: if is_backward(&name) {
            Pass::Backward
        } else {
            Pass::Forward
        },
        bench_node: gn.node(id).partner().map(|b| gb.name(b).to_string()),
        bench_id: gn.node(id).partner(),
        node: name,
        score: (score * 1000.0).round() / 1000.0,
        why,
        node_id: id,
    }
}

/// The layer a node name lies in: the path through the first numbered component after the
/// model-chunk wrapper (`Module.0.module.module.decoder.layers.1.mlp...` -> `decoder.layers.1`).
pub fn layer_of(name: &str) -> Option<String> {
    let parts: Vec<&str> = name.split('.').collect();
    // Skip "Module", the chunk number and the wrappers' "module" components.
    let mut begin;
    if parts.first() == Some(&"Module") {
        begin = 1;
        if parts
            .get(1)
            .is_some_and(|p| p.bytes().all(|b| b.is_ascii_digit()))
        {
            begin = 2;
        }
        while parts.get(begin) == Some(&"module") {
            begin += 1;
        }
    } else {
        return None;
    }
    for i in begin + 1..parts.len() {
        let p = parts[i];
        if !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()) {
            let prev = parts[i - 1];
            if prev == "forward" || prev == "backward" || prev.starts_with(char::is_uppercase) {
                return None;
            }
            return Some(parts[begin..=i].join("."));
        }
    }
    None
}

fn layer_cells(s: &Search, gn: &Graph, order: &[NodeId], top: Option<NodeId>) -> Vec<LayerCell> {
    // The layer of the top suspect, or of its nearest module that has one (an API's name has
    // none).
    let top_layer = top.and_then(|t| {
        std::iter::once(t)
            .chain(gn.ancestors(t).into_iter().rev())
            .find_map(|a| layer_of(gn.name(a)))
    });
    let mut cells: Vec<(u32, LayerCell)> = Vec::new();
    let mut at: HashMap<String, usize> = HashMap::default();
    for &id in order {
        let name = gn.name(id);
        if is_backward(name) {
            continue;
        }
        let Some(layer) = layer_of(name) else {
            continue;
        };
        let div = s.m[id as usize].out.map_or(0.0, |r| r.max(1.0).log10());
        let start = s.start[id as usize];
        match at.get(&layer) {
            Some(&i) => {
                let c = &mut cells[i];
                c.0 = c.0.min(start);
                c.1.div = c.1.div.max(div);
            }
            None => {
                at.insert(layer.clone(), cells.len());
                cells.push((
                    start,
                    LayerCell {
                        source: top_layer.as_deref() == Some(layer.as_str()),
                        layer,
                        div,
                    },
                ));
            }
        }
    }
    cells.sort_by_key(|c| c.0);
    cells.into_iter().map(|c| c.1).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layer_paths() {
        assert_eq!(
            layer_of("Module.0.module.module.decoder.layers.1.mlp.MLP.forward.0").as_deref(),
            Some("decoder.layers.1")
        );
        assert_eq!(
            layer_of("Module.module.model.layers.10.self_attn.Qwen2Attention.forward.0").as_deref(),
            Some("model.layers.10")
        );
        assert_eq!(layer_of("Module.0.module.module.GPTModel.forward.0"), None);
        assert_eq!(layer_of("Torch.matmul.3.forward"), None);
    }

    #[test]
    fn dtype_epsilons() {
        assert_eq!(dtype_eps("torch.float32"), Some(1.1920928955078125e-7));
        assert_eq!(dtype_eps("torch.bfloat16"), Some(7.8125e-3));
        assert_eq!(dtype_eps("torch.float16"), Some(9.765625e-4));
        assert_eq!(dtype_eps("Float16"), Some(9.765625e-4));
        assert_eq!(dtype_eps("torch.int64"), None);
        assert_eq!(dtype_eps("torch.bool"), None);
    }

    #[test]
    fn saturated_values_are_equal() {
        // A masked score: float32's lowest against float16's overflow.
        assert_eq!(rel(f64::NEG_INFINITY, -3.4028234663852886e38, 1.0), 0.0);
        assert_eq!(rel(f64::NEG_INFINITY, -65504.0, 1.0), 0.0);
        assert_eq!(rel(f64::NEG_INFINITY, 3.4e38, 1.0), EXACT_MISMATCH);
        assert_eq!(rel(f64::NEG_INFINITY, -100.0, 1.0), EXACT_MISMATCH);
    }

    fn t(numel: u64, eps: Option<f64>, s: [f64; 4]) -> Tensor {
        Tensor {
            numel,
            eps,
            max: s[0],
            min: s[1],
            mean: s[2],
            norm: s[3],
            md5: 0,
            key: 0,
        }
    }

    #[test]
    fn divergence_is_relative_to_the_noise_floor() {
        let f32e = Some(1.1920928955078125e-7);
        let a = t(100, f32e, [2.0, -2.0, 0.01, 10.0]);
        assert_eq!(divergence(&a, &a, false), Some(0.0));
        // A few roundings: noise.
        let b = t(100, f32e, [2.0 + 1e-6, -2.0, 0.01, 10.0]);
        assert!(divergence(&a, &b, false).is_some_and(|r| r < 1.0));
        // 1 % on the norm: far beyond it.
        let c = t(100, f32e, [2.0, -2.0, 0.01, 10.1]);
        assert!(divergence(&a, &c, false).is_some_and(|r| r > 10.0));
        // A bfloat16 label on one side: the lower precision sets the noise, unless the pair's
        // dtypes differ in a few places only (strict).
        let strict = divergence(&a, &t(100, Some(7.8125e-3), [2.0, -2.0, 0.01, 10.1]), true);
        assert!(strict.is_some_and(|r| r > 10.0));
        // The same difference is noise for bfloat16 on either side.
        let cb = t(100, Some(7.8125e-3), [2.0, -2.0, 0.01, 10.1]);
        assert!(divergence(&a, &cb, false).is_some_and(|r| r < 1.0));
        // Other element counts or kinds: not comparable.
        assert_eq!(
            divergence(&a, &t(99, f32e, [2.0, -2.0, 0.01, 10.0]), false),
            None
        );
        assert_eq!(
            divergence(&a, &t(100, None, [2.0, -2.0, 0.01, 10.0]), false),
            None
        );
        // Integers are exact.
        let i = t(4, None, [3.0, 0.0, 1.0, 4.0]);
        assert_eq!(divergence(&i, &i, false), Some(0.0));
        assert_eq!(
            divergence(&i, &t(4, None, [3.0, 0.0, 1.5, 4.0]), false),
            Some(EXACT_MISMATCH)
        );
        // NaN against NaN agrees; against a number it does not.
        assert_eq!(
            divergence(
                &t(4, f32e, [f64::NAN, 0.0, 0.0, 0.0]),
                &t(4, f32e, [f64::NAN, 0.0, 0.0, 0.0]),
                false
            ),
            Some(0.0)
        );
        assert!(divergence(
            &t(4, f32e, [f64::NAN, 0.0, 0.0, 0.0]),
            &t(4, f32e, [1.0, 0.0, 0.0, 0.0]),
            false
        )
        .is_some_and(|r| r >= EXACT_MISMATCH / 1e3));
    }
}
