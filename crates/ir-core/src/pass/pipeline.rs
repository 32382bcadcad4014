//! Pass-pipeline text and typed pass options.
//!
//! A pipeline is written as text, for example on the command line:
//! `fold-bn, insert-observers{observer=histogram bins=2048 per-channel}, calibrate{data="my data.npy"}`.
//! This module parses that text into [`PipelineElement`]s carrying untyped
//! [`RawOption`]s ([`parse_pipeline`]), prints elements back in canonical form
//! ([`print_pipeline`]), and checks raw options against the [`OptionSpec`]s a pass
//! declares, producing typed [`PassOptions`] ([`resolve_options`]). Every error
//! carries a byte offset into the pipeline text; [`PipelineError::render`] shows it
//! under the text with a caret. [`nearest_name`] supplies the "did you mean"
//! suggestions, for option names here and for pass names in the registry.
//!
//! # Grammar
//!
//! ```text
//! pipeline  ::= element (',' element)*      -- empty or all-whitespace text: empty pipeline
//! element   ::= pass-name options?
//! pass-name ::= [A-Za-z0-9_.-]+             -- '.' for dialect-namespaced passes (accel.lower)
//! options   ::= '{' (option (ws+ option)*)? '}'
//! option    ::= key ('=' value)?            -- a bare key is a flag meaning "true"
//! key       ::= [A-Za-z0-9_.-]+
//! value     ::= list | quoted | bare
//! list      ::= '[' (value (',' value)*)? ']'
//! quoted    ::= '"' (any char except '"' and '\' | '\"' | '\\')* '"'
//! bare      ::= (any char except whitespace and { } [ ] , " =)+
//! ```
//!
//! Whitespace may surround commas, braces and brackets (also between a pass name
//! and its `{`), but not `=`. Options are separated by whitespace; commas separate
//! pipeline elements and list items only. Lists nest at most 16 levels deep.
//! A value that is not a valid bare value (empty, or containing whitespace or one of
//! `{}[],"=`) must be quoted.

use std::borrow::Cow;
use std::fmt;
use std::num::IntErrorKind;

/// Deeper nesting is rejected so that hostile input cannot exhaust the stack of the
/// recursive list parser.
const MAX_LIST_DEPTH: usize = 16;

/// Characters that end a bare pass name, option key or value.
const STRUCTURAL: &[char] = &['{', '}', '[', ']', ',', '"', '='];

// ---------------------------------------------------------------------------
// Pipeline text
// ---------------------------------------------------------------------------

/// One pass in a pipeline, with its options as written.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct PipelineElement {
    /// The pass name.
    pub name: String,
    /// Byte offset of the pass name in the pipeline text.
    pub name_offset: usize,
    /// The options in the order written; keys are unique.
    pub options: Vec<RawOption>,
}

impl PipelineElement {
    /// Checks this element's options against `specs`, like [`resolve_options`], but
    /// reports errors about the pass as a whole (a missing required option, an
    /// invalid declared default) at the pass name.
    pub fn resolve_options(&self, specs: &[OptionSpec]) -> Result<PassOptions, PipelineError> {
        resolve(&self.name, self.name_offset, specs, &self.options)
    }
}

/// One `key` or `key=value` inside a pass's braces, before type checking.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct RawOption {
    /// The option name.
    pub key: String,
    /// Byte offset of the key in the pipeline text.
    pub key_offset: usize,
    /// The value as written.
    pub value: RawValue,
    /// Byte offset of the value in the pipeline text (of the key for a flag).
    pub value_offset: usize,
}

/// An option value before type checking.
#[derive(Clone, PartialEq, Eq, Debug)]
pub enum RawValue {
    /// A bare key with no `=value`.
    Flag,
    /// A bare or quoted value (quotes removed, escapes resolved).
    Scalar(String),
    /// A bracketed list.
    List(Vec<RawValue>),
}

/// A syntax or option error, located in the pipeline text.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct PipelineError {
    /// Byte offset into the pipeline text.
    pub offset: usize,
    /// What was expected and what was found, lower-case, without location.
    pub message: String,
}

impl PipelineError {
    fn new(offset: usize, message: String) -> PipelineError {
        PipelineError { offset, message }
    }

    /// Formats the error with the pipeline text on one line and a caret under the
    /// offending character (column counted in chars):
    ///
    /// ```text
    /// error: expected a value for option 'bins' after '=', found '}'
    ///   fold-bn,insert-observers{bins=}
    ///                              ^
    /// ```
    ///
    /// `text` should be the text the error came from; line breaks and other control
    /// characters in it are shown as spaces so the caret stays aligned.
    pub fn render(&self, text: &str) -> String {
        let line: String =
            text.chars().map(|c| if c.is_whitespace() || c.is_control() { ' ' } else { c }).collect();
        let column = text.char_indices().take_while(|&(index, _)| index < self.offset).count();
        format!("error: {}\n  {}\n  {}^", self.message, line, " ".repeat(column))
    }
}

