//! The files of one side as the page hands them over ([`MemFiles`]): copied in, or left in JS
//! and read through the session's reader callback; and what the core works on, for the message
//! when the browser's memory runs out.

use super::Session;
use crate::base::error::{Error, Result};
use crate::base::Files;
use crate::formats::dump::RankDump;
use crate::run;
use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use wasm_bindgen::prelude::*;

/// The message when the wasm memory cannot grow for `bytes` more (the worker says the same
/// when an allocation that cannot fail gracefully aborts the instance: www/worker.js).
pub(super) fn out_of_memory(bytes: usize, what: &str) -> String {
    format!(
        "the browser's memory limit was reached {what} ({:.1} MB more could not be allocated; \
         a page's WebAssembly memory is at most 4 GiB): use the CLI (probelens graph_visualize) \
         or a smaller dump",
        bytes as f64 / 1e6
    )
}

thread_local! {
    /// What the core is working on (a file being read or parsed, the pair being compared), for
    /// the message when the browser's memory runs out in the middle of it.
    pub(super) static WORK: std::cell::RefCell<String> = const { std::cell::RefCell::new(String::new()) };
}

/// Bytes per read of a lazy file's `read_chunks` (a dump.json): 4 MiB, or the test knob of
/// [`Session::set_slice_bytes`]. The parse holds a slice and, across a slice's end, a copy of it
/// with the unparsed rest of the previous one: 16 MiB slices made the parse's peak ~30 MB higher
/// on the 80-layer pair (bench/node.mjs), for no measurable speed.
pub(super) const SLICE_BYTES: usize = 4 << 20;

thread_local! {
    pub(super) static SLICE: std::cell::Cell<usize> = const { std::cell::Cell::new(SLICE_BYTES) };
}

/// Records what the core works on now (see [`Session::heap_work`]).
pub(super) fn working_on(what: String) {
    WORK.with(|w| *w.borrow_mut() = what);
}

/// Files dropped for one side, keyed by their path relative to the dropped root.
///
/// construct.json, stack.json and other JSON files are copied in (`addFile`/`beginFile`);
/// dump.json and tensor files (`dump_tensor_data/`) are only registered (`addLazyFile`) and read
/// through the session's reader callback: a dump.json in slices while it is parsed, a tensor
/// when a compare needs it (so a real-tensor compare reads just the tensors of the pairs it
/// compares).
///
/// A side can be copied into another session ([`Session::adopt_side`]): file bytes and parsed
/// folders are `Arc`s, so the copy shares them.
pub(super) struct MemFiles {
    /// "npu" or "bench": passed to the reader with the path.
    pub(super) side: &'static str,
    /// Whole files; shared with a session that adopted this side (a file still arriving in chunks
    /// is only ever in one session).
    pub(super) files: BTreeMap<String, Arc<Vec<u8>>>,
    pub(super) expected: BTreeMap<String, usize>,
    /// Paths whose bytes stay on the JS side, with their sizes.
    pub(super) lazy: BTreeMap<String, f64>,
    /// `(side, path) => Uint8Array`, synchronous (the worker uses `FileReaderSync`).
    pub(super) reader: Option<js_sys::Function>,
    pub(super) root_name: String,
    /// Rank folders parsed so far (by `check` or `run`), shared with results.
    pub(super) parsed: BTreeMap<String, Arc<RankDump>>,
    /// The three json files of a parsed rank folder: their bytes are freed after parsing (the
    /// parsed dump replaces them), their names stay for listing.
    pub(super) released: BTreeSet<String>,
    /// How many rank folders were parsed (for tests: a re-run must not parse again).
    pub(super) parse_count: u32,
    /// How many graphs `run` built (for tests).
    pub(super) build_count: u32,
}

