//! [`TraceDir`] against planted links, hard links, FIFOs and swapped directories at each
//! level, and (as root, with the `nobody` user) writing as another user and root's walk.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use super::*;
use crate::index::IndexFile;
use crate::stream::StreamFile;
use rustix::process::{Gid, Uid};
use std::os::unix::ffi::OsStrExt as _;

/// A file and a directory outside the output, with what they held, to prove untouched.
struct Victims {
    file: PathBuf,
    dir: PathBuf,
}

impl Victims {
    fn plant(tmp: &Path) -> Victims {
        let dir = tmp.join("victim-dir");
        std::fs::create_dir(&dir).unwrap();
        std::fs::write(dir.join("kept"), b"victim").unwrap();
        let file = tmp.join("victim-file");
        std::fs::write(&file, b"victim").unwrap();
        Victims { file, dir }
    }

    /// Both exactly as planted: contents, and nothing added to the directory.
    fn untouched(&self) {
        assert_eq!(std::fs::read(&self.file).unwrap(), b"victim");
        let names: Vec<_> = std::fs::read_dir(&self.dir).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(names, ["kept"], "something was created in {}", self.dir.display());
        assert_eq!(std::fs::read(self.dir.join("kept")).unwrap(), b"victim");
    }
}

fn refused(e: &io::Error, path: &Path, what: &str) {
    let m = e.to_string();
    assert!(m.starts_with(&format!("refusing {}", path.display())) && m.contains(what), "{m}");
}

#[test]
fn links_below_the_output_are_refused_at_every_level() {
    let tmp = tempfile::tempdir().unwrap();
    let v = Victims::plant(tmp.path());
    let path = tmp.path().join("out");
    let out = TraceDir::create(&path, None).unwrap();
    // A directory that is a link: `kernel`, and one level deeper.
    std::os::unix::fs::symlink(&v.dir, path.join("kernel")).unwrap();
    refused(&out.dir("kernel", 0o750).unwrap_err(), &path.join("kernel"), "a symbolic link");
    refused(&out.dir("kernel/index", 0o750).unwrap_err(), &path.join("kernel"), "a symbolic link");
    std::fs::create_dir_all(path.join("ust/pid")).unwrap();
    std::os::unix::fs::symlink(&v.dir, path.join("ust/pid/p-1-x")).unwrap();
    refused(&out.dir("ust/pid/p-1-x", 0o750).unwrap_err(), &path.join("ust/pid/p-1-x"), "a symbolic link");
    refused(&out.existing("ust/pid/p-1-x").unwrap_err(), &path.join("ust/pid/p-1-x"), "a symbolic link");
    refused(&out.new_dir("kernel", 0o750).unwrap_err(), &path.join("kernel"), "a symbolic link");
    // A file that is a link: a stream file, the metadata, an index file.
    let d = out.dir("d", 0o750).unwrap();
    std::os::unix::fs::symlink(&v.file, path.join("d/channel0_0")).unwrap();
    refused(&StreamFile::create(&d, "channel0_0", false).unwrap_err(), &path.join("d/channel0_0"), "a symbolic link");
    std::os::unix::fs::symlink(&v.file, path.join("d/metadata")).unwrap();
    refused(&crate::metadata::write_atomically(&d, "/* CTF 1.8 */").unwrap_err(), &path.join("d/metadata"), "a symbolic link");
    assert!(!path.join("d/.metadata.tmp").exists(), "the temporary file is not left behind");
    std::fs::create_dir(path.join("d/index")).unwrap();
    std::os::unix::fs::symlink(&v.file, path.join("d/index/channel0_0.idx")).unwrap();
    refused(&IndexFile::create(&d, "channel0_0").unwrap_err(), &path.join("d/index/channel0_0.idx"), "a symbolic link");
    // The whole `index` directory a link.
    let e = out.dir("e", 0o750).unwrap();
    std::os::unix::fs::symlink(&v.dir, path.join("e/index")).unwrap();
    refused(&IndexFile::create(&e, "channel0_0").unwrap_err(), &path.join("e/index"), "a symbolic link");
    // Reading through a link, or a FIFO (which must not block).
    refused(&d.open_file("channel0_0", false).unwrap_err(), &path.join("d/channel0_0"), "a symbolic link");
    rustix::fs::mkfifoat(rustix::fs::CWD, path.join("d/fifo"), Mode::from_raw_mode(0o600)).unwrap();
    assert_eq!(d.open_file("fifo", false).unwrap_err().kind(), io::ErrorKind::InvalidData);
    refused(&d.create_file("fifo", 0o600).unwrap_err(), &path.join("d/fifo"), "a FIFO");
    // No name leaves the directory.
    for bad in ["..", ".", "a/../b", "/etc", ""] {
        assert_eq!(out.create_file(bad, 0o600).unwrap_err().kind(), io::ErrorKind::InvalidInput, "{bad:?}");
    }
    assert_eq!(out.dir("a/../../x", 0o750).unwrap_err().kind(), io::ErrorKind::InvalidInput);
    v.untouched();
}

