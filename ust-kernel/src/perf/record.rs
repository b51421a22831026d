//! Parsing the records of a tier-1 ring (perf_event_open(2), "MMAP layout", and
//! `include/uapi/linux/perf_event.h`, `enum perf_event_type`), for the `sample_type` of
//! [`super::attr::SAMPLE_TYPE`]. Every record but samples ends with the `sample_id`
//! trailer `{ u32 pid, tid; u64 time; u32 cpu, res; u64 id; }` (32 bytes).
//!
//! Records are untrusted bytes: every read is bounds-checked, a record too short for its
//! type is [`Record::Bad`], and nothing here panics on contents.

use perf_event_open_sys::bindings as b;

/// Where and when a record happened (the `sample_id` trailer, or a sample's own fields).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Id {
    /// Process (thread group) id.
    pub pid: i32,
    /// Thread id.
    pub tid: i32,
    /// `CLOCK_MONOTONIC` ns.
    pub time: u64,
    /// CPU.
    pub cpu: u32,
    /// The event's kernel id (`PERF_SAMPLE_IDENTIFIER`).
    pub event: u64,
}

/// A page-fault sample.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Sample {
    /// Where and when.
    pub id: Id,
    /// User IP of the fault.
    pub ip: u64,
    /// Faulting address.
    pub addr: u64,
    /// User registers `[bp, sp, ip]` (`None`: the kernel had none, e.g. a kernel thread).
    pub regs: Option<[u64; 3]>,
    /// User stack bytes from `sp` (the valid part: `dyn_size` of them).
    pub stack: Vec<u8>,
}

/// One record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Record {
    /// `PERF_RECORD_SWITCH`: the task of `id` went off or on a CPU.
    Switch {
        /// Task, time, CPU.
        id: Id,
        /// Off the CPU (`PERF_RECORD_MISC_SWITCH_OUT`).
        out: bool,
        /// Off while runnable (`PERF_RECORD_MISC_SWITCH_OUT_PREEMPT`).
        preempt: bool,
    },
    /// `PERF_RECORD_FORK`: thread `tid` of process `pid` created by thread `ptid` of
    /// `ppid`.
    Fork {
        /// Trailer (the forking context).
        id: Id,
        /// Child's process.
        pid: i32,
        /// Parent's process.
        ppid: i32,
        /// Child thread.
        tid: i32,
        /// Parent thread.
        ptid: i32,
    },
    /// `PERF_RECORD_EXIT`, with the fields of [`Record::Fork`].
    Exit {
        /// Trailer.
        id: Id,
        /// Exiting thread's process.
        pid: i32,
        /// Its parent process.
        ppid: i32,
        /// Exiting thread.
        tid: i32,
        /// Its parent thread.
        ptid: i32,
    },
    /// `PERF_RECORD_COMM`: thread `tid` is now named `comm`.
    Comm {
        /// Trailer.
        id: Id,
        /// Process.
        pid: i32,
        /// Thread.
        tid: i32,
        /// New name.
        comm: String,
        /// The rename is an exec (`PERF_RECORD_MISC_COMM_EXEC`).
        exec: bool,
    },
    /// `PERF_RECORD_MMAP2` (`MMAP` records carry the same fields less `prot`/`flags`).
    Mmap {
        /// Trailer.
        id: Id,
        /// Process.
        pid: i32,
        /// Thread that mapped.
        tid: i32,
        /// First address.
        start: u64,
        /// Length, bytes.
        len: u64,
        /// File offset of `start`.
        pgoff: u64,
        /// `PROT_*`.
        prot: u32,
        /// `MAP_*`.
        flags: u32,
        /// Path (or `[vdso]`, `//anon` and the like).
        filename: String,
    },
    /// `PERF_RECORD_SAMPLE`.
    Sample(Sample),
    /// `PERF_RECORD_LOST` / `LOST_SAMPLES`: records the kernel dropped (ring full).
    Lost {
        /// Trailer.
        id: Id,
        /// How many.
        lost: u64,
    },
    /// A record of another type (skipped).
    Other {
        /// Its `perf_event_type`.
        kind: u32,
    },
    /// Too short for its type.
    Bad,
}

struct Cur<'a> {
    b: &'a [u8],
    pos: usize,
}

impl<'a> Cur<'a> {
    fn u64(&mut self) -> Option<u64> {
        let v = self.b.get(self.pos..self.pos.checked_add(8)?)?;
        self.pos += 8;
        Some(u64::from_le_bytes(v.try_into().ok()?))
    }
    fn u32(&mut self) -> Option<u32> {
        let v = self.b.get(self.pos..self.pos.checked_add(4)?)?;
        self.pos += 4;
        Some(u32::from_le_bytes(v.try_into().ok()?))
    }
    fn bytes(&mut self, n: usize) -> Option<&'a [u8]> {
        let v = self.b.get(self.pos..self.pos.checked_add(n)?)?;
        self.pos += n;
        Some(v)
    }
}

