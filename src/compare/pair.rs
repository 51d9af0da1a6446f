//! A built or compared pair, as a run hands it on: each side's dump and graph, and the
//! [`Comparison`] of the two.

use crate::base::error::Diagnostic;
use crate::compare::{Comparison, Sides};
use crate::formats::dump::RankDump;
use crate::graph::items::Mode;
use crate::graph::Graph;
use std::sync::Arc;

/// One side of a finished pair.
#[derive(Debug)]
pub struct Side {
    /// Shared, so that a re-run of the same pair (another mapping or options) reuses the parse.
    pub dump: Arc<RankDump>,
    pub graph: Graph,
}

/// A built or compared pair.
#[derive(Debug)]
pub struct PairResult {
    pub npu: Side,
    pub bench: Option<Side>,
    pub comparison: Option<Comparison>,
    pub mode: Mode,
    pub micro_steps: i64,
    pub diagnostics: Vec<Diagnostic>,
}

impl PairResult {
    /// The two graphs and dumps of a compared pair (None for a build), from which its compare
    /// rows are derived.
    pub fn sides(&self) -> Option<Sides<'_>> {
        let b = self.bench.as_ref()?;
        Some(Sides {
            gn: &self.npu.graph,
            dn: &self.npu.dump,
            gb: &b.graph,
            db: &b.dump,
        })
    }
}
