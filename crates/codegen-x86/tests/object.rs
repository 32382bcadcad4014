//! Object files, headers and listings (`object/`: `mod.rs`, `entry.rs`, `header.rs`,
//! `listing.rs`): the ELF layout read back with the `object` crate, the
//! entry stubs run in this process after applying their relocations by hand
//! (bit for bit against the interpreter, float and quantized entries, with
//! enough buffers to pass some on the stack), the header's macros and
//! prototypes, and a snapshot of a small listing. `tools/qopt/tests/qcompile.rs`
//! links the same objects with the system C compiler.

mod common;

use common::*;
use memmap2::MmapMut;
use object::read::{Object as _, ObjectSection as _, ObjectSymbol as _};
use object::{RelocationFlags, RelocationTarget, SectionKind, SymbolKind};
use qopt_codegen_x86::{
    c_header, compile, listing, text_image, write_object, AsmSyntax, DataSection, EntryKind, Lowerings,
    ObjectOptions, Program, Target, TargetCpu,
};
use qopt_interp::{run_function, KernelRegistry, Tensor};
use qopt_ir_core::{Context, Module};

const A: &str = "!qnn.uniform<i8:f32, 0.05:-3>";
const B: &str = "!qnn.uniform<u8:f32, 0.11:120>";
const C: &str = "!qnn.uniform<i8<-127:127>:f32, 0.25:0>";
const D: &str = "!qnn.uniform<u4:f32, 0.7:3>";

