//! The `probelens` command line: a drop-in for `msprobe graph_visualize`, writing the same
//! `.vis.db`. All IO (files, clock, SQLite, terminal) lives here; the library does none.

use probelens::base::error::{Error, Result};
use probelens::base::Files;
use probelens::compare::pair::PairResult;
use probelens::mapping::LayerMapping;
use probelens::run::{self, Checkers, PairInput, PairPlan, Plan, RunOptions};
use probelens::visdb;
use probelens::visdb::export::{
    self, ConfigRow, DistNode, GraphExport, GraphRows, NodeRow, Sink, StackRow,
};
use probelens::visdb::sqlite_writer::Writer;
use rusqlite::{params, Connection};
use std::borrow::Cow;
use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

/// The CLI allocates many small strings; mimalloc is markedly faster than glibc's malloc here.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

// mimalloc's `mi_option_set` and `mi_collect` (in the linked mimalloc; the crate exposes them
// only with its `extended` feature).
extern "C" {
    fn mi_option_set(option: std::os::raw::c_int, value: std::os::raw::c_long);
    fn mi_collect(force: bool);
}

/// Hands the memory freed so far back to the system now, not after the purge delay: after a
/// result is freed, before the next one or the index phase allocates. The freed result stayed
/// resident beside the index keys read back: the scale pair's peak RSS with the db was 170 MB,
/// 161 MB with this (medians of 6 alternating runs; the spread 159-177 became 159-163 MB).
fn give_back_freed() {
    // SAFETY: a plain call into the allocator this binary links; no pointers involved.
    unsafe { mi_collect(true) }
}
/// `mi_option_purge_delay` and `mi_option_allow_thp` in mimalloc's `mi_option_e` (v3 header,
/// the crate's default).
const MI_OPTION_PURGE_DELAY: std::os::raw::c_int = 15;
const MI_OPTION_ALLOW_THP: std::os::raw::c_int = 43;

/// By default mimalloc hands freed pages back to the OS after 10 ms; a compare frees and grows
/// hundreds of MB in bursts, so the same pages were decommitted and faulted in (zeroed) again and
/// again: a third of the run was the kernel clearing pages (80-layer pair: 7.8 s at 10 ms, 3.4 s
/// at one second). 100 ms keeps the speed and ~20 MB less at the peak than one second, which
/// held freed parse and compare buffers past the compare (no-db peak 278 -> 258 MB; 0 ms: 253 MB
/// but a third more system time).
/// Transparent huge pages (mimalloc asks for them with `madvise`) made the kernel zero 2 MiB at
/// a time on first touch: without them system time fell from ~2.4 s to ~1 s on the same pair.
fn tune_allocator() {
    // SAFETY: plain option setters of the allocator this binary links; no pointers involved.
    unsafe {
        mi_option_set(MI_OPTION_PURGE_DELAY, 100);
        mi_option_set(MI_OPTION_ALLOW_THP, 0);
    }
    // mimalloc reads `allow_thp` once at start-up (before `main`), where it would disable THP
    // for the process; do the same here.
    #[cfg(target_os = "linux")]
    {
        extern "C" {
            fn prctl(option: std::os::raw::c_int, ...) -> std::os::raw::c_int;
        }
        const PR_SET_THP_DISABLE: std::os::raw::c_int = 41;
        // SAFETY: prctl with integer arguments only; failure just leaves THP as it was.
        unsafe {
            prctl(
                PR_SET_THP_DISABLE,
                1 as std::os::raw::c_ulong,
                0 as std::os::raw::c_ulong,
                0 as std::os::raw::c_ulong,
                0 as std::os::raw::c_ulong,
            );
        }
    }
}

const USAGE: &str = "usage: probelens graph_visualize -tp TARGET_PATH [-gp GOLDEN_PATH] -o OUTPUT_PATH \
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

Other commands:
  probelens suggest -tp NPU -gp BENCH [-lm [YAML]] [--min-score S] [--export-yaml OUT.yaml]
                             ranked match suggestions for grey nodes (see `probelens suggest -h`)
  probelens diagnose -tp NPU -gp BENCH [-lm [YAML]] [--top K] [--json]
                             where the two runs part ways (see `probelens diagnose -h`)
  probelens version";

const SUGGEST_USAGE: &str =
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

/// Distributed nodes per (data source, step), then per rank.
type DistBySource = Vec<(&'static str, i64, Vec<(i64, Vec<DistNode>)>)>;

struct Args {
    target: PathBuf,
    golden: Option<PathBuf>,
    output: PathBuf,
    layer_mapping: Option<Option<PathBuf>>,
    fuzzy: bool,
    overflow: bool,
    progress_log: bool,
    no_progress: bool,
    timing: bool,
    no_db: bool,
    layout_aware: bool,
    /// `--rank_size/--tp/--pp/--vpp/--order` as given (empty: no parallel merge).
    rank_size: Vec<i64>,
    tp: Vec<i64>,
    pp: Vec<i64>,
    vpp: Vec<i64>,
    order: Vec<String>,
    /// `--file_type json`.
    json: bool,
}

/// msprobe's `load_parallel_param` (shared with the page: `merge::load_params`).
fn parallel_params(
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

fn parse_args(argv: &[String]) -> std::result::Result<Args, String> {
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
    })
}

