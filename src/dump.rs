//! One rank folder of an msprobe dump: `dump.json`, `construct.json`, `stack.json`.
//!
//! [`RankDump::parse`] takes the three files' bytes and returns the typed, immutable model the
//! graph builder and the layer mapping read. `dump.json` is read entry by entry into a compact
//! [`Store`]; no `serde_json::Value` of a whole file is ever built. The overflow scene of every
//! entry (msprobe's `-oc`) is decided here, while the entry is at hand, so later stages need not
//! walk the raw data again.

use crate::error::{Error, ErrorKind, Place, Result};
use crate::json::{line_col, Reader, Store, SyntaxError, Val};
use crate::pyfmt::py_str;
use std::collections::HashMap;

/// The task field of dump.json.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Task {
    Statistics,
    Tensor,
    Structure,
    Other(String),
}

impl Task {
    pub fn as_str(&self) -> &str {
        match self {
            Task::Statistics => "statistics",
            Task::Tensor => "tensor",
            Task::Structure => "structure",
            Task::Other(s) => s,
        }
    }
}

/// msprobe's overflow levels.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum OverflowLevel {
    Medium,
    High,
    Critical,
}

impl OverflowLevel {
    pub fn as_str(self) -> &'static str {
        match self {
            OverflowLevel::Medium => "medium",
            OverflowLevel::High => "high",
            OverflowLevel::Critical => "critical",
        }
    }
}

/// One `data` entry of dump.json.
#[derive(Debug, Clone)]
pub struct Entry {
    pub name: String,
    /// The entry's value (normally an object) in [`RankDump::store`].
    pub value: Val,
    /// Overflow scene after msprobe's ignore rules.
    pub overflow: Option<OverflowLevel>,
}

/// A stack as msprobe keeps it: whatever value stack.json has for the name.
pub type StackVal = Val;

/// File names used in messages (relative paths as the user sees them).
#[derive(Debug, Clone, Default)]
pub struct FileNames {
    pub dump: String,
    pub construct: String,
    pub stack: String,
}

impl FileNames {
    pub fn in_dir(dir: &str) -> Self {
        let join = |f: &str| {
            if dir.is_empty() {
                f.to_string()
            } else {
                format!("{}/{}", dir.trim_end_matches('/'), f)
            }
        };
        FileNames {
            dump: join("dump.json"),
            construct: join("construct.json"),
            stack: join("stack.json"),
        }
    }
}

/// The three files of one rank, parsed.
#[derive(Debug)]
pub struct RankDump {
    pub names: FileNames,
    pub store: Store,
    pub task: Option<String>,
    pub level: Option<String>,
    /// `framework` key as written (None if absent).
    pub framework_key: Option<String>,
    /// The detected framework: the key if it is pytorch/mindspore, else from the first leaf type.
    pub framework: Option<&'static str>,
    pub dump_data_dir: Option<String>,
    pub has_data_key: bool,
    pub data_is_object: bool,
    pub entries: Vec<Entry>,
    pub entry_index: HashMap<String, u32>,
    /// construct.json in file order: (child, parent).
    pub construct: Vec<(String, Option<String>)>,
    pub construct_index: HashMap<String, u32>,
    /// Megatron format: `megatron_micro_step_number` and per-node micro step.
    pub micro_step_number: Option<Val>,
    pub micro: HashMap<String, i64>,
    /// stack.json converted to name -> stack (msprobe's `load_stack_json`).
    pub stack_by_name: HashMap<String, StackVal>,
    /// stack.json as loaded (top-level key -> value), used by the layer mapping.
    pub stack_raw: HashMap<String, StackVal>,
    pub stack_raw_empty: bool,
    /// Any top-level list element of an entry has an `md5` key (msprobe's `md5_find`).
    pub has_md5: bool,
}

fn syntax(file: &str, buf: &[u8], e: SyntaxError) -> Error {
    let (l, c) = line_col(buf, e.offset);
    let msg = if e.offset >= buf.len() && buf.is_empty() {
        "the file is empty, expected a JSON object".to_string()
    } else {
        format!("invalid JSON: {}", e.msg)
    };
    Error::new(ErrorKind::Syntax, file, Place::LineCol(l, c), msg)
}

