//! The input files, read from bytes: the JSON reader and Python's text forms, one rank folder's
//! dump model (`dump.json`, `construct.json`, `stack.json`) with its overflow scenes, and dumped
//! tensors (`.pt`, `.npy`).

pub mod dump;
pub mod json;
pub mod keys;
pub mod overflow;
pub mod pyfmt;
pub mod tensor;
