//! Kernels of the `fp` dialect, ONNX semantics in NCHW layout (see each op's
//! description in `qopt-dialect-fp`). Float ops run on f32 and f64 tensors
//! (f16/bf16 values arrive widened to f32); quant-agnostic ops (relu, max
//! pooling, shape ops) also run on the integer storage of quantized tensors.
//!
//! Attributes are read with the dialect's own readers (`attrs::ConvAttrs::read_in`
//! and friends) so the interpreter and the verifier agree on defaults.

pub(crate) mod conv;
pub(crate) mod elementwise;
mod linear;
mod norm;
pub(crate) mod pool;
mod reduce;
mod shape;

use crate::error::{bail, InterpError};
use crate::registry::{KernelRegistry, KernelResults};
use crate::tensor::Tensor;
use ndarray::linalg::general_mat_mul;
use ndarray::{ArrayView2, ArrayViewMut2};
use qopt_ir_core::{Context, QuantParams, Type, TypeData};
use smallvec::smallvec;

/// Registers a kernel for every `fp` op: each op-family file lists its own.
pub(crate) fn register(r: &mut KernelRegistry) {
    for (name, kernel) in [
        shape::kernels(),
        elementwise::kernels(),
        conv::kernels(),
        linear::kernels(),
        norm::kernels(),
        pool::kernels(),
        reduce::kernels(),
    ]
    .into_iter()
    .flatten()
    {
        r.register(name, kernel);
    }
}

/// A float element type the kernels compute in (f32, f64).
pub(crate) trait Real:
    ndarray::LinalgScalar + PartialOrd + std::fmt::Debug + Send + Sync + std::ops::Neg<Output = Self>
{
    fn from_f64(v: f64) -> Self;
    fn exp(self) -> Self;
    fn tanh(self) -> Self;
    /// `c = a·b`, or `c += a·b` when `accumulate` (shapes m×k, k×n, m×n).
    fn gemm(a: ArrayView2<'_, Self>, b: ArrayView2<'_, Self>, accumulate: bool, c: ArrayViewMut2<'_, Self>);
    /// A convolution without an unrolled patch matrix, where this type and
    /// the CPU have a kernel for it ([`conv::conv2d_fused`]): `Ok(true)` when
    /// it wrote `out`, `Ok(false)` (nothing written) when the caller must
    /// unroll the patches itself.
    fn conv_fused(
        _x: &[Self],
        _w: &[Self],
        _shape: &conv::ConvShape,
        _win: &conv::Window2,
        _bias: Option<&[Self]>,
        _out: &mut [Self],
    ) -> Result<bool, InterpError> {
        Ok(false)
    }
}

impl Real for f32 {
    fn from_f64(v: f64) -> f32 {
        v as f32
    }
    fn exp(self) -> f32 {
        f32::exp(self)
    }
    fn tanh(self) -> f32 {
        f32::tanh(self)
    }
    /// The AVX-512 packed GEMM where available ([`crate::gemm`]).
    fn gemm(a: ArrayView2<'_, f32>, b: ArrayView2<'_, f32>, accumulate: bool, c: ArrayViewMut2<'_, f32>) {
        crate::gemm::sgemm_view(a, b, accumulate, c)
    }
    /// The AVX-512 GEMM packing its panels straight from the input.
    fn conv_fused(
        x: &[f32],
        w: &[f32],
        shape: &conv::ConvShape,
        win: &conv::Window2,
        bias: Option<&[f32]>,
        out: &mut [f32],
    ) -> Result<bool, InterpError> {
        conv::conv2d_fused(x, w, shape, win, bias, out)
    }
}

impl Real for f64 {
    fn from_f64(v: f64) -> f64 {
        v
    }
    fn exp(self) -> f64 {
        f64::exp(self)
    }
    fn tanh(self) -> f64 {
        f64::tanh(self)
    }
    fn gemm(a: ArrayView2<'_, f64>, b: ArrayView2<'_, f64>, accumulate: bool, mut c: ArrayViewMut2<'_, f64>) {
        general_mat_mul(1.0, &a, &b, if accumulate { 1.0 } else { 0.0 }, &mut c)
    }
}

/// An element type with a smallest value (the start of a max).
pub(crate) trait Lowest: Copy + PartialOrd + 'static {
    const LOWEST: Self;
}

