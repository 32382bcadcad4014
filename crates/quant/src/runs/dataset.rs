//! Streaming calibration data: [`Dataset`] feeds a function's arguments from
//! `.npy` / `.npz` files one batch at a time, with memory independent of the
//! number of samples.
//!
//! # Inputs
//!
//! [`Dataset::open`] takes
//! * a `.npy` file: the data of the one argument;
//! * a `.npz` archive: one array per argument, matched by name (the argument's
//!   name, or `argN` for argument N) when every argument finds one (other arrays
//!   are ignored), otherwise by position when the archive holds exactly one array
//!   per argument; a member named `argN` for an argument the function does not
//!   have is an error either way;
//! * a directory: its `.npy` / `.npz` files (extension matched ignoring ASCII
//!   case; other entries and subdirectories are skipped), sorted by file name
//!   (byte order), each read like a single file above and concatenated along
//!   the sample dimension in that order.
//!
//! A file's format is recognised by its content (`PK` starts a `.npz`), not its
//! extension.
//!
//! # Samples
//!
//! For an argument of static shape `S` (rank `r`), a data array of
//! * rank `r`, shape `[N, S[1..]]`: each of its `N` rows is a sample, and a model
//!   call takes `S[0]` consecutive samples ([`Dataset::batch`] is `S[0]`);
//! * rank `r + 1`, shape `[N, S...]`: each of its `N` entries is one whole
//!   argument, one call ([`Dataset::batch`] is 1).
//!
//! Every argument must agree on the samples per call and have the same number
//! of samples, in every file. [`Dataset::read`]`(start, count)` returns per
//! argument a tensor of shape `[count * rows, S[1..]]`, where `rows` is 1 for row
//! samples and `S[0]` for whole-argument samples, so `read(k * batch, batch)` has
//! exactly the argument's shape. (A rank-0 argument only takes whole-argument
//! samples from a rank-1 array; `read(i, 1)` gives a 0-d tensor and a larger
//! count a `[count]` tensor.) Data must have the argument's storage dtype
//! ([`DType::of_element`]); nothing is converted.
//!
//! # Memory
//!
//! [`Dataset::open`] reads headers only, with positioned reads (the `.npy`
//! header; for a `.npz` the end records, the central directory, the local
//! headers and the `.npy` headers of the members it uses), and keeps no file
//! open or mapped. Each [`Dataset::read`] opens the files its samples lie in,
//! maps exactly the byte range of the requested rows of each argument
//! (memmap2), copies them into the result tensors (byte-swapping big-endian
//! data), and unmaps them before returning. (Mapping only the range matters: a
//! whole-file mapping lets the kernel map whole large page-cache folios, up to
//! 2 MiB each, around every touched byte.) So no page of the data stays resident
//! between reads, and peak memory is the result tensors plus the mapped rows of
//! one read, whatever the number of samples or files. That holds for `.npy`
//! files and STORED `.npz` members (`np.savez`); the only per-file state kept is
//! its path, length and data offsets, so a directory may hold any number of files.
//! Two cases are read whole into memory when opened, and are the only ones
//! where memory grows with the data:
//! * DEFLATE-compressed `.npz` members (`np.savez_compressed`) cannot be mapped,
//!   so each member an argument uses is decompressed once (and its CRC-32
//!   checked);
//! * Fortran-order (`fortran_order: True`) arrays of rank ≥ 2, whose samples are
//!   not contiguous, are read and transposed to C order.
//!
//! STORED members' CRC-32 is not checked (that would read the whole file). A
//! file is re-opened by each read; if its length changed since [`Dataset::open`],
//! the read fails (shortening a file *during* a read is outside what a mapped
//! reader can guard against).
//!
//! # Checks
//!
//! [`Dataset::read`] rejects NaN and ±infinity in float data, naming the file, the
//! sample (global and, in a directory, within its file), the argument and the
//! element's row-major index within the sample:
//! `calib.npy: sample 17, argument 0 (arg0): element 5 is NaN`. Every failure is
//! a [`DatasetError`]; nothing reachable from the files panics. A `Dataset` is
//! `Send + Sync`; reads take `&self` and may run on several threads at once.

use memmap2::MmapOptions;
use ndarray::{ArrayD, IxDyn};
use qopt_interp::{DType, Tensor};
use qopt_npy::{self as npy, not_a_regular_file, NpyElement, NpyError};
use std::ffi::OsString;
use std::fmt;
use std::fs::File;
use std::path::{Path, PathBuf};

/// What one argument of the function expects.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ArgSpec {
    /// The argument's name (`"input"`), or `"arg0"` when it has none.
    pub name: String,
    /// The argument's storage dtype ([`DType::of_element`] of its element type).
    pub dtype: DType,
    /// The argument's full static shape, e.g. `[1, 1, 8, 8]`.
    pub shape: Vec<usize>,
}

impl ArgSpec {
    /// An argument spec.
    pub fn new(name: impl Into<String>, dtype: DType, shape: Vec<usize>) -> ArgSpec {
        ArgSpec { name: name.into(), dtype, shape }
    }

    /// The argument's type as IR text for messages, `tensor<1x1x8x8xf32>` (the
    /// element type is the storage type: `f32`, `f64`, `i8`, `u8`, `i16`, `i32`,
    /// `i64`, `i1`).
    pub fn type_text(&self) -> String {
        let element = match self.dtype {
            DType::F32 => "f32",
            DType::F64 => "f64",
            DType::I8 => "i8",
            DType::U8 => "u8",
            DType::I16 => "i16",
            DType::I32 => "i32",
            DType::I64 => "i64",
            DType::Bool => "i1",
        };
        let mut text = String::from("tensor<");
        for d in &self.shape {
            text.push_str(&format!("{d}x"));
        }
        text.push_str(element);
        text.push('>');
        text
    }
}

/// What kind of failure a [`DatasetError`] is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum DatasetErrorKind {
    /// A file or directory cannot be opened, listed, mapped, or changed after opening.
    Io,
    /// A file is not valid `.npy` / `.npz` data (bad header, truncated, sizes overflow).
    Format,
    /// The data does not fit the arguments (dtype, shape, member names, sample counts,
    /// samples per call), or there are no arguments.
    Mismatch,
    /// The data set has no samples, or a directory has no `.npy` / `.npz` files.
    Empty,
    /// A read asked for samples past the end.
    Range,
    /// Float data holds NaN or an infinity.
    BadValue,
}

/// A failure opening or reading a [`Dataset`]: a kind and a message that names
/// the file (and member) concerned.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DatasetError {
    kind: DatasetErrorKind,
    message: String,
}

impl DatasetError {
    fn new(kind: DatasetErrorKind, message: impl Into<String>) -> DatasetError {
        DatasetError { kind, message: message.into() }
    }

    /// What kind of failure this is.
    pub fn kind(&self) -> DatasetErrorKind {
        self.kind
    }

