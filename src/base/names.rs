//! Interned names: each distinct name stored once in one buffer, known by a `u32` id.
//!
//! construct.json names every node and its parent (a parent name recurs for each of its
//! children); keeping them as owned strings in a list and again as map keys cost several
//! copies per name. Here a name is its bytes once, an end offset and a slot in an
//! open-addressing table of ids.

use std::hash::BuildHasher;

/// A name's id in its [`Names`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NameId(pub u32);

/// The set of distinct names, in first-seen order.
#[derive(Debug, Clone, Default)]
pub struct Names {
    text: String,
    /// End offset in `text` of each name (a name starts where the previous ends).
    ends: Vec<u32>,
    /// Per slot, the low 32 bits of its name's hash above `id + 1`; 0 for empty. A power of two
    /// long, at most three quarters full. A probe reads slots only (the hash in the slot spares
    /// the text comparisons and a read elsewhere per probe), and growing needs no text.
    slots: Vec<u64>,
    hasher: foldhash::fast::RandomState,
}

impl Names {
    pub fn len(&self) -> usize {
        self.ends.len()
    }
    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    pub fn str(&self, id: NameId) -> &str {
        let i = id.0 as usize;
        let end = self.ends.get(i).copied().unwrap_or(0) as usize;
        let start = if i == 0 {
            0
        } else {
            self.ends.get(i - 1).copied().unwrap_or(0) as usize
        };
        self.text.get(start..end).unwrap_or("")
    }

    fn hash(&self, s: &str) -> u64 {
        self.hasher.hash_one(s)
    }

    /// The slot of `s`: where its id is, or the empty slot where it would go.
    fn slot(&self, s: &str, h: u64) -> usize {
        let mask = self.slots.len() - 1;
        let mut i = (h as usize) & mask;
        let tag = h << 32;
        loop {
            let v = self.slots[i];
            if v == 0 {
                return i;
            }
            if v & !0xffff_ffff == tag && self.str(Self::id_of(v)) == s {
                return i;
            }
            i = (i + 1) & mask;
        }
    }

    /// The id in an occupied slot.
    fn id_of(slot: u64) -> NameId {
        NameId((slot as u32).wrapping_sub(1))
    }

    pub fn get(&self, s: &str) -> Option<NameId> {
        if self.slots.is_empty() {
            return None;
        }
        match self.slots[self.slot(s, self.hash(s))] {
            0 => None,
            v => Some(Self::id_of(v)),
        }
    }

    /// The id of `s`, added if new. None when the buffer would pass 4 GiB (ids and offsets
    /// are 32-bit).
    pub fn intern(&mut self, s: &str) -> Option<NameId> {
        if (self.ends.len() + 1) * 4 > self.slots.len() * 3 {
            self.grow();
        }
        let h = self.hash(s);
        let at = self.slot(s, h);
        if self.slots[at] != 0 {
            return Some(Self::id_of(self.slots[at]));
        }
        let end = u32::try_from(self.text.len() + s.len()).ok()?;
        let id = u32::try_from(self.ends.len())
            .ok()
            .filter(|&i| i < u32::MAX)?;
        self.text.push_str(s);
        self.ends.push(end);
        self.slots[at] = (h << 32) | (id as u64 + 1);
        Some(NameId(id))
    }

    fn grow(&mut self) {
        let n = (self.slots.len() * 2).max(64);
        // Zeros written, not a zeroed allocation: a fresh zeroed block is mapped to the shared
        // zero page, so each of its pages faulted twice (read by a probe, then copied on the
        // first write, with a TLB flush on every other core): 1.2 % of the scale pair's CPU.
        // `black_box` keeps the compiler from turning the fill back into a zeroed allocation.
        let mut slots = Vec::with_capacity(n);
        slots.resize(n, std::hint::black_box(0u64));
        let mask = n - 1;
        for &v in self.slots.iter().filter(|&&v| v != 0) {
            // The hash's low 32 bits (kept in the slot) are all the table uses below 2^32 slots.
            let mut i = (v >> 32) as usize & mask;
            while slots[i] != 0 {
                i = (i + 1) & mask;
            }
            slots[i] = v;
        }
        self.slots = slots;
    }

