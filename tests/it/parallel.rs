//! Parallel merge (`--rank_size/--tp/--pp/--vpp/--order`): the parameter checks (msprobe's
//! messages), the `--file_type json` export, `--no-db` and the no-parallel merge. The merges
//! themselves (TP, PP, VPP, TP+PP, TP+PP+DP) are diffed against msprobe's references in
//! `tests/it/fidelity.rs` (`parallel_*` fixtures).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn case() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/parallel_tp")
}

fn tmp(name: &str) -> PathBuf {
    let p = std::env::temp_dir().join(format!("probelens-parallel-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&p);
    p
}

fn run(args: &[&str], out: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_probelens"))
        .arg("graph_visualize")
        .args(args)
        .arg("-o")
        .arg(out)
        .arg("--no-progress")
        .current_dir(case())
        .output()
        .unwrap()
}

/// Runs a command that must fail with `code` and a message containing `want`; no db is left.
fn fails(args: &[&str], code: i32, want: &str) {
    use std::sync::atomic::{AtomicUsize, Ordering};
    static N: AtomicUsize = AtomicUsize::new(0);
    let out = tmp(&format!("fail{}", N.fetch_add(1, Ordering::SeqCst)));
    let o = run(args, &out);
    let err = String::from_utf8_lossy(&o.stderr).to_string();
    assert_eq!(o.status.code(), Some(code), "{args:?}: {err}");
    assert!(err.contains(want), "{args:?}: expected {want:?} in {err}");
    let dbs = std::fs::read_dir(&out)
        .map(|d| {
            d.flatten()
                .filter(|e| e.path().to_string_lossy().contains(".vis.db"))
                .count()
        })
        .unwrap_or(0);
    assert_eq!(dbs, 0, "{args:?} left a db");
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn rank_size_must_match_the_rank_folders() {
    fails(
        &["-tp", "npu", "--rank_size", "4", "--tp", "2", "--pp", "1"],
        1,
        "[NPU] The parallel param \"rank_size\" error, you set 4 but expected 2.",
    );
    fails(
        &[
            "-tp",
            "npu",
            "-gp",
            "bench",
            "--rank_size",
            "2",
            "3",
            "--tp",
            "2",
            "1",
            "--pp",
            "1",
            "1",
        ],
        1,
        "[Bench] The parallel param \"rank_size\" error, you set 3 but expected 2.",
    );
}

#[test]
fn tp_and_pp_are_checked() {
    fails(
        &["-tp", "npu", "--rank_size", "2", "--tp", "3", "--pp", "1"],
        1,
        "The parallel param \"tp\" must be less than or equal to \"rank_size\"!",
    );
    fails(
        &["-tp", "npu", "--rank_size", "2", "--tp", "2", "--pp", "2"],
        1,
        "The parallel params \"tp * pp\" must be less than or equal to \"rank_size\"!",
    );
    fails(
        &["-tp", "npu", "--rank_size", "2", "--tp", "0", "--pp", "1"],
        1,
        "must be greater than 0!",
    );
    fails(
        &[
            "-tp",
            "npu",
            "--rank_size",
            "2",
            "--tp",
            "2",
            "--pp",
            "1",
            "--vpp",
            "2",
        ],
        1,
        "When configuring the parallel param \"vpp\", the \"pp\" param must be greater than 1!",
    );
    fails(
        &[
            "-tp",
            "npu",
            "--rank_size",
            "2",
            "--tp",
            "2",
            "--pp",
            "1",
            "--order",
            "TP-DP",
        ],
        1,
        "\"order\"",
    );
}

#[test]
fn parameter_counts_follow_the_task() {
    fails(
        &["-tp", "npu", "--rank_size", "2"],
        1,
        "In the graph merge task, parameters \"tp/pp/rank_size\" is required!",
    );
    fails(
        &["-tp", "npu", "--rank_size", "2", "2", "--tp", "2", "--pp", "1"],
        1,
        "In the graph merge build task, the number of parameters \"rank_size\" to be filled in is either 1!",
    );
    fails(
        &["-tp", "npu", "-gp", "bench", "--rank_size", "2", "--tp", "2", "--pp", "1"],
        1,
        "In the graph merge compare task, the number of parameters \"rank_size\" to be filled in is either 2!",
    );
    fails(
        &["-tp", "npu", "-gp", "bench", "--rank_size", "2", "2", "--tp", "2", "--pp", "1", "1"],
        1,
        "In the graph merge compare task, the number of parameters \"tp/pp/rank_size\" to be filled in is either 2!",
    );
    fails(
        &["-tp", "npu", "--rank_size", "two", "--tp", "2", "--pp", "1"],
        2,
        "invalid int value: 'two'",
    );
    fails(
        &["-tp", "npu", "--rank_size", "--tp", "2", "--pp", "1"],
        2,
        "expected at least one argument",
    );
}

#[test]
fn unsupported_merges_say_so() {
    // A single rank folder: only msprobe's json export refuses it.
    fails(
        &[
            "-tp",
            "npu/rank0",
            "--rank_size",
            "1",
            "--tp",
            "1",
            "--pp",
            "1",
            "--file_type",
            "json",
        ],
        1,
        "must pass in multiple rank data",
    );
}

/// rank_size = tp = pp = 1: only the API collections are merged (`NoParallelMerger`).
#[test]
fn no_parallel_merge_renames_the_api_collections() {
    let src = tmp("one-rank-src");
    std::fs::create_dir_all(src.join("rank0")).unwrap();
    for f in ["dump.json", "construct.json", "stack.json"] {
        std::fs::copy(case().join("npu/rank0").join(f), src.join("rank0").join(f)).unwrap();
    }
    let out = tmp("one-rank-out");
    let o = run(
        &[
            "-tp",
            src.to_str().unwrap(),
            "--rank_size",
            "1",
            "--tp",
            "1",
            "--pp",
            "1",
        ],
        &out,
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let db = std::fs::read_dir(&out)
        .unwrap()
        .flatten()
        .next()
        .unwrap()
        .path();
    let conn = rusqlite::Connection::open(&db).unwrap();
    let rows: Vec<(String, String)> = conn
        .prepare("SELECT node_name, up_node FROM tb_nodes WHERE node_name LIKE 'Apis_Between_Modules%' ORDER BY node_order")
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert!(
        rows.contains(&(
            "Apis_Between_Modules_Rank0.0".into(),
            "Apis_Between_Modules_All_Ranks.0".into()
        )),
        "{rows:?}"
    );
    assert!(
        rows.contains(&(
            "Apis_Between_Modules_All_Ranks.0".into(),
            "DefaultModel".into()
        )),
        "{rows:?}"
    );
    assert!(
        !rows.iter().any(|(n, _)| n == "Apis_Between_Modules.0"),
        "{rows:?}"
    );
    let _ = std::fs::remove_dir_all(&src);
    let _ = std::fs::remove_dir_all(&out);
}

/// `--no-db` merges and compares, prints the counts of each merged graph, writes nothing.
#[test]
fn no_db_prints_the_merged_counts() {
    let out = tmp("no-db");
    let o = run(
        &[
            "-tp",
            "npu",
            "-gp",
            "bench",
            "--rank_size",
            "2",
            "2",
            "--tp",
            "2",
            "2",
            "--pp",
            "1",
            "1",
            "--no-db",
        ],
        &out,
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(
        String::from_utf8_lossy(&o.stdout),
        "step 0 rank 0: NPU 238 nodes, 238 matched, 0 errors\n"
    );
    assert!(!out.exists());
}

/// `--file_type json` (a parallel-merge build): the merged graphs as dump folders, byte for byte
/// msprobe's (`reference_json/<variant>/step*/rank*/*.json.gz`).
#[test]
fn json_export_matches_msprobe() {
    use std::io::Read;
    for (fixture, variant) in [("parallel_tp", "build_tp2"), ("parallel_pp", "build_pp2")] {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures")
            .join(fixture);
        let vdir = dir.join("reference_json").join(variant);
        let cmd = std::fs::read_to_string(vdir.join("cmd.txt")).unwrap();
        let mut words: Vec<String> = cmd.split_whitespace().map(str::to_string).collect();
        let out = tmp(&format!("json-{variant}"));
        let o = words.iter().position(|w| w == "-o").unwrap();
        words[o + 1] = out.display().to_string();
        let res = Command::new(env!("CARGO_BIN_EXE_probelens"))
            .args(&words[1..])
            .current_dir(&dir)
            .output()
            .unwrap();
        assert!(
            res.status.success(),
            "{}",
            String::from_utf8_lossy(&res.stderr)
        );
        let mut expected = Vec::new();
        let mut stack = vec![vdir.clone()];
        while let Some(d) = stack.pop() {
            for e in std::fs::read_dir(&d).unwrap().flatten() {
                let p = e.path();
                if p.is_dir() {
                    stack.push(p);
                } else if p.to_string_lossy().ends_with(".json.gz") {
                    expected.push(p);
                }
            }
        }
        assert_eq!(expected.len(), 3, "{variant}");
        for p in expected {
            let rel = p
                .strip_prefix(&vdir)
                .unwrap()
                .to_string_lossy()
                .trim_end_matches(".gz")
                .to_string();
            let mut want = Vec::new();
            flate2::read::GzDecoder::new(std::fs::File::open(&p).unwrap())
                .read_to_end(&mut want)
                .unwrap();
            let got = std::fs::read(out.join(&rel)).unwrap();
            assert!(got == want, "{variant}/{rel} differs from msprobe's");
        }
        let dbs = std::fs::read_dir(&out)
            .unwrap()
            .flatten()
            .filter(|e| e.path().to_string_lossy().contains(".vis.db"))
            .count();
        assert_eq!(dbs, 0);
        let _ = std::fs::remove_dir_all(&out);
    }
}

/// msprobe's messages for `--file_type json` outside a parallel-merge build.
#[test]
fn json_export_only_for_parallel_builds() {
    fails(
        &[
            "-tp",
            "npu",
            "-gp",
            "bench",
            "--rank_size",
            "2",
            "2",
            "--tp",
            "2",
            "2",
            "--pp",
            "1",
            "1",
            "--file_type",
            "json",
        ],
        1,
        "The --file_type json parameter is not supported in graph comparison mode.",
    );
    fails(
        &["-tp", "npu", "--file_type", "xml"],
        2,
        "invalid choice: 'xml'",
    );
}
