//! The `.vis.db` file: the sink the formatting threads write rows through, the export of a
//! pair's graphs into it, the key spill, and SQLite's post-pass.

use probelens::base::error::Error;
use probelens::visdb;
use probelens::visdb::export::{self, DistNode, GraphExport, GraphRows, NodeRow, Sink, StackRow};
use probelens::visdb::sqlite_writer::Writer;
use rusqlite::{params, Connection};
use std::path::{Path, PathBuf};

/// Rows encoded as SQLite records by the thread that formats them (`sqlite_writer::append_record`),
/// waiting to be packed into pages.
#[derive(Default)]
pub(crate) struct Batch {
    pub(crate) bytes: Vec<u8>,
    /// Each row's table and where its record ends in `bytes`.
    pub(crate) rows: Vec<(usize, usize)>,
}

/// The database writer shared by the formatting threads, and its first error (after which
/// rows are dropped; the error is reported when the export ends).
pub(crate) struct SharedDb {
    pub(crate) db: DbWriter,
    pub(crate) err: Option<std::io::Error>,
    /// How long the sinks held the lock: the part of the export that units cannot do side by
    /// side (`--timing` prints it).
    pub(crate) held: std::time::Duration,
}

/// The export's [`Sink`] on a formatting thread: rows are encoded here into a batch, and the
/// batch is packed into the file's pages by the same thread, under the writer's lock, while it
/// is still in this core's cache (a writer thread of its own read every batch from the other
/// cores' caches, and was a third thread on two cores).
pub(crate) struct DbSink<'w> {
    pub(crate) batch: Batch,
    pub(crate) shared: &'w std::sync::Mutex<SharedDb>,
    /// The database file (another handle to it): the table leaves the writer hands over
    /// (`Writer::hand_runs`) are written here after the lock is let go.
    pub(crate) out: &'w DbFile,
    pub(crate) runs: Vec<(u64, Vec<u8>)>,
    /// Buffers of runs written, given back to the writer at the next lock.
    pub(crate) written: Vec<Vec<u8>>,
}

impl<'w> DbSink<'w> {
    /// A batch is packed at this many rows or bytes.
    pub(crate) const ROWS: usize = 512;
    pub(crate) const BYTES: usize = 256 << 10;
    pub(crate) fn new(shared: &'w std::sync::Mutex<SharedDb>, out: &'w DbFile) -> DbSink<'w> {
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
    pub(crate) fn push(&mut self, table: usize, values: &[probelens::visdb::sqlite_writer::Value]) {
        probelens::visdb::sqlite_writer::append_record(values, &mut self.batch.bytes);
        self.batch.rows.push((table, self.batch.bytes.len()));
        if self.batch.rows.len() >= Self::ROWS || self.batch.bytes.len() >= Self::BYTES {
            self.flush();
        }
    }
    pub(crate) fn expect_nodes(&mut self, n: usize) {
        self.flush();
        if let Ok(mut s) = self.shared.lock() {
            s.db.expect_rows(visdb::TB_NODES, n);
        }
    }
    /// Another sink into the same writer (for a second formatting thread).
    pub(crate) fn sibling(&self) -> DbSink<'w> {
        DbSink::new(self.shared, self.out)
    }
    pub(crate) fn flush(&mut self) {
        if self.batch.rows.is_empty() {
            return;
        }
        // A poisoned lock: the other thread panicked (the scope passes the panic on).
        if let Ok(mut s) = self.shared.lock() {
            let t = std::time::Instant::now();
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
            s.held += t.elapsed();
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

pub(crate) type DbWriter = Writer<DbFile>;

/// The database file, written at page offsets (from the two threads that write the indexes).
pub(crate) struct DbFile(pub(crate) std::fs::File);

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

pub(crate) fn db_err(path: &Path, e: impl std::fmt::Display) -> Error {
    Error::input(
        path.display().to_string(),
        format!("cannot write the database: {e}"),
    )
}

/// The memory the index keys of the `.vis.db` may take before SQLite builds the indexes instead
/// (`sqlite_writer::Writer::set_key_budget`): 1 GiB, or `PROBELENS_KEY_BUDGET` bytes (tests).
pub(crate) fn key_budget() -> usize {
    env_usize("PROBELENS_KEY_BUDGET").unwrap_or(1 << 30)
}

/// The number in environment variable `name`, if it holds one.
pub(crate) fn env_usize(name: &str) -> Option<usize> {
    std::env::var(name).ok()?.parse().ok()
}

/// What SQLite itself does to the written file: rebuild the indexes when the writer left them
/// empty (over its key budget: SQLite sorts in bounded memory), and msprobe's distributed
/// post-analysis (`matched_distributed` of the nodes it names).
pub(crate) fn post_pass(
    path: &Path,
    reindex: bool,
    updates: &[export::DistUpdate],
) -> rusqlite::Result<()> {
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

/// Removes a partially written file when dropped.
pub(crate) struct PartFile(pub(crate) PathBuf);

/// The index keys' texts while the rows are written (`sqlite_writer::Spill`): a file beside the
/// database, in the page cache rather than in this process's memory (the keys were ~30 MB of the
/// scale pair's ~210 MB peak), read back once for the index phase. Unlinked as soon as it is open
/// where the system allows it (the open file stays usable); else `PartFile` removes it.
pub(crate) struct FileSpill {
    pub(crate) file: std::fs::File,
    pub(crate) len: u64,
}

impl FileSpill {
    pub(crate) fn create(path: &Path) -> std::io::Result<FileSpill> {
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

/// Rows in a part of [`export_graphs`]: 4096, or `PROBELENS_EXPORT_PART` (tests: small parts on
/// the fixtures' small graphs).
pub(crate) fn export_part() -> usize {
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
/// carry their `node_order`). Returns the deferred compare's warnings too, as messages.
pub(crate) fn export_graphs(
    npu: &GraphExport,
    bench: Option<&GraphExport>,
    sink: &mut DbSink,
) -> (Vec<Vec<DistNode>>, Vec<String>) {
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
    let messages = warnings
        .iter()
        .map(|(_, _, d)| format!("probelens: {d}"))
        .collect();
    found.sort_by_key(|(g, o, _)| (*g, *o));
    let mut dist: Vec<Vec<DistNode>> = lens.iter().map(|_| Vec::new()).collect();
    for (g, _, d) in found {
        if let Some(v) = dist.get_mut(g) {
            v.push(d);
        }
    }
    rows.write_stacks(sink);
    (dist, messages)
}
