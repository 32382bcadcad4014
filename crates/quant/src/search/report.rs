//! The report `quantize-search{report=FILE}` writes: what was measured and
//! decided, as JSON.

use crate::search::evaluate::{Measurement, Target};
use crate::search::settings::Settings;
use crate::search::sites::Site;
use crate::search::SiteOverflow;
use qopt_ir_core::json;
use std::fmt::Write as _;

/// `fraction` as a percentage with two decimals.
pub(crate) fn percent(fraction: f64) -> String {
    format!("{:.2} %", 100.0 * fraction)
}

/// A decibel figure with two decimals, `inf` when exact.
pub(crate) fn decibels(db: f64) -> String {
    if db.is_finite() {
        format!("{db:.2} dB")
    } else {
        "inf dB".to_string()
    }
}

/// What the search found, for the note and the JSON report.
pub(crate) struct Report<'a> {
    pub(crate) settings: &'a Settings,
    pub(crate) target: &'a Target,
    pub(crate) samples: usize,
    pub(crate) float_metric: f64,
    pub(crate) full: &'a Measurement,
    pub(crate) result: &'a Measurement,
    pub(crate) reached: bool,
    pub(crate) sites: &'a [Site],
    pub(crate) rows: &'a [Measurement],
    pub(crate) order: &'a [usize],
    pub(crate) chosen: &'a [usize],
    pub(crate) overflows: &'a [Option<SiteOverflow>],
    pub(crate) evaluations: u64,
}

impl Report<'_> {
    pub(crate) fn metric_text(&self) -> String {
        match self.target {
            Target::Labels(_) => format!("accuracy against {}", self.settings.labels),
            Target::Agreement { float: true, .. } => "top-1 agreement with the float model".to_string(),
            Target::Agreement { float: false, .. } => {
                format!("top-1 agreement with {}", self.settings.reference)
            }
        }
    }

    pub(crate) fn decision(&self, index: usize) -> String {
        if self.chosen.contains(&index) {
            self.settings.wide.clone()
        } else if let Some(o) = &self.overflows[index] {
            format!(
                "quantized: {} could overflow the i{} accumulator of {} (channel {}, |acc| ≤ {}, limit {})",
                self.settings.wide,
                self.settings.accumulator_bits,
                o.layer,
                o.detail.channel,
                o.detail.bound,
                o.detail.limit
            )
        } else {
            "quantized".to_string()
        }
    }

    /// The table, most sensitive first.
    pub(crate) fn text(&self) -> String {
        let mut out = format!(
            "quantize-search: {} on {} samples of {}: float {}, quantized {} (drop {}, SQNR {}), {}\n",
            self.metric_text(),
            self.samples,
            self.settings.eval_data,
            percent(self.float_metric),
            percent(self.full.metric),
            percent(self.float_metric - self.full.metric),
            decibels(self.full.sqnr_db),
            self.settings.goal(),
        );
        let width = self.sites.iter().map(|s| s.name.len()).max().unwrap_or(5).max(5);
        let op_width = self.sites.iter().map(|s| s.op.len()).max().unwrap_or(2).max(2);
        let _ = writeln!(
            out,
            "  rank  {:width$}  {:op_width$}  SQNR alone  metric alone  decision",
            "layer", "op"
        );
        for (rank, &i) in self.order.iter().enumerate() {
            let _ = writeln!(
                out,
                "  {:>4}  {:width$}  {:op_width$}  {:>10}  {:>12}  {}",
                rank + 1,
                self.sites[i].name,
                self.sites[i].op,
                decibels(self.rows[i].sqnr_db),
                percent(self.rows[i].metric),
                self.decision(i),
            );
        }
        let _ = write!(
            out,
            "kept {} of {} values {}{}: {} {} (drop {}, SQNR {}){}; {} evaluations",
            self.chosen.len(),
            self.sites.len(),
            self.settings.wide,
            match self.overflows.iter().filter(|o| o.is_some()).count() {
                0 => String::new(),
                n => format!(
                    " ({n} more stayed quantized: as {} they could overflow an accumulator)",
                    self.settings.wide
                ),
            },
            self.target.name(),
            percent(self.result.metric),
            percent(self.float_metric - self.result.metric),
            decibels(self.result.sqnr_db),
            if self.reached { String::new() } else { format!(", {} not reached", self.settings.goal()) },
            self.evaluations,
        );
        out
    }

    pub(crate) fn json(&self) -> String {
        let number = |v: f64| if v.is_finite() { format!("{v}") } else { "null".to_string() };
        let mut out = String::from("{\n");
        let _ = writeln!(out, "  \"metric\": {},", json::string(&self.metric_text()));
        let _ = writeln!(out, "  \"eval_data\": {},", json::string(&self.settings.eval_data));
        let _ = writeln!(out, "  \"samples\": {},", self.samples);
        let _ = writeln!(out, "  \"max_drop\": {},", number(self.settings.max_drop));
        let _ = writeln!(
            out,
            "  \"min_sqnr_db\": {},",
            self.settings.min_sqnr.map_or("null".to_string(), number)
        );
        let _ = writeln!(out, "  \"wide\": {},", json::string(&self.settings.wide));
        let _ = writeln!(out, "  \"float_metric\": {},", number(self.float_metric));
        let _ = writeln!(
            out,
            "  \"quantized\": {{\"metric\": {}, \"sqnr_db\": {}}},",
            number(self.full.metric),
            number(self.full.sqnr_db)
        );
        let _ = writeln!(
            out,
            "  \"result\": {{\"metric\": {}, \"sqnr_db\": {}, \"reached\": {}}},",
            number(self.result.metric),
            number(self.result.sqnr_db),
            self.reached
        );
        let _ = writeln!(out, "  \"evaluations\": {},", self.evaluations);
        let _ = writeln!(out, "  \"accumulator_bits\": {},", self.settings.accumulator_bits);
        out.push_str("  \"layers\": [\n");
        for (rank, &i) in self.order.iter().enumerate() {
            let _ = write!(
                out,
                "    {{\"rank\": {}, \"layer\": {}, \"op\": {}, \"sqnr_db_alone\": {}, \"metric_alone\": {}, \
                 \"decision\": {}}}",
                rank + 1,
                json::string(&self.sites[i].name),
                json::string(&self.sites[i].op),
                number(self.rows[i].sqnr_db),
                number(self.rows[i].metric),
                json::string(&self.decision(i)),
            );
            if let Some(o) = &self.overflows[i] {
                out.pop();
                let _ = write!(
                    out,
                    ", \"overflow\": {{\"layer\": {}, \"channel\": {}, \"bound\": {}, \"limit\": {}}}}}",
                    json::string(&o.layer),
                    o.detail.channel,
                    o.detail.bound,
                    o.detail.limit
                );
            }
            out.push_str(if rank + 1 < self.order.len() { ",\n" } else { "\n" });
        }
        out.push_str("  ]\n}\n");
        out
    }
}
