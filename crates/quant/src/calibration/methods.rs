//! The two open registries of calibration: **observers** (how `calibrate`
//! accumulates statistics of a value) and **range methods** (how `insert-fakeq`
//! turns statistics into the real range a quantized type covers).
//!
//! Both live in one [`QuantMethods`] record installed in the [`Context`] as an
//! extension, so a downstream crate adds a vendor's method from the same setup
//! closure that registers its dialect, and the stateless passes find it through
//! the context they run with:
//!
//! ```
//! # use qopt_ir_core::Context;
//! # use qopt_quant::{QuantMethods, RangeMethod, RangeTarget, ObserverStats};
//! # use std::sync::Arc;
//! struct Halved;
//! impl RangeMethod for Halved {
//!     fn name(&self) -> &'static str { "halved" }
//!     fn summary(&self) -> &'static str { "half of the observed min-max range" }
//!     fn range(&self, s: &ObserverStats, _: &RangeTarget) -> Result<Vec<(f64, f64)>, String> {
//!         Ok(s.min.iter().zip(&s.max).map(|(&lo, &hi)| (lo as f64 / 2.0, hi as f64 / 2.0)).collect())
//!     }
//! }
//! let mut ctx = Context::new();
//! QuantMethods::install(&mut ctx).add_range_method(Arc::new(Halved)).unwrap();
//! assert!(QuantMethods::of(&ctx).range_method("halved").is_some());
//! ```
//!
//! Built-ins: observers `minmax`, `moving-average` and `histogram`
//! (`observers.rs`); range methods `minmax`, `percentile`, `entropy` and `mse`
//! (`ranges.rs`). Names are unique per registry.

use crate::calibration::batch::ObservedBatch;
use crate::calibration::stats::ObserverStats;
use qopt_ir_core::pass::pipeline::nearest_name;
use qopt_ir_core::Context;
use std::sync::{Arc, OnceLock};

/// How `calibrate` accumulates the statistics of one `qnn.observe`.
///
/// Calibration is parallel and deterministic: the data is cut into chunks of
/// batches in sample order; each chunk starts from [`ObserverStats::empty_like`]
/// the stored statistics and sees its batches through [`observe`](Self::observe);
/// the chunks are then folded into the stored statistics **in sample order**
/// with [`merge`](Self::merge). The result must not depend on where the chunks
/// were cut, so that one thread and two give the same bytes and calibrating on
/// A then B equals calibrating on A + B.
pub trait Observer: Send + Sync {
    /// The name `insert-observers{observer=...}` and the `observer` attribute use.
    fn name(&self) -> &'static str;
    /// One line for the docs and error messages.
    fn summary(&self) -> &'static str;
    /// Checks the configuration of an observe op before any data runs (for
    /// example that a histogram is per tensor).
    fn check(&self, stats: &ObserverStats) -> Result<(), String> {
        let _ = stats;
        Ok(())
    }
    /// Folds one batch into `partial`, a chunk's statistics.
    fn observe(&self, partial: &mut ObserverStats, batch: &ObservedBatch<'_>) -> Result<(), String>;
    /// Folds `later`, the chunk that follows the samples `stats` has seen, into `stats`.
    fn merge(&self, stats: &mut ObserverStats, later: ObserverStats) -> Result<(), String>;
}

/// What a range method is asked to cover: the quantized type's storage range and scheme.
#[derive(Clone, Debug, PartialEq)]
pub struct RangeTarget {
    /// Smallest stored value.
    pub qmin: i64,
    /// Largest stored value.
    pub qmax: i64,
    /// Whether the range will be made symmetric around 0.
    pub symmetric: bool,
    /// The `percentile` option of `insert-fakeq` (for methods that use one).
    pub percentile: f64,
}

impl RangeTarget {
    /// Number of quantization levels, `qmax − qmin + 1`.
    pub fn levels(&self) -> u64 {
        (self.qmax - self.qmin + 1).max(1) as u64
    }
}

/// How `insert-fakeq` chooses the real range `[lo, hi]` of an observed value.
/// The range returned need not contain 0; `insert-fakeq` widens it to do so.
pub trait RangeMethod: Send + Sync {
    /// The name `insert-fakeq{method=...}` uses.
    fn name(&self) -> &'static str;
    /// One line for the docs and error messages.
    fn summary(&self) -> &'static str;
    /// Whether the method reads the histogram (observers without one are an
    /// error naming the observer's location).
    fn needs_histogram(&self) -> bool {
        false
    }
    /// The range per channel (one entry without an `axis`), from `stats`, which
    /// has seen data (`stats.min` is not empty).
    fn range(&self, stats: &ObserverStats, target: &RangeTarget) -> Result<Vec<(f64, f64)>, String>;
}

/// The registries of observers and range methods (see the module docs).
#[derive(Clone)]
pub struct QuantMethods {
    observers: Vec<Arc<dyn Observer>>,
    ranges: Vec<Arc<dyn RangeMethod>>,
}

impl Default for QuantMethods {
    /// The built-in observers and range methods.
    fn default() -> QuantMethods {
        QuantMethods { observers: super::observers::builtin(), ranges: super::ranges::builtin() }
    }
}

impl QuantMethods {
    /// The methods installed in `ctx`, or the built-in ones if none were.
    pub fn of(ctx: &Context) -> &QuantMethods {
        static BUILTIN: OnceLock<QuantMethods> = OnceLock::new();
        ctx.extension::<QuantMethods>().unwrap_or_else(|| BUILTIN.get_or_init(QuantMethods::default))
    }

