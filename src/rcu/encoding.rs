//! The two words the grace-period machine is made of: the counter `gp` and a reader
//! slot. Pure arithmetic on their values, no memory operations (those are `ops`).

// ---- a reader slot -------------------------------------------------------------------

// A slot word: bit 0 = claimed by a `Reader` (or dedicated), bit 1 = the phase its
// section saw, bits 2.. = nesting depth (0: offline). 0 = free.
pub(crate) const CLAIMED: u32 = 1;
pub(crate) const ONE_LEVEL: u32 = 4;
/// A nesting count this high (2^30 leaked guards) sticks: neither lock nor unlock moves
/// it, so the section never ends instead of wrapping to "offline" under live references.
pub(crate) const STICKY: u32 = 0xFFFF_FFF0;

/// Whether slot word `v` is in a read section.
#[inline(always)]
pub(crate) const fn online(v: u32) -> bool {
    v >= ONE_LEVEL
}

/// The slot word of an outermost section that recorded phase `p`.
#[inline(always)]
pub(crate) const fn entered(p: u32) -> u32 {
    CLAIMED | (p & 1) << 1 | ONE_LEVEL
}

/// The phase a slot word's section recorded.
#[inline(always)]
pub(crate) const fn phase_of(v: u32) -> u32 {
    (v >> 1) & 1
}

// ---- the grace-period counter --------------------------------------------------------

/// Steps of `gp` per grace period: flip, wait, flip, wait.
pub(crate) const STEPS_PER_GP: u32 = 4;
/// A cookie is at most this many steps ahead of `gp`, and `gp` never moves backwards,
/// so a target further ahead than this is in the past. Where heavy fences may run
/// (`rcuref_fences`) a cookie's target is the end of the first grace period whose first
/// wait comes after it (`gp::cookie_target`): up to 7 steps ahead. Elsewhere a whole
/// grace period from the next flip: 4 steps, one more while a wait is in progress.
#[cfg(rcuref_fences)]
pub(crate) const MAX_AHEAD: u32 = STEPS_PER_GP + 3;
/// See above: the build without heavy fences.
#[cfg(not(rcuref_fences))]
pub(crate) const MAX_AHEAD: u32 = STEPS_PER_GP + 1;
/// The counter's narrowest width in test builds (`mutants::set_gp_bits`): a cookie reads
/// done for `2^bits - MAX_AHEAD` steps after its target, which the tests' laps need to
/// be a few steps at least: 3 bits leave 3 steps with targets 5 ahead, and only 1 with
/// targets 7 ahead, so those builds need 4 (9 steps).
#[cfg(rcuref_hooks)]
pub(crate) const MIN_GP_BITS: u32 = if MAX_AHEAD <= 5 { 3 } else { 4 };

/// Whether a wait step at `g` (odd) is the first of a grace period that ends at a
/// multiple of `STEPS_PER_GP` (`g % 4 == 1`), rather than its second (`g % 4 == 3`).
/// Where heavy fences run, only first waits need one (`heavy`'s module docs, "One fence
/// per grace period").
#[cfg(rcuref_fences)]
#[inline(always)]
pub(crate) const fn is_first_wait(g: u32) -> bool {
    g & 3 == 1
}
/// The raw cookie that is always done ([`Rcu::completed`](super::Rcu::completed), Linux's
/// `RCU_GET_STATE_COMPLETED`): `u32::MAX`, odd, and a real target is always even
/// (`gp::cookie_target`: a grace period's end, even, or a multiple of 4), so
/// no cookie a domain hands out can be taken for it. (Not 1: tests drive a small counter
/// to each odd value with `cookie_from_raw`, and a completed 1 stopped them.) Compared
/// before the counter's mask, which in test builds is narrower than 32 bits.
pub(crate) const COMPLETED: u32 = u32::MAX;
/// Unfinished cookies a domain can have at once with distinct targets: without heavy
/// fences, the even targets 1 to `MAX_AHEAD` steps ahead of the counter (three while a
/// wait is in progress, two otherwise); with them, the multiples of 4 up to 7 steps
/// ahead (two). One bound for every build; Linux's `NUM_ACTIVE_RCU_POLL_OLDSTATE`.
pub(crate) const ACTIVE_COOKIES: usize = 3;
/// Attempts one `poll` makes at most: a fresh cookie's whole distance (`MAX_AHEAD`, 5 or
/// 7 steps) from any point, with room for compare-exchanges lost to other drivers (each
/// of which is progress too), so that one poll with no reader in the way ends any fresh
/// cookie's grace period (`tests/polled.rs`). This is what keeps `poll` from ever
/// looping for long, whatever cookie it is given.
pub(crate) const MAX_TRIES: u32 = 2 * STEPS_PER_GP;

/// The counter's width as a mask: all 32 bits, except in test builds that shrink it to
/// make laps short (`mutants::set_gp_bits`).
#[inline(always)]
pub(crate) fn mask() -> u32 {
    #[cfg(rcuref_hooks)]
    let m = crate::mutants::gp_mask();
    #[cfg(not(rcuref_hooks))]
    let m = u32::MAX;
    m
}

/// `g` advanced by `k` steps, wrapping at the counter's width.
#[inline(always)]
pub(crate) fn plus(g: u32, k: u32) -> u32 {
    g.wrapping_add(k) & mask()
}

/// The phase readers record at step `g` of the counter: 0, 1, 1, 0 for steps 0..4.
#[inline(always)]
pub(crate) const fn phase(g: u32) -> u32 {
    (g.wrapping_add(1) >> 1) & 1
}

/// The phase word's second bit (feature `auto-fence`): set by a flip, or by a reader's
/// registration (`Rcu::mark_heavy_if_decided`), that found the read side's mode
/// already decided heavy, so the outermost lock that loads the phase
/// word (it does anyway) may take the compiler fence without a second load
/// (`sync::reader_fence_after_phase`). The mode never changes once decided, so a word
/// with this bit says what the global mode says, whenever its store lands. Bit 0 is the
/// phase; slot words take only that (`entered`).
#[cfg(rcuref_auto)]
pub(crate) const PHASE_HEAVY: u32 = 2;

/// The phase part of a phase word (without `PHASE_HEAVY`).
#[inline(always)]
pub(crate) const fn phase_in_word(w: u32) -> u32 {
    w & 1
}

/// Whether the counter at `g` has reached `target`: the target is not 1 to `MAX_AHEAD`
/// steps ahead. (A target further ahead can only be from a past lap, or not a cookie.)
#[inline(always)]
pub(crate) fn reached(g: u32, target: u32) -> bool {
    let ahead = target.wrapping_sub(g) & mask();
    ahead == 0 || ahead > MAX_AHEAD
}

/// Which half of the counter's range `g` lies in (see the lap guard in `gp::advance`).
#[inline(always)]
pub(crate) fn half(g: u32) -> usize {
    usize::from(g & mask() > mask() >> 1)
}