const TRAILER: usize = 32;

fn trailer(rec: &[u8]) -> Option<Id> {
    let t = rec.get(rec.len().checked_sub(TRAILER)?..)?;
    let mut c = Cur { b: t, pos: 0 };
    Some(Id {
        pid: c.u32()? as i32,
        tid: c.u32()? as i32,
        time: c.u64()?,
        cpu: {
            let cpu = c.u32()?;
            c.u32()?;
            cpu
        },
        event: c.u64()?,
    })
}

fn cstr(b: &[u8]) -> String {
    let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
    String::from_utf8_lossy(&b[..end]).into_owned()
}

/// The process and time of a `PERF_RECORD_SAMPLE` (header included), read in place
/// without parsing the rest (its stack copy): the body starts `identifier u64, ip u64,
/// pid u32, tid u32, time u64` for [`super::attr::SAMPLE_TYPE`] (perf_event_open(2),
/// "PERF_RECORD_SAMPLE"). `None` for another kind of record or one too short.
pub fn sample_pid_time(rec: &[u8]) -> Option<(i32, u64)> {
    let mut c = Cur { b: rec, pos: 0 };
    if c.u32()? != b::PERF_RECORD_SAMPLE {
        return None;
    }
    c.pos = 24;
    let pid = c.u32()? as i32;
    c.u32()?;
    Some((pid, c.u64()?))
}

/// Parses one record (header included), as [`super::ring::Ring::drain`] hands it out.
pub fn parse(rec: &[u8]) -> Record {
    parse_opt(rec).unwrap_or(Record::Bad)
}

