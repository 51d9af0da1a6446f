//! A `view::graph_columns` buffer read back by its documented layout, for the native test
//! (`tests/it/columns.rs`) and the wasm one (`tests/web.rs`, the page's `columns`). No SQLite here:
//! `tests/it/common.rs` needs rusqlite, which does not build for wasm32.

use probelens::view::{COLUMNS_MAGIC, COLUMNS_VERSION};

/// A `graph_columns` buffer read back by its documented layout.
pub struct Decoded {
    pub levels: Vec<String>,
    pub precision: Vec<f64>,
    pub parent: Vec<i32>,
    pub matched: Vec<i32>,
    pub micro_step: Vec<i32>,
    pub subtree_end: Vec<i32>,
    pub node_type: Vec<u8>,
    pub overflow: Vec<u8>,
    pub names: Vec<String>,
}

pub fn decode(b: &[u8]) -> Decoded {
    let u32_at = |at: usize| u32::from_le_bytes(b[at..at + 4].try_into().unwrap()) as usize;
    assert_eq!(b[0..4], COLUMNS_MAGIC);
    assert_eq!(u32_at(4), COLUMNS_VERSION as usize);
    let (n, t) = (u32_at(8), u32_at(12));
    let levels = std::str::from_utf8(&b[16..16 + t]).unwrap();
    let head = (16 + t).div_ceil(8) * 8;
    assert!(b[16 + t..head].iter().all(|&x| x == 0), "padding");
    assert_eq!(head % 8, 0, "the f64 section is aligned");
    let section = |k: usize, width: usize| &b[head + k * n..head + (k + width) * n];
    let i32s = |k: usize| -> Vec<i32> {
        section(k, 4)
            .chunks_exact(4)
            .map(|c| i32::from_le_bytes(c.try_into().unwrap()))
            .collect()
    };
    let names = std::str::from_utf8(&b[head + 26 * n..]).unwrap();
    Decoded {
        levels: levels.split('\0').map(str::to_string).collect(),
        precision: section(0, 8)
            .chunks_exact(8)
            .map(|c| f64::from_le_bytes(c.try_into().unwrap()))
            .collect(),
        parent: i32s(8),
        matched: i32s(12),
        micro_step: i32s(16),
        subtree_end: i32s(20),
        node_type: section(24, 1).to_vec(),
        overflow: section(25, 1).to_vec(),
        names: if n == 0 {
            Vec::new()
        } else {
            names.split('\0').map(str::to_string).collect()
        },
    }
}
