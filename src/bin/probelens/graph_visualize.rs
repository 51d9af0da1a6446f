//! `probelens graph_visualize`: plan, parse, compare, write the `.vis.db`, post-pass.

use crate::alloc::give_back_freed;
use crate::args::{parallel_params, Args};
use crate::db::{
    db_err, export_graphs, post_pass, DbFile, DbSink, DbWriter, FileSpill, PartFile, SharedDb,
};
use crate::fs::{tensor_dir, tensor_files, two_threads, FsFiles};
use crate::jobs::{folder_bytes, run_ordered, unit_need, Budget};
use crate::progress::{CpuMarks, Progress};
use crate::shard::{self, shard_slice};
use crate::suggest::read_yaml;
use probelens::base::error::{Error, Result};
use probelens::base::Files;
use probelens::compare::pair::PairResult;
use probelens::mapping::LayerMapping;
use probelens::run::{self, Checkers, PairInput, PairPlan, Plan, RunOptions};
use probelens::visdb;
use probelens::visdb::export::{self, ConfigRow, DistNode, GraphExport};
use probelens::visdb::sqlite_writer::Writer;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Distributed nodes per (data source, step), then per rank.
pub(crate) type DistBySource = Vec<DistGroup>;
/// One (data source, step)'s distributed nodes per rank.
pub(crate) type DistGroup = (&'static str, i64, Vec<(i64, Vec<DistNode>)>);

/// `time.strftime("%Y%m%d%H%M%S")` (UTC; msprobe uses local time, which is UTC on our machines).
pub(crate) fn timestamp() -> String {
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0);
    let days = secs.div_euclid(86400);
    let rem = secs.rem_euclid(86400);
    let (h, m, s) = (rem / 3600, rem % 3600 / 60, rem % 60);
    // Civil from days (Howard Hinnant).
    let z = days + 719468;
    let era = z.div_euclid(146097);
    let doe = z - era * 146097;
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let mo = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = if mo <= 2 { y + 1 } else { y };
    format!("{y:04}{mo:02}{d:02}{h:02}{m:02}{s:02}")
}

