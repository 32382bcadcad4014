//! Types: signatures, builtin scalar types, `tensor<...>` and
//! `!qnn.uniform<...>`, each text interned once through the parser's cache.

use super::attributes::parse_int_text;
use super::*;

impl Parser<'_, '_> {
    /// `(t, t) -> t` / `(t) -> (t, t)` / `() -> ()`.
    pub(super) fn parse_signature(&mut self) -> PResult<(TypeList, TypeList)> {
        self.expect(Tok::LParen, "'(' and the operand types")?;
        let mut inputs = SmallVec::new();
        if self.cur.kind != Tok::RParen {
            loop {
                inputs.push(self.parse_type()?);
                if !self.eat(Tok::Comma) {
                    break;
                }
            }
        }
        self.expect(Tok::RParen, "')' after the operand types")?;
        self.expect(Tok::Arrow, "'->' and the result types")?;
        let results = self.parse_type_list_or_single()?;
        Ok((inputs, results))
    }

    /// `t` or `(t, t)` or `()`.
    pub(super) fn parse_type_list_or_single(&mut self) -> PResult<SmallVec<[Type; 4]>> {
        let mut types = SmallVec::new();
        if self.cur.kind == Tok::LParen {
            // `(t) -> t` is a function type, not a parenthesized list; look ahead
            // by parsing the list then checking for an arrow.
            let start = self.cur;
            self.advance();
            if self.cur.kind != Tok::RParen {
                loop {
                    types.push(self.parse_type()?);
                    if !self.eat(Tok::Comma) {
                        break;
                    }
                }
            }
            self.expect(Tok::RParen, "')' after the result types")?;
            if self.cur.kind == Tok::Arrow {
                self.advance();
                let results = self.parse_type_list_or_single()?;
                let f = self.ctx.function_type(&types, &results);
                let _ = start;
                types.clear();
                types.push(f);
            }
            return Ok(types);
        }
        types.push(self.parse_type()?);
        Ok(types)
    }

    pub(super) fn parse_type(&mut self) -> PResult<Type> {
        let start = self.cur;
        if let Some(end) = self.cached_span(start, b'<', b'>') {
            let key = &self.src[start.start as usize..end];
            if let Some(&t) = self.type_cache.get(key) {
                self.lex.reset_to(end);
                self.advance();
                return Ok(t);
            }
            self.enter()?;
            let t = self.parse_type_uncached();
            self.leave();
            let t = t?;
            if self.cur.start as usize >= end {
                self.type_cache.insert(key, t);
            }
            return Ok(t);
        }
        self.enter()?;
        let t = self.parse_type_uncached();
        self.leave();
        t
    }

    /// For a token that starts `word<...>` on one line without strings, the end of
    /// the balanced text (used as a cache key).
    pub(super) fn cached_span(&self, t: Token, open: u8, close: u8) -> Option<usize> {
        if t.kind != Tok::BareId && t.kind != Tok::BangId {
            return None;
        }
        let mut i = t.end as usize;
        if self.src.get(i) != Some(&open) {
            return None;
        }
        let mut depth = 0u32;
        while i < self.src.len() {
            let b = self.src[i];
            if b == open {
                depth += 1;
            } else if b == close {
                depth -= 1;
                if depth == 0 {
                    return Some(i + 1);
                }
            } else if b == b'\n' || b == b'"' || (b == b'/' && self.src.get(i + 1) == Some(&b'/')) {
                return None;
            }
            i += 1;
        }
        None
    }

