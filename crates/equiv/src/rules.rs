//! The rule language: the dialects' [`EquivRule`] text parsed into egg
//! rewrites.
//!
//! Both sides are s-expressions. In a pattern, `(dialect.op ATTRS TYPE
//! OPERAND...)` is result 0 of an op (`dialect.op#1` is result 1), `?x` a
//! variable, `{...}` an attribute dictionary in `.qir` syntax, an integer an
//! integer leaf, and `(+ a b)`, `(chan-mul x v AXIS)`... a builtin
//! ([`Builtin`]). The right side may also call a macro, evaluated when the
//! rule fires; a macro that does not apply (an attribute missing, a shape
//! that does not fit) stops the rule at that match:
//!
//! | macro | value |
//! |---|---|
//! | `(attr-f64 ?a NAME DEFAULT)` | attribute `NAME` of dictionary `?a` as an f64 scalar constant |
//! | `(attr-type ?a NAME)` | the type held by type attribute `NAME` |
//! | `(tensor-of ?t ?e)` | the tensor type of `?t`'s shape with element type `?e` |
//! | `(channel-vector ?c ?t AXIS)` | constant `?c`, which broadcasts against type `?t` along `AXIS` only (or holds one value), as a vector |
//! | `(zeros-of-axis ?c AXIS)` | a zero vector as long as constant `?c`'s dimension `AXIS` |
//! | `(recorded-floor ?y AXIS)` | per channel along `AXIS`, value `?y`'s recorded lower bound where positive, else 0 (`calibrated-range`; none without a bound or with none positive) |
//! | `(unit-dim-type ?v AXIS)`, `(shape-attrs ?t)`, `(attrs-insert ?a NAME:INDEX:VALUE...)` | the shape vocabulary ([`crate::shape_vocab`]): a type with a unit dimension inserted, a reshape's attributes, integer arrays of a dictionary with values inserted |
//!
//! A number with a fraction or exponent (`0.0`, `1e-5`) is an f64 scalar
//! constant. Conditions (`when`) are `(same-type ?x ?t)` (value `?x` has the
//! type `?t`), `(is-splat ?c NUMBER)` (every element of constant `?c`
//! equals the number) and `(dim-is ?x AXIS SIZE)` (value `?x` is a tensor
//! whose dimension `AXIS`, negative from the back, has the static size
//! `SIZE`: a weight's kernel size), `(same-leading-dims ?x ?t COUNT)` (the
//! types of `?x` and `?t` have the same static first `COUNT` dimensions: a
//! reshape that keeps the batch and the channels), `(is-constant ?c)` (the class has a
//! known value), `(all-positive ?c)` (a known value whose every element is
//! finite and > 0: a scale that commutes with relu) and `(depthwise ?a ?w)`
//! (attribute `groups` of `?a` equals weight `?w`'s dimension 0, and its
//! dimension 1 is 1: output channel `c` reads input channel `c` only).
//!
//! An op node a rule builds gets the op's identity as its attribute child,
//! like an op of the IR ([`identity_attrs`]: declared defaults and
//! annotations left out), and a dictionary written in a pattern is compared
//! the same way.

use crate::analysis::{add_constant, attr_leaf, register_ir_float_leaf, type_leaf, EqAnalysis, LowerBound};
use crate::bridge::identity_attrs;
use crate::lang::{Builtin, Node};
use crate::quant_vocab;
use crate::shape_vocab;
use egg::{Applier, EGraph, ENodeOrVar, Id, Pattern, PatternAst, RecExpr, Rewrite, Subst, Symbol, Var};
use qopt_interp::Tensor;
use qopt_ir_core::equivalence::{EquivRule, Relation};
use qopt_ir_core::{parse_module, AttrData, Attribute, Context, Module};
use smallvec::SmallVec;

/// A parsed s-expression.
#[derive(Clone, Debug)]
enum Sexp {
    Atom(String),
    List(Vec<Sexp>),
}

/// Splits rule text into s-expressions; `{...}` (with nesting and quotes) is
/// one atom.
fn parse_sexps(text: &str) -> Result<Vec<Sexp>, String> {
    let bytes = text.as_bytes();
    let mut stack: Vec<Vec<Sexp>> = vec![Vec::new()];
    let mut i = 0;
    while i < bytes.len() {
        let c = bytes[i];
        match c {
            b' ' | b'\t' | b'\n' => i += 1,
            b'(' => {
                stack.push(Vec::new());
                i += 1;
            }
            b')' => {
                let list = stack.pop().filter(|_| !stack.is_empty()).ok_or("unbalanced ')'")?;
                stack.last_mut().ok_or("unbalanced ')'")?.push(Sexp::List(list));
                i += 1;
            }
            b'{' => {
                let start = i;
                let (mut depth, mut quoted) = (0usize, false);
                while i < bytes.len() {
                    match bytes[i] {
                        b'"' => quoted = !quoted,
                        b'{' if !quoted => depth += 1,
                        b'}' if !quoted => {
                            depth -= 1;
                            if depth == 0 {
                                break;
                            }
                        }
                        _ => {}
                    }
                    i += 1;
                }
                if i == bytes.len() {
                    return Err("unbalanced '{'".into());
                }
                i += 1;
                stack.last_mut().ok_or("unbalanced")?.push(Sexp::Atom(text[start..i].to_string()));
            }
            _ => {
                let start = i;
                while i < bytes.len() && !matches!(bytes[i], b' ' | b'\t' | b'\n' | b'(' | b')') {
                    i += 1;
                }
                stack.last_mut().ok_or("unbalanced")?.push(Sexp::Atom(text[start..i].to_string()));
            }
        }
    }
    match stack.pop() {
        Some(items) if stack.is_empty() => Ok(items),
        _ => Err("unbalanced '('".into()),
    }
}

