//! Exporting module pairs to layer-mapping yaml: msprobe's module pairs of the Qwen2.5 fixture
//! (made with the hand-written mapping), exported from nothing, are reproduced by the core with the
//! exported yaml; exporting into an existing yaml keeps its text.

use probelens::compare::pair::PairResult;
use probelens::mapping::export::export_mapping;
use probelens::mapping::LayerMapping;
use probelens::run::{self, PairInput, RunOptions};
use std::collections::BTreeSet;
use std::io::Read;
use std::path::{Path, PathBuf};

use crate::common;

use common::DiskFiles as Dir;

fn case() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/qwen_mix_statistics")
}

/// msprobe's matched (NPU, Bench) pairs of one step from a reference db.
fn reference_pairs(variant: &str, step: i64, modules_only: bool) -> Vec<(String, String)> {
    let dir = case().join("reference").join(variant);
    let gz = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.to_string_lossy().ends_with(".vis.db.gz"))
        .unwrap();
    let mut raw = Vec::new();
    flate2::read::GzDecoder::new(std::fs::File::open(&gz).unwrap())
        .read_to_end(&mut raw)
        .unwrap();
    // Tests run in parallel threads: one file per call.
    static CALLS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let call = CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let tmp = std::env::temp_dir().join(format!(
        "probelens_export_{}_{variant}_{step}_{call}.db",
        std::process::id()
    ));
    std::fs::write(&tmp, raw).unwrap();
    let conn = rusqlite::Connection::open(&tmp).unwrap();
    let mut st = conn
        .prepare(
            "SELECT node_name, node_type, matched_node_link FROM tb_nodes \
             WHERE data_source = 'NPU' AND step = ?1 AND matched_node_link != '[]' ORDER BY node_order",
        )
        .unwrap();
    let rows: Vec<(String, String, String)> = st
        .query_map([step], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .unwrap()
        .map(|r| r.unwrap())
        .collect();
    drop(st);
    drop(conn);
    let _ = std::fs::remove_file(&tmp);
    rows.into_iter()
        .filter(|(n, t, _)| !modules_only || (t == "0" && n.starts_with("Module.")))
        .map(|(n, _, link)| {
            let link: Vec<String> = serde_json::from_str(&link).unwrap();
            (n, link.last().unwrap().clone())
        })
        .collect()
}

fn load(
    step: usize,
) -> (
    probelens::formats::dump::RankDump,
    probelens::formats::dump::RankDump,
) {
    let (n, b) = (Dir(case().join("npu")), Dir(case().join("bench")));
    let plan = run::plan(&n, Some(&b)).unwrap();
    let p = &plan.pairs[step];
    (
        run::load_rank(&n, &p.npu_dir).unwrap(),
        run::load_rank(&b, p.bench_dir.as_ref().unwrap()).unwrap(),
    )
}

fn run_with(step: usize, yaml: &str) -> PairResult {
    let (nd, bd) = load(step);
    let lm = LayerMapping::parse("exported.yaml", yaml).unwrap();
    assert!(lm.invalid.is_none(), "{:?}", lm.invalid);
    let opts = RunOptions {
        layer_mapping: Some(lm),
        ..Default::default()
    };
    run::run_pair(PairInput::new(nd, Some(bd)), &opts).unwrap()
}

