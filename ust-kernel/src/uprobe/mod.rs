//! Dynamic probes on uninstrumented user code: tracefs uprobes
//! (Documentation/trace/uprobetracer.rst), placed by root in `uprobe_events` and enabled in
//! ust's own tracefs instances, so their events are recorded, filtered and written with the
//! rest of the kernel view (`<output>/kernel/`, the trace clock).
//!
//! ```text
//! elf:PATH:SYMBOL[%return] ──Spec::parse──> open PATH ──elf::functions + resolve──> file offset
//!                                                     └─dwarf::signature──> fetch args (%di:u32 …)
//!   Probe ──place──> uprobe_events: p:ustp_<pid>_<n>/NAME /proc/self/fd/N:0xOFF a=%di:u32 …
//!                                   r:ustp_<pid>_<n>/NAME_return … ret=$retval:u64
//!         ──enable──> instances/ust-…/events/ustp_<pid>_<n>/NAME/enable
//! ```
//!
//! The probe names the file as `/proc/self/fd/N` of the descriptor its symbols were read
//! from: the kernel resolves that to the very inode that was checked, so a file renamed or
//! replaced meanwhile is never the one probed. Probes are a machine-wide table: each
//! recording's are in a group of its own, `ustp_<pid>_<n>`, removed when it ends
//! ([`Placed`]'s drop, after the instances that enable them are gone), and by the next
//! recording when its process died ([`remove_stale`]).
//!
//! `sdt:PATH:PROVIDER:PROBE` ([`sdt`]) takes the same road: one [`Probe`] per location of
//! the SDT probe, each at its note's `nop` with the note's semaphore as reference counter
//! (`/proc/self/fd/N:0xOFF(0xREF)`), appended to one event. [`ProbeSpec`] parses and
//! resolves either kind.
//!
//! `elf:PATH:SYMBOL+OFFSET` (root only) goes OFFSET bytes into the function once
//! [`insn::check_offset`] proves an instruction starts there; it records `ip` only.
//!
//! Who may ask for what is [`check_user_file`] and [`validate`]: root anything; an
//! ordinary user (through root's daemon) only regular files they own that are not
//! set-user-ID, set-group-ID or file-capability programs, only at a function symbol's
//! first instruction or its return, with arguments fetched from registers only, or at an
//! SDT note's `nop` with the note's own operands (read by the daemon).

pub mod dwarf;
pub mod elf;
pub mod insn;
pub mod sdt;

use std::fs::File;
use std::io::Write;
use std::os::fd::AsRawFd;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// Why an ordinary user's `SYMBOL+OFFSET` is refused (issue 30: their probes go only at
/// a function's entry, its return or an SDT note; only root may probe mid-function).
pub const OFFSET_ROOT_ONLY: &str =
    "SYMBOL+OFFSET is root's only: an ordinary user's probe goes only at a function's entry (a symbol's start address), its return, or an SDT note";

/// Prefix of the probe groups this tool creates (`ustp_<pid>_<n>`).
pub const GROUP_PREFIX: &str = "ustp_";
/// Most probes one recording places.
pub const MAX_PROBES: usize = 32;
/// Most fetch arguments of one probe (tracefs allows 128; the ABI gives six registers).
pub const MAX_ARGS: usize = 12;
/// Longest event name (tracefs' `MAX_EVENT_NAME_LEN` is 64; `_return` must fit).
pub const MAX_NAME: usize = 48;

/// One tracefs fetch argument: `name=fetch:ty` (`count=%si:u64`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FetchArg {
    /// Field name in the event.
    pub name: String,
    /// What tracefs fetches: a register (`%di`), `$retval`, or the memory at a register
    /// (`+0(%dx)`, a `&str`'s content).
    pub fetch: String,
    /// tracefs type: `u8`…`u64`, `s8`…`s64`, `x8`…`x64`, or an array of bytes (`u8[32]`).
    pub ty: String,
}

