//! Layer mapping (`-lm [yaml]`): msprobe's scope trie and `convert_scope`.
//!
//! Every dump.json key of each side becomes a data item with a dotted *scope* (module path, or
//! the parent module's path plus the API name). Scopes are inserted into a trie per side. An NPU
//! item's scope is rewritten level by level with the yaml rules, whose keys are the class name of
//! the NPU parent layer (or `TopLayer`), and the n-th item at the NPU scope maps to the n-th
//! item at the rewritten bench scope.
//!
//! Extension (opt-in, ignored by msprobe): a top-level key containing `.` or `*` is a *scoped* key,
//! a pattern over `<NPU instance path of the parent layer>.<its class name>`; see [`Pattern`].
//! The rules of every matching scoped key (in file order) are tried before the class-name rules.
//! A file without such keys keeps msprobe's exact meaning.
//!
//! The yaml is parsed in [`LayerMapping::parse`]; only this module touches `serde_yaml`.

pub mod export;

use crate::base::error::{Error, ErrorKind, Place, Result};
use crate::base::names::{NameId, Names};
use crate::base::HashMap;
use crate::formats::dump::RankDump;
use crate::formats::json::{Store, Val};

/// One rule: source path, destination path, number of source levels.
#[derive(Debug, Clone, PartialEq)]
struct Rule {
    src: String,
    dst: String,
    level: usize,
}

/// A parsed layer-mapping yaml (msprobe's `preprocess_layer_mapping` output).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LayerMapping {
    /// class name -> first source segment -> rules (longest first).
    rules: HashMap<String, HashMap<String, Vec<Rule>>>,
    /// Scoped keys (our extension), in file order.
    scoped: Vec<ScopedKey>,
    /// Problems msprobe would stop at ("mapping is not effective"): the mapping is then empty.
    pub invalid: Option<String>,
}

/// A scoped key and its rules.
#[derive(Debug, Clone, PartialEq)]
struct ScopedKey {
    pattern: Pattern,
    /// first source segment -> rules (longest first), as for class keys.
    rules: HashMap<String, Vec<Rule>>,
}

/// A scoped key's pattern: dot-separated segments matched against
/// `<instance path of the NPU parent layer>.<its class name>` (the NPU scope segments walked so far
/// in `convert_scope`, then the class name). A segment `**` matches any number (0 or more) of
/// segments; `*` inside a segment matches any characters within one segment (so `*` alone is one
/// whole segment); other characters match themselves. The pattern is implicitly preceded by `**.`,
/// so it may match anywhere from the start: `image_encoder.**.TransformerLayer` matches
/// `0.module.image_encoder.blocks.layers.3.TransformerLayer`.
#[derive(Debug, Clone, PartialEq)]
pub struct Pattern {
    /// The key as written.
    pub text: String,
    segs: Vec<String>,
}

impl Pattern {
    /// Parses a key; the leading `**` is implied.
    pub fn new(key: &str) -> Pattern {
        let mut segs = vec!["**".to_string()];
        segs.extend(key.split('.').map(str::to_string));
        Pattern {
            text: key.to_string(),
            segs,
        }
    }

    /// Whether `subject` (path segments then the class name) matches.
    pub fn matches<S: AsRef<str>>(&self, subject: &[S]) -> bool {
        // Classic wildcard matching over segments, `**` as the star; O(|p|·|s|).
        let p = &self.segs;
        let n = subject.len();
        // reach[j]: the first i pattern segments can match the first j subject segments.
        let mut reach = vec![false; n + 1];
        reach[0] = true;
        for seg in p {
            if seg == "**" {
                for j in 1..=n {
                    reach[j] = reach[j] || reach[j - 1];
                }
            } else {
                for j in (1..=n).rev() {
                    reach[j] = reach[j - 1] && glob_segment(seg, subject[j - 1].as_ref());
                }
                reach[0] = false;
            }
        }
        reach[n]
    }
}

/// Whether a key is a scoped key (contains `.` or `*`).
pub fn is_scoped_key(key: &str) -> bool {
    key.contains('.') || key.contains('*')
}

/// `*` matches any run of characters inside one segment.
fn glob_segment(pat: &str, s: &str) -> bool {
    if !pat.contains('*') {
        return pat == s;
    }
    let parts: Vec<&str> = pat.split('*').collect();
    let (first, last) = (parts[0], parts[parts.len() - 1]);
    if s.len() < first.len() + last.len() || !s.starts_with(first) || !s.ends_with(last) {
        return false;
    }
    let mut rest = &s[first.len()..s.len() - last.len()];
    for mid in &parts[1..parts.len() - 1] {
        match rest.find(mid) {
            Some(i) => rest = &rest[i + mid.len()..],
            None => return false,
        }
    }
    true
}

type RuleTable = HashMap<String, HashMap<String, Vec<Rule>>>;

impl LayerMapping {
    /// Bare `-lm`: the algorithm with no rules.
    pub fn empty() -> Self {
        Self::default()
    }

    /// Parses yaml text. Syntax errors are errors (with line and column); content msprobe cannot
    /// use makes an empty mapping with [`LayerMapping::invalid`] set, as msprobe does.
    pub fn parse(file: &str, text: &str) -> Result<LayerMapping> {
        let value: serde_yaml::Value = match serde_yaml::from_str(text) {
            Ok(v) => v,
            Err(e) => {
                let place = match e.location() {
                    Some(l) => Place::LineCol(l.line(), l.column()),
                    None => Place::None,
                };
                let msg = e.to_string();
                // serde_yaml appends " at line L column C"; the place already says it.
                let msg = match msg.find(" at line ") {
                    Some(p) => msg[..p].to_string(),
                    None => msg,
                };
                // serde_yaml bounds alias expansion and nesting; name what was refused.
                if msg.starts_with("repetition limit exceeded") {
                    return Err(Error::new(
                        ErrorKind::Limit,
                        file,
                        place,
                        "the YAML expands its aliases (*name) too many times, as a \"billion laughs\" document does; a layer mapping needs none",
                    ));
                }
                if msg.starts_with("recursion limit exceeded") {
                    return Err(Error::new(
                        ErrorKind::Limit,
                        file,
                        place,
                        "the YAML nests deeper than serde_yaml's recursion limit; a layer mapping is two levels deep",
                    ));
                }
                return Err(Error::new(
                    ErrorKind::Yaml,
                    file,
                    place,
                    format!("invalid YAML: {msg}"),
                ));
            }
        };
        Ok(match Self::from_value(&value) {
            Ok((rules, scoped)) => LayerMapping {
                rules,
                scoped,
                invalid: None,
            },
            Err(why) => LayerMapping {
                rules: HashMap::default(),
                scoped: Vec::new(),
                invalid: Some(format!("{file}: {why}")),
            },
        })
    }

