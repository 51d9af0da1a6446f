//! The parallel parameters (`--rank_size/--tp/--pp/--vpp/--order`): their validation with
//! msprobe's messages, the merge strategy they select, and the default rank groups.

use crate::base::error::{Error, Result};

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
    let product = p.tp.checked_mul(p.pp).unwrap_or(0);
    if p.rank_size > 1 << 20 {
        return bad(format!("rank_size {} is beyond any dump", p.rank_size));
    }
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
    // `[x for x, m in zip(values, mask) if m]` (`keep`), or `if not m`.
    let pick = |values: &[i64], keep: bool| -> Vec<i64> {
        values
            .iter()
            .zip(mask)
            .filter(|(_, m)| **m == keep)
            .map(|(x, _)| *x)
            .collect()
    };
    let masked = pick(dims, true);
    let unmasked = pick(dims, false);
    let strides = prefix(dims);
    let ms = pick(&strides, true);
    let us = pick(&strides, false);
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

/// `--rank_size/--tp/--pp/--vpp/--order` as given, one value per side (NPU [Bench]); empty
/// lists: not given.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ParallelArgs {
    pub rank_size: Vec<i64>,
    pub tp: Vec<i64>,
    pub pp: Vec<i64>,
    pub vpp: Vec<i64>,
    pub order: Vec<String>,
}

/// msprobe's `load_parallel_param`: the parallel parameters of each side, or None without
/// `rank_size`. `compare`: a Bench side is given (two values per parameter). The error is
/// msprobe's message.
pub fn load_params(
    a: &ParallelArgs,
    compare: bool,
) -> std::result::Result<Option<Vec<ParallelParams>>, String> {
    if a.rank_size.is_empty() {
        return Ok(None);
    }
    if a.tp.is_empty() || a.pp.is_empty() {
        return Err("In the graph merge task, parameters \"tp/pp/rank_size\" is required!".into());
    }
    let n = if compare { 2 } else { 1 };
    let task = if compare { "compare" } else { "build" };
    if a.rank_size.len() != n {
        return Err(format!("In the graph merge {task} task, the number of parameters \"rank_size\" to be filled in is either {n}!"));
    }
    if a.tp.len() != n || a.pp.len() != n {
        return Err(format!("In the graph merge {task} task, the number of parameters \"tp/pp/rank_size\" to be filled in is either {n}!"));
    }
    Ok(Some(
        (0..n)
            .map(|i| ParallelParams {
                rank_size: a.rank_size[i],
                tp: a.tp[i],
                pp: a.pp[i],
                vpp: if a.vpp.len() == n { a.vpp[i] } else { 1 },
                order: if a.order.len() == n {
                    a.order[i].clone()
                } else {
                    DEFAULT_ORDER.to_string()
                },
            })
            .collect(),
    ))
}
