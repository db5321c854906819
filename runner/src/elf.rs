//! Reading the firmware: embedded-test's test table and defmt's frames.

use defmt_decoder::{DecodeError, Locations, Table};
use object::{Object, ObjectSection, ObjectSymbol};
use std::time::Duration;

/// One test found in the ELF.
pub(crate) struct Test {
    /// `module::name`, without the crate name.
    pub(crate) name: String,
    pub(crate) entry: u64,
    pub(crate) ignored: bool,
    pub(crate) should_panic: bool,
    pub(crate) timeout: Duration,
}

/// The embedded-test tests of `elf`, sorted by name; `default_timeout` for those without
/// their own.
pub(crate) fn read_tests(elf: &[u8], default_timeout: Duration) -> Result<Vec<Test>, String> {
    let file = object::File::parse(elf).map_err(|e| format!("not an ELF file: {e}"))?;
    let section = file.section_by_name(".embedded_test").ok_or(
        "no .embedded_test section: not an embedded-test binary (is embedded-test.x linked?)",
    )?;
    let data = section.uncompressed_data().map_err(|e| e.to_string())?;
    let word = if file.is_64() { 8 } else { 4 };
    // The `index`th word of the symbol at section offset `off`, if the section holds it.
    let read_word = |off: usize, index: usize, name: &str| -> Result<u64, String> {
        let at = off + index * word;
        let bytes = data.get(at..at + word).ok_or_else(|| {
            format!(
                "a damaged embedded-test table: the symbol {name} points past the end of \
                 the .embedded_test section ({} bytes)",
                data.len()
            )
        })?;
        let mut b = [0u8; 8];
        b[..word].copy_from_slice(bytes);
        Ok(u64::from_le_bytes(b))
    };
    let mut version = None;
    let mut tests = Vec::new();
    for sym in file.symbols() {
        if sym.section_index() != Some(section.index()) {
            continue;
        }
        let name = sym.name().map_err(|e| e.to_string())?;
        let off = sym
            .address()
            .checked_sub(section.address())
            .and_then(|o| usize::try_from(o).ok())
            .ok_or_else(|| {
                format!("a damaged embedded-test table: the symbol {name} is before its section")
            })?;
        if name == "EMBEDDED_TEST_VERSION" {
            version = Some(read_word(off, 0, name)?);
            continue;
        }
        if !name.starts_with('{') {
            continue;
        }
        let meta: serde_json::Value = serde_json::from_str(name)
            .map_err(|e| format!("test symbol is not JSON ({e}): {name}"))?;
        let entry = read_word(off, 0, name)?;
        let path_ptr = read_word(off, 1, name)?;
        let path_len = usize::try_from(read_word(off, 2, name)?).unwrap_or(usize::MAX);
        let module = read_at(&file, path_ptr, path_len).unwrap_or_default();
        let module = module
            .split_once("::")
            .map(|(_, rest)| rest.to_string())
            .unwrap_or(module);
        let short = meta["name"].as_str().ok_or("test without a name")?;
        tests.push(Test {
            name: if module.is_empty() {
                short.to_string()
            } else {
                format!("{module}::{short}")
            },
            entry,
            ignored: meta["ignored"].as_bool().unwrap_or(false),
            should_panic: meta["should_panic"].as_bool().unwrap_or(false),
            timeout: meta["timeout"]
                .as_u64()
                .map(Duration::from_secs)
                .unwrap_or(default_timeout),
        });
    }
    match version {
        Some(1) => {}
        Some(v) => {
            return Err(format!(
                "embedded-test protocol version {v}; this runner speaks version 1"
            ))
        }
        None => return Err("no EMBEDDED_TEST_VERSION symbol".into()),
    }
    tests.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(tests)
}

/// Whether `elf` is an embedded-test binary.
pub(crate) fn has_test_section(elf: &[u8]) -> bool {
    object::File::parse(elf)
        .map(|f| f.section_by_name(".embedded_test").is_some())
        .unwrap_or(false)
}

