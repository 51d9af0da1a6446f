//! Golden tests of the graph layer (msprobe-format.md §1.3, §1.4, §3): tree shape, sibling and
//! post-order, node types, micro steps and stacks of each node, against msprobe's frozen output
//! for the cases under `tests/golden/cases/` (see `tests/it/common.rs`).

use crate::common;

use common::{Tables, GRAPH_COLS, STACK_COLS};

/// The graph layer: tree columns, stack ids, the stack table and tb_config (micro_steps).
fn check(case: &str) {
    let cols: Vec<&str> = GRAPH_COLS.iter().chain(STACK_COLS).copied().collect();
    common::check(
        case,
        &cols,
        Tables {
            stack: true,
            config: true,
            dump_data_dir: false,
        },
    );
}

#[test]
fn graph_sibling_order() {
    check("graph_sibling_order");
}

#[test]
fn graph_backward_parents() {
    check("graph_backward_parents");
}

#[test]
fn graph_backward_stacks() {
    check("graph_backward_stacks");
}

#[test]
fn graph_stack_new_format() {
    check("graph_stack_new_format");
}

#[test]
fn graph_stack_zero_falsy() {
    check("graph_stack_zero_falsy");
}

#[test]
fn graph_apis_between_modules() {
    check("graph_apis_between_modules");
}

#[test]
fn graph_node_types() {
    check("graph_node_types");
}

#[test]
fn graph_parameters_grad() {
    check("graph_parameters_grad");
}

#[test]
fn graph_micro_steps() {
    check("graph_micro_steps");
}

#[test]
fn graph_megatron_micro() {
    check("graph_megatron_micro");
}

#[test]
fn graph_recompute() {
    check("graph_recompute");
}

#[test]
fn graph_megatron_compare() {
    check("graph_megatron_compare");
}

#[test]
fn graph_micro_steps_quirks() {
    check("graph_micro_steps_quirks");
}

#[test]
fn graph_odd_names() {
    check("graph_odd_names");
}

#[test]
fn graph_parameters_grad_detached() {
    check("graph_parameters_grad_detached");
}
