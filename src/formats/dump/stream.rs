//! Reading a rank folder as its files arrive: [`RankParser`], construct.json and dump.json in
//! chunks of any size, stack.json whole.

use super::validate::{find_sub, md5_find, ItemWarnings};
use super::{syntax, type_name, Entry, FileNames, RankDump};
use crate::base::error::{Error, ErrorKind, Place, Result, MAX_FILE_BYTES};
use crate::base::names::{NameId, Names};
use crate::formats::json::{LineBase, Reader, Store, SyntaxError, Val};
use crate::formats::pyfmt::py_str;
use std::collections::BTreeMap;
use std::sync::Arc;

/// A rank folder parsed as its files arrive: construct.json (whole), then dump.json in chunks of
/// any size, then stack.json (whole). dump.json is parsed entry by entry as the bytes come and
/// the parsed bytes are dropped, so the file is never held whole (the page reads a 2 GB
/// dump.json in slices; the CLI in 8 MB reads). Messages and their precedence are those of a
/// whole-file parse: dump.json's, then construct.json's, then stack.json's.
pub struct RankParser {
    rd: RankDump,
    construct_err: Option<Error>,
    /// construct.json, while it arrives in chunks.
    cons: Option<ConstructStream>,
    dump: DumpStream,
}

/// Where the dump.json parser is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum St {
    /// Before the opening '{'.
    Start,
    /// After the opening '{' (a key or '}').
    TopFirst,
    /// A top-level key is next.
    TopKey,
    /// After the `data` object (',' or '}').
    TopAfter,
    /// After `"data": {` (an entry or '}').
    DataFirst,
    /// An entry is next.
    DataKey,
    /// After the top-level object: only whitespace may follow.
    End,
}

struct DumpStream {
    /// Bytes not yet parsed (and the framework scan's lookahead), when the last chunk ended
    /// inside an entry. Empty while whole entries arrive: chunks are parsed in place.
    carry: Vec<u8>,
    /// Parse position in `carry`.
    at: usize,
    /// Absolute offset of the first held byte.
    base: usize,
    lines: LineBase,
    state: St,
    header: Vec<(String, Val, (usize, usize))>,
    data_err: Option<Error>,
    /// Per entry index, what checking it found (only entries with something to say): the
    /// first error stops the run, warnings are summed in entry order at the end.
    outcomes: BTreeMap<u32, std::result::Result<(String, usize), Error>>,
    fw: FwScan,
    /// Absolute offset up to which the framework scan has looked.
    fw_at: usize,
    done: bool,
    /// The entry name being read (one buffer for all).
    name: String,
    /// dump.json's size, and whether the arenas were sized from it.
    total: u64,
    projected: bool,
    /// stack.json's size: its values go into the same arenas after dump.json's.
    stack: u64,
}

/// The bytes a round holds, for messages: line and column are counted on from the last place
/// asked (entries are checked in file order), so locating many places costs one pass.
pub(super) struct Src<'a> {
    pub(super) buf: &'a [u8],
    /// Line and column at `buf[0]`.
    start: LineBase,
    cur: std::cell::Cell<(usize, LineBase)>,
}

impl<'a> Src<'a> {
    fn new(buf: &'a [u8], start: LineBase) -> Self {
        Src {
            buf,
            start,
            cur: std::cell::Cell::new((0, start)),
        }
    }

    /// 1-based line and column of `buf[off]` in the file.
    pub(super) fn lc(&self, off: usize) -> (usize, usize) {
        let (at, base) = self.cur.get();
        let off = off.min(self.buf.len());
        if off < at {
            return self.start.line_col(self.buf, off);
        }
        let mut b = base;
        b.advance(&self.buf[at..off]);
        self.cur.set((off, b));
        (b.line, b.col + 1)
    }
}

/// How far a step got.
enum Step {
    Next(St),
    /// The bytes end inside the step: wait for the next chunk.
    More,
}

/// A syntax error met in a step, unless the held bytes merely ended inside it: a reader fails
/// at most a few bytes past where the input stops (the longest token it looks ahead for is
/// `-Infinity`), so an error that close to the end waits for the next chunk.
fn step_err(file: &str, src: &Src, eof: bool, se: SyntaxError) -> Result<Step> {
    if !eof && se.offset + 16 >= src.buf.len() {
        return Ok(Step::More);
    }
    let (l, c) = src.lc(se.offset);
    Err(Error::new(
        ErrorKind::Syntax,
        file,
        Place::LineCol(l, c),
        format!("invalid JSON: {}", se.msg),
    ))
}