/// One input through quantize, flatten, requantize and reshape to a
/// dequantize, and a quantized constant dequantized as a second output (it
/// lives in rodata). `@core` is the same without the boundary conversions.
fn chain_module() -> String {
    let constant = format!(
        "fp.constant() {{value = dense<[-128, -3, 0, 127, 5]> : tensor<5x{A}>}} : () -> tensor<5x{A}> loc(\"table\")"
    );
    let body = format!(
        "    %f = fp.flatten(%q) {{axis = 0}} : (tensor<3x37x{A}>) -> tensor<1x111x{A}> loc(\"flatten\")
    %r = qnn.requantize(%f) {{rounding = \"half_to_even\"}} : (tensor<1x111x{A}>) -> tensor<1x111x{B}> loc(\"requantize\")
    %s = fp.reshape(%r) {{shape = [111]}} : (tensor<1x111x{B}>) -> tensor<111x{B}> loc(\"reshape\")
    %c = {constant}"
    );
    format!(
        "module {{
  func.func @main(%x: tensor<3x37xf32>) -> (tensor<111xf32>, tensor<5xf32>) {{
    %q = qnn.quantize(%x) : (tensor<3x37xf32>) -> tensor<3x37x{A}> loc(\"input.quantize\")
{body}
    %y = qnn.dequantize(%s) : (tensor<111x{B}>) -> tensor<111xf32> loc(\"output.dequantize\")
    %z = qnn.dequantize(%c) : (tensor<5x{A}>) -> tensor<5xf32> loc(\"table.dequantize\")
    func.return %y, %z : tensor<111xf32>, tensor<5xf32>
  }}
  func.func @core(%q: tensor<3x37x{A}>) -> (tensor<111x{B}>, tensor<5x{A}>) {{
{body}
    func.return %s, %c : tensor<111x{B}>, tensor<5x{A}>
  }}
}}"
    )
}

/// Four inputs and four outputs (9 arguments with the workspace: three on
/// the stack), each a requantization between different types and roundings.
fn many_module() -> String {
    let ports = [
        (5, A, B, "half_up"),
        (9, B, C, "half_away_from_zero"),
        (16, C, D, "half_to_even"),
        (33, D, A, "half_up"),
    ];
    let mut main_args = Vec::new();
    let mut core_args = Vec::new();
    let (mut main_body, mut core_body) = (String::new(), String::new());
    let (mut main_ret, mut core_ret) = (Vec::new(), Vec::new());
    for (i, (n, from, to, rounding)) in ports.iter().enumerate() {
        main_args.push(format!("%x{i}: tensor<{n}xf32>"));
        core_args.push(format!("%q{i}: tensor<{n}x{from}>"));
        let requantize = format!(
            "    %r{i} = qnn.requantize(%q{i}) {{rounding = \"{rounding}\"}} : (tensor<{n}x{from}>) -> tensor<{n}x{to}> loc(\"requantize{i}\")\n"
        );
        main_body += &format!(
            "    %q{i} = qnn.quantize(%x{i}) : (tensor<{n}xf32>) -> tensor<{n}x{from}> loc(\"quantize{i}\")\n{requantize}    %y{i} = qnn.dequantize(%r{i}) : (tensor<{n}x{to}>) -> tensor<{n}xf32> loc(\"dequantize{i}\")\n"
        );
        core_body += &requantize;
        main_ret.push((format!("%y{i}"), format!("tensor<{n}xf32>")));
        core_ret.push((format!("%r{i}"), format!("tensor<{n}x{to}>")));
    }
    let ret = |r: &[(String, String)]| {
        let names: Vec<&str> = r.iter().map(|(v, _)| v.as_str()).collect();
        let types: Vec<&str> = r.iter().map(|(_, t)| t.as_str()).collect();
        (format!("{} : {}", names.join(", "), types.join(", ")), types.join(", "))
    };
    let ((main_return, main_types), (core_return, core_types)) = (ret(&main_ret), ret(&core_ret));
    format!(
        "module {{
  func.func @main({}) -> ({main_types}) {{
{main_body}    func.return {main_return}
  }}
  func.func @core({}) -> ({core_types}) {{
{core_body}    func.return {core_return}
  }}
}}",
        main_args.join(", "),
        core_args.join(", ")
    )
}

fn compile_for(ctx: &Context, module: &Module, function: &str, cpu: TargetCpu) -> Program {
    compile(ctx, module, function, &Lowerings::builtin(), &Target::named(cpu))
        .unwrap_or_else(|e| panic!("compiling @{function}: {e}"))
}

#[test]
fn the_quantized_interface_is_found_at_the_boundary() {
    let mut ctx = context();
    let module = parse(&mut ctx, &chain_module());
    let program = compile_for(&ctx, &module, "main", TargetCpu::X86_64V3);
    let q = program.quantized.as_ref().expect("a quantized interface");
    assert_eq!(q.inputs.len(), 1);
    assert_eq!(q.outputs.len(), 2);
    assert_eq!(program.kernels[q.inputs[0].kernel].op_name, "qnn.quantize");
    assert_eq!(program.kernels[q.outputs[0].kernel].op_name, "qnn.dequantize");
    assert!(matches!(q.outputs[1].place, qopt_codegen_x86::abi::Place::Rodata(_)), "{:?}", q.outputs[1]);
    assert_eq!(q.inputs[0].signature.shape, [3, 37]);
    assert_eq!((q.inputs[0].quant.scale, q.inputs[0].quant.zero_point), (0.05, -3));
    assert_eq!(q.outputs[0].signature.type_text, format!("tensor<111x{B}>"));

    // Functions without the boundary have none: an argument used twice, a
    // result that is not a dequantize, a dequantize result returned twice.
    for body in [
        format!(
            "func.func @main(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {{
  %q = qnn.quantize(%x) : (tensor<4xf32>) -> tensor<4x{A}>
  %y = qnn.dequantize(%q) : (tensor<4x{A}>) -> tensor<4xf32>
  func.return %y, %x : tensor<4xf32>, tensor<4xf32>
}}"
        ),
        format!(
            "func.func @main(%x: tensor<4xf32>) -> tensor<4x{A}> {{
  %q = qnn.quantize(%x) : (tensor<4xf32>) -> tensor<4x{A}>
  func.return %q : tensor<4x{A}>
}}"
        ),
        format!(
            "func.func @main(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {{
  %q = qnn.quantize(%x) : (tensor<4xf32>) -> tensor<4x{A}>
  %y = qnn.dequantize(%q) : (tensor<4x{A}>) -> tensor<4xf32>
  func.return %y, %y : tensor<4xf32>, tensor<4xf32>
}}"
        ),
    ] {
        let mut ctx = context();
        let module = parse(&mut ctx, &format!("module {{\n{body}\n}}"));
        let program = compile_for(&ctx, &module, "main", TargetCpu::X86_64V3);
        assert!(program.quantized.is_none(), "{body}");
        let image = text_image(&program, "m").unwrap();
        let kinds: Vec<EntryKind> = image.entries.iter().map(|e| e.kind).collect();
        assert_eq!(kinds, [EntryKind::Run, EntryKind::RunWithWorkspace]);
        let header = c_header(&program, &ObjectOptions::new("m", "m.qir").unwrap()).unwrap();
        assert!(header.contains("#define M_HAS_RUN_QUANTIZED 0\n"), "{header}");
        assert!(!header.contains("m_run_quantized"), "{header}");
    }
}