/// `graph_visualize`: plans the run, then builds and compares each pair and writes its rows
/// (or, with `--no-db` or `--file_type json`, what those write), then the indexes and SQLite's
/// post-pass. Returns the database's path (empty when none was written).
pub(crate) fn graph_visualize(a: &Args) -> Result<PathBuf> {
    let t0 = Instant::now();
    let mut cpu = CpuMarks(Vec::new());
    cpu.mark("start");
    let npu = FsFiles::new(&a.target)?;
    let bench = match &a.golden {
        Some(g) => Some(FsFiles::new(g)?),
        None => None,
    };
    let plan: Plan = run::plan(&npu, bench.as_ref().map(|b| b as &dyn Files))?
        .restrict(a.steps.as_deref(), a.ranks.as_deref())?;
    let parallel = parallel_params(a).map_err(|m| Error::input("--rank_size", m))?;
    let all_units = plan_units(a, &npu, bench.as_ref(), &plan, parallel.is_some())?;
    let units = shard_slice(&all_units, a.shard);
    let opts = RunOptions {
        layer_mapping: read_layer_mapping(a)?,
        fuzzy: a.fuzzy,
        overflow_check: a.overflow,
        layout_aware: a.layout_aware,
        join: Some(two_threads),
        // The export reads every node's rows once: each pair is compared there, not twice.
        defer_verdicts: !a.no_db,
    };
    if a.json && a.golden.is_some() {
        return Err(Error::input(
            "--file_type",
            "The --file_type json parameter is not supported in graph comparison mode. Please remove the -gp/--golden_path parameter or use --file_type db.",
        ));
    }
    if a.json && parallel.is_none() {
        eprintln!("probelens: warning: The --file_type json parameter is only supported in graph merge build scenarios. Falling back to default db output.");
    }
    if let (true, Some(params)) = (a.json, &parallel) {
        return json_export(&npu, units, params, &opts, &a.output);
    }
    if a.shard.is_some() && (a.no_db || a.json) {
        return Err(Error::input(
            "--shard",
            "a shard writes a partial db: not with --no-db or --file_type json",
        ));
    }
    if a.no_db {
        if let Some(params) = &parallel {
            return merge_only(&npu, bench.as_ref(), units, params, &opts);
        }
        return compare_only(a, &npu, bench.as_ref(), &plan, &opts, t0);
    }
    std::fs::create_dir_all(&a.output).map_err(|e| {
        Error::input(
            a.output.display().to_string(),
            format!("cannot create the output folder: {e}"),
        )
    })?;
    let kind = if bench.is_some() { "compare" } else { "build" };
    let db_path = match a.shard {
        // A fixed name: a shard run again replaces its partial db.
        Some((i, n)) => a.output.join(format!("{kind}_shard{i}of{n}.vis.db")),
        None => a.output.join(format!("{kind}_{}.vis.db", timestamp())),
    };
    let tmp_path = db_path.with_extension("db.part");
    let _ = std::fs::remove_file(&tmp_path);
    // On an error below, the partial database goes away (after the connection closes: declared
    // first, dropped last). After the final rename there is nothing left to remove.
    let _part = PartFile(tmp_path.clone());
    // The index keys' texts wait here while the rows are written (`FileSpill`).
    let keys_path = db_path.with_extension("db.keys");
    let _ = std::fs::remove_file(&keys_path);
    let _keys_part = PartFile(keys_path.clone());
    let budget = Budget::new(a.jobs, a.max_memory);
    let (db, leaves_out) = create_db(&db_path, &tmp_path, &keys_path, true, budget.keys)?;
    let mut progress = Progress::new(
        !a.no_progress && std::io::stderr().is_terminal(),
        a.progress_log,
        units.len(),
        t0,
    );
    let visualize = Visualize {
        a,
        npu: &npu,
        bench: bench.as_ref(),
        plan: &plan,
        parallel: parallel.as_deref(),
        opts: &opts,
        budget,
    };
    // Rows are formatted, encoded and packed into pages by each unit's formatting threads
    // (`export_graphs`), which share the writer.
    let shared = std::sync::Mutex::new(SharedDb {
        db,
        err: None,
        held: Duration::ZERO,
    });
    let produced = visualize.write_units(units, (&shared, &leaves_out), &mut progress, &mut cpu);
    let SharedDb { db, err, held } = shared
        .into_inner()
        .map_err(|_| Error::input(db_path.display().to_string(), "the export failed"))?;
    // A database error stops the export; report it before what the producer saw after it.
    if let Some(e) = err {
        return Err(db_err(&db_path, e));
    }
    let Produced {
        config,
        dist,
        exported,
    } = produced?;
    let te = Instant::now();
    match a.shard {
        None => visualize.finish_db(db, config.as_ref(), &dist, &tmp_path, &db_path)?,
        Some((index, count)) => {
            // The partial db's own row lists its own ranks and steps; the run's go to the meta.
            let own = config.as_ref().map(|c| own_config(c, &exported));
            visualize.finish_db(db, own.as_ref(), &[], &tmp_path, &db_path)?;
            let meta = shard::Meta {
                index,
                count,
                run: run_fingerprint(a)?,
                units: all_units.iter().map(Unit::key).collect(),
                kind: kind.to_string(),
                distributed: plan.kind != run::Kind::Files && parallel.is_none(),
                overflow: a.overflow,
                lists: config.map(|c| (c.rank_list, c.step_list)),
            };
            shard::write_meta(&tmp_path, &meta).map_err(|e| db_err(&db_path, e))?;
        }
    }
    let t_indexes = te.elapsed();
    cpu.mark("indexes");
    std::fs::rename(&tmp_path, &db_path)
        .map_err(|e| Error::input(db_path.display().to_string(), format!("cannot write: {e}")))?;
    if a.timing {
        // Sorting and writing the indexes, the tables' upper levels and the schema, and SQLite's
        // post-pass (REINDEX over the key budget, the distributed updates).
        eprintln!(
            "probelens: indexes {:.3}s, total {:.3}s",
            t_indexes.as_secs_f64(),
            t0.elapsed().as_secs_f64()
        );
        eprintln!("{}", cpu.line());
        // Packing rows into pages is done under the writer's lock: units do not overlap there.
        eprintln!("probelens: writer lock held {:.3}s", held.as_secs_f64());
    }
    Ok(db_path)
}

