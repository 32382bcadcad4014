//! `--compare`: the reference model and another one run on the same inputs;
//! every op result is recorded through the interpreter's per-op hook and the
//! two runs' values are matched and measured ([`ErrorStats`]).
//!
//! Matching. The IR keeps no SSA names, so a value is known by its op's
//! location (`loc("conv1")`, the text [`loc_to_string`] gives), plus `#k` for
//! result `k` of an op with several results, its shape, and the occurrence
//! when one run meets the same location and shape again (an op in a function
//! called twice, or several ops sharing a location): the n-th occurrence in
//! one model matches the n-th in the other. The shape is part of the name
//! because a lowering that expands an op keeps its location on every new op
//! (`accel-lower` turns `loc("conv1")` into DMA transfers of the input,
//! weight and bias, the engine op and a transfer back), and the value that
//! stands for the original is the first one of the original's shape. An op
//! with a fused location (`loc(fused["conv1", "bn1", "relu1"])`, which
//! `fold-bn` and `fuse` give the op they merge others into) is known by the
//! last part: it computes that op's value. Values
//! of ops without a location are not compared. Function
//! outputs always match by position. Rows come in the reference's execution
//! order, outputs last; values of the other model that match nothing are
//! listed by name, op and shape.
//!
//! Values. A quantized value (integer storage of a `!qnn.uniform` type) is
//! dequantized first, `real = f32(q − zero_point) ⊗ f32(scale)` with the
//! parameters of its element's coordinate on the axis for per-axis types
//! (`docs/quant-semantics.md` §3.2, [`dequantize_f32`]); every other value is
//! compared as stored, widened to f64.

use super::engine::Engine;
use super::metrics::ErrorStats;
use super::model::{Model, Signature};
use qopt_dialect_qnn::fixed_point::{dequantize_f32, scale_f32};
use qopt_dialect_qnn::quant_params::{axis, params_at, quant_element};
use qopt_interp::{InterpError, Interpreter, Tensor};
use qopt_ir_core::{loc_to_string, Context, FxHashMap, LocationData, OpId, Type};
use std::fmt;

/// How a value is known in both models.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct ValueKey {
    loc: String,
    /// The result index, for ops with several results.
    result: Option<usize>,
    /// The value's shape (shown in its own column, not in the name).
    shape: Vec<usize>,
    /// 1 for the first time a run meets this location, result and shape, 2
    /// for the next...
    occurrence: usize,
}

impl fmt::Display for ValueKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.loc)?;
        if let Some(k) = self.result {
            write!(f, "#{k}")?;
        }
        if self.occurrence > 1 {
            write!(f, " (occurrence {})", self.occurrence)?;
        }
        Ok(())
    }
}

/// Gives the keys of an op's results in one run, counting occurrences.
struct Keys<'m> {
    model: &'m Model,
    seen: FxHashMap<(String, Option<usize>, Vec<usize>), usize>,
}

impl<'m> Keys<'m> {
    fn new(model: &'m Model) -> Keys<'m> {
        Keys { model, seen: FxHashMap::default() }
    }

    /// The keys and types of `op`'s `results`; `None` for an op without location.
    fn of(&mut self, op: OpId, results: &[Tensor]) -> Option<Vec<(ValueKey, Type)>> {
        let m = &self.model.module;
        let ctx = &self.model.ctx;
        // A merged op (fold-bn, fuse) has a fused location listing the ops it
        // replaced in order; it computes the last one's value.
        let loc = match ctx.loc_data(m.op_loc(op)) {
            LocationData::Fused(parts) => parts.last().map_or(String::new(), |&l| loc_to_string(ctx, l)),
            _ => loc_to_string(ctx, m.op_loc(op)),
        };
        if loc.is_empty() {
            return None;
        }
        let several = m.num_results(op) > 1;
        let keys = m
            .results(op)
            .enumerate()
            .zip(results)
            .map(|((k, v), t)| {
                let result = several.then_some(k);
                let shape = t.shape().to_vec();
                let count = self.seen.entry((loc.clone(), result, shape.clone())).or_insert(0);
                *count += 1;
                (ValueKey { loc: loc.clone(), result, shape, occurrence: *count }, m.value_type(v))
            })
            .collect();
        Some(keys)
    }
}

/// What comparing one value gave.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Outcome {
    /// The statistics of the other model's value against the reference's.
    Stats(ErrorStats),
    /// The other model has no value with this name.
    Missing,
    /// The other model's output at this position has another shape.
    ShapeMismatch(Vec<usize>),
}

/// One row of the comparison table.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Row {
    /// `loc("conv1")`, `loc("split")#1` or `output #0`.
    pub value: String,
    /// The reference op's name (`fp.conv2d`); `func.return` for outputs.
    pub op: String,
    /// The reference value's shape (of one run).
    pub shape: Vec<usize>,
    /// True for a function output, false for an op result.
    pub output: bool,
    pub outcome: Outcome,
}