#[test]
fn the_object_file_has_the_documented_layout() {
    let mut ctx = context();
    let module = parse(&mut ctx, &chain_module());
    let program = compile_for(&ctx, &module, "main", TargetCpu::X86_64V3);
    let options = ObjectOptions::new("net", "chain.qir").unwrap();
    let bytes = write_object(&program, &options).unwrap();
    let image = text_image(&program, "net").unwrap();
    let file = object::File::parse(bytes.as_slice()).expect("a valid object file");
    assert_eq!(file.format(), object::BinaryFormat::Elf);
    assert_eq!(file.architecture(), object::Architecture::X86_64);
    assert_eq!(file.kind(), object::ObjectKind::Relocatable);

    let text = file.section_by_name(".text").expect(".text");
    assert_eq!(text.kind(), SectionKind::Text);
    assert_eq!(text.align(), 64);
    assert_eq!(text.data().unwrap(), image.text.as_slice());
    let rodata = file.section_by_name(".rodata").expect(".rodata");
    assert_eq!(rodata.align(), 64);
    assert_eq!(rodata.data().unwrap(), program.rodata.as_slice());
    let bss = file.section_by_name(".bss").expect(".bss");
    assert_eq!(bss.kind(), SectionKind::UninitializedData);
    // The static arena, then the CPU check's byte in a block of its own.
    let arena = program.arena_bytes.next_multiple_of(64) as u64;
    assert_eq!((bss.size(), bss.align()), (arena + 64, 64));
    assert!(program.arena_bytes > 0 && !program.rodata.is_empty());
    let stack = file.section_by_name(".note.GNU-stack").expect(".note.GNU-stack");
    assert_eq!(stack.size(), 0);

    let mut globals: Vec<(String, u64, u64)> = file
        .symbols()
        .filter(|s| s.is_global())
        .map(|s| {
            assert_eq!(s.kind(), SymbolKind::Text);
            assert_eq!(s.section_index(), Some(text.index()));
            (s.name().unwrap().to_string(), s.address(), s.size())
        })
        .collect();
    globals.sort();
    let mut want: Vec<(String, u64, u64)> =
        image.entries.iter().map(|e| (e.name.clone(), e.offset as u64, e.len as u64)).collect();
    want.sort();
    assert_eq!(globals, want);
    let names: Vec<&str> = want.iter().map(|(n, _, _)| n.as_str()).collect();
    assert_eq!(names, ["net_run", "net_run_quantized", "net_run_with_workspace"]);
    for (k, kernel) in program.kernels.iter().enumerate() {
        let s = file.symbol_by_name(&format!("net.kernel{k}")).expect("a kernel symbol");
        assert!(s.is_local());
        assert_eq!((s.address(), s.size()), (kernel.offset as u64, kernel.len as u64));
    }
    let file_symbol = file.symbols().find(|s| s.kind() == SymbolKind::File).expect("a file symbol");
    assert_eq!(file_symbol.name().unwrap(), "chain.qir");

    let relocations: Vec<_> = text.relocations().collect();
    assert_eq!(relocations.len(), image.references.len());
    // Every stub takes .bss for the CPU check's byte; run and run_quantized
    // take it again for the arena, and all three take .rodata.
    assert_eq!(relocations.len(), 8);
    for (offset, r) in relocations {
        assert_eq!(r.flags(), RelocationFlags::Elf { r_type: object::elf::R_X86_64_PC32 });
        assert_eq!(r.addend(), -4);
        let RelocationTarget::Symbol(index) = r.target() else { panic!("a symbol target") };
        let symbol = file.symbol_by_index(index).unwrap();
        assert_eq!(symbol.kind(), SymbolKind::Section);
        let section = file.section_by_index(symbol.section_index().unwrap()).unwrap();
        let reference = image.references.iter().find(|x| x.offset as u64 == offset).expect("a listed field");
        assert_eq!(section.name().unwrap(), reference.section.section_name());
        assert_eq!(&image.text[offset as usize..offset as usize + 4], &[0; 4], "the field is for the linker");
        assert!(
            image.entries.iter().any(|e| (e.offset..e.offset + e.len).contains(&(offset as usize))),
            "relocations are in stubs only"
        );
    }
}

