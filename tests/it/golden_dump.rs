//! Golden tests of the dump layer (msprobe-format.md §1, §3.2, §6.3): how each dump.json entry
//! becomes the `input_data`/`output_data` cells msprobe writes. Inputs and msprobe's frozen output
//! are under `tests/golden/cases/` (see `tests/it/common.rs`).

use crate::common;

use common::{Tables, DATA_COLS};

/// The dump layer: the item cells of every node.
fn check(case: &str) {
    common::check(case, DATA_COLS, Tables::default());
}

#[test]
fn dump_leaf_scalars() {
    check("dump_leaf_scalars");
}

#[test]
fn dump_leaf_torch_types() {
    check("dump_leaf_torch_types");
}

#[test]
fn dump_leaf_nested() {
    check("dump_leaf_nested");
}

#[test]
fn dump_leaf_distributed() {
    check("dump_leaf_distributed");
}

#[test]
fn dump_nan_inf_bigint() {
    check("dump_nan_inf_bigint");
}

#[test]
fn dump_sections_order() {
    check("dump_sections_order");
}

#[test]
fn dump_data_name_keys() {
    check("dump_data_name_keys");
}

#[test]
fn dump_mindspore() {
    check("dump_mindspore");
}

#[test]
fn dump_structure_task() {
    check("dump_structure_task");
}

#[test]
fn dump_entries_not_in_construct() {
    check("dump_entries_not_in_construct");
}

#[test]
fn dump_float_repr() {
    check("dump_float_repr");
}

#[test]
fn dump_non_dict_values() {
    check("dump_non_dict_values");
}
