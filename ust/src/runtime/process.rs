//! One runtime per process, whatever number of objects link this crate.
//!
//! Every executable and shared object that links `ust` has its own copy of it (a Rust
//! `cdylib` links its dependencies statically): its own statics, its own constructor. If
//! each copy registered, a program that `dlopen`s an instrumented library would be two
//! processes to the daemon, in two trace directories. Instead:
//!
//! ```text
//! copy A (the program)                        copy B (libfoo.so, dlopen'ed later)
//!   constructor: no other runtime found         constructor: finds A's runtime
//!     A.primary = true                            channel table := A's table
//!     runtime thread, registration                B's sites ──A.join──> A's run-time
//!                                                   sites: numbered by A, sent to the
//!                                                   daemon in A's registration (or a
//!                                                   RegisterEvents), masks set by A
//!                                                 no thread, no connection of its own
//! ```
//!
//! **Finding each other.** Every copy has an ELF note (`#[used]` static in section
//! `.note.ust`, so the linker puts it in a `PT_NOTE` segment) named `ust`, of type
//! [`NT_UST_RUNTIME`], whose descriptor is the address of the copy's [`Runtime`] (the
//! loader relocates it). A constructor walks the loaded objects (`dl_iterate_phdr`, which
//! sees the main program and `RTLD_LOCAL` objects alike, as symbol look-up would not) and
//! their notes. A runtime is joined only if its [`Key`] matches: same crate version, same
//! sizes of the types the copies share (sites, channels, buffers); otherwise this copy
//! runs on its own (two registrations, as before) and `UST_DEBUG` says so.
//!
//! Constructors are serialized by the loader (at start-up, and under the loader lock for
//! `dlopen`), so two copies never elect themselves at once. Objects holding a runtime
//! copy are made `RTLD_NODELETE`: a runtime thread, sites or channels are never unmapped
//! under the process.

use std::ffi::{c_int, c_void};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use super::debug;
use crate::channel;
use crate::published::Published;
use crate::site::{self, Site};

/// ELF note type of the runtime note (`"ust\0"` owner).
pub const NT_UST_RUNTIME: u32 = 0x5553_5401;

/// What two copies must agree on to share sites and channels: the crate version and the
/// layout of the types they pass each other.
#[repr(C)]
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) struct Key {
    version: [u8; 32],
    /// FNV-1a of the compiler version, the versions of the crates whose types are shared
    /// (`repr(Rust)` layouts are only equal for one compiler and one set of sources), the
    /// enabled features and the target: copies of one crate version built differently never
    /// share state.
    build: u64,
    sizes: [usize; 8],
}

/// FNV-1a, 64 bits, in a `const fn`.
const fn fnv1a(bytes: &[u8], mut h: u64) -> u64 {
    let mut i = 0;
    while i < bytes.len() {
        h ^= bytes[i] as u64;
        h = h.wrapping_mul(0x0100_0000_01b3);
        i += 1;
    }
    h
}

/// What [`Key::build`] hashes.
const BUILD: &[&str] = &[
    env!("UST_RUSTC_VERSION"),
    env!("CARGO_PKG_VERSION"),
    ringbuffer::VERSION,
    ust_core::VERSION,
    env!("UST_BUILD_TARGET"),
    if cfg!(feature = "tracing") { "tracing" } else { "-" },
    if cfg!(debug_assertions) { "debug-assertions" } else { "-" },
];

const fn build_hash() -> u64 {
    let mut h = 0xcbf2_9ce4_8422_2325;
    let mut i = 0;
    while i < BUILD.len() {
        h = fnv1a(BUILD[i].as_bytes(), h);
        h = fnv1a(b"\0", h);
        i += 1;
    }
    h
}

const fn key() -> Key {
    let v = env!("CARGO_PKG_VERSION").as_bytes();
    let mut version = [0u8; 32];
    let mut i = 0;
    while i < v.len() && i < 32 {
        version[i] = v[i];
        i += 1;
    }
    use std::mem::{align_of, size_of};
    Key {
        version,
        build: build_hash(),
        sizes: [
            size_of::<Site>(),
            align_of::<Site>(),
            size_of::<channel::Channel>(),
            size_of::<ringbuffer::Writer>(),
            size_of::<channel::Table>(),
            size_of::<ust_core::EventDesc>(),
            size_of::<Runtime>(),
            size_of::<crate::site::SiteFilter>(),
        ],
    }
}