/// The `.text` image mapped executable next to its data, relocated by hand
/// as a linker would: `.rodata` then `.bss` in one read-write mapping.
struct Loaded {
    text: memmap2::Mmap,
    _data: MmapMut,
    entries: Vec<(EntryKind, usize)>,
}

/// `None` (with a notice) when the two mappings are too far apart for
/// 32-bit displacements, which the linker would never allow to happen.
fn load(program: &Program, test: &str) -> Option<Loaded> {
    let image = text_image(program, "model").unwrap();
    let bss_offset = program.rodata.len().next_multiple_of(64);
    // .bss: the arena, then the CPU check's byte in a block of its own.
    let mut data = MmapMut::map_anon(bss_offset + program.arena_bytes.next_multiple_of(64) + 64).unwrap();
    data[..program.rodata.len()].copy_from_slice(&program.rodata);
    let mut text = MmapMut::map_anon(image.text.len()).unwrap();
    text.copy_from_slice(&image.text);
    let text_address = text.as_ptr() as i64;
    for r in &image.references {
        let target = data.as_ptr() as i64
            + match r.section {
                DataSection::Rodata => 0,
                DataSection::Arena | DataSection::CpuCheck => bss_offset as i64,
            };
        let Ok(value) = i32::try_from(target - 4 - (text_address + r.offset as i64)) else {
            println!("notice: {test}: skipped running the stubs, the test's mappings are over 2 GiB apart");
            return None;
        };
        text[r.offset..r.offset + 4].copy_from_slice(&value.to_le_bytes());
    }
    let text = text.make_exec().unwrap();
    Some(Loaded { text, _data: data, entries: image.entries.iter().map(|e| (e.kind, e.offset)).collect() })
}

impl Loaded {
    /// Calls entry `kind` with `args` (1 to 4, 8 or 9 pointers) and returns its result.
    fn call(&self, kind: EntryKind, args: &[*mut u8]) -> i32 {
        let offset = self.entries.iter().find(|(k, _)| *k == kind).expect("the entry").1;
        type P = *mut u8;
        // SAFETY: the entry is a System V function of `args.len()` pointer
        // arguments returning int, mapped executable with its relocations
        // applied; the buffers match the program's signature (checked by
        // the caller's construction from the interpreter's tensors).
        unsafe {
            let f = self.text.as_ptr().add(offset);
            let a = args;
            match a.len() {
                1 => std::mem::transmute::<*const u8, extern "C" fn(P) -> i32>(f)(a[0]),
                2 => std::mem::transmute::<*const u8, extern "C" fn(P, P) -> i32>(f)(a[0], a[1]),
                3 => std::mem::transmute::<*const u8, extern "C" fn(P, P, P) -> i32>(f)(a[0], a[1], a[2]),
                4 => std::mem::transmute::<*const u8, extern "C" fn(P, P, P, P) -> i32>(f)(
                    a[0], a[1], a[2], a[3],
                ),
                8 => std::mem::transmute::<*const u8, extern "C" fn(P, P, P, P, P, P, P, P) -> i32>(f)(
                    a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7],
                ),
                9 => std::mem::transmute::<*const u8, extern "C" fn(P, P, P, P, P, P, P, P, P) -> i32>(f)(
                    a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8],
                ),
                n => panic!("no call shape for {n} arguments"),
            }
        }
    }
}