    /// Gives back spare capacity (after a parse that reserved generously).
    pub fn shrink_to_fit(&mut self) {
        self.text.shrink_to_fit();
        self.ends.shrink_to_fit();
    }
}

/// A map from names to values of `V`, the names interned ([`Names`]): stack.json's tens of
/// thousands of API names held once each, without an owned string and a hash-map slot per name.
/// Inserting a name again replaces its value (as a dict does).
#[derive(Debug, Clone)]
pub struct NameMap<V> {
    names: Names,
    vals: Vec<V>,
}

impl<V> Default for NameMap<V> {
    fn default() -> Self {
        NameMap {
            names: Names::default(),
            vals: Vec::new(),
        }
    }
}

impl<V: Copy> NameMap<V> {
    pub fn len(&self) -> usize {
        self.vals.len()
    }
    pub fn is_empty(&self) -> bool {
        self.vals.is_empty()
    }
    pub fn get(&self, name: &str) -> Option<V> {
        self.names
            .get(name)
            .and_then(|id| self.vals.get(id.0 as usize).copied())
    }
    /// Sets the value of `name`; false when the names would pass 4 GiB (nothing is set).
    pub fn insert(&mut self, name: &str, v: V) -> bool {
        let Some(id) = self.names.intern(name) else {
            return false;
        };
        match self.vals.get_mut(id.0 as usize) {
            Some(slot) => *slot = v,
            None => self.vals.push(v),
        }
        true
    }
    /// The value of the `i`-th name in first-insertion order ([`NameMap::iter`]'s position).
    pub fn value(&self, i: usize) -> Option<V> {
        self.vals.get(i).copied()
    }
    /// (name, value) in first-insertion order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, V)> + '_ {
        self.vals
            .iter()
            .enumerate()
            .map(|(i, v)| (self.names.str(NameId(i as u32)), *v))
    }
    pub fn shrink_to_fit(&mut self) {
        self.names.shrink_to_fit();
        self.vals.shrink_to_fit();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn name_map_replaces_and_keeps_order() {
        let mut m: NameMap<u32> = NameMap::default();
        assert!(m.is_empty() && m.get("a").is_none());
        for (i, k) in ["a", "b", "a", "", "c", "b"].iter().enumerate() {
            assert!(m.insert(k, i as u32));
        }
        assert_eq!(m.len(), 4);
        assert_eq!(m.get("a"), Some(2));
        assert_eq!(m.get("b"), Some(5));
        assert_eq!(m.get(""), Some(3));
        assert_eq!(m.get("d"), None);
        let all: Vec<(&str, u32)> = m.iter().collect();
        assert_eq!(all, vec![("a", 2), ("b", 5), ("", 3), ("c", 4)]);
    }

    #[test]
    fn interns_once_and_finds() {
        let mut n = Names::default();
        let mut ids = Vec::new();
        for i in 0..10_000 {
            ids.push(n.intern(&format!("Module.layers.{i}.mlp")).unwrap());
        }
        assert_eq!(n.intern("Module.layers.7.mlp"), Some(ids[7]));
        assert_eq!(n.intern(""), Some(NameId(10_000)));
        assert_eq!(n.len(), 10_001);
        for (i, id) in ids.iter().enumerate() {
            assert_eq!(n.str(*id), format!("Module.layers.{i}.mlp"));
            assert_eq!(n.get(&format!("Module.layers.{i}.mlp")), Some(*id));
        }
        assert_eq!(n.get(""), Some(NameId(10_000)));
        assert_eq!(n.str(NameId(10_000)), "");
        assert_eq!(n.get("Module.layers.10000.mlp"), None);
        assert_eq!(Names::default().get("x"), None);
        assert_eq!(n.str(NameId(99_999)), "");
    }
}
