//! Queries the quantization passes share: which ops are quantizable, which
//! values are kept float or hinted to another storage, which ops the user
//! skipped, the users of a value, the names in a location, and the
//! per-channel blocks of a tensor's values.

use qopt_dialect_fp::op_names as fp_op;
use qopt_dialect_fp::shape;
use qopt_dialect_qnn::op_names as qnn_op;
use qopt_ir_core::interfaces::QuantizableOp;
use qopt_ir_core::{
    Context, FxHashSet, IntType, Location, LocationData, Module, OpId, Signedness, Type, TypeData, ValueId,
};

/// Whether `op` is the op named `name`.
pub fn op_named(ctx: &Context, module: &Module, op: OpId, name: &str) -> bool {
    ctx.op_name_str(module.op_name(op)) == name
}

/// The [`QuantizableOp`] interface of `op`'s definition, if it has one.
pub fn quantizable<'c>(ctx: &'c Context, module: &Module, op: OpId) -> Option<&'c QuantizableOp> {
    ctx.op_def(module.op_name(op))?.interfaces.get::<QuantizableOp>()
}

/// The ops using `value`, each once, in use order.
pub fn users(module: &Module, value: ValueId) -> Vec<OpId> {
    let mut seen = FxHashSet::default();
    module.uses(value).map(|u| u.op).filter(|&op| seen.insert(op)).collect()
}

/// Whether `op` is an `fp` op that can run on stored integers unchanged
/// (`quant-semantics.md` §9): it is quant-agnostic as it stands
/// ([`qopt_dialect_fp::is_quant_agnostic`]: the `QuantAgnostic` trait, and
/// nearest mode for `fp.resize`), and an `fp.pad` pads with 0 (the zero
/// point) in constant mode.
pub fn runs_on_integers(ctx: &Context, module: &Module, op: OpId) -> bool {
    let name = ctx.op_name_str(module.op_name(op));
    if !name.starts_with("fp.") || !qopt_dialect_fp::is_quant_agnostic(ctx, module, op) {
        return false;
    }
    if name == fp_op::PAD {
        let value = module.op_attr(ctx, op, "value").and_then(|a| ctx.attr_as_f64(a)).unwrap_or(0.0);
        let mode = module.op_attr(ctx, op, "mode").and_then(|a| ctx.attr_as_str(a)).unwrap_or("constant");
        return value == 0.0 && mode == "constant";
    }
    true
}

/// Whether `ty` is a ranked tensor of f32, f16 or bf16.
pub fn is_float_tensor(ctx: &Context, ty: Type) -> bool {
    matches!(ctx.type_data(ty), TypeData::Tensor { .. })
        && shape::is_float_element(ctx, ctx.element_type(ty))
        && {
            // f64 has no quantized form (its expressed types are f32, f16, bf16).
            ctx.element_type(ty) != ctx.common().f64
        }
}

/// Whether `op` is `qnn.cast_hint {kind = "float"}`: its operand and result stay float.
pub fn is_kept_float(ctx: &Context, module: &Module, op: OpId) -> bool {
    op_named(ctx, module, op, qnn_op::CAST_HINT)
        && module.op_attr(ctx, op, "kind").and_then(|k| ctx.attr_as_str(k)) == Some("float")
}

/// The storage a `qnn.cast_hint` kind names: `"iN"` (signed) or `"uN"`
/// (unsigned) with N from 2 to 16, the widths `insert-fakeq` quantizes to.
/// Any other kind (`"float"`, `"activation"`, ...) is not a storage.
pub fn storage_kind(kind: &str) -> Option<IntType> {
    let (signedness, bits) = match kind.split_at_checked(1)? {
        ("i", bits) => (Signedness::Signless, bits),
        ("u", bits) => (Signedness::Unsigned, bits),
        _ => return None,
    };
    if !bits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let width: u8 = bits.parse().ok().filter(|w| (2..=16).contains(w))?;
    Some(IntType { width, signedness })
}

/// The storage `op` asks for when it is `qnn.cast_hint {kind = "iN" | "uN"}`.
pub fn hinted_storage(ctx: &Context, module: &Module, op: OpId) -> Option<IntType> {
    if !op_named(ctx, module, op, qnn_op::CAST_HINT) {
        return None;
    }
    module.op_attr(ctx, op, "kind").and_then(|k| ctx.attr_as_str(k)).and_then(storage_kind)
}

