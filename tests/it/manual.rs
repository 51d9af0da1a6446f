//! Manual matching (the page's Match / Unmatch): a manual match of two grey nodes computes the
//! same numbers msprobe computes for that pair, and unmatch + re-match restores the automatic
//! result exactly.

use probelens::compare::pair::PairResult;
use probelens::compare::{manual_match, unmatch};
use probelens::mapping::LayerMapping;
use probelens::run::{self, PairInput, RunOptions};
use probelens::visdb::export::{export_graph, GraphExport, NodeRow, StackRow};
use std::path::Path;

use crate::common;

use common::DiskFiles as Dir;

fn case(lm: bool) -> PairResult {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/qwen_mix_statistics");
    let n = Dir(root.join("npu"));
    let b = Dir(root.join("bench"));
    let plan = run::plan(&n, Some(&b)).unwrap();
    let p = &plan.pairs[0];
    let opts = RunOptions {
        layer_mapping: lm.then(|| {
            LayerMapping::parse(
                "m.yaml",
                &std::fs::read_to_string(root.join("layer_mapping.yaml")).unwrap(),
            )
            .unwrap()
        }),
        ..Default::default()
    };
    run::run_pair(
        PairInput::new(
            run::load_rank(&n, &p.npu_dir).unwrap(),
            Some(run::load_rank(&b, p.bench_dir.as_ref().unwrap()).unwrap()),
        ),
        &opts,
    )
    .unwrap()
}

fn rows(res: &PairResult) -> Vec<NodeRow> {
    let mut sink: (Vec<NodeRow>, Vec<StackRow>) = (Vec::new(), Vec::new());
    export_graph(&GraphExport::npu(res, 0, 0), &mut sink);
    sink.0
}

fn apply(res: &mut PairResult, npu: &str, bench: &str, recursive: bool) -> Vec<u32> {
    let n = res.npu.graph.get(npu).unwrap();
    let bs = res.bench.as_mut().unwrap();
    let b = bs.graph.get(bench).unwrap();
    manual_match(
        &mut res.npu.graph,
        &res.npu.dump,
        &mut bs.graph,
        &bs.dump,
        res.mode,
        res.comparison.as_mut().unwrap(),
        n,
        b,
        recursive,
    )
}

#[test]
fn manual_match_of_a_mapped_pair_equals_the_mapping_result() {
    // With the layer mapping, msprobe matches these two; without it they are grey.
    let npu = "Module.0.module.module.decoder.layers.0.self_attention.linear_proj.RowParallelLinear.forward.0";
    let bench = "Module.module.model.layers.0.self_attn.o_proj.Linear.forward.0";
    let mapped = case(true);
    let mut manual = case(false);
    let n = manual.npu.graph.get(npu).unwrap();
    assert!(
        manual.npu.graph.node(n).partner().is_none(),
        "grey before the manual match"
    );
    assert!(manual.npu.graph.node(n).precision().is_none());
    apply(&mut manual, npu, bench, false);
    let want = rows(&mapped)
        .into_iter()
        .find(|r| r.node_name == npu)
        .unwrap();
    let got = rows(&manual)
        .into_iter()
        .find(|r| r.node_name == npu)
        .unwrap();
    assert_eq!(got.precision_index, want.precision_index);
    assert_eq!(got.input_data, want.input_data);
    assert_eq!(got.output_data, want.output_data);
    assert_eq!(got.modified, 1);
}

#[test]
fn unmatch_then_rematch_restores_the_result() {
    let mut res = case(true);
    let before = rows(&res);
    let npu = "Module.0.module.module.decoder.layers.0.mlp.MLP.forward.0";
    let n = res.npu.graph.get(npu).unwrap();
    let partner = res.npu.graph.node(n).partner().unwrap();
    let bench_name = res.bench.as_ref().unwrap().graph.name(partner).to_string();
    {
        let bs = res.bench.as_mut().unwrap();
        unmatch(
            &mut res.npu.graph,
            &mut bs.graph,
            res.comparison.as_mut().unwrap(),
            n,
            true,
        );
    }
    let grey = rows(&res).into_iter().find(|r| r.node_name == npu).unwrap();
    assert_eq!(grey.matched_node_link, "[]");
    assert_eq!(grey.precision_index, None);
    apply(&mut res, npu, &bench_name, false);
    let after = rows(&res);
    for (a, b) in before.iter().zip(after.iter()) {
        assert_eq!(a.node_name, b.node_name);
        assert_eq!(a.precision_index, b.precision_index, "{}", a.node_name);
        assert_eq!(a.input_data, b.input_data, "{}", a.node_name);
        assert_eq!(a.output_data, b.output_data, "{}", a.node_name);
        assert_eq!(a.matched_node_link, b.matched_node_link, "{}", a.node_name);
    }
}

#[test]
fn recursive_manual_match_reaches_children() {
    let mut res = case(false);
    let npu = "Module.0.module.module.decoder.layers.0.self_attention.SelfAttention.forward.0";
    let bench = "Module.module.model.layers.0.self_attn.Qwen2Attention.forward.0";
    let linked = apply(&mut res, npu, bench, true);
    assert!(linked.len() > 1, "children linked too: {linked:?}");
    let linked_names: Vec<&str> = linked.iter().map(|id| res.npu.graph.name(*id)).collect();
    assert!(linked_names.contains(&npu));
}