    /// How many keys (class and scoped) and rules the mapping holds.
    pub fn counts(&self) -> (usize, usize) {
        let class_rules: usize = self
            .rules
            .values()
            .flat_map(|m| m.values())
            .map(|v| v.len())
            .sum();
        let scoped_rules: usize = self
            .scoped
            .iter()
            .map(|k| k.rules.values().map(|v| v.len()).sum::<usize>())
            .sum();
        (
            self.rules.len() + self.scoped.len(),
            class_rules + scoped_rules,
        )
    }

    /// Whether the mapping uses scoped keys (our extension).
    pub fn has_scoped_keys(&self) -> bool {
        !self.scoped.is_empty()
    }

    /// The destination a class key's rule gives `src` (exact source match), if any.
    pub fn class_rule(&self, class: &str, src: &str) -> Option<&str> {
        let first = src.split('.').next().unwrap_or("");
        self.rules
            .get(class)?
            .get(first)?
            .iter()
            .find(|r| r.src == src)
            .map(|r| r.dst.as_str())
    }

    /// `convert_scope`'s rule at one step: the NPU walk is at trie node `cur` after `idx` segments
    /// of `scope` (`scope[0]` is the `Module`/`TopLayer` head); the first rule, of the matching
    /// scoped keys (file order) then of the class of `cur`, whose source equals the next segments.
    /// `scoped_at` caches the matching scoped keys per trie node.
    fn rule_at(
        &self,
        trie: &Trie,
        cur: usize,
        scope: &[&str],
        idx: usize,
        scoped_at: &mut HashMap<usize, Vec<usize>>,
    ) -> Option<&Rule> {
        let child = scope[idx + 1];
        let type_name = &trie.nodes[cur].type_name;
        // `".".join(scope[idx + 1..end]) == r.src`; the segments hold no '.' (they were split on
        // it), so the joined text equals `src` exactly when `src` splits into them.
        let applies = |r: &&Rule| {
            let end = (idx + 1 + r.level).min(scope.len());
            r.src.split('.').eq(scope[idx + 1..end].iter().copied())
        };
        if !self.scoped.is_empty() {
            let keys = scoped_at
                .entry(cur)
                .or_insert_with(|| self.matching_scoped(&scope[1..=idx], type_name));
            let hit = keys
                .iter()
                .filter_map(|&k| self.scoped[k].rules.get(child))
                .flatten()
                .find(applies);
            if hit.is_some() {
                return hit;
            }
        }
        self.rules
            .get(type_name)
            .and_then(|m| m.get(child))
            .into_iter()
            .flatten()
            .find(applies)
    }

    /// Adds one rule under `key` (a class name, `TopLayer`, or a scoped pattern), as if it were
    /// written at the end of that key's rules in the yaml.
    pub fn add_rule(&mut self, key: &str, src: &str, dst: &str) {
        let parts: Vec<&str> = src.split('.').collect();
        let rule = Rule {
            src: src.to_string(),
            dst: dst.split('(').next().unwrap_or("").to_string(),
            level: parts.len(),
        };
        let slot = if is_scoped_key(key) {
            let at = match self.scoped.iter().position(|k| k.pattern.text == key) {
                Some(i) => i,
                None => {
                    self.scoped.push(ScopedKey {
                        pattern: Pattern::new(key),
                        rules: HashMap::default(),
                    });
                    self.scoped.len() - 1
                }
            };
            &mut self.scoped[at].rules
        } else {
            self.rules.entry(key.to_string()).or_default()
        };
        let list = slot.entry(parts[0].to_string()).or_default();
        list.push(rule);
        list.sort_by_key(|r| std::cmp::Reverse(r.level));
    }

    /// Indices of the scoped keys whose pattern matches `path` + `class`.
    fn matching_scoped(&self, path: &[&str], class: &str) -> Vec<usize> {
        let mut subject: Vec<&str> = path.to_vec();
        subject.push(class);
        (0..self.scoped.len())
            .filter(|&i| self.scoped[i].pattern.matches(&subject))
            .collect()
    }

