//! `ust save` / `ust load` against the real LTTng (Debian's lttng-tools 2.13, installed
//! by scripts/test.sh): a user-space session made and saved with `lttng` loads with
//! `ust load` and records (read back by babeltrace2); `ust save` output validates against
//! LTTng's `session.xsd` with `xmllint --schema` and loads with `lttng load`, which then
//! lists (and saves again) the same channels, events, filters, exclusions and contexts.
//!
//! lttng-sessiond runs in a private `LTTNG_HOME` as an unprivileged user when the tests
//! run as root (root's session daemon would use the machine-wide /var/run/lttng), and is
//! stopped (SIGTERM, by pid) at the end.

use system_tests as common;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::*;
use ust_ctl::session_xml::{from_xml, BufferType};

const LTTNG_USER: &str = "ustlttng";
const XSD: &str = "/usr/share/xml/lttng/session.xsd";

fn id_of(user: &str, flag: &str) -> u32 {
    let o = Command::new("id").args([flag, user]).output().unwrap();
    String::from_utf8(o.stdout).unwrap().trim().parse().unwrap_or_else(|_| panic!("no user {user}"))
}

/// A private lttng-sessiond.
struct Lttng {
    home: tempfile::TempDir,
    ids: Option<(u32, u32)>,
    daemon: Option<Child>,
}

