//! Unit tests of the readers and writers.

use crate::array::element_count;
use crate::npy::MAGIC;
use crate::testing::deflate_zip;
use crate::*;
use std::path::Path;
use std::{fmt, io};

fn sample(dtype: DType, shape: &[usize]) -> RawArray {
    let n = element_count(shape).unwrap();
    let data = match dtype {
        DType::F32 => {
            RawArray::from_elements(shape.to_vec(), &(0..n).map(|i| i as f32 * 0.5 - 3.0).collect::<Vec<_>>())
        }
        DType::F64 => {
            RawArray::from_elements(shape.to_vec(), &(0..n).map(|i| i as f64 / 3.0).collect::<Vec<_>>())
        }
        DType::I8 => RawArray::from_elements(
            shape.to_vec(),
            &(0..n).map(|i| (i as i8).wrapping_sub(100)).collect::<Vec<_>>(),
        ),
        DType::U8 => {
            RawArray::from_elements(shape.to_vec(), &(0..n).map(|i| (i * 7) as u8).collect::<Vec<_>>())
        }
        DType::I16 => {
            RawArray::from_elements(shape.to_vec(), &(0..n).map(|i| i as i16 * -300).collect::<Vec<_>>())
        }
        DType::I32 => {
            RawArray::from_elements(shape.to_vec(), &(0..n).map(|i| i as i32 * -70_000).collect::<Vec<_>>())
        }
        DType::I64 => RawArray::from_elements(
            shape.to_vec(),
            &(0..n).map(|i| i as i64 * -(1 << 40)).collect::<Vec<_>>(),
        ),
        DType::Bool => {
            RawArray::from_elements(shape.to_vec(), &(0..n).map(|i| i % 3 == 0).collect::<Vec<_>>())
        }
    };
    data.unwrap()
}

const SHAPES: &[&[usize]] = &[&[], &[0], &[5], &[2, 3], &[3, 0, 2], &[1, 3, 2, 2]];

#[test]
fn round_trip_every_dtype_and_shape() {
    for dtype in DType::ALL {
        for shape in SHAPES {
            let array = sample(dtype, shape);
            let bytes = npy_bytes(&array).unwrap();
            assert_eq!(bytes.len() % 64, array.data.len() % 64, "header aligned to 64");
            let back = read_npy(&bytes).unwrap();
            assert_eq!(back, array, "{dtype} {shape:?}");
        }
    }
}

#[test]
fn typed_access() {
    let a = RawArray::from_elements(vec![2, 2], &[1.0f32, 2.0, 3.0, 4.0]).unwrap();
    assert_eq!(a.len(), 4);
    assert_eq!(a.to_vec::<f32>().unwrap(), vec![1.0, 2.0, 3.0, 4.0]);
    let err = a.to_vec::<i64>().unwrap_err();
    assert!(matches!(err, NpyError::DtypeMismatch { expected: DType::I64, found: DType::F32 }));
    assert!(RawArray::from_elements(vec![3], &[1u8, 2]).is_err());
    assert!(RawArray::new(DType::I32, vec![2], vec![0; 7]).is_err());
    let zero_d = RawArray::from_elements(vec![], &[7i16]).unwrap();
    assert_eq!(zero_d.len(), 1);
    assert!(RawArray::from_elements::<f64>(vec![0, 4], &[]).unwrap().is_empty());
}

#[test]
fn header_matches_numpy_layout() {
    let a = RawArray::from_elements(vec![597, 64], &vec![0f32; 597 * 64]).unwrap();
    let bytes = npy_bytes(&a).unwrap();
    let expected_dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (597, 64), }";
    assert_eq!(&bytes[..8], b"\x93NUMPY\x01\x00");
    assert_eq!(u16::from_le_bytes([bytes[8], bytes[9]]), 118);
    assert_eq!(&bytes[10..10 + expected_dict.len()], expected_dict.as_bytes());
    assert_eq!(bytes[127], b'\n');
    let one = npy_bytes(&sample(DType::I64, &[597])).unwrap();
    assert!(one[10..128].starts_with(b"{'descr': '<i8', 'fortran_order': False, 'shape': (597,), }"));
    let scalar = npy_bytes(&sample(DType::Bool, &[])).unwrap();
    assert!(scalar[10..].starts_with(b"{'descr': '|b1', 'fortran_order': False, 'shape': (), }"));
}