impl fmt::Display for PipelineError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} (at byte {})", self.message, self.offset)
    }
}

impl std::error::Error for PipelineError {}

/// Parses pipeline text (see the module docs for the grammar). Empty or
/// all-whitespace text is the empty pipeline. Option values are not checked here;
/// see [`resolve_options`].
pub fn parse_pipeline(text: &str) -> Result<Vec<PipelineElement>, PipelineError> {
    let mut parser = Parser { text, pos: 0 };
    let mut elements = Vec::new();
    parser.skip_whitespace();
    if parser.peek().is_none() {
        return Ok(elements);
    }
    loop {
        let element = parser.element()?;
        parser.skip_whitespace();
        match parser.peek() {
            None => {
                elements.push(element);
                return Ok(elements);
            }
            Some(',') => {
                parser.bump();
                parser.skip_whitespace();
                elements.push(element);
            }
            Some(c @ ('}' | ']')) => return Err(parser.unmatched(c)),
            found => {
                return Err(parser.error_here(format!(
                    "expected ',' or end of pipeline after pass '{}', found {}",
                    element.name,
                    describe_found(found)
                )))
            }
        }
    }
}

/// Prints elements as canonical pipeline text: no optional whitespace, options
/// separated by one space, values quoted only when needed, e.g.
/// `a,b{k=v list=[1,2] flag},c`. For parsed elements, parsing the result gives them
/// back (offsets aside).
pub fn print_pipeline(elements: &[PipelineElement]) -> String {
    let mut out = String::new();
    for (index, element) in elements.iter().enumerate() {
        if index > 0 {
            out.push(',');
        }
        out.push_str(&element.name);
        if element.options.is_empty() {
            continue;
        }
        out.push('{');
        for (index, option) in element.options.iter().enumerate() {
            if index > 0 {
                out.push(' ');
            }
            out.push_str(&option.key);
            if option.value != RawValue::Flag {
                out.push('=');
                print_raw_value(&mut out, &option.value);
            }
        }
        out.push('}');
    }
    out
}

fn print_raw_value(out: &mut String, value: &RawValue) {
    match value {
        // A flag inside a list cannot come from the parser; an empty string is the
        // closest printable stand-in.
        RawValue::Flag => out.push_str("\"\""),
        RawValue::Scalar(text) => out.push_str(&quote_if_needed(text)),
        RawValue::List(items) => {
            out.push('[');
            for (index, item) in items.iter().enumerate() {
                if index > 0 {
                    out.push(',');
                }
                print_raw_value(out, item);
            }
            out.push(']');
        }
    }
}

/// Returns `text` as it must be written in a pipeline to read back as itself.
fn quote_if_needed(text: &str) -> Cow<'_, str> {
    let bare_ok = !text.is_empty() && !text.chars().any(|c| c.is_whitespace() || STRUCTURAL.contains(&c));
    if bare_ok {
        return Cow::Borrowed(text);
    }
    let mut quoted = String::with_capacity(text.len() + 2);
    quoted.push('"');
    for c in text.chars() {
        if c == '"' || c == '\\' {
            quoted.push('\\');
        }
        quoted.push(c);
    }
    quoted.push('"');
    Cow::Owned(quoted)
}

fn is_word_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.')
}

fn describe_found(found: Option<char>) -> String {
    match found {
        None => "end of pipeline".to_string(),
        Some(c) if c.is_whitespace() => "whitespace".to_string(),
        Some(c) => format!("'{}'", c.escape_debug()),
    }
}

/// Recursive-descent parser over the pipeline text. `pos` is a byte offset that is
/// always on a char boundary, so slicing `text` at it cannot fail.
struct Parser<'t> {
    text: &'t str,
    pos: usize,
}

impl<'t> Parser<'t> {
    fn peek(&self) -> Option<char> {
        self.text[self.pos..].chars().next()
    }

    fn bump(&mut self) {
        if let Some(c) = self.peek() {
            self.pos += c.len_utf8();
        }
    }

    fn skip_whitespace(&mut self) {
        while let Some(c) = self.peek() {
            if !c.is_whitespace() {
                break;
            }
            self.pos += c.len_utf8();
        }
    }

