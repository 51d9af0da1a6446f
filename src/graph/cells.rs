//! The compare's columns as an item holds them: [`ItemResult`] (the column keys of one kind of
//! compare and their values) and its [`Cell`]s. The compare makes them and the items format them.

use crate::formats::json::KeyId;
use crate::graph::items::Py;

/// Compare columns written into one item: the column keys (one fixed list per kind of compare)
/// and their values. Results hold millions of cells, so a cell is 16 bytes and becomes a
/// [`Py`] only when applied to an item.
#[derive(Debug, Clone, PartialEq)]
pub struct ItemResult {
    pub keys: &'static [KeyId],
    pub cells: Box<[Cell]>,
}

impl ItemResult {
    /// (column key, value) in msprobe's column order.
    pub fn iter(&self) -> impl Iterator<Item = (KeyId, Py)> + '_ {
        self.keys
            .iter()
            .copied()
            .zip(self.cells.iter().map(Cell::to_py))
    }
    pub fn len(&self) -> usize {
        self.cells.len()
    }
    pub fn is_empty(&self) -> bool {
        self.cells.is_empty()
    }
}

/// One compare column's value, compact (see [`ItemResult`]).
#[derive(Debug, Clone, PartialEq)]
pub enum Cell {
    None,
    F(f64),
    I(i64),
    B(bool),
    /// A text of the code's own ("N/A", "pass", an error-message list).
    Lit(&'static &'static str),
    /// A relative error: `repr(x)` and '%'.
    Pct(f64),
    S(Box<String>),
    V(Box<crate::formats::json::Val>),
}

/// The literal texts compare writes into columns (a [`Cell::Lit`] points into this table).
static LITERALS: [&str; 14] = [
    "N/A",
    "Nan",
    " ",
    "None",
    "pass",
    "warning",
    "error",
    "[]",
    "unsupported",
    "-1",
    "inf",
    "-inf",
    "nan",
    "",
];

impl Cell {
    pub fn from_py(p: Py) -> Cell {
        match p {
            Py::None => Cell::None,
            Py::F(f) => Cell::F(f),
            Py::I(i) => Cell::I(i),
            Py::B(b) => Cell::B(b),
            Py::V(v) => Cell::V(Box::new(v)),
            Py::Pct(f) => Cell::Pct(f),
            Py::Lit(s) => match LITERALS.iter().find(|l| **l == s) {
                Some(l) => Cell::Lit(l),
                None => Cell::S(Box::new(s.to_string())),
            },
            Py::S(s) => {
                // "12.5%" is kept as its number when that gives the same text back.
                let pct = s.strip_suffix('%').and_then(|t| {
                    t.parse::<f64>()
                        .ok()
                        .filter(|f| crate::formats::pyfmt::float_repr(*f) == t)
                });
                match pct {
                    Some(f) => Cell::Pct(f),
                    None => Cell::S(Box::new(s)),
                }
            }
        }
    }

    pub fn to_py(&self) -> Py {
        match self {
            Cell::None => Py::None,
            Cell::F(f) => Py::F(*f),
            Cell::I(i) => Py::I(*i),
            Cell::B(b) => Py::B(*b),
            Cell::Lit(s) => Py::Lit(s),
            Cell::Pct(f) => {
                let mut t = String::with_capacity(24);
                crate::formats::pyfmt::pct_into(*f, &mut t);
                Py::S(t)
            }
            Cell::S(s) => Py::S(String::clone(s)),
            Cell::V(v) => Py::V(**v),
        }
    }
}