/// Builds a `.npy` file with an arbitrary header dict and payload.
fn npy_with(version: (u8, u8), dict: &str, payload: &[u8]) -> Vec<u8> {
    let mut out = MAGIC.to_vec();
    out.extend_from_slice(&[version.0, version.1]);
    let header = format!("{dict}\n");
    if version.0 == 1 {
        out.extend_from_slice(&(header.len() as u16).to_le_bytes());
    } else {
        out.extend_from_slice(&(header.len() as u32).to_le_bytes());
    }
    out.extend_from_slice(header.as_bytes());
    out.extend_from_slice(payload);
    out
}

#[test]
fn versions_2_and_3() {
    let payload: Vec<u8> = [1i32, -2, 3].iter().flat_map(|v| v.to_le_bytes()).collect();
    for version in [(1, 0), (2, 0), (3, 0)] {
        let bytes = npy_with(version, "{'descr': '<i4', 'fortran_order': False, 'shape': (3,), }", &payload);
        let a = read_npy(&bytes).unwrap();
        assert_eq!(a.to_vec::<i32>().unwrap(), vec![1, -2, 3]);
    }
    let err = read_npy(&npy_with((4, 0), "{}", &[])).unwrap_err();
    assert!(matches!(err, NpyError::UnsupportedVersion(4, 0)));
    assert!(err.to_string().contains("4.0"));
    assert!(read_npy(&npy_with((1, 1), "{}", &[])).is_err());
}

#[test]
fn header_variants() {
    let f = 1.5f32.to_le_bytes();
    // Key order, double quotes, no trailing comma, extra whitespace, Python 2 longs.
    for dict in [
        "{'shape': (1,), 'fortran_order': False, 'descr': '<f4'}",
        "{\"descr\": \"<f4\", \"fortran_order\": False, \"shape\": (1,)}",
        "  { 'descr' : '<f4' ,'fortran_order':False,'shape':( 1 , ) , }  ",
        "{'descr': '<f4', 'fortran_order': False, 'shape': (1L,), }",
    ] {
        let a = read_npy(&npy_with((1, 0), dict, &f)).unwrap_or_else(|e| panic!("{dict}: {e}"));
        assert_eq!(a.shape, vec![1]);
        assert_eq!(a.to_vec::<f32>().unwrap(), vec![1.5]);
    }
    // Single-byte types accept any byte-order marker; `=` is rejected for multi-byte ones.
    for descr in ["|u1", "<u1", "=u1", ">u1"] {
        let dict = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': (2,), }}");
        assert_eq!(read_npy(&npy_with((1, 0), &dict, &[3, 4])).unwrap().data, vec![3, 4]);
    }
    let dict = "{'descr': '=f4', 'fortran_order': False, 'shape': (1,), }";
    assert!(matches!(read_npy(&npy_with((1, 0), dict, &f)), Err(NpyError::UnsupportedDtype(_))));
    // Bool bytes are normalized.
    let dict = "{'descr': '|b1', 'fortran_order': False, 'shape': (2,), }";
    assert_eq!(read_npy(&npy_with((1, 0), dict, &[0, 5])).unwrap().data, vec![0, 1]);
}

#[test]
fn big_endian_is_converted() {
    let payload: Vec<u8> = [1.25f64, -2.0].iter().flat_map(|v| v.to_be_bytes()).collect();
    let dict = "{'descr': '>f8', 'fortran_order': False, 'shape': (2,), }";
    let a = read_npy(&npy_with((1, 0), dict, &payload)).unwrap();
    assert_eq!(a.to_vec::<f64>().unwrap(), vec![1.25, -2.0]);
    let payload: Vec<u8> = [-5i16, 300].iter().flat_map(|v| v.to_be_bytes()).collect();
    let dict = "{'descr': '>i2', 'fortran_order': False, 'shape': (2,), }";
    assert_eq!(read_npy(&npy_with((1, 0), dict, &payload)).unwrap().to_vec::<i16>().unwrap(), vec![-5, 300]);
}