    fn take_word(&mut self) -> &'t str {
        let start = self.pos;
        while let Some(c) = self.peek() {
            if !is_word_char(c) {
                break;
            }
            self.pos += c.len_utf8();
        }
        &self.text[start..self.pos]
    }

    fn error_here(&self, message: String) -> PipelineError {
        PipelineError::new(self.pos, message)
    }

    fn unmatched(&self, closer: char) -> PipelineError {
        let opener = if closer == '}' { '{' } else { '[' };
        self.error_here(format!("found '{closer}' with no matching '{opener}'"))
    }

    fn element(&mut self) -> Result<PipelineElement, PipelineError> {
        let name_offset = self.pos;
        let name = self.take_word();
        if name.is_empty() {
            return Err(match self.peek() {
                Some(c @ ('}' | ']')) => self.unmatched(c),
                found => self.error_here(format!("expected a pass name, found {}", describe_found(found))),
            });
        }
        match self.peek() {
            None | Some(',' | '{') => {}
            Some(c) if c.is_whitespace() => {}
            Some(c @ ('}' | ']')) => return Err(self.unmatched(c)),
            Some(c) if STRUCTURAL.contains(&c) => {
                return Err(
                    self.error_here(format!("expected ',' or '{{' after pass name '{name}', found '{c}'"))
                )
            }
            Some(c) => {
                return Err(self.error_here(format!(
                    "invalid character '{}' in pass name '{name}'; pass names use letters, \
                     digits, '-', '_' and '.'",
                    c.escape_debug()
                )))
            }
        }
        self.skip_whitespace();
        let options = if self.peek() == Some('{') { self.options(name)? } else { Vec::new() };
        Ok(PipelineElement { name: name.to_string(), name_offset, options })
    }

    fn options(&mut self, pass: &str) -> Result<Vec<RawOption>, PipelineError> {
        let open = self.pos;
        self.bump();
        let mut options: Vec<RawOption> = Vec::new();
        loop {
            self.skip_whitespace();
            match self.peek() {
                None => {
                    return Err(PipelineError::new(
                        open,
                        format!(
                            "unclosed '{{' in options of pass '{pass}': expected '}}', \
                             found end of pipeline"
                        ),
                    ))
                }
                Some('}') => {
                    self.bump();
                    return Ok(options);
                }
                Some(_) => {}
            }
            let key_offset = self.pos;
            let key = self.take_word();
            if key.is_empty() {
                return Err(match self.peek() {
                    Some(']') => self.unmatched(']'),
                    Some(',') => self.error_here(
                        "expected an option name or '}', found ','; options are separated \
                         by spaces"
                            .to_string(),
                    ),
                    Some('=') => self.error_here(
                        "expected an option name or '}', found '='; write 'key=value' \
                         without spaces"
                            .to_string(),
                    ),
                    found => self.error_here(format!(
                        "expected an option name or '}}', found {}",
                        describe_found(found)
                    )),
                });
            }
            if options.iter().any(|option| option.key == key) {
                return Err(PipelineError::new(key_offset, format!("option '{key}' given twice")));
            }
            let (value, value_offset) = match self.peek() {
                Some('=') => {
                    let equals = self.pos;
                    self.bump();
                    let value_offset = self.pos;
                    let value_starts = match self.peek() {
                        None | Some('}' | ']' | ',' | '{' | '=') => false,
                        Some(c) => !c.is_whitespace(),
                    };
                    if !value_starts {
                        return Err(PipelineError::new(
                            equals,
                            format!(
                                "expected a value for option '{key}' after '=', found {}",
                                describe_found(self.peek())
                            ),
                        ));
                    }
                    (self.value(key, 0)?, value_offset)
                }
                None | Some('}') => (RawValue::Flag, key_offset),
                Some(c) if c.is_whitespace() => (RawValue::Flag, key_offset),
                Some(']') => return Err(self.unmatched(']')),
                Some(',') => {
                    return Err(self.error_here(format!(
                        "expected '=', whitespace or '}}' after option '{key}', found ','; \
                         options are separated by spaces"
                    )))
                }
                Some(c) if STRUCTURAL.contains(&c) => {
                    return Err(self.error_here(format!(
                        "expected '=', whitespace or '}}' after option '{key}', found '{c}'"
                    )))
                }
                Some(c) => {
                    return Err(self.error_here(format!(
                        "invalid character '{}' in option name '{key}'; option names use \
                         letters, digits, '-', '_' and '.'",
                        c.escape_debug()
                    )))
                }
            };
            match self.peek() {
                None | Some('}') => {}
                Some(c) if c.is_whitespace() => {}
                Some(']') => return Err(self.unmatched(']')),
                Some(',') => {
                    return Err(self.error_here(format!(
                        "expected whitespace or '}}' after the value of option '{key}', \
                         found ','; options are separated by spaces"
                    )))
                }
                found => {
                    return Err(self.error_here(format!(
                        "expected whitespace or '}}' after the value of option '{key}', \
                         found {}",
                        describe_found(found)
                    )))
                }
            }
            options.push(RawOption { key: key.to_string(), key_offset, value, value_offset });
        }
    }

    /// `key` names the option in error messages; `depth` counts enclosing lists.
    fn value(&mut self, key: &str, depth: usize) -> Result<RawValue, PipelineError> {
        match self.peek() {
            Some('[') => self.list(key, depth),
            Some('"') => self.quoted().map(RawValue::Scalar),
            _ => self.bare(key).map(RawValue::Scalar),
        }
    }

    fn bare(&mut self, key: &str) -> Result<String, PipelineError> {
        let start = self.pos;
        while let Some(c) = self.peek() {
            if c.is_whitespace() || STRUCTURAL.contains(&c) {
                break;
            }
            self.pos += c.len_utf8();
        }
        let value = &self.text[start..self.pos];
        if value.is_empty() {
            return Err(self.error_here(format!(
                "expected a value for option '{key}', found {}",
                describe_found(self.peek())
            )));
        }
        if let Some(c @ ('{' | '[' | '"' | '=')) = self.peek() {
            return Err(self.error_here(format!(
                "unexpected '{c}' in value of option '{key}'; quote the value to include it"
            )));
        }
        Ok(value.to_string())
    }

    fn quoted(&mut self) -> Result<String, PipelineError> {
        let open = self.pos;
        self.bump();
        let unterminated = || {
            PipelineError::new(
                open,
                "unterminated quoted string: expected '\"', found end of pipeline".to_string(),
            )
        };
        let mut value = String::new();
        loop {
            let Some(c) = self.peek() else {
                return Err(unterminated());
            };
            let char_offset = self.pos;
            self.bump();
            match c {
                '"' => return Ok(value),
                '\\' => match self.peek() {
                    None => return Err(unterminated()),
                    Some(escaped @ ('"' | '\\')) => {
                        self.bump();
                        value.push(escaped);
                    }
                    Some(other) => {
                        return Err(PipelineError::new(
                            char_offset,
                            format!(
                                "invalid escape '\\{}' in quoted string; only \\\" and \\\\ \
                                 are allowed",
                                other.escape_debug()
                            ),
                        ))
                    }
                },
                _ => value.push(c),
            }
        }
    }

    fn list(&mut self, key: &str, depth: usize) -> Result<RawValue, PipelineError> {
        let open = self.pos;
        if depth >= MAX_LIST_DEPTH {
            return Err(self.error_here(format!(
                "lists in option '{key}' are nested more than {MAX_LIST_DEPTH} levels deep"
            )));
        }
        self.bump();
        let unclosed = || {
            PipelineError::new(
                open,
                format!(
                    "unclosed '[' in value of option '{key}': expected ']', found end of \
                     pipeline"
                ),
            )
        };
        let mut items = Vec::new();
        self.skip_whitespace();
        if self.peek() == Some(']') {
            self.bump();
            return Ok(RawValue::List(items));
        }
        loop {
            if self.peek().is_none() {
                return Err(unclosed());
            }
            items.push(self.value(key, depth + 1)?);
            self.skip_whitespace();
            match self.peek() {
                Some(',') => {
                    self.bump();
                    self.skip_whitespace();
                }
                Some(']') => {
                    self.bump();
                    return Ok(RawValue::List(items));
                }
                None => return Err(unclosed()),
                found => {
                    return Err(self.error_here(format!(
                        "expected ',' or ']' in the list of option '{key}', found {}",
                        describe_found(found)
                    )))
                }
            }
        }
    }
}