/// A probe request as written: `elf:PATH:SYMBOL`, `elf:PATH:SYMBOL+OFFSET` or
/// `elf:PATH:SYMBOL%return`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Spec {
    /// The ELF file.
    pub path: PathBuf,
    /// A Rust path (`app::db::query`) or C symbol.
    pub symbol: String,
    /// Bytes from the function's start (`SYMBOL+OFFSET`): root's probes only, and only at
    /// an instruction start the decoder proves ([`insn::check_offset`]).
    pub offset: Option<u64>,
    /// A return probe.
    pub ret: bool,
}

/// Splits `SYMBOL+OFFSET` (OFFSET decimal or `0x` hex) into the symbol and the offset;
/// a symbol without `+` is returned whole.
///
/// # Errors
/// An empty symbol or an OFFSET that is not a number.
pub fn split_offset(symbol: &str) -> Result<(String, Option<u64>), String> {
    let Some((sym, off)) = symbol.rsplit_once('+') else { return Ok((symbol.to_string(), None)) };
    let n = match off.strip_prefix("0x").or_else(|| off.strip_prefix("0X")) {
        Some(hex) => u64::from_str_radix(hex, 16),
        None => off.parse::<u64>(),
    };
    match n {
        Ok(n) if !sym.is_empty() => Ok((sym.to_string(), Some(n))),
        _ => Err(format!("{symbol:?}: SYMBOL+OFFSET takes a symbol and a decimal or 0x hexadecimal offset in bytes")),
    }
}

/// Splits a spec's `PATH:REST` (its `elf:`/`sdt:` prefix removed) at the first `:` not
/// escaped as `\:` (LTTng's syntax for a path holding a colon): the path with its escapes
/// undone, and what follows the colon (`None` when there is no colon).
fn split_path(rest: &str) -> (String, Option<&str>) {
    let mut path = String::new();
    let mut chars = rest.char_indices();
    while let Some((i, c)) = chars.next() {
        match c {
            '\\' if rest[i + 1..].starts_with(':') => {
                chars.next();
                path.push(':');
            }
            ':' => return (path, Some(&rest[i + 1..])),
            c => path.push(c),
        }
    }
    (path, None)
}

impl Spec {
    /// Parses `elf:PATH:SYMBOL[+OFFSET][%return]` (LTTng's `--userspace-probe` syntax;
    /// `elf:` may be left out, as LTTng allows; OFFSET decimal or `0x` hex, not with
    /// `%return`). PATH ends at the first `:` not escaped as `\:`, so a
    /// Rust path keeps its `::`; a PATH without `/` is looked up in `$PATH` when resolved.
    ///
    /// # Errors
    /// What is wrong with the text.
    pub fn parse(text: &str) -> Result<Spec, String> {
        if text.starts_with("sdt:") {
            return Err(format!("{text:?}: an sdt: probe, not an elf: one (parse it with ProbeSpec::parse or sdt::SdtSpec::parse)"));
        }
        let rest = text.strip_prefix("elf:").unwrap_or(text);
        let (path, symbol) = split_path(rest);
        let symbol = symbol.ok_or_else(|| format!("{text:?}: no SYMBOL (a probe is elf:PATH:SYMBOL or elf:PATH:SYMBOL%return)"))?;
        let (symbol, ret) = match symbol.strip_suffix("%return") {
            Some(s) => (s, true),
            None => (symbol, false),
        };
        if path.is_empty() || symbol.is_empty() {
            return Err(format!("{text:?}: PATH and SYMBOL must not be empty (elf:PATH:SYMBOL)"));
        }
        if symbol.starts_with(|c: char| c.is_ascii_digit()) {
            return Err(format!("{text:?}: probes at an address are not supported: name a function"));
        }
        let (symbol, offset) = split_offset(symbol).map_err(|e| format!("{text:?}: {e}"))?;
        if ret && offset.is_some() {
            return Err(format!("{text:?}: %return with an offset: a return probe goes at the function's return, give SYMBOL%return"));
        }
        Ok(Spec { path: PathBuf::from(path), symbol, offset, ret })
    }

