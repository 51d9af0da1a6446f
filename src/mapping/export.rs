//! Exporting manual pairs as layer-mapping rules.
//!
//! Given the current layer-mapping yaml and (NPU name, Bench name) node pairs (matched by hand or
//! accepted from [`crate::compare::suggest`]), [`export_mapping`] finds a small set of rules that makes
//! msprobe's layer-mapping algorithm (`convert_scope`, [`crate::mapping`]) produce those pairs,
//! and appends them to the yaml text, keeping its comments and content.
//!
//! Rules rename scopes, and every dump.json entry has one: a module its path, an API call its
//! parent module's path plus the API name, a parameter gradient its module's path plus the
//! module's instance name (msprobe's `<path>.<name>`). So module, API and parameter-gradient
//! pairs all give rules (`MLP: {silu: act_fn.silu}` for an activation the Bench wraps in a
//! module, `RowParallelLinear: {linear_fc2: down_proj}` for a renamed layer's gradients).
//!
//! Pairs are taken shallow first (modules first at one depth), so that a parent's rule is in
//! place before its children are looked at. For each pair the NPU scope is converted step by step
//! with the rules so far; the rule goes to the last NPU layer whose converted scope is still a
//! proper prefix of the Bench scope. Its source is the rest of the NPU path and its destination
//! the rest of the Bench path, less the common tail (so `decoder.layers.0 -> layers.0` becomes
//! `decoder.layers: layers`, which serves every layer). The key is the parent's class name, as
//! msprobe reads it, unless that rule would contradict an existing rule, change where another
//! layer of that class maps today, or break a pair already handled; then the key is the parent's
//! exact path (a scoped key, see `mappings/README.md`).
//!
//! The rules found pair by pair are then made a set to keep ([`simplify`]): no rule twice, one
//! class rule (or one `*` pattern) instead of per-layer scoped rules that all say the same, and no
//! rule the pairs do not need. The merged text marks what was added: one comment over the keys
//! appended at the end, counting their rules, and a trailing comment on each rule put into a key the
//! yaml already had.
//!
//! The report checks every pair with the matching a run with the merged yaml does (msprobe's
//! `mapping_match`): the mapped Bench name for a dump.json entry, the node's own name for the
//! others (construct.json-only nodes, such as the APIs of a `mix` dump with no data). What the
//! format cannot express is reported with the reason: call positions that differ within a
//! scope (the n-th call is matched with the n-th), a construct.json-only node whose Bench
//! partner has another name, pairs of different kinds or directions.

use crate::base::error::{Error, Result};
use crate::formats::dump::RankDump;
use crate::graph::Graph;
use crate::mapping::{api_mapping, is_scoped_key, LayerMapping, ScopeTree};

/// One rule that the export added.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct AddedRule {
    /// The top-level key: a class name, `TopLayer`, or a scoped pattern (an exact parent path).
    pub key: String,
    pub src: String,
    pub dst: String,
}

/// The result of an export.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Exported {
    /// The merged yaml text.
    pub yaml: String,
    /// The rules added, in the order they were found.
    pub added: Vec<AddedRule>,
    /// Pairs a run with the merged mapping matches (checked with the run's matching).
    pub reproduced: Vec<(String, String)>,
    /// Pairs it does not reproduce, with the reason.
    pub missed: Vec<(String, String, String)>,
}

/// A pair as scopes.
struct Want {
    /// NPU scope segments without the head.
    n_path: Vec<String>,
    /// Bench scope segments without the head.
    b_path: Vec<String>,
    /// A module pair (taken before API and parameter-gradient pairs of the same depth).
    module: bool,
}

/// What a dump entry is, by its name: layer mapping scopes the three differently.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// `Module.<path>.<Class>.forward.N`: scope = its path.
    Module,
    /// `Module.<path>.<Class>.parameters_grad[.N]`: scope = its path plus its instance name.
    ParamGrad,
    /// Anything else (`Torch.cat.0.forward`): scope = its parent module's path plus its name.
    Api,
}

