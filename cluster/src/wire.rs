//! What crosses between nodes: ractor_cluster messages whose only fields
//! are our payloads as bytes (so ractor_cluster's own decoders, which
//! panic on bad input, only ever copy bytes), decoded here into a
//! `Result`.

use ractor::RpcReplyPort;
use ractor_cluster::RactorClusterMessage;
use subagents_messages::codec::{CodecError, Wire};
use subagents_messages::remote::{ReportBody, RunReport, RunRequest, RunSpec};

/// The `pg` group of a node's host: one per node name.
pub(crate) fn host_group(node: &str) -> String {
    format!("subagents.host.{node}")
}

/// The `pg` group of a node's inbox.
pub(crate) fn inbox_group(node: &str) -> String {
    format!("subagents.inbox.{node}")
}

/// What a node host is told (by another node's link).
#[derive(RactorClusterMessage)]
pub(crate) enum HostMsg {
    /// Start a run: its header (the asking node, the run's key and its
    /// [token](fresh_token)) and
    /// its [`RunSpec`], each as bytes — apart, so a node that cannot read
    /// the spec (another version's, a forged one) still knows whom to
    /// tell ([`decode_start`]).
    Start(Vec<u8>, Vec<u8>),
    /// A request for a run: `(asking node, key, token, RunRequest)`, as
    /// bytes.
    Request(Vec<u8>),
    /// How many runs are live here (the count `Placement::LeastLoaded`
    /// reads; the heartbeat asks [`HostMsg::Hello`], which says it too).
    #[rpc]
    Live(RpcReplyPort<u64>),
    /// Who answers: a [`Hello`] as bytes — the wire's version, this
    /// process's incarnation, the live count. Asked at `connect` (a node
    /// of another version, which never answers or answers another
    /// version, is refused there: an earlier one dropped every start in
    /// silence, each child hanging for its wall clock) and at every
    /// heartbeat (a node restarted under its name is a lost one).
    #[rpc]
    Hello(RpcReplyPort<Vec<u8>>),
    /// The results kept here of runs whose parent's node was lost: a
    /// `Vec<KeptRun>`, as bytes.
    #[rpc]
    Kept(RpcReplyPort<Vec<u8>>),
    /// Sent by this node's own session watcher: the session of a node
    /// closed — its runs here are orphans now. Sealed ([`local_seal`]): a
    /// variant of an enum any node can cast to the host's `pg` group, and
    /// any holder of the cookie orphaned another node's runs with it
    /// (their reports kept here, the parent's children `running` for
    /// ever). `(node, seal)` as bytes, read by [`unseal`]: as a `String`
    /// and a `u64`, ractor's own decoders read them — which panic on a
    /// short or non-UTF-8 field, so one forged frame ran the panic hook
    /// (or, built with `panic = "abort"`, ended the node). Build it with
    /// [`HostMsg::parent_lost`].
    ParentLost(Vec<u8>),
}

impl HostMsg {
    /// The watcher's word that node `node`'s session closed, sealed.
    pub(crate) fn parent_lost(node: String) -> Self {
        Self::ParentLost(seal(node))
    }
}

/// The result of a run kept on its node after its parent's node was lost
/// (the parent's policy was `Detach`), for fetching.
#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, PartialEq)]
pub struct KeptRun {
    /// The node whose child it was.
    pub parent_node: String,
    /// The child's id there.
    pub id: subagents_messages::AgentId,
    /// How its run ended.
    pub result: subagents_messages::AgentResult,
    /// Its whole conversation.
    pub conversation: Vec<subagents_messages::ChatMessage>,
}

/// What an inbox is told (by another node's host).
#[derive(RactorClusterMessage)]
pub(crate) enum InboxMsg {
    /// A report about a run: its header (the run's key, the report's
    /// number and the run's [token](fresh_token)) and its [`ReportBody`],
    /// each as bytes — apart, so a body
    /// this node cannot read (another version's event) still fills its
    /// place in the run's reports ([`decode_report`]).
    Report(Vec<u8>, Vec<u8>),
    /// Sent by this node's own session watcher and heartbeats: node (the
    /// first `String`; its incarnation, if one) is lost, why (the second);
    /// its runs end lost —
    /// after the reports already in this mailbox, which were received
    /// before it. Sealed ([`local_seal`]): any holder of the cookie failed
    /// every child on a healthy node with it, in words of its own that
    /// reached the parent's model. `((node, incarnation, why), seal)` as bytes, read by
    /// [`unseal`] (see [`HostMsg::ParentLost`]). Build it with
    /// [`InboxMsg::node_lost`].
    NodeLost(Vec<u8>),
}

