//! The WebAssembly boundary: one `#[wasm_bindgen]` handle, [`Session`], with a few coarse
//! methods. JSON text crosses the boundary, and the graphs' columns as one binary buffer per side
//! (`columns`); errors become JS `Error`s whose message is the user-facing text. This is the only
//! folder that touches wasm-bindgen.
//!
//! Files: other JSON files are added whole (`addFile`, or `beginFile`/`appendChunk`); a rank
//! folder's dump.json, construct.json and stack.json and the tensor files stay in JS as `File`s
//! (`addLazyFile` + `setFileReader`) and are read through a synchronous callback, whole
//! (stack.json, a tensor) or in slices while parsing (`MemFiles::read_chunks`). A side of another
//! session can be adopted (`adoptSide`: its files and parsed rank folders shared, not read again).
//! `layout`, `check` and `run` (also a parallel merge) answer JSON; `columns(side)` gives the last
//! result's columns in [`crate::view::graph_columns`]' layout, filled in pieces; `node`, the manual
//! matches, `suggest`, `acceptSuggestions` and `exportMapping` work on the kept result.
//! `suspend`/`resume` free and rebuild a build result's graph. The heap (dlmalloc over
//! `memory.grow`) records a failed growth and what the core was doing, so the worker can tell an
//! out-of-memory trap from a crash.

use crate::base::error::{Error, Result};
use crate::base::Files;
use crate::compare::diagnose::diagnose_pair;
use crate::compare::pair::PairResult;
use crate::formats::dump::RankDump;
use crate::mapping::LayerMapping;
use crate::run::{self, Checkers, PairInput, RunOptions};
use crate::view::{self, Order, SideSel};
use std::collections::BTreeMap;
use std::sync::Arc;
use wasm_bindgen::prelude::*;

mod files;
#[cfg(target_arch = "wasm32")]
mod heap;
mod manual;

use files::{out_of_memory, working_on, MemFiles, SLICE, SLICE_BYTES, WORK};
use manual::{apply_matches, changes, snapshot};

struct Last {
    res: PairResult,
    npu_order: Order,
    bench_order: Option<Order>,
    /// The pair's rank folders, for the tensors of real-data manual matches.
    npu_dir: String,
    bench_dir: Option<String>,
    /// A build of one rank folder (nothing matched or changed by hand): its `overflowCheck`
    /// option, all it needs to be built again the same (see [`Session::suspend`]).
    rebuild: Option<bool>,
}

/// A build result whose graph was freed ([`Session::suspend`]): what builds it again.
struct Suspended {
    npu_dir: String,
    dump: Arc<RankDump>,
    overflow_check: bool,
}

/// A loaded pair of dumps and the last result.
#[wasm_bindgen]
pub struct Session {
    npu: MemFiles,
    bench: MemFiles,
    last: Option<Last>,
    /// The last result while suspended (`last` is None then).
    suspended: Option<Suspended>,
    /// The NPU nodes' divergence of the last `diagnose`, in pre-order.
    divergence: Vec<f32>,
}

fn js_err(e: impl std::fmt::Display) -> JsValue {
    js_sys::Error::new(&e.to_string()).into()
}

/// A JS `Error` that also says which side (`"npu"`/`"bench"`) and file it concerns.
fn side_err(side: &str, e: &Error) -> JsValue {
    let err = js_sys::Error::new(&e.to_string());
    let set = |k: &str, v: &str| {
        let _ = js_sys::Reflect::set(&err, &JsValue::from_str(k), &JsValue::from_str(v));
    };
    set("side", side);
    set("file", e.file());
    set("detail", e.message());
    err.into()
}

#[derive(serde::Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
struct RunOpts {
    step: i64,
    rank: i64,
    /// null: no -lm; "": bare -lm; text: the yaml.
    layer_mapping: Option<String>,
    layer_mapping_name: Option<String>,
    fuzzy: bool,
    overflow_check: bool,
    /// Beyond msprobe: permuted shapes pass the shape check (`RunOptions::layout_aware`).
    layout_aware: bool,
    /// Parallel merge, the CLI's `--rank_size/--tp/--pp/--vpp/--order` (one value per side:
    /// NPU [Bench]); no `rankSize`: no merge.
    rank_size: Vec<i64>,
    tp: Vec<i64>,
    pp: Vec<i64>,
    vpp: Vec<i64>,
    order: Vec<String>,
    /// With a merge: the merged graph to show, by the rank it is exported as (its group's main
    /// rank; one graph per DP replica); None: the first.
    merged_rank: Option<i64>,
}

impl RunOpts {
    /// The `-lm` of the options (None: none; empty text: the bare `-lm`).
    fn layer_mapping(&self) -> std::result::Result<Option<LayerMapping>, JsValue> {
        Ok(match &self.layer_mapping {
            None => None,
            Some(t) if t.is_empty() => Some(LayerMapping::empty()),
            Some(t) => Some(
                LayerMapping::parse(
                    self.layer_mapping_name
                        .as_deref()
                        .unwrap_or("layer_mapping.yaml"),
                    t,
                )
                .map_err(js_err)?,
            ),
        })
    }

    fn run_options(&self, layer_mapping: Option<LayerMapping>) -> RunOptions {
        RunOptions {
            layer_mapping,
            fuzzy: self.fuzzy,
            overflow_check: self.overflow_check,
            layout_aware: self.layout_aware,
            // One worker thread: independent steps run one after the other.
            join: None,
            // The page shows verdicts as soon as the compare is done.
            defer_verdicts: false,
        }
    }
}

