//! Golden tests of the compare layer (msprobe-format.md §5): the compare columns written into the
//! NPU items (`input_data`/`output_data`) and each node's `precision_index`, against msprobe's
//! frozen output for the cases under `tests/golden/cases/`.

use crate::common;

use common::{Tables, COMPARE_COLS};

/// The compare layer: item cells with their compare columns, and precision_index.
fn check(case: &str) {
    common::check(case, COMPARE_COLS, Tables::default());
}

#[test]
fn compare_rel_err_strings() {
    check("compare_rel_err_strings");
}

#[test]
fn compare_positional_pairing() {
    check("compare_positional_pairing");
}

#[test]
fn compare_checkers_summary() {
    check("compare_checkers_summary");
}

#[test]
fn compare_md5() {
    check("compare_md5");
}

#[test]
fn compare_ignore_lists() {
    check("compare_ignore_lists");
}

#[test]
fn compare_collection_max() {
    check("compare_collection_max");
}

#[test]
fn compare_structure_mode() {
    check("compare_structure_mode");
}

#[test]
fn compare_task_mismatch() {
    check("compare_task_mismatch");
}

#[test]
fn compare_md5_mixed() {
    check("compare_md5_mixed");
}

#[test]
fn compare_odd_values() {
    check("compare_odd_values");
}

#[test]
fn compare_distributed_items() {
    check("compare_distributed_items");
}

#[test]
fn compare_distributed_items_md5() {
    check("compare_distributed_items_md5");
}

#[test]
fn compare_scalar_params() {
    check("compare_scalar_params");
}

#[test]
fn compare_null_items() {
    check("compare_null_items");
}
