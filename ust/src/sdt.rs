//! ust's tracepoints as SystemTap SDT probes (cargo feature `sdt`): perf, bpftrace,
//! SystemTap, gdb and `ust trace --userspace-probe sdt:PATH:PROVIDER:NAME` attach to every
//! `tracepoint!` site by provider and name, whether or not a ust daemon runs.
//!
//! With the feature, each site also expands to what `<sys/sdt.h>` (SystemTap's, version 3
//! notes) emits for `STAP_PROBEn(provider, name, args...)` with a semaphore:
//!
//! ```text
//! 990: nop                                 the probe point (one byte)
//! .note.stapsdt (ELF note, type 3, owner "stapsdt", its section group that of the code)
//!     pc         .8byte 990b               link-time address of the nop
//!     base       .8byte _.stapsdt.base     link-time address of .stapsdt.base (prelink check)
//!     semaphore  .8byte SEMA               a u16 in section .probes, per site
//!     provider\0 name\0 "-8@%rax 4@%rcx ..."\0
//! .stapsdt.base (one byte, a COMDAT group of its own: one per linked object; flag R
//!               (SHF_GNU_RETAIN) so --gc-sections keeps it: only the note refers to it;
//!               flag x so the linker puts it in the code's segment: perf turns the
//!               probe point into a file offset with .stapsdt.base's own offset, which
//!               lld's layout would otherwise shift by a page)
//! ```
//!
//! A tool attaching a uprobe at the nop with the semaphore as its reference counter
//! (`ref_ctr_offset`, Linux 4.20) makes the kernel increment the semaphore in every process
//! mapping the file. The site then reads:
//!
//! ```text
//! if (site mask | semaphore) != 0 (two relaxed loads, one test) {
//!     evaluate the arguments; 990: nop (operands: the argument registers); record if enabled
//! } else {
//!     990: nop (operands: one register holding 0, for every argument)
//! }
//! ```
//!
//! so the probe fires each time the tracepoint's code runs, enabled or not, and its
//! arguments are evaluated only when ust records the event or an SDT consumer is attached
//! (a consumer that ignores the semaphore still counts every firing, with zeros for
//! arguments). Both locations have register operands of the same sizes: perf refuses a
//! probe whose locations' arguments differ, and reads no constant operands. Without the feature the expansion is the plain one, unchanged.
//!
//! Argument `k` is field `k` (at most [`MAX_ARGS`]; further fields are recorded by ust but
//! are no SDT arguments): integers, `bool`, `char` and enums by value with their size and
//! signedness (`-4@%ecx`'s form: `-` for signed, bytes), floats as the bits of their IEEE
//! 754 encoding (unsigned), `&str`, `&[T]`, [`crate::Text`] and [`crate::Blob`] as the
//! address of their first byte, arrays as their address (`8@`).

use std::sync::atomic::{AtomicU16, Ordering};

use ust_core::FieldType;

/// Most fields of a tracepoint that are also SDT arguments (`<sys/sdt.h>` allows 12).
pub const MAX_ARGS: usize = 12;

/// An SDT semaphore: the `unsigned short` `<sys/sdt.h>` puts in section `.probes`, which
/// the kernel increments while a uprobe with it as reference counter is attached (and
/// tools that write process memory, as older bpftrace, increment by hand).
#[derive(Debug)]
#[repr(transparent)]
pub struct Semaphore(AtomicU16);

impl Semaphore {
    /// A semaphore at 0 (no consumer).
    #[allow(clippy::new_without_default)]
    pub const fn new() -> Semaphore {
        Semaphore(AtomicU16::new(0))
    }

    /// True while some consumer is attached: one relaxed load.
    #[inline(always)]
    pub fn is_set(&self) -> bool {
        self.get() != 0
    }

    /// The count of attached consumers (0: none), widened for an OR with a site's mask:
    /// one relaxed load.
    #[inline(always)]
    pub fn get(&self) -> u64 {
        u64::from(self.0.load(Ordering::Relaxed))
    }
}

/// The SDT operand size of a field of type `ty`: bytes, negative when signed (`-4` for an
/// `i32`); 8 for what is passed as an address (text, sequences, arrays, BLOBs).
pub const fn arg_size(ty: &FieldType) -> i32 {
    match ty {
        FieldType::Integer(i) | FieldType::Enum { container: i, .. } => {
            let n = i.size_bytes() as i32;
            if i.signed {
                -n
            } else {
                n
            }
        }
        FieldType::Float { exp_dig: 8, .. } => 4,
        _ => 8,
    }
}

/// [`arg_size`] of the field type `T`, for a `const` operand (through
/// `FieldNamed::SDT_SIZE`).
pub const fn arg_size_of<T: crate::Field + ?Sized>() -> i32 {
    let ty = T::TYPE;
    let size = arg_size(&ty);
    // A `FieldType` has drop glue (its `Cow`s), which a `const fn` cannot run; a type from
    // a `const` owns nothing that needs dropping.
    core::mem::forget(ty);
    size
}

/// The fixed size of a field type, as a constant (`usize::MAX` for a variable size): read
/// from `T::TYPE` at compile time, so no `FieldType` is built (and dropped) at run time.
struct FixedSize<T: ?Sized>(core::marker::PhantomData<T>);