impl MemFiles {
    /// The parsed rank folder `dir`: parsed once, then shared. Parsing frees the raw bytes of its
    /// dump.json, construct.json and stack.json, so a page holds each dump once, parsed.
    pub(super) fn rank(&mut self, dir: &str) -> Result<Arc<RankDump>> {
        if let Some(d) = self.parsed.get(dir) {
            return Ok(d.clone());
        }
        working_on(self.display(&crate::base::join_path(dir, "dump.json")));
        let d = Arc::new(run::load_rank(self, dir)?);
        self.parse_count += 1;
        for name in ["dump.json", "construct.json", "stack.json"] {
            let p = crate::base::join_path(dir, name);
            if let Some(b) = self.files.get_mut(&p) {
                *b = Arc::default();
                self.released.insert(p);
            }
        }
        self.parsed.insert(dir.to_string(), d.clone());
        Ok(d)
    }

    /// No dump files were given for this side (tensor files alone do not count).
    pub(super) fn is_empty(&self) -> bool {
        self.files.is_empty() && !self.lazy.keys().any(|p| p.ends_with(".json"))
    }

    /// A file of the side is (re)written: the parsed folder that holds it is stale.
    pub(super) fn changed(&mut self, path: &str) {
        let dir = path.rsplit_once('/').map_or("", |(d, _)| d);
        self.parsed.remove(dir);
        self.released.remove(path);
    }

    /// This side becomes a copy of `from`, the same side of another session: its files (shared
    /// bytes), lazy registrations, parsed rank folders (shared `Arc`s, not parsed again), freed
    /// names and root name. It keeps its own reader (the host gives it the handles of `from`'s lazy
    /// files) and its own parse count (adopted folders were not parsed by this session).
    pub(super) fn adopt(&mut self, from: &MemFiles) {
        self.files = from.files.clone();
        self.expected = from.expected.clone();
        self.lazy = from.lazy.clone();
        self.root_name = from.root_name.clone();
        self.parsed = from.parsed.clone();
        self.released = from.released.clone();
    }
}

impl MemFiles {
    pub(super) fn new(side: &'static str) -> MemFiles {
        MemFiles {
            side,
            files: BTreeMap::new(),
            expected: BTreeMap::new(),
            lazy: BTreeMap::new(),
            reader: None,
            root_name: String::new(),
            parsed: BTreeMap::new(),
            released: BTreeSet::new(),
            parse_count: 0,
            build_count: 0,
        }
    }

    /// Reads a registered lazy file through the reader callback: the whole file, or
    /// `length` bytes from `offset`.
    pub(super) fn read_lazy(&self, path: &str) -> Result<Vec<u8>> {
        self.read_lazy_at(path, None)
    }

    pub(super) fn read_lazy_at(&self, path: &str, slice: Option<(f64, f64)>) -> Result<Vec<u8>> {
        // Room for the bytes first, so a file the memory cannot hold is refused before it is
        // read (a whole construct.json or stack.json; a slice is at most `SLICE` bytes).
        let want = match slice {
            Some((_, length)) => length,
            None => self.lazy.get(path).copied().unwrap_or(0.0),
        }
        .max(0.0) as usize;
        let mut out = Vec::new();
        if out.try_reserve_exact(want).is_err() {
            Session::clear_heap_failure();
            return Err(Error::input(
                self.display(path),
                out_of_memory(want, "while reading it"),
            ));
        }
        let Some(reader) = &self.reader else {
            return Err(Error::input(
                self.display(path),
                "cannot read: no file reader was given to the session",
            ));
        };
        let side = JsValue::from_str(self.side);
        let p = JsValue::from_str(path);
        let v = match slice {
            None => reader.call2(&JsValue::NULL, &side, &p),
            Some((offset, length)) => reader.call4(
                &JsValue::NULL,
                &side,
                &p,
                &JsValue::from_f64(offset),
                &JsValue::from_f64(length),
            ),
        }
        .map_err(|e| {
            let why = e
                .dyn_ref::<js_sys::Error>()
                .map(|e| String::from(e.message()))
                .or_else(|| e.as_string())
                .unwrap_or_else(|| "the reader failed".to_string());
            Error::input(self.display(path), format!("cannot read: {why}"))
        })?;
        let Some(bytes) = v.dyn_ref::<js_sys::Uint8Array>() else {
            return Err(Error::input(
                self.display(path),
                "cannot read: the reader did not return a Uint8Array",
            ));
        };
        let n = bytes.length() as usize;
        if out.try_reserve_exact(n).is_err() {
            Session::clear_heap_failure();
            return Err(Error::input(
                self.display(path),
                out_of_memory(n, "while reading it"),
            ));
        }
        out.resize(n, 0);
        bytes.copy_to(&mut out);
        Ok(out)
    }
}