impl Session {
    /// The plan's pair of `step` and `rank` over the loaded folders (the Bench side when loaded).
    fn planned_pair(&self, step: i64, rank: i64) -> std::result::Result<run::PairPlan, JsValue> {
        let bench = if self.bench.is_empty() {
            None
        } else {
            Some(&self.bench as &dyn Files)
        };
        let plan = run::plan(&self.npu, bench).map_err(js_err)?;
        plan.pairs
            .into_iter()
            .find(|p| p.step == step && p.rank == rank)
            .ok_or_else(|| {
                js_err(format!(
                    "step {step} rank {rank} is not in the loaded dumps"
                ))
            })
    }

    /// The parsed rank folders of a pair (each parsed once, here or by `check`, then reused).
    fn pair_dumps(
        &mut self,
        pair: &run::PairPlan,
    ) -> std::result::Result<(Arc<RankDump>, Option<Arc<RankDump>>), JsValue> {
        let nd = self
            .npu
            .rank(&pair.npu_dir)
            .map_err(|e| side_err("npu", &e))?;
        let bd = match &pair.bench_dir {
            Some(d) => Some(self.bench.rank(d).map_err(|e| side_err("bench", &e))?),
            None => None,
        };
        Ok((nd, bd))
    }

    fn export(
        &mut self,
        current_yaml: &str,
        pairs: &str,
    ) -> std::result::Result<crate::mapping::export::Exported, JsValue> {
        let pairs: Vec<(String, String)> =
            serde_json::from_str(pairs).map_err(|e| js_err(format!("bad pair list: {e}")))?;
        self.resume()?;
        let last = self
            .last
            .as_ref()
            .ok_or_else(|| js_err("nothing has been run yet"))?;
        let bench = last
            .res
            .bench
            .as_ref()
            .ok_or_else(|| js_err("exporting a mapping needs two sides"))?;
        crate::mapping::export::export_mapping(
            current_yaml,
            &last.res.npu.dump,
            &bench.dump,
            &pairs,
        )
        .map_err(js_err)
    }

    /// `run` with parallel merge parameters (`o.rank_size` given): the CLI's path
    /// (`merge::load_params`, `merge::run_parallel_step`) over the chosen step's rank folders,
    /// each parsed once and kept (the merge works on copies). Returns the chosen merged graph
    /// with `"merge": {"ranks": [...], "rank": r}` (the main ranks of all merged graphs of the
    /// step, in msprobe's order, and the one shown).
    fn run_parallel(
        &mut self,
        o: &RunOpts,
        layer_mapping: Option<LayerMapping>,
    ) -> std::result::Result<String, JsValue> {
        use crate::merge::{self, SideOf};
        let given = merge::ParallelArgs {
            rank_size: o.rank_size.clone(),
            tp: o.tp.clone(),
            pp: o.pp.clone(),
            vpp: o.vpp.clone(),
            order: o.order.clone(),
        };
        let compare = !self.bench.is_empty();
        let opts = o.run_options(layer_mapping);
        let params = merge::load_params(&given, compare)
            .map_err(|m| js_err(Error::input("--rank_size", m)))?
            .unwrap_or_default();
        let plan =
            run::plan(&self.npu, compare.then_some(&self.bench as &dyn Files)).map_err(js_err)?;
        let (res, npu_dir, bench_dir, ranks, rank) = if plan.kind == run::Kind::Files {
            // One rank folder: msprobe merges nothing, a compare uses the parallel-merge checkers.
            let pair = plan
                .pairs
                .iter()
                .find(|p| p.step == o.step)
                .ok_or_else(|| js_err(format!("step {} is not in the loaded dumps", o.step)))?
                .clone();
            let (nd, bd) = self.pair_dumps(&pair)?;
            let mut res = run::run_pair(
                PairInput {
                    checkers: Checkers::ParallelMerge,
                    ..PairInput::shared(nd, bd)
                },
                &opts,
            )
            .map_err(js_err)?;
            let tensors = pair.bench_dir.as_deref().map(|dir| run::TensorFiles {
                npu: &self.npu,
                npu_dir: &pair.npu_dir,
                bench: &self.bench,
                bench_dir: dir,
            });
            run::compare_pair_tensors(&mut res, tensors.as_ref());
            (
                res,
                pair.npu_dir,
                pair.bench_dir,
                vec![pair.rank],
                pair.rank,
            )
        } else {
            let (steps, _) = merge::plan(&self.npu, compare.then_some(&self.bench as &dyn Files))
                .map_err(js_err)?;
            let st = steps
                .into_iter()
                .find(|s| s.step == o.step)
                .ok_or_else(|| js_err(format!("step {} is not in the loaded dumps", o.step)))?;
            // Parsed once (here, by `check` or an earlier run); the merge takes copies.
            let mut kept: BTreeMap<(bool, String), Arc<RankDump>> = BTreeMap::new();
            for (_, d) in &st.npu {
                let r = self.npu.rank(d).map_err(|e| side_err("npu", &e))?;
                kept.insert((false, d.clone()), r);
            }
            if compare {
                for (_, d) in &st.bench {
                    let r = self.bench.rank(d).map_err(|e| side_err("bench", &e))?;
                    kept.insert((true, d.clone()), r);
                }
            }
            let mut load = |side: SideOf, dir: &str| -> Result<RankDump> {
                let key = (side == SideOf::Bench, dir.to_string());
                kept.get(&key)
                    .map(|d| RankDump::clone(d))
                    .ok_or_else(|| Error::file_not_found(dir))
            };
            let merged = merge::run_parallel_step(
                &self.npu,
                compare.then_some(&self.bench as &dyn Files),
                &st,
                &params,
                &opts,
                true,
                &mut load,
            )
            .map_err(js_err)?;
            let ranks: Vec<i64> = merged.iter().map(|(p, _)| p.rank).collect();
            let want = o.merged_rank.unwrap_or(ranks.first().copied().unwrap_or(0));
            let (pair, res) = merged
                .into_iter()
                .find(|(p, _)| p.rank == want)
                .ok_or_else(|| {
                    js_err(format!(
                        "step {} has no merged graph of rank {want} (merged ranks: {ranks:?})",
                        o.step
                    ))
                })?;
            (res, pair.npu_dir, pair.bench_dir, ranks, want)
        };
        let text = self.keep(res, npu_dir, bench_dir, None)?;
        let head = serde_json::json!({"ranks": ranks, "rank": rank}).to_string();
        // The DTO is an object: the merge info goes in as its first key (no second copy of the
        // answer as a JSON value).
        Ok(match text.strip_prefix('{') {
            Some(rest) if rest.starts_with('}') => format!("{{\"merge\":{head}}}"),
            Some(rest) => format!("{{\"merge\":{head},{rest}"),
            None => text,
        })
    }

