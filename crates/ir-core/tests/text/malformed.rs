//! Malformed `.qir` inputs: each must fail with an error at the offending
//! line:col whose message says what is wrong. Every case goes through
//! [`check_error`]; the nesting limit, stack safety on 10,000-deep input, error
//! recovery without cascades and the [`MAX_ERRORS`] cap have their own tests.

use qopt_ir_core::{parse_module, Context, Diagnostics, MAX_ERRORS, MAX_NESTING};

/// Parses `input` (unregistered ops allowed), returning its diagnostics; panics if it parses.
fn parse_errors(input: &str) -> Diagnostics {
    let mut ctx = Context::new();
    ctx.set_allow_unregistered(true);
    match parse_module(&mut ctx, input.as_bytes(), "input.qir") {
        Ok(m) => panic!(
            "input should not parse, but printed as:\n{}\ninput:\n{input}",
            qopt_ir_core::module_to_string(&ctx, &m)
        ),
        Err(diags) => diags,
    }
}

/// Asserts that parsing `input` fails with an error at exactly `line:col` whose
/// message contains `message`.
#[track_caller]
fn check_error(input: &str, (line, col): (u32, u32), message: &str) {
    let diags = parse_errors(input);
    let found = diags.0.iter().any(|d| d.pos.line == line && d.pos.col == col && d.message.contains(message));
    assert!(
        found,
        "expected an error at {line}:{col} containing {message:?}, got:\n{diags}\ninput:\n{}",
        input.chars().take(2000).collect::<String>()
    );
}

// ---- lexical errors -------------------------------------------------------

#[test]
fn unterminated_string() {
    // Wherever a string may stand, an unterminated one is reported as such.
    const UNTERMINATED: &str = "unterminated string (strings end on the line they start)";
    check_error("t.a() {s = \"abc} : () -> ()\n", (1, 12), UNTERMINATED);
    check_error("t.a() : () -> () loc(\"abc)", (1, 22), UNTERMINATED);
    check_error("\"t.a() : () -> ()", (1, 1), UNTERMINATED);
}

#[test]
fn bad_escape() {
    check_error("t.a() {s = \"a\\qb\"} : () -> ()", (1, 14), "unknown escape '\\q'");
    // `\HH` takes exactly two hex digits.
    check_error("t.a() {s = \"\\+F\"} : () -> ()", (1, 13), "unknown escape '\\+'");
}

#[test]
fn invalid_characters() {
    check_error("$", (1, 1), "found '$'");
    check_error("func.func @f() {\n}\n  €", (3, 3), "found '€'");
    check_error("t.a() {k = #} : () -> ()", (1, 12), "expected an attribute value, found '#'");
}

#[test]
fn minus_without_number() {
    check_error("t.a() {k = -x} : () -> ()", (1, 13), "expected a number after '-', found 'x'");
}

// ---- types ----------------------------------------------------------------

#[test]
fn unknown_type() {
    check_error("func.func private @f(f31)", (1, 22), "expected a type, found 'f31'");
    check_error("func.func private @f(tensor<4xfloat>)", (1, 31), "expected a type, found 'float'");
}

#[test]
fn integer_widths() {
    check_error("func.func private @f(i0)", (1, 22), "integer type i0 has width 0; widths are 1 to 64");
    check_error("func.func private @f(u65)", (1, 22), "integer type u65 has width 65");
    check_error("func.func private @f(i99999999999)", (1, 22), "widths are 1 to 64");
}

#[test]
fn bad_tensor_dims() {
    check_error("func.func private @f(tensor<4x>)", (1, 31), "expected a type, found '>'");
    check_error("func.func private @f(tensor<4xx>)", (1, 31), "expected a type, found 'x'");
    check_error("func.func private @f(tensor<-1xf32>)", (1, 29), "tensor dimensions are sizes or '?'");
    check_error("func.func private @f(tensor<4f32>)", (1, 30), "expected 'x' after a tensor dimension");
    check_error(
        "func.func private @f(tensor<99999999999999999999xf32>)",
        (1, 29),
        "tensor dimension 99999999999999999999 is too large",
    );
}

#[test]
fn missing_closing_angle() {
    check_error(
        "func.func private @f(tensor<4xf32)",
        (1, 34),
        "expected '>' to close the tensor type, found ')'",
    );
}

