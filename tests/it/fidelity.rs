//! Fidelity: for every msprobe 26.2 reference variant in tests/fixtures, run the command of its
//! `cmd.txt` with `probelens` in place of `msprobe` from inside the case folder and require the
//! `.vis.db` to equal msprobe's table by table (the rules of shared/tools/visdb_diff.py: rows by
//! primary key, JSON columns compared parsed and with key order, `dump_data_dir` ignored).

use rusqlite::types::Value;
use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::Command;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

/// A JSON value compared with object key order.
#[derive(Debug, PartialEq)]
enum J {
    Scalar(String),
    Num(f64),
    Arr(Vec<J>),
    Obj(Vec<(String, J)>),
}

fn ordered(v: &serde_json::Value) -> J {
    match v {
        serde_json::Value::Array(a) => J::Arr(a.iter().map(ordered).collect()),
        serde_json::Value::Object(m) => {
            J::Obj(m.iter().map(|(k, v)| (k.clone(), ordered(v))).collect())
        }
        serde_json::Value::Number(n) => J::Num(n.as_f64().unwrap_or(f64::NAN)),
        other => J::Scalar(other.to_string()),
    }
}

const JSON_COLS: [&str; 11] = [
    "sub_nodes",
    "matched_node_link",
    "input_data",
    "output_data",
    "parallel_merge_info",
    "matched_distributed",
    "stack_info",
    "tool_tip",
    "node_colors",
    "rank_list",
    "step_list",
];

#[derive(Debug)]
enum Cell {
    V(Value),
    J(J),
}

impl PartialEq for Cell {
    fn eq(&self, o: &Cell) -> bool {
        match (self, o) {
            (Cell::J(a), Cell::J(b)) => a == b,
            (Cell::V(a), Cell::V(b)) => match (a, b) {
                (Value::Integer(x), Value::Real(y)) | (Value::Real(y), Value::Integer(x)) => {
                    *x as f64 == *y
                }
                _ => a == b,
            },
            _ => false,
        }
    }
}

fn cell(col: &str, v: Value) -> Cell {
    if JSON_COLS.contains(&col) {
        if let Value::Text(t) = &v {
            if !t.is_empty() && t != "null" {
                if let Ok(j) = serde_json::from_str::<serde_json::Value>(t) {
                    return Cell::J(ordered(&j));
                }
            }
        }
    }
    Cell::V(v)
}

type Table = BTreeMap<String, Vec<(String, Cell)>>;

fn load(path: &Path) -> BTreeMap<&'static str, Table> {
    let mut raw = Vec::new();
    std::fs::File::open(path)
        .unwrap()
        .read_to_end(&mut raw)
        .unwrap();
    if raw.starts_with(&[0x1f, 0x8b]) {
        let mut d = flate2::read::GzDecoder::new(&raw[..]);
        let mut out = Vec::new();
        d.read_to_end(&mut out).unwrap();
        raw = out;
    }
    let tmp = tempfile(&raw);
    let conn = rusqlite::Connection::open(&tmp).unwrap();
    let mut out = BTreeMap::new();
    for table in ["tb_nodes", "tb_stack", "tb_config"] {
        let mut stmt = conn.prepare(&format!("select * from {table}")).unwrap();
        let cols: Vec<String> = stmt.column_names().iter().map(|s| s.to_string()).collect();
        let mut rows = stmt.query([]).unwrap();
        let mut t = Table::new();
        while let Some(r) = rows.next().unwrap() {
            let mut cells = Vec::new();
            let mut key = String::new();
            for (i, c) in cols.iter().enumerate() {
                let v: Value = r.get(i).unwrap();
                if c == "id" {
                    if let Value::Text(s) = &v {
                        key = s.clone();
                    }
                }
                if table == "tb_nodes" && c == "dump_data_dir" {
                    continue;
                }
                cells.push((c.clone(), cell(c, v)));
            }
            t.insert(key, cells);
        }
        out.insert(table, t);
    }
    let _ = std::fs::remove_file(&tmp);
    out
}

