//! Starting the traced command gated: forked, then held before anything it runs until the
//! tracer has seized it, so that its system calls are seen from its `execve` on.
//!
//! ```text
//! tracer thread                          child (fork; async-signal-safe code only)
//!   resolve PATH, build argv/envp          reset the signal mask, SIGPIPE to default
//!   fork ─────────────────────────────>    dup2 stdio, chdir
//!   PTRACE_SEIZE, PTRACE_INTERRUPT         read(gate) ... blocks
//!   wait for the interrupt stop
//!   write(gate, "g") ─────────────────>    execve(path, argv, envp)   <- first recorded call
//!   PTRACE_SYSCALL
//!                                          (ENOEXEC: execve("/bin/sh", [sh, path, args]))
//!                                          failed: write(err, errno); _exit(127 or 126)
//! ```
//!
//! The program is looked up in `PATH` by the tracer before the fork (as strace does), so the
//! command makes one `execve` where `execvp` would try each `PATH` entry. The pipes are
//! close-on-exec, so the command inherits no descriptor of ours; if the tracer goes away
//! before the release, the child reads end-of-file and exits 125 without running anything.

use std::ffi::{CString, OsStr, OsString};
use std::io;
use std::os::fd::{AsFd, AsRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};

/// What to run: program, arguments, environment, working directory, standard descriptors.
#[derive(Debug)]
pub struct Launch {
    program: OsString,
    args: Vec<OsString>,
    env: Vec<(OsString, OsString)>,
    cwd: Option<PathBuf>,
    stdio: [Option<OwnedFd>; 3],
}

/// The `PATH` searched when the environment has none (glibc's `_CS_PATH`).
pub const DEFAULT_PATH: &str = "/bin:/usr/bin";

impl Launch {
    /// `program` with `args` (not counting `argv[0]`, which is `program`), in this
    /// process's environment and directory, with its standard descriptors.
    pub fn new(program: impl Into<OsString>, args: impl IntoIterator<Item = impl Into<OsString>>) -> Launch {
        Launch {
            program: program.into(),
            args: args.into_iter().map(Into::into).collect(),
            env: std::env::vars_os().collect(),
            cwd: None,
            stdio: [None, None, None],
        }
    }

    /// What `cmd` would run: its program, arguments, environment changes applied to this
    /// process's environment, and directory. Its uid, gid, process group, `pre_exec` hooks
    /// and `Stdio` settings are not readable from a `Command` and are not applied.
    pub fn from_command(cmd: &std::process::Command) -> Launch {
        let mut l = Launch::new(cmd.get_program(), cmd.get_args());
        for (k, v) in cmd.get_envs() {
            match v {
                Some(v) => l.set_env(k, v),
                None => l.remove_env(k),
            }
        }
        l.cwd = cmd.get_current_dir().map(Path::to_path_buf);
        l
    }

    /// Sets (or replaces) one environment variable.
    pub fn set_env(&mut self, key: impl AsRef<OsStr>, value: impl AsRef<OsStr>) {
        let key = key.as_ref();
        self.env.retain(|(k, _)| k != key);
        self.env.push((key.to_owned(), value.as_ref().to_owned()));
    }

    /// Removes one environment variable.
    pub fn remove_env(&mut self, key: impl AsRef<OsStr>) {
        let key = key.as_ref();
        self.env.retain(|(k, _)| k != key);
    }

    /// Starts from an empty environment (as `env -i`).
    pub fn clear_env(&mut self) {
        self.env.clear();
    }

    /// Runs in `dir`.
    pub fn current_dir(&mut self, dir: impl Into<PathBuf>) {
        self.cwd = Some(dir.into());
    }

    /// Gives the command `fd` as its descriptor `target` (0, 1 or 2) instead of ours.
    pub fn stdio(&mut self, target: usize, fd: OwnedFd) {
        if let Some(slot) = self.stdio.get_mut(target) {
            *slot = Some(fd);
        }
    }

    /// The program's path: `program` itself when it has a `/`, else the first regular
    /// file with an execute bit in the command's `PATH` (strace's `startup_child` rule).
    ///
    /// # Errors
    /// `NotFound` when no `PATH` entry has it.
    pub fn resolve(&self) -> io::Result<PathBuf> {
        use std::os::unix::fs::PermissionsExt;
        let p = Path::new(&self.program);
        if self.program.as_bytes().contains(&b'/') {
            return Ok(p.to_path_buf());
        }
        let path = self.env.iter().find(|(k, _)| k == "PATH").map(|(_, v)| v.clone()).unwrap_or_else(|| DEFAULT_PATH.into());
        for dir in std::env::split_paths(&path) {
            let dir = if dir.as_os_str().is_empty() { PathBuf::from(".") } else { dir };
            let cand = dir.join(p);
            if std::fs::metadata(&cand).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0) {
                return Ok(cand);
            }
        }
        Err(io::Error::new(io::ErrorKind::NotFound, format!("{}: not found in PATH", self.program.to_string_lossy())))
    }
}