    fn from_value(
        v: &serde_yaml::Value,
    ) -> std::result::Result<(RuleTable, Vec<ScopedKey>), String> {
        let serde_yaml::Value::Mapping(top) = v else {
            return Err(format!(
                "the layer mapping must be a mapping of class names to {{source: destination}} rules, found {}",
                yaml_kind(v)
            ));
        };
        // `Cell` is renamed `TopLayer` (moved to the end, replacing any TopLayer).
        let mut entries: Vec<(String, &serde_yaml::Value)> = Vec::new();
        let mut cell: Option<&serde_yaml::Value> = None;
        for (k, val) in top {
            let key = yaml_key_str(k)
                .ok_or_else(|| format!("class name {} is not a string", yaml_scalar(k)))?;
            if key == "Cell" {
                cell = Some(val);
            } else {
                entries.push((key, val));
            }
        }
        if let Some(c) = cell {
            if !c.is_null() {
                entries.retain(|(k, _)| k != "TopLayer");
                entries.push(("TopLayer".to_string(), c));
            }
        }
        let mut out: RuleTable = HashMap::default();
        let mut scoped: Vec<ScopedKey> = Vec::new();
        for (class, rules) in entries {
            let serde_yaml::Value::Mapping(m) = rules else {
                return Err(format!(
                    "the rules of '{class}' must be a mapping of source: destination, found {}",
                    yaml_kind(rules)
                ));
            };
            let slot = if is_scoped_key(&class) {
                scoped.push(ScopedKey {
                    pattern: Pattern::new(&class),
                    rules: HashMap::default(),
                });
                match scoped.last_mut() {
                    Some(sk) => &mut sk.rules,
                    None => continue,
                }
            } else {
                out.entry(class.clone()).or_default()
            };
            for (k, v) in m {
                let src = match k {
                    serde_yaml::Value::String(s) => s.clone(),
                    other => {
                        return Err(format!(
                            "in '{class}', the source {} is not a string",
                            yaml_scalar(other)
                        ))
                    }
                };
                let dst = match v {
                    serde_yaml::Value::String(s) => s.clone(),
                    other => {
                        return Err(format!(
                            "in '{class}', the destination of '{src}' ({}) is not a string",
                            yaml_scalar(other)
                        ))
                    }
                };
                let dst = dst.split('(').next().unwrap_or("").to_string();
                let parts: Vec<&str> = src.split('.').collect();
                let prefix = parts[0].to_string();
                slot.entry(prefix).or_default().push(Rule {
                    level: parts.len(),
                    src,
                    dst,
                });
            }
            for rules in slot.values_mut() {
                rules.sort_by_key(|r| std::cmp::Reverse(r.level));
            }
        }
        Ok((out, scoped))
    }
}

fn yaml_kind(v: &serde_yaml::Value) -> &'static str {
    match v {
        serde_yaml::Value::Null => "nothing (null)",
        serde_yaml::Value::Bool(_) => "a boolean",
        serde_yaml::Value::Number(_) => "a number",
        serde_yaml::Value::String(_) => "a string",
        serde_yaml::Value::Sequence(_) => "a list",
        serde_yaml::Value::Mapping(_) => "a mapping",
        serde_yaml::Value::Tagged(_) => "a tagged value",
    }
}

fn yaml_scalar(v: &serde_yaml::Value) -> String {
    match v {
        serde_yaml::Value::String(s) => format!("'{s}'"),
        serde_yaml::Value::Number(n) => n.to_string(),
        serde_yaml::Value::Bool(b) => b.to_string(),
        serde_yaml::Value::Null => "null".into(),
        other => yaml_kind(other).into(),
    }
}

fn yaml_key_str(k: &serde_yaml::Value) -> Option<String> {
    match k {
        serde_yaml::Value::String(s) => Some(s.clone()),
        _ => None,
    }
}

/// A data item's scope information (`DumpDataItem`).
#[derive(Debug, Clone)]
struct DataItem<'a> {
    /// The dump.json key's class and state: text of the dump (`RankDump::node_names`).
    type_name: &'a str,
    state: &'a str,
    /// The dump.json key: its id in `RankDump::node_names`.
    name: NameId,
    /// The item's scope in [`Items::scopes`] (items share scopes: every call of one API in a
    /// module, a backward call and its forward call).
    full_scope: NameId,
}

/// The data items of one dump and their distinct scopes.
#[derive(Debug, Default)]
struct Items<'a> {
    list: Vec<DataItem<'a>>,
    scopes: Names,
}

impl Items<'_> {
    fn scope(&self, it: &DataItem) -> &str {
        self.scopes.str(it.full_scope)
    }
}

fn intern_scope(scopes: &mut Names, s: &str) -> std::result::Result<NameId, Fail> {
    scopes
        .intern(s)
        .ok_or_else(|| "the layer-mapping scopes pass 4 GiB".to_string())
}

#[derive(Debug, Default)]
struct Trie<'a> {
    nodes: Vec<TrieNode<'a>>,
}

#[derive(Debug, Default)]
struct TrieNode<'a> {
    type_name: String,
    children: HashMap<String, usize>,
    /// The items at this scope by state, in insertion order.
    items: HashMap<&'a str, Vec<usize>>,
}

impl<'a> Trie<'a> {
    fn new() -> Trie<'a> {
        Trie {
            nodes: vec![TrieNode {
                type_name: "TopLayer".into(),
                ..Default::default()
            }],
        }
    }
    /// The node of a dotted scope (its first segment is the root's), created with its path.
    fn node_for(&mut self, full_scope: &str) -> usize {
        let mut cur = 0usize;
        for name in full_scope.split('.').skip(1) {
            cur = match self.nodes[cur].children.get(name) {
                Some(&c) => c,
                None => {
                    let c = self.nodes.len();
                    self.nodes.push(TrieNode {
                        type_name: name.to_string(),
                        ..Default::default()
                    });
                    self.nodes[cur].children.insert(name.to_string(), c);
                    c
                }
            };
        }
        cur
    }

    /// Inserts every item at its scope, in order; returns each item's trie node and its
    /// position among the node's items of its state. Items share scopes (every tensor of a
    /// call, every repeat of a call in one module): each distinct scope is walked once.
    fn insert_all(&mut self, items: &Items<'a>) -> Vec<(usize, usize)> {
        // Trie node per scope id (usize::MAX: not walked yet).
        let mut at: Vec<usize> = vec![usize::MAX; items.scopes.len()];
        let mut out = Vec::with_capacity(items.list.len());
        for it in &items.list {
            let slot = &mut at[it.full_scope.0 as usize];
            if *slot == usize::MAX {
                *slot = self.node_for(items.scope(it));
            }
            let cur = *slot;
            let node = &mut self.nodes[cur];
            let list = node.items.entry(it.state).or_default();
            list.push(out.len());
            let pos = list.len() - 1;
            if node.type_name != it.type_name {
                node.type_name.clear();
                node.type_name.push_str(it.type_name);
            }
            out.push((cur, pos));
        }
        out
    }
}

