//! A small JSON reader over bytes, built for msprobe's files.
//!
//! It accepts what Python's `json` module writes and reads: the bare tokens `NaN`, `Infinity` and
//! `-Infinity`, integers of any size, and duplicate keys (the last value wins, at the first key's
//! position, like a Python dict). Values land in a [`Store`]: a compact arena of 16-byte [`Val`]s,
//! strings in one byte buffer, keys interned. Nothing here allocates per value beyond the arena,
//! and nesting is bounded by [`MAX_DEPTH`], so no input recurses without bound.
//!
//! Errors carry the byte offset; [`line_col`] turns it into a line and column for messages.

use crate::HashMap;

/// Deepest nesting accepted (msprobe's own files nest a handful of levels).
pub const MAX_DEPTH: usize = 512;

/// A JSON value inside a [`Store`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Val {
    Null,
    Bool(bool),
    Int(i64),
    /// An integer literal too big for `i64`; its digits live in the string buffer.
    BigInt(StrRef),
    Float(f64),
    Str(StrRef),
    /// `len` values at `vals[start..]`.
    List {
        start: u32,
        len: u32,
    },
    /// `len` (key, value) pairs at `pairs[start..]`.
    Obj {
        start: u32,
        len: u32,
    },
}

/// A string in [`Store::text`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct StrRef {
    pub off: u32,
    pub len: u32,
}

/// An interned object key.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct KeyId(pub u32);

/// Arena of parsed values.
#[derive(Default, Debug, Clone)]
pub struct Store {
    pub vals: Vec<Val>,
    pub pairs: Vec<(KeyId, Val)>,
    pub text: String,
    keys: Vec<Box<str>>,
    key_ids: HashMap<Box<str>, KeyId>,
}

impl Store {
    pub fn str(&self, r: StrRef) -> &str {
        self.text
            .get(r.off as usize..(r.off + r.len) as usize)
            .unwrap_or("")
    }
    pub fn push_str(&mut self, s: &str) -> StrRef {
        let off = self.text.len() as u32;
        self.text.push_str(s);
        StrRef {
            off,
            len: s.len() as u32,
        }
    }
    pub fn key(&self, k: KeyId) -> &str {
        self.keys.get(k.0 as usize).map(|s| &**s).unwrap_or("")
    }
    pub fn intern_key(&mut self, s: &str) -> KeyId {
        if let Some(k) = self.key_ids.get(s) {
            return *k;
        }
        let k = KeyId(self.keys.len() as u32);
        self.keys.push(s.into());
        self.key_ids.insert(s.into(), k);
        k
    }
    pub fn find_key(&self, s: &str) -> Option<KeyId> {
        self.key_ids.get(s).copied()
    }
    pub fn list(&self, v: Val) -> &[Val] {
        match v {
            Val::List { start, len } => self
                .vals
                .get(start as usize..(start + len) as usize)
                .unwrap_or(&[]),
            _ => &[],
        }
    }
    pub fn obj(&self, v: Val) -> &[(KeyId, Val)] {
        match v {
            Val::Obj { start, len } => self
                .pairs
                .get(start as usize..(start + len) as usize)
                .unwrap_or(&[]),
            _ => &[],
        }
    }
    /// Value of `key` in object `v` (None if `v` is not an object or has no such key).
    pub fn get(&self, v: Val, key: &str) -> Option<Val> {
        let k = self.find_key(key)?;
        self.obj(v).iter().find(|(kk, _)| *kk == k).map(|(_, v)| *v)
    }
    pub fn as_str(&self, v: Val) -> Option<&str> {
        match v {
            Val::Str(r) => Some(self.str(r)),
            _ => None,
        }
    }
    /// The arenas' lengths now.
    pub fn mark(&self) -> Mark {
        Mark {
            vals: self.vals.len(),
            pairs: self.pairs.len(),
            text: self.text.len(),
        }
    }
    /// Forgets every value added since `m` (interned keys stay; they are harmless).
    pub fn rewind(&mut self, m: Mark) {
        self.vals.truncate(m.vals);
        self.pairs.truncate(m.pairs);
        self.text.truncate(m.text);
    }
    pub fn new_list(&mut self, items: &[Val]) -> Val {
        let start = self.vals.len() as u32;
        self.vals.extend_from_slice(items);
        Val::List {
            start,
            len: items.len() as u32,
        }
    }
    pub fn new_obj(&mut self, items: &[(KeyId, Val)]) -> Val {
        let start = self.pairs.len() as u32;
        self.pairs.extend_from_slice(items);
        Val::Obj {
            start,
            len: items.len() as u32,
        }
    }
}

