//! A whole `graph_visualize` run: which folders hold which step and rank (msprobe's directory
//! classification), and the per-pair pipeline build → compare → paging → overflow check.
//!
//! Files are reached through the [`Files`] trait, so the core stays free of IO: the CLI
//! implements it over the file system, the page over the files the user dropped.
//!
//! [`run_pair`] takes a [`PairInput`]: the two parsed sides, each side's [`Prepared`] work (its
//! graph and layer-mapping part, which need that side's dump alone: a host that parses the sides
//! side by side makes it as soon as a side is parsed; one made of another dump than the pair's,
//! compared by address, is made again) and the checker set.

use crate::base::error::{Diagnostic, Error, Result};
use crate::base::{join_path, Files};
use crate::compare::pair::{PairResult, Side};
use crate::compare::{compare_mapped, compare_mode, layer_mapping_of_sides, CompareOptions};
use crate::formats::dump::{FileNames, RankDump, RankParser};
use crate::graph::items::Mode;
use crate::graph::Graph;
use crate::mapping::{LayerMapping, MappingSide};
use std::sync::Arc;

/// msprobe's classification of a dump root.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    Files,
    Ranks,
    Steps,
}

/// `check_directory_content`.
pub fn classify(f: &dyn Files, dir: &str) -> Result<Kind> {
    let mut entries = f.list(dir)?;
    if entries.is_empty() {
        return Err(Error::input(f.display(dir), "the folder is empty"));
    }
    entries.sort();
    if entries.iter().any(|(n, _)| n == "dump_tensor_data") {
        return Ok(Kind::Files);
    }
    if entries.iter().all(|(_, d)| !d) {
        return Ok(Kind::Files);
    }
    if (entries.len() == 1 && entries[0].0 == "rank") || entries[0].0.starts_with("proc") {
        return Ok(Kind::Ranks);
    }
    let dirs: Vec<&str> = entries
        .iter()
        .filter(|(_, d)| *d)
        .map(|(n, _)| n.as_str())
        .collect();
    let is_num = |s: &str| !s.is_empty() && s.chars().all(|c| c.is_ascii_digit());
    if dirs
        .iter()
        .all(|n| n.strip_prefix("rank").is_some_and(is_num))
    {
        return Ok(Kind::Ranks);
    }
    if dirs
        .iter()
        .all(|n| n.strip_prefix("step").is_some_and(is_num))
    {
        return Ok(Kind::Steps);
    }
    Err(Error::input(
        f.display(dir),
        "the folder must hold dump.json, construct.json and stack.json, or only rank<N> (or one proc<PID>) folders, or only step<N> folders",
    ))
}

fn prefixed(f: &dyn Files, dir: &str, prefix: &str, skip_wrong: bool) -> Result<Vec<String>> {
    let mut out = Vec::new();
    let mut entries = f.list(dir)?;
    entries.sort();
    for (name, _) in entries {
        let ok = match name.strip_prefix(prefix) {
            Some("") => true,
            Some(rest) => {
                rest == "0" || (!rest.starts_with('0') && rest.chars().all(|c| c.is_ascii_digit()))
            }
            None => false,
        };
        if ok {
            out.push(name);
        } else if !skip_wrong {
            return Err(Error::input(
                f.display(&join_path(dir, &name)),
                format!("'{name}' is not in the format of dump output (expected {prefix}<N>); remove it and try again"),
            ));
        }
    }
    Ok(out)
}

fn number_of(name: &str) -> i64 {
    name.get(4..).and_then(|s| s.parse().ok()).unwrap_or(0)
}

fn sort_numbered(v: &mut [String]) {
    v.sort_by_key(|s| number_of(s));
}

fn find_proc_dir(f: &dyn Files, dir: &str) -> Result<String> {
    let procs: Vec<String> = f
        .list(dir)?
        .into_iter()
        .filter(|(n, d)| {
            *d && n.starts_with("proc")
                && !n[4..].is_empty()
                && n[4..].chars().all(|c| c.is_ascii_digit())
        })
        .map(|(n, _)| n)
        .collect();
    match procs.len() {
        1 => Ok(procs.into_iter().next().unwrap_or_default()),
        0 => Err(Error::input(
            f.display(dir),
            "no rank<N> or proc<PID> folder found",
        )),
        _ => Err(Error::input(
            f.display(dir),
            "more than one proc<PID> folder; expected exactly one",
        )),
    }
}