    /// The methods of `ctx` for adding to, installing the built-in ones first if needed.
    pub fn install(ctx: &mut Context) -> &mut QuantMethods {
        ctx.extension_mut::<QuantMethods>()
    }

    /// Adds an observer; fails if the name is taken.
    pub fn add_observer(&mut self, observer: Arc<dyn Observer>) -> Result<(), String> {
        if self.observer(observer.name()).is_some() {
            return Err(format!("an observer named '{}' is already registered", observer.name()));
        }
        self.observers.push(observer);
        Ok(())
    }

    /// Adds a range method; fails if the name is taken.
    pub fn add_range_method(&mut self, method: Arc<dyn RangeMethod>) -> Result<(), String> {
        if self.range_method(method.name()).is_some() {
            return Err(format!("a range method named '{}' is already registered", method.name()));
        }
        self.ranges.push(method);
        Ok(())
    }

    /// The observer named `name`.
    pub fn observer(&self, name: &str) -> Option<&Arc<dyn Observer>> {
        self.observers.iter().find(|o| o.name() == name)
    }

    /// The range method named `name`.
    pub fn range_method(&self, name: &str) -> Option<&Arc<dyn RangeMethod>> {
        self.ranges.iter().find(|m| m.name() == name)
    }

    /// The observer named `name`, or an error listing the registered ones.
    pub fn find_observer(&self, name: &str) -> Result<&Arc<dyn Observer>, String> {
        self.observer(name).ok_or_else(|| {
            unknown("observer", name, self.observers.iter().map(|o| o.name()).collect::<Vec<_>>())
        })
    }

    /// The range method named `name`, or an error listing the registered ones.
    pub fn find_range_method(&self, name: &str) -> Result<&Arc<dyn RangeMethod>, String> {
        self.range_method(name).ok_or_else(|| {
            unknown("range method", name, self.ranges.iter().map(|m| m.name()).collect::<Vec<_>>())
        })
    }

    /// Every observer, in registration order.
    pub fn observers(&self) -> impl Iterator<Item = &Arc<dyn Observer>> + '_ {
        self.observers.iter()
    }

    /// Every range method, in registration order.
    pub fn range_methods(&self) -> impl Iterator<Item = &Arc<dyn RangeMethod>> + '_ {
        self.ranges.iter()
    }
}

fn unknown(what: &str, name: &str, known: Vec<&str>) -> String {
    let hint = match nearest_name(name, known.iter().copied()) {
        Some(near) => format!("; did you mean '{near}'?"),
        None => String::new(),
    };
    format!("unknown {what} '{name}' (registered: {}){hint}", known.join(", "))
}
