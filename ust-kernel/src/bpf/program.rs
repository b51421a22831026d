//! The capture programs, written with [`super::insn`]: what perf trace's
//! `augmented_raw_syscalls.bpf.c` does (copy a system call's user strings and sockaddrs at
//! `raw_syscalls:sys_enter`), restricted to a tree of processes followed from
//! `sched:sched_process_fork`.
//!
//! `sys_enter` (context: the tracepoint record, `long id` and `unsigned long args[6]` at the
//! offsets of its format file; the first 8 bytes are not readable):
//!
//! ```text
//! tgid = bpf_get_current_pid_tgid() >> 32
//! if !traced[tgid]                       return 0
//! if id >= SPEC_ENTRIES or !spec[id]     return 0       (the kinds of the 6 arguments)
//! rec = scratch[0]                                       (per-CPU, header + 4097 bytes)
//! rec.{tid, tgid, nr, ktime} = ...
//! for each argument i with a kind:                       (unrolled, only the (i, kind) pairs
//!     string:   n = bpf_probe_read_user_str(rec.bytes, 4097, args[i])    the table uses)
//!               status = n < 1 ? fault : n > 4096 ? cut : ok;  ringbuf_output(rec, 32 + len)
//!     sockaddr: len = clamp((int) args[i + 1], 0, 128);  bpf_probe_read_user(rec.bytes, len, args[i])
//!     argv:     for e in 0..=16: p = argv[e] (read_user); stop at NULL; e == 16: a `cut` record;
//!               else a string record of at most 1024 bytes, elem = e
//! a NULL pointer: a `null` record; ringbuf_output failing: lost[0] += 1
//! ```
//!
//! `sched_process_fork` (runs in the parent): if the parent's tgid is traced, `child_pid`
//! (a thread or a process: the event does not say) is added; a full map counts `lost[1]`.
//! `sched_process_exit`: a traced process's thread that exits removes its own id; the leader
//! removes the process when `group_dead` says the whole group is gone.
//!
//! All programs return 0: the perf event they hang on records nothing.

use super::insn::{Alu, Asm, AsmError, Jmp, Label, Reg, Size};
use super::record::{self, ARGV_MAX, ARGV_STRING_MAX, HEADER, SOCKADDR_MAX, STRING_MAX};
use crate::argspec::{ArgKind, CallSpec};

/// Helper ids (include/uapi/linux/bpf.h, `___BPF_FUNC_MAPPER`).
mod helper {
    pub const MAP_LOOKUP_ELEM: i32 = 1;
    pub const MAP_UPDATE_ELEM: i32 = 2;
    pub const MAP_DELETE_ELEM: i32 = 3;
    pub const KTIME_GET_NS: i32 = 5;
    pub const GET_CURRENT_PID_TGID: i32 = 14;
    pub const PROBE_READ_USER: i32 = 112;
    pub const PROBE_READ_USER_STR: i32 = 114;
    pub const RINGBUF_OUTPUT: i32 = 130;
}

/// Entries of the spec map: system call numbers below this are looked up.
pub const SPEC_ENTRIES: u32 = 512;
/// Value size of the per-CPU scratch map: a header and the longest string read with its NUL.
pub const SCRATCH_SIZE: u32 = ((HEADER + STRING_MAX + 1 + 7) & !7) as u32;
/// Slot of the loss map counting records the ring buffer had no room for.
pub const LOST_RINGBUF: u32 = 0;
/// Slot of the loss map counting children not followed (the traced map was full).
pub const LOST_TRACED_FULL: u32 = 1;

/// The map descriptors the programs use.
#[derive(Clone, Copy, Debug)]
pub struct Maps {
    /// Hash u32 tgid → u32: the traced processes.
    pub traced: i32,
    /// Array u32 nr → [u8; 8]: [`CallSpec::to_bytes`].
    pub specs: i32,
    /// Per-CPU array, one value of [`SCRATCH_SIZE`] bytes.
    pub scratch: i32,
    /// The ring buffer.
    pub ring: i32,
    /// Per-CPU array of two u64 counters ([`LOST_RINGBUF`], [`LOST_TRACED_FULL`]).
    pub lost: i32,
}

