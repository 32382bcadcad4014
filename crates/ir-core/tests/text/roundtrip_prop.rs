//! Property tests of the text format on random modules built through the
//! `Module` API (not from text), so the printer meets IR shapes nobody wrote by
//! hand:
//!
//! 1. print → parse → print gives the same text;
//! 2. parse(print(m)) is structurally equal to `m`: the same ops in the same
//!    pre-order with the same names, attribute and location handles, result
//!    types, operands (named by where they are defined) and region/block shape.
//!
//! Proptest generates plain descriptions ([`ModuleSpec`]); [`build_module`] turns
//! one into IR. Operands are drawn from the values that dominate the op (earlier
//! results in the block, block arguments, values of enclosing regions up to the
//! function); types, attributes and locations are drawn from every builtin kind,
//! with random bit patterns for floats (NaN payloads, subnormals, signed zeros)
//! and random bytes for strings.

use proptest::collection::vec;
use proptest::prelude::*;
use proptest::sample::Index;
use qopt_ir_core::{
    attr_to_string, loc_to_string, module_to_string, parse_module, type_to_string, AttrData, Attribute,
    BlockId, Context, DenseElements, FloatKind, IntType, Location, LocationData, Module, OpId, OpName,
    OperationState, QuantParams, QuantType, Signedness, SourceMap, Type, TypeData, ValueDef, ValueId,
    DYNAMIC,
};
use std::collections::HashMap;
use std::sync::Arc;

// ---- descriptions -----------------------------------------------------------

#[derive(Debug, Clone)]
enum TypeSpec {
    Float(FloatKind),
    Int(IntSpec),
    Index,
    None,
    /// Dims: `None` is dynamic.
    Tensor(Vec<Option<u8>>, Box<TypeSpec>),
    Quant(QuantSpec),
    Function(Vec<TypeSpec>, Vec<TypeSpec>),
    Opaque(usize),
}

#[derive(Debug, Clone, Copy)]
struct IntSpec {
    width: u8,
    unsigned: bool,
}

#[derive(Debug, Clone)]
struct QuantSpec {
    storage: IntSpec,
    /// Raw picks for a narrowed storage range (normalized when built).
    narrow: Option<(u64, u64)>,
    expressed: FloatKind,
    /// `None`: per tensor, with the first (scale, zero point).
    axis: Option<u8>,
    params: Vec<(f64, i64)>,
}

#[derive(Debug, Clone)]
enum AttrSpec {
    Unit,
    Bool(bool),
    /// Raw bits, truncated to the type (`None` type: `index`).
    Int(Option<IntSpec>, u64),
    Float(FloatKind, u64),
    Str(Vec<u8>),
    Type(TypeSpec),
    SymbolRef(String),
    Dense(DenseSpec),
    Array(Vec<AttrSpec>),
    Dict(Vec<(String, AttrSpec)>),
}

#[derive(Debug, Clone)]
struct DenseSpec {
    /// A scalar or quantized element type.
    element: TypeSpec,
    dims: Vec<u8>,
    splat: bool,
    /// Seeds the element values.
    seed: u64,
}

#[derive(Debug, Clone)]
enum LocSpec {
    Unknown,
    File(String, u32, u32),
    Name(String, Option<Box<LocSpec>>),
    Fused(Vec<LocSpec>),
}

#[derive(Debug, Clone)]
enum OpKind {
    /// `t.op0` .. `t.op5`.
    Generic(u8),
    /// A name that must be quoted.
    Quoted,
    /// `func.call` to a symbol.
    Call(String),
    /// `builtin.module`, `func.func`, `func.return` or `func.call` in any shape
    /// (random operands, results, regions), with the attributes their custom
    /// forms need if the flag is set: only some shapes print in custom form.
    Reserved(u8, bool),
}

#[derive(Debug, Clone)]
struct OpSpec {
    kind: OpKind,
    operands: Vec<Index>,
    results: Vec<TypeSpec>,
    attrs: Vec<(String, AttrSpec)>,
    loc: LocSpec,
    regions: Vec<Vec<BlockSpec>>,
}

#[derive(Debug, Clone)]
struct BlockSpec {
    args: Vec<TypeSpec>,
    ops: Vec<OpSpec>,
}

#[derive(Debug, Clone)]
struct FuncSpec {
    name: String,
    visibility: Option<&'static str>,
    inputs: Vec<TypeSpec>,
    /// `None`: a declaration, with these result types.
    body: Option<(Vec<OpSpec>, Vec<Index>, LocSpec)>,
    decl_results: Vec<TypeSpec>,
    attrs: Vec<(String, AttrSpec)>,
    loc: LocSpec,
}

