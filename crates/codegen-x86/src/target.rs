//! CPU features and target selection: [`CpuFeatures`], [`TargetCpu`], [`Target`].
//!
//! The features that matter to the backend are detected at run time with
//! `is_x86_feature_detected!` ([`CpuFeatures::host`]); nothing assumes
//! AVX-512. A [`TargetCpu`] names what code may use (`native`, the host's
//! features; `x86-64-v3`, AVX2 + FMA; `x86-64-v4`, v3 plus AVX-512 F/BW/CD/DQ/VL),
//! and [`Target::for_running`] resolves it against the host: a target that
//! needs features this CPU lacks is an error listing them, since code compiled
//! for it would fault here. AVX-512 VNNI and AVX-VNNI are not part of any
//! x86-64 level; `native` includes them when the host has them.
//!
//! Invariants: a [`Target`] built by [`Target::for_running`] only enables
//! features the host has; every kernel checks the features it emits against
//! the target, so no instruction outside the target is ever generated.

use crate::error::{CodegenError, CodegenErrorKind};
use std::fmt;
use std::str::FromStr;

/// The instruction-set extensions the backend uses or may use.
#[derive(Copy, Clone, PartialEq, Eq, Hash, Debug, Default)]
pub struct CpuFeatures {
    /// AVX (VEX encoding, 256-bit float vectors).
    pub avx: bool,
    /// AVX2 (256-bit integer vectors): the baseline of every kernel.
    pub avx2: bool,
    /// FMA3.
    pub fma: bool,
    /// BMI1.
    pub bmi1: bool,
    /// BMI2.
    pub bmi2: bool,
    /// F16C (f16 ↔ f32 conversions).
    pub f16c: bool,
    /// LZCNT.
    pub lzcnt: bool,
    /// MOVBE.
    pub movbe: bool,
    /// AVX-512 Foundation.
    pub avx512f: bool,
    /// AVX-512 byte and word instructions.
    pub avx512bw: bool,
    /// AVX-512 conflict detection.
    pub avx512cd: bool,
    /// AVX-512 doubleword and quadword instructions.
    pub avx512dq: bool,
    /// AVX-512 vector length extensions (128/256-bit EVEX).
    pub avx512vl: bool,
    /// AVX-512 VNNI (`vpdpbusd` on zmm).
    pub avx512vnni: bool,
    /// AVX-VNNI (`vpdpbusd` with a VEX encoding, on ymm).
    pub avxvnni: bool,
}

