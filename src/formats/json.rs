//! A small JSON reader over bytes, built for msprobe's files.
//!
//! It accepts what Python's `json` module writes and reads: the bare tokens `NaN`, `Infinity` and
//! `-Infinity`, integers of any size, and duplicate keys (the last value wins, at the first key's
//! position, like a Python dict). Values land in a [`Store`]: a compact arena of 16-byte [`Val`]s,
//! strings in one byte buffer, keys interned. Nothing here allocates per value beyond the arena,
//! and nesting is bounded by [`MAX_DEPTH`], so no input recurses without bound.
//!
//! Errors carry the byte offset; [`line_col`] turns it into a line and column for messages.
//!
//! The store's layout: one arena of 8-byte NaN-boxed words (`Packed`: a float is its own bits,
//! anything else a tagged NaN; what does not fit goes whole to a side list), decoded to a `Val` on
//! read; a [`Word`] is a `Val` kept in 8 bytes outside the store (each dump entry's value). A short
//! string seen just before is stored once; a list of up to 8 values equal to one already held (a
//! tensor shape) is stored once; each object's key list is stored once per distinct list (a layout:
//! every tensor of a dump shares one), so a member costs one word. The members objects repeat word
//! for word (null, booleans, strings of at most 16 bytes, short lists: a tensor's type, dtype,
//! shape, requires_grad) go once into a template on that layout and the object keeps only its other
//! words (at most 1,024 templates per layout, so unique short strings such as md5s fall back to
//! plain objects).

use crate::base::HashMap;

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
    /// An object: its layout `shape` in the store (its keys, and for an object whose small
    /// members repeat, their values), its own values at `vals[start..]`. Objects with the same
    /// keys in the same order, such as every tensor of a dump, share one key list, so a member
    /// costs a value and no key; the tensors with the same type, dtype, shape, requires_grad and
    /// missing statistics share those values too, and keep only their numbers.
    Obj {
        start: u32,
        shape: u32,
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

/// A [`Val`] in 8 bytes, as the store keeps it (NaN-boxing): a float is its own bits; every
/// other value is a NaN whose top 16 bits (0xFFF9 to 0xFFFE, never produced by arithmetic or
/// parsing) say what it is, and whose low 48 bits hold it. What does not fit (an integer beyond
/// ±2^47, a string, list or shape number of 2^16 or more in its second field, a float whose bits
/// fall among the tags) is kept whole in `Store::wide` and the word holds its index there.
/// A dump is mostly tensors of 11 values: half the memory of the 16-byte enum.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Packed(u64);

const T_MISC: u64 = 0xFFF9;
const T_INT: u64 = 0xFFFA;
const T_STR: u64 = 0xFFFB;
const T_LIST: u64 = 0xFFFC;
const T_OBJ: u64 = 0xFFFD;
const T_WIDE: u64 = 0xFFFE;
/// Only in a layout's template: the object's own value number `payload` (see [`Layout`]).
const T_HOLE: u64 = 0xFFFF;
const PAYLOAD: u64 = (1 << 48) - 1;

impl Packed {
    /// The value, looking up escapes in `wide`.
    #[inline(always)]
    fn get(self, wide: &[Val]) -> Val {
        let b = self.0;
        let t = b >> 48;
        if t < T_MISC {
            return Val::Float(f64::from_bits(b));
        }
        let x = b & PAYLOAD;
        let (lo, hi) = (x as u32, (x >> 32) as u32);
        match t {
            T_MISC if x == 0 => Val::Null,
            T_MISC => Val::Bool(x & 1 == 1),
            T_INT => Val::Int(((x << 16) as i64) >> 16),
            T_STR => Val::Str(StrRef { off: lo, len: hi }),
            T_LIST => Val::List { start: lo, len: hi },
            T_OBJ => Val::Obj {
                start: lo,
                shape: hi,
            },
            _ => wide.get(x as usize).copied().unwrap_or(Val::Null),
        }
    }
    /// `v` in a word, if it fits one.
    #[inline(always)]
    fn pack(v: Val) -> Option<Packed> {
        let tag = |t: u64, x: u64| Some(Packed(t << 48 | x));
        let two = |lo: u32, hi: u32| u64::from(lo) | u64::from(hi) << 32;
        match v {
            Val::Float(x) if x.to_bits() >> 48 < T_MISC => Some(Packed(x.to_bits())),
            Val::Null => tag(T_MISC, 0),
            Val::Bool(b) => tag(T_MISC, 2 | u64::from(b)),
            Val::Int(i) if (-(1 << 47)..1 << 47).contains(&i) => tag(T_INT, i as u64 & PAYLOAD),
            Val::Str(r) if r.len < 1 << 16 => tag(T_STR, two(r.off, r.len)),
            Val::List { start, len } if len < 1 << 16 => tag(T_LIST, two(start, len)),
            Val::Obj { start, shape } if shape < 1 << 16 => tag(T_OBJ, two(start, shape)),
            _ => None,
        }
    }
    /// A word that may go in a layout's template instead of every object's values: one that
    /// objects repeat word for word. Null and booleans; strings of at most 16 bytes and lists of
    /// 1 to [`SHORT_LIST`] values, which the store keeps once while they recur ([`Store::push_str`],
    /// [`Store::new_list`]). Numbers are the objects' own (a tensor's statistics, a scalar's value).
    #[inline(always)]
    fn repeats(self) -> bool {
        let second = (self.0 & PAYLOAD) >> 32;
        match self.0 >> 48 {
            T_MISC => true,
            T_STR => second <= 16,
            T_LIST => (1..=SHORT_LIST as u64).contains(&second),
            _ => false,
        }
    }
    /// A template's stand-in for an object's own word.
    #[inline(always)]
    fn is_hole(self) -> bool {
        self.0 >> 48 == T_HOLE
    }
    /// The word a template word stands for in an object whose own words are `own`.
    #[inline(always)]
    fn fill(self, own: &[Packed]) -> Packed {
        if self.is_hole() {
            own.get((self.0 & PAYLOAD) as usize)
                .copied()
                .unwrap_or(Packed(T_MISC << 48))
        } else {
            self
        }
    }
}

/// A [`Val`] of a [`Store`] in 8 bytes ([`Store::keep`], [`Store::val`]): half an enum's size, for
/// values held in their thousands outside the store (each dump.json entry's).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Word(Packed);

/// Values in a [`Store`] side by side: a list's elements or an object's member values.
#[derive(Clone, Copy, Debug, Default)]
pub struct Vals<'a> {
    /// One word per value: the values themselves, or for an object with a template, the
    /// template, whose holes are the object's `own` words.
    vals: &'a [Packed],
    own: &'a [Packed],
    wide: &'a [Val],
}

impl<'a> Vals<'a> {
    pub fn len(&self) -> usize {
        self.vals.len()
    }
    pub fn is_empty(&self) -> bool {
        self.vals.is_empty()
    }
    #[inline]
    pub fn get(&self, i: usize) -> Option<Val> {
        self.vals.get(i).map(|p| p.fill(self.own).get(self.wide))
    }
    pub fn first(&self) -> Option<Val> {
        self.get(0)
    }
    pub fn last(&self) -> Option<Val> {
        self.len().checked_sub(1).and_then(|i| self.get(i))
    }
    pub fn iter(&self) -> ValIter<'a> {
        ValIter {
            vals: self.vals.iter(),
            own: self.own,
            wide: self.wide,
        }
    }
    pub fn to_vec(&self) -> Vec<Val> {
        self.iter().collect()
    }
}

impl<'a> IntoIterator for Vals<'a> {
    type Item = Val;
    type IntoIter = ValIter<'a>;
    fn into_iter(self) -> ValIter<'a> {
        self.iter()
    }
}

/// The values of [`Vals`], decoded.
#[derive(Clone, Debug)]
pub struct ValIter<'a> {
    vals: std::slice::Iter<'a, Packed>,
    own: &'a [Packed],
    wide: &'a [Val],
}

impl Iterator for ValIter<'_> {
    type Item = Val;
    #[inline]
    fn next(&mut self) -> Option<Val> {
        self.vals.next().map(|p| p.fill(self.own).get(self.wide))
    }
    fn size_hint(&self) -> (usize, Option<usize>) {
        self.vals.size_hint()
    }
}

impl DoubleEndedIterator for ValIter<'_> {
    fn next_back(&mut self) -> Option<Val> {
        self.vals
            .next_back()
            .map(|p| p.fill(self.own).get(self.wide))
    }
}

impl ExactSizeIterator for ValIter<'_> {}

