//! Running a [`JitModule`] on the interpreter's [`Tensor`]s, so that tools
//! and tests hand the same values to both and compare them directly.

use crate::buffer::{Elements, ElementsMut};
use crate::error::{CodegenError, CodegenErrorKind};
use crate::runtime::{JitModule, Workspace};
use qopt_interp::Tensor;
use std::borrow::Cow;

impl JitModule {
    /// Runs the program on interpreter tensors (checked against the
    /// signature) and returns its outputs as tensors of the signature's
    /// shapes.
    pub fn run_tensors(
        &self,
        inputs: &[Tensor],
        workspace: &mut Workspace,
        threads: usize,
    ) -> Result<Vec<Tensor>, CodegenError> {
        self.with_tensors(inputs, |views, outs| self.run(views, outs, workspace, threads))
            .map(|(outputs, ())| outputs)
    }

    /// [`JitModule::profile`] on interpreter tensors: the time spent in each
    /// kernel over `runs` runs on `threads` threads.
    pub fn profile_tensors(
        &self,
        inputs: &[Tensor],
        workspace: &mut Workspace,
        (runs, threads): (usize, usize),
    ) -> Result<Vec<std::time::Duration>, CodegenError> {
        self.with_tensors(inputs, |views, outs| self.profile(views, outs, workspace, (runs, threads)))
            .map(|(_, times)| times)
    }

    /// Checks `inputs`, makes output tensors, and calls `body` with buffers
    /// viewing both.
    fn with_tensors<R>(
        &self,
        inputs: &[Tensor],
        body: impl FnOnce(&[Elements<'_>], &mut [ElementsMut<'_>]) -> Result<R, CodegenError>,
    ) -> Result<(Vec<Tensor>, R), CodegenError> {
        let program = self.program();
        let mut contiguous: Vec<Cow<'_, Tensor>> = Vec::with_capacity(inputs.len());
        for (i, t) in inputs.iter().enumerate() {
            let sig = program.inputs.get(i);
            if let Some(sig) = sig {
                if t.shape() != sig.shape.as_slice() {
                    return Err(CodegenError::new(
                        CodegenErrorKind::BadArguments,
                        format!(
                            "input {i} must have shape {:?} ({}), got {:?}",
                            sig.shape,
                            sig.type_text,
                            t.shape()
                        ),
                    ));
                }
            }
            contiguous.push(standard_layout(t));
        }
        let views =
            contiguous.iter().enumerate().map(|(i, t)| elements_of(t, i)).collect::<Result<Vec<_>, _>>()?;
        let mut outputs: Vec<Tensor> =
            program.outputs.iter().map(|sig| Tensor::zeros(sig.element.dtype(), &sig.shape)).collect();
        let mut out_views: Vec<ElementsMut<'_>> = outputs.iter_mut().map(elements_mut_of).collect();
        let result = body(&views, &mut out_views)?;
        drop(out_views);
        Ok((outputs, result))
    }
}

/// Applies `$body` to the array of any tensor variant, binding it to `$a`
/// and the matching buffer variant's path to `$buffer`.
macro_rules! each_variant {
    ($t:expr, $a:ident, $buffer:ident => $body:expr) => {
        match $t {
            Tensor::F32($a) => each_variant!(@ F32, $buffer, $body),
            Tensor::F64($a) => each_variant!(@ F64, $buffer, $body),
            Tensor::I8($a) => each_variant!(@ I8, $buffer, $body),
            Tensor::U8($a) => each_variant!(@ U8, $buffer, $body),
            Tensor::I16($a) => each_variant!(@ I16, $buffer, $body),
            Tensor::I32($a) => each_variant!(@ I32, $buffer, $body),
            Tensor::I64($a) => each_variant!(@ I64, $buffer, $body),
            Tensor::Bool($a) => each_variant!(@ Bool, $buffer, $body),
        }
    };
    (@ $variant:ident, $buffer:ident, $body:expr) => {{
        #[allow(unused_macros)]
        macro_rules! $buffer {
            (in) => {
                Elements::$variant
            };
            (out) => {
                ElementsMut::$variant
            };
            (tensor) => {
                Tensor::$variant
            };
        }
        $body
    }};
}

/// `t` itself when its elements are in row-major order already (every run
/// of qrun), else a row-major copy.
fn standard_layout(t: &Tensor) -> Cow<'_, Tensor> {
    each_variant!(t, a, variant => if a.is_standard_layout() {
        Cow::Borrowed(t)
    } else {
        Cow::Owned(variant!(tensor)(a.as_standard_layout().into_owned()))
    })
}

fn elements_of(t: &Tensor, i: usize) -> Result<Elements<'_>, CodegenError> {
    let slice = each_variant!(t, a, variant => a.as_slice().map(variant!(in)));
    slice.ok_or_else(|| {
        CodegenError::new(CodegenErrorKind::BadArguments, format!("input {i} is not contiguous"))
    })
}

fn elements_mut_of(t: &mut Tensor) -> ElementsMut<'_> {
    // Outputs are created above in standard layout, so the slices exist.
    each_variant!(t, a, variant => variant!(out)(a.as_slice_mut().unwrap_or_default()))
}
