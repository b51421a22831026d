//! SystemTap SDT probes (`sdt:PATH:PROVIDER:PROBE`, LTTng's `--userspace-probe` syntax):
//! the ELF notes `<sys/sdt.h>` writes (and ust's tracepoints with its cargo feature `sdt`)
//! read from `.note.stapsdt`, and each of a probe's locations turned into a uprobe
//! ([`super::Probe`]) at the note's `nop`, with its semaphore as tracefs' reference counter
//! and its operands as fetch arguments.
//!
//! A note (type 3, owner `stapsdt`; SystemTap's wiki "UserSpaceProbeImplementation",
//! version 3) holds three addresses of the word size of the file, then three
//! NUL-terminated strings:
//!
//! ```text
//! pc  base  semaphore  provider\0  name\0  "-8@%rax 4@-4(%rbp) 8@$5"\0
//! ```
//!
//! As perf (`tools/perf/util/symbol-elf.c`) and LTTng (`lttng-elf.c`) do, `pc` is moved by
//! the difference between the address of section `.stapsdt.base` and `base` when both are
//! set (prelink moved the file), then turned into a file offset through the program header
//! that maps it; the semaphore's address becomes a file offset the same way, written as
//! `uprobe_events`' `PATH:OFFSET(REF_CTR_OFFSET)` (Linux 4.20): the kernel then increments
//! the semaphore in every process mapping the file while the probe exists.
//!
//! Operands (x86-64, AT&T syntax as the assembler wrote them) become fetch arguments
//! `argN`: a register (`%rax`, `%eax`, `%r8d`: the whole register, read at the operand's
//! size), memory at a register plus a constant (`-4(%rbp)` → `-4(%bp)`), or a constant
//! (`$5` → `\5`). Others (an index register, `%rip`-relative symbols, `%ah`, SSE
//! registers) are left out, said in the probe's note; so is an argument the locations of
//! one probe disagree on (tracefs needs one layout per event).
//!
//! Everything here reads a file an ordinary user may own: every length and offset is
//! checked, nothing panics, and a note that lies is skipped.

use std::fs::File;
use std::path::{Path, PathBuf};

use object::{Object, ObjectSection, ObjectSegment};

use super::{FetchArg, PositionedReader, Probe, MAX_ARGS};

/// Largest `.note.stapsdt` read (a program with ten thousand probes has about 1 MiB).
pub const MAX_NOTES_BYTES: u64 = 64 << 20;
/// Most locations one probe may have (each is a uprobe of its own).
pub const MAX_LOCATIONS: usize = super::MAX_PROBES;

/// A probe request as written: `sdt:PATH:PROVIDER:PROBE`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SdtSpec {
    /// The ELF file.
    pub path: PathBuf,
    /// The note's provider.
    pub provider: String,
    /// The note's probe name.
    pub name: String,
}

impl SdtSpec {
    /// Parses `sdt:PATH:PROVIDER:PROBE`. PATH ends at the first `:` not escaped as `\:`
    /// (as for `elf:`); a PATH without `/` is looked up in `$PATH` when resolved.
    ///
    /// # Errors
    /// What is wrong with the text.
    pub fn parse(text: &str) -> Result<SdtSpec, String> {
        let rest = text.strip_prefix("sdt:").ok_or_else(|| format!("{text:?}: not an sdt: probe (sdt:PATH:PROVIDER:PROBE)"))?;
        let (path, tail) = super::split_path(rest);
        let usage = || format!("{text:?}: an SDT probe is sdt:PATH:PROVIDER:PROBE");
        let (provider, name) = tail.and_then(|t| t.split_once(':')).ok_or_else(usage)?;
        if path.is_empty() || provider.is_empty() || name.is_empty() || name.contains(':') {
            return Err(usage());
        }
        Ok(SdtSpec { path: PathBuf::from(path), provider: provider.to_string(), name: name.to_string() })
    }

    /// The file: PATH itself, or for a PATH without `/` the first regular file of that
    /// name in the directories of `$PATH`.
    pub fn file(&self) -> PathBuf {
        super::Spec { path: self.path.clone(), symbol: String::new(), offset: None, ret: false }.file()
    }

