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

mod attributes;
use attributes::numeric_name;
mod types;

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
