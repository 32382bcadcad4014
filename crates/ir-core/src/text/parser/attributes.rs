//! Attributes (dictionaries, numbers, strings, arrays, `dense<...>`
//! elements) and locations.

use super::types::scalar_type_data;
use super::*;

impl Parser<'_, '_> {
    pub(super) fn parse_attr_dict(&mut self) -> PResult<Attribute> {
        let start = self.cur;
        let cache_end = self.balanced_line_span(start);
        if let Some(end) = cache_end {
            let key = &self.src[start.start as usize..end];
            if let Some(&a) = self.attr_cache.get(key) {
                self.lex.reset_to(end);
                // The skipped text had balanced braces: the lexer depth is unchanged.
                self.advance();
                return Ok(a);
            }
        }
        self.enter()?;
        let a = self.parse_attr_dict_uncached();
        self.leave();
        let a = a?;
        if let Some(end) = cache_end {
            if end - start.start as usize <= 512 {
                self.attr_cache.insert(&self.src[start.start as usize..end], a);
            }
        }
        Ok(a)
    }

    /// For a `{` token, the end of its balanced `{...}` if it closes on the same
    /// line with no strings inside.
    pub(super) fn balanced_line_span(&self, t: Token) -> Option<usize> {
        if t.kind != Tok::LBrace {
            return None;
        }
        let mut depth = 0u32;
        let mut i = t.start as usize;
        while i < self.src.len() {
            match self.src[i] {
                b'{' => depth += 1,
                b'}' => {
                    depth -= 1;
                    if depth == 0 {
                        return Some(i + 1);
                    }
                }
                b'\n' | b'"' => return None,
                b'/' if self.src.get(i + 1) == Some(&b'/') => return None,
                _ => {}
            }
            i += 1;
        }
        None
    }

    pub(super) fn parse_attr_dict_uncached(&mut self) -> PResult<Attribute> {
        self.expect(Tok::LBrace, "'{' to open the attributes")?;
        let mut entries: Vec<(Symbol, Attribute)> = Vec::new();
        let mut seen: SmallVec<[(Symbol, Token); 8]> = SmallVec::new();
        if self.cur.kind != Tok::RBrace {
            loop {
                let kt = self.cur;
                let key = match kt.kind {
                    Tok::BareId => self.text_str(kt),
                    Tok::String => {
                        let bytes = self.string_value(kt)?;
                        String::from_utf8(bytes)
                            .or_else(|_| self.error(kt, "attribute name is not valid UTF-8"))?
                    }
                    _ => return self.unexpected("an attribute name"),
                };
                self.advance();
                let key = self.ctx.symbol(&key);
                if seen.iter().any(|s| s.0 == key) {
                    let shown = self.ctx.symbol_str(key).to_string();
                    return self.error(kt, format!("attribute '{shown}' is given twice"));
                }
                seen.push((key, kt));
                let value = if self.eat(Tok::Equal) { self.parse_attr()? } else { self.ctx.unit_attr() };
                entries.push((key, value));
                if !self.eat(Tok::Comma) {
                    break;
                }
            }
        }
        self.expect(Tok::RBrace, "',' or '}' in the attribute dictionary")?;
        Ok(self.ctx.intern_attr(AttrData::Dict(entries.into_boxed_slice())))
    }

    pub(super) fn parse_attr(&mut self) -> PResult<Attribute> {
        self.enter()?;
        let a = self.parse_attr_inner();
        self.leave();
        a
    }

