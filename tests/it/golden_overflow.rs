//! Golden tests of the overflow check (`-oc`, msprobe-format.md §3.8): the `overflow_level` of
//! every node (scenes and ignore rules) and `tb_config.overflow_check`, against msprobe's frozen
//! output for the cases under `tests/golden/cases/`.

use crate::common;

use common::{Tables, OVERFLOW_COLS};

/// The overflow layer: overflow_level of every node, and tb_config.
fn check(case: &str) {
    common::check(
        case,
        OVERFLOW_COLS,
        Tables {
            stack: false,
            config: true,
            dump_data_dir: false,
        },
    );
}

#[test]
fn overflow_scenes() {
    check("overflow_scenes");
}

#[test]
fn overflow_ignore_rules() {
    check("overflow_ignore_rules");
}

#[test]
fn overflow_compare() {
    check("overflow_compare");
}
