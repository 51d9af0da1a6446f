//! The arguments of `probelens graph_visualize`, as msprobe's (`-tp`, `-gp`, `-o`, ...).

use probelens::run;
use std::path::PathBuf;

pub(crate) const USAGE: &str = "usage: probelens graph_visualize -tp TARGET_PATH [-gp GOLDEN_PATH] -o OUTPUT_PATH \
[-lm [LAYER_MAPPING]] [-fm] [-oc] [-progress_log] [-tensor_log]

Builds (only -tp) or compares (-tp and -gp) msprobe dumps and writes build_<time>.vis.db or
compare_<time>.vis.db, exactly as `msprobe graph_visualize` does.

  -tp, --target_path DIR     NPU (debug side) dump: a rank folder, rank*/proc* folders, or step* folders
  -gp, --golden_path DIR     Bench dump, same layout (absent: build a single graph)
  -o,  --output_path DIR     output folder (created)
  -lm, --layer_mapping [F]   match with a layer mapping yaml (bare -lm: the algorithm without rules)
  -fm, --fuzzy_match         fuzzy matching (disables -lm, as in msprobe)
  -oc, --overflow_check      mark nan/inf overflow levels
  -progress_log              print PROGRESS: {...} lines
  -tensor_log                accepted for compatibility (real-tensor logging)
  --no-progress              no progress bar
  --timing                   print stage timings to stderr
  --no-db                    compare only: build and compare every pair, write nothing
  --layout-aware             beyond msprobe: shapes that are permutations of each other (Megatron
                             [s,b,h] vs HF [b,s,h]) pass the shape check; verdicts from statistics
  --rank_size N [N]          parallel merge: the ranks of each step are merged into one graph per
  --tp N [N], --pp N [N]     parallel group before export/compare (one value per side: NPU [bench]);
  --vpp N [N], --order S [S] msprobe's TP, PP, VPP, TP+PP, TP+PP+DP merges; defaults vpp 1, order tp-cp-ep-dp-pp
  --file_type {db,json}      json: a parallel-merge build writes the merged graphs as dump folders
  --steps LIST, --ranks LIST only these steps / ranks of the dumps (`0,8,16`, `0-63`), as if the
                             dumps held only them
  -j, --jobs N               units (step-rank pairs, or merged steps) at once; default: the cores
                             this process may use / 2 (each unit uses two threads)
  --max-memory SIZE          memory budget of the units running at once (e.g. 16G); default: half of
                             the cgroup's, Slurm's or the machine's memory. A bigger unit runs alone
  --shard I/N                only the I-th (0..N-1) of N slices of the plan, written as a partial db
                             <kind>_shard<I>of<N>.vis.db for `probelens merge-db`

Other commands:
  probelens suggest -tp NPU -gp BENCH [-lm [YAML]] [--min-score S] [--export-yaml OUT.yaml]
                             ranked match suggestions for grey nodes (see `probelens suggest -h`)
  probelens diagnose -tp NPU -gp BENCH [-lm [YAML]] [--top K] [--json]
                             where the two runs part ways (see `probelens diagnose -h`)
  probelens merge-db -o OUT PARTIAL.vis.db...
                             joins the partial dbs of --shard into the db of one run
  probelens version";

pub(crate) struct Args {
    pub(crate) target: PathBuf,
    pub(crate) golden: Option<PathBuf>,
    pub(crate) output: PathBuf,
    pub(crate) layer_mapping: Option<Option<PathBuf>>,
    pub(crate) fuzzy: bool,
    pub(crate) overflow: bool,
    pub(crate) progress_log: bool,
    pub(crate) no_progress: bool,
    pub(crate) timing: bool,
    pub(crate) no_db: bool,
    pub(crate) layout_aware: bool,
    /// `--rank_size/--tp/--pp/--vpp/--order` as given (empty: no parallel merge).
    pub(crate) rank_size: Vec<i64>,
    pub(crate) tp: Vec<i64>,
    pub(crate) pp: Vec<i64>,
    pub(crate) vpp: Vec<i64>,
    pub(crate) order: Vec<String>,
    /// `--file_type json`.
    pub(crate) json: bool,
    /// `--steps`, `--ranks`: the plan restricted to these (None: all).
    pub(crate) steps: Option<Vec<i64>>,
    pub(crate) ranks: Option<Vec<i64>>,
    /// `-j/--jobs` (None: the default of `jobs::Budget`).
    pub(crate) jobs: Option<usize>,
    /// `--max-memory` in bytes (None: the default of `jobs::Budget`).
    pub(crate) max_memory: Option<u64>,
    /// `--shard I/N`: (I, N).
    pub(crate) shard: Option<(usize, usize)>,
}