    pub(super) fn parse_type_uncached(&mut self) -> PResult<Type> {
        let t = self.cur;
        match t.kind {
            Tok::BareId => {
                let text = self.text(t);
                if text == b"tensor" {
                    self.advance();
                    return self.parse_tensor_type(t);
                }
                let ty = match scalar_type_data(text) {
                    Some(Ok(data)) => data,
                    Some(Err(msg)) => return self.error(t, msg),
                    None => {
                        let found = self.found(t);
                        return self.error(t, format!("expected a type, found {found}"));
                    }
                };
                self.advance();
                Ok(self.ctx.intern_type(ty))
            }
            Tok::LParen => {
                self.advance();
                let mut inputs: SmallVec<[Type; 4]> = SmallVec::new();
                if self.cur.kind != Tok::RParen {
                    loop {
                        inputs.push(self.parse_type()?);
                        if !self.eat(Tok::Comma) {
                            break;
                        }
                    }
                }
                self.expect(Tok::RParen, "')' in the function type")?;
                self.expect(Tok::Arrow, "'->' in the function type")?;
                let results = self.parse_type_list_or_single()?;
                Ok(self.ctx.function_type(&inputs, &results))
            }
            Tok::BangId => {
                let name = self.text(t)[1..].to_vec();
                self.advance();
                if name == b"qnn.uniform" {
                    return self.parse_quant_type(t);
                }
                if !name.contains(&b'.') {
                    return self.error(t, "a dialect type is written !dialect.name");
                }
                let body = if self.cur.kind == Tok::Less && self.cur.start == t.end {
                    self.raw_angle_body()?
                } else {
                    String::new()
                };
                let name = String::from_utf8_lossy(&name).into_owned();
                Ok(self.ctx.intern_type(TypeData::Opaque { name: name.into(), body: body.into() }))
            }
            _ => self.unexpected("a type"),
        }
    }

    /// Reads the raw text between `<` (the current token) and its matching `>`.
    pub(super) fn raw_angle_body(&mut self) -> PResult<String> {
        let open = self.cur;
        let mut i = open.end as usize;
        let mut depth = 1u32;
        let start = i;
        while i < self.src.len() {
            match self.src[i] {
                b'<' => depth += 1,
                b'>' => {
                    depth -= 1;
                    if depth == 0 {
                        break;
                    }
                }
                b'"' => {
                    i += 1;
                    while i < self.src.len() && self.src[i] != b'"' && self.src[i] != b'\n' {
                        i += if self.src[i] == b'\\' { 2 } else { 1 };
                    }
                }
                b'\n' => {
                    return self
                        .error(open, "unterminated '<' in dialect type (it must close on the same line)")
                }
                _ => {}
            }
            i += 1;
        }
        if i >= self.src.len() {
            return self.error(open, "unterminated '<' in dialect type");
        }
        let body = String::from_utf8_lossy(&self.src[start..i]).into_owned();
        self.lex.reset_to(i + 1);
        self.advance();
        Ok(body)
    }

    /// After `tensor`: `<` dims `x` element `>`, dims `[0-9]+` or `?`.
    pub(super) fn parse_tensor_type(&mut self, tensor_tok: Token) -> PResult<Type> {
        let open = self.expect(Tok::Less, "'<' after 'tensor'")?;
        // Shapes have their own lexical rules (`4x?x8xf32`): scan them by hand.
        let mut i = open.end as usize;
        let mut shape: SmallVec<[i64; 6]> = SmallVec::new();
        loop {
            let b = self.src.get(i).copied().unwrap_or(0);
            let dim_start = i;
            let dim = if b == b'?' {
                i += 1;
                DYNAMIC
            } else if b.is_ascii_digit() {
                while self.src.get(i).is_some_and(|b| b.is_ascii_digit()) {
                    i += 1;
                }
                let text = std::str::from_utf8(&self.src[dim_start..i]).unwrap_or("");
                match text.parse::<i64>() {
                    Ok(d) if d <= MAX_DIM => d,
                    _ => {
                        let (line, line_start) = self.lex.line_info();
                        let pos = self.pos_at(line, line_start, dim_start);
                        self.error_at(pos, format!("tensor dimension {text} is too large"));
                        return Err(());
                    }
                }
            } else if b == b'-' {
                let (line, line_start) = self.lex.line_info();
                let pos = self.pos_at(line, line_start, dim_start);
                self.error_at(pos, "tensor dimensions are sizes or '?', not negative numbers");
                return Err(());
            } else {
                break;
            };
            if self.src.get(i) != Some(&b'x') {
                let (line, line_start) = self.lex.line_info();
                let pos = self.pos_at(line, line_start, i);
                self.error_at(pos, "expected 'x' after a tensor dimension");
                return Err(());
            }
            i += 1;
            shape.push(dim);
            if shape.len() > 64 {
                return self.error(tensor_tok, "tensor rank is above 64");
            }
        }
        self.lex.reset_to(i);
        self.advance();
        let element = self.parse_type()?;
        match self.ctx.type_data(element) {
            TypeData::Float(_)
            | TypeData::Int(_)
            | TypeData::Index
            | TypeData::Quant(_)
            | TypeData::Opaque { .. } => {}
            _ => return self.error(tensor_tok, "tensor elements must be scalars or quantized types"),
        }
        self.expect(Tok::Greater, "'>' to close the tensor type")?;
        Ok(self.ctx.tensor_type(&shape, element))
    }

