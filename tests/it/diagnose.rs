//! `probelens diagnose` against the planted defects of `tests/fixtures/diagnose` (its README):
//! each case's dumps through the CLI, the answer scored as `score.py` scores it. A suspect hits
//! when its node (or, for a fault on the Bench side, its Bench node) is the defective module or
//! lies below it in that side's construct.json.

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn cases() -> Vec<Value> {
    let p = root().join("tests/fixtures/diagnose/cases.json");
    let text = std::fs::read_to_string(&p).unwrap();
    match serde_json::from_str::<Value>(&text).unwrap() {
        Value::Array(v) => v,
        other => panic!("cases.json is not a list: {other}"),
    }
}

fn run(args: &[String]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_probelens"))
        .arg("diagnose")
        .args(args)
        .current_dir(root())
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn case_args(c: &Value) -> Vec<String> {
    let dir = "tests/fixtures/diagnose";
    let mut a = vec![
        "-tp".to_string(),
        format!("{dir}/{}", c["npu"].as_str().unwrap()),
        "-gp".to_string(),
        format!("{dir}/{}", c["bench"].as_str().unwrap()),
    ];
    if let Some(m) = c["mapping"].as_str() {
        a.push("-lm".into());
        a.push(m.into());
    }
    a
}

/// The rank folder of `step`/`rank` under a dump root (`rank<R>` or a lone `proc*`).
fn rank_dir(run: &Path, step: i64, rank: i64) -> Option<PathBuf> {
    let step_dir = run.join(format!("step{step}"));
    let named = step_dir.join(format!("rank{rank}"));
    if named.is_dir() {
        return Some(named);
    }
    let mut procs: Vec<PathBuf> = std::fs::read_dir(&step_dir)
        .ok()?
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_dir())
        .collect();
    procs.sort();
    (procs.len() == 1).then(|| procs.remove(0))
}

/// Whether `node` is `module` or lies below it: `.module.` in its name or an ancestor's.
fn inside(run: &Path, step: i64, rank: i64, node: &str, module: &str) -> bool {
    let needle = format!(".{module}.");
    let parents: serde_json::Map<String, Value> = rank_dir(run, step, rank)
        .and_then(|d| std::fs::read_to_string(d.join("construct.json")).ok())
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or_default();
    let mut cur = Some(node.to_string());
    for _ in 0..10_000 {
        let Some(n) = cur else { break };
        if format!(".{n}.").contains(&needle) {
            return true;
        }
        cur = parents.get(&n).and_then(|p| p.as_str()).map(str::to_string);
    }
    false
}

fn hits(c: &Value, s: &Value) -> bool {
    let dir = root().join("tests/fixtures/diagnose");
    let (step, rank) = (s["step"].as_i64().unwrap(), s["rank"].as_i64().unwrap());
    let npu_hit = match (c["module"].as_str(), s["node"].as_str()) {
        (Some(m), Some(n)) => inside(&dir.join(c["npu"].as_str().unwrap()), step, rank, n, m),
        _ => false,
    };
    let bench_hit = c["fault_side"] == "bench"
        && match (c["bench_module"].as_str(), s["bench_node"].as_str()) {
            (Some(m), Some(n)) => inside(&dir.join(c["bench"].as_str().unwrap()), step, rank, n, m),
            _ => false,
        };
    npu_hit || bench_hit
}

/// Each case's answer: (case, parsed answer).
fn answers(filter: impl Fn(&Value) -> bool) -> Vec<(Value, Value)> {
    cases()
        .into_iter()
        .filter(|c| filter(c))
        .map(|c| {
            let mut a = case_args(&c);
            a.push("--json".into());
            let (code, out, err) = run(&a);
            assert_eq!(code, 0, "{}: exit {code}: {err}", c["name"]);
            let lines: Vec<&str> = out.lines().filter(|l| !l.trim().is_empty()).collect();
            assert_eq!(
                lines.len(),
                1,
                "{}: one JSON object on stdout: {out}",
                c["name"]
            );
            let v: Value = serde_json::from_str(lines[0]).unwrap();
            (c, v)
        })
        .collect()
}

/// Top-1 hits over the defect cases, and the names of those no top-3 suspect hits.
fn score(list: &[(Value, Value)]) -> (usize, usize, Vec<String>) {
    let (mut n, mut top1) = (0, 0);
    let mut missed = Vec::new();
    for (c, v) in list.iter().filter(|(c, _)| c["expect"] == "diverged") {
        n += 1;
        let s = v["suspects"].as_array().unwrap();
        if s.first().is_some_and(|s| hits(c, s)) {
            top1 += 1;
        }
        if !s.iter().take(3).any(|s| hits(c, s)) {
            missed.push(format!("{}: {}", c["name"], v["suspects"]));
        }
    }
    (n, top1, missed)
}