fn matched(res: &PairResult) -> BTreeSet<(String, String)> {
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

#[test]
fn msprobe_module_pairs_round_trip_through_an_exported_yaml() {
    let pairs = reference_pairs("map", 0, true);
    assert_eq!(
        pairs.len(),
        45,
        "module pairs of step 0 (DefaultModel and optimizer are not modules of the model)"
    );
    let (nd, bd) = load(0);
    let out = export_mapping("", &nd, &bd, &pairs).unwrap();
    println!("exported yaml ({} rules):\n{}", out.added.len(), out.yaml);
    for m in &out.missed {
        println!("missed: {m:?}");
    }
    assert!(out.missed.is_empty(), "{:?}", out.missed);
    assert_eq!(out.reproduced.len(), pairs.len());
    // The hand-written layer_mapping.yaml of the fixture has 12 rules.
    assert!(out.added.len() <= 12, "{} rules", out.added.len());

    // The core, run with the exported yaml, matches every pair; the other step too.
    for step in [0, 1] {
        let got = matched(&run_with(step, &out.yaml));
        let want = reference_pairs("map", step as i64, true);
        let missing: Vec<_> = want.iter().filter(|p| !got.contains(*p)).collect();
        assert!(missing.is_empty(), "step {step}: {missing:?}");
    }
}

#[test]
fn export_into_an_existing_yaml_keeps_its_text_and_adds_what_is_missing() {
    // The fixture's mapping without the MLP rules and with a comment: exporting the MLP pairs puts
    // them back as an `MLP` key; everything else stays as written.
    let full = std::fs::read_to_string(case().join("layer_mapping.yaml")).unwrap();
    let cut = full.replace("MLP:\n  linear_fc1: up_proj\n  linear_fc2: down_proj\n", "");
    assert_ne!(cut, full);
    let pairs: Vec<(String, String)> = reference_pairs("map", 0, true)
        .into_iter()
        .filter(|(n, _)| n.contains(".mlp.linear_fc"))
        .collect();
    assert_eq!(pairs.len(), 8);
    let (nd, bd) = load(0);
    let out = export_mapping(&cut, &nd, &bd, &pairs).unwrap();
    assert!(out.missed.is_empty(), "{:?}", out.missed);
    assert!(out.yaml.starts_with(&cut), "{}", out.yaml);
    assert_eq!(out.added.len(), 2, "{:?}", out.added);
    assert!(out
        .yaml
        .contains("MLP:\n  linear_fc1: up_proj\n  linear_fc2: down_proj\n"));
    // Same matches as the full hand-written mapping.
    assert_eq!(
        matched(&run_with(0, &out.yaml)),
        matched(&run_with(0, &full))
    );

    // A class rule that would contradict an existing one becomes a scoped key with the exact path.
    let odd = vec![(
        "Module.0.module.module.decoder.layers.1.mlp.linear_fc2.RowParallelLinear.forward.0"
            .to_string(),
        "Module.module.model.layers.1.mlp.up_proj.Linear.forward.0".to_string(),
    )];
    let out = export_mapping(&full, &nd, &bd, &odd).unwrap();
    assert!(out.missed.is_empty(), "{:?}", out.missed);
    assert_eq!(out.added.len(), 1);
    assert_eq!(out.added[0].key, "0.module.module.decoder.layers.1.mlp.MLP");
    assert!(out.yaml.starts_with(&full));
    let got = matched(&run_with(0, &out.yaml));
    assert!(got.contains(&odd[0]));
    // Layer 0 keeps the class rule.
    assert!(got.contains(&(
        "Module.0.module.module.decoder.layers.0.mlp.linear_fc2.RowParallelLinear.forward.0"
            .to_string(),
        "Module.module.model.layers.0.mlp.down_proj.Linear.forward.0".to_string(),
    )));
}

/// (NPU name -> Bench name) of the matched NPU nodes of a step in a `.vis.db` the CLI wrote.
fn cli_pairs(yaml: &str, step: i64) -> std::collections::BTreeMap<String, String> {
    let d = std::env::temp_dir().join(format!("probelens_export_cli_{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    let y = d.join("exported.yaml");
    std::fs::write(&y, yaml).unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_probelens"))
        .args(["graph_visualize", "-tp"])
        .arg(case().join("npu"))
        .arg("-gp")
        .arg(case().join("bench"))
        .arg("-lm")
        .arg(&y)
        .arg("-o")
        .arg(d.join("out"))
        .arg("--no-progress")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let db = std::fs::read_dir(d.join("out"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.to_string_lossy().ends_with(".vis.db"))
        .unwrap();
    let conn = rusqlite::Connection::open(&db).unwrap();
    let mut st = conn
        .prepare(
            "SELECT node_name, matched_node_link FROM tb_nodes \
             WHERE data_source = 'NPU' AND step = ?1 AND matched_node_link != '[]'",
        )
        .unwrap();
    let rows: Vec<(String, String)> = st
        .query_map([step], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .map(|r| r.unwrap())
        .collect();
    drop(st);
    drop(conn);
    let _ = std::fs::remove_dir_all(&d);
    rows.into_iter()
        .map(|(n, link)| {
            let link: Vec<String> = serde_json::from_str(&link).unwrap();
            (n, link.last().unwrap().clone())
        })
        .collect()
}

/// Regression (www/NEEDS.md, issue #8 note 1): after *Accept all* on the mix fixture without a
/// mapping, the export's report said 62 of the 200 accepted pairs were not reproduced (e.g.
/// `Torch.cat.0.forward`), yet a run with the merged yaml matched 185 of them: the report looked
/// at the layer-mapping table alone, but a run matches the nodes that are not dump.json entries
/// (construct.json-only APIs of a `mix` dump) by their own name. And API and parameter-gradient
/// pairs gave no rules. The report must say what a re-run matches, and every accepted pair of
/// this fixture can be expressed.
/// The demo's step 0 run without a mapping after *Accept all* (as the page does it), and the pairs
/// the accept made: every NPU node whose partner it changed to a node, by NPU id.
fn accepted_pairs() -> (PairResult, Vec<(String, String)>) {
    let (n, b) = (Dir(case().join("npu")), Dir(case().join("bench")));
    let plan = run::plan(&n, Some(&b)).unwrap();
    let p = &plan.pairs[0];
    let mut res = run::run_pair(
        PairInput::new(
            run::load_rank(&n, &p.npu_dir).unwrap(),
            Some(run::load_rank(&b, p.bench_dir.as_ref().unwrap()).unwrap()),
        ),
        &RunOptions::default(),
    )
    .unwrap();
    let partners = |r: &PairResult| -> Vec<Option<u32>> {
        r.npu
            .graph
            .pre_order()
            .into_iter()
            .map(|id| r.npu.graph.node(id).partner())
            .collect()
    };
    let before = partners(&res);
    probelens::compare::suggest::accept_all(
        &mut res,
        probelens::compare::suggest::DEFAULT_MIN_SCORE,
    );
    let after = partners(&res);
    let ids = res.npu.graph.pre_order();
    let gb = &res.bench.as_ref().unwrap().graph;
    let mut accepted: Vec<(u32, String, String)> = ids
        .iter()
        .zip(before.iter().zip(&after))
        .filter_map(|(&id, (x, y))| match y {
            Some(v) if x != y => Some((
                id,
                res.npu.graph.name(id).to_string(),
                gb.name(*v).to_string(),
            )),
            _ => None,
        })
        .collect();
    accepted.sort();
    let pairs: Vec<(String, String)> = accepted.into_iter().map(|(_, n, b)| (n, b)).collect();
    (res, pairs)
}

#[test]
fn report_of_accepted_suggestions_is_what_a_cli_rerun_matches() {
    let (res, pairs) = accepted_pairs();
    assert!(pairs.len() >= 190, "{} accepted pairs", pairs.len());
    assert!(pairs.contains(&(
        "Torch.cat.0.forward".to_string(),
        "Torch.cat.0.forward".to_string()
    )));

    let out = export_mapping("", &res.npu.dump, &res.bench.as_ref().unwrap().dump, &pairs).unwrap();
    println!("exported yaml ({} rules):\n{}", out.added.len(), out.yaml);
    for m in &out.missed {
        println!("missed: {m:?}");
    }
    // Every pair is in exactly one of the two lists.
    assert_eq!(out.reproduced.len() + out.missed.len(), pairs.len());
    for (n, b) in &pairs {
        let r = out
            .reproduced
            .iter()
            .filter(|x| (&x.0, &x.1) == (n, b))
            .count();
        let m = out.missed.iter().filter(|x| (&x.0, &x.1) == (n, b)).count();
        assert_eq!(r + m, 1, "{n} -> {b}");
    }
    // The report's reproduced set is what the CLI matches with the exported yaml.
    let cli = cli_pairs(&out.yaml, 0);
    let rerun: BTreeSet<(String, String)> = pairs
        .iter()
        .filter(|(n, b)| cli.get(n) == Some(b))
        .cloned()
        .collect();
    let reported: BTreeSet<(String, String)> = out.reproduced.iter().cloned().collect();
    let only_reported: Vec<_> = reported.difference(&rerun).collect();
    let only_rerun: Vec<_> = rerun.difference(&reported).collect();
    assert!(
        only_reported.is_empty() && only_rerun.is_empty(),
        "reported but not matched by the re-run: {only_reported:?}; matched by the re-run but reported missed: {only_rerun:?}"
    );
    assert_eq!(reported.len(), out.reproduced.len());
    // And every accepted pair of the fixture is expressible: the rules include an API's
    // (the SiLU the Bench wraps in `act_fn`), a root-level API's moved to another module, and
    // parameter gradients' (scoped `<path>.<name>`).
    assert!(out.missed.is_empty(), "{:?}", out.missed);
    let lm = LayerMapping::parse("exported.yaml", &out.yaml).unwrap();
    assert_eq!(lm.class_rule("MLP", "silu"), Some("act_fn.silu"));
    assert_eq!(
        lm.class_rule("Float16Module", "module.cross_entropy"),
        Some("cross_entropy")
    );
    assert_eq!(
        lm.class_rule("RowParallelLinear", "linear_fc2"),
        Some("down_proj")
    );

    // What cannot be expressed is reported with its reason, and a run indeed does not match it:
    // a construct.json-only node (no dump.json entry, so matched by its own name only) paired
    // with a Bench node of another name, and two calls at one scope paired out of order.
    let odd = vec![
        (
            "Torch.cat.0.forward".to_string(),
            "Torch.cat.1.forward".to_string(),
        ),
        // Both `__mul__` calls of layer 0's input_layernorm: the NPU's first with the Bench's
        // second (the merged yaml maps the first to the first, `__mul__.2`).
        (
            "Tensor.__mul__.0.forward".to_string(),
            "Tensor.__mul__.3.forward".to_string(),
        ),
    ];
    let out2 = export_mapping(
        &out.yaml,
        &res.npu.dump,
        &res.bench.as_ref().unwrap().dump,
        &odd,
    )
    .unwrap();
    assert!(out2.reproduced.is_empty(), "{:?}", out2.reproduced);
    assert_eq!(out2.missed.len(), 2);
    assert!(
        out2.missed[0].2.contains("construct.json only"),
        "{:?}",
        out2.missed[0]
    );
    assert!(
        out2.missed[1].2.contains("call positions differ"),
        "{:?}",
        out2.missed[1]
    );
    for (n, b) in &odd {
        assert_ne!(cli.get(n), Some(b));
    }
}

/// A yaml with just these rules (keys in order of first appearance, as `merge_yaml` writes them into
/// an empty text).
fn yaml_of(rules: &[probelens::mapping::export::AddedRule]) -> String {
    let mut keys: Vec<&str> = Vec::new();
    for r in rules {
        if !keys.contains(&r.key.as_str()) {
            keys.push(&r.key);
        }
    }
    let q = |s: &str| format!("'{}'", s.replace('\'', "''"));
    let mut out = String::new();
    for k in keys {
        out.push_str(&format!("{}:\n", q(k)));
        for r in rules.iter().filter(|r| r.key == k) {
            out.push_str(&format!("  {}: {}\n", q(&r.src), q(&r.dst)));
        }
    }
    out
}

/// Issue 24, item 12: the exported rules are a set to keep. From the demo's accepted suggestions:
/// no rule twice, no per-layer scoped rules where one class rule reproduces them, no rule a run can
/// do without (removing any one loses a pair a run with all of them matches), and a comment that
/// marks exactly the rules added.
#[test]
fn exported_rules_are_minimal_without_duplicates_and_exactly_marked() {
    let (res, pairs) = accepted_pairs();
    let (nd, bd) = (&res.npu.dump, &res.bench.as_ref().unwrap().dump);
    let out = export_mapping("", nd, bd, &pairs).unwrap();
    println!("exported yaml ({} rules):\n{}", out.added.len(), out.yaml);
    assert!(out.missed.is_empty(), "{:?}", out.missed);
    assert!(!out.added.is_empty());

    // No duplicates: one rule per (key, source).
    let mut seen = BTreeSet::new();
    for r in &out.added {
        assert!(seen.insert((r.key.clone(), r.src.clone())), "twice: {r:?}");
    }
    // A class rule wherever it reproduces per-layer ones: no two scoped rules of one class with the
    // same source and destination (they differ only in the layer's path).
    let mut per_class = BTreeSet::new();
    for r in out
        .added
        .iter()
        .filter(|r| probelens::mapping::is_scoped_key(&r.key))
    {
        let class = r.key.rsplit('.').next().unwrap().to_string();
        assert!(
            per_class.insert((class, r.src.clone(), r.dst.clone())),
            "per-layer rules where one class rule would do: {:?}",
            out.added
        );
    }

    // Exactly marked: the rules under the comment (it counts them) are the added rules, in order.
    let lines: Vec<&str> = out.yaml.lines().collect();
    let marks: Vec<usize> = (0..lines.len())
        .filter(|&i| lines[i].contains("added by probelens"))
        .collect();
    assert_eq!(marks.len(), 1, "one comment: {marks:?}");
    let head = lines[marks[0]];
    assert!(
        head.starts_with("# added by probelens from matched pairs: the "),
        "{head}"
    );
    let rules_below: Vec<&str> = lines[marks[0] + 1..]
        .iter()
        .copied()
        .filter(|l| l.starts_with("  "))
        .collect();
    assert!(
        head.contains(&format!("the {} rule", rules_below.len())),
        "{head} / {} rules below",
        rules_below.len()
    );
    assert_eq!(rules_below.len(), out.added.len());
    assert!(
        lines[..marks[0]].iter().all(|l| l.trim().is_empty()),
        "nothing above the comment in an export from nothing"
    );

    // The rules reproduce what the report says, and none can be removed without losing a pair.
    let with_all = matched(&run_with(0, &yaml_of(&out.added)));
    let kept: Vec<&(String, String)> = out
        .reproduced
        .iter()
        .filter(|p| with_all.contains(*p))
        .collect();
    assert_eq!(
        kept.len(),
        out.reproduced.len(),
        "a run with the rules matches every reported pair"
    );
    for k in 0..out.added.len() {
        let mut fewer = out.added.clone();
        let gone = fewer.remove(k);
        let got = matched(&run_with(0, &yaml_of(&fewer)));
        assert!(
            out.reproduced.iter().any(|p| !got.contains(p)),
            "rule {gone:?} can be removed without losing a pair"
        );
    }
}

/// Exporting into a yaml with the key already present: the added rule goes into that block, marked
/// on its line, and the comment over the appended keys counts only them.
#[test]
fn rules_added_to_existing_keys_are_marked_on_their_line() {
    let full = std::fs::read_to_string(case().join("layer_mapping.yaml")).unwrap();
    let cut = full.replace("  linear_fc2: down_proj\n", "");
    assert_ne!(cut, full);
    let pairs: Vec<(String, String)> = reference_pairs("map", 0, true)
        .into_iter()
        .filter(|(n, _)| n.contains(".mlp.linear_fc2"))
        .collect();
    assert!(!pairs.is_empty());
    let (nd, bd) = load(0);
    let out = export_mapping(&cut, &nd, &bd, &pairs).unwrap();
    assert!(out.missed.is_empty(), "{:?}", out.missed);
    assert_eq!(out.added.len(), 1, "{:?}", out.added);
    assert!(
        out.yaml.contains(
            "MLP:\n  linear_fc1: up_proj\n  linear_fc2: down_proj  # added by probelens\n"
        ),
        "{}",
        out.yaml
    );
    assert!(
        !out.yaml.contains("from matched pairs"),
        "no appended keys, no section comment"
    );
    assert_eq!(out.yaml.replace("  # added by probelens", ""), full);
}