#[test]
fn a_hard_link_loses_its_name_not_its_bytes() {
    let tmp = tempfile::tempdir().unwrap();
    let v = Victims::plant(tmp.path());
    let out = TraceDir::create(&tmp.path().join("out"), None).unwrap();
    std::fs::hard_link(&v.file, tmp.path().join("out/channel0_0")).unwrap();
    let mut f = StreamFile::create(&out, "channel0_0", false).unwrap();
    f.append_packet(b"packet").unwrap();
    assert_eq!(std::fs::read(tmp.path().join("out/channel0_0")).unwrap(), b"packet");
    std::fs::hard_link(&v.file, tmp.path().join("out/metadata")).unwrap();
    crate::metadata::write_atomically(&out, "/* CTF 1.8 */").unwrap();
    assert_eq!(std::fs::read_to_string(tmp.path().join("out/metadata")).unwrap(), "/* CTF 1.8 */");
    assert_eq!(std::fs::metadata(&v.file).unwrap().nlink(), 1, "both names of the victim were taken back");
    // An exclusive creation does not take the name.
    std::fs::hard_link(&v.file, tmp.path().join("out/side")).unwrap();
    assert_eq!(out.create_new_file("side", 0o600).unwrap_err().kind(), io::ErrorKind::AlreadyExists);
    v.untouched();
}

#[test]
fn a_directory_swapped_for_a_link_after_it_was_made_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let v = Victims::plant(tmp.path());
    let path = tmp.path().join("out");
    let out = TraceDir::create(&path, None).unwrap();
    let k = out.dir("kernel", 0o750).unwrap();
    std::fs::rename(path.join("kernel"), path.join("kernel.old")).unwrap();
    std::os::unix::fs::symlink(&v.dir, path.join("kernel")).unwrap();
    refused(&StreamFile::create(&k, "channel0_1", false).unwrap_err(), &path.join("kernel"), "a symbolic link");
    refused(&crate::metadata::write_atomically(&k, "x").unwrap_err(), &path.join("kernel"), "a symbolic link");
    v.untouched();
}

#[test]
fn removal_takes_links_never_what_they_name() {
    let tmp = tempfile::tempdir().unwrap();
    let v = Victims::plant(tmp.path());
    let path = tmp.path().join("out");
    let out = TraceDir::create(&path, None).unwrap();
    let t = out.dir("ust/pid/p-1-x", 0o750).unwrap();
    StreamFile::create(&t, "channel0_0", false).unwrap();
    std::os::unix::fs::symlink(&v.dir, path.join("ust/pid/p-1-x/link")).unwrap();
    std::os::unix::fs::symlink(&v.file, path.join("ust/pid/p-1-x/file-link")).unwrap();
    t.remove_dir_all().unwrap();
    assert!(!path.join("ust/pid/p-1-x").exists());
    out.remove_empty_dir("ust/pid").unwrap();
    std::os::unix::fs::symlink(&v.dir, path.join("ust/pid")).unwrap();
    assert!(out.remove_empty_dir("ust/pid").is_err(), "a link is not a directory to remove");
    out.remove("ust/pid").unwrap();
    assert!(out.remove_dir_all().is_err(), "the output directory itself stays");
    v.untouched();
}

