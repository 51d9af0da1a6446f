//! A parallel-merge step as the CLI and the page run it: the steps of a parallel run, each
//! side's ranks loaded, merged and compared.

use super::params::{validate, ParallelParams};
use super::{merge, settle_shared, RankGraph};
use crate::base::error::{Error, Result};
use crate::base::Files;
use crate::compare::pair::{PairResult, Side};
use crate::compare::{compare, compare_mode, CompareOptions};
use crate::formats::dump::RankDump;
use crate::graph::items::Mode;
use crate::run::RunOptions;

/// The rank folders of one step of a parallel run, per side.
#[derive(Debug, Clone)]
pub struct ParallelStep {
    pub step: i64,
    /// The step folder ("" without step folders), per side.
    pub npu_dir: String,
    pub bench_dir: Option<String>,
    /// (rank, folder) sorted by rank.
    pub npu: Vec<(i64, String)>,
    pub bench: Vec<(i64, String)>,
}

/// The steps of a parallel run (`_build_graph_ranks_parallel` / `_compare_graph_ranks_parallel`
/// per step): unlike a plain run, each side keeps its own rank folders.
pub fn plan(npu: &dyn Files, bench: Option<&dyn Files>) -> Result<(Vec<ParallelStep>, Vec<i64>)> {
    let p = crate::run::plan(npu, bench)?;
    let mut steps: Vec<ParallelStep> = Vec::new();
    for pair in &p.pairs {
        if steps.iter().any(|s| s.step == pair.step) {
            continue;
        }
        let parent = |d: &str| {
            d.rsplit_once('/')
                .map(|(a, _)| a.to_string())
                .unwrap_or_default()
        };
        let nd = parent(&pair.npu_dir);
        let bd = pair.bench_dir.as_deref().map(parent);
        let npu_ranks = crate::run::rank_folders(npu, &nd)?;
        let bench_ranks = match (bench, &bd) {
            (Some(b), Some(d)) => crate::run::rank_folders(b, d)?,
            _ => Vec::new(),
        };
        steps.push(ParallelStep {
            step: pair.step,
            npu_dir: nd,
            bench_dir: bd,
            npu: npu_ranks,
            bench: bench_ranks,
        });
    }
    Ok((steps, p.step_list))
}

/// One merged result of a step: the rank it is exported as, the rank folders, the pair.
#[derive(Debug)]
pub struct MergedPair {
    pub rank: i64,
    pub npu_dir: String,
    pub bench_dir: Option<String>,
    pub result: PairResult,
}

/// A whole parallel step: validate, build every rank, merge each side, then (with a bench side)
/// compare the i-th merged NPU graph with the i-th merged bench graph, with fuzzy matching and the
/// parallel-merge checker set. `for_db`: the result is for a `.vis.db` (see [`settle_shared`]),
/// not for [`super::json_files`].
pub fn run_step(
    npu: Vec<(i64, String, RankDump)>,
    bench: Option<Vec<(i64, String, RankDump)>>,
    params: &[ParallelParams],
    opts: &RunOptions,
    for_db: bool,
) -> Result<Vec<MergedPair>> {
    let build = |side: Vec<(i64, String, RankDump)>| -> Result<Vec<RankGraph>> {
        side.into_iter()
            .map(|(r, d, dump)| RankGraph::build(r, d, dump, opts.overflow_check))
            .collect()
    };
    let pn = params
        .first()
        .ok_or_else(|| Error::input("--rank_size", "missing parallel parameters"))?;
    let merged_n = merge(build(npu)?, pn)?;
    let Some(bench) = bench else {
        return Ok(merged_n
            .into_iter()
            .map(|mut m| {
                if for_db {
                    settle_shared(&mut m.graph, &m.shared, &m.dump.store);
                }
                let diagnostics = std::mem::take(&mut m.dump.diagnostics);
                MergedPair {
                    rank: m.rank,
                    npu_dir: m.dir,
                    bench_dir: None,
                    result: PairResult {
                        npu: Side {
                            dump: m.dump.into(),
                            graph: m.graph,
                        },
                        bench: None,
                        comparison: None,
                        mode: Mode::Build,
                        micro_steps: m.micro_steps,
                        diagnostics,
                    },
                }
            })
            .collect());
    };
    let pb = params
        .get(1)
        .ok_or_else(|| Error::input("--rank_size", "Parallel params error in compare graph!"))?;
    let merged_b = merge(build(bench)?, pb)?;
    if merged_n.len() != merged_b.len() {
        return Err(Error::input(
            "--rank_size",
            format!(
                "Parallel merge failed because the dp of npu: {} is inconsistent with that of bench: {}!",
                merged_n.len(),
                merged_b.len()
            ),
        ));
    }
    let mut out = Vec::new();
    for (mut n, mut b) in merged_n.into_iter().zip(merged_b) {
        let mut diagnostics = std::mem::take(&mut n.dump.diagnostics);
        diagnostics.append(&mut b.dump.diagnostics);
        let fw = |d: &RankDump| {
            d.framework.ok_or_else(|| {
                Error::input(&d.names.dump, "the dump must be based on the MindSpore or PyTorch framework (no framework key and no torch/mindspore tensor type found)")
            })
        };
        if fw(&n.dump)? != fw(&b.dump)? && opts.layer_mapping.is_none() {
            return Err(Error::input(
                format!("{} / {}", n.dump.names.dump, b.dump.names.dump),
                "the two dumps come from different frameworks; a cross-framework compare needs a layer mapping (-lm)",
            ));
        }
        let mode = compare_mode(&n.dump, &b.dump)?;
        crate::run::compare_framework(&n.dump, &b.dump)?;
        let copts = CompareOptions {
            fuzzy: true,
            layer_mapping: opts.layer_mapping.clone(),
            layout_aware: opts.layout_aware,
            parallel_merge: true,
            join: opts.join,
            // `settle_shared` changes items after the compare: the rows are kept as compared.
            derive_results: false,
            defer_verdicts: false,
        };
        let mut cmp = compare(&mut n.graph, &n.dump, &mut b.graph, &b.dump, mode, &copts);
        let micro_steps = n.graph.paging_by_micro_step(Some(&mut b.graph));
        if for_db {
            settle_shared(&mut n.graph, &n.shared, &n.dump.store);
            settle_shared(&mut b.graph, &b.shared, &b.dump.store);
        }
        // msprobe checks the merged graphs against the main rank's dump again: the nodes of
        // other ranks keep what their own rank's check gave them.
        if opts.overflow_check {
            n.graph.apply_overflow(&n.dump);
            b.graph.apply_overflow(&b.dump);
        }
        diagnostics.append(&mut cmp.diagnostics);
        out.push(MergedPair {
            rank: n.rank,
            npu_dir: n.dir,
            bench_dir: Some(b.dir),
            result: PairResult {
                npu: Side {
                    dump: n.dump.into(),
                    graph: n.graph,
                },
                bench: Some(Side {
                    dump: b.dump.into(),
                    graph: b.graph,
                }),
                comparison: Some(cmp),
                mode,
                micro_steps,
                diagnostics,
            },
        });
    }
    Ok(out)
}