    /// The event's default name: the probe's name, made a valid event name (`[A-Za-z0-9_]`).
    pub fn default_name(&self) -> String {
        super::dwarf::field_name(&self.name)
    }
}

/// One SDT note as the file has it, its addresses already turned into file offsets.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Note {
    /// Provider.
    pub provider: String,
    /// Probe name.
    pub name: String,
    /// Operands as written (`-8@%rax 4@%rcx`).
    pub args: String,
    /// Link-time address of the probe point (after the `.stapsdt.base` adjustment).
    pub address: u64,
    /// File offset of the probe point (what `uprobe_events` takes).
    pub offset: u64,
    /// File offset of the semaphore, if the probe has one (tracefs' `ref_ctr_offset`).
    pub semaphore: Option<u64>,
}

/// A note's fields before any address is interpreted.
#[derive(Clone, Debug, PartialEq, Eq)]
struct RawNote {
    pc: u64,
    base: u64,
    sema: u64,
    provider: String,
    name: String,
    args: String,
}

fn word(b: &[u8], at: usize, size: usize, little: bool) -> Option<u64> {
    let s = b.get(at..at.checked_add(size)?)?;
    let mut w = [0u8; 8];
    if little {
        w[..size].copy_from_slice(s);
        Some(u64::from_le_bytes(w))
    } else {
        w[8 - size..].copy_from_slice(s);
        Some(u64::from_be_bytes(w))
    }
}

/// Rounds up to a multiple of 4, `None` on overflow.
fn align4(n: usize) -> Option<usize> {
    n.checked_add(3).map(|v| v & !3)
}

/// The string at `at` up to its NUL, and the position after the NUL.
fn cstr(b: &[u8], at: usize) -> Option<(String, usize)> {
    let rest = b.get(at..)?;
    let n = rest.iter().position(|&c| c == 0)?;
    let s = std::str::from_utf8(&rest[..n]).ok()?;
    Some((s.to_string(), at + n + 1))
}

/// The `stapsdt` notes (type 3) of the bytes of a `.note.stapsdt` section, with `addr`
/// bytes per address. Other notes are skipped; a note whose sizes do not fit ends the walk
/// (the rest cannot be framed), and a note whose description is malformed is skipped.
fn parse_notes(b: &[u8], addr: usize, little: bool) -> Vec<RawNote> {
    let mut out = Vec::new();
    let mut at = 0usize;
    while let (Some(namesz), Some(descsz), Some(ty)) = (word(b, at, 4, little), word(b, at + 4, 4, little), word(b, at + 8, 4, little)) {
        let name_at = at + 12;
        let Some(desc_at) = align4(name_at.saturating_add(namesz as usize)) else { break };
        let Some(next) = desc_at.checked_add(descsz as usize).and_then(align4) else { break };
        if desc_at > b.len() || desc_at.saturating_add(descsz as usize) > b.len() {
            break;
        }
        let name = &b[name_at..name_at + namesz as usize];
        let desc = &b[desc_at..desc_at + descsz as usize];
        if ty == 3 && name == b"stapsdt\0" {
            if let Some(n) = parse_desc(desc, addr, little) {
                out.push(n);
            }
        }
        if next <= at {
            break;
        }
        at = next;
    }
    out
}

fn parse_desc(d: &[u8], addr: usize, little: bool) -> Option<RawNote> {
    let pc = word(d, 0, addr, little)?;
    let base = word(d, addr, addr, little)?;
    let sema = word(d, 2 * addr, addr, little)?;
    let (provider, at) = cstr(d, 3 * addr)?;
    let (name, at) = cstr(d, at)?;
    let (args, _) = cstr(d, at)?;
    if provider.is_empty() || name.is_empty() {
        return None;
    }
    Some(RawNote { pc, base, sema, provider, name, args })
}