/// Offsets in the tracepoint records, from their format files.
#[derive(Clone, Copy, Debug)]
pub struct Offsets {
    /// `raw_syscalls:sys_enter` `id`.
    pub id: i16,
    /// `raw_syscalls:sys_enter` `args` (6 × 8 bytes).
    pub args: i16,
    /// `sched:sched_process_fork` `child_pid` (4 bytes).
    pub child_pid: i16,
    /// `sched:sched_process_exit` `group_dead` (1 byte), when the kernel has it.
    pub group_dead: Option<i16>,
}

// Stack slots below r10.
const KEY_A: i16 = -4;
const KEY_B: i16 = -8;
const KEY_C: i16 = -12;
const KEY_LOST: i16 = -16;
const ARGV_PTR: i16 = -24;
const ELEM_PTR: i16 = -32;

// Registers kept across calls.
const CTX: Reg = Reg::R6;
const LEN: Reg = Reg::R7;
const SPEC: Reg = Reg::R8;
const REC: Reg = Reg::R9;

fn stack_ptr(a: &mut Asm, dst: Reg, off: i16) {
    a.mov(dst, Reg::R10);
    a.alu_imm(Alu::Add, dst, off.into());
}

/// `r0 = map_lookup(map, &stack[key])`; jumps to `none` on NULL.
fn lookup(a: &mut Asm, map: i32, key: i16, none: Label) {
    a.load_map(Reg::R1, map);
    stack_ptr(a, Reg::R2, key);
    a.call(helper::MAP_LOOKUP_ELEM);
    a.jmp_imm(Jmp::Eq, Reg::R0, 0, none);
}

/// `lost[slot] += 1` (a per-CPU counter: no other writer).
fn count_lost(a: &mut Asm, m: &Maps, slot: u32) {
    let skip = a.label();
    a.store_imm(Size::W, Reg::R10, KEY_LOST, slot as i32);
    lookup(a, m.lost, KEY_LOST, skip);
    a.load(Size::DW, Reg::R1, Reg::R0, 0);
    a.alu_imm(Alu::Add, Reg::R1, 1);
    a.store(Size::DW, Reg::R0, 0, Reg::R1);
    a.bind(skip);
}

/// `ringbuf_output(ring, rec, r3, 0)`; a refusal is counted.
fn emit(a: &mut Asm, m: &Maps) {
    let ok = a.label();
    a.load_map(Reg::R1, m.ring);
    a.mov(Reg::R2, REC);
    a.mov_imm(Reg::R4, 0);
    a.call(helper::RINGBUF_OUTPUT);
    a.jmp_imm(Jmp::Eq, Reg::R0, 0, ok);
    count_lost(a, m, LOST_RINGBUF);
    a.bind(ok);
}

/// Emits the record with `LEN` bytes after the header (`LEN` bounded: the verifier checks
/// the size against the scratch value).
fn emit_len(a: &mut Asm, m: &Maps) {
    a.store(Size::W, REC, record::OFF_LEN, LEN);
    a.mov(Reg::R3, LEN);
    a.alu_imm(Alu::Add, Reg::R3, HEADER as i32);
    emit(a, m);
}

/// Emits a header-only record of `status`.
fn emit_empty(a: &mut Asm, m: &Maps, status: record::Status) {
    a.store_imm(Size::B, REC, record::OFF_STATUS, status as i32);
    a.store_imm(Size::W, REC, record::OFF_LEN, 0);
    a.mov_imm(Reg::R3, HEADER as i32);
    emit(a, m);
}

fn header(a: &mut Asm, o: &Offsets, arg: usize, kind: ArgKind, elem: u8) {
    a.load(Size::DW, Reg::R1, CTX, o.args + 8 * arg as i16);
    a.store(Size::DW, REC, record::OFF_PTR, Reg::R1);
    a.store_imm(Size::B, REC, record::OFF_ARG, arg as i32);
    a.store_imm(Size::B, REC, record::OFF_KIND, kind.code().into());
    a.store_imm(Size::B, REC, record::OFF_ELEM, elem.into());
    a.store_imm(Size::W, REC, record::OFF_AUX, 0);
}