/// A macro of the right-hand side (see the module docs).
#[derive(Clone, Debug)]
enum Macro {
    AttrF64(Box<Template>, String, f64),
    AttrType(Box<Template>, String),
    TensorOf(Box<Template>, Box<Template>),
    ChannelVector(Box<Template>, Box<Template>, i64),
    ZerosOfAxis(Box<Template>, i64),
    RecordedFloor(Box<Template>, i64),
    /// The quantization vocabulary ([`crate::quant_vocab`]).
    Quant(QuantMacro),
    /// The shape vocabulary ([`crate::shape_vocab`]).
    Shape(ShapeMacro),
}

/// A macro of the shape vocabulary (see [`crate::shape_vocab`]).
#[derive(Clone, Debug)]
enum ShapeMacro {
    UnitDimType(Box<Template>, usize),
    ShapeAttrs(Box<Template>),
    AttrsInsert(Box<Template>, Vec<(String, usize, i64)>),
}

/// A macro of the quantization vocabulary (see [`crate::quant_vocab`]).
#[derive(Clone, Debug)]
enum QuantMacro {
    Expressed(Box<Template>),
    AsBias(Box<Template>, Box<Template>, Box<Template>),
    RoundedBias(Box<Template>, Box<Template>, Box<Template>),
    TypeOf(Box<Template>),
    TransposedType(Box<Template>),
    Domain(Box<Template>),
    ShapedLike(Box<Template>, Box<Template>),
    TableAttrs(Box<Template>),
    AttrsWithout(Box<Template>, Vec<String>),
    AttrsPick(Box<Template>, Vec<(String, String)>),
    AttrsMerge(Box<Template>, Box<Template>),
}

/// A condition of `when`.
#[derive(Clone, Debug)]
enum Condition {
    SameType(Var, Var),
    IsSplat(Var, f64),
    HasAttr(Var, String),
    LacksAttr(Var, String),
    AttrIs(Var, String, String),
    ZeroPointAtMin(Var),
    ClipSaturates(Var, Var),
    Covers(Var, Var),
    SameElement(Var, Var),
    NotQuantized(Var),
    DimIs(Var, i64, i64),
    RankIs(Var, usize),
    SameLeadingDims(Var, Var, usize),
    IsNear(Var, f64),
    AttrNear(Var, String, f64),
    IsConstant(Var),
    AllPositive(Var),
    Depthwise(Var, Var),
}

impl Condition {
    fn vars(&self) -> Vec<Var> {
        match self {
            Condition::SameType(a, b)
            | Condition::ClipSaturates(a, b)
            | Condition::Covers(a, b)
            | Condition::SameElement(a, b)
            | Condition::SameLeadingDims(a, b, _)
            | Condition::Depthwise(a, b) => vec![*a, *b],
            Condition::IsSplat(a, _)
            | Condition::HasAttr(a, _)
            | Condition::LacksAttr(a, _)
            | Condition::AttrIs(a, ..)
            | Condition::ZeroPointAtMin(a)
            | Condition::NotQuantized(a)
            | Condition::IsConstant(a)
            | Condition::AllPositive(a)
            | Condition::DimIs(a, ..)
            | Condition::RankIs(a, _)
            | Condition::IsNear(a, _)
            | Condition::AttrNear(a, ..) => vec![*a],
        }
    }
}

/// A right-hand side, instantiated when the rule fires.
#[derive(Clone, Debug)]
enum Template {
    Var(Var),
    Int(i64),
    Number(f64),
    Attr(Attribute),
    Op(qopt_ir_core::OpName, u32, Vec<Template>),
    Fn(Builtin, Vec<Template>),
    Macro(Macro),
}

/// Parses an attribute dictionary in `.qir` syntax through the parser.
fn parse_attr_dict(ctx: &mut Context, text: &str) -> Result<Attribute, String> {
    let source = format!("func.func @rule() {{\n  equiv.literal() {text} : () -> ()\n  func.return\n}}\n");
    let module: Module = parse_module(ctx, source.as_bytes(), "rule")
        .map_err(|d| format!("bad attribute dictionary {text}: {}", d.to_string().trim_end()))?;
    let func = module.top_level_ops().next().ok_or("empty rule module")?;
    let body = module.first_block(module.region(func, 0));
    Ok(module.op_attrs(module.first_op(body)))
}

/// Splits `dialect.op#N` into the name and result index.
fn op_head(atom: &str) -> Result<(&str, u32), String> {
    match atom.split_once('#') {
        Some((name, n)) => Ok((name, n.parse().map_err(|_| format!("bad result index in '{atom}'"))?)),
        None => Ok((atom, 0)),
    }
}

fn var(atom: &str) -> Result<Var, String> {
    atom.parse::<Var>().map_err(|_| format!("expected a variable, found '{atom}'"))
}

fn number(atom: &str) -> Result<f64, String> {
    atom.parse::<f64>().map_err(|_| format!("expected a number, found '{atom}'"))
}

fn is_float_literal(atom: &str) -> bool {
    atom.contains(['.', 'e', 'E']) && atom.parse::<f64>().is_ok() && !atom.starts_with('?')
}

