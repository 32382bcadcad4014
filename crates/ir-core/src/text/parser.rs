//! The `.qir` parser: tokens to a [`Module`], reporting located errors.
//!
//! Recursive descent over an on-demand lexer, in one pass over the input, with
//! nesting bounded by [`MAX_NESTING`] so hostile input cannot overflow the stack.
//! Parsing is linear in the input; repeated type and attribute-dictionary texts
//! are interned once through caches keyed by their source bytes. After an error in
//! an op the parser skips to the next statement at the same brace depth and goes
//! on, so one run reports several errors (up to [`MAX_ERRORS`]).
//!
//! Values are scoped MLIR-style: a region sees the names of enclosing regions up to
//! the nearest isolated-from-above op (`func.func`, `module`); a name is defined
//! once per scope; uses must follow definitions.

use super::lexer::{unescape, Lexer, Tok, Token};
use crate::attributes::{AttrData, Attribute, DenseElements};
use crate::context::{Context, OpName, Symbol};
use crate::dense::{
    decode_int, element_kind, encode_float_bits, encode_int, static_num_elements, ElementKind,
};
use crate::diag::{Diagnostic, Diagnostics, Severity};
use crate::dialect::Traits;
use crate::entity::{BlockId, OpId, RegionId, ValueId};
use crate::float_text::parse_decimal;
use crate::hash::{FxHashMap, FxHashSet};
use crate::location::{Location, LocationData, SrcPos};
use crate::module::{Module, OperationState};
use crate::source::SourceText;
use crate::types::{
    FloatKind, IntType, QuantParams, QuantType, Signedness, Type, TypeData, DYNAMIC, MAX_DIM,
};
use smallvec::SmallVec;
use std::sync::Arc;

/// Deepest nesting of regions, types and attributes the parser accepts.
pub const MAX_NESTING: u32 = 200;
/// Errors reported before the parser gives up.
pub const MAX_ERRORS: usize = 20;

const UNTERMINATED_STRING: &str = "unterminated string (strings end on the line they start)";

/// Parses a whole `.qir` text. `file_name` is used in diagnostics and op positions.
pub fn parse_module(ctx: &mut Context, source: &[u8], file_name: &str) -> Result<Module, Diagnostics> {
    parse_module_chunk(ctx, source, file_name, 0)
}

/// Parses a chunk of a file (see [`crate::split_input`]) whose first line is line
/// `line_offset + 1` of `file_name`.
pub fn parse_module_chunk(
    ctx: &mut Context,
    source: &[u8],
    file_name: &str,
    line_offset: u32,
) -> Result<Module, Diagnostics> {
    parse_with_release(ctx, source, file_name, line_offset, None)
}

/// Parses a whole [`SourceText`], releasing the memory of the input already parsed
/// as it goes (see [`SourceText::release_before`]).
pub fn parse_source(ctx: &mut Context, source: &SourceText, file_name: &str) -> Result<Module, Diagnostics> {
    let release = |offset: usize| source.release_before(offset);
    parse_with_release(ctx, source.bytes(), file_name, 0, Some(&release))
}

/// Bytes parsed between two releases of consumed input.
const RELEASE_EVERY: usize = 8 << 20;

fn parse_with_release(
    ctx: &mut Context,
    source: &[u8],
    file_name: &str,
    line_offset: u32,
    release: Option<&dyn Fn(usize)>,
) -> Result<Module, Diagnostics> {
    let file: Arc<str> = file_name.into();
    let mut module = Module::new();
    module.reserve_ops(source.len() / 96);
    module.set_source_name(Some(file.clone()));
    let mut lex = Lexer::new(source);
    let cur = lex.next();
    let mut p = Parser {
        ctx,
        lex,
        cur,
        src: source,
        file,
        line_offset,
        module,
        diags: Vec::new(),
        suppressed: 0,
        scopes: Vec::new(),
        type_cache: FxHashMap::default(),
        attr_cache: FxHashMap::default(),
        op_name_cache: FxHashMap::default(),
        reported_types: FxHashSet::default(),
        nesting: 0,
        release,
        next_release: RELEASE_EVERY,
    };
    p.parse_top();
    if p.suppressed > 0 {
        let message =
            format!("{} more error(s) not shown; the parser reports the first {MAX_ERRORS}", p.suppressed);
        let note = Diagnostic::error(Some(p.file.clone()), SrcPos::NONE, message);
        p.diags.push(Diagnostic { severity: Severity::Note, ..note });
    }
    if p.diags.is_empty() {
        Ok(p.module)
    } else {
        Err(Diagnostics(p.diags))
    }
}

type PResult<T> = Result<T, ()>;

/// A defined name: its first value and how many consecutive results it names.
/// `first == NONE` marks the results of an op that failed to parse (uses of it
/// are silently rejected, avoiding cascades of errors).
#[derive(Copy, Clone)]
struct Binding {
    first: ValueId,
    count: u32,
}

