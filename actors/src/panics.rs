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
