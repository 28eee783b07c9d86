//! Host code's panics, read where they were caught: a caught panic's
//! message, and its payload (or a value of the host's that panicked as it
//! was dropped) dropped inside a guard of its own.

use std::panic::AssertUnwindSafe;

/// Drops `value` inside a panic guard (host code's `Drop`: a tool's
/// future, a model's stream); a panic there is logged, naming `what`.
pub(crate) fn drop_guarded<T>(value: Option<T>, what: &str) {
    if let Some(value) = value
        && let Err(panic) = std::panic::catch_unwind(AssertUnwindSafe(move || drop(value)))
    {
        // Read outside the macro: a disabled level reads no field, and the
        // payload would be dropped unread, outside every guard.
        let panic = panic_text(panic);
        tracing::warn!(%panic, "{what} panicked as it was dropped");
    }
}

/// The message of a caught panic, for error sentences and logs; its
/// payload is dropped here, inside a guard. Host code can panic with any
/// value (`std::panic::panic_any`), and one whose `Drop` panics, dropped
/// where the guard that caught it returns, unwound out of that guard — a
/// tool's crash became the whole turn's, a turn's took its task down. A
/// panic of that drop is not dropped in turn (its payload may be another
/// such value): it is forgotten, a leak of one value per such panic.
pub(crate) fn panic_text(panic: Box<dyn std::any::Any + Send>) -> String {
    let text = panic_message(panic.as_ref());
    dispose(panic);
    text
}

/// Drops a caught panic's payload inside a guard (see [`panic_text`]).
pub(crate) fn dispose(panic: Box<dyn std::any::Any + Send>) {
    if let Err(again) = std::panic::catch_unwind(AssertUnwindSafe(move || drop(panic))) {
        std::mem::forget(again);
    }
}

/// The message of a panic payload.
fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = panic.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = panic.downcast_ref::<String>() {
        s.clone()
    } else {
        "panic with a non-text payload".to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A payload whose drop panics with another such payload, `0` deep.
    struct Nested(u8);

    impl Drop for Nested {
        fn drop(&mut self) {
            if let Some(deeper) = self.0.checked_sub(1) {
                std::panic::panic_any(Nested(deeper));
            }
        }
    }

    /// The panic of a payload's drop is not dropped in turn (its payload
    /// may panic as it drops, and so on): read, and nothing unwinds out.
    #[test]
    fn a_payload_whose_drop_panics_with_another_stays_inside() {
        let caught = std::panic::catch_unwind(|| std::panic::panic_any(Nested(3))).unwrap_err();
        let read = std::panic::catch_unwind(AssertUnwindSafe(|| panic_text(caught)));
        assert_eq!(read.ok().as_deref(), Some("panic with a non-text payload"));
        let mut value = Some(Nested(3));
        let dropped =
            std::panic::catch_unwind(AssertUnwindSafe(|| drop_guarded(value.take(), "x")));
        assert!(dropped.is_ok());
    }
}