struct Scope<'s> {
    isolated: bool,
    numbered: Vec<Option<Binding>>,
    named: FxHashMap<&'s [u8], Binding>,
}

/// A value reference as written: `%name` or `%name#k`.
#[derive(Copy, Clone)]
struct ValueRef<'s> {
    name: &'s [u8],
    result: Option<u32>,
    tok: Token,
}

struct Parser<'s, 'c> {
    ctx: &'c mut Context,
    lex: Lexer<'s>,
    cur: Token,
    src: &'s [u8],
    file: Arc<str>,
    line_offset: u32,
    module: Module,
    diags: Vec<Diagnostic>,
    /// Errors found past [`MAX_ERRORS`]: counted, not kept.
    suppressed: usize,
    scopes: Vec<Scope<'s>>,
    type_cache: FxHashMap<&'s [u8], Type>,
    attr_cache: FxHashMap<&'s [u8], Attribute>,
    op_name_cache: FxHashMap<&'s [u8], OpName>,
    /// Invalid quantized types already reported (see `parse_quant_type`).
    reported_types: FxHashSet<Type>,
    nesting: u32,
    release: Option<&'s dyn Fn(usize)>,
    next_release: usize,
}

/// A list of types as written in a signature.
type TypeList = SmallVec<[Type; 4]>;

/// One leaf of a dense literal: its text, token, and whether it is a float literal.
type DenseLeaf = (String, Token, bool);

/// What `dense<` holds: hex bytes, a nested list (where it starts, to read
/// it again, and its dims) or one splat leaf.
enum DenseBody<'s> {
    Hex(Vec<u8>),
    List { start: (Lexer<'s>, Token), dims: Vec<usize> },
    Splat(DenseLeaf),
}

/// Result names written before `=`: `%a, %b:2 = ...`.
type ResultNames<'s> = SmallVec<[(&'s [u8], u32, Token); 2]>;

impl<'s, 'c> Parser<'s, 'c> {
    // ---- tokens and errors ------------------------------------------------

    #[inline]
    fn advance(&mut self) {
        self.cur = self.lex.next();
    }