/// One feature's name (as `is_x86_feature_detected!` spells it) and field.
type FeatureField = (&'static str, fn(&mut CpuFeatures) -> &mut bool);

/// Every feature with its name, in a stable order (for messages and tests).
const FEATURE_FIELDS: [FeatureField; 15] = [
    ("avx", |f| &mut f.avx),
    ("avx2", |f| &mut f.avx2),
    ("fma", |f| &mut f.fma),
    ("bmi1", |f| &mut f.bmi1),
    ("bmi2", |f| &mut f.bmi2),
    ("f16c", |f| &mut f.f16c),
    ("lzcnt", |f| &mut f.lzcnt),
    ("movbe", |f| &mut f.movbe),
    ("avx512f", |f| &mut f.avx512f),
    ("avx512bw", |f| &mut f.avx512bw),
    ("avx512cd", |f| &mut f.avx512cd),
    ("avx512dq", |f| &mut f.avx512dq),
    ("avx512vl", |f| &mut f.avx512vl),
    ("avx512vnni", |f| &mut f.avx512vnni),
    ("avxvnni", |f| &mut f.avxvnni),
];

impl CpuFeatures {
    /// No features at all (what a non-x86-64 host reports).
    pub const NONE: CpuFeatures = CpuFeatures {
        avx: false,
        avx2: false,
        fma: false,
        bmi1: false,
        bmi2: false,
        f16c: false,
        lzcnt: false,
        movbe: false,
        avx512f: false,
        avx512bw: false,
        avx512cd: false,
        avx512dq: false,
        avx512vl: false,
        avx512vnni: false,
        avxvnni: false,
    };

    /// The x86-64-v3 level: AVX, AVX2, FMA, BMI1/2, F16C, LZCNT, MOVBE.
    pub const X86_64_V3: CpuFeatures = CpuFeatures {
        avx: true,
        avx2: true,
        fma: true,
        bmi1: true,
        bmi2: true,
        f16c: true,
        lzcnt: true,
        movbe: true,
        ..CpuFeatures::NONE
    };

    /// The x86-64-v4 level: v3 plus AVX-512 F, BW, CD, DQ and VL.
    pub const X86_64_V4: CpuFeatures = CpuFeatures {
        avx512f: true,
        avx512bw: true,
        avx512cd: true,
        avx512dq: true,
        avx512vl: true,
        ..CpuFeatures::X86_64_V3
    };

    /// The features of the CPU this process runs on, detected now.
    pub fn host() -> CpuFeatures {
        #[cfg(target_arch = "x86_64")]
        {
            CpuFeatures {
                avx: std::arch::is_x86_feature_detected!("avx"),
                avx2: std::arch::is_x86_feature_detected!("avx2"),
                fma: std::arch::is_x86_feature_detected!("fma"),
                bmi1: std::arch::is_x86_feature_detected!("bmi1"),
                bmi2: std::arch::is_x86_feature_detected!("bmi2"),
                f16c: std::arch::is_x86_feature_detected!("f16c"),
                lzcnt: std::arch::is_x86_feature_detected!("lzcnt"),
                movbe: std::arch::is_x86_feature_detected!("movbe"),
                avx512f: std::arch::is_x86_feature_detected!("avx512f"),
                avx512bw: std::arch::is_x86_feature_detected!("avx512bw"),
                avx512cd: std::arch::is_x86_feature_detected!("avx512cd"),
                avx512dq: std::arch::is_x86_feature_detected!("avx512dq"),
                avx512vl: std::arch::is_x86_feature_detected!("avx512vl"),
                avx512vnni: std::arch::is_x86_feature_detected!("avx512vnni"),
                avxvnni: std::arch::is_x86_feature_detected!("avxvnni"),
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            CpuFeatures::NONE
        }
    }

    /// The names of the features that are on, in a stable order.
    pub fn names(&self) -> Vec<&'static str> {
        let mut copy = *self;
        FEATURE_FIELDS.iter().filter(|(_, field)| *field(&mut copy)).map(|(name, _)| *name).collect()
    }

    /// The features of `self` that `available` lacks.
    pub fn missing_from(&self, available: &CpuFeatures) -> CpuFeatures {
        let (mut wanted, mut have) = (*self, *available);
        let mut missing = CpuFeatures::NONE;
        for (_, field) in FEATURE_FIELDS {
            *field(&mut missing) = *field(&mut wanted) && !*field(&mut have);
        }
        missing
    }

    /// Every feature, each alone, in the order of [`CpuFeatures::names`].
    pub fn each() -> Vec<CpuFeatures> {
        FEATURE_FIELDS
            .iter()
            .map(|(_, field)| {
                let mut one = CpuFeatures::NONE;
                *field(&mut one) = true;
                one
            })
            .collect()
    }

    /// The features of `self` and of `other`.
    pub fn union(&self, other: &CpuFeatures) -> CpuFeatures {
        let (mut both, mut other) = (*self, *other);
        for (_, field) in FEATURE_FIELDS {
            *field(&mut both) |= *field(&mut other);
        }
        both
    }

    /// Every feature of `self` is in `available`.
    pub fn is_subset_of(&self, available: &CpuFeatures) -> bool {
        self.missing_from(available) == CpuFeatures::NONE
    }
}

impl fmt::Display for CpuFeatures {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names = self.names();
        if names.is_empty() {
            f.write_str("(none)")
        } else {
            f.write_str(&names.join(", "))
        }
    }
}

/// The CPU that generated code is for, as `--target-cpu` names it.
#[derive(Copy, Clone, PartialEq, Eq, Hash, Debug, Default)]
pub enum TargetCpu {
    /// Whatever the host has, detected at run time.
    #[default]
    Native,
    /// The x86-64-v3 level (AVX2 + FMA), [`CpuFeatures::X86_64_V3`].
    X86_64V3,
    /// The x86-64-v4 level (AVX-512), [`CpuFeatures::X86_64_V4`].
    X86_64V4,
}

