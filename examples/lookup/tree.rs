//! A two-level name tree (directories of files), looked up by path, in two versions:
//! RCU + typesafe pool (readers take no lock) and `RwLock` (readers take the read lock).
//! The kernfs (`kernfs_dop_revalidate`) and proc (`pid_revalidate`) seeds moved exactly
//! this kind of lookup from a reader-writer semaphore to RCU.
//!
//! The RCU tree offers the two walks of the kernel's path lookup:
//! * **RCU-walk** ([`RcuTree::lookup`], `LOOKUP_RCU`): resolve the path in tables of
//!   names published through [`RcuCell`]s (one for the directories, one per directory), inside the read section, writing no shared
//!   memory at all; take a reference only on the final object, and only when the
//!   caller needs it past the section ([`RcuTree::open`]), re-checking that it is still
//!   the object the names pointed at;
//! * **ref-walk** ([`RcuTree::lookup_ref_walk`]): take a counted reference on the entry at
//!   every level (get, then re-check) and compare names through it: correct without the
//!   table, but every step writes a shared count. `open` falls back to it when the
//!   RCU-walk's answer fails its check (the kernel's `-ECHILD`).

#![allow(dead_code, unreachable_pub)]

use rcuref::pool::{Handle, Pool, PoolCell};
use rcuref::rcu::{Guard, Rcu, RcuCell, Retired};
use std::collections::VecDeque;
use std::sync::{Mutex, RwLock};

pub const DIRS: usize = 8;
pub const FILES_PER_DIR: usize = 8;
pub const NODES: usize = 128;
/// Reader slots of the tree's domain: the benchmark's reader threads (up to 32), the
/// writer, and the writer's own read of the names table.
pub const SLOTS: usize = 40;

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

/// An entry of a names table: a name and the inode it resolves to.
pub type Entry = Option<(Name, u32)>;

/// The names of the directories: what RCU-walk resolves a path's first component in.
#[derive(Clone, Copy)]
pub struct DirNames([Entry; DIRS]);

/// The names of one directory's files. One table per directory, so that a change
/// copies and republishes one small table (160 bytes), and lookups in the other
/// directories keep reading lines that nobody wrote.
#[derive(Clone, Copy)]
pub struct FileNames([Entry; FILES_PER_DIR]);

/// The position and inode of `name` in `entries`.
fn find(entries: &[Entry], name: &str) -> Option<(usize, u32)> {
    entries
        .iter()
        .enumerate()
        .find_map(|(i, e)| e.filter(|(n, _)| n.is(name)).map(|(_, ino)| (i, ino)))
}

/// Spare tables of one kind for the writer, and the ones it retired (released after a
/// grace period: a reader may still be resolving a path in one).
struct Spares<T: 'static> {
    free: Vec<&'static mut T>,
    retired: VecDeque<Retired<'static, T, SLOTS>>,
}

impl<T: 'static> Spares<T> {
    fn new(tables: impl Iterator<Item = &'static mut T>) -> Mutex<Self> {
        Mutex::new(Spares {
            free: tables.collect(),
            retired: VecDeque::new(),
        })
    }
}

/// The RCU version: every entry is an object of a typesafe pool owned by a `PoolCell`
/// (ref-walk reads these), and the names are also published as tables (RCU-walk): one
/// for the directories, one per directory for its files.
pub struct RcuTree {
    rcu: &'static Rcu<SLOTS>,
    pool: &'static Pool<Node, NODES>,
    dirs: &'static [PoolCell<'static, Node, NODES>; DIRS],
    files: &'static [[PoolCell<'static, Node, NODES>; FILES_PER_DIR]; DIRS],
    dir_names: RcuCell<'static, DirNames, SLOTS>,
    file_names: [RcuCell<'static, FileNames, SLOTS>; DIRS],
    dir_spares: Mutex<Spares<DirNames>>,
    file_spares: Mutex<Spares<FileNames>>,
}

