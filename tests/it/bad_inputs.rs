//! The bad-input corpus: runs the CLI on every case in `tests/bad_inputs/<case>/` (made by
//! `tests/bad_inputs/make.py`) and checks the one line it must print and its exit status.
//!
//! `expected.txt` is one line: an error message (`probelens: error: <line>`, exit 1), a
//! diagnostic starting with `warning: `/`info: ` (printed as `probelens: <line>`, exit 0), or `ok`
//! (exit 0, no error or warning). Result cases with `msprobe.vis.db.gz` must write a database equal
//! to msprobe's, cell by cell. Every case must finish quickly (no hang) and leave no partial file
//! behind on error.

use rusqlite::types::Value;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn corpus() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/bad_inputs")
}

fn cases() -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(corpus())
        .unwrap()
        .flatten()
        .filter(|e| e.path().is_dir())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

fn scratch(what: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!(
        "probelens-bad-inputs-{}-{what}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            copy_dir(&p, &to.join(e.file_name()));
        } else {
            std::fs::copy(&p, to.join(e.file_name())).unwrap();
        }
    }
}

/// A copy of the case with the files of `materialize.txt` made (a sparse file, a deep chain).
fn materialize(case: &str, spec: &str) -> PathBuf {
    let dir = scratch(&format!("{case}-in"));
    copy_dir(&corpus().join(case), &dir);
    for line in spec.lines() {
        let parts: Vec<&str> = line.split_whitespace().collect();
        match parts.as_slice() {
            ["sparse", path, bytes] => {
                let f = std::fs::File::create(dir.join(path)).unwrap();
                f.set_len(bytes.parse().unwrap()).unwrap();
            }
            ["chain", path, depth] => {
                let n: usize = depth.parse().unwrap();
                let mut s = String::from("{\n");
                for i in 0..n {
                    let parent = if i == 0 {
                        "null".to_string()
                    } else {
                        format!("\"Module.m{}.M.forward.0\"", i - 1)
                    };
                    let sep = if i + 1 < n { "," } else { "" };
                    s.push_str(&format!(" \"Module.m{i}.M.forward.0\": {parent}{sep}\n"));
                }
                s.push('}');
                std::fs::write(dir.join(path), s).unwrap();
            }
            [] => {}
            other => panic!("{case}: bad materialize line {other:?}"),
        }
    }
    dir
}

struct Outcome {
    code: Option<i32>,
    stderr: String,
    took: Duration,
    out: PathBuf,
    /// A materialized copy of the case, removed with the output.
    copy: Option<PathBuf>,
}

impl Drop for Outcome {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.out);
        if let Some(c) = &self.copy {
            let _ = std::fs::remove_dir_all(c);
        }
    }
}

fn run_case(case: &str) -> Outcome {
    let src = corpus().join(case);
    let copy = std::fs::read_to_string(src.join("materialize.txt"))
        .ok()
        .map(|spec| materialize(case, &spec));
    let dir = copy.clone().unwrap_or(src);
    let out = scratch(&format!("{case}-out"));
    let mut args: Vec<String> = vec!["graph_visualize".into(), "-tp".into(), "npu".into()];
    if dir.join("bench").is_dir() {
        args.extend(["-gp".into(), "bench".into()]);
    }
    if dir.join("layer_mapping.yaml").is_file() {
        args.extend(["-lm".into(), "layer_mapping.yaml".into()]);
    }
    if let Ok(extra) = std::fs::read_to_string(dir.join("args.txt")) {
        args.extend(extra.lines().filter(|l| !l.is_empty()).map(String::from));
    }
    args.extend([
        "-o".into(),
        out.display().to_string(),
        "--no-progress".into(),
    ]);
    let start = Instant::now();
    let mut child = Command::new(env!("CARGO_BIN_EXE_probelens"))
        .args(&args)
        .current_dir(&dir)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr_pipe = child.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stderr_pipe.read_to_string(&mut s);
        s
    });
    let limit = Duration::from_secs(120);
    let code = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st.code();
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{case}: still running after {limit:?} (a hang)");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    Outcome {
        code,
        stderr: reader.join().unwrap(),
        took: start.elapsed(),
        out,
        copy,
    }
}

type Rows = Vec<Vec<Value>>;

fn table(conn: &rusqlite::Connection, name: &str) -> Rows {
    let mut st = conn
        .prepare(&format!("SELECT * FROM {name} ORDER BY id"))
        .unwrap();
    let n = st.column_count();
    st.query_map([], |r| (0..n).map(|i| r.get::<_, Value>(i)).collect())
        .unwrap()
        .map(|r| r.unwrap())
        .collect()
}

fn db_tables(path: &Path) -> Vec<(&'static str, Rows)> {
    let conn = rusqlite::Connection::open(path).unwrap();
    ["tb_nodes", "tb_stack", "tb_config"]
        .into_iter()
        .map(|t| (t, table(&conn, t)))
        .collect()
}

