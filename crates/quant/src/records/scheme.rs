//! `Scheme`: how one class of values (activations, or weights) is quantized:
//! storage, used range, symmetric or not, power-of-two scales; and the one
//! function from a real range to scale and zero point that `insert-fakeq` and
//! `propagate-qparams` share.

use qopt_ir_core::pass::PassOptions;
use qopt_ir_core::{FloatKind, IntType, QuantParams, QuantType, Signedness};

/// The scale of an all-zero range (PyTorch's choice: f32's machine epsilon).
pub(crate) const DEGENERATE_SCALE: f32 = f32::EPSILON;

/// The smallest scale chosen for a non-zero range (2^−100), far from f32's subnormals.
pub(crate) const MIN_SCALE: f32 = 7.888609e-31;

/// How to quantize one class of values.
#[derive(Clone, Debug)]
pub(crate) struct Scheme {
    pub storage: IntType,
    pub qmin: i64,
    pub qmax: i64,
    pub symmetric: bool,
    pub power_of_two: bool,
}

impl Scheme {
    pub fn read(options: &PassOptions, type_option: &str, scheme_option: &str) -> Result<Scheme, String> {
        let text = options.string(type_option);
        let (signedness, bits) = match text.split_at_checked(1) {
            Some(("i", bits)) => (Signedness::Signless, bits),
            Some(("u", bits)) => (Signedness::Unsigned, bits),
            _ => return Err(format!("'{type_option}' must be iN or uN (like i8), got '{text}'")),
        };
        let width: u8 = match bits.parse() {
            Ok(w) if (2..=16).contains(&w) => w,
            _ => return Err(format!("'{type_option}' must have 2 to 16 bits (like i8 or u4), got '{text}'")),
        };
        let storage = IntType { width, signedness };
        let (mut qmin, qmax) = (storage.min_value() as i64, storage.max_value() as i64);
        if options.bool("narrow-range") && signedness == Signedness::Signless {
            qmin += 1;
        }
        Ok(Scheme {
            storage,
            qmin,
            qmax,
            symmetric: options.string(scheme_option) == "symmetric",
            power_of_two: options.bool("power-of-two-scales"),
        })
    }

    /// This scheme with another storage, over the whole range of that storage
    /// (less the most negative value for signed storage when `narrow`), with
    /// the same symmetry and power-of-two rule: what a `storage` hint makes of
    /// `activation-type` or `weight-type`.
    pub fn with_storage(&self, storage: IntType, narrow: bool) -> Scheme {
        let (mut qmin, qmax) = (storage.min_value() as i64, storage.max_value() as i64);
        if narrow && storage.signedness == Signedness::Signless {
            qmin += 1;
        }
        Scheme { storage, qmin, qmax, symmetric: self.symmetric, power_of_two: self.power_of_two }
    }

    /// Keeps half the storage range, one bit less: `[−2^(N−2), 2^(N−2) − 1]`
    /// for signed storage (one more at the bottom dropped with narrow range),
    /// `[0, 2^(N−1) − 1]` for unsigned.
    pub fn reduce_range(&mut self) {
        let half = 1i64 << (self.storage.width - 2);
        let narrowed = self.qmin > self.storage.min_value() as i64;
        (self.qmin, self.qmax) = match self.storage.signedness {
            Signedness::Signless => (-half + i64::from(narrowed), half - 1),
            Signedness::Unsigned => (0, 2 * half - 1),
        };
    }

