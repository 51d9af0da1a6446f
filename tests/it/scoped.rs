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