/// Arena of parsed values.
#[derive(Default, Debug, Clone)]
pub struct Store {
    /// List elements and object member values.
    pub vals: Vec<Packed>,
    /// The values that do not fit a [`Packed`] word.
    wide: Vec<Val>,
    /// The layouts of objects: each key list once, and the templates made on them.
    shapes: Vec<Layout>,
    shape_keys: Vec<KeyId>,
    /// The plain layout of each key list.
    shape_ids: HashMap<Box<[KeyId]>, u32>,
    /// The plain layout found last (consecutive objects mostly share their keys).
    last_shape: u32,
    /// The templates' words, `len` per templated layout.
    tmpl_words: Vec<Packed>,
    /// The templated layout of `[plain layout id, template words...]`.
    tmpl_ids: HashMap<Box<[Packed]>, u32>,
    /// A direct-mapped cache in front of `tmpl_ids` (layout id + 1; 0 for none).
    tmpl_cache: Vec<u32>,
    pub text: String,
    /// Short strings (at most 16 bytes) already in `text`, direct-mapped like
    /// [`KeyTable::short`]: `"torch.Tensor"` and `"torch.float32"` are in every tensor of a dump,
    /// and were most of its text.
    short_strs: Vec<StrRef>,
    /// Short lists (at most [`SHORT_LIST`] elements) already in `vals`, direct-mapped by their
    /// words: `(start, len)`. A list whose words equal a cached one's is that one (values are
    /// never changed in place): the shape `[1, 128, 4096]` of the tensors of one layer's calls
    /// is stored once instead of per tensor.
    short_lists: Vec<(u32, u32)>,
    keys: Vec<Box<str>>,
    key_ids: KeyTable,
}

/// How the members of objects are kept. A plain layout is a key list: the object's values are
/// its own, `len` words at `vals[start..]`. A templated layout adds a template of `len` words:
/// the members objects with these keys repeat word for word (see `Packed::repeats`) are in the
/// template, once, and the object keeps only the others, `own` words at `vals[start..]`, which
/// the template's holes (`T_HOLE`, numbered in order) stand for. A dump's tensor (type, dtype,
/// shape, Max, Min, Mean, Norm, requires_grad) keeps 4 words instead of 8.
#[derive(Debug, Clone, Copy)]
struct Layout {
    /// The key list: `len` keys at `shape_keys[keys..]`.
    keys: u32,
    len: u32,
    /// The template at `tmpl_words[tmpl..]`, or [`NO_TMPL`].
    tmpl: u32,
    /// Words an object keeps in `vals`.
    own: u32,
    /// The plain layout with the same keys (itself for a plain one).
    base: u32,
    /// For a plain layout, how many templates were made on it.
    made: u32,
}

const NO_TMPL: u32 = u32::MAX;
/// Objects with more members keep them all (a template is looked up in a stack buffer).
const TMPL_MEMBERS: usize = 16;
/// Templates made on one key list at most: past it, objects with these keys keep all their
/// values. Dumps whose short strings do not repeat (an md5 per tensor) stop there.
const TMPL_PER_SHAPE: u32 = 1024;
/// Layouts at most that get templates (an object's layout id fits its packed word below 2^16).
const TMPL_LAYOUTS: usize = 1 << 14;
const TMPL_SLOTS: usize = 1024;

/// The index of [`Store`]'s interned keys: open addressing (linear probing) over `(hash, id + 1)`
/// slots, the hash seeded per process like [`HashMap`]'s (crafted keys cannot force collisions).
/// Keys live once, in `Store::keys`; the stored hash makes growing the table rehash nothing.
#[derive(Default, Debug, Clone)]
struct KeyTable {
    state: foldhash::fast::RandomState,
    /// Power-of-two length (or empty), at most half full; id 0 marks an empty slot.
    slots: Vec<(u32, u32)>,
    /// A direct-mapped cache in front of the table for short keys (at most 16 bytes: dump.json's
    /// `"type"`, `"dtype"`, `"requires_grad"` ...): `(short_words(key), len, id + 1)`.
    short: Vec<(u64, u64, u32, u32)>,
}

