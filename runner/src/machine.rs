//! The machines: how each known target boots in QEMU, their memory maps, and the
//! command line that boots a firmware.

/// How a target boots in QEMU: the system emulator and its machine arguments.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Machine {
    /// The `qemu-system-*` binary.
    pub qemu: String,
    /// `-machine` value.
    pub machine: String,
    /// `-cpu` value, if the machine needs one.
    pub cpu: Option<String>,
    /// `-smp` value (cores or harts), if more than one.
    pub smp: Option<u32>,
    /// Further arguments, as given.
    pub extra: Vec<String>,
}

/// A target triple the runner can boot without being told how: one row of [`KNOWN`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Known {
    /// The target triple.
    pub target: &'static str,
    /// The `qemu-system-*` binary.
    pub qemu: &'static str,
    /// `-machine` value.
    pub machine: &'static str,
    /// `-cpu` value, if the machine needs one.
    pub cpu: Option<&'static str>,
    /// `-smp` value, if more than one core or hart.
    pub smp: Option<u32>,
}

impl Known {
    const fn new(
        target: &'static str,
        qemu: &'static str,
        machine: &'static str,
        cpu: Option<&'static str>,
        smp: Option<u32>,
    ) -> Self {
        Known {
            target,
            qemu,
            machine,
            cpu,
            smp,
        }
    }
}

/// The machines this runner knows, by target triple (what `--target` selects unless
/// `--machine` overrides it). [`memory_map`] gives each machine's map to link against.
#[rustfmt::skip]
pub const KNOWN: &[Known] = &[
    Known::new("thumbv6m-none-eabi", "qemu-system-arm", "microbit", Some("cortex-m0"), None),
    Known::new("thumbv7m-none-eabi", "qemu-system-arm", "lm3s6965evb", Some("cortex-m3"), None),
    Known::new("thumbv7em-none-eabi", "qemu-system-arm", "mps2-an386", Some("cortex-m4"), None),
    Known::new("thumbv7em-none-eabihf", "qemu-system-arm", "mps2-an386", Some("cortex-m4"), None),
    Known::new("thumbv8m.main-none-eabi", "qemu-system-arm", "mps2-an505", Some("cortex-m33"), None),
    Known::new("thumbv8m.main-none-eabihf", "qemu-system-arm", "mps2-an505", Some("cortex-m33"), None),
    Known::new("riscv32imac-unknown-none-elf", "qemu-system-riscv32", "virt", None, Some(2)),
    Known::new("riscv32imc-unknown-none-elf", "qemu-system-riscv32", "virt", None, None),
    Known::new("riscv32i-unknown-none-elf", "qemu-system-riscv32", "virt", None, None),
    Known::new("riscv64gc-unknown-none-elf", "qemu-system-riscv64", "virt", None, Some(2)),
    Known::new("riscv64imac-unknown-none-elf", "qemu-system-riscv64", "virt", None, Some(2)),
    Known::new("aarch64-unknown-none", "qemu-system-aarch64", "virt", Some("cortex-a53"), Some(4)),
    Known::new("aarch64-unknown-none-softfloat", "qemu-system-aarch64", "virt", Some("cortex-a53"), Some(4)),
];

/// Machines a target may pick with `--machine` besides its [`KNOWN`] one, with what they
/// need (`-cpu` is implied by these boards): `(target prefix, machine)`.
pub(crate) const ALTERNATIVES: &[(&str, &str)] = &[("thumbv8m.main", "mps2-an521")];

