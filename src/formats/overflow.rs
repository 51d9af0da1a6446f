//! msprobe's overflow check (`-oc`): NaN/Inf scenes per dump entry and the ignore rules that
//! drop known false positives (uninitialised buffers of `torch.empty*`, receive buffers of
//! collectives, `masked_fill_`).

use crate::formats::dump::OverflowLevel;
use crate::formats::json::{KeyId, Store, Val};
use crate::formats::keys::k;

/// `has_nan_inf`: a dict whose top-level Max/Min/Mean prints as inf/-inf/nan.
fn has_nan_inf(store: &Store, v: Val) -> bool {
    if !matches!(v, Val::Obj { .. }) {
        return false;
    }
    for (k, x) in store.obj(v) {
        let k = store.key(k);
        if k == "Max" || k == "Min" || k == "Mean" {
            // `str(v).lower() in ('inf', '-inf', 'nan')`: only floats and strings can print so.
            let hit = match x {
                Val::Float(f) => !f.is_finite(),
                Val::Str(r) => {
                    let s = store.str(r);
                    s.len() <= 4
                        && matches!(s.to_ascii_lowercase().as_str(), "inf" | "-inf" | "nan")
                }
                _ => false,
            };
            if hit {
                return true;
            }
        }
    }
    false
}

/// `_has_anomaly`: dicts are checked at their top level, lists recursively.
fn has_anomaly(store: &Store, v: Val, depth: usize) -> bool {
    match v {
        Val::Obj { .. } => has_nan_inf(store, v),
        Val::List { .. } if depth < 400 => store
            .list(v)
            .iter()
            .any(|x| has_anomaly(store, x, depth + 1)),
        _ => false,
    }
}

/// Python iteration over what msprobe treats as a list; a dict iterates its keys, which are
/// strings and never hold statistics, so they stand as nulls here.
fn elems(store: &Store, v: Val) -> Vec<Val> {
    match v {
        Val::List { .. } => store.list(v).to_vec(),
        Val::Obj { .. } => vec![Val::Null; store.obj(v).len()],
        _ => Vec::new(),
    }
}

fn tensor_norms(store: &Store, items: &[Val]) -> Vec<f64> {
    let mut out = Vec::new();
    for d in items {
        if !matches!(d, Val::Obj { .. }) {
            continue;
        }
        if store.obj(*d).get(k::TYPE).and_then(|t| store.as_str(t)) != Some("torch.Tensor") {
            continue;
        }
        match store.obj(*d).get(k::NORM) {
            Some(Val::Float(x)) if !x.is_nan() => out.push(x),
            Some(Val::Int(i)) => out.push(i as f64),
            _ => {}
        }
    }
    out
}

struct Rule {
    api: &'static str,
    input_index: &'static [usize],
    input_name: &'static [&'static str],
    output_index: &'static [usize],
}

const RULES: &[Rule] = &[
    Rule {
        api: "torch.empty",
        input_index: &[],
        input_name: &[],
        output_index: &[0],
    },
    Rule {
        api: "torch.empty_like",
        input_index: &[],
        input_name: &[],
        output_index: &[0],
    },
    Rule {
        api: "torch.empty_strided",
        input_index: &[],
        input_name: &[],
        output_index: &[0],
    },
    Rule {
        api: "distributed.recv",
        input_index: &[0],
        input_name: &["tensor"],
        output_index: &[],
    },
    Rule {
        api: "distributed.all_gather",
        input_index: &[0],
        input_name: &[],
        output_index: &[],
    },
    Rule {
        api: "distributed.reduce_scatter",
        input_index: &[0],
        input_name: &["output"],
        output_index: &[],
    },
    Rule {
        api: "distributed._reduce_scatter_base",
        input_index: &[0],
        input_name: &[],
        output_index: &[],
    },
    Rule {
        api: "distributed.all_gather_into_tensor",
        input_index: &[0],
        input_name: &[],
        output_index: &[],
    },
    Rule {
        api: "distributed.reduce_scatter_tensor",
        input_index: &[0],
        input_name: &[],
        output_index: &[],
    },
    Rule {
        api: "tensor.masked_fill_",
        input_index: &[0],
        input_name: &[],
        output_index: &[],
    },
];

/// The overflow level of one entry, after the ignore rules; None when it has no scene.
pub fn entry_scene(store: &Store, name: &str, entry: Val) -> Option<OverflowLevel> {
    if !matches!(entry, Val::Obj { .. }) {
        return None;
    }
    // The dump's store interns the known keys first (`keys::intern_known_keys`).
    let e = store.obj(entry);
    let input_args = e
        .get(k::INPUT_ARGS)
        .or_else(|| e.get(k::INPUT))
        .unwrap_or(Val::List { start: 0, len: 0 });
    let input_kwargs = e.get(k::INPUT_KWARGS);
    let output = e.get(k::OUTPUT).unwrap_or(Val::List { start: 0, len: 0 });
    let args = elems(store, input_args);
    let kwargs: Vec<(KeyId, Val)> = match input_kwargs {
        Some(v @ Val::Obj { .. }) => store.obj(v).to_vec(),
        _ => Vec::new(),
    };
    let outs = elems(store, output);
    let in_anom = args.iter().any(|x| has_anomaly(store, *x, 0))
        || kwargs.iter().any(|(_, x)| has_anomaly(store, *x, 0));
    let out_anom = outs.iter().any(|x| has_anomaly(store, *x, 0));
    let level = if !in_anom && out_anom {
        OverflowLevel::Critical
    } else if in_anom && out_anom {
        OverflowLevel::High
    } else if in_anom {
        OverflowLevel::Medium
    } else {
        let mut in_norms = tensor_norms(store, &args);
        let kw_vals: Vec<Val> = kwargs.iter().map(|(_, v)| *v).collect();
        in_norms.extend(tensor_norms(store, &kw_vals));
        let out_norms = tensor_norms(store, &outs);
        if in_norms.is_empty() || out_norms.is_empty() {
            return None;
        }
        let max_in = in_norms.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
        let max_out = out_norms.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
        let hit = if max_in == 0.0 {
            max_out > 100.0
        } else {
            max_out / max_in > 100.0
        };
        if !hit {
            return None;
        }
        OverflowLevel::High
    };
    // Ignore rules, keyed by the first two name segments in lower case.
    let mut parts = name.split('.');
    let key = match (parts.next(), parts.next()) {
        (Some(a), Some(b)) => format!("{a}.{b}").to_lowercase(),
        (Some(a), None) => a.to_lowercase(),
        _ => String::new(),
    };
    if let Some(rule) = RULES.iter().find(|r| r.api == key) {
        let mut matched = true;
        if !rule.input_index.is_empty() {
            for (i, a) in args.iter().enumerate() {
                if has_nan_inf(store, *a) && !rule.input_index.contains(&i) {
                    matched = false;
                }
            }
        }
        if !rule.input_name.is_empty() {
            for (n, v) in &kwargs {
                if has_nan_inf(store, *v) && !rule.input_name.contains(&store.key(*n)) {
                    matched = false;
                }
            }
        }
        if !rule.output_index.is_empty() {
            for (i, o) in outs.iter().enumerate() {
                if has_nan_inf(store, *o) && !rule.output_index.contains(&i) {
                    matched = false;
                }
            }
        }
        if matched {
            return None;
        }
    }
    Some(level)
}