/// Raw bytes of each tensor.
fn bytes_of(tensors: &[Tensor]) -> Vec<Vec<u8>> {
    tensors.iter().map(|t| t.to_raw().data).collect()
}

/// Runs every entry of `@main` of `text` (and `@core` for the quantized one)
/// and compares the outputs' bytes with the interpreter's.
fn check_entries(text: &str, test: &str) {
    let mut ctx = context();
    let module = parse(&mut ctx, text);
    let program = compile_for(&ctx, &module, "main", TargetCpu::Native);
    let Some(loaded) = load(&program, test) else { return };
    for seed in 0..3 {
        let inputs = random_inputs(&ctx, &module, "main", seed);
        let want =
            bytes_of(&run_function(&ctx, &module, "main", &inputs, &KernelRegistry::standard()).unwrap());
        let core_inputs = random_inputs(&ctx, &module, "core", seed);
        let core_want = bytes_of(
            &run_function(&ctx, &module, "core", &core_inputs, &KernelRegistry::standard()).unwrap(),
        );
        for kind in [EntryKind::Run, EntryKind::RunWithWorkspace, EntryKind::RunQuantized] {
            let (inputs, want) =
                if kind == EntryKind::RunQuantized { (&core_inputs, &core_want) } else { (&inputs, &want) };
            let mut in_bytes = bytes_of(inputs);
            let mut out_bytes: Vec<Vec<u8>> = want.iter().map(|w| vec![0xAB; w.len()]).collect();
            let mut workspace = vec![0u8; program.arena_bytes + 64];
            let misalign = workspace.as_ptr().align_offset(64);
            let mut args: Vec<*mut u8> = Vec::new();
            if kind == EntryKind::RunWithWorkspace {
                args.push(workspace[misalign..].as_mut_ptr());
            }
            args.extend(in_bytes.iter_mut().map(|b| b.as_mut_ptr()));
            args.extend(out_bytes.iter_mut().map(|b| b.as_mut_ptr()));
            assert_eq!(loaded.call(kind, &args), 0, "{kind:?}");
            assert_eq!(&out_bytes, want, "{test}: {kind:?}, seed {seed}");
            if kind == EntryKind::RunWithWorkspace {
                args[0] = workspace[misalign + 1..].as_mut_ptr();
                assert_eq!(loaded.call(kind, &args), 1, "a misaligned workspace is refused");
                args[0] = std::ptr::null_mut();
                assert_eq!(loaded.call(kind, &args), 1, "a null workspace is refused");
            }
        }
    }
}

#[test]
fn the_entry_points_run_bit_exactly_once_relocated() {
    if !avx2_here("the_entry_points_run_bit_exactly_once_relocated") {
        return;
    }
    check_entries(&chain_module(), "chain");
    check_entries(&many_module(), "many");
}

