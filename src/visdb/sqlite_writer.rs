//! A bulk writer of SQLite database files: every table and index is written as B-tree pages in
//! one pass (the file format of <https://www.sqlite.org/fileformat2.html>), not through SQL.
//!
//! Why: the `.vis.db` of a large compare holds hundreds of thousands of rows of a few KB with
//! eight indexes over them. Inserting them through SQLite (prepared statements, one transaction,
//! the indexes' B-trees in its cache) cost ~4 s of the scale pair's ~6.5 s end to end: VDBE
//! steps, B-tree searches and page balancing, to build a file whose content is known up front.
//! Here each row is encoded once into a record and packed into the table's current leaf page as
//! it arrives. The indexed columns are kept aside, compactly (integers and text offsets, repeated
//! texts stored once, texts front-coded against an earlier whole one); at the end each column is
//! ranked once (texts by an 8-bytes-at-a-time radix sort), each index sorts its rows by their
//! packed rank tuple, and its B-tree is packed bottom-up, as SQLite's own `CREATE INDEX` does.
//! The result is an ordinary database: the tests read every file back through SQLite, run
//! `PRAGMA integrity_check`, scan every index against SQLite's own sort, and let SQLite change the
//! file afterwards.
//!
//! What it writes: 64 KiB pages, schema format 4, UTF-8, no auto-vacuum, no freelist, rollback
//! journal mode (file format version 1); tables with implicit rowids 1, 2, … in insert order; the
//! automatic index of a `TEXT PRIMARY KEY` (`sqlite_autoindex_<table>_1`, unique: a duplicate key is
//! an error, as the insert would have been) and plain indexes (ascending, BINARY). Values are stored
//! as given: the caller passes what SQLite's column affinity would have stored (integers for
//! INTEGER columns, texts for TEXT ones).
//!
//! No IO of its own: pages go to the host's [`Output`] (positional writes; the CLI's is a file).
//! Page 1 (the schema) and one root page per table and index are reserved at the start, numbered
//! as SQLite numbers them, and written last; the other pages are allocated from one counter as
//! they fill up, by the two threads that write indexes when the host's [`crate::base::Join`] gives two.

use std::cmp::Ordering;
use std::io;
use std::sync::atomic::{AtomicU32, Ordering as AtomicOrdering};

/// One column value of a row.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Value<'a> {
    Null,
    Int(i64),
    Real(f64),
    Text(&'a str),
}

/// A table: its `CREATE TABLE` text as `sqlite_master` stores it, its column count, and the
/// column of its `TEXT PRIMARY KEY` (which gets the automatic unique index), if any.
#[derive(Clone, Debug)]
pub struct Table {
    pub name: String,
    pub sql: String,
    pub columns: usize,
    pub primary_key: Option<usize>,
}

/// An index on one table: `CREATE INDEX` text and the indexed columns (ascending, BINARY).
#[derive(Clone, Debug)]
pub struct Index {
    pub name: String,
    pub table: usize,
    pub sql: String,
    pub columns: Vec<usize>,
}

/// The page size written (64 KiB: rows of a few KB rarely overflow; `.vis.db` readers do not
/// depend on it).
pub const PAGE_SIZE: usize = 65536;
const USABLE: usize = PAGE_SIZE; // no reserved bytes at the end of pages
/// Largest payload kept on a table leaf page; `MIN_LOCAL` is the least kept when it spills.
const TABLE_MAX_LOCAL: usize = USABLE - 35;
const INDEX_MAX_LOCAL: usize = (USABLE - 12) * 64 / 255 - 23;
const MIN_LOCAL: usize = (USABLE - 12) * 32 / 255 - 23;
const OVERFLOW_CONTENT: usize = USABLE - 4;

const LEAF_TABLE: u8 = 0x0d;
const INTERIOR_TABLE: u8 = 0x05;
const LEAF_INDEX: u8 = 0x0a;
const INTERIOR_INDEX: u8 = 0x02;

/// The SQLite version recorded in the header's "version-valid-for" field: 3.46.0.
pub const SQLITE_VERSION_NUMBER: u32 = 3_046_000;

fn invalid(msg: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, msg)
}

/// Appends SQLite's big-endian variable-length integer (1–9 bytes).
fn put_varint(out: &mut Vec<u8>, v: u64) {
    if v <= 0x7f {
        out.push(v as u8);
        return;
    }
    if v > 0x00ff_ffff_ffff_ffff {
        // 9 bytes: 8 groups of 7 bits, then a full last byte.
        let mut buf = [0u8; 9];
        buf[8] = v as u8;
        let mut x = v >> 8;
        for b in buf[..8].iter_mut().rev() {
            *b = (x & 0x7f) as u8 | 0x80;
            x >>= 7;
        }
        out.extend_from_slice(&buf);
        return;
    }
    let mut buf = [0u8; 9];
    let mut n = 0;
    let mut x = v;
    while x > 0 {
        buf[n] = (x & 0x7f) as u8 | 0x80;
        x >>= 7;
        n += 1;
    }
    buf[0] &= 0x7f;
    buf[..n].reverse();
    out.extend_from_slice(&buf[..n]);
}

fn varint_len(v: u64) -> usize {
    if v > 0x00ff_ffff_ffff_ffff {
        return 9;
    }
    let bits = 64 - v.leading_zeros() as usize;
    bits.div_ceil(7).max(1)
}

/// Serial type and body size of an integer (the smallest of SQLite's encodings).
fn int_serial(v: i64) -> (u64, usize) {
    match v {
        0 => (8, 0),
        1 => (9, 0),
        -128..=127 => (1, 1),
        -32768..=32767 => (2, 2),
        -8_388_608..=8_388_607 => (3, 3),
        -2_147_483_648..=2_147_483_647 => (4, 4),
        -140_737_488_355_328..=140_737_488_355_327 => (5, 6),
        _ => (6, 8),
    }
}

/// A value as a record holds it: a row's [`Value`] or an index key's (texts as bytes, an index
/// key's possibly in two parts: see [`TextArena`]).
#[derive(Clone, Copy, Debug)]
enum Raw<'a> {
    Null,
    Int(i64),
    Real(f64),
    Text(Txt<'a>),
}

impl<'a> From<Value<'a>> for Raw<'a> {
    fn from(v: Value<'a>) -> Raw<'a> {
        match v {
            Value::Null => Raw::Null,
            Value::Int(i) => Raw::Int(i),
            Value::Real(f) => Raw::Real(f),
            Value::Text(t) => Raw::Text(Txt::whole(t.as_bytes())),
        }
    }
}

impl Raw<'_> {
    /// The serial type and the body's size.
    fn serial(&self) -> (u64, usize) {
        match *self {
            Raw::Null => (0, 0),
            Raw::Int(v) => int_serial(v),
            Raw::Real(_) => (7, 8),
            Raw::Text(t) => (t.len() as u64 * 2 + 13, t.len()),
        }
    }
    fn put_body(&self, out: &mut Vec<u8>) {
        match *self {
            Raw::Null => {}
            Raw::Int(v) => {
                let (_, n) = int_serial(v);
                out.extend_from_slice(&v.to_be_bytes()[8 - n..]);
            }
            Raw::Real(f) => out.extend_from_slice(&f.to_bits().to_be_bytes()),
            Raw::Text(t) => t.put(out),
        }
    }
}

/// Encodes a record (header of serial types, then the bodies) into `out` (cleared first).
fn encode_record<'a, V: Copy + Into<Raw<'a>>>(values: &[V], out: &mut Vec<u8>) {
    out.clear();
    append_encoded(values, out);
}

/// Appends the record of a row's `values` to `out`, encoded as [`Writer::insert`] encodes it:
/// for a host that encodes rows on its own threads and hands the bytes to
/// [`Writer::insert_record`].
pub fn append_record(values: &[Value], out: &mut Vec<u8>) {
    append_encoded(values, out);
}

fn append_encoded<'a, V: Copy + Into<Raw<'a>>>(values: &[V], out: &mut Vec<u8>) {
    let mut types_len = 0;
    let mut body_len = 0;
    for &v in values {
        let (t, n) = v.into().serial();
        types_len += varint_len(t);
        body_len += n;
    }
    // The header size counts its own varint.
    let mut header_len = types_len + 1;
    while varint_len(header_len as u64) + types_len > header_len {
        header_len = types_len + varint_len(header_len as u64);
    }
    out.reserve(header_len + body_len);
    put_varint(out, header_len as u64);
    for &v in values {
        put_varint(out, v.into().serial().0);
    }
    for &v in values {
        v.into().put_body(out);
    }
}

/// A varint at `at` of `b`: its value and where it ends (None: `b` ends first).
fn read_varint(b: &[u8], at: usize) -> Option<(u64, usize)> {
    let mut v: u64 = 0;
    for i in 0..9 {
        let byte = *b.get(at + i)?;
        if i == 8 {
            return Some(((v << 8) | byte as u64, at + 9));
        }
        v = (v << 7) | (byte & 0x7f) as u64;
        if byte & 0x80 == 0 {
            return Some((v, at + i + 1));
        }
    }
    None
}

/// The body size of a value of serial type `t` (None: 10 and 11, reserved).
fn serial_len(t: u64) -> Option<usize> {
    Some(match t {
        0 | 8 | 9 => 0,
        1..=4 => t as usize,
        5 => 6,
        6 | 7 => 8,
        10 | 11 => return None,
        _ => usize::try_from((t - 12) / 2).ok()?,
    })
}

/// A record's fields, (serial type, body offset) each, into `fields`; None unless the header
/// and the bodies add up to exactly `record`.
fn record_fields(record: &[u8], fields: &mut Vec<(u64, usize)>) -> Option<()> {
    fields.clear();
    let (header, mut at) = read_varint(record, 0)?;
    let header = usize::try_from(header).ok()?;
    if header > record.len() || at > header {
        return None;
    }
    let mut body = header;
    while at < header {
        let (t, next) = read_varint(record, at)?;
        if next > header {
            return None;
        }
        at = next;
        fields.push((t, body));
        body = body.checked_add(serial_len(t)?)?;
    }
    (body == record.len()).then_some(())
}

/// A key column's value as a record holds it (None: a blob, which no index here takes).
fn field_value(record: &[u8], (t, at): (u64, usize)) -> Option<In<'_>> {
    let n = serial_len(t)?;
    let body = record.get(at..at + n)?;
    Some(match t {
        0 => In::Null,
        8 => In::Int(0),
        9 => In::Int(1),
        1..=6 => {
            // Big-endian two's complement of n bytes, sign-extended.
            let mut v: i64 = if body[0] & 0x80 != 0 { -1 } else { 0 };
            for &b in body {
                v = (v << 8) | b as i64;
            }
            In::Int(v)
        }
        7 => {
            let mut x = [0u8; 8];
            x.copy_from_slice(body);
            In::Real(f64::from_bits(u64::from_be_bytes(x)))
        }
        t if t >= 13 && t % 2 == 1 => In::Text(body),
        _ => return None,
    })
}

/// A value as the kept index keys take it in.
#[derive(Clone, Copy)]
enum In<'a> {
    Null,
    Int(i64),
    Real(f64),
    Text(&'a [u8]),
}

/// Where the file goes: positional writes (page `n` at byte `(n - 1) * PAGE_SIZE`), from more
/// than one thread while the indexes are written. The host implements it (the CLI over a file).
pub trait Output: Sync {
    fn write_at(&self, offset: u64, data: &[u8]) -> io::Result<()>;
}

/// An in-memory file (tests, or a host without files).
impl Output for std::sync::Mutex<Vec<u8>> {
    fn write_at(&self, offset: u64, data: &[u8]) -> io::Result<()> {
        let mut v = self
            .lock()
            .map_err(|_| io::Error::other("a writer panicked"))?;
        let (at, end) = (offset as usize, offset as usize + data.len());
        if v.len() < end {
            v.resize(end, 0);
        }
        v[at..end].copy_from_slice(data);
        Ok(())
    }
}

/// Where a writer puts the index keys' texts while the rows are written (the host's temporary
/// file; [`Writer::set_spill`]): each full 1 MiB chunk of a column whose texts do not repeat is
/// appended and dropped from memory, and all are read back once, before the indexes are sorted
/// (by then the CLI has freed its result). The keys were ~30 MB of the scale pair's peak.
pub trait Spill: Send {
    /// Appends `bytes`; returns where they start.
    fn append(&mut self, bytes: &[u8]) -> io::Result<u64>;
    /// Fills `buf` with the bytes at `at`.
    fn read_at(&mut self, at: u64, buf: &mut [u8]) -> io::Result<()>;
}

/// The output and its page allocator (shared by the threads that write indexes).
struct Pages<O: Output> {
    out: O,
    /// The next page number to allocate.
    next: AtomicU32,
}

/// The page that holds byte 2^30 of the file, SQLite's lock bytes (`PENDING_BYTE`): never used
/// for data (SQLite skips it; a b-tree that points at it is "malformed").
pub const LOCK_PAGE: u32 = (0x4000_0000 / PAGE_SIZE) as u32 + 1;

impl<O: Output> Pages<O> {
    /// A fresh page's number (never [`LOCK_PAGE`]).
    fn alloc(&self) -> u32 {
        let mut cur = self.next.load(AtomicOrdering::Relaxed);
        loop {
            let (pgno, next) = if cur == LOCK_PAGE {
                (cur + 1, cur + 2)
            } else {
                (cur, cur + 1)
            };
            match self.next.compare_exchange_weak(
                cur,
                next,
                AtomicOrdering::Relaxed,
                AtomicOrdering::Relaxed,
            ) {
                Ok(_) => return pgno,
                Err(now) => cur = now,
            }
        }
    }
    fn offset(pgno: u32) -> u64 {
        (pgno as u64 - 1) * PAGE_SIZE as u64
    }
    fn write(&self, pgno: u32, page: &[u8]) -> io::Result<()> {
        debug_assert_eq!(page.len(), PAGE_SIZE);
        self.out.write_at(Self::offset(pgno), page)
    }
    /// Writes the overflow chain of `rest` (the payload after its local part) on freshly
    /// allocated pages and returns the first page's number.
    fn overflow(&self, rest: &[u8]) -> io::Result<u32> {
        let chunks = rest.len().div_ceil(OVERFLOW_CONTENT);
        let pgnos: Vec<u32> = (0..chunks).map(|_| self.alloc()).collect();
        let first = pgnos.first().copied().unwrap_or(0);
        for (i, chunk) in rest.chunks(OVERFLOW_CONTENT).enumerate() {
            let pgno = pgnos[i];
            let next = pgnos.get(i + 1).copied().unwrap_or(0);
            let at = Self::offset(pgno);
            self.out.write_at(at, &next.to_be_bytes())?;
            self.out.write_at(at + 4, chunk)?;
            let pad = OVERFLOW_CONTENT - chunk.len();
            if pad > 0 {
                self.out
                    .write_at(at + 4 + chunk.len() as u64, &ZEROS[..pad])?;
            }
        }
        Ok(first)
    }
}

static ZEROS: [u8; PAGE_SIZE] = [0; PAGE_SIZE];

/// How much of a payload of `len` bytes stays on the B-tree page (the rest overflows).
fn local_len(len: usize, max_local: usize) -> usize {
    if len <= max_local {
        return len;
    }
    let k = MIN_LOCAL + (len - MIN_LOCAL) % OVERFLOW_CONTENT;
    if k <= max_local {
        k
    } else {
        MIN_LOCAL
    }
}

/// Appends a payload's local part and, when it spills, the overflow page number (writing the
/// overflow chain).
fn put_payload<O: Output>(
    pages: &Pages<O>,
    cell: &mut Vec<u8>,
    payload: &[u8],
    max_local: usize,
) -> io::Result<()> {
    let local = local_len(payload.len(), max_local);
    cell.extend_from_slice(&payload[..local]);
    if local < payload.len() {
        let first = pages.overflow(&payload[local..])?;
        cell.extend_from_slice(&first.to_be_bytes());
    }
    Ok(())
}

