//! How an op becomes kernels: the [`OpLowering`] interface, the view of an op
//! a lowering works from ([`LowerOp`]), what it hands back ([`Plan`],
//! [`Emit`]), and the registry of lowerings by op name ([`Lowerings`]).
//!
//! Compiling a function asks every op's lowering for a [`Plan`] first, so
//! that every op the backend cannot compile is reported at once, before any
//! code is generated; then it plans the arena, and asks each lowering to
//! [`OpLowering::emit`] its kernels with the places of its operands, results
//! and scratch space known.
//!
//! A downstream dialect adds its ops to the backend by registering an
//! [`OpLowering`] for each op name in the [`Lowerings`] of its context
//! ([`Lowerings::install`], from the setup that registers the dialect), or
//! in a [`Lowerings`] it compiles with; nothing here needs to change. Every
//! built-in lowering is named once, in `table.rs`.

mod alias;
pub(crate) mod binary;
pub(crate) mod concat;
pub(crate) mod conv;
pub(crate) mod conv_transpose;
pub(crate) mod convert;
pub(crate) mod dense;
pub(crate) mod lookup;
pub(crate) mod movement;
pub(crate) mod operands;
pub(crate) mod pooling;
pub(crate) mod prelu;
pub(crate) mod requantize;
pub(crate) mod resize;
pub(crate) mod rows;
mod table;

pub use conv::Conv2dLowering;
pub use conv_transpose::ConvTransposeLowering;
pub use dense::DenseLowering;

use crate::abi::{KernelCode, Place};
use crate::buffer::ElementType;
use crate::error::{CodegenError, CodegenErrorKind};
use crate::target::Target;
use qopt_dialect_qnn::quant_params;
use qopt_ir_core::{
    constant_value, loc_to_string, type_to_string, AttrData, Attribute, Context, DenseElements, FloatKind,
    Module, OpId, QuantType, Type, TypeData,
};
use std::collections::HashMap;
use std::sync::Arc;

/// What emitting an op's kernels returns.
pub type EmitResult = Result<(), CodegenError>;

/// Turns one kind of op into kernels.
pub trait OpLowering: Send + Sync {
    /// Checks that the op can be compiled (an error of kind `Unsupported`
    /// says why not) and says how its results relate to its operands.
    fn plan(&self, op: &LowerOp<'_>) -> Result<Plan, CodegenError>;

    /// Emits the op's kernels (none for an [`Plan::Alias`] op). Called only
    /// after [`OpLowering::plan`] succeeded, with the places filled in.
    fn emit(&self, op: &LowerOp<'_>, out: &mut Emit<'_>) -> EmitResult;

    /// The multiply-accumulates the op performs (for GOP/s in profiles);
    /// 0 for ops that are not products.
    fn multiply_accumulates(&self, op: &LowerOp<'_>) -> u64 {
        let _ = op;
        0
    }
}

/// What an op needs from the module compiler.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Plan {
    /// The op runs kernels that write its results.
    Kernels {
        /// Bytes of arena the kernels may use while the op runs.
        scratch_bytes: usize,
        /// Operands the lowering reads as constants while compiling (packed
        /// weights, biases): they get no place at run time.
        compile_time_operands: Vec<usize>,
    },
    /// Each result is the bytes of operand 0 under another shape (reshape,
    /// flatten, identity annotations): no code, no copy.
    Alias,
}

impl Plan {
    /// A plan with kernels, no scratch and no compile-time operands.
    pub fn kernels() -> Plan {
        Plan::Kernels { scratch_bytes: 0, compile_time_operands: Vec::new() }
    }

    /// The plan of a layer whose weight (operand 1) and bias (operand 2, when
    /// it has one) are packed at compile time, with `scratch_bytes` of arena.
    pub fn weighted_layer(op: &LowerOp<'_>, scratch_bytes: usize) -> Plan {
        let compile_time_operands = if op.num_operands() == 3 { vec![1, 2] } else { vec![1] };
        Plan::Kernels { scratch_bytes, compile_time_operands }
    }
}

