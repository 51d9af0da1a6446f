//! One rank folder of an msprobe dump: `dump.json`, `construct.json`, `stack.json`.
//!
//! [`RankDump::parse`] takes the three files' bytes and returns the typed, immutable model the
//! graph builder and the layer mapping read. `dump.json` is read entry by entry into a compact
//! [`Store`]; no `serde_json::Value` of a whole file is ever built. The overflow scene of every
//! entry (msprobe's `-oc`) is decided here, while the entry is at hand, so later stages need not
//! walk the raw data again.
//!
//! [`RankParser`] reads construct.json and dump.json in chunks of any size (stack.json whole):
//! dump.json entry by entry as its bytes arrive, the parsed bytes dropped (a step that runs out of
//! bytes is undone and waits for the next chunk; each entry is checked while its bytes are at hand,
//! so messages keep their line and column); construct.json's members as they complete. A
//! construct.json that is not a well-formed object stops the chunks and is parsed whole, whose
//! message names the place. `tests/it/streaming.rs` checks chunked = whole on every dump of the
//! fixtures and the bad-input corpus.
//!
//! This file holds the model; `stream.rs` the parser, `validate.rs` the checks of each entry.

use crate::base::error::{Diagnostic, Error, ErrorKind, Place, Result};
use crate::base::names::{NameId, NameMap, Names};
use crate::formats::json::{line_col, Store, SyntaxError, Val};
use std::sync::Arc;

mod stream;
mod validate;

pub use stream::RankParser;
use validate::ItemWarnings;

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
    /// The entry's name in [`RankDump::node_names`] (read it with [`RankDump::entry_name`]).
    pub name: NameId,
    /// The entry's value (normally an object) in [`RankDump::store`]: read it with
    /// `store.val(e.value)` (8 bytes instead of a 16-byte [`Val`]: an entry is 16 bytes).
    pub value: crate::formats::json::Word,
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

/// The three files of one rank, parsed. `Clone` for a parallel merge over dumps kept parsed
/// (the page): merging changes the main rank's store.
#[derive(Debug, Clone)]
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
    /// Position in `entries` of each name (by id), `u32::MAX` if it is not an entry.
    entry_pos: Vec<u32>,
    /// construct.json in file order: (child, parent), names in `node_names`. Read it
    /// through [`RankDump::construct_iter`], [`RankDump::construct_parent`].
    pub construct: Vec<(NameId, Option<NameId>)>,
    /// The names of construct.json (children and parents) and of dump.json's entries, each
    /// stored once. Shared with the graphs built from the dump (a node's name is its id here).
    pub node_names: Arc<Names>,
    /// Position in `construct` of each name that is a key (by id), `u32::MAX` otherwise.
    construct_pos: Vec<u32>,
    /// Megatron format: `megatron_micro_step_number` and the micro step of each `construct`
    /// entry (empty otherwise).
    pub micro_step_number: Option<Val>,
    construct_micro: Vec<i64>,
    /// stack.json converted to name -> stack (msprobe's `load_stack_json`).
    pub stack_by_name: NameMap<StackVal>,
    /// stack.json as loaded (top-level key -> value), used by the layer mapping.
    pub stack_raw: NameMap<StackVal>,
    pub stack_raw_empty: bool,
    /// Any top-level list element of an entry has an `md5` key (msprobe's `md5_find`).
    pub has_md5: bool,
    /// Anomalies msprobe reads through (an item whose `type` is not a string, a string `Max`...):
    /// at most one per file, naming the first place and counting the others.
    pub diagnostics: Vec<Diagnostic>,
    item_warnings: Option<ItemWarnings>,
}

/// Deepest item nesting msprobe's `op_item_parse` accepts (`Const.MAX_DEPTH`).
pub const MAX_ITEM_DEPTH: usize = 400;

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
    crate::formats::pyfmt::json_str(name, &mut s);
    s.push(']');
    s
}

