//! Golden tests of the MindSpore rules (issue #6; msprobe-format.md §1.2.1 cell names and API
//! prefixes, §1.2.3 `mindspore.Tensor` items, §2.4 frameworks, §3.4 recompute without stacks,
//! §3.8 overflow, §4.3 the `Cell` yaml key and MindSpore stack scopes, §5 compare modes): every
//! cell of msprobe's frozen db for the `ms_*` cases under `tests/golden/cases/`.

mod common;

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
