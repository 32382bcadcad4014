//! The `.qir` printer: a [`Module`] to canonical text.
//!
//! Canonical means parse(print(m)) prints identically: values are numbered in
//! order per isolated-from-above op (`%0`, `%1`, function arguments `%arg0`),
//! attributes are sorted by key, floats use the shortest exact literal, dense
//! constants with more than [`INLINE_ELEMENTS`] elements are hex blobs. Printing
//! streams through a 64 KiB buffer and walks nested regions with an explicit
//! stack (never recursing over nesting depth). Repeated types and small attribute
//! dictionaries are rendered once and copied afterwards.

use crate::attributes::{AttrData, Attribute, DenseElements};
use crate::context::{Context, OpName};
use crate::dense::{decode_float_bits, decode_int, element_kind, static_num_elements, ElementKind};
use crate::dialect::Traits;
use crate::entity::{BlockId, EntityId, OpId, RegionId, ValueId};
use crate::float_text::write_float;
use crate::hash::FxHashMap;
use crate::location::{Location, LocationData};
use crate::module::{Module, ValueDef};
use crate::types::{QuantParams, Signedness, Type, TypeData};
use std::io::{self, Write};

/// Dense constants with at most this many elements print as literals; larger as hex.
pub const INLINE_ELEMENTS: u64 = 32;

const ARG_FLAG: u32 = 1 << 31;
const UNNAMED: u32 = u32::MAX;
const FLUSH_AT: usize = 64 * 1024;

/// Prints `module` to `out`.
pub fn print_module<W: Write + ?Sized>(ctx: &Context, module: &Module, out: &mut W) -> io::Result<()> {
    let mut p = Printer::new(ctx, module, out);
    p.print_from(module.root(), 0)?;
    p.flush()
}

/// Prints `module` to a string.
pub fn module_to_string(ctx: &Context, module: &Module) -> String {
    let mut buf = Vec::new();
    // invariant: writing into a Vec cannot fail.
    let _ = print_module(ctx, module, &mut buf);
    String::from_utf8_lossy(&buf).into_owned()
}

/// Prints one op (and its regions) to a string, numbering its values locally.
pub fn print_op(ctx: &Context, module: &Module, op: OpId) -> String {
    let mut buf = Vec::new();
    let mut p = Printer::new(ctx, module, &mut buf);
    let _ = p.print_from(op, 0);
    let _ = p.flush();
    drop(p);
    String::from_utf8_lossy(&buf).trim_end().to_string()
}

/// A type's text, e.g. `tensor<1x?x8xf32>`.
pub fn type_to_string(ctx: &Context, t: Type) -> String {
    let mut out = Vec::new();
    write_type(ctx, t, &mut out);
    String::from_utf8_lossy(&out).into_owned()
}

/// An attribute's text, e.g. `[1, 2]` or `dense<0.0> : tensor<4xf32>`.
pub fn attr_to_string(ctx: &Context, a: Attribute) -> String {
    let mut out = Vec::new();
    write_attr(ctx, a, &mut out);
    String::from_utf8_lossy(&out).into_owned()
}

/// A location's text, `loc("conv1")` (empty for the unknown location).
pub fn loc_to_string(ctx: &Context, l: Location) -> String {
    if l.is_unknown() {
        return String::new();
    }
    let mut out = b"loc(".to_vec();
    write_loc_body(ctx, l, &mut out);
    out.push(b')');
    String::from_utf8_lossy(&out).into_owned()
}

enum Frame {
    /// Print this op, then its following siblings.
    Ops(OpId),
    /// Open region `r`: (region, not the op's first, the op uses a custom form).
    Region(RegionId, bool, bool),
    /// Print a block's label (if `bool`) and its ops.
    Block(BlockId, bool),
    /// Close a region.
    RegionEnd,
    /// Finish an op after its regions; restores numbering for isolated ops.
    OpTail(OpId, Option<(u32, u32)>),
}

struct Printer<'a, W: Write + ?Sized> {
    ctx: &'a Context,
    module: &'a Module,
    out: &'a mut W,
    buf: Vec<u8>,
    names: Vec<u32>,
    next_value: u32,
    next_arg: u32,
    indent: usize,
    type_text: Vec<Option<Box<[u8]>>>,
    dict_text: FxHashMap<Attribute, Box<[u8]>>,
}