/// One op as a lowering sees it: the IR, the target, and helpers that read
/// types, shapes, attributes and constant operands with located errors.
#[derive(Copy, Clone)]
pub struct LowerOp<'a> {
    /// The context.
    pub ctx: &'a Context,
    /// The module holding the op.
    pub module: &'a Module,
    /// The op.
    pub op: OpId,
    /// What the code may use.
    pub target: &'a Target,
}

impl<'a> LowerOp<'a> {
    /// The op's name (`qnn.conv2d`).
    pub fn name(&self) -> &'a str {
        self.ctx.op_name_str(self.module.op_name(self.op))
    }

    /// Number of operands.
    pub fn num_operands(&self) -> usize {
        self.module.num_operands(self.op)
    }

    /// Number of results.
    pub fn num_results(&self) -> usize {
        self.module.num_results(self.op)
    }

    /// The type of operand `i`.
    pub fn operand_type(&self, i: usize) -> Type {
        self.module.value_type(self.module.operand(self.op, i))
    }

    /// The type of result `i`.
    pub fn result_type(&self, i: usize) -> Type {
        self.module.value_type(self.module.result(self.op, i))
    }

    /// An `Unsupported` error about this op.
    pub fn unsupported(&self, message: impl std::fmt::Display) -> CodegenError {
        CodegenError::new(CodegenErrorKind::Unsupported, format!("{}: {message}", self.name()))
    }

    /// An `InvalidInput` error about this op.
    pub fn invalid(&self, message: impl std::fmt::Display) -> CodegenError {
        CodegenError::new(CodegenErrorKind::InvalidInput, format!("{}: {message}", self.name()))
    }

    /// Checks the operand and result counts.
    pub fn expect_arity(
        &self,
        operands: std::ops::RangeInclusive<usize>,
        results: usize,
    ) -> Result<(), CodegenError> {
        if !operands.contains(&self.num_operands()) || self.num_results() != results {
            return Err(self.invalid(format!(
                "expected {}..={} operands and {results} results, got {} and {}",
                operands.start(),
                operands.end(),
                self.num_operands(),
                self.num_results()
            )));
        }
        Ok(())
    }

    /// The static shape of tensor type `ty` (`what` names it in errors).
    pub fn shape_of(&self, ty: Type, what: &str) -> Result<Vec<usize>, CodegenError> {
        let shape = self.ctx.tensor_shape(ty).ok_or_else(|| {
            self.invalid(format!("{what} must be a ranked tensor, got {}", type_to_string(self.ctx, ty)))
        })?;
        shape.iter().map(|&d| usize::try_from(d)).collect::<Result<Vec<_>, _>>().map_err(|_| {
            self.unsupported(format!("{what} has a dynamic shape ({})", type_to_string(self.ctx, ty)))
        })
    }

    /// The static shape of operand `i`.
    pub fn operand_shape(&self, i: usize) -> Result<Vec<usize>, CodegenError> {
        self.shape_of(self.operand_type(i), &format!("operand {i}"))
    }

    /// The static shape of result `i`.
    pub fn result_shape(&self, i: usize) -> Result<Vec<usize>, CodegenError> {
        self.shape_of(self.result_type(i), &format!("result {i}"))
    }

    /// The buffer element type of tensor type `ty`, or `Unsupported`.
    pub fn element_of(&self, ty: Type, what: &str) -> Result<ElementType, CodegenError> {
        buffer_element(self.ctx, ty).filter(|e| e.is_kernel_type()).ok_or_else(|| {
            self.unsupported(format!(
                "{what} has element type {}, which compiled code does not hold (f32, 8-bit integers and 8-bit quantized types)",
                type_to_string(self.ctx, self.ctx.element_type(ty))
            ))
        })
    }

    /// The quantized element type of tensor type `ty`, if it has one.
    pub fn quant_of(&self, ty: Type) -> Option<&'a QuantType> {
        quant_params::quant_element(self.ctx, ty)
    }

    /// The dense value of operand `i` when a constant op defines it.
    pub fn constant_operand(&self, i: usize) -> Option<&'a DenseElements> {
        let value = constant_value(self.ctx, self.module, self.module.operand(self.op, i))?;
        match self.ctx.attr_data(value) {
            AttrData::Dense(d) => Some(d),
            _ => None,
        }
    }

    /// Attribute `key`, if present.
    pub fn attr(&self, key: &str) -> Option<Attribute> {
        self.module.op_attr(self.ctx, self.op, key)
    }

    /// Integer array attribute `key`, or `default` when absent.
    pub fn i64_array_or(&self, key: &str, default: &[i64]) -> Result<Vec<i64>, CodegenError> {
        match self.attr(key) {
            None => Ok(default.to_vec()),
            Some(a) => self
                .ctx
                .attr_as_i64_array(a)
                .ok_or_else(|| self.invalid(format!("attribute '{key}' must be an integer array"))),
        }
    }

    /// Integer attribute `key`, or `default` when absent.
    pub fn int_or(&self, key: &str, default: i64) -> Result<i64, CodegenError> {
        match self.attr(key) {
            None => Ok(default),
            Some(a) => self
                .ctx
                .attr_as_int(a)
                .and_then(|v| i64::try_from(v).ok())
                .ok_or_else(|| self.invalid(format!("attribute '{key}' must be an integer"))),
        }
    }

    /// Where the op is, for messages: its location and, when it was parsed,
    /// its line and column.
    pub fn location(&self) -> String {
        describe_location(self.ctx, self.module, self.op)
    }
}

