//! Proving that `SYMBOL+OFFSET` is an instruction start: the function's bytes are decoded
//! as x86-64 from its first byte (with `iced-x86`'s decoder) and the offset must be one of
//! the boundaries met, inside the function's size. A uprobe placed mid-instruction turns
//! the rest of that instruction into garbage for every process that runs it (the reason
//! perf's uprobe PMU needs `CAP_SYS_ADMIN` again), so anything not proven is refused.
//!
//! Decoding from the start is linear sweep: it is exact for code the compiler laid out
//! contiguously (Rust and C functions on x86-64 hold no inline data), and where it is not
//! (an undecodable byte before the offset) the offset is refused rather than guessed.

use iced_x86::{Decoder, DecoderOptions, Instruction};

/// Checks that `offset` (bytes from the function's start) is an instruction start of the
/// function whose bytes are `code` (its symbol's size, read from the file).
///
/// # Errors
/// Why not, to show the user: past the end (with the size), inside an instruction (with
/// its mnemonic, bytes and the nearest instruction starts around it), or bytes that do
/// not decode before it.
pub fn check_offset(code: &[u8], offset: u64) -> Result<(), String> {
    let size = code.len() as u64;
    if size == 0 {
        return Err("the symbol table gives the function no size: no offset into it can be proven an instruction start".into());
    }
    if offset >= size {
        return Err(format!("offset {offset:#x} is past the function's end: it is {size} bytes ({size:#x})"));
    }
    let mut decoder = Decoder::with_ip(64, code, 0, DecoderOptions::NONE);
    let mut insn = Instruction::default();
    while decoder.can_decode() {
        let start = decoder.position() as u64;
        if start == offset {
            return Ok(());
        }
        decoder.decode_out(&mut insn);
        let end = start + insn.len() as u64;
        if insn.is_invalid() {
            return Err(format!("the bytes at +{start:#x} do not decode as an x86-64 instruction: offset {offset:#x} cannot be proven an instruction start"));
        }
        if offset < end {
            let bytes: Vec<String> = code[start as usize..end as usize].iter().map(|b| format!("{b:02x}")).collect();
            return Err(format!(
                "offset {offset:#x} is inside an instruction: {} (bytes {}) covers +{start:#x}..+{end:#x}; the nearest instruction starts are +{start:#x} and +{end:#x}",
                format!("{:?}", insn.mnemonic()).to_lowercase(),
                bytes.join(" "),
            ));
        }
    }
    Err(format!("offset {offset:#x} is past the last instruction decoded in the function's {size} bytes"))
}

/// The start offsets of the function's instructions, in order, as [`check_offset`] finds
/// them (stops at the first byte that does not decode).
pub fn starts(code: &[u8]) -> Vec<u64> {
    let mut decoder = Decoder::with_ip(64, code, 0, DecoderOptions::NONE);
    let mut insn = Instruction::default();
    let mut out = Vec::new();
    while decoder.can_decode() {
        let start = decoder.position() as u64;
        decoder.decode_out(&mut insn);
        if insn.is_invalid() {
            break;
        }
        out.push(start);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `push rbp; mov rbp,rsp; mov eax,1; pop rbp; ret`.
    const CODE: &[u8] = &[0x55, 0x48, 0x89, 0xe5, 0xb8, 0x01, 0x00, 0x00, 0x00, 0x5d, 0xc3];

    #[test]
    fn boundaries_are_proven_and_the_rest_refused() {
        assert_eq!(starts(CODE), vec![0, 1, 4, 9, 10]);
        for ok in [0, 1, 4, 9, 10] {
            assert!(check_offset(CODE, ok).is_ok(), "{ok}");
        }
        let e = check_offset(CODE, 2).unwrap_err();
        assert!(e.contains("mov (bytes 48 89 e5) covers +0x1..+0x4") && e.contains("+0x1 and +0x4"), "{e}");
        let e = check_offset(CODE, 6).unwrap_err();
        assert!(e.contains("mov (bytes b8 01 00 00 00)"), "{e}");
        assert!(check_offset(CODE, 11).unwrap_err().contains("11 bytes"));
        assert!(check_offset(&[], 0).unwrap_err().contains("no size"));
        // An undecodable byte (0x06 is invalid in 64-bit mode) before the offset.
        assert!(check_offset(&[0x90, 0x06, 0x90, 0x90], 3).unwrap_err().contains("do not decode"));
    }
}