impl Store {
    pub fn str(&self, r: StrRef) -> &str {
        self.text
            .get(r.off as usize..(r.off + r.len) as usize)
            .unwrap_or("")
    }
    /// Adds `s` to the text (a short string seen just before is not stored again).
    #[inline]
    pub fn push_str(&mut self, s: &str) -> StrRef {
        let Some(w) = short_words(s.as_bytes()) else {
            return self.push_new_str(s);
        };
        if self.short_strs.is_empty() {
            let none = StrRef {
                off: 0,
                len: u32::MAX,
            };
            self.short_strs = vec![none; SHORT_SLOTS];
        }
        let slot = short_slot(w, s.len());
        // The slot's text is compared whole (at most 16 bytes; the text may also have been
        // rewound since the slot was filled).
        if let Some(&r) = self.short_strs.get(slot) {
            if r.len as usize == s.len() && self.str(r) == s {
                return r;
            }
        }
        let r = self.push_new_str(s);
        if let Some(e) = self.short_strs.get_mut(slot) {
            *e = r;
        }
        r
    }
    fn push_new_str(&mut self, s: &str) -> StrRef {
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
        let t = &mut self.key_ids;
        let words = short_words(s.as_bytes());
        if let Some(k) = words.and_then(|w| t.cached(w, s.len())) {
            return k;
        }
        let h = t.hash(s);
        let k = match t.find(&self.keys, s, h) {
            Ok(k) => k,
            Err(slot) => {
                let k = KeyId(self.keys.len() as u32);
                self.keys.push(s.into());
                t.insert(slot, h, k, self.keys.len());
                k
            }
        };
        if let Some(w) = words {
            if t.short.is_empty() {
                t.short = vec![(0, 0, 0, 0); SHORT_SLOTS];
            }
            if let Some(e) = t.short.get_mut(short_slot(w, s.len())) {
                *e = (w.0, w.1, s.len() as u32, k.0 + 1);
            }
        }
        k
    }
    pub fn find_key(&self, s: &str) -> Option<KeyId> {
        let t = &self.key_ids;
        if let Some(k) = short_words(s.as_bytes()).and_then(|w| t.cached(w, s.len())) {
            return Some(k);
        }
        t.find(&self.keys, s, t.hash(s)).ok()
    }
    /// The elements of list `v` (none if `v` is not a list).
    pub fn list(&self, v: Val) -> Vals<'_> {
        match v {
            Val::List { start, len } => self.vals_at(start, len),
            _ => Vals::default(),
        }
    }
    /// The `len` values from `start` (none if out of range).
    fn vals_at(&self, start: u32, len: u32) -> Vals<'_> {
        Vals {
            vals: self
                .vals
                .get(start as usize..start as usize + len as usize)
                .unwrap_or(&[]),
            own: &[],
            wide: &self.wide,
        }
    }
    /// Appends `items`; returns where they start.
    fn push_vals(&mut self, items: impl ExactSizeIterator<Item = Val>) -> u32 {
        let start = self.vals.len() as u32;
        self.vals.reserve(items.len());
        for v in items {
            let p = self.pack(v);
            self.vals.push(p);
        }
        start
    }
    /// `v` as the store keeps it.
    #[inline]
    fn pack(&mut self, v: Val) -> Packed {
        Packed::pack(v).unwrap_or_else(|| {
            let i = self.wide.len() as u64;
            self.wide.push(v);
            Packed(T_WIDE << 48 | i)
        })
    }
    /// `v` in 8 bytes, to keep outside the store ([`Store::val`] reads it back; a value that
    /// does not fit a word goes to the store's side list, as in the arena).
    pub fn keep(&mut self, v: Val) -> Word {
        Word(self.pack(v))
    }
    /// The value a [`Word`] of this store holds.
    pub fn val(&self, w: Word) -> Val {
        w.0.get(&self.wide)
    }
    /// The members of object `v` (none if `v` is not an object).
    pub fn obj(&self, v: Val) -> Obj<'_> {
        let Val::Obj { start, shape } = v else {
            return Obj::default();
        };
        let Some(l) = self.shapes.get(shape as usize) else {
            return Obj::default();
        };
        let keys = self
            .shape_keys
            .get(l.keys as usize..(l.keys + l.len) as usize)
            .unwrap_or(&[]);
        if l.tmpl == NO_TMPL {
            return Obj {
                keys,
                vals: self.vals_at(start, l.len),
            };
        }
        let own = self
            .vals
            .get(start as usize..start as usize + l.own as usize)
            .unwrap_or(&[]);
        let tmpl = self
            .tmpl_words
            .get(l.tmpl as usize..(l.tmpl + l.len) as usize)
            .unwrap_or(&[]);
        Obj {
            keys,
            vals: Vals {
                vals: tmpl,
                own,
                wide: &self.wide,
            },
        }
    }
    /// Value of `key` in object `v` (None if `v` is not an object or has no such key).
    pub fn get(&self, v: Val, key: &str) -> Option<Val> {
        self.obj(v).get(self.find_key(key)?)
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
            wide: self.wide.len(),
            text: self.text.len(),
        }
    }
    /// Forgets every value added since `m` (interned keys stay; they are harmless).
    pub fn rewind(&mut self, m: Mark) {
        self.vals.truncate(m.vals);
        self.wide.truncate(m.wide);
        self.text.truncate(m.text);
    }
    pub fn new_list(&mut self, items: &[Val]) -> Val {
        if (1..=SHORT_LIST).contains(&items.len()) {
            return self.new_short_list(items);
        }
        let start = self.push_vals(items.iter().copied());
        Val::List {
            start,
            len: items.len() as u32,
        }
    }
    /// A list of 1 to [`SHORT_LIST`] values: the same words as a cached short list are that
    /// list (the cached range is checked against the current words: the store may have been
    /// rewound and refilled since).
    fn new_short_list(&mut self, items: &[Val]) -> Val {
        let mut words = [Packed(0); SHORT_LIST];
        for (w, v) in words.iter_mut().zip(items) {
            *w = self.pack(*v);
        }
        let words = &words[..items.len().min(SHORT_LIST)];
        let len = words.len() as u32;
        let mut h = len as u64;
        for w in words {
            h = (h ^ w.0).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
        let slot = (h >> 52) as usize % LIST_SLOTS;
        if self.short_lists.is_empty() {
            self.short_lists = vec![(0, 0); LIST_SLOTS];
        }
        if let Some(&(start, n)) = self.short_lists.get(slot) {
            if n == len && self.vals_at(start, n).vals == words {
                return Val::List { start, len };
            }
        }
        let start = self.vals.len() as u32;
        self.vals.extend_from_slice(words);
        if let Some(e) = self.short_lists.get_mut(slot) {
            *e = (start, len);
        }
        Val::List { start, len }
    }
    pub fn new_obj(&mut self, items: &[(KeyId, Val)]) -> Val {
        let shape = self.shape_of(items.iter().map(|(k, _)| *k));
        let start = self.vals.len() as u32;
        let n = items.len();
        let templating = self
            .shapes
            .get(shape as usize)
            .is_some_and(|l| l.made < TMPL_PER_SHAPE);
        if n > TMPL_MEMBERS || !templating {
            self.push_vals(items.iter().map(|&(_, v)| v));
            return Val::Obj { start, shape };
        }
        // The template this object would have: its repeating words, holes for the others.
        let mut words = [Packed(0); TMPL_MEMBERS];
        let mut tmpl = [Packed(0); TMPL_MEMBERS + 1];
        tmpl[0] = Packed(u64::from(shape));
        let mut own = 0u64;
        for (i, &(_, v)) in items.iter().enumerate() {
            let p = self.pack(v);
            words[i] = p;
            tmpl[i + 1] = if p.repeats() {
                p
            } else {
                own += 1;
                Packed(T_HOLE << 48 | (own - 1))
            };
        }
        let layout = if own == n as u64 {
            None
        } else {
            self.template(&tmpl[..n + 1], own as u32)
        };
        match layout {
            Some(id) => {
                for (w, t) in words.iter().zip(&tmpl[1..n + 1]) {
                    if t.is_hole() {
                        self.vals.push(*w);
                    }
                }
                Val::Obj { start, shape: id }
            }
            None => {
                self.vals.extend_from_slice(&words[..n]);
                Val::Obj { start, shape }
            }
        }
    }
    /// The layout with template `key[1..]` on plain layout `key[0]`, made if new and allowed.
    fn template(&mut self, key: &[Packed], own: u32) -> Option<u32> {
        let mut h = key.len() as u64;
        for w in key {
            h = (h ^ w.0).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
        let slot = (h >> 40) as usize % TMPL_SLOTS;
        if let Some(&c) = self.tmpl_cache.get(slot) {
            if let Some(l) = c.checked_sub(1).and_then(|id| self.shapes.get(id as usize)) {
                let words = self
                    .tmpl_words
                    .get(l.tmpl as usize..(l.tmpl + l.len) as usize);
                if u64::from(l.base) == key[0].0 && words == key.get(1..) {
                    return Some(c - 1);
                }
            }
        }
        let id = match self.tmpl_ids.get(key) {
            Some(&id) => id,
            None => {
                let base = key[0].0 as usize;
                let b = *self.shapes.get(base)?;
                if b.made >= TMPL_PER_SHAPE || self.shapes.len() >= TMPL_LAYOUTS {
                    return None;
                }
                if let Some(p) = self.shapes.get_mut(base) {
                    p.made += 1;
                }
                let id = self.shapes.len() as u32;
                self.shapes.push(Layout {
                    tmpl: self.tmpl_words.len() as u32,
                    own,
                    base: base as u32,
                    made: 0,
                    ..b
                });
                self.tmpl_words.extend_from_slice(&key[1..]);
                self.tmpl_ids.insert(key.into(), id);
                id
            }
        };
        if self.tmpl_cache.is_empty() {
            self.tmpl_cache = vec![0; TMPL_SLOTS];
        }
        if let Some(e) = self.tmpl_cache.get_mut(slot) {
            *e = id + 1;
        }
        Some(id)
    }
    /// The id of the key list `keys`' plain layout (added if new).
    fn shape_of(&mut self, keys: impl Iterator<Item = KeyId> + Clone) -> u32 {
        // Consecutive objects mostly share their keys (the tensors of a dump): try the last first.
        if let Some(l) = self.shapes.get(self.last_shape as usize) {
            if self.shape_keys[l.keys as usize..(l.keys + l.len) as usize]
                .iter()
                .copied()
                .eq(keys.clone())
            {
                return self.last_shape;
            }
        }
        let list: Box<[KeyId]> = keys.collect();
        if let Some(&id) = self.shape_ids.get(&list) {
            self.last_shape = id;
            return id;
        }
        let id = self.shapes.len() as u32;
        self.shapes.push(Layout {
            keys: self.shape_keys.len() as u32,
            len: list.len() as u32,
            tmpl: NO_TMPL,
            own: list.len() as u32,
            base: id,
            made: 0,
        });
        self.shape_keys.extend_from_slice(&list);
        self.shape_ids.insert(list, id);
        self.last_shape = id;
        id
    }
    /// How many members object `v` has (0 if not an object).
    pub fn obj_len(&self, v: Val) -> usize {
        match v {
            Val::Obj { shape, .. } => self
                .shapes
                .get(shape as usize)
                .map_or(0, |l| l.len as usize),
            _ => 0,
        }
    }
}

/// The members of an object: keys and values side by side.
#[derive(Debug, Clone, Copy, Default)]
pub struct Obj<'a> {
    keys: &'a [KeyId],
    vals: Vals<'a>,
}

impl<'a> Obj<'a> {
    pub fn len(&self) -> usize {
        self.keys.len().min(self.vals.len())
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// (key, value) in order.
    pub fn iter(&self) -> ObjIter<'a> {
        self.keys.iter().copied().zip(self.vals.iter())
    }
    /// The value of `k`.
    pub fn get(&self, k: KeyId) -> Option<Val> {
        self.keys
            .iter()
            .position(|x| *x == k)
            .and_then(|i| self.vals.get(i))
    }
    pub fn to_vec(&self) -> Vec<(KeyId, Val)> {
        self.iter().collect()
    }
    pub fn keys(&self) -> &'a [KeyId] {
        self.keys
    }
    pub fn vals(&self) -> Vals<'a> {
        self.vals
    }
}

/// The members of an [`Obj`], in order.
pub type ObjIter<'a> = std::iter::Zip<std::iter::Copied<std::slice::Iter<'a, KeyId>>, ValIter<'a>>;