/// The rank folders of `dir` as (rank, path), sorted by rank; without any, its one `proc<PID>`
/// folder (`check_and_return_dir_contents(dir, 'rank', skip_wrong_dir=True)`, `find_proc_dir`).
pub fn rank_folders(f: &dyn Files, dir: &str) -> Result<Vec<(i64, String)>> {
    let mut r = prefixed(f, dir, "rank", true)?;
    sort_numbered(&mut r);
    if r.is_empty() {
        r = vec![find_proc_dir(f, dir)?];
    }
    Ok(r.into_iter()
        .map(|n| (step_or_rank_int(&n), join_path(dir, &n)))
        .collect())
}

/// `get_step_or_rank_int`.
fn step_or_rank_int(name: &str) -> i64 {
    if name == "rank" || name == "step" || name.starts_with("proc") {
        0
    } else {
        number_of(name)
    }
}

/// One (step, rank) pair to build or compare.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct PairPlan {
    pub step: i64,
    pub rank: i64,
    pub npu_dir: String,
    pub bench_dir: Option<String>,
}

/// All pairs of a run, in export order.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Plan {
    pub kind: Kind,
    pub pairs: Vec<PairPlan>,
    pub step_list: Vec<i64>,
    /// The rank list of each step (tb_config takes the first exported one).
    pub rank_lists: Vec<Vec<i64>>,
}

impl Plan {
    pub fn rank_list(&self) -> Vec<i64> {
        self.rank_lists.first().cloned().unwrap_or_else(|| vec![0])
    }

    /// The plan restricted to the steps and ranks listed (None: all), as if the dumps held only
    /// those; an error names the flag when nothing of a list is in the dumps.
    pub fn restrict(mut self, steps: Option<&[i64]>, ranks: Option<&[i64]>) -> Result<Plan> {
        let keep = |list: Option<&[i64]>, x: i64| list.is_none_or(|l| l.contains(&x));
        for (flag, list, have) in [
            (
                "--steps",
                steps,
                self.pairs.iter().map(|p| p.step).collect::<Vec<_>>(),
            ),
            (
                "--ranks",
                ranks,
                self.pairs.iter().map(|p| p.rank).collect(),
            ),
        ] {
            if let Some(l) = list {
                if !have.iter().any(|x| l.contains(x)) {
                    let mut have = have;
                    have.sort_unstable();
                    have.dedup();
                    return Err(Error::input(
                        flag,
                        format!("none of {l:?} is in the dumps, which hold {have:?}"),
                    ));
                }
            }
        }
        self.pairs
            .retain(|p| keep(steps, p.step) && keep(ranks, p.rank));
        let mut step_list = Vec::new();
        let mut rank_lists = Vec::new();
        for (s, r) in self.step_list.iter().zip(self.rank_lists.iter()) {
            if keep(steps, *s) {
                step_list.push(*s);
                rank_lists.push(r.iter().copied().filter(|x| keep(ranks, *x)).collect());
            }
        }
        self.step_list = step_list;
        self.rank_lists = rank_lists;
        Ok(self)
    }
}

/// A list of steps or ranks as typed (`0,8,16`, `0-63`, `0-3,8`): the numbers in order, once.
pub fn parse_list(text: &str) -> std::result::Result<Vec<i64>, String> {
    let mut out: Vec<i64> = Vec::new();
    for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let num = |s: &str| {
            s.trim()
                .parse::<i64>()
                .ok()
                .filter(|n| *n >= 0)
                .ok_or_else(|| format!("'{s}' is not a step or rank number"))
        };
        let (a, b) = match part.split_once('-') {
            Some((a, b)) => (num(a)?, num(b)?),
            None => (num(part)?, num(part)?),
        };
        if b < a || b - a > 1_000_000 {
            return Err(format!("'{part}' is not a range from low to high"));
        }
        for x in a..=b {
            if !out.contains(&x) {
                out.push(x);
            }
        }
    }
    if out.is_empty() {
        return Err(format!("'{text}' lists no step or rank"));
    }
    Ok(out)
}

