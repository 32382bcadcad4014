//! The options of `quantize-search`: its own ([`Settings`]) and those of the
//! passes it runs for each candidate ([`SchemeOptions`]), and running one of
//! those passes with its options.
use crate::passes::{Calibrate, InsertFakeq, InsertObservers};
use crate::records::hints::{storage_kind, storage_text};
use crate::runs::data::worker_threads;
use crate::runs::data::DataSettings;
use qopt_ir_core::pass::pipeline::parse_pipeline;
use qopt_ir_core::pass::PassOptions;
use qopt_ir_core::{IntType, Module, Pass, PassContext, PassError};

/// The options this pass adds to those of the passes it runs.
pub(crate) const OWN_OPTIONS: [&str; 8] =
    ["eval-data", "labels", "reference", "max-drop", "min-sqnr", "wide", "report", "accumulator-bits"];

/// The passes whose options the search takes, in pipeline order.
pub(crate) fn scheme_passes() -> [(&'static str, Box<dyn Pass>); 3] {
    [
        ("insert-observers", Box::new(InsertObservers)),
        ("calibrate", Box::new(Calibrate)),
        ("insert-fakeq", Box::new(InsertFakeq)),
    ]
}

/// `max-drop` as a fraction: `"0.1%"` is 0.001, a plain number is a fraction
/// (`"0.001"`); it must be in [0, 1).
pub fn parse_max_drop(text: &str) -> Result<f64, String> {
    let trimmed = text.trim();
    let (number, scale) = match trimmed.strip_suffix('%') {
        Some(percent) => (percent.trim(), 0.01),
        None => (trimmed, 1.0),
    };
    let value = number.parse::<f64>().ok().filter(|v| v.is_finite()).map(|v| v * scale).ok_or_else(|| {
        format!("'max-drop' must be a percentage like 0.1% or a fraction like 0.001, got '{text}'")
    })?;
    if !(0.0..1.0).contains(&value) {
        return Err(format!("'max-drop' must be at least 0 and below 100%, got '{text}'"));
    }
    Ok(value)
}

/// `min-sqnr` in dB: empty for none, else a finite number.
pub fn parse_min_sqnr(text: &str) -> Result<Option<f64>, String> {
    match text.trim() {
        "" => Ok(None),
        number => number
            .parse::<f64>()
            .ok()
            .filter(|v| v.is_finite())
            .map(Some)
            .ok_or_else(|| format!("'min-sqnr' must be a number of decibels like 30, got '{text}'")),
    }
}

/// The pass's own options, checked.
pub(crate) struct Settings {
    pub(crate) data: DataSettings,
    pub(crate) eval_data: String,
    pub(crate) labels: String,
    pub(crate) reference: String,
    pub(crate) max_drop: f64,
    /// The smallest output SQNR against the float model, in dB, if any.
    pub(crate) min_sqnr: Option<f64>,
    pub(crate) wide: String,
    pub(crate) report: String,
    pub(crate) threads: usize,
    pub(crate) accumulator_bits: u32,
}

impl Settings {
    /// What the search must reach, as text: `max-drop 1%[, min-sqnr 30 dB]`.
    pub(crate) fn goal(&self) -> String {
        let drop = format!("max-drop {}", crate::search::report::percent(self.max_drop));
        match self.min_sqnr {
            Some(db) => format!("{drop}, min-sqnr {db} dB"),
            None => drop,
        }
    }

    pub(crate) fn read(options: &PassOptions) -> Result<Settings, PassError> {
        let data = DataSettings::read(options)?;
        let eval_data = match options.string("eval-data") {
            "" => data.data.clone(),
            path => path.to_string(),
        };
        let threads = worker_threads(options)?;
        Ok(Settings {
            data,
            eval_data,
            labels: options.string("labels").to_string(),
            reference: options.string("reference").to_string(),
            max_drop: parse_max_drop(options.string("max-drop"))?,
            min_sqnr: parse_min_sqnr(options.string("min-sqnr"))?,
            wide: options.string("wide").to_string(),
            report: options.string("report").to_string(),
            threads,
            accumulator_bits: u32::try_from(options.int("accumulator-bits"))
                .ok()
                .filter(|b| (8..=64).contains(b))
                .ok_or_else(|| {
                    format!("accumulator-bits must be 8 to 64, got {}", options.int("accumulator-bits"))
                })?,
        })
    }
}

/// The options of each pass the search runs: those of the search's options
/// given explicitly that the pass declares.
pub(crate) struct SchemeOptions {
    pub(crate) observers: PassOptions,
    pub(crate) calibrate: PassOptions,
    pub(crate) fakeq: PassOptions,
    /// `insert-fakeq`'s options with `weight-type` at the weight width of a
    /// layer whose output is kept wide, when that is wider than
    /// `weight-type` (`weight-type=i4`, wide i16: `i8`); `None` otherwise.
    pub(crate) fakeq_wide_weights: Option<PassOptions>,
}

impl SchemeOptions {
    pub(crate) fn read(options: &PassOptions) -> Result<SchemeOptions, PassError> {
        let [(o, observers), (c, calibrate), (f, fakeq)] = scheme_passes();
        let given = |pass: &dyn Pass| -> Vec<String> {
            let specs = pass.options();
            options
                .iter()
                .filter(|(key, _)| {
                    options.is_explicit(key)
                        && !OWN_OPTIONS.contains(key)
                        && specs.iter().any(|s| s.name == *key)
                })
                .map(|(key, value)| format!("{key}={value}"))
                .collect()
        };
        let fakeq_given = given(fakeq.as_ref());
        let fakeq_options = pass_options(f, fakeq.as_ref(), &fakeq_given)?;
        let weights = storage_kind(fakeq_options.string("weight-type"));
        let wide_weights = storage_kind(options.string("wide")).zip(weights).and_then(|(wide, weights)| {
            let hinted = IntType { width: wide.width.min(8), signedness: weights.signedness };
            (hinted.width > weights.width).then_some(hinted)
        });
        let fakeq_wide_weights = match wide_weights {
            Some(hinted) => {
                let mut forced: Vec<String> =
                    fakeq_given.iter().filter(|o| !o.starts_with("weight-type=")).cloned().collect();
                forced.push(format!("weight-type={}", storage_text(hinted)));
                Some(pass_options(f, fakeq.as_ref(), &forced)?)
            }
            None => None,
        };
        Ok(SchemeOptions {
            observers: pass_options(o, observers.as_ref(), &given(observers.as_ref()))?,
            calibrate: pass_options(c, calibrate.as_ref(), &given(calibrate.as_ref()))?,
            fakeq: fakeq_options,
            fakeq_wide_weights,
        })
    }
}

/// The options of `pass` (registered as `name`) with `given` (`key=value`
/// each) and defaults for the rest.
pub(crate) fn pass_options(name: &str, pass: &dyn Pass, given: &[String]) -> Result<PassOptions, PassError> {
    let text = if given.is_empty() { name.to_string() } else { format!("{name}{{{}}}", given.join(" ")) };
    let elements = parse_pipeline(&text).map_err(|e| format!("options for {name}: {e}"))?;
    let [element] = &elements[..] else { return Err(format!("options for {name}: not one pass").into()) };
    element.resolve_options(&pass.options()).map_err(|e| format!("options for {name}: {e}").into())
}

/// Runs `pass` on `module`; its warnings are passed on when `forward` (the
/// first, fully quantized run: what `quantize` would warn about).
pub(crate) fn run_pass(
    cx: &mut PassContext<'_>,
    pass: &dyn Pass,
    module: &mut Module,
    options: &PassOptions,
    forward: bool,
) -> Result<(), PassError> {
    let warnings = {
        let mut inner = PassContext::new(cx.ctx);
        pass.run(&mut inner, module, options)?;
        inner.warnings().to_vec()
    };
    if forward {
        warnings.into_iter().for_each(|w| cx.warn(w));
    }
    Ok(())
}
