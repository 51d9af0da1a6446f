//! Scoped layer-mapping keys (our extension): a top-level key with `.` or `*` is a pattern over
//! `<NPU instance path of the parent layer>.<class name>`. Two subtrees with the same class names
//! that need different renames (the Qwen2.5-VL vision blocks and text layers are both
//! `TransformerLayer` in MindSpeed-MM) can be mapped by one yaml; a class-keyed yaml cannot.

use probelens::compare::pair::PairResult;
use probelens::mapping::export::export_mapping;
use probelens::mapping::LayerMapping;
use probelens::run::{self, PairInput, RunOptions};
use serde_json::{json, Value};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use crate::common;

use common::DiskFiles as Dir;

fn tensor(x: f64) -> Value {
    json!({"type": "torch.Tensor", "dtype": "torch.float32", "shape": [2, 4],
           "Max": x, "Min": -x, "Mean": x / 10.0, "Norm": 2.0 * x, "requires_grad": true})
}

/// Writes one rank folder: `nodes` are (dump name, construct parent, a number for its stats), in
/// call order.
fn write_rank(dir: &Path, nodes: &[(&str, Option<&str>, f64)]) {
    std::fs::create_dir_all(dir).unwrap();
    let mut data = serde_json::Map::new();
    let mut construct = serde_json::Map::new();
    let mut stack = serde_json::Map::new();
    for (name, parent, x) in nodes {
        let entry = if name.ends_with(".backward") || name.contains(".backward.") {
            json!({"input": [tensor(*x)], "output": [tensor(x + 0.5)]})
        } else {
            json!({"input_args": [tensor(*x)], "input_kwargs": {}, "output": [tensor(x + 0.5)]})
        };
        data.insert(name.to_string(), entry);
        construct.insert(name.to_string(), parent.map_or(Value::Null, |p| json!(p)));
        stack.insert(
            name.to_string(),
            json!([format!("File /a/model.py, line 1, in forward, \n {name}")]),
        );
    }
    let dump = json!({"task": "statistics", "level": "mix", "framework": "pytorch",
                      "dump_data_dir": null, "data": data});
    std::fs::write(dir.join("dump.json"), dump.to_string()).unwrap();
    std::fs::write(
        dir.join("construct.json"),
        Value::Object(construct).to_string(),
    )
    .unwrap();
    std::fs::write(dir.join("stack.json"), Value::Object(stack).to_string()).unwrap();
}

