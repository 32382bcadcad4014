//! The kernel registry: one [`Kernel`] per op name, open to every dialect.
//!
//! A kernel is a plain function from operand tensors to result tensors. It
//! reads its attributes, operand types and result types through the
//! [`KernelContext`] (the `qnn` kernels take scales and zero points from the
//! quantized types); it never sees the IR arena, so kernels are easy to test
//! on their own and a downstream dialect adds its ops with
//! [`KernelRegistry::register`] without touching this crate. Errors from a
//! kernel carry a message only; the executor adds the op name and location.

use crate::error::InterpError;
use crate::tensor::Tensor;
use qopt_ir_core::{Attribute, Context, FxHashMap, Type};
use smallvec::SmallVec;

/// What a kernel may read besides its operands.
pub struct KernelContext<'a> {
    /// The context (attribute and type data).
    pub ctx: &'a Context,
    /// The op's attribute dictionary.
    pub attrs: Attribute,
    /// The op's operand types (empty when the caller did not give them; see
    /// [`KernelContext::with_operand_types`]).
    pub operand_types: &'a [Type],
    /// The op's result types.
    pub result_types: &'a [Type],
}

impl<'a> KernelContext<'a> {
    /// A kernel context over `attrs` and `result_types`, without operand types.
    pub fn new(ctx: &'a Context, attrs: Attribute, result_types: &'a [Type]) -> KernelContext<'a> {
        KernelContext { ctx, attrs, operand_types: &[], result_types }
    }

    /// The same context with the op's operand types, which kernels of ops on
    /// quantized operands need (the executor always gives them).
    pub fn with_operand_types(self, operand_types: &'a [Type]) -> KernelContext<'a> {
        KernelContext { operand_types, ..self }
    }

    /// The type of operand `i`, or an error if it is not known.
    pub fn operand_type(&self, i: usize) -> Result<Type, InterpError> {
        self.operand_types.get(i).copied().ok_or_else(|| {
            InterpError::new(format!(
                "the type of operand #{i} is not known (the op has {} operand type(s))",
                self.operand_types.len()
            ))
        })
    }

    /// The type of result `i`, or an error if the op has fewer results.
    pub fn result_type(&self, i: usize) -> Result<Type, InterpError> {
        self.result_types
            .get(i)
            .copied()
            .ok_or_else(|| InterpError::new(format!("the op has no result #{i}")))
    }

    /// The element type of result `i`.
    pub fn result_element(&self, i: usize) -> Result<Type, InterpError> {
        Ok(self.ctx.element_type(self.result_type(i)?))
    }
}

/// Results of one kernel call (usually one tensor).
pub type KernelResults = SmallVec<[Tensor; 1]>;

/// A kernel: computes an op's results from its operands.
pub type Kernel = fn(&mut KernelContext<'_>, &[&Tensor]) -> Result<KernelResults, InterpError>;

/// Kernels keyed by op name (`fp.conv2d`).
#[derive(Clone, Default)]
pub struct KernelRegistry {
    kernels: FxHashMap<String, Kernel>,
}

impl KernelRegistry {
    /// An empty registry.
    pub fn new() -> KernelRegistry {
        KernelRegistry::default()
    }

    /// A registry with a kernel for every `fp` op.
    pub fn with_fp() -> KernelRegistry {
        let mut r = KernelRegistry::new();
        crate::kernels::fp::register(&mut r);
        r
    }

    /// A registry with a kernel for every `fp` and every `qnn` op: what a
    /// quantized model needs.
    pub fn standard() -> KernelRegistry {
        let mut r = KernelRegistry::with_fp();
        crate::kernels::qnn::register(&mut r);
        r
    }

    /// The kernels installed in `ctx` (see [`KernelRegistry::install`]), or
    /// `None` when none were: tools then use [`KernelRegistry::standard`].
    pub fn of(ctx: &Context) -> Option<&KernelRegistry> {
        ctx.extension::<KernelRegistry>()
    }

    /// The kernels of `ctx`, or the standard ones when none are installed.
    pub fn of_or_standard(ctx: &Context) -> std::borrow::Cow<'_, KernelRegistry> {
        match KernelRegistry::of(ctx) {
            Some(kernels) => std::borrow::Cow::Borrowed(kernels),
            None => std::borrow::Cow::Owned(KernelRegistry::standard()),
        }
    }

    /// The kernels of `ctx` for adding to, installing [`KernelRegistry::standard`]
    /// first if there are none. A downstream crate calls this from the setup
    /// that registers its dialect, so passes that run the interpreter
    /// (`calibrate`) find its kernels.
    pub fn install(ctx: &mut Context) -> &mut KernelRegistry {
        if ctx.extension::<KernelRegistry>().is_none() {
            ctx.set_extension(KernelRegistry::standard());
        }
        ctx.extension_mut::<KernelRegistry>()
    }

    /// Registers (or replaces) the kernel of op `name`.
    pub fn register(&mut self, name: &str, kernel: Kernel) {
        self.kernels.insert(name.to_string(), kernel);
    }

    /// The kernel of op `name`.
    pub fn get(&self, name: &str) -> Option<Kernel> {
        self.kernels.get(name).copied()
    }

    /// True if op `name` has a kernel.
    pub fn contains(&self, name: &str) -> bool {
        self.kernels.contains_key(name)
    }

    /// Names of ops with a kernel, sorted.
    pub fn names(&self) -> Vec<&str> {
        let mut names: Vec<&str> = self.kernels.keys().map(String::as_str).collect();
        names.sort_unstable();
        names
    }
}

impl std::fmt::Debug for KernelRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KernelRegistry").field("ops", &self.names()).finish()
    }
}
