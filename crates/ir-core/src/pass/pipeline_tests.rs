//! Unit tests of `pipeline.rs`.

use super::*;

const OBSERVERS: &[&str] = &["minmax", "histogram"];
const MODES: &[&str] = &["fast", "exact"];

fn spec(name: &'static str, kind: OptionKind, default: &'static str) -> OptionSpec {
    OptionSpec { name, kind, default, required: false, help: "", file: FileUse::None }
}

/// The options of the passes the test pipelines use; `None` for passes that
/// are only parsed.
fn test_specs(pass: &str) -> Option<Vec<OptionSpec>> {
    let list_of = |kind| OptionKind::List(Box::new(kind));
    Some(match pass {
        "fold-bn" => Vec::new(),
        "insert-observers" => vec![
            spec("observer", OptionKind::Enum(OBSERVERS), "minmax"),
            spec("bins", OptionKind::Int, "2048"),
            spec("per-channel", OptionKind::Bool, "false"),
        ],
        "calibrate" => vec![
            OptionSpec { required: true, ..spec("data", OptionKind::String, "") },
            spec("batches", list_of(OptionKind::Int), "[1]"),
            spec("scale", OptionKind::Float, "0.5"),
            spec("mode", OptionKind::Enum(MODES), ""),
            spec("grid", list_of(list_of(OptionKind::Int)), "[]"),
            spec("verbose", OptionKind::Bool, ""),
        ],
        "broken-default" => vec![spec("bins", OptionKind::Int, "lots")],
        _ => return None,
    })
}

fn without_offsets(mut elements: Vec<PipelineElement>) -> Vec<PipelineElement> {
    for element in &mut elements {
        element.name_offset = 0;
        for option in &mut element.options {
            option.key_offset = 0;
            option.value_offset = 0;
        }
    }
    elements
}

/// Parses `pipeline` and resolves the options of every pass `test_specs` knows.
/// The outcome is shown as `error@<offset>: <message>`, or as the canonical text
/// followed by one line per resolved pass (`name: key=value ...`, `*` marking
/// explicit options). Every successful parse must also round-trip through
/// `print_pipeline`.
fn check(pipeline: &str, expected: &str) {
    let show_error = |error: PipelineError| format!("error@{}: {}", error.offset, error.message);
    let actual = match parse_pipeline(pipeline) {
        Err(error) => show_error(error),
        Ok(elements) => {
            let printed = print_pipeline(&elements);
            let reparsed = parse_pipeline(&printed)
                .unwrap_or_else(|error| panic!("reparse of {printed:?} failed: {error}"));
            assert_eq!(without_offsets(reparsed), without_offsets(elements.clone()));

            let mut lines = vec![printed];
            for element in &elements {
                let Some(specs) = test_specs(&element.name) else {
                    continue;
                };
                match element.resolve_options(&specs) {
                    Err(error) => {
                        lines = vec![show_error(error)];
                        break;
                    }
                    Ok(options) => {
                        let mut line = format!("{}:", element.name);
                        for (name, value) in options.iter() {
                            let mark = if options.is_explicit(name) { "*" } else { "" };
                            line.push_str(&format!(" {name}={value}{mark}"));
                        }
                        lines.push(line);
                    }
                }
            }
            lines.join("\n")
        }
    };
    assert_eq!(actual, expected, "pipeline: {pipeline:?}");
}

#[test]
fn parses_the_example_pipeline() {
    check(
        "fold-bn, insert-observers{observer=histogram bins=2048 per-channel}, \
         calibrate{data=\"my data.npy\" batches=[1,2]},c",
        "fold-bn,insert-observers{observer=histogram bins=2048 per-channel},\
         calibrate{data=\"my data.npy\" batches=[1,2]},c\n\
         fold-bn:\n\
         insert-observers: observer=histogram* bins=2048* per-channel=true*\n\
         calibrate: data=\"my data.npy\"* batches=[1,2]* scale=0.5 mode=fast grid=[] \
         verbose=false",
    );
}

