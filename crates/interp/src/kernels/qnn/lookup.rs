//! `qnn.lookup {table}` (§7.5): each stored value `q` of the input becomes
//! `table[q − qmin]`, `qmin` the input's storage minimum. The table is read
//! once per call and checked (its length, each entry against the result's
//! storage range); an input value outside the input's storage range, which
//! the contract rules out, is an error rather than an index out of bounds.

use super::{ints, narrow, per_tensor, quant_operand, result_quant};
use crate::error::{bail, InterpError};
use crate::kernels::fp::one;
use crate::registry::{Kernel, KernelContext, KernelResults};
use crate::tensor::Tensor;
use qopt_dialect_qnn::op_names as qnn_op;
use qopt_dialect_qnn::quant_params::storage_range;
use qopt_ir_core::{dense_values_i128, AttrData};

kernel_table! {
    qnn_op::LOOKUP => lookup,
}

/// `qnn.lookup` (§7.5).
pub(crate) fn lookup(kc: &mut KernelContext<'_>, ops: &[&Tensor]) -> Result<KernelResults, InterpError> {
    if ops.len() != 1 {
        bail!("expects 1 operand, got {}", ops.len());
    }
    let (x, qx) = quant_operand(kc, ops, 0, "input")?;
    per_tensor(qx, "input")?;
    let qout = result_quant(kc)?;
    per_tensor(qout, "result")?;
    let (qmin, qmax) = storage_range(qx);
    let (lo, hi) = storage_range(qout);
    let Some(attr) = kc.ctx.dict_get(kc.attrs, "table") else { bail!("needs a 'table' attribute") };
    let table = match kc.ctx.attr_data(attr) {
        AttrData::Dense(d) => dense_values_i128(kc.ctx, d),
        _ => None,
    };
    let Some(table) = table else { bail!("'table' must be a dense integer attribute") };
    let entries = i128::from(qmax) - i128::from(qmin) + 1;
    if table.len() as i128 != entries {
        bail!(
            "'table' has {} entries but the input's storage range [{qmin}, {qmax}] has {entries} values",
            table.len()
        );
    }
    let table: Vec<i64> = table
        .into_iter()
        .map(|e| match i64::try_from(e) {
            Ok(v) if (lo..=hi).contains(&v) => Ok(v),
            _ => Err(InterpError::new(format!(
                "'table' entry {e} is outside the result's storage range [{lo}, {hi}]"
            ))),
        })
        .collect::<Result<_, _>>()?;
    let values = ints(x, "input")?;
    let shape = values.shape().to_vec();
    let out = values
        .iter()
        .map(|&q| match usize::try_from(q - qmin) {
            Ok(i) if q <= qmax => Ok(table[i]),
            _ => Err(InterpError::new(format!(
                "input value {q} is outside its storage range [{qmin}, {qmax}]"
            ))),
        })
        .collect::<Result<Vec<i64>, _>>()?;
    one(narrow(kc, &shape, out)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::fp::tests::{run_all_typed, run_typed_err};
    use crate::kernels::qnn::tests::{i8t, u8t};
    use qopt_ir_core::Context;

    fn run(ctx: &mut Context, x: &Tensor, in_ty: &str, attrs: &str, out_ty: &str) -> Result<Tensor, String> {
        let mut r = run_all_typed(ctx, lookup, &[x], &[in_ty], attrs, &[out_ty]).map_err(|e| e.message)?;
        Ok(r.remove(0))
    }

    /// The worked example of §7.5 and the op's description: hard_swish of an
    /// i4 input at scale 0.5, quantized at scale 0.125.
    #[test]
    fn indexes_by_stored_value_minus_storage_min() {
        let mut ctx = Context::new();
        let table =
            "{table = dense<[0, 0, 0, -2, -3, -3, -3, -2, 0, 2, 5, 9, 13, 18, 24, 28]> : tensor<16xi8>}";
        let x = i8t(&[2, 3], &[-8, -5, -1, 0, 3, 7]);
        let y = run(
            &mut ctx,
            &x,
            "tensor<2x3x!qnn.uniform<i4:f32, 0.5:0>>",
            table,
            "tensor<2x3x!qnn.uniform<i8:f32, 0.125:0>>",
        )
        .unwrap();
        assert_eq!(y, i8t(&[2, 3], &[0, -2, -2, 0, 9, 28]));
        // u8 in, u8 out: the identity table.
        let ids: Vec<String> = (0..256).map(|i| i.to_string()).collect();
        let identity = format!("{{table = dense<[{}]> : tensor<256xi32>}}", ids.join(", "));
        let x = u8t(&[4], &[0, 1, 128, 255]);
        let ty = "tensor<4x!qnn.uniform<u8:f32, 0.1:128>>";
        assert_eq!(run(&mut ctx, &x, ty, &identity, ty).unwrap(), x);
        // A narrowed input range: 255 entries, index q + 127.
        let entries: Vec<String> = (0..255).map(|i| (i % 7).to_string()).collect();
        let narrow = format!("{{table = dense<[{}]> : tensor<255xi8>}}", entries.join(", "));
        let x = i8t(&[3], &[-127, 0, 127]);
        let y = run(
            &mut ctx,
            &x,
            "tensor<3x!qnn.uniform<i8<-127:127>:f32, 0.1:0>>",
            &narrow,
            "tensor<3x!qnn.uniform<i8:f32, 0.1:0>>",
        )
        .unwrap();
        assert_eq!(y, i8t(&[3], &[0, (127 % 7) as i8, (254 % 7) as i8]));
    }

    /// Malformed tables and out-of-contract inputs are errors, never panics.
    #[test]
    fn bad_tables_and_inputs_are_errors() {
        let mut ctx = Context::new();
        let in_ty = "tensor<2x!qnn.uniform<i8<-127:127>:f32, 0.1:0>>";
        let out_ty = "tensor<2x!qnn.uniform<i8<-100:100>:f32, 0.1:0>>";
        let x = i8t(&[2], &[0, 1]);
        let err = |ctx: &mut Context, x: &Tensor, attrs: &str| {
            run_typed_err(ctx, lookup, &[x], &[in_ty], attrs, &[out_ty])
        };
        assert!(err(&mut ctx, &x, "{}").contains("needs a 'table'"));
        assert!(err(&mut ctx, &x, "{table = 3}").contains("dense integer"));
        assert!(err(&mut ctx, &x, "{table = dense<[1, 2]> : tensor<2xi8>}").contains("has 2 entries"));
        let table = |fill: i64| format!("{{table = dense<{fill}> : tensor<255xi32>}}");
        assert!(err(&mut ctx, &x, &table(101)).contains("outside the result's storage range"));
        let low = i8t(&[2], &[-128, 0]);
        assert!(err(&mut ctx, &low, &table(5)).contains("input value -128 is outside"));
        assert_eq!(run(&mut ctx, &x, in_ty, &table(5), out_ty).unwrap(), i8t(&[2], &[5, 5]));
        let float = crate::kernels::fp::tests::f32t(&[2], &[0.0, 1.0]);
        let e = run_typed_err(&mut ctx, lookup, &[&float], &["tensor<2xf32>"], &table(5), &[out_ty]);
        assert!(e.contains("quantized element type"), "{e}");
    }
}