/// Parses a pattern (left side) into egg's form.
fn pattern(ctx: &mut Context, sexp: &Sexp) -> Result<Pattern<Node>, String> {
    let mut ast: PatternAst<Node> = RecExpr::default();
    // Post-order over the s-expression without recursion: (node, visited).
    let mut stack: Vec<(&Sexp, bool)> = vec![(sexp, false)];
    let mut ids: Vec<Id> = Vec::new();
    while let Some((s, visited)) = stack.pop() {
        match s {
            Sexp::Atom(a) => {
                let node = if a.starts_with('?') {
                    ENodeOrVar::Var(var(a)?)
                } else if a.starts_with('{') {
                    ENodeOrVar::ENode(Node::Attr(parse_attr_dict(ctx, a)?))
                } else if let Ok(i) = a.parse::<i64>() {
                    ENodeOrVar::ENode(Node::Int(i))
                } else {
                    return Err(format!("unexpected '{a}' in a pattern"));
                };
                ids.push(ast.add(node));
            }
            Sexp::List(items) => {
                let Some(Sexp::Atom(head)) = items.first() else {
                    return Err("a list must start with a name".into());
                };
                if !visited {
                    stack.push((s, true));
                    for child in items[1..].iter().rev() {
                        stack.push((child, false));
                    }
                    continue;
                }
                let n = items.len() - 1;
                // invariant: the n children were pushed just before this list.
                let children: SmallVec<[Id; 4]> = ids.split_off(ids.len() - n).into_iter().collect();
                let node = if let Some(f) = Builtin::ALL.iter().find(|b| b.name() == head) {
                    if n != f.arity() {
                        return Err(format!("'{head}' takes {} arguments", f.arity()));
                    }
                    Node::Fn { f: *f, children }
                } else if head.contains('.') {
                    let (name, result) = op_head(head)?;
                    if n < 2 {
                        return Err(format!("'{head}' needs its attributes and type before its operands"));
                    }
                    let name = ctx.op_name(name);
                    pattern_attrs_as_identity(ctx, &mut ast, name, children[0]);
                    Node::Op { name, result, children }
                } else {
                    return Err(format!("unknown operation '{head}' in a pattern"));
                };
                ids.push(ast.add(ENodeOrVar::ENode(node)));
            }
        }
    }
    Ok(Pattern::new(ast))
}

/// Parses a right-hand side.
fn template(ctx: &mut Context, sexp: &Sexp) -> Result<Template, String> {
    match sexp {
        Sexp::Atom(a) if a.starts_with('?') => Ok(Template::Var(var(a)?)),
        Sexp::Atom(a) if a.starts_with('{') => Ok(Template::Attr(parse_attr_dict(ctx, a)?)),
        Sexp::Atom(a) if is_float_literal(a) => Ok(Template::Number(number(a)?)),
        Sexp::Atom(a) => a.parse::<i64>().map(Template::Int).map_err(|_| format!("unexpected '{a}'")),
        Sexp::List(items) => {
            let Some(Sexp::Atom(head)) = items.first() else {
                return Err("a list must start with a name".into());
            };
            let args = &items[1..];
            let atom = |i: usize| match args.get(i) {
                Some(Sexp::Atom(a)) => Ok(a.as_str()),
                _ => Err(format!("'{head}' needs an atom as argument {}", i + 1)),
            };
            let want = |n: usize| {
                if args.len() == n {
                    Ok(())
                } else {
                    Err(format!("'{head}' takes {n} arguments, found {}", args.len()))
                }
            };
            let mut arg = |i: usize| template(ctx, &args[i]).map(Box::new);
            let m = match head.as_str() {
                "attr-f64" => {
                    want(3)?;
                    Macro::AttrF64(arg(0)?, atom(1)?.to_string(), number(atom(2)?)?)
                }
                "attr-type" => {
                    want(2)?;
                    Macro::AttrType(arg(0)?, atom(1)?.to_string())
                }
                "tensor-of" => {
                    want(2)?;
                    Macro::TensorOf(arg(0)?, arg(1)?)
                }
                "channel-vector" => {
                    want(3)?;
                    let axis = atom(2)?.parse().map_err(|_| "channel-vector's axis must be an integer")?;
                    Macro::ChannelVector(arg(0)?, arg(1)?, axis)
                }
                "zeros-of-axis" => {
                    want(2)?;
                    let axis = atom(1)?.parse().map_err(|_| "zeros-of-axis's axis must be an integer")?;
                    Macro::ZerosOfAxis(arg(0)?, axis)
                }
                "recorded-floor" => {
                    want(2)?;
                    let axis = atom(1)?.parse().map_err(|_| "recorded-floor's axis must be an integer")?;
                    Macro::RecordedFloor(arg(0)?, axis)
                }
                "unit-dim-type" => {
                    want(2)?;
                    let axis =
                        atom(1)?.parse().map_err(|_| "unit-dim-type's axis must be a dimension index")?;
                    Macro::Shape(ShapeMacro::UnitDimType(arg(0)?, axis))
                }
                "shape-attrs" => {
                    want(1)?;
                    Macro::Shape(ShapeMacro::ShapeAttrs(arg(0)?))
                }
                "attrs-insert" => {
                    if args.is_empty() {
                        return Err("'attrs-insert' needs a dictionary".into());
                    }
                    let inserts = (1..args.len())
                        .map(|i| atom(i).and_then(shape_vocab::parse_insert))
                        .collect::<Result<Vec<_>, _>>()?;
                    Macro::Shape(ShapeMacro::AttrsInsert(arg(0)?, inserts))
                }
                "expressed" => {
                    want(1)?;
                    Macro::Quant(QuantMacro::Expressed(arg(0)?))
                }
                "as-bias" => {
                    want(3)?;
                    Macro::Quant(QuantMacro::AsBias(arg(0)?, arg(1)?, arg(2)?))
                }
                "rounded-bias" => {
                    want(3)?;
                    Macro::Quant(QuantMacro::RoundedBias(arg(0)?, arg(1)?, arg(2)?))
                }
                "transposed-type" => {
                    want(1)?;
                    Macro::Quant(QuantMacro::TransposedType(arg(0)?))
                }
                "type-of" => {
                    want(1)?;
                    Macro::Quant(QuantMacro::TypeOf(arg(0)?))
                }
                "domain" => {
                    want(1)?;
                    Macro::Quant(QuantMacro::Domain(arg(0)?))
                }
                "shaped-like" => {
                    want(2)?;
                    Macro::Quant(QuantMacro::ShapedLike(arg(0)?, arg(1)?))
                }
                "table-attrs" => {
                    want(1)?;
                    Macro::Quant(QuantMacro::TableAttrs(arg(0)?))
                }
                "attrs-merge" => {
                    want(2)?;
                    Macro::Quant(QuantMacro::AttrsMerge(arg(0)?, arg(1)?))
                }
                "attrs-without" | "attrs-pick" => {
                    if args.is_empty() {
                        return Err(format!("'{head}' needs a dictionary"));
                    }
                    let names = (1..args.len()).map(atom).collect::<Result<Vec<_>, _>>()?;
                    let dict = arg(0)?;
                    if head == "attrs-without" {
                        Macro::Quant(QuantMacro::AttrsWithout(
                            dict,
                            names.iter().map(|n| n.to_string()).collect(),
                        ))
                    } else {
                        let picks = names
                            .iter()
                            .map(|n| match n.split_once(':') {
                                Some((from, to)) => (from.to_string(), to.to_string()),
                                None => (n.to_string(), n.to_string()),
                            })
                            .collect();
                        Macro::Quant(QuantMacro::AttrsPick(dict, picks))
                    }
                }
                _ => {
                    let children = args.iter().map(|a| template(ctx, a)).collect::<Result<Vec<_>, _>>()?;
                    if let Some(f) = Builtin::ALL.iter().find(|b| b.name() == head) {
                        if children.len() != f.arity() {
                            return Err(format!("'{head}' takes {} arguments", f.arity()));
                        }
                        return Ok(Template::Fn(*f, children));
                    }
                    if !head.contains('.') {
                        return Err(format!("unknown operation or macro '{head}'"));
                    }
                    let (name, result) = op_head(head)?;
                    if children.len() < 2 {
                        return Err(format!("'{head}' needs its attributes and type before its operands"));
                    }
                    return Ok(Template::Op(ctx.op_name(name), result, children));
                }
            };
            Ok(Template::Macro(m))
        }
    }
}