impl<'a> IntoIterator for Obj<'a> {
    type Item = (KeyId, Val);
    type IntoIter = ObjIter<'a>;
    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

/// Entries of [`KeyTable::short`].
const SHORT_SLOTS: usize = 256;

/// The longest list [`Store`] looks up among the lists it holds, and its cache's slots.
const SHORT_LIST: usize = 8;
const LIST_SLOTS: usize = 4096;

/// A key of at most 16 bytes as two little-endian words, zero-padded: with its length, they
/// are the key. Built from whole loads (no byte copies through memory).
#[inline]
fn short_words(b: &[u8]) -> Option<(u64, u64)> {
    let n = b.len();
    let rd8 = |i: usize| {
        b.get(i..)
            .and_then(<[u8]>::first_chunk::<8>)
            .map(|c| u64::from_le_bytes(*c))
    };
    let rd4 = |i: usize| {
        b.get(i..)
            .and_then(<[u8]>::first_chunk::<4>)
            .map(|c| u64::from(u32::from_le_bytes(*c)))
    };
    let rd1 = |i: usize| b.get(i).map_or(0, |&x| u64::from(x));
    match n {
        0 => Some((0, 0)),
        // Bytes 0, n/2 and n-1 cover a key of 1 to 3 bytes.
        1..=3 => Some((
            rd1(0) | rd1(n / 2) << (8 * (n / 2)) | rd1(n - 1) << (8 * (n - 1)),
            0,
        )),
        // Two overlapping 4-byte loads; where they overlap they agree.
        4..=7 => Some((rd4(0)? | rd4(n - 4)? << (8 * (n - 4)), 0)),
        8 => Some((rd8(0)?, 0)),
        // The last 8 bytes, shifted down past the ones the first word holds.
        9..=16 => Some((rd8(0)?, rd8(n - 8)? >> (8 * (16 - n)))),
        _ => None,
    }
}

/// The cache slot of a short key (a cache: collisions only cost a table lookup).
#[inline]
fn short_slot(w: (u64, u64), len: usize) -> usize {
    let x = w.0 ^ w.1.rotate_left(29) ^ len as u64;
    (x.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 56) as usize % SHORT_SLOTS
}

impl KeyTable {
    /// The id of the short key `short_words` gives `w` for (with its length), if cached.
    #[inline(always)]
    fn cached(&self, w: (u64, u64), len: usize) -> Option<KeyId> {
        let &(c0, c1, cl, id) = self.short.get(short_slot(w, len))?;
        ((c0, c1) == w && cl as usize == len && id != 0).then(|| KeyId(id - 1))
    }

    #[inline]
    fn hash(&self, s: &str) -> u32 {
        use std::hash::BuildHasher;
        let h = self.state.hash_one(s);
        (h ^ (h >> 32)) as u32
    }

    /// The id of `s`, or the empty slot where it would go.
    #[inline]
    fn find(&self, keys: &[Box<str>], s: &str, h: u32) -> Result<KeyId, usize> {
        let mask = self.slots.len().wrapping_sub(1);
        let mut i = h as usize & mask;
        // The table is at most half full, so the probe meets an empty slot.
        while let Some(&(sh, id)) = self.slots.get(i) {
            if id == 0 {
                return Err(i);
            }
            if sh == h && keys.get(id as usize - 1).is_some_and(|k| **k == *s) {
                return Ok(KeyId(id - 1));
            }
            i = (i + 1) & mask;
        }
        Err(usize::MAX)
    }

    /// Records new key `k` (hash `h`) at the empty `slot` `find` returned; `count` keys exist now.
    fn insert(&mut self, slot: usize, h: u32, k: KeyId, count: usize) {
        if count * 2 > self.slots.len() {
            let cap = (self.slots.len() * 2).max(16);
            let old = std::mem::replace(&mut self.slots, vec![(0, 0); cap]);
            for (oh, id) in old {
                if id != 0 {
                    self.place(oh, id);
                }
            }
            self.place(h, k.0 + 1);
        } else if let Some(e) = self.slots.get_mut(slot) {
            *e = (h, k.0 + 1);
        }
    }