/// Whether `elf` defines the symbol `name`.
pub(crate) fn has_symbol(elf: &[u8], name: &str) -> bool {
    object::File::parse(elf)
        .map(|f| f.symbols().any(|s| s.name() == Ok(name)))
        .unwrap_or(false)
}

/// Reads `len` bytes at virtual address `addr` from whichever loaded section holds it.
fn read_at(file: &object::File, addr: u64, len: usize) -> Option<String> {
    for s in file.sections() {
        let end = addr.checked_add(len as u64)?;
        if addr >= s.address() && end <= s.address().saturating_add(s.size()) {
            let data = s.data().ok()?;
            let off = (addr - s.address()) as usize;
            return String::from_utf8(data.get(off..off + len)?.to_vec()).ok();
        }
    }
    None
}

/// The source locations of the ELF's defmt frames (parsed once per ELF: DWARF).
pub(crate) fn locations(table: Option<&Table>, elf: &[u8]) -> Option<Locations> {
    table.and_then(|t| t.get_locations(elf).ok())
}

/// Checks that `elf` (read from `path`) is an ELF file that `qemu` can boot: the right
/// architecture, before QEMU runs it (a wrong one only hangs until the timeout).
pub(crate) fn check_elf(elf: &[u8], path: &str, qemu: &str) -> Result<(), String> {
    use object::{Architecture as A, BinaryFormat};
    let file = match object::File::parse(elf) {
        Ok(f) => f,
        Err(e) if elf.starts_with(b"\x7fELF") => {
            return Err(format!("{path}: a damaged or unsupported ELF file: {e}"))
        }
        Err(_) => return Err(not_elf(elf, path)),
    };
    if file.format() != BinaryFormat::Elf {
        return Err(format!(
            "{path} is not an ELF file but a {:?} one: give the firmware's ELF",
            file.format()
        ));
    }
    let emulator = std::path::Path::new(qemu)
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or(qemu);
    let (runs, what): (&[A], &str) = match emulator {
        "qemu-system-arm" => (&[A::Arm], "32-bit Arm"),
        "qemu-system-aarch64" => (&[A::Aarch64, A::Arm], "AArch64 or 32-bit Arm"),
        "qemu-system-riscv32" => (&[A::Riscv32], "32-bit RISC-V"),
        "qemu-system-riscv64" => (&[A::Riscv64], "64-bit RISC-V"),
        _ => return Ok(()),
    };
    let arch = file.architecture();
    if runs.contains(&arch) {
        // The machines QEMU boots here are little-endian: a big-endian image only hangs.
        if file.endianness() != object::Endianness::Little {
            return Err(format!(
                "{path} is a big-endian ELF, but {emulator} boots little-endian firmware: \
                 build it for a little-endian target (thumbv*-none-eabi*, riscv*, aarch64)"
            ));
        }
        return Ok(());
    }
    let name = match arch {
        A::Arm => "32-bit Arm".to_string(),
        A::Aarch64 => "AArch64".to_string(),
        A::Riscv32 => "32-bit RISC-V".to_string(),
        A::Riscv64 => "64-bit RISC-V".to_string(),
        A::X86_64 => "x86-64".to_string(),
        A::Unknown => "unknown-architecture".to_string(),
        other => format!("{other:?}"),
    };
    Err(format!(
        "{path} is a {name} ELF, but {emulator} runs {what} firmware: check --target \
         (or --machine), or build the firmware for this target"
    ))
}