fn rank_dirs(
    n: &dyn Files,
    nd: &str,
    b: Option<(&dyn Files, &str)>,
) -> Result<Vec<(String, Option<String>)>> {
    let mut rn = prefixed(n, nd, "rank", true)?;
    sort_numbered(&mut rn);
    match b {
        None => {
            if rn.is_empty() {
                rn = vec![find_proc_dir(n, nd)?];
            }
            Ok(rn.into_iter().map(|r| (join_path(nd, &r), None)).collect())
        }
        Some((bf, bd)) => {
            let mut rb = prefixed(bf, bd, "rank", true)?;
            sort_numbered(&mut rb);
            if rn.is_empty() && rb.is_empty() {
                let pn = find_proc_dir(n, nd)?;
                let pb = find_proc_dir(bf, bd)?;
                return Ok(vec![(join_path(nd, &pn), Some(join_path(bd, &pb)))]);
            }
            if rn != rb {
                let mut inter: Vec<String> =
                    rn.iter().filter(|r| rb.contains(r)).cloned().collect();
                sort_numbered(&mut inter);
                if inter.is_empty() {
                    return Err(Error::input(
                        format!("{} / {}", n.display(nd), bf.display(bd)),
                        "the ranks of the two runs are completely different, unable to match the ranks",
                    ));
                }
                rn = inter;
            }
            Ok(rn
                .into_iter()
                .map(|r| (join_path(nd, &r), Some(join_path(bd, &r))))
                .collect())
        }
    }
}

/// Plans a build (`bench` None) or compare run over two dump roots.
pub fn plan(npu: &dyn Files, bench: Option<&dyn Files>) -> Result<Plan> {
    let kn = classify(npu, "")?;
    if let Some(b) = bench {
        let kb = classify(b, "")?;
        if kn != kb {
            return Err(Error::input(
                format!("{} / {}", npu.display(""), b.display("")),
                format!("the directory structures of the NPU and Bench dumps are inconsistent ({kn:?} vs {kb:?})"),
            ));
        }
    }
    let mut pairs = Vec::new();
    let mut rank_lists = Vec::new();
    let mut step_list = vec![0];
    match kn {
        Kind::Files => {
            pairs.push(PairPlan {
                step: 0,
                rank: 0,
                npu_dir: String::new(),
                bench_dir: bench.map(|_| String::new()),
            });
            rank_lists.push(vec![0]);
        }
        Kind::Ranks => {
            let dirs = rank_dirs(npu, "", bench.map(|b| (b, "")))?;
            rank_lists.push(dirs.iter().map(|(d, _)| step_or_rank_int(d)).collect());
            for (nd, bd) in dirs {
                pairs.push(PairPlan {
                    step: 0,
                    rank: step_or_rank_int(&nd),
                    npu_dir: nd,
                    bench_dir: bd,
                });
            }
        }
        Kind::Steps => {
            let steps: Vec<String> = match bench {
                None => {
                    let mut s = prefixed(npu, "", "step", false)?;
                    s.sort();
                    s
                }
                Some(b) => {
                    let mut sn = prefixed(npu, "", "step", true)?;
                    let mut sb = prefixed(b, "", "step", true)?;
                    sort_numbered(&mut sn);
                    sort_numbered(&mut sb);
                    if sn.is_empty() {
                        return Err(Error::input(npu.display(""), "cannot find step<N> folders"));
                    }
                    if sn != sb {
                        let inter: Vec<String> =
                            sn.iter().filter(|s| sb.contains(s)).cloned().collect();
                        if inter.is_empty() {
                            return Err(Error::input(
                                format!("{} / {}", npu.display(""), b.display("")),
                                "the two runs have no step in common",
                            ));
                        }
                        inter
                    } else {
                        sn
                    }
                }
            };
            step_list = steps.iter().map(|s| step_or_rank_int(s)).collect();
            step_list.sort_unstable();
            for s in &steps {
                let dirs = rank_dirs(npu, s, bench.map(|b| (b, s.as_str())))?;
                rank_lists.push(
                    dirs.iter()
                        .map(|(d, _)| step_or_rank_int(d.rsplit('/').next().unwrap_or("")))
                        .collect(),
                );
                for (nd, bd) in dirs {
                    pairs.push(PairPlan {
                        step: step_or_rank_int(s),
                        rank: step_or_rank_int(nd.rsplit('/').next().unwrap_or("")),
                        npu_dir: nd,
                        bench_dir: bd,
                    });
                }
            }
        }
    }
    Ok(Plan {
        kind: kn,
        pairs,
        step_list,
        rank_lists,
    })
}

