//! Golden tests of the output layer (msprobe-format.md §6): every cell of `tb_nodes`, `tb_stack`
//! and `tb_config`, against msprobe's frozen output for the cases under `tests/golden/cases/`.
//! Also: every case of every layer compared cell by cell, and every case has a named test.

use crate::common;

use common::{Cell, Outcome, Tables};

/// The output layer: the whole db.
fn check(case: &str) {
    common::check_all(case);
}

#[test]
fn output_str_values() {
    check("output_str_values");
}

#[test]
fn output_md5_xor() {
    check("output_md5_xor");
}

#[test]
fn output_compare_summary_config() {
    check("output_compare_summary_config");
}

#[test]
fn output_micro_steps_bench_unmatched() {
    check("output_micro_steps_bench_unmatched");
}

#[test]
fn output_dump_data_dir() {
    check("output_dump_data_dir");
}

#[test]
fn output_micro_steps_fuzzy() {
    check("output_micro_steps_fuzzy");
}

/// Every case, whatever its layer, equals msprobe's db in every cell.
#[test]
fn every_case_every_cell() {
    let mut failures = Vec::new();
    for name in common::all_cases() {
        let want = common::expected(&name);
        let got = common::run_case(&common::load_case(&name));
        let d = common::diff(
            &want,
            &got,
            &[],
            Tables {
                stack: true,
                config: true,
                dump_data_dir: false,
            },
        );
        if !d.is_empty() {
            failures.push(format!(
                "{name}: {} difference(s), first: {}",
                d.len(),
                d[0]
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Every case through the `probelens` binary (files on disk, arguments, SQLite writing, the
/// distributed post-analysis as the CLI does it) equals msprobe's db in every cell.
#[test]
fn every_case_through_the_cli() {
    every_case_through_the_cli_with(&[], None);
}

/// Every case with its units two at a time (`-j 2`): the same db.
#[test]
fn every_case_with_two_jobs() {
    every_case_through_the_cli_with(&["-j", "2"], None);
}

/// Every case as two shards joined by `merge-db` (the distributed post-analysis runs in the merge,
/// over the ranks of both shards: the `dist_` cases match nodes across them): the same db; a
/// case msprobe fails on fails in a shard.
#[test]
fn every_case_sharded_and_merged() {
    every_case_through_the_cli_with(&[], Some(2));
}

fn every_case_through_the_cli_with(extra: &[&str], shards: Option<usize>) {
    let mut failures = Vec::new();
    for name in common::all_cases() {
        let want = common::expected(&name);
        let got = common::run_cli_how(&common::load_case(&name), extra, shards);
        let d = common::diff(
            &want,
            &got,
            &[],
            Tables {
                stack: true,
                config: true,
                dump_data_dir: true,
            },
        );
        if !d.is_empty() {
            failures.push(format!(
                "{name}: {} difference(s), first: {}",
                d.len(),
                d[0]
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Every case file is checked by a named test of its layer (and has an expectation).
#[test]
fn every_case_has_a_test() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/it");
    let mut sources = String::new();
    for e in std::fs::read_dir(&dir).unwrap().flatten() {
        let n = e.file_name().to_string_lossy().to_string();
        if n.starts_with("golden_") && n.ends_with(".rs") {
            sources.push_str(&std::fs::read_to_string(e.path()).unwrap());
        }
    }
    let mut missing = Vec::new();
    for name in common::all_cases() {
        if !sources.contains(&format!("check(\"{name}\")")) {
            missing.push(format!("{name}: no test"));
        }
        if !common::cases_dir().join(format!("{name}.db.json")).exists() {
            missing.push(format!(
                "{name}: no .db.json (run tests/golden/regen.py {name})"
            ));
        }
    }
    assert!(missing.is_empty(), "{}", missing.join("\n"));
}

/// The comparison itself can fail: changed, missing and extra cells are reported.
#[test]
fn diff_detects_differences() {
    let name = "output_compare_summary_config";
    let want = common::expected(name);
    let Outcome::Db(mut db) = common::run_case(&common::load_case(name)) else {
        panic!("{name}: no db");
    };
    let all = Tables {
        stack: true,
        config: true,
        dump_data_dir: false,
    };
    assert!(common::diff(&want, &Outcome::Db(db.clone()), &[], all).is_empty());
    let id = "NPU_0_0_Functional.linear.0.forward";
    db.nodes
        .get_mut(id)
        .unwrap()
        .insert("precision_index".into(), Cell::Real(0.5));
    db.stacks.pop_first();
    db.config
        .get_mut("1")
        .unwrap()
        .insert("micro_steps".into(), Cell::Int(7));
    let d = common::diff(&want, &Outcome::Db(db.clone()), &[], all);
    assert_eq!(d.len(), 3, "{d:#?}");
    // A layer check only sees its columns.
    let d = common::diff(&want, &Outcome::Db(db), &["input_data"], Tables::default());
    assert!(d.is_empty(), "{d:#?}");
    // An error on one side only is a difference.
    let d = common::diff(&want, &Outcome::Error("x".into()), &[], all);
    assert_eq!(d.len(), 1);
}