/// One copy's runtime, as other copies see it (`repr(C)`; functions with the C ABI).
#[repr(C)]
pub(crate) struct Runtime {
    key: Key,
    /// Set when this copy runs the process's runtime.
    primary: AtomicBool,
    /// Its `UST_DEBUG` flag (a joining copy takes it rather than read the environment
    /// inside `dlopen`, while the program's threads may be changing it).
    debug: &'static AtomicBool,
    /// Its channel table.
    channels: &'static channel::Table,
    /// Adds `n` sites (an array of `&'static Site` of the caller's copy) to its run-time
    /// sites and tells the daemon.
    join: extern "C" fn(sites: *const &'static Site, n: usize),
    /// Installs a function run after the enable masks changed (the caller's `tracing`
    /// layer). A Rust `fn()` is a plain code address; both sides are the same crate
    /// version (the keys matched).
    #[allow(improper_ctypes_definitions)]
    on_masks_changed: extern "C" fn(f: fn()),
}

extern "C" fn accept_sites(sites: *const &'static Site, n: usize) {
    if sites.is_null() || n == 0 {
        return;
    }
    // SAFETY: the caller (another copy's `process::join`) passes a live array of `n` site
    // references that outlive the process (their object is RTLD_NODELETE), of a `Site`
    // with this copy's layout (the keys matched).
    let sites = unsafe { std::slice::from_raw_parts(sites, n) };
    let _ = std::panic::catch_unwind(|| {
        let added = site::add_sites(sites);
        debug!("{added} tracepoint(s) of a loaded object joined this process's registration");
    });
}

#[allow(improper_ctypes_definitions)] // see `Runtime::on_masks_changed`
extern "C" fn on_masks_changed(f: fn()) {
    let _ = std::panic::catch_unwind(|| super::add_masks_hook(f));
}

/// This copy's runtime.
pub(crate) static RUNTIME: Runtime =
    Runtime { key: key(), primary: AtomicBool::new(false), debug: &super::DEBUG, channels: &channel::OWN, join: accept_sites, on_masks_changed };

/// The note that lets other copies find [`RUNTIME`].
#[repr(C, align(8))]
struct Note {
    namesz: u32,
    descsz: u32,
    ty: u32,
    name: [u8; 4],
    desc: &'static Runtime,
}

#[used]
#[link_section = ".note.ust"]
static NOTE: Note = Note { namesz: 4, descsz: std::mem::size_of::<usize>() as u32, ty: NT_UST_RUNTIME, name: *b"ust\0", desc: &RUNTIME };

/// The runtime this copy joined, if it is not the process's runtime itself.
static JOINED: Published<Runtime> = Published::empty();
/// How many of this copy's run-time sites were handed to the joined runtime.
static FORWARDED: AtomicUsize = AtomicUsize::new(0);

/// What [`find`] saw among the other copies of this crate in the process.
pub(crate) struct Found {
    /// The one that runs the process, with this copy's [`Key`].
    pub(crate) primary: Option<&'static Runtime>,
    /// Copies of another version (never joined).
    pub(crate) incompatible: usize,
}

/// Looks for another copy's runtime that runs the process. Reads no environment (it may
/// run inside `dlopen`, with the program's threads running).
pub(crate) fn find() -> Found {
    struct Walk {
        me: *const Runtime,
        found: Found,
    }
    unsafe extern "C" fn cb(info: *mut libc::dl_phdr_info, _size: usize, data: *mut c_void) -> c_int {
        // SAFETY: `data` is the `&mut Walk` passed below; `info` is valid during the
        // callback (dl_iterate_phdr's contract).
        let (walk, info) = unsafe { (&mut *(data as *mut Walk), &*info) };
        // SAFETY: inside the callback with the loader's `info`.
        for desc in unsafe { super::elf::notes(info, b"ust\0", NT_UST_RUNTIME) } {
            let Ok(bytes) = <[u8; std::mem::size_of::<usize>()]>::try_from(desc) else { continue };
            let p = usize::from_ne_bytes(bytes) as *const Runtime;
            if p.is_null() || p == walk.me || !p.is_aligned() {
                continue;
            }
            // SAFETY: the note of a loaded object that links this crate holds the address
            // of its `RUNTIME`, a static of that object (mapped while the callback runs,
            // and for ever once primary: RTLD_NODELETE). Its `key` and `primary` fields
            // come first in every version with this note type; the rest is read only when
            // the key matches.
            let rt = unsafe { &*p };
            if rt.key != key() {
                walk.found.incompatible += 1;
                continue;
            }
            if rt.primary.load(Ordering::Acquire) {
                walk.found.primary = Some(rt);
                return 1;
            }
        }
        0
    }
    let mut walk = Walk { me: &RUNTIME, found: Found { primary: None, incompatible: 0 } };
    // SAFETY: the callback only reads the loader's `info` and writes `walk`.
    unsafe { libc::dl_iterate_phdr(Some(cb), &mut walk as *mut Walk as *mut c_void) };
    walk.found
}

/// Makes this copy the process's runtime (no compatible one was [`find`]-found): later
/// copies join it.
///
/// False (and nothing done) when the object holding this copy cannot be pinned: a later
/// `dlclose` would unmap the runtime thread's code, so the copy must run untraced.
#[must_use]
pub(crate) fn become_primary() -> bool {
    if !pin_self() {
        return false;
    }
    RUNTIME.primary.store(true, Ordering::Release);
    true
}

/// Joins runtime `p` (from [`find`]): this copy's sites become `p`'s run-time sites and
/// this copy records into `p`'s channels from now on. Takes `p`'s `UST_DEBUG` flag.
///
/// False (and nothing done) when the object holding this copy cannot be pinned: the
/// joined runtime would keep pointers into it after a `dlclose`, so it runs untraced.
#[must_use]
pub(crate) fn join(p: &'static Runtime) -> bool {
    super::DEBUG.store(p.debug.load(Ordering::Relaxed), Ordering::Relaxed);
    if !pin_self() {
        return false;
    }
    JOINED.publish_ref(p);
    channel::use_table(p.channels);
    site::on_new_sites(forward_new_sites);
    // The link-time sites of this copy, except its runtime's own state-dump events (only
    // the primary's runtime thread emits those).
    let mine: Vec<&'static Site> =
        site::all().filter(|s| s.desc().provider != super::statedump::STATEDUMP_PROVIDER && s.desc().provider != super::statedump::LIB_PROVIDER).collect();
    debug!("another runtime runs this process: joining it with {} tracepoint(s)", mine.len());
    (p.join)(mine.as_ptr(), mine.len());
    true
}

/// Hands the run-time sites this copy made since the last call to the joined runtime.
fn forward_new_sites() {
    let Some(p) = JOINED.get() else { return };
    // One forwarder at a time: two threads making sites at once must not both hand over
    // the same ones (the joined runtime would add a site twice).
    static FORWARD_LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _one = FORWARD_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let from = FORWARDED.load(Ordering::Acquire);
    let new: Vec<&'static Site> = site::dynamic_from(from).collect();
    if new.is_empty() {
        return;
    }
    FORWARDED.store(from + new.len(), Ordering::Release);
    (p.join)(new.as_ptr(), new.len());
}

/// In a copy that joined another runtime, forwards a masks hook to it; false in the
/// process's runtime itself.
pub(crate) fn forward_masks_hook(f: fn()) -> bool {
    match JOINED.get() {
        Some(p) => {
            (p.on_masks_changed)(f);
            true
        }
        None => false,
    }
}

/// Makes the object holding this copy `RTLD_NODELETE`: its code may run on the runtime
/// thread and its sites and channels are shared, so `dlclose` must never unmap it. True
/// when it is pinned, or is the main program (never unloaded).
fn pin_self() -> bool {
    // SAFETY: dladdr reads loader data about an address of this object and fills `info`.
    let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
    // SAFETY: as above; `RUNTIME` is an address inside this object.
    if unsafe { libc::dladdr(&RUNTIME as *const Runtime as *const c_void, &mut info) } == 0 || info.dli_fname.is_null() {
        debug!("cannot find the object holding the runtime: running untraced");
        return false;
    }
    // The main program is never unloaded (and cannot be `dlopen`ed by its path): its
    // program headers (AT_PHDR) lie in the same object as `RUNTIME`.
    // SAFETY: getauxval reads the auxiliary vector; dladdr as above, into a second struct.
    let main_base = unsafe {
        let mut main: libc::Dl_info = std::mem::zeroed();
        let phdr = libc::getauxval(libc::AT_PHDR) as *const c_void;
        (!phdr.is_null() && libc::dladdr(phdr, &mut main) != 0).then_some(main.dli_fbase)
    };
    if main_base == Some(info.dli_fbase) {
        return true;
    }
    // SAFETY: dlopen of an already loaded object (RTLD_NOLOAD) by the name the loader gave:
    // it only sets the flag and adds a reference, never loads anything. Inside a
    // constructor run by `dlopen` the loader lock is recursive.
    let h = unsafe { libc::dlopen(info.dli_fname, libc::RTLD_NOW | libc::RTLD_NOLOAD | libc::RTLD_NODELETE) };
    if h.is_null() {
        debug!("cannot pin the object holding the runtime (a dlclose could unmap it): running untraced");
        return false;
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_copys_note_is_in_memory_and_leads_to_its_runtime() {
        unsafe extern "C" fn cb(info: *mut libc::dl_phdr_info, _size: usize, data: *mut c_void) -> c_int {
            // SAFETY: `data` is the counter passed below; `info` is valid during the callback.
            let (seen, info) = unsafe { (&mut *(data as *mut usize), &*info) };
            // SAFETY: inside the callback with the loader's `info`.
            for desc in unsafe { crate::runtime::elf::notes(info, b"ust\0", NT_UST_RUNTIME) } {
                if desc == (&RUNTIME as *const Runtime as usize).to_ne_bytes() {
                    *seen += 1;
                }
            }
            0
        }
        let mut seen = 0usize;
        // SAFETY: the callback only reads the loader's `info` and writes `seen`.
        unsafe { libc::dl_iterate_phdr(Some(cb), &mut seen as *mut usize as *mut c_void) };
        assert_eq!(seen, 1, "the .note.ust note of this copy, relocated to its RUNTIME");
        // The only copy of the process: nothing to join.
        let f = find();
        assert!(f.primary.is_none());
        assert_eq!(f.incompatible, 0);
        assert_eq!(RUNTIME.key, key());
    }
}
