//! The hierarchical graph of one rank: msprobe's `GraphBuilder.build`, as an arena.
//!
//! Nodes live in a `Vec` and refer to each other by [`NodeId`] (`u32`). Input/output items are not
//! stored: a node keeps the index of its dump entry and [`Graph::io`] derives them on demand, so
//! a graph costs a few dozen bytes per node beyond its name.
//!
//! The arena is [`Nodes`]: a `Vec` natively, chunks in wasm32 (`base::chunkvec`). A node's name is
//! a `u32` into [`GraphNames`] (the dump's interned names, shared, then the few names the graph
//! makes up); its optional links, entry, micro step and verdict are kept without `Option` tags and
//! read through methods, its stack a [`StackId`] into the graph's distinct stack values. The build
//! follows construct order (a dump-named node and its stack.json entry looked up by the name's id),
//! then the backward parent fix-ups, the recompute repair, `Apis_Between_Modules.k`,
//! `parameters_grad` and the micro-step paging.

pub mod cells;
pub mod items;

use crate::base::error::{Error, Result};
use crate::base::names::{NameId, Names};
use crate::base::HashMap;
use crate::formats::dump::{OverflowLevel, RankDump};
use crate::formats::json::Val;
use crate::graph::items::{input_output, read_op, ItemMap, Py};
use std::borrow::Cow;
use std::sync::Arc;

pub type NodeId = u32;

/// A node's name: an id in its graph's [`GraphNames`] (read it with [`Graph::name`]). Not
/// comparable: two ids may name the same text (see [`GraphNames::intern`]); compare the texts.
#[derive(Debug, Clone, Copy)]
pub struct Name(u32);

/// The names of a graph's nodes, a `u32` in each node: the names of the dump the graph was built
/// from (shared with the dump, not copied: nearly every node is a construct.json key or a
/// dump.json entry), then the few the graph made up itself (the root, API collections,
/// parameter-gradient nodes, parents msprobe derives for backward nodes, a parallel merge's
/// renamed nodes and the nodes it takes from other ranks).
#[derive(Debug, Clone, Default)]
pub struct GraphNames {
    dump: Arc<Names>,
    own: Vec<Box<str>>,
}

impl GraphNames {
    pub fn new(dump: Arc<Names>) -> GraphNames {
        GraphNames {
            dump,
            own: Vec::new(),
        }
    }

    pub fn str(&self, n: Name) -> &str {
        let i = n.0 as usize;
        match i.checked_sub(self.dump.len()) {
            None => self.dump.str(NameId(n.0)),
            Some(j) => self.own.get(j).map_or("", |s| s),
        }
    }

    /// The dump's id of `n`, if it is one of the dump's names.
    pub fn dump_id(&self, n: Name) -> Option<NameId> {
        ((n.0 as usize) < self.dump.len()).then_some(NameId(n.0))
    }

    /// The dump's name `id`.
    pub fn of_dump(&self, id: NameId) -> Name {
        Name(id.0)
    }

    /// The name `s`: the dump's if it has it, else a new one of the graph's own (they are few; a
    /// name asked for twice is kept twice).
    pub fn intern(&mut self, s: &str) -> Name {
        if let Some(id) = self.dump.get(s) {
            return Name(id.0);
        }
        self.own.push(s.into());
        // A graph has fewer than 2^32 nodes (`NodeId`), and a name is made for a node.
        Name(u32::try_from(self.dump.len() + self.own.len() - 1).unwrap_or(u32::MAX))
    }
}

/// msprobe's `NodeOp`; the value is what the db stores in `node_type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeOp {
    Module = 0,
    FunctionApi = 1,
    ApiCollection = 9,
}

impl NodeOp {
    /// `NodeOp.get_node_op`: the first regex that matches; dots in the patterns match any char.
    pub fn of(name: &str) -> NodeOp {
        fn starts(name: &str, prefix: &str, any_char_after: bool) -> bool {
            if !name.starts_with(prefix) {
                return false;
            }
            if !any_char_after {
                return true;
            }
            name[prefix.len()..]
                .chars()
                .next()
                .is_some_and(|c| c != '\n')
        }
        let module = [
            ("Module", true),
            ("Cell", true),
            ("optimizer", false),
            ("clip_grad", false),
            ("DefaultModel", false),
        ];
        if module.iter().any(|(p, a)| starts(name, p, *a)) {
            return NodeOp::Module;
        }
        let api = [
            "Tensor",
            "Torch",
            "Functional",
            "NPU",
            "VF",
            "Distributed",
            "Aten",
            "Mint",
            "Primitive",
            "Jit",
            "MintFunctional",
            "MindSpeed",
        ];
        if api.iter().any(|p| starts(name, p, true)) {
            return NodeOp::FunctionApi;
        }
        NodeOp::Module
    }
    pub fn value(self) -> u8 {
        self as u8
    }
}

/// A node's stack as msprobe keeps it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Stack {
    /// `[]`
    Empty,
    /// The value stack.json has for the name (normally a list of strings).
    Val(Val),
    /// The message msprobe puts on a backward node whose forward node is missing.
    NoForward,
}

pub const NO_FORWARD_STACK: &str =
    "This backward node cannot find the forward node and cannot retrieve stack information.";

/// A node's stack value: an index into its graph's distinct values ([`Graph::stack`],
/// [`Graph::stack_id`]; many nodes share one, as stack.json groups them), 4 bytes in a node
/// instead of a 16-byte [`Stack`]. 0 is [`Stack::Empty`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StackId(u32);

/// Identity of a stack value in its store (equal keys print equal JSON); None for a value
/// without one (not a list, object or string).
pub fn stack_key(s: Stack) -> Option<(u8, u32, u32)> {
    match s {
        Stack::Empty => Some((0, 0, 0)),
        Stack::NoForward => Some((1, 0, 0)),
        Stack::Val(Val::List { start, len }) => Some((2, start, len)),
        Stack::Val(Val::Obj { start, shape }) => Some((3, start, shape)),
        Stack::Val(Val::Str(r)) => Some((4, r.off, r.len)),
        Stack::Val(_) => None,
    }
}