    fn place(&mut self, h: u32, id: u32) {
        let mask = self.slots.len().wrapping_sub(1);
        let mut i = h as usize & mask;
        while let Some(e) = self.slots.get_mut(i) {
            if e.1 == 0 {
                *e = (h, id);
                return;
            }
            i = (i + 1) & mask;
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
    wide: usize,
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

/// The eight bytes at `s[i..]` as a word if they are all ASCII digits.
#[inline(always)]
fn eight_digits_at(s: &[u8], i: usize) -> Option<u64> {
    let w = u64::from_le_bytes(*s.get(i..)?.first_chunk::<8>()?);
    // Every byte 0x30..=0x39: high nibble 3, and still 3 after adding 6 (no carry can cross a
    // byte once the first test holds).
    let hi = 0xF0F0_F0F0_F0F0_F0F0;
    let all = (w & hi) == ONES * 0x30 && (w.wrapping_add(ONES * 6) & hi) == ONES * 0x30;
    all.then_some(w)
}

/// The value of eight ASCII digits loaded little-endian (the first digit is the lowest byte).
#[inline(always)]
fn eight_digits_value(w: u64) -> u64 {
    let w = w - ONES * 0x30;
    // Pairs, then quadruples, then the whole: 10*a+b in each 16-bit lane, and so on.
    let w = (w * 10 + (w >> 8)) & 0x00FF_00FF_00FF_00FF;
    let w = (w * 100 + (w >> 16)) & 0x0000_FFFF_0000_FFFF;
    (w.wrapping_mul(10_000) + (w >> 32)) & 0xFFFF_FFFF
}

/// Powers of five below 2^64.
const POW5: [u64; 28] = {
    let mut t = [1u64; 28];
    let mut i = 1;
    while i < 28 {
        t[i] = t[i - 1] * 5;
        i += 1;
    }
    t
};

/// Exact powers of ten (10^22 is the last one an f64 holds exactly).
const POW10: [f64; 23] = [
    1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16,
    1e17, 1e18, 1e19, 1e20, 1e21, 1e22,
];

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
    #[inline]
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

    /// Fastest path for an object key (the opening quote is next): a key of at most 15 bytes
    /// without escapes that `store` has in its short-key cache, read as two words straight from
    /// the input. None (position unchanged) otherwise. (A cached key's bytes are a stored key's,
    /// so they are valid UTF-8.)
    #[inline(always)]
    fn short_key(&mut self, store: &Store) -> Option<KeyId> {
        let buf = self.buf;
        let start = self.pos + 1;
        let w0 = u64::from_le_bytes(*buf.get(start..)?.first_chunk::<8>()?);
        let w1 = u64::from_le_bytes(*buf.get(start + 8..)?.first_chunk::<8>()?);
        // The bytes before the first stop (n < 8, so the shifts are in range).
        let below = |n: u32| (1u64 << n) - 1;
        let stops0 = string_stops(w0);
        let (len, w) = if stops0 != 0 {
            let n = stops0.trailing_zeros() & !7;
            (n as usize / 8, (w0 & below(n), 0))
        } else {
            let stops1 = string_stops(w1);
            if stops1 == 0 {
                return None;
            }
            let n = stops1.trailing_zeros() & !7;
            (8 + n as usize / 8, (w0, w1 & below(n)))
        };
        if buf.get(start + len) != Some(&b'"') {
            return None;
        }
        let k = store.key_ids.cached(w, len)?;
        self.pos = start + len + 1;
        Some(k)
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

    /// Reads a run of digits into `mant` (wrapping: exact while it has at most 19 significant
    /// digits), eight at a time when it can.
    fn digits_into(&mut self, mant: &mut u64) {
        let buf = self.buf;
        while let Some(w) = eight_digits_at(buf, self.pos) {
            *mant = mant
                .wrapping_mul(100_000_000)
                .wrapping_add(eight_digits_value(w));
            self.pos += 8;
        }
        while let Some(d) = buf
            .get(self.pos)
            .map(|b| b.wrapping_sub(b'0'))
            .filter(|d| *d < 10)
        {
            *mant = mant.wrapping_mul(10).wrapping_add(u64::from(d));
            self.pos += 1;
        }
    }

    #[inline(always)]
    fn number(&mut self, store: &mut Store) -> Result<Val, Box<SyntaxError>> {
        let start = self.pos;
        let buf = self.buf;
        let neg = buf.get(self.pos) == Some(&b'-');
        if neg {
            self.pos += 1;
            if self.lit(b"Infinity") {
                return Ok(Val::Float(f64::NEG_INFINITY));
            }
        }
        // The digits (integer and fraction) accumulate into `mant`, eight at a time when they
        // can; it is exact while there are at most 19 significant digits.
        let mut mant: u64 = 0;
        let digits_start = self.pos;
        self.digits_into(&mut mant);
        let int_digits = self.pos - digits_start;
        if int_digits == 0 {
            return Ok(self.err("invalid number")?);
        }
        if buf.get(digits_start) == Some(&b'0') && int_digits > 1 {
            self.pos = digits_start + 1;
            return Ok(self.err("invalid number (leading zero)")?);
        }
        let mut is_float = false;
        let mut frac_digits = 0;
        // Digits that count for `mant`'s size: all but leading zeros (as in "0.000123").
        let mut sig_digits = int_digits;
        if buf.get(self.pos) == Some(&b'.') {
            is_float = true;
            self.pos += 1;
            let s = self.pos;
            // The integer part is "0": the fraction's leading zeros do not count either. (Not
            // `mant == 0`: a long integer part can wrap it to 0.)
            let int_zero = int_digits == 1 && buf.get(digits_start) == Some(&b'0');
            let zeros = if int_zero {
                let rest = buf.get(s..).unwrap_or(&[]);
                rest.iter().take_while(|&&b| b == b'0').count()
            } else {
                0
            };
            self.digits_into(&mut mant);
            frac_digits = self.pos - s;
            if frac_digits == 0 {
                return Ok(self.err("invalid number (no digits after '.')")?);
            }
            sig_digits = if int_zero {
                frac_digits - zeros
            } else {
                int_digits + frac_digits
            };
        }
        // The exponent, saturated far beyond where the fast path applies.
        let mut exp: i64 = 0;
        if matches!(buf.get(self.pos), Some(b'e') | Some(b'E')) {
            is_float = true;
            self.pos += 1;
            let exp_neg = buf.get(self.pos) == Some(&b'-');
            if matches!(buf.get(self.pos), Some(b'+') | Some(b'-')) {
                self.pos += 1;
            }
            let s = self.pos;
            while let Some(d) = buf
                .get(self.pos)
                .map(|b| b.wrapping_sub(b'0'))
                .filter(|d| *d < 10)
            {
                exp = (exp * 10 + i64::from(d)).min(1 << 20);
                self.pos += 1;
            }
            if self.pos == s {
                return Ok(self.err("invalid number (no digits in exponent)")?);
            }
            if exp_neg {
                exp = -exp;
            }
        }
        if is_float {
            // The value is mant * 10^e10, mant exact below 10^19. Each fast path rounds once,
            // correctly (to nearest, ties to even): the very bits `str::parse::<f64>` gives.
            // Anything else goes to `str::parse`.
            let e10 = exp - frac_digits as i64;
            if sig_digits <= 19 {
                let x = if mant <= 1 << 53 && (-22..=22).contains(&e10) {
                    // Clinger: mant and 10^|e10| are exact f64s; one IEEE operation rounds.
                    let m = mant as f64;
                    let p = POW10[e10.unsigned_abs() as usize];
                    Some(if e10 < 0 { m / p } else { m * p })
                } else if mant != 0 && (-27..=-1).contains(&e10) {
                    // mant / 10^k = mant / 5^k * 2^-k, 5^k < 2^64. n = mant << s has its top
                    // bit at 127, so q = n / 5^k >= 2^127 / 5^27 > 2^64: 65 bits or more. With
                    // the remainder as a sticky bit, q2 = 2q + (r != 0) rounds like the exact
                    // 2n / 5^k (the two lie strictly between the same consecutive even
                    // integers, and with 66 bits every rounding boundary is even), and
                    // `u128 as f64` rounds correctly. The power of two scales exactly (the
                    // result is far from the subnormals).
                    let k = e10.unsigned_abs() as usize;
                    let s = mant.leading_zeros() + 64;
                    let (q, rem) = div_shifted(mant << (s - 64), POW5[k]);
                    let q2 = q << 1 | u128::from(rem);
                    let scale = s as u64 + 1 + k as u64;
                    Some(q2 as f64 * f64::from_bits((1023 - scale) << 52))
                } else if (0..=22).contains(&e10) {
                    // An exact integer product, rounded once by `u128 as f64`.
                    u128::from(mant)
                        .checked_mul(10u128.pow(e10 as u32))
                        .map(|p| p as f64)
                } else {
                    None
                };
                if let Some(x) = x {
                    return Ok(Val::Float(if neg { -x } else { x }));
                }
            }
        } else if int_digits <= 18 {
            // At most 18 digits: below 10^18, an i64 either way.
            let i = mant as i64;
            return Ok(Val::Int(if neg { -i } else { i }));
        }
        let text = buf.get(start..self.pos).unwrap_or(b"0");
        // SAFETY: the bytes were all matched above as '-', '+', '.', 'e', 'E' or digits: ASCII,
        // which is UTF-8.
        let text = unsafe { std::str::from_utf8_unchecked(text) };
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
        let base = self.stack_vals.len();
        self.push_value(store, depth, None).map_err(|e| *e)?;
        let v = self.stack_vals.get(base).copied().unwrap_or(Val::Null);
        self.stack_vals.truncate(base);
        Ok(v)
    }

    /// [`Reader::push_value`] for an element or member: strings without escapes, numbers and
    /// literals are read here, inline; anything else (and every error) goes through
    /// `push_value`.
    #[inline(always)]
    fn push_child(
        &mut self,
        store: &mut Store,
        depth: usize,
        key: Option<KeyId>,
    ) -> Result<(), Box<SyntaxError>> {
        if depth > MAX_DEPTH {
            return self.push_value(store, depth, key);
        }
        // Python's separators put one space after ':'.
        if self.buf.get(self.pos) == Some(&b' ') {
            self.pos += 1;
        }
        let v = match self.peek() {
            Some(b'"') => {
                let Some(s) = self.plain_str() else {
                    return self.push_value(store, depth, key);
                };
                Val::Str(store.push_str(s))
            }
            Some(b'-' | b'0'..=b'9') => self.number(store)?,
            Some(b't') if self.lit(b"true") => Val::Bool(true),
            Some(b'f') if self.lit(b"false") => Val::Bool(false),
            Some(b'n') if self.lit(b"null") => Val::Null,
            _ => return self.push_value(store, depth, key),
        };
        match key {
            None => self.stack_vals.push(v),
            Some(k) => self.stack_pairs.push((k, v)),
        }
        Ok(())
    }

    /// [`Reader::value`], the value pushed where its parent collects it: on `stack_vals`, or with
    /// `key` on `stack_pairs`. Values are written once, in place; returning them (a 16-byte enum,
    /// through memory) and copying them again cost more than parsing them. The error is boxed.
    fn push_value(
        &mut self,
        store: &mut Store,
        depth: usize,
        key: Option<KeyId>,
    ) -> Result<(), Box<SyntaxError>> {
        if depth > MAX_DEPTH {
            return Err(Box::new(SyntaxError {
                offset: self.pos,
                msg: format!("nesting deeper than {MAX_DEPTH} levels"),
            }));
        }
        let v = match self.peek() {
            None => return Ok(self.err("unexpected end of file, expected a value")?),
            Some(b'{') => {
                self.pos += 1;
                let base = self.stack_pairs.len();
                let mut seen: Option<HashMap<KeyId, usize>> = None;
                // Bit `id % 64` of every key on the stack: most keys find their bit clear and
                // need no duplicate look-up at all.
                let mut bits = 0u64;
                if self.peek() == Some(b'}') {
                    self.pos += 1;
                } else {
                    loop {
                        if self.peek() != Some(b'"') {
                            let here = self.describe_here();
                            return Ok(self.err(format!("expected a string key, found {here}"))?);
                        }
                        let known = store.keys.len();
                        let k = match self.short_key(store) {
                            Some(k) => k,
                            None => match self.plain_str() {
                                Some(k) => store.intern_key(k),
                                None => {
                                    let k = self.read_str()?;
                                    store.intern_key(k)
                                }
                            },
                        };
                        // A key interned just now cannot be a duplicate, nor one whose bit is clear.
                        let bit = 1u64 << (k.0 % 64);
                        let no_dup = k.0 as usize >= known || bits & bit == 0;
                        bits |= bit;
                        if self.buf.get(self.pos) == Some(&b':') {
                            self.pos += 1;
                        } else {
                            self.expect(b':')?;
                        }
                        // The pair goes on the stack; a duplicate key moves its value back.
                        self.push_child(store, depth + 1, Some(k))?;
                        // Duplicate keys: a scan while the object is small, a hash index once it
                        // is large (construct.json has one key per node), built when a key that
                        // could be a duplicate first comes.
                        let n = self.stack_pairs.len() - 1 - base;
                        let dup = if no_dup {
                            None
                        } else {
                            if n >= 32 && seen.is_none() {
                                seen = Some(
                                    self.stack_pairs[base..base + n]
                                        .iter()
                                        .enumerate()
                                        .map(|(i, p)| (p.0, i))
                                        .collect(),
                                );
                            }
                            match &seen {
                                Some(m) => m.get(&k).copied(),
                                None => self.stack_pairs[base..base + n]
                                    .iter()
                                    .position(|p| p.0 == k),
                            }
                        };
                        if let Some(i) = dup {
                            if let Some((_, v)) = self.stack_pairs.pop() {
                                self.stack_pairs[base + i].1 = v;
                            }
                        } else if let Some(m) = &mut seen {
                            m.insert(k, n);
                        }
                        if !self.comma_or_close(b'}')? {
                            break;
                        }
                    }
                }
                let v = store.new_obj(self.stack_pairs.get(base..).unwrap_or(&[]));
                self.stack_pairs.truncate(base);
                v
            }
            Some(b'[') => {
                self.pos += 1;
                let base = self.stack_vals.len();
                if self.peek() == Some(b']') {
                    self.pos += 1;
                } else {
                    loop {
                        self.push_child(store, depth + 1, None)?;
                        if !self.comma_or_close(b']')? {
                            break;
                        }
                    }
                }
                let v = store.new_list(self.stack_vals.get(base..).unwrap_or(&[]));
                self.stack_vals.truncate(base);
                v
            }
            Some(b'"') => match self.plain_str() {
                Some(s) => Val::Str(store.push_str(s)),
                None => {
                    let s = self.read_str()?;
                    // `scratch` is borrowed; copy into the store's buffer.
                    Val::Str(store.push_str(s))
                }
            },
            Some(b't') if self.lit(b"true") => Val::Bool(true),
            Some(b'f') if self.lit(b"false") => Val::Bool(false),
            Some(b'n') if self.lit(b"null") => Val::Null,
            Some(b'N') if self.lit(b"NaN") => Val::Float(f64::NAN),
            Some(b'I') if self.lit(b"Infinity") => Val::Float(f64::INFINITY),
            Some(b'-') | Some(b'0'..=b'9') => self.number(store)?,
            Some(_) => {
                let here = self.describe_here();
                return Ok(self.err(format!("expected a value, found {here}"))?);
            }
        };
        match key {
            None => self.stack_vals.push(v),
            Some(k) => self.stack_pairs.push((k, v)),
        }
        Ok(())
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
        s.as_str(s.list(v).get(0).unwrap()).unwrap().to_string()
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
                assert_eq!(s.key(s.obj(v).keys()[0]), key);
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
                    (&s.vals, &s.text, v, crate::formats::pyfmt::py_str(&s, v)),
                    (
                        &s0.vals,
                        &s0.text,
                        v0,
                        crate::formats::pyfmt::py_str(&s0, v0)
                    )
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

    /// The number a literal reads as, as `str::parse` defines it.
    fn expected(text: &str) -> Val {
        if text.contains(['.', 'e', 'E']) {
            Val::Float(text.parse::<f64>().unwrap())
        } else {
            match text.parse::<i64>() {
                Ok(i) => Val::Int(i),
                Err(_) => Val::BigInt(StrRef {
                    off: 0,
                    len: text.len() as u32,
                }),
            }
        }
    }

    fn check_number(text: &str) {
        let (s, v) = parse(text.as_bytes()).unwrap_or_else(|e| panic!("{text}: {e:?}"));
        match (v, expected(text)) {
            (Val::Float(a), Val::Float(b)) => {
                assert_eq!(a.to_bits(), b.to_bits(), "{text}: {a:e} vs {b:e}")
            }
            (Val::BigInt(r), Val::BigInt(_)) => assert_eq!(s.str(r), text),
            (a, b) => assert_eq!(a, b, "{text}"),
        }
    }

    #[test]
    fn numbers_read_as_str_parse_does() {
        let literals = "\
            0 -0 0.0 -0.0 0.1 0.5 1.5 -1.5 1e308 1e309 -1e309 1e-400 2.2250738585072014e-308 \
            2.2250738585072011e-308 4.9e-324 1.7976931348623157e308 123456789012345678 \
            999999999999999999 1000000000000000000 9223372036854775807 -9223372036854775808 \
            9223372036854775808 -9223372036854775809 12345678901234567890123 9007199254740993 \
            9007199254740993.0 9007199254740993e0 9.007199254740993e15 900719925474099.3e1 \
            9007199254740995.0 4503599627370496.5 4503599627370497.5 2251799813685248.25 \
            2251799813685248.75 1125899906842624.125 4503599627370496.4999 4503599627370496.5001 \
            0.9026454144228374 5.106133460974885 -8.944840199797821e-05 0.00025651113502035705 \
            0.1234567890123456789 0.12345678901234567891 1234567890123456789.0 \
            12345678901234567890.0 1.2345678901234567e-27 1.2345678901234567e-28 1e-27 1e-28 1e22 \
            1e23 1.5e22 123456789012345678e4 0.0e-25 0e-30 0e400 1E5 1e+5 1e-5 1.0E+2 \
            0.000000000000000000001 3.0000000000000004 0.30000000000000004 \
            100000000000000000000000.0 1e0000000000000000000000000000001 \
            1e-0000000000000000000000000000001 18446744073709551616.0 18446744073709551616 \
            36893488147419103232.5 1180591620717411303424e-3 0.18446744073709551616";
        for t in literals.split_whitespace() {
            check_number(t);
        }
        // The largest double, written out: an integer part that wraps a u64 to 0.
        check_number(&format!("17976931348623157{}.0", "0".repeat(292)));
    }

    /// Decimal literals of every shape the fast paths take or refuse, against `str::parse`.
    #[test]
    fn generated_numbers_read_as_str_parse_does() {
        let mut g = Lcg(7);
        let digits = |g: &mut Lcg, n: usize, lead: bool| -> String {
            (0..n)
                .map(|i| {
                    let d = if i == 0 && lead {
                        1 + g.below(9)
                    } else {
                        g.below(10)
                    };
                    (b'0' + d as u8) as char
                })
                .collect()
        };
        for i in 0..300_000 {
            let mut t = String::new();
            if g.below(2) == 0 {
                t.push('-');
            }
            match g.below(4) {
                // An integer part and a fraction, 1 to 22 digits in all.
                0 | 1 => {
                    let n = 1 + g.below(22) as usize;
                    let int = g.below(n as u64 + 1) as usize;
                    if int == 0 {
                        t.push('0');
                    } else {
                        t.push_str(&digits(&mut g, int, true));
                    }
                    if n > int || g.below(2) == 0 {
                        t.push('.');
                        let zeros = if int == 0 { g.below(8) as usize } else { 0 };
                        t.push_str(&"0".repeat(zeros));
                        t.push_str(&digits(&mut g, (n - int).max(1), false));
                    }
                }
                // Python's repr of a random double, positional or with an exponent.
                2 => {
                    let x = f64::from_bits(g.next() << 33 ^ g.next());
                    if !x.is_finite() {
                        continue;
                    }
                    t = if i % 2 == 0 {
                        format!("{x:?}")
                    } else {
                        format!("{x:e}")
                    };
                    if !t.contains(['.', 'e']) {
                        t.push_str(".0");
                    }
                }
                // Halfway between two doubles (and just beside it), exactly, in few digits:
                // m + 1/2^j for m in [2^(52-j+1), 2^(53-j+1)).
                _ => {
                    let j = g.below(4) as u32;
                    let m = (1u64 << (52 - j)) + g.below(1 << (52 - j));
                    let frac = 5u64.pow(j + 1) * (2 * g.below(1 << j) + 1);
                    let mut f = format!("{frac:0w$}", w = j as usize + 1);
                    match g.below(3) {
                        0 => {}
                        1 => f.push('1'),
                        _ => {
                            // Just below: subtract one in the last place.
                            let v: u64 = f.parse().unwrap();
                            f = format!("{:0w$}9", v - 1, w = j as usize + 1);
                        }
                    }
                    t.push_str(&format!("{m}.{f}"));
                }
            }
            if g.below(3) == 0 && !t.contains(['e', 'E']) {
                let e = g.below(61) as i64 - 30;
                t.push_str(&format!("{}{e}", if g.below(2) == 0 { "e" } else { "E" }));
            }
            check_number(&t);
        }
    }

    /// The wide division of the decimal fast path agrees with `u128` division.
    #[test]
    fn wide_division_matches_u128() {
        let mut g = Lcg(11);
        let mut cases: Vec<(u64, u64)> = vec![
            (u64::MAX, 1),
            (u64::MAX, u64::MAX),
            (1 << 63, 7_450_580_596_923_828_125),
            (u64::MAX, 5),
            (1, 3),
            (0, 9),
        ];
        for _ in 0..1_000_000 {
            let hi = g.next() << 1 | (g.next() & 1);
            let d = match g.below(3) {
                0 => POW5[1 + g.below(27) as usize],
                1 => (g.next() >> g.below(64)).max(1),
                _ => g.next().max(1),
            };
            cases.push((hi, d));
        }
        for (hi, d) in cases {
            let n = u128::from(hi) << 64;
            let want = (n / u128::from(d), n % u128::from(d) != 0);
            assert_eq!(div_shifted(hi, d), want, "{hi} / {d}");
        }
    }

    #[test]
    fn eight_digits_match_their_value() {
        let mut g = Lcg(3);
        for _ in 0..100_000 {
            let n = g.below(100_000_000);
            let text = format!("{n:08}");
            let w = eight_digits_at(text.as_bytes(), 0).unwrap();
            assert_eq!(eight_digits_value(w), n);
        }
        for bad in [b'/', b':', b'a', b' ', b'.', 0x80, 0xb0, 0x00] {
            for pos in 0..8 {
                let mut t = *b"12345678";
                t[pos] = bad;
                assert!(eight_digits_at(&t, 0).is_none());
            }
        }
        assert!(eight_digits_at(b"1234567", 0).is_none());
    }

    #[test]
    fn interned_keys_stay_distinct() {
        let mut st = Store::default();
        let mut keys: Vec<String> = Vec::new();
        // Keys of every length around the short-key words, differing in their last character
        // (a NUL too, which zero-padding must not confuse with a shorter key).
        for len in 0..=20 {
            for c in ['a', 'b', '\0', '\u{e9}'] {
                let mut k: String = (0..len).map(|i| (b'a' + (i % 26) as u8) as char).collect();
                k.push(c);
                keys.push(k);
            }
        }
        keys.push(String::new());
        for i in 0..5000 {
            keys.push(format!("k{i}"));
            keys.push(format!("Module.layers.{i}.mlp.forward.0"));
        }
        keys.sort();
        keys.dedup();
        let ids: Vec<KeyId> = keys.iter().map(|k| st.intern_key(k)).collect();
        for (k, id) in keys.iter().zip(&ids) {
            assert_eq!(st.key(*id), k);
            assert_eq!(st.find_key(k), Some(*id));
            assert_eq!(st.intern_key(k), *id);
        }
        let mut sorted = ids.clone();
        sorted.sort();
        sorted.dedup();
        assert_eq!(sorted.len(), keys.len());
        assert_eq!(st.find_key("absent"), None);
        assert_eq!(st.find_key("zz\u{0}"), None);
        assert_eq!(st.clone().find_key("k42"), st.find_key("k42"));
    }

    /// Duplicate detection with keys whose ids share a bit of the object's 64-bit filter.
    #[test]
    fn duplicate_keys_with_colliding_filter_bits() {
        let mut doc = String::from("{");
        for i in 0..70 {
            doc.push_str(&format!("\"{i}\": {{\"k{i}\": {i}}}, "));
        }
        doc.push_str("\"x\": {");
        // k0 and k64 (ids 1 and 129) share a bit; only k0 is a duplicate.
        doc.push_str("\"k0\": 1, \"k64\": 2, \"k0\": 3, \"k1\": 4}}");
        let (s, v) = parse(doc.as_bytes()).unwrap();
        let x = s.get(v, "x").unwrap();
        let keys: Vec<&str> = s.obj(x).iter().map(|(k, _)| s.key(k)).collect();
        assert_eq!(keys, ["k0", "k64", "k1"]);
        assert_eq!(s.get(x, "k0"), Some(Val::Int(3)));
    }

    #[test]
    fn depth_limit_holds_for_inline_values() {
        for (n, ok) in [(512, true), (513, false)] {
            for inner in ["1", "\"s\"", "true", "null", "[]", "{}"] {
                let doc = format!("{}{inner}{}", "[".repeat(n), "]".repeat(n));
                let r = parse(doc.as_bytes());
                assert_eq!(r.is_ok(), ok, "{n} {inner}");
                if let Err(e) = r {
                    // Right after the 513th '['.
                    assert_eq!(
                        (e.offset, e.msg.as_str()),
                        (513, "nesting deeper than 512 levels")
                    );
                }
                let doc = format!("{}{inner}{}", "{\"a\": ".repeat(n), "}".repeat(n));
                let r = parse(doc.as_bytes());
                assert_eq!(r.is_ok(), ok, "{n} {inner}");
                if let Err(e) = r {
                    // Right after the 513th ':' (before the space), as `value` always said.
                    assert_eq!(e.offset, 513 * 6 - 1, "{inner}");
                }
            }
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

/// `(hi << 64) / d` and whether a remainder is left (`d > 0`): two 64-bit divisions and one of a
/// 128-bit number by a 64-bit one whose quotient fits 64 bits. `u128` division is a library call
/// (`__udivti3`) on wasm32 that costs several times more.
fn div_shifted(hi: u64, d: u64) -> (u128, bool) {
    let (q1, r1) = (hi / d, hi % d);
    let (q0, r0) = div_128_by_64(r1, d);
    ((u128::from(q1) << 64) | u128::from(q0), r0 != 0)
}

/// `(u1 << 64) / v` and its remainder for `u1 < v`: Knuth's algorithm D with 32-bit digits
/// (Hacker's Delight, `divlu`).
fn div_128_by_64(u1: u64, v: u64) -> (u64, u64) {
    const B: u64 = 1 << 32;
    let s = v.leading_zeros();
    let v = v << s;
    let (vn1, vn0) = (v >> 32, v & (B - 1));
    // The numerator (u1:0) shifted left by s (u1 < v keeps it within 128 bits); its low word
    // and so both its low digits are 0.
    let un32 = u1 << s;
    let mut q1 = un32 / vn1;
    let mut rhat = un32 - q1 * vn1;
    // q1 * vn0 is only formed below B * B (the test of q1 >= B comes first).
    while q1 >= B || q1 * vn0 > rhat << 32 {
        q1 -= 1;
        rhat += vn1;
        if rhat >= B {
            break;
        }
    }
    let un21 = (un32 << 32).wrapping_sub(q1.wrapping_mul(v));
    let mut q0 = un21 / vn1;
    rhat = un21 - q0 * vn1;
    while q0 >= B || q0 * vn0 > rhat << 32 {
        q0 -= 1;
        rhat += vn1;
        if rhat >= B {
            break;
        }
    }
    let rem = ((un21 << 32).wrapping_sub(q0.wrapping_mul(v))) >> s;
    ((q1 << 32) + q0, rem)
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

    /// Objects whose small members repeat share them in a template and keep only their
    /// numbers; every member reads back as written, in order, forwards and backwards.
    #[test]
    fn repeating_members_go_in_a_template() {
        let tensor = |max: &str, rg: bool| {
            format!(
                r#"{{"type": "torch.Tensor", "dtype": "torch.float32", "shape": [2, 16], "Max": {max}, "Min": -1.5, "Mean": null, "Norm": 2, "requires_grad": {rg}}}"#
            )
        };
        let text = format!(
            "[{}, {}, {}, {{\"type\": \"int\", \"value\": 3}}, {{\"type\": \"bool\", \"value\": true}}]",
            tensor("0.5", true),
            tensor("1e300", true),
            tensor("7", false)
        );
        let (s, v) = parse(text.as_bytes()).unwrap();
        let l = s.list(v);
        let back: Vec<String> = l
            .iter()
            .map(|x| crate::formats::pyfmt::py_str(&s, x))
            .collect();
        let want = |max: &str, rg: &str| {
            format!("{{'type': 'torch.Tensor', 'dtype': 'torch.float32', 'shape': [2, 16], 'Max': {max}, 'Min': -1.5, 'Mean': None, 'Norm': 2, 'requires_grad': {rg}}}")
        };
        assert_eq!(
            back,
            [
                want("0.5", "True"),
                want("1e+300", "True"),
                want("7", "False"),
                "{'type': 'int', 'value': 3}".to_string(),
                "{'type': 'bool', 'value': True}".to_string(),
            ]
        );
        // Each tensor keeps Max, Min and Norm (Max 7 and Norm 2 are integers: still its own);
        // the two with requires_grad true share a layout; the bool scalar keeps nothing.
        let t: Vec<Val> = l.iter().collect();
        let shape = |v: Val| match v {
            Val::Obj { shape, .. } => shape,
            _ => u32::MAX,
        };
        assert_eq!(shape(t[0]), shape(t[1]));
        assert_ne!(shape(t[0]), shape(t[2]));
        let own = |v: Val| s.obj(v).vals.own.len();
        assert_eq!((own(t[0]), own(t[2]), own(t[3]), own(t[4])), (3, 3, 1, 0));
        // Key lists: the tensor's, type/value; templates: two tensors', int, bool.
        assert_eq!(s.shapes.len(), 6);
        let o = s.obj(t[1]);
        let rev: Vec<Val> = o.vals().iter().rev().collect();
        assert_eq!(rev.len(), 8);
        assert_eq!(rev[0], Val::Bool(true));
        assert_eq!(rev[4], Val::Float(1e300));
        assert_eq!(o.get(s.find_key("Mean").unwrap()), Some(Val::Null));
        assert_eq!(s.get(t[2], "Max"), Some(Val::Int(7)));
        assert_eq!(s.obj_len(t[4]), 2);
    }

    /// Short strings that never repeat (an md5 per tensor) make a template per object until
    /// the key list's quota; past it the objects keep all their values, and read back the same.
    #[test]
    fn templates_stop_at_the_quota() {
        let n = TMPL_PER_SHAPE as usize + 50;
        let items: Vec<String> = (0..n)
            .map(|i| format!(r#"{{"md5": "{i:08x}", "Max": {i}.5}}"#))
            .collect();
        let text = format!("[{}]", items.join(", "));
        let (s, v) = parse(text.as_bytes()).unwrap();
        // One key list and its quota of templates.
        assert_eq!(s.shapes.len(), 1 + TMPL_PER_SHAPE as usize);
        for (i, x) in s.list(v).iter().enumerate() {
            assert_eq!(
                crate::formats::pyfmt::py_str(&s, x),
                format!("{{'md5': '{i:08x}', 'Max': {i}.5}}")
            );
        }
    }

    /// Objects with the same keys in the same order share one key list; members read back in
    /// order, duplicates as Python keeps them.
    #[test]
    fn objects_share_key_lists() {
        let (s, v) = parse(br#"[{"a": 1, "b": 2}, {"a": 3, "b": 4}, {"b": 5, "a": 6}, {}, {"a": 7, "b": 8, "a": 9}, {"x": {"a": 0, "b": 0}}]"#).unwrap();
        let l = s.list(v);
        let text: Vec<String> = l
            .iter()
            .map(|x| crate::formats::pyfmt::py_str(&s, x))
            .collect();
        assert_eq!(
            text,
            [
                "{'a': 1, 'b': 2}",
                "{'a': 3, 'b': 4}",
                "{'b': 5, 'a': 6}",
                "{}",
                "{'a': 9, 'b': 8}",
                "{'x': {'a': 0, 'b': 0}}"
            ]
        );
        // ab, ba, {}, x
        assert_eq!(s.shapes.len(), 4);
        assert_eq!(s.obj_len(l.get(2).unwrap()), 2);
        assert_eq!(s.obj_len(l.get(3).unwrap()), 0);
        assert_eq!(s.obj_len(l.get(0).unwrap()), 2);
        assert_eq!(
            s.obj(l.get(1).unwrap()).get(s.find_key("b").unwrap()),
            Some(Val::Int(4))
        );
        assert!(s.obj(Val::Int(1)).is_empty());
    }

    #[test]
    fn duplicate_keys_keep_first_position_last_value() {
        let (s, v) = parse(br#"{"a": 1, "b": 2, "a": 3}"#).unwrap();
        let o = s.obj(v);
        assert_eq!(o.len(), 2);
        assert_eq!(s.key(o.keys()[0]), "a");
        assert_eq!(o.vals().get(0).unwrap(), Val::Int(3));
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
        assert_eq!(s.key(o.keys()[5]), "k5");
        assert_eq!(s.key(o.keys()[100]), "last");
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
        assert_eq!(s.as_str(l.get(0).unwrap()), Some("é😀\n"));
    }

    /// Every kind of value comes back from the store bit for bit, in a word or through `wide`.
    #[test]
    fn packed_values_round_trip() {
        let mut s = Store::default();
        let long = "x".repeat(70_000);
        let r_long = s.push_str(&long);
        let r_short = s.push_str("torch.float32");
        let floats = [
            0.0,
            -0.0,
            1.5,
            f64::MIN_POSITIVE,
            f64::MAX,
            f64::INFINITY,
            f64::NEG_INFINITY,
            f64::NAN,
            f64::from_bits(0xFFF8_0000_0000_0000), // x86's default NaN
            f64::from_bits(0xFFF9_0000_0000_0001), // a NaN among the tags
            f64::from_bits(0xFFFF_FFFF_FFFF_FFFF),
            f64::from_bits(0x7FF0_0000_0000_0001), // a signalling NaN
        ];
        let mut vals = vec![Val::Null, Val::Bool(false), Val::Bool(true)];
        for i in [
            0,
            1,
            -1,
            (1 << 47) - 1,
            -(1 << 47),
            1 << 47,
            -(1 << 47) - 1,
            i64::MAX,
            i64::MIN,
        ] {
            vals.push(Val::Int(i));
        }
        vals.extend(floats.iter().map(|&x| Val::Float(x)));
        vals.extend([
            Val::Str(r_long),
            Val::Str(r_short),
            Val::BigInt(r_long),
            Val::BigInt(r_short),
            Val::List {
                start: u32::MAX,
                len: 0xFFFF,
            },
            Val::List {
                start: 7,
                len: 1 << 16,
            },
            Val::Obj {
                start: u32::MAX,
                shape: 0xFFFF,
            },
            Val::Obj {
                start: 3,
                shape: u32::MAX,
            },
        ]);
        let l = s.new_list(&vals);
        let back = s.list(l).to_vec();
        assert_eq!(back.len(), vals.len());
        for (a, b) in vals.iter().zip(&back) {
            match (a, b) {
                (Val::Float(x), Val::Float(y)) => assert_eq!(x.to_bits(), y.to_bits()),
                _ => assert_eq!(a, b),
            }
        }
        // The same through an object, and backwards.
        let k = s.intern_key("k");
        let pairs: Vec<(KeyId, Val)> = vals.iter().map(|&v| (k, v)).collect();
        let o = s.new_obj(&pairs);
        assert_eq!(s.obj(o).vals().iter().rev().count(), vals.len());
        assert!(s.obj(o).iter().zip(&vals).all(|((kk, x), y)| kk == k
            && match (x, y) {
                (Val::Float(x), Val::Float(y)) => x.to_bits() == y.to_bits(),
                _ => x == *y,
            }));
        // A rewind forgets escapes too.
        let m = s.mark();
        let _ = s.new_list(&[Val::Int(i64::MAX)]);
        s.rewind(m);
        let again = s.new_list(&[Val::Int(i64::MIN)]);
        assert_eq!(s.list(again).first(), Some(Val::Int(i64::MIN)));
    }

    /// A short string seen just before is stored once; after a rewind it is stored again.
    #[test]
    fn short_strings_stored_once() {
        let mut s = Store::default();
        let a = s.push_str("torch.Tensor");
        let n = s.text.len();
        let b = s.push_str("torch.Tensor");
        assert_eq!(a, b);
        assert_eq!(s.text.len(), n);
        let m = s.mark();
        s.rewind(Mark { text: 0, ..m });
        let c = s.push_str("torch.Tensor");
        assert_eq!(s.str(c), "torch.Tensor");
        let long = "Module.module.model.layers.0.forward";
        let (x, y) = (s.push_str(long), s.push_str(long));
        assert_ne!(x, y);
        assert_eq!(s.str(x), s.str(y));
    }

    /// A short list equal to one held is that list; after a rewind the cached range is checked
    /// against what the store holds now; lists that differ in any way (bits of a float, a nested
    /// list, their length) stay apart; parsed dumps read back the same.
    #[test]
    fn short_lists_stored_once() {
        let mut s = Store::default();
        let shape = [Val::Int(1), Val::Int(128), Val::Int(4096)];
        let a = s.new_list(&shape);
        let n = s.vals.len();
        let b = s.new_list(&shape);
        assert_eq!(a, b);
        assert_eq!(s.vals.len(), n);
        for other in [
            &[Val::Int(1), Val::Int(128)][..],
            &[Val::Int(1), Val::Int(128), Val::Int(4097)],
            &[Val::Float(1.0), Val::Int(128), Val::Int(4096)],
            &[Val::Int(1), Val::Int(128), Val::Int(4096), Val::Int(1)],
        ] {
            let o = s.new_list(other);
            assert_ne!(o, a);
            assert_eq!(s.list(o).iter().collect::<Vec<_>>(), other);
        }
        let (z, nz) = (
            s.new_list(&[Val::Float(0.0)]),
            s.new_list(&[Val::Float(-0.0)]),
        );
        assert_ne!(z, nz);
        assert!(matches!(s.list(nz).get(0), Some(Val::Float(f)) if f.is_sign_negative()));
        // Nested: equal words are equal contents.
        let (p, q) = (s.new_list(&[a, Val::Null]), s.new_list(&[b, Val::Null]));
        assert_eq!(p, q);
        // Rewound to before the first list and refilled with other values at its place.
        let m = s.mark();
        s.rewind(Mark { vals: 0, ..m });
        let filler = s.new_list(&[Val::Int(7), Val::Int(7), Val::Int(7)]);
        assert_eq!(
            s.list(filler).iter().collect::<Vec<_>>(),
            vec![Val::Int(7); 3]
        );
        let c = s.new_list(&shape);
        assert_eq!(s.list(c).iter().collect::<Vec<_>>(), shape);
        // Long lists are not looked up.
        let long = [Val::Int(1); SHORT_LIST + 1];
        let (l1, l2) = (s.new_list(&long), s.new_list(&long));
        assert_ne!(l1, l2);
        // Parsed text: the shapes of two tensors share one range and read back whole.
        let (st, root) =
            parse(br#"[{"shape": [2, 3]}, {"shape": [2, 3]}, {"shape": [3, 2]}]"#).unwrap();
        let shapes: Vec<Val> = st
            .list(root)
            .iter()
            .map(|t| st.get(t, "shape").unwrap())
            .collect();
        assert_eq!(shapes[0], shapes[1]);
        assert_ne!(shapes[0], shapes[2]);
        let back: Vec<Vec<Val>> = shapes
            .iter()
            .map(|v| st.list(*v).iter().collect())
            .collect();
        assert_eq!(back[2], vec![Val::Int(3), Val::Int(2)]);
    }
}