/// The memory map to link a firmware against for a QEMU machine (`--memory-map` prints
/// it), as a `memory.x` for cortex-m-rt / riscv-rt, with what boots where. `qemu` tells
/// the two `virt` machines apart.
pub fn memory_map(qemu: &str, machine: &str) -> Option<&'static str> {
    Some(match (machine, qemu) {
        ("microbit", _) => {
            "/* microbit (nRF51822, Cortex-M0): the vector table at 0. */
MEMORY
{
  FLASH : ORIGIN = 0x00000000, LENGTH = 256K
  RAM   : ORIGIN = 0x20000000, LENGTH = 16K
}"
        }
        ("lm3s6965evb", _) => {
            "/* lm3s6965evb (Stellaris, Cortex-M3): the vector table at 0. */
MEMORY
{
  FLASH : ORIGIN = 0x00000000, LENGTH = 256K
  RAM   : ORIGIN = 0x20000000, LENGTH = 64K
}"
        }
        ("mps2-an385" | "mps2-an386" | "mps2-an500", _) => {
            "/* mps2-an385/an386/an500 (Cortex-M3/M4/M7): the vector table at 0 (SSRAM1, 4M);
   RAM in SSRAM2/3 at 0x2000_0000 (4M; 64K is plenty for tests). */
MEMORY
{
  FLASH : ORIGIN = 0x00000000, LENGTH = 4M
  RAM   : ORIGIN = 0x20000000, LENGTH = 4M
}"
        }
        ("mps2-an505" | "mps2-an521", _) => {
            "/* mps2-an505 (Cortex-M33) and mps2-an521 (two Cortex-M33, SSE-200): they boot
   Secure, the vector table at 0x1000_0000 (the Secure alias of SSRAM1); RAM in the
   Secure alias of SSRAM2/3. The classic map (0 / 0x2000_0000) locks up at reset
   (`Lockup: can't escalate 3 to HardFault`). On mps2-an521 CPU1 waits until its
   vector table is written to INITSVTOR1 (0x5002_1114) and CPUWAIT (0x5002_1118)
   bit 1 is cleared. */
MEMORY
{
  FLASH : ORIGIN = 0x10000000, LENGTH = 4M
  RAM   : ORIGIN = 0x38000000, LENGTH = 2M
}"
        }
        ("virt", q) if q.contains("riscv") => {
            "/* RISC-V virt, -bios none: everything in RAM at 0x8000_0000 (128M by default);
   every hart enters at the image's start. For riscv-rt, alias the regions: */
MEMORY
{
  RAM : ORIGIN = 0x80000000, LENGTH = 16M
}
REGION_ALIAS(\"REGION_TEXT\", RAM);
REGION_ALIAS(\"REGION_RODATA\", RAM);
REGION_ALIAS(\"REGION_DATA\", RAM);
REGION_ALIAS(\"REGION_BSS\", RAM);"
        }
        ("virt", q) if q.contains("aarch64") => {
            "/* AArch64 virt, an ELF kernel at EL1 with no firmware: RAM at 0x4000_0000 (128M by
   default), the kernel linked at 0x4008_0000; core 0 enters at the ELF entry, the
   others stay off until PSCI CPU_ON (function 0xC400_0003 over `hvc`). GICv2
   distributor 0x0800_0000, CPU interface 0x0801_0000; PL011 UART 0x0900_0000. The MMU
   is off: exclusives work in QEMU, real cores need the MMU and caches on. */
MEMORY
{
  RAM : ORIGIN = 0x40080000, LENGTH = 126M
}"
        }
        _ => return None,
    })
}

/// The emulator for a target triple, by its architecture.
pub(crate) fn emulator_for(target: &str) -> &'static str {
    if target.starts_with("riscv64") {
        "qemu-system-riscv64"
    } else if target.starts_with("riscv32") {
        "qemu-system-riscv32"
    } else if target.starts_with("aarch64") {
        "qemu-system-aarch64"
    } else {
        "qemu-system-arm"
    }
}

impl Machine {
    /// The known machine for `target`, if any.
    pub fn for_target(target: &str) -> Option<Machine> {
        KNOWN.iter().find(|k| k.target == target).map(|k| Machine {
            qemu: k.qemu.into(),
            machine: k.machine.into(),
            cpu: k.cpu.map(Into::into),
            smp: k.smp,
            extra: Vec::new(),
        })
    }

    /// The arguments before the image: `-machine`, `-cpu`, `-smp`, `-bios none` on
    /// RISC-V `virt`, `-nic none` on `virt` (whose default network card needs a ROM
    /// that minimal QEMU installs lack), and the extra ones.
    pub fn args(&self) -> Vec<String> {
        let mut a = vec!["-machine".to_string(), self.machine.clone()];
        if let Some(cpu) = &self.cpu {
            a.extend(["-cpu".to_string(), cpu.clone()]);
        }
        let given = |opts: &[&str]| self.extra.iter().any(|e| opts.contains(&e.as_str()));
        if self.qemu.contains("riscv") && !given(&["-bios"]) {
            a.extend(["-bios".to_string(), "none".to_string()]);
        }
        if self.machine.split(',').next() == Some("virt") && !given(&["-nic", "-net", "-netdev"]) {
            a.extend(["-nic".to_string(), "none".to_string()]);
        }
        if let Some(n) = self.smp {
            a.extend(["-smp".to_string(), n.to_string()]);
        }
        a.extend(self.extra.iter().cloned());
        a
    }

    /// The whole command line after the emulator's name: [`Machine::args`], no display,
    /// monitor or serial port, semihosting with `firmware_args` as the firmware's command
    /// line, and the image. What the runner boots; tools that add their own arguments
    /// (a TCG plugin, say) append them.
    pub fn command_line(&self, elf: &str, firmware_args: &[&str]) -> Vec<String> {
        let mut semihosting = String::from("enable=on,target=native");
        for a in firmware_args {
            semihosting.push_str(",arg=");
            semihosting.push_str(a);
        }
        let mut a = self.args();
        a.extend(
            [
                "-nographic",
                "-monitor",
                "none",
                "-serial",
                "none",
                "-semihosting-config",
                &semihosting,
                "-kernel",
                elf,
            ]
            .map(String::from),
        );
        a
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn each_target_is_known_once() {
        for (i, k) in KNOWN.iter().enumerate() {
            assert!(
                KNOWN[i + 1..].iter().all(|o| o.target != k.target),
                "{} twice",
                k.target
            );
        }
    }

    #[test]
    fn each_known_machine_has_its_architecture_emulator_and_a_memory_map() {
        for k in KNOWN {
            assert_eq!(emulator_for(k.target), k.qemu, "{}", k.target);
            assert!(memory_map(k.qemu, k.machine).is_some(), "{}", k.target);
            assert_ne!(k.smp, Some(1), "{}: -smp 1 is the default", k.target);
            let m = Machine::for_target(k.target).unwrap();
            assert_eq!(
                (m.qemu.as_str(), m.machine.as_str(), m.cpu.as_deref(), m.smp),
                (k.qemu, k.machine, k.cpu, k.smp)
            );
            assert!(m.extra.is_empty());
        }
        for (prefix, machine) in ALTERNATIVES {
            assert!(KNOWN.iter().any(|k| k.target.starts_with(prefix)));
            assert!(
                memory_map(emulator_for(prefix), machine).is_some(),
                "{machine}"
            );
        }
        assert_eq!(Machine::for_target("x86_64-unknown-linux-gnu"), None);
    }

    #[test]
    fn machine_arguments_per_architecture() {
        let a = |t: &str| Machine::for_target(t).unwrap().args().join(" ");
        assert_eq!(
            a("thumbv7m-none-eabi"),
            "-machine lm3s6965evb -cpu cortex-m3"
        );
        assert_eq!(
            a("riscv64gc-unknown-none-elf"),
            "-machine virt -bios none -nic none -smp 2"
        );
        assert_eq!(
            a("aarch64-unknown-none"),
            "-machine virt -cpu cortex-a53 -nic none -smp 4"
        );
    }

    #[test]
    fn given_arguments_replace_the_defaults_they_name() {
        let mut m = Machine::for_target("riscv32imac-unknown-none-elf").unwrap();
        m.extra = args("-bios default -netdev user,id=n0");
        assert_eq!(
            m.args().join(" "),
            "-machine virt -smp 2 -bios default -netdev user,id=n0"
        );
    }

    #[test]
    fn the_command_line_boots_the_image_over_semihosting() {
        let m = Machine::for_target("thumbv7em-none-eabihf").unwrap();
        assert_eq!(
            m.command_line("fw.elf", &["run_addr", "1234"]).join(" "),
            "-machine mps2-an386 -cpu cortex-m4 -nographic -monitor none -serial none \
             -semihosting-config enable=on,target=native,arg=run_addr,arg=1234 -kernel fw.elf"
        );
        assert!(m
            .command_line("fw.elf", &[])
            .contains(&"enable=on,target=native".to_string()));
    }
}