/// Layer-mapping failure inside the algorithm (msprobe: warning, mapping not effective).
type Fail = String;

fn split_stack_line(line: &str) -> Vec<&str> {
    line.split(',').collect()
}

const FRAME_FILES: [&str; 4] = [
    "site-packages/torch",
    "package/torch",
    "site-packages/mindspore",
    "package/mindspore",
];

fn stack_in_lines(lines: &[&str]) -> std::result::Result<Vec<String>, Fail> {
    let mut res = Vec::new();
    for line in lines {
        if line.is_empty() {
            continue;
        }
        let parts = split_stack_line(line);
        let file = parts[0];
        if file.contains("msprobe") || file.contains("MindSpeed") {
            continue;
        }
        let func = parts
            .get(2)
            .ok_or_else(|| format!("a stack line has no function part: {line}"))?;
        if func.contains("construct") || func.contains("__call__") {
            continue;
        }
        let name = func
            .split_whitespace()
            .nth(1)
            .ok_or_else(|| format!("a stack line has no function name: {line}"))?;
        res.push(name.to_string());
    }
    res.reverse();
    Ok(res)
}

/// The frame scope of an API's stack (`get_stack_construct_by_dump_json_path`'s frame part):
/// the functions of the framework frames before the first user frame, joined with dots.
fn frame_scope_of(
    store: &Store,
    sv: Val,
    name: &str,
    framework: &str,
) -> std::result::Result<String, Fail> {
    let Val::List { .. } = sv else {
        return Err(format!("the stack of '{name}' is not a list of strings"));
    };
    let mut lines: Vec<&str> = Vec::new();
    for l in store.list(sv) {
        match store.as_str(l) {
            Some(s) => lines.push(s),
            None => return Err(format!("the stack of '{name}' is not a list of strings")),
        }
    }
    let is_ms = framework == "mindspore";
    let mut start: isize = -1;
    let mut end = lines.len();
    for (i, l) in lines.iter().enumerate() {
        if l.contains("Template") {
            start = i as isize;
        } else if start >= 0
            && (if is_ms {
                l.contains("construct")
            } else {
                l.contains("in forward,") || l.contains("in backward,")
            })
        {
            end = i;
            break;
        }
    }
    let from = (start + 1) as usize;
    let regard: &[&str] = if from <= end { &lines[from..end] } else { &[] };
    let mut frame: Option<&str> = None;
    let mut user: Vec<&str> = Vec::new();
    let mut no_entrance = true;
    for l in regard {
        let file = l.split(',').next().unwrap_or("");
        if FRAME_FILES.iter().any(|f| file.contains(f)) && no_entrance {
            frame = Some(l);
        } else {
            user.push(l);
            no_entrance = false;
        }
    }
    let frame_func = match frame {
        Some(f) => stack_in_lines(&[f])?,
        None => Vec::new(),
    };
    stack_in_lines(&user)?;
    Ok(frame_func.join("."))
}

/// How many dot-separated segments `s` has (`len(s.split('.'))`).
fn segment_count(s: &str) -> usize {
    s.bytes().filter(|&b| b == b'.').count() + 1
}

/// The first `k` dot-separated segments of `s` (`s.split('.')[..k]` joined): "" for none, all of
/// `s` when it has no more.
fn first_segments(s: &str, k: usize) -> &str {
    if k == 0 {
        return "";
    }
    // Byte scans: `str`'s char searcher is set up per call, and these names are short.
    let mut seen = 0;
    for (i, b) in s.bytes().enumerate() {
        if b == b'.' {
            seen += 1;
            if seen == k {
                return &s[..i];
            }
        }
    }
    s
}

/// The last four dot-separated fields of `s`, last first (`s.rsplit('.', 4)[:4]` reversed); ""
/// for fields `s` does not have.
fn last_four(s: &str) -> [&str; 4] {
    let mut out = [""; 4];
    let mut end = s.len();
    let mut n = 0;
    for (i, b) in s.bytes().enumerate().rev() {
        if b == b'.' {
            out[n] = &s[i + 1..end];
            end = i;
            n += 1;
            if n == 4 {
                return out;
            }
        }
    }
    out[n] = &s[..end];
    out
}