/// A node's precision verdict (`precision_index`).
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd)]
pub struct Precision(pub f64);

/// A graph node. The optional links and numbers are kept without `Option`'s tag words and the
/// stack value as an id (64 bytes, 56 in wasm32: the tests pin both): read them with the methods
/// of the same names.
#[derive(Debug, Clone)]
pub struct Node {
    /// In the graph's [`GraphNames`] ([`Graph::name`]).
    pub name: Name,
    pub op: NodeOp,
    /// [`NONE`] or the parent's id.
    parent: u32,
    pub children: Vec<NodeId>,
    /// [`NONE`] or the index of the node's dump.json entry.
    entry: u32,
    /// In the graph's stack values ([`Graph::stack`]).
    pub stack: StackId,
    micro_step: i64,
    /// A [`Precision`] when `has & HAS_PRECISION`.
    precision: f64,
    pub overflow: Option<OverflowLevel>,
    /// [`NONE`] or the node on the other side whose path is this node's `matched_node_link`.
    partner: u32,
    /// Set by manual matching (the db's `modified` column).
    pub modified: bool,
    /// Which of `micro_step` and `precision` are set.
    has: u8,
}

/// The node arena ([`NodeId`] indexes it): a `Vec` natively; in wasm32 chunks of 4,096 nodes
/// (229 kB), which fill the holes of the page's heap instead of one block that goes on its top
/// ([`crate::base::chunkvec`]).
#[cfg(not(target_arch = "wasm32"))]
pub type Nodes = Vec<Node>;
#[cfg(target_arch = "wasm32")]
pub type Nodes = crate::base::chunkvec::ChunkVec<Node, 12>;

/// No node, no entry (ids and entry indexes stay below it: 2^32 - 1 of them would need far
/// more than the 4 GiB a wasm32 page has).
const NONE: u32 = u32::MAX;
const HAS_MICRO: u8 = 1;
const HAS_PRECISION: u8 = 2;

#[inline(always)]
fn opt(x: u32) -> Option<u32> {
    (x != NONE).then_some(x)
}

/// Name -> node over a graph's own nodes: a slot holds a node id, and the node's name is the
/// key, so no name is stored twice (a graph of millions of nodes kept a copy of every name as a
/// map key). Open addressing with linear probing, at most three quarters full (the hash in the
/// slot spares most name comparisons; half full took 4 MB more for each of the 80-layer pair's
/// graphs); removal shifts back.
#[derive(Debug, Clone, Default)]
pub struct NodeIndex {
    /// (node id + 1, low 32 bits of the name's hash); id 0 = empty. A power of two long.
    slots: Vec<(u32, u32)>,
    len: usize,
    hasher: foldhash::fast::RandomState,
}

impl NodeIndex {
    pub fn len(&self) -> usize {
        self.len
    }
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    fn hash(&self, name: &str) -> u32 {
        use std::hash::BuildHasher;
        self.hasher.hash_one(name) as u32
    }

    /// The slot of `name`: where its id is, or the empty slot where it would go.
    #[allow(clippy::ptr_arg)] // `Nodes` is a `Vec` natively only
    fn find(&self, nodes: &Nodes, names: &GraphNames, name: &str, h: u32) -> usize {
        let mask = self.slots.len() - 1;
        let mut i = h as usize & mask;
        loop {
            let (id1, sh) = self.slots[i];
            if id1 == 0 {
                return i;
            }
            if sh == h
                && nodes
                    .get(id1 as usize - 1)
                    .is_some_and(|n| names.str(n.name) == name)
            {
                return i;
            }
            i = (i + 1) & mask;
        }
    }

    #[allow(clippy::ptr_arg)] // `Nodes` is a `Vec` natively only
    pub fn get(&self, nodes: &Nodes, names: &GraphNames, name: &str) -> Option<NodeId> {
        if self.slots.is_empty() {
            return None;
        }
        match self.slots[self.find(nodes, names, name, self.hash(name))] {
            (0, _) => None,
            (id1, _) => Some(id1 - 1),
        }
    }

    /// Makes room for `more` names.
    pub fn reserve(&mut self, more: usize) {
        let want = ((self.len + more) * 4)
            .div_ceil(3)
            .next_power_of_two()
            .max(16);
        if want > self.slots.len() {
            self.rebuild(want);
        }
    }

    fn rebuild(&mut self, size: usize) {
        let old = std::mem::replace(&mut self.slots, vec![(0, 0); size]);
        let mask = size - 1;
        for (id1, h) in old.into_iter().filter(|s| s.0 != 0) {
            let mut i = h as usize & mask;
            while self.slots[i].0 != 0 {
                i = (i + 1) & mask;
            }
            self.slots[i] = (id1, h);
        }
    }

    /// Indexes node `id` under its name (`nodes[id].name`); returns the node that had the name.
    #[allow(clippy::ptr_arg)] // `Nodes` is a `Vec` natively only
    pub fn insert(&mut self, nodes: &Nodes, names: &GraphNames, id: NodeId) -> Option<NodeId> {
        if (self.len + 1) * 4 > self.slots.len() * 3 {
            self.rebuild((self.slots.len() * 2).max(16));
        }
        let name = nodes.get(id as usize).map_or("", |n| names.str(n.name));
        let h = self.hash(name);
        let i = self.find(nodes, names, name, h);
        let old = self.slots[i].0;
        self.slots[i] = (id + 1, h);
        if old == 0 {
            self.len += 1;
            None
        } else {
            Some(old - 1)
        }
    }