/// Copies the string at r3 (non-NULL) into the record, at most `max` bytes, and emits it;
/// continues at the next instruction.
fn string(a: &mut Asm, m: &Maps, max: usize) {
    let (fault, cut, have, done) = (a.label(), a.label(), a.label(), a.label());
    a.mov(Reg::R1, REC);
    a.alu_imm(Alu::Add, Reg::R1, HEADER as i32);
    a.mov_imm(Reg::R2, max as i32 + 1);
    a.call(helper::PROBE_READ_USER_STR);
    a.jmp_imm(Jmp::Slt, Reg::R0, 1, fault);
    a.store_imm(Size::B, REC, record::OFF_STATUS, record::Status::Ok as i32);
    a.jmp_imm(Jmp::Gt, Reg::R0, max as i32, cut);
    a.ja(have);
    a.bind(cut);
    a.store_imm(Size::B, REC, record::OFF_STATUS, record::Status::Cut as i32);
    a.mov_imm(Reg::R0, max as i32 + 1);
    a.bind(have);
    // r0 in [1, max + 1] counts the NUL: the length is r0 − 1.
    a.alu_imm(Alu::Sub, Reg::R0, 1);
    a.mov(LEN, Reg::R0);
    emit_len(a, m);
    a.ja(done);
    a.bind(fault);
    emit_empty(a, m, record::Status::Fault);
    a.bind(done);
}

/// Argument `i` as a string.
fn string_arg(a: &mut Asm, m: &Maps, o: &Offsets, i: usize) {
    let (null, done) = (a.label(), a.label());
    header(a, o, i, ArgKind::String, 0);
    a.load(Size::DW, Reg::R3, CTX, o.args + 8 * i as i16);
    a.jmp_imm(Jmp::Eq, Reg::R3, 0, null);
    string(a, m, STRING_MAX);
    a.ja(done);
    a.bind(null);
    emit_empty(a, m, record::Status::Null);
    a.bind(done);
}

/// Argument `i` as a sockaddr of the length argument `i + 1` gives.
fn sockaddr_arg(a: &mut Asm, m: &Maps, o: &Offsets, i: usize) {
    let (null, fault, neg, big, have, done) = (a.label(), a.label(), a.label(), a.label(), a.label(), a.label());
    header(a, o, i, ArgKind::Sockaddr, 0);
    a.load(Size::DW, Reg::R2, CTX, o.args + 8 * (i as i16 + 1));
    a.store(Size::W, REC, record::OFF_AUX, Reg::R2);
    a.load(Size::DW, Reg::R3, CTX, o.args + 8 * i as i16);
    a.jmp_imm(Jmp::Eq, Reg::R3, 0, null);
    a.store_imm(Size::B, REC, record::OFF_STATUS, record::Status::Ok as i32);
    // The length is a C int: sign-extend its low 32 bits.
    a.alu_imm(Alu::Lsh, Reg::R2, 32);
    a.alu_imm(Alu::Arsh, Reg::R2, 32);
    a.jmp_imm(Jmp::Slt, Reg::R2, 0, neg);
    a.jmp_imm(Jmp::Gt, Reg::R2, SOCKADDR_MAX as i32, big);
    a.ja(have);
    a.bind(neg);
    a.mov_imm(Reg::R2, 0);
    a.ja(have);
    a.bind(big);
    a.store_imm(Size::B, REC, record::OFF_STATUS, record::Status::Cut as i32);
    a.mov_imm(Reg::R2, SOCKADDR_MAX as i32);
    a.bind(have);
    a.mov(LEN, Reg::R2);
    a.mov(Reg::R1, REC);
    a.alu_imm(Alu::Add, Reg::R1, HEADER as i32);
    a.call(helper::PROBE_READ_USER);
    a.jmp_imm(Jmp::Ne, Reg::R0, 0, fault);
    emit_len(a, m);
    a.ja(done);
    a.bind(null);
    emit_empty(a, m, record::Status::Null);
    a.ja(done);
    a.bind(fault);
    emit_empty(a, m, record::Status::Fault);
    a.bind(done);
}