#[test]
fn an_output_directory_replaced_mid_trace_keeps_the_trace_and_says_where() {
    let tmp = tempfile::tempdir().unwrap();
    let v = Victims::plant(tmp.path());
    let path = tmp.path().join("out");
    let out = TraceDir::create(&path, None).unwrap();
    assert_eq!(out.replaced(), None);
    let k = out.dir("kernel", 0o750).unwrap();
    crate::metadata::write_atomically(&k, "first").unwrap();
    std::fs::rename(&path, tmp.path().join("moved")).unwrap();
    std::os::unix::fs::symlink(&v.dir, &path).unwrap();
    // Writing goes on into the directory that was there.
    crate::metadata::write_atomically(&k, "second").unwrap();
    StreamFile::create(&out.dir("ust", 0o750).unwrap(), "s", false).unwrap();
    assert_eq!(std::fs::read_to_string(tmp.path().join("moved/kernel/metadata")).unwrap(), "second");
    assert!(tmp.path().join("moved/ust/s").is_file());
    let m = out.replaced().expect("noticed");
    assert!(m.contains("was replaced by a symbolic link") && m.contains(&format!("now {}", tmp.path().join("moved").display())), "{m}");
    v.untouched();
    // Removed: said too.
    std::fs::remove_file(&path).unwrap();
    std::fs::remove_dir_all(tmp.path().join("moved")).unwrap();
    let m = out.replaced().expect("noticed");
    assert!(m.contains("was removed or renamed") && m.contains("which has since been deleted"), "{m}");
}

#[test]
fn the_output_path_itself_may_lead_through_the_writers_own_links() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::create_dir(tmp.path().join("real")).unwrap();
    std::os::unix::fs::symlink(tmp.path().join("real"), tmp.path().join("link")).unwrap();
    let out = TraceDir::create(&tmp.path().join("link/out"), None).unwrap();
    out.create_file("f", 0o600).unwrap();
    assert!(tmp.path().join("real/out/f").is_file());
    assert_eq!(out.replaced(), None, "a path through a link is not a replacement");
}

/// `nobody`'s uid and primary gid, when this runs as root and the user exists.
fn nobody_as_root() -> Option<Owner> {
    if !rustix::process::geteuid().is_root() {
        eprintln!("skipped: not root");
        return None;
    }
    let id = |flag: &str| -> Option<u32> {
        let o = std::process::Command::new("id").args([flag, "nobody"]).output().ok()?;
        String::from_utf8(o.stdout).ok()?.trim().parse().ok()
    };
    match (id("-u"), id("-g")) {
        (Some(uid), Some(gid)) => Some(Owner { uid, gid }),
        _ => {
            eprintln!("skipped: no user nobody");
            None
        }
    }
}

/// A temporary directory every user may enter (root's, 0755).
fn open_tmp() -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::set_permissions(tmp.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    tmp
}

/// A directory of `o`'s (mode 0700) at `p`.
fn users_dir(p: &Path, o: Owner) {
    std::fs::create_dir(p).unwrap();
    std::os::unix::fs::chown(p, Some(o.uid), Some(o.gid)).unwrap();
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o700)).unwrap();
}

#[test]
fn files_are_the_owners_from_their_creation_and_the_thread_stays_root() {
    let Some(nobody) = nobody_as_root() else { return };
    let groups = rustix::process::getgroups().unwrap();
    let tmp = open_tmp();
    users_dir(&tmp.path().join("home"), nobody);
    let out = TraceDir::create(&tmp.path().join("home/ust-traces/t"), Some(nobody)).unwrap();
    let k = out.dir("kernel", 0o750).unwrap();
    StreamFile::create(&k, "channel0_0", false).unwrap();
    IndexFile::create(&k, "channel0_0").unwrap();
    crate::metadata::write_atomically(&k, "m").unwrap();
    for p in [
        "home/ust-traces",
        "home/ust-traces/t",
        "home/ust-traces/t/kernel",
        "home/ust-traces/t/kernel/channel0_0",
        "home/ust-traces/t/kernel/index/channel0_0.idx",
        "home/ust-traces/t/kernel/metadata",
    ] {
        let m = std::fs::symlink_metadata(tmp.path().join(p)).unwrap();
        assert_eq!((m.uid(), m.gid()), (nobody.uid, nobody.gid), "{p}");
    }
    assert_eq!(current_identity(), Owner { uid: 0, gid: 0 }, "the thread is root again");
    assert_eq!(rustix::process::getgroups().unwrap(), groups, "and has its groups back");
    // Where the owner may not write, neither does root for them.
    let root_dir = tmp.path().join("roots");
    std::fs::create_dir(&root_dir).unwrap();
    let e = TraceDir::create(&root_dir.join("t"), Some(nobody)).unwrap_err();
    assert_eq!(e.kind(), io::ErrorKind::PermissionDenied, "{e}");
    assert!(!root_dir.join("t").exists());
    assert_eq!(current_identity(), Owner { uid: 0, gid: 0 });
}