    /// Keeps a finished run as the session's result (with the pre-orders the page's node indices
    /// refer to) and returns the run answer as JSON (the graphs' columns: `columns`).
    fn keep(
        &mut self,
        res: PairResult,
        npu_dir: String,
        bench_dir: Option<String>,
        rebuild: Option<bool>,
    ) -> std::result::Result<String, JsValue> {
        let (npu_order, bench_order) = view::orders(&res);
        let text = serde_json::to_string(&view::run_dto(&res, &npu_order, bench_order.as_ref()))
            .map_err(js_err)?;
        self.suspended = None;
        self.divergence.clear();
        self.last = Some(Last {
            res,
            npu_order,
            bench_order,
            npu_dir,
            bench_dir,
            rebuild,
        });
        Ok(text)
    }

    /// A suspended result built again ([`Session::suspend`]), as `run` built it: the same graph
    /// from the same parsed folder and option, so the page's node indices still hold.
    fn resume(&mut self) -> std::result::Result<(), JsValue> {
        let Some(s) = self.suspended.take() else {
            return Ok(());
        };
        let opts = RunOptions {
            overflow_check: s.overflow_check,
            ..RunOptions::default()
        };
        working_on(self.npu.display(&s.npu_dir));
        let built = run::run_pair(PairInput::shared(s.dump.clone(), None), &opts);
        let res = match built {
            Ok(res) => res,
            Err(e) => {
                self.suspended = Some(s);
                return Err(js_err(e));
            }
        };
        self.npu.build_count += 1;
        let (npu_order, bench_order) = view::orders(&res);
        self.last = Some(Last {
            res,
            npu_order,
            bench_order,
            npu_dir: s.npu_dir,
            bench_dir: None,
            rebuild: Some(s.overflow_check),
        });
        Ok(())
    }

    fn side(&mut self, side: &str) -> std::result::Result<&mut MemFiles, JsValue> {
        match side {
            "npu" => Ok(&mut self.npu),
            "bench" => Ok(&mut self.bench),
            other => Err(unknown_side(other)),
        }
    }
}

fn unknown_side(side: &str) -> JsValue {
    js_err(format!(
        "unknown side '{side}' (expected \"npu\" or \"bench\")"
    ))
}

#[wasm_bindgen]
impl Session {
    #[wasm_bindgen(constructor)]
    pub fn new() -> Session {
        Session {
            npu: MemFiles::new("npu"),
            bench: MemFiles::new("bench"),
            last: None,
            suspended: None,
            divergence: Vec::new(),
        }
    }

    /// How many rank folders `run` has parsed in this session (a re-run of the same pair with
    /// unchanged files parses none); for tests and diagnostics.
    #[wasm_bindgen(js_name = parsedRanks)]
    pub fn parsed_ranks(&self) -> u32 {
        self.npu.parse_count + self.bench.parse_count
    }

    /// How many graphs `run` has built in this session (each run builds its own); for tests.
    #[wasm_bindgen(js_name = builtGraphs)]
    pub fn built_graphs(&self) -> u32 {
        self.npu.build_count + self.bench.build_count
    }

    /// Frees the graph of this session's result if it is a build of one rank folder (the NPU folder
    /// shown alone), keeping its parsed folder: the worker calls it when the next load adopts a
    /// side from this session, so the compare that usually follows does not run beside a second
    /// copy of the NPU graph (the adopting session builds its own). If this session is used again
    /// (that load failed, and this result is still shown), the result is built again, the same, on
    /// first use (`run` did it in ~0.3 s for the 80-layer NPU folder). Returns whether anything was
    /// freed; a compare, a parallel merge or a result changed by hand is kept as it is.
    pub fn suspend(&mut self) -> bool {
        match self.last.take() {
            Some(Last {
                npu_dir,
                rebuild: Some(overflow_check),
                res,
                ..
            }) => {
                self.suspended = Some(Suspended {
                    npu_dir,
                    dump: res.npu.dump,
                    overflow_check,
                });
                true
            }
            other => {
                self.last = other;
                false
            }
        }
    }