    pub(super) fn parse_attr_inner(&mut self) -> PResult<Attribute> {
        let t = self.cur;
        match t.kind {
            Tok::Integer | Tok::Float | Tok::Minus => self.parse_number_attr(),
            Tok::String => {
                let bytes = self.string_value(t)?;
                self.advance();
                Ok(self.ctx.intern_attr(AttrData::String(bytes.into())))
            }
            Tok::LBracket => {
                self.advance();
                let mut items: Vec<Attribute> = Vec::new();
                if self.cur.kind != Tok::RBracket {
                    loop {
                        items.push(self.parse_attr()?);
                        if !self.eat(Tok::Comma) {
                            break;
                        }
                    }
                }
                self.expect(Tok::RBracket, "',' or ']' in the array")?;
                Ok(self.ctx.array_attr(&items))
            }
            Tok::LBrace => self.parse_attr_dict(),
            Tok::AtId => {
                let name = self.symbol_name(t)?;
                self.advance();
                Ok(self.ctx.symbol_ref_attr(&name))
            }
            Tok::LParen | Tok::BangId => {
                let ty = self.parse_type()?;
                Ok(self.ctx.type_attr(ty))
            }
            Tok::BareId => match self.text(t) {
                b"true" | b"false" => {
                    let v = self.text(t) == b"true";
                    self.advance();
                    Ok(self.ctx.bool_attr(v))
                }
                b"unit" => {
                    self.advance();
                    Ok(self.ctx.unit_attr())
                }
                b"dense" => self.parse_dense(),
                b"inf" | b"nan" => self.parse_number_attr(),
                text => {
                    if text == b"tensor" || scalar_type_data(text).is_some() {
                        let ty = self.parse_type()?;
                        Ok(self.ctx.type_attr(ty))
                    } else {
                        let found = self.found(t);
                        self.error(t, format!("expected an attribute value, found {found}"))
                    }
                }
            },
            _ => self.unexpected("an attribute value"),
        }
    }

    /// A numeric literal: its text (with sign), and whether it is written as a float.
    pub(super) fn parse_number_literal(&mut self) -> PResult<(String, Token, bool)> {
        let t = self.cur;
        let mut text = String::new();
        if t.kind == Tok::Minus {
            self.advance();
            text.push('-');
            if !(self.cur.kind == Tok::BareId && matches!(self.text(self.cur), b"inf" | b"nan")) {
                return self.unexpected("a number after '-'");
            }
        }
        let n = self.cur;
        let is_float = match n.kind {
            Tok::Integer => false,
            Tok::Float => true,
            Tok::BareId if matches!(self.text(n), b"inf" | b"nan") => true,
            _ => return self.unexpected("a number"),
        };
        text.push_str(std::str::from_utf8(self.text(n)).unwrap_or(""));
        self.advance();
        Ok((text, t, is_float))
    }

    pub(super) fn parse_number_attr(&mut self) -> PResult<Attribute> {
        let (text, t, is_float) = self.parse_number_literal()?;
        let ty = if self.eat(Tok::Colon) {
            self.parse_type()?
        } else if is_float {
            self.ctx.common().f64
        } else {
            self.ctx.common().i64
        };
        let data = self.ctx.type_data(ty).clone();
        match data {
            TypeData::Float(kind) => match float_bits_of(&text, is_float, kind) {
                Ok(bits) => Ok(self.ctx.intern_attr(AttrData::Float { bits, ty })),
                Err(msg) => self.error(t, msg),
            },
            TypeData::Int(_) | TypeData::Index if !is_float => {
                let kind = element_kind(self.ctx, ty).unwrap_or(ElementKind::Int { width: 64, signed: true });
                match int_value_of(&text, kind) {
                    Some(value) => Ok(self.ctx.int_attr(value, ty)),
                    None => {
                        let shown = super::super::type_to_string(self.ctx, ty);
                        self.error(t, format!("integer {text} does not fit {shown}"))
                    }
                }
            }
            _ => {
                let shown = super::super::type_to_string(self.ctx, ty);
                self.error(
                    t,
                    format!(
                        "{} literal cannot have type {shown}",
                        if is_float { "a float" } else { "an integer" }
                    ),
                )
            }
        }
    }