/// The SDT notes of the ELF image `data` (bytes, or a [`object::ReadCache`] over a file,
/// which reads only the headers and the notes): each with its probe point and semaphore
/// as file offsets. A note whose probe point is not in an executable segment's file bytes,
/// or whose semaphore is not in a segment's file bytes, is left out.
///
/// # Errors
/// Not an ELF file, a notes section larger than [`MAX_NOTES_BYTES`], or no SDT note.
pub fn notes<'data, R: object::ReadRef<'data>>(data: R) -> Result<Vec<Note>, String> {
    let file = object::File::parse(data).map_err(|e| format!("not an ELF file this tool can read ({e})"))?;
    if file.format() != object::BinaryFormat::Elf {
        return Err("not an ELF file".into());
    }
    let addr = if file.is_64() { 8 } else { 4 };
    let little = file.is_little_endian();
    let base_section = file.section_by_name(".stapsdt.base").map(|s| s.address());
    // (address, file bytes, file offset, executable)
    let segments: Vec<(u64, u64, u64, bool)> = file
        .segments()
        .map(|s| {
            let (off, fsize) = s.file_range();
            let exec = matches!(s.flags(), object::SegmentFlags::Elf { p_flags } if p_flags & object::elf::PF_X != 0);
            (s.address(), fsize, off, exec)
        })
        .collect();
    let to_offset = |a: u64, exec: bool| -> Option<u64> {
        segments.iter().find(|(va, fsize, _, x)| (*x || !exec) && a >= *va && a - va < *fsize).and_then(|(va, _, off, _)| (a - va).checked_add(*off))
    };
    let mut out = Vec::new();
    let mut any = false;
    for section in file.sections().filter(|s| s.name() == Ok(".note.stapsdt")) {
        if section.size() > MAX_NOTES_BYTES {
            return Err(format!("its .note.stapsdt is larger than {MAX_NOTES_BYTES} bytes"));
        }
        let Ok(bytes) = section.data() else { continue };
        for n in parse_notes(bytes, addr, little) {
            any = true;
            // Prelink moved the file: move the probe point as much (perf, LTTng).
            let address = match base_section {
                Some(b) if n.base != 0 => n.pc.wrapping_add(b).wrapping_sub(n.base),
                _ => n.pc,
            };
            let Some(offset) = to_offset(address, true) else { continue };
            let semaphore = if n.sema == 0 {
                None
            } else {
                match to_offset(n.sema, false) {
                    Some(o) => Some(o),
                    None => continue,
                }
            };
            out.push(Note { provider: n.provider, name: n.name, args: n.args, address, offset, semaphore });
        }
    }
    if out.is_empty() {
        return Err(if any {
            "its SDT notes point outside the file's segments: none can be probed".into()
        } else {
            "the file has no SDT notes (.note.stapsdt): build it with <sys/sdt.h> probes, or with ust's cargo feature sdt".into()
        });
    }
    Ok(out)
}

/// The tracefs name of an x86-64 register as an SDT operand writes it (`%rax`, `%eax`,
/// `%ax`, `%al`, `%r8d`…): the whole register (`%ax`, `%r8`), read at the operand's size.
fn register(name: &str) -> Option<&'static str> {
    const LEGACY: [(&str, [&str; 4]); 8] = [
        ("%ax", ["rax", "eax", "ax", "al"]),
        ("%bx", ["rbx", "ebx", "bx", "bl"]),
        ("%cx", ["rcx", "ecx", "cx", "cl"]),
        ("%dx", ["rdx", "edx", "dx", "dl"]),
        ("%si", ["rsi", "esi", "si", "sil"]),
        ("%di", ["rdi", "edi", "di", "dil"]),
        ("%bp", ["rbp", "ebp", "bp", "bpl"]),
        ("%sp", ["rsp", "esp", "sp", "spl"]),
    ];
    const NUMBERED: [&str; 8] = ["%r8", "%r9", "%r10", "%r11", "%r12", "%r13", "%r14", "%r15"];
    if let Some((t, _)) = LEGACY.iter().find(|(_, names)| names.contains(&name)) {
        return Some(t);
    }
    let n = name.strip_prefix('r')?;
    let digits = n.trim_end_matches(['d', 'w', 'b']);
    if digits.len() + 1 < n.len() {
        return None;
    }
    NUMBERED.iter().copied().find(|r| r[2..] == *digits)
}