impl<T: crate::Field + ?Sized> FixedSize<T> {
    const N: usize = {
        let ty = T::TYPE;
        let n = match ty.fixed_size() {
            Some(n) => n,
            None => usize::MAX,
        };
        // See `arg_size_of`.
        core::mem::forget(ty);
        n
    };
}

/// The operand value of a fixed-size field of at most 8 bytes: its little-endian encoding
/// zero-extended (a consumer reads the operand's size and sign-extends a signed one).
#[inline(always)]
pub fn by_value<T: crate::Field + ?Sized>(v: &T) -> u64 {
    let mut b = [0u8; 8];
    match FixedSize::<T>::N {
        n if n <= 8 => {
            if let Some(head) = b.get_mut(..n) {
                v.encode(head);
            }
            u64::from_le_bytes(b)
        }
        _ => v as *const T as *const u8 as usize as u64,
    }
}

/// `{ sdt } { plain }` → the first group with feature `sdt`, the second without: how the
/// tracepoint macros (which cannot see `ust`'s features) choose their expansion.
#[cfg(feature = "sdt")]
#[doc(hidden)]
#[macro_export]
macro_rules! __ust_sdt_select {
    ({ $($sdt:tt)* } { $($plain:tt)* }) => { $($sdt)* };
}

/// See the `sdt` version.
#[cfg(not(feature = "sdt"))]
#[doc(hidden)]
#[macro_export]
macro_rules! __ust_sdt_select {
    ({ $($sdt:tt)* } { $($plain:tt)* }) => { $($plain)* };
}

/// `__ust_sdt_semaphore!(NAME)`: a `static NAME: Semaphore` in section `.probes`.
#[doc(hidden)]
#[macro_export]
macro_rules! __ust_sdt_semaphore {
    ($sema:ident) => {
        #[link_section = ".probes"]
        static $sema: $crate::__private::SdtSemaphore = $crate::__private::SdtSemaphore::new();
    };
}

/// `__ust_sdt_probe!(SEMA, "provider", "name", "ARGS", operands...)`: the probe point and
/// its note (see the module docs). `ARGS` is the operand template (`{}@{} {}@{}`, or
/// `{}@{z} {}@{z}` for one register holding 0) and the operands are, per argument,
/// `const SIZE` then `in(reg) VALUE` (or, last, `z = in(reg) 0u64`).
#[cfg(target_arch = "x86_64")]
#[doc(hidden)]
#[macro_export]
macro_rules! __ust_sdt_probe {
    ($sema:ident, $provider:literal, $name:literal, $args:literal $(, $($op:tt)*)?) => {
        // SAFETY: a one-byte `nop` in the code and data in non-code sections: no memory is
        // read or written, no register or flag changes, the stack is not touched.
        unsafe {
            ::core::arch::asm!(
                ::core::concat!(
                    "990: nop\n",
                    ".pushsection .note.stapsdt,\"?\",\"note\"\n",
                    ".balign 4\n",
                    ".4byte 992f-991f, 994f-993f, 3\n",
                    "991: .asciz \"stapsdt\"\n",
                    "992: .balign 4\n",
                    "993: .8byte 990b\n",
                    ".8byte _.stapsdt.base\n",
                    ".8byte {__ust_sema}\n",
                    ".asciz \"", $provider, "\"\n",
                    ".asciz \"", $name, "\"\n",
                    ".asciz \"", $args, "\"\n",
                    "994: .balign 4\n",
                    ".popsection\n",
                    ".ifndef _.stapsdt.base\n",
                    ".pushsection .stapsdt.base,\"axGR\",\"progbits\",.stapsdt.base,comdat\n",
                    ".weak _.stapsdt.base\n",
                    ".hidden _.stapsdt.base\n",
                    "_.stapsdt.base: .space 1\n",
                    ".size _.stapsdt.base, 1\n",
                    ".popsection\n",
                    ".endif\n",
                ),
                $($($op)*,)?
                __ust_sema = sym $sema,
                options(att_syntax, nomem, nostack, preserves_flags),
            )
        }
    };
}

/// No SDT notes on other architectures: the probe is empty.
#[cfg(not(target_arch = "x86_64"))]
#[doc(hidden)]
#[macro_export]
macro_rules! __ust_sdt_probe {
    ($($t:tt)*) => {};
}

#[cfg(test)]
mod tests {
    use super::*;
    use ust_core::IntegerType;

    #[test]
    fn sizes_follow_the_field_types() {
        assert_eq!(arg_size(&FieldType::Integer(IntegerType::I32)), -4);
        assert_eq!(arg_size(&FieldType::Integer(IntegerType::U8)), 1);
        assert_eq!(arg_size(&FieldType::Float { exp_dig: 11, mant_dig: 53 }), 8);
        assert_eq!(arg_size(&FieldType::Float { exp_dig: 8, mant_dig: 24 }), 4);
        assert_eq!(arg_size(&FieldType::String), 8);
    }

    #[test]
    fn values_are_zero_extended_encodings() {
        assert_eq!(by_value(&-2i32), 0xffff_fffe);
        assert_eq!(by_value(&true), 1);
        assert_eq!(by_value(&'a'), 97);
        assert_eq!(by_value(&1.5f64), 1.5f64.to_bits());
        assert_eq!(by_value(&u64::MAX), u64::MAX);
    }
}