fn cstring(s: &OsStr) -> io::Result<CString> {
    CString::new(s.as_bytes()).map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, format!("{} contains a NUL byte", s.to_string_lossy())))
}

/// A NULL-terminated array of pointers into `strings` (which must outlive it).
fn pointers(strings: &[CString]) -> Vec<*const libc::c_char> {
    strings.iter().map(|s| s.as_ptr()).chain(std::iter::once(std::ptr::null())).collect()
}

/// A pipe whose two ends are close-on-exec and numbered 3 or more (so that the child's
/// `dup2` onto 0..2 never lands on them).
fn pipe_above_stdio() -> io::Result<(OwnedFd, OwnedFd)> {
    let (r, w) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC)?;
    let lift = |fd: OwnedFd| -> io::Result<OwnedFd> {
        if fd.as_raw_fd() > 2 {
            return Ok(fd);
        }
        Ok(rustix::io::fcntl_dupfd_cloexec(fd.as_fd(), 3)?)
    };
    Ok((lift(r)?, lift(w)?))
}

/// Everything the child needs, built before the fork (the child may not allocate).
struct Prepared {
    path: CString,
    _strings: Vec<CString>,
    argv: Vec<*const libc::c_char>,
    envp: Vec<*const libc::c_char>,
    sh_argv: Vec<*const libc::c_char>,
    cwd: Option<CString>,
    stdio: [RawFd; 3],
}

const SH: &std::ffi::CStr = c"/bin/sh";

/// A forked child waiting at its gate.
#[derive(Debug)]
pub struct Gated {
    /// The child's pid.
    pub pid: i32,
    gate: Option<OwnedFd>,
    err: OwnedFd,
}

impl Gated {
    /// Forks the child of `launch` (which waits at its gate). Call it from the thread that
    /// will trace the child: the child's parent is this thread.
    ///
    /// # Errors
    /// `NotFound` when the program is not in `PATH` ([`Launch::resolve`]), `InvalidInput`
    /// for a NUL byte in an argument, the pipe or fork error.
    pub fn fork(launch: Launch) -> io::Result<Gated> {
        let path = cstring(launch.resolve()?.as_os_str())?;
        let mut strings = vec![cstring(&launch.program)?];
        for a in &launch.args {
            strings.push(cstring(a)?);
        }
        let argc = strings.len();
        for (k, v) in &launch.env {
            let mut kv = k.clone().into_vec();
            kv.push(b'=');
            kv.extend_from_slice(v.as_bytes());
            strings.push(cstring(OsStr::from_bytes(&kv))?);
        }
        let argv = pointers(&strings[..argc]);
        let envp = pointers(&strings[argc..]);
        // ENOEXEC (a script without `#!`): `/bin/sh path args...`, as execvp does.
        let mut sh_argv = vec![SH.as_ptr(), path.as_ptr()];
        sh_argv.extend(argv.iter().skip(1));
        let cwd = launch.cwd.as_deref().map(|d| cstring(d.as_os_str())).transpose()?;
        let stdio_fds = launch.stdio;
        let stdio = [0, 1, 2].map(|i| stdio_fds[i].as_ref().map_or(-1, AsRawFd::as_raw_fd));
        let prepared = Prepared { path, _strings: strings, argv, envp, sh_argv, cwd, stdio };
        let (gate_r, gate_w) = pipe_above_stdio()?;
        let (err_r, err_w) = pipe_above_stdio()?;
        // SAFETY: fork in a multithreaded process: the child runs only `child`, which makes
        // async-signal-safe calls on memory prepared before the fork, and never returns.
        let pid = unsafe { libc::fork() };
        if pid < 0 {
            return Err(io::Error::last_os_error());
        }
        if pid == 0 {
            // SAFETY: in the child: see `child`'s contract.
            unsafe { child(&prepared, [gate_r.as_raw_fd(), gate_w.as_raw_fd(), err_r.as_raw_fd(), err_w.as_raw_fd()]) }
        }
        // The command has its copies now: a reader of its output sees end-of-file when the
        // command closes them, not when the recording ends.
        drop((gate_r, err_w, stdio_fds));
        Ok(Gated { pid, gate: Some(gate_w), err: err_r })
    }