/// The attribute of a `qnn.observe` that fixes the storage of the value it
/// observes (`"i16"`, `"i4"`, ...), overriding `insert-fakeq`'s
/// `activation-type`: `insert-observers` moves a storage `qnn.cast_hint` of
/// the observed value here, and a person may write it.
pub const STORAGE: &str = "storage";

/// The text of a storage, as a hint kind and [`STORAGE`] spell it: `i16`, `u8`.
pub fn storage_text(storage: IntType) -> String {
    let sign = if storage.signedness == Signedness::Unsigned { 'u' } else { 'i' };
    format!("{sign}{}", storage.width)
}

/// The unit attribute that keeps an op float through every quantization
/// pass: `insert-observers` puts it on the ops its `skip` and `ops` options
/// leave out (and on the relu or clip that would fuse into one), and a person
/// may write it. No pass observes, fake-quantizes the weights of, propagates
/// parameters through or fuses such an op; `quant-lint` reports it as
/// skipped by the user.
pub const SKIP: &str = "qnn.skip";

/// Whether `op` carries [`SKIP`].
pub fn is_skipped(ctx: &Context, module: &Module, op: OpId) -> bool {
    module.op_attr(ctx, op, SKIP).is_some()
}

/// Every name in `loc` (names nest and fuse).
pub fn loc_names(ctx: &Context, loc: Location) -> Vec<&str> {
    let mut names = Vec::new();
    let mut stack = vec![loc];
    while let Some(l) = stack.pop() {
        match ctx.loc_data(l) {
            LocationData::Name { name, child } => {
                names.push(ctx.symbol_str(*name));
                stack.push(*child);
            }
            LocationData::Fused(parts) => stack.extend(parts.iter().copied()),
            _ => {}
        }
    }
    names
}

/// The runs of `values` (a C-order tensor of `shape`) that each lie in one
/// index of `axis`, with that index: `(channel, run)`, in memory order.
pub fn channel_blocks<'v, T>(
    values: &'v [T],
    shape: &[usize],
    axis: usize,
) -> impl Iterator<Item = (usize, &'v [T])> + 'v {
    let (channels, inner) = channel_runs(shape, axis);
    values.chunks(inner).enumerate().map(move |(block, run)| (block % channels, run))
}

/// [`channel_blocks`] with the runs writable.
pub fn channel_blocks_mut<'v, T>(
    values: &'v mut [T],
    shape: &[usize],
    axis: usize,
) -> impl Iterator<Item = (usize, &'v mut [T])> + 'v {
    let (channels, inner) = channel_runs(shape, axis);
    values.chunks_mut(inner).enumerate().map(move |(block, run)| (block % channels, run))
}

/// The number of channels on `axis` and the length of a run within one channel.
fn channel_runs(shape: &[usize], axis: usize) -> (usize, usize) {
    let channels = shape.get(axis).copied().unwrap_or(1).max(1);
    let inner = shape.get(axis + 1..).map_or(1, |d| d.iter().product::<usize>()).max(1);
    (channels, inner)
}

#[cfg(test)]
mod tests {
    use super::{storage_kind, storage_text};
    use qopt_ir_core::{IntType, Signedness};

    #[test]
    fn storage_kinds_are_signed_or_unsigned_with_2_to_16_bits() {
        let signed = |width| Some(IntType { width, signedness: Signedness::Signless });
        assert_eq!(storage_kind("i16"), signed(16));
        assert_eq!(storage_kind("i4"), signed(4));
        assert_eq!(storage_kind("u8"), Some(IntType { width: 8, signedness: Signedness::Unsigned }));
        for other in ["float", "activation", "i1", "i17", "i32", "i", "u", "i+8", "i08x", "f16", ""] {
            assert_eq!(storage_kind(other), None, "{other}");
        }
        for kind in ["i2", "i8", "i16", "u4", "u16"] {
            assert_eq!(storage_text(storage_kind(kind).unwrap()), kind);
        }
    }
}
