//! Real-tensor compare (dump task `tensor`, msprobe's compare mode "all"): the metrics of
//! `CompareRealData` and the tensor checkers, computed with msprobe's exact numerics.
//!
//! Matching queues each compared pair in [`Comparison::real_data`]; [`compare_tensors`] then
//! does what msprobe's `GraphComparator._postcompare` does after matching (after the API
//! collections got their index, so they stay at 0 as in msprobe): for every row of a queued node
//! it reads the two tensor files (`dump_tensor_data/<data_name>`), computes the six metrics,
//! runs `TENSOR_CHECKERS`, and writes `Cosine … Err_message` into the node's items.
//!
//! Numerics (`npy_compare.py`, `algorithm/builtin_algorithm/alg_*.py`):
//! * tensors are squeezed (`np.squeeze`); bfloat16/float8 arrive as float32;
//! * validators in order: empty → `unsupported`; shapes differ → `shape unmatched`; 0-d → Cosine,
//!   EucDist and the ratios `unsupported`, MaxAbsErr/MaxRelativeErr computed in the arrays' own
//!   dtype; nan/inf at different positions → `N/A` (at the same positions they are zeroed);
//! * Cosine, EucDist and MaxAbsErr work on float64 copies; the dot products are OpenBLAS's
//!   `ddot` as NumPy calls it (Haswell/Zen kernel: 16 FMA lanes, a fixed reduction, a plain
//!   tail; two halves summed above 10,000 elements as with 2 BLAS threads), so EucDist, printed
//!   unrounded, matches bit for bit on such a machine;
//! * MaxRelativeErr and the ratios work in `np.result_type(n, b, float32)` (float32 for
//!   float16/float32 inputs), with that type's eps added to both sides where bench is 0; the
//!   ratio thresholds are compared in that type;
//! * results pass through `float('{:.12f}'.format(x))`; Cosine is then rounded to 6 places if
//!   above 0.9999; EucDist is not rounded.

use crate::base::error::Diagnostic;
use crate::base::{join_path, Files};
use crate::compare::{
    raise, rows_for, set_result, str2float, ApiRows, Comparison, Ignore, Level, Row,
    IGNORE_PRECISION,
};
use crate::formats::dump::RankDump;
use crate::formats::json::Store;
use crate::formats::keys::k;
use crate::formats::tensor::{f16_to_f32, f32_to_f16, read_tensor, DType, Data, Tensor};
use crate::graph::cells::ItemResult;
use crate::graph::items::{Item, ItemMap, Mode, Py};
use crate::graph::{Graph, Precision};

const MSG_ONE_THOUSANDTH: &str =
    "error: The input/parameters of One Thousandth Err Ratio > 0.9 while the output < 0.6.";
const MSG_COSINE: &str =
    "warning: The input/parameters of Cosine > 0.9, and input/parameters - output > 0.1";

const UNSUPPORTED: &str = "unsupported";
const SHAPE_UNMATCH: &str = "shape unmatched";
const N_A: &str = "N/A";
const NAN: &str = "Nan";

/// The six metric columns, in msprobe's order.
pub const METRIC_KEYS: [crate::formats::json::KeyId; 6] = [
    k::COSINE,
    k::EUC_DIST,
    k::MAX_ABS_ERR,
    k::MAX_REL,
    k::ONE_THOUSANDTH,
    k::FIVE_THOUSANDTHS,
];

/// The columns of a real-tensor compare: the metrics, then the verdict columns.
const REAL_COLUMNS: [crate::formats::json::KeyId; 9] = [
    METRIC_KEYS[0],
    METRIC_KEYS[1],
    METRIC_KEYS[2],
    METRIC_KEYS[3],
    METRIC_KEYS[4],
    METRIC_KEYS[5],
    k::RG_CONSISTENT,
    k::RESULT,
    k::ERR_MESSAGE,
];