/// Parses a declared default such as `2048` or `[1,2]`.
fn parse_default(key: &str, text: &str) -> Result<RawValue, PipelineError> {
    let mut parser = Parser { text, pos: 0 };
    let value = parser.value(key, 0)?;
    match parser.peek() {
        None => Ok(value),
        found => Err(parser.error_here(format!("expected end of value, found {}", describe_found(found)))),
    }
}

// ---------------------------------------------------------------------------
// Typed options
// ---------------------------------------------------------------------------

/// The type of a pass option.
#[derive(Clone, PartialEq, Eq, Debug)]
pub enum OptionKind {
    /// `true`, `false`, `1`, `0`, or a bare key (true).
    Bool,
    /// A 64-bit signed integer.
    Int,
    /// A finite 64-bit float; integers and exponent notation are accepted.
    Float,
    /// Any text.
    String,
    /// One of the listed names; resolved to [`OptionValue::String`].
    Enum(&'static [&'static str]),
    /// A list of values of the inner kind; a single value means a one-element list.
    List(Box<OptionKind>),
}

/// An option a pass declares.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct OptionSpec {
    /// The option name as written in pipelines.
    pub name: &'static str,
    /// The value type.
    pub kind: OptionKind,
    /// The default in pipeline value syntax (`"2048"`, `"[1,2]"`, `"false"`). An
    /// empty default means the kind's zero value: false, 0, 0.0, the empty string,
    /// the first enum name, the empty list. Ignored when `required`.
    pub default: &'static str,
    /// Whether the option must be given.
    pub required: bool,
    /// One-line description for `--list-passes`.
    pub help: &'static str,
    /// Whether the value names a file the pass reads or writes; the driver
    /// refuses a pipeline that would write over a file it reads.
    pub file: FileUse,
}

