//! Test support for the kernels: compile the one op of a `.qir` function with
//! its built-in lowering (operands at `io[0..n]`, results after them, scratch
//! at the arena's start), run its kernels over their work items in several
//! ranges (so that rows decoded from any `begin` are exercised), and compare
//! every result with the interpreter's bit for bit. Output buffers have
//! guard bytes on both sides, checked after the run: a kernel that writes
//! outside its result fails the test.

use crate::abi::Place;
use crate::lower::{Emit, LowerOp, Lowerings, Plan, Rodata};
use crate::runtime::executable::ExecutableCode;
use crate::target::{CpuFeatures, Target, TargetCpu};
use crate::CodegenError;
use ndarray::{ArrayD, IxDyn};
use qopt_interp::{run_function, KernelRegistry, Tensor};
use qopt_ir_core::{parse_module, Context, Module, OpId};

/// Guard bytes on each side of an output buffer.
const GUARD: usize = 64;
const GUARD_BYTE: u8 = 0xA5;

/// Whether this CPU runs AVX2 code; prints a notice when it does not.
pub(crate) fn avx2_here() -> bool {
    let host = CpuFeatures::host();
    let ok = host.avx && host.avx2;
    if !ok {
        println!("notice: skipped running AVX2 kernels, this CPU lacks AVX2");
    }
    ok
}

/// A context with the fp and qnn dialects.
pub(crate) use qopt_dialect_qnn::context;

/// Parses and verifies `text`.
pub(crate) fn parse(ctx: &mut Context, text: &str) -> Module {
    let module = parse_module(ctx, text.as_bytes(), "case.qir").unwrap_or_else(|e| panic!("{text}\n{e:?}"));
    if let Err(e) = qopt_ir_core::verify(ctx, &module) {
        panic!("{text}\ndoes not verify: {e:?}");
    }
    module
}

/// The first op of `@f`.
pub(crate) fn the_op(module: &Module) -> OpId {
    let func = module.top_level_ops().next().expect("a function");
    let block = module.first_block(module.region(func, 0));
    module.first_op(block)
}

/// An op's kernels, mapped, and the module data they read.
pub(crate) struct Compiled {
    kernels: Vec<(ExecutableCode, usize)>,
    rodata: Vec<u8>,
    scratch: usize,
}

/// Plans and emits `op` with the built-in lowering of its name.
pub(crate) fn compile_op(ctx: &Context, module: &Module, op: OpId) -> Result<Compiled, CodegenError> {
    let target = Target::for_running(TargetCpu::Native)?;
    let lower = LowerOp { ctx, module, op, target: &target };
    let lowerings = Lowerings::builtin();
    let lowering = lowerings.get(lower.name()).unwrap_or_else(|| panic!("no lowering for {}", lower.name()));
    let plan = lowering.plan(&lower)?;
    let Plan::Kernels { scratch_bytes, compile_time_operands } = plan else { panic!("an alias op") };
    let n = lower.num_operands();
    let mut rodata = Rodata::default();
    let mut emit = Emit {
        operands: (0..n).map(|i| (!compile_time_operands.contains(&i)).then_some(Place::Io(i))).collect(),
        results: (0..lower.num_results()).map(|j| Place::Io(n + j)).collect(),
        scratch: (scratch_bytes > 0).then_some(Place::Arena(0)),
        rodata: &mut rodata,
        kernels: Vec::new(),
    };
    lowering.emit(&lower, &mut emit)?;
    let kernels = std::mem::take(&mut emit.kernels);
    let kernels = kernels
        .into_iter()
        .map(|k| {
            assert!(k.work >= 1);
            Ok((ExecutableCode::new(&k.code)?, k.work))
        })
        .collect::<Result<Vec<_>, CodegenError>>()?;
    Ok(Compiled { kernels, rodata: rodata.bytes, scratch: scratch_bytes })
}

/// The bytes of a tensor's elements.
pub(crate) fn bytes_of(t: &Tensor) -> Vec<u8> {
    match t {
        Tensor::F32(a) => a.iter().flat_map(|v| v.to_le_bytes()).collect(),
        Tensor::I8(a) => a.iter().map(|&v| v as u8).collect(),
        Tensor::U8(a) => a.iter().copied().collect(),
        other => panic!("no buffers of {}", other.dtype()),
    }
}

/// A tensor like `like` (dtype, shape) holding `bytes`.
fn tensor_like(like: &Tensor, bytes: &[u8]) -> Tensor {
    let shape = IxDyn(like.shape());
    match like {
        Tensor::F32(_) => Tensor::F32(
            ArrayD::from_shape_vec(
                shape,
                bytes.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect(),
            )
            .unwrap(),
        ),
        Tensor::I8(_) => {
            Tensor::I8(ArrayD::from_shape_vec(shape, bytes.iter().map(|&b| b as i8).collect()).unwrap())
        }
        Tensor::U8(_) => Tensor::U8(ArrayD::from_shape_vec(shape, bytes.to_vec()).unwrap()),
        other => panic!("no buffers of {}", other.dtype()),
    }
}

