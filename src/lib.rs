//! probelens: find where two training runs of the same network part ways numerically.
//!
//! The crate reproduces msprobe 26.2's `graph_visualize` (hierarchical graph build, node
//! matching, statistics compare, `.vis.db` rows) as a library that does no IO and knows
//! nothing of the web. The native CLI (`src/bin/probelens/`) and the WebAssembly bindings
//! (`src/wasm/`, feature `wasm`) are the only hosts.
//!
//! The folders, in pipeline order:
//!
//! - [`base`]: the error type, interned names, the chunked vector, and what the host hands the
//!   core (the `Files` trait, [`Join`], the hash map type).
//! - [`formats`]: the input files: the JSON reader and Python's text forms, the rank dump model
//!   (`RankDump`), overflow scenes, tensors.
//! - [`graph`]: one rank's hierarchical graph (`Graph`) and its tensor items.
//! - [`mapping`]: layer mapping (`-lm`): scope trie, scoped keys, export of pairs as rules.
//! - [`compare`]: matching and comparing two graphs (`Comparison`): statistics, real tensors,
//!   suggestions for unmatched nodes; a pair's result (`PairResult`).
//! - [`visdb`]: the `.vis.db`: its rows (`PairRows`), its schema, the SQLite page `Writer`.
//! - [`run`]: a whole run: folder classification and the per-pair pipeline (`run_pair`).
//! - [`merge`]: parallel merge (`--rank_size/--tp/--pp`) of the ranks of one step.
//! - [`view`]: plain DTOs for the page: the run answer, graph columns, node details.
//! - `wasm` (feature `wasm`): the WebAssembly boundary (`Session`).

pub mod base;
pub mod compare;
pub mod formats;
pub mod graph;
pub mod mapping;
pub mod merge;
pub mod run;
pub mod view;
pub mod visdb;
#[cfg(feature = "wasm")]
pub mod wasm;

pub use base::error::{Diagnostic, Error, Result};
pub use base::Join;