impl TargetCpu {
    /// Every spelling `--target-cpu` accepts, in order.
    pub const NAMES: [&'static str; 3] = ["native", "x86-64-v3", "x86-64-v4"];

    /// The name `--target-cpu` uses.
    pub fn name(self) -> &'static str {
        match self {
            TargetCpu::Native => "native",
            TargetCpu::X86_64V3 => "x86-64-v3",
            TargetCpu::X86_64V4 => "x86-64-v4",
        }
    }

    /// The features code for this target may use, with `host` standing for
    /// `native`.
    pub fn features(self, host: &CpuFeatures) -> CpuFeatures {
        match self {
            TargetCpu::Native => *host,
            TargetCpu::X86_64V3 => CpuFeatures::X86_64_V3,
            TargetCpu::X86_64V4 => CpuFeatures::X86_64_V4,
        }
    }
}

impl fmt::Display for TargetCpu {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for TargetCpu {
    type Err = CodegenError;

    fn from_str(s: &str) -> Result<TargetCpu, CodegenError> {
        match s {
            "native" => Ok(TargetCpu::Native),
            "x86-64-v3" => Ok(TargetCpu::X86_64V3),
            "x86-64-v4" => Ok(TargetCpu::X86_64V4),
            _ => Err(CodegenError::new(
                CodegenErrorKind::InvalidInput,
                format!("unknown target CPU '{s}'; expected one of {}", TargetCpu::NAMES.join(", ")),
            )),
        }
    }
}

/// A resolved target: the CPU it was asked for and the features code may use.
#[derive(Copy, Clone, PartialEq, Eq, Debug)]
pub struct Target {
    /// The requested CPU.
    pub cpu: TargetCpu,
    /// The features generated code may use.
    pub features: CpuFeatures,
}

impl Target {
    /// The target `cpu` for code that runs in this process: an error naming
    /// the missing features when this CPU lacks some that `cpu` implies.
    pub fn for_running(cpu: TargetCpu) -> Result<Target, CodegenError> {
        Target::for_running_on(cpu, &CpuFeatures::host())
    }

    /// [`Target::for_running`] on a CPU with features `host`.
    pub fn for_running_on(cpu: TargetCpu, host: &CpuFeatures) -> Result<Target, CodegenError> {
        let features = cpu.features(host);
        let missing = features.missing_from(host);
        if missing != CpuFeatures::NONE {
            return Err(CodegenError::new(
                CodegenErrorKind::MissingCpuFeatures,
                format!("target CPU {cpu} needs {missing}, which this CPU lacks (it has {host}); use --target-cpu=native"),
            ));
        }
        Ok(Target { cpu, features })
    }

    /// The target `cpu` for code that may run on another machine (an object
    /// file): a level's own features, the host's for `native`, without
    /// checking that this CPU has them. Code compiled for it must not run
    /// here unless [`Target::for_running`] accepts the same `cpu`.
    pub fn named(cpu: TargetCpu) -> Target {
        Target { cpu, features: cpu.features(&CpuFeatures::host()) }
    }

    /// The int8 multiply-accumulates per cycle per core that profiles
    /// measure against, with how: 64 with VNNI (`vpdpbusd`), 32 with AVX2
    /// (`vpmaddubsw` + `vpmaddwd`).
    pub fn int8_peak_macs_per_cycle(&self) -> (u32, &'static str) {
        if self.features.avx512vnni || self.features.avxvnni {
            (64, "vpdpbusd")
        } else {
            (32, "vpmaddubsw + vpmaddwd")
        }
    }

    /// The host's own target (`native`).
    pub fn host() -> Target {
        let features = CpuFeatures::host();
        Target { cpu: TargetCpu::Native, features }
    }

