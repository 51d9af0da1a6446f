//! `probelens diagnose`: where the two runs part ways, over every step and rank of the plan
//! (`probelens::compare::diagnose`), printed for a person or as one JSON object.

use crate::args::{parallel_params, parse_args, Args};
use crate::fs::{two_threads, FsFiles};
use crate::graph_visualize::{
    plan_units, read_layer_mapping, run_loaded_pair, run_parallel_step, unit_bytes, Unit,
};
use crate::jobs::{run_ordered, unit_need, Budget};
use crate::shard::{self, shard_slice};
use probelens::base::error::{Error, Result};
use probelens::base::Files;
use probelens::compare::diagnose::{Diagnosis, PairDiagnosis};
use probelens::compare::pair::PairResult;
use probelens::run::{self, Checkers, PairPlan, Plan, RunOptions};
use std::time::Instant;

/// What a unit of `diagnose` gives: messages for stderr, and its pairs' diagnoses.
type UnitOut = (Vec<String>, Vec<PairDiagnosis>);

pub(crate) const DIAGNOSE_USAGE: &str = "usage: probelens diagnose -tp TARGET_PATH -gp GOLDEN_PATH [-lm [LAYER_MAPPING]] [-fm] \
[-oc] [--top K] [--json] [--steps LIST] [--ranks LIST] [-j N] [--max-memory SIZE] [--shard I/N] [--rank_size N [N] --tp N [N] --pp N [N] [--vpp N [N]] [--order S [S]]]

