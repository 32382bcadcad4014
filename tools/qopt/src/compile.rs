//! The compile driver as a library: `qcompile` is
//! `CompileDriver::new("qcompile").main()`, and a downstream crate builds its
//! own compiler the same way after adding its dialects (through the
//! [`Driver`] it wraps). Its ops' lowerings go into the context, from the
//! same setup (`Lowerings::install(ctx)`), so `qrun --backend=x86` finds them
//! too; lowerings given to the driver itself ([`CompileDriver::lowerings_mut`])
//! replace the context's for this tool only:
//!
//! ```no_run
//! use qopt_driver::compile::CompileDriver;
//! let mut compiler = CompileDriver::new("toy-compile");
//! compiler.driver_mut().add_dialects(|ctx| {
//!     // ctx.register_dialect(MyDialect)?;
//!     // qopt_codegen_x86::Lowerings::install(ctx).register("accel.conv", std::sync::Arc::new(MyConvLowering));
//!     let _ = ctx;
//!     Ok(())
//! });
//! std::process::exit(compiler.run(std::env::args_os()));
//! ```
//!
//! A run parses and verifies the model (as `qrun` does), compiles one
//! function with `qopt_codegen_x86::compile` for the `--target-cpu`
//! (`Target::named`: the code is not run here, so any target may be chosen
//! on any machine), then writes either a relocatable ELF object and its C
//! header (`--emit=obj`) or an assembly listing (`--emit=asm`). Everything
//! is produced in memory first. The object and its header are written as one
//! unit with `write_files_atomically`: both or neither, never a lone header
//! after a failed or interrupted write, and two compiles racing to the same
//! pair leave one compile's object with that same compile's header (the
//! renames are serialized by a lock on the directories; see that function's
//! module). A failing compile writes nothing.
//!
//! Names: the symbols are `<prefix>_run`, `<prefix>_run_with_workspace` and
//! `<prefix>_run_quantized`, the macros `<PREFIX>_...`. The prefix is
//! `--prefix`, else made from the stem of the file the code goes to (`-o
//! model.o` gives `model_run` in `model.h`, `-o lib/resnet-18.o` gives
//! `resnet_18_run`), else, for a listing on standard output, from the
//! model's file name. `-o -` is a usage error with `--emit=obj`: an object
//! comes with its header, and standard output can hold only one of them.
//!
//! Exit codes: 0 success; 1 a bad model, an op the backend cannot compile
//! (one error lists every such op with its location) or an unwritable
//! output; 2 usage errors.

use crate::diagnostics::Reporter;
use crate::run::model::{LoadError, Model};
use crate::{
    refuse_output_over_input, write_file_atomically, write_files_atomically, DiagnosticFormat, Driver,
    EXIT_FAILURE, EXIT_OK, EXIT_USAGE,
};
use clap::error::ErrorKind;
use clap::{CommandFactory as _, Parser, ValueEnum};
use qopt_codegen_x86::{
    c_header, check_prefix, compile, default_prefix, listing, text_image, write_object, AsmSyntax, Lowerings,
    ObjectOptions, Program, Target, TargetCpu,
};
use std::ffi::OsString;
use std::io::Write;
use std::path::{Path, PathBuf};

/// What `--emit` writes.
#[derive(Copy, Clone, PartialEq, Eq, Debug, Default, ValueEnum)]
pub enum EmitKind {
    /// a relocatable x86-64 ELF object (`-o`) and its C header (`--header`).
    #[default]
    Obj,
    /// a readable assembly listing of the same code.
    Asm,
}

/// The syntax of `--emit=asm` (`--asm-syntax`).
#[derive(Copy, Clone, PartialEq, Eq, Debug, Default, ValueEnum)]
pub enum SyntaxArg {
    /// `mov r9, rdi`
    #[default]
    Intel,
    /// `mov %rdi, %r9` (GNU as)
    Att,
}