/// A construct.json parent as written: a name (None for null or ""), or another type.
#[derive(Clone, Copy)]
enum Parent {
    Name(Option<NameId>),
    Other(&'static str),
}

/// [`Parent`] in a word: a name id, [`P_NONE`], or [`P_OTHER`] + the index of the type's name
/// in [`OTHER_TYPES`] (name ids stay below: they count names of 4 GiB at most).
const P_NONE: u32 = u32::MAX;
const P_OTHER: u32 = u32::MAX - 8;
const OTHER_TYPES: [&str; 5] = ["a boolean", "a number", "a string", "a list", "an object"];

impl Parent {
    fn code(self) -> u32 {
        match self {
            Parent::Name(None) => P_NONE,
            Parent::Name(Some(id)) => id.0,
            Parent::Other(t) => {
                P_OTHER + OTHER_TYPES.iter().position(|x| *x == t).unwrap_or(0) as u32
            }
        }
    }
    fn of_code(c: u32) -> Parent {
        match c {
            P_NONE => Parent::Name(None),
            c if c >= P_OTHER => Parent::Other(
                OTHER_TYPES
                    .get((c - P_OTHER) as usize)
                    .copied()
                    .unwrap_or("a value"),
            ),
            c => Parent::Name(Some(NameId(c))),
        }
    }
}

/// A construct.json value as written: a parent ([`Parent::code`]), `[parent, micro_step]` (the
/// micro step in [`ConstructMembers::micro`]), or a list of another length.
#[derive(Clone, Copy)]
struct Member {
    id: NameId,
    parent: u32,
    kind: Kind,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Scalar,
    Pair,
    List,
}

/// construct.json's members as they are read (file order; a repeated key keeps its first
/// place and takes the last value, as a Python dict), before [`RankDump::construct_finish`].
/// 12 bytes a member (a quarter of the enum pairs they were, whose growth by doubling was most
/// of the parse's peak on the 80-layer NPU folder).
#[derive(Default)]
struct ConstructMembers {
    members: Vec<Member>,
    /// The micro step of each member, from the first `[parent, micro_step]` on (0 for others).
    micro: Vec<i64>,
    /// Position in `members` of each key (by name id), u32::MAX if none.
    pos: Vec<u32>,
    megatron: Option<Val>,
}

impl ConstructMembers {
    /// Member `key` with value `v` (in `store`).
    fn add(&mut self, names: &mut Names, f: &str, key: &str, v: Val, store: &Store) -> Result<()> {
        let too_many = || names_full(f);
        let parent_of = |names: &mut Names, v: Val| -> Result<Parent> {
            Ok(match v {
                Val::Null => Parent::Name(None),
                Val::Str(sr) => {
                    let s = store.str(sr);
                    // msprobe treats an empty parent like null (falsy).
                    Parent::Name(if s.is_empty() {
                        None
                    } else {
                        let id = names.intern(s).ok_or_else(too_many)?;
                        if id.0 >= P_OTHER {
                            return Err(too_many());
                        }
                        Some(id)
                    })
                }
                other => Parent::Other(type_name(other)),
            })
        };
        if key == "megatron_micro_step_number" {
            self.megatron = Some(v);
            // Kept in our own store only as a number (echoed as micro_steps = m + 1).
            if let Val::Float(_) | Val::Int(_) = v {
            } else {
                self.megatron = Some(Val::Int(0));
            }
        }
        let (parent, kind, micro) = match v {
            Val::List { .. } => {
                let l = store.list(v);
                if l.len() == 2 {
                    let micro = match l.get(1).unwrap_or(Val::Null) {
                        Val::Int(i) => i,
                        Val::Float(x) if x.fract() == 0.0 => x as i64,
                        _ => 0,
                    };
                    let p = parent_of(names, l.get(0).unwrap_or(Val::Null))?;
                    (p, Kind::Pair, micro)
                } else {
                    (Parent::Name(None), Kind::List, 0)
                }
            }
            v => (parent_of(names, v)?, Kind::Scalar, 0),
        };
        let id = names.intern(key).ok_or_else(too_many)?;
        if self.pos.len() <= id.0 as usize {
            self.pos.resize(id.0 as usize + 1, u32::MAX);
        }
        let m = Member {
            id,
            parent: parent.code(),
            kind,
        };
        let at = match self.pos[id.0 as usize] {
            u32::MAX => {
                self.pos[id.0 as usize] = self.members.len() as u32;
                self.members.push(m);
                self.members.len() - 1
            }
            at => {
                self.members[at as usize] = m;
                at as usize
            }
        };
        if kind == Kind::Pair && self.micro.is_empty() {
            self.micro = vec![0; self.members.len()];
        }
        if !self.micro.is_empty() {
            self.micro.resize(self.members.len(), 0);
            self.micro[at] = micro;
        }
        Ok(())
    }
}

/// Where the construct.json stream is ([`RankParser::construct_chunk`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
enum CSt {
    /// Before the opening '{'.
    #[default]
    Start,
    /// After the '{': a key or '}'.
    First,
    /// After a ',': a key.
    Next,
    /// After the closing '}'.
    Done,
    /// Not a well-formed object of members: the file is to be parsed whole, for its message.
    Whole,
}

/// construct.json read in chunks: the members parsed so far and the bytes of an unfinished one.
#[derive(Default)]
struct ConstructStream {
    state: CSt,
    carry: Vec<u8>,
    members: ConstructMembers,
    scratch: Store,
}

/// The length of the JSON member at the start of `b` (a key, ':', a value) up to the ',' or '}'
/// that ends it at depth 0: None if `b` ends first, Err(()) if its brackets do not nest.
fn member_len(b: &[u8]) -> std::result::Result<Option<usize>, ()> {
    let mut depth = 0usize;
    let mut i = 0;
    while let Some(&c) = b.get(i) {
        match c {
            b'"' => {
                // To the closing quote, past escapes.
                i += 1;
                loop {
                    match b.get(i) {
                        None => return Ok(None),
                        Some(b'"') => break,
                        Some(b'\\') => i += 2,
                        Some(_) => i += 1,
                    }
                }
            }
            b'{' | b'[' => depth += 1,
            b']' => depth = depth.checked_sub(1).ok_or(())?,
            b'}' if depth == 0 => return Ok(Some(i)),
            b'}' => depth -= 1,
            b',' if depth == 0 => return Ok(Some(i)),
            _ => {}
        }
        i += 1;
    }
    Ok(None)
}

/// The construct.json member at `r` (at its key's quote): its key and its value, in `scratch`,
/// emptied first. The whole-file parse and the chunks read a member alike.
fn construct_member(
    r: &mut Reader,
    scratch: &mut Store,
) -> std::result::Result<(String, Val), SyntaxError> {
    let key = r.read_str()?.to_owned();
    r.expect(b':')?;
    scratch.rewind(Store::default().mark());
    let v = r.value(scratch, 1)?;
    Ok((key, v))
}

/// Parses the members of construct.json that `buf` holds whole; returns how many bytes of `buf`
/// are done with (the rest starts an unfinished member).
fn construct_round(rd: &mut RankDump, cs: &mut ConstructStream, buf: &[u8]) -> usize {
    let f = rd.names.construct.clone();
    let mut at = 0;
    loop {
        let mut ws = Reader::new(buf);
        ws.pos = at;
        ws.skip_ws();
        at = ws.pos;
        let Some(&c) = buf.get(at) else {
            return at;
        };
        match cs.state {
            CSt::Start if c == b'{' => {
                at += 1;
                cs.state = CSt::First;
            }
            CSt::First if c == b'}' => {
                at += 1;
                cs.state = CSt::Done;
            }
            CSt::First | CSt::Next if c == b'"' => {
                let rest = buf.get(at..).unwrap_or(&[]);
                let len = match member_len(rest) {
                    Ok(Some(n)) => n,
                    Ok(None) => return at,
                    Err(()) => break,
                };
                let mut r = Reader::new(rest.get(..len).unwrap_or(&[]));
                let Ok((key, v)) = construct_member(&mut r, &mut cs.scratch) else {
                    break;
                };
                if r.end().is_err() {
                    break;
                }
                let names = Arc::make_mut(&mut rd.node_names);
                if cs.members.add(names, &f, &key, v, &cs.scratch).is_err() {
                    break;
                }
                at += len;
                cs.state = if buf.get(at) == Some(&b',') {
                    CSt::Next
                } else {
                    CSt::Done
                };
                at += 1;
            }
            _ => break,
        }
    }
    // Anything else: the whole file's parse says what is wrong, and where.
    *cs = ConstructStream {
        state: CSt::Whole,
        ..ConstructStream::default()
    };
    buf.len()
}

impl RankParser {
    /// `dump_bytes`, `stack_bytes`: the two files' sizes (together at most 4 GiB: the core's
    /// offsets are 32-bit; dump.json's size also sizes the arenas, see [`RankParser::dump_chunk`]).
    pub fn new(names: FileNames, dump_bytes: u64, stack_bytes: u64) -> Result<RankParser> {
        let dump_and_stack_bytes = dump_bytes + stack_bytes;
        if dump_and_stack_bytes > MAX_FILE_BYTES {
            return Err(Error::new(
                ErrorKind::Limit,
                &names.dump,
                Place::None,
                format!(
                    "dump.json and stack.json of one rank folder are {dump_and_stack_bytes} bytes together; \
                     probelens reads at most {MAX_FILE_BYTES} bytes (4 GiB) per rank folder"
                ),
            ));
        }
        let mut rd = RankDump::empty(names);
        crate::formats::keys::intern_known_keys(&mut rd.store);
        Ok(RankParser {
            rd,
            construct_err: None,
            cons: None,
            dump: DumpStream {
                carry: Vec::new(),
                at: 0,
                base: 0,
                lines: LineBase::default(),
                state: St::Start,
                header: Vec::new(),
                data_err: None,
                outcomes: BTreeMap::new(),
                fw: FwScan::default(),
                fw_at: 0,
                done: false,
                name: String::new(),
                total: dump_bytes,
                projected: false,
                stack: stack_bytes,
            },
        })
    }