/// What the export loop builds in turn: each planned pair, or with `--rank_size` each step
/// merged (one rank folder: msprobe merges nothing, and a compare still uses the parallel-merge
/// checker set).
pub(crate) fn plan_units<'p>(
    a: &Args,
    npu: &FsFiles,
    bench: Option<&FsFiles>,
    plan: &'p Plan,
    parallel: bool,
) -> Result<Vec<Unit<'p>>> {
    if !parallel {
        return Ok(plan.pairs.iter().map(Unit::Single).collect());
    }
    if plan.kind == run::Kind::Files {
        // Its json export needs rank folders.
        if a.json && a.golden.is_none() {
            return Err(Error::input(
                npu.display(""),
                "You have specified the \"--rank_size\" parameter for data merging, so the \"-tp\" parameter must pass in multiple rank data.",
            ));
        }
        return Ok(plan.pairs.iter().map(Unit::Single).collect());
    }
    if a.ranks.is_some() {
        return Err(Error::input(
            "--ranks",
            "not with --rank_size: a merge takes every rank of its parallel group",
        ));
    }
    let (steps, _) = probelens::merge::plan(npu, bench.map(|b| b as &dyn Files))?;
    Ok(steps
        .into_iter()
        .filter(|s| a.steps.as_ref().is_none_or(|l| l.contains(&s.step)))
        .map(Unit::Step)
        .collect())
}

/// `-lm`'s mapping: none, the empty one (bare `-lm`), or the yaml file's.
pub(crate) fn read_layer_mapping(a: &Args) -> Result<Option<LayerMapping>> {
    let p = match &a.layer_mapping {
        None => return Ok(None),
        Some(None) => return Ok(Some(LayerMapping::empty())),
        Some(Some(p)) => p,
    };
    let text = read_yaml(p)?;
    Ok(Some(LayerMapping::parse(&p.display().to_string(), &text)?))
}

/// `--no-db` with `--rank_size`: every step merged, built and compared, its counts printed.
fn merge_only(
    npu: &FsFiles,
    bench: Option<&FsFiles>,
    units: &[Unit],
    params: &[probelens::merge::ParallelParams],
    opts: &RunOptions,
) -> Result<PathBuf> {
    for unit in units {
        if let Unit::Step(st) = unit {
            for (pair, res) in run_parallel_step(npu, bench, st, params, opts, true)? {
                for d in &res.diagnostics {
                    eprintln!("probelens: {d}");
                }
                print_counts(&pair, &res);
            }
        }
    }
    Ok(PathBuf::new())
}

/// The database writer over the file at `tmp_path`, and a second handle to the file for the
/// table leaves the formatting threads write (`DbSink`).
///
/// The file is written directly as SQLite pages (`probelens::visdb::sqlite_writer`): rows as
/// they come, indexes sorted and packed at the end, much faster than inserting through SQLite;
/// the content is the same (the fidelity tests read it back with SQLite).
/// With `hand_runs`, the writer hands its table leaves to the caller (`DbSink` writes them).
pub(crate) fn create_db(
    db_path: &Path,
    tmp_path: &Path,
    keys_path: &Path,
    hand_runs: bool,
    key_budget: u64,
) -> Result<(DbWriter, DbFile)> {
    let file = std::fs::File::create(tmp_path).map_err(|e| db_err(db_path, e))?;
    let (tables, indexes) = visdb::schema();
    let leaves_out = DbFile(file.try_clone().map_err(|e| db_err(db_path, e))?);
    let mut db = Writer::new(DbFile(file), tables, indexes).map_err(|e| db_err(db_path, e))?;
    if hand_runs {
        db.hand_runs();
    }
    db.set_key_budget(usize::try_from(key_budget).unwrap_or(usize::MAX));
    db.set_spill(Box::new(
        FileSpill::create(keys_path).map_err(|e| db_err(keys_path, e))?,
    ));
    Ok((db, leaves_out))
}

