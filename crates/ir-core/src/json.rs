//! JSON text, written by hand (RFC 8259; no dependency): string literals
//! ([`write_string`], [`string`]) and a small value tree with its compact
//! serialization ([`Json`]), for every JSON qopt writes: diagnostics
//! (`--diagnostics=json`), `qrun --json` and `quantize-search`'s report.
//!
//! Numbers are written with Rust's shortest round-trip form. JSON has no
//! infinities or NaN, so non-finite numbers are written as the strings
//! `"inf"`, `"-inf"` and `"nan"` (an SQNR of equal values is `"inf"`).

use std::fmt::Write as _;

/// Appends `s` as a JSON string literal (RFC 8259: quote, backslash and control
/// characters escaped; everything else, non-ASCII included, as is).
pub fn write_string(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// `s` as a JSON string literal.
pub fn string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    write_string(&mut out, s);
    out
}

/// A JSON value.
#[derive(Clone, Debug, PartialEq)]
pub enum Json {
    /// `null`.
    Null,
    /// `true` or `false`.
    Bool(bool),
    /// A number; non-finite ones become strings.
    Num(f64),
    /// An integer, written exactly.
    Int(i64),
    /// A string.
    Str(String),
    /// An array.
    Arr(Vec<Json>),
    /// An object, its keys in the given order.
    Obj(Vec<(&'static str, Json)>),
}

impl Json {
    /// A string value.
    pub fn str(s: impl Into<String>) -> Json {
        Json::Str(s.into())
    }

    /// An array of sizes (a shape).
    pub fn sizes(dims: &[usize]) -> Json {
        Json::Arr(dims.iter().map(|&d| Json::Int(i64::try_from(d).unwrap_or(i64::MAX))).collect())
    }

    /// The compact text of the value.
    pub fn to_text(&self) -> String {
        let mut out = String::new();
        self.write(&mut out);
        out
    }

    fn write(&self, out: &mut String) {
        match self {
            Json::Null => out.push_str("null"),
            Json::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
            Json::Num(v) if v.is_nan() => out.push_str("\"nan\""),
            Json::Num(v) if v.is_infinite() => out.push_str(if *v > 0.0 { "\"inf\"" } else { "\"-inf\"" }),
            Json::Num(v) => {
                let _ = write!(out, "{v}");
            }
            Json::Int(v) => {
                let _ = write!(out, "{v}");
            }
            Json::Str(s) => write_string(out, s),
            Json::Arr(items) => {
                out.push('[');
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    item.write(out);
                }
                out.push(']');
            }
            Json::Obj(fields) => {
                out.push('{');
                for (i, (key, value)) in fields.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    write_string(out, key);
                    out.push(':');
                    value.write(out);
                }
                out.push('}');
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_escapes_quotes_backslashes_and_control_characters() {
        assert_eq!(string("a \"b\" \\ c\nd\te\u{1}é"), r#""a \"b\" \\ c\nd\te\u0001é""#);
    }

    #[test]
    fn strings_are_escaped() {
        assert_eq!(Json::str("loc(\"a\\b\")\n\u{1}é").to_text(), r#""loc(\"a\\b\")\n\u0001é""#);
    }

    #[test]
    fn non_finite_numbers_are_strings_and_nesting_is_compact() {
        let v = Json::Obj(vec![
            (
                "a",
                Json::Arr(vec![Json::Num(f64::INFINITY), Json::Num(f64::NEG_INFINITY), Json::Num(f64::NAN)]),
            ),
            ("b", Json::Num(0.25)),
            ("c", Json::Int(-3)),
            ("d", Json::Null),
            ("e", Json::sizes(&[1, 64])),
        ]);
        assert_eq!(v.to_text(), r#"{"a":["inf","-inf","nan"],"b":0.25,"c":-3,"d":null,"e":[1,64]}"#);
    }
}