/// Argument `i` as an argv array: one record per element, at most [`ARGV_MAX`].
fn argv_arg(a: &mut Asm, m: &Maps, o: &Offsets, i: usize) {
    let (null, fault, done) = (a.label(), a.label(), a.label());
    header(a, o, i, ArgKind::Argv, 0);
    a.load(Size::DW, Reg::R3, CTX, o.args + 8 * i as i16);
    a.jmp_imm(Jmp::Eq, Reg::R3, 0, null);
    a.store(Size::DW, Reg::R10, ARGV_PTR, Reg::R3);
    for e in 0..=ARGV_MAX {
        a.store_imm(Size::B, REC, record::OFF_ELEM, e as i32);
        stack_ptr(a, Reg::R1, ELEM_PTR);
        a.mov_imm(Reg::R2, 8);
        a.load(Size::DW, Reg::R3, Reg::R10, ARGV_PTR);
        a.alu_imm(Alu::Add, Reg::R3, 8 * e as i32);
        a.call(helper::PROBE_READ_USER);
        a.jmp_imm(Jmp::Ne, Reg::R0, 0, fault);
        a.load(Size::DW, Reg::R3, Reg::R10, ELEM_PTR);
        a.jmp_imm(Jmp::Eq, Reg::R3, 0, done);
        if e == ARGV_MAX {
            emit_empty(a, m, record::Status::Cut);
        } else {
            string(a, m, ARGV_STRING_MAX);
        }
    }
    a.ja(done);
    a.bind(null);
    emit_empty(a, m, record::Status::Null);
    a.ja(done);
    a.bind(fault);
    emit_empty(a, m, record::Status::Fault);
    a.bind(done);
}

/// Starts a program: the context in `CTX`, `bpf_get_current_pid_tgid()` in `LEN`, the tgid
/// at `KEY_A`; returns the exit label, where an untraced process goes at once.
fn prologue(a: &mut Asm, m: &Maps) -> Label {
    let out = a.label();
    a.mov(CTX, Reg::R1);
    a.call(helper::GET_CURRENT_PID_TGID);
    a.mov(LEN, Reg::R0);
    a.alu_imm(Alu::Rsh, Reg::R0, 32);
    a.store(Size::W, Reg::R10, KEY_A, Reg::R0);
    lookup(a, m.traced, KEY_A, out);
    out
}

/// Ends a program at `out`: return 0.
fn epilogue(mut a: Asm, out: Label) -> Result<Vec<u64>, AsmError> {
    a.bind(out);
    a.mov_imm(Reg::R0, 0);
    a.exit();
    a.finish()
}