/// Parses the conditions of `when`.
fn conditions(text: &str) -> Result<Vec<Condition>, String> {
    parse_sexps(text)?
        .iter()
        .map(|s| {
            let Sexp::List(items) = s else { return Err("a condition is a list".to_string()) };
            let atoms: Vec<&str> = items
                .iter()
                .map(|i| match i {
                    Sexp::Atom(a) => Ok(a.as_str()),
                    Sexp::List(_) => Err("condition arguments are atoms".to_string()),
                })
                .collect::<Result<_, _>>()?;
            match atoms.as_slice() {
                ["same-type", x, t] => Ok(Condition::SameType(var(x)?, var(t)?)),
                ["is-splat", c, v] => Ok(Condition::IsSplat(var(c)?, number(v)?)),
                ["has-attr", a, name] => Ok(Condition::HasAttr(var(a)?, name.to_string())),
                ["lacks-attr", a, name] => Ok(Condition::LacksAttr(var(a)?, name.to_string())),
                ["attr-is", a, name, value] => {
                    Ok(Condition::AttrIs(var(a)?, name.to_string(), value.trim_matches('"').to_string()))
                }
                ["zero-point-at-min", t] => Ok(Condition::ZeroPointAtMin(var(t)?)),
                ["clip-saturates", c, t] => Ok(Condition::ClipSaturates(var(c)?, var(t)?)),
                ["covers", u, t] => Ok(Condition::Covers(var(u)?, var(t)?)),
                ["same-element", x, t] => Ok(Condition::SameElement(var(x)?, var(t)?)),
                ["not-quantized", x] => Ok(Condition::NotQuantized(var(x)?)),
                ["is-near", c, v] => Ok(Condition::IsNear(var(c)?, number(v)?)),
                ["attr-near", a, name, v] => Ok(Condition::AttrNear(var(a)?, name.to_string(), number(v)?)),
                ["is-constant", c] => Ok(Condition::IsConstant(var(c)?)),
                ["all-positive", c] => Ok(Condition::AllPositive(var(c)?)),
                ["depthwise", a, w] => Ok(Condition::Depthwise(var(a)?, var(w)?)),
                ["dim-is", x, axis, size] => {
                    let int =
                        |a: &str| a.parse::<i64>().map_err(|_| format!("dim-is takes integers, found '{a}'"));
                    let size = int(size)?;
                    if size < 0 {
                        return Err(format!("dim-is's size must be at least 0, found {size}"));
                    }
                    Ok(Condition::DimIs(var(x)?, int(axis)?, size))
                }
                ["same-leading-dims", x, t, count] => {
                    let count = count
                        .parse::<usize>()
                        .map_err(|_| format!("same-leading-dims takes a count, found '{count}'"))?;
                    Ok(Condition::SameLeadingDims(var(x)?, var(t)?, count))
                }
                ["rank-is", x, rank] => {
                    let rank = rank
                        .parse::<usize>()
                        .map_err(|_| format!("rank-is takes a count, found '{rank}'"))?;
                    Ok(Condition::RankIs(var(x)?, rank))
                }
                _ => Err(format!("unknown condition {atoms:?}")),
            }
        })
        .collect()
}