impl Kind {
    fn of(name: &str) -> Kind {
        let segs: Vec<&str> = name.split('.').collect();
        let n = segs.len();
        let grad = segs.last() == Some(&"parameters_grad")
            || (n >= 2
                && segs[n - 2] == "parameters_grad"
                && segs[n - 1].chars().all(|c| c.is_ascii_digit()));
        if grad {
            Kind::ParamGrad
        } else if is_module(name) {
            Kind::Module
        } else {
            Kind::Api
        }
    }

    fn text(self) -> &'static str {
        match self {
            Kind::Module => "a module",
            Kind::ParamGrad => "a parameter gradient",
            Kind::Api => "an API call",
        }
    }
}

fn is_module(name: &str) -> bool {
    name.starts_with("Module.") || name.starts_with("Cell.")
}

fn tail(scope: &str) -> Vec<String> {
    scope.split('.').skip(1).map(str::to_string).collect()
}

/// Where the NPU path of `w` converts to under `lm` (segments without the head).
fn converted(tree: &ScopeTree, lm: &LayerMapping, n_path: &[String]) -> Option<Vec<String>> {
    let scope = format!("Module.{}", n_path.join("."));
    let steps = tree.convert_steps(lm, &scope)?;
    Some(steps.last().map(|s| s.bench.clone()).unwrap_or_default())
}

fn reproduced(tree: &ScopeTree, lm: &LayerMapping, w: &Want) -> bool {
    converted(tree, lm, &w.n_path).as_deref() == Some(w.b_path.as_slice())
}

/// The rule a pair needs: (parent path, src segments, dst segments), or None if it is already
/// reproduced or cannot be expressed.
fn needed_rule(
    tree: &ScopeTree,
    lm: &LayerMapping,
    w: &Want,
    strip_tail: bool,
) -> Option<(Vec<String>, Vec<String>, Vec<String>)> {
    let scope = format!("Module.{}", w.n_path.join("."));
    let steps = tree.convert_steps(lm, &scope)?;
    // Prefixes after 0, 1, ... steps: (NPU segments consumed, bench scope).
    let mut best: Option<(usize, usize)> = None;
    let mut prefixes: Vec<(usize, &[String])> = vec![(0, &[])];
    prefixes.extend(steps.iter().map(|s| (s.npu, s.bench.as_slice())));
    for (npu, bench) in prefixes {
        if npu < w.n_path.len() && bench.len() < w.b_path.len() && w.b_path[..bench.len()] == *bench
        {
            best = Some((npu, bench.len()));
        }
    }
    let (npu, blen) = best?;
    let mut src: Vec<String> = w.n_path[npu..].to_vec();
    let mut dst: Vec<String> = w.b_path[blen..].to_vec();
    if strip_tail {
        while src.len() > 1 && dst.len() > 1 && src.last() == dst.last() {
            src.pop();
            dst.pop();
        }
    }
    Some((w.n_path[..npu].to_vec(), src, dst))
}

/// Whether adding the class rule changes where another layer of the class (not one of `parents`)
/// maps today (to a scope that exists on the Bench side).
fn changes_others(
    n_tree: &ScopeTree,
    b_tree: &ScopeTree,
    before: &LayerMapping,
    after: &LayerMapping,
    class: &str,
    src: &str,
    parents: &[Vec<String>],
) -> bool {
    for other in n_tree.paths_with(class, src) {
        if parents.contains(&other) {
            continue;
        }
        let mut path = other.clone();
        path.extend(src.split('.').map(str::to_string));
        let (Some(b0), Some(b1)) = (
            converted(n_tree, before, &path),
            converted(n_tree, after, &path),
        ) else {
            continue;
        };
        if b0 != b1 && b_tree.has_path(&b0) {
            return true;
        }
    }
    false
}

