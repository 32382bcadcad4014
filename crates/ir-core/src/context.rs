//! The [`Context`]: interners for types, attributes, locations, strings and op
//! names, and the registry of dialects.
//!
//! Everything interned is append-only: a handle minted by a context stays valid
//! for the context's life, and equal data always gets the same handle. Interning
//! needs `&mut Context`; reading needs `&Context`, so analyses can share a context
//! across threads. Nothing here knows a dialect beyond the builtin `module` op and
//! the `func` dialect, which [`Context::new`] registers.
//!
//! Besides dialects, a context holds **extensions**: registries keyed by their
//! Rust type that crates above ir-core consult, such as the interpreter's kernel
//! table or the calibration observers and range methods of the quantization
//! passes. They are installed by the same setup code that registers dialects, so
//! a downstream driver adds kernels or a calibration method exactly where it adds
//! its dialect, and a pass finds them through the `&mut Context` it is given.

use crate::attributes::{AttrData, Attribute, DenseElements};
use crate::dialect::{Dialect, Interfaces, OpDef};
use crate::hash::{FxHashMap, FxIndexSet};
use crate::location::{Location, LocationData};
use crate::types::{FloatKind, IntType, QuantType, Signedness, Type, TypeData};
use std::sync::Arc;

/// An interned string (attribute keys, symbol names, file names).
#[derive(Copy, Clone, PartialEq, Eq, Hash, Debug, PartialOrd, Ord)]
pub struct Symbol(pub(crate) u32);

/// An interned operation name such as `fp.conv2d`.
#[derive(Copy, Clone, PartialEq, Eq, Hash, Debug, PartialOrd, Ord)]
pub struct OpName(pub(crate) u32);

impl OpName {
    /// `builtin.module`, interned first by every context.
    pub const MODULE: OpName = OpName(0);
    /// `func.func`.
    pub const FUNC: OpName = OpName(1);
    /// `func.return`.
    pub const RETURN: OpName = OpName(2);
    /// `func.call`.
    pub const CALL: OpName = OpName(3);
}

/// What the registry knows about one interned op name.
#[derive(Clone)]
struct OpNameInfo {
    def: Option<Arc<OpDef>>,
    /// Index into `dialects` of the dialect named by the prefix, if registered.
    dialect: Option<u32>,
}

/// Frequently used type handles, interned once.
#[derive(Copy, Clone, Debug)]
pub struct CommonTypes {
    /// `f32`
    pub f32: Type,
    /// `f64`
    pub f64: Type,
    /// `i1`
    pub i1: Type,
    /// `i32`
    pub i32: Type,
    /// `i64`
    pub i64: Type,
    /// `index`
    pub index: Type,
}

/// Interners and the dialect registry. See the module docs.
pub struct Context {
    types: FxIndexSet<TypeData>,
    attrs: FxIndexSet<AttrData>,
    locations: FxIndexSet<LocationData>,
    strings: FxIndexSet<Box<str>>,
    op_names: FxIndexSet<Box<str>>,
    op_info: Vec<OpNameInfo>,
    dialects: Vec<Arc<dyn Dialect>>,
    dialect_index: FxHashMap<Box<str>, u32>,
    allow_unregistered: bool,
    common: CommonTypes,
    extensions: Interfaces,
}

impl Default for Context {
    fn default() -> Self {
        Self::new()
    }
}

