//! NumPy `.npy` files (format versions 1 to 3).

use super::{err, gather, le, strided_index, SType, Tensor};
use crate::base::error::Result;

/// Reads a NumPy `.npy` file (format versions 1 to 3).
pub fn read_npy(file: &str, bytes: &[u8]) -> Result<Tensor> {
    let bad = |what: &str| err(file, format!("not a NumPy .npy file: {what}"));
    if !bytes.starts_with(b"\x93NUMPY") || bytes.len() < 10 {
        return Err(bad("no \\x93NUMPY magic"));
    }
    let major = bytes[6];
    let (hlen, start): (usize, usize) = match major {
        1 => (le(bytes, 8, 2).unwrap_or(0) as usize, 10),
        2 | 3 => (
            le(bytes, 8, 4).ok_or_else(|| bad("truncated header"))? as usize,
            12,
        ),
        v => return Err(bad(&format!("format version {v} is not supported"))),
    };
    let header = start
        .checked_add(hlen)
        .and_then(|e| bytes.get(start..e))
        .ok_or_else(|| bad("truncated header"))?;
    let header = std::str::from_utf8(header).map_err(|_| bad("header is not text"))?;
    let descr = dict_value(header, "descr").ok_or_else(|| bad("no 'descr' in the header"))?;
    let descr = descr.trim_matches(|c| c == '\'' || c == '"');
    let fortran = dict_value(header, "fortran_order")
        .ok_or_else(|| bad("no 'fortran_order' in the header"))?
        == "True";
    let shape_text = dict_value(header, "shape").ok_or_else(|| bad("no 'shape' in the header"))?;
    let shape: Vec<usize> = shape_text
        .trim_matches(|c| c == '(' || c == ')')
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| s.parse::<usize>())
        .collect::<std::result::Result<_, _>>()
        .map_err(|_| bad(&format!("shape {shape_text} is not a tuple of ints")))?;
    let (order, code) = descr.split_at(descr.len().min(1));
    let big_endian = match order {
        "<" | "|" | "=" => false,
        ">" => true,
        _ => return Err(bad(&format!("dtype {descr} is not supported"))),
    };
    let stype = match code {
        "b1" => SType::Bool,
        "u1" => SType::U8,
        "i1" => SType::I8,
        "i2" => SType::I16,
        "i4" => SType::I32,
        "i8" => SType::I64,
        "u2" => SType::U16,
        "u4" => SType::U32,
        "u8" => SType::U64,
        "f2" => SType::F16,
        "f4" => SType::F32,
        "f8" => SType::F64,
        _ => {
            return Err(bad(&format!(
                "dtype {descr} is not supported (bool, int, uint and float only)"
            )))
        }
    };
    let data = bytes.get(start + hlen..).unwrap_or(&[]);
    let storage_len = data.len() / stype.size();
    // C order: last dimension fastest; Fortran order: first dimension fastest.
    let mut stride = vec![0usize; shape.len()];
    let mut acc = 1usize;
    let dims: Vec<usize> = if fortran {
        (0..shape.len()).collect()
    } else {
        (0..shape.len()).rev().collect()
    };
    for d in dims {
        stride[d] = acc;
        acc = acc.saturating_mul(shape[d].max(1));
    }
    let index = strided_index(file, &shape, &stride, 0, storage_len)?;
    let data = gather(file, stype, data, big_endian, &index)?;
    Ok(Tensor {
        dtype: stype.dtype(),
        shape,
        data,
    })
}

/// The text of a value in a Python dict literal (`'shape': (2, 3), ...`).
pub(super) fn dict_value<'h>(header: &'h str, key: &str) -> Option<&'h str> {
    let at = header
        .find(&format!("'{key}'"))
        .or_else(|| header.find(&format!("\"{key}\"")))?;
    let rest = header.get(at + key.len() + 2..)?.trim_start();
    let rest = rest.strip_prefix(':')?.trim_start();
    if rest.starts_with('(') {
        let end = rest.find(')')?;
        return rest.get(..=end);
    }
    let end = rest.find([',', '}']).unwrap_or(rest.len());
    Some(rest[..end].trim())
}
