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
    let read_word = |bytes: &[u8]| -> u64 {
        let mut b = [0u8; 8];
        b[..word].copy_from_slice(&bytes[..word]);
        u64::from_le_bytes(b)
    };
    let mut version = None;
    let mut tests = Vec::new();
    for sym in file.symbols() {
        if sym.section_index() != Some(section.index()) {
            continue;
        }
        let name = sym.name().map_err(|e| e.to_string())?;
        let off = (sym.address() - section.address()) as usize;
        if name == "EMBEDDED_TEST_VERSION" {
            version = Some(read_word(&data[off..]));
            continue;
        }
        if !name.starts_with('{') {
            continue;
        }
        let meta: serde_json::Value = serde_json::from_str(name)
            .map_err(|e| format!("test symbol is not JSON ({e}): {name}"))?;
        let entry = read_word(&data[off..]);
        let path_ptr = read_word(&data[off + word..]);
        let path_len = read_word(&data[off + 2 * word..]) as usize;
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
        if addr >= s.address() && addr + len as u64 <= s.address() + s.size() {
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

/// Turns the firmware's output into lines as it arrives: defmt frames decoded (with the
/// source location when known), or, without a defmt table, the bytes as text.
pub(crate) struct LogDecoder<'t> {
    locations: Option<&'t Locations>,
    frames: Option<Box<dyn defmt_decoder::StreamDecoder + Send + Sync + 't>>,
    /// Text not yet ended by a newline (no defmt table).
    text: Vec<u8>,
    /// A malformed frame was met: the rest is skipped.
    stopped: bool,
}

impl<'t> LogDecoder<'t> {
    pub(crate) fn new(table: Option<&'t Table>, locations: Option<&'t Locations>) -> Self {
        LogDecoder {
            locations,
            frames: table.map(Table::new_stream_decoder),
            text: Vec::new(),
            stopped: false,
        }
    }

    /// The lines that `bytes` completes.
    pub(crate) fn push(&mut self, bytes: &[u8]) -> Vec<String> {
        let mut out = Vec::new();
        if self.stopped {
            return out;
        }
        let Some(dec) = self.frames.as_mut() else {
            self.text.extend_from_slice(bytes);
            while let Some(nl) = self.text.iter().position(|&b| b == b'\n') {
                let line: Vec<u8> = self.text.drain(..=nl).collect();
                out.push(text_line(&line[..nl]));
            }
            return out;
        };
        dec.received(bytes);
        loop {
            match dec.decode() {
                Ok(frame) => {
                    let loc = self
                        .locations
                        .and_then(|l| l.get(&frame.index()))
                        .map(|l| format!("  ({}:{})", l.file.display(), l.line))
                        .unwrap_or_default();
                    // Multi-line messages (a panic's location, then its message) stay indented.
                    let text = frame.display(false).to_string().replace('\n', "\n        ");
                    out.push(format!("{text}{loc}"));
                }
                Err(DecodeError::UnexpectedEof) => break,
                Err(DecodeError::Malformed) => {
                    out.push("<malformed defmt frame; later output skipped>".into());
                    self.stopped = true;
                    break;
                }
            }
        }
        out
    }

    /// The last line, when the output did not end with a newline.
    pub(crate) fn finish(&mut self) -> Vec<String> {
        let rest = std::mem::take(&mut self.text);
        if rest.is_empty() {
            Vec::new()
        } else {
            vec![text_line(&rest)]
        }
    }
}

/// One line of plain text (a `\r` before its newline dropped).
fn text_line(bytes: &[u8]) -> String {
    let bytes = bytes.strip_suffix(b"\r").unwrap_or(bytes);
    String::from_utf8_lossy(bytes).into_owned()
}