/// Variables a template uses.
fn template_vars(t: &Template, out: &mut Vec<Var>) {
    match t {
        Template::Var(v) => out.push(*v),
        Template::Op(_, _, c) | Template::Fn(_, c) => c.iter().for_each(|c| template_vars(c, out)),
        Template::Macro(m) => match m {
            Macro::AttrF64(a, ..)
            | Macro::AttrType(a, _)
            | Macro::ZerosOfAxis(a, _)
            | Macro::RecordedFloor(a, _) => template_vars(a, out),
            Macro::TensorOf(a, b) | Macro::ChannelVector(a, b, _) => {
                template_vars(a, out);
                template_vars(b, out);
            }
            Macro::Quant(q) => match q {
                QuantMacro::Expressed(a)
                | QuantMacro::TypeOf(a)
                | QuantMacro::TransposedType(a)
                | QuantMacro::Domain(a)
                | QuantMacro::TableAttrs(a)
                | QuantMacro::AttrsWithout(a, _)
                | QuantMacro::AttrsPick(a, _) => template_vars(a, out),
                QuantMacro::ShapedLike(a, b) | QuantMacro::AttrsMerge(a, b) => {
                    template_vars(a, out);
                    template_vars(b, out);
                }
                QuantMacro::AsBias(a, b, c) | QuantMacro::RoundedBias(a, b, c) => {
                    [a, b, c].into_iter().for_each(|t| template_vars(t, out))
                }
            },
            Macro::Shape(
                ShapeMacro::UnitDimType(a, _) | ShapeMacro::ShapeAttrs(a) | ShapeMacro::AttrsInsert(a, _),
            ) => template_vars(a, out),
        },
        Template::Int(_) | Template::Number(_) | Template::Attr(_) => {}
    }
}

/// One side of a rule as it is applied.
pub struct RuleApplier {
    rhs: Template,
    when: Vec<Condition>,
}

/// Compiles `rules` (those whose relation is at most `relation`).
pub fn compile<'a>(
    ctx: &mut Context,
    rules: &[(String, EquivRule)],
    relation: Relation,
) -> Result<Vec<Rewrite<Node, EqAnalysis<'a>>>, String> {
    let mut out = Vec::new();
    for (dialect, rule) in rules.iter().filter(|(_, r)| r.relation <= relation) {
        let context = |e: String| format!("rule '{}' of dialect '{dialect}': {e}", rule.name);
        let side = |text: &str| -> Result<Sexp, String> {
            let mut items = parse_sexps(text)?;
            if items.len() != 1 {
                return Err(format!("expected one expression, found {}", items.len()));
            }
            Ok(items.remove(0))
        };
        let (lhs, rhs) = (side(&rule.lhs).map_err(context)?, side(&rule.rhs).map_err(context)?);
        let when = conditions(&rule.when).map_err(context)?;
        let mut directions = vec![(lhs.clone(), rhs.clone(), rule.name.to_string())];
        if rule.bidirectional {
            directions.push((rhs, lhs, format!("{}-reversed", rule.name)));
        }
        for (from, to, name) in directions {
            let searcher = pattern(ctx, &from).map_err(context)?;
            let rhs = template(ctx, &to).map_err(context)?;
            let bound = searcher.vars();
            let mut used = Vec::new();
            template_vars(&rhs, &mut used);
            for c in &when {
                used.extend(c.vars());
            }
            if let Some(v) = used.iter().find(|v| !bound.contains(v)) {
                return Err(context(format!("variable {v} is not bound by the pattern")));
            }
            let rewrite = Rewrite::new(name.as_str(), searcher, RuleApplier { rhs, when: when.clone() })
                .map_err(context)?;
            out.push(rewrite);
        }
    }
    Ok(out)
}

impl RuleApplier {
    fn holds(&self, egraph: &mut EGraph<Node, EqAnalysis<'_>>, subst: &Subst) -> bool {
        let attr = |egraph: &EGraph<Node, EqAnalysis<'_>>, a: &Var, name: &str| {
            attr_leaf(egraph, subst[*a]).and_then(|d| egraph.analysis.ctx.dict_get(d, name))
        };
        self.when.iter().all(|c| match c {
            Condition::SameType(x, t) => {
                let ty = type_leaf(egraph, subst[*t]);
                ty.is_some() && egraph[subst[*x]].data.ty == ty
            }
            Condition::IsSplat(c, v) => egraph[subst[*c]]
                .data
                .constant
                .as_ref()
                .is_some_and(|k| !k.value.is_empty() && k.value.to_f64_vec().iter().all(|x| x == v)),
            Condition::IsNear(c, v) => egraph[subst[*c]].data.constant.as_ref().is_some_and(|k| {
                !k.value.is_empty() && k.value.to_f64_vec().iter().all(|&x| near_in_f32(x, *v))
            }),
            Condition::AttrNear(a, name, v) => attr(egraph, a, name)
                .and_then(|x| egraph.analysis.ctx.attr_as_f64(x))
                .is_some_and(|x| near_in_f32(x, *v)),
            Condition::HasAttr(a, name) => attr(egraph, a, name).is_some(),
            Condition::LacksAttr(a, name) => {
                attr_leaf(egraph, subst[*a]).is_some() && attr(egraph, a, name).is_none()
            }
            Condition::AttrIs(a, name, value) => attr(egraph, a, name)
                .is_some_and(|v| egraph.analysis.ctx.attr_as_str(v) == Some(value.as_str())),
            Condition::ZeroPointAtMin(t) => quant_vocab::zero_point_at_min(egraph, subst[*t]),
            Condition::ClipSaturates(c, t) => quant_vocab::clip_saturates(egraph, subst[*c], subst[*t]),
            Condition::Covers(u, t) => quant_vocab::covers(egraph, subst[*u], subst[*t]),
            Condition::SameElement(x, t) => quant_vocab::same_element(egraph, subst[*x], subst[*t]),
            Condition::NotQuantized(x) => quant_vocab::not_quantized(egraph, subst[*x]),
            Condition::DimIs(x, axis, size) => dim_is(egraph, subst[*x], *axis, *size),
            Condition::SameLeadingDims(x, t, count) => {
                let shape =
                    |id| quant_vocab::type_of(egraph, id).and_then(|ty| egraph.analysis.ctx.tensor_shape(ty));
                match (shape(subst[*x]), shape(subst[*t])) {
                    (Some(a), Some(b)) => {
                        a.len() >= *count
                            && b.len() >= *count
                            && a[..*count] == b[..*count]
                            && a[..*count].iter().all(|&d| d >= 0)
                    }
                    _ => false,
                }
            }
            Condition::RankIs(x, rank) => egraph[subst[*x]]
                .data
                .ty
                .and_then(|t| egraph.analysis.ctx.tensor_shape(t))
                .is_some_and(|shape| shape.len() == *rank),
            Condition::IsConstant(c) => egraph[subst[*c]].data.constant.is_some(),
            Condition::AllPositive(c) => egraph[subst[*c]].data.constant.as_ref().is_some_and(|k| {
                !k.value.is_empty() && k.value.to_f64_vec().iter().all(|&x| x > 0.0 && x.is_finite())
            }),
            Condition::Depthwise(a, w) => {
                let groups = attr(egraph, a, "groups")
                    .and_then(|g| egraph.analysis.ctx.attr_as_int(g))
                    .and_then(|g| i64::try_from(g).ok());
                groups.is_some_and(|g| dim_is(egraph, subst[*w], 0, g) && dim_is(egraph, subst[*w], 1, 1))
            }
        })
    }
}