    /// The full message (the same text as `Display`).
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for DatasetError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for DatasetError {}

fn format_error(label: &str, e: NpyError) -> DatasetError {
    let kind = if matches!(e, NpyError::Io(_)) { DatasetErrorKind::Io } else { DatasetErrorKind::Format };
    DatasetError::new(kind, format!("{label}: {e}"))
}

fn mismatch(message: String) -> DatasetError {
    DatasetError::new(DatasetErrorKind::Mismatch, message)
}

/// A stream of calibration samples for a function's arguments (see the module
/// documentation for inputs, layout and memory).
#[derive(Debug)]
pub struct Dataset {
    args: Vec<ArgLayout>,
    files: Vec<DataFile>,
    len: usize,
    batch: usize,
    /// More than one file: messages give the sample index within the file too.
    multi_file: bool,
}

/// How one argument's samples are laid out (the same in every file).
#[derive(Debug)]
struct ArgLayout {
    spec: ArgSpec,
    /// Leading rows of the argument one sample fills: 1 for row samples, `S[0]`
    /// (1 for a scalar) for whole-argument samples.
    rows: usize,
    /// Elements per sample.
    sample_elems: usize,
    /// Bytes per sample.
    sample_bytes: usize,
}

/// One input file.
#[derive(Debug)]
struct DataFile {
    path: PathBuf,
    /// The file's length when opened; a read checks it again.
    file_len: u64,
    /// Global index of the file's first sample.
    first: usize,
    samples: usize,
    /// One part per argument.
    parts: Vec<Part>,
}

impl DataFile {
    fn maps(&self) -> bool {
        self.parts.iter().any(|p| matches!(p.source, Source::Mapped { .. }))
    }
}

/// Where one argument's data lies in a file.
#[derive(Debug)]
struct Part {
    /// `calib.npy`, or `calib.npz['x']` for a member.
    label: String,
    source: Source,
}

#[derive(Debug)]
enum Source {
    /// In the file at `offset`, element bytes in C order, big-endian if `big_endian`.
    Mapped { offset: usize, big_endian: bool },
    /// Read when opened (DEFLATE member or Fortran order): little-endian, C order.
    Owned(Vec<u8>),
}

/// What a data array turned out to be for one argument.
struct Fit {
    samples: usize,
    /// Samples per call.
    batch: usize,
    rows: usize,
    sample_elems: usize,
}

impl Dataset {
    /// Opens `path` (a `.npy`, a `.npz`, or a directory of them) as data for a
    /// function with arguments `args`, reading headers only. Errors: missing or
    /// unreadable files, invalid data, data that does not fit an argument, no
    /// arguments, zero samples (`the data set is empty`).
    pub fn open(path: &Path, args: &[ArgSpec]) -> Result<Dataset, DatasetError> {
        let shown = path.display().to_string();
        if args.is_empty() {
            return Err(mismatch(format!("{shown}: the function has no arguments to feed")));
        }
        let meta = std::fs::metadata(path)
            .map_err(|e| DatasetError::new(DatasetErrorKind::Io, format!("{shown}: cannot open: {e}")))?;
        let (paths, multi_file) =
            if meta.is_dir() { (list_directory(path)?, true) } else { (vec![path.to_path_buf()], false) };

        let mut files: Vec<DataFile> = Vec::with_capacity(paths.len());
        let mut layouts: Option<(Vec<ArgLayout>, usize, String)> = None;
        let mut len = 0usize;
        for file_path in paths {
            let (file, fits) = open_file(file_path, args, len)?;
            let file_label = file.path.display().to_string();
            let batch = fits[0].batch;
            match &layouts {
                None => {
                    let arg_layouts = args
                        .iter()
                        .zip(&fits)
                        .map(|(spec, fit)| ArgLayout {
                            spec: spec.clone(),
                            rows: fit.rows,
                            sample_elems: fit.sample_elems,
                            sample_bytes: fit.sample_elems * spec.dtype.size(),
                        })
                        .collect();
                    layouts = Some((arg_layouts, batch, file_label));
                }
                Some((_, first_batch, first_label)) => {
                    if batch != *first_batch {
                        return Err(mismatch(format!(
                            "{file_label}: a call takes {batch} samples in this file but {first_batch} \
                             in {first_label}; every file must lay out its samples the same way"
                        )));
                    }
                }
            }
            len = len.checked_add(file.samples).ok_or_else(|| {
                DatasetError::new(
                    DatasetErrorKind::Format,
                    format!("{shown}: the number of samples overflows"),
                )
            })?;
            files.push(file);
        }
        let Some((args, batch, _)) = layouts else {
            // `list_directory` never returns an empty list.
            return Err(DatasetError::new(DatasetErrorKind::Empty, format!("{shown}: no data files")));
        };
        if len == 0 {
            return Err(DatasetError::new(
                DatasetErrorKind::Empty,
                format!("{shown}: the data set is empty"),
            ));
        }
        Ok(Dataset { args, files, len, batch, multi_file })
    }

    /// Total number of samples.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Always false: an empty data set is an error when opened.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Samples per model call: the arguments' leading dimension for row samples,
    /// 1 for whole-argument samples.
    pub fn batch(&self) -> usize {
        self.batch
    }

    /// Number of whole calls the samples fill (`len() / batch()`; samples left
    /// over after the last whole call are not part of any).
    pub fn calls(&self) -> usize {
        self.len / self.batch
    }

    /// The argument specs the data set was opened for.
    pub fn args(&self) -> impl ExactSizeIterator<Item = &ArgSpec> {
        self.args.iter().map(|a| &a.spec)
    }

    /// The data files, in sample order.
    pub fn files(&self) -> impl ExactSizeIterator<Item = &Path> {
        self.files.iter().map(|f| f.path.as_path())
    }

    /// The arguments of call `call`: `read(call * batch(), batch())`, one tensor
    /// per argument of exactly the argument's shape.
    pub fn read_call(&self, call: usize) -> Result<Vec<Tensor>, DatasetError> {
        let start = call.checked_mul(self.batch).ok_or_else(|| self.range_error(usize::MAX, self.batch))?;
        self.read(start, self.batch)
    }

    /// Reads samples `[start, start + count)`: one tensor per argument, of shape
    /// `[count * rows, S[1..]]` (see the module documentation). Fails on a range
    /// past the end, a file that changed since [`Dataset::open`], and NaN or
    /// infinite float data.
    pub fn read(&self, start: usize, count: usize) -> Result<Vec<Tensor>, DatasetError> {
        let end = start
            .checked_add(count)
            .filter(|&e| e <= self.len)
            .ok_or_else(|| self.range_error(start, count))?;
        // The files the range touches, each opened once for all arguments.
        let mut pieces: Vec<Piece<'_>> = Vec::new();
        let first = self.files.partition_point(|f| f.first + f.samples <= start);
        for file in &self.files[first..] {
            if file.first >= end {
                break;
            }
            let lo = start.max(file.first) - file.first;
            let hi = end.min(file.first + file.samples) - file.first;
            if lo >= hi {
                continue;
            }
            let handle = if file.maps() { Some(open_checked(file)?) } else { None };
            pieces.push(Piece { file, handle, lo, hi });
        }

        let mut tensors = Vec::with_capacity(self.args.len());
        let mut bad: Option<(usize, String)> = None;
        for (index, arg) in self.args.iter().enumerate() {
            let rows = count.checked_mul(arg.rows).ok_or_else(|| self.range_error(start, count))?;
            let mut shape = Vec::with_capacity(arg.spec.shape.len().max(1));
            if arg.spec.shape.is_empty() {
                if count != 1 {
                    shape.push(count);
                }
            } else {
                shape.push(rows);
                shape.extend_from_slice(&arg.spec.shape[1..]);
            }
            let (tensor, first_bad) = match arg.spec.dtype {
                DType::F32 => {
                    let v = collect::<f32>(arg, index, &pieces)?;
                    let b = v.iter().position(|x| !x.is_finite()).map(|i| (i, class_f64(f64::from(v[i]))));
                    (build(v, &shape)?, b)
                }
                DType::F64 => {
                    let v = collect::<f64>(arg, index, &pieces)?;
                    let b = v.iter().position(|x| !x.is_finite()).map(|i| (i, class_f64(v[i])));
                    (build(v, &shape)?, b)
                }
                DType::I8 => (build(collect::<i8>(arg, index, &pieces)?, &shape)?, None),
                DType::U8 => (build(collect::<u8>(arg, index, &pieces)?, &shape)?, None),
                DType::I16 => (build(collect::<i16>(arg, index, &pieces)?, &shape)?, None),
                DType::I32 => (build(collect::<i32>(arg, index, &pieces)?, &shape)?, None),
                DType::I64 => (build(collect::<i64>(arg, index, &pieces)?, &shape)?, None),
                DType::Bool => (build(collect::<bool>(arg, index, &pieces)?, &shape)?, None),
            };
            if let Some((flat, what)) = first_bad {
                let (global, message) = self.bad_value(index, arg, &pieces, flat, what);
                // The earliest sample, then the lowest argument.
                if bad.as_ref().is_none_or(|(g, _)| global < *g) {
                    bad = Some((global, message));
                }
            }
            tensors.push(tensor);
        }
        if let Some((_, message)) = bad {
            return Err(DatasetError::new(DatasetErrorKind::BadValue, message));
        }
        Ok(tensors)
    }

