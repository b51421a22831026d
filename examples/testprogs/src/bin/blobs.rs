//! `blobs LARGE`: BLOB fields (LTTng 2.16). Prints `ready` once registered, waits until its
//! standard input closes, then emits
//!
//! - `blob:image { image: ust::Blob<ust::media::Png>, n }` three times: with 0 bytes
//!   (`n = 0`), with the 6 bytes `89 50 4e 47 00 ff` (`n = 1`), and with LARGE bytes,
//!   byte `k` being `k * 7 % 251` (`n = 2`);
//! - `blob:custom { body }`, a BLOB of the program's own media type
//!   `application/vnd.ust.test+cbor` (declared with `ust::media_type!`), holding the 4
//!   bytes `a1 61 6b 01`, given as a `ust::Blob` made with `Blob::new`.
//!
//! The system test `blob.rs` checks every byte in the trace.

use std::io::Read;

ust::media_type!(TestCbor = "application/vnd.ust.test+cbor");

fn main() {
    let large: usize = std::env::args().nth(1).and_then(|a| a.parse().ok()).expect("LARGE, a size in bytes");
    println!("ready");
    let mut sink = Vec::new();
    let _ = std::io::stdin().read_to_end(&mut sink);
    let few: [u8; 6] = [0x89, 0x50, 0x4e, 0x47, 0x00, 0xff];
    let big: Vec<u8> = (0..large).map(|k| (k * 7 % 251) as u8).collect();
    let empty: Vec<u8> = Vec::new();
    ust::tracepoint!(blob, image, image: ust::Blob<ust::media::Png> = &empty, n: u32 = 0);
    ust::tracepoint!(blob, image, image: ust::Blob<ust::media::Png> = &few, n: u32 = 1);
    ust::tracepoint!(blob, image, image: ust::Blob<ust::media::Png> = &big, n: u32 = 2);
    let body = [0xa1u8, 0x61, 0x6b, 0x01];
    ust::tracepoint!(blob, custom, body: ust::Blob<TestCbor> = ust::Blob::new(&body));
    println!("blobs: 4 events emitted");
}
