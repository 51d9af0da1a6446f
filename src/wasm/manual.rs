//! Manual matches on the kept result (the page's Match / Unmatch): applying them and the list
//! of what changed, for the page to redraw.

use super::files::MemFiles;
use super::{js_err, Last};
use crate::run;
use crate::view::Order;
use wasm_bindgen::prelude::*;

/// Applies manual matches and returns one change list.
pub(super) fn apply_matches(
    last: &mut Last,
    pairs: &[(u32, u32, bool)],
    npu: &MemFiles,
    bench: &MemFiles,
) -> std::result::Result<String, JsValue> {
    let bo = last
        .bench_order
        .as_ref()
        .ok_or_else(|| js_err("matching needs two sides"))?;
    let mut ids = Vec::with_capacity(pairs.len());
    for &(ni, bi, rec) in pairs {
        let n = *last
            .npu_order
            .ids
            .get(ni as usize)
            .ok_or_else(|| js_err(format!("no NPU node {ni}")))?;
        let b = *bo
            .ids
            .get(bi as usize)
            .ok_or_else(|| js_err(format!("no Bench node {bi}")))?;
        ids.push((n, b, rec));
    }
    let before = snapshot(last);
    let outcome = match_all(last, &ids);
    // Real-data mode: the pairs matched so far get their tensor metrics.
    if let Some(dir) = last.bench_dir.as_deref() {
        let tensors = run::TensorFiles {
            npu,
            npu_dir: &last.npu_dir,
            bench,
            bench_dir: dir,
        };
        run::compare_pair_tensors(&mut last.res, Some(&tensors));
    }
    outcome?;
    Ok(changes(last, &before))
}

fn match_all(last: &mut Last, ids: &[(u32, u32, bool)]) -> std::result::Result<(), JsValue> {
    let res = &mut last.res;
    let (Some(bs), Some(cmp)) = (res.bench.as_mut(), res.comparison.as_mut()) else {
        return Err(js_err("matching needs two sides"));
    };
    for &(n, b, rec) in ids {
        let (on, ob) = (res.npu.graph.node(n).op, bs.graph.node(b).op);
        if on != ob {
            let kind = |op: crate::graph::NodeOp| match op {
                crate::graph::NodeOp::Module => "module",
                crate::graph::NodeOp::FunctionApi => "API",
                crate::graph::NodeOp::ApiCollection => "API collection",
            };
            return Err(js_err(format!(
                "cannot match {} ({}) with {} ({}): the node types differ",
                res.npu.graph.name(n),
                kind(on),
                bs.graph.name(b),
                kind(ob)
            )));
        }
        crate::compare::manual_match(
            &mut res.npu.graph,
            &res.npu.dump,
            &mut bs.graph,
            &bs.dump,
            res.mode,
            cmp,
            n,
            b,
            rec,
        );
    }
    Ok(())
}

pub(super) type Snap = (Vec<(Option<f64>, i64)>, Vec<(Option<f64>, i64)>);

fn side_state(
    g: &crate::graph::Graph,
    order: &Order,
    other: Option<&Order>,
) -> Vec<(Option<f64>, i64)> {
    order
        .ids
        .iter()
        .map(|id| {
            let n = g.node(*id);
            let m = match (other, n.partner()) {
                (Some(o), Some(p)) => o.index_of.get(p as usize).copied().unwrap_or(-1),
                _ => -1,
            };
            (n.precision().map(|p| p.0), m)
        })
        .collect()
}

pub(super) fn snapshot(last: &Last) -> Snap {
    let npu = side_state(
        &last.res.npu.graph,
        &last.npu_order,
        last.bench_order.as_ref(),
    );
    let bench = match (&last.res.bench, &last.bench_order) {
        (Some(b), Some(o)) => side_state(&b.graph, o, Some(&last.npu_order)),
        _ => Vec::new(),
    };
    (npu, bench)
}

pub(super) fn changes(last: &Last, before: &Snap) -> String {
    let after = snapshot(last);
    let diff = |a: &[(Option<f64>, i64)], b: &[(Option<f64>, i64)]| -> Vec<serde_json::Value> {
        a.iter()
            .zip(b.iter())
            .enumerate()
            .filter(|(_, (x, y))| x != y)
            .map(|(i, (_, y))| serde_json::json!([i, y.0, y.1]))
            .collect()
    };
    serde_json::json!({"npu": diff(&before.0, &after.0), "bench": diff(&before.1, &after.1)})
        .to_string()
}