/// Finds the rules that reproduce `pairs` (node names, NPU then Bench) and merges them into
/// `current_yaml` (which may be empty). `npu`/`bench` are the two dumps of the pair the names come
/// from. `reproduced` are the pairs a run with the merged yaml matches, `missed` the others with
/// the reason.
pub fn export_mapping(
    current_yaml: &str,
    npu: &RankDump,
    bench: &RankDump,
    pairs: &[(String, String)],
) -> Result<Exported> {
    let mut lm = current_mapping(current_yaml)?;
    let base = lm.clone();
    let side_err = |d: &RankDump, why: String| {
        Error::input(
            &d.names.dump,
            format!("layer mapping cannot read this dump: {why}"),
        )
    };
    let n_tree = ScopeTree::build(npu).map_err(|w| side_err(npu, w))?;
    let b_tree = ScopeTree::build(bench).map_err(|w| side_err(bench, w))?;
    let (refused, wants) = wanted(pairs, &n_tree, &b_tree);
    let added = find_rules(&n_tree, &b_tree, &mut lm, &wants);
    let added = simplify(&n_tree, &b_tree, &base, &wants, added);
    let yaml = merge_yaml(current_yaml, &added)?;
    let check = LayerMapping::parse(MAPPING_FILE, &yaml)?;
    let (reproduced, missed) =
        check_pairs((npu, bench), (&n_tree, &b_tree), &check, pairs, refused)?;
    Ok(Exported {
        yaml,
        added,
        reproduced,
        missed,
    })
}

/// A pair of node names: NPU, Bench.
type Pair = (String, String);

/// A pair not reproduced: NPU name, Bench name, why.
type Missed = (String, String, String);

/// The name errors about the current mapping give.
const MAPPING_FILE: &str = "layer_mapping.yaml";

/// The mapping to extend: `current_yaml` parsed (blank or comments only: none), refused when it
/// is not valid.
fn current_mapping(current_yaml: &str) -> Result<LayerMapping> {
    let blank = current_yaml
        .lines()
        .all(|l| l.trim().is_empty() || l.trim_start().starts_with('#'));
    let lm = if blank {
        LayerMapping::empty()
    } else {
        LayerMapping::parse(MAPPING_FILE, current_yaml)?
    };
    if let Some(why) = &lm.invalid {
        return Err(Error::input(
            MAPPING_FILE,
            format!("the current mapping cannot be extended: {why}"),
        ));
    }
    Ok(lm)
}

/// The scope pairs rules are looked for (shallow first), and for each pair the reason none is
/// looked for, if so.
fn wanted(
    pairs: &[(String, String)],
    n_tree: &ScopeTree,
    b_tree: &ScopeTree,
) -> (Vec<Option<String>>, Vec<Want>) {
    // Pairs no rule is looked for, with the reason (the final check may still find them matched).
    let mut refused: Vec<Option<String>> = Vec::with_capacity(pairs.len());
    let mut wants: Vec<Want> = Vec::new();
    for (n, b) in pairs {
        let (kn, kb) = (Kind::of(n), Kind::of(b));
        if kn != kb {
            refused.push(Some(format!(
                "{} paired with {}: layer mapping scopes them differently, so no rule is written for it",
                kn.text(),
                kb.text()
            )));
            continue;
        }
        refused.push(None);
        // Entries that are not dump.json items on both sides have no scope; the final check
        // says why they are missed, if they are.
        let (Some(ns), Some(bs)) = (n_tree.full_scope(n), b_tree.full_scope(b)) else {
            continue;
        };
        let (sn, sb) = (n_tree.state(n), b_tree.state(b));
        if sn != sb {
            if let Some(r) = refused.last_mut() {
                *r = Some(format!(
                    "a {} call paired with a {} one: calls are matched within one state",
                    sn.unwrap_or("?"),
                    sb.unwrap_or("?")
                ));
            }
            continue;
        }
        let w = Want {
            n_path: tail(ns),
            b_path: tail(bs),
            module: kn == Kind::Module,
        };
        if !wants
            .iter()
            .any(|o| o.n_path == w.n_path && o.b_path == w.b_path)
        {
            wants.push(w);
        }
    }
    // Shallow first, so that a parent's rule is in place before its children are looked at;
    // modules before APIs and parameter gradients of the same depth (their rules serve more).
    wants.sort_by(|a, b| {
        (a.n_path.len(), !a.module, &a.n_path, &a.b_path).cmp(&(
            b.n_path.len(),
            !b.module,
            &b.n_path,
            &b.b_path,
        ))
    });
    (refused, wants)
}