#[test]
fn root_hands_a_path_over_where_a_user_controls_it() {
    let Some(nobody) = nobody_as_root() else { return };
    let tmp = open_tmp();
    let v = Victims::plant(tmp.path());
    std::fs::set_permissions(&v.dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    // Root's own path: root writes, as root.
    let mine = TraceDir::create(&tmp.path().join("root-out/t"), None).unwrap();
    assert_eq!(mine.owner(), None);
    // A user's directory: from there on, as them.
    let home = tmp.path().join("home");
    users_dir(&home, nobody);
    let theirs = TraceDir::create(&home.join("ust-traces/t"), None).unwrap();
    assert_eq!(theirs.owner(), Some(nobody));
    theirs.create_file("f", 0o600).unwrap();
    assert_eq!(std::fs::metadata(home.join("ust-traces/t/f")).unwrap().uid(), nobody.uid);
    // The user's link to root's directory is followed as the user: refused by the kernel.
    let link = home.join("link");
    std::os::unix::fs::symlink(&v.dir, &link).unwrap();
    std::os::unix::fs::lchown(&link, Some(nobody.uid), Some(nobody.gid)).unwrap();
    let e = TraceDir::create(&link.join("t"), None).unwrap_err();
    assert_eq!(e.kind(), io::ErrorKind::PermissionDenied, "{e}");
    // The same link in root's directory: still the user's, still followed as them.
    let planted = tmp.path().join("planted");
    std::os::unix::fs::symlink(&v.dir, &planted).unwrap();
    std::os::unix::fs::lchown(&planted, Some(nobody.uid), Some(nobody.gid)).unwrap();
    assert_eq!(TraceDir::create(&planted.join("t"), None).unwrap_err().kind(), io::ErrorKind::PermissionDenied);
    assert_eq!(TraceDir::open(&planted, None).unwrap().owner(), Some(nobody), "opened as the link's owner");
    // Root's own link, hard-linked elsewhere: not followed.
    let rl = tmp.path().join("root-link");
    std::os::unix::fs::symlink(&v.dir, &rl).unwrap();
    std::fs::hard_link(&rl, tmp.path().join("root-link-2")).unwrap();
    refused(&TraceDir::create(&tmp.path().join("root-link-2/t"), None).unwrap_err(), &tmp.path().join("root-link-2"), "other hard links");
    // A directory of root's that others may change: nothing below it.
    let shared = tmp.path().join("shared");
    std::fs::create_dir(&shared).unwrap();
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o777)).unwrap();
    refused(&TraceDir::create(&shared.join("t"), None).unwrap_err(), &shared, "others may write");
    assert!(!shared.join("t").exists());
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o1777)).unwrap();
    assert_eq!(TraceDir::create(&shared.join("t"), None).unwrap().owner(), None, "sticky, as /tmp: root's own entries stay root's");
    v.untouched();
    assert_eq!(current_identity(), Owner { uid: 0, gid: 0 });
}

