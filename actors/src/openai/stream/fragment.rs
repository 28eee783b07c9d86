//! Tool-call fragments merged into the calls they belong to, and what a
//! fragment starts: a piece of the held call's name, or another whole
//! call of the held call's function.

use serde_json::Value;

use super::{Assembler, CALL_CHARS, PartialCall, Slot};
use crate::openai::wire::ToolCallDeltaWire;

/// Whether `piece` continues the held call's name to (the start of) the
/// name of a tool the request offered, on a call with no arguments yet:
/// a name streamed in pieces (openai-python's accumulator joins them;
/// Gemini has sent `edit_ex`, then `isting_file`).
pub(super) fn continues_name(offered: &[String], held: &PartialCall, piece: &str) -> bool {
    held.arguments.is_empty()
        && offered.iter().any(|tool| {
            tool.strip_prefix(held.name.as_str())
                .is_some_and(|rest| rest.starts_with(piece))
        })
}

/// Whether a fragment naming the held call's own function, with no id or
/// the held call's own, opens another call: the held arguments are a
/// whole JSON object already and the fragment's open one (a gateway on
/// OpenRouter gives parallel calls one index and one id). Gemini's OpenAI-compatible endpoint (and
/// gateways before it) sends parallel calls of one function at `index: 0`
/// or none, each whole, with no id: glued on, every one of them was lost
/// in arguments that were no JSON, and the model read that its output had
/// been cut. A whole object cannot be continued into JSON.
pub(super) fn another_whole_call(held: &PartialCall, piece: Option<&Value>) -> bool {
    let opens = match piece {
        Some(Value::String(piece)) => piece.trim_start().starts_with('{'),
        Some(Value::Object(_)) => true,
        _ => false,
    };
    // Parsed only once the shape says an object closed, and never again
    // once that parse failed: every fragment parsing all that was held
    // made a long stream of them quadratic.
    if !opens || !held.shape.closed() || held.shape.broken.get() {
        return false;
    }
    #[cfg(test)]
    PARSES.with(|n| n.set(n.get() + 1));
    let whole = held.arguments.trim_start().starts_with('{')
        && serde_json::from_str::<serde::de::IgnoredAny>(&held.arguments).is_ok();
    held.shape.broken.set(!whole);
    whole
}

/// Where a call's arguments stand as JSON, read piece by piece: how deep
/// in brackets, whether inside a string. Enough to tell when a top-level
/// value has closed, in one pass over each piece.
#[derive(Debug, Default)]
pub(super) struct Shape {
    depth: u32,
    opened: bool,
    in_string: bool,
    escaped: bool,
    /// A parse found the arguments no whole JSON although closed.
    broken: std::cell::Cell<bool>,
}

impl Shape {
    /// Reads the next piece of the arguments.
    pub(super) fn feed(&mut self, piece: &str) {
        for byte in piece.bytes() {
            if self.in_string {
                match (self.escaped, byte) {
                    (true, _) => self.escaped = false,
                    (false, b'\\') => self.escaped = true,
                    (false, b'"') => self.in_string = false,
                    _ => {}
                }
                continue;
            }
            match byte {
                b'"' => self.in_string = true,
                b'{' | b'[' => {
                    self.depth = self.depth.saturating_add(1);
                    self.opened = true;
                }
                b'}' | b']' => self.depth = self.depth.saturating_sub(1),
                _ => {}
            }
        }
    }

    /// A bracket opened and every one has closed since, outside a string.
    pub(super) fn closed(&self) -> bool {
        self.opened && self.depth == 0 && !self.in_string
    }
}