    /// construct.json, whole. Its error (if any) is reported after dump.json's.
    pub fn construct(&mut self, buf: &[u8]) {
        self.cons = None;
        if let Err(e) = self.rd.parse_construct(buf) {
            self.construct_err = Some(e);
        }
    }

    /// The next bytes of construct.json, instead of [`RankParser::construct`]: its members are
    /// parsed as they complete, so the file is never held whole (a construct.json is about a
    /// quarter of its dump.json). Then [`RankParser::construct_end`].
    /// False once the file is known to need the whole-file parse (the rest of it need not be
    /// read in chunks).
    pub fn construct_chunk(&mut self, chunk: &[u8]) -> bool {
        let cs = self.cons.get_or_insert_with(ConstructStream::default);
        if cs.state == CSt::Whole {
            return false;
        }
        if cs.carry.is_empty() {
            let used = construct_round(&mut self.rd, cs, chunk);
            cs.carry.extend_from_slice(chunk.get(used..).unwrap_or(&[]));
        } else {
            let mut carry = std::mem::take(&mut cs.carry);
            carry.extend_from_slice(chunk);
            let used = construct_round(&mut self.rd, cs, &carry);
            carry.drain(..used.min(carry.len()));
            cs.carry = carry;
        }
        cs.state != CSt::Whole
    }