fn tempfile(bytes: &[u8]) -> PathBuf {
    use std::sync::atomic::{AtomicUsize, Ordering};
    static N: AtomicUsize = AtomicUsize::new(0);
    let p = std::env::temp_dir().join(format!(
        "probelens-fid-{}-{}.db",
        std::process::id(),
        N.fetch_add(1, Ordering::SeqCst)
    ));
    std::fs::write(&p, bytes).unwrap();
    p
}

/// The schema table of a db (`type, name, tbl_name, sql` in creation order; root pages differ).
fn schema_of(path: &Path) -> Vec<(String, String, String, Option<String>)> {
    let mut raw = std::fs::read(path).unwrap();
    if raw.starts_with(&[0x1f, 0x8b]) {
        let mut out = Vec::new();
        flate2::read::GzDecoder::new(&raw[..])
            .read_to_end(&mut out)
            .unwrap();
        raw = out;
    }
    let tmp = tempfile(&raw);
    let conn = rusqlite::Connection::open(&tmp).unwrap();
    let mut st = conn
        .prepare("SELECT type, name, tbl_name, sql FROM sqlite_master ORDER BY rowid")
        .unwrap();
    let rows = st
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
        .unwrap()
        .map(|r| r.unwrap())
        .collect();
    let _ = std::fs::remove_file(&tmp);
    rows
}

/// SQLite's own check of a written db (B-trees, every index against its table).
fn integrity_check(path: &Path) -> String {
    let conn = rusqlite::Connection::open(path).unwrap();
    let rows: Vec<String> = conn
        .prepare("PRAGMA integrity_check")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .map(|r| r.unwrap())
        .collect();
    rows.join("\n")
}

/// Differences between two dbs, described.
fn diff(expected: &Path, actual: &Path) -> Vec<String> {
    let e = load(expected);
    let a = load(actual);
    let mut out = Vec::new();
    for (table, et) in &e {
        let at = &a[table];
        for k in et.keys() {
            if !at.contains_key(k) {
                out.push(format!("{table}: missing row {k}"));
            }
        }
        for k in at.keys() {
            if !et.contains_key(k) {
                out.push(format!("{table}: unexpected row {k}"));
            }
        }
        for (k, er) in et {
            let Some(ar) = at.get(k) else { continue };
            for (col, ev) in er {
                let av = ar.iter().find(|(c, _)| c == col).map(|(_, v)| v);
                if av != Some(ev) {
                    out.push(format!("{table}[{k}].{col}: expected {ev:?}, got {av:?}"));
                }
            }
        }
    }
    out
}

fn run_variant(case: &str, variant: &str) {
    run_variant_with(case, variant, None, &[])
}

/// How a variant's command is run.
#[derive(Clone, Copy, Debug)]
enum How {
    /// As `cmd.txt` says.
    Once,
    /// With `-j N`.
    Jobs(usize),
    /// As N processes `--shard I/N`, then `probelens merge-db`.
    Shards(usize),
}

/// Runs a variant's command, optionally with another layer-mapping file in place of its `-lm` one.
fn run_variant_with(case: &str, variant: &str, mapping: Option<&Path>, env: &[(&str, &str)]) {
    run_variant_how(case, variant, mapping, env, How::Once)
}

/// Runs `probelens` with `args` in `dir`; panics with its stderr when it fails.
fn probelens_ok(dir: &Path, env: &[(&str, &str)], args: &[String], what: &str) {
    let status = Command::new(env!("CARGO_BIN_EXE_probelens"))
        .envs(env.iter().copied())
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(
        status.status.success(),
        "{what}: probelens failed: {}",
        String::from_utf8_lossy(&status.stderr)
    );
}

