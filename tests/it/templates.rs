//! The shipped mapping templates: the reverse Qwen2.5 template (LLaMA-Factory as NPU) maps the
//! same node pairs as the forward one, mirrored; every template parses.

use probelens::mapping::LayerMapping;
use probelens::run::{self, PairInput, RunOptions};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use crate::common;

use common::DiskFiles as Dir;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).to_path_buf()
}

fn mapping(path: &Path) -> LayerMapping {
    let m = LayerMapping::parse(
        &path.display().to_string(),
        &std::fs::read_to_string(path).unwrap(),
    )
    .unwrap();
    assert!(m.invalid.is_none(), "{}: {:?}", path.display(), m.invalid);
    m
}

/// Matched (npu name, bench name) pairs of step 0 with `tp` as NPU and `gp` as bench.
fn pairs(tp: &str, gp: &str, lm: LayerMapping) -> BTreeSet<(String, String)> {
    let case = root().join("tests/fixtures/qwen_mix_statistics");
    let (n, b) = (Dir(case.join(tp)), Dir(case.join(gp)));
    let plan = run::plan(&n, Some(&b)).unwrap();
    let p = &plan.pairs[0];
    let opts = RunOptions {
        layer_mapping: Some(lm),
        ..Default::default()
    };
    let res = run::run_pair(
        PairInput::new(
            run::load_rank(&n, &p.npu_dir).unwrap(),
            Some(run::load_rank(&b, p.bench_dir.as_ref().unwrap()).unwrap()),
        ),
        &opts,
    )
    .unwrap();
    let gb = &res.bench.as_ref().unwrap().graph;
    let g = &res.npu.graph;
    g.pre_order()
        .into_iter()
        .filter_map(|id| {
            g.node(id)
                .partner()
                .map(|p| (g.name(id).to_string(), gb.name(p).to_string()))
        })
        .collect()
}

#[test]
fn all_templates_parse() {
    let mut n = 0;
    for e in std::fs::read_dir(root().join("mappings"))
        .unwrap()
        .flatten()
    {
        if e.path().extension().is_some_and(|x| x == "yaml") {
            mapping(&e.path());
            n += 1;
        }
    }
    assert!(n >= 5, "{n} templates");
}

#[test]
fn reverse_qwen25_template_mirrors_the_forward_one() {
    let fwd = pairs(
        "npu",
        "bench",
        mapping(&root().join("mappings/qwen2.5_mindspeed-llm_to_llamafactory.yaml")),
    );
    let rev = pairs(
        "bench",
        "npu",
        mapping(&root().join("mappings/qwen2.5_llamafactory_to_mindspeed-llm.yaml")),
    );
    let rev_mirrored: BTreeSet<(String, String)> = rev.into_iter().map(|(a, b)| (b, a)).collect();
    // Module pairs (named by the rules) must agree both ways; API pairs follow call order and may
    // differ where one side has extra calls in a scope.
    let modules = |s: &BTreeSet<(String, String)>| -> BTreeSet<(String, String)> {
        s.iter()
            .filter(|(a, _)| a.starts_with("Module."))
            .cloned()
            .collect()
    };
    let (f, r) = (modules(&fwd), modules(&rev_mirrored));
    let common = f.intersection(&r).count();
    assert!(f.len() > 30, "forward module pairs: {}", f.len());
    assert_eq!(
        common,
        f.len(),
        "forward-only: {:?}",
        f.difference(&r).take(5).collect::<Vec<_>>()
    );
    assert_eq!(
        common,
        r.len(),
        "reverse-only: {:?}",
        r.difference(&f).take(5).collect::<Vec<_>>()
    );
}
