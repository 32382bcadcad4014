//! The pass registry: passes and named pipelines by flag name, and the
//! `--list-passes` text.
//!
//! Invariants: a name is registered at most once across passes and pipelines, and
//! every name is a valid pipeline pass name (letters, digits, `-`, `_`, `.`), so
//! everything registered can be written in pipeline text. Listings are sorted by
//! name, so output does not depend on registration order.

use super::pipeline::{resolve_options, OptionSpec, PassOptions};
use super::Pass;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Arc;

/// A pipeline registered under a name, like a pass: `quantize{bits=8}` in pipeline
/// text expands to the text `expand` returns for the resolved options, which may
/// name further pipelines (up to 16 levels deep, without cycles).
#[derive(Clone, Debug)]
pub struct NamedPipeline {
    /// The name used in pipelines.
    pub name: &'static str,
    /// One line for `--list-passes`.
    pub summary: &'static str,
    /// The options it accepts, checked like a pass's.
    pub options: Vec<OptionSpec>,
    /// The pipeline text it stands for, given its resolved options.
    pub expand: fn(&PassOptions) -> String,
}

/// Passes and named pipelines by name.
#[derive(Clone, Default)]
pub struct PassRegistry {
    passes: BTreeMap<&'static str, Arc<dyn Pass>>,
    pipelines: BTreeMap<&'static str, NamedPipeline>,
}

impl std::fmt::Debug for PassRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PassRegistry")
            .field("passes", &self.passes.keys().collect::<Vec<_>>())
            .field("pipelines", &self.pipelines.keys().collect::<Vec<_>>())
            .finish()
    }
}

impl PassRegistry {
    /// An empty registry.
    pub fn new() -> PassRegistry {
        PassRegistry::default()
    }

    /// Registers a pass under its [`Pass::name`]. Fails if the name is taken (by a
    /// pass or a named pipeline) or cannot be written in pipeline text.
    pub fn register(&mut self, pass: Arc<dyn Pass>) -> Result<(), String> {
        let name = pass.name();
        self.check_new_name(name, "pass")?;
        self.passes.insert(name, pass);
        Ok(())
    }

    /// Registers a named pipeline. Fails like [`register`](Self::register).
    pub fn register_pipeline(&mut self, pipeline: NamedPipeline) -> Result<(), String> {
        self.check_new_name(pipeline.name, "pipeline")?;
        self.pipelines.insert(pipeline.name, pipeline);
        Ok(())
    }

    fn check_new_name(&self, name: &str, what: &str) -> Result<(), String> {
        let valid = !name.is_empty()
            && name.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
        if !valid {
            return Err(format!(
                "cannot register {what} '{name}': names use letters, digits, '-', '_' and '.'"
            ));
        }
        if self.passes.contains_key(name) {
            return Err(format!(
                "cannot register {what} '{name}': a pass with that name is already registered"
            ));
        }
        if self.pipelines.contains_key(name) {
            return Err(format!(
                "cannot register {what} '{name}': a pipeline with that name is already registered"
            ));
        }
        Ok(())
    }

    /// The pass named `name`.
    pub fn get(&self, name: &str) -> Option<&Arc<dyn Pass>> {
        self.passes.get(name)
    }

    /// The named pipeline called `name`.
    pub fn get_pipeline(&self, name: &str) -> Option<&NamedPipeline> {
        self.pipelines.get(name)
    }

    /// All passes, sorted by name.
    pub fn passes(&self) -> impl ExactSizeIterator<Item = &Arc<dyn Pass>> + '_ {
        self.passes.values()
    }

    /// All named pipelines, sorted by name.
    pub fn pipelines(&self) -> impl ExactSizeIterator<Item = &NamedPipeline> + '_ {
        self.pipelines.values()
    }

    /// Every registered name (passes, then pipelines), for suggestions.
    pub fn names(&self) -> impl Iterator<Item = &'static str> + '_ {
        self.passes.keys().chain(self.pipelines.keys()).copied()
    }

    /// The `--list-passes` text: each pass as `name  summary` (summaries aligned),
    /// its options indented below as `name=<kind> (default: X)  help`, then the
    /// named pipelines the same way.
    ///
    /// ```text
    /// Passes:
    ///   fold-bn           fold batch norms into the preceding conv2d or dense
    ///   insert-observers  observe the tensors that quantizable ops consume and produce
    ///     bins=<int> (default: 2048)  histogram bins
    /// Pipelines:
    ///   quantize          observers, calibration and fake quantization
    /// ```
    pub fn list_text(&self) -> String {
        let width = self.names().map(str::len).max().unwrap_or(0);
        let mut out = String::new();
        if !self.passes.is_empty() {
            out.push_str("Passes:\n");
            for pass in self.passes.values() {
                list_entry(&mut out, width, pass.name(), pass.summary(), &pass.options());
            }
        }
        if !self.pipelines.is_empty() {
            out.push_str("Pipelines:\n");
            for pipeline in self.pipelines.values() {
                list_entry(&mut out, width, pipeline.name, pipeline.summary, &pipeline.options);
            }
        }
        if out.is_empty() {
            out.push_str("No passes are registered.\n");
        }
        out
    }
}