impl Context {
    /// A context with the builtin `module` op and the `func` dialect registered.
    pub fn new() -> Context {
        let placeholder = Type(0);
        let mut ctx = Context {
            types: FxIndexSet::default(),
            attrs: FxIndexSet::default(),
            locations: FxIndexSet::default(),
            strings: FxIndexSet::default(),
            op_names: FxIndexSet::default(),
            op_info: Vec::new(),
            dialects: Vec::new(),
            dialect_index: FxHashMap::default(),
            allow_unregistered: false,
            extensions: Interfaces::default(),
            common: CommonTypes {
                f32: placeholder,
                f64: placeholder,
                i1: placeholder,
                i32: placeholder,
                i64: placeholder,
                index: placeholder,
            },
        };
        let empty = ctx.intern_attr(AttrData::Dict(Box::new([])));
        debug_assert_eq!(empty, Attribute::EMPTY_DICT);
        let unknown = ctx.intern_loc(LocationData::Unknown);
        debug_assert_eq!(unknown, Location::UNKNOWN);
        for (expected, name) in [
            (OpName::MODULE, "builtin.module"),
            (OpName::FUNC, "func.func"),
            (OpName::RETURN, "func.return"),
            (OpName::CALL, "func.call"),
        ] {
            let got = ctx.op_name(name);
            debug_assert_eq!(got, expected);
        }
        ctx.common = CommonTypes {
            f32: ctx.float_type(FloatKind::F32),
            f64: ctx.float_type(FloatKind::F64),
            i1: ctx.int_type(1, Signedness::Signless),
            i32: ctx.int_type(32, Signedness::Signless),
            i64: ctx.int_type(64, Signedness::Signless),
            index: ctx.intern_type(TypeData::Index),
        };
        crate::builtin::register_builtin_dialects(&mut ctx);
        ctx
    }

    /// Frequently used types.
    #[inline]
    pub fn common(&self) -> CommonTypes {
        self.common
    }

    // ---- extensions -------------------------------------------------------

    /// The extension of type `E`, if one was installed (see the module docs).
    pub fn extension<E: std::any::Any>(&self) -> Option<&E> {
        self.extensions.get::<E>()
    }

    /// Installs `value` as the extension of its type, replacing any earlier one.
    pub fn set_extension<E: std::any::Any + Send + Sync>(&mut self, value: E) {
        self.extensions.insert(value);
    }

    /// The extension of type `E`, installing `E::default()` first if there is none.
    pub fn extension_mut<E: std::any::Any + Send + Sync + Default>(&mut self) -> &mut E {
        if self.extensions.get::<E>().is_none() {
            self.extensions.insert(E::default());
        }
        // invariant: inserted just above if it was missing.
        self.extensions.get_mut::<E>().expect("extension present")
    }

    // ---- dialect registry -------------------------------------------------

    /// Registers a dialect and all its ops. A dialect name may be registered once.
    pub fn register_dialect<D: Dialect>(&mut self, dialect: D) -> Result<(), String> {
        self.register_dialect_arc(Arc::new(dialect))
    }

    /// [`Self::register_dialect`] for an already shared dialect.
    pub fn register_dialect_arc(&mut self, dialect: Arc<dyn Dialect>) -> Result<(), String> {
        let name = dialect.name();
        if self.dialect_index.contains_key(name) {
            return Err(format!("dialect '{name}' is already registered"));
        }
        let ops = dialect.ops();
        // Check everything before changing anything, so a rejected dialect leaves
        // the registry as it was.
        for (i, def) in ops.iter().enumerate() {
            let full = def.name;
            if full.split_once('.').map(|(d, _)| d) != Some(name) {
                return Err(format!("op '{full}' does not start with its dialect name '{name}.'"));
            }
            let already = self.lookup_op_name(full).is_some_and(|op| self.op_def(op).is_some());
            if already || ops[..i].iter().any(|d| d.name == full) {
                return Err(format!("op '{full}' is registered twice"));
            }
        }
        let index = self.dialects.len() as u32;
        self.dialect_index.insert(name.into(), index);
        self.dialects.push(dialect);
        for def in ops {
            let op = self.op_name(def.name);
            self.op_info[op.0 as usize].def = Some(Arc::new(def));
        }
        // Names interned before the dialect arrived now know their dialect.
        for (i, op_name) in self.op_names.iter().enumerate() {
            if dialect_prefix(op_name) == name {
                self.op_info[i].dialect = Some(index);
            }
        }
        Ok(())
    }

