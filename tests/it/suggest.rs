//! Match suggestions: on the Qwen2.5 fixture (Megatron-style NPU vs HF bench) compared with NO
//! layer mapping, accepting every suggestion above the default score recovers the node pairs that
//! msprobe finds with the hand-written layer_mapping.yaml, and contradicts none of them. The
//! accepted module pairs, exported to a yaml, are reproduced by the CLI.

use probelens::compare::pair::PairResult;
use probelens::compare::suggest::{accept_all, suggest, DEFAULT_MIN_SCORE};
use probelens::mapping::export::export_mapping;
use probelens::run::{self, PairInput, RunOptions};
use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};

use crate::common;

use common::DiskFiles as Dir;

fn case() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/qwen_mix_statistics")
}

fn scratch(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("probelens_suggest_{tag}_{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// (NPU name -> Bench name) of every matched NPU node of a step in a `.vis.db`.
fn db_pairs(db: &Path, step: i64) -> BTreeMap<String, String> {
    let conn = rusqlite::Connection::open(db).unwrap();
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
    rows.into_iter()
        .map(|(n, link)| {
            let link: Vec<String> = serde_json::from_str(&link).unwrap();
            (n, link.last().unwrap().clone())
        })
        .collect()
}

/// msprobe's pairs with the hand-written mapping (`reference/map`).
fn truth(step: i64) -> BTreeMap<String, String> {
    let dir = case().join("reference/map");
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
    let d = scratch(&format!("truth{step}"));
    let db = d.join("map.vis.db");
    std::fs::write(&db, raw).unwrap();
    let out = db_pairs(&db, step);
    let _ = std::fs::remove_dir_all(&d);
    out
}

fn load(step: usize) -> PairResult {
    let (n, b) = (Dir(case().join("npu")), Dir(case().join("bench")));
    let plan = run::plan(&n, Some(&b)).unwrap();
    let p = &plan.pairs[step];
    run::run_pair(
        PairInput::new(
            run::load_rank(&n, &p.npu_dir).unwrap(),
            Some(run::load_rank(&b, p.bench_dir.as_ref().unwrap()).unwrap()),
        ),
        &RunOptions::default(),
    )
    .unwrap()
}

fn names(res: &PairResult, pairs: &[(u32, u32)]) -> Vec<(String, String)> {
    let gb = &res.bench.as_ref().unwrap().graph;
    pairs
        .iter()
        .map(|(u, v)| (res.npu.graph.name(*u).to_string(), gb.name(*v).to_string()))
        .collect()
}

fn matched(res: &PairResult) -> BTreeMap<String, String> {
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
fn accepting_suggestions_recovers_msprobes_mapped_pairs_without_contradicting_them() {
    let (mut total, mut found) = (0usize, 0usize);
    let (mut agree, mut contra, mut extra) = (0usize, 0usize, 0usize);
    let mut accepted_step0: Vec<(String, String)> = Vec::new();
    for step in [0usize, 1] {
        let want = truth(step as i64);
        let by_bench: BTreeMap<&String, &String> = want.iter().map(|(n, b)| (b, n)).collect();
        let mut res = load(step);
        let before = matched(&res).len();
        // Suggestions exist and are ranked.
        let sug = suggest(&res, DEFAULT_MIN_SCORE);
        assert!(!sug.is_empty());
        for s in &sug {
            assert!(
                (0.0..=1.0).contains(&s.score) && !s.reason.is_empty(),
                "{s:?}"
            );
        }
        let t = std::time::Instant::now();
        let acc = accept_all(&mut res, DEFAULT_MIN_SCORE);
        let took = t.elapsed();
        let acc = names(&res, &acc);
        for (n, b) in &acc {
            match (want.get(n), by_bench.get(b)) {
                (Some(x), _) if x == b => agree += 1,
                (None, None) => extra += 1,
                _ => {
                    contra += 1;
                    println!(
                        "CONTRADICTS msprobe: {n} -> {b} (msprobe: {:?} / {:?})",
                        want.get(n),
                        by_bench.get(b)
                    );
                }
            }
        }
        let now = matched(&res);
        let hit = want.iter().filter(|(n, b)| now.get(*n) == Some(*b)).count();
        for (n, b) in &want {
            if now.get(n) != Some(b) {
                println!(
                    "step {step}: not recovered: {n} -> {b} (got {:?})",
                    now.get(n)
                );
            }
        }
        println!(
            "step {step}: {before} pairs before, {} suggestions listed, {} accepted in {took:?}; {hit}/{} of msprobe's pairs",
            sug.len(),
            acc.len(),
            want.len()
        );
        total += want.len();
        found += hit;
        if step == 0 {
            accepted_step0 = acc;
        }
    }
    let recall = found as f64 / total as f64;
    let precision = agree as f64 / (agree + contra) as f64;
    println!(
        "recall {found}/{total} = {:.1}%; accepted {} pairs: {agree} as msprobe, {contra} contradicting it, {extra} where msprobe has no pair on either side; precision {:.1}% (vs msprobe), {:.1}% counting the extras as wrong",
        100.0 * recall,
        agree + contra + extra,
        100.0 * precision,
        100.0 * agree as f64 / (agree + contra + extra) as f64,
    );
    assert_eq!(total, 658);
    assert!(recall >= 0.95, "recall {recall}");
    assert_eq!(contra, 0);

    // The accepted module pairs of step 0, exported to a yaml, are reproduced by the CLI.
    let modules: Vec<(String, String)> = accepted_step0
        .into_iter()
        .filter(|(n, _)| n.starts_with("Module."))
        .collect();
    let res = load(0);
    let out = export_mapping(
        "",
        &res.npu.dump,
        &res.bench.as_ref().unwrap().dump,
        &modules,
    )
    .unwrap();
    println!(
        "{} accepted module pairs -> {} rules; not reproducible: {:?}\n{}",
        modules.len(),
        out.added.len(),
        out.missed,
        out.yaml
    );
    let d = scratch("cli");
    let yaml = d.join("exported.yaml");
    std::fs::write(&yaml, &out.yaml).unwrap();
    let status = std::process::Command::new(env!("CARGO_BIN_EXE_probelens"))
        .args(["graph_visualize", "-tp"])
        .arg(case().join("npu"))
        .arg("-gp")
        .arg(case().join("bench"))
        .arg("-lm")
        .arg(&yaml)
        .arg("-o")
        .arg(d.join("out"))
        .arg("--no-progress")
        .status()
        .unwrap();
    assert!(status.success());
    let db = std::fs::read_dir(d.join("out"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.to_string_lossy().ends_with(".vis.db"))
        .unwrap();
    let cli = db_pairs(&db, 0);
    let not_reproduced: Vec<&(String, String)> = modules
        .iter()
        .filter(|(n, b)| cli.get(n) != Some(b))
        .collect();
    // Parameter gradients included: msprobe scopes them as <path>.<name>, which a rule under the
    // module's class renaming the instance name reaches.
    assert!(
        not_reproduced.is_empty(),
        "CLI did not reproduce {not_reproduced:?}"
    );
    // The report says the same.
    assert!(out.missed.is_empty(), "{:?}", out.missed);
    println!(
        "CLI with the exported yaml reproduces {}/{} accepted module pairs",
        modules.len() - not_reproduced.len(),
        modules.len(),
    );
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn cli_suggest_lists_candidates_and_exports_a_mapping() {
    let d = scratch("cli_suggest");
    let yaml = d.join("suggested.yaml");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_probelens"))
        .arg("suggest")
        .arg("-tp")
        .arg(case().join("npu"))
        .arg("-gp")
        .arg(case().join("bench"))
        .args(["--min-score", "0.65", "--export-yaml"])
        .arg(&yaml)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.starts_with("step 0 rank 0: 379 of 517 NPU nodes grey"),
        "{text}"
    );
    assert!(text.contains(
        "  Module.0.module.module.decoder.layers.0.input_layernorm.RMSNorm.forward.0\n    0.9"
    ));
    assert!(text.contains("wrote "), "{text}");
    let y = std::fs::read_to_string(&yaml).unwrap();
    let lm = probelens::mapping::LayerMapping::parse("suggested.yaml", &y).unwrap();
    assert_eq!(lm.class_rule("GPTModel", "decoder.layers"), Some("layers"));
    assert_eq!(
        lm.class_rule("SelfAttention", "linear_proj"),
        Some("o_proj")
    );
    // API pairs give rules too (the Bench wraps SiLU in `act_fn`), as the page exports them.
    assert_eq!(lm.class_rule("MLP", "silu"), Some("act_fn.silu"));
    assert!(
        text.contains("18 rules added for 400 accepted pairs"),
        "{text}"
    );
    // Bad arguments: exit code 2 and the usage.
    let bad = std::process::Command::new(env!("CARGO_BIN_EXE_probelens"))
        .args(["suggest", "-tp", "x", "--min-score", "2"])
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("--min-score"));
    let _ = std::fs::remove_dir_all(&d);
}