/// Whether `x` is within 4 f32 ulps of `v` (`is-near`, `attr-near`: an
/// exporter's `1/6` or `0.1666667`).
fn near_in_f32(x: f64, v: f64) -> bool {
    let v32 = Tensor::F64(ndarray::arr0(v).into_dyn());
    let x32 = Tensor::F64(ndarray::arr0(x).into_dyn());
    crate::analysis::ulp_distance(&x32, &v32, crate::analysis::Precision::F32, 4, None).is_some()
}

/// Instantiates `t` in the e-graph; `None` where a macro does not apply.
fn instantiate(egraph: &mut EGraph<Node, EqAnalysis<'_>>, t: &Template, subst: &Subst) -> Option<Id> {
    Some(match t {
        Template::Var(v) => subst[*v],
        Template::Int(i) => egraph.add(Node::Int(*i)),
        Template::Attr(a) => egraph.add(Node::Attr(*a)),
        Template::Number(x) => add_constant(egraph, Tensor::F64(ndarray::arr0(*x).into_dyn())),
        Template::Op(name, result, children) => {
            let mut children: SmallVec<[Id; 4]> =
                children.iter().map(|c| instantiate(egraph, c, subst)).collect::<Option<_>>()?;
            attrs_as_identity(egraph, *name, &mut children);
            egraph.add(Node::Op { name: *name, result: *result, children })
        }
        Template::Fn(f, children) => {
            let children = children.iter().map(|c| instantiate(egraph, c, subst)).collect::<Option<_>>()?;
            egraph.add(Node::Fn { f: *f, children })
        }
        Template::Macro(m) => return expand(egraph, m, subst),
    })
}

/// Makes the attribute child of a new node of op `name` the op's identity, as
/// the bridge makes the IR's ([`identity_attrs`]).
fn attrs_as_identity(
    egraph: &mut EGraph<Node, EqAnalysis<'_>>,
    name: qopt_ir_core::OpName,
    children: &mut [Id],
) {
    let Some(attrs) = children.first().and_then(|&a| attr_leaf(egraph, a)) else { return };
    let identity = identity_attrs(egraph.analysis.ctx, name, attrs);
    if identity != attrs {
        children[0] = egraph.add(Node::Attr(identity));
    }
}

/// [`attrs_as_identity`] for a dictionary written in a pattern (the op
/// node's first child `attrs`).
fn pattern_attrs_as_identity(
    ctx: &mut Context,
    ast: &mut PatternAst<Node>,
    name: qopt_ir_core::OpName,
    attrs: Id,
) {
    if let ENodeOrVar::ENode(Node::Attr(a)) = ast[attrs] {
        ast[attrs] = ENodeOrVar::ENode(Node::Attr(identity_attrs(ctx, name, a)));
    }
}

/// Whether the class `x` has a tensor type whose dimension `axis` (negative
/// from the back) is `size` (`dim-is`).
fn dim_is(egraph: &EGraph<Node, EqAnalysis<'_>>, x: Id, axis: i64, size: i64) -> bool {
    let Some(shape) = egraph[x].data.ty.and_then(|t| egraph.analysis.ctx.tensor_shape(t)) else {
        return false;
    };
    let rank = shape.len() as i64;
    let axis = if axis < 0 { axis + rank } else { axis };
    usize::try_from(axis).ok().and_then(|a| shape.get(a)).is_some_and(|&d| d == size)
}

