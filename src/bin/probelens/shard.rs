//! Shards of a run for a cluster's scheduler: `--shard I/N` writes the I-th of N slices of the
//! plan as a partial `.vis.db`, and `probelens merge-db` joins the partial dbs into the db one run
//! writes.
//!
//! A slice is contiguous: shard I holds units `I*len/N .. (I+1)*len/N` of the plan (sizes differ by
//! at most one), so the shards in index order hold the units in plan order, and the shard that
//! holds the first unit holds the `tb_config` row one run writes. A partial db is a `.vis.db`
//! (the page opens it: its `tb_config` lists its own ranks and steps) without msprobe's
//! distributed post-analysis, which needs every rank, plus a table `probelens_shard` of
//! (key, value) texts: which shard it is, the whole plan's units, the run's options, the whole
//! run's rank and step lists. `merge-db` checks that the partial dbs are the N shards of one run
//! (naming a missing one with its ranks), copies their rows in shard order into a new file through
//! the page writer, writes the `tb_config` row, and runs the post-pass (the indexes, then the
//! distributed analysis once over all ranks, from the rows' `is_distributed` nodes).
//! `diagnose --shard I/N --json` writes its part as JSON, and `diagnose --merge` joins parts.

use crate::db::{db_err, post_pass, PartFile};
use crate::graph_visualize::{create_db, timestamp, DistBySource};
use probelens::base::error::{Error, Result};
use probelens::visdb::export::{self, DistNode};
use probelens::visdb::sqlite_writer::Value;
use rusqlite::types::ValueRef;
use rusqlite::{params, Connection, OpenFlags};
use std::path::{Path, PathBuf};

/// The units of shard `shard` (all of them without one).
pub(crate) fn shard_slice<U>(units: &[U], shard: Option<(usize, usize)>) -> &[U] {
    match shard {
        Some((i, n)) => &units[slice_range(units.len(), i, n)],
        None => units,
    }
}

/// Shard `i` of `n` of `len` units.
pub(crate) fn slice_range(len: usize, i: usize, n: usize) -> std::ops::Range<usize> {
    let n = n.max(1);
    (i * len / n).min(len)..((i + 1) * len / n).min(len)
}

/// One unit of the plan as a shard records it: the step and its ranks (one, or a merged step's).
pub(crate) type UnitKey = (i64, Vec<i64>);

/// What a partial db records besides its rows.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Meta {
    pub(crate) index: usize,
    pub(crate) count: usize,
    /// The options that must agree between the shards of one run.
    pub(crate) run: String,
    /// The whole plan's units, in plan order.
    pub(crate) units: Vec<UnitKey>,
    /// "build" or "compare".
    pub(crate) kind: String,
    /// msprobe's distributed post-analysis applies (rank folders, no parallel merge).
    pub(crate) distributed: bool,
    pub(crate) overflow: bool,
    /// The run's `tb_config` rank and step lists (those of the shard holding the first unit are
    /// the whole run's); None when the shard wrote no row.
    pub(crate) lists: Option<(String, String)>,
}

const FORMAT: &str = "probelens partial vis.db 1";

impl Meta {
    fn pairs(&self) -> Vec<(&'static str, String)> {
        let units = serde_json::to_string(&self.units).unwrap_or_default();
        let (rl, sl) = self.lists.clone().unwrap_or_default();
        vec![
            ("format", FORMAT.to_string()),
            ("shard", format!("{}/{}", self.index, self.count)),
            ("run", self.run.clone()),
            ("units", units),
            ("kind", self.kind.clone()),
            ("distributed", (self.distributed as u8).to_string()),
            ("overflow", (self.overflow as u8).to_string()),
            ("has_config", (self.lists.is_some() as u8).to_string()),
            ("rank_list", rl),
            ("step_list", sl),
        ]
    }

    /// The units this shard holds.
    pub(crate) fn own_units(&self) -> &[UnitKey] {
        &self.units[slice_range(self.units.len(), self.index, self.count)]
    }
}

/// Writes the `probelens_shard` table into the database at `path`.
pub(crate) fn write_meta(path: &Path, meta: &Meta) -> rusqlite::Result<()> {
    let mut conn = Connection::open(path)?;
    conn.execute_batch("PRAGMA journal_mode=OFF; PRAGMA synchronous=OFF;")?;
    let tx = conn.transaction()?;
    tx.execute_batch(
        "CREATE TABLE probelens_shard (\n    key TEXT PRIMARY KEY,\n    value TEXT NOT NULL\n)",
    )?;
    for (k, v) in meta.pairs() {
        tx.execute(
            "INSERT INTO probelens_shard (key, value) VALUES (?, ?)",
            params![k, v],
        )?;
    }
    tx.commit()
}