/// The tensor files of one side: its files and the rank folder.
#[derive(Clone, Copy)]
pub struct TensorSide<'a> {
    pub files: &'a dyn Files,
    pub rank_dir: &'a str,
}

fn all(v: &str) -> [Py; 6] {
    std::array::from_fn(|_| Py::S(v.to_string()))
}

/// `format_value`: `float('{:.12f}'.format(x))`.
pub fn format_value(x: f64) -> f64 {
    format!("{x:.12}").parse().unwrap_or(x)
}

/// Python's `round(x, 6)`.
fn round6(x: f64) -> f64 {
    format!("{x:.6}").parse().unwrap_or(x)
}

/// OpenBLAS's double-precision dot kernel for Haswell/Zen on one thread.
fn ddot_kernel(x: &[f64], y: &[f64]) -> f64 {
    let n = x.len().min(y.len());
    let n1 = n & !15;
    let mut dot = 0.0f64;
    if n1 > 0 {
        let mut acc = [0.0f64; 16];
        for (xs, ys) in x[..n1].chunks_exact(16).zip(y[..n1].chunks_exact(16)) {
            for l in 0..16 {
                acc[l] = xs[l].mul_add(ys[l], acc[l]);
            }
        }
        // Each ymm accumulator folds its high half onto its low half, then the four are summed
        // pairwise and the two lanes added.
        let v: [[f64; 2]; 4] =
            std::array::from_fn(|j| [acc[4 * j] + acc[4 * j + 2], acc[4 * j + 1] + acc[4 * j + 3]]);
        let a = [v[0][0] + v[1][0], v[0][1] + v[1][1]];
        let b = [v[2][0] + v[3][0], v[2][1] + v[3][1]];
        dot = (a[0] + b[0]) + (a[1] + b[1]);
    }
    for i in n1..n {
        dot += y[i] * x[i];
    }
    dot
}

/// `np.dot` of two float64 vectors (OpenBLAS `ddot`, split in two halves above 10,000 elements).
pub fn ddot(x: &[f64], y: &[f64]) -> f64 {
    let n = x.len().min(y.len());
    if n <= 10_000 {
        return ddot_kernel(x, y);
    }
    let w0 = n.div_ceil(2);
    let r0 = ddot_kernel(&x[..w0], &y[..w0]);
    let r1 = ddot_kernel(&x[w0..n], &y[w0..n]);
    0.0 + r0 + r1
}

/// `np.result_type` of two arrays (NumPy 2 promotion: bool < ints < floats).
fn promote(a: DType, b: DType) -> DType {
    use DType::*;
    if a == b {
        return a;
    }
    let signed = |d: DType| match d {
        I8 => Some(8),
        I16 => Some(16),
        I32 => Some(32),
        I64 => Some(64),
        _ => None,
    };
    let unsigned = |d: DType| match d {
        U8 => Some(8),
        U16 => Some(16),
        U32 => Some(32),
        U64 => Some(64),
        _ => None,
    };
    let int_bits = |d: DType| signed(d).or(unsigned(d));
    match (a, b) {
        (Bool, x) | (x, Bool) => x,
        (F64, _) | (_, F64) => F64,
        (F32, F16) | (F16, F32) => F32,
        (f @ (F16 | F32), i) | (i, f @ (F16 | F32)) => match (f, int_bits(i)) {
            (F16, Some(8)) => F16,
            (F16, Some(16)) | (F32, Some(8 | 16)) => F32,
            _ => F64,
        },
        _ => match (signed(a), signed(b), unsigned(a), unsigned(b)) {
            (Some(x), Some(y), _, _) => [I8, I16, I32, I64][(x.max(y) / 16).min(3)],
            (_, _, Some(x), Some(y)) => [U8, U16, U32, U64][(x.max(y) / 16).min(3)],
            (Some(s), None, None, Some(u)) | (None, Some(s), Some(u), None) => {
                if s > u {
                    [I8, I16, I32, I64][(s / 16).min(3)]
                } else if u < 64 {
                    [I8, I16, I32, I64][(2 * u / 16).min(3)]
                } else {
                    F64
                }
            }
            _ => F64,
        },
    }
}