/// What the export loop leaves for the end: the run's `tb_config` row, the distributed nodes,
/// the (step, rank) of each exported graph pair in order.
struct Produced {
    config: Option<ConfigRow>,
    dist: DistBySource,
    exported: Vec<(i64, i64)>,
}

/// A partial db's own `tb_config` row: the run's, with the ranks and steps it holds.
fn own_config(c: &ConfigRow, exported: &[(i64, i64)]) -> ConfigRow {
    let mut ranks: Vec<i64> = exported.iter().map(|p| p.1).collect();
    let mut steps: Vec<i64> = exported.iter().map(|p| p.0).collect();
    for v in [&mut ranks, &mut steps] {
        v.sort_unstable();
        v.dedup();
    }
    ConfigRow {
        tool_tip: c.tool_tip.clone(),
        node_colors: c.node_colors.clone(),
        rank_list: export::int_list(&ranks),
        step_list: export::int_list(&steps),
        ..*c
    }
}

/// What must agree between the shards of one run: the options that change its output (the
/// dumps' paths may differ between the machines of a cluster, so they are not in it; the plan's
/// units are compared apart).
pub(crate) fn run_fingerprint(a: &Args) -> Result<String> {
    let lm = match &a.layer_mapping {
        None => "none".to_string(),
        Some(None) => "bare".to_string(),
        Some(Some(p)) => {
            let bytes = std::fs::read(p)
                .map_err(|e| Error::input(p.display().to_string(), format!("cannot read: {e}")))?;
            format!("{:016x}", probelens::base::fnv1a(&bytes))
        }
    };
    Ok(format!(
        "compare={} lm={lm} fm={} oc={} layout_aware={} rank_size={:?} tp={:?} pp={:?} vpp={:?} order={:?} steps={:?} ranks={:?}",
        a.golden.is_some(),
        a.fuzzy,
        a.overflow,
        a.layout_aware,
        a.rank_size,
        a.tp,
        a.pp,
        a.vpp,
        a.order,
        a.steps,
        a.ranks
    ))
}

/// What a unit leaves for the end once its rows are written: each pair's, and (compare, mode,
/// micro steps) of its first pair, which make the `tb_config` row when the unit is the first.
struct UnitDone {
    pairs: Vec<PairDone>,
    seed: Option<(bool, probelens::graph::items::Mode, i64)>,
}

/// A pair written: its messages for stderr and its distributed nodes (NPU, Bench).
struct PairDone {
    step: i64,
    rank: i64,
    messages: Vec<String>,
    dist_npu: Vec<DistNode>,
    dist_bench: Option<Vec<DistNode>>,
}

/// The bytes a unit's parse reads: its rank folders' files, both sides.
pub(crate) fn unit_bytes(npu: &FsFiles, bench: Option<&FsFiles>, unit: &Unit) -> u64 {
    let side = |files: Option<&FsFiles>, dir: Option<&str>| match (files, dir) {
        (Some(f), Some(d)) => folder_bytes(f, d),
        _ => 0,
    };
    match unit {
        Unit::Single(p) => side(Some(npu), Some(&p.npu_dir)) + side(bench, p.bench_dir.as_deref()),
        Unit::Step(s) => {
            s.npu
                .iter()
                .map(|(_, d)| side(Some(npu), Some(d)))
                .sum::<u64>()
                + s.bench
                    .iter()
                    .map(|(_, d)| side(bench, Some(d)))
                    .sum::<u64>()
        }
    }
}

/// What the phases of a run that writes a `.vis.db` share.
struct Visualize<'r> {
    a: &'r Args,
    npu: &'r FsFiles,
    bench: Option<&'r FsFiles>,
    plan: &'r Plan,
    parallel: Option<&'r [probelens::merge::ParallelParams]>,
    opts: &'r RunOptions,
    budget: Budget,
}