#[test]
fn allows_whitespace_around_commas_and_braces() {
    check(" \t a ,\n b { k=v   l=[ 1 , 2 ] }  ,c{ }  ", "a,b{k=v l=[1,2]},c");
}

#[test]
fn empty_and_blank_pipelines_are_empty() {
    check("", "");
    check("  \n\t ", "");
}

#[test]
fn quoted_strings_keep_spaces_braces_and_escapes() {
    check(
        r#"a{p="x \"y\" \\ z" q="{b},[c]=d" r="plain" s=""}"#,
        r#"a{p="x \"y\" \\ z" q="{b},[c]=d" r=plain s=""}"#,
    );
}

#[test]
fn parses_nested_lists() {
    check(r#"a{m=[[1, 2], [3], [], ["x y"]] e=[ ]}"#, r#"a{m=[[1,2],[3],[],["x y"]] e=[]}"#);
}

#[test]
fn bare_values_and_dotted_names() {
    check(
        r"accel.lower{out=/tmp/x.npy r=0.5 t=-3 w=C:\dir},pass_2",
        r"accel.lower{out=/tmp/x.npy r=0.5 t=-3 w=C:\dir},pass_2",
    );
}

#[test]
fn rejects_empty_elements() {
    check("a,,b", "error@2: expected a pass name, found ','");
    check("a, ", "error@3: expected a pass name, found end of pipeline");
    check(",a", "error@0: expected a pass name, found ','");
    check("a{k=\"v\"}", "a{k=v}");
}

#[test]
fn rejects_bad_characters_in_names() {
    check(
        "fold@bn",
        "error@4: invalid character '@' in pass name 'fold'; pass names use letters, \
         digits, '-', '_' and '.'",
    );
    check("a=b", "error@1: expected ',' or '{' after pass name 'a', found '='");
    check(
        "a{bi@ns=3}",
        "error@4: invalid character '@' in option name 'bi'; option names use letters, \
         digits, '-', '_' and '.'",
    );
}

#[test]
fn rejects_unbalanced_braces() {
    check("a,b{k=1", "error@3: unclosed '{' in options of pass 'b': expected '}', found end of pipeline");
    check("a}", "error@1: found '}' with no matching '{'");
    check("a{k}}", "error@4: found '}' with no matching '{'");
}

#[test]
fn rejects_unbalanced_brackets() {
    check("a{k=[1,2", "error@4: unclosed '[' in value of option 'k': expected ']', found end of pipeline");
    check("a{k=[1,2}", "error@8: expected ',' or ']' in the list of option 'k', found '}'");
    check("a{k=1]}", "error@5: found ']' with no matching '['");
    check("a{k=[1,]}", "error@7: expected a value for option 'k', found ']'");
}

#[test]
fn rejects_bad_quoted_strings() {
    check("a{k=\"abc}", "error@4: unterminated quoted string: expected '\"', found end of pipeline");
    check(r#"a{k="a\nb"}"#, r#"error@6: invalid escape '\n' in quoted string; only \" and \\ are allowed"#);
    check(r#"a{k=x"y"}"#, r#"error@5: unexpected '"' in value of option 'k'; quote the value to include it"#);
}

#[test]
fn rejects_duplicate_keys() {
    check("insert-observers{bins=1 bins=2}", "error@24: option 'bins' given twice");
}

#[test]
fn rejects_trailing_garbage() {
    check("a b", "error@2: expected ',' or end of pipeline after pass 'a', found 'b'");
    check("a{k}{j}", "error@4: expected ',' or end of pipeline after pass 'a', found '{'");
    check("a{k=[1]x}", "error@7: expected whitespace or '}' after the value of option 'k', found 'x'");
}

#[test]
fn rejects_missing_values_and_misplaced_separators() {
    check(
        "fold-bn,insert-observers{bins=}",
        "error@29: expected a value for option 'bins' after '=', found '}'",
    );
    check("a{k= 3}", "error@3: expected a value for option 'k' after '=', found whitespace");
    check(
        "a{x=1,y=2}",
        "error@5: expected whitespace or '}' after the value of option 'x', found ','; \
         options are separated by spaces",
    );
    check(
        "a{x =1}",
        "error@4: expected an option name or '}', found '='; write 'key=value' without \
         spaces",
    );
}

#[test]
fn rejects_deeply_nested_lists() {
    let deep = format!("a{{k={}{}}}", "[".repeat(40), "]".repeat(40));
    check(&deep, "error@20: lists in option 'k' are nested more than 16 levels deep");
    let deepest_allowed = format!("a{{k={}{}}}", "[".repeat(16), "]".repeat(16));
    check(&deepest_allowed, &deepest_allowed);
}

#[test]
fn suggests_the_nearest_unknown_option() {
    check(
        "insert-observers{bin=3}",
        "error@17: unknown option 'bin' for pass 'insert-observers'; did you mean 'bins'?",
    );
    check(
        "insert-observers{perchanel}",
        "error@17: unknown option 'perchanel' for pass 'insert-observers'; did you mean \
         'per-channel'?",
    );
}

#[test]
fn lists_valid_options_when_nothing_is_close() {
    check(
        "insert-observers{zzz=1}",
        "error@17: unknown option 'zzz' for pass 'insert-observers'; valid options: bins, \
         observer, per-channel",
    );
    check("a, fold-bn{x}", "error@11: unknown option 'x' for pass 'fold-bn', which takes no options");
}

#[test]
fn rejects_values_of_the_wrong_type() {
    check(
        "insert-observers{bins=many}",
        "error@22: option 'bins' of pass 'insert-observers' expects an integer, got 'many'",
    );
    check(
        "insert-observers{bins=99999999999999999999}",
        "error@22: option 'bins' of pass 'insert-observers' expects an integer, got \
         '99999999999999999999', which does not fit in 64 bits",
    );
    check(
        "insert-observers{bins}",
        "error@17: option 'bins' of pass 'insert-observers' expects an integer, got no \
         value",
    );
    check(
        "insert-observers{bins=[1]}",
        "error@22: option 'bins' of pass 'insert-observers' expects an integer, got a list",
    );
}

#[test]
fn suggests_the_nearest_enum_value() {
    check(
        "insert-observers{observer=hist}",
        "error@26: option 'observer' of pass 'insert-observers' expects one of minmax, \
         histogram, got 'hist'; did you mean 'histogram'?",
    );
    check(
        "insert-observers{observer=median}",
        "error@26: option 'observer' of pass 'insert-observers' expects one of minmax, \
         histogram, got 'median'",
    );
}

#[test]
fn bools_accept_words_digits_and_flags() {
    check(
        "insert-observers{per-channel=1},insert-observers{per-channel=false}",
        "insert-observers{per-channel=1},insert-observers{per-channel=false}\n\
         insert-observers: observer=minmax bins=2048 per-channel=true*\n\
         insert-observers: observer=minmax bins=2048 per-channel=false*",
    );
    check(
        "insert-observers{per-channel=yes}",
        "error@29: option 'per-channel' of pass 'insert-observers' expects a boolean \
         (true, false, 1 or 0), got 'yes'",
    );
}

#[test]
fn floats_accept_ints_and_exponents_but_not_infinities() {
    check(
        "calibrate{data=d scale=3},calibrate{data=d scale=1e-3}",
        "calibrate{data=d scale=3},calibrate{data=d scale=1e-3}\n\
         calibrate: data=d* batches=[1] scale=3.0* mode=fast grid=[] verbose=false\n\
         calibrate: data=d* batches=[1] scale=0.001* mode=fast grid=[] verbose=false",
    );
    check(
        "calibrate{data=d scale=inf}",
        "error@23: option 'scale' of pass 'calibrate' expects a finite number, got 'inf'",
    );
    check(
        "calibrate{data=d scale=NaN}",
        "error@23: option 'scale' of pass 'calibrate' expects a finite number, got 'NaN'",
    );
}

#[test]
fn lists_accept_single_values_and_check_elements() {
    check(
        "calibrate{data=d batches=4 grid=[[1],[2,3]]}",
        "calibrate{data=d batches=4 grid=[[1],[2,3]]}\n\
         calibrate: data=d* batches=[4]* scale=0.5 mode=fast grid=[[1],[2,3]]* \
         verbose=false",
    );
    check(
        "calibrate{data=d batches=[1,x]}",
        "error@25: option 'batches' of pass 'calibrate' expects a list of integers, got \
         'x' as list element 2",
    );
    check(
        "calibrate{data=d grid=[[1],[2,y]]}",
        "error@22: option 'grid' of pass 'calibrate' expects a list of lists of integers, \
         got 'y' as list element 2 of element 2",
    );
    check(
        "calibrate{data=d batches}",
        "error@17: option 'batches' of pass 'calibrate' expects a list of integers, got no \
         value",
    );
}

#[test]
fn reports_missing_required_options_at_the_pass_name() {
    check("fold-bn, calibrate{batches=[2]}", "error@9: missing required option 'data' for pass 'calibrate'");
}

#[test]
fn fills_defaults_and_tracks_explicit_options() {
    check(
        "insert-observers",
        "insert-observers\ninsert-observers: observer=minmax bins=2048 per-channel=false",
    );
    check(
        "insert-observers{bins=16}",
        "insert-observers{bins=16}\n\
         insert-observers: observer=minmax bins=16* per-channel=false",
    );
}

#[test]
fn reports_invalid_declared_defaults() {
    check(
        "a,broken-default",
        "error@2: pass 'broken-default' declares an invalid default 'lots' for option \
         'bins': expects an integer, got 'lots'",
    );
}

#[test]
fn round_trips_through_print() {
    for pipeline in [
        "a",
        "a,b,c",
        "a{k}",
        r#"x.y{s="a b" t="\\ " u="\"" v=[] w=[[],[""]] z=a\b}"#,
        "p{a=1 b=[1,2,3] c=\"{}\"},q{flag}",
    ] {
        check(pipeline, pipeline);
    }
}

#[test]
fn typed_getters_return_resolved_values() {
    let Some(specs) = test_specs("calibrate") else {
        panic!("calibrate has specs");
    };
    let elements = parse_pipeline("calibrate{data=\"d.npy\" batches=[3,4] verbose}")
        .unwrap_or_else(|error| panic!("{error}"));
    let options = elements[0].resolve_options(&specs).unwrap_or_else(|error| panic!("{error}"));
    assert_eq!(options.string("data"), "d.npy");
    assert_eq!(options.list("batches"), &[OptionValue::Int(3), OptionValue::Int(4)]);
    assert_eq!(options.float("scale"), 0.5);
    assert_eq!(options.string("mode"), "fast");
    assert!(options.bool("verbose"));
    assert!(options.is_explicit("verbose") && !options.is_explicit("scale"));
    assert!(!options.is_explicit("undeclared"));
    assert_eq!(options.get("undeclared"), None);

    let observers =
        resolve_options("insert-observers", &test_specs("insert-observers").unwrap_or_default(), &[])
            .unwrap_or_else(|error| panic!("{error}"));
    assert_eq!(observers.int("bins"), 2048);
}

#[test]
#[should_panic(expected = "did not declare")]
fn getter_for_undeclared_option_panics() {
    let options = resolve_options("p", &[], &[]).unwrap_or_else(|error| panic!("{error}"));
    options.int("bins");
}

#[test]
#[should_panic(expected = "read option 'bins' as string")]
fn getter_of_the_wrong_kind_panics() {
    let specs = [spec("bins", OptionKind::Int, "3")];
    let options = resolve_options("p", &specs, &[]).unwrap_or_else(|error| panic!("{error}"));
    options.string("bins");
}

#[test]
fn free_resolve_reports_pass_errors_at_offset_zero() {
    let Some(specs) = test_specs("calibrate") else {
        panic!("calibrate has specs");
    };
    let error = resolve_options("calibrate", &specs, &[]).err();
    assert_eq!(
        error,
        Some(PipelineError {
            offset: 0,
            message: "missing required option 'data' for pass 'calibrate'".to_string(),
        })
    );
}

#[test]
fn renders_a_caret_under_the_error() {
    let text = "fold-bn,insert-observers{bins=}";
    let error = parse_pipeline(text).err().unwrap_or_else(|| panic!("should fail"));
    assert_eq!(
        error.render(text),
        "error: expected a value for option 'bins' after '=', found '}'\n  \
         fold-bn,insert-observers{bins=}\n                               ^"
    );
    let text = "a{k=\"é\"} b";
    let error = parse_pipeline(text).err().unwrap_or_else(|| panic!("should fail"));
    assert_eq!(error.offset, 10);
    assert_eq!(
        error.render(text),
        "error: expected ',' or end of pipeline after pass 'a', found 'b'\n  \
         a{k=\"é\"} b\n           ^"
    );
    let text = "a,\n@";
    let error = parse_pipeline(text).err().unwrap_or_else(|| panic!("should fail"));
    assert_eq!(error.render(text), "error: expected a pass name, found '@'\n  a, @\n     ^");
    assert_eq!(error.to_string(), "expected a pass name, found '@' (at byte 3)");
}

#[test]
fn nearest_name_follows_the_distance_rule() {
    let names = ["bins", "observer", "per-channel"];
    assert_eq!(nearest_name("bisn", names), Some("bins"));
    assert_eq!(nearest_name("obsrver", names), Some("observer"));
    assert_eq!(nearest_name("per", names), Some("per-channel"));
    assert_eq!(nearest_name("xy", ["ab"]), None);
    assert_eq!(nearest_name("xyzzy", names), None);
    assert_eq!(nearest_name("anything", []), None);
    assert_eq!(nearest_name("canonicalise", ["canonicalize", "cse"]), Some("canonicalize"));
}

#[test]
fn kind_names_and_value_display() {
    let kinds = [
        (OptionKind::Bool, "bool"),
        (OptionKind::Int, "int"),
        (OptionKind::Float, "float"),
        (OptionKind::String, "string"),
        (OptionKind::Enum(OBSERVERS), "one of minmax|histogram"),
        (OptionKind::List(Box::new(OptionKind::Int)), "list of int"),
    ];
    for (kind, name) in kinds {
        assert_eq!(spec("x", kind, "").kind_name(), name);
    }
    let value = OptionValue::List(vec![
        OptionValue::Bool(true),
        OptionValue::Int(-3),
        OptionValue::Float(1e-7),
        OptionValue::String("a b".to_string()),
        OptionValue::List(Vec::new()),
    ]);
    assert_eq!(value.to_string(), r#"[true,-3,1e-7,"a b",[]]"#);
}

/// Parsing arbitrary text never panics, and whatever parses prints to a stable
/// canonical form.
#[test]
fn parse_survives_random_text() {
    let alphabet: Vec<char> = "abcdefghijklmnopqrstuvwxyz,{}=[] \"\\.é".chars().collect();
    let mut state: u64 = 0x2545_f491_4f6c_dd1d;
    let mut next = move || {
        state = state.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
        (state >> 33) as usize
    };
    let specs = test_specs("insert-observers").unwrap_or_default();
    let mut parsed = 0;
    for _ in 0..20_000 {
        let len = next() % 24;
        let text: String = (0..len).map(|_| alphabet[next() % alphabet.len()]).collect();
        let Ok(elements) = parse_pipeline(&text) else {
            continue;
        };
        parsed += 1;
        let printed = print_pipeline(&elements);
        let reparsed = parse_pipeline(&printed)
            .unwrap_or_else(|error| panic!("{text:?} printed as {printed:?}: {error}"));
        assert_eq!(print_pipeline(&reparsed), printed, "input {text:?}");
        assert_eq!(without_offsets(reparsed), without_offsets(elements.clone()));
        for element in &elements {
            // Only checking that resolution does not panic.
            let _ = element.resolve_options(&specs);
        }
    }
    assert!(parsed > 100, "only {parsed} random pipelines parsed");
}
