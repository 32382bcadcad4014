//! The C header that goes with an object file (`model.h`): the entry
//! points' prototypes, a macro for every buffer's shape, element count,
//! element type and size, the workspace size, and a comment naming the
//! model, the target and the quantized types' parameters.
//!
//! For prefix `model` and an input `tensor<1x4xf32>` quantized to `i8`:
//!
//! ```c
//! #define MODEL_INPUT0_RANK 2
//! #define MODEL_INPUT0_SHAPE { 1, 4 }
//! #define MODEL_INPUT0_ELEMENTS 4
//! #define MODEL_INPUT0_TYPE float
//! #define MODEL_INPUT0_BYTES 16
//! #define MODEL_INPUT0_QUANTIZED_TYPE int8_t
//! #define MODEL_INPUT0_SCALE 0.05
//! #define MODEL_INPUT0_ZERO_POINT (-3)
//! int model_run(const float *input0, float *output0);
//! ```
//!
//! The header includes only `<stdint.h>` and is valid C99 and C++.

use crate::error::CodegenError;
use crate::module::{Program, QuantizedTensor, TensorSignature};
use crate::object::entry::{c_element_type, entry_buffers, text_image, EntryKind};
use crate::object::{check_prefix, ObjectOptions};
use std::fmt::Write as _;

/// The header of the object [`write_object`](crate::write_object) writes
/// for `program` with `options`.
pub fn c_header(program: &Program, options: &ObjectOptions) -> Result<String, CodegenError> {
    check_prefix(&options.prefix)?;
    let image = text_image(program, &options.prefix)?;
    let m = options.macro_prefix();
    let mut h = String::new();

    // The comment block.
    let _ = writeln!(h, "/* The C interface of the object file qcompile wrote for this model.");
    let _ = writeln!(h, " * Generated; do not edit.");
    let _ = writeln!(h, " *");
    let _ = writeln!(h, " * Model:   {}, function @{}", comment_safe(&options.model_name), program.function);
    let _ = writeln!(h, " * Target:  {} ({})", program.target.cpu, program.target.features);
    let _ = writeln!(
        h,
        " * Code:    {} kernels, {} bytes of kernel code, {} bytes of .text with the entry points; {} bytes of .rodata; arena {} bytes",
        program.kernels.len(),
        program.code.len(),
        image.text.len(),
        program.rodata.len(),
        program.arena_bytes
    );
    for (title, sigs, quantized, what) in [
        ("Inputs", &program.inputs, program.quantized.as_ref().map(|q| &q.inputs), "input"),
        ("Outputs", &program.outputs, program.quantized.as_ref().map(|q| &q.outputs), "output"),
    ] {
        let _ = writeln!(h, " *\n * {title}:");
        if sigs.is_empty() {
            let _ = writeln!(h, " *   (none)");
        }
        for (i, sig) in sigs.iter().enumerate() {
            let _ = writeln!(
                h,
                " *   {what}{i}: {}{}  {}",
                c_element_type(sig.element),
                dims(&sig.shape),
                comment_safe(&sig.type_text)
            );
            if let Some(t) = quantized.and_then(|q| q.get(i)) {
                let _ = writeln!(
                    h,
                    " *     quantized: {}, scale {:?}, zero point {}, range [{}, {}]  {}",
                    c_element_type(t.quant.element),
                    t.quant.scale,
                    t.quant.zero_point,
                    t.quant.qmin,
                    t.quant.qmax,
                    comment_safe(&t.signature.type_text)
                );
            }
        }
    }
    if !program.host_ops.is_empty() {
        let _ = writeln!(h, " *\n * Host calls: these ops run in the interpreter's kernels, so link the");
        let _ = writeln!(h, " * host-call library too (cargo build --release -p qopt-host-calls gives");
        let _ = writeln!(h, " * target/release/libqopt_host_calls.a; cc main.c model.o libqopt_host_calls.a");
        let _ =
            writeln!(h, " * -lgcc_s -lutil -lrt -lpthread -lm -ldl -lc). An entry returns 3 when one fails.");
        for op in &program.host_ops {
            let _ = writeln!(h, " *   {}: {}", comment_safe(&op.describe), comment_safe(&op.reason));
        }
    }
    let _ = writeln!(h, " *");
    let _ = writeln!(h, " * Buffers are dense row-major (C order) arrays of their element type.");
    let _ = writeln!(h, " * Every entry point returns 0 when it ran, and 2 without running when this");
    let _ = writeln!(h, " * CPU lacks a feature of the target (checked on the first call). The code");
    let _ = writeln!(h, " * sets MXCSR to round-to-nearest-even without FTZ/DAZ while it computes");
    let _ = writeln!(h, " * and restores the caller's MXCSR, so results are the same whatever");
    let _ = writeln!(h, " * floating-point mode the caller runs in.");
    let _ = writeln!(h, " */");
    let guard = format!("{m}_H");
    let _ = writeln!(h, "#ifndef {guard}\n#define {guard}\n\n#include <stdint.h>\n");
    let _ = writeln!(h, "#ifdef __cplusplus\nextern \"C\" {{\n#endif\n");

    // Macros.
    let _ = writeln!(h, "#define {m}_NUM_INPUTS {}", program.inputs.len());
    let _ = writeln!(h, "#define {m}_NUM_OUTPUTS {}", program.outputs.len());
    let _ =
        writeln!(h, "/* Bytes and alignment of the arena {}_run_with_workspace takes. */", options.prefix);
    let _ = writeln!(h, "#define {m}_WORKSPACE_BYTES {}", program.arena_bytes);
    let _ = writeln!(h, "#define {m}_WORKSPACE_ALIGNMENT {}", crate::abi::BUFFER_ALIGN);
    let _ = writeln!(h, "#define {m}_HAS_RUN_QUANTIZED {}", u8::from(program.quantized.is_some()));
    let _ = writeln!(h, "/* Ops run by host calls (link libqopt_host_calls.a when not 0). */");
    let _ = writeln!(h, "#define {m}_HOST_CALLS {}", program.host_ops.len());
    for (what, sigs, quantized) in [
        ("INPUT", &program.inputs, program.quantized.as_ref().map(|q| &q.inputs)),
        ("OUTPUT", &program.outputs, program.quantized.as_ref().map(|q| &q.outputs)),
    ] {
        for (i, sig) in sigs.iter().enumerate() {
            let _ = writeln!(h);
            tensor_macros(&mut h, &format!("{m}_{what}{i}"), sig);
            if let Some(t) = quantized.and_then(|q| q.get(i)) {
                quantized_macros(&mut h, &format!("{m}_{what}{i}"), t);
            }
        }
    }

    // Prototypes.
    for entry in &image.entries {
        let _ = writeln!(h);
        let doc = match entry.kind {
            EntryKind::Run => "Runs the model on the static arena in .bss: not reentrant (one call at a\n * time in the process).".to_string(),
            EntryKind::RunWithWorkspace => format!(
                "Runs the model on `workspace`: {m}_WORKSPACE_BYTES bytes aligned to\n * {m}_WORKSPACE_ALIGNMENT, one per concurrent call. Returns 1 without\n * running when the model needs an arena and `workspace` is NULL or misaligned."
            ),
            EntryKind::RunQuantized => "Runs the model on the quantized tensors: each input is what the model's\n * first qnn.quantize makes of the float input, each output what its last\n * qnn.dequantize reads (static arena, not reentrant).".to_string(),
        };
        let (inputs, outputs) = entry_buffers(program, entry.kind);
        let _ = writeln!(
            h,
            "/* {doc}\n * {} input{}, {} output{}. */",
            inputs.len(),
            plural(inputs.len()),
            outputs.len(),
            plural(outputs.len())
        );
        let _ = writeln!(h, "{};", entry.prototype);
    }
    let _ = writeln!(h, "\n#ifdef __cplusplus\n}}\n#endif\n\n#endif /* {guard} */");
    Ok(h)
}

