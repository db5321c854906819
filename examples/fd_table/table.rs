//! A fixed-size file-descriptor table over a typesafe-by-RCU pool: the kernel's
//! `fget`/`fput` on `SLAB_TYPESAFE_BY_RCU` files, without a heap. `core` only: the host
//! example (`examples/fd_table/main.rs`) and the QEMU demo firmware share it.
//!
//! Writers (`open`, `close`, `dup`) are serialised among themselves (the kernel holds
//! `files->file_lock`); readers (`fget`) run anywhere, concurrently, inside an RCU read
//! section: thread code, another hart, an interrupt handler.

#![allow(dead_code, unreachable_pub)]

use core::sync::atomic::Ordering::Relaxed;
use portable_atomic::AtomicU32;
use rcuref::pool::{Handle, Pool, PoolCell};
use rcuref::rcu::Guard;

/// Descriptors per table.
pub const FDS: usize = 8;
/// Open file descriptions the pool can hold (dup shares one).
pub const FILES: usize = 12;

const OPEN: u32 = 0x0BE2_0BE2;
const CLOSED: u32 = 0xC105_ED00;

/// An open file description. `check == id * id` and `state == OPEN` for as long as
/// anyone holds a reference: readers verify both.
pub struct File {
    pub id: u32,
    check: u32,
    state: AtomicU32,
}

impl Drop for File {
    fn drop(&mut self) {
        self.state.store(CLOSED, Relaxed);
    }
}

/// A counted reference to an open file (what `fget` returns; dropping it is `fput`).
pub type FileHandle = Handle<'static, File, FILES>;

/// Why an fd operation failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FdError {
    /// No such open descriptor.
    BadFd,
    /// Every descriptor is in use.
    TooManyFds,
    /// The pool has no free file description.
    NoFiles,
}

/// What the table has seen (all counters are relaxed: statistics, not synchronisation).
pub struct Stats {
    pub opens: AtomicU32,
    pub closes: AtomicU32,
    pub dups: AtomicU32,
    pub fget_hits: AtomicU32,
    pub fget_misses: AtomicU32,
    pub violations: AtomicU32,
}

impl Stats {
    pub const fn new() -> Self {
        Stats {
            opens: AtomicU32::new(0),
            closes: AtomicU32::new(0),
            dups: AtomicU32::new(0),
            fget_hits: AtomicU32::new(0),
            fget_misses: AtomicU32::new(0),
            violations: AtomicU32::new(0),
        }
    }
}

/// The table: descriptors are `PoolCell`s, each owning one reference to its file.
pub struct FdTable {
    pub pool: &'static Pool<File, FILES>,
    fds: &'static [PoolCell<'static, File, FILES>; FDS],
    next_id: AtomicU32,
    pub stats: Stats,
}

/// Declares the statics of one table and evaluates to an `FdTable`.
#[macro_export]
macro_rules! fd_table {
    () => {{
        static POOL: rcuref::pool::Pool<$crate::table::File, { $crate::table::FILES }> =
            rcuref::pool::Pool::new();
        static FDS: [rcuref::pool::PoolCell<
            'static,
            $crate::table::File,
            { $crate::table::FILES },
        >; $crate::table::FDS] = [const { rcuref::pool::PoolCell::new(&POOL) }; $crate::table::FDS];
        $crate::table::FdTable::new(&POOL, &FDS)
    }};
}

impl FdTable {
    pub const fn new(
        pool: &'static Pool<File, FILES>,
        fds: &'static [PoolCell<'static, File, FILES>; FDS],
    ) -> Self {
        FdTable {
            pool,
            fds,
            next_id: AtomicU32::new(1),
            stats: Stats::new(),
        }
    }

    fn free_fd(&self) -> Option<usize> {
        self.fds.iter().position(|c| c.is_empty())
    }

    /// Opens a new file on the lowest free descriptor (writer side).
    pub fn open(&self) -> Result<usize, FdError> {
        let fd = self.free_fd().ok_or(FdError::TooManyFds)?;
        let id = self.next_id.fetch_add(1, Relaxed);
        let file = File {
            id,
            check: id.wrapping_mul(id),
            state: AtomicU32::new(OPEN),
        };
        let h = self.pool.alloc(file).map_err(|_| FdError::NoFiles)?;
        self.fds[fd].replace(Some(h)); // was empty: nothing comes back
        self.stats.opens.fetch_add(1, Relaxed);
        Ok(fd)
    }

    /// Closes `fd` (writer side): the descriptor's reference is dropped; the file is
    /// destroyed when the last reader's `fput` (handle drop) follows.
    pub fn close(&self, fd: usize) -> Result<(), FdError> {
        let h = self
            .fds
            .get(fd)
            .and_then(|c| c.take())
            .ok_or(FdError::BadFd)?;
        drop(h);
        self.stats.closes.fetch_add(1, Relaxed);
        Ok(())
    }

    /// Duplicates `fd` onto the lowest free descriptor (writer side): both name one file.
    pub fn dup(&self, fd: usize, guard: &Guard<'_, '_, 4>) -> Result<usize, FdError> {
        let h = self.fget(fd, guard).ok_or(FdError::BadFd)?;
        let new = self.free_fd().ok_or(FdError::TooManyFds)?;
        self.fds[new].replace(Some(h));
        self.stats.dups.fetch_add(1, Relaxed);
        Ok(new)
    }

    /// `fget`: a counted reference to the file on `fd`, looked up without locks.
    pub fn fget(&self, fd: usize, guard: &Guard<'_, '_, 4>) -> Option<FileHandle> {
        self.fds.get(fd)?.get(guard)
    }

    /// A reader's full check of one descriptor: `fget`, verify, `fput`.
    pub fn fget_and_check(&self, fd: usize, guard: &Guard<'_, '_, 4>) {
        match self.fget(fd, guard) {
            Some(f) => {
                self.stats.fget_hits.fetch_add(1, Relaxed);
                if f.check != f.id.wrapping_mul(f.id) || f.state.load(Relaxed) != OPEN {
                    self.stats.violations.fetch_add(1, Relaxed);
                }
            } // fput: the handle drops here
            None => {
                self.stats.fget_misses.fetch_add(1, Relaxed);
            }
        }
    }

    /// One step of a churning writer, pseudo-random: open, dup, or close (twice as
    /// likely, so the table hovers around half full and every operation succeeds often).
    pub fn churn(&self, step: u32, guard_for_dup: impl FnOnce(&dyn Fn(&Guard<'_, '_, 4>))) {
        let r = step.wrapping_mul(2_654_435_761) >> 16;
        let fd = (r as usize) % FDS;
        match r % 4 {
            0 => {
                let _ = self.open();
            }
            1 => guard_for_dup(&|g| {
                let _ = self.dup(fd, g);
            }),
            _ => {
                let _ = self.close(fd);
            }
        }
    }

    /// Closes everything (end of run).
    pub fn close_all(&self) {
        for fd in 0..FDS {
            let _ = self.close(fd);
        }
    }

    pub fn get(&self, a: &AtomicU32) -> u32 {
        a.load(Relaxed)
    }
}