/// Reads the three files of a rank folder. construct.json and dump.json are streamed through the
/// parser ([`Files::read_chunks`]): they are never held whole (a bad construct.json is read again
/// whole for its message).
pub fn load_rank(f: &dyn Files, dir: &str) -> Result<RankDump> {
    let names = FileNames {
        dump: f.display(&join_path(dir, "dump.json")),
        construct: f.display(&join_path(dir, "construct.json")),
        stack: f.display(&join_path(dir, "stack.json")),
    };
    let (c, d, s) = (
        join_path(dir, "construct.json"),
        join_path(dir, "dump.json"),
        join_path(dir, "stack.json"),
    );
    // A missing or unreadable file is reported before any parse error (construct, dump, stack).
    f.size(&c)?;
    let dump_size = f.size(&d)?;
    let stack_size = f.size(&s)?;
    let mut p = RankParser::new(names, dump_size, stack_size)?;
    // construct.json in chunks too; read again whole only for the message of a bad one (the
    // chunks stop where it is found bad).
    let mut bad = false;
    let read = f.read_chunks(&c, &mut |chunk| {
        bad = !p.construct_chunk(chunk);
        match bad {
            false => Ok(()),
            true => Err(Error::input(&c, "stop")),
        }
    });
    match read {
        Err(_) if bad => {}
        r => r?,
    }
    if !p.construct_end() {
        p.construct(&f.read(&c)?);
    }
    f.read_chunks(&d, &mut |chunk| p.dump_chunk(chunk))?;
    p.dump_end()?;
    p.stack(&f.read(&s)?)?;
    Ok(p.finish())
}

/// Options of a run.
#[derive(Debug, Clone, Default)]
pub struct RunOptions {
    pub layer_mapping: Option<LayerMapping>,
    pub fuzzy: bool,
    pub overflow_check: bool,
    /// Beyond msprobe, default off: see [`CompareOptions::layout_aware`].
    pub layout_aware: bool,
    /// The host's way to run independent work side by side (the CLI: two threads).
    pub join: Option<crate::base::Join>,
    /// See [`CompareOptions::defer_verdicts`]: for a host that reads each node's rows once
    /// through [`crate::compare::Comparison::judge_with_io`] (the CLI writing a `.vis.db`).
    /// Not for a parallel merge (its compare keeps its rows).
    pub defer_verdicts: bool,
}

/// `get_compare_framework` (run by msprobe's `GraphComparator`): from the `framework` keys (a
/// missing or empty key counts as pytorch), pytorch/pytorch or a mindspore/mindtorch NPU side with
/// a pytorch/mindspore bench; anything else (e.g. a pytorch NPU side with a mindspore bench, even
/// with `-lm`) is refused.
pub(crate) fn compare_framework(npu: &RankDump, bench: &RankDump) -> Result<()> {
    let key = |d: &RankDump| match d.framework_key.as_deref() {
        None | Some("") => "pytorch".to_string(),
        Some(s) => s.to_string(),
    };
    let (n, b) = (key(npu), key(bench));
    let ok = (n == "pytorch" && b == "pytorch")
        || (matches!(n.as_str(), "mindspore" | "mindtorch")
            && matches!(b.as_str(), "pytorch" | "mindspore"));
    if ok {
        return Ok(());
    }
    Err(Error::input(
        format!("{} / {}", npu.names.dump, bench.names.dump),
        format!("unsupported framework pair (NPU \"{n}\", Bench \"{b}\"): msprobe compares pytorch with pytorch, or a mindspore/mindtorch NPU dump with a pytorch or mindspore bench"),
    ))
}

/// The work on one side of a pair that needs that side's dump alone: its graph and, with a
/// layer mapping, its part of the mapping ([`MappingSide`]). A host that parses the two sides
/// side by side makes each side's as soon as its dump is parsed (the CLI: the Bench side while
/// the larger NPU side is still being parsed) and hands them to [`run_pair`] in its [`PairInput`].
#[derive(Debug)]
pub struct Prepared<'d> {
    dump: &'d RankDump,
    /// `Graph::build` of the dump; its error is reported where a build's would be.
    graph: Result<Graph>,
    mapping: Option<MappingSide<'d>>,
}

