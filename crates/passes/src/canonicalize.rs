//! `canonicalize`: folds ops, erases dead pure ops and applies every registered
//! dialect's canonicalization patterns until nothing changes, through ir-core's
//! greedy worklist driver ([`apply_patterns_greedily`]) over the whole module.
//!
//! Assumes: folders and patterns keep the meaning of the IR (the pass declares
//! [`Pass::preserves_semantics`]), and a pattern that reports no match changed
//! nothing. Non-convergence (the `max-iterations` bound, or the driver's rewrite
//! bound, stops the driver while the IR still changes) is an error naming the
//! patterns that fired, since a pattern pair undoing each other is the usual cause.
//!
//! Options: `max-iterations` (full sweeps, default 10), `fold` (use the ops'
//! folders, default true). Statistics: `folded`, `dead-erased`, `rewrites` (pattern
//! applications in all; the per-pattern counts go into the non-convergence error).
//!
//! With a dialect whose `add` folds constants and whose `neg(neg(x))` pattern
//! returns `x`:
//!
//! ```text
//! // before
//! %0 = test.const() {value = 1} : () -> i64
//! %1 = test.const() {value = 2} : () -> i64
//! %2 = test.add(%0, %1) : (i64, i64) -> i64
//! %3 = test.neg(%x) : (i64) -> i64
//! %4 = test.neg(%3) : (i64) -> i64
//! test.effect(%2, %4) : (i64, i64) -> ()
//! // after
//! %0 = test.const() {value = 3} : () -> i64
//! test.effect(%0, %x) : (i64, i64) -> ()
//! ```

use qopt_ir_core::equivalence::Relation;
use qopt_ir_core::pass::{OptionKind, OptionSpec, PassOptions};
use qopt_ir_core::BadOptionValue;
use qopt_ir_core::PassInfo;
use qopt_ir_core::PassResult;
use qopt_ir_core::{
    apply_patterns_greedily, Diagnostic, GreedyConfig, GreedyStats, Module, Pass, PassContext, PassError,
    PassOutcome, PatternSet, SrcPos,
};

/// The `canonicalize` pass; see the module docs.
pub struct Canonicalize;

const INFO: PassInfo = PassInfo {
    name: "canonicalize",
    summary: "fold ops, erase dead pure ops and apply the dialects' canonicalization patterns",
    preserves_semantics: true,
    equivalence: Some(Relation::Exact),
    description: "Runs the greedy rewrite driver over the module with every registered dialect's \
     canonicalization patterns, the ops' folders and dead-op removal, until a sweep \
     changes nothing. Fails if `max-iterations` sweeps (or the driver's rewrite bound) \
     are reached first, naming the patterns that fired.\n\n\
     ```\n\
     %0 = test.neg(%x) : (i64) -> i64\n\
     %1 = test.neg(%0) : (i64) -> i64   // -> uses of %1 become %x\n\
     ```",
};

impl Pass for Canonicalize {
    fn info(&self) -> &'static PassInfo {
        &INFO
    }

    fn options(&self) -> Vec<OptionSpec> {
        vec![
            OptionSpec::new("max-iterations", OptionKind::Int, "10")
                .help("full sweeps over the module before giving up (at least 1)"),
            OptionSpec::new("fold", OptionKind::Bool, "true")
                .help("fold ops through their registered folders"),
        ]
    }

    fn check_options(&self, options: &PassOptions) -> Result<(), BadOptionValue> {
        let requested = options.int("max-iterations");
        if requested < 1 {
            return Err(BadOptionValue::new(
                "max-iterations",
                format!("max-iterations must be at least 1, got {requested}"),
            ));
        }
        Ok(())
    }

    fn run(&self, cx: &mut PassContext<'_>, module: &mut Module, options: &PassOptions) -> PassResult {
        self.check_options(options)
            .map_err(|bad| PassError::from(format!("canonicalize: {}", bad.message)))?;
        let requested = options.int("max-iterations");
        let config = GreedyConfig {
            max_iterations: u32::try_from(requested).unwrap_or(u32::MAX),
            fold: options.bool("fold"),
            ..GreedyConfig::default()
        };
        let patterns = PatternSet::canonicalization(cx.ctx);
        let root = module.root();
        let stats = apply_patterns_greedily(cx.ctx, module, root, &patterns, &config);
        cx.add_stat("folded", stats.folded);
        cx.add_stat("dead-erased", stats.dead_erased);
        cx.add_stat("rewrites", stats.rewrites());
        if !stats.converged {
            // Patterns that keep rewriting each other are a bug to report: a
            // reproducer is written.
            let message = non_convergence_message(&stats, &config);
            return Err(PassError::internal(Diagnostic::error(None, SrcPos::NONE, message)));
        }
        Ok(PassOutcome::from_changed(stats.changed()))
    }
}