fn int_at(t: &Tensor, i: usize) -> i64 {
    match &t.data {
        Data::Bool(v) => v.get(i).map_or(0, |b| *b as i64),
        Data::Int(v) => v.get(i).copied().unwrap_or(0),
        Data::F32(v) => v.get(i).map_or(0, |x| *x as i64),
        Data::F64(v) => v.get(i).map_or(0, |x| *x as i64),
    }
}

/// Wraps an integer to a NumPy integer dtype's width.
fn wrap_int(v: i128, d: DType) -> i128 {
    match d {
        DType::I8 => v as i8 as i128,
        DType::I16 => v as i16 as i128,
        DType::I32 => v as i32 as i128,
        DType::I64 => v as i64 as i128,
        DType::U8 => v as u8 as i128,
        DType::U16 => v as u16 as i128,
        DType::U32 => v as u32 as i128,
        DType::U64 => v as u64 as i128,
        _ => v,
    }
}

/// MaxAbsErr of two 0-d arrays: `np.abs(n - b)` in their promoted dtype.
fn scalar_abs_err(n: &Tensor, b: &Tensor) -> Py {
    let (dn, db) = if n.dtype == DType::Bool {
        (DType::F64, DType::F64)
    } else {
        (n.dtype, b.dtype)
    };
    let rt = promote(dn, db);
    let v = match rt {
        DType::F16 => {
            let d = n.f64_at(0) as f32 - b.f64_at(0) as f32;
            f16_to_f32(f32_to_f16(d)).abs() as f64
        }
        DType::F32 => (n.f64_at(0) as f32 - b.f64_at(0) as f32).abs() as f64,
        DType::F64 => (n.f64_at(0) - b.f64_at(0)).abs(),
        DType::Bool => (n.f64_at(0) - b.f64_at(0)).abs(),
        int => {
            let d = wrap_int(int_at(n, 0) as i128 - int_at(b, 0) as i128, int);
            wrap_int(d.abs(), int) as f64
        }
    };
    if v.is_nan() {
        return Py::Lit(NAN);
    }
    Py::F(format_value(v))
}

/// `get_relative_err` reduced to what the metrics need: the max (NaN if any is NaN) and the
/// counts below the two ratio thresholds.
fn relative_err(n: &Tensor, b: &Tensor) -> (f64, usize, usize) {
    let wide = |d: DType| if d.is_float() { d } else { DType::F64 };
    let single = matches!(wide(n.dtype), DType::F16 | DType::F32)
        && matches!(wide(b.dtype), DType::F16 | DType::F32);
    let len = n.numel().min(b.numel());
    let (mut max, mut c1, mut c5) = (f64::NEG_INFINITY, 0usize, 0usize);
    let mut nan = false;
    if single {
        let eps = f32::EPSILON;
        let (t1, t5) = (0.001f32, 0.005f32);
        for i in 0..len {
            let (mut x, mut y) = (n.f64_at(i) as f32, b.f64_at(i) as f32);
            if y == 0.0 {
                x += eps;
                y += eps;
            }
            let r = ((x - y) / y).abs();
            nan |= r.is_nan();
            if (r as f64) > max {
                max = r as f64;
            }
            c1 += (r < t1) as usize;
            c5 += (r < t5) as usize;
        }
    } else {
        let eps = f64::EPSILON;
        for i in 0..len {
            let (mut x, mut y) = (n.f64_at(i), b.f64_at(i));
            if y == 0.0 {
                x += eps;
                y += eps;
            }
            let r = ((x - y) / y).abs();
            nan |= r.is_nan();
            if r > max {
                max = r;
            }
            c1 += (r < 0.001) as usize;
            c5 += (r < 0.005) as usize;
        }
    }
    (if nan { f64::NAN } else { max }, c1, c5)
}

