//! Dialects and op definitions: how a crate tells qopt what its ops mean.
//!
//! A dialect is any type implementing [`Dialect`]; `ctx.register_dialect(...)`
//! adds its [`OpDef`]s to the [`crate::Context`]. An `OpDef` keeps together what
//! an op is: name, summary and description (with a `.qir` example), arity,
//! [`Traits`], a verifier, result-type inference, a folder, and typed interfaces
//! that passes query ("which operand is the weight?") instead of matching op names.
//! Registration is open to crates outside this workspace.

use crate::attributes::Attribute;
use crate::context::{Context, OpName};
use crate::entity::{OpId, ValueId};
use crate::location::Location;
use crate::module::{Module, SymbolTable};
use crate::rewrite::{RewritePattern, Rewriter};
use crate::types::Type;
use smallvec::SmallVec;
use std::any::{Any, TypeId};
use std::fmt;

/// How many operands, results or regions an op takes.
#[derive(Copy, Clone, PartialEq, Eq, Debug)]
pub enum Arity {
    /// Exactly this many.
    Exact(u32),
    /// At least this many.
    AtLeast(u32),
    /// Between the two bounds, inclusive.
    Range(u32, u32),
}

impl Arity {
    /// True if `n` is allowed.
    pub fn accepts(self, n: usize) -> bool {
        let n = n as u64;
        match self {
            Arity::Exact(k) => n == k as u64,
            Arity::AtLeast(k) => n >= k as u64,
            Arity::Range(lo, hi) => n >= lo as u64 && n <= hi as u64,
        }
    }
}

impl fmt::Display for Arity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Arity::Exact(k) => write!(f, "{k}"),
            Arity::AtLeast(k) => write!(f, "at least {k}"),
            Arity::Range(lo, hi) => write!(f, "{lo} to {hi}"),
        }
    }
}

/// Op traits: facts passes and the verifier rely on. Combine with `|`.
#[derive(Copy, Clone, PartialEq, Eq, Default, Hash)]
pub struct Traits(u32);

impl Traits {
    /// No traits.
    pub const NONE: Traits = Traits(0);
    /// No side effects: unused results make the op dead; equal ops may be merged.
    pub const PURE: Traits = Traits(1);
    /// Operand order does not matter (for two operands).
    pub const COMMUTATIVE: Traits = Traits(1 << 1);
    /// Works element by element (with broadcasting where the op says so).
    pub const ELEMENTWISE: Traits = Traits(1 << 2);
    /// All operands and results have one type.
    pub const SAME_OPERANDS_AND_RESULT_TYPE: Traits = Traits(1 << 3);
    /// Passes a quantized value through unchanged in meaning (relu, reshape, ...).
    pub const QUANT_AGNOSTIC: Traits = Traits(1 << 4);
    /// Ends a block.
    pub const TERMINATOR: Traits = Traits(1 << 5);
    /// Its regions may not use values defined outside the op.
    pub const ISOLATED_FROM_ABOVE: Traits = Traits(1 << 6);
    /// Its regions' blocks need no terminator.
    pub const NO_TERMINATOR: Traits = Traits(1 << 7);
    /// Defines a symbol through its `sym_name` string attribute.
    pub const SYMBOL: Traits = Traits(1 << 8);
    /// Its result is the constant in its `value` attribute (folding reads it).
    pub const CONSTANT_LIKE: Traits = Traits(1 << 9);

    const NAMES: [(Traits, &'static str); 10] = [
        (Traits::PURE, "Pure"),
        (Traits::COMMUTATIVE, "Commutative"),
        (Traits::ELEMENTWISE, "Elementwise"),
        (Traits::SAME_OPERANDS_AND_RESULT_TYPE, "SameOperandsAndResultType"),
        (Traits::QUANT_AGNOSTIC, "QuantAgnostic"),
        (Traits::TERMINATOR, "Terminator"),
        (Traits::ISOLATED_FROM_ABOVE, "IsolatedFromAbove"),
        (Traits::NO_TERMINATOR, "NoTerminator"),
        (Traits::SYMBOL, "Symbol"),
        (Traits::CONSTANT_LIKE, "ConstantLike"),
    ];

    /// True if every trait of `other` is in `self`.
    #[inline]
    pub fn contains(self, other: Traits) -> bool {
        self.0 & other.0 == other.0
    }

    /// The trait names, for docs and `--list-ops`.
    pub fn names(self) -> Vec<&'static str> {
        Self::NAMES.iter().filter(|(t, _)| self.contains(*t)).map(|(_, n)| *n).collect()
    }
}

