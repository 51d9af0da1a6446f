//! Dumped tensors: PyTorch `.pt` files (the zip archive `torch.save` writes) and NumPy `.npy`
//! files, read from bytes into what msprobe's `read_real_data` hands to its metrics: a NumPy
//! array, with bfloat16 and float8 already widened to float32.
//!
//! A `.pt` file is a zip archive of stored (uncompressed) entries: `<name>/data.pkl`, a pickle of
//! `torch._utils._rebuild_tensor_v2(storage, offset, size, stride, ...)` whose storage is a
//! persistent id `('storage', torch.FloatStorage, key, location, numel)`, and `<name>/data/<key>`,
//! the raw storage bytes. Only that much of pickle is implemented (a small VM), and only what
//! the tensor needs is read: dtype, shape, strides, storage offset and the elements they reach.
//!
//! Nothing here does IO, and no input makes it panic: every failure is an [`Error`] naming the
//! file and what was expected.
//!
//! This file holds the tensor model and the storage element types both formats read; `zip.rs`
//! the archive, `pickle.rs` the VM and [`read_pt`], `npy.rs` [`read_npy`].

use crate::base::error::{Error, Result};

mod npy;
mod pickle;
mod zip;

pub use npy::read_npy;
pub use pickle::read_pt;

/// The NumPy dtype of a tensor as msprobe's metrics see it (bfloat16 and float8 are read as
/// float32, as `read_pt_data` converts them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DType {
    Bool,
    U8,
    I8,
    I16,
    I32,
    I64,
    U16,
    U32,
    U64,
    F16,
    F32,
    F64,
}

impl DType {
    pub fn is_float(self) -> bool {
        matches!(self, DType::F16 | DType::F32 | DType::F64)
    }
    /// NumPy's name of the dtype.
    pub fn name(self) -> &'static str {
        match self {
            DType::Bool => "bool",
            DType::U8 => "uint8",
            DType::I8 => "int8",
            DType::I16 => "int16",
            DType::I32 => "int32",
            DType::I64 => "int64",
            DType::U16 => "uint16",
            DType::U32 => "uint32",
            DType::U64 => "uint64",
            DType::F16 => "float16",
            DType::F32 => "float32",
            DType::F64 => "float64",
        }
    }
}

/// Element values in C order. float16 values are held exactly as f32.
#[derive(Debug, Clone, PartialEq)]
pub enum Data {
    Bool(Vec<bool>),
    Int(Vec<i64>),
    F32(Vec<f32>),
    F64(Vec<f64>),
}

/// A dense tensor in C order.
#[derive(Debug, Clone, PartialEq)]
pub struct Tensor {
    pub dtype: DType,
    pub shape: Vec<usize>,
    pub data: Data,
}

impl Tensor {
    pub fn numel(&self) -> usize {
        match &self.data {
            Data::Bool(v) => v.len(),
            Data::Int(v) => v.len(),
            Data::F32(v) => v.len(),
            Data::F64(v) => v.len(),
        }
    }
    /// `np.squeeze`: the shape without its size-1 dimensions.
    pub fn squeeze(mut self) -> Tensor {
        self.shape.retain(|d| *d != 1);
        self
    }
    /// Element `i` as `astype(float)` gives it.
    pub fn f64_at(&self, i: usize) -> f64 {
        match &self.data {
            Data::Bool(v) => v.get(i).map_or(f64::NAN, |b| *b as u8 as f64),
            Data::Int(v) => v.get(i).map_or(f64::NAN, |x| *x as f64),
            Data::F32(v) => v.get(i).map_or(f64::NAN, |x| *x as f64),
            Data::F64(v) => v.get(i).copied().unwrap_or(f64::NAN),
        }
    }
    /// All elements as `astype(float)` gives them.
    pub fn to_f64(&self) -> Vec<f64> {
        match &self.data {
            Data::Bool(v) => v.iter().map(|b| *b as u8 as f64).collect(),
            Data::Int(v) => v.iter().map(|x| *x as f64).collect(),
            Data::F32(v) => v.iter().map(|x| *x as f64).collect(),
            Data::F64(v) => v.clone(),
        }
    }
}