/// Adds to `lm` a rule for each of `wants` that no rule reproduces yet, where one reproduces it
/// without changing another layer of its class or a pair done before; returns the rules added.
fn find_rules(
    n_tree: &ScopeTree,
    b_tree: &ScopeTree,
    lm: &mut LayerMapping,
    wants: &[Want],
) -> Vec<AddedRule> {
    let mut added: Vec<AddedRule> = Vec::new();
    let mut done: Vec<usize> = Vec::new();
    for (i, w) in wants.iter().enumerate() {
        if reproduced(n_tree, lm, w) {
            done.push(i);
            continue;
        }
        let done_wants: Vec<&Want> = done.iter().map(|&j| &wants[j]).collect();
        if let Some(rule) = rule_for(n_tree, b_tree, lm, w, &done_wants) {
            added.push(rule);
            done.push(i);
        }
    }
    added
}

/// The first rule (the stripped scopes first; the class key, then the exact parent path) that
/// reproduces `w` without changing what `lm` maps elsewhere or breaking `done`; added to `lm`.
fn rule_for(
    n_tree: &ScopeTree,
    b_tree: &ScopeTree,
    lm: &mut LayerMapping,
    w: &Want,
    done: &[&Want],
) -> Option<AddedRule> {
    for strip in [true, false] {
        let (parent, src, dst) = needed_rule(n_tree, lm, w, strip)?;
        let (src, dst) = (src.join("."), dst.join("."));
        let parent_refs: Vec<&str> = parent.iter().map(String::as_str).collect();
        let class = if parent.is_empty() {
            "TopLayer".to_string()
        } else {
            n_tree.class_at(&parent_refs)?.to_string()
        };
        // The class key first, then the exact parent path.
        let mut keys = Vec::new();
        if !is_scoped_key(&class) {
            keys.push(class.clone());
        }
        if !parent.is_empty() {
            keys.push(format!("{}.{class}", parent.join(".")));
        }
        for key in keys {
            let scoped = is_scoped_key(&key);
            let mut trial = lm.clone();
            trial.add_rule(&key, &src, &dst);
            if !reproduced(n_tree, &trial, w) {
                continue;
            }
            if !scoped
                && (lm.class_rule(&class, &src).is_some_and(|d| d != dst)
                    || changes_others(
                        n_tree,
                        b_tree,
                        lm,
                        &trial,
                        &class,
                        &src,
                        std::slice::from_ref(&parent),
                    ))
            {
                continue;
            }
            if done.iter().any(|o| !reproduced(n_tree, &trial, o)) {
                continue;
            }
            *lm = trial;
            return Some(AddedRule { key, src, dst });
        }
    }
    None
}