impl<'d> Prepared<'d> {
    /// Builds `dump`'s graph and, when `layer_mapping` is given (a compare with `-lm`), its
    /// part of the mapping; the two side by side through `join`.
    pub fn new(
        dump: &'d RankDump,
        layer_mapping: Option<&LayerMapping>,
        join: Option<crate::base::Join>,
    ) -> Prepared<'d> {
        // An invalid mapping file makes no mapping: nothing to prepare for it.
        let wanted = layer_mapping.is_some_and(|lm| lm.invalid.is_none());
        let join = join.filter(|_| wanted);
        let (graph, mapping) = crate::base::join2(
            join,
            || Graph::build(dump),
            || wanted.then(|| MappingSide::new(dump)),
        );
        Prepared {
            dump,
            graph,
            mapping,
        }
    }

    /// [`Prepared::new`] for the Bench side of a pair: its mapping part without what the
    /// matching walk does not read of a Bench side ([`MappingSide::without_pos`]).
    pub fn new_bench(
        dump: &'d RankDump,
        layer_mapping: Option<&LayerMapping>,
        join: Option<crate::base::Join>,
    ) -> Prepared<'d> {
        let p = Prepared::new(dump, layer_mapping, join);
        Prepared {
            mapping: p.mapping.map(MappingSide::without_pos),
            ..p
        }
    }

    /// This side's work when it was made of `d` (the same dump in memory), else nothing.
    fn of(
        p: Option<Prepared<'d>>,
        d: &RankDump,
    ) -> (Option<Result<Graph>>, Option<MappingSide<'d>>) {
        match p {
            Some(p) if std::ptr::eq(p.dump, d) => (Some(p.graph), p.mapping),
            _ => (None, None),
        }
    }
}

/// The checker set of a pair's compare.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Checkers {
    /// msprobe's statistics checkers.
    #[default]
    Standard,
    /// msprobe's parallel-merge set (no shape check), which it also uses with `--rank_size` on a
    /// single rank folder: nothing to merge, but the same compare as a merge.
    ParallelMerge,
}

/// What one pair's run starts from: its parsed sides (no Bench side: a build), each side's
/// [`Prepared`] work if the host did it already (one made of another dump than the pair's is
/// done again), and the checker set.
///
/// The dumps are shared (`Arc`): parsed dumps are never changed by building or comparing, so a
/// pair can be run again with other options without parsing its files again (the page, and
/// [`PairResult`]'s sides, keep them).
#[derive(Debug)]
pub struct PairInput<'d> {
    pub npu: Arc<RankDump>,
    pub bench: Option<Arc<RankDump>>,
    pub npu_prepared: Option<Prepared<'d>>,
    pub bench_prepared: Option<Prepared<'d>>,
    pub checkers: Checkers,
}

impl<'d> PairInput<'d> {
    /// A pair of freshly parsed dumps, nothing prepared, the standard checkers.
    pub fn new(npu: RankDump, bench: Option<RankDump>) -> PairInput<'d> {
        PairInput::shared(Arc::new(npu), bench.map(Arc::new))
    }

    /// [`PairInput::new`] over dumps that may already belong to an earlier result.
    pub fn shared(npu: Arc<RankDump>, bench: Option<Arc<RankDump>>) -> PairInput<'d> {
        PairInput {
            npu,
            bench,
            npu_prepared: None,
            bench_prepared: None,
            checkers: Checkers::Standard,
        }
    }
}

