//! Pickle, just enough for `torch.save`'s data.pkl: a small VM for
//! `torch._utils._rebuild_tensor_v2` over a persistent-id storage, and [`read_pt`].

use super::zip::{zip_data, zip_entries};
use super::{err, gather, strided_index, SType, Tensor};
use crate::base::error::{Error, Result};
use std::rc::Rc;

#[derive(Debug, Clone)]
pub(super) enum V {
    None,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(Rc<str>),
    Bytes,
    /// `module.name` of a GLOBAL.
    Global(Rc<str>),
    /// A tuple or list, and its nesting depth.
    Seq(Rc<Vec<V>>, u32),
    Dict,
    Storage(Rc<StorageRef>),
    Tensor(Rc<TensorRef>),
    /// Anything else built by REDUCE/NEWOBJ.
    Opaque(Rc<str>),
}

#[derive(Debug)]
pub(super) struct StorageRef {
    stype: SType,
    key: String,
}

#[derive(Debug)]
pub(super) struct TensorRef {
    storage: Rc<StorageRef>,
    offset: usize,
    shape: Vec<usize>,
    stride: Vec<usize>,
}

pub(super) const MAX_DEPTH: u32 = 64;
pub(super) const MAX_STACK: usize = 1 << 16;

pub(super) fn depth(v: &V) -> u32 {
    match v {
        V::Seq(_, d) => *d,
        _ => 0,
    }
}

pub(super) fn describe(v: &V) -> String {
    match v {
        V::None => "None".into(),
        V::Bool(b) => format!("{b}"),
        V::Int(i) => format!("the int {i}"),
        V::Float(f) => format!("the float {f}"),
        V::Str(s) => format!("the string {s:?}"),
        V::Bytes => "bytes".into(),
        V::Global(g) => format!("the global {g}"),
        V::Seq(..) => "a tuple or list".into(),
        V::Dict => "a dict".into(),
        V::Storage(_) => "a storage".into(),
        V::Tensor(_) => "a tensor".into(),
        V::Opaque(what) => format!("an object made by {what}"),
    }
}

pub(super) struct Vm<'a> {
    file: &'a str,
    b: &'a [u8],
    p: usize,
    stack: Vec<V>,
    marks: Vec<usize>,
    memo: crate::base::HashMap<u32, V>,
}

