//! Tensor items: msprobe's `read_op` / `op_item_parse` / `gen_op_item`, which flatten a dump
//! entry into named items, and `format_node_data`, which turns items into the strings stored in
//! the `.vis.db`.
//!
//! An [`Item`] is an ordered dict, like the Python one, whose values are [`Py`] objects. Keys are
//! interned in the dump's [`Store`]; the keys msprobe itself adds have fixed ids ([`k`]).

use crate::base::error::{Error, Result};
use crate::formats::json::{KeyId, Store, Val};
use crate::formats::keys::{k, truthy};
use crate::formats::pyfmt::{json_str, py_repr, py_str, ReprCache};
use crate::graph::cells::{Cell, ItemResult};

/// A Python object as msprobe's item dicts hold it.
#[derive(Debug, Clone, PartialEq, Default)]
pub enum Py {
    #[default]
    None,
    /// A value straight from the dump (no copy).
    V(Val),
    S(String),
    /// A relative error as compare's `get_rela_diff_summary_mode` makes it: the str
    /// `f"{abs(x) * 100}%"`, kept as its number `abs(x) * 100` (formatted only when written;
    /// the checkers read the number). Only in compare rows' relative-error columns: it has no
    /// borrowed text, so [`Py::as_str`] gives None for it.
    Pct(f64),
    /// A str the code writes itself ("N/A", "pass", ...): no allocation per cell.
    Lit(&'static str),
    F(f64),
    I(i64),
    B(bool),
}

impl Py {
    pub fn from_val(v: Val) -> Py {
        match v {
            Val::Null => Py::None,
            v => Py::V(v),
        }
    }
    pub fn is_none(&self) -> bool {
        matches!(self, Py::None | Py::V(Val::Null))
    }
    /// `str(x)`.
    pub fn to_py_str(&self, store: &Store) -> String {
        let mut s = String::new();
        self.write_py_str(store, &mut s);
        s
    }
    /// `str(x)` appended to `out`.
    pub fn write_py_str(&self, store: &Store, out: &mut String) {
        match self {
            Py::None => out.push_str("None"),
            Py::V(Val::Str(r)) => out.push_str(store.str(*r)),
            Py::V(v) => crate::formats::pyfmt::py_repr(store, *v, out),
            Py::S(s) => out.push_str(s),
            Py::Pct(f) => crate::formats::pyfmt::pct_into(*f, out),
            Py::Lit(s) => out.push_str(s),
            Py::F(f) => crate::formats::pyfmt::float_repr_into(*f, out),
            Py::I(i) => out.push_str(itoa::Buffer::new().format(*i)),
            Py::B(b) => out.push_str(if *b { "True" } else { "False" }),
        }
    }
    /// The text if this is a Python str.
    pub fn as_str<'a>(&'a self, store: &'a Store) -> Option<&'a str> {
        match self {
            Py::S(s) => Some(s),
            Py::Lit(s) => Some(s),
            Py::V(Val::Str(r)) => Some(store.str(*r)),
            _ => None,
        }
    }
    /// A real number (int or float, not bool), as Python arithmetic would see it.
    pub fn num(&self, store: &Store) -> Option<Num> {
        match self {
            Py::V(Val::Int(i)) | Py::I(i) => Some(Num::Int(*i as i128)),
            Py::V(Val::BigInt(r)) => store
                .str(*r)
                .parse::<i128>()
                .ok()
                .map(Num::Int)
                .or_else(|| store.str(*r).parse::<f64>().ok().map(Num::Float)),
            Py::V(Val::Float(f)) | Py::F(f) => Some(Num::Float(*f)),
            _ => None,
        }
    }
    /// Python truthiness.
    pub fn truthy(&self, store: &Store) -> bool {
        match self {
            Py::None => false,
            Py::V(v) => truthy(store, *v),
            Py::S(s) => !s.is_empty(),
            Py::Pct(_) => true,
            Py::Lit(s) => !s.is_empty(),
            Py::F(f) => *f != 0.0,
            Py::I(i) => *i != 0,
            Py::B(b) => *b,
        }
    }
    /// Python `==` between two objects of one store.
    pub fn py_eq(&self, other: &Py, store: &Store) -> bool {
        if let (Some(a), Some(b)) = (self.num(store), other.num(store)) {
            return a.eq(&b);
        }
        let bool_of = |p: &Py| match p {
            Py::B(b) | Py::V(Val::Bool(b)) => Some(*b),
            _ => None,
        };
        match (bool_of(self), bool_of(other)) {
            (Some(a), Some(b)) => return a == b,
            (Some(a), None) => return other.num(store).is_some_and(|n| n.eq(&Num::Int(a as i128))),
            (None, Some(b)) => return self.num(store).is_some_and(|n| n.eq(&Num::Int(b as i128))),
            _ => {}
        }
        if self.is_none() || other.is_none() {
            return self.is_none() && other.is_none();
        }
        match (self.as_str(store), other.as_str(store)) {
            (Some(a), Some(b)) => return a == b,
            (Some(_), None) | (None, Some(_)) => return false,
            _ => {}
        }
        // Lists and dicts: compare their printed forms (same store, same structure).
        match (self, other) {
            (Py::V(a), Py::V(b)) => {
                let (mut x, mut y) = (String::new(), String::new());
                py_repr(store, *a, &mut x);
                py_repr(store, *b, &mut y);
                x == y
            }
            _ => false,
        }
    }
}

/// A Python int or float.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Num {
    Int(i128),
    Float(f64),
}

impl Num {
    pub fn as_f64(self) -> f64 {
        match self {
            Num::Int(i) => i as f64,
            Num::Float(f) => f,
        }
    }
    fn eq(&self, o: &Num) -> bool {
        match (self, o) {
            (Num::Int(a), Num::Int(b)) => a == b,
            _ => self.as_f64() == o.as_f64(),
        }
    }
}

/// The section an item belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    Input,
    Output,
    Parameters,
    ParametersGrad,
    Debug,
}

/// One flattened item: an ordered dict plus msprobe's `state` and `full_op_name`.
#[derive(Debug, Clone, PartialEq)]
pub struct Item {
    pub fields: Vec<(KeyId, Py)>,
    pub state: State,
    pub full_op_name: String,
}

impl Item {
    pub fn get(&self, key: KeyId) -> Option<&Py> {
        self.fields.iter().find(|(k, _)| *k == key).map(|(_, v)| v)
    }
    /// `d[key]`, or Python None when absent.
    pub fn get_or_none(&self, key: KeyId) -> Py {
        self.get(key).cloned().unwrap_or(Py::None)
    }
    pub fn has(&self, key: KeyId) -> bool {
        self.fields.iter().any(|(k, _)| *k == key)
    }
    /// `d[key] = v`: in place if present, else appended.
    pub fn set(&mut self, key: KeyId, v: Py) {
        if let Some(slot) = self.fields.iter_mut().find(|(k, _)| *k == key) {
            slot.1 = v;
        } else {
            self.fields.push((key, v));
        }
    }
    pub fn remove(&mut self, key: KeyId) {
        self.fields.retain(|(k, _)| *k != key);
    }
    pub fn data_name(&self, store: &Store) -> String {
        self.get(k::DATA_NAME)
            .map(|v| v.to_py_str(store))
            .unwrap_or_else(|| "-1".into())
    }
}