#[cfg(test)]
thread_local! {
    /// How many times held arguments were parsed (the tests' count).
    pub(super) static PARSES: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// Fragments merged into the calls they belong to.
impl Assembler {
    /// Adds one fragment to the call it belongs to. The call is named by
    /// `index`; a server that omits it is followed by id (a new id starts a
    /// new call) or else the fragment continues the last call. A fragment
    /// that starts another call (a name, and a new id or another
    /// function's name than the held call's) starts a new call, under an
    /// index already held or with none: Ollama gives every parallel call
    /// `index: 0`, each whole in one fragment, and some gateways do so
    /// with no index or id at all — glued on, the second call's arguments
    /// made the first's no JSON (or, the first's empty, ran the first
    /// function with them), and the second was lost without a word. A
    /// name that continues the held one to an offered tool's (`search`,
    /// then `_files`, on a call with no arguments yet) is a piece of it:
    /// read as another call, the prefix ran as a tool of its own.
    pub(super) fn merge(&mut self, fragment: ToolCallDeltaWire) {
        let id = fragment.id.filter(|id| !id.is_empty());
        let name = fragment
            .function
            .as_ref()
            .and_then(|f| f.name.as_deref())
            .filter(|name| !name.is_empty());
        // Where a fragment with no index goes unless it starts another call.
        let routed = match (&fragment.index, &id) {
            (Some(_), _) => None,
            (None, Some(id)) => self.slot_of(id),
            (None, None) => self.last_slot,
        };
        let offered = &self.offered;
        let piece = fragment
            .function
            .as_ref()
            .and_then(|f| f.arguments.as_ref());
        let starts_another = |held: &PartialCall| {
            name.is_some_and(|name| {
                (!held.id.is_empty() && id.as_ref().is_some_and(|id| *id != held.id))
                    || (!held.name.is_empty()
                        && held.name != name
                        && !continues_name(offered, held, name))
                    || (id.as_ref().is_none_or(|id| *id == held.id)
                        && held.name == name
                        && another_whole_call(held, piece))
            })
        };
        let slot = match fragment.index {
            Some(index) => match self.calls.range((index, 0)..=(index, u32::MAX)).next_back() {
                Some((&(_, generation), held)) if starts_another(held) => (index, generation + 1),
                Some((&slot, _)) => slot,
                None => (index, 0),
            },
            None => match routed {
                Some(slot) if !self.calls.get(&slot).is_some_and(starts_another) => slot,
                // A new id, or another function under a repeated or absent
                // one: after the last call.
                _ => self.next_slot(),
            },
        };
        self.last_slot = Some(slot);
        // What the call holds is output too, counted as it is held — its
        // name, id and provider data as its arguments are: a server
        // sending calls with no arguments (an index each, or long names)
        // and no finish had them held, uncounted, until the wall clock
        // (12 bytes held for each byte of `{"index":N}`).
        let mut added = 0;
        let call = match self.calls.entry(slot) {
            std::collections::btree_map::Entry::Occupied(held) => held.into_mut(),
            std::collections::btree_map::Entry::Vacant(free) => {
                added += CALL_CHARS;
                free.insert(PartialCall::default())
            }
        };
        if let Some(id) = id
            && call.id.is_empty()
        {
            added += id.chars().count();
            // The latest call of an id: a later fragment under it goes on
            // with the call that id last started.
            self.by_id.insert(id.clone(), slot);
            call.id = id;
        }
        if call.extra_content.is_none() {
            call.extra_content = fragment
                .extra_content
                .filter(|v| !v.is_null())
                .map(|v| v.to_string().into_boxed_str());
            added += call.extra_content.as_ref().map_or(0, |v| v.chars().count());
        }
        if let Some(function) = fragment.function {
            if let Some(name) = function.name.filter(|n| !n.is_empty()) {
                if call.name.is_empty() {
                    added += name.chars().count();
                    call.name = name;
                } else if call.name != name && continues_name(&self.offered, call, &name) {
                    added += name.chars().count();
                    call.name.push_str(&name);
                }
            }
            added += Self::arguments(call, function.arguments);
        }
        self.answer_chars += added;
        self.hidden += added;
    }

    /// The call's arguments grown by a fragment's: how many characters.
    fn arguments(call: &mut PartialCall, arguments: Option<Value>) -> usize {
        match arguments {
            None | Some(Value::Null) => 0,
            Some(Value::String(piece)) => {
                call.shape.feed(&piece);
                call.arguments.push_str(&piece);
                piece.chars().count()
            }
            Some(other) => {
                let piece = other.to_string();
                call.shape.feed(&piece);
                call.arguments.push_str(&piece);
                piece.chars().count()
            }
        }
    }

    /// The slot after the last call held; a server's index may be the
    /// largest there is (a new generation there).
    fn next_slot(&self) -> Slot {
        match self.calls.keys().next_back() {
            None => (0, 0),
            Some(&(index, generation)) => match index.checked_add(1) {
                Some(next) => (next, 0),
                None => (index, generation.saturating_add(1)),
            },
        }
    }

    /// The slot of the call `id` names, if one was given it.
    fn slot_of(&mut self, id: &str) -> Option<Slot> {
        #[cfg(test)]
        {
            self.id_lookups += 1;
        }
        self.by_id.get(id).copied()
    }
}
