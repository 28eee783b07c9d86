//! Every default of delegation, in one place: the builders and configs
//! read them from here (each setter's docs say the value). A type's own
//! defaults stay with it — `Limits::default`, a gate's capacity (1), the
//! store's retention (`EnvelopeStore::DEFAULT_RETENTION`), the OpenAI
//! adapter's knobs (`OpenAiCompatible::builder`).

use std::time::Duration;

/// Live children at once: 3 (Loopl's value; see the hub's note on
/// choosing it).
pub(crate) const MAX_LIVE: usize = 3;

/// How deep children may nest: 1 (children cannot start children).
pub(crate) const MAX_DEPTH: u32 = 1;

/// The deepest `max_depth` a builder takes: 16. An event of a child that
/// deep is forwarded through a stack frame per level, and read back as
/// deep: a JSON transcript of 16 levels stays within serde_json's 128
/// (four of its levels to one of ours), and the wire's own limit is 128.
pub(crate) const DEPTH_CEILING: u32 = 16;

/// How long `use_agent run` and `result` wait inline before the child goes
/// on in the background: 45 s (Loopl's value for a local model).
pub(crate) const INLINE_WAIT: Duration = Duration::from_secs(45);

/// How many characters a delegation tool's description has at most, its
/// profile listing included: 1,024 — OpenAI and Azure OpenAI refuse a
/// longer one (400 `string_above_max_length`) on every call, so a parent
/// with a few long-described profiles failed every turn. Profiles past it
/// are named in the listing's last line as a count; the model lists them
/// all with `use_agent` action `agents`.
pub(crate) const TOOL_DESCRIPTION_CHARS: usize = 1024;

/// How many characters of a child's answer reach the parent's context in
/// one piece (a tool result or a wake): 8,000 (about 2,000 tokens). A
/// longer answer comes head and tail with a marker saying how much was
/// left out and how to read it by range (`use_agent` action `result` with
/// `offset`); the envelope keeps it whole.
pub(crate) const RESULT_BUDGET: usize = 8_000;

/// How long a child on another node may take to end once it was told to
/// stop, and to deliver a report found missing (a later one arrived): 30
/// s. Past it the parent's node ends it itself — `stopped`, or `failed`
/// for a report that never came (a gap held every report after it, the
/// turn open for ever).
pub(crate) const REMOTE_STOP_GRACE: Duration = Duration::from_secs(30);
