//! Unit tests of `dataset.rs`.

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
    assert!(e.to_string().contains("a .npy file holds one array but the function takes 2 arguments"), "{e}");
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
    std::fs::write(&path, npy_with_dict("{'descr': '>f4', 'fortran_order': False, 'shape': (3, 2), }", &be))
        .unwrap();
    let ds = Dataset::open(&path, &[arg("arg0", DType::F32, &[1, 2])]).unwrap();
    assert_eq!(values(&ds.read(1, 2).unwrap()[0]), vec![3.0, 4.5, 6.0, 7.5]);
    let be: Vec<u8> = [1i64, -2, 300].iter().flat_map(|v| v.to_be_bytes()).collect();
    std::fs::write(&path, npy_with_dict("{'descr': '>i8', 'fortran_order': False, 'shape': (3,), }", &be))
        .unwrap();
    let ds = Dataset::open(&path, &[arg("arg0", DType::I64, &[1])]).unwrap();
    assert_eq!(values(&ds.read(0, 3).unwrap()[0]), vec![1.0, -2.0, 300.0]);
    // Fortran order (read into memory when opened): C array [[0, 1, 2], [3, 4, 5]].
    let f: Vec<u8> = [0f32, 3.0, 1.0, 4.0, 2.0, 5.0].iter().flat_map(|v| v.to_le_bytes()).collect();
    let path = dir.path("f.npy");
    std::fs::write(&path, npy_with_dict("{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }", &f))
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
    assert_eq!(e.to_string(), format!("{}: sample 17, argument 0 (arg0): element 5 is NaN", path.display()));
    let e = ds.read(18, 1).unwrap_err();
    assert_eq!(
        e.to_string(),
        format!("{}: sample 18, argument 0 (arg0): element 63 is +inf", path.display())
    );
    let e = ds.read(19, 1).unwrap_err();
    assert_eq!(e.to_string(), format!("{}: sample 19, argument 0 (arg0): element 0 is -inf", path.display()));
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
    let ds = Dataset::open(&path, &[arg("p", DType::F64, &[1, 2]), arg("q", DType::F64, &[1, 3])]).unwrap();
    let e = ds.read(0, 4).unwrap_err();
    assert_eq!(
        e.to_string(),
        format!("{}['q']: sample 2, argument 1 (q): element 2 is +inf", path.display())
    );
    let e = ds.read(3, 1).unwrap_err();
    assert_eq!(e.to_string(), format!("{}['p']: sample 3, argument 0 (p): element 1 is NaN", path.display()));

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
            .map(|_| s.spawn(move || (0..ds.calls()).map(|c| ds.read_call(c).unwrap()).collect::<Vec<_>>()))
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for r in results {
        assert_eq!(r, expected);
    }
    assert_eq!(expected[12][0].shape(), &[3, 3, 4]);
}