/// A syntax error at a byte offset.
#[derive(Debug, Clone, PartialEq)]
pub struct SyntaxError {
    pub offset: usize,
    pub msg: String,
}

/// 1-based line and column (in characters) of byte `offset` in `buf`.
pub fn line_col(buf: &[u8], offset: usize) -> (usize, usize) {
    let end = offset.min(buf.len());
    let before = &buf[..end];
    let line = before.iter().filter(|&&b| b == b'\n').count() + 1;
    let line_start = before
        .iter()
        .rposition(|&b| b == b'\n')
        .map(|p| p + 1)
        .unwrap_or(0);
    let col = String::from_utf8_lossy(&before[line_start..])
        .chars()
        .count()
        + 1;
    (line, col)
}

/// Where the bytes a streaming parser still holds begin, for messages: a file read in chunks
/// drops what it has parsed, so line and column count on from here.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LineBase {
    /// 1-based line of the first held byte.
    pub line: usize,
    /// Characters before the first held byte on its line.
    pub col: usize,
}

impl Default for LineBase {
    fn default() -> Self {
        LineBase { line: 1, col: 0 }
    }
}

impl LineBase {
    /// 1-based line and column of byte `offset` of `held` (the bytes from this base on); the
    /// same as [`line_col`] over the whole file.
    pub fn line_col(&self, held: &[u8], offset: usize) -> (usize, usize) {
        let (l, c) = line_col(held, offset);
        if l == 1 {
            (self.line, self.col + c)
        } else {
            (self.line + l - 1, c)
        }
    }

    /// Moves the base past `dropped`, the bytes that are no longer held.
    pub fn advance(&mut self, dropped: &[u8]) {
        // A character is any byte that does not continue a UTF-8 sequence (what
        // `from_utf8_lossy(..).chars().count()` gives for valid UTF-8).
        let chars = |b: &[u8]| b.iter().filter(|&&x| x & 0xC0 != 0x80).count();
        match dropped.iter().rposition(|&b| b == b'\n') {
            Some(p) => {
                self.line += dropped.iter().filter(|&&b| b == b'\n').count();
                self.col = chars(&dropped[p + 1..]);
            }
            None => self.col += chars(dropped),
        }
    }
}

/// The lengths of a [`Store`]'s arenas, to undo a value that was only partly read.
#[derive(Debug, Clone, Copy)]
pub struct Mark {
    vals: usize,
    pairs: usize,
    text: usize,
}

const ONES: u64 = 0x0101_0101_0101_0101;
const HIGHS: u64 = 0x8080_8080_8080_8080;

/// The high bit of each byte of `w` that ends a plain string run: '"', '\\' or a control
/// character (< 0x20). Only the lowest flagged byte is exact (a borrow may flag bytes above it),
/// which is all the callers use. Bytes >= 0x80 are never flagged.
#[inline(always)]
fn string_stops(w: u64) -> u64 {
    let q = w ^ (ONES * b'"' as u64);
    let b = w ^ (ONES * b'\\' as u64);
    (q.wrapping_sub(ONES) & !q | b.wrapping_sub(ONES) & !b | w.wrapping_sub(ONES * 0x20) & !w)
        & HIGHS
}

/// The length of the run at the start of `s` free of '"', '\\' and control characters, and
/// whether the run holds a byte >= 0x80 (false: the run is ASCII). Eight bytes at a time.
#[inline(always)]
fn plain_run(s: &[u8]) -> (usize, bool) {
    let mut i = 0;
    let mut seen = 0u64;
    while let Some(c) = s.get(i..).and_then(<[u8]>::first_chunk::<8>) {
        let w = u64::from_le_bytes(*c);
        let stops = string_stops(w);
        if stops != 0 {
            let n = stops.trailing_zeros() as usize / 8;
            // The bytes before the stop (n < 8, so the shift is in range).
            seen |= w & ((1u64 << (8 * n)) - 1);
            return (i + n, seen & HIGHS != 0);
        }
        seen |= w;
        i += 8;
    }
    while let Some(&b) = s.get(i) {
        if b == b'"' || b == b'\\' || b < 0x20 {
            break;
        }
        seen |= u64::from(b);
        i += 1;
    }
    (i, seen & HIGHS != 0)
}