    /// Scale and zero point covering `[lo, hi]` widened to contain 0.
    ///
    /// The arithmetic is f32, in the order ONNX Runtime's quantizer uses, so the
    /// same range gives the same parameters bit for bit:
    /// asymmetric `s = (hi − lo) ⊘ (qmax − qmin)`, `zp = rne(qmin − lo ⊘ s)`;
    /// symmetric `s = max(|lo|, |hi|) ⊘ min(zp − qmin, qmax − zp)` with `zp` = 0
    /// (signed) or the middle of the range (unsigned), so the largest magnitude
    /// lands exactly on the nearer end of the storage range and is not clipped.
    pub fn params(&self, lo: f64, hi: f64) -> (f64, i64) {
        let (lo, hi) = ((lo as f32).min(0.0), (hi as f32).max(0.0));
        let (qmin, qmax) = (self.qmin as f32, self.qmax as f32);
        let mut scale = if self.symmetric {
            let zp = self.symmetric_zero_point() as f32;
            lo.abs().max(hi.abs()) / (zp - qmin).min(qmax - zp).max(1.0)
        } else {
            (hi - lo) / (qmax - qmin)
        };
        scale = if scale > 0.0 && scale.is_finite() {
            scale.max(MIN_SCALE)
        } else if scale.is_finite() {
            DEGENERATE_SCALE
        } else {
            f32::MAX
        };
        if self.power_of_two {
            scale = f32::powi(2.0, scale.log2().ceil().clamp(-100.0, 127.0) as i32);
        }
        let zero_point = if self.symmetric {
            self.symmetric_zero_point()
        } else {
            (qmin - lo / scale).round_ties_even().clamp(qmin, qmax) as i64
        };
        (scale as f64, zero_point.clamp(self.qmin, self.qmax))
    }

    /// The zero point of the symmetric scheme: 0 for signed storage, the middle
    /// of the range (128 for u8) for unsigned.
    pub fn symmetric_zero_point(&self) -> i64 {
        if self.storage.signedness == Signedness::Unsigned {
            (self.qmin + self.qmax + 1) / 2
        } else {
            0
        }
    }

    /// The quantized element type with `params` for `expressed` values.
    pub fn quant_type(&self, expressed: FloatKind, params: QuantParams) -> QuantType {
        QuantType { storage: self.storage, storage_min: self.qmin, storage_max: self.qmax, expressed, params }
    }
}

impl Scheme {
    /// The scheme a per-tensor quantized type was made with: its storage and
    /// range, symmetric when its zero point is the symmetric one, power-of-two
    /// when its scale is a power of two.
    pub fn of_type(q: &QuantType, scale: f64, zero_point: i64) -> Scheme {
        let mut scheme = Scheme {
            storage: q.storage,
            qmin: q.storage_min,
            qmax: q.storage_max,
            symmetric: false,
            power_of_two: scale > 0.0 && scale.log2().fract() == 0.0,
        };
        scheme.symmetric = zero_point == scheme.symmetric_zero_point() && zero_point != scheme.qmin;
        scheme
    }
}

#[cfg(test)]
mod tests {
    use super::Scheme;
    use qopt_ir_core::{IntType, Signedness};

    /// The i8 asymmetric scheme, as insert-fakeq's defaults make it.
    fn i8_asymmetric() -> Scheme {
        let storage = IntType { width: 8, signedness: Signedness::Signless };
        Scheme { storage, qmin: -128, qmax: 127, symmetric: false, power_of_two: false }
    }

    #[test]
    fn another_storage_spans_its_whole_range_with_the_same_rules() {
        let i16 = IntType { width: 16, signedness: Signedness::Signless };
        let wide = i8_asymmetric().with_storage(i16, false);
        assert_eq!((wide.qmin, wide.qmax, wide.symmetric), (-32768, 32767, false));
        // [0, 6] in 65535 steps: the zero point sits at the bottom.
        let (scale, zero_point) = wide.params(0.0, 6.0);
        assert_eq!((scale as f32, zero_point), (6.0f32 / 65535.0, -32768));
        let narrow =
            i8_asymmetric().with_storage(IntType { width: 4, signedness: Signedness::Signless }, true);
        assert_eq!((narrow.qmin, narrow.qmax), (-7, 7));
        let unsigned =
            i8_asymmetric().with_storage(IntType { width: 4, signedness: Signedness::Unsigned }, true);
        assert_eq!((unsigned.qmin, unsigned.qmax), (0, 15));
    }
}