    /// After `!qnn.uniform` (token `start`): `<i8<-127:127>:f32:axis, params>`.
    /// Parameters the type cannot have (a zero scale, a zero point outside
    /// the storage range) are reported here, once per distinct type, at
    /// `start`: the verifier would otherwise report them at every op and
    /// signature that uses the type.
    pub(super) fn parse_quant_type(&mut self, start: Token) -> PResult<Type> {
        self.expect(Tok::Less, "'<' after !qnn.uniform")?;
        let st = self.cur;
        let storage = match self.cur.kind {
            Tok::BareId => match scalar_type_data(self.text(st)) {
                Some(Ok(TypeData::Int(i))) => i,
                Some(Err(msg)) => return self.error(st, msg),
                _ => return self.unexpected("an integer storage type like i8 or u8"),
            },
            _ => return self.unexpected("an integer storage type like i8 or u8"),
        };
        if storage.width > 32 {
            return self.error(st, "quantized storage types are at most 32 bits wide");
        }
        self.advance();
        let (mut lo, mut hi) = (storage.min_value() as i64, storage.max_value() as i64);
        if self.cur.kind == Tok::Less {
            self.advance();
            let lo_tok = self.cur;
            lo = self.parse_i64("the smallest stored value")?;
            self.expect(Tok::Colon, "':' between the storage bounds")?;
            hi = self.parse_i64("the largest stored value")?;
            self.expect(Tok::Greater, "'>' after the storage bounds")?;
            if (lo as i128) < storage.min_value() || (hi as i128) > storage.max_value() || lo > hi {
                return self.error(
                    lo_tok,
                    format!(
                        "storage range {lo}:{hi} is not an ordered range inside {}..{}",
                        storage.min_value(),
                        storage.max_value()
                    ),
                );
            }
        }
        self.expect(Tok::Colon, "':' and the expressed float type")?;
        let et = self.cur;
        let expressed = match self.cur.kind {
            Tok::BareId => match scalar_type_data(self.text(et)) {
                Some(Ok(TypeData::Float(k))) => k,
                _ => return self.unexpected("a float type like f32"),
            },
            _ => return self.unexpected("a float type like f32"),
        };
        self.advance();
        let mut axis = None;
        if self.eat(Tok::Colon) {
            let t = self.cur;
            let a = self.parse_i64("the quantization axis")?;
            if !(0..64).contains(&a) {
                return self.error(t, "quantization axis must be between 0 and 63");
            }
            axis = Some(a as u32);
        }
        self.expect(Tok::Comma, "',' and the scale:zero_point parameters")?;
        let params = match axis {
            None => {
                let (scale, zero_point) = self.parse_scale_zp()?;
                QuantParams::PerTensor { scale, zero_point }
            }
            Some(axis) => {
                self.expect(Tok::LBrace, "'{' and per-axis scale:zero_point pairs")?;
                let mut scales = Vec::new();
                let mut zero_points = Vec::new();
                loop {
                    let (s, z) = self.parse_scale_zp()?;
                    scales.push(s);
                    zero_points.push(z);
                    if !self.eat(Tok::Comma) {
                        break;
                    }
                }
                self.expect(Tok::RBrace, "'}' after the per-axis parameters")?;
                QuantParams::PerAxis { axis, scales: scales.into(), zero_points: zero_points.into() }
            }
        };
        self.expect(Tok::Greater, "'>' to close the quantized type")?;
        let q = QuantType { storage, storage_min: lo, storage_max: hi, expressed, params };
        let problem = q.check_structure().err();
        let ty = self.ctx.quant_type(q);
        let problem = problem.or_else(|| {
            let qnn = self.ctx.dialect_arc("qnn")?;
            qnn.verify_type(self.ctx, ty).err()
        });
        if let Some(problem) = problem {
            if self.reported_types.insert(ty) {
                let pos = self.pos_of(start);
                self.error_at(
                    pos,
                    format!("invalid type {}: {problem}", super::super::type_to_string(self.ctx, ty)),
                );
            }
        }
        Ok(ty)
    }