    #[inline]
    fn text(&self, t: Token) -> &'s [u8] {
        &self.src[t.start as usize..t.end as usize]
    }

    fn text_str(&self, t: Token) -> String {
        String::from_utf8_lossy(self.text(t)).into_owned()
    }

    fn pos_of(&self, t: Token) -> SrcPos {
        self.pos_at(t.line, t.line_start as usize, t.start as usize)
    }

    /// Columns are 1-based byte offsets in the line (O(1) however long the line
    /// is; the diagnostic renderer maps them to characters for the caret).
    fn pos_at(&self, line: u32, line_start: usize, offset: usize) -> SrcPos {
        let offset = offset.min(self.src.len());
        let line_start = line_start.min(offset);
        let col = u32::try_from(offset - line_start).unwrap_or(u32::MAX - 1) + 1;
        SrcPos { line: line + self.line_offset, col }
    }

    fn error_at(&mut self, pos: SrcPos, msg: impl Into<String>) {
        if self.diags.len() >= MAX_ERRORS {
            self.suppressed += 1;
            return;
        }
        self.diags.push(Diagnostic::error(Some(self.file.clone()), pos, msg));
    }

    fn error<T>(&mut self, t: Token, msg: impl Into<String>) -> PResult<T> {
        let pos = self.pos_of(t);
        self.error_at(pos, msg);
        Err(())
    }

    fn found(&self, t: Token) -> String {
        match t.kind {
            Tok::Eof => "end of input".into(),
            Tok::UnterminatedString => "an unterminated string".into(),
            _ => {
                let text = self.text_str(t);
                let short: String = text.chars().take(40).collect();
                format!("'{short}'")
            }
        }
    }

    fn unexpected<T>(&mut self, what: &str) -> PResult<T> {
        let t = self.cur;
        if t.kind == Tok::UnterminatedString {
            // Whatever was expected, the string is the problem.
            return self.error(t, UNTERMINATED_STRING);
        }
        let found = self.found(t);
        self.error(t, format!("expected {what}, found {found}"))
    }

    fn expect(&mut self, kind: Tok, what: &str) -> PResult<Token> {
        if self.cur.kind == kind {
            let t = self.cur;
            self.advance();
            Ok(t)
        } else {
            self.unexpected(what)
        }
    }

    fn eat(&mut self, kind: Tok) -> bool {
        if self.cur.kind == kind {
            self.advance();
            true
        } else {
            false
        }
    }

    fn is_keyword(&self, word: &[u8]) -> bool {
        self.cur.kind == Tok::BareId && self.text(self.cur) == word
    }

    fn enter(&mut self) -> PResult<()> {
        if self.nesting >= MAX_NESTING {
            let t = self.cur;
            return self.error(t, format!("nesting is deeper than {MAX_NESTING} levels"));
        }
        self.nesting += 1;
        Ok(())
    }

    fn leave(&mut self) {
        self.nesting -= 1;
    }

    // ---- structure --------------------------------------------------------

    fn parse_top(&mut self) {
        let body = self.module.body();
        self.scopes.push(Scope { isolated: true, numbered: Vec::new(), named: FxHashMap::default() });
        self.parse_ops_until_block_end(body, 0);
        self.scopes.pop();
        if self.cur.kind != Tok::Eof {
            let t = self.cur;
            let found = self.found(t);
            let _: PResult<()> = self.error(t, format!("unexpected {found} at top level"));
        }
        // A file holding exactly one `module` op is that module.
        let mut top = self.module.block_ops(body);
        if let (Some(only), None) = (top.next(), top.next()) {
            if self.module.op_name(only) == OpName::MODULE {
                self.module.detach_op(only);
                self.module.set_root(only);
            }
        }
    }

    /// Parses ops into `block` until `}`, a block label, or the end of input.
    fn parse_ops_until_block_end(&mut self, block: BlockId, depth: u32) {
        loop {
            match self.cur.kind {
                Tok::RBrace | Tok::Eof | Tok::CaretId => return,
                _ => {}
            }
            if self.cur.start as usize >= self.next_release {
                if let Some(release) = self.release {
                    // Keep the current line and some slack resident for diagnostics.
                    release(self.cur.line_start as usize - (1 << 20).min(self.cur.line_start as usize));
                }
                self.next_release = self.cur.start as usize + RELEASE_EVERY;
            }
            let stmt_start = self.cur.start;
            if self.parse_op(block).is_err() {
                // Past MAX_ERRORS errors are only counted, so the last
                // diagnostic can say how many were not shown.
                self.recover(depth, stmt_start);
            }
        }
    }

    /// Skips to the next statement at brace depth `depth` (or the end of the block).
    /// A failed statement that stopped on the first token of the next line (a
    /// missing signature, an undefined operand found after the types) has already
    /// reached that statement, so the first token is skipped only if the failed
    /// statement consumed nothing (which also guarantees progress).
    fn recover(&mut self, depth: u32, stmt_start: u32) {
        if self.cur.start == stmt_start {
            self.advance();
        }
        loop {
            let t = self.cur;
            match t.kind {
                Tok::Eof => return,
                Tok::RBrace if t.depth <= depth => return,
                _ if t.first_on_line && t.depth == depth && t.kind != Tok::RBrace => return,
                _ => self.advance(),
            }
        }
    }

    fn parse_op(&mut self, block: BlockId) -> PResult<()> {
        let mut names: ResultNames<'s> = SmallVec::new();
        if self.cur.kind == Tok::ValueId {
            loop {
                let t = self.expect(Tok::ValueId, "a result name")?;
                let text = self.text(t);
                if text.contains(&b'#') {
                    return self.error(t, "a result name cannot carry a '#' result number");
                }
                let mut count = 1u32;
                if self.eat(Tok::Colon) {
                    let n = self.expect(Tok::Integer, "the number of results")?;
                    count = match std::str::from_utf8(self.text(n)).ok().and_then(|s| s.parse::<u32>().ok()) {
                        Some(c) if (1..=65_536).contains(&c) => c,
                        _ => return self.error(n, "result count must be between 1 and 65536"),
                    };
                }
                names.push((&text[1..], count, t));
                if !self.eat(Tok::Comma) {
                    break;
                }
            }
            self.expect(Tok::Equal, "'=' after the result names")?;
        }
        let name_tok = self.cur;
        let result = match name_tok.kind {
            Tok::BareId => match self.text(name_tok) {
                b"module" | b"builtin.module" => self.parse_module_op(block, &names),
                b"func.func" => self.parse_func(block, &names),
                b"func.return" => self.parse_return(block, &names),
                b"func.call" => self.parse_call(block, &names),
                text => {
                    if !text.contains(&b'.') {
                        let found = self.found(name_tok);
                        return self.error(
                            name_tok,
                            format!("expected an op name like 'dialect.op', found {found}"),
                        );
                    }
                    let name = match self.op_name_cache.get(text) {
                        Some(&name) => name,
                        None => {
                            let name = self.ctx.op_name(&String::from_utf8_lossy(text));
                            self.op_name_cache.insert(text, name);
                            name
                        }
                    };
                    self.advance();
                    self.parse_generic(block, name, name_tok, &names)
                }
            },
            Tok::String => {
                let bytes = self.string_value(name_tok)?;
                let text = String::from_utf8_lossy(&bytes).into_owned();
                if !text.contains('.') || text.starts_with('.') {
                    return self.error(name_tok, format!("'{text}' is not an op name like 'dialect.op'"));
                }
                let name = self.ctx.op_name(&text);
                self.advance();
                self.parse_generic(block, name, name_tok, &names)
            }
            _ => self.unexpected("an op"),
        };
        if result.is_err() {
            self.poison_names(&names);
        }
        result
    }

    /// Binds the result names of an op that failed to parse to a poison marker.
    fn poison_names(&mut self, names: &ResultNames<'s>) {
        for &(name, count, _) in names {
            let b = Binding { first: ValueId::NONE, count };
            self.bind(name, b);
        }
    }

    fn define_results(&mut self, op: OpId, names: &ResultNames<'s>, name_tok: Token) -> PResult<()> {
        if names.is_empty() {
            return Ok(());
        }
        let declared: u32 = names.iter().map(|n| n.1).sum();
        let actual = self.module.num_results(op) as u32;
        if declared != actual {
            self.poison_names(names);
            return self.error(
                name_tok,
                format!("{declared} result name(s) given but the op has {actual} result(s)"),
            );
        }
        let mut next = 0usize;
        let mut result = Ok(());
        for &(name, count, tok) in names {
            let first = self.module.result(op, next);
            next += count as usize;
            if self.lookup_in_top_scope(name).is_some() {
                let shown = String::from_utf8_lossy(name).into_owned();
                result = self.error(tok, format!("redefinition of value %{shown}"));
                continue;
            }
            self.bind(name, Binding { first, count });
        }
        result
    }

    fn bind(&mut self, name: &'s [u8], b: Binding) {
        let Some(scope) = self.scopes.last_mut() else { return };
        if let Some(n) = numeric_name(name) {
            let n = n as usize;
            if n < scope.numbered.len() + 4096 + 4 * scope.numbered.len() {
                if scope.numbered.len() <= n {
                    scope.numbered.resize(n + 1, None);
                }
                scope.numbered[n] = Some(b);
                return;
            }
        }
        scope.named.insert(name, b);
    }

    fn lookup_in_scope(scope: &Scope<'s>, name: &[u8]) -> Option<Binding> {
        if let Some(n) = numeric_name(name) {
            if let Some(Some(b)) = scope.numbered.get(n as usize) {
                return Some(*b);
            }
        }
        scope.named.get(name).copied()
    }

    fn lookup_in_top_scope(&self, name: &[u8]) -> Option<Binding> {
        self.scopes.last().and_then(|s| Self::lookup_in_scope(s, name))
    }

    fn lookup(&self, name: &[u8]) -> Option<Binding> {
        for scope in self.scopes.iter().rev() {
            if let Some(b) = Self::lookup_in_scope(scope, name) {
                return Some(b);
            }
            if scope.isolated {
                break;
            }
        }
        None
    }

    fn parse_value_ref(&mut self) -> PResult<ValueRef<'s>> {
        let t = self.expect(Tok::ValueId, "a value like %0")?;
        let text = &self.text(t)[1..];
        match text.iter().position(|&b| b == b'#') {
            Some(hash) => {
                let digits = std::str::from_utf8(&text[hash + 1..]).ok().and_then(|s| s.parse::<u32>().ok());
                match digits {
                    Some(k) => Ok(ValueRef { name: &text[..hash], result: Some(k), tok: t }),
                    None => self.error(t, "result number is too large"),
                }
            }
            None => Ok(ValueRef { name: text, result: None, tok: t }),
        }
    }

    fn resolve(&mut self, r: ValueRef<'s>) -> PResult<ValueId> {
        let shown = || String::from_utf8_lossy(r.name).into_owned();
        let Some(b) = self.lookup(r.name) else {
            return self.error(r.tok, format!("use of undefined value %{}", shown()));
        };
        if b.first.is_none() {
            return Err(()); // the defining op already failed and was reported
        }
        match r.result {
            None if b.count == 1 => Ok(b.first),
            None => {
                let name = shown();
                self.error(r.tok, format!("%{name} names {} results; pick one with %{name}#N", b.count))
            }
            Some(k) if k < b.count => Ok(ValueId(b.first.0 + k)),
            Some(k) => self.error(
                r.tok,
                format!("result #{k} of %{} does not exist; it has {} result(s)", shown(), b.count),
            ),
        }
    }

    fn parse_operand_list(&mut self, close: Tok) -> PResult<SmallVec<[ValueRef<'s>; 4]>> {
        let mut refs = SmallVec::new();
        if self.cur.kind == close {
            return Ok(refs);
        }
        loop {
            refs.push(self.parse_value_ref()?);
            if !self.eat(Tok::Comma) {
                return Ok(refs);
            }
        }
    }

    /// Resolves operand references and checks them against the written types.
    fn resolve_operands(
        &mut self,
        refs: &[ValueRef<'s>],
        types: &[Type],
        op_tok: Token,
    ) -> PResult<SmallVec<[ValueId; 4]>> {
        if refs.len() != types.len() {
            return self.error(
                op_tok,
                format!(
                    "{} operand(s) but the type signature lists {} operand type(s)",
                    refs.len(),
                    types.len()
                ),
            );
        }
        let mut values = SmallVec::with_capacity(refs.len());
        for (i, (&r, &ty)) in refs.iter().zip(types).enumerate() {
            let v = self.resolve(r)?;
            let actual = self.module.value_type(v);
            if actual != ty {
                let shown = String::from_utf8_lossy(self.text(r.tok)).into_owned();
                let msg = format!(
                    "operand #{i} ({shown}) has type {} but the signature says {}",
                    super::type_to_string(self.ctx, actual),
                    super::type_to_string(self.ctx, ty)
                );
                return self.error(r.tok, msg);
            }
            values.push(v);
        }
        Ok(values)
    }

    fn parse_generic(
        &mut self,
        block: BlockId,
        name: OpName,
        name_tok: Token,
        names: &ResultNames<'s>,
    ) -> PResult<()> {
        self.expect(Tok::LParen, "'(' and the operand list")?;
        let refs = self.parse_operand_list(Tok::RParen)?;
        self.expect(Tok::RParen, "')' after the operands")?;
        // Regions are parsed into a carrier op, then moved into the real op,
        // which can only be created once its types have been read.
        let mut carriers: SmallVec<[OpId; 1]> = SmallVec::new();
        if self.cur.kind == Tok::LParen {
            self.advance();
            loop {
                let carrier = self.module.create_op(OperationState::new(OpName::MODULE).regions(1));
                carriers.push(carrier);
                let region = self.module.region(carrier, 0);
                let isolated = self.ctx.op_def(name).is_some_and(|d| d.has(Traits::ISOLATED_FROM_ABOVE));
                self.parse_region(region, isolated)?;
                if !self.eat(Tok::Comma) {
                    break;
                }
            }
            self.expect(Tok::RParen, "')' after the regions")?;
        }
        let attrs =
            if self.cur.kind == Tok::LBrace { self.parse_attr_dict()? } else { Attribute::EMPTY_DICT };
        self.expect(Tok::Colon, "':' and the op's type signature")?;
        let (inputs, results) = self.parse_signature()?;
        let operands = self.resolve_operands(&refs, &inputs, name_tok)?;
        let loc = self.parse_opt_loc()?;
        let mut state = OperationState::new(name).attrs(attrs).loc(loc).regions(carriers.len());
        state.operands = operands;
        state.result_types = results.into_iter().collect();
        state.pos = self.pos_of(name_tok);
        let op = self.module.create_op(state);
        for (i, &carrier) in carriers.iter().enumerate() {
            let from = self.module.region(carrier, 0);
            let to = self.module.region(op, i);
            self.module.move_region_blocks(from, to);
        }
        self.module.append_op(block, op);
        self.define_results(op, names, name_tok)
    }

    /// Parses `{ blocks }` into `region`. With `isolated`, outer names are hidden.
    fn parse_region(&mut self, region: RegionId, isolated: bool) -> PResult<()> {
        self.enter()?;
        let open = self.expect(Tok::LBrace, "'{' to open a region")?;
        let depth = open.depth + 1;
        self.scopes.push(Scope { isolated, numbered: Vec::new(), named: FxHashMap::default() });
        let result = self.parse_region_blocks(region, depth);
        self.scopes.pop();
        self.leave();
        result?;
        self.expect(Tok::RBrace, "'}' to close the region").map(|_| ())
    }

    fn parse_region_blocks(&mut self, region: RegionId, depth: u32) -> PResult<()> {
        if self.cur.kind == Tok::RBrace {
            return Ok(()); // an empty region has no blocks
        }
        let mut labels: FxHashMap<&'s [u8], Token> = FxHashMap::default();
        if self.cur.kind != Tok::CaretId {
            let block = self.module.append_block(region, &[]);
            self.parse_ops_until_block_end(block, depth);
        }
        while self.cur.kind == Tok::CaretId {
            let label = self.cur;
            self.advance();
            if let Some(prev) = labels.insert(self.text(label), label) {
                let shown = self.text_str(label);
                let prev_pos = self.pos_of(prev);
                let _: PResult<()> =
                    self.error(label, format!("block {shown} is already defined at line {}", prev_pos.line));
            }
            let block = self.module.append_block(region, &[]);
            if self.eat(Tok::LParen) {
                if self.cur.kind != Tok::RParen {
                    loop {
                        let arg = self.expect(Tok::ValueId, "a block argument like %arg0")?;
                        self.expect(Tok::Colon, "':' and the argument type")?;
                        let ty = self.parse_type()?;
                        let v = self.module.add_block_arg(block, ty);
                        let name = &self.text(arg)[1..];
                        if self.lookup_in_top_scope(name).is_some() {
                            let shown = self.text_str(arg);
                            let _: PResult<()> = self.error(arg, format!("redefinition of value {shown}"));
                        }
                        self.bind(name, Binding { first: v, count: 1 });
                        if !self.eat(Tok::Comma) {
                            break;
                        }
                    }
                }
                self.expect(Tok::RParen, "')' after the block arguments")?;
            }
            self.expect(Tok::Colon, "':' after the block label")?;
            self.parse_ops_until_block_end(block, depth);
        }
        if self.cur.kind != Tok::RBrace {
            return self.unexpected("'}' to close the region");
        }
        Ok(())
    }

    fn parse_module_op(&mut self, block: BlockId, names: &ResultNames<'s>) -> PResult<()> {
        let name_tok = self.cur;
        self.advance();
        if !names.is_empty() {
            return self.error(name_tok, "'module' has no results");
        }
        let mut entries: Vec<(Symbol, Attribute)> = Vec::new();
        let mut sym = None;
        if self.cur.kind == Tok::AtId {
            sym = Some(self.symbol_name(self.cur)?);
            self.advance();
        }
        if self.is_keyword(b"attributes") {
            self.advance();
            let dict = self.parse_attr_dict()?;
            entries.extend_from_slice(self.ctx.dict_entries(dict));
        }
        // As for functions, the written `@name` wins over a `sym_name` attribute.
        if let Some(sym) = sym {
            let a = self.ctx.string_attr(&sym);
            entries.push((self.ctx.symbol("sym_name"), a));
        }
        let attrs = self.ctx.intern_attr(AttrData::Dict(entries.into_boxed_slice()));
        let mut state = OperationState::new(OpName::MODULE).attrs(attrs).regions(1);
        state.pos = self.pos_of(name_tok);
        let op = self.module.create_op(state);
        let region = self.module.region(op, 0);
        self.module.append_op(block, op);
        self.enter()?;
        let open = self.expect(Tok::LBrace, "'{' to open the module body");
        let result = open.and_then(|open| {
            let body = self.module.append_block(region, &[]);
            self.scopes.push(Scope { isolated: true, numbered: Vec::new(), named: FxHashMap::default() });
            self.parse_ops_until_block_end(body, open.depth + 1);
            self.scopes.pop();
            self.expect(Tok::RBrace, "'}' to close the module").map(|_| ())
        });
        self.leave();
        result?;
        let loc = self.parse_opt_loc()?;
        self.module.set_op_loc(op, loc);
        Ok(())
    }

    fn parse_func(&mut self, block: BlockId, names: &ResultNames<'s>) -> PResult<()> {
        let name_tok = self.cur;
        self.advance();
        if !names.is_empty() {
            return self.error(name_tok, "'func.func' has no results");
        }
        let mut entries: Vec<(Symbol, Attribute)> = Vec::new();
        if self.is_keyword(b"private") || self.is_keyword(b"public") || self.is_keyword(b"nested") {
            let vis = self.text_str(self.cur);
            self.advance();
            let a = self.ctx.string_attr(&vis);
            entries.push((self.ctx.symbol("sym_visibility"), a));
        }
        if self.cur.kind != Tok::AtId {
            return self.unexpected("the function name like @main");
        }
        let sym = self.symbol_name(self.cur)?;
        self.advance();
        self.expect(Tok::LParen, "'(' and the function arguments")?;
        let mut args: Vec<(Option<Token>, Type)> = Vec::new();
        if self.cur.kind != Tok::RParen {
            loop {
                if self.cur.kind == Tok::ValueId {
                    let t = self.cur;
                    self.advance();
                    self.expect(Tok::Colon, "':' and the argument type")?;
                    let ty = self.parse_type()?;
                    args.push((Some(t), ty));
                } else {
                    let ty = self.parse_type()?;
                    args.push((None, ty));
                }
                if !self.eat(Tok::Comma) {
                    break;
                }
            }
        }
        self.expect(Tok::RParen, "')' after the function arguments")?;
        let results = if self.eat(Tok::Arrow) { self.parse_type_list_or_single()? } else { SmallVec::new() };
        let inputs: SmallVec<[Type; 4]> = args.iter().map(|a| a.1).collect();
        let fn_ty = self.ctx.function_type(&inputs, &results);
        if self.is_keyword(b"attributes") {
            self.advance();
            let dict = self.parse_attr_dict()?;
            entries.extend_from_slice(self.ctx.dict_entries(dict));
        }
        let sym_attr = self.ctx.string_attr(&sym);
        entries.push((self.ctx.symbol("sym_name"), sym_attr));
        let ty_attr = self.ctx.type_attr(fn_ty);
        entries.push((self.ctx.symbol("function_type"), ty_attr));
        let attrs = self.ctx.intern_attr(AttrData::Dict(entries.into_boxed_slice()));
        let mut state = OperationState::new(OpName::FUNC).attrs(attrs).regions(1);
        state.pos = self.pos_of(name_tok);
        let op = self.module.create_op(state);
        self.module.append_op(block, op);
        if self.cur.kind == Tok::LBrace {
            let named = args.iter().all(|a| a.0.is_some());
            if !named {
                let t = self.cur;
                return self.error(t, "a function with a body must name its arguments (%arg0: type)");
            }
            self.enter()?;
            let open = self.cur;
            self.advance();
            let region = self.module.region(op, 0);
            let entry = self.module.append_block(region, &inputs);
            self.scopes.push(Scope { isolated: true, numbered: Vec::new(), named: FxHashMap::default() });
            for (i, (t, _)) in args.iter().enumerate() {
                if let Some(t) = t {
                    let name = &self.text(*t)[1..];
                    if self.lookup_in_top_scope(name).is_some() {
                        let shown = self.text_str(*t);
                        let _: PResult<()> = self.error(*t, format!("redefinition of value {shown}"));
                    }
                    let v = self.module.block_args(entry)[i];
                    self.bind(name, Binding { first: v, count: 1 });
                }
            }
            self.parse_ops_until_block_end(entry, open.depth + 1);
            self.scopes.pop();
            self.leave();
            if self.cur.kind == Tok::CaretId {
                let t = self.cur;
                return self.error(t, "function bodies have exactly one block");
            }
            self.expect(Tok::RBrace, "'}' to close the function body")?;
        }
        let loc = self.parse_opt_loc()?;
        self.module.set_op_loc(op, loc);
        Ok(())
    }

    fn parse_return(&mut self, block: BlockId, names: &ResultNames<'s>) -> PResult<()> {
        let name_tok = self.cur;
        self.advance();
        if !names.is_empty() {
            return self.error(name_tok, "'func.return' has no results");
        }
        let mut refs: SmallVec<[ValueRef<'s>; 4]> = SmallVec::new();
        let mut types: SmallVec<[Type; 4]> = SmallVec::new();
        if self.cur.kind == Tok::ValueId {
            refs = self.parse_operand_list(Tok::Colon)?;
            self.expect(Tok::Colon, "':' and the returned types")?;
            loop {
                types.push(self.parse_type()?);
                if !self.eat(Tok::Comma) {
                    break;
                }
            }
        }
        let operands = self.resolve_operands(&refs, &types, name_tok)?;
        let loc = self.parse_opt_loc()?;
        let mut state = OperationState::new(OpName::RETURN).loc(loc);
        state.operands = operands;
        state.pos = self.pos_of(name_tok);
        let op = self.module.create_op(state);
        self.module.append_op(block, op);
        Ok(())
    }

    fn parse_call(&mut self, block: BlockId, names: &ResultNames<'s>) -> PResult<()> {
        let name_tok = self.cur;
        self.advance();
        if self.cur.kind != Tok::AtId {
            return self.unexpected("the callee like @f");
        }
        let callee = self.symbol_name(self.cur)?;
        self.advance();
        self.expect(Tok::LParen, "'(' and the call arguments")?;
        let refs = self.parse_operand_list(Tok::RParen)?;
        self.expect(Tok::RParen, "')' after the call arguments")?;
        let attrs =
            if self.cur.kind == Tok::LBrace { self.parse_attr_dict()? } else { Attribute::EMPTY_DICT };
        self.expect(Tok::Colon, "':' and the call's type signature")?;
        let (inputs, results) = self.parse_signature()?;
        let operands = self.resolve_operands(&refs, &inputs, name_tok)?;
        let loc = self.parse_opt_loc()?;
        let callee_attr = self.ctx.symbol_ref_attr(&callee);
        let attrs = self.ctx.dict_set(attrs, "callee", callee_attr);
        let mut state = OperationState::new(OpName::CALL).attrs(attrs).loc(loc);
        state.operands = operands;
        state.result_types = results.into_iter().collect();
        state.pos = self.pos_of(name_tok);
        let op = self.module.create_op(state);
        self.module.append_op(block, op);
        self.define_results(op, names, name_tok)
    }

    fn symbol_name(&mut self, t: Token) -> PResult<String> {
        let text = &self.text(t)[1..];
        if text.first() == Some(&b'"') {
            let inner = &text[1..text.len().saturating_sub(1)];
            let bytes = unescape(inner).or_else(|(_, msg)| self.error(t, msg))?;
            return String::from_utf8(bytes).or_else(|_| self.error(t, "symbol name is not valid UTF-8"));
        }
        Ok(String::from_utf8_lossy(text).into_owned())
    }

    // ---- types ------------------------------------------------------------

    /// `(t, t) -> t` / `(t) -> (t, t)` / `() -> ()`.
    fn parse_signature(&mut self) -> PResult<(TypeList, TypeList)> {
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
    fn parse_type_list_or_single(&mut self) -> PResult<SmallVec<[Type; 4]>> {
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

    fn parse_type(&mut self) -> PResult<Type> {
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
    fn cached_span(&self, t: Token, open: u8, close: u8) -> Option<usize> {
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

    fn parse_type_uncached(&mut self) -> PResult<Type> {
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
    fn raw_angle_body(&mut self) -> PResult<String> {
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
    fn parse_tensor_type(&mut self, tensor_tok: Token) -> PResult<Type> {
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
    fn parse_quant_type(&mut self, start: Token) -> PResult<Type> {
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
                    format!("invalid type {}: {problem}", super::type_to_string(self.ctx, ty)),
                );
            }
        }
        Ok(ty)
    }

    fn parse_scale_zp(&mut self) -> PResult<(f64, i64)> {
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

    fn parse_i64(&mut self, what: &str) -> PResult<i64> {
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

    // ---- attributes -------------------------------------------------------

    fn parse_attr_dict(&mut self) -> PResult<Attribute> {
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
    fn balanced_line_span(&self, t: Token) -> Option<usize> {
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

    fn parse_attr_dict_uncached(&mut self) -> PResult<Attribute> {
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

    fn parse_attr(&mut self) -> PResult<Attribute> {
        self.enter()?;
        let a = self.parse_attr_inner();
        self.leave();
        a
    }

    fn parse_attr_inner(&mut self) -> PResult<Attribute> {
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
    fn parse_number_literal(&mut self) -> PResult<(String, Token, bool)> {
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

    fn parse_number_attr(&mut self) -> PResult<Attribute> {
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
                        let shown = super::type_to_string(self.ctx, ty);
                        self.error(t, format!("integer {text} does not fit {shown}"))
                    }
                }
            }
            _ => {
                let shown = super::type_to_string(self.ctx, ty);
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
    fn parse_dense(&mut self) -> PResult<Attribute> {
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
                        let shown = super::type_to_string(self.ctx, elem);
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
                    let shown = super::type_to_string(self.ctx, ty);
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
                    let shown = super::type_to_string(self.ctx, elem);
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
    fn encode_dense_leaf(
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
                        let shown = super::type_to_string(self.ctx, elem);
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

    fn parse_dense_leaf(&mut self) -> PResult<DenseLeaf> {
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
    fn parse_dense_list(
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

    fn string_value(&mut self, t: Token) -> PResult<Vec<u8>> {
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

    fn parse_opt_loc(&mut self) -> PResult<Location> {
        if !self.is_keyword(b"loc") {
            return Ok(Location::UNKNOWN);
        }
        self.advance();
        self.expect(Tok::LParen, "'(' after 'loc'")?;
        let l = self.parse_loc_body()?;
        self.expect(Tok::RParen, "')' to close the location")?;
        Ok(l)
    }

    fn parse_loc_body(&mut self) -> PResult<Location> {
        self.enter()?;
        let r = self.parse_loc_body_inner();
        self.leave();
        r
    }

    fn parse_loc_body_inner(&mut self) -> PResult<Location> {
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

    fn parse_u32(&mut self, what: &str) -> PResult<u32> {
        let t = self.cur;
        let v = self.parse_i64(what)?;
        u32::try_from(v).or_else(|_| self.error(t, format!("{what} must be between 0 and {}", u32::MAX)))
    }
}

impl Module {
    /// Moves every block of `from` to the end of `to` (parser helper).
    pub(crate) fn move_region_blocks(&mut self, from: RegionId, to: RegionId) {
        let blocks: SmallVec<[BlockId; 2]> = self.blocks(from).collect();
        for b in blocks {
            self.unlink_block(b);
            self.link_block_at_end(to, b);
        }
    }
}

fn numeric_name(name: &[u8]) -> Option<u32> {
    if name.is_empty() || name.len() > 9 || !name.iter().all(|b| b.is_ascii_digit()) {
        return None;
    }
    if name.len() > 1 && name[0] == b'0' {
        return None; // `%01` and `%1` are different names
    }
    name.iter().try_fold(0u32, |acc, &b| acc.checked_mul(10)?.checked_add((b - b'0') as u32))
}

/// Builtin scalar type keywords: `f16 bf16 f32 f64 index none iN uN`.
fn scalar_type_data(text: &[u8]) -> Option<Result<TypeData, String>> {
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

fn parse_int_text(text: &[u8]) -> Option<i128> {
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
fn int_value_of(text: &str, kind: ElementKind) -> Option<i128> {
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
fn float_bits_of(text: &str, is_float: bool, kind: FloatKind) -> Result<u64, String> {
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

fn decode_hex(hex: &[u8]) -> Result<Vec<u8>, String> {
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