fn make_items(d: &RankDump) -> std::result::Result<Items<'_>, Fail> {
    // `get_stack_construct_by_dump_json_path`: stack.json loaded raw (new format gives no
    // per-name stacks), construct.json with micro steps stripped.
    if d.stack_raw_empty || d.construct.is_empty() {
        return Ok(Items::default());
    }
    let framework = d.framework.unwrap_or("pytorch");
    let store = &d.store;
    let mut items = Vec::with_capacity(d.entries.len());
    let mut scopes = Names::default();
    let mut full_scope = String::new();
    // A failing stack ends the whole call, so only successes are cached.
    let mut frame_cache: HashMap<(u32, u32), String> = HashMap::default();
    for e in &d.entries {
        let name = d.entry_name(e);
        // The dotted fields: their number, the first and the last four.
        let n = segment_count(name);
        if n < 4 {
            return Err(format!(
                "the dump name '{name}' does not have the four dotted fields layer mapping needs"
            ));
        }
        let [s1, s2, s3, s4] = last_four(name);
        let seg0 = first_segments(name, 1);
        let construct_info: Option<&str> = d.entry_construct_parent(e).flatten();
        let (api_type, api_name, type_name, state);
        if s1 == "parameters_grad" {
            (api_type, api_name, type_name, state) = (s1, s3, s2, s1);
        } else if s2 == "parameters_grad"
            && !s1.is_empty()
            && s1.bytes().all(|c| c.is_ascii_digit())
        {
            (api_type, api_name, type_name, state) = (s2, s4, s3, s2);
        } else {
            api_type = seg0;
            type_name = s3;
            if api_type == "Cell" || api_type == "Module" {
                (api_name, state) = (s4, s2);
            } else {
                (api_name, state) = (type_name, s1);
            }
        }
        let is_layer = api_type == "Cell" || api_type == "Module";
        // msprobe's data_list (the name without its index for a layer, the name for a parameter
        // gradient, the construct parent for an API) minus its last three fields.
        let layer_scope = if is_layer {
            first_segments(name, n - 4)
        } else if api_type == "parameters_grad" {
            first_segments(name, n - 3)
        } else if let Some(c) = construct_info {
            first_segments(c, segment_count(c).saturating_sub(3))
        } else {
            "TopLayer"
        };
        if let Some(c) = construct_info {
            if c.as_bytes().contains(&b'.') && segment_count(c) < 4 {
                return Err(format!(
                    "the construct parent '{c}' of '{name}' has fewer than four fields"
                ));
            }
        }
        let mut frame_scope = "";
        let owned: String;
        if !is_layer && api_type != "Primitive" && api_type != "Jit" {
            let stack = d.stack_raw.get(name);
            if let Some(sv) = stack.filter(|v| crate::formats::keys::truthy(store, *v)) {
                // stack.json groups many entries under one stack value: scan each value once.
                if let Val::List { start, len } = sv {
                    use std::collections::hash_map::Entry;
                    frame_scope = match frame_cache.entry((start, len)) {
                        Entry::Occupied(o) => o.into_mut(),
                        Entry::Vacant(v) => v.insert(frame_scope_of(store, sv, name, framework)?),
                    };
                } else {
                    owned = frame_scope_of(store, sv, name, framework)?;
                    frame_scope = &owned;
                }
            }
        }
        full_scope.clear();
        full_scope.push_str(layer_scope);
        if !frame_scope.is_empty() {
            full_scope.push('.');
            full_scope.push_str(frame_scope);
        }
        full_scope.push('.');
        full_scope.push_str(api_name);
        items.push(DataItem {
            type_name,
            state,
            name: e.name,
            full_scope: intern_scope(&mut scopes, &full_scope)?,
        });
    }
    // backward_pass: backward items take the scope of their forward item.
    // Item by the id of its name (the last of a repeated name, as a dict built in order).
    let mut by_name: Vec<u32> = vec![u32::MAX; d.node_names.len()];
    for (i, it) in items.iter().enumerate() {
        if let Some(slot) = by_name.get_mut(it.name.0 as usize) {
            *slot = i as u32;
        }
    }
    let mut fwd = String::new();
    for i in 0..items.len() {
        let name = d.node_names.str(items[i].name);
        // The last two fields (every name has four or more).
        let cut = name.rmatch_indices('.').nth(1).map_or(0, |(p, _)| p + 1);
        let tail = &name[cut..];
        if !tail.split('.').any(|s| s == "backward") {
            continue;
        }
        fwd.clear();
        fwd.push_str(&name[..cut]);
        fwd.push_str(&tail.replace("backward", "forward"));
        let j = d
            .node_names
            .get(&fwd)
            .and_then(|id| by_name.get(id.0 as usize));
        if let Some(&j) = j.filter(|j| **j != u32::MAX) {
            items[i].full_scope = items[j as usize].full_scope;
        }
    }
    drop(by_name);
    let mut items = Items {
        list: items,
        scopes,
    };
    renumber_index_pass(&mut items, "ParallelTransformer", "layers")?;
    Ok(items)
}

/// `extract_next_item_last_number`: the last number in the segment after `prefix.`.
fn next_item_last_number(scope: &str, prefix: &str) -> Option<(String, i64)> {
    let rest = scope.strip_prefix(prefix)?.strip_prefix('.')?;
    let next: String = rest
        .chars()
        .take_while(|c| *c != '.' && !c.is_whitespace())
        .collect();
    if next.is_empty() {
        return None;
    }
    // `\S+?` then `(?:\.|$)`: a whitespace inside stops the match.
    let after = &rest[next.len()..];
    if !(after.is_empty() || after.starts_with('.')) {
        return None;
    }
    let mut last: Option<i64> = None;
    let mut cur = String::new();
    for c in next.chars().chain(std::iter::once(' ')) {
        if c.is_ascii_digit() {
            cur.push(c);
        } else if !cur.is_empty() {
            last = cur.parse().ok();
            cur.clear();
        }
    }
    last.map(|n| (next, n))
}

/// msprobe's renumbering of the `suffix` index after each `type_name` layer's scope (so that
/// e.g. the layers of a pipeline stage count from 0). It is a function of the scope text, so it
/// is done once per distinct scope of the items.
fn renumber_index_pass(
    items: &mut Items<'_>,
    type_name: &str,
    suffix: &str,
) -> std::result::Result<(), Fail> {
    let mut prefixes: Vec<String> = Vec::new();
    for it in &items.list {
        if it.type_name == type_name {
            let p = format!("{}.{suffix}", items.scope(it));
            if !prefixes.contains(&p) {
                prefixes.push(p);
            }
        }
    }
    if prefixes.is_empty() {
        return Ok(());
    }
    // The scopes in use (renumbered ones are added to the table, and must not be renumbered
    // again by this prefix).
    let mut inuse: Vec<NameId> = items.list.iter().map(|it| it.full_scope).collect();
    inuse.sort_unstable();
    inuse.dedup();
    for prefix in prefixes {
        let min = inuse
            .iter()
            .filter_map(|id| next_item_last_number(items.scopes.str(*id), &prefix).map(|(_, n)| n))
            .min();
        let Some(min) = min else { continue };
        // Old scope id -> new scope id.
        let mut remap: HashMap<NameId, NameId> = HashMap::default();
        for id in &mut inuse {
            let scope = items.scopes.str(*id);
            if let Some((next, n)) = next_item_last_number(scope, &prefix) {
                let old = format!("{prefix}.{next}");
                let new = format!("{prefix}.{}", n - min);
                if let Some(p) = scope.find(&old) {
                    let mut renamed = scope.to_string();
                    renamed.replace_range(p..p + old.len(), &new);
                    let to = intern_scope(&mut items.scopes, &renamed)?;
                    remap.insert(*id, to);
                    *id = to;
                }
            }
        }
        if remap.is_empty() {
            continue;
        }
        for it in &mut items.list {
            if let Some(to) = remap.get(&it.full_scope) {
                it.full_scope = *to;
            }
        }
        inuse.sort_unstable();
        inuse.dedup();
    }
    Ok(())
}