/// Reads a partial db's `probelens_shard` table.
fn read_meta(path: &Path, conn: &Connection) -> Result<Meta> {
    let shown = path.display().to_string();
    let not_partial = |why: &str| {
        Error::input(
            shown.clone(),
            format!("not a partial db of `graph_visualize --shard I/N` ({why})"),
        )
    };
    let mut stmt = conn
        .prepare("SELECT key, value FROM probelens_shard")
        .map_err(|_| not_partial("no probelens_shard table"))?;
    let rows = stmt
        .query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?)))
        .map_err(|e| not_partial(&e.to_string()))?;
    let mut map = std::collections::HashMap::new();
    for r in rows {
        let (k, v) = r.map_err(|e| not_partial(&e.to_string()))?;
        map.insert(k, v);
    }
    let get = |k: &str| {
        map.get(k)
            .cloned()
            .ok_or_else(|| not_partial(&format!("no '{k}' in probelens_shard")))
    };
    if get("format")? != FORMAT {
        return Err(not_partial(&format!(
            "its format is '{}', this probelens reads '{FORMAT}'",
            get("format")?
        )));
    }
    let (index, count) = crate::args::parse_shard(&get("shard")?).map_err(|e| not_partial(&e))?;
    let units: Vec<UnitKey> =
        serde_json::from_str(&get("units")?).map_err(|e| not_partial(&format!("units: {e}")))?;
    let lists = (get("has_config")? == "1").then(|| (get("rank_list"), get("step_list")));
    let lists = match lists {
        Some((r, s)) => Some((r?, s?)),
        None => None,
    };
    Ok(Meta {
        index,
        count,
        run: get("run")?,
        units,
        kind: get("kind")?,
        distributed: get("distributed")? == "1",
        overflow: get("overflow")? == "1",
        lists,
    })
}

/// `1-3,8` for people: a sorted list of ranks with runs folded.
pub(crate) fn show_ranks(ranks: &[i64]) -> String {
    let mut r: Vec<i64> = ranks.to_vec();
    r.sort_unstable();
    r.dedup();
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < r.len() {
        let mut j = i;
        while j + 1 < r.len() && r[j + 1] == r[j] + 1 {
            j += 1;
        }
        out.push(if j > i + 1 {
            format!("{}-{}", r[i], r[j])
        } else if j == i + 1 {
            format!("{},{}", r[i], r[j])
        } else {
            r[i].to_string()
        });
        i = j + 1;
    }
    out.join(",")
}

/// What shard `index` of the units holds, for people: `step 0 ranks 8-11`.
pub(crate) fn describe(units: &[UnitKey], index: usize, count: usize) -> String {
    let own = &units[slice_range(units.len(), index, count)];
    if own.is_empty() {
        return "no units".into();
    }
    let mut steps: Vec<(i64, Vec<i64>)> = Vec::new();
    for (s, ranks) in own {
        match steps.iter_mut().find(|(st, _)| st == s) {
            Some((_, r)) => r.extend(ranks),
            None => steps.push((*s, ranks.clone())),
        }
    }
    steps
        .iter()
        .map(|(s, r)| format!("step {s} ranks {}", show_ranks(r)))
        .collect::<Vec<_>>()
        .join("; ")
}

pub(crate) const MERGE_USAGE: &str = "usage: probelens merge-db -o OUTPUT PARTIAL.vis.db...

Joins the partial dbs that `probelens graph_visualize ... --shard I/N` wrote (all N of one run,
in any order) into the .vis.db one run without --shard writes: the rows of every shard, the
tb_config row, the indexes, and msprobe's distributed analysis once over all ranks.

  -o, --output_path OUT   a folder (the db is written as <kind>_<time>.vis.db in it, as
                          graph_visualize names it) or a file path ending in .db";

