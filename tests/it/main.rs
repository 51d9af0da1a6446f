//! The integration tests, as one test binary (one link instead of one per file). Each module is
//! one subject; `common` holds the golden tests' pipeline, `tidy` the architecture's rules.
//! `tests/web.rs` (wasm32, in Chromium) stays a binary of its own.
//!
//! Run one subject with its module path: `cargo test --profile ci --test it fidelity::`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "../../fuzz/src/lib.rs"]
mod bodies;
#[path = "../columns_layout/mod.rs"]
mod columns_layout;
mod common;

mod bad_inputs;
mod columns;
mod diagnose;
mod export_yaml;
mod fidelity;
mod fuzz_bodies;
mod golden_compare;
mod golden_dist;
mod golden_dump;
mod golden_graph;
mod golden_match;
mod golden_mindspore;
mod golden_output;
mod golden_overflow;
mod golden_run;
mod layout_aware;
mod manual;
mod parallel;
mod plan_filter;
mod properties;
mod real_tensor;
mod scoped;
mod shards;
mod streaming;
mod suggest;
mod templates;
mod tidy;
