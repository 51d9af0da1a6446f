//! Each dump.json entry checked the way msprobe will read it (`read_op`/`op_item_parse`), while
//! its bytes are at hand: errors where msprobe fails, one warning for what it reads through.

use super::stream::Src;
use super::{entry_path, type_name, RankDump, MAX_ITEM_DEPTH};
use crate::base::error::{Diagnostic, Error, ErrorKind, Place, Result};
use crate::formats::json::{KeyId, Reader, Store, Val};
use crate::formats::keys::k;

impl RankDump {
    /// Checks one `data` entry the way msprobe will read it (`read_op`/`op_item_parse`), so that
    /// nothing later meets an entry it cannot read: an entry is an object or null; the values
    /// read_op flattens are lists, objects or null; nesting stays within msprobe's 400 levels;
    /// integers stay within a float's range. Item anomalies msprobe reads through are counted
    /// into one warning.
    /// What checking one entry found: an error, or the first item warning (its message) and how
    /// many there were. `at` is where the entry's value starts in `src`.
    pub(super) fn validate_entry(
        &self,
        name: &str,
        value: Val,
        src: &Src,
        at: usize,
    ) -> Result<Option<(String, usize)>> {
        let buf = src.buf;
        let file = self.names.dump.as_str();
        let store = &self.store;
        if value == Val::Null {
            return Ok(None);
        }
        // (crumb parent, segment) for paths, built only along what is walked.
        let mut crumbs: Vec<(u32, Seg)> = Vec::new();
        // (value, op_item_parse depth, crumb, quiet: below an item whose type is not a string,
        // where msprobe's reading is already reported).
        let mut stack: Vec<(Val, usize, u32, bool)> = Vec::new();
        self.entry_roots(name, value, src, at, &mut crumbs, &mut stack)?;
        let mut warn: Option<(Vec<Seg>, String)> = None;
        let mut warn_count = 0usize;
        let mut note =
            |quiet: bool, crumbs: &[(u32, Seg)], at: u32, key: Option<KeyId>, msg: String| {
                if quiet {
                    return;
                }
                warn_count += 1;
                if warn.is_none() {
                    let mut p = trail(crumbs, at);
                    if let Some(k) = key {
                        p.push(Seg::Key(k));
                    }
                    warn = Some((p, msg));
                }
            };
        while let Some((v, depth, crumb, quiet)) = stack.pop() {
            let fail = |msg: String, kind: ErrorKind, key: Option<KeyId>| {
                let mut p = trail(&crumbs, crumb);
                if let Some(k) = key {
                    p.push(Seg::Key(k));
                }
                Error::new(
                    kind,
                    file,
                    {
                        let (l, c) = src.lc(locate(buf, at, store, &p));
                        Place::PathAt(seg_path(store, name, &p), l, c)
                    },
                    msg,
                )
            };
            if depth > MAX_ITEM_DEPTH {
                return Err(fail(
                    format!("items nest deeper than {MAX_ITEM_DEPTH} levels (msprobe's limit)"),
                    ErrorKind::Limit,
                    None,
                ));
            }
            if !crate::formats::keys::truthy(store, v) {
                continue;
            }
            match v {
                Val::List { .. } => {
                    for (i, x) in store.list(v).iter().enumerate().rev() {
                        crumbs.push((crumb, Seg::Index(i as u32)));
                        stack.push((x, depth + 1, crumbs.len() as u32 - 1, quiet));
                    }
                }
                Val::Obj { .. } => {
                    let pairs = store.obj(v);
                    let get = |k: KeyId| pairs.get(k);
                    if get(k::CLASS_TYPE).and_then(|c| store.as_str(c))
                        == Some("torch.distributed.P2POp")
                    {
                        continue;
                    }
                    match get(k::TYPE) {
                        Some(Val::Str(_)) => {
                            // A leaf item: the fields compare reads.
                            for (kk, x) in pairs {
                                match check_leaf_field(store, kk, x) {
                                    Err(msg) => return Err(fail(msg, ErrorKind::Schema, Some(kk))),
                                    Ok(Some(e)) => note(
                                        quiet,
                                        &crumbs,
                                        crumb,
                                        Some(kk),
                                        format!("expected {e}, found {}", type_name(x)),
                                    ),
                                    Ok(None) => {}
                                }
                            }
                            continue;
                        }
                        Some(t) => {
                            note(
                                quiet,
                                &crumbs,
                                crumb,
                                Some(k::TYPE),
                                format!(
                                    "expected a string (the item's type), found {}",
                                    type_name(t)
                                ),
                            );
                            // msprobe reads the fields as items; its scalars are ignored
                            // there, so they are not reported again.
                            for (kk, x) in pairs.iter().rev() {
                                if matches!(x, Val::List { .. } | Val::Obj { .. } | Val::Null) {
                                    crumbs.push((crumb, Seg::Key(kk)));
                                    stack.push((x, depth + 1, crumbs.len() as u32 - 1, true));
                                }
                            }
                            continue;
                        }
                        None => {}
                    }
                    for (kk, x) in pairs.iter().rev() {
                        crumbs.push((crumb, Seg::Key(kk)));
                        stack.push((x, depth + 1, crumbs.len() as u32 - 1, quiet));
                    }
                }
                other => note(
                    quiet,
                    &crumbs,
                    crumb,
                    None,
                    format!(
                        "expected an item (an object), a list or null, found {}",
                        type_name(other)
                    ),
                ),
            }
        }
        Ok(warn.map(|(p, msg)| {
            let (l, c) = src.lc(locate(buf, at, store, &p));
            (
                format!("line {l}, column {c}: {}: {msg}", seg_path(store, name, &p)),
                warn_count,
            )
        }))
    }

