#!/usr/bin/python3
"""Dump every message of a CTF trace as babeltrace2 (the `bt2` Python bindings) sees it,
one JSON line per message, for comparison with the `ctf_dump` example of this crate.

Usage: bt2_dump.py [--per-stream] TRACE_DIR

Default: the messages of `src.ctf.fs` through the muxer (`TraceCollectionMessageIterator`),
in time order. `--per-stream`: a graph without the muxer, one sink per `src.ctf.fs` output
port; each stream's messages in stream order, the streams sorted by name (for traces the
muxer refuses: packets that overlap in time).

Lines (compact JSON, ASCII only, keys in this order):
  {"type":"event","stream":NAME,"sc":STREAM_CLASS_ID,"ec":EVENT_CLASS_ID,"name":NAME,
   "ts":NS_FROM_ORIGIN|null,"cpu":CPU|null,"pctx":V,"sctx":V,"ectx":V,"payload":V}
  {"type":"discarded_events"|"discarded_packets","stream":NAME,"count":N|null,
   "begin":NS|null,"end":NS|null}
  {"type":"error","msg":TEXT}   (babeltrace2 stopped with an error)
Values V: integers as numbers, floats as "f:" and the 16 hex digits of their binary64
bits, strings, enumerations as {"enum":VALUE,"labels":[SORTED LABELS]}, arrays as lists,
structures as objects, variants as {"variant":OPTION,"value":V}, absent scopes as null.
"""

import json
import os
import struct
import sys

import bt2


def value(f):
    if isinstance(f, (bt2._UnsignedEnumerationFieldConst, bt2._SignedEnumerationFieldConst)):
        return {"enum": int(f), "labels": sorted(f.labels)}
    if isinstance(f, bt2._BoolFieldConst):
        return bool(f)
    if isinstance(f, bt2._IntegerFieldConst):
        return int(f)
    if isinstance(f, bt2._RealFieldConst):
        return "f:%016x" % struct.unpack("<Q", struct.pack("<d", float(f)))[0]
    if isinstance(f, bt2._StringFieldConst):
        return str(f)
    if isinstance(f, bt2._StructureFieldConst):
        return {k: value(v) for k, v in f.items()}
    if isinstance(f, bt2._VariantFieldConst):
        opt = f.cls.option_at_index(f.selected_option_index)
        return {"variant": opt.name, "value": value(f.selected_option)}
    if isinstance(f, bt2._ArrayFieldConst):
        return [value(x) for x in f]
    raise TypeError("unknown field type %r" % type(f))


def scope(f):
    return None if f is None else value(f)


def stream_name(stream):
    name = stream.name
    return os.path.basename(name) if name else str(stream.id)


def ns(cs):
    return None if cs is None else cs.ns_from_origin


def line(msg):
    if isinstance(msg, bt2._EventMessageConst):
        ev = msg.event
        pctx = ev.packet.context_field if ev.packet is not None else None
        cpu = None
        if pctx is not None and "cpu_id" in pctx:
            cpu = int(pctx["cpu_id"])
        cs = msg.default_clock_snapshot if ev.stream.cls.default_clock_class is not None else None
        d = {
            "type": "event",
            "stream": stream_name(ev.stream),
            "sc": ev.stream.cls.id,
            "ec": ev.cls.id,
            "name": ev.name,
            "ts": ns(cs),
            "cpu": cpu,
            "pctx": scope(pctx),
            "sctx": scope(ev.common_context_field),
            "ectx": scope(ev.specific_context_field),
            "payload": scope(ev.payload_field),
        }
    elif isinstance(msg, (bt2._DiscardedEventsMessageConst, bt2._DiscardedPacketsMessageConst)):
        kind = "discarded_events" if isinstance(msg, bt2._DiscardedEventsMessageConst) else "discarded_packets"
        has_cs = msg.stream.cls.default_clock_class is not None and (
            msg.stream.cls.discarded_events_have_default_clock_snapshots
            if kind == "discarded_events"
            else msg.stream.cls.discarded_packets_have_default_clock_snapshots
        )
        d = {
            "type": kind,
            "stream": stream_name(msg.stream),
            "count": msg.count,
            "begin": ns(msg.beginning_default_clock_snapshot) if has_cs else None,
            "end": ns(msg.end_default_clock_snapshot) if has_cs else None,
        }
    else:
        return None
    return json.dumps(d, separators=(",", ":"), ensure_ascii=True)


def muxed(path, out):
    try:
        for msg in bt2.TraceCollectionMessageIterator(path):
            s = line(msg)
            if s is not None:
                out.write(s + "\n")
    except Exception as e:  # babeltrace2 stopped: report it as a line, like the reader does
        out.write(json.dumps({"type": "error", "msg": str(e).splitlines()[0] if str(e) else type(e).__name__}) + "\n")
        return 1
    return 0


class _Sink(bt2._UserSinkComponent):
    def __init__(self, config, params, obj):
        self._port = self._add_input_port("in")
        self._lines = obj

    def _user_graph_is_configured(self):
        self._it = self._create_message_iterator(self._port)

    def _user_consume(self):
        s = line(next(self._it))
        if s is not None:
            self._lines.append(s)


def per_stream(path, out):
    graph = bt2.Graph()
    src_cls = bt2.find_plugin("ctf").source_component_classes["fs"]
    src = graph.add_component(src_cls, "src", params={"inputs": [path]})
    groups = []
    for i, name in enumerate(sorted(src.output_ports)):
        lines = []
        sink = graph.add_component(_Sink, "sink%d" % i, obj=lines)
        graph.connect_ports(src.output_ports[name], sink.input_ports["in"])
        groups.append(lines)
    status = 0
    try:
        graph.run()
    except Exception as e:
        status = 1
        err = str(e).splitlines()[0] if str(e) else type(e).__name__
    groups = [g for g in groups if g]
    groups.sort(key=lambda g: json.loads(g[0])["stream"])
    for g in groups:
        out.write("\n".join(g) + "\n")
    if status:
        out.write(json.dumps({"type": "error", "msg": err}) + "\n")
    return status


def main():
    args = sys.argv[1:]
    if not args or args[0] in ("-h", "--help"):
        print(__doc__)
        return 2
    if args[0] == "--per-stream":
        return per_stream(args[1], sys.stdout)
    return muxed(args[0], sys.stdout)


if __name__ == "__main__":
    sys.exit(main())