/// One B-tree page being filled: cells from the end backwards, pointers after the header.
struct Page {
    buf: Vec<u8>,
    kind: u8,
    /// Where the B-tree header starts (100 on page 1, after the file header).
    start: usize,
    cells: usize,
    content: usize,
    /// The last cell's offset and length (to take it back).
    last: (usize, usize),
}

impl Page {
    fn new(kind: u8, start: usize) -> Page {
        Page {
            buf: vec![0; PAGE_SIZE],
            kind,
            start,
            cells: 0,
            content: PAGE_SIZE,
            last: (0, 0),
        }
    }
    fn header_len(&self) -> usize {
        if self.kind == LEAF_TABLE || self.kind == LEAF_INDEX {
            8
        } else {
            12
        }
    }
    /// Empties the page. The header, pointers and cells are overwritten as the page fills up;
    /// [`Page::seal`] zeroes the gap between them.
    fn reset(&mut self) {
        self.cells = 0;
        self.content = PAGE_SIZE;
        self.last = (0, 0);
    }
    /// Space a cell of `len` bytes takes: its bytes (at least 4, as SQLite counts) + pointer.
    fn cost(len: usize) -> usize {
        len.max(4) + 2
    }
    fn fits(&self, len: usize) -> bool {
        self.start + self.header_len() + 2 * self.cells + Self::cost(len) <= self.content
    }
    fn push(&mut self, cell: &[u8]) {
        self.push_parts(&[cell]);
    }
    /// [`Page::push`] of the cell that `parts` make one after the other.
    fn push_parts(&mut self, parts: &[&[u8]]) {
        let cell_len: usize = parts.iter().map(|p| p.len()).sum();
        let len = cell_len.max(4);
        self.content -= len;
        let mut at = self.content;
        for p in parts {
            self.buf[at..at + p.len()].copy_from_slice(p);
            at += p.len();
        }
        self.buf[at..self.content + len].fill(0);
        let ptr = self.start + self.header_len() + 2 * self.cells;
        self.buf[ptr..ptr + 2].copy_from_slice(&(self.content as u16).to_be_bytes());
        self.cells += 1;
        self.last = (self.content, cell_len);
    }
    /// Removes the cell pushed last and returns its bytes (once: the one before it stays).
    fn pop(&mut self) -> Vec<u8> {
        let (at, len) = self.last;
        let cell = self.buf[at..at + len].to_vec();
        self.cells -= 1;
        self.content = at + len.max(4);
        let ptr = self.start + self.header_len() + 2 * self.cells;
        self.buf[ptr..ptr + 2].fill(0);
        self.buf[at..at + len.max(4)].fill(0);
        self.last = (self.content, 0);
        cell
    }
    /// Fills in the B-tree page header.
    fn seal(&mut self, right: u32) {
        let gap = self.start + self.header_len() + 2 * self.cells;
        self.buf[gap..self.content].fill(0);
        let h = self.start;
        self.buf[h] = self.kind;
        self.buf[h + 1..h + 3].fill(0); // no freeblocks
        self.buf[h + 3..h + 5].copy_from_slice(&(self.cells as u16).to_be_bytes());
        // 65536 is written as 0.
        self.buf[h + 5..h + 7].copy_from_slice(&(self.content as u32 as u16).to_be_bytes());
        self.buf[h + 7] = 0; // no fragmented bytes
        if self.kind == INTERIOR_TABLE || self.kind == INTERIOR_INDEX {
            self.buf[h + 8..h + 12].copy_from_slice(&right.to_be_bytes());
        }
    }
}

/// `f` over every item on the two sides of `join` (two threads, or one after the other); the
/// results in the items' order. The items are taken heaviest first (by `weight`) from one queue
/// by whichever side is free: the weights are guesses (a text column's ranking took 15 to 75 ms
/// on the scale pair), and a fixed split left one core idle for ~50 ms at a time. Each item is
/// consumed by `f`, so what it frees is freed as it goes.
fn halves<T: Send, R: Send>(
    join: Option<crate::base::Join>,
    items: Vec<T>,
    weight: impl Fn(&T) -> usize,
    f: impl Fn(T) -> R + Sync,
) -> Vec<R> {
    let mut by_weight: Vec<(usize, T)> = items.into_iter().enumerate().collect();
    by_weight.sort_by_key(|(_, t)| std::cmp::Reverse(weight(t)));
    let queue = std::sync::Mutex::new(by_weight.into_iter());
    let run = || {
        let mut done = Vec::new();
        loop {
            // A poisoned queue: the other side panicked (join2 passes the panic on).
            let next = match queue.lock() {
                Ok(mut q) => q.next(),
                Err(_) => None,
            };
            let Some((i, t)) = next else {
                return done;
            };
            done.push((i, f(t)));
        }
    };
    let (ra, rb) = crate::base::join2(join, run, run);
    let mut out: Vec<(usize, R)> = ra.into_iter().chain(rb).collect();
    out.sort_by_key(|(i, _)| *i);
    out.into_iter().map(|(_, r)| r).collect()
}

/// A key column's value kept for sorting: texts live in the store's arena.
#[derive(Clone, Copy, Debug)]
enum Key {
    Null,
    Int(i64),
    Real(f64),
    /// Offset of a 4-byte little-endian length followed by the text, in `KeyStore::text`.
    Text(u64),
}

/// Integers kept as narrow as the column's values allow so far: `step`, `rank`, `modified`,
/// `micro_step_id` and `is_distributed` take a byte a row, `node_order` four (they were eight:
/// ~13 MB of a 326,000-row export's keys). Widened, all values copied, when one does not fit.
#[derive(Clone)]
enum Ints {
    I8(Vec<i8>),
    I32(Vec<i32>),
    I64(Vec<i64>),
}

impl Ints {
    fn len(&self) -> usize {
        match self {
            Ints::I8(v) => v.len(),
            Ints::I32(v) => v.len(),
            Ints::I64(v) => v.len(),
        }
    }
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    fn reserve_exact(&mut self, n: usize) {
        match self {
            Ints::I8(v) => v.reserve_exact(n),
            Ints::I32(v) => v.reserve_exact(n),
            Ints::I64(v) => v.reserve_exact(n),
        }
    }
    #[inline]
    fn get(&self, i: usize) -> i64 {
        match self {
            Ints::I8(v) => v[i] as i64,
            Ints::I32(v) => v[i] as i64,
            Ints::I64(v) => v[i],
        }
    }
    fn push(&mut self, x: i64) {
        match self {
            Ints::I8(v) => match i8::try_from(x) {
                Ok(y) => v.push(y),
                Err(_) => {
                    *self = match i32::try_from(x) {
                        Ok(_) => Ints::I32(Self::widen(v, v.capacity())),
                        Err(_) => Ints::I64(Self::widen(v, v.capacity())),
                    };
                    self.push(x);
                }
            },
            Ints::I32(v) => match i32::try_from(x) {
                Ok(y) => v.push(y),
                Err(_) => {
                    *self = Ints::I64(Self::widen(v, v.capacity()));
                    self.push(x);
                }
            },
            Ints::I64(v) => v.push(x),
        }
    }
    /// `v`'s values in a wider vector with the same spare room.
    fn widen<A: Copy, B: From<A>>(v: &[A], room: usize) -> Vec<B> {
        let mut w = Vec::with_capacity(room.max(v.len() + 1));
        w.extend(v.iter().map(|&a| B::from(a)));
        w
    }
}

/// One kept column: integers or texts (and NULLs) as plain numbers while the column holds only
/// those ([`Ints`]; [`Texts32`], 4 bytes a row), [`Key`]s (16 bytes) once it mixes kinds.
#[derive(Clone)]
enum Col {
    Ints(Ints),
    Texts(Texts32),
    Any(Vec<Key>),
}

/// A text column's rows, each a text's offset in the column's [`TextArena`] in 32 bits (its chunk
/// in the high 12, its place in the chunk in the low 20) or NULL. `matched_node_link` and
/// `up_node` have NULLs; as [`Key`]s they were 16 bytes a row (~10 MB of the scale pair's keys).
/// A text past 4,096 chunks (4 GiB) or 2^20 into its chunk makes the column [`Col::Any`].
#[derive(Clone, Default)]
struct Texts32(Vec<u32>);

impl Texts32 {
    const NULL: u32 = u32::MAX;
    /// A [`TextArena`] offset in 32 bits, if it fits (`NULL` is never one: its chunk would be
    /// 4,095 and its place 2^20 - 1, the last byte of a full chunk, where no text starts).
    fn pack(off: u64) -> Option<u32> {
        let (chunk, pos) = (off >> 32, off & 0xffff_ffff);
        (chunk < 1 << 12 && pos < (1 << 20) - 1).then_some(((chunk << 20) | pos) as u32)
    }
    fn unpack(v: u32) -> u64 {
        (u64::from(v >> 20) << 32) | u64::from(v & 0xf_ffff)
    }
    fn key(v: u32) -> Key {
        match v {
            Self::NULL => Key::Null,
            v => Key::Text(Self::unpack(v)),
        }
    }
    /// `k` in 32 bits, if a NULL or a text that packs.
    fn pack_key(k: Key) -> Option<u32> {
        match k {
            Key::Null => Some(Self::NULL),
            Key::Text(o) => Self::pack(o),
            _ => None,
        }
    }
    /// Appends `k` if [`Texts32::pack_key`] packs it.
    fn push(&mut self, k: Key) -> bool {
        match Self::pack_key(k) {
            Some(v) => {
                self.0.push(v);
                true
            }
            None => false,
        }
    }
}

impl Col {
    fn len(&self) -> usize {
        match self {
            Col::Ints(v) => v.len(),
            Col::Texts(v) => v.0.len(),
            Col::Any(v) => v.len(),
        }
    }
    fn reserve_exact(&mut self, n: usize) {
        match self {
            Col::Ints(v) if v.is_empty() => {}
            Col::Ints(v) => v.reserve_exact(n),
            Col::Texts(v) => v.0.reserve_exact(n),
            Col::Any(v) => v.reserve_exact(n),
        }
    }
    fn get(&self, row: usize) -> Key {
        match self {
            Col::Ints(v) => Key::Int(v.get(row)),
            Col::Texts(v) => Texts32::key(v.0[row]),
            Col::Any(v) => v[row],
        }
    }
    /// Appends `k`; a new vector starts with room for `hint` rows.
    fn push(&mut self, k: Key, hint: usize) {
        let done = match (&mut *self, k) {
            (Col::Ints(v), Key::Int(x)) => {
                v.push(x);
                true
            }
            (Col::Texts(v), k) => v.push(k),
            (Col::Any(v), k) => {
                v.push(k);
                true
            }
            _ => false,
        };
        if done {
            return;
        }
        let n = self.len();
        let cap = hint.max(n + 1);
        *self = match (n, k, Texts32::pack_key(k)) {
            (0, _, Some(v)) => {
                let mut texts = Vec::with_capacity(cap);
                texts.push(v);
                Col::Texts(Texts32(texts))
            }
            (0, Key::Int(x), _) => {
                let mut v = Ints::I8(Vec::with_capacity(cap));
                v.push(x);
                Col::Ints(v)
            }
            _ => {
                let mut all: Vec<Key> = Vec::with_capacity(cap);
                all.extend((0..n).map(|i| self.get(i)));
                all.push(k);
                Col::Any(all)
            }
        }
    }
}

/// Texts of one column stored once when they repeat: by content hash while that pays
/// (a parent's name is every child's `up_node`), else only a repeat of the previous row's.
struct Dedup {
    last: Option<u64>,
    seen: Option<crate::base::HashMap<u64, u64>>,
    hits: usize,
    misses: usize,
}

impl Dedup {
    /// Texts looked at before a column whose texts rarely repeat stops hashing them.
    const TRIAL: usize = 4096;
}

/// A kept text as two parts, `head` then `tail`: a front-coded text's prefix (the bytes it shares
/// with its anchor, see [`TextArena`]) and the rest; a whole text is all `head`. Compared,
/// sorted and written as the bytes of both.
#[derive(Clone, Copy, Debug, Default)]
struct Txt<'a> {
    head: &'a [u8],
    tail: &'a [u8],
}

impl<'a> Txt<'a> {
    fn whole(t: &'a [u8]) -> Txt<'a> {
        Txt { head: t, tail: &[] }
    }
    fn len(&self) -> usize {
        self.head.len() + self.tail.len()
    }
    /// The bytes from `i` to the end of the part that holds byte `i` (empty past the end).
    fn run(&self, i: usize) -> &'a [u8] {
        match self.head.get(i..) {
            Some(h) if !h.is_empty() => h,
            _ => self
                .tail
                .get(i.saturating_sub(self.head.len())..)
                .unwrap_or_default(),
        }
    }
    /// The text without its first `n` bytes.
    fn skip(&self, n: usize) -> Txt<'a> {
        match self.head.get(n..) {
            Some(head) => Txt {
                head,
                tail: self.tail,
            },
            None => Txt {
                head: &[],
                tail: self.tail.get(n - self.head.len()..).unwrap_or_default(),
            },
        }
    }
    /// The first `n` bytes (all of them if fewer).
    fn take(&self, n: usize) -> Txt<'a> {
        match self.head.get(..n) {
            Some(head) => Txt { head, tail: &[] },
            None => Txt {
                head: self.head,
                tail: self.tail.get(..n - self.head.len()).unwrap_or(self.tail),
            },
        }
    }
    /// The (up to) 8 bytes from `i` as a big-endian integer, zeros after the end, and how many
    /// there are.
    fn load8(&self, i: usize) -> (u64, u8) {
        if let Some(&[a, b, c, d, e, f, g, h]) = self.head.get(i..i.wrapping_add(8)) {
            return (u64::from_be_bytes([a, b, c, d, e, f, g, h]), 8);
        }
        let mut b = [0u8; 8];
        let first = self.run(i);
        let mut n = first.len().min(8);
        b[..n].copy_from_slice(&first[..n]);
        if n < 8 && i < self.head.len() {
            // The head ended: the rest from the tail.
            let more = self.tail.len().min(8 - n);
            b[n..n + more].copy_from_slice(&self.tail[..more]);
            n += more;
        }
        (u64::from_be_bytes(b), n as u8)
    }
    /// Whether the text is `t`.
    fn is(&self, t: &[u8]) -> bool {
        t.len() == self.len() && {
            let (h, r) = t.split_at(self.head.len());
            h == self.head && r == self.tail
        }
    }
    fn put(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(self.head);
        if !self.tail.is_empty() {
            out.extend_from_slice(self.tail);
        }
    }
    fn to_vec(self) -> Vec<u8> {
        let mut v = Vec::with_capacity(self.len());
        self.put(&mut v);
        v
    }
}

impl PartialEq for Txt<'_> {
    fn eq(&self, o: &Self) -> bool {
        if self.len() != o.len() {
            return false;
        }
        // Part by part (`==` on slices: memcmp).
        let mut i = 0;
        while i < self.len() {
            let (x, y) = (self.run(i), o.run(i));
            let m = x.len().min(y.len());
            if m == 0 || x[..m] != y[..m] {
                return false;
            }
            i += m;
        }
        true
    }
}

impl Eq for Txt<'_> {}

impl PartialOrd for Txt<'_> {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}

/// By bytes, a prefix first (SQLite's BINARY).
impl Ord for Txt<'_> {
    fn cmp(&self, o: &Self) -> Ordering {
        let i = mismatch_txt(*self, *o);
        match (self.run(i).first(), o.run(i).first()) {
            (Some(x), Some(y)) => x.cmp(y),
            _ => self.len().cmp(&o.len()),
        }
    }
}