macro_rules! lowest {
    ($($t:ty => $v:expr),*) => {$(impl Lowest for $t { const LOWEST: $t = $v; })*};
}
lowest!(f32 => f32::NEG_INFINITY, f64 => f64::NEG_INFINITY, i8 => i8::MIN, u8 => u8::MIN,
        i16 => i16::MIN, i32 => i32::MIN, i64 => i64::MIN, bool => false);

/// One result.
pub(crate) fn one(t: Tensor) -> Result<KernelResults, InterpError> {
    Ok(smallvec![t])
}

/// Operand `i`, or an error if the op has fewer operands.
pub(crate) fn operand<'t>(ops: &[&'t Tensor], i: usize) -> Result<&'t Tensor, InterpError> {
    match ops.get(i) {
        Some(t) => Ok(t),
        None => bail!("expects at least {} operand(s), got {}", i + 1, ops.len()),
    }
}

/// An error for an operand of a dtype the kernel does not handle.
pub(crate) fn unsupported(what: &str, t: &Tensor) -> InterpError {
    InterpError::new(format!("{what} does not support {} tensors", t.dtype()))
}

/// Checks that `t` has rank `rank`; `what` names it (`input`, `weight`).
pub(crate) fn expect_rank(t: &Tensor, rank: usize, what: &str) -> Result<(), InterpError> {
    if t.rank() != rank {
        bail!("{what} must have rank {rank}, got shape {:?}", t.shape());
    }
    Ok(())
}

/// Zero points of a quantized element type: one per tensor (`axis` none) or
/// one per index of `axis`. `None` for other element types.
pub(crate) fn zero_points(ctx: &Context, elem: Type) -> Option<(Vec<i64>, Option<usize>)> {
    match ctx.type_data(elem) {
        TypeData::Quant(q) => Some(match &q.params {
            QuantParams::PerTensor { zero_point, .. } => (vec![*zero_point], None),
            QuantParams::PerAxis { axis, zero_points, .. } => (zero_points.to_vec(), Some(*axis as usize)),
        }),
        _ => None,
    }
}

/// Numbers of a usize conversion of an IR size, with an error instead of a wrap.
pub(crate) fn to_usize(v: i64, what: &str) -> Result<usize, InterpError> {
    usize::try_from(v).map_err(|_| InterpError::new(format!("{what} must be non-negative, got {v}")))
}

/// Runs `$body` with `$a` bound to the array of a float tensor, wrapping the
/// result array in the same variant; other dtypes are an error naming `$what`.
macro_rules! float_map {
    ($t:expr, $what:expr, $a:ident => $body:expr) => {
        match $t {
            $crate::tensor::Tensor::F32($a) => $crate::tensor::Tensor::F32($body),
            $crate::tensor::Tensor::F64($a) => $crate::tensor::Tensor::F64($body),
            other => return Err($crate::kernels::fp::unsupported($what, other)),
        }
    };
}
pub(crate) use float_map;

#[cfg(test)]
pub(crate) mod tests {
    //! Helpers for kernel tests: build tensors and run a kernel on attributes
    //! and result types written in `.qir` syntax.
    use super::*;
    use crate::registry::{Kernel, KernelContext};
    use qopt_ir_core::parse_module;

    /// An f32 tensor.
    pub(crate) fn f32t(shape: &[usize], data: &[f32]) -> Tensor {
        Tensor::from_f32(shape, data.to_vec()).unwrap()
    }

    /// An f32 tensor 0, 1, 2, ... of `shape`.
    pub(crate) fn iota(shape: &[usize]) -> Tensor {
        let n = shape.iter().product::<usize>();
        f32t(shape, &(0..n).map(|i| i as f32).collect::<Vec<_>>())
    }

    /// Runs `kernel` and returns its results; `attrs` is an attribute dictionary
    /// and `types` are result types, both in `.qir` syntax. The kernel sees no
    /// operand types.
    pub(crate) fn run_all(
        ctx: &mut Context,
        kernel: Kernel,
        ops: &[&Tensor],
        attrs: &str,
        types: &[&str],
    ) -> Result<KernelResults, InterpError> {
        run_all_typed(ctx, kernel, ops, &[], attrs, types)
    }