    /// Whether the result is suspended (built again on its next use); for tests.
    #[wasm_bindgen(js_name = isSuspended)]
    pub fn is_suspended(&self) -> bool {
        self.suspended.is_some()
    }

    /// Caps the wasm memory at `bytes` (rounded down to 64 KiB pages; 0 = only the engine's
    /// limit, 4 GiB). A test knob (`?heap=` in the page): it makes the out-of-memory paths
    /// reachable with small inputs.
    #[wasm_bindgen(js_name = setHeapLimit)]
    pub fn set_heap_limit(bytes: f64) {
        #[cfg(target_arch = "wasm32")]
        heap::set_limit(bytes.max(0.0).min(usize::MAX as f64) as usize);
        #[cfg(not(target_arch = "wasm32"))]
        let _ = bytes;
    }

    /// Bytes per read of a lazy dump.json (default 4 MiB; 0 restores it). A test knob
    /// (`?slice=` in the page): small slices show that the file is read in parts.
    #[wasm_bindgen(js_name = setSliceBytes)]
    pub fn set_slice_bytes(bytes: f64) {
        let n = if bytes >= 1.0 {
            bytes.min(u32::MAX as f64) as usize
        } else {
            SLICE_BYTES
        };
        SLICE.with(|s| s.set(n));
    }

    /// Bytes of the last allocation the wasm memory could not grow for (0 = none since
    /// `clearHeapFailure`). After a trap, non-zero means the core ran out of memory.
    #[wasm_bindgen(js_name = heapFailure)]
    pub fn heap_failure() -> f64 {
        #[cfg(target_arch = "wasm32")]
        return heap::failure() as f64;
        #[cfg(not(target_arch = "wasm32"))]
        0.0
    }

    /// `[live, peak]`: bytes the core has allocated and not freed now, and the most since
    /// `resetHeapPeak` (a copying realloc counts both blocks). Against the memory's size they
    /// tell live data from the holes of a heap that never shrinks (bench/node.mjs reports them).
    #[wasm_bindgen(js_name = heapStats)]
    pub fn heap_stats() -> Vec<f64> {
        #[cfg(target_arch = "wasm32")]
        return vec![heap::live() as f64, heap::peak() as f64];
        #[cfg(not(target_arch = "wasm32"))]
        vec![0.0, 0.0]
    }

    /// Starts a new peak for `heapStats` at the live bytes now.
    #[wasm_bindgen(js_name = resetHeapPeak)]
    pub fn reset_heap_peak() {
        #[cfg(target_arch = "wasm32")]
        heap::reset_peak();
    }

    /// Forgets a recorded allocation failure (one that was reported gracefully).
    #[wasm_bindgen(js_name = clearHeapFailure)]
    pub fn clear_heap_failure() {
        #[cfg(target_arch = "wasm32")]
        heap::clear_failure();
    }

    /// The file or pair the core was last working on (see `heapFailure`).
    #[wasm_bindgen(js_name = heapWork)]
    pub fn heap_work() -> String {
        WORK.with(|w| w.borrow().clone())
    }

    /// The crate version.
    pub fn version() -> String {
        env!("CARGO_PKG_VERSION").to_string()
    }

    /// Names the dropped root folder of a side (used in messages).
    #[wasm_bindgen(js_name = setRootName)]
    pub fn set_root_name(&mut self, side: &str, name: &str) -> std::result::Result<(), JsValue> {
        self.side(side)?.root_name = name.to_string();
        Ok(())
    }

    /// Adds a whole file.
    #[wasm_bindgen(js_name = addFile)]
    pub fn add_file(
        &mut self,
        side: &str,
        path: &str,
        bytes: &[u8],
    ) -> std::result::Result<(), JsValue> {
        let s = self.side(side)?;
        let path = path.trim_start_matches('/');
        s.changed(path);
        s.expected.remove(path);
        s.lazy.remove(path);
        s.files.insert(path.to_string(), Arc::new(bytes.to_vec()));
        Ok(())
    }

    /// Registers a file whose bytes stay on the JS side (a tensor under `dump_tensor_data/`, or a
    /// dump.json): the core reads it through the reader of `setFileReader` only when it needs
    /// it, a dump.json in slices while parsing.
    #[wasm_bindgen(js_name = addLazyFile)]
    pub fn add_lazy_file(
        &mut self,
        side: &str,
        path: &str,
        size: f64,
    ) -> std::result::Result<(), JsValue> {
        let s = self.side(side)?;
        let path = path.trim_start_matches('/').to_string();
        s.changed(&path);
        s.files.remove(&path);
        s.expected.remove(&path);
        s.lazy.insert(path, size.max(0.0));
        Ok(())
    }

    /// The synchronous reader of lazy files: `reader(side, path)` returns the file's bytes as a
    /// `Uint8Array`, `reader(side, path, offset, length)` that slice of them (or throws; the
    /// file is then reported as unreadable).
    #[wasm_bindgen(js_name = setFileReader)]
    pub fn set_file_reader(&mut self, reader: js_sys::Function) {
        self.npu.reader = Some(reader.clone());
        self.bench.reader = Some(reader);
    }

