//! Layout-aware compare (beyond msprobe, off by default): shapes that are permutations of each
//! other (Megatron `[s, b, h]` vs HF `[b, s, h]`) pass the shape check, so cross-framework nodes
//! get verdicts from their statistics; genuine differences and non-permuted shapes still fail.

use probelens::base::error::Result;
use probelens::base::Files;
use probelens::compare::manual_match;
use probelens::compare::pair::PairResult;
use probelens::formats::dump::RankDump;
use probelens::mapping::LayerMapping;
use probelens::run::{self, PairInput, RunOptions};
use std::borrow::Cow;
use std::path::{Path, PathBuf};

struct Dir(PathBuf);

impl Files for Dir {
    fn list(&self, dir: &str) -> Result<Vec<(String, bool)>> {
        Ok(std::fs::read_dir(self.0.join(dir))
            .unwrap()
            .flatten()
            .map(|e| {
                (
                    e.file_name().to_string_lossy().into_owned(),
                    e.path().is_dir(),
                )
            })
            .collect())
    }
    fn read(&self, path: &str) -> Result<Cow<'_, [u8]>> {
        Ok(Cow::Owned(std::fs::read(self.0.join(path)).unwrap()))
    }
}

fn case() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/qwen_mix_statistics")
}

fn mapping() -> LayerMapping {
    let text = std::fs::read_to_string(case().join("layer_mapping.yaml")).unwrap();
    LayerMapping::parse("layer_mapping.yaml", &text).unwrap()
}

/// Step 0 of the fixture; `edit` may rewrite the NPU dump.json text first.
fn load(edit: impl Fn(String) -> String) -> (RankDump, RankDump) {
    let (n, b) = (Dir(case().join("npu")), Dir(case().join("bench")));
    let plan = run::plan(&n, Some(&b)).unwrap();
    let p = &plan.pairs[0];
    let dir = case().join("npu").join(&p.npu_dir);
    let read = |f: &str| std::fs::read(dir.join(f)).unwrap();
    let dump = edit(String::from_utf8(read("dump.json")).unwrap());
    let names = probelens::formats::dump::FileNames::in_dir(&p.npu_dir);
    let nd = RankDump::parse(
        names,
        dump.as_bytes(),
        &read("construct.json"),
        &read("stack.json"),
    )
    .unwrap();
    (
        nd,
        run::load_rank(&b, p.bench_dir.as_ref().unwrap()).unwrap(),
    )
}

fn run_with(
    dumps: (RankDump, RankDump),
    lm: Option<LayerMapping>,
    layout_aware: bool,
) -> PairResult {
    let opts = RunOptions {
        layer_mapping: lm,
        layout_aware,
        ..Default::default()
    };
    run::run_pair(PairInput::new(dumps.0, Some(dumps.1)), &opts).unwrap()
}

/// (precision_index, every Err_message of the node) of an NPU node.
fn verdict(res: &PairResult, name: &str) -> (Option<f64>, Vec<String>) {
    let g = &res.npu.graph;
    let id = g.get(name).unwrap();
    let d = probelens::view::node_dto(res, probelens::view::SideSel::Npu, id).unwrap();
    let msgs = d
        .input_data
        .iter()
        .chain(d.output_data.iter())
        .flat_map(|(_, fields)| fields.iter())
        .filter(|(k, v)| k == "Err_message" && v != "[]")
        .map(|(_, v)| v.clone())
        .collect();
    (g.node(id).precision().map(|p| p.0), msgs)
}

const SHAPE: &str = "The shape of NPU and Bench are inconsistent";
const O_PROJ: &str =
    "Module.0.module.module.decoder.layers.0.self_attention.linear_proj.RowParallelLinear.forward.0";
const FC1: &str =
    "Module.0.module.module.decoder.layers.0.mlp.linear_fc1.ColumnParallelLinear.forward.0";