/// Texts in fixed-size chunks, never split across chunks; a text's offset is its chunk's number
/// in the high 32 bits and its position in the low ones. Unlike one growing buffer, it never holds
/// twice its size while it grows (the scale pair's keys were ~80 MB of texts: the doubling and the
/// copy were ~100 MB more at the peak).
///
/// Texts are front-coded: one that shares at least [`TextArena::MIN_PREFIX`] bytes with its
/// chunk's current anchor is kept as that prefix's length, where the anchor's bytes are, and the
/// rest; any other is kept whole and becomes the anchor. One level only: an anchor is always
/// whole, so a text is read with at most one hop. A text that shares clearly more with the text
/// before ([`TextArena::STALE`] bytes) than with the anchor starts a new anchor too (a row's
/// `matched_node_link`, its ancestors' path, shares most of it with the rows around it, less and
/// less with a row far before). On the scale pair the kept texts of `tb_nodes` go from ~80 to
/// ~20 MB (`matched_node_link` 57 -> ~7 MB).
///
/// An entry: a 4-byte little-endian `len << 1 | front_coded`; a whole text then has its `len`
/// bytes; a front-coded one a 4-byte `prefix << 20 | back` (the prefix's length, at most
/// [`TextArena::MAX_PREFIX`], and the distance back from the entry to its anchor's bytes, within
/// the chunk), then the `len` bytes after the prefix. Fixed widths: the sort reads a text's
/// parts at every level, so they are found without a loop.
#[derive(Default)]
struct TextArena {
    chunks: Vec<Vec<u8>>,
    /// Chunks handed to a [`Spill`] (emptied in `chunks`): number, where, how many bytes.
    spilled: Vec<(usize, u64, usize)>,
    bytes: usize,
    /// The last chunk's anchor: where its bytes are, and how many.
    anchor: Option<(usize, usize)>,
    /// The text stored last, and how many bytes it shares with the anchor.
    last: Option<(u64, usize)>,
    /// The text stored last, whole (its chunk may be spilled).
    last_text: Vec<u8>,
}

impl TextArena {
    const CHUNK: usize = 1 << 20;
    /// The least prefix a text shares with the anchor to be front-coded (below this, the text is
    /// the better anchor for the texts after it).
    const MIN_PREFIX: usize = 12;
    /// How many more bytes the text before may share with a text than the anchor does before
    /// the text starts a new anchor.
    const STALE: usize = 8;
    /// The longest prefix kept as a prefix (12 bits; longer ones keep the rest in the tail).
    const MAX_PREFIX: usize = (1 << 12) - 1;
    /// The farthest back an anchor can be (20 bits: a chunk).
    const MAX_BACK: usize = (1 << 20) - 1;
    /// Bytes stored.
    fn len(&self) -> usize {
        self.bytes
    }
    /// Stores `t`; with `spill`, a chunk that fills up goes there (see [`Spill`]).
    fn push(&mut self, t: &[u8], spill: Option<&mut (dyn Spill + 'static)>) -> io::Result<u64> {
        if t.len() >= 1 << 31 {
            return Err(invalid(format!("an indexed text of {} bytes", t.len())));
        }
        let front = self.front(t);
        if front.is_none() {
            let need = 4 + t.len();
            let room = self
                .chunks
                .last()
                .is_some_and(|c| c.capacity() - c.len() >= need);
            if !room {
                if u32::try_from(self.chunks.len()).map_or(true, |n| n == u32::MAX) {
                    return Err(invalid("too many indexed texts".to_string()));
                }
                let no = self.chunks.len().wrapping_sub(1);
                if let (Some(sp), Some(full)) = (spill, self.chunks.last_mut()) {
                    let at = sp.append(full)?;
                    self.spilled.push((no, at, full.len()));
                    *full = Vec::new();
                }
                self.chunks.push(Vec::with_capacity(need.max(Self::CHUNK)));
            }
        }
        let chunk_no = self.chunks.len().saturating_sub(1);
        let Some(c) = self.chunks.last_mut() else {
            return Err(invalid("no text chunk".to_string()));
        };
        let pos = c.len();
        let shared = match front {
            Some((p, kept, back)) => {
                let rest = &t[kept..];
                c.extend_from_slice(&((rest.len() as u32) << 1 | 1).to_le_bytes());
                c.extend_from_slice(&((kept as u32) << 20 | back as u32).to_le_bytes());
                c.extend_from_slice(rest);
                p
            }
            None => {
                c.extend_from_slice(&((t.len() as u32) << 1).to_le_bytes());
                self.anchor = Some((c.len(), t.len()));
                c.extend_from_slice(t);
                t.len()
            }
        };
        self.bytes += c.len() - pos;
        let off = ((chunk_no as u64) << 32) | pos as u64;
        self.last = Some((off, shared));
        self.last_text.clear();
        self.last_text.extend_from_slice(t);
        Ok(off)
    }

    /// Whether the text at `off` is `t`, when `off` is the text stored last (read from its
    /// copy: its chunk may be spilled); None for another offset.
    fn last_is(&self, off: u64, t: &[u8]) -> Option<bool> {
        (self.last.map(|l| l.0) == Some(off)).then(|| self.last_text == t)
    }

    /// Reads the spilled chunks back.
    fn unspill(&mut self, spill: &mut dyn Spill) -> io::Result<()> {
        for (no, at, len) in std::mem::take(&mut self.spilled) {
            let mut buf = vec![0u8; len];
            spill.read_at(at, &mut buf)?;
            self.chunks[no] = buf;
        }
        Ok(())
    }
    /// How `t` is front-coded, if it is: the prefix it shares with the anchor, the part of it
    /// kept as a prefix, and the distance back to the anchor from where `t` goes.
    fn front(&self, t: &[u8]) -> Option<(usize, usize, usize)> {
        let (a, alen) = self.anchor?;
        let (_, last_shares) = self.last?;
        let c = self.chunks.last()?;
        // What `t` shares with the text before, then with the anchor (the text before shares
        // `last_shares` bytes with it): one pass over `t`.
        let before = mismatch(&self.last_text, t);
        let p = match before.cmp(&last_shares) {
            Ordering::Less => before,
            Ordering::Greater => last_shares,
            Ordering::Equal => {
                let anchor = c.get(a..a + alen)?;
                before + mismatch(anchor.get(before..)?, t.get(before..)?)
            }
        };
        if p < Self::MIN_PREFIX || before > p + Self::STALE {
            return None;
        }
        let kept = p.min(Self::MAX_PREFIX);
        let back = c.len() - a;
        let fits = c.capacity() - c.len() >= 8 + t.len() - kept;
        (fits && back <= Self::MAX_BACK).then_some((p, kept, back))
    }
    fn get(&self, off: u64) -> Txt<'_> {
        let c = &self.chunks[(off >> 32) as usize];
        let pos = (off & 0xffff_ffff) as usize;
        let word = |i: usize| match c.get(i..i + 4) {
            Some(&[a, b, c, d]) => u32::from_le_bytes([a, b, c, d]) as usize,
            _ => 0,
        };
        let h = word(pos);
        let len = h >> 1;
        if h & 1 == 0 {
            return Txt::whole(&c[pos + 4..pos + 4 + len]);
        }
        let link = word(pos + 4);
        let a = pos - (link & Self::MAX_BACK);
        Txt {
            head: &c[a..a + (link >> 20)],
            tail: &c[pos + 8..pos + 8 + len],
        }
    }
}

/// One indexed column of a table, one value per row (row `i` has rowid `i + 1`); its texts in
/// its own [`TextArena`].
struct Column {
    col: Col,
    text: TextArena,
    dedup: Dedup,
    /// Rows expected (see [`Writer::expect_rows`]): the capacity the row vector starts with.
    rows_hint: usize,
}

impl Column {
    fn new(rows_hint: usize) -> Column {
        Column {
            col: Col::Ints(Ints::I8(Vec::new())),
            text: TextArena::default(),
            dedup: Dedup {
                last: None,
                seen: Some(crate::base::HashMap::default()),
                hits: 0,
                misses: 0,
            },
            rows_hint,
        }
    }
    /// The texts alone.
    fn without_rows(mut self) -> Column {
        self.col = Col::Any(Vec::new());
        self.dedup.seen = None;
        self
    }
    /// Whether some row has a text.
    fn has_text(&self) -> bool {
        match &self.col {
            Col::Ints(_) => false,
            Col::Texts(v) => v.0.iter().any(|&x| x != Texts32::NULL),
            Col::Any(v) => v.iter().any(|k| matches!(k, Key::Text(_))),
        }
    }
    fn text_at(&self, off: u64) -> Txt<'_> {
        self.text.get(off)
    }
    /// The offset of text `t`, stored now unless it is a known repeat.
    /// With `spill`, full chunks go there once this column no longer looks up repeats by hash
    /// (its texts are then only compared with the last one, which is kept whole).
    fn intern(
        &mut self,
        t: &[u8],
        hasher: &foldhash::fast::RandomState,
        spill: Option<&mut (dyn Spill + 'static)>,
    ) -> io::Result<u64> {
        if let Some(o) = self.dedup.last {
            let same = match self.text.last_is(o, t) {
                Some(same) => same,
                None => self.text_at(o).is(t),
            };
            if same {
                return Ok(o);
            }
        }
        let h = std::hash::BuildHasher::hash_one(hasher, t);
        if let Some(seen) = &self.dedup.seen {
            if let Some(&o) = seen.get(&h).filter(|&&o| self.text_at(o).is(t)) {
                self.dedup.hits += 1;
                self.dedup.last = Some(o);
                return Ok(o);
            }
        }
        let spill = spill.filter(|_| self.dedup.seen.is_none());
        let off = self.text.push(t, spill)?;
        let d = &mut self.dedup;
        d.last = Some(off);
        d.misses += 1;
        if let Some(seen) = &mut d.seen {
            if d.hits + d.misses >= Dedup::TRIAL && d.hits < d.misses {
                d.seen = None;
            } else {
                seen.insert(h, off);
            }
        }
        Ok(off)
    }
    fn push(&mut self, k: Key) {
        self.col.push(k, self.rows_hint);
    }
    fn raw(&self, k: Key) -> Raw<'_> {
        match k {
            Key::Null => Raw::Null,
            Key::Int(v) => Raw::Int(v),
            Key::Real(v) => Raw::Real(v),
            Key::Text(o) => Raw::Text(self.text_at(o)),
        }
    }
    /// SQLite's order of two values: NULL < numbers < text, texts by bytes (BINARY), integers
    /// and reals by numeric value.
    fn cmp_keys(&self, x: Key, y: Key) -> Ordering {
        match (x, y) {
            (Key::Int(x), Key::Int(y)) => x.cmp(&y),
            (Key::Text(x), Key::Text(y)) => {
                if x == y {
                    Ordering::Equal
                } else {
                    self.text_at(x).cmp(&self.text_at(y))
                }
            }
            (Key::Null, Key::Null) => Ordering::Equal,
            (Key::Null, _) => Ordering::Less,
            (_, Key::Null) => Ordering::Greater,
            (Key::Text(_), _) => Ordering::Greater,
            (_, Key::Text(_)) => Ordering::Less,
            (Key::Real(x), Key::Real(y)) => num_cmp_ff(x, y),
            (Key::Int(x), Key::Real(y)) => num_cmp_if(x, y),
            (Key::Real(x), Key::Int(y)) => num_cmp_if(y, x).reverse(),
        }
    }
}

/// The indexed columns of a table.
struct KeyStore {
    /// Table columns kept, in order; `slot[c]` is the position of table column `c` here.
    cols: Vec<usize>,
    slot: Vec<Option<usize>>,
    columns: Vec<Column>,
    hasher: foldhash::fast::RandomState,
}

impl KeyStore {
    fn new(columns: usize, cols: Vec<usize>) -> KeyStore {
        let mut slot = vec![None; columns];
        for (i, &c) in cols.iter().enumerate() {
            slot[c] = Some(i);
        }
        KeyStore {
            columns: cols.iter().map(|_| Column::new(0)).collect(),
            cols,
            slot,
            hasher: Default::default(),
        }
    }
    /// Keeps a row's keys (`value(c)`: table column `c`'s value); returns about how many bytes
    /// that took.
    fn push<'v>(
        &mut self,
        value: impl Fn(usize) -> io::Result<In<'v>>,
        mut spill: Option<&mut (dyn Spill + 'static)>,
    ) -> io::Result<usize> {
        let mut bytes = 0;
        for (c, column) in self.cols.iter().zip(&mut self.columns) {
            let before = column.text.len();
            let k = match value(*c)? {
                In::Null => Key::Null,
                In::Int(v) => Key::Int(v),
                In::Real(v) => Key::Real(v),
                In::Text(t) => Key::Text(column.intern(t, &self.hasher, spill.as_deref_mut())?),
            };
            column.push(k);
            bytes += 8 + column.text.len() - before;
        }
        Ok(bytes)
    }
}

/// Reals in SQLite's order (a NaN is stored as NULL by SQLite; here it sorts first).
fn num_cmp_ff(x: f64, y: f64) -> Ordering {
    x.partial_cmp(&y)
        .unwrap_or_else(|| y.is_nan().cmp(&x.is_nan()).reverse())
}

/// An integer against a real, exactly (as SQLite's `sqlite3IntFloatCompare`).
fn num_cmp_if(i: i64, r: f64) -> Ordering {
    if r.is_nan() {
        return Ordering::Greater;
    }
    // -2^63 and 2^63, where i64 ends.
    if r < -9_223_372_036_854_775_808.0 {
        return Ordering::Greater;
    }
    if r >= 9_223_372_036_854_775_808.0 {
        return Ordering::Less;
    }
    let t = r.trunc() as i64;
    match i.cmp(&t) {
        Ordering::Equal => {
            let f = r - r.trunc();
            if f > 0.0 {
                Ordering::Less
            } else if f < 0.0 {
                Ordering::Greater
            } else {
                Ordering::Equal
            }
        }
        o => o,
    }
}

/// Table leaves waiting to be written together: the rows fill leaves on consecutive pages (one
/// page counter, nothing else allocating between them but an overflow chain), and one write of
/// 16 pages costs the system less than 16 of one (a page-cache lookup, lock and accounting per
/// write, and room for larger folios).
#[derive(Default)]
struct Run {
    first: u32,
    bytes: Vec<u8>,
    /// Full runs kept for the host instead of written ([`Writer::hand_runs`]): where each goes
    /// and its bytes.
    handed: Option<Vec<(u64, Vec<u8>)>>,
    /// Buffers of handed runs given back ([`Writer::give_back`]), reused for the next runs.
    spare: Vec<Vec<u8>>,
}

impl Run {
    const PAGES: usize = 16;
    /// Adds page `pgno`; writes the run first if `pgno` does not follow it, and when it is full.
    fn add<O: Output>(&mut self, pages: &Pages<O>, pgno: u32, page: &[u8]) -> io::Result<()> {
        let next = self.first as usize + self.bytes.len() / PAGE_SIZE;
        if !self.bytes.is_empty() && pgno as usize != next {
            self.flush(pages)?;
        }
        if self.bytes.is_empty() {
            self.first = pgno;
            self.bytes.reserve_exact(Self::PAGES * PAGE_SIZE);
        }
        self.bytes.extend_from_slice(page);
        if self.bytes.len() >= Self::PAGES * PAGE_SIZE {
            self.flush(pages)?;
        }
        Ok(())
    }
    fn flush<O: Output>(&mut self, pages: &Pages<O>) -> io::Result<()> {
        if self.bytes.is_empty() {
            return Ok(());
        }
        let at = Pages::<O>::offset(self.first);
        if let Some(handed) = &mut self.handed {
            let next = self.spare.pop().unwrap_or_default();
            handed.push((at, std::mem::replace(&mut self.bytes, next)));
            return Ok(());
        }
        let r = pages.out.write_at(at, &self.bytes);
        self.bytes.clear();
        r
    }
}