    /// The values of an entry that read_op flattens, pushed as the roots of
    /// [`RankParser::validate_entry`]'s walk: the whole entry for `debug` and `parameters_grad`
    /// entries, else its input/output keys. An entry that is not an object, or such a value that
    /// is not a list, an object or null, is an error.
    fn entry_roots(
        &self,
        name: &str,
        value: Val,
        src: &Src,
        at: usize,
        crumbs: &mut Vec<(u32, Seg)>,
        stack: &mut Vec<(Val, usize, u32, bool)>,
    ) -> Result<()> {
        let buf = src.buf;
        let file = self.names.dump.as_str();
        let store = &self.store;
        if !matches!(value, Val::Obj { .. }) {
            return Err(Error::schema_at(
                file,
                entry_path(name),
                src.lc(at),
                format!(
                    "expected an object with the entry's input_args, input_kwargs, output... (or null), found {}",
                    type_name(value)
                ),
            ));
        }
        let segs: Vec<&str> = name.split('.').collect();
        let last = segs.last().copied().unwrap_or("");
        let second_last = if segs.len() >= 2 {
            segs[segs.len() - 2]
        } else {
            ""
        };
        if last == "debug" || last == "parameters_grad" || second_last == "parameters_grad" {
            crumbs.push((u32::MAX, Seg::Root));
            stack.push((value, 0, 0, false));
            return Ok(());
        }
        for (key, v) in store.obj(value) {
            if !IO_KEYS.contains(&store.key(key)) {
                continue;
            }
            if !matches!(v, Val::Null | Val::List { .. } | Val::Obj { .. }) {
                let path = [Seg::Key(key)];
                return Err(Error::schema_at(
                    file,
                    seg_path(store, name, &path),
                    src.lc(locate(buf, at, store, &path)),
                    format!(
                        "expected a list or an object of items (or null), found {}",
                        type_name(v)
                    ),
                ));
            }
            crumbs.push((u32::MAX, Seg::Key(key)));
            stack.push((v, 0, crumbs.len() as u32 - 1, false));
        }
        Ok(())
    }
}

/// The entry fields `read_op` flattens (msprobe's `IO_NAME_MAPPING`).
const IO_KEYS: [&str; 5] = [
    "input_args",
    "input_kwargs",
    "input",
    "output",
    "parameters",
];

/// One step of a JSON path inside an entry.
#[derive(Debug, Clone, Copy)]
enum Seg {
    Root,
    Key(KeyId),
    Index(u32),
}

/// The path from the walk's crumbs, outermost first.
fn trail(crumbs: &[(u32, Seg)], mut at: u32) -> Vec<Seg> {
    let mut out = Vec::new();
    while let Some((parent, seg)) = crumbs.get(at as usize) {
        if !matches!(seg, Seg::Root) {
            out.push(*seg);
        }
        at = *parent;
    }
    out.reverse();
    out
}

/// `data["name"].input_args[0].Max` for messages.
fn seg_path(store: &Store, name: &str, segs: &[Seg]) -> String {
    let mut p = entry_path(name);
    // Very deep paths keep their ends.
    const KEEP: usize = 6;
    for (i, s) in segs.iter().enumerate() {
        if segs.len() > 3 * KEEP && i >= KEEP && i < segs.len() - KEEP {
            if i == KEEP {
                p.push_str(&format!("...({} levels)...", segs.len() - 2 * KEEP));
            }
            continue;
        }
        match s {
            Seg::Root => {}
            Seg::Index(i) => p.push_str(&format!("[{i}]")),
            Seg::Key(k) => {
                let key = store.key(*k);
                let plain = !key.is_empty()
                    && !key.starts_with(|c: char| c.is_ascii_digit())
                    && key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
                if plain {
                    p.push('.');
                    p.push_str(key);
                } else {
                    p.push('[');
                    crate::formats::pyfmt::json_str(key, &mut p);
                    p.push(']');
                }
            }
        }
    }
    p
}