    /// The registered dialects, in registration order.
    pub fn dialects(&self) -> impl Iterator<Item = &dyn Dialect> + '_ {
        self.dialects.iter().map(|d| &**d)
    }

    /// The dialect registered under `name`.
    pub fn dialect(&self, name: &str) -> Option<&dyn Dialect> {
        self.dialect_index.get(name).map(|&i| &*self.dialects[i as usize])
    }

    /// The dialect registered under `name`, shared.
    pub fn dialect_arc(&self, name: &str) -> Option<Arc<dyn Dialect>> {
        self.dialect_index.get(name).map(|&i| Arc::clone(&self.dialects[i as usize]))
    }

    /// The dialect an op name belongs to, if that dialect is registered.
    pub fn dialect_of(&self, op: OpName) -> Option<&dyn Dialect> {
        self.op_info[op.0 as usize].dialect.map(|i| &*self.dialects[i as usize])
    }

    /// Every registered op definition, sorted by name.
    pub fn op_defs(&self) -> Vec<&OpDef> {
        let mut defs: Vec<&OpDef> = self.op_info.iter().filter_map(|i| i.def.as_deref()).collect();
        defs.sort_by_key(|d| d.name);
        defs
    }

    /// Whether ops of unregistered dialects pass verification.
    pub fn allows_unregistered(&self) -> bool {
        self.allow_unregistered
    }

    /// Sets whether ops of unregistered dialects pass verification.
    pub fn set_allow_unregistered(&mut self, allow: bool) {
        self.allow_unregistered = allow;
    }

    // ---- op names ---------------------------------------------------------

    /// Interns an op name.
    pub fn op_name(&mut self, name: &str) -> OpName {
        if let Some(i) = self.op_names.get_index_of(name) {
            return OpName(i as u32);
        }
        let (i, _) = self.op_names.insert_full(name.into());
        let dialect = self.dialect_index.get(dialect_prefix(name)).copied();
        self.op_info.push(OpNameInfo { def: None, dialect });
        OpName(i as u32)
    }

    /// Looks up an op name without interning it.
    pub fn lookup_op_name(&self, name: &str) -> Option<OpName> {
        self.op_names.get_index_of(name).map(|i| OpName(i as u32))
    }

    /// The text of an op name.
    #[inline]
    pub fn op_name_str(&self, op: OpName) -> &str {
        &self.op_names[op.0 as usize]
    }

    /// The registered definition of an op, if any.
    #[inline]
    pub fn op_def(&self, op: OpName) -> Option<&OpDef> {
        self.op_info[op.0 as usize].def.as_deref()
    }

    // ---- strings ----------------------------------------------------------

    /// Interns a string.
    pub fn symbol(&mut self, text: &str) -> Symbol {
        if let Some(i) = self.strings.get_index_of(text) {
            return Symbol(i as u32);
        }
        Symbol(self.strings.insert_full(text.into()).0 as u32)
    }

    /// Looks up a string without interning it.
    pub fn lookup_symbol(&self, text: &str) -> Option<Symbol> {
        self.strings.get_index_of(text).map(|i| Symbol(i as u32))
    }

    /// The text of an interned string.
    #[inline]
    pub fn symbol_str(&self, s: Symbol) -> &str {
        &self.strings[s.0 as usize]
    }

    // ---- types ------------------------------------------------------------

    /// Interns a type.
    pub fn intern_type(&mut self, data: TypeData) -> Type {
        if let Some(i) = self.types.get_index_of(&data) {
            return Type(i as u32);
        }
        Type(self.types.insert_full(data).0 as u32)
    }

    /// What a type handle stands for.
    #[inline]
    pub fn type_data(&self, t: Type) -> &TypeData {
        &self.types[t.0 as usize]
    }

    /// A float type.
    pub fn float_type(&mut self, kind: FloatKind) -> Type {
        self.intern_type(TypeData::Float(kind))
    }

    /// An integer type; `width` must be 1..=64.
    pub fn int_type(&mut self, width: u8, signedness: Signedness) -> Type {
        debug_assert!((1..=64).contains(&width));
        self.intern_type(TypeData::Int(IntType { width, signedness }))
    }

    /// `tensor<shape x element>`.
    pub fn tensor_type(&mut self, shape: &[i64], element: Type) -> Type {
        self.intern_type(TypeData::Tensor { shape: shape.into(), element })
    }

    /// `(inputs) -> results`.
    pub fn function_type(&mut self, inputs: &[Type], results: &[Type]) -> Type {
        self.intern_type(TypeData::Function { inputs: inputs.into(), results: results.into() })
    }

    /// A quantized element type.
    pub fn quant_type(&mut self, quant: QuantType) -> Type {
        self.intern_type(TypeData::Quant(quant))
    }

    /// The shape of a tensor type, `None` for other types.
    pub fn tensor_shape(&self, t: Type) -> Option<&[i64]> {
        match self.type_data(t) {
            TypeData::Tensor { shape, .. } => Some(shape),
            _ => None,
        }
    }

    /// The element type of a tensor type, or the type itself for scalars.
    pub fn element_type(&self, t: Type) -> Type {
        match self.type_data(t) {
            TypeData::Tensor { element, .. } => *element,
            _ => t,
        }
    }

    /// Bytes one element of scalar or quantized type `t` takes in dense storage
    /// (see [`DenseElements`]); `None` for types that cannot be elements.
    pub fn element_storage_bytes(&self, t: Type) -> Option<usize> {
        match self.type_data(t) {
            TypeData::Float(k) => Some(k.bits() as usize / 8),
            TypeData::Int(i) => Some(crate::types::storage_bytes_for_int(i.width)),
            TypeData::Index => Some(8),
            TypeData::Quant(q) => Some(crate::types::storage_bytes_for_int(q.storage.width)),
            _ => None,
        }
    }

    // ---- attributes -------------------------------------------------------

    /// Interns an attribute. Dictionary entries are sorted by key text here, so
    /// callers may pass them in any order; a repeated key keeps the last value.
    pub fn intern_attr(&mut self, data: AttrData) -> Attribute {
        let data = match data {
            AttrData::Dict(entries) => AttrData::Dict(self.canonical_dict(entries.into_vec())),
            other => other,
        };
        if let Some(i) = self.attrs.get_index_of(&data) {
            return Attribute(i as u32);
        }
        Attribute(self.attrs.insert_full(data).0 as u32)
    }

    fn canonical_dict(&self, mut entries: Vec<(Symbol, Attribute)>) -> Box<[(Symbol, Attribute)]> {
        entries.sort_by(|a, b| self.symbol_str(a.0).cmp(self.symbol_str(b.0)));
        // Keep the last value of a repeated key.
        let mut out: Vec<(Symbol, Attribute)> = Vec::with_capacity(entries.len());
        for e in entries {
            match out.last_mut() {
                Some(last) if last.0 == e.0 => *last = e,
                _ => out.push(e),
            }
        }
        out.into_boxed_slice()
    }

    /// What an attribute handle stands for.
    #[inline]
    pub fn attr_data(&self, a: Attribute) -> &AttrData {
        &self.attrs[a.0 as usize]
    }

    /// An integer attribute of type `ty`.
    pub fn int_attr(&mut self, value: i128, ty: Type) -> Attribute {
        self.intern_attr(AttrData::Int { value, ty })
    }

    /// An `i64` integer attribute.
    pub fn i64_attr(&mut self, value: i64) -> Attribute {
        let ty = self.common.i64;
        self.int_attr(value as i128, ty)
    }

    /// A float attribute of float type `ty`, rounding `value` to that type.
    pub fn float_attr(&mut self, value: f64, ty: Type) -> Attribute {
        let bits = match self.type_data(ty) {
            TypeData::Float(k @ (FloatKind::F16 | FloatKind::BF16)) => {
                crate::float_text::f64_to_bits(value, *k)
            }
            TypeData::Float(FloatKind::F32) => (value as f32).to_bits() as u64,
            _ => value.to_bits(),
        };
        self.intern_attr(AttrData::Float { bits, ty })
    }

    /// A string attribute.
    pub fn string_attr(&mut self, text: &str) -> Attribute {
        self.intern_attr(AttrData::String(text.as_bytes().into()))
    }

    /// A bool attribute.
    pub fn bool_attr(&mut self, value: bool) -> Attribute {
        self.intern_attr(AttrData::Bool(value))
    }

    /// The unit attribute.
    pub fn unit_attr(&mut self) -> Attribute {
        self.intern_attr(AttrData::Unit)
    }

    /// An array attribute.
    pub fn array_attr(&mut self, items: &[Attribute]) -> Attribute {
        self.intern_attr(AttrData::Array(items.into()))
    }

    /// An array of `i64` integer attributes.
    pub fn i64_array_attr(&mut self, items: &[i64]) -> Attribute {
        let items: Vec<Attribute> = items.iter().map(|&v| self.i64_attr(v)).collect();
        self.array_attr(&items)
    }

    /// A type attribute.
    pub fn type_attr(&mut self, ty: Type) -> Attribute {
        self.intern_attr(AttrData::Type(ty))
    }

    /// A symbol reference `@name`.
    pub fn symbol_ref_attr(&mut self, name: &str) -> Attribute {
        let s = self.symbol(name);
        self.intern_attr(AttrData::SymbolRef(s))
    }

    /// A dense elements attribute; see [`DenseElements`] for the byte layout.
    pub fn dense_attr(&mut self, dense: DenseElements) -> Attribute {
        self.intern_attr(AttrData::Dense(dense))
    }

    /// A dictionary attribute from `(key, value)` pairs in any order.
    pub fn dict_attr(&mut self, entries: &[(&str, Attribute)]) -> Attribute {
        let entries: Vec<(Symbol, Attribute)> = entries.iter().map(|&(k, v)| (self.symbol(k), v)).collect();
        self.intern_attr(AttrData::Dict(entries.into_boxed_slice()))
    }

    /// The entries of a dictionary attribute (empty for any other attribute).
    pub fn dict_entries(&self, dict: Attribute) -> &[(Symbol, Attribute)] {
        match self.attr_data(dict) {
            AttrData::Dict(entries) => entries,
            _ => &[],
        }
    }

    /// The value under `key` in a dictionary attribute.
    pub fn dict_get(&self, dict: Attribute, key: &str) -> Option<Attribute> {
        let key = self.lookup_symbol(key)?;
        self.dict_entries(dict).iter().find(|e| e.0 == key).map(|e| e.1)
    }

    /// `dict` with `key` set to `value`.
    pub fn dict_set(&mut self, dict: Attribute, key: &str, value: Attribute) -> Attribute {
        let key = self.symbol(key);
        let mut entries: Vec<(Symbol, Attribute)> = self.dict_entries(dict).to_vec();
        entries.retain(|e| e.0 != key);
        entries.push((key, value));
        self.intern_attr(AttrData::Dict(entries.into_boxed_slice()))
    }

    /// `dict` without `key`.
    pub fn dict_remove(&mut self, dict: Attribute, key: &str) -> Attribute {
        let Some(key) = self.lookup_symbol(key) else { return dict };
        let entries: Vec<(Symbol, Attribute)> =
            self.dict_entries(dict).iter().copied().filter(|e| e.0 != key).collect();
        self.intern_attr(AttrData::Dict(entries.into_boxed_slice()))
    }

    /// The integer in an `Int` attribute.
    pub fn attr_as_int(&self, a: Attribute) -> Option<i128> {
        match self.attr_data(a) {
            AttrData::Int { value, .. } => Some(*value),
            _ => None,
        }
    }

    /// The value of a `Float` attribute, widened to f64.
    pub fn attr_as_f64(&self, a: Attribute) -> Option<f64> {
        match self.attr_data(a) {
            AttrData::Float { bits, ty } => Some(crate::float_text::bits_to_f64(
                *bits,
                match self.type_data(*ty) {
                    TypeData::Float(k) => *k,
                    _ => FloatKind::F64,
                },
            )),
            _ => None,
        }
    }

    /// The text of a `String` attribute, if it is UTF-8.
    pub fn attr_as_str(&self, a: Attribute) -> Option<&str> {
        match self.attr_data(a) {
            AttrData::String(bytes) => std::str::from_utf8(bytes).ok(),
            _ => None,
        }
    }

    /// The items of an `Array` attribute.
    pub fn attr_as_array(&self, a: Attribute) -> Option<&[Attribute]> {
        match self.attr_data(a) {
            AttrData::Array(items) => Some(items),
            _ => None,
        }
    }

    /// The items of an array of integers, if every item is an integer fitting i64.
    pub fn attr_as_i64_array(&self, a: Attribute) -> Option<Vec<i64>> {
        self.attr_as_array(a)?
            .iter()
            .map(|&i| self.attr_as_int(i).and_then(|v| i64::try_from(v).ok()))
            .collect()
    }

    // ---- locations --------------------------------------------------------

    /// Interns a location.
    pub fn intern_loc(&mut self, data: LocationData) -> Location {
        if let Some(i) = self.locations.get_index_of(&data) {
            return Location(i as u32);
        }
        Location(self.locations.insert_full(data).0 as u32)
    }

    /// What a location stands for.
    #[inline]
    pub fn loc_data(&self, l: Location) -> &LocationData {
        &self.locations[l.0 as usize]
    }

    /// Every name in `loc`: a name location's name and its child's names,
    /// every part of a fused one.
    pub fn location_names(&self, loc: Location) -> Vec<&str> {
        let mut names = Vec::new();
        let mut stack = vec![loc];
        while let Some(l) = stack.pop() {
            match self.loc_data(l) {
                LocationData::Name { name, child } => {
                    names.push(self.symbol_str(*name));
                    stack.push(*child);
                }
                LocationData::Fused(parts) => stack.extend(parts.iter().copied()),
                _ => {}
            }
        }
        names
    }

    /// `loc("name")`.
    pub fn name_loc(&mut self, name: &str) -> Location {
        let name = self.symbol(name);
        self.intern_loc(LocationData::Name { name, child: Location::UNKNOWN })
    }

    /// `loc("file":line:col)`.
    pub fn file_loc(&mut self, file: &str, line: u32, col: u32) -> Location {
        let file = self.symbol(file);
        self.intern_loc(LocationData::FileLineCol { file, line, col })
    }

    /// The fusion of several locations; unknowns and duplicates are dropped, and a
    /// single survivor is returned as is.
    pub fn fused_loc(&mut self, locs: &[Location]) -> Location {
        let mut parts: Vec<Location> = Vec::new();
        for &l in locs {
            let expanded: Vec<Location> = match self.loc_data(l) {
                LocationData::Unknown => Vec::new(),
                LocationData::Fused(inner) => inner.to_vec(),
                _ => vec![l],
            };
            for p in expanded {
                if !parts.contains(&p) {
                    parts.push(p);
                }
            }
        }
        match parts.len() {
            0 => Location::UNKNOWN,
            1 => parts[0],
            _ => self.intern_loc(LocationData::Fused(parts.into_boxed_slice())),
        }
    }

    /// Approximate bytes held by the type and attribute interners, dense data
    /// included (for memory reports; locations, strings and op names are small).
    pub fn heap_bytes(&self) -> usize {
        let dense: usize = self
            .attrs
            .iter()
            .map(|a| match a {
                AttrData::Dense(d) => d.bytes.len(),
                _ => 0,
            })
            .sum();
        self.types.capacity() * std::mem::size_of::<TypeData>()
            + self.attrs.capacity() * std::mem::size_of::<AttrData>()
            + dense
    }
}

/// The dialect part of an op name: `fp` in `fp.conv2d`.
pub fn dialect_prefix(op_name: &str) -> &str {
    op_name.split_once('.').map_or(op_name, |(d, _)| d)
}
