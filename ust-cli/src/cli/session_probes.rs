//! `ust enable-event --userspace-probe=SPEC NAME` and `ust disable-event -k NAME`: a
//! session's dynamic probes (LTTng's kernel-domain `--userspace-probe`, here with no
//! `--kernel` needed). Everything that can be refused is refused here, at enable time, as
//! the user who will own the probe: the spec's syntax, the file (missing, not ELF), the
//! symbol (missing, ambiguous: with the candidates), and for an ordinary user the rules of
//! root's daemon (a regular file they own, not set-user-ID, …) and that daemon's presence.
//! The session keeps the rule ([`ust_ctl::probes`]); its daemon places the probes at
//! `ust start` (`ust_consumerd::ops::session_probes`).

use std::process::ExitCode;

use ust_ctl::probes::{ProbeLocation, UserspaceProbe};
use ust_ctl::protocol::Command;

use crate::kernel::uprobe::{self, sdt::SdtSpec, ProbeSpec, Spec};
use crate::out::outln;

use super::connect::{absolute, call, Failure};
use super::CliResult;

/// The rule `spec` makes, named `name`, checked as described in the module docs; prints
/// what the probe records on stderr.
///
/// # Errors
/// A spec that does not parse (usage); the file, symbol or ownership refused; no root's
/// daemon for an ordinary user.
pub fn rule(spec: &str, name: &str) -> Result<UserspaceProbe, Failure> {
    let parsed = ProbeSpec::parse(spec).map_err(|e| Failure::usage(format!("--userspace-probe: {e}")))?;
    uprobe::validate_name(name).map_err(Failure::usage)?;
    // The file as the session will name it: found in $PATH now, absolute, a symbolic link
    // kept (as LTTng saves it).
    let (spec_abs, path) = match &parsed {
        ProbeSpec::Elf(s) => {
            let path = absolute(s.file())?;
            (ProbeSpec::Elf(Spec { path: path.clone(), ..s.clone() }), path)
        }
        ProbeSpec::Sdt(s) => {
            let path = absolute(s.file())?;
            (ProbeSpec::Sdt(SdtSpec { path: path.clone(), ..s.clone() }), path)
        }
    };
    let euid = rustix::process::geteuid().as_raw();
    if euid != 0 && matches!(&parsed, ProbeSpec::Elf(s) if s.offset.is_some()) {
        return Err(Failure::new(format!("--userspace-probe {spec}: {}", uprobe::OFFSET_ROOT_ONLY)));
    }
    let ps = spec_abs.resolve(Some(name)).map_err(|e| Failure::new(format!("--userspace-probe {spec}: {e}")))?;
    let Some(p) = ps.first() else {
        return Err(Failure::new(format!("--userspace-probe {spec}: no location to probe")));
    };
    if euid != 0 {
        uprobe::check_user_file(&p.file, euid).map_err(|e| Failure::new(format!("--userspace-probe {spec}: {}: {e}", path.display())))?;
        crate::kernel::broker::hello().map_err(|e| {
            Failure::new(format!(
                "--userspace-probe {spec}: userspace probes need root's ust-consumerd (the kernel broker) for a user who is not root: {e}; ask root to run `ust daemon start`"
            ))
        })?;
    }
    // The arguments of the location that fetches the most (an SDT probe's idle locations
    // hold constants).
    let shown = ps.iter().max_by_key(|q| q.args.iter().filter(|a| !a.fetch.starts_with('\\')).count()).unwrap_or(p);
    let args: Vec<String> = shown.args.iter().map(|a| format!("{}={}:{}", a.name, a.fetch, a.ty)).collect();
    let offsets: Vec<String> = ps.iter().map(|q| format!("0x{:x}", q.offset)).collect();
    let what = if p.sdt { "SDT probe " } else { "" };
    eprintln!("ust: probe {} on {what}{} ({} at file offset {}): {}", p.event, p.function, path.display(), offsets.join(" "), args.join(" "));
    if let Some(n) = &p.note {
        eprintln!("ust: probe {}: {n}", p.event);
    }
    let location = match parsed {
        ProbeSpec::Elf(s) => ProbeLocation::Function { path, symbol: s.symbol_text(), ret: s.ret },
        ProbeSpec::Sdt(s) => ProbeLocation::Sdt { path, provider: s.provider, probe: s.name },
    };
    Ok(UserspaceProbe { name: name.to_string(), enabled: true, location })
}

/// `ust enable-event --userspace-probe=SPEC NAME`: `names` as given on the command line
/// (exactly one), in `session` (`None`: the current one).
pub fn enable(session: Option<String>, spec: &str, names: &[String]) -> CliResult {
    let [name] = names else {
        return Err(Failure::usage("--userspace-probe names one event: ust enable-event --userspace-probe=SPEC NAME"));
    };
    let probe = rule(spec, name)?;
    call(Command::EnableUserspaceProbe { session, probe: probe.clone() })?;
    outln!("Userspace probe event {name} created ({}: {})", probe.location.lookup_method(), probe.location.spec());
    Ok(ExitCode::SUCCESS)
}

/// `ust disable-event -k NAME…` (`all`: `-k -a`) in `session` (`None`: the current one).
pub fn disable(session: Option<String>, names: &[String], all: bool) -> CliResult {
    call(Command::DisableUserspaceProbe { session, names: names.to_vec(), all })?;
    if all {
        outln!("All userspace probe events are disabled");
    } else {
        for n in names {
            outln!("Userspace probe event {n} disabled");
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// The lines `ust list SESSION` shows for `probes` (LTTng's words: the event, its
/// lookup method, `Function`/`SDT`, the symbol and the binary).
pub fn list_lines(probes: &[UserspaceProbe]) -> Vec<String> {
    let mut out = Vec::new();
    if probes.is_empty() {
        return out;
    }
    out.push("Kernel domain: userspace probes (placed at start, recorded in OUTPUT/kernel/):".into());
    for p in probes {
        let state = if p.enabled { "enabled" } else { "disabled" };
        out.push(format!("  {} (type: userspace-probe) [{state}]", p.name));
        match &p.location {
            ProbeLocation::Function { path, symbol, ret } => {
                let kind = if *ret { "Function return" } else { "Function" };
                out.push(format!("    {kind}: {symbol}  Binary path: {}  Lookup method: ELF", path.display()));
            }
            ProbeLocation::Sdt { path, provider, probe } => {
                out.push(format!("    SDT: {provider}:{probe}  Binary path: {}  Lookup method: SDT", path.display()));
            }
        }
    }
    out
}