    fn range_error(&self, start: usize, count: usize) -> DatasetError {
        DatasetError::new(
            DatasetErrorKind::Range,
            format!(
                "samples {start}..{} are out of range: the data set has {} samples",
                start.saturating_add(count),
                self.len
            ),
        )
    }

    /// The message for the non-finite element at flat index `flat` of argument
    /// `index`'s collected data; returns the global sample index too.
    fn bad_value(
        &self,
        index: usize,
        arg: &ArgLayout,
        pieces: &[Piece<'_>],
        flat: usize,
        what: &str,
    ) -> (usize, String) {
        let per = arg.sample_elems.max(1);
        let mut sample_in_read = flat / per;
        let element = flat % per;
        for piece in pieces {
            let n = piece.hi - piece.lo;
            if sample_in_read < n {
                let local = piece.lo + sample_in_read;
                let global = piece.file.first + local;
                let label = &piece.file.parts[index].label;
                let within =
                    if self.multi_file { format!(" (sample {local} of this file)") } else { String::new() };
                let message = format!(
                    "{label}: sample {global}{within}, argument {index} ({}): element {element} is {what}",
                    arg.spec.name
                );
                return (global, message);
            }
            sample_in_read -= n;
        }
        // Unreachable: `flat` indexes data gathered from `pieces`.
        (usize::MAX, format!("argument {index} ({}): element {element} is {what}", arg.spec.name))
    }
}

/// One file's share of a read.
struct Piece<'a> {
    file: &'a DataFile,
    /// The open file, when some argument's data is read in place.
    handle: Option<File>,
    /// Samples `[lo, hi)` of the file.
    lo: usize,
    hi: usize,
}

fn class_f64(x: f64) -> &'static str {
    if x.is_nan() {
        "NaN"
    } else if x > 0.0 {
        "+inf"
    } else {
        "-inf"
    }
}