#[test]
fn permuted_layouts_are_judged_on_their_statistics() {
    let plain = run_with(load(|s| s), Some(mapping()), false);
    let aware = run_with(load(|s| s), Some(mapping()), true);

    // msprobe (default): the [16, 2, 64] vs [2, 16, 64] layouts are a shape error.
    let (p, msgs) = verdict(&plain, O_PROJ);
    assert_eq!(p, Some(1.0));
    assert!(msgs.iter().any(|m| m.contains(SHAPE)), "{msgs:?}");
    // Layout-aware: the same statistics pass.
    let (p, msgs) = verdict(&aware, O_PROJ);
    assert_eq!(p, Some(0.0), "{msgs:?}");

    // A shape that is not a permutation stays an error: the fused gate+up projection
    // ([16, 2, 256]) against up_proj ([2, 16, 128]).
    let (p, msgs) = verdict(&aware, FC1);
    assert_eq!(p, Some(1.0));
    assert!(msgs.iter().any(|m| m.contains(SHAPE)), "{msgs:?}");

    // Over the model's modules: shape errors give way to real verdicts. (The optimizer's APIs
    // pair parameters of different shapes by call order: those errors stay.)
    let count = |res: &PairResult, pass: bool| {
        let g = &res.npu.graph;
        g.pre_order()
            .into_iter()
            .filter(|id| {
                g.name(*id).starts_with("Module.")
                    && g.node(*id).precision().is_some_and(|x| {
                        if pass {
                            x.0 == 0.0
                        } else {
                            x.0 == 1.0
                        }
                    })
            })
            .count()
    };
    let (e0, e1) = (count(&plain, false), count(&aware, false));
    let (p0, p1) = (count(&plain, true), count(&aware, true));
    println!("modules: errors {e0} -> {e1}, passes {p0} -> {p1} with --layout-aware");
    assert!(
        e1 * 2 < e0 && p1 > p0,
        "errors {e0} -> {e1}, passes {p0} -> {p1}"
    );
}

#[test]
fn a_genuine_difference_stays_an_error_with_permuted_layouts() {
    // Hand-edit the NPU dump: o_proj's output statistics three times larger.
    let edit = |s: String| {
        let start = s.find(&format!("\"{O_PROJ}\"")).unwrap();
        let at = start + s[start..].find("\"output\"").unwrap();
        let (head, mut tail) = (s[..at].to_string(), s[at..].to_string());
        for (old, new) in [
            (
                "\"Max\": 0.060907959938049316",
                "\"Max\": 0.18272387981414795",
            ),
            (
                "\"Min\": -0.05253789573907852",
                "\"Min\": -0.15761368721723556",
            ),
            (
                "\"Mean\": -0.0010588187724351883",
                "\"Mean\": -0.003176456317305565",
            ),
            ("\"Norm\": 0.5355140566825867", "\"Norm\": 1.60654217004776"),
        ] {
            let at = tail.find(old).unwrap();
            assert!(at < 400, "{old} belongs to o_proj's output");
            tail.replace_range(at..at + old.len(), new);
        }
        head + &tail
    };
    let aware = run_with(load(edit), Some(mapping()), true);
    let (p, msgs) = verdict(&aware, O_PROJ);
    assert_eq!(p, Some(1.0), "{msgs:?}");
    assert!(!msgs.iter().any(|m| m.contains(SHAPE)), "{msgs:?}");
    assert!(
        msgs.iter().any(|m| m.contains("NormRelativeErr")),
        "{msgs:?}"
    );
}

#[test]
fn manual_matches_follow_the_layout_aware_compare() {
    // Without a mapping o_proj is grey; matched by hand it is judged like the mapped run.
    let bench = "Module.module.model.layers.0.self_attn.o_proj.Linear.forward.0";
    for aware in [false, true] {
        let mut res = run_with(load(|s| s), None, aware);
        let n = res.npu.graph.get(O_PROJ).unwrap();
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
            false,
        );
        let (p, _) = verdict(&res, O_PROJ);
        assert_eq!(p, Some(if aware { 0.0 } else { 1.0 }));
    }
}