/// The pairs a run with the merged mapping `check` matches, and the others with the reason.
///
/// The check is what a run with the merged text matches (`compare`'s layer-mapping match, as
/// msprobe's `mapping_match`): an NPU node goes to the Bench node named by the mapping, or, if
/// it is not a dump.json entry the mapping covers, to the Bench node of its own name.
fn check_pairs(
    (npu, bench): (&RankDump, &RankDump),
    (n_tree, b_tree): (&ScopeTree, &ScopeTree),
    check: &LayerMapping,
    pairs: &[(String, String)],
    refused: Vec<Option<String>>,
) -> Result<(Vec<Pair>, Vec<Missed>)> {
    let (mapping, ineffective) = match api_mapping(npu, bench, check, None) {
        Ok(m) => (m, None),
        // A run makes the mapping empty (every node matched by its own name) and warns.
        Err(why) => (Default::default(), Some(why)),
    };
    let gn = Graph::build(npu)?;
    let gb = Graph::build(bench)?;
    let no_items = |d: &RankDump| d.stack_raw_empty || d.construct.is_empty();
    let mut reproduced_all = Vec::new();
    let mut missed: Vec<Missed> = Vec::new();
    for ((n, b), refused) in pairs.iter().zip(refused) {
        let got = mapping.get(n.as_str());
        let target = got.unwrap_or(n.as_str());
        if gn.get(n).is_some() && target == b && gb.get(b).is_some() {
            reproduced_all.push((n.clone(), b.clone()));
            continue;
        }
        let scopes_map = match (n_tree.full_scope(n), b_tree.full_scope(b)) {
            (Some(ns), Some(bs)) => {
                let w = Want {
                    n_path: tail(ns),
                    b_path: tail(bs),
                    module: false,
                };
                reproduced(n_tree, check, &w)
            }
            _ => false,
        };
        let why = if let Some(why) = refused {
            why
        } else if gn.get(n).is_none() {
            "not a node of the NPU graph".to_string()
        } else if gb.get(b).is_none() {
            "not a node of the Bench graph".to_string()
        } else if let Some(why) = &ineffective {
            format!("the merged mapping is not effective on these dumps, so a run matches nodes by their own name only: {why}")
        } else if got.is_none() {
            if no_items(npu) {
                "layer mapping reads no entries of the NPU dump (its stack.json or construct.json is empty), so a run matches every node by its own name only, and the names differ".to_string()
            } else {
                "not a dump.json entry (a node of construct.json only): layer mapping maps dump.json entries and a run matches other nodes by their own name only, and the names differ".to_string()
            }
        } else if b_tree.full_scope(b).is_none() {
            if no_items(bench) {
                "layer mapping reads no entries of the Bench dump (its stack.json or construct.json is empty), so it cannot map to this node".to_string()
            } else {
                "the Bench node is not a dump.json entry (a node of construct.json only), which layer mapping never maps to".to_string()
            }
        } else if scopes_map {
            format!(
                "the scopes map, but the call positions differ (the n-th call at a scope is matched with the n-th at the Bench scope; the NPU call maps to {})",
                got.unwrap_or("N/A")
            )
        } else {
            "no rule reproduces it without breaking an existing rule or another pair".into()
        };
        missed.push((n.clone(), b.clone(), why));
    }
    Ok((reproduced_all, missed))
}

/// `base` with the rules added, in order.
fn with_rules(base: &LayerMapping, rules: &[AddedRule]) -> LayerMapping {
    let mut lm = base.clone();
    for r in rules {
        lm.add_rule(&r.key, &r.src, &r.dst);
    }
    lm
}

/// The parent path and class of a scoped key the export wrote (`<parent path>.<Class>`).
fn scoped_parts(key: &str) -> Option<(Vec<String>, &str)> {
    if !is_scoped_key(key) {
        return None;
    }
    let (path, class) = key.rsplit_once('.')?;
    Some((path.split('.').map(str::to_string).collect(), class))
}