#[derive(Debug, Clone)]
enum TopSpec {
    Func(FuncSpec),
    Op(OpSpec),
}

#[derive(Debug, Clone)]
struct ModuleSpec {
    items: Vec<TopSpec>,
    name: Option<String>,
    attrs: Vec<(String, AttrSpec)>,
    loc: LocSpec,
}

// ---- strategies ---------------------------------------------------------------

const OPAQUE: [(&str, &str); 4] =
    [("t.tok", ""), ("t.buf", "\"x\", 4"), ("t.n", "a<b<c>>, \"q>\""), ("accel.elem", "")];

fn float_kind() -> impl Strategy<Value = FloatKind> {
    prop_oneof![Just(FloatKind::F16), Just(FloatKind::BF16), Just(FloatKind::F32), Just(FloatKind::F64)]
}

fn int_spec() -> impl Strategy<Value = IntSpec> {
    prop_oneof![
        (1u8..=64, any::<bool>()).prop_map(|(width, unsigned)| IntSpec { width, unsigned }),
        prop::sample::select(vec![1u8, 8, 16, 32, 64]).prop_map(|width| IntSpec { width, unsigned: false }),
    ]
}

/// Scales: any finite value, and the non-finite ones the text can show
/// (`inf`, `-inf` and the canonical `nan`; other NaN payloads print as `nan`).
fn scale() -> impl Strategy<Value = f64> {
    use proptest::num::f64 as f;
    prop_oneof![
        6 => f::POSITIVE | f::NORMAL | f::SUBNORMAL | f::ZERO | f::NEGATIVE,
        2 => prop::sample::select(vec![0.5, 1.0, 0.0235, 1e-10, 3.0e38]),
        1 => prop::sample::select(vec![f64::INFINITY, f64::NEG_INFINITY, f64::NAN]),
    ]
}

fn quant_spec() -> impl Strategy<Value = QuantSpec> {
    (
        // Not 1: `IntType` reads an `i1` storage type as boolean (0..=1) while
        // `element_kind` reads its dense elements as signed (-1..=0), so a dense
        // `1` of such a type reads back as -1.
        (2u8..=32, any::<bool>()).prop_map(|(width, unsigned)| IntSpec { width, unsigned }),
        proptest::option::of((any::<u64>(), any::<u64>())),
        float_kind(),
        proptest::option::of(0u8..64),
        vec((scale(), any::<i64>()), 1..4),
    )
        .prop_map(|(storage, narrow, expressed, axis, params)| QuantSpec {
            storage,
            narrow,
            expressed,
            axis,
            params,
        })
}

/// Types that can be tensor elements (and dense elements, without opaque).
fn element_type(opaque: bool) -> BoxedStrategy<TypeSpec> {
    let base = prop_oneof![
        3 => float_kind().prop_map(TypeSpec::Float),
        3 => int_spec().prop_map(TypeSpec::Int),
        1 => Just(TypeSpec::Index),
        2 => quant_spec().prop_map(TypeSpec::Quant),
    ];
    if opaque {
        prop_oneof![9 => base, 1 => (0..OPAQUE.len()).prop_map(TypeSpec::Opaque)].boxed()
    } else {
        base.boxed()
    }
}

fn tensor_type() -> impl Strategy<Value = TypeSpec> {
    (vec(proptest::option::weighted(0.8, 0u8..6), 0..=5), element_type(true))
        .prop_map(|(dims, element)| TypeSpec::Tensor(dims, Box::new(element)))
}

/// Any type: the pool op results, block arguments and type attributes draw from.
fn type_spec() -> BoxedStrategy<TypeSpec> {
    let simple = prop_oneof![
        6 => tensor_type(),
        4 => element_type(true),
        1 => Just(TypeSpec::None),
    ];
    simple
        .boxed()
        .prop_recursive(2, 8, 3, |inner| {
            prop_oneof![
                4 => inner.clone(),
                1 => (vec(inner.clone(), 0..3), vec(inner, 0..3)).prop_map(|(i, r)| TypeSpec::Function(i, r)),
            ]
        })
        .boxed()
}

/// Random bits, plus the patterns that matter for floats.
fn float_bits() -> impl Strategy<Value = u64> {
    prop_oneof![
        4 => any::<u64>(),
        1 => prop::sample::select(vec![
            0u64,
            1 << 63,
            1,
            0x7FF8_0000_0000_0000,
            0xFFF8_0000_0000_0000,
            0x7FF0_0000_0000_0001,
            0x7FF0_0000_0000_0000,
            0x7FC0_0001,
            0x7FC0_0000,
            0xFF80_0000,
            0x7E00,
            0x7FC0,
            0xFC01,
            0x0001,
            0x8000,
        ]),
    ]
}