/// Builds (and compares) one pair, as msprobe's `_build_graph_result` / `_compare_graph_result`.
///
/// A real-tensor dump's matched pairs are left queued in `Comparison::real_data`, matched but
/// without a verdict: [`compare_pair_tensors`] compares their tensors.
pub fn run_pair(input: PairInput<'_>, opts: &RunOptions) -> Result<PairResult> {
    let PairInput {
        npu,
        bench,
        npu_prepared,
        bench_prepared,
        checkers,
    } = input;
    let parallel_merge = checkers == Checkers::ParallelMerge;
    let (npu_graph, npu_side) = Prepared::of(npu_prepared, &npu);
    // What the parser read through comes first.
    let mut parsed: Vec<Diagnostic> = npu.diagnostics.clone();
    if let Some(b) = &bench {
        parsed.extend(b.diagnostics.iter().cloned());
    }
    let Some(bench) = bench else {
        let mut gn = match npu_graph {
            Some(g) => g?,
            None => Graph::build(&npu)?,
        };
        let micro_steps = gn.paging_by_micro_step(None);
        if opts.overflow_check {
            gn.apply_overflow(&npu);
        }
        return Ok(PairResult {
            npu: Side {
                dump: npu,
                graph: gn,
            },
            bench: None,
            comparison: None,
            mode: Mode::Build,
            micro_steps,
            diagnostics: parsed,
        });
    };
    let copts = CompareOptions {
        fuzzy: opts.fuzzy,
        layer_mapping: opts.layer_mapping.clone(),
        layout_aware: opts.layout_aware,
        parallel_merge,
        join: opts.join,
        derive_results: true,
        defer_verdicts: opts.defer_verdicts && !parallel_merge,
    };
    // The layer mapping reads the dumps alone: made before the graphs (unless the sides came
    // prepared with both), its items and tries are freed before the graphs take their memory
    // (on a large pair they were the peak).
    let (bench_graph, bench_side) = Prepared::of(bench_prepared, &bench);
    let mapping = layer_mapping_of_sides(&npu, &bench, &copts, npu_side, bench_side);
    // The two graphs are independent; NPU's error first, as when built one after the other.
    let join = opts
        .join
        .filter(|_| npu_graph.is_none() && bench_graph.is_none());
    let (gn, gb) = crate::base::join2(
        join,
        || npu_graph.unwrap_or_else(|| Graph::build(&npu)),
        || bench_graph.unwrap_or_else(|| Graph::build(&bench)),
    );
    let mut gn = gn?;
    let mut gb = gb?;
    let fw = |d: &RankDump| {
        d.framework.ok_or_else(|| {
            Error::input(&d.names.dump, "the dump must be based on the MindSpore or PyTorch framework (no framework key and no torch/mindspore tensor type found)")
        })
    };
    let cross = fw(&npu)? != fw(&bench)?;
    if cross && opts.layer_mapping.is_none() {
        return Err(Error::input(
            format!("{} / {}", npu.names.dump, bench.names.dump),
            "the two dumps come from different frameworks; a cross-framework compare needs a layer mapping (-lm)",
        ));
    }
    let mode = compare_mode(&npu, &bench)?;
    compare_framework(&npu, &bench)?;
    let mut cmp = compare_mapped(&mut gn, &npu, &mut gb, &bench, mode, &copts, mapping);
    let micro_steps = gn.paging_by_micro_step(Some(&mut gb));
    if opts.overflow_check {
        gn.apply_overflow(&npu);
        gb.apply_overflow(&bench);
    }
    let mut diagnostics = parsed;
    diagnostics.append(&mut cmp.diagnostics);
    Ok(PairResult {
        npu: Side {
            dump: npu,
            graph: gn,
        },
        bench: Some(Side {
            dump: bench,
            graph: gb,
        }),
        comparison: Some(cmp),
        mode,
        micro_steps,
        diagnostics,
    })
}

/// Where a compared pair's tensor files are: each side's files and rank folder (the tensors are
/// `<rank folder>/dump_tensor_data/<data_name>`).
#[derive(Clone, Copy)]
pub struct TensorFiles<'a> {
    pub npu: &'a dyn Files,
    pub npu_dir: &'a str,
    pub bench: &'a dyn Files,
    pub bench_dir: &'a str,
}

/// The tensor compare of a finished pair's queued real-data pairs (after [`run_pair`] or a
/// manual match), for a real-tensor dump (task `tensor`): `realdata::compare_tensors` on every
/// matched pair. Without `tensors` (or where a file cannot be read) the metrics are
/// `unsupported`, as msprobe reports unreadable files.
pub fn compare_pair_tensors(res: &mut PairResult, tensors: Option<&TensorFiles>) {
    let (Some(bench), Some(cmp)) = (res.bench.as_ref(), res.comparison.as_mut()) else {
        return;
    };
    if cmp.real_data.is_empty() {
        return;
    }
    let n = tensors.map(|t| crate::compare::realdata::TensorSide {
        files: t.npu,
        rank_dir: t.npu_dir,
    });
    let b = tensors.map(|t| crate::compare::realdata::TensorSide {
        files: t.bench,
        rank_dir: t.bench_dir,
    });
    let mut diags = crate::compare::realdata::compare_tensors(
        cmp,
        &mut res.npu.graph,
        &res.npu.dump,
        &bench.graph,
        &bench.dump,
        n.as_ref(),
        b.as_ref(),
    );
    res.diagnostics.append(&mut diags);
}

#[cfg(test)]
mod list_tests {
    use super::parse_list;

    #[test]
    fn lists_and_ranges() {
        assert_eq!(parse_list("0,8,16"), Ok(vec![0, 8, 16]));
        assert_eq!(parse_list("0-3,8, 2"), Ok(vec![0, 1, 2, 3, 8]));
        assert_eq!(parse_list("5"), Ok(vec![5]));
        assert!(parse_list("3-1").is_err());
        assert!(parse_list("a").is_err());
        assert!(parse_list("-1").is_err());
        assert!(parse_list(",").is_err());
        assert!(parse_list("0-99999999").is_err());
    }
}
