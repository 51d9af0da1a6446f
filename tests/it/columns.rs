//! `view::graph_columns` read back by its documented layout: the binary columns of both sides of a
//! real compare (and of a build) hold, node for node, the graph's values in the pre-orders the
//! page's indices refer to.

use crate::columns_layout;
use crate::common;

use columns_layout::decode;
use common::DiskFiles;
use probelens::compare::pair::PairResult;
use probelens::graph::{Graph, NodeId};
use probelens::mapping::LayerMapping;
use probelens::run::{self, PairInput, RunOptions};
use probelens::view::{columns_len, graph_columns, orders, write_columns, Order, COLUMNS_OVERFLOW};
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// Checks every column of every node of a decoded buffer against the graph; returns what it
/// saw: (precision none, precision some, unmatched, matched, overflow levels, non-ASCII names).
fn check(g: &Graph, order: &Order, other: Option<&Order>) -> [usize; 6] {
    let d = decode(&graph_columns(g, order, other));
    let n = order.ids.len();
    assert_eq!(d.levels, ["medium", "high", "critical"]);
    for v in [&d.parent, &d.matched, &d.micro_step, &d.subtree_end] {
        assert_eq!(v.len(), n);
    }
    assert_eq!(
        (d.precision.len(), d.node_type.len(), d.names.len()),
        (n, n, n)
    );
    let pos = |o: &Order| -> HashMap<NodeId, i32> {
        o.ids
            .iter()
            .enumerate()
            .map(|(i, &id)| (id, i as i32))
            .collect()
    };
    let (mine, theirs) = (pos(order), other.map(pos));
    // Depth by the decoded parents, for the subtree ends: the subtree of i runs up to the
    // next node that is not deeper.
    let mut depth = vec![0usize; n];
    let mut seen = [0usize; 6];
    for (i, &id) in order.ids.iter().enumerate() {
        let x = g.node(id);
        let name = g.name(id);
        assert_eq!(d.names[i], name, "name of {i}");
        let parent = x.parent().map_or(-1, |p| mine[&p]);
        assert_eq!(d.parent[i], parent, "parent of {name}");
        assert!(parent < i as i32, "pre-order");
        if parent >= 0 {
            depth[i] = depth[parent as usize] + 1;
        }
        let matched = match (&theirs, x.partner()) {
            (Some(t), Some(p)) => t.get(&p).copied().unwrap_or(-1),
            _ => -1,
        };
        assert_eq!(d.matched[i], matched, "matched of {name}");
        match x.precision() {
            Some(p) => assert_eq!(d.precision[i].to_bits(), p.0.to_bits(), "{name}"),
            None => assert!(d.precision[i].is_nan(), "precision of {name}"),
        }
        assert_eq!(d.micro_step[i], x.micro_step().unwrap_or(0) as i32);
        assert_eq!(d.node_type[i], x.op.value());
        let level = match d.overflow[i] {
            0 => None,
            k => Some(d.levels[k as usize - 1].as_str()),
        };
        assert_eq!(level, x.overflow.map(|o| o.as_str()), "overflow of {name}");
        seen[0] += usize::from(x.precision().is_none());
        seen[1] += usize::from(x.precision().is_some());
        seen[2] += usize::from(matched < 0);
        seen[3] += usize::from(matched >= 0);
        seen[4] += usize::from(level.is_some());
        seen[5] += usize::from(!name.is_ascii());
        if x.micro_step() == Some((1 << 32) + 7) {
            assert_eq!(d.micro_step[i], 7);
        }
    }
    for i in 0..n {
        let end = (i + 1..n).find(|&j| depth[j] <= depth[i]).unwrap_or(n);
        assert_eq!(d.subtree_end[i], end as i32, "subtree end of {i}");
    }
    seen
}

fn case() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/qwen_mix_statistics")
}

/// Step 0 of qwen_mix_statistics (Megatron NPU vs HF Bench, with its layer mapping), the
/// NPU side alone unless `compare`.
fn pair(compare: bool) -> PairResult {
    let (npu, bench) = (
        DiskFiles(case().join("npu")),
        DiskFiles(case().join("bench")),
    );
    let plan = run::plan(&npu, Some(&bench)).unwrap();
    let p = plan.pairs.iter().find(|p| p.step == 0).unwrap();
    let text = std::fs::read_to_string(case().join("layer_mapping.yaml")).unwrap();
    let opts = RunOptions {
        layer_mapping: Some(LayerMapping::parse("layer_mapping.yaml", &text).unwrap()),
        overflow_check: true,
        ..Default::default()
    };
    let nd = run::load_rank(&npu, &p.npu_dir).unwrap();
    let bd = compare.then(|| run::load_rank(&bench, p.bench_dir.as_ref().unwrap()).unwrap());
    run::run_pair(PairInput::new(nd, bd), &opts).unwrap()
}