    /// The file: PATH itself, or for a PATH without `/` the first regular file of that
    /// name in the directories of `$PATH` (as a shell finds a command).
    pub fn file(&self) -> PathBuf {
        if self.path.components().count() == 1 && !self.path.to_string_lossy().contains('/') {
            for dir in std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default()) {
                let p = dir.join(&self.path);
                if p.is_file() {
                    return p;
                }
            }
        }
        self.path.clone()
    }

    /// The symbol as written, with its offset: `query` or `query+0x10`.
    pub fn symbol_text(&self) -> String {
        match self.offset {
            Some(off) => format!("{}+{off:#x}", self.symbol),
            None => self.symbol.clone(),
        }
    }

    /// The event's default name: the symbol's last path component (`query`), with
    /// `_return` for a return probe, and for `SYMBOL+OFFSET` the offset in decimal after
    /// `_` (`query_16`), as `perf probe` names a probe at `query+16`.
    pub fn default_name(&self) -> String {
        let name = elf::demangle(&self.symbol);
        let last = name.rsplit("::").next().unwrap_or(&name);
        let base = dwarf::field_name(last);
        match (self.ret, self.offset) {
            (true, _) => format!("{base}_return"),
            (false, Some(off)) => format!("{base}_{off}"),
            (false, None) => base,
        }
    }
}

/// A probe resolved to a file offset, ready to place.
#[derive(Debug)]
pub struct Probe {
    /// Event name (`query`, `query_return`).
    pub event: String,
    /// The file, open: the probe is placed on its inode.
    pub file: File,
    /// The path as given (messages only).
    pub path: PathBuf,
    /// The function (demangled).
    pub function: String,
    /// File offset of the instruction probed: the function's first, or for
    /// `SYMBOL+OFFSET` the one OFFSET bytes into it.
    pub offset: u64,
    /// A return probe.
    pub ret: bool,
    /// Fetch arguments.
    pub args: Vec<FetchArg>,
    /// What could not be recorded of the arguments, to print.
    pub note: Option<String>,
    /// File offset of the reference counter the kernel increments while the probe exists
    /// (an SDT probe's semaphore: `uprobe_events`' `PATH:OFFSET(REF_CTR_OFFSET)`).
    pub ref_ctr: Option<u64>,
    /// An SDT probe's location ([`sdt`]; `function` is then `PROVIDER:PROBE`): the
    /// locations of one probe share its event (tracefs appends them to it).
    pub sdt: bool,
}

/// A `--userspace-probe` spec of either kind.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ProbeSpec {
    /// `elf:PATH:SYMBOL[+OFFSET][%return]` (or `PATH:SYMBOL`).
    Elf(Spec),
    /// `sdt:PATH:PROVIDER:PROBE`.
    Sdt(sdt::SdtSpec),
}

impl ProbeSpec {
    /// Parses a spec of either kind (LTTng's `--userspace-probe` syntax).
    ///
    /// # Errors
    /// Those of [`Spec::parse`] and [`sdt::SdtSpec::parse`].
    pub fn parse(text: &str) -> Result<ProbeSpec, String> {
        if text.starts_with("sdt:") {
            sdt::SdtSpec::parse(text).map(ProbeSpec::Sdt)
        } else {
            Spec::parse(text).map(ProbeSpec::Elf)
        }
    }

    /// The file named (as given).
    pub fn path(&self) -> &Path {
        match self {
            ProbeSpec::Elf(s) => &s.path,
            ProbeSpec::Sdt(s) => &s.path,
        }
    }

    /// The event's default name.
    pub fn default_name(&self) -> String {
        match self {
            ProbeSpec::Elf(s) => s.default_name(),
            ProbeSpec::Sdt(s) => s.default_name(),
        }
    }

    /// Resolves the spec to the probes to place, named `name` or the default name: one
    /// for an `elf:` spec ([`resolve`]), one per location for an `sdt:` spec
    /// ([`sdt::resolve`]).
    ///
    /// # Errors
    /// Those of [`resolve`] and [`sdt::resolve`].
    pub fn resolve(&self, name: Option<&str>) -> Result<Vec<Probe>, String> {
        match self {
            ProbeSpec::Elf(s) => resolve(s, name).map(|p| vec![p]),
            ProbeSpec::Sdt(s) => sdt::resolve(s, name),
        }
    }
}