fn default_item(name: &str, state: State) -> Item {
    Item {
        fields: vec![
            (k::TYPE, Py::None),
            (k::MAX, Py::None),
            (k::MIN, Py::None),
            (k::MEAN, Py::None),
            (k::NORM, Py::None),
            (k::DTYPE, Py::None),
            (k::SHAPE, Py::None),
            (k::MD5, Py::None),
            (k::VALUE, Py::None),
            (k::DATA_NAME, Py::Lit("-1")),
            (k::REQUIRES_GRAD, Py::None),
        ],
        state,
        full_op_name: name.to_string(),
    }
}

const MAX_PARSE_DEPTH: usize = 400;

/// `read_op`: all items of one dump entry (`entry` None = no entry, i.e. `{}`).
pub fn read_op(store: &Store, entry: Option<Val>, op_name: &str, file: &str) -> Result<Vec<Item>> {
    let mut out = Vec::new();
    let Some(entry) = entry else {
        return Ok(out);
    };
    if !matches!(entry, Val::Obj { .. }) {
        if matches!(entry, Val::Null) {
            // `name in None` fails in msprobe; we read it as an entry without data.
            return Ok(out);
        }
        return Err(Error::schema(
            file,
            crate::formats::dump::entry_path(op_name),
            "expected an object with input_args/input_kwargs/output (or input/output), found another value",
        ));
    }
    // The last two dotted fields, without collecting all of them.
    let mut fields = op_name.rsplit('.');
    let last = fields.next().unwrap_or("");
    let second_last = fields.next().unwrap_or("");
    // The items' names are built in this one buffer, a field pushed before each descent and
    // cut off after it: only an item's own `full_op_name` is allocated.
    let mut name = String::with_capacity(op_name.len() + 48);
    name.push_str(op_name);
    if last == "debug" {
        op_item_parse(
            store,
            Some(entry),
            &mut name,
            in_grad(op_name),
            State::Debug,
            0,
            &mut out,
            file,
        )?;
    } else if last == "parameters_grad" || second_last == "parameters_grad" {
        op_item_parse(
            store,
            Some(entry),
            &mut name,
            // Its last or second-last field is "parameters_grad".
            true,
            State::ParametersGrad,
            0,
            &mut out,
            file,
        )?;
    } else {
        // The suffixes below are not the field "parameters_grad".
        let grad = in_grad(op_name);
        for (key, suffix, state) in [
            (k::INPUT_ARGS, ".input", State::Input),
            (k::INPUT_KWARGS, ".input", State::Input),
            (k::INPUT, ".input", State::Input),
            (k::OUTPUT, ".output", State::Output),
            (k::PARAMETERS, ".parameters", State::Parameters),
        ] {
            if let Some(v) = store.obj(entry).get(key) {
                name.truncate(op_name.len());
                name.push_str(suffix);
                op_item_parse(store, Some(v), &mut name, grad, state, 0, &mut out, file)?;
            }
        }
    }
    Ok(out)
}

/// `i` in decimal, written into `buf`.
fn decimal(mut i: usize, buf: &mut [u8; 20]) -> &str {
    let mut at = buf.len();
    loop {
        at -= 1;
        buf[at] = b'0' + (i % 10) as u8;
        i /= 10;
        if i == 0 {
            break;
        }
    }
    std::str::from_utf8(&buf[at..]).unwrap_or("0")
}

/// Whether a field of the dotted `name` is "parameters_grad".
fn in_grad(name: &str) -> bool {
    // Nearly no name has the text at all: that test first (splitting costs more).
    crate::base::has(name, "parameters_grad") && name.split('.').any(|s| s == "parameters_grad")
}

/// `grad`: [`in_grad`] of `name` (carried down the recursion instead of re-scanning the name).
/// `name` is the item name so far; a descent appends its field and takes it off again.
#[allow(clippy::too_many_arguments)]
fn op_item_parse(
    store: &Store,
    data: Option<Val>,
    name: &mut String,
    grad: bool,
    state: State,
    depth: usize,
    out: &mut Vec<Item>,
    file: &str,
) -> Result<()> {
    if depth > MAX_PARSE_DEPTH {
        return Err(Error::new(
            crate::base::error::ErrorKind::Limit,
            file,
            crate::base::error::Place::Path(name.to_string()),
            "parse of api/module exceeds the recursion limit (400 levels)",
        ));
    }
    let v = match data {
        None | Some(Val::Null) => {
            out.push(default_item(name, state));
            return Ok(());
        }
        Some(v) => v,
    };
    if !truthy(store, v) {
        return Ok(());
    }
    let len = name.len();
    match v {
        Val::List { .. } => {
            for (i, x) in store.list(v).iter().enumerate() {
                if grad {
                    op_item_parse(store, Some(x), name, true, state, depth + 1, out, file)?;
                } else {
                    // A number is never the field "parameters_grad".
                    let mut digits = [0u8; 20];
                    name.push('.');
                    name.push_str(decimal(i, &mut digits));
                    op_item_parse(store, Some(x), name, false, state, depth + 1, out, file)?;
                    name.truncate(len);
                }
            }
        }
        Val::Obj { .. } => {
            if store
                .obj(v)
                .get(k::CLASS_TYPE)
                .and_then(|c| store.as_str(c))
                == Some("torch.distributed.P2POp")
            {
                let extra: Vec<(KeyId, Py)> = [k::CLASS_TYPE, k::OP, k::PEER, k::TAG, k::GROUP_ID]
                    .iter()
                    .map(|key| {
                        let val = store.obj(v).get(*key).map(Py::from_val).unwrap_or(Py::None);
                        (*key, val)
                    })
                    .collect();
                let tensor = store.obj(v).get(k::TENSOR);
                let mut item = match tensor {
                    Some(t @ Val::Obj { .. }) => gen_op_item(store, t, name, state),
                    _ => default_item(name, state),
                };
                for (key, val) in extra {
                    item.set(key, val);
                }
                out.push(item);
                return Ok(());
            }
            if store
                .obj(v)
                .iter()
                .any(|(kk, x)| kk == k::TYPE && matches!(x, Val::Str(_)))
            {
                out.push(gen_op_item(store, v, name, state));
                return Ok(());
            }
            for (kk, x) in store.obj(v) {
                let key = store.key(kk);
                let grad = grad || in_grad(key);
                name.push('.');
                name.push_str(key);
                op_item_parse(store, Some(x), name, grad, state, depth + 1, out, file)?;
                name.truncate(len);
            }
        }
        _ => {}
    }
    Ok(())
}

