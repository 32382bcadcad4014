//! The element buffers a compiled kernel reads and writes: [`Elements`],
//! [`ElementsMut`] and their [`ElementType`].
//!
//! A kernel states the element type of its input and output; running it
//! checks the buffers against that signature (type and length) before any
//! generated code sees a pointer, so a mismatch is an error, never a stray
//! read or write.

use std::fmt;

/// The element type of a buffer as generated code sees it: 32-bit floats or
/// stored 8-bit integers (signed for `iN` storage, unsigned for `uN`).
#[derive(Copy, Clone, PartialEq, Eq, Hash, Debug)]
pub enum ElementType {
    /// IEEE binary32.
    F32,
    /// Signed bytes (`i1` … `i8` storage).
    I8,
    /// Unsigned bytes (`u1` … `u8` storage).
    U8,
}

impl ElementType {
    /// Bytes per element.
    pub fn size(self) -> usize {
        match self {
            ElementType::F32 => 4,
            ElementType::I8 | ElementType::U8 => 1,
        }
    }
}

impl fmt::Display for ElementType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ElementType::F32 => "f32",
            ElementType::I8 => "i8",
            ElementType::U8 => "u8",
        })
    }
}

/// An input buffer.
#[derive(Copy, Clone, Debug)]
pub enum Elements<'a> {
    /// f32 values.
    F32(&'a [f32]),
    /// Signed stored values.
    I8(&'a [i8]),
    /// Unsigned stored values.
    U8(&'a [u8]),
}

impl Elements<'_> {
    /// The element type.
    pub fn element_type(&self) -> ElementType {
        match self {
            Elements::F32(_) => ElementType::F32,
            Elements::I8(_) => ElementType::I8,
            Elements::U8(_) => ElementType::U8,
        }
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        match self {
            Elements::F32(v) => v.len(),
            Elements::I8(v) => v.len(),
            Elements::U8(v) => v.len(),
        }
    }

    /// No elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The address of the first element.
    pub(crate) fn as_ptr(&self) -> *const u8 {
        match self {
            Elements::F32(v) => v.as_ptr().cast(),
            Elements::I8(v) => v.as_ptr().cast(),
            Elements::U8(v) => v.as_ptr(),
        }
    }
}

/// An output buffer.
#[derive(Debug)]
pub enum ElementsMut<'a> {
    /// f32 values.
    F32(&'a mut [f32]),
    /// Signed stored values.
    I8(&'a mut [i8]),
    /// Unsigned stored values.
    U8(&'a mut [u8]),
}

impl ElementsMut<'_> {
    /// The element type.
    pub fn element_type(&self) -> ElementType {
        match self {
            ElementsMut::F32(_) => ElementType::F32,
            ElementsMut::I8(_) => ElementType::I8,
            ElementsMut::U8(_) => ElementType::U8,
        }
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        match self {
            ElementsMut::F32(v) => v.len(),
            ElementsMut::I8(v) => v.len(),
            ElementsMut::U8(v) => v.len(),
        }
    }

    /// No elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The address of the first element.
    pub(crate) fn as_mut_ptr(&mut self) -> *mut u8 {
        match self {
            ElementsMut::F32(v) => v.as_mut_ptr().cast(),
            ElementsMut::I8(v) => v.as_mut_ptr().cast(),
            ElementsMut::U8(v) => v.as_mut_ptr(),
        }
    }
}
