//! The wire codec: serde + bincode 2.x, kept behind one trait ([`Wire`]) so a
//! change of format is one file. (bincode is flagged unmaintained by
//! RUSTSEC-2025-0141; 3.0.0 on the registry does not build.)
//!
//! bincode cannot decode `serde_json::Value`, fields skipped with
//! `skip_serializing_if`, or untagged enums, yet encodes them without
//! complaint: wire types use none of them, and every wire type has a
//! round-trip test.

use serde::Serialize;
use serde::de::DeserializeOwned;

/// A value could not be encoded or decoded; the text says why.
#[derive(Debug, thiserror::Error)]
pub enum CodecError {
    /// Encoding failed.
    #[error("could not encode a wire message: {0}")]
    Encode(String),
    /// Decoding failed (truncated, corrupt, or of another type).
    #[error("could not decode a wire message: {0}")]
    Decode(String),
}

fn config() -> bincode::config::Configuration {
    bincode::config::standard()
}

/// A value that crosses a process boundary: bincode 2.x over its serde
/// form. Every serde type is one; the wire types (events, envelopes,
/// requests, snapshots) are the ones with a round-trip test.
///
/// ```
/// use subagents_messages::codec::Wire;
/// use subagents_messages::AgentId;
///
/// let bytes = AgentId::new("agent_1").to_wire()?;
/// assert_eq!(AgentId::from_wire(&bytes)?, AgentId::new("agent_1"));
/// # Ok::<(), subagents_messages::codec::CodecError>(())
/// ```
pub trait Wire: Serialize + DeserializeOwned {
    /// Encodes the value for the wire.
    fn to_wire(&self) -> Result<Vec<u8>, CodecError> {
        bincode::serde::encode_to_vec(self, config()).map_err(|e| CodecError::Encode(e.to_string()))
    }

    /// Decodes a value from the wire; trailing bytes are an error.
    fn from_wire(bytes: &[u8]) -> Result<Self, CodecError> {
        let (value, read) = bincode::serde::decode_from_slice(bytes, config())
            .map_err(|e| CodecError::Decode(e.to_string()))?;
        if read != bytes.len() {
            return Err(CodecError::Decode(format!(
                "{} trailing bytes after the message",
                bytes.len() - read
            )));
        }
        Ok(value)
    }
}

impl<T: Serialize + DeserializeOwned> Wire for T {}