impl<'a> Vm<'a> {
    fn bad(&self, msg: impl std::fmt::Display) -> Error {
        err(
            self.file,
            format!("data.pkl at byte {}: {msg}", self.p.saturating_sub(1)),
        )
    }
    fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        let s = self
            .p
            .checked_add(n)
            .and_then(|e| self.b.get(self.p..e))
            .ok_or_else(|| self.bad("truncated pickle"))?;
        self.p += n;
        Ok(s)
    }
    fn uint(&mut self, n: usize) -> Result<u64> {
        let s = self.take(n)?;
        let mut v = 0u64;
        for (i, x) in s.iter().enumerate() {
            v |= (*x as u64) << (8 * i);
        }
        Ok(v)
    }
    fn len(&mut self, n: usize) -> Result<usize> {
        let l = self.uint(n)?;
        usize::try_from(l).map_err(|_| self.bad("length too large"))
    }
    fn line(&mut self) -> Result<&'a str> {
        let rest = self.b.get(self.p..).unwrap_or(&[]);
        let end = rest
            .iter()
            .position(|c| *c == b'\n')
            .ok_or_else(|| self.bad("unterminated GLOBAL"))?;
        let s = std::str::from_utf8(&rest[..end]).map_err(|_| self.bad("GLOBAL is not UTF-8"))?;
        self.p += end + 1;
        Ok(s)
    }
    fn push(&mut self, v: V) -> Result<()> {
        if self.stack.len() >= MAX_STACK {
            return Err(self.bad("pickle stack too deep"));
        }
        self.stack.push(v);
        Ok(())
    }
    fn pop(&mut self) -> Result<V> {
        if self.stack.len() <= self.marks.last().copied().unwrap_or(0) && !self.marks.is_empty() {
            return Err(self.bad("pop across a mark"));
        }
        self.stack
            .pop()
            .ok_or_else(|| self.bad("pop from an empty stack"))
    }
    fn pop_mark(&mut self) -> Result<Vec<V>> {
        let m = self
            .marks
            .pop()
            .ok_or_else(|| self.bad("no mark on the stack"))?;
        if m > self.stack.len() {
            return Err(self.bad("broken mark"));
        }
        Ok(self.stack.split_off(m))
    }
    fn seq(&self, items: Vec<V>) -> Result<V> {
        let d = 1 + items.iter().map(depth).max().unwrap_or(0);
        if d > MAX_DEPTH {
            return Err(self.bad("nesting too deep"));
        }
        Ok(V::Seq(Rc::new(items), d))
    }
    fn top_mut(&mut self) -> Result<&mut V> {
        let floor = self.marks.last().copied().unwrap_or(0);
        if self.stack.len() <= floor {
            return Err(self.bad("empty stack"));
        }
        self.stack
            .last_mut()
            .ok_or_else(|| err(self.file, "empty stack"))
    }

    fn run(&mut self) -> Result<V> {
        loop {
            let op = *self.take(1)?.first().unwrap_or(&0);
            match op {
                0x80 => {
                    self.take(1)?; // PROTO
                }
                0x95 => {
                    self.take(8)?; // FRAME
                }
                b'.' => return self.pop(),
                b'(' => {
                    if self.marks.len() >= MAX_STACK {
                        return Err(self.bad("too many marks"));
                    }
                    self.marks.push(self.stack.len());
                }
                b')' => self.push(self.seq(Vec::new())?)?,
                b't' => {
                    let items = self.pop_mark()?;
                    let v = self.seq(items)?;
                    self.push(v)?;
                }
                0x85..=0x87 => {
                    let n = (op - 0x84) as usize;
                    let mut items = Vec::with_capacity(n);
                    for _ in 0..n {
                        items.push(self.pop()?);
                    }
                    items.reverse();
                    let v = self.seq(items)?;
                    self.push(v)?;
                }
                b']' => self.push(self.seq(Vec::new())?)?,
                b'l' => {
                    let items = self.pop_mark()?;
                    let v = self.seq(items)?;
                    self.push(v)?;
                }
                b'a' | b'e' => {
                    let items = if op == b'a' {
                        vec![self.pop()?]
                    } else {
                        self.pop_mark()?
                    };
                    let d = 1 + items.iter().map(depth).max().unwrap_or(0);
                    let file = self.file;
                    let at = self.p;
                    match self.top_mut()? {
                        V::Seq(list, ld) => {
                            let nd = (*ld).max(d);
                            if nd > MAX_DEPTH {
                                return Err(err(
                                    file,
                                    format!("data.pkl at byte {at}: nesting too deep"),
                                ));
                            }
                            Rc::make_mut(list).extend(items);
                            *ld = nd;
                        }
                        other => {
                            let what = describe(other);
                            return Err(err(
                                file,
                                format!("data.pkl at byte {at}: APPEND to {what}"),
                            ));
                        }
                    }
                }
                b'}' => self.push(V::Dict)?,
                b'd' => {
                    self.pop_mark()?;
                    self.push(V::Dict)?;
                }
                b's' => {
                    self.pop()?;
                    self.pop()?;
                    self.top_mut()?;
                }
                b'u' => {
                    self.pop_mark()?;
                    self.top_mut()?;
                }
                b'N' => self.push(V::None)?,
                0x88 => self.push(V::Bool(true))?,
                0x89 => self.push(V::Bool(false))?,
                b'J' => {
                    let v = self.uint(4)? as u32 as i32 as i64;
                    self.push(V::Int(v))?;
                }
                b'K' => {
                    let v = self.uint(1)? as i64;
                    self.push(V::Int(v))?;
                }
                b'M' => {
                    let v = self.uint(2)? as i64;
                    self.push(V::Int(v))?;
                }
                0x8a | 0x8b => {
                    let n = if op == 0x8a {
                        self.len(1)?
                    } else {
                        self.len(4)?
                    };
                    let s = self.take(n)?;
                    if n > 8 {
                        return Err(self.bad("integer wider than 64 bits"));
                    }
                    let mut v: i64 = 0;
                    for (i, x) in s.iter().enumerate() {
                        v |= (*x as i64) << (8 * i);
                    }
                    if n > 0 && n < 8 && s[n - 1] & 0x80 != 0 {
                        v -= 1i64 << (8 * n);
                    }
                    self.push(V::Int(v))?;
                }
                b'G' => {
                    let s = self.take(8)?;
                    let mut a = [0u8; 8];
                    a.copy_from_slice(s);
                    self.push(V::Float(f64::from_be_bytes(a)))?;
                }
                b'X' | 0x8c | 0x8d => {
                    let n = match op {
                        b'X' => self.len(4)?,
                        0x8c => self.len(1)?,
                        _ => self.len(8)?,
                    };
                    let s = self.take(n)?;
                    let s = std::str::from_utf8(s).map_err(|_| self.bad("string is not UTF-8"))?;
                    self.push(V::Str(Rc::from(s)))?;
                }
                b'B' | b'C' | 0x8e | b'T' | b'U' => {
                    let n = match op {
                        b'B' | b'T' => self.len(4)?,
                        b'C' | b'U' => self.len(1)?,
                        _ => self.len(8)?,
                    };
                    self.take(n)?;
                    self.push(V::Bytes)?;
                }
                b'c' => {
                    let module = self.line()?;
                    let name = self.line()?;
                    self.push(V::Global(Rc::from(format!("{module}.{name}"))))?;
                }
                0x93 => {
                    let name = self.pop()?;
                    let module = self.pop()?;
                    match (module, name) {
                        (V::Str(m), V::Str(n)) => {
                            self.push(V::Global(Rc::from(format!("{m}.{n}"))))?
                        }
                        _ => return Err(self.bad("STACK_GLOBAL needs two strings")),
                    }
                }
                b'q' | b'r' | 0x94 => {
                    let key = match op {
                        b'q' => self.uint(1)? as u32,
                        b'r' => self.uint(4)? as u32,
                        _ => self.memo.len() as u32,
                    };
                    let v = self
                        .stack
                        .last()
                        .cloned()
                        .ok_or_else(|| self.bad("memoize on an empty stack"))?;
                    if self.memo.len() >= MAX_STACK && !self.memo.contains_key(&key) {
                        return Err(self.bad("too many memo entries"));
                    }
                    self.memo.insert(key, v);
                }
                b'h' | b'j' => {
                    let key = if op == b'h' {
                        self.uint(1)? as u32
                    } else {
                        self.uint(4)? as u32
                    };
                    let v = self
                        .memo
                        .get(&key)
                        .cloned()
                        .ok_or_else(|| self.bad(format!("memo {key} is not set")))?;
                    self.push(v)?;
                }
                b'0' => {
                    self.pop()?;
                }
                b'1' => {
                    self.pop_mark()?;
                }
                b'2' => {
                    let v = self.top_mut()?.clone();
                    self.push(v)?;
                }
                b'Q' => {
                    let pid = self.pop()?;
                    let v = self.persistent(pid)?;
                    self.push(v)?;
                }
                b'R' => {
                    let args = self.pop()?;
                    let f = self.pop()?;
                    let v = self.reduce(f, args)?;
                    self.push(v)?;
                }
                0x81 => {
                    let _args = self.pop()?;
                    let cls = self.pop()?;
                    self.push(V::Opaque(Rc::from(describe(&cls))))?;
                }
                b'b' => {
                    self.pop()?; // BUILD: the state of an object we do not model
                    self.top_mut()?;
                }
                other => {
                    return Err(self.bad(format!(
                        "pickle opcode 0x{other:02x} is not one torch.save writes for a tensor"
                    )))
                }
            }
        }
    }

    fn persistent(&self, pid: V) -> Result<V> {
        let V::Seq(t, _) = &pid else {
            return Err(self.bad(format!(
                "persistent id is {}, expected ('storage', type, key, location, numel)",
                describe(&pid)
            )));
        };
        match t.as_slice() {
            [V::Str(tag), ty, V::Str(key), _loc, _numel, ..] if &**tag == "storage" => {
                let name = match ty {
                    // An untyped storage holds bytes; _rebuild_tensor_v3 then gives the dtype.
                    V::Global(g) if g.ends_with(".UntypedStorage") => "uint8".to_string(),
                    V::Global(g) => g.rsplit('.').next().unwrap_or("").to_string(),
                    other => {
                        return Err(self.bad(format!(
                            "storage type is {}, expected a torch storage class",
                            describe(other)
                        )))
                    }
                };
                let stype = SType::parse(&name).ok_or_else(|| {
                    self.bad(format!(
                        "storage type {name} is not supported (complex or quantized tensors)"
                    ))
                })?;
                Ok(V::Storage(Rc::new(StorageRef {
                    stype,
                    key: key.to_string(),
                })))
            }
            _ => Err(self
                .bad("persistent id is not ('storage', type, key, location, numel)".to_string())),
        }
    }

    fn ints(&self, v: &V, what: &str) -> Result<Vec<usize>> {
        let V::Seq(items, _) = v else {
            return Err(self.bad(format!(
                "{what} is {}, expected a tuple of ints",
                describe(v)
            )));
        };
        items
            .iter()
            .map(|x| match x {
                V::Int(i) if *i >= 0 => usize::try_from(*i).map_err(|_| self.bad("size")),
                other => Err(self.bad(format!(
                    "{what} holds {}, expected non-negative ints",
                    describe(other)
                ))),
            })
            .collect()
    }

    fn reduce(&self, f: V, args: V) -> Result<V> {
        let V::Global(name) = &f else {
            return Ok(V::Opaque(Rc::from(describe(&f))));
        };
        let V::Seq(a, _) = &args else {
            return Err(self.bad(format!("REDUCE arguments are {}", describe(&args))));
        };
        match &**name {
            "torch._utils._rebuild_tensor_v2"
            | "torch._utils._rebuild_tensor"
            | "torch._utils._rebuild_tensor_v3" => {
                let (Some(V::Storage(st)), Some(off), Some(size), Some(stride)) =
                    (a.first(), a.get(1), a.get(2), a.get(3))
                else {
                    return Err(self.bad(format!(
                        "{name} expects (storage, offset, size, stride, ...)"
                    )));
                };
                let offset = match off {
                    V::Int(i) if *i >= 0 => {
                        usize::try_from(*i).map_err(|_| self.bad("storage offset"))?
                    }
                    other => {
                        return Err(self.bad(format!(
                            "storage offset is {}, expected an int",
                            describe(other)
                        )))
                    }
                };
                let shape = self.ints(size, "size")?;
                let stride = self.ints(stride, "stride")?;
                if shape.len() != stride.len() {
                    return Err(self.bad("size and stride differ in length"));
                }
                let mut storage = st.clone();
                // v3 carries the dtype separately (over an untyped storage).
                if &**name == "torch._utils._rebuild_tensor_v3" {
                    if let Some(V::Global(dt)) = a.get(6) {
                        let dn = dt.rsplit('.').next().unwrap_or("");
                        let stype = SType::parse(dn)
                            .ok_or_else(|| self.bad(format!("dtype {dn} is not supported")))?;
                        storage = Rc::new(StorageRef {
                            stype,
                            key: st.key.clone(),
                        });
                    }
                }
                Ok(V::Tensor(Rc::new(TensorRef {
                    storage,
                    offset,
                    shape,
                    stride,
                })))
            }
            "torch._utils._rebuild_parameter" | "torch._utils._rebuild_parameter_with_state" => {
                match a.first() {
                    Some(t @ V::Tensor(_)) => Ok(t.clone()),
                    _ => Err(self.bad(format!("{name} without a tensor"))),
                }
            }
            "collections.OrderedDict" | "builtins.dict" => Ok(V::Dict),
            other => Ok(V::Opaque(Rc::from(other))),
        }
    }
}

