//! Golden tests of a run's layout (msprobe-format.md §2.3, §7.1, §8): which step and rank folders
//! become which graphs (`graph_id`, `step`, `rank` of every row), `tb_config` step and rank lists,
//! and which layouts fail, against msprobe's frozen output for the cases under
//! `tests/golden/cases/`.

use crate::common;

use common::Tables;

/// The run layer: the row set with each row's graph, step and rank, and tb_config.
fn check(case: &str) {
    common::check(
        case,
        &["graph_id", "step", "rank", "data_source"],
        Tables {
            stack: false,
            config: true,
            dump_data_dir: false,
        },
    );
}

#[test]
fn run_steps_build() {
    check("run_steps_build");
}

#[test]
fn run_ranks_intersection() {
    check("run_ranks_intersection");
}

#[test]
fn run_bare_rank() {
    check("run_bare_rank");
}

#[test]
fn run_proc_dir() {
    check("run_proc_dir");
}

#[test]
fn run_mixed_dirs() {
    check("run_mixed_dirs");
}

#[test]
fn run_failing_rank() {
    check("run_failing_rank");
}

#[test]
fn run_failing_rank_compare() {
    check("run_failing_rank_compare");
}

#[test]
fn run_steps_compare() {
    check("run_steps_compare");
}
