//! A two-level name tree (directories of files), looked up by path, in two versions:
//! RCU + typesafe pool (readers take no lock) and `RwLock` (readers take the read lock).
//! The kernfs (`kernfs_dop_revalidate`) and proc (`pid_revalidate`) seeds moved exactly
//! this kind of lookup from a reader-writer semaphore to RCU.

#![allow(dead_code, unreachable_pub)]

use rcuref::{Guard, Pool, PoolCell};
use std::sync::RwLock;

pub const DIRS: usize = 8;
pub const FILES_PER_DIR: usize = 8;
pub const NODES: usize = 128;

/// A name of at most 15 bytes, stored inline (no heap in the RCU version).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Name {
    len: u8,
    bytes: [u8; 15],
}

impl Name {
    pub fn new(s: &str) -> Self {
        let mut bytes = [0u8; 15];
        let n = s.len().min(15);
        bytes[..n].copy_from_slice(&s.as_bytes()[..n]);
        Name {
            len: n as u8,
            bytes,
        }
    }
    pub fn is(&self, s: &str) -> bool {
        &self.bytes[..self.len as usize] == s.as_bytes()
    }
}

/// A directory entry: a name and the inode number it resolves to.
pub struct Node {
    pub name: Name,
    pub ino: u32,
}

/// The RCU version: every entry is a `PoolCell`; lookups run inside a read section.
pub struct RcuTree {
    pool: &'static Pool<Node, NODES>,
    dirs: &'static [PoolCell<'static, Node, NODES>; DIRS],
    files: &'static [[PoolCell<'static, Node, NODES>; FILES_PER_DIR]; DIRS],
}

/// Declares the statics of one RCU tree and evaluates to an `RcuTree`.
#[macro_export]
macro_rules! rcu_tree {
    () => {{
        use $crate::tree::{Node, DIRS, FILES_PER_DIR, NODES};
        static POOL: rcuref::Pool<Node, NODES> = rcuref::Pool::new();
        static D: [rcuref::PoolCell<'static, Node, NODES>; DIRS] =
            [const { rcuref::PoolCell::new(&POOL) }; DIRS];
        static F: [[rcuref::PoolCell<'static, Node, NODES>; FILES_PER_DIR]; DIRS] =
            [const { [const { rcuref::PoolCell::new(&POOL) }; FILES_PER_DIR] }; DIRS];
        $crate::tree::RcuTree::new(&POOL, &D, &F)
    }};
}

impl RcuTree {
    pub const fn new(
        pool: &'static Pool<Node, NODES>,
        dirs: &'static [PoolCell<'static, Node, NODES>; DIRS],
        files: &'static [[PoolCell<'static, Node, NODES>; FILES_PER_DIR]; DIRS],
    ) -> Self {
        RcuTree { pool, dirs, files }
    }

    fn put(&self, cell: &PoolCell<'static, Node, NODES>, name: &str, ino: u32) {
        if let Ok(h) = self.pool.alloc(Node {
            name: Name::new(name),
            ino,
        }) {
            drop(cell.replace(Some(h)));
        }
    }

    /// Writer: creates or replaces directory `d` (slot `d`).
    pub fn mkdir(&self, d: usize, name: &str, ino: u32) {
        self.put(&self.dirs[d], name, ino);
    }

    /// Writer: creates (or, on an occupied slot, renames) file slot `f` of directory `d`.
    /// A rename publishes a new entry for the same inode: readers see the old name or the
    /// new one, never a torn one.
    pub fn create(&self, d: usize, f: usize, name: &str, ino: u32) {
        self.put(&self.files[d][f], name, ino);
    }

    /// Writer: removes file slot `f` of directory `d`.
    pub fn remove(&self, d: usize, f: usize) {
        drop(self.files[d][f].take());
    }

    /// Resolves `dir/file` to an inode number without taking any lock.
    pub fn lookup(&self, dir: &str, file: &str, g: &Guard<'_, '_, 4>) -> Option<u32> {
        let d = self
            .dirs
            .iter()
            .position(|c| c.get(g).is_some_and(|n| n.name.is(dir)))?;
        self.files[d]
            .iter()
            .find_map(|c| c.get(g).filter(|n| n.name.is(file)).map(|n| n.ino))
    }

    pub fn in_use(&self) -> usize {
        self.pool.in_use()
    }
}

/// One entry of the locked tree: a name and its inode.
type Entry = Option<(Name, u32)>;
/// The directories, then each directory's files.
type Table = ([Entry; DIRS], [[Entry; FILES_PER_DIR]; DIRS]);

/// The RwLock version: the same tree behind one lock (kernfs's `kernfs_rwsem`).
pub struct LockedTree {
    inner: RwLock<Table>,
}

impl LockedTree {
    pub fn new() -> Self {
        LockedTree {
            inner: RwLock::new(([None; DIRS], [[None; FILES_PER_DIR]; DIRS])),
        }
    }
    pub fn mkdir(&self, d: usize, name: &str, ino: u32) {
        self.inner.write().unwrap().0[d] = Some((Name::new(name), ino));
    }
    pub fn create(&self, d: usize, f: usize, name: &str, ino: u32) {
        self.inner.write().unwrap().1[d][f] = Some((Name::new(name), ino));
    }
    pub fn remove(&self, d: usize, f: usize) {
        self.inner.write().unwrap().1[d][f] = None;
    }
    pub fn lookup(&self, dir: &str, file: &str) -> Option<u32> {
        let t = self.inner.read().unwrap();
        let d = t.0.iter().position(|e| e.is_some_and(|(n, _)| n.is(dir)))?;
        t.1[d]
            .iter()
            .find_map(|e| e.filter(|(n, _)| n.is(file)).map(|(_, ino)| ino))
    }
}

impl Default for LockedTree {
    fn default() -> Self {
        Self::new()
    }
}

/// The workload both versions run. Files keep their inode across renames: file slot
/// (d, f) is inode `1000 + d * 100 + f`, named `f<f>` or `f<f>.new`.
pub trait Tree: Sync {
    fn w_mkdir(&self, d: usize);
    fn w_create(&self, d: usize, f: usize, renamed: bool);
    fn w_remove(&self, d: usize, f: usize);
}

pub fn ino(d: usize, f: usize) -> u32 {
    1000 + (d * 100 + f) as u32
}

pub fn file_name(f: usize, renamed: bool, buf: &mut [u8; 8]) -> &str {
    buf[0] = b'f';
    buf[1] = b'0' + f as u8;
    let n = if renamed {
        buf[2..6].copy_from_slice(b".new");
        6
    } else {
        2
    };
    core::str::from_utf8(&buf[..n]).unwrap()
}

pub fn dir_name(d: usize) -> &'static str {
    ["d0", "d1", "d2", "d3", "d4", "d5", "d6", "d7"][d]
}

/// One writer step: create, rename (in place, same inode) or remove a file.
pub fn churn(step: u32, mk: impl FnOnce(usize, usize, bool), rm: impl FnOnce(usize, usize)) {
    let r = step.wrapping_mul(2_654_435_761) >> 8;
    let (d, f) = ((r as usize) % DIRS, (r as usize >> 4) % FILES_PER_DIR);
    match r % 3 {
        0 => mk(d, f, false),
        1 => mk(d, f, true),
        _ => rm(d, f),
    }
}