    /// Forgets `name`; returns the node it named.
    #[allow(clippy::ptr_arg)] // `Nodes` is a `Vec` natively only
    pub fn remove(&mut self, nodes: &Nodes, names: &GraphNames, name: &str) -> Option<NodeId> {
        if self.slots.is_empty() {
            return None;
        }
        let mask = self.slots.len() - 1;
        let mut i = self.find(nodes, names, name, self.hash(name));
        let (id1, _) = self.slots[i];
        if id1 == 0 {
            return None;
        }
        self.slots[i] = (0, 0);
        self.len -= 1;
        // Shift back the entries of the run after the hole that may no longer be reached.
        let mut j = i;
        loop {
            j = (j + 1) & mask;
            let (e, h) = self.slots[j];
            if e == 0 {
                break;
            }
            let ideal = h as usize & mask;
            // Entry at j may move to the hole at i unless its ideal slot lies in (i, j].
            let reachable = if i <= j {
                ideal > i && ideal <= j
            } else {
                ideal > i || ideal <= j
            };
            if !reachable {
                self.slots[i] = self.slots[j];
                self.slots[j] = (0, 0);
                i = j;
            }
        }
        Some(id1 - 1)
    }

    /// The indexed node ids (in slot order).
    pub fn ids(&self) -> impl Iterator<Item = NodeId> + '_ {
        self.slots.iter().filter(|s| s.0 != 0).map(|s| s.0 - 1)
    }
}

impl Node {
    /// A node without links or data.
    pub fn new(name: Name, op: NodeOp) -> Node {
        Node {
            name,
            op,
            parent: NONE,
            children: Vec::new(),
            entry: NONE,
            stack: StackId(0),
            micro_step: 0,
            precision: 0.0,
            overflow: None,
            partner: NONE,
            modified: false,
            has: 0,
        }
    }
    #[inline]
    pub fn parent(&self) -> Option<NodeId> {
        opt(self.parent)
    }
    #[inline]
    pub fn set_parent(&mut self, p: Option<NodeId>) {
        self.parent = p.unwrap_or(NONE);
    }
    /// The index of the node's dump.json entry.
    #[inline]
    pub fn entry(&self) -> Option<u32> {
        opt(self.entry)
    }
    #[inline]
    pub fn set_entry(&mut self, e: Option<u32>) {
        self.entry = e.unwrap_or(NONE);
    }
    /// The node on the other side whose path is this node's `matched_node_link`.
    #[inline]
    pub fn partner(&self) -> Option<NodeId> {
        opt(self.partner)
    }
    #[inline]
    pub fn set_partner(&mut self, p: Option<NodeId>) {
        self.partner = p.unwrap_or(NONE);
    }
    /// The partner, which the node no longer has.
    #[inline]
    pub fn take_partner(&mut self) -> Option<NodeId> {
        opt(std::mem::replace(&mut self.partner, NONE))
    }
    #[inline]
    pub fn micro_step(&self) -> Option<i64> {
        (self.has & HAS_MICRO != 0).then_some(self.micro_step)
    }
    #[inline]
    pub fn set_micro_step(&mut self, m: Option<i64>) {
        self.micro_step = m.unwrap_or(0);
        self.has = (self.has & !HAS_MICRO) | if m.is_some() { HAS_MICRO } else { 0 };
    }
    /// The precision verdict (`precision_index`).
    #[inline]
    pub fn precision(&self) -> Option<Precision> {
        (self.has & HAS_PRECISION != 0).then_some(Precision(self.precision))
    }
    #[inline]
    pub fn set_precision(&mut self, p: Option<Precision>) {
        self.precision = p.map_or(0.0, |p| p.0);
        self.has = (self.has & !HAS_PRECISION) | if p.is_some() { HAS_PRECISION } else { 0 };
    }
}

/// One rank's graph.
#[derive(Debug, Clone)]
pub struct Graph {
    pub nodes: Nodes,
    /// The nodes' names ([`Graph::name`]).
    pub names: GraphNames,
    /// Name -> node, for every node created (reachable from the root or not), like `node_map`.
    pub index: NodeIndex,
    collection_counter: Option<i64>,
    pub micro_step_num: Option<Val>,
    /// Parallel merge (`merge.rs`): items that are not the node's dump entry (merged statistics,
    /// nodes taken over from other ranks, in this graph's store). [`Graph::io`] returns them.
    pub io_override: HashMap<NodeId, (ItemMap, ItemMap)>,
    /// Parallel merge: the node's `parallel_merge_info` lines.
    pub merge_info: HashMap<NodeId, Vec<String>>,
    /// The distinct stack values of the nodes ([`StackId`]), and each one's id by its key.
    stacks: Vec<Stack>,
    stack_ids: HashMap<(u8, u32, u32), u32>,
    /// Parallel merge: the tree may hold two nodes of one name; [`Graph::post_order`] then keeps
    /// the first, as msprobe's `get_sorted_nodes` (visited by id) does.
    pub dedupe_names: bool,
}

pub const ROOT: NodeId = 0;

fn backward_n(name: &str) -> Option<(&str, &str)> {
    // `(\.backward\.)(\d+)$` -> (prefix before ".backward.", digits)
    let (head, digits) = name.rsplit_once('.')?;
    if digits.is_empty() || !digits.chars().all(|c| c.is_ascii_digit()) {
        return None;
    }
    let prefix = head.strip_suffix(".backward")?;
    Some((prefix, digits))
}

fn forward_n(name: &str) -> Option<(&str, &str)> {
    let (head, digits) = name.rsplit_once('.')?;
    if digits.is_empty() || !digits.chars().all(|c| c.is_ascii_digit()) {
        return None;
    }
    let prefix = head.strip_suffix(".forward")?;
    Some((prefix, digits))
}

/// `forward_pattern.sub(r".backward.\2", s)`.
fn fwd_to_bwd(s: &str) -> String {
    match forward_n(s) {
        Some((p, d)) => format!("{p}.backward.{d}"),
        None => s.to_string(),
    }
}

/// `backward_pattern.sub(r".forward.\2", s)`.
fn bwd_to_fwd(s: &str) -> String {
    match backward_n(s) {
        Some((p, d)) => format!("{p}.forward.{d}"),
        None => s.to_string(),
    }
}