/// Gathers argument `index`'s samples from `pieces`, decoded to `T`.
fn collect<T: NpyElement>(
    arg: &ArgLayout,
    index: usize,
    pieces: &[Piece<'_>],
) -> Result<Vec<T>, DatasetError> {
    let size = T::DTYPE.size();
    let total = pieces
        .iter()
        .try_fold(0usize, |acc, p| acc.checked_add((p.hi - p.lo).checked_mul(arg.sample_elems)?));
    let mut out = Vec::new();
    total.and_then(|n| out.try_reserve_exact(n).ok()).ok_or_else(|| {
        DatasetError::new(
            DatasetErrorKind::Range,
            format!(
                "argument {index} ({}): cannot allocate {} samples of {} bytes",
                arg.spec.name,
                pieces.iter().map(|p| p.hi - p.lo).sum::<usize>(),
                arg.sample_bytes
            ),
        )
    })?;
    for piece in pieces {
        let part = &piece.file.parts[index];
        let ends_early = || {
            DatasetError::new(
                DatasetErrorKind::Io,
                format!(
                    "{}: the data ends early (the file changed since the data set was opened?)",
                    part.label
                ),
            )
        };
        let bytes_range = piece
            .lo
            .checked_mul(arg.sample_bytes)
            .zip(piece.hi.checked_mul(arg.sample_bytes))
            .ok_or_else(ends_early)?;
        let n = bytes_range.1 - bytes_range.0;
        if n == 0 {
            continue;
        }
        // Only the requested rows are mapped: a mapping of the whole file would let the kernel
        // map (and count as resident) whole large page-cache folios around them.
        let map;
        let (src, big_endian): (&[u8], bool) = match &part.source {
            Source::Mapped { offset, big_endian } => {
                let start = offset.checked_add(bytes_range.0).ok_or_else(ends_early)?;
                let in_file = start.checked_add(n).is_some_and(|end| end as u64 <= piece.file.file_len);
                let handle = piece.handle.as_ref().filter(|_| in_file).ok_or_else(ends_early)?;
                // SAFETY: the mapping is private and read-only and lives only during this
                // read; qopt never writes data files, and the range lies within the file's
                // length, checked when it was opened for this read. A file shortened by
                // another process while it is mapped is outside what any reader of mapped
                // files can guard against.
                map = unsafe { MmapOptions::new().offset(start as u64).len(n).map(handle) }.map_err(|e| {
                    DatasetError::new(DatasetErrorKind::Io, format!("{}: cannot map: {e}", part.label))
                })?;
                (&map[..], *big_endian)
            }
            Source::Owned(data) => (data.get(bytes_range.0..bytes_range.1).ok_or_else(ends_early)?, false),
        };
        if big_endian {
            let mut buf = [0u8; 8];
            for element in src.chunks_exact(size) {
                let b = &mut buf[..size];
                b.copy_from_slice(element);
                b.reverse();
                out.push(T::from_le(b));
            }
        } else {
            out.extend(src.chunks_exact(size).map(T::from_le));
        }
    }
    Ok(out)
}

fn build<T>(values: Vec<T>, shape: &[usize]) -> Result<Tensor, DatasetError>
where
    ArrayD<T>: Into<Tensor>,
{
    ArrayD::from_shape_vec(IxDyn(shape), values).map(Into::into).map_err(|e| {
        DatasetError::new(DatasetErrorKind::Format, format!("cannot build a tensor of shape {shape:?}: {e}"))
    })
}

/// Opens a regular file, returning it and its length.
fn open_regular(path: &Path, label: &str) -> Result<(File, u64), DatasetError> {
    let io = |what: &str, e: std::io::Error| {
        DatasetError::new(DatasetErrorKind::Io, format!("{label}: cannot {what}: {e}"))
    };
    // Checked before opening: opening a FIFO without a writer blocks forever.
    let kind = std::fs::metadata(path).map_err(|e| io("open", e))?;
    if !kind.is_file() {
        return Err(DatasetError::new(
            DatasetErrorKind::Io,
            format!("{label}: {}", not_a_regular_file(&kind)),
        ));
    }
    let file = File::open(path).map_err(|e| io("open", e))?;
    let meta = file.metadata().map_err(|e| io("read the metadata", e))?;
    if !meta.is_file() {
        return Err(DatasetError::new(
            DatasetErrorKind::Io,
            format!("{label}: {}", not_a_regular_file(&meta)),
        ));
    }
    Ok((file, meta.len()))
}

/// Opens a data file for a read, checking that its length is what it was when opened.
fn open_checked(file: &DataFile) -> Result<File, DatasetError> {
    let label = file.path.display().to_string();
    let (handle, len) = open_regular(&file.path, &label)?;
    if len != file.file_len {
        return Err(DatasetError::new(
            DatasetErrorKind::Io,
            format!(
                "{label}: the file changed since the data set was opened ({} bytes then, {len} now)",
                file.file_len
            ),
        ));
    }
    Ok(handle)
}

/// Fills `buf` from `offset` of `file`.
fn read_exact_at(file: &File, offset: u64, buf: &mut [u8]) -> std::io::Result<()> {
    #[cfg(unix)]
    {
        std::os::unix::fs::FileExt::read_exact_at(file, buf, offset)
    }
    #[cfg(not(unix))]
    {
        use std::io::{Read, Seek, SeekFrom};
        let mut f = file;
        f.seek(SeekFrom::Start(offset))?;
        f.read_exact(buf)
    }
}

/// Reads `len` bytes at `offset` of `file` into memory.
fn read_range(file: &File, offset: usize, len: usize, label: &str) -> Result<Vec<u8>, DatasetError> {
    let mut buf = Vec::new();
    buf.try_reserve_exact(len).map_err(|_| {
        DatasetError::new(DatasetErrorKind::Io, format!("{label}: cannot allocate {len} bytes to read it"))
    })?;
    buf.resize(len, 0);
    read_exact_at(file, offset as u64, &mut buf)
        .map_err(|e| DatasetError::new(DatasetErrorKind::Io, format!("{label}: cannot read: {e}")))?;
    Ok(buf)
}

/// The `.npy` / `.npz` files of a directory, sorted by file name.
fn list_directory(dir: &Path) -> Result<Vec<PathBuf>, DatasetError> {
    let shown = dir.display().to_string();
    let io = |e: std::io::Error| {
        DatasetError::new(DatasetErrorKind::Io, format!("{shown}: cannot read the directory: {e}"))
    };
    let mut names: Vec<OsString> = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(io)? {
        let entry = entry.map_err(io)?;
        let name = entry.file_name();
        let wanted = Path::new(&name)
            .extension()
            .and_then(|e| e.to_str())
            .is_some_and(|e| e.eq_ignore_ascii_case("npy") || e.eq_ignore_ascii_case("npz"));
        if !wanted {
            continue;
        }
        // Follows symbolic links; skips directories named `*.npy`.
        if std::fs::metadata(entry.path()).is_ok_and(|m| m.is_dir()) {
            continue;
        }
        names.push(name);
    }
    if names.is_empty() {
        return Err(DatasetError::new(
            DatasetErrorKind::Empty,
            format!("{shown}: no .npy or .npz files in the directory"),
        ));
    }
    names.sort();
    Ok(names.into_iter().map(|n| dir.join(n)).collect())
}

/// Reads the headers of one data file and fits its arrays to `args`. `first` is
/// the global index of its first sample.
fn open_file(path: PathBuf, args: &[ArgSpec], first: usize) -> Result<(DataFile, Vec<Fit>), DatasetError> {
    let label = path.display().to_string();
    let (handle, file_len) = open_regular(&path, &label)?;
    let file_len_usize = usize::try_from(file_len).map_err(|_| {
        DatasetError::new(DatasetErrorKind::Format, format!("{label}: the file is too large to map"))
    })?;
    let read_at = |offset: u64, buf: &mut [u8]| read_exact_at(&handle, offset, buf);
    let magic = read_range(&handle, 0, file_len_usize.min(2), &label)?;
    let mut parts = Vec::with_capacity(args.len());
    let mut fits = Vec::with_capacity(args.len());
    if magic == b"PK" {
        let members = npy::npz_members_with(file_len, read_at).map_err(|e| format_error(&label, e))?;
        for (index, member) in match_members(&label, &members, args)?.into_iter().enumerate() {
            let member_label = format!("{label}['{}']", member.name);
            let (dtype, shape, source) = if member.compressed {
                // DEFLATE: decompressed into memory once.
                let compressed =
                    read_range(&handle, member.data_offset, member.compressed_size, &member_label)?;
                let at_zero = npy::NpzMember { data_offset: 0, ..member.clone() };
                let data = npy::npz_member_data(&compressed, &at_zero)
                    .map_err(|e| format_error(&member_label, e))?;
                let array = npy::read_npy(&data).map_err(|e| format_error(&member_label, e))?;
                (array.dtype, array.shape, Source::Owned(array.data))
            } else {
                npy_source(&handle, member.data_offset, member.size, &member_label)?
            };
            fits.push(fit(&member_label, index, &args[index], dtype, &shape)?);
            parts.push(Part { label: member_label, source });
        }
    } else {
        if args.len() != 1 {
            return Err(mismatch(format!(
                "{label}: a .npy file holds one array but the function takes {} arguments; \
                 give a .npz with one array per argument",
                args.len()
            )));
        }
        let (dtype, shape, source) = npy_source(&handle, 0, file_len_usize, &label)?;
        fits.push(fit(&label, 0, &args[0], dtype, &shape)?);
        parts.push(Part { label: label.clone(), source });
    }
    drop(handle);

    // Every argument must agree on the samples per call and the number of samples.
    for (index, f) in fits.iter().enumerate().skip(1) {
        if f.batch != fits[0].batch {
            return Err(mismatch(format!(
                "{label}: argument 0 ({}) takes {} samples per call but argument {index} ({}) takes {}; \
                 give every argument rows of samples, or every argument whole arguments",
                args[0].name, fits[0].batch, args[index].name, f.batch
            )));
        }
        if f.samples != fits[0].samples {
            return Err(mismatch(format!(
                "{label}: the arguments have different numbers of samples: argument 0 ({}) has {}, \
                 argument {index} ({}) has {}",
                args[0].name, fits[0].samples, args[index].name, f.samples
            )));
        }
    }
    let samples = fits[0].samples;
    Ok((DataFile { path, file_len, first, samples, parts }, fits))
}

/// Reads the header of the `.npy` bytes at `base .. base + len` of `file`: dtype,
/// shape and where the data is. Fortran order of rank ≥ 2 is read into memory.
fn npy_source(
    file: &File,
    base: usize,
    len: usize,
    label: &str,
) -> Result<(DType, Vec<usize>, Source), DatasetError> {
    let header =
        npy::read_npy_header_with(len as u64, |offset, buf| read_exact_at(file, base as u64 + offset, buf))
            .map_err(|e| format_error(label, e))?;
    // The same checks and words as `read_npy`.
    let available = len - header.data_offset.min(len);
    if available < header.data_len {
        let e = NpyError::Truncated { what: "array data", expected: header.data_len, got: available };
        return Err(format_error(label, e));
    }
    if available > header.data_len {
        let e = NpyError::SizeMismatch(format!(
            "shape {:?} of {} needs {} data bytes, but the file has {available} ({} trailing)",
            header.shape,
            header.dtype,
            header.data_len,
            available - header.data_len
        ));
        return Err(format_error(label, e));
    }
    if header.fortran_order && header.shape.len() > 1 {
        let bytes = read_range(file, base, len, label)?;
        let array = npy::read_npy(&bytes).map_err(|e| format_error(label, e))?;
        return Ok((array.dtype, array.shape, Source::Owned(array.data)));
    }
    let offset = base + header.data_offset;
    Ok((header.dtype, header.shape, Source::Mapped { offset, big_endian: header.big_endian }))
}

/// Picks the member for each argument: by name (the argument's name, else
/// `argN`) when every argument finds one, else by position when the counts match.
fn match_members<'a>(
    label: &str,
    members: &'a [npy::NpzMember],
    args: &[ArgSpec],
) -> Result<Vec<&'a npy::NpzMember>, DatasetError> {
    let by_name: Option<Vec<&npy::NpzMember>> = args
        .iter()
        .enumerate()
        .map(|(i, arg)| {
            let numbered = format!("arg{i}");
            members
                .iter()
                .find(|m| m.name == arg.name)
                .or_else(|| members.iter().find(|m| m.name == numbered))
        })
        .collect();
    // A member named for an argument the function does not have (`arg1` of a
    // one-argument function) is data meant for another model: never ignored,
    // never taken by position.
    let stray = members.iter().find(|m| {
        m.name.strip_prefix("arg").and_then(|n| n.parse::<usize>().ok()).is_some_and(|n| n >= args.len())
            && !args.iter().any(|a| a.name == m.name)
    });
    if let Some(stray) = stray {
        return Err(mismatch(format!(
            "{label}: member '{}' names an argument the function does not have (it has {} argument{})",
            stray.name,
            args.len(),
            if args.len() == 1 { "" } else { "s" }
        )));
    }
    if let Some(found) = by_name {
        return Ok(found);
    }
    if members.len() == args.len() {
        return Ok(members.iter().collect());
    }
    let names: Vec<String> = members.iter().map(|m| format!("'{}'", m.name)).collect();
    let wanted: Vec<String> = args
        .iter()
        .enumerate()
        .map(
            |(i, a)| {
                if a.name == format!("arg{i}") {
                    a.name.clone()
                } else {
                    format!("{} or arg{i}", a.name)
                }
            },
        )
        .collect();
    Err(mismatch(format!(
        "{label}: cannot match the arrays [{}] to the function's {} argument(s): name them after the \
         arguments ({}) or store exactly {} array(s) in argument order",
        names.join(", "),
        args.len(),
        wanted.join(", "),
        args.len()
    )))
}

