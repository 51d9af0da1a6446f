//! Golden tests of the distributed post-analysis (msprobe-format.md §6.4, §9.15): the
//! `matched_distributed` cell of every node across the ranks of a run, against msprobe's frozen
//! output for the cases under `tests/golden/cases/`.

use crate::common;

use common::{Tables, DIST_COLS};

/// The distributed layer: matched_distributed of every node.
fn check(case: &str) {
    common::check(case, DIST_COLS, Tables::default());
}

#[test]
fn dist_p2p_collective() {
    check("dist_p2p_collective");
}

#[test]
fn dist_compare() {
    check("dist_compare");
}

#[test]
fn dist_overflow() {
    check("dist_overflow");
}