#[test]
fn root_follows_no_magic_link_for_a_user_nor_replaces_their_files() {
    let Some(nobody) = nobody_as_root() else { return };
    let tmp = open_tmp();
    // A process of root's whose working directory the user may not reach.
    let private = tmp.path().join("private");
    std::fs::create_dir_all(private.join("sub")).unwrap();
    std::fs::set_permissions(&private, std::fs::Permissions::from_mode(0o700)).unwrap();
    // Anyone may write in it, once there: only the way in is closed.
    std::fs::set_permissions(private.join("sub"), std::fs::Permissions::from_mode(0o777)).unwrap();
    let mut sleeper = std::process::Command::new("sleep").arg("30").current_dir(private.join("sub")).spawn().unwrap();
    let home = tmp.path().join("home");
    users_dir(&home, nobody);
    let link = home.join("plink");
    std::os::unix::fs::symlink(format!("/proc/{}/cwd", sleeper.id()), &link).unwrap();
    std::os::unix::fs::lchown(&link, Some(nobody.uid), Some(nobody.gid)).unwrap();
    // Followed as the user, but /proc's link would be opened with root's CAP_SYS_PTRACE.
    let e = TraceDir::create(&link.join("t"), None).unwrap_err();
    let _ = sleeper.kill();
    let _ = sleeper.wait();
    assert_eq!(e.raw_os_error(), Some(libc::ELOOP), "{e}");
    assert!(!private.join("sub/t").exists());

    // A shared directory (sticky, as /tmp): another user's file is not replaced, nor
    // counted as the writer's.
    let shared = tmp.path().join("shared");
    std::fs::create_dir(&shared).unwrap();
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o1777)).unwrap();
    let theirs = shared.join("x.parquet");
    std::fs::write(&theirs, b"theirs").unwrap();
    std::os::unix::fs::chown(&theirs, Some(nobody.uid), Some(nobody.gid)).unwrap();
    std::fs::write(shared.join(".x.tmp"), b"mine").unwrap();
    let d = TraceDir::open(&shared, None).unwrap();
    assert_eq!(d.writer_uid(), 0);
    assert_eq!(d.entry("x.parquet").unwrap(), Some((FileType::RegularFile, nobody.uid)));
    refused(&d.check_replaceable("x.parquet").unwrap_err(), &theirs, &format!("user {}", nobody.uid));
    let (k, e) = d.rename_all(&[(".x.tmp".into(), "y.parquet".into()), (".x.tmp".into(), "x.parquet".into())]).unwrap_err();
    assert_eq!(k, 0, "checked before the first rename");
    refused(&e, &theirs, "user");
    assert_eq!(std::fs::read(&theirs).unwrap(), b"theirs");
    d.rename_all(&[(".x.tmp".into(), "y.parquet".into())]).unwrap();
    assert_eq!(std::fs::read(shared.join("y.parquet")).unwrap(), b"mine");
    // Nor is it replaced by a new file of its name.
    refused(&d.create_file("x.parquet", 0o644).unwrap_err(), &theirs, "another user's file");
    assert_eq!(std::fs::read(&theirs).unwrap(), b"theirs");
    assert_eq!(current_identity(), Owner { uid: 0, gid: 0 });
}

#[test]
fn taking_an_identity_without_the_right_fails_and_changes_nothing() {
    // As root, on a thread that gave up root for good (ids are per thread on Linux).
    let check = || {
        let me = current_identity();
        let other = Owner { uid: me.uid.wrapping_add(1), gid: me.gid };
        assert_eq!(as_owner(Some(other), || Ok(())).unwrap_err().kind(), io::ErrorKind::PermissionDenied);
        assert_eq!(current_identity(), me);
        assert_eq!(as_owner(Some(me), || Ok(7)).unwrap(), 7, "being one's own owner needs no right");
    };
    match nobody_as_root() {
        Some(nobody) => std::thread::spawn(move || {
            rustix::thread::set_thread_res_gid(Gid::from_raw(nobody.gid), Gid::from_raw(nobody.gid), Gid::from_raw(nobody.gid)).unwrap();
            rustix::thread::set_thread_res_uid(Uid::from_raw(nobody.uid), Uid::from_raw(nobody.uid), Uid::from_raw(nobody.uid)).unwrap();
            check();
        })
        .join()
        .unwrap(),
        None => check(),
    }
}