    /// Starts a file that arrives in chunks.
    #[wasm_bindgen(js_name = beginFile)]
    pub fn begin_file(
        &mut self,
        side: &str,
        path: &str,
        total: f64,
    ) -> std::result::Result<(), JsValue> {
        let s = self.side(side)?;
        let path = path.trim_start_matches('/').to_string();
        s.changed(&path);
        // Refused from its size, before any byte is read (the CLI's check and message).
        if total > crate::base::error::MAX_FILE_BYTES as f64 {
            return Err(side_err(
                side,
                &Error::file_too_large(s.display(&path), total as u64),
            ));
        }
        let total = total.max(0.0) as usize;
        working_on(s.display(&path));
        let mut v = Vec::new();
        v.try_reserve_exact(total).map_err(|_| {
            Session::clear_heap_failure();
            side_err(
                side,
                &Error::input(s.display(&path), out_of_memory(total, "while reading it")),
            )
        })?;
        s.files.insert(path.clone(), Arc::new(v));
        if total > 0 {
            s.expected.insert(path, total);
        }
        Ok(())
    }

    /// Appends a chunk to a file started with `beginFile`.
    #[wasm_bindgen(js_name = appendChunk)]
    pub fn append_chunk(
        &mut self,
        side: &str,
        path: &str,
        bytes: &[u8],
    ) -> std::result::Result<(), JsValue> {
        let s = self.side(side)?;
        let path = path.trim_start_matches('/');
        let Some(buf) = s.files.get_mut(path) else {
            return Err(js_err(format!(
                "{}: appendChunk before beginFile",
                s.display(path)
            )));
        };
        // A file that is still arriving is this session's alone (were it shared, `make_mut` would
        // give this session its own copy and leave the other one's as it was).
        let buf = Arc::make_mut(buf);
        if buf.try_reserve(bytes.len()).is_err() {
            Session::clear_heap_failure();
            return Err(side_err(
                side,
                &Error::input(
                    s.display(path),
                    out_of_memory(bytes.len(), "while reading it"),
                ),
            ));
        }
        buf.extend_from_slice(bytes);
        if s.expected.get(path).is_some_and(|t| buf.len() >= *t) {
            s.expected.remove(path);
        }
        Ok(())
    }

    /// Parses every rank folder of one side now (without building), so a broken file is reported
    /// while the other side is still loading. Throws an Error with `side` and `file` set.
    /// The parsed folders are kept for `run` (and their raw json bytes freed).
    pub fn check(&mut self, side: &str) -> std::result::Result<(), JsValue> {
        let f = self.side(side)?;
        if f.is_empty() {
            return Ok(());
        }
        let plan = run::plan(f, None).map_err(|e| side_err(side, &e))?;
        for p in &plan.pairs {
            f.rank(&p.npu_dir).map_err(|e| side_err(side, &e))?;
        }
        Ok(())
    }

    /// Makes this session's `side` a copy of the same side of `from` (another session, e.g. the
    /// one whose result is shown while this one is being loaded): its files, the registrations of
    /// its lazy files (the host must give this session's reader their handles too), its parsed
    /// rank folders and root name. Nothing is parsed or read again, and the bytes and parsed
    /// dumps are shared, not copied; `from` stays usable. Throws for a side other than
    /// `"npu"`/`"bench"` (and wasm-bindgen's glue throws when `from` is this session).
    #[wasm_bindgen(js_name = adoptSide)]
    pub fn adopt_side(&mut self, from: &Session, side: &str) -> std::result::Result<(), JsValue> {
        let src = match side {
            "npu" => &from.npu,
            "bench" => &from.bench,
            other => return Err(unknown_side(other)),
        };
        self.side(side)?.adopt(src);
        Ok(())
    }

    /// Forgets the files of a side.
    #[wasm_bindgen(js_name = clearSide)]
    pub fn clear_side(&mut self, side: &str) -> std::result::Result<(), JsValue> {
        let s = self.side(side)?;
        let (name, reader) = (s.side, s.reader.take());
        *s = MemFiles::new(name);
        s.reader = reader;
        Ok(())
    }

    /// The step/rank layout of both sides as JSON.
    pub fn layout(&self) -> std::result::Result<String, JsValue> {
        let one = |f: &MemFiles,
                   other: Option<&MemFiles>|
         -> std::result::Result<serde_json::Value, JsValue> {
            if f.is_empty() {
                return Ok(serde_json::Value::Null);
            }
            let plan = run::plan(f, other.map(|o| o as &dyn Files)).map_err(js_err)?;
            let mut steps: Vec<i64> = plan.pairs.iter().map(|p| p.step).collect();
            steps.dedup();
            let mut ranks: Vec<i64> = plan.pairs.iter().map(|p| p.rank).collect();
            ranks.sort_unstable();
            ranks.dedup();
            Ok(serde_json::json!({"kind": plan.kind, "steps": steps, "ranks": ranks}))
        };
        let bench_some = !self.bench.is_empty();
        let npu = one(&self.npu, if bench_some { Some(&self.bench) } else { None })?;
        let bench = one(&self.bench, None)?;
        Ok(serde_json::json!({"npu": npu, "bench": bench}).to_string())
    }