/// Makes the rules found pair by pair a set to keep: no rule twice (nor one the yaml already
/// has), one class rule instead of per-layer scoped rules wherever it reproduces the same pairs
/// without changing where another layer of the class maps (else, when the class key is taken by
/// another rule, one scoped key with `*` for the segments where the layers' paths differ), and no
/// rule that can be removed without losing a pair (until none can). "The pairs" are the wants reproduced with every rule
/// found, as the rules were chosen.
fn simplify(
    n_tree: &ScopeTree,
    b_tree: &ScopeTree,
    base: &LayerMapping,
    wants: &[Want],
    found: Vec<AddedRule>,
) -> Vec<AddedRule> {
    let mut added: Vec<AddedRule> = Vec::with_capacity(found.len());
    for r in found {
        let known =
            !is_scoped_key(&r.key) && base.class_rule(&r.key, &r.src) == Some(r.dst.as_str());
        if !known && !added.contains(&r) {
            added.push(r);
        }
    }
    let all = with_rules(base, &added);
    let keep: Vec<usize> = (0..wants.len())
        .filter(|&i| reproduced(n_tree, &all, &wants[i]))
        .collect();
    let holds = |rules: &[AddedRule]| {
        let lm = with_rules(base, rules);
        keep.iter().all(|&i| reproduced(n_tree, &lm, &wants[i]))
    };

    // Per-layer scoped rules of one class with the same source and destination → one class rule.
    let mut groups: Vec<(String, String, String)> = Vec::new();
    for r in &added {
        if let Some((_, class)) = scoped_parts(&r.key) {
            let g = (class.to_string(), r.src.clone(), r.dst.clone());
            if !groups.contains(&g) {
                groups.push(g);
            }
        }
    }
    for (class, src, dst) in groups {
        let member = |r: &AddedRule| {
            r.src == src && r.dst == dst && scoped_parts(&r.key).is_some_and(|(_, c)| c == class)
        };
        let Some(first) = added.iter().position(&member) else {
            continue;
        };
        let parents: Vec<Vec<String>> = added
            .iter()
            .filter(|r| member(r))
            .filter_map(|r| scoped_parts(&r.key).map(|(p, _)| p))
            .collect();
        // The class key, unless it contradicts a rule of the class; else, for several layers at
        // paths of one length, one scoped key with `*` where their paths differ
        // (`model.text_decoder.layers.*.TransformerLayer`).
        let mut keys: Vec<String> = Vec::new();
        let contradicts = base.class_rule(&class, &src).is_some_and(|d| d != dst)
            || added
                .iter()
                .any(|r| r.key == class && r.src == src && r.dst != dst);
        if !contradicts {
            keys.push(class.clone());
        }
        if parents.len() > 1 && parents.iter().all(|p| p.len() == parents[0].len()) {
            let segs: Vec<&str> = (0..parents[0].len())
                .map(|k| {
                    if parents.iter().all(|p| p[k] == parents[0][k]) {
                        parents[0][k].as_str()
                    } else {
                        "*"
                    }
                })
                .collect();
            keys.push(format!("{}.{class}", segs.join(".")));
        }
        let mut without: Vec<AddedRule> = added.clone();
        without.retain(|r| !member(r));
        let before = with_rules(base, &without);
        for key in keys {
            let rule = AddedRule {
                key,
                src: src.clone(),
                dst: dst.clone(),
            };
            let mut trial = without.clone();
            if !trial.contains(&rule) {
                let at = added[..first].iter().filter(|r| !member(r)).count();
                trial.insert(at, rule);
            }
            let after = with_rules(base, &trial);
            if !changes_others(n_tree, b_tree, &before, &after, &class, &src, &parents)
                && holds(&trial)
            {
                added = trial;
                break;
            }
        }
    }

    // No rule that can go: passes from the last rule to the first, dropping each one the pairs do
    // not need, until a pass drops none.
    loop {
        let mut dropped = false;
        for k in (0..added.len()).rev() {
            let mut trial = added.clone();
            trial.remove(k);
            if holds(&trial) {
                added = trial;
                dropped = true;
            }
        }
        if !dropped {
            break;
        }
    }
    added
}

/// A yaml scalar for a key or value: plain when that reads back as the same string, else quoted.
fn scalar(s: &str) -> String {
    let plain = !s.is_empty()
        && s.chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'))
        && !matches!(
            s.to_ascii_lowercase().as_str(),
            "y" | "n" | "yes" | "no" | "on" | "off" | "true" | "false" | "null" | "nan" | "inf"
        );
    if plain {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', "''"))
    }
}