/// The `raw_syscalls:sys_enter` program for the calls of `specs` (only the argument
/// positions and kinds they use are generated).
///
/// # Errors
/// [`AsmError`] (a bug in this generator, not a runtime condition).
pub fn sys_enter(m: &Maps, o: &Offsets, specs: &[(u32, CallSpec)]) -> Result<Vec<u64>, AsmError> {
    let mut a = Asm::new();
    let out = prologue(&mut a, m);
    a.load(Size::DW, Reg::R1, CTX, o.id);
    // Unsigned: a negative number (no system call) is out of range too.
    a.jmp_imm(Jmp::Ge, Reg::R1, SPEC_ENTRIES as i32, out);
    a.store(Size::W, Reg::R10, KEY_B, Reg::R1);
    lookup(&mut a, m.specs, KEY_B, out);
    a.mov(SPEC, Reg::R0);
    a.load(Size::DW, Reg::R1, SPEC, 0);
    a.jmp_imm(Jmp::Eq, Reg::R1, 0, out);
    a.store_imm(Size::W, Reg::R10, KEY_C, 0);
    lookup(&mut a, m.scratch, KEY_C, out);
    a.mov(REC, Reg::R0);
    a.store(Size::W, REC, record::OFF_TID, LEN);
    a.alu_imm(Alu::Rsh, LEN, 32);
    a.store(Size::W, REC, record::OFF_TGID, LEN);
    a.load(Size::DW, Reg::R1, CTX, o.id);
    a.store(Size::W, REC, record::OFF_NR, Reg::R1);
    a.call(helper::KTIME_GET_NS);
    a.store(Size::DW, REC, record::OFF_KTIME, Reg::R0);
    for i in 0..6 {
        let used = |k: ArgKind| specs.iter().any(|(_, s)| s.kinds[i] == Some(k));
        let kinds: Vec<ArgKind> =
            [ArgKind::String, ArgKind::Sockaddr, ArgKind::Argv].into_iter().filter(|&k| used(k) && (k != ArgKind::Sockaddr || i < 5)).collect();
        if kinds.is_empty() {
            continue;
        }
        let next = a.label();
        let targets: Vec<Label> = kinds.iter().map(|_| a.label()).collect();
        a.load(Size::B, Reg::R1, SPEC, i as i16);
        for (k, t) in kinds.iter().zip(&targets) {
            a.jmp_imm(Jmp::Eq, Reg::R1, k.code().into(), *t);
        }
        a.ja(next);
        for (k, t) in kinds.iter().zip(&targets) {
            a.bind(*t);
            match k {
                ArgKind::String => string_arg(&mut a, m, o, i),
                ArgKind::Sockaddr => sockaddr_arg(&mut a, m, o, i),
                ArgKind::Argv => argv_arg(&mut a, m, o, i),
            }
            a.ja(next);
        }
        a.bind(next);
    }
    epilogue(a, out)
}

/// The `sched:sched_process_fork` program: follows the traced tree.
///
/// # Errors
/// [`AsmError`] (a generator bug).
pub fn fork(m: &Maps, o: &Offsets) -> Result<Vec<u64>, AsmError> {
    let mut a = Asm::new();
    let out = prologue(&mut a, m);
    a.load(Size::W, Reg::R1, CTX, o.child_pid);
    a.store(Size::W, Reg::R10, KEY_B, Reg::R1);
    a.store_imm(Size::W, Reg::R10, KEY_C, 1);
    a.load_map(Reg::R1, m.traced);
    stack_ptr(&mut a, Reg::R2, KEY_B);
    stack_ptr(&mut a, Reg::R3, KEY_C);
    a.mov_imm(Reg::R4, 0); // BPF_ANY
    a.call(helper::MAP_UPDATE_ELEM);
    a.jmp_imm(Jmp::Eq, Reg::R0, 0, out);
    count_lost(&mut a, m, LOST_TRACED_FULL);
    epilogue(a, out)
}

/// The `sched:sched_process_exit` program: forgets exited threads and dead processes.
///
/// # Errors
/// [`AsmError`] (a generator bug).
pub fn exit(m: &Maps, o: &Offsets) -> Result<Vec<u64>, AsmError> {
    let mut a = Asm::new();
    let out = prologue(&mut a, m);
    let leader = a.label();
    a.mov(Reg::R1, LEN);
    a.alu_imm(Alu::Lsh, Reg::R1, 32);
    a.alu_imm(Alu::Rsh, Reg::R1, 32);
    a.mov(Reg::R2, LEN);
    a.alu_imm(Alu::Rsh, Reg::R2, 32);
    a.jmp(Jmp::Eq, Reg::R1, Reg::R2, leader);
    a.store(Size::W, Reg::R10, KEY_B, Reg::R1);
    a.load_map(Reg::R1, m.traced);
    stack_ptr(&mut a, Reg::R2, KEY_B);
    a.call(helper::MAP_DELETE_ELEM);
    a.ja(out);
    a.bind(leader);
    if let Some(gd) = o.group_dead {
        a.load(Size::B, Reg::R1, CTX, gd);
        a.jmp_imm(Jmp::Eq, Reg::R1, 0, out);
        a.load_map(Reg::R1, m.traced);
        stack_ptr(&mut a, Reg::R2, KEY_A);
        a.call(helper::MAP_DELETE_ELEM);
    }
    epilogue(a, out)
}