#[test]
fn fortran_order_is_transposed() {
    // C-order [[0,1,2],[3,4,5]] stored column-major is 0,3,1,4,2,5.
    let payload: Vec<u8> = [0i32, 3, 1, 4, 2, 5].iter().flat_map(|v| v.to_le_bytes()).collect();
    let dict = "{'descr': '<i4', 'fortran_order': True, 'shape': (2, 3), }";
    let a = read_npy(&npy_with((1, 0), dict, &payload)).unwrap();
    assert_eq!(a.shape, vec![2, 3]);
    assert_eq!(a.to_vec::<i32>().unwrap(), vec![0, 1, 2, 3, 4, 5]);
    // 3-d: element (i, j, k) has value 100i + 10j + k, stored column-major.
    let shape = [2usize, 3, 4];
    let mut fortran = Vec::new();
    for k in 0..4 {
        for j in 0..3 {
            for i in 0..2 {
                fortran.push((100 * i + 10 * j + k) as u8);
            }
        }
    }
    let dict = "{'descr': '|u1', 'fortran_order': True, 'shape': (2, 3, 4), }";
    let a = read_npy(&npy_with((1, 0), dict, &fortran)).unwrap();
    let mut expected = Vec::new();
    for i in 0..shape[0] {
        for j in 0..shape[1] {
            for k in 0..shape[2] {
                expected.push((100 * i + 10 * j + k) as u8);
            }
        }
    }
    assert_eq!(a.data, expected);
    // Empty and 1-d Fortran arrays are trivially fine.
    let dict = "{'descr': '|u1', 'fortran_order': True, 'shape': (0, 3), }";
    assert!(read_npy(&npy_with((1, 0), dict, &[])).unwrap().is_empty());
    let dict = "{'descr': '|u1', 'fortran_order': True, 'shape': (3,), }";
    assert_eq!(read_npy(&npy_with((1, 0), dict, &[1, 2, 3])).unwrap().data, vec![1, 2, 3]);
}

#[test]
fn clear_errors() {
    let err_of = |dict: &str, payload: &[u8]| read_npy(&npy_with((1, 0), dict, payload)).unwrap_err();
    let e = err_of("{'descr': '<c8', 'fortran_order': False, 'shape': (1,), }", &[0; 8]);
    assert!(matches!(&e, NpyError::UnsupportedDtype(d) if d == "<c8"));
    assert!(e.to_string().contains("'<c8'"), "{e}");
    let e = err_of("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (1,), }", &[0; 4]);
    assert!(matches!(e, NpyError::UnsupportedDtype(_)), "{e}");
    for descr in ["<f2", "<u2", "<U3", "|O", "|S4", "f4", ""] {
        let dict = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': (1,), }}");
        assert!(matches!(err_of(&dict, &[0; 4]), NpyError::UnsupportedDtype(_)), "{descr}");
    }
    let e = err_of("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", &[0; 20]);
    assert!(matches!(e, NpyError::Truncated { expected: 24, got: 20, .. }), "{e}");
    assert!(e.to_string().contains("truncated"));
    let e = err_of("{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }", &[0; 5]);
    assert!(matches!(e, NpyError::SizeMismatch(_)), "{e}");
    let e = err_of("{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999, 99999999999), }", &[]);
    assert!(matches!(e, NpyError::SizeMismatch(_)), "{e}");
    let e = err_of("{'descr': '<f4', 'fortran_order': False, 'shape': (999999999999999999999999,), }", &[]);
    assert!(matches!(e, NpyError::SizeMismatch(_)), "{e}");
    for dict in [
        "{'descr': '<f4', 'fortran_order': False}",
        "{'descr': '<f4', 'fortran_order': False, 'shape': (1,), 'x': 1}",
        "{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (1,)}",
        "{'descr': '<f4', 'fortran_order': 0, 'shape': (1,)}",
        "{'descr': '<f4', 'fortran_order': False, 'shape': (-1,)}",
        "{'descr': '<f4', 'fortran_order': False, 'shape': (1)}",
        "{'descr': '<f4', 'fortran_order': False, 'shape': [1]}",
        "{'descr': '<f4', 'fortran_order': False, 'shape': (1,)} trailing",
        "{'descr': '<f4' 'fortran_order': False, 'shape': (1,)}",
        "{'descr: '<f4', 'fortran_order': False, 'shape': (1,)}",
        "",
        "{",
    ] {
        assert!(matches!(err_of(dict, &[0; 4]), NpyError::BadHeader(_)), "{dict}");
    }
    assert!(matches!(read_npy(b"PK\x03\x04 definitely not npy"), Err(NpyError::BadMagic)));
    assert!(matches!(read_npy(b""), Err(NpyError::Truncated { .. })));
    assert!(matches!(read_npy(b"hi"), Err(NpyError::BadMagic)));
    assert!(matches!(read_npy(b"\x93NUM"), Err(NpyError::Truncated { .. })));
    // Writing an inconsistent array is refused.
    let bad = RawArray { dtype: DType::F32, shape: vec![2], data: vec![0; 3] };
    assert_eq!(npy_bytes(&bad).unwrap_err().kind(), io::ErrorKind::InvalidInput);
}