/// The unquoted key of a top-level `key:` line, if the line is one.
fn top_key(line: &str) -> Option<(String, &str)> {
    let first = line.chars().next()?;
    if first.is_whitespace()
        || matches!(first, '#' | '-' | '%' | '{' | '[')
        || line.starts_with("---")
    {
        return None;
    }
    let (key, rest) = if first == '\'' || first == '"' {
        let body = &line[1..];
        let mut out = String::new();
        let mut chars = body.char_indices();
        let mut end = None;
        while let Some((i, c)) = chars.next() {
            if c == first {
                if first == '\'' && body[i + 1..].starts_with('\'') {
                    out.push('\'');
                    chars.next();
                    continue;
                }
                end = Some(i + 1);
                break;
            }
            if first == '"' && c == '\\' {
                if let Some((_, e)) = chars.next() {
                    out.push(e);
                }
                continue;
            }
            out.push(c);
        }
        let rest = body[end?..].trim_start().strip_prefix(':')?;
        (out, rest)
    } else {
        let colon = line.find(": ").or_else(|| {
            let t = line.trim_end();
            t.ends_with(':').then(|| t.len() - 1)
        })?;
        (line[..colon].trim().to_string(), &line[colon + 1..])
    };
    Some((key, rest))
}

/// The comment that marks what the export added.
const MARK: &str = "# added by probelens";

/// Appends the added rules to the yaml text: into an existing block key (`TopLayer` goes into a
/// `Cell` block when there is one, since msprobe reads `Cell` as `TopLayer` and drops `TopLayer`),
/// each such line marked with a trailing `# added by probelens`, else as new keys at the end, under
/// one `# added by probelens ...` comment that counts exactly the rules below it. Every added rule
/// is thus marked, and nothing else is.
fn merge_yaml(text: &str, added: &[AddedRule]) -> Result<String> {
    if added.is_empty() {
        return Ok(text.to_string());
    }
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    // Group the rules by key, in order of first appearance.
    let mut groups: Vec<(String, Vec<&AddedRule>)> = Vec::new();
    for r in added {
        match groups.iter_mut().find(|(k, _)| *k == r.key) {
            Some((_, v)) => v.push(r),
            None => groups.push((r.key.clone(), vec![r])),
        }
    }
    let has_cell = lines
        .iter()
        .any(|l| top_key(l).is_some_and(|(k, rest)| k == "Cell" && rest_is_block(rest)));
    let mut appended: Vec<String> = Vec::new();
    let mut below = 0usize;
    let mut inline = 0usize;
    for (key, rules) in groups {
        let target = if key == "TopLayer" && has_cell {
            "Cell"
        } else {
            key.as_str()
        };
        let at = lines
            .iter()
            .position(|l| top_key(l).is_some_and(|(k, _)| k == target));
        let block_ok =
            at.is_some_and(|i| top_key(&lines[i]).is_some_and(|(_, r)| rest_is_block(r)));
        match at {
            Some(i) if block_ok => {
                // The block runs to the next top-level key; insert after its last indented line.
                let mut end = i + 1;
                let mut last_content = i;
                let mut indent = String::from("  ");
                let mut seen_indent = false;
                while end < lines.len() && top_key(&lines[end]).is_none() {
                    let l = &lines[end];
                    let t = l.trim_start();
                    if !t.is_empty() && !t.starts_with('#') && l.starts_with(char::is_whitespace) {
                        last_content = end;
                        if !seen_indent {
                            indent = l[..l.len() - t.len()].to_string();
                            seen_indent = true;
                        }
                    }
                    end += 1;
                }
                inline += rules.len();
                let new: Vec<String> = rules
                    .iter()
                    .map(|r| format!("{indent}{}: {}  {MARK}", scalar(&r.src), scalar(&r.dst)))
                    .collect();
                lines.splice(last_content + 1..last_content + 1, new);
            }
            Some(_) => {
                return Err(Error::input(
                    "layer_mapping.yaml",
                    format!("the key '{target}' is not written as a block mapping (one `src: dst` per line), so rules cannot be added to it; rewrite it that way and export again"),
                ));
            }
            None => {
                below += rules.len();
                appended.push(format!("{}:", scalar(&key)));
                for r in rules {
                    appended.push(format!("  {}: {}", scalar(&r.src), scalar(&r.dst)));
                }
            }
        }
    }
    if !appended.is_empty() {
        if lines.last().is_some_and(|l| !l.trim().is_empty()) {
            lines.push(String::new());
        }
        let plural = |n: usize| if n == 1 { "" } else { "s" };
        let more = if inline > 0 {
            format!("; {inline} more in the keys above, each marked `{MARK}`",)
        } else {
            String::new()
        };
        lines.push(format!(
            "{MARK} from matched pairs: the {below} rule{} below{more}",
            plural(below)
        ));
        lines.extend(appended);
    }
    let mut out = lines.join("\n");
    out.push('\n');
    Ok(out)
}