/// Files under a root folder on disk.
struct FsFiles {
    root: PathBuf,
    shown: String,
}

/// The core's [`probelens::base::Join`]: the second piece of work on a scoped thread while this
/// thread does the first.
fn two_threads(a: &mut (dyn FnMut() + Send), b: &mut (dyn FnMut() + Send)) {
    std::thread::scope(|s| {
        s.spawn(b);
        a();
    });
}

impl FsFiles {
    fn new(root: &Path) -> Result<FsFiles> {
        let meta = std::fs::metadata(root)
            .map_err(|e| Error::input(root.display().to_string(), format!("cannot open: {e}")))?;
        if !meta.is_dir() {
            return Err(Error::input(
                root.display().to_string(),
                "not a folder (the dump path must be a folder)",
            ));
        }
        Ok(FsFiles {
            root: root.to_path_buf(),
            shown: root.display().to_string(),
        })
    }
}

impl FsFiles {
    fn io_error(&self, path: &str, e: std::io::Error) -> Error {
        if e.kind() == std::io::ErrorKind::NotFound {
            Error::file_not_found(self.display(path))
        } else {
            Error::input(self.display(path), format!("cannot read: {e}"))
        }
    }
}

impl Files for FsFiles {
    fn list(&self, dir: &str) -> Result<Vec<(String, bool)>> {
        let p = self.root.join(dir);
        let rd = std::fs::read_dir(&p)
            .map_err(|e| Error::input(self.display(dir), format!("cannot list: {e}")))?;
        let mut out = Vec::new();
        for e in rd.flatten() {
            let is_dir = std::fs::metadata(e.path())
                .map(|m| m.is_dir())
                .unwrap_or(false);
            out.push((e.file_name().to_string_lossy().into_owned(), is_dir));
        }
        Ok(out)
    }
    fn read(&self, path: &str) -> Result<Cow<'_, [u8]>> {
        let p = self.root.join(path);
        // Refuse before reading what the core could never hold (its offsets are 32-bit).
        if let Ok(m) = std::fs::metadata(&p) {
            if m.len() > probelens::base::error::MAX_FILE_BYTES {
                return Err(Error::file_too_large(self.display(path), m.len()));
            }
        }
        match std::fs::read(&p) {
            Ok(b) => Ok(Cow::Owned(b)),
            Err(e) => Err(self.io_error(path, e)),
        }
    }
    fn size(&self, path: &str) -> Result<u64> {
        let p = self.root.join(path);
        match std::fs::metadata(&p) {
            Ok(m) if m.len() > probelens::base::error::MAX_FILE_BYTES => {
                Err(Error::file_too_large(self.display(path), m.len()))
            }
            Ok(m) if m.is_file() => Ok(m.len()),
            // A folder or a special file: `read` says what is wrong.
            Ok(_) => self.read(path).map(|b| b.len() as u64),
            Err(e) => Err(self.io_error(path, e)),
        }
    }
    /// 8 MB reads into one buffer: the dump.json parser drops what it has parsed, so a rank
    /// folder's dump is never held whole.
    fn read_chunks(&self, path: &str, sink: &mut dyn FnMut(&[u8]) -> Result<()>) -> Result<()> {
        use std::io::Read;
        let p = self.root.join(path);
        let mut file = std::fs::File::open(&p).map_err(|e| self.io_error(path, e))?;
        let mut buf = vec![0u8; 8 << 20];
        loop {
            let n = match file.read(&mut buf) {
                Ok(0) => return Ok(()),
                Ok(n) => n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(self.io_error(path, e)),
            };
            sink(&buf[..n])?;
        }
    }
    fn display(&self, path: &str) -> String {
        if path.is_empty() {
            self.shown.clone()
        } else {
            format!("{}/{}", self.shown.trim_end_matches('/'), path)
        }
    }
}

/// `time.strftime("%Y%m%d%H%M%S")` (UTC; msprobe uses local time, which is UTC on our machines).
fn timestamp() -> String {
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

/// Rows encoded as SQLite records by the thread that formats them (`sqlite_writer::append_record`),
/// waiting to be packed into pages.
#[derive(Default)]
struct Batch {
    bytes: Vec<u8>,
    /// Each row's table and where its record ends in `bytes`.
    rows: Vec<(usize, usize)>,
}

/// The database writer shared by the formatting threads, and its first error (after which
/// rows are dropped; the error is reported when the export ends).
struct SharedDb {
    db: DbWriter,
    err: Option<std::io::Error>,
}

/// The export's [`Sink`] on a formatting thread: rows are encoded here into a batch, and the
/// batch is packed into the file's pages by the same thread, under the writer's lock, while it
/// is still in this core's cache (a writer thread of its own read every batch from the other
/// cores' caches, and was a third thread on two cores).
struct DbSink<'w> {
    batch: Batch,
    shared: &'w std::sync::Mutex<SharedDb>,
    /// The database file (another handle to it): the table leaves the writer hands over
    /// (`Writer::hand_runs`) are written here after the lock is let go.
    out: &'w DbFile,
    runs: Vec<(u64, Vec<u8>)>,
    /// Buffers of runs written, given back to the writer at the next lock.
    written: Vec<Vec<u8>>,
}