/// A signed decimal or `0x` hexadecimal constant, as the assembler writes displacements and
/// immediates.
fn constant(s: &str) -> Option<i64> {
    let (neg, digits) = match s.strip_prefix('-') {
        Some(d) => (true, d),
        None => (false, s.strip_prefix('+').unwrap_or(s)),
    };
    let v = match digits.strip_prefix("0x").or_else(|| digits.strip_prefix("0X")) {
        Some(h) => u64::from_str_radix(h, 16).ok()?,
        None if !digits.is_empty() && digits.bytes().all(|c| c.is_ascii_digit()) => digits.parse::<u64>().ok()?,
        None => return None,
    };
    Some(if neg { (v as i64).wrapping_neg() } else { v as i64 })
}

/// One SDT operand (`-4@%ecx`, `8@-16(%rbp)`, `4@$3`) as a tracefs fetch and type
/// (`%cx`, `s32`).
///
/// # Errors
/// What tracefs cannot fetch (or what does not parse), to say in the note.
pub fn operand(op: &str) -> Result<(String, String), String> {
    let (size, loc) = match op.split_once('@') {
        Some((s, l)) => (s, l),
        None => ("8", op),
    };
    let (signed, bytes) = match size.strip_prefix('-') {
        Some(b) => (true, b),
        None => (false, size),
    };
    let bits = match bytes {
        "1" => 8,
        "2" => 16,
        "4" => 32,
        "8" => 64,
        _ => return Err(format!("{op:?}: size {size} (not an integer of 1, 2, 4 or 8 bytes)")),
    };
    let ty = format!("{}{bits}", if signed { 's' } else { 'u' });
    if let Some(imm) = loc.strip_prefix('$') {
        let v = constant(imm).ok_or_else(|| format!("{op:?}: a constant tracefs cannot take"))?;
        return Ok((format!("\\{v}"), ty));
    }
    if let Some(reg) = loc.strip_prefix('%') {
        let r = register(reg).ok_or_else(|| format!("{op:?}: register {reg} cannot be fetched"))?;
        return Ok((r.to_string(), ty));
    }
    // disp(%reg): memory at a register plus a constant.
    if let Some((disp, inner)) = loc.strip_suffix(')').and_then(|l| l.split_once('(')) {
        let reg = inner.strip_prefix('%').filter(|r| !r.contains(',')).ok_or_else(|| format!("{op:?}: only a base register (no index) can be fetched"))?;
        let r = register(reg).ok_or_else(|| format!("{op:?}: register {reg} cannot be fetched"))?;
        let d = if disp.is_empty() { 0 } else { constant(disp).ok_or_else(|| format!("{op:?}: displacement {disp} is not a number"))? };
        let sign = if d < 0 { '-' } else { '+' };
        return Ok((format!("{sign}{}({r})", d.unsigned_abs()), ty));
    }
    Err(format!("{op:?}: an operand tracefs cannot fetch"))
}

/// The fetch arguments of a probe's `locations` (each a note's operand string): `argN`
/// for operand `N`, kept only where every location can fetch it with the same type.
/// Returns one list per location (same names and types, in the same order) and what was
/// left out.
fn unify(locations: &[&str]) -> (Vec<Vec<FetchArg>>, Option<String>) {
    let parsed: Vec<Vec<Result<(String, String), String>>> = locations.iter().map(|a| a.split_whitespace().map(operand).collect()).collect();
    let n = parsed.iter().map(Vec::len).max().unwrap_or(0);
    let mut out: Vec<Vec<FetchArg>> = vec![Vec::new(); locations.len()];
    let mut left_out = Vec::new();
    for i in 0..n {
        let at: Vec<Option<&Result<(String, String), String>>> = parsed.iter().map(|p| p.get(i)).collect();
        let first_ty = at.first().and_then(|r| r.and_then(|r| r.as_ref().ok())).map(|(_, t)| t.clone());
        let why = if i >= MAX_ARGS {
            Some(format!("arg{i}: at most {MAX_ARGS} arguments"))
        } else if let Some(Some(Err(e))) = at.iter().find(|r| matches!(r, Some(Err(_)))) {
            Some(format!("arg{i}: {e}"))
        } else if at.iter().any(|r| r.is_none()) || at.iter().any(|r| r.and_then(|r| r.as_ref().ok()).map(|(_, t)| t) != first_ty.as_ref()) {
            Some(format!("arg{i}: the probe's locations disagree on it"))
        } else {
            None
        };
        if let Some(w) = why {
            left_out.push(w);
            continue;
        }
        for (k, r) in at.iter().enumerate() {
            if let Some(Ok((fetch, ty))) = r {
                out[k].push(FetchArg { name: format!("arg{i}"), fetch: fetch.clone(), ty: ty.clone() });
            }
        }
    }
    let note = (!left_out.is_empty()).then(|| format!("not recorded: {}", left_out.join("; ")));
    (out, note)
}

