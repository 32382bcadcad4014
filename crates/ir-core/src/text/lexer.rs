//! The `.qir` lexer: bytes to tokens, on demand.
//!
//! The parser asks for one token at a time, so it can re-scan from a token's start
//! when a construct has its own lexical rules (tensor shapes `1x?x4xf32`, opaque
//! type bodies). The lexer tracks the line and the `{`/`}` depth it has passed;
//! the depth lets the parser resynchronise after an error.

/// Kinds of tokens.
#[derive(Copy, Clone, PartialEq, Eq, Debug)]
pub(crate) enum Tok {
    /// End of input.
    Eof,
    /// `[A-Za-z_][A-Za-z0-9_$.]*`, e.g. `fp.conv2d`, `tensor`, `f32`.
    BareId,
    /// `%name` or `%name#3` (a value, possibly one result of several).
    ValueId,
    /// `@name` or `@"quoted"`.
    AtId,
    /// `^bb0`.
    CaretId,
    /// `!dialect.type`.
    BangId,
    /// `-?[0-9]+` or `0x[0-9a-fA-F]+`.
    Integer,
    /// `-?[0-9]+.[0-9]*([eE][+-]?[0-9]+)?` or `-?[0-9]+[eE][+-]?[0-9]+`.
    Float,
    /// `"..."`.
    String,
    LParen,
    RParen,
    LBrace,
    RBrace,
    LBracket,
    RBracket,
    Less,
    Greater,
    Comma,
    Equal,
    Colon,
    Arrow,
    Minus,
    Question,
    /// A byte no rule accepts (reported by the parser).
    Invalid,
    /// A string missing its closing quote on the same line.
    UnterminatedString,
}

/// One token: kind, byte range, and its line.
#[derive(Copy, Clone, Debug)]
pub(crate) struct Token {
    pub(crate) kind: Tok,
    pub(crate) start: u32,
    pub(crate) end: u32,
    /// 1-based line (before adding the chunk's line offset).
    pub(crate) line: u32,
    /// Byte offset where that line starts.
    pub(crate) line_start: u32,
    /// True if no other token precedes it on its line.
    pub(crate) first_on_line: bool,
    /// `{` depth before this token.
    pub(crate) depth: u32,
}

#[derive(Clone)]
pub(crate) struct Lexer<'s> {
    pub(crate) src: &'s [u8],
    pos: usize,
    line: u32,
    line_start: usize,
    depth: u32,
    last_line_with_token: u32,
}

#[inline]
pub(crate) fn is_id_start(b: u8) -> bool {
    b.is_ascii_alphabetic() || b == b'_'
}

#[inline]
pub(crate) fn is_id_char(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'_' | b'$' | b'.')
}

#[inline]
fn is_suffix_char(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'_' | b'$' | b'.' | b'-')
}

