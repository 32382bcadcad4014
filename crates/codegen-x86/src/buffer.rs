//! The element buffers a compiled program reads and writes: [`Elements`],
//! [`ElementsMut`] and their [`ElementType`].
//!
//! The element types are the interpreter's storage types (`DType`): a
//! compiled function's inputs, outputs and intermediate values hold their
//! elements as the interpreter's tensors do, so values cross between
//! machine code and the interpreter's kernels (host calls) as plain bytes.
//! Running a program checks the buffers against its signature (type and
//! length) before any generated code sees a pointer, so a mismatch is an
//! error, never a stray read or write.

use qopt_interp::DType;
use std::fmt;

/// Declares [`ElementType`], [`Elements`] and [`ElementsMut`] from one list
/// of `(variant, Rust element type, name, doc)`.
macro_rules! element_buffers {
    ($(($variant:ident, $rust:ty, $name:literal, $doc:literal)),* $(,)?) => {
        /// The element type of a buffer: the interpreter's storage type of
        /// the IR element type (`iN` storage of at most 8 bits is `I8`,
        /// `uN` is `U8`, quantized types their storage's, `i1` is `Bool`).
        #[derive(Copy, Clone, PartialEq, Eq, Hash, Debug)]
        pub enum ElementType {
            $(#[doc = $doc] $variant,)*
        }

        impl ElementType {
            /// Bytes per element.
            pub fn size(self) -> usize {
                match self {
                    $(ElementType::$variant => std::mem::size_of::<$rust>(),)*
                }
            }

            /// The interpreter's storage type of the same elements.
            pub fn dtype(self) -> DType {
                match self {
                    $(ElementType::$variant => DType::$variant,)*
                }
            }

            /// The element type holding the interpreter's `dtype`.
            pub fn of_dtype(dtype: DType) -> ElementType {
                match dtype {
                    $(DType::$variant => ElementType::$variant,)*
                }
            }
        }

        impl fmt::Display for ElementType {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(match self {
                    $(ElementType::$variant => $name,)*
                })
            }
        }

        /// An input buffer.
        #[derive(Copy, Clone, Debug)]
        pub enum Elements<'a> {
            $(#[doc = $doc] $variant(&'a [$rust]),)*
        }

        impl<'a> Elements<'a> {
            /// A view of `len` elements of `element` at `ptr`.
            ///
            /// # Safety
            /// `ptr` must address `len` initialized elements of `element`,
            /// aligned for them (booleans 0 or 1), that stay valid and
            /// unwritten for `'a`.
            pub unsafe fn from_raw_parts(element: ElementType, ptr: *const u8, len: usize) -> Elements<'a> {
                // SAFETY: the caller's contract.
                unsafe {
                    match element {
                        $(ElementType::$variant => Elements::$variant(std::slice::from_raw_parts(ptr.cast(), len)),)*
                    }
                }
            }

            /// The element type.
            pub fn element_type(&self) -> ElementType {
                match self {
                    $(Elements::$variant(_) => ElementType::$variant,)*
                }
            }

            /// Number of elements.
            pub fn len(&self) -> usize {
                match self {
                    $(Elements::$variant(v) => v.len(),)*
                }
            }

            /// The address of the first element.
            pub(crate) fn as_ptr(&self) -> *const u8 {
                match self {
                    $(Elements::$variant(v) => v.as_ptr().cast(),)*
                }
            }
        }

        /// An output buffer.
        #[derive(Debug)]
        pub enum ElementsMut<'a> {
            $(#[doc = $doc] $variant(&'a mut [$rust]),)*
        }

        impl<'a> ElementsMut<'a> {
            /// A mutable view of `len` elements of `element` at `ptr`.
            ///
            /// # Safety
            /// `ptr` must address `len` initialized elements of `element`,
            /// aligned for them (booleans 0 or 1), that nothing else reads
            /// or writes for `'a`.
            pub unsafe fn from_raw_parts(element: ElementType, ptr: *mut u8, len: usize) -> ElementsMut<'a> {
                // SAFETY: the caller's contract.
                unsafe {
                    match element {
                        $(ElementType::$variant => ElementsMut::$variant(std::slice::from_raw_parts_mut(ptr.cast(), len)),)*
                    }
                }
            }

            /// A shared view of the same elements.
            pub fn as_elements(&self) -> Elements<'_> {
                match self {
                    $(ElementsMut::$variant(v) => Elements::$variant(v),)*
                }
            }

            /// The element type.
            pub fn element_type(&self) -> ElementType {
                self.as_elements().element_type()
            }

            /// Number of elements.
            pub fn len(&self) -> usize {
                self.as_elements().len()
            }

            /// The address of the first element.
            pub(crate) fn as_mut_ptr(&mut self) -> *mut u8 {
                match self {
                    $(ElementsMut::$variant(v) => v.as_mut_ptr().cast(),)*
                }
            }
        }
    };
}

element_buffers! {
    (F32, f32, "f32", "IEEE binary32."),
    (F64, f64, "f64", "IEEE binary64."),
    (I8, i8, "i8", "Signed bytes (`i2` … `i8` storage)."),
    (U8, u8, "u8", "Unsigned bytes (`u1` … `u8` storage)."),
    (I16, i16, "i16", "Signed 16-bit integers (`i9` … `i16` storage)."),
    (I32, i32, "i32", "Signed 32-bit integers (`i17` … `i32`, `u9` … `u16`)."),
    (I64, i64, "i64", "Signed 64-bit integers (`i33` … `i64`, `u17` … `u32`)."),
    (Bool, bool, "i1", "Booleans, one byte each, 0 or 1."),
}

impl ElementType {
    /// Whether the built-in kernels compute on this type (f32 and bytes);
    /// values of other types are moved, aliased or handed to host calls.
    pub fn is_kernel_type(self) -> bool {
        matches!(self, ElementType::F32 | ElementType::I8 | ElementType::U8)
    }
}

impl Elements<'_> {
    /// No elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl ElementsMut<'_> {
    /// No elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}