fn type_name(v: Val) -> &'static str {
    match v {
        Val::Null => "null",
        Val::Bool(_) => "a boolean",
        Val::Int(_) | Val::BigInt(_) | Val::Float(_) => "a number",
        Val::Str(_) => "a string",
        Val::List { .. } => "a list",
        Val::Obj { .. } => "an object",
    }
}

/// `data["name"]` as a JSON path.
pub fn entry_path(name: &str) -> String {
    let mut s = String::from("data[");
    crate::pyfmt::json_str(name, &mut s);
    s.push(']');
    s
}

impl RankDump {
    /// Parses one rank folder's files. `stack` may be absent only if the caller decided so;
    /// msprobe itself requires all three.
    pub fn parse(
        names: FileNames,
        dump: &[u8],
        construct: &[u8],
        stack: &[u8],
    ) -> Result<RankDump> {
        let mut rd = RankDump {
            names,
            store: Store::default(),
            task: None,
            level: None,
            framework_key: None,
            framework: None,
            dump_data_dir: None,
            has_data_key: false,
            data_is_object: false,
            entries: Vec::new(),
            entry_index: HashMap::new(),
            construct: Vec::new(),
            construct_index: HashMap::new(),
            micro_step_number: None,
            micro: HashMap::new(),
            stack_by_name: HashMap::new(),
            stack_raw: HashMap::new(),
            stack_raw_empty: true,
            has_md5: false,
        };
        crate::items::intern_known_keys(&mut rd.store);
        rd.parse_dump(dump)?;
        rd.parse_construct(construct)?;
        rd.parse_stack(stack)?;
        Ok(rd)
    }

    fn parse_dump(&mut self, buf: &[u8]) -> Result<()> {
        let file = self.names.dump.clone();
        let f = file.as_str();
        let mut r = Reader::new(buf);
        let e = |r: &Reader, msg: &str| -> Error {
            syntax(
                f,
                buf,
                SyntaxError {
                    offset: r.pos,
                    msg: msg.into(),
                },
            )
        };
        match r.peek() {
            Some(b'{') => r.pos += 1,
            None => {
                return Err(Error::new(
                    ErrorKind::Syntax,
                    f,
                    Place::LineCol(1, 1),
                    "the file is empty, expected a JSON object",
                ))
            }
            Some(_) => {
                // Valid JSON of another type is a schema error; anything else a syntax error.
                let mut scratch = Store::default();
                let v = r.value(&mut scratch, 0).map_err(|se| syntax(f, buf, se))?;
                return Err(Error::schema(
                    f,
                    "$",
                    format!(
                        "expected a JSON object with \"task\" and \"data\", found {}",
                        type_name(v)
                    ),
                ));
            }
        }
        if r.peek() == Some(b'}') {
            r.pos += 1;
        } else {
            loop {
                if r.peek() != Some(b'"') {
                    return Err(e(&r, "expected a string key"));
                }
                let key = r.read_str().map_err(|se| syntax(f, buf, se))?.to_owned();
                r.expect(b':').map_err(|se| syntax(f, buf, se))?;
                if key == "data" {
                    self.has_data_key = true;
                    if r.peek() == Some(b'{') {
                        self.data_is_object = true;
                        self.entries.clear();
                        self.entry_index.clear();
                        self.parse_entries(&mut r, buf)?;
                    } else {
                        self.data_is_object = false;
                        let v = r
                            .value(&mut self.store, 1)
                            .map_err(|se| syntax(f, buf, se))?;
                        return Err(Error::schema(
                            f,
                            "data",
                            format!("expected an object of dump entries, found {}", type_name(v)),
                        ));
                    }
                } else {
                    let v = r
                        .value(&mut self.store, 1)
                        .map_err(|se| syntax(f, buf, se))?;
                    let as_s = |v: Val, store: &Store| match v {
                        Val::Null => None,
                        _ => Some(py_str(store, v)),
                    };
                    match key.as_str() {
                        "task" => self.task = as_s(v, &self.store),
                        "level" => self.level = as_s(v, &self.store),
                        "framework" => self.framework_key = as_s(v, &self.store),
                        "dump_data_dir" => self.dump_data_dir = as_s(v, &self.store),
                        _ => {}
                    }
                }
                if !r.comma_or_close(b'}').map_err(|se| syntax(f, buf, se))? {
                    break;
                }
            }
        }
        r.end().map_err(|se| syntax(f, buf, se))?;
        self.framework = match self.framework_key.as_deref() {
            Some("pytorch") => Some("pytorch"),
            Some("mindspore") => Some("mindspore"),
            _ => detect_framework_by_text(buf),
        };
        Ok(())
    }