/// Evaluates a macro.
fn expand(egraph: &mut EGraph<Node, EqAnalysis<'_>>, m: &Macro, subst: &Subst) -> Option<Id> {
    let leaf = |egraph: &mut EGraph<Node, EqAnalysis<'_>>, t: &Template| {
        instantiate(egraph, t, subst).map(|id| egraph.find(id))
    };
    match m {
        Macro::AttrF64(a, name, default) => {
            let a = leaf(egraph, a)?;
            let attrs = attr_leaf(egraph, a)?;
            let ctx = &egraph.analysis.ctx;
            let value = match ctx.dict_get(attrs, name) {
                Some(v) => ctx.attr_as_f64(v)?,
                None => *default,
            };
            Some(add_constant(egraph, Tensor::F64(ndarray::arr0(value).into_dyn())))
        }
        Macro::AttrType(a, name) => {
            let a = leaf(egraph, a)?;
            let attrs = attr_leaf(egraph, a)?;
            let ctx = &egraph.analysis.ctx;
            let AttrData::Type(t) = ctx.attr_data(ctx.dict_get(attrs, name)?) else { return None };
            let t = *t;
            Some(egraph.add(Node::Type(t)))
        }
        Macro::TensorOf(t, e) => {
            let (t, e) = (leaf(egraph, t)?, leaf(egraph, e)?);
            let (t, e) = (type_leaf(egraph, t)?, type_leaf(egraph, e)?);
            let shape = egraph.analysis.ctx.tensor_shape(t)?.to_vec();
            let ty = egraph.analysis.ctx.tensor_type(&shape, e);
            Some(egraph.add(Node::Type(ty)))
        }
        Macro::ChannelVector(c, t, axis) => {
            let (c, t) = (leaf(egraph, c)?, leaf(egraph, t)?);
            let constant = egraph[c].data.constant.clone()?;
            let ty = type_leaf(egraph, t)?;
            let shape = egraph.analysis.ctx.tensor_shape(ty)?.to_vec();
            let vector = channel_vector(&constant.value, &shape, *axis)?;
            let id = add_constant(egraph, vector);
            if let Some(&precision) = egraph.analysis.ir_keys.get(&constant.key) {
                // The IR's own constant, reshaped: match it like one.
                register_ir_float_leaf(egraph, id, precision);
            }
            Some(id)
        }
        Macro::ZerosOfAxis(c, axis) => {
            let c = leaf(egraph, c)?;
            let value = egraph[c].data.constant.as_ref()?.value.clone();
            let rank = value.rank() as i64;
            let axis = usize::try_from(if *axis < 0 { axis + rank } else { *axis }).ok()?;
            let n = *value.shape().get(axis)?;
            Some(add_constant(egraph, Tensor::F64(ndarray::Array1::zeros(n).into_dyn())))
        }
        Macro::RecordedFloor(y, axis) => {
            let y = leaf(egraph, y)?;
            let floor = recorded_floor(egraph[y].data.lower.as_deref()?, *axis)?;
            Some(add_constant(egraph, floor))
        }
        Macro::Quant(q) => match q {
            QuantMacro::Expressed(v) => {
                let v = leaf(egraph, v)?;
                quant_vocab::expressed(egraph, v)
            }
            QuantMacro::AsBias(b, x, w) => {
                let (b, x, w) = (leaf(egraph, b)?, leaf(egraph, x)?, leaf(egraph, w)?);
                quant_vocab::as_bias(egraph, b, x, w)
            }
            QuantMacro::RoundedBias(b, x, w) => {
                let (b, x, w) = (leaf(egraph, b)?, leaf(egraph, x)?, leaf(egraph, w)?);
                quant_vocab::rounded_bias(egraph, b, x, w)
            }
            QuantMacro::TransposedType(v) => {
                let v = leaf(egraph, v)?;
                quant_vocab::transposed_type(egraph, v)
            }
            QuantMacro::TypeOf(v) => {
                let v = leaf(egraph, v)?;
                quant_vocab::type_of_value(egraph, v)
            }
            QuantMacro::Domain(q) => {
                let q = leaf(egraph, q)?;
                quant_vocab::domain(egraph, q)
            }
            QuantMacro::ShapedLike(t, v) => {
                let (t, v) = (leaf(egraph, t)?, leaf(egraph, v)?);
                quant_vocab::shaped_like(egraph, t, v)
            }
            QuantMacro::TableAttrs(c) => {
                let c = leaf(egraph, c)?;
                quant_vocab::table_attrs(egraph, c)
            }
            QuantMacro::AttrsWithout(a, names) => {
                let a = leaf(egraph, a)?;
                quant_vocab::attrs_without(egraph, a, names)
            }
            QuantMacro::AttrsPick(a, picks) => {
                let a = leaf(egraph, a)?;
                quant_vocab::attrs_pick(egraph, a, picks)
            }
            QuantMacro::AttrsMerge(a, b) => {
                let (a, b) = (leaf(egraph, a)?, leaf(egraph, b)?);
                quant_vocab::attrs_merge(egraph, a, b)
            }
        },
        Macro::Shape(s) => match s {
            ShapeMacro::UnitDimType(v, axis) => {
                let v = leaf(egraph, v)?;
                shape_vocab::unit_dim_type(egraph, v, *axis)
            }
            ShapeMacro::ShapeAttrs(t) => {
                let t = leaf(egraph, t)?;
                shape_vocab::shape_attrs(egraph, t)
            }
            ShapeMacro::AttrsInsert(a, inserts) => {
                let a = leaf(egraph, a)?;
                shape_vocab::attrs_insert(egraph, a, inserts)
            }
        },
    }
}

/// `recorded-floor`: per channel along `axis` (negative from the back), the
/// recorded lower bound where it is positive and 0 elsewhere, the largest
/// `p` with `0 ≤ p ≤ x` on every channel; `None` when the bound runs along
/// another axis or no entry is positive (the shift would be no shift).
fn recorded_floor(bound: &LowerBound, axis: i64) -> Option<Tensor> {
    let rank = bound.rank as i64;
    let axis = if axis < 0 { axis + rank } else { axis };
    if usize::try_from(axis).ok() != Some(bound.axis) || !bound.values.iter().any(|&m| m > 0.0) {
        return None;
    }
    let floor: Vec<f64> = bound.values.iter().map(|&m| if m > 0.0 { m } else { 0.0 }).collect();
    Some(Tensor::F64(ndarray::Array1::from(floor).into_dyn()))
}

/// `c` as a vector along `axis` of a tensor of shape `shape` (dimensions may
/// be dynamic), if `c` broadcasts against it and varies along `axis` only.
fn channel_vector(c: &Tensor, shape: &[i64], axis: i64) -> Option<Tensor> {
    let rank = shape.len();
    let axis = usize::try_from(if axis < 0 { axis + rank as i64 } else { axis }).ok()?;
    if axis >= rank || c.rank() > rank || matches!(c, Tensor::Bool(_)) {
        return None;
    }
    let offset = rank - c.rank();
    let mut length = 1usize;
    for (j, &d) in c.shape().iter().enumerate() {
        let i = j + offset;
        if i == axis {
            length = d;
        } else if d != 1 {
            return splat(c);
        }
    }
    if length != 1 && shape[axis] >= 0 && shape[axis] as usize != length {
        return None;
    }
    Some(Tensor::F64(ndarray::Array1::from(c.to_f64_vec()).into_dyn()))
}