    /// Builds or compares the chosen step and rank; returns the answer as JSON (`view::RunDto`:
    /// everything but the graphs' columns, which `columns` gives).
    pub fn run(&mut self, options: &str) -> std::result::Result<String, JsValue> {
        let o: RunOpts =
            serde_json::from_str(options).map_err(|e| js_err(format!("bad run options: {e}")))?;
        if self.npu.is_empty() {
            return Err(js_err("no NPU (debug side) dump loaded"));
        }
        let layer_mapping = o.layer_mapping()?;
        if !o.rank_size.is_empty() {
            return self.run_parallel(&o, layer_mapping);
        }
        let pair = self.planned_pair(o.step, o.rank)?;
        // A re-run of the same pair (another mapping from the editor, other options) parses
        // nothing.
        let (nd, bd) = self.pair_dumps(&pair)?;
        let opts = o.run_options(layer_mapping);
        working_on(match &pair.bench_dir {
            Some(b) => format!(
                "{} / {}",
                self.npu.display(&pair.npu_dir),
                self.bench.display(b)
            ),
            None => self.npu.display(&pair.npu_dir),
        });
        // Each run builds its graphs (the layer mapping first, as `run_pair` does it). A
        // build keeps no copy of its NPU graph for a compare of the same session: the page
        // compares in the session that adopts this side, and the copy sat in the heap beside
        // the build view's graph and, freed, left a hole that the Bench folder's parse filled
        // with pieces.
        self.npu.build_count += 1;
        self.bench.build_count += bd.is_some() as u32;
        // Real-tensor dumps read their tensors from the dropped folders (`dump_tensor_data/`).
        let tensors = pair.bench_dir.as_deref().map(|dir| run::TensorFiles {
            npu: &self.npu,
            npu_dir: &pair.npu_dir,
            bench: &self.bench,
            bench_dir: dir,
        });
        let rebuild = bd.is_none().then_some(opts.overflow_check);
        let mut res = run::run_pair(PairInput::shared(nd, bd), &opts).map_err(js_err)?;
        run::compare_pair_tensors(&mut res, tensors.as_ref());
        self.keep(res, pair.npu_dir, pair.bench_dir, rebuild)
    }

    /// The diagnosis of the shown compare (`compare::diagnose`), as JSON (`view::diagnosis_dto`:
    /// the verdict, the ranked suspects with their nodes' pre-order indices, the layer cells);
    /// `step` and `rank` label it. Manual matches since the run take part. The per-node
    /// divergence of the NPU graph is kept for [`Session::divergence`].
    pub fn diagnose(&mut self, step: i64, rank: i64) -> std::result::Result<String, JsValue> {
        self.resume()?;
        let last = self
            .last
            .as_ref()
            .ok_or_else(|| js_err("nothing has been run yet"))?;
        let sides = last.res.sides().ok_or_else(|| {
            js_err("the diagnosis compares two runs: load a Bench folder beside the NPU folder")
        })?;
        let d = diagnose_pair(sides, step, rank, None);
        let dto = view::diagnosis_dto(&d, Some(&last.npu_order), last.bench_order.as_ref());
        self.divergence = view::divergence_column(&d, &last.npu_order);
        Ok(dto.to_string())
    }

    /// Per NPU node in pre-order, log10 of its output's divergence in units of the noise floor
    /// (0: within it, NaN: not measured), from the last [`Session::diagnose`].
    pub fn divergence(&self) -> js_sys::Float32Array {
        js_sys::Float32Array::from(self.divergence.as_slice())
    }

    /// The diagnosis of another step or rank of the loaded folders (`options` as for `run`),
    /// without changing the shown result: its rank folders are parsed (unless parsed already),
    /// built, matched and diagnosed, and freed before it returns. For the step and rank
    /// heatmaps; a parallel merge is not taken here.
    #[wasm_bindgen(js_name = diagnoseStep)]
    pub fn diagnose_step(&mut self, options: &str) -> std::result::Result<String, JsValue> {
        let o: RunOpts =
            serde_json::from_str(options).map_err(|e| js_err(format!("bad run options: {e}")))?;
        if !o.rank_size.is_empty() {
            return Err(js_err(
                "the step and rank heatmaps are not made with a parallel merge (rank size)",
            ));
        }
        if self.npu.is_empty() || self.bench.is_empty() {
            return Err(js_err(
                "the diagnosis compares two runs: load a Bench folder beside the NPU folder",
            ));
        }
        let opts = o.run_options(o.layer_mapping()?);
        let pair = self.planned_pair(o.step, o.rank)?;
        let bench_dir = pair.bench_dir.clone().ok_or_else(|| {
            js_err(format!(
                "step {} rank {} has no Bench folder",
                o.step, o.rank
            ))
        })?;
        let load = |f: &MemFiles, side: &str, dir: &str| match f.parsed.get(dir) {
            Some(d) => Ok(d.clone()),
            None => run::load_rank(f, dir)
                .map(Arc::new)
                .map_err(|e| side_err(side, &e)),
        };
        working_on(self.npu.display(&pair.npu_dir));
        let nd = load(&self.npu, "npu", &pair.npu_dir)?;
        let bd = load(&self.bench, "bench", &bench_dir)?;
        let res = run::run_pair(PairInput::shared(nd, Some(bd)), &opts).map_err(js_err)?;
        let sides = res
            .sides()
            .ok_or_else(|| js_err("the diagnosis compares two runs"))?;
        let d = diagnose_pair(sides, o.step, o.rank, None);
        Ok(view::diagnosis_dto(&d, None, None).to_string())
    }