impl Graph {
    /// A graph of just its root, its names after `dump_names` (see [`GraphNames`]).
    fn new(dump_names: Arc<Names>) -> Graph {
        let mut g = Graph {
            nodes: Nodes::new(),
            names: GraphNames::new(dump_names),
            index: NodeIndex::default(),
            collection_counter: None,
            micro_step_num: None,
            io_override: HashMap::default(),
            merge_info: HashMap::default(),
            dedupe_names: false,
            stacks: vec![Stack::Empty],
            stack_ids: HashMap::default(),
        };
        let root = g.names.intern("DefaultModel");
        g.add(root, NodeOp::Module, None);
        g
    }

    /// The stack value `id` stands for.
    pub fn stack(&self, id: StackId) -> Stack {
        self.stacks
            .get(id.0 as usize)
            .copied()
            .unwrap_or(Stack::Empty)
    }

    /// The id of stack value `s` (added if new).
    pub fn stack_id(&mut self, s: Stack) -> StackId {
        let Some(key) = stack_key(s) else {
            self.stacks.push(s);
            return StackId(self.stacks.len() as u32 - 1);
        };
        if key == (0, 0, 0) {
            return StackId(0);
        }
        let n = self.stacks.len() as u32;
        let id = *self.stack_ids.entry(key).or_insert(n);
        if id == n {
            self.stacks.push(s);
        }
        StackId(id)
    }

    fn add(&mut self, name: Name, op: NodeOp, parent: Option<NodeId>) -> NodeId {
        let id = self.nodes.len() as NodeId;
        self.nodes.push(Node::new(name, op));
        self.index.insert(&self.nodes, &self.names, id);
        self.add_upnode(id, parent);
        id
    }

    /// The name of node `id`.
    pub fn name(&self, id: NodeId) -> &str {
        self.nodes
            .get(id as usize)
            .map_or("", |n| self.names.str(n.name))
    }

    /// The name of `n`, a node of this graph.
    pub fn name_of(&self, n: &Node) -> &str {
        self.names.str(n.name)
    }

    /// Gives node `id` the name `new` (the index is the caller's: [`Graph::index_remove`] the
    /// old name before, [`Graph::index_insert`] after).
    pub fn set_name(&mut self, id: NodeId, new: &str) {
        let name = self.names.intern(new);
        if let Some(n) = self.nodes.get_mut(id as usize) {
            n.name = name;
        }
    }

    /// A node named `name`, not linked nor indexed (the caller pushes it onto `nodes`).
    pub fn new_node(&mut self, name: &str, op: NodeOp) -> Node {
        Node::new(self.names.intern(name), op)
    }

    /// Indexes node `id` under its (current) name; returns the node that had the name.
    pub fn index_insert(&mut self, id: NodeId) -> Option<NodeId> {
        self.index.insert(&self.nodes, &self.names, id)
    }

    /// Forgets `name` in the index (before the node it names is renamed or dropped).
    pub fn index_remove(&mut self, name: &str) -> Option<NodeId> {
        self.index.remove(&self.nodes, &self.names, name)
    }

    /// `BaseNode.add_upnode`.
    fn add_upnode(&mut self, id: NodeId, parent: Option<NodeId>) {
        let Some(p) = parent else { return };
        if self.name(p) == self.name(id) || self.nodes[id as usize].parent().is_some() {
            return;
        }
        self.nodes[id as usize].set_parent(Some(p));
        self.nodes[p as usize].children.push(id);
    }

    pub fn node(&self, id: NodeId) -> &Node {
        &self.nodes[id as usize]
    }

    pub fn get(&self, name: &str) -> Option<NodeId> {
        self.index.get(&self.nodes, &self.names, name)
    }

    /// Ancestor ids, root first; empty on a cycle (like `get_ancestors`).
    pub fn ancestors(&self, id: NodeId) -> Vec<NodeId> {
        let mut out = Vec::new();
        let mut cur = self.nodes[id as usize].parent();
        // A chain longer than the node count repeats a node: a cycle. Counting instead of a set
        // keeps this O(depth) without hashing (the default matching calls it for every node).
        while let Some(c) = cur {
            if out.len() >= self.nodes.len() {
                return Vec::new();
            }
            out.push(c);
            cur = self.nodes[c as usize].parent();
        }
        out.reverse();
        out
    }

    /// Ancestor names then the node's own name.
    pub fn path(&self, id: NodeId) -> Vec<&str> {
        let mut v: Vec<&str> = self.ancestors(id).iter().map(|a| self.name(*a)).collect();
        v.push(self.name(id));
        v
    }

    /// The node's input_data and output_data, derived from its dump entry.
    pub fn io(&self, dump: &RankDump, id: NodeId) -> (ItemMap, ItemMap) {
        if let Some(io) = self.io_override.get(&id) {
            return io.clone();
        }
        let n = &self.nodes[id as usize];
        let entry = n
            .entry()
            .and_then(|e| dump.entries.get(e as usize))
            .map(|e| dump.store.val(e.value));
        let items =
            read_op(&dump.store, entry, self.name_of(n), &dump.names.dump).unwrap_or_default();
        input_output(&dump.store, items)
    }

    /// Nodes reachable from the root in post-order (children first), the db's `node_order`.
    pub fn post_order(&self) -> Vec<NodeId> {
        let mut order = Vec::with_capacity(self.nodes.len());
        let mut visited = vec![false; self.nodes.len()];
        let mut names: std::collections::HashSet<&str> = Default::default();
        let mut stack: Vec<(NodeId, bool)> = vec![(ROOT, false)];
        while let Some((id, processed)) = stack.pop() {
            if visited[id as usize] {
                continue;
            }
            if self.dedupe_names && names.contains(self.name(id)) {
                continue;
            }
            if processed {
                visited[id as usize] = true;
                if self.dedupe_names {
                    names.insert(self.name(id));
                }
                order.push(id);
            } else {
                stack.push((id, true));
                for c in self.nodes[id as usize].children.iter().rev() {
                    if !visited[*c as usize] {
                        stack.push((*c, false));
                    }
                }
            }
        }
        order
    }

