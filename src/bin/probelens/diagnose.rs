//! `probelens diagnose`: where the two runs part ways, over every step and rank of the plan
//! (`probelens::compare::diagnose`), printed for a person or as one JSON object.

use crate::args::{parallel_params, parse_args, Args};
use crate::fs::{two_threads, FsFiles};
use crate::graph_visualize::{
    plan_units, read_layer_mapping, run_loaded_pair, run_parallel_step, Unit,
};
use probelens::base::error::{Error, Result};
use probelens::base::Files;
use probelens::compare::pair::PairResult;
use probelens::run::{self, Checkers, PairPlan, Plan, RunOptions};
use std::time::Instant;

pub(crate) const DIAGNOSE_USAGE: &str = "usage: probelens diagnose -tp TARGET_PATH -gp GOLDEN_PATH [-lm [LAYER_MAPPING]] [-fm] \
[-oc] [--top K] [--json] [--steps LIST] [--ranks LIST] [--rank_size N [N] --tp N [N] --pp N [N] [--vpp N [N]] [--order S [S]]]

Names the module where the two runs part ways, over every step and rank of the two dumps (the
folder layouts graph_visualize takes). Beside msprobe's verdicts, not instead of them: tensors are
compared by element count and their Max/Min/Mean/Norm (layout-invariant), against the pair's float
noise (set by the lower precision of the two dtypes), and the error is attributed to the node whose
output differs while its inputs agree, forward first, then backward.

  -tp, -gp, -lm, -fm, -oc    as for graph_visualize
  --rank_size ... --order    merge each step's ranks first, as graph_visualize does
  --steps LIST, --ranks LIST only these steps / ranks (`0,8,16`, `0-63`)
  --top K                    list at most K suspects (default 5)
  --json                     print one JSON object: {\"verdict\": \"agree\"|\"diverged\", \"suspects\": [...]}";

/// `probelens diagnose`: [`probelens::compare::diagnose`] over every pair of the plan.
pub(crate) fn diagnose_main(argv: &[String]) -> i32 {
    let mut rest = Vec::new();
    let (mut top, mut json, mut trace) = (5usize, false, false);
    let mut i = 0;
    while i < argv.len() {
        match argv[i].as_str() {
            "--json" => json = true,
            "--trace" => trace = true,
            "--top" => {
                i += 1;
                match argv.get(i).and_then(|v| v.parse::<usize>().ok()) {
                    Some(k) if k > 0 => top = k,
                    _ => {
                        eprintln!("{DIAGNOSE_USAGE}\nprobelens diagnose: error: argument --top: expected a positive integer");
                        return 2;
                    }
                }
            }
            "-o" | "--output_path" | "--no-db" | "--file_type" => {
                eprintln!(
                    "{DIAGNOSE_USAGE}\nprobelens diagnose: error: unrecognized argument: {}",
                    argv[i]
                );
                return 2;
            }
            _ => rest.push(argv[i].clone()),
        }
        i += 1;
    }
    rest.push("-o".into());
    rest.push(".".into());
    let a = match parse_args(&rest) {
        Ok(a) => a,
        Err(msg) if msg.is_empty() => {
            println!("{DIAGNOSE_USAGE}");
            return 0;
        }
        Err(msg) => {
            eprintln!("{DIAGNOSE_USAGE}\nprobelens diagnose: error: {msg}");
            return 2;
        }
    };
    if a.golden.is_none() {
        eprintln!("{DIAGNOSE_USAGE}\nprobelens diagnose: error: the following arguments are required: -gp/--golden_path");
        return 2;
    }
    match diagnose_cmd(&a, top, trace) {
        Ok(d) => {
            if json {
                match serde_json::to_string(&d) {
                    Ok(s) => println!("{s}"),
                    Err(e) => {
                        eprintln!("probelens: error: {e}");
                        return 1;
                    }
                }
            } else {
                println!("{}", d.verdict_line());
                for (k, s) in d.suspects.iter().enumerate() {
                    println!(
                        "{:>2}. step {} rank {} {:<8} {}{}  (score {:.2})\n      {}",
                        k + 1,
                        s.step,
                        s.rank,
                        match s.pass {
                            probelens::compare::diagnose::Pass::Forward => "forward",
                            probelens::compare::diagnose::Pass::Backward => "backward",
                        },
                        s.node,
                        s.bench_node
                            .as_deref()
                            .map(|b| format!("  <->  {b}"))
                            .unwrap_or_default(),
                        s.score,
                        s.why
                    );
                }
            }
            0
        }
        Err(e) => {
            eprintln!("probelens: error: {e}");
            1
        }
    }
}

fn diagnose_cmd(
    a: &Args,
    top: usize,
    trace: bool,
) -> Result<probelens::compare::diagnose::Diagnosis> {
    use probelens::compare::diagnose::{diagnose_pair, Diagnosis};
    let npu = FsFiles::new(&a.target)?;
    let bench = match &a.golden {
        Some(g) => Some(FsFiles::new(g)?),
        None => None,
    };
    let plan: Plan = run::plan(&npu, bench.as_ref().map(|b| b as &dyn Files))?
        .restrict(a.steps.as_deref(), a.ranks.as_deref())?;
    let parallel = parallel_params(a).map_err(|m| Error::input("--rank_size", m))?;
    let opts = RunOptions {
        layer_mapping: read_layer_mapping(a)?,
        fuzzy: a.fuzzy,
        overflow_check: a.overflow,
        layout_aware: a.layout_aware,
        join: Some(two_threads),
        // Only the matches are needed: each pair's verdict rows are not made.
        defer_verdicts: true,
    };
    let units = plan_units(a, &npu, bench.as_ref(), &plan, parallel.is_some())?;
    let mut pairs = Vec::new();
    let mut diagnose = |pair: &PairPlan, res: &PairResult| {
        for d in &res.diagnostics {
            eprintln!("probelens: {d}");
        }
        if let Some(sides) = res.sides() {
            if trace {
                let text = probelens::compare::diagnose::trace_pair(sides);
                eprintln!("== step {} rank {}\n{text}", pair.step, pair.rank);
            }
            let d = diagnose_pair(sides, pair.step, pair.rank, Some(two_threads));
            pairs.push(d);
        }
    };
    for unit in &units {
        match unit {
            Unit::Single(pair) => {
                let checkers = if parallel.is_some() {
                    Checkers::ParallelMerge
                } else {
                    Checkers::Standard
                };
                let (res, _) =
                    run_loaded_pair(&npu, bench.as_ref(), pair, &opts, checkers, Instant::now())?;
                diagnose(pair, &res);
            }
            // plan_units gives merged steps only with the merge's parameters.
            Unit::Step(st) => {
                let Some(params) = &parallel else { continue };
                // A merge keeps its rows (its compare is not deferred).
                let opts = RunOptions {
                    defer_verdicts: false,
                    ..opts.clone()
                };
                for (pair, res) in
                    run_parallel_step(&npu, bench.as_ref(), st, params, &opts, false)?
                {
                    diagnose(&pair, &res);
                }
            }
        }
    }
    Ok(Diagnosis::merge(&pairs, top))
}