impl Visualize<'_> {
    /// Builds and compares each unit and writes its graphs' rows into the shared writer; returns
    /// the `tb_config` row and the distributed nodes for the post-analysis. Units run
    /// `budget.jobs` at a time, each writing its own rows (`jobs::run_ordered`); what the end
    /// needs comes back in plan order.
    fn write_units(
        &self,
        units: &[Unit],
        db: (&std::sync::Mutex<SharedDb>, &DbFile),
        progress: &mut Progress,
        cpu: &mut CpuMarks,
    ) -> Result<Produced> {
        let mut config: Option<ConfigRow> = None;
        let mut exported: Vec<(i64, i64)> = Vec::new();
        // (data_source, step) -> ranks -> distributed nodes
        let mut dist: DistBySource = Vec::new();
        let sizes: Vec<u64> = units
            .iter()
            .map(|u| unit_bytes(self.npu, self.bench, u))
            .collect();
        progress.set_bytes(sizes.iter().sum());
        progress.update("building graphs");
        let work = |_: usize, unit: &Unit| self.build_and_export(unit, db);
        let mut consume = |i: usize, done: UnitDone| -> Result<()> {
            let mut label = String::new();
            if config.is_none() {
                if let Some((compare, mode, micro_steps)) = done.seed {
                    let ranks = match self.parallel {
                        Some(_) => done.pairs.iter().map(|p| p.rank).collect(),
                        None => self.plan.rank_list(),
                    };
                    config = Some(ConfigRow::new(
                        compare,
                        mode,
                        micro_steps,
                        self.a.overflow,
                        &ranks,
                        &self.plan.step_list,
                    ));
                }
            }
            for p in done.pairs {
                for m in &p.messages {
                    eprintln!("{m}");
                }
                push_dist(&mut dist, "NPU", p.step, p.rank, p.dist_npu);
                if let Some(b) = p.dist_bench {
                    push_dist(&mut dist, "Bench", p.step, p.rank, b);
                }
                exported.push((p.step, p.rank));
                label = format!("step {} rank {}", p.step, p.rank);
            }
            cpu.mark("parse+build+compare+export");
            progress.finish_unit(sizes[i], &label);
            Ok(())
        };
        let needs: Vec<u64> = sizes.iter().map(|&b| unit_need(b)).collect();
        run_ordered(units, self.budget, &needs, &work, &mut consume)?;
        Ok(Produced {
            config,
            dist,
            exported,
        })
    }

    /// Builds and compares one unit and writes its rows; what the end needs of it.
    fn build_and_export(
        &self,
        unit: &Unit,
        (shared, out): (&std::sync::Mutex<SharedDb>, &DbFile),
    ) -> Result<UnitDone> {
        let tp = Instant::now();
        let mut t_parse = Duration::ZERO;
        let results = match unit {
            Unit::Single(pair) => {
                let checkers = match self.parallel {
                    Some(_) => Checkers::ParallelMerge,
                    None => Checkers::Standard,
                };
                let (res, parsed) =
                    run_loaded_pair(self.npu, self.bench, pair, self.opts, checkers, tp)?;
                t_parse = parsed;
                vec![((*pair).clone(), res)]
            }
            Unit::Step(s) => {
                let params = self.parallel.unwrap_or_default();
                run_parallel_step(self.npu, self.bench, s, params, self.opts, true)?
            }
        };
        let t_cmp = tp.elapsed();
        let seed = results
            .first()
            .map(|(_, r)| (r.bench.is_some(), r.mode, r.micro_steps));
        let mut sink = DbSink::new(shared, out);
        let mut pairs = Vec::new();
        for (pair, res) in results {
            let te = Instant::now();
            let mut done = self.export_pair(&pair, &res, &mut sink);
            sink.flush();
            if self.a.timing {
                done.messages.push(format!(
                    "probelens: step {} rank {}: parse {:.3}s, build+compare {:.3}s, export {:.3}s",
                    pair.step,
                    pair.rank,
                    t_parse.as_secs_f64(),
                    (t_cmp - t_parse).as_secs_f64(),
                    te.elapsed().as_secs_f64()
                ));
            }
            pairs.push(done);
            // The result is freed before the next unit or the indexes, which reuse its memory.
            drop(res);
            give_back_freed();
        }
        Ok(UnitDone { pairs, seed })
    }

    /// Writes one pair's rows; its messages (diagnostics, then the deferred compare's warnings)
    /// and distributed nodes.
    fn export_pair(&self, pair: &PairPlan, res: &PairResult, sink: &mut DbSink) -> PairDone {
        let mut messages: Vec<String> = res
            .diagnostics
            .iter()
            .map(|d| format!("probelens: {d}"))
            .collect();
        let nx = GraphExport {
            dump_data_dir: tensor_dir(self.npu, &pair.npu_dir, &res.npu.dump),
            ..GraphExport::npu(res, pair.step, pair.rank)
        };
        let bx = match (self.bench, &pair.bench_dir) {
            (Some(bf), Some(bdir)) => {
                GraphExport::bench(res, pair.step, pair.rank).map(|x| GraphExport {
                    dump_data_dir: tensor_dir(bf, bdir, x.dump),
                    ..x
                })
            }
            _ => None,
        };
        let (dists, warnings) = export_graphs(&nx, bx.as_ref(), sink);
        messages.extend(warnings);
        let mut dists = dists.into_iter();
        PairDone {
            step: pair.step,
            rank: pair.rank,
            messages,
            dist_npu: dists.next().unwrap_or_default(),
            dist_bench: dists.next(),
        }
    }

    /// The `tb_config` row, the indexes, the tables' upper levels and the schema; then SQLite's
    /// post-pass where needed (REINDEX over the key budget, msprobe's distributed updates).
    fn finish_db(
        &self,
        mut db: DbWriter,
        config: Option<&ConfigRow>,
        dist: &[DistGroup],
        tmp_path: &Path,
        db_path: &Path,
    ) -> Result<()> {
        if let Some(c) = config {
            db.insert(visdb::TB_CONFIG, &visdb::config_values(c))
                .map_err(|e| db_err(db_path, e))?;
        }
        let reindex = db.indexes_deferred();
        let file = db
            .finish_with(Some(two_threads))
            .map_err(|e| db_err(db_path, e))?;
        drop(file);
        let mut updates: Vec<export::DistUpdate> = Vec::new();
        if self.plan.kind != run::Kind::Files && self.parallel.is_none() {
            updates = dist
                .iter()
                .flat_map(|(source, step, ranks)| {
                    export::distributed_analyse(ranks, self.a.overflow, source, *step)
                })
                .collect();
        }
        if reindex || !updates.is_empty() {
            post_pass(tmp_path, reindex, &updates).map_err(|e| db_err(db_path, e))?;
        }
        Ok(())
    }
}