/// Tiny deterministic generator for garbage inputs.
struct Lcg(u64);
impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        self.0 >> 33
    }
}

#[test]
fn garbage_never_panics() {
    let mut rng = Lcg(42);
    for len in 0..300 {
        let bytes: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
        assert!(read_npy(&bytes).is_err());
        assert!(read_npz(&bytes).is_err());
        let mut with_magic = MAGIC.to_vec();
        with_magic.extend_from_slice(&bytes);
        let _ = read_npy(&with_magic);
    }
    // Every truncation and every single-byte corruption of valid files.
    let npy = npy_bytes(&sample(DType::I16, &[2, 3])).unwrap();
    let npz = npz_bytes(&[("a".into(), sample(DType::F32, &[3])), ("b".into(), sample(DType::U8, &[2, 2]))]);
    for file in [&npy, &npz] {
        for cut in 0..file.len() {
            let _ = read_npy(&file[..cut]);
            let _ = read_npz(&file[..cut]);
        }
        for i in 0..file.len() {
            for b in [0u8, 0xFF, b'(', b',', b'\'', rng.next() as u8] {
                let mut m = file.clone();
                m[i] = b;
                let _ = read_npy(&m);
                let _ = read_npz(&m);
            }
        }
    }
    for cut in 0..npy.len() {
        assert!(read_npy(&npy[..cut]).is_err());
    }
    for cut in 0..npz.len() {
        assert!(read_npz(&npz[..cut]).is_err());
    }
}

fn npz_bytes(arrays: &[(String, RawArray)]) -> Vec<u8> {
    let mut out = Vec::new();
    write_npz(arrays, &mut out).unwrap();
    out
}

#[test]
fn crc32_known_values() {
    assert_eq!(crc32(b""), 0);
    assert_eq!(crc32(b"123456789"), 0xCBF4_3926);
    assert_eq!(crc32(b"The quick brown fox jumps over the lazy dog"), 0x414F_A339);
}

#[test]
fn npz_round_trip() {
    let arrays: Vec<(String, RawArray)> = DType::ALL
        .iter()
        .zip(SHAPES.iter().cycle())
        .enumerate()
        .map(|(i, (&dtype, shape))| (format!("arr_{i}"), sample(dtype, shape)))
        .collect();
    let bytes = npz_bytes(&arrays);
    assert_eq!(&bytes[..4], b"PK\x03\x04");
    assert_eq!(read_npz(&bytes).unwrap(), arrays);
    assert_eq!(read_arrays(&bytes, "x").unwrap(), arrays);
    assert!(read_npz(&npz_bytes(&[])).unwrap().is_empty());
    let dup = [("a".to_string(), sample(DType::U8, &[1])), ("a".to_string(), sample(DType::U8, &[1]))];
    assert!(write_npz(&dup, &mut Vec::new()).is_err());
    // Non-ASCII names survive (UTF-8 flag).
    let named = vec![("gewicht_ß".to_string(), sample(DType::F64, &[2]))];
    assert_eq!(read_npz(&npz_bytes(&named)).unwrap(), named);
}

