//! A vector in fixed-size chunks, for the page's graph arenas.
//!
//! The page's wasm heap never shrinks and has no `mmap`: a large block it cannot place in a hole
//! left by earlier work grows the memory at its top. A large graph's node arena in one block
//! went on top of the two parsed folders, while more than that lay free in smaller holes. In
//! chunks of `1 << BITS` elements the arena fills those holes. Natively the graph keeps a plain
//! `Vec` (`graph::Nodes`): the chunk lookup costs a load per access for nothing there.
//!
//! The methods are `Vec`'s of the same names, as the graph code uses them.

use std::ops::{Index, IndexMut};

#[derive(Debug, Clone)]
pub struct ChunkVec<T, const BITS: u32> {
    /// Every chunk but the last is full (`1 << BITS` elements).
    chunks: Vec<Vec<T>>,
    len: usize,
}

impl<T, const BITS: u32> Default for ChunkVec<T, BITS> {
    fn default() -> Self {
        ChunkVec::new()
    }
}

impl<T, const BITS: u32> ChunkVec<T, BITS> {
    const CHUNK: usize = 1 << BITS;
    const MASK: usize = (1 << BITS) - 1;

    pub const fn new() -> Self {
        ChunkVec {
            chunks: Vec::new(),
            len: 0,
        }
    }

    #[inline]
    pub fn len(&self) -> usize {
        self.len
    }

    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn push(&mut self, x: T) {
        match self.chunks.last_mut() {
            Some(c) if c.len() < Self::CHUNK => {
                // A chunk shrunk or cloned to its length grows to a chunk, not by doubling.
                if c.len() == c.capacity() {
                    c.reserve_exact(Self::CHUNK - c.len());
                }
                c.push(x)
            }
            _ => {
                let mut c = Vec::with_capacity(Self::CHUNK);
                c.push(x);
                self.chunks.push(c);
            }
        }
        self.len += 1;
    }

    #[inline]
    pub fn get(&self, i: usize) -> Option<&T> {
        self.chunks.get(i >> BITS)?.get(i & Self::MASK)
    }

    #[inline]
    pub fn get_mut(&mut self, i: usize) -> Option<&mut T> {
        self.chunks.get_mut(i >> BITS)?.get_mut(i & Self::MASK)
    }

    /// In order; it knows its length (`collect` sizes its vector once).
    pub fn iter(&self) -> Iter<'_, T, BITS> {
        Iter {
            v: self,
            range: 0..self.len,
        }
    }

    pub fn iter_mut(&mut self) -> impl DoubleEndedIterator<Item = &mut T> {
        self.chunks.iter_mut().flatten()
    }

    /// Room for `more` elements in the chunk list (the chunks themselves come as they fill).
    pub fn reserve_exact(&mut self, more: usize) {
        let want = (self.len + more).div_ceil(Self::CHUNK);
        self.chunks
            .reserve_exact(want.saturating_sub(self.chunks.len()));
    }

    /// Gives back the last chunk's room and the chunk list's.
    pub fn shrink_to_fit(&mut self) {
        if let Some(c) = self.chunks.last_mut() {
            c.shrink_to_fit();
        }
        self.chunks.shrink_to_fit();
    }
}

impl<T, const BITS: u32> Index<usize> for ChunkVec<T, BITS> {
    type Output = T;
    #[inline]
    fn index(&self, i: usize) -> &T {
        &self.chunks[i >> BITS][i & Self::MASK]
    }
}

impl<T, const BITS: u32> IndexMut<usize> for ChunkVec<T, BITS> {
    #[inline]
    fn index_mut(&mut self, i: usize) -> &mut T {
        &mut self.chunks[i >> BITS][i & Self::MASK]
    }
}

/// [`ChunkVec::iter`].
pub struct Iter<'a, T, const BITS: u32> {
    v: &'a ChunkVec<T, BITS>,
    range: std::ops::Range<usize>,
}

impl<'a, T, const BITS: u32> Iterator for Iter<'a, T, BITS> {
    type Item = &'a T;
    #[inline]
    fn next(&mut self) -> Option<&'a T> {
        self.range.next().and_then(|i| self.v.get(i))
    }
    #[inline]
    fn size_hint(&self) -> (usize, Option<usize>) {
        self.range.size_hint()
    }
}

impl<T, const BITS: u32> DoubleEndedIterator for Iter<'_, T, BITS> {
    #[inline]
    fn next_back(&mut self) -> Option<Self::Item> {
        self.range.next_back().and_then(|i| self.v.get(i))
    }
}

impl<T, const BITS: u32> ExactSizeIterator for Iter<'_, T, BITS> {}

impl<'a, T, const BITS: u32> IntoIterator for &'a ChunkVec<T, BITS> {
    type Item = &'a T;
    type IntoIter = Iter<'a, T, BITS>;
    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

impl<'a, T, const BITS: u32> IntoIterator for &'a mut ChunkVec<T, BITS> {
    type Item = &'a mut T;
    type IntoIter = std::iter::Flatten<std::slice::IterMut<'a, Vec<T>>>;
    fn into_iter(self) -> Self::IntoIter {
        self.chunks.iter_mut().flatten()
    }
}

#[cfg(test)]
mod tests {
    use super::ChunkVec;

    /// Against a `Vec` model, across chunk boundaries: push, index, get, iterate both ways,
    /// mutate, reserve, shrink, clone and push on.
    #[test]
    fn behaves_like_a_vec() {
        let mut v: ChunkVec<u32, 2> = ChunkVec::new();
        let mut model: Vec<u32> = Vec::new();
        assert!(v.is_empty() && v.get(0).is_none());
        v.reserve_exact(5);
        for i in 0..23u32 {
            v.push(i * 3);
            model.push(i * 3);
            assert_eq!(v.len(), model.len());
        }
        for (i, x) in model.iter().enumerate() {
            assert_eq!(v[i], *x);
            assert_eq!(v.get(i), Some(x));
        }
        assert!(v.get(23).is_none() && v.get(1 << 20).is_none());
        assert!(v.iter().eq(model.iter()));
        assert!(v.iter().rev().eq(model.iter().rev()));
        for x in &mut v {
            *x += 1;
        }
        for x in &mut model {
            *x += 1;
        }
        v[5] = 99;
        model[5] = 99;
        if let Some(x) = v.get_mut(22) {
            *x = 7;
        }
        model[22] = 7;
        assert!((&v).into_iter().eq(model.iter()));
        v.shrink_to_fit();
        let mut w = v.clone();
        for i in 0..6 {
            w.push(i);
            model.push(i);
        }
        assert!(w.iter().eq(model.iter()));
        assert_eq!(w.len(), 29);
        assert_eq!(w.iter().len(), 29);
        assert_eq!(w.iter().rev().skip(3).len(), 26);
        // No chunk grows past a chunk, after a shrink or a clone either.
        let mut u = v.clone();
        u.push(1);
        for c in w.chunks.iter().chain(&u.chunks) {
            assert!(
                c.len() <= 4 && c.capacity() <= 4,
                "{} / {}",
                c.len(),
                c.capacity()
            );
        }
        assert!(v.iter().eq(model[..23].iter()));
    }

    #[test]
    #[should_panic]
    fn index_past_the_end_panics_like_a_vec() {
        let mut v: ChunkVec<u8, 3> = ChunkVec::new();
        v.push(1);
        let _ = v[1];
    }
}
