//! The decisions a person or a pass writes into the IR for the passes after
//! it: `qnn.cast_hint` (keep a value float, or store it in another integer
//! type), the `storage` of a `qnn.observe`, and `qnn.skip` on an op.

use qopt_dialect_qnn::op_names as qnn_op;
use qopt_ir_core::{Context, IntType, Module, OpId, Signedness};

/// Whether `op` is `qnn.cast_hint {kind = "float"}`: its operand and result stay float.
pub fn is_kept_float(ctx: &Context, module: &Module, op: OpId) -> bool {
    module.op_is(ctx, op, qnn_op::CAST_HINT)
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
    if !module.op_is(ctx, op, qnn_op::CAST_HINT) {
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

pub use qopt_dialect_qnn::attr_names::SKIP;

/// Whether `op` carries [`SKIP`].
pub fn is_skipped(ctx: &Context, module: &Module, op: OpId) -> bool {
    module.op_attr(ctx, op, SKIP).is_some()
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