/// Text with escapes, quotes, non-ASCII and control characters.
fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => prop::sample::select(vec!["a", "b.c", "_x$1", "quoted key", "", "ключ", "t\"q\\", "n\nl", "9lives", "x-y"])
            .prop_map(String::from),
        1 => vec(any::<char>(), 0..6).prop_map(String::from_iter),
    ]
}

fn bytes() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![vec(any::<u8>(), 0..12), text().prop_map(String::into_bytes)]
}

fn dense_spec() -> impl Strategy<Value = DenseSpec> {
    // Up to 5 * 5 * 5 elements: both inline literals and hex blobs (over 32).
    (element_type(false), vec(0u8..6, 0..=3), prop::bool::weighted(0.2), any::<u64>())
        .prop_map(|(element, dims, splat, seed)| DenseSpec { element, dims, splat, seed })
}

fn attr_spec() -> BoxedStrategy<AttrSpec> {
    let leaf = prop_oneof![
        1 => Just(AttrSpec::Unit),
        1 => any::<bool>().prop_map(AttrSpec::Bool),
        3 => (proptest::option::weighted(0.9, int_spec()), any::<u64>()).prop_map(|(t, v)| AttrSpec::Int(t, v)),
        3 => (float_kind(), float_bits()).prop_map(|(k, b)| AttrSpec::Float(k, b)),
        2 => bytes().prop_map(AttrSpec::Str),
        2 => type_spec().prop_map(AttrSpec::Type),
        1 => text().prop_map(AttrSpec::SymbolRef),
        2 => dense_spec().prop_map(AttrSpec::Dense),
    ];
    leaf.boxed()
        .prop_recursive(3, 16, 4, |inner| {
            prop_oneof![
                vec(inner.clone(), 0..4).prop_map(AttrSpec::Array),
                vec((text(), inner), 0..4).prop_map(AttrSpec::Dict),
            ]
        })
        .boxed()
}

fn attr_dict() -> impl Strategy<Value = Vec<(String, AttrSpec)>> {
    vec((text(), attr_spec()), 0..4)
}

fn loc_spec() -> impl Strategy<Value = LocSpec> {
    let leaf = prop_oneof![
        3 => Just(LocSpec::Unknown),
        1 => (text(), any::<u32>(), any::<u32>()).prop_map(|(f, l, c)| LocSpec::File(f, l, c)),
        1 => text().prop_map(|n| LocSpec::Name(n, None)),
    ];
    leaf.prop_recursive(2, 6, 3, |inner| {
        prop_oneof![
            (text(), inner.clone()).prop_map(|(n, c)| LocSpec::Name(n, Some(Box::new(c)))),
            vec(inner, 0..4).prop_map(LocSpec::Fused),
        ]
    })
}

fn op_kind() -> impl Strategy<Value = OpKind> {
    prop_oneof![
        12 => (0u8..6).prop_map(OpKind::Generic),
        1 => Just(OpKind::Quoted),
        1 => text().prop_map(OpKind::Call),
        2 => (0u8..4, any::<bool>()).prop_map(|(k, required)| OpKind::Reserved(k, required)),
    ]
}

fn op_spec() -> BoxedStrategy<OpSpec> {
    let fields = || (op_kind(), vec(any::<Index>(), 0..4), vec(type_spec(), 0..=3), attr_dict(), loc_spec());
    let leaf = fields().prop_map(|(kind, operands, results, attrs, loc)| OpSpec {
        kind,
        operands,
        results,
        attrs,
        loc,
        regions: Vec::new(),
    });
    leaf.boxed()
        .prop_recursive(2, 12, 3, move |inner| {
            let block =
                (vec(type_spec(), 0..3), vec(inner, 0..3)).prop_map(|(args, ops)| BlockSpec { args, ops });
            (fields(), vec(vec(block, 0..3), 1..3)).prop_map(
                |((kind, operands, results, attrs, loc), regions)| OpSpec {
                    kind,
                    operands,
                    results,
                    attrs,
                    loc,
                    regions,
                },
            )
        })
        .boxed()
}

fn func_spec() -> impl Strategy<Value = FuncSpec> {
    let body = proptest::option::weighted(0.8, (vec(op_spec(), 0..6), vec(any::<Index>(), 0..3), loc_spec()));
    (
        text(),
        prop::sample::select(vec![None, Some("private"), Some("public"), Some("nested")]),
        vec(type_spec(), 0..4),
        body,
        vec(type_spec(), 0..3),
        attr_dict(),
        loc_spec(),
    )
        .prop_map(|(name, visibility, inputs, body, decl_results, attrs, loc)| FuncSpec {
            name,
            visibility,
            inputs,
            body,
            decl_results,
            attrs,
            loc,
        })
}