/// What to run and how: `--steps`, `--ranks`, `-j`, `--max-memory`, `--shard`.
#[derive(Default)]
struct Scope {
    steps: Option<Vec<i64>>,
    ranks: Option<Vec<i64>>,
    jobs: Option<usize>,
    max_memory: Option<u64>,
    shard: Option<(usize, usize)>,
}

impl Scope {
    fn take(&mut self, flag: &str, text: &str) -> std::result::Result<(), String> {
        let r: std::result::Result<(), String> = match flag {
            "--steps" => run::parse_list(text).map(|l| self.steps = Some(l)),
            "--ranks" => run::parse_list(text).map(|l| self.ranks = Some(l)),
            "-j" | "--jobs" => match text.parse::<usize>() {
                Ok(n) if n > 0 => {
                    self.jobs = Some(n);
                    Ok(())
                }
                _ => Err(format!("'{text}' is not a positive integer")),
            },
            "--max-memory" => crate::jobs::parse_size(text).map(|v| self.max_memory = Some(v)),
            _ => parse_shard(text).map(|v| self.shard = Some(v)),
        };
        r.map_err(|e| format!("argument {flag}: {e}"))
    }
}

/// `--shard`'s `I/N`: 0 <= I < N.
pub(crate) fn parse_shard(text: &str) -> std::result::Result<(usize, usize), String> {
    let bad = || format!("'{text}' is not I/N with 0 <= I < N (e.g. 0/4)");
    let (i, n) = text.trim().split_once('/').ok_or_else(bad)?;
    let (i, n): (usize, usize) = (
        i.trim().parse().map_err(|_| bad())?,
        n.trim().parse().map_err(|_| bad())?,
    );
    if n == 0 || i >= n {
        return Err(bad());
    }
    Ok((i, n))
}

/// msprobe's `load_parallel_param` (shared with the page: `merge::load_params`).
pub(crate) fn parallel_params(
    a: &Args,
) -> std::result::Result<Option<Vec<probelens::merge::ParallelParams>>, String> {
    let given = probelens::merge::ParallelArgs {
        rank_size: a.rank_size.clone(),
        tp: a.tp.clone(),
        pp: a.pp.clone(),
        vpp: a.vpp.clone(),
        order: a.order.clone(),
    };
    probelens::merge::load_params(&given, a.golden.is_some())
}