/// What a file that is not an ELF file seems to be, in a message.
fn not_elf(bytes: &[u8], path: &str) -> String {
    // Records of `:` and hex digits, one a line.
    let head = &bytes[..bytes.len().min(4096)];
    let is_hex = head.starts_with(b":")
        && head
            .split(|&b| b == b'\n')
            .take(8)
            .filter(|l| !l.is_empty())
            .all(|l| {
                l.starts_with(b":")
                    && l[1..]
                        .iter()
                        .all(|c| c.is_ascii_hexdigit() || c.is_ascii_whitespace())
            });
    let seems = if bytes.is_empty() {
        "it is empty".to_string()
    } else if is_hex {
        "it looks like an Intel HEX image".to_string()
    } else if bytes.starts_with(b"S0") || bytes.starts_with(b"S1") || bytes.starts_with(b"S3") {
        "it looks like a Motorola S-record image".to_string()
    } else if bytes.starts_with(b"#!") {
        "it is a script".to_string()
    } else if bytes.starts_with(b"MZ") || bytes.starts_with(&[0xcf, 0xfa, 0xed, 0xfe]) {
        "it is a Windows or macOS executable".to_string()
    } else if is_text(&bytes[..bytes.len().min(4096)]) {
        "it is a text file".to_string()
    } else {
        "it looks like a raw binary image (objcopy -O binary)".to_string()
    };
    format!(
        "{path} is not an ELF file ({seems}): give the ELF that cargo built \
         (target/<triple>/<profile>/<name>), which holds the symbols the runner needs"
    )
}

/// Whether `elf` is a defmt firmware stripped of its symbols (`strip`, `lld
/// --strip-all`): the `.defmt` section is kept, but the symbols that are the table are
/// gone, so the table cannot be read.
pub(crate) fn stripped_defmt(elf: &[u8]) -> bool {
    object::File::parse(elf).is_ok_and(|f| {
        f.section_by_name(".defmt").is_some()
            && (f.symbol_table().is_none()
                || f.symbols().all(|s| s.name().unwrap_or("").is_empty()))
    })
}

/// What a stripped defmt firmware ([`stripped_defmt`]) is told before it runs.
pub(crate) fn stripped_note(path: &str) -> String {
    format!(
        "note: {path} has a `.defmt` section but no symbol table (stripped), so its defmt \
         table cannot be read: the firmware runs, and its defmt frames are shown \
         undecoded; give the unstripped ELF cargo built to decode them"
    )
}

/// What a firmware whose ELF has no defmt table is told when its output is not text.
pub(crate) fn no_defmt_table(elf: &[u8], path: &str) -> String {
    let stripped = object::File::parse(elf)
        .map(|f| f.symbol_table().is_none())
        .unwrap_or(false);
    format!(
        "note: the firmware's output is not text, and {path} has no defmt table (no `.defmt` \
         section and `_defmt_version_` symbol{}), so it is shown undecoded: if the firmware \
         logs with defmt, give the unstripped ELF cargo built",
        if stripped {
            "; it has no symbol table at all: stripped?"
        } else {
            ""
        }
    )
}

/// Turns the firmware's output into lines as it arrives: defmt frames decoded (with the
/// source location when known), or, without a defmt table, the bytes as text.
///
/// With defmt's default encoding (rzCOBS, each frame ended by a zero byte) plain text
/// written over semihosting between frames (an `hprintln!`, a `panic-semihosting`
/// message) is shown as text and decoding goes on at the next frame, as `defmt-print`
/// resynchronises. Such text has no zero byte, so it arrives glued to the front of the
/// next frame: the chunk is split at the newline after which the rest decodes as a whole
/// frame. Text after the last frame shows when the output ends.
pub(crate) struct LogDecoder<'t> {
    table: Option<&'t Table>,
    locations: Option<&'t Locations>,
    /// The raw encoding (no frame boundaries, so no resynchronising).
    raw: Option<Box<dyn defmt_decoder::StreamDecoder + Send + Sync + 't>>,
    /// Bytes not yet ended by a newline (no table) or a zero byte (rzCOBS).
    pending: Vec<u8>,
    /// How much of `pending` is known to hold no end (newline or zero byte).
    scanned: usize,
    /// A malformed frame was met in the raw encoding: the rest is skipped.
    stopped: bool,
    /// Without a table, output that is not text came (defmt frames, likely).
    pub(crate) undecoded: bool,
}