impl<'w> DbSink<'w> {
    /// A batch is packed at this many rows or bytes.
    const ROWS: usize = 512;
    const BYTES: usize = 256 << 10;
    fn new(shared: &'w std::sync::Mutex<SharedDb>, out: &'w DbFile) -> DbSink<'w> {
        DbSink {
            batch: Batch {
                bytes: Vec::with_capacity(Self::BYTES + (Self::BYTES >> 2)),
                rows: Vec::with_capacity(Self::ROWS),
            },
            shared,
            out,
            runs: Vec::new(),
            written: Vec::new(),
        }
    }
    fn push(&mut self, table: usize, values: &[probelens::visdb::sqlite_writer::Value]) {
        probelens::visdb::sqlite_writer::append_record(values, &mut self.batch.bytes);
        self.batch.rows.push((table, self.batch.bytes.len()));
        if self.batch.rows.len() >= Self::ROWS || self.batch.bytes.len() >= Self::BYTES {
            self.flush();
        }
    }
    fn expect_nodes(&mut self, n: usize) {
        self.flush();
        if let Ok(mut s) = self.shared.lock() {
            s.db.expect_rows(visdb::TB_NODES, n);
        }
    }
    /// Another sink into the same writer (for a second formatting thread).
    fn sibling(&self) -> DbSink<'w> {
        DbSink::new(self.shared, self.out)
    }
    fn flush(&mut self) {
        if self.batch.rows.is_empty() {
            return;
        }
        // A poisoned lock: the other thread panicked (the scope passes the panic on).
        if let Ok(mut s) = self.shared.lock() {
            let s = &mut *s;
            for buf in self.written.drain(..) {
                s.db.give_back(buf);
            }
            if s.err.is_none() {
                let mut start = 0;
                for &(table, end) in &self.batch.rows {
                    if let Err(e) = s.db.insert_record(table, &self.batch.bytes[start..end]) {
                        s.err = Some(e);
                        break;
                    }
                    start = end;
                }
            }
            s.db.take_runs(&mut self.runs);
        }
        self.batch.bytes.clear();
        self.batch.rows.clear();
        // The full leaves, outside the lock: the other thread packs its rows meanwhile.
        for (at, bytes) in self.runs.drain(..) {
            use probelens::visdb::sqlite_writer::Output;
            if let Err(e) = self.out.write_at(at, &bytes) {
                if let Ok(mut s) = self.shared.lock() {
                    s.err.get_or_insert(e);
                }
            }
            self.written.push(bytes);
        }
    }
}

impl Sink for DbSink<'_> {
    fn node(&mut self, row: NodeRow<&str>) {
        self.push(visdb::TB_NODES, &visdb::node_values(&row));
    }
    fn stack(&mut self, row: StackRow) {
        self.push(visdb::TB_STACK, &visdb::stack_values(&row));
    }
}

type DbWriter = Writer<DbFile>;

/// The database file, written at page offsets (from the two threads that write the indexes).
struct DbFile(std::fs::File);

impl probelens::visdb::sqlite_writer::Output for DbFile {
    #[cfg(unix)]
    fn write_at(&self, offset: u64, data: &[u8]) -> std::io::Result<()> {
        std::os::unix::fs::FileExt::write_all_at(&self.0, data, offset)
    }
    #[cfg(windows)]
    fn write_at(&self, mut offset: u64, mut data: &[u8]) -> std::io::Result<()> {
        while !data.is_empty() {
            let n = std::os::windows::fs::FileExt::seek_write(&self.0, data, offset)?;
            if n == 0 {
                return Err(std::io::ErrorKind::WriteZero.into());
            }
            data = &data[n..];
            offset += n as u64;
        }
        Ok(())
    }
}

struct Progress {
    bar: bool,
    log: bool,
    total: usize,
    start: Instant,
}

impl Progress {
    fn update(&self, done: usize, what: &str) {
        let pct = (done * 100).checked_div(self.total).unwrap_or(100);
        if self.log {
            println!("PROGRESS: {{\"current_progress\": {pct}, \"process_running\": {}, \"error_msg\": []}}", done < self.total);
        }
        if self.bar {
            let width = 30;
            let filled = width * pct / 100;
            eprint!(
                "\r[Graph] Overall Progress: {:>3}%|{}{}| {:.1}s {what:<40}",
                pct,
                "█".repeat(filled),
                " ".repeat(width - filled),
                self.start.elapsed().as_secs_f64()
            );
            if done >= self.total {
                eprintln!();
            }
            let _ = std::io::stderr().flush();
        }
    }
}

/// The CPU time (user + system) this process has used so far, all threads: `--timing` prints it
/// per stage beside the wall time, which shows how well a stage keeps the cores busy.
#[cfg(target_os = "linux")]
fn cpu_time() -> Option<f64> {
    // `struct rusage` on 64-bit Linux: two `timeval`s (seconds, microseconds) then 14 longs.
    #[repr(C)]
    struct Rusage {
        utime: [i64; 2],
        stime: [i64; 2],
        rest: [i64; 14],
    }
    extern "C" {
        fn getrusage(who: std::os::raw::c_int, usage: *mut Rusage) -> std::os::raw::c_int;
    }
    const RUSAGE_SELF: std::os::raw::c_int = 0;
    let mut u = Rusage {
        utime: [0; 2],
        stime: [0; 2],
        rest: [0; 14],
    };
    // SAFETY: getrusage writes one `struct rusage` (laid out as `Rusage` on 64-bit Linux).
    let rc = unsafe { getrusage(RUSAGE_SELF, &mut u) };
    let secs = |t: [i64; 2]| t[0] as f64 + t[1] as f64 * 1e-6;
    (rc == 0 && cfg!(target_pointer_width = "64")).then(|| secs(u.utime) + secs(u.stime))
}
#[cfg(not(target_os = "linux"))]
fn cpu_time() -> Option<f64> {
    None
}

