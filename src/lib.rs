//! probelens: find where two training runs of the same network part ways numerically.
//!
//! The crate reproduces msprobe 26.2's `graph_visualize` (hierarchical graph build, node
//! matching, statistics compare, `.vis.db` rows) as a library that does no IO and knows
//! nothing of the web. The native CLI (`src/bin/probelens/`) and the WebAssembly bindings
//! (`src/wasm/`, feature `wasm`) are the only hosts.
//!
//! The folders, in pipeline order:

/// Error, interned names, chunked vector, the host's [`Join`] and the hash map type.
pub mod base;
/// Matching and comparing two graphs: statistics, real tensors, suggestions for unmatched nodes.
pub mod compare;
/// The input files: JSON reader and Python text forms, the rank dump model, overflow scenes, tensors.
pub mod formats;
/// One rank's hierarchical graph and its tensor items.
pub mod graph;
/// Layer mapping (`-lm`): scope trie, scoped keys, export of manual pairs as rules.
pub mod mapping;
/// Parallel merge (`--rank_size/--tp/--pp`) of the ranks of one step.
pub mod merge;
/// A whole run: folder classification and the per-pair pipeline.
pub mod run;
/// Plain DTOs for the page: the run answer, graph columns, node details.
pub mod view;
/// The `.vis.db`: its rows, its schema, and the SQLite page writer.
pub mod visdb;
/// The WebAssembly boundary (feature `wasm`).
#[cfg(feature = "wasm")]
pub mod wasm;

pub use base::error::{Diagnostic, Error, Result};
pub use base::Join;
