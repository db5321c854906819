//! The hot paths, one exported symbol each, so that `cargo xtask size` and a
//! disassembler can find exactly their code. Nothing here is called by anything.
#![no_std]

use rcuref::file_ref::{FileRef32, FileRef64};

macro_rules! probes {
    ($($name:ident: $ty:ty => $body:expr;)*) => {$(
        /// Probe symbol (see the crate docs).
        #[no_mangle]
        pub extern "C" fn $name(r: &$ty) -> bool {
            let f: fn(&$ty) -> bool = $body;
            f(r)
        }
    )*};
}

probes! {
    rcuref_probe_get32: FileRef32 => |r| r.get();
    rcuref_probe_put32: FileRef32 => |r| r.put();
    rcuref_probe_put_close32: FileRef32 => |r| r.put_close();
    rcuref_probe_get64: FileRef64 => |r| r.get();
    rcuref_probe_put64: FileRef64 => |r| r.put();
    rcuref_probe_put_close64: FileRef64 => |r| r.put_close();
}

/// Probe symbol: an outermost RCU read section, entered and left (lock + unlock).
#[no_mangle]
#[allow(improper_ctypes_definitions)]
pub extern "C" fn rcuref_probe_read_section(r: &rcuref::rcu::Reader<'static, 4>) -> bool {
    let g = r.lock();
    core::hint::black_box(&g);
    drop(g);
    true
}
