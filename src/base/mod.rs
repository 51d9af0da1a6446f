//! What every stage uses: the one error type, interned names, the chunked vector, and what the
//! host hands the core (the hash map type, [`Join`]).

pub mod chunkvec;
pub mod error;
pub mod names;

use error::Result;
use std::borrow::Cow;

/// A read-only tree of files, paths `/`-separated and relative to the dump root ("" = root).
pub trait Files {
    /// Entries of a directory: (name, is_dir).
    fn list(&self, dir: &str) -> Result<Vec<(String, bool)>>;
    /// A file's bytes.
    fn read(&self, path: &str) -> Result<Cow<'_, [u8]>>;
    /// A file's size, with the errors `read` would give for a missing or too large file.
    fn size(&self, path: &str) -> Result<u64> {
        self.read(path).map(|b| b.len() as u64)
    }
    /// A file's bytes in order, in chunks of any size (the dump.json parser never needs the
    /// whole file). Stops at the first error of `sink`.
    fn read_chunks(&self, path: &str, sink: &mut dyn FnMut(&[u8]) -> Result<()>) -> Result<()> {
        sink(&self.read(path)?)
    }
    /// How to name a path in messages (e.g. with the root folder in front).
    fn display(&self, path: &str) -> String {
        path.to_string()
    }
}

/// FNV-1a, 64 bits: a hash of bytes that is the same in every process and on every machine (the
/// core's `HashMap` is seeded per process).
pub fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// `dir/name` (`name` alone in the root, `""`).
pub fn join_path(dir: &str, name: &str) -> String {
    if dir.is_empty() {
        name.to_string()
    } else {
        format!("{dir}/{name}")
    }
}

/// The core's hash map: foldhash (fast, seeded per process, so crafted names cannot force collisions).
pub type HashMap<K, V> = std::collections::HashMap<K, V, foldhash::fast::RandomState>;

/// How the host runs two independent pieces of work: on two threads (the CLI passes one) or,
/// without one, one after the other (the page). The core itself starts no threads; it only says
/// which of its steps are independent (the two sides' graphs, the two sides' layer-mapping
/// items, the two halves of the matched pairs' rows).
pub type Join = fn(&mut (dyn FnMut() + Send), &mut (dyn FnMut() + Send));

/// Runs `a` and `b` through `join` (or one after the other) and returns both results.
pub(crate) fn join2<A: Send, B: Send>(
    join: Option<Join>,
    a: impl FnOnce() -> A + Send,
    b: impl FnOnce() -> B + Send,
) -> (A, B) {
    let (mut ra, mut rb) = (None, None);
    let (mut fa, mut fb) = (Some(a), Some(b));
    let mut ca = || {
        if let Some(f) = fa.take() {
            ra = Some(f());
        }
    };
    let mut cb = || {
        if let Some(f) = fb.take() {
            rb = Some(f());
        }
    };
    if let Some(j) = join {
        j(&mut ca, &mut cb);
    }
    // Whatever the host did not run runs here (each closure runs once).
    ca();
    cb();
    match (ra, rb) {
        (Some(a), Some(b)) => (a, b),
        _ => unreachable!("both closures ran just above"),
    }
}

/// `hay.contains(needle)` for the short names the compare path tests per item. On wasm32, std's
/// substring search sets up a two-way searcher per call (x86-64 has a SIMD path), which cost
/// more than these scans of a few dozen bytes.
#[inline]
pub(crate) fn has(hay: &str, needle: &str) -> bool {
    let (h, n) = (hay.as_bytes(), needle.as_bytes());
    let Some((&first, _)) = n.split_first() else {
        return true;
    };
    h.len() >= n.len() && (0..=h.len() - n.len()).any(|i| h[i] == first && h[i..].starts_with(n))
}

/// The tests' random numbers: xorshift64 from `seed` (reproducible, no dependency).
#[cfg(test)]
pub(crate) fn test_rng(mut seed: u64) -> impl FnMut() -> u64 {
    move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    }
}

#[cfg(test)]
mod has_tests {
    #[test]
    fn has_is_contains() {
        let cases = [
            "",
            "a",
            ".output.",
            "x.output.y",
            "x.output",
            "output.",
            "..output..",
            "qkv_proj",
            "éqkvé",
        ];
        for h in cases {
            for n in ["", ".output.", "qkv", "output", "é", "x"] {
                assert_eq!(super::has(h, n), h.contains(n), "{h:?} {n:?}");
            }
        }
    }
}