/// Which side a rank folder belongs to, for the loader of [`run_parallel_step`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SideOf {
    Npu,
    Bench,
}

/// A parallel-merge step as the CLI and the page run it: validates each side's parameters
/// against its rank folders (msprobe's messages, the NPU side first), loads every rank through
/// `load` (the CLI parses the folder, the page hands a copy of the dump it keeps parsed), merges
/// and compares ([`run_step`]), then, for real-tensor dumps, compares the tensors read from the
/// main ranks' folders (as msprobe compares the merged graphs with the main ranks' dump paths).
/// One pair per merged group (per DP replica), in msprobe's order.
pub fn run_parallel_step(
    npu: &dyn Files,
    bench: Option<&dyn Files>,
    s: &ParallelStep,
    params: &[ParallelParams],
    opts: &RunOptions,
    for_db: bool,
    load: &mut dyn FnMut(SideOf, &str) -> Result<RankDump>,
) -> Result<Vec<(crate::run::PairPlan, PairResult)>> {
    let pn = params
        .first()
        .ok_or_else(|| Error::input("--rank_size", "missing parallel parameters"))?;
    validate(pn, s.npu.len(), &npu.display(&s.npu_dir), "[NPU]")?;
    let mut load_side =
        |side: SideOf, ranks: &[(i64, String)]| -> Result<Vec<(i64, String, RankDump)>> {
            ranks
                .iter()
                .map(|(r, d)| Ok((*r, d.clone(), load(side, d)?)))
                .collect()
        };
    let nd = load_side(SideOf::Npu, &s.npu)?;
    let bd = match (bench, &s.bench_dir) {
        (Some(b), Some(dir)) => {
            let pb = params.get(1).ok_or_else(|| {
                Error::input("--rank_size", "Parallel params error in compare graph!")
            })?;
            validate(pb, s.bench.len(), &b.display(dir), "[Bench]")?;
            Some(load_side(SideOf::Bench, &s.bench)?)
        }
        _ => None,
    };
    Ok(run_step(nd, bd, params, opts, for_db)?
        .into_iter()
        .map(|m| {
            let mut res = m.result;
            let tensors = match (bench, m.bench_dir.as_deref()) {
                (Some(b), Some(bdir)) => Some(crate::run::TensorFiles {
                    npu,
                    npu_dir: &m.npu_dir,
                    bench: b,
                    bench_dir: bdir,
                }),
                _ => None,
            };
            crate::run::compare_pair_tensors(&mut res, tensors.as_ref());
            (
                crate::run::PairPlan {
                    step: s.step,
                    rank: m.rank,
                    npu_dir: m.npu_dir,
                    bench_dir: m.bench_dir,
                },
                res,
            )
        })
        .collect())
}