fn run_variant_how(
    case: &str,
    variant: &str,
    mapping: Option<&Path>,
    env: &[(&str, &str)],
    how: How,
) {
    let case_dir = fixtures().join(case);
    let vdir = case_dir.join("reference").join(variant);
    let cmd = std::fs::read_to_string(vdir.join("cmd.txt")).unwrap();
    let cmd = cmd.split('#').next().unwrap().trim();
    let mut words: Vec<String> = cmd.split_whitespace().map(str::to_string).collect();
    assert_eq!(words[0], "msprobe", "{cmd}");
    use std::sync::atomic::{AtomicUsize, Ordering};
    static RUN: AtomicUsize = AtomicUsize::new(0);
    let out = std::env::temp_dir().join(format!(
        "probelens-fid-out-{}-{}-{case}-{variant}",
        std::process::id(),
        RUN.fetch_add(1, Ordering::SeqCst)
    ));
    let _ = std::fs::remove_dir_all(&out);
    // Replace the output folder (-o reference/<variant>) by a temporary one.
    let o = words.iter().position(|w| w == "-o").expect("cmd has -o");
    words[o + 1] = out.display().to_string();
    if let Some(m) = mapping {
        let lm = words.iter().position(|w| w == "-lm").expect("cmd has -lm");
        words[lm + 1] = m.display().to_string();
    }
    let what = format!("{case}/{variant} ({how:?})");
    words.push("--no-progress".into());
    match how {
        How::Once => probelens_ok(&case_dir, env, &words[1..], &what),
        How::Jobs(n) => {
            words.extend(["-j".to_string(), n.to_string()]);
            probelens_ok(&case_dir, env, &words[1..], &what);
        }
        How::Shards(n) => {
            let shards = out.with_extension("shards");
            let _ = std::fs::remove_dir_all(&shards);
            words[o + 1] = shards.display().to_string();
            for i in 0..n {
                let mut w = words[1..].to_vec();
                w.extend(["--shard".to_string(), format!("{i}/{n}")]);
                probelens_ok(&case_dir, env, &w, &what);
            }
            let mut merge = vec![
                "merge-db".to_string(),
                "-o".into(),
                out.display().to_string(),
            ];
            for e in std::fs::read_dir(&shards).unwrap().flatten() {
                merge.push(e.path().display().to_string());
            }
            assert_eq!(merge.len(), 3 + n, "{what}: one partial db per shard");
            probelens_ok(&case_dir, env, &merge, &what);
            let _ = std::fs::remove_dir_all(&shards);
        }
    }
    let expected = std::fs::read_dir(&vdir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.to_string_lossy().contains(".vis.db"))
        .unwrap();
    let produced: Vec<PathBuf> = std::fs::read_dir(&out)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .collect();
    assert_eq!(
        produced.len(),
        1,
        "{case}/{variant}: one db expected, got {produced:?}"
    );
    let name = produced[0]
        .file_name()
        .unwrap()
        .to_string_lossy()
        .to_string();
    let want_prefix = if words.iter().any(|w| w == "-gp") {
        "compare_"
    } else {
        "build_"
    };
    assert!(
        name.starts_with(want_prefix)
            && name.ends_with(".vis.db")
            && name.len() == want_prefix.len() + 14 + 7,
        "{name}"
    );
    let d = diff(&expected, &produced[0]);
    let schema = (schema_of(&expected), schema_of(&produced[0]));
    let integrity = integrity_check(&produced[0]);
    let _ = std::fs::remove_dir_all(&out);
    assert_eq!(
        schema.1, schema.0,
        "{case}/{variant} ({how:?}): sqlite_master differs"
    );
    assert_eq!(integrity, "ok", "{case}/{variant}: PRAGMA integrity_check");
    assert!(
        d.is_empty(),
        "{case}/{variant} ({how:?}): {} differences, first: {:#?}",
        d.len(),
        &d[..d.len().min(5)]
    );
}

macro_rules! variant {
    ($name:ident, $case:expr, $variant:expr) => {
        #[test]
        fn $name() {
            run_variant($case, $variant);
        }
    };
}