    /// `dense<...> : tensor<...>`.
    ///
    /// A nested list is read twice: once for its structure (dims, syntax),
    /// then, once the type after it is known, again to encode each leaf
    /// straight into the element bytes. Holding the leaves between the two
    /// (their text and tokens) cost ~95 bytes per element, 19x a long list's
    /// file; this way the overhead is the decoded data itself.
    pub(super) fn parse_dense(&mut self) -> PResult<Attribute> {
        let dense_tok = self.cur;
        self.advance();
        self.expect(Tok::Less, "'<' after 'dense'")?;
        let body = if self.cur.kind == Tok::String {
            let t = self.cur;
            let bytes = self.string_value(t)?;
            let Some(hex) = bytes.strip_prefix(b"0x") else {
                return self.error(t, "dense string data must be a hex blob \"0x...\"");
            };
            let decoded = decode_hex(hex).or_else(|msg| self.error(t, msg))?;
            self.advance();
            DenseBody::Hex(decoded)
        } else if self.cur.kind == Tok::LBracket {
            let start = (self.lex.clone(), self.cur);
            let dims = self.parse_dense_list(None)?;
            DenseBody::List { start, dims }
        } else {
            DenseBody::Splat(self.parse_dense_leaf()?)
        };
        self.expect(Tok::Greater, "'>' to close dense<...>")?;
        self.expect(Tok::Colon, "':' and the tensor type of the dense elements")?;
        let ty_tok = self.cur;
        let ty = self.parse_type()?;
        let Some(shape) = self.ctx.tensor_shape(ty).map(|s| s.to_vec()) else {
            return self.error(ty_tok, "dense elements need a tensor type");
        };
        let Some(n) = static_num_elements(self.ctx, ty) else {
            return self.error(ty_tok, "dense elements need a static shape");
        };
        let elem = self.ctx.element_type(ty);
        let Some(kind) = element_kind(self.ctx, elem) else {
            return self.error(ty_tok, "dense elements need integer, float or quantized elements");
        };
        let bytes = match body {
            DenseBody::Hex(bytes) => {
                if bytes.len() as u64 != n * kind.bytes() as u64 && bytes.len() != kind.bytes() {
                    return self.error(
                        dense_tok,
                        format!(
                            "hex data has {} bytes; {} elements of {} bytes (or one for a splat) were expected",
                            bytes.len(),
                            n,
                            kind.bytes()
                        ),
                    );
                }
                // Narrow integers (i1, i4, i24...) must hold values their type can.
                if let (ElementKind::Int { signed, .. }, Some((lo, hi))) = (kind, kind.int_range()) {
                    let w = kind.bytes();
                    if let Some(i) =
                        bytes.chunks_exact(w).map(|c| decode_int(c, signed)).position(|v| v < lo || v > hi)
                    {
                        let shown = super::super::type_to_string(self.ctx, elem);
                        return self.error(dense_tok, format!("hex element #{i} does not fit {shown}"));
                    }
                }
                bytes
            }
            DenseBody::Splat(leaf) => {
                let mut bytes = Vec::with_capacity(kind.bytes());
                self.encode_dense_leaf(&leaf, kind, elem, &mut bytes)?;
                bytes
            }
            DenseBody::List { start, dims } => {
                let matches =
                    dims.len() == shape.len() && dims.iter().zip(&shape).all(|(&d, &s)| d as i64 == s);
                if !matches {
                    let written = dims.iter().map(|d| d.to_string()).collect::<Vec<_>>().join("x");
                    let shown = super::super::type_to_string(self.ctx, ty);
                    return self.error(
                        dense_tok,
                        format!("dense literal has shape [{written}] but the type is {shown}"),
                    );
                }
                // The dims match the shape, and the list held that many leaves.
                let len = (n as usize).saturating_mul(kind.bytes());
                let mut bytes = Vec::new();
                if bytes.try_reserve_exact(len).is_err() {
                    return self.error(dense_tok, format!("cannot allocate {len} bytes for the dense data"));
                }
                let after =
                    (std::mem::replace(&mut self.lex, start.0), std::mem::replace(&mut self.cur, start.1));
                self.parse_dense_list(Some((kind, elem, &mut bytes)))?;
                (self.lex, self.cur) = after;
                bytes
            }
        };
        // A quantized type with a narrowed storage range (`i8<-127:127>`)
        // holds only values inside it.
        if let (TypeData::Quant(q), ElementKind::Int { signed, .. }) = (self.ctx.type_data(elem), kind) {
            let (lo, hi) = (q.storage_min as i128, q.storage_max as i128);
            if kind.int_range().is_some_and(|(min, max)| lo > min || hi < max) {
                let outside = bytes
                    .chunks_exact(kind.bytes())
                    .map(|c| decode_int(c, signed))
                    .enumerate()
                    .find(|&(_, v)| v < lo || v > hi);
                if let Some((i, v)) = outside {
                    let shown = super::super::type_to_string(self.ctx, elem);
                    return self.error(
                        dense_tok,
                        format!("element #{i} is {v}, outside the storage range [{lo}, {hi}] of {shown}"),
                    );
                }
            }
        }
        match DenseElements::from_bytes(self.ctx, ty, bytes) {
            Ok(d) => Ok(self.ctx.dense_attr(d)),
            Err(msg) => self.error(dense_tok, msg),
        }
    }