/// Flags of the compile driver.
#[derive(Parser, Debug)]
#[command(
    version,
    about = "Compile a function of a quantized .qir model to x86-64 code: a relocatable ELF object with a C header, or an assembly listing",
    after_help = "Examples:\n  \
        qcompile model.qir -o model.o                    model.o and model.h (model_run, ...)\n  \
        qcompile model.qir -o lib/m.o --header inc/m.h   the header elsewhere\n  \
        qcompile model.qir -o model.o --prefix net       symbols net_run, ...; macros NET_...\n  \
        qcompile model.qir -o model.o --target-cpu=x86-64-v4   AVX-512 code, for another machine\n  \
        qcompile model.qir --emit=asm                    the listing on standard output\n  \
        qcompile model.qir --emit=asm --asm-syntax=att -o model.s\n\n\
        Link with any C compiler: cc main.c model.o. The header documents the entry points."
)]
pub struct CompileCli {
    /// The model, a `.qir` file.
    #[arg(value_name = "MODEL.qir")]
    pub model: PathBuf,
    /// Output file, written atomically: the object with --emit=obj
    /// (required; written together with its header, both or neither), the
    /// listing with --emit=asm (standard output by default or with `-o -`).
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// The C header to write with the object (default: the output's path with
    /// extension .h).
    #[arg(long, value_name = "FILE.h")]
    pub header: Option<PathBuf>,
    /// What to write.
    #[arg(long, value_name = "KIND", value_enum, default_value_t)]
    pub emit: EmitKind,
    /// The CPU the code is for: `native` (this one), `x86-64-v3` (AVX2 + FMA)
    /// or `x86-64-v4` (AVX-512); the code need not run here.
    #[arg(long, value_name = "CPU", default_value = "native", value_parser = parse_target_cpu)]
    pub target_cpu: TargetCpu,
    /// The function to compile.
    #[arg(long = "function", visible_alias = "func", value_name = "NAME", default_value = "main")]
    pub function: String,
    /// Prefix of the exported symbols and, upper-cased, of the header's macros
    /// (a C identifier; default: the -o file's name without extension, `-o
    /// model.o` giving `model_run`; for a listing on standard output the
    /// model's file name).
    #[arg(long, value_name = "NAME", value_parser = parse_prefix)]
    pub prefix: Option<String>,
    /// Syntax of the --emit=asm listing.
    #[arg(long, value_name = "SYNTAX", value_enum, default_value_t)]
    pub asm_syntax: SyntaxArg,
    /// Accept ops of dialects that are not registered (they still need lowerings).
    #[arg(long)]
    pub allow_unregistered_dialect: bool,
}

fn parse_target_cpu(text: &str) -> Result<TargetCpu, String> {
    text.parse::<TargetCpu>().map_err(|e| e.message)
}

fn parse_prefix(text: &str) -> Result<String, String> {
    check_prefix(text).map(|()| text.to_string()).map_err(|e| e.message)
}

/// A configurable compile driver; see the module docs.
pub struct CompileDriver {
    driver: Driver,
    lowerings: Lowerings,
}

/// Why a run stopped: a message to print, or diagnostics already printed.
enum Failure {
    Message(String),
    Reported,
}

impl From<String> for Failure {
    fn from(message: String) -> Failure {
        Failure::Message(message)
    }
}

/// The files an `--emit=obj` run writes.
struct ObjectFiles<'a> {
    object: &'a Path,
    header: PathBuf,
}

impl CompileDriver {
    /// A driver named `tool` with qopt's dialects, compiling with the
    /// lowerings of each model's context (`Lowerings::of`).
    pub fn new(tool: &'static str) -> CompileDriver {
        CompileDriver::with_parts(Driver::new(tool), Lowerings::empty())
    }

    /// A driver whose models are parsed with `driver`'s dialects and compiled
    /// with the context's lowerings, those of `lowerings` replacing them; the
    /// tool is named after `driver`.
    pub fn with_parts(driver: Driver, lowerings: Lowerings) -> CompileDriver {
        CompileDriver { driver, lowerings }
    }

