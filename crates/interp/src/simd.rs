//! Wider vectors for plain loops: [`wide`] runs a closure compiled for the
//! widest x86-64 vector ISA the CPU has (AVX-512, else AVX2, else the
//! baseline SSE2 every x86-64 has), picked at run time.
//!
//! The crate is built for baseline x86-64, so the loops the compiler
//! vectorizes on its own use 128-bit registers. A kernel's hot loop written
//! as ordinary Rust inside `wide(|| ...)` is inlined into a function with
//! the wider target features and vectorized for them. The arithmetic is the
//! same on every path (no fused multiply-add is introduced: Rust never
//! contracts `a * b + c`), so the results are identical bit for bit whichever
//! ISA runs; `tests` check that on every path the machine has.

/// A vector instruction set the interpreter's loops can be compiled for.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) enum Isa {
    /// AVX-512F (with AVX2).
    Avx512,
    /// AVX2.
    Avx2,
    /// The x86-64 baseline (SSE2), or any other architecture.
    Base,
}

impl Isa {
    /// The widest ISA this CPU supports.
    pub fn best() -> Isa {
        #[cfg(target_arch = "x86_64")]
        {
            if std::arch::is_x86_feature_detected!("avx512f") {
                return Isa::Avx512;
            }
            if std::arch::is_x86_feature_detected!("avx2") {
                return Isa::Avx2;
            }
        }
        Isa::Base
    }

    /// Every ISA this CPU supports, widest first.
    #[cfg(test)]
    pub fn available() -> Vec<Isa> {
        [Isa::Avx512, Isa::Avx2, Isa::Base]
            .into_iter()
            .filter(|&i| i == Isa::Base || Isa::best() <= i)
            .collect()
    }
}

impl PartialOrd for Isa {
    /// Wider is smaller: `Avx512 < Avx2 < Base`.
    fn partial_cmp(&self, other: &Isa) -> Option<std::cmp::Ordering> {
        let rank = |i: &Isa| match i {
            Isa::Avx512 => 0,
            Isa::Avx2 => 1,
            Isa::Base => 2,
        };
        rank(self).partial_cmp(&rank(other))
    }
}

/// Defines `$name(isa, args...)`: the `#[inline(always)]` function `$body`
/// compiled for `isa`, or for the widest ISA the CPU has when `isa` is
/// wider. For hot loops too large for [`wide`]'s closure to be inlined.
macro_rules! widened {
    ($(#[$doc:meta])* $vis:vis fn $name:ident<$t:ident: $bound:path>($($arg:ident: $ty:ty),* $(,)?) $(-> $ret:ty)? = $body:ident;) => {
        $(#[$doc])*
        $vis fn $name<$t: $bound>(isa: $crate::simd::Isa, $($arg: $ty),*) $(-> $ret)? {
            #[cfg(target_arch = "x86_64")]
            #[target_feature(enable = "avx512f,avx2")]
            unsafe fn on_avx512<$t: $bound>($($arg: $ty),*) $(-> $ret)? {
                $body($($arg),*)
            }
            #[cfg(target_arch = "x86_64")]
            #[target_feature(enable = "avx2")]
            unsafe fn on_avx2<$t: $bound>($($arg: $ty),*) $(-> $ret)? {
                $body($($arg),*)
            }
            let best = $crate::simd::Isa::best();
            match if isa < best { best } else { isa } {
                // SAFETY: never wider than Isa::best(), so the CPU has these features.
                #[cfg(target_arch = "x86_64")]
                $crate::simd::Isa::Avx512 => unsafe { on_avx512($($arg),*) },
                // SAFETY: as above.
                #[cfg(target_arch = "x86_64")]
                $crate::simd::Isa::Avx2 => unsafe { on_avx2($($arg),*) },
                _ => $body($($arg),*),
            }
        }
    };
}
pub(crate) use widened;

/// Runs `f` compiled for the widest ISA the CPU has.
#[inline(always)]
pub(crate) fn wide<R>(f: impl FnOnce() -> R) -> R {
    with_isa(Isa::best(), f)
}

/// Runs `f` compiled for `isa`, which the CPU must support ([`Isa::best`] or narrower).
#[inline(always)]
pub(crate) fn with_isa<R>(isa: Isa, f: impl FnOnce() -> R) -> R {
    match isa {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: `isa` is `Isa::best()` or narrower, so the CPU has AVX-512F.
        Isa::Avx512 if Isa::best() == Isa::Avx512 => unsafe { avx512(f) },
        #[cfg(target_arch = "x86_64")]
        // SAFETY: the CPU has AVX2 (checked here).
        Isa::Avx2 if Isa::best() <= Isa::Avx2 => unsafe { avx2(f) },
        _ => f(),
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx2")]
unsafe fn avx512<R>(f: impl FnOnce() -> R) -> R {
    f()
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn avx2<R>(f: impl FnOnce() -> R) -> R {
    f()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_available_isa_computes_the_same_bits() {
        let xs: Vec<f32> = (0..1000).map(|i| (i as f32 * 0.37).sin() * 10.0).collect();
        let run = |isa| {
            with_isa(isa, || {
                xs.iter().map(|&x| x * (x * (1.0 / 6.0) + 0.5).clamp(0.0, 1.0) + 0.1 * x).collect::<Vec<_>>()
            })
        };
        let base = run(Isa::Base);
        for isa in [Isa::Avx512, Isa::Avx2] {
            if Isa::available().contains(&isa) {
                assert_eq!(run(isa), base, "{isa:?}");
            } else {
                eprintln!("skipping the {isa:?} path: this CPU does not have it");
            }
        }
    }
}