/// Cursor over JSON bytes.
pub struct Reader<'a> {
    pub buf: &'a [u8],
    pub pos: usize,
    scratch: String,
    stack_vals: Vec<Val>,
    stack_pairs: Vec<(KeyId, Val)>,
}

type R<T> = Result<T, SyntaxError>;

impl<'a> Reader<'a> {
    pub fn new(buf: &'a [u8]) -> Self {
        // A UTF-8 byte order mark is skipped, as Python's json.load does not accept it but
        // editors sometimes add one; we are lenient here.
        let pos = if buf.starts_with(&[0xEF, 0xBB, 0xBF]) {
            3
        } else {
            0
        };
        Reader {
            buf,
            pos,
            scratch: String::new(),
            stack_vals: Vec::new(),
            stack_pairs: Vec::new(),
        }
    }

    /// A reader at `pos` of `buf` (a later chunk of a stream: no byte order mark is skipped).
    pub fn at(buf: &'a [u8], pos: usize) -> Self {
        let mut r = Reader::new(buf);
        r.pos = pos;
        r
    }

    pub fn err<T>(&self, msg: impl Into<String>) -> R<T> {
        Err(SyntaxError {
            offset: self.pos,
            msg: msg.into(),
        })
    }

    #[inline]
    pub fn skip_ws(&mut self) {
        const WS: u64 = 1 << b' ' | 1 << b'\n' | 1 << b'\r' | 1 << b'\t';
        let buf = self.buf;
        let mut p = self.pos;
        while let Some(&b) = buf.get(p) {
            if b > b' ' || WS >> b & 1 == 0 {
                break;
            }
            p += 1;
            // Indentation (Python's indent=1 puts a run of spaces after each newline): eight
            // bytes at a time.
            while let Some(c) = buf.get(p..).and_then(<[u8]>::first_chunk::<8>) {
                let x = u64::from_le_bytes(*c) ^ (ONES * b' ' as u64);
                if x != 0 {
                    p += x.trailing_zeros() as usize / 8;
                    break;
                }
                p += 8;
            }
        }
        self.pos = p;
    }

    #[inline]
    pub fn peek(&mut self) -> Option<u8> {
        match self.buf.get(self.pos) {
            Some(&b) if b > b' ' => Some(b),
            _ => {
                self.skip_ws();
                self.buf.get(self.pos).copied()
            }
        }
    }

    fn describe_here(&self) -> String {
        match self.buf.get(self.pos) {
            None => "end of file".to_string(),
            Some(b) if b.is_ascii_graphic() => format!("'{}'", *b as char),
            Some(b) => format!("byte 0x{b:02x}"),
        }
    }

    pub fn expect(&mut self, c: u8) -> R<()> {
        if self.peek() == Some(c) {
            self.pos += 1;
            Ok(())
        } else {
            let here = self.describe_here();
            self.err(format!("expected '{}', found {here}", c as char))
        }
    }

    /// After a value: true if a ',' followed (and was consumed), false at the closing `close`.
    pub fn comma_or_close(&mut self, close: u8) -> R<bool> {
        match self.peek() {
            Some(b',') => {
                self.pos += 1;
                Ok(true)
            }
            Some(c) if c == close => {
                self.pos += 1;
                Ok(false)
            }
            _ => {
                let here = self.describe_here();
                self.err(format!("expected ',' or '{}', found {here}", close as char))
            }
        }
    }