/// `str(np.shape(np.array(value)))` for the nested lists a slice value holds.
fn np_shape_str(store: &Store, v: Val) -> String {
    let mut dims = Vec::new();
    let mut cur = v;
    while let Val::List { .. } = cur {
        let l = store.list(cur);
        dims.push(l.len());
        // Descend only while every element is a list of the same length (rectangular).
        match l.first() {
            Some(first @ Val::List { len, .. })
                if l.iter()
                    .all(|x| matches!(x, Val::List { len: n, .. } if n == len)) =>
            {
                cur = first;
            }
            _ => break,
        }
    }
    match dims.len() {
        0 => "()".into(),
        1 => format!("({},)", dims[0]),
        _ => format!(
            "({})",
            dims.iter()
                .map(|d| d.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

/// `str(type(value))` of a JSON-loaded value.
fn py_type_str(v: Option<Val>) -> &'static str {
    match v {
        None | Some(Val::Null) => "<class 'NoneType'>",
        Some(Val::Bool(_)) => "<class 'bool'>",
        Some(Val::Int(_)) | Some(Val::BigInt(_)) => "<class 'int'>",
        Some(Val::Float(_)) => "<class 'float'>",
        Some(Val::Str(_)) => "<class 'str'>",
        Some(Val::List { .. }) => "<class 'list'>",
        Some(Val::Obj { .. }) => "<class 'dict'>",
    }
}

/// CRC-32 (IEEE), as `zlib.crc32`.
pub fn crc32(bytes: &[u8]) -> u32 {
    let mut crc = 0xFFFF_FFFFu32;
    for &b in bytes {
        crc ^= b as u32;
        for _ in 0..8 {
            let mask = (crc & 1).wrapping_neg();
            crc = (crc >> 1) ^ (0xEDB8_8320 & mask);
        }
    }
    !crc
}

fn gen_op_item(store: &Store, data: Val, name: &str, state: State) -> Item {
    let pairs = store.obj(data);
    let get = |key: KeyId| pairs.get(key);
    let mut item = Item {
        fields: Vec::with_capacity(pairs.len() + 6),
        state,
        full_op_name: String::new(),
    };
    for (kk, x) in pairs {
        if kk == k::STATE || kk == k::FULL_OP_NAME {
            continue;
        }
        let v = match x {
            Val::Bool(b) => Py::Lit(if b { "True" } else { "False" }),
            other => Py::from_val(other),
        };
        item.fields.push((kk, v));
    }
    let data_name = match get(k::DATA_NAME) {
        Some(v) if truthy(store, v) => Some(py_str(store, v)).filter(|d| d != "-1"),
        _ => None,
    };
    item.full_op_name = match &data_name {
        Some(d) => d
            .rsplit_once('.')
            .map_or(d.as_str(), |(a, _)| a)
            .to_string(),
        None => name.to_string(),
    };
    item.set(k::DATA_NAME, data_name.map_or(Py::Lit("-1"), Py::S));
    if !item.has(k::REQUIRES_GRAD) {
        item.fields.push((k::REQUIRES_GRAD, Py::None));
    }
    for key in [k::MAX, k::MIN, k::MEAN, k::NORM] {
        if !item.has(key) {
            item.fields.push((key, Py::None));
        }
    }
    let dtype_truthy = item.get(k::DTYPE).is_some_and(|d| d.truthy(store));
    if !dtype_truthy {
        let ty = get(k::TYPE).and_then(|t| store.as_str(t)).unwrap_or("");
        let ty_py = get(k::TYPE).map(Py::from_val).unwrap_or(Py::None);
        let value = get(k::VALUE);
        let last_seg = name.rsplit('.').next().unwrap_or("");
        let stats = [k::MAX, k::MIN, k::MEAN, k::NORM];
        if ty == "torch.Size" {
            item.set(k::DTYPE, ty_py);
            item.set(
                k::SHAPE,
                Py::S(value.map(|v| py_str(store, v)).unwrap_or("None".into())),
            );
        } else if ty == "slice" {
            item.set(k::DTYPE, ty_py);
            item.set(
                k::SHAPE,
                Py::S(value.map(|v| np_shape_str(store, v)).unwrap_or("()".into())),
            );
        } else if ty == "ellipsis" {
            item.set(k::DTYPE, ty_py);
            item.set(k::SHAPE, Py::Lit("[]"));
            for s in stats {
                item.set(s, value.map(Py::from_val).unwrap_or(Py::None));
            }
        } else if ["src", "dst", "group_src", "group_dst"].contains(&last_seg) {
            item.set(k::DTYPE, ty_py);
            item.set(k::SHAPE, Py::Lit("[]"));
            let s = value.map(|v| py_str(store, v)).unwrap_or("None".into());
            for st in stats {
                item.set(st, Py::S(s.clone()));
            }
            item.set(k::MD5, Py::S(s));
        } else if ty == "torch.ProcessGroup" {
            item.set(k::DTYPE, ty_py);
            item.set(k::SHAPE, Py::Lit("[]"));
            let s = get(k::GROUP_RANKS)
                .map(|v| py_str(store, v))
                .unwrap_or("None".into());
            for st in stats {
                item.set(st, Py::S(s.clone()));
            }
            item.set(k::MD5, Py::S(s));
        } else {
            item.set(k::DTYPE, Py::S(py_type_str(value).into()));
            item.set(k::SHAPE, Py::Lit("[]"));
            for s in stats {
                item.set(s, value.map(Py::from_val).unwrap_or(Py::None));
            }
        }
    }
    let md5_truthy = item.get(k::MD5).is_some_and(|m| m.truthy(store));
    if !md5_truthy {
        let md5 = match get(k::VALUE) {
            Some(v) => Py::S(format!("{:08x}", crc32(py_str(store, v).as_bytes()))),
            // zlib.crc32(b"") (a tensor's summary has no value).
            None => Py::Lit("00000000"),
        };
        item.set(k::MD5, md5);
    }
    item
}

/// An ordered dict of items keyed as msprobe keys them.
pub type ItemMap = Vec<(String, Item)>;

fn dict_insert(map: &mut ItemMap, key: String, item: Item) {
    if let Some(slot) = map.iter_mut().find(|(kk, _)| *kk == key) {
        slot.1 = item;
    } else {
        map.push((key, item));
    }
}

/// `get_input_output`: splits items into input_data and output_data.
pub fn input_output(store: &Store, items: Vec<Item>) -> (ItemMap, ItemMap) {
    let mut input = Vec::new();
    let mut output = Vec::new();
    for item in items {
        if item.full_op_name.is_empty() {
            continue;
        }
        if crate::base::has(&item.full_op_name, ".output.")
            && !crate::base::has(&item.full_op_name, ".input.")
        {
            let key = item.full_op_name.clone();
            dict_insert(&mut output, key, item);
        } else {
            let dn = item.get(k::DATA_NAME);
            let key = match dn.and_then(|d| d.as_str(store)) {
                Some(s) if s != "-1" => s.rsplit_once('.').map(|(a, _)| a).unwrap_or(s).to_string(),
                _ => item.full_op_name.clone(),
            };
            dict_insert(&mut input, key, item);
        }
    }
    (input, output)
}

/// The compare mode an export is made in (msprobe's `compare_mode` of the graph).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Build (single graph): md5 is removed.
    Build,
    Summary,
    Md5,
    RealData,
    Structure,
}

/// `_format_decimal_string`: rounds a whole-string decimal with more than 6 places. Borrows
/// the text when it is kept as is (nearly always: "torch.float32", "[1, 2]", "-1").
fn format_decimal_string(s: &str) -> std::borrow::Cow<'_, str> {
    use std::borrow::Cow;
    // Both sides of the point must be digits, so a text that does not start with one is kept
    // (the common case, decided on one byte).
    if !s.as_bytes().first().is_some_and(u8::is_ascii_digit) {
        return Cow::Borrowed(s);
    }
    let (num, pct) = match s.strip_suffix('%') {
        Some(n) => (n, true),
        None => (s, false),
    };
    let Some((a, b)) = num.split_once('.') else {
        return Cow::Borrowed(s);
    };
    let ok = |p: &str| !p.is_empty() && p.len() <= 20 && p.bytes().all(|c| c.is_ascii_digit());
    if !ok(a) || !ok(b) || b.len() <= 6 {
        return Cow::Borrowed(s);
    }
    let Ok(x) = num.parse::<f64>() else {
        return Cow::Borrowed(s);
    };
    let mut out = format_fixed6(x);
    if pct {
        out.push('%');
    }
    Cow::Owned(out)
}

/// `f"{x:.6f}"` with Python's correct rounding (half to even on the exact binary value).
pub fn format_fixed6(x: f64) -> String {
    let mut out = String::with_capacity(24);
    fixed6_into(x, &mut out);
    out
}

/// [`format_fixed6`] appended to `out`. x = m * 2^e exactly, so x * 10^6 is m * 10^6 (below
/// 2^73) shifted by e: rounded half to even in integers, exactly, for |x| < 10^17. Beyond that
/// (and for NaN and the infinities) Rust's `{:.6}`, which also formats the exact value and
/// rounds half to even, like Python, but through the slower general formatting machinery.
fn fixed6_into(x: f64, out: &mut String) {
    if !x.is_finite() || x.abs() >= 1e17 {
        use std::fmt::Write;
        let _ = write!(out, "{x:.6}");
        return;
    }
    let bits = x.to_bits();
    let exp_bits = ((bits >> 52) & 0x7ff) as i32;
    let frac = bits & ((1u64 << 52) - 1);
    let (m, e) = if exp_bits == 0 {
        (frac, -1074)
    } else {
        (frac | (1u64 << 52), exp_bits - 1075)
    };
    let n = u128::from(m) * 1_000_000;
    let q: u128 = if e >= 0 {
        // |x| < 10^17 < 2^57 with m >= 2^52: e <= 4.
        n << e
    } else {
        let s = e.unsigned_abs();
        if s >= 128 {
            // n < 2^73 is below half of 2^s: rounds to 0.
            0
        } else {
            let q = n >> s;
            let r = n - (q << s);
            let half = 1u128 << (s - 1);
            if r > half || (r == half && q & 1 == 1) {
                q + 1
            } else {
                q
            }
        }
    };
    if bits >> 63 != 0 {
        // As `{:.6}`: the sign even when the value rounds to zero (and of -0.0).
        out.push('-');
    }
    let int = (q / 1_000_000) as u64;
    let frac6 = (q % 1_000_000) as u32;
    out.push_str(itoa::Buffer::new().format(int));
    out.push('.');
    let mut digits = [b'0'; 6];
    let mut f = frac6;
    for d in digits.iter_mut().rev() {
        *d = b'0' + (f % 10) as u8;
        f /= 10;
    }
    for d in digits {
        out.push(char::from(d));
    }
}

/// The bytes a field's text is copied with as they are: printable ASCII except `"` and `\`
/// (escaped by JSON) and `'` and `N` (`_format_data` drops quotes and rewrites "None").
const PLAIN_FIELD: [bool; 256] = {
    let mut t = [false; 256];
    let mut c = b' ';
    while c <= b'~' {
        t[c as usize] = !matches!(c, b'"' | b'\\' | b'\'' | b'N');
        c += 1;
    }
    t
};

/// Appends `json.dumps` of a str field's text as `_format_data` rewrites it: quotes dropped
/// and `None` as `null` when it has either, then [`format_decimal_string`]. Returns whether
/// the text written is "null".
fn write_str_field(text: &str, out: &mut String) -> bool {
    let b = text.as_bytes();
    // Nearly every text ("torch.float32", "True", "-1", "pass") has nothing to rewrite (no
    // quote, no "None", and no decimal to round: that needs a digit first) and nothing to
    // escape: one table look-up a byte, then a plain quoted copy.
    if !b.first().is_some_and(u8::is_ascii_digit) && b.iter().all(|&c| PLAIN_FIELD[c as usize]) {
        out.reserve(b.len() + 2);
        out.push('"');
        out.push_str(text);
        out.push('"');
        return text == "null";
    }
    // One pass for the three tests (`'`, "None", '.'): `str::contains` with a str pattern sets
    // up a two-way searcher per call, which costs more than these short texts.
    let (mut quote_or_none, mut dot) = (false, false);
    for (i, &c) in b.iter().enumerate() {
        match c {
            b'\'' => quote_or_none = true,
            b'N' if b.get(i + 1..i + 4) == Some(b"one") => quote_or_none = true,
            b'.' => dot = true,
            _ => {}
        }
    }
    if quote_or_none {
        let t = text.replace('\'', "").replace("None", "null");
        let t = format_decimal_string(&t);
        json_str(&t, out);
        t == "null"
    } else if dot {
        let t = format_decimal_string(text);
        json_str(&t, out);
        // A text with a point is never "null".
        false
    } else {
        // No decimal point: `format_decimal_string` keeps the text as is.
        json_str(text, out);
        text == "null"
    }
}

/// Appends `i` in decimal between double quotes.
fn write_quoted_int(i: i64, out: &mut String) {
    let mut b = itoa::Buffer::new();
    out.push('"');
    out.push_str(b.format(i));
    out.push('"');
}

/// Appends one field's value of `_format_data` as JSON (a quoted text, or `error_key`'s raw
/// JSON) to `out`; `scratch` is working space. Returns whether the value is the quoted text
/// "null" (a `Max` like that turns the whole item into `{"value": "null"}`).
///
/// Numbers, bools and None are written straight into `out`: their texts need no JSON escape,
/// so they skip the copy through `scratch` and the escape scan of the general path.
fn write_field(
    store: &Store,
    key: KeyId,
    v: &Py,
    reprs: &mut ReprCache,
    scratch: &mut String,
    out: &mut String,
) -> bool {
    // `error_key` keeps its value's raw JSON: the general path below.
    if key != k::ERROR_KEY {
        match v {
            Py::V(Val::Float(f)) | Py::F(f) => {
                out.push('"');
                reprs.float_repr_into(*f, out);
                out.push('"');
                return false;
            }
            Py::V(Val::Int(i)) | Py::I(i) => {
                write_quoted_int(*i, out);
                return false;
            }
            Py::V(Val::Bool(b)) | Py::B(b) => {
                out.push_str(if *b { "\"True\"" } else { "\"False\"" });
                return false;
            }
            Py::None | Py::V(Val::Null) => {
                out.push_str("\"null\"");
                return true;
            }
            _ => {}
        }
    }
    if let Some(text) = v.as_str(store) {
        return write_str_field(text, out);
    }
    if v.is_none() {
        out.push_str("\"null\"");
        return true;
    }
    scratch.clear();
    if key == k::ERROR_KEY {
        if let Py::V(val) = v {
            crate::formats::pyfmt::json_dumps(store, *val, scratch);
        }
        out.push_str(scratch);
        false
    } else {
        v.write_py_str(store, scratch);
        json_str(scratch, out);
        scratch == "null"
    }
}

/// A field's value as `_format_data` sees it: the item's own, or a compare column laid over
/// the item (what `apply_results` would have set in it).
#[derive(Clone, Copy)]
enum FieldRef<'a> {
    Own(&'a Py),
    Col(&'a Cell),
}

impl FieldRef<'_> {
    /// The text if this is a Python str (a relative error is one: `f"{x}%"`).
    fn as_str<'a>(&'a self, store: &'a Store) -> Option<&'a str> {
        match self {
            FieldRef::Own(p) => p.as_str(store),
            FieldRef::Col(Cell::S(s)) => Some(s),
            FieldRef::Col(Cell::Lit(s)) => Some(s),
            FieldRef::Col(Cell::V(v)) => store.as_str(**v),
            FieldRef::Col(_) => None,
        }
    }
}

/// A set of key ids: those below 64 as bits, and whether one at or above 64 is in it (the
/// fixed keys [`k`] are below 64, so a test is one AND and the lists are searched only for
/// keys that may be in them).
#[derive(Clone, Copy, Default)]
struct KeySet {
    bits: u64,
    big: bool,
}

impl KeySet {
    /// The set of `keys`, and whether a key may be repeated in them.
    fn of(keys: impl Iterator<Item = KeyId>) -> (KeySet, bool) {
        let (mut set, mut repeated) = (KeySet::default(), false);
        for key in keys {
            if key.0 < 64 {
                let b = 1u64 << key.0;
                repeated |= set.bits & b != 0;
                set.bits |= b;
            } else {
                repeated |= set.big;
                set.big = true;
            }
        }
        (set, repeated)
    }
    fn may_have(&self, key: KeyId) -> bool {
        if key.0 < 64 {
            self.bits >> key.0 & 1 != 0
        } else {
            self.big
        }
    }
}

/// An item with compare columns laid over it, in the order `apply_results` leaves them: the
/// item's fields (a column of the same key replacing the value in place), then the other
/// columns in their order. A key repeated among the columns takes its last value, as
/// successive `set`s would.
#[derive(Clone, Copy)]
struct Overlay<'a> {
    fields: &'a [(KeyId, Py)],
    keys: &'a [KeyId],
    cells: &'a [Cell],
    field_set: KeySet,
    col_set: KeySet,
    /// A key may be repeated among the columns.
    col_repeats: bool,
}

