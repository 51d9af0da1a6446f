//! Shared helpers of the golden tests (`tests/it/golden_*.rs`).
//!
//! A golden case is one file `tests/golden/cases/<name>.case`: a few comment lines saying which
//! rule of msprobe-format.md it pins down, an `args:` line, and the tiny dump files written inline
//! (see `tests/golden/README.md` for the format). Its expectation `<name>.db.json` is the `.vis.db`
//! that `msprobe graph_visualize` 26.2 wrote for the same files, frozen by `tests/golden/regen.py`.
//!
//! [`run_case`] runs our pipeline in memory the way the CLI does (`run::plan`, `run::load_rank`,
//! `run::run_pair`, `export::export_graph`, the `tb_config` row, the distributed post-analysis)
//! over an in-memory [`Files`], and returns the same tables. Each layer's test file
//! compares the columns of its layer with [`check`]; `golden_output.rs` compares every cell.

use probelens::base::Files;
use probelens::mapping::LayerMapping;
use probelens::run::{self, PairInput, RunOptions};
use probelens::visdb::export::{self, ConfigRow, DistNode, GraphExport, NodeRow, StackRow};
use std::borrow::Cow;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The folder of the case files.
pub fn cases_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden/cases")
}

/// A parsed `.case` file.
#[derive(Debug, Clone)]
pub struct Case {
    pub name: String,
    /// Extra `graph_visualize` flags (`-fm`, `-oc`, `-lm mapping.yaml`, ...).
    pub args: Vec<String>,
    /// Path (`npu/dump.json`, `bench/rank1/stack.json`, `mapping.yaml`) -> bytes.
    pub files: BTreeMap<String, Vec<u8>>,
}

/// Parses the `.case` text format (the same parser is in regen.py).
///
/// ```text
/// # comment lines (the rule under test)
/// args: -fm
/// --- npu/dump.json
/// {...}
/// --- bench/dump.json = npu/dump.json      (a copy of an earlier file)
/// --- npu/dump_tensor_data/X.npy = npy f4 [2,2] 1 2 nan inf   (a NumPy file, see make_npy)
/// ```
/// A rank folder that has a `dump.json` but no `stack.json` gets `{}` for it.
pub fn parse_case(name: &str, text: &str) -> Case {
    let mut args = Vec::new();
    let mut files: BTreeMap<String, Vec<u8>> = BTreeMap::new();
    let mut current: Option<(String, String)> = None;
    let finish = |cur: Option<(String, String)>, files: &mut BTreeMap<String, Vec<u8>>| {
        if let Some((path, body)) = cur {
            files.insert(path, body.into_bytes());
        }
    };
    for line in text.split_inclusive('\n') {
        if let Some(rest) = line.strip_prefix("--- ") {
            finish(current.take(), &mut files);
            let rest = rest.trim();
            if let Some((path, spec)) = rest.split_once(" = npy ") {
                files.insert(path.trim().to_string(), make_npy(name, spec));
            } else if let Some((path, src)) = rest.split_once(" = ") {
                let body = files
                    .get(src.trim())
                    .unwrap_or_else(|| panic!("{name}: copy of unknown file {src}"))
                    .clone();
                files.insert(path.trim().to_string(), body);
            } else {
                current = Some((rest.to_string(), String::new()));
            }
            continue;
        }
        match &mut current {
            Some((_, body)) => body.push_str(line),
            None => {
                if let Some(a) = line.trim().strip_prefix("args:") {
                    args = a.split_whitespace().map(str::to_string).collect();
                }
            }
        }
    }
    finish(current, &mut files);
    let dirs: Vec<String> = files
        .keys()
        .filter_map(|p| p.strip_suffix("dump.json").map(str::to_string))
        .collect();
    for d in dirs {
        files
            .entry(format!("{d}stack.json"))
            .or_insert_with(|| b"{}\n".to_vec());
    }
    Case {
        name: name.to_string(),
        args,
        files,
    }
}