#[test]
fn bad_quantized_types() {
    let q = |body: &str| format!("func.func private @f(!qnn.uniform<{body}>)");
    // Column 35 is the first token inside `!qnn.uniform<`.
    check_error(&q("i0:f32, 1.0"), (1, 35), "integer type i0 has width 0");
    check_error(
        &q("i8<-200:127>:f32, 1.0"),
        (1, 38),
        "storage range -200:127 is not an ordered range inside -128..127",
    );
    check_error(&q("i8<5:-5>:f32, 1.0"), (1, 38), "storage range 5:-5 is not an ordered range");
    check_error(&q("i8:f32"), (1, 41), "expected ',' and the scale:zero_point parameters, found '>'");
    check_error(&q("i8:i32, 1.0"), (1, 38), "expected a float type like f32, found 'i32'");
    check_error(&q("i64:f32, 1.0"), (1, 35), "quantized storage types are at most 32 bits wide");
    check_error(&q("f32:f32, 1.0"), (1, 35), "expected an integer storage type like i8 or u8, found 'f32'");
    check_error(&q("i8:f32:0, 1.0"), (1, 45), "expected '{' and per-axis scale:zero_point pairs");
    check_error(&q("i8:f32, x"), (1, 43), "expected a scale like 0.05, found 'x'");
}

// ---- values and signatures -------------------------------------------------

#[test]
fn undefined_value() {
    check_error("func.func @f() {\n  t.a(%x) : (f32) -> ()\n}", (2, 7), "use of undefined value %x");
}

#[test]
fn value_redefinition() {
    check_error(
        "func.func @f() {\n  %a = t.a() : () -> f32\n  %a = t.b() : () -> f32\n}",
        (3, 3),
        "redefinition of value %a",
    );
    check_error("func.func @f(%a: f32, %a: f32) {\n}", (1, 23), "redefinition of value %a");
}

#[test]
fn result_number_out_of_range() {
    check_error(
        "func.func @f() {\n  %a:2 = t.a() : () -> (f32, f32)\n  t.b(%a#5) : (f32) -> ()\n}",
        (3, 7),
        "result #5 of %a does not exist; it has 2 result(s)",
    );
}

#[test]
fn multi_result_used_without_number() {
    check_error(
        "func.func @f() {\n  %a:2 = t.a() : () -> (f32, f32)\n  t.b(%a) : (f32) -> ()\n}",
        (3, 7),
        "%a names 2 results; pick one with %a#N",
    );
}

#[test]
fn operand_type_mismatch() {
    check_error(
        "func.func @f(%x: f32) {\n  t.b(%x) : (i32) -> ()\n}",
        (2, 7),
        "operand #0 (%x) has type f32 but the signature says i32",
    );
    check_error(
        "func.func @f(%x: f32) -> i32 {\n  func.return %x : i32\n}",
        (2, 15),
        "operand #0 (%x) has type f32 but the signature says i32",
    );
}

#[test]
fn operand_type_count_mismatch() {
    check_error(
        "func.func @f(%x: f32) {\n  t.b(%x) : (f32, f32) -> ()\n}",
        (2, 3),
        "1 operand(s) but the type signature lists 2 operand type(s)",
    );
}

#[test]
fn result_count_mismatch() {
    check_error("%a:2 = t.a() : () -> f32", (1, 8), "2 result name(s) given but the op has 1 result(s)");
    check_error("%a = t.a() : () -> ()", (1, 6), "1 result name(s) given but the op has 0 result(s)");
    check_error("%a:0 = t.a() : () -> ()", (1, 4), "result count must be between 1 and 65536");
}

#[test]
fn missing_signature() {
    check_error("t.a() -> f32", (1, 7), "expected ':' and the op's type signature, found '->'");
    check_error("t.a() {x = 1}\n", (2, 1), "expected ':' and the op's type signature, found end of input");
}

#[test]
fn missing_arrow() {
    check_error("t.a() : () f32", (1, 12), "expected '->' and the result types, found 'f32'");
    check_error("t.a() : (f32 -> f32", (1, 14), "expected ')' after the operand types, found '->'");
}

// ---- attributes -------------------------------------------------------------

#[test]
fn duplicate_attribute_key() {
    check_error("t.a() {a = 1, b, a = 2} : () -> ()", (1, 18), "attribute 'a' is given twice");
}