/// Reads a dumped tensor file by its name: `.npy` as NumPy, anything else as a `torch.save` file
/// (msprobe names PyTorch tensors `*.pt`). The content decides when the name does not.
pub fn read_tensor(file: &str, bytes: &[u8]) -> Result<Tensor> {
    if bytes.starts_with(b"\x93NUMPY") {
        read_npy(file, bytes)
    } else if bytes.starts_with(b"PK") || !file.ends_with(".npy") {
        read_pt(file, bytes)
    } else {
        read_npy(file, bytes)
    }
}

fn err(file: &str, msg: impl Into<String>) -> Error {
    Error::input(file, msg.into())
}

// ---------------------------------------------------------------------------------------------
// Little-endian helpers (bounds-checked).

fn le(b: &[u8], at: usize, n: usize) -> Option<u64> {
    let s = b.get(at..at.checked_add(n)?)?;
    let mut v = 0u64;
    for (i, x) in s.iter().enumerate() {
        v |= (*x as u64) << (8 * i);
    }
    Some(v)
}

// ---------------------------------------------------------------------------------------------
// Storage element types.

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SType {
    Bool,
    U8,
    I8,
    I16,
    I32,
    I64,
    U16,
    U32,
    U64,
    F16,
    BF16,
    F32,
    F64,
    F8E4M3Fn,
    F8E5M2,
    F8E4M3Fnuz,
    F8E5M2Fnuz,
}

impl SType {
    /// From a legacy storage class name (`FloatStorage`) or a dtype name (`float32`).
    fn parse(name: &str) -> Option<SType> {
        let n = name.strip_suffix("Storage").unwrap_or(name);
        Some(match n {
            "Bool" | "bool" => SType::Bool,
            "Byte" | "uint8" => SType::U8,
            "Char" | "int8" => SType::I8,
            "Short" | "int16" => SType::I16,
            "Int" | "int32" => SType::I32,
            "Long" | "int64" => SType::I64,
            "UInt16" | "uint16" => SType::U16,
            "UInt32" | "uint32" => SType::U32,
            "UInt64" | "uint64" => SType::U64,
            "Half" | "float16" => SType::F16,
            "BFloat16" | "bfloat16" => SType::BF16,
            "Float" | "float32" => SType::F32,
            "Double" | "float64" => SType::F64,
            "Float8_e4m3fn" | "float8_e4m3fn" => SType::F8E4M3Fn,
            "Float8_e5m2" | "float8_e5m2" => SType::F8E5M2,
            "Float8_e4m3fnuz" | "float8_e4m3fnuz" => SType::F8E4M3Fnuz,
            "Float8_e5m2fnuz" | "float8_e5m2fnuz" => SType::F8E5M2Fnuz,
            _ => return None,
        })
    }
    fn size(self) -> usize {
        match self {
            SType::Bool
            | SType::U8
            | SType::I8
            | SType::F8E4M3Fn
            | SType::F8E5M2
            | SType::F8E4M3Fnuz
            | SType::F8E5M2Fnuz => 1,
            SType::I16 | SType::U16 | SType::F16 | SType::BF16 => 2,
            SType::I32 | SType::U32 | SType::F32 => 4,
            SType::I64 | SType::U64 | SType::F64 => 8,
        }
    }
    /// The NumPy dtype after msprobe's conversion.
    fn dtype(self) -> DType {
        match self {
            SType::Bool => DType::Bool,
            SType::U8 => DType::U8,
            SType::I8 => DType::I8,
            SType::I16 => DType::I16,
            SType::I32 => DType::I32,
            SType::I64 => DType::I64,
            SType::U16 => DType::U16,
            SType::U32 => DType::U32,
            SType::U64 => DType::U64,
            SType::F16 => DType::F16,
            SType::F64 => DType::F64,
            SType::BF16
            | SType::F32
            | SType::F8E4M3Fn
            | SType::F8E5M2
            | SType::F8E4M3Fnuz
            | SType::F8E5M2Fnuz => DType::F32,
        }
    }
}