fn assert_goals(list: &[(Value, Value)]) {
    let (n, top1, missed) = score(list);
    assert!(n > 0);
    assert!(
        top1 * 10 >= n * 9,
        "top-1 hits {top1} of {n} defect pairs (goal 90 %)"
    );
    assert!(missed.is_empty(), "no top-3 suspect hits: {missed:#?}");
    for (c, v) in list {
        let want = c["expect"].as_str().unwrap();
        assert_eq!(v["verdict"], want, "{}: {v}", c["name"]);
    }
}

#[test]
fn public_defects_are_found_and_clean_pairs_agree() {
    let list = answers(|c| c["public"] == true);
    assert_goals(&list);
    assert!(list.iter().any(|(c, _)| c["expect"] == "agree"));
}

#[test]
fn unseen_kinds_are_found() {
    assert_goals(&answers(|c| c["public"] == false));
}

#[test]
fn answer_has_the_documented_shape() {
    let list = answers(|c| c["name"] == "swapped_attn_scale_l1" || c["name"] == "clean_cross");
    assert_eq!(list.len(), 2);
    for (c, v) in &list {
        let obj = v.as_object().unwrap();
        let mut keys: Vec<&str> = obj.keys().map(String::as_str).collect();
        keys.sort_unstable();
        assert_eq!(keys, ["suspects", "verdict"]);
        let suspects = v["suspects"].as_array().unwrap();
        if c["expect"] == "agree" {
            assert!(suspects.is_empty());
            continue;
        }
        assert!(!suspects.is_empty());
        for s in suspects {
            let mut keys: Vec<&str> = s.as_object().unwrap().keys().map(String::as_str).collect();
            keys.sort_unstable();
            assert_eq!(
                keys,
                ["bench_node", "node", "pass", "rank", "score", "step", "why"]
            );
            assert!(s["step"].is_i64() && s["rank"].is_i64() && s["score"].is_number());
            assert!(s["pass"] == "forward" || s["pass"] == "backward");
            assert!(!s["why"].as_str().unwrap().is_empty());
        }
        // The fault is on the Bench side: its node is named beside the NPU counterpart.
        assert!(suspects[0]["bench_node"].is_string(), "{v}");
    }
}

#[test]
fn human_verdict_names_the_top_suspect() {
    let c = cases()
        .into_iter()
        .find(|c| c["name"] == "cross_swiglu_swap_l1")
        .unwrap();
    let (code, out, _) = run(&case_args(&c));
    assert_eq!(code, 0);
    let mut j = case_args(&c);
    j.push("--json".into());
    let v: Value = serde_json::from_str(run(&j).1.trim()).unwrap();
    let first = out.lines().next().unwrap();
    let top = v["suspects"][0]["node"].as_str().unwrap();
    assert!(
        first.contains("part ways") && first.contains(top),
        "{first}"
    );
    let (code, out, _) = run(&{
        let mut a = case_args(&c);
        a.push("--top".into());
        a.push("1".into());
        a.push("--json".into());
        a
    });
    assert_eq!(code, 0);
    let v: Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(v["suspects"].as_array().unwrap().len(), 1);
    let clean = cases()
        .into_iter()
        .find(|c| c["name"] == "clean_cross")
        .unwrap();
    let (code, out, _) = run(&case_args(&clean));
    assert_eq!(code, 0);
    assert!(out.starts_with("The runs agree"), "{out}");
}

#[test]
fn bad_input_fails_naming_the_file() {
    let dir = std::env::temp_dir().join(format!("probelens-diag-bad-{}", std::process::id()));
    let rank = dir.join("npu");
    std::fs::create_dir_all(&rank).unwrap();
    std::fs::write(
        rank.join("dump.json"),
        b"{\"task\": \"statistics\", \"data\": {",
    )
    .unwrap();
    std::fs::write(rank.join("construct.json"), b"{}").unwrap();
    std::fs::write(rank.join("stack.json"), b"{}").unwrap();
    let good = rank_dir(&root().join("tests/fixtures/diagnose/runs/npu_clean"), 0, 0).unwrap();
    let (code, _, err) = run(&[
        "-tp".into(),
        rank.display().to_string(),
        "-gp".into(),
        good.display().to_string(),
    ]);
    assert_ne!(code, 0);
    assert!(err.contains("dump.json"), "{err}");
    let (code, _, err) = run(&["-tp".into(), good.display().to_string()]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("-gp"), "{err}");
    let (code, _, err) = run(&[
        "-tp".into(),
        good.display().to_string(),
        "-gp".into(),
        good.display().to_string(),
        "-lm".into(),
        dir.join("missing.yaml").display().to_string(),
    ]);
    assert_ne!(code, 0);
    assert!(err.contains("missing.yaml"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}