Names the module where the two runs part ways, over every step and rank of the two dumps (the
folder layouts graph_visualize takes). Beside msprobe's verdicts, not instead of them: tensors are
compared by element count and their Max/Min/Mean/Norm (layout-invariant), against the pair's float
noise (set by the lower precision of the two dtypes), and the error is attributed to the node whose
output differs while its inputs agree, forward first, then backward.

  -tp, -gp, -lm, -fm, -oc    as for graph_visualize
  --rank_size ... --order    merge each step's ranks first, as graph_visualize does
  --steps LIST, --ranks LIST only these steps / ranks (`0,8,16`, `0-63`)
  -j N, --max-memory SIZE    units at once and their memory budget, as for graph_visualize
  --shard I/N --json         only the I-th of N slices of the plan: print this shard's part
  --merge PART.json...       the run's answer from the parts of all N shards (with --top, --json)
  --top K                    list at most K suspects (default 5)
  --json                     print one JSON object: {\"verdict\": \"agree\"|\"diverged\", \"suspects\": [...]}";

/// `probelens diagnose`: [`probelens::compare::diagnose`] over every pair of the plan.
pub(crate) fn diagnose_main(argv: &[String]) -> i32 {
    let mut rest = Vec::new();
    let (mut top, mut json, mut trace) = (5usize, false, false);
    let mut merge: Option<Vec<std::path::PathBuf>> = None;
    let mut i = 0;
    while i < argv.len() {
        match argv[i].as_str() {
            "--json" => json = true,
            "--merge" => {
                let mut parts = Vec::new();
                while argv.get(i + 1).is_some_and(|v| !v.starts_with('-')) {
                    i += 1;
                    parts.push(std::path::PathBuf::from(&argv[i]));
                }
                if parts.is_empty() {
                    eprintln!("{DIAGNOSE_USAGE}\nprobelens diagnose: error: argument --merge: expected at least one PART.json");
                    return 2;
                }
                merge = Some(parts);
            }
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
    if let Some(parts) = merge {
        if let Some(extra) = rest.first() {
            eprintln!("{DIAGNOSE_USAGE}\nprobelens diagnose: error: --merge takes part files, --top and --json only, not {extra}");
            return 2;
        }
        return print_diagnosis(merge_parts(&parts, top), json);
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
    if a.shard.is_some() && !json {
        eprintln!("{DIAGNOSE_USAGE}\nprobelens diagnose: error: --shard writes a part for --merge: add --json");
        return 2;
    }
    if let Some((index, count)) = a.shard {
        return match diagnose_part(&a, top, trace, index, count) {
            Ok(text) => {
                println!("{text}");
                0
            }
            Err(e) => {
                eprintln!("probelens: error: {e}");
                1
            }
        };
    }
    print_diagnosis(
        diagnose_cmd(&a, trace).map(|p| Diagnosis::merge(&p.1, top)),
        json,
    )
}

/// Prints a diagnosis for people, or as one JSON object; the exit code.
fn print_diagnosis(d: Result<Diagnosis>, json: bool) -> i32 {
    match d {
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

/// `diagnose --shard I/N --json`'s part: this shard's pair diagnoses, what the run was, and the
/// shard's own answer (for a look; `--merge` recomputes the run's from every part's pairs).
#[derive(serde::Serialize, serde::Deserialize)]
struct Part {
    probelens_diagnose_part: u32,
    shard: String,
    run: String,
    units: Vec<shard::UnitKey>,
    pairs: Vec<PairDiagnosis>,
}

/// A shard's part as one JSON object: `{"probelens_diagnose_part": 1, "shard": "I/N", ...,
/// "pairs": [...], "verdict": ..., "suspects": [...]}`.
fn diagnose_part(a: &Args, top: usize, trace: bool, index: usize, count: usize) -> Result<String> {
    let (units, pairs) = diagnose_cmd(a, trace)?;
    let own = Diagnosis::merge(&pairs, top);
    let part = Part {
        probelens_diagnose_part: 1,
        shard: format!("{index}/{count}"),
        run: crate::graph_visualize::run_fingerprint(a)?,
        units,
        pairs,
    };
    let mut v = serde_json::to_value(&part).map_err(|e| Error::input("--json", e.to_string()))?;
    let own = serde_json::to_value(&own).map_err(|e| Error::input("--json", e.to_string()))?;
    if let (Some(m), serde_json::Value::Object(o)) = (v.as_object_mut(), own) {
        m.extend(o);
    }
    Ok(v.to_string())
}

/// `diagnose --merge`: the run's diagnosis from the parts of its N shards (each once).
fn merge_parts(paths: &[std::path::PathBuf], top: usize) -> Result<Diagnosis> {
    let mut parts: Vec<Given> = Vec::new();
    for p in paths {
        let shown = p.display().to_string();
        let text = std::fs::read(p).map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => Error::file_not_found(shown.clone()),
            _ => Error::input(shown.clone(), format!("cannot read: {e}")),
        })?;
        let part: Part = serde_json::from_slice(&text).map_err(|e| {
            Error::input(
                shown.clone(),
                format!(
                    "not a part of `diagnose --shard I/N --json` (line {}, column {}: {e})",
                    e.line(),
                    e.column()
                ),
            )
        })?;
        let (index, count) = crate::args::parse_shard(&part.shard)
            .map_err(|e| Error::input(shown.clone(), format!("shard: {e}")))?;
        let new = Given {
            index,
            count,
            path: p,
            part,
        };
        shard::admit(parts.iter().map(Given::piece), &new.piece(), "part")?;
        parts.push(new);
    }
    let count = parts.first().map_or(0, |x| x.count);
    shard::none_missing(
        parts.iter().map(Given::piece),
        "--merge",
        "part",
        &format!("Run those shards again (`--shard I/{count} --json`)"),
    )?;
    parts.sort_by_key(|x| x.index);
    let pairs: Vec<PairDiagnosis> = parts.into_iter().flat_map(|x| x.part.pairs).collect();
    Ok(Diagnosis::merge(&pairs, top))
}

/// A part given to `--merge`, with its shard and file.
struct Given<'a> {
    index: usize,
    count: usize,
    path: &'a std::path::Path,
    part: Part,
}

impl Given<'_> {
    fn piece(&self) -> shard::Piece<'_> {
        shard::Piece {
            index: self.index,
            count: self.count,
            run: &self.part.run,
            units: &self.part.units,
            path: self.path,
        }
    }
}

/// Diagnoses every pair of the plan (of `--shard`'s slice): the whole plan's units and the pairs'
/// diagnoses in plan order.
fn diagnose_cmd(a: &Args, trace: bool) -> Result<(Vec<shard::UnitKey>, Vec<PairDiagnosis>)> {
    use probelens::compare::diagnose::diagnose_pair;
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
    let all_units = plan_units(a, &npu, bench.as_ref(), &plan, parallel.is_some())?;
    let units = shard_slice(&all_units, a.shard);
    // A pair's messages (its diagnostics, with --trace its trace) and its diagnosis.
    let diagnose = |pair: &PairPlan, res: &PairResult, out: &mut UnitOut| {
        for d in &res.diagnostics {
            out.0.push(format!("probelens: {d}"));
        }
        if let Some(sides) = res.sides() {
            if trace {
                let text = probelens::compare::diagnose::trace_pair(sides);
                out.0
                    .push(format!("== step {} rank {}\n{text}", pair.step, pair.rank));
            }
            out.1.push(diagnose_pair(
                sides,
                pair.step,
                pair.rank,
                Some(two_threads),
            ));
        }
    };
    let work = |_: usize, unit: &Unit| -> Result<UnitOut> {
        let mut out: UnitOut = (Vec::new(), Vec::new());
        match unit {
            Unit::Single(pair) => {
                let checkers = if parallel.is_some() {
                    Checkers::ParallelMerge
                } else {
                    Checkers::Standard
                };
                let (res, _) =
                    run_loaded_pair(&npu, bench.as_ref(), pair, &opts, checkers, Instant::now())?;
                diagnose(pair, &res, &mut out);
            }
            // plan_units gives merged steps only with the merge's parameters.
            Unit::Step(st) => {
                let Some(params) = &parallel else {
                    return Ok(out);
                };
                // A merge keeps its rows (its compare is not deferred).
                let opts = RunOptions {
                    defer_verdicts: false,
                    ..opts.clone()
                };
                for (pair, res) in
                    run_parallel_step(&npu, bench.as_ref(), st, params, &opts, false)?
                {
                    diagnose(&pair, &res, &mut out);
                }
            }
        }
        Ok(out)
    };
    let mut pairs = Vec::new();
    let mut consume = |_: usize, (lines, diagnosed): UnitOut| {
        for l in lines {
            eprintln!("{l}");
        }
        pairs.extend(diagnosed);
        Ok(())
    };
    let needs: Vec<u64> = units
        .iter()
        .map(|u| unit_need(unit_bytes(&npu, bench.as_ref(), u)))
        .collect();
    let budget = Budget::new(a.jobs, a.max_memory);
    run_ordered(units, budget, &needs, &work, &mut consume)?;
    Ok((all_units.iter().map(Unit::key).collect(), pairs))
}