/// The bytes of a NumPy `.npy` file (format 1.0, C order, little endian) from a case line's
/// `<descr> [<shape>] <values…>` (`f4 [2,2] 1 2 nan inf`, `b1 [] 1`), as `regen.py` writes them.
pub fn make_npy(name: &str, spec: &str) -> Vec<u8> {
    let mut words = spec.split_whitespace();
    let (descr, shape) = (words.next().unwrap(), words.next().unwrap());
    let dims: Vec<&str> = shape
        .trim_matches(['[', ']'])
        .split(',')
        .map(str::trim)
        .filter(|d| !d.is_empty())
        .collect();
    let mut body = Vec::new();
    for v in words {
        let f = || -> f64 {
            v.parse()
                .unwrap_or_else(|_| panic!("{name}: bad npy value {v}"))
        };
        let i = || -> i64 {
            v.parse()
                .unwrap_or_else(|_| panic!("{name}: bad npy value {v}"))
        };
        match descr {
            "f2" => body.extend_from_slice(&f16_bits(f() as f32).to_le_bytes()),
            "f4" => body.extend_from_slice(&(f() as f32).to_le_bytes()),
            "f8" => body.extend_from_slice(&f().to_le_bytes()),
            "i1" | "u1" | "b1" => body.push(i() as u8),
            "i2" => body.extend_from_slice(&(i() as i16).to_le_bytes()),
            "i4" => body.extend_from_slice(&(i() as i32).to_le_bytes()),
            "i8" => body.extend_from_slice(&i().to_le_bytes()),
            other => panic!("{name}: npy descr {other} is not supported"),
        }
    }
    let shape_repr = match dims.len() {
        1 => format!("({},)", dims[0]),
        _ => format!("({})", dims.join(", ")),
    };
    let order = if matches!(descr, "b1" | "i1" | "u1") {
        "|"
    } else {
        "<"
    };
    let mut header =
        format!("{{'descr': '{order}{descr}', 'fortran_order': False, 'shape': {shape_repr}, }}");
    header.push_str(&" ".repeat(63 - (10 + header.len()) % 64));
    header.push('\n');
    let mut out = b"\x93NUMPY\x01\x00".to_vec();
    out.extend_from_slice(&(header.len() as u16).to_le_bytes());
    out.extend_from_slice(header.as_bytes());
    out.extend_from_slice(&body);
    out
}

/// IEEE half of a single (round to nearest even; the case values are exact in half anyway).
fn f16_bits(x: f32) -> u16 {
    let b = x.to_bits();
    let sign = ((b >> 16) & 0x8000) as u16;
    let exp = ((b >> 23) & 0xff) as i32;
    let man = b & 0x7f_ffff;
    if exp == 0xff {
        return sign | 0x7c00 | if man != 0 { 0x200 } else { 0 };
    }
    let e = exp - 127 + 15;
    if e >= 0x1f {
        return sign | 0x7c00;
    }
    if e <= 0 {
        if e < -10 {
            return sign;
        }
        let m = man | 0x80_0000;
        let shift = (14 - e) as u32;
        let half = 1u32 << (shift - 1);
        let mut r = m >> shift;
        let rem = m & ((1 << shift) - 1);
        if rem > half || (rem == half && r & 1 == 1) {
            r += 1;
        }
        return sign | r as u16;
    }
    let mut r = ((e as u32) << 10) | (man >> 13);
    let rem = man & 0x1fff;
    if rem > 0x1000 || (rem == 0x1000 && r & 1 == 1) {
        r += 1;
    }
    sign | r as u16
}

pub fn load_case(name: &str) -> Case {
    let p = cases_dir().join(format!("{name}.case"));
    let text = std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    parse_case(name, &text)
}

/// The files of one side (`npu/` or `bench/`) of a case.
pub struct MemFiles<'a> {
    files: &'a BTreeMap<String, Vec<u8>>,
    prefix: String,
}

impl<'a> MemFiles<'a> {
    pub fn new(files: &'a BTreeMap<String, Vec<u8>>, side: &str) -> Self {
        MemFiles {
            files,
            prefix: format!("{side}/"),
        }
    }
    fn full(&self, path: &str) -> String {
        format!("{}{}", self.prefix, path)
    }
}