    /// Nodes reachable from the root in pre-order.
    pub fn pre_order(&self) -> Vec<NodeId> {
        let mut order = Vec::with_capacity(self.nodes.len());
        let mut visited = vec![false; self.nodes.len()];
        let mut stack = vec![ROOT];
        while let Some(id) = stack.pop() {
            if visited[id as usize] {
                continue;
            }
            visited[id as usize] = true;
            order.push(id);
            for c in self.nodes[id as usize].children.iter().rev() {
                if !visited[*c as usize] {
                    stack.push(*c);
                }
            }
        }
        order
    }

    /// `GraphBuilder.build`.
    pub fn build(d: &RankDump) -> Result<Graph> {
        if d.construct.is_empty() {
            return Err(Error::input(
                &d.names.construct,
                "construct.json is empty, so no model structure can be built; dump with level L0 or mix \
                 (an L1 dump has no module structure)",
            ));
        }
        let mut b = Builder {
            d,
            g: Graph::new(d.node_names.clone()),
        };
        // Nearly every node is a construct.json key (the rest: API collections, parameter
        // gradients): reserve for those, so the arena does not double past what it needs.
        let guess = d.construct.len() + d.construct.len() / 64 + 64;
        b.g.nodes.reserve_exact(guess);
        b.g.index.reserve(guess);
        b.g.micro_step_num = d.micro_step_number;
        b.init_nodes();
        b.handle_recompute();
        b.collect_apis_between_modules();
        b.add_parameters_grad();
        b.g.nodes.shrink_to_fit();
        Ok(b.g)
    }

    /// Sets `overflow_level` on every node whose name is a dump key with an overflow scene.
    pub fn apply_overflow(&mut self, d: &RankDump) {
        let names = &self.names;
        for n in &mut self.nodes {
            if let Some(e) = d.entry(names.str(n.name)) {
                n.overflow = e.overflow;
            }
        }
    }

    /// `paging_by_micro_step`: returns the number of micro steps.
    pub fn paging_by_micro_step(&mut self, mut other: Option<&mut Graph>) -> i64 {
        if let Some(m) = self.micro_step_num {
            return match m {
                Val::Int(i) => i + 1,
                Val::Float(f) => f as i64 + 1,
                _ => 1,
            };
        }
        let mut step = 0i64;
        let mut backward = false;
        let root_children = self.nodes[ROOT as usize].children.clone();
        for c in &root_children {
            let n = &self.nodes[*c as usize];
            if n.op == NodeOp::Module {
                if self.names.str(n.name).contains(".forward.") {
                    if backward {
                        step += 1;
                        backward = false;
                    }
                } else {
                    backward = true;
                }
            }
            self.nodes[*c as usize].set_micro_step(Some(step));
            if let (Some(o), Some(p)) = (other.as_deref_mut(), self.nodes[*c as usize].partner()) {
                o.nodes[p as usize].set_micro_step(Some(step));
            }
        }
        self.propagate_micro(ROOT);
        if let Some(o) = other {
            let rc = o.nodes[ROOT as usize].children.clone();
            for c in rc {
                let n = &mut o.nodes[c as usize];
                if n.micro_step().is_none() {
                    let name = o.names.str(n.name);
                    n.set_micro_step(Some(name.rsplit('.').next().and_then(py_int).unwrap_or(0)));
                }
            }
            o.propagate_micro(ROOT);
        }
        step + 1
    }

    fn propagate_micro(&mut self, root: NodeId) {
        let mut stack = vec![root];
        while let Some(id) = stack.pop() {
            let n = &self.nodes[id as usize];
            if let (Some(p), None) = (n.parent(), n.micro_step()) {
                let m = self.nodes[p as usize].micro_step();
                self.nodes[id as usize].set_micro_step(m);
            }
            for c in self.nodes[id as usize].children.iter().rev() {
                stack.push(*c);
            }
        }
    }
}

/// Python's `int(s)` for the strings node names end with.
fn py_int(s: &str) -> Option<i64> {
    let t = s.trim();
    let t = t.strip_prefix('+').unwrap_or(t);
    if t.is_empty() {
        return None;
    }
    let (neg, digits) = match t.strip_prefix('-') {
        Some(d) => (true, d),
        None => (false, t),
    };
    if digits.is_empty()
        || !digits.chars().all(|c| c.is_ascii_digit() || c == '_')
        || digits.starts_with('_')
    {
        return None;
    }
    let v: i64 = digits.replace('_', "").parse().ok()?;
    Some(if neg { -v } else { v })
}

struct Builder<'a> {
    d: &'a RankDump,
    g: Graph,
}

/// While the construct.json nodes are made, per dump name id: its node and its stack.json entry
/// (its index in `stack_by_name`), `MAX` for none. A named node is found, and finds its stack,
/// without hashing its name again (most names have no stack: a miss probes furthest).
struct ById {
    node: Vec<NodeId>,
    stack: Vec<u32>,
}