/// Whether the bytes at `offset` of `file` are a `nop` (`90`, or the `0f 1f` of a long
/// one), as `<sys/sdt.h>` puts at every x86 probe point: a note whose point is anything
/// else lies (a breakpoint there could split an instruction).
fn is_nop(file: &File, offset: u64) -> bool {
    use std::os::unix::fs::FileExt;
    let mut b = [0u8; 2];
    matches!(file.read_at(&mut b, offset), Ok(n) if n >= 1 && (b[0] == 0x90 || (n == 2 && b == [0x0f, 0x1f])))
}

/// Resolves probe `provider:name` in the open ELF `file` (shown as `path`) to one uprobe
/// per location, all named `event` (tracefs appends them to one event): at the note's
/// probe point, with its semaphore as reference counter and its operands as fetch
/// arguments. Reads only the headers and notes (through [`object::ReadCache`], positioned
/// reads): root's daemon calls it on a user's file.
///
/// # Errors
/// Not an x86-64 ELF file, no such probe (with the probes of that provider, or all), too
/// many locations, or a probe point that is not a `nop`.
pub fn resolve_file(file: File, path: &Path, provider: &str, name: &str, event: &str) -> Result<Vec<Probe>, String> {
    let at = |e: String| format!("{}: {e}", path.display());
    let all = {
        let cache = object::ReadCache::new(PositionedReader { file: &file, pos: 0 });
        let obj = object::File::parse(&cache).map_err(|e| at(format!("not an ELF file this tool can read ({e})")))?;
        if obj.architecture() != object::Architecture::X86_64 {
            return Err(at(format!("SDT probes are read on x86-64 files only (this one is {:?})", obj.architecture())));
        }
        notes(&cache).map_err(at)?
    };
    let found: Vec<&Note> = all.iter().filter(|n| n.provider == provider && n.name == name).collect();
    if found.is_empty() {
        let mut known: Vec<String> = all.iter().filter(|n| n.provider == provider).map(|n| format!("{}:{}", n.provider, n.name)).collect();
        if known.is_empty() {
            known = all.iter().map(|n| format!("{}:{}", n.provider, n.name)).collect();
        }
        known.sort();
        known.dedup();
        let list: String = known.iter().take(20).map(|k| format!("\n  {k}")).collect();
        return Err(at(format!("no SDT probe {provider}:{name} in the file; its probes:{list}")));
    }
    if found.len() > MAX_LOCATIONS {
        return Err(at(format!("{provider}:{name} has {} locations (at most {MAX_LOCATIONS})", found.len())));
    }
    for n in &found {
        if !is_nop(&file, n.offset) {
            return Err(at(format!("the note of {provider}:{name} points at file offset 0x{:x}, which is not a nop: refused", n.offset)));
        }
    }
    let ops: Vec<&str> = found.iter().map(|n| n.args.as_str()).collect();
    let (args, note) = unify(&ops);
    let mut out = Vec::new();
    for (k, (n, args)) in found.iter().zip(args).enumerate() {
        let f = file.try_clone().map_err(|e| at(format!("dup: {e}")))?;
        out.push(Probe {
            event: event.to_string(),
            file: f,
            path: path.to_path_buf(),
            function: format!("{provider}:{name}"),
            offset: n.offset,
            ret: false,
            args,
            note: if k == 0 { note.clone() } else { None },
            ref_ctr: n.semaphore,
            sdt: true,
        });
    }
    Ok(out)
}

