//! The zip archive `torch.save` writes: stored (uncompressed) entries, ZIP64 aware.

use super::{err, le};
use crate::base::error::Result;

pub(super) struct ZipEntry {
    pub(super) name: String,
    method: u16,
    size: u64,
    local_offset: u64,
}

pub(super) fn zip_entries(file: &str, b: &[u8]) -> Result<Vec<ZipEntry>> {
    let bad = |what: &str| {
        err(
            file,
            format!("not a PyTorch .pt file (a zip archive): {what}"),
        )
    };
    if b.len() < 22 {
        return Err(bad("too short for a zip archive"));
    }
    // End of central directory: the last signature within the final 22 + 65535 bytes.
    let lo = b.len().saturating_sub(22 + 65535);
    let mut eocd = None;
    let mut i = b.len() - 22;
    loop {
        if b[i..].starts_with(b"PK\x05\x06") {
            eocd = Some(i);
            break;
        }
        if i == lo {
            break;
        }
        i -= 1;
    }
    let eocd = eocd.ok_or_else(|| bad("no end-of-central-directory record"))?;
    let rd = |at: usize, n: usize| le(b, at, n).ok_or_else(|| bad("truncated record"));
    let mut count = rd(eocd + 10, 2)?;
    let mut cd_size = rd(eocd + 12, 4)?;
    let mut cd_off = rd(eocd + 16, 4)?;
    if count == 0xFFFF || cd_size == 0xFFFF_FFFF || cd_off == 0xFFFF_FFFF {
        // ZIP64: a locator right before the record points at the ZIP64 end record.
        let loc = eocd
            .checked_sub(20)
            .filter(|l| b[*l..].starts_with(b"PK\x06\x07"))
            .ok_or_else(|| bad("ZIP64 sizes without a ZIP64 locator"))?;
        let rec = usize::try_from(rd(loc + 8, 8)?).map_err(|_| bad("ZIP64 record offset"))?;
        if !b.get(rec..).is_some_and(|s| s.starts_with(b"PK\x06\x06")) {
            return Err(bad("no ZIP64 end-of-central-directory record"));
        }
        count = rd(rec + 32, 8)?;
        cd_size = rd(rec + 40, 8)?;
        cd_off = rd(rec + 48, 8)?;
    }
    let cd_off = usize::try_from(cd_off).map_err(|_| bad("central directory offset"))?;
    let cd_end = usize::try_from(cd_size)
        .ok()
        .and_then(|s| cd_off.checked_add(s))
        .filter(|e| *e <= b.len())
        .ok_or_else(|| bad("central directory outside the file"))?;
    let mut out = Vec::new();
    let mut p = cd_off;
    for _ in 0..count {
        if p + 46 > cd_end || !b[p..].starts_with(b"PK\x01\x02") {
            return Err(bad("broken central directory"));
        }
        let method = rd(p + 10, 2)? as u16;
        let mut csize = rd(p + 20, 4)?;
        let mut usize_ = rd(p + 24, 4)?;
        let nlen = rd(p + 28, 2)? as usize;
        let xlen = rd(p + 30, 2)? as usize;
        let clen = rd(p + 32, 2)? as usize;
        let mut lho = rd(p + 42, 4)?;
        let name_at = p + 46;
        let name = b
            .get(name_at..name_at + nlen)
            .ok_or_else(|| bad("entry name outside the file"))?;
        let name = String::from_utf8_lossy(name).into_owned();
        // ZIP64 extra field: the 64-bit values of the fields that hold 0xFFFFFFFF, in order.
        let mut x = name_at + nlen;
        let x_end = (x + xlen).min(b.len());
        while x + 4 <= x_end {
            let id = rd(x, 2)?;
            let len = rd(x + 2, 2)? as usize;
            if id == 1 {
                let mut q = x + 4;
                for field in [&mut usize_, &mut csize, &mut lho] {
                    if *field == 0xFFFF_FFFF && q + 8 <= x + 4 + len {
                        *field = rd(q, 8)?;
                        q += 8;
                    }
                }
            }
            x += 4 + len;
        }
        let _ = usize_;
        out.push(ZipEntry {
            name,
            method,
            size: csize,
            local_offset: lho,
        });
        p = name_at + nlen + xlen + clen;
    }
    Ok(out)
}

pub(super) fn zip_data<'a>(file: &str, b: &'a [u8], e: &ZipEntry) -> Result<&'a [u8]> {
    let bad = |what: &str| {
        err(
            file,
            format!("not a PyTorch .pt file: entry {}: {what}", e.name),
        )
    };
    if e.method != 0 {
        return Err(bad(&format!(
            "compressed (method {}); torch.save stores entries uncompressed",
            e.method
        )));
    }
    let at = usize::try_from(e.local_offset).map_err(|_| bad("offset"))?;
    if !b.get(at..).is_some_and(|s| s.starts_with(b"PK\x03\x04")) {
        return Err(bad("no local header at its offset"));
    }
    let nlen = le(b, at + 26, 2).ok_or_else(|| bad("truncated local header"))? as usize;
    let xlen = le(b, at + 28, 2).ok_or_else(|| bad("truncated local header"))? as usize;
    let start = at + 30 + nlen + xlen;
    let end = usize::try_from(e.size)
        .ok()
        .and_then(|s| start.checked_add(s))
        .filter(|end| *end <= b.len())
        .ok_or_else(|| bad("data outside the file"))?;
    Ok(&b[start..end])
}