#[test]
fn the_header_declares_what_the_object_defines() {
    let mut ctx = context();
    let module = parse(&mut ctx, &many_module());
    let program = compile_for(&ctx, &module, "main", TargetCpu::X86_64V4);
    let header = c_header(&program, &ObjectOptions::new("net", "many.qir").unwrap()).unwrap();
    for line in [
        "#define NET_NUM_INPUTS 4",
        "#define NET_NUM_OUTPUTS 4",
        &format!("#define NET_WORKSPACE_BYTES {}", program.arena_bytes),
        "#define NET_WORKSPACE_ALIGNMENT 64",
        "#define NET_HAS_RUN_QUANTIZED 1",
        "#define NET_INPUT3_RANK 1",
        "#define NET_INPUT3_SHAPE { 33 }",
        "#define NET_INPUT3_ELEMENTS 33",
        "#define NET_INPUT3_TYPE float",
        "#define NET_INPUT3_BYTES 132",
        "#define NET_INPUT3_QUANTIZED_TYPE uint8_t",
        "#define NET_INPUT3_SCALE 0.7",
        "#define NET_INPUT3_ZERO_POINT 3",
        "#define NET_INPUT3_QMIN 0",
        "#define NET_INPUT3_QMAX 15",
        "#define NET_OUTPUT3_QUANTIZED_TYPE int8_t",
        "#define NET_OUTPUT3_ZERO_POINT (-3)",
        "#define NET_OUTPUT1_QMIN (-127)",
        "int net_run(const float *input0, const float *input1, const float *input2, const float *input3, float *output0, float *output1, float *output2, float *output3);",
        "int net_run_with_workspace(void *workspace, const float *input0, const float *input1, const float *input2, const float *input3, float *output0, float *output1, float *output2, float *output3);",
        "int net_run_quantized(const int8_t *input0, const uint8_t *input1, const int8_t *input2, const uint8_t *input3, uint8_t *output0, int8_t *output1, uint8_t *output2, int8_t *output3);",
        " * Model:   many.qir, function @main",
        " * Target:  x86-64-v4 (avx, avx2, fma, bmi1, bmi2, f16c, lzcnt, movbe, avx512f, avx512bw, avx512cd, avx512dq, avx512vl)",
        " *     quantized: uint8_t, scale 0.7, zero point 3, range [0, 15]  tensor<33x!qnn.uniform<u4:f32, 0.7:3>>",
        "#ifndef NET_H",
        "#include <stdint.h>",
    ] {
        assert!(header.lines().any(|l| l == line), "missing line {line:?} in\n{header}");
    }
}

#[test]
fn the_listing_names_every_kernel_location_and_entry() {
    let mut ctx = context();
    let module = parse(&mut ctx, &chain_module());
    let program = compile_for(&ctx, &module, "main", TargetCpu::X86_64V3);
    let options = ObjectOptions::new("net", "chain.qir").unwrap();
    for syntax in [AsmSyntax::Intel, AsmSyntax::Att] {
        let text = listing(&program, &options, syntax).unwrap();
        let c = if syntax == AsmSyntax::Intel { ";" } else { "#" };
        for (k, kernel) in program.kernels.iter().enumerate() {
            let header = format!("{c} kernel {k}: {} at {}", kernel.op_name, kernel.location);
            assert!(text.contains(&header), "{header} in\n{text}");
            assert!(text.contains(&format!("\nnet.kernel{k}:\n")));
        }
        for loc in ["input.quantize", "requantize", "output.dequantize", "table.dequantize"] {
            assert!(text.contains(&format!("loc(\"{loc}\")")), "{loc}");
        }
        for entry in ["net_run", "net_run_with_workspace", "net_run_quantized"] {
            assert!(text.contains(&format!("\n{entry}:\n")), "{entry}");
        }
        assert!(text.contains("call    net.kernel0"), "calls name their kernel:\n{text}");
        assert!(text.contains(&format!("{c} R_X86_64_PC32 .bss-4: the arena")));
        assert!(text.contains(&format!("{c} R_X86_64_PC32 .rodata-4: the read-only data")));
        assert!(!text.contains("(bad)"), "everything decodes");
        let replaced = format!("{c} kernel 0 (qnn.quantize) replaced: copy 111 bytes from input0 to arena+");
        assert!(text.contains(&replaced), "{replaced} in\n{text}");
        // The constant sits in rodata after the requantize's parameter block.
        let constant = "(qnn.dequantize) replaced: copy 5 bytes from rodata+128 to output1\n";
        assert!(text.contains(constant), "{constant} in\n{text}");
    }
}

#[test]
fn listing_snapshot() {
    // A function returning its input (one copy kernel) keeps the snapshot
    // small and independent of the conversion kernels' code.
    let mut ctx = context();
    let module = parse(
        &mut ctx,
        "module {\n  func.func @main(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {\n    func.return %x : tensor<2x3xf32>\n  }\n}",
    );
    let program = compile_for(&ctx, &module, "main", TargetCpu::X86_64V3);
    let options = ObjectOptions::for_model("tiny.qir");
    insta::assert_snapshot!(listing(&program, &options, AsmSyntax::Intel).unwrap());
}
