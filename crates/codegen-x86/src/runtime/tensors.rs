//! Running a [`JitModule`] on the interpreter's [`Tensor`]s, so that tools
//! and tests hand the same values to both and compare them directly.

use crate::buffer::{ElementType, Elements, ElementsMut};
use crate::error::{CodegenError, CodegenErrorKind};
use crate::runtime::{JitModule, Workspace};
use ndarray::{ArrayD, IxDyn};
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
        let mut outputs: Vec<Tensor> = program
            .outputs
            .iter()
            .map(|sig| {
                let shape = IxDyn(&sig.shape);
                match sig.element {
                    ElementType::F32 => Tensor::F32(ArrayD::zeros(shape)),
                    ElementType::I8 => Tensor::I8(ArrayD::zeros(shape)),
                    ElementType::U8 => Tensor::U8(ArrayD::zeros(shape)),
                }
            })
            .collect();
        let mut out_views: Vec<ElementsMut<'_>> = outputs.iter_mut().map(elements_mut_of).collect();
        let result = body(&views, &mut out_views)?;
        drop(out_views);
        Ok((outputs, result))
    }
}

/// `t` itself when its elements are in row-major order already (every run
/// of qrun), else a row-major copy.
fn standard_layout(t: &Tensor) -> Cow<'_, Tensor> {
    match t {
        Tensor::F32(a) if !a.is_standard_layout() => {
            Cow::Owned(Tensor::F32(a.as_standard_layout().into_owned()))
        }
        Tensor::I8(a) if !a.is_standard_layout() => {
            Cow::Owned(Tensor::I8(a.as_standard_layout().into_owned()))
        }
        Tensor::U8(a) if !a.is_standard_layout() => {
            Cow::Owned(Tensor::U8(a.as_standard_layout().into_owned()))
        }
        other => Cow::Borrowed(other),
    }
}

fn elements_of(t: &Tensor, i: usize) -> Result<Elements<'_>, CodegenError> {
    let slice = match t {
        Tensor::F32(a) => a.as_slice().map(Elements::F32),
        Tensor::I8(a) => a.as_slice().map(Elements::I8),
        Tensor::U8(a) => a.as_slice().map(Elements::U8),
        other => {
            return Err(CodegenError::new(
                CodegenErrorKind::BadArguments,
                format!("input {i} holds {:?} elements; compiled code takes f32, i8 and u8", other.dtype()),
            ))
        }
    };
    slice.ok_or_else(|| {
        CodegenError::new(CodegenErrorKind::BadArguments, format!("input {i} is not contiguous"))
    })
}

fn elements_mut_of(t: &mut Tensor) -> ElementsMut<'_> {
    // Outputs are created above in standard layout, so the slices exist.
    match t {
        Tensor::F32(a) => ElementsMut::F32(a.as_slice_mut().unwrap_or_default()),
        Tensor::I8(a) => ElementsMut::I8(a.as_slice_mut().unwrap_or_default()),
        Tensor::U8(a) => ElementsMut::U8(a.as_slice_mut().unwrap_or_default()),
        _ => ElementsMut::U8(&mut []),
    }
}