#[test]
fn bad_attribute_values() {
    check_error("t.a() {a = %x} : () -> ()", (1, 12), "expected an attribute value, found '%x'");
    check_error("t.a() {a = foo} : () -> ()", (1, 12), "expected an attribute value, found 'foo'");
    check_error("t.a() {a = [1, } : () -> ()", (1, 16), "expected an attribute value, found '}'");
    check_error(
        "t.a() {a = 1 b = 2} : () -> ()",
        (1, 14),
        "expected ',' or '}' in the attribute dictionary, found 'b'",
    );
    check_error("t.a() {a = 1 : f99} : () -> ()", (1, 16), "expected a type, found 'f99'");
}

#[test]
fn float_literal_for_int_type() {
    check_error("t.a() {a = 1.5 : i32} : () -> ()", (1, 12), "a float literal cannot have type i32");
    check_error("t.a() {a = inf : index} : () -> ()", (1, 12), "a float literal cannot have type index");
    check_error(
        "t.a() {a = 1 : tensor<2xf32>} : () -> ()",
        (1, 12),
        "an integer literal cannot have type tensor<2xf32>",
    );
}

#[test]
fn int_literal_too_large() {
    check_error("t.a() {a = 256 : i8} : () -> ()", (1, 12), "integer 256 does not fit i8");
    check_error("t.a() {a = -129 : i8} : () -> ()", (1, 12), "integer -129 does not fit i8");
    check_error("t.a() {a = -1 : u8} : () -> ()", (1, 12), "integer -1 does not fit u8");
    check_error(
        "t.a() {a = 18446744073709551616} : () -> ()",
        (1, 12),
        "integer 18446744073709551616 does not fit i64",
    );
    let huge = "9".repeat(60);
    check_error(
        &format!("t.a() {{a = {huge}}} : () -> ()"),
        (1, 12),
        &format!("integer {huge} does not fit i64"),
    );
}

#[test]
fn float_literal_out_of_range() {
    check_error("t.a() {a = 1e39 : f32} : () -> ()", (1, 12), "1e39 is out of range for f32");
    check_error("t.a() {a = 65520.0 : f16} : () -> ()", (1, 12), "65520.0 is out of range for f16");
    check_error("t.a() {a = 0x1FFFF : f16} : () -> ()", (1, 12), "hex float 0x1FFFF has more than 16 bits");
}

#[test]
fn bad_dense_literals() {
    let d = |attr: &str| format!("t.a() {{v = {attr}}} : () -> ()");
    // Column 12 is `dense`.
    check_error(
        &d("dense<[1, 2, 3]> : tensor<2xi32>"),
        (1, 12),
        "dense literal has shape [3] but the type is tensor<2xi32>",
    );
    check_error(&d("dense<[[1, 2], [3]]> : tensor<2x2xi32>"), (1, 29), "dense literal is not rectangular");
    check_error(&d("dense<[[1, 2], 3]> : tensor<2x2xi32>"), (1, 27), "dense literal is not rectangular");
    check_error(&d("dense<[1, 300]> : tensor<2xi8>"), (1, 22), "integer 300 does not fit i8");
    check_error(&d("dense<[1.5]> : tensor<1xi8>"), (1, 19), "'1.5' is not an integer");
    check_error(
        &d("dense<\"0x0102\"> : tensor<4xi8>"),
        (1, 12),
        "hex data has 2 bytes; 4 elements of 1 bytes (or one for a splat) were expected",
    );
    check_error(&d("dense<\"0x012\"> : tensor<2xi8>"), (1, 18), "hex data has an odd number of digits");
    check_error(&d("dense<\"0x0G\"> : tensor<1xi8>"), (1, 18), "'G' is not a hex digit");
    check_error(&d("dense<\"abc\"> : tensor<1xi8>"), (1, 18), "dense string data must be a hex blob");
    check_error(&d("dense<[1, 2]> : tensor<?xi8>"), (1, 28), "dense elements need a static shape");
    check_error(&d("dense<[1, 2]> : i8"), (1, 28), "dense elements need a tensor type");
    check_error(&d("dense<[1, ]> : tensor<1xi8>"), (1, 22), "expected an element after ','");
}

// ---- locations ----------------------------------------------------------------

#[test]
fn unknown_location_form() {
    check_error(
        "t.a() : () -> () loc(42)",
        (1, 22),
        "expected a location: \"name\", \"file\":line:col, fused[...] or unknown",
    );
    check_error("t.a() : () -> () loc(\"f\":1)", (1, 27), "expected ':' and a column number, found ')'");
    check_error(
        "t.a() : () -> () loc(\"f\":-1:0)",
        (1, 26),
        "a line number must be between 0 and 4294967295",
    );
}

