//! Golden tests of matching (msprobe-format.md §4): which NPU node pairs with which bench node
//! (`matched_node_link` on both sides) and whether a verdict was computed (`precision_index`),
//! against msprobe's frozen output for the cases under `tests/golden/cases/`.

use crate::common;

use common::{Tables, MATCH_COLS};

/// The matching layer: links and the presence/value of precision_index on every node.
fn check(case: &str) {
    common::check(case, MATCH_COLS, Tables::default());
}

#[test]
fn match_default_ancestors() {
    check("match_default_ancestors");
}

#[test]
fn match_collection_shift() {
    check("match_collection_shift");
}

#[test]
fn match_fuzzy() {
    check("match_fuzzy");
}

#[test]
fn match_fuzzy_with_lm() {
    check("match_fuzzy_with_lm");
}

#[test]
fn match_layer_mapping() {
    check("match_layer_mapping");
}

#[test]
fn match_layer_mapping_bare() {
    check("match_layer_mapping_bare");
}

#[test]
fn match_layer_mapping_cell_cross() {
    check("match_layer_mapping_cell_cross");
}

#[test]
fn match_layer_mapping_empty_stack() {
    check("match_layer_mapping_empty_stack");
}

#[test]
fn match_layer_mapping_stack_scope() {
    check("match_layer_mapping_stack_scope");
}

#[test]
fn match_layer_mapping_megatron() {
    check("match_layer_mapping_megatron");
}

#[test]
fn match_cross_framework_no_lm() {
    check("match_cross_framework_no_lm");
}

#[test]
fn match_cross_pt_npu_ms_bench() {
    check("match_cross_pt_npu_ms_bench");
}

#[test]
fn match_layer_mapping_renumber() {
    check("match_layer_mapping_renumber");
}

#[test]
fn match_layer_mapping_dump_keys() {
    check("match_layer_mapping_dump_keys");
}

#[test]
fn match_layer_mapping_bad_scope() {
    check("match_layer_mapping_bad_scope");
}

#[test]
fn match_layer_mapping_bad_values() {
    check("match_layer_mapping_bad_values");
}

#[test]
fn match_layer_mapping_rules() {
    check("match_layer_mapping_rules");
}

#[test]
fn match_fuzzy_detached_partner() {
    check("match_fuzzy_detached_partner");
}

#[test]
fn match_lm_detached_partner() {
    check("match_lm_detached_partner");
}

#[test]
fn match_mindtorch() {
    check("match_mindtorch");
}

#[test]
fn match_mindtorch_bench() {
    check("match_mindtorch_bench");
}

#[test]
fn match_framework_missing() {
    check("match_framework_missing");
}