fn module_spec() -> impl Strategy<Value = ModuleSpec> {
    let item = prop_oneof![4 => func_spec().prop_map(TopSpec::Func), 1 => op_spec().prop_map(TopSpec::Op)];
    (vec(item, 0..5), proptest::option::weighted(0.3, text()), vec((text(), attr_spec()), 0..3), loc_spec())
        .prop_map(|(items, name, attrs, loc)| ModuleSpec { items, name, attrs, loc })
}

// ---- building IR from a description -----------------------------------------

fn int_type(s: IntSpec) -> IntType {
    IntType {
        width: s.width,
        signedness: if s.unsigned { Signedness::Unsigned } else { Signedness::Signless },
    }
}

/// The low `width` bits of `raw` as a value of the type (sign-extended if
/// signless, except `i1`, the boolean type, which holds 0 and 1).
fn int_value(t: IntType, raw: u64) -> i128 {
    let w = t.width as u32;
    let low = if w == 64 { raw } else { raw & ((1u64 << w) - 1) };
    match t.signedness {
        Signedness::Signless if w > 1 => ((low << (64 - w)) as i64 >> (64 - w)) as i128,
        _ => low as i128,
    }
}

fn build_type(ctx: &mut Context, t: &TypeSpec) -> Type {
    match t {
        TypeSpec::Float(k) => ctx.float_type(*k),
        TypeSpec::Int(i) => ctx.intern_type(TypeData::Int(int_type(*i))),
        TypeSpec::Index => ctx.intern_type(TypeData::Index),
        TypeSpec::None => ctx.intern_type(TypeData::None),
        TypeSpec::Tensor(dims, element) => {
            let shape: Vec<i64> = dims.iter().map(|d| d.map_or(DYNAMIC, i64::from)).collect();
            let element = build_type(ctx, element);
            ctx.tensor_type(&shape, element)
        }
        TypeSpec::Quant(q) => {
            let storage = int_type(q.storage);
            let (min, max) = (storage.min_value(), storage.max_value());
            let (storage_min, storage_max) = match q.narrow {
                None => (min, max),
                Some((a, b)) => {
                    let span = (max - min + 1) as u128;
                    let a = min + (a as u128 % span) as i128;
                    let b = min + (b as u128 % span) as i128;
                    (a.min(b), a.max(b))
                }
            };
            // Zero points inside the storage range: the parser refuses a
            // structurally invalid quantized type where it is written.
            let span = (storage_max - storage_min + 1) as u128;
            let zero_point = |raw: i64| (storage_min + (raw as u64 as u128 % span) as i128) as i64;
            let params = match q.axis {
                None => {
                    QuantParams::PerTensor { scale: q.params[0].0, zero_point: zero_point(q.params[0].1) }
                }
                Some(axis) => QuantParams::PerAxis {
                    axis: axis as u32,
                    scales: q.params.iter().map(|p| p.0).collect(),
                    zero_points: q.params.iter().map(|p| zero_point(p.1)).collect(),
                },
            };
            ctx.quant_type(QuantType {
                storage,
                storage_min: storage_min as i64,
                storage_max: storage_max as i64,
                expressed: q.expressed,
                params,
            })
        }
        TypeSpec::Function(inputs, results) => {
            let inputs: Vec<Type> = inputs.iter().map(|t| build_type(ctx, t)).collect();
            let results: Vec<Type> = results.iter().map(|t| build_type(ctx, t)).collect();
            ctx.function_type(&inputs, &results)
        }
        TypeSpec::Opaque(i) => {
            let (name, body) = OPAQUE[*i];
            ctx.intern_type(TypeData::Opaque { name: name.into(), body: body.into() })
        }
    }
}

/// xorshift64*, for dense element values.
fn next_random(state: &mut u64) -> u64 {
    *state ^= *state >> 12;
    *state ^= *state << 25;
    *state ^= *state >> 27;
    state.wrapping_mul(0x2545_F491_4F6C_DD1D)
}