impl Builder<'_> {
    fn construct_get(&self, name: &str) -> Option<Option<&str>> {
        self.d.construct_parent(name)
    }
    fn in_construct(&self, name: &str) -> bool {
        self.d.in_construct(name)
    }

    fn backward_upnode_missing(&self, sub: &str) -> Option<String> {
        if backward_n(sub).is_some() {
            if let Some(Some(fwd_up)) = self.construct_get(&bwd_to_fwd(sub)) {
                let new_up = fwd_to_bwd(fwd_up);
                if self.in_construct(&new_up) {
                    return Some(new_up);
                }
            }
        }
        if sub.ends_with(".backward") {
            if let Some(Some(fwd_up)) = self.construct_get(&sub.replace("backward", "forward")) {
                let new_up = fwd_up.replace("forward", "backward");
                if self.in_construct(&new_up) {
                    return Some(new_up);
                }
            }
        }
        None
    }

    fn backward_inplace<'s>(&self, sub: &str, up: &'s str) -> Option<Cow<'s, str>> {
        if backward_n(sub).is_none() {
            return Some(Cow::Borrowed(up));
        }
        let sub_split: Vec<&str> = sub.split('.').collect();
        if sub_split.len() < 5 {
            return Some(Cow::Borrowed(up));
        }
        let up_split: Vec<&str> = up.split('.').collect();
        if up_split.len() < 4 {
            return Some(Cow::Borrowed(up));
        }
        let sub_prefix = sub_split[..sub_split.len() - 4].join(".");
        let up_prefix = up_split[..up_split.len() - 3].join(".");
        if sub_prefix != up_prefix {
            let fwd_sub = bwd_to_fwd(sub);
            if let Some(fwd_up) = self.construct_get(&fwd_sub) {
                let fwd_up = fwd_up?;
                let new_up = fwd_to_bwd(fwd_up);
                if self.in_construct(&new_up) {
                    return Some(Cow::Owned(new_up));
                }
            }
        }
        Some(Cow::Borrowed(up))
    }

    /// The node named `name` (its interned id in the dump's names, if the caller has it), made
    /// if new; `by_id` remembers the nodes of interned names (no hashing of the name again).
    fn create_or_get(
        &mut self,
        name: &str,
        name_id: Option<NameId>,
        parent: Option<NodeId>,
        by_id: &mut ById,
    ) -> NodeId {
        let cached = name_id.and_then(|i| by_id.node.get(i.0 as usize).copied());
        let found = match cached {
            Some(n) if n != NodeId::MAX => Some(n),
            // Every node named by a dump name is in `by_id` (`init_nodes` registers the root,
            // this function the rest): a dump name not there has no node yet.
            Some(_) => None,
            None => self.g.get(name),
        };
        if let Some(id) = found {
            if let Some(i) = name_id {
                if let Some(slot) = by_id.node.get_mut(i.0 as usize) {
                    *slot = id;
                }
            }
            self.g.add_upnode(id, parent);
            return id;
        }
        let name_id = name_id.or_else(|| self.d.node_names.get(name));
        let interned = match name_id {
            Some(i) => self.g.names.of_dump(i),
            None => self.g.names.intern(name),
        };
        let id = self.g.add(interned, NodeOp::of(name), parent);
        if let Some(i) = name_id {
            if let Some(slot) = by_id.node.get_mut(i.0 as usize) {
                *slot = id;
            }
        }
        let entry = name_id.and_then(|i| self.d.entry_of(i));
        let stack_val = match name_id.and_then(|i| by_id.stack.get(i.0 as usize)) {
            Some(&i) => self.d.stack_by_name.value(i as usize),
            None => self.d.stack_by_name.get(name),
        };
        let mut stack = match stack_val {
            Some(v) => Stack::Val(v),
            None => Stack::Empty,
        };
        let falsy = match stack {
            Stack::Empty => true,
            Stack::Val(v) => !crate::formats::keys::truthy(&self.d.store, v),
            Stack::NoForward => false,
        };
        if falsy && (backward_n(name).is_some() || name.ends_with(".backward")) {
            let fwd_name = match backward_n(name) {
                Some((p, _)) => format!("{p}.forward.0"),
                None => name.replace("backward", "forward"),
            };
            stack = match self.g.get(&fwd_name) {
                Some(f) => self.g.stack(self.g.nodes[f as usize].stack),
                None => Stack::NoForward,
            };
        }
        let stack = self.g.stack_id(stack);
        let n = &mut self.g.nodes[id as usize];
        n.set_entry(entry);
        n.stack = stack;
        if self.d.is_megatron() {
            n.set_micro_step(Some(name_id.map_or(0, |i| self.d.micro_of_id(i))));
        }
        id
    }

    fn init_nodes(&mut self) {
        let d = self.d;
        let mut by_id = ById {
            node: vec![NodeId::MAX; d.node_names.len()],
            stack: vec![u32::MAX; d.node_names.len()],
        };
        for (i, (name, _)) in d.stack_by_name.iter().enumerate() {
            if let Some(id) = d.node_names.get(name) {
                by_id.stack[id.0 as usize] = i as u32;
            }
        }
        // The root is the one node made before: registered if its name is a dump name.
        if let Some(id) = self.g.names.dump_id(self.g.nodes[ROOT as usize].name) {
            by_id.node[id.0 as usize] = ROOT;
        }
        for &(sub_id, up_id) in &d.construct {
            let sub = d.node_names.str(sub_id);
            let upnode = match up_id {
                Some(u_id) => {
                    let u = d.node_names.str(u_id);
                    match self.backward_inplace(sub, u) {
                        // The parent as construct.json names it: its id is at hand.
                        Some(Cow::Borrowed(up)) => {
                            self.create_or_get(up, Some(u_id), None, &mut by_id)
                        }
                        Some(Cow::Owned(up)) => self.create_or_get(&up, None, None, &mut by_id),
                        None => ROOT,
                    }
                }
                None => match self.backward_upnode_missing(sub) {
                    Some(up) => self.create_or_get(&up, None, None, &mut by_id),
                    None => ROOT,
                },
            };
            self.create_or_get(sub, Some(sub_id), Some(upnode), &mut by_id);
        }
    }

    fn is_recompute_by_stack(&self, stack: Option<Val>) -> bool {
        let store = &self.d.store;
        let Some(v @ Val::List { .. }) = stack else {
            return false;
        };
        let mut frames: Vec<(String, String)> = Vec::new();
        for line in store.list(v) {
            let Some(s) = store.as_str(line) else {
                continue;
            };
            let s = s.trim().replace("File ", "");
            let file = s.split(", line ").next().unwrap_or("").trim().to_string();
            let Some(after_in) = s.split(", in ").nth(1) else {
                continue;
            };
            let func = after_in.split(',').next().unwrap_or("").trim().to_string();
            frames.push((file, func));
        }
        if frames.is_empty() {
            return false;
        }
        if frames
            .iter()
            .any(|(f, func)| func == "recompute_fn" && f.ends_with("torch/utils/checkpoint.py"))
        {
            return true;
        }
        for (i, (f, func)) in frames.iter().enumerate() {
            if func == "backward"
                || (func == "checkpoint_function_backward" && f.contains("megatron"))
            {
                for j in [i + 1, i + 2] {
                    if frames
                        .get(j)
                        .is_some_and(|(ff, _)| ff.ends_with("torch/autograd/function.py"))
                    {
                        return true;
                    }
                }
            }
        }
        false
    }

    fn handle_recompute(&mut self) {
        let root_children = self.g.nodes[ROOT as usize].children.clone();
        let names: std::collections::HashSet<&str> =
            root_children.iter().map(|c| self.g.name(*c)).collect();
        let mut recompute: Vec<(NodeId, String)> = Vec::new(); // (node, prefix), in order
        let mut recompute_index: HashMap<NodeId, usize> = HashMap::default();
        let mut cache: std::collections::HashSet<String> = std::collections::HashSet::new();
        let is_pytorch = self.d.framework_key.as_deref().unwrap_or("pytorch") == "pytorch";
        for (i, c) in root_children.iter().enumerate() {
            let name = self.g.name(*c).to_string();
            if NodeOp::of(&name) != NodeOp::Module {
                continue;
            }
            if is_pytorch {
                let id = if backward_n(&name).is_some() {
                    bwd_to_fwd(&name)
                } else {
                    name.clone()
                };
                if !self.is_recompute_by_stack(self.d.stack_by_name.get(&id)) {
                    continue;
                }
            }
            let segs: Vec<&str> = name.split('.').collect();
            let prefix = segs[..segs.len().saturating_sub(2)].join(".");
            if cache.contains(&name) {
                upsert(&mut recompute, &mut recompute_index, *c, prefix, i);
                continue;
            }
            let n = segs.len();
            let digit = |s: &str| !s.is_empty() && s.chars().all(|ch| ch.is_ascii_digit());
            let is_rc = n > 7
                || (n == 7 && !(digit(segs[1]) && digit(segs[3])))
                || (n == 6 && !digit(segs[1]));
            if !is_rc || n < 2 {
                continue;
            }
            let mut rel: Vec<&str> = segs.clone();
            rel[n - 2] = if segs[n - 2] == "forward" {
                "backward"
            } else {
                "forward"
            };
            let rel = rel.join(".");
            if names.contains(rel.as_str()) {
                upsert(&mut recompute, &mut recompute_index, *c, prefix, i);
                cache.insert(rel);
            }
        }
        if recompute.is_empty() {
            return;
        }
        let prefixes: std::collections::HashSet<&str> =
            recompute.iter().map(|(_, p)| p.as_str()).collect();
        let mut no_rc: HashMap<String, Vec<NodeId>> = HashMap::default();
        for (id, n) in self.g.nodes.iter().enumerate() {
            let name = self.g.names.str(n.name);
            if NodeOp::of(name) != NodeOp::Module {
                continue;
            }
            let Some((p, _)) = forward_n(name) else {
                continue;
            };
            match n.parent() {
                None => continue,
                Some(par) if par == ROOT => continue,
                _ => {}
            }
            if !prefixes.contains(p) {
                continue;
            }
            no_rc.entry(p.to_string()).or_default().push(id as NodeId);
        }
        if no_rc.is_empty() {
            return;
        }
        for l in no_rc.values_mut() {
            l.reverse();
        }
        let mut no_rc_b = no_rc.clone();
        let mut del: Vec<usize> = Vec::new();
        for (rc_id, prefix) in &recompute {
            if !no_rc.contains_key(prefix) {
                continue;
            }
            let is_fwd = forward_n(self.g.name(*rc_id)).is_some();
            let list = if is_fwd {
                no_rc.get_mut(prefix)
            } else {
                no_rc_b.get_mut(prefix)
            };
            let Some(list) = list else { continue };
            let Some(no_rc_node) = list.pop() else {
                continue;
            };
            let Some(up) = self.g.nodes[no_rc_node as usize].parent() else {
                continue;
            };
            let target = fwd_to_bwd(self.g.name(up));
            let Some(new_up) = self.g.get(&target) else {
                continue;
            };
            let anc = self.g.ancestors(new_up);
            let rc_name = self.g.name(*rc_id);
            if !anc.iter().any(|a| self.g.name(*a) == rc_name) {
                self.g.nodes[*rc_id as usize].set_parent(Some(new_up));
                self.g.nodes[new_up as usize].children.push(*rc_id);
                if let Some(ix) = recompute_index.get(rc_id) {
                    del.push(*ix);
                }
            }
        }
        del.sort_unstable_by(|a, b| b.cmp(a));
        let rc = &mut self.g.nodes[ROOT as usize].children;
        for ix in del {
            if ix < rc.len() {
                rc.remove(ix);
            }
        }
    }

    fn collect_apis_between_modules(&mut self) {
        let list = std::mem::take(&mut self.g.nodes[ROOT as usize].children);
        let mut output = Vec::with_capacity(list.len());
        let mut i = 0;
        while i < list.len() {
            let cur = list[i];
            if self.g.nodes[cur as usize].op == NodeOp::FunctionApi {
                let mut run = vec![cur];
                i += 1;
                while i < list.len() && self.g.nodes[list[i] as usize].op == NodeOp::FunctionApi {
                    run.push(list[i]);
                    i += 1;
                }
                if run.len() >= 2 {
                    let k = match self.g.collection_counter {
                        None => 0,
                        Some(k) => k + 1,
                    };
                    self.g.collection_counter = Some(k);
                    let name = self.g.names.intern(&format!("Apis_Between_Modules.{k}"));
                    let id = self.g.add(name, NodeOp::ApiCollection, None);
                    for n in &run {
                        self.g.nodes[*n as usize].set_parent(Some(id));
                    }
                    let first_micro = self.g.nodes[run[0] as usize].micro_step();
                    let coll = &mut self.g.nodes[id as usize];
                    coll.children = run;
                    coll.set_parent(Some(ROOT));
                    if first_micro.is_some() {
                        coll.set_micro_step(first_micro);
                    }
                    output.push(id);
                } else {
                    output.extend(run);
                }
            } else {
                output.push(cur);
                i += 1;
            }
        }
        self.g.nodes[ROOT as usize].children = output;
    }

    fn add_parameters_grad(&mut self) {
        let d = self.d;
        let mut prefixes: Vec<(String, Vec<String>)> = Vec::new();
        let mut pos: HashMap<String, usize> = HashMap::default();
        for e in &d.entries {
            let name = d.entry_name(e);
            if self.g.get(name).is_some() {
                continue;
            }
            let Some(start) = params_grad_suffix(name) else {
                continue;
            };
            let (prefix, suffix) = name.split_at(start);
            match pos.get(prefix) {
                Some(&i) => prefixes[i].1.push(suffix.to_string()),
                None => {
                    pos.insert(prefix.to_string(), prefixes.len());
                    prefixes.push((prefix.to_string(), vec![suffix.to_string()]));
                }
            }
        }
        if prefixes.is_empty() {
            return;
        }
        let mut max: Vec<i64> = vec![0; prefixes.len()];
        for n in &self.g.nodes {
            let parts: Vec<&str> = self.g.names.str(n.name).split('.').collect();
            if parts.len() > 2 && parts[parts.len() - 2] == "backward" {
                let Some(num) = py_int(parts[parts.len() - 1]) else {
                    continue;
                };
                let prefix = parts[..parts.len() - 2].join(".");
                if let Some(&i) = pos.get(&prefix) {
                    if num > max[i] {
                        max[i] = num;
                    }
                }
            }
        }
        for (i, (prefix, suffixes)) in prefixes.iter().enumerate() {
            let Some(parent) = self.g.get(&format!("{prefix}.backward.{}", max[i])) else {
                continue;
            };
            for suffix in suffixes {
                let name = format!("{prefix}{suffix}");
                if self.g.get(&name).is_some() {
                    continue;
                }
                let interned = self.g.names.intern(&name);
                let id = self.g.add(interned, NodeOp::Module, Some(parent));
                self.g.nodes[id as usize].set_entry(d.entry_id(&name));
            }
        }
    }
}