impl Files for MemFiles<'_> {
    fn list(&self, dir: &str) -> probelens::Result<Vec<(String, bool)>> {
        let base = if dir.is_empty() {
            self.prefix.clone()
        } else {
            format!("{}{}/", self.prefix, dir)
        };
        let mut out: Vec<(String, bool)> = Vec::new();
        for p in self.files.keys() {
            let Some(rest) = p.strip_prefix(&base) else {
                continue;
            };
            let entry = match rest.split_once('/') {
                Some((d, _)) => (d.to_string(), true),
                None => (rest.to_string(), false),
            };
            if !out.contains(&entry) {
                out.push(entry);
            }
        }
        Ok(out)
    }
    fn read(&self, path: &str) -> probelens::Result<Cow<'_, [u8]>> {
        match self.files.get(&self.full(path)) {
            Some(b) => Ok(Cow::Borrowed(b.as_slice())),
            None => Err(probelens::Error::input(self.full(path), "file not found")),
        }
    }
    fn display(&self, path: &str) -> String {
        self.full(path)
    }
}

/// One cell of a db row.
#[derive(Debug, Clone)]
pub enum Cell {
    Null,
    Int(i64),
    Real(f64),
    Text(String),
}

impl PartialEq for Cell {
    fn eq(&self, o: &Cell) -> bool {
        match (self, o) {
            (Cell::Null, Cell::Null) => true,
            (Cell::Int(a), Cell::Int(b)) => a == b,
            (Cell::Real(a), Cell::Real(b)) => a == b,
            (Cell::Int(a), Cell::Real(b)) | (Cell::Real(b), Cell::Int(a)) => *a as f64 == *b,
            (Cell::Text(a), Cell::Text(b)) => a == b,
            _ => false,
        }
    }
}

impl Cell {
    fn from_json(v: &serde_json::Value) -> Cell {
        match v {
            serde_json::Value::Null => Cell::Null,
            serde_json::Value::Number(n) => match n.as_i64() {
                Some(i) => Cell::Int(i),
                None => Cell::Real(n.as_f64().unwrap()),
            },
            serde_json::Value::String(s) => Cell::Text(s.clone()),
            other => panic!("unexpected db cell {other}"),
        }
    }
    fn text(s: impl Into<String>) -> Cell {
        Cell::Text(s.into())
    }
    fn opt(s: Option<impl Into<String>>) -> Cell {
        s.map_or(Cell::Null, |s| Cell::Text(s.into()))
    }
    pub fn as_text(&self) -> Option<&str> {
        match self {
            Cell::Text(s) => Some(s),
            _ => None,
        }
    }
}

pub type Row = BTreeMap<String, Cell>;

/// The three tables of a `.vis.db`, rows keyed by their `id`. `dump_data_dir` holds the case
/// folder's real path as `$CASE`; the in-memory run has no such column (see [`Tables`]).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Db {
    pub nodes: BTreeMap<String, Row>,
    pub stacks: BTreeMap<String, Row>,
    pub config: BTreeMap<String, Row>,
}

/// What a run produced: a db, or an error (msprobe exits 1 without a db).
#[derive(Debug, Clone)]
pub enum Outcome {
    Db(Db),
    Error(String),
}

/// msprobe's frozen output for a case.
pub fn expected(name: &str) -> Outcome {
    let p = cases_dir().join(format!("{name}.db.json"));
    let text = std::fs::read_to_string(&p).unwrap_or_else(|e| {
        panic!(
            "{}: {e} (run python3 tests/golden/regen.py {name})",
            p.display()
        )
    });
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    if let Some(e) = v.get("error") {
        return Outcome::Error(e.as_str().unwrap_or("").to_string());
    }
    let table = |t: &str| -> BTreeMap<String, Row> {
        let mut out = BTreeMap::new();
        for (id, row) in v[t].as_object().unwrap() {
            let r: Row = row
                .as_object()
                .unwrap()
                .iter()
                .map(|(c, x)| (c.clone(), Cell::from_json(x)))
                .collect();
            out.insert(id.clone(), r);
        }
        out
    };
    Outcome::Db(Db {
        nodes: table("tb_nodes"),
        stacks: table("tb_stack"),
        config: table("tb_config"),
    })
}

