//! The dumps on disk: [`FsFiles`] (the core's `Files` over a folder), the two threads the core's
//! `Join` runs on, and the reading of a pair's rank folders.

use probelens::base::error::{Error, Result};
use probelens::base::Files;
use probelens::run;
use std::borrow::Cow;
use std::path::{Path, PathBuf};

/// Files under a root folder on disk.
pub(crate) struct FsFiles {
    pub(crate) root: PathBuf,
    pub(crate) shown: String,
}

/// The core's [`probelens::base::Join`]: the second piece of work on a scoped thread while this
/// thread does the first.
pub(crate) fn two_threads(a: &mut (dyn FnMut() + Send), b: &mut (dyn FnMut() + Send)) {
    std::thread::scope(|s| {
        s.spawn(b);
        a();
    });
}

impl FsFiles {
    pub(crate) fn new(root: &Path) -> Result<FsFiles> {
        let meta = std::fs::metadata(root)
            .map_err(|e| Error::input(root.display().to_string(), format!("cannot open: {e}")))?;
        if !meta.is_dir() {
            return Err(Error::input(
                root.display().to_string(),
                "not a folder (the dump path must be a folder)",
            ));
        }
        Ok(FsFiles {
            root: root.to_path_buf(),
            shown: root.display().to_string(),
        })
    }
}

impl FsFiles {
    pub(crate) fn io_error(&self, path: &str, e: std::io::Error) -> Error {
        if e.kind() == std::io::ErrorKind::NotFound {
            Error::file_not_found(self.display(path))
        } else {
            Error::input(self.display(path), format!("cannot read: {e}"))
        }
    }
}

impl Files for FsFiles {
    fn list(&self, dir: &str) -> Result<Vec<(String, bool)>> {
        let p = self.root.join(dir);
        let rd = std::fs::read_dir(&p)
            .map_err(|e| Error::input(self.display(dir), format!("cannot list: {e}")))?;
        let mut out = Vec::new();
        for e in rd.flatten() {
            let is_dir = std::fs::metadata(e.path())
                .map(|m| m.is_dir())
                .unwrap_or(false);
            out.push((e.file_name().to_string_lossy().into_owned(), is_dir));
        }
        Ok(out)
    }
    fn read(&self, path: &str) -> Result<Cow<'_, [u8]>> {
        let p = self.root.join(path);
        // Refuse before reading what the core could never hold (its offsets are 32-bit).
        if let Ok(m) = std::fs::metadata(&p) {
            if m.len() > probelens::base::error::MAX_FILE_BYTES {
                return Err(Error::file_too_large(self.display(path), m.len()));
            }
        }
        match std::fs::read(&p) {
            Ok(b) => Ok(Cow::Owned(b)),
            Err(e) => Err(self.io_error(path, e)),
        }
    }
    fn size(&self, path: &str) -> Result<u64> {
        let p = self.root.join(path);
        match std::fs::metadata(&p) {
            Ok(m) if m.len() > probelens::base::error::MAX_FILE_BYTES => {
                Err(Error::file_too_large(self.display(path), m.len()))
            }
            Ok(m) if m.is_file() => Ok(m.len()),
            // A folder or a special file: `read` says what is wrong.
            Ok(_) => self.read(path).map(|b| b.len() as u64),
            Err(e) => Err(self.io_error(path, e)),
        }
    }
    /// 8 MB reads into one buffer: the dump.json parser drops what it has parsed, so a rank
    /// folder's dump is never held whole.
    fn read_chunks(&self, path: &str, sink: &mut dyn FnMut(&[u8]) -> Result<()>) -> Result<()> {
        use std::io::Read;
        let p = self.root.join(path);
        let mut file = std::fs::File::open(&p).map_err(|e| self.io_error(path, e))?;
        let mut buf = vec![0u8; 8 << 20];
        loop {
            let n = match file.read(&mut buf) {
                Ok(0) => return Ok(()),
                Ok(n) => n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(self.io_error(path, e)),
            };
            sink(&buf[..n])?;
        }
    }
    fn display(&self, path: &str) -> String {
        if path.is_empty() {
            self.shown.clone()
        } else {
            format!("{}/{}", self.shown.trim_end_matches('/'), path)
        }
    }
}

/// The tensor folder msprobe records for a graph (`dump_data_dir`, or the rank folder's
/// `dump_tensor_data` when the dump was moved).
pub(crate) fn tensor_dir(
    files: &FsFiles,
    dir: &str,
    d: &probelens::formats::dump::RankDump,
) -> Option<String> {
    let dd = d.dump_data_dir.as_ref()?;
    let base = std::fs::canonicalize(files.root.join(dir)).ok()?;
    let parent = Path::new(dd)
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default();
    Some(if parent == base {
        dd.clone()
    } else {
        base.join("dump_tensor_data").display().to_string()
    })
}

/// Where a compared pair's tensor files are (real-tensor dumps read `dump_tensor_data/`).
pub(crate) fn tensor_files<'a>(
    npu: &'a FsFiles,
    bench: Option<&'a FsFiles>,
    npu_dir: &'a str,
    bench_dir: &'a Option<String>,
) -> Option<run::TensorFiles<'a>> {
    Some(run::TensorFiles {
        npu,
        npu_dir,
        bench: bench?,
        bench_dir: bench_dir.as_deref()?,
    })
}

/// Reads and parses the two rank folders of a pair, the Bench side on a second thread (the core
/// takes bytes and returns values, so the two sides are independent). Errors are reported as the
/// sequential order would: the NPU side's first.
pub(crate) fn load_pair(
    npu: &FsFiles,
    bench: Option<&FsFiles>,
    pair: &run::PairPlan,
) -> Result<(
    probelens::formats::dump::RankDump,
    Option<probelens::formats::dump::RankDump>,
)> {
    let (Some(b), Some(d)) = (bench, &pair.bench_dir) else {
        return Ok((run::load_rank(npu, &pair.npu_dir)?, None));
    };
    std::thread::scope(|s| {
        let other = s.spawn(|| run::load_rank(b, d));
        let nd = run::load_rank(npu, &pair.npu_dir);
        let bd = match other.join() {
            Ok(r) => r,
            Err(p) => std::panic::resume_unwind(p),
        };
        Ok((nd?, Some(bd?)))
    })
}