/// A MindSpeed-MM-like NPU model (vision and text layers are both `TransformerLayer` with a
/// `self_attention` child) and an HF-like bench (`attn` in the vision blocks, `self_attn` in the
/// text layers).
fn two_scope_case(tag: &str) -> PathBuf {
    let root = std::env::temp_dir().join(format!("probelens_scoped_{tag}_{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    let m = "Module.model.MM.forward.0";
    let vis = "Module.model.image_encoder.VisionModel.forward.0";
    let vl = "Module.model.image_encoder.blocks.0.TransformerLayer.forward.0";
    let va = "Module.model.image_encoder.blocks.0.self_attention.Attention.forward.0";
    let txt = "Module.model.text_decoder.GPT.forward.0";
    let tl = "Module.model.text_decoder.layers.0.TransformerLayer.forward.0";
    let ta = "Module.model.text_decoder.layers.0.self_attention.Attention.forward.0";
    write_rank(
        &root.join("npu"),
        &[
            (m, None, 1.0),
            (vis, Some(m), 2.0),
            (vl, Some(vis), 3.0),
            (va, Some(vl), 4.0),
            ("Torch.matmul.0.forward", Some(va), 5.0),
            (txt, Some(m), 6.0),
            (tl, Some(txt), 7.0),
            (ta, Some(tl), 8.0),
            ("Torch.matmul.1.forward", Some(ta), 9.0),
        ],
    );
    let bm = "Module.model.MM.forward.0";
    let bvis = "Module.model.visual.Vision.forward.0";
    let bvl = "Module.model.visual.blocks.0.Block.forward.0";
    let bva = "Module.model.visual.blocks.0.attn.Attention.forward.0";
    let btxt = "Module.model.language_model.LM.forward.0";
    let btl = "Module.model.language_model.layers.0.DecoderLayer.forward.0";
    let bta = "Module.model.language_model.layers.0.self_attn.Attention.forward.0";
    write_rank(
        &root.join("bench"),
        &[
            (bm, None, 1.0),
            (bvis, Some(bm), 2.0),
            (bvl, Some(bvis), 3.0),
            (bva, Some(bvl), 4.0),
            ("Torch.matmul.0.forward", Some(bva), 5.0),
            (btxt, Some(bm), 6.0),
            (btl, Some(btxt), 7.0),
            (bta, Some(btl), 8.0),
            ("Torch.matmul.3.forward", Some(bta), 9.0),
        ],
    );
    root
}

fn run(root: &Path, yaml: &str) -> PairResult {
    let (n, b) = (Dir(root.join("npu")), Dir(root.join("bench")));
    let lm = LayerMapping::parse("mapping.yaml", yaml).unwrap();
    assert!(lm.invalid.is_none(), "{:?}", lm.invalid);
    let opts = RunOptions {
        layer_mapping: Some(lm),
        ..Default::default()
    };
    run::run_pair(
        PairInput::new(
            run::load_rank(&n, "").unwrap(),
            Some(run::load_rank(&b, "").unwrap()),
        ),
        &opts,
    )
    .unwrap()
}

fn pairs(res: &PairResult) -> BTreeSet<(String, String)> {
    let g = &res.npu.graph;
    let gb = &res.bench.as_ref().unwrap().graph;
    g.pre_order()
        .into_iter()
        .filter_map(|id| {
            g.node(id)
                .partner()
                .map(|p| (g.name(id).to_string(), gb.name(p).to_string()))
        })
        .collect()
}

const TOP: &str = "MM:\n  image_encoder: visual\n  text_decoder: language_model\n";

fn p(a: &str, b: &str) -> (String, String) {
    (a.to_string(), b.to_string())
}

#[test]
fn scoped_keys_map_two_subtrees_a_class_key_cannot() {
    let root = two_scope_case("match");
    let vision_attn = p(
        "Module.model.image_encoder.blocks.0.self_attention.Attention.forward.0",
        "Module.model.visual.blocks.0.attn.Attention.forward.0",
    );
    let text_attn = p(
        "Module.model.text_decoder.layers.0.self_attention.Attention.forward.0",
        "Module.model.language_model.layers.0.self_attn.Attention.forward.0",
    );
    let vision_mm = p("Torch.matmul.0.forward", "Torch.matmul.0.forward");
    let text_mm = p("Torch.matmul.1.forward", "Torch.matmul.3.forward");
    let layers = [
        p(
            "Module.model.image_encoder.blocks.0.TransformerLayer.forward.0",
            "Module.model.visual.blocks.0.Block.forward.0",
        ),
        p(
            "Module.model.text_decoder.layers.0.TransformerLayer.forward.0",
            "Module.model.language_model.layers.0.DecoderLayer.forward.0",
        ),
    ];

    // Class keys: one rename for every TransformerLayer; whichever is chosen, one side stays grey.
    for (dst, ok, grey) in [
        ("attn", [&vision_attn, &vision_mm], [&text_attn, &text_mm]),
        (
            "self_attn",
            [&text_attn, &text_mm],
            [&vision_attn, &vision_mm],
        ),
    ] {
        let yaml = format!("{TOP}TransformerLayer:\n  self_attention: {dst}\n");
        let got = pairs(&run(&root, &yaml));
        for want in ok {
            assert!(
                got.contains(want),
                "class key -> {dst}: {want:?} in {got:?}"
            );
        }
        for missing in grey {
            assert!(
                !got.contains(missing),
                "class key -> {dst}: {missing:?} matched"
            );
        }
        for l in &layers {
            assert!(got.contains(l), "{l:?}: renamed by MM's rules");
        }
    }

    // Scoped keys: both subtrees, APIs included (the n-th call in the renamed scope).
    let scoped = format!(
        "{TOP}image_encoder.**.TransformerLayer:\n  self_attention: attn\n\
         text_decoder.layers.*.TransformerLayer:\n  self_attention: self_attn\n"
    );
    let got = pairs(&run(&root, &scoped));
    for want in [&vision_attn, &text_attn, &vision_mm, &text_mm] {
        assert!(got.contains(want), "scoped: {want:?} in {got:?}");
    }

    // A matching scoped key comes before the class key of the same class.
    let both = format!(
        "{TOP}TransformerLayer:\n  self_attention: attn\n\
         text_decoder.**.TransformerLayer:\n  self_attention: self_attn\n"
    );
    let got = pairs(&run(&root, &both));
    for want in [&vision_attn, &text_attn, &vision_mm, &text_mm] {
        assert!(
            got.contains(want),
            "scoped before class: {want:?} in {got:?}"
        );
    }

    // Matching scoped keys are tried in file order: the first one with an applicable rule wins.
    let order = format!(
        "{TOP}TransformerLayer:\n  self_attention: attn\n\
         TransformerLayer*:\n  self_attention: nowhere\n\
         text_decoder.**.TransformerLayer:\n  self_attention: self_attn\n"
    );
    let got = pairs(&run(&root, &order));
    assert!(
        !got.contains(&vision_attn) && !got.contains(&text_attn),
        "{got:?}"
    );

    // Any layer can be keyed by a pattern (YAML reads a plain `*x` as an alias: quote such keys).
    let multi = "image_encoder.VisionModel:\n  blocks: blocks\n\
                 \"*.MM\":\n  image_encoder: visual\n  text_decoder: language_model\n\
                 '**.TransformerLayer':\n  self_attention: attn\n";
    let got = pairs(&run(&root, multi));
    assert!(
        got.contains(&vision_attn) && got.contains(&vision_mm),
        "{got:?}"
    );
    assert!(!got.contains(&text_attn), "{got:?}");
    let _ = std::fs::remove_dir_all(&root);
}

#[test]
fn export_writes_a_scoped_key_where_a_class_key_would_conflict() {
    let root = two_scope_case("export");
    let want = vec![
        p(
            "Module.model.image_encoder.blocks.0.self_attention.Attention.forward.0",
            "Module.model.visual.blocks.0.attn.Attention.forward.0",
        ),
        p(
            "Module.model.text_decoder.layers.0.self_attention.Attention.forward.0",
            "Module.model.language_model.layers.0.self_attn.Attention.forward.0",
        ),
        p("Torch.matmul.1.forward", "Torch.matmul.3.forward"),
    ];
    let (n, b) = (Dir(root.join("npu")), Dir(root.join("bench")));
    let (nd, bd) = (
        run::load_rank(&n, "").unwrap(),
        run::load_rank(&b, "").unwrap(),
    );
    let out = export_mapping(TOP, &nd, &bd, &want).unwrap();
    println!("{}", out.yaml);
    assert!(out.missed.is_empty(), "{:?}", out.missed);
    assert!(out.yaml.starts_with(TOP));
    let keys: Vec<&str> = out.added.iter().map(|r| r.key.as_str()).collect();
    assert_eq!(
        keys,
        [
            "TransformerLayer",
            "model.text_decoder.layers.0.TransformerLayer"
        ]
    );
    let got = pairs(&run(&root, &out.yaml));
    for w in &want {
        assert!(got.contains(w), "{w:?} in {got:?}");
    }
    let _ = std::fs::remove_dir_all(&root);
}

/// A MindSpeed-MM-like pair with several layers per tower: vision blocks and text layers are all
/// `TransformerLayer`s with a `self_attention`, which the Bench calls `attn` in its vision blocks and
/// `self_attn` in its text layers; with `wrap`, each Bench text layer also has a `self_attention`
/// module that holds its `self_attn`.
fn towers_case(tag: &str, blocks: usize, layers: usize, wrap: bool) -> PathBuf {
    let root = std::env::temp_dir().join(format!("probelens_towers_{tag}_{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    let leak = |s: String| -> &'static str { Box::leak(s.into_boxed_str()) };
    let mut npu: Vec<(&str, Option<&str>, f64)> = Vec::new();
    let mut bench: Vec<(&str, Option<&str>, f64)> = Vec::new();
    let (m, bm) = ("Module.model.MM.forward.0", "Module.model.MM.forward.0");
    npu.push((m, None, 1.0));
    bench.push((bm, None, 1.0));
    let vis = "Module.model.image_encoder.VisionModel.forward.0";
    let bvis = "Module.model.visual.Vision.forward.0";
    npu.push((vis, Some(m), 2.0));
    bench.push((bvis, Some(bm), 2.0));
    let mut x = 3.0;
    for k in 0..blocks {
        let vl = leak(format!(
            "Module.model.image_encoder.blocks.{k}.TransformerLayer.forward.0"
        ));
        let va = leak(format!(
            "Module.model.image_encoder.blocks.{k}.self_attention.Attention.forward.0"
        ));
        let bvl = leak(format!("Module.model.visual.blocks.{k}.Block.forward.0"));
        let bva = leak(format!(
            "Module.model.visual.blocks.{k}.attn.Attention.forward.0"
        ));
        npu.extend([(vl, Some(vis), x), (va, Some(vl), x + 1.0)]);
        bench.extend([(bvl, Some(bvis), x), (bva, Some(bvl), x + 1.0)]);
        x += 2.0;
    }
    let txt = "Module.model.text_decoder.GPT.forward.0";
    let btxt = "Module.model.language_model.LM.forward.0";
    npu.push((txt, Some(m), x));
    bench.push((btxt, Some(bm), x));
    for k in 0..layers {
        let tl = leak(format!(
            "Module.model.text_decoder.layers.{k}.TransformerLayer.forward.0"
        ));
        let ta = leak(format!(
            "Module.model.text_decoder.layers.{k}.self_attention.Attention.forward.0"
        ));
        let btl = leak(format!(
            "Module.model.language_model.layers.{k}.DecoderLayer.forward.0"
        ));
        npu.extend([(tl, Some(txt), x + 1.0), (ta, Some(tl), x + 2.0)]);
        bench.push((btl, Some(btxt), x + 1.0));
        if wrap {
            let bw = leak(format!(
                "Module.model.language_model.layers.{k}.self_attention.Wrap.forward.0"
            ));
            let bta = leak(format!("Module.model.language_model.layers.{k}.self_attention.self_attn.Attention.forward.0"));
            bench.extend([(bw, Some(btl), x + 5.0), (bta, Some(bw), x + 2.0)]);
        } else {
            let bta = leak(format!(
                "Module.model.language_model.layers.{k}.self_attn.Attention.forward.0"
            ));
            bench.push((bta, Some(btl), x + 2.0));
        }
        x += 3.0;
    }
    write_rank(&root.join("npu"), &npu);
    write_rank(&root.join("bench"), &bench);
    root
}

/// The attention pairs of every block and layer of a `towers_case`.
fn tower_pairs(blocks: usize, layers: usize, wrap: bool) -> Vec<(String, String)> {
    let mut want = Vec::new();
    for k in 0..blocks {
        want.push(p(
            &format!("Module.model.image_encoder.blocks.{k}.self_attention.Attention.forward.0"),
            &format!("Module.model.visual.blocks.{k}.attn.Attention.forward.0"),
        ));
    }
    for k in 0..layers {
        let b = if wrap {
            format!("Module.model.language_model.layers.{k}.self_attention.self_attn.Attention.forward.0")
        } else {
            format!("Module.model.language_model.layers.{k}.self_attn.Attention.forward.0")
        };
        want.push(p(
            &format!("Module.model.text_decoder.layers.{k}.self_attention.Attention.forward.0"),
            &b,
        ));
    }
    want
}

/// Exports `want` into `yaml` for a case; checks a run with the merged yaml matches every pair, and
/// that no added rule can be removed without losing one. Returns the added rules (key, src, dst).
fn export_checked(
    root: &Path,
    yaml: &str,
    want: &[(String, String)],
) -> Vec<(String, String, String)> {
    let (n, b) = (Dir(root.join("npu")), Dir(root.join("bench")));
    let (nd, bd) = (
        run::load_rank(&n, "").unwrap(),
        run::load_rank(&b, "").unwrap(),
    );
    let out = export_mapping(yaml, &nd, &bd, want).unwrap();
    println!("{}", out.yaml);
    assert!(out.missed.is_empty(), "{:?}", out.missed);
    let got = pairs(&run(root, &out.yaml));
    for w in want {
        assert!(got.contains(w), "{w:?} in {got:?}");
    }
    // Minimal: with the yaml and all added rules but one, a run loses a pair.
    for k in 0..out.added.len() {
        let mut text = yaml.to_string();
        let mut keys: Vec<&str> = Vec::new();
        for (i, r) in out.added.iter().enumerate() {
            if i != k && !keys.contains(&r.key.as_str()) {
                keys.push(&r.key);
            }
        }
        for key in keys {
            text.push_str(&format!("'{key}':\n"));
            for (i, r) in out.added.iter().enumerate() {
                if i != k && r.key == key {
                    text.push_str(&format!("  '{}': '{}'\n", r.src, r.dst));
                }
            }
        }
        let got = pairs(&run(root, &text));
        assert!(
            want.iter().any(|w| !got.contains(w)),
            "{:?} can be removed",
            out.added[k]
        );
    }
    out.added
        .into_iter()
        .map(|r| (r.key, r.src, r.dst))
        .collect()
}

/// Issue 24, item 12: per-layer scoped rules that all say the same become one rule. Text layers
/// whose class key is taken by the vision blocks' rule get one `*` pattern, not a key per layer.
#[test]
fn export_writes_one_pattern_not_a_scoped_key_per_layer() {
    let root = towers_case("pattern", 2, 3, false);
    let added = export_checked(&root, TOP, &tower_pairs(2, 3, false));
    assert_eq!(
        added,
        [
            (
                "TransformerLayer".to_string(),
                "self_attention".to_string(),
                "attn".to_string()
            ),
            (
                "model.text_decoder.layers.*.TransformerLayer".to_string(),
                "self_attention".to_string(),
                "self_attn".to_string()
            ),
        ]
    );
    let _ = std::fs::remove_dir_all(&root);
}

/// A class rule refused for the first layer (it would change where the next layers map today, to
/// Bench modules that exist) but right for all of them: one class rule, not a key per layer.
#[test]
fn export_writes_a_class_rule_where_it_reproduces_the_per_layer_ones() {
    let root = towers_case("class", 0, 3, true);
    let added = export_checked(&root, TOP, &tower_pairs(0, 3, true));
    assert_eq!(
        added,
        [(
            "TransformerLayer".to_string(),
            "self_attention".to_string(),
            "self_attention.self_attn".to_string()
        )]
    );
    let _ = std::fs::remove_dir_all(&root);
}