pub(crate) fn parse_args(argv: &[String]) -> std::result::Result<Args, String> {
    let mut target = None;
    let mut golden = None;
    let mut output = None;
    let mut lm = None;
    let (mut fuzzy, mut overflow, mut progress_log, mut no_progress, mut timing, mut no_db) =
        (false, false, false, false, false, false);
    let mut layout_aware = false;
    let (mut rank_size, mut tp, mut pp, mut vpp, mut order) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let mut json = false;
    let mut scope = Scope::default();
    let mut i = 0;
    // argparse's nargs='+': every following argument up to the next option.
    let values = |i: &mut usize,
                  flag: &str,
                  inline: Option<String>|
     -> std::result::Result<Vec<String>, String> {
        let mut out: Vec<String> = inline.into_iter().collect();
        while argv
            .get(*i + 1)
            .is_some_and(|v| !v.starts_with('-') || v.len() == 1)
        {
            *i += 1;
            out.push(argv[*i].clone());
        }
        if out.is_empty() {
            return Err(format!("argument {flag}: expected at least one argument"));
        }
        Ok(out)
    };
    let ints = |flag: &str, v: Vec<String>| -> std::result::Result<Vec<i64>, String> {
        v.iter()
            .map(|x| {
                x.trim()
                    .parse::<i64>()
                    .map_err(|_| format!("argument {flag}: invalid int value: '{x}'"))
            })
            .collect()
    };
    let value = |i: &mut usize, flag: &str| -> std::result::Result<PathBuf, String> {
        *i += 1;
        argv.get(*i)
            .filter(|v| !v.starts_with('-') || v.len() == 1)
            .map(PathBuf::from)
            .ok_or_else(|| format!("argument {flag}: expected one argument"))
    };
    while i < argv.len() {
        let a = argv[i].as_str();
        let (flag, inline) = match a.split_once('=') {
            Some((f, v)) if f.starts_with("--") => (f, Some(v.to_string())),
            _ => (a, None),
        };
        match flag {
            "-tp" | "--target_path" => {
                target = Some(
                    inline
                        .map(PathBuf::from)
                        .map_or_else(|| value(&mut i, flag), Ok)?,
                )
            }
            "-gp" | "--golden_path" => {
                golden = Some(
                    inline
                        .map(PathBuf::from)
                        .map_or_else(|| value(&mut i, flag), Ok)?,
                )
            }
            "-o" | "--output_path" => {
                output = Some(
                    inline
                        .map(PathBuf::from)
                        .map_or_else(|| value(&mut i, flag), Ok)?,
                )
            }
            "-lm" | "--layer_mapping" => {
                if let Some(v) = inline {
                    lm = Some(Some(PathBuf::from(v)));
                } else if argv.get(i + 1).is_some_and(|v| !v.starts_with('-')) {
                    i += 1;
                    lm = Some(Some(PathBuf::from(&argv[i])));
                } else {
                    lm = Some(None);
                }
            }
            "-fm" | "--fuzzy_match" => fuzzy = true,
            "-oc" | "--overflow_check" => overflow = true,
            "-progress_log" | "--is_print_progress_log" => progress_log = true,
            "-tensor_log" | "--is_print_compare_log" => {}
            "--no-progress" => no_progress = true,
            "--timing" => timing = true,
            "--no-db" => no_db = true,
            "--layout-aware" => layout_aware = true,
            "--rank_size" => rank_size = ints(flag, values(&mut i, flag, inline)?)?,
            "--tp" => tp = ints(flag, values(&mut i, flag, inline)?)?,
            "--pp" => pp = ints(flag, values(&mut i, flag, inline)?)?,
            "--vpp" => vpp = ints(flag, values(&mut i, flag, inline)?)?,
            "--order" => order = values(&mut i, flag, inline)?,
            "--file_type" => {
                let v = match inline {
                    Some(v) => v,
                    None => value(&mut i, flag)?.display().to_string(),
                };
                match v.as_str() {
                    "db" => json = false,
                    "json" => json = true,
                    other => {
                        return Err(format!(
                            "argument {flag}: invalid choice: '{other}' (choose from 'db', 'json')"
                        ))
                    }
                }
            }
            "--steps" | "--ranks" | "-j" | "--jobs" | "--max-memory" | "--shard" => {
                let text = inline.map_or_else(|| value(&mut i, flag), |v| Ok(PathBuf::from(v)))?;
                scope.take(flag, &text.display().to_string())?;
            }
            "-h" | "--help" => return Err(String::new()),
            other => return Err(format!("unrecognized argument: {other}")),
        }
        i += 1;
    }
    Ok(Args {
        target: target.ok_or("the following arguments are required: -tp/--target_path")?,
        golden,
        output: output.ok_or("the following arguments are required: -o/--output_path")?,
        layer_mapping: lm,
        fuzzy,
        overflow,
        progress_log,
        no_progress,
        timing,
        no_db,
        layout_aware,
        rank_size,
        tp,
        pp,
        vpp,
        order,
        json,
        steps: scope.steps,
        ranks: scope.ranks,
        jobs: scope.jobs,
        max_memory: scope.max_memory,
        shard: scope.shard,
    })
}