// ---- structure --------------------------------------------------------------

#[test]
fn missing_closing_brace_at_eof() {
    check_error(
        "func.func @f() {\n  func.return\n",
        (3, 1),
        "expected '}' to close the function body, found end of input",
    );
    check_error("t.r() ({\n  t.a() : () -> ()\n", (3, 1), "'}' to close the region, found end of input");
}

#[test]
fn stray_closing_brace() {
    check_error("}\n", (1, 1), "unexpected '}' at top level");
    check_error("func.func @f() {\n  func.return\n}\n}", (4, 1), "unexpected '}' at top level");
}

#[test]
fn bad_op_names() {
    check_error("foo() : () -> ()", (1, 1), "expected an op name like 'dialect.op', found 'foo'");
    check_error("\"foo\"() : () -> ()", (1, 1), "'foo' is not an op name like 'dialect.op'");
    check_error("%a#1 = t.a() : () -> f32", (1, 1), "a result name cannot carry a '#' result number");
}

#[test]
fn unnamed_function_args_with_body() {
    check_error(
        "func.func @f(f32) {\n  func.return\n}",
        (1, 19),
        "a function with a body must name its arguments",
    );
}

#[test]
fn function_with_two_blocks() {
    check_error(
        "func.func @f() {\n  func.return\n^bb1:\n  func.return\n}",
        (3, 1),
        "function bodies have exactly one block",
    );
}

#[test]
fn block_label_redefinition() {
    check_error(
        "t.r() ({\n^bb0:\n  t.a() : () -> ()\n^bb0:\n  t.b() : () -> ()\n}) : () -> ()",
        (4, 1),
        "block ^bb0 is already defined at line 2",
    );
}

#[test]
fn results_on_ops_without_results() {
    check_error("%m = module {\n}", (1, 6), "'module' has no results");
    check_error("func.func @f() {\n  %r = func.return\n}", (2, 8), "'func.return' has no results");
}

// ---- nesting limits and stack safety ----------------------------------------

/// Runs `f` on a thread with a 2 MiB stack (Rust's default for spawned threads),
/// so a parser that recursed per nesting level would overflow.
fn on_small_stack(f: impl FnOnce() + Send + 'static) {
    std::thread::Builder::new()
        .stack_size(2 << 20)
        .spawn(f)
        .expect("spawn a test thread")
        .join()
        .unwrap_or_else(|e| std::panic::resume_unwind(e));
}

const DEEP: usize = 10_000;

#[test]
fn deep_arrays_hit_the_nesting_limit() {
    on_small_stack(|| {
        let prefix = "t.a() {k = ";
        let input = format!("{prefix}{}", "[".repeat(DEEP));
        // The dictionary is one level; the array that would be one too many is reported.
        let col = prefix.len() as u32 + MAX_NESTING;
        check_error(&input, (1, col), &format!("nesting is deeper than {MAX_NESTING} levels"));
        // Closed arrays: the same single error, and nothing after it cascades.
        let closed =
            format!("{prefix}{}{}}} : () -> ()\nt.b() : () -> ()\n", "[".repeat(DEEP), "]".repeat(DEEP));
        let diags = parse_errors(&closed);
        assert_eq!(diags.0.len(), 1, "{diags}");
    });
}

#[test]
fn deep_dense_lists_hit_the_nesting_limit() {
    on_small_stack(|| {
        let prefix = "t.a() {k = dense<";
        let input = format!("{prefix}{}", "[".repeat(DEEP));
        let col = prefix.len() as u32 + MAX_NESTING + 1;
        check_error(&input, (1, col), &format!("nesting is deeper than {MAX_NESTING} levels"));
    });
}

#[test]
fn deep_regions_hit_the_nesting_limit() {
    on_small_stack(|| {
        // One op per line, each opening a region inside the previous one.
        let open = "test.r() ({\n".repeat(DEEP);
        let line = MAX_NESTING + 1;
        check_error(&open, (line, 11), &format!("nesting is deeper than {MAX_NESTING} levels"));
        // Closed regions: reported once, the rest of the input still parses.
        let closed = format!("{open}{}t.after() : () -> ()\n", "}) : () -> ()\n".repeat(DEEP));
        let diags = parse_errors(&closed);
        assert_eq!(diags.0.len(), 1, "{diags}");
    });
}