fn node_row(r: NodeRow) -> (String, Row) {
    let mut m = Row::new();
    m.insert("id".into(), Cell::text(&r.id));
    m.insert("graph_id".into(), Cell::text(r.graph_id));
    m.insert("node_order".into(), Cell::Int(r.node_order));
    m.insert("node_name".into(), Cell::text(r.node_name));
    m.insert("node_type".into(), Cell::text(r.node_type));
    m.insert("up_node".into(), Cell::text(r.up_node));
    m.insert("sub_nodes".into(), Cell::text(r.sub_nodes));
    m.insert(
        "precision_index".into(),
        r.precision_index.map_or(Cell::Null, Cell::Real),
    );
    m.insert("overflow_level".into(), Cell::opt(r.overflow_level));
    m.insert("micro_step_id".into(), Cell::Int(r.micro_step_id));
    m.insert("matched_node_link".into(), Cell::text(r.matched_node_link));
    m.insert("stack_id".into(), Cell::text(r.stack_id));
    m.insert(
        "parallel_merge_info".into(),
        Cell::text(r.parallel_merge_info),
    );
    m.insert(
        "matched_distributed".into(),
        Cell::text(r.matched_distributed),
    );
    m.insert("modified".into(), Cell::Int(r.modified));
    m.insert("input_data".into(), Cell::text(r.input_data));
    m.insert("output_data".into(), Cell::text(r.output_data));
    m.insert("data_source".into(), Cell::text(r.data_source));
    m.insert("step".into(), Cell::Int(r.step));
    m.insert("rank".into(), Cell::Int(r.rank));
    m.insert("is_distributed".into(), Cell::Int(r.is_distributed));
    (r.id, m)
}

fn stack_row(r: StackRow) -> (String, Row) {
    let mut m = Row::new();
    m.insert("id".into(), Cell::text(&r.id));
    m.insert("stack_info".into(), Cell::text(r.stack_info));
    (r.id, m)
}

fn config_row(c: ConfigRow) -> Row {
    let mut m = Row::new();
    m.insert("id".into(), Cell::text("1"));
    m.insert("graph_type".into(), Cell::text(c.graph_type));
    m.insert("task".into(), Cell::text(c.task));
    m.insert("tool_tip".into(), Cell::opt(c.tool_tip));
    m.insert("micro_steps".into(), Cell::Int(c.micro_steps));
    m.insert("overflow_check".into(), Cell::Int(c.overflow_check));
    m.insert("node_colors".into(), Cell::text(c.node_colors));
    m.insert("rank_list".into(), Cell::text(c.rank_list));
    m.insert("step_list".into(), Cell::text(c.step_list));
    m
}

/// Runs our pipeline on a case, as `probelens graph_visualize` does.
pub fn run_case(case: &Case) -> Outcome {
    match run_inner(case) {
        Ok(db) => Outcome::Db(db),
        Err(e) => Outcome::Error(e.to_string()),
    }
}

