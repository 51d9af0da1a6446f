//! The one error type of the core, and diagnostics.
//!
//! Every error names the file it concerns and, where there is one, the place in it (line and
//! column, or a JSON path), then what was expected. Messages put the location first and do not
//! end with a period, so they read well after a `probelens: ` prefix or beside a file in the page.

use std::fmt;

/// The largest file the core reads: offsets into a JSON store are `u32`, and a wasm32 page could
/// never hold more. dump.json and stack.json share one store, so they count together.
pub const MAX_FILE_BYTES: u64 = u32::MAX as u64;

/// Where in a file something went wrong.
#[derive(Debug, Clone, PartialEq)]
pub enum Place {
    None,
    LineCol(usize, usize),
    /// A JSON path such as `data["Functional.linear.0.forward"].input_args[0]`.
    Path(String),
    /// A JSON path and the line and column where its value starts.
    PathAt(String, usize, usize),
}

/// What kind of failure.
#[derive(Debug, Clone, PartialEq)]
pub enum ErrorKind {
    /// The bytes are not valid JSON.
    Syntax,
    /// Valid JSON, but not the shape msprobe writes.
    Schema,
    /// The YAML mapping file.
    Yaml,
    /// A missing file, a folder layout msprobe would refuse, mismatched sides.
    Input,
    /// A limit the input exceeds (size, depth).
    Limit,
}

#[derive(Debug, Clone, PartialEq)]
struct Inner {
    kind: ErrorKind,
    file: String,
    place: Place,
    message: String,
}

/// A failure that prevents a result.
#[derive(Debug, Clone, PartialEq)]
pub struct Error(Box<Inner>);

pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    pub fn new(
        kind: ErrorKind,
        file: impl Into<String>,
        place: Place,
        message: impl Into<String>,
    ) -> Self {
        Error(Box::new(Inner {
            kind,
            file: file.into(),
            place,
            message: message.into(),
        }))
    }
    pub fn input(file: impl Into<String>, message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Input, file, Place::None, message)
    }
    pub fn schema(
        file: impl Into<String>,
        path: impl Into<String>,
        message: impl Into<String>,
    ) -> Self {
        Self::new(ErrorKind::Schema, file, Place::Path(path.into()), message)
    }
    /// A schema error at a JSON path whose value starts at `line`, `col`.
    pub fn schema_at(
        file: impl Into<String>,
        path: impl Into<String>,
        (line, col): (usize, usize),
        message: impl Into<String>,
    ) -> Self {
        Self::new(
            ErrorKind::Schema,
            file,
            Place::PathAt(path.into(), line, col),
            message,
        )
    }
    pub fn kind(&self) -> &ErrorKind {
        &self.0.kind
    }
    pub fn file(&self) -> &str {
        &self.0.file
    }
    pub fn place(&self) -> &Place {
        &self.0.place
    }
    pub fn message(&self) -> &str {
        &self.0.message
    }
    /// The same error, attributed to another file name (e.g. a path relative to the dropped folder).
    pub fn with_file(mut self, file: impl Into<String>) -> Self {
        self.0.file = file.into();
        self
    }
    /// A file the run needs is not there (the same text from the CLI and the page).
    pub fn file_not_found(file: impl Into<String>) -> Self {
        Self::input(
            file,
            "file not found (graph_visualize needs dump.json, construct.json and stack.json in every rank folder)",
        )
    }
    /// A file of `len` bytes, more than [`MAX_FILE_BYTES`]: refused before reading
    /// (the same text from the CLI and the page).
    pub fn file_too_large(file: impl Into<String>, len: u64) -> Self {
        Self::new(
            ErrorKind::Limit,
            file,
            Place::None,
            format!(
                "the file is {len} bytes; probelens reads files of at most {} bytes (4 GiB)",
                MAX_FILE_BYTES
            ),
        )
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if !self.0.file.is_empty() {
            write!(f, "{}: ", self.0.file)?;
        }
        match &self.0.place {
            Place::None => {}
            Place::LineCol(l, c) => write!(f, "line {l}, column {c}: ")?,
            Place::Path(p) => write!(f, "{p}: ")?,
            Place::PathAt(p, l, c) => write!(f, "line {l}, column {c}: {p}: ")?,
        }
        f.write_str(&self.0.message)
    }
}

impl std::error::Error for Error {}

/// How serious a diagnostic is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Info,
    Warning,
}

/// An anomaly that still allows a result; shown to the user, never dropped.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Diagnostic {
    pub severity: Severity,
    pub file: String,
    pub message: String,
}

impl Diagnostic {
    pub fn warning(file: impl Into<String>, message: impl Into<String>) -> Self {
        Diagnostic {
            severity: Severity::Warning,
            file: file.into(),
            message: message.into(),
        }
    }
    pub fn info(file: impl Into<String>, message: impl Into<String>) -> Self {
        Diagnostic {
            severity: Severity::Info,
            file: file.into(),
            message: message.into(),
        }
    }
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let sev = match self.severity {
            Severity::Info => "info",
            Severity::Warning => "warning",
        };
        if self.file.is_empty() {
            write!(f, "{sev}: {}", self.message)
        } else {
            write!(f, "{sev}: {}: {}", self.file, self.message)
        }
    }
}