#[test]
fn deep_tensor_types_hit_the_nesting_limit() {
    on_small_stack(|| {
        let prefix = "func.func private @f(";
        let input = format!("{prefix}{}f32{})", "tensor<".repeat(DEEP), ">".repeat(DEEP));
        let col = prefix.len() as u32 + 1 + MAX_NESTING * "tensor<".len() as u32;
        check_error(&input, (1, col), &format!("nesting is deeper than {MAX_NESTING} levels"));
    });
}

#[test]
fn deep_function_types_hit_the_nesting_limit() {
    on_small_stack(|| {
        let prefix = "func.func private @f(";
        let input = format!("{prefix}{}", "(".repeat(DEEP));
        let col = prefix.len() as u32 + 1 + MAX_NESTING;
        check_error(&input, (1, col), &format!("nesting is deeper than {MAX_NESTING} levels"));
    });
}

#[test]
fn deep_dictionaries_and_locations_hit_the_nesting_limit() {
    on_small_stack(|| {
        let input = format!("t.a() {}", "{k = ".repeat(DEEP));
        let diags = parse_errors(&input);
        assert!(diags.0.iter().any(|d| d.message.contains("nesting is deeper")), "{diags}");
        let input = format!("t.a() : () -> () loc({}", "fused[".repeat(DEEP));
        let diags = parse_errors(&input);
        assert!(diags.0.iter().any(|d| d.message.contains("nesting is deeper")), "{diags}");
    });
}

#[test]
fn nesting_at_the_limit_parses() {
    on_small_stack(|| {
        // Regions as deep as allowed (the dictionary of the innermost op is one more level).
        let depth = MAX_NESTING as usize - 1;
        let input =
            format!("{}t.leaf() : () -> ()\n{}", "t.r() ({\n".repeat(depth), "}) : () -> ()\n".repeat(depth));
        let mut ctx = Context::new();
        ctx.set_allow_unregistered(true);
        let m = parse_module(&mut ctx, input.as_bytes(), "deep.qir").unwrap_or_else(|d| panic!("{d}"));
        let printed = qopt_ir_core::module_to_string(&ctx, &m);
        let again =
            parse_module(&mut ctx, printed.as_bytes(), "printed.qir").unwrap_or_else(|d| panic!("{d}"));
        assert_eq!(qopt_ir_core::module_to_string(&ctx, &again), printed);
    });
}

// ---- recovery -----------------------------------------------------------------

#[test]
fn recovery_reports_each_bad_op_once() {
    let input = "\
func.func @f(%a: f32) -> f32 {
  %0 = t.a(%a) : (i32) -> f32
  %1 = t.b(%0) : (f32) -> f32
  %2 = t.c(%zz) : (f32) -> f32
  %3 = t.d() {a = [1, } : () -> f32
  %4 = t.e(%1, %3) : (f32, f32) -> f32
  %5 = t.f() : () -> tensor<4xf33>
  %6 = t.g(%a) : (f32) -> f32
  func.return %6 : f32
}
func.func @g(%b: i64) -> i64 {
  %0 = t.h(%b) {k = 1.5 : i32} : (i64) -> i64
  func.return %0 : i64
}
";
    let diags = parse_errors(input);
    let lines: Vec<u32> = diags.0.iter().map(|d| d.pos.line).collect();
    assert_eq!(lines, [2, 4, 5, 7, 12], "{diags}");
}

#[test]
fn errors_stop_at_max_errors() {
    let input: String =
        (0..3 * MAX_ERRORS).map(|i| format!("%v{i} = t.a(%undefined{i}) : (f32) -> f32\n")).collect();
    let diags = parse_errors(&input);
    assert_eq!(diags.0.len(), MAX_ERRORS + 1, "{diags}");
    let (shown, note) = diags.0.split_at(MAX_ERRORS);
    assert!(shown.iter().enumerate().all(|(i, d)| d.pos.line == i as u32 + 1), "{diags}");
    assert_eq!(note[0].severity, qopt_ir_core::Severity::Note);
    assert_eq!(
        note[0].message,
        format!("{} more error(s) not shown; the parser reports the first {MAX_ERRORS}", 2 * MAX_ERRORS)
    );
}