/// Byte offset of the value at `segs` below the value that starts at `at` (best effort: the
/// deepest place reached). Only used for messages, so it re-reads the bytes.
fn locate(buf: &[u8], at: usize, store: &Store, segs: &[Seg]) -> usize {
    let mut r = Reader::new(buf);
    r.pos = at;
    for seg in segs {
        r.skip_ws();
        let here = r.pos;
        let found = match (seg, buf.get(r.pos)) {
            (Seg::Key(k), Some(b'{')) => {
                let want = store.key(*k);
                r.pos += 1;
                let mut found = None;
                if r.peek() != Some(b'}') {
                    while let Ok(key) = r.read_str() {
                        let hit = key == want;
                        if r.expect(b':').is_err() {
                            break;
                        }
                        r.skip_ws();
                        if hit {
                            // Duplicate keys: the last one is the value.
                            found = Some(r.pos);
                        }
                        if r.skip_value(0).is_err() || !matches!(r.comma_or_close(b'}'), Ok(true)) {
                            break;
                        }
                        r.skip_ws();
                    }
                }
                found
            }
            (Seg::Index(i), Some(b'[')) => {
                r.pos += 1;
                let mut ok = true;
                for _ in 0..*i {
                    if r.skip_value(0).is_err() || !matches!(r.comma_or_close(b']'), Ok(true)) {
                        ok = false;
                        break;
                    }
                }
                r.skip_ws();
                ok.then_some(r.pos)
            }
            _ => None,
        };
        match found {
            Some(p) => r.pos = p,
            None => return here,
        }
    }
    r.skip_ws();
    r.pos
}
/// One field of a leaf item as compare reads it: `Err` with the message where msprobe fails on
/// it, `Ok(Some(expected))` where msprobe reads through an unexpected type (a warning), else
/// `Ok(None)`.
fn check_leaf_field(
    store: &Store,
    key: KeyId,
    x: Val,
) -> std::result::Result<Option<&'static str>, String> {
    if [k::MAX, k::MIN, k::MEAN, k::NORM].contains(&key) {
        check_float_range(store, x)?;
        Ok((!matches!(
            x,
            Val::Null | Val::Bool(_) | Val::Int(_) | Val::BigInt(_) | Val::Float(_)
        ))
        .then_some("a number, a boolean or null"))
    } else if key == k::VALUE {
        check_float_range(store, x)?;
        Ok(None)
    } else if key == k::SHAPE {
        Ok((!matches!(x, Val::Null | Val::List { .. })).then_some("a list of dimensions or null"))
    } else if key == k::DTYPE {
        Ok((!matches!(x, Val::Null | Val::Str(_))).then_some("a string or null"))
    } else {
        Ok(None)
    }
}

/// An integer msprobe converts to a float: one beyond a float's range fails there.
fn check_float_range(store: &Store, x: Val) -> std::result::Result<(), String> {
    match x {
        Val::BigInt(r) if !big_fits_f64(store.str(r)) => Err(format!(
            "the integer {} is beyond the range of a float (msprobe fails converting it)",
            abbrev(store.str(r))
        )),
        _ => Ok(()),
    }
}

/// Python's `float(int)` succeeds (the value is within f64's range).
fn big_fits_f64(digits: &str) -> bool {
    digits.parse::<f64>().is_ok_and(f64::is_finite)
}

/// A long number shortened for a message.
fn abbrev(digits: &str) -> String {
    if digits.len() <= 24 {
        digits.to_string()
    } else {
        format!(
            "{}...({} digits)",
            &digits[..12],
            digits.trim_start_matches('-').len()
        )
    }
}

/// The first item anomaly of a file and how many there were.
#[derive(Debug, Default, Clone)]
pub(super) struct ItemWarnings {
    pub(super) first: Option<String>,
    pub(super) count: usize,
}

impl ItemWarnings {
    pub(super) fn into_diagnostic(self, file: &str) -> Diagnostic {
        let first = self.first.unwrap_or_default();
        let more = match self.count {
            0 | 1 => String::new(),
            2 => " (and 1 more like it)".to_string(),
            n => format!(" (and {} more like it)", n - 1),
        };
        Diagnostic::warning(file, format!("{first}{more}; read as msprobe reads it"))
    }
}

/// msprobe's `md5_find` over one entry: a top-level list element with an `md5` key, or a
/// top-level dict value with one.
pub(super) fn md5_find(store: &Store, entry: Val) -> bool {
    let has_md5 = |d: Val| match d {
        Val::Obj { .. } => store.get(d, "md5").is_some(),
        Val::List { .. } => store.list(d).iter().any(|x| store.as_str(x) == Some("md5")),
        Val::Str(r) => store.str(r).contains("md5"),
        _ => false,
    };
    store.obj(entry).iter().any(|(_, v)| match v {
        Val::List { .. } => store.list(v).iter().any(has_md5),
        other => has_md5(other) && !matches!(other, Val::List { .. }),
    })
}

pub(super) fn find_sub(h: &[u8], n: &[u8]) -> Option<usize> {
    h.windows(n.len()).position(|w| w == n)
}