/// Opens `spec`'s file and resolves it ([`resolve_file`]), named `name` or the spec's
/// [`SdtSpec::default_name`].
///
/// # Errors
/// The file cannot be opened or is not a regular file; those of [`resolve_file`].
pub fn resolve(spec: &SdtSpec, name: Option<&str>) -> Result<Vec<Probe>, String> {
    let path = spec.file();
    let file = File::open(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    let meta = file.metadata().map_err(|e| format!("{}: {e}", path.display()))?;
    if !meta.is_file() {
        return Err(format!("{}: not a regular file", path.display()));
    }
    let name = name.map(str::to_string).unwrap_or_else(|| spec.default_name());
    super::validate_name(&name)?;
    resolve_file(file, &path, &spec.provider, &spec.name, &name)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn note(pc: u64, base: u64, sema: u64, strings: &[u8]) -> Vec<u8> {
        let mut desc = Vec::new();
        for w in [pc, base, sema] {
            desc.extend_from_slice(&w.to_le_bytes());
        }
        desc.extend_from_slice(strings);
        let mut n = Vec::new();
        n.extend_from_slice(&8u32.to_le_bytes());
        n.extend_from_slice(&(desc.len() as u32).to_le_bytes());
        n.extend_from_slice(&3u32.to_le_bytes());
        n.extend_from_slice(b"stapsdt\0");
        n.extend_from_slice(&desc);
        while n.len() % 4 != 0 {
            n.push(0);
        }
        n
    }

    #[test]
    fn specs_parse() {
        let s = SdtSpec::parse("sdt:/bin/app:myapp:tick").unwrap();
        assert_eq!((s.path.to_str().unwrap(), s.provider.as_str(), s.name.as_str()), ("/bin/app", "myapp", "tick"));
        assert_eq!(s.default_name(), "tick");
        let c = SdtSpec::parse("sdt:/tmp/a\\:b:p:n").unwrap();
        assert_eq!(c.path, PathBuf::from("/tmp/a:b"));
        for bad in ["sdt:/bin/app", "sdt:/bin/app:p", "sdt:/bin/app:p:", "sdt::p:n", "sdt:/a::n", "sdt:/a:p:n:x", "elf:/a:f"] {
            assert!(SdtSpec::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn notes_parse_and_hostile_ones_never_panic() {
        let good = note(0x1000, 0x2000, 0x3000, b"prov\0name\0-8@%rax 4@$0\0");
        let n = parse_notes(&good, 8, true);
        assert_eq!(n.len(), 1);
        assert_eq!((n[0].pc, n[0].base, n[0].sema), (0x1000, 0x2000, 0x3000));
        assert_eq!((n[0].provider.as_str(), n[0].name.as_str(), n[0].args.as_str()), ("prov", "name", "-8@%rax 4@$0"));
        // Two notes in a row, the second one found.
        let two = [good.clone(), note(1, 0, 0, b"p\0q\0\0")].concat();
        assert_eq!(parse_notes(&two, 8, true).len(), 2);
        // Every truncation of a valid note: no panic, nothing half-read.
        for cut in 0..good.len() {
            let n = parse_notes(&good[..cut], 8, true);
            assert!(n.is_empty() || n[0].args == "-8@%rax 4@$0", "cut {cut}: {n:?}");
        }
        // Lying sizes: a description longer than the section, a huge name size, strings
        // without their NUL, an empty provider, another owner.
        let mut long = good.clone();
        long[4..8].copy_from_slice(&0xffff_fff0u32.to_le_bytes());
        assert!(parse_notes(&long, 8, true).is_empty());
        let mut huge = good.clone();
        huge[0..4].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(parse_notes(&huge, 8, true).is_empty());
        assert!(parse_notes(&note(1, 0, 0, b"prov\0name\0-8@%rax"), 8, true).is_empty());
        assert!(parse_notes(&note(1, 0, 0, b"\0name\0\0"), 8, true).is_empty());
        let mut other = good.clone();
        other[12..19].copy_from_slice(b"stapsdx");
        assert!(parse_notes(&other, 8, true).is_empty());
        // A description too short for its three addresses.
        let mut short = Vec::new();
        short.extend_from_slice(&8u32.to_le_bytes());
        short.extend_from_slice(&4u32.to_le_bytes());
        short.extend_from_slice(&3u32.to_le_bytes());
        short.extend_from_slice(b"stapsdt\0\x01\x02\x03\x04");
        assert!(parse_notes(&short, 8, true).is_empty());
        // Random bytes.
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        for len in 0..400 {
            let junk: Vec<u8> = (0..len)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    x as u8
                })
                .collect();
            let _ = parse_notes(&junk, 8, true);
            let _ = parse_notes(&[good.as_slice(), &junk].concat(), 8, true);
        }
    }

    #[test]
    fn hostile_elf_files_are_refused_not_panicking() {
        assert!(notes(&b"\x7fELF"[..]).is_err());
        assert!(notes(&b"not elf at all"[..]).is_err());
        // This test binary has no SDT notes (ust-kernel does not link ust with `sdt`).
        let me = std::fs::read(std::env::current_exe().unwrap()).unwrap();
        assert!(notes(me.as_slice()).unwrap_err().contains("no SDT notes"));
        // Truncations of a real ELF file never panic.
        for cut in [16usize, 64, 100, 1000, 4096, me.len() / 2] {
            let _ = notes(&me[..cut.min(me.len())]);
        }
    }

    #[test]
    fn operands_become_fetch_arguments() {
        let op = |s: &str| operand(s).map(|(f, t)| format!("{f}:{t}"));
        assert_eq!(op("-8@%rax").unwrap(), "%ax:s64");
        assert_eq!(op("4@%ecx").unwrap(), "%cx:u32");
        assert_eq!(op("1@%sil").unwrap(), "%si:u8");
        assert_eq!(op("-2@%r10w").unwrap(), "%r10:s16");
        assert_eq!(op("8@%r15").unwrap(), "%r15:u64");
        assert_eq!(op("-4@-20(%rbp)").unwrap(), "-20(%bp):s32");
        assert_eq!(op("8@8(%rsp)").unwrap(), "+8(%sp):u64");
        assert_eq!(op("8@(%rdi)").unwrap(), "+0(%di):u64");
        assert_eq!(op("4@0x10(%rdx)").unwrap(), "+16(%dx):u32");
        assert_eq!(op("-8@$0").unwrap(), "\\0:s64");
        assert_eq!(op("-4@$-3").unwrap(), "\\-3:s32");
        assert_eq!(op("%rdi").unwrap(), "%di:u64");
        for bad in ["3@%rax", "8@%xmm0", "8@%ah", "8@(%rax,%rbx,8)", "8@foo(%rip)", "8@$sym", "8@%r16", "8@%r8x", "8@", "@", "-@%rax"] {
            assert!(operand(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn locations_agree_or_the_argument_is_left_out() {
        let (args, note) = unify(&["-8@%rax 4@%rcx 8@%rdx", "-8@$0 4@$0 8@$0"]);
        assert_eq!(args.len(), 2);
        assert_eq!(args[0].iter().map(|a| format!("{}={}:{}", a.name, a.fetch, a.ty)).collect::<Vec<_>>(), ["arg0=%ax:s64", "arg1=%cx:u32", "arg2=%dx:u64"]);
        assert_eq!(args[1][0].fetch, "\\0");
        assert!(note.is_none());
        let (args, note) = unify(&["-8@%rax 4@%rcx 8@%xmm1", "-8@%rbx 8@%rcx"]);
        assert_eq!(args[0].iter().map(|a| a.name.as_str()).collect::<Vec<_>>(), ["arg0"]);
        assert_eq!(args[1].len(), 1);
        let note = note.unwrap();
        assert!(note.contains("arg1: the probe's locations disagree") && note.contains("arg2"), "{note}");
    }
}
