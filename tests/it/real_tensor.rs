//! Real-tensor compare through the library (the CLI path is in tests/it/fidelity.rs): without the
//! tensor files every metric is `unsupported` and a warning says why; `run_pair` alone leaves
//! the pairs queued; a manual unmatch + re-match computes the same rows again.

use probelens::compare::pair::PairResult;
use probelens::compare::{manual_match, unmatch};
use probelens::run::{self, PairInput, RunOptions, TensorFiles};
use probelens::visdb::export::{export_graph, GraphExport, NodeRow, StackRow};
use std::path::Path;

use crate::common;

use common::DiskFiles as Dir;

fn dirs() -> (Dir, Dir) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/real_tensor");
    (Dir(root.join("npu")), Dir(root.join("bench")))
}

/// Step 0 of the fixture, with or without its tensor files.
fn case(with_files: bool) -> PairResult {
    let (n, b) = dirs();
    let plan = run::plan(&n, Some(&b)).unwrap();
    let p = &plan.pairs[0];
    let bench_dir = p.bench_dir.clone().unwrap();
    let tensors = TensorFiles {
        npu: &n,
        npu_dir: &p.npu_dir,
        bench: &b,
        bench_dir: &bench_dir,
    };
    let mut res = run::run_pair(
        PairInput::new(
            run::load_rank(&n, &p.npu_dir).unwrap(),
            Some(run::load_rank(&b, &bench_dir).unwrap()),
        ),
        &RunOptions::default(),
    )
    .unwrap();
    run::compare_pair_tensors(&mut res, with_files.then_some(&tensors));
    res
}

fn rows(res: &PairResult) -> Vec<NodeRow> {
    let mut sink: (Vec<NodeRow>, Vec<StackRow>) = (Vec::new(), Vec::new());
    export_graph(&GraphExport::npu(res, 0, 0), &mut sink);
    sink.0
}

const NODE: &str = "Functional.cross_entropy.0.forward";

#[test]
fn without_tensor_files_metrics_are_unsupported_with_a_warning() {
    let res = case(false);
    let row = rows(&res)
        .into_iter()
        .find(|r| r.node_name == NODE)
        .unwrap();
    assert!(row.output_data.contains("\"Cosine\": \"unsupported\""));
    assert!(!row.input_data.contains("\"Cosine\": \"0."));
    assert!(res
        .diagnostics
        .iter()
        .any(|d| d.to_string().contains("could not be read")));
    // With the files, the numbers (and no warning).
    let res = case(true);
    let row = rows(&res)
        .into_iter()
        .find(|r| r.node_name == NODE)
        .unwrap();
    assert!(
        row.input_data.contains("\"Cosine\": \"0.99"),
        "{}",
        row.input_data
    );
    assert!(res.diagnostics.is_empty(), "{:?}", res.diagnostics);
}

#[test]
fn run_pair_alone_leaves_real_data_pairs_queued() {
    let (n, b) = dirs();
    let plan = run::plan(&n, Some(&b)).unwrap();
    let p = &plan.pairs[0];
    let res = run::run_pair(
        PairInput::new(
            run::load_rank(&n, &p.npu_dir).unwrap(),
            Some(run::load_rank(&b, p.bench_dir.as_ref().unwrap()).unwrap()),
        ),
        &RunOptions::default(),
    )
    .unwrap();
    let cmp = res.comparison.as_ref().unwrap();
    assert!(!cmp.real_data.is_empty());
    assert!(cmp.results.is_empty());
}

#[test]
fn unmatch_then_rematch_recomputes_the_tensor_rows() {
    let mut res = case(true);
    let before = rows(&res);
    let n = res.npu.graph.get(NODE).unwrap();
    let partner = res.npu.graph.node(n).partner().unwrap();
    {
        let bs = res.bench.as_mut().unwrap();
        unmatch(
            &mut res.npu.graph,
            &mut bs.graph,
            res.comparison.as_mut().unwrap(),
            n,
            true,
        );
        manual_match(
            &mut res.npu.graph,
            &res.npu.dump,
            &mut bs.graph,
            &bs.dump,
            res.mode,
            res.comparison.as_mut().unwrap(),
            n,
            partner,
            false,
        );
    }
    let (nd, bd) = dirs();
    let plan = run::plan(&nd, Some(&bd)).unwrap();
    let p = &plan.pairs[0];
    let t = TensorFiles {
        npu: &nd,
        npu_dir: &p.npu_dir,
        bench: &bd,
        bench_dir: p.bench_dir.as_deref().unwrap(),
    };
    run::compare_pair_tensors(&mut res, Some(&t));
    let after = rows(&res);
    let pick = |v: &[NodeRow]| v.iter().find(|r| r.node_name == NODE).cloned().unwrap();
    let (x, y) = (pick(&before), pick(&after));
    assert_eq!(x.input_data, y.input_data);
    assert_eq!(x.output_data, y.output_data);
    assert_eq!(x.precision_index, y.precision_index);
    assert_eq!(y.modified, 1);
}