/// `probelens merge-db`.
pub(crate) fn merge_db_main(argv: &[String]) -> i32 {
    let mut out: Option<PathBuf> = None;
    let mut inputs: Vec<PathBuf> = Vec::new();
    let mut i = 0;
    while i < argv.len() {
        match argv[i].as_str() {
            "-h" | "--help" => {
                println!("{MERGE_USAGE}");
                return 0;
            }
            "-o" | "--output_path" => {
                i += 1;
                match argv.get(i) {
                    Some(p) => out = Some(PathBuf::from(p)),
                    None => {
                        eprintln!("{MERGE_USAGE}\nprobelens merge-db: error: argument -o/--output_path: expected one argument");
                        return 2;
                    }
                }
            }
            s if s.starts_with('-') && s.len() > 1 => {
                eprintln!("{MERGE_USAGE}\nprobelens merge-db: error: unrecognized argument: {s}");
                return 2;
            }
            s => inputs.push(PathBuf::from(s)),
        }
        i += 1;
    }
    let Some(out) = out else {
        eprintln!("{MERGE_USAGE}\nprobelens merge-db: error: the following arguments are required: -o/--output_path");
        return 2;
    };
    if inputs.is_empty() {
        eprintln!("{MERGE_USAGE}\nprobelens merge-db: error: no partial db given");
        return 2;
    }
    match merge_db(&out, &inputs) {
        Ok(p) => {
            println!("probelens: wrote {}", p.display());
            0
        }
        Err(e) => {
            eprintln!("probelens: error: {e}");
            1
        }
    }
}

/// One piece of a sharded run, a partial db or a `diagnose` part: what the checks that the pieces
/// given are the N pieces of one run, each once, look at.
pub(crate) struct Piece<'a> {
    pub(crate) index: usize,
    pub(crate) count: usize,
    /// The run's options ([`Meta::run`]).
    pub(crate) run: &'a str,
    /// The whole plan's units.
    pub(crate) units: &'a [UnitKey],
    pub(crate) path: &'a Path,
}

impl<'a> Piece<'a> {
    fn of(meta: &'a Meta, path: &'a Path) -> Piece<'a> {
        Piece {
            index: meta.index,
            count: meta.count,
            run: &meta.run,
            units: &meta.units,
            path,
        }
    }
}

/// `new` beside the pieces `taken` so far (`noun`: "shard" or "part"): an error naming its file
/// when it is of another run than the first, or its index is taken.
pub(crate) fn admit<'a>(
    taken: impl Iterator<Item = Piece<'a>>,
    new: &Piece,
    noun: &str,
) -> Result<()> {
    let shown = || new.path.display().to_string();
    for (k, t) in taken.enumerate() {
        if k == 0 && (new.count != t.count || new.run != t.run || new.units != t.units) {
            return Err(Error::input(
                shown(),
                format!(
                    "{noun} {}/{} is of another run than {} ({noun} {}/{}): its options, dumps or shard count differ",
                    new.index,
                    new.count,
                    t.path.display(),
                    t.index,
                    t.count
                ),
            ));
        }
        if t.index == new.index {
            return Err(Error::input(
                shown(),
                format!(
                    "{noun} {}/{} is given twice (also {})",
                    new.index,
                    new.count,
                    t.path.display()
                ),
            ));
        }
    }
    Ok(())
}

/// An error (at `place`) naming the pieces of the run that none of `taken` (admitted, at least
/// one) is, with their ranks, and `again`: how to make them.
pub(crate) fn none_missing<'a>(
    taken: impl Iterator<Item = Piece<'a>> + Clone,
    place: &str,
    noun: &str,
    again: &str,
) -> Result<()> {
    let Some(first) = taken.clone().next() else {
        return Ok(());
    };
    let count = first.count;
    let missing: Vec<String> = (0..count)
        .filter(|i| !taken.clone().any(|p| p.index == *i))
        .map(|i| format!("{noun} {i}/{count} ({})", describe(first.units, i, count)))
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    Err(Error::input(
        place,
        format!(
            "{} of {count} {noun}s missing: {}. {again} and merge all {count}",
            missing.len(),
            missing.join(", ")
        ),
    ))
}

/// A partial db opened for reading, with its meta.
struct Part {
    path: PathBuf,
    conn: Connection,
    meta: Meta,
}