/// Declares the statics of one RCU tree (in domain `$rcu`) and evaluates to an `RcuTree`.
#[macro_export]
macro_rules! rcu_tree {
    ($rcu:expr) => {{
        use $crate::tree::{Node, DIRS, FILES_PER_DIR, NODES};
        static POOL: rcuref::pool::Pool<Node, NODES> = rcuref::pool::Pool::new();
        static D: [rcuref::pool::PoolCell<'static, Node, NODES>; DIRS] =
            [const { rcuref::pool::PoolCell::new(&POOL) }; DIRS];
        static F: [[rcuref::pool::PoolCell<'static, Node, NODES>; FILES_PER_DIR]; DIRS] =
            [const { [const { rcuref::pool::PoolCell::new(&POOL) }; FILES_PER_DIR] }; DIRS];
        $crate::tree::RcuTree::new($rcu, &POOL, &D, &F)
    }};
}

/// Spare tables per kind beyond the published ones: the writer waits for a grace period
/// only when all of them are still retired.
const SPARES: usize = 16;

/// `n` copies of `empty`, leaked: they live as long as the tree's statics.
fn tables<T: Copy + 'static>(empty: T, n: usize) -> impl Iterator<Item = &'static mut T> {
    (0..n).map(move |_| Box::leak(Box::new(empty)))
}

impl RcuTree {
    pub fn new(
        rcu: &'static Rcu<SLOTS>,
        pool: &'static Pool<Node, NODES>,
        dirs: &'static [PoolCell<'static, Node, NODES>; DIRS],
        files: &'static [[PoolCell<'static, Node, NODES>; FILES_PER_DIR]; DIRS],
    ) -> Self {
        let mut d = tables(DirNames([None; DIRS]), 1);
        let mut f = tables(FileNames([None; FILES_PER_DIR]), DIRS);
        RcuTree {
            rcu,
            pool,
            dirs,
            files,
            dir_names: RcuCell::new(rcu, d.next().expect("one table")),
            file_names: core::array::from_fn(|_| RcuCell::new(rcu, f.next().expect("DIRS tables"))),
            dir_spares: Spares::new(tables(DirNames([None; DIRS]), SPARES)),
            file_spares: Spares::new(tables(FileNames([None; FILES_PER_DIR]), SPARES)),
        }
    }

    /// Writer: publishes a changed copy of the table in `cell` (writers of one kind of
    /// table take turns: the spares' lock is held throughout).
    fn update<T: Copy + 'static>(
        &self,
        cell: &RcuCell<'static, T, SLOTS>,
        spares: &Mutex<Spares<T>>,
        change: impl FnOnce(&mut T),
    ) {
        let mut sp = spares.lock().unwrap();
        while let Some(r) = sp.retired.pop_front() {
            match r.try_reclaim() {
                Ok(t) => sp.free.push(t),
                Err(r) => {
                    sp.retired.push_front(r);
                    break;
                }
            }
        }
        let table = match sp.free.pop() {
            Some(t) => t,
            None => {
                // Every spare is still retired: wait for the oldest (polling: this writer
                // holds no section, and a poll never blocks).
                let mut r = sp.retired.pop_front().expect("SPARES > 0");
                loop {
                    match r.try_reclaim() {
                        Ok(t) => break t,
                        Err(back) => r = back,
                    }
                    std::hint::spin_loop();
                }
            }
        };
        *table = self
            .rcu
            .with_reader(|g| *cell.load(g))
            .expect("a reader slot");
        change(table);
        sp.retired.push_back(cell.replace(table));
    }

    fn update_files(&self, d: usize, change: impl FnOnce(&mut FileNames)) {
        self.update(&self.file_names[d], &self.file_spares, change);
    }

    fn put(&self, cell: &PoolCell<'static, Node, NODES>, name: &str, ino: u32) -> bool {
        match self.pool.alloc(Node {
            name: Name::new(name),
            ino,
        }) {
            Ok(h) => {
                drop(cell.replace(Some(h)));
                true
            }
            Err(_) => false,
        }
    }

    /// Writer: creates or replaces directory `d` (slot `d`).
    pub fn mkdir(&self, d: usize, name: &str, ino: u32) {
        if self.put(&self.dirs[d], name, ino) {
            let entry = Some((Name::new(name), ino));
            self.update(&self.dir_names, &self.dir_spares, |t| t.0[d] = entry);
        }
    }

    /// Writer: creates (or, on an occupied slot, renames) file slot `f` of directory `d`.
    /// A rename publishes a new entry for the same inode: readers see the old name or the
    /// new one, never a torn one. The object first, then its name.
    pub fn create(&self, d: usize, f: usize, name: &str, ino: u32) {
        if self.put(&self.files[d][f], name, ino) {
            self.update_files(d, |t| t.0[f] = Some((Name::new(name), ino)));
        }
    }

    /// Writer: removes file slot `f` of directory `d`: the name first, then the object.
    pub fn remove(&self, d: usize, f: usize) {
        self.update_files(d, |t| t.0[f] = None);
        drop(self.files[d][f].take());
    }

    /// RCU-walk: resolves `dir/file` to an inode number inside the section `g`, reading
    /// the published names tables only: no lock, no reference, no shared write.
    pub fn lookup(&self, dir: &str, file: &str, g: &Guard<'_, '_, SLOTS>) -> Option<u32> {
        self.walk(dir, file, g).map(|(_, _, ino)| ino)
    }

    /// RCU-walk to the slot of `dir/file`: (directory, file slot, inode).
    fn walk(&self, dir: &str, file: &str, g: &Guard<'_, '_, SLOTS>) -> Option<(usize, usize, u32)> {
        let (d, _) = find(&self.dir_names.load(g).0, dir)?;
        let (f, ino) = find(&self.file_names[d].load(g).0, file)?;
        Some((d, f, ino))
    }

    /// Ref-walk: resolves `dir/file` by taking a counted reference on the entry at every
    /// level (get, then re-check) and comparing names through it.
    pub fn lookup_ref_walk(&self, dir: &str, file: &str, g: &Guard<'_, '_, SLOTS>) -> Option<u32> {
        self.open_ref_walk(dir, file, g).map(|n| n.ino)
    }

    fn open_ref_walk(
        &self,
        dir: &str,
        file: &str,
        g: &Guard<'_, '_, SLOTS>,
    ) -> Option<Handle<'static, Node, NODES>> {
        let d = self
            .dirs
            .iter()
            .position(|c| c.get(g).is_some_and(|n| n.name.is(dir)))?;
        self.files[d]
            .iter()
            .find_map(|c| c.get(g).filter(|n| n.name.is(file)))
    }

    /// Opens `dir/file` for use past the section: RCU-walk to the entry, then one
    /// reference on the final object, checked to be the object the names table pointed
    /// at; if it is not (the writer changed that slot since), ref-walk.
    pub fn open(
        &self,
        dir: &str,
        file: &str,
        g: &Guard<'_, '_, SLOTS>,
    ) -> Option<Handle<'static, Node, NODES>> {
        if let Some((d, f, ino)) = self.walk(dir, file, g) {
            if let Some(h) = self.files[d][f].get(g) {
                if h.ino == ino && h.name.is(file) {
                    return Some(h);
                }
            }
        }
        self.open_ref_walk(dir, file, g)
    }

    pub fn in_use(&self) -> usize {
        self.pool.in_use()
    }
}

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
