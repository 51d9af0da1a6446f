//! The WebAssembly bindings, run headless in Chromium by wasm-bindgen-test-runner:
//! `Session` over real fixture files (qwen_L0, step 0, with the layer mapping), checked against
//! msprobe's numbers for that case (reference/map/summary.json: NPU 81 nodes, 46 matched,
//! precision 0 x4 and 1 x41; Bench 85 nodes, 46 matched).

#![cfg(target_arch = "wasm32")]
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod columns_layout;

use columns_layout::decode;
use probelens::wasm::Session;
use wasm_bindgen::JsValue;
use wasm_bindgen_test::*;

wasm_bindgen_test_configure!(run_in_browser);

macro_rules! fixture {
    ($side:literal, $proc:literal, $file:literal) => {
        include_bytes!(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/qwen_L0/",
            $side,
            "/step0/",
            $proc,
            "/",
            $file
        ))
    };
}

const MAPPING: &str = include_str!(concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/qwen_L0/layer_mapping.yaml"
));

fn loaded() -> Session {
    let mut s = Session::new();
    add_npu(&mut s);
    add_bench(&mut s);
    s
}

fn add_npu(s: &mut Session) {
    for (name, bytes) in [
        ("dump.json", &fixture!("npu", "proc24688", "dump.json")[..]),
        (
            "construct.json",
            &fixture!("npu", "proc24688", "construct.json")[..],
        ),
        (
            "stack.json",
            &fixture!("npu", "proc24688", "stack.json")[..],
        ),
    ] {
        s.add_file("npu", name, bytes).unwrap();
    }
}

fn add_bench(s: &mut Session) {
    // The bench side arrives in chunks, as the page streams large files.
    for (name, bytes) in [
        (
            "dump.json",
            &fixture!("bench", "proc24439", "dump.json")[..],
        ),
        (
            "construct.json",
            &fixture!("bench", "proc24439", "construct.json")[..],
        ),
        (
            "stack.json",
            &fixture!("bench", "proc24439", "stack.json")[..],
        ),
    ] {
        s.begin_file("bench", name, bytes.len() as f64).unwrap();
        for chunk in bytes.chunks(4096) {
            s.append_chunk("bench", name, chunk).unwrap();
        }
    }
}

fn options(mapping: Option<&str>) -> String {
    serde_json::json!({"step": 0, "rank": 0, "layerMapping": mapping, "fuzzy": false, "overflowCheck": false}).to_string()
}

fn run(s: &mut Session, mapping: Option<&str>) -> serde_json::Value {
    answer(s, &options(mapping))
}

/// `run`'s answer with each graph's columns (`columns`, the binary buffer) put back into it as
/// JSON arrays: `names`, `parent`, `nodeType`, `precision` (null for none), `overflow`,
/// `matched`, `microStep`, `subtreeEnd`, beside the answer's `nodes`.
fn answer(s: &mut Session, opts: &str) -> serde_json::Value {
    let mut r: serde_json::Value = serde_json::from_str(&s.run(opts).unwrap()).unwrap();
    for side in ["npu", "bench"] {
        if r[side].is_null() {
            assert!(s.columns(side).is_err(), "no {side} graph, no columns");
            continue;
        }
        let cols = columns_json(&s.columns(side).unwrap());
        assert_eq!(
            r[side]["nodes"].as_u64(),
            Some(cols["names"].as_array().unwrap().len() as u64)
        );
        r[side]
            .as_object_mut()
            .unwrap()
            .extend(cols.as_object().unwrap().clone());
    }
    r
}