/// `--file_type json` with `--rank_size` (build): every merged graph as
/// `<out>/step<S>/rank<R>/{construct,dump,stack}.json` (`GraphJsonExporter`); no db.
pub(crate) fn json_export(
    npu: &FsFiles,
    units: &[Unit],
    params: &[probelens::merge::ParallelParams],
    opts: &RunOptions,
    out: &Path,
) -> Result<PathBuf> {
    for unit in units {
        let Unit::Step(st) = unit else { continue };
        for (pair, res) in run_parallel_step(npu, None, st, params, opts, false)? {
            for d in &res.diagnostics {
                eprintln!("probelens: {d}");
            }
            let dir = out
                .join(format!("step{}", pair.step))
                .join(format!("rank{}", pair.rank));
            std::fs::create_dir_all(&dir).map_err(|e| {
                Error::input(
                    dir.display().to_string(),
                    format!("cannot create the folder: {e}"),
                )
            })?;
            let dd = tensor_dir(npu, &pair.npu_dir, &res.npu.dump);
            let texts = probelens::merge::json_files(&res.npu.graph, &res.npu.dump, dd.as_deref());
            for (name, text) in ["construct.json", "dump.json", "stack.json"]
                .iter()
                .zip(texts)
            {
                let p = dir.join(name);
                std::fs::write(&p, text).map_err(|e| {
                    Error::input(p.display().to_string(), format!("cannot write: {e}"))
                })?;
            }
        }
    }
    Ok(out.to_path_buf())
}