impl Compiled {
    /// Runs every kernel, its work split into `pieces` ranges, on `inputs`,
    /// writing results shaped like `like`.
    pub(crate) fn run(&self, inputs: &[Tensor], like: &[Tensor], pieces: usize) -> Vec<Tensor> {
        let mut input_bytes: Vec<Vec<u8>> = inputs.iter().map(bytes_of).collect();
        let mut outputs: Vec<Vec<u8>> =
            like.iter().map(|t| vec![GUARD_BYTE; 2 * GUARD + bytes_of(t).len()]).collect();
        let mut arena = vec![0u8; self.scratch + 64];
        let mut io: Vec<*mut u8> = input_bytes.iter_mut().map(|b| b.as_mut_ptr()).collect();
        io.extend(outputs.iter_mut().map(|b| b[GUARD..].as_mut_ptr()));
        for (code, work) in &self.kernels {
            let pieces = pieces.clamp(1, *work);
            let bounds: Vec<usize> = (0..=pieces).map(|i| work * i / pieces).collect();
            for range in bounds.windows(2).rev() {
                // SAFETY: the kernel was emitted for these places, its features
                // were checked against the host (Target::for_running), the io
                // table holds a buffer of each operand's and result's size, the
                // arena has the planned scratch, and rodata is the module's.
                unsafe {
                    crate::abi::call_kernel(
                        code.entry(),
                        arena.as_mut_ptr(),
                        self.rodata.as_ptr(),
                        &io,
                        range[0],
                        range[1],
                    );
                }
            }
        }
        outputs
            .iter()
            .zip(like)
            .map(|(buffer, t)| {
                let n = buffer.len() - 2 * GUARD;
                assert!(
                    buffer[..GUARD].iter().chain(&buffer[GUARD + n..]).all(|&b| b == GUARD_BYTE),
                    "a kernel wrote outside its result"
                );
                tensor_like(t, &buffer[GUARD..GUARD + n])
            })
            .collect()
    }
}

/// Runs `@f` of `text` (one op, then return) through the interpreter and the
/// op's kernels and asserts that every result has the same bits.
pub(crate) fn check(text: &str, inputs: &[Tensor]) {
    let mut ctx = context();
    let module = parse(&mut ctx, text);
    let want = run_function(&ctx, &module, "f", inputs, &KernelRegistry::standard())
        .unwrap_or_else(|e| panic!("{text}\ninterpreter: {e}"));
    let compiled = compile_op(&ctx, &module, the_op(&module)).unwrap_or_else(|e| panic!("{text}\n{e}"));
    for pieces in [1, 3] {
        let got = compiled.run(inputs, &want, pieces);
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            assert!(
                g.bit_equal(w),
                "{text}\nresult {i} differs ({pieces} pieces):\n inputs {inputs:?}\n jit {g:?}\n want {w:?}"
            );
        }
    }
}

/// The error of compiling the op of `@f` in `text` (not verified first, so
/// that the lowering's own checks show).
pub(crate) fn compile_error(text: &str) -> CodegenError {
    let mut ctx = context();
    let module =
        parse_module(&mut ctx, text.as_bytes(), "case.qir").unwrap_or_else(|e| panic!("{text}\n{e:?}"));
    match compile_op(&ctx, &module, the_op(&module)) {
        Ok(_) => panic!("{text}\ncompiled"),
        Err(e) => e,
    }
}

/// `func.func @f(<args>) -> <results> { %r = <op line> ; return }` for one op
/// with operand types `operands` and result types `results`.
pub(crate) fn one_op(op: &str, attrs: &str, operands: &[&str], results: &[&str]) -> String {
    let args: Vec<String> = operands.iter().enumerate().map(|(i, t)| format!("%a{i}: {t}")).collect();
    let uses: Vec<String> = (0..operands.len()).map(|i| format!("%a{i}")).collect();
    let (defs, rets) = if results.len() == 1 {
        ("%r".to_string(), "%r".to_string())
    } else {
        let rets: Vec<String> = (0..results.len()).map(|j| format!("%r#{j}")).collect();
        (format!("%r:{}", results.len()), rets.join(", "))
    };
    let result_list =
        if results.len() == 1 { results[0].to_string() } else { format!("({})", results.join(", ")) };
    format!(
        "func.func @f({}) -> {result_list} {{\n  {defs} = {op}({}) {attrs} : ({}) -> {result_list}\n  func.return {rets} : {}\n}}\n",
        args.join(", "),
        uses.join(", "),
        operands.join(", "),
        results.join(", "),
    )
}

/// Pseudo-random bytes from `seed` (xorshift).
pub(crate) fn random_bytes(seed: u64, n: usize) -> Vec<u8> {
    let mut state = seed | 1;
    (0..n)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 24) as u8
        })
        .collect()
}

/// A tensor of `shape` of stored bytes (`i8` or `u8` per `unsigned`).
pub(crate) fn byte_tensor(shape: &[usize], unsigned: bool, bytes: Vec<u8>) -> Tensor {
    if unsigned {
        Tensor::U8(ArrayD::from_shape_vec(IxDyn(shape), bytes).unwrap())
    } else {
        Tensor::I8(
            ArrayD::from_shape_vec(IxDyn(shape), bytes.into_iter().map(|b| b as i8).collect()).unwrap(),
        )
    }
}

/// An f32 tensor of `shape`.
pub(crate) fn f32_tensor(shape: &[usize], values: Vec<f32>) -> Tensor {
    Tensor::F32(ArrayD::from_shape_vec(IxDyn(shape), values).unwrap())
}

/// `tensor<2x3x!qnn.uniform<...>>` from a shape and an element type.
pub(crate) fn tensor_type(shape: &[usize], element: &str) -> String {
    let mut dims: String = shape.iter().map(|d| format!("{d}x")).collect();
    dims.push_str(element);
    format!("tensor<{dims}>")
}

/// `!qnn.uniform<storage:f32, scale:zp>`.
pub(crate) fn quant(storage: &str, scale: f64, zero_point: i64) -> String {
    format!("!qnn.uniform<{storage}:f32, {scale:?}:{zero_point}>")
}
