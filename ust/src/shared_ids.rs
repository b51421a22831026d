//! The event ids of a per-UID channel, as this process sees them.
//!
//! A per-UID channel's buffers are shared by every process of one user, so its records
//! cannot carry each process's own registration-order ids: the daemon keeps one event
//! registry per per-UID trace, assigns the ids there, and sends each process a table
//! (local event index → id), as LTTng's session daemon answers each event registration
//! with the id of its registry. The emit path looks the id up here:
//!
//! ```text
//! local index i ──> chunks[i / CHUNK] ──> [AtomicU32; CHUNK][i % CHUNK] ──> id (0 = none)
//! ```
//!
//! Two loads, no lock. Chunks are allocated by the runtime thread (the only writer) and
//! published once; an entry is stored (`Release`) before the mask bit that makes the
//! emit path read it, and never changes afterwards (the daemon never renumbers).
//! Chunks are leaked with their channel (a channel is never freed: [`crate::channel`]).

use std::sync::atomic::{AtomicU32, Ordering};

use crate::published::Published;

/// Entries per chunk.
const CHUNK: usize = 1024;
/// Chunks: `CHUNKS * CHUNK` covers the daemon's limit on events per process (2^16).
const CHUNKS: usize = 64;

/// Local event index → id in one per-UID channel.
pub(crate) struct SharedIds {
    chunks: [Published<[AtomicU32; CHUNK]>; CHUNKS],
}

#[allow(clippy::declare_interior_mutable_const)]
const NO_CHUNK: Published<[AtomicU32; CHUNK]> = Published::empty();

impl SharedIds {
    /// An empty table (every id 0).
    pub(crate) fn new() -> SharedIds {
        SharedIds { chunks: [NO_CHUNK; CHUNKS] }
    }

    /// The id of local event `index`, 0 when it has none.
    #[inline(always)]
    pub(crate) fn get(&self, index: u32) -> u32 {
        let i = index as usize;
        match self.chunks.get(i / CHUNK).and_then(|c| c.get()) {
            Some(c) => c[i % CHUNK].load(Ordering::Acquire),
            None => 0,
        }
    }

    /// Sets the ids of local events `0..ids.len()`. Runtime thread only. Entries past the
    /// table's capacity are ignored (the daemon never registers that many).
    pub(crate) fn set(&self, ids: &[u32]) {
        for (i, &id) in ids.iter().enumerate().take(CHUNK * CHUNKS) {
            let slot = &self.chunks[i / CHUNK];
            let chunk = match slot.get() {
                Some(c) => c,
                None => {
                    if id == 0 {
                        continue;
                    }
                    slot.publish(std::array::from_fn(|_| AtomicU32::new(0)));
                    slot.get().expect("just published")
                }
            };
            chunk[i % CHUNK].store(id, Ordering::Release);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_looked_up_by_local_index_across_chunks() {
        let t = SharedIds::new();
        assert_eq!(t.get(0), 0);
        let mut ids = vec![0u32; 2 * CHUNK + 5];
        ids[0] = 7;
        ids[CHUNK + 1] = 40;
        ids[2 * CHUNK + 4] = 3;
        t.set(&ids);
        assert_eq!((t.get(0), t.get(1), t.get(CHUNK as u32 + 1), t.get(2 * CHUNK as u32 + 4)), (7, 0, 40, 3));
        assert_eq!(t.get(u32::MAX), 0, "out of range: none");
        t.set(&[8]);
        assert_eq!(t.get(0), 8);
    }
}