    /// Manually matches NPU node `npu_index` with Bench node `bench_index` (pre-order indices) and
    /// compares them by msprobe's rules; `recursive` also matches corresponding descendants.
    /// Returns the changes as JSON `{"npu": [[index, precision|null, matched], ...], "bench": [...]}`.
    /// Refuses (throws) pairs of different node types, as msprobe's UI does.
    #[wasm_bindgen(js_name = matchNodes)]
    pub fn match_nodes(
        &mut self,
        npu_index: u32,
        bench_index: u32,
        recursive: bool,
    ) -> std::result::Result<String, JsValue> {
        self.resume()?;
        let last = self
            .last
            .as_mut()
            .ok_or_else(|| js_err("nothing has been run yet"))?;
        apply_matches(
            last,
            &[(npu_index, bench_index, recursive)],
            &self.npu,
            &self.bench,
        )
    }

    /// Several manual matches at once (e.g. a loaded `.vis.config`): `pairs` is JSON
    /// `[[npuIndex, benchIndex, recursive], ...]`; returns one change list like `matchNodes`.
    /// A pair that cannot be matched stops the batch with an error naming it; earlier pairs stay.
    #[wasm_bindgen(js_name = matchMany)]
    pub fn match_many(&mut self, pairs: &str) -> std::result::Result<String, JsValue> {
        let pairs: Vec<(u32, u32, bool)> =
            serde_json::from_str(pairs).map_err(|e| js_err(format!("bad pair list: {e}")))?;
        self.resume()?;
        let last = self
            .last
            .as_mut()
            .ok_or_else(|| js_err("nothing has been run yet"))?;
        apply_matches(last, &pairs, &self.npu, &self.bench)
    }

    /// Removes the match of a node (manual or automatic) on `side`; returns the changes like
    /// `matchNodes`.
    pub fn unmatch(&mut self, side: &str, index: u32) -> std::result::Result<String, JsValue> {
        self.resume()?;
        let last = self
            .last
            .as_mut()
            .ok_or_else(|| js_err("nothing has been run yet"))?;
        let npu = match side {
            "npu" => true,
            "bench" => false,
            other => return Err(js_err(format!("unknown side '{other}'"))),
        };
        let order = if npu {
            Some(&last.npu_order)
        } else {
            last.bench_order.as_ref()
        };
        let id = *order
            .and_then(|o| o.ids.get(index as usize))
            .ok_or_else(|| js_err(format!("no node {index}")))?;
        let before = snapshot(last);
        let res = &mut last.res;
        let (Some(bs), Some(cmp)) = (res.bench.as_mut(), res.comparison.as_mut()) else {
            return Err(js_err("matching needs two sides"));
        };
        crate::compare::unmatch(&mut res.npu.graph, &mut bs.graph, cmp, id, npu);
        Ok(changes(last, &before))
    }

    /// The default minimum score of "accept all" (`suggest::DEFAULT_MIN_SCORE`, 0.65).
    #[wasm_bindgen(js_name = defaultMinScore)]
    pub fn default_min_score() -> f64 {
        crate::compare::suggest::DEFAULT_MIN_SCORE
    }

    /// Match suggestions for the grey NPU nodes of the last run, as JSON
    /// `[{"npu": index, "bench": index, "score": s, "reason": text}, ...]` (pre-order indices):
    /// grouped by NPU node in pre-order, best candidate first, at most three per node, each
    /// scoring at least `min_score` (in [0, 1]). Computed afresh from the current matches, so
    /// manual matches and unmatches are taken into account.
    pub fn suggest(&mut self, min_score: f64) -> std::result::Result<String, JsValue> {
        self.resume()?;
        let last = self
            .last
            .as_ref()
            .ok_or_else(|| js_err("nothing has been run yet"))?;
        let bo = last
            .bench_order
            .as_ref()
            .ok_or_else(|| js_err("suggestions need two sides"))?;
        let list: Vec<serde_json::Value> = crate::compare::suggest::suggest(&last.res, min_score)
            .into_iter()
            .filter_map(|s| {
                let n = *last.npu_order.index_of.get(s.npu as usize)?;
                let b = *bo.index_of.get(s.bench as usize)?;
                (n >= 0 && b >= 0).then(|| {
                    serde_json::json!({"npu": n, "bench": b, "score": s.score, "reason": s.reason})
                })
            })
            .collect();
        serde_json::to_string(&list).map_err(js_err)
    }

    /// Accepts every suggestion of at least `min_score`, round after round until nothing changes
    /// (each accepted pair anchors its descendants); pairs are compared by msprobe's rules (and
    /// get their tensor metrics in real-data mode) and marked modified. Returns the changes like
    /// `matchNodes`.
    #[wasm_bindgen(js_name = acceptSuggestions)]
    pub fn accept_suggestions(&mut self, min_score: f64) -> std::result::Result<String, JsValue> {
        self.resume()?;
        let last = self
            .last
            .as_mut()
            .ok_or_else(|| js_err("nothing has been run yet"))?;
        if last.res.comparison.is_none() {
            return Err(js_err("suggestions need two sides"));
        }
        let before = snapshot(last);
        crate::compare::suggest::accept_all(&mut last.res, min_score);
        if let Some(dir) = last.bench_dir.as_deref() {
            let tensors = run::TensorFiles {
                npu: &self.npu,
                npu_dir: &last.npu_dir,
                bench: &self.bench,
                bench_dir: dir,
            };
            run::compare_pair_tensors(&mut last.res, Some(&tensors));
        }
        Ok(changes(last, &before))
    }