fn build_dense(ctx: &mut Context, d: &DenseSpec) -> Attribute {
    let element = build_type(ctx, &d.element);
    let shape: Vec<i64> = d.dims.iter().map(|&x| i64::from(x)).collect();
    let ty = ctx.tensor_type(&shape, element);
    let n: usize = shape.iter().product::<i64>() as usize;
    let count = if d.splat { 1 } else { n };
    let mut state = d.seed | 1;
    let mut bytes = Vec::new();
    for _ in 0..count {
        let raw = next_random(&mut state);
        match ctx.type_data(element).clone() {
            TypeData::Float(k) => {
                // Mostly random bits (NaN payloads included), sometimes specials.
                let bits = match raw % 8 {
                    0 => [0, 1 << (k.bits() - 1), 1, qopt_ir_core::f64_to_bits(f64::NAN, k)]
                        [(raw >> 3) as usize % 4],
                    _ => raw >> 3,
                };
                let width = k.bits();
                let bits = if width == 64 { bits } else { bits & ((1u64 << width) - 1) };
                bytes.extend_from_slice(&bits.to_le_bytes()[..width as usize / 8]);
            }
            data => {
                let (t, storage_bytes) = match &data {
                    TypeData::Int(t) => (*t, ctx.element_storage_bytes(element)),
                    TypeData::Quant(q) => (q.storage, ctx.element_storage_bytes(element)),
                    _ => (IntType { width: 64, signedness: Signedness::Signless }, Some(8)),
                };
                let v = match &data {
                    // Stored values of a quantized type stay inside its (maybe
                    // narrowed) storage range, which the parser checks.
                    TypeData::Quant(q) => {
                        let span = (q.storage_max as i128 - q.storage_min as i128 + 1) as u128;
                        q.storage_min as i128 + (raw as u128 % span) as i128
                    }
                    _ => int_value(t, raw),
                };
                bytes.extend_from_slice(&v.to_le_bytes()[..storage_bytes.expect("dense element width")]);
            }
        }
    }
    let dense = DenseElements::from_bytes(ctx, ty, bytes).expect("well-formed dense elements");
    ctx.dense_attr(dense)
}

fn build_attr(ctx: &mut Context, a: &AttrSpec) -> Attribute {
    match a {
        AttrSpec::Unit => ctx.unit_attr(),
        AttrSpec::Bool(b) => ctx.bool_attr(*b),
        AttrSpec::Int(spec, raw) => {
            let (t, ty) = match spec {
                Some(s) => (int_type(*s), ctx.intern_type(TypeData::Int(int_type(*s)))),
                None => (
                    IntType { width: 64, signedness: Signedness::Signless },
                    ctx.intern_type(TypeData::Index),
                ),
            };
            ctx.int_attr(int_value(t, *raw), ty)
        }
        AttrSpec::Float(k, bits) => {
            let ty = ctx.float_type(*k);
            let bits = if k.bits() == 64 { *bits } else { bits & ((1u64 << k.bits()) - 1) };
            ctx.intern_attr(AttrData::Float { bits, ty })
        }
        AttrSpec::Str(b) => ctx.intern_attr(AttrData::String(b.clone().into())),
        AttrSpec::Type(t) => {
            let t = build_type(ctx, t);
            ctx.type_attr(t)
        }
        AttrSpec::SymbolRef(s) => ctx.symbol_ref_attr(s),
        AttrSpec::Dense(d) => build_dense(ctx, d),
        AttrSpec::Array(items) => {
            let items: Vec<Attribute> = items.iter().map(|i| build_attr(ctx, i)).collect();
            ctx.array_attr(&items)
        }
        AttrSpec::Dict(entries) => build_dict(ctx, entries, &[]),
    }
}

/// A dictionary of `entries` without the keys in `reserved`.
fn build_dict(ctx: &mut Context, entries: &[(String, AttrSpec)], reserved: &[&str]) -> Attribute {
    let mut dict = Attribute::EMPTY_DICT;
    for (k, v) in entries.iter().filter(|(k, _)| !reserved.contains(&k.as_str())) {
        let v = build_attr(ctx, v);
        dict = ctx.dict_set(dict, k, v);
    }
    dict
}

fn build_loc(ctx: &mut Context, l: &LocSpec) -> Location {
    match l {
        LocSpec::Unknown => Location::UNKNOWN,
        LocSpec::File(f, line, col) => ctx.file_loc(f, *line, *col),
        LocSpec::Name(n, child) => {
            let child = child.as_ref().map_or(Location::UNKNOWN, |c| build_loc(ctx, c));
            let name = ctx.symbol(n);
            ctx.intern_loc(LocationData::Name { name, child })
        }
        LocSpec::Fused(parts) => {
            let parts: Vec<Location> = parts.iter().map(|p| build_loc(ctx, p)).collect();
            ctx.fused_loc(&parts)
        }
    }
}