impl std::ops::BitOr for Traits {
    type Output = Traits;
    fn bitor(self, rhs: Traits) -> Traits {
        Traits(self.0 | rhs.0)
    }
}

impl fmt::Debug for Traits {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Traits({})", self.names().join(" | "))
    }
}

/// A read-only view of one op for verifiers and interfaces.
#[derive(Copy, Clone)]
pub struct OpView<'a> {
    /// The context the module's handles belong to.
    pub ctx: &'a Context,
    /// The module holding the op.
    pub module: &'a Module,
    /// The op.
    pub op: OpId,
    /// The module's top-level symbols, when the caller built them (the verifier
    /// does), so symbol lookups are O(1); otherwise lookups scan the module.
    pub symbols: Option<&'a SymbolTable>,
}

impl<'a> OpView<'a> {
    /// A view without a prebuilt symbol table.
    pub fn new(ctx: &'a Context, module: &'a Module, op: OpId) -> OpView<'a> {
        OpView { ctx, module, op, symbols: None }
    }
    /// The top-level op named `@name`.
    pub fn lookup_symbol(&self, name: &str) -> Option<OpId> {
        match self.symbols {
            Some(table) => table.get(name),
            None => self.module.lookup_symbol(self.ctx, name),
        }
    }
    /// The op's name.
    pub fn name(&self) -> OpName {
        self.module.op_name(self.op)
    }
    /// Number of operands.
    pub fn num_operands(&self) -> usize {
        self.module.num_operands(self.op)
    }
    /// Number of results.
    pub fn num_results(&self) -> usize {
        self.module.num_results(self.op)
    }
    /// Operand `i`.
    pub fn operand(&self, i: usize) -> ValueId {
        self.module.operand(self.op, i)
    }
    /// The type of operand `i`.
    pub fn operand_type(&self, i: usize) -> Type {
        self.module.value_type(self.module.operand(self.op, i))
    }
    /// The types of all operands.
    pub fn operand_types(&self) -> SmallVec<[Type; 4]> {
        self.module.operands(self.op).map(|v| self.module.value_type(v)).collect()
    }
    /// The type of result `i`.
    pub fn result_type(&self, i: usize) -> Type {
        self.module.value_type(self.module.result(self.op, i))
    }
    /// The types of all results.
    pub fn result_types(&self) -> SmallVec<[Type; 2]> {
        self.module.results(self.op).map(|v| self.module.value_type(v)).collect()
    }
    /// The attribute dictionary.
    pub fn attrs(&self) -> Attribute {
        self.module.op_attrs(self.op)
    }
    /// One attribute by name.
    pub fn attr(&self, key: &str) -> Option<Attribute> {
        self.ctx.dict_get(self.module.op_attrs(self.op), key)
    }
    /// The op's location.
    pub fn loc(&self) -> Location {
        self.module.op_loc(self.op)
    }
}

/// What a folder produced for one result.
#[derive(Copy, Clone, PartialEq, Eq, Debug)]
pub enum FoldResult {
    /// The result equals this existing value.
    Value(ValueId),
    /// The result is this constant (the dialect materializes it).
    Constant(Attribute),
}

