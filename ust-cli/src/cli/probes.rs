//! `--userspace-probe SPEC` of `ust trace`: each spec (`elf:` or `sdt:`) parsed and
//! resolved in the file it names before anything runs (a missing or ambiguous symbol or
//! SDT probe fails the command, listing candidates; what DWARF or the SDT operands could
//! not give is said on stderr), and `ust list --userspace-probes PATH [GLOB]`, the
//! functions a probe can go on (as `perf probe -F` lists them, demangled) and the SDT
//! probes (as `bpftrace -l 'usdt:PATH:*'`). The probes themselves are
//! `ust_kernel::uprobe`'s.

use std::io::Read;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use crate::kernel::uprobe::{elf, sdt, Probe, ProbeSpec};

use super::connect::Failure;
use super::print::print_json;
use crate::out::outln;

/// Resolves every spec (`elf:PATH:SYMBOL[%return]`, `sdt:PATH:PROVIDER:PROBE`) to the
/// probes to place (one per SDT location), printing each probe and what of its arguments
/// is recorded.
///
/// # Errors
/// A spec that does not parse (usage, exit 2), or whose symbol or SDT probe is missing or
/// ambiguous.
pub fn resolve_all(specs: &[String]) -> Result<Vec<Probe>, Failure> {
    let mut out: Vec<Probe> = Vec::new();
    for text in specs {
        let spec = ProbeSpec::parse(text).map_err(Failure::usage)?;
        if matches!(&spec, ProbeSpec::Elf(s) if s.offset.is_some()) && !rustix::process::geteuid().is_root() {
            return Err(Failure::new(format!("--userspace-probe {text}: {}", crate::kernel::uprobe::OFFSET_ROOT_ONLY)));
        }
        let ps = spec.resolve(None).map_err(|e| Failure::new(format!("--userspace-probe {text}: {e}")))?;
        let Some(p) = ps.first() else { continue };
        if out.iter().any(|q| q.event == p.event) {
            return Err(Failure::usage(format!("--userspace-probe {text}: a second probe named {} (each function once per kind)", p.event)));
        }
        // The arguments of the location that fetches the most (an SDT probe's idle
        // locations hold constants).
        let shown = ps.iter().max_by_key(|q| q.args.iter().filter(|a| !a.fetch.starts_with('\\')).count()).unwrap_or(p);
        let args: Vec<String> = shown.args.iter().map(|a| format!("{}={}:{}", a.name, a.fetch, a.ty)).collect();
        let offsets: Vec<String> = ps.iter().map(|q| format!("0x{:x}", q.offset)).collect();
        let what = if p.sdt { "SDT probe " } else { "" };
        let at = if ps.len() > 1 { format!("file offsets {}", offsets.join(" ")) } else { format!("file offset {}", offsets.join(" ")) };
        eprintln!("ust: probe {} on {what}{} ({} at {at}): {}", p.event, p.function, spec.path().display(), args.join(" "));
        if let Some(target) = link_target(&p.path) {
            // The probe goes on the file opened through the link: say which, since who may
            // probe it (root's daemon checks its owner) is that file's business.
            eprintln!("ust: probe {}: {} is a symbolic link to {}: that file is the one probed", p.event, p.path.display(), target.display());
        }
        if let Some(n) = &p.note {
            eprintln!("ust: probe {}: {n}", p.event);
        }
        out.extend(ps);
    }
    Ok(out)
}

/// The file a path that is (or goes through) a symbolic link resolves to.
fn link_target(path: &Path) -> Option<PathBuf> {
    let target = std::fs::canonicalize(path).ok()?;
    let absolute = if path.is_absolute() { path.to_path_buf() } else { std::env::current_dir().ok()?.join(path) };
    (target != absolute).then_some(target)
}

/// A probed file as it was when its probe was placed (identity, size, modification time),
/// to say afterwards whether it was replaced or changed while probed: the probe stays on
/// the inode it was placed on, at its file offset.
#[derive(Debug)]
pub struct Watch {
    events: Vec<String>,
    path: PathBuf,
    file: std::fs::File,
    dev: u64,
    ino: u64,
    size: u64,
    mtime: (i64, i64),
}

/// The files of `probes` (one [`Watch`] per file), before they are placed.
pub fn watch(probes: &[Probe]) -> Vec<Watch> {
    let mut out: Vec<Watch> = Vec::new();
    for p in probes {
        let Ok(m) = p.file.metadata() else { continue };
        if let Some(w) = out.iter_mut().find(|w| w.dev == m.dev() && w.ino == m.ino()) {
            w.events.push(p.event.clone());
            continue;
        }
        let Ok(file) = p.file.try_clone() else { continue };
        out.push(Watch {
            events: vec![p.event.clone()],
            path: p.path.clone(),
            file,
            dev: m.dev(),
            ino: m.ino(),
            size: m.size(),
            mtime: (m.mtime(), m.mtime_nsec()),
        });
    }
    out
}