/// Reads a `torch.save` file holding one tensor.
pub fn read_pt(file: &str, bytes: &[u8]) -> Result<Tensor> {
    let entries = zip_entries(file, bytes)?;
    let pkl = entries
        .iter()
        .find(|e| e.name == "data.pkl" || e.name.ends_with("/data.pkl"))
        .ok_or_else(|| {
            err(
                file,
                "not a PyTorch .pt file: the archive has no data.pkl (legacy non-zip torch.save files are not supported)",
            )
        })?;
    let prefix = pkl.name.strip_suffix("data.pkl").unwrap_or("").to_string();
    let code = zip_data(file, bytes, pkl)?;
    let mut vm = Vm {
        file,
        b: code,
        p: 0,
        stack: Vec::new(),
        marks: Vec::new(),
        memo: crate::base::HashMap::default(),
    };
    let top = vm.run()?;
    let V::Tensor(t) = top else {
        return Err(err(
            file,
            format!(
                "data.pkl holds {}, expected one tensor (torch.save of a torch.Tensor)",
                describe(&top)
            ),
        ));
    };
    let big_endian = match entries
        .iter()
        .find(|e| e.name == format!("{prefix}byteorder"))
    {
        Some(e) => zip_data(file, bytes, e)? == b"big",
        None => false,
    };
    let key = format!("{prefix}data/{}", t.storage.key);
    let se = entries.iter().find(|e| e.name == key).ok_or_else(|| {
        err(
            file,
            format!("the archive has no storage entry {key} for its tensor"),
        )
    })?;
    let sbytes = zip_data(file, bytes, se)?;
    let stype = t.storage.stype;
    let storage_len = sbytes.len() / stype.size();
    let index = strided_index(file, &t.shape, &t.stride, t.offset, storage_len)?;
    let data = gather(file, stype, sbytes, big_endian, &index)?;
    Ok(Tensor {
        dtype: stype.dtype(),
        shape: t.shape.clone(),
        data,
    })
}