/// Checks one op beyond the structural checks; returns a message for the op's location.
pub type VerifyFn = fn(&OpView<'_>) -> Result<(), String>;

/// Computes result types from operand types and attributes.
pub type InferTypesFn =
    fn(ctx: &mut Context, operand_types: &[Type], attrs: Attribute) -> Result<SmallVec<[Type; 1]>, String>;

/// Folds an op given the constants its operands hold (`None` = not constant).
/// Returns one [`FoldResult`] per result, or `None` if it cannot fold.
pub type FoldFn = fn(
    ctx: &mut Context,
    module: &Module,
    op: OpId,
    constants: &[Option<Attribute>],
) -> Option<SmallVec<[FoldResult; 1]>>;

/// Typed interfaces of an op, looked up by type. An interface is any `'static`
/// value (usually a struct of data or function pointers) that a pass knows.
#[derive(Default)]
pub struct Interfaces {
    entries: Vec<(TypeId, Box<dyn Any + Send + Sync>)>,
}

impl Interfaces {
    /// Adds (or replaces) interface `I`.
    pub fn insert<I: Any + Send + Sync>(&mut self, value: I) {
        let id = TypeId::of::<I>();
        self.entries.retain(|(t, _)| *t != id);
        self.entries.push((id, Box::new(value)));
    }
    /// Interface `I`, if the op has it.
    pub fn get<I: Any>(&self) -> Option<&I> {
        let id = TypeId::of::<I>();
        self.entries.iter().find(|(t, _)| *t == id).and_then(|(_, v)| v.downcast_ref())
    }
    /// Interface `I` for editing, if present.
    pub fn get_mut<I: Any>(&mut self) -> Option<&mut I> {
        let id = TypeId::of::<I>();
        self.entries.iter_mut().find(|(t, _)| *t == id).and_then(|(_, v)| v.downcast_mut())
    }
}

/// The definition of one op. Build with [`OpDef::new`] and the builder methods
/// (`.description(..)`, `.operands(..)`, `.traits(..)`, `.verifier(..)`, ...).
pub struct OpDef {
    /// Full name, `dialect.op`.
    pub name: &'static str,
    /// One line.
    pub summary: &'static str,
    /// Prose with a `.qir` example.
    pub description: &'static str,
    /// Operand count.
    pub operands: Arity,
    /// Result count.
    pub results: Arity,
    /// Region count.
    pub regions: Arity,
    /// Traits.
    pub traits: Traits,
    /// Op-specific checks.
    pub verify: Option<VerifyFn>,
    /// Result-type inference; the verifier checks declared types against it.
    pub infer_types: Option<InferTypesFn>,
    /// Folder.
    pub fold: Option<FoldFn>,
    /// Typed interfaces.
    pub interfaces: Interfaces,
}

impl OpDef {
    /// An op with the given name and summary, no operands, one result, no regions.
    pub fn new(name: &'static str, summary: &'static str) -> OpDef {
        OpDef {
            name,
            summary,
            description: "",
            operands: Arity::Exact(0),
            results: Arity::Exact(1),
            regions: Arity::Exact(0),
            traits: Traits::NONE,
            verify: None,
            infer_types: None,
            fold: None,
            interfaces: Interfaces::default(),
        }
    }
    /// Sets the description.
    pub fn description(mut self, text: &'static str) -> Self {
        self.description = text;
        self
    }
    /// Sets the operand arity.
    pub fn operands(mut self, arity: Arity) -> Self {
        self.operands = arity;
        self
    }
    /// Sets the result arity.
    pub fn results(mut self, arity: Arity) -> Self {
        self.results = arity;
        self
    }
    /// Sets the region arity.
    pub fn regions(mut self, arity: Arity) -> Self {
        self.regions = arity;
        self
    }
    /// Adds traits.
    pub fn traits(mut self, traits: Traits) -> Self {
        self.traits = self.traits | traits;
        self
    }
    /// Sets the verifier.
    pub fn verifier(mut self, f: VerifyFn) -> Self {
        self.verify = Some(f);
        self
    }
    /// Sets result-type inference.
    pub fn infer(mut self, f: InferTypesFn) -> Self {
        self.infer_types = Some(f);
        self
    }
    /// Sets the folder.
    pub fn folder(mut self, f: FoldFn) -> Self {
        self.fold = Some(f);
        self
    }
    /// Adds an interface.
    pub fn interface<I: Any + Send + Sync>(mut self, value: I) -> Self {
        self.interfaces.insert(value);
        self
    }
    /// True if the op has all of `traits`.
    #[inline]
    pub fn has(&self, traits: Traits) -> bool {
        self.traits.contains(traits)
    }
}

impl fmt::Debug for OpDef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OpDef").field("name", &self.name).field("traits", &self.traits).finish()
    }
}

/// A dialect: a named family of ops (and optionally types, patterns, constants).
pub trait Dialect: Send + Sync + 'static {
    /// The namespace, `fp` for `fp.conv2d`.
    fn name(&self) -> &'static str;
    /// One line for `--list-dialects`.
    fn summary(&self) -> &'static str {
        ""
    }
    /// The ops of the dialect.
    fn ops(&self) -> Vec<OpDef>;
    /// Checks a type of this dialect's namespace (`!name...`) wherever it appears.
    fn verify_type(&self, _ctx: &Context, _ty: Type) -> Result<(), String> {
        Ok(())
    }
    /// Creates an op producing constant `value` of type `ty` at the rewriter's
    /// insertion point, for folding. `None` if the dialect cannot.
    fn materialize_constant(
        &self,
        _rewriter: &mut Rewriter<'_>,
        _value: Attribute,
        _ty: Type,
        _loc: Location,
    ) -> Option<ValueId> {
        None
    }
    /// Canonicalization patterns the `canonicalize` pass applies.
    fn canonicalization_patterns(&self) -> Vec<Box<dyn RewritePattern>> {
        Vec::new()
    }
    /// The identities that define or relate this dialect's ops, for the
    /// equivalence checker (`qopt --verify-equiv`); see
    /// [`crate::equivalence`].
    fn equivalence_rules(&self) -> Vec<crate::equivalence::EquivRule> {
        Vec::new()
    }
}
