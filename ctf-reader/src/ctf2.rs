//! CTF 2 metadata (placeholder until written).
use std::path::Path;
use crate::error::MetadataError;
use crate::model::Trace;
pub(crate) fn parse(_bytes: &[u8], path: &Path) -> Result<Trace, MetadataError> {
    Err(MetadataError::Semantic { path: path.to_owned(), msg: "CTF 2 not yet".into() })
}