    /// Fast path for a string without escapes (the opening quote is next): returns it borrowed
    /// from the input and moves past it; None (position unchanged) when it needs `read_str`.
    #[inline(always)]
    fn plain_str(&mut self) -> Option<&'a str> {
        let buf: &'a [u8] = self.buf;
        let start = self.pos + 1;
        let rest = buf.get(start..)?;
        let (end, non_ascii) = plain_run(rest);
        if rest.get(end) != Some(&b'"') {
            return None;
        }
        let run = rest.get(..end)?;
        let s = if non_ascii {
            std::str::from_utf8(run).ok()?
        } else {
            // SAFETY: `plain_run` saw no byte >= 0x80 in `run`, so it is ASCII, which is UTF-8.
            unsafe { std::str::from_utf8_unchecked(run) }
        };
        self.pos = start + end + 1;
        Some(s)
    }

    /// Reads a string (the opening quote is next) into the scratch buffer and returns it.
    pub fn read_str(&mut self) -> R<&str> {
        // Most strings have no escapes: borrow them from the input.
        if self.peek() == Some(b'"') {
            if let Some(s) = self.plain_str() {
                return Ok(s);
            }
        }
        self.expect(b'"')?;
        self.scratch.clear();
        let buf = self.buf;
        loop {
            let start = self.pos;
            // Fast path: copy runs of plain bytes.
            let (n, non_ascii) = plain_run(buf.get(start..).unwrap_or(&[]));
            self.pos = start + n;
            if n > 0 {
                let run = buf.get(start..self.pos).unwrap_or(&[]);
                if !non_ascii {
                    // SAFETY: `plain_run` saw no byte >= 0x80 in `run`, so it is ASCII, which is
                    // UTF-8.
                    self.scratch
                        .push_str(unsafe { std::str::from_utf8_unchecked(run) });
                } else {
                    match std::str::from_utf8(run) {
                        Ok(s) => self.scratch.push_str(s),
                        Err(e) => {
                            self.pos = start + e.valid_up_to();
                            return self.err("invalid UTF-8 in a string");
                        }
                    }
                }
            }
            match buf.get(self.pos) {
                None => return self.err("unterminated string (file ends inside it)"),
                Some(b'"') => {
                    self.pos += 1;
                    return Ok(&self.scratch);
                }
                Some(b'\\') => {
                    self.pos += 1;
                    let Some(&e) = buf.get(self.pos) else {
                        return self.err("unterminated string (file ends inside it)");
                    };
                    self.pos += 1;
                    match e {
                        b'"' => self.scratch.push('"'),
                        b'\\' => self.scratch.push('\\'),
                        b'/' => self.scratch.push('/'),
                        b'b' => self.scratch.push('\u{8}'),
                        b'f' => self.scratch.push('\u{c}'),
                        b'n' => self.scratch.push('\n'),
                        b'r' => self.scratch.push('\r'),
                        b't' => self.scratch.push('\t'),
                        b'u' => {
                            let hi = self.hex4()?;
                            let c = if (0xD800..0xDC00).contains(&hi)
                                && buf.get(self.pos) == Some(&b'\\')
                                && buf.get(self.pos + 1) == Some(&b'u')
                            {
                                let save = self.pos;
                                self.pos += 2;
                                let lo = self.hex4()?;
                                if (0xDC00..0xE000).contains(&lo) {
                                    char::from_u32(0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00))
                                } else {
                                    self.pos = save;
                                    None
                                }
                            } else {
                                char::from_u32(hi)
                            };
                            // Lone surrogates (valid in Python strings) become U+FFFD.
                            self.scratch.push(c.unwrap_or('\u{FFFD}'));
                        }
                        _ => {
                            self.pos -= 1;
                            return self.err("invalid escape in a string");
                        }
                    }
                }
                Some(_) => return self.err("control character inside a string"),
            }
        }
    }

    fn hex4(&mut self) -> R<u32> {
        let Some(h) = self.buf.get(self.pos..self.pos + 4) else {
            return self.err("truncated \\u escape");
        };
        let s = std::str::from_utf8(h).ok();
        match s.and_then(|s| u32::from_str_radix(s, 16).ok()) {
            Some(v) => {
                self.pos += 4;
                Ok(v)
            }
            None => self.err("invalid \\u escape"),
        }
    }

    fn lit(&mut self, word: &[u8]) -> bool {
        if self.buf.get(self.pos..self.pos + word.len()) == Some(word) {
            self.pos += word.len();
            true
        } else {
            false
        }
    }

    fn number(&mut self, store: &mut Store) -> R<Val> {
        let start = self.pos;
        let buf = self.buf;
        if buf.get(self.pos) == Some(&b'-') {
            self.pos += 1;
            if self.lit(b"Infinity") {
                return Ok(Val::Float(f64::NEG_INFINITY));
            }
        }
        let digits_start = self.pos;
        while buf.get(self.pos).is_some_and(u8::is_ascii_digit) {
            self.pos += 1;
        }
        if self.pos == digits_start {
            return self.err("invalid number");
        }
        if buf[digits_start] == b'0' && self.pos - digits_start > 1 {
            self.pos = digits_start + 1;
            return self.err("invalid number (leading zero)");
        }
        let mut is_float = false;
        if buf.get(self.pos) == Some(&b'.') {
            is_float = true;
            self.pos += 1;
            let s = self.pos;
            while buf.get(self.pos).is_some_and(u8::is_ascii_digit) {
                self.pos += 1;
            }
            if self.pos == s {
                return self.err("invalid number (no digits after '.')");
            }
        }
        if matches!(buf.get(self.pos), Some(b'e') | Some(b'E')) {
            is_float = true;
            self.pos += 1;
            if matches!(buf.get(self.pos), Some(b'+') | Some(b'-')) {
                self.pos += 1;
            }
            let s = self.pos;
            while buf.get(self.pos).is_some_and(u8::is_ascii_digit) {
                self.pos += 1;
            }
            if self.pos == s {
                return self.err("invalid number (no digits in exponent)");
            }
        }
        // The slice is ASCII by construction.
        let text = std::str::from_utf8(&buf[start..self.pos]).unwrap_or("0");
        if is_float {
            // Like Python, a literal beyond f64 becomes +-inf.
            Ok(Val::Float(text.parse::<f64>().unwrap_or(f64::NAN)))
        } else {
            match text.parse::<i64>() {
                Ok(i) => Ok(Val::Int(i)),
                Err(_) => Ok(Val::BigInt(store.push_str(text))),
            }
        }
    }

    /// Parses any value into `store`.
    pub fn value(&mut self, store: &mut Store, depth: usize) -> R<Val> {
        if depth > MAX_DEPTH {
            return self.err(format!("nesting deeper than {MAX_DEPTH} levels"));
        }
        match self.peek() {
            None => self.err("unexpected end of file, expected a value"),
            Some(b'{') => {
                self.pos += 1;
                let base = self.stack_pairs.len();
                let mut seen: Option<HashMap<KeyId, usize>> = None;
                if self.peek() == Some(b'}') {
                    self.pos += 1;
                } else {
                    loop {
                        if self.peek() != Some(b'"') {
                            let here = self.describe_here();
                            return self.err(format!("expected a string key, found {here}"));
                        }
                        let k = match self.plain_str() {
                            Some(k) => k,
                            None => self.read_str()?,
                        };
                        let k = match store.find_key(k) {
                            Some(id) => id,
                            None => {
                                let owned = k.to_owned();
                                store.intern_key(&owned)
                            }
                        };
                        self.expect(b':')?;
                        let v = self.value(store, depth + 1)?;
                        // Duplicate keys: a scan while the object is small, a hash index once it
                        // is large (construct.json has one key per node).
                        let n = self.stack_pairs.len() - base;
                        if n == 32 && seen.is_none() {
                            seen = Some(
                                self.stack_pairs[base..]
                                    .iter()
                                    .enumerate()
                                    .map(|(i, p)| (p.0, i))
                                    .collect(),
                            );
                        }
                        let dup = match &seen {
                            Some(m) => m.get(&k).copied(),
                            None => self.stack_pairs[base..].iter().position(|p| p.0 == k),
                        };
                        if let Some(i) = dup {
                            self.stack_pairs[base + i].1 = v;
                        } else {
                            if let Some(m) = &mut seen {
                                m.insert(k, n);
                            }
                            self.stack_pairs.push((k, v));
                        }
                        if !self.comma_or_close(b'}')? {
                            break;
                        }
                    }
                }
                let start = store.pairs.len() as u32;
                store.pairs.extend(self.stack_pairs.drain(base..));
                Ok(Val::Obj {
                    start,
                    len: store.pairs.len() as u32 - start,
                })
            }
            Some(b'[') => {
                self.pos += 1;
                let base = self.stack_vals.len();
                if self.peek() == Some(b']') {
                    self.pos += 1;
                } else {
                    loop {
                        let v = self.value(store, depth + 1)?;
                        self.stack_vals.push(v);
                        if !self.comma_or_close(b']')? {
                            break;
                        }
                    }
                }
                let start = store.vals.len() as u32;
                store.vals.extend(self.stack_vals.drain(base..));
                Ok(Val::List {
                    start,
                    len: store.vals.len() as u32 - start,
                })
            }
            Some(b'"') => {
                let off = store.text.len() as u32;
                match self.plain_str() {
                    Some(s) => store.text.push_str(s),
                    None => {
                        let s = self.read_str()?;
                        // `scratch` is borrowed; copy into the store's buffer.
                        store.text.push_str(s);
                    }
                }
                Ok(Val::Str(StrRef {
                    off,
                    len: store.text.len() as u32 - off,
                }))
            }
            Some(b't') if self.lit(b"true") => Ok(Val::Bool(true)),
            Some(b'f') if self.lit(b"false") => Ok(Val::Bool(false)),
            Some(b'n') if self.lit(b"null") => Ok(Val::Null),
            Some(b'N') if self.lit(b"NaN") => Ok(Val::Float(f64::NAN)),
            Some(b'I') if self.lit(b"Infinity") => Ok(Val::Float(f64::INFINITY)),
            Some(b'-') | Some(b'0'..=b'9') => self.number(store),
            Some(_) => {
                let here = self.describe_here();
                self.err(format!("expected a value, found {here}"))
            }
        }
    }

    /// Skips a value without storing it (used for top-level keys we do not read).
    pub fn skip_value(&mut self, depth: usize) -> R<()> {
        let mut scratch = Store::default();
        self.value(&mut scratch, depth).map(|_| ())
    }

    /// Requires that only whitespace remains.
    pub fn end(&mut self) -> R<()> {
        match self.peek() {
            None => Ok(()),
            Some(_) => {
                let here = self.describe_here();
                self.err(format!("extra data after the JSON value: {here}"))
            }
        }
    }
}

