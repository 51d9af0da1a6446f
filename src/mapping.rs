//! Layer mapping (`-lm [yaml]`): msprobe's scope trie and `convert_scope`.
//!
//! Every dump.json key of each side becomes a data item with a dotted *scope* (module path, or
//! the parent module's path plus the API name). Scopes are inserted into a trie per side. An NPU
//! item's scope is rewritten level by level with the yaml rules, whose keys are the class name of
//! the NPU parent layer (or `TopLayer`), and the n-th item at the NPU scope maps to the n-th
//! item at the rewritten bench scope.
//!
//! The yaml is parsed in [`LayerMapping::parse`]; only this module touches `serde_yaml`.

use crate::dump::RankDump;
use crate::error::{Error, ErrorKind, Place, Result};
use crate::json::Val;
use crate::HashMap;

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
    /// Problems msprobe would stop at ("mapping is not effective"): the mapping is then empty.
    pub invalid: Option<String>,
}

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
            Ok(rules) => LayerMapping {
                rules,
                invalid: None,
            },
            Err(why) => LayerMapping {
                rules: HashMap::default(),
                invalid: Some(format!("{file}: {why}")),
            },
        })
    }

    fn from_value(
        v: &serde_yaml::Value,
    ) -> std::result::Result<HashMap<String, HashMap<String, Vec<Rule>>>, String> {
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
        let mut out: HashMap<String, HashMap<String, Vec<Rule>>> = HashMap::default();
        for (class, rules) in entries {
            let serde_yaml::Value::Mapping(m) = rules else {
                return Err(format!(
                    "the rules of '{class}' must be a mapping of source: destination, found {}",
                    yaml_kind(rules)
                ));
            };
            let slot = out.entry(class.clone()).or_default();
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
        Ok(out)
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
struct DataItem {
    data_name: String,
    type_name: String,
    state: String,
    full_scope: String,
    layer_scope: String,
    stack_scope: String,
}

#[derive(Debug, Default)]
struct Trie {
    nodes: Vec<TrieNode>,
}

#[derive(Debug, Default)]
struct TrieNode {
    type_name: String,
    children: HashMap<String, usize>,
    items: HashMap<String, Vec<usize>>,
}

impl Trie {
    fn new() -> Trie {
        Trie {
            nodes: vec![TrieNode {
                type_name: "TopLayer".into(),
                ..Default::default()
            }],
        }
    }
    fn insert(&mut self, items: &[DataItem], idx: usize) -> usize {
        let it = &items[idx];
        let mut cur = 0usize;
        for name in it.full_scope.split('.').skip(1) {
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
        let list = self.nodes[cur].items.entry(it.state.clone()).or_default();
        list.push(idx);
        let pos = list.len() - 1;
        self.nodes[cur].type_name = it.type_name.clone();
        pos
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

fn make_items(d: &RankDump) -> std::result::Result<Vec<DataItem>, Fail> {
    // `get_stack_construct_by_dump_json_path`: stack.json loaded raw (new format gives no
    // per-name stacks), construct.json with micro steps stripped.
    if d.stack_raw_empty || d.construct.is_empty() {
        return Ok(Vec::new());
    }
    let framework = d.framework.unwrap_or("pytorch");
    let store = &d.store;
    let mut items = Vec::with_capacity(d.entries.len());
    for e in &d.entries {
        let name = &e.name;
        let seg: Vec<&str> = name.split('.').collect();
        let n = seg.len();
        if n < 4 {
            return Err(format!(
                "the dump name '{name}' does not have the four dotted fields layer mapping needs"
            ));
        }
        let construct_info: Option<&str> = d
            .construct_index
            .get(name)
            .and_then(|&i| d.construct.get(i as usize))
            .and_then(|(_, p)| p.as_deref());
        let (api_type, api_name, type_name, state);
        if seg[n - 1] == "parameters_grad" {
            api_type = "parameters_grad".to_string();
            api_name = seg[n - 3].to_string();
            type_name = seg[n - 2].to_string();
            state = "parameters_grad".to_string();
        } else if seg[n - 2] == "parameters_grad"
            && !seg[n - 1].is_empty()
            && seg[n - 1].chars().all(|c| c.is_ascii_digit())
        {
            api_type = "parameters_grad".to_string();
            api_name = seg[n - 4].to_string();
            type_name = seg[n - 3].to_string();
            state = "parameters_grad".to_string();
        } else {
            api_type = seg[0].to_string();
            type_name = seg[n - 3].to_string();
            if api_type == "Cell" || api_type == "Module" {
                api_name = seg[n - 4].to_string();
                state = seg[n - 2].to_string();
            } else {
                api_name = type_name.clone();
                state = seg[n - 1].to_string();
            }
        }
        let is_layer = api_type == "Cell" || api_type == "Module";
        let data_list: Vec<&str> = if is_layer {
            let mut v: Vec<&str> = seg[..n - 4].to_vec();
            v.extend_from_slice(&seg[n - 3..]);
            v
        } else if api_type == "parameters_grad" {
            seg.clone()
        } else if let Some(c) = construct_info {
            c.split('.').collect()
        } else {
            Vec::new()
        };
        let layer_scope = if data_list.is_empty() {
            "TopLayer".to_string()
        } else {
            data_list[..data_list.len().saturating_sub(3)].join(".")
        };
        if let Some(c) = construct_info {
            if c.contains('.') && c.split('.').count() < 4 {
                return Err(format!(
                    "the construct parent '{c}' of '{name}' has fewer than four fields"
                ));
            }
        }
        let mut frame_scope = String::new();
        if !is_layer && api_type != "Primitive" && api_type != "Jit" {
            let stack = d.stack_raw.get(name).copied();
            if let Some(sv) = stack.filter(|v| crate::items::truthy(store, *v)) {
                let Val::List { .. } = sv else {
                    return Err(format!("the stack of '{name}' is not a list of strings"));
                };
                let mut lines: Vec<&str> = Vec::new();
                for l in store.list(sv) {
                    match store.as_str(*l) {
                        Some(s) => lines.push(s),
                        None => {
                            return Err(format!("the stack of '{name}' is not a list of strings"))
                        }
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
                frame_scope = frame_func.join(".");
            }
        }
        let mut full = vec![layer_scope.clone()];
        if !frame_scope.is_empty() {
            full.push(frame_scope.clone());
        }
        full.push(api_name.clone());
        items.push(DataItem {
            data_name: name.clone(),
            type_name,
            state,
            full_scope: full.join("."),
            layer_scope,
            stack_scope: frame_scope,
        });
    }
    // backward_pass: backward items take the scopes of their forward item.
    let by_name: HashMap<String, usize> = items
        .iter()
        .enumerate()
        .map(|(i, it)| (it.data_name.clone(), i))
        .collect();
    for i in 0..items.len() {
        let mut seg: Vec<String> = items[i].data_name.split('.').map(str::to_string).collect();
        let n = seg.len();
        let tail_start = n.saturating_sub(2);
        if !seg[tail_start..].iter().any(|s| s == "backward") {
            continue;
        }
        for s in &mut seg[tail_start..] {
            *s = s.replace("backward", "forward");
        }
        let fwd = seg.join(".");
        if let Some(&j) = by_name.get(&fwd) {
            let (fs, ls, ss) = (
                items[j].full_scope.clone(),
                items[j].layer_scope.clone(),
                items[j].stack_scope.clone(),
            );
            items[i].full_scope = fs;
            items[i].layer_scope = ls;
            items[i].stack_scope = ss;
        }
    }
    renumber_index_pass(&mut items, "ParallelTransformer", "layers");
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

fn renumber_index_pass(items: &mut [DataItem], type_name: &str, suffix: &str) {
    let mut prefixes: Vec<String> = Vec::new();
    for it in items.iter() {
        if it.type_name == type_name {
            let p = format!("{}.{suffix}", it.full_scope);
            if !prefixes.contains(&p) {
                prefixes.push(p);
            }
        }
    }
    for prefix in prefixes {
        let min = items
            .iter()
            .filter_map(|it| next_item_last_number(&it.full_scope, &prefix).map(|(_, n)| n))
            .min();
        let Some(min) = min else { continue };
        for it in items.iter_mut() {
            if let Some((next, n)) = next_item_last_number(&it.full_scope, &prefix) {
                let old = format!("{prefix}.{next}");
                let new = format!("{prefix}.{}", n - min);
                if let Some(p) = it.full_scope.find(&old) {
                    it.full_scope.replace_range(p..p + old.len(), &new);
                }
            }
        }
    }
}

/// msprobe's `generate_api_mapping_by_layer_mapping`: NPU data key -> bench data key or "N/A".
/// Errors are the messages msprobe would log before making the mapping ineffective.
pub fn api_mapping(
    npu: &RankDump,
    bench: &RankDump,
    lm: &LayerMapping,
) -> std::result::Result<HashMap<String, String>, Fail> {
    if let Some(why) = &lm.invalid {
        return Err(why.clone());
    }
    let n_items = make_items(npu)?;
    let b_items = make_items(bench)?;
    let mut n_trie = Trie::new();
    let mut n_pos = Vec::with_capacity(n_items.len());
    for i in 0..n_items.len() {
        n_pos.push(n_trie.insert(&n_items, i));
    }
    let mut b_trie = Trie::new();
    for i in 0..b_items.len() {
        b_trie.insert(&b_items, i);
    }
    let mut out = HashMap::with_capacity_and_hasher(n_items.len(), Default::default());
    for (i, it) in n_items.iter().enumerate() {
        let scope: Vec<&str> = it.full_scope.split('.').collect();
        let mut new_scope = String::from("TopLayer");
        let mut cur = 0usize;
        let mut idx = 0usize;
        while idx + 1 < scope.len() {
            let child = scope[idx + 1];
            let type_name = &n_trie.nodes[cur].type_name;
            let rules = lm.rules.get(type_name).and_then(|m| m.get(child));
            let mut step = 1usize;
            let mut target = child.to_string();
            if let Some(rules) = rules {
                for r in rules {
                    let end = (idx + 1 + r.level).min(scope.len());
                    if scope[idx + 1..end].join(".") == r.src {
                        target = r.dst.clone();
                        step = r.level;
                        break;
                    }
                }
            }
            new_scope.push('.');
            new_scope.push_str(&target);
            for _ in 0..step {
                let name = scope[idx + 1];
                cur = match n_trie.nodes[cur].children.get(name) {
                    Some(&c) => c,
                    None => {
                        return Err(format!(
                            "internal: scope '{}' is not in the NPU tree",
                            it.full_scope
                        ))
                    }
                };
                idx += 1;
            }
        }
        // The item's position among the items of its state at this scope.
        // The walk followed the item's own scope, so `cur` is the node it was inserted at.
        debug_assert!(n_trie.nodes[cur]
            .items
            .get(&it.state)
            .is_some_and(|l| l.get(n_pos[i]) == Some(&i)));
        let index = Some(n_pos[i]);
        // query_data on the bench trie.
        let mut node = Some(0usize);
        for name in new_scope.split('.').skip(1) {
            node = node.and_then(|c| b_trie.nodes[c].children.get(name).copied());
        }
        let bench_name = match node {
            None => None,
            Some(c) => {
                let list = b_trie.nodes[c]
                    .items
                    .get(&it.state)
                    .map(Vec::as_slice)
                    .unwrap_or(&[]);
                match index {
                    Some(ix) if ix < list.len() => Some(list[ix]),
                    Some(_) => None,
                    // Python's index -1 picks the last item, or fails on an empty list.
                    None => match list.last() {
                        Some(l) => Some(*l),
                        None => {
                            return Err(format!(
                                "no bench data of state '{}' under '{new_scope}'",
                                it.state
                            ))
                        }
                    },
                }
            }
        };
        let v = match bench_name {
            Some(b) => b_items[b].data_name.clone(),
            None => "N/A".to_string(),
        };
        out.insert(it.data_name.clone(), v);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn rules_sorted_longest_first() {
        let m = LayerMapping::parse("m.yaml", "Cell:\n  a: x\n  a.b.c: y(z)\n").unwrap();
        let r = &m.rules["TopLayer"]["a"];
        assert_eq!(r[0].src, "a.b.c");
        assert_eq!(r[0].dst, "y");
        assert_eq!(r[1].level, 1);
    }
}
