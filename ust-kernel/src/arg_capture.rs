//! The system-call argument capture of root's tracefs view (tier 3) and of the view root's
//! daemon records for a user (tier 2): the BPF capture of [`crate::bpf`] started for the
//! traced tree, drained by the recording thread ([`crate::merge`]) each round into a
//! [`Joiner`], whose calls [`ArgCapture::take`] attaches to the `raw_syscalls:sys_enter`
//! records written as `syscall_entry_<name>` (the strings in LTTng's `filename`,
//! `pathname`, … fields, [`crate::lttng::entry_fields`]).
//!
//! ```text
//! Prepared (before the events are enabled): Capture::start(0)  ── or the reason it could not
//! Prepared::start:                          add_process(traced pid), before it execs
//! each round of the merge:  read the tracefs buffers, then drain the BPF ring ──> Joiner
//!                           write sys_enter ──> take(tid, nr, ts, args) ──> CTF fields
//!                           expire what the watermark has passed (counted: unmatched)
//! end: ring-full losses, unmatched calls ──> metadata env (args_*), KernelSummary
//! ```
//!
//! When the kernel refuses BPF (not root, `bpf(2)` filtered by seccomp, no ring buffer,
//! the verifier), or [`NO_ARGS_ENV`] is set, the trace keeps the pointers as before and says
//! so: the metadata's `env.args_capture` is `off` and `env.args_capture_note` the reason,
//! which `ust trace` prints once and `ust report` repeats at its top.

use std::path::Path;

use crate::bpf::join::{Joiner, TOLERANCE_NS};
use crate::bpf::Capture;
use crate::captured::CallArgs;

/// The environment variable that turns the capture off (any value): the trace keeps the
/// pointers, and says it was asked to.
pub const NO_ARGS_ENV: &str = "UST_KVIEW_NO_ARGS";

/// How long captured calls are kept behind the merge's watermark for a `sys_enter`
/// record that comes late (25 × [`crate::merge::COMMIT_MARGIN`]; at 200 000 calls a second,
/// some 50 000 calls of about 150 bytes).
pub const KEEP_BEHIND: std::time::Duration = std::time::Duration::from_millis(250);

/// `env.args_capture` of a trace whose system-call arguments were copied.
pub const ENV_ON: &str = "bpf";
/// `env.args_capture` of a trace with pointers only.
pub const ENV_OFF: &str = "off";

/// What the capture did, for the metadata and [`crate::KernelSummary`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ArgsSummary {
    /// The arguments were copied (BPF ran for the traced tree).
    pub on: bool,
    /// Why not, when off.
    pub note: String,
    /// Captured records the BPF ring buffer had no room for (their calls show `missing`).
    pub lost: u64,
    /// Children the capture could not follow (its process map was full).
    pub lost_children: u64,
    /// Captured calls no `sys_enter` record took (its ftrace record was lost).
    pub unmatched: u64,
    /// `sys_enter` records written with captured arguments.
    pub joined: u64,
}

impl ArgsSummary {
    /// The `env` entries of the kernel metadata: `args_capture` (`bpf` or `off`),
    /// `args_capture_note` (the reason, when off), `args_lost` (records the ring buffer had
    /// no room for), `args_lost_children`, `args_unmatched`.
    pub fn env(&self) -> Vec<(&'static str, String)> {
        let mut v = vec![("args_capture", if self.on { ENV_ON } else { ENV_OFF }.to_string())];
        if !self.on {
            v.push(("args_capture_note", self.note.clone()));
        }
        v.push(("args_lost", self.lost.to_string()));
        v.push(("args_lost_children", self.lost_children.to_string()));
        v.push(("args_unmatched", self.unmatched.to_string()));
        v
    }

    /// One line for stderr: what the trace holds of the arguments.
    pub fn describe(&self) -> String {
        if self.on {
            let mut s = "system-call arguments: paths, argv and socket addresses copied by a BPF program".to_string();
            if self.lost + self.unmatched > 0 {
                s += &format!(
                    " ({} calls' copies lost to a full BPF ring buffer, {} without their ftrace record: those calls show (missing))",
                    self.lost, self.unmatched
                );
            }
            s
        } else {
            format!("system-call arguments are pointers only (no paths or argv): {}", self.note)
        }
    }
}

/// The capture of one recording, or the reason there is none.
#[derive(Debug)]
pub struct ArgCapture {
    capture: Option<Capture>,
    joiner: Joiner,
    summary: ArgsSummary,
}

