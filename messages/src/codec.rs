//! The wire codec: serde + bincode 2.x, kept behind one trait ([`Wire`]) so a
//! change of format is one file. (bincode is flagged unmaintained by
//! RUSTSEC-2025-0141; 3.0.0 on the registry does not build.)
//!
//! bincode cannot decode `serde_json::Value`, fields skipped with
//! `skip_serializing_if`, or untagged enums, yet encodes them without
//! complaint: wire types use none of them, and every wire type has a
//! round-trip test.
//!
//! A message is at most 64 MiB long, both ways ([`CodecError::TooLarge`]
//! names its size and the limit). Decoding
//! reads lengths from the input and allocates before it reads what they
//! count, so without a bound ten hostile bytes claiming a string of 2⁴⁸
//! bytes would abort the process (an allocation failure is not a panic a
//! handler can catch). Each decode is bounded by a small multiple of the
//! input's own size: such a claim is a [`CodecError::Decode`], and what
//! the strings and byte fields of a message of `n` bytes claim is bounded
//! by 16 × the next of 4 KiB, 1 MiB, 64 MiB at or above `n`. A sequence
//! (a list of messages, of tool calls) is not counted against it: serde
//! reserves room for the length it claims, up to 1 MiB per sequence,
//! before its elements fail to decode — so a few bytes can make a decode
//! reserve a few MiB for a moment, never more (a transcript's rows, which
//! nest with its children's, are read without reserving: 128 levels
//! reserved 1 MiB each at once). `Child` events nest at most 128 levels
//! (each a frame of the decoder's stack).

use bincode::config::{Limit, LittleEndian, Varint};
use serde::Serialize;
use serde::de::DeserializeOwned;

/// A value could not be encoded or decoded.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CodecError {
    /// Encoding failed; the text says why.
    #[error("could not encode a wire message: {0}")]
    Encode(String),
    /// Decoding failed (truncated, corrupt, or of another type); the text
    /// says why.
    #[error("could not decode a wire message: {0}")]
    Decode(String),
    /// A message to write, or one read, is over the wire's limit (64 MiB,
    /// both ways): no peer would read it.
    #[error("the message is {bytes} bytes, over the wire's limit of {limit}")]
    TooLarge {
        /// The message's size in bytes.
        bytes: usize,
        /// The longest message the codec writes or reads.
        limit: usize,
    },
}

/// The longest message the codec writes or reads: 64 MiB (a host reads it
/// from [`CodecError::TooLarge`]).
pub(crate) const MAX_WIRE_BYTES: usize = 64 << 20;

/// bincode counts a decode's claims against its limit: a string or byte
/// string claims its length, an integer its full width whatever its
/// varint took (a `u64` claims 8 for its one byte), so a message of `n`
/// bytes claims at most `CLAIMS_PER_BYTE × n`.
const CLAIMS_PER_BYTE: usize = 16;

fn config<const LIMIT: usize>() -> bincode::config::Configuration<LittleEndian, Varint, Limit<LIMIT>>
{
    bincode::config::standard().with_limit::<LIMIT>()
}

fn decode<T: DeserializeOwned, const LIMIT: usize>(bytes: &[u8]) -> Result<(T, usize), CodecError> {
    bincode::serde::decode_from_slice(bytes, config::<LIMIT>())
        .map_err(|e| CodecError::Decode(e.to_string()))
}

/// Decodes with a limit a few times the input's own length, never a
/// fixed large one: no length a hostile message claims can make the
/// decode allocate more than [`CLAIMS_PER_BYTE`] × the next step up from
/// its size (4 KiB, 1 MiB, [`MAX_WIRE_BYTES`]).
fn decode_bounded<T: DeserializeOwned>(bytes: &[u8]) -> Result<(T, usize), CodecError> {
    const SMALL: usize = 4 << 10;
    const MEDIUM: usize = 1 << 20;
    match bytes.len() {
        n if n <= SMALL => decode::<T, { SMALL * CLAIMS_PER_BYTE }>(bytes),
        n if n <= MEDIUM => decode::<T, { MEDIUM * CLAIMS_PER_BYTE }>(bytes),
        n if n <= MAX_WIRE_BYTES => decode::<T, { MAX_WIRE_BYTES * CLAIMS_PER_BYTE }>(bytes),
        n => Err(CodecError::TooLarge {
            bytes: n,
            limit: MAX_WIRE_BYTES,
        }),
    }
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
    /// Encodes the value for the wire; a value whose encoding is over the
    /// wire's limit (64 MiB) is [`CodecError::TooLarge`] (no peer would
    /// read it).
    fn to_wire(&self) -> Result<Vec<u8>, CodecError> {
        let bytes = bincode::serde::encode_to_vec(self, bincode::config::standard())
            .map_err(|e| CodecError::Encode(e.to_string()))?;
        if bytes.len() > MAX_WIRE_BYTES {
            return Err(CodecError::TooLarge {
                bytes: bytes.len(),
                limit: MAX_WIRE_BYTES,
            });
        }
        Ok(bytes)
    }

    /// Decodes a value from the wire; trailing bytes, or a length that
    /// claims more than the input holds, are [`CodecError::Decode`], and
    /// input over the wire's limit (64 MiB) is [`CodecError::TooLarge`].
    fn from_wire(bytes: &[u8]) -> Result<Self, CodecError> {
        let (value, read) = decode_bounded::<Self>(bytes)?;
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