fn pick(visible: &[ValueId], picks: &[Index]) -> Vec<ValueId> {
    if visible.is_empty() {
        return Vec::new();
    }
    picks.iter().map(|i| visible[i.index(visible.len())]).collect()
}

/// Appends the op described by `spec` to `block`; `visible` holds the values
/// that dominate it and receives its results.
fn build_op(ctx: &mut Context, m: &mut Module, block: BlockId, spec: &OpSpec, visible: &mut Vec<ValueId>) {
    // `module` and `func.func` with their attributes also get the shape their
    // custom forms need (no operands or results, one region of at most one block).
    let custom_shape = matches!(spec.kind, OpKind::Reserved(0 | 1, true));
    let shaped: Vec<Vec<BlockSpec>>;
    let (operands, results, regions) = if custom_shape {
        let module = matches!(spec.kind, OpKind::Reserved(0, _));
        let shape = |b: &BlockSpec| BlockSpec {
            args: if module { Vec::new() } else { b.args.clone() },
            ops: b.ops.clone(),
        };
        shaped =
            spec.regions.first().map(|r| vec![r.iter().take(1).map(shape).collect()]).unwrap_or_default();
        (Vec::new(), Vec::new(), shaped.as_slice())
    } else {
        let results: Vec<Type> = spec.results.iter().map(|t| build_type(ctx, t)).collect();
        (pick(visible, &spec.operands), results, spec.regions.as_slice())
    };
    let mut attrs = build_dict(ctx, &spec.attrs, &[]);
    // A lone `module` at the top level would read back as the module itself.
    let top_level = block == m.body();
    let name = match &spec.kind {
        OpKind::Generic(k) => ctx.op_name(&format!("t.op{k}")),
        OpKind::Quoted => ctx.op_name("t.quoted op"),
        OpKind::Call(callee) => {
            let callee = ctx.symbol_ref_attr(callee);
            attrs = ctx.dict_set(attrs, "callee", callee);
            return build_plain_op(
                ctx,
                m,
                block,
                spec,
                OpName::CALL,
                &operands,
                &results,
                attrs,
                &[],
                visible,
            );
        }
        OpKind::Reserved(0, _) if top_level => ctx.op_name("t.op0"),
        OpKind::Reserved(k, required) => {
            let name = [OpName::MODULE, OpName::FUNC, OpName::RETURN, OpName::CALL][*k as usize % 4];
            if *required && name == OpName::FUNC {
                // Inputs that match the entry block, so some shapes print as `func.func`.
                let inputs: Vec<Type> = regions
                    .first()
                    .and_then(|blocks| blocks.first())
                    .map(|b| b.args.iter().map(|t| build_type(ctx, t)).collect())
                    .unwrap_or_default();
                let fn_type = ctx.function_type(&inputs, &results);
                let fn_type = ctx.type_attr(fn_type);
                let sym = ctx.string_attr("reserved");
                attrs = ctx.dict_set(attrs, "function_type", fn_type);
                attrs = ctx.dict_set(attrs, "sym_name", sym);
            } else if *required && name == OpName::CALL {
                let callee = ctx.symbol_ref_attr("reserved");
                attrs = ctx.dict_set(attrs, "callee", callee);
            }
            name
        }
    };
    build_plain_op(ctx, m, block, spec, name, &operands, &results, attrs, regions, visible);
}

/// Creates the op and its regions; `module` and `func.func` regions see no outer values.
#[allow(clippy::too_many_arguments)] // reason: one call site per op kind, all fields needed
fn build_plain_op(
    ctx: &mut Context,
    m: &mut Module,
    block: BlockId,
    spec: &OpSpec,
    name: OpName,
    operands: &[ValueId],
    results: &[Type],
    attrs: Attribute,
    regions: &[Vec<BlockSpec>],
    visible: &mut Vec<ValueId>,
) {
    let loc = build_loc(ctx, &spec.loc);
    let state = OperationState::new(name)
        .operands(operands)
        .results(results)
        .attrs(attrs)
        .loc(loc)
        .regions(regions.len());
    let op = m.create_op(state);
    m.append_op(block, op);
    for (i, blocks) in regions.iter().enumerate() {
        let region = m.region(op, i);
        for b in blocks {
            let args: Vec<Type> = b.args.iter().map(|t| build_type(ctx, t)).collect();
            let inner_block = m.append_block(region, &args);
            let isolated = name == OpName::MODULE || name == OpName::FUNC;
            let mut inner = if isolated { Vec::new() } else { visible.clone() };
            inner.extend_from_slice(m.block_args(inner_block));
            for o in &b.ops {
                build_op(ctx, m, inner_block, o, &mut inner);
            }
        }
    }
    visible.extend(m.results(op));
}