impl ArgCapture {
    /// Starts the capture with no process yet (add the traced one with
    /// [`ArgCapture::follow`]), unless [`NO_ARGS_ENV`] is set; a refusal is kept as the
    /// reason. Call it before the tracefs events are enabled (see [`Capture::start`]).
    pub fn start(tracefs_root: &Path) -> ArgCapture {
        let (capture, note) = if std::env::var_os(NO_ARGS_ENV).is_some() {
            (None, format!("{NO_ARGS_ENV} is set"))
        } else {
            match Capture::start(0, tracefs_root) {
                Ok(c) => (Some(c), String::new()),
                Err(e) => (None, format!("BPF refused: {e}")),
            }
        };
        let on = capture.is_some();
        ArgCapture { capture, joiner: Joiner::default(), summary: ArgsSummary { on, note, ..Default::default() } }
    }

    /// No capture, for a recording that has no system calls to join copies to (a
    /// session's userspace probes alone); `note` says why in the summary.
    pub fn off(note: &str) -> ArgCapture {
        ArgCapture { capture: None, joiner: Joiner::default(), summary: ArgsSummary { on: false, note: note.to_string(), ..Default::default() } }
    }

    /// True when the capture runs.
    pub fn on(&self) -> bool {
        self.capture.is_some()
    }

    /// What the capture did so far.
    pub fn summary(&self) -> &ArgsSummary {
        &self.summary
    }

    /// Follows process `pid` and its later children. A failure turns the capture off (and
    /// says why in the summary): a tree whose root is not followed would show nothing.
    pub fn follow(&mut self, pid: i32) {
        if let Some(Err(e)) = self.capture.as_ref().map(|c| c.add_process(pid)) {
            self.capture = None;
            self.summary.on = false;
            self.summary.note = format!("BPF capture could not follow pid {pid}: {e}");
        }
    }

    /// Moves every record in the BPF ring buffer into the joiner. Call it after reading the
    /// tracefs buffers: the capture runs before ftrace's probe, so every `sys_enter` record
    /// read has its copies in the ring by then.
    pub fn drain(&mut self) {
        let Some(c) = self.capture.as_mut() else { return };
        let j = &mut self.joiner;
        // A bad ring header stops this drain; the next one starts again from the kernel's
        // positions, and the calls it held show `missing`.
        let _ = c.drain(|r| j.push(r));
    }

    /// The captured call of the `sys_enter` record of thread `tid`, number `nr`, time `ts`
    /// and arguments `args` ([`Joiner::take`]).
    pub fn take(&mut self, ts: u64, tid: i32, nr: u32, args: &[u64; 6]) -> Option<CallArgs> {
        let c = self.joiner.take(tid, nr, ts, args);
        self.summary.joined += u64::from(c.is_some());
        c
    }

    /// Drops the calls whose `sys_enter` record can no longer come: captured more than
    /// [`KEEP_BEHIND`] before `watermark` (ns), up to which every record was applied (a
    /// record may still come late, [`crate::merge`]: root's view writes it, with its
    /// arguments while they are kept).
    pub fn expire(&mut self, watermark: u64) {
        if watermark != u64::MAX {
            self.joiner.expire(watermark.saturating_sub(KEEP_BEHIND.as_nanos() as u64 + TOLERANCE_NS));
        }
    }

    /// Ends the capture (detaching the programs) and returns what it did.
    pub fn finish(mut self) -> ArgsSummary {
        self.drain();
        if let Some(c) = self.capture.take() {
            if let Ok(l) = c.lost() {
                self.summary.lost = l.records;
                self.summary.lost_children = l.children;
            }
        }
        self.summary.unmatched = self.joiner.unmatched() + self.joiner.len() as u64;
        self.summary
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_env_says_on_or_off_and_why() {
        let on = ArgsSummary { on: true, lost: 3, unmatched: 1, ..Default::default() };
        let env: Vec<(&str, String)> = on.env();
        assert_eq!(env[0], ("args_capture", "bpf".to_string()));
        assert!(env.contains(&("args_lost", "3".into())) && env.contains(&("args_unmatched", "1".into())));
        assert!(on.describe().contains("3 calls' copies lost"), "{}", on.describe());
        let off = ArgsSummary { on: false, note: "BPF refused: x".into(), ..Default::default() };
        assert!(off.env().contains(&("args_capture_note", "BPF refused: x".into())));
        assert!(off.describe().starts_with("system-call arguments are pointers only"), "{}", off.describe());
    }

    #[test]
    fn the_env_variable_turns_it_off() {
        // The variable is read at start; set only in this test's process for this call.
        std::env::set_var(NO_ARGS_ENV, "1");
        let c = ArgCapture::start(Path::new("/nonexistent"));
        std::env::remove_var(NO_ARGS_ENV);
        assert!(!c.on());
        assert_eq!(c.summary().note, format!("{NO_ARGS_ENV} is set"));
        let s = c.finish();
        assert_eq!((s.on, s.lost, s.unmatched), (false, 0, 0));
    }
}