/// Tests of the fast paths against their plain definitions (Python's layout, 8-byte boundaries,
/// UTF-8, number rounding).
#[cfg(test)]
mod fast_path_tests {
    use super::*;

    /// A deterministic generator (Knuth's MMIX LCG, high bits).
    struct Lcg(u64);
    impl Lcg {
        fn next(&mut self) -> u64 {
            self.0 = self
                .0
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            self.0 >> 33
        }
        fn below(&mut self, n: u64) -> u64 {
            self.next() % n
        }
    }

    fn naive_run(s: &[u8]) -> (usize, bool) {
        let n = s
            .iter()
            .position(|&b| b == b'"' || b == b'\\' || b < 0x20)
            .unwrap_or(s.len());
        (n, s[..n].iter().any(|&b| b >= 0x80))
    }

    #[test]
    fn plain_run_matches_its_definition() {
        let alphabet = [
            b'a', b'"', b'\\', 0x00, 0x1f, 0x20, 0x7f, 0x80, 0xc3, 0xff, b'0',
        ];
        let mut g = Lcg(1);
        for _ in 0..200_000 {
            let len = g.below(40) as usize;
            let s: Vec<u8> = (0..len)
                .map(|_| {
                    if g.below(4) == 0 {
                        alphabet[g.below(alphabet.len() as u64) as usize]
                    } else {
                        b'a' + g.below(26) as u8
                    }
                })
                .collect();
            assert_eq!(plain_run(&s), naive_run(&s), "{s:?}");
        }
        // Each stop, and a high byte, at every position of the first three words.
        for pos in 0..24 {
            for stop in [b'"', b'\\', 0x00, 0x0a, 0x1f] {
                let mut s = vec![b'x'; 30];
                s[pos] = stop;
                assert_eq!(plain_run(&s), (pos, false));
                if pos > 0 {
                    s[pos - 1] = 0x80;
                    assert_eq!(plain_run(&s), (pos, true));
                }
                s[pos + 1] = 0xff;
                assert_eq!(
                    plain_run(&s).1,
                    pos > 0,
                    "a high byte after the stop counts not"
                );
            }
        }
    }

