//! What every stage uses: the one error type, interned names, the chunked vector, and what the
//! host hands the core (the hash map type, [`Join`]).

pub mod chunkvec;
pub mod error;
pub mod names;

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