/// A table being written: its current leaf page and the leaves written so far.
struct TableState {
    def: Table,
    root: u32,
    leaf: Page,
    /// Written leaves: page number and the largest rowid on it.
    leaves: Vec<(u32, i64)>,
    rows: i64,
    keys: KeyStore,
}

/// The writer. Rows go in with [`Writer::insert`]; [`Writer::finish`] writes the indexes, the
/// interior pages and the schema.
pub struct Writer<O: Output> {
    pages: Pages<O>,
    tables: Vec<TableState>,
    indexes: Vec<(Index, u32)>,
    record: Vec<u8>,
    cell: Vec<u8>,
    /// A record's fields ([`Writer::insert_record`]).
    fields: Vec<(u64, usize)>,
    /// Full table leaves with consecutive page numbers, written as one (see [`Run`]).
    run: Run,
    /// Bytes the kept index keys may take (see [`Writer::set_key_budget`]).
    key_budget: usize,
    key_bytes: usize,
    /// Over the budget: the keys are dropped and the indexes written empty.
    deferred: bool,
    /// Where full chunks of the keys' texts wait for the index phase ([`Writer::set_spill`]).
    spill: Option<Box<dyn Spill>>,
}

impl<O: Output> Writer<O> {
    /// Starts a database with these tables and indexes (created in this order: the tables,
    /// each followed by its automatic index, then the indexes).
    pub fn new(out: O, tables: Vec<Table>, indexes: Vec<Index>) -> io::Result<Writer<O>> {
        for ix in &indexes {
            let t = tables
                .get(ix.table)
                .ok_or_else(|| invalid(format!("index {}: no table {}", ix.name, ix.table)))?;
            if ix.columns.iter().any(|&c| c >= t.columns) {
                return Err(invalid(format!("index {}: a column out of range", ix.name)));
            }
        }
        let pages = Pages {
            out,
            next: AtomicU32::new(2),
        };
        let mut states = Vec::new();
        for t in tables {
            if t.primary_key.is_some_and(|c| c >= t.columns) {
                return Err(invalid(format!(
                    "table {}: key column out of range",
                    t.name
                )));
            }
            let root = pages.alloc();
            if t.primary_key.is_some() {
                pages.alloc();
            }
            states.push(TableState {
                keys: KeyStore::new(t.columns, t.primary_key.into_iter().collect()),
                def: t,
                root,
                leaf: Page::new(LEAF_TABLE, 0),
                leaves: Vec::new(),
                rows: 0,
            });
        }
        let mut ixs = Vec::new();
        for ix in indexes {
            let root = pages.alloc();
            let st = &mut states[ix.table];
            let mut cols = st.keys.cols.clone();
            for &c in &ix.columns {
                if !cols.contains(&c) {
                    cols.push(c);
                }
            }
            st.keys = KeyStore::new(st.def.columns, cols);
            ixs.push((ix, root));
        }
        // The reserved pages (1 and the roots) are written at the end.
        Ok(Writer {
            pages,
            tables: states,
            indexes: ixs,
            record: Vec::new(),
            cell: Vec::new(),
            fields: Vec::new(),
            run: Run::default(),
            key_budget: usize::MAX,
            key_bytes: 0,
            deferred: false,
            spill: None,
        })
    }

    /// Caps the memory the index keys are kept in. Keys grow with the rows' indexed texts
    /// (a `.vis.db`'s `matched_node_link` is a node's whole ancestor path, so a very deep graph
    /// has GBs of them); past `bytes` the keys are dropped and every index is written empty,
    /// for the host to have SQLite rebuild them (`REINDEX`, SQLite's external sort: bounded
    /// memory, slower). [`Writer::indexes_deferred`] says whether that happened.
    pub fn set_key_budget(&mut self, bytes: usize) {
        self.key_budget = bytes;
        self.check_budget();
    }

    /// Keeps the index keys' texts in `spill` while the rows are written, in memory only when the
    /// indexes are sorted ([`Spill`]). The file written is the same.
    pub fn set_spill(&mut self, spill: Box<dyn Spill>) {
        self.spill = Some(spill);
    }

    /// Says that about `rows` more rows are coming to `table`, for the kept index keys to be
    /// sized once instead of doubling as they grow. Only a hint: more or fewer rows are fine.
    pub fn expect_rows(&mut self, table: usize, rows: usize) {
        if let Some(t) = self.tables.get_mut(table) {
            for c in &mut t.keys.columns {
                let n = c.col.len();
                c.rows_hint = n + rows;
                c.col.reserve_exact(rows);
            }
        }
    }

    /// Whether the indexes were written empty (over the key budget): the file needs a
    /// `REINDEX` by SQLite before it is used.
    pub fn indexes_deferred(&self) -> bool {
        self.deferred
    }

    fn check_budget(&mut self) {
        if !self.deferred && self.key_bytes > self.key_budget {
            self.deferred = true;
            for t in &mut self.tables {
                t.keys.columns = Vec::new();
            }
        }
    }

    /// Appends a row to table `table` (its rowid is the number of rows before it plus one).
    pub fn insert(&mut self, table: usize, row: &[Value]) -> io::Result<()> {
        let Some(t) = self.tables.get(table) else {
            return Err(invalid(format!("no table {table}")));
        };
        if row.len() != t.def.columns {
            return Err(invalid(format!(
                "{}: a row of {} values for {} columns",
                t.def.name,
                row.len(),
                t.def.columns
            )));
        }
        let mut record = std::mem::take(&mut self.record);
        encode_record(row, &mut record);
        let r = self.insert_record(table, &record);
        self.record = record;
        r
    }

    /// Appends a row already encoded as a record ([`append_record`]) to table `table`: the
    /// same as [`Writer::insert`] of its values. The record is checked (its header and bodies
    /// must add up, one value per column, no blob in an indexed column).
    pub fn insert_record(&mut self, table: usize, record: &[u8]) -> io::Result<()> {
        // The fields' buffer is reused from row to row.
        let mut fields = std::mem::take(&mut self.fields);
        let r = self.insert_fields(table, record, &mut fields);
        self.fields = fields;
        r
    }

    /// [`Writer::insert_record`] with `fields` to read the record's fields into.
    fn insert_fields(
        &mut self,
        table: usize,
        record: &[u8],
        fields: &mut Vec<(u64, usize)>,
    ) -> io::Result<()> {
        let Some(t) = self.tables.get_mut(table) else {
            return Err(invalid(format!("no table {table}")));
        };
        let shape = record_fields(record, fields);
        if shape.is_none() || fields.len() != t.def.columns {
            let got = match shape {
                Some(()) => format!("{} values", fields.len()),
                None => "a malformed record".to_string(),
            };
            return Err(invalid(format!(
                "{}: {got} for {} columns",
                t.def.name, t.def.columns
            )));
        }
        // Index entries name rows by a u32 (sorting 16-byte keys, not 24).
        if t.rows >= u32::MAX as i64 {
            return Err(invalid(format!(
                "{}: more than {} rows",
                t.def.name,
                u32::MAX
            )));
        }
        if !self.deferred {
            let value = |c: usize| {
                field_value(record, fields[c])
                    .ok_or_else(|| invalid(format!("{}: a blob in indexed column {c}", t.def.name)))
            };
            self.key_bytes += t.keys.push(value, self.spill.as_deref_mut())?;
        }
        t.rows += 1;
        let rowid = t.rows;
        // The cell: payload size, rowid, the record's local part and, when it spills, the
        // first overflow page; packed straight from `record` into the leaf.
        self.cell.clear();
        put_varint(&mut self.cell, record.len() as u64);
        put_varint(&mut self.cell, rowid as u64);
        let local = local_len(record.len(), TABLE_MAX_LOCAL);
        let mut first = [0u8; 4];
        let spilled = local < record.len();
        if spilled {
            first = self.pages.overflow(&record[local..])?.to_be_bytes();
        }
        let parts: [&[u8]; 3] = [
            &self.cell,
            &record[..local],
            &first[..if spilled { 4 } else { 0 }],
        ];
        let len = parts.iter().map(|p| p.len()).sum();
        if !t.leaf.fits(len) {
            let pgno = self.pages.alloc();
            t.leaf.seal(0);
            self.run.add(&self.pages, pgno, &t.leaf.buf)?;
            t.leaves.push((pgno, rowid - 1));
            t.leaf.reset();
        }
        t.leaf.push_parts(&parts);
        self.check_budget();
        Ok(())
    }

    /// From now on runs of table leaves (up to 16 consecutive pages of 64 KiB; a run ends early
    /// at an overflow chain, another table or the end) are kept for the caller to write
    /// ([`Writer::take_runs`]) instead of being written here: a host that shares the writer
    /// between threads under a lock writes them after it has let go of the lock (the export's
    /// writes then no longer wait for each other).
    pub fn hand_runs(&mut self) {
        self.run.handed.get_or_insert_with(Vec::new);
    }

    /// Moves the runs kept since the last call into `into`: each `(offset, bytes)` must be
    /// written at that offset of the output before the file is read. [`Writer::finish`] writes
    /// those never taken. The buffers may come back through [`Writer::give_back`].
    pub fn take_runs(&mut self, into: &mut Vec<(u64, Vec<u8>)>) {
        if let Some(handed) = &mut self.run.handed {
            into.append(handed);
        }
    }

    /// A buffer of a taken run, written: reused for a later run.
    pub fn give_back(&mut self, mut buf: Vec<u8>) {
        buf.clear();
        self.run.spare.push(buf);
    }

    /// Writes the indexes, the tables' upper levels and page 1; returns the output.
    pub fn finish(self) -> io::Result<O> {
        self.finish_with(None)
    }

    /// [`Writer::finish`], sorting the indexes on two threads when `join` runs its two pieces of
    /// work in parallel (see [`crate::base::Join`]).
    pub fn finish_with(mut self, join: Option<crate::base::Join>) -> io::Result<O> {
        self.run.flush(&self.pages)?;
        for (at, bytes) in self.run.handed.take().unwrap_or_default() {
            self.pages.out.write_at(at, &bytes)?;
        }
        self.run = Run::default();
        for ti in 0..self.tables.len() {
            self.finish_table(ti)?;
        }
        let schema = self.schema_rows();
        // Automatic indexes (unique), then the declared ones: the rows of each in key order.
        let mut jobs: Vec<(usize, Vec<usize>, u32, bool)> = Vec::new();
        for (ti, t) in self.tables.iter().enumerate() {
            if let Some(pk) = t.def.primary_key {
                jobs.push((ti, vec![pk], t.root + 1, true));
            }
        }
        for (ix, root) in &self.indexes {
            jobs.push((ix.table, ix.columns.clone(), *root, false));
        }
        if self.deferred {
            // Empty indexes, for SQLite to fill (`REINDEX`).
            let mut page = Page::new(LEAF_INDEX, 0);
            page.seal(0);
            for j in &jobs {
                self.pages.write(j.2, &page.buf)?;
            }
            jobs.clear();
        }
        if let Some(sp) = self.spill.as_deref_mut() {
            for t in &mut self.tables {
                for c in &mut t.keys.columns {
                    c.text.unspill(sp)?;
                }
            }
        }
        self.spill = None;
        for ti in 0..self.tables.len() {
            if jobs.iter().all(|j| j.0 != ti) {
                continue;
            }
            // Each column ranked once (two threads; texts cost the most), its values then
            // dropped: the indexes are written from the ranks.
            let columns: Vec<(usize, Column)> = std::mem::take(&mut self.tables[ti].keys.columns)
                .into_iter()
                .enumerate()
                .collect();
            let text_slot: Vec<bool> = columns.iter().map(|(_, c)| c.has_text()).collect();
            let ranks = halves(
                join,
                columns,
                |(s, _)| if text_slot[*s] { 8 } else { 1 },
                |(_, c)| column_ranks(c),
            );
            let t = &self.tables[ti];
            let mine: Vec<&(usize, Vec<usize>, u32, bool)> =
                jobs.iter().filter(|j| j.0 == ti).collect();
            let rows = t.rows as usize;
            let pages = &self.pages;
            // Index by index, sorted and written on two threads (pages are allocated from one
            // counter; where an index's pages land does not matter). Texts make the long keys.
            let texts = |j: &&(usize, Vec<usize>, u32, bool)| {
                1 + 4 * j
                    .1
                    .iter()
                    .filter(|&&c| t.keys.slot[c].is_some_and(|s| text_slot[s]))
                    .count()
            };
            let written = halves(join, mine, texts, |j| -> io::Result<()> {
                let slots: Vec<usize> = j.1.iter().filter_map(|&c| t.keys.slot[c]).collect();
                let (order, dup) = index_order(&ranks, &slots, rows);
                if let (true, Some(row)) = (j.3, dup) {
                    let r = &ranks[slots[0]];
                    let shown = match r.value(r.of_row[row as usize]) {
                        Raw::Text(s) => String::from_utf8_lossy(&s.to_vec()).into_owned(),
                        v => format!("{v:?}"),
                    };
                    return Err(invalid(format!(
                        "UNIQUE constraint failed: two rows of {} have the primary key {shown:?}",
                        t.def.name
                    )));
                }
                write_index(pages, &ranks, &slots, &order, j.2)
            });
            written.into_iter().collect::<io::Result<()>>()?;
        }
        self.write_page1(&schema)?;
        Ok(self.pages.out)
    }

    /// The rows of the schema table (`sqlite_schema`): each table, its automatic primary-key
    /// index, then the declared indexes, with their root pages.
    fn schema_rows(&self) -> Vec<SchemaRow> {
        let mut schema: Vec<SchemaRow> = Vec::new();
        for t in &self.tables {
            schema.push((
                "table",
                t.def.name.clone(),
                t.def.name.clone(),
                t.root,
                Some(t.def.sql.clone()),
            ));
            if t.def.primary_key.is_some() {
                schema.push((
                    "index",
                    format!("sqlite_autoindex_{}_1", t.def.name),
                    t.def.name.clone(),
                    t.root + 1,
                    None,
                ));
            }
        }
        for (ix, root) in &self.indexes {
            let name = self.tables[ix.table].def.name.clone();
            schema.push(("index", ix.name.clone(), name, *root, Some(ix.sql.clone())));
        }
        schema
    }

    /// Page 1: the file header and the schema table.
    fn write_page1(&mut self, schema: &[SchemaRow]) -> io::Result<()> {
        let mut page = Page::new(LEAF_TABLE, 100);
        for (i, (kind, name, tbl, root, sql)) in schema.iter().enumerate() {
            let sql_v = sql.as_deref().map_or(Value::Null, Value::Text);
            let row = [
                Value::Text(kind),
                Value::Text(name),
                Value::Text(tbl),
                Value::Int(*root as i64),
                sql_v,
            ];
            encode_record(&row, &mut self.record);
            self.cell.clear();
            put_varint(&mut self.cell, self.record.len() as u64);
            put_varint(&mut self.cell, i as u64 + 1);
            if self.record.len() > TABLE_MAX_LOCAL
                || !page.fits(self.cell.len() + self.record.len())
            {
                return Err(invalid("the schema does not fit on page 1".into()));
            }
            self.cell.extend_from_slice(&self.record);
            page.push(&self.cell);
        }
        page.seal(0);
        let total = self.pages.next.load(AtomicOrdering::Relaxed) - 1;
        file_header(&mut page.buf[..100], total);
        self.pages.write(1, &page.buf)
    }