    /// Appends the value of `leaf` as an element of kind `kind` (type `elem`)
    /// to `bytes`; a value the type cannot hold is an error at the leaf.
    pub(super) fn encode_dense_leaf(
        &mut self,
        (text, t, is_float): &DenseLeaf,
        kind: ElementKind,
        elem: Type,
        bytes: &mut Vec<u8>,
    ) -> PResult<()> {
        match kind {
            ElementKind::Float(k) => match float_bits_of(text, *is_float, k) {
                Ok(bits) => encode_float_bits(bytes, bits, k),
                Err(msg) => return self.error(*t, msg),
            },
            ElementKind::Int { .. } => {
                let v = if text == "true" {
                    Ok(1)
                } else if text == "false" {
                    Ok(0)
                } else if *is_float {
                    Err(format!("'{text}' is not an integer"))
                } else {
                    int_value_of(text, kind).ok_or_else(|| {
                        let shown = super::super::type_to_string(self.ctx, elem);
                        format!("integer {text} does not fit {shown}")
                    })
                };
                match v {
                    Ok(v) => encode_int(bytes, v, kind.bytes()),
                    Err(msg) => return self.error(*t, msg),
                }
            }
        }
        Ok(())
    }

    pub(super) fn parse_dense_leaf(&mut self) -> PResult<DenseLeaf> {
        let t = self.cur;
        if t.kind == Tok::BareId && matches!(self.text(t), b"true" | b"false") {
            self.advance();
            return Ok((self.text_str(t), t, false));
        }
        self.parse_number_literal()
    }

    /// A nested list of leaves; returns the dims of the nesting. With
    /// `encode`, each leaf is encoded as that element kind and type into the
    /// buffer; without, leaves are only checked for syntax. Iterative, so deep
    /// nesting costs no stack.
    pub(super) fn parse_dense_list(
        &mut self,
        mut encode: Option<(ElementKind, Type, &mut Vec<u8>)>,
    ) -> PResult<Vec<usize>> {
        // Per depth: the length of the first list seen there, and the current count.
        let mut dims: Vec<Option<usize>> = Vec::new();
        let mut counts: Vec<usize> = Vec::new();
        let mut leaf_depth: Option<usize> = None;
        loop {
            let t = self.cur;
            match t.kind {
                Tok::LBracket => {
                    if counts.len() as u32 >= MAX_NESTING {
                        return self.error(t, format!("nesting is deeper than {MAX_NESTING} levels"));
                    }
                    if let Some(c) = counts.last_mut() {
                        *c += 1;
                    }
                    self.advance();
                    counts.push(0);
                    if dims.len() < counts.len() {
                        dims.push(None);
                    }
                    if self.cur.kind == Tok::RBracket {
                        continue;
                    }
                    if self.cur.kind != Tok::LBracket {
                        let depth = counts.len();
                        if leaf_depth.is_some_and(|d| d != depth) {
                            return self.error(self.cur, "dense literal is not rectangular");
                        }
                        leaf_depth = Some(depth);
                    }
                    continue;
                }
                Tok::RBracket => {
                    self.advance();
                    let depth = counts.len();
                    let count = counts.pop().unwrap_or(0);
                    match dims[depth - 1] {
                        None => dims[depth - 1] = Some(count),
                        Some(d) if d != count => return self.error(t, "dense literal is not rectangular"),
                        _ => {}
                    }
                    if counts.is_empty() {
                        break;
                    }
                }
                _ => {
                    if leaf_depth != Some(counts.len()) {
                        return self.error(t, "dense literal is not rectangular");
                    }
                    let leaf = self.parse_dense_leaf()?;
                    if let Some((kind, elem, bytes)) = &mut encode {
                        self.encode_dense_leaf(&leaf, *kind, *elem, bytes)?;
                    }
                    if let Some(c) = counts.last_mut() {
                        *c += 1;
                    }
                }
            }
            match self.cur.kind {
                Tok::Comma => {
                    self.advance();
                    if self.cur.kind == Tok::RBracket {
                        return self.unexpected("an element after ','");
                    }
                }
                Tok::RBracket => {}
                _ => return self.unexpected("',' or ']' in the dense literal"),
            }
        }
        let dims = dims.into_iter().map(|d| d.unwrap_or(0)).collect::<Vec<_>>();
        // `[]` has dims [0]; a rank-1 empty tensor.
        let _ = leaf_depth;
        Ok(dims)
    }