fn run_inner(case: &Case) -> probelens::Result<Db> {
    let npu = MemFiles::new(&case.files, "npu");
    let has_bench = case.files.keys().any(|p| p.starts_with("bench/"));
    let bench = has_bench.then(|| MemFiles::new(&case.files, "bench"));
    let mut opts = RunOptions::default();
    let mut i = 0;
    while i < case.args.len() {
        match case.args[i].as_str() {
            "-fm" => opts.fuzzy = true,
            "-oc" => opts.overflow_check = true,
            "-lm" => match case.args.get(i + 1).filter(|a| !a.starts_with('-')) {
                Some(f) => {
                    i += 1;
                    let text = String::from_utf8(case.files[f.as_str()].clone()).unwrap();
                    opts.layer_mapping = Some(LayerMapping::parse(f, &text)?);
                }
                None => opts.layer_mapping = Some(LayerMapping::empty()),
            },
            other => panic!("{}: unsupported flag {other}", case.name),
        }
        i += 1;
    }
    let plan = run::plan(&npu, bench.as_ref().map(|b| b as &dyn Files))?;
    let mut sink: (Vec<NodeRow>, Vec<StackRow>) = (Vec::new(), Vec::new());
    let mut config: Option<ConfigRow> = None;
    // (data source, step) -> [(rank, distributed nodes)]
    type Dist = Vec<(&'static str, i64, Vec<(i64, Vec<DistNode>)>)>;
    let mut dist: Dist = Vec::new();
    let mut push = |source: &'static str, step: i64, rank: i64, nodes: Vec<DistNode>| {
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
    };
    for pair in &plan.pairs {
        let nd = run::load_rank(&npu, &pair.npu_dir)?;
        let bd = match (&bench, &pair.bench_dir) {
            (Some(b), Some(d)) => Some(run::load_rank(b, d)?),
            _ => None,
        };
        // The tensor files of a real-tensor case (task "tensor"), read from the case's files.
        let tensors = match (&bench, &pair.bench_dir) {
            (Some(b), Some(d)) => Some(run::TensorFiles {
                npu: &npu,
                npu_dir: &pair.npu_dir,
                bench: b,
                bench_dir: d,
            }),
            _ => None,
        };
        let mut res = run::run_pair(PairInput::new(nd, bd), &opts)?;
        run::compare_pair_tensors(&mut res, tensors.as_ref());
        let nx = GraphExport::npu(&res, pair.step, pair.rank);
        let dn = export::export_graph(&nx, &mut sink);
        push("NPU", pair.step, pair.rank, dn);
        if let Some(bx) = GraphExport::bench(&res, pair.step, pair.rank) {
            let db = export::export_graph(&bx, &mut sink);
            push("Bench", pair.step, pair.rank, db);
        }
        if config.is_none() {
            config = Some(ConfigRow::new(
                res.bench.is_some(),
                res.mode,
                res.micro_steps,
                opts.overflow_check,
                &plan.rank_list(),
                &plan.step_list,
            ));
        }
    }
    let mut db = Db::default();
    for r in sink.0 {
        let (id, row) = node_row(r);
        assert!(
            db.nodes.insert(id.clone(), row).is_none(),
            "duplicate tb_nodes id {id}"
        );
    }
    for r in sink.1 {
        let (id, row) = stack_row(r);
        db.stacks.insert(id, row);
    }
    if let Some(c) = config {
        db.config.insert("1".into(), config_row(c));
    }
    if plan.kind != run::Kind::Files {
        for (source, step, ranks) in &dist {
            for u in export::distributed_analyse(ranks, opts.overflow_check, source, *step) {
                let id = format!("{}_{}_{}_{}", u.data_source, u.step, u.rank, u.node_name);
                if let Some(row) = db.nodes.get_mut(&id) {
                    row.insert(
                        "matched_distributed".into(),
                        Cell::Text(u.matched_distributed),
                    );
                }
            }
        }
    }
    Ok(db)
}

/// Columns of a layer's check.
pub const GRAPH_COLS: &[&str] = &[
    "node_name",
    "node_type",
    "up_node",
    "sub_nodes",
    "node_order",
    "micro_step_id",
    "graph_id",
    "step",
    "rank",
    "is_distributed",
];
pub const DATA_COLS: &[&str] = &["input_data", "output_data"];
pub const MATCH_COLS: &[&str] = &["matched_node_link", "precision_index"];
pub const COMPARE_COLS: &[&str] = &["input_data", "output_data", "precision_index"];
pub const OVERFLOW_COLS: &[&str] = &["overflow_level"];
pub const DIST_COLS: &[&str] = &["matched_distributed"];
pub const STACK_COLS: &[&str] = &["stack_id"];

/// Which tables a check compares besides `tb_nodes` (always compared on the listed columns).
#[derive(Debug, Clone, Copy, Default)]
pub struct Tables {
    pub stack: bool,
    pub config: bool,
    /// Also `tb_nodes.dump_data_dir` (only the CLI run computes it from the real folder).
    pub dump_data_dir: bool,
}