/// Fits a data array of `dtype` and `shape` to argument `index`.
fn fit(
    label: &str,
    index: usize,
    spec: &ArgSpec,
    dtype: DType,
    shape: &[usize],
) -> Result<Fit, DatasetError> {
    let wrong = || {
        let sample: &[usize] = spec.shape.get(1..).unwrap_or(&[]);
        mismatch(format!(
            "{label}: argument {index} ({}) expects {} samples of shape {sample:?} (the argument is {}), got {} {shape:?}",
            spec.name,
            spec.dtype,
            spec.type_text(),
            dtype
        ))
    };
    if dtype != spec.dtype {
        return Err(wrong());
    }
    let r = spec.shape.len();
    let (samples, batch, rows) = if r >= 1 && shape.len() == r && shape[1..] == spec.shape[1..] {
        if spec.shape[0] == 0 {
            return Err(mismatch(format!(
                "{label}: argument {index} ({}) has leading dimension 0 (the argument is {}), so a call takes no samples",
                spec.name,
                spec.type_text()
            )));
        }
        (shape[0], spec.shape[0], 1)
    } else if shape.len() == r + 1 && shape[1..] == spec.shape[..] {
        (shape[0], 1, spec.shape.first().copied().unwrap_or(1))
    } else {
        return Err(wrong());
    };
    let sample_elems = shape[1..]
        .iter()
        .try_fold(1usize, |acc, &d| acc.checked_mul(d))
        .filter(|n| n.checked_mul(dtype.size()).is_some())
        .ok_or_else(|| {
            DatasetError::new(
                DatasetErrorKind::Format,
                format!("{label}: a sample of shape {:?} is too large", &shape[1..]),
            )
        })?;
    Ok(Fit { samples, batch, rows, sample_elems })
}

#[cfg(test)]
mod tests {
    use super::*;
    use qopt_npy::{npy_bytes, write_npy_file, write_npz_file, RawArray};
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// A fresh temporary directory, removed on drop.
    struct TempDir(PathBuf);

    impl TempDir {
        fn new(tag: &str) -> TempDir {
            static COUNTER: AtomicUsize = AtomicUsize::new(0);
            let n = COUNTER.fetch_add(1, Ordering::Relaxed);
            let dir = std::env::temp_dir().join(format!("qopt-dataset-{tag}-{}-{n}", std::process::id()));
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(&dir).unwrap();
            TempDir(dir)
        }

        fn path(&self, name: &str) -> PathBuf {
            self.0.join(name)
        }
    }

    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn f32s(shape: &[usize], base: f32) -> RawArray {
        let n: usize = shape.iter().product();
        RawArray::from_elements(shape.to_vec(), &(0..n).map(|i| base + i as f32).collect::<Vec<_>>()).unwrap()
    }

    fn arg(name: &str, dtype: DType, shape: &[usize]) -> ArgSpec {
        ArgSpec::new(name, dtype, shape.to_vec())
    }

    fn values(t: &Tensor) -> Vec<f64> {
        t.to_f64_vec()
    }

    fn range(start: f64, n: usize) -> Vec<f64> {
        (0..n).map(|i| start + i as f64).collect()
    }

    /// `.npy` bytes with an arbitrary header dictionary.
    fn npy_with_dict(dict: &str, data: &[u8]) -> Vec<u8> {
        let mut header = dict.to_string();
        while !(10 + header.len() + 1).is_multiple_of(64) {
            header.push(' ');
        }
        header.push('\n');
        let mut out = b"\x93NUMPY\x01\x00".to_vec();
        out.extend_from_slice(&(header.len() as u16).to_le_bytes());
        out.extend_from_slice(header.as_bytes());
        out.extend_from_slice(data);
        out
    }

    /// A zip archive of DEFLATE members, as `np.savez_compressed` writes.
    fn deflate_npz(members: &[(&str, RawArray)]) -> Vec<u8> {
        let members: Vec<(String, Vec<u8>)> =
            members.iter().map(|(name, a)| (format!("{name}.npy"), npy_bytes(a).unwrap())).collect();
        let borrowed: Vec<(&str, Vec<u8>)> = members.iter().map(|(n, d)| (n.as_str(), d.clone())).collect();
        qopt_npy::testing::deflate_zip(&borrowed, false)
    }

    #[test]
    fn dataset_is_send_and_sync() {
        fn check<T: Send + Sync>() {}
        check::<Dataset>();
        check::<DatasetError>();
    }

    #[test]
    fn npy_rows_of_the_argument_rank() {
        let dir = TempDir::new("rows");
        let path = dir.path("calib.npy");
        write_npy_file(&path, &f32s(&[10, 8], 0.0)).unwrap();
        // Batch 2: a call takes two rows.
        let ds = Dataset::open(&path, &[arg("x", DType::F32, &[2, 8])]).unwrap();
        assert_eq!((ds.len(), ds.batch(), ds.calls(), ds.is_empty()), (10, 2, 5, false));
        let t = ds.read(4, 2).unwrap();
        assert_eq!(t.len(), 1);
        assert_eq!(t[0].shape(), &[2, 8]);
        assert_eq!(values(&t[0]), range(32.0, 16));
        assert_eq!(ds.read_call(2).unwrap(), t);
        // Any count of rows.
        let t = ds.read(9, 1).unwrap();
        assert_eq!((t[0].shape(), values(&t[0])), (&[1, 8][..], range(72.0, 8)));
        assert_eq!(ds.read(0, 10).unwrap()[0].shape(), &[10, 8]);
        assert_eq!(ds.read(3, 0).unwrap()[0].shape(), &[0, 8]);
        let e = ds.read(9, 2).unwrap_err();
        assert_eq!(e.kind(), DatasetErrorKind::Range);
        assert_eq!(e.to_string(), "samples 9..11 are out of range: the data set has 10 samples");
        assert_eq!(ds.read(usize::MAX, 2).unwrap_err().kind(), DatasetErrorKind::Range);
        assert_eq!(ds.args().next().unwrap().name, "x");
        assert_eq!(ds.files().collect::<Vec<_>>(), vec![path.as_path()]);
    }

    #[test]
    fn npy_whole_arguments_of_rank_plus_one() {
        let dir = TempDir::new("whole");
        let path = dir.path("calib.npy");
        write_npy_file(&path, &f32s(&[5, 2, 1, 3], 0.0)).unwrap();
        let ds = Dataset::open(&path, &[arg("arg0", DType::F32, &[2, 1, 3])]).unwrap();
        assert_eq!((ds.len(), ds.batch()), (5, 1));
        let t = ds.read(3, 1).unwrap();
        assert_eq!((t[0].shape(), values(&t[0])), (&[2, 1, 3][..], range(18.0, 6)));
        // Several whole arguments stack along the leading dimension.
        let t = ds.read(1, 2).unwrap();
        assert_eq!((t[0].shape(), values(&t[0])), (&[4, 1, 3][..], range(6.0, 12)));
        // A scalar argument from a rank-1 array.
        let path = dir.path("scalars.npy");
        write_npy_file(&path, &RawArray::from_elements(vec![3], &[7i64, 8, 9]).unwrap()).unwrap();
        let ds = Dataset::open(&path, &[arg("s", DType::I64, &[])]).unwrap();
        assert_eq!((ds.len(), ds.batch()), (3, 1));
        let t = ds.read(1, 1).unwrap();
        assert_eq!((t[0].shape(), values(&t[0])), (&[][..], vec![8.0]));
        assert_eq!(ds.read(0, 3).unwrap()[0].shape(), &[3]);
    }

