//! `pthread_join` and `pthread_detach` for WASI C libraries that lack them (Debian's
//! wasi-libc of 2022, which trueno's CI links against): Rust's std (1.96) references both
//! even when no thread is ever started. Threads cannot start under plain WASI, so neither
//! can be called on a real thread; both return ENOTSUP. Enabled only by the
//! `wasi-pthread-stubs` feature, so a libc that has them never meets a duplicate.

use std::ffi::c_void;

/// WASI's ENOTSUP.
const ENOTSUP: i32 = 58;

/// Joining needs a started thread, which WASI without threads never has.
#[unsafe(no_mangle)]
pub extern "C" fn pthread_join(_thread: usize, _retval: *mut *mut c_void) -> i32 {
    ENOTSUP
}

/// Detaching needs a started thread, which WASI without threads never has.
#[unsafe(no_mangle)]
pub extern "C" fn pthread_detach(_thread: usize) -> i32 {
    ENOTSUP
}