    /// construct.json has ended. False if it was not a well-formed object (a syntax error,
    /// another type, a member the names cannot hold, or it ended early): then it is to be given
    /// whole to [`RankParser::construct`], whose message says what and where.
    pub fn construct_end(&mut self) -> bool {
        let Some(cs) = self.cons.take() else {
            return false;
        };
        if cs.state != CSt::Done || !cs.carry.is_empty() {
            return false;
        }
        drop(cs.scratch);
        if let Err(e) = self.rd.construct_finish(cs.members) {
            self.construct_err = Some(e);
        }
        true
    }

    /// The next bytes of dump.json. After the first chunk, the arenas are sized for the whole
    /// file from what that chunk needed (msprobe's dumps are uniform), so they do not grow by
    /// doubling: a doubling needs the old and the new arena at once, which is what a 2 GB dump
    /// cannot afford in a page's 4 GiB. Past the estimate they grow by an eighth at a time.
    pub fn dump_chunk(&mut self, chunk: &[u8]) -> Result<()> {
        if self.dump.base == 0 && self.dump.carry.is_empty() && self.dump.at == 0 {
            // Reserve from the file's first chunk (msprobe writes indent=1 JSON: about one key
            // per 30 bytes); a whole file given at once reserves once. Untouched capacity
            // costs no resident memory, and `finish` gives back what was not used.
            let st = &mut self.rd.store;
            // Values: one per object member (about one per 30 bytes) and list element.
            st.vals.reserve(chunk.len() / 22);
            st.text.reserve(chunk.len() / 6);
        }
        if self.dump.carry.is_empty() {
            // Parse in place; keep only what is left.
            let keep = self.rd.dump_round(&mut self.dump, chunk, 0, false)?;
            self.dump.carry.extend_from_slice(&chunk[keep.0..]);
            self.dump.at = keep.1 - keep.0;
        } else {
            let mut carry = std::mem::take(&mut self.dump.carry);
            carry.extend_from_slice(chunk);
            let at = self.dump.at;
            let keep = self.rd.dump_round(&mut self.dump, &carry, at, false)?;
            carry.drain(..keep.0);
            self.dump.carry = carry;
            self.dump.at = keep.1 - keep.0;
        }
        let d = &mut self.dump;
        if !d.projected && d.base > 0 && d.total > 2 * d.base as u64 {
            d.projected = true;
            let scale = d.total as f64 / d.base as f64 * 1.02;
            let st = &mut self.rd.store;
            // What an arena holding `len` now needs for the whole file, beyond `len`.
            let more = |len: usize| ((len as f64 * scale) as usize + 4096).saturating_sub(len);
            // And room for stack.json's values (at most a word per 16 bytes; its text is most of
            // it): parsed after dump.json into full arenas, they moved both, and the copy of the
            // values arena was the parse's peak (the 80-layer NPU folder: 24 MB for a 2 MB file).
            let stack = usize::try_from(d.stack).unwrap_or(usize::MAX);
            st.vals
                .reserve_exact(more(st.vals.len()).saturating_add(stack / 16));
            st.text
                .reserve_exact(more(st.text.len()).saturating_add(stack));
        }
        Ok(())
    }