/// What one turn of the export loop builds: a (step, rank) pair, or a whole step merged.
pub(crate) enum Unit<'a> {
    Single(&'a PairPlan),
    Step(probelens::merge::ParallelStep),
}

impl Unit<'_> {
    /// The step and ranks of the unit (a merged step's NPU rank folders).
    pub(crate) fn key(&self) -> shard::UnitKey {
        match self {
            Unit::Single(p) => (p.step, vec![p.rank]),
            Unit::Step(s) => (s.step, s.npu.iter().map(|(r, _)| *r).collect()),
        }
    }
}

/// A parallel-merge step (`merge::run_parallel_step`, shared with the page): the rank folders
/// are parsed from the file system.
pub(crate) fn run_parallel_step(
    npu: &FsFiles,
    bench: Option<&FsFiles>,
    s: &probelens::merge::ParallelStep,
    params: &[probelens::merge::ParallelParams],
    opts: &RunOptions,
    for_db: bool,
) -> Result<Vec<(PairPlan, PairResult)>> {
    use probelens::merge::{self, SideOf};
    let mut load = |side: SideOf, dir: &str| match (side, bench) {
        (SideOf::Bench, Some(b)) => run::load_rank(b, dir),
        _ => run::load_rank(npu, dir),
    };
    merge::run_parallel_step(
        npu,
        bench.map(|b| b as &dyn Files),
        s,
        params,
        opts,
        for_db,
        &mut load,
    )
}

/// Parses the two rank folders of a pair side by side and builds and compares them. Each side's
/// graph and layer-mapping part (`run::Prepared`) is made on its thread as soon as its dump is
/// parsed: the Bench side's (the smaller dump) while the NPU side is still being parsed, the NPU
/// side's two pieces side by side. Returns the result and the time until both dumps were parsed
/// (from `since`). Errors come in the sequential order: the NPU side's parse first.
pub(crate) fn run_loaded_pair(
    npu: &FsFiles,
    bench: Option<&FsFiles>,
    pair: &run::PairPlan,
    opts: &RunOptions,
    checkers: Checkers,
    since: Instant,
) -> Result<(PairResult, std::time::Duration)> {
    use probelens::formats::dump::RankDump;
    use std::sync::Arc;
    let bench = bench.zip(pair.bench_dir.as_deref());
    // The layer mapping is made for a compare only.
    let lm = opts.layer_mapping.as_ref().filter(|_| bench.is_some());
    // The dumps stay here while their prepared work borrows them.
    let (mut npu_slot, mut bench_slot): (Option<Arc<RankDump>>, Option<Arc<RankDump>>) =
        (None, None);
    let (bench_slot, npu_slot) = (&mut bench_slot, &mut npu_slot);
    let (n, b) = std::thread::scope(|s| {
        let other = bench.map(|(files, dir)| {
            s.spawn(move || {
                let d = run::load_rank(files, dir)?;
                let parsed = since.elapsed();
                let d: &Arc<RankDump> = Option::insert(bench_slot, Arc::new(d));
                Ok::<_, Error>((d.clone(), run::Prepared::new_bench(d, lm, None), parsed))
            })
        });
        let n = run::load_rank(npu, &pair.npu_dir).map(|d| {
            let parsed = since.elapsed();
            let d: &Arc<RankDump> = Option::insert(npu_slot, Arc::new(d));
            (d.clone(), parsed, d)
        });
        // The NPU side's graph and mapping part side by side (the Bench thread may still be
        // at its own for a moment).
        let n = n.map(|(arc, parsed, d)| (arc, run::Prepared::new(d, lm, opts.join), parsed));
        let b = other.map(|h| match h.join() {
            Ok(r) => r,
            Err(p) => std::panic::resume_unwind(p),
        });
        (n, b)
    });
    let (nd, np, n_parsed) = n?;
    let (bd, bp, parsed) = match b.transpose()? {
        Some((bd, bp, b_parsed)) => (Some(bd), Some(bp), n_parsed.max(b_parsed)),
        None => (None, None, n_parsed),
    };
    let mut res = run::run_pair(
        PairInput {
            npu: nd,
            bench: bd,
            npu_prepared: Some(np),
            bench_prepared: bp,
            checkers,
        },
        opts,
    )?;
    let tensors = tensor_files(npu, bench.map(|(f, _)| f), &pair.npu_dir, &pair.bench_dir);
    run::compare_pair_tensors(&mut res, tensors.as_ref());
    Ok((res, parsed))
}

