//! Op names in code: [`op_name_constants!`](crate::op_name_constants), the
//! `names` module of constants a dialect's op family declares, and
//! [`interned_op_names!`](crate::interned_op_names), a struct of op names
//! interned once, for passes that match ops by name in hot loops (an
//! `OpName` compare is an integer compare).

/// Declares a struct whose fields are interned op names, and its `new(ctx)`
/// that interns them:
///
/// ```
/// qopt_ir_core::interned_op_names! {
///     /// The ops a chain is made of.
///     struct Names { mul = "test.mul", add = "test.add" }
/// }
/// let mut ctx = qopt_ir_core::Context::new();
/// let names = Names::new(&mut ctx);
/// assert_eq!(ctx.op_name_str(names.mul), "test.mul");
/// ```
#[macro_export]
macro_rules! interned_op_names {
    ($(#[$meta:meta])* $vis:vis struct $name:ident { $($field:ident = $op:expr),* $(,)? }) => {
        $(#[$meta])*
        $vis struct $name {
            $(
                #[doc = concat!("`", stringify!($op), "`.")]
                pub $field: $crate::OpName,
            )*
        }

        impl $name {
            /// The names, interned in `ctx`.
            $vis fn new(ctx: &mut $crate::Context) -> $name {
                $name { $($field: ctx.op_name($op),)* }
            }
        }
    };
}

/// Declares `pub mod names`, one `&str` constant per op of a dialect's op
/// family, each documented with its name:
///
/// ```
/// mod family {
///     qopt_ir_core::op_name_constants! { CONV = "toy.conv", RELU = "toy.relu" }
/// }
/// assert_eq!(family::names::CONV, "toy.conv");
/// ```
#[macro_export]
macro_rules! op_name_constants {
    ($($name:ident = $op:literal),* $(,)?) => {
        /// The names of this family's ops.
        pub mod names {
            $(
                #[doc = concat!("`", $op, "`.")]
                pub const $name: &str = $op;
            )*
        }
    };
}