    /// dump.json has ended: checks what needed the whole file.
    pub fn dump_end(&mut self) -> Result<()> {
        let carry = std::mem::take(&mut self.dump.carry);
        let at = self.dump.at;
        self.rd.dump_round(&mut self.dump, &carry, at, true)?;
        drop(carry);
        self.rd.dump_finish(&mut self.dump)?;
        match self.construct_err.take() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// stack.json, whole.
    pub fn stack(&mut self, buf: &[u8]) -> Result<()> {
        self.rd.parse_stack(buf)
    }

    /// The parsed rank folder.
    pub fn finish(mut self) -> RankDump {
        // The arenas were reserved from the file size; give back what the estimate overshot
        // (the dump is kept for the whole run, and in the page for the whole session).
        let rd = &mut self.rd;
        rd.store.vals.shrink_to_fit();
        rd.store.text.shrink_to_fit();
        // So were the names and the tables by name, which grew by doubling. The names were
        // shrunk after construct.json, before dump.json's entries added a few: that doubled
        // their buffer again (the 80-layer pair: 10.2 and 7.6 MB for 5.1 and 3.8 MB of names).
        Arc::make_mut(&mut rd.node_names).shrink_to_fit();
        rd.entries.shrink_to_fit();
        rd.entry_pos.shrink_to_fit();
        rd.construct.shrink_to_fit();
        rd.construct_pos.shrink_to_fit();
        rd.construct_micro.shrink_to_fit();
        self.rd
    }
}

/// A rank's interned names would pass 4 GiB (their ids and offsets are 32-bit).
fn names_full(file: &str) -> Error {
    Error::new(
        ErrorKind::Limit,
        file,
        Place::None,
        "more names than probelens can hold (4 GiB of names)",
    )
}

/// An object member's value and what follows it: `more` after a ',', `last` after the '}'.
fn member(
    r: &mut Reader,
    store: &mut Store,
    depth: usize,
    more: St,
    last: St,
) -> std::result::Result<(Val, St), SyntaxError> {
    let v = r.value(store, depth)?;
    Ok((v, if r.comma_or_close(b'}')? { more } else { last }))
}

/// Grows the arenas by an eighth before they are full (not by doubling inside a value).
fn keep_room(st: &mut Store) {
    const MIN: usize = 1 << 12;
    // What to add to an arena of `len` in `cap`: nothing while `MIN` is free.
    let more = |len: usize, cap: usize| if cap - len < MIN { len / 8 + MIN } else { 0 };
    st.vals
        .reserve_exact(more(st.vals.len(), st.vals.capacity()));
    st.text
        .reserve_exact(more(st.text.len(), st.text.capacity()));
}

/// `detect_framework_by_dump_json`'s text scan, over a stream: the first line whose first
/// `"type":` is followed (after blanks) by `"mindspore` or `"torch`.
#[derive(Debug, Default)]
struct FwScan {
    /// Decided: the framework, or None when the file ended without one.
    found: Option<Option<&'static str>>,
    /// The current line's first `"type":` was seen (and was neither): skip to the next line.
    line_done: bool,
}

impl FwScan {
    /// Scans `buf[from..]`; returns how far it got (it stops where it needs bytes it has not
    /// got, unless `eof`).
    fn scan(&mut self, buf: &[u8], from: usize, eof: bool) -> usize {
        const PAT: &[u8] = b"\"type\":";
        let mut i = from;
        while self.found.is_none() && i < buf.len() {
            let rest = &buf[i..];
            let nl = rest.iter().position(|&b| b == b'\n');
            let line = &rest[..nl.unwrap_or(rest.len())];
            if self.line_done {
                match nl {
                    Some(n) => {
                        i += n + 1;
                        self.line_done = false;
                        continue;
                    }
                    None => return buf.len(),
                }
            }
            match find_sub(line, PAT) {
                Some(p) => {
                    let after = &line[p + PAT.len()..];
                    let ws = after.iter().take_while(|b| b.is_ascii_whitespace()).count();
                    let after = &after[ws..];
                    // The longest prefix to tell is `"mindspore` (10 bytes).
                    if after.len() < 10 && nl.is_none() && !eof {
                        return i + p;
                    }
                    if after.starts_with(b"\"mindspore") {
                        self.found = Some(Some("mindspore"));
                    } else if after.starts_with(b"\"torch") {
                        self.found = Some(Some("pytorch"));
                    } else {
                        self.line_done = true;
                        i += p + PAT.len();
                    }
                }
                None => match nl {
                    Some(n) => i += n + 1,
                    None if eof => i = buf.len(),
                    // A `"type":` may straddle the chunk's end.
                    None => return buf.len().saturating_sub(PAT.len() - 1).max(i),
                },
            }
        }
        if eof && self.found.is_none() {
            self.found = Some(None);
        }
        if self.found.is_some() {
            buf.len()
        } else {
            i
        }
    }
}

impl RankDump {
    /// Parses what it can of `buf[at..]` (held bytes: `buf[0]` is at `st.base`). Returns
    /// (first byte to keep, parse position): everything before the first is done with.
    fn dump_round(
        &mut self,
        st: &mut DumpStream,
        buf: &[u8],
        at: usize,
        eof: bool,
    ) -> Result<(usize, usize)> {
        let file = self.names.dump.clone();
        let f = file.as_str();
        let mut r = if st.base == 0 && at == 0 {
            Reader::new(buf)
        } else {
            Reader::at(buf, at)
        };
        let src = Src::new(buf, st.lines);
        let fail = |se: SyntaxError| step_err(f, &src, eof, se);
        let here = |r: &Reader, msg: &str| SyntaxError {
            offset: r.pos,
            msg: msg.into(),
        };
        while !st.done {
            let step_at = r.pos;
            let mark = self.store.mark();
            let step: Result<Step> = match st.state {
                St::Start => match r.peek() {
                    None if !eof => Ok(Step::More),
                    None => {
                        return Err(Error::new(
                            ErrorKind::Syntax,
                            f,
                            Place::LineCol(1, 1),
                            "the file is empty, expected a JSON object",
                        ))
                    }
                    Some(b'{') => {
                        r.pos += 1;
                        Ok(Step::Next(St::TopFirst))
                    }
                    Some(_) if !eof => Ok(Step::More),
                    Some(_) => {
                        // Valid JSON of another type is a schema error; anything else a
                        // syntax error.
                        let at = r.pos;
                        let mut scratch = Store::default();
                        let v = match r.value(&mut scratch, 0).and_then(|v| r.end().map(|_| v)) {
                            Ok(v) => v,
                            Err(se) => return fail(se).map(|_| (0, 0)),
                        };
                        return Err(Error::new(
                            ErrorKind::Schema,
                            f,
                            {
                                let (l, c) = src.lc(at);
                                Place::LineCol(l, c)
                            },
                            format!(
                                "expected a JSON object with \"task\" and \"data\" at the top, found {}",
                                type_name(v)
                            ),
                        ));
                    }
                },
                St::TopFirst => match r.peek() {
                    None if !eof => Ok(Step::More),
                    Some(b'}') => {
                        r.pos += 1;
                        Ok(Step::Next(St::End))
                    }
                    _ => Ok(Step::Next(St::TopKey)),
                },
                St::TopKey => self.top_member(st, &mut r, &src, eof),
                St::TopAfter => match r.comma_or_close(b'}') {
                    Ok(true) => Ok(Step::Next(St::TopKey)),
                    Ok(false) => Ok(Step::Next(St::End)),
                    Err(se) => fail(se),
                },
                St::DataFirst => match r.peek() {
                    None if !eof => Ok(Step::More),
                    Some(b'}') => {
                        r.pos += 1;
                        Ok(Step::Next(St::TopAfter))
                    }
                    _ => Ok(Step::Next(St::DataKey)),
                },
                St::DataKey => {
                    keep_room(&mut self.store);
                    if r.peek() != Some(b'"') {
                        fail(here(&r, "expected a string key (an entry name)"))
                    } else {
                        self.data_entry(st, &mut r, &src, eof)
                    }
                }
                St::End => match r.peek() {
                    None if eof => {
                        st.done = true;
                        Ok(Step::Next(St::End))
                    }
                    None => Ok(Step::More),
                    Some(_) => match r.end() {
                        Ok(()) => Ok(Step::Next(St::End)),
                        Err(se) => fail(se),
                    },
                },
            };
            match step? {
                Step::Next(s) => st.state = s,
                Step::More => {
                    self.store.rewind(mark);
                    r.pos = step_at;
                    break;
                }
            }
        }
        // The framework scan sees every byte once, before it is dropped.
        let mut keep = r.pos;
        if st.fw.found.is_none() {
            let from = st.fw_at.saturating_sub(st.base);
            let got = st.fw.scan(buf, from, eof);
            st.fw_at = st.base + got;
            keep = keep.min(got);
        }
        st.lines.advance(&buf[..keep]);
        st.base += keep;
        Ok((keep, r.pos))
    }