fn upsert(
    list: &mut Vec<(NodeId, String)>,
    index: &mut HashMap<NodeId, usize>,
    id: NodeId,
    prefix: String,
    i: usize,
) {
    if let Some(slot) = list.iter_mut().find(|(n, _)| *n == id) {
        slot.1 = prefix;
    } else {
        list.push((id, prefix));
    }
    index.insert(id, i);
}

/// Start of a `\.parameters_grad(?:\.\d+)?$` suffix.
fn params_grad_suffix(name: &str) -> Option<usize> {
    if let Some(p) = name.strip_suffix(".parameters_grad") {
        return Some(p.len());
    }
    let (head, digits) = name.rsplit_once('.')?;
    if digits.is_empty() || !digits.chars().all(|c| c.is_ascii_digit()) {
        return None;
    }
    head.strip_suffix(".parameters_grad").map(|p| p.len())
}

/// The batch p2p info of a node (`op`, `peer`, `group_id` of each P2POp in output[0]).
pub fn batch_p2p_info(d: &RankDump, g: &Graph, id: NodeId) -> Vec<(Py, Py, Py)> {
    let n = g.node(id);
    let Some(e) = n.entry().and_then(|e| d.entries.get(e as usize)) else {
        return Vec::new();
    };
    let s = &d.store;
    let Some(out) = s.get(s.val(e.value), "output") else {
        return Vec::new();
    };
    let Some(first) = s.list(out).first() else {
        return Vec::new();
    };
    let mut res = Vec::new();
    for p in s.list(first) {
        if !matches!(p, Val::Obj { .. }) {
            continue;
        }
        let f = |k: &str| s.get(p, k).map(Py::from_val).unwrap_or(Py::None);
        res.push((f("op"), f("peer"), f("group_id")));
    }
    res
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The sizes the memory budget of issue #7 was met with (a graph node per construct.json
    /// key, a dump entry per dump.json key: hundreds of thousands of each on a large model).
    /// tests/web.rs checks the wasm32 sizes.
    #[test]
    #[cfg(target_pointer_width = "64")]
    fn node_and_entry_sizes() {
        assert_eq!(std::mem::size_of::<Node>(), 64);
        assert_eq!(std::mem::size_of::<crate::formats::dump::Entry>(), 16);
    }

    /// The index against a HashMap model: inserts, replacements, removals (backward shift
    /// across the table's wrap-around), renames, growth.
    #[test]
    fn node_index_behaves_like_a_map() {
        let mut nodes = Nodes::new();
        let mut names = GraphNames::default();
        let mut idx = NodeIndex::default();
        let mut model: HashMap<String, NodeId> = HashMap::default();
        let mut x: u64 = 0x2545_F491_4F6C_DD1D;
        let mut rnd = |m: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % m
        };
        for step in 0..20_000u32 {
            let name = format!("Module.m{}.forward", rnd(600));
            match rnd(4) {
                0 | 1 => {
                    nodes.push(Node::new(names.intern(&name), NodeOp::Module));
                    let id = nodes.len() as NodeId - 1;
                    assert_eq!(
                        idx.insert(&nodes, &names, id),
                        model.insert(name, id),
                        "step {step}"
                    );
                }
                2 => assert_eq!(
                    idx.remove(&nodes, &names, &name),
                    model.remove(&name),
                    "step {step}"
                ),
                _ => {
                    // Rename the node a name points to: remove, rename, insert.
                    if let Some(id) = idx.remove(&nodes, &names, &name) {
                        model.remove(&name);
                        let new = format!("{name}.r{step}");
                        nodes[id as usize].name = names.intern(&new);
                        assert_eq!(idx.insert(&nodes, &names, id), model.insert(new, id));
                    }
                }
            }
            assert_eq!(idx.len(), model.len());
            if step % 997 == 0 {
                for (k, v) in &model {
                    assert_eq!(idx.get(&nodes, &names, k), Some(*v), "step {step}: {k}");
                }
                let mut a: Vec<NodeId> = idx.ids().collect();
                let mut b: Vec<NodeId> = model.values().copied().collect();
                a.sort_unstable();
                b.sort_unstable();
                assert_eq!(a, b);
            }
        }
        assert_eq!(idx.get(&nodes, &names, "absent"), None);
        assert_eq!(NodeIndex::default().get(&nodes, &names, "x"), None);
    }
}