/// IEEE half to single (exact).
pub fn f16_to_f32(h: u16) -> f32 {
    let sign = ((h >> 15) as u32) << 31;
    let exp = ((h >> 10) & 0x1f) as u32;
    let man = (h & 0x3ff) as u32;
    let bits = if exp == 0 {
        if man == 0 {
            sign
        } else {
            // Subnormal: value = man * 2^-24.
            let v = man as f32 * f32::from_bits(0x3380_0000); // 2^-24
            return if sign != 0 { -v } else { v };
        }
    } else if exp == 0x1f {
        sign | 0x7f80_0000 | (man << 13)
    } else {
        sign | ((exp + 112) << 23) | (man << 13)
    };
    f32::from_bits(bits)
}

/// Single to IEEE half, rounding to nearest even (NumPy's `npy_float_to_half`).
pub fn f32_to_f16(f: f32) -> u16 {
    let x = f.to_bits();
    let sign = ((x >> 16) & 0x8000) as u16;
    let exp = ((x >> 23) & 0xff) as i32;
    let man = x & 0x7f_ffff;
    if exp == 0xff {
        return if man != 0 {
            sign | 0x7e00 | (man >> 13) as u16
        } else {
            sign | 0x7c00
        };
    }
    let e = exp - 127 + 15;
    if e >= 0x1f {
        return sign | 0x7c00;
    }
    if e <= 0 {
        if e < -10 {
            return sign;
        }
        // Subnormal half: shift the full significand and round to nearest even.
        let m = man | 0x80_0000;
        let shift = (14 - e) as u32;
        let mut h = m >> shift;
        let rem = m & ((1 << shift) - 1);
        let half = 1 << (shift - 1);
        if rem > half || (rem == half && (h & 1) == 1) {
            h += 1;
        }
        return sign | h as u16;
    }
    let mut h = ((e as u32) << 10) | (man >> 13);
    let rem = man & 0x1fff;
    if rem > 0x1000 || (rem == 0x1000 && (h & 1) == 1) {
        h += 1; // may carry into the exponent, up to infinity: that is correct rounding
    }
    sign | h as u16
}

fn f8_to_f32(b: u8, exp_bits: u32, bias: i32, fnuz: bool, ieee_special: bool) -> f32 {
    let man_bits = 7 - exp_bits;
    let neg = b & 0x80 != 0;
    let exp = ((b >> man_bits) as u32) & ((1 << exp_bits) - 1);
    let man = (b as u32) & ((1 << man_bits) - 1);
    if fnuz && b == 0x80 {
        return f32::NAN;
    }
    if ieee_special && exp == (1 << exp_bits) - 1 {
        return if man == 0 {
            if neg {
                f32::NEG_INFINITY
            } else {
                f32::INFINITY
            }
        } else {
            f32::NAN
        };
    }
    if !ieee_special && !fnuz && exp == (1 << exp_bits) - 1 && man == (1 << man_bits) - 1 {
        return f32::NAN; // e4m3fn: S.1111.111
    }
    let v = if exp == 0 {
        man as f32 * 2f32.powi(1 - bias - man_bits as i32)
    } else {
        (1.0 + man as f32 / (1 << man_bits) as f32) * 2f32.powi(exp as i32 - bias)
    };
    if neg {
        -v
    } else {
        v
    }
}