    fn parse_str(doc: &str) -> String {
        let (s, v) = parse(doc.as_bytes()).unwrap();
        s.as_str(s.list(v)[0]).unwrap().to_string()
    }

    #[test]
    fn strings_at_word_boundaries() {
        for len in 0..=40 {
            let text: String = (0..len).map(|i| (b'a' + (i % 26) as u8) as char).collect();
            assert_eq!(parse_str(&format!("[\"{text}\"]")), text);
            // The string ends the buffer (fewer than 8 bytes after it).
            let (s, v) = parse(format!("\"{text}\"").as_bytes()).unwrap();
            assert_eq!(s.as_str(v), Some(text.as_str()));
            // As a key, and a key the short-key cache holds next to its prefixes.
            let doc = format!("{{\"{text}\": 1, \"{text}x\": 2, \"{text}\": 3}}");
            let (s, v) = parse(doc.as_bytes()).unwrap();
            assert_eq!(s.obj(v).len(), 2);
            assert_eq!(s.get(v, &text), Some(Val::Int(3)));
            assert_eq!(s.get(v, &format!("{text}x")), Some(Val::Int(2)));
            // An escape after a plain run of `len` bytes.
            assert_eq!(
                parse_str(&format!("[\"{text}\\n\\u00e9{text}\"]")),
                format!("{text}\n\u{e9}{text}")
            );
            // Non-ASCII at every position.
            let mut t = text.clone();
            t.insert(len / 2, '\u{e9}');
            t.push('\u{1F600}');
            assert_eq!(parse_str(&format!("[\"{t}\"]")), t);
            for key in [&t[..t.len() - 4], &t] {
                let doc = format!("{{\"{key}\": 1, \"{text}\": 2, \"{key}\": 3}}");
                let (s, v) = parse(doc.as_bytes()).unwrap();
                assert_eq!(s.obj(v).len(), 2);
                assert_eq!(s.key(s.obj(v)[0].0), key);
                assert_eq!(s.get(v, key), Some(Val::Int(3)));
            }
        }
    }