/// `loc("name")`, `line 12:5`, or both, for an op; `"?"` when it has neither.
pub(crate) fn describe_location(ctx: &Context, module: &Module, op: OpId) -> String {
    let loc = loc_to_string(ctx, module.op_loc(op));
    let pos = module.op_pos(op);
    let line = pos.is_some().then(|| format!("line {}:{}", pos.line, pos.col));
    match (line, loc.is_empty()) {
        (Some(l), false) => format!("{l} {loc}"),
        (Some(l), true) => l,
        (None, false) => loc,
        (None, true) => "?".into(),
    }
}

/// The buffer element type of tensor type `ty`: the interpreter's storage
/// type of its elements ([`ElementType`]); `None` for f16 and bf16, which
/// compiled code does not hold yet.
pub(crate) fn buffer_element(ctx: &Context, ty: Type) -> Option<ElementType> {
    let element = ctx.element_type(ty);
    if matches!(ctx.type_data(element), TypeData::Float(k) if !matches!(k, FloatKind::F32 | FloatKind::F64)) {
        return None;
    }
    qopt_interp::DType::of_element(ctx, element).ok().map(ElementType::of_dtype)
}

/// Where a lowering writes its kernels and read-only data, with the places
/// of the op's buffers.
pub struct Emit<'a> {
    /// The place of each operand; `None` for compile-time operands.
    pub operands: Vec<Option<Place>>,
    /// The place of each result.
    pub results: Vec<Place>,
    /// The op's scratch space, when its plan asked for some.
    pub scratch: Option<Place>,
    pub(crate) rodata: &'a mut Rodata,
    pub(crate) kernels: Vec<KernelCode>,
}