/// Reads elements `index` of a storage into `data`.
fn gather(file: &str, st: SType, bytes: &[u8], big_endian: bool, index: &[usize]) -> Result<Data> {
    let n = st.size();
    let raw = |i: usize| -> Option<u64> {
        let s = bytes.get(i.checked_mul(n)?..i.checked_mul(n)?.checked_add(n)?)?;
        let mut v = 0u64;
        for (k, x) in s.iter().enumerate() {
            let shift = if big_endian { 8 * (n - 1 - k) } else { 8 * k };
            v |= (*x as u64) << shift;
        }
        Some(v)
    };
    let oob = || err(file, "the tensor reaches past the end of its storage");
    macro_rules! collect {
        ($f:expr) => {{
            let mut out = Vec::with_capacity(index.len());
            for &i in index {
                let r = raw(i).ok_or_else(oob)?;
                out.push($f(r));
            }
            out
        }};
    }
    Ok(match st {
        SType::Bool => Data::Bool(collect!(|r: u64| r != 0)),
        SType::U8 => Data::Int(collect!(|r: u64| r as u8 as i64)),
        SType::I8 => Data::Int(collect!(|r: u64| r as u8 as i8 as i64)),
        SType::I16 => Data::Int(collect!(|r: u64| r as u16 as i16 as i64)),
        SType::I32 => Data::Int(collect!(|r: u64| r as u32 as i32 as i64)),
        SType::I64 => Data::Int(collect!(|r: u64| r as i64)),
        SType::U16 => Data::Int(collect!(|r: u64| r as u16 as i64)),
        SType::U32 => Data::Int(collect!(|r: u64| r as u32 as i64)),
        SType::U64 => {
            let v: Vec<u64> = collect!(|r: u64| r);
            if v.iter().any(|x| *x > i64::MAX as u64) {
                return Err(err(file, "uint64 values above 2^63 are not supported"));
            }
            Data::Int(v.into_iter().map(|x| x as i64).collect())
        }
        SType::F16 => Data::F32(collect!(|r: u64| f16_to_f32(r as u16))),
        SType::BF16 => Data::F32(collect!(|r: u64| f32::from_bits((r as u32) << 16))),
        SType::F32 => Data::F32(collect!(|r: u64| f32::from_bits(r as u32))),
        SType::F64 => Data::F64(collect!(f64::from_bits)),
        SType::F8E4M3Fn => Data::F32(collect!(|r: u64| f8_to_f32(r as u8, 4, 7, false, false))),
        SType::F8E5M2 => Data::F32(collect!(|r: u64| f8_to_f32(r as u8, 5, 15, false, true))),
        SType::F8E4M3Fnuz => Data::F32(collect!(|r: u64| f8_to_f32(r as u8, 4, 8, true, false))),
        SType::F8E5M2Fnuz => Data::F32(collect!(|r: u64| f8_to_f32(r as u8, 5, 16, true, false))),
    })
}