    #[test]
    fn invalid_utf8_and_control_characters_at_every_position() {
        for len in 0..24 {
            for bad in [
                &[0xff][..],
                &[0xc3],
                &[0xe2, 0x82],
                &[0xf0, 0x9f, 0x98],
                &[0xed, 0xa0, 0x80],
            ] {
                for with_escape in [false, true] {
                    let mut doc = b"[\"".to_vec();
                    if with_escape {
                        doc.extend_from_slice(b"\\t");
                    }
                    let run_start = doc.len();
                    doc.extend(std::iter::repeat_n(b'a', len));
                    doc.extend_from_slice(bad);
                    doc.extend_from_slice(b"bcdefgh\"]");
                    let e = parse(&doc).unwrap_err();
                    assert_eq!(e.msg, "invalid UTF-8 in a string");
                    assert_eq!(e.offset, run_start + len, "{doc:?}");
                }
            }
            let mut doc = b"{\"".to_vec();
            doc.extend(std::iter::repeat_n(b'a', len));
            let at = doc.len();
            doc.extend_from_slice(b"\tb\": 1}");
            let e = parse(&doc).unwrap_err();
            assert_eq!(
                (e.offset, e.msg.as_str()),
                (at, "control character inside a string")
            );
        }
    }

    #[test]
    fn whitespace_layouts_read_alike() {
        let compact = r#"{"a":[1,{"b":null,"c":"x"},[]],"d":{},"e":-0.5}"#;
        let (s0, v0) = parse(compact.as_bytes()).unwrap();
        for indent in [0, 1, 2, 7, 8, 9, 16, 17] {
            for nl in ["\n", "\r\n", "\n\t"] {
                let pad = format!("{nl}{}", " ".repeat(indent));
                let mut doc = String::new();
                for c in compact.chars() {
                    doc.push(c);
                    if matches!(c, '{' | '[' | ',') {
                        doc.push_str(&pad);
                    }
                    if c == ':' {
                        doc.push(' ');
                    }
                }
                doc.push_str(&pad);
                let (s, v) = parse(doc.as_bytes()).unwrap();
                assert_eq!(
                    (&s.vals, &s.pairs, &s.text, v),
                    (&s0.vals, &s0.pairs, &s0.text, v0)
                );
            }
        }
        // Whitespace up to the end of the buffer, shorter and longer than a word.
        for n in 0..20 {
            let doc = format!("[1]{}", " ".repeat(n));
            assert!(parse(doc.as_bytes()).is_ok());
            let doc = format!("[1]{} x", " ".repeat(n));
            let e = parse(doc.as_bytes()).unwrap_err();
            assert_eq!(e.offset, 4 + n);
        }
    }
}