/// What a [`OptionKind::String`] option's value is to the file system.
#[derive(Copy, Clone, PartialEq, Eq, Debug, Default)]
pub enum FileUse {
    /// Not a path.
    #[default]
    None,
    /// The path of a file (or directory) the pass reads: calibration data, labels.
    Read,
    /// The path of a file the pass writes: a report, collected tensors.
    Written,
}

impl OptionSpec {
    /// An optional option with a default (in pipeline value syntax) and no help yet.
    pub fn new(name: &'static str, kind: OptionKind, default: &'static str) -> OptionSpec {
        OptionSpec { name, kind, default, required: false, help: "", file: FileUse::None }
    }

    /// The same option with its one-line help.
    pub fn help(self, help: &'static str) -> OptionSpec {
        OptionSpec { help, ..self }
    }

    /// The same option, required.
    pub fn required(self) -> OptionSpec {
        OptionSpec { required: true, ..self }
    }

    /// The same option, naming a file the pass reads.
    pub fn reads_file(self) -> OptionSpec {
        OptionSpec { file: FileUse::Read, ..self }
    }

    /// The same option, naming a file the pass writes.
    pub fn writes_file(self) -> OptionSpec {
        OptionSpec { file: FileUse::Written, ..self }
    }

    /// The kind as shown by `--list-passes`: `bool`, `int`, `float`, `string`,
    /// `one of minmax|histogram`, `list of int`.
    pub fn kind_name(&self) -> String {
        kind_name(&self.kind)
    }
}

fn kind_name(kind: &OptionKind) -> String {
    match kind {
        OptionKind::Bool => "bool".to_string(),
        OptionKind::Int => "int".to_string(),
        OptionKind::Float => "float".to_string(),
        OptionKind::String => "string".to_string(),
        OptionKind::Enum(names) => format!("one of {}", names.join("|")),
        OptionKind::List(inner) => format!("list of {}", kind_name(inner)),
    }
}

/// A type-checked option value. Enum options resolve to [`OptionValue::String`].
#[derive(Clone, PartialEq, Debug)]
pub enum OptionValue {
    /// A [`OptionKind::Bool`] value.
    Bool(bool),
    /// An [`OptionKind::Int`] value.
    Int(i64),
    /// An [`OptionKind::Float`] value.
    Float(f64),
    /// An [`OptionKind::String`] or [`OptionKind::Enum`] value.
    String(String),
    /// An [`OptionKind::List`] value.
    List(Vec<OptionValue>),
}

/// Prints the value in pipeline syntax, so it reads back as the same value.
impl fmt::Display for OptionValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            OptionValue::Bool(value) => write!(f, "{value}"),
            OptionValue::Int(value) => write!(f, "{value}"),
            // Debug keeps a fraction or exponent (`1.0`, `1e-7`) instead of
            // spelling out every digit.
            OptionValue::Float(value) => write!(f, "{value:?}"),
            OptionValue::String(value) => f.write_str(&quote_if_needed(value)),
            OptionValue::List(items) => {
                f.write_str("[")?;
                for (index, item) in items.iter().enumerate() {
                    if index > 0 {
                        f.write_str(",")?;
                    }
                    write!(f, "{item}")?;
                }
                f.write_str("]")
            }
        }
    }
}

/// The type-checked options of one pass: a value for every declared option, with
/// defaults filled in.
#[derive(Clone, PartialEq, Debug)]
pub struct PassOptions {
    pass: String,
    entries: Vec<ResolvedOption>,
}

#[derive(Clone, PartialEq, Debug)]
struct ResolvedOption {
    name: &'static str,
    value: OptionValue,
    explicit: bool,
}

impl PassOptions {
    /// The value of a declared option; `None` for an undeclared name.
    pub fn get(&self, name: &str) -> Option<&OptionValue> {
        self.entries.iter().find(|entry| entry.name == name).map(|entry| &entry.value)
    }