variant!(mix_nomap, "qwen_mix_statistics", "nomap");
variant!(mix_map, "qwen_mix_statistics", "map");
variant!(mix_map_template, "qwen_mix_statistics", "map_template");
variant!(mix_fuzzy, "qwen_mix_statistics", "fuzzy");
variant!(mix_map_fuzzy, "qwen_mix_statistics", "map_fuzzy");
variant!(mix_bench_vs_bench, "qwen_mix_statistics", "bench_vs_bench");
variant!(
    mix_rank_size_files,
    "qwen_mix_statistics",
    "rank_size_files"
);
variant!(md5_nomap, "qwen_md5", "nomap");
variant!(md5_map, "qwen_md5", "map");
variant!(l0_nomap, "qwen_L0", "nomap");
variant!(l0_map, "qwen_L0", "map");
variant!(two_ranks_map, "qwen_two_ranks", "map");
variant!(two_ranks_nomap, "qwen_two_ranks", "nomap");
variant!(two_ranks_build_npu, "qwen_two_ranks", "build_npu");
variant!(single_build_npu, "qwen_single_graph", "build_npu");
variant!(single_build_bench_l0, "qwen_single_graph", "build_bench_L0");
variant!(real_tensor_nomap, "real_tensor", "nomap");
variant!(real_tensor_map, "real_tensor", "map");
variant!(real_tensor_fuzzy, "real_tensor", "fuzzy");
variant!(ms_real_tensor_nomap, "ms_real_tensor", "nomap");
variant!(ms_real_tensor_map, "ms_real_tensor", "map");
variant!(ms_real_tensor_fuzzy, "ms_real_tensor", "fuzzy");
variant!(ms_real_tensor_overflow, "ms_real_tensor", "overflow");
variant!(ms_real_tensor_build_npu, "ms_real_tensor", "build_npu");
variant!(ms_real_tensor_md5, "ms_real_tensor", "md5");
variant!(parallel_tp_build, "parallel_tp", "build_tp2");
variant!(parallel_tp_compare, "parallel_tp", "compare_tp2");
variant!(parallel_tp_compare_oc, "parallel_tp", "compare_tp2_oc");
variant!(parallel_pp_build, "parallel_pp", "build_pp2");
variant!(parallel_pp_compare, "parallel_pp", "compare_pp2");
variant!(parallel_tppp_build, "parallel_tppp", "build_tp2pp2");
variant!(parallel_tppp_compare, "parallel_tppp", "compare_tp2pp2");
variant!(parallel_vpp_build, "parallel_vpp", "build_pp2vpp2");
variant!(parallel_vpp_compare, "parallel_vpp", "compare_pp2vpp2");
variant!(parallel_full_build, "parallel_full", "build_tp2pp2dp2");
variant!(parallel_full_compare, "parallel_full", "compare_tp2pp2dp2");

/// The shipped Qwen2.5 template gives msprobe's result with the fixture's mapping (it holds the
/// same rules), on every case that has a mapped reference.
#[test]
fn shipped_qwen25_template_matches_fixture_mapping() {
    let t = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("mappings/qwen2.5_mindspeed-llm_to_llamafactory.yaml");
    for case in [
        "qwen_mix_statistics",
        "qwen_md5",
        "qwen_L0",
        "qwen_two_ranks",
    ] {
        run_variant_with(case, "map", Some(&t), &[]);
    }
}

/// Every non-legacy reference variant has a test above.
/// Over its key budget the writer leaves the indexes empty and SQLite rebuilds them (`REINDEX`):
/// the same db (the budget is 0 here, so every index goes that way).
#[test]
fn indexes_rebuilt_by_sqlite_over_the_key_budget() {
    run_variant_with(
        "qwen_mix_statistics",
        "map",
        None,
        &[("PROBELENS_KEY_BUDGET", "0")],
    );
    run_variant_with(
        "qwen_two_ranks",
        "map",
        None,
        &[("PROBELENS_KEY_BUDGET", "0")],
    );
}

/// The CLI formats the rows in parts shared by two threads (4096 rows: only the fixtures'
/// largest graphs have two); parts of 7 rows give the same file.
#[test]
fn rows_formatted_in_small_parts() {
    for (case, variant) in [
        ("qwen_mix_statistics", "map"),
        ("qwen_two_ranks", "map"),
        ("ms_real_tensor", "overflow"),
    ] {
        run_variant_with(case, variant, None, &[("PROBELENS_EXPORT_PART", "7")]);
    }
}