impl<'t> LogDecoder<'t> {
    pub(crate) fn new(table: Option<&'t Table>, locations: Option<&'t Locations>) -> Self {
        let raw = table
            .filter(|t| !t.encoding().can_recover())
            .map(Table::new_stream_decoder);
        LogDecoder {
            table,
            locations,
            raw,
            pending: Vec::new(),
            scanned: 0,
            stopped: false,
            undecoded: false,
        }
    }

    /// The lines that `bytes` completes.
    pub(crate) fn push(&mut self, bytes: &[u8]) -> Vec<String> {
        let mut out = Vec::new();
        if self.stopped {
            return out;
        }
        if let Some(dec) = self.raw.as_mut() {
            dec.received(bytes);
            loop {
                match dec.decode() {
                    Ok(frame) => out.push(frame_line(&frame, self.locations)),
                    Err(DecodeError::UnexpectedEof) => break,
                    Err(DecodeError::Malformed) => {
                        out.push(
                            "<malformed defmt frame; the raw encoding cannot resynchronise, \
                             later output skipped>"
                                .into(),
                        );
                        self.stopped = true;
                        break;
                    }
                }
            }
            return out;
        }
        self.pending.extend_from_slice(bytes);
        let end = if self.table.is_some() { 0 } else { b'\n' };
        // Only the new bytes are searched: a long text without its zero byte is not
        // searched again at each read.
        let mut from = 0;
        let mut search = self.scanned;
        while let Some(at) = self.pending[search..]
            .iter()
            .position(|&b| b == end)
            .map(|i| i + search)
        {
            let chunk = &self.pending[from..at];
            match self.table {
                None => {
                    self.undecoded |= !is_text(chunk);
                    out.push(text_line(chunk));
                }
                Some(table) if !chunk.is_empty() => {
                    frame_chunk(table, self.locations, chunk, &mut out);
                }
                Some(_) => {}
            }
            from = at + 1;
            search = from;
        }
        self.pending.drain(..from);
        self.scanned = self.pending.len();
        out
    }

    /// The output has been quiet for a while: text not yet ended (by a newline, or by the
    /// zero byte of a defmt frame glued to it) is shown now, as it would be on a
    /// terminal. What might be the start of a defmt frame (not text) is kept.
    pub(crate) fn idle(&mut self) -> Vec<String> {
        let mut out = Vec::new();
        if self.stopped || self.raw.is_some() || self.pending.is_empty() {
            return out;
        }
        if self.table.is_some() && !is_text(&self.pending) {
            return out;
        }
        let rest = std::mem::take(&mut self.pending);
        self.scanned = 0;
        self.undecoded |= self.table.is_none() && !is_text(&rest);
        text_lines(&rest, &mut out);
        out
    }

    /// The rest, once the output has ended: text not ended by a newline, or, with defmt,
    /// whatever followed the last frame (a panic message written as plain text).
    pub(crate) fn finish(&mut self) -> Vec<String> {
        let rest = std::mem::take(&mut self.pending);
        let mut out = Vec::new();
        if rest.is_empty() || self.stopped {
            return out;
        }
        if self.table.is_none() || is_text(&rest) {
            self.undecoded |= self.table.is_none() && !is_text(&rest);
            text_lines(&rest, &mut out);
        } else {
            out.push(format!(
                "<incomplete defmt frame at the end ({} bytes)>",
                rest.len()
            ));
        }
        out
    }
}