fn list_entry(out: &mut String, width: usize, name: &str, summary: &str, options: &[OptionSpec]) {
    let _ = writeln!(out, "  {}", format!("{name:<width$}  {summary}").trim_end());
    for spec in options {
        let default = if spec.required {
            "required".to_string()
        } else {
            format!("default: {}", default_text(name, spec))
        };
        let line = format!("    {}=<{}> ({default})  {}", spec.name, spec.kind_name(), spec.help);
        let _ = writeln!(out, "{}", line.trim_end());
    }
}

/// The default as it resolves (so an empty declared default shows its zero value),
/// or the declared text if it does not resolve.
fn default_text(pass: &str, spec: &OptionSpec) -> String {
    let optional = OptionSpec { required: false, ..spec.clone() };
    match resolve_options(pass, std::slice::from_ref(&optional), &[]) {
        Ok(options) => options.get(spec.name).map_or_else(String::new, |value| value.to_string()),
        Err(_) => spec.default.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_passes::{test_registry, Noop};
    use super::*;

    #[test]
    fn duplicate_names_are_rejected() {
        let mut registry = test_registry();
        assert_eq!(
            registry.register(Arc::new(Noop)),
            Err("cannot register pass 'test-noop': a pass with that name is already registered".to_string())
        );
        let pipeline =
            NamedPipeline { name: "test-noop", summary: "", options: Vec::new(), expand: |_| String::new() };
        assert_eq!(
            registry.register_pipeline(pipeline.clone()),
            Err("cannot register pipeline 'test-noop': a pass with that name is already registered"
                .to_string())
        );
        let pipeline = NamedPipeline { name: "test-pipeline", ..pipeline };
        assert_eq!(
            registry.register_pipeline(pipeline),
            Err("cannot register pipeline 'test-pipeline': a pipeline with that name is already registered"
                .to_string())
        );
        let bad =
            NamedPipeline { name: "bad name", summary: "", options: Vec::new(), expand: |_| String::new() };
        assert_eq!(
            registry.register_pipeline(bad),
            Err("cannot register pipeline 'bad name': names use letters, digits, '-', '_' and '.'"
                .to_string())
        );
    }

    #[test]
    fn lookups_and_sorted_listings() {
        let registry = test_registry();
        assert!(registry.get("test-noop").is_some());
        assert!(registry.get("test-pipeline").is_none());
        assert!(registry.get_pipeline("test-pipeline").is_some());
        let names: Vec<&str> = registry.passes().map(|pass| pass.name()).collect();
        let mut sorted = names.clone();
        sorted.sort_unstable();
        assert_eq!(names, sorted);
        assert!(names.contains(&"test-rename-funcs"));
    }

    #[test]
    fn list_text_shows_passes_options_and_pipelines() {
        let mut registry = PassRegistry::new();
        assert_eq!(registry.list_text(), "No passes are registered.\n");
        registry = test_registry();
        assert_eq!(
            registry.list_text(),
            "Passes:\n\
             \x20 test-break-ir       insert an unregistered op\n\
             \x20 test-fail           change the IR, then fail\n\
             \x20   code=<int> (default: 7)  reported in the error\n\
             \x20   refuse=<bool> (default: false)  fail as a refusal of the input\n\
             \x20 test-noop           do nothing\n\
             \x20 test-options        a pass with options of every kind\n\
             \x20   count=<int> (default: 3)  how many\n\
             \x20   mode=<one of fast|exact> (default: fast)  how\n\
             \x20   sizes=<list of int> (default: [1,2])  which sizes\n\
             \x20   flag=<bool> (default: false)  whether to warn\n\
             \x20   label=<string> (required)\n\
             \x20   data=<string> (default: \"\")  a file read\n\
             \x20   report=<string> (default: \"\")  a file written\n\
             \x20 test-panic          panic\n\
             \x20 test-phases         record phase timings\n\
             \x20 test-rename-funcs   append a suffix to every function name\n\
             \x20   suffix=<string> (default: _renamed)  appended to each function name\n\
             Pipelines:\n\
             \x20 test-bad-expansion  expands to an invalid pipeline\n\
             \x20 test-countdown      test-noop n+1 times, through n nested pipelines\n\
             \x20   n=<int> (default: 0)  nesting depth\n\
             \x20 test-cycle-a        expands to itself through test-cycle-b\n\
             \x20 test-cycle-b        expands to test-cycle-a\n\
             \x20 test-forward        test-options twice, passing on its options\n\
             \x20   count=<string> (default: 3)  passed to the first test-options\n\
             \x20   data=<string> (default: \"\")  passed to the first test-options\n\
             \x20 test-outer          a pipeline naming a pipeline\n\
             \x20 test-pipeline       rename, then do nothing\n\
             \x20   suffix=<string> (default: _p)  passed to test-rename-funcs\n"
        );
    }
}
