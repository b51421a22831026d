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

use crate::kernel::uprobe::{self, Spec};
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
    let parsed = Spec::parse(spec).map_err(|e| Failure::usage(format!("--userspace-probe: {e}")))?;
    uprobe::validate_name(name).map_err(Failure::usage)?;
    // The file as the session will name it: found in $PATH now, absolute, a symbolic link
    // kept (as LTTng saves it).
    let path = absolute(parsed.file())?;
    let spec_abs = Spec { path: path.clone(), ..parsed.clone() };
    let p = uprobe::resolve(&spec_abs, Some(name)).map_err(|e| Failure::new(format!("--userspace-probe {spec}: {e}")))?;
    let euid = rustix::process::geteuid().as_raw();
    if euid != 0 {
        uprobe::check_user_file(&p.file, euid).map_err(|e| Failure::new(format!("--userspace-probe {spec}: {}: {e}", path.display())))?;
        crate::kernel::broker::hello().map_err(|e| {
            Failure::new(format!(
                "--userspace-probe {spec}: userspace probes need root's ust-consumerd (the kernel broker) for a user who is not root: {e}; ask root to run `ust daemon start`"
            ))
        })?;
    }
    let args: Vec<String> = p.args.iter().map(|a| format!("{}={}:{}", a.name, a.fetch, a.ty)).collect();
    eprintln!("ust: probe {} on {} ({} at file offset 0x{:x}): {}", p.event, p.function, path.display(), p.offset, args.join(" "));
    if let Some(n) = &p.note {
        eprintln!("ust: probe {}: {n}", p.event);
    }
    Ok(UserspaceProbe { name: name.to_string(), enabled: true, location: ProbeLocation::Function { path, symbol: parsed.symbol, ret: parsed.ret } })
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