impl InboxMsg {
    /// This node's word that node `node` — its process `incarnation`, or
    /// every one under its name — is lost (`why`), sealed.
    pub(crate) fn node_lost(node: String, incarnation: Option<u64>, why: String) -> Self {
        Self::NodeLost(seal((node, incarnation, why)))
    }
}

/// A word only this node sends itself, with its [`local_seal`], as bytes
/// (empty, which [`unseal`] refuses, if it could not be encoded: a word
/// over the wire's limit).
fn seal<T: Wire>(word: T) -> Vec<u8> {
    (word, local_seal()).to_wire().unwrap_or_else(|error| {
        tracing::warn!(%error, "a word of this node to itself could not be encoded");
        Vec::new()
    })
}

/// A sealed word, if this node sent it: bytes that do not read, or carry
/// another seal (another node's forgery), are `None`, logged.
pub(crate) fn unseal<T: Wire>(bytes: &[u8]) -> Option<T> {
    match <(T, u64)>::from_wire(bytes) {
        Ok((word, seal)) if seal == local_seal() => Some(word),
        Ok(_) => {
            tracing::warn!("a forged word that a node was lost, from another node: ignored");
            None
        }
        Err(error) => {
            tracing::warn!(%error, "a word that a node was lost that does not read: ignored");
            None
        }
    }
}

/// A number this process draws once and never sends: the messages only
/// this node may send itself ([`HostMsg::ParentLost`],
/// [`InboxMsg::NodeLost`]) carry it, and one that does not is another
/// node's forgery — its actors are in `pg` groups every connected node
/// sees, and ractor_cluster decodes every variant of their enums from the
/// wire.
pub(crate) fn local_seal() -> u64 {
    static SEAL: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *SEAL.get_or_init(fresh_token)
}

/// The version of what crosses between nodes: a node answers
/// [`HostMsg::Hello`] with it, and a link to a node of another is refused.
/// Raised whenever a message's shape changes.
pub(crate) const WIRE_VERSION: u32 = 4;

/// A node's answer to [`HostMsg::Hello`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(crate) struct Hello {
    /// [`WIRE_VERSION`] of the node.
    pub(crate) version: u32,
    /// Drawn when the node started ([`fresh_token`]): another under the
    /// same name is another process — the runs of the first are lost.
    pub(crate) incarnation: u64,
    /// How many runs are live there.
    pub(crate) live: u64,
}

/// Why a hello's bytes were not read.
#[derive(Debug)]
pub(crate) enum Unread {
    /// Of another shape, from a node of another version (its first
    /// field): a later version's hello may have grown.
    Version(u32),
    /// Not a hello of any version.
    Bytes(CodecError),
}

/// A host's answer to [`HostMsg::Hello`]. One of another shape is read
/// for its version first (a version's first field, whatever follows):
/// read whole or not at all, a later version's grown hello was taken for
/// no answer, and after 5 s of asking the node was said to be an
/// *earlier* version.
pub(crate) fn read_hello(bytes: &[u8]) -> Result<Hello, Unread> {
    Hello::from_wire(bytes).map_err(|error| {
        // A `u32` is 1, 3 or 5 bytes on the wire (varint).
        let version = [1, 3, 5]
            .into_iter()
            .find_map(|n| u32::from_wire(bytes.get(..n)?).ok());
        match version {
            Some(version) if version != WIRE_VERSION => Unread::Version(version),
            _ => Unread::Bytes(error),
        }
    })
}

/// A new run's token: drawn at random by the asking node for each run,
/// sent with its start, and carried by every report and request of it. A
/// message without it — another run's (a key of an earlier process), a
/// forged one from any holder of the cookie — cannot speak for the run:
/// keys are small numbers anyone can guess. Not a secret from whoever
/// reads the traffic (the cluster's wire is not encrypted).
pub(crate) fn fresh_token() -> u64 {
    use std::hash::BuildHasher;
    use std::sync::atomic::{AtomicU64, Ordering};
    static DRAWN: AtomicU64 = AtomicU64::new(0);
    // SipHash under keys drawn from the OS for this process.
    std::collections::hash_map::RandomState::new().hash_one(DRAWN.fetch_add(1, Ordering::Relaxed))
}

/// A run to start, the node whose inbox takes its reports, the run's
/// token and the asking node's incarnation.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Start {
    pub(crate) spec: RunSpec,
    pub(crate) reply_to: String,
    pub(crate) token: u64,
    /// The asking node's [`Hello::incarnation`]: a start from another
    /// than its earlier runs' is from a restarted process — those runs
    /// are orphans.
    pub(crate) incarnation: u64,
}