fn parse_opt(rec: &[u8]) -> Option<Record> {
    let mut c = Cur { b: rec, pos: 0 };
    let kind = c.u32()?;
    let misc = u32::from(u16::from_le_bytes(c.bytes(2)?.try_into().ok()?));
    let size = u16::from_le_bytes(c.bytes(2)?.try_into().ok()?) as usize;
    let rec = rec.get(..size)?;
    let mut c = Cur { b: rec, pos: 8 };
    // The body without the trailer, for records with a variable-length part.
    let body_end = rec.len().checked_sub(TRAILER)?;
    Some(match kind {
        b::PERF_RECORD_SWITCH => {
            Record::Switch { id: trailer(rec)?, out: misc & b::PERF_RECORD_MISC_SWITCH_OUT != 0, preempt: misc & b::PERF_RECORD_MISC_SWITCH_OUT_PREEMPT != 0 }
        }
        b::PERF_RECORD_FORK | b::PERF_RECORD_EXIT => {
            let (pid, ppid, tid, ptid) = (c.u32()? as i32, c.u32()? as i32, c.u32()? as i32, c.u32()? as i32);
            let id = trailer(rec)?;
            if kind == b::PERF_RECORD_FORK {
                Record::Fork { id, pid, ppid, tid, ptid }
            } else {
                Record::Exit { id, pid, ppid, tid, ptid }
            }
        }
        b::PERF_RECORD_COMM => {
            let (pid, tid) = (c.u32()? as i32, c.u32()? as i32);
            let comm = cstr(rec.get(c.pos..body_end)?);
            Record::Comm { id: trailer(rec)?, pid, tid, comm, exec: misc & b::PERF_RECORD_MISC_COMM_EXEC != 0 }
        }
        b::PERF_RECORD_MMAP | b::PERF_RECORD_MMAP2 => {
            let (pid, tid) = (c.u32()? as i32, c.u32()? as i32);
            let (start, len, pgoff) = (c.u64()?, c.u64()?, c.u64()?);
            let (mut prot, mut flags) = (0, 0);
            if kind == b::PERF_RECORD_MMAP2 {
                c.bytes(24)?; // maj, min, ino, ino_generation (or the build id)
                prot = c.u32()?;
                flags = c.u32()?;
            }
            let filename = cstr(rec.get(c.pos..body_end)?);
            Record::Mmap { id: trailer(rec)?, pid, tid, start, len, pgoff, prot, flags, filename }
        }
        b::PERF_RECORD_LOST => {
            c.u64()?;
            Record::Lost { lost: c.u64()?, id: trailer(rec)? }
        }
        b::PERF_RECORD_LOST_SAMPLES => Record::Lost { lost: c.u64()?, id: trailer(rec)? },
        b::PERF_RECORD_SAMPLE => {
            let event = c.u64()?;
            let ip = c.u64()?;
            let (pid, tid) = (c.u32()? as i32, c.u32()? as i32);
            let time = c.u64()?;
            let addr = c.u64()?;
            let cpu = c.u32()?;
            c.u32()?;
            let abi = c.u64()?;
            let regs = if abi == u64::from(b::PERF_SAMPLE_REGS_ABI_NONE) { None } else { Some([c.u64()?, c.u64()?, c.u64()?]) };
            let n = c.u64()? as usize;
            let mut stack = Vec::new();
            if n > 0 {
                let data = c.bytes(n)?;
                let dyn_size = (c.u64()? as usize).min(n);
                stack = data[..dyn_size].to_vec();
            }
            Record::Sample(Sample { id: Id { pid, tid, time, cpu, event }, ip, addr, regs, stack })
        }
        k => Record::Other { kind: k },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(kind: u32, misc: u16, body: &[u8]) -> Vec<u8> {
        let mut v = Vec::new();
        v.extend_from_slice(&kind.to_le_bytes());
        v.extend_from_slice(&misc.to_le_bytes());
        v.extend_from_slice(&((8 + body.len()) as u16).to_le_bytes());
        v.extend_from_slice(body);
        v
    }

    fn trailer_bytes(pid: u32, tid: u32, time: u64, cpu: u32, id: u64) -> Vec<u8> {
        let mut v = Vec::new();
        for x in [pid, tid] {
            v.extend_from_slice(&x.to_le_bytes());
        }
        v.extend_from_slice(&time.to_le_bytes());
        v.extend_from_slice(&cpu.to_le_bytes());
        v.extend_from_slice(&0u32.to_le_bytes());
        v.extend_from_slice(&id.to_le_bytes());
        v
    }

    #[test]
    fn switch_comm_and_hostile_records() {
        let r = rec(b::PERF_RECORD_SWITCH, (b::PERF_RECORD_MISC_SWITCH_OUT | b::PERF_RECORD_MISC_SWITCH_OUT_PREEMPT) as u16, &trailer_bytes(7, 8, 99, 1, 5));
        assert_eq!(parse(&r), Record::Switch { id: Id { pid: 7, tid: 8, time: 99, cpu: 1, event: 5 }, out: true, preempt: true });
        let mut body = Vec::new();
        body.extend_from_slice(&7u32.to_le_bytes());
        body.extend_from_slice(&8u32.to_le_bytes());
        body.extend_from_slice(b"sleep\0\0\0");
        body.extend_from_slice(&trailer_bytes(7, 8, 100, 0, 5));
        let Record::Comm { comm, exec, id, .. } = parse(&rec(b::PERF_RECORD_COMM, b::PERF_RECORD_MISC_COMM_EXEC as u16, &body)) else { panic!() };
        assert_eq!((comm.as_str(), exec, id.time), ("sleep", true, 100));
        // Every truncation of a valid record is Bad, never a panic.
        let full = rec(b::PERF_RECORD_COMM, 0, &body);
        for n in 0..full.len() {
            let mut cut = full[..n].to_vec();
            if cut.len() >= 8 {
                cut[6..8].copy_from_slice(&(n as u16).to_le_bytes());
            }
            assert!(matches!(parse(&cut), Record::Bad | Record::Comm { .. }), "{n}");
        }
        // A sample claiming a stack larger than the record.
        let mut s = Vec::new();
        for x in [5u64, 0x1000, 0, 0, 0x2000, 0, 2 /* abi 64 */, 1, 2, 3, 1 << 40] {
            s.extend_from_slice(&x.to_le_bytes());
        }
        assert_eq!(parse(&rec(b::PERF_RECORD_SAMPLE, 0, &s)), Record::Bad);
        assert_eq!(parse(&[1, 2, 3]), Record::Bad);
    }

    #[test]
    fn sample_with_stack() {
        let mut s = Vec::new();
        for x in [5u64, 0x1000] {
            s.extend_from_slice(&x.to_le_bytes());
        }
        s.extend_from_slice(&10u32.to_le_bytes());
        s.extend_from_slice(&11u32.to_le_bytes());
        for x in [777u64, 0xdead] {
            s.extend_from_slice(&x.to_le_bytes());
        }
        s.extend_from_slice(&1u32.to_le_bytes());
        s.extend_from_slice(&0u32.to_le_bytes());
        for x in [2u64, 0x30, 0x40, 0x1000, 16] {
            s.extend_from_slice(&x.to_le_bytes());
        }
        s.extend_from_slice(&[9u8; 16]);
        s.extend_from_slice(&8u64.to_le_bytes());
        let Record::Sample(p) = parse(&rec(b::PERF_RECORD_SAMPLE, 0, &s)) else { panic!() };
        assert_eq!((p.ip, p.addr, p.id.tid, p.id.cpu, p.regs, p.stack.len()), (0x1000, 0xdead, 11, 1, Some([0x30, 0x40, 0x1000]), 8));
        // Its process, read in place, as parse reads it; none of another kind or cut short.
        let whole = rec(b::PERF_RECORD_SAMPLE, 0, &s);
        assert_eq!((sample_pid_time(&whole), p.id.pid, p.id.time), (Some((10, 777)), 10, 777));
        assert_eq!(sample_pid_time(&rec(b::PERF_RECORD_MMAP, 0, &s)), None);
        assert_eq!(sample_pid_time(&whole[..39]), None);
    }
}