#[test]
fn npz_deflate() {
    let x = sample(DType::F32, &[4, 8]);
    let y = sample(DType::I64, &[3]);
    let members = [("x.npy", npy_bytes(&x).unwrap()), ("y.npy", npy_bytes(&y).unwrap())];
    for zip64_local in [false, true] {
        let zip = deflate_zip(&members, zip64_local);
        let read = read_npz(&zip).unwrap();
        assert_eq!(read, vec![("x".to_string(), x.clone()), ("y".to_string(), y.clone())]);
    }
    // Corrupting the compressed payload is detected (inflate failure or CRC mismatch).
    let mut zip = deflate_zip(&members, false);
    let data_start = 30 + "x.npy".len();
    zip[data_start + 10] ^= 0x55;
    assert!(matches!(read_npz(&zip), Err(NpyError::BadZip(_) | NpyError::Member { .. })));
    // Non-.npy members and unsupported methods are rejected by name.
    let zip = deflate_zip(&[("notes.txt", b"hello".to_vec())], false);
    let e = read_npz(&zip).unwrap_err();
    assert!(e.to_string().contains("notes.txt"), "{e}");
    let mut zip = deflate_zip(&[("x.npy", npy_bytes(&x).unwrap())], false);
    let cd = zip.len() - 22 - (46 + 5);
    zip[cd + 10] = 12; // bzip2
    let e = read_npz(&zip).unwrap_err();
    assert!(e.to_string().contains("compression method 12"), "{e}");
    // An invalid member is reported with its name.
    let zip = deflate_zip(&[("bad.npy", b"\x93NUMPY\x09\x00".to_vec())], false);
    let e = read_npz(&zip).unwrap_err();
    assert!(matches!(&e, NpyError::Member { name, .. } if name == "bad"), "{e}");
    assert!(e.to_string().contains("9.0"), "{e}");
}

// Archives written by Python's `zipfile` exactly as `np.savez` / `np.savez_compressed` do
// (`ZipFile(..., allowZip64=True)`, `zipf.open(name, 'w', force_zip64=True)`), holding
// a = float32 [[1.5, -2.0], [0.25, 8.0]] and b = int64 [4, 4, 8]. The streamed variant was
// written to a non-seekable file, so its members use data descriptors.
const PY_SAVEZ: &str = concat!(
    "504b03042d00000000000000210037e44249ffffffffffffffff05001400612e6e707901001000900000000000000090",
    "00000000000000934e554d5059010076007b276465736372273a20273c6634272c2027666f727472616e5f6f72646572",
    "273a2046616c73652c20277368617065273a2028322c2032292c207d2020202020202020202020202020202020202020",
    "20202020202020202020202020202020202020202020202020202020202020202020202020200a0000c03f000000c000",
    "00803e00000041504b03042d000000000000002100761f8d68ffffffffffffffff05001400622e6e7079010010009800",
    "0000000000009800000000000000934e554d5059010076007b276465736372273a20273c6938272c2027666f72747261",
    "6e5f6f72646572273a2046616c73652c20277368617065273a2028332c292c207d202020202020202020202020202020",
    "2020202020202020202020202020202020202020202020202020202020202020202020202020202020202020200a0400",
    "00000000000004000000000000000800000000000000504b01022d032d00000000000000210037e44249900000009000",
    "0000050000000000000000000000800100000000612e6e7079504b01022d032d000000000000002100761f8d68980000",
    "00980000000500000000000000000000008001c7000000622e6e7079504b050600000000020002006600000096010000",
    "0000",
);

const PY_SAVEZ_COMPRESSED: &str = concat!(
    "504b03042d00000008000000210037e44249ffffffffffffffff05001400612e6e707901001000900000000000000054",
    "000000000000009bec17ea1b10c9c850c650ad9e925a9c5ca46ea5a06e9366a2aea3a09e965f54529498179f5f94920a",
    "12774bcc294e058a17672416a402f91a463a0a469a3a0ab50a64032e068603f60c408281a1c10e483b0200504b03042d",
    "000000080000002100761f8d68ffffffffffffffff05001400622e6e70790100100098000000000000004c0000000000",
    "00009bec17ea1b10c9c850c650ad9e925a9c5ca46ea5a06e9369a1aea3a09e965f54529498179f5f94920a12774bcc29",
    "4e058a17672416a402f91ac63a9a3a0ab50a14002e16060880d11c501a00504b01022d032d00000008000000210037e4",
    "42495400000090000000050000000000000000000000800100000000612e6e7079504b01022d032d0000000800000021",
    "00761f8d684c0000009800000005000000000000000000000080018b000000622e6e7079504b05060000000002000200",
    "660000000e0100000000",
);