    /// Writes a table's last leaf and its interior pages (the top one at the root).
    fn finish_table(&mut self, ti: usize) -> io::Result<()> {
        let t = &mut self.tables[ti];
        t.leaf.seal(0);
        if t.leaves.is_empty() {
            return self.pages.write(t.root, &t.leaf.buf);
        }
        let pgno = self.pages.alloc();
        self.pages.write(pgno, &t.leaf.buf)?;
        let rows = t.rows;
        let root = t.root;
        let mut children = std::mem::take(&mut t.leaves);
        children.push((pgno, rows));
        t.leaf = Page::new(LEAF_TABLE, 0);
        let mut page = Page::new(INTERIOR_TABLE, 0);
        let mut cell = Vec::new();
        loop {
            // Groups of children: each page has a cell (child, largest key) for all but its last
            // child, which is the right pointer. Every group has at least two children.
            let mut groups: Vec<(usize, usize)> = Vec::new();
            let mut start = 0;
            let mut used = 0;
            for (i, &(_, key)) in children.iter().enumerate() {
                let cost = Page::cost(4 + varint_len(key as u64));
                if i > start && 12 + used + cost > USABLE {
                    groups.push((start, i));
                    start = i;
                    used = 0;
                }
                used += cost;
            }
            groups.push((start, children.len()));
            let n = groups.len();
            if n >= 2 && groups[n - 1].1 - groups[n - 1].0 < 2 {
                groups[n - 2].1 -= 1;
                groups[n - 1].0 -= 1;
            }
            let top = groups.len() == 1;
            let mut next = Vec::with_capacity(groups.len());
            for &(a, b) in &groups {
                page.reset();
                for &(child, key) in &children[a..b - 1] {
                    cell.clear();
                    cell.extend_from_slice(&child.to_be_bytes());
                    put_varint(&mut cell, key as u64);
                    page.push(&cell);
                }
                let (right, key) = children[b - 1];
                page.seal(right);
                let pgno = if top { root } else { self.pages.alloc() };
                self.pages.write(pgno, &page.buf)?;
                next.push((pgno, key));
            }
            if top {
                return Ok(());
            }
            children = next;
        }
    }
}

/// Writes an index whose entries are in `order`, with its root at `root`. The values come from
/// the ranks: an entry's rank in each column and the column's value of that rank.
fn write_index<O: Output>(
    pages: &Pages<O>,
    ranks: &[Ranks],
    slots: &[usize],
    order: &Order,
    root: u32,
) -> io::Result<()> {
    let mut b = IndexBuilder::new();
    let mut vals: Vec<Raw> = Vec::with_capacity(slots.len() + 1);
    let mut record = Vec::new();
    let mut cell = Vec::new();
    let mut entry = |row: u32, rank: &dyn Fn(usize) -> u32| -> io::Result<()> {
        vals.clear();
        vals.extend(
            slots
                .iter()
                .enumerate()
                .map(|(i, &s)| ranks[s].value(rank(i))),
        );
        vals.push(Raw::Int(row as i64 + 1));
        encode_record(&vals, &mut record);
        cell.clear();
        put_varint(&mut cell, record.len() as u64);
        put_payload(pages, &mut cell, &record, INDEX_MAX_LOCAL)?;
        b.add(pages, &cell)
    };
    match order {
        Order::Packed { keys, fields } => {
            for &k in keys {
                entry(k as u32, &|i| {
                    let (shift, bits) = fields[i];
                    ((k >> (32 + shift)) as u64 & ((1u64 << bits) - 1)) as u32
                })?;
            }
        }
        Order::Rows(rows) => {
            for &r in rows {
                entry(r, &|i| ranks[slots[i]].of_row[r as usize])?;
            }
        }
    }
    b.finish(pages, root)
}

/// Dense ranks of one indexed column: rows with equal values (in SQLite's order) share a rank,
/// so an index's order is the order of its columns' rank tuples; and each rank's value.
struct Ranks {
    of_row: Vec<u32>,
    /// Bits a rank needs (0 when every row has the same value).
    bits: u32,
    by_rank: ByRank,
}

/// The values of a column's ranks, in rank order.
enum ByRank {
    Ints(Vec<i64>),
    /// Texts or mixed kinds: the keys, with the column holding their texts (boxed: a column is
    /// larger than the integers' vector).
    Any(Vec<Key>, Box<Column>),
}

impl Ranks {
    fn value(&self, rank: u32) -> Raw<'_> {
        let r = rank as usize;
        match &self.by_rank {
            ByRank::Ints(v) => Raw::Int(v[r]),
            ByRank::Any(keys, column) => column.raw(keys[r]),
        }
    }
}

/// Ranks a column (consumed: its per-row values are not needed after this).
fn column_ranks(column: Column) -> Ranks {
    let n = column.col.len();
    let mut of_row = vec![0u32; n];
    let mut distinct = 0u32;
    // Gives each row in `order` its rank, a new one where `same(j)` says the `j`-th row differs
    // from the row before; calls `first` with each rank's first row.
    let mut assign = |order: &[u32], same: &dyn Fn(usize) -> bool, first: &mut dyn FnMut(u32)| {
        for (j, &row) in order.iter().enumerate() {
            if j == 0 || !same(j) {
                distinct += 1;
                first(row);
            }
            of_row[row as usize] = distinct - 1;
        }
    };
    let by_rank = match &column.col {
        Col::Ints(ints) => {
            let mut pairs: Vec<(i64, u32)> = (0..n).map(|i| (ints.get(i), i as u32)).collect();
            pairs.sort_unstable();
            let order: Vec<u32> = pairs.iter().map(|p| p.1).collect();
            drop(pairs);
            let mut values = Vec::new();
            assign(
                &order,
                &|j| ints.get(order[j - 1] as usize) == ints.get(order[j] as usize),
                &mut |row| values.push(ints.get(row as usize)),
            );
            ByRank::Ints(values)
        }
        Col::Texts(_) | Col::Any(_) => {
            let key = |r: u32| column.col.get(r as usize);
            // NULLs, then numbers (compared), then texts (the radix sort): SQLite's order.
            // A text column with NULLs (`up_node`, `matched_node_link`) is mostly texts.
            let (mut order, texts): (Vec<u32>, Vec<u32>) =
                (0..n as u32).partition(|&r| !matches!(key(r), Key::Text(_)));
            order.sort_unstable_by(|&a, &b| column.cmp_keys(key(a), key(b)));
            // Where the texts start in `order`; for each text after the first, whether it equals
            // the one before (the sort knows: no second pass over their common prefixes).
            let first_text = order.len();
            let mut equal: Vec<bool> = Vec::with_capacity(texts.len());
            let offset = |r: u32| match key(r) {
                Key::Text(o) => o,
                _ => 0,
            };
            // Each text was stored once per miss of the column's repeat check: with far fewer
            // stored texts than rows (`up_node`: a parent's name for each child; `data_source`),
            // the stored ones are sorted, once each, and their rows follow them.
            if column.dedup.misses.saturating_mul(4) < texts.len() {
                let mut by_offset: Vec<(u64, u32)> =
                    texts.iter().map(|&r| (offset(r), r)).collect();
                by_offset.sort_unstable();
                // Runs of one offset: (offset, start).
                let mut runs: Vec<(u64, usize)> = Vec::new();
                for (i, &(o, _)) in by_offset.iter().enumerate() {
                    if runs.last().is_none_or(|&(last, _)| last != o) {
                        runs.push((o, i));
                    }
                }
                let text = |i: u32| column.text_at(runs[i as usize].0);
                let (sorted, same) = sort_texts(runs.len(), &text);
                for (i, same) in sorted.into_iter().zip(same) {
                    let start = runs[i as usize].1;
                    let end = runs.get(i as usize + 1).map_or(by_offset.len(), |r| r.1);
                    order.extend(by_offset[start..end].iter().map(|p| p.1));
                    // The run's rows are one stored text.
                    equal.push(same);
                    equal.extend(std::iter::repeat_n(true, end - start - 1));
                }
            } else {
                let text = |i: u32| column.text_at(offset(texts[i as usize]));
                let (sorted, same) = sort_texts(texts.len(), &text);
                order.extend(sorted.into_iter().map(|i| texts[i as usize]));
                equal = same;
            }
            let mut values = Vec::new();
            let same = |j: usize| match j.checked_sub(first_text) {
                // Texts: the sort's verdict (the first text differs from any number or NULL).
                Some(t) => t > 0 && equal[t],
                None => column.cmp_keys(key(order[j - 1]), key(order[j])) == Ordering::Equal,
            };
            assign(&order, &same, &mut |row| values.push(key(row)));
            ByRank::Any(values, Box::new(Column::new(0)))
        }
    };
    // The ranks' texts stay in the column's buffer; its per-row values can go.
    let by_rank = match by_rank {
        ByRank::Any(values, _) => ByRank::Any(values, Box::new(column.without_rows())),
        other => other,
    };
    Ranks {
        of_row,
        bits: 32 - distinct.saturating_sub(1).leading_zeros(),
        by_rank,
    }
}

/// The order of texts `0..n` (`text(i)`) by their bytes (shorter first on a common prefix:
/// SQLite's BINARY).
///
/// A radix sort on 8 bytes at a time: the texts that share a prefix of `depth` bytes are sorted
/// by their next 8 bytes, read once into the sort items (names share long prefixes such as
/// `Module.module.module.language_model.encoder.layers.`, where a comparison sort compares
/// them again and again, with a cache miss into the text on both sides each time).
///
/// With the order, for each position whether its text equals the one before (texts that end
/// together after equal bytes).
fn sort_texts<'t>(n: usize, text: &impl Fn(u32) -> Txt<'t>) -> (Vec<u32>, Vec<bool>) {
    #[derive(Clone, Copy)]
    struct Item {
        chunk: u64,
        /// Bytes in `chunk` (8: the text may go on).
        len: u8,
        text: u32,
    }
    let load = |it: &mut Item, depth: usize| {
        (it.chunk, it.len) = text(it.text).load8(depth);
    };
    let mut items: Vec<Item> = (0..n as u32)
        .map(|text| Item {
            chunk: 0,
            len: 0,
            text,
        })
        .collect();
    // Ranges still to sort, with the depth their texts agree to.
    let mut equal = vec![false; n];
    let mut todo: Vec<(usize, usize, usize)> = vec![(0, items.len(), 0)];
    while let Some((a, b, depth)) = todo.pop() {
        let group = &mut items[a..b];
        // Skip what the whole group shares (names agree on long prefixes such as a layer's
        // path: one pass instead of a sort per 8 bytes of it).
        let depth = depth + common_prefix(group.iter().map(|it| text(it.text)), depth);
        for it in group.iter_mut() {
            load(it, depth);
        }
        group.sort_unstable_by_key(|it| (it.chunk, it.len));
        let mut i = 0;
        while i < group.len() {
            let mut j = i + 1;
            while j < group.len()
                && group[j].chunk == group[i].chunk
                && group[j].len == group[i].len
            {
                j += 1;
            }
            // Equal so far and not ended: the next 8 bytes decide. Ended together: equal.
            if j - i > 1 && group[i].len == 8 {
                todo.push((a + i, a + j, depth + 8));
            } else if j - i > 1 {
                equal[a + i + 1..a + j].fill(true);
            }
            i = j;
        }
    }
    (items.into_iter().map(|it| it.text).collect(), equal)
}

/// How many bytes after `depth` all `texts` share.
fn common_prefix<'t>(mut texts: impl Iterator<Item = Txt<'t>>, depth: usize) -> usize {
    let Some(first) = texts.next() else {
        return 0;
    };
    let first = first.skip(depth);
    let mut n = first.len();
    for t in texts {
        n = mismatch_txt(first.take(n), t.skip(depth));
        if n == 0 {
            break;
        }
    }
    n
}

/// [`mismatch`] of two-part texts.
fn mismatch_txt(a: Txt, b: Txt) -> usize {
    // Front-coded on one anchor: the heads are the same bytes.
    let mut i = if std::ptr::eq(a.head.as_ptr(), b.head.as_ptr()) {
        a.head.len().min(b.head.len())
    } else {
        0
    };
    loop {
        let (x, y) = (a.run(i), b.run(i));
        let k = mismatch(x, y);
        i += k;
        if k < x.len().min(y.len()) || k == 0 {
            return i;
        }
    }
}

/// The length of the common prefix of `a` and `b` (8 bytes at a time).
fn mismatch(a: &[u8], b: &[u8]) -> usize {
    let m = a.len().min(b.len());
    let mut i = 0;
    while i + 8 <= m {
        let (mut x, mut y) = ([0u8; 8], [0u8; 8]);
        x.copy_from_slice(&a[i..i + 8]);
        y.copy_from_slice(&b[i..i + 8]);
        let d = u64::from_le_bytes(x) ^ u64::from_le_bytes(y);
        if d != 0 {
            return i + (d.trailing_zeros() / 8) as usize;
        }
        i += 8;
    }
    while i < m && a[i] == b[i] {
        i += 1;
    }
    i
}

/// An index's entries in key order.
enum Order {
    /// Rank tuple and row packed in one integer (row in the low 32 bits), sorted as integers;
    /// `fields[i]`: where the rank of the index's `i`-th column is above the row (shift, bits).
    Packed {
        keys: Vec<u128>,
        fields: Vec<(u32, u32)>,
    },
    /// Rows, when the ranks need more than 96 bits.
    Rows(Vec<u32>),
}

/// The index's entries in order (by the rank tuples of `slots`, then rowid) and, for a unique
/// index, a row whose key another row has too.
fn index_order(ranks: &[Ranks], slots: &[usize], rows: usize) -> (Order, Option<u32>) {
    let bits: u32 = slots.iter().map(|&s| ranks[s].bits).sum();
    if bits <= 96 {
        let mut fields = Vec::with_capacity(slots.len());
        let mut shift = bits;
        for &s in slots {
            shift -= ranks[s].bits;
            fields.push((shift, ranks[s].bits));
        }
        let mut keys: Vec<u128> = (0..rows)
            .map(|r| {
                let mut k: u128 = 0;
                for &s in slots {
                    k = (k << ranks[s].bits) | ranks[s].of_row[r] as u128;
                }
                (k << 32) | r as u128
            })
            .collect();
        // Made in row order: a stable sort on the rank bits alone gives rank, then row.
        radix_sort_bits(&mut keys, 32, 32 + bits);
        let dup = keys
            .windows(2)
            .find(|w| w[0] >> 32 == w[1] >> 32)
            .map(|w| w[0] as u32);
        (Order::Packed { keys, fields }, dup)
    } else {
        let key = |r: u32| slots.iter().map(move |&s| ranks[s].of_row[r as usize]);
        let mut order: Vec<u32> = (0..rows as u32).collect();
        order.sort_unstable_by(|&a, &b| key(a).cmp(key(b)).then(a.cmp(&b)));
        let dup = order
            .windows(2)
            .find(|w| key(w[0]).eq(key(w[1])))
            .map(|w| w[0]);
        (Order::Rows(order), dup)
    }
}

/// Sorts `keys` by their bits `lo..hi` alone, stably (least significant digit first, 11 bits a
/// pass): the index keys' rank tuples, made in row order, come out in tuple then row order.
fn radix_sort_bits(keys: &mut Vec<u128>, lo: u32, hi: u32) {
    const DIGIT: u32 = 11;
    let mut other: Vec<u128> = vec![0; keys.len()];
    let mut shift = lo;
    while shift < hi {
        let width = DIGIT.min(hi - shift);
        let mask = (1usize << width) - 1;
        let digit = |k: u128| (k >> shift) as usize & mask;
        let mut count = vec![0usize; mask + 2];
        for &k in keys.iter() {
            count[digit(k) + 1] += 1;
        }
        for i in 1..count.len() {
            count[i] += count[i - 1];
        }
        for &k in keys.iter() {
            let d = digit(k);
            other[count[d]] = k;
            count[d] += 1;
        }
        std::mem::swap(keys, &mut other);
        shift += width;
    }
}