impl<'a, W: Write + ?Sized> Printer<'a, W> {
    fn new(ctx: &'a Context, module: &'a Module, out: &'a mut W) -> Self {
        Printer {
            ctx,
            module,
            out,
            buf: Vec::with_capacity(FLUSH_AT + 4096),
            names: vec![UNNAMED; module.values.len()],
            next_value: 0,
            next_arg: 0,
            indent: 0,
            type_text: Vec::new(),
            dict_text: FxHashMap::default(),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        self.out.write_all(&self.buf)?;
        self.buf.clear();
        self.out.flush()
    }

    #[inline]
    fn maybe_flush(&mut self) -> io::Result<()> {
        if self.buf.len() >= FLUSH_AT {
            self.out.write_all(&self.buf)?;
            self.buf.clear();
        }
        Ok(())
    }

    #[inline]
    fn push(&mut self, s: &str) {
        self.buf.extend_from_slice(s.as_bytes());
    }

    fn push_u32(&mut self, mut n: u32) {
        let mut digits = [0u8; 10];
        let mut i = digits.len();
        loop {
            i -= 1;
            digits[i] = b'0' + (n % 10) as u8;
            n /= 10;
            if n == 0 {
                break;
            }
        }
        self.buf.extend_from_slice(&digits[i..]);
    }

    fn push_indent(&mut self) {
        for _ in 0..self.indent {
            self.buf.extend_from_slice(b"  ");
        }
    }

    fn push_type(&mut self, t: Type) {
        let i = t.0 as usize;
        if i >= self.type_text.len() {
            self.type_text.resize(i + 1, None);
        }
        if self.type_text[i].is_none() {
            let mut text = Vec::new();
            write_type(self.ctx, t, &mut text);
            self.type_text[i] = Some(text.into_boxed_slice());
        }
        if let Some(text) = &self.type_text[i] {
            self.buf.extend_from_slice(text);
        }
    }

    fn push_types(&mut self, types: impl Iterator<Item = Type>) {
        for (i, t) in types.enumerate() {
            if i > 0 {
                self.push(", ");
            }
            self.push_type(t);
        }
    }

    fn name_value(&mut self, v: ValueId, arg: bool) {
        if let Some(slot) = self.names.get_mut(v.index()) {
            if arg {
                *slot = self.next_arg | ARG_FLAG;
                self.next_arg += 1;
            } else {
                *slot = self.next_value;
                self.next_value += 1;
            }
        }
    }

    fn push_value(&mut self, v: ValueId) {
        let (named, index) = match self.module.value_def(v) {
            ValueDef::Result { op, index } if self.module.num_results(op) > 1 => {
                (self.module.result(op, 0), Some(index))
            }
            _ => (v, None),
        };
        let n = self.names.get(named.index()).copied().unwrap_or(UNNAMED);
        if n == UNNAMED {
            self.push("%<undefined>");
            return;
        }
        if n & ARG_FLAG != 0 {
            self.push("%arg");
            self.push_u32(n & !ARG_FLAG);
        } else {
            self.push("%");
            self.push_u32(n);
        }
        if let Some(i) = index {
            self.push("#");
            self.push_u32(i);
        }
    }

    fn push_operands(&mut self, op: OpId) {
        for (i, v) in self.module.operands(op).enumerate() {
            if i > 0 {
                self.push(", ");
            }
            self.push_value(v);
        }
    }

    fn push_dict(&mut self, dict: Attribute, skip: &[&str]) {
        if skip.is_empty() {
            if let Some(text) = self.dict_text.get(&dict) {
                self.buf.extend_from_slice(text);
                return;
            }
        }
        let mut text = Vec::new();
        write_dict(self.ctx, dict, skip, &mut text);
        self.buf.extend_from_slice(&text);
        if skip.is_empty() && text.len() <= 256 {
            self.dict_text.insert(dict, text.into_boxed_slice());
        }
    }

    fn push_loc(&mut self, l: Location) {
        if !l.is_unknown() {
            self.push(" loc(");
            write_loc_body(self.ctx, l, &mut self.buf);
            self.push(")");
        }
    }

    fn is_isolated(&self, op: OpId) -> bool {
        let name = self.module.op_name(op);
        name == OpName::MODULE
            || name == OpName::FUNC
            || self.ctx.op_def(name).is_some_and(|d| d.has(Traits::ISOLATED_FROM_ABOVE))
    }

    /// Prints `op` (with its regions) at `indent`.
    fn print_from(&mut self, op: OpId, indent: usize) -> io::Result<()> {
        self.indent = indent;
        let mut stack: Vec<Frame> = vec![Frame::Ops(op)];
        let single = op;
        while let Some(frame) = stack.pop() {
            match frame {
                Frame::Ops(op) => {
                    // The op printing started from is printed alone, not its siblings.
                    let next = self.module.next_op(op);
                    if op != single && next.is_some() {
                        stack.push(Frame::Ops(next));
                    }
                    self.print_op_head(op, &mut stack);
                }
                Frame::Region(r, not_first, custom) => {
                    if not_first {
                        self.push(", ");
                    }
                    self.push("{\n");
                    self.indent += 1;
                    stack.push(Frame::RegionEnd);
                    let blocks: Vec<BlockId> = self.module.blocks(r).collect();
                    // An entry block without ops or arguments needs a label, or it
                    // would read back as nothing: an empty region, or (with more
                    // blocks) the next label would open the first block.
                    let entry_empty = blocks.first().is_some_and(|&b| {
                        self.module.first_op(b).is_none() && self.module.block_args(b).is_empty()
                    }) && !custom;
                    for (i, &b) in blocks.iter().enumerate().rev() {
                        let label = i > 0
                            || (!custom && !self.module.block_args(b).is_empty())
                            || (i == 0 && entry_empty);
                        stack.push(Frame::Block(b, label));
                    }
                    // A custom form (function) names its entry arguments in its header.
                    for (i, &b) in blocks.iter().enumerate() {
                        if custom && i == 0 {
                            continue;
                        }
                        for &a in self.module.block_args(b) {
                            self.name_value(a, true);
                        }
                    }
                }
                Frame::Block(b, label) => {
                    if label {
                        self.indent -= 1;
                        self.push_indent();
                        self.indent += 1;
                        let region = self.module.block_region(b);
                        let number = self.module.blocks(region).position(|x| x == b).unwrap_or(0);
                        self.push("^bb");
                        self.push_u32(number as u32);
                        let args = self.module.block_args(b);
                        if !args.is_empty() {
                            self.push("(");
                            for (i, &a) in args.iter().enumerate() {
                                if i > 0 {
                                    self.push(", ");
                                }
                                self.push_value(a);
                                self.push(": ");
                                self.push_type(self.module.value_type(a));
                            }
                            self.push(")");
                        }
                        self.push(":\n");
                    }
                    let first = self.module.first_op(b);
                    if first.is_some() {
                        stack.push(Frame::Ops(first));
                    }
                }
                Frame::RegionEnd => {
                    self.indent -= 1;
                    self.push_indent();
                    self.push("}");
                }
                Frame::OpTail(op, saved) => {
                    self.print_op_tail(op);
                    if let Some((v, a)) = saved {
                        self.next_value = v;
                        self.next_arg = a;
                    }
                }
            }
            self.maybe_flush()?;
        }
        Ok(())
    }

    fn print_op_head(&mut self, op: OpId, stack: &mut Vec<Frame>) {
        let m = self.module;
        let name = m.op_name(op);
        self.push_indent();
        let n = m.num_results(op);
        if n > 0 {
            let first = m.result(op, 0);
            if n == 1 {
                self.name_value(first, false);
                self.push_value(first);
            } else {
                self.name_value(first, false);
                let number = self.names[first.index()];
                self.push("%");
                self.push_u32(number);
                self.push(":");
                self.push_u32(n as u32);
            }
            self.push(" = ");
        }
        // Results belong to the enclosing scope: they are named before an
        // isolated op restarts the numbering for its regions.
        let saved = if self.is_isolated(op) {
            let s = (self.next_value, self.next_arg);
            self.next_value = 0;
            self.next_arg = 0;
            Some(s)
        } else {
            None
        };
        let custom = self.has_custom_form(op);
        let custom_body = match name {
            OpName::MODULE if custom => {
                self.push("module");
                // Only a UTF-8 string `sym_name` can be written as `@name`; any other
                // value stays in the attribute dictionary.
                let name = self.str_attr(op, "sym_name");
                if let Some(sym) = &name {
                    self.push(" @");
                    push_symbol(&mut self.buf, sym);
                }
                let skip: &[&str] = if name.is_some() { &["sym_name"] } else { &[] };
                if self.has_other_attrs(op, skip) {
                    self.push(" attributes ");
                    self.push_dict(m.op_attrs(op), skip);
                }
                true
            }
            OpName::FUNC if custom => {
                self.print_func_head(op);
                true
            }
            OpName::RETURN if custom => {
                self.push("func.return");
                if m.num_operands(op) > 0 {
                    self.push(" ");
                    self.push_operands(op);
                    self.push(" : ");
                    self.push_types(m.operands(op).map(|v| m.value_type(v)));
                }
                false
            }
            OpName::CALL if custom => {
                self.push("func.call @");
                if let Some(callee) = self.callee(op) {
                    push_symbol(&mut self.buf, &callee);
                }
                self.push("(");
                self.push_operands(op);
                self.push(")");
                if self.has_other_attrs(op, &["callee"]) {
                    self.push(" ");
                    self.push_dict(m.op_attrs(op), &["callee"]);
                }
                self.push(" : ");
                self.push_signature(op);
                false
            }
            _ => {
                let text = self.ctx.op_name_str(name);
                if is_bare_op_name(text) {
                    self.push(text);
                } else {
                    write_string(text.as_bytes(), &mut self.buf);
                }
                self.push("(");
                self.push_operands(op);
                self.push(")");
                if m.num_regions(op) > 0 {
                    self.push(" (");
                }
                false
            }
        };
        let num_regions = m.num_regions(op);
        let print_regions = if custom_body {
            // A declaration (empty function body) has no braces at all.
            num_regions == 1 && m.first_block(m.region(op, 0)).is_some()
        } else {
            num_regions > 0
        };
        stack.push(Frame::OpTail(op, saved));
        if print_regions {
            if custom_body {
                self.push(" ");
            }
            for (i, r) in m.regions(op).enumerate().rev() {
                stack.push(Frame::Region(r, i > 0, custom_body));
            }
        }
    }

    fn print_op_tail(&mut self, op: OpId) {
        let m = self.module;
        let custom = self.has_custom_form(op);
        if !custom {
            if m.num_regions(op) > 0 {
                self.push(")");
            }
            if m.op_attrs(op) != Attribute::EMPTY_DICT {
                self.push(" ");
                self.push_dict(m.op_attrs(op), &[]);
            }
            self.push(" : ");
            self.push_signature(op);
        }
        self.push_loc(m.op_loc(op));
        self.push("\n");
    }

    fn push_signature(&mut self, op: OpId) {
        let m = self.module;
        self.push("(");
        self.push_types(m.operands(op).map(|v| m.value_type(v)));
        self.push(") -> ");
        let n = m.num_results(op);
        let single =
            n == 1 && !matches!(self.ctx.type_data(m.value_type(m.result(op, 0))), TypeData::Function { .. });
        if single {
            self.push_type(m.value_type(m.result(op, 0)));
        } else {
            self.push("(");
            self.push_types(m.results(op).map(|v| m.value_type(v)));
            self.push(")");
        }
    }

    /// True if `op` prints in its custom form. An op with one of these names in a
    /// shape the custom form cannot show (results on a `func.return`, regions on
    /// a `func.call`, ...) prints in the generic form, its name quoted, so that
    /// nothing is dropped and the text always parses back.
    fn has_custom_form(&self, op: OpId) -> bool {
        let m = self.module;
        match m.op_name(op) {
            OpName::MODULE => {
                let mut blocks = if m.num_regions(op) == 1 { Some(m.blocks(m.region(op, 0))) } else { None };
                let single_block = blocks.as_mut().is_some_and(
                    |b| matches!((b.next(), b.next()), (Some(e), None) if m.block_args(e).is_empty()),
                );
                m.num_results(op) == 0 && m.num_operands(op) == 0 && single_block
            }
            OpName::FUNC => self.func_signature(op).is_some(),
            // Not last in its block, `func.return` without operands would take the
            // next op's `%name` for an operand.
            OpName::RETURN => {
                m.num_results(op) == 0
                    && m.num_regions(op) == 0
                    && m.op_attrs(op) == Attribute::EMPTY_DICT
                    && m.next_op(op).is_none()
            }
            OpName::CALL => m.num_regions(op) == 0 && self.callee(op).is_some(),
            _ => false,
        }
    }

    fn str_attr(&self, op: OpId, key: &str) -> Option<String> {
        self.module.op_attr(self.ctx, op, key).and_then(|a| self.ctx.attr_as_str(a)).map(str::to_string)
    }

    fn callee(&self, op: OpId) -> Option<String> {
        let a = self.module.op_attr(self.ctx, op, "callee")?;
        match self.ctx.attr_data(a) {
            AttrData::SymbolRef(s) => Some(self.ctx.symbol_str(*s).to_string()),
            _ => None,
        }
    }

    fn has_other_attrs(&self, op: OpId, known: &[&str]) -> bool {
        self.ctx
            .dict_entries(self.module.op_attrs(op))
            .iter()
            .any(|(k, _)| !known.contains(&self.ctx.symbol_str(*k)))
    }

    /// `(inputs, results)` if `op` is a well-formed function the custom form can print.
    fn func_signature(&self, op: OpId) -> Option<(Vec<Type>, Vec<Type>)> {
        let m = self.module;
        self.str_attr(op, "sym_name")?;
        let ft = m.op_attr(self.ctx, op, "function_type")?;
        let AttrData::Type(t) = self.ctx.attr_data(ft) else { return None };
        let TypeData::Function { inputs, results } = self.ctx.type_data(*t) else { return None };
        if m.num_regions(op) != 1 || m.num_results(op) != 0 || m.num_operands(op) != 0 {
            return None;
        }
        let region = m.region(op, 0);
        let blocks: Vec<BlockId> = m.blocks(region).collect();
        match blocks.as_slice() {
            [] => {}
            [entry] => {
                let args = m.block_args(*entry);
                if args.len() != inputs.len()
                    || args.iter().zip(inputs.iter()).any(|(&a, &t)| m.value_type(a) != t)
                {
                    return None;
                }
            }
            _ => return None,
        }
        // The custom form drops `sym_visibility` from the dictionary, so it must be
        // one of the keywords it can print.
        if let Some(vis) = m.op_attr(self.ctx, op, "sym_visibility") {
            if !matches!(self.ctx.attr_as_str(vis), Some("private" | "public" | "nested")) {
                return None;
            }
        }
        Some((inputs.to_vec(), results.to_vec()))
    }

    fn print_func_head(&mut self, op: OpId) {
        let m = self.module;
        let Some((inputs, results)) = self.func_signature(op) else { return };
        self.push("func.func ");
        if let Some(vis) = self.str_attr(op, "sym_visibility") {
            self.push(&vis);
            self.push(" ");
        }
        self.push("@");
        if let Some(sym) = self.str_attr(op, "sym_name") {
            push_symbol(&mut self.buf, &sym);
        }
        self.push("(");
        let region = m.region(op, 0);
        let entry = m.first_block(region);
        if entry.is_some() {
            for (i, &a) in m.block_args(entry).iter().enumerate() {
                if i > 0 {
                    self.push(", ");
                }
                self.name_value(a, true);
                self.push_value(a);
                self.push(": ");
                self.push_type(m.value_type(a));
            }
        } else {
            self.push_types(inputs.iter().copied());
        }
        self.push(")");
        if !results.is_empty() {
            self.push(" -> ");
            let single =
                results.len() == 1 && !matches!(self.ctx.type_data(results[0]), TypeData::Function { .. });
            if single {
                self.push_type(results[0]);
            } else {
                self.push("(");
                self.push_types(results.iter().copied());
                self.push(")");
            }
        }
        let known = ["sym_name", "function_type", "sym_visibility"];
        if self.has_other_attrs(op, &known) {
            self.push(" attributes ");
            self.push_dict(m.op_attrs(op), &known);
        }
    }
}

fn is_bare_op_name(text: &str) -> bool {
    let b = text.as_bytes();
    !b.is_empty()
        && (b[0].is_ascii_alphabetic() || b[0] == b'_')
        && b.iter().all(|&c| c.is_ascii_alphanumeric() || matches!(c, b'_' | b'$' | b'.'))
        && text.contains('.')
        && !matches!(text, "func.func" | "func.return" | "func.call" | "builtin.module")
}

fn is_bare_key(text: &str) -> bool {
    let b = text.as_bytes();
    !b.is_empty()
        && (b[0].is_ascii_alphabetic() || b[0] == b'_')
        && b.iter().all(|&c| c.is_ascii_alphanumeric() || matches!(c, b'_' | b'$' | b'.'))
}

fn push_symbol(out: &mut Vec<u8>, name: &str) {
    let b = name.as_bytes();
    let bare = !b.is_empty()
        && (b[0].is_ascii_alphabetic() || b[0] == b'_')
        && b.iter().all(|&c| c.is_ascii_alphanumeric() || matches!(c, b'_' | b'$' | b'.' | b'-'));
    if bare {
        out.extend_from_slice(b);
    } else {
        write_string(b, out);
    }
}

/// Writes `bytes` as a quoted string literal with escapes.
pub(crate) fn write_string(bytes: &[u8], out: &mut Vec<u8>) {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    let utf8 = std::str::from_utf8(bytes).is_ok();
    out.push(b'"');
    for &b in bytes {
        match b {
            b'"' => out.extend_from_slice(b"\\\""),
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\t' => out.extend_from_slice(b"\\t"),
            b'\r' => out.extend_from_slice(b"\\r"),
            0x20..=0x7E => out.push(b),
            0x80..=0xFF if utf8 => out.push(b),
            _ => {
                out.push(b'\\');
                out.push(HEX[(b >> 4) as usize]);
                out.push(HEX[(b & 15) as usize]);
            }
        }
    }
    out.push(b'"');
}

/// Writes a type's text.
pub(crate) fn write_type(ctx: &Context, t: Type, out: &mut Vec<u8>) {
    use std::io::Write as _;
    match ctx.type_data(t) {
        TypeData::Float(k) => out.extend_from_slice(k.keyword().as_bytes()),
        TypeData::Int(i) => {
            let _ =
                write!(out, "{}{}", if i.signedness == Signedness::Unsigned { 'u' } else { 'i' }, i.width);
        }
        TypeData::Index => out.extend_from_slice(b"index"),
        TypeData::None => out.extend_from_slice(b"none"),
        TypeData::Tensor { shape, element } => {
            out.extend_from_slice(b"tensor<");
            for &d in shape.iter() {
                if d == crate::types::DYNAMIC {
                    out.extend_from_slice(b"?x");
                } else {
                    let _ = write!(out, "{d}x");
                }
            }
            write_type(ctx, *element, out);
            out.push(b'>');
        }
        TypeData::Function { inputs, results } => {
            out.push(b'(');
            for (i, &t) in inputs.iter().enumerate() {
                if i > 0 {
                    out.extend_from_slice(b", ");
                }
                write_type(ctx, t, out);
            }
            out.extend_from_slice(b") -> ");
            if results.len() == 1 && !matches!(ctx.type_data(results[0]), TypeData::Function { .. }) {
                write_type(ctx, results[0], out);
            } else {
                out.push(b'(');
                for (i, &t) in results.iter().enumerate() {
                    if i > 0 {
                        out.extend_from_slice(b", ");
                    }
                    write_type(ctx, t, out);
                }
                out.push(b')');
            }
        }
        TypeData::Quant(q) => {
            let storage = if q.storage.signedness == Signedness::Unsigned { 'u' } else { 'i' };
            let _ = write!(out, "!qnn.uniform<{storage}{}", q.storage.width);
            if q.is_narrowed() {
                let _ = write!(out, "<{}:{}>", q.storage_min, q.storage_max);
            }
            let _ = write!(out, ":{}", q.expressed.keyword());
            match &q.params {
                QuantParams::PerTensor { scale, zero_point } => {
                    out.extend_from_slice(b", ");
                    write_scale(*scale, out);
                    let _ = write!(out, ":{zero_point}>");
                }
                QuantParams::PerAxis { axis, scales, zero_points } => {
                    let _ = write!(out, ":{axis}, {{");
                    // Mismatched lengths (invalid, caught by the verifier) print `?`
                    // for the missing half so messages show the type as it is.
                    for i in 0..scales.len().max(zero_points.len()) {
                        if i > 0 {
                            out.extend_from_slice(b", ");
                        }
                        match scales.get(i) {
                            Some(s) => write_scale(*s, out),
                            None => out.push(b'?'),
                        }
                        match zero_points.get(i) {
                            Some(z) => {
                                let _ = write!(out, ":{z}");
                            }
                            None => out.extend_from_slice(b":?"),
                        }
                    }
                    out.extend_from_slice(b"}>");
                }
            }
        }
        TypeData::Opaque { name, body } => {
            out.push(b'!');
            out.extend_from_slice(name.as_bytes());
            if !body.is_empty() {
                out.push(b'<');
                out.extend_from_slice(body.as_bytes());
                out.push(b'>');
            }
        }
    }
}

/// A quantization scale: shortest f64 literal; non-finite ones (invalid, but
/// printable in dumps) as `inf`, `-inf`, `nan`.
fn write_scale(scale: f64, out: &mut Vec<u8>) {
    use std::io::Write as _;
    if scale.is_finite() {
        let _ = write!(out, "{scale:?}");
    } else if scale.is_nan() {
        out.extend_from_slice(b"nan");
    } else if scale < 0.0 {
        out.extend_from_slice(b"-inf");
    } else {
        out.extend_from_slice(b"inf");
    }
}

fn write_dict(ctx: &Context, dict: Attribute, skip: &[&str], out: &mut Vec<u8>) {
    let mut stack = Vec::new();
    push_dict_pieces(ctx, dict, skip, &mut stack);
    write_pieces(ctx, stack, out);
}

/// A piece of attribute text still to write; attributes print from an explicit
/// stack of these so nesting depth never grows the call stack.
enum Piece {
    Attr(Attribute),
    Text(&'static [u8]),
    Key(crate::context::Symbol),
}

/// Pushes the pieces of `{k = v, ...}` (without keys in `skip`) in reverse order.
fn push_dict_pieces(ctx: &Context, dict: Attribute, skip: &[&str], stack: &mut Vec<Piece>) {
    stack.push(Piece::Text(b"}"));
    let entries: Vec<_> =
        ctx.dict_entries(dict).iter().filter(|(k, _)| !skip.contains(&ctx.symbol_str(*k))).collect();
    for (i, &&(k, v)) in entries.iter().enumerate().rev() {
        if !matches!(ctx.attr_data(v), AttrData::Unit) {
            stack.push(Piece::Attr(v));
            stack.push(Piece::Text(b" = "));
        }
        stack.push(Piece::Key(k));
        if i > 0 {
            stack.push(Piece::Text(b", "));
        }
    }
    stack.push(Piece::Text(b"{"));
}

fn write_pieces(ctx: &Context, mut stack: Vec<Piece>, out: &mut Vec<u8>) {
    while let Some(piece) = stack.pop() {
        match piece {
            Piece::Text(t) => out.extend_from_slice(t),
            Piece::Key(k) => {
                let key = ctx.symbol_str(k);
                if is_bare_key(key) {
                    out.extend_from_slice(key.as_bytes());
                } else {
                    write_string(key.as_bytes(), out);
                }
            }
            Piece::Attr(a) => match ctx.attr_data(a) {
                AttrData::Array(items) => {
                    stack.push(Piece::Text(b"]"));
                    for (i, &item) in items.iter().enumerate().rev() {
                        stack.push(Piece::Attr(item));
                        if i > 0 {
                            stack.push(Piece::Text(b", "));
                        }
                    }
                    stack.push(Piece::Text(b"["));
                }
                AttrData::Dict(_) => push_dict_pieces(ctx, a, &[], &mut stack),
                _ => write_leaf_attr(ctx, a, out),
            },
        }
    }
}

/// Writes an attribute's text.
pub(crate) fn write_attr(ctx: &Context, a: Attribute, out: &mut Vec<u8>) {
    write_pieces(ctx, vec![Piece::Attr(a)], out);
}

/// Writes an attribute that holds no other attributes.
fn write_leaf_attr(ctx: &Context, a: Attribute, out: &mut Vec<u8>) {
    use std::io::Write as _;
    match ctx.attr_data(a) {
        AttrData::Unit => out.extend_from_slice(b"unit"),
        AttrData::Bool(b) => out.extend_from_slice(if *b { b"true" } else { b"false" }),
        AttrData::Int { value, ty } => {
            let _ = write!(out, "{value}");
            if *ty != ctx.common().i64 {
                out.extend_from_slice(b" : ");
                write_type(ctx, *ty, out);
            }
        }
        AttrData::Float { bits, ty } => {
            let kind = match ctx.type_data(*ty) {
                TypeData::Float(k) => *k,
                _ => crate::types::FloatKind::F64,
            };
            let mut s = String::new();
            write_float(&mut s, *bits, kind);
            out.extend_from_slice(s.as_bytes());
            if *ty != ctx.common().f64 || s.starts_with("0x") {
                out.extend_from_slice(b" : ");
                write_type(ctx, *ty, out);
            }
        }
        AttrData::String(bytes) => write_string(bytes, out),
        AttrData::Array(_) | AttrData::Dict(_) => write_attr(ctx, a, out),
        AttrData::Type(t) => write_type(ctx, *t, out),
        AttrData::SymbolRef(s) => {
            out.push(b'@');
            push_symbol(out, ctx.symbol_str(*s));
        }
        AttrData::Dense(d) => write_dense(ctx, d, out),
    }
}

fn write_dense(ctx: &Context, d: &DenseElements, out: &mut Vec<u8>) {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    let elem = ctx.element_type(d.ty);
    let kind = element_kind(ctx, elem);
    let n = static_num_elements(ctx, d.ty).unwrap_or(0);
    let is_bool = matches!(ctx.type_data(elem), TypeData::Int(i) if i.width == 1 && i.signedness == Signedness::Signless);
    out.extend_from_slice(b"dense<");
    match kind {
        Some(kind) if d.splat || n <= INLINE_ELEMENTS && n > 0 => {
            let w = kind.bytes();
            let write_elem = |i: usize, out: &mut Vec<u8>| {
                let chunk = &d.bytes[i * w..(i + 1) * w];
                match kind {
                    ElementKind::Float(k) => {
                        let mut s = String::new();
                        write_float(&mut s, decode_float_bits(chunk, k), k);
                        out.extend_from_slice(s.as_bytes());
                    }
                    ElementKind::Int { signed, .. } => {
                        let v = decode_int(chunk, signed);
                        if is_bool {
                            out.extend_from_slice(if v != 0 { b"true" } else { b"false" });
                        } else {
                            let _ = std::io::Write::write_fmt(out, format_args!("{v}"));
                        }
                    }
                }
            };
            if d.splat {
                write_elem(0, out);
            } else {
                let shape = ctx.tensor_shape(d.ty).unwrap_or(&[]);
                write_nested(shape, n as usize, out, write_elem);
            }
        }
        _ => {
            out.extend_from_slice(b"\"0x");
            for &b in d.bytes.iter() {
                out.push(HEX[(b >> 4) as usize]);
                out.push(HEX[(b & 15) as usize]);
            }
            out.push(b'"');
        }
    }
    out.extend_from_slice(b"> : ");
    write_type(ctx, d.ty, out);
}

/// Writes `n` elements as nested lists following `shape` (rank 0: the bare element).
fn write_nested(shape: &[i64], n: usize, out: &mut Vec<u8>, write_elem: impl Fn(usize, &mut Vec<u8>)) {
    if shape.is_empty() {
        write_elem(0, out);
        return;
    }
    // spans[k] = elements in one list at depth k (the whole literal at depth 0).
    let mut spans = vec![1usize; shape.len()];
    let mut acc = 1usize;
    for k in (0..shape.len()).rev() {
        acc *= shape[k].max(0) as usize;
        spans[k] = acc;
    }
    for i in 0..n {
        for &s in &spans {
            if i % s == 0 {
                out.push(b'[');
            }
        }
        write_elem(i, out);
        for &s in spans.iter().rev() {
            if (i + 1) % s == 0 {
                out.push(b']');
            }
        }
        if i + 1 < n {
            out.extend_from_slice(b", ");
        }
    }
}

fn write_loc_body(ctx: &Context, l: Location, out: &mut Vec<u8>) {
    use std::io::Write as _;
    match ctx.loc_data(l) {
        LocationData::Unknown => out.extend_from_slice(b"unknown"),
        LocationData::FileLineCol { file, line, col } => {
            write_string(ctx.symbol_str(*file).as_bytes(), out);
            let _ = write!(out, ":{line}:{col}");
        }
        LocationData::Name { name, child } => {
            write_string(ctx.symbol_str(*name).as_bytes(), out);
            if !child.is_unknown() {
                out.push(b'(');
                write_loc_body(ctx, *child, out);
                out.push(b')');
            }
        }
        LocationData::Fused(parts) => {
            out.extend_from_slice(b"fused[");
            for (i, &p) in parts.iter().enumerate() {
                if i > 0 {
                    out.extend_from_slice(b", ");
                }
                write_loc_body(ctx, p, out);
            }
            out.push(b']');
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deep_attributes_print_without_recursion() {
        // Built through the API (the parser stops at MAX_NESTING); printed on a
        // 2 MiB test thread.
        let mut ctx = Context::new();
        let mut a = ctx.i64_attr(7);
        for i in 0..100_000 {
            a = if i % 2 == 0 { ctx.array_attr(&[a]) } else { ctx.dict_attr(&[("k", a)]) };
        }
        let text = attr_to_string(&ctx, a);
        assert_eq!(text.len(), 50_000 * 2 + 50_000 * "{k = }".len() + 1);
        assert!(text.starts_with("{k = [{k = ["), "{}", &text[..20]);
        assert!(text.contains("[7]"));
    }
}