/// Every non-legacy reference variant.
const VARIANTS: [&str; 36] = [
    "qwen_mix_statistics/nomap",
    "qwen_mix_statistics/map",
    "qwen_mix_statistics/map_template",
    "qwen_mix_statistics/fuzzy",
    "qwen_mix_statistics/map_fuzzy",
    "qwen_mix_statistics/bench_vs_bench",
    "qwen_mix_statistics/rank_size_files",
    "qwen_md5/nomap",
    "qwen_md5/map",
    "qwen_L0/nomap",
    "qwen_L0/map",
    "qwen_two_ranks/map",
    "qwen_two_ranks/nomap",
    "qwen_two_ranks/build_npu",
    "qwen_single_graph/build_npu",
    "qwen_single_graph/build_bench_L0",
    "real_tensor/nomap",
    "real_tensor/map",
    "real_tensor/fuzzy",
    "ms_real_tensor/nomap",
    "ms_real_tensor/map",
    "ms_real_tensor/fuzzy",
    "ms_real_tensor/overflow",
    "ms_real_tensor/build_npu",
    "ms_real_tensor/md5",
    "parallel_tp/build_tp2",
    "parallel_tp/compare_tp2",
    "parallel_tp/compare_tp2_oc",
    "parallel_pp/build_pp2",
    "parallel_pp/compare_pp2",
    "parallel_tppp/build_tp2pp2",
    "parallel_tppp/compare_tp2pp2",
    "parallel_vpp/build_pp2vpp2",
    "parallel_vpp/compare_pp2vpp2",
    "parallel_full/build_tp2pp2dp2",
    "parallel_full/compare_tp2pp2dp2",
];

/// Every variant with `-j 2`: the units run two at a time, the db is the same.
#[test]
fn every_variant_with_two_jobs() {
    for v in VARIANTS {
        let (case, variant) = v.split_once('/').unwrap();
        run_variant_how(case, variant, None, &[], How::Jobs(2));
    }
}

/// Every variant as three shards merged by `merge-db` (a single pair: two empty shards) equals
/// msprobe's db; the fixtures with several units also as four shards, each holding one or two.
#[test]
fn every_variant_sharded_and_merged() {
    for v in VARIANTS {
        let (case, variant) = v.split_once('/').unwrap();
        run_variant_how(case, variant, None, &[], How::Shards(3));
    }
    for (case, variant) in [
        ("qwen_two_ranks", "map"),
        ("qwen_two_ranks", "build_npu"),
        ("parallel_full", "compare_tp2pp2dp2"),
        ("parallel_full", "build_tp2pp2dp2"),
    ] {
        run_variant_how(case, variant, None, &[], How::Shards(4));
    }
    // Over the key budget, the merged db's indexes are rebuilt by SQLite.
    run_variant_how(
        "qwen_two_ranks",
        "map",
        None,
        &[("PROBELENS_KEY_BUDGET", "0")],
        How::Shards(2),
    );
}

#[test]
fn all_variants_covered() {
    let listed = VARIANTS;
    let mut found = Vec::new();
    for case in std::fs::read_dir(fixtures()).unwrap().flatten() {
        let r = case.path().join("reference");
        let Ok(rd) = std::fs::read_dir(&r) else {
            continue;
        };
        for v in rd.flatten() {
            let name = v.file_name().to_string_lossy().to_string();
            if !name.starts_with("legacy") {
                found.push(format!("{}/{name}", case.file_name().to_string_lossy()));
            }
        }
    }
    found.sort();
    let mut l: Vec<String> = listed.iter().map(|s| s.to_string()).collect();
    l.sort();
    assert_eq!(found, l);
}

/// The comparison itself can fail: a changed cell is reported.
#[test]
fn diff_detects_a_changed_cell() {
    let expected = fixtures().join("qwen_L0/reference/map");
    let db = std::fs::read_dir(&expected)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.to_string_lossy().ends_with(".vis.db.gz"))
        .unwrap();
    let mut raw = Vec::new();
    flate2::read::GzDecoder::new(std::fs::File::open(&db).unwrap())
        .read_to_end(&mut raw)
        .unwrap();
    let tmp = tempfile(&raw);
    {
        let c = rusqlite::Connection::open(&tmp).unwrap();
        c.execute("update tb_nodes set precision_index = 0.5 where rowid = (select min(rowid) from tb_nodes where precision_index is not null and precision_index != 0.5)", [])
            .unwrap();
        c.execute("update tb_nodes set input_data = replace(input_data, '\"Max\"', '\"Maxx\"') where rowid = 3", []).unwrap();
    }
    let d = diff(&db, &tmp);
    let _ = std::fs::remove_file(&tmp);
    assert_eq!(d.len(), 2, "{d:?}");
    assert!(d.iter().any(|x| x.contains(".precision_index")), "{d:?}");
}