    #[test]
    fn npz_by_name_by_position_and_several_arguments() {
        let dir = TempDir::new("npz");
        let x = f32s(&[6, 4], 0.0);
        let y = RawArray::from_elements(vec![6, 2], &(0..12).collect::<Vec<i32>>()).unwrap();
        let args = [arg("x", DType::F32, &[1, 4]), arg("y", DType::I32, &[1, 2])];
        let check = |ds: &Dataset| {
            assert_eq!((ds.len(), ds.batch()), (6, 1));
            let t = ds.read(2, 3).unwrap();
            assert_eq!((t[0].shape(), values(&t[0])), (&[3, 4][..], range(8.0, 12)));
            assert_eq!((t[1].shape(), values(&t[1])), (&[3, 2][..], range(4.0, 6)));
            assert_eq!(t[1].dtype(), DType::I32);
        };
        // By the arguments' names, in any member order, ignoring extra members.
        let path = dir.path("named.npz");
        let labels = RawArray::from_elements(vec![6], &[0u8; 6]).unwrap();
        write_npz_file(&path, &[("labels".into(), labels), ("y".into(), y.clone()), ("x".into(), x.clone())])
            .unwrap();
        check(&Dataset::open(&path, &args).unwrap());
        // By argN.
        let path = dir.path("numbered.npz");
        write_npz_file(&path, &[("arg1".into(), y.clone()), ("arg0".into(), x.clone())]).unwrap();
        check(&Dataset::open(&path, &args).unwrap());
        // By position (np.savez(x, y) names them arr_0, arr_1).
        let path = dir.path("positional.npz");
        write_npz_file(&path, &[("arr_0".into(), x.clone()), ("arr_1".into(), y.clone())]).unwrap();
        check(&Dataset::open(&path, &args).unwrap());
        // Neither.
        let path = dir.path("bad.npz");
        write_npz_file(&path, &[("a".into(), x.clone()), ("b".into(), y.clone()), ("c".into(), x.clone())])
            .unwrap();
        let e = Dataset::open(&path, &args).unwrap_err();
        assert_eq!(e.kind(), DatasetErrorKind::Mismatch);
        assert_eq!(
            e.to_string(),
            format!(
                "{}: cannot match the arrays ['a', 'b', 'c'] to the function's 2 argument(s): name them \
                 after the arguments (x or arg0, y or arg1) or store exactly 2 array(s) in argument order",
                path.display()
            )
        );
        // A member named for an argument the function lacks: not taken by
        // position for another argument, not ignored beside the right ones.
        let one = [arg("x", DType::F32, &[1, 4])];
        for (name, members) in [
            ("arg1-only.npz", vec![("arg1".to_string(), x.clone())]),
            ("arg0-arg1.npz", vec![("arg0".to_string(), x.clone()), ("arg1".to_string(), x.clone())]),
        ] {
            let path = dir.path(name);
            write_npz_file(&path, &members).unwrap();
            let e = Dataset::open(&path, &one).unwrap_err();
            assert_eq!(e.kind(), DatasetErrorKind::Mismatch);
            assert_eq!(
                e.to_string(),
                format!(
                    "{}: member 'arg1' names an argument the function does not have (it has 1 argument)",
                    path.display()
                )
            );
        }
        // A member of the wrong shape is named with its member.
        let path = dir.path("short.npz");
        write_npz_file(&path, &[("x".into(), x.clone()), ("y".into(), f32s(&[5, 2], 0.0))]).unwrap();
        let e = Dataset::open(&path, &args).unwrap_err();
        assert_eq!(
            e.to_string(),
            format!(
                "{}['y']: argument 1 (y) expects int32 samples of shape [2] (the argument is tensor<1x2xi32>), \
                 got float32 [5, 2]",
                path.display()
            )
        );
        // Different sample counts.
        let y5 = RawArray::from_elements(vec![5, 2], &[0i32; 10]).unwrap();
        write_npz_file(&path, &[("x".into(), x.clone()), ("y".into(), y5)]).unwrap();
        let e = Dataset::open(&path, &args).unwrap_err();
        assert_eq!(
            e.to_string(),
            format!(
                "{}: the arguments have different numbers of samples: argument 0 (x) has 6, argument 1 (y) has 5",
                path.display()
            )
        );
        // Rows for one argument, whole arguments for another, with different batches.
        let args2 = [arg("x", DType::F32, &[2, 4]), arg("y", DType::I32, &[2])];
        let y6 = RawArray::from_elements(vec![6, 2], &[0i32; 12]).unwrap();
        write_npz_file(&path, &[("x".into(), x.clone()), ("y".into(), y6)]).unwrap();
        let e = Dataset::open(&path, &args2).unwrap_err();
        assert!(
            e.to_string().contains("argument 0 (x) takes 2 samples per call but argument 1 (y) takes 1"),
            "{e}"
        );
        // A .npy cannot feed two arguments.
        let path = dir.path("one.npy");
        write_npy_file(&path, &x).unwrap();
        let e = Dataset::open(&path, &args).unwrap_err();
        assert!(
            e.to_string().contains("a .npy file holds one array but the function takes 2 arguments"),
            "{e}"
        );
    }

    #[test]
    fn directory_reads_across_files() {
        let dir = TempDir::new("dir");
        // Sorted by name: a.npy (3 samples), b.npz (4), c.npy (0), d.npy (2), e.NPZ (2,
        // compressed); other files ignored.
        write_npy_file(dir.path("d.npy"), &f32s(&[2, 1, 2], 700.0)).unwrap();
        write_npy_file(dir.path("a.npy"), &f32s(&[3, 1, 2], 0.0)).unwrap();
        write_npz_file(dir.path("b.npz"), &[("arg0".into(), f32s(&[4, 1, 2], 100.0))]).unwrap();
        write_npy_file(dir.path("c.npy"), &f32s(&[0, 1, 2], 0.0)).unwrap();
        std::fs::write(dir.path("e.NPZ"), deflate_npz(&[("arg0", f32s(&[2, 1, 2], 900.0))])).unwrap();
        std::fs::write(dir.path("README.txt"), "not data").unwrap();
        std::fs::create_dir(dir.path("sub.npy")).unwrap();
        let ds = Dataset::open(&dir.0, &[arg("arg0", DType::F32, &[1, 2])]).unwrap();
        assert_eq!((ds.len(), ds.batch()), (11, 1));
        let names: Vec<_> = ds.files().map(|p| p.file_name().unwrap().to_str().unwrap()).collect();
        assert_eq!(names, ["a.npy", "b.npz", "c.npy", "d.npy", "e.NPZ"]);
        // Samples 2..6 span a.npy and b.npz.
        let t = ds.read(2, 4).unwrap();
        assert_eq!(t[0].shape(), &[4, 2]);
        assert_eq!(values(&t[0]), vec![4.0, 5.0, 100.0, 101.0, 102.0, 103.0, 104.0, 105.0]);
        // Across the empty file.
        let t = ds.read(6, 3).unwrap();
        assert_eq!(values(&t[0]), vec![106.0, 107.0, 700.0, 701.0, 702.0, 703.0]);
        // Into the compressed member.
        let t = ds.read(8, 3).unwrap();
        assert_eq!(values(&t[0]), vec![702.0, 703.0, 900.0, 901.0, 902.0, 903.0]);
        // Everything in one read equals the reads one by one.
        let all = values(&ds.read(0, 11).unwrap()[0]);
        let one_by_one: Vec<f64> = (0..11).flat_map(|i| values(&ds.read(i, 1).unwrap()[0])).collect();
        assert_eq!(all, one_by_one);

        // Files that lay out samples differently.
        let dir = TempDir::new("dir-mixed");
        write_npy_file(dir.path("a.npy"), &f32s(&[4, 2], 0.0)).unwrap();
        write_npy_file(dir.path("b.npy"), &f32s(&[2, 2, 2], 0.0)).unwrap();
        let e = Dataset::open(&dir.0, &[arg("arg0", DType::F32, &[2, 2])]).unwrap_err();
        assert_eq!(
            e.to_string(),
            format!(
                "{}: a call takes 1 samples in this file but 2 in {}; every file must lay out its samples the same way",
                dir.path("b.npy").display(),
                dir.path("a.npy").display()
            )
        );

        // No data files.
        let dir = TempDir::new("dir-none");
        std::fs::write(dir.path("notes.txt"), "x").unwrap();
        let e = Dataset::open(&dir.0, &[arg("arg0", DType::F32, &[2, 2])]).unwrap_err();
        assert_eq!(e.kind(), DatasetErrorKind::Empty);
        assert_eq!(e.to_string(), format!("{}: no .npy or .npz files in the directory", dir.0.display()));
    }