/// A `columns` array as JSON columns (the layout of `view::graph_columns`; the core writes the
/// array in pieces, `view::write_columns`, whose coverage tests/columns.rs checks).
fn columns_json(a: &js_sys::Uint8Array) -> serde_json::Value {
    let b = &a.to_vec()[..];
    assert_eq!(&b[0..4], b"PLGC");
    assert_eq!(u32::from_le_bytes(b[4..8].try_into().unwrap()), 1);
    let d = decode(b);
    let n = d.parent.len();
    let precision: Vec<Option<f64>> = d
        .precision
        .iter()
        .map(|&p| Some(p).filter(|p| !p.is_nan()))
        .collect();
    let overflow: Vec<Option<&str>> = d
        .overflow
        .iter()
        .map(|&c| (c > 0).then(|| d.levels[c as usize - 1].as_str()))
        .collect();
    assert_eq!(d.names.len(), n);
    serde_json::json!({
        "names": d.names,
        "parent": d.parent,
        "nodeType": d.node_type,
        "precision": precision,
        "overflow": overflow,
        "matched": d.matched,
        "microStep": d.micro_step,
        "subtreeEnd": d.subtree_end,
    })
}

/// The sizes the page's memory budget (issue #7) was met with, in wasm32 (src/graph/mod.rs checks
/// the 64-bit ones).
#[wasm_bindgen_test]
fn node_and_entry_sizes_in_wasm32() {
    assert_eq!(std::mem::size_of::<probelens::graph::Node>(), 56);
    assert_eq!(std::mem::size_of::<probelens::formats::dump::Entry>(), 16);
}

#[wasm_bindgen_test]
fn layout_of_rank_folders() {
    let s = loaded();
    let l: serde_json::Value = serde_json::from_str(&s.layout().unwrap()).unwrap();
    assert_eq!(l["npu"]["kind"], "files");
    assert_eq!(l["npu"]["steps"], serde_json::json!([0]));
}

#[wasm_bindgen_test]
fn run_matches_msprobe_counts() {
    let mut s = loaded();
    let r = run(&mut s, Some(MAPPING));
    assert_eq!(r["graphType"], "compare");
    assert_eq!(r["task"], "summary");
    let npu = &r["npu"];
    let n = npu["names"].as_array().unwrap().len();
    let matched = npu["matched"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m.as_i64() != Some(-1))
        .count();
    let p0 = npu["precision"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p.as_f64() == Some(0.0))
        .count();
    let p1 = npu["precision"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p.as_f64() == Some(1.0))
        .count();
    assert_eq!((n, matched, p0, p1), (81, 46, 4, 41));
    let bench = &r["bench"];
    assert_eq!(bench["names"].as_array().unwrap().len(), 85);
    // Pre-order: the root first, subtree ends consistent.
    assert_eq!(npu["names"][0], "DefaultModel");
    assert_eq!(npu["subtreeEnd"][0].as_u64(), Some(n as u64));
}

#[wasm_bindgen_test]
fn node_details_and_manual_unmatch() {
    let mut s = loaded();
    let r = run(&mut s, Some(MAPPING));
    let matched = r["npu"]["matched"].as_array().unwrap();
    let idx = (1..matched.len())
        .find(|i| matched[*i].as_i64() != Some(-1))
        .unwrap();
    let d: serde_json::Value = serde_json::from_str(&s.node("npu", idx as u32).unwrap()).unwrap();
    assert!(!d["matchedNodeLink"].as_array().unwrap().is_empty());
    assert!(d["rows"].as_array().is_some());
    let changes: serde_json::Value =
        serde_json::from_str(&s.unmatch("npu", idx as u32).unwrap()).unwrap();
    let npu_changes = changes["npu"].as_array().unwrap();
    assert!(npu_changes
        .iter()
        .any(|c| c[0].as_u64() == Some(idx as u64) && c[2].as_i64() == Some(-1)));
    // And back.
    let b = matched[idx].as_i64().unwrap() as u32;
    let again: serde_json::Value =
        serde_json::from_str(&s.match_nodes(idx as u32, b, false).unwrap()).unwrap();
    assert!(again["npu"]
        .as_array()
        .unwrap()
        .iter()
        .any(|c| c[0].as_u64() == Some(idx as u64)));
}