/// The message that starts `spec` on a node, its reports to `reply_to`
/// (of `incarnation`) under `token`.
pub(crate) fn encode_start(
    spec: &RunSpec,
    reply_to: &str,
    token: u64,
    incarnation: u64,
) -> Result<HostMsg, CodecError> {
    let header = (reply_to.to_owned(), spec.key, token, incarnation).to_wire()?;
    Ok(HostMsg::Start(header, spec.to_wire()?))
}

/// A start this node could not read, and whom to tell when its header
/// was read (the spec was not: another version's, a forged one).
#[derive(Debug)]
pub(crate) struct UnreadStart {
    /// The asking node, the run's key and its token, when they were read.
    pub(crate) header: Option<(String, u64, u64)>,
    /// Why it could not be read.
    pub(crate) error: CodecError,
}

/// A [`HostMsg::Start`]'s two parts, read.
pub(crate) fn decode_start(header: &[u8], spec: &[u8]) -> Result<Start, UnreadStart> {
    // An earlier version's header has no incarnation (0: not known). Its
    // start is read, not dropped: that node cannot read a refusal of its
    // own header, and each of its children hung for its wall clock.
    let (reply_to, key, token, incarnation) = <(String, u64, u64, u64)>::from_wire(header)
        .or_else(|_| <(String, u64, u64)>::from_wire(header).map(|(r, k, t)| (r, k, t, 0)))
        .map_err(|error| UnreadStart {
            header: None,
            error,
        })?;
    let error = match RunSpec::from_wire(spec) {
        Ok(spec) if spec.key == key => {
            return Ok(Start {
                spec,
                reply_to,
                token,
                incarnation,
            });
        }
        Ok(spec) => CodecError::Decode(format!(
            "the run's key {} is not its header's {key}",
            spec.key
        )),
        Err(error) => error,
    };
    Err(UnreadStart {
        header: Some((reply_to, key, token)),
        error,
    })
}

/// A request from node `from` for its run `key`, under its `token`.
pub(crate) fn encode_request(
    from: &str,
    key: u64,
    token: u64,
    request: &RunRequest,
) -> Result<Vec<u8>, CodecError> {
    (from.to_owned(), key, token, request.clone()).to_wire()
}

/// A request read: `(asking node, key, token, request)`.
pub(crate) type Request = (String, u64, u64, RunRequest);

pub(crate) fn decode_request(bytes: &[u8]) -> Result<Request, CodecError> {
    Request::from_wire(bytes)
}

/// The message that carries `report` of the run under `token`; an error
/// names what could not be encoded (its body: the header is three
/// numbers).
pub(crate) fn encode_report(report: &RunReport, token: u64) -> Result<InboxMsg, CodecError> {
    let header = (report.key, report.seq, token).to_wire()?;
    Ok(InboxMsg::Report(header, report.body.to_wire()?))
}

/// A report this node could not read, and which run and place it was
/// when its header was read (its body was not).
#[derive(Debug)]
pub(crate) struct UnreadReport {
    /// The run's key, the report's number and the run's token, when they
    /// were read.
    pub(crate) header: Option<(u64, u64, u64)>,
    /// Why it could not be read.
    pub(crate) error: CodecError,
}

