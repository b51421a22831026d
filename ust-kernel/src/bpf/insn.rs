//! An eBPF instruction encoder: the instructions the capture programs use, as the ISA
//! defines them (Documentation/bpf/standardization/instruction-set.rst, RFC 9669), with
//! labels for jumps, resolved by [`Asm::finish`].
//!
//! An instruction is 64 bits, little-endian on x86-64 and AArch64:
//!
//! ```text
//!  bits  0..8   opcode   (class in the low 3 bits; ALU/JMP: op | source; LD/ST: mode | size)
//!        8..12  dst_reg
//!       12..16  src_reg
//!       16..32  offset   (signed; jumps: in instructions, from the next one)
//!       32..64  imm      (signed)
//! ```
//!
//! `lddw` (64-bit immediate load) takes two slots; with `src_reg = BPF_PSEUDO_MAP_FD` its
//! immediate is a map's file descriptor, which the kernel replaces with the map's address at
//! load time.

use std::fmt;

/// A register: r0 (return value), r1–r5 (arguments, clobbered by calls), r6–r9
/// (callee-saved), r10 (read-only frame pointer; the stack is the 512 bytes below it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[allow(missing_docs)]
pub enum Reg {
    R0 = 0,
    R1,
    R2,
    R3,
    R4,
    R5,
    R6,
    R7,
    R8,
    R9,
    R10,
}

/// Access size of a load or store.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Size {
    /// 1 byte (`BPF_B`).
    B = 0x10,
    /// 2 bytes (`BPF_H`).
    H = 0x08,
    /// 4 bytes (`BPF_W`).
    W = 0x00,
    /// 8 bytes (`BPF_DW`).
    DW = 0x18,
}

/// An arithmetic operation (`BPF_ALU64` class: 64-bit operands).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[allow(missing_docs)]
pub enum Alu {
    Add = 0x00,
    Sub = 0x10,
    Mul = 0x20,
    Or = 0x40,
    And = 0x50,
    Lsh = 0x60,
    Rsh = 0x70,
    Mov = 0xb0,
    Arsh = 0xc0,
}

/// A conditional jump (`BPF_JMP` class: 64-bit comparison).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Jmp {
    /// `==`.
    Eq = 0x10,
    /// Unsigned `>`.
    Gt = 0x20,
    /// Unsigned `>=`.
    Ge = 0x30,
    /// `!=`.
    Ne = 0x50,
    /// Signed `>`.
    Sgt = 0x60,
    /// Unsigned `<`.
    Lt = 0xa0,
    /// Signed `<`.
    Slt = 0xc0,
}

const CLASS_LD: u8 = 0x00;
const CLASS_LDX: u8 = 0x01;
const CLASS_ST: u8 = 0x02;
const CLASS_STX: u8 = 0x03;
const CLASS_JMP: u8 = 0x05;
const CLASS_ALU64: u8 = 0x07;
const MODE_IMM: u8 = 0x00;
const MODE_MEM: u8 = 0x60;
const SRC_K: u8 = 0x00;
const SRC_X: u8 = 0x08;
const OP_JA: u8 = 0x00;
const OP_CALL: u8 = 0x80;
const OP_EXIT: u8 = 0x90;
/// `src_reg` of an `lddw` whose immediate is a map file descriptor.
const PSEUDO_MAP_FD: u8 = 1;

/// A jump target, made by [`Asm::label`] and placed by [`Asm::bind`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Label(usize);

/// Why a program could not be assembled.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AsmError {
    /// A jump to a label never bound.
    Unbound(usize),
    /// A jump farther than the 16-bit offset reaches.
    TooFar {
        /// The jump's instruction index.
        at: usize,
    },
}

impl fmt::Display for AsmError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AsmError::Unbound(l) => write!(f, "jump to label {l}, which is never placed"),
            AsmError::TooFar { at } => write!(f, "the jump at instruction {at} is beyond a 16-bit offset"),
        }
    }
}

/// A program being written: instructions, labels and the jumps that wait for them.
#[derive(Debug, Default)]
pub struct Asm {
    insns: Vec<u64>,
    labels: Vec<Option<usize>>,
    fixups: Vec<(usize, Label)>,
}

fn encode(code: u8, dst: Reg, src: u8, off: i16, imm: i32) -> u64 {
    u64::from(code) | (u64::from(dst as u8 & 0xf) << 8) | (u64::from(src & 0xf) << 12) | (u64::from(off as u16) << 16) | (u64::from(imm as u32) << 32)
}

impl Asm {
    /// An empty program.
    pub fn new() -> Asm {
        Asm::default()
    }

    /// Instructions so far (an `lddw` counts two).
    pub fn len(&self) -> usize {
        self.insns.len()
    }

    /// True before the first instruction.
    pub fn is_empty(&self) -> bool {
        self.insns.is_empty()
    }

    fn raw(&mut self, code: u8, dst: Reg, src: u8, off: i16, imm: i32) {
        self.insns.push(encode(code, dst, src, off, imm));
    }

    /// A new, unplaced label.
    pub fn label(&mut self) -> Label {
        self.labels.push(None);
        Label(self.labels.len() - 1)
    }

    /// Places `l` at the next instruction.
    pub fn bind(&mut self, l: Label) {
        self.labels[l.0] = Some(self.insns.len());
    }

    /// `dst = imm` (sign-extended to 64 bits).
    pub fn mov_imm(&mut self, dst: Reg, imm: i32) {
        self.alu_imm(Alu::Mov, dst, imm);
    }

    /// `dst = src`.
    pub fn mov(&mut self, dst: Reg, src: Reg) {
        self.alu(Alu::Mov, dst, src);
    }