/// Compares `cols` of every `tb_nodes` row (and the same row set), plus the selected tables, with
/// msprobe's frozen db of case `name`. An msprobe error must be an error of ours too.
pub fn check(name: &str, cols: &[&str], tables: Tables) {
    let case = load_case(name);
    let want = expected(name);
    let got = run_case(&case);
    let diffs = diff(&want, &got, cols, tables);
    assert!(
        diffs.is_empty(),
        "golden case {name}: {} difference(s) from msprobe:\n{}",
        diffs.len(),
        diffs.join("\n")
    );
}

/// Every cell of every table.
pub fn check_all(name: &str) {
    let case = load_case(name);
    let want = expected(name);
    let got = run_case(&case);
    let diffs = diff(
        &want,
        &got,
        &[],
        Tables {
            stack: true,
            config: true,
            dump_data_dir: false,
        },
    );
    assert!(
        diffs.is_empty(),
        "golden case {name}: {} difference(s) from msprobe:\n{}",
        diffs.len(),
        diffs.join("\n")
    );
}

/// Differences described one per line; `cols` empty = all columns.
pub fn diff(want: &Outcome, got: &Outcome, cols: &[&str], tables: Tables) -> Vec<String> {
    let (w, g) = match (want, got) {
        (Outcome::Error(_), Outcome::Error(_)) => return Vec::new(),
        (Outcome::Error(e), Outcome::Db(_)) => {
            return vec![format!("msprobe failed ({e}) but we produced a db")]
        }
        (Outcome::Db(_), Outcome::Error(e)) => {
            return vec![format!("msprobe produced a db but we failed: {e}")]
        }
        (Outcome::Db(w), Outcome::Db(g)) => (w, g),
    };
    let mut out = Vec::new();
    let mut table =
        |tname: &str, wt: &BTreeMap<String, Row>, gt: &BTreeMap<String, Row>, cols: &[&str]| {
            for k in wt.keys().filter(|k| !gt.contains_key(*k)) {
                out.push(format!("{tname}: missing row {k}"));
            }
            for k in gt.keys().filter(|k| !wt.contains_key(*k)) {
                out.push(format!("{tname}: unexpected row {k}"));
            }
            for (k, wr) in wt {
                let Some(gr) = gt.get(k) else { continue };
                for (c, wv) in wr {
                    if !cols.is_empty() && !cols.contains(&c.as_str()) {
                        continue;
                    }
                    if c == "dump_data_dir" && !tables.dump_data_dir {
                        continue;
                    }
                    let gv = gr.get(c).unwrap_or(&Cell::Null);
                    if gv != wv {
                        out.push(format!(
                            "{tname}[{k}].{c}:\n    msprobe: {wv:?}\n    ours:    {gv:?}"
                        ));
                    }
                }
            }
        };
    table("tb_nodes", &w.nodes, &g.nodes, cols);
    if tables.stack {
        table("tb_stack", &w.stacks, &g.stacks, &[]);
    }
    if tables.config {
        table("tb_config", &w.config, &g.config, &[]);
    }
    out
}

/// All case names (file stems of `*.case`), sorted.
pub fn all_cases() -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(cases_dir())
        .unwrap()
        .flatten()
        .filter_map(|e| {
            e.file_name()
                .to_string_lossy()
                .strip_suffix(".case")
                .map(str::to_string)
        })
        .collect();
    v.sort();
    v
}