/// The comparison of the two models over one or more runs.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct Comparison {
    pub rows: Vec<Row>,
    /// Located values of the other model that match no reference value.
    pub unmatched_other: Vec<String>,
    /// The other model ran as compiled code, so only outputs were compared.
    pub outputs_only: bool,
}

impl Comparison {
    /// Adds the comparison of more runs: statistics of the same value merge.
    pub fn merge(&mut self, more: Comparison) {
        let index: FxHashMap<String, usize> =
            self.rows.iter().enumerate().map(|(i, r)| (r.value.clone(), i)).collect();
        for row in more.rows {
            match index.get(&row.value).map(|&i| &mut self.rows[i]) {
                Some(Row { outcome: Outcome::Stats(s), .. }) => {
                    if let Outcome::Stats(more) = row.outcome {
                        s.merge(&more);
                    }
                }
                Some(_) => {}
                None => self.rows.push(row),
            }
        }
        self.outputs_only |= more.outputs_only;
        for name in more.unmatched_other {
            if !self.unmatched_other.contains(&name) {
                self.unmatched_other.push(name);
            }
        }
    }
}

/// The two models of a comparison and the function they run.
pub(crate) struct Pair<'m> {
    pub reference: &'m Model,
    pub other: &'m Model,
    pub reference_sig: &'m Signature,
    pub other_sig: &'m Signature,
}

/// A located reference value of one run.
struct Recorded {
    key: ValueKey,
    op: String,
    shape: Vec<usize>,
    real: Vec<f64>,
    outcome: Outcome,
}

impl Pair<'_> {
    /// Runs both models on `inputs` and compares every matched value. Errors
    /// name the model that failed.
    pub fn compare_run(
        &self,
        reference: &mut Interpreter<'_>,
        other: &mut Engine<'_>,
        inputs: &[Tensor],
        during: Option<String>,
        failure: impl Fn(&Model, InterpError) -> String,
    ) -> Result<Comparison, String> {
        let (a, b) = (self.reference, self.other);
        let mut recorded: Vec<Recorded> = Vec::new();
        let mut keys = Keys::new(a);
        let outputs_a = reference
            .run_with(&self.reference_sig.func, inputs, &mut |op, results| {
                let Some(located) = keys.of(op, results) else { return };
                let op_name = a.ctx.op_name_str(a.module.op_name(op));
                for ((key, ty), t) in located.into_iter().zip(results) {
                    let real = real_values(&a.ctx, ty, t);
                    let shape = t.shape().to_vec();
                    recorded.push(Recorded {
                        key,
                        op: op_name.to_string(),
                        shape,
                        real,
                        outcome: Outcome::Missing,
                    });
                }
            })
            .map_err(|e| failure(a, e))?;

        let index: FxHashMap<ValueKey, usize> =
            recorded.iter().enumerate().map(|(i, r)| (r.key.clone(), i)).collect();
        let mut unmatched_other = Vec::new();
        let outputs_only = !matches!(other, Engine::Interpreter(_));
        let outputs_b = match other {
            Engine::Interpreter(other) => {
                let mut keys = Keys::new(b);
                other
                    .run_with(&self.other_sig.func, inputs, &mut |op, results| {
                        let Some(located) = keys.of(op, results) else { return };
                        for ((key, ty), t) in located.into_iter().zip(results) {
                            match index.get(&key).map(|&i| &mut recorded[i]) {
                                Some(r) => {
                                    r.outcome =
                                        Outcome::Stats(ErrorStats::of(&r.real, &real_values(&b.ctx, ty, t)));
                                }
                                // With its op and shape: a value that shares a
                                // matched row's location (a fused layer's bias)
                                // is told apart from it.
                                None => unmatched_other.push(format!(
                                    "{key} ({} {:?})",
                                    b.ctx.op_name_str(b.module.op_name(op)),
                                    key.shape
                                )),
                            }
                        }
                    })
                    .map_err(|e| failure(b, e))?
            }
            // Compiled code shows only its outputs.
            compiled => {
                recorded.clear();
                compiled.run(b, &self.other_sig.func, inputs, during)?
            }
        };

        let mut rows: Vec<Row> = recorded
            .into_iter()
            .map(|r| Row {
                value: r.key.to_string(),
                op: r.op,
                shape: r.shape,
                output: false,
                outcome: r.outcome,
            })
            .collect();
        for (k, ref_out) in outputs_a.iter().enumerate() {
            let real_a = real_values(&a.ctx, self.reference_sig.results[k], ref_out);
            let outcome = match (outputs_b.get(k), self.other_sig.results.get(k)) {
                (Some(t), Some(&ty)) if t.shape() == ref_out.shape() => {
                    Outcome::Stats(ErrorStats::of(&real_a, &real_values(&b.ctx, ty, t)))
                }
                (Some(t), Some(_)) => Outcome::ShapeMismatch(t.shape().to_vec()),
                _ => Outcome::Missing,
            };
            rows.push(Row {
                value: format!("output #{k}"),
                op: "func.return".to_string(),
                shape: ref_out.shape().to_vec(),
                output: true,
                outcome,
            });
        }
        // Outputs only the other model has: reported like its other extra values.
        unmatched_other.extend((outputs_a.len()..outputs_b.len()).map(|k| format!("output #{k}")));
        Ok(Comparison { rows, unmatched_other, outputs_only })
    }
}