    /// `dst op= imm` on 64 bits.
    pub fn alu_imm(&mut self, op: Alu, dst: Reg, imm: i32) {
        self.raw(CLASS_ALU64 | op as u8 | SRC_K, dst, 0, 0, imm);
    }

    /// `dst op= src` on 64 bits.
    pub fn alu(&mut self, op: Alu, dst: Reg, src: Reg) {
        self.raw(CLASS_ALU64 | op as u8 | SRC_X, dst, src as u8, 0, 0);
    }

    /// `dst = *(size *)(src + off)` (zero-extended).
    pub fn load(&mut self, size: Size, dst: Reg, src: Reg, off: i16) {
        self.raw(CLASS_LDX | MODE_MEM | size as u8, dst, src as u8, off, 0);
    }

    /// `*(size *)(dst + off) = src`.
    pub fn store(&mut self, size: Size, dst: Reg, off: i16, src: Reg) {
        self.raw(CLASS_STX | MODE_MEM | size as u8, dst, src as u8, off, 0);
    }

    /// `*(size *)(dst + off) = imm`.
    pub fn store_imm(&mut self, size: Size, dst: Reg, off: i16, imm: i32) {
        self.raw(CLASS_ST | MODE_MEM | size as u8, dst, 0, off, imm);
    }

    /// `dst = <address of the map whose descriptor is fd>` (`lddw` with `BPF_PSEUDO_MAP_FD`).
    pub fn load_map(&mut self, dst: Reg, fd: i32) {
        self.raw(CLASS_LD | MODE_IMM | Size::DW as u8, dst, PSEUDO_MAP_FD, 0, fd);
        self.insns.push(0);
    }

    /// `if dst op imm goto l`.
    pub fn jmp_imm(&mut self, op: Jmp, dst: Reg, imm: i32, l: Label) {
        self.fixups.push((self.insns.len(), l));
        self.raw(CLASS_JMP | op as u8 | SRC_K, dst, 0, 0, imm);
    }

    /// `if dst op src goto l`.
    pub fn jmp(&mut self, op: Jmp, dst: Reg, src: Reg, l: Label) {
        self.fixups.push((self.insns.len(), l));
        self.raw(CLASS_JMP | op as u8 | SRC_X, dst, src as u8, 0, 0);
    }

    /// `goto l`.
    pub fn ja(&mut self, l: Label) {
        self.fixups.push((self.insns.len(), l));
        self.raw(CLASS_JMP | OP_JA, Reg::R0, 0, 0, 0);
    }

    /// Calls helper `id` (arguments in r1–r5, result in r0; r1–r5 are clobbered).
    pub fn call(&mut self, id: i32) {
        self.raw(CLASS_JMP | OP_CALL, Reg::R0, 0, 0, id);
    }

    /// Returns r0.
    pub fn exit(&mut self) {
        self.raw(CLASS_JMP | OP_EXIT, Reg::R0, 0, 0, 0);
    }

    /// The program's instructions, jumps resolved (offset = target − (jump + 1)).
    ///
    /// # Errors
    /// [`AsmError`] for a label never placed or a jump beyond ±32 Ki instructions.
    pub fn finish(mut self) -> Result<Vec<u64>, AsmError> {
        for &(at, l) in &self.fixups {
            let target = self.labels[l.0].ok_or(AsmError::Unbound(l.0))?;
            let off = i16::try_from(target as i64 - at as i64 - 1).map_err(|_| AsmError::TooFar { at })?;
            self.insns[at] = (self.insns[at] & !(0xffff << 16)) | (u64::from(off as u16) << 16);
        }
        Ok(self.insns)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Encodings checked against the ISA document's opcode tables (and what clang emits).
    #[test]
    fn encodings_follow_the_isa() {
        let mut a = Asm::new();
        a.mov_imm(Reg::R0, 0); // b7 00 .. 00000000
        a.mov(Reg::R6, Reg::R1); // bf 16
        a.load(Size::DW, Reg::R1, Reg::R6, 8); // 79 61 0800
        a.store(Size::W, Reg::R10, -4, Reg::R1); // 63 1a fcff
        a.store_imm(Size::B, Reg::R9, 21, 3); // 72 09 1500 03000000
        a.alu_imm(Alu::Rsh, Reg::R1, 32); // 77 01 0000 20000000
        a.load_map(Reg::R1, 7); // 18 11 0000 07000000, 0
        a.call(14); // 85 00 0000 0e000000
        a.exit(); // 95
        let i = a.finish().unwrap();
        assert_eq!(i[0], 0x0000_0000_0000_00b7);
        assert_eq!(i[1], 0x0000_0000_0000_16bf);
        assert_eq!(i[2], 0x0000_0000_0008_6179);
        assert_eq!(i[3], 0x0000_0000_fffc_1a63);
        assert_eq!(i[4], 0x0000_0003_0015_0972);
        assert_eq!(i[5], 0x0000_0020_0000_0177);
        assert_eq!((i[6], i[7]), (0x0000_0007_0000_1118, 0));
        assert_eq!(i[8], 0x0000_000e_0000_0085);
        assert_eq!(i[9], 0x95);
    }

    #[test]
    fn jumps_resolve_forward_and_backward() {
        let mut a = Asm::new();
        let top = a.label();
        let out = a.label();
        a.bind(top);
        a.jmp_imm(Jmp::Eq, Reg::R0, 0, out); // 0: +2
        a.mov_imm(Reg::R0, 1); // 1
        a.ja(top); // 2: -3
        a.bind(out);
        a.exit(); // 3
        let i = a.finish().unwrap();
        assert_eq!(i[0], 0x0000_0000_0002_0015);
        assert_eq!((i[2] >> 16) as u16 as i16, -3);
        let mut b = Asm::new();
        let never = b.label();
        b.ja(never);
        assert_eq!(b.finish(), Err(AsmError::Unbound(0)));
    }
}