/// Opens the partial dbs and checks that they are the N shards of one run, each once.
fn open_parts(inputs: &[PathBuf]) -> Result<Vec<Part>> {
    let mut parts: Vec<Part> = Vec::new();
    for path in inputs {
        let shown = path.display().to_string();
        if !path.is_file() {
            return Err(Error::file_not_found(shown));
        }
        let mut head = [0u8; 16];
        let read = std::fs::File::open(path)
            .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut head));
        if read.is_err() || &head != b"SQLite format 3\0" {
            return Err(Error::input(
                shown,
                "not a SQLite database (a partial db of `graph_visualize --shard I/N` is one)",
            ));
        }
        let conn = Connection::open_with_flags(path, OpenFlags::SQLITE_OPEN_READ_ONLY)
            .map_err(|e| Error::input(shown.clone(), format!("cannot open: {e}")))?;
        let meta = read_meta(path, &conn)?;
        let new = Piece::of(&meta, path);
        admit(
            parts.iter().map(|p| Piece::of(&p.meta, &p.path)),
            &new,
            "shard",
        )?;
        parts.push(Part {
            path: path.clone(),
            conn,
            meta,
        });
    }
    let count = parts[0].meta.count;
    none_missing(
        parts.iter().map(|p| Piece::of(&p.meta, &p.path)),
        "merge-db",
        "shard",
        &format!("Run them again (`--shard I/{count}`, the same command otherwise)"),
    )?;
    parts.sort_by_key(|p| p.meta.index);
    Ok(parts)
}

/// A row's values from SQLite, as the writer takes them.
fn values<'r>(row: &'r rusqlite::Row, n: usize, path: &Path) -> Result<Vec<Value<'r>>> {
    (0..n)
        .map(|i| match row.get_ref(i) {
            Ok(ValueRef::Null) => Ok(Value::Null),
            Ok(ValueRef::Integer(v)) => Ok(Value::Int(v)),
            Ok(ValueRef::Real(v)) => Ok(Value::Real(v)),
            Ok(ValueRef::Text(t)) => std::str::from_utf8(t)
                .map(Value::Text)
                .map_err(|_| Error::input(path.display().to_string(), "a text that is not UTF-8")),
            Ok(ValueRef::Blob(_)) => Err(Error::input(
                path.display().to_string(),
                "a blob where the schema has none",
            )),
            Err(e) => Err(Error::input(path.display().to_string(), e.to_string())),
        })
        .collect()
}

fn read_err(path: &Path, e: rusqlite::Error) -> Error {
    Error::input(path.display().to_string(), format!("cannot read: {e}"))
}

/// `merge-db`: the db one run writes, from its N partial dbs. Returns the written path.
pub(crate) fn merge_db(out: &Path, inputs: &[PathBuf]) -> Result<PathBuf> {
    let parts = open_parts(inputs)?;
    let first = &parts[0].meta;
    let db_path = if out.extension().is_some_and(|e| e == "db") {
        out.to_path_buf()
    } else {
        std::fs::create_dir_all(out).map_err(|e| {
            Error::input(
                out.display().to_string(),
                format!("cannot create the output folder: {e}"),
            )
        })?;
        out.join(format!("{}_{}.vis.db", first.kind, timestamp()))
    };
    let tmp_path = db_path.with_extension("db.part");
    let keys_path = db_path.with_extension("db.keys");
    let _ = std::fs::remove_file(&tmp_path);
    let _ = std::fs::remove_file(&keys_path);
    let _part = PartFile(tmp_path.clone());
    let _keys_part = PartFile(keys_path.clone());
    let (mut db, _) = create_db(
        &db_path,
        &tmp_path,
        &keys_path,
        false,
        crate::jobs::Budget::new(None, None).keys,
    )?;
    let (tables, _) = probelens::visdb::schema();
    for p in &parts {
        for (t, name) in [
            (probelens::visdb::TB_NODES, "tb_nodes"),
            (probelens::visdb::TB_STACK, "tb_stack"),
        ] {
            let n = tables[t].columns;
            let mut stmt = p
                .conn
                .prepare(&format!("SELECT * FROM {name} ORDER BY rowid"))
                .map_err(|e| read_err(&p.path, e))?;
            if stmt.column_count() != n {
                return Err(Error::input(
                    p.path.display().to_string(),
                    format!("{name} has {} columns, not {n}", stmt.column_count()),
                ));
            }
            let mut rows = stmt.query([]).map_err(|e| read_err(&p.path, e))?;
            while let Some(row) = rows.next().map_err(|e| read_err(&p.path, e))? {
                let v = values(row, n, &p.path)?;
                db.insert(t, &v).map_err(|e| db_err(&db_path, e))?;
            }
        }
    }
    // The run's tb_config row: that of the shard holding the first unit, with the run's lists.
    if let Some(p) = parts.iter().find(|p| p.meta.lists.is_some()) {
        let (rank_list, step_list) = p.meta.lists.clone().unwrap_or_default();
        let mut stmt = p
            .conn
            .prepare("SELECT * FROM tb_config")
            .map_err(|e| read_err(&p.path, e))?;
        let n = tables[probelens::visdb::TB_CONFIG].columns;
        let mut rows = stmt.query([]).map_err(|e| read_err(&p.path, e))?;
        if let Some(row) = rows.next().map_err(|e| read_err(&p.path, e))? {
            let mut v = values(row, n, &p.path)?;
            if v.len() == 9 {
                v[7] = Value::Text(&rank_list);
                v[8] = Value::Text(&step_list);
            }
            db.insert(probelens::visdb::TB_CONFIG, &v)
                .map_err(|e| db_err(&db_path, e))?;
        }
    }
    let reindex = db.indexes_deferred();
    let file = db
        .finish_with(Some(crate::fs::two_threads))
        .map_err(|e| db_err(&db_path, e))?;
    drop(file);
    let updates = if first.distributed {
        let dist = dist_nodes(&parts)?;
        dist.iter()
            .flat_map(|(source, step, ranks)| {
                export::distributed_analyse(ranks, first.overflow, source, *step)
            })
            .collect()
    } else {
        Vec::new()
    };
    if reindex || !updates.is_empty() {
        post_pass(&tmp_path, reindex, &updates).map_err(|e| db_err(&db_path, e))?;
    }
    std::fs::rename(&tmp_path, &db_path)
        .map_err(|e| Error::input(db_path.display().to_string(), format!("cannot write: {e}")))?;
    Ok(db_path)
}