/// "canonicalize did not converge after N iterations" plus why it stopped and
/// what was still firing.
fn non_convergence_message(stats: &GreedyStats, config: &GreedyConfig) -> String {
    let iterations = stats.iterations;
    let plural = if iterations == 1 { "" } else { "s" };
    let mut message = format!("canonicalize did not converge after {iterations} iteration{plural}");
    if iterations >= config.max_iterations {
        message.push_str(&format!(" (max-iterations={})", config.max_iterations));
    } else {
        // The driver gives up a sweep once it made more rewrites than a bounded
        // number per op: some rewrite keeps re-enabling itself.
        message.push_str(" (stopped by the rewrite limit: a rewrite keeps re-enabling itself)");
    }
    // GreedyStats counts hits over the whole run, not per sweep, so these are the
    // patterns that fired at all; a cycle is among them.
    if stats.pattern_hits.is_empty() {
        message.push_str("; no pattern fired (folds or dead-op removal kept changing the IR)");
    } else {
        let hits: Vec<String> =
            stats.pattern_hits.iter().map(|(name, count)| format!("{name} ({count}x)")).collect();
        message.push_str("; patterns that fired: ");
        message.push_str(&hits.join(", "));
    }
    message.push_str(&format!("; folded {}, dead ops erased {}", stats.folded, stats.dead_erased));
    message
}

#[cfg(test)]
mod tests {
    use crate::test_ir::{check_pass, fold_a_10000_op_chain};

    #[test]
    fn max_iterations_one_reports_non_convergence_with_the_pattern() {
        let input = "func.func @f(%x: i64) -> i64 {
  %0 = test.neg(%x) : (i64) -> i64
  %1 = test.neg(%0) : (i64) -> i64
  func.return %1 : i64
}
";
        let error = check_pass("canonicalize{max-iterations=1}", input).unwrap_err();
        assert_eq!(
            error,
            "error: canonicalize did not converge after 1 iteration (max-iterations=1); \
             patterns that fired: neg-neg (1x); folded 0, dead ops erased 1"
        );
    }

    #[test]
    fn a_self_undoing_pattern_hits_the_rewrite_limit() {
        let input = "func.func @f(%x: i64, %y: i64) -> i64 {
  %0 = test.swap(%x, %y) : (i64, i64) -> i64
  func.return %0 : i64
}
";
        let error = check_pass("canonicalize", input).unwrap_err();
        assert!(
            error.starts_with(
                "error: canonicalize did not converge after 1 iteration (stopped by the rewrite limit"
            ),
            "{error}"
        );
        assert!(error.contains("patterns that fired: swap-operands ("), "{error}");
    }

    #[test]
    fn max_iterations_below_one_is_an_error() {
        let input = "func.func @f(%x: i64) -> i64 {
  func.return %x : i64
}
";
        let error = check_pass("canonicalize{max-iterations=0}", input).unwrap_err();
        // Refused when the pipeline is parsed, at the option's value.
        assert_eq!(
            error,
            "error: pass 'canonicalize': max-iterations must be at least 1, got 0\n  \
             canonicalize{max-iterations=0}\n                              ^"
        );
    }

    #[test]
    fn fold_false_keeps_foldable_ops_but_still_applies_patterns() {
        let input = "func.func @f(%x: i64) -> i64 {
  %0 = test.const() {value = 0} : () -> i64
  %1 = test.add(%x, %0) : (i64, i64) -> i64
  %2 = test.neg(%1) : (i64) -> i64
  %3 = test.neg(%2) : (i64) -> i64
  func.return %3 : i64
}
";
        let out = check_pass("canonicalize{fold=false}", input).unwrap();
        assert_eq!(
            out.ir,
            "module {
  func.func @f(%arg0: i64) -> i64 {
    %0 = test.const() {value = 0} : () -> i64
    %1 = test.add(%arg0, %0) : (i64, i64) -> i64
    func.return %1 : i64
  }
}
"
        );
        assert_eq!(out.stats, [("dead-erased", 1), ("folded", 0), ("rewrites", 1)]);
        let out = check_pass("canonicalize", input).unwrap();
        assert_eq!(
            out.ir,
            "module {\n  func.func @f(%arg0: i64) -> i64 {\n    func.return %arg0 : i64\n  }\n}\n"
        );
    }

    /// `%v1 = %c + %c; %v2 = %v1 + %c; ...`: 10,000 adds fold to one constant on a
    /// small stack.
    #[test]
    fn a_10000_op_chain_folds_to_one_constant() {
        fold_a_10000_op_chain("canonicalize", |out| assert_eq!(out.stat("folded"), 10_000));
    }
}