/// Builds an index B-tree bottom-up from cells in key order. Each key is on exactly one page:
/// when a leaf is full, the next key becomes a divider in the level above.
struct IndexBuilder {
    leaf: Page,
    /// A key that did not fit on the full `leaf`: the divider after it, once another key
    /// shows that a leaf follows.
    pending: Option<Vec<u8>>,
    /// Written leaves with the divider after each (cell bodies, no child pointer).
    dividers: Vec<(u32, Vec<u8>)>,
}

impl IndexBuilder {
    fn new() -> IndexBuilder {
        IndexBuilder {
            leaf: Page::new(LEAF_INDEX, 0),
            pending: None,
            dividers: Vec::new(),
        }
    }
    fn flush_leaf<O: Output>(&mut self, pages: &Pages<O>) -> io::Result<u32> {
        let pgno = pages.alloc();
        self.leaf.seal(0);
        pages.write(pgno, &self.leaf.buf)?;
        self.leaf.reset();
        Ok(pgno)
    }
    fn add<O: Output>(&mut self, pages: &Pages<O>, cell: &[u8]) -> io::Result<()> {
        if let Some(div) = self.pending.take() {
            let pgno = self.flush_leaf(pages)?;
            self.dividers.push((pgno, div));
            self.leaf.push(cell);
        } else if self.leaf.fits(cell.len()) {
            self.leaf.push(cell);
        } else {
            self.pending = Some(cell.to_vec());
        }
        Ok(())
    }
    fn finish<O: Output>(mut self, pages: &Pages<O>, root: u32) -> io::Result<()> {
        if let Some(last) = self.pending.take() {
            // The last key did not fit: the full leaf's last key becomes the divider and the
            // last key gets a leaf of its own (no page may be left without cells).
            let div = self.leaf.pop();
            let pgno = self.flush_leaf(pages)?;
            self.dividers.push((pgno, div));
            self.leaf.push(&last);
        }
        self.leaf.seal(0);
        if self.dividers.is_empty() {
            return pages.write(root, &self.leaf.buf);
        }
        let last = pages.alloc();
        pages.write(last, &self.leaf.buf)?;
        let mut level = std::mem::take(&mut self.dividers);
        let mut right = last;
        let mut page = Page::new(INTERIOR_INDEX, 0);
        let mut cell = Vec::new();
        loop {
            // Pages of (child, divider) cells; a divider that does not fit goes up with the
            // page as its left child, and its own child becomes the page's right pointer.
            let mut pages_plan: Vec<(usize, usize, usize)> = Vec::new(); // cells a..b, up = b
            let mut start = 0;
            let mut used = 0;
            let mut i = 0;
            while i < level.len() {
                let cost = Page::cost(4 + level[i].1.len());
                if 12 + used + cost <= USABLE {
                    used += cost;
                    i += 1;
                    continue;
                }
                pages_plan.push((start, i, i));
                start = i + 1;
                used = 0;
                i += 1;
            }
            if start == level.len() && !pages_plan.is_empty() {
                // The last divider went up and nothing followed: take the cell before it up
                // instead, and give the last divider a page of its own.
                if let Some((a, b, _)) = pages_plan.pop() {
                    pages_plan.push((a, b - 1, b - 1));
                    start = b;
                }
            }
            let top = pages_plan.is_empty();
            let mut next: Vec<(u32, Vec<u8>)> = Vec::with_capacity(pages_plan.len());
            let mut write = |pages: &Pages<O>,
                             page: &mut Page,
                             a: usize,
                             b: usize,
                             right: u32,
                             at: Option<u32>|
             -> io::Result<u32> {
                page.reset();
                for (child, body) in &level[a..b] {
                    cell.clear();
                    cell.extend_from_slice(&child.to_be_bytes());
                    cell.extend_from_slice(body);
                    page.push(&cell);
                }
                page.seal(right);
                let pgno = match at {
                    Some(p) => p,
                    None => pages.alloc(),
                };
                pages.write(pgno, &page.buf)?;
                Ok(pgno)
            };
            for &(a, b, up) in &pages_plan {
                let pgno = write(pages, &mut page, a, b, level[up].0, None)?;
                next.push((pgno, level[up].1.clone()));
            }
            let last_pgno = write(
                pages,
                &mut page,
                start,
                level.len(),
                right,
                top.then_some(root),
            )?;
            if top {
                return Ok(());
            }
            level = next;
            right = last_pgno;
        }
    }
}

