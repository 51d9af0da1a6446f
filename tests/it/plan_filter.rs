//! `--steps` and `--ranks`: the plan restricted to the listed steps and ranks, as if the dumps
//! held only them (issue 25's first step): the same rows for what is kept, nothing else.

use rusqlite::Connection;
use std::path::{Path, PathBuf};
use std::process::Command;

fn fixture() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/qwen_two_ranks")
}

/// Runs `graph_visualize` on the two-rank fixture with `extra`; the db written.
fn db(tag: &str, extra: &[&str]) -> PathBuf {
    let out = std::env::temp_dir().join(format!("probelens-plan-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out);
    let st = Command::new(env!("CARGO_BIN_EXE_probelens"))
        .args([
            "graph_visualize",
            "-tp",
            "npu",
            "-gp",
            "bench",
            "-lm",
            "layer_mapping.yaml",
        ])
        .args(["-o", &out.display().to_string(), "--no-progress"])
        .args(extra)
        .current_dir(fixture())
        .output()
        .unwrap();
    assert!(
        st.status.success(),
        "{}",
        String::from_utf8_lossy(&st.stderr)
    );
    std::fs::read_dir(&out)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|x| x == "db"))
        .unwrap()
}

/// (step, rank, node_name, precision_index, matched_node_link) of every tb_nodes row, sorted.
fn nodes(p: &Path) -> Vec<(i64, i64, String, String, String)> {
    let c = Connection::open(p).unwrap();
    let mut s = c
        .prepare("SELECT step, rank, node_name, CAST(precision_index AS TEXT), matched_node_link FROM tb_nodes")
        .unwrap();
    let mut v: Vec<_> = s
        .query_map([], |r| {
            Ok((
                r.get::<_, i64>(0)?,
                r.get::<_, i64>(1)?,
                r.get::<_, String>(2)?,
                r.get::<_, Option<String>>(3)?.unwrap_or_default(),
                r.get::<_, Option<String>>(4)?.unwrap_or_default(),
            ))
        })
        .unwrap()
        .map(Result::unwrap)
        .collect();
    v.sort();
    v
}

#[test]
fn steps_and_ranks_keep_the_rows_of_what_they_list() {
    let all = nodes(&db("all", &[]));
    let only = nodes(&db("r1s1", &["--ranks", "1", "--steps", "1"]));
    assert!(!only.is_empty());
    assert!(only.iter().all(|r| r.0 == 1 && r.1 == 1));
    let want: Vec<_> = all
        .iter()
        .filter(|r| r.0 == 1 && r.1 == 1)
        .cloned()
        .collect();
    assert_eq!(only, want);
    // A range and a list read alike.
    let both = nodes(&db("r01", &["--ranks", "0-1"]));
    assert_eq!(both, all);
}

#[test]
fn a_list_of_nothing_in_the_dumps_is_an_error_naming_the_flag() {
    let out = Command::new(env!("CARGO_BIN_EXE_probelens"))
        .args(["diagnose", "-tp", "npu", "-gp", "bench", "--ranks", "7,9"])
        .current_dir(fixture())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--ranks") && err.contains("[0, 1]"), "{err}");
    let out = Command::new(env!("CARGO_BIN_EXE_probelens"))
        .args([
            "graph_visualize",
            "-tp",
            "npu",
            "-o",
            "/tmp/x",
            "--steps",
            "3-1",
        ])
        .current_dir(fixture())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("argument --steps"));
}