/// One zero-ended chunk of rzCOBS output: a frame, text and a frame, or neither.
///
/// rzCOBS is decoded from the end, so the chunk is decoded once, backwards; after each
/// whole group the bytes decoded so far are a candidate frame, and the bytes before it
/// the text written before the frame (with or without a newline). The longest candidate
/// after text that is a whole frame (the bytes it does not use are the encoding's zero
/// padding) wins. Linear in the chunk's length: a candidate's check fails at its index
/// unless the index is in the table.
fn frame_chunk(table: &Table, locations: Option<&Locations>, chunk: &[u8], out: &mut Vec<String>) {
    // How much of the chunk's start reads as text.
    let valid = match std::str::from_utf8(chunk) {
        Ok(s) => s,
        Err(e) => std::str::from_utf8(&chunk[..e.valid_up_to()]).unwrap_or(""),
    };
    let text_len = valid
        .char_indices()
        .find(|&(_, c)| c.is_control() && !matches!(c, '\n' | '\r' | '\t' | '\x1b'))
        .map(|(i, _)| i)
        .unwrap_or(valid.len());
    let text_before = |p: usize| p <= text_len && valid.is_char_boundary(p);
    // A byte decodes to at most 7 (0x7f: seven zeros).
    let mut buf = vec![0u8; chunk.len() * 7 + 8];
    let mut pos = buf.len();
    let mut p = chunk.len();
    let mut best: Option<(usize, String)> = None;
    'groups: while p > 0 {
        p -= 1;
        let x = chunk[p];
        let (zero_first, literals) = match x {
            0 => break,
            0x01..=0x7f => (false, 0),
            0x80..=0xfe => (true, usize::from(x & 0x7f) + 7),
            0xff => (false, 134),
        };
        if x <= 0x7f {
            for i in 0..7 {
                pos -= 1;
                if x & (1 << (6 - i)) == 0 {
                    if p == 0 {
                        break 'groups;
                    }
                    p -= 1;
                    buf[pos] = chunk[p];
                } else {
                    buf[pos] = 0;
                }
            }
        } else {
            if zero_first {
                pos -= 1;
                buf[pos] = 0;
            }
            if p < literals {
                break;
            }
            for _ in 0..literals {
                p -= 1;
                pos -= 1;
                buf[pos] = chunk[p];
            }
        }
        if !text_before(p) {
            continue;
        }
        let data = &buf[pos..];
        if let Ok((frame, used)) = table.decode(data) {
            if data[used..].iter().all(|&b| b == 0) {
                best = Some((p, frame_line(&frame, locations)));
            }
        }
    }
    match best {
        Some((p, line)) => {
            if p > 0 {
                text_lines(&chunk[..p], out);
            }
            out.push(line);
        }
        None if is_text(chunk) => text_lines(chunk, out),
        None => out.push(format!(
            "<malformed defmt frame skipped ({} bytes)>",
            chunk.len()
        )),
    }
}

/// A decoded frame as a line, with its source location when known.
fn frame_line(frame: &defmt_decoder::Frame, locations: Option<&Locations>) -> String {
    let loc = locations
        .and_then(|l| l.get(&frame.index()))
        .map(|l| format!("  ({}:{})", l.file.display(), l.line))
        .unwrap_or_default();
    // Multi-line messages (a panic's location, then its message) stay indented.
    let text = frame.display(false).to_string().replace('\n', "\n        ");
    format!("{text}{loc}")
}

/// Whether `bytes` read as text: UTF-8 without control characters but tabs, line ends and
/// escapes (colours).
fn is_text(bytes: &[u8]) -> bool {
    std::str::from_utf8(bytes).is_ok_and(|s| {
        !s.chars()
            .any(|c| c.is_control() && !matches!(c, '\n' | '\r' | '\t' | '\x1b'))
    })
}

/// `bytes` as text lines (a last line without its newline included).
fn text_lines(bytes: &[u8], out: &mut Vec<String>) {
    let bytes = bytes.strip_suffix(b"\n").unwrap_or(bytes);
    out.extend(bytes.split(|&b| b == b'\n').map(text_line));
}

/// One line of plain text (a `\r` before its newline dropped).
fn text_line(bytes: &[u8]) -> String {
    let bytes = bytes.strip_suffix(b"\r").unwrap_or(bytes);
    String::from_utf8_lossy(bytes).into_owned()
}