    /// Whether the user gave the option rather than it being defaulted; false for
    /// an undeclared name.
    pub fn is_explicit(&self, name: &str) -> bool {
        self.entries.iter().any(|entry| entry.name == name && entry.explicit)
    }

    /// All options in declaration order, with values.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &OptionValue)> + '_ {
        self.entries.iter().map(|entry| (entry.name, &entry.value))
    }

    /// The value of a declared [`OptionKind::Bool`] option.
    ///
    /// # Panics
    /// If the pass did not declare `name` as a bool option (a bug in the pass).
    pub fn bool(&self, name: &str) -> bool {
        match self.declared(name) {
            OptionValue::Bool(value) => *value,
            other => self.wrong_kind(name, "bool", other),
        }
    }

    /// The value of a declared [`OptionKind::Int`] option.
    ///
    /// # Panics
    /// If the pass did not declare `name` as an int option (a bug in the pass).
    pub fn int(&self, name: &str) -> i64 {
        match self.declared(name) {
            OptionValue::Int(value) => *value,
            other => self.wrong_kind(name, "int", other),
        }
    }

    /// The value of a declared [`OptionKind::Float`] option.
    ///
    /// # Panics
    /// If the pass did not declare `name` as a float option (a bug in the pass).
    pub fn float(&self, name: &str) -> f64 {
        match self.declared(name) {
            OptionValue::Float(value) => *value,
            other => self.wrong_kind(name, "float", other),
        }
    }

    /// The value of a declared [`OptionKind::String`] or [`OptionKind::Enum`] option.
    ///
    /// # Panics
    /// If the pass did not declare `name` as a string or enum option (a bug in the
    /// pass).
    pub fn string(&self, name: &str) -> &str {
        match self.declared(name) {
            OptionValue::String(value) => value,
            other => self.wrong_kind(name, "string", other),
        }
    }

    /// The items of a declared [`OptionKind::List`] option.
    ///
    /// # Panics
    /// If the pass did not declare `name` as a list option (a bug in the pass).
    pub fn list(&self, name: &str) -> &[OptionValue] {
        match self.declared(name) {
            OptionValue::List(items) => items,
            other => self.wrong_kind(name, "list", other),
        }
    }

    fn declared(&self, name: &str) -> &OptionValue {
        match self.get(name) {
            Some(value) => value,
            // invariant: pass code only reads options it declared in its own specs.
            None => panic!("pass '{}' read option '{name}', which it did not declare", self.pass),
        }
    }

    fn wrong_kind(&self, name: &str, getter: &str, value: &OptionValue) -> ! {
        // invariant: pass code reads each option with the getter for its declared kind.
        panic!("pass '{}' read option '{name}' as {getter}, but its value is {value:?}", self.pass)
    }
}

/// Type-checks the options given to pass `pass` against its declared `specs` and
/// fills in defaults.
///
/// Errors point at the offending key or value. Errors about the pass as a whole (a
/// missing required option, an invalid declared default) are reported at offset 0
/// since the pass name's position is not known here; prefer
/// [`PipelineElement::resolve_options`], which reports them at the pass name.
pub fn resolve_options(
    pass: &str,
    specs: &[OptionSpec],
    given: &[RawOption],
) -> Result<PassOptions, PipelineError> {
    resolve(pass, 0, specs, given)
}

fn resolve(
    pass: &str,
    pass_offset: usize,
    specs: &[OptionSpec],
    given: &[RawOption],
) -> Result<PassOptions, PipelineError> {
    // Check the given options in text order so the first error in the text wins.
    let mut checked: Vec<(&RawOption, OptionValue)> = Vec::with_capacity(given.len());
    for option in given {
        let Some(spec) = specs.iter().find(|spec| spec.name == option.key) else {
            return Err(unknown_option(pass, specs, option));
        };
        if checked.iter().any(|(seen, _)| seen.key == option.key) {
            return Err(PipelineError::new(
                option.key_offset,
                format!("option '{}' given twice", option.key),
            ));
        }
        let value = convert(&spec.kind, &option.value).map_err(|mismatch| {
            PipelineError::new(
                option.value_offset,
                format!("option '{}' of pass '{pass}' {}", spec.name, mismatch.explain(&spec.kind)),
            )
        })?;
        checked.push((option, value));
    }

    let mut entries = Vec::with_capacity(specs.len());
    for spec in specs {
        let given_value = checked.iter().position(|(option, _)| option.key == spec.name);
        let (value, explicit) = match given_value {
            Some(index) => (checked.swap_remove(index).1, true),
            None if spec.required => {
                return Err(PipelineError::new(
                    pass_offset,
                    format!("missing required option '{}' for pass '{pass}'", spec.name),
                ))
            }
            None => (default_value(pass, pass_offset, spec)?, false),
        };
        entries.push(ResolvedOption { name: spec.name, value, explicit });
    }
    Ok(PassOptions { pass: pass.to_string(), entries })
}