impl<'a> Overlay<'a> {
    /// `keys` and `cells` are paired in order (of equal length).
    fn new(fields: &'a [(KeyId, Py)], keys: &'a [KeyId], cells: &'a [Cell]) -> Overlay<'a> {
        // The fields' set serves only to lay columns over them.
        let field_set = if keys.is_empty() {
            KeySet::default()
        } else {
            KeySet::of(fields.iter().map(|(key, _)| *key)).0
        };
        let (col_set, col_repeats) = KeySet::of(keys.iter().copied());
        Overlay {
            fields,
            keys,
            cells,
            field_set,
            col_set,
            col_repeats,
        }
    }
    fn col(&self, key: KeyId) -> Option<&'a Cell> {
        if !self.col_set.may_have(key) {
            return None;
        }
        let i = self.keys.iter().rposition(|c| *c == key)?;
        self.cells.get(i)
    }
    fn get(&self, key: KeyId) -> Option<FieldRef<'a>> {
        if let Some(c) = self.col(key) {
            return Some(FieldRef::Col(c));
        }
        self.fields
            .iter()
            .find(|(kk, _)| *kk == key)
            .map(|(_, v)| FieldRef::Own(v))
    }
    /// Every (key, value) in order.
    fn iter(self) -> impl Iterator<Item = (KeyId, FieldRef<'a>)> {
        let own = self
            .fields
            .iter()
            .map(move |(key, v)| match self.col(*key) {
                Some(c) => (*key, FieldRef::Col(c)),
                None => (*key, FieldRef::Own(v)),
            });
        let added = self.keys.iter().enumerate().filter_map(move |(i, key)| {
            if self.field_set.may_have(*key) && self.fields.iter().any(|(kk, _)| kk == key) {
                return None;
            }
            if !self.col_repeats {
                // Each key once: its own cell is its last value.
                return self.cells.get(i).map(|c| (*key, FieldRef::Col(c)));
            }
            if self.keys[..i].contains(key) {
                return None;
            }
            self.col(*key).map(|c| (*key, FieldRef::Col(c)))
        });
        own.chain(added)
    }
}

