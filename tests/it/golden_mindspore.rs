//! Golden tests of the MindSpore rules (issue #6; msprobe-format.md §1.2.1 cell names and API
//! prefixes, §1.2.3 `mindspore.Tensor` items, §2.4 frameworks, §3.4 recompute without stacks,
//! §3.8 overflow, §4.3 the `Cell` yaml key and MindSpore stack scopes, §5 compare modes): every
//! cell of msprobe's frozen db for the `ms_*` cases under `tests/golden/cases/`.

use crate::common;

/// The MindSpore cases cut across layers: the whole db.
fn check(case: &str) {
    common::check_all(case);
}

#[test]
fn ms_graph_cells() {
    check("ms_graph_cells");
}

#[test]
fn ms_compare_statistics() {
    check("ms_compare_statistics");
}

#[test]
fn ms_graph_recompute() {
    check("ms_graph_recompute");
}

#[test]
fn ms_overflow() {
    check("ms_overflow");
}

#[test]
fn ms_lm_stack_scope() {
    check("ms_lm_stack_scope");
}

#[test]
fn ms_cross_no_lm() {
    check("ms_cross_no_lm");
}

#[test]
fn ms_cross_md5_lm() {
    check("ms_cross_md5_lm");
}

#[test]
fn ms_real_npy() {
    check("ms_real_npy");
}

#[test]
fn ms_lm_renumber() {
    check("ms_lm_renumber");
}

#[test]
fn ms_graph_recompute_framework_keys() {
    check("ms_graph_recompute_framework_keys");
}

#[test]
fn ms_dist() {
    check("ms_dist");
}

/// Not frozen from msprobe (its PyTorch reader imports torch, which is not installed here), so
/// derived from `ms_real_npy` and msprobe's source: without `framework` keys,
/// `get_compare_framework` takes both dumps for pytorch and `run_real_data` reads them with the
/// PyTorch reader, whose `FileChecker` accepts only `.pt` files; each `.npy` row is a read
/// failure, so every metric is `unsupported` (the pair is not cross-framework: both dumps are
/// detected as mindspore by their item types, so no `-lm` is needed).
#[test]
fn ms_real_npy_without_framework_keys_reads_as_pytorch() {
    let metrics = |case: &common::Case| -> Vec<String> {
        let common::Outcome::Db(db) = common::run_case(case) else {
            panic!("{}: no db", case.name);
        };
        let mut out = Vec::new();
        for (id, row) in &db.nodes {
            if !id.starts_with("NPU_") {
                continue;
            }
            for col in ["input_data", "output_data"] {
                let text = row[col].as_text().unwrap();
                let v: serde_json::Value = serde_json::from_str(text).unwrap();
                for (name, item) in v.as_object().unwrap() {
                    if let Some(c) = item.get("Cosine") {
                        out.push(format!("{name}: {c}"));
                    }
                }
            }
        }
        out
    };
    let with_keys = common::load_case("ms_real_npy");
    let read = metrics(&with_keys);
    assert!(read.iter().any(|m| m.ends_with("\"1.0\"")), "{read:?}");
    let mut without = with_keys.clone();
    for (path, body) in without.files.iter_mut() {
        if path.ends_with("dump.json") {
            let text = String::from_utf8(body.clone()).unwrap();
            assert!(text.contains("\"framework\": \"mindspore\", "));
            *body = text
                .replace("\"framework\": \"mindspore\", ", "")
                .into_bytes();
        }
    }
    let unread = metrics(&without);
    assert_eq!(unread.len(), read.len());
    for m in &unread {
        assert!(m.ends_with("\"unsupported\""), "{m}");
    }
}