/// After `key:`, nothing but a comment (a block mapping follows) or an explicit null.
fn rest_is_block(rest: &str) -> bool {
    let t = rest.trim();
    t.is_empty() || t.starts_with('#')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scalars_read_back_as_strings() {
        assert_eq!(scalar("self_attn"), "self_attn");
        assert_eq!(scalar("decoder.layers"), "decoder.layers");
        assert_eq!(scalar("0.module"), "'0.module'");
        assert_eq!(scalar("0"), "'0'");
        assert_eq!(scalar("yes"), "'yes'");
        assert_eq!(scalar("a*b"), "'a*b'");
        assert_eq!(scalar("it's"), "'it''s'");
    }

    #[test]
    fn top_level_keys() {
        assert_eq!(top_key("GPTModel:").map(|k| k.0), Some("GPTModel".into()));
        assert_eq!(
            top_key("TopLayer:   # root").map(|k| k.0),
            Some("TopLayer".into())
        );
        assert_eq!(top_key("'*.MM':").map(|k| k.0), Some("*.MM".into()));
        assert_eq!(top_key("\"a.b\": {x: y}").map(|k| k.0), Some("a.b".into()));
        assert_eq!(top_key("  a: b"), None);
        assert_eq!(top_key("# GPT:"), None);
    }

    #[test]
    fn merge_keeps_text_and_fills_blocks() {
        let text =
            "# header\nTopLayer:\n  0.module: module   # wrapper\n\n# next\nGPT:\n    a: b\n";
        let added = vec![
            AddedRule {
                key: "GPT".into(),
                src: "c".into(),
                dst: "d".into(),
            },
            AddedRule {
                key: "MLP".into(),
                src: "linear_fc1".into(),
                dst: "up_proj".into(),
            },
            AddedRule {
                key: "TopLayer".into(),
                src: "x".into(),
                dst: "0".into(),
            },
        ];
        let out = merge_yaml(text, &added).unwrap();
        assert_eq!(
            out,
            "# header\nTopLayer:\n  0.module: module   # wrapper\n  x: '0'  # added by probelens\n\n# next\nGPT:\n    a: b\n    c: d  # added by probelens\n\n# added by probelens from matched pairs: the 1 rule below; 2 more in the keys above, each marked `# added by probelens`\nMLP:\n  linear_fc1: up_proj\n"
        );
        let m = LayerMapping::parse("m.yaml", &out).unwrap();
        assert!(m.invalid.is_none());
        assert_eq!(m.class_rule("GPT", "c"), Some("d"));
        assert_eq!(m.class_rule("TopLayer", "x"), Some("0"));
        // Cell is msprobe's old name of TopLayer: its block takes the root rules.
        let out = merge_yaml("Cell:\n  a: b\n", &added[2..]).unwrap();
        assert_eq!(out, "Cell:\n  a: b\n  x: '0'  # added by probelens\n");
        assert!(merge_yaml("GPT: {a: b}\n", &added[..1]).is_err());
    }
}
