//! BLOB fields: bytes tagged with a media type (LTTng 2.16's `lttng_ust_field_blob`).
//!
//! ```
//! let png: Vec<u8> = vec![0x89, b'P', b'N', b'G'];
//! ust::tracepoint!(myapp, frame, image: ust::Blob<ust::media::Png> = &png);
//!
//! // A media type of one's own:
//! ust::media_type!(pub Cbor = "application/cbor");
//! ust::tracepoint!(myapp, message, body: ust::Blob<Cbor> = &[0xa0u8][..]);
//! ```
//!
//! The media type is part of the field's *type*, not of its value: it is written once in
//! the trace's metadata, not in every record, so it must be known at compile time. Stable
//! Rust has no `&'static str` const generics (`Blob<"image/png">` needs the unstable
//! `adt_const_params`), so a media type is a marker type implementing [`MediaType`]:
//! [`media`] has the common ones and [`media_type!`](crate::media_type) declares others,
//! checking the name at compile time.
//!
//! In a record a BLOB is what `&[u8]` is: a `u64` length `_<name>_length`, then the bytes.
//! In the CTF 1.8 metadata it is that sequence of bytes printed in base 16, preceded by the
//! comment ``// dynamic length BLOB field with `image/png` media type`` that
//! lttng-sessiond 2.16 writes; babeltrace2 2.0 reads it as a sequence, ust's `ctf-reader`
//! also returns the media type ([`ust_core::FieldType::Blob`]). A filter can test one
//! byte (`image[0] == 0x89`) but not a whole BLOB: `ust enable-event --filter` refuses it.

use core::fmt;
use core::marker::PhantomData;
use std::borrow::Cow;

use ust_core::FieldType;

use crate::field::Field;

/// A media type ([RFC 6838](https://www.rfc-editor.org/rfc/rfc6838)) for [`Blob`] fields:
/// a marker type whose [`MEDIA_TYPE`](MediaType::MEDIA_TYPE) is written into the trace's
/// metadata. Declare one with [`media_type!`](crate::media_type), which checks the name.
///
/// A type rather than a value because the media type belongs to the field's description,
/// written once into the metadata, so it must be known at compile time; stable Rust has no
/// `&'static str` const generics (`Blob<"image/png">` needs the unstable
/// `adt_const_params`).
pub trait MediaType {
    /// `type/subtype[; parameters]`: see [`ust_core::valid_media_type`]. A daemon refuses
    /// the registration of a process whose BLOB field has an invalid one.
    const MEDIA_TYPE: &'static str;
}

/// Declares a [`MediaType`] marker type: `ust::media_type!(pub Cbor = "application/cbor");`.
/// The name is checked at compile time ([`ust_core::valid_media_type`]):
///
/// ```compile_fail
/// ust::media_type!(Bad = "not a media type");
/// ```
#[macro_export]
macro_rules! media_type {
    ($(#[$meta:meta])* $vis:vis $name:ident = $mt:literal) => {
        $(#[$meta])*
        #[doc = ::core::concat!("The media type `", $mt, "` (a `ust::MediaType`).")]
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        $vis enum $name {}
        impl $crate::MediaType for $name {
            const MEDIA_TYPE: &'static str = $mt;
        }
        // A free constant, evaluated whether or not the type is used.
        const _: () = ::core::assert!($crate::__private::valid_media_type($mt), ::core::concat!("invalid media type: ", $mt));
    };
}

/// Common media types for [`Blob`] fields.
pub mod media {
    crate::media_type!(
        /// Bytes with no more specific type (RFC 2046).
        pub OctetStream = "application/octet-stream"
    );
    crate::media_type!(
        /// A PNG image.
        pub Png = "image/png"
    );
    crate::media_type!(
        /// A JPEG image.
        pub Jpeg = "image/jpeg"
    );
    crate::media_type!(
        /// A WebP image.
        pub Webp = "image/webp"
    );
    crate::media_type!(
        /// JSON text.
        pub Json = "application/json"
    );
    crate::media_type!(
        /// CBOR (RFC 8949).
        pub Cbor = "application/cbor"
    );
    crate::media_type!(
        /// Protocol Buffers (IETF draft media type).
        pub Protobuf = "application/x-protobuf"
    );
    crate::media_type!(
        /// UTF-8 text.
        pub TextUtf8 = "text/plain; charset=utf-8"
    );
}

/// A BLOB field: `bytes` recorded as a CTF byte sequence whose metadata carries the media
/// type `M` (the media type is a type: see [`MediaType`]). In `ust::tracepoint!`, a field declared
/// `name: ust::Blob<M>` takes `&bytes` directly (any `&T` with `T: AsRef<[u8]>`: `&Vec<u8>`,
/// `&[u8]`, `&[u8; N]`, `&str`...), or a `Blob` made with [`Blob::new`].
pub struct Blob<'a, M: MediaType = media::OctetStream> {
    bytes: &'a [u8],
    media: PhantomData<fn() -> M>,
}

impl<'a, M: MediaType> Blob<'a, M> {
    /// A BLOB of `bytes`.
    pub fn new<B: AsRef<[u8]> + ?Sized>(bytes: &'a B) -> Self {
        Blob { bytes: bytes.as_ref(), media: PhantomData }
    }

    /// The bytes.
    pub fn bytes(&self) -> &'a [u8] {
        self.bytes
    }
}