/// Reads at most [`elf::MAX_FILE`] bytes of `file` from its start, whatever its file
/// position (a descriptor a user sent shares theirs), never mapped: a file truncated under
/// a mapping would fault the reader.
fn read_all(file: &File) -> Result<Vec<u8>, String> {
    use std::os::unix::fs::FileExt;
    let mut data = Vec::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = match file.read_at(&mut buf, data.len() as u64) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(format!("reading it: {e}")),
        };
        data.extend_from_slice(&buf[..n]);
        if data.len() as u64 > elf::MAX_FILE {
            return Err(format!("larger than {} bytes", elf::MAX_FILE));
        }
    }
    Ok(data)
}

/// A file read through positioned reads (`pread`), so that reading never moves the
/// descriptor's own offset (shared with the process that sent it).
struct PositionedReader<'a> {
    file: &'a File,
    pos: u64,
}

impl object::ReadCacheOps for PositionedReader<'_> {
    fn len(&mut self) -> Result<u64, ()> {
        self.file.metadata().map(|m| m.len()).map_err(|_| ())
    }

    fn seek(&mut self, pos: u64) -> Result<u64, ()> {
        self.pos = pos;
        Ok(pos)
    }

    fn read(&mut self, buf: &mut [u8]) -> Result<usize, ()> {
        use std::os::unix::fs::FileExt;
        let n = self.file.read_at(buf, self.pos).map_err(|_| ())?;
        self.pos += n as u64;
        Ok(n)
    }

    fn read_exact(&mut self, mut buf: &mut [u8]) -> Result<(), ()> {
        while !buf.is_empty() {
            let n = object::ReadCacheOps::read(self, buf)?;
            if n == 0 {
                return Err(());
            }
            buf = &mut buf[n..];
        }
        Ok(())
    }
}

/// Resolves `symbol` in the open ELF `file` (shown as `path`) to a probe named `event`:
/// its entry (with `dwarf`, arguments from DWARF, else the six argument registers as
/// `arg0`…`arg5`) or, with `ret`, its return (`ret=$retval`, typed from DWARF, else
/// `u64`). Root's daemon resolves without `dwarf` and takes the arguments the user
/// asked for once [`validate`]d.
///
/// With `at`, the probe goes `at` bytes into the function (only with `dwarf`: root's own
/// probes), once [`insn::check_offset`] proves an instruction starts there; it records
/// no arguments (DWARF's argument locations hold at the entry only), just `ip`.
///
/// # Errors
/// Not an ELF file, no such function or an ambiguous name (with the candidates); an
/// offset not proven an instruction start (why), or asked for without `dwarf`.
pub fn resolve_file(file: File, path: &Path, symbol: &str, at_offset: Option<u64>, ret: bool, event: &str, dwarf: bool) -> Result<Probe, String> {
    let at = |e: String| format!("{}: {e}", path.display());
    let (f, sig) = if dwarf {
        let data = read_all(&file).map_err(at)?;
        let funcs = elf::functions(data.as_slice()).map_err(at)?;
        let mut f = elf::resolve(&funcs, symbol).map_err(at)?.clone();
        if let Some(off) = at_offset {
            let code = usize::try_from(f.offset)
                .ok()
                .zip(usize::try_from(f.size).ok())
                .and_then(|(start, len)| data.get(start..start.checked_add(len)?))
                .ok_or_else(|| at(format!("{}'s bytes ({} at file offset {:#x}) are not all in the file", f.name, f.size, f.offset)))?;
            insn::check_offset(code, off).map_err(|e| at(format!("{}+{off:#x}: {e}", f.name)))?;
            f.offset += off;
            f.name = format!("{}+{off:#x}", f.name);
            return Ok(Probe {
                event: event.to_string(),
                file,
                path: path.to_path_buf(),
                note: Some(format!("{}: DWARF's argument locations hold at the function's entry only: recording ip, no arguments", f.name)),
                function: f.name,
                offset: f.offset,
                ret,
                args: Vec::new(),
                ref_ctr: None,
                sdt: false,
            });
        }
        let sig = dwarf::signature(&data, f.address);
        (f, sig)
    } else {
        if at_offset.is_some() {
            return Err(at("a probe at SYMBOL+OFFSET is root's own only: an ordinary user's probe goes only at a function's entry or its return".into()));
        }
        // Root's daemon, on a user's file: only the headers and symbol tables are read,
        // through a cache over the descriptor (positioned reads: the sender's offset stays).
        let cache = object::ReadCache::new(PositionedReader { file: &file, pos: 0 });
        let funcs = elf::functions(&cache).map_err(at)?;
        (elf::resolve(&funcs, symbol).map_err(at)?.clone(), None)
    };
    let (args, note) = match (&sig, ret) {
        (Some(s), false) if s.args.is_empty() && s.truncated.is_none() => (
            Vec::new(),
            Some(format!("DWARF lists no arguments for {}: it has none, or the file has line tables only (build with debug = 2 for them)", f.name)),
        ),
        (Some(s), false) => (s.args.clone(), s.truncated.clone()),
        (Some(s), true) => (vec![FetchArg { name: "ret".into(), fetch: "$retval".into(), ty: s.ret.unwrap_or("u64").into() }], None),
        (None, false) => (
            dwarf::ARG_REGISTERS.iter().enumerate().map(|(i, r)| FetchArg { name: format!("arg{i}"), fetch: (*r).into(), ty: "u64".into() }).collect(),
            Some(format!("no DWARF for {}: recording the six argument registers as arg0..arg5", f.name)),
        ),
        (None, true) => (vec![FetchArg { name: "ret".into(), fetch: "$retval".into(), ty: "u64".into() }], None),
    };
    Ok(Probe { event: event.to_string(), file, path: path.to_path_buf(), function: f.name, offset: f.offset, ret, args, note, ref_ctr: None, sdt: false })
}