impl Emit<'_> {
    /// The place of run-time operand `i`.
    pub fn operand(&self, i: usize) -> Result<Place, CodegenError> {
        self.operands.get(i).copied().flatten().ok_or_else(|| {
            CodegenError::new(CodegenErrorKind::Assembler, format!("operand {i} has no run-time place"))
        })
    }

    /// The place of result `i`.
    pub fn result(&self, i: usize) -> Result<Place, CodegenError> {
        self.results
            .get(i)
            .copied()
            .ok_or_else(|| CodegenError::new(CodegenErrorKind::Assembler, format!("result {i} has no place")))
    }

    /// The place of the op's scratch space, which its plan asked for.
    pub fn planned_scratch(&self, op: &LowerOp<'_>) -> Result<Place, CodegenError> {
        self.scratch.ok_or_else(|| {
            CodegenError::new(
                CodegenErrorKind::Assembler,
                format!("{}: no scratch space was planned", op.name()),
            )
        })
    }

    /// Adds read-only data (64-byte aligned) and returns its place.
    pub fn rodata(&mut self, bytes: &[u8]) -> Place {
        self.rodata.push(bytes)
    }

    /// Appends a kernel; the op's kernels run in the order they are added.
    pub fn kernel(&mut self, kernel: KernelCode) {
        self.kernels.push(kernel);
    }
}

/// The module's read-only data: every piece 64-byte aligned.
#[derive(Default, Debug)]
pub(crate) struct Rodata {
    pub(crate) bytes: Vec<u8>,
}

impl Rodata {
    pub(crate) fn push(&mut self, bytes: &[u8]) -> Place {
        Place::Rodata(self.push_offset(bytes))
    }

    /// Appends `bytes` on a 64-byte boundary and returns their offset.
    pub(crate) fn push_offset(&mut self, bytes: &[u8]) -> usize {
        let offset = self.bytes.len().next_multiple_of(crate::abi::BUFFER_ALIGN);
        self.bytes.resize(offset, 0);
        self.bytes.extend_from_slice(bytes);
        offset
    }
}

/// The lowerings the module compiler uses, by op name.
#[derive(Clone, Default)]
pub struct Lowerings {
    by_name: HashMap<String, Arc<dyn OpLowering>>,
}

impl Lowerings {
    /// No lowerings at all.
    pub fn empty() -> Lowerings {
        Lowerings::default()
    }

    /// The lowerings of the `qnn` and `fp` ops this backend compiles.
    pub fn builtin() -> Lowerings {
        let mut l = Lowerings::empty();
        table::register(&mut l);
        l
    }

    /// The lowerings of `ctx`: those a downstream crate installed
    /// ([`Lowerings::install`]), else the built-in ones. `qrun --backend=x86`
    /// and `qcompile` compile with these.
    pub fn of(ctx: &Context) -> Lowerings {
        ctx.extension::<Lowerings>().cloned().unwrap_or_else(Lowerings::builtin)
    }

    /// The lowerings of `ctx` for adding to, installing the built-in ones
    /// first if there are none. A downstream crate calls this from the setup
    /// that registers its dialect, so every tool that compiles its modules
    /// finds its ops' lowerings.
    pub fn install(ctx: &mut Context) -> &mut Lowerings {
        if ctx.extension::<Lowerings>().is_none() {
            ctx.set_extension(Lowerings::builtin());
        }
        ctx.extension_mut::<Lowerings>()
    }

    /// Adds every lowering of `other`, replacing those of the same op names.
    pub fn extend(&mut self, other: &Lowerings) {
        for (name, lowering) in &other.by_name {
            self.by_name.insert(name.clone(), lowering.clone());
        }
    }

    /// Registers (or replaces) the lowering of op `name`.
    pub fn register(&mut self, name: &str, lowering: Arc<dyn OpLowering>) {
        self.by_name.insert(name.to_string(), lowering);
    }

    /// The lowering of op `name`.
    pub fn get(&self, name: &str) -> Option<&Arc<dyn OpLowering>> {
        self.by_name.get(name)
    }

    /// The names with a lowering, sorted.
    pub fn names(&self) -> Vec<&str> {
        let mut names: Vec<&str> = self.by_name.keys().map(String::as_str).collect();
        names.sort_unstable();
        names
    }
}
