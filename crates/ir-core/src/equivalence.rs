//! Equivalence rules as data: the identities a dialect states about its ops,
//! and the relation under which a pass claims to keep a module's meaning.
//!
//! ir-core only carries them. The translation validator (`qopt-equiv`)
//! parses the rule text, runs equality saturation over a function before and
//! after a pass, and proves the pass under the relation the pass declares
//! ([`crate::Pass::equivalence`]). A dialect lists its rules through
//! [`crate::Dialect::equivalence_rules`], one line each, named for the
//! identity it states:
//!
//! ```
//! use qopt_ir_core::equivalence::{EquivRule, Relation};
//! let rule = EquivRule::new(Relation::Exact, "relu-is-idempotent",
//!     "(fp.relu ?a ?t (fp.relu ?a ?t ?x))", "(fp.relu ?a ?t ?x)");
//! assert_eq!(rule.relation, Relation::Exact);
//! ```
//!
//! An op pattern is `(dialect.op ATTRS TYPE OPERAND...)`: the attribute
//! dictionary and the result type come first, so a rule can keep, compare or
//! rebuild them. `docs/verification.md` gives the whole rule language.

use std::borrow::Cow;
use std::fmt;

/// What "the same meaning" means for a check, from the strictest to the
/// loosest. A rule holds under its relation and every looser one; a pass is
/// checked with the rules whose relation is at most its own.
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Relation {
    /// Bit-identical results for every input; constants equal bit for bit.
    Exact,
    /// Bit-identical integer results; rewrites between `qnn` forms.
    IntegerExact,
    /// Equal over the real numbers; float constants may differ by a stated
    /// number of ulps (float rounding happens in a different order).
    Real,
    /// Equal up to where the float computation and the integer one round:
    /// `qnn` ops against their definitions as quantize(float op(dequantize)).
    Requantization,
    /// Equal over the real numbers (and up to [`Relation::Requantization`]'s
    /// rounding) wherever every value stays within the ranges the IR records
    /// from calibration (the [`crate::interfaces::RecordedRange`] of an op:
    /// `absorb-bias`'s per-channel minima), not necessarily elsewhere. The
    /// records are assumed, not checked against data.
    ///
    /// It is the loosest relation. It is not comparable with
    /// `Requantization` as a claim (one holds everywhere up to rounding, the
    /// other exactly but on a subset of inputs), but the order must be total
    /// and decides which rules a check may use: placed before
    /// `Requantization`, the proofs of `fuse` and `quantize-constants` could
    /// rest on recorded ranges and would silently stop holding for every
    /// input. Placed last, only a pass that declares it relies on the
    /// records, and what it may also use (float rounding, requantization)
    /// is what a model quantized from those same ranges does anyway.
    CalibratedRange,
}

impl Relation {
    /// Every relation, strictest first.
    pub const ALL: [Relation; 5] = [
        Relation::Exact,
        Relation::IntegerExact,
        Relation::Real,
        Relation::Requantization,
        Relation::CalibratedRange,
    ];

    /// The name used in reports and rule tables (`exact`, `integer-exact`,
    /// `real`, `requantization`, `calibrated-range`).
    pub fn name(self) -> &'static str {
        match self {
            Relation::Exact => "exact",
            Relation::IntegerExact => "integer-exact",
            Relation::Real => "real",
            Relation::Requantization => "requantization",
            Relation::CalibratedRange => "calibrated-range",
        }
    }

    /// Whether float constants may differ by some ulps under this relation.
    pub fn tolerates_rounding(self) -> bool {
        self >= Relation::Real
    }

    /// Whether a check under this relation may assume the ranges the IR
    /// records from calibration ([`Relation::CalibratedRange`] only).
    pub fn assumes_recorded_ranges(self) -> bool {
        self >= Relation::CalibratedRange
    }
}

impl fmt::Display for Relation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One identity `lhs = rhs`, used left to right (and right to left when
/// [`both_ways`](EquivRule::both_ways)), applied only where `when` holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EquivRule {
    /// Kebab-case, naming the identity (`batch-norm-is-channel-affine`).
    pub name: Cow<'static, str>,
    /// The pattern to find, an s-expression.
    pub lhs: Cow<'static, str>,
    /// What it equals, an s-expression over the pattern's variables.
    pub rhs: Cow<'static, str>,
    /// Conditions, each an s-expression (`(same-type ?x ?t)`); empty for none.
    pub when: Cow<'static, str>,
    /// The relation under which the identity holds.
    pub relation: Relation,
    /// Whether the rule is also used right to left.
    pub bidirectional: bool,
}

impl EquivRule {
    /// The rule `lhs = rhs` under `relation`, applied left to right.
    pub fn new(
        relation: Relation,
        name: impl Into<Cow<'static, str>>,
        lhs: impl Into<Cow<'static, str>>,
        rhs: impl Into<Cow<'static, str>>,
    ) -> EquivRule {
        EquivRule {
            name: name.into(),
            lhs: lhs.into(),
            rhs: rhs.into(),
            when: Cow::Borrowed(""),
            relation,
            bidirectional: false,
        }
    }

    /// The same rule, applied only where every condition in `conditions` holds.
    pub fn when(self, conditions: impl Into<Cow<'static, str>>) -> EquivRule {
        EquivRule { when: conditions.into(), ..self }
    }

    /// The same rule, also applied right to left.
    pub fn both_ways(self) -> EquivRule {
        EquivRule { bidirectional: true, ..self }
    }
}

#[cfg(test)]
mod tests {
    use super::Relation;

    /// `ALL` lists the relations strictest first, each named once; only the
    /// loosest assumes the recorded ranges, and every one from `real` on
    /// tolerates rounding.
    #[test]
    fn relations_are_ordered_and_only_calibrated_range_assumes_records() {
        assert!(Relation::ALL.windows(2).all(|w| w[0] < w[1]));
        assert_eq!(Relation::ALL.last(), Some(&Relation::CalibratedRange));
        let names: Vec<&str> = Relation::ALL.iter().map(|r| r.name()).collect();
        assert_eq!(names, ["exact", "integer-exact", "real", "requantization", "calibrated-range"]);
        let assuming: Vec<Relation> =
            Relation::ALL.into_iter().filter(|r| r.assumes_recorded_ranges()).collect();
        assert_eq!(assuming, [Relation::CalibratedRange]);
        assert!(
            Relation::CalibratedRange.tolerates_rounding() && !Relation::IntegerExact.tolerates_rounding()
        );
    }
}