/// `--no-db`: the last pair's result is not freed, the process ends right after (the OS takes
/// the memory back at exit at no cost; freeing the scale pair's result takes ~10 ms).
pub(crate) fn leave_to_exit(res: PairResult) {
    std::mem::forget(res);
}

/// `--no-db`'s line for one pair: node, matched and error counts of the NPU graph.
pub(crate) fn print_counts(pair: &PairPlan, res: &PairResult) {
    let g = &res.npu.graph;
    let reachable = g.post_order();
    let matched = reachable
        .iter()
        .filter(|id| g.node(**id).partner().is_some())
        .count();
    let errors = reachable
        .iter()
        .filter(|id| g.node(**id).precision().is_some_and(|p| p.0 >= 1.0))
        .count();
    println!(
        "step {} rank {}: NPU {} nodes, {} matched, {} errors",
        pair.step,
        pair.rank,
        reachable.len(),
        matched,
        errors
    );
}

/// `--no-db`: builds and compares every pair (`-j` at once) and prints counts in plan order;
/// writes nothing.
pub(crate) fn compare_only(
    a: &Args,
    npu: &FsFiles,
    bench: Option<&FsFiles>,
    plan: &Plan,
    opts: &RunOptions,
    t0: Instant,
) -> Result<PathBuf> {
    let needs: Vec<u64> = plan
        .pairs
        .iter()
        .map(|p| unit_need(unit_bytes(npu, bench, &Unit::Single(p))))
        .collect();
    let work = |_: usize, pair: &PairPlan| {
        let tp = Instant::now();
        let (res, t_parse) = run_loaded_pair(npu, bench, pair, opts, Checkers::Standard, tp)?;
        Ok((res, t_parse, tp.elapsed()))
    };
    let last = plan.pairs.len().saturating_sub(1);
    let mut consume = |i: usize, (res, t_parse, t_all): (PairResult, Duration, Duration)| {
        let pair = &plan.pairs[i];
        for d in &res.diagnostics {
            eprintln!("probelens: {d}");
        }
        print_counts(pair, &res);
        if a.timing {
            eprintln!(
                "probelens: step {} rank {}: parse {:.3}s, build+compare {:.3}s",
                pair.step,
                pair.rank,
                t_parse.as_secs_f64(),
                (t_all - t_parse).as_secs_f64()
            );
        }
        if i == last {
            leave_to_exit(res);
        }
        Ok(())
    };
    let budget = Budget::new(a.jobs, a.max_memory);
    run_ordered(&plan.pairs, budget, &needs, &work, &mut consume)?;
    if a.timing {
        eprintln!("probelens: total {:.3}s", t0.elapsed().as_secs_f64());
    }
    Ok(PathBuf::new())
}

pub(crate) fn push_dist(
    dist: &mut DistBySource,
    source: &'static str,
    step: i64,
    rank: i64,
    nodes: Vec<DistNode>,
) {
    if nodes.is_empty() {
        return;
    }
    match dist
        .iter_mut()
        .find(|(s, st, _)| *s == source && *st == step)
    {
        Some((_, _, ranks)) => ranks.push((rank, nodes)),
        None => dist.push((source, step, vec![(rank, nodes)])),
    }
}
