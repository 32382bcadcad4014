//! The `.qir` text format: lexer, parser and printer (grammar in `docs/qir-syntax.md`).

mod lexer;
mod parser;
mod printer;
mod split;

pub use parser::{parse_module, parse_module_chunk, parse_source, MAX_ERRORS, MAX_NESTING};
pub use printer::{attr_to_string, loc_to_string, module_to_string, print_module, print_op, type_to_string};
pub use split::{split_input, InputChunk};