    pub(super) fn string_value(&mut self, t: Token) -> PResult<Vec<u8>> {
        if t.kind == Tok::UnterminatedString {
            return self.error(t, UNTERMINATED_STRING);
        }
        let text = self.text(t);
        let inner = &text[1..text.len() - 1];
        match unescape(inner) {
            Ok(v) => Ok(v),
            Err((offset, msg)) => {
                let pos = self.pos_at(t.line, t.line_start as usize, t.start as usize + 1 + offset);
                self.error_at(pos, msg);
                Err(())
            }
        }
    }

    // ---- locations --------------------------------------------------------

    pub(super) fn parse_opt_loc(&mut self) -> PResult<Location> {
        if !self.is_keyword(b"loc") {
            return Ok(Location::UNKNOWN);
        }
        self.advance();
        self.expect(Tok::LParen, "'(' after 'loc'")?;
        let l = self.parse_loc_body()?;
        self.expect(Tok::RParen, "')' to close the location")?;
        Ok(l)
    }

    pub(super) fn parse_loc_body(&mut self) -> PResult<Location> {
        self.enter()?;
        let r = self.parse_loc_body_inner();
        self.leave();
        r
    }

    pub(super) fn parse_loc_body_inner(&mut self) -> PResult<Location> {
        let t = self.cur;
        match t.kind {
            Tok::BareId if self.text(t) == b"unknown" => {
                self.advance();
                Ok(Location::UNKNOWN)
            }
            Tok::BareId if self.text(t) == b"fused" => {
                self.advance();
                self.expect(Tok::LBracket, "'[' after 'fused'")?;
                let mut parts = Vec::new();
                if self.cur.kind != Tok::RBracket {
                    loop {
                        parts.push(self.parse_loc_body()?);
                        if !self.eat(Tok::Comma) {
                            break;
                        }
                    }
                }
                self.expect(Tok::RBracket, "']' after the fused locations")?;
                Ok(self.ctx.intern_loc(LocationData::Fused(parts.into())))
            }
            Tok::String => {
                let bytes = self.string_value(t)?;
                let text = String::from_utf8_lossy(&bytes).into_owned();
                self.advance();
                if self.eat(Tok::Colon) {
                    let line = self.parse_u32("a line number")?;
                    self.expect(Tok::Colon, "':' and a column number")?;
                    let col = self.parse_u32("a column number")?;
                    return Ok(self.ctx.file_loc(&text, line, col));
                }
                let child = if self.eat(Tok::LParen) {
                    let c = self.parse_loc_body()?;
                    self.expect(Tok::RParen, "')' after the nested location")?;
                    c
                } else {
                    Location::UNKNOWN
                };
                let name = self.ctx.symbol(&text);
                Ok(self.ctx.intern_loc(LocationData::Name { name, child }))
            }
            _ => self.unexpected("a location: \"name\", \"file\":line:col, fused[...] or unknown"),
        }
    }

    pub(super) fn parse_u32(&mut self, what: &str) -> PResult<u32> {
        let t = self.cur;
        let v = self.parse_i64(what)?;
        u32::try_from(v).or_else(|_| self.error(t, format!("{what} must be between 0 and {}", u32::MAX)))
    }
}