/// Zeroes element `i` in the tensor's own representation.
fn zero_at(t: &mut Tensor, i: usize) {
    match &mut t.data {
        Data::F32(v) => {
            if let Some(x) = v.get_mut(i) {
                *x = 0.0;
            }
        }
        Data::F64(v) => {
            if let Some(x) = v.get_mut(i) {
                *x = 0.0;
            }
        }
        Data::Bool(_) | Data::Int(_) => {}
    }
}

/// The six metrics of one pair of (squeezed) tensors, as msprobe's dataframe holds them.
pub fn tensor_metrics(mut n: Tensor, mut b: Tensor) -> [Py; 6] {
    if n.numel() == 0 {
        return all(UNSUPPORTED);
    }
    if n.shape != b.shape {
        return all(SHAPE_UNMATCH);
    }
    if n.shape.is_empty() {
        let (max_rel, _, _) = relative_err(&n, &b);
        let rel = if max_rel.is_nan() {
            Py::Lit(NAN)
        } else {
            Py::F(format_value(max_rel))
        };
        let un = || Py::Lit(UNSUPPORTED);
        return [un(), un(), scalar_abs_err(&n, &b), rel, un(), un()];
    }
    // handle_inf_nan: equal inf and nan positions are zeroed, different ones give N/A.
    let len = n.numel().min(b.numel());
    let mut invalid = Vec::new();
    for i in 0..len {
        let (x, y) = (n.f64_at(i), b.f64_at(i));
        if !x.is_finite() || !y.is_finite() {
            if x.is_nan() != y.is_nan() || x.is_infinite() != y.is_infinite() {
                return all(N_A);
            }
            invalid.push(i);
        }
    }
    for i in invalid {
        zero_at(&mut n, i);
        zero_at(&mut b, i);
    }
    let x = n.to_f64();
    let y = b.to_f64();
    let cosine = if len == 1 {
        Py::Lit(UNSUPPORTED)
    } else {
        let num = ddot(&x, &y);
        let a = ddot(&x, &x).sqrt();
        let bn = ddot(&y, &y).sqrt();
        if a <= f64::EPSILON && bn <= f64::EPSILON {
            Py::F(1.0)
        } else if a <= f64::EPSILON || bn <= f64::EPSILON {
            Py::Lit(NAN)
        } else {
            let c = num / (a * bn);
            if c.is_nan() {
                Py::Lit(NAN)
            } else {
                let r = format_value(c);
                Py::F(if r > 0.9999 { round6(r) } else { r })
            }
        }
    };
    let diff: Vec<f64> = x.iter().zip(&y).map(|(p, q)| p - q).collect();
    let euc = Py::F(ddot(&diff, &diff).sqrt());
    let mut max_abs = f64::NEG_INFINITY;
    let mut nan = false;
    for d in &diff {
        let a = d.abs();
        nan |= a.is_nan();
        if a > max_abs {
            max_abs = a;
        }
    }
    let max_abs = if nan {
        Py::Lit(NAN)
    } else {
        Py::F(format_value(max_abs))
    };
    let (max_rel, c1, c5) = relative_err(&n, &b);
    let max_rel = if max_rel.is_nan() {
        Py::Lit(NAN)
    } else {
        Py::F(format_value(max_rel))
    };
    let total = len as f64;
    [
        cosine,
        euc,
        max_abs,
        max_rel,
        Py::F(format_value(c1 as f64 / total)),
        Py::F(format_value(c5 as f64 / total)),
    ]
}

/// Which of msprobe's tensor readers loads a side's files; each takes only its own suffix
/// (`FileChecker(..., PT_SUFFIX | NUMPY_SUFFIX)`), anything else is a read failure.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Reader {
    /// `pytorch.compare.utils.read_pt_data`: `.pt` files.
    Pt,
    /// `mindspore.compare.utils.read_npy_data`: `.npy` files.
    Npy,
}

