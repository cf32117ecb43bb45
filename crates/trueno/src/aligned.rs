//! f32 storage that starts on a cache line, for the matrices trueno allocates itself.
//!
//! A `Vec<f32>` of a few megabytes comes from `mmap` through the C allocator, whose
//! header leaves the first element 16 bytes past a 64-byte line. The GEMM's 64-byte C
//! stores then each straddle two lines. Zen 5 VM, one thread, `gemm_vs_faer` with A, B
//! and C on lines (`ALIGN=1`) alternated three times with them as allocated: 512^3
//! 0.97-0.98x -> 0.98-0.99x faer, 256^3 1.00x -> 1.01-1.02x, 1024^3 0.98-0.99x -> 0.99-1.00x
//! (faer's own matrices are aligned so). A caller's `Vec` handed to
//! `Matrix::from_vec` is kept where it is: realigning it would copy it.

use std::fmt;
use std::ops::{Deref, DerefMut};

/// Floats a cache line holds: a buffer over-allocated by this many less one can always
/// start a line.
const LINE_FLOATS: usize = 16;

/// `len` floats at `buf[off..]`, with `off` chosen so the first sits on a 64-byte line
/// (or 0 for a buffer taken as it is).
pub(crate) struct AlignedF32 {
    buf: Vec<f32>,
    off: usize,
    len: usize,
}

impl AlignedF32 {
    /// `len` zeros starting on a cache line.
    pub(crate) fn zeros(len: usize) -> Self {
        // Saturating: a length past the address space fails in `vec!` as it did unpadded.
        let buf = vec![0.0f32; len.saturating_add(LINE_FLOATS - 1)];
        advise_huge_pages(&buf);
        // A pointer to f32 is 4-byte aligned, so a line starts within 15 floats; the
        // `min` only guards `align_offset`'s documented "cannot align" answer.
        let off = buf.as_ptr().align_offset(64).min(LINE_FLOATS - 1);
        AlignedF32 { buf, off, len }
    }

    /// `v` as it is (its alignment is the allocator's).
    pub(crate) fn from_vec(v: Vec<f32>) -> Self {
        let len = v.len();
        AlignedF32 {
            buf: v,
            off: 0,
            len,
        }
    }

    /// The floats as a `Vec` (moved down to its start when they were offset: one copy).
    pub(crate) fn into_vec(mut self) -> Vec<f32> {
        if self.off != 0 {
            self.buf.copy_within(self.off..self.off + self.len, 0);
        }
        self.buf.truncate(self.len);
        self.buf
    }
}

impl Deref for AlignedF32 {
    type Target = [f32];
    fn deref(&self) -> &[f32] {
        &self.buf[self.off..self.off + self.len]
    }
}

impl DerefMut for AlignedF32 {
    fn deref_mut(&mut self) -> &mut [f32] {
        &mut self.buf[self.off..self.off + self.len]
    }
}

/// Bytes from which a buffer is advised onto huge pages (`advise_huge_pages`): two huge
/// pages, so that at least one whole 2 MiB page lies within it wherever it starts.
#[cfg(target_os = "linux")]
const HUGE_PAGE_ADVICE_BYTES: usize = 4 << 20;