#[wasm_bindgen_test]
fn bad_file_error_names_side_and_file() {
    let mut s = loaded();
    s.add_file(
        "bench",
        "dump.json",
        b"{\"task\": \"statistics\", \"data\": {\"x\": [1, 2",
    )
    .unwrap();
    let err = s.run(&options(None)).unwrap_err();
    let side = js_sys::Reflect::get(&err, &JsValue::from_str("side")).unwrap();
    assert_eq!(side.as_string().as_deref(), Some("bench"));
    let msg = js_sys::Reflect::get(&err, &JsValue::from_str("message"))
        .unwrap()
        .as_string()
        .unwrap();
    assert!(msg.starts_with("dump.json: line 1, column"), "{msg}");
    let err = s.check("bench").unwrap_err();
    let file = js_sys::Reflect::get(&err, &JsValue::from_str("file")).unwrap();
    assert_eq!(file.as_string().as_deref(), Some("dump.json"));
}

#[wasm_bindgen_test]
fn bad_yaml_is_reported_with_its_line() {
    let mut s = loaded();
    let err = s.run(&options(Some("A:\n  b: c\n d: e\n"))).unwrap_err();
    let msg = js_sys::Reflect::get(&err, &JsValue::from_str("message"))
        .unwrap()
        .as_string()
        .unwrap();
    assert!(msg.contains("line 3"), "{msg}");
}

#[wasm_bindgen_test]
fn suggestions_accept_and_export_a_mapping() {
    let mut s = loaded();
    let opts = serde_json::json!({"step": 0, "rank": 0, "layerMapping": null, "layoutAware": true})
        .to_string();
    let r = answer(&mut s, &opts);
    let npu_names = r["npu"]["names"].as_array().unwrap().clone();
    let bench_names = r["bench"]["names"].as_array().unwrap().clone();
    let min = Session::default_min_score();
    let sug: serde_json::Value = serde_json::from_str(&s.suggest(min).unwrap()).unwrap();
    let sug = sug.as_array().unwrap();
    assert!(!sug.is_empty());
    for x in sug {
        let score = x["score"].as_f64().unwrap();
        assert!(score >= min && score <= 1.0, "{x}");
        assert!(x["npu"].as_u64().unwrap() < npu_names.len() as u64);
        assert!(!x["reason"].as_str().unwrap().is_empty());
    }
    let changes: serde_json::Value =
        serde_json::from_str(&s.accept_suggestions(min).unwrap()).unwrap();
    let matched: Vec<(String, String)> = changes["npu"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c[2].as_i64().unwrap_or(-1) >= 0)
        .map(|c| {
            let n = npu_names[c[0].as_u64().unwrap() as usize].as_str().unwrap();
            let b = bench_names[c[2].as_u64().unwrap() as usize]
                .as_str()
                .unwrap();
            (n.to_string(), b.to_string())
        })
        .filter(|(n, _)| n.starts_with("Module."))
        .collect();
    assert!(matched.len() > 10, "{matched:?}");
    let pairs = serde_json::to_string(&matched).unwrap();
    let yaml = s.export_mapping("# mine\n", &pairs).unwrap();
    assert!(
        yaml.starts_with("# mine\n") && yaml.contains("TopLayer:"),
        "{yaml}"
    );
    let report: serde_json::Value =
        serde_json::from_str(&s.export_mapping_report("", &pairs).unwrap()).unwrap();
    assert!(!report["added"].as_array().unwrap().is_empty());
    assert!(!report["reproduced"].as_array().unwrap().is_empty());
    assert!(s.export_mapping("", "not json").is_err());
}