fn build_func(ctx: &mut Context, m: &mut Module, index: usize, f: &FuncSpec) {
    let inputs: Vec<Type> = f.inputs.iter().map(|t| build_type(ctx, t)).collect();
    let loc = build_loc(ctx, &f.loc);
    let op = m.create_op(OperationState::new(OpName::FUNC).regions(1).loc(loc));
    let body = m.body();
    m.append_op(body, op);
    let results: Vec<Type> = match &f.body {
        Some((ops, returned, ret_loc)) => {
            let region = m.region(op, 0);
            let entry = m.append_block(region, &inputs);
            let mut visible = m.block_args(entry).to_vec();
            for o in ops {
                build_op(ctx, m, entry, o, &mut visible);
            }
            let values = pick(&visible, returned);
            let ret_loc = build_loc(ctx, ret_loc);
            let ret = m.create_op(OperationState::new(OpName::RETURN).operands(&values).loc(ret_loc));
            m.append_op(entry, ret);
            values.iter().map(|&v| m.value_type(v)).collect()
        }
        None => f.decl_results.iter().map(|t| build_type(ctx, t)).collect(),
    };
    let mut attrs = build_dict(ctx, &f.attrs, &["sym_name", "function_type", "sym_visibility"]);
    // The index keeps symbol names unique.
    let name = ctx.string_attr(&format!("{}{index}", f.name));
    attrs = ctx.dict_set(attrs, "sym_name", name);
    let fn_type = ctx.function_type(&inputs, &results);
    let fn_type = ctx.type_attr(fn_type);
    attrs = ctx.dict_set(attrs, "function_type", fn_type);
    if let Some(v) = f.visibility {
        let v = ctx.string_attr(v);
        attrs = ctx.dict_set(attrs, "sym_visibility", v);
    }
    m.set_op_attrs(op, attrs);
}

fn build_module(ctx: &mut Context, spec: &ModuleSpec) -> Module {
    let mut m = Module::new();
    let body = m.body();
    let mut top_values = Vec::new();
    for (i, item) in spec.items.iter().enumerate() {
        match item {
            TopSpec::Func(f) => build_func(ctx, &mut m, i, f),
            TopSpec::Op(o) => build_op(ctx, &mut m, body, o, &mut top_values),
        }
    }
    let mut attrs = build_dict(ctx, &spec.attrs, &["sym_name"]);
    if let Some(name) = &spec.name {
        let name = ctx.string_attr(name);
        attrs = ctx.dict_set(attrs, "sym_name", name);
    }
    m.set_root_attrs(attrs);
    let loc = build_loc(ctx, &spec.loc);
    let root = m.root();
    m.set_op_loc(root, loc);
    m
}

// ---- structural equality ------------------------------------------------------

/// Where a value is defined: by pre-order op index and result number, or by
/// pre-order block index and argument number.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ValueKey {
    Result { op: usize, index: u32 },
    Arg { block: usize, index: u32 },
}

/// One step of a pre-order walk.
#[derive(Debug, Clone, PartialEq)]
enum Node {
    Op {
        name: OpName,
        attrs: Attribute,
        loc: Location,
        results: Vec<Type>,
        operands: Vec<ValueKey>,
        regions: usize,
    },
    Region {
        blocks: usize,
    },
    Block {
        args: Vec<Type>,
        ops: usize,
    },
}

#[derive(Default)]
struct Walk {
    nodes: Vec<Node>,
    keys: HashMap<ValueId, ValueKey>,
    ops: usize,
    blocks: usize,
}

impl Walk {
    fn op(&mut self, m: &Module, op: OpId) -> Result<(), String> {
        let index = self.ops;
        self.ops += 1;
        let mut operands = Vec::new();
        for v in m.operands(op) {
            let key = self
                .keys
                .get(&v)
                .copied()
                .ok_or_else(|| format!("op #{index} uses a value not defined before it"))?;
            operands.push(key);
        }
        for v in m.results(op) {
            let ValueDef::Result { index: r, .. } = m.value_def(v) else {
                unreachable!("results are results")
            };
            self.keys.insert(v, ValueKey::Result { op: index, index: r });
        }
        self.nodes.push(Node::Op {
            name: m.op_name(op),
            attrs: m.op_attrs(op),
            loc: m.op_loc(op),
            results: m.results(op).map(|v| m.value_type(v)).collect(),
            operands,
            regions: m.num_regions(op),
        });
        for region in m.regions(op) {
            self.nodes.push(Node::Region { blocks: m.blocks(region).count() });
            for block in m.blocks(region) {
                let b = self.blocks;
                self.blocks += 1;
                for (i, &a) in m.block_args(block).iter().enumerate() {
                    self.keys.insert(a, ValueKey::Arg { block: b, index: i as u32 });
                }
                self.nodes.push(Node::Block {
                    args: m.block_args(block).iter().map(|&a| m.value_type(a)).collect(),
                    ops: m.block_ops(block).count(),
                });
                for inner in m.block_ops(block) {
                    self.op(m, inner)?;
                }
            }
        }
        Ok(())
    }
}