/// The real values a tensor of type `ty` stands for, row-major: quantized
/// values dequantized (see the module docs), others widened as stored.
fn real_values(ctx: &Context, ty: Type, t: &Tensor) -> Vec<f64> {
    let stored = t.to_f64_vec();
    let Some(q) = quant_element(ctx, ty) else { return stored };
    let (stride, size) = match axis(q) {
        Some(a) if a < t.rank() => (t.shape()[a + 1..].iter().product::<usize>(), t.shape()[a]),
        _ => (1, 1),
    };
    stored
        .iter()
        .enumerate()
        .map(|(i, &v)| {
            let index = if size > 0 { (i / stride.max(1)) % size } else { 0 };
            match params_at(q, index) {
                // Stored values are integers of at most 32 bits: `as` is exact.
                Some(p) => f64::from(dequantize_f32(v as i64, p.zero_point, scale_f32(p.scale))),
                None => f64::NAN,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use qopt_ir_core::{FloatKind, IntType, QuantParams, QuantType, Signedness};
    use qopt_npy::RawArray;

    fn i8_tensor(shape: &[usize], values: &[i8]) -> Tensor {
        Tensor::from_raw(&RawArray::from_elements(shape.to_vec(), values).unwrap()).unwrap()
    }

    fn quantized(ctx: &mut Context, shape: &[i64], params: QuantParams) -> Type {
        let storage = IntType { width: 8, signedness: Signedness::Signless };
        let q = ctx.quant_type(QuantType {
            storage,
            storage_min: -128,
            storage_max: 127,
            expressed: FloatKind::F32,
            params,
        });
        ctx.tensor_type(shape, q)
    }

    #[test]
    fn quantized_values_are_dequantized_per_tensor_and_per_axis() {
        let mut ctx = Context::new();
        // quant-semantics §3.2: in <i8:f32, 0.5:-3>, q = 7 is 5.0 and q = −128 is −62.5.
        let ty = quantized(&mut ctx, &[2], QuantParams::PerTensor { scale: 0.5, zero_point: -3 });
        assert_eq!(real_values(&ctx, ty, &i8_tensor(&[2], &[7, -128])), [5.0, -62.5]);
        // §3.3: along axis 0, row 0 uses (0.1, 0) and row 1 uses (0.25, 1).
        let params =
            QuantParams::PerAxis { axis: 0, scales: vec![0.1, 0.25].into(), zero_points: vec![0, 1].into() };
        let ty = quantized(&mut ctx, &[2, 3], params);
        let real = real_values(&ctx, ty, &i8_tensor(&[2, 3], &[4, 0, 127, 2, 1, 5]));
        assert_eq!(real, [0.4f32, 0.0, 12.7, 0.25, 0.0, 1.0].map(f64::from));
        // Along axis 1 of the transposed layout.
        let params =
            QuantParams::PerAxis { axis: 1, scales: vec![0.1, 0.25].into(), zero_points: vec![0, 1].into() };
        let ty = quantized(&mut ctx, &[3, 2], params);
        let real = real_values(&ctx, ty, &i8_tensor(&[3, 2], &[4, 2, 0, 1, 127, 5]));
        assert_eq!(real, [0.4f32, 0.25, 0.0, 0.0, 12.7, 1.0].map(f64::from));
    }

    #[test]
    fn float_values_pass_through() {
        let mut ctx = Context::new();
        let f32t = ctx.common().f32;
        let ty = ctx.tensor_type(&[2], f32t);
        let t = Tensor::from_f32(&[2], vec![1.5, -2.0]).unwrap();
        assert_eq!(real_values(&ctx, ty, &t), [1.5, -2.0]);
    }

    #[test]
    fn keys_name_results_and_occurrences() {
        let key = |result, occurrence| ValueKey {
            loc: "loc(\"split\")".into(),
            result,
            shape: vec![2],
            occurrence,
        };
        assert_eq!(key(None, 1).to_string(), "loc(\"split\")");
        assert_eq!(key(Some(1), 1).to_string(), "loc(\"split\")#1");
        assert_eq!(key(None, 2).to_string(), "loc(\"split\") (occurrence 2)");
    }
}