    /// The tool's name.
    pub fn tool(&self) -> &'static str {
        self.driver.tool()
    }

    /// The wrapped opt driver, to add dialects.
    pub fn driver_mut(&mut self) -> &mut Driver {
        &mut self.driver
    }

    /// The lowerings this driver adds to (or replaces in) the context's.
    pub fn lowerings_mut(&mut self) -> &mut Lowerings {
        &mut self.lowerings
    }

    /// Runs with the process's arguments and exits with the driver's code.
    pub fn main(&self) -> std::process::ExitCode {
        std::process::ExitCode::from(self.run(std::env::args_os()) as u8)
    }

    /// Runs with `args` (the first is the program name) and returns the exit code.
    pub fn run(&self, args: impl IntoIterator<Item = impl Into<OsString> + Clone>) -> i32 {
        crate::run_parsed(self.tool(), args, |cli: &CompileCli, out, err| self.run_cli(cli, out, err))
    }

    /// Runs a parsed command line, writing a listing without `-o` to `out`
    /// and messages to `err`.
    pub fn run_cli(&self, cli: &CompileCli, out: &mut dyn Write, err: &mut dyn Write) -> i32 {
        let files = match self.check_usage(cli) {
            Ok(files) => files,
            Err(message) => {
                let e = CompileCli::command().name(self.tool()).error(ErrorKind::ArgumentConflict, message);
                let _ = write!(err, "{}", e.render());
                return EXIT_USAGE;
            }
        };
        match self.execute(cli, files, out, err) {
            Ok(()) => EXIT_OK,
            Err(Failure::Reported) => EXIT_FAILURE,
            Err(Failure::Message(message)) => {
                let _ = writeln!(err, "{}: error: {message}", self.tool());
                EXIT_FAILURE
            }
        }
    }

    /// The files `--emit=obj` writes, or what is wrong with the flags.
    fn check_usage<'c>(&self, cli: &'c CompileCli) -> Result<Option<ObjectFiles<'c>>, String> {
        match cli.emit {
            EmitKind::Asm => {
                if cli.header.is_some() {
                    return Err("--header goes with --emit=obj; --emit=asm writes only the listing".into());
                }
                Ok(None)
            }
            EmitKind::Obj => {
                let object = cli.output.as_deref().ok_or(
                    "--emit=obj needs -o FILE for the object (the header goes beside it unless --header says otherwise)",
                )?;
                if object == Path::new("-") || cli.header.as_deref() == Some(Path::new("-")) {
                    return Err(
                        "an object and its header cannot go to standard output ('-'); name the object \
                         file, e.g. -o model.o (the header model.h goes beside it), or use --emit=asm to \
                         print the code as a listing"
                            .into(),
                    );
                }
                let header = cli.header.clone().unwrap_or_else(|| object.with_extension("h"));
                if header == object {
                    return Err(format!(
                        "the header would overwrite the object '{}'; name it with --header",
                        object.display()
                    ));
                }
                Ok(Some(ObjectFiles { object, header }))
            }
        }
    }

    fn execute(
        &self,
        cli: &CompileCli,
        files: Option<ObjectFiles<'_>>,
        out: &mut dyn Write,
        err: &mut dyn Write,
    ) -> Result<(), Failure> {
        let outputs = match &files {
            Some(files) => vec![files.object, files.header.as_path()],
            None => cli.output.as_deref().into_iter().collect(),
        };
        for output in outputs {
            refuse_output_over_input(output, &[&cli.model])?;
        }
        let model =
            Model::load(&self.driver, &cli.model, cli.allow_unregistered_dialect).map_err(|e| match e {
                LoadError::Message(message) => Failure::Message(message),
                LoadError::Diagnostics(sources, diagnostics) => {
                    let reporter =
                        Reporter { tool: self.tool(), format: DiagnosticFormat::Human, sources: &sources };
                    reporter.diagnostics(err, &diagnostics);
                    Failure::Reported
                }
            })?;
        let function = cli.function.strip_prefix('@').unwrap_or(&cli.function);
        let target = Target::named(cli.target_cpu);
        let mut lowerings = Lowerings::of(&model.ctx);
        lowerings.extend(&self.lowerings);
        let program = compile(&model.ctx, &model.module, function, &lowerings, &target)
            .map_err(|e| format!("{}: {}", model.name, e.message))?;
        let file_name =
            cli.model.file_name().map_or_else(|| model.name.clone(), |n| n.to_string_lossy().into_owned());
        let generated = |e: qopt_codegen_x86::CodegenError| format!("{}: {}", model.name, e.message);
        let prefix = cli.prefix.clone().unwrap_or_else(|| {
            match cli.output.as_deref().filter(|p| *p != Path::new("-")).and_then(Path::file_name) {
                Some(output) => default_prefix(&output.to_string_lossy()),
                None => default_prefix(&file_name),
            }
        });
        let options = ObjectOptions::new(&prefix, &file_name).map_err(generated)?;
        match files {
            None => {
                let syntax = match cli.asm_syntax {
                    SyntaxArg::Intel => AsmSyntax::Intel,
                    SyntaxArg::Att => AsmSyntax::Att,
                };
                let text = listing(&program, &options, syntax).map_err(generated)?;
                match cli.output.as_deref().filter(|p| *p != Path::new("-")) {
                    Some(path) => write_file_atomically(path, |w| w.write_all(text.as_bytes()))
                        .map_err(|e| format!("cannot write '{}': {e}", path.display()))?,
                    None => out
                        .write_all(text.as_bytes())
                        .and_then(|()| out.flush())
                        .map_err(|e| format!("cannot write standard output: {e}"))?,
                }
                let _ = writeln!(err, "{}: {}: {}", self.tool(), model.name, summary(&program, &options)?);
            }
            Some(files) => {
                let object = write_object(&program, &options).map_err(generated)?;
                let header = c_header(&program, &options).map_err(generated)?;
                write_files_atomically(&[(files.object, &object), (&files.header, header.as_bytes())])
                    .map_err(|e| {
                        format!(
                            "cannot write '{}' and '{}' (neither was written): {e}",
                            files.object.display(),
                            files.header.display()
                        )
                    })?;
                let mut entries =
                    vec![format!("{}_run", options.prefix), format!("{}_run_with_workspace", options.prefix)];
                if program.quantized.is_some() {
                    entries.push(format!("{}_run_quantized", options.prefix));
                }
                let _ = writeln!(
                    err,
                    "{}: {}: {}; wrote {} ({}) and {}",
                    self.tool(),
                    model.name,
                    summary(&program, &options)?,
                    files.object.display(),
                    entries.join(", "),
                    files.header.display()
                );
            }
        }
        Ok(())
    }
}

/// `@main for x86-64-v3: 5 kernels, 1536 bytes of kernel code, 1792 bytes of
/// .text with the entry points, 64 bytes of rodata, 4096-byte arena`: the
/// sizes the header's comment gives.
fn summary(program: &Program, options: &ObjectOptions) -> Result<String, Failure> {
    let text = text_image(program, &options.prefix).map_err(|e| Failure::Message(e.message))?;
    let host_calls = match program.host_ops.len() {
        0 => String::new(),
        n => format!(
            "; {n} op{} run by host calls (link libqopt_host_calls.a: docs/codegen-x86.md §10.5)",
            if n == 1 { "" } else { "s" }
        ),
    };
    Ok(format!(
        "@{} for {}: {} kernel{}, {} bytes of kernel code, {} bytes of .text with the entry points, {} bytes of rodata, {}-byte arena{host_calls}",
        program.function,
        program.target.cpu,
        program.kernels.len(),
        if program.kernels.len() == 1 { "" } else { "s" },
        program.code.len(),
        text.text.len(),
        program.rodata.len(),
        program.arena_bytes
    ))
}