/// Each rank folder is parsed once (by `check` or `run`) and then reused: a re-run of the same
/// pair (the mapping editor, other options) equals a fresh session's result and parses nothing;
/// a folder whose files are loaded again is parsed again (its error shows).
#[wasm_bindgen_test]
fn rank_folders_are_parsed_once() {
    let mut fresh = loaded();
    let with_map = run(&mut fresh, Some(MAPPING));
    let mut fresh2 = loaded();
    let without = run(&mut fresh2, None);
    assert_ne!(with_map, without, "the mapping must change the result");

    let mut s = loaded();
    s.check("npu").unwrap();
    s.check("bench").unwrap();
    assert_eq!(s.parsed_ranks(), 2);
    assert_eq!(run(&mut s, Some(MAPPING)), with_map);
    assert_eq!(run(&mut s, None), without);
    assert_eq!(run(&mut s, Some(MAPPING)), with_map);
    assert_eq!(
        s.parsed_ranks(),
        2,
        "check and re-runs must not parse again"
    );

    // The NPU folder loaded again, with a broken dump.json.
    for (name, bytes) in [
        (
            "dump.json",
            &b"{\"task\": \"statistics\", \"data\": {\"x\": [1, 2"[..],
        ),
        (
            "construct.json",
            &fixture!("npu", "proc24688", "construct.json")[..],
        ),
        (
            "stack.json",
            &fixture!("npu", "proc24688", "stack.json")[..],
        ),
    ] {
        s.add_file("npu", name, bytes).unwrap();
    }
    let err = s.run(&options(Some(MAPPING))).unwrap_err();
    let side = js_sys::Reflect::get(&err, &JsValue::from_str("side")).unwrap();
    assert_eq!(side.as_string().as_deref(), Some("npu"));
    let msg = js_sys::Reflect::get(&err, &JsValue::from_str("message"))
        .unwrap()
        .as_string()
        .unwrap();
    assert!(msg.starts_with("dump.json: line 1, column"), "{msg}");
}

/// A side adopted from another session (the page's next load, with that side unchanged) is the
/// same folder without parsing it again: the run equals a fresh session's, only the other side is
/// parsed, node details work, and the session it came from is unchanged and still usable. A side
/// not parsed yet is adopted too (parsed by the adopting session), and a file changed in the
/// adopting session does not change the other one.
#[wasm_bindgen_test]
fn adopted_side_is_not_parsed_again() {
    let mut fresh = loaded();
    let want = run(&mut fresh, Some(MAPPING));

    // The shown session: the NPU folder alone (a build graph).
    let mut shown = Session::new();
    add_npu(&mut shown);
    let built = run(&mut shown, Some(MAPPING));
    assert_eq!(built["graphType"], "build");
    assert_eq!(shown.parsed_ranks(), 1);

    // The next load: the NPU side adopted, the Bench side sent.
    let mut next = Session::new();
    next.adopt_side(&shown, "npu").unwrap();
    add_bench(&mut next);
    let l: serde_json::Value = serde_json::from_str(&next.layout().unwrap()).unwrap();
    assert_eq!(l["npu"]["kind"], "files");
    assert_eq!(run(&mut next, Some(MAPPING)), want);
    assert_eq!(next.parsed_ranks(), 1, "only the Bench folder is parsed");
    // The NPU graph built for the shown build view is not handed on (it would sit in the wasm
    // heap through the Bench folder's parse): the compare builds both graphs.
    assert_eq!(shown.built_graphs(), 1);
    assert_eq!(
        next.built_graphs(),
        2,
        "the compare builds the NPU graph again"
    );
    assert_eq!(
        columns_json(&next.columns("npu").unwrap()),
        columns_json(&fresh.columns("npu").unwrap())
    );
    let d: serde_json::Value = serde_json::from_str(&next.node("npu", 1).unwrap()).unwrap();
    let f: serde_json::Value = serde_json::from_str(&fresh.node("npu", 1).unwrap()).unwrap();
    assert_eq!(d, f, "node details from the adopted side");
    // The session it came from: unchanged, still usable.
    assert_eq!(run(&mut shown, Some(MAPPING)), built);
    assert_eq!(shown.parsed_ranks(), 1);
    drop(shown);
    assert_eq!(run(&mut next, None), run(&mut loaded(), None));

    // A side that was not parsed yet: its bytes are shared, the adopting session parses it.
    let mut raw = Session::new();
    add_npu(&mut raw);
    let mut other = Session::new();
    other.adopt_side(&raw, "npu").unwrap();
    add_bench(&mut other);
    assert_eq!(run(&mut other, Some(MAPPING)), want);
    assert_eq!(other.parsed_ranks(), 2);
    assert_eq!(raw.parsed_ranks(), 0);
    // A file changed in the adopting session: the other session keeps its own.
    other
        .add_file(
            "npu",
            "dump.json",
            b"{\"task\": \"statistics\", \"data\": {\"x\": [1",
        )
        .unwrap();
    let err = other.run(&options(Some(MAPPING))).unwrap_err();
    let side = js_sys::Reflect::get(&err, &JsValue::from_str("side")).unwrap();
    assert_eq!(side.as_string().as_deref(), Some("npu"));
    assert_eq!(run(&mut raw, Some(MAPPING)), built);

    let err = other.adopt_side(&raw, "gpu").unwrap_err();
    let msg = js_sys::Reflect::get(&err, &JsValue::from_str("message")).unwrap();
    assert!(msg.as_string().unwrap().starts_with("unknown side 'gpu'"));
}