/// Opens `spec`'s file and resolves it ([`resolve_file`]), named `name` or the spec's
/// [`Spec::default_name`].
///
/// # Errors
/// The file cannot be opened or is not a regular file; those of [`resolve_file`].
pub fn resolve(spec: &Spec, name: Option<&str>) -> Result<Probe, String> {
    let path = spec.file();
    let file = File::open(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    let meta = file.metadata().map_err(|e| format!("{}: {e}", path.display()))?;
    if !meta.is_file() {
        return Err(format!("{}: not a regular file", path.display()));
    }
    if on_noexec_mount(&file) {
        return Err(format!("{}: on a noexec mount: no process can run code from it, so a probe there would never fire", path.display()));
    }
    let name = name.map(str::to_string).unwrap_or_else(|| spec.default_name());
    validate_name(&name)?;
    resolve_file(file, &path, &spec.symbol, spec.offset, spec.ret, &name, true)
}

/// Event names a probe may not take: the kernel view's own classes.
fn reserved(name: &str) -> bool {
    name.starts_with("syscall_")
        || name.starts_with("lttng_")
        || crate::ctf::EVENTS.iter().chain(crate::ctf::ROOT_EVENTS).any(|(_, ev, ctf)| *ev == name || *ctf == name)
}

/// Checks an event name: `[A-Za-z_][A-Za-z0-9_]*`, at most [`MAX_NAME`] bytes, not one of
/// the kernel view's event names.
///
/// # Errors
/// Why not.
pub fn validate_name(name: &str) -> Result<(), String> {
    let ok = !name.is_empty()
        && name.len() <= MAX_NAME
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        && !name.starts_with(|c: char| c.is_ascii_digit());
    if !ok {
        return Err(format!("probe event name {name:?}: letters, digits and _ only, not starting with a digit, at most {MAX_NAME} bytes"));
    }
    if reserved(name) {
        return Err(format!("probe event name {name:?} is one of the kernel view's own events: choose another"));
    }
    Ok(())
}

/// Checks fetch arguments a user asked for: each `NAME=REG:TYPE` with a register of the
/// argument set (or `$retval`, for a return probe), an integer type, a safe name; at an
/// entry also the content of a `&str`/`&[u8]`, `NAME=+0(REG):u8[N]` with N at most
/// [`dwarf::CONTENT_BYTES`] ([`dwarf::is_content_fetch`]), and no other memory form.
///
/// # Errors
/// The first argument refused, and why.
pub fn validate(args: &[FetchArg], ret: bool) -> Result<(), String> {
    if args.len() > MAX_ARGS {
        return Err(format!("at most {MAX_ARGS} arguments per probe"));
    }
    for a in args {
        let reg_ok = if ret { a.fetch == "$retval" } else { dwarf::ARG_REGISTERS.contains(&a.fetch.as_str()) };
        let ty_ok = matches!(a.ty.as_str(), "u8" | "u16" | "u32" | "u64" | "s8" | "s16" | "s32" | "s64" | "x8" | "x16" | "x32" | "x64");
        let content_ok = !ret && dwarf::is_content_fetch(&a.fetch, &a.ty);
        if !(reg_ok && ty_ok || content_ok) || dwarf::field_name(&a.name) != a.name {
            return Err(format!(
                "argument {}={}:{} refused: only the argument registers ({}) at an entry, $retval at a return, as integers, and +0(REG):u8[N] (N <= {}) at an entry",
                a.name,
                a.fetch,
                a.ty,
                dwarf::ARG_REGISTERS.join(" "),
                dwarf::CONTENT_BYTES
            ));
        }
    }
    Ok(())
}

/// Whether user `uid` may probe `file`: a regular file they own, not set-user-ID or
/// set-group-ID, without file capabilities, not on a `noexec` mount (nothing there runs).
/// A probe on such a file can do to other users' processes running it nothing its owner
/// could not do by editing it, and their events are not in the owner's view anyway.
///
/// # Errors
/// Why not, to show the user.
pub fn check_user_file(file: &File, uid: u32) -> Result<(), String> {
    let m = file.metadata().map_err(|e| format!("fstat: {e}"))?;
    if !m.is_file() {
        return Err("not a regular file: refused".into());
    }
    if m.uid() != uid {
        return Err(format!("the file belongs to uid {}, not to you (uid {uid}): you may probe only files you own", m.uid()));
    }
    if m.mode() & (libc::S_ISUID | libc::S_ISGID) != 0 {
        return Err("the file is set-user-ID or set-group-ID: its processes run with privileges you do not have; refused".into());
    }
    let mut buf = [0u8; 64];
    if rustix::fs::fgetxattr(file, "security.capability", &mut buf).is_ok() {
        return Err("the file has file capabilities: its processes run with privileges you do not have; refused".into());
    }
    if on_noexec_mount(file) {
        return Err("the file is on a noexec mount: nothing there can run; refused".into());
    }
    Ok(())
}

/// Whether `file` is on a filesystem mounted `noexec` (no process can map code from it).
fn on_noexec_mount(file: &File) -> bool {
    rustix::fs::fstatvfs(file).is_ok_and(|st| st.f_flag.contains(rustix::fs::StatVfsMountFlags::NOEXEC))
}

static SEQ: AtomicU64 = AtomicU64::new(0);

/// Appends one command to `uprobe_events` (never truncating it: that would remove every
/// probe of the machine).
fn command(root: &Path, line: &str) -> std::io::Result<()> {
    let mut f = std::fs::OpenOptions::new().append(true).open(root.join("uprobe_events"))?;
    f.write_all(format!("{line}\n").as_bytes())
}

/// The last line of tracefs' `error_log` (the reason a command was refused), if any.
fn last_error(root: &Path) -> String {
    let text = std::fs::read_to_string(root.join("error_log")).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines.iter().rposition(|l| l.contains("trace_uprobe")).map(|i| lines[i..].join(" ").split_whitespace().collect::<Vec<_>>().join(" ")).unwrap_or_default()
}

/// A recording's probes in `uprobe_events`, removed on drop (after the instances that
/// enable them: the kernel refuses to remove an enabled probe).
#[derive(Debug)]
pub struct Placed {
    root: PathBuf,
    /// The group (`ustp_<pid>_<n>`): `events/<group>/<event>` in every instance.
    pub group: String,
    /// `(event, function, note)` placed, in order.
    pub events: Vec<(String, String, Option<String>)>,
    /// Per event, its fields fetched as `x…` types (addresses: shown in base 16).
    pub hex_fields: Vec<Vec<String>>,
    enabled_in: Vec<PathBuf>,
}

impl Placed {
    /// Places `probes` under tracefs `root` in a new group of this process.
    ///
    /// # Errors
    /// Too many probes, a duplicate name, or the kernel's refusal (with `error_log`'s
    /// reason); what was placed is removed again.
    pub fn place(root: &Path, probes: &[Probe]) -> Result<Placed, String> {
        if probes.len() > MAX_PROBES {
            return Err(format!("at most {MAX_PROBES} probes per recording"));
        }
        let group = format!("{GROUP_PREFIX}{}_{}", std::process::id(), SEQ.fetch_add(1, Ordering::Relaxed));
        let mut placed = Placed { root: root.to_path_buf(), group, events: Vec::new(), hex_fields: Vec::new(), enabled_in: Vec::new() };
        for p in probes {
            // Another location of the SDT probe just placed: tracefs appends it to the event.
            let more = match placed.events.iter().find(|(e, _, _)| *e == p.event) {
                Some((_, f, _)) if p.sdt && *f == p.function => true,
                Some(_) => return Err(format!("two probes are named {}: give each its own name", p.event)),
                None => false,
            };
            validate_name(&p.event)?;
            let args: String = p.args.iter().map(|a| format!(" {}={}:{}", a.name, a.fetch, a.ty)).collect();
            let ref_ctr = p.ref_ctr.map(|r| format!("(0x{r:x})")).unwrap_or_default();
            let line =
                format!("{}:{}/{} /proc/self/fd/{}:0x{:x}{ref_ctr}{args}", if p.ret { 'r' } else { 'p' }, placed.group, p.event, p.file.as_raw_fd(), p.offset);
            command(root, &line).map_err(|e| {
                format!("the kernel refused the probe on {} in {} ({e}) {}", p.function, p.path.display(), last_error(root)).trim_end().to_string()
            })?;
            if !more {
                placed.events.push((p.event.clone(), p.function.clone(), p.note.clone()));
                placed.hex_fields.push(p.args.iter().filter(|a| a.ty.starts_with('x')).map(|a| a.name.clone()).collect());
            }
        }
        Ok(placed)
    }

    /// Enables every probe's event in the instance `inst` (an instance directory); the
    /// drop disables them there again before removing the probes, whatever the order in
    /// which the instance and this are dropped.
    ///
    /// # Errors
    /// The first event that cannot be enabled, and why.
    pub fn enable_in(&mut self, inst: &Path) -> Result<(), String> {
        self.enabled_in.push(inst.to_path_buf());
        for (e, f, _) in &self.events {
            crate::tracefs::write(&inst.join("events").join(&self.group).join(e).join("enable"), "1")
                .map_err(|err| format!("enabling the probe on {f}: {err}"))?;
        }
        Ok(())
    }
}

impl Drop for Placed {
    fn drop(&mut self) {
        for inst in &self.enabled_in {
            for (e, _, _) in &self.events {
                let _ = std::fs::write(inst.join("events").join(&self.group).join(e).join("enable"), "0");
            }
        }
        for (e, _, _) in &self.events {
            let _ = command(&self.root, &format!("-:{}/{e}", self.group));
        }
    }
}

/// The pid of a probe group of this tool (`ustp_<pid>_<n>`).
fn group_pid(group: &str) -> Option<i32> {
    let (pid, n) = group.strip_prefix(GROUP_PREFIX)?.split_once('_')?;
    n.parse::<u64>().ok()?;
    pid.parse().ok()
}

/// Removes the probes of groups `ustp_<pid>_<n>` whose process is dead (left by a killed
/// recorder or daemon; their instances must be gone first: [`crate::tracefs::remove_stale`]);
/// returns their `group/event` names.
pub fn remove_stale(root: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(root.join("uprobe_events")).unwrap_or_default();
    let mut removed = Vec::new();
    for line in text.lines() {
        let Some(name) = line.split_whitespace().next().and_then(|w| w.split_once(':')).map(|(_, n)| n) else { continue };
        let Some((group, event)) = name.split_once('/') else { continue };
        let Some(pid) = group_pid(group) else { continue };
        if crate::tracefs::pid_alive(pid) {
            continue;
        }
        if command(root, &format!("-:{group}/{event}")).is_ok() {
            removed.push(format!("{group}/{event}"));
        }
    }
    removed
}

#[cfg(test)]
mod tests;