const PY_SAVEZ_STREAMED: &str = concat!(
    "504b03042d00080008000000210000000000ffffffffffffffff05001400612e6e707901001000000000000000000000",
    "000000000000009bec17ea1b10c9c850c650ad9e925a9c5ca46ea5a06e9366a2aea3a09e965f54529498179f5f94920a",
    "12774bcc294e058a17672416a402f91a463a0a469a3a0ab50a64032e068603f60c408281a1c10e483b0200504b070837",
    "e4424954000000000000009000000000000000504b03042d00080008000000210000000000ffffffffffffffff050014",
    "00622e6e707901001000000000000000000000000000000000009bec17ea1b10c9c850c650ad9e925a9c5ca46ea5a06e",
    "9369a1aea3a09e965f54529498179f5f94920a12774bcc294e058a17672416a402f91ac63a9a3a0ab50a14002e160608",
    "80d11c501a00504b0708761f8d684c000000000000009800000000000000504b01022d032d00080008000000210037e4",
    "42495400000090000000050000000000000000000000800100000000612e6e7079504b01022d032d0008000800000021",
    "00761f8d684c000000980000000500000000000000000000008001a3000000622e6e7079504b05060000000002000200",
    "660000003e0100000000",
);

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
}

/// A `read_at` over bytes in memory.
fn reader(bytes: &[u8]) -> impl Fn(u64, &mut [u8]) -> io::Result<()> + '_ {
    move |offset, buf| {
        let start = usize::try_from(offset).map_err(|_| io::ErrorKind::InvalidInput)?;
        let src = start
            .checked_add(buf.len())
            .and_then(|end| bytes.get(start..end))
            .ok_or(io::ErrorKind::UnexpectedEof)?;
        buf.copy_from_slice(src);
        Ok(())
    }
}

fn same<T: PartialEq + fmt::Debug>(a: Result<T, NpyError>, b: Result<T, NpyError>) {
    match (a, b) {
        (Ok(a), Ok(b)) => assert_eq!(a, b),
        (Err(a), Err(b)) => assert_eq!(a.to_string(), b.to_string()),
        (a, b) => panic!("{a:?} vs {b:?}"),
    }
}

#[test]
fn headers_and_members_in_place() {
    // The header alone, from a prefix or piecewise, agrees with the full reader.
    for dtype in DType::ALL {
        for shape in SHAPES {
            let array = sample(dtype, shape);
            let bytes = npy_bytes(&array).unwrap();
            let header = read_npy_header(&bytes).unwrap();
            assert_eq!((header.dtype, &header.shape), (dtype, &array.shape));
            assert_eq!(header.data_offset + header.data_len, bytes.len());
            assert_eq!(&bytes[header.data_offset..], &array.data[..]);
            assert_eq!(read_npy_header(&bytes[..header.data_offset]).unwrap(), header);
            same(read_npy_header_with(bytes.len() as u64, reader(&bytes)), Ok(header));
        }
    }
    let npy = npy_bytes(&sample(DType::F64, &[3, 2])).unwrap();
    for cut in 0..npy.len() {
        let part = &npy[..cut];
        same(read_npy_header_with(cut as u64, reader(part)), read_npy_header(part));
    }
    // Members located in place, from the slice or piecewise, give what read_npz reads.
    let x = sample(DType::F32, &[4, 8]);
    let y = sample(DType::I64, &[3]);
    let stored = npz_bytes(&[("x".into(), x.clone()), ("y".into(), y.clone())]);
    let deflated = deflate_zip(&[("x.npy", npy_bytes(&x).unwrap()), ("y.npy", npy_bytes(&y).unwrap())], true);
    for zip in
        [stored.clone(), deflated, unhex(PY_SAVEZ), unhex(PY_SAVEZ_COMPRESSED), unhex(PY_SAVEZ_STREAMED)]
    {
        let members = npz_members(&zip).unwrap();
        same(npz_members_with(zip.len() as u64, reader(&zip)), Ok(members.clone()));
        let arrays: Vec<(String, RawArray)> = members
            .iter()
            .map(|m| (m.name.clone(), read_npy(&npz_member_data(&zip, m).unwrap()).unwrap()))
            .collect();
        assert_eq!(arrays, read_npz(&zip).unwrap());
    }
    let members = npz_members(&stored).unwrap();
    assert!(members.iter().all(|m| !m.compressed && m.size == m.compressed_size));
    let m = &members[1];
    assert_eq!(read_npy(&stored[m.data_offset..m.data_offset + m.size]).unwrap(), y);
    // Truncated archives fail alike.
    for cut in 0..stored.len() {
        let part = &stored[..cut];
        same(npz_members_with(cut as u64, reader(part)), npz_members(part));
    }
}