impl Lttng {
    fn start() -> Lttng {
        let ids = rustix::process::geteuid().is_root().then(|| {
            if !Command::new("id").arg(LTTNG_USER).output().unwrap().status.success() {
                let o = Command::new("useradd").args(["--no-create-home", "--shell", "/usr/sbin/nologin", LTTNG_USER]).output().unwrap();
                assert!(o.status.success(), "useradd: {}", String::from_utf8_lossy(&o.stderr));
            }
            (id_of(LTTNG_USER, "-u"), id_of(LTTNG_USER, "-g"))
        });
        let home = tempfile::tempdir().unwrap();
        if let Some((u, g)) = ids {
            std::os::unix::fs::chown(home.path(), Some(u), Some(g)).unwrap();
        }
        std::fs::set_permissions(home.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let mut l = Lttng { home, ids, daemon: None };
        let log = std::fs::File::create(l.home.path().join("sessiond.log")).unwrap();
        let child = l.cmd("lttng-sessiond").arg("--no-kernel").stdout(Stdio::null()).stderr(log).spawn().expect("lttng-sessiond (apt-get install lttng-tools)");
        l.daemon = Some(child);
        let deadline = Instant::now() + Duration::from_secs(20);
        while !l.cmd("lttng").arg("list").output().unwrap().status.success() {
            assert!(
                Instant::now() < deadline,
                "lttng-sessiond did not come up: {}",
                std::fs::read_to_string(l.home.path().join("sessiond.log")).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        l
    }

    fn cmd(&self, prog: &str) -> Command {
        let mut c = match self.ids {
            Some((u, g)) => {
                let mut c = Command::new("setpriv");
                c.args(["--reuid", &u.to_string(), "--regid", &g.to_string(), "--clear-groups", "--", prog]);
                c
            }
            None => Command::new(prog),
        };
        c.env("LTTNG_HOME", self.home.path()).env("HOME", self.home.path()).env_remove("LTTNG_SESSION_CONFIG_XSD_PATH").stdin(Stdio::null());
        c
    }

    fn lttng(&self, args: &[&str]) -> String {
        let o = self.cmd("lttng").args(args).output().unwrap();
        assert!(o.status.success(), "lttng {args:?}: {}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
        String::from_utf8(o.stdout).unwrap()
    }

    fn dir(&self, name: &str) -> PathBuf {
        let d = self.home.path().join(name);
        std::fs::create_dir_all(&d).unwrap();
        if let Some((u, g)) = self.ids {
            std::os::unix::fs::chown(&d, Some(u), Some(g)).unwrap();
        }
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o777)).unwrap();
        d
    }
}

impl Drop for Lttng {
    fn drop(&mut self) {
        if let Some(mut c) = self.daemon.take() {
            // SAFETY: kill(2) on the daemon this helper started, by its pid.
            unsafe { libc::kill(c.id() as i32, libc::SIGTERM) };
            let deadline = Instant::now() + Duration::from_secs(10);
            while c.try_wait().ok().flatten().is_none() {
                if Instant::now() > deadline {
                    let _ = c.kill();
                    let _ = c.wait();
                    break;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        }
    }
}

fn xmllint(file: &Path) {
    let o = Command::new("xmllint").args(["--noout", "--schema", XSD]).arg(file).output().expect("xmllint (apt-get install libxml2-utils)");
    assert!(o.status.success(), "{} does not validate against {XSD}:\n{}", file.display(), String::from_utf8_lossy(&o.stderr));
}

#[test]
fn a_session_saved_by_lttng_loads_and_records_in_ust() {
    let l = Lttng::start();
    let d = TestDaemon::start();
    let out = d.output("from-lttng");
    l.lttng(&["create", "s1", "--output", out.to_str().unwrap()]);
    l.lttng(&["enable-channel", "-u", "ch", "--subbuf-size", "64k", "--num-subbuf", "8"]);
    l.lttng(&["enable-event", "-u", "myapp:*", "-c", "ch", "--exclude", "myapp:error", "--filter", "i >= 250"]);
    l.lttng(&["enable-event", "-u", "myapp:error", "-c", "ch", "--loglevel", "TRACE_ERR"]);
    l.lttng(&["enable-event", "-u", "other:ev", "-c", "ch"]);
    l.lttng(&["disable-event", "-u", "other:ev", "-c", "ch"]);
    l.lttng(&["add-context", "-u", "-c", "ch", "-t", "vpid", "-t", "procname"]);
    let saved = l.dir("saved");
    l.lttng(&["save", "s1", "-o", saved.to_str().unwrap()]);
    let file = saved.join("s1.lttng");
    xmllint(&file);

    let o = d.ust(&["load", "-i", file.to_str().unwrap()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(String::from_utf8_lossy(&o.stdout).contains("Session s1 has been loaded successfully"));
    // lttng's default, PER_UID, is ust's --buffers-uid; saved again, it says PER_UID.
    let resaved = l.dir("resaved");
    d.ust_ok(&["save", "s1", "-o", resaved.to_str().unwrap()]);
    assert_eq!(from_xml(&std::fs::read_to_string(resaved.join("s1.lttng")).unwrap()).unwrap().remove(0).buffers, BufferType::PerUid);
    let detail = d.ust_json(&["list", "s1", "--json"]);
    let ch = &detail["channels"][0];
    assert_eq!((ch["name"].as_str(), ch["config"]["subbuf_size"].as_u64(), ch["config"]["num_subbuf"].as_u64()), (Some("ch"), Some(65536), Some(8)));
    assert_eq!(ch["contexts"], serde_json::json!(["vpid", "procname"]));
    let en = ch["enablers"].as_array().unwrap();
    assert_eq!(en.len(), 3, "{en:?}");
    let by = |p: &str| en.iter().find(|e| e["pattern"] == p).unwrap_or_else(|| panic!("{p} in {en:?}"));
    assert_eq!(by("myapp:*")["filter"], "i >= 250");
    assert_eq!(by("myapp:*")["exclusions"], serde_json::json!(["myapp:error"]));
    assert_eq!(by("myapp:error")["level"], serde_json::json!({"UpTo": "Err"}));
    assert_eq!(by("other:ev")["enabled"], false);
    // Loading it again is refused, and replaced with -f.
    let again = d.ust(&["load", "s1", "-i", file.to_str().unwrap()]);
    assert!(!again.status.success() && String::from_utf8_lossy(&again.stderr).contains("exists already"));
    d.ust_ok(&["load", "s1", "-f", "-i", file.to_str().unwrap()]);

    d.ust_ok(&["start", "-s", "s1"]);
    let mut child = Command::new(program_here("flightrec")).arg("500").env("UST_RUNDIR", &d.rundir).stdin(Stdio::null()).spawn().unwrap();
    let pid = child.id();
    assert!(child.wait().unwrap().success());
    d.ust_ok(&["stop", "-s", "s1"]);
    d.ust_ok(&["destroy", "-s", "s1"]);
    // SAFETY: getuid(2) has no preconditions.
    let uid = unsafe { libc::getuid() };
    assert!(out.join(format!("ust/uid/{uid}/64-bit/metadata")).is_file(), "a per-user trace under {}", out.display());
    let text = babeltrace(&out);
    let evs = bt_events(&text);
    let infos: Vec<u64> = evs.iter().filter(|e| e.name == "myapp:info").map(|e| fields_map(&e.fields)["i"].parse().unwrap()).collect();
    assert_eq!(infos, (250..500).collect::<Vec<_>>(), "the filter and the exclusion applied");
    assert_eq!(evs.iter().filter(|e| e.name == "myapp:error").count(), 1);
    assert_eq!(evs.len(), 251, "{text}");
    for line in text.lines().filter(|l| l.contains(" myapp:")) {
        assert!(line.contains(&format!("vpid = {pid}")) && line.contains("procname = \"flightrec\""), "{line}");
    }
}

#[test]
fn a_session_saved_by_ust_loads_in_lttng() {
    let l = Lttng::start();
    let d = TestDaemon::start();
    let out = l.dir("out2");
    d.ust_ok(&["create", "s2", "--output", out.to_str().unwrap()]);
    d.ust_ok(&["enable-channel", "ch2", "--subbuf-size", "128k", "--num-subbuf", "4", "--overwrite", "--switch-timer", "500000"]);
    d.ust_ok(&["enable-event", "-c", "ch2", "app:*", "--filter", "x > 3 && name == \"a<b>\"", "--loglevel", "WARNING"]);
    d.ust_ok(&["enable-event", "-c", "ch2", "b:c", "--loglevel-only", "info"]);
    d.ust_ok(&["enable-channel", "ch3", "--subbuf-size", "16k", "--tracefile-size", "1M", "--tracefile-count", "3"]);
    d.ust_ok(&["enable-event", "-c", "ch3", "x:*", "--exclude", "x:noisy,x:tick*"]);
    d.ust_ok(&["add-context", "-c", "ch2", "-t", "vtid", "-t", "pthread_id", "-t", "span_id"]);
    d.ust_ok(&["track", "--vpid", "12,13"]);
    d.ust_ok(&["track", "--vuid", "0,4242"]);
    let dir = l.dir("ust-saved");
    let said = d.ust_ok(&["save", "s2", "-o", dir.to_str().unwrap()]);
    assert!(said.contains("Session s2 saved successfully"), "{said}");
    let again = d.ust(&["save", "s2", "-o", dir.to_str().unwrap()]);
    assert!(!again.status.success() && String::from_utf8_lossy(&again.stderr).contains("--force"));
    d.ust_ok(&["save", "s2", "-f", "-o", dir.to_str().unwrap()]);
    let file = dir.join("s2.lttng");
    xmllint(&file);
    let mine = from_xml(&std::fs::read_to_string(&file).unwrap()).unwrap().remove(0);
    assert_eq!(mine.buffers, BufferType::PerPid);

    let loaded = l.lttng(&["load", "-i", file.to_str().unwrap()]);
    assert!(loaded.contains("loaded successfully"), "{loaded}");
    // lttng 2.13.9's sessiond may crash listing event rules that have exclusions: list
    // the channel without them, and check the rest by saving again.
    let list = l.lttng(&["list", "s2", "-c", "ch2"]);
    for want in [
        &format!("Trace output: {}", out.display()) as &str,
        "Buffering scheme: per-process",
        "Virtual process IDs:",
        "- ch2: [enabled]",
        "Event-loss mode:  overwrite",
        "Sub-buffer size:  131072 bytes",
        "Sub-buffer count: 4",
        "Switch timer:     500000 us",
        "app:* (loglevel <= TRACE_WARNING (4)) (type: tracepoint) [enabled] [filter: 'x > 3 && name == \"a<b>\"']",
        "b:c (loglevel == TRACE_INFO (6)) (type: tracepoint) [enabled]",
    ] {
        assert!(list.contains(want), "lttng list lacks {want:?}:\n{list}");
    }
    assert!(list.contains("12") && list.contains("13"), "{list}");
    let resaved = l.dir("lttng-resaved");
    l.lttng(&["save", "s2", "-o", resaved.to_str().unwrap()]);
    let theirs = from_xml(&std::fs::read_to_string(resaved.join("s2.lttng")).unwrap()).unwrap().remove(0);
    assert_eq!(theirs.output, mine.output);
    assert_eq!(theirs.vpid, mine.vpid);
    assert_eq!((theirs.vuid.clone(), theirs.vgid.clone()), (Some(vec![0, 4242]), None), "user-id tracker kept by lttng");
    assert_eq!(theirs.buffers, BufferType::PerPid);
    assert_eq!(theirs.channels.len(), 2);
    for m in &mine.channels {
        let t = theirs.channels.iter().find(|t| t.name == m.name).unwrap_or_else(|| panic!("lttng lost channel {}", m.name));
        assert_eq!((&t.name, &t.config), (&m.name, &m.config), "channel as lttng keeps it");
        let mut te = t.events.clone();
        let mut me = m.events.clone();
        te.sort_by(|a, b| a.pattern.cmp(&b.pattern));
        me.sort_by(|a, b| a.pattern.cmp(&b.pattern));
        assert_eq!(te, me, "events of {} (filters, levels, exclusions)", t.name);
        assert_eq!(t.contexts, m.contexts, "contexts of {}", t.name);
    }
    d.ust_ok(&["destroy", "-s", "s2"]);
}

/// LTTng 2.14's `--buffer-ownership=user|process` is `--buffers-uid`/`--buffers-pid`:
/// `ust list` shows the ownership it set, `ust save` writes it as `PER_UID`/`PER_PID`
/// (valid against LTTng's schema) and `ust load` gives it back; `system` is refused.
#[test]
fn buffer_ownership_round_trips_through_save_and_load() {
    let d = TestDaemon::start();
    for (model, owner, xml) in [("user", "uid", BufferType::PerUid), ("process", "pid", BufferType::PerPid)] {
        let name = format!("own-{model}");
        let out = d.output(&name);
        d.ust_ok(&["create", &name, "--output", out.to_str().unwrap()]);
        d.ust_ok(&["enable-channel", "-s", &name, "ch", &format!("--buffer-ownership={model}")]);
        assert_eq!(d.ust_json(&["list", &name, "--json"])["summary"]["buffers"], owner, "{model}");
        let dir = d.output(&format!("saved-{model}"));
        d.ust_ok(&["save", &name, "-o", dir.to_str().unwrap()]);
        let file = dir.join(format!("{name}.lttng"));
        xmllint(&file);
        assert_eq!(from_xml(&std::fs::read_to_string(&file).unwrap()).unwrap().remove(0).buffers, xml, "{model}");
        d.ust_ok(&["destroy", "-s", &name]);
        d.ust_ok(&["load", &name, "-i", file.to_str().unwrap()]);
        let detail = d.ust_json(&["list", &name, "--json"]);
        assert_eq!(detail["summary"]["buffers"], owner, "{model} after load");
        assert_eq!(detail["channels"][0]["name"], "ch");
        d.ust_ok(&["destroy", "-s", &name]);
    }
    let o = d.ust(&["enable-channel", "ch", "--buffer-ownership=system"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success() && err.contains("Linux kernel domain's"), "{err}");
}