    /// The layer-mapping yaml that reproduces matched pairs (modules, APIs, parameter gradients):
    /// `current_yaml` (may be empty) with the rules added that make msprobe's layer-mapping
    /// algorithm match `pairs` (JSON `[[npuName, benchName], ...]`, node names of the last run).
    /// Comments and content of `current_yaml` are kept; new keys are appended, new rules of an
    /// existing key go into its block.
    #[wasm_bindgen(js_name = exportMapping)]
    pub fn export_mapping(
        &mut self,
        current_yaml: &str,
        pairs: &str,
    ) -> std::result::Result<String, JsValue> {
        Ok(self.export(current_yaml, pairs)?.yaml)
    }

    /// Like `exportMapping`, with the report, as JSON: `{"yaml": text, "added": [{"key", "src",
    /// "dst"}, ...], "reproduced": [[npuName, benchName], ...], "missed": [[npuName, benchName,
    /// why], ...]}`. `reproduced` are the pairs a run with the merged yaml matches (the
    /// layer-mapping algorithm on the last run's dumps, nodes that are not dump.json entries by
    /// their own name, as msprobe), `missed` the others with the reason.
    #[wasm_bindgen(js_name = exportMappingReport)]
    pub fn export_mapping_report(
        &mut self,
        current_yaml: &str,
        pairs: &str,
    ) -> std::result::Result<String, JsValue> {
        serde_json::to_string(&self.export(current_yaml, pairs)?).map_err(js_err)
    }

    /// Checks a layer-mapping yaml without running: returns JSON `{"keys": n, "rules": m,
    /// "scoped": bool, "invalid": null | text}` (`invalid`: content msprobe cannot use, which makes
    /// the mapping empty as in msprobe). A syntax error throws an `Error` with `file`, `detail`,
    /// and `line`/`column` (1-based) when the parser knows them.
    #[wasm_bindgen(js_name = checkMapping)]
    pub fn check_mapping(name: &str, text: &str) -> std::result::Result<String, JsValue> {
        match LayerMapping::parse(name, text) {
            Ok(m) => {
                let (keys, rules) = m.counts();
                Ok(serde_json::json!({
                    "keys": keys,
                    "rules": rules,
                    "scoped": m.has_scoped_keys(),
                    "invalid": m.invalid,
                })
                .to_string())
            }
            Err(e) => {
                let err = js_sys::Error::new(&e.to_string());
                let set = |k: &str, v: JsValue| {
                    let _ = js_sys::Reflect::set(&err, &JsValue::from_str(k), &v);
                };
                set("file", JsValue::from_str(e.file()));
                set("detail", JsValue::from_str(e.message()));
                if let crate::base::error::Place::LineCol(l, c)
                | crate::base::error::Place::PathAt(_, l, c) = e.place()
                {
                    set("line", JsValue::from_f64(*l as f64));
                    set("column", JsValue::from_f64(*c as f64));
                }
                Err(err.into())
            }
        }
    }

    /// The graph columns of one side (`"npu"`/`"bench"`) of the last result, in one
    /// little-endian buffer (`view::graph_columns`: the layout; the `run` answer has only
    /// `{"nodes": n}` per side). The current state: manual matches since the run are in it.
    /// Written straight into a JS array in pieces (`view::write_columns`): a buffer of the whole
    /// in the wasm memory grew it by 16 MB on the 80-layer pair, past the run's own peak.
    pub fn columns(&mut self, side: &str) -> std::result::Result<js_sys::Uint8Array, JsValue> {
        self.resume()?;
        let last = self
            .last
            .as_ref()
            .ok_or_else(|| js_err("nothing has been run yet"))?;
        let (g, order, other) = match side {
            "npu" => (
                &last.res.npu.graph,
                &last.npu_order,
                last.bench_order.as_ref(),
            ),
            "bench" => match (&last.res.bench, &last.bench_order) {
                (Some(b), Some(o)) => (&b.graph, o, Some(&last.npu_order)),
                _ => return Err(js_err("no bench graph in this result")),
            },
            other => return Err(unknown_side(other)),
        };
        let len = u32::try_from(view::columns_len(g, order))
            .map_err(|_| js_err("the graph's columns pass 4 GiB"))?;
        let out = js_sys::Uint8Array::new_with_length(len);
        view::write_columns(g, order, other, &mut |at, bytes| {
            // Within `len` (write_columns writes exactly columns_len bytes).
            out.subarray(at as u32, (at + bytes.len()) as u32)
                .copy_from(bytes)
        });
        Ok(out)
    }

    /// Details of the node at pre-order `index` of a side, as JSON.
    pub fn node(&mut self, side: &str, index: u32) -> std::result::Result<String, JsValue> {
        self.resume()?;
        let last = self
            .last
            .as_ref()
            .ok_or_else(|| js_err("nothing has been run yet"))?;
        let (sel, order) = match side {
            "npu" => (SideSel::Npu, Some(&last.npu_order)),
            "bench" => (SideSel::Bench, last.bench_order.as_ref()),
            other => return Err(js_err(format!("unknown side '{other}'"))),
        };
        let order = order.ok_or_else(|| js_err("no bench graph in this result"))?;
        let id = *order
            .ids
            .get(index as usize)
            .ok_or_else(|| js_err(format!("no node {index}")))?;
        let dto =
            view::node_dto(&last.res, sel, id).ok_or_else(|| js_err(format!("no node {index}")))?;
        serde_json::to_string(&dto).map_err(js_err)
    }
}

impl Default for Session {
    fn default() -> Self {
        Self::new()
    }
}