    fn parse_entries(&mut self, r: &mut Reader, buf: &[u8]) -> Result<()> {
        let f = self.names.dump.clone();
        let f = f.as_str();
        r.pos += 1; // '{'
        if r.peek() == Some(b'}') {
            r.pos += 1;
            return Ok(());
        }
        loop {
            if r.peek() != Some(b'"') {
                return Err(syntax(
                    f,
                    buf,
                    SyntaxError {
                        offset: r.pos,
                        msg: "expected a string key (an entry name)".into(),
                    },
                ));
            }
            let name = r.read_str().map_err(|se| syntax(f, buf, se))?.to_owned();
            r.expect(b':').map_err(|se| syntax(f, buf, se))?;
            let value = r
                .value(&mut self.store, 2)
                .map_err(|se| syntax(f, buf, se))?;
            if !self.has_md5 && md5_find(&self.store, value) {
                self.has_md5 = true;
            }
            let overflow = crate::overflow::entry_scene(&self.store, &name, value);
            match self.entry_index.get(&name) {
                Some(&i) => {
                    if let Some(e) = self.entries.get_mut(i as usize) {
                        e.value = value;
                        e.overflow = overflow;
                    }
                }
                None => {
                    self.entry_index
                        .insert(name.clone(), self.entries.len() as u32);
                    self.entries.push(Entry {
                        name,
                        value,
                        overflow,
                    });
                }
            }
            if !r.comma_or_close(b'}').map_err(|se| syntax(f, buf, se))? {
                break;
            }
        }
        Ok(())
    }