impl Files for MemFiles {
    fn list(&self, dir: &str) -> Result<Vec<(String, bool)>> {
        let prefix = if dir.is_empty() {
            String::new()
        } else {
            format!("{dir}/")
        };
        // Both maps in one sorted walk, so equal names stay adjacent.
        let (mut a, mut b) = (self.files.keys().peekable(), self.lazy.keys().peekable());
        let paths = std::iter::from_fn(|| match (a.peek(), b.peek()) {
            (Some(x), Some(y)) if y < x => b.next(),
            (Some(_), _) => a.next(),
            (None, _) => b.next(),
        });
        let mut out: Vec<(String, bool)> = Vec::new();
        for path in paths {
            let Some(rest) = path.strip_prefix(&prefix) else {
                continue;
            };
            let (name, is_dir) = match rest.split_once('/') {
                Some((d, _)) => (d, true),
                None => (rest, false),
            };
            if out.last().map(|(n, _)| n.as_str()) != Some(name) {
                out.push((name.to_string(), is_dir));
            }
        }
        Ok(out)
    }
    fn read(&self, path: &str) -> Result<Cow<'_, [u8]>> {
        if self.released.contains(path) {
            return Err(Error::input(
                self.display(path),
                "this file was parsed and its bytes freed, and another file of its folder changed since; load the folder again",
            ));
        }
        if let Some(total) = self.expected.get(path) {
            let got = self.files.get(path).map_or(0, |b| b.len());
            return Err(Error::input(
                self.display(path),
                format!("the file is still being read ({got} of {total} bytes)"),
            ));
        }
        if let Some(b) = self.files.get(path) {
            return Ok(Cow::Borrowed(b.as_slice()));
        }
        if let Some(&size) = self.lazy.get(path) {
            if size > crate::base::error::MAX_FILE_BYTES as f64 {
                return Err(Error::file_too_large(self.display(path), size as u64));
            }
            return self.read_lazy(path).map(Cow::Owned);
        }
        Err(Error::file_not_found(self.display(path)))
    }
    fn size(&self, path: &str) -> Result<u64> {
        match self.lazy.get(path) {
            Some(&size) if !self.files.contains_key(path) => {
                if size > crate::base::error::MAX_FILE_BYTES as f64 {
                    return Err(Error::file_too_large(self.display(path), size as u64));
                }
                Ok(size as u64)
            }
            _ => self.read(path).map(|b| b.len() as u64),
        }
    }
    /// A lazy file (a dump.json or construct.json the worker keeps as a `File`) is read in
    /// 4 MiB slices through the reader, so it never sits whole in the wasm memory.
    fn read_chunks(&self, path: &str, sink: &mut dyn FnMut(&[u8]) -> Result<()>) -> Result<()> {
        let slice = SLICE.with(|s| s.get()) as f64;
        let total = match self.lazy.get(path) {
            Some(&size) if !self.files.contains_key(path) => size,
            _ => return sink(&self.read(path)?),
        };
        let mut offset = 0.0;
        while offset < total {
            let length = slice.min(total - offset);
            let bytes = self.read_lazy_at(path, Some((offset, length)))?;
            if bytes.len() as f64 != length {
                return Err(Error::input(
                    self.display(path),
                    format!(
                        "cannot read: {} bytes at offset {offset} gave {} (did the file change?)",
                        length,
                        bytes.len()
                    ),
                ));
            }
            sink(&bytes)?;
            offset += length;
        }
        Ok(())
    }
    fn display(&self, path: &str) -> String {
        match (self.root_name.is_empty(), path.is_empty()) {
            (true, _) => path.to_string(),
            (false, true) => self.root_name.clone(),
            (false, false) => format!("{}/{}", self.root_name, path),
        }
    }
}