impl<'s> Lexer<'s> {
    pub(crate) fn new(src: &'s [u8]) -> Lexer<'s> {
        Lexer { src, pos: 0, line: 1, line_start: 0, depth: 0, last_line_with_token: 0 }
    }

    /// Moves back (or forward) to `pos` on the same line as the last token, which
    /// must be a position the lexer already passed on that line.
    pub(crate) fn reset_to(&mut self, pos: usize) {
        self.pos = pos;
    }

    /// Current line and line start (for positions the parser scans itself).
    pub(crate) fn line_info(&self) -> (u32, usize) {
        (self.line, self.line_start)
    }

    #[inline]
    fn peek_byte(&self, ahead: usize) -> u8 {
        self.src.get(self.pos + ahead).copied().unwrap_or(0)
    }

    fn skip_trivia(&mut self) {
        while self.pos < self.src.len() {
            match self.src[self.pos] {
                b'\n' => {
                    self.pos += 1;
                    self.line += 1;
                    self.line_start = self.pos;
                }
                b' ' | b'\t' | b'\r' => self.pos += 1,
                b'/' if self.peek_byte(1) == b'/' => {
                    while self.pos < self.src.len() && self.src[self.pos] != b'\n' {
                        self.pos += 1;
                    }
                }
                _ => break,
            }
        }
    }

    pub(crate) fn next(&mut self) -> Token {
        self.skip_trivia();
        let start = self.pos;
        let kind = if self.pos >= self.src.len() { Tok::Eof } else { self.lex_kind() };
        let first_on_line = self.last_line_with_token != self.line;
        self.last_line_with_token = self.line;
        let depth = self.depth;
        match kind {
            Tok::LBrace => self.depth += 1,
            Tok::RBrace => self.depth = self.depth.saturating_sub(1),
            _ => {}
        }
        Token {
            kind,
            start: start as u32,
            end: self.pos as u32,
            line: self.line,
            line_start: self.line_start as u32,
            first_on_line,
            depth,
        }
    }

    fn lex_kind(&mut self) -> Tok {
        let b = self.src[self.pos];
        self.pos += 1;
        match b {
            b'(' => Tok::LParen,
            b')' => Tok::RParen,
            b'{' => Tok::LBrace,
            b'}' => Tok::RBrace,
            b'[' => Tok::LBracket,
            b']' => Tok::RBracket,
            b'<' => Tok::Less,
            b'>' => Tok::Greater,
            b',' => Tok::Comma,
            b'=' => Tok::Equal,
            b':' => Tok::Colon,
            b'?' => Tok::Question,
            b'-' => {
                if self.peek_byte(0) == b'>' {
                    self.pos += 1;
                    Tok::Arrow
                } else if self.peek_byte(0).is_ascii_digit() {
                    self.lex_number()
                } else {
                    Tok::Minus
                }
            }
            b'0'..=b'9' => {
                self.pos -= 1;
                self.lex_number()
            }
            b'"' => self.lex_string_body(),
            b'%' => self.lex_prefixed(Tok::ValueId, true),
            b'^' => self.lex_prefixed(Tok::CaretId, false),
            b'!' => {
                if is_id_start(self.peek_byte(0)) {
                    self.eat_while(is_id_char);
                    Tok::BangId
                } else {
                    Tok::Invalid
                }
            }
            b'@' => {
                if self.peek_byte(0) == b'"' {
                    self.pos += 1;
                    match self.lex_string_body() {
                        Tok::String => Tok::AtId,
                        other => other,
                    }
                } else if is_id_start(self.peek_byte(0)) {
                    self.eat_while(is_suffix_char);
                    Tok::AtId
                } else {
                    Tok::Invalid
                }
            }
            _ if is_id_start(b) => {
                self.eat_while(is_id_char);
                Tok::BareId
            }
            _ => {
                // Step over a whole UTF-8 sequence so the error names one character.
                while self.pos < self.src.len() && (self.src[self.pos] & 0xC0) == 0x80 {
                    self.pos += 1;
                }
                Tok::Invalid
            }
        }
    }

    fn eat_while(&mut self, pred: impl Fn(u8) -> bool) {
        while self.pos < self.src.len() && pred(self.src[self.pos]) {
            self.pos += 1;
        }
    }

    fn lex_prefixed(&mut self, kind: Tok, allow_result_number: bool) -> Tok {
        let b = self.peek_byte(0);
        if !(b.is_ascii_alphanumeric() || matches!(b, b'_' | b'$' | b'.' | b'-')) {
            return Tok::Invalid;
        }
        self.eat_while(is_suffix_char);
        if allow_result_number && self.peek_byte(0) == b'#' && self.peek_byte(1).is_ascii_digit() {
            self.pos += 1;
            self.eat_while(|b| b.is_ascii_digit());
        }
        kind
    }

    fn lex_number(&mut self) -> Tok {
        if self.peek_byte(0) == b'0' && self.peek_byte(1) == b'x' && self.peek_byte(2).is_ascii_hexdigit() {
            self.pos += 2;
            self.eat_while(|b| b.is_ascii_hexdigit());
            return Tok::Integer;
        }
        self.eat_while(|b| b.is_ascii_digit());
        let mut float = false;
        if self.peek_byte(0) == b'.' {
            float = true;
            self.pos += 1;
            self.eat_while(|b| b.is_ascii_digit());
        }
        if matches!(self.peek_byte(0), b'e' | b'E') {
            let sign = matches!(self.peek_byte(1), b'+' | b'-') as usize;
            if self.peek_byte(1 + sign).is_ascii_digit() {
                float = true;
                self.pos += 1 + sign;
                self.eat_while(|b| b.is_ascii_digit());
            }
        }
        if float {
            Tok::Float
        } else {
            Tok::Integer
        }
    }

    /// Lexes a string body after its opening quote.
    fn lex_string_body(&mut self) -> Tok {
        while self.pos < self.src.len() {
            match self.src[self.pos] {
                b'"' => {
                    self.pos += 1;
                    return Tok::String;
                }
                // An escape never swallows the line break: strings end on their line.
                b'\\' if self.src.get(self.pos + 1) == Some(&b'\n') => return Tok::UnterminatedString,
                b'\\' => self.pos += 2,
                b'\n' => return Tok::UnterminatedString,
                _ => self.pos += 1,
            }
        }
        self.pos = self.pos.min(self.src.len());
        Tok::UnterminatedString
    }
}

/// Decodes the body of a string token (without quotes): `\n \t \r \" \\ \HH`.
pub(crate) fn unescape(body: &[u8]) -> Result<Vec<u8>, (usize, String)> {
    let mut out = Vec::with_capacity(body.len());
    let mut i = 0;
    while i < body.len() {
        let b = body[i];
        if b != b'\\' {
            out.push(b);
            i += 1;
            continue;
        }
        let Some(&e) = body.get(i + 1) else {
            return Err((i, "string ends in a lone backslash".into()));
        };
        match e {
            b'n' => out.push(b'\n'),
            b't' => out.push(b'\t'),
            b'r' => out.push(b'\r'),
            b'"' => out.push(b'"'),
            b'\\' => out.push(b'\\'),
            _ => {
                // Exactly two hex digits (`from_str_radix` alone would take `\+F`).
                let hex = body
                    .get(i + 1..i + 3)
                    .filter(|h| h.iter().all(u8::is_ascii_hexdigit))
                    .and_then(|h| std::str::from_utf8(h).ok());
                match hex.and_then(|h| u8::from_str_radix(h, 16).ok()) {
                    Some(v) => {
                        out.push(v);
                        i += 3;
                        continue;
                    }
                    None => return Err((i, format!("unknown escape '\\{}' in string", e as char))),
                }
            }
        }
        i += 2;
    }
    Ok(out)
}