/// What [`format_item`] needs of the node, worked out once per node rather than per item.
#[derive(Clone, Copy)]
pub struct NodeFormat {
    mode: Mode,
    /// The node is a `batch_isend_irecv`: its items drop op/peer/tag/group_id.
    batch_p2p: bool,
}

impl NodeFormat {
    pub fn new(node_id: &str, mode: Mode) -> NodeFormat {
        NodeFormat {
            mode,
            batch_p2p: crate::base::has(node_id, "batch_isend_irecv"),
        }
    }
}

/// Writes items as `_format_data` does, for many nodes of one store: keeps each field key's
/// quoted form (`"Max": `) once it is made, and a scratch buffer, across nodes.
pub struct ItemWriter<'s> {
    store: &'s Store,
    /// `json.dumps(key) + ": "` by key id, made on first use (a few dozen keys serve a dump).
    keys: Vec<Option<Box<str>>>,
    scratch: String,
    /// A relative error's text.
    pct: String,
    /// The texts of the floats written last.
    reprs: ReprCache,
}

impl<'s> ItemWriter<'s> {
    pub fn new(store: &'s Store) -> ItemWriter<'s> {
        ItemWriter {
            store,
            keys: Vec::new(),
            scratch: String::new(),
            pct: String::new(),
            reprs: ReprCache::default(),
        }
    }

    /// Appends `json.dumps(key)` and ": ".
    fn key_into(&mut self, key: KeyId, out: &mut String) {
        let i = key.0 as usize;
        if self.keys.len() <= i {
            self.keys.resize(i + 1, None);
        }
        let store = self.store;
        let quoted = self.keys[i].get_or_insert_with(|| {
            let mut q = String::new();
            json_str(store.key(key), &mut q);
            q.push_str(": ");
            q.into_boxed_str()
        });
        out.push_str(quoted);
    }

    /// Appends one field's value (see [`write_field`]); whether it is the quoted text "null".
    fn field_into(&mut self, key: KeyId, v: FieldRef, out: &mut String) -> bool {
        match v {
            FieldRef::Own(p) => {
                write_field(self.store, key, p, &mut self.reprs, &mut self.scratch, out)
            }
            // A str, as `Cell::to_py` makes it: one String less.
            FieldRef::Col(Cell::S(s)) => write_str_field(s, out),
            FieldRef::Col(Cell::Pct(f)) => {
                self.pct.clear();
                // `f"{x}%"`.
                self.reprs.float_repr_into(*f, &mut self.pct);
                self.pct.push('%');
                write_str_field(&self.pct, out)
            }
            // The other cells are copies of values: no allocation.
            FieldRef::Col(c) => write_field(
                self.store,
                key,
                &c.to_py(),
                &mut self.reprs,
                &mut self.scratch,
                out,
            ),
        }
    }

    /// Appends the formatted item (`_format_data`) as a JSON object to `out`; `cols` are the
    /// compare columns of the item, if any.
    fn item_into(
        &mut self,
        item: &Item,
        cols: Option<&ItemResult>,
        f: NodeFormat,
        out: &mut String,
    ) {
        let store = self.store;
        // Columns pair keys and cells as `ItemResult::iter` does (zipped).
        let (keys, cells): (&[KeyId], &[Cell]) = cols.map_or((&[], &[]), |c| {
            let n = c.keys.len().min(c.cells.len());
            (&c.keys[..n], &c.cells[..n])
        });
        let o = Overlay::new(&item.fields, keys, cells);
        let is_pg = o
            .get(k::TYPE)
            .and_then(|t| t.as_str(store).map(|t| t == "torch.ProcessGroup"))
            .unwrap_or(false);
        let keep = |key: KeyId| {
            !(key == k::STATE
                || key == k::FULL_OP_NAME
                || (key == k::MD5 && f.mode != Mode::Md5)
                || (f.batch_p2p && [k::OP, k::PEER, k::TAG, k::GROUP_ID].contains(&key))
                || (is_pg && ![k::TYPE, k::GROUP_RANKS, k::GROUP_ID, k::DATA_NAME].contains(&key)))
        };
        let start = out.len();
        out.push('{');
        let mut first = true;
        for (key, v) in o.iter() {
            if !keep(key) {
                continue;
            }
            if !first {
                out.push_str(", ");
            }
            first = false;
            self.key_into(key, out);
            if self.field_into(key, v, out) && key == k::MAX {
                // A `Max` whose text is "null" makes the whole item `{"value": "null"}`: drop
                // what was written of it.
                out.truncate(start);
                out.push_str("{\"value\": \"null\"}");
                return;
            }
        }
        out.push('}');
    }

    /// `json.dumps(format_node_data(data))` for one input_data/output_data dict, appended to
    /// `out`.
    pub fn map_into(&mut self, map: &ItemMap, node_id: &str, mode: Mode, out: &mut String) {
        self.map_with_results_into(map, None, NodeFormat::new(node_id, mode), out);
    }

    /// [`ItemWriter::map_into`] of the map `compare::apply_results` would make of `map` and
    /// the node's `results`, without making it: the columns are written from the results
    /// (no item copied, no relative error turned into a String first).
    pub fn map_with_results_into(
        &mut self,
        map: &ItemMap,
        results: Option<&[(String, ItemResult)]>,
        f: NodeFormat,
        out: &mut String,
    ) {
        out.push('{');
        for (i, (key, item)) in map.iter().enumerate() {
            if i > 0 {
                out.push_str(", ");
            }
            json_str(key, out);
            out.push_str(": ");
            let cols = results.and_then(|r| r.iter().find(|(kk, _)| kk == key).map(|(_, c)| c));
            self.item_into(item, cols, f, out);
        }
        out.push('}');
    }
}

/// Appends the formatted item (`_format_data`) as a JSON object to `out`.
pub fn format_item(store: &Store, item: &Item, node_id: &str, mode: Mode, out: &mut String) {
    ItemWriter::new(store).item_into(item, None, NodeFormat::new(node_id, mode), out);
}

/// `json.dumps(format_node_data(data))` for one input_data/output_data dict.
pub fn format_map(store: &Store, map: &ItemMap, node_id: &str, mode: Mode) -> String {
    // About 200 bytes an item (a statistics item with its compare cells): one allocation
    // instead of a chain of doublings for most maps.
    let mut out = String::with_capacity(2 + map.len() * 224);
    ItemWriter::new(store).map_into(map, node_id, mode, &mut out);
    out
}

/// The formatted fields of one item as (key, text) pairs, for views.
pub fn formatted_fields(
    store: &Store,
    item: &Item,
    node_id: &str,
    mode: Mode,
) -> Vec<(String, String)> {
    let mut s = String::new();
    format_item(store, item, node_id, mode, &mut s);
    match serde_json::from_str::<serde_json::Map<String, serde_json::Value>>(&s) {
        Ok(m) => m
            .into_iter()
            .map(|(kk, v)| {
                let text = match v {
                    serde_json::Value::String(s) => s,
                    other => other.to_string(),
                };
                (kk, text)
            })
            .collect(),
        Err(_) => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::formats::keys::{intern_known_keys, KNOWN_KEYS};

    #[test]
    fn decimal_is_display() {
        let mut buf = [0u8; 20];
        for i in [0usize, 1, 9, 10, 99, 100, 12345, usize::MAX] {
            assert_eq!(decimal(i, &mut buf), i.to_string());
        }
    }

    #[test]
    fn crc32_matches_zlib() {
        assert_eq!(format!("{:08x}", crc32(b"1")), "83dcefb7");
        assert_eq!(format!("{:08x}", crc32(b"")), "00000000");
    }

    #[test]
    fn decimal_strings() {
        assert_eq!(format_decimal_string("23.076923076923077%"), "23.076923%");
        assert_eq!(format_decimal_string("0.0%"), "0.0%");
        assert_eq!(format_decimal_string("-0.1234567%"), "-0.1234567%");
        assert_eq!(format_decimal_string("1e-05%"), "1e-05%");
        assert_eq!(format_fixed6(0.0078125), "0.007812");
        assert_eq!(format_fixed6(2.5e-7), "0.000000");
    }

    /// The former `_format_decimal_string` (always a new String): the oracle of the borrowing one.
    fn format_decimal_string_reference(s: &str) -> String {
        let (num, pct) = match s.strip_suffix('%') {
            Some(n) => (n, true),
            None => (s, false),
        };
        let Some((a, b)) = num.split_once('.') else {
            return s.to_string();
        };
        let ok = |p: &str| !p.is_empty() && p.len() <= 20 && p.bytes().all(|c| c.is_ascii_digit());
        if !ok(a) || !ok(b) || b.len() <= 6 {
            return s.to_string();
        }
        let Ok(x) = num.parse::<f64>() else {
            return s.to_string();
        };
        let mut out = format_fixed6(x);
        if pct {
            out.push('%');
        }
        out
    }

    /// The former `format_item`: every field's text built in a buffer, then quoted, and `Max`
    /// formatted once more to test for "null" first. The oracle of the direct one.
    fn format_item_reference(store: &Store, item: &Item, node_id: &str, mode: Mode) -> String {
        #[derive(PartialEq)]
        enum FieldText {
            Quoted,
            Raw,
        }
        let field_text = |key: KeyId, v: &Py, buf: &mut String| -> FieldText {
            buf.clear();
            if let Some(text) = v.as_str(store) {
                if text.contains('\'') || text.contains("None") {
                    let t = text.replace('\'', "").replace("None", "null");
                    buf.push_str(&format_decimal_string_reference(&t));
                } else if text.contains('.') {
                    buf.push_str(&format_decimal_string_reference(text));
                } else {
                    buf.push_str(text);
                }
                FieldText::Quoted
            } else if v.is_none() {
                buf.push_str("null");
                FieldText::Quoted
            } else if key == k::ERROR_KEY {
                if let Py::V(val) = v {
                    crate::formats::pyfmt::json_dumps(store, *val, buf);
                }
                FieldText::Raw
            } else {
                v.write_py_str(store, buf);
                FieldText::Quoted
            }
        };
        let batch_p2p = node_id.contains("batch_isend_irecv");
        let is_pg = item
            .get(k::TYPE)
            .and_then(|t| t.as_str(store))
            .is_some_and(|t| t == "torch.ProcessGroup");
        let keep = |key: KeyId| {
            !(key == k::STATE
                || key == k::FULL_OP_NAME
                || (key == k::MD5 && mode != Mode::Md5)
                || (batch_p2p && [k::OP, k::PEER, k::TAG, k::GROUP_ID].contains(&key))
                || (is_pg && ![k::TYPE, k::GROUP_RANKS, k::GROUP_ID, k::DATA_NAME].contains(&key)))
        };
        let mut buf = String::new();
        let all_null = item.fields.iter().any(|(key, v)| {
            *key == k::MAX
                && keep(*key)
                && field_text(*key, v, &mut buf) == FieldText::Quoted
                && buf == "null"
        });
        if all_null {
            return "{\"value\": \"null\"}".into();
        }
        let mut out = String::from("{");
        let mut first = true;
        for (key, v) in &item.fields {
            if !keep(*key) {
                continue;
            }
            if !first {
                out.push_str(", ");
            }
            first = false;
            json_str(store.key(*key), &mut out);
            out.push_str(": ");
            if field_text(*key, v, &mut buf) == FieldText::Raw {
                out.push_str(&buf);
            } else {
                json_str(&buf, &mut out);
            }
        }
        out.push('}');
        out
    }

    #[test]
    fn decimal_strings_borrow_what_they_keep() {
        for s in [
            "",
            "1",
            "1.5",
            "1.1234567",
            "1.1234567%",
            "12.345678901234567%",
            "-0.1234567",
            "torch.float32",
            "0.1234567a",
            "1e-05%",
            "1.%",
            ".1234567",
            "00.12345678",
            "123456789012345678901.1234567",
            "1.123456789012345678901",
            "None.1234567",
            "%",
            "7.0000005",
            "7.0000015",
            "0.0000005",
        ] {
            let got = format_decimal_string(s);
            assert_eq!(got, format_decimal_string_reference(s), "{s}");
            assert_eq!(
                matches!(got, std::borrow::Cow::Borrowed(_)),
                got == s,
                "{s}"
            );
        }
    }

    /// `format_item` writes what the former one wrote, over random items of every kind of value
    /// (floats, ints, bools, None, strs with quotes, "None", decimals and escapes, lists, dicts,
    /// relative errors), every mode, process groups, batch p2p nodes and `Max` made "null".
    #[test]
    fn format_item_is_the_former_one() {
        let mut store = Store::default();
        intern_known_keys(&mut store);
        let odd_key = store.intern_key("k\u{e9}\"y");
        let plain_key = store.intern_key("extra");
        // Ids at and above 64 (outside `KeySet`'s bits).
        let far: Vec<KeyId> = (0..30)
            .map(|i| store.intern_key(&format!("far{i}")))
            .collect();
        assert!(far.iter().any(|f| f.0 >= 64));
        let text = br#"[null, true, false, 0, -1, 123456789, 12345678901234567890123, 1.5, 0.1,
            -0.0, NaN, Infinity, -Infinity, 1e-07, 3.0000001234, 2.5e+20, "torch.float32",
            "0.123456789", "12.3456789%", "None", "'None'", "it's 0.12345678", "null", "", "1.5",
            "x\"y", "\u00e9", "[1, 2]", "1.0000000", "00.1234567", "None.1234567", "torch.ProcessGroup",
            "NoneNone", "Non", "N", "'", "a\\b\n", "0.1234567'", [], [1, 2], [[1, 2], [3, 4]],
            ["a'b", "c\"d"], {"a": 1, "b": [1.5, null]}, {}, [1.5, NaN], {"x": "None"}]"#;
        let mut r = crate::formats::json::Reader::new(text);
        let root = r.value(&mut store, 0).unwrap();
        let vals: Vec<Val> = store.list(root).to_vec();
        let texts = [
            "None",
            "'None'",
            "null",
            "",
            "torch.float32",
            "0.12345678",
            "3.1415926535%",
            "torch.ProcessGroup",
            "N/A",
            "pass",
            "a\"b",
            "\u{e9}t\u{e9}",
            "1.5%",
            "it's",
        ];
        let mut rng = crate::base::test_rng(0x2545_F491_4F6C_DD1Du64);
        let mut next = move |n: usize| (rng() % n as u64) as usize;
        let floats = [
            0.0,
            -0.0,
            1.5,
            0.1 + 0.2,
            1e-300,
            1e300,
            f64::NAN,
            f64::INFINITY,
            123.456789,
            2.5e-5,
        ];
        let mut keys: Vec<KeyId> = (0..KNOWN_KEYS.len() as u32).map(KeyId).collect();
        keys.extend([odd_key, plain_key, k::MAX, k::MAX, k::ERROR_KEY, k::TYPE]);
        keys.extend(&far[18..]);
        let modes = [
            Mode::Build,
            Mode::Summary,
            Mode::Md5,
            Mode::RealData,
            Mode::Structure,
        ];
        let mut checked = 0;
        let mut writer = ItemWriter::new(&store);
        for round in 0..40_000 {
            let mut item = default_item("Torch.add.0.forward.input.0", State::Input);
            item.fields.clear();
            for _ in 0..next(14) {
                let key = keys[next(keys.len())];
                let v = match next(9) {
                    0..=2 => Py::from_val(vals[next(vals.len())]),
                    3 => Py::S(texts[next(texts.len())].to_string()),
                    4 => Py::Lit(texts[next(texts.len())]),
                    5 => Py::F(floats[next(floats.len())]),
                    6 => Py::Pct(floats[next(floats.len())]),
                    7 => [Py::I(next(1000) as i64 - 500), Py::B(next(2) == 0)][next(2)].clone(),
                    _ => Py::None,
                };
                item.set(key, v);
            }
            if next(8) == 0 {
                item.set(k::TYPE, Py::Lit("torch.ProcessGroup"));
            }
            let node = if round % 5 == 0 {
                "Distributed.batch_isend_irecv.0.forward"
            } else {
                "Torch.add.0.forward"
            };
            let mode = modes[next(modes.len())];
            let mut got = String::from("x");
            format_item(&store, &item, node, mode, &mut got);
            assert_eq!(
                got[1..],
                format_item_reference(&store, &item, node, mode),
                "{item:?}"
            );
            checked += usize::from(got.ends_with("{\"value\": \"null\"}"));
            // Compare columns laid over the items while writing = written after
            // `apply_results` (keys of the item's own and new ones, repeated, short of cells).
            let ncols = next(12);
            let col_keys: Vec<KeyId> = (0..ncols).map(|_| keys[next(keys.len())]).collect();
            let mut cells: Vec<Cell> = (0..ncols.saturating_sub(next(2)))
                .map(|_| {
                    Cell::from_py(match next(6) {
                        0 => Py::from_val(vals[next(vals.len())]),
                        1 => Py::S(format!(
                            "{}%",
                            crate::formats::pyfmt::float_repr(floats[next(10)])
                        )),
                        2 => Py::S(texts[next(texts.len())].to_string()),
                        3 => Py::Lit(["N/A", "pass", "[]", "Nan", "odd"][next(5)]),
                        4 => Py::Pct(floats[next(floats.len())]),
                        _ => Py::F(floats[next(floats.len())]),
                    })
                })
                .collect();
            if next(3) == 0 {
                cells.push(Cell::None);
            }
            let cols = crate::graph::cells::ItemResult {
                keys: Box::leak(col_keys.into_boxed_slice()),
                cells: cells.into_boxed_slice(),
            };
            let map: ItemMap = vec![("a.input.0".into(), item.clone()), ("b\"".into(), item)];
            let results = vec![("b\"".to_string(), cols.clone()), ("b\"".to_string(), cols)];
            let mut applied = map.clone();
            crate::compare::apply_results(&mut [&mut applied], Some(&results));
            let mut laid = String::new();
            writer.map_with_results_into(
                &map,
                Some(&results),
                NodeFormat::new(node, mode),
                &mut laid,
            );
            assert_eq!(
                laid,
                format_map(&store, &applied, node, mode),
                "{map:?} {results:?}"
            );
            // One writer for all rounds, as the export keeps one for a graph (its quoted keys).
            let mut whole = String::new();
            writer.map_into(&map, node, mode, &mut whole);
            assert_eq!(whole, format_map(&store, &map, node, mode));
            let one = format_item_reference(&store, &map[0].1, node, mode);
            assert_eq!(whole, format!("{{\"a.input.0\": {one}, \"b\\\"\": {one}}}"));
        }
        assert!(
            checked > 100,
            "the cases include items made all-null ({checked})"
        );
    }

    /// Item names as `op_item_parse` joins them (`name.field`, `name.index`, none for the
    /// elements of a parameter gradient list), built in one buffer across siblings and depths.
    #[test]
    fn read_op_names_items() {
        let text = br#"{"input_args": [{"type": "torch.Tensor", "Max": 1.0},
            [{"type": "torch.Tensor"}, {"type": "int", "value": 3}],
            {"a": {"type": "torch.Tensor"}, "b": [{"type": "float", "value": 1.5}]}],
          "input_kwargs": {"k": {"type": "torch.Tensor"}, "n": null},
          "output": [{"type": "torch.Tensor"}],
          "parameters": {"weight": {"type": "torch.Tensor"}, "parameters_grad": [{"type": "torch.Tensor"}, {"type": "torch.Tensor"}]}}"#;
        let mut store = Store::default();
        intern_known_keys(&mut store);
        let entry = crate::formats::json::Reader::new(text)
            .value(&mut store, 0)
            .unwrap();
        let names = |op: &str| -> Vec<String> {
            read_op(&store, Some(entry), op, "dump.json")
                .unwrap()
                .into_iter()
                .map(|it| it.full_op_name)
                .collect()
        };
        let op = "Torch.add.0.forward";
        assert_eq!(
            names(op),
            [
                "Torch.add.0.forward.input.0",
                "Torch.add.0.forward.input.1.0",
                "Torch.add.0.forward.input.1.1",
                "Torch.add.0.forward.input.2.a",
                "Torch.add.0.forward.input.2.b.0",
                "Torch.add.0.forward.input.k",
                "Torch.add.0.forward.input.n",
                "Torch.add.0.forward.output.0",
                "Torch.add.0.forward.parameters.weight",
                "Torch.add.0.forward.parameters.parameters_grad",
                "Torch.add.0.forward.parameters.parameters_grad",
            ]
        );
        // A debug entry is flattened as a whole under its own name.
        assert_eq!(names("Tensor.x.debug")[0], "Tensor.x.debug.input_args.0");
        assert_eq!(names("Tensor.x.debug")[5], "Tensor.x.debug.input_kwargs.k");
    }

    /// The exact integer `{:.6}` against Rust's formatting over random bit patterns, exact binary
    /// fractions (where the 7th decimal can be an exact tie), subnormals, both signs, and the
    /// values beyond its range.
    #[test]
    fn fixed6_is_rusts() {
        let mut next = crate::base::test_rng(0x9E37_79B9_7F4A_7C15u64);
        let mut xs = vec![
            0.0,
            0.0078125,
            2.5e-7,
            5e-7,
            4.999999999999999e-7,
            1e17,
            9.999999999999998e16,
            f64::MAX,
            f64::MIN_POSITIVE,
            5e-324,
            f64::NAN,
            f64::INFINITY,
            0.1 + 0.2,
            123456.7890125,
        ];
        for i in 0..200_000 {
            // Random bits are mostly huge or tiny (slow to format the reference way): fewer.
            if i % 4 == 0 {
                xs.push(f64::from_bits(next()));
            }
            let m = (next() % (1 << 30)) as f64;
            xs.push(m * 2f64.powi(-((next() % 40) as i32)));
            let scale = 10f64.powi((next() % 40) as i32 - 20);
            xs.push((next() % 1_000_000_000) as f64 * scale);
        }
        let mut got = String::new();
        for x in xs {
            for x in [x, -x] {
                got.clear();
                fixed6_into(x, &mut got);
                assert_eq!(got, format!("{x:.6}"), "{x:e}");
            }
        }
    }
}