/// The binary columns of both sides of a real compare hold, node for node, the graph's
/// values in the pre-orders the page's indices refer to.
#[test]
fn graph_columns_of_a_compare() {
    let mut res = pair(true);
    // The fixture has no overflow levels, micro steps or non-ASCII names: give a few nodes of
    // each side some (every level; a micro step, one beyond i32 whose low 32 bits are 7, as
    // JS's `Int32Array.from` took it; a multi-byte name, a name that starts with a
    // byte-order mark).
    for g in [&mut res.npu.graph, &mut res.bench.as_mut().unwrap().graph] {
        for (k, level) in COLUMNS_OVERFLOW.into_iter().enumerate() {
            g.nodes[3 + k].overflow = Some(level);
        }
        g.set_name(7, &format!("模块.{}.层·ü", g.name(7)));
        g.set_name(8, &format!("\u{feff}{}", g.name(8)));
        g.nodes[9].set_micro_step(Some(2));
        g.nodes[10].set_micro_step(Some((1 << 32) + 7));
    }
    let (on, ob) = orders(&res);
    let ob = ob.unwrap();
    let bench = &res.bench.as_ref().unwrap().graph;
    let npu_seen = check(&res.npu.graph, &on, Some(&ob));
    let bench_seen = check(bench, &ob, Some(&on));
    // Every case is present: precision none and some (NPU), unmatched and matched nodes,
    // overflow levels, non-ASCII names.
    assert!(npu_seen.iter().all(|&c| c > 0), "{npu_seen:?}");
    assert!(
        bench_seen[2] > 0 && bench_seen[3] > 0 && bench_seen[4] >= 3 && bench_seen[5] == 2,
        "{bench_seen:?}"
    );
    assert_eq!(npu_seen[5], 2);
    assert_eq!(on.ids.len(), npu_seen[0] + npu_seen[1]);
}

/// A build (one side): no counterparts, no precision.
#[test]
fn graph_columns_of_a_build() {
    let res = pair(false);
    assert!(res.bench.is_none());
    let on = Order::of(&res.npu.graph);
    let seen = check(&res.npu.graph, &on, None);
    assert_eq!((seen[1], seen[3]), (0, 0));
    assert_eq!(seen[0], on.ids.len());
}

/// The page's columns are written into a JS array in pieces (`write_columns`): the pieces cover
/// the buffer's `columns_len` bytes once each, in order, none much over 64 KiB, and hold the bytes
/// `graph_columns` gives.
#[test]
fn columns_are_written_in_order_in_pieces() {
    let mut res = pair(true);
    // Long names (~2 kB each), for the fixture's graphs to take many pieces.
    for g in [&mut res.npu.graph, &mut res.bench.as_mut().unwrap().graph] {
        for id in 0..g.nodes.len() as u32 {
            let long = format!("{}.{}", g.name(id), "x".repeat(2000));
            g.set_name(id, &long);
        }
    }
    let (on, ob) = orders(&res);
    let ob = ob.unwrap();
    let bench = &res.bench.as_ref().unwrap().graph;
    for (g, order, other) in [(&res.npu.graph, &on, Some(&ob)), (bench, &ob, Some(&on))] {
        let len = columns_len(g, order);
        let mut got = Vec::new();
        let mut pieces = 0;
        write_columns(g, order, other, &mut |at, bytes| {
            assert_eq!(
                at,
                got.len(),
                "piece {pieces} starts where the one before ended"
            );
            assert!(
                !bytes.is_empty() && bytes.len() <= (1 << 16) + 4096,
                "piece {pieces}: {} bytes",
                bytes.len()
            );
            got.extend_from_slice(bytes);
            pieces += 1;
        });
        assert_eq!(got.len(), len);
        assert!(pieces > 10, "{len} bytes in {pieces} piece(s)");
        assert_eq!(got, graph_columns(g, order, other));
    }
}