/// Parses a whole document into a fresh store.
pub fn parse(buf: &[u8]) -> Result<(Store, Val), SyntaxError> {
    let mut store = Store::default();
    let mut r = Reader::new(buf);
    let v = r.value(&mut store, 0)?;
    r.end()?;
    Ok((store, v))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn python_tokens_and_ints() {
        let (s, v) = parse(br#"{"a": NaN, "b": -Infinity, "c": Infinity, "d": 123456789012345678901234, "e": 1.5}"#)
            .unwrap();
        let get = |k| s.get(v, k).unwrap();
        assert!(matches!(get("a"), Val::Float(x) if x.is_nan()));
        assert_eq!(get("b"), Val::Float(f64::NEG_INFINITY));
        assert_eq!(get("c"), Val::Float(f64::INFINITY));
        assert!(matches!(get("d"), Val::BigInt(r) if s.str(r) == "123456789012345678901234"));
        assert_eq!(get("e"), Val::Float(1.5));
    }

    #[test]
    fn duplicate_keys_keep_first_position_last_value() {
        let (s, v) = parse(br#"{"a": 1, "b": 2, "a": 3}"#).unwrap();
        let o = s.obj(v);
        assert_eq!(o.len(), 2);
        assert_eq!(s.key(o[0].0), "a");
        assert_eq!(o[0].1, Val::Int(3));
    }

    /// Regression: duplicate detection switches to a hash index past 32 keys (construct.json has
    /// one key per node; a linear scan made parsing quadratic). Semantics must not change.
    #[test]
    fn duplicate_keys_in_large_objects() {
        let mut text = String::from("{");
        for i in 0..100 {
            text.push_str(&format!("\"k{i}\": {i}, "));
        }
        text.push_str("\"k5\": -5, \"k70\": -70, \"last\": 1}");
        let (s, v) = parse(text.as_bytes()).unwrap();
        let o = s.obj(v);
        assert_eq!(o.len(), 101);
        assert_eq!(s.get(v, "k5"), Some(Val::Int(-5)));
        assert_eq!(s.get(v, "k70"), Some(Val::Int(-70)));
        assert_eq!(s.key(o[5].0), "k5");
        assert_eq!(s.key(o[100].0), "last");
    }

    #[test]
    fn escape_free_and_escaped_strings_agree() {
        let text = "{\"a\\u0062\": \"x\\\"y\", \"ab\": \"plain\", \"c\": \"caf\\u00e9 caf\u{e9}\"}";
        let (s, v) = parse(text.as_bytes()).unwrap();
        assert_eq!(s.obj(v).len(), 2);
        assert_eq!(
            s.get(v, "ab")
                .and_then(|x| s.as_str(x).map(str::to_string))
                .as_deref(),
            Some("plain")
        );
        assert_eq!(
            s.get(v, "c")
                .and_then(|x| s.as_str(x).map(str::to_string))
                .as_deref(),
            Some("caf\u{e9} caf\u{e9}")
        );
    }

    #[test]
    fn errors_have_positions() {
        let e = parse(b"{\n \"a\": [1, 2,\n").unwrap_err();
        assert_eq!(line_col(b"{\n \"a\": [1, 2,\n", e.offset), (3, 1));
        assert!(e.msg.contains("end of file"), "{}", e.msg);
        let e = parse(b"{\"a\": \"abc").unwrap_err();
        assert!(e.msg.contains("unterminated string"));
        let deep = "[".repeat(10_000);
        let e = parse(deep.as_bytes()).unwrap_err();
        assert!(e.msg.contains("nesting deeper"));
    }

    #[test]
    fn unicode_escapes() {
        let (s, v) = parse(br#"["\u00e9\ud83d\ude00\n"]"#).unwrap();
        let l = s.list(v);
        assert_eq!(s.as_str(l[0]), Some("é😀\n"));
    }
}