/// An [`InboxMsg::Report`]'s two parts, read: the report and its run's
/// token.
pub(crate) fn decode_report(header: &[u8], body: &[u8]) -> Result<(RunReport, u64), UnreadReport> {
    let (key, seq, token) = <(u64, u64, u64)>::from_wire(header).map_err(|error| UnreadReport {
        header: None,
        error,
    })?;
    match ReportBody::from_wire(body) {
        Ok(body) => Ok((RunReport { key, seq, body }, token)),
        Err(error) => Err(UnreadReport {
            header: Some((key, seq, token)),
            error,
        }),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use subagents_messages::{AgentId, Limits};

    #[test]
    fn payloads_round_trip_and_bad_bytes_are_errors() {
        let spec = RunSpec {
            key: 3,
            id: AgentId::new("agent_1"),
            system_prompt: "Worker".into(),
            input: "go".into(),
            followups: Vec::new(),
            conversation: Vec::new(),
            model: "scripted".into(),
            tools: vec!["sleep".into()],
            limits: Limits::default(),
            depth: 1,
            options: Default::default(),
            keep_if_orphaned: false,
            approvals_after: 0,
        };
        let HostMsg::Start(header, bytes) = encode_start(&spec, "a", 9, 1).unwrap() else {
            unreachable!("a start")
        };
        let start = decode_start(&header, &bytes).unwrap();
        assert_eq!(start.spec, spec);
        assert_eq!(start.reply_to, "a");
        assert_eq!(start.token, 9);
        assert_eq!(start.incarnation, 1);
        // A spec this node cannot read: whom to tell is still known.
        let unread = decode_start(&header, &bytes[..bytes.len() / 2]).unwrap_err();
        assert_eq!(unread.header, Some(("a".to_owned(), 3, 9)));
        let other = RunSpec { key: 4, ..spec };
        let unread = decode_start(&header, &other.to_wire().unwrap()).unwrap_err();
        assert!(
            unread.error.to_string().contains("key 4"),
            "{}",
            unread.error
        );
        assert_eq!(decode_start(&bytes, &header).unwrap_err().header, None);
        // An earlier version's header (no incarnation) is read, as 0: its
        // node could not read a refusal, and its child hung.
        let earlier = ("a".to_owned(), 3u64, 9u64).to_wire().unwrap();
        let start = decode_start(&earlier, &bytes).unwrap();
        assert_eq!(
            (start.reply_to.as_str(), start.token, start.incarnation),
            ("a", 9, 0)
        );
        let request = encode_request("a", 3, 9, &RunRequest::Stop).unwrap();
        assert_eq!(
            decode_request(&request).unwrap(),
            ("a".to_owned(), 3, 9, RunRequest::Stop)
        );
        assert_ne!(fresh_token(), fresh_token());
        for bad in [&bytes[..bytes.len() / 2], &[0xff; 9][..], &[][..]] {
            assert!(decode_start(bad, &bytes).is_err());
            assert!(decode_report(bad, bad).is_err());
        }
        assert!(decode_request(&request[..1]).is_err());
    }

    /// A frame for a sealed variant with a short seal: the shape the
    /// sealed words had (`ParentLost(String, u64)`, `NodeLost(String,
    /// String, u64)`), whose fields ractor's own decoders read.
    #[derive(RactorClusterMessage)]
    enum Short {
        ParentLost(String, Vec<u8>),
        NodeLost(String, String, Vec<u8>),
    }

    /// Forged across nodes (review: the cluster as foreign input): the
    /// sealed words' fields were a `String` and a `u64`, decoded by
    /// ractor's `BytesConvertable` — `copy_from_slice(&bytes[..8])`, a
    /// `from_utf8(..).unwrap()` — so a frame from any holder of the
    /// cookie with a one-byte seal panicked in the decoder: caught by
    /// ractor_cluster, but through the panic hook (a host's crash
    /// reporter, or one that exits), and with `panic = "abort"` the node
    /// ended. The words are bytes our codec reads: no panic, and what
    /// does not read or bears another seal is no word.
    #[test]
    fn a_forged_sealed_word_is_no_panic_and_no_word() {
        use ractor::Message;
        use std::sync::atomic::{AtomicUsize, Ordering};
        static PANICS: AtomicUsize = AtomicUsize::new(0);
        let here = std::thread::current().id();
        let hook = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if std::thread::current().id() == here {
                PANICS.fetch_add(1, Ordering::SeqCst);
            } else {
                hook(info);
            }
        }));
        let host = Short::ParentLost("a".into(), vec![1]).serialize().unwrap();
        let inbox = Short::NodeLost("b".into(), "why".into(), vec![1]).serialize();
        let host = <HostMsg as Message>::deserialize(host);
        let inbox = <InboxMsg as Message>::deserialize(inbox.unwrap());
        assert_eq!(PANICS.load(Ordering::SeqCst), 0, "a decoder panicked");
        assert!(host.is_err() && inbox.is_err());
        // Bytes that read, under another seal or none: no word.
        let forged = ("a".to_owned(), local_seal().wrapping_add(1))
            .to_wire()
            .unwrap();
        assert_eq!(unseal::<String>(&forged), None);
        assert_eq!(unseal::<String>(&[0xff; 3]), None);
        let HostMsg::ParentLost(sealed) = HostMsg::parent_lost("a".into()) else {
            unreachable!("a parent lost")
        };
        assert_eq!(unseal::<String>(&sealed).as_deref(), Some("a"));
        let InboxMsg::NodeLost(sealed) = InboxMsg::node_lost("b".into(), Some(5), "gone".into())
        else {
            unreachable!("a node lost")
        };
        let word = unseal::<(String, Option<u64>, String)>(&sealed);
        assert_eq!(word, Some(("b".to_owned(), Some(5), "gone".to_owned())));
    }
}