/// The storage indices of a strided view, in C order; checked against `storage_len` elements.
fn strided_index(
    file: &str,
    shape: &[usize],
    stride: &[usize],
    offset: usize,
    storage_len: usize,
) -> Result<Vec<usize>> {
    let numel = shape
        .iter()
        .try_fold(1usize, |a, d| a.checked_mul(*d))
        .ok_or_else(|| err(file, "the tensor shape overflows"))?;
    if numel == 0 {
        return Ok(Vec::new());
    }
    // Every element must lie in the storage, and (as msprobe dumps contiguous clones) a tensor
    // may not have more elements than its storage: this bounds what is allocated by the file size.
    let mut last = offset;
    for (d, s) in shape.iter().zip(stride) {
        last = (d - 1)
            .checked_mul(*s)
            .and_then(|x| last.checked_add(x))
            .ok_or_else(|| err(file, "the tensor strides overflow"))?;
    }
    if last >= storage_len {
        return Err(err(
            file,
            format!("the tensor reaches element {last} of a storage of {storage_len} elements"),
        ));
    }
    if numel > storage_len {
        return Err(err(
            file,
            format!("the tensor has {numel} elements but its storage only {storage_len} (expanded views are not supported)"),
        ));
    }
    let mut out = Vec::with_capacity(numel);
    let mut idx = vec![0usize; shape.len()];
    let mut pos = offset;
    for _ in 0..numel {
        out.push(pos);
        // Increment the multi-index (last dimension fastest).
        for d in (0..shape.len()).rev() {
            // Wrapping: only the step past the last element can leave the checked range.
            idx[d] += 1;
            pos = pos.wrapping_add(stride[d]);
            if idx[d] < shape[d] {
                break;
            }
            pos = pos.wrapping_sub(stride[d].wrapping_mul(shape[d]));
            idx[d] = 0;
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A minimal torch.save archive: one stored entry per (name, bytes).
    pub(crate) fn zip(entries: &[(&str, &[u8])]) -> Vec<u8> {
        let mut out = Vec::new();
        let mut cd = Vec::new();
        for (name, data) in entries {
            let off = out.len() as u32;
            out.extend_from_slice(b"PK\x03\x04");
            out.extend_from_slice(&[20, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
            out.extend_from_slice(&(data.len() as u32).to_le_bytes());
            out.extend_from_slice(&(data.len() as u32).to_le_bytes());
            out.extend_from_slice(&(name.len() as u16).to_le_bytes());
            out.extend_from_slice(&0u16.to_le_bytes());
            out.extend_from_slice(name.as_bytes());
            out.extend_from_slice(data);
            cd.extend_from_slice(b"PK\x01\x02");
            cd.extend_from_slice(&[20, 0, 20, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
            cd.extend_from_slice(&(data.len() as u32).to_le_bytes());
            cd.extend_from_slice(&(data.len() as u32).to_le_bytes());
            cd.extend_from_slice(&(name.len() as u16).to_le_bytes());
            cd.extend_from_slice(&[0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
            cd.extend_from_slice(&off.to_le_bytes());
            cd.extend_from_slice(name.as_bytes());
        }
        let cd_off = out.len() as u32;
        out.extend_from_slice(&cd);
        out.extend_from_slice(b"PK\x05\x06\0\0\0\0");
        out.extend_from_slice(&(entries.len() as u16).to_le_bytes());
        out.extend_from_slice(&(entries.len() as u16).to_le_bytes());
        out.extend_from_slice(&(cd.len() as u32).to_le_bytes());
        out.extend_from_slice(&cd_off.to_le_bytes());
        out.extend_from_slice(&0u16.to_le_bytes());
        out
    }

    /// data.pkl of `_rebuild_tensor_v2(FloatStorage '0', offset, size, stride, False, OrderedDict())`.
    pub(crate) fn pkl(storage: &str, offset: u8, size: &[u8], stride: &[u8]) -> Vec<u8> {
        let mut p = Vec::new();
        p.extend_from_slice(b"\x80\x02ctorch._utils\n_rebuild_tensor_v2\nq\x00((X\x07\x00\x00\x00storageq\x01ctorch\n");
        p.extend_from_slice(storage.as_bytes());
        p.extend_from_slice(
            b"\nq\x02X\x01\x00\x00\x000q\x03X\x03\x00\x00\x00cpuq\x04K\x06tq\x05QK",
        );
        p.push(offset);
        p.push(b'(');
        for s in size {
            p.extend_from_slice(&[b'K', *s]);
        }
        p.push(b't');
        p.push(b'(');
        for s in stride {
            p.extend_from_slice(&[b'K', *s]);
        }
        p.push(b't');
        p.extend_from_slice(b"\x89ccollections\nOrderedDict\nq\x08)Rq\x09tq\x0aRq\x0b.");
        p
    }

    #[test]
    fn reads_a_strided_float_tensor() {
        let vals: Vec<u8> = (0..6u32)
            .flat_map(|i| (i as f32 + 0.5).to_le_bytes())
            .collect();
        // A transposed [3, 2] view of a contiguous [2, 3] storage.
        let f = zip(&[
            ("t/data.pkl", &pkl("FloatStorage", 0, &[3, 2], &[1, 3])),
            ("t/byteorder", b"little"),
            ("t/data/0", &vals),
        ]);
        let t = read_pt("t.pt", &f).unwrap();
        assert_eq!(t.dtype, DType::F32);
        assert_eq!(t.shape, vec![3, 2]);
        assert_eq!(t.data, Data::F32(vec![0.5, 3.5, 1.5, 4.5, 2.5, 5.5]));
    }

    #[test]
    fn reads_bf16_and_half_and_offsets() {
        let bf: Vec<u8> = [0x3f80u16, 0xc000, 0x4040]
            .iter()
            .flat_map(|x| x.to_le_bytes())
            .collect();
        let f = zip(&[
            ("a/data.pkl", &pkl("BFloat16Storage", 1, &[2], &[1])),
            ("a/data/0", &bf),
        ]);
        let t = read_pt("a.pt", &f).unwrap();
        assert_eq!(t.dtype, DType::F32);
        assert_eq!(t.data, Data::F32(vec![-2.0, 3.0]));
        let h: Vec<u8> = [0x3c00u16, 0x0001, 0xfbff]
            .iter()
            .flat_map(|x| x.to_le_bytes())
            .collect();
        let f = zip(&[
            ("h/data.pkl", &pkl("HalfStorage", 0, &[3], &[1])),
            ("h/data/0", &h),
        ]);
        let t = read_pt("h.pt", &f).unwrap();
        assert_eq!(t.dtype, DType::F16);
        assert_eq!(t.data, Data::F32(vec![1.0, 2f32.powi(-24), -65504.0]));
    }

    #[test]
    fn half_conversions_round_trip() {
        for h in 0..=0xffffu16 {
            let f = f16_to_f32(h);
            if f.is_nan() {
                continue;
            }
            assert_eq!(f32_to_f16(f), h, "{h:#x}");
        }
        // ties to even
        assert_eq!(f32_to_f16(1.0 + 2f32.powi(-11)), 0x3c00);
        assert_eq!(f32_to_f16(1.0 + 3.0 * 2f32.powi(-11)), 0x3c02);
        assert_eq!(f32_to_f16(65520.0), 0x7c00);
    }

    #[test]
    fn reads_npy() {
        let mut f = b"\x93NUMPY\x01\x00".to_vec();
        let h = "{'descr': '<i8', 'fortran_order': True, 'shape': (2, 3), }";
        let mut hdr = h.to_string();
        while (10 + hdr.len() + 1) % 64 != 0 {
            hdr.push(' ');
        }
        hdr.push('\n');
        f.extend_from_slice(&(hdr.len() as u16).to_le_bytes());
        f.extend_from_slice(hdr.as_bytes());
        for v in [1i64, 4, 2, 5, 3, 6] {
            f.extend_from_slice(&v.to_le_bytes());
        }
        let t = read_npy("x.npy", &f).unwrap();
        assert_eq!(t.dtype, DType::I64);
        assert_eq!(t.shape, vec![2, 3]);
        assert_eq!(t.data, Data::Int(vec![1, 2, 3, 4, 5, 6]));
        assert_eq!(read_tensor("x.npy", &f).unwrap(), t);
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        let good = zip(&[
            ("t/data.pkl", &pkl("FloatStorage", 0, &[2], &[1])),
            ("t/data/0", &[0u8; 8]),
        ]);
        assert!(read_pt("t.pt", &good).is_ok());
        let e = read_pt("t.pt", b"not a zip").unwrap_err();
        assert!(
            e.to_string().starts_with("t.pt: not a PyTorch .pt file"),
            "{e}"
        );
        // Every truncation and every single-byte change of a valid file.
        for n in 0..good.len() {
            let _ = read_pt("t.pt", &good[..n]);
            for v in [0u8, 0xff, b'(', b'.'] {
                let mut g = good.clone();
                g[n] = v;
                let _ = read_pt("t.pt", &g);
            }
        }
        // A tensor larger than its storage, a storage type we do not read, deep nesting.
        let big = zip(&[
            ("t/data.pkl", &pkl("FloatStorage", 0, &[200, 200], &[0, 0])),
            ("t/data/0", &[0u8; 8]),
        ]);
        assert!(read_pt("t.pt", &big).is_err());
        let cplx = zip(&[
            ("t/data.pkl", &pkl("ComplexFloatStorage", 0, &[1], &[1])),
            ("t/data/0", &[0u8; 8]),
        ]);
        assert!(read_pt("t.pt", &cplx)
            .unwrap_err()
            .to_string()
            .contains("ComplexFloat"));
        let mut deep = b"\x80\x02".to_vec();
        deep.extend(std::iter::repeat_n(b')', 1).chain(std::iter::repeat_n(0x85u8, 200)));
        deep.push(b'.');
        let d = zip(&[("t/data.pkl", &deep)]);
        assert!(read_pt("t.pt", &d)
            .unwrap_err()
            .to_string()
            .contains("too deep"));
        // Random opcode soup inside a valid archive.
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let alphabet =
            b"().tqhjKMJXNRQcb}]ae0125\x80\x85\x86\x87\x88\x89\x8a\x8c\x93\x94\x95storage\n";
        for _ in 0..3000 {
            let mut p = b"\x80\x02".to_vec();
            for _ in 0..(seed % 40) {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                p.push(alphabet[(seed % alphabet.len() as u64) as usize]);
            }
            p.push(b'.');
            let f = zip(&[("t/data.pkl", &p), ("t/data/0", &[0u8; 16])]);
            let _ = read_pt("t.pt", &f);
        }
        for junk in [
            &b"\x93NUMPY"[..],
            b"\x93NUMPY\x01\x00\xff\xff{",
            b"\x93NUMPY\x09\x00",
        ] {
            assert!(read_npy("x.npy", junk).is_err());
        }
    }
}