/// What happened to the watched files since [`watch`], as messages: a path that now names
/// another file (replaced, as a build or package upgrade does: the new file was never
/// probed) or none, and a file changed in place (its contents at the probe's offset may
/// no longer be the function's first instruction).
pub fn changed(watches: &[Watch]) -> Vec<String> {
    let mut out = Vec::new();
    for w in watches {
        let events = w.events.join(", ");
        match std::fs::metadata(&w.path) {
            Ok(m) if m.dev() == w.dev && m.ino() == w.ino => {}
            Ok(_) => out.push(format!(
                "probe {events}: {} was replaced by another file while probed: the probe stayed on the file it was placed on, \
                 so processes that ran the new file are not in the trace (run ust trace again to probe it)",
                w.path.display()
            )),
            Err(e) => out.push(format!(
                "probe {events}: {} is gone ({e}): the probe stayed on the file it was placed on, until the end of the recording",
                w.path.display()
            )),
        }
        if let Ok(m) = w.file.metadata() {
            if m.size() != w.size || (m.mtime(), m.mtime_nsec()) != w.mtime {
                out.push(format!(
                    "probe {events}: {} was modified in place while probed: the probe stayed at its file offset, which in the new \
                     contents may not start the function, and the kernel steps over the instruction it saved from the old contents; \
                     processes that ran the changed file may have gone wrong at the probe: replace a probed file (write a new one and \
                     rename it), never rewrite it",
                    w.path.display()
                ));
            }
        }
    }
    out
}

/// `ust list --userspace-probes PATH [GLOB]`: one line per function, `OFFSET SIZE NAME`
/// (hexadecimal file offset, size in bytes), then one per SDT probe, `OFFSET sdt
/// sdt:PROVIDER:PROBE` (its first location; GLOB matches `PROVIDER:PROBE` or the whole
/// name); or JSON objects `{name, symbol, offset, size}` and `{name, kind: "sdt", provider,
/// probe, offsets, semaphores, args}`.
///
/// # Errors
/// The file cannot be read, is not ELF, or has neither symbols nor SDT notes.
pub fn list(path: &Path, glob: Option<&str>, json: bool) -> Result<ExitCode, Failure> {
    let at = |e: String| Failure::new(format!("{}: {e}", path.display()));
    let f = std::fs::File::open(path).map_err(|e| at(e.to_string()))?;
    let mut data = Vec::new();
    f.take(elf::MAX_FILE).read_to_end(&mut data).map_err(|e| at(e.to_string()))?;
    let notes = sdt::notes(data.as_slice()).unwrap_or_default();
    let funcs = match elf::functions(data.as_slice()) {
        Ok(f) => f,
        // A stripped file may still have SDT notes.
        Err(_) if !notes.is_empty() => Vec::new(),
        Err(e) => return Err(at(e)),
    };
    let matches = |names: &[&str]| glob.is_none_or(|g| names.iter().any(|n| elf::glob_match(g, n)));
    let shown: Vec<&elf::Function> = funcs.iter().filter(|f| matches(&[&f.name, &f.raw])).collect();
    // SDT probes in the order of their first note, each with all its locations.
    let mut probes: Vec<(String, Vec<&sdt::Note>)> = Vec::new();
    for n in &notes {
        let key = format!("{}:{}", n.provider, n.name);
        if !matches(&[&key, &format!("sdt:{key}")]) {
            continue;
        }
        match probes.iter_mut().find(|(k, _)| *k == key) {
            Some((_, v)) => v.push(n),
            None => probes.push((key, vec![n])),
        }
    }
    if json {
        let mut v: Vec<serde_json::Value> =
            shown.iter().map(|f| serde_json::json!({"name": f.name, "symbol": f.raw, "offset": f.offset, "size": f.size})).collect();
        v.extend(probes.iter().map(|(key, ns)| {
            serde_json::json!({
                "name": format!("sdt:{key}"),
                "kind": "sdt",
                "provider": ns[0].provider,
                "probe": ns[0].name,
                "offsets": ns.iter().map(|n| n.offset).collect::<Vec<_>>(),
                "semaphores": ns.iter().map(|n| n.semaphore).collect::<Vec<_>>(),
                "args": ns.iter().map(|n| n.args.as_str()).collect::<Vec<_>>(),
            })
        }));
        print_json(&v);
    } else {
        for f in &shown {
            outln!("0x{:08x} {:>7} {}", f.offset, f.size, f.name);
        }
        for (key, ns) in &probes {
            outln!("0x{:08x} {:>7} sdt:{key}", ns[0].offset, "sdt");
        }
    }
    Ok(ExitCode::SUCCESS)
}