    /// Opens the gate: the child goes on to its `execve`.
    pub fn release(&mut self) {
        if let Some(g) = self.gate.take() {
            let _ = rustix::io::write(&g, b"g");
        }
    }

    /// Why the child's `execve` failed, read from the error pipe: `None` once it exec'd
    /// (the pipe closed empty). Blocks until the child execs or exits: call it when the
    /// child no longer needs the tracer (it exited, or it is not traced).
    pub fn exec_error(&self) -> Option<io::Error> {
        let mut b = [0u8; 4];
        let mut got = 0;
        while got < 4 {
            match rustix::io::read(&self.err, &mut b[got..]) {
                Ok(0) => break,
                Ok(n) => got += n,
                Err(rustix::io::Errno::INTR) => continue,
                Err(_) => break,
            }
        }
        (got == 4).then(|| io::Error::from_raw_os_error(i32::from_ne_bytes(b)))
    }
}

/// The child after the fork: reset what the tracer thread set, wait at the gate, exec; on
/// failure report the errno and exit 127 (not found) or 126.
/// `fds`: gate read end, gate write end, error read end, error write end.
///
/// # Safety
/// Call only in a freshly forked child, with `p` built before the fork; it makes only
/// async-signal-safe calls and never returns.
unsafe fn child(p: &Prepared, fds: [RawFd; 4]) -> ! {
    let [gate_r, gate_w, err_r, err_w] = fds;
    let fail = |err_w: RawFd, e: i32| -> ! {
        let b = e.to_ne_bytes();
        // SAFETY: write and _exit are async-signal-safe; `b` is a local array.
        unsafe {
            libc::write(err_w, b.as_ptr().cast(), 4);
            libc::_exit(if e == libc::ENOENT { 127 } else { 126 })
        }
    };
    // SAFETY: each call below is async-signal-safe and touches only memory prepared before
    // the fork (read-only) or locals.
    unsafe {
        libc::close(gate_w);
        libc::close(err_r);
        let mut empty: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut empty);
        libc::pthread_sigmask(libc::SIG_SETMASK, &empty, std::ptr::null_mut());
        // The Rust runtime ignores SIGPIPE; the command gets the default, as std's Command
        // gives it.
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
        for (target, &fd) in p.stdio.iter().enumerate() {
            if fd < 0 {
                continue;
            }
            let ok = if fd == target as RawFd { libc::fcntl(fd, libc::F_SETFD, 0) >= 0 } else { libc::dup2(fd, target as RawFd) >= 0 };
            if !ok {
                fail(err_w, *libc::__errno_location());
            }
        }
        if let Some(d) = &p.cwd {
            if libc::chdir(d.as_ptr()) < 0 {
                fail(err_w, *libc::__errno_location());
            }
        }
        let mut b = 0u8;
        let released = loop {
            let n = libc::read(gate_r, (&mut b as *mut u8).cast(), 1);
            if n < 0 && *libc::__errno_location() == libc::EINTR {
                continue;
            }
            break n == 1 && b == b'g';
        };
        libc::close(gate_r);
        if !released {
            libc::_exit(125);
        }
        libc::execve(p.path.as_ptr(), p.argv.as_ptr(), p.envp.as_ptr());
        let mut e = *libc::__errno_location();
        if e == libc::ENOEXEC {
            libc::execve(SH.as_ptr(), p.sh_argv.as_ptr(), p.envp.as_ptr());
            e = *libc::__errno_location();
        }
        fail(err_w, e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_program_is_found_in_the_commands_path() {
        let mut l = Launch::new("sh", ["-c", "true"]);
        l.clear_env();
        assert_eq!(l.resolve().unwrap(), PathBuf::from("/bin/sh"), "DEFAULT_PATH");
        l.set_env("PATH", "/nonexistent:/usr/bin");
        assert_eq!(l.resolve().unwrap(), PathBuf::from("/usr/bin/sh"));
        let l = Launch::new("no-such-program-here", Vec::<String>::new());
        assert_eq!(l.resolve().unwrap_err().kind(), io::ErrorKind::NotFound);
        assert_eq!(Launch::new("./x", Vec::<String>::new()).resolve().unwrap(), PathBuf::from("./x"));
    }

    #[test]
    fn a_command_is_read_back() {
        let mut c = std::process::Command::new("prog");
        c.arg("a").env("UST_X", "1").env_remove("HOME").current_dir("/tmp");
        let l = Launch::from_command(&c);
        assert_eq!(l.args, [OsString::from("a")]);
        assert!(l.env.contains(&("UST_X".into(), "1".into())) && !l.env.iter().any(|(k, _)| k == "HOME"));
        assert_eq!(l.cwd.as_deref(), Some(Path::new("/tmp")));
    }
}