/// The scopes of one side as layer mapping sees them: every dump key's `full_scope` and the trie
/// of scopes with the class name of each layer. Used to explain and export mappings.
#[derive(Debug)]
pub struct ScopeTree<'a> {
    items: Items<'a>,
    by_name: HashMap<&'a str, usize>,
    trie: Trie<'a>,
}

/// One step of `convert_scope`: after it, `npu` NPU segments (of the scope without its head) are
/// consumed and the bench scope (without its head) is `bench`.
#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    pub npu: usize,
    pub bench: Vec<String>,
}

impl<'a> ScopeTree<'a> {
    /// The data items and trie of one dump, as `generate_api_mapping_by_layer_mapping` builds them.
    pub fn build(d: &'a RankDump) -> std::result::Result<ScopeTree<'a>, String> {
        let items = make_items(d)?;
        let mut trie = Trie::new();
        trie.insert_all(&items);
        let by_name = items
            .list
            .iter()
            .enumerate()
            .map(|(i, it)| (d.node_names.str(it.name), i))
            .collect();
        Ok(ScopeTree {
            items,
            by_name,
            trie,
        })
    }

    /// The `full_scope` of a dump key (e.g. `Module.model.layers.0` for a module).
    pub fn full_scope(&self, data_name: &str) -> Option<&str> {
        self.by_name
            .get(data_name)
            .map(|&i| self.items.scope(&self.items.list[i]))
    }

    /// The state of a dump key (`forward`, `backward`, `parameters_grad`, ...): calls are matched
    /// by position among the items of one state at a scope.
    pub fn state(&self, data_name: &str) -> Option<&str> {
        self.by_name
            .get(data_name)
            .map(|&i| self.items.list[i].state)
    }

    /// The class name the trie holds for a layer path (segments after the head), if the path exists:
    /// the class of the layer module, or the segment itself for a path never dumped as a module.
    pub fn class_at(&self, path: &[&str]) -> Option<&str> {
        let mut cur = 0usize;
        for seg in path {
            cur = *self.trie.nodes[cur].children.get(*seg)?;
        }
        Some(self.trie.nodes[cur].type_name.as_str())
    }

    /// Whether a scope (segments after the head) exists in the trie.
    pub fn has_path<S: AsRef<str>>(&self, path: &[S]) -> bool {
        let mut cur = 0usize;
        for seg in path {
            match self.trie.nodes[cur].children.get(seg.as_ref()) {
                Some(&c) => cur = c,
                None => return false,
            }
        }
        true
    }

    /// Every layer path (segments after the head) whose class is `class` and that has the child
    /// path `src` (dotted) below it.
    pub fn paths_with(&self, class: &str, src: &str) -> Vec<Vec<String>> {
        let mut out = Vec::new();
        let mut stack: Vec<(usize, Vec<String>)> = vec![(0, Vec::new())];
        while let Some((cur, path)) = stack.pop() {
            let node = &self.trie.nodes[cur];
            if node.type_name == class {
                let mut c = Some(cur);
                for seg in src.split('.') {
                    c = c.and_then(|x| self.trie.nodes[x].children.get(seg).copied());
                }
                if c.is_some() {
                    out.push(path.clone());
                }
            }
            for (name, &c) in &node.children {
                let mut p = path.clone();
                p.push(name.clone());
                stack.push((c, p));
            }
        }
        out.sort();
        out
    }

    /// `convert_scope` of an NPU scope under `lm`, step by step (`scope` includes the head).
    pub fn convert_steps(&self, lm: &LayerMapping, scope: &str) -> Option<Vec<Step>> {
        let scope: Vec<&str> = scope.split('.').collect();
        let mut cache = HashMap::default();
        let mut steps = Vec::new();
        let mut bench: Vec<String> = Vec::new();
        let mut cur = 0usize;
        let mut idx = 0usize;
        while idx + 1 < scope.len() {
            let mut step = 1usize;
            let mut target = scope[idx + 1];
            if let Some(r) = lm.rule_at(&self.trie, cur, &scope, idx, &mut cache) {
                target = &r.dst;
                step = r.level;
            }
            bench.extend(target.split('.').map(str::to_string));
            for _ in 0..step {
                cur = *self.trie.nodes[cur].children.get(*scope.get(idx + 1)?)?;
                idx += 1;
            }
            steps.push(Step {
                npu: idx,
                bench: bench.clone(),
            });
        }
        Some(steps)
    }
}

/// Walks one NPU scope through the layer mapping (`new_scope`: "TopLayer" plus each segment or
/// the rule's target for it) and looks the result up in the Bench trie (msprobe's query_data).
/// Returns the NPU trie node the scope ends at and the Bench trie node, if any.
fn map_scope<'s>(
    lm: &LayerMapping,
    n_trie: &Trie,
    b_trie: &Trie,
    full_scope: &'s str,
    scope: &mut Vec<&'s str>,
    new_scope: &mut String,
    scoped_at: &mut HashMap<usize, Vec<usize>>,
) -> std::result::Result<(usize, Option<usize>), Fail> {
    scope.clear();
    scope.extend(full_scope.split('.'));
    new_scope.clear();
    new_scope.push_str("TopLayer");
    let mut cur = 0usize;
    let mut idx = 0usize;
    while idx + 1 < scope.len() {
        let mut step = 1usize;
        let mut target = scope[idx + 1];
        if let Some(r) = lm.rule_at(n_trie, cur, scope, idx, scoped_at) {
            target = &r.dst;
            step = r.level;
        }
        new_scope.push('.');
        new_scope.push_str(target);
        for _ in 0..step {
            let name = scope[idx + 1];
            cur = match n_trie.nodes[cur].children.get(name) {
                Some(&c) => c,
                None => {
                    return Err(format!(
                        "internal: scope '{full_scope}' is not in the NPU tree"
                    ))
                }
            };
            idx += 1;
        }
    }
    let mut node = Some(0usize);
    for name in new_scope.split('.').skip(1) {
        node = node.and_then(|c| b_trie.nodes[c].children.get(name).copied());
    }
    Ok((cur, node))
}