fn plural(n: usize) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

/// `[1][4]`: the dimensions as a C array declarator.
fn dims(shape: &[usize]) -> String {
    shape.iter().map(|d| format!("[{d}]")).collect()
}

/// Text safe inside a C comment (no `*/`).
fn comment_safe(text: &str) -> String {
    text.replace("*/", "* /")
}

/// An integer as a C macro body (negative values parenthesized).
fn int_macro(v: i64) -> String {
    if v < 0 {
        format!("({v})")
    } else {
        v.to_string()
    }
}

fn tensor_macros(h: &mut String, name: &str, sig: &TensorSignature) {
    let _ = writeln!(h, "#define {name}_RANK {}", sig.shape.len());
    if sig.shape.is_empty() {
        let _ = writeln!(h, "/* {name} is a scalar: no _SHAPE. */");
    } else {
        let dims: Vec<String> = sig.shape.iter().map(usize::to_string).collect();
        let _ = writeln!(h, "#define {name}_SHAPE {{ {} }}", dims.join(", "));
    }
    let _ = writeln!(h, "#define {name}_ELEMENTS {}", sig.len());
    let _ = writeln!(h, "#define {name}_TYPE {}", c_element_type(sig.element));
    let _ = writeln!(h, "#define {name}_BYTES {}", sig.bytes());
}

fn quantized_macros(h: &mut String, name: &str, t: &QuantizedTensor) {
    let _ = writeln!(h, "#define {name}_QUANTIZED_TYPE {}", c_element_type(t.quant.element));
    let _ = writeln!(h, "#define {name}_QUANTIZED_BYTES {}", t.signature.bytes());
    let _ = writeln!(h, "#define {name}_SCALE {:?}", t.quant.scale);
    let _ = writeln!(h, "#define {name}_ZERO_POINT {}", int_macro(t.quant.zero_point.into()));
    let _ = writeln!(h, "#define {name}_QMIN {}", int_macro(t.quant.qmin.into()));
    let _ = writeln!(h, "#define {name}_QMAX {}", int_macro(t.quant.qmax.into()));
}
