//! Typed `u32` ids for the entities of the IR, and the arena that mints them.
//!
//! Every op, value, block and region lives in an arena inside [`crate::Module`] and
//! is named by a 4-byte id. `u32::MAX` is the "none" id, so optional links (the
//! previous op in a block, the first use of a value) stay 4 bytes and need no
//! `Option`. Ids are minted only by their owning [`Arena`]; an id never changes
//! while the entity lives, which is what lets passes keep ids across rewrites.

use std::fmt;
use std::marker::PhantomData;

/// An id type: a `u32` newtype with a reserved "none" value.
pub trait EntityId: Copy + Eq + fmt::Debug {
    /// Builds the id for arena slot `index`.
    fn from_index(index: usize) -> Self;
    /// The arena slot this id names.
    fn index(self) -> usize;
}

macro_rules! entity_id {
    ($(#[$doc:meta])* $name:ident, $prefix:literal) => {
        $(#[$doc])*
        #[derive(Copy, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub struct $name(pub(crate) u32);

        impl $name {
            /// The reserved id that names nothing.
            pub const NONE: $name = $name(u32::MAX);
            /// True unless this is [`Self::NONE`].
            #[inline]
            pub fn is_some(self) -> bool {
                self.0 != u32::MAX
            }
            /// True if this is [`Self::NONE`].
            #[inline]
            pub fn is_none(self) -> bool {
                self.0 == u32::MAX
            }
            /// `None` for [`Self::NONE`], the id otherwise.
            #[inline]
            pub fn expand(self) -> Option<$name> {
                if self.is_some() { Some(self) } else { None }
            }
            /// The raw arena index.
            #[inline]
            pub fn as_u32(self) -> u32 {
                self.0
            }
        }

        impl EntityId for $name {
            #[inline]
            fn from_index(index: usize) -> Self {
                debug_assert!(index < u32::MAX as usize);
                $name(index as u32)
            }
            #[inline]
            fn index(self) -> usize {
                self.0 as usize
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                if self.is_none() {
                    write!(f, concat!($prefix, "none"))
                } else {
                    write!(f, concat!($prefix, "{}"), self.0)
                }
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Debug::fmt(self, f)
            }
        }
    };
}

entity_id!(
    /// An operation in a [`crate::Module`].
    OpId, "op"
);
entity_id!(
    /// An SSA value: an op result or a block argument.
    ValueId, "%v"
);
entity_id!(
    /// A basic block inside a region.
    BlockId, "^bb"
);
entity_id!(
    /// A region owned by an op.
    RegionId, "region"
);
entity_id!(
    /// One operand slot of an op; it is also the node of its value's use list.
    UseId, "use"
);

/// A growable arena indexed by an id type. Slots are never reused, so ids stay unique
/// for the life of the arena.
#[derive(Clone)]
pub struct Arena<I: EntityId, T> {
    items: Vec<T>,
    _id: PhantomData<I>,
}

impl<I: EntityId, T> Default for Arena<I, T> {
    fn default() -> Self {
        Arena { items: Vec::new(), _id: PhantomData }
    }
}

impl<I: EntityId, T> Arena<I, T> {
    /// Appends `item` and returns its id.
    #[inline]
    pub fn push(&mut self, item: T) -> I {
        let id = I::from_index(self.items.len());
        self.items.push(item);
        id
    }
    /// Number of slots ever allocated (live or not).
    #[inline]
    pub fn len(&self) -> usize {
        self.items.len()
    }
    /// True if no slot was ever allocated.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }
    /// The id the next `push` returns.
    #[inline]
    pub fn next_id(&self) -> I {
        I::from_index(self.items.len())
    }
    /// Reserves room for `extra` more items.
    pub fn reserve(&mut self, extra: usize) {
        self.items.reserve(extra);
    }
    /// Ids of all slots, in allocation order.
    pub fn ids(&self) -> impl Iterator<Item = I> + '_ {
        (0..self.items.len()).map(I::from_index)
    }
    /// Bytes held by the arena's buffer.
    pub fn heap_bytes(&self) -> usize {
        self.items.capacity() * std::mem::size_of::<T>()
    }
}

impl<I: EntityId, T> std::ops::Index<I> for Arena<I, T> {
    type Output = T;
    #[inline]
    fn index(&self, id: I) -> &T {
        &self.items[id.index()]
    }
}

impl<I: EntityId, T> std::ops::IndexMut<I> for Arena<I, T> {
    #[inline]
    fn index_mut(&mut self, id: I) -> &mut T {
        &mut self.items[id.index()]
    }
}