impl RankDump {
    /// Parses one rank folder's files, each given whole. The same as feeding a
    /// [`RankParser`] (dump.json as one chunk, parsed in place).
    pub fn parse(
        names: FileNames,
        dump: &[u8],
        construct: &[u8],
        stack: &[u8],
    ) -> Result<RankDump> {
        let mut p = RankParser::new(names, dump.len() as u64, stack.len() as u64)?;
        p.construct(construct);
        p.dump_chunk(dump)?;
        p.dump_end()?;
        p.stack(stack)?;
        Ok(p.finish())
    }

    fn empty(names: FileNames) -> RankDump {
        RankDump {
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
            entry_pos: Vec::new(),
            construct: Vec::new(),
            node_names: Arc::default(),
            construct_pos: Vec::new(),
            micro_step_number: None,
            construct_micro: Vec::new(),
            stack_by_name: NameMap::default(),
            stack_raw: NameMap::default(),
            stack_raw_empty: true,
            has_md5: false,
            diagnostics: Vec::new(),
            item_warnings: None,
        }
    }
}

impl RankDump {
    fn clear_entries(&mut self) {
        self.entries.clear();
        self.entry_pos.clear();
    }

    /// The position in `entries` of the entry `name`.
    pub fn entry_id(&self, name: &str) -> Option<u32> {
        self.entry_of(self.node_names.get(name)?)
    }

    /// [`RankDump::entry_id`] of an interned name.
    pub fn entry_of(&self, id: NameId) -> Option<u32> {
        match self.entry_pos.get(id.0 as usize) {
            Some(&i) if i != u32::MAX => Some(i),
            _ => None,
        }
    }

    pub fn entry(&self, name: &str) -> Option<&Entry> {
        self.entries.get(self.entry_id(name)? as usize)
    }

    /// An entry's name.
    pub fn entry_name(&self, e: &Entry) -> &str {
        self.node_names.str(e.name)
    }

    /// construct.json's (child, parent) in file order.
    pub fn construct_iter(&self) -> impl Iterator<Item = (&str, Option<&str>)> + '_ {
        self.construct
            .iter()
            .map(|(c, p)| (self.node_names.str(*c), p.map(|p| self.node_names.str(p))))
    }

    fn construct_at(&self, name: &str) -> Option<usize> {
        self.construct_at_id(self.node_names.get(name)?)
    }

    fn construct_at_id(&self, id: NameId) -> Option<usize> {
        match self.construct_pos.get(id.0 as usize) {
            Some(&p) if p != u32::MAX => Some(p as usize),
            _ => None,
        }
    }

    /// [`RankDump::construct_parent`] of an entry (its name is interned: no lookup by text).
    pub fn entry_construct_parent(&self, e: &Entry) -> Option<Option<&str>> {
        let (_, p) = self.construct.get(self.construct_at_id(e.name)?)?;
        Some(p.map(|p| self.node_names.str(p)))
    }

    /// The parent construct.json gives `name`: None if `name` is not a key, Some(None) for a
    /// null (or empty) parent.
    pub fn construct_parent(&self, name: &str) -> Option<Option<&str>> {
        let (_, p) = self.construct.get(self.construct_at(name)?)?;
        Some(p.map(|p| self.node_names.str(p)))
    }

    /// `name` is a key of construct.json.
    pub fn in_construct(&self, name: &str) -> bool {
        self.construct_at(name).is_some()
    }

    /// Megatron format: the micro step construct.json gives `name` (0 if it is not a key).
    pub fn micro_of(&self, name: &str) -> i64 {
        self.node_names
            .get(name)
            .map_or(0, |id| self.micro_of_id(id))
    }

    /// [`RankDump::micro_of`] of an interned name.
    pub fn micro_of_id(&self, id: NameId) -> i64 {
        self.construct_at_id(id)
            .and_then(|p| self.construct_micro.get(p).copied())
            .unwrap_or(0)
    }

    pub fn is_megatron(&self) -> bool {
        self.micro_step_number.is_some()
    }
}