/// Asks Linux to back `buf` with transparent huge pages (`madvise(MADV_HUGEPAGE)`), before
/// its first touch, where it is `HUGE_PAGE_ADVICE_BYTES` or more. Where THP is `madvise`
/// (a common default) a buffer is otherwise on 4 KiB pages, and the GEMM's reads of a
/// row-major B far larger than L2 visit a new page every row: each prefetch of such a
/// row, and each first read of it, walks the page tables (nested under a VM's). Advice
/// only: the contents are untouched, and where THP is off or the call fails nothing
/// changes; a caller's own `Vec` (`Matrix::from_vec`) is not advised, as it may already
/// be touched. Emerald Rapids VM (THP `madvise`), one thread, session 75: `gemm-probe`
/// 128x11008x4096 with B's first-tile packing (`Block::next_beside_c`) 134.7-136.3 ->
/// 143.0-144.2 GFLOP/s (the samples on the instruction after each prefetch of B's next
/// panel halved); the packing pass alone 18.7 -> 16.5 ms; interleaved against faer,
/// `x·Wᵀ` 128x11008x4096 131.6-137.9 -> 142.7-143.6 GFLOP/s; 1024^3 and 2048^3 even.
fn advise_huge_pages(buf: &[f32]) {
    #[cfg(target_os = "linux")]
    {
        let bytes = std::mem::size_of_val(buf);
        if bytes < HUGE_PAGE_ADVICE_BYTES {
            return;
        }
        unsafe extern "C" {
            fn madvise(addr: *mut std::ffi::c_void, len: usize, advice: i32) -> i32;
        }
        const MADV_HUGEPAGE: i32 = 14;
        let start = buf.as_ptr() as usize;
        let page = start.next_multiple_of(4096);
        let len = (start + bytes).saturating_sub(page) / 4096 * 4096;
        // SAFETY: `[page, page + len)` lies within `buf`'s allocation (whole pages between
        // its first page boundary and its end), which this thread owns; MADV_HUGEPAGE only
        // tells the kernel how to back those pages and never changes what they hold. The
        // result is ignored: advice that fails leaves the buffer as it was.
        unsafe {
            madvise(page as *mut std::ffi::c_void, len, MADV_HUGEPAGE);
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = buf;
}

/// A clone starts on a line too, whatever the original's alignment.
impl Clone for AlignedF32 {
    fn clone(&self) -> Self {
        let mut c = AlignedF32::zeros(self.len);
        c.copy_from_slice(self);
        c
    }
}

impl PartialEq for AlignedF32 {
    fn eq(&self, other: &Self) -> bool {
        **self == **other
    }
}

impl fmt::Debug for AlignedF32 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        (**self).fmt(f)
    }
}

/// Whether `s` starts on a 64-byte line (for tests here and of the types built on this).
#[cfg(test)]
pub(crate) fn on_a_line(s: &[f32]) -> bool {
    (s.as_ptr() as usize).is_multiple_of(64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zeros_and_clones_start_on_a_line_at_every_length() {
        // Lengths around the over-allocation and a multi-page buffer (mmap'd by glibc,
        // whose header puts a plain Vec 16 bytes past a line).
        for len in [0, 1, 15, 16, 17, 1000, 1 << 20] {
            let z = AlignedF32::zeros(len);
            assert_eq!(z.len(), len);
            assert!(z.iter().all(|&v| v == 0.0));
            if len > 0 {
                assert!(on_a_line(&z), "{len}");
                assert!(on_a_line(&z.clone()), "clone {len}");
            }
        }
        let taken = AlignedF32::from_vec(vec![1.0; 1 << 20]);
        assert!(on_a_line(&taken.clone()));
    }

    #[test]
    fn contents_survive_writes_clones_and_the_way_back_to_a_vec() {
        let mut a = AlignedF32::zeros(37);
        a.iter_mut()
            .enumerate()
            .for_each(|(i, v)| *v = i as f32 - 3.5);
        let want: Vec<f32> = (0..37).map(|i| i as f32 - 3.5).collect();
        assert_eq!(&*a, &want[..]);
        assert_eq!(a.clone(), a);
        assert_ne!(AlignedF32::zeros(37), a);
        assert_eq!(format!("{a:?}"), format!("{want:?}"));
        assert_eq!(a.into_vec(), want);
        // A caller's Vec comes back as it went in, without a copy.
        let v = vec![2.0f32; 5];
        let at = v.as_ptr();
        let back = AlignedF32::from_vec(v).into_vec();
        assert_eq!((back.as_ptr(), back.len()), (at, 5));
        assert!(AlignedF32::zeros(0).into_vec().is_empty());
    }
}
