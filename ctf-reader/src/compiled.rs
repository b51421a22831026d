//! A trace prepared for decoding: the model, one register table, compiled decoders for
//! every root scope of every stream and event class, event lookup tables and clocks.

use std::collections::HashMap;

use crate::clock::Clock;
use crate::decode::compile::{compile, Node, Registers};
use crate::error::{Error, MetadataError};
use crate::model::{Scope, Trace};

/// Compiled decoders of one event class.
pub(crate) struct EventDec {
    pub context: Option<Node>,
    pub payload: Option<Node>,
}

/// Compiled decoders of one stream class.
pub(crate) struct StreamClassDec {
    pub packet_context: Option<Node>,
    pub event_header: Option<Node>,
    pub event_context: Option<Node>,
    pub events: Vec<EventDec>,
    /// Event class id to index in `events` (dense table for small ids).
    dense: Vec<u32>,
    sparse: HashMap<u64, u32>,
    /// The default clock, ready for conversions.
    pub clock: Option<Clock>,
}

const NONE: u32 = u32::MAX;

impl StreamClassDec {
    /// Index of the event class with id `id`.
    #[inline]
    pub(crate) fn event_index(&self, id: u64) -> Option<usize> {
        if let Some(&i) = self.dense.get(id as usize) {
            return (i != NONE).then_some(i as usize);
        }
        self.sparse.get(&id).map(|&i| i as usize)
    }
}

/// The whole trace, compiled.
pub(crate) struct Compiled {
    pub trace: Trace,
    pub packet_header: Option<Node>,
    pub streams: Vec<StreamClassDec>,
    pub n_regs: usize,
}

impl Compiled {
    /// Compiles every scope of `trace`. Errors: a clock whose offset overflows (as
    /// babeltrace2 refuses it), or a model inconsistency, named with the metadata path.
    pub(crate) fn new(trace: Trace, metadata_path: &std::path::Path) -> Result<Compiled, Error> {
        let sem = |msg: String| Error::Metadata(MetadataError::Semantic { path: metadata_path.to_owned(), msg });
        let mut all = Vec::new();
        all.extend(trace.packet_header.iter());
        for sc in &trace.streams {
            all.extend(sc.packet_context.iter().chain(&sc.event_header).chain(&sc.event_context));
            for e in &sc.events {
                all.extend(e.context.iter().chain(&e.payload));
            }
        }
        let regs = Registers::collect(all).map_err(sem)?;
        let c = |t: &Option<crate::model::FieldType>, s: Scope| -> Result<Option<Node>, Error> {
            t.as_ref().map(|t| compile(t, s, &regs)).transpose().map_err(sem)
        };
        let packet_header = c(&trace.packet_header, Scope::PacketHeader)?;
        let mut streams = Vec::with_capacity(trace.streams.len());
        for sc in &trace.streams {
            let mut events = Vec::with_capacity(sc.events.len());
            let mut dense = Vec::new();
            let mut sparse = HashMap::new();
            for (i, e) in sc.events.iter().enumerate() {
                events.push(EventDec { context: c(&e.context, Scope::EventSpecificContext)?, payload: c(&e.payload, Scope::EventPayload)? });
                if e.id < 1 << 16 {
                    if dense.len() <= e.id as usize {
                        dense.resize(e.id as usize + 1, NONE);
                    }
                    dense[e.id as usize] = i as u32;
                } else {
                    sparse.insert(e.id, i as u32);
                }
            }
            let clock = sc.default_clock.map(|i| Clock::new(&trace.clocks[i])).transpose().map_err(|e| e.in_file(metadata_path))?;
            streams.push(StreamClassDec {
                packet_context: c(&sc.packet_context, Scope::PacketContext)?,
                event_header: c(&sc.event_header, Scope::EventHeader)?,
                event_context: c(&sc.event_context, Scope::EventCommonContext)?,
                events,
                dense,
                sparse,
                clock,
            });
        }
        Ok(Compiled { n_regs: regs.len(), packet_header, streams, trace })
    }
}