pub(super) fn numeric_name(name: &[u8]) -> Option<u32> {
    if name.is_empty() || name.len() > 9 || !name.iter().all(|b| b.is_ascii_digit()) {
        return None;
    }
    if name.len() > 1 && name[0] == b'0' {
        return None; // `%01` and `%1` are different names
    }
    name.iter().try_fold(0u32, |acc, &b| acc.checked_mul(10)?.checked_add((b - b'0') as u32))
}

pub(super) fn parse_int_text(text: &[u8]) -> Option<i128> {
    let s = std::str::from_utf8(text).ok()?;
    let (neg, body) = match s.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, s),
    };
    let v = if let Some(hex) = body.strip_prefix("0x") {
        if hex.len() > 30 {
            return None;
        }
        i128::from_str_radix(hex, 16).ok()?
    } else {
        if body.len() > 38 {
            return None;
        }
        body.parse::<i128>().ok()?
    };
    Some(if neg { -v } else { v })
}

/// The canonical (signed for signless) value of an integer literal of `kind`.
/// `None` if it does not fit (callers name the type: `kind` may be a quantized
/// type's storage or `index`). Only integer tokens reach here, so text that does
/// not parse has too many digits.
pub(super) fn int_value_of(text: &str, kind: ElementKind) -> Option<i128> {
    let ElementKind::Int { width, signed } = kind else { return None };
    let v = parse_int_text(text.as_bytes())?;
    let (lo, hi) = kind.int_range()?;
    if v >= lo && v <= hi {
        Some(v)
    } else if signed && v > hi && v < (1i128 << width) {
        // Signless literals may be written as unsigned bit patterns: 255 : i8 is -1.
        Some(v - (1i128 << width))
    } else {
        None
    }
}

/// Raw bits of a float literal: decimal/special text, or (for integer-looking
/// hex) the bits themselves.
pub(super) fn float_bits_of(text: &str, is_float: bool, kind: FloatKind) -> Result<u64, String> {
    if !is_float {
        if let Some(hex) = text.strip_prefix("0x") {
            let bits = u64::from_str_radix(hex, 16).map_err(|_| format!("'{text}' is not valid hex"))?;
            if kind.bits() < 64 && bits >> kind.bits() != 0 {
                return Err(format!("hex float {text} has more than {} bits", kind.bits()));
            }
            return Ok(bits);
        }
    }
    let bits = parse_decimal(text, kind).ok_or_else(|| format!("'{text}' is not a float"))?;
    let value = crate::float_text::bits_to_f64(bits, kind);
    let written_finite = !text.contains("inf") && !text.contains("nan");
    if written_finite && !value.is_finite() {
        return Err(format!("{text} is out of range for {}", kind.keyword()));
    }
    Ok(bits)
}

pub(super) fn decode_hex(hex: &[u8]) -> Result<Vec<u8>, String> {
    if !hex.len().is_multiple_of(2) {
        return Err("hex data has an odd number of digits".into());
    }
    // Digit values by byte, 0xFF for a non-digit: one table lookup per digit
    // keeps blobs of tens of megabytes fast to read.
    const TABLE: [u8; 256] = {
        let mut t = [0xFFu8; 256];
        let mut i = 0;
        while i < 10 {
            t[b'0' as usize + i] = i as u8;
            i += 1;
        }
        let mut i = 0;
        while i < 6 {
            t[b'a' as usize + i] = 10 + i as u8;
            t[b'A' as usize + i] = 10 + i as u8;
            i += 1;
        }
        t
    };
    let mut out = Vec::with_capacity(hex.len() / 2);
    for pair in hex.chunks_exact(2) {
        let (hi, lo) = (TABLE[pair[0] as usize], TABLE[pair[1] as usize]);
        if (hi | lo) > 15 {
            let bad = if hi > 15 { pair[0] } else { pair[1] };
            return Err(format!("'{}' is not a hex digit", bad as char));
        }
        out.push(hi << 4 | lo);
    }
    Ok(out)
}