/// The readers msprobe's `run_real_data` uses for a pair: the framework comes from
/// `get_compare_framework` (the `framework` keys; missing or empty counts as pytorch): pytorch
/// with pytorch reads both sides as `.pt`; otherwise (a mindspore/mindtorch NPU side) the
/// MindSpore reader takes the NPU side as `.npy` and the bench as `.pt` if the pair is
/// cross-framework (`detect_framework_by_dump_json` differs), else as `.npy`. So two MindSpore
/// dumps without `framework` keys are read as PyTorch dumps, and fail on their `.npy` files.
fn readers(dn: &RankDump, db: &RankDump) -> (Reader, Reader) {
    fn key(d: &RankDump) -> &str {
        match d.framework_key.as_deref() {
            None | Some("") => "pytorch",
            Some(k) => k,
        }
    }
    // Other pairs were refused by `run::compare_framework` before any compare.
    if key(dn) == "pytorch" && key(db) == "pytorch" {
        return (Reader::Pt, Reader::Pt);
    }
    let cross = dn.framework != db.framework;
    (Reader::Npy, if cross { Reader::Pt } else { Reader::Npy })
}

/// Reads one tensor file of a side: `Err` text when msprobe could not read it either.
fn load(
    side: Option<&TensorSide>,
    dir: Option<&str>,
    data_name: &str,
    reader: Reader,
) -> std::result::Result<Tensor, String> {
    let (Some(side), Some(dir)) = (side, dir) else {
        return Err(format!("{data_name}: the tensor files are not available"));
    };
    if data_name.contains(['/', '\\']) || data_name == ".." {
        return Err(format!(
            "{data_name}: a data_name must be a file name in dump_tensor_data"
        ));
    }
    let path = join_path(dir, data_name);
    let (suffix, which) = match reader {
        Reader::Pt => (".pt", "PyTorch"),
        Reader::Npy => (".npy", "MindSpore"),
    };
    if !data_name.ends_with(suffix) {
        return Err(format!(
            "{}: msprobe reads this side with its {which} reader, which takes only {suffix} files",
            side.files.display(&path)
        ));
    }
    let bytes = side.files.read(&path).map_err(|e| e.to_string())?;
    read_tensor(&side.files.display(&path), &bytes)
        .map(Tensor::squeeze)
        .map_err(|e| e.to_string())
}

/// The tensor folder of a rank: msprobe reads `<rank dir>/dump_tensor_data` when dump.json names
/// a `dump_data_dir`, and nothing it can find when it names none.
fn tensor_dir(d: &RankDump, side: Option<&TensorSide>) -> Option<String> {
    d.dump_data_dir.as_deref().filter(|s| !s.is_empty())?;
    side.map(|s| join_path(s.rank_dir, "dump_tensor_data"))
}

fn data_name_of(store: &Store, maps: [&ItemMap; 2], name: &str) -> String {
    maps.iter()
        .flat_map(|m| m.iter())
        .map(|(_, it)| it)
        .find(|it: &&Item| it.full_op_name == name)
        .map(|it| it.data_name(store))
        .unwrap_or_else(|| "-1".into())
}

/// `get_min_or_max_value` (minimum) over one metric column.
fn min_metric(col: usize, metrics: &[[Py; 6]], idx: &[usize], store: &Store) -> f64 {
    let mut acc = 1.0f64;
    for i in idx {
        let v = &metrics[*i][col];
        if v.is_none() {
            continue;
        }
        let val = match v {
            Py::F(f) => *f,
            Py::I(i) => *i as f64,
            other => match other.as_str(store) {
                Some(s) if s == NAN || s == N_A => continue,
                Some(s) if s.ends_with('%') => str2float(other, store),
                _ => continue,
            },
        };
        if val < acc {
            acc = val;
        }
    }
    acc
}

