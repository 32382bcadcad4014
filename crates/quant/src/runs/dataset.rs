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
#[path = "dataset_tests.rs"]
mod tests;