    #[cfg(unix)]
    #[test]
    fn non_utf8_file_names() {
        use std::os::unix::ffi::OsStrExt;
        let dir = TempDir::new("utf8");
        let name = std::ffi::OsStr::from_bytes(b"\xffbad.npy");
        let path = dir.0.join(name);
        if std::fs::write(&path, b"").is_err() {
            return; // the file system refuses such names
        }
        write_npy_file(&path, &f32s(&[2, 2], f32::NAN)).unwrap();
        write_npy_file(dir.path("a.npy"), &f32s(&[1, 2], 0.0)).unwrap();
        let ds = Dataset::open(&dir.0, &[arg("arg0", DType::F32, &[1, 2])]).unwrap();
        assert_eq!(ds.len(), 3);
        let e = ds.read(1, 1).unwrap_err();
        assert!(
            e.to_string()
                .contains("bad.npy: sample 1 (sample 0 of this file), argument 0 (arg0): element 0 is NaN"),
            "{e}"
        );
        let e = Dataset::open(&path, &[arg("arg0", DType::F64, &[1, 2])]).unwrap_err();
        assert!(e.to_string().contains("expects float64"), "{e}");
    }

    #[test]
    fn big_endian_and_fortran_order() {
        let dir = TempDir::new("endian");
        let be: Vec<u8> = (0..6).flat_map(|i| (i as f32 * 1.5).to_be_bytes()).collect();
        let path = dir.path("be.npy");
        std::fs::write(
            &path,
            npy_with_dict("{'descr': '>f4', 'fortran_order': False, 'shape': (3, 2), }", &be),
        )
        .unwrap();
        let ds = Dataset::open(&path, &[arg("arg0", DType::F32, &[1, 2])]).unwrap();
        assert_eq!(values(&ds.read(1, 2).unwrap()[0]), vec![3.0, 4.5, 6.0, 7.5]);
        let be: Vec<u8> = [1i64, -2, 300].iter().flat_map(|v| v.to_be_bytes()).collect();
        std::fs::write(
            &path,
            npy_with_dict("{'descr': '>i8', 'fortran_order': False, 'shape': (3,), }", &be),
        )
        .unwrap();
        let ds = Dataset::open(&path, &[arg("arg0", DType::I64, &[1])]).unwrap();
        assert_eq!(values(&ds.read(0, 3).unwrap()[0]), vec![1.0, -2.0, 300.0]);
        // Fortran order (read into memory when opened): C array [[0, 1, 2], [3, 4, 5]].
        let f: Vec<u8> = [0f32, 3.0, 1.0, 4.0, 2.0, 5.0].iter().flat_map(|v| v.to_le_bytes()).collect();
        let path = dir.path("f.npy");
        std::fs::write(
            &path,
            npy_with_dict("{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }", &f),
        )
        .unwrap();
        let ds = Dataset::open(&path, &[arg("arg0", DType::F32, &[1, 3])]).unwrap();
        assert_eq!(values(&ds.read(1, 1).unwrap()[0]), vec![3.0, 4.0, 5.0]);
        // Booleans are normalised to 0 / 1.
        let path = dir.path("b.npy");
        std::fs::write(
            &path,
            npy_with_dict("{'descr': '|b1', 'fortran_order': False, 'shape': (2, 2), }", &[0, 7, 1, 0]),
        )
        .unwrap();
        let ds = Dataset::open(&path, &[arg("arg0", DType::Bool, &[1, 2])]).unwrap();
        assert_eq!(values(&ds.read(0, 2).unwrap()[0]), vec![0.0, 1.0, 1.0, 0.0]);
    }

    #[test]
    fn compressed_npz() {
        let dir = TempDir::new("deflate");
        let path = dir.path("c.npz");
        let x = f32s(&[20, 3], 0.0);
        let y = RawArray::from_elements(vec![20], &(0..20u8).collect::<Vec<_>>()).unwrap();
        std::fs::write(&path, deflate_npz(&[("x", x), ("y", y)])).unwrap();
        let ds = Dataset::open(&path, &[arg("x", DType::F32, &[1, 3]), arg("y", DType::U8, &[])]).unwrap();
        assert_eq!((ds.len(), ds.batch()), (20, 1));
        let t = ds.read(5, 2).unwrap();
        assert_eq!(values(&t[0]), range(15.0, 6));
        assert_eq!((t[1].shape(), values(&t[1])), (&[2][..], vec![5.0, 6.0]));
        // A corrupt member is reported with its name.
        let mut bytes = deflate_npz(&[("x", f32s(&[20, 3], 0.0))]);
        bytes[40] ^= 0x55;
        std::fs::write(&path, bytes).unwrap();
        let e = Dataset::open(&path, &[arg("x", DType::F32, &[1, 3])]).unwrap_err();
        assert_eq!(e.kind(), DatasetErrorKind::Format);
        assert!(e.to_string().starts_with(&format!("{}['x']: bad .npz archive", path.display())), "{e}");
    }

    #[test]
    fn nan_and_inf_are_reported() {
        let dir = TempDir::new("nan");
        let path = dir.path("calib.npy");
        let mut v: Vec<f32> = (0..20 * 64).map(|i| i as f32).collect();
        v[17 * 64 + 5] = f32::NAN;
        v[18 * 64 + 63] = f32::INFINITY;
        v[19 * 64] = f32::NEG_INFINITY;
        write_npy_file(&path, &RawArray::from_elements(vec![20, 1, 8, 8], &v).unwrap()).unwrap();
        let ds = Dataset::open(&path, &[arg("arg0", DType::F32, &[1, 1, 8, 8])]).unwrap();
        assert_eq!(ds.batch(), 1);
        let e = ds.read(10, 10).unwrap_err();
        assert_eq!(e.kind(), DatasetErrorKind::BadValue);
        assert_eq!(
            e.to_string(),
            format!("{}: sample 17, argument 0 (arg0): element 5 is NaN", path.display())
        );
        let e = ds.read(18, 1).unwrap_err();
        assert_eq!(
            e.to_string(),
            format!("{}: sample 18, argument 0 (arg0): element 63 is +inf", path.display())
        );
        let e = ds.read(19, 1).unwrap_err();
        assert_eq!(
            e.to_string(),
            format!("{}: sample 19, argument 0 (arg0): element 0 is -inf", path.display())
        );
        assert!(ds.read(0, 17).is_ok());

        // f64, several arguments: the earliest sample wins, then the lowest argument.
        let path = dir.path("two.npz");
        let mut a = vec![0f64; 8];
        a[3 * 2 + 1] = f64::NAN;
        let mut b = vec![0f64; 12];
        b[2 * 3 + 2] = f64::INFINITY;
        write_npz_file(
            &path,
            &[
                ("p".into(), RawArray::from_elements(vec![4, 2], &a).unwrap()),
                ("q".into(), RawArray::from_elements(vec![4, 3], &b).unwrap()),
            ],
        )
        .unwrap();
        let ds =
            Dataset::open(&path, &[arg("p", DType::F64, &[1, 2]), arg("q", DType::F64, &[1, 3])]).unwrap();
        let e = ds.read(0, 4).unwrap_err();
        assert_eq!(
            e.to_string(),
            format!("{}['q']: sample 2, argument 1 (q): element 2 is +inf", path.display())
        );
        let e = ds.read(3, 1).unwrap_err();
        assert_eq!(
            e.to_string(),
            format!("{}['p']: sample 3, argument 0 (p): element 1 is NaN", path.display())
        );

        // In a directory, the sample within the file too.
        let d = TempDir::new("nan-dir");
        write_npy_file(d.path("0.npy"), &f32s(&[100, 2], 0.0)).unwrap();
        let mut v = vec![0f32; 40];
        v[17 * 2 + 1] = f32::NAN;
        write_npy_file(d.path("1.npy"), &RawArray::from_elements(vec![20, 2], &v).unwrap()).unwrap();
        let ds = Dataset::open(&d.0, &[arg("arg0", DType::F32, &[1, 2])]).unwrap();
        let e = ds.read(90, 30).unwrap_err();
        assert_eq!(
            e.to_string(),
            format!(
                "{}: sample 117 (sample 17 of this file), argument 0 (arg0): element 1 is NaN",
                d.path("1.npy").display()
            )
        );
    }