    /// An error unless every feature of `needed` is available; `what` names the
    /// code that needs them.
    pub fn require(&self, needed: &CpuFeatures, what: &str) -> Result<(), CodegenError> {
        let missing = needed.missing_from(&self.features);
        if missing == CpuFeatures::NONE {
            Ok(())
        } else {
            Err(CodegenError::new(
                CodegenErrorKind::MissingCpuFeatures,
                format!("{what} needs {missing}, which target CPU {} does not have", self.cpu),
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn target_names_parse_and_print() {
        for name in TargetCpu::NAMES {
            let cpu: TargetCpu = name.parse().unwrap();
            assert_eq!(cpu.to_string(), name);
        }
        let e = "skylake".parse::<TargetCpu>().unwrap_err();
        assert_eq!(e.message, "unknown target CPU 'skylake'; expected one of native, x86-64-v3, x86-64-v4");
    }

    #[test]
    fn levels_nest() {
        assert!(CpuFeatures::X86_64_V3.is_subset_of(&CpuFeatures::X86_64_V4));
        assert!(!CpuFeatures::X86_64_V4.is_subset_of(&CpuFeatures::X86_64_V3));
        assert_eq!(
            CpuFeatures::X86_64_V4.missing_from(&CpuFeatures::X86_64_V3).names(),
            ["avx512f", "avx512bw", "avx512cd", "avx512dq", "avx512vl"]
        );
        assert_eq!(
            CpuFeatures::X86_64_V3.names(),
            ["avx", "avx2", "fma", "bmi1", "bmi2", "f16c", "lzcnt", "movbe"]
        );
        let vnni = CpuFeatures { avx512vnni: true, avxvnni: true, ..CpuFeatures::NONE };
        assert_eq!(vnni.missing_from(&CpuFeatures::X86_64_V4), vnni, "VNNI is not part of x86-64-v4");
    }

    #[test]
    fn v4_on_an_avx2_machine_is_an_error_naming_what_is_missing() {
        let avx2_host = CpuFeatures::X86_64_V3;
        let e = Target::for_running_on(TargetCpu::X86_64V4, &avx2_host).unwrap_err();
        assert_eq!(e.kind, CodegenErrorKind::MissingCpuFeatures);
        assert!(
            e.message
                .starts_with("target CPU x86-64-v4 needs avx512f, avx512bw, avx512cd, avx512dq, avx512vl,"),
            "{}",
            e.message
        );
        assert!(Target::for_running_on(TargetCpu::X86_64V3, &avx2_host).is_ok());
        let v4_host = CpuFeatures { avx512vnni: true, ..CpuFeatures::X86_64_V4 };
        let native = Target::for_running_on(TargetCpu::Native, &v4_host).unwrap();
        assert!(native.features.avx512vnni);
        let v4 = Target::for_running_on(TargetCpu::X86_64V4, &v4_host).unwrap();
        assert!(!v4.features.avx512vnni, "a level enables only its own features");
    }

    #[test]
    fn named_targets_do_not_depend_on_the_host() {
        assert_eq!(Target::named(TargetCpu::X86_64V4).features, CpuFeatures::X86_64_V4);
        assert_eq!(Target::named(TargetCpu::X86_64V3).features, CpuFeatures::X86_64_V3);
        assert_eq!(Target::named(TargetCpu::Native), Target::host());
    }

    #[test]
    fn v3_on_an_older_machine_is_an_error() {
        let sse_only = CpuFeatures::NONE;
        let e = Target::for_running_on(TargetCpu::X86_64V3, &sse_only).unwrap_err();
        assert!(e.message.contains("needs avx, avx2, fma"), "{}", e.message);
        let native = Target::for_running_on(TargetCpu::Native, &sse_only).unwrap();
        let e = native
            .require(&CpuFeatures { avx2: true, ..CpuFeatures::NONE }, "the quantize kernel")
            .unwrap_err();
        assert_eq!(e.message, "the quantize kernel needs avx2, which target CPU native does not have");
    }

    #[test]
    fn host_detection_agrees_with_the_standard_library() {
        let host = CpuFeatures::host();
        #[cfg(target_arch = "x86_64")]
        {
            assert_eq!(host.avx2, std::arch::is_x86_feature_detected!("avx2"));
            assert_eq!(host.avx512vnni, std::arch::is_x86_feature_detected!("avx512vnni"));
        }
        // Whatever the host has, `native` runs on it.
        assert_eq!(Target::for_running(TargetCpu::Native).unwrap().features, host);
        println!("host CPU features: {host}");
    }
}