/// `--timing`'s CPU line: the CPU seconds between successive marks.
struct CpuMarks(Vec<(&'static str, Option<f64>)>);

impl CpuMarks {
    fn mark(&mut self, stage: &'static str) {
        self.0.push((stage, cpu_time()));
    }
    fn line(&self) -> String {
        let mut out = String::from("probelens: cpu");
        for w in self.0.windows(2) {
            if let [(_, Some(a)), (stage, Some(b))] = w {
                out.push_str(&format!(" {stage} {:.3}s", b - a));
            }
        }
        out
    }
}

fn db_err(path: &Path, e: impl std::fmt::Display) -> Error {
    Error::input(
        path.display().to_string(),
        format!("cannot write the database: {e}"),
    )
}

fn graph_visualize(a: &Args) -> Result<PathBuf> {
    let t0 = Instant::now();
    let mut cpu = CpuMarks(Vec::new());
    cpu.mark("start");
    let npu = FsFiles::new(&a.target)?;
    let bench = match &a.golden {
        Some(g) => Some(FsFiles::new(g)?),
        None => None,
    };
    let plan: Plan = run::plan(&npu, bench.as_ref().map(|b| b as &dyn Files))?;
    let parallel = parallel_params(a).map_err(|m| Error::input("--rank_size", m))?;
    let units: Vec<Unit> = match &parallel {
        None => plan.pairs.iter().map(Unit::Single).collect(),
        // One rank folder: msprobe merges nothing (a compare still uses the parallel-merge
        // checker set); its json export needs rank folders.
        Some(_) if plan.kind == run::Kind::Files => {
            if a.json && a.golden.is_none() {
                return Err(Error::input(
                    npu.display(""),
                    "You have specified the \"--rank_size\" parameter for data merging, so the \"-tp\" parameter must pass in multiple rank data.",
                ));
            }
            plan.pairs.iter().map(Unit::Single).collect()
        }
        Some(_) => {
            let (steps, _) = probelens::merge::plan(&npu, bench.as_ref().map(|b| b as &dyn Files))?;
            steps.into_iter().map(Unit::Step).collect()
        }
    };
    let layer_mapping = match &a.layer_mapping {
        None => None,
        Some(None) => Some(LayerMapping::empty()),
        Some(Some(p)) => {
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
            let text = std::fs::read(p).map_err(|e| {
                Error::input(
                    p.display().to_string(),
                    format!("cannot read the layer mapping: {e}"),
                )
            })?;
            let text = String::from_utf8(text).map_err(|_| {
                Error::input(
                    p.display().to_string(),
                    "the layer mapping is not UTF-8 text",
                )
            })?;
            Some(LayerMapping::parse(&p.display().to_string(), &text)?)
        }
    };
    let opts = RunOptions {
        layer_mapping,
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
        return json_export(&npu, &units, params, &opts, &a.output);
    }
    if a.no_db {
        if let Some(params) = &parallel {
            for unit in &units {
                if let Unit::Step(st) = unit {
                    for (pair, res) in
                        run_parallel_step(&npu, bench.as_ref(), st, params, &opts, true)?
                    {
                        for d in &res.diagnostics {
                            eprintln!("probelens: {d}");
                        }
                        print_counts(&pair, &res);
                    }
                }
            }
            return Ok(PathBuf::new());
        }
    }
    if a.no_db {
        return compare_only(a, &npu, bench.as_ref(), &plan, &opts, t0);
    }
    std::fs::create_dir_all(&a.output).map_err(|e| {
        Error::input(
            a.output.display().to_string(),
            format!("cannot create the output folder: {e}"),
        )
    })?;
    let kind = if bench.is_some() { "compare" } else { "build" };
    let db_path = a.output.join(format!("{kind}_{}.vis.db", timestamp()));
    let tmp_path = db_path.with_extension("db.part");
    let _ = std::fs::remove_file(&tmp_path);
    // On an error below, the partial database goes away (after the connection closes: declared
    // first, dropped last). After the final rename there is nothing left to remove.
    let _part = PartFile(tmp_path.clone());
    // The index keys' texts wait here while the rows are written (`FileSpill`).
    let keys_path = db_path.with_extension("db.keys");
    let _ = std::fs::remove_file(&keys_path);
    let _keys_part = PartFile(keys_path.clone());
    // The file is written directly as SQLite pages (`probelens::visdb::sqlite_writer`): rows as they
    // come, indexes sorted and packed at the end. Inserting through SQLite cost ~4 s of the
    // scale pair's ~6.5 s; the content is the same (the fidelity tests read it back with SQLite).
    let file = std::fs::File::create(&tmp_path).map_err(|e| db_err(&db_path, e))?;
    let (tables, indexes) = visdb::schema();
    // A second handle for the table leaves the formatting threads write (`DbSink`).
    let leaves_out = DbFile(file.try_clone().map_err(|e| db_err(&db_path, e))?);
    let mut db = Writer::new(DbFile(file), tables, indexes).map_err(|e| db_err(&db_path, e))?;
    db.hand_runs();
    db.set_key_budget(key_budget());
    db.set_spill(Box::new(
        FileSpill::create(&keys_path).map_err(|e| db_err(&keys_path, e))?,
    ));
    let progress = Progress {
        bar: !a.no_progress && std::io::stderr().is_terminal(),
        log: a.progress_log,
        total: units.len(),
        start: t0,
    };
    let mut config: Option<ConfigRow> = None;
    // (data_source, step) -> ranks -> distributed nodes
    let mut dist: DistBySource = Vec::new();
    // Rows are formatted, encoded and packed into pages by the formatting threads
    // (`export_graphs`), which share the writer.
    let shared = std::sync::Mutex::new(SharedDb { db, err: None });
    let db = {
        let mut sink = DbSink::new(&shared, &leaves_out);
        let produced = (|| -> Result<()> {
            progress.update(0, "building graphs");
            let mut rank_list: Option<Vec<i64>> = None;
            for (i, unit) in units.iter().enumerate() {
                let tp = Instant::now();
                let mut t_parse = std::time::Duration::ZERO;
                let results: Vec<(PairPlan, PairResult)> = match unit {
                    Unit::Single(pair) => {
                        let (res, parsed) = run_loaded_pair(
                            &npu,
                            bench.as_ref(),
                            pair,
                            &opts,
                            if parallel.is_some() {
                                Checkers::ParallelMerge
                            } else {
                                Checkers::Standard
                            },
                            tp,
                        )?;
                        t_parse = parsed;
                        vec![((*pair).clone(), res)]
                    }
                    Unit::Step(s) => {
                        let params = parallel.as_deref().unwrap_or_default();
                        run_parallel_step(&npu, bench.as_ref(), s, params, &opts, true)?
                    }
                };
                if rank_list.is_none() && parallel.is_some() {
                    rank_list = Some(results.iter().map(|(p, _)| p.rank).collect());
                }
                let t_cmp = tp.elapsed();
                // The parse and the graph builds overlap (`run_loaded_pair`).
                cpu.mark("parse+build+compare");
                for (pair, res) in results {
                    for d in &res.diagnostics {
                        eprintln!("probelens: {d}");
                    }
                    let nx = GraphExport {
                        dump_data_dir: tensor_dir(&npu, &pair.npu_dir, &res.npu.dump),
                        ..GraphExport::npu(&res, pair.step, pair.rank)
                    };
                    let bx = match (&bench, &pair.bench_dir) {
                        (Some(bf), Some(bdir)) => GraphExport::bench(&res, pair.step, pair.rank)
                            .map(|x| GraphExport {
                                dump_data_dir: tensor_dir(bf, bdir, x.dump),
                                ..x
                            }),
                        _ => None,
                    };
                    let mut dists = export_graphs(&nx, bx.as_ref(), &mut sink).into_iter();
                    let dn = dists.next().unwrap_or_default();
                    let db = dists.next();
                    push_dist(&mut dist, "NPU", pair.step, pair.rank, dn);
                    if let Some(db) = db {
                        push_dist(&mut dist, "Bench", pair.step, pair.rank, db);
                    }
                    if config.is_none() {
                        config = Some(ConfigRow::new(
                            res.bench.is_some(),
                            res.mode,
                            res.micro_steps,
                            a.overflow,
                            &rank_list.clone().unwrap_or_else(|| plan.rank_list()),
                            &plan.step_list,
                        ));
                    }
                    if a.timing {
                        eprintln!(
                        "probelens: step {} rank {}: parse {:.3}s, build+compare {:.3}s, export {:.3}s",
                        pair.step,
                        pair.rank,
                        t_parse.as_secs_f64(),
                        (t_cmp - t_parse).as_secs_f64(),
                        (tp.elapsed() - t_cmp).as_secs_f64()
                    );
                    }
                    cpu.mark("export");
                    progress.update(i + 1, &format!("step {} rank {}", pair.step, pair.rank));
                    // The result is freed before the indexes are sorted, which then reuse its
                    // memory (the scale pair's peak: 245 -> 222 MB; the free takes ~10 ms).
                    drop(res);
                    give_back_freed();
                }
            }
            Ok(())
        })();
        sink.flush();
        drop(sink);
        let SharedDb { db, err } = shared
            .into_inner()
            .map_err(|_| Error::input(db_path.display().to_string(), "the export failed"))?;
        // A database error stops the export; report it before what the producer saw after it.
        if let Some(e) = err {
            return Err(db_err(&db_path, e));
        }
        produced.map(|()| db)?
    };
    let te = Instant::now();
    let mut db = db;
    if let Some(c) = &config {
        db.insert(visdb::TB_CONFIG, &visdb::config_values(c))
            .map_err(|e| db_err(&db_path, e))?;
    }
    let reindex = db.indexes_deferred();
    let file = db
        .finish_with(Some(two_threads))
        .map_err(|e| db_err(&db_path, e))?;
    drop(file);
    let mut updates: Vec<export::DistUpdate> = Vec::new();
    if plan.kind != run::Kind::Files && parallel.is_none() {
        updates = dist
            .iter()
            .flat_map(|(source, step, ranks)| {
                export::distributed_analyse(ranks, a.overflow, source, *step)
            })
            .collect();
    }
    if reindex || !updates.is_empty() {
        post_pass(&tmp_path, reindex, &updates).map_err(|e| db_err(&db_path, e))?;
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
    }
    Ok(db_path)
}

/// The memory the index keys of the `.vis.db` may take before SQLite builds the indexes instead
/// (`sqlite_writer::Writer::set_key_budget`): 1 GiB, or `PROBELENS_KEY_BUDGET` bytes (tests).
fn key_budget() -> usize {
    env_usize("PROBELENS_KEY_BUDGET").unwrap_or(1 << 30)
}

/// The number in environment variable `name`, if it holds one.
fn env_usize(name: &str) -> Option<usize> {
    std::env::var(name).ok()?.parse().ok()
}

/// What SQLite itself does to the written file: rebuild the indexes when the writer left them
/// empty (over its key budget: SQLite sorts in bounded memory), and msprobe's distributed
/// post-analysis (`matched_distributed` of the nodes it names).
fn post_pass(path: &Path, reindex: bool, updates: &[export::DistUpdate]) -> rusqlite::Result<()> {
    let mut conn = Connection::open(path)?;
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get().min(8));
    conn.execute_batch(&format!(
        "PRAGMA journal_mode=OFF; PRAGMA synchronous=OFF; PRAGMA cache_size=-65536; PRAGMA threads={threads};"
    ))?;
    if reindex {
        conn.execute_batch("REINDEX;")?;
    }
    let tx = conn.transaction()?;
    for u in updates {
        tx.execute(
            "UPDATE tb_nodes SET matched_distributed = ? WHERE step = ? AND rank = ? AND data_source = ? AND node_name = ?",
            params![u.matched_distributed, u.step, u.rank, u.data_source, u.node_name],
        )?;
    }
    tx.commit()
}

/// The tensor folder msprobe records for a graph (`dump_data_dir`, or the rank folder's
/// `dump_tensor_data` when the dump was moved).
fn tensor_dir(
    files: &FsFiles,
    dir: &str,
    d: &probelens::formats::dump::RankDump,
) -> Option<String> {
    let dd = d.dump_data_dir.as_ref()?;
    let base = std::fs::canonicalize(files.root.join(dir)).ok()?;
    let parent = Path::new(dd)
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default();
    Some(if parent == base {
        dd.clone()
    } else {
        base.join("dump_tensor_data").display().to_string()
    })
}

/// `--file_type json` with `--rank_size` (build): every merged graph as
/// `<out>/step<S>/rank<R>/{construct,dump,stack}.json` (`GraphJsonExporter`); no db.
fn json_export(
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
enum Unit<'a> {
    Single(&'a PairPlan),
    Step(probelens::merge::ParallelStep),
}

/// A parallel-merge step (`merge::run_parallel_step`, shared with the page): the rank folders
/// are parsed from the file system.
fn run_parallel_step(
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

/// Removes a partially written file when dropped.
struct PartFile(PathBuf);

/// The index keys' texts while the rows are written (`sqlite_writer::Spill`): a file beside the
/// database, in the page cache rather than in this process's memory (the keys were ~30 MB of the
/// scale pair's ~210 MB peak), read back once for the index phase. Unlinked as soon as it is open
/// where the system allows it (the open file stays usable); else `PartFile` removes it.
struct FileSpill {
    file: std::fs::File,
    len: u64,
}

impl FileSpill {
    fn create(path: &Path) -> std::io::Result<FileSpill> {
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(path)?;
        #[cfg(unix)]
        let _ = std::fs::remove_file(path);
        Ok(FileSpill { file, len: 0 })
    }
}

impl probelens::visdb::sqlite_writer::Spill for FileSpill {
    fn append(&mut self, bytes: &[u8]) -> std::io::Result<u64> {
        use std::io::{Seek, SeekFrom, Write};
        let at = self.len;
        self.file.seek(SeekFrom::Start(at))?;
        self.file.write_all(bytes)?;
        self.len += bytes.len() as u64;
        Ok(at)
    }
    fn read_at(&mut self, at: u64, buf: &mut [u8]) -> std::io::Result<()> {
        use std::io::{Read, Seek, SeekFrom};
        self.file.seek(SeekFrom::Start(at))?;
        self.file.read_exact(buf)
    }
}

impl Drop for PartFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// Where a compared pair's tensor files are (real-tensor dumps read `dump_tensor_data/`).
fn tensor_files<'a>(
    npu: &'a FsFiles,
    bench: Option<&'a FsFiles>,
    npu_dir: &'a str,
    bench_dir: &'a Option<String>,
) -> Option<run::TensorFiles<'a>> {
    Some(run::TensorFiles {
        npu,
        npu_dir,
        bench: bench?,
        bench_dir: bench_dir.as_deref()?,
    })
}

/// Reads and parses the two rank folders of a pair, the Bench side on a second thread (the core
/// takes bytes and returns values, so the two sides are independent). Errors are reported as the
/// sequential order would: the NPU side's first.
fn load_pair(
    npu: &FsFiles,
    bench: Option<&FsFiles>,
    pair: &run::PairPlan,
) -> Result<(
    probelens::formats::dump::RankDump,
    Option<probelens::formats::dump::RankDump>,
)> {
    let (Some(b), Some(d)) = (bench, &pair.bench_dir) else {
        return Ok((run::load_rank(npu, &pair.npu_dir)?, None));
    };
    std::thread::scope(|s| {
        let other = s.spawn(|| run::load_rank(b, d));
        let nd = run::load_rank(npu, &pair.npu_dir);
        let bd = match other.join() {
            Ok(r) => r,
            Err(p) => std::panic::resume_unwind(p),
        };
        Ok((nd?, Some(bd?)))
    })
}

/// Parses the two rank folders of a pair side by side and builds and compares them. Each side's
/// graph and layer-mapping part (`run::Prepared`) is made on its thread as soon as its dump is
/// parsed: the Bench side's (the smaller dump) while the NPU side is still being parsed, the NPU
/// side's two pieces side by side. Returns the result and the time until both dumps were parsed
/// (from `since`). Errors come in the sequential order: the NPU side's parse first.
fn run_loaded_pair(
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
fn leave_to_exit(res: PairResult) {
    std::mem::forget(res);
}

/// `--no-db`: builds and compares every pair and prints counts; writes nothing.
/// `--no-db`'s line for one pair: node, matched and error counts of the NPU graph.
fn print_counts(pair: &PairPlan, res: &PairResult) {
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

fn compare_only(
    a: &Args,
    npu: &FsFiles,
    bench: Option<&FsFiles>,
    plan: &Plan,
    opts: &RunOptions,
    t0: Instant,
) -> Result<PathBuf> {
    for pair in &plan.pairs {
        let tp = Instant::now();
        let (res, t_parse) = run_loaded_pair(npu, bench, pair, opts, Checkers::Standard, tp)?;
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
                (tp.elapsed() - t_parse).as_secs_f64()
            );
        }
        if std::ptr::eq(pair, plan.pairs.last().unwrap_or(pair)) {
            leave_to_exit(res);
        }
    }
    if a.timing {
        eprintln!("probelens: total {:.3}s", t0.elapsed().as_secs_f64());
    }
    Ok(PathBuf::new())
}

/// Rows in a part of [`export_graphs`]: 4096, or `PROBELENS_EXPORT_PART` (tests: small parts on
/// the fixtures' small graphs).
fn export_part() -> usize {
    env_usize("PROBELENS_EXPORT_PART")
        .filter(|&n| n > 0)
        .unwrap_or(4096)
}

/// Formats the rows of the NPU graph and, for a compare, the Bench graph on two threads, in parts
/// of [`export_part`] rows that each thread takes in turn from a shared counter (the writer told
/// first how many node rows come), then their stacks; returns each graph's distributed nodes in
/// order. The NPU graph, which carries the compare columns, takes longer than the Bench graph: with
/// a graph per thread one core waited for the other for ~0.1 s. A compared pair's rows are
/// formatted as pairs (`export::PairRows`: an NPU row writes its Bench partner's, whose items its
/// compare derives anyway). The database does not depend on the order of the inserts (node rows
/// carry their `node_order`).
fn export_graphs(
    npu: &GraphExport,
    bench: Option<&GraphExport>,
    sink: &mut DbSink,
) -> Vec<Vec<DistNode>> {
    let part = export_part();
    let rows = export::PairRows::new(GraphRows::new(npu), bench.map(GraphRows::new));
    let lens = rows.lens();
    sink.expect_nodes(lens.iter().sum());
    let parts: Vec<(usize, std::ops::Range<usize>)> = lens
        .iter()
        .enumerate()
        .flat_map(|(g, &len)| {
            (0..len)
                .step_by(part)
                .map(move |a| (g, a..(a + part).min(len)))
        })
        .collect();
    let next = std::sync::atomic::AtomicUsize::new(0);
    type Found = Vec<(usize, usize, DistNode)>;
    type Warnings = Vec<(usize, usize, probelens::base::error::Diagnostic)>;
    let work = |sink: &mut DbSink| -> (Found, Warnings) {
        let mut found = Found::new();
        let mut warnings = Warnings::new();
        let next_part = || {
            let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            parts.get(i).cloned()
        };
        let mut w = rows.writers();
        // The Bench rows written with NPU rows go in batches of their own.
        let mut partners = sink.sibling();
        while let Some((g, range)) = next_part() {
            found.extend(rows.write(g, &mut w, range, sink, &mut partners));
            partners.flush();
        }
        partners.flush();
        warnings.extend(w.warnings());
        sink.flush();
        (found, warnings)
    };
    let (mut found, mut warnings) = std::thread::scope(|s| {
        let mut other = sink.sibling();
        let work = &work;
        let h = s.spawn(move || work(&mut other));
        let (mut found, mut warnings) = work(sink);
        match h.join() {
            Ok((f, w)) => {
                found.extend(f);
                warnings.extend(w);
            }
            Err(p) => std::panic::resume_unwind(p),
        }
        (found, warnings)
    });
    // A deferred compare's warnings, in the graphs' row order.
    warnings.sort_by_key(|(g, o, _)| (*g, *o));
    for (_, _, d) in &warnings {
        eprintln!("probelens: {d}");
    }
    found.sort_by_key(|(g, o, _)| (*g, *o));
    let mut dist: Vec<Vec<DistNode>> = lens.iter().map(|_| Vec::new()).collect();
    for (g, _, d) in found {
        if let Some(v) = dist.get_mut(g) {
            v.push(d);
        }
    }
    rows.write_stacks(sink);
    dist
}

fn push_dist(
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

/// Arguments of `probelens suggest`.
struct SuggestArgs {
    target: PathBuf,
    golden: PathBuf,
    layer_mapping: Option<Option<PathBuf>>,
    fuzzy: bool,
    layout_aware: bool,
    min_score: f64,
    export_yaml: Option<PathBuf>,
}

fn parse_suggest_args(argv: &[String]) -> std::result::Result<SuggestArgs, String> {
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
fn read_yaml(p: &Path) -> Result<String> {
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
fn suggest_cmd(a: &SuggestArgs) -> Result<()> {
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

fn suggest_main(argv: &[String]) -> i32 {
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

fn main() {
    tune_allocator();
    let argv: Vec<String> = std::env::args().skip(1).collect();
    let code = match argv.first().map(String::as_str) {
        Some("graph_visualize") => match parse_args(&argv[1..]) {
            Ok(a) => match graph_visualize(&a) {
                Ok(p) => {
                    if !p.as_os_str().is_empty() {
                        println!("probelens: wrote {}", p.display());
                    }
                    0
                }
                Err(e) => {
                    eprintln!("probelens: error: {e}");
                    1
                }
            },
            Err(msg) if msg.is_empty() => {
                println!("{USAGE}");
                0
            }
            Err(msg) => {
                eprintln!("{USAGE}\nprobelens graph_visualize: error: {msg}");
                2
            }
        },
        Some("suggest") => suggest_main(&argv[1..]),
        Some("diagnose") => diagnose_main(&argv[1..]),
        Some("version") | Some("--version") | Some("-V") => {
            println!("probelens {}", env!("CARGO_PKG_VERSION"));
            0
        }
        Some("-h") | Some("--help") | Some("help") | None => {
            println!("{USAGE}");
            0
        }
        Some(other) => {
            eprintln!("probelens: unknown command '{other}'\n{USAGE}");
            2
        }
    };
    std::process::exit(code);
}

const DIAGNOSE_USAGE: &str = "usage: probelens diagnose -tp TARGET_PATH -gp GOLDEN_PATH [-lm [LAYER_MAPPING]] [-fm] \
[-oc] [--top K] [--json] [--rank_size N [N] --tp N [N] --pp N [N] [--vpp N [N]] [--order S [S]]]

Names the module where the two runs part ways, over every step and rank of the two dumps (the
folder layouts graph_visualize takes). Beside msprobe's verdicts, not instead of them: tensors are
compared by element count and their Max/Min/Mean/Norm (layout-invariant), against the pair's float
noise (set by the lower precision of the two dtypes), and the error is attributed to the node whose
output differs while its inputs agree, forward first, then backward.

  -tp, -gp, -lm, -fm, -oc    as for graph_visualize
  --rank_size ... --order    merge each step's ranks first, as graph_visualize does
  --top K                    list at most K suspects (default 5)
  --json                     print one JSON object: {\"verdict\": \"agree\"|\"diverged\", \"suspects\": [...]}";

/// `probelens diagnose`: [`probelens::diagnose`] over every pair of the plan.
fn diagnose_main(argv: &[String]) -> i32 {
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

/// The layer mapping of `-lm` (read and parsed), as `graph_visualize` takes it.
fn read_layer_mapping(a: &Args) -> Result<Option<LayerMapping>> {
    Ok(match &a.layer_mapping {
        None => None,
        Some(None) => Some(LayerMapping::empty()),
        Some(Some(p)) => {
            let text = read_yaml(p)?;
            Some(LayerMapping::parse(&p.display().to_string(), &text)?)
        }
    })
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
    let plan: Plan = run::plan(&npu, bench.as_ref().map(|b| b as &dyn Files))?;
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
    let mut pairs = Vec::new();
    match &parallel {
        Some(params) if plan.kind != run::Kind::Files => {
            let (steps, _) = probelens::merge::plan(&npu, bench.as_ref().map(|b| b as &dyn Files))?;
            let opts = RunOptions {
                defer_verdicts: false,
                ..opts
            };
            for st in &steps {
                for (pair, res) in
                    run_parallel_step(&npu, bench.as_ref(), st, params, &opts, false)?
                {
                    for d in &res.diagnostics {
                        eprintln!("probelens: {d}");
                    }
                    if let Some(sides) = res.sides() {
                        pairs.push(diagnose_pair(sides, pair.step, pair.rank));
                    }
                }
            }
        }
        _ => {
            for pair in &plan.pairs {
                let (res, _) = run_loaded_pair(
                    &npu,
                    bench.as_ref(),
                    pair,
                    &opts,
                    if parallel.is_some() {
                        Checkers::ParallelMerge
                    } else {
                        Checkers::Standard
                    },
                    Instant::now(),
                )?;
                for d in &res.diagnostics {
                    eprintln!("probelens: {d}");
                }
                if let Some(sides) = res.sides() {
                    if trace {
                        eprintln!(
                            "== step {} rank {}\n{}",
                            pair.step,
                            pair.rank,
                            probelens::compare::diagnose::trace_pair(sides)
                        );
                    }
                    pairs.push(diagnose_pair(sides, pair.step, pair.rank));
                }
            }
        }
    }
    Ok(Diagnosis::merge(&pairs, top))
}