    pub(super) fn parse_scale_zp(&mut self) -> PResult<(f64, i64)> {
        let t = self.cur;
        let special = t.kind == Tok::BareId && matches!(self.text(t), b"inf" | b"nan");
        if !(matches!(t.kind, Tok::Float | Tok::Integer | Tok::Minus) || special) {
            return self.unexpected("a scale like 0.05");
        }
        let (text, t, _) = self.parse_number_literal()?;
        let scale = match parse_decimal(&text, FloatKind::F64) {
            Some(bits) if !text.starts_with("0x") => f64::from_bits(bits),
            _ => return self.error(t, format!("'{text}' is not a scale")),
        };
        let zp = if self.eat(Tok::Colon) { self.parse_i64("a zero point")? } else { 0 };
        Ok((scale, zp))
    }

    pub(super) fn parse_i64(&mut self, what: &str) -> PResult<i64> {
        let t = self.cur;
        if t.kind != Tok::Integer {
            return self.unexpected(what);
        }
        let v = parse_int_text(self.text(t));
        self.advance();
        match v.and_then(|v| i64::try_from(v).ok()) {
            Some(v) => Ok(v),
            None => self.error(t, "integer does not fit 64 bits"),
        }
    }
}

/// Builtin scalar type keywords: `f16 bf16 f32 f64 index none iN uN`.
pub(super) fn scalar_type_data(text: &[u8]) -> Option<Result<TypeData, String>> {
    let data = match text {
        b"f16" => TypeData::Float(FloatKind::F16),
        b"bf16" => TypeData::Float(FloatKind::BF16),
        b"f32" => TypeData::Float(FloatKind::F32),
        b"f64" => TypeData::Float(FloatKind::F64),
        b"index" => TypeData::Index,
        b"none" => TypeData::None,
        _ => {
            let (signedness, digits) = match text.first()? {
                b'i' => (Signedness::Signless, &text[1..]),
                b'u' => (Signedness::Unsigned, &text[1..]),
                _ => return None,
            };
            if digits.is_empty() || !digits.iter().all(|b| b.is_ascii_digit()) {
                return None;
            }
            let width = std::str::from_utf8(digits).ok()?.parse::<u32>().unwrap_or(u32::MAX);
            if !(1..=64).contains(&width) {
                let shown = String::from_utf8_lossy(text);
                return Some(Err(format!("integer type {shown} has width {width}; widths are 1 to 64")));
            }
            TypeData::Int(IntType { width: width as u8, signedness })
        }
    };
    Some(Ok(data))
}