/// A build result suspended while another session adopts its side (`suspend`: its graph freed
/// for the compare that follows) is built again, the same, on its next use: the same columns
/// and node details, with and without the overflow check, and one more graph built. A compare
/// is not suspended, and a run replaces a suspended result.
#[wasm_bindgen_test]
fn suspended_build_is_built_again_the_same() {
    let want = run(&mut loaded(), Some(MAPPING));
    for overflow in [false, true] {
        let opts = serde_json::json!({"step": 0, "rank": 0, "layerMapping": MAPPING, "fuzzy": false, "overflowCheck": overflow}).to_string();
        let mut shown = Session::new();
        add_npu(&mut shown);
        let built = answer(&mut shown, &opts);
        assert_eq!(built["graphType"], "build");
        let cols = columns_json(&shown.columns("npu").unwrap());
        let nodes: Vec<String> = (0..cols["names"].as_array().unwrap().len() as u32)
            .step_by(7)
            .map(|i| shown.node("npu", i).unwrap())
            .collect();
        assert_eq!(shown.built_graphs(), 1);

        let mut next = Session::new();
        next.adopt_side(&shown, "npu").unwrap();
        assert!(shown.suspend(), "a build is suspended");
        assert!(shown.is_suspended());
        assert!(!shown.suspend(), "once");
        add_bench(&mut next);
        if !overflow {
            assert_eq!(run(&mut next, Some(MAPPING)), want, "the compare beside it");
        }

        // Used again: built again from its parsed folder, the same.
        assert_eq!(columns_json(&shown.columns("npu").unwrap()), cols);
        assert!(!shown.is_suspended());
        assert_eq!(shown.built_graphs(), 2);
        assert_eq!(shown.parsed_ranks(), 1, "nothing parsed again");
        let again: Vec<String> = (0..cols["names"].as_array().unwrap().len() as u32)
            .step_by(7)
            .map(|i| shown.node("npu", i).unwrap())
            .collect();
        assert_eq!(again, nodes);
        // Suspended again, then run: the run's result replaces it.
        assert!(shown.suspend());
        assert_eq!(answer(&mut shown, &opts), built);
        assert!(!shown.is_suspended());
        assert_eq!(shown.built_graphs(), 3);
    }
    // A compare stays.
    let mut s = loaded();
    let r = run(&mut s, Some(MAPPING));
    assert!(!s.suspend());
    assert!(!s.is_suspended());
    assert_eq!(run(&mut s, Some(MAPPING)), r);
}

macro_rules! diag_file {
    ($run:literal, $step:literal, $proc:literal, $file:literal) => {
        (
            concat!($step, "/", $proc, "/", $file),
            &include_bytes!(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/tests/fixtures/diagnose/runs/",
                $run,
                "/",
                $step,
                "/",
                $proc,
                "/",
                $file
            ))[..],
        )
    };
}