    /// `"key": value` at the top of dump.json, then ',' or '}'.
    fn top_member(
        &mut self,
        st: &mut DumpStream,
        r: &mut Reader,
        src: &Src,
        eof: bool,
    ) -> Result<Step> {
        let f = self.names.dump.clone();
        let f = f.as_str();
        let syn = |se: SyntaxError| step_err(f, src, eof, se);
        if r.peek() != Some(b'"') {
            return syn(SyntaxError {
                offset: r.pos,
                msg: "expected a string key".into(),
            });
        }
        let key = match r.read_str() {
            Ok(k) => k.to_owned(),
            Err(se) => return syn(se),
        };
        if let Err(se) = r.expect(b':') {
            return syn(se);
        }
        r.skip_ws();
        let at = r.pos;
        if key == "data" {
            if r.peek() == Some(b'{') {
                r.pos += 1;
                self.has_data_key = true;
                self.clear_entries();
                st.outcomes.clear();
                self.data_is_object = true;
                st.data_err = None;
                return Ok(Step::Next(St::DataFirst));
            }
            if r.peek().is_none() && !eof {
                return Ok(Step::More);
            }
            let (v, next) = match member(r, &mut self.store, 1, St::TopKey, St::End) {
                Ok(x) => x,
                Err(se) => return syn(se),
            };
            self.has_data_key = true;
            self.clear_entries();
            st.outcomes.clear();
            self.data_is_object = false;
            st.data_err = Some(Error::schema_at(
                f,
                "data",
                src.lc(at),
                format!(
                    "expected an object mapping node names to entries, found {}",
                    type_name(v)
                ),
            ));
            return Ok(Step::Next(next));
        }
        let (v, next) = match member(r, &mut self.store, 1, St::TopKey, St::End) {
            Ok(x) => x,
            Err(se) => return syn(se),
        };
        let as_s = |v: Val, store: &Store| match v {
            Val::Null => None,
            _ => Some(py_str(store, v)),
        };
        if matches!(
            key.as_str(),
            "task" | "level" | "framework" | "dump_data_dir"
        ) {
            st.header.retain(|(k, _, _)| *k != key);
            st.header.push((key.clone(), v, src.lc(at)));
        }
        match key.as_str() {
            "task" => self.task = as_s(v, &self.store),
            "level" => self.level = as_s(v, &self.store),
            "framework" => self.framework_key = as_s(v, &self.store),
            "dump_data_dir" => self.dump_data_dir = as_s(v, &self.store),
            _ => {}
        }
        Ok(Step::Next(next))
    }