/// A readable form of a node, for failure messages.
fn describe(ctx: &Context, node: &Node) -> String {
    match node {
        Node::Op { name, attrs, loc, results, operands, regions } => format!(
            "op {} attrs {} loc {:?} results ({}) operands {operands:?} regions {regions}",
            ctx.op_name_str(*name),
            attr_to_string(ctx, *attrs),
            loc_to_string(ctx, *loc),
            results.iter().map(|&t| type_to_string(ctx, t)).collect::<Vec<_>>().join(", "),
        ),
        Node::Region { blocks } => format!("region with {blocks} block(s)"),
        Node::Block { args, ops } => format!(
            "block ({}) with {ops} op(s)",
            args.iter().map(|&t| type_to_string(ctx, t)).collect::<Vec<_>>().join(", ")
        ),
    }
}

/// Compares two modules of the same context op by op in pre-order.
fn structurally_equal(ctx: &Context, a: &Module, b: &Module) -> Result<(), String> {
    let mut wa = Walk::default();
    wa.op(a, a.root())?;
    let mut wb = Walk::default();
    wb.op(b, b.root())?;
    for (i, (x, y)) in wa.nodes.iter().zip(&wb.nodes).enumerate() {
        if x != y {
            return Err(format!(
                "node #{i} differs:\n  left:  {}\n  right: {}",
                describe(ctx, x),
                describe(ctx, y)
            ));
        }
    }
    if wa.nodes.len() != wb.nodes.len() {
        return Err(format!("{} nodes vs {}", wa.nodes.len(), wb.nodes.len()));
    }
    Ok(())
}

// ---- properties ---------------------------------------------------------------

/// Builds, prints and re-parses `spec`; returns the context, the module, its text
/// and the parsed module.
fn build_print_parse(spec: &ModuleSpec) -> Result<(Context, Module, String, Module), TestCaseError> {
    let mut ctx = Context::new();
    ctx.set_allow_unregistered(true);
    let module = build_module(&mut ctx, spec);
    let printed = module_to_string(&ctx, &module);
    let parsed = parse_module(&mut ctx, printed.as_bytes(), "printed.qir").map_err(|diags| {
        let mut sources = SourceMap::new();
        sources.add("printed.qir".into(), Arc::new(printed.clone().into_bytes()));
        TestCaseError::fail(format!("printed module does not parse:\n{}\n{printed}", diags.render(&sources)))
    })?;
    Ok((ctx, module, printed, parsed))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn print_parse_print_is_stable(spec in module_spec()) {
        let (ctx, _, printed, parsed) = build_print_parse(&spec)?;
        let reprinted = module_to_string(&ctx, &parsed);
        prop_assert_eq!(reprinted, printed);
    }

    #[test]
    fn parse_of_print_is_structurally_equal(spec in module_spec()) {
        let (ctx, module, printed, parsed) = build_print_parse(&spec)?;
        structurally_equal(&ctx, &module, &parsed).map_err(|e| TestCaseError::fail(format!("{e}\n{printed}")))?;
    }
}

#[test]
fn structural_equality_sees_differences() {
    // The helper itself: equal for the same text, unequal when an operand moves.
    let mut ctx = Context::new();
    ctx.set_allow_unregistered(true);
    let a = "func.func @f(%a: f32, %b: f32) {\n  t.op(%a, %b) : (f32, f32) -> ()\n  func.return\n}\n";
    let b = "func.func @f(%a: f32, %b: f32) {\n  t.op(%b, %a) : (f32, f32) -> ()\n  func.return\n}\n";
    let ma = parse_module(&mut ctx, a.as_bytes(), "a").expect("parses");
    let ma2 = parse_module(&mut ctx, a.as_bytes(), "a").expect("parses");
    let mb = parse_module(&mut ctx, b.as_bytes(), "b").expect("parses");
    assert_eq!(structurally_equal(&ctx, &ma, &ma2), Ok(()));
    assert!(structurally_equal(&ctx, &ma, &mb).is_err());
}
