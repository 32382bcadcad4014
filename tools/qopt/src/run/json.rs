//! The JSON documents `--json` prints, written by hand (RFC 8259; no
//! dependency): a small value tree and its compact serialization.
//!
//! Numbers are written with Rust's shortest round-trip form. JSON has no
//! infinities or NaN, so non-finite numbers are written as the strings
//! `"inf"`, `"-inf"` and `"nan"` (an SQNR of equal values is `"inf"`).

use crate::diagnostics::json_string;
use std::fmt::Write as _;

/// A JSON value.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Json {
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
            Json::Str(s) => json_string(out, s),
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
                    json_string(out, key);
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