/// What layer mapping gives each NPU dump key (msprobe's dict from NPU data key to Bench data
/// key or "N/A"), held by the keys' name ids: 4 bytes per name instead of a hash map of
/// string pairs. Empty ([`Default`]): no key is mapped.
#[derive(Debug, Default)]
pub struct ApiMapping<'a> {
    names: Option<(&'a Names, &'a Names)>,
    /// NPU name id -> Bench name id, [`MAPPED_NA`] or [`UNMAPPED`].
    to: Vec<u32>,
}

const UNMAPPED: u32 = u32::MAX;
const MAPPED_NA: u32 = u32::MAX - 1;

impl<'a> ApiMapping<'a> {
    /// The Bench key (or "N/A") the NPU key `name` maps to; None if it is not a mapped key.
    pub fn get(&self, name: &str) -> Option<&'a str> {
        self.get_id(self.names?.0.get(name)?)
    }

    /// [`ApiMapping::get`] of the NPU dump's name `id` (no hashing of the name).
    pub fn get_id(&self, id: NameId) -> Option<&'a str> {
        let (_, b) = self.names?;
        match *self.to.get(id.0 as usize)? {
            UNMAPPED => None,
            MAPPED_NA => Some("N/A"),
            id => Some(b.str(NameId(id))),
        }
    }
}

/// One dump's part of [`api_mapping`]: its data items and their trie. It depends on that dump
/// alone, so a host may make each side's as soon as its dump is parsed
/// ([`api_mapping_of_sides`]).
#[derive(Debug)]
pub struct MappingSide<'a> {
    /// The dump the side was made of (a side is only used with the dump it came from).
    dump: &'a RankDump,
    made: std::result::Result<SideItems<'a>, Fail>,
}

#[derive(Debug)]
struct SideItems<'a> {
    items: Items<'a>,
    trie: Trie<'a>,
    /// Each item's trie node and position there.
    pos: Vec<(usize, usize)>,
}

impl<'a> MappingSide<'a> {
    /// The items and trie of `d` (a failure is kept: it is reported as [`api_mapping`] would).
    pub fn new(d: &'a RankDump) -> MappingSide<'a> {
        let made = make_items(d).map(|items| {
            let mut trie = Trie::new();
            let pos = trie.insert_all(&items);
            SideItems { items, trie, pos }
        });
        MappingSide { dump: d, made }
    }

    /// The side without its items' positions: what the walk does not read of a Bench side (a
    /// host holding a Bench side while the NPU side is parsed drops them early).
    pub fn without_pos(mut self) -> MappingSide<'a> {
        if let Ok(m) = &mut self.made {
            m.pos = Vec::new();
        }
        self
    }

    /// Whether this side was made of `d` (the same dump in memory).
    pub fn is_of(&self, d: &RankDump) -> bool {
        std::ptr::eq(self.dump, d)
    }
}

/// msprobe's `generate_api_mapping_by_layer_mapping`: NPU data key -> bench data key or "N/A".
/// Errors are the messages msprobe would log before making the mapping ineffective.
pub fn api_mapping<'a>(
    npu: &'a RankDump,
    bench: &'a RankDump,
    lm: &LayerMapping,
    join: Option<crate::base::Join>,
) -> std::result::Result<ApiMapping<'a>, Fail> {
    api_mapping_of_sides(npu, bench, lm, join, None, None)
}