    fn parse_construct(&mut self, buf: &[u8]) -> Result<()> {
        let f = self.names.construct.clone();
        let f = f.as_str();
        let mut store = Store::default();
        let (mut st, v) = match crate::json::parse(buf) {
            Ok(x) => x,
            Err(se) => return Err(syntax(f, buf, se)),
        };
        std::mem::swap(&mut store, &mut st);
        if !matches!(v, Val::Obj { .. }) {
            return Err(Error::schema(
                f,
                "$",
                format!(
                    "expected a JSON object mapping node names to parent names, found {}",
                    type_name(v)
                ),
            ));
        }
        let pairs: Vec<_> = store.obj(v).to_vec();
        let megatron = pairs
            .iter()
            .find(|(k, _)| store.key(*k) == "megatron_micro_step_number")
            .map(|(_, v)| *v);
        let name_of = |store: &Store, v: Val, key: &str| -> Result<Option<String>> {
            match v {
                Val::Null => Ok(None),
                Val::Str(r) => {
                    let s = store.str(r);
                    // msprobe treats an empty parent like null (falsy).
                    Ok(if s.is_empty() {
                        None
                    } else {
                        Some(s.to_string())
                    })
                }
                other => Err(Error::schema(
                    f,
                    {
                        let mut p = String::from("$[");
                        crate::pyfmt::json_str(key, &mut p);
                        p.push(']');
                        p
                    },
                    format!(
                        "expected a parent node name (string) or null, found {}",
                        type_name(other)
                    ),
                )),
            }
        };
        for (k, val) in pairs {
            let key = store.key(k).to_string();
            if megatron.is_some() && key == "megatron_micro_step_number" {
                continue;
            }
            let parent = if megatron.is_some() {
                match val {
                    Val::List { .. } => {
                        let l = store.list(val);
                        if l.len() != 2 {
                            return Err(Error::schema(
                                f,
                                format!("$[\"{key}\"]"),
                                "expected [parent, micro_step] (a list of two values)",
                            ));
                        }
                        let micro = match l[1] {
                            Val::Int(i) => i,
                            Val::Float(x) if x.fract() == 0.0 => x as i64,
                            _ => 0,
                        };
                        self.micro.insert(key.clone(), micro);
                        name_of(&store, l[0], &key)?
                    }
                    _ => {
                        self.micro.insert(key.clone(), 0);
                        name_of(&store, val, &key)?
                    }
                }
            } else {
                name_of(&store, val, &key)?
            };
            self.construct_index
                .insert(key.clone(), self.construct.len() as u32);
            self.construct.push((key, parent));
        }
        if let Some(m) = megatron {
            // Keep the value in our own store (it is echoed as micro_steps = m + 1).
            let mv = match m {
                Val::Int(i) => Val::Int(i),
                Val::Float(x) => Val::Float(x),
                _ => Val::Int(0),
            };
            self.micro_step_number = Some(mv);
        }
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
        for (k, val) in &pairs {
            self.stack_raw.insert(self.store.key(*k).to_string(), *val);
        }
        let new_format = self
            .stack_raw
            .get("0")
            .is_some_and(|v| crate::items::truthy(&self.store, *v));
        if !new_format {
            self.stack_by_name = self.stack_raw.clone();
            return Ok(());
        }
        for (_, val) in pairs {
            let l = self.store.list(val);
            if !matches!(val, Val::List { .. }) || l.len() != 2 {
                continue;
            }
            let (apis, stack) = (l[0], l[1]);
            if !matches!(apis, Val::List { .. }) {
                continue;
            }
            for api in self.store.list(apis).to_vec() {
                // Names are str in practice; others are keyed by their text.
                let name = py_str(&self.store, api);
                self.stack_by_name.insert(name, stack);
            }
        }
        Ok(())
    }

    pub fn entry(&self, name: &str) -> Option<&Entry> {
        self.entry_index
            .get(name)
            .and_then(|&i| self.entries.get(i as usize))
    }

    pub fn is_megatron(&self) -> bool {
        self.micro_step_number.is_some()
    }
}

/// msprobe's `md5_find` over one entry: a top-level list element with an `md5` key, or a
/// top-level dict value with one.
fn md5_find(store: &Store, entry: Val) -> bool {
    let has_md5 = |d: &Val| match d {
        Val::Obj { .. } => store.get(*d, "md5").is_some(),
        Val::List { .. } => store
            .list(*d)
            .iter()
            .any(|x| store.as_str(*x) == Some("md5")),
        Val::Str(r) => store.str(*r).contains("md5"),
        _ => false,
    };
    store.obj(entry).iter().any(|(_, v)| match v {
        Val::List { .. } => store.list(*v).iter().any(has_md5),
        other => has_md5(other) && !matches!(other, Val::List { .. }),
    })
}

/// `detect_framework_by_dump_json` for a file without a usable `framework` key: the first line
/// with `"type": "mindspore` or `"type": "torch`.
fn detect_framework_by_text(buf: &[u8]) -> Option<&'static str> {
    for line in buf.split(|&b| b == b'\n') {
        if let Some(p) = find_sub(line, b"\"type\":") {
            let rest = &line[p + 7..];
            let rest = {
                let mut i = 0;
                while rest.get(i).is_some_and(|b| b.is_ascii_whitespace()) {
                    i += 1;
                }
                &rest[i..]
            };
            if rest.starts_with(b"\"mindspore") {
                return Some("mindspore");
            }
            if rest.starts_with(b"\"torch") {
                return Some("pytorch");
            }
        }
    }
    None
}

fn find_sub(h: &[u8], n: &[u8]) -> Option<usize> {
    h.windows(n.len()).position(|w| w == n)
}
