//! [`Published<T>`]: a slot holding nothing or a value that lives until the process ends,
//! read without a lock.
//!
//! The control plane (the runtime thread, a `register_dynamic` call) makes a value, leaks
//! it and publishes its address with a `Release` store; emitters and other readers load
//! the address with `Acquire` and use the value with no lock and no reference count. A
//! value replaced or unpublished is never freed, because a reader may still use it; the
//! leaks are control-plane sized (a channel descriptor per daemon session, a filter per
//! `enable-event --filter`, a site per run-time callsite). The slots of this crate: the
//! runtime's current generation, each site's filters, the channel table and its 64
//! channels, the run-time sites.
//!
//! ```text
//!  control plane                    slot (AtomicPtr)          readers (any thread)
//!  Box::leak(value) ──Release──>  [ ptr | null ]  ──Acquire──> Option<&'static T>
//!  replaced value: leaked, still valid for readers that loaded it before
//! ```

use std::marker::PhantomData;
use std::sync::atomic::{AtomicPtr, Ordering};

/// Nothing, or a `&'static T` (see the module docs).
///
/// Invariant (the one every `unsafe` dereference here relies on): the pointer is null or
/// was made from a `&'static T` (a leaked `Box` or a `static`), and what it points to is
/// never freed or mutated except through `T`'s own interior mutability. `T: Sync` is
/// required for the slot to be shared, as for a `&'static T`.
pub(crate) struct Published<T: 'static> {
    ptr: AtomicPtr<T>,
    /// Makes the slot `Sync` only when `&'static T` may be shared.
    _shares: PhantomData<&'static T>,
}

impl<T: 'static> Published<T> {
    /// An empty slot.
    pub(crate) const fn empty() -> Published<T> {
        Published { ptr: AtomicPtr::new(std::ptr::null_mut()), _shares: PhantomData }
    }

    /// The published value, if any (`Acquire`: what was written before it was published is
    /// visible).
    #[inline(always)]
    pub(crate) fn get(&self) -> Option<&'static T> {
        Self::deref(self.ptr.load(Ordering::Acquire))
    }

    /// True when the slot holds a value (a `Relaxed` load, for a quick test).
    #[inline(always)]
    pub(crate) fn is_set(&self) -> bool {
        !self.ptr.load(Ordering::Relaxed).is_null()
    }

    /// Leaks `value` and publishes it; returns the value it replaced (still valid).
    pub(crate) fn publish(&self, value: T) -> Option<&'static T> {
        self.publish_ref(Box::leak(Box::new(value)))
    }

    /// Publishes a value that already lives for ever; returns the one it replaced.
    pub(crate) fn publish_ref(&self, value: &'static T) -> Option<&'static T> {
        Self::deref(self.ptr.swap(value as *const T as *mut T, Ordering::AcqRel))
    }

    /// Empties the slot; returns the value it held (still valid).
    pub(crate) fn take(&self) -> Option<&'static T> {
        Self::deref(self.ptr.swap(std::ptr::null_mut(), Ordering::AcqRel))
    }

    #[inline(always)]
    fn deref(p: *mut T) -> Option<&'static T> {
        // SAFETY: by the type's invariant, `p` is null or came from a `&'static T` that is
        // never freed; `T: Sync` (through `PhantomData<&'static T>`) makes sharing it sound.
        unsafe { p.as_ref() }
    }
}

impl<T: 'static> std::fmt::Debug for Published<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.is_set() { "Published(set)" } else { "Published(empty)" })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn publish_replace_take() {
        let slot: Published<u32> = Published::empty();
        assert!(slot.get().is_none() && !slot.is_set());
        assert!(slot.publish(1).is_none());
        let one = slot.get().unwrap();
        assert_eq!(slot.publish(2).copied(), Some(1));
        // The replaced value stays readable.
        assert_eq!(*one, 1);
        assert_eq!(slot.take().copied(), Some(2));
        assert!(slot.get().is_none());
        static THREE: u32 = 3;
        assert!(slot.publish_ref(&THREE).is_none());
        assert_eq!(slot.get().copied(), Some(3));
    }
}