fn the_db(out: &Path) -> PathBuf {
    let dbs: Vec<PathBuf> = std::fs::read_dir(out)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.to_string_lossy().ends_with(".vis.db"))
        .collect();
    assert_eq!(dbs.len(), 1, "{}: {dbs:?}", out.display());
    dbs.into_iter().next().unwrap()
}

/// Differences between our db and msprobe's (empty when equal).
fn diff_with_msprobe(case: &str, ours: &Path) -> Vec<String> {
    let gz = corpus().join(case).join("msprobe.vis.db.gz");
    let mut raw = Vec::new();
    flate2::read::GzDecoder::new(std::fs::File::open(&gz).unwrap())
        .read_to_end(&mut raw)
        .unwrap();
    let dir = scratch(&format!("{case}-msprobe"));
    let theirs = dir.join("msprobe.vis.db");
    std::fs::write(&theirs, raw).unwrap();
    let (a, b) = (db_tables(&theirs), db_tables(ours));
    let _ = std::fs::remove_dir_all(&dir);
    let mut out = Vec::new();
    for ((t, ra), (_, rb)) in a.iter().zip(b.iter()) {
        if ra.len() != rb.len() {
            out.push(format!("{t}: msprobe {} rows, ours {}", ra.len(), rb.len()));
        }
        for (x, y) in ra.iter().zip(rb.iter()) {
            if x != y {
                out.push(format!("{t}: msprobe {x:?}\n   ours {y:?}"));
            }
        }
    }
    out
}

fn check(case: &str) -> Result<(), String> {
    let expected = std::fs::read_to_string(corpus().join(case).join("expected.txt"))
        .map_err(|e| format!("{case}: no expected.txt ({e})"))?;
    let expected = expected.trim_end_matches('\n');
    if expected.contains('\n') {
        return Err(format!("{case}: expected.txt must be one line"));
    }
    let o = run_case(case);
    let lines: Vec<&str> = o.stderr.lines().collect();
    let fail = |why: String| Err(format!("{case}: {why}\n  stderr: {}", o.stderr.trim_end()));
    if o.took > Duration::from_secs(20) {
        return fail(format!("took {:?}", o.took));
    }
    let complaints: Vec<&&str> = lines
        .iter()
        .filter(|l| l.starts_with("probelens: error: ") || l.starts_with("probelens: warning: "))
        .collect();
    let is_result =
        expected == "ok" || expected.starts_with("warning: ") || expected.starts_with("info: ");
    if !is_result {
        let want = format!("probelens: error: {expected}");
        if o.code != Some(1) {
            return fail(format!("exit {:?}, expected 1", o.code));
        }
        if lines != [want.as_str()] {
            return fail(format!("expected exactly:\n  {want}"));
        }
        let left: Vec<_> = std::fs::read_dir(&o.out).unwrap().flatten().collect();
        if !left.is_empty() {
            return fail(format!("left files behind: {left:?}"));
        }
        return Ok(());
    }
    if o.code != Some(0) {
        return fail(format!("exit {:?}, expected 0", o.code));
    }
    if expected == "ok" {
        if !complaints.is_empty() {
            return fail("expected no error or warning".into());
        }
    } else {
        let want = format!("probelens: {expected}");
        if complaints != [&want.as_str()] {
            return fail(format!("expected exactly this diagnostic:\n  {want}"));
        }
    }
    if corpus().join(case).join("msprobe.vis.db.gz").is_file() {
        let d = diff_with_msprobe(case, &the_db(&o.out));
        if !d.is_empty() {
            return Err(format!(
                "{case}: the db differs from msprobe's ({} cells):\n{}",
                d.len(),
                d.iter().take(5).cloned().collect::<Vec<_>>().join("\n")
            ));
        }
    }
    Ok(())
}

#[test]
fn every_case_prints_its_expected_line() {
    let mut failures = Vec::new();
    for case in cases() {
        if let Err(e) = check(&case) {
            failures.push(e);
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn corpus_is_complete() {
    let cases = cases();
    assert!(cases.len() >= 22, "only {} cases", cases.len());
    for c in &cases {
        let d = corpus().join(c);
        assert!(d.join("expected.txt").is_file(), "{c}: no expected.txt");
        assert!(d.join("npu").is_dir(), "{c}: no npu/ folder");
    }
}

#[test]
fn a_node_name_with_markup_is_just_a_name() {
    let o = run_case("html_in_node_name");
    assert_eq!(o.code, Some(0), "{}", o.stderr);
    let conn = rusqlite::Connection::open(the_db(&o.out)).unwrap();
    let name = "Module.0.module.<img src=x onerror=alert(1)>.</script><script>alert(2)</script>.Evil.forward.0";
    let n: i64 = conn
        .query_row(
            "SELECT count(*) FROM tb_nodes WHERE node_name = ?",
            [name],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(n, 2, "the name is stored verbatim on both sides");
}