    /// One `"name": {...}` of `data`, then ',' or '}'; checked while its bytes are at hand.
    fn data_entry(
        &mut self,
        st: &mut DumpStream,
        r: &mut Reader,
        src: &Src,
        eof: bool,
    ) -> Result<Step> {
        let f = self.names.dump.clone();
        let f = f.as_str();
        let syn = |se: SyntaxError| step_err(f, src, eof, se);
        let mut name = std::mem::take(&mut st.name);
        name.clear();
        match r.read_str() {
            Ok(k) => name.push_str(k),
            Err(se) => return syn(se),
        };
        st.name = name;
        let name = st.name.as_str();
        if let Err(se) = r.expect(b':') {
            return syn(se);
        }
        r.skip_ws();
        let at = r.pos;
        let (value, next) = match member(r, &mut self.store, 2, St::DataKey, St::TopAfter) {
            Ok(x) => x,
            Err(se) => return syn(se),
        };
        let overflow = crate::formats::overflow::entry_scene(&self.store, name, value);
        let outcome = self.validate_entry(name, value, src, at);
        let Some(id) = Arc::make_mut(&mut self.node_names).intern(name) else {
            return Err(names_full(f));
        };
        if self.entry_pos.len() <= id.0 as usize {
            self.entry_pos.resize(id.0 as usize + 1, u32::MAX);
        }
        let i = match self.entry_pos[id.0 as usize] {
            u32::MAX => {
                let i = self.entries.len() as u32;
                self.entry_pos[id.0 as usize] = i;
                let value = self.store.keep(value);
                self.entries.push(Entry {
                    name: id,
                    value,
                    overflow,
                });
                i
            }
            i => {
                let value = self.store.keep(value);
                if let Some(e) = self.entries.get_mut(i as usize) {
                    e.value = value;
                    e.overflow = overflow;
                }
                i
            }
        };
        match outcome {
            Ok(None) => {
                st.outcomes.remove(&i);
            }
            Ok(Some(w)) => {
                st.outcomes.insert(i, Ok(w));
            }
            Err(e) => {
                st.outcomes.insert(i, Err(e));
            }
        }
        Ok(Step::Next(next))
    }

    /// The checks that wait for the end of dump.json (Python keeps the last of duplicate keys).
    fn dump_finish(&mut self, st: &mut DumpStream) -> Result<()> {
        let file = self.names.dump.clone();
        let f = file.as_str();
        if let Some(err) = st.data_err.take() {
            return Err(err);
        }
        for (key, v, at) in &st.header {
            if !matches!(v, Val::Str(_) | Val::Null) {
                let what = match key.as_str() {
                    "task" => "a string such as \"statistics\"",
                    "level" => "a string such as \"mix\"",
                    "framework" => "a string such as \"pytorch\"",
                    _ => "a path (string) or null",
                };
                return Err(Error::schema_at(
                    f,
                    key.as_str(),
                    *at,
                    format!("expected {what}, found {}", type_name(*v)),
                ));
            }
        }
        for (_, outcome) in std::mem::take(&mut st.outcomes) {
            let (first, count) = outcome?;
            let w = self.item_warnings.get_or_insert_with(ItemWarnings::default);
            if w.first.is_none() {
                w.first = Some(first);
            }
            w.count += count;
        }
        self.has_md5 = self
            .entries
            .iter()
            .any(|e| md5_find(&self.store, self.store.val(e.value)));
        if let Some(d) = self.item_warnings.take() {
            self.diagnostics.push(d.into_diagnostic(f));
        }
        self.framework = match self.framework_key.as_deref() {
            Some("pytorch") => Some("pytorch"),
            Some("mindspore") => Some("mindspore"),
            _ => st.fw.found.flatten(),
        };
        Ok(())
    }

    /// construct.json: `{child: parent}` (Megatron: `{child: [parent, micro_step]}` and a
    /// `megatron_micro_step_number` key). Read member by member straight into the interned
    /// names; what a value means waits for the end of the file (the Megatron key may come last),
    /// duplicate keys keep their first position and last value (a Python dict).
    fn parse_construct(&mut self, buf: &[u8]) -> Result<()> {
        let f = self.names.construct.clone();
        let f = f.as_str();
        let syn = |se: SyntaxError| syntax(f, buf, se);
        let mut r = Reader::new(buf);
        let mut scratch = Store::default();
        if r.peek() != Some(b'{') {
            let v = r.value(&mut scratch, 0).map_err(syn)?;
            r.end().map_err(syn)?;
            return Err(Error::schema(
                f,
                "$",
                format!(
                    "expected a JSON object mapping node names to parent names, found {}",
                    type_name(v)
                ),
            ));
        }
        r.pos += 1;
        let mut c = ConstructMembers::default();
        if r.peek() == Some(b'}') {
            r.pos += 1;
        } else {
            loop {
                if r.peek() != Some(b'"') {
                    let here = match buf.get(r.pos) {
                        None => "end of file".to_string(),
                        Some(b) if b.is_ascii_graphic() => format!("'{}'", *b as char),
                        Some(b) => format!("byte 0x{b:02x}"),
                    };
                    return Err(syn(SyntaxError {
                        offset: r.pos,
                        msg: format!("expected a string key, found {here}"),
                    }));
                }
                let (key, v) = construct_member(&mut r, &mut scratch).map_err(syn)?;
                c.add(Arc::make_mut(&mut self.node_names), f, &key, v, &scratch)?;
                if !r.comma_or_close(b'}').map_err(syn)? {
                    break;
                }
            }
        }
        r.end().map_err(syn)?;
        drop(scratch);
        self.construct_finish(c)
    }

