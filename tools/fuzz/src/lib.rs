//! qopt's fuzz targets: each takes arbitrary bytes and panics only when it
//! finds a bug (its oracle fails). `fuzz/` runs them under libFuzzer with
//! coverage guidance (cargo-fuzz); `qfuzz` ([`mutate`], `src/bin/qfuzz.rs`)
//! runs them on the stable toolchain with mutations of the repository's own
//! test files, which is what `.ci/run`'s smoke run uses.
//!
//! | target | input | oracle |
//! |---|---|---|
//! | `parse_qir` | `.qir` text | nothing panics; what parses prints to text that parses again and prints identically |
//! | `import_onnx` | an ONNX model | nothing panics; what imports runs in the interpreter on zero inputs with `Ok` or an error |
//! | `read_npy` | a `.npy` or `.npz` file | nothing panics; every array read converts to a tensor and writes and reads back unchanged |

pub mod mutate;

use qopt_interp::{DType, Interpreter, KernelRegistry, Tensor};
use qopt_ir_core::{module_to_string, parse_module, verify, Context, TypeData};
use qopt_npy::{npy_bytes, read_arrays, read_npy};
use qopt_onnx::{import_model, ImportOptions};

/// A fuzz target: its name, the file extensions of its seed inputs, and
/// the function that checks one input.
pub struct Target {
    pub name: &'static str,
    pub seed_extensions: &'static [&'static str],
    pub run: fn(&[u8]),
    /// Byte strings worth inserting (keywords, delimiters, edge numbers).
    pub dictionary: &'static [&'static [u8]],
}

/// Every target, in the order `qfuzz all` runs them.
pub static TARGETS: [Target; 3] = [
    Target { name: "parse_qir", seed_extensions: &["qir"], run: parse_qir, dictionary: QIR_WORDS },
    Target { name: "import_onnx", seed_extensions: &["onnx"], run: import_onnx, dictionary: BINARY_WORDS },
    Target {
        name: "read_npy",
        seed_extensions: &["npy", "npz"],
        run: read_npy_bytes,
        dictionary: BINARY_WORDS,
    },
];

const QIR_WORDS: &[&[u8]] = &[
    b"func.func @f(",
    b"%0 = ",
    b"tensor<",
    b"x?x",
    b">",
    b"!qnn.uniform<i8:f32, 0.5:3>",
    b"!qnn.uniform<u4:f32:1, {",
    b"dense<",
    b"\"0x",
    b"[[",
    b"]]",
    b"{",
    b"}",
    b"(",
    b")",
    b"loc(",
    b"fused[",
    b"#",
    b"1e309",
    b"-0.0",
    b"nan",
    b"inf",
    b"9223372036854775808",
    b"281474976710657",
    b"attributes {",
    b"module {",
    b"func.return",
    b" : ",
    b"->",
    b"\"",
    b"\\",
    b"// -----\n",
    b"i1",
    b"bf16",
    b"f64",
    b"index",
    b"unit",
];

const BINARY_WORDS: &[&[u8]] = &[
    &[0x00],
    &[0xff],
    &[0x7f],
    &[0x80],
    &[0xff, 0xff, 0xff, 0xff],
    &[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01],
    &[0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x00],
    &[0x00, 0x00, 0x80, 0x7f],
    &[0x00, 0x00, 0xc0, 0x7f],
    b"\x93NUMPY",
    b"PK\x03\x04",
    b"'shape': (",
    b"'descr': '<f4'",
    b"'fortran_order': True",
];

/// `.qir` text: parse, verify, print, and print again after parsing the print.
pub fn parse_qir(data: &[u8]) {
    let mut ctx = Context::new();
    ctx.set_allow_unregistered(true);
    let Ok(module) = parse_module(&mut ctx, data, "fuzz.qir") else { return };
    let _ = verify(&mut ctx, &module);
    let printed = module_to_string(&ctx, &module);
    let reparsed = match parse_module(&mut ctx, printed.as_bytes(), "printed.qir") {
        Ok(m) => m,
        Err(d) => panic!("printed module does not parse:\n{d}\n--- printed ---\n{printed}"),
    };
    let again = module_to_string(&ctx, &reparsed);
    assert_eq!(printed, again, "print is not canonical");
}

/// An ONNX model: import it (batch 1), then run what imported on zero inputs
/// of at most 2^16 elements each.
pub fn import_onnx(data: &[u8]) {
    let mut ctx = Context::new();
    let options = ImportOptions { batch: Some(1), ..Default::default() };
    let Ok(module) = import_model(&mut ctx, data, &options) else { return };
    let Some(func) = module.lookup_symbol(&ctx, "main") else { return };
    let Some(entry) = module.blocks(module.region(func, 0)).next() else { return };
    let mut inputs = Vec::new();
    for &arg in module.block_args(entry) {
        let TypeData::Tensor { shape, element } = ctx.type_data(module.value_type(arg)) else { return };
        let Ok(dtype) = DType::of_element(&ctx, *element) else { return };
        let dims: Vec<usize> = shape.iter().map(|&d| d.max(0) as usize).collect();
        if dims.iter().try_fold(1usize, |acc, &d| acc.checked_mul(d)).is_none_or(|n| n > 1 << 16) {
            return;
        }
        inputs.push(Tensor::zeros(dtype, &dims));
    }
    let kernels = KernelRegistry::standard();
    let _ = Interpreter::new(&ctx, &module, &kernels).run("main", &inputs);
}

/// A `.npy` or `.npz` file: every array converts to a tensor and survives a
/// write and a read.
pub fn read_npy_bytes(data: &[u8]) {
    let Ok(arrays) = read_arrays(data, "fuzz.npy") else { return };
    for (_, raw) in arrays {
        let Ok(tensor) = Tensor::from_raw(&raw) else { panic!("a valid array does not convert") };
        let bytes = npy_bytes(&tensor.to_raw()).expect("writing to memory cannot fail");
        let again = read_npy(&bytes).expect("written arrays read back");
        assert_eq!(again, raw, "round trip changed the array");
    }
}