/// The distributed nodes of every pair, as one run collects them while it exports: per (data
/// source, step), the ranks in plan order, each rank's nodes in post-order.
fn dist_nodes(parts: &[Part]) -> Result<DistBySource> {
    let mut dist: DistBySource = Vec::new();
    for p in parts {
        let mut stmt = p
            .conn
            .prepare(
                "SELECT node_name, input_data, precision_index, overflow_level FROM tb_nodes \
                 WHERE is_distributed = 1 AND step = ? AND rank = ? AND data_source = ? ORDER BY node_order",
            )
            .map_err(|e| read_err(&p.path, e))?;
        for (step, ranks) in p.meta.own_units() {
            for rank in ranks {
                for source in ["NPU", "Bench"] {
                    let rows = stmt
                        .query_map(params![step, rank, source], |r| {
                            let precision = match r.get_ref(2)? {
                                ValueRef::Integer(v) => Some(v as f64),
                                ValueRef::Real(v) => Some(v),
                                _ => None,
                            };
                            let overflow: Option<String> = r.get(3)?;
                            Ok(DistNode {
                                name: r.get(0)?,
                                input_data: r.get::<_, Option<String>>(1)?.unwrap_or_default(),
                                precision,
                                overflow: overflow.as_deref().and_then(overflow_level),
                            })
                        })
                        .map_err(|e| read_err(&p.path, e))?;
                    let nodes = rows
                        .collect::<rusqlite::Result<Vec<DistNode>>>()
                        .map_err(|e| read_err(&p.path, e))?;
                    crate::graph_visualize::push_dist(&mut dist, source, *step, *rank, nodes);
                }
            }
        }
    }
    Ok(dist)
}

fn overflow_level(s: &str) -> Option<&'static str> {
    use probelens::formats::dump::OverflowLevel as O;
    [O::Medium, O::High, O::Critical]
        .into_iter()
        .map(O::as_str)
        .find(|l| *l == s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slices_cover_the_plan_in_order() {
        for len in 0..20 {
            for n in 1..7 {
                let all: Vec<usize> = (0..n).flat_map(|i| slice_range(len, i, n)).collect();
                assert_eq!(all, (0..len).collect::<Vec<_>>(), "{len} units, {n} shards");
                for i in 0..n {
                    let l = slice_range(len, i, n).len();
                    assert!(l == len / n || l == len / n + 1);
                }
            }
        }
    }

    #[test]
    fn ranks_for_people() {
        assert_eq!(show_ranks(&[3, 0, 1, 2, 8, 10, 11]), "0-3,8,10,11");
        let units: Vec<UnitKey> = (0..16).map(|r| (0, vec![r])).collect();
        assert_eq!(describe(&units, 2, 4), "step 0 ranks 8-11");
    }
}