    #[test]
    fn wrong_dtype_and_shape() {
        let dir = TempDir::new("wrong");
        let path = dir.path("calib.npy");
        let a = RawArray::from_elements(vec![200, 1, 8, 8], &vec![0f64; 200 * 64]).unwrap();
        write_npy_file(&path, &a).unwrap();
        let spec = [arg("arg0", DType::F32, &[1, 1, 8, 8])];
        let e = Dataset::open(&path, &spec).unwrap_err();
        assert_eq!(e.kind(), DatasetErrorKind::Mismatch);
        assert_eq!(
            e.to_string(),
            format!(
                "{}: argument 0 (arg0) expects float32 samples of shape [1, 8, 8] (the argument is \
                 tensor<1x1x8x8xf32>), got float64 [200, 1, 8, 8]",
                path.display()
            )
        );
        write_npy_file(&path, &f32s(&[200, 64], 0.0)).unwrap();
        let e = Dataset::open(&path, &spec).unwrap_err();
        assert_eq!(
            e.to_string(),
            format!(
                "{}: argument 0 (arg0) expects float32 samples of shape [1, 8, 8] (the argument is \
                 tensor<1x1x8x8xf32>), got float32 [200, 64]",
                path.display()
            )
        );
        let e = Dataset::open(&path, &[arg("input", DType::I8, &[])]).unwrap_err();
        assert_eq!(
            e.to_string(),
            format!(
                "{}: argument 0 (input) expects int8 samples of shape [] (the argument is tensor<i8>), \
                 got float32 [200, 64]",
                path.display()
            )
        );
        let e = Dataset::open(&path, &[arg("x", DType::F32, &[0, 64])]).unwrap_err();
        assert!(e.to_string().contains("has leading dimension 0"), "{e}");
        let e = Dataset::open(&path, &[]).unwrap_err();
        assert!(e.to_string().ends_with("the function has no arguments to feed"), "{e}");
    }

    #[test]
    fn empty_truncated_missing_and_overflowing_files() {
        let dir = TempDir::new("bad");
        let spec = [arg("arg0", DType::F32, &[1, 4])];
        // Zero samples.
        let path = dir.path("empty.npy");
        write_npy_file(&path, &f32s(&[0, 4], 0.0)).unwrap();
        let e = Dataset::open(&path, &spec).unwrap_err();
        assert_eq!(e.kind(), DatasetErrorKind::Empty);
        assert_eq!(e.to_string(), format!("{}: the data set is empty", path.display()));
        // Truncated data, truncated header, trailing bytes, an empty file.
        let path = dir.path("cut.npy");
        let bytes = npy_bytes(&f32s(&[5, 4], 0.0)).unwrap();
        std::fs::write(&path, &bytes[..bytes.len() - 3]).unwrap();
        let e = Dataset::open(&path, &spec).unwrap_err();
        assert_eq!(e.kind(), DatasetErrorKind::Format);
        assert_eq!(
            e.to_string(),
            format!("{}: truncated .npy data: array data needs 80 bytes, only 77 available", path.display())
        );
        for cut in 0..bytes.len() {
            std::fs::write(&path, &bytes[..cut]).unwrap();
            assert!(Dataset::open(&path, &spec).is_err(), "cut at {cut}");
        }
        let mut long = bytes.clone();
        long.push(0);
        std::fs::write(&path, &long).unwrap();
        assert!(Dataset::open(&path, &spec).unwrap_err().to_string().contains("1 trailing"));
        // Truncated .npz archives.
        let npz = dir.path("cut.npz");
        write_npz_file(&npz, &[("arg0".into(), f32s(&[5, 4], 0.0))]).unwrap();
        let zbytes = std::fs::read(&npz).unwrap();
        for cut in [0, 2, 10, 50, zbytes.len() / 2, zbytes.len() - 1] {
            std::fs::write(&npz, &zbytes[..cut]).unwrap();
            assert!(Dataset::open(&npz, &spec).is_err(), "cut at {cut}");
        }
        // Shapes whose byte counts overflow.
        let huge = dir.path("huge.npy");
        let dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (4611686018427387904, 4), }";
        std::fs::write(&huge, npy_with_dict(dict, &[])).unwrap();
        let e = Dataset::open(&huge, &spec).unwrap_err();
        assert_eq!(e.kind(), DatasetErrorKind::Format);
        assert!(e.to_string().contains("too large"), "{e}");
        let dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (0, 4611686018427387904, 4), }";
        std::fs::write(&huge, npy_with_dict(dict, &[])).unwrap();
        let e = Dataset::open(&huge, &[arg("arg0", DType::F32, &[1, 4611686018427387904, 4])]).unwrap_err();
        assert!(e.to_string().contains("too large"), "{e}");
        // Missing file or directory.
        let e = Dataset::open(&dir.path("missing.npy"), &spec).unwrap_err();
        assert_eq!(e.kind(), DatasetErrorKind::Io);
        assert!(
            e.to_string().starts_with(&format!("{}: cannot open: ", dir.path("missing.npy").display())),
            "{e}"
        );
        // A file that changes after opening.
        let path = dir.path("changing.npy");
        write_npy_file(&path, &f32s(&[5, 4], 0.0)).unwrap();
        let ds = Dataset::open(&path, &spec).unwrap();
        write_npy_file(&path, &f32s(&[4, 4], 0.0)).unwrap();
        let e = ds.read(0, 1).unwrap_err();
        assert_eq!(e.kind(), DatasetErrorKind::Io);
        assert!(e.to_string().contains("the file changed since the data set was opened"), "{e}");
        std::fs::remove_file(&path).unwrap();
        assert_eq!(ds.read(0, 1).unwrap_err().kind(), DatasetErrorKind::Io);
    }

    #[cfg(unix)]
    #[test]
    fn unreadable_directory() {
        use std::os::unix::fs::PermissionsExt;
        let dir = TempDir::new("perm");
        let sub = dir.path("locked");
        std::fs::create_dir(&sub).unwrap();
        write_npy_file(sub.join("a.npy"), &f32s(&[2, 4], 0.0)).unwrap();
        std::fs::set_permissions(&sub, std::fs::Permissions::from_mode(0o000)).unwrap();
        let result = Dataset::open(&sub, &[arg("arg0", DType::F32, &[1, 4])]);
        std::fs::set_permissions(&sub, std::fs::Permissions::from_mode(0o755)).unwrap();
        // Root reads it anyway; anyone else gets an error naming the directory.
        if let Err(e) = result {
            assert_eq!(e.kind(), DatasetErrorKind::Io);
            assert!(e.to_string().contains("cannot read the directory"), "{e}");
        }
    }

    #[test]
    fn two_threads_read_the_same_tensors() {
        let dir = TempDir::new("threads");
        for (i, name) in ["a.npy", "b.npy", "c.npz"].iter().enumerate() {
            let x = f32s(&[37, 3, 4], 1000.0 * i as f32);
            if name.ends_with("npz") {
                write_npz_file(dir.path(name), &[("arg0".into(), x)]).unwrap();
            } else {
                write_npy_file(dir.path(name), &x).unwrap();
            }
        }
        let ds = Dataset::open(&dir.0, &[arg("arg0", DType::F32, &[3, 3, 4])]).unwrap();
        assert_eq!((ds.len(), ds.batch(), ds.calls()), (111, 3, 37));
        let expected: Vec<Vec<Tensor>> = (0..ds.calls()).map(|c| ds.read_call(c).unwrap()).collect();
        let ds = &ds;
        let results: Vec<Vec<Vec<Tensor>>> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..2)
                .map(|_| {
                    s.spawn(move || (0..ds.calls()).map(|c| ds.read_call(c).unwrap()).collect::<Vec<_>>())
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        for r in results {
            assert_eq!(r, expected);
        }
        assert_eq!(expected[12][0].shape(), &[3, 3, 4]);
    }
}