    /// [`run_all`] with operand types too (`.qir` syntax), as the executor
    /// gives them: what kernels of ops on quantized operands need.
    pub(crate) fn run_all_typed(
        ctx: &mut Context,
        kernel: Kernel,
        ops: &[&Tensor],
        operand_types: &[&str],
        attrs: &str,
        types: &[&str],
    ) -> Result<KernelResults, InterpError> {
        ctx.set_allow_unregistered(true);
        let args: Vec<String> =
            operand_types.iter().enumerate().map(|(i, t)| format!("%a{i}: {t}")).collect();
        let names: Vec<String> = (0..operand_types.len()).map(|i| format!("%a{i}")).collect();
        let (names, inputs) = (names.join(", "), operand_types.join(", "));
        let op = match types.len() {
            0 => format!("test.k({names}) {attrs} : ({inputs}) -> ()"),
            1 => format!("%r = test.k({names}) {attrs} : ({inputs}) -> {}", types[0]),
            n => format!("%r:{n} = test.k({names}) {attrs} : ({inputs}) -> ({})", types.join(", ")),
        };
        let text = format!(
            "module {{\n  func.func @t({}) {{\n    {op}\n    func.return\n  }}\n}}\n",
            args.join(", ")
        );
        let module = parse_module(ctx, text.as_bytes(), "t.qir").unwrap_or_else(|d| panic!("{d}\n{text}"));
        let func = module.top_level_ops().next().unwrap();
        let body = module.first_block(module.region(func, 0));
        let k = module.first_op(body);
        let result_types: Vec<_> = module.results(k).map(|v| module.value_type(v)).collect();
        let operand_types: Vec<_> = module.operands(k).map(|v| module.value_type(v)).collect();
        let mut kc =
            KernelContext::new(ctx, module.op_attrs(k), &result_types).with_operand_types(&operand_types);
        kernel(&mut kc, ops)
    }

    /// [`run_all_typed`] with one result, panicking on error.
    pub(crate) fn run_typed(
        ctx: &mut Context,
        kernel: Kernel,
        ops: &[&Tensor],
        operand_types: &[&str],
        attrs: &str,
        types: &[&str],
    ) -> Tensor {
        let mut r =
            run_all_typed(ctx, kernel, ops, operand_types, attrs, types).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(r.len(), 1);
        r.remove(0)
    }

    /// [`run_all_typed`], expecting an error; returns its message.
    pub(crate) fn run_typed_err(
        ctx: &mut Context,
        kernel: Kernel,
        ops: &[&Tensor],
        operand_types: &[&str],
        attrs: &str,
        types: &[&str],
    ) -> String {
        match run_all_typed(ctx, kernel, ops, operand_types, attrs, types) {
            Ok(_) => panic!("expected an error"),
            Err(e) => e.message,
        }
    }

    /// [`run_all`] with one result, panicking on error.
    pub(crate) fn run(
        ctx: &mut Context,
        kernel: Kernel,
        ops: &[&Tensor],
        attrs: &str,
        types: &[&str],
    ) -> Tensor {
        let mut r = run_all(ctx, kernel, ops, attrs, types).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(r.len(), 1);
        r.remove(0)
    }

    /// [`run_all`], expecting an error; returns its message.
    pub(crate) fn run_err(ctx: &mut Context, kernel: Kernel, ops: &[&Tensor], attrs: &str) -> String {
        match run_all(ctx, kernel, ops, attrs, &[]) {
            Ok(_) => panic!("expected an error"),
            Err(e) => e.message,
        }
    }

    #[test]
    fn registry_covers_every_fp_op() {
        let mut ctx = Context::new();
        qopt_dialect_fp::register(&mut ctx).unwrap();
        let r = KernelRegistry::with_fp();
        for def in ctx.op_defs() {
            if def.name.starts_with("fp.") {
                assert!(r.contains(def.name), "no kernel for {}", def.name);
            }
        }
    }
}