/// [`api_mapping`] with either side's [`MappingSide`] made already (one made of another dump
/// is made again); the missing ones are made here, side by side through `join`.
pub fn api_mapping_of_sides<'a>(
    npu: &'a RankDump,
    bench: &'a RankDump,
    lm: &LayerMapping,
    join: Option<crate::base::Join>,
    npu_side: Option<MappingSide<'a>>,
    bench_side: Option<MappingSide<'a>>,
) -> std::result::Result<ApiMapping<'a>, Fail> {
    if let Some(why) = &lm.invalid {
        return Err(why.clone());
    }
    let npu_side = npu_side.filter(|s| s.is_of(npu));
    let bench_side = bench_side.filter(|s| s.is_of(bench));
    // The two sides' items and tries are independent (nothing to run side by side when both
    // are made).
    let join = join.filter(|_| npu_side.is_none() || bench_side.is_none());
    let (n_side, b_side) = crate::base::join2(
        join,
        || npu_side.unwrap_or_else(|| MappingSide::new(npu)),
        // The walk reads the Bench items by trie node, not by position: their positions go
        // before it allocates (the page's memory is its high-water mark).
        || {
            bench_side
                .unwrap_or_else(|| MappingSide::new(bench))
                .without_pos()
        },
    );
    // NPU's failure first, as when the sides ran one after the other.
    let SideItems {
        items: n_items,
        trie: n_trie,
        pos: n_pos,
    } = n_side.made?;
    let SideItems {
        items: b_items,
        trie: b_trie,
        ..
    } = b_side.made?;
    let mut to = vec![UNMAPPED; npu.node_names.len()];
    // Scoped keys matching at each NPU trie node (the node determines the path and class).
    let mut scoped_at: HashMap<usize, Vec<usize>> = HashMap::default();
    // The walk below depends only on the item's NPU trie node (its path fixes every rule
    // lookup, the classes are final once all items are in): done once per node, not per item.
    // Per node: not walked yet, or the Bench trie node its mapped scope reaches (None: none).
    let mut bench_at: Vec<Option<Option<usize>>> = vec![None; n_trie.nodes.len()];
    // Buffers reused across items.
    let mut scope: Vec<&str> = Vec::new();
    let mut new_scope = String::new();
    for (i, it) in n_items.list.iter().enumerate() {
        let (leaf, ix) = n_pos[i];
        let node = match bench_at[leaf] {
            Some(known) => known,
            None => {
                let found = map_scope(
                    lm,
                    &n_trie,
                    &b_trie,
                    n_items.scope(it),
                    &mut scope,
                    &mut new_scope,
                    &mut scoped_at,
                )?;
                debug_assert_eq!(found.0, leaf);
                bench_at[leaf] = Some(found.1);
                found.1
            }
        };
        // The item's position among the items of its state at this scope; query_data on the
        // bench trie.
        let bench_name = node.and_then(|c| {
            b_trie.nodes[c]
                .items
                .get(it.state)
                .and_then(|list| list.get(ix))
                .copied()
        });
        if let Some(slot) = to.get_mut(it.name.0 as usize) {
            *slot = match bench_name {
                Some(b) => b_items.list[b].name.0,
                None => MAPPED_NA,
            };
        }
    }
    Ok(ApiMapping {
        names: Some((&npu.node_names, &bench.node_names)),
        to,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn name_fields_like_split() {
        for name in [
            "",
            "a",
            "a.b",
            "a.b.c",
            "a.b.c.d",
            "a.b.c.d.e",
            "Module.x.y.forward.0",
            "..",
            "a..b.c.",
            "Tensor.add.0.forward.input.0",
        ] {
            let parts: Vec<&str> = name.split('.').collect();
            let mut want: Vec<&str> = name.rsplitn(5, '.').take(4).collect();
            want.resize(4, "");
            assert_eq!(last_four(name).to_vec(), want, "{name}");
            for k in 0..=parts.len() + 1 {
                let want = parts[..k.min(parts.len())].join(".");
                assert_eq!(first_segments(name, k), want, "{name} {k}");
            }
        }
    }

    #[test]
    fn yaml_errors_have_lines() {
        let e = LayerMapping::parse("m.yaml", "A:\n  b: c\n d: e\n").unwrap_err();
        assert!(matches!(e.place(), Place::LineCol(3, _)), "{e}");
        let m = LayerMapping::parse("m.yaml", "- a\n- b\n").unwrap();
        assert!(m
            .invalid
            .as_deref()
            .is_some_and(|w| w.starts_with("m.yaml: ")));
    }

    #[test]
    fn alias_bomb_fails_fast_naming_the_file() {
        let mut text = String::from(
            "a: &a [\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\"]\n",
        );
        let mut prev = 'a';
        for c in "bcdefghi".chars() {
            let refs = vec![format!("*{prev}"); 9].join(",");
            text.push_str(&format!("{c}: &{c} [{refs}]\n"));
            prev = c;
        }
        let t = std::time::Instant::now();
        let e = LayerMapping::parse("bomb.yaml", &text).unwrap_err();
        assert!(
            t.elapsed() < std::time::Duration::from_secs(2),
            "{:?}",
            t.elapsed()
        );
        assert_eq!(e.file(), "bomb.yaml");
        assert!(e.to_string().contains("billion laughs"), "{e}");
        let deep = format!("{}1{}", "[".repeat(10_000), "]".repeat(10_000));
        let e = LayerMapping::parse("deep.yaml", &deep).unwrap_err();
        assert_eq!(e.file(), "deep.yaml");
    }

    #[test]
    fn scoped_patterns() {
        let subj = |s: &str| s.split('.').map(str::to_string).collect::<Vec<_>>();
        let p = Pattern::new("image_encoder.**.TransformerLayer");
        assert!(p.matches(&subj(
            "0.module.image_encoder.blocks.layers.3.TransformerLayer"
        )));
        assert!(p.matches(&subj("image_encoder.TransformerLayer")));
        assert!(!p.matches(&subj("0.module.text_decoder.layers.3.TransformerLayer")));
        assert!(!p.matches(&subj("image_encoder.blocks.TransformerLayerX")));
        let p = Pattern::new("layers.*.TransformerLayer");
        assert!(p.matches(&subj("decoder.layers.0.TransformerLayer")));
        assert!(!p.matches(&subj("decoder.layers.TransformerLayer")));
        assert!(!p.matches(&subj("decoder.layers.0.1.TransformerLayer")));
        let p = Pattern::new("Transformer*");
        assert!(p.matches(&subj("a.b.TransformerLayer")));
        assert!(!p.matches(&subj("a.b.Layer")));
        let p = Pattern::new("*coder.*.*_x*z");
        assert!(p.matches(&subj("m.decoder.l.a_xyz")));
        assert!(!p.matches(&subj("m.decoder.l.a_xy")));
        assert!(is_scoped_key("a.B") && is_scoped_key("B*") && !is_scoped_key("GPTModel"));
    }

    #[test]
    fn scoped_keys_parse_apart_from_class_keys() {
        let m = LayerMapping::parse(
            "m.yaml",
            "TransformerLayer:\n  a: b\nvision.**.TransformerLayer:\n  a: c\n  a.x: d\n",
        )
        .unwrap();
        assert!(m.invalid.is_none());
        assert!(m.has_scoped_keys());
        assert_eq!(m.rules["TransformerLayer"]["a"][0].dst, "b");
        assert_eq!(m.scoped[0].pattern.text, "vision.**.TransformerLayer");
        assert_eq!(m.scoped[0].rules["a"][0].src, "a.x");
        let plain = LayerMapping::parse("m.yaml", "TransformerLayer:\n  a: b\n").unwrap();
        assert!(!plain.has_scoped_keys());
    }

    #[test]
    fn rules_sorted_longest_first() {
        let m = LayerMapping::parse("m.yaml", "Cell:\n  a: x\n  a.b.c: y(z)\n").unwrap();
        let r = &m.rules["TopLayer"]["a"];
        assert_eq!(r[0].src, "a.b.c");
        assert_eq!(r[0].dst, "y");
        assert_eq!(r[1].level, 1);
    }
}