/// `TENSOR_CHECKERS` over the rows of one node (`metrics[i]` belongs to `rows[i]`).
fn tensor_checkers(sn: &Store, sb: &Store, rows: &mut [Row], metrics: &[[Py; 6]]) -> Level {
    let api = ApiRows::new(rows, false);
    let (in_idx, out_idx) = (&api.in_idx, &api.out_idx);
    let mins = |idx: &[usize], col: usize| min_metric(col, metrics, idx, sn);
    api.inf_nan(rows, sn, sb);
    // OneThousandthErrChecker
    if api.ignore == Ignore::No && !out_idx.is_empty() {
        let min_in = mins(in_idx, 4);
        let min_out = mins(out_idx, 4);
        if min_in > 0.9 && min_out < 0.1 {
            raise(&mut rows[out_idx[0]], Level::Error, MSG_ONE_THOUSANDTH);
        }
    }
    api.requires_grad(rows, sn, sb);
    api.parameters(rows, sn, sb);
    api.dtype(rows, sn, sb);
    api.shape(rows, sn, sb, false);
    // CosineWarnChecker
    if api.ignore == Ignore::No && !out_idx.is_empty() {
        let cin = mins(in_idx, 0);
        let cout = mins(out_idx, 0);
        if cin > 0.9 && cin - cout > 0.1 {
            raise(&mut rows[out_idx[0]], Level::Warning, MSG_COSINE);
        }
    }
    rows.iter().map(|r| r.level).max().unwrap_or(Level::Pass)
}