#[test]
fn reads_python_zipfile_archives() {
    for fixture in [PY_SAVEZ, PY_SAVEZ_COMPRESSED, PY_SAVEZ_STREAMED] {
        let arrays = read_npz(&unhex(fixture)).unwrap();
        assert_eq!(arrays.len(), 2);
        assert_eq!(arrays[0].0, "a");
        assert_eq!(arrays[0].1.shape, vec![2, 2]);
        assert_eq!(arrays[0].1.to_vec::<f32>().unwrap(), vec![1.5, -2.0, 0.25, 8.0]);
        assert_eq!(arrays[1].0, "b");
        assert_eq!(arrays[1].1.shape, vec![3]);
        assert_eq!(arrays[1].1.to_vec::<i64>().unwrap(), vec![4, 4, 8]);
    }
}

fn reference(name: &str) -> Option<RawArray> {
    let path = Path::new("/work/shared/models/digits_mlp").join(name);
    if !path.exists() {
        eprintln!("skipping: {} not found", path.display());
        return None;
    }
    Some(read_npy_file(&path).unwrap())
}

#[test]
fn reads_reference_files() {
    if let Some(a) = reference("test.npy") {
        assert_eq!((a.dtype, a.shape.as_slice()), (DType::F32, &[597, 64][..]));
        let v = a.to_vec::<f32>().unwrap();
        assert_eq!(&v[..5], &[0.0, 0.0, 0.0, 0.3125, 1.0]);
        assert!(v.iter().all(|x| (0.0..=1.0).contains(x)));
    }
    if let Some(a) = reference("calib.npy") {
        assert_eq!((a.dtype, a.shape.as_slice()), (DType::F32, &[200, 64][..]));
        assert_eq!(&a.to_vec::<f32>().unwrap()[..5], &[0.0, 0.0, 0.0, 0.75, 1.0]);
    }
    if let Some(a) = reference("ref_fp32.npy") {
        assert_eq!((a.dtype, a.shape.as_slice()), (DType::F32, &[597, 10][..]));
        assert!(a.to_vec::<f32>().unwrap().iter().all(|x| x.is_finite()));
    }
    if let Some(a) = reference("test_labels.npy") {
        assert_eq!((a.dtype, a.shape.as_slice()), (DType::I64, &[597][..]));
        let labels = a.to_vec::<i64>().unwrap();
        assert_eq!(&labels[..5], &[4, 4, 8, 2, 7]);
        assert_eq!(labels.iter().sum::<i64>(), 2619);
        // Re-serializing reproduces numpy's file byte for byte.
        let original = std::fs::read("/work/shared/models/digits_mlp/test_labels.npy").unwrap();
        assert_eq!(npy_bytes(&a).unwrap(), original);
    }
}

#[test]
fn files_round_trip() {
    let dir = qopt_ir_core::ScratchDir::new("npy-test");
    let a = sample(DType::F32, &[2, 3]);
    let npy = dir.join("weights.npy");
    write_npy_file(&npy, &a).unwrap();
    assert_eq!(read_npy_file(&npy).unwrap(), a);
    assert_eq!(read_arrays_file(&npy).unwrap(), vec![("weights".to_string(), a.clone())]);
    let npz = dir.join("all.npz");
    let arrays = vec![("w".to_string(), a), ("b".to_string(), sample(DType::I32, &[3]))];
    write_npz_file(&npz, &arrays).unwrap();
    assert_eq!(read_npz_file(&npz).unwrap(), arrays);
    assert!(matches!(read_npy_file(dir.join("missing.npy")), Err(NpyError::Io(_))));
}