#[test]
fn a_file_named_on_a_command_line_is_made_as_an_output_is() {
    // Both ways: without a name until complete, and under a temporary name (file systems
    // without O_TMPFILE).
    for try_unnamed in [true, false] {
        let tmp = tempfile::tempdir().unwrap();
        let v = Victims::plant(tmp.path());
        let path = tmp.path().join("graph.svg");
        let create = |p: &Path| super::output_file::create(p, 0o644, try_unnamed);
        // tmpfs and ext4 make unnamed files; FUSE and NFS do not (then both ways are one).
        let unnamed = try_unnamed && TraceDir::open(tmp.path(), None).unwrap().create_unnamed_file("probe", 0o600).is_ok();
        let hidden = || -> Vec<String> {
            std::fs::read_dir(tmp.path()).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).filter(|n| n.ends_with(".tmp")).collect()
        };
        let write = |text: &[u8], commit: bool| {
            let mut f = create(&path).unwrap();
            f.write_all(text).unwrap();
            if commit {
                f.commit().unwrap();
            }
        };
        write(b"<svg/>", true);
        assert_eq!(std::fs::read(&path).unwrap(), b"<svg/>");
        write(b"again", true);
        assert_eq!(std::fs::read(&path).unwrap(), b"again", "an earlier file is replaced");
        // A command that fails before the end (a full disk) leaves the earlier file whole and
        // nothing of its own.
        write(b"partial", false);
        assert_eq!(std::fs::read(&path).unwrap(), b"again");
        assert!(hidden().is_empty(), "{:?}", hidden());
        // Two writers of one file at once: each writes its own, the last named wins whole.
        let mut a = create(&path).unwrap();
        a.write_all(b"first").unwrap();
        let b = create(&path);
        if unnamed {
            let mut b = b.unwrap();
            b.write_all(b"second").unwrap();
            // Being written, a file has no name: a command killed now leaves nothing behind.
            assert!(hidden().is_empty(), "{:?}", hidden());
            a.commit().unwrap();
            assert_eq!(std::fs::read(&path).unwrap(), b"first");
            b.commit().unwrap();
            assert_eq!(std::fs::read(&path).unwrap(), b"second");
        } else {
            // Written under its temporary name (one process here: the second writer's
            // name is the first's, and takes it over).
            drop(b);
            assert_eq!(hidden().len(), 0, "the second writer, dropped, took its name with it");
            drop(a);
        }
        // A leftover of an earlier process of this pid at the temporary name (a killed
        // one's, pid reuse) is replaced, either way.
        let tmp_name = tmp.path().join(format!(".graph.svg.{}.tmp", std::process::id()));
        std::fs::write(&tmp_name, b"stale").unwrap();
        write(b"third", true);
        assert_eq!(std::fs::read(&path).unwrap(), b"third");
        assert!(hidden().is_empty(), "{:?}", hidden());
        // A link at the temporary name is refused before anything is written, and its
        // target is untouched.
        std::os::unix::fs::symlink(&v.file, &tmp_name).unwrap();
        refused(&create(&path).unwrap_err(), &tmp_name, "a symbolic link");
        std::fs::remove_file(&tmp_name).unwrap();
        // The longest file name still has a temporary name.
        let long = tmp.path().join("x".repeat(255));
        let mut f = create(&long).unwrap();
        f.write_all(b"long").unwrap();
        f.commit().unwrap();
        assert_eq!(std::fs::read(&long).unwrap(), b"long");
        let link = tmp.path().join("link.svg");
        std::os::unix::fs::symlink(&v.file, &link).unwrap();
        refused(&create(&link).unwrap_err(), &link, "a symbolic link");
        assert_eq!(create(Path::new("/")).unwrap_err().kind(), io::ErrorKind::InvalidInput);
        for dir in ["dir/", "dir/.", "dir/.."] {
            assert!(create(&tmp.path().join(dir)).unwrap_err().to_string().contains("names a directory"), "{dir}");
            assert!(!tmp.path().join("dir").exists(), "no file named as the directory");
        }
        let latin1 = tmp.path().join(std::ffi::OsStr::from_bytes(b"caf\xe9.pf"));
        assert!(create(&latin1).unwrap_err().to_string().contains("not UTF-8"));
        // Root writing in another user's directory: the file is theirs from the start.
        if let Some(nobody) = nobody_as_root() {
            let theirs = tmp.path().join("theirs");
            std::fs::create_dir(&theirs).unwrap();
            std::os::unix::fs::chown(&theirs, Some(nobody.uid), Some(nobody.gid)).unwrap();
            let out = theirs.join("out.json");
            let mut f = create(&out).unwrap();
            f.write_all(b"{}").unwrap();
            f.commit().unwrap();
            let m = std::fs::metadata(&out).unwrap();
            assert_eq!((std::os::unix::fs::MetadataExt::uid(&m), std::fs::read(&out).unwrap()), (nobody.uid, b"{}".to_vec()));
            assert_eq!(current_identity(), Owner { uid: 0, gid: 0 });
        }
        v.untouched();
    }
}