fn unknown_option(pass: &str, specs: &[OptionSpec], option: &RawOption) -> PipelineError {
    let key = &option.key;
    let message = if specs.is_empty() {
        format!("unknown option '{key}' for pass '{pass}', which takes no options")
    } else if let Some(near) = nearest_name(key, specs.iter().map(|spec| spec.name)) {
        format!("unknown option '{key}' for pass '{pass}'; did you mean '{near}'?")
    } else {
        let mut names: Vec<&str> = specs.iter().map(|spec| spec.name).collect();
        names.sort_unstable();
        format!("unknown option '{key}' for pass '{pass}'; valid options: {}", names.join(", "))
    };
    PipelineError::new(option.key_offset, message)
}

fn default_value(pass: &str, pass_offset: usize, spec: &OptionSpec) -> Result<OptionValue, PipelineError> {
    if spec.default.is_empty() {
        return Ok(zero_value(&spec.kind));
    }
    let invalid = |reason: String| {
        PipelineError::new(
            pass_offset,
            format!(
                "pass '{pass}' declares an invalid default '{}' for option '{}': {reason}",
                spec.default, spec.name
            ),
        )
    };
    let raw = parse_default(spec.name, spec.default).map_err(|error| invalid(error.message))?;
    convert(&spec.kind, &raw).map_err(|mismatch| invalid(mismatch.explain(&spec.kind)))
}

fn zero_value(kind: &OptionKind) -> OptionValue {
    match kind {
        OptionKind::Bool => OptionValue::Bool(false),
        OptionKind::Int => OptionValue::Int(0),
        OptionKind::Float => OptionValue::Float(0.0),
        OptionKind::String => OptionValue::String(String::new()),
        OptionKind::Enum(names) => {
            OptionValue::String(names.first().copied().unwrap_or_default().to_string())
        }
        OptionKind::List(_) => OptionValue::List(Vec::new()),
    }
}

/// Why a raw value does not fit a kind.
struct Mismatch {
    /// What was found: `'many'`, `no value`, `a list`.
    got: String,
    /// 1-based list positions from the innermost list outwards.
    path: Vec<usize>,
    note: Option<&'static str>,
    suggestion: Option<&'static str>,
}

impl Mismatch {
    fn new(got: String) -> Mismatch {
        Mismatch { got, path: Vec::new(), note: None, suggestion: None }
    }

    fn text(text: &str) -> Mismatch {
        Mismatch::new(format!("'{text}'"))
    }

    /// `expects <kind>, got <what>[ as list element N][, note][; did you mean 'x'?]`
    fn explain(&self, kind: &OptionKind) -> String {
        let mut message = format!("expects {}, got {}", describe_kind(kind), self.got);
        for (index, position) in self.path.iter().enumerate() {
            let link = if index == 0 { " as list element" } else { " of element" };
            message.push_str(&format!("{link} {position}"));
        }
        if let Some(note) = self.note {
            message.push_str(", ");
            message.push_str(note);
        }
        if let Some(suggestion) = self.suggestion {
            message.push_str(&format!("; did you mean '{suggestion}'?"));
        }
        message
    }
}

fn describe_kind(kind: &OptionKind) -> String {
    match kind {
        OptionKind::Bool => "a boolean (true, false, 1 or 0)".to_string(),
        OptionKind::Int => "an integer".to_string(),
        OptionKind::Float => "a finite number".to_string(),
        OptionKind::String => "a string".to_string(),
        OptionKind::Enum(names) => format!("one of {}", names.join(", ")),
        OptionKind::List(inner) => format!("a list of {}", describe_kind_plural(inner)),
    }
}

fn describe_kind_plural(kind: &OptionKind) -> String {
    match kind {
        OptionKind::Bool => "booleans".to_string(),
        OptionKind::Int => "integers".to_string(),
        OptionKind::Float => "finite numbers".to_string(),
        OptionKind::String => "strings".to_string(),
        OptionKind::Enum(names) => format!("values among {}", names.join(", ")),
        OptionKind::List(inner) => format!("lists of {}", describe_kind_plural(inner)),
    }
}

