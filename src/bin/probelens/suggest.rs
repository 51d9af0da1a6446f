//! `probelens suggest`: match suggestions for grey nodes, and the layer mapping that
//! reproduces the accepted ones.

use crate::fs::{load_pair, two_threads, FsFiles};
use probelens::base::error::{Error, Result};
use probelens::base::Files;
use probelens::mapping::LayerMapping;
use probelens::run::{self, PairInput, RunOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

pub(crate) const SUGGEST_USAGE: &str =
    "usage: probelens suggest -tp TARGET_PATH -gp GOLDEN_PATH [-lm [LAYER_MAPPING]] [-fm] \
[--layout-aware] [--min-score S] [--export-yaml OUT.yaml]

Compares like graph_visualize (without writing a db), then lists, for every grey (unmatched) NPU
node, the Bench nodes it most likely corresponds to, best first, with a score in [0, 1] and the
reason (structure, call order, names, statistics up to layout permutation).

  -tp, -gp, -lm, -fm         as for graph_visualize
  --layout-aware             as for graph_visualize
  --min-score S              list candidates scoring at least S (default 0.65)
  --export-yaml OUT.yaml     accept every suggestion of at least S until nothing changes, then
                             write the layer mapping (-lm's yaml, or an empty one, plus the rules
                             that reproduce the accepted pairs) to OUT.yaml";

/// Arguments of `probelens suggest`.
pub(crate) struct SuggestArgs {
    pub(crate) target: PathBuf,
    pub(crate) golden: PathBuf,
    pub(crate) layer_mapping: Option<Option<PathBuf>>,
    pub(crate) fuzzy: bool,
    pub(crate) layout_aware: bool,
    pub(crate) min_score: f64,
    pub(crate) export_yaml: Option<PathBuf>,
}

pub(crate) fn parse_suggest_args(argv: &[String]) -> std::result::Result<SuggestArgs, String> {
    let (mut target, mut golden, mut lm, mut export_yaml) = (None, None, None, None);
    let (mut fuzzy, mut layout_aware) = (false, false);
    let mut min_score = probelens::compare::suggest::DEFAULT_MIN_SCORE;
    let mut i = 0;
    while i < argv.len() {
        let a = argv[i].as_str();
        let (flag, inline) = match a.split_once('=') {
            Some((f, v)) if f.starts_with("--") => (f, Some(v.to_string())),
            _ => (a, None),
        };
        let value = |i: &mut usize| -> std::result::Result<String, String> {
            if let Some(v) = inline.clone() {
                return Ok(v);
            }
            *i += 1;
            argv.get(*i)
                .filter(|v| !v.starts_with('-') || v.len() == 1 || v.parse::<f64>().is_ok())
                .cloned()
                .ok_or_else(|| format!("argument {flag}: expected one argument"))
        };
        match flag {
            "-tp" | "--target_path" => target = Some(PathBuf::from(value(&mut i)?)),
            "-gp" | "--golden_path" => golden = Some(PathBuf::from(value(&mut i)?)),
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
            "--layout-aware" => layout_aware = true,
            "--min-score" => {
                let v = value(&mut i)?;
                min_score = v
                    .parse::<f64>()
                    .ok()
                    .filter(|s| (0.0..=1.0).contains(s))
                    .ok_or_else(|| {
                        format!("argument --min-score: '{v}' is not a number in [0, 1]")
                    })?;
            }
            "--export-yaml" => export_yaml = Some(PathBuf::from(value(&mut i)?)),
            "-h" | "--help" => return Err(String::new()),
            other => return Err(format!("unrecognized argument: {other}")),
        }
        i += 1;
    }
    Ok(SuggestArgs {
        target: target.ok_or("the following arguments are required: -tp/--target_path")?,
        golden: golden.ok_or("the following arguments are required: -gp/--golden_path")?,
        layer_mapping: lm,
        fuzzy,
        layout_aware,
        min_score,
        export_yaml,
    })
}

/// The text of a layer-mapping file (for `suggest`).
pub(crate) fn read_yaml(p: &Path) -> Result<String> {
    if let Ok(m) = std::fs::metadata(p) {
        if m.len() > probelens::base::error::MAX_FILE_BYTES {
            return Err(Error::input(
                p.display().to_string(),
                format!(
                    "the layer mapping is {} bytes; that is no layer mapping",
                    m.len()
                ),
            ));
        }
    }
    let bytes = std::fs::read(p).map_err(|e| {
        Error::input(
            p.display().to_string(),
            format!("cannot read the layer mapping: {e}"),
        )
    })?;
    String::from_utf8(bytes).map_err(|_| {
        Error::input(
            p.display().to_string(),
            "the layer mapping is not UTF-8 text",
        )
    })
}

/// `probelens suggest`: prints the ranked suggestions of every (step, rank) pair; with
/// `--export-yaml`, accepts them to a fixed point and writes the mapping that reproduces them.
pub(crate) fn suggest_cmd(a: &SuggestArgs) -> Result<()> {
    let npu = FsFiles::new(&a.target)?;
    let bench = FsFiles::new(&a.golden)?;
    let plan = run::plan(&npu, Some(&bench as &dyn Files))?;
    let mut yaml_text = String::new();
    let layer_mapping = match &a.layer_mapping {
        None => None,
        Some(None) => Some(LayerMapping::empty()),
        Some(Some(p)) => {
            yaml_text = read_yaml(p)?;
            Some(LayerMapping::parse(&p.display().to_string(), &yaml_text)?)
        }
    };
    let opts = RunOptions {
        layer_mapping,
        fuzzy: a.fuzzy,
        overflow_check: false,
        layout_aware: a.layout_aware,
        join: Some(two_threads),
        defer_verdicts: false,
    };
    let mut out = std::io::stdout().lock();
    let mut accepted_total = 0usize;
    let mut added_total = 0usize;
    let mut missed: Vec<(String, String, String)> = Vec::new();
    for pair in &plan.pairs {
        if pair.bench_dir.is_none() {
            continue;
        }
        let (nd, Some(bd)) = load_pair(&npu, Some(&bench), pair)? else {
            continue;
        };
        let mut res = run::run_pair(PairInput::new(nd, Some(bd)), &opts)?;
        for d in &res.diagnostics {
            eprintln!("probelens: {d}");
        }
        let Some(bs) = res.bench.as_ref() else {
            continue;
        };
        let (gn, gb) = (&res.npu.graph, &bs.graph);
        let reachable = gn.pre_order();
        let grey = reachable
            .iter()
            .filter(|id| gn.node(**id).partner().is_none())
            .count();
        let sug = probelens::compare::suggest::suggest(&res, a.min_score);
        let nodes = {
            let mut v: Vec<u32> = sug.iter().map(|s| s.npu).collect();
            v.dedup();
            v.len()
        };
        let _ = writeln!(
            out,
            "step {} rank {}: {grey} of {} NPU nodes grey; suggestions for {nodes} of them (score >= {})",
            pair.step,
            pair.rank,
            reachable.len(),
            a.min_score
        );
        let mut last = None;
        for s in &sug {
            if last != Some(s.npu) {
                let _ = writeln!(out, "  {}", gn.name(s.npu));
                last = Some(s.npu);
            }
            let _ = writeln!(
                out,
                "    {:.3}  {}  ({})",
                s.score,
                gb.name(s.bench),
                s.reason
            );
        }
        if a.export_yaml.is_some() {
            let acc = probelens::compare::suggest::accept_all(&mut res, a.min_score);
            let Some(bs) = res.bench.as_ref() else {
                continue;
            };
            let names: Vec<(String, String)> = acc
                .iter()
                .map(|(u, v)| {
                    (
                        res.npu.graph.name(*u).to_string(),
                        bs.graph.name(*v).to_string(),
                    )
                })
                .collect();
            let modules = names
                .iter()
                .filter(|(n, _)| n.starts_with("Module.") || n.starts_with("Cell."))
                .count();
            // Every accepted pair, as the page exports them: module, API and parameter-gradient
            // pairs all give rules where msprobe's format can express them.
            let ex = probelens::mapping::export::export_mapping(
                &yaml_text,
                &res.npu.dump,
                &bs.dump,
                &names,
            )?;
            let _ = writeln!(
                out,
                "step {} rank {}: accepted {} pairs ({} modules); {} new rules",
                pair.step,
                pair.rank,
                names.len(),
                modules,
                ex.added.len()
            );
            accepted_total += names.len();
            added_total += ex.added.len();
            missed.extend(ex.missed);
            yaml_text = ex.yaml;
        }
    }
    if let Some(path) = &a.export_yaml {
        std::fs::write(path, &yaml_text)
            .map_err(|e| Error::input(path.display().to_string(), format!("cannot write: {e}")))?;
        let _ = writeln!(
            out,
            "wrote {}: {added_total} rules added for {accepted_total} accepted pairs",
            path.display()
        );
        // The same pairs come back for every step: one line per reason, a few examples each.
        let mut by_why: Vec<(&str, Vec<(&str, &str)>)> = Vec::new();
        for (n, b, why) in &missed {
            let i = match by_why.iter().position(|(w, _)| w == why) {
                Some(i) => i,
                None => {
                    by_why.push((why, Vec::new()));
                    by_why.len() - 1
                }
            };
            let pair = (n.as_str(), b.as_str());
            if !by_why[i].1.contains(&pair) {
                by_why[i].1.push(pair);
            }
        }
        for (why, pairs) in &by_why {
            let _ = writeln!(out, "  {} pairs not reproduced: {why}", pairs.len());
            for (n, b) in pairs.iter().take(3) {
                let _ = writeln!(out, "    {n} -> {b}");
            }
        }
    }
    Ok(())
}

pub(crate) fn suggest_main(argv: &[String]) -> i32 {
    match parse_suggest_args(argv) {
        Ok(a) => match suggest_cmd(&a) {
            Ok(()) => 0,
            Err(e) => {
                eprintln!("probelens: error: {e}");
                1
            }
        },
        Err(msg) if msg.is_empty() => {
            println!("{SUGGEST_USAGE}");
            0
        }
        Err(msg) => {
            eprintln!("{SUGGEST_USAGE}\nprobelens suggest: error: {msg}");
            2
        }
    }
}
