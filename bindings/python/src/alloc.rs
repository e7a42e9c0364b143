//! The module's global allocator: mimalloc, asked for plain blocks whenever they are
//! aligned enough already.
//!
//! `mimalloc::MiMalloc` sends every request through `mi_malloc_aligned`, even for the
//! 1- and 8-byte alignments of strings, vectors and maps. Its fast path only works when
//! the current page happens to have a free block; otherwise a size that is not a power of
//! two (a 48-byte map entry, a 24-byte string) takes the over-allocating path, which
//! wastes memory and costs several times the instructions. Every mimalloc block is at
//! least 8-byte aligned (blocks are multiples of 8 bytes from a 16-byte aligned page
//! start), so up to that alignment the plain calls give the same guarantee, as Rust's own
//! `System` allocator does with libc's `malloc`.

use std::alloc::{GlobalAlloc, Layout};
use std::ffi::c_void;

/// The largest alignment every mimalloc block has.
pub const PLAIN_ALIGN: usize = 8;

extern "C" {
    // Linked from libmimalloc-sys (through the `mimalloc` crate).
    fn mi_malloc(size: usize) -> *mut c_void;
    fn mi_zalloc(size: usize) -> *mut c_void;
    fn mi_realloc(p: *mut c_void, newsize: usize) -> *mut c_void;
    fn mi_free(p: *mut c_void);
}

/// mimalloc, plain calls up to [`PLAIN_ALIGN`], `mimalloc::MiMalloc` above it.
pub struct Mi;

unsafe impl GlobalAlloc for Mi {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if layout.align() <= PLAIN_ALIGN {
            mi_malloc(layout.size()).cast()
        } else {
            mimalloc::MiMalloc.alloc(layout)
        }
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if layout.align() <= PLAIN_ALIGN {
            mi_zalloc(layout.size()).cast()
        } else {
            mimalloc::MiMalloc.alloc_zeroed(layout)
        }
    }

    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, _layout: Layout) {
        mi_free(ptr.cast());
    }

    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if layout.align() <= PLAIN_ALIGN {
            mi_realloc(ptr.cast(), new_size).cast()
        } else {
            mimalloc::MiMalloc.realloc(ptr, layout, new_size)
        }
    }
}