/// Runs the `probelens` binary on a case written to a temporary folder, as msprobe was run by
/// regen.py (`graph_visualize -tp npu [-gp bench] -o out <args>` from inside the folder), and
/// reads back its `.vis.db`. Exit status non-zero = an error outcome. `extra` arguments follow
/// the case's; with `shards: Some(n)`, as n processes `--shard i/n` whose partial dbs
/// `probelens merge-db` joins (an error outcome when any of them fails).
pub fn run_cli_how(case: &Case, extra: &[&str], shards: Option<usize>) -> Outcome {
    use std::sync::atomic::{AtomicUsize, Ordering};
    static N: AtomicUsize = AtomicUsize::new(0);
    let dir = std::env::temp_dir().join(format!(
        "probelens-golden-{}-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::SeqCst),
        case.name
    ));
    let _ = std::fs::remove_dir_all(&dir);
    for (p, body) in &case.files {
        let full = dir.join(p);
        std::fs::create_dir_all(full.parent().unwrap()).unwrap();
        std::fs::write(full, body).unwrap();
    }
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_probelens"));
    cmd.args(["graph_visualize", "-tp", "npu"]);
    if case.files.keys().any(|p| p.starts_with("bench/")) {
        cmd.args(["-gp", "bench"]);
    }
    cmd.args(&case.args).arg("--no-progress").args(extra);
    let out = match shards {
        None => cmd.args(["-o", "out"]).current_dir(&dir).output().unwrap(),
        Some(n) => {
            let mut last = None;
            for i in 0..n {
                let mut c = std::process::Command::new(cmd.get_program());
                c.args(cmd.get_args());
                let o = c
                    .args(["-o", "shards", "--shard", &format!("{i}/{n}")])
                    .current_dir(&dir)
                    .output()
                    .unwrap();
                let failed = !o.status.success();
                last = Some(o);
                if failed {
                    break;
                }
            }
            let last = last.unwrap();
            if last.status.success() {
                let mut m = std::process::Command::new(env!("CARGO_BIN_EXE_probelens"));
                m.args(["merge-db", "-o", "out"]);
                for e in std::fs::read_dir(dir.join("shards")).unwrap().flatten() {
                    m.arg(e.path());
                }
                m.current_dir(&dir).output().unwrap()
            } else {
                last
            }
        }
    };
    let outcome = if !out.status.success() {
        Outcome::Error(String::from_utf8_lossy(&out.stderr).trim().to_string())
    } else {
        let db = std::fs::read_dir(dir.join("out"))
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .find(|p| p.to_string_lossy().ends_with(".vis.db"))
            .expect("a .vis.db");
        Outcome::Db(read_db(&db, &dir))
    };
    let _ = std::fs::remove_dir_all(&dir);
    outcome
}

/// The three tables of a `.vis.db` file.
pub fn read_db(path: &Path, case_dir: &Path) -> Db {
    use rusqlite::types::Value;
    let real = std::fs::canonicalize(case_dir)
        .unwrap()
        .to_string_lossy()
        .to_string();
    let conn = rusqlite::Connection::open(path).unwrap();
    let table = |name: &str| -> BTreeMap<String, Row> {
        let mut stmt = conn.prepare(&format!("select * from {name}")).unwrap();
        let cols: Vec<String> = stmt.column_names().iter().map(|s| s.to_string()).collect();
        let mut rows = stmt.query([]).unwrap();
        let mut out = BTreeMap::new();
        while let Some(r) = rows.next().unwrap() {
            let mut row = Row::new();
            for (i, c) in cols.iter().enumerate() {
                let cell = match r.get::<_, Value>(i).unwrap() {
                    Value::Null => Cell::Null,
                    Value::Integer(v) => Cell::Int(v),
                    Value::Real(v) => Cell::Real(v),
                    Value::Text(t) if c == "dump_data_dir" => Cell::Text(t.replace(&real, "$CASE")),
                    Value::Text(t) => Cell::Text(t),
                    Value::Blob(_) => panic!("blob in {name}.{c}"),
                };
                row.insert(c.clone(), cell);
            }
            let id = row["id"].as_text().unwrap_or_default().to_string();
            out.insert(id, row);
        }
        out
    };
    Db {
        nodes: table("tb_nodes"),
        stacks: table("tb_stack"),
        config: table("tb_config"),
    }
}

/// A dump folder on disk as [`Files`] (for tests over tests/fixtures).
pub struct DiskFiles(pub PathBuf);

impl Files for DiskFiles {
    fn list(&self, dir: &str) -> probelens::Result<Vec<(String, bool)>> {
        Ok(std::fs::read_dir(self.0.join(dir))
            .unwrap()
            .flatten()
            .map(|e| {
                (
                    e.file_name().to_string_lossy().into_owned(),
                    e.path().is_dir(),
                )
            })
            .collect())
    }
    fn read(&self, path: &str) -> probelens::Result<Cow<'_, [u8]>> {
        Ok(Cow::Owned(std::fs::read(self.0.join(path)).unwrap()))
    }
}