fn convert(kind: &OptionKind, raw: &RawValue) -> Result<OptionValue, Mismatch> {
    match raw {
        RawValue::Flag if *kind == OptionKind::Bool => Ok(OptionValue::Bool(true)),
        RawValue::Flag => Err(Mismatch::new("no value".to_string())),
        RawValue::List(items) => {
            let OptionKind::List(inner) = kind else {
                return Err(Mismatch::new("a list".to_string()));
            };
            let mut values = Vec::with_capacity(items.len());
            for (index, item) in items.iter().enumerate() {
                let value = convert(inner, item).map_err(|mut mismatch| {
                    mismatch.path.push(index + 1);
                    mismatch
                })?;
                values.push(value);
            }
            Ok(OptionValue::List(values))
        }
        RawValue::Scalar(text) => convert_scalar(kind, text),
    }
}

fn convert_scalar(kind: &OptionKind, text: &str) -> Result<OptionValue, Mismatch> {
    match kind {
        OptionKind::Bool => match text {
            "true" | "1" => Ok(OptionValue::Bool(true)),
            "false" | "0" => Ok(OptionValue::Bool(false)),
            _ => Err(Mismatch::text(text)),
        },
        OptionKind::Int => text.parse::<i64>().map(OptionValue::Int).map_err(|error| {
            let mut mismatch = Mismatch::text(text);
            if matches!(error.kind(), IntErrorKind::PosOverflow | IntErrorKind::NegOverflow) {
                mismatch.note = Some("which does not fit in 64 bits");
            }
            mismatch
        }),
        OptionKind::Float => match text.parse::<f64>() {
            Ok(value) if value.is_finite() => Ok(OptionValue::Float(value)),
            _ => Err(Mismatch::text(text)),
        },
        OptionKind::String => Ok(OptionValue::String(text.to_string())),
        OptionKind::Enum(names) => {
            if names.contains(&text) {
                Ok(OptionValue::String(text.to_string()))
            } else {
                let mut mismatch = Mismatch::text(text);
                mismatch.suggestion = nearest_name(text, names.iter().copied());
                Err(mismatch)
            }
        }
        // A single value where a list is expected is a one-element list.
        OptionKind::List(inner) => convert_scalar(inner, text).map(|value| OptionValue::List(vec![value])),
    }
}

// ---------------------------------------------------------------------------
// Suggestions
// ---------------------------------------------------------------------------

/// The candidate `query` most likely misspells or abbreviates, for "did you mean"
/// hints; `None` if none is close.
///
/// A candidate qualifies if `query` (at least 3 chars) is a prefix of it, or if
/// their Damerau-Levenshtein distance (optimal string alignment: insertions,
/// deletions, substitutions, adjacent swaps) is at most `max(2, len/3)`, `len`
/// being the query's length in chars, and smaller than the longer name's length
/// (so that nothing is suggested for a wholly different short name). Prefix matches
/// rank first (shortest first), then smaller distances; ties go to the earlier
/// candidate.
pub fn nearest_name<'a>(query: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let query_chars: Vec<char> = query.chars().collect();
    let limit = (query_chars.len() / 3).max(2);
    let mut best: Option<((u8, usize), &'a str)> = None;
    for candidate in candidates {
        let candidate_len = candidate.chars().count();
        let rank = if query_chars.len() >= 3 && candidate.starts_with(query) {
            (0, candidate_len - query_chars.len())
        } else {
            let distance = edit_distance(&query_chars, candidate);
            if distance > limit || distance >= query_chars.len().max(candidate_len) {
                continue;
            }
            (1, distance)
        };
        if best.is_none_or(|(best_rank, _)| rank < best_rank) {
            best = Some((rank, candidate));
        }
    }
    best.map(|(_, candidate)| candidate)
}

/// Optimal-string-alignment distance, over chars.
fn edit_distance(query: &[char], candidate: &str) -> usize {
    let candidate: Vec<char> = candidate.chars().collect();
    let width = candidate.len() + 1;
    let mut before_previous = vec![0; width];
    let mut previous: Vec<usize> = (0..width).collect();
    let mut current = vec![0; width];
    for (i, &q) in query.iter().enumerate() {
        current[0] = i + 1;
        for (j, &c) in candidate.iter().enumerate() {
            let substitution = previous[j] + usize::from(q != c);
            let mut distance = substitution.min(previous[j + 1] + 1).min(current[j] + 1);
            let swapped = i > 0 && j > 0 && query[i - 1] == c && candidate[j - 1] == q;
            if swapped {
                distance = distance.min(before_previous[j - 1] + 1);
            }
            current[j + 1] = distance;
        }
        std::mem::swap(&mut before_previous, &mut previous);
        std::mem::swap(&mut previous, &mut current);
    }
    previous[candidate.len()]
}

#[cfg(test)]
#[path = "pipeline_tests.rs"]
mod tests;
