//! The passes' unit tests run pipelines of the generic passes, over IR built
//! with [`qopt_ir_core::test_ir`].

pub(crate) use qopt_ir_core::test_ir::{on_small_stack, test_context, RunOutput, TestIr};
use qopt_ir_core::PassRegistry;

/// The generic passes.
pub(crate) fn registry() -> PassRegistry {
    let mut registry = PassRegistry::new();
    // invariant: a fresh registry has none of the names taken.
    let _ = crate::register_generic_passes(&mut registry);
    registry
}

/// Parses `input`, runs `pipeline` of the generic passes over it and prints the result.
pub(crate) fn check_pass(pipeline: &str, input: &str) -> Result<RunOutput, String> {
    qopt_ir_core::test_ir::check_pass(&registry(), pipeline, input)
}

/// Runs `pipeline` over `%v1 = %c + %c; %v2 = %v1 + %c; ...` (10,000 adds) on a
/// small stack, checks that it folded to the one constant 10001 and hands the run to
/// `check`.
pub(crate) fn fold_a_10000_op_chain(pipeline: &'static str, check: impl FnOnce(RunOutput) + Send + 'static) {
    on_small_stack(|| {
        let mut ir = TestIr::default();
        let (_, entry) = ir.function("chain", 0, 1);
        let one = ir.constant(entry, 1);
        let mut value = one;
        for _ in 0..10_000 {
            value = ir.op(entry, "test.add", &[value, one], 1)[0];
        }
        ir.ret(entry, &[value]);
        let out = ir.run(&registry(), pipeline).unwrap();
        assert_eq!(
            out.ir,
            "module {\n  func.func @chain() -> i64 {\n    %0 = test.const() {value = 10001} : () -> i64\n    func.return %0 : i64\n  }\n}\n"
        );
        check(out);
    })
}
