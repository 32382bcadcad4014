//! qopt's IR core: the [`Context`] (interned types, attributes, locations and the
//! dialect registry), the [`Module`] arenas with their edit operations, the `.qir`
//! text format ([`parse_module`], [`print_module`]), the [`verify`]er, pattern
//! rewriting ([`apply_patterns_greedily`]) and the pass manager ([`PassManager`]).
//!
//! Nothing here knows a dialect beyond the builtin `module` op and the `func`
//! dialect. See `docs/architecture.md` for the data structures and why.

#![warn(missing_docs)]

mod atomic_file;
mod attributes;
mod builtin;
mod context;
mod dense;
mod diag;
mod dialect;
mod entity;
pub mod equivalence;
mod float_text;
mod hash;
pub mod interfaces;
mod interned_names;
pub mod json;
mod location;
mod module;
mod random;
mod rewrite;
mod scratch_cleanup;
mod scratch_dir;
mod source;
mod types;
mod walk;

pub mod pass;
pub use pass::{
    BadOptionValue, Instrumentation, NamedPipeline, Pass, PassContext, PassError, PassFilter, PassInfo,
    PassInstrumentation, PassManager, PassOutcome, PassRegistry, PassResult, PassRun, PipelineFailure,
    RunReport, TimingNode, TimingTree,
};
#[cfg(any(test, feature = "testing"))]
pub mod test_ir;
#[cfg(any(test, feature = "testing"))]
pub mod testing;
mod text;
pub use text::{
    attr_to_string, loc_to_string, module_to_string, parse_module, parse_module_chunk, parse_source,
    print_module, print_op, split_input, type_to_string, InputChunk, MAX_ERRORS, MAX_NESTING,
};

pub use atomic_file::{scratch_path_beside, write_file_atomically, write_files_atomically};
pub use attributes::{AttrData, Attribute, DenseElements};
pub use builtin::{function_signature, io_names, ARG_NAMES, RESULT_NAMES};
pub use context::{dialect_prefix, CommonTypes, Context, OpName, Symbol};
pub use dense::{
    decode_int, dense_values_f64, dense_values_i128, element_kind, encode_int, static_num_elements,
    ElementKind,
};
pub use diag::{Diagnostic, Diagnostics, Severity, SharedText, SourceMap};
pub use dialect::{
    Arity, Dialect, FoldFn, FoldResult, InferTypesFn, Interfaces, OpDef, OpView, Traits, VerifyFn,
};
pub use entity::{Arena, BlockId, EntityId, OpId, RegionId, UseId, ValueId};
pub use float_text::{bits_to_f64, f64_to_bits};
pub use hash::{FxBuild, FxHashMap, FxHashSet, FxHasher, FxIndexSet};
pub use location::{Location, LocationData, SrcPos};
pub use module::{EraseError, Module, OperationState, SymbolTable, Use, ValueDef};
pub use random::SplitMix64;
pub use rewrite::{
    apply_patterns_greedily, constant_value, is_splat_of, Changes, GreedyConfig, GreedyStats, InsertPoint,
    PatternSet, RewritePattern, Rewriter,
};
pub use scratch_cleanup::{with_interrupts_deferred, ScratchGuard};
pub use scratch_dir::ScratchDir;
pub use source::SourceText;
pub use types::{FloatKind, IntType, QuantParams, QuantType, Signedness, Type, TypeData, DYNAMIC, MAX_DIM};
pub use walk::{PostOrder, PreOrder};

mod verify;
pub use verify::{verify, verify_op};

#[cfg(test)]
mod module_tests;
#[cfg(test)]
mod rewrite_tests;