/// Compares the tensors of every pair queued by matching ([`Comparison::real_data`]) and writes
/// their rows and node verdicts. `npu`/`bench` give the tensor files (None: not available, so
/// every metric is `unsupported`, as msprobe reports unreadable files). Returns diagnostics
/// about the files that could not be read.
pub fn compare_tensors(
    cmp: &mut Comparison,
    gn: &mut Graph,
    dn: &RankDump,
    gb: &Graph,
    db: &RankDump,
    npu: Option<&TensorSide>,
    bench: Option<&TensorSide>,
) -> Vec<Diagnostic> {
    let pending = std::mem::take(&mut cmp.real_data);
    let dir_n = tensor_dir(dn, npu);
    let dir_b = tensor_dir(db, bench);
    let (reader_n, reader_b) = readers(dn, db);
    let (mut failed, mut first): (usize, Option<String>) = (0, None);
    for (n, b) in pending {
        if gn.nodes[n as usize].partner() != Some(b) {
            continue;
        }
        let (in_n, out_n) = gn.io(dn, n);
        let (in_b, out_b) = gb.io(db, b);
        let Ok(mut rows) = rows_for(
            &dn.store,
            &in_n,
            &out_n,
            &db.store,
            &in_b,
            &out_b,
            Mode::RealData,
        ) else {
            continue;
        };
        if rows.is_empty() {
            continue;
        }
        let mut metrics = Vec::with_capacity(rows.len());
        for r in &rows {
            let dn_name = data_name_of(&dn.store, [&in_n, &out_n], &r.n_name);
            let db_name = if r.extra {
                "-1".to_string()
            } else {
                data_name_of(&db.store, [&in_b, &out_b], &r.b_name)
            };
            // locate_dump_file
            if dn_name == "-1" || db_name == "-1" || ((dn_name == "N/A") != (db_name == "N/A")) {
                metrics.push(all(UNSUPPORTED));
                continue;
            }
            let read = load(npu, dir_n.as_deref(), &dn_name, reader_n)
                .and_then(|t| Ok((t, load(bench, dir_b.as_deref(), &db_name, reader_b)?)));
            match read {
                Ok((tn, tb)) => metrics.push(tensor_metrics(tn, tb)),
                Err(why) => {
                    failed += 1;
                    first.get_or_insert(why);
                    metrics.push(all(UNSUPPORTED));
                }
            }
        }
        let level = tensor_checkers(&dn.store, &db.store, &mut rows, &metrics);
        let mut res: Vec<(String, ItemResult)> = Vec::with_capacity(rows.len());
        for (r, m) in rows.into_iter().zip(metrics) {
            let cols =
                ItemResult::with_verdict(&REAL_COLUMNS, m, r.rg_consistent, r.level, &r.msgs);
            set_result(&mut res, r.n_name, cols);
        }
        cmp.results.insert(n, res);
        let name = gn.name(n);
        let mut p = match level {
            Level::Pass => 0.0,
            Level::Warning => 0.5,
            Level::Error => 1.0,
        };
        if name
            .split('.')
            .nth(1)
            .is_some_and(|s| IGNORE_PRECISION.contains(&s))
        {
            p = 0.0;
        }
        gn.nodes[n as usize].set_precision(Some(Precision(p)));
    }
    let mut out = Vec::new();
    if let Some(why) = first {
        out.push(Diagnostic::warning(
            "",
            format!(
                "{failed} tensor pair(s) could not be read, their metrics are 'unsupported' (as msprobe reports them); first: {why}"
            ),
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(dtype: DType, shape: &[usize], v: &[f64]) -> Tensor {
        let data = match dtype {
            DType::F16 | DType::F32 => Data::F32(v.iter().map(|x| *x as f32).collect()),
            DType::F64 => Data::F64(v.to_vec()),
            DType::Bool => Data::Bool(v.iter().map(|x| *x != 0.0).collect()),
            _ => Data::Int(v.iter().map(|x| *x as i64).collect()),
        };
        Tensor {
            dtype,
            shape: shape.to_vec(),
            data,
        }
    }

    fn s(p: &Py) -> String {
        p.to_py_str(&Store::default())
    }

    #[test]
    fn outcomes() {
        let m = tensor_metrics(t(DType::F32, &[0], &[]), t(DType::F32, &[0], &[]));
        assert_eq!(s(&m[0]), "unsupported");
        let m = tensor_metrics(
            t(DType::F32, &[2], &[1., 2.]),
            t(DType::F32, &[3], &[1., 2., 3.]),
        );
        assert_eq!(s(&m[5]), "shape unmatched");
        let m = tensor_metrics(
            t(DType::F32, &[2], &[f64::NAN, 2.]),
            t(DType::F32, &[2], &[1., 2.]),
        );
        assert_eq!(s(&m[2]), "N/A");
        // Same positions: zeroed, then compared.
        let m = tensor_metrics(
            t(DType::F32, &[2], &[f64::NEG_INFINITY, 2.]),
            t(DType::F32, &[2], &[f64::NEG_INFINITY, 2.]),
        );
        assert_eq!(
            m.iter().map(s).collect::<Vec<_>>(),
            ["1.0", "0.0", "0.0", "0.0", "1.0", "1.0"]
        );
        // 0-d: only MaxAbsErr and MaxRelativeErr.
        let m = tensor_metrics(t(DType::F32, &[], &[3.5]), t(DType::F32, &[], &[3.0]));
        assert_eq!(
            m.iter().map(s).collect::<Vec<_>>(),
            [
                "unsupported",
                "unsupported",
                "0.5",
                "0.166666671634",
                "unsupported",
                "unsupported"
            ]
        );
        // All-zero bench: eps added, Cosine 'Nan' when only one side is zero.
        let m = tensor_metrics(
            t(DType::F32, &[2], &[1., 0.]),
            t(DType::F32, &[2], &[0., 0.]),
        );
        assert_eq!(s(&m[0]), "Nan");
    }

    #[test]
    fn promotion_and_formatting() {
        assert_eq!(promote(DType::I8, DType::F16), DType::F16);
        assert_eq!(promote(DType::U64, DType::I64), DType::F64);
        assert_eq!(promote(DType::U8, DType::I8), DType::I16);
        assert_eq!(format_value(1.0 / 8192.0), 0.000122070312);
        assert_eq!(round6(0.99999949), 0.999999);
    }
}