/// A constant holding one value, as a vector of that value.
fn splat(c: &Tensor) -> Option<Tensor> {
    let values = c.to_f64_vec();
    let first = *values.first()?;
    values
        .iter()
        .all(|v| v.to_bits() == first.to_bits())
        .then(|| Tensor::F64(ndarray::arr1(&[first]).into_dyn()))
}

impl<'a> Applier<Node, EqAnalysis<'a>> for RuleApplier {
    fn apply_one(
        &self,
        egraph: &mut EGraph<Node, EqAnalysis<'a>>,
        eclass: Id,
        subst: &Subst,
        _searcher_ast: Option<&PatternAst<Node>>,
        _rule_name: Symbol,
    ) -> Vec<Id> {
        if !self.holds(egraph, subst) {
            return Vec::new();
        }
        match instantiate(egraph, &self.rhs, subst) {
            Some(id) if egraph.union(eclass, id) => vec![eclass],
            _ => Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sexps_keep_attribute_dictionaries_whole() {
        let items = parse_sexps("(fp.clip {max = 6.0 : f32, min = 0.0 : f32} ?t ?x)").unwrap();
        let Sexp::List(list) = &items[0] else { panic!() };
        assert_eq!(list.len(), 4);
        assert!(matches!(&list[1], Sexp::Atom(a) if a == "{max = 6.0 : f32, min = 0.0 : f32}"));
        assert!(parse_sexps("(a (b)").is_err());
        assert!(parse_sexps("a)").is_err());
    }

    #[test]
    fn channel_vectors_broadcast_along_one_axis() {
        let c = Tensor::from_f32(&[3, 1, 1], vec![1.0, 2.0, 3.0]).unwrap();
        assert_eq!(channel_vector(&c, &[-1, 3, 4, 4], 1).unwrap().to_f64_vec(), [1.0, 2.0, 3.0]);
        assert!(channel_vector(&c, &[1, 4, 3, 3], 1).is_none());
        let row = Tensor::from_f32(&[3], vec![1.0, 2.0, 3.0]).unwrap();
        assert!(channel_vector(&row, &[1, 3, 4, 3], 1).is_none());
        let half = Tensor::from_f32(&[3, 2], vec![0.5; 6]).unwrap();
        assert_eq!(channel_vector(&half, &[3, 2], 1).unwrap().to_f64_vec(), [0.5]);
        assert!(channel_vector(&row, &[8, 3], 1).is_some());
    }

    #[test]
    fn recorded_floors_keep_the_positive_minima_along_their_axis() {
        let bound = LowerBound { axis: 1, rank: 2, values: vec![-1.5, 0.0, 2.5] };
        assert_eq!(recorded_floor(&bound, 1).unwrap().to_f64_vec(), [0.0, 0.0, 2.5]);
        assert_eq!(recorded_floor(&bound, -1).unwrap().to_f64_vec(), [0.0, 0.0, 2.5]);
        assert!(recorded_floor(&bound, 0).is_none(), "another axis");
        let nothing = LowerBound { values: vec![-1.0, 0.0, 0.0], ..bound };
        assert!(recorded_floor(&nothing, 1).is_none(), "no positive minimum: no shift");
    }

    #[test]
    fn dictionaries_in_patterns_leave_out_declared_defaults() {
        let mut ctx = Context::new();
        qopt_dialect_fp::register(&mut ctx).unwrap();
        let items = parse_sexps("(fp.conv2d {pad = [1, 1, 1, 1], stride = [1, 1]} ?t ?x ?w)").unwrap();
        let searcher = pattern(&mut ctx, &items[0]).unwrap();
        let identity = parse_attr_dict(&mut ctx, "{pad = [1, 1, 1, 1]}").unwrap();
        let attrs: Vec<Attribute> = searcher
            .ast
            .as_ref()
            .iter()
            .filter_map(|n| match n {
                ENodeOrVar::ENode(Node::Attr(a)) => Some(*a),
                _ => None,
            })
            .collect();
        assert_eq!(attrs, [identity]);
    }

    #[test]
    fn dim_is_reads_one_static_dimension_of_the_type() {
        let mut ctx = Context::new();
        let i32 = ctx.common().i32;
        let ty = ctx.tensor_type(&[8, 4, 3, qopt_ir_core::DYNAMIC], i32);
        let mut memo = crate::analysis::Memo::default();
        let analysis =
            EqAnalysis::new(&mut ctx, &mut memo, qopt_interp::KernelRegistry::new(), Relation::Exact, 0);
        let mut egraph: EGraph<Node, EqAnalysis<'_>> = EGraph::new(analysis);
        egraph.analysis.arg_types.push(ty);
        let w = egraph.add(Node::Arg(0));
        let untyped = egraph.add(Node::Int(3));
        assert!(dim_is(&egraph, w, 2, 3));
        assert!(dim_is(&egraph, w, -4, 8));
        assert!(!dim_is(&egraph, w, 1, 3));
        assert!(!dim_is(&egraph, w, -1, 1), "a dynamic dimension has no size");
        assert!(!dim_is(&egraph, w, 4, 3) && !dim_is(&egraph, w, -5, 8), "out of range");
        assert!(!dim_is(&egraph, untyped, 0, 3));
        assert!(conditions("(dim-is ?w 2 3)").is_ok());
        assert!(conditions("(dim-is ?w 2 -1)").is_err());
        assert!(conditions("(dim-is ?w two 3)").is_err());
    }
}