impl<M: MediaType> Clone for Blob<'_, M> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<M: MediaType> Copy for Blob<'_, M> {}

impl<M: MediaType> fmt::Debug for Blob<'_, M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Blob<{}>({} bytes)", M::MEDIA_TYPE, self.bytes.len())
    }
}

/// A BLOB's record: the `u64` length, then the bytes (`&[u8]`'s layout).
// SAFETY: `encoded_len` is 8 + the length of `bytes`, which a `Copy` shared slice cannot
// change; `encode` splits its slice of exactly that length at 8 (`split_at_mut` of a
// length >= 8 cannot panic) and fills both parts with `copy_from_slice` of equal lengths.
unsafe impl<M: MediaType> Field for Blob<'_, M> {
    const TYPE: FieldType = FieldType::Blob { media_type: Cow::Borrowed(M::MEDIA_TYPE) };
    #[inline]
    fn encoded_len(&self) -> usize {
        8 + self.bytes.len()
    }
    #[inline]
    fn encode(&self, out: &mut [u8]) {
        let (len, rest) = out.split_at_mut(8);
        len.copy_from_slice(&(self.bytes.len() as u64).to_le_bytes());
        rest.copy_from_slice(self.bytes);
    }
    #[inline(always)]
    fn sdt_arg(&self) -> u64 {
        self.bytes.as_ptr() as usize as u64
    }
}

/// How `ust::tracepoint!` turns the expression of a field declared `name: Blob<M>` into
/// the field's value: from a `Blob` itself, or from a reference to bytes. Other field
/// types take their expression as it is (a `let` with the declared type).
#[doc(hidden)]
pub trait FieldInit<Src> {
    /// The field's value.
    fn field_init(src: Src) -> Self;
}

impl<T> FieldInit<T> for T {
    #[inline(always)]
    fn field_init(src: T) -> T {
        src
    }
}

impl<'a, M: MediaType, B: AsRef<[u8]> + ?Sized> FieldInit<&'a B> for Blob<'a, M> {
    #[inline(always)]
    fn field_init(src: &'a B) -> Self {
        Blob::new(src)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    crate::media_type!(Custom = "application/vnd.example+cbor");

    fn enc<T: Field>(v: T) -> Vec<u8> {
        let mut out = vec![0xAAu8; v.encoded_len()];
        v.encode(&mut out);
        out
    }

    #[test]
    fn a_blob_is_a_u64_length_then_its_bytes() {
        let bytes = vec![1u8, 0, 0xff];
        assert_eq!(enc(Blob::<media::Png>::new(&bytes)), [3, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0xff]);
        assert_eq!(enc(Blob::<media::Png>::new(&[0u8; 0])), [0u8; 8]);
        assert_eq!(<Blob<media::Png> as Field>::TYPE, FieldType::Blob { media_type: Cow::Borrowed("image/png") });
        assert_eq!(<Blob<Custom> as Field>::TYPE, FieldType::Blob { media_type: Cow::Borrowed("application/vnd.example+cbor") });
        assert_eq!(<Blob as Field>::TYPE, FieldType::Blob { media_type: Cow::Borrowed("application/octet-stream") });
        assert_eq!(format!("{:?}", Blob::<media::Json>::new("{}")), "Blob<application/json>(2 bytes)");
    }

    #[test]
    fn every_common_media_type_is_valid() {
        for m in [
            media::OctetStream::MEDIA_TYPE,
            media::Png::MEDIA_TYPE,
            media::Jpeg::MEDIA_TYPE,
            media::Webp::MEDIA_TYPE,
            media::Json::MEDIA_TYPE,
            media::Cbor::MEDIA_TYPE,
            media::Protobuf::MEDIA_TYPE,
            media::TextUtf8::MEDIA_TYPE,
        ] {
            assert!(ust_core::valid_media_type(m), "{m}");
        }
    }

    #[test]
    fn field_init_takes_references_to_bytes_or_a_blob() {
        let v = vec![5u8, 6];
        let b: Blob<media::Png> = FieldInit::field_init(&v);
        assert_eq!(b.bytes(), [5, 6]);
        let a: Blob<media::Png> = FieldInit::field_init(&[7u8; 3]);
        assert_eq!(a.bytes(), [7, 7, 7]);
        let same: Blob<media::Png> = FieldInit::field_init(a);
        assert_eq!(same.bytes(), [7, 7, 7]);
        let s: Blob<media::TextUtf8> = FieldInit::field_init("hé");
        assert_eq!(s.bytes(), "hé".as_bytes());
    }
}