/// A row of the schema table: type, name, table name, root page, SQL.
type SchemaRow = (&'static str, String, String, u32, Option<String>);

/// The 100-byte file header of a database of `total` pages.
fn file_header(h: &mut [u8], total: u32) {
    h[..16].copy_from_slice(b"SQLite format 3\0");
    // The page size; 65536 is written as 1.
    h[16..18].copy_from_slice(&1u16.to_be_bytes());
    // File format write and read versions: legacy (rollback journal).
    h[18] = 1;
    h[19] = 1;
    // Reserved bytes per page; maximum and minimum embedded payload fraction; leaf payload
    // fraction.
    h[20] = 0;
    h[21] = 64;
    h[22] = 32;
    h[23] = 32;
    // File change counter; database size in pages.
    h[24..28].copy_from_slice(&1u32.to_be_bytes());
    h[28..32].copy_from_slice(&total.to_be_bytes());
    // 32..40: no freelist. Schema cookie; schema format 4.
    h[40..44].copy_from_slice(&1u32.to_be_bytes());
    h[44..48].copy_from_slice(&4u32.to_be_bytes());
    // 48..56: default cache size, no auto-vacuum. Text encoding: UTF-8.
    h[56..60].copy_from_slice(&1u32.to_be_bytes());
    // 60..92: user version, incremental vacuum, application id, reserved: 0. Version-valid-for
    // (= the change counter); the SQLite version number.
    h[92..96].copy_from_slice(&1u32.to_be_bytes());
    h[96..100].copy_from_slice(&SQLITE_VERSION_NUMBER.to_be_bytes());
}

#[cfg(test)]
#[cfg(feature = "cli")] // SQLite (rusqlite) reads the files back
mod tests {
    use super::*;
    use rusqlite::types::Value as Sql;

    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }
        fn below(&mut self, n: u64) -> u64 {
            self.next() % n
        }
    }

    fn temp(name: &str) -> std::path::PathBuf {
        std::env::temp_dir().join(format!("probelens-sqlw-{}-{name}.db", std::process::id()))
    }

    #[test]
    fn varints_are_sqlites() {
        let cases: [(u64, &[u8]); 6] = [
            (0, &[0]),
            (0x7f, &[0x7f]),
            (0x80, &[0x81, 0x00]),
            (0x3fff, &[0xff, 0x7f]),
            (0x4000, &[0x81, 0x80, 0x00]),
            (u64::MAX, &[0xff; 9]),
        ];
        for (v, want) in cases {
            let mut out = Vec::new();
            put_varint(&mut out, v);
            assert_eq!(out, want, "{v:#x}");
            assert_eq!(varint_len(v), want.len(), "{v:#x}");
        }
        let mut rng = Rng(7);
        for _ in 0..10_000 {
            let v = rng.next() >> rng.below(64);
            let mut out = Vec::new();
            put_varint(&mut out, v);
            assert_eq!(out.len(), varint_len(v));
            // Decode (SQLite's rule: 8 bytes of 7 bits, a 9th of 8).
            let mut x: u64 = 0;
            for (i, b) in out.iter().enumerate() {
                if i == 8 {
                    x = (x << 8) | *b as u64;
                    break;
                }
                x = (x << 7) | (*b & 0x7f) as u64;
                if b & 0x80 == 0 {
                    break;
                }
            }
            assert_eq!(x, v);
        }
    }

    #[test]
    fn texts_sort_as_bytes() {
        let mut rng = Rng(11);
        for round in 0..200 {
            let n = rng.below(400) as usize;
            let texts: Vec<Vec<u8>> = (0..n)
                .map(|_| {
                    // Shared prefixes of varying length, NULs, ends in the middle of a chunk.
                    let mut t = b"Module.module.layers."[..rng.below(22) as usize].to_vec();
                    for _ in 0..rng.below(if round % 2 == 0 { 20 } else { 3 }) {
                        t.push([0u8, 1, b'a', b'b', 0xff][rng.below(5) as usize]);
                    }
                    t
                })
                .collect();
            let refs: Vec<&[u8]> = texts.iter().map(|t| &t[..]).collect();
            // Each text also as two parts split anywhere (a front-coded text's head and tail).
            let cuts: Vec<usize> = refs
                .iter()
                .map(|t| rng.below(t.len() as u64 + 1) as usize)
                .collect();
            for split in [false, true] {
                let txt = |i: u32| {
                    let t = refs[i as usize];
                    let (head, tail) = t.split_at(if split { cuts[i as usize] } else { t.len() });
                    Txt { head, tail }
                };
                let (order, equal) = sort_texts(refs.len(), &txt);
                let got: Vec<&[u8]> = order.iter().map(|&i| refs[i as usize]).collect();
                let mut want = refs.clone();
                want.sort();
                assert_eq!(got, want, "round {round}");
                // Each position: whether its text equals the one before.
                let same: Vec<bool> = (0..got.len())
                    .map(|i| i > 0 && got[i] == got[i - 1])
                    .collect();
                assert_eq!(equal, same, "round {round}");
            }
        }
    }

    #[test]
    fn common_prefixes() {
        assert_eq!(mismatch(b"", b"abc"), 0);
        assert_eq!(mismatch(b"abcdefghij", b"abcdefghij"), 10);
        assert_eq!(mismatch(b"abcdefghij", b"abcdefghiX"), 9);
        assert_eq!(mismatch(b"abcdefghij", b"abcXefghij"), 3);
        assert_eq!(mismatch(b"abcdefgh", b"abcdefghij"), 8);
        let t: [&[u8]; 3] = [b"Module.a.x", b"Module.a.y", b"Module.b"];
        let whole = |t: &[&'static [u8]]| t.iter().map(|t| Txt::whole(t)).collect::<Vec<_>>();
        assert_eq!(common_prefix(whole(&t).into_iter(), 0), 7);
        assert_eq!(common_prefix(whole(&t).into_iter(), 7), 0);
        assert_eq!(common_prefix(whole(&t[..2]).into_iter(), 2), 7);
        assert_eq!(common_prefix(std::iter::empty(), 0), 0);
        // Two-part texts: the parts end at different places on each side.
        let two = |t: &'static [u8], cut: usize| Txt {
            head: &t[..cut],
            tail: &t[cut..],
        };
        for (a, b) in [(0, 0), (3, 7), (7, 3), (10, 2), (1, 10)] {
            let (x, y) = (two(b"Module.a.x", a), two(b"Module.a.y", b));
            assert_eq!(mismatch_txt(x, y), 9, "{a} {b}");
            assert_eq!(mismatch_txt(x, x), 10);
            assert_eq!(x.cmp(&y), Ordering::Less);
            assert_eq!(y.cmp(&x), Ordering::Greater);
            assert_eq!(x.cmp(&two(b"Module.a.x", b)), Ordering::Equal);
            assert_eq!(x.cmp(&two(b"Module.a.xy", b.min(11))), Ordering::Less);
            assert_eq!(x.take(8).cmp(&x), Ordering::Less);
            assert_eq!(x.skip(7).to_vec(), b"a.x");
            assert_eq!(x.take(8).to_vec(), b"Module.a");
            assert_eq!(x.take(80).to_vec(), b"Module.a.x");
            assert_eq!(x.skip(80).len(), 0);
            assert_eq!(x.load8(0), (u64::from_be_bytes(*b"Module.a"), 8));
            assert_eq!(x.load8(6), (u64::from_be_bytes(*b".a.x\0\0\0\0"), 4));
            assert_eq!(x.load8(10), (0, 0));
            assert_eq!(x.load8(11), (0, 0));
            assert_eq!(
                common_prefix([x, y, two(b"Module.b", a.min(8))].into_iter(), 0),
                7
            );
            assert_eq!(common_prefix([x, y].into_iter(), 2), 7);
        }
    }

    #[test]
    fn integers_and_reals_order_as_sqlite() {
        assert_eq!(num_cmp_if(1, 1.5), Ordering::Less);
        assert_eq!(num_cmp_if(2, 1.5), Ordering::Greater);
        assert_eq!(num_cmp_if(-1, -1.5), Ordering::Greater);
        assert_eq!(num_cmp_if(3, 3.0), Ordering::Equal);
        assert_eq!(num_cmp_if(i64::MAX, 9.3e18), Ordering::Less);
        assert_eq!(num_cmp_if(i64::MIN, -9.3e18), Ordering::Greater);
    }

    /// Texts come back whole across chunk ends, including one longer than a chunk.
    #[test]
    fn text_arena_chunks() {
        let mut a = TextArena::default();
        let mut rng = Rng(7);
        let mut kept = Vec::new();
        for i in 0..3000 {
            let n = match i {
                1000 => TextArena::CHUNK + 10,
                1001 => TextArena::CHUNK - 4,
                _ => rng.below(2000) as usize,
            };
            let t: Vec<u8> = (0..n).map(|j| (j * 31 + i) as u8).collect();
            let off = a.push(&t, None).unwrap();
            kept.push((off, t));
        }
        assert!(a.chunks.len() > 3);
        assert_eq!(a.len(), a.chunks.iter().map(|c| c.len()).sum::<usize>());
        for (off, t) in &kept {
            assert!(a.get(*off).is(t));
            assert_eq!(a.get(*off).to_vec(), *t);
        }
    }

    /// Texts like a node's path (a list of ancestors, each row near the one before), with empty
    /// texts, non-ASCII names, unrelated texts, and some longer than a chunk.
    fn paths(rng: &mut Rng, n: usize) -> Vec<Vec<u8>> {
        let mut stack: Vec<String> = Vec::new();
        (0..n)
            .map(|i| {
                for _ in 0..rng.below(3) + 2 * u64::from(stack.len() > 12) {
                    stack.pop();
                }
                for _ in 0..rng.below(3) + usize::from(stack.is_empty()) as u64 {
                    let name = match rng.below(6) {
                        0 => format!("模块.层.{}", rng.below(40)),
                        1 => format!("Tensor.__mul__.{}.forward", rng.below(20_000)),
                        _ => format!("Module.0.module.decoder.layers.{}.mlp", rng.below(30)),
                    };
                    stack.push(name);
                }
                match rng.below(50) {
                    0 => Vec::new(),
                    1 => text(rng, 30).into_bytes(),
                    _ if i % 4999 == 100 || i % 4999 == 101 => {
                        let mut t = format!("{stack:?}").into_bytes();
                        t.resize(TextArena::CHUNK + rng.below(5000) as usize, b'z');
                        t
                    }
                    _ => format!("{stack:?}").into_bytes(),
                }
            })
            .collect()
    }

    /// Front-coded texts come back whole: prefixes shared with an anchor, anchors, empty texts,
    /// texts longer than a chunk, non-ASCII; repeats stored once.
    #[test]
    fn front_coded_texts_read_back() {
        let hasher = foldhash::fast::RandomState::default();
        for seed in [1, 2, 3] {
            let mut rng = Rng(seed * 7919);
            let texts = paths(&mut rng, 20_000);
            let mut a = TextArena::default();
            let offs: Vec<u64> = texts.iter().map(|t| a.push(t, None).unwrap()).collect();
            let mut front = 0;
            for (o, t) in offs.iter().zip(&texts) {
                let got = a.get(*o);
                assert!(got.is(t));
                assert_eq!(got.to_vec(), *t);
                assert_eq!(got, Txt::whole(t));
                if !got.tail.is_empty() || got.head.len() < t.len() {
                    // Front-coded: the head is the anchor's, at least the least prefix.
                    assert!(got.head.len() >= TextArena::MIN_PREFIX);
                    front += 1;
                }
            }
            let long = |t: &&Vec<u8>| t.len() > TextArena::CHUNK;
            let raw: usize = texts.iter().filter(|t| !long(t)).map(|t| t.len()).sum();
            let raw_long: usize = texts.iter().filter(long).map(|t| t.len() + 8).sum();
            assert!(raw_long > 4 * TextArena::CHUNK);
            assert!(
                front > texts.len() / 2,
                "{front} of {} front-coded",
                texts.len()
            );
            assert!(a.len() < raw / 2 + raw_long, "{} bytes for {raw}", a.len());
            assert_eq!(a.len(), a.chunks.iter().map(|c| c.len()).sum::<usize>());

            // Through a column: a repeat (the text before, or one far back) is stored once.
            let mut c = Column::new(0);
            let mut first: Vec<Option<u64>> = vec![None; texts.len()];
            for i in 0..texts.len() {
                let again = rng.below(i as u64 + 1) as usize;
                for j in [i, i, again, rng.below(i as u64 + 1) as usize, again] {
                    let o = c.intern(&texts[j], &hasher, None).unwrap();
                    assert!(c.text_at(o).is(&texts[j]));
                    assert_eq!(*first[j].get_or_insert(o), o, "text {j} stored twice");
                }
            }
            assert!(c.dedup.seen.is_some());
            assert!(c.text.len() <= a.len());
        }
    }

    /// A table `t (k TEXT PRIMARY KEY, a INTEGER, b TEXT, c, d TEXT)` with indexes on
    /// (a, b), (b), (c, a), (d) (d carries long texts, so the index has interior levels).
    fn schema() -> (Vec<Table>, Vec<Index>, [&'static str; 5]) {
        let t = Table {
            name: "t".into(),
            sql: "CREATE TABLE t (\n    k TEXT PRIMARY KEY,\n    a INTEGER,\n    b TEXT,\n    c,\n    d TEXT\n)".into(),
            columns: 5,
            primary_key: Some(0),
        };
        let s = Table {
            name: "s".into(),
            sql: "CREATE TABLE s (x INTEGER, y TEXT)".into(),
            columns: 2,
            primary_key: None,
        };
        let ix = |name: &str, cols: &[usize], names: &str| Index {
            name: name.into(),
            table: 0,
            sql: format!("CREATE INDEX {name} ON t ({names})"),
            columns: cols.to_vec(),
        };
        let idx = vec![
            ix("i_ab", &[1, 2], "a, b"),
            ix("i_b", &[2], "b"),
            ix("i_ca", &[3, 1], "c, a"),
            ix("i_d", &[4], "d"),
        ];
        (vec![t, s], idx, ["k", "a", "b", "c", "d"])
    }

    fn text(rng: &mut Rng, max: u64) -> String {
        let n = rng.below(max + 1) as usize;
        (0..n)
            .map(|_| match rng.below(5) {
                0 => 'é',
                1 => '\u{1F600}',
                _ => (b'a' + rng.below(4) as u8) as char,
            })
            .collect()
    }

    fn rows(n: usize, seed: u64, long: u64) -> Vec<[Sql; 5]> {
        let mut rng = Rng(seed);
        (0..n)
            .map(|i| {
                let a = match rng.below(6) {
                    0 => Sql::Null,
                    1 => Sql::Integer(rng.next() as i64),
                    2 => Sql::Integer(rng.below(3) as i64 - 1),
                    _ => Sql::Integer(rng.below(70_000) as i64 - 35_000),
                };
                let b = if rng.below(8) == 0 {
                    Sql::Null
                } else {
                    Sql::Text(text(&mut rng, 12))
                };
                let c = match rng.below(4) {
                    0 => Sql::Null,
                    1 => Sql::Real((rng.below(2000) as f64 - 1000.0) / 8.0),
                    2 => Sql::Integer(rng.below(300) as i64 - 150),
                    _ => Sql::Text(text(&mut rng, 3)),
                };
                // Mostly short; some long enough to overflow an index page's local part or a
                // whole table page.
                let d = match rng.below(10) {
                    0 => Sql::Text(text(&mut rng, long)),
                    1 => Sql::Text("x".repeat(rng.below(200_000) as usize)),
                    _ => Sql::Text(text(&mut rng, 40)),
                };
                [
                    Sql::Text(format!("key{i:07}-{}", rng.below(1000))),
                    a,
                    b,
                    c,
                    d,
                ]
            })
            .collect()
    }

    fn as_value(v: &Sql) -> Value<'_> {
        match v {
            Sql::Null => Value::Null,
            Sql::Integer(i) => Value::Int(*i),
            Sql::Real(f) => Value::Real(*f),
            Sql::Text(t) => Value::Text(t),
            Sql::Blob(_) => unreachable!(),
        }
    }

    fn two_threads(a: &mut (dyn FnMut() + Send), b: &mut (dyn FnMut() + Send)) {
        std::thread::scope(|s| {
            s.spawn(b);
            a();
        });
    }

    /// Writes the rows (in memory) and the file; the indexes on two threads for even seeds.
    fn write(path: &std::path::Path, rows: &[[Sql; 5]], extra: usize) -> io::Result<()> {
        write_with(path, rows, extra, usize::MAX).map(|_| ())
    }

    /// [`write`] with a key budget; whether the indexes were left to SQLite.
    fn write_with(
        path: &std::path::Path,
        rows: &[[Sql; 5]],
        extra: usize,
        budget: usize,
    ) -> io::Result<bool> {
        let (tables, indexes, _) = schema();
        let mut w = Writer::new(std::sync::Mutex::new(Vec::new()), tables, indexes)?;
        w.set_key_budget(budget);
        for r in rows {
            let vals: Vec<Value> = r.iter().map(as_value).collect();
            w.insert(0, &vals)?;
        }
        for i in 0..extra {
            let y = format!("stack {i}");
            w.insert(1, &[Value::Int(i as i64), Value::Text(&y)])?;
        }
        let deferred = w.indexes_deferred();
        let join: Option<crate::base::Join> = if rows.len() % 2 == 0 {
            Some(two_threads)
        } else {
            None
        };
        let bytes = w
            .finish_with(join)?
            .into_inner()
            .map_err(|_| io::Error::other("poisoned"))?;
        std::fs::write(path, bytes)?;
        Ok(deferred)
    }

    fn check(path: &std::path::Path, rows: &[[Sql; 5]], extra: usize) {
        let (_, indexes, names) = schema();
        let c = rusqlite::Connection::open(path).unwrap();
        let ok: String = c
            .query_row("PRAGMA integrity_check", [], |r| r.get(0))
            .unwrap();
        assert_eq!(ok, "ok", "{} rows", rows.len());
        let mut st = c.prepare("SELECT rowid, * FROM t ORDER BY rowid").unwrap();
        let got: Vec<(i64, Vec<Sql>)> = st
            .query_map([], |r| {
                Ok((r.get(0)?, (1..6).map(|i| r.get(i).unwrap()).collect()))
            })
            .unwrap()
            .map(|r| r.unwrap())
            .collect();
        assert_eq!(got.len(), rows.len());
        for (i, (rowid, vals)) in got.iter().enumerate() {
            assert_eq!(*rowid, i as i64 + 1);
            assert_eq!(vals[..], rows[i][..], "row {i}");
        }
        let n: i64 = c
            .query_row("SELECT count(*) FROM s", [], |r| r.get(0))
            .unwrap();
        assert_eq!(n, extra as i64);
        // Every index gives SQLite's own order (its sorter, NOT INDEXED) when scanned.
        for ix in &indexes {
            let cols: Vec<&str> = ix.columns.iter().map(|&c| names[c]).collect();
            let order = format!("{}, rowid", cols.join(", "));
            let q = |hint: &str| -> Vec<i64> {
                let sql = format!("SELECT rowid FROM t {hint} ORDER BY {order}");
                let mut st = c.prepare(&sql).unwrap();
                let v: Vec<i64> = st
                    .query_map([], |r| r.get(0))
                    .unwrap()
                    .map(|r| r.unwrap())
                    .collect();
                v
            };
            let plan: String = c
                .query_row(
                    &format!(
                        "EXPLAIN QUERY PLAN SELECT rowid FROM t INDEXED BY {} ORDER BY {order}",
                        ix.name
                    ),
                    [],
                    |r| r.get(3),
                )
                .unwrap();
            assert!(plan.contains(&ix.name), "{plan}");
            assert_eq!(
                q(&format!("INDEXED BY {}", ix.name)),
                q("NOT INDEXED"),
                "{}",
                ix.name
            );
        }
        // Lookups through the primary key's index.
        for (i, r) in rows.iter().enumerate().step_by(97) {
            let Sql::Text(k) = &r[0] else { unreachable!() };
            let id: i64 = c
                .query_row("SELECT rowid FROM t WHERE k = ?", [k], |r| r.get(0))
                .unwrap();
            assert_eq!(id, i as i64 + 1);
        }
    }

    #[test]
    fn sqlite_reads_what_it_writes_at_every_size() {
        // Sizes around page and level boundaries: one leaf, two, many; index interior levels
        // (texts of up to 30,000 bytes: ~2–6 keys per index page).
        let path = temp("sizes");
        for (n, long) in [
            (0, 10),
            (1, 10),
            (2, 30_000),
            (3, 30_000),
            (7, 30_000),
            (40, 30_000),
            (300, 30_000),
            (1000, 2_000),
            (2500, 30_000),
        ] {
            for seed in [1, 2, 3] {
                let rows = rows(n, seed * 1000 + n as u64, long);
                write(&path, &rows, n % 5).unwrap();
                check(&path, &rows, n % 5);
                if n == 2500 {
                    // Index interior pages below the root: the tree has three levels or more.
                    let bytes = std::fs::read(&path).unwrap();
                    let interior = bytes
                        .chunks(PAGE_SIZE)
                        .skip(1)
                        .filter(|p| p[0] == INTERIOR_INDEX && p[1..3] == [0, 0])
                        .count();
                    assert!(interior >= 3, "{interior} interior index pages");
                }
            }
        }
        let _ = std::fs::remove_file(&path);
    }

    #[test]
    fn index_trees_of_every_shape() {
        // Keys of one size (about four to a page): every count from 1 to 90 ends the leaves
        // and the interior levels at each place in a page (a full leaf with one key left over,
        // a divider with nothing after it, …).
        let path = temp("shapes");
        for n in 1..=90 {
            let rows: Vec<[Sql; 5]> = (0..n)
                .map(|i| {
                    [
                        Sql::Text(format!("k{i:03}")),
                        Sql::Integer(i as i64),
                        Sql::Null,
                        Sql::Null,
                        Sql::Text(format!("{:03}{}", (i * 37) % 101, "z".repeat(15_990))),
                    ]
                })
                .collect();
            write(&path, &rows, 0).unwrap();
            check(&path, &rows, 0);
        }
        let _ = std::fs::remove_file(&path);
    }

    #[test]
    fn over_the_key_budget_sqlite_builds_the_indexes() {
        let path = temp("budget");
        let rows = rows(700, 5, 30_000);
        for budget in [0, 20_000, 1 << 40] {
            let deferred = write_with(&path, &rows, 0, budget).unwrap();
            assert_eq!(deferred, budget < 1 << 40, "budget {budget}");
            let c = rusqlite::Connection::open(&path).unwrap();
            let n: i64 = c
                .query_row("SELECT count(*) FROM t INDEXED BY i_d", [], |r| r.get(0))
                .unwrap();
            assert_eq!(n, if deferred { 0 } else { 700 });
            if deferred {
                c.execute_batch("REINDEX").unwrap();
            }
            drop(c);
            check(&path, &rows, 0);
        }
        let _ = std::fs::remove_file(&path);
    }

    /// Integer key columns start a byte wide and widen (to four, then eight bytes) as values
    /// need; every value reads back and the indexes sort them as SQLite does.
    /// A [`Spill`] in memory that counts what it was given.
    struct MemSpill(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

    impl Spill for MemSpill {
        fn append(&mut self, bytes: &[u8]) -> io::Result<u64> {
            let mut v = self.0.lock().map_err(|_| io::Error::other("poisoned"))?;
            let at = v.len() as u64;
            v.extend_from_slice(bytes);
            Ok(at)
        }
        fn read_at(&mut self, at: u64, buf: &mut [u8]) -> io::Result<()> {
            let v = self.0.lock().map_err(|_| io::Error::other("poisoned"))?;
            let at = at as usize;
            buf.copy_from_slice(&v[at..at + buf.len()]);
            Ok(())
        }
    }

    /// Keys spilled while the rows are written (columns past the repeat-lookup trial, chunks
    /// of long texts) give the same file, byte for byte, as keys kept in memory; SQLite reads it.
    #[test]
    fn spilled_keys_give_the_same_file() {
        let rows = rows(6000, 77, 40);
        let file = |spill: Option<MemSpill>| -> Vec<u8> {
            let (tables, indexes, _) = schema();
            let mut w = Writer::new(std::sync::Mutex::new(Vec::new()), tables, indexes).unwrap();
            if let Some(sp) = spill {
                w.set_spill(Box::new(sp));
            }
            for r in &rows {
                let vals: Vec<Value> = r.iter().map(as_value).collect();
                w.insert(0, &vals).unwrap();
            }
            // One thread: two place the indexes' pages in a racing order.
            w.finish_with(None).unwrap().into_inner().unwrap()
        };
        let kept = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let spilled = file(Some(MemSpill(kept.clone())));
        let n = kept.lock().unwrap().len();
        assert!(n > 4 << 20, "only {n} bytes spilled");
        assert!(spilled == file(None), "the same bytes");
        let path = temp("spill");
        std::fs::write(&path, &spilled).unwrap();
        check(&path, &rows, 0);
        let _ = std::fs::remove_file(&path);
    }

    /// Text offsets in 32 bits: exact for every chunk and place that packs, NULL apart; a column
    /// given an offset that does not pack keeps its rows as [`Key`]s, values unchanged.
    #[test]
    fn text_keys_pack() {
        for off in [
            0u64,
            1,
            4,
            (1 << 20) - 2,
            1 << 32,
            (7 << 32) | 12_345,
            (4095 << 32) | 999_999,
        ] {
            let v = Texts32::pack(off).unwrap();
            assert_ne!(v, Texts32::NULL);
            assert_eq!(Texts32::unpack(v), off);
        }
        for off in [
            (4095 << 32) | ((1 << 20) - 1),
            4096 << 32,
            1 << 20,
            (3 << 32) | (1 << 21),
        ] {
            assert_eq!(Texts32::pack(off), None, "{off:#x}");
        }
        let keys = [Key::Null, Key::Text(5 << 32 | 40), Key::Null, Key::Text(77)];
        let mut c = Col::Ints(Ints::I8(Vec::new()));
        for k in keys {
            c.push(k, 0);
        }
        assert!(matches!(c, Col::Texts(_)));
        let big = Key::Text(9000 << 32);
        c.push(big, 0);
        assert!(matches!(c, Col::Any(_)));
        let got: Vec<Key> = (0..c.len()).map(|i| c.get(i)).collect();
        let want: Vec<Key> = keys.iter().copied().chain([big]).collect();
        assert_eq!(format!("{got:?}"), format!("{want:?}"));
    }

    #[test]
    fn integer_keys_widen() {
        let mut v = Ints::I8(Vec::new());
        let xs = [
            0,
            -128,
            127,
            128,
            -129,
            i32::MAX as i64,
            i32::MIN as i64,
            1 << 40,
            i64::MIN,
            5,
        ];
        for (i, x) in xs.iter().enumerate() {
            v.push(*x);
            assert_eq!((0..=i).map(|j| v.get(j)).collect::<Vec<_>>(), xs[..=i]);
        }
        assert!(matches!(v, Ints::I64(_)));
        let path = temp("ints");
        let mut rng = Rng(11);
        let rows: Vec<[Sql; 5]> = (0..3000)
            .map(|i| {
                let a = match i {
                    0..=999 => rng.below(256) as i64 - 128,
                    1000..=1999 => rng.below(1 << 20) as i64 - (1 << 19),
                    _ => rng.next() as i64,
                };
                let c = if i < 2500 { i % 3 } else { -i * 1_000_000_000 };
                [
                    Sql::Text(format!("key{i:07}")),
                    Sql::Integer(a),
                    Sql::Text(text(&mut rng, 5)),
                    Sql::Integer(c),
                    Sql::Text(format!("{}", i % 7)),
                ]
            })
            .collect();
        write(&path, &rows, 0).unwrap();
        check(&path, &rows, 0);
        let _ = std::fs::remove_file(&path);
    }

    #[test]
    fn sqlite_can_change_the_file_afterwards() {
        let path = temp("change");
        let rows = rows(500, 9, 30_000);
        write(&path, &rows, 3).unwrap();
        let c = rusqlite::Connection::open(&path).unwrap();
        c.execute("UPDATE t SET b = 'changed' WHERE rowid % 3 = 0", [])
            .unwrap();
        c.execute(
            "INSERT INTO t (k, a, b, c, d) VALUES ('new', 1, 'x', 2, 'y')",
            [],
        )
        .unwrap();
        c.execute("DELETE FROM t WHERE rowid % 7 = 0", []).unwrap();
        let ok: String = c
            .query_row("PRAGMA integrity_check", [], |r| r.get(0))
            .unwrap();
        assert_eq!(ok, "ok");
        let n: i64 = c
            .query_row("SELECT count(*) FROM t WHERE b = 'changed'", [], |r| {
                r.get(0)
            })
            .unwrap();
        assert!(n > 100);
        drop(c);
        let _ = std::fs::remove_file(&path);
    }

    /// Indexed columns whose texts share long prefixes row after row (front-coded): names and
    /// ancestor paths as in a `.vis.db`, NULLs, empty texts, repeats, texts longer than a chunk.
    #[test]
    fn indexes_of_texts_with_long_shared_prefixes() {
        let path = temp("prefixes");
        for (n, seed) in [(3000, 1), (2001, 2)] {
            let mut rng = Rng(seed);
            let texts = paths(&mut rng, n);
            let rows: Vec<[Sql; 5]> = texts
                .iter()
                .enumerate()
                .map(|(i, t)| {
                    let t = String::from_utf8(t.clone()).unwrap();
                    let short: String = t.chars().take(300).collect();
                    let b = match rng.below(10) {
                        0 => Sql::Null,
                        1 => Sql::Text(String::new()),
                        2 => Sql::Text(format!("{}.{}", &short, rng.below(3))),
                        _ => Sql::Text(short.clone()),
                    };
                    let c = match rng.below(5) {
                        0 => Sql::Null,
                        1 => Sql::Integer(rng.below(5) as i64),
                        _ => Sql::Text(format!("{short}{}", rng.below(4))),
                    };
                    let d = match rng.below(20) {
                        0 => Sql::Null,
                        // A repeat of a text some rows back.
                        1 if i > 50 => Sql::Text(
                            String::from_utf8(texts[i - 1 - rng.below(50) as usize].clone())
                                .unwrap(),
                        ),
                        _ => Sql::Text(t.clone()),
                    };
                    [
                        Sql::Text(format!("NPU_0_0_{short}.{i}")),
                        Sql::Integer(rng.below(4) as i64),
                        b,
                        c,
                        d,
                    ]
                })
                .collect();
            write(&path, &rows, 2).unwrap();
            check(&path, &rows, 2);
            // A key twice: the error shows it whole (front-coded, it is two parts).
            let mut rows = rows;
            rows[n - 7][0] = rows[n - 8][0].clone();
            let Sql::Text(key) = &rows[n - 7][0] else {
                unreachable!()
            };
            let e = write(&path, &rows, 0).unwrap_err().to_string();
            assert!(e.contains(&format!("{key:?}")), "{e}");
        }
        let _ = std::fs::remove_file(&path);
    }

    /// Columns with far fewer stored texts than rows (each stored text sorted once, its rows
    /// after it): runs of a few texts, the same text stored again at other offsets once the
    /// column stopped looking repeats up by hash, NULLs and numbers among them.
    #[test]
    fn indexes_of_few_distinct_texts() {
        let path = temp("few");
        let mut rng = Rng(5);
        let parents = [
            "Module.layers.1.mlp",
            "Module.layers.1",
            "Module.layers.10.mlp",
            "Module.layers.1.mlp.act",
            "",
        ];
        let n = 30_000;
        let mut current = 0;
        let rows: Vec<[Sql; 5]> = (0..n)
            .map(|i| {
                if rng.below(20) == 0 {
                    current = rng.below(parents.len() as u64) as usize;
                }
                // `c` has no type: numbers stay numbers there (`b` is TEXT).
                let c = if i < 4200 {
                    Sql::Text(format!("distinct {i}"))
                } else {
                    match rng.below(40) {
                        0 => Sql::Null,
                        1 => Sql::Integer(rng.below(3) as i64),
                        _ => Sql::Text(parents[current].to_string()),
                    }
                };
                let b = match rng.below(30) {
                    0 => Sql::Null,
                    _ => Sql::Text(["NPU", "Bench"][rng.below(2) as usize].to_string()),
                };
                [
                    Sql::Text(format!("k{i}")),
                    Sql::Integer(rng.below(3) as i64),
                    b,
                    c,
                    Sql::Text(text(&mut rng, 12)),
                ]
            })
            .collect();
        write(&path, &rows, 0).unwrap();
        check(&path, &rows, 0);
        let _ = std::fs::remove_file(&path);
    }

    #[test]
    fn radix_sort_bits_is_stable_on_its_bits() {
        let mut rng = Rng(9);
        for bits in [1, 7, 11, 12, 33, 64, 96] {
            let keys: Vec<u128> = (0..5000u128)
                .map(|row| {
                    let k = (rng.next() as u128) << 64 | rng.next() as u128;
                    let k = k & ((1u128 << bits) - 1);
                    (k << 32) | row
                })
                .collect();
            let mut got = keys.clone();
            radix_sort_bits(&mut got, 32, 32 + bits);
            let mut want = keys;
            want.sort_unstable();
            assert!(got == want, "{bits} bits");
        }
    }

    #[test]
    fn a_duplicate_primary_key_is_an_error() {
        let mut rows = rows(50, 4, 10);
        rows[30][0] = rows[10][0].clone();
        let path = temp("dup");
        let e = write(&path, &rows, 0).unwrap_err();
        assert!(e.to_string().contains("UNIQUE constraint failed"), "{e}");
        let _ = std::fs::remove_file(&path);
    }

    #[test]
    fn bad_rows_and_schemas_are_errors() {
        let (tables, indexes, _) = schema();
        let mut w =
            Writer::new(std::sync::Mutex::new(Vec::new()), tables.clone(), indexes).unwrap();
        assert!(w.insert(0, &[Value::Null]).is_err());
        assert!(w.insert(5, &[Value::Null]).is_err());
        let bad = Index {
            name: "x".into(),
            table: 0,
            sql: String::new(),
            columns: vec![9],
        };
        assert!(Writer::new(std::sync::Mutex::new(Vec::new()), tables, vec![bad]).is_err());
    }

    /// Rows encoded elsewhere (`append_record`, as the CLI's formatting threads do) make the
    /// same file as the same rows inserted as values.
    #[test]
    fn pre_encoded_records_give_the_same_file() {
        let rows = rows(3000, 9, 70_000);
        let file = |encoded: bool| {
            let (tables, indexes, _) = schema();
            let mut w = Writer::new(std::sync::Mutex::new(Vec::new()), tables, indexes).unwrap();
            let mut rec = Vec::new();
            for r in &rows {
                let vals: Vec<Value> = r.iter().map(as_value).collect();
                if encoded {
                    rec.clear();
                    append_record(&vals, &mut rec);
                    w.insert_record(0, &rec).unwrap();
                } else {
                    w.insert(0, &vals).unwrap();
                }
            }
            w.finish().unwrap().into_inner().unwrap()
        };
        let (a, b) = (file(false), file(true));
        assert!(a.len() > 1 << 20);
        assert!(a == b);
    }

    /// A file past 1 GiB never uses SQLite's lock-byte page ([`LOCK_PAGE`], page 16,385 of 64
    /// KiB): table leaves, overflow chains and index pages skip it, and SQLite finds the file
    /// sound (a regression: the 16-rank benchmark's 2 GB db was "malformed", its b-tree pointing
    /// at that page).
    #[test]
    fn files_past_one_gib_skip_the_lock_page() {
        struct File(std::fs::File);
        impl Output for File {
            fn write_at(&self, offset: u64, data: &[u8]) -> io::Result<()> {
                std::os::unix::fs::FileExt::write_all_at(&self.0, data, offset)
            }
        }
        let (tables, indexes, _) = schema();
        let path = temp("past-1gib");
        let f = std::fs::File::create(&path).unwrap();
        let mut w = Writer::new(File(f), tables, indexes).unwrap();
        let big = "x".repeat(70_000);
        let n = 16_000;
        for i in 0..n {
            // Rows with an overflow chain of one page between runs of small rows.
            let x = Value::Int(i);
            w.insert(1, &[x, Value::Text(&big)]).unwrap();
            for j in 0..8 {
                let k = format!("k{i}.{j}");
                w.insert(
                    0,
                    &[
                        Value::Text(&k),
                        Value::Int(i * 8 + j),
                        Value::Text(&k),
                        Value::Null,
                        Value::Text(&k),
                    ],
                )
                .unwrap();
            }
        }
        drop(w.finish().unwrap());
        let len = std::fs::metadata(&path).unwrap().len();
        assert!(
            len > (LOCK_PAGE as u64 + 64) * PAGE_SIZE as u64,
            "{len} bytes"
        );
        let conn = rusqlite::Connection::open(&path).unwrap();
        let check: String = conn
            .query_row("PRAGMA integrity_check", [], |r| r.get(0))
            .unwrap();
        assert_eq!(check, "ok");
        let (rows, bytes): (i64, i64) = conn
            .query_row("SELECT count(*), sum(length(y)) FROM s", [], |r| {
                Ok((r.get(0)?, r.get(1)?))
            })
            .unwrap();
        assert_eq!((rows, bytes), (n, n * 70_000));
        let keys: i64 = conn
            .query_row("SELECT count(*) FROM t WHERE b > 'k1'", [], |r| r.get(0))
            .unwrap();
        assert!(keys > 0);
        drop(conn);
        let _ = std::fs::remove_file(&path);
    }

    /// Table leaves handed to the caller (`hand_runs`) and written by it, in any order and some
    /// not taken before `finish`, make the same file as leaves the writer writes itself.
    #[test]
    fn handed_runs_give_the_same_file() {
        struct Shared(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);
        impl Output for Shared {
            fn write_at(&self, offset: u64, data: &[u8]) -> io::Result<()> {
                self.0.write_at(offset, data)
            }
        }
        let rows = rows(3000, 9, 70_000);
        let file = |hand: bool| {
            let (tables, indexes, _) = schema();
            let buf = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
            let out = Shared(buf.clone());
            let mut w = Writer::new(Shared(buf.clone()), tables, indexes).unwrap();
            if hand {
                w.hand_runs();
            }
            let (mut runs, mut later, mut taken) = (Vec::new(), Vec::new(), 0);
            for (i, r) in rows.iter().enumerate() {
                let vals: Vec<Value> = r.iter().map(as_value).collect();
                w.insert(0, &vals).unwrap();
                if i % 700 == 699 {
                    w.take_runs(&mut runs);
                    taken += runs.len();
                    // Every other batch is written at once (buffers given back), the others
                    // only after `finish`; each batch backwards.
                    if i % 1400 == 699 {
                        later.append(&mut runs);
                    }
                    for (at, bytes) in runs.drain(..).rev() {
                        out.write_at(at, &bytes).unwrap();
                        w.give_back(bytes);
                    }
                }
            }
            w.finish().unwrap();
            for (at, bytes) in later.into_iter().rev() {
                out.write_at(at, &bytes).unwrap();
            }
            drop(out);
            let bytes = buf.lock().unwrap().clone();
            (bytes, taken)
        };
        let ((a, none), (b, taken)) = (file(false), file(true));
        assert_eq!(none, 0);
        assert!(taken >= 4, "{taken}");
        assert!(a.len() > 1 << 20);
        assert!(a == b);
    }

    /// Every integer width and the reals come back from a record as they went in.
    #[test]
    fn record_fields_decode() {
        let vals = [
            Value::Int(0),
            Value::Int(1),
            Value::Int(-1),
            Value::Int(300),
            Value::Int(-70_000),
            Value::Int(8_000_000),
            Value::Int(-3_000_000_000),
            Value::Int(1 << 50),
            Value::Int(i64::MIN),
            Value::Int(i64::MAX),
            Value::Real(-0.5),
            Value::Null,
            Value::Text("模块"),
            Value::Text(""),
        ];
        let mut rec = Vec::new();
        append_record(&vals, &mut rec);
        let mut fields = Vec::new();
        assert!(record_fields(&rec, &mut fields).is_some());
        assert_eq!(fields.len(), vals.len());
        for (v, f) in vals.iter().zip(&fields) {
            let got = field_value(&rec, *f).map(|x| match x {
                In::Null => Value::Null,
                In::Int(i) => Value::Int(i),
                In::Real(r) => Value::Real(r),
                In::Text(t) => Value::Text(std::str::from_utf8(t).unwrap()),
            });
            assert_eq!(got, Some(*v));
        }
    }

    /// A record that does not add up, has the wrong number of values or a blob where an index
    /// reads is an error (no panic), and the writer goes on with the next good row.
    #[test]
    fn malformed_records_are_errors() {
        let (tables, indexes, _) = schema();
        let mut w = Writer::new(std::sync::Mutex::new(Vec::new()), tables, indexes).unwrap();
        let mut good = Vec::new();
        let row = [
            Value::Text("k"),
            Value::Int(5),
            Value::Text("b"),
            Value::Null,
            Value::Text("d"),
        ];
        append_record(&row, &mut good);
        let mut bad: Vec<Vec<u8>> = vec![
            Vec::new(),
            vec![0x80],
            vec![0xff; 12],
            good[..good.len() - 1].to_vec(),
            [&good[..], b"x"].concat(),
            // Header length past the end.
            [&[200u8][..], &good[1..]].concat(),
            // Reserved serial type 10.
            vec![2, 10],
        ];
        let mut short = Vec::new();
        append_record(&row[..4], &mut short);
        bad.push(short);
        // A blob (serial type 14: 1 byte) in column b, which indexes read.
        let mut blob = good.clone();
        blob[3] = 14;
        bad.push(blob);
        for (i, b) in bad.iter().enumerate() {
            assert!(w.insert_record(0, b).is_err(), "bad record {i}");
        }
        assert!(w.insert_record(7, &good).is_err());
        w.insert_record(0, &good).unwrap();
        let bytes = w.finish().unwrap().into_inner().unwrap();
        let path = temp("malformed");
        std::fs::write(&path, bytes).unwrap();
        let c = rusqlite::Connection::open(&path).unwrap();
        let n: i64 = c
            .query_row("SELECT count(*) FROM t", [], |r| r.get(0))
            .unwrap();
        assert_eq!(n, 1);
        let _ = std::fs::remove_file(&path);
    }
}