/// A same-framework pair of two steps with layer 1's attention scale planted on the NPU side.
fn defect_pair() -> Session {
    let mut s = Session::new();
    for (path, bytes) in [
        diag_file!("npu_attn_scale_l1", "step0", "proc25061", "dump.json"),
        diag_file!("npu_attn_scale_l1", "step0", "proc25061", "construct.json"),
        diag_file!("npu_attn_scale_l1", "step0", "proc25061", "stack.json"),
        diag_file!("npu_attn_scale_l1", "step1", "proc25061", "dump.json"),
        diag_file!("npu_attn_scale_l1", "step1", "proc25061", "construct.json"),
        diag_file!("npu_attn_scale_l1", "step1", "proc25061", "stack.json"),
    ] {
        s.add_file("npu", path, bytes).unwrap();
    }
    for (path, bytes) in [
        diag_file!("npu_clean", "step0", "proc19773", "dump.json"),
        diag_file!("npu_clean", "step0", "proc19773", "construct.json"),
        diag_file!("npu_clean", "step0", "proc19773", "stack.json"),
        diag_file!("npu_clean", "step1", "proc19773", "dump.json"),
        diag_file!("npu_clean", "step1", "proc19773", "construct.json"),
        diag_file!("npu_clean", "step1", "proc19773", "stack.json"),
    ] {
        s.add_file("bench", path, bytes).unwrap();
    }
    s
}

#[wasm_bindgen_test]
fn diagnosis_names_the_planted_module_and_agrees_on_a_clean_pair() {
    let mut s = loaded();
    let r = run(&mut s, Some(MAPPING));
    let d: serde_json::Value = serde_json::from_str(&s.diagnose(0, 0).unwrap()).unwrap();
    assert_eq!(d["verdict"], "agree", "{d}");
    assert!(d["suspects"].as_array().unwrap().is_empty());
    assert_eq!(
        s.divergence().length() as u64,
        r["npu"]["nodes"].as_u64().unwrap()
    );
}

#[wasm_bindgen_test]
fn diagnosis_of_a_defect_pair_and_another_step() {
    let mut s = defect_pair();
    let r = run(&mut s, None);
    let d: serde_json::Value = serde_json::from_str(&s.diagnose(0, 0).unwrap()).unwrap();
    assert_eq!(d["verdict"], "diverged", "{d}");
    let top = &d["suspects"][0];
    let i = top["npuIndex"].as_u64().unwrap() as usize;
    assert_eq!(r["npu"]["names"][i], top["node"]);
    // The suspect lies in the planted module (an API below it: by the parent chain).
    let mut at = i as i64;
    let mut inside = false;
    while at >= 0 {
        let name = r["npu"]["names"][at as usize].as_str().unwrap();
        inside |= name.contains(".decoder.layers.1.self_attention.");
        at = r["npu"]["parent"][at as usize].as_i64().unwrap();
    }
    assert!(inside, "{top}");
    let j = top["benchIndex"].as_u64().unwrap() as usize;
    assert_eq!(r["bench"]["names"][j], top["bench_node"]);
    assert!(d["layers"]
        .as_array()
        .unwrap()
        .iter()
        .any(|c| c["layer"] == "decoder.layers.1" && c["source"] == true));
    // Another step, without changing the shown result.
    let opts = serde_json::json!({"step": 1, "rank": 0}).to_string();
    let other: serde_json::Value = serde_json::from_str(&s.diagnose_step(&opts).unwrap()).unwrap();
    assert_eq!(other["step"], 1);
    assert_eq!(other["verdict"], "diverged");
    let again: serde_json::Value = serde_json::from_str(&s.diagnose(0, 0).unwrap()).unwrap();
    assert_eq!(again["suspects"][0]["node"], top["node"]);
}