    /// The members of construct.json, read, become the construct table.
    fn construct_finish(&mut self, c: ConstructMembers) -> Result<()> {
        let f = self.names.construct.clone();
        let f = f.as_str();
        let names = Arc::make_mut(&mut self.node_names);
        let ConstructMembers {
            members,
            micro: micros,
            pos,
            megatron,
        } = c;
        let path = |names: &Names, id: NameId| {
            let mut p = String::from("$[");
            crate::formats::pyfmt::json_str(names.str(id), &mut p);
            p.push(']');
            p
        };
        let name_of = |names: &Names, id: NameId, p: Parent| -> Result<Option<NameId>> {
            match p {
                Parent::Name(n) => Ok(n),
                Parent::Other(t) => Err(Error::schema(
                    f,
                    path(names, id),
                    format!("expected a parent node name (string) or null, found {t}"),
                )),
            }
        };
        let is_megatron = megatron.is_some();
        let skip = names.get("megatron_micro_step_number");
        drop(pos);
        let mut cpos = vec![u32::MAX; names.len()];
        self.construct.reserve_exact(members.len());
        if is_megatron {
            self.construct_micro.reserve_exact(members.len());
        }
        for (i, m) in members.into_iter().enumerate() {
            let id = m.id;
            if is_megatron && Some(id) == skip {
                continue;
            }
            let p = Parent::of_code(m.parent);
            let (parent, micro) = match (m.kind, is_megatron) {
                (Kind::Pair, true) => (name_of(names, id, p)?, micros.get(i).copied().unwrap_or(0)),
                (Kind::List, true) => {
                    return Err(Error::schema(
                        f,
                        format!("$[\"{}\"]", names.str(id)),
                        "expected [parent, micro_step] (a list of two values)",
                    ))
                }
                (Kind::Scalar, _) => (name_of(names, id, p)?, 0),
                (Kind::Pair | Kind::List, false) => {
                    return Err(Error::schema(
                        f,
                        path(names, id),
                        "expected a parent node name (string) or null, found a list",
                    ))
                }
            };
            cpos[id.0 as usize] = self.construct.len() as u32;
            self.construct.push((id, parent));
            if is_megatron {
                self.construct_micro.push(micro);
            }
        }
        self.construct_pos = cpos;
        self.micro_step_number = megatron;
        Ok(())
    }

    fn parse_stack(&mut self, buf: &[u8]) -> Result<()> {
        let f = self.names.stack.clone();
        let f = f.as_str();
        let mut r = Reader::new(buf);
        // Parse into our store so stack values can be echoed without copies.
        let v = r
            .value(&mut self.store, 0)
            .map_err(|se| syntax(f, buf, se))?;
        r.end().map_err(|se| syntax(f, buf, se))?;
        if !matches!(v, Val::Obj { .. }) {
            return Err(Error::schema(
                f,
                "$",
                format!(
                    "the outermost layer of stack.json should be an object, found {}",
                    type_name(v)
                ),
            ));
        }
        let pairs: Vec<_> = self.store.obj(v).to_vec();
        self.stack_raw_empty = pairs.is_empty();
        let too_big = || {
            Error::new(
                ErrorKind::Limit,
                f,
                Place::None,
                "stack.json's names pass 4 GiB, more than probelens can index",
            )
        };
        for (k, val) in &pairs {
            if !self.stack_raw.insert(self.store.key(*k), *val) {
                return Err(too_big());
            }
        }
        let new_format = self
            .stack_raw
            .get("0")
            .is_some_and(|v| crate::formats::keys::truthy(&self.store, v));
        if !new_format {
            self.stack_by_name = self.stack_raw.clone();
            return Ok(());
        }
        for (_, val) in pairs {
            let l = self.store.list(val);
            if !matches!(val, Val::List { .. }) || l.len() != 2 {
                continue;
            }
            let (Some(apis), Some(stack)) = (l.get(0), l.get(1)) else {
                continue;
            };
            if !matches!(apis, Val::List { .. }) {
                continue;
            }
            for api in self.store.list(apis).to_vec() {
                // Names are str in practice; others are keyed by their text.
                let name = py_str(&self.store, api);
                if !self.stack_by_name.insert(&name, stack) {
                    return Err(too_big());
                }
            }
        }
        self.stack_by_name.shrink_to_fit();
        Ok(())
    }
}
