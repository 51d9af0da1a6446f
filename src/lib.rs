//! probelens: find where two training runs of the same network part ways numerically.
//!
//! The crate reproduces msprobe 26.2's `graph_visualize` (hierarchical graph build, node
//! matching, statistics compare, `.vis.db` rows) as a library that does no IO and knows
//! nothing of the web. The native CLI (`src/bin/probelens.rs`) and the WebAssembly bindings
//! (`src/wasm.rs`, feature `wasm`) are the only hosts.
//!
//! Reading order: [`json`] → [`dump`] → [`items`] → [`graph`] → [`mapping`] → [`compare`] →
//! [`export`] → [`run`] → [`view`].

pub mod compare;
pub mod dump;
pub mod error;
pub mod export;
pub mod graph;
pub mod items;
pub mod json;
pub mod mapping;
pub mod mapping_export;
pub mod merge;
pub mod names;
pub mod overflow;
pub mod pyfmt;
pub mod realdata;
pub mod run;
pub mod suggest;
pub mod tensor;
pub mod view;
#[cfg(feature = "wasm")]
pub mod wasm;

pub use error::{Diagnostic, Error, Result};

/// The core's hash map: foldhash (fast, seeded per process, so crafted names cannot force collisions).
pub type HashMap<K, V> = std::collections::HashMap<K, V, foldhash::fast::RandomState>;
